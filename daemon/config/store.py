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
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .core import ConfigError, DaemonConfig

__all__ = ["StoreConfig", "load_store_config", "open_store", "shown_url", "STORE_ENV"]

STORE_ENV = "TETHER_STORE"
_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class StoreConfig:
    url: str | None = None  # None: <home>/state.db
    lease_seconds: float = 15.0
    readers: int = 4  # read connections per node (PostgreSQL)
    #: how long a running turn waits out a database that refuses its reads and writes
    outage_seconds: float = 30.0

    @property
    def shared(self) -> bool:
        return self.url is not None


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
    from .core import _unknown, read_config_file

    env = dict(os.environ) if env is None else env
    raw: Any = read_config_file(path).get("store") if path is not None else None
    values: dict[str, Any] = {}
    if raw is not None:
        if not isinstance(raw, dict):
            raise ConfigError("config.yaml: `store` must be a mapping")
        for key, value in raw.items():
            if key == "url":
                if value is not None and not isinstance(value, str):
                    raise ConfigError(f"config.yaml: `store.url` has the wrong type ({value!r})")
                values["url"] = _check_url(value, "config.yaml: `store.url`") if value else None
            elif key == "lease_seconds":
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
                    raise ConfigError("config.yaml: `store.lease_seconds` must be a number of "
                                      "seconds, at least 1")
                values["lease_seconds"] = float(value)
            elif key == "outage_seconds":
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise ConfigError("config.yaml: `store.outage_seconds` must be a number of "
                                      "seconds, at least 0")
                values["outage_seconds"] = float(value)
            elif key == "readers":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ConfigError("config.yaml: `store.readers` must be at least 1")
                values["readers"] = value
            else:
                raise _unknown(key, ["url", "lease_seconds", "readers", "outage_seconds"],
                               "store.")
    if env.get(STORE_ENV):
        values["url"] = _check_url(env[STORE_ENV], STORE_ENV)
    if flag:
        values["url"] = _check_url(flag, "--store")
    return StoreConfig(**values)


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
