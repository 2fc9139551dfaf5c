"""An editor's connection as executor of tools' work: the offers, and the requests to them.

An editor's adapter (``tether acp``) offers to execute part of a session's tool work:
the file tools' reads and writes (fs.offer: then the agent sees the editor's unsaved
buffers, and its writes land in the open buffers; docs/acp.md, "The editor's
buffers"), or the terminal tool's sandboxed commands (terminal.offer: they run in
the editor's terminals; editor_terminal.py). Per session and per kind, the newest
offer wins, and it lasts only while its connection lives.

The editor is only another executor of work already allowed: the tools check and
approve exactly as for the owner's own execution first. A request is a notice to the
offering connection (never stored, to that connection only; rpc envelope) answered
with fs.respond or terminal.respond; only that connection may answer, once. A
tool never waits longer than it chose: `Offers.ask` ends with the answer, the
timeout, or the connection gone, and says which.

``EditorFiles`` is the file tools' side: anything but an answer in time (no offer, the
connection gone, an error, ``tools.editor_fs_timeout_seconds``) and the tool uses the
disk; a turn never waits longer on an editor.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tether.rpc.envelope import fs_request
from tether.rpc.errors import Forbidden, InvalidParams, NotFound
from tether.rpc.framing import encode_event

from ..ledger.events import Viewer

__all__ = ["EditorFiles", "Offer", "Offers", "Reply"]

log = logging.getLogger("tether.editor")

#: builds a request's notice: (session_id, admission_id, payload) -> envelope
Notice = Callable[[str, str | None, dict[str, Any]], dict[str, Any]]


@dataclass
class Offer:
    """What one connection executes for a session."""

    viewer: Viewer
    ops: frozenset[str]


@dataclass
class Reply:
    """How a request ended: ``answered`` (``answer`` holds the respond params),
    ``timeout``, ``gone`` (the connection closed after it was sent) or ``unsent``
    (no offer, or its connection was closed before it could be sent)."""

    how: str
    answer: dict[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.how == "answered"


@dataclass
class _Asked:
    viewer: Viewer
    op: str
    answer: asyncio.Future[dict[str, Any] | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


class Offers:
    """One kind of offer (``name``: ``file``, ``terminal``): the sessions' offering
    connections, and the requests waiting for their answers."""

    def __init__(self, name: str, notice: Notice, respond: str, id_prefix: str) -> None:
        self.name = name
        self._notice = notice
        self._respond = respond  # the method that answers (fs.respond, terminal.respond)
        self._id_prefix = id_prefix
        self._offers: dict[str, Offer] = {}
        self._asked: dict[str, _Asked] = {}
        self._watched: set[Viewer] = set()

    # -- the wire side (transport/fs.py) ----------------------------------------

    def offer(self, session_id: str, viewer: Viewer, ops: frozenset[str]) -> Offer | None:
        """Hold ``viewer``'s offer of ``ops`` for the session (the newest wins); no
        ``ops`` withdraws it if it is the one held. The offer held afterwards."""
        held = self._offers.get(session_id)
        if not ops:
            if held is not None and held.viewer is viewer:
                del self._offers[session_id]
                return None
            return held
        if viewer.closed:
            return held
        if viewer not in self._watched:
            self._watched.add(viewer)
            viewer.on_close.append(lambda: self._gone(viewer))
        self._offers[session_id] = Offer(viewer, ops)
        return self._offers[session_id]

    def held(self, session_id: str) -> Offer | None:
        offer = self._offers.get(session_id)
        return offer if offer is not None and not offer.viewer.closed else None

    def offers(self, session_id: str, *ops: str) -> bool:
        """Whether the session's offer covers every one of ``ops`` now."""
        offer = self.held(session_id)
        return offer is not None and all(op in offer.ops for op in ops)

    def respond(self, request_id: str, viewer: Viewer, answer: dict[str, Any]) -> None:
        """An answer from ``viewer``: NotFound for a request not waiting (unknown,
        answered, expired), Forbidden for one sent to another connection."""
        asked = self._asked.get(request_id)
        if asked is None or asked.answer.done():
            raise NotFound(f"no {self.name} request {request_id!r} is waiting (unknown, "
                           "answered, or it expired and the tool went on without it)")
        if asked.viewer is not viewer:
            raise Forbidden(f"{self.name} request {request_id!r} was sent to another "
                            "connection; only the one that made the offer answers it",
                            method=self._respond)
        self.check(asked.op, answer)
        asked.answer.set_result(answer)

    def check(self, op: str, answer: dict[str, Any]) -> None:
        """Refuse (InvalidParams) an answer that cannot be one to ``op``."""

    def _gone(self, viewer: Viewer) -> None:
        """``viewer``'s connection closed: its offers end, its requests are told."""
        self._watched.discard(viewer)
        for sid in [s for s, o in self._offers.items() if o.viewer is viewer]:
            del self._offers[sid]
        for asked in self._asked.values():
            if asked.viewer is viewer and not asked.answer.done():
                asked.answer.set_result(None)

    # -- the tools' side ----------------------------------------------------------

    async def ask(self, session_id: str, admission_id: str | None, op: str,
                  payload: dict[str, Any], timeout: float) -> Reply:
        """Send ``op`` with ``payload`` to the session's offering connection and wait
        at most ``timeout`` seconds for its answer."""
        offer = self.held(session_id)
        if offer is None:
            return Reply("unsent")
        request_id = self._id_prefix + secrets.token_hex(8)
        asked = self._asked[request_id] = _Asked(offer.viewer, op)
        body = {"request_id": request_id, "op": op, **payload,
                "expires_at": time.time() + timeout}
        try:
            offer.viewer.put_notice(encode_event(self._notice(session_id, admission_id, body)))
            if offer.viewer.closed:
                return Reply("unsent")
            answer = await asyncio.wait_for(asyncio.shield(asked.answer), timeout)
        except TimeoutError:
            return Reply("timeout")
        finally:
            del self._asked[request_id]
        return Reply("gone") if answer is None else Reply("answered", answer)


class EditorFiles(Offers):
    """The file tools' reads and writes by the session's editor (files.py)."""

    def __init__(self, timeout: float) -> None:
        super().__init__("file", fs_request, "fs.respond", "fsr_")
        self.timeout = timeout

    def check(self, op: str, answer: dict[str, Any]) -> None:
        if answer.get("error") is None and op == "read" and answer.get("text") is None:
            raise InvalidParams("a read's answer carries text (or error)", fields=[
                {"loc": "text", "msg": "required to answer a read", "type": "missing"}])

    async def read(self, session_id: str, admission_id: str | None, path: str) -> str | None:
        """The editor's text of ``path`` (checked already); None: read the disk."""
        if not self.offers(session_id, "read"):
            return None
        reply = await self._ask(session_id, admission_id, "read", {"path": path})
        return None if reply is None else str(reply.get("text") or "")

    async def write(self, session_id: str, admission_id: str | None, path: str,
                    content: str) -> bool:
        """Whether the editor wrote ``content`` to ``path`` (approved already); False:
        write the disk."""
        if not self.offers(session_id, "write"):
            return False
        reply = await self._ask(session_id, admission_id, "write",
                                {"path": path, "content": content})
        return reply is not None

    async def _ask(self, session_id: str, admission_id: str | None, op: str,
                   payload: dict[str, Any]) -> dict[str, Any] | None:
        reply = await self.ask(session_id, admission_id, op, payload, self.timeout)
        if reply.how == "timeout":
            log.info("the editor did not answer the %s of %s within %ss; the disk is used",
                     op, payload["path"], self.timeout)
        elif reply.answered and reply.answer.get("error") is not None:
            log.info("the editor could not %s %s: %s; the disk is used", op, payload["path"],
                     reply.answer["error"])
            return None
        return reply.answer if reply.answered else None
