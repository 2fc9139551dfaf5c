"""fs.offer, fs.respond, terminal.offer and terminal.respond: an editor's connection as
executor of a session's file reads and writes (toolsets/editor.py; docs/acp.md, "The
editor's buffers") and of its sandboxed commands (toolsets/editor_terminal.py; "The
editor's terminals").

All four are refused to the agent's own processes (peers.py), and the offers are taken
over the Unix socket only: what an editor answers becomes what the agent reads, and an
editor's terminal must run on the owner's machine for the sandbox's argv to mean there
what it means here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams, NotFound
from tether.rpc.models import fs as m
from tether.rpc.models import terminal as mt

from ..toolsets.editor import EditorFiles, Offers
from ..toolsets.editor_terminal import EditorTerminals
from .server import Call

__all__ = ["fs_handlers"]


def fs_handlers(files: EditorFiles, terminals: EditorTerminals,
                session_exists: Callable[[str], Awaitable[bool]],
                ) -> Callable[[Dispatcher], None]:
    """What registers fs.offer, fs.respond, terminal.offer and terminal.respond."""

    async def take(offers: Offers, method: str, session_id: str, call: Call,
                   ops: frozenset[str]) -> frozenset[str]:
        """The offer of ``ops`` made by this connection; what of it is held now."""
        if call.transport != "unix":
            raise InvalidParams(f"{method} is only accepted over the Unix socket (an "
                                "editor's answers become what the agent sees)", fields=[
                                    {"loc": "transport", "msg": "Unix socket only",
                                     "type": "value_error"}])
        if not await session_exists(session_id):
            raise NotFound(f"no session {session_id!r}", session_id=session_id)
        held = offers.offer(session_id, call.viewer, ops)
        return held.ops if held is not None and held.viewer is call.viewer else frozenset()

    def register(d: Dispatcher) -> None:
        @d.register("fs.offer")
        async def offer(p: m.FsOfferParams, call: Call) -> dict[str, Any]:
            ops = frozenset(op for op, on in (("read", p.read), ("write", p.write)) if on)
            mine = await take(files, "fs.offer", p.session_id, call, ops)
            return {"session_id": p.session_id, "read": "read" in mine,
                    "write": "write" in mine}

        @d.register("fs.respond")
        async def respond(p: m.FsRespondParams, call: Call) -> dict[str, Any]:
            files.respond(p.request_id, call.viewer, p.model_dump(exclude={"request_id"}))
            return {"status": "taken"}

        @d.register("terminal.offer")
        async def terminal_offer(p: mt.TerminalOfferParams, call: Call) -> dict[str, Any]:
            ops = frozenset({"run"}) if p.run else frozenset()
            mine = await take(terminals, "terminal.offer", p.session_id, call, ops)
            return {"session_id": p.session_id, "run": "run" in mine}

        @d.register("terminal.respond")
        async def terminal_respond(p: mt.TerminalRespondParams, call: Call) -> dict[str, Any]:
            terminals.respond(p.request_id, call.viewer,
                              p.model_dump(exclude={"request_id"}, exclude_none=True))
            return {"status": "taken"}

    return register
