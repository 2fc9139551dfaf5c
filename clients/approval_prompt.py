"""Approval prompts in the chat: asked inline on a terminal, reported in a finite chat.

`InlineApprovals` is what the interactive chat hands every event to: on
``approval.requested`` during the chat's own turn it shows what the agent asks
to do and reads one answer from the terminal — ``y`` (once), ``s`` (this
session), ``a`` (always), ``n [reason]`` (deny) — and sends it with
approval.respond. A prompt answered elsewhere first (another viewer, ``tether
approve``), timed out or cancelled stops waiting (``approval.resolved``).
While nobody's turn of this chat runs, the line editor belongs to the next
prompt, so the chat only says how to answer (``tether approve ID``).

`unattended_note` is what a finite chat prints when the owner refused a tool
call because nobody could answer a prompt (``approvals.unattended``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import orjson

from .render import Renderer, shorten

__all__ = ["InlineApprovals", "unattended_note", "parse_answer"]

CHOICES = "[y] once  [s] this session  [a] always  [n REASON] deny"


def parse_answer(line: str) -> tuple[str, str | None] | None:
    """A typed answer → (decision, reason); None if it is not one."""
    word, _, rest = line.strip().partition(" ")
    decision = {"y": "once", "yes": "once", "s": "session", "a": "always", "n": "deny",
                "no": "deny"}.get(word.lower())
    if decision is None:
        return None
    return decision, (rest.strip() or None) if decision == "deny" else None


class InlineApprovals:
    def __init__(self, client: Any, session_id: str, renderer: Renderer,
                 lines: Callable[[], asyncio.Queue[str | None] | None]) -> None:
        self._client = client
        self._session_id = session_id
        self._r = renderer
        self._lines = lines
        self._asking: dict[str, asyncio.Task[None]] = {}

    def on_event(self, event: dict[str, Any], own_turn_running: bool) -> None:
        kind, payload = event.get("type"), event.get("payload") or {}
        approval_id = payload.get("approval_id")
        if not isinstance(approval_id, str):
            return
        if kind == "approval.resolved":
            task = self._asking.pop(approval_id, None)
            if task is not None:
                task.cancel()
            return
        if kind != "approval.requested":
            return
        lines = self._lines()
        if not own_turn_running or lines is None:
            self._r.progress(f"answer with `tether approve {approval_id}` or "
                             f"`tether deny {approval_id}`")
            return
        task = asyncio.ensure_future(self._ask(approval_id, payload, lines))
        self._asking[approval_id] = task
        task.add_done_callback(lambda t: self._asking.pop(approval_id, None))

    async def _ask(self, approval_id: str, payload: dict[str, Any],
                   lines: asyncio.Queue[str | None]) -> None:
        r = self._r
        verb = "run" if payload.get("kind") == "command" else "write"
        r.newline()
        r.write(r.style(f"? the agent wants to {verb}: {payload.get('subject')}\n", "\x1b[1m"))
        r.write(r.style(f"  ({shorten(payload.get('why'), 160)})\n", "\x1b[2m"))
        while True:
            r.write(f"  {CHOICES} › ")
            try:
                line = await lines.get()
            except asyncio.CancelledError:
                r.newline()
                r.progress("the prompt was resolved elsewhere")
                raise
            r.at_line_start = True
            if line is None:  # the terminal closed: leave it to the timeout or others
                lines.put_nowait(None)
                return
            answer = parse_answer(line)
            if answer is not None:
                break
        decision, reason = answer
        params: dict[str, Any] = {"session_id": self._session_id, "approval_id": approval_id,
                                  "decision": decision}
        if reason:
            params["reason"] = reason
        with contextlib.suppress(Exception):
            out = await self._client.call("approval.respond", **params)
            if out.get("status") == "already_resolved":
                prompt = out.get("approval") or {}
                r.progress(f"already resolved: {prompt.get('status')}")


def unattended_note(event: dict[str, Any]) -> str | None:
    """The line a finite chat prints for a tool call refused because the turn is
    unattended, or None."""
    if event.get("type") != "tool.complete":
        return None
    payload = event.get("payload") or {}
    try:
        result = orjson.loads(payload.get("result") or "{}")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(result, dict) or not result.get("denied"):
        return None
    error = str(result.get("error") or "")
    if "unattended" not in error:
        return None
    return (f"[tether] {payload.get('name', 'a tool')} was denied: this chat is finite, so "
            "nobody can answer an approval prompt (approvals.unattended: deny); run it "
            "interactively, or allow it with an approvals rule")
