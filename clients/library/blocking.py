"""The client of the one-shot commands (``tether chat`` finite, ``status``, ``sessions``):
``TetherClient`` on a blocking Unix socket, without an event loop.

A one-shot command's start-up is mostly imports, and asyncio, websockets (which
loads importlib.metadata) and orjson are most of them. This client imports none
of them: ``BlockingConnection`` speaks WebSocket (RFC 6455, the client side, no
extension) over the home's Unix socket with the standard library, and JSON with
``json``. Everything above the connection is the async client's own code, run by
``run_sync``: ``TetherClient``'s calls, the resilient submit (the same input_id
after a reconnect), ``SessionStream``'s order and replay, the CLI's chat and
status. Their coroutines never suspend here: every wait is a blocking read of the
socket (or ``time.sleep``), so ``run_sync`` completes each in one step. Starting
an owner that is not running is the one part that still runs on asyncio
(discovery.py), once. Over TCP (``--url``) commands use the asyncio client.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import time
from collections.abc import Coroutine
from typing import Any

from tether.rpc.home import HomeLayout
from tether.rpc.jsonrpc import reply_result, request_object

from . import routing
from .client import TetherClient
from .discovery import live_descriptor
from .nodes import MAX_FRAME_BYTES
from .routing import ConnectionLost, Router, send_failure

__all__ = ["BlockingClient", "BlockingConnection", "run_sync"]

#: RFC 6455 §1.3: what the server appends to the key before hashing it
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_CONT, _TEXT, _BINARY, _CLOSE, _PING, _PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: how long opening the connection, and closing it, may take
OPEN_TIMEOUT = 10.0
CLOSE_TIMEOUT = 2.0


def run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends (this module's client's) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a blocking client's coroutine waited on an event loop")


def _dumps(obj: Any) -> bytes:
    # compact and UTF-8, as orjson writes frames; text that is not valid Unicode
    # raises UnicodeEncodeError (orjson: TypeError) before anything is sent
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class _Socket:
    """One WebSocket on a connected stream socket: frames in and out, blocking."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.parts: list[bytes] = []  # a fragmented message's frames so far
        self.close_code: int | None = None
        self.done = False

    def handshake(self, host: str = "localhost") -> None:
        key = base64.b64encode(os.urandom(16))
        self.sock.sendall(b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\n"
                          b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                          b"Sec-WebSocket-Key: " + key + b"\r\n"
                          b"Sec-WebSocket-Version: 13\r\n\r\n")
        while b"\r\n\r\n" not in self.buf:
            self._fill(65536)
        head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        self.buf[:] = rest
        lines = head.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in lines[1:])}
        if len(status) < 2 or status[1] != "101":
            raise ConnectionError(f"the owner refused the WebSocket handshake: {lines[0]}")
        accept = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != accept:
            raise ConnectionError("the owner's handshake answer is not a WebSocket's")

    def _fill(self, n: int) -> None:
        chunk = self.sock.recv(max(n, 65536))
        if not chunk:
            raise ConnectionLost("connection to the owner closed")
        self.buf += chunk

    def send(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytearray((0x80 | opcode,))
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head += bytes((0x80 | 126,)) + n.to_bytes(2, "big")
        else:
            head += bytes((0x80 | 127,)) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        repeated = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(
            n, "big")
        self.sock.sendall(bytes(head) + mask + masked)

    def _frame(self) -> tuple[bool, int, bytes]:
        """(fin, opcode, payload) of the next frame; the buffer keeps a partial one."""
        while len(self.buf) < 2:
            self._fill(2)
        fin, opcode, n = bool(self.buf[0] & 0x80), self.buf[0] & 0x0F, self.buf[1] & 0x7F
        if self.buf[1] & 0x80 or self.buf[0] & 0x70:
            raise ConnectionLost("the owner sent a masked or extended frame")
        start = 2
        if n >= 126:
            start = 4 if n == 126 else 10
            while len(self.buf) < start:
                self._fill(start)
            n = int.from_bytes(self.buf[2:start], "big")
        if n > MAX_FRAME_BYTES:
            raise ConnectionLost(f"the owner sent a frame of {n} bytes")
        while len(self.buf) < start + n:
            self._fill(start + n - len(self.buf))
        payload = bytes(self.buf[start:start + n])
        del self.buf[:start + n]
        return fin, opcode, payload

    def message(self) -> bytes:
        """The next data message, answering pings; ConnectionLost at a close."""
        while True:
            fin, opcode, payload = self._frame()
            if opcode == _PING:
                self.send(_PONG, payload)
            elif opcode == _CLOSE:
                self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 \
                    else 1005
                self._close_back(payload[:2])
                raise ConnectionLost("connection to the owner closed")
            elif opcode in (_TEXT, _BINARY, _CONT):
                self.parts.append(payload)
                if fin:
                    message = b"".join(self.parts)
                    self.parts.clear()
                    return message

    def _close_back(self, code: bytes) -> None:
        try:
            self.send(_CLOSE, code)
        except OSError:
            pass

    def close(self) -> None:
        """The closing handshake (code 1000) unless the owner began one, then the socket
        closed; again: nothing."""
        if self.done:
            return
        self.done = True
        if self.close_code is None:
            try:
                self.sock.settimeout(CLOSE_TIMEOUT)
                self.send(_CLOSE, (1000).to_bytes(2, "big"))
                while True:
                    self.message()
            except (OSError, ConnectionLost):
                pass
        self.sock.close()


class BlockingInbox(routing.Inbox):
    """An inbox filled by reading the connection while its consumer waits."""

    __slots__ = ("conn",)

    def __init__(self, session_id: str, conn: BlockingConnection) -> None:
        super().__init__(session_id)
        self.conn = conn

    async def get(self, timeout: float | None) -> dict[str, Any] | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.items:
            if self.closed:
                raise ConnectionLost("connection to the owner closed")
            if not self.conn._read_one(deadline):
                return None
        return self.items.popleft()


class BlockingConnection(Router):
    """One WebSocket to the home's owner on its Unix socket, read only when a request
    or a consumer waits: request/reply matching and event routing (routing.py)."""

    def __init__(self, path: str, descriptor: dict[str, Any] | None) -> None:
        super().__init__()
        self.descriptor = descriptor
        self._waiting: set[int] = set()
        self._replies: dict[int, dict[str, Any]] = {}
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(OPEN_TIMEOUT)
        try:
            sock.connect(path)
            self.ws = _Socket(sock)
            self.ws.handshake()
        except BaseException:
            sock.close()
            raise

    def inbox(self, session_id: str) -> routing.Inbox:
        return BlockingInbox(session_id, self)

    def _answer(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        if rid in self._waiting:
            self._replies[rid] = msg

    def _read_one(self, deadline: float | None) -> bool:
        """Read and route one message; False when ``deadline`` passed first."""
        if self.closed:
            raise ConnectionLost("connection to the owner closed")
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        self.ws.sock.settimeout(left)
        try:
            frame = self.ws.message()
        except TimeoutError:
            return False
        except (OSError, ConnectionLost) as exc:
            self._lost()
            if isinstance(exc, ConnectionLost):
                raise
            raise ConnectionLost(f"connection to the owner closed: {exc}") from None
        try:
            msg = json.loads(frame)
        except ValueError:
            return True  # not ours to fix; the owner never sends this
        self._route_all(msg)
        return True

    async def request(self, method: str, params: dict[str, Any],
                      timeout: float | None = None) -> Any:
        if self.closed:
            raise ConnectionLost("connection to the owner closed")
        rid = next(self._ids)
        frame = _dumps(request_object(rid, method, params))
        deadline = None if timeout is None else time.monotonic() + timeout
        self._waiting.add(rid)
        try:
            self.ws.sock.settimeout(OPEN_TIMEOUT)
            self.ws.send(_TEXT, frame)
            while rid not in self._replies:
                if not self._read_one(deadline):
                    raise TimeoutError(f"no reply to {method} within {timeout:g} s")
        except (OSError, ConnectionLost) as exc:
            self._lost()
            raise send_failure(exc, self.ws.close_code, frame) from None
        finally:
            self._waiting.discard(rid)
        return reply_result(self._replies.pop(rid))

    def _lost(self) -> None:
        self._close_inboxes()
        self.ws.done = True
        self.ws.sock.close()

    async def close(self) -> None:
        self._close_inboxes()
        self.ws.close()


class BlockingClient(TetherClient):
    """``TetherClient`` on ``BlockingConnection``: every coroutine of it is run by
    ``run_sync``. Connect with ``run_sync(BlockingClient.connect(home, ...))``."""

    def _lock(self) -> Any:
        return _NoLock()

    async def _pause(self, seconds: float) -> None:
        time.sleep(seconds)

    async def _owner(self, budget: float, autostart: bool) -> dict[str, Any]:
        assert self.home is not None
        desc = live_descriptor(self.home)
        if desc is not None:
            return desc
        import asyncio

        return asyncio.run(super()._owner(budget, autostart))

    async def _dial_home(self, desc: dict[str, Any]) -> Router:
        assert self.home is not None
        return BlockingConnection(desc.get("socket") or str(HomeLayout(self.home).socket),
                                  desc)


class _NoLock:
    """One thread, no event loop: nothing to wait for."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None
