"""The store on PostgreSQL: the same units, the same promises, on a shared database.

`PgDatabase` has the interface of sqlite/db.py's `Database` (``write``, ``submit``,
``read``, ``lookup``, ``close``), so the owner and the query modules do not
know which one they run on. The group commit is group_commit.py's, shared with
SQLite; writer.py is PostgreSQL's part of it. What differs is where the work
runs:

- Writes. Units are grouped as on SQLite (everything submitted while a group is
  in flight joins the next one, each unit in its own SAVEPOINT, one COMMIT for
  the group) and, as there, run on the event loop back to back: units touch
  the owner's in-memory state (the scheduler's view), which only the loop may.
  A statement whose answer a unit reads is a round trip; the loop does not
  wait for it: the group runs in a greenlet that gives the loop back until the
  socket is ready (suspend.py). ``statement_timeout`` bounds how long a
  statement can hold a group. COMMIT, the step that waits for the server's
  fsync, and (re)connecting run on the writer's thread. Submit order is commit
  order, and ``after_commit`` hooks run on the loop in that order.
  A unit may ask for a statement to run once right before its group's COMMIT
  (``PgConn.before_commit``): the fleet announces a commit that wrote events
  with one NOTIFY, however many units wrote them.
- Reads run on a small pool of connections, each call one read-only
  REPEATABLE READ transaction (one snapshot, as a WAL read on SQLite).
  ``lookup`` (one statement by key) and ``read(…, single=True)`` (one statement,
  a turn's transcript) run without a transaction around it.
- Round trips. A group runs in psycopg's pipeline mode: a statement whose
  answer nobody needs yet (BEGIN, SAVEPOINT and RELEASE, a session's advisory
  lock, an event's or a transcript row's INSERT, NOTIFY, COMMIT) is sent
  without waiting; the node waits only where a unit reads an answer, at the
  end of a unit whose last statement was not waited for (so that a unit's
  failure is told apart from the next one's), and once per group for COMMIT,
  on the writer's thread. A statement with a large parameter (over 32 KiB)
  leaves the pipeline for its own round trip (libpq's pipeline can stall
  sending one: psycopg issue 685). ``round_trips()`` counts the waits; the
  bench reports them per admission and per turn.

A connection that fails (the server restarted, the network dropped) fails the
group it was running with StorageError (``database_unreachable``, transient:
nothing of the group was committed), and the next group connects again, off
the loop. A COMMIT whose answer was lost is the one ambiguous case, and the
writer settles it itself: each group learns its transaction id before COMMIT,
and when the connection breaks during COMMIT the writer connects again and
asks the server (``txid_status``) whether that transaction committed. If it
did, the group succeeded; if it aborted, the group failed like any other.
Only when the server cannot be reached within ``outage_seconds`` does the
group fail with ``ambiguous`` set; its callers retry, and the units they retry
are idempotent (an admission finds its row; a transition whose row already
moved reports that it did not apply).

Requires psycopg 3 and psycopg_pool, imported only when a PostgreSQL store is
opened (the ``postgresql`` extra).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import StorageError, translate
from ..group_commit import GroupCommit
from .connection import COUNTED, Answer, PgConn, PgRow, Trips, round_trips, row_factory
from .schema import migrate_pg
from .writer import PgWriter

__all__ = ["PgDatabase", "PgConn", "PgRow", "Answer", "Trips", "round_trips", "row_factory"]

T = TypeVar("T")

#: a writer statement that has not answered in this long fails (a lock held by a
#: stuck transaction elsewhere, a server in trouble), and its group with it
STATEMENT_TIMEOUT_MS = 5000


class PgDatabase:
    """Async facade over one writer connection (on its own thread) and a read pool."""

    dialect = "postgresql"

    def __init__(self, url: str, pool: Any, *, connect: Callable[[], Any], name: str = "",
                 outage_seconds: float = 30.0, pipelined: bool = False) -> None:
        self.url = url
        self.path = None
        #: what the database is, for messages ("PostgreSQL database tether on db.internal")
        self.name = name or "PostgreSQL"
        self._pool = pool
        # psycopg's pipeline mode (libpq 14 or later; the binary package bundles one)
        self._pipelined = pipelined
        #: round trips to the server so far (writes and reads; see round_trips())
        self.trips = Trips()
        self._writer = PgWriter(connect, self.trips, pipelined=pipelined,
                                outage_seconds=outage_seconds)
        from .suspend import on_loop  # greenlet: only a PostgreSQL store needs it

        self._groups = GroupCommit(self._writer, "tether-pg-writer", runner=on_loop)
        self._closed = False
        COUNTED.add(self)

    @property
    def commits(self) -> int:
        return self._groups.commits

    @property
    def outage_seconds(self) -> float:
        """How long the writer tries to learn the outcome of a COMMIT whose answer was lost."""
        return self._writer.outage_seconds

    @property
    def before_group(self) -> Callable[[Any], None] | None:
        return self._writer.before_group

    @before_group.setter
    def before_group(self, hook: Callable[[Any], None] | None) -> None:
        self._writer.before_group = hook

    @classmethod
    async def open(cls, url: str, *, readers: int = 4, connect_timeout: float = 5.0,
                   outage_seconds: float = 30.0) -> PgDatabase:
        """Connect, migrate (once across every node that starts at the same time)."""
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
        from psycopg_pool import ConnectionPool

        from .suspend import LoopConnection

        # the writer shows in pg_stat_activity as "tether-writer PID" unless the URL
        # names it (the bench tells its nodes apart by the name it gives each)
        info = conninfo_to_dict(url)
        name = info.get("application_name") or f"tether-writer {os.getpid()}"
        where = info.get("host") or "the local socket"
        described = f"PostgreSQL database {info.get('dbname') or '(default)'} on {where}"

        def connect() -> Any:
            # a statement that waits longer fails (and its group) rather than stall the loop
            conn = LoopConnection.connect(url, autocommit=True, row_factory=row_factory,
                                          connect_timeout=max(1, int(connect_timeout)),
                                          application_name=name)
            conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
            return conn

        def _open() -> Any:
            try:
                with connect() as first:
                    migrate_pg(first)
                pool = ConnectionPool(url, min_size=1, max_size=max(1, readers), open=False,
                                      kwargs={"row_factory": row_factory, "autocommit": True,
                                              "connect_timeout": max(1, int(connect_timeout))},
                                      timeout=connect_timeout,
                                      name="tether-read")
                pool.open(wait=True, timeout=connect_timeout)
                return pool
            except Exception as exc:
                err = translate(exc)
                raise err from exc

        pool = await asyncio.to_thread(_open)
        return cls(url, pool, connect=connect, name=described, outage_seconds=outage_seconds,
                   pipelined=psycopg.Pipeline.is_supported())

    # -- writes -----------------------------------------------------------

    async def write(self, unit: Callable[[Any], T],
                    after_commit: Callable[[T], None] | None = None) -> T:
        """As `Database.write`: the unit's value once its group committed."""
        return await asyncio.shield(self.submit(unit, after_commit))

    def submit(self, unit: Callable[[Any], T],
               after_commit: Callable[[T], None] | None = None) -> asyncio.Future[T]:
        """Queue ``unit`` now; call order is commit order."""
        return self._groups.submit(unit, after_commit)

    # -- reads ------------------------------------------------------------

    async def read(self, fn: Callable[[Any], T], *, single: bool = False) -> T:
        """``fn(conn)`` on a pooled connection, in one read-only snapshot (a
        REPEATABLE READ transaction; in pipeline mode its BEGIN rides with the first
        statement and its ROLLBACK with the last answer). With ``single`` ``fn`` runs
        one statement, which is a snapshot by itself: no transaction is wrapped
        around it (one round trip instead of two)."""
        if self._closed:
            raise StorageError("database is closed", "closed")
        return await asyncio.to_thread(self._read, fn, not single)

    async def lookup(self, fn: Callable[[Any], T], *, single: bool = False) -> T:
        """``fn(conn)`` for a few rows by key: one statement, which sees a snapshot
        of its own, so no transaction is wrapped around it (one round trip), with
        ``single`` or without."""
        if self._closed:
            raise StorageError("database is closed", "closed")
        return await asyncio.to_thread(self._read, fn, False)

    def _read(self, fn: Callable[[Any], T], snapshot: bool) -> T:
        try:
            with self._pool.connection() as raw:
                if not snapshot:
                    return fn(PgConn(raw, self.trips))
                if not self._pipelined:
                    conn = PgConn(raw, self.trips)
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    try:
                        return fn(conn)
                    finally:
                        conn.execute("ROLLBACK")
                conn = PgConn(raw, self.trips, True)
                try:
                    conn.send("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    value = fn(conn)
                    conn.send("ROLLBACK")
                finally:
                    if conn.pipeline is not None:
                        conn.leave_pipeline()  # waits for what is left
                return value
        except Exception as exc:
            err = translate(exc)
            if err is exc:
                raise
            raise err from exc

    # -- lifecycle --------------------------------------------------------

    async def close(self) -> None:
        """Refuse new work, let submitted units commit, then close the connections."""
        if self._closed:
            return
        self._closed = True
        await self._groups.close()
        self._writer.discard()
        await asyncio.to_thread(self._pool.close)
