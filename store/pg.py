"""The store on PostgreSQL: the same units, the same promises, on a shared database.

`PgDatabase` has the interface of db.py's `Database` (``write``, ``submit``,
``read``, ``lookup``, ``close``), so the owner and the query modules do not
know which one they run on. What differs is where the work runs:

- Writes. Units are grouped as on SQLite (everything submitted while a group is
  in flight joins the next one, each unit in its own SAVEPOINT, one COMMIT for
  the group) and, as there, run on the event loop back to back: units touch
  the owner's in-memory state (the scheduler's view), which only the loop may.
  A statement whose answer a unit reads is a round trip the loop waits for
  (tens of microseconds on a local socket; see docs/scale-out.md for a remote
  server); ``statement_timeout`` bounds how long a statement can hold the loop.
  COMMIT, the step that waits for the server's fsync, and (re)connecting run on
  the writer's thread. Submit order is commit
  order, and ``after_commit`` hooks run on the loop in that order.
  A unit may ask for a statement to run once right before its group's COMMIT
  (``PgConn.before_commit``): the fleet announces a commit that wrote events
  with one NOTIFY, however many units wrote them.
- Reads run on a small pool of connections, each call one read-only
  REPEATABLE READ transaction (one snapshot, as a WAL read on SQLite).
  ``lookup`` (one statement by key) runs without a transaction around it.
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
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .db import Job, resolve
from .errors import StorageError, translate
from .pg_conn import COUNTED, Answer, PgConn, PgRow, Trips, round_trips, row_factory
from .pg_schema import migrate_pg
from .worker import Worker

__all__ = ["PgDatabase", "PgConn", "PgRow", "Answer", "Trips", "round_trips", "row_factory"]

T = TypeVar("T")

#: upper bound on units folded into one transaction (as db.py's MAX_GROUP)
MAX_GROUP = 256
#: a writer statement that has not answered in this long fails (a lock held by a
#: stuck transaction elsewhere, a server in trouble): it runs on the event loop
STATEMENT_TIMEOUT_MS = 5000


class GroupFailed(Exception):
    """COMMIT's sync found that unit ``culprit``'s statement failed: the group did not
    commit (see PgDatabase._fail_group)."""

    def __init__(self, culprit: int, error: BaseException) -> None:
        super().__init__(str(error))
        self.culprit = culprit
        self.error = error


class PgDatabase:
    """Async facade over one writer connection (on its own thread) and a read pool."""

    dialect = "postgresql"

    def __init__(self, url: str, pool: Any, *, connect: Callable[[], Any], name: str = "",
                 outage_seconds: float = 30.0, pipelined: bool = False) -> None:
        self.url = url
        self.path = None
        #: what the database is, for messages ("PostgreSQL database tether on db.internal")
        self.name = name or "PostgreSQL"
        #: how long the writer tries to learn the outcome of a COMMIT whose answer was lost
        self.outage_seconds = outage_seconds
        self._pool = pool
        self._connect = connect
        self._writer: Any = None  # connected on the writer's thread, again after a failure
        self._worker = Worker("tether-pg-writer")
        # psycopg's pipeline mode (libpq 14 or later; the binary package bundles one)
        self._pipelined = pipelined
        self.before_group: Callable[[Any], None] | None = None
        self._pending: list[Job] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._active = False
        self._idle: asyncio.Event | None = None
        self._closed = False
        self.commits = 0
        #: round trips to the server so far (writes and reads; see round_trips())
        self.trips = Trips()
        COUNTED.add(self)

    @classmethod
    async def open(cls, url: str, *, readers: int = 4, connect_timeout: float = 5.0,
                   outage_seconds: float = 30.0) -> PgDatabase:
        """Connect, migrate (once across every node that starts at the same time)."""
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
        from psycopg_pool import ConnectionPool

        # the writer shows in pg_stat_activity as "tether-writer PID" unless the URL
        # names it (the bench tells its nodes apart by the name it gives each)
        info = conninfo_to_dict(url)
        name = info.get("application_name") or f"tether-writer {os.getpid()}"
        where = info.get("host") or "the local socket"
        described = f"PostgreSQL database {info.get('dbname') or '(default)'} on {where}"

        def connect() -> Any:
            # a statement that waits longer fails (and its group) rather than stall the loop
            conn = psycopg.connect(url, autocommit=True, row_factory=row_factory,
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
        if self._closed:
            raise StorageError("database is closed", "closed")
        loop = self._loop = asyncio.get_running_loop()
        job = Job(unit, loop.create_future(), after_commit)
        self._pending.append(job)
        if not self._active:
            self._active = True
            loop.call_soon(self._next_group)
        return job.future

    def _next_group(self) -> None:
        group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
        if not group:
            self._active = False
            if self._idle is not None:
                self._idle.set()
            return
        assert self._loop is not None
        if self._writer is None or self._writer.closed:
            # (re)connecting takes round trips and may wait on the network: off the loop
            self._worker.call(self._connect, self._loop,
                              lambda ok, value: self._connected(group, ok, value))
            return
        self._run_group(group)

    def _connected(self, group: list[Job], ok: bool, value: Any) -> None:
        if not ok:
            self._finish(group, [], False, value)
            return
        self._writer = value
        self._run_group(group)

    def _run_group(self, group: list[Job]) -> None:
        # on the loop, as SQLite's units: they may touch the owner's in-memory state.
        # In pipeline mode what needs no answer (BEGIN, SAVEPOINT, RELEASE, a locked
        # event's INSERT, the NOTIFY) rides along with what does; COMMIT and the
        # group's last answers travel together from the writer's thread.
        raw = self._writer
        conn = PgConn(raw, self.trips, self._pipelined)
        outcomes: list[tuple[bool, Any]] = []
        try:
            if self.before_group is not None:
                self.before_group(conn)
            conn.send("BEGIN")
            # the transaction's id, learnt before COMMIT (see _settle_commit)
            xid = conn.execute("SELECT txid_current()")
            for i, job in enumerate(group):
                conn.unit = i
                conn.send("SAVEPOINT unit")
                asked = set(conn.deferred)
                try:
                    value = job.unit(conn)
                    conn.settle_unit()
                except Exception as exc:  # noqa: BLE001 - the unit's failure is its caller's
                    if raw.closed or raw.broken:
                        raise  # the connection failed: the whole group does
                    culprit, conn.culprit = conn.culprit, None
                    if culprit is not None and culprit != i:
                        # what failed was sent by a unit before this one (already
                        # released): only rolling back the whole group undoes it
                        self._discard_writer()
                        self._pending[0:0] = group[i + 1:]  # never ran: they go next
                        self._fail_group(group[:i + 1], culprit, translate(exc))
                        return
                    conn.send("ROLLBACK TO SAVEPOINT unit")
                    conn.send("RELEASE SAVEPOINT unit")
                    for key in set(conn.deferred) - asked:  # its requests go with it
                        del conn.deferred[key]
                    outcomes.append((False, translate(exc)))
                    continue
                conn.send("RELEASE SAVEPOINT unit")
                outcomes.append((True, value))
            conn.unit = -1
            for sql, params in list(conn.deferred):
                conn.send(sql, params)
        except Exception as exc:  # noqa: BLE001 - the connection failed: the whole group does
            self._discard_writer()
            self._finish(group, [], False, translate(exc))
            return
        assert self._loop is not None
        self._worker.call(lambda: self._commit(conn, xid), self._loop,
                          lambda ok, err: self._finish(group, outcomes, ok, err))

    def _commit(self, conn: PgConn, xid_answer: Any) -> None:
        # on the writer's thread: the round trip that waits for the server's fsync
        raw = self._writer
        try:
            (xid,) = xid_answer.fetchone()  # answered long ago, unless no unit waited
        except BaseException:
            self._discard_writer()  # before COMMIT: the server rolls the group back
            raise
        try:
            if conn.pipeline is None:
                conn.execute("COMMIT")
            else:
                conn.send("COMMIT")
                conn.leave_pipeline()  # the sync: every answer, COMMIT's last
        except BaseException as exc:
            lost = raw.closed or raw.broken
            self._discard_writer()
            if lost:
                self._settle_commit(xid, exc)
                return
            if conn.culprit is not None and conn.culprit >= 0:
                raise GroupFailed(conn.culprit, translate(exc)) from exc
            raise  # the server answered: it did not commit

    def _fail_group(self, ran: list[Job], culprit: int, error: BaseException) -> None:
        """A statement of unit ``culprit`` failed where it could not be undone alone:
        the group was rolled back. The culprit gets its error; the other units that
        ran get a transient refusal, so that their callers may write them again."""
        again = StorageError("rolled back with its group, in which another write failed; "
                             "it may be written again", "database_locked")
        for k, job in enumerate(ran):
            resolve(job, False, error if k == culprit else again)
        self._next_group()

    def _settle_commit(self, xid: int, exc: BaseException) -> None:
        """The connection broke during COMMIT: connect again and ask the server
        whether transaction ``xid`` committed. Returns if it did; raises a
        StorageError if it did not (transient) or if nobody could tell within
        ``outage_seconds`` (``ambiguous``)."""
        deadline = time.monotonic() + self.outage_seconds
        delay = 0.05
        detail = str(exc).strip() or type(exc).__name__
        while True:
            try:
                if self._writer is None:
                    self._writer = self._connect()
                (status,) = self._writer.execute("SELECT txid_status(%s)", (xid,)).fetchone()
            except Exception as again:  # noqa: BLE001 - still unreachable: wait and ask again
                self._discard_writer()
                detail = str(again).strip() or detail
                status = "unreachable"
            if status == "committed":
                return
            if status == "aborted":
                raise StorageError(f"the connection was lost during COMMIT, which did not "
                                   f"take effect: {detail}", "database_unreachable")
            if status is None:  # too old to know: cannot happen within seconds
                break
            if time.monotonic() + delay > deadline:
                break
            time.sleep(delay)  # "in progress" (the old backend is ending) or unreachable
            delay = min(delay * 2, 1.0)
        raise StorageError(f"the connection was lost during COMMIT and whether it took "
                           f"effect is unknown: {detail}", "database_unreachable",
                           ambiguous=True)

    def _discard_writer(self) -> None:
        raw, self._writer = self._writer, None
        if raw is not None:
            try:
                raw.close()  # an open transaction is rolled back by the server
            except Exception:  # noqa: BLE001 - it is being thrown away
                pass

    def _finish(self, group: list[Job], outcomes: list[tuple[bool, Any]], ok: bool,
                err: Any) -> None:
        if isinstance(err, GroupFailed):
            self._fail_group(group, err.culprit, err.error)
            return
        if ok:
            self.commits += 1
        else:
            outcomes = [(False, err)] * len(group)
        for job, (unit_ok, result) in zip(group, outcomes, strict=True):
            resolve(job, unit_ok, result)
        self._next_group()

    # -- reads ------------------------------------------------------------

    async def read(self, fn: Callable[[Any], T]) -> T:
        """``fn(conn)`` on a pooled connection, in one read-only snapshot (a
        REPEATABLE READ transaction; in pipeline mode its BEGIN rides with the first
        statement and its ROLLBACK with the last answer)."""
        if self._closed:
            raise StorageError("database is closed", "closed")
        return await asyncio.to_thread(self._read, fn, True)

    async def lookup(self, fn: Callable[[Any], T]) -> T:
        """``fn(conn)`` for a few rows by key: one statement, which sees a snapshot
        of its own, so no transaction is wrapped around it (one round trip)."""
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
        if self._active:
            self._idle = asyncio.Event()
            await self._idle.wait()
        await self._worker.stop()
        self._discard_writer()
        await asyncio.to_thread(self._pool.close)
