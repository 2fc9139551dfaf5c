"""Test fault hooks: deliberate pauses that let the crash suite kill -9 the owner
inside a window that is otherwise only microseconds wide.

``TETHER_FAULT=NAME:SECONDS[,NAME:SECONDS...]`` is read once, when this module
is first imported. Unset (always, outside tests) every hook is a no-op costing
one dict lookup. Hooks, by name:

- ``pause_before_delivery``: a background delegation has just been recorded
  finished (delivery pending) and is about to be delivered into its origin
  session (``daemon/delegation.py``). See docs/recovery.md.
"""

from __future__ import annotations

import asyncio
import logging
import os

__all__ = ["FAULT_ENV", "parse_faults", "pause"]

FAULT_ENV = "TETHER_FAULT"
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
