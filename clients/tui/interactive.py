"""``tether chat`` on a terminal: a prompt a person keeps open all day.

The input line is prompt_toolkit's (imported here only, so the one-shot
``tether chat -Q`` never loads it): line editing, a history per home
(``<home>/chat_history``), a bracketed paste kept as one prompt, Alt-Enter
(or Esc Enter) for a newline. The prompt stays open while turns run:

- everything the owner sends is printed *above* the input line (patch_stdout),
  so a background result never lands in the middle of what is being typed;
  an answer is printed a whole line at a time, the line still streaming is
  shown under the status line until it is complete;
- while a turn runs, a status line above the input shows a spinner, the
  elapsed time and the keys; a prompt sent meanwhile is queued by the owner;
- Ctrl-C clears a typed line; on an empty line it interrupts the running turn
  (any client's) or, pressed twice when idle, leaves; Ctrl-D on an empty line
  leaves at once — a running turn goes on in the owner — and every way out
  prints how to come back (``tether chat --resume ID``);
- slash commands are the chat's own (``/help`` lists them); ``//text`` sends
  ``/text`` to the model.

The session is created with the first prompt that is accepted (titled by
it), so opening a chat and leaving, or a prompt the owner refuses, leaves no
empty session behind.

**Asking the user something** (the hook for inline prompts such as tool
approvals, clients/approval_prompt.py): ``await chat.ask(question)`` from
any task of the chat — typically from ``on_event`` hooks registered in
``chat.event_hooks``, which get each event of the session after it is shown.
``ask`` takes over the input line, keeps the draft being typed, returns the
answer (None on Ctrl-C/Ctrl-D; ``validate`` refuses other lines with its
reason) and gives the line back with the draft restored. Cancelling the task
that asks withdraws the question at once (queued or shown), so the next line
typed goes to the chat's prompt. Approval prompts use it (approval_prompt.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tether.rpc.errors import RpcError

from ..library.client import SessionStream, TetherClient, new_input_id
from ..library.exits import CliError, from_exception
from ..library.joining import open_session, unfinished_turns
from .approval_prompt import InlineApprovals
from .chat_screen import (
    WITHDRAWN,
    Lines,
    Question,
    answer_question,
    goodbye,
    key_bindings,
    live,
    prompt_message,
    settle_submits,
    show_event,
    tick,
    watch,
)
from .chat_wait import start_owner_for, wait_for_next_owner
from .pastes import Pastes
from .plan import ChatPlan
from .render import Renderer, shorten, use_color

__all__ = ["interactive", "Chat"]

TITLE_CHARS = 80
_PREEMPTED = object()  # the input line was taken over by ask()


class Chat:
    def __init__(self, client: TetherClient, home: Path, session_id: str | None,
                 plan: ChatPlan) -> None:
        self.client = client
        self.home = Path(home)
        self.session_id = session_id
        self.plan = plan
        self.options = dict(plan.options)
        self.mine: set[str] = set()
        self.lines = Lines()
        self.renderer = self._new_renderer()
        self.stream: SessionStream | None = None
        self.info: dict[str, Any] = {}  # the session's (snapshot info: model, cwd...)
        self.pastes = Pastes()  # long pastes, kept aside while a placeholder stands in
        self.follower: asyncio.Task[None] | None = None
        self.running: str | None = None  # admission running in the session (any client's)
        self.running_since = 0.0
        self.pending: list[str] = []
        self.interrupting = False
        self.retry: tuple[dict[str, Any], float] | None = None  # model.retry, when it came
        self.armed_leave = False  # Ctrl-C once on an empty idle line
        self.leaving = False
        self.failed_owner: CliError | None = None
        self.submit_lock = asyncio.Lock()
        self.submitting: asyncio.Future[None] | None = None
        self.echo: dict[str, str] = {}  # my prompts queued behind another turn: shown at start
        self.questions: deque[Question] = deque()
        self.shown: Question | None = None  # the question on the input line
        self.event_hooks: list[Callable[[Chat, dict[str, Any]], Awaitable[None] | None]] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self.app: Any = None  # the prompt_toolkit application while the input line is up
        self.asking: Any = None  # the PromptSession of ask()'s questions
        self.approvals: InlineApprovals | None = None
        self.waiting_owner: asyncio.Task[None] | None = None  # after tether stop

    def _new_renderer(self) -> Renderer:
        return Renderer(self.lines, color=use_color(sys.stdout), mine=self.mine)  # type: ignore[arg-type]

    def say(self, line: str) -> None:
        self.renderer.note(line)

    # -- the session -----------------------------------------------------------

    async def attach(self, session_id: str, *, transcript: bool) -> None:
        """Follow ``session_id``: its transcript (optional), a running turn from its start."""
        self.session_id = session_id
        stream, snap, messages = await open_session(self.client, session_id)
        self.stream, self.info = stream, snap.get("info") or {}
        if transcript:
            self.renderer.transcript(
                messages, await unfinished_turns(self.client, session_id, messages))
        self.running = snap.get("running")
        self.running_since = time.monotonic()
        self.pending = [p["receipt"]["admission_id"] for p in snap.get("pending") or ()
                        if p["receipt"]["admission_id"] != self.running]
        for p in snap.get("pending") or ():
            if p["receipt"]["admission_id"] != self.running:
                self.renderer.progress(f"queued: {shorten(p.get('text'), 70)}")
        # approval prompts of our turns are asked on the input line (approval_prompt.py)
        self.approvals = InlineApprovals(self.client, session_id, self.renderer, self.ask,
                                         lambda: self.leaving)
        self.follower = asyncio.ensure_future(self.follow(stream))
        self.follower.add_done_callback(self._task_done)  # the owner gone: say so, leave

    async def detach(self) -> None:
        if self.follower is not None:
            self.follower.cancel()
            await asyncio.gather(self.follower, return_exceptions=True)
            self.follower = None
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        if self.session_id is not None:
            try:
                await self.client.detach(self.session_id)
            except Exception:  # noqa: BLE001 - leaving a session must not fail the chat
                pass
        self.running, self.pending = None, []

    async def new_session(self, title: str) -> str:
        try:
            cwd: str | None = os.getcwd()
        except OSError:
            cwd = None
        snap = await self.client.resilient(lambda: self.client.create_session(
            request_id="cli-" + os.urandom(9).hex(), source="cli", cwd=cwd,
            title=" ".join(title.split())[:TITLE_CHARS] or None, **self.plan.options))
        sid = str(snap["session_id"])
        await self.attach(sid, transcript=False)
        return sid

    async def follow(self, stream: SessionStream) -> None:
        """Print every event of the session as it arrives."""
        while True:
            event = await stream.get()
            if event is not None:
                await show_event(self, event)

    def redraw(self) -> None:
        if self.app is not None:
            self.app.invalidate()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._failure(exc)

    def _failure(self, exc: BaseException) -> None:
        err = from_exception(exc)
        if err.reason == "owner_stopped":  # on purpose: wait for the next (chat_wait.py)
            return wait_for_next_owner(self, err)
        if err.code == 3 and err.reason not in ("overloaded", "runtime_draining"):
            self.failed_owner = err  # the owner is gone for good: leave (goodbye says why)
            return self.leave()
        self.renderer.progress(f"{err.reason}: {err.detail}")
        if err.hint:
            self.renderer.note(f"  hint: {err.hint.replace('<home>', str(self.home))}")

    # -- prompts ---------------------------------------------------------------

    async def submit(self, text: str, input_id: str | None = None) -> None:
        async with self.submit_lock:
            if self.waiting_owner is not None:
                await start_owner_for(self)
            created = False
            if self.session_id is None:
                await self.new_session(text)
                created = True
            sid = self.session_id
            assert sid is not None
            input_id = input_id or new_input_id()
            loop = asyncio.get_running_loop()
            self.submitting = loop.create_future()
            busy = bool(self.running or self.pending)
            try:
                receipt = await self.client.resilient(lambda: self.client.submit(
                    sid, input_id, text, finite=False, **self.options))
            except RpcError as exc:
                if created:  # the session was made for this prompt: do not leave it empty
                    await self.detach()
                    self.session_id = None
                    try:
                        await self.client.call("session.delete", session_id=sid)
                    except Exception:  # noqa: BLE001 - pruned later at worst
                        pass
                err = from_exception(exc)
                self.renderer.progress(f"not sent: {err.reason}: {err.detail}")
                return
            finally:
                self.submitting.set_result(None)
                self.submitting = None
            aid = receipt["admission_id"]
            self.mine.add(aid)
            if busy and receipt["status"] == "queued":
                self.echo[aid] = text.strip()
                self.renderer.progress("queued behind the running turn")
        self._spawn(watch(self, sid, aid, receipt))

    def interrupt(self) -> None:
        if self.session_id is None or not self.running:
            self.say("nothing is running")
            return
        self.interrupting = True
        self.redraw()
        self._spawn(self.client.interrupt(self.session_id))

    def leave(self) -> None:
        self.leaving = True
        if self.app is not None and self.app.is_running and not self.app.future.done():
            self.app.exit(result=None)

    async def ask(self, message: Any,
                  validate: Callable[[str], str | None] | None = None) -> str | None:
        """Take over the input line for ``message``; the answer typed, None if
        dismissed (Ctrl-C, Ctrl-D). ``validate(line)`` says why a line is not an
        answer (None: it is). Cancelled, the question is withdrawn."""
        if self.leaving:
            return None
        q = Question(message, asyncio.get_running_loop().create_future(), validate)
        self.questions.append(q)
        if self.app is not None and self.shown is None:
            self._preempt(self.app)
        try:
            return await q.answer
        except asyncio.CancelledError:
            if q in self.questions:
                self.questions.remove(q)
            elif self.shown is q and self.app is not None and live(self.app):
                self.app.exit(result=WITHDRAWN)
            # (not running yet: answer_question's pre_run withdraws it)
            raise

    def _preempt(self, app: Any) -> None:
        """A question waits: the chat's input line makes way (its draft is kept)."""
        if self.questions and live(app):
            app.erase_when_done = True  # no frozen status line or stray prompt left
            app.exit(result=_PREEMPTED)

    async def command(self, line: str) -> None:
        from .slash import run_command

        await run_command(self, line)

    # -- the input line ---------------------------------------------------------

    def on_ctrl_c(self) -> None:
        """Ctrl-C with nothing typed (or SIGINT before the input line is up)."""
        if self.running:
            self.armed_leave = False
            if self.interrupting:
                self.say("still interrupting; Ctrl-D leaves (the turn goes on)")
            self.interrupt()
        elif self.armed_leave:
            self.leave()
        else:
            self.armed_leave = True
            self.say("(Ctrl-C again or Ctrl-D to leave)")

    async def run(self) -> int:
        from prompt_toolkit import PromptSession

        from .pastes import ChatHistory
        self.client.keep_owner_stopped = True  # a viewer: `tether stop` must stay stopped
        session: PromptSession[Any] = PromptSession(
            history=ChatHistory(self.home / "chat_history", self.pastes),
            key_bindings=key_bindings(self), enable_history_search=False)
        loop = asyncio.get_running_loop()
        # SIGINT only comes while the terminal is not raw (before the input line is up)
        loop.add_signal_handler(signal.SIGINT, self.on_ctrl_c)
        ticker = asyncio.ensure_future(tick(self))
        try:
            await self._start()
            await self._loop(session)
            await settle_submits(self)
            self.renderer.end_answer()
            self.lines.emit(self.lines.tail)
            self.lines.tail = ""
        finally:
            ticker.cancel()
            loop.remove_signal_handler(signal.SIGINT)
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await self.detach_quietly()
        return goodbye(self)

    async def _start(self) -> None:
        if self.session_id is not None:
            if self.plan.resume or self.plan.last:
                self.say(f"session {self.session_id}")
            await self.attach(self.session_id,
                              transcript=bool(self.plan.resume or self.plan.last))
            if self.running:
                self.renderer.progress("a turn is running; Ctrl-C interrupts it")
        self.say("tether chat · Ctrl-D leaves · Ctrl-C interrupts a turn · /help")
        if self.plan.query is not None:
            text = self.plan.query.strip()
            self.renderer.write(self.renderer.style("› ", "\x1b[1m") + text + "\n")
            self._spawn(self.submit(self.plan.query, self.plan.input_id))

    async def _loop(self, session: Any) -> None:
        """Read prompts until the user leaves; output is drawn above the input line."""
        draft: Any = ""
        while not self.leaving:
            if self.questions:
                typed = await answer_question(self)  # typed at a withdrawn question: kept
                draft = typed if typed and not getattr(draft, "text", draft) else draft
                continue
            text = await self.read_line(session, lambda: prompt_message(self), draft,
                                        pre_run=lambda: self._preempt(session.app))
            session.app.erase_when_done = False
            if text is _PREEMPTED:  # ask() took the line: keep what was being typed
                draft = session.default_buffer.document
                continue
            draft = ""
            if text is None:
                break
            self.armed_leave = False
            if not text.strip():
                continue
            if text.startswith("/") and not text.startswith("//"):
                await self.command(text.strip())
                continue
            self._spawn(self.submit(self.pastes.expand(text[1:] if text[:2] == "//" else text)))

    async def read_line(self, session: Any, message: Any, default: Any,
                        pre_run: Callable[[], None] | None = None) -> Any:
        """One input line; None on Ctrl-D (or when leaving)."""
        self.app = self.lines.app = session.app
        try:
            return await session.prompt_async(message, default=default, handle_sigint=False,
                                              pre_run=pre_run)
        except EOFError:
            return None
        except KeyboardInterrupt:
            return ""
        finally:
            self.app = self.lines.app = None

    async def detach_quietly(self) -> None:
        for task in (self.follower, self.waiting_owner):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.stream is not None:
            self.stream.close()

async def interactive(client: TetherClient, home: Path, session_id: str | None,
                      plan: ChatPlan) -> int:
    return await Chat(client, home, session_id, plan).run()
