"""OpenAI's Responses API over the same admissions as chat completions
(docs/http.md, "Responses").

``POST /v1/responses`` is one finite admission like a chat completion: the
input's last user message is the prompt, ``instructions`` and the earlier
input items a fresh session's transcript, ``previous_response_id`` continues
that response's session. A response's id is its admission's
(``resp_<hex>`` for ``adm_<hex>``), so ``GET /v1/responses/{id}`` reads the
ledger, after the request ended or the owner restarted. ``background: true``
answers at once and the turn runs on whatever the client does; ``POST
/v1/responses/{id}/cancel`` stops it.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson
from pydantic import ValidationError

from ..ledger.rules import TURN_OPTION_KEY, receipt_from_row
from .body import InputMessage, ResponsesBody
from .chat import Send, headers_of, outcome_error, settled_error
from .errors import ApiError
from .request import DEFAULT_MODEL, ChatRequest, check_names, load_body, where_of
from .turn import ApiTurns, Delta, Done, KeepAlive, Opened, response_id

__all__ = ["parse_responses_request", "render", "response_object", "stream_error",
           "object_of_row"]

#: accepted and ignored on /v1/responses (as on chat completions: the agent decides)
IGNORED = frozenset({
    "temperature", "top_p", "max_output_tokens", "max_tool_calls", "metadata", "user",
    "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "reasoning",
    "truncation", "parallel_tool_calls", "service_tier", "include", "top_logprobs",
    "stream_options", "tool_choice", "top_k",
})
REFUSED = {
    "conversation": "`conversation` objects are not supported: continue with "
                    "`previous_response_id` (or the X-Tether-Conversation header)",
    "prompt": "stored prompt templates (`prompt`) are not supported",
}
#: the statuses of a response, by the admission's (terminal: by its outcome)
STATUS = {"queued": "queued", "started": "in_progress", "unknown": "failed",
          "completed": "completed", "failed": "failed", "cancelled": "cancelled",
          "interrupted": "incomplete"}


def _text(item: InputMessage, where: str) -> str:
    if isinstance(item.content, str):
        return item.content
    parts = []
    for i, part in enumerate(item.content):
        if part.type not in ("input_text", "output_text") or part.text is None:
            raise ApiError(400, f"{where}.content[{i}]: {part.type} parts are not supported; "
                           "tether's turns carry text only", code="invalid_content")
        parts.append(part.text)
    return "".join(parts)


def parse_responses_request(body: bytes, models: tuple[str, ...],
                            max_text_chars: int) -> ChatRequest:
    raw = load_body(body)
    ignored = list(check_names(raw, ResponsesBody, IGNORED, REFUSED))
    if raw.get("store") is False:
        ignored = sorted([*ignored, "store"])  # tether keeps every turn
    given = raw.get("input")
    for i, item in enumerate(given if isinstance(given, list) else []):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in (None, "message"):
            raise ApiError(400, f"input[{i}]: items of type {kind!r} are not supported here "
                           "(client tools: use /v1/chat/completions)", code="invalid_messages")
    try:
        parsed = ResponsesBody.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        message = ("`tools` are not supported on /v1/responses (client tools: use "
                   "/v1/chat/completions)" if field == "tools"
                   else f"{where_of(tuple(first['loc']))}: {first['msg']}")
        raise ApiError(400, message, code="invalid_messages" if field == "input"
                       else "invalid_type") from None
    if parsed.model not in models:
        # 404, as OpenAI answers a model it does not serve (openai.NotFoundError)
        raise ApiError(404, f"unknown model {parsed.model!r}; this endpoint serves "
                       f"{', '.join(models)}", code="model_not_found")
    items = [InputMessage(role="user", content=parsed.input)] \
        if isinstance(parsed.input, str) else parsed.input
    history = [{"role": "system", "content": parsed.instructions}] if parsed.instructions else []
    history += [{"role": "system" if m.role == "developer" else m.role,
                 "content": _text(m, f"input[{i}]")} for i, m in enumerate(items)]
    last = history.pop()
    if last["role"] != "user" or not last["content"].strip():
        raise ApiError(400, "the last input item must be a non-empty user message (it is the "
                       "prompt)", code="invalid_messages")
    total = sum(len(m["content"]) for m in history) + len(last["content"])
    if total > max_text_chars:
        raise ApiError(400, f"the input is {total} characters; the limit is {max_text_chars}",
                       code="too_long")
    extras: dict[str, Any] = {}
    fmt = parsed.text.format if parsed.text else None
    if fmt is not None and fmt.type == "json_object":
        extras["response_format"] = {"type": "json_object"}
    elif fmt is not None and fmt.type == "json_schema":
        if fmt.name is None or fmt.schema_ is None:
            raise ApiError(400, "text.format: json_schema needs `name` and `schema`",
                           code="invalid_type")
        spec = fmt.model_dump(exclude_none=True, by_alias=True, exclude={"type"})
        extras["response_format"] = {"type": "json_schema", "json_schema": spec}
    identity = {k: v for k, v in raw.items() if k not in ("stream", "stream_options")}
    digest = hashlib.sha256(orjson.dumps({"responses": identity},
                                         option=orjson.OPT_SORT_KEYS)).hexdigest()
    return ChatRequest(model=parsed.model, history=history, prompt=last["content"],
                       stream=bool(parsed.stream), include_usage=True, digest=digest,
                       ignored=tuple(ignored), extras=extras,
                       previous_response_id=parsed.previous_response_id,
                       background=bool(parsed.background), instructions=parsed.instructions)


# -- the response object ------------------------------------------------------


def _usage(result: dict[str, Any]) -> dict[str, Any]:
    raw = result.get("usage") or {}
    given, said = int(raw.get("prompt_tokens", 0)), int(raw.get("completion_tokens", 0))
    # the details the model server reported (usage.py keeps them), else 0
    return {"input_tokens": given,
            "input_tokens_details": {"cached_tokens": int(raw.get("cached_tokens", 0))},
            "output_tokens": said,
            "output_tokens_details": {"reasoning_tokens": int(raw.get("reasoning_tokens", 0))},
            "total_tokens": int(raw.get("total_tokens", given + said))}


def _message(aid: str, text: str, status: str) -> dict[str, Any]:
    return {"type": "message", "id": "msg_" + aid.removeprefix("adm_"), "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def response_object(receipt: dict[str, Any], model: str, created_at: float,
                    meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The response of an admission in any state, from its receipt; ``meta``:
    what the request said of itself (``previous_response_id``, ``instructions``,
    ``background``)."""
    aid = receipt["admission_id"]
    settled = receipt["status"] == "terminal"
    status = STATUS[receipt["outcome"] if settled else receipt["status"]]
    result = receipt.get("result") or {}
    text = result.get("text") or ""
    error = None
    if status in ("failed", "incomplete"):
        why = settled_reason(receipt)
        error = {"code": "server_error", "message": why}
    meta = meta or {}
    return {
        "id": response_id(aid), "object": "response", "created_at": int(created_at),
        "status": status, "model": model, "error": error,
        "incomplete_details": {"reason": "interrupted"} if status == "incomplete" else None,
        "instructions": meta.get("instructions"),
        "previous_response_id": meta.get("previous_response_id"),
        "background": bool(meta.get("background")),
        "output": [_message(aid, text, "completed")] if settled and text else [],
        "usage": _usage(result) if settled else None,
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "temperature": None, "top_p": None, "store": True, "metadata": {},
        "text": {"format": {"type": "text"}}, "truncation": "disabled",
    }


def object_of_row(row: dict[str, Any]) -> dict[str, Any]:
    """The response of a stored admission (``GET /v1/responses/{id}``)."""
    payload = orjson.loads(row["payload_json"])
    model = (payload.get(TURN_OPTION_KEY) or {}).get("model") or DEFAULT_MODEL
    return response_object(receipt_from_row(row), model, row["created_at"],
                           payload.get("response"))


def settled_reason(receipt: dict[str, Any]) -> str:
    error = outcome_error(receipt)
    return error.message if error is not None else ""


def _event(kind: str, seq: int, **fields: Any) -> bytes:
    data = orjson.dumps({"type": kind, "sequence_number": seq, **fields})
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


def stream_error(error: ApiError) -> bytes:
    return _event("error", 0, code=error.code, message=error.message, param=None)


# -- answering ----------------------------------------------------------------


def _meta(req: ChatRequest) -> dict[str, Any]:
    return {"previous_response_id": req.previous_response_id,
            "instructions": req.instructions, "background": req.background}


async def render(send: Send, turns: ApiTurns, opened: Opened, req: ChatRequest) -> None:
    """The response: at once (background), whole, or as the Responses stream."""
    created = time.time()
    if req.stream:
        await _stream(send, turns, opened, req, created)
        return
    receipt, status = opened.receipt, 200
    headers = headers_of(opened, req, b"application/json")
    body = b""
    if not req.background:
        async for piece in turns.follow(opened):
            if isinstance(piece, Done):
                receipt = piece.receipt
        # as a chat completion fails (a 502 for the model's failure, ...); the
        # failed response itself stays readable with GET
        error = await settled_error(turns, opened, receipt)
        if error is not None:
            body, status = error.body(), error.status
            headers += [(k.encode(), v.encode()) for k, v in error.headers.items()]
    body = body or orjson.dumps(response_object(receipt, req.model, created, _meta(req)))
    headers.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _stream(send: Send, turns: ApiTurns, opened: Opened, req: ChatRequest,
                  created: float) -> None:
    headers = headers_of(opened, req, b"text/event-stream; charset=utf-8")
    headers += [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
    seq = 0

    async def emit(kind: str, **fields: Any) -> None:
        nonlocal seq
        await send({"type": "http.response.body", "body": _event(kind, seq, **fields),
                    "more_body": True})
        seq += 1

    aid, meta = opened.admission_id, _meta(req)
    item = _message(aid, "", "in_progress")
    item["content"] = []
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    running = response_object(opened.receipt, req.model, created, meta)
    await emit("response.created", response=running)
    await emit("response.in_progress", response=running)
    await emit("response.output_item.added", output_index=0, item=item)
    await emit("response.content_part.added", **where,
               part={"type": "output_text", "text": "", "annotations": []})
    said: list[str] = []
    receipt = opened.receipt
    async for piece in turns.follow(opened):
        if isinstance(piece, KeepAlive):
            await send({"type": "http.response.body", "body": b": keep-alive\n\n",
                        "more_body": True})
        elif isinstance(piece, Delta) and not opened.replayed:
            said.append(piece.text)
            await emit("response.output_text.delta", **where, delta=piece.text, logprobs=[])
        elif isinstance(piece, Done):
            receipt = piece.receipt
    final = response_object(receipt, req.model, created, meta)
    if final["status"] == "completed":
        text = (receipt.get("result") or {}).get("text") or ""
        streamed = "".join(said)
        if text.startswith(streamed) and len(text) > len(streamed):
            await emit("response.output_text.delta", **where, delta=text[len(streamed):],
                       logprobs=[])
        part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
        await emit("response.output_text.done", **where, text=text, logprobs=[])
        await emit("response.content_part.done", **where, part=part)
        await emit("response.output_item.done", output_index=0,
                   item=_message(aid, text, "completed"))
        await emit("response.completed", response=final)
    else:
        await emit("response.failed" if final["status"] == "failed" else
                   f"response.{final['status']}", response=final)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
