"""RequestClock: silence and deadline of one model request, each looked at twice."""

from __future__ import annotations

import asyncio
import time

import pytest

from tether.daemon.model.completions import AttemptFailed
from tether.daemon.model.request_clock import RequestClock


def clock(silence: float, request_timeout: float = 60.0) -> RequestClock:
    deadline = asyncio.get_running_loop().time() + request_timeout
    # the second look is as long as the silence: margin for a slow test machine
    return RequestClock(silence=silence, deadline=deadline, request_timeout=request_timeout,
                        second_look=silence)


async def test_silence_fails_the_attempt_as_a_retryable_timeout():
    with pytest.raises(AttemptFailed) as caught:
        async with clock(0.1):
            await asyncio.sleep(30)
    assert caught.value.reason == "timeout"
    assert caught.value.retryable is True
    assert "sent nothing for 0.1 s" in caught.value.what


async def test_the_deadline_fails_an_attempt_that_is_never_silent_and_is_not_retryable():
    with pytest.raises(AttemptFailed) as caught:
        async with clock(0.2, request_timeout=0.3) as c:
            while True:
                c.heard()
                await asyncio.sleep(0.02)
    assert caught.value.reason == "timeout"
    assert caught.value.retryable is False
    assert "within 0.3 s" in caught.value.what


async def test_a_limit_that_passed_while_the_loop_stood_still_is_looked_at_again():
    async with clock(0.5) as c:
        time.sleep(1.0)  # the loop stands still past the limit, as in a SIGSTOP
        # the check that is now due runs during this wait; it must not fail yet...
        await asyncio.sleep(0.05)
        c.heard()  # ...because the answer that was waiting in the socket is read now


async def test_heard_during_the_second_look_then_silent_again_still_fails():
    with pytest.raises(AttemptFailed) as caught:
        async with clock(0.3) as c:
            time.sleep(0.6)
            await asyncio.sleep(0.05)
            c.heard()
            await asyncio.sleep(30)
    assert caught.value.retryable is True


async def test_our_own_callbacks_are_not_the_providers_silence():
    async with clock(0.1) as c:
        with c.paused():
            await asyncio.sleep(0.4)
        await asyncio.sleep(0.05)


async def test_while_httpx_connects_or_sends_the_silence_does_not_run():
    async with clock(0.1) as c:
        await c.trace("connection.connect_tcp.started", {})
        await asyncio.sleep(0.4)  # bounded by httpx's own connect timeout instead
        await c.trace("connection.connect_tcp.complete", {})
        await c.trace("http11.receive_response_headers.started", {})
    with pytest.raises(AttemptFailed):
        async with clock(0.1) as c:
            await c.trace("http11.receive_response_headers.started", {})
            await asyncio.sleep(30)
