"""The owner's lifetime: the task group its background work runs in, draining, stopping.

Every task the owner starts outside a request (turns, background delegations,
deliveries) is spawned here, so it has an owner and shutdown can end it. A
service that must behave differently while the owner drains (admit nothing
new, give up retries) reads ``draining`` from here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["Supervisor"]


class Supervisor:
    def __init__(self, tasks: asyncio.TaskGroup) -> None:
        self._tasks = tasks
        self._spawned: set[asyncio.Task[Any]] = set()
        #: set once the owner has begun to shut down: nothing new is admitted
        self.draining = False
        #: set by `tether stop`, SIGTERM, SIGINT or SIGHUP: the owner begins to drain
        self.stop_requested = asyncio.Event()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Start a task owned by the owner's TaskGroup, tracked until it ends."""
        task = self._tasks.create_task(coro, name=name)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    def cancel_spawned(self) -> None:
        for task in list(self._spawned):
            task.cancel("owner stopped")
