"""fs.offer and fs.respond: an editor's connection as executor of a session's file reads
and writes (toolsets/editor.py; docs/acp.md, "The editor's buffers").

Both are refused to the agent's own processes (peers.py), and fs.offer is taken over the
Unix socket only: what an editor answers becomes what the agent reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tether.rpc import models_fs as m
from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams, NotFound

from ..toolsets.editor import EditorFiles
from .server import Call

__all__ = ["fs_handlers"]


def fs_handlers(files: EditorFiles, session_exists: Callable[[str], Awaitable[bool]],
                ) -> Callable[[Dispatcher], None]:
    """What registers fs.offer and fs.respond on a dispatcher."""

    def register(d: Dispatcher) -> None:
        @d.register("fs.offer")
        async def offer(p: m.FsOfferParams, call: Call) -> dict[str, Any]:
            if call.transport != "unix":
                raise InvalidParams("fs.offer is only accepted over the Unix socket (an "
                                    "editor's answers become what the agent reads)", fields=[
                                        {"loc": "transport", "msg": "Unix socket only",
                                         "type": "value_error"}])
            if not await session_exists(p.session_id):
                raise NotFound(f"no session {p.session_id!r}", session_id=p.session_id)
            held = files.offer(p.session_id, call.viewer, read=p.read, write=p.write)
            mine = held if held is not None and held.viewer is call.viewer else None
            return {"session_id": p.session_id, "read": bool(mine and mine.read),
                    "write": bool(mine and mine.write)}

        @d.register("fs.respond")
        async def respond(p: m.FsRespondParams, call: Call) -> dict[str, Any]:
            files.respond(p.request_id, call.viewer, p.text, p.error)
            return {"status": "taken"}

    return register
