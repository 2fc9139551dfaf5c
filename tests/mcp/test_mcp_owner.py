"""MCP servers as toolsets, through a real owner: a server written with the `mcp`
package over stdio and over streamable HTTP, a scripted model calling
``mcp__<server>__<tool>``, approvals, a server that dies and one that never starts."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcphelp import DEMO, offered, owner, stdio_server, turn
from toolscript import ScriptedModel, tool_results


async def test_a_stdio_server_s_tools_are_called_by_the_model(tmp_path):
    model = ScriptedModel({
        "use": [("mcp__demo__add", {"a": 2, "b": 3}), ("mcp__demo__shout", {"text": "hi"}),
                ("mcp__demo__pixel", {}), ("mcp__demo__fail", {"why": "testing"}),
                ("mcp__demo__whoami", {}), ("mcp__demo__add", {"a": "two"})],
        "grow": [("mcp__demo__grow", {})],
        "double": [("mcp__demo__double", {"x": 21})],
        "count": [("mcp__demo__count", {"to": 3})],
        "die": [("mcp__demo__die", {})],
        "after": [("mcp__demo__whoami", {})],
    })
    servers = {"demo": stdio_server(env={"DEMO_SECRET": "${MCP_TEST_SECRET}"})}
    async with owner(tmp_path, model, servers, env={"MCP_TEST_SECRET": "s3cret",
                                                     "OPENAI_API_KEY": "sk-never-shown"}) \
            as (home, peer, sid):
        described = await peer.result("runtime.describe")
        # lazily: nothing started before a turn needed it
        assert described["mcp_servers"][0]["state"] == "idle"
        assert "mcp" in described["toolsets"]
        await turn(peer, sid, "use the tools", "t1")
        add, shout, pixel, fail, who, bad = tool_results(model, "use")
        tools = offered(model, "use")
        await turn(peer, sid, "grow please", "t2")
        await turn(peer, sid, "double it", "t3")
        [doubled] = tool_results(model, "double")
        await turn(peer, sid, "count please", "t3b")
        [counted] = tool_results(model, "count")
        progress = [e["payload"] for e in await peer.all_events(sid)
                    if e["type"] == "tool.progress"]
        await turn(peer, sid, "die now", "t4")
        [died] = tool_results(model, "die")
        await turn(peer, sid, "after the death", "t5")
        [again] = tool_results(model, "after")
        [server] = (await peer.result("mcp.list"))["servers"]
    assert add["content"] == "5" and add["server"] == "demo" and add["tool"] == "add"
    assert shout["content"] == "HI!"
    assert tools["mcp__demo__add"]["parameters"]["required"] == ["a", "b"]
    assert tools["mcp__demo__add"]["description"].startswith("[MCP server demo] Add two")
    assert "mcp__demo__double" not in tools
    # an image comes back as a reference to a file holding it
    assert "image/png, 70 bytes, saved as" in pixel["content"]
    saved = Path(pixel["content"].split("saved as ")[1].rstrip("]"))
    assert saved.read_bytes().startswith(b"\x89PNG") and saved.is_relative_to(home)
    assert "failed on purpose: testing" in fail["error"]
    # ${VAR} came from the owner's environment; the owner's API key did not pass
    assert "secret=s3cret" in who["content"] and "leak=-" in who["content"]
    assert "error" in bad  # a bad argument is the server's answer, the turn goes on
    # tools/list_changed: the next request offers the new tool, and it works
    assert "mcp__demo__double" in offered(model, "double")
    assert doubled["content"] == "42"
    # progress notifications reach viewers as tool.progress events (the last always)
    assert counted["content"] == "counted to 3"
    assert progress and progress[-1] == {"call_id": "call_0", "name": "mcp__demo__count",
                                         "progress": 3.0, "total": 3.0, "message": "step 3"}
    # a server that dies mid-call: a clear error, then it is started again
    assert died["unavailable"] is True and "stopped during the call" in died["error"]
    assert again["content"].startswith("boot=")
    assert again["content"].split()[0] != who["content"].split()[0]  # another process
    assert server["state"] == "ready" and server["starts"] == 2
    assert server["transport"] == "stdio" and "mcpdemo.py" in server["target"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, DEMO, "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_an_http_server_asks_for_approval_and_filters_its_tools(tmp_path, http_server):
    model = ScriptedModel({"add": [("mcp__web__add", {"a": 40, "b": 2})],
                           "deny": [("mcp__web__add", {"a": 1, "b": 1})],
                           "finite": [("mcp__web__add", {"a": 0, "b": 0})],
                           "shout": [("mcp__web__shout", {"text": "trusted"})]})
    servers = {"web": {"url": http_server, "headers": {"X-Demo": "1"},
                       "tools": {"allow": ["add", "shout"]}}}
    approvals = {"mode": "ask", "allow": ["mcp__web__shout *"]}
    async with owner(tmp_path, model, servers, approvals=approvals) as (home, peer, sid):
        r = await peer.result("prompt.submit", session_id=sid, input_id="a1", text="add them")
        asked = await peer.wait_event(lambda e: e["type"] == "approval.requested")
        assert asked["payload"]["subject"] == 'mcp__web__add {"a":40,"b":2}'
        assert asked["payload"]["tool"] == "mcp__web__add"
        await peer.result("approval.respond", session_id=sid, decision="once",
                          approval_id=asked["payload"]["approval_id"])
        await peer.wait_terminal(sid, r["admission_id"])
        r = await peer.result("prompt.submit", session_id=sid, input_id="a2", text="deny it")
        asked = await peer.wait_event(lambda e: e["type"] == "approval.requested"
                                      and "deny" not in e["payload"]["subject"]
                                      and e["payload"]["approval_id"] != asked["payload"][
                                          "approval_id"])
        await peer.result("approval.respond", session_id=sid, decision="deny",
                          approval_id=asked["payload"]["approval_id"], reason="not today")
        await peer.wait_terminal(sid, r["admission_id"])
        # nobody can answer a finite turn: approvals.unattended (deny) decides
        await turn(peer, sid, "finite turn", "a3", finite=True)
        # an allow rule trusts one tool: no prompt
        await turn(peer, sid, "shout it", "a4")
        prompts = [e for e in peer.events if e["type"] == "approval.requested"]
        described = (await peer.result("runtime.describe"))["mcp_servers"]
    [added] = tool_results(model, "add")
    [denied] = tool_results(model, "deny")
    [unattended] = tool_results(model, "finite")
    assert added["content"] == "42"
    assert denied["denied"] is True and "not today" in denied["error"]
    assert unattended["denied"] is True and "unattended" in unattended["error"]
    [shouted] = tool_results(model, "shout")
    assert shouted["content"] == "TRUSTED!" and len(prompts) == 2
    assert set(offered(model, "add")) >= {"mcp__web__add", "mcp__web__shout"}
    assert not any(n.startswith("mcp__web__") and n not in ("mcp__web__add", "mcp__web__shout")
                   for n in offered(model, "add"))
    [web] = described
    assert web["transport"] == "http" and web["state"] == "ready"
    assert sorted(t["tool"] for t in web["tools"]) == ["add", "shout"]


async def test_a_server_that_will_not_start_is_a_tool_error_and_the_owner_works_on(tmp_path):
    broken = {"command": sys.executable,
              "args": ["-c", "import sys; print('no API token configured', file=sys.stderr); "
                             "sys.exit(1)"]}
    pidfile = tmp_path / "hung.pid"
    # a server that never answers (sh starts at once even on a busy machine); outside
    # the sandbox, to leave its pid where the test can see it
    hung = {"command": "sh", "timeout_seconds": 2, "sandbox": False,
            "args": ["-c", f"echo $$ > '{pidfile}'; exec sleep 120"]}
    model = ScriptedModel({"try": [("mcp__broken__search", {"q": "x"}),
                                   ("mcp__demo__add", {"a": 1, "b": 1}),
                                   ("mcp__hung__anything", {})]})
    servers = {"broken": broken, "demo": stdio_server(), "hung": hung,
               "off": {**stdio_server(), "enabled": False}}
    async with owner(tmp_path, model, servers) as (home, peer, sid):
        await turn(peer, sid, "try both", "b1")
        listed = {s["name"]: s for s in (await peer.result("mcp.list"))["servers"]}
        tools = await peer.call("mcp.tools", server="nope")
    failed, added, timed_out = tool_results(model, "try")
    assert "did not finish starting within 2 s" in timed_out["error"]
    hung_pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # the owner ended the server it gave up on
        os.kill(hung_pid, 0)
    assert failed["unavailable"] is True
    assert "'broken' is not available" in failed["error"]
    assert "no API token configured" in failed["error"]
    assert "tries again in" in failed["error"]
    assert added["content"] == "2"
    assert not any(n.startswith(("mcp__broken", "mcp__off")) for n in offered(model, "try"))
    assert listed["broken"]["state"] == "failed" and listed["broken"]["retry_at"]
    assert listed["off"]["state"] == "disabled" and listed["off"]["starts"] == 0
    assert tools["error"]["code"] == -32602 and "broken" in str(tools["error"]["data"])


async def test_a_server_that_failed_to_start_is_retried_in_the_background(tmp_path):
    flag = tmp_path / "ready-now"
    # outside the sandbox: it looks for the flag in the test's (private to it) /tmp
    late = {"command": sys.executable, "sandbox": False, "args": ["-c", (
        "import os, runpy, sys\n"
        f"os.path.exists({str(flag)!r}) or sys.exit('not configured yet')\n"
        f"sys.argv = [{DEMO!r}]\n"
        f"runpy.run_path({DEMO!r}, run_name='__main__')\n")]}
    model = ScriptedModel({"first": [("mcp__late__add", {"a": 1, "b": 2})],
                           "kick": [("mcp__late__add", {"a": 1, "b": 2})],
                           "third": [("mcp__late__add", {"a": 1, "b": 2})]})
    # a server outside the sandbox: auto mode asks for its calls, unless a rule trusts it
    approvals = {"mode": "auto", "allow": ["mcp__late__*"]}
    async with owner(tmp_path, model, {"late": late}, approvals=approvals) as (home, peer, sid):
        await turn(peer, sid, "first try", "r1")
        flag.touch()
        await asyncio.sleep(1.1)  # past the first backoff (1 s)
        await turn(peer, sid, "kick off a retry", "r2")  # does not wait for it
        deadline = time.monotonic() + 30
        while (await peer.result("mcp.list"))["servers"][0]["state"] != "ready":
            assert time.monotonic() < deadline, "the server was not retried"
            await asyncio.sleep(0.1)
        await turn(peer, sid, "third time", "r3")
    [first] = tool_results(model, "first")
    [third] = tool_results(model, "third")
    assert "not configured yet" in first["error"]
    assert third["content"] == "3"
