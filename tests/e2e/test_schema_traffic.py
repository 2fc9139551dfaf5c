"""``tether schema`` against real traffic: every frame the owner sends validates.

A standard JSON Schema 2020-12 validator (jsonschema) is given the schema the CLI
prints; a real owner with a fake model then serves every method, turns with
reasoning, a tool call, inline and background delegation, and every error a
client can provoke. Each reply is checked against its method's result schema
(or the error frame and the per-reason data schema), each event against the
event union, discriminated by type.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import Message, Status, text_reply, tool_call_reply
from harness import sandbox_missing, until
from scene import owner_env

jsonschema = pytest.importorskip("jsonschema")

CHILD = "CHILD_TASK"
#: the MCP server of the MCP tests (tool.progress, mcp.list, mcp.tools)
MCP_DEMO = str(Path(__file__).resolve().parents[1] / "mcp" / "mcpdemo.py")
#: prompts whose first request fails once, so the owner announces its retry
_flaky: set[str] = set()


def model(req: dict) -> Any:
    msgs = req["messages"]
    users = [m.get("content") or "" for m in msgs if m["role"] == "user"]
    first = users[0] if users else ""
    if CHILD in first:
        return text_reply("child finished")
    if msgs[-1]["role"] == "tool":
        return text_reply("all joined")
    if users[-1] == "flaky" and "flaky" not in _flaky:
        _flaky.add("flaky")
        return Status(503)
    if users[-1] == "count with mcp":
        return tool_call_reply("mcp__demo__count", {"to": 2}, "m1")
    if users[-1] == "read through the editor":
        return tool_call_reply("read_file", {"path": "buffer.txt"}, "f1")
    if users[-1] == "run in the editor's terminal":
        return tool_call_reply("terminal", {"command": "echo in-a-terminal"}, "e1")
    if users[-1] == "run a command":
        return tool_call_reply("terminal", {"command": "touch schema-check"}, "t1")
    if users[-1] == "run in the background":
        return tool_call_reply("terminal", {"command": "sleep 0.1", "background": True,
                                            "notify_on_complete": True}, "t2")
    if "[delegation results]" in (users[-1] if users else ""):
        return text_reply("background delivered")
    if "delegate" in users[-1]:
        return tool_call_reply("delegate_task", {"tasks": [{"goal": f"{CHILD} one"}]}, "c1")
    return Message({"role": "assistant", "content": "plain answer",
                    "reasoning_content": "thinking it over"})


def schema_from_cli(home: Path) -> dict[str, Any]:
    out = subprocess.run([str(Path(sys.executable).with_name("tether")), "schema"], check=True,
                         capture_output=True, env=owner_env(home, None), timeout=60)
    return json.loads(out.stdout)


class Checker:
    def __init__(self, schema: dict[str, Any]) -> None:
        jsonschema.Draft202012Validator.check_schema(schema)
        self.schema = schema
        self.checked: dict[str, int] = {}

    def _validate(self, instance: Any, ref: dict[str, Any]) -> None:
        sub = {"$schema": self.schema["$schema"], "$defs": self.schema["$defs"], **ref}
        jsonschema.Draft202012Validator(sub).validate(instance)

    def reply(self, method: str, frame: dict[str, Any]) -> None:
        if "error" in frame:
            self._validate(frame, self.schema["frames"]["error"])
            reason = frame["error"]["data"]["reason"]
            [entry] = [e for e in self.schema["errors"] if e["reason"] == reason]
            self._validate(frame["error"]["data"], entry["data"])
            self.checked["error:" + reason] = self.checked.get("error:" + reason, 0) + 1
            return
        self._validate(frame, self.schema["frames"]["result"])
        self._validate(frame["result"], self.schema["methods"][method]["result"])
        self.checked[method] = self.checked.get(method, 0) + 1

    def event(self, event: dict[str, Any]) -> None:
        self._validate({"jsonrpc": "2.0", "method": "event", "params": event},
                       self.schema["events"]["notification"])
        self.checked["event:" + event["type"]] = self.checked.get("event:" + event["type"], 0) + 1


async def test_every_reply_and_event_of_real_traffic_validates(scene, tmp_path):
    _flaky.clear()  # the test runs once per store: each run's first "flaky" fails once
    checker = Checker(schema_from_cli(tmp_path / "home"))
    async with scene(model, session=False, mcp={"servers": {"demo": {
            "command": sys.executable, "args": [MCP_DEMO]}}},
            approvals={"unattended": "allow"}) as s:
        peer = s.peer

        async def call(method: str, **params: Any) -> dict[str, Any]:
            frame = await peer.call(method, **params)
            checker.reply(method, frame)
            return frame

        for method in ("runtime.describe", "ping"):
            await call(method)
        minted = (await call("token.create", label="schema", ttl_seconds=60))["result"]
        await call("token.list")
        await call("token.revoke", token_id=minted["token_id"])
        await call("token.revoke", token_id=minted["token_id"])  # not_found
        await call("runtime.listen_tcp", address="127.0.0.1:0")
        await call("runtime.listen_tcp", address="nonsense")  # listening already
        sid = (await call("session.create", title="schema",
                          cwd=str(tmp_path)))["result"]["session_id"]
        await call("session.list")
        for n, text in enumerate(("hello", "delegate inline")):
            r = (await call("prompt.submit", session_id=sid, input_id=f"i{n}",
                            text=text, finite=True))["result"]
            await peer.wait_terminal(sid, r["admission_id"])
        r = (await call("prompt.submit", session_id=sid, input_id="bg",
                        text="delegate in background"))["result"]
        await peer.wait_terminal(sid, r["admission_id"])
        await until(lambda: any(e["type"] == "delegation.complete"
                                for e in peer.events), what="the delivery")
        # an MCP tool with progress: tool.progress; the mcp.* methods
        r = (await call("prompt.submit", session_id=sid, input_id="mcp",
                        text="count with mcp", finite=True))["result"]
        await peer.wait_terminal(sid, r["admission_id"])
        await call("mcp.list")
        await call("mcp.tools", server="demo")
        await call("mcp.resources", server="demo")
        await call("mcp.attach", session_id=sid, servers=[
            {"name": "extra", "command": sys.executable, "args": [MCP_DEMO]}])
        # an editor's buffer: fs.offer, the fs.request notice, fs.respond
        (tmp_path / "buffer.txt").write_text("on disk\n")
        await call("fs.offer", session_id=sid, read=True)
        r = (await call("prompt.submit", session_id=sid, input_id="fs",
                        text="read through the editor", finite=True))["result"]
        asked = await peer.wait_event(lambda e: e["type"] == "fs.request")
        await call("fs.respond", request_id=asked["payload"]["request_id"],
                   text="in the buffer\n")
        await peer.wait_terminal(sid, r["admission_id"])
        # an editor's terminal: terminal.offer, the terminal.request notice (where a
        # sandbox can be made), terminal.respond (refused: the owner runs it)
        await call("terminal.offer", session_id=sid)
        r = (await call("prompt.submit", session_id=sid, input_id="term",
                        text="run in the editor's terminal", finite=True))["result"]
        if sandbox_missing() is None:
            asked = await peer.wait_event(lambda e: e["type"] == "terminal.request")
            await call("terminal.respond", request_id=asked["payload"]["request_id"],
                       error="no terminals here", refused=True)
        await peer.wait_terminal(sid, r["admission_id"])
        await call("terminal.offer", session_id=sid, run=False)
        # a transient model failure: model.retry
        r = (await call("prompt.submit", session_id=sid, input_id="flaky",
                        text="flaky", finite=True))["result"]
        await peer.wait_terminal(sid, r["admission_id"])
        # approvals: asked, answered (always, so a rule exists), resolved
        for n, text in enumerate(("run a command", "run in the background")):
            r = (await call("prompt.submit", session_id=sid, input_id=f"tool{n}",
                            text=text))["result"]
            asked = await peer.wait_event(
                lambda e: e["type"] == "approval.requested"
                and e["admission_id"] == r["admission_id"])  # noqa: B023
            await call("approval.list", session_id=sid)
            await call("approval.respond", session_id=sid, decision="always",
                       approval_id=asked["payload"]["approval_id"])
            await peer.wait_terminal(sid, r["admission_id"])
        await until(lambda: any(e["type"] == "process.complete" for e in peer.events),
                    what="the background process's notice")
        rules = (await call("approval.rules"))["result"]["rules"]
        await call("approval.rule_remove", rule_id=rules[0]["rule_id"])
        # scheduled jobs, one delivered into this session (cron.notice)
        await call("cron.create", name="schema-job", schedule="every 1h",
                   prompt="hello", deliver=f"session:{sid}")
        for method in ("cron.get", "cron.pause", "cron.resume", "cron.runs"):
            await call(method, name="schema-job")
        await call("cron.update", name="schema-job", prompt="hello again")
        await call("cron.list")
        await call("cron.run", name="schema-job")
        await until(lambda: any(e["type"] == "cron.notice" for e in peer.events),
                    what="the job's answer delivered")
        await call("cron.remove", name="schema-job")
        # long sessions: a manual compaction (session.compacted), fork, export
        compacted = (await call("session.compact", session_id=sid,
                                focus="the answers"))["result"]
        assert compacted["compacted"] is True
        await call("session.fork", session_id=sid)
        for fmt in ("json", "markdown"):
            await call("session.export", session_id=sid, format=fmt)
        # the session commands
        other = (await call("session.create", title="other"))["result"]["session_id"]
        await call("session.rename", session_id=other, title="renamed")
        await call("session.lookup", prefix=other[:12])
        await call("session.prune", older_than_seconds=0, dry_run=True)
        await call("session.delete", session_id=other)
        await call("prompt.receipt", session_id=sid, input_id="i0")
        await call("prompt.cancel", session_id=sid, admission_id=r["admission_id"])
        await call("session.resume", session_id=sid, after_seq=0)
        await call("session.events.since", session_id=sid, after_seq=0)
        await call("session.interrupt", session_id=sid)
        await call("session.detach", session_id=sid)
        # errors of every kind a client can provoke
        await call("prompt.submit", session_id=sid, input_id="i0", text="other")
        await call("prompt.submit", session_id=sid, input_id="x", text=1)
        await call("session.resume", session_id="nope")
        await call("session.events.since", session_id=sid, after_seq=10_000)
        await call("no.such.method")
        await call("prompt.resolve_unknown", session_id=sid, admission_id=r["admission_id"])
        await call("runtime.shutdown")
        for event in peer.events:
            checker.event(event)
    want = {f"event:{t}" for t in checker.schema["events"]["types"]} - {"event:session.replay_gap"}
    want |= set(checker.schema["methods"])  # a success reply of every method
    assert want <= set(checker.checked), sorted(want - set(checker.checked))
    for reason in ("admission_conflict", "invalid_params", "not_found", "method_not_found"):
        assert f"error:{reason}" in checker.checked


def test_a_replay_gap_notice_validates_and_a_reused_seq_does_not(tmp_path):
    from tether.rpc.envelope import replay_gap

    checker = Checker(schema_from_cli(tmp_path / "home"))
    checker.event(replay_gap("s", 4, "viewer_queue_overflow"))
    with pytest.raises(jsonschema.ValidationError):
        checker.event({**replay_gap("s", 4, "viewer_queue_overflow"), "seq": 4})
    with pytest.raises(jsonschema.ValidationError):  # payload per type
        checker.event({"session_id": "s", "seq": 1, "type": "message.delta",
                       "payload": {"text": 3}, "admission_id": None})


def test_the_schema_states_the_owners_rules(tmp_path):
    checker = Checker(schema_from_cli(tmp_path / "home"))
    s = checker.schema
    receipt = s["methods"]["prompt.receipt"]["params"]
    submit = s["methods"]["prompt.submit"]["params"]
    ok = [{"session_id": "s", "input_id": "i"}, {"session_id": "s", "admission_id": "a"}]
    bad = [{"session_id": "s"}, {"session_id": "s", "input_id": "i", "admission_id": "a"}]
    for params in ok:
        checker._validate(params, receipt)
    for params in bad:
        with pytest.raises(jsonschema.ValidationError):
            checker._validate(params, receipt)
    base = {"session_id": "s", "input_id": "i", "text": "t"}
    checker._validate({**base, "provider": "openai", "toolsets": ["delegation"],
                       "base_url": "http://127.0.0.1:9/v1"}, submit)
    for wrong in ({"provider": "nope"}, {"toolsets": ["shell!"]}, {"base_url": "ftp://x"},
                  {"finite": "true"}):
        with pytest.raises(jsonschema.ValidationError):
            checker._validate({**base, **wrong}, submit)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    titles = [d["title"] for d in s["$defs"].values()]
    assert len(titles) == len(set(titles))
