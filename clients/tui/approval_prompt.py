"""Approval prompts in the chat: asked inline on a terminal, reported in a finite chat.

`InlineApprovals` is what the interactive chat hands every event to: on
``approval.requested`` during the chat's own turn it takes over the input line
with the question (what the agent asks to do, why, where) and accepts only an
answer — ``y`` (once), ``s`` (this session), ``a`` (always), ``n [reason]``
(deny); anything else is refused on the spot with the reason, and Ctrl-C
denies. The answer goes out with approval.respond and is said in the
transcript. A prompt answered elsewhere first (another viewer, ``tether
approve``), timed out or cancelled with its turn (``approval.resolved``) is
withdrawn from the input line at once, which goes back to the draft being
typed: no line typed afterwards is taken for an answer or lost.
While nobody's turn of this chat runs, the line editor belongs to the next
prompt, so the chat only says how to answer (``tether approve ID``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .render import Renderer, shorten

__all__ = ["InlineApprovals", "parse_answer", "question", "why_invalid"]

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
    """The chat's approval prompts. ``ask(message, validate)`` is Chat.ask: it shows a
    question on the input line and returns the line typed, None on Ctrl-C or Ctrl-D;
    cancelling it withdraws the question."""

    def __init__(self, client: Any, session_id: str, renderer: Renderer,
                 ask: Callable[..., Awaitable[str | None]] | None,
                 leaving: Callable[[], bool] = lambda: False) -> None:
        self._client = client
        self._session_id = session_id
        self._r = renderer
        self._ask_line = ask
        self._leaving = leaving
        self._asking: dict[str, asyncio.Task[None]] = {}
        self._answered: set[str] = set()  # answered here: not "elsewhere"

    def on_event(self, event: dict[str, Any], own_turn_running: bool) -> None:
        kind, payload = event.get("type"), event.get("payload") or {}
        approval_id = payload.get("approval_id")
        if not isinstance(approval_id, str):
            return
        if kind == "approval.resolved":
            task = self._asking.pop(approval_id, None)
            if task is not None and not task.done():
                task.cancel()
                if approval_id not in self._answered:
                    self._r.progress(_withdrawn(payload))
            return
        if kind != "approval.requested":
            return
        if not own_turn_running or self._ask_line is None:
            self._r.progress(f"answer with `tether approve {approval_id}` or "
                             f"`tether deny {approval_id}`")
            return
        task = asyncio.ensure_future(self._ask(approval_id, payload))
        self._asking[approval_id] = task
        task.add_done_callback(lambda t: self._asking.pop(approval_id, None)
                               if self._asking.get(approval_id) is t else None)

    async def _ask(self, approval_id: str, payload: dict[str, Any]) -> None:
        assert self._ask_line is not None
        line = await self._ask_line(question(payload, self._r.color), validate=why_invalid)
        reason: str | None
        if line is None:
            if self._leaving():  # Ctrl-D: the chat goes; the prompt stays for others
                return
            decision, reason = "deny", "declined at the chat's prompt (Ctrl-C)"
        else:
            answer = parse_answer(line)
            assert answer is not None  # the prompt accepts only answers
            decision, reason = answer
        self._answered.add(approval_id)
        params: dict[str, Any] = {"session_id": self._session_id, "approval_id": approval_id,
                                  "decision": decision}
        if reason:
            params["reason"] = reason
        said = {"once": "approved once", "session": "approved for this session",
                "always": "approved always", "deny": "denied"}[decision]
        if line is None:
            said += " (Ctrl-C at the prompt)"
        self._r.progress(f"{said}: {shorten(payload.get('subject'), 100)}")
        try:
            out = await self._client.call("approval.respond", **params)
        except Exception as exc:  # noqa: BLE001 - said on the screen; the turn goes on
            self._r.progress(f"the answer was not recorded: {exc}")
            return
        if out.get("status") == "already_resolved":
            prompt = out.get("approval") or {}
            self._r.progress(f"too late: it was already {prompt.get('status')}")


def question(payload: dict[str, Any], color: bool) -> Any:
    """The approval question as prompt_toolkit formatted text (styles, never raw escapes)."""
    from prompt_toolkit.formatted_text import FormattedText

    verb = "run" if payload.get("kind") == "command" else "write"
    bold, dim = ("bold", "fg:ansibrightblack") if color else ("", "")
    parts = [(bold, f"? the agent wants to {verb}: {shorten(payload.get('subject'), 300)}\n")]
    if payload.get("why"):
        parts.append((dim, f"  ({shorten(payload.get('why'), 160)})\n"))
    if payload.get("cwd"):
        parts.append((dim, f"  in {payload.get('cwd')}\n"))
    parts.append(("", f"  {CHOICES} · Ctrl-C denies\n"))
    parts.append((bold, "approve? "))
    return FormattedText(parts)


def why_invalid(line: str) -> str | None:
    """Why ``line`` is not an answer to an approval prompt (None: it is one)."""
    if parse_answer(line) is not None:
        return None
    if not line.strip():
        return "type y, s, a or n (Ctrl-C denies)"
    return (f"{shorten(line.strip(), 30)!r} is not an answer: y runs it once, s for this "
            "session, a always, n [reason] denies")


def _withdrawn(payload: dict[str, Any]) -> str:
    """What the chat says when a prompt it shows ended without its answer."""
    status, cause = payload.get("status"), payload.get("cause")
    if cause == "answered":
        how = f" ({payload.get('decision')})" if payload.get("decision") else ""
        return f"the prompt was answered elsewhere: {status}{how}"
    return {"timeout": "nobody answered in time: denied (silence is not consent)",
            "interrupted": "the turn was interrupted: the prompt is withdrawn",
            "shutdown": "the owner stopped: the prompt is withdrawn"}.get(
                str(cause), f"the prompt ended: {status}")
