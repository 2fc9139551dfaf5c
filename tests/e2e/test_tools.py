"""The terminal and file tools through the real owner, with a scripted model."""

from __future__ import annotations

import json

from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, clean_env, write_config
from toolscript import ScriptedModel, tool_results

SECRET = "sk-THE-OWNERS-KEY-42"
TOKEN = "ghp_not_for_commands_77"


async def test_edit_a_file_and_run_a_command_end_to_end(tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    model = ScriptedModel({
        "edit": [("read_file", {"path": "notes.txt"}),
                 ("edit_file", {"path": "notes.txt", "old": "beta", "new": "BETA"}),
                 ("terminal", {"command": "cat notes.txt; echo done-$((40+2))"})],
        "env": [("terminal", {"command": "env"})],
    })
    home = tmp_path / "home"
    with FakeProvider(model) as provider:
        # mode auto: writes inside the cwd and non-dangerous commands need no answer
        write_config(home, provider.url, model={"api_key": SECRET},
                     approvals={"mode": "auto"})
        env = clean_env(home, MY_SERVICE_TOKEN=TOKEN, HARMLESS_SETTING="visible-value")
        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="e1",
                                      text="edit the notes")
                done = await peer.wait_terminal(sid, r["admission_id"])
                r2 = await peer.result("prompt.submit", session_id=sid, input_id="e2",
                                       text="env please")
                done2 = await peer.wait_terminal(sid, r2["admission_id"])
                events = await peer.all_events(sid)

    assert done["outcome"] == "completed" and done2["outcome"] == "completed"
    assert (work / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"
    read, edit, run = tool_results(model, "edit")
    assert "     2\tbeta" in read["content"]
    assert edit["replacements"] == 1 and edit["path"] == str(work / "notes.txt")
    assert run["exit_code"] == 0 and "BETA" in run["output"] and "done-42" in run["output"]
    # viewers see what was done: the command or path, and a short result
    starts = [e["payload"] for e in events if e["type"] == "tool.start"]
    completes = [e["payload"] for e in events if e["type"] == "tool.complete"]
    assert starts[0]["subject"] == "notes.txt"
    assert starts[2]["subject"] == "cat notes.txt; echo done-$((40+2))"
    assert completes[2]["summary"].startswith("exit 0")
    assert completes[1]["summary"].startswith("edited ")
    # the command ran in the session's cwd, without the owner's secrets
    [printed] = tool_results(model, "env")
    assert f"PWD={work}" in printed["output"] or str(work) in printed["output"]
    assert "HARMLESS_SETTING=visible-value" in printed["output"]
    assert SECRET not in printed["output"] and TOKEN not in printed["output"]
    assert "OPENAI" not in printed["output"] and "TETHER_HOME" not in printed["output"]
    assert SECRET not in json.dumps(events)


async def test_a_foreground_command_is_killed_at_its_timeout(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    model = ScriptedModel({"slow": [("terminal", {
        "command": "echo started; sleep 30 & sleep 30; echo never", "timeout_s": 1})]})
    home = tmp_path / "home"
    with FakeProvider(model) as provider:
        write_config(home, provider.url, approvals={"mode": "never"})
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="s",
                                      text="slow one")
                done = await peer.wait_terminal(sid, r["admission_id"])
    assert done["outcome"] == "completed"
    [res] = tool_results(model, "slow")
    assert res["timed_out"] is True and "started" in res["output"]
    assert "never" not in res["output"]
