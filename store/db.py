"""The one owner of the SQLite file: a group-commit writer and two ways to read.

Every write is a *unit*: a synchronous function ``unit(conn) -> T`` over a
``sqlite3.Connection``. Units submitted while a commit is in flight are grouped
into the next transaction (one fsync for the whole group), each inside its own
SAVEPOINT, so a unit that raises rolls back alone and its neighbours still
commit. ``Database.write`` resolves only after the COMMIT that made the unit
durable returned; that is what "recorded before acknowledged" rests on.

Where the work runs, and why. Units are short (a few indexed statements), so
they run on the event loop, back to back, in submit order; only COMMIT — the
fsync, the one slow step — runs on the commit thread, and the loop keeps
serving (and collecting the next group) while it waits. Running the units on a
writer thread instead would pass the GIL back and forth with the loop on every
statement (sqlite3 releases it around each step), and under load every one of
those hand-backs waits for the busy loop to yield: a group of fifty units would
cost hundreds of GIL switches instead of one thread hop.

Cancellation: the caller awaits a future; loop callbacks, not the caller's task,
drive BEGIN, the units, COMMIT and ROLLBACK. A cancelled caller never leaves a
transaction open, and a unit that was already submitted still commits (the
caller just does not hear about it), exactly like a request whose reply was lost
on the wire.

Reads: ``read(fn)`` runs ``fn`` on the reader connection, an aiosqlite
connection with a worker thread of its own (anything that may be large: a
transcript, a page of events, a listing); ``lookup(fn)`` runs it on the loop
against a connection of its own, for a few rows by key (a receipt, an
idempotency check), with no thread hop. Both see only committed data.

The commit thread is this module's own, not aiosqlite's: aiosqlite's model is
a connection used only from its thread, while the writer's units run on the
loop and only its COMMIT on the thread, started and finished by loop callbacks
with no task awaiting it (docs/dependencies.md).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from .errors import StorageError, is_busy, translate
from .migrations import migrate
from .worker import Worker

__all__ = ["Database", "StorageError"]

T = TypeVar("T")
log = logging.getLogger("tether.store")

#: Upper bound on units folded into one transaction; bounds commit latency and
#: how long one group keeps the loop busy.
MAX_GROUP = 256


def _connect(path: str, *, busy_timeout_ms: int, readonly: bool = False,
             one_thread: bool = False) -> sqlite3.Connection:
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=one_thread)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    if not readonly:
        conn.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit is durable once it returns, also across power loss.
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


class Job:
    __slots__ = ("unit", "future", "after_commit")

    def __init__(self, unit: Callable[[Any], Any], future: asyncio.Future[Any],
                 after_commit: Callable[[Any], None] | None):
        self.unit = unit
        self.future = future
        self.after_commit = after_commit


def resolve(job: Job, ok: bool, value: Any) -> None:
    # Runs on the event loop, in commit order. after_commit runs even when the
    # caller was cancelled: what was committed must still be announced.
    if ok and job.after_commit is not None:
        try:
            job.after_commit(value)
        except Exception:  # noqa: BLE001 - a hook bug must not lose the reply
            log.exception("after_commit hook failed")
    fut = job.future
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class Database:
    """Async facade over one writer connection, a commit thread and two readers.

    ``await Database.open(path)`` creates or migrates the file. ``write(unit)``
    returns the unit's value after its group committed (raises the unit's own
    exception, or StorageError). ``read(fn)`` runs ``fn(conn)`` on the reader's
    thread and ``lookup(fn)`` on the loop; each call sees one consistent WAL
    snapshot of committed data.

    ``before_group``, when set, is called on the loop with the writer
    connection right before each group's BEGIN: a seam for whoever wraps the
    database to put connection settings (PRAGMAs) in force for the group. What
    it raises fails that group's units: a ``sqlite3.Error`` as StorageError.
    """

    dialect = "sqlite"

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: aiosqlite.Connection,
                 reader_conn: sqlite3.Connection, looker: sqlite3.Connection,
                 busy_timeout_ms: int) -> None:
        self.path = path
        #: what the database is, for messages
        self.name = f"SQLite database {path}"
        self._writer = writer
        self._reader = reader  # runs read(fn) on its thread, one call at a time
        self._reader_conn = reader_conn  # its sqlite3 connection: used on that thread only
        self._looker = looker
        self._busy_timeout_ms = busy_timeout_ms
        self.before_group: Callable[[sqlite3.Connection], None] | None = None
        self._pending: list[Job] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._active = False  # a group is being run or committed
        self._idle: asyncio.Event | None = None  # close() waits on it
        self._committer = Worker("tether-commit")
        self._closed = False
        self.commits = 0  # groups committed (the tests check grouping with it)

    @classmethod
    async def open(cls, path: Path | str, *, busy_timeout_ms: int = 5000,
                   max_bytes: int | None = None) -> Database:
        """Open (create, migrate) the file.

        ``max_bytes``: a quota on the file (``PRAGMA max_page_count`` on the
        writer); at the quota, writes fail as on a full disk (``disk_full``).
        """
        path = Path(path)

        def _open() -> tuple[sqlite3.Connection, ...]:
            try:
                writer = _connect(str(path), busy_timeout_ms=busy_timeout_ms)
                migrate(writer)
                if max_bytes is not None:
                    (page_size,) = writer.execute("PRAGMA page_size").fetchone()
                    max_pages = max(1, max_bytes // page_size)
                    writer.execute(f"PRAGMA max_page_count={max_pages}")
                # the loop must never sleep in SQLite's busy handler: the writer
                # and the loop's reader fail fast instead, and take a slower path
                writer.execute("PRAGMA busy_timeout=0")
                looker = _connect(str(path), busy_timeout_ms=0)
                return writer, looker
            except sqlite3.Error as exc:
                raise translate(exc) from exc

        writer, looker = await asyncio.to_thread(_open)
        opened: list[sqlite3.Connection] = []

        def connect_reader() -> sqlite3.Connection:
            # runs on the aiosqlite connection's thread, the only one that may use it
            conn = _connect(str(path), busy_timeout_ms=busy_timeout_ms, one_thread=True)
            opened.append(conn)
            return conn

        reader = aiosqlite.Connection(connect_reader, iter_chunk_size=64)
        try:
            await reader
        except sqlite3.Error as exc:
            writer.close()
            looker.close()
            raise translate(exc) from exc
        return cls(path, writer, reader, opened[0], looker, busy_timeout_ms)

    # -- writes -----------------------------------------------------------

    async def write(self, unit: Callable[[sqlite3.Connection], T],
                    after_commit: Callable[[T], None] | None = None) -> T:
        """Run ``unit`` in the next group commit and return its value once durable.

        ``after_commit(value)`` runs on the event loop right after the commit,
        in commit order across all callers, even if this caller was cancelled;
        the event fan-out relies on it to publish events in seq order.
        """
        # shield: cancelling the caller must not cancel the future the group
        # resolves; the unit's fate is decided by the group alone.
        return await asyncio.shield(self.submit(unit, after_commit))

    def submit(self, unit: Callable[[sqlite3.Connection], T],
               after_commit: Callable[[T], None] | None = None) -> asyncio.Future[T]:
        """Queue ``unit`` now (synchronously, so call order is commit order) and
        return the future ``write`` would await."""
        if self._closed:
            raise StorageError("database is closed", "closed")
        loop = self._loop = asyncio.get_running_loop()
        job = Job(unit, loop.create_future(), after_commit)
        self._pending.append(job)
        if not self._active:
            # everything submitted before the loop gets round to it joins this group
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
        try:
            if self.before_group is not None:
                self.before_group(self._writer)
            self._writer.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not is_busy(exc):
                self._finish(group, [], False, translate(exc))
                return
            # another process holds the write lock: wait for it off the loop
            assert self._loop is not None
            self._committer.call(self._begin_waiting, self._loop,
                                 lambda ok, err: self._run_group(group) if ok
                                 else self._finish(group, [], False, err))
            return
        except Exception as exc:  # noqa: BLE001 - a before_group bug fails its group, not the loop
            self._finish(group, [], False, exc)
            return
        self._run_group(group)

    def _begin_waiting(self) -> None:
        conn = self._writer
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute("PRAGMA busy_timeout=0")

    def _run_group(self, group: list[Job]) -> None:
        conn = self._writer
        outcomes: list[tuple[bool, Any]] = []
        for job in group:
            try:
                conn.execute("SAVEPOINT unit")
                value = job.unit(conn)
                conn.execute("RELEASE unit")
                outcomes.append((True, value))
            except BaseException as exc:  # noqa: BLE001 - every failure goes to its caller
                err = translate(exc)
                if not conn.in_transaction:
                    # SQLite rolled the whole transaction back (SQLITE_FULL, an I/O
                    # error): the units before this one are gone too, and the ones
                    # after it would each commit alone, outside any group. The whole
                    # group fails; its callers may retry (admissions are idempotent).
                    self._finish(group, [], False, err)
                    return
                try:
                    conn.execute("ROLLBACK TO unit")
                    conn.execute("RELEASE unit")
                except sqlite3.Error:
                    pass
                outcomes.append((False, err))
        assert self._loop is not None
        self._committer.call(self._commit, self._loop,
                             lambda ok, err: self._finish(group, outcomes, ok, err))

    def _commit(self) -> None:
        # on the commit thread: the fsync happens here, off the loop
        conn = self._writer
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise

    def _finish(self, group: list[Job], outcomes: list[tuple[bool, Any]], ok: bool,
                err: Any) -> None:
        if ok:
            self.commits += 1
        else:
            outcomes = [(False, err)] * len(group)
        for job, (unit_ok, value) in zip(group, outcomes, strict=True):
            resolve(job, unit_ok, value)
        self._next_group()

    # -- reads ------------------------------------------------------------

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on the reader's thread, in one read transaction."""
        if self._closed:
            raise StorageError("database is closed", "closed")
        try:
            # aiosqlite's public calls each run one statement; a read here is a
            # function of several in one snapshot, so it joins the same queue of
            # calls to the connection's thread that they use (``_execute``)
            return await self._reader._execute(self._snapshot, self._reader_conn, fn)
        except sqlite3.Error as exc:
            raise translate(exc) from None

    async def lookup(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on the loop, for a few rows by key: no thread hop.

        Falls back to ``read`` in the rare case SQLite answers busy.
        Never for anything that may be large: that is ``read``.
        """
        if self._closed:
            raise StorageError("database is closed", "closed")
        try:
            return self._snapshot(self._looker, fn)
        except sqlite3.Error as exc:
            if not is_busy(exc):
                raise translate(exc) from None
        return await self.read(fn)

    @staticmethod
    def _snapshot(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        # one read transaction per call: a multi-query read sees one snapshot
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            conn.execute("ROLLBACK")

    # -- lifecycle --------------------------------------------------------

    async def close(self) -> None:
        """Refuse new work, let submitted units commit and reads finish, then close
        the file. Await it before the loop ends: until then the reader's thread
        (not a daemon thread) keeps the process alive."""
        if self._closed:
            return
        self._closed = True
        if self._active:
            self._idle = asyncio.Event()
            await self._idle.wait()
        await self._committer.stop()
        try:
            await self._reader.close()
        except sqlite3.Error:
            pass
        for conn in (self._writer, self._looker):
            try:
                conn.close()
            except sqlite3.Error:
                pass
