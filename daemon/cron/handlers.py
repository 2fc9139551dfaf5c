"""The cron.* rpc methods: thin glue from validated params to ``CronJobs`` and ``CronService``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether.rpc.dispatch import Dispatcher
from tether.rpc.models import cron as mc

from .jobs import CronJobs
from .service import CronService

__all__ = ["cron_handlers"]


def cron_handlers(jobs: CronJobs, service: CronService) -> Callable[[Dispatcher], None]:
    """A registrar for ``build_dispatcher(register=...)``."""

    def register(d: Dispatcher) -> None:
        @d.register("cron.create")
        async def create(p: mc.CronCreateParams, call: Any) -> dict[str, Any]:
            return await jobs.create(p)

        @d.register("cron.list")
        async def list_(p: mc.CronListParams, call: Any) -> dict[str, Any]:
            return await jobs.list()

        @d.register("cron.get")
        async def get(p: mc.CronNameParams, call: Any) -> dict[str, Any]:
            return await jobs.get(p.name)

        @d.register("cron.update")
        async def update(p: mc.CronUpdateParams, call: Any) -> dict[str, Any]:
            return await jobs.update(p)

        @d.register("cron.pause")
        async def pause(p: mc.CronNameParams, call: Any) -> dict[str, Any]:
            return await jobs.pause(p.name)

        @d.register("cron.resume")
        async def resume(p: mc.CronNameParams, call: Any) -> dict[str, Any]:
            return await jobs.resume(p.name)

        @d.register("cron.remove")
        async def remove(p: mc.CronNameParams, call: Any) -> dict[str, Any]:
            return await jobs.remove(p.name)

        @d.register("cron.run")
        async def run(p: mc.CronNameParams, call: Any) -> dict[str, Any]:
            return await service.run_now(p.name)

        @d.register("cron.runs")
        async def runs(p: mc.CronRunsParams, call: Any) -> dict[str, Any]:
            before = float(p.before) if p.before is not None else None
            return await jobs.runs(p.name, p.limit, before)

    return register
