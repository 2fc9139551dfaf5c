"""What the interactive chat draws besides the input line: the renderer's output,
routed above the prompt a whole line at a time, and the status line (spinner, the
model's retries, the line being streamed)."""

from __future__ import annotations

import asyncio
import math
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..library.exits import EXIT_OK, receipt_exit
from .pastes import paste_binding
from .plan import RECEIPT_POLL_SECONDS
from .render import shorten

#: clients.interactive.Chat, which imports this module (so it is not imported back)
Chat = Any

__all__ = ["Question", "WITHDRAWN", "answer_question", "live", "tick", "settle_submits", "Lines", "SPINNER", "key_bindings", "prompt_message",
           "goodbye", "status", "retrying", "show_event", "note_failure_hint", "watch"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Lines:
    """The renderer's output: whole lines are drawn above the input line; the line still
    being streamed waits in ``tail`` (shown in the status area) until it is complete.

    Drawing above the prompt is done here rather than with prompt_toolkit's
    patch_stdout: that one switches the terminal back to cooked mode for every
    write, and a key pressed in that moment (Ctrl-C, Ctrl-D) is taken by the
    terminal driver instead of reaching the chat. Here the prompt is erased,
    the lines written and the prompt drawn again, with the terminal left raw.
    """

    def __init__(self) -> None:
        self.tail = ""
        self.app: Any = None  # the running prompt_toolkit application, if any

    def write(self, text: str) -> int:
        data = self.tail + text
        if "\n" in data:
            head, self.tail = data.rsplit("\n", 1)
            self.emit(head + "\n")
        else:
            self.tail = data
        return len(text)

    def emit(self, text: str) -> None:
        app = self.app
        if app is None or not app.is_running or app.is_done:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        app.renderer.erase()  # the prompt (status and draft) goes; the cursor is where it began
        app.output.write_raw(text)  # the terminal still maps \n to \r\n (output is cooked)
        app.output.flush()
        app.renderer.reset()
        app.renderer.request_absolute_cursor_position()
        app.invalidate()  # drawn again below, with the draft as it was

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def key_bindings(chat: Chat) -> Any:
    """Ctrl-C clears a typed line, else acts as on_ctrl_c; Ctrl-D on an empty line leaves;
    Alt-Enter / Esc Enter inserts a newline."""
    from prompt_toolkit.application import get_app
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.key_binding import KeyBindings

    kb = KeyBindings()

    @kb.add("c-c")
    def _ctrl_c(event: Any) -> None:
        buf = event.app.current_buffer
        if buf.text:
            buf.reset()  # clear what was typed; nothing is sent or lost from history
            chat.armed_leave = False
            return
        chat.on_ctrl_c()

    @kb.add("c-d", filter=Condition(lambda: not get_app().current_buffer.text))
    def _ctrl_d(event: Any) -> None:
        chat.leaving = True  # drawn once more without the status line, then gone
        event.app.exit(exception=EOFError)

    @kb.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.app.current_buffer.insert_text("\n")

    paste_binding(kb, chat.pastes)
    return kb


def prompt_message(chat: Chat) -> Any:
    """The status line (while something runs) above the "› " of the input line."""
    from prompt_toolkit.application import get_app_or_none
    from prompt_toolkit.formatted_text import FormattedText

    # the last drawing of an accepted line stays on the screen: without the status
    # line, which would stay there frozen ("working 0 s") above the prompt sent
    app = get_app_or_none()
    line = "" if chat.leaving or (app is not None and app.is_done) else status(chat)
    style = "" if not chat.renderer.color else "fg:ansibrightblack"
    frags = [(style, line + "\n")] if line else []
    return FormattedText([*frags, ("bold" if chat.renderer.color else "", "› ")])


def goodbye(chat: Chat) -> int:
    """The last lines on leaving, whatever the way out: a newline, then how to come back."""
    out = sys.stdout
    out.write("\n")
    if chat.failed_owner is not None:
        print(f"tether: {chat.failed_owner.reason}: {chat.failed_owner.detail}",
              file=sys.stderr)
        if chat.failed_owner.hint:
            print(f"hint: {chat.failed_owner.hint}", file=sys.stderr)
    if chat.session_id is not None:
        if chat.running or chat.pending:
            print(f"[tether] the turn goes on in the owner; "
                  f"`tether attach {chat.session_id}` follows it", file=sys.stderr)
        if chat.renderer.outstanding:
            print(f"[tether] {len(chat.renderer.outstanding)} background delegation(s) "
                  f"still running; their results will arrive in session {chat.session_id}",
                  file=sys.stderr)
        print(f"[tether] continue with `tether chat --resume {chat.session_id}`",
              file=sys.stderr)
    out.flush()
    return chat.failed_owner.code if chat.failed_owner is not None else EXIT_OK


def status(chat: Chat) -> str:
    """The line above the input while something runs (empty when idle)."""
    parts = []
    if chat.running:
        elapsed = int(time.monotonic() - chat.running_since)
        spin = SPINNER[int(time.monotonic() * 8) % len(SPINNER)]
        what = "interrupting" if chat.interrupting else "working"
        queued = f" · {len(chat.pending)} queued" if chat.pending else ""
        if chat.retry is not None and not chat.interrupting:
            # one line, as wide as the terminal: the wait and its reason before the keys
            rest = f" · {elapsed} s{queued} · Ctrl-C interrupts"
            room = shutil.get_terminal_size().columns - 3 - len(rest)
            parts.append(f"{spin} {retrying(chat, room)}{rest}")
        else:
            parts.append(f"{spin} {what} {elapsed} s{queued} · Ctrl-C interrupts · "
                         "Ctrl-D leaves (the turn goes on)")
    # the line being streamed: the renderer's (an answer's block held to be rendered
    # whole) or one not ended yet
    tail = chat.lines.tail or chat.renderer.streaming.rstrip("\n").rpartition("\n")[2]
    if tail:
        parts.append(shorten(tail[-200:], 100))
    return "\n".join(parts)


def retrying(chat: Chat, width: int = 100) -> str:
    """The running turn's model retry, counting down the wait, at most ``width``
    characters (at least the reason's first 20) ("" if none)."""
    if chat.retry is None:
        return ""
    payload, since = chat.retry
    delay = payload.get("delay_seconds")
    left = math.ceil(delay - (time.monotonic() - since)) \
        if isinstance(delay, int | float) else 0
    wait = f" in {left} s" if left >= 1 else ""
    what = f"retrying {payload.get('attempt', '?')}/{payload.get('attempts', '?')}{wait}: "
    return what + shorten(payload.get("detail"), max(20, width - len(what)))


#: what shows the running turn's model request got on after a retry
_PROGRESS = frozenset({"message.start", "message.delta", "reasoning.delta", "tool.start",
                       "message.complete"})


async def show_event(chat: Chat, event: dict[str, Any]) -> None:
    """One event of the session: the chat's state, the renderer, approvals, hooks."""
    kind = event.get("type")
    payload = event.get("payload") or {}
    aid = event.get("admission_id")
    if kind == "message.start" and chat.submitting is not None and aid not in chat.mine:
        await asyncio.wait({chat.submitting})  # it may be the turn being submitted
    if kind == "session.info":
        running = payload.get("running")
        if running != chat.running:
            chat.running_since = time.monotonic()
            chat.interrupting = False
            chat.retry = None
        chat.running = running
        chat.pending = [p for p in payload.get("pending") or () if p != running]
    if kind == "message.start" and aid in chat.echo:
        chat.renderer.newline()
        chat.renderer.write(chat.renderer.style("› ", "\x1b[1m") + chat.echo.pop(aid) + "\n")
    if kind in _PROGRESS:
        chat.retry = None
    if kind == "model.retry" and aid is not None and aid == chat.running:
        # the status line shows it while the wait and the next attempt last
        chat.retry = (payload, time.monotonic())
    else:
        chat.renderer.event(event)
    if kind == "message.complete" and aid in chat.mine:
        note_failure_hint(chat, payload)
    if chat.approvals is not None:
        chat.approvals.on_event(event, own_turn_running=chat.running in chat.mine)
    for hook in list(chat.event_hooks):
        out = hook(chat, event)
        if out is not None:
            chat._spawn(out)
    chat.redraw()


def note_failure_hint(chat: Chat, payload: dict[str, Any]) -> None:
    """After a failed turn of ours: the hint a finite chat would print."""
    if payload.get("outcome") in (None, "completed", "cancelled"):
        return
    failure = receipt_exit({"status": "terminal", "outcome": payload.get("outcome"),
                            "result": {"error": payload.get("error")},
                            "session_id": chat.session_id})
    if failure is not None and failure.hint:
        chat.renderer.note(f"  hint: {failure.hint.replace('<home>', str(chat.home))}")


async def watch(chat: Chat, sid: str, aid: str, receipt: dict[str, Any]) -> None:
    """The ledger is the authority: a turn that ended unseen (owner crash) is said."""
    if receipt["status"] == "terminal":
        if aid not in chat.renderer.completed and chat.session_id == sid:
            # an input id that had already run (--input-id reused): show its answer
            chat.renderer.answer((receipt.get("result") or {}).get("text") or "")
        return
    while receipt["status"] not in ("terminal", "unknown") and not receipt.get("paused_by"):
        await asyncio.sleep(RECEIPT_POLL_SECONDS)
        if chat.session_id != sid or aid in chat.renderer.completed:
            return
        receipt = await chat.client.resilient(
            lambda: chat.client.receipt(sid, admission_id=aid))
    failure = receipt_exit(receipt)
    if failure is not None and receipt["status"] != "terminal":
        chat.renderer.progress(f"{failure.reason}: {failure.detail}")
        chat.renderer.note(f"  hint: {failure.hint}")


def live(app: Any) -> bool:
    """Whether the prompt_toolkit ``app`` runs and can still be told to exit."""
    return app.future is not None and not app.future.done()


#: what the input line returns when its question was withdrawn (Chat.ask cancelled)
WITHDRAWN = object()
_DISMISSED = object()  # Ctrl-C at a question


@dataclass(eq=False)
class Question:
    """One Chat.ask: what to show, where the answer goes, which lines are answers."""

    message: Any
    answer: asyncio.Future[str | None]
    validate: Callable[[str], str | None] | None = None


def question_bindings(chat: Chat) -> Any:
    """At a question: Ctrl-C dismisses it (whatever was typed), Ctrl-D on an empty
    line leaves the chat."""
    from prompt_toolkit.application import get_app
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.key_binding import KeyBindings

    kb = KeyBindings()

    @kb.add("c-c")
    def _ctrl_c(event: Any) -> None:
        event.app.exit(result=_DISMISSED)

    @kb.add("c-d", filter=Condition(lambda: not get_app().current_buffer.text))
    def _ctrl_d(event: Any) -> None:
        chat.leaving = True
        event.app.exit(exception=EOFError)

    return kb


async def answer_question(chat: Chat) -> str:
    """Show the oldest question of ask() on the input line (answers stay out of the
    prompt history); what was typed at it if it was withdrawn meanwhile, else ""."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.validation import ValidationError, Validator

    q = chat.questions.popleft()
    if q.answer.done():
        return ""

    class _Check(Validator):
        def validate(self, document: Any) -> None:
            why = q.validate(document.text) if q.validate is not None else None
            if why:
                raise ValidationError(cursor_position=len(document.text), message=why)

    asking: PromptSession[Any] = PromptSession(
        key_bindings=question_bindings(chat), erase_when_done=True, validator=_Check(),
        validate_while_typing=False)
    chat.shown = q
    try:
        answer = await chat.read_line(
            asking, q.message, "",
            pre_run=lambda: asking.app.exit(result=WITHDRAWN) if q.answer.done() else None)
    finally:
        chat.shown = None
    if answer is WITHDRAWN:
        return str(asking.default_buffer.text)
    if not q.answer.done():
        q.answer.set_result(answer if isinstance(answer, str) else None)
    if answer is None:
        chat.leave()
    return ""


async def tick(chat: Chat) -> None:
    """Redraw the status line (spinner, elapsed time) while something runs."""
    while True:
        await asyncio.sleep(0.2)
        if chat.running or chat.lines.tail or chat.renderer.streaming:
            chat.redraw()


async def settle_submits(chat: Chat) -> None:
    """A prompt being sent when the user leaves is still sent (briefly waited for)."""
    if chat.submit_lock.locked():
        async with asyncio.timeout(10), chat.submit_lock:
            pass
