"""``tether chat`` on a terminal: prompts typed by a person, turns followed live.

Prompts are submitted with ``finite: false``; the chat stays subscribed, so
background delegation results that come back as a new turn are shown when they
arrive. Ctrl-C interrupts the running turn; Ctrl-D leaves.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import sys
from typing import Any

from .approval_prompt import InlineApprovals
from .client import SessionStream, TetherClient, new_input_id
from .exits import EXIT_OK, receipt_exit, report
from .plan import RECEIPT_POLL_SECONDS, ChatPlan
from .render import Renderer, use_color

__all__ = ["interactive"]

# -- interactive --------------------------------------------------------------


class _TerminalLines:
    """Lines typed on the terminal, read on the event loop (no thread, no readline).

    A thread blocked in ``input()`` would hold stdin's buffer lock at exit; reading
    the file descriptor when the loop says it is readable has no such problem,
    and the terminal's own line editing still applies (canonical mode).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the terminal went away
            data = b""
        if not data:
            if self._partial:
                self.queue.put_nowait(self._partial)
                self._partial = ""
            self.end()
            return
        self._partial += self._decoder.decode(data)
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self.queue.put_nowait(line)

    def end(self) -> None:
        self._loop.remove_reader(self.fd)
        self.queue.put_nowait(None)

    def close(self) -> None:
        self._loop.remove_reader(self.fd)


class _Interactive:
    def __init__(self, client: TetherClient, session_id: str, plan: ChatPlan) -> None:
        self.client = client
        self.session_id = session_id
        self.plan = plan
        self.mine: set[str] = set()
        self.renderer = Renderer(sys.stdout, color=use_color(sys.stdout), mine=self.mine)
        self.stream = SessionStream(client, session_id)
        self.done: dict[str, asyncio.Future[None]] = {}
        self.turn: str | None = None  # admission id of our turn in progress
        # set while a prompt.submit is in flight: its turn may start before we know
        # its admission id, and must not be shown as somebody else's
        self.submitting: asyncio.Future[None] | None = None
        self.at_prompt = False
        self.interrupting = False
        self.leave_code: int | None = None
        self.lines: _TerminalLines | None = None
        self.approvals = InlineApprovals(client, session_id, self.renderer,
                                         lambda: self.lines.queue if self.lines else None)

    def prompt(self) -> None:
        self.renderer.newline()
        self.renderer.write(self.renderer.style("› ", "\x1b[1m"))
        self.at_prompt = True

    async def follow(self) -> None:
        """Print every event of the session as it arrives, for as long as we chat."""
        while True:
            event = await self.stream.get()
            if event is None:
                continue
            if event.get("type") == "message.start" and self.submitting is not None \
                    and event.get("admission_id") not in self.mine:
                await asyncio.wait({self.submitting})
            if self.at_prompt and event.get("type") not in ("session.info",):
                self.at_prompt = False
                self.renderer.newline()
            self.renderer.event(event)
            self.approvals.on_event(event, own_turn_running=self.turn is not None)
            if event.get("type") == "message.complete":
                aid = event.get("admission_id")
                fut = self.done.get(aid or "")
                if fut is not None and not fut.done():
                    fut.set_result(None)
                elif aid not in self.mine and self.turn is None:
                    self.prompt()  # a background turn ended while the user was idle

    def on_sigint(self) -> None:
        if self.turn is None:
            self.leave_code = EXIT_OK
            if self.lines is not None:
                self.lines.end()
            return
        if self.interrupting:
            self.leave_code = 130
            fut = self.done.get(self.turn)
            if fut is not None and not fut.done():
                fut.set_result(None)
            return
        self.interrupting = True
        self.renderer.progress("interrupting the turn (Ctrl-C again to leave)")
        task = asyncio.ensure_future(self.client.interrupt(self.session_id))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def submit(self, text: str, input_id: str, follower: asyncio.Task[None]) -> None:
        async def once() -> dict[str, Any]:
            return await self.client.submit(self.session_id, input_id, text, finite=False,
                                            **self.plan.options)

        self.turn = input_id  # Ctrl-C during the submit call interrupts, too
        self.submitting = asyncio.get_running_loop().create_future()
        try:
            receipt = await self.client.resilient(once)
            aid = receipt["admission_id"]
            self.mine.add(aid)
        finally:
            self.submitting.set_result(None)
            self.submitting = None
        self.turn = aid
        fut = self.done.setdefault(aid, asyncio.get_running_loop().create_future())
        try:
            while receipt["status"] not in ("terminal", "unknown") and not fut.done() \
                    and not receipt.get("paused_by"):
                await asyncio.wait({fut, follower}, timeout=RECEIPT_POLL_SECONDS,
                                   return_when=asyncio.FIRST_COMPLETED)
                if follower.done():
                    follower.result()  # the owner stayed away: raise its error
                if not fut.done():
                    # no events for a while: make sure the turn did not end unseen
                    # (owner crash → unknown) — the ledger is the authority
                    receipt = await self.client.resilient(lambda: self.client.receipt(
                        self.session_id, admission_id=aid))
        finally:
            self.turn = None
            self.interrupting = False
        if receipt["status"] == "unknown" or receipt.get("paused_by"):
            report(receipt_exit(receipt))  # type: ignore[arg-type]
        elif aid not in self.renderer.completed and receipt["status"] == "terminal":
            # an input id that had already run (--input-id reused): show its answer
            self.renderer.write((receipt.get("result") or {}).get("text") or "")
            self.renderer.newline()

    async def run(self) -> int:
        snap = await self.client.resilient(self.stream.open)
        r = self.renderer
        if self.plan.resume:
            r.transcript(snap.get("messages") or [])
        r.note(f"tether chat · session {self.session_id} · Ctrl-D leaves, "
               "Ctrl-C interrupts a turn")
        follower = asyncio.ensure_future(self.follow())
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self.on_sigint)
        self.lines = _TerminalLines(sys.stdin.fileno())
        try:
            first = self.plan.query
            first_id = self.plan.input_id
            while self.leave_code is None:
                if first is not None:
                    text, first = first, None
                    r.write(r.style("› ", "\x1b[1m") + text.strip() + "\n")
                else:
                    self.prompt()
                    line = await self._next_line(follower)
                    self.at_prompt = False
                    r.at_line_start = True  # the terminal echoed the user's newline
                    if line is None:
                        break
                    text = line
                if not text.strip():
                    continue
                await self.submit(text, first_id or new_input_id(), follower)
                first_id = None
        finally:
            self.lines.close()
            loop.remove_signal_handler(signal.SIGINT)
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
        r.newline()
        if r.outstanding:
            print(f"[tether] {len(r.outstanding)} background delegation(s) still running; "
                  f"their results will arrive in session {self.session_id} "
                  f"(`tether attach {self.session_id}`)", file=sys.stderr)
        return self.leave_code if self.leave_code is not None else EXIT_OK

    async def _next_line(self, follower: asyncio.Task[None]) -> str | None:
        assert self.lines is not None
        getter = asyncio.ensure_future(self.lines.queue.get())
        try:
            await asyncio.wait({getter, follower}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if follower.done() and not getter.done():
            follower.result()
        return getter.result() if getter.done() and not getter.cancelled() else None


async def interactive(client: TetherClient, session_id: str, plan: ChatPlan) -> int:
    return await _Interactive(client, session_id, plan).run()
