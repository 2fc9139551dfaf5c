"""``SessionStream``: one session's events in order, each exactly once, across reconnects."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from tether.rpc.envelope import REPLAY_GAP

from .routing import ConnectionLost, Inbox, Router

if TYPE_CHECKING:
    Connection = Router  # the asyncio one (connection.py) or the blocking one (blocking.py)

__all__ = ["SessionStream", "StreamSource"]


class StreamSource(Protocol):
    """What a stream needs of its client (``TetherClient`` is one)."""

    @property
    def connection(self) -> Connection | None: ...

    async def resilient(self, operation: Callable[[], Awaitable[Any]],
                        *, deadline: float | None = None) -> Any: ...

    async def reconnect(self, failed: Connection | None = None) -> None: ...

    def all_events_since(self, session_id: str,
                         after_seq: int = 0) -> AsyncIterator[dict[str, Any]]: ...


class SessionStream:
    """One session's events in ``seq`` order, each exactly once, across reconnects.

    ``open()`` subscribes (``session.resume``) and returns the snapshot; after
    that, ``get()`` / ``async for`` yield the events after the snapshot (or
    after ``after_seq``). On a lost connection a resilient stream reconnects
    and resumes with ``after_seq`` = the last seq it yielded; on a
    ``session.replay_gap`` or a hole in the seqs it fetches the missing events
    with ``session.events.since``. ``attachments`` counts subscriptions made,
    so a caller can notice that a reconnect happened.
    """

    def __init__(self, client: StreamSource, session_id: str, *, after_seq: int | None = None,
                 resilient: bool = True) -> None:
        self.client = client
        self.session_id = session_id
        self.last_seq = after_seq
        self.resilient = resilient
        self.snapshot: dict[str, Any] | None = None
        self.attachments = 0
        #: run after every subscription made (a reconnect's too), on its connection
        self.on_attach: Callable[[], Awaitable[None]] | None = None
        self._inbox: Inbox | None = None
        self._conn: Connection | None = None
        self._ready: deque[dict[str, Any]] = deque()

    async def open(self) -> dict[str, Any]:
        """Subscribe if not subscribed yet; the snapshot of the latest subscription."""
        if self._inbox is None or self._inbox.closed:
            await self._attach()
        assert self.snapshot is not None
        return self.snapshot

    async def _attach(self) -> None:
        conn = self.client.connection
        if conn is None or conn.closed:
            raise ConnectionLost("not connected")
        inbox = conn.listen(self.session_id)  # before resume: nothing can slip past
        try:
            snap = await conn.request("session.resume", {"session_id": self.session_id} | (
                {} if self.last_seq is None else {"after_seq": self.last_seq}))
        except BaseException:
            conn.unlisten(inbox)
            raise
        self._detach_inbox()
        self._inbox, self._conn = inbox, conn
        self.snapshot = snap
        self.attachments += 1
        if self.on_attach is not None:
            await self.on_attach()
        if self.last_seq is None:
            self.last_seq = snap["last_seq"]
        for event in snap.get("events") or ():
            self._accept(event)
        if self.last_seq < snap["last_seq"]:
            # the snapshot's events are one page (about a MiB): fetch the rest now,
            # not when the next live event shows the hole (an idle session has none)
            await self.catch_up()

    def _detach_inbox(self) -> None:
        if self._inbox is not None and self._conn is not None:
            self._conn.unlisten(self._inbox)
        self._inbox = self._conn = None

    def _accept(self, event: dict[str, Any]) -> bool:
        """Buffer ``event`` if it is the next seq; False if it leaves a hole."""
        assert self.last_seq is not None
        seq = event.get("seq")
        if not isinstance(seq, int) or seq <= self.last_seq:
            return True  # a duplicate (snapshot and stream overlap): already had it
        if seq != self.last_seq + 1:
            return False
        self.last_seq = seq
        self._ready.append(event)
        return True

    async def catch_up(self) -> None:
        """Fetch every stored event after ``last_seq`` into the buffer."""
        if self.last_seq is None:
            await self.open()
            return
        async for event in self.client.all_events_since(self.session_id, self.last_seq):
            self._accept(event)

    def take_buffered(self) -> dict[str, Any] | None:
        """The next event already received, without waiting (None if there is none)."""
        return self._ready.popleft() if self._ready else None

    async def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next event; None if ``timeout`` seconds pass with none.

        Raises ``ConnectionLost`` (non-resilient stream) or ``OwnerUnavailable``
        (the owner stayed away for the client's ``retry_seconds``).
        """
        while not self._ready:
            if self._inbox is None:
                await self._reattach()
                continue
            try:
                event = await self._inbox.get(timeout)
            except ConnectionLost:
                if not self.resilient:
                    raise
                await self._reattach()
                continue
            if event is None:
                return None
            if event.get("type") == REPLAY_GAP:
                # the owner unsubscribed us (we were too slow): resubscribe from where
                # we are; the resume snapshot carries what we missed
                await self.client.resilient(self._attach)
            elif not self._accept(event):
                await self.client.resilient(self.catch_up)
                self._accept(event)
        return self._ready.popleft()

    async def _reattach(self) -> None:
        failed = self._conn
        self._detach_inbox()
        await self.client.reconnect(failed)
        await self.client.resilient(self._attach)

    def __aiter__(self) -> SessionStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._inbox is None and self.snapshot is None:
            await self.client.resilient(self.open)
        event = await self.get()
        assert event is not None
        return event

    def close(self) -> None:
        """Stop buffering events (the owner keeps sending until session.detach)."""
        self._detach_inbox()
