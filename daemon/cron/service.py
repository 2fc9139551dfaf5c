"""The cron service: sleeps until the next due time, then fires each due job exactly once.

A fire is one transaction (``AdmissionService.admit`` with ``prepare`` and
``extra_unit``): the run's session is created (source ``cron``, title "job ·
time"), the finite prompt is admitted (principal ``cron``, request_id
``cron:<job>:<scheduled_for>``), the run row is inserted and ``next_run_at`` is
advanced. Either all of it commits or none of it: a crash before the commit
leaves the time due, and the next owner fires it; a crash after it leaves the
run admitted, and recovery treats its admission like any other (a started one
becomes ``unknown`` and is never re-run). The run row is unique on (job,
scheduled_for), so no restart or race can make a second run for one time.

A fire acts on the job as it read it, before its transaction: the job's next time
advances only if the job is still that (enabled, not edited since), else the
whole transaction is rolled back and the job is looked at again. So once a pause
has committed, no fire of the job as it was before commits after it, and the job
an edit made is the one that fires.

The loop wakes at the earliest ``next_run_at`` of the enabled jobs, or when a
job changes (``wake``), or when a run ends (a ``queue`` job may be waiting
for it): there is no periodic tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tether.rpc.errors import InvalidParams, NotFound
from tether.store import StorageError
from tether.store.tables import admissions, sessions
from tether.store.tables import cron as cron_rows

from ..config.core import Config
from ..ledger.activity import fields
from ..ledger.journal import Journal, Tx
from ..ledger.placement import Placement
from ..ledger.rules import canonical_payload, encode_payload
from ..runtime.supervisor import Supervisor
from .delivery import Deliveries
from .plan import Plan, plan_due
from .schedule import Schedule, ScheduleError, default_grace, iso, parse, zone

__all__ = ["CronService", "Admit", "job_schedule", "job_grace", "new_run_id", "request_id_of",
           "run_wire"]

log = logging.getLogger("tether.cron")

#: after a failed pass (the store failing), the loop tries again this much later
RETRY_SECONDS = 2.0
#: the loop never sleeps longer than this: a clock stepped forward is noticed
MAX_SLEEP_SECONDS = 300.0
#: ... and in a fleet no longer than this (a job created on another node is seen)
FLEET_SLEEP_SECONDS = 1.0


class Admit(Protocol):
    """AdmissionService.admit, as the cron service uses it."""

    def __call__(self, principal: str, session_id: str, request_id: str, payload_json: str,
                 extra_unit: Callable[[Tx], None] | None = None, internal: bool = False,
                 prepare: Callable[[Tx], None] | None = None) -> Awaitable[dict[str, Any]]: ...


class _Taken(Exception):
    """The run's time already has a row, or the job changed under the fire (paused,
    edited or removed since it was read): the whole transaction is rolled back."""


def new_run_id() -> str:
    return "run_" + secrets.token_hex(10)


def request_id_of(name: str, scheduled_for: float) -> str:
    return f"cron:{name}:{iso(scheduled_for)}"


def job_schedule(job: dict[str, Any]) -> Schedule:
    return parse(job["schedule"], job["tz"], job["anchor_at"])


def job_grace(job: dict[str, Any], schedule: Schedule, now: float) -> float:
    g = job["grace_seconds"]
    return float(g) if g is not None else default_grace(schedule, now)


class CronService:
    def __init__(self, journal: Journal, admit: Admit, supervisor: Supervisor,
                 config: Config, placement: Placement) -> None:
        # in a fleet, jobs change on other nodes too, unannounced: look again often
        self._max_sleep = FLEET_SLEEP_SECONDS if placement.shared else MAX_SLEEP_SECONDS
        self._journal = journal
        self._admit = admit
        self._supervisor = supervisor
        self._config = config
        self._wake = asyncio.Event()
        #: times before this passed while no owner ran (they are "missed"); set when
        #: the first pass begins, so a time passing during start-up counts as missed
        self._owner_started = time.time()
        self._loop_task: asyncio.Task[None] | None = None
        self.deliveries = Deliveries(journal, supervisor, on_end=self.wake)

    # -- lifetime ---------------------------------------------------------

    def start(self) -> None:
        """Follow the runs earlier owners left unfinished or undelivered, and start
        the schedule (unless ``cron.enabled`` is false)."""
        self._supervisor.spawn(self.deliveries.recover(), "cron-deliveries")
        if self._config.cron.enabled:
            self._loop_task = self._supervisor.spawn(self._loop(), "cron")

    async def stop(self) -> None:
        """Drain: fire nothing more (a fire already being written still commits)."""
        if self._loop_task is not None:
            self._loop_task.cancel("owner draining")
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        self.deliveries.stop()

    def wake(self) -> None:
        """Look at the jobs again now (one was created, changed, or a run ended)."""
        self._wake.set()

    # -- the loop ---------------------------------------------------------

    async def _loop(self) -> None:
        self._owner_started = time.time()
        while not self._supervisor.draining:
            self._wake.clear()
            try:
                wake_at = await self._pass()
            except StorageError as exc:
                log.warning("cron: the store failed (%s); trying again shortly", exc.detail)
                wake_at = time.time() + RETRY_SECONDS
            except Exception:  # noqa: BLE001 - a bug must not stop every job for good
                log.exception("cron: a pass over the jobs failed")
                wake_at = time.time() + RETRY_SECONDS
            delay = self._max_sleep if wake_at is None else max(0.0, wake_at - time.time())
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(delay, self._max_sleep))

    async def _pass(self) -> float | None:
        """Fire every due job; the earliest time a job is due next (None: no job is)."""
        jobs = await self._journal.db.read(cron_rows.enabled_jobs)
        earliest: float | None = None
        for job in jobs:
            if self._supervisor.draining:
                return None
            nxt = job["next_run_at"]
            if nxt <= time.time():
                nxt = await self._fire_due(job)
            if nxt is not None and (earliest is None or nxt < earliest):
                earliest = nxt
        return earliest

    async def _fire_due(self, job: dict[str, Any]) -> float | None:
        """Act on one due job; its next due time (None: none, or waiting on a run)."""
        try:
            schedule = job_schedule(job)
        except ScheduleError as exc:  # a zone removed from the system since, say
            log.error("cron job %s cannot be scheduled any more (%s); pausing it",
                      job["name"], exc)
            await self._journal.write(lambda tx: cron_rows.update_job(
                tx.conn, job["job_id"], {"enabled": False, "paused_at": tx.now}))
            return None
        now = time.time()
        live = await self._journal.db.read(lambda c: cron_rows.live_run(c, job["job_id"]))
        plan = plan_due(schedule, first=job["next_run_at"], now=now,
                        owner_started=self._owner_started,
                        grace=job_grace(job, schedule, now), missed_policy=job["missed"],
                        overlap=job["overlap"], live=live is not None)
        if plan.wait:
            assert live is not None  # its end wakes the loop
            self.deliveries.follow(live)
            return None
        try:
            if plan.fire is not None:
                await self.fire(job, plan.fire[0], plan.fire[1], plan)
            else:
                await self._journal.write(lambda tx: self._record(tx, job, plan))
        except _Taken:
            log.info("cron job %s: %s already has a run or the job changed; looking again",
                     job["name"], iso(job["next_run_at"]))
            return time.time()
        return plan.next_run_at

    def _record(self, tx: Tx, job: dict[str, Any], plan: Plan) -> None:
        """The plan's skipped rows and the job's next time (the fire's own rows are
        written by ``fire``). Raises _Taken if the job changed meanwhile."""
        for skip in plan.skips:
            cron_rows.insert_run(tx.conn, run_id=new_run_id(), job_id=job["job_id"],
                                 scheduled_for=skip.scheduled_for, fired_at=tx.now,
                                 kind="scheduled", status="skipped", skip_reason=skip.reason,
                                 missed_count=skip.count if skip.reason != "still_running"
                                 else 0)
            log.info(fields("cron.skip", job=job["name"], scheduled_for=iso(skip.scheduled_for),
                            reason=skip.reason, times=skip.count if skip.count > 1 else None))
        if not cron_rows.set_next_run(tx.conn, job["job_id"], plan.next_run_at,
                                      expected=job["next_run_at"],
                                      updated_at=job["updated_at"]):
            raise _Taken
        cron_rows.trim_runs(tx.conn, job["job_id"], self._config.cron.max_runs_kept)

    # -- firing -----------------------------------------------------------

    async def fire(self, job: dict[str, Any], kind: str, scheduled_for: float,
                   plan: Plan | None = None) -> dict[str, Any]:
        """Admit one run of ``job`` for ``scheduled_for``, in one transaction with its
        session, its run row and (with a ``plan``) the plan's skipped rows and the
        job's next time. Returns the run. Raises _Taken if that time has a run."""
        name, job_id = job["name"], job["job_id"]
        session_id = "ses_" + secrets.token_hex(12)
        run_id = new_run_id()
        request_id = request_id_of(name, scheduled_for)
        options = job["options"]
        payload_json = encode_payload(canonical_payload(job["prompt"], True, options))
        tz = zone(job["tz"])
        local = iso(scheduled_for, tz)[:19].replace("T", " ")
        title = f"{name} · {local[:16] if local.endswith(':00') else local}"
        delivery = "pending" if job["deliver"] else None

        def prepare(tx: Tx) -> None:
            sessions.insert(tx.conn, session_id=session_id, request_id=None, params_digest=None,
                            parent_session_id=None, source="cron", title=title,
                            cwd=job["cwd"], options=options, now=tx.now)

        def extra(tx: Tx) -> None:
            if plan is None and cron_rows.get_job(tx.conn, job_id) is None:
                # removed since it was read: the run is refused whole (a scheduled
                # fire is checked by the plan's record, which wants the job unchanged)
                raise NotFound(f"no cron job {name!r}: it was removed", name=name)
            row = admissions.find(tx.conn, "cron", session_id, request_id)
            assert row is not None  # inserted just before, in this transaction
            if not cron_rows.insert_run(tx.conn, run_id=run_id, job_id=job_id,
                                        scheduled_for=scheduled_for, fired_at=tx.now,
                                        kind=kind, status="admitted", session_id=session_id,
                                        admission_id=row["admission_id"],
                                        delivery_status=delivery):
                raise _Taken
            if plan is not None:
                self._record(tx, job, plan)
            else:
                cron_rows.trim_runs(tx.conn, job_id, self._config.cron.max_runs_kept)

        receipt = await self._admit("cron", session_id, request_id, payload_json,
                                    extra_unit=extra, prepare=prepare)
        log.info(fields("cron.fire", job=name, scheduled_for=iso(scheduled_for), kind=kind,
                        run=run_id, session=session_id, admission=receipt["admission_id"]))
        run = {"run_id": run_id, "job_id": job_id, "name": name, "session_id": session_id,
               "admission_id": receipt["admission_id"], "deliver": job["deliver"]}
        self.deliveries.follow(run)
        return await self.get_run(run_id, name)

    async def run_now(self, name: str) -> dict[str, Any]:
        """``cron.run``: fire the job now (kind ``manual``), whatever its schedule,
        paused or not. Refused while its previous run is live, unless the job's
        overlap policy is ``queue``."""
        job = await self._journal.db.read(lambda c: cron_rows.job_by_name(c, name))
        if job is None:
            raise NotFound(f"no cron job {name!r}", name=name)
        live = await self._journal.db.read(lambda c: cron_rows.live_run(c, job["job_id"]))
        if live is not None and job["overlap"] == "skip":
            raise InvalidParams(
                f"cron job {name!r} is still running (run {live['run_id']}, admission "
                f"{live['admission_id']} in session {live['session_id']}); wait for it, or "
                "set --overlap queue", fields=[{"loc": "name", "msg": "still running",
                                                "type": "still_running"}])
        at = round(time.time(), 3)
        for _ in range(5):  # a scheduled time of the same millisecond: the next one
            try:
                return await self.fire(job, "manual", at)
            except _Taken:
                at = round(at + 0.001, 3)
        raise InvalidParams(f"cron job {name!r} could not be fired now; try again")

    async def get_run(self, run_id: str, name: str) -> dict[str, Any]:
        row = await self._journal.db.read(lambda c: cron_rows.get_run(c, run_id))
        if row is None:
            raise NotFound(f"no run {run_id!r}")
        return run_wire(row, name)


def run_wire(row: dict[str, Any], name: str) -> dict[str, Any]:
    """A cron_runs row (joined with its admission) as the wire's CronRun."""
    from ..ledger.rules import receipt_from_row

    out = {k: row[k] for k in ("run_id", "scheduled_for", "fired_at", "kind", "status",
                               "skip_reason", "missed_count", "session_id", "admission_id",
                               "delivery_status", "delivery_error")}
    out["job"] = name
    out["input_id"] = request_id_of(name, row["scheduled_for"]) if row["admission_id"] else None
    out["admission_status"] = row.get("admission_status")
    out["outcome"] = row.get("outcome")
    out["result"] = None
    if row.get("admission_status") == "terminal":
        out["result"] = receipt_from_row({
            "admission_id": row["admission_id"], "target_session_id": row["session_id"],
            "request_id": out["input_id"], "status": "terminal", "outcome": row["outcome"],
            "result_json": row["result_json"]})["result"]
    return out

