"""What the editor executes for the owner: the part its files and its terminals share.

The owner asks through a notice on the adapter's connection (``fs.request``,
``terminal.request``); the connection's reader hands it over and must not wait,
so each request is answered in a task of its own, and the tasks still running
are cancelled when the adapter closes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..library.client import TetherClient

__all__ = ["Relay"]


class Relay:
    """The editor (its ACP connection), the adapter's tether client, the answers in flight."""

    def __init__(self) -> None:
        self.editor: Any = None
        self.tether: TetherClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def on_request(self, event: dict[str, Any]) -> None:
        """A request notice (the connection's reader calls this: answered apart)."""
        task = asyncio.create_task(self._answer(event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
