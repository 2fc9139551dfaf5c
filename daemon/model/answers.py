"""Reading one model answer off a response, as it arrives.

`read_stream` feeds a ``text/event-stream`` body through completions.py's parser and hands
each piece of text and reasoning to the caller's callbacks in order; `read_body` collects
a plain body. Both stop at ``cap`` bytes (an endpoint that never stops sending cannot
exhaust the owner's memory) and tell the attempt's `RequestClock` each time the provider
is heard from. The response is an httpx.Response or the model client's own transport's
`Reply` (transport.py): `Response` is what both give. httpx exceptions pass through
untouched: provider.py translates them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol

from .completions import (
    AttemptFailed,
    Completion,
    LineSplitter,
    SSEDecoder,
    StreamAccumulator,
    malformed,
)
from .request_clock import RequestClock

__all__ = ["DeltaCallback", "Progress", "Response", "read_body", "read_stream"]

DeltaCallback = Callable[[str], Awaitable[None]]


class Response(Protocol):
    """What the model client reads of a response: httpx.Response's names."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def url(self) -> object: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    def aiter_text(self) -> AsyncIterator[str]: ...

    async def aclose(self) -> None: ...

#: how long the end of a body may take to follow a stream's ``[DONE]``: read to its
#: end, the connection goes back to the client's pool for the next request; a
#: server still sending after that has its connection closed instead
DRAIN_SECONDS = 0.25


class Progress:
    """What this attempt got: ``emitted``, text handed to the caller (then it must not be
    retried); ``in_stream``, a 2xx event stream began; ``answered``, any text, reasoning or
    tool call arrived in it (then it must not be asked again without streaming)."""

    emitted = False
    in_stream = False
    answered = False


def _too_large(cap: int) -> AttemptFailed:
    return malformed(f"more than {cap} bytes in one answer")


async def read_stream(
    response: Response,
    model: str,
    on_delta: DeltaCallback | None,
    on_reasoning: DeltaCallback | None,
    progress: Progress,
    clock: RequestClock,
    *,
    cap: int,
) -> Completion:
    """The streamed answer, its deltas passed on as they arrive; `AttemptFailed` if it is
    not a chat completion or exceeds ``cap``."""
    decoder = SSEDecoder()
    acc = StreamAccumulator(model)
    progress.in_stream = True

    async def take(data: str) -> None:
        text, reasoning = acc.add(data)
        if acc.size:
            progress.answered = True
        with clock.paused():  # the callbacks' time is not the provider's silence
            if reasoning and on_reasoning is not None:
                progress.emitted = True
                await on_reasoning(reasoning)
            if text and on_delta is not None:
                progress.emitted = True
                await on_delta(text)

    lines = LineSplitter()
    pieces = response.aiter_text()
    async for text in pieces:
        clock.heard()
        for line in lines.feed(text):
            data = decoder.feed_line(line)
            if decoder.pending > cap:
                raise _too_large(cap)
            if data is not None:
                await take(data)
                if acc.size > cap:
                    raise _too_large(cap)
                if acc.done:
                    await _drain(pieces, cap)
                    return acc.result()
        if lines.pending > cap:
            raise _too_large(cap)
    last = lines.flush()
    data = decoder.feed_line(last) if last is not None else None
    if data is not None:
        await take(data)
    tail = decoder.flush()
    if tail is not None and not acc.done:
        await take(tail)
    return acc.result()


async def _drain(pieces: AsyncIterator[str], cap: int) -> None:
    """Read what follows ``[DONE]`` (the body's end) for a moment, so the response
    ends whole and its connection is kept; past ``cap`` characters or
    `DRAIN_SECONDS` it is left, and closing the response closes the connection."""
    left = cap
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for text in pieces:
                left -= len(text)
                if left < 0:
                    return


async def read_body(response: Response, clock: RequestClock, *, cap: int) -> bytes:
    """The whole plain body; `AttemptFailed` if it exceeds ``cap``."""
    body = bytearray()
    async for piece in response.aiter_bytes():
        clock.heard()
        body += piece
        if len(body) > cap:
            raise _too_large(cap)
    return bytes(body)
