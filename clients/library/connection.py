"""One WebSocket connection to an owner, on asyncio: request/reply matching and event routing.

``Connection`` owns the socket's reader task. Replies are matched to their
requests by id; ``event`` notifications are routed by session to the
``Inbox`` of every consumer listening on that session (a ``SessionStream``),
or, while nobody listens yet, to a small per-session backlog (routing.py, which
the blocking connection of the one-shot commands shares). When the socket closes,
every waiting request fails and every inbox ends with ``ConnectionLost``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import WebSocketException

from tether.rpc.errors import RpcError
from tether.rpc.framing import decode_reply, encode_request
from tether.rpc.protocol import PROTOCOL

from . import routing
from .routing import MAX_BUFFERED_EVENTS, ConnectionLost, Router, send_failure

__all__ = ["Connection", "ConnectionLost", "Inbox", "MAX_BUFFERED_EVENTS",
           "ProtocolMismatchWarning", "warn_on_other_protocol"]


class ProtocolMismatchWarning(RuntimeWarning):
    """An owner reached over TCP names another protocol than this client's."""


_warned: set[str] = set()


async def warn_on_other_protocol(conn: Connection) -> None:
    """Ask the owner at the other end of a TCP connection its protocol (daemon.json says
    it for the Unix socket) and warn, once per protocol, when it is not this client's:
    its calls and events may not be what this client expects. The connection is used
    either way; a connection lost meanwhile is the caller's next call's to find."""
    import warnings

    try:
        served = (await conn.request("runtime.describe", {})).get("protocol")
    except (ConnectionLost, WebSocketException, OSError, RpcError):
        return
    if served == PROTOCOL or str(served) in _warned:
        return
    _warned.add(str(served))
    warnings.warn(ProtocolMismatchWarning(
        f"the owner speaks protocol {served!r}, this client speaks {PROTOCOL!r}: calls and "
        "events may not be what it expects; install matching versions of tether"), stacklevel=2)


class Inbox(routing.Inbox):
    """One consumer's bounded queue of one session's events on one connection."""

    __slots__ = ("_ready",)

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self._ready = asyncio.Event()

    def _wake(self) -> None:
        self._ready.set()

    async def get(self, timeout: float | None) -> dict[str, Any] | None:
        """The next event; None on timeout; ConnectionLost once closed and empty."""
        while not self.items:
            if self.closed:
                raise ConnectionLost("connection to the owner closed")
            self._ready.clear()
            if timeout is None:
                await self._ready.wait()
            else:
                try:
                    await asyncio.wait_for(self._ready.wait(), timeout)
                except TimeoutError:
                    return None
        return self.items.popleft()


class Connection(Router):
    """One WebSocket: request/reply matching and event routing to inboxes."""

    def __init__(self, ws: ClientConnection, descriptor: dict[str, Any] | None) -> None:
        super().__init__()
        self.ws = ws
        self.descriptor = descriptor
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read(), name="tether-client-reader")

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                try:
                    msg = orjson.loads(frame)
                except orjson.JSONDecodeError:
                    continue  # not ours to fix; the owner never sends this
                self._route_all(msg)
        except (WebSocketException, OSError):
            pass
        finally:
            self._lost()

    def inbox(self, session_id: str) -> Inbox:
        return Inbox(session_id)

    def _answer(self, msg: dict[str, Any]) -> None:
        fut = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _lost(self) -> None:
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost("connection to the owner closed"))
        self._pending.clear()
        self._close_inboxes()

    async def request(self, method: str, params: dict[str, Any],
                      timeout: float | None = None) -> Any:
        if self.closed:
            raise ConnectionLost("connection to the owner closed")
        rid = next(self._ids)
        # encoded before the reply is awaited: params that cannot be JSON (text that
        # is not valid Unicode) raise here and leave no orphaned future behind
        frame = encode_request(rid, method, params)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self.ws.send(frame, text=True)
            reply = await (fut if timeout is None else asyncio.wait_for(fut, timeout))
        except (WebSocketException, OSError, ConnectionLost) as exc:
            raise send_failure(exc, self.ws.close_code, frame) from None
        finally:
            self._pending.pop(rid, None)
        return decode_reply(reply)

    async def close(self) -> None:
        # a connection the owner already closed (its reader ended) has nothing to
        # close: websockets would try to abort a transport that is gone
        if not self.closed:
            await self.ws.close()
        await asyncio.gather(self._reader, return_exceptions=True)
