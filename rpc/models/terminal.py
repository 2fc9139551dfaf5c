"""Wire models of the editor's terminals as executor of the terminal tool's sandboxed
commands: terminal.offer and terminal.respond (the ``terminal.request`` notice they
answer is in events.py; docs/acp.md, "The editor's terminals")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Model
from .core import Id

__all__ = ["TERMINAL_OUTPUT_MAX_CHARS", "TerminalExit", "TerminalOfferParams",
           "TerminalOfferResult", "TerminalRespondParams", "TerminalRespondResult"]

#: the most output one terminal.respond may carry (the owner asks for far less)
TERMINAL_OUTPUT_MAX_CHARS = 1_000_000


class TerminalOfferParams(Model):
    """This connection runs the sandboxed commands of ``session_id``'s terminal tool in
    its editor's terminals from now on; ``run`` false withdraws its offer."""

    session_id: Id
    run: bool = True


class TerminalOfferResult(Model):
    """Whether this connection's offer is the one now held for the session."""

    session_id: str
    run: bool


class TerminalExit(Model):
    """How a command in an editor's terminal ended: its exit code, or the signal that
    ended it (ACP's TerminalExitStatus)."""

    exit_code: int | None = None
    signal: Annotated[str, Field(max_length=64)] | None = None


class TerminalRespondParams(Model):
    """The answer to one ``terminal.request``: what its ``op`` gives (``create``:
    ``terminal_id``; ``output``: ``output``, ``truncated`` and, once it ended,
    ``exit_status``; ``wait_for_exit``: ``exit_status``; ``kill``, ``release``:
    nothing), or ``error``. ``refused``: the editor answered the request with an error
    of its own, so it did not do it (a ``create`` refused started nothing)."""

    request_id: Id
    terminal_id: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    output: Annotated[str, Field(max_length=TERMINAL_OUTPUT_MAX_CHARS)] | None = None
    truncated: bool | None = None
    exit_status: TerminalExit | None = None
    error: Annotated[str, Field(max_length=2000)] | None = None
    refused: bool = False


class TerminalRespondResult(Model):
    """``taken``: the tool got this answer (it was still waiting)."""

    status: Literal["taken"]
