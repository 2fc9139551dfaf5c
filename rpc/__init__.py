"""tether.rpc: the wire protocol, with no I/O and no imports from the rest of tether.

- ``protocol``: the fixed names and ceilings both sides share (no imports at all).
- ``errors``: ``RpcError`` and one subclass per SPEC §2 reason, to and from the wire.
- ``models``: strict pydantic models of every method's params and result, and ``Event``.
- ``methods``: ``METHODS``, the one table of method name -> params, result, doc.
- ``framing``: encoding of requests, notifications, events and replies; ``decode_reply``.
- ``envelope``: the event envelope and the ``session.replay_gap`` notice, as dicts.
- ``home``: the home directory's layout and its resolution (SPEC §1).
- ``dispatch``: ``Dispatcher``, the sans-I/O JSON-RPC 2.0 dispatcher.
- ``schema``: ``protocol_schema()``, the JSON Schema behind ``tether schema``.

Every public name is importable from here, but the submodules load on first use
(PEP 562): ``errors`` needs nothing beyond the stdlib, while ``models`` pulls in
pydantic (~100 ms), which the CLI's hot path never needs.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule that defines it; drives the lazy __getattr__ below
_SOURCES: dict[str, str] = {}
for _module, _names in {
    "dispatch": ("MAX_BATCH", "MAX_FIELD_ERRORS", "Dispatcher", "Handler"),
    "envelope": (
        "EVENT_TYPES", "GAP_CLIENT_QUEUE_OVERFLOW", "GAP_VIEWER_QUEUE_OVERFLOW", "REPLAY_GAP",
        "event_envelope", "replay_gap",
    ),
    "errors": (
        "ERRORS", "AdmissionConflict", "InternalError", "InvalidParams", "InvalidRequest",
        "MethodNotFound", "NotFound", "Overloaded", "ParseError", "RpcError",
        "RuntimeDraining", "StorageUnavailable", "UnknownExecution",
    ),
    "framing": (
        "decode_reply", "encode_error", "encode_event", "encode_notification",
        "encode_request", "encode_result",
    ),
    "home": ("EXIT_OWNER_RUNNING", "HOME_ENV", "HomeLayout", "resolve_home"),
    "methods": ("METHODS", "Method"),
    "models": (
        "TURN_OPTION_FIELDS", "Attachment", "Event", "EventsSinceResult", "InterruptResult",
        "Model", "OkResult", "PendingAdmission", "PingParams", "PingResult",
        "PromptCancelParams", "PromptReceiptParams", "PromptResolveUnknownParams",
        "PromptSubmitParams", "Receipt", "RuntimeDescribeParams", "RuntimeDescribeResult",
        "RuntimeShutdownParams", "SessionCreateParams", "SessionDetachParams",
        "SessionEventsSinceParams", "SessionInfo", "SessionInterruptParams",
        "SessionListParams", "SessionListResult", "SessionResumeParams", "SessionSummary",
        "ShutdownResult", "Snapshot", "TokenCreateParams", "TokenCreateResult",
        "TranscriptMessage", "TurnOptions", "TurnResult",
    ),
    "protocol": (
        "EVENT_METHOD", "JSONRPC_VERSION", "MAX_ATTACHMENTS", "MAX_ID_CHARS", "MAX_SEQ",
        "MAX_TEXT_CHARS", "PROTOCOL", "SUBPROTOCOL", "TOKEN_PREFIX",
    ),
    "schema": ("protocol_schema",),
}.items():
    for _name in _names:
        _SOURCES[_name] = _module
del _module, _names, _name

# the public surface is exactly the names above (tests/rpc/test_rpc_surface.py pins it)
__all__ = list(_SOURCES)


_SUBMODULES = frozenset(_SOURCES.values())


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # `tether.rpc.models` as an attribute, as eager imports allowed
        return importlib.import_module(f"{__name__}.{name}")
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

