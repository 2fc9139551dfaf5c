"""tether.clients.cli: the ``tether`` command (the console script
``tether.clients.cli:main``; ``python -m tether.clients.cli`` is the same).

- ``entry``: the parser, ``main()``, and the one place a failure becomes an exit code.
- ``commands``: the small commands; ``session_cmds``, ``session_parser``,
  ``long_cmds``: sessions; ``approvals_cmd``, ``approvals_parser``: approvals;
  ``cron_cmd``: cron; ``completion``, ``help``: shell completion and examples.
- ``admin``: commands that look after the owner itself: the login service, the
  configuration, doctor, logs, the fleet's nodes, MCP servers, tokens and the web link.

May import: the library, the terminal chat (``tui``) and, lazily inside
``tether acp``, the ACP adapter; the daemon and the bench only lazily, inside the
commands that need them (``serve --foreground``, ``bench``, ``config check``,
``doctor``, ``mcp``, ``status --store``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """The console script: run one command, return its exit code (entry.py)."""
    from .entry import main as run

    return run(argv)


def build_parser() -> Any:
    """The whole ``tether`` parser (entry.py), for completion scripts and tests."""
    from .entry import build_parser as build

    return build()
