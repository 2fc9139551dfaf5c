"""One thread running calls in order, each result handed back to the event loop.

Each writer's group commit has one (group_commit.py: SQLite's COMMIT, PostgreSQL's
COMMIT and connecting); SQLite's reads run on another (sqlite/db.py).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import translate

__all__ = ["Worker"]

T = TypeVar("T")


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

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the thread, awaited; what it raises comes back translated.
        A cancelled caller does not stop the call, it just does not hear of it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.call(fn, loop, lambda ok, value: _settle(future, ok, value))
        return await future

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


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # the caller was cancelled
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
