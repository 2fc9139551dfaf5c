"""Which store the owner keeps its state in: the home's state.db, or a shared PostgreSQL.

``store.url`` in config.yaml, ``TETHER_STORE`` in the environment or ``tether
serve --store URL`` (the flag wins, then the environment, then the file) names
a ``postgresql://`` database; with none, the owner keeps state.db in its home as
always. ``store.lease_seconds`` is how long a node's hold on a session lasts
without a heartbeat: the fleet's failure-detection window (docs/scale-out.md).
``store.outage_seconds`` is how long a running turn rides out a database that
does not take its reads and writes (docs/recovery.md), on either store.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import ConfigDict, Field, Strict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from .core import ConfigError, DaemonConfig
from .errors import problems
from .scalars import AtLeastOne, Number, Str

__all__ = ["StoreConfig", "load_store_config", "open_store", "shown_url", "STORE_ENV"]

STORE_ENV = "TETHER_STORE"
_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class StoreConfig:
    url: Str | None = None  # None: <home>/state.db
    lease_seconds: Annotated[float, Strict(), Field(ge=1, description="seconds")] = 15.0
    readers: AtLeastOne = 4  # read connections per node (PostgreSQL)
    #: how long a running turn waits out a database that refuses its reads and writes
    outage_seconds: Number = 30.0

    @property
    def shared(self) -> bool:
        return self.url is not None


_STORE = TypeAdapter(StoreConfig)


def shown_url(url: str) -> str:
    """The URL with any password masked, for logs and status."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _check_url(url: str, source: str) -> str:
    if urlsplit(url).scheme not in _SCHEMES:
        raise ConfigError(f"{source} {shown_url(url)!r} is not a postgresql:// URL (leave it "
                          "unset to keep state.db in the home)")
    return url


def load_store_config(path: Path | None, flag: str | None = None,
                      env: dict[str, str] | None = None) -> StoreConfig:
    """The ``store`` section of config.yaml, then the environment, then the flag."""
    from .core import read_config_file

    env = dict(os.environ) if env is None else env
    raw: Any = read_config_file(path).get("store") if path is not None else None
    try:
        store = _STORE.validate_python({} if raw is None else raw)
    except ValidationError as exc:
        errors = problems(exc, StoreConfig, raw, within=("store",))
        raise ConfigError("\n".join(errors), errors) from None
    values: dict[str, Any] = {}
    if store.url:
        values["url"] = _check_url(store.url, "config.yaml: `store.url`")
    if env.get(STORE_ENV):
        values["url"] = _check_url(env[STORE_ENV], STORE_ENV)
    if flag:
        values["url"] = _check_url(flag, "--store")
    return replace(store, url=values.get("url"))


async def open_store(db_path: Path, daemon: DaemonConfig, store: StoreConfig) -> Any:
    """Open (create, migrate) the store the config names."""
    if store.url is None:
        from tether.store import Database

        return await Database.open(db_path, busy_timeout_ms=daemon.busy_timeout_ms,
                                   max_bytes=daemon.max_db_bytes)
    from tether.store.pg import PgDatabase

    try:
        return await PgDatabase.open(store.url, readers=store.readers,
                                     outage_seconds=store.outage_seconds)
    except ImportError as exc:
        raise ConfigError(f"a postgresql:// store needs the PostgreSQL driver ({exc.name} is "
                          "not installed): pip install 'tether[postgresql]'") from None
