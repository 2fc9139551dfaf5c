"""tether.rpc: the wire protocol, with no I/O and no imports from the rest of tether.

It owns everything the owner and its clients must agree on, each in one place.
Shared by both sides, and importable without pydantic (a client's start-up
never loads it):

- ``protocol``: the fixed names and ceilings: ``PROTOCOL``, ``EVENT_METHOD``, the
  ``tether.v1`` subprotocol and ``tether.token.`` prefix, ``MAX_ID_CHARS``, ...
- ``errors``: ``RpcError`` and one subclass per SPEC §2 reason, to and from the wire.
- ``framing``: encoding of requests, notifications, events and replies; ``decode_reply``.
- ``jsonrpc``: the same request and reply as Python objects, for a client that writes
  its frames with another JSON library (``request_object``, ``reply_result``).
- ``envelope``: the event envelope (``event_envelope``) and the ``session.replay_gap``
  notice (``replay_gap``); ``EVENT_TYPES``.
- ``home``: the home directory's layout (``HomeLayout``) and ``resolve_home`` (SPEC §1).

Built on pydantic, for the owner's validation and for ``tether schema``:

- ``models``: strict pydantic models of every method's params and result, and ``Event``.
- ``methods``: ``METHODS``, the one table of method name -> params, result, doc.
- ``dispatch``: ``Dispatcher``, the sans-I/O JSON-RPC 2.0 dispatcher.
- ``schema``: ``protocol_schema()``, the JSON Schema behind ``tether schema``.

Every public name is importable from here, but the submodules load on first use
(PEP 562), so ``from tether.rpc import PROTOCOL`` costs no more than the
constant, while ``models`` pulls in pydantic (~100 ms); so does ``__all__``, since
the core models in it are those ``models`` exports.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule that defines it; drives the lazy __getattr__ below. The core
# models are not listed: they are what tether.rpc.models exports, asked of it on first use.
_SOURCES: dict[str, str] = {}
for _module, _names in {
    "dispatch": ("MAX_BATCH", "MAX_FIELD_ERRORS", "Dispatcher", "Handler"),
    "envelope": (
        "EVENT_TYPES", "GAP_CLIENT_QUEUE_OVERFLOW", "GAP_VIEWER_QUEUE_OVERFLOW", "REPLAY_GAP",
        "event_envelope", "replay_gap",
    ),
    "errors": (
        "ERRORS", "AdmissionConflict", "Forbidden", "InternalError", "InvalidParams", "InvalidRequest",
        "MethodNotFound", "NotFound", "Overloaded", "ParseError", "RpcError",
        "RuntimeDraining", "StorageUnavailable", "UnknownExecution",
    ),
    "framing": (
        "decode_reply", "encode_error", "encode_event", "encode_notification",
        "encode_request", "encode_result",
    ),
    "home": ("EXIT_OWNER_RUNNING", "HOME_ENV", "HomeLayout", "resolve_home"),
    "methods": ("METHODS", "Method"),
    "protocol": (
        "EVENT_METHOD", "JSONRPC_VERSION", "MAX_ATTACHMENTS", "MAX_ID_CHARS", "MAX_SEQ",
        "MAX_TEXT_CHARS", "PROTOCOL", "SUBPROTOCOL", "TOKEN_PREFIX",
    ),
    "schema": ("protocol_schema",),
}.items():
    for _name in _names:
        _SOURCES[_name] = _module
del _module, _names, _name

_SUBMODULES = frozenset({*_SOURCES.values(), "models"})


def _core_models() -> list[str]:
    """The core models' names: tether.rpc.models' ``__all__`` (this loads pydantic)."""
    names: list[str] = importlib.import_module(f"{__name__}.models").__all__
    return names


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # `tether.rpc.models` as an attribute, as eager imports allowed
        return importlib.import_module(f"{__name__}.{name}")
    module = _SOURCES.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    elif name == "__all__":
        # the public surface: the names above and the core models
        # (tests/rpc/test_rpc_surface.py pins it)
        value = [*_SOURCES, *_core_models()]
    elif not name.startswith("_") and name in _core_models():
        value = getattr(importlib.import_module(f"{__name__}.models"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))
