"""`tether acp` driven by the ACP package's own client side (spawn_agent_process), over
a real owner it starts and a scripted model: new, prompt, permission, cancel, and a
session that outlives the editor (the adapter killed mid-turn, then load)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    EnvVariable,
    McpServerStdio,
    RequestPermissionResponse,
    SseMcpServer,
)
from fakeprovider import FakeProvider
from harness import Peer, clean_env, sandbox_missing, write_config
from toolscript import ScriptedModel, tool_results


class Editor:
    """The editor side: records updates; answers permission requests as told."""

    def __init__(self, answer: str | None = "once") -> None:
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[Any] = []
        #: None: answers only when the agent withdraws the request, and then "deny"
        self.answer = answer
        self.changed = asyncio.Event()
        self.request_ids: dict[str, Any] = {}  # tool call id → its request's JSON-RPC id
        self.withdrawn: dict[Any, asyncio.Event] = {}  # request ids of $/cancel_request

    def observe(self, event: StreamEvent) -> None:
        """The raw messages from the agent (the package routes no $/cancel_request)."""
        msg = event.message
        if event.direction is not StreamDirection.INCOMING:
            return
        if msg.get("method") == "session/request_permission":
            self.request_ids[msg["params"]["toolCall"]["toolCallId"]] = msg["id"]
        elif msg.get("method") == "$/cancel_request":
            self.withdrawn.setdefault(msg["params"]["requestId"], asyncio.Event()).set()

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kw: Any) -> RequestPermissionResponse:
        self.asked.append((tool_call, [o.option_id for o in options]))
        self.changed.set()
        if self.answer is None:
            # the dialog stays open until the agent withdraws it; the person then
            # clicks anyway (an answer after someone else's)
            request_id = self.request_ids[tool_call.tool_call_id]
            await self.withdrawn.setdefault(request_id, asyncio.Event()).wait()
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id="deny"))
        if self.answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answer))

    async def wait(self, pred: Any, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = [u for _, u in self.updates if pred(u)]
            if found:
                return found[0]
            self.changed.clear()
            left = deadline - time.monotonic()
            assert left > 0, f"no such update in {[type(u).__name__ for _, u in self.updates]}"
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)

    def of(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]


@contextlib.asynccontextmanager
async def adapter(home: Path, editor: Editor) -> AsyncIterator[tuple[Any, Any]]:
    async with spawn_agent_process(editor, sys.executable, "-m", "tether.clients.cli", "acp",
                                   env=clean_env(home), observers=[editor.observe],
                                   transport_kwargs={"stderr": None}) as (conn, proc):
        init = await asyncio.wait_for(conn.initialize(protocol_version=1), 60)
        assert init.agent_capabilities.load_session is True
        yield conn, proc


def script() -> ScriptedModel:
    return ScriptedModel({
        "make": [("terminal", {"command": "touch made-by-agent"})],
        "write": [("write_file", {"path": "notes.txt", "content": "hello\n"})],
        "slow": [("terminal", {"command": "sleep 30"})],
        "long": [("terminal", {"command": "sleep 2 && echo finished-in-owner"})],
        "elsewhere": [("terminal", {"command": "touch answered-elsewhere"})],
    })


def setup(tmp_path: Path, provider_url: str) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_config(home, provider_url, approvals={
        "mode": "ask", "allow": ["sleep *", "path:notes.txt"]})
    return home, work


async def test_new_prompt_permission_edit_and_cancel(tmp_path, reap_owners):
    model = script()
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url)
        reap_owners(home)
        editor = Editor("once")
        async with adapter(home, editor) as (conn, proc):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            made = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("make a file")],
                            messageId="msg-1"), 60)
            # the same message again (an editor's retry): the same admission, no new turn
            again = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("make a file")],
                            messageId="msg-1"), 60)
            makes = len([r for r in model.requests if "make a file" in str(r["messages"])])
            wrote = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("write notes")]), 60)
            slow = asyncio.create_task(conn.prompt(session_id=sid,
                                                   prompt=[text_block("slow one")]))
            await editor.wait(lambda u: u.session_update == "tool_call"
                              and "sleep 30" in u.title)
            await conn.cancel(session_id=sid)
            cancelled = await asyncio.wait_for(slow, 60)
            # a prompt answered elsewhere first: the agent withdraws the editor's request
            editor.answer = None
            elsewhere = asyncio.create_task(conn.prompt(session_id=sid,
                                                        prompt=[text_block("elsewhere")]))
            async with await Peer.connect(home) as peer:
                deadline = time.monotonic() + 30
                while not (pending := (await peer.result("approval.list"))["approvals"]):
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.05)
                await peer.result("approval.respond", session_id=sid, decision="once",
                                  approval_id=pending[0]["approval_id"])
                other = await asyncio.wait_for(elsewhere, 60)
                # the editor's "deny", given after the dialog was withdrawn, changed nothing
                await asyncio.sleep(0.3)
                left = (await peer.result("approval.list"))["approvals"]
    assert made.stop_reason == "end_turn" and (work / "made-by-agent").exists()
    assert again.stop_reason == "end_turn" and makes == 2  # two model calls, one turn
    call, options = editor.asked[0]
    assert options == ["once", "session", "always", "deny"]
    assert call.kind == "execute" and "touch made-by-agent" in call.title
    starts = editor.of("tool_call")
    assert starts[0].kind == "execute" and starts[0].status == "in_progress"
    done = [u for u in editor.of("tool_call_update") if u.tool_call_id == starts[0].tool_call_id]
    assert done[-1].status == "completed"
    assert any("DONE" in u.content.text for u in editor.of("agent_message_chunk"))
    # the prompt's own text is not echoed back as a user message
    assert not editor.of("user_message_chunk")
    # a file edit: its path and a diff the editor can show
    assert wrote.stop_reason == "end_turn" and (work / "notes.txt").read_text() == "hello\n"
    [edit] = [u for u in starts if u.kind == "edit"]
    assert edit.locations[0].path == str(work / "notes.txt")
    assert edit.content[0].type == "diff" and edit.content[0].new_text == "hello\n"
    assert cancelled.stop_reason == "cancelled"
    assert other.stop_reason == "end_turn" and (work / "answered-elsewhere").exists()
    assert len(editor.asked) == 2  # sleep was allowed by a rule: no prompt
    # the second dialog was withdrawn by its own request id ($/cancel_request)
    withdrawn_call = editor.asked[1][0].tool_call_id
    assert "answered-elsewhere" in editor.asked[1][0].title
    assert editor.request_ids[withdrawn_call] in editor.withdrawn
    assert editor.request_ids[editor.asked[0][0].tool_call_id] not in editor.withdrawn
    assert left == []
    assert tool_results(model, "elsewhere")[0]["exit_code"] == 0
    assert tool_results(model, "make")[0]["exit_code"] == 0


async def test_a_session_outlives_the_editor(tmp_path, reap_owners):
    model = script()
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url)
        reap_owners(home)
        editor = Editor()
        async with adapter(home, editor) as (conn, proc):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("long job")]))
            await editor.wait(lambda u: u.session_update == "tool_call")
            proc.kill()  # the editor closes mid-turn
        async with await Peer.connect(home) as peer:
            deadline = time.monotonic() + 30
            while (await peer.result("session.resume", session_id=sid))["running"]:
                assert time.monotonic() < deadline, "the turn did not finish in the owner"
                await asyncio.sleep(0.1)
        reopened = Editor()
        async with adapter(home, reopened) as (conn, proc):
            listed = await conn.list_sessions(cwd=str(work))
            elsewhere = await conn.list_sessions(cwd=str(tmp_path / "elsewhere"))
            with pytest.raises(RequestError) as unknown:
                await conn.load_session(cwd=str(work), session_id="ses_no_such",
                                        mcp_servers=[])
            await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            await asyncio.sleep(0.2)
    assert [s.session_id for s in listed.sessions] == [sid]
    assert listed.sessions[0].cwd == str(work) and elsewhere.sessions == []
    assert "not_found" in str(unknown.value)
    kinds = [u.session_update for _, u in reopened.updates]
    assert kinds[0] == "user_message_chunk"
    assert reopened.updates[0][1].content.text == "long job"
    [start] = reopened.of("tool_call")
    assert "sleep 2" in start.title and start.kind == "execute"
    [result] = reopened.of("tool_call_update")
    assert result.status == "completed" and "finished-in-owner" in result.content[0].content.text
    assert "DONE" in reopened.of("agent_message_chunk")[-1].content.text


async def test_a_call_its_turn_ended_before_it_ran_is_closed_live_and_on_load(
        tmp_path, reap_owners):
    """A cancel that lands while a call waits for its approval ends the turn with no
    result for that call: the editor's card is closed (failed), live and on load,
    rather than left spinning."""
    model = ScriptedModel({"guarded": [("terminal", {"command": "touch never-made"})]})
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url)
        reap_owners(home)
        editor = Editor(None)  # the permission dialog stays open
        async with adapter(home, editor) as (conn, proc):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            turn = asyncio.create_task(conn.prompt(session_id=sid,
                                                   prompt=[text_block("guarded one")]))
            await editor.wait(lambda u: u.session_update == "tool_call")
            deadline = time.monotonic() + 30
            while not editor.asked:
                assert time.monotonic() < deadline, "no permission request"
                await asyncio.sleep(0.05)
            async with await Peer.connect(home) as peer:  # cancelled from elsewhere
                await peer.result("session.interrupt", session_id=sid)
            ended = await asyncio.wait_for(turn, 60)
        reopened = Editor()
        async with adapter(home, reopened) as (conn, proc):
            await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            await asyncio.sleep(0.2)
    assert ended.stop_reason == "cancelled" and not (work / "never-made").exists()
    for seen in (editor, reopened):
        [start] = seen.of("tool_call")
        assert "touch never-made" in start.title and start.status == "in_progress"
        [closed] = seen.of("tool_call_update")
        assert closed.tool_call_id == start.tool_call_id and closed.status == "failed"
        assert "no result" in closed.content[0].content.text


DEMO = str(Path(__file__).resolve().parents[2] / "mcp" / "mcpdemo.py")


async def test_the_editor_s_mcp_servers_serve_its_session(tmp_path, reap_owners):
    model = ScriptedModel({"sum": [("mcp__demo-tools__add", {"a": 20, "b": 22})]})
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url)
        reap_owners(home)
        editor = Editor("once")
        servers = [McpServerStdio(name="Demo Tools", command=sys.executable, args=[DEMO],
                                  env=[EnvVariable(name="DEMO_SECRET", value="from-editor")]),
                   SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse",
                                headers=[])]
        async with adapter(home, editor) as (conn, proc):
            init = await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(work), mcp_servers=servers)).session_id
            other = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            done = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("sum please")]), 60)
            await asyncio.wait_for(
                conn.prompt(session_id=other, prompt=[text_block("elsewhere, no sum")]), 60)
        async with await Peer.connect(home) as peer:
            listed = (await peer.result("mcp.list"))["servers"]
            bad = await peer.call("mcp.attach", session_id=sid, servers=[{"name": "x"}])
            missing = await peer.call("mcp.attach", session_id="ses_nope", servers=[
                {"name": "y", "command": "true"}])
            after = (await peer.result("mcp.list"))["servers"]
    assert init.agent_capabilities.mcp_capabilities.http is True
    assert done.stop_reason == "end_turn"
    [result] = tool_results(model, "sum")
    assert result.get("content") == "42", result
    [attached] = listed
    assert attached["name"] == "demo-tools" and attached["session_id"] == sid
    assert attached["state"] == "ready"
    # another session does not get them
    others = [r for r in model.requests if "elsewhere, no sum" in str(r["messages"])]
    assert not any(t["function"]["name"].startswith("mcp__")
                   for t in others[0].get("tools") or [])
    # bad input changes nothing
    assert bad["error"]["data"]["reason"] == "invalid_params"
    assert missing["error"]["data"]["reason"] == "not_found"
    assert after == listed


async def test_the_editor_may_tighten_the_sandbox_but_not_loosen_it_nor_approvals(
        tmp_path, reap_owners):
    why = sandbox_missing()
    if why:
        pytest.skip(why)
    model = ScriptedModel({"boxed": [("terminal", {"command": "touch boxed-in"})],
                           "again": [("terminal", {"command": "touch written-again"})]})
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url)
        reap_owners(home)
        editor = Editor("once")
        async with adapter(home, editor) as (conn, proc):
            new = await conn.new_session(cwd=str(work), mcp_servers=[])
            sid = new.session_id
            stricter = await conn.set_config_option(config_id="sandbox", session_id=sid,
                                                    value="read-only")
            refused = []
            for config_id, value in (("sandbox", "off"), ("approvals", "never"),
                                     ("approvals_mode", "ask")):
                with pytest.raises(RequestError) as err:
                    await conn.set_config_option(config_id=config_id, session_id=sid,
                                                 value=value)
                refused.append(str(err.value.args) + str(err.value))
            same = await conn.set_config_option(config_id="approvals", session_id=sid,
                                                value="ask")
            await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("boxed in")]), 60)
            await conn.set_session_mode(session_id=sid, mode_id="workspace-write")
            with pytest.raises(RequestError):
                await conn.set_session_mode(session_id=sid, mode_id="off")
            await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("again")]), 60)
    options = {o.id: o for o in new.config_options}
    assert options["sandbox"].current_value == "workspace-write"
    assert [o.value for o in options["sandbox"].options] == ["workspace-write", "read-only"]
    # approvals are shown with their one value: nothing to pick
    assert options["approvals"].current_value == "ask"
    assert [o.value for o in options["approvals"].options] == ["ask"]
    assert [m.id for m in new.modes.available_modes] == ["workspace-write", "read-only"]
    assert {o.id: o.current_value for o in stricter.config_options}["sandbox"] == "read-only"
    assert "looser" in refused[0] and "cannot change" in refused[1] and "no config" in refused[2]
    assert {o.id: o.current_value for o in same.config_options}["approvals"] == "ask"
    # the read-only sandbox held the editor's prompt; workspace-write writes again
    [boxed] = tool_results(model, "boxed")
    assert boxed["exit_code"] != 0 and not (work / "boxed-in").exists()
    assert (work / "written-again").exists()
    assert [u.current_mode_id for u in editor.of("current_mode_update")] == ["read-only"]
    assert editor.of("config_option_update")


async def test_delegations_show_as_the_plan_and_a_turn_reports_its_tokens(
        tmp_path, reap_owners):
    model = ScriptedModel({"split": [("delegate_task", {"tasks": [
        {"goal": "count the apples"}, {"goal": "count the pears"}]})]})
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url)
        reap_owners(home)
        editor = Editor("once")
        async with adapter(home, editor) as (conn, proc):
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            done = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("split the work")]), 60)
            # the helpers run in the background; the plan follows them to their end
            await editor.wait(lambda u: u.session_update == "plan" and u.entries
                              and all(e.status == "completed" for e in u.entries))
    plans = [[(e.content, e.status) for e in u.entries] for u in editor.of("plan")]
    goals = ["count the apples", "count the pears"]
    assert plans[0] == [(g, "pending") for g in goals]
    assert any(("count the apples", "in_progress") in p for p in plans)
    assert plans[-1] == [(g, "completed") for g in goals]
    assert done.stop_reason == "end_turn"
    assert done.usage is not None and done.usage.total_tokens > 0
    assert done.usage.input_tokens + done.usage.output_tokens == done.usage.total_tokens
