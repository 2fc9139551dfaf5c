"""tether.clients: the async Python client library and the ``tether`` CLI.

It owns the client's side of the conversation: finding or starting the owner,
one WebSocket and what travels on it, reconnecting and resubmitting, and the
command line. What the owner and a client must agree on (errors, frames, the
event envelope, constants, the home layout) is not here but in ``tether.rpc``'s
pydantic-free modules, which this package imports; nothing else of tether is
imported (the CLI's ``serve --foreground`` and ``bench`` load the daemon lazily).

- ``client``: ``TetherClient``: typed calls, reconnects, the resilient submit.
- ``stream``: ``SessionStream``, a session's events in order, across reconnects.
- ``connection``: one WebSocket: request/reply matching, event routing.
- ``discovery``: owner liveness (descriptor, pid, socket), detached autostart.
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
