"""``POST /v1/chat/completions``: a request's admission answered whole or streamed.

The answer is read from the ledger (turn.py follows it), so a first answer, a
retry while the turn still runs and a retry long after are the same
completion. A client that goes away interrupts its turn only when it sent no
Idempotency-Key: with a key, a retry can still fetch the answer, so the turn
runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from . import sse
from .errors import ApiError
from .request import ChatRequest
from .turn import ApiTurns, Delta, Done, KeepAlive, Opened

__all__ = ["answer", "outcome_error"]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


def outcome_error(receipt: dict[str, Any]) -> ApiError | None:
    """Why a settled admission has no completion to give (None: it has one)."""
    if receipt["status"] == "unknown":
        return ApiError(409, f"admission {receipt['admission_id']} was running when the owner "
                        "stopped and its outcome is unknown; settle it with `tether resolve "
                        f"{receipt['session_id']}`", code="unknown_execution")
    outcome = receipt.get("outcome")
    if outcome == "completed":
        return None
    error = (receipt.get("result") or {}).get("error")
    if outcome == "failed":
        return ApiError(502, f"the model failed: {error or 'no detail'}", type_="server_error",
                        code="model_failed")
    return ApiError(503, f"the turn was {outcome}" + (f": {error}" if error else ""),
                    type_="server_error", code=f"turn_{outcome}")


def _headers(opened: Opened, content_type: bytes) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", content_type),
               (b"x-tether-session-id", opened.session_id.encode()),
               (b"x-tether-admission-id", opened.admission_id.encode())]
    if opened.replayed:
        headers.append((b"idempotency-replayed", b"true"))
    return headers


async def answer(send: Send, receive: Receive, turns: ApiTurns, opened: Opened,
                 req: ChatRequest, *, keyed: bool) -> None:
    """Answer an admitted request; a client that disconnects first stops its turn
    unless the request was ``keyed``."""
    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    work = asyncio.ensure_future(_stream(send, turns, opened, req) if req.stream
                                 else _whole(send, turns, opened, req))
    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        while not work.done():  # until it has stopped: a cancel must not go unheard
            work.cancel()
            await asyncio.wait({work}, timeout=1.0)
        # not delivered (the client left, or writing to it failed first): nobody
        # can fetch this answer any more unless it has a key, so stop spending on it
        delivered = not work.cancelled() and work.exception() is None
        if not delivered and not keyed:
            with contextlib.suppress(Exception):
                await turns.cancel(opened)
    if work.cancelled() or isinstance(work.exception(), OSError):
        return  # the client is gone: there is nobody to answer
    work.result()


async def _whole(send: Send, turns: ApiTurns, opened: Opened, req: ChatRequest) -> None:
    receipt: dict[str, Any] = opened.receipt
    async for piece in turns.follow(opened):
        if isinstance(piece, Done):
            receipt = piece.receipt
    error = outcome_error(receipt)
    headers = _headers(opened, b"application/json")
    if error is not None:
        body, status = error.body(), error.status
    else:
        body, status = orjson.dumps(sse.completion(receipt, req.model, int(time.time()))), 200
    headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _stream(send: Send, turns: ApiTurns, opened: Opened, req: ChatRequest) -> None:
    aid, model, created = opened.admission_id, req.model, int(time.time())
    headers = _headers(opened, b"text/event-stream; charset=utf-8")
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
    error = outcome_error(receipt)
    if error is not None:
        await emit(sse.event(error.envelope()))
    else:
        text = (receipt.get("result") or {}).get("text") or ""
        said = "".join(streamed)
        rest = text[len(said):] if text.startswith(said) else ("" if said else text)
        if rest:
            await emit(sse.event(sse.chunk(aid, model, created, {"content": rest})))
        await emit(sse.event(sse.chunk(aid, model, created, {}, "stop")))
        if req.include_usage:
            await emit(sse.event(sse.chunk(aid, model, created, None,
                                           usage=sse.usage_of(receipt))))
    await send({"type": "http.response.body", "body": sse.DONE, "more_body": False})
