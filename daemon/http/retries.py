"""SDK retries recognised and attached to their first attempt (docs/http.md).

The ``openai`` SDKs retry a request by themselves (timeouts, dropped
connections, 408/409/429/5xx), send the same body again with
``x-stainless-retry-count`` > 0, and send no Idempotency-Key unless told. Such
a retry, from the same token with the same body (and the same session or
conversation header) within ``http.retry_window_seconds`` of the first
attempt, is attached to that attempt's admission instead of running again:
it follows the turn if it still runs and gets its answer if it has finished.

A client that announces retries (it sends ``x-stainless-retry-count``, 0 on a
first attempt) and goes away before its answer leaves its turn running for
``http.retry_claim_seconds``: a retry that comes in that time claims it; if
none does, the turn is cancelled then, as nobody can fetch its answer.

In the owner's memory: an owner restart forgets the attempts (an
Idempotency-Key is the durable way, docs/http.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from .turn import Opened

__all__ = ["Attempts", "retry_count"]

#: attempts remembered at most; the oldest are forgotten first
MAX_ATTEMPTS = 10_000

Ident = tuple[str, ...]


def retry_count(headers: dict[str, str]) -> int | None:
    """The SDK's ``x-stainless-retry-count``: None when the client sent none (it
    does not announce retries), 0 for a first attempt or a value not a count."""
    raw = headers.get("x-stainless-retry-count")
    if raw is None:
        return None
    return int(raw) if raw.strip().isdigit() else 0


@dataclass
class _Attempt:
    opened: Opened
    at: float
    followers: int = 0
    cancel: asyncio.TimerHandle | None = field(default=None, repr=False)


class Attempts:
    """First attempts by (token, body digest, session/conversation header)."""

    def __init__(self, window: float, claim: float,
                 cancel: Callable[[Opened], Awaitable[None]]) -> None:
        self._window = window
        self._claim = claim
        self._cancel = cancel
        self._attempts: dict[Ident, _Attempt] = {}
        self._cancelling: set[asyncio.Task[None]] = set()

    def _prune(self, now: float) -> None:
        # dicts keep insertion order: the oldest attempts come first
        while self._attempts:
            ident, first = next(iter(self._attempts.items()))
            if now - first.at <= self._window and len(self._attempts) <= MAX_ATTEMPTS:
                return
            del self._attempts[ident]

    def claim(self, ident: Ident) -> Opened | None:
        """The first attempt's admission for a retry (as a replay), if there is
        one within the window; its turn is no longer cancelled for want of a claim."""
        self._prune(time.monotonic())
        first = self._attempts.get(ident)
        if first is None:
            return None
        if first.cancel is not None:
            first.cancel.cancel()
            first.cancel = None
        first.followers += 1
        return replace(first.opened, replayed=True)

    def record(self, ident: Ident, opened: Opened) -> None:
        """A first attempt, now admitted, that a retry may claim."""
        now = time.monotonic()
        self._prune(now)
        self._attempts.pop(ident, None)
        self._attempts[ident] = _Attempt(opened, now, followers=1)

    def release(self, ident: Ident, delivered: bool) -> None:
        """An attempt's request ended; undelivered with nobody else following,
        its turn is cancelled unless a retry claims it in time."""
        first = self._attempts.get(ident)
        if first is None:
            return
        first.followers = max(0, first.followers - 1)
        if delivered or first.followers or first.cancel is not None:
            return
        loop = asyncio.get_running_loop()
        first.cancel = loop.call_later(self._claim, self._unclaimed, ident, first)

    def forget(self, ident: Ident) -> None:
        """A retry of this should run anew (its turn failed before it did anything)."""
        first = self._attempts.pop(ident, None)
        if first is not None and first.cancel is not None:
            first.cancel.cancel()

    def _unclaimed(self, ident: Ident, first: _Attempt) -> None:
        first.cancel = None
        task = asyncio.ensure_future(self._cancel(first.opened))
        self._cancelling.add(task)
        task.add_done_callback(self._cancelling.discard)

    def close(self) -> None:
        """Drop the pending cancels (the owner stops; its turns are stopped anyway)."""
        for first in self._attempts.values():
            if first.cancel is not None:
                first.cancel.cancel()
        self._attempts.clear()
