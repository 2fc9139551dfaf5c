"""A chat-completions request body, checked: what the turn will be asked.

Pure: bytes in, a ``ChatRequest`` or an ``ApiError`` (400) out. The agent
brings its own tools and sampling, so a request's ``tools`` are refused and
sampling parameters are accepted and ignored (docs/http.md lists which).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import ApiError

__all__ = ["ChatRequest", "parse_chat_request", "DEFAULT_MODEL"]

#: the model name that means "the owner's configured model"
DEFAULT_MODEL = "tether"

#: roles a request's earlier messages may have; they become the fresh session's transcript
HISTORY_ROLES = ("system", "developer", "user", "assistant")

#: accepted and ignored: the agent's own settings decide these
IGNORED = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "presence_penalty",
    "frequency_penalty", "seed", "stop", "user", "metadata", "logit_bias", "store",
    "parallel_tool_calls", "reasoning_effort", "service_tier", "logprobs", "top_logprobs",
})
#: a request carrying one of these is refused with the reason
REFUSED = {
    "tools": "tether's agent brings its own tools; a request's `tools` are not supported",
    "functions": "tether's agent brings its own tools; `functions` are not supported",
    "tool_choice": "tether's agent brings its own tools; `tool_choice` is not supported",
    "response_format": "`response_format` is not supported",
    "audio": "`audio` is not supported",
    "modalities": "`modalities` is not supported",
    "prediction": "`prediction` is not supported",
}


#: how deep a body's JSON may nest (a chat request needs about 6 levels)
MAX_DEPTH = 64


def _too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` has more than ``limit`` containers inside one another
    (found level by level, without recursing)."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        level = [item for item in level if isinstance(item, dict | list)]
        if not level:
            return False
        level = [v for item in level for v in (item.values() if isinstance(item, dict)
                                               else item)]
    return True


@dataclass(frozen=True)
class ChatRequest:
    model: str
    history: list[dict[str, Any]]  # the earlier messages, for a fresh session
    prompt: str  # the last user message
    stream: bool
    include_usage: bool
    #: identifies the request for Idempotency-Key: the body without how it is
    #: delivered (``stream``, ``stream_options``), so a retry may switch modes
    digest: str


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                raise ApiError(400, f"{where}.content: only text parts are supported",
                               code="invalid_content")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(400, f"{where}.content must be a string or a list of text parts",
                   code="invalid_content")


def parse_chat_request(body: bytes, models: tuple[str, ...],
                       max_text_chars: int) -> ChatRequest:
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(raw, dict):
        raise ApiError(400, "the body must be a JSON object", code="invalid_json")
    if _too_deep(raw):
        raise ApiError(400, f"the body nests deeper than {MAX_DEPTH} levels",
                       code="invalid_json")
    for key in raw:
        if key in REFUSED and raw[key] not in (None, [], "none", "auto"):
            raise ApiError(400, REFUSED[key], code="unsupported_parameter")
        if key not in IGNORED and key not in REFUSED and key not in (
                "model", "messages", "stream", "stream_options", "n"):
            raise ApiError(400, f"unknown parameter `{key}`", code="unknown_parameter")
    model = raw.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "`model` is required (GET /v1/models lists the names)",
                       code="invalid_model")
    if model not in models:
        raise ApiError(400, f"unknown model {model!r}; this endpoint serves "
                       f"{', '.join(models)}", code="model_not_found")
    if raw.get("n", 1) != 1:
        raise ApiError(400, "`n` must be 1", code="unsupported_parameter")
    stream = raw.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError(400, "`stream` must be a boolean", code="invalid_type")
    options = raw.get("stream_options") or {}
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False),
                                                       bool):
        raise ApiError(400, "`stream_options` must be {\"include_usage\": bool}",
                       code="invalid_type")
    messages = raw.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "`messages` must be a non-empty list", code="invalid_messages")
    history: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise ApiError(400, f"{where} must be an object", code="invalid_messages")
        role = msg.get("role")
        if role not in HISTORY_ROLES:
            raise ApiError(400, f"{where}.role {role!r} is not supported (only "
                           f"{', '.join(HISTORY_ROLES)}: the agent runs its own tools)",
                           code="invalid_messages")
        if msg.get("tool_calls"):
            raise ApiError(400, f"{where}: tool_calls are not supported", code="invalid_messages")
        history.append({"role": "system" if role == "developer" else role,
                        "content": _text(msg.get("content"), where)})
    last = history.pop()
    if last["role"] != "user":
        raise ApiError(400, "the last message must be the user's (it is the prompt)",
                       code="invalid_messages")
    if not last["content"].strip():
        raise ApiError(400, "the last user message is empty", code="invalid_messages")
    total = sum(len(m["content"]) for m in history) + len(last["content"])
    if total > max_text_chars:
        raise ApiError(400, f"the messages are {total} characters; the limit is "
                       f"{max_text_chars}", code="too_long")
    identity = {k: v for k, v in raw.items() if k not in ("stream", "stream_options")}
    digest = hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return ChatRequest(model=model, history=history, prompt=last["content"], stream=stream,
                       include_usage=bool(options.get("include_usage", False)), digest=digest)
