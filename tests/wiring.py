"""The owner's services, wired in-process on a real state.db, with no listener.

`Parts` is built the way owner.py builds the owner (each service from its
collaborators), with the model replaced by a provider instance; tests drive the
services directly and read the store to see what they recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tether.daemon.config.core import Config
from tether.daemon.delegation.background import BackgroundDelegations
from tether.daemon.delegation.children import ChildRunner
from tether.daemon.delegation.tool import delegate_task_tool
from tether.daemon.demo import demo_provider
from tether.daemon.engine.core import Engine
from tether.daemon.engine.tools import ToolRegistry
from tether.daemon.engine.turns import TurnRunner
from tether.daemon.ledger.admissions import AdmissionService
from tether.daemon.ledger.events import EventBus
from tether.daemon.ledger.journal import Journal
from tether.daemon.ledger.scheduler import Scheduler
from tether.daemon.model.provider import Provider
from tether.daemon.model.providers import Providers
from tether.daemon.runtime.supervisor import Supervisor
from tether.daemon.sessions.service import SessionService
from tether.store import Database
from tether.store import sessions as session_rows


@dataclass
class Parts:
    db: Database
    journal: Journal
    scheduler: Scheduler
    supervisor: Supervisor
    turns: TurnRunner
    admissions: AdmissionService
    sessions: SessionService
    background: BackgroundDelegations
    epoch: int

    async def new_session(self, session_id: str) -> str:
        await self.db.write(lambda c: session_rows.insert(
            c, session_id=session_id, request_id=None, params_digest=None,
            parent_session_id=None, source="api", title=None, cwd=None, options={}, now=1.0))
        return session_id


@asynccontextmanager
async def wired(path: Path, providers: Mapping[str, Provider], *, epoch: int = 1,
                config: Config | None = None) -> AsyncIterator[Parts]:
    config = config or Config()
    db = await Database.open(path)
    try:
        async with httpx.AsyncClient() as http, asyncio.TaskGroup() as tasks:
            scheduler, bus = Scheduler(4), EventBus()
            journal = Journal(db, bus)
            supervisor = Supervisor(tasks)
            tools = ToolRegistry()
            engine = Engine(Providers(config, http, overrides=providers, demo=demo_provider), tools)
            turns = TurnRunner(engine, journal, scheduler, supervisor, config, epoch=epoch)
            admissions = AdmissionService(journal, scheduler, supervisor, turns, config.daemon,
                                          epoch=epoch)
            children = ChildRunner(engine, journal, supervisor, config)
            background = BackgroundDelegations(children, journal, supervisor, config,
                                               admissions.admit, epoch=epoch)
            tools.add(delegate_task_tool(children, background, config.delegation))
            try:
                yield Parts(db, journal, scheduler, supervisor, turns, admissions,
                            SessionService(journal, bus, scheduler, supervisor), background,
                            epoch)
            finally:
                supervisor.draining = True  # no new turn starts while the group ends
                await turns.stop_all(0)
                supervisor.cancel_spawned()
    finally:
        await db.close()
