"""`tether acp` with an editor that offers terminal/* (the ACP package's own client side,
whose terminals really run the argv they are given: tests/termhost.py), over a real
owner and a scripted model: sandboxed commands run in the editor's terminal inside the
same boundary and show in the tool call; escalated and background ones stay in the
owner; a stopped turn, a timeout, an editor that hangs or goes away end the command
and never run it twice."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import spawn_agent_process, text_block
from acp.schema import AllowedOutcome, ClientCapabilities, RequestPermissionResponse
from fakeprovider import FakeProvider
from harness import Peer, clean_env, sandbox_missing, write_config
from termhost import EDITOR_SECRET, TerminalHost
from toolscript import ScriptedModel, tool_results


class TerminalEditor(TerminalHost):
    """An editor with terminals: records updates, allows what it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kw: Any) -> RequestPermissionResponse:
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="once"))

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]


@contextlib.contextmanager
def owner_for(tmp_path: Path, reap_owners: Any, model: ScriptedModel,
              **tools: Any) -> Iterator[tuple[Path, Path, TerminalEditor]]:
    """A home whose owner (reaped after the test) asks ``model``, approving on its
    own; a working directory; an editor with terminals."""
    why = sandbox_missing()
    if why:
        pytest.skip(why)
    with FakeProvider(model) as provider:
        home, work = tmp_path / "home", tmp_path / "work"
        work.mkdir()
        write_config(home, provider.url, approvals={"mode": "auto"}, tools=tools)
        reap_owners(home)
        yield home, work, TerminalEditor()


@contextlib.asynccontextmanager
async def adapter(home: Path, work: Path,
                  editor: TerminalEditor) -> AsyncIterator[tuple[Any, Any, str]]:
    """`tether acp` started by ``editor`` with a new session in ``work``: (the
    connection, the adapter's process, the session id)."""
    try:
        async with spawn_agent_process(editor, sys.executable, "-m", "tether.clients.cli",
                                       "acp", env=clean_env(home),
                                       transport_kwargs={"stderr": None}) as (conn, proc):
            await asyncio.wait_for(conn.initialize(
                protocol_version=1, client_capabilities=ClientCapabilities(terminal=True)), 60)
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            yield conn, proc, sid
    finally:
        editor.close()


async def ask(conn: Any, sid: str, text: str) -> Any:
    return await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(text)]), 90)


async def until(pred: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "it did not happen in time"
        await asyncio.sleep(0.05)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_sandboxed_commands_run_in_the_editor_s_terminal_in_the_same_boundary(
        tmp_path, reap_owners):
    # outside the working directory and the sandbox's private /tmp (where tmp_path is)
    elsewhere = Path("/var/tmp") / f"tether-acp-{os.getpid()}-{tmp_path.name}"
    model = ScriptedModel({
        "env": [("terminal", {"command": "env"})],
        "inside": [("terminal", {"command": "echo made > inside.txt && cat && echo read-eof"})],
        "outside": [("terminal", {"command": f"touch {elsewhere}"})],
        "home": [("terminal", {"command": "cat ../home/config.yaml"})],
        "long": [("terminal", {"command": "seq 1 3000; sleep 1; seq 3001 40000"})],
        "escalate": [("terminal", {"command": "touch ../escalated.txt", "escalate": True,
                                   "reason": "the test asks for it"})],
        "background": [("terminal", {"command": "echo bg > bg.txt", "background": True})],
    })
    with owner_for(tmp_path, reap_owners, model) as (home, work, editor):
        async with adapter(home, work, editor) as (conn, proc, sid):
            for text in ("env", "inside", "outside", "home", "long", "escalate",
                         "background"):
                assert (await ask(conn, sid, text)).stop_reason == "end_turn"
            await until(lambda: (work / "bg.txt").exists())
    # five commands ran in the editor's terminals, each the sandbox's argv
    assert len(editor.terms) == 5
    for term in editor.terms.values():
        assert os.path.basename(term.argv[0]) == "bwrap" and "--clearenv" in term.argv
        assert term.argv[-1] in [c[0][1]["command"] for c in model.script.values()]
        assert term.cwd == os.path.realpath(work) and term.released
    [env] = tool_results(model, "env")
    assert env["exit_code"] == 0 and env["sandbox"] == "workspace-write"
    assert "PATH=" in env["output"] and "TETHER_TOOL_PROCESS=1" in env["output"]
    # the editor's own environment stays outside the sandbox, and so do the owner's keys
    assert EDITOR_SECRET not in env["output"] and "local-test-only" not in env["output"]
    assert "\r" not in env["output"] and env["summary"].startswith("exit 0")
    # writes beneath the working directory; standard input closed, as in the owner
    [inside] = tool_results(model, "inside")
    assert inside["exit_code"] == 0 and "read-eof" in inside["output"]
    assert (work / "inside.txt").read_text() == "made\n"
    # a write outside it and the owner's home are refused by the sandbox
    [outside] = tool_results(model, "outside")
    assert outside["exit_code"] != 0 and "sandbox_refused" in outside
    assert not elsewhere.exists()
    [private] = tool_results(model, "home")
    assert private["exit_code"] != 0 and "api_key" not in private["output"]
    # a long output: its start (read while it ran) and its end, as in the owner
    [long] = tool_results(model, "long")
    assert long["output"].startswith("1\n2\n3\n") and long["output"].endswith("40000\n")
    assert "characters cut" in long["output"] and len(long["output"]) < 21_000
    # an approved escalation and a background process run in the owner
    [escalated] = tool_results(model, "escalate")
    assert escalated["sandbox"] == "none" and (tmp_path / "escalated.txt").exists()
    assert "process_id" in tool_results(model, "background")[0]
    # the tool call shows its terminal from the start; its end keeps it
    starts = {u.tool_call_id: u for u in editor.of("tool_call") if u.kind == "execute"}
    shown = {c.terminal_id for u in editor.updates if getattr(u, "content", None)
             for c in u.content if getattr(c, "type", None) == "terminal"}
    assert shown == set(editor.terms)
    ends = [u for u in editor.of("tool_call_update") if u.status == "completed"
            and u.tool_call_id in starts]
    in_terminal = [u for u in ends if u.content is None]
    assert len(in_terminal) == 5 and all(u.raw_output for u in in_terminal)


async def test_a_stopped_turn_and_a_timeout_end_the_editor_s_command(tmp_path, reap_owners):
    model = ScriptedModel({
        "slow": [("terminal", {"command": "echo started >> runs.txt; sleep 30"})],
        "timeout": [("terminal", {"command": "sleep 30", "timeout_s": 1})],
        "deaf": [("terminal", {"command": "sleep 30", "timeout_s": 1})],
    })
    with owner_for(tmp_path, reap_owners, model) as (home, work, editor):
        async with adapter(home, work, editor) as (conn, proc, sid):
            slow = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slow")]))
            await until(lambda: lines(work / "runs.txt"))
            started = time.monotonic()
            await conn.cancel(session_id=sid)
            cancelled = await asyncio.wait_for(slow, 60)
            [stopped] = editor.terms.values()
            await until(lambda: stopped.proc.returncode is not None, 10)
            stop_took = time.monotonic() - started
            began = time.monotonic()
            await ask(conn, sid, "timeout")
            timeout_took = time.monotonic() - began
            # an editor whose kill does nothing: the owner ends the command itself
            editor.deaf = True
            await ask(conn, sid, "deaf")
            deaf = list(editor.terms.values())[-1]
            await until(lambda: deaf.proc.returncode is not None, 10)
    assert cancelled.stop_reason == "cancelled" and stop_took < 15
    assert lines(work / "runs.txt") == ["started"]  # ran once, never again in the owner
    assert ("kill", "term-1") in editor.calls and ("release", "term-1") in editor.calls
    [timed] = tool_results(model, "timeout")
    assert timed["timed_out"] is True and "killed after 1 s" in timed["note"]
    assert timed["exit_code"] is not None and timed["exit_code"] < 0  # ended by a signal
    assert timeout_took < 20
    [deaf_result] = tool_results(model, "deaf")
    assert deaf_result["timed_out"] is True and deaf_result["exit_code"] is not None


async def test_an_editor_that_fails_never_gets_a_command_run_twice(tmp_path, reap_owners):
    model = ScriptedModel({
        "refused": [("terminal", {"command": "echo here >> refused.txt"})],
        "hang": [("terminal", {"command": "echo there >> hang.txt; sleep 30"})],
        "gone": [("terminal", {"command": "echo there >> gone.txt; sleep 30"})],
    })
    with owner_for(tmp_path, reap_owners, model, editor_fs_timeout_seconds=1) as (home, work, editor):
        async with adapter(home, work, editor) as (conn, proc, sid):
            # the editor refuses to make a terminal: nothing started, the owner runs it
            editor.refuse = True
            await ask(conn, sid, "refused")
            editor.refuse = False
            # it makes one and never says so: it may have started, so it is not rerun
            editor.hang = True
            began = time.monotonic()
            await ask(conn, sid, "hang")
            hang_took = time.monotonic() - began
            editor.hang = False
            [hung] = editor.terms.values()
            await until(lambda: hung.proc.returncode is not None, 10)
            # the adapter goes away while the command runs in the editor's terminal
            asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("gone")]))
            await until(lambda: lines(work / "gone.txt"))
            proc.kill()
        async with await Peer.connect(home) as peer:
            deadline = time.monotonic() + 30
            while (await peer.result("session.resume", session_id=sid))["running"]:
                assert time.monotonic() < deadline, "the turn did not end"
                await asyncio.sleep(0.1)
        gone = list(editor.terms.values())[-1]
        await until(lambda: gone.proc.returncode is not None, 10)
    [refused] = tool_results(model, "refused")
    assert refused["exit_code"] == 0 and lines(work / "refused.txt") == ["here"]
    assert len([c for c in editor.calls if c[0] == "create"]) == 3
    [hang] = tool_results(model, "hang")
    assert "not run again" in hang["error"] and hang["exit_code"] is None
    assert lines(work / "hang.txt") == ["there"] and hang_took < 20
    [lost] = tool_results(model, "gone")
    assert "not run again" in lost["error"] and lines(work / "gone.txt") == ["there"]
