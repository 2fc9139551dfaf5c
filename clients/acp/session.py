"""What ``tether acp`` keeps for each session an editor has open: its event stream,
the tool calls seen (and the editor's terminals shown in them), the prompt running,
the delegation plan shown, and the context window's fill."""

from __future__ import annotations

import asyncio
from typing import Any

from .plan import DelegationPlan
from .updates import terminal_shown
from .usage import Meter

__all__ = ["OpenSession"]


class OpenSession:
    def __init__(self, sid: str, cwd: str | None, stream: Any) -> None:
        self.sid, self.cwd, self.stream = sid, cwd, stream
        self.own_inputs: set[str] = set()
        self.calls: dict[str, tuple[str, str]] = {}  # ACP call id → (tool, arguments)
        #: the editor's terminal a call's command runs in, by ACP call id; and the
        #: calls already announced (a terminal made later is shown by an update)
        self.terminals: dict[str, str] = {}
        self.announced: set[str] = set()
        self.completed: dict[str, dict[str, Any]] = {}  # admission → message.complete
        self.arrived = asyncio.Event()
        self.running: str | None = None  # the admission of this editor's prompt
        #: a prompt is being submitted and has no receipt yet; a cancel that arrives
        #: then (its turn may already be streaming) is applied once the receipt is in
        self.submitting = False
        self.cancel_wanted = False
        self.follower: asyncio.Task[None] | None = None
        #: the sandbox mode the editor chose for its prompts (None: the configured one)
        self.sandbox: str | None = None
        self.plan = DelegationPlan()
        self.meter = Meter()

    def terminal(self, key: str, terminal_id: str) -> Any | None:
        """Hold the editor's terminal of the call ``key``: the update that shows it in
        the call's card now, or None when the call's announcement will carry it."""
        self.terminals[key] = terminal_id
        return terminal_shown(key, terminal_id) if key in self.announced else None

    def end_calls(self, turn: str) -> list[str]:
        """The calls of a turn (``turn``: its call-key prefix) still open when it
        ended, forgotten here: each is to be shown cut off (a cancel while it
        waited for an approval)."""
        ended = [k for k in self.announced if k.startswith(turn)]
        for key in ended:
            self.announced.discard(key)
            self.terminals.pop(key, None)
        return ended
