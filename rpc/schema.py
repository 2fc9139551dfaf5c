"""JSON Schema (2020-12) export of the whole protocol: methods, events, errors, frames.

``tether schema`` prints ``protocol_schema()``; it is derived from the method
table and the models, so it cannot drift from what the dispatcher enforces.

Every model is one entry of the top-level ``$defs``, named by its title (unique),
and everything else points there with ``$ref``: a code generator (such as
json-schema-to-typescript) then emits each type once. Params are in validation
mode (what the owner accepts); results, events and errors in serialization mode
(what it sends), where a field the owner always sends is ``required`` even when
it may be null. Rules the owner checks in code are written into the schema
where JSON Schema can say them (``RULES``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, create_model
from pydantic.json_schema import models_json_schema

from .envelope import EVENT_TYPES, NOTICE_TYPES
from .errors import ERRORS
from .methods import METHODS
from .models.events import EVENT_MODELS, EVENT_PAYLOADS, AnyEvent, EventNotification
from .models.frames import ErrorData, FieldProblem, JsonRpcError, JsonRpcRequest, JsonRpcResult
from .names import PROVIDER_NAMES, TOOLSETS
from .protocol import EVENT_METHOD, PROTOCOL

__all__ = ["DRAFT", "SOMETIMES_ABSENT", "protocol_schema"]

DRAFT = "https://json-schema.org/draft/2020-12/schema"

#: (model, field) pairs of sent models that the owner leaves out rather than
#: sending null; every other field of a result, event or error is always sent
SOMETIMES_ABSENT: frozenset[tuple[str, str]] = frozenset({
    ("Receipt", "paused_by"),
    ("ToolCompletePayload", "error"),
    ("MessageCompletePayload", "error"),
    ("MessageStartPayload", "text_truncated"),
    ("SessionInfoPayload", "awaiting_approval"),
    ("ToolStartPayload", "subject"),
    ("ToolCompletePayload", "summary"),
    ("ToolCompletePayload", "preview"),
    ("SubagentStartPayload", "delegation_id"),
    ("SubagentCompletePayload", "delegation_id"),
    ("FsRequestPayload", "content"),  # a write's only
    # each op of a terminal.request carries only its own keys
    *(("TerminalRequestPayload", k) for k in ("call_id", "terminal_id", "command", "args",
                                              "env", "cwd", "output_byte_limit")),
    ("MessageCompletePayload", "context"),  # a turn that asked a model
    # long sessions: totals only on the session.info that ends a turn; a turn's
    # usage, model and cost only when it asked a model
    ("SessionInfoPayload", "usage"),
    ("MessageCompletePayload", "usage"),
    ("MessageCompletePayload", "model"),
    ("MessageCompletePayload", "cost_usd"),
    # a cron job's stored options hold only the options that were given
    *(("TurnOptions", f) for f in ("provider", "model", "base_url", "toolsets", "reasoning",
                                   "max_turns", "ignore_rules", "sandbox")),
})

#: data keys always sent with an error of each reason
ERROR_DATA_REQUIRED: dict[str, tuple[str, ...]] = {
    "invalid_params": ("fields",),
    "admission_conflict": ("admission_id",),
    "storage_unavailable": ("storage_reason",),
}

#: the base_url rule as a pattern: http(s), a host, nothing else enforced here
BASE_URL_PATTERN = r"^https?://[^/?#\s]+"


def _error_data_models() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for reason in ERRORS:
        name = _error_name(reason)
        fields: dict[str, Any] = {"reason": (Literal[reason], ...)}
        for key in ERROR_DATA_REQUIRED.get(reason, ()):
            annotation = ErrorData.model_fields[key].annotation
            fields[key] = (annotation, ...)
        out[reason] = create_model(name, __base__=ErrorData, **fields)
    return out


def protocol_schema() -> dict[str, Any]:
    """The protocol as one JSON-serialisable dict (a JSON Schema 2020-12 document)."""
    error_data = _error_data_models()
    validation: set[type[BaseModel]] = {m.params for m in METHODS.values()} | {JsonRpcRequest}
    serialization: set[type[BaseModel]] = {m.result for m in METHODS.values()}
    serialization |= set(EVENT_MODELS.values()) | set(EVENT_PAYLOADS.values())
    serialization |= {EventNotification, JsonRpcResult, JsonRpcError, FieldProblem,
                      *error_data.values()}
    pairs: list[tuple[type[BaseModel], Any]] = [(m, "validation") for m in validation]
    pairs += [(m, "serialization") for m in serialization]
    pairs.sort(key=lambda p: p[0].__name__)
    keys, top = models_json_schema(pairs, ref_template="#/$defs/{model}")
    defs: dict[str, Any] = top["$defs"]

    def ref(model: type[BaseModel], mode: str) -> dict[str, Any]:
        r: dict[str, Any] = keys[(model, mode)]  # type: ignore[index]
        return r

    union = [ref(m, "serialization") for m in EVENT_MODELS.values()]
    defs["AnyEvent"] = {
        "title": "AnyEvent",
        "description": AnyEvent.__doc__.split("(")[0].strip() if AnyEvent.__doc__ else "",
        "oneOf": union,
        "discriminator": {"propertyName": "type"},
    }
    # a stored event (a snapshot's, session.events.since's): any type but the notices
    defs["Event"] = {
        "title": "Event",
        "description": "One entry of a session's durable event log (never a notice: the "
                       "replay gap, fs.request, terminal.request).",
        "oneOf": [ref(m, "serialization") for t, m in EVENT_MODELS.items()
                  if t not in NOTICE_TYPES],
        "discriminator": {"propertyName": "type"},
    }
    for name, d in defs.items():
        _finish(name, d, sent=name not in _names(validation))
    _rules(defs)
    return {
        "$schema": DRAFT,
        "$id": "urn:tether:protocol:" + PROTOCOL,
        "title": "TetherProtocol",
        "protocol": PROTOCOL,
        "methods": {
            name: {
                "doc": m.doc,
                "params": ref(m.params, "validation"),
                "result": ref(m.result, "serialization"),
            }
            for name, m in METHODS.items()
        },
        "events": {
            "method": EVENT_METHOD,
            "notification": ref(EventNotification, "serialization"),
            "envelope": {"$ref": "#/$defs/AnyEvent"},
            "types": list(EVENT_TYPES),
            "payloads": {t: ref(p, "serialization") for t, p in EVENT_PAYLOADS.items()},
            "events": {t: ref(m, "serialization") for t, m in EVENT_MODELS.items()},
        },
        "errors": [{"code": cls.code, "reason": reason,
                    "data": ref(error_data[reason], "serialization")}
                   for reason, cls in ERRORS.items()],
        "frames": {
            "request": ref(JsonRpcRequest, "validation"),
            "result": ref(JsonRpcResult, "serialization"),
            "error": ref(JsonRpcError, "serialization"),
            "event": ref(EventNotification, "serialization"),
        },
        "$defs": dict(sorted(defs.items())),
    }


def _names(models: set[type[BaseModel]]) -> set[str]:
    return {m.__name__ for m in models}


def _absent(name: str, key: str) -> bool:
    """Whether the owner may leave ``key`` out of the ``name`` it sends."""
    if name.endswith("ErrorData"):
        reason = next((r for r in ERRORS if _error_name(r) == name), None)
        return key not in ("reason", "detail", *ERROR_DATA_REQUIRED.get(reason or "", ()))
    return (name, key) in SOMETIMES_ABSENT


def _error_name(reason: str) -> str:
    return "".join(p.capitalize() for p in reason.split("_")) + "ErrorData"


def _finish(name: str, d: dict[str, Any], *, sent: bool) -> None:
    """Unique title = the def's name; what the owner always sends is required."""
    d["title"] = name
    props = d.get("properties")
    if not isinstance(props, dict):
        return
    for key, prop in props.items():
        prop.pop("title", None)  # a per-property title would become a type of its own
        if sent and not _absent(name, key):
            prop.pop("default", None)
    if sent:
        required = [k for k in props if not _absent(name, k)]
        if required:
            d["required"] = required


def _rules(defs: dict[str, Any]) -> None:
    """The owner's checks that JSON Schema can express, on the params that take them."""
    for name in ("SessionCreateParams", "PromptSubmitParams"):
        props = defs[name]["properties"]
        props["provider"] = {"anyOf": [{"enum": list(PROVIDER_NAMES)}, {"type": "null"}],
                             "description": "one of the owner's providers"}
        props["toolsets"] = {"anyOf": [{"type": "array", "maxItems": 64,
                                        "items": {"enum": list(TOOLSETS)}},
                                       {"type": "null"}],
                             "description": "toolsets the owner offers (runtime.describe)"}
        base = props["base_url"]
        for branch in base.get("anyOf", [base]):
            if branch.get("type") == "string":
                branch["pattern"] = BASE_URL_PATTERN
    receipt = defs["PromptReceiptParams"]
    receipt["oneOf"] = [
        {"required": ["admission_id"],
         "properties": {"admission_id": {"type": "string"}, "input_id": {"type": "null"}}},
        {"required": ["input_id"],
         "properties": {"input_id": {"type": "string"}, "admission_id": {"type": "null"}}},
    ]
    receipt["description"] = "Look a receipt up by exactly one of admission_id or input_id."

