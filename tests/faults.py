"""Test fault hooks: deliberate pauses that let the crash suite kill -9 the owner
inside a window that is otherwise only microseconds wide, and a storage fault.

Nothing of this ships: an owner gets the hooks only when a test starts it as
``python -m faults`` (harness.OwnerProcess does, when its environment sets
TETHER_FAULT or TETHER_FAULT_STORAGE), which installs them on the daemon's seams
and then runs ``python -m tether.daemon`` with the same arguments.

``TETHER_FAULT=NAME:SECONDS[,NAME:SECONDS...]`` arms pauses, by name:

- ``pause_before_delivery``: a background delegation has just been recorded
  finished (delivery pending) and is about to be delivered into its origin
  session (``daemon/delegation/background.py``). See docs/recovery.md.
- ``pause_before_process_notice``: a background process with
  ``notify_on_complete`` has just been recorded ended (notice pending) and its
  notice is about to be delivered (``daemon/toolsets/processes.py``).

Both hang on ``BEFORE_DELIVERY`` of ``daemon/ledger/delivery.py``, taken by
``LateDelivery.finish``, the one late-delivery path, by the producer's principal.

``TETHER_FAULT_STORAGE=PATH`` arms the storage fault hook for the storage-fault
suite. `wrap_storage` installs it on the owner's `Database` from outside (the
store that ``services.open_store`` returns), through the store's generic
``before_group`` seam: before each write group it
reads PATH, and its content switches the writer connection into a failure
SQLite itself produces — ``readonly`` (``PRAGMA query_only``: every write fails
with SQLITE_READONLY) or ``full`` (the file is capped at its current size:
SQLITE_FULL on the next page it needs). A missing or empty file is normal
operation, so a test can break and heal the store while the owner runs (root
ignores file modes, so chmod cannot do this). Unset, nothing is installed and
the store is not even asked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tether.store import Store

__all__ = ["FAULT_ENV", "STORAGE_FAULT_ENV", "StorageFault", "install", "parse_faults",
           "pause_for", "wrap_storage"]

FAULT_ENV = "TETHER_FAULT"
STORAGE_FAULT_ENV = "TETHER_FAULT_STORAGE"
STORAGE_FAULTS = ("readonly", "full")
log = logging.getLogger("tether.faults")


def parse_faults(value: str) -> dict[str, float]:
    """``"a:1.5,b:2"`` → ``{"a": 1.5, "b": 2.0}``; malformed entries are ignored."""
    out: dict[str, float] = {}
    for item in value.split(","):
        name, _, seconds = item.strip().partition(":")
        try:
            out[name] = float(seconds)
        except ValueError:
            continue
    return out


#: the pauses' names → the principal of the late delivery they hold up
PAUSES = {"pause_before_delivery": "delegation", "pause_before_process_notice": "process"}


def pause_for(name: str, seconds: float) -> Callable[[], Awaitable[None]]:
    """The pause ``name``: sleep ``seconds``, saying so in the owner's log."""
    async def pause() -> None:
        log.warning("test fault hook %s: pausing %.1f s (%s is set)", name, seconds, FAULT_ENV)
        await asyncio.sleep(seconds)
    return pause


class StorageFault:
    """The storage fault hook: puts the writer into the failure PATH names.

    Called with the writer connection before each write group; changes the
    connection only when the named failure changes, and clearing it restores
    the quota the owner configured (``daemon.max_db_bytes``).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.mode: str | None = None
        self._quota_pages: int | None = None  # max_page_count before any fault

    def wanted(self) -> str | None:
        """The failure the file names now (None: normal operation)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                value = f.read().strip()
        except OSError:
            return None
        return value if value in STORAGE_FAULTS else None

    def __call__(self, conn: sqlite3.Connection) -> None:
        mode = self.wanted()
        if mode == self.mode:
            return
        if self._quota_pages is None:
            (self._quota_pages,) = conn.execute("PRAGMA max_page_count").fetchone()
        conn.execute(f"PRAGMA query_only={int(mode == 'readonly')}")
        if mode == "full":
            (pages,) = conn.execute("PRAGMA page_count").fetchone()
            conn.execute(f"PRAGMA max_page_count={pages}")
        else:
            conn.execute(f"PRAGMA max_page_count={self._quota_pages}")
        log.warning("storage fault hook: %s", mode or "cleared")
        self.mode = mode


def install(env: Mapping[str, str]) -> None:
    """Hang the hooks ``env`` arms on the daemon's seams, in this process."""
    from tether.daemon import services
    from tether.daemon.ledger import delivery

    for name, seconds in parse_faults(env.get(FAULT_ENV, "")).items():
        if name in PAUSES and seconds > 0:
            delivery.BEFORE_DELIVERY[PAUSES[name]] = pause_for(name, seconds)
    open_store = services.open_store

    async def open_wrapped(*args: Any, **kwargs: Any) -> Store:
        return wrap_storage(await open_store(*args, **kwargs))

    services.open_store = open_wrapped


def wrap_storage(db: Store) -> Store:
    """``db``, with the storage fault hook installed if TETHER_FAULT_STORAGE is set."""
    path = os.environ.get(STORAGE_FAULT_ENV)
    if path:
        log.warning("storage fault hook armed: %s (%s is set)", path, STORAGE_FAULT_ENV)
        db.before_group = StorageFault(path)
    return db


if __name__ == "__main__":
    import runpy

    install(os.environ)
    runpy.run_module("tether.daemon", run_name="__main__", alter_sys=True)
