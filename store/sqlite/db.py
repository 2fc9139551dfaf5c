"""The one owner of the SQLite file: a group-commit writer and two ways to read.

Every write is a *unit*: a synchronous function ``unit(conn) -> T`` over a
``sqlite3.Connection``. Units submitted while a commit is in flight are grouped
into the next transaction (one fsync for the whole group), each inside its own
SAVEPOINT, so a unit that raises rolls back alone and its neighbours still
commit. ``Database.write`` resolves only after the COMMIT that made the unit
durable returned; that is what "recorded before acknowledged" rests on.

The scheduler (the queue, the groups, what each caller is told) is
group_commit.py's, shared with the PostgreSQL writer; `SqliteWriter` is
SQLite's part of it: BEGIN IMMEDIATE, a SAVEPOINT per unit, COMMIT.

Where the work runs, and why. Units are short (a few indexed statements), so
they run on the event loop, back to back, in submit order; only COMMIT — the
fsync, the one slow step — runs on the commit thread, and the loop keeps
serving (and collecting the next group) while it waits. Except for a small
group (`LOOP_COMMIT_UNITS`) while this disk's commits are short
(`LOOP_COMMIT_SECONDS`): with little else to serve, the hop to the thread and
back, each waiting for the GIL behind whatever the loop runs meanwhile, cost
more than the fsync, so that COMMIT runs on the loop. Checkpoints never do: the
writer's autocheckpoint is off, and every `CHECKPOINT_EVERY` commits one runs
on the commit thread. Running the units on a
writer thread instead would pass the GIL back and forth with the loop on every
statement (sqlite3 releases it around each step), and under load every one of
those hand-backs waits for the busy loop to yield: a group of fifty units would
cost hundreds of GIL switches instead of one thread hop. When another process
holds the write lock, BEGIN waits for it on the commit thread, not on the loop.

Cancellation: the caller awaits a future; loop callbacks, not the caller's task,
drive BEGIN, the units, COMMIT and ROLLBACK. A cancelled caller never leaves a
transaction open, and a unit that was already submitted still commits (the
caller just does not hear about it), exactly like a request whose reply was lost
on the wire.

Reads: ``read(fn)`` runs ``fn`` on the reader connection, on a thread of its
own (worker.py; anything that may be large: a transcript, a page of events, a
listing), the whole function in one hop; ``lookup(fn)`` runs it on the loop
against a connection of its own, for a few rows by key (a receipt, an
idempotency check), with no thread hop. Both see only committed data.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import StorageError, is_busy, translate
from ..group_commit import GroupCommit
from ..worker import Worker
from .migrations import migrate

__all__ = ["CHECKPOINT_EVERY", "Database", "LOOP_COMMIT_SECONDS", "LOOP_COMMIT_UNITS",
           "StorageError"]

T = TypeVar("T")

#: a group of at most this many units commits on the loop (SqliteWriter.commit_here) ...
LOOP_COMMIT_UNITS = 2
#: ... while a COMMIT takes less than this, smoothed over the last few
LOOP_COMMIT_SECONDS = 0.0015
#: the writer checkpoints the WAL every this many commits (on the commit thread),
#: instead of SQLite's autocheckpoint, which would run in whichever COMMIT crossed
#: its 1,000 pages, on the loop too
CHECKPOINT_EVERY = 64


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


class SqliteWriter:
    """The SQLite part of a group commit (group_commit.py) on the writer connection."""

    def __init__(self, conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
        self.conn = conn
        self.busy_timeout_ms = busy_timeout_ms
        self.before_group: Callable[[sqlite3.Connection], None] | None = None
        self._changes = 0  # the connection's total_changes when the group began
        #: a COMMIT's duration, smoothed over the last few (seconds)
        self.commit_seconds = 0.0
        #: groups of at most this many units may commit on the loop (0: none does)
        self.loop_commit_units = LOOP_COMMIT_UNITS
        self.checkpoint_every = CHECKPOINT_EVERY
        self._since_checkpoint = 0  # commits since the WAL was last checkpointed

    def connect(self) -> None:
        return None  # one connection, open for the database's life

    def begin(self) -> Callable[[], None] | None:
        self._changes = self.conn.total_changes
        try:
            if self.before_group is not None:
                self.before_group(self.conn)
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not is_busy(exc):
                raise
            return self._begin_waiting  # another process holds the write lock
        return None

    def _begin_waiting(self) -> None:
        # off the loop: the only place the writer waits in SQLite's busy handler
        conn = self.conn
        conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute("PRAGMA busy_timeout=0")

    def run_unit(self, index: int, unit: Callable[[Any], Any]) -> tuple[bool, Any]:
        conn = self.conn
        try:
            conn.execute("SAVEPOINT unit")
            value = unit(conn)
            conn.execute("RELEASE unit")
            return True, value
        except BaseException as exc:  # noqa: BLE001 - every failure goes to its caller
            err = translate(exc)
            if not conn.in_transaction:
                # SQLite rolled the whole transaction back (SQLITE_FULL, an I/O
                # error): the units before this one are gone too, and the ones
                # after it would each commit alone, outside any group. The whole
                # group fails; its callers may retry (admissions are idempotent).
                raise err  # noqa: B904 - the unit's own exception, translated
            try:
                conn.execute("ROLLBACK TO unit")
                conn.execute("RELEASE unit")
            except sqlite3.Error:
                pass
            return False, err

    def before_commit(self) -> None:
        pass

    def commit_here(self, units: int) -> bool:
        if self.conn.total_changes == self._changes:
            # no row inserted, updated or deleted since BEGIN (a group of retries that
            # found their rows): COMMIT writes no WAL frame, so there is no fsync to
            # wait for off the loop. (total_changes does not count DDL; the owner's
            # units make none, and a group that did would still commit durably, only
            # on the loop.)
            self._commit()
            return True
        if units > self.loop_commit_units or self.commit_seconds > LOOP_COMMIT_SECONDS \
                or self._since_checkpoint + 1 >= self.checkpoint_every:
            return False
        # a small group on a disk whose commits are short: the thread's two hops
        # (and the GIL they wait for behind a busy loop) cost more than the fsync
        self.commit()
        return True

    def commit(self) -> None:
        # on the commit thread, or on the loop for a small group (commit_here): the
        # fsync happens here; every `checkpoint_every` commits, on the thread, the
        # WAL's frames are copied back into the file (the writer's autocheckpoint is
        # off, so that no commit on the loop ever runs one)
        started = time.perf_counter()
        self._commit()
        self.commit_seconds += (time.perf_counter() - started - self.commit_seconds) / 5
        self._since_checkpoint += 1
        if self._since_checkpoint >= self.checkpoint_every:
            self._since_checkpoint = 0
            try:
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:
                pass  # the frames stay in the WAL, where readers find them; next time

    def _commit(self) -> None:
        conn = self.conn
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise

    def abort(self, exc: BaseException) -> BaseException:
        return translate(exc)


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

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: Worker,
                 reader_conn: sqlite3.Connection, looker: sqlite3.Connection,
                 busy_timeout_ms: int) -> None:
        self.path = path
        #: what the database is, for messages
        self.name = f"SQLite database {path}"
        self._writer = SqliteWriter(writer, busy_timeout_ms)
        self._groups = GroupCommit(self._writer, "tether-commit")
        self._reader = reader  # runs read(fn) on its thread, one call at a time
        self._reader_conn = reader_conn  # its sqlite3 connection: used on that thread only
        self._looker = looker
        self._closed = False

    @property
    def commits(self) -> int:
        """Groups committed (the tests check grouping with it)."""
        return self._groups.commits

    @property
    def before_group(self) -> Callable[[sqlite3.Connection], None] | None:
        return self._writer.before_group

    @before_group.setter
    def before_group(self, hook: Callable[[sqlite3.Connection], None] | None) -> None:
        self._writer.before_group = hook

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
                # the writer checkpoints on its thread (SqliteWriter.commit)
                writer.execute("PRAGMA wal_autocheckpoint=0")
                looker = _connect(str(path), busy_timeout_ms=0)
                return writer, looker
            except sqlite3.Error as exc:
                raise translate(exc) from exc

        writer, looker = await asyncio.to_thread(_open)
        reader = Worker("tether-read")
        try:
            # opened on the reader's thread, the only one that may use it
            reader_conn = await reader.run(lambda: _connect(
                str(path), busy_timeout_ms=busy_timeout_ms, one_thread=True))
        except BaseException:
            await reader.stop()
            writer.close()
            looker.close()
            raise
        return cls(path, writer, reader, reader_conn, looker, busy_timeout_ms)

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
        return self._groups.submit(unit, after_commit)

    # -- reads ------------------------------------------------------------

    async def read(self, fn: Callable[[sqlite3.Connection], T], *, single: bool = False) -> T:
        """``fn(conn)`` on the reader's thread, in one read transaction. ``single``
        (``fn`` runs one statement) matters on PostgreSQL only."""
        if self._closed:
            raise StorageError("database is closed", "closed")
        conn = self._reader_conn
        # the whole function goes to the thread: several queries, one snapshot, one hop
        value: T = await self._reader.run(lambda: self._snapshot(conn, fn))
        return value

    async def lookup(self, fn: Callable[[sqlite3.Connection], T], *,
                     single: bool = False) -> T:
        """``fn(conn)`` on the loop, for a few rows by key: no thread hop.

        ``single``: ``fn`` runs one statement, which SQLite runs in a read
        transaction of its own, so none is wrapped around it (BEGIN and ROLLBACK
        would be two statements more than the one asked). Falls back to ``read`` in
        the rare case SQLite answers busy. Never for anything that may be large:
        that is ``read``.
        """
        if self._closed:
            raise StorageError("database is closed", "closed")
        try:
            return fn(self._looker) if single else self._snapshot(self._looker, fn)
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
        the file."""
        if self._closed:
            return
        self._closed = True
        await self._groups.close()
        try:
            await self._reader.run(self._reader_conn.close)  # after the reads queued before it
        except sqlite3.Error:
            pass
        await self._reader.stop()
        for conn in (self._writer.conn, self._looker):
            try:
                conn.close()
            except sqlite3.Error:
                pass
