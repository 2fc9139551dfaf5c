"""Store units whose events are published after their commit, and writes that must happen.

``Journal.write(fn)`` runs ``fn(tx)`` as one store unit; every ``tx.event(...)``
it makes is appended to the session's gap-free log in that same transaction
and published to subscribers right after the commit, in commit (= seq) order.

``Journal.persist(fn, ...)`` (and `until_stored` for a read-then-write) is the one way to make a write that must happen
after something was acknowledged (a turn's start and outcome, a delegation's
progress, result and delivery): it retries, backing off, until the store takes
it; only the caller's ``give_up`` (the owner is draining) ends it early, and
then the next owner's recovery covers what was not written (docs/recovery.md).

`ride_out` is the bounded form, for what a running turn reads and writes while
it runs (its transcript, its progress): a transient failure of the store
(`StorageError.transient`) is retried, backing off, until the store answers or
``Journal.outage_seconds`` have passed since the first failure; then the
turn's error is `outage_error`, which names the database.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import orjson

from tether.store import StorageError, Store
from tether.store.conn import Conn, dialect
from tether.store.tables import events as event_rows

from . import activity
from .events import EventBus, EventRecord

__all__ = ["Tx", "Journal", "Unit", "Fenced", "never", "until_stored", "ride_out",
           "outage_error", "OUTAGE_SECONDS"]

T = TypeVar("T")
log = logging.getLogger("tether.journal")

#: storage retries back off from 0.1 s, doubling, up to this many seconds
RETRY_MAX_SECONDS = 2.0
#: how long a running turn rides out a failing store by default (store.outage_seconds)
OUTAGE_SECONDS = 30.0


class Fenced(Exception):
    """A unit refused to write: this node of a fleet no longer holds the session it
    writes for (another node took it over; docs/scale-out.md). Not a StorageError:
    retrying cannot help."""


class Tx:
    """What a journal unit gets: the connection, a timestamp, and ``event()``."""

    __slots__ = ("conn", "now", "events", "_last", "_later")

    def __init__(self, conn: Conn, now: float) -> None:
        self.conn = conn
        self.now = now
        self.events: list[EventRecord] = []
        # each session's last seq as this unit wrote it: a unit's second event in a
        # session needs no SELECT (a unit is one savepoint, so nothing moves meanwhile)
        self._last: dict[str, int] = {}
        # PostgreSQL: events whose seq is read once the transaction committed
        self._later: list[tuple[EventRecord, Any]] | None = (
            [] if dialect(conn) == "postgresql" else None)

    def event(self, session_id: str, type_: str, payload: dict[str, Any],
              admission_id: str | None = None) -> int | None:
        """Append an event to the session's log, in this transaction; its seq. On
        PostgreSQL the seq is learnt only after the commit (nothing waits for it
        before: store/pg/db.py), so None, and the record is published with it then."""
        payload_json = orjson.dumps(payload).decode()
        if self._later is not None:
            answer = event_rows.append_later(self.conn, session_id, type_, payload_json,
                                             admission_id, self.now)
            record = EventRecord(session_id, 0, type_, payload, admission_id)
            self._later.append((record, answer))
            self.events.append(record)
            return None
        seq = event_rows.append(self.conn, session_id, type_, payload_json,
                                admission_id, self.now, self._last.get(session_id))
        self._last[session_id] = seq
        self.events.append(EventRecord(session_id, seq, type_, payload, admission_id))
        return seq

    def seen_last(self, session_id: str, seq: int) -> None:
        """The session's last event seq, read in this unit before any event of it was
        appended here: its next event needs no SELECT of its own."""
        self._last.setdefault(session_id, seq)

    def numbered(self) -> None:
        """After the commit: give each event appended on PostgreSQL its number."""
        if self._later:
            for record, answer in self._later:
                record.seq = int(answer.fetchone()[0])
            self._later.clear()


Unit = Callable[[Tx], T]


def never(failures: int) -> bool:
    """A ``give_up`` that never gives up: retry until the store heals."""
    return False


def retry_delay(failures: int) -> float:
    """Backoff between storage retries: 0.1 s doubling, at most RETRY_MAX_SECONDS."""
    return min(0.1 * 2 ** min(failures, 10), RETRY_MAX_SECONDS)


class Journal:
    """The store plus the bus: units whose events are published after commit.

    ``announce(conn, sessions)``, if given, is called in every unit that wrote events,
    with the sessions they belong to, before it ends (on PostgreSQL, the feed's
    NOTIFY: daemon/fleet/feed.py)."""

    def __init__(self, db: Store, bus: EventBus,
                 announce: Callable[[Conn, Iterable[str]], None] | None = None, *,
                 outage_seconds: float = OUTAGE_SECONDS) -> None:
        self.db = db
        self.bus = bus
        self.announce = announce
        #: how long a running turn rides out a store that refuses it (ride_out)
        self.outage_seconds = outage_seconds

    async def write(self, fn: Unit[T]) -> T:
        """Run ``fn`` in one transaction; its value once committed. Cancelling the
        caller does not cancel the write."""
        value, _ = await asyncio.shield(self.submit(fn))
        return value

    def submit(self, fn: Unit[T]) -> asyncio.Future[tuple[T, list[EventRecord]]]:
        """Queue the unit now; call order is commit order, hence seq order."""
        announce = self.announce
        ran: list[Tx] = []

        def unit(conn: Conn) -> tuple[T, list[EventRecord]]:
            tx = Tx(conn, time.time())
            ran.append(tx)
            value = fn(tx)
            if tx.events and announce is not None:
                announce(conn, {ev.session_id: None for ev in tx.events})
            return value, tx.events

        def published(value: tuple[T, list[EventRecord]]) -> None:
            if value[1]:
                ran[-1].numbered()
                self.bus.publish(value[1])
                activity.record(value[1])

        return self.db.submit(unit, after_commit=published)

    async def persist(self, fn: Unit[T], what: str,
                      give_up: Callable[[int], bool] = never) -> T:
        """Write ``fn``, retrying on StorageError until the store takes it
        (`until_stored`)."""
        return await until_stored(lambda: self.write(fn), what, give_up)


def outage_error(db: Store, seconds: float, last: StorageError) -> StorageError:
    """What a turn ends with when the store refused it for longer than ``seconds``."""
    name = getattr(db, "name", "the store")
    return StorageError(f"{name} refused the turn's reads and writes for {seconds:g} s "
                        f"(store.outage_seconds): {last.detail}", last.reason)


async def ride_out(journal: Journal, op: Callable[[], Awaitable[T]], what: str,
                   give_up: Callable[[], bool] = lambda: False) -> T:
    """Run ``op`` (a read, or a write that may be repeated) until it does not fail
    with a transient StorageError, for at most ``journal.outage_seconds`` after
    the first failure; then, or at once for a permanent failure or when
    ``give_up()`` says so, raise (past the deadline: `outage_error`)."""
    failures = 0
    first = 0.0
    while True:
        try:
            value = await op()
        except StorageError as exc:
            if not exc.transient or exc.ambiguous or give_up():
                raise  # permanent, or it may have been stored: not to be written again
            now = time.monotonic()
            if not failures:
                first = now
            if now - first >= journal.outage_seconds:
                log.error("gave up %s: the store refused it for %.1f s: %s", what,
                          now - first, exc.detail)
                raise outage_error(journal.db, journal.outage_seconds, exc) from exc
            failures += 1
            log.warning("could not %s (attempt %d: %s); retrying", what, failures, exc.detail)
            await asyncio.sleep(min(retry_delay(failures - 1),
                                    max(0.0, first + journal.outage_seconds - now)))
            continue
        if failures:
            log.warning("did %s after %d failed attempt(s)", what, failures)
        return value


async def until_stored(op: Callable[[], Awaitable[T]], what: str,
                       give_up: Callable[[int], bool] = never) -> T:
    """Run ``op`` (a write, or a read then a write) until it does not fail with
    StorageError.

    ``give_up(failures)`` is asked after each failure; when it says so, the last
    StorageError is raised. Cancelling the caller stops the retries (a write
    already submitted still commits).
    """
    failures = 0
    while True:
        try:
            value = await op()
        except StorageError as exc:
            failures += 1
            if give_up(failures):
                log.error("gave up writing %s after %d attempt(s): %s", what, failures,
                          exc.detail)
                raise
            log.warning("could not write %s (attempt %d: %s); retrying", what, failures,
                        exc.detail)
            await asyncio.sleep(retry_delay(failures))
            continue
        if failures:
            log.warning("wrote %s after %d failed attempt(s)", what, failures)
        return value

