"""``POST /v1/chat/completions``: a request's admission answered whole or streamed.

The answer is read from the ledger (turn.py follows it), so a first answer, a
retry while the turn still runs and a retry long after are the same
completion. What becomes of a turn whose client went away is app.py's
decision (a retry may still claim it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from . import sse
from .errors import ApiError, redact
from .request import ChatRequest
from .turn import ApiTurns, Delta, Done, KeepAlive, Opened

__all__ = ["answer", "chat_render", "outcome_error", "settled_error", "headers_of",
           "client_calls"]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


#: tells the SDKs not to retry: a retry would get this same answer, or run again
#: what already acted
NO_RETRY = {"x-should-retry": "false"}


def rerunnable(receipt: dict[str, Any]) -> bool:
    """Whether a retry of this settled admission may run it again, if it did
    nothing yet: it failed or was interrupted (a model error, an owner stopping)."""
    return receipt["status"] != "unknown" and receipt.get("outcome") in ("failed",
                                                                        "interrupted")


def outcome_error(receipt: dict[str, Any], side_effects: bool = False) -> ApiError | None:
    """Why a settled admission has no completion to give (None: it has one)."""
    if receipt["status"] == "unknown":
        return ApiError(409, f"admission {receipt['admission_id']} was running when the owner "
                        "stopped and its outcome is unknown; settle it with `tether resolve "
                        f"{receipt['session_id']}`", code="unknown_execution",
                        headers=NO_RETRY)
    outcome = receipt.get("outcome")
    if outcome == "completed":
        return None
    error = (receipt.get("result") or {}).get("error")
    if isinstance(error, str):
        error = redact(error)
    # a retry of a turn that acted could act twice; of a cancelled one, it is cancelled
    headers = NO_RETRY if side_effects or not rerunnable(receipt) else None
    after = " (after its tools ran: not retried)" if side_effects else ""
    if outcome == "failed":
        return ApiError(502, f"the model failed{after}: {error or 'no detail'}",
                        type_="server_error", code="model_failed", headers=headers)
    return ApiError(503, f"the turn was {outcome}{after}" + (f": {error}" if error else ""),
                    type_="server_error", code=f"turn_{outcome}", headers=headers)


async def settled_error(turns: ApiTurns, opened: Opened,
                        receipt: dict[str, Any]) -> ApiError | None:
    """``outcome_error``, knowing whether the turn acted when that matters."""
    acted = rerunnable(receipt) and await turns.side_effects(opened)
    return outcome_error(receipt, acted)


def headers_of(opened: Opened, req: ChatRequest,
             content_type: bytes) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", content_type),
               (b"x-tether-session-id", opened.session_id.encode()),
               (b"x-tether-admission-id", opened.admission_id.encode())]
    if opened.replayed:
        headers.append((b"idempotency-replayed", b"true"))
    if req.ignored:
        headers.append((b"x-tether-ignored", ",".join(req.ignored).encode()))
    return headers


class _Tracked:
    """``send``, remembering whether the response has started."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


#: writes one admitted request's answer (chat completion, response) to ``send``
Render = Callable[[Send, ApiTurns, Opened, ChatRequest], Awaitable[None]]
#: the last event of a stream that fails after it started
StreamError = Callable[[ApiError], bytes]


def chat_render(send: Send, turns: ApiTurns, opened: Opened, req: ChatRequest) -> Awaitable[None]:
    """A chat completion, whole or streamed."""
    return _stream(send, turns, opened, req) if req.stream else _whole(send, turns, opened, req)


def chat_stream_error(error: ApiError) -> bytes:
    return sse.event(error.envelope()) + sse.DONE


async def answer(send: Send, receive: Receive, turns: ApiTurns, opened: Opened,
                 req: ChatRequest, stop: asyncio.Future[ApiError],
                 render: Render = chat_render,
                 stream_error: StreamError = chat_stream_error) -> str:
    """Answer an admitted request with ``render``: ``"delivered"``, ``"gone"``
    (the client left, or writing to it failed, before it had the whole answer)
    or ``"stopped"`` (``stop`` came first, e.g. the token was revoked: the client
    is told why if it can still be, a stream by ``stream_error``). What happens
    to an undelivered turn is the caller's choice."""
    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    tracked = _Tracked(send)
    work = asyncio.ensure_future(render(tracked, turns, opened, req))
    watcher = asyncio.ensure_future(gone())
    try:
        racing: set[asyncio.Future[Any]] = {work, watcher, stop}
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        while not work.done():  # until it has stopped: a cancel must not go unheard
            work.cancel()
            await asyncio.wait({work}, timeout=1.0)
    if work.cancelled():
        if stop.done() and not stop.cancelled():
            with contextlib.suppress(Exception):
                await _refuse(tracked, req, stop.result(), stream_error)
            return "stopped"
        return "gone"
    if isinstance(work.exception(), OSError):
        return "gone"  # writing to the client failed: there is nobody to answer
    work.result()
    return "delivered"


async def _refuse(send: _Tracked, req: ChatRequest, error: ApiError,
                  stream_error: StreamError) -> None:
    """Tell the client why its answer stops here: an error response, or the
    error event that ends a stream already under way."""
    if not send.started:
        body = error.body()
        await send({"type": "http.response.start", "status": error.status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})
    elif req.stream:
        await send({"type": "http.response.body", "body": stream_error(error),
                    "more_body": False})


async def client_calls(turns: ApiTurns, opened: Opened) -> list[dict[str, Any]]:
    """The client's tools the finished turn called; remembered, so the request
    that brings their results continues this session."""
    calls = await turns.client_calls(opened)
    if calls and opened.token_id:
        await turns.remember_calls(opened.token_id, opened.session_id, calls)
    return calls


async def _whole(send: Send, turns: ApiTurns, opened: Opened, req: ChatRequest) -> None:
    receipt: dict[str, Any] = opened.receipt
    async for piece in turns.follow(opened):
        if isinstance(piece, Done):
            receipt = piece.receipt
    error = await settled_error(turns, opened, receipt)
    headers = headers_of(opened, req, b"application/json")
    if error is not None:
        body, status = error.body(), error.status
        headers += [(k.encode(), v.encode()) for k, v in error.headers.items()]
    else:
        calls = await client_calls(turns, opened)
        body = orjson.dumps(sse.completion(receipt, req.model, int(time.time()), calls))
        status = 200
    headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _stream(send: Send, turns: ApiTurns, opened: Opened, req: ChatRequest) -> None:
    aid, model, created = opened.admission_id, req.model, int(time.time())
    headers = headers_of(opened, req, b"text/event-stream; charset=utf-8")
    headers += [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]

    async def emit(data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await emit(sse.event(sse.chunk(aid, model, created, {"role": "assistant", "content": ""})))
    streamed: list[str] = []
    receipt = opened.receipt
    async for piece in turns.follow(opened):
        if isinstance(piece, KeepAlive):
            await emit(sse.comment())
        elif isinstance(piece, Delta):
            # a retry joins a turn mid-way: it gets the whole text at the end instead
            if not opened.replayed:
                streamed.append(piece.text)
                await emit(sse.event(sse.chunk(aid, model, created, {"content": piece.text})))
        elif isinstance(piece, Done):
            receipt = piece.receipt
    error = await settled_error(turns, opened, receipt)
    if error is not None:
        await emit(sse.event(error.envelope()))
    else:
        text = (receipt.get("result") or {}).get("text") or ""
        said = "".join(streamed)
        rest = text[len(said):] if text.startswith(said) else ("" if said else text)
        if rest:
            await emit(sse.event(sse.chunk(aid, model, created, {"content": rest})))
        calls = await client_calls(turns, opened)
        if calls:
            await emit(sse.event(sse.chunk(aid, model, created, sse.tool_call_deltas(calls))))
        await emit(sse.event(sse.chunk(aid, model, created, {},
                                       "tool_calls" if calls else "stop")))
        if req.include_usage:
            await emit(sse.event(sse.chunk(aid, model, created, None,
                                           usage=sse.usage_of(receipt))))
    await send({"type": "http.response.body", "body": sse.DONE, "more_body": False})
