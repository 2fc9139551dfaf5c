"""tether.clients: the async Python client library, the ``tether`` CLI, its terminal
chat, and the ACP adapter for editors.

What the owner and a client must agree on (errors, frames, the event envelope,
constants, the home layout) is not here but in ``tether.rpc``'s pydantic-free
modules, which this package imports; nothing else of tether is imported (the CLI's
``serve --foreground``, ``bench``, ``config check`` and ``doctor`` load the daemon
or the bench lazily, inside the command).

- ``library``: what a program embedding tether imports: ``TetherClient``, one
  WebSocket, finding and starting the owner, streams across reconnects.
- ``tui``: the terminal chat: the interactive prompt, rendering, markdown, slash
  commands, approval prompts.
- ``acp``: ``tether acp``, the Agent Client Protocol over stdio.
- ``cli``: the ``tether`` command: argument parsing and one module per area of commands.

They import in one direction: library imports none of the others; tui and acp import
the library; cli imports all three (acp lazily). tests/test_layout.py holds the rule.

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
    return getattr(importlib.import_module(f"{__name__}.library.{module}"), name)
