"""The owner's services, wired in-process on a real state.db, with no listener.

`wired` runs the owner's own wiring (daemon/services.py's `build_services`), with
the model replaced by provider instances; it neither recovers nor listens, so
tests drive the services directly (recovery too, when it is their subject) and
read the store to see what they recorded. What it adds are test conveniences:
the epoch the owner gets, a shutdown that does not wait for running turns, and
`Parts.new_session`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tether.daemon.config.core import Config
from tether.daemon.config.store import StoreConfig
from tether.daemon.model.provider import Provider
from tether.daemon.runtime.home import Home
from tether.daemon.services import Services, build_services
from tether.store import Database
from tether.store.tables import sessions as session_rows


class Parts:
    """The owner's `Services` (every attribute of theirs), plus test helpers."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def __getattr__(self, name: str) -> Any:
        return getattr(self.services, name)

    async def new_session(self, session_id: str) -> str:
        await self.services.db.write(lambda c: session_rows.insert(
            c, session_id=session_id, request_id=None, params_digest=None,
            parent_session_id=None, source="api", title=None, cwd=None, options={}, now=1.0))
        return session_id


async def _next_epoch_is(path: Path, epoch: int) -> None:
    """Make the owner that opens ``path`` next get ``epoch`` (its start bumps it)."""
    db = await Database.open(path)
    try:
        await db.write(lambda c: c.execute(
            "INSERT INTO runtime(key, value) VALUES ('epoch', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(epoch - 1),)))
    finally:
        await db.close()


@asynccontextmanager
async def wired(path: Path, providers: Mapping[str, Provider], *, epoch: int = 1,
                config: Config | None = None) -> AsyncIterator[Parts]:
    """The services of an owner of ``epoch`` on the state.db at ``path`` (its folder is
    the home); on exit the owner's ordered shutdown, with no grace for running turns."""
    config = config or Config()
    config = dataclasses.replace(config, daemon=dataclasses.replace(config.daemon,
                                                                    grace_seconds=0))
    await _next_epoch_is(path, epoch)
    home = Home(path.parent)
    assert home.db == path, "the state.db of a home is <home>/state.db"
    async with build_services(home, config, StoreConfig(), overrides=providers) as services:
        yield Parts(services)
