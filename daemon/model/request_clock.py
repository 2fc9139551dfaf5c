"""The clock of one model request: how long the provider may stay silent, and when the
whole request must be over. Each limit is checked a second time before the request fails.

`RequestClock` guards one attempt (``async with clock:``) and fails it with a ``timeout``
`AttemptFailed` when the provider has sent nothing for ``silence`` seconds while we wait
for it, or when ``deadline`` passes (a loop time shared by every attempt of one request).
Only waiting for the provider counts as silence. While httpx is still connecting or
sending, its own connect and write timeouts bound that step (httpx reports its steps to
`trace`, its ``trace`` request extension). While a caller's callback runs, inside
`paused`, the silence clock stands still too.

Why check twice. If the process is stopped (SIGSTOP, Ctrl-Z on ``serve --foreground``)
past a limit, the first time the event loop wakes up it does not see the sockets. The
stop interrupts ``epoll_wait``, and Python does not call it again once its timeout has
passed, so no socket is ready on that turn of the loop. asyncio then runs every timer
that is due before it polls again. A plain timeout there cancels a read whose answer has
been waiting in the socket all along, and the retry sends the prompt to the model a
second time. So when a limit passes, the clock first waits ``second_look`` seconds, and
the loop polls its sockets during that wait. The attempt fails only if the provider is
still silent after it (or, for the deadline, if the attempt is still running).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from .completions import AttemptFailed

__all__ = ["SECOND_LOOK_SECONDS", "RequestClock"]

#: how long a passed limit waits for bytes that may already be in the socket; shorter
#: for a limit that is itself shorter
SECOND_LOOK_SECONDS = 1.0


class RequestClock:
    """Silence and deadline of one attempt; see the module docstring.

    ``deadline`` is an event-loop time (``loop.time()``); ``request_timeout`` is the span it
    was computed from, named in the failure.
    """

    def __init__(
        self,
        *,
        silence: float,
        deadline: float,
        request_timeout: float,
        second_look: float = SECOND_LOOK_SECONDS,
    ) -> None:
        self._silence = silence
        self._deadline = deadline
        self._request_timeout = request_timeout
        self._second_look = second_look
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timeout: asyncio.Timeout | None = None
        self._check_handle: asyncio.TimerHandle | None = None
        self._last = 0.0  # loop time we last heard from the provider (or resumed waiting)
        self._listening = True  # waiting for the provider, as opposed to our own steps
        self._looked = False  # a limit has passed and its second look is under way
        self._look_began = 0.0
        self._expired: str | None = None  # "silence" or "deadline", once the attempt failed

    def heard(self) -> None:
        """The provider sent something (or we start waiting for it now)."""
        if self._loop is not None:
            self._last = self._loop.time()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Our own work runs (a callback): not the provider's silence. The deadline still runs."""
        self._listening = False
        try:
            yield
        finally:
            self._listening = True
            self.heard()

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's ``trace`` extension: each step of the exchange as it starts and ends."""
        if event.endswith(".started"):
            # connect_tcp, start_tls, send_request_* are bounded by httpx's own timeouts;
            # from receive_response_headers on, the provider has the word
            self._listening = ".receive_response" in event
        self.heard()

    async def __aenter__(self) -> RequestClock:
        self._loop = asyncio.get_running_loop()
        self._timeout = asyncio.timeout(None)
        await self._timeout.__aenter__()
        self.heard()
        self._arm(self._next_check(self._loop.time()))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._check_handle is not None:
            self._check_handle.cancel()
            self._check_handle = None
        assert self._timeout is not None
        try:
            await self._timeout.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            raise self._failure() from None

    def _next_check(self, now: float) -> float:
        # While not listening, look again one silence from now: the silence that then
        # counts starts no earlier than the moment we listen again.
        return min(self._deadline, (self._last if self._listening else now) + self._silence)

    def _arm(self, when: float) -> None:
        assert self._loop is not None
        self._check_handle = self._loop.call_at(when, self._check)

    def _check(self) -> None:
        assert self._loop is not None and self._timeout is not None
        now = self._loop.time()
        if now >= self._deadline:
            why = "deadline"
        elif self._listening and now >= self._last + self._silence:
            why = "silence"
            if self._looked and self._last > self._look_began:
                self._looked = False  # heard during the look, then silent again: a new silence
        else:  # heard from the provider since this check was armed
            self._looked = False
            self._arm(self._next_check(now))
            return
        if not self._looked:
            self._looked, self._look_began = True, now
            self._arm(now + min(self._second_look, self._silence))
            return
        self._expired = why
        self._timeout.reschedule(now)  # cancels the attempt; __aexit__ reports why

    def _failure(self) -> AttemptFailed:
        if self._expired == "deadline":
            # the deadline bounds every attempt of the request: none is left to retry in
            return AttemptFailed(
                "timeout",
                f"provider did not finish its answer within {self._request_timeout:g} s",
                retryable=False,
            )
        return AttemptFailed(
            "timeout", f"provider sent nothing for {self._silence:g} s", retryable=True
        )
