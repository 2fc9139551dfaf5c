"""The WebSocket transport: the owner's only module that imports the websockets server.

Two listeners share one connection handler: the Unix socket ``daemon.sock``
(mode 0600, peer uid checked with SO_PEERCRED) and an optional loopback TCP
listener that requires a bearer token and checks the Origin of browsers. On
both, the endpoint is ``/``; a client may offer the ``tether.v1`` subprotocol.
Each request's ``Call`` carries the connection's peer (peers.py), by which the
dispatcher refuses the agent's own processes a few methods (``forbidden``).

Per connection: one receive loop, one task per request, and the connection's
``Viewer`` outbox, so replies and events leave in the order they were queued
and a slow socket only backs up its own outbox. Events are bounded per viewer
(events.py); requests are bounded by backpressure: with MAX_IN_FLIGHT requests
running or waiting for their replies to leave, the connection is not read until
one does.

The TCP port also serves HTTP (daemon/http/): a WebSocket upgrade goes on as
here, any other request goes to the HTTP protocol the owner gave ``start_tcp``.

Sending has a fast path. While nothing is queued ahead and the peer keeps up
(the transport holds at most ``WRITE_LIMIT`` unsent bytes), a frame is written
to the socket at once, already framed: server frames are unmasked (RFC 6455
§5.1), so an event's frame is built once and the same bytes go to every viewer.
Otherwise it waits in the outbox, and the connection's sender task sends it
through websockets, which waits for the peer to drain (flow control). Both
paths write whole frames, and only while the connection is OPEN, so they
interleave safely with websockets' own control frames (ping, pong, close).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve, unix_serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.typing import Subprotocol

from tether.rpc import protocol
from tether.rpc.dispatch import Dispatcher

from ..http.port import HeadRouter
from ..ledger.events import EventBus, Viewer
from .peers import Peer, tcp_peer, unix_peer

__all__ = ["Call", "Listeners", "SUBPROTOCOL", "TOKEN_PREFIX", "parse_hostport", "tcp_address",
           "text_frame", "ws_options"]

log = logging.getLogger("tether.server")

SUBPROTOCOL = Subprotocol(protocol.SUBPROTOCOL)
TOKEN_PREFIX = protocol.TOKEN_PREFIX
#: requests a connection may have running or with unsent replies; at this bound
#: the connection's frames are not read until a reply leaves (backpressure)
MAX_IN_FLIGHT = 64
#: unsent bytes a connection's transport may hold before frames queue in its
#: outbox instead (websockets' own default write limit)
WRITE_LIMIT = 32 * 1024
#: frames websockets reads ahead of the receive loop; while the loop is held back
#: (every request slot taken) this, times ``max_frame_bytes``, is what a
#: connection can make the owner buffer beyond its 64 requests
MAX_QUEUE = 8


@dataclass
class Call:
    """What a method handler learns of the request's connection."""

    viewer: Viewer
    transport: str  # "unix" | "tcp"
    #: the process at the other end (peers.py: the agent's own are refused some methods)
    peer: Peer | None = None
    #: run once the reply is queued (a snapshot's subscription starts flowing then)
    after_reply: list[Callable[[], None]] = field(default_factory=list)


def ws_options(max_frame_bytes: int) -> dict[str, Any]:
    """The websockets options of every listener (and of the bench's echo baseline)."""
    # no compression: frames are small JSON, and deflate costs more CPU than it saves
    return {"max_size": max_frame_bytes, "compression": None, "ping_interval": 20,
            "ping_timeout": 20, "close_timeout": 5, "max_queue": MAX_QUEUE}


def text_frame(payload: bytes) -> bytes:
    """``payload`` as one unmasked final text frame (RFC 6455 §5.2), as websockets frames it."""
    n = len(payload)
    head = bytes((0x81, n)) if n < 126 else struct.pack("!BBH", 0x81, 126, n) if n < 65536 \
        else struct.pack("!BBQ", 0x81, 127, n)
    return head + payload


def parse_hostport(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT (port 0-65535), got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def tcp_address(value: str, *, allow_remote: bool) -> tuple[str, int]:
    """``--tcp HOST:PORT`` checked before anything listens: loopback only unless
    ``daemon.tcp_allow_remote``. Raises ValueError with a message for the user."""
    host, port = parse_hostport(value)
    if not _is_loopback(host) and not allow_remote:
        raise ValueError(f"refusing to listen on {host}: not a loopback address "
                         "(set daemon.tcp_allow_remote: true in config.yaml to allow it)")
    return host, port


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _peer(conn: ServerConnection, transport: str) -> tuple[Peer, int | None]:
    """The connection's peer, and (Unix socket) its uid."""
    if transport == "unix":
        return unix_peer(conn.transport.get_extra_info("socket"))
    return tcp_peer(conn.transport.get_extra_info("sockname"),
                    conn.transport.get_extra_info("peername")), None


def own_origins(host: str, port: int) -> frozenset[str]:
    """The origins of pages the TCP listener itself serves (its viewer): allowed by
    default. Only names of the bound address, never whatever Host a request claims
    (a DNS-rebinding page would claim ours)."""
    names = {host}
    if _is_loopback(host.strip("[]")):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    return frozenset(f"http://{name}:{port}" for name in names)


class Listeners:
    """Owns the servers and every open connection."""

    def __init__(self, dispatcher: Dispatcher, bus: EventBus, *, max_connections: int,
                 max_frame_bytes: int, viewer_queue: int, max_subscriptions: int,
                 token_check: Callable[[str], Awaitable[str | None]] | None = None,
                 allowed_origins: tuple[str, ...] = ()) -> None:
        self.dispatcher = dispatcher
        self.bus = bus
        self.max_connections = max_connections
        self.max_frame_bytes = max_frame_bytes
        self.viewer_queue = viewer_queue
        self.max_subscriptions = max_subscriptions
        self.token_check = token_check
        self.allowed_origins = allowed_origins
        #: the TCP listener's own origins (its viewer page): always allowed
        self.own_origins: frozenset[str] = frozenset()
        #: TCP connections by the id of the token they were let in with
        self._by_token: dict[ServerConnection, str] = {}
        self.connections: set[ServerConnection] = set()
        self._servers: list[Server] = []
        self.tcp_url: str | None = None
        # the last frame built: an event goes to every viewer back to back
        self._last_framed: tuple[bytes, bytes] = (b"", b"")

    # -- listeners --------------------------------------------------------

    async def start_unix(self, path: Path) -> None:
        try:
            path.unlink()  # a stale socket of a crashed owner; we hold the lock
        except FileNotFoundError:
            pass
        old = os.umask(0o177)  # the socket is born 0600: no window where others could connect
        try:
            server = await unix_serve(
                lambda c: self._handle(c, "unix"), str(path),
                process_request=self._check_unix, select_subprotocol=self._subprotocol,
                **self._ws_options())
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self._servers.append(server)

    async def start_tcp(self, host: str, port: int, *, allow_remote: bool,
                        http: Callable[[], asyncio.Protocol] | None = None) -> str:
        """Listen on TCP; ``http()`` serves a request that is not a WebSocket upgrade."""
        tcp_address(f"{host}:{port}", allow_remote=allow_remote)
        extra: dict[str, Any] = {}
        if http is not None:
            def shared(protocol: Any, server: Server, **kwargs: Any) -> ServerConnection:
                return _SharedPort(http, protocol, server, **kwargs)
            extra["create_connection"] = shared
        server = await serve(
            lambda c: self._handle(c, "tcp"), host, port,
            process_request=self._check_tcp, select_subprotocol=self._subprotocol,
            **self._ws_options(), **extra)
        sock = next(iter(server.sockets))
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.tcp_url = f"ws://{shown}:{bound[1]}/"
        self.own_origins = own_origins(shown, bound[1])
        self._servers.append(server)
        return self.tcp_url

    def _ws_options(self) -> dict[str, Any]:
        return ws_options(self.max_frame_bytes)

    async def close(self, timeout: float = 3.0) -> None:
        """Close every connection with 1001 (going away) and stop listening.

        A peer that stopped reading cannot take the close frame; after
        ``timeout`` its connection is aborted so shutdown stays bounded.
        """
        for server in self._servers:
            server.close(close_connections=True)
        waits = [asyncio.ensure_future(server.wait_closed()) for server in self._servers]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout)
            if pending:
                for conn in list(self.connections):
                    conn.transport.abort()
                await asyncio.wait(pending, timeout=timeout)
        self._servers.clear()

    # -- handshake checks -------------------------------------------------

    def _refuse(self, conn: ServerConnection, status: HTTPStatus, reason: str) -> Response:
        return conn.respond(status, reason + "\n")

    def _common(self, conn: ServerConnection, request: Request) -> Response | None:
        if request.path.split("?", 1)[0] != "/":
            return self._refuse(conn, HTTPStatus.NOT_FOUND, "not_found: the endpoint is /")
        if len(self.connections) >= self.max_connections:
            return self._refuse(conn, HTTPStatus.SERVICE_UNAVAILABLE,
                                f"overloaded: {self.max_connections} connections already open")
        return None

    def _check_unix(self, conn: ServerConnection, request: Request) -> Response | None:
        _, uid = _peer(conn, "unix")
        if uid is not None and uid != os.getuid():
            log.warning("refused a Unix-socket peer with uid %s", uid)
            return self._refuse(conn, HTTPStatus.FORBIDDEN, "forbidden: peer is another user")
        return self._common(conn, request)

    async def _check_tcp(self, conn: ServerConnection, request: Request) -> Response | None:
        origin = request.headers.get("Origin")
        if (origin is not None and origin not in self.allowed_origins
                and origin not in self.own_origins):
            return self._refuse(conn, HTTPStatus.FORBIDDEN,
                                f"forbidden: origin {origin} is not allowed")
        token = None
        auth = request.headers.get("Authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        else:
            offered = request.headers.get("Sec-WebSocket-Protocol", "")
            for proto in (p.strip() for p in offered.split(",")):
                if proto.startswith(TOKEN_PREFIX):
                    # the first, as _subprotocol echoes the first: the token checked is
                    # the one the client is told it was accepted with
                    token = proto[len(TOKEN_PREFIX):]
                    break
        token_id = await self.token_check(token) if token and self.token_check else None
        if token_id is None:
            return self._refuse(conn, HTTPStatus.UNAUTHORIZED,
                                "unauthorized: a valid bearer token is required "
                                "(mint one with `tether token create`)")
        refused = self._common(conn, request)
        if refused is None:
            self._by_token[conn] = token_id
        return refused

    def drop_token(self, token_id: str, why: str = "revoked") -> int:
        """Close (1008, "token revoked" or "token expired") every connection let in
        with ``token_id``; how many there were."""
        conns = [c for c, t in self._by_token.items() if t == token_id]
        for conn in conns:
            self._by_token.pop(conn, None)
            asyncio.ensure_future(conn.close(1008, f"token {why}"))
        return len(conns)

    @staticmethod
    def _subprotocol(conn: ServerConnection, offered: Sequence[Subprotocol]
                     ) -> Subprotocol | None:
        if SUBPROTOCOL in offered:
            return SUBPROTOCOL
        # a browser that offered only its token must get one of its offers back
        for proto in offered:
            if proto.startswith(TOKEN_PREFIX):
                return proto
        return None

    # -- one connection ---------------------------------------------------

    def _framed(self, payload: bytes) -> bytes:
        """The text frame carrying ``payload``, built once per payload."""
        last, framed = self._last_framed
        if payload is not last:
            framed = text_frame(payload)
            self._last_framed = (payload, framed)
        return framed

    def _fast_writer(self, conn: ServerConnection) -> Callable[[bytes], bool]:
        sock = conn.transport

        def write_now(payload: bytes) -> bool:
            if (conn.protocol.state is not State.OPEN or sock.is_closing()
                    or sock.get_write_buffer_size() > WRITE_LIMIT):
                return False  # queue it: the sender task waits for the peer
            sock.write(self._framed(payload))
            return True

        return write_now

    async def _handle(self, conn: ServerConnection, transport: str) -> None:
        self.connections.add(conn)
        peer, _ = _peer(conn, transport)
        write_now = self._fast_writer(conn)
        viewer = Viewer(self.viewer_queue, self.max_subscriptions, write_now)
        sender = asyncio.create_task(self._send_loop(conn, viewer, write_now),
                                     name="ws-sender")
        in_flight: set[asyncio.Task[None]] = set()

        def done(task: asyncio.Task[None]) -> None:
            in_flight.discard(task)
            viewer.made_room()

        try:
            async for frame in conn:
                # Backpressure (docs/decisions.md): a request holds a slot from the
                # moment it is read until its reply is taken by the sender. With every
                # slot held, stop reading: websockets then stops reading the socket and
                # the peer's writes stall, instead of its replies piling up here.
                while len(in_flight) + viewer.replies >= MAX_IN_FLIGHT and not viewer.closed:
                    await viewer.wait_room()
                task = asyncio.create_task(self._request(frame, viewer, transport, peer))
                in_flight.add(task)
                task.add_done_callback(done)
        except ConnectionClosed:
            pass
        finally:
            self.connections.discard(conn)
            self._by_token.pop(conn, None)
            self.bus.drop_viewer(viewer)
            for task in in_flight:
                task.cancel()
            viewer.close()
            sender.cancel()

    async def _request(self, frame: str | bytes, viewer: Viewer, transport: str,
                       peer: Peer | None = None) -> None:
        call = Call(viewer=viewer, transport=transport, peer=peer)
        if isinstance(frame, bytes):
            reply = self.dispatcher.refuse_binary(frame)  # text frames only
        else:
            reply = await self.dispatcher.handle(frame, call)
        if reply is not None:
            viewer.put_reply(reply)
        for hook in call.after_reply:
            hook()

    @staticmethod
    async def _send_loop(conn: ServerConnection, viewer: Viewer,
                         write_now: Callable[[bytes], bool]) -> None:
        """Send what the fast path had to queue, in order, at the peer's pace."""
        try:
            while not viewer.closed:
                frame = await viewer.next_frame()
                if viewer.closed:
                    return
                # taking a frame and writing it happen in one step, with no await
                # in between: a fast-path write can never overtake it
                if not write_now(frame):
                    await conn.send(frame, text=True)  # writes, then drains
        except ConnectionClosed:
            viewer.close()  # wakes a receive loop held back by wait_room


class _SharedPort(ServerConnection):
    """A TCP connection routed once its request head is in (http/port.py decides):
    an upgrade goes on as this websockets connection, anything else to ``http()``.
    Until then the transport's callbacks are the instance overrides below; routing
    removes them, so a WebSocket connection pays nothing per frame."""

    def __init__(self, http: Callable[[], asyncio.Protocol], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._router = HeadRouter(http, self._to_websocket)
        for name in ("connection_made", "data_received", "eof_received", "connection_lost"):
            setattr(self, name, getattr(self._router, name))

    def _to_websocket(self, transport: asyncio.Transport, head: bytes) -> None:
        for name in ("connection_made", "data_received", "eof_received", "connection_lost"):
            delattr(self, name)
        self.connection_made(transport)
        self.data_received(head)
