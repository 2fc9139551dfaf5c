"""The editor as executor of the file tools' reads and writes (docs/acp.md, "The editor's buffers").

An editor's adapter (``tether acp``) offers, with fs.offer, to read and/or write the
files of one session: then the agent sees the editor's unsaved buffers, and its writes
land in the open buffers. The newest offer of a session wins, and it lasts only while
its connection lives.

The editor is only another executor of a read or write already allowed: the file tools
(files.py) resolve the path, check it against the working directory and the private
paths and (a write) approve it exactly as for the disk first; and only a regular file
that exists beneath the session's working directory is handed to the editor (a new
file, a missing directory, a path outside the working directory stay with the disk,
where the tools write through a directory descriptor and never through a symlink).
Then the offering connection gets an ``fs.request`` notice (never stored, to that
connection only) and the tool waits at most ``tools.editor_fs_timeout_seconds`` for its
fs.respond. Anything but an answer in time (no offer, the connection gone, an error,
the timeout) and the tool uses the disk: a turn never waits longer on an editor.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass, field

from tether.rpc.envelope import fs_request
from tether.rpc.errors import Forbidden, InvalidParams, NotFound
from tether.rpc.framing import encode_event

from ..ledger.events import Viewer

__all__ = ["EditorFiles", "Offer"]

log = logging.getLogger("tether.editor")


@dataclass
class Offer:
    """What one connection executes for a session."""

    viewer: Viewer
    read: bool
    write: bool


@dataclass
class _Asked:
    viewer: Viewer
    op: str
    #: the answer: the text read, "" for a write done; None for an error (use the disk)
    answer: asyncio.Future[str | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class EditorFiles:
    """The sessions' editor offers, and the requests waiting for an editor's answer."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._offers: dict[str, Offer] = {}
        self._asked: dict[str, _Asked] = {}
        self._watched: set[Viewer] = set()

    # -- the wire side (transport/handlers.py) ----------------------------------

    def offer(self, session_id: str, viewer: Viewer, *, read: bool, write: bool) -> Offer | None:
        """Hold ``viewer``'s offer for the session (the newest wins); both false
        withdraws it if it is the one held. The offer held afterwards."""
        held = self._offers.get(session_id)
        if not (read or write):
            if held is not None and held.viewer is viewer:
                del self._offers[session_id]
                return None
            return held
        if viewer.closed:
            return held
        if viewer not in self._watched:
            self._watched.add(viewer)
            viewer.on_close.append(lambda: self._gone(viewer))
        self._offers[session_id] = Offer(viewer, read, write)
        return self._offers[session_id]

    def held(self, session_id: str) -> Offer | None:
        offer = self._offers.get(session_id)
        return offer if offer is not None and not offer.viewer.closed else None

    def respond(self, request_id: str, viewer: Viewer, text: str | None,
                error: str | None) -> None:
        """An fs.respond from ``viewer``: NotFound for a request not waiting (unknown,
        answered, expired), Forbidden for one sent to another connection."""
        asked = self._asked.get(request_id)
        if asked is None or asked.answer.done():
            raise NotFound(f"no file request {request_id!r} is waiting (unknown, answered, "
                           "or it expired and the tool used the disk)")
        if asked.viewer is not viewer:
            raise Forbidden(f"file request {request_id!r} was sent to another connection; "
                            "only the one that made the offer answers it", method="fs.respond")
        if error is None and asked.op == "read" and text is None:
            raise InvalidParams("a read's answer carries text (or error)", fields=[
                {"loc": "text", "msg": "required to answer a read", "type": "missing"}])
        if error is not None:
            log.info("the editor could not %s (request %s): %s; the disk is used",
                     asked.op, request_id, error)
        asked.answer.set_result(None if error is not None else (text or "")
                                if asked.op == "read" else "")

    def _gone(self, viewer: Viewer) -> None:
        """``viewer``'s connection closed: its offers end, its requests use the disk now."""
        self._watched.discard(viewer)
        for sid in [s for s, o in self._offers.items() if o.viewer is viewer]:
            del self._offers[sid]
        for asked in self._asked.values():
            if asked.viewer is viewer and not asked.answer.done():
                asked.answer.set_result(None)

    # -- the tools' side (files.py) ---------------------------------------------

    async def read(self, session_id: str, admission_id: str | None, path: str) -> str | None:
        """The editor's text of ``path`` (checked already); None: read the disk."""
        return await self._ask(session_id, admission_id, "read", path, None)

    async def write(self, session_id: str, admission_id: str | None, path: str,
                    content: str) -> bool:
        """Whether the editor wrote ``content`` to ``path`` (approved already); False:
        write the disk."""
        return await self._ask(session_id, admission_id, "write", path, content) is not None

    def offers(self, session_id: str, *ops: str) -> bool:
        """Whether the session's editor executes every one of ``ops`` now."""
        offer = self.held(session_id)
        return offer is not None and all(getattr(offer, op) for op in ops)

    async def _ask(self, session_id: str, admission_id: str | None, op: str, path: str,
                   content: str | None) -> str | None:
        offer = self.held(session_id)
        if offer is None or not getattr(offer, op):
            return None
        request_id = "fsr_" + secrets.token_hex(8)
        asked = self._asked[request_id] = _Asked(offer.viewer, op)
        payload = {"request_id": request_id, "op": op, "path": path,
                   "expires_at": time.time() + self.timeout}
        if content is not None:
            payload["content"] = content
        try:
            offer.viewer.put_notice(encode_event(fs_request(session_id, admission_id, payload)))
            return await asyncio.wait_for(asyncio.shield(asked.answer), self.timeout)
        except TimeoutError:
            log.info("the editor did not answer the %s of %s within %ss; the disk is used",
                     op, path, self.timeout)
            return None
        finally:
            del self._asked[request_id]
