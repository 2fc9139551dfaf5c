"""Group commit, written once for both writers (SQLite in sqlite/db.py, PostgreSQL in pg/writer.py).

`GroupCommit` owns the queue of units, the grouping rule, the order of a
group's steps and what each caller is told. A database supplies a `Writer`,
the dialect's part: how to connect and BEGIN, how one unit runs in its own
savepoint, what is sent before COMMIT, COMMIT itself, and what a failure of the
whole group leaves behind.

The rules:

- Everything submitted while a group is in flight joins the next group, at
  most `MAX_GROUP` units, in submit order; submit order is commit order.
- A group's steps are driven by loop callbacks, never by a caller's task: a
  cancelled caller never leaves a transaction open, and its unit still commits.
  BEGIN and the units run on the loop; COMMIT, and whatever must wait (a lock
  held by another process, a connection being made), run on the writer's own
  thread (worker.py), unless the writer says the group's COMMIT costs less
  than the hop (``commit_here``: nothing to make durable; SQLite's small
  group on a fast disk). A writer whose units wait on the network gives a
  ``runner`` that lets the loop go on meanwhile (PostgreSQL's: pg/suspend.py);
  the units of a group still run one after another, in submit order.
- A unit that fails alone (its savepoint rolled back) fails only its caller.
- A failure of the whole group (the connection lost, the transaction rolled
  back under it, COMMIT refused) fails every unit of it with that error.
- `GroupFailed`: a statement of an earlier unit failed where it could not be
  undone alone, so the group was rolled back. That unit gets its error; the
  other units that ran get a transient refusal (their callers may write them
  again); the units after it never ran and go first into the next group.
- ``after_commit`` hooks run on the loop right after COMMIT, in commit order,
  also for a caller that was cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from .errors import StorageError
from .worker import Worker

__all__ = ["GroupCommit", "GroupFailed", "Job", "MAX_GROUP", "Runner", "Writer", "at_once"]

log = logging.getLogger("tether.store")

#: Upper bound on units folded into one transaction; bounds commit latency and
#: how long one group keeps the loop busy.
MAX_GROUP = 256

#: what a unit that ran in a group rolled back because of another unit is told
ROLLED_BACK = ("rolled back with its group, in which another write failed; "
               "it may be written again")


class GroupFailed(Exception):
    """Unit ``culprit``'s statement failed where it could not be undone alone: the
    group did not commit (see the module's rules)."""

    def __init__(self, culprit: int, error: BaseException) -> None:
        super().__init__(str(error))
        self.culprit = culprit
        self.error = error


class Writer(Protocol):
    """The dialect's part of a group commit. ``connect``, ``begin``, ``run_unit``,
    ``before_commit`` and ``abort`` run on the loop, ``commit`` on the thread.
    An off-the-loop step's failure fails the group as it is (the thread has
    translated it already)."""

    def connect(self) -> Callable[[], Any] | None:
        """Before a group: None if connected, else the step that connects, to run
        off the loop."""

    def begin(self) -> Callable[[], Any] | None:
        """Open the group's transaction and return None; or return the step that
        opens it off the loop (it must wait). What it raises fails the group."""

    def run_unit(self, index: int, unit: Callable[[Any], Any]) -> tuple[bool, Any]:
        """Unit ``index`` of the group in its own savepoint: ``(True, value)``, or
        ``(False, error)`` when it failed and was rolled back alone. Raises
        `GroupFailed`, or anything else for a failure of the whole group."""

    def before_commit(self) -> None:
        """After the last unit: what the group sends right before COMMIT."""

    def commit(self) -> None:
        """COMMIT (off the loop); on failure nothing of the group is left open.
        Raises `GroupFailed`, or anything else: then the group failed."""

    def commit_here(self, units: int) -> bool:
        """On the loop, after ``before_commit`` of a group of ``units``: COMMIT now
        and return True where that costs less than the thread's hop (the group
        changed nothing, so there is nothing to make durable; or the writer
        knows its COMMIT of so small a group to be short); else False, and
        ``commit`` runs off the loop."""

    def abort(self, exc: BaseException) -> BaseException:
        """The whole group failed at ``exc`` on the loop: clean up and return the
        error its callers get."""


#: how a group's units are run, from a loop callback: ``runner(units, done)`` calls
#: ``units()`` and then ``done(None)``, or ``done(error)`` with what it raised
Runner = Callable[[Callable[[], None], Callable[[BaseException | None], None]], None]


def at_once(units: Callable[[], None], done: Callable[[BaseException | None], None]) -> None:
    """The runner of a writer whose units never wait on the network (SQLite's):
    the units run there and then."""
    try:
        units()
    except BaseException as exc:  # noqa: BLE001 - it fails its group, not the loop
        done(exc)
        return
    done(None)


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


class GroupCommit:
    """The queue and the groups of one writer; ``writer`` supplies the dialect."""

    def __init__(self, writer: Writer, thread: str, runner: Runner | None = None) -> None:
        self.writer = writer
        self._runner = runner or at_once
        self.worker = Worker(thread)
        self._pending: list[Job] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._active = False  # a group is being run or committed
        self._idle: asyncio.Event | None = None  # close() waits on it
        self.closed = False
        self.commits = 0  # groups committed (the tests check grouping with it)

    def submit(self, unit: Callable[[Any], Any],
               after_commit: Callable[[Any], None] | None = None) -> asyncio.Future[Any]:
        """Queue ``unit`` now (synchronously, so call order is commit order) and
        return the future its group resolves."""
        if self.closed:
            raise StorageError("database is closed", "closed")
        loop = self._loop = asyncio.get_running_loop()
        job = Job(unit, loop.create_future(), after_commit)
        self._pending.append(job)
        if not self._active:
            # everything submitted before the loop gets round to it joins this group
            self._active = True
            loop.call_soon(self._next_group)
        return job.future

    async def close(self) -> None:
        """Refuse new units, let the submitted ones commit, stop the thread."""
        self.closed = True
        if self._active:
            self._idle = asyncio.Event()
            await self._idle.wait()
        await self.worker.stop()

    def _next_group(self) -> None:
        group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
        if not group:
            self._active = False
            if self._idle is not None:
                self._idle.set()
            return
        step = self.writer.connect()
        if step is None:
            self._begin(group)
        else:
            self._off_loop(step, group, lambda: self._begin(group))

    def _off_loop(self, step: Callable[[], Any], group: list[Job],
                  then: Callable[[], None]) -> None:
        assert self._loop is not None
        self.worker.call(step, self._loop,
                         lambda ok, err: then() if ok else self._fail(group, err))

    def _begin(self, group: list[Job]) -> None:
        try:
            step = self.writer.begin()
        except BaseException as exc:  # noqa: BLE001 - it fails its group, not the loop
            self._fail(group, self.writer.abort(exc))
            return
        if step is None:
            self._run(group)
        else:
            self._off_loop(step, group, lambda: self._run(group))

    def _run(self, group: list[Job]) -> None:
        writer = self.writer
        outcomes: list[tuple[bool, Any]] = []

        def units() -> None:
            for i, job in enumerate(group):
                outcomes.append(writer.run_unit(i, job.unit))
            writer.before_commit()

        self._runner(units, lambda exc: self._ran(group, outcomes, exc))

    def _ran(self, group: list[Job], outcomes: list[tuple[bool, Any]],
             exc: BaseException | None) -> None:
        if isinstance(exc, GroupFailed):
            # the unit that raised it is the last one that ran (or the last of the
            # group, when the statements before COMMIT did)
            i = min(len(outcomes), len(group) - 1)
            self._pending[0:0] = group[i + 1:]  # never ran: they go next
            self._fail_group(group[:i + 1], exc)
            return
        if exc is not None:  # the whole group fails
            self._fail(group, self.writer.abort(exc))
            return
        assert self._loop is not None
        try:
            here = self.writer.commit_here(len(group))
        except BaseException as failed:  # noqa: BLE001 - it fails its group, not the loop
            self._fail(group, self.writer.abort(failed))
            return
        if here:  # committed on the loop: no thread hop
            self._loop.call_soon(self._finish, group, outcomes, True, None)
            return
        self.worker.call(self.writer.commit, self._loop,
                         lambda ok, err: self._finish(group, outcomes, ok, err))

    def _finish(self, group: list[Job], outcomes: list[tuple[bool, Any]], ok: bool,
                err: Any) -> None:
        if isinstance(err, GroupFailed):
            self._fail_group(group, err)
            return
        if not ok:
            self._fail(group, err)
            return
        self.commits += 1
        for job, (unit_ok, value) in zip(group, outcomes, strict=True):
            resolve(job, unit_ok, value)
        self._next_group()

    def _fail(self, group: list[Job], err: BaseException) -> None:
        for job in group:
            resolve(job, False, err)
        self._next_group()

    def _fail_group(self, ran: list[Job], failed: GroupFailed) -> None:
        again = StorageError(ROLLED_BACK, "database_locked")
        for k, job in enumerate(ran):
            resolve(job, False, failed.error if k == failed.culprit else again)
        self._next_group()
