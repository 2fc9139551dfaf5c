"""One thread running calls in order, each result handed back to the event loop.

The SQLite writer commits on one (db.py); the PostgreSQL writer runs its whole
groups on one (pg.py).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

from .errors import translate

__all__ = ["Worker"]


class Worker:
    """One thread running calls in order; each result comes back as a loop callback."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.AbstractEventLoop,
                                             Callable[[bool, Any], None]] | None]
        self._calls = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop,
             done: Callable[[bool, Any], None]) -> None:
        self._calls.put((fn, loop, done))

    def _loop(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, loop, done = item
            try:
                ok, value = True, fn()
            except BaseException as exc:  # noqa: BLE001 - every failure goes to its caller
                ok, value = False, translate(exc)
            try:
                loop.call_soon_threadsafe(done, ok, value)
            except RuntimeError:  # the loop is gone: nobody is waiting any more
                pass

    async def stop(self) -> None:
        self._calls.put(None)
        await asyncio.to_thread(self._thread.join)
