"""Test fault hooks: deliberate pauses that let the crash suite kill -9 the owner
inside a window that is otherwise only microseconds wide.

``TETHER_FAULT=NAME:SECONDS[,NAME:SECONDS...]`` is read once, when this module
is first imported. Unset (always, outside tests) every hook is a no-op costing
one dict lookup. Hooks, by name:

- ``pause_before_delivery``: a background delegation has just been recorded
  finished (delivery pending) and is about to be delivered into its origin
  session (``daemon/delegation.py``). See docs/recovery.md.
- ``pause_before_process_notice``: a background process with
  ``notify_on_complete`` has just been recorded ended (notice pending) and its
  notice is about to be delivered (``daemon/toolsets/processes.py``).

``TETHER_FAULT_STORAGE=PATH`` arms the storage fault hook for the storage-fault
suite: before each write group the store reads PATH, and its content switches
the writer into a failure SQLite itself produces — ``readonly`` (``PRAGMA
query_only``: every write fails with SQLITE_READONLY) or ``full`` (the file is
capped at its current size: SQLITE_FULL on the next page it needs). A missing or
empty file is normal operation, so a test can break and heal the store while the
owner runs (root ignores file modes, so chmod cannot do this). Unset, the store
is not even asked.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

__all__ = ["FAULT_ENV", "STORAGE_FAULT_ENV", "parse_faults", "pause", "storage_fault"]

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


_FAULTS = parse_faults(os.environ.get(FAULT_ENV, ""))


async def pause(name: str) -> None:
    """Sleep for the configured seconds if the fault ``name`` is armed."""
    seconds = _FAULTS.get(name)
    if seconds:
        log.warning("test fault hook %s: pausing %.1f s (%s is set)", name, seconds, FAULT_ENV)
        await asyncio.sleep(seconds)


def storage_fault() -> Callable[[], str | None] | None:
    """The store's fault hook if TETHER_FAULT_STORAGE is set, else None."""
    path = os.environ.get(STORAGE_FAULT_ENV)
    if not path:
        return None
    log.warning("storage fault hook armed: %s (%s is set)", path, STORAGE_FAULT_ENV)

    def mode() -> str | None:
        try:
            with open(path, encoding="utf-8") as f:
                value = f.read().strip()
        except OSError:
            return None
        return value if value in STORAGE_FAULTS else None

    return mode
