"""Model-provider client: one OpenAI-compatible chat-completions request in, one `Completion` out.

`OpenAIProvider` talks to any server that implements ``POST {base_url}/chat/completions``
(OpenAI, vLLM, llama.cpp server, Ollama, ...), streamed (SSE) or not, with tool calls.
providers.py turns a turn's settings into a `Provider`. This module is the
HTTP shell (requests, retries, callbacks); reading the responses, with no I/O, is
completions.py, whose `Completion`, `ToolCall`, `SSEDecoder` and `parse_completion` are
importable from here too.

Every failure a caller can see is a `ProviderError`; httpx exceptions are translated here
and nowhere else. Its ``reason`` is one of:

=================== ====================================================== =========
reason              when                                                   retryable
=================== ====================================================== =========
rate_limited        HTTP 429                                               yes
server_error        HTTP 5xx, or an ``error`` object inside a 200 body      yes
timeout             connect timeout, no bytes for ``read_timeout``, 408     yes
connection_error    refused, reset, or closed mid-body                      yes
auth_failed         HTTP 401 / 403                                         no
not_found           HTTP 404 (usually a wrong base_url or model)           no
bad_request         any other 4xx, or a URL httpx cannot speak to          no
malformed_response  a body or SSE stream that is not a chat completion,    no
                    or an answer larger than ``max_response_bytes``
=================== ====================================================== =========

Retryable failures are retried inside `OpenAIProvider.complete` (bounded, with backoff) unless
text was already streamed to the caller; ``retryable`` on the final error tells the caller
whether the failure was transient by nature. The API key never appears in an error or a log
line: it is scrubbed even when the server echoes it back.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import httpx
import orjson

from .completions import (
    AttemptFailed,
    Completion,
    LineSplitter,
    SSEDecoder,
    StreamAccumulator,
    ToolCall,
    classify_status,
    malformed,
    parse_completion,
    retry_after_seconds,
)

__all__ = [
    "Completion",
    "DeltaCallback",
    "OpenAIProvider",
    "PROVIDER_NAMES",
    "Provider",
    "ProviderError",
    "SSEDecoder",
    "ToolCall",
    "base_url_problem",
    "parse_completion",
]

log = logging.getLogger(__name__)

DeltaCallback = Callable[[str], Awaitable[None]]

PROVIDER_NAMES = ("custom", "openai", "demo")
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: the most one answer may hold: a plain body, or what a stream collects (text,
#: reasoning, tool calls), and any single line of a stream; an endpoint that
#: never stops sending cannot exhaust the owner's memory
MAX_RESPONSE_BYTES = 64 * 1024 * 1024

# How much of an error body we read: enough for any useful message, bounded so a
# misbehaving server cannot make us buffer megabytes of HTML.
_ERROR_BODY_READ_LIMIT = 4096
_ERROR_EXCERPT_CHARS = 200
_REDACTED = "[redacted]"


class ProviderError(Exception):
    """A request to the model failed; ``reason`` is stable snake_case, ``detail`` is for humans."""

    def __init__(
        self, reason: str, detail: str, *, status: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.status = status
        self.retryable = retryable

    def __repr__(self) -> str:
        return (
            f"ProviderError(reason={self.reason!r}, status={self.status!r}, detail={self.detail!r})"
        )


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
    ) -> Completion:
        """Return the model's answer; text and reasoning are also passed, in order, to the callbacks."""
        ...


# --------------------------------------------------------------------------------------
# The shell: HTTP, retries and callbacks.


class _Progress:
    """Whether this attempt already handed text to the caller (then it must not be retried)."""

    emitted = False


def base_url_problem(base_url: str) -> str | None:
    """Why no request could be made to ``base_url``, or None if one can."""
    if not base_url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    try:
        url = httpx.URL(base_url)
        port = url.port
    except (httpx.InvalidURL, ValueError) as exc:
        return f"is not a valid URL ({exc})"
    if not url.host:
        return "has no host"
    if port is not None and not 0 < port < 65536:
        return f"has port {port}, outside 1..65535"
    return None


class OpenAIProvider:
    """Client for an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` is the OpenAI-style API root, e.g. ``http://127.0.0.1:8000/v1`` or
    ``https://api.openai.com/v1``; requests go to ``{base_url}/chat/completions``. The caller
    owns ``client`` (and closes it). ``read_timeout`` bounds the silence between two reads,
    so a server that stalls mid-stream fails as ``timeout`` rather than hanging the turn.
    A request is attempted at most ``max_retries + 1`` times.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        name: str,
        base_url: str,
        api_key: str | None,
        stream: bool = True,
        connect_timeout: float = 10,
        read_timeout: float = 120,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_cap: float = 8,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if why := base_url_problem(base_url):
            raise ValueError(f"provider base_url {base_url!r} {why}")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.stream = stream
        self.max_retries = max_retries
        self._client = client
        self._api_key = api_key or None
        self._read_timeout = read_timeout
        self._connect_timeout = connect_timeout
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._max_response_bytes = max_response_bytes
        # write/pool share read_timeout: uploading a long transcript or waiting for a pooled
        # connection are both "the provider is slow", bounded like a read.
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=read_timeout
        )

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, url={self.url!r}, stream={self.stream})"

    def request_body(
        self, *, messages: list[dict], tools: list[dict] | None, model: str, reasoning: str | None
    ) -> dict[str, Any]:
        """The JSON body `complete` sends (exposed so callers and tests can inspect it)."""
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": self.stream}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if reasoning and reasoning != "none":
            body["reasoning_effort"] = reasoning
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
    ) -> Completion:
        """Request one completion, retrying transient failures; raise `ProviderError` on failure.

        Text and reasoning reach ``on_delta``/``on_reasoning`` in order: per chunk when
        streamed, or once in full when the server answered with a plain JSON body. Exceptions
        raised by the callbacks propagate unchanged.
        """
        body = orjson.dumps(
            self.request_body(messages=messages, tools=tools, model=model, reasoning=reasoning)
        )
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self.stream else "application/json",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            progress = _Progress()
            try:
                return await self._attempt(body, headers, model, on_delta, on_reasoning, progress)
            except AttemptFailed as failure:
                if not failure.retryable or progress.emitted or attempt == attempts:
                    raise self._final_error(failure, attempt, progress.emitted) from None
                delay = self._delay(attempt, failure.retry_after)
                log.warning(
                    "provider %s: %s (attempt %d/%d); retrying in %.2fs",
                    self.name,
                    self._scrub(failure.what),
                    attempt,
                    attempts,
                    delay,
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    async def _attempt(
        self,
        body: bytes,
        headers: dict[str, str],
        model: str,
        on_delta: DeltaCallback | None,
        on_reasoning: DeltaCallback | None,
        progress: _Progress,
    ) -> Completion:
        try:
            async with self._client.stream(
                "POST", self.url, content=body, headers=headers, timeout=self._timeout
            ) as response:
                if not 200 <= response.status_code < 300:
                    raise await self._status_failure(response)
                ctype = response.headers.get("content-type", "").lower()
                as_stream = "event-stream" in ctype or ("json" not in ctype and self.stream)
                if as_stream:
                    return await self._read_stream(
                        response, model, on_delta, on_reasoning, progress
                    )
                raw = await self._read_body(response)
        except httpx.TimeoutException as exc:
            raise AttemptFailed("timeout", self._timeout_what(exc), retryable=True) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL, OverflowError) as exc:
            # a URL no request can go to (the port out of range is the socket's OverflowError)
            raise AttemptFailed(
                "bad_request", f"cannot request {self.url}: {exc}", retryable=False
            ) from None
        except httpx.TransportError as exc:
            what = f"connection to provider at {self.url} failed ({type(exc).__name__}: {exc})"
            raise AttemptFailed("connection_error", what, retryable=True) from None
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

    async def _read_stream(
        self,
        response: httpx.Response,
        model: str,
        on_delta: DeltaCallback | None,
        on_reasoning: DeltaCallback | None,
        progress: _Progress,
    ) -> Completion:
        decoder = SSEDecoder()
        acc = StreamAccumulator(model)

        async def take(data: str) -> None:
            text, reasoning = acc.add(data)
            if reasoning and on_reasoning is not None:
                progress.emitted = True
                await on_reasoning(reasoning)
            if text and on_delta is not None:
                progress.emitted = True
                await on_delta(text)

        lines = LineSplitter()
        cap = self._max_response_bytes
        async for text in response.aiter_text():
            for line in lines.feed(text):
                data = decoder.feed_line(line)
                if decoder.pending > cap:
                    raise self._too_large()
                if data is not None:
                    await take(data)
                    if acc.size > cap:
                        raise self._too_large()
                    if acc.done:
                        return acc.result()
            if lines.pending > cap:
                raise self._too_large()
        last = lines.flush()
        data = decoder.feed_line(last) if last is not None else None
        if data is not None:
            await take(data)
        tail = decoder.flush()
        if tail is not None and not acc.done:
            await take(tail)
        return acc.result()

    async def _read_body(self, response: httpx.Response) -> bytes:
        body = bytearray()
        async for piece in response.aiter_bytes():
            body += piece
            if len(body) > self._max_response_bytes:
                raise self._too_large()
        return bytes(body)

    def _too_large(self) -> AttemptFailed:
        return malformed(f"more than {self._max_response_bytes} bytes in one answer")

    async def _status_failure(self, response: httpx.Response) -> AttemptFailed:
        reason, retryable = classify_status(response.status_code)
        raw = bytearray()
        try:
            async for piece in response.aiter_bytes():
                raw += piece
                if len(raw) >= _ERROR_BODY_READ_LIMIT:
                    break
        except httpx.HTTPError:
            pass  # the status is what matters; a body we could not read is just left out
        # Scrub before cutting, so a key straddling the cut cannot leave a readable prefix.
        excerpt = " ".join(self._scrub(raw.decode("utf-8", "replace")).split())
        return AttemptFailed(
            reason,
            f"provider returned HTTP {response.status_code}",
            retryable=retryable,
            status=response.status_code,
            body=excerpt[:_ERROR_EXCERPT_CHARS],
            retry_after=retry_after_seconds(response.headers.get("retry-after")),
        )

    def _timeout_what(self, exc: httpx.TimeoutException) -> str:
        if isinstance(exc, httpx.ConnectTimeout):
            return (
                f"connecting to provider at {self.url} timed out after {self._connect_timeout:g} s"
            )
        if isinstance(exc, httpx.ReadTimeout):
            return f"provider sent nothing for {self._read_timeout:g} s"
        return f"provider request timed out ({type(exc).__name__})"

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._backoff_cap)
        # Jitter spreads out sibling requests (parallel delegation children) that failed
        # together, so they do not all hit a rate-limited server again in the same instant.
        delay = min(self._backoff_cap, self._backoff_base * 2 ** (attempt - 1))
        return delay * random.uniform(0.5, 1.0)

    def _final_error(self, failure: AttemptFailed, attempts: int, emitted: bool) -> ProviderError:
        detail = f"{failure.what} after {attempts} attempt{'s' if attempts != 1 else ''}"
        if emitted:
            detail += " (not retried: part of the answer had already been streamed)"
        if failure.body:
            detail += f": {failure.body}"
        return ProviderError(
            failure.reason,
            self._scrub(detail),
            status=failure.status,
            retryable=failure.retryable,
        )

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, _REDACTED) if self._api_key else text
