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
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from .body import ChatBody, ChatMessage, OtherPart
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
    "functions": "`functions` (deprecated by OpenAI) are not supported: send `tools`",
    "function_call": "`function_call` (deprecated by OpenAI) is not supported: send "
                     "`tool_choice`",
    "audio": "`audio` is not supported: tether's turns are text",
    "modalities": "`modalities` other than [\"text\"] is not supported: tether's turns are text",
    "prediction": "`prediction` is not supported",
}
#: what each refused parameter may be and still change nothing
_NO_OPS: dict[str, tuple[Any, ...]] = {
    "functions": ([],), "function_call": ("none", "auto"), "modalities": (["text"],),
}


@dataclass(frozen=True)
class ChatRequest:
    model: str
    #: the earlier messages, for a fresh session (tool calls and results included)
    history: list[dict[str, Any]]
    prompt: str  # the last user message ("" when the request answers tool calls)
    stream: bool
    include_usage: bool
    #: identifies the request for Idempotency-Key: the body without how it is
    #: delivered (``stream``, ``stream_options``), so a retry may switch modes
    digest: str
    #: the parameters given that change nothing here (named back to the client)
    ignored: tuple[str, ...] = ()
    #: the client's own tools (function schemas), offered beside tether's
    client_tools: tuple[dict[str, Any], ...] = ()
    #: what the model requests of the turn carry besides: response_format, tool_choice
    extras: dict[str, Any] = field(default_factory=dict)
    #: the results of the client's tools that end the body (its input instead
    #: of a user message): [{"tool_call_id", "content"}]
    tool_results: tuple[dict[str, Any], ...] = ()
    #: /v1/responses only: the response this one continues, whether it runs in the
    #: background (answered at once, fetched later) and what the client called
    #: its instructions (echoed in the response object)
    previous_response_id: str | None = None
    background: bool = False
    instructions: str | None = None

    def payload_extra(self) -> dict[str, Any]:
        """What the admission's payload carries besides its text."""
        extra: dict[str, Any] = {"request_digest": self.digest, **self.extras}
        if self.previous_response_id or self.background or self.instructions:
            extra["response"] = {"previous_response_id": self.previous_response_id,
                                 "background": self.background,
                                 "instructions": self.instructions}
        if self.client_tools:
            extra["client_tools"] = list(self.client_tools)
        if self.tool_results:
            extra["tool_results"] = list(self.tool_results)
        return extra


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
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


def where_of(loc: tuple[Any, ...]) -> str:
    """A field's place as OpenAI writes it: ``messages[0].role``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


def refusal_of(exc: ValidationError) -> ApiError:
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
    return ApiError(400, f"{where_of(loc)}: {msg}" if loc else msg, code=code)


def text_of(msg: ChatMessage, where: str) -> str:
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


def check_names(raw: dict[str, Any], known: Any = None,
                ignored_names: frozenset[str] = IGNORED,
                refused: dict[str, str] | None = None) -> tuple[str, ...]:
    """Refuse what cannot be served; the ignored names given (not null).
    ``known``: the body model's fields (ChatBody's by default)."""
    refused = REFUSED if refused is None else refused
    fields = (known or ChatBody).model_fields
    ignored = []
    for key, value in raw.items():
        if key in refused:
            if value is not None and value not in _NO_OPS.get(key, ()):
                raise ApiError(400, refused[key], code="unsupported_parameter")
        elif key in ignored_names:
            if value is not None:
                ignored.append(key)
        elif key not in fields:
            raise ApiError(400, f"unknown parameter `{key}`", code="unknown_parameter")
    return tuple(sorted(ignored))


def _tools(body: ChatBody, reserved: frozenset[str]) -> tuple[tuple[dict[str, Any], ...],
                                                              dict[str, Any]]:
    """The client's tools as offered to the model, and the model request's extras."""
    extras: dict[str, Any] = {}
    if body.response_format is not None and body.response_format.type != "text":
        extras["response_format"] = body.response_format.model_dump(
            exclude_none=True, by_alias=True)
        if body.response_format.type == "json_schema" and body.response_format.json_schema is None:
            raise ApiError(400, "response_format: json_schema needs `json_schema`",
                           code="invalid_type")
    choice = body.tool_choice
    if choice == "none" or not body.tools:
        if choice not in (None, "none", "auto"):
            raise ApiError(400, "tool_choice: the request has no `tools` to choose from",
                           code="invalid_type")
        return (), extras  # tether's own tools stay offered either way
    names = [t.function.name for t in body.tools]
    for name in names:
        if name in reserved:
            raise ApiError(400, f"tools: {name!r} is the name of one of tether's own tools; "
                           "rename yours", code="invalid_type")
    if len(set(names)) != len(names):
        raise ApiError(400, "tools: two tools have the same name", code="invalid_type")
    if choice == "required" or (choice is not None and choice != "auto"):
        if not isinstance(choice, str) and choice.function.name not in names:
            raise ApiError(400, f"tool_choice names {choice.function.name!r}, which is not "
                           "one of the request's tools", code="invalid_type")
        extras["tool_choice"] = choice if isinstance(choice, str) else choice.model_dump()
    return tuple(t.model_dump(exclude_none=True) for t in body.tools), extras


def _history(parsed: ChatBody) -> list[dict[str, Any]]:
    """The messages as the transcript keeps them; a tool message must answer a
    call of the assistant message it follows (a model server refuses any other)."""
    history: list[dict[str, Any]] = []
    calls: set[str] = set()  # the ids the latest assistant message called
    for i, msg in enumerate(parsed.messages):
        where = f"messages[{i}]"
        if msg.role == "tool":
            if msg.tool_call_id is None or msg.tool_call_id not in calls:
                raise ApiError(400, f"{where}: a tool message must answer, by tool_call_id, a "
                               "call of the assistant message before it",
                               code="invalid_messages")
            history.append({"role": "tool", "tool_call_id": msg.tool_call_id,
                            "content": text_of(msg, where)})
            continue
        item: dict[str, Any] = {"role": "system" if msg.role == "developer" else msg.role,
                                "content": text_of(msg, where)}
        if msg.tool_calls:
            if msg.role != "assistant":
                raise ApiError(400, f"{where}: only an assistant message has tool_calls",
                               code="invalid_messages")
            item["tool_calls"] = [c.model_dump() for c in msg.tool_calls]
        calls = {c.id for c in msg.tool_calls or ()}
        history.append(item)
    return history


def _input(history: list[dict[str, Any]]) -> tuple[str, tuple[dict[str, Any], ...]]:
    """Take the request's input off the end of ``history``: the last user message,
    or the tool results that answer the last assistant message's calls."""
    if history[-1]["role"] == "user":
        last = history.pop()
        if not last["content"].strip():
            raise ApiError(400, "the last user message is empty", code="invalid_messages")
        return last["content"], ()
    if history[-1]["role"] != "tool":
        raise ApiError(400, "the last message must be the user's (it is the prompt) or the "
                       "results of the tools the assistant called", code="invalid_messages")
    results: list[dict[str, Any]] = []
    while history and history[-1]["role"] == "tool":
        results.insert(0, history.pop())
    asked = history[-1].get("tool_calls") if history and history[-1]["role"] == "assistant" \
        else None
    ids = {c["id"] for c in asked or ()}
    if not asked or any(r["tool_call_id"] not in ids for r in results):
        raise ApiError(400, "tool messages must answer the calls of the assistant message "
                       "before them (by tool_call_id)", code="invalid_messages")
    return "", tuple({"tool_call_id": r["tool_call_id"], "content": r["content"]}
                     for r in results)


def load_body(body: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or OpenAI's 400 saying why it is not one."""
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(raw, dict):
        raise ApiError(400, "the body must be a JSON object", code="invalid_json")
    if too_deep(raw):
        raise ApiError(400, f"the body nests deeper than {MAX_DEPTH} levels",
                       code="invalid_json")
    return raw


def parse_chat_request(body: bytes, models: tuple[str, ...], max_text_chars: int,
                       reserved: frozenset[str] = frozenset()) -> ChatRequest:
    """The request in ``body``; ``reserved``: tether's own tool names, which a
    client's tool may not take."""
    raw = load_body(body)
    ignored = check_names(raw)
    try:
        parsed = ChatBody.model_validate(raw)
    except ValidationError as exc:
        raise refusal_of(exc) from None
    if parsed.model not in models:
        # 404, as OpenAI answers a model it does not serve (openai.NotFoundError)
        raise ApiError(404, f"unknown model {parsed.model!r}; this endpoint serves "
                       f"{', '.join(models)}", code="model_not_found")
    client_tools, extras = _tools(parsed, reserved)
    history = _history(parsed)
    prompt, results = _input(history)
    total = sum(len(m["content"] or "") for m in history) + len(prompt) + sum(
        len(r["content"]) for r in results)
    if total > max_text_chars:
        raise ApiError(400, f"the messages are {total} characters; the limit is "
                       f"{max_text_chars}", code="too_long")
    identity = {k: v for k, v in raw.items() if k not in ("stream", "stream_options")}
    digest = hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()
    options = parsed.stream_options
    return ChatRequest(model=parsed.model, history=history, prompt=prompt,
                       stream=bool(parsed.stream),
                       include_usage=bool(options and options.include_usage),
                       digest=digest, ignored=ignored, client_tools=client_tools,
                       extras=extras, tool_results=results)
