"""Model-provider client: one OpenAI-compatible chat-completions request in, one `Completion` out.

`OpenAIProvider` talks to any server that implements ``POST {base_url}/chat/completions``
(OpenAI, vLLM, llama.cpp server, Ollama, ...), streamed (SSE) or not, with tool calls.
providers.py turns a turn's settings into a `Provider`. This module is the
HTTP shell (requests and retries); answers.py reads an answer off the response as it
arrives, and parsing it, with no I/O, is completions.py, whose `Completion`, `ToolCall`,
`SSEDecoder` and `parse_completion` are importable from here too. Whether a request
streams is ``stream`` (auto | true | false): with auto, a server that cannot stream a
request is asked again without streaming, and remembered (stream_mode.py).

Every failure a caller can see is a `ProviderError` (provider_errors.py, with the table
of its reasons); httpx exceptions are translated there and nowhere else. Each attempt
runs under a `RequestClock` (request_clock.py): ``read_timeout`` bounds the provider's
silence, ``request_timeout`` the whole request with its retries, and an answer that
arrived while the process was stopped is read rather than timed out.

Retryable failures are retried inside `OpenAIProvider.complete` (bounded, with backoff)
unless text was already streamed to the caller or the request's deadline would pass
first; ``retryable`` on the final error tells the caller whether the failure was
transient by nature. The API key never appears in an error or a log line: it is scrubbed
even when the server echoes it back.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Protocol, runtime_checkable

import httpx
import orjson

from ..config.values import base_url_problem
from .answers import DeltaCallback, Progress, Response, read_body, read_stream
from .completions import (
    AttemptFailed,
    Completion,
    SSEDecoder,
    ToolCall,
    malformed,
    parse_completion,
    wire_message,
)
from .errors import (
    BUILD_FAILURES,
    HTTP_FAILURES,
    ProviderError,
    attempt_detail,
    attempt_failure,
    final_error,
    scrub_key,
    status_failure,
)
from .request_clock import RequestClock
from .transport import direct_route, encode_head

__all__ = [
    "Completion",
    "DeltaCallback",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "SSEDecoder",
    "ToolCall",
    "base_url_problem",
    "parse_completion",
]

from .retry_notice import announce_retry
from .stream_mode import STREAM_MODES, CannotStream, StreamMemory, normalise_mode, stream_failure

log = logging.getLogger(__name__)


#: the longest one model request may take, retries included, unless configured otherwise
REQUEST_TIMEOUT = 600.0

#: the most one answer may hold: a plain body, or what a stream collects (text,
#: reasoning, tool calls), and any single line of a stream; an endpoint that
#: never stops sending cannot exhaust the owner's memory
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


@runtime_checkable
class Provider(Protocol):
    """What the agent loop needs from a model: one chat completion per call."""

    name: str

    async def complete(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None,
        model: str,
        reasoning: str | None = None,
        on_delta: DeltaCallback | None = None,
        on_reasoning: DeltaCallback | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Completion:
        """Return the model's answer; text and reasoning are also passed, in order, to the
        callbacks. ``extras`` are more fields of the request (an HTTP client's
        ``response_format``, ``tool_choice``); a provider that cannot send them ignores them."""
        ...


# --------------------------------------------------------------------------------------
# The shell: HTTP, retries and callbacks.


class OpenAIProvider:
    """Client for an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` is the OpenAI-style API root, e.g. ``http://127.0.0.1:8000/v1`` or
    ``https://api.openai.com/v1``; requests go to ``{base_url}/chat/completions``. The caller
    owns ``client`` (and closes it). ``read_timeout`` bounds the provider's silence while we
    wait for it, so a server that stalls mid-stream fails as ``timeout`` rather than hanging
    the turn; ``request_timeout`` bounds the whole request, retries included, so neither
    does one that never stops sending. A request is attempted at most ``max_retries + 1``
    times.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        name: str,
        base_url: str,
        api_key: str | None,
        stream: bool | str = True,
        stream_memory: StreamMemory | None = None,
        connect_timeout: float = 10,
        read_timeout: float = 120,
        request_timeout: float = REQUEST_TIMEOUT,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_cap: float = 8,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if why := base_url_problem(base_url):
            raise ValueError(f"provider base_url {base_url!r} {why}")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if not (read_timeout > 0 and request_timeout > 0):
            raise ValueError("read_timeout and request_timeout must be > 0")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        # parsed once: httpx parses a string URL again for every request it builds
        self._url: httpx.URL | str = self.url
        try:
            self._url = httpx.URL(self.url)
        except (httpx.InvalidURL, ValueError):
            pass  # building the request says what is wrong with it, as before
        mode = normalise_mode(stream)
        if mode is None:
            raise ValueError(f"stream must be one of {', '.join(STREAM_MODES)}, not {stream!r}")
        #: auto | true | false (stream_mode.py)
        self.stream_mode = mode
        self._memory = stream_memory if stream_memory is not None else StreamMemory()
        self.max_retries = max_retries
        self._client = client
        self._api_key = api_key or None
        self._read_timeout = read_timeout
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._max_response_bytes = max_response_bytes
        # Reads are bounded by the RequestClock, not by httpx: an httpx read timeout that
        # fell due while the process was stopped would win over the answer already waiting
        # in the socket. write/pool share read_timeout: uploading a long transcript or
        # waiting for a pooled connection are both "the provider is slow".
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=None, write=read_timeout, pool=read_timeout
        )
        # a plain http:// endpoint of the owner's client: posted without httpx's layers
        self._direct = direct_route(client, self._url)
        self._timeouts = self._timeout.as_dict()

    def __repr__(self) -> str:
        return (f"OpenAIProvider(name={self.name!r}, url={self.url!r}, "
                f"stream={self.stream_mode})")

    def streams(self, model: str) -> bool:
        """Whether the next request for ``model`` asks for a stream."""
        if self.stream_mode == "auto":
            return self._memory.streams(self.base_url, model)
        return self.stream_mode == "true"

    def request_body(
        self, *, messages: list[dict], tools: list[dict] | None, model: str, reasoning: str | None,
        stream: bool | None = None,
        extras: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The JSON body `complete` sends (exposed so callers and tests can inspect it);
        ``stream`` None is what `streams` says."""
        if stream is None:
            stream = self.streams(model)
        body: dict[str, Any] = {"model": model, "messages": [wire_message(m) for m in messages],
                                "stream": stream}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        if stream:
            body["stream_options"] = {"include_usage": True}
        if reasoning and reasoning != "none":
            body["reasoning_effort"] = reasoning
        for key, value in (extras or {}).items():
            if key != "tool_choice" or tools:  # a tool_choice needs tools to choose from
                body[key] = value
        return body

    async def complete(
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None,
        model: str,
        reasoning: str | None = None,
        on_delta: DeltaCallback | None = None,
        on_reasoning: DeltaCallback | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Completion:
        """Request one completion, retrying transient failures; raise `ProviderError` on failure.

        Text and reasoning reach ``on_delta``/``on_reasoning`` in order: per chunk when
        streamed, or once in full when the server answered with a plain JSON body. Exceptions
        raised by the callbacks propagate unchanged. With ``stream`` auto, a streamed request
        the server cannot stream (stream_mode.py) is asked once more without streaming.
        """
        stream = self.streams(model)
        request = {"messages": messages, "tools": tools, "model": model, "reasoning": reasoning,
                   "extras": extras}
        try:
            return await self._request(request, stream, on_delta, on_reasoning)
        except CannotStream as failed:
            first = scrub_key(failed.failure.what, self._api_key)
            if failed.failure.body:
                first += f": {scrub_key(failed.failure.body, self._api_key)}"
        log.warning("provider %s: the streamed request for %s failed before any answer (%s); "
                    "asking again without streaming", self.name, model, first)
        try:
            completion = await self._request(request, False, on_delta, on_reasoning,
                                             after_broken_stream=True)
        except ProviderError as exc:
            raise ProviderError(
                exc.reason, f"{exc.detail}; asked without streaming after the streamed "
                f"request failed ({first})", status=exc.status, retryable=exc.retryable,
            ) from None
        self._memory.remember(self.base_url, model, first)
        return completion

    async def _request(
        self,
        request: dict[str, Any],
        stream: bool,
        on_delta: DeltaCallback | None,
        on_reasoning: DeltaCallback | None,
        after_broken_stream: bool = False,
    ) -> Completion:
        """One request with its retries; `CannotStream` when ``stream`` auto should ask
        again without streaming. ``after_broken_stream``: the server may close the
        connection a failed stream was read on after it went back to the pool, so a
        connection error of the first attempt is asked again at once, uncounted."""
        model = request["model"]
        body = orjson.dumps(self.request_body(**request, stream=stream))
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._request_timeout
        attempts = self.max_retries + 1
        attempt = 0
        while True:
            attempt += 1
            progress = Progress()
            clock = RequestClock(
                silence=self._read_timeout, deadline=deadline, request_timeout=self._request_timeout
            )
            try:
                return await self._attempt(
                    body, headers, model, on_delta, on_reasoning, progress, clock, stream
                )
            except AttemptFailed as failure:
                if stream and self.stream_mode == "auto" and stream_failure(
                        failure, in_stream=progress.in_stream,
                        answered=progress.answered or progress.emitted):
                    raise CannotStream(failure) from None
                if after_broken_stream and failure.reason == "connection_error":
                    after_broken_stream = False
                    attempt -= 1
                    log.info("provider %s: %s, on the connection the failed stream left; "
                             "asking on a new one", self.name, failure.what)
                    continue
                delay = self._delay(attempt, failure.retry_after)
                spare = deadline - loop.time() - delay
                if (why_not := self._why_not_retry(failure, attempt, progress, spare)) is not None:
                    raise final_error(failure, attempt, why_not, self._api_key) from None
                log.warning(
                    "provider %s: %s (attempt %d/%d); retrying in %.2fs",
                    self.name,
                    scrub_key(failure.what, self._api_key),
                    attempt,
                    attempts,
                    delay,
                )
                await announce_retry({
                    "attempt": attempt + 1, "attempts": attempts, "delay_seconds": delay,
                    "reason": failure.reason, "detail": attempt_detail(failure, self._api_key)})
                await asyncio.sleep(delay)

    async def _attempt(
        self,
        body: bytes,
        headers: dict[str, str],
        model: str,
        on_delta: DeltaCallback | None,
        on_reasoning: DeltaCallback | None,
        progress: Progress,
        clock: RequestClock,
        stream: bool,
    ) -> Completion:
        direct = self._direct
        try:
            if direct is None:
                request = self._client.build_request(
                    "POST", self._url, content=body, headers=headers, timeout=self._timeout,
                    extensions={"trace": clock.trace},
                )
            else:
                head = encode_head(headers)
        except BUILD_FAILURES as exc:
            raise self._failure(exc) from None
        response: Response
        try:
            async with clock:
                if direct is None:
                    response = await self._client.send(request, stream=True)
                else:
                    response = await direct(head, body, self._timeouts, clock.trace)
                try:
                    if not 200 <= response.status_code < 300:
                        raise await status_failure(response, clock.heard, self._api_key)
                    ctype = response.headers.get("content-type", "").lower()
                    if "event-stream" in ctype or ("json" not in ctype and stream):
                        return await read_stream(
                            response, model, on_delta, on_reasoning, progress, clock,
                            cap=self._max_response_bytes,
                        )
                    raw = await read_body(response, clock, cap=self._max_response_bytes)
                finally:
                    await response.aclose()
        except HTTP_FAILURES as exc:
            raise self._failure(exc) from None
        # A plain JSON answer (asked for or not): parsed whole, then handed to the callbacks
        # once, so viewers see the text whichever way the server chose to answer.
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise malformed(f"body is not JSON: {raw[:80]!r}") from None
        completion = parse_completion(parsed, model)
        if completion.reasoning and on_reasoning is not None:
            await on_reasoning(completion.reasoning)
        if completion.text and on_delta is not None:
            await on_delta(completion.text)
        return completion

    def _failure(self, exc: Exception) -> AttemptFailed:
        return attempt_failure(exc, url=self.url, connect_timeout=self._connect_timeout,
                               read_timeout=self._read_timeout)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._backoff_cap)
        # Jitter spreads out sibling requests (parallel delegation children) that failed
        # together, so they do not all hit a rate-limited server again in the same instant.
        delay = min(self._backoff_cap, self._backoff_base * 2 ** (attempt - 1))
        return delay * random.uniform(0.5, 1.0)

    def _why_not_retry(
        self, failure: AttemptFailed, attempt: int, progress: Progress, spare: float
    ) -> str | None:
        """None to retry; else why the request ends here ("" when that goes without saying)."""
        if progress.emitted:
            return "part of the answer had already been streamed"
        if not failure.retryable or attempt > self.max_retries:
            return ""
        if spare <= 0:
            return f"the request's {self._request_timeout:g} s deadline would pass first"
        return None

