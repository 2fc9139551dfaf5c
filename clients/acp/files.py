"""The editor's ``fs/read_text_file`` and ``fs/write_text_file`` as executor of the owner's
file tools (docs/acp.md, "The editor's buffers").

When the editor's ``clientCapabilities.fs`` has them, every session this adapter opens
(``session/new``, ``session/load``, and again on the new connection after a reconnect)
is offered to the owner with fs.offer. The owner's file tools then send an
``fs.request`` notice for a read or write they have already checked and approved; it
is asked of the editor and answered with fs.respond: the text read, the write done, or
the editor's error (the tool then uses the disk, as it does when no answer comes in
time). The editor's terminals are terminals.py's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from acp import RequestError

from tether.rpc.errors import RpcError

from .relay import Relay

__all__ = ["EditorFiles"]

log = logging.getLogger("tether.acp")


class EditorFiles(Relay):
    """What the editor executes for the owner, and the answering of its requests."""

    def __init__(self) -> None:
        super().__init__()
        self.read = self.write = False

    def capabilities(self, client_capabilities: Any) -> None:
        """Take the editor's ``initialize`` capabilities (``fs.readTextFile``, ...)."""
        fs = getattr(client_capabilities, "fs", None)
        self.read = bool(getattr(fs, "read_text_file", False))
        self.write = bool(getattr(fs, "write_text_file", False))

    async def offer(self, session_id: str) -> None:
        """Offer the session's reads and writes to the owner (nothing if the editor has
        neither); a refusal is logged and the tools use the disk."""
        if not (self.read or self.write) or self.tether is None:
            return
        if self.tether.connection is not None:  # this connection's notices come here
            self.tether.connection.notices["fs.request"] = self.on_request
        try:
            held = await self.tether.call("fs.offer", session_id=session_id, read=self.read,
                                          write=self.write)
        except RpcError as exc:
            log.warning("the editor's buffers were not offered for %s: %s", session_id,
                        exc.detail)
            return
        log.info("the editor executes %s of %s", " and ".join(
            op for op in ("read", "write") if held.get(op)) or "nothing", session_id)

    async def _answer(self, event: dict[str, Any]) -> None:
        p = event.get("payload") or {}
        sid, rid, path = event.get("session_id"), p.get("request_id"), p.get("path")
        if not (isinstance(rid, str) and isinstance(path, str) and self.editor is not None):
            return
        left = max(0.1, float(p.get("expires_at") or 0) - time.time())
        answer: dict[str, Any] = {}
        try:
            if p.get("op") == "read" and self.read:
                got = await asyncio.wait_for(
                    self.editor.read_text_file(session_id=sid, path=path), left)
                answer["text"] = got.content
            elif p.get("op") == "write" and self.write and isinstance(p.get("content"), str):
                await asyncio.wait_for(self.editor.write_text_file(
                    session_id=sid, path=path, content=p["content"]), left)
            else:
                answer["error"] = f"this editor does not {p.get('op')} files for tether"
        except TimeoutError:
            return  # the owner has used the disk by now
        except RequestError as exc:
            answer["error"] = f"the editor refused: {exc}"[:2000]
        except Exception as exc:  # the editor went away, or answered nonsense
            answer["error"] = f"the editor failed: {exc}"[:2000]
        if self.tether is None:
            return
        try:
            await self.tether.call("fs.respond", request_id=rid, **answer)
        except RpcError as exc:  # expired meanwhile: the tool used the disk
            log.info("the answer to %s was not taken: %s", rid, exc.detail)
        except ConnectionError:
            pass

