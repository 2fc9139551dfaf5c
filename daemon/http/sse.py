"""The OpenAI wire shapes of an answer: ``chat.completion`` objects, the
``chat.completion.chunk``s of a stream, and their server-sent-event framing.

Pure. A completion's id is derived from its admission id, so a replay from the
ledger carries the same id as the first answer.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["completion_id", "completion", "chunk", "event", "comment", "DONE", "usage_of",
           "tool_call_deltas"]

DONE = b"data: [DONE]\n\n"


def completion_id(admission_id: str) -> str:
    return "chatcmpl-" + admission_id


def usage_of(receipt: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's usage object from a receipt's (counters the model did not report are 0)."""
    raw = (receipt.get("result") or {}).get("usage") or {}
    prompt = int(raw.get("prompt_tokens", 0))
    done = int(raw.get("completion_tokens", 0))
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": done,
                           "total_tokens": int(raw.get("total_tokens", prompt + done))}
    # OpenAI's nested details, where the model server reported them (usage.py)
    if "cached_tokens" in raw:
        out["prompt_tokens_details"] = {"cached_tokens": int(raw["cached_tokens"])}
    if "reasoning_tokens" in raw:
        out["completion_tokens_details"] = {"reasoning_tokens": int(raw["reasoning_tokens"])}
    return out


def completion(receipt: dict[str, Any], model: str, created: int,
               tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The whole answer; with ``tool_calls`` (the client's tools the model called)
    it ends with ``finish_reason: "tool_calls"``."""
    text = (receipt.get("result") or {}).get("text") or ""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message = {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
    return {
        "id": completion_id(receipt["admission_id"]), "object": "chat.completion",
        "created": created, "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if tool_calls else "stop",
                     "logprobs": None}],
        "usage": usage_of(receipt),
    }


def tool_call_deltas(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The delta of a stream's chunk that carries the calls whole, each with its index."""
    return {"tool_calls": [{"index": i, **call} for i, call in enumerate(tool_calls)]}


def chunk(admission_id: str, model: str, created: int, delta: dict[str, Any] | None,
          finish_reason: str | None = None,
          usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta`` None is the usage chunk (no choices)."""
    body: dict[str, Any] = {"id": completion_id(admission_id),
                            "object": "chat.completion.chunk", "created": created,
                            "model": model, "choices": []}
    if delta is not None:
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish_reason,
                            "logprobs": None}]
    if usage is not None:
        body["usage"] = usage
    return body


def event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def comment(text: str = "keep-alive") -> bytes:
    """An SSE comment: ignored by clients, it keeps proxies and idle timers quiet."""
    return b": " + text.encode() + b"\n\n"
