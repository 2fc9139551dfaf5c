"""An editor's terminals for tests: ACP's ``terminal/*`` done for real.

``TerminalHost`` runs the command and arguments ``terminal/create`` gives on a
pseudo-terminal of its own (as Zed does), with its own environment overlaid by the
request's (an editor adds the request's variables to its own), keeps the last
``outputByteLimit`` bytes of the output, and answers ``terminal/output``,
``wait_for_exit``, ``kill`` and ``release``. Its methods have the ACP package's
client signatures, so an ACP test client inherits them. Knobs make it misbehave:
``refuse`` (create answers with an error, starting nothing), ``hang`` (create starts
the command and never answers), ``deaf`` (kill is answered but does nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError
from acp.schema import (
    CreateTerminalResponse,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

#: a variable of the editor's own environment, which no sandboxed command may see
EDITOR_SECRET = "TETHER_TEST_EDITOR_SECRET"


@dataclass
class Term:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    limit: int | None
    proc: asyncio.subprocess.Process
    master: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    killed: bool = False
    released: bool = False

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        if self.limit is not None and len(self.data) > self.limit:
            del self.data[:len(self.data) - self.limit]
            while self.data and (self.data[0] & 0xC0) == 0x80:  # a character boundary
                del self.data[0]
            self.truncated = True


class TerminalHost:
    def __init__(self) -> None:
        self.terms: dict[str, Term] = {}
        self.calls: list[tuple[str, str]] = []  # (method, terminal id or "")
        self.refuse = False
        self.hang = False
        self.deaf = False
        self._ids = itertools.count(1)

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None,
                              env: list[Any] | None = None, cwd: str | None = None,
                              output_byte_limit: int | None = None,
                              **kw: Any) -> CreateTerminalResponse:
        self.calls.append(("create", ""))
        if self.refuse:
            raise RequestError.invalid_params({"detail": "terminals are off here"})
        own = {**os.environ, EDITOR_SECRET: "editor-only"}
        merged = {**own, **{e.name: e.value for e in env or []}}
        master, slave = os.openpty()
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), stdin=slave, stdout=slave, stderr=slave, env=merged,
            cwd=cwd, start_new_session=True)
        os.close(slave)
        tid = f"term-{next(self._ids)}"
        term = self.terms[tid] = Term([command, *(args or [])], merged, cwd, output_byte_limit,
                                      proc, master)
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            if chunk:
                term.feed(chunk)
                return
            loop.remove_reader(master)
            term.closed.set()

        loop.add_reader(master, readable)
        if self.hang:
            await asyncio.sleep(3600)
        return CreateTerminalResponse(terminal_id=tid)

    def _term(self, terminal_id: str) -> Term:
        term = self.terms.get(terminal_id)
        if term is None or term.released:
            raise RequestError.invalid_params({"detail": f"no terminal {terminal_id}"})
        return term

    async def _exit(self, term: Term) -> TerminalExitStatus | None:
        code = term.proc.returncode
        if code is None:
            return None
        with contextlib.suppress(TimeoutError):  # what it printed last is read first
            await asyncio.wait_for(term.closed.wait(), 1)
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)

    async def terminal_output(self, session_id: str, terminal_id: str,
                              **kw: Any) -> TerminalOutputResponse:
        self.calls.append(("output", terminal_id))
        term = self._term(terminal_id)
        status = await self._exit(term)
        return TerminalOutputResponse(output=term.data.decode("utf-8", "replace"),
                                      truncated=term.truncated, exit_status=status)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str,
                                     **kw: Any) -> WaitForTerminalExitResponse:
        self.calls.append(("wait_for_exit", terminal_id))
        term = self._term(terminal_id)
        await term.proc.wait()
        status = await self._exit(term)
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(self, session_id: str, terminal_id: str,
                            **kw: Any) -> KillTerminalResponse:
        self.calls.append(("kill", terminal_id))
        term = self._term(terminal_id)
        if not self.deaf:
            term.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(term.proc.pid, signal.SIGKILL)
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str,
                               **kw: Any) -> ReleaseTerminalResponse:
        self.calls.append(("release", terminal_id))
        term = self._term(terminal_id)
        if term.proc.returncode is None and not self.deaf:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(term.proc.pid, signal.SIGKILL)
        term.released = True
        return ReleaseTerminalResponse()

    def close(self) -> None:
        """End every terminal still running (the test is over)."""
        for term in self.terms.values():
            if term.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(term.proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError, ValueError):
                asyncio.get_running_loop().remove_reader(term.master)
            with contextlib.suppress(OSError):
                os.close(term.master)
