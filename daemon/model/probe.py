"""`tether doctor`'s look at a model endpoint: ``GET {base_url}/models`` with the key.

`probe_models` makes one request, no retries, nothing sent to the model: does a server answer at
the configured address, does it take the configured key, and does it serve
the configured model? The answer is a `ModelsProbe`: a line for a person and,
when something is wrong, the likely fix. Failures are classified as a model
request's are (provider_errors.py: the same "missing `/v1`" and API-key hints),
except that a refused connection says plainly ``no server at HOST:PORT``. The
key is sent only to this endpoint and never appears in what comes back.

`probe_streaming` is the one look that does ask the model: a small streamed question
(at most 16 tokens) carrying one tool, and the same without streaming if the server
cannot stream it, to say which ``model.stream`` works (stream_mode.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from ..config.turn import shown_url
from .errors import BUILD_FAILURES, attempt_failure, refused, scrub_key, status_fix

__all__ = ["ModelsProbe", "StreamProbe", "probe_models", "probe_streaming"]

#: served models named in a report at most (OpenAI serves about a hundred)
SHOWN_MODELS = 12


@dataclass(frozen=True)
class ModelsProbe:
    ok: bool
    url: str  # the URL asked, without credentials or query
    status: int | None  # the HTTP status, None when no answer came
    detail: str  # one line: what happened
    fix: str = ""  # what to do about it ("" when ok)
    served: list[str] = field(default_factory=list)  # model ids the server listed


def _host_port(url: httpx.URL) -> str:
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host}:{port}"


def probe_models(base_url: str, api_key: str | None, model: str, *,
                 connect_timeout: float = 10.0, timeout: float = 20.0) -> ModelsProbe:
    """Ask ``{base_url}/models`` whether ``model`` is served, with ``api_key``."""
    url = base_url.rstrip("/") + "/models"
    shown = shown_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout)) as http:
            response = http.get(url, headers=headers)
    except BUILD_FAILURES as exc:
        if isinstance(exc, httpx.ConnectError) and refused(exc):
            return ModelsProbe(False, shown, None,
                               f"no server at {_host_port(httpx.URL(url))} (GET {shown})",
                               "start the model server, or set model.base_url (or "
                               "OPENAI_BASE_URL) to the address it listens on")
        failure = attempt_failure(exc, url=shown, connect_timeout=connect_timeout,
                                  read_timeout=timeout)
        return ModelsProbe(False, shown, None, scrub_key(failure.what, api_key),
                           "check that the model server runs and that model.base_url is "
                           "its address")
    status = response.status_code
    if status != 200:
        fix = status_fix(status, url).removeprefix("; ")
        body = scrub_key(" ".join(response.text.split())[:200], api_key)
        return ModelsProbe(False, shown, status,
                           f"GET {shown} answered HTTP {status}" + (f": {body}" if body else ""),
                           fix or "check model.base_url: it should be the server's OpenAI-"
                                  "compatible root, where /models and /chat/completions are")
    try:
        listed = response.json().get("data")
        served = [str(m["id"]) for m in listed]
    except (ValueError, AttributeError, TypeError, KeyError):
        return ModelsProbe(False, shown, status,
                           f"GET {shown} answered HTTP 200, but not with a list of models",
                           "check model.base_url: it should be the server's OpenAI-compatible "
                           "root, where /models and /chat/completions are")
    if model in served:
        return ModelsProbe(True, shown, status,
                           f"{model} is served at {shown} (HTTP 200, {len(served)} model"
                           f"{'' if len(served) == 1 else 's'})", served=served)
    names = ", ".join(served[:SHOWN_MODELS]) + (" …" if len(served) > SHOWN_MODELS else "")
    return ModelsProbe(False, shown, status,
                       f"model {model} is not served at {shown}; it serves "
                       + (f"{len(served)}: {names}" if served else "none"),
                       "set model.default in config.yaml (or pass --model) to a model it "
                       "serves", served=served)


@dataclass(frozen=True)
class StreamProbe:
    ok: bool
    mode: str  # streams | plain_only | failing: what the endpoint can do with tools
    detail: str
    fix: str = ""


#: the one tool the stream probe offers: enough to make a server take its tool-calling path
_PROBE_TOOLS = [{"type": "function", "function": {
    "name": "get_time", "description": "The current time.",
    "parameters": {"type": "object", "properties": {}}}}]
_PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word: ready"}]


def probe_streaming(base_url: str, api_key: str | None, model: str, configured: str, *,
                    connect_timeout: float = 10.0, timeout: float = 30.0) -> StreamProbe:
    """Ask ``model`` a small streamed question carrying one tool, and, if the server
    cannot stream it, the same question without streaming: which mode works, judged
    against ``configured`` (``model.stream``: auto | true | false)."""
    import asyncio
    import logging

    # the model client's warnings speak of an owner's turns; the probe says it itself
    from . import provider, stream_mode

    quiet = [logging.getLogger(m.__name__) for m in (provider, stream_mode)]
    for logger in quiet:
        logger.disabled = True
    try:
        return asyncio.run(_probe_streaming(base_url, api_key, model, configured,
                                            connect_timeout, timeout))
    finally:
        for logger in quiet:
            logger.disabled = False


async def _probe_streaming(base_url: str, api_key: str | None, model: str, configured: str,
                           connect_timeout: float, timeout: float) -> StreamProbe:
    from .provider import OpenAIProvider, ProviderError
    from .stream_mode import StreamMemory
    from .transport import model_client

    class _Small(OpenAIProvider):
        def request_body(self, **kwargs: Any) -> dict[str, Any]:
            return {**super().request_body(**kwargs), "max_tokens": 16}

    memory = StreamMemory()
    async with model_client() as http:  # the owner's client: its transport is probed too
        provider = _Small(http, name="probe", base_url=base_url, api_key=api_key,
                          stream="auto", stream_memory=memory, max_retries=0,
                          connect_timeout=connect_timeout, read_timeout=timeout,
                          request_timeout=2 * timeout + connect_timeout)
        try:
            await provider.complete(messages=_PROBE_MESSAGES, tools=_PROBE_TOOLS, model=model)
        except ProviderError as exc:
            return StreamProbe(False, "failing", f"a request with a tool failed: {exc.reason}: "
                               f"{scrub_key(exc.detail, api_key)}",
                               "see docs/configuration.md, \"Local model servers\", for the "
                               "flags your server needs to call tools")
    why = memory.known().get((provider.base_url, model))
    if why is None:
        return StreamProbe(True, "streams", f"{model} streams answers with tools (model.stream "
                                            f"{configured} works)")
    said = f"{model} answers with tools only without streaming (streamed: {why})"
    if configured == "true":
        return StreamProbe(False, "plain_only", said + "; model.stream true fails every turn",
                           "set model.stream: auto (or false) in config.yaml")
    if configured == "auto":
        return StreamProbe(True, "plain_only", said + "; model.stream auto falls back "
                                                      "(model.stream: false skips the first try)")
    return StreamProbe(True, "plain_only", said + "; model.stream false never streams")
