"""Fan-out of committed events to viewers (journal.py writes them).

Each connection owns one ``Viewer``: an outbox of encoded frames drained by the
connection's sender task. Event frames are bounded per viewer; a viewer whose
queue is full is unsubscribed from that session and told so with a
``session.replay_gap`` frame carrying the last seq it was sent, so a slow
viewer never slows a turn or its neighbours, and catches up by replay.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tether.rpc.envelope import GAP_VIEWER_QUEUE_OVERFLOW, event_envelope, replay_gap
from tether.rpc.framing import encode_event

__all__ = ["EventRecord", "EventBus", "Viewer"]


@dataclass(slots=True)
class EventRecord:
    session_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    admission_id: str | None = None

    def wire(self) -> dict[str, Any]:
        return event_envelope(self.session_id, self.seq, self.type, self.payload,
                              self.admission_id)


class Viewer:
    """One connection's outbound frames: events bounded by ``max_events``; replies
    counted in ``replies`` until the sender takes them, so the transport can stop
    reading requests from a peer that does not read its replies (server.py)."""

    def __init__(self, max_events: int, max_subscriptions: int,
                 write_now: Callable[[bytes], bool] | None = None) -> None:
        self.max_events = max_events
        self.max_subscriptions = max_subscriptions
        self.sessions: set[str] = set()
        self._frames: deque[tuple[bytes, bool]] = deque()
        self._events = 0
        self.replies = 0  # reply frames queued, not yet taken by the sender
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self.closed = False
        # the transport's fast path: hand a frame straight to the socket when
        # nothing is queued ahead of it and the peer keeps up (False: queue it)
        self._write_now = write_now
        #: called once when the connection closes (an editor's offer ends: toolsets/editor.py)
        self.on_close: list[Callable[[], None]] = []

    def put_reply(self, frame: bytes) -> None:
        if self.closed:
            return
        if not self._frames and self._write_now is not None and self._write_now(frame):
            return
        self.replies += 1
        self._frames.append((frame, False))
        self._ready.set()

    def put_event(self, frame: bytes) -> bool:
        """Queue an event frame; False if the event queue is full."""
        if self.closed:
            return True
        if not self._frames and self._write_now is not None and self._write_now(frame):
            return True
        if self._events >= self.max_events:
            return False
        self._events += 1
        self._frames.append((frame, True))
        self._ready.set()
        return True

    def put_notice(self, frame: bytes) -> None:
        """An event-like frame that must get through (replay gap)."""
        self.put_reply(frame)

    async def next_frame(self) -> bytes:
        while not self._frames:
            self._ready.clear()
            await self._ready.wait()
        frame, is_event = self._frames.popleft()
        if is_event:
            self._events -= 1
        else:
            self.replies -= 1
            self._room.set()
        return frame

    def drain_now(self) -> list[bytes]:
        """Everything queued, at once (batched sends)."""
        out = [f for f, _ in self._frames]
        self._frames.clear()
        self._events = 0
        self.replies = 0
        self._room.set()
        return out

    def made_room(self) -> None:
        """Wake ``wait_room`` (a request ended without a reply, say)."""
        self._room.set()

    async def wait_room(self) -> None:
        """Until a reply is taken by the sender, ``made_room`` is called, or close."""
        if self.closed:
            return
        self._room.clear()
        await self._room.wait()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._frames.clear()
        self._ready.set()
        self._room.set()
        hooks, self.on_close = self.on_close, []
        for hook in hooks:
            hook()


@dataclass(slots=True)
class _Sub:
    # None while a snapshot of the subscriber's is being read: events are held back
    floor: int | None
    held: list[tuple[int, bytes]]
    last_sent: int
    pending: int = 1  # snapshots being read for this subscriber, not yet answered
    covered: int = 0  # the highest last_seq of its snapshots answered so far
    active: bool = False  # one of its snapshots was answered: events have flowed


class EventBus:
    def __init__(self) -> None:
        self._subs: dict[str, dict[Viewer, _Sub]] = {}

    def subscribe(self, viewer: Viewer, session_id: str) -> bool:
        """Start holding events for ``viewer`` while a snapshot is read; False if
        over its subscription bound.

        Every subscribe is one snapshot on its way, answered by ``activate`` (or
        ``abandon`` when it fails). While any is on its way, events are held: a
        viewer that resumes a session it already follows, or resumes twice
        without waiting, must not get events after a snapshot's last_seq before
        that snapshot, or a viewer that resets its view to the snapshot loses them.
        """
        subs = self._subs.setdefault(session_id, {})
        if (sub := subs.get(viewer)) is not None:
            sub.pending += 1
            sub.floor = None
            return True
        if len(viewer.sessions) >= viewer.max_subscriptions:
            if not subs:
                del self._subs[session_id]
            return False
        subs[viewer] = _Sub(floor=None, held=[], last_sent=0)
        viewer.sessions.add(session_id)
        return True

    def activate(self, viewer: Viewer, session_id: str, after_seq: int) -> None:
        """A snapshot covering events up to ``after_seq`` was answered; once no other
        is on its way, release the held events after what the snapshots covered."""
        sub = self._subs.get(session_id, {}).get(viewer)
        if sub is None:
            return
        sub.pending -= 1
        sub.covered = max(sub.covered, after_seq)
        sub.active = True
        if sub.pending <= 0:
            self._release(viewer, session_id, sub)

    def abandon(self, viewer: Viewer, session_id: str) -> None:
        """A snapshot failed (its reply is an error): a subscription it alone made
        is dropped; one that already flowed resumes where it was."""
        sub = self._subs.get(session_id, {}).get(viewer)
        if sub is None:
            return
        sub.pending -= 1
        if sub.pending > 0:
            return
        if sub.active:
            self._release(viewer, session_id, sub)
        else:
            self.unsubscribe(viewer, session_id)

    def _release(self, viewer: Viewer, session_id: str, sub: _Sub) -> None:
        sub.pending = 0
        sub.floor = sub.covered
        sub.last_sent = max(sub.last_sent, sub.covered)
        held, sub.held = sub.held, []
        for seq, frame in held:
            if seq > sub.floor and not self._send(viewer, session_id, sub, seq, frame):
                return

    def unsubscribe(self, viewer: Viewer, session_id: str) -> None:
        subs = self._subs.get(session_id)
        if subs is not None:
            subs.pop(viewer, None)
            if not subs:
                del self._subs[session_id]
        viewer.sessions.discard(session_id)

    def drop_viewer(self, viewer: Viewer) -> None:
        for session_id in list(viewer.sessions):
            self.unsubscribe(viewer, session_id)

    def subscribers(self, session_id: str) -> int:
        return len(self._subs.get(session_id, ()))

    def reading(self, session_id: str) -> bool:
        """Whether a snapshot of the session is still being read for a subscriber
        (its events are held until it is answered)."""
        return any(sub.pending > 0 for sub in self._subs.get(session_id, {}).values())

    def publish(self, events: list[EventRecord]) -> None:
        for ev in events:
            subs = self._subs.get(ev.session_id)
            if not subs:
                continue
            frame = encode_event(ev.wire())
            for viewer, sub in list(subs.items()):
                if sub.floor is None:
                    sub.held.append((ev.seq, frame))
                elif ev.seq > sub.floor:
                    self._send(viewer, ev.session_id, sub, ev.seq, frame)

    def _send(self, viewer: Viewer, session_id: str, sub: _Sub, seq: int, frame: bytes) -> bool:
        if viewer.put_event(frame):
            sub.last_sent = seq
            return True
        self.unsubscribe(viewer, session_id)
        gap = replay_gap(session_id, sub.last_sent, GAP_VIEWER_QUEUE_OVERFLOW)
        viewer.put_notice(encode_event(gap))
        return False
