"""The editor's terminals as executor of the terminal tool's sandboxed commands
(docs/acp.md, "The editor's terminals").

An editor's adapter (``tether acp``) offers, with terminal.offer, to run a session's
commands in the editor's terminals (ACP ``terminal/*``), where the editor shows them
live. The boundary does not move: the terminal tool decides everything as for its own
run (the approval, the hard line, an escalation, the environment, the working
directory) and builds the same sandbox (sandbox.Sandbox.editor_argv: bwrap with its
mounts, the environment set inside it); the editor only starts that argv. Commands
without a sandbox (``sandbox.mode: off``, no bwrap, an approved escalation) and
background ones stay in the owner.

One command is a few requests to the offering connection (``terminal.request``
notices, answered with terminal.respond), each waited for a bounded time:

- ``create`` (at most ``tools.editor_fs_timeout_seconds``). Not sent (no offer, the
  connection closed), or refused by the editor (it answered with an error: no
  terminal was made): the tool runs the command itself, nothing having started.
  No answer in time, the connection gone, or a failure the editor did not answer
  for: the command may have started there, so it is never run again; the tool
  reports the failure and ends whatever of it runs (its processes carry a token of
  their own in their environment, launch.kill_marked).
- ``output``, polled while the command runs until the start of its output is held
  (the editor keeps only the end, ``output_byte_limit``), so the model sees the
  start and the end as for a command the owner ran (output.cap);
- ``wait_for_exit`` (at most the command's timeout; then ``kill`` and
  ``wait_for_exit`` again), ``output``, ``release``. The connection gone or the
  editor failing meanwhile: the failure is reported with the output seen so far,
  and what is left of the command is ended.
- a turn stopped meanwhile: the token's processes ended, ``kill`` and ``release``
  (stopped before the editor said it made the terminal: the processes ended; the
  adapter ends a terminal whose making nobody waits for any more).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tether.rpc.envelope import terminal_request
from tether.rpc.errors import InvalidParams

from .editor import Offers, Reply
from .launch import kill_marked
from .output import cap

__all__ = ["EditorTerminals", "Ran", "OPS"]

log = logging.getLogger("tether.editor")

OPS = ("create", "output", "wait_for_exit", "kill", "release")
#: what an answer to each op must carry (unless it is an error)
_GIVES = {"create": "terminal_id", "output": "output", "wait_for_exit": "exit_status"}
#: the start of a command's output is read this often while it runs (doubling up to the max)
HEAD_POLL_FIRST = 0.1
HEAD_POLL_MAX = 2.0
#: bytes a UTF-8 character takes at most: the terminal keeps this times the characters
BYTES_PER_CHAR = 4


@dataclass
class Ran:
    """A command the editor's terminal ran: how it ended, as the tool reports it."""

    exit_code: int | None
    output: str
    timed_out: bool = False
    #: why the run failed (the editor or its connection), after which it was ended
    error: str | None = None


@dataclass
class _Run:
    """One command under way in an editor's terminal."""

    session_id: str
    admission_id: str | None
    terminal_id: str
    token: str
    limit: int
    head: str = ""  # the start of its output, read while it ran (untruncated)
    exit: dict[str, Any] | None = None


def _exit_code(status: dict[str, Any] | None) -> int | None:
    """An ACP exit status as a local run's returncode (a signal: minus its number)."""
    if not status:
        return None
    if isinstance(status.get("exit_code"), int):
        return int(status["exit_code"])
    name = status.get("signal")
    with contextlib.suppress(KeyError, TypeError):
        return -int(signal.Signals[str(name) if str(name).startswith("SIG") else f"SIG{name}"])
    return None


def _text(output: str) -> str:
    # a terminal is a pty: its lines end in CRLF where a pipe's end in LF
    return output.replace("\r\n", "\n")


def _joined(head: str, tail: str, limit: int) -> str:
    """The output the model sees when the editor kept only its end: the start read
    while it ran and the end, as output.cap shows a long output (how much was cut
    between them is not known)."""
    head_max = limit * 2 // 5
    return (f"{head[:head_max]}\n[... characters cut; the start and end are shown ...]\n"
            f"{tail[-(limit - head_max):]}")


class EditorTerminals(Offers):
    """The sessions' terminal offers, and the running of a command through one."""

    def __init__(self, timeout: float) -> None:
        super().__init__("terminal", terminal_request, "terminal.respond", "tmr_")
        #: how long one step but wait_for_exit may take (tools.editor_fs_timeout_seconds)
        self.timeout = timeout

    def check(self, op: str, answer: dict[str, Any]) -> None:
        need = _GIVES.get(op)
        if answer.get("error") is None and need is not None and answer.get(need) is None:
            raise InvalidParams(f"an answer to {op} carries {need} (or error)", fields=[
                {"loc": need, "msg": f"required to answer {op}", "type": "missing"}])

    def runs(self, session_id: str) -> bool:
        """Whether the session's commands go to an editor's terminal now."""
        return self.offers(session_id, "run")

    async def run(self, session_id: str, admission_id: str | None, call_id: str,
                  argv: Sequence[str], cwd: str, env: dict[str, str], token: str,
                  timeout: float, limit: int) -> Ran | None:
        """Run ``argv`` (the sandbox's, its processes marked with ``token``) in the
        editor's terminal, within ``timeout`` seconds, its output capped to ``limit``
        characters. None: the editor did not take it and nothing started (run it
        here)."""
        try:
            created = await self.ask(session_id, admission_id, "create", {
                "call_id": call_id, "command": argv[0], "args": list(argv[1:]), "env": env,
                "cwd": cwd, "output_byte_limit": limit * BYTES_PER_CHAR}, self.timeout)
        except asyncio.CancelledError:
            kill_marked(token)  # the turn stops while the editor may be starting it
            raise
        why = self._failed(created, "start the command")
        if why is None:
            run = _Run(session_id, admission_id, created.answer["terminal_id"], token, limit)
            try:
                return await self._follow(run, timeout)
            except asyncio.CancelledError:
                # the turn is being stopped: the command goes with it
                await asyncio.shield(self._end(run))
                raise
        if created.how == "unsent" or (created.answered and created.answer.get("refused")):
            log.info("the editor's terminal did not take a command of %s (%s); it runs in "
                     "the owner", session_id, why)
            return None
        # it may have started there: never run twice; end whatever of it runs
        ended = kill_marked(token)
        log.warning("a command of %s may have started in the editor's terminal: %s", session_id,
                    why)
        return Ran(None, "", error=(
            f"the editor's terminal did not confirm starting the command ({why}); it was "
            "not run again here" + (", and what had started of it was ended" if ended else "")))

    def _failed(self, reply: Reply, what: str) -> str | None:
        """Why ``reply`` is no answer to rely on; None if it is one."""
        if reply.how == "timeout":
            return f"no answer to {what} within {self.timeout:g} s"
        if reply.how in ("gone", "unsent"):
            return "the editor's connection closed" if reply.how == "gone" else \
                "the editor no longer offers its terminal"
        if reply.answer.get("error") is not None:
            return f"the editor could not {what}: {reply.answer['error']}"
        return None

    async def _ask(self, run: _Run, op: str, timeout: float | None = None) -> Reply:
        return await self.ask(run.session_id, run.admission_id, op,
                              {"terminal_id": run.terminal_id},
                              self.timeout if timeout is None else timeout)

    async def _follow(self, run: _Run, timeout: float) -> Ran:
        reader = asyncio.ensure_future(self._read_head(run))
        try:
            waited = await self._ask(run, "wait_for_exit", timeout)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        timed_out = waited.how == "timeout"
        error = None if timed_out else self._failed(waited, "wait for the command")
        if waited.answered and error is None:
            run.exit = waited.answer.get("exit_status")
        if timed_out:
            killed = await self._ask(run, "kill")
            kill_marked(run.token)  # whatever the editor's kill does, it ends now
            if (why := self._failed(killed, "kill the command")) is not None:
                log.info("%s; its processes were ended here", why)
            else:  # how it ended
                ended = await self._ask(run, "wait_for_exit")
                if ended.answered and ended.answer.get("error") is None:
                    run.exit = ended.answer.get("exit_status")
        out = await self._ask(run, "output")
        await self._ask(run, "release")
        if timed_out or error is not None or not out.answered:
            kill_marked(run.token)  # whatever the editor left of it
        output = run.head
        if out.answered and out.answer.get("error") is None:
            run.exit = run.exit or out.answer.get("exit_status")
            tail = _text(out.answer.get("output") or "")
            output = _joined(run.head, tail, run.limit) if out.answer.get("truncated") \
                else cap(tail, run.limit)
        if error is not None:
            error = (f"the command's run in the editor's terminal failed ({error}); it was "
                     "ended and not run again here")
        return Ran(_exit_code(run.exit), output, timed_out, error)

    async def _read_head(self, run: _Run) -> None:
        """Read the output while it is whole, until its start is held."""
        delay = HEAD_POLL_FIRST
        while True:
            await asyncio.sleep(delay)
            got = await self._ask(run, "output")
            if not got.answered or got.answer.get("error") is not None \
                    or got.answer.get("truncated"):
                return
            run.head = _text(got.answer.get("output") or "")
            if len(run.head) >= run.limit * 2 // 5 or got.answer.get("exit_status"):
                return
            delay = min(delay * 2, HEAD_POLL_MAX)

    async def _end(self, run: _Run) -> None:
        """Stop the command (a stopped turn): its processes ended at once, then the
        editor told (kill, release)."""
        kill_marked(run.token)
        await self._ask(run, "kill")
        await self._ask(run, "release")
