"""The owner's shared state, handed to every service: config, store, bus, epoch.

One ``Runtime`` per owner process. Services hold a reference to it instead of
reaching for globals, so a test can run two owners in one process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from tether.store import Database

from .config import Config
from .events import EventBus, Journal
from .home import Home
from .scheduler import Scheduler

__all__ = ["Runtime"]


@dataclass
class Runtime:
    home: Home
    config: Config
    db: Database
    bus: EventBus
    journal: Journal
    scheduler: Scheduler
    http: httpx.AsyncClient
    epoch: int
    instance_id: str
    version: str
    tasks: asyncio.TaskGroup
    draining: bool = False
    # provider overrides for tests and the bench (name -> Provider instance)
    providers: dict[str, Any] = field(default_factory=dict)
    # set by the owner; used by `runtime.shutdown`
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    _spawned: set[asyncio.Task[Any]] = field(default_factory=set)
    # admissions written by a unit whose commit has not been handed to the
    # scheduler yet, per session, in commit order (session.info's pending list)
    admitting: dict[str, list[str]] = field(default_factory=dict)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Start a task owned by the owner's TaskGroup, tracked until it ends."""
        task = self.tasks.create_task(coro, name=name)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    def cancel_spawned(self) -> None:
        for task in list(self._spawned):
            task.cancel("owner stopped")
