"""What one connection to an owner receives, routed: replies to the request waiting
for them, events to the inboxes of the sessions' streams.

Shared by the asyncio connection (connection.py) and the blocking one of the
one-shot commands (blocking.py): they differ only in how a frame arrives and how a
waiting consumer is woken. ``event`` notifications go to the ``Inbox`` of every
consumer listening on that session, or, while nobody listens yet, to a small
per-session backlog, so that a stream opened right after ``session.create`` misses
nothing. When the connection is lost every inbox ends with ``ConnectionLost``.
No asyncio, no websockets, no JSON library here.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from tether.rpc.envelope import GAP_CLIENT_QUEUE_OVERFLOW, replay_gap
from tether.rpc.errors import InvalidParams
from tether.rpc.protocol import EVENT_METHOD

__all__ = ["CLOSE_TOO_BIG", "ConnectionLost", "Inbox", "MAX_BUFFERED_EVENTS", "Router",
           "send_failure", "too_big"]

#: the close code of a peer that refused a frame as too big (RFC 6455 §7.4.1)
CLOSE_TOO_BIG = 1009

#: events buffered per session stream before the oldest are dropped for a replay
#: (a consumer that stops reading must not grow the client's memory without end)
MAX_BUFFERED_EVENTS = 10_000
#: events of sessions nobody iterates yet, kept so a stream opened just after
#: session.create misses nothing; per session, and sessions at most
MAX_BACKLOG_EVENTS = 1_000
MAX_BACKLOG_SESSIONS = 64


class ConnectionLost(ConnectionError):
    """The connection to the owner closed (owner restarted or stopped, socket dropped)."""


def send_failure(exc: BaseException, close_code: int | None,
                 frame: str | bytes) -> Exception:
    """What a request whose connection failed under it raises: ``too_big`` when the
    owner closed on the frame itself (1009: sending it again cannot help), else
    ``ConnectionLost``, which a caller may answer by resubmitting."""
    if close_code == CLOSE_TOO_BIG:
        return too_big(frame)
    if isinstance(exc, ConnectionLost):
        return exc
    return ConnectionLost(f"connection to the owner closed: {exc}")


def too_big(frame: str | bytes) -> InvalidParams:
    """What a request gets when the owner closed the connection on it as too big (1009):
    the frame itself was refused, so sending it again cannot help."""
    return InvalidParams(
        f"the request is {len(frame)} bytes, more than the owner accepts in one message "
        "(daemon.max_frame_bytes)",
        fields=[{"loc": "", "msg": "message too big", "type": "too_long"}])


class Inbox:
    """One consumer's bounded queue of one session's events on one connection;
    a subclass says how a waiting consumer is woken (``_wake``) and waits (``get``)."""

    __slots__ = ("session_id", "items", "closed")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.items: deque[dict[str, Any]] = deque()
        self.closed = False

    def _wake(self) -> None:
        pass

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
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def get(self, timeout: float | None) -> dict[str, Any] | None:
        """The next event; None on timeout; ConnectionLost once closed and empty."""
        raise NotImplementedError


class Router:
    """Request ids, and the routing of replies and events; ``_answer`` hands a reply
    to the request waiting for it, ``inbox`` makes a consumer's inbox."""

    #: the owner's daemon.json as read when this connection was made (None over TCP)
    descriptor: dict[str, Any] | None

    def __init__(self) -> None:
        #: notice type → its handler: a notice (seq null) of such a type goes there, not
        #: to the session's streams (``fs.request``, to an editor's adapter)
        self.notices: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.closed = False
        self._ids = itertools.count(1)
        self._inboxes: dict[str, list[Inbox]] = {}
        self._backlog: dict[str, deque[dict[str, Any]]] = {}

    def inbox(self, session_id: str) -> Inbox:
        raise NotImplementedError

    async def request(self, method: str, params: dict[str, Any],
                      timeout: float | None = None) -> Any:
        """The result of one call; the ``RpcError`` of an error reply; ``ConnectionLost``."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    def _answer(self, msg: dict[str, Any]) -> None:
        raise NotImplementedError

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
        self._answer(msg)

    def _route_all(self, msg: Any) -> None:
        """One parsed frame: a message, or a batch of them."""
        for item in msg if isinstance(msg, list) else (msg,):
            if isinstance(item, dict):
                self._route(item)

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

    def _close_inboxes(self) -> None:
        self.closed = True
        for inboxes in self._inboxes.values():
            for inbox in inboxes:
                inbox.close()

    def listen(self, session_id: str) -> Inbox:
        inbox = self.inbox(session_id)
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
