"""A fire and a change of its job that commits between the fire's read of the job and
its transaction (daemon/cron/service.py): the change wins, on both stores.

The owner's services run in-process on a real store (the home's state.db, or a
fresh PostgreSQL schema as one node of a fleet whose tick is not started). The
cron loop runs as the owner runs it; the admission it fires through is the
owner's own, reached through a seam that first commits the job's change: so the
loop has read the job, due and enabled, and its transaction is written after the
change, every time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pgstore
import pytest
from wiring import wired

from tether.bench import InstantProvider
from tether.daemon.config.core import Config
from tether.daemon.config.store import StoreConfig
from tether.daemon.cron.service import CronService, request_id_of
from tether.daemon.runtime.home import Home
from tether.daemon.services import Services, build_services
from tether.rpc.errors import NotFound
from tether.rpc.models.cron import CronCreateParams, CronUpdateParams
from tether.store.tables import cron as cron_rows
from tether.store.tables import fleet as fleet_rows


@pytest.fixture(params=["sqlite", "postgresql"])
async def services(request: pytest.FixtureRequest,
                   tmp_path: Path) -> AsyncIterator[Services]:
    providers = {"demo": InstantProvider()}
    if request.param == "sqlite":
        async with wired(tmp_path / "state.db", providers) as parts:
            yield parts.services
        return
    with pgstore.fresh_schema() as url:
        config = Config()
        config = dataclasses.replace(config, daemon=dataclasses.replace(config.daemon,
                                                                        grace_seconds=0))
        async with build_services(Home(tmp_path), config, StoreConfig(url=url),
                                  overrides=providers) as services:
            # the node's row, which a fleet's placement takes its leases under
            await services.journal.write(lambda tx: fleet_rows.register(
                tx.conn, node_id="n", epoch=services.epoch, address=None, pid=1, host="h",
                home=str(tmp_path), now=tx.now, ttl=300))
            yield services


async def due_job(services: Services) -> dict[str, Any]:
    """Job ``tick`` (every second, prompt "the old prompt"), once its first time is due."""
    await services.cron_jobs.create(CronCreateParams(
        name="tick", schedule="every 1s", prompt="the old prompt", grace_seconds=60))
    job = await services.db.read(lambda c: cron_rows.job_by_name(c, "tick"))
    await asyncio.sleep(max(0.0, job["next_run_at"] - time.time()) + 0.01)
    return job


class ChangeFirst:
    """The owner's admission, as the cron service calls it; before the first fire's
    transaction is submitted, ``change`` commits. Counts the fires that committed."""

    def __init__(self, services: Services,
                 change: Callable[[], Awaitable[Any]]) -> None:
        self._services = services
        self._change: Callable[[], Awaitable[Any]] | None = change
        self.tried = asyncio.Event()
        self.committed = asyncio.Event()

    async def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if self._change is not None:
            change, self._change = self._change, None
            await change()
        try:
            receipt = await self._services.admissions.admit(*args, **kwargs)
        finally:
            self.tried.set()
        self.committed.set()
        return receipt


def cron_loop(services: Services, admit: ChangeFirst) -> CronService:
    """The owner's cron service, firing through ``admit``."""
    cron = CronService(services.journal, admit, services.supervisor, services.config,
                       services.placement)
    cron.start()
    return cron


async def job_state(services: Services) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                 list[tuple[str, str]]]:
    """The job, its run rows, and the cron admissions (request_id, payload)."""
    def read(c: Any) -> Any:
        job = cron_rows.job_by_name(c, "tick")
        runs = cron_rows.runs_for_job(c, job["job_id"])
        admitted = [(r[0], r[1]) for r in c.execute(
            "SELECT request_id, payload_json FROM session_admissions "
            "WHERE principal_id = 'cron' ORDER BY created_at")]
        return job, runs, admitted
    return await services.db.read(read)


async def test_a_job_paused_after_a_fire_read_it_does_not_run(services):
    before = await due_job(services)
    admit = ChangeFirst(services, lambda: services.cron_jobs.pause("tick"))
    cron = cron_loop(services, admit)
    try:
        await asyncio.wait_for(admit.tried.wait(), 10)
        await asyncio.sleep(0.2)  # the loop looks again: the paused job is not due
    finally:
        await cron.stop()
    job, runs, admitted = await job_state(services)
    # the pause was answered first, so nothing of the fire was written: no run row,
    # no admission, no session; the due time is still the job's next
    assert not job["enabled"]
    assert runs == [] and admitted == []
    assert job["next_run_at"] == before["next_run_at"]
    sources = await services.db.read(lambda c: [r[0] for r in c.execute(
        "SELECT source FROM sessions")])
    assert "cron" not in sources
    # and on resume the time that passed while paused is recorded as such
    await services.cron_jobs.resume("tick")
    job, runs, admitted = await job_state(services)
    assert [(r["status"], r["skip_reason"]) for r in runs] == [("skipped", "paused")]
    assert runs[0]["scheduled_for"] == before["next_run_at"] and admitted == []


async def test_a_job_edited_after_a_fire_read_it_runs_as_edited(services):
    await due_job(services)
    admit = ChangeFirst(services, lambda: services.cron_jobs.update(
        CronUpdateParams(name="tick", prompt="the new prompt")))
    cron = cron_loop(services, admit)
    try:
        await asyncio.wait_for(admit.committed.wait(), 10)
    finally:
        await cron.stop()
    job, runs, admitted = await job_state(services)
    fired = [r for r in runs if r["status"] == "admitted"]
    # the fire that read the old job was rolled back whole; the loop looked again and
    # fired the edited job: one run, one admission, the new prompt
    assert len(fired) == len(admitted) == 1
    (request_id, payload), = admitted
    assert "the new prompt" in payload and "the old prompt" not in payload
    assert request_id == request_id_of("tick", fired[0]["scheduled_for"])


async def test_a_job_removed_after_a_manual_run_read_it_does_not_run(services):
    await services.cron_jobs.create(CronCreateParams(
        name="tick", schedule="every 1h", prompt="the old prompt"))
    admit = ChangeFirst(services, lambda: services.cron_jobs.remove("tick"))
    cron = CronService(services.journal, admit, services.supervisor, services.config,
                       services.placement)
    with pytest.raises(NotFound, match="removed"):
        await cron.run_now("tick")  # it has read the job; the removal commits first
    assert admit.tried.is_set() and not admit.committed.is_set()

    def read(c: Any) -> Any:
        return ([r[0] for r in c.execute("SELECT job_id FROM cron_runs")],
                [r[0] for r in c.execute("SELECT request_id FROM session_admissions")],
                [r[0] for r in c.execute("SELECT source FROM sessions")])
    runs, admitted, sources = await services.db.read(read)
    # nothing of the run was written: no orphan run row, no admission, no session
    assert runs == [] and admitted == [] and "cron" not in sources
