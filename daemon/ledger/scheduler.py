"""Pure turn scheduling: one turn at a time per session, FIFO, global bound.

The scheduler holds admission ids only; it never touches the database or the
loop. ``next()`` hands out the oldest ready admission of the session that has
waited longest, as long as fewer than ``max_running`` turns run. A session with
an ``unknown`` admission is paused (SPEC §7) until every one is resolved.

It is also the owner's view of a session's work, as ``session.info`` reports
it: ``pending`` (queued admissions, then those whose commit is on its way) and
``running``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Scheduler"]


class Scheduler:
    def __init__(self, max_running: int) -> None:
        if max_running < 1:
            raise ValueError("max_running must be at least 1")
        self.max_running = max_running
        self._queued: dict[str, deque[str]] = {}
        self._unknown: dict[str, set[str]] = {}
        self.running: dict[str, str] = {}  # session_id -> admission_id
        # sessions with queued work that could start now, in arrival order
        self._ready: OrderedDict[str, None] = OrderedDict()
        # admissions written by a unit whose commit has not been handed over yet,
        # per session, in commit order
        self._admitting: dict[str, list[str]] = {}
        # admissions given a turn slot by the unit that admits them (`start_now`),
        # whose commit has not been handed over yet: admission_id -> session_id
        self._starting: dict[str, str] = {}
        # sets collecting the admissions that leave while a reader looks elsewhere
        self._watchers: list[set[str]] = []

    # -- inputs -----------------------------------------------------------

    def enqueue(self, session_id: str, admission_id: str) -> None:
        self._queued.setdefault(session_id, deque()).append(admission_id)
        self._mark(session_id)

    def admitting(self, session_id: str, admission_id: str) -> None:
        """A unit that admits ``admission_id`` is about to commit: pending already."""
        self._admitting.setdefault(session_id, []).append(admission_id)

    def start_now(self, session_id: str, admission_id: str) -> bool:
        """In the unit that admits ``admission_id``: whether its turn would start the
        moment it commits, and if so the turn's slot, taken now, so that the unit
        starts it too (one commit for both). That is when nothing is ahead of it:
        no turn of the session running, queued, being admitted or paused, no other
        session waiting for a slot, and a slot free. `admitted` keeps the slot
        (committed) or frees it."""
        if (session_id in self.running or session_id in self._queued
                or session_id in self._admitting or session_id in self._unknown
                or self._ready or len(self.running) >= self.max_running):
            return False
        self.running[session_id] = admission_id
        self._starting[admission_id] = session_id
        return True

    def admitted(self, session_id: str, admission_id: str, *, committed: bool) -> None:
        """That unit ended: committed, the admission is queued (or, given its slot by
        `start_now`, running); otherwise forgotten. (An admission whose unit never
        called `admitting` or `start_now` runs elsewhere: in a fleet, on the node
        that holds its session.)"""
        if self._starting.pop(admission_id, None) is not None:
            if not committed and self.running.get(session_id) == admission_id:
                del self.running[session_id]
                self._mark(session_id)
            return
        ids = self._admitting.get(session_id)
        if ids is None or admission_id not in ids:
            return
        ids.remove(admission_id)
        if not ids:
            del self._admitting[session_id]
        if committed:
            self.enqueue(session_id, admission_id)

    def cancel(self, session_id: str, admission_id: str) -> int | None:
        """Drop a queued admission; its place in the queue (for `restore`), or None
        if it was not queued here."""
        q = self._queued.get(session_id)
        if not q or admission_id not in q:
            return None
        place = q.index(admission_id)
        del q[place]
        self._left(admission_id)
        if not q:
            del self._queued[session_id]
            self._ready.pop(session_id, None)
        return place

    def restore(self, session_id: str, admission_id: str, place: int) -> None:
        """Put back an admission `cancel` dropped (its cancellation could not be
        recorded), at the place it had, as far as the queue still reaches."""
        q = self._queued.setdefault(session_id, deque())
        q.insert(min(place, len(q)), admission_id)
        self._mark(session_id)

    def block(self, session_id: str, admission_id: str) -> None:
        self._unknown.setdefault(session_id, set()).add(admission_id)
        self._ready.pop(session_id, None)

    def unblock(self, session_id: str, admission_id: str) -> None:
        ids = self._unknown.get(session_id)
        if ids is None:
            return
        ids.discard(admission_id)
        self._left(admission_id)
        if not ids:
            del self._unknown[session_id]
            self._mark(session_id)

    def finished(self, session_id: str) -> None:
        if (admission_id := self.running.pop(session_id, None)) is not None:
            self._left(admission_id)
        self._mark(session_id)

    @contextmanager
    def watch(self) -> Iterator[set[str]]:
        """A set that collects every admission leaving the scheduler (finished,
        cancelled, resolved) while the block runs: a caller that awaits a read of the
        store's open admissions drops those before it adopts the rest, since their
        rows were read before they left."""
        left: set[str] = set()
        self._watchers.append(left)
        try:
            yield left
        finally:
            self._watchers.remove(left)

    def _left(self, admission_id: str) -> None:
        for left in self._watchers:
            left.add(admission_id)

    # -- outputs ----------------------------------------------------------

    def next(self) -> tuple[str, str] | None:
        if len(self.running) >= self.max_running or not self._ready:
            return None
        session_id, _ = self._ready.popitem(last=False)
        q = self._queued[session_id]
        admission_id = q.popleft()
        if not q:
            del self._queued[session_id]
        self.running[session_id] = admission_id
        return session_id, admission_id

    def knows(self, session_id: str, admission_id: str) -> bool:
        """Whether the admission is queued, being admitted, running or pausing its
        session here."""
        return (admission_id in self._queued.get(session_id, ())
                or admission_id in self._admitting.get(session_id, ())
                or self.running.get(session_id) == admission_id
                or admission_id in self._unknown.get(session_id, ()))

    def paused(self) -> dict[str, list[str]]:
        """Each paused session's unknown admissions."""
        return {sid: sorted(ids) for sid, ids in self._unknown.items()}

    def held(self) -> list[str]:
        """Sessions with anything here: queued, being admitted, running or paused."""
        return list({*self._queued, *self._admitting, *self.running, *self._unknown})

    def queued(self, session_id: str) -> list[str]:
        return list(self._queued.get(session_id, ()))

    def view(self, session_id: str) -> dict[str, object]:
        """``session.info``'s payload: pending admissions and the running one."""
        return {"pending": self.queued(session_id) + self._admitting.get(session_id, []),
                "running": self.running.get(session_id)}

    def unknown(self, session_id: str) -> list[str]:
        """The unknown admissions the session is paused behind (sorted)."""
        return sorted(self._unknown.get(session_id, ()))

    def _mark(self, session_id: str) -> None:
        if (session_id in self._queued and session_id not in self.running
                and session_id not in self._unknown):
            self._ready.setdefault(session_id, None)
