"""What ``tether acp`` keeps for each session an editor has open: its event stream,
the tool calls seen, the prompt running, and the delegation plan shown."""

from __future__ import annotations

import asyncio
from typing import Any

from .plan import DelegationPlan

__all__ = ["OpenSession"]


class OpenSession:
    def __init__(self, sid: str, cwd: str | None, stream: Any) -> None:
        self.sid, self.cwd, self.stream = sid, cwd, stream
        self.own_inputs: set[str] = set()
        self.calls: dict[str, tuple[str, str]] = {}  # ACP call id → (tool, arguments)
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
