"""Events across nodes: a viewer on any node sees every event of a session, in
seq order, once, whichever node committed it (PostgreSQL only).

A node's own commits reach its bus as they always did (`Journal` publishes them
right after the commit); what other nodes commit reaches it through this
module. `Feed` is the node's `EventBus`, with a sequencer in front of
``publish``. On SQLite there is no feed: the owner builds a plain EventBus and
nothing here runs.

Announce. A store unit that wrote events asks, through the journal's
``announce`` hook, for ``SELECT pg_notify(<channel>, '<node id> <sessions>')`` to
run right before its group's COMMIT (``PgConn.before_commit``, store/pg/connection.py),
naming the sessions it wrote events of. Every unit asks, but the request is
folded per group (the sessions of all its units gathered into one payload, or
"*" when they would not fit one), so a commit that wrote events sends one
statement and one notification, never one per event or per session: a committing
transaction that notified takes a database-wide lock, so every NOTIFY
serialises committers, and a turn writes dozens of events. (PostgreSQL folds
identical payloads within a transaction as well; folding them before they are
sent spares the round trips.) A commit without events announces nothing. The
channel is named after the schema, ``tether_events:<schema>`` (CHANNEL_SQL):
notifications are per database, while a fleet is per schema.

Listen. Each node holds one connection of its own (psycopg's async connection,
on the event loop, application_name ``tether-feed:<node id>``) that LISTENs on
the channel and, when it has been quiet for PING_SECONDS, pings the server. A
notification from another node asks for a read only when it names a session
this node tracks (or "*", or no session: a node that does not name them); the
node's own are ignored (those events came through the journal). Skipping the
others loses nothing: a session tracked after such a notification starts from a
snapshot read after it subscribed, which sees that commit.

Read. Only sessions with subscribers on this node are tracked. One statement
reads, for every tracked session, the events after the last one the feed handed
the bus. At most one read is in flight; notifications that arrive meanwhile make
one more, so a burst of commits costs a couple of reads.

Sequence. For each tracked session the feed keeps the last seq it handed the
bus. An event, committed here or read, that is one past it goes through; one at
or below it is a duplicate and is dropped; one beyond it is held and the gap
asks for a read (a local seq 7 can come before the read of seq 6 that another
node committed). The bus therefore gets each session's events in seq order,
each once. A read that began after a held event was committed and still does not
find what comes before it proves those events gone (the session was deleted):
the feed goes on from the held ones.

Where tracking starts. When a session's first subscriber subscribes, its events
are held until every snapshot being read for the session is answered (the
snapshot protocol of daemon/sessions/service.py: subscribe, read, activate with the
snapshot's last_seq); the lowest of those last_seqs is where the feed starts. A
viewer whose snapshot saw more skips what it already has (the bus's per-viewer
floor), and a later subscriber's snapshot always covers what the feed handed the
bus before it subscribed. Tracking ends with the session's last subscriber.

Poll. When the listening connection fails (a server restart, a terminated
backend, a dead network), it is opened again with backoff (which starts over
only after a connection listened for STEADY_SECONDS, so a flapping one is not
reopened in a hot loop), and until it LISTENs again the tracked sessions are
read every POLL_SECONDS: events arrive late but in order, none lost. Once it
LISTENs again, one read catches up with what no notification announced
meanwhile, and the log says how long it was down and how many event rows
polling read.

A viewer that falls behind is still the bus's to handle: it is unsubscribed
and told where to resume (``session.replay_gap``), on either backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from tether.store import StorageError, Store
from tether.store.conn import Conn

from ..ledger.events import EventBus, EventRecord, Viewer
from ..ledger.journal import retry_delay

__all__ = ["Feed", "CHANNEL_SQL", "ANNOUNCE_SQL", "APP_NAME_PREFIX", "POLL_SECONDS"]

log = logging.getLogger("tether.feed")

#: the notification channel, as SQL: one per schema (a channel name is at most 63 bytes)
CHANNEL_SQL = "left('tether_events:' || current_schema(), 63)"
#: what a commit that wrote events runs once before COMMIT; the payload is the node's id
ANNOUNCE_SQL = f"SELECT pg_notify({CHANNEL_SQL}, ? || ' ' || ?)"
#: the listening connection's application_name is this plus the node's id
APP_NAME_PREFIX = "tether-feed:"
#: while not listening, tracked sessions are read this often
POLL_SECONDS = 0.5
#: a listening connection quiet this long is pinged (a dead peer shows itself)
PING_SECONDS = 10.0
#: the listening connection is opened again after a failure, backing off up to this
RECONNECT_MAX_SECONDS = 5.0
#: a connection that listened this long before it failed starts the backoff over
STEADY_SECONDS = 10.0
#: rows per read; a read that fills it is followed by another at once
READ_ROWS = 500
#: how long start() waits for the first LISTEN before it lets polling cover
START_WAIT_SECONDS = 5.0

_AFTER = ("SELECT e.session_id, e.seq, e.type, e.admission_id, e.payload_json "
          "FROM unnest(?::text[], ?::bigint[]) AS w(session_id, after_seq) "
          "JOIN events e ON e.session_id = w.session_id AND e.seq > w.after_seq "
          "ORDER BY e.session_id, e.seq LIMIT ?")


def _events_after(conn: Conn, after: dict[str, int]) -> list[Any]:
    """Each session's events after its seq in ``after``: one statement for all."""
    return list(conn.execute(_AFTER, (list(after), list(after.values()), READ_ROWS)))


@dataclass(slots=True)
class _Track:
    """One session with subscribers on this node."""

    #: the last seq handed to the bus; None until the first snapshots are answered
    published: int | None = None
    #: while ``published`` is None: the lowest last_seq of the snapshots answered
    base: int | None = None
    #: events beyond ``published``, waiting for what comes before them
    held: dict[int, EventRecord] = field(default_factory=dict)
    #: reads started before the first held event arrived (a later read must fill the gap)
    gap_since: int = 0


class Feed(EventBus):
    """The bus of a node on a shared PostgreSQL store (see the module docstring)."""

    def __init__(self, db: Store, node_id: str) -> None:
        super().__init__()
        self.node_id = node_id
        self._db = db
        self._url: str = getattr(db, "url")  # noqa: B009 - only PgDatabase has one
        self._tracks: dict[str, _Track] = {}
        self._wanted = asyncio.Event()  # a read is due
        self._listening = False
        self._up = asyncio.Event()  # set while listening
        self._reads = 0  # reads started so far
        #: notifications from other nodes that named no session tracked here (no read)
        self.skipped = 0
        self._clock = time.monotonic
        self._up_at = 0.0  # when the connection last began to listen
        self._down_at: float | None = None  # when it last stopped (None: never listened)
        self._polled = 0  # event rows read by polling since then
        self._tasks: list[asyncio.Task[None]] = []

    # -- the writer's side -------------------------------------------------

    def announce(self, conn: Any, sessions: Iterable[str]) -> None:
        """The journal's hook, in a unit that wrote events of ``sessions``: one NOTIFY
        at its group's COMMIT naming the group's sessions, however many units of the
        group wrote events."""
        conn.before_commit(ANNOUNCE_SQL, (self.node_id,), gather=sessions)

    def _names_a_tracked_session(self, payload: str) -> bool:
        """Whether a notification asks this node for a read (see Listen above)."""
        node, _, named = payload.partition(" ")
        if node == self.node_id:
            return False
        if not named or named == "*":
            return True
        if any(sid in self._tracks for sid in named.split(" ")):
            return True
        self.skipped += 1
        return False

    # -- the bus, with tracking and a sequencer in front -------------------

    def subscribe(self, viewer: Viewer, session_id: str) -> bool:
        if not super().subscribe(viewer, session_id):
            return False
        self._tracks.setdefault(session_id, _Track())
        return True

    def activate(self, viewer: Viewer, session_id: str, after_seq: int) -> None:
        super().activate(viewer, session_id, after_seq)
        track = self._tracks.get(session_id)
        if track is not None and track.published is None:
            track.base = after_seq if track.base is None else min(track.base, after_seq)
        self._settle(session_id)

    def abandon(self, viewer: Viewer, session_id: str) -> None:
        super().abandon(viewer, session_id)
        self._settle(session_id)

    def unsubscribe(self, viewer: Viewer, session_id: str) -> None:
        super().unsubscribe(viewer, session_id)
        self._settle(session_id)

    def publish(self, events: list[EventRecord]) -> None:
        """Events this node committed (the journal, after the commit)."""
        ready: list[EventRecord] = []
        for ev in events:
            self._place(ev, ready)
        self._deliver(ready)

    def tracked(self) -> dict[str, int | None]:
        """Each tracked session's last seq handed to the bus (None: not yet started)."""
        return {sid: t.published for sid, t in self._tracks.items()}

    @property
    def listening(self) -> bool:
        return self._listening

    def _settle(self, session_id: str) -> None:
        """Drop a session nobody here follows any more; start one whose first
        snapshots are all answered."""
        track = self._tracks.get(session_id)
        if track is None:
            return
        if not self.subscribers(session_id):
            del self._tracks[session_id]
            return
        if track.published is not None or track.base is None or self.reading(session_id):
            return
        track.published = track.base
        track.held = {seq: ev for seq, ev in track.held.items() if seq > track.base}
        ready: list[EventRecord] = []
        self._drain(track, ready)
        self._deliver(ready)

    def _place(self, ev: EventRecord, ready: list[EventRecord]) -> None:
        track = self._tracks.get(ev.session_id)
        if track is None:
            return  # nobody here follows the session
        last = track.published
        if last is not None and ev.seq <= last:
            return  # handed over already (read before its own commit reached us)
        if last is not None and ev.seq == last + 1:
            track.published = ev.seq
            ready.append(ev)
            if track.held:
                self._drain(track, ready)
            return
        if not track.held:
            track.gap_since = self._reads
        track.held.setdefault(ev.seq, ev)
        if last is not None:
            self._wanted.set()  # what comes before it is to be read

    def _drain(self, track: _Track, ready: list[EventRecord]) -> None:
        """Hand over the held events that now follow on; a gap left asks for a read."""
        assert track.published is not None
        while (ev := track.held.pop(track.published + 1, None)) is not None:
            ready.append(ev)
            track.published = ev.seq
        if track.held:
            track.gap_since = self._reads
            self._wanted.set()

    def _deliver(self, ready: list[EventRecord]) -> None:
        if ready:
            super().publish(ready)

    def _take(self, rows: list[Any], started: int, complete: bool) -> None:
        """A read's rows (``complete``: it did not stop at READ_ROWS)."""
        ready: list[EventRecord] = []
        for r in rows:
            self._place(EventRecord(r[0], r[1], r[2], orjson.loads(r[4]), r[3]), ready)
        if complete:
            for sid, track in self._tracks.items():
                if track.held and track.published is not None and track.gap_since < started:
                    first = min(track.held)
                    log.warning("session %s: events %d..%d are no longer stored; going on "
                                "from %d", sid, track.published + 1, first - 1, first)
                    track.published = first - 1
                    self._drain(track, ready)
        self._deliver(ready)

    # -- reading and listening ---------------------------------------------

    async def start(self) -> None:
        """Listen and read; wait (briefly) for the first LISTEN."""
        self._tasks = [asyncio.create_task(self._listen(), name="feed-listen"),
                       asyncio.create_task(self._read_loop(), name="feed-read")]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(START_WAIT_SECONDS):
                await self._up.wait()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _read_loop(self) -> None:
        failures = 0
        while True:
            if self._listening:
                await self._wanted.wait()
            else:  # polling: a read at least every POLL_SECONDS
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_SECONDS):
                        await self._wanted.wait()
            self._wanted.clear()
            after = {sid: t.published for sid, t in self._tracks.items()
                     if t.published is not None}
            if not after:
                continue
            self._reads += 1
            started, polling = self._reads, not self._listening
            try:
                rows = await self._db.read(partial(_events_after, after=after))
            except StorageError as exc:
                failures += 1
                if failures == 1:
                    log.warning("could not read other nodes' events (%s); retrying", exc.detail)
                await asyncio.sleep(retry_delay(failures))
                self._wanted.set()
                continue
            if failures:
                log.info("reading other nodes' events again")
                failures = 0
            if polling:
                self._polled += len(rows)
            self._take(rows, started, complete=len(rows) < READ_ROWS)
            if len(rows) >= READ_ROWS:
                self._wanted.set()

    async def _listen(self) -> None:
        failures = 0
        while True:
            try:
                await self._listen_once()
            except Exception as exc:  # noqa: BLE001 - any failure: poll, and connect again
                # a connection that listened a while starts the backoff over; one
                # cut off as soon as it listens (a flapping one) keeps backing off
                steady = self._listening and self._clock() - self._up_at >= STEADY_SECONDS
                failures = 1 if steady else failures + 1
                if self._listening or failures == 1:
                    log.warning("not listening for other nodes' events (%s); reading every "
                                "%.1f s until listening again", " ".join(str(exc).split()),
                                POLL_SECONDS)
            self._set_listening(False)
            await asyncio.sleep(min(0.1 * 2 ** min(failures, 8), RECONNECT_MAX_SECONDS))

    async def _listen_once(self) -> None:
        import psycopg
        from psycopg import sql

        async with await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=5,
                application_name=APP_NAME_PREFIX + self.node_id,
                # over TCP, a peer that vanished without a word is noticed
                keepalives=1, keepalives_idle=5, keepalives_interval=2,
                keepalives_count=3) as conn:
            cur = await conn.execute(f"SELECT {CHANNEL_SQL}")
            row = await cur.fetchone()
            assert row is not None
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(row[0])))
            self._set_listening(True)
            while True:
                async for note in conn.notifies(timeout=PING_SECONDS):
                    if self._names_a_tracked_session(note.payload):
                        self._wanted.set()
                async with asyncio.timeout(PING_SECONDS):
                    await conn.execute("SELECT 1")

    def _set_listening(self, up: bool) -> None:
        if up == self._listening:
            return
        self._listening = up
        now = self._clock()
        if up:
            self._up.set()
            self._up_at = now
            if self._down_at is None:
                log.info("listening for other nodes' events")
            else:
                log.info("listening for other nodes' events again after %.1f s; %d event "
                         "row(s) read by polling meanwhile", now - self._down_at, self._polled)
        else:
            self._up.clear()
            self._down_at = now
            self._polled = 0
        # either way, read now: to catch up with what no notification announced,
        # or to start polling
        self._wanted.set()
