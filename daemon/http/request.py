"""A chat-completions request body, checked: what the turn will be asked.

Pure: bytes in, a ``ChatRequest`` or an ``ApiError`` (400) out. The body is
validated by pydantic models (``ChatBody``), strictly (no coercion), and its
first fault becomes OpenAI's error envelope naming the field. Parameters that
change nothing here (sampling, caching hints, vendor extras) are accepted and
named in ``ChatRequest.ignored`` (the ``X-Tether-Ignored`` response header);
an unknown one is refused, so a typo is not silently dropped (docs/http.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ApiError

__all__ = ["ChatRequest", "parse_chat_request", "DEFAULT_MODEL", "IGNORED"]

#: the model name that means "the owner's configured model"
DEFAULT_MODEL = "tether"

#: how deep a body's JSON may nest (a chat request needs about 6 levels)
MAX_DEPTH = 64

#: accepted and ignored: the agent's own settings decide these, or they only
#: matter to OpenAI's own service (caching, safety and billing hints)
IGNORED = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "presence_penalty",
    "frequency_penalty", "seed", "stop", "user", "metadata", "logit_bias", "store",
    "parallel_tool_calls", "reasoning_effort", "service_tier", "logprobs", "top_logprobs",
    "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "safety_identifier",
    "verbosity", "web_search_options", "moderation",
    # other servers' sampling extras, which litellm and frontends forward as they are
    "top_k", "min_p", "top_a", "typical_p", "repetition_penalty", "length_penalty",
    "min_tokens", "reasoning", "thinking", "chat_template_kwargs",
})
#: a request carrying one of these (other than its no-op value) is refused with the reason
REFUSED = {
    "tools": "tether's agent brings its own tools; a request's `tools` are not supported",
    "functions": "tether's agent brings its own tools; `functions` are not supported",
    "tool_choice": "tether's agent brings its own tools; `tool_choice` is not supported",
    "function_call": "tether's agent brings its own tools; `function_call` is not supported",
    "response_format": "`response_format` other than {\"type\": \"text\"} is not supported",
    "audio": "`audio` is not supported: tether's turns are text",
    "modalities": "`modalities` other than [\"text\"] is not supported: tether's turns are text",
    "prediction": "`prediction` is not supported",
}
#: what each refused parameter may be and still change nothing
_NO_OPS: dict[str, tuple[Any, ...]] = {
    "tools": ([],), "functions": ([],), "tool_choice": ("none", "auto"),
    "function_call": ("none", "auto"), "response_format": ({"type": "text"},),
    "modalities": (["text"],),
}

Role = Literal["system", "developer", "user", "assistant", "tool"]


class _Loose(BaseModel):
    """A part of the body whose other keys are harmless (a message's ``name``)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class TextPart(_Loose):
    type: Literal["text"]
    text: str


class OtherPart(_Loose):
    """Image, audio and file parts: recognised, and refused with the reason."""

    type: Literal["image_url", "input_audio", "file", "refusal"]


Part = Annotated[TextPart | OtherPart, Field(discriminator="type")]


class ChatMessage(_Loose):
    role: Role
    content: str | list[Part] | None = None
    tool_calls: list[Any] | None = None
    tool_call_id: str | None = None


class StreamOptions(_Loose):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class ChatBody(BaseModel):
    """The fields a chat completion is made of; the rest are ``IGNORED`` or
    ``REFUSED`` names, checked before this model sees the body."""

    model_config = ConfigDict(strict=True, extra="ignore")

    model: Annotated[str, Field(min_length=1)]
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: Literal[1] | None = None


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
    #: the parameters given that change nothing here (named back to the client)
    ignored: tuple[str, ...] = ()


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


#: the error code of a fault in each top-level field
_CODES = {"model": "invalid_model", "messages": "invalid_messages", "stream": "invalid_type",
          "stream_options": "invalid_type", "n": "unsupported_parameter"}


def _where(loc: tuple[Any, ...]) -> str:
    """A field's place as OpenAI writes it: ``messages[0].role``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def _refusal(exc: ValidationError) -> ApiError:
    """The body's first fault, in OpenAI's words: which field, and why."""
    first = exc.errors(include_url=False)[0]
    loc = tuple(first["loc"])
    field = str(loc[0]) if loc else ""
    code = _CODES.get(field, "invalid_type")
    msg = first["msg"]
    if field == "messages" and "content" in loc:
        # pydantic names each member of the union; the client needs the one rule
        loc, code = loc[:loc.index("content") + 1], "invalid_content"
        msg = "must be a string or a list of text parts"
    elif field == "n":
        msg = "must be 1 (one choice per request)"
    elif field == "model" and first["type"] == "missing":
        msg = "is required (GET /v1/models lists the names)"
    return ApiError(400, f"{_where(loc)}: {msg}" if loc else msg, code=code)


def _text(msg: ChatMessage, where: str) -> str:
    if msg.content is None:
        return ""
    if isinstance(msg.content, str):
        return msg.content
    parts = []
    for part in msg.content:
        if isinstance(part, OtherPart):
            raise ApiError(400, f"{where}.content: {part.type} parts are not supported; "
                           "tether's turns carry text only (send the text, or a file's "
                           "path for the agent to read)", code="invalid_content")
        parts.append(part.text)
    return "".join(parts)


def _check_names(raw: dict[str, Any]) -> tuple[str, ...]:
    """Refuse what cannot be served; the ignored names given (not null)."""
    ignored = []
    for key, value in raw.items():
        if key in REFUSED:
            if value is not None and value not in _NO_OPS.get(key, ()):
                raise ApiError(400, REFUSED[key], code="unsupported_parameter")
        elif key in IGNORED:
            if value is not None:
                ignored.append(key)
        elif key not in ChatBody.model_fields:
            raise ApiError(400, f"unknown parameter `{key}`", code="unknown_parameter")
    return tuple(sorted(ignored))


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
    ignored = _check_names(raw)
    try:
        parsed = ChatBody.model_validate(raw)
    except ValidationError as exc:
        raise _refusal(exc) from None
    if parsed.model not in models:
        raise ApiError(400, f"unknown model {parsed.model!r}; this endpoint serves "
                       f"{', '.join(models)}", code="model_not_found")
    history: list[dict[str, Any]] = []
    for i, msg in enumerate(parsed.messages):
        where = f"messages[{i}]"
        if msg.role == "tool" or msg.tool_calls:
            raise ApiError(400, f"{where}: tool calls and tool results are not supported (the "
                           "agent runs its own tools)", code="invalid_messages")
        history.append({"role": "system" if msg.role == "developer" else msg.role,
                        "content": _text(msg, where)})
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
    options = parsed.stream_options
    return ChatRequest(model=parsed.model, history=history, prompt=last["content"],
                       stream=bool(parsed.stream),
                       include_usage=bool(options and options.include_usage),
                       digest=digest, ignored=ignored)
