"""The terminal and file tools through the real owner, with a scripted model."""

from __future__ import annotations

import json

import pytest
from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, write_config
from scene import owner_env
from toolscript import ScriptedModel, tool_results

SECRET = "sk-THE-OWNERS-KEY-42"
TOKEN = "ghp_not_for_commands_77"


async def test_edit_a_file_and_run_a_command_end_to_end(scene, tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    model = ScriptedModel({
        "edit": [("read_file", {"path": "notes.txt"}),
                 ("edit_file", {"path": "notes.txt", "old": "beta", "new": "BETA"}),
                 ("terminal", {"command": "cat notes.txt; echo done-$((40+2))"})],
        "env": [("terminal", {"command": "env"})],
    })
    env = {"MY_SERVICE_TOKEN": TOKEN, "HARMLESS_SETTING": "visible-value",
           "DB_PASS": "hunter2-db", "MYAPP_PW": "hunter2-app"}
    # mode auto: writes inside the cwd need no answer. Where no sandbox can be made
    # the policy fails closed (only one plain read-only command runs unasked), so
    # this list of two runs by the rule that allows exactly it, with or without one
    async with scene(model, session={"cwd": str(work)}, env=env, model={"api_key": SECRET},
                     approvals={"mode": "auto",
                                "allow": ["cat notes.txt; echo done-$((40+2))"]},
                     sandbox={"env_allow": ["HARMLESS_*"]}) as s:
        peer, sid = s.peer, s.session_id
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
    # and a preview to show under it: the edit's diff, the command's last lines
    assert completes[1]["preview"] == ("--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n"
                                       " alpha\n-beta\n+BETA\n gamma")
    assert edit["diff"] == completes[1]["preview"]  # the model sees what it changed too
    assert completes[2]["preview"] == "alpha\nBETA\ngamma\ndone-42"
    assert "preview" not in completes[0]  # a read shows nothing more
    # the command ran in the session's cwd, with an allowlist of the owner's environment
    [printed] = tool_results(model, "env")
    assert f"PWD={work}" in printed["output"] or str(work) in printed["output"]
    assert "HARMLESS_SETTING=visible-value" in printed["output"]  # sandbox.env_allow
    assert "hunter2" not in printed["output"]  # DB_PASS, MYAPP_PW: no name a denylist knows
    assert SECRET not in printed["output"] and TOKEN not in printed["output"]
    assert "OPENAI" not in printed["output"] and "TETHER_HOME" not in printed["output"]
    assert SECRET not in json.dumps(events)


async def test_a_foreground_command_is_killed_at_its_timeout(scene, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    model = ScriptedModel({"slow": [("terminal", {
        "command": "echo started; sleep 30 & sleep 30; echo never", "timeout_s": 1})]})
    async with scene(model, session={"cwd": str(work)}, approvals={"mode": "never"}) as s:
        peer, sid = s.peer, s.session_id
        r = await peer.result("prompt.submit", session_id=sid, input_id="s",
                              text="slow one")
        done = await peer.wait_terminal(sid, r["admission_id"])
    assert done["outcome"] == "completed"
    [res] = tool_results(model, "slow")
    assert res["timed_out"] is True and "started" in res["output"]
    assert "never" not in res["output"]


async def test_the_file_tools_page_search_list_and_refuse_unclear_edits(scene, tmp_path):
    work = tmp_path / "w"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("x = 1\nx = 1\nneedle = 2\n")
    (work / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 51)))
    model = ScriptedModel({"files": [
        ("read_file", {"path": "long.txt", "offset": 10, "limit": 5}),
        ("edit_file", {"path": "src/a.py", "old": "x = 1", "new": "x = 2"}),
        ("edit_file", {"path": "src/a.py", "old": "y = 1", "new": "x = 2"}),
        ("search_files", {"pattern": "need+le", "glob": "*.py"}),
        ("list_dir", {"path": "."}),
        ("read_file", {"path": "missing.txt"}),
        ("write_file", {"path": "new/dir/b.txt", "content": "hello"}),
    ]})
    async with scene(model, session={"cwd": str(work)}, approvals={"mode": "auto"}) as s:
        peer, sid = s.peer, s.session_id
        r = await peer.result("prompt.submit", session_id=sid, input_id="f",
                              text="files tour")
        await peer.wait_terminal(sid, r["admission_id"])
    paged, twice, absent, found, listing, missing, written = tool_results(model, "files")
    assert paged["content"].splitlines()[0] == "    10\tline 10"
    assert len(paged["content"].splitlines()) == 5 and "offset=15" in paged["lines"]
    assert "occurs 2 times" in twice["error"] and "was not found" in absent["error"]
    assert (work / "src" / "a.py").read_text() == "x = 1\nx = 1\nneedle = 2\n"
    assert found["matches"] == [f"{work}/src/a.py:3:needle = 2"]
    assert {"name": "src/", "size": None} in listing["entries"]
    assert "No such file" in missing["error"]
    assert written["created"] is True and (work / "new/dir/b.txt").read_text() == "hello"


async def test_a_background_process_is_managed_with_the_process_tool(scene, tmp_path):
    work = tmp_path / "w"
    work.mkdir()

    def pid(results):
        return results[0]["process_id"]

    model = ScriptedModel({"bg": [
        ("terminal", {"command": "echo ready; read x; echo got-$x", "background": True}),
        ("process", lambda rs: {"action": "write", "id": pid(rs), "data": "hello\n"}),
        ("process", lambda rs: {"action": "wait", "id": pid(rs), "timeout_s": 60}),
        ("terminal", {"command": "sleep 60", "background": True}),
        ("process", lambda rs: {"action": "list"}),
        ("process", lambda rs: {"action": "kill", "id": rs[3]["process_id"]}),
        ("process", lambda rs: {"action": "log", "id": pid(rs), "offset": 0}),
        ("process", lambda rs: {"action": "poll", "id": "proc_nope"}),
    ]})
    async with scene(model, session={"cwd": str(work)}, approvals={"mode": "never"}) as s:
        peer, sid = s.peer, s.session_id
        r = await peer.result("prompt.submit", session_id=sid, input_id="b",
                              text="bg work")
        await peer.wait_terminal(sid, r["admission_id"])
    started, wrote, waited, sleeper, listed, killed, log, unknown = tool_results(model, "bg")
    assert started["state"] == "running" and wrote["written"] == 6
    assert waited["state"] == "exited" and waited["exit_code"] == 0
    assert {p["process_id"] for p in listed["processes"]} == {started["process_id"],
                                                             sleeper["process_id"]}
    assert killed["state"] == "killed"
    assert "ready" in log["output"] and "got-hello" in log["output"] and log["from"] == 0
    assert "no process" in unknown["error"]


async def test_toolsets_offer_the_tools_they_name(scene):
    model = ScriptedModel({})
    async with scene(model, session=False) as s:
        peer = s.peer
        described = await peer.result("runtime.describe")
        for i, toolsets in enumerate((None, ["files"], ["terminal"], [])):
            opts = {} if toolsets is None else {"toolsets": toolsets}
            sid = (await peer.result("session.create", **opts))["session_id"]
            r = await peer.result("prompt.submit", session_id=sid, input_id=f"t{i}",
                                  text=f"hello {i}")
            await peer.wait_terminal(sid, r["admission_id"])
        bad = await peer.call("session.create", toolsets=["shell"])
    offered = [sorted(t["function"]["name"] for t in req.get("tools") or [])
               for req in model.requests]
    assert described["toolsets"] == ["terminal", "files", "delegation", "mcp"]
    assert offered == [
        sorted(["terminal", "process", "read_file", "write_file", "edit_file", "search_files",
                "list_dir", "delegate_task"]),
        ["edit_file", "list_dir", "read_file", "search_files", "write_file"],
        ["process", "terminal"],
        [],
    ]
    assert bad["error"]["message"] == "invalid_params"


@pytest.mark.sqlite_only("the file tools' rules, not the store")
async def test_the_owners_home_and_process_are_refused_to_the_file_tools(tmp_path, store_url):
    work = tmp_path / "w"
    work.mkdir()
    home = tmp_path / "home"
    config = str(home / "config.yaml")
    model = ScriptedModel({"peek": [
        ("read_file", {"path": config}),
        ("write_file", {"path": config, "content": "model: {}\n"}),
        ("edit_file", {"path": config, "old": "api_key", "new": "x"}),
        ("read_file", {"path": "/proc/self/environ"}),
        ("search_files", {"pattern": "sk-", "path": str(home)}),
    ]})
    with FakeProvider(model) as provider:
        write_config(home, provider.url, model={"api_key": SECRET}, approvals={"mode": "ask"})
        before = (home / "config.yaml").read_text()
        with OwnerProcess(home, env={**owner_env(home, store_url), "OPENAI_API_KEY": SECRET}):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="p",
                                      text="peek at the owner")
                done = await peer.wait_terminal(sid, r["admission_id"])
                events = await peer.all_events(sid)
    assert done["outcome"] == "completed"
    results = tool_results(model, "peek")
    assert [res.get("refused") for res in results] == ["forbidden"] * 5, results
    assert not [e for e in events if e["type"] == "approval.requested"]  # never asked
    assert (home / "config.yaml").read_text() == before
    assert SECRET not in json.dumps(events) and SECRET not in json.dumps(results)
