"""Managing scheduled jobs: create, list, get, update, pause, resume, remove, run history.

Everything a request says is checked before anything is written: a bad
schedule, zone, delivery target or option is ``invalid_params`` naming the
field, and changes nothing. A changed job wakes the cron loop, which then
sleeps until the new earliest due time.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

from tether.rpc.errors import InvalidParams, NotFound, Overloaded
from tether.rpc.models import TURN_OPTION_FIELDS
from tether.rpc.models.cron import CronCreateParams, CronUpdateParams
from tether.store.conn import Conn
from tether.store.tables import cron as cron_rows

from ..config.core import Config
from ..config.turn import check_turn_options
from ..ledger.journal import Journal, Tx
from .delivery import check_target
from .plan import plan_resume
from .schedule import Schedule, ScheduleError, parse, zone
from .service import CronService, job_grace, job_schedule, new_run_id, run_wire

__all__ = ["CronJobs", "local_zone"]


def local_zone() -> str:
    """The owner's local IANA zone: $TZ, else /etc/localtime's target, else
    /etc/timezone, else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                zone(name)
                return name
            except ScheduleError:
                continue
    return "UTC"


def _bad(field: str, detail: str) -> InvalidParams:
    return InvalidParams(f"{field}: {detail}",
                         fields=[{"loc": field, "msg": detail, "type": "value_error"}])


class CronJobs:
    def __init__(self, journal: Journal, service: CronService, config: Config) -> None:
        self._journal = journal
        self._db = journal.db
        self._service = service
        self._config = config
        self.default_tz = config.cron.timezone or local_zone()

    # -- checks -----------------------------------------------------------

    def _schedule(self, text: str, tz: str, now: float) -> tuple[Schedule, float]:
        """The parsed schedule and its first time; invalid_params naming the field."""
        try:
            zone(tz)
        except ScheduleError as exc:
            raise _bad("tz", str(exc)) from None
        try:
            schedule = parse(text, tz, now)
        except ScheduleError as exc:
            raise _bad("schedule", str(exc)) from None
        first = schedule.next_after(now)
        if first is None:
            raise _bad("schedule", f"{text!r} is in the past")
        return schedule, first

    @staticmethod
    def _check_deliver(deliver: str | None) -> None:
        if deliver is not None and (why := check_target(deliver)) is not None:
            raise _bad("deliver", why)

    def _check_options(self, p: Any) -> None:
        check_turn_options(p.provider, p.toolsets, p.base_url, getattr(p, "sandbox", None),
                           self._config.sandbox.mode)

    # -- create / update --------------------------------------------------

    async def create(self, p: CronCreateParams) -> dict[str, Any]:
        now = time.time()
        tz = p.tz or self.default_tz
        schedule, first = self._schedule(p.schedule, tz, now)
        self._check_deliver(p.deliver)
        self._check_options(p)
        options = {k: v for k in TURN_OPTION_FIELDS if (v := getattr(p, k)) is not None}
        job = {
            "job_id": "job_" + secrets.token_hex(8), "name": p.name, "schedule": schedule.text,
            "tz": tz, "anchor_at": now, "prompt": p.prompt, "options": options, "cwd": p.cwd,
            "enabled": not p.paused, "paused_at": now if p.paused else None,
            "overlap": p.overlap, "missed": p.missed,
            "grace_seconds": float(p.grace_seconds) if p.grace_seconds is not None else None,
            "deliver": p.deliver, "next_run_at": first, "created_at": now, "updated_at": now,
        }
        limit = self._config.cron.max_jobs

        def unit(tx: Tx) -> None:
            if cron_rows.job_by_name(tx.conn, p.name) is not None:
                raise _bad("name", f"a job named {p.name!r} already exists "
                                   "(cron.update changes it)")
            if cron_rows.count_jobs(tx.conn) >= limit:
                raise Overloaded(f"there are already {limit} cron jobs (cron.max_jobs)",
                                 limit=limit)
            cron_rows.insert_job(tx.conn, job)

        await self._journal.write(unit)
        self._service.wake()
        return await self.get(p.name)

    async def update(self, p: CronUpdateParams) -> dict[str, Any]:
        sent = p.model_fields_set - {"name"}
        job = await self._job(p.name)
        now = time.time()
        changes: dict[str, Any] = {}
        if "schedule" in sent or "tz" in sent:
            if p.schedule is None and "schedule" in sent:
                raise _bad("schedule", "a job needs a schedule")
            tz = p.tz or (job["tz"] if "tz" not in sent else self.default_tz)
            schedule, first = self._schedule(p.schedule or job["schedule"], tz, now)
            changes.update(schedule=schedule.text, tz=tz, anchor_at=now, next_run_at=first)
        if "deliver" in sent:
            self._check_deliver(p.deliver)
            changes["deliver"] = p.deliver
        for key in ("prompt", "overlap", "missed"):
            if key in sent:
                if getattr(p, key) is None:
                    raise _bad(key, "may not be null")
                changes[key] = getattr(p, key)
        if "cwd" in sent:
            changes["cwd"] = p.cwd
        if "grace_seconds" in sent:
            changes["grace_seconds"] = None if p.grace_seconds is None else float(p.grace_seconds)
        if sent & set(TURN_OPTION_FIELDS):
            self._check_options(p)
            options = dict(job["options"])
            for key in sent & set(TURN_OPTION_FIELDS):
                if getattr(p, key) is None:
                    options.pop(key, None)
                else:
                    options[key] = getattr(p, key)
            changes["options"] = options
        if changes:
            changes["updated_at"] = now
            await self._journal.write(lambda tx: cron_rows.update_job(
                tx.conn, job["job_id"], changes))
            self._service.wake()
        return await self.get(p.name)

    # -- pause / resume / remove ------------------------------------------

    async def pause(self, name: str) -> dict[str, Any]:
        job = await self._job(name)
        if job["enabled"]:
            await self._journal.write(lambda tx: cron_rows.update_job(
                tx.conn, job["job_id"], {"enabled": False, "paused_at": tx.now,
                                          "updated_at": tx.now}))
            self._service.wake()
        return await self.get(name)

    async def resume(self, name: str) -> dict[str, Any]:
        job = await self._job(name)
        if not job["enabled"]:
            try:
                schedule = job_schedule(job)
            except ScheduleError as exc:
                raise _bad("schedule", f"{exc}; give the job a new schedule or zone with "
                                       "cron.update") from None
            plan = plan_resume(schedule, first=job["next_run_at"], now=time.time())

            def unit(tx: Tx) -> None:
                for skip in plan.skips:
                    cron_rows.insert_run(tx.conn, run_id=new_run_id(), job_id=job["job_id"],
                                         scheduled_for=skip.scheduled_for, fired_at=tx.now,
                                         kind="scheduled", status="skipped",
                                         skip_reason=skip.reason, missed_count=skip.count)
                cron_rows.update_job(tx.conn, job["job_id"], {
                    "enabled": True, "paused_at": None, "next_run_at": plan.next_run_at,
                    "updated_at": tx.now})
                cron_rows.trim_runs(tx.conn, job["job_id"], self._config.cron.max_runs_kept)

            await self._journal.write(unit)
            self._service.wake()
        return await self.get(name)

    async def remove(self, name: str) -> dict[str, Any]:
        job = await self._job(name)
        await self._journal.write(lambda tx: cron_rows.delete_job(tx.conn, job["job_id"]))
        self._service.wake()
        return {"removed": True}

    # -- reads ------------------------------------------------------------

    async def _job(self, name: str) -> dict[str, Any]:
        job = await self._db.read(lambda c: cron_rows.job_by_name(c, name))
        if job is None:
            raise NotFound(f"no cron job {name!r} (`tether cron list` lists them)", name=name)
        return job

    async def get(self, name: str) -> dict[str, Any]:
        def read(c: Conn) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
            job = cron_rows.job_by_name(c, name)
            return job, cron_rows.runs_page(c, job["job_id"], 1, None) if job else []

        job, last = await self._db.read(read)
        if job is None:
            raise NotFound(f"no cron job {name!r} (`tether cron list` lists them)", name=name)
        return self._wire(job, last[0] if last else None)

    async def list(self) -> dict[str, Any]:
        jobs = await self._db.read(cron_rows.list_jobs)
        return {"jobs": [self._wire(j, None) for j in jobs]}

    async def runs(self, name: str, limit: int, before: float | None) -> dict[str, Any]:
        job = await self._job(name)
        rows = await self._db.read(lambda c: cron_rows.runs_page(c, job["job_id"], limit + 1,
                                                                 before))
        more, rows = len(rows) > limit, rows[:limit]
        return {"runs": [run_wire(r, name) for r in rows],
                "next_before": rows[-1]["scheduled_for"] if more else None}

    def _wire(self, job: dict[str, Any], last: dict[str, Any] | None) -> dict[str, Any]:
        now = time.time()
        try:
            schedule = job_schedule(job)
            grace = job_grace(job, schedule, now)
        except ScheduleError:
            grace = float(job["grace_seconds"] or 0.0)
        out = {k: job[k] for k in ("job_id", "name", "schedule", "tz", "prompt", "options",
                                   "cwd", "overlap", "missed", "deliver", "created_at",
                                   "updated_at")}
        out.update(paused=not job["enabled"], grace_seconds=grace,
                   grace_default=job["grace_seconds"] is None,
                   next_run_at=job["next_run_at"] if job["enabled"] else None,
                   last_run=run_wire(last, job["name"]) if last else None)
        return out

