"""tether.clients: the async Python client library and the ``tether`` CLI.

- ``client``: ``TetherClient``: typed calls, reconnects, the resilient submit.
- ``stream``: ``SessionStream``, a session's events in order, across reconnects.
- ``connection``: one WebSocket: request/reply matching, event routing.
- ``discovery``: home resolution, owner liveness, detached autostart.
- ``cli`` / ``chat`` / ``render`` / ``exits``: the ``tether`` command.

``from tether.clients import TetherClient`` works; the import is lazy so that
``tether.clients.cli`` starts without loading websockets until a command needs it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ConnectionLost", "OwnerUnavailable", "SessionStream", "TetherClient",
           "new_input_id"]

_SOURCES = {"ConnectionLost": "client", "SessionStream": "client", "TetherClient": "client",
            "new_input_id": "client", "OwnerUnavailable": "discovery"}


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
