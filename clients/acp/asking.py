"""``tether acp``'s permission requests: an ``approval.requested`` becomes the
editor's ``session/request_permission``, its answer an ``approval.respond``.

An approval is the owner's, not the editor's: another viewer, ``tether approve``
or the approval's timeout may settle it first (``approval.resolved``). The
adapter then stops waiting and ends the editor's request with the protocol's
``$/cancel_request {requestId}``, so the dialog closes; whatever the editor
answers afterwards is dropped (its request is no longer pending), and an answer
that crosses the resolution on the wire is refused by the owner
(``already_resolved``) and changes nothing.

The package (``agent-client-protocol`` 0.12) sends requests without telling
their JSON-RPC id and has no call for ``$/cancel_request``: the id is read by an
observer of the outgoing messages (:meth:`Asking.observe`, given to
``run_agent``), and the notification is sent on the connection beneath the
package's agent-side wrapper.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from acp.connection import StreamDirection, StreamEvent

from tether.rpc.errors import RpcError

from .updates import DECISIONS, PERMISSION_OPTIONS, call_id, tool_update

__all__ = ["Asking", "CANCEL_REQUEST"]

log = logging.getLogger("tether.acp")

#: the protocol's notification that withdraws a request the sender made
CANCEL_REQUEST = "$/cancel_request"
_PERMISSION = "session/request_permission"


class Asking:
    """The permission requests open in the editor, by approval id."""

    def __init__(self) -> None:
        self.editor: Any = None  # the AgentSideConnection
        self.tether: Any = None  # the TetherClient, set once connected
        #: (session id, tool call id) → the JSON-RPC id of its request_permission
        self._ids: dict[tuple[str, str], int | str] = {}
        #: approval id → (task waiting on the editor, session id, tool call id)
        self._open: dict[str, tuple[asyncio.Task[None], str, str]] = {}

    def observe(self, event: StreamEvent) -> None:
        """Note the id of each outgoing permission request (a connection observer)."""
        msg = event.message
        if event.direction is not StreamDirection.OUTGOING or msg.get("method") != _PERMISSION:
            return
        params = msg.get("params") or {}
        key = (str(params.get("sessionId")), str((params.get("toolCall") or {}).get("toolCallId")))
        self._ids[key] = msg["id"]

    def is_open(self, approval_id: str) -> bool:
        return approval_id in self._open

    def ask(self, sid: str, cwd: str | None, prompt: dict[str, Any],
            calls: dict[str, tuple[str, str]]) -> None:
        """Show the approval ``prompt`` (an approval.requested payload with its
        admission id) in the editor, once; its answer goes to the owner."""
        approval_id = prompt["approval_id"]
        if approval_id in self._open:
            return
        key = call_id(prompt.get("admission_id"), prompt["call_id"])
        name, arguments = calls.get(key, (prompt.get("tool", ""), ""))
        call = tool_update(key, name, arguments, cwd)
        call.title = f"{call.title} — {prompt.get('why', '')}".strip(" —")
        task = asyncio.create_task(self._permission(sid, approval_id, key, call))
        self._open[approval_id] = (task, sid, key)

        def done(_: asyncio.Task[None]) -> None:
            if self._open.get(approval_id, (None,))[0] is task:
                del self._open[approval_id]
            self._ids.pop((sid, key), None)

        task.add_done_callback(done)

    async def _permission(self, sid: str, approval_id: str, key: str, call: Any) -> None:
        answer = await self.editor.request_permission(
            session_id=sid, tool_call=call, options=PERMISSION_OPTIONS)
        # the editor answered: its request is closed, nothing to withdraw any more
        self._open.pop(approval_id, None)
        self._ids.pop((sid, key), None)
        outcome = answer.outcome
        if getattr(outcome, "outcome", None) != "selected" or outcome.option_id not in DECISIONS:
            return  # the editor cancelled the request: the turn's cancel settles it
        try:
            await self.tether.call("approval.respond", session_id=sid, approval_id=approval_id,
                                   decision=outcome.option_id, reason=None)
        except RpcError as exc:  # answered elsewhere in the meantime: the first answer holds
            log.info("approval %s: %s", approval_id, exc.detail)

    async def end(self, approval_id: str) -> None:
        """The approval was settled without this editor (answered elsewhere, timed
        out, cancelled with its turn): stop waiting and withdraw the request."""
        entry = self._open.pop(approval_id, None)
        if entry is None:
            return
        task, sid, key = entry
        request_id = self._ids.pop((sid, key), None)
        task.cancel()
        if request_id is None:  # not sent yet: cancelling the task was enough
            return
        conn = getattr(self.editor, "_conn", None)
        if conn is None:
            return
        with contextlib.suppress(ConnectionError):
            await conn.send_notification(CANCEL_REQUEST, {"requestId": request_id})

    async def end_session(self, sid: str) -> None:
        """Withdraw every request of session ``sid`` (it is opened again or closed)."""
        for approval_id in [a for a, (_, s, _k) in self._open.items() if s == sid]:
            await self.end(approval_id)
