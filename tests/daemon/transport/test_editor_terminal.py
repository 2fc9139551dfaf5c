"""terminal.offer / terminal.request / terminal.respond over the real socket of a real
owner: a sandboxed command is asked of the offering connection only, as the sandbox's
argv; only it may answer, with what the step gives; a refused create runs the command
in the owner; a withdrawn offer, no sandbox, or an escalation never reach the editor."""

from __future__ import annotations

import os

import pytest
from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, sandbox_missing, write_config
from toolscript import ScriptedModel, tool_results


def _script() -> ScriptedModel:
    return ScriptedModel({"run": [("terminal", {"command": "echo hello"})]})


async def test_the_offering_connection_is_asked_for_the_sandbox_s_argv(tmp_path):
    why = sandbox_missing()
    if why:
        pytest.skip(why)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    model = _script()
    with FakeProvider(model) as provider:
        write_config(home, provider.url, approvals={"mode": "auto"})
        with OwnerProcess(home):
            async with await Peer.connect(home) as other, await Peer.connect(home) as editor:
                sid = (await editor.result("session.create", cwd=str(work)))["session_id"]
                offered = await editor.result("terminal.offer", session_id=sid)
                missing = await editor.call("terminal.offer", session_id="ses_nope")
                one = await other.result("prompt.submit", session_id=sid, input_id="one",
                                         text="run one")
                asked = await editor.wait_event(lambda e: e["type"] == "terminal.request")
                rid = asked["payload"]["request_id"]
                stolen = await other.call("terminal.respond", request_id=rid,
                                          terminal_id="t-1")
                empty = await editor.call("terminal.respond", request_id=rid)
                taken = await editor.result("terminal.respond", request_id=rid,
                                            error="no terminals here", refused=True)
                again = await editor.call("terminal.respond", request_id=rid, terminal_id="t")
                await other.wait_terminal(sid, one["admission_id"])
                first = tool_results(model, "run one")
                withdrawn = await editor.result("terminal.offer", session_id=sid, run=False)
                two = await other.result("prompt.submit", session_id=sid, input_id="two",
                                         text="run two")
                await other.wait_terminal(sid, two["admission_id"])
                second = tool_results(model, "run two")
    assert offered == {"session_id": sid, "run": True}
    assert missing["error"]["data"]["reason"] == "not_found"
    p = asked["payload"]
    assert asked["seq"] is None and asked["admission_id"] == one["admission_id"]
    assert p["op"] == "create" and p["call_id"] == "call_0"
    assert os.path.basename(p["command"]) == "bwrap" and p["args"][0] == "--clearenv"
    assert p["args"][-5:] == ["/bin/sh", "-c", 'exec /bin/sh -c "$1" </dev/null', "sh",
                              "echo hello"]
    assert p["cwd"] == os.path.realpath(work) and p["output_byte_limit"] == 80_000
    # the environment is the allowlist, also set inside the sandbox by the argv itself
    assert p["env"]["TETHER_TOOL_PROCESS"] == "1" and "OPENAI_API_KEY" not in p["env"]
    i = p["args"].index("TETHER_COMMAND")
    assert p["args"][i - 1] == "--setenv" and p["args"][i + 1] == p["env"]["TETHER_COMMAND"]
    assert stolen["error"]["data"]["reason"] == "forbidden"
    assert empty["error"]["data"]["reason"] == "invalid_params"
    assert taken == {"status": "taken"}
    assert again["error"]["data"]["reason"] == "not_found"
    # refused: nothing started in the editor, so the owner ran it
    assert first[0]["exit_code"] == 0 and first[0]["output"] == "hello\n"
    assert withdrawn == {"session_id": sid, "run": False}
    assert second[0]["output"] == "hello\n"
    assert len([e for e in editor.events if e["type"] == "terminal.request"]) == 1
    assert not [e for e in other.events if e["type"] == "terminal.request"]


async def test_commands_without_a_sandbox_never_go_to_the_editor(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    model = _script()
    with FakeProvider(model) as provider:
        write_config(home, provider.url, approvals={"mode": "never"},
                     sandbox={"mode": "off"})
        with OwnerProcess(home):
            async with await Peer.connect(home) as editor:
                sid = (await editor.result("session.create", cwd=str(work)))["session_id"]
                offered = await editor.result("terminal.offer", session_id=sid)
                one = await editor.result("prompt.submit", session_id=sid, input_id="one",
                                          text="run one")
                await editor.wait_terminal(sid, one["admission_id"])
    assert offered["run"] is True
    [ran] = tool_results(model, "run one")
    assert ran["sandbox"] == "none" and ran["output"] == "hello\n"
    assert not [e for e in editor.events if e["type"] == "terminal.request"]
