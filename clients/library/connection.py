"""One WebSocket connection to an owner: request/reply matching and event routing.

``Connection`` owns the socket's reader task. Replies are matched to their
requests by id; ``event`` notifications are routed by session to the
``Inbox`` of every consumer listening on that session (a ``SessionStream``),
or, while nobody listens yet, to a small per-session backlog so that a stream
opened right after ``session.create`` misses nothing. When the socket closes,
every waiting request fails and every inbox ends with ``ConnectionLost``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import WebSocketException

from tether.rpc.envelope import GAP_CLIENT_QUEUE_OVERFLOW, replay_gap
from tether.rpc.errors import InvalidParams, RpcError
from tether.rpc.framing import decode_reply, encode_request
from tether.rpc.protocol import EVENT_METHOD, PROTOCOL

#: the close code of a peer that refused a frame as too big (RFC 6455 §7.4.1)
CLOSE_TOO_BIG = 1009

__all__ = ["Connection", "ConnectionLost", "Inbox", "MAX_BUFFERED_EVENTS",
           "ProtocolMismatchWarning", "warn_on_other_protocol"]

#: events buffered per session stream before the oldest are dropped for a replay
#: (a consumer that stops reading must not grow the client's memory without end)
MAX_BUFFERED_EVENTS = 10_000
#: events of sessions nobody iterates yet, kept so a stream opened just after
#: session.create misses nothing; per session, and sessions at most
MAX_BACKLOG_EVENTS = 1_000
MAX_BACKLOG_SESSIONS = 64


class ConnectionLost(ConnectionError):
    """The connection to the owner closed (owner restarted or stopped, socket dropped)."""


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


class Inbox:
    """One consumer's bounded queue of one session's events on one connection."""

    __slots__ = ("session_id", "items", "_ready", "closed")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.items: deque[dict[str, Any]] = deque()
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, event: dict[str, Any]) -> None:
        if len(self.items) >= MAX_BUFFERED_EVENTS:
            # Drop what is buffered and say so: the stream replays it from the owner,
            # which is the durable copy; keeping it here would only grow memory.
            first = self.items[0]
            self.items.clear()
            # the buffer may start with a gap notice (seq null): it already names
            # the last seq delivered before the hole
            before = (first["payload"]["last_seq"] if first.get("seq") is None
                      else first["seq"] - 1)
            self.items.append(replay_gap(self.session_id, before, GAP_CLIENT_QUEUE_OVERFLOW))
        self.items.append(event)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
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


class Connection:
    """One WebSocket: request/reply matching and event routing to inboxes."""

    def __init__(self, ws: ClientConnection, descriptor: dict[str, Any] | None) -> None:
        self.ws = ws
        self.descriptor = descriptor
        #: notice type → its handler: a notice (seq null) of such a type goes there, not
        #: to the session's streams (``fs.request``, to an editor's adapter)
        self.notices: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.closed = False
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._inboxes: dict[str, list[Inbox]] = {}
        self._backlog: dict[str, deque[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read(), name="tether-client-reader")

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                try:
                    msg = orjson.loads(frame)
                except orjson.JSONDecodeError:
                    continue  # not ours to fix; the owner never sends this
                for item in msg if isinstance(msg, list) else (msg,):
                    if isinstance(item, dict):
                        self._route(item)
        except (WebSocketException, OSError):
            pass
        finally:
            self._lost()

    def _route(self, msg: dict[str, Any]) -> None:
        if msg.get("method") == EVENT_METHOD:
            event = msg.get("params")
            if not (isinstance(event, dict) and isinstance(event.get("session_id"), str)):
                return
            handler = self.notices.get(str(event.get("type"))) if event.get("seq") is None \
                else None
            if handler is not None:
                handler(event)
            else:
                self._deliver(event)
            return
        fut = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _deliver(self, event: dict[str, Any]) -> None:
        sid = event["session_id"]
        inboxes = self._inboxes.get(sid)
        if inboxes:
            for inbox in inboxes:
                inbox.put(event)
            return
        # Nobody iterates this session yet (the reply to session.create has just
        # arrived and its caller has not run). Keep a bounded backlog for them.
        backlog = self._backlog.get(sid)
        if backlog is None:
            if len(self._backlog) >= MAX_BACKLOG_SESSIONS:
                self._backlog.pop(next(iter(self._backlog)))
            backlog = self._backlog[sid] = deque(maxlen=MAX_BACKLOG_EVENTS)
        backlog.append(event)

    def _lost(self) -> None:
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost("connection to the owner closed"))
        self._pending.clear()
        for inboxes in self._inboxes.values():
            for inbox in inboxes:
                inbox.close()

    def listen(self, session_id: str) -> Inbox:
        inbox = Inbox(session_id)
        if self.closed:
            inbox.close()
            return inbox
        for event in self._backlog.pop(session_id, ()):
            inbox.put(event)
        self._inboxes.setdefault(session_id, []).append(inbox)
        return inbox

    def unlisten(self, inbox: Inbox) -> None:
        inboxes = self._inboxes.get(inbox.session_id)
        if inboxes and inbox in inboxes:
            inboxes.remove(inbox)
            if not inboxes:
                del self._inboxes[inbox.session_id]

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
            if self.ws.close_code == CLOSE_TOO_BIG:
                # the owner refused the frame itself: sending it again cannot help
                raise InvalidParams(
                    f"the request is {len(frame)} bytes, more than the owner accepts in "
                    "one message (daemon.max_frame_bytes)",
                    fields=[{"loc": "", "msg": "message too big", "type": "too_long"}],
                ) from None
            if isinstance(exc, ConnectionLost):
                raise
            raise ConnectionLost(f"connection to the owner closed: {exc}") from None
        finally:
            self._pending.pop(rid, None)
        return decode_reply(reply)

    async def close(self) -> None:
        # a connection the owner already closed (its reader ended) has nothing to
        # close: websockets would try to abort a transport that is gone
        if not self.closed:
            await self.ws.close()
        await asyncio.gather(self._reader, return_exceptions=True)
