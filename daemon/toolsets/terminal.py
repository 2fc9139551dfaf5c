"""The ``terminal`` and ``process`` tools (toolset ``terminal``).

``terminal {command, workdir?, timeout_s?, background?, notify_on_complete?,
escalate?, reason?}`` runs a shell command in the session's working directory,
after the approval check (ToolContext.approve, told the sandbox it will run in
and whether it asks for an escalation), inside the sandbox (sandbox.py) with
the allowlisted environment (env.py). ``escalate: true`` (with a ``reason``)
asks to run it outside the sandbox: a person must approve it. In the
foreground it waits, up to its timeout (then it is ended with everything it
started), and returns the exit code and the output capped for the model, with
a hint when the sandbox refused something. ``background: true`` starts a
managed process (processes.py) and returns its id at once;
``notify_on_complete`` also delivers a notice when it ends — only where
somebody can receive it: on a turn without late delivery
(``ToolContext.late_delivery`` False: finite turns, child agents) the call is
refused and nothing is started or recorded.

``process {action: list|poll|log|wait|kill|write, id?, ...}`` manages the
session's background processes.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, Field, model_validator

from ..config.core import ToolsConfig
from ..engine.arguments import Arguments, ArgumentsOf, non_blank
from ..engine.tools import Tool, ToolContext
from . import lineage
from .editor_terminal import EditorTerminals
from .launch import collect, end, marked, spawn
from .output import Capture
from .processes import KILL_SECONDS, Managed, ProcessTable
from .sandbox import NONE, Sandbox, refusal

__all__ = ["terminal_tool", "process_tool", "NOTIFY_REFUSED", "workdir_of"]

MAX_COMMAND_CHARS = 65_536
MAX_REASON_CHARS = 2000
MAX_WAIT_SECONDS = 600.0
NOTIFY_REFUSED = (
    "notify_on_complete is not available on this turn: nobody can receive a notice after "
    "it ends (a one-shot chat, cron, an HTTP request or a delegated helper). Nothing was "
    "started. Run it with background: true and use process wait (or poll) before you "
    "answer, or run it in the foreground.")


def _json(obj: dict[str, Any]) -> str:
    return orjson.dumps(obj).decode()


def _error(message: str, **extra: Any) -> str:
    return _json({"error": message, **extra, "summary": message[:120]})


def workdir_of(ctx: ToolContext, workdir: Any) -> str:
    """The directory a command runs in: ``workdir`` (relative to the session's cwd), or
    the session's cwd, or the user's home for a session that has none."""
    base = ctx.cwd or os.path.expanduser("~")
    if workdir is None:
        return base
    if not isinstance(workdir, str) or not workdir:
        raise ValueError("workdir must be a non-empty string")
    return os.path.normpath(os.path.join(base, os.path.expanduser(workdir)))


def _summary(exit_code: int | None, timed_out: bool, output: str) -> str:
    lines = output.count("\n") + (1 if output and not output.endswith("\n") else 0)
    head = "timed out" if timed_out else f"exit {exit_code}"
    return f"{head} · {lines} line{'s' if lines != 1 else ''} of output"


class Terminal(Arguments):
    command: Annotated[str, Field(max_length=MAX_COMMAND_CHARS, description="a shell command "
                                  "(/bin/sh)"), AfterValidator(non_blank)]
    workdir: Annotated[str, Field(min_length=1, description="directory to run in, relative "
                                  "to the session's")] | None = None
    timeout_s: Annotated[float, Field(gt=0, description="foreground timeout (default 120)")] \
        | None = None
    background: Annotated[bool, Field(description="start it and return its process id at "
                                      "once")] = False
    notify_on_complete: Annotated[bool, Field(
        description="with background: deliver a notice into this session when it ends "
                    "(interactive sessions only)")] = False
    escalate: Annotated[bool, Field(
        description="run it OUTSIDE the sandbox, with network access and writes beyond the "
                    "working directory; a person must always approve it (never on "
                    "unattended turns). Use only when the sandbox refused something this "
                    "task really needs")] = False
    reason: Annotated[str, Field(max_length=MAX_REASON_CHARS, description="with escalate: "
                                 "why it must run outside the sandbox (shown to the person "
                                 "asked)")] | None = None

    @model_validator(mode="after")
    def _together(self) -> Terminal:
        if self.notify_on_complete and not self.background:
            raise ValueError("notify_on_complete needs background: true")
        if self.escalate and not (self.reason or "").strip():
            raise ValueError("escalate: true needs a reason (why it must run outside the "
                             "sandbox)")
        return self


TERMINAL = ArgumentsOf(Terminal)
TERMINAL_PARAMETERS = TERMINAL.schema


def terminal_tool(table: ProcessTable, config: ToolsConfig,
                  editor: EditorTerminals | None = None) -> Tool:
    """The terminal tool; ``editor``: the editors that offered to run a session's
    sandboxed foreground commands in their terminals (editor_terminal.py)."""

    async def run(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            a = TERMINAL.parse(args)
        except ValueError as exc:
            return _error(f"terminal: {exc}")
        command, background, notify = a.command, a.background, a.notify_on_complete
        escalate, reason = a.escalate, a.reason
        timeout = min(a.timeout_s or config.command_timeout_seconds,
                      config.max_command_timeout_seconds)
        if notify and not ctx.late_delivery:
            # the channel capability (SPEC §12): asked once, here; nothing recorded
            return _error(NOTIFY_REFUSED, refused="notify_unsupported")
        try:
            cwd = workdir_of(ctx, a.workdir)
            workspace = workdir_of(ctx, None)  # the sandbox's writable directory
        except ValueError as exc:
            return _error(f"terminal: {exc}")
        if not os.path.isdir(cwd):
            return _error(f"terminal: working directory {cwd} does not exist")
        sandbox = table.sandbox
        boundary = sandbox.boundary(ctx.settings.sandbox)
        verdict = await ctx.approve("terminal", "command", command, sandbox=boundary,
                                    escalate=escalate, reason=reason if escalate else None)
        if not verdict.allowed:
            return _json({"error": f"the command was not run: {verdict.reason}",
                          "denied": True, "approval_id": verdict.approval_id,
                          "summary": "not run: " + verdict.reason[:100]})
        # an approved escalation runs outside; the environment stays the allowlist
        run_in = NONE if escalate else boundary
        if background:
            try:
                p = await table.start(ctx.session_id, ctx.admission_id, command, cwd, notify,
                                      run_in, workspace)
            except ValueError as exc:
                return _error(f"terminal: {exc}")
            return _json({"process_id": p.process_id, "pid": p.proc.pid, "state": "running",
                          "notify_on_complete": notify, "sandbox": run_in,
                          "hint": "a notice arrives as a new turn when it ends" if notify
                          else "use process poll, log or wait to follow it",
                          "summary": f"started {p.process_id} in the background"})
        out = None
        if editor is not None and run_in != NONE and editor.runs(ctx.session_id):
            # only a sandboxed command goes to an editor's terminal: the same argv
            out = await _in_editor(editor, ctx, sandbox, command, cwd, workspace, run_in,
                                   timeout, config.output_chars)
        if out is None:
            out = await _foreground(sandbox, command, cwd, workspace, run_in, timeout,
                                    config.output_chars)
        if "sandbox_refused" in out and not ctx.attended:
            out["sandbox_refused"] += (" (on this turn nobody can approve an escalation: it "
                                       "would be denied)")
        return _json(out)

    if table.sandbox.boundary() == NONE:
        where = ("There is no sandbox on this machine: risky commands need the user's "
                 "approval. ")
    else:
        where = ("It runs in a sandbox: the filesystem is read-only except the working "
                 "directory and a private /tmp, there is no network, and the environment "
                 "holds only basic variables; the result says when the sandbox refused "
                 "something. escalate: true with a reason runs it outside the sandbox "
                 "(network, writes beyond the workspace) and always needs a person's "
                 "approval. Risky commands may need the user's approval too. ")
    return Tool(name="terminal", toolset="terminal", run=run, parameters=TERMINAL_PARAMETERS,
                description=(
                    "Run a shell command in the session's working directory and return its "
                    "exit code and output (long output keeps its start and end). " + where
                    + "background: true starts it and returns a process id (see the process "
                    "tool)."))


async def _foreground(sandbox: Sandbox, command: str, cwd: str, workspace: str, boundary: str,
                      timeout: float, limit: int) -> dict[str, Any]:
    started = time.monotonic()
    try:
        proc = await spawn(sandbox.argv(command, cwd, boundary, workspace=workspace), cwd,
                           sandbox.env)
    except (OSError, ValueError) as exc:
        return {"error": f"could not start the command: {exc}", "summary": "could not start"}
    capture = Capture(limit)
    timed_out = False
    exit_code: int | None
    try:
        exit_code = await asyncio.wait_for(collect(proc, capture.feed), timeout)
    except TimeoutError:
        timed_out = True
        await end(proc, grace=min(2.0, KILL_SECONDS / 3))
        exit_code = proc.returncode
    except asyncio.CancelledError:
        # the turn is being stopped: the command goes with it
        await asyncio.shield(end(proc))
        lineage.unregister(proc.pid)
        raise
    lineage.unregister(proc.pid)
    return _result(sandbox, boundary, workspace, started, timeout, exit_code, capture.text(),
                   timed_out)


async def _in_editor(editor: EditorTerminals, ctx: ToolContext, sandbox: Sandbox,
                     command: str, cwd: str, workspace: str, boundary: str, timeout: float,
                     limit: int) -> dict[str, Any] | None:
    """The result of ``command`` run in the session's editor's terminal, in the same
    sandbox; None when the editor did not take it (nothing started: run it here)."""
    env, token = marked(sandbox.env)
    try:
        argv = sandbox.editor_argv(command, cwd, boundary, workspace=workspace, env=env)
    except ValueError:
        return None
    started = time.monotonic()
    ran = await editor.run(ctx.session_id, ctx.admission_id, ctx.call_id, argv,
                           os.path.realpath(cwd), env, token, timeout, limit)
    if ran is None:
        return None
    out = _result(sandbox, boundary, workspace, started, timeout, ran.exit_code, ran.output,
                  ran.timed_out)
    if ran.error is not None:
        out.pop("sandbox_refused", None)
        out["error"] = ran.error
        out["summary"] = "failed in the editor's terminal"
    return out


def _result(sandbox: Sandbox, boundary: str, workspace: str, started: float, timeout: float,
            exit_code: int | None, output: str, timed_out: bool) -> dict[str, Any]:
    """A foreground command's result, however it ran."""
    out: dict[str, Any] = {"exit_code": exit_code, "output": output,
                           "duration_seconds": round(time.monotonic() - started, 3),
                           "sandbox": boundary}
    if timed_out:
        out["timed_out"] = True
        out["note"] = f"killed after {timeout:g} s (with everything it started)"
    elif hint := refusal(boundary, sandbox.config.network, exit_code, output, workspace):
        out["sandbox_refused"] = hint
    out["summary"] = _summary(exit_code, timed_out, output)
    return out


class Process(Arguments):
    action: Literal["list", "poll", "log", "wait", "kill", "write"]
    id: Annotated[str, Field(description="the process id (all actions but list)")] | None = None
    offset: Annotated[int, Field(ge=0, description="log: byte offset to read from")] \
        | None = None
    limit: Annotated[int, Field(ge=1, description="log: bytes to read at most")] = 20_000
    timeout_s: Annotated[float, Field(ge=0, description="wait: seconds to wait at most")] = 30
    data: Annotated[str, Field(description="write: text sent to its stdin")] = ""
    eof: Annotated[bool, Field(description="write: close its stdin afterwards")] = False

    @model_validator(mode="after")
    def _named(self) -> Process:
        if self.action != "list" and self.id is None:
            raise ValueError(f"`id` is required for action {self.action}")
        return self


PROCESS = ArgumentsOf(Process)
PROCESS_PARAMETERS = PROCESS.schema


def process_tool(table: ProcessTable) -> Tool:
    async def run(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            a = PROCESS.parse(args)
        except ValueError as exc:
            return _error(f"process: {exc}")
        action = a.action
        if action == "list":
            rows = await table.stored(ctx.session_id)
            live = {p.process_id: p for p in table.of_session(ctx.session_id)}
            procs = [live[r["process_id"]].status() if r["process_id"] in live else
                     {"process_id": r["process_id"], "command": r["command"],
                      "state": r["state"], "exit_code": r["exit_code"]} for r in rows]
            return _json({"processes": procs, "summary": f"{len(procs)} process(es)"})
        pid = a.id or ""
        p = table.live(ctx.session_id, pid)
        if p is None:
            found = await table.stored(ctx.session_id, pid)
            if not found:
                return _error(f"process {action}: no process {pid!r} in this session")
            r = found[0]
            return _json({"process_id": pid, "state": r["state"], "exit_code": r["exit_code"],
                          "output_tail": r["output_tail"],
                          "note": "this process belonged to an earlier owner; only its "
                                  "record is left",
                          "summary": f"{pid} {r['state']}"})
        return _json(await _act(table, p, a))

    return Tool(name="process", toolset="terminal", run=run, parameters=PROCESS_PARAMETERS,
                description=(
                    "Manage background processes started with terminal background: true: "
                    "list; poll (state and recent output); log (output by byte offset); "
                    "wait (until it ends or timeout_s); kill (its whole process group); "
                    "write (text to its stdin)."))


async def _act(table: ProcessTable, p: Managed, a: Process) -> dict[str, Any]:
    action = a.action
    if action == "poll":
        return _hinted(table, p, {**p.status(), "recent_output": p.ring.tail(2000),
                                  "summary": f"{p.process_id} {p.state}"})
    if action == "log":
        offset = a.offset
        text, begin, end = p.ring.read(offset, min(a.limit, 100_000))
        out = {"process_id": p.process_id, "state": p.state, "output": text, "from": begin,
               "to": end, "total": p.ring.written,
               "summary": f"{p.process_id}: bytes {begin}-{end} of {p.ring.written}"}
        if offset is not None and begin > offset:
            out["note"] = f"bytes before {begin} were dropped (the ring keeps the newest)"
        return out
    if action == "wait":
        try:
            await asyncio.wait_for(p.done.wait(), min(a.timeout_s, MAX_WAIT_SECONDS))
        except TimeoutError:
            pass
        return _hinted(table, p, {**p.status(), "recent_output": p.ring.tail(2000),
                                  "summary": f"{p.process_id} {p.state}"
                                  + (f" (exit {p.exit_code})" if p.state != "running" else "")})
    if action == "kill":
        await table.kill(p)
        return {**p.status(), "summary": f"{p.process_id} {p.state}"}
    data, eof = a.data, a.eof
    stdin = p.proc.stdin
    if p.state != "running" or stdin is None or stdin.is_closing():
        return {"error": f"process write: {p.process_id} is not taking input"}
    stdin.write(data.encode())
    try:
        await stdin.drain()
        if eof:
            stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        return {"error": f"process write: {p.process_id} closed its input"}
    return {"process_id": p.process_id, "written": len(data.encode()),
            "summary": f"wrote {len(data)} characters"}


def _hinted(table: ProcessTable, p: Managed, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with the sandbox's hint when the process ended refused by it."""
    if p.state == "exited" and (hint := refusal(p.boundary, table.sandbox.config.network,
                                                p.exit_code, p.ring.tail(4000), p.workspace)):
        out["sandbox_refused"] = hint
    return out
