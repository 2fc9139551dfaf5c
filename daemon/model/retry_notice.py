"""Telling the session that the model is being retried (``model.retry`` events).

The provider's retry loop knows when it waits before another attempt; the turn
knows which session to tell. A context variable joins them without threading
a callback through the engine: the turn runner sets it around the agent run,
every request made inside (the parent's, and helpers' that inherit the context)
announces its retries through it. A failed announcement never fails the request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

__all__ = ["RETRY_LISTENER", "announce_retry"]

log = logging.getLogger(__name__)

RETRY_LISTENER: ContextVar[Callable[[dict[str, Any]], Awaitable[None]] | None] = ContextVar(
    "tether_retry_listener", default=None)


async def announce_retry(info: dict[str, Any]) -> None:
    listener = RETRY_LISTENER.get()
    if listener is None:
        return
    try:
        await listener(info)
    except Exception as exc:  # noqa: BLE001 - a notice, not the request
        log.warning("could not record a model retry notice: %s", exc)
