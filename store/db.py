"""The one owner of the SQLite file: a group-commit writer and a reader.

Every write is a *unit*: a synchronous function ``unit(conn) -> T`` over a
``sqlite3.Connection``. Units submitted concurrently are grouped by one writer
thread into a single transaction (one fsync for the whole group), each inside
its own SAVEPOINT, so a unit that raises rolls back alone and its neighbours
still commit. ``Database.write`` resolves only after the COMMIT that made the
unit durable returned; that is what "recorded before acknowledged" rests on.

Why not one ``aiosqlite`` call per statement: a thread hop per statement costs
more than the statement itself, and grouping is only worth it when the whole
group crosses to the writer thread once. The model is aiosqlite's (one worker
thread per connection, calls serialised); the unit of work is a transaction
rather than a statement.

Cancellation: the caller awaits a future; the writer thread owns BEGIN, COMMIT
and ROLLBACK. A cancelled caller never leaves a transaction open, and a unit
that was already handed to the writer still commits (the caller just does not
hear about it), exactly like a request whose reply was lost on the wire.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from .migrations import migrate

__all__ = ["Database", "StorageError"]

T = TypeVar("T")
log = logging.getLogger("tether.store")

#: Upper bound on units folded into one transaction; bounds commit latency.
MAX_GROUP = 256


class StorageError(Exception):
    """SQLite failed (disk full, locked past the timeout, read-only, corrupt).

    ``reason`` is a short snake_case word, ``detail`` the driver's message.
    """

    def __init__(self, detail: str, reason: str = "storage_error") -> None:
        super().__init__(detail)
        self.detail = detail
        self.reason = reason


def _translate(exc: BaseException) -> BaseException:
    """Map sqlite3 failures to StorageError; leave the unit's own errors alone."""
    if isinstance(exc, sqlite3.IntegrityError):
        return exc
    if isinstance(exc, sqlite3.Error):
        msg = str(exc)
        if "locked" in msg or "busy" in msg:
            reason = "database_locked"
        elif "full" in msg:
            reason = "disk_full"
        elif "readonly" in msg or "read-only" in msg:
            reason = "read_only"
        elif "malformed" in msg or "not a database" in msg:
            reason = "corrupt"
        else:
            reason = "storage_error"
        return StorageError(msg, reason)
    return exc


def _connect(path: str, *, busy_timeout_ms: int, readonly: bool = False) -> sqlite3.Connection:
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    if not readonly:
        conn.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit is durable once it returns, also across power loss.
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


class _Job:
    __slots__ = ("unit", "future", "loop", "after_commit")

    def __init__(self, unit: Callable[[sqlite3.Connection], Any], loop: asyncio.AbstractEventLoop,
                 after_commit: Callable[[Any], None] | None):
        self.unit = unit
        self.loop = loop
        self.after_commit = after_commit
        self.future: asyncio.Future[Any] = loop.create_future()


def _resolve(job: _Job, ok: bool, value: Any) -> None:
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


def _resolve_group(group: list[_Job], outcomes: list[tuple[bool, Any]]) -> None:
    for job, (ok, value) in zip(group, outcomes, strict=True):
        _resolve(job, ok, value)


class Database:
    """Async facade over one writer thread and one reader thread.

    ``await Database.open(path)`` creates or migrates the file. ``write(unit)``
    returns the unit's value after its group committed (raises the unit's own
    exception, or StorageError). ``read(fn)`` runs ``fn(conn)`` on the reader
    connection (a consistent WAL snapshot per call).
    """

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: sqlite3.Connection,
                 busy_timeout_ms: int) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._busy_timeout_ms = busy_timeout_ms
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._read_thread = _ReadThread(reader)
        self._thread = threading.Thread(target=self._write_loop, name="tether-writer", daemon=True)
        self._closed = False
        self.commits = 0  # groups committed, for the bench and tests
        self._thread.start()

    @classmethod
    async def open(cls, path: Path | str, *, busy_timeout_ms: int = 5000) -> Database:
        path = Path(path)

        def _open() -> tuple[sqlite3.Connection, sqlite3.Connection]:
            try:
                writer = _connect(str(path), busy_timeout_ms=busy_timeout_ms)
                migrate(writer)
                reader = _connect(str(path), busy_timeout_ms=busy_timeout_ms)
                return writer, reader
            except sqlite3.Error as exc:
                raise _translate(exc) from exc

        writer, reader = await asyncio.to_thread(_open)
        return cls(path, writer, reader, busy_timeout_ms)

    # -- writes -----------------------------------------------------------

    async def write(self, unit: Callable[[sqlite3.Connection], T],
                    after_commit: Callable[[T], None] | None = None) -> T:
        """Run ``unit`` in the next group commit and return its value once durable.

        ``after_commit(value)`` runs on the event loop right after the commit,
        in commit order across all callers, even if this caller was cancelled;
        the event fan-out relies on it to publish events in seq order.
        """
        # shield: cancelling the caller must not cancel the future the writer
        # resolves; the unit's fate is decided by the writer alone.
        return await asyncio.shield(self.submit(unit, after_commit))

    def submit(self, unit: Callable[[sqlite3.Connection], T],
               after_commit: Callable[[T], None] | None = None) -> asyncio.Future[T]:
        """Queue ``unit`` now (synchronously, so call order is commit order) and
        return the future ``write`` would await."""
        if self._closed:
            raise StorageError("database is closed", "closed")
        job = _Job(unit, asyncio.get_running_loop(), after_commit)
        self._jobs.put(job)
        return job.future

    def _write_loop(self) -> None:
        conn = self._writer
        while True:
            job = self._jobs.get()
            if job is None:
                return
            group = [job]
            stop = False
            while len(group) < MAX_GROUP:
                try:
                    nxt = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                group.append(nxt)
            self._run_group(conn, group)
            if stop:
                return

    def _run_group(self, conn: sqlite3.Connection, group: list[_Job]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            err = _translate(exc)
            self._deliver(group, [(False, err)] * len(group))
            return
        for job in group:
            try:
                conn.execute("SAVEPOINT unit")
                value = job.unit(conn)
                conn.execute("RELEASE unit")
                outcomes.append((True, value))
            except BaseException as exc:  # noqa: BLE001 - every failure goes to its caller
                try:
                    conn.execute("ROLLBACK TO unit")
                    conn.execute("RELEASE unit")
                except sqlite3.Error:
                    pass
                outcomes.append((False, _translate(exc)))
        try:
            conn.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as exc:
            err = _translate(exc)
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            outcomes = [(False, err)] * len(group)
        self._deliver(group, outcomes)

    @staticmethod
    def _deliver(group: list[_Job], outcomes: list[tuple[bool, Any]]) -> None:
        # one wake-up of the loop per group, not per unit
        loop = group[0].loop
        loop.call_soon_threadsafe(_resolve_group, group, outcomes)

    # -- reads ------------------------------------------------------------

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StorageError("database is closed", "closed")
        return await self._read_thread.submit(fn)

    # -- lifecycle --------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)
        await self._read_thread.stop()
        for conn in (self._writer, self._reader):
            try:
                conn.close()
            except sqlite3.Error:
                pass


class _ReadThread:
    """One thread that runs read functions on the reader connection in order."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._q: queue.SimpleQueue[tuple[Callable[[sqlite3.Connection], Any], Future[Any]] | None]
        self._q = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="tether-reader", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fn, fut = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                # one read transaction per call: a multi-query read sees one snapshot
                self._conn.execute("BEGIN")
                try:
                    value = fn(self._conn)
                finally:
                    self._conn.execute("ROLLBACK")
                fut.set_result(value)
            except BaseException as exc:  # noqa: BLE001
                fut.set_exception(_translate(exc))

    async def submit(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        fut: Future[T] = Future()
        self._q.put((fn, fut))
        return await asyncio.wrap_future(fut)

    async def stop(self) -> None:
        self._q.put(None)
        await asyncio.to_thread(self._thread.join)
