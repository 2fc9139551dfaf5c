"""The agent cannot answer its own prompts: the real `tether approve`, run by a command
the agent started (and by one that slipped away with setsid), is refused
``forbidden`` and changes nothing; the same CLI run by the person works."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys

from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, until, write_config
from toolscript import ScriptedModel

TOUCH = "touch made-by-agent"


def watcher(home) -> str:
    """A background command that waits for the id of a prompt (the test writes it),
    then tries to answer it and to reach the other protected methods."""
    cli = f"{shlex.quote(sys.executable)} -m tether.clients.cli --home {shlex.quote(str(home))}"
    return (
        "i=0; while [ ! -s prompt-id ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; "
        "ID=$(cat prompt-id); "
        f"{cli} approve \"$ID\" --always > direct.out 2>&1; echo $? > direct.rc; "
        # a grandchild that leaves: orphaned (reparented to init) in a session of its own
        f"(setsid sh -c '{cli} approve \"$0\" --always > escaped.out 2>&1; "
        "echo $? > escaped.rc' \"$ID\" &); "
        f"{cli} token create > token.out 2>&1; echo $? > token.rc; "
        f"{cli} cron ls > cron.out 2>&1; echo $? > cron.rc; "
        f"{cli} stop > stop.out 2>&1; echo $? > stop.rc")


async def test_a_command_of_the_agent_cannot_approve_its_prompts(tmp_path, run_cli):
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    model = ScriptedModel({"go": [("terminal", {"command": watcher(home), "background": True}),
                                  ("terminal", {"command": TOUCH})]})
    with FakeProvider(model) as provider:
        # without the sandbox, which would hide the socket and the network from the
        # command altogether: the peer check is what refuses it here
        write_config(home, provider.url, approvals={"mode": "ask"}, sandbox={"mode": "off"})
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="g", text="go")
                first = (await peer.wait_event(lambda e: e["type"] == "approval.requested"))
                # the person lets the watcher run (once) ...
                await peer.result("approval.respond", session_id=sid, decision="once",
                                  approval_id=first["payload"]["approval_id"])
                second = await peer.wait_event(
                    lambda e: e["type"] == "approval.requested"
                    and e["payload"]["approval_id"] != first["payload"]["approval_id"])
                apr = second["payload"]["approval_id"]
                assert second["payload"]["subject"] == TOUCH
                # ... which then tries to answer the agent's next prompt itself
                (work / "prompt-id").write_text(apr)
                for name in ("direct", "escaped", "token", "cron", "stop"):
                    await until(lambda n=name: (work / f"{n}.rc").exists()
                                and (work / f"{n}.rc").read_text().strip(), f"{name}.rc")
                pending = (await peer.result("approval.list", session_id=sid))["approvals"]
                rules = (await peer.result("approval.rules"))["rules"]
                tokens = (await peer.result("token.list"))["tokens"]
                assert not (work / "made-by-agent").exists()
                # the person, from their own terminal: the same command works
                done = await asyncio.to_thread(run_cli, home, "approve", apr)
                finished = await peer.wait_terminal(sid, r["admission_id"])
                rules_after = (await peer.result("approval.rules"))["rules"]

    for name in ("direct", "escaped", "token", "cron", "stop"):
        out = (work / f"{name}.out").read_text()
        assert (work / f"{name}.rc").read_text().strip() == "3", (name, out)
        assert "forbidden" in out and "agent" in out, (name, out)
    assert [p["approval_id"] for p in pending] == [apr]  # still waiting for the person
    assert [r for r in rules if r["source"] != "config"] == []
    assert tokens == []
    assert done.returncode == 0, done.stderr
    assert finished["outcome"] == "completed" and (work / "made-by-agent").exists()
    assert [r for r in rules_after if r["source"] != "config"] == []  # answered once


#: a command of the agent answering a prompt over the TCP listener with a token it found
TCP_CLIENT = """
import json, pathlib, sys, time
from websockets.sync.client import connect
here = pathlib.Path('.')
while not (here / 'tcp-target').exists():
    time.sleep(0.1)
url, token, sid, apr = (here / 'tcp-target').read_text().split()
with connect(url, additional_headers={'Authorization': 'Bearer ' + token}) as ws:
    ws.send(json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'approval.respond',
                        'params': {'session_id': sid, 'approval_id': apr,
                                   'decision': 'always'}}))
    (here / 'tcp-reply.json').write_text(ws.recv(timeout=60))
"""


async def test_the_tcp_listener_refuses_the_agents_process_too(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "client.py").write_text(TCP_CLIENT)
    home = tmp_path / "home"
    model = ScriptedModel({"go": [
        ("terminal", {"command": f"{shlex.quote(sys.executable)} client.py",
                      "background": True}),
        ("terminal", {"command": TOUCH})]})
    with FakeProvider(model) as provider:
        # without the sandbox, which would hide the socket and the network from the
        # command altogether: the peer check is what refuses it here
        write_config(home, provider.url, approvals={"mode": "ask"}, sandbox={"mode": "off"})
        with OwnerProcess(home, "--tcp", "127.0.0.1:0") as owner:
            url = owner.descriptor["tcp_url"]
            async with await Peer.connect(home) as peer:
                token = (await peer.result("token.create", label="found"))["token"]
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="g", text="go")
                first = (await peer.wait_event(lambda e: e["type"] == "approval.requested"))
                await peer.result("approval.respond", session_id=sid, decision="once",
                                  approval_id=first["payload"]["approval_id"])
                second = await peer.wait_event(
                    lambda e: e["type"] == "approval.requested"
                    and e["payload"]["approval_id"] != first["payload"]["approval_id"])
                apr = second["payload"]["approval_id"]
                (work / "tcp-target").write_text(f"{url} {token} {sid} {apr}")
                await until(lambda: (work / "tcp-reply.json").exists()
                            and (work / "tcp-reply.json").read_text(), "the tool's reply")
                pending = (await peer.result("approval.list", session_id=sid))["approvals"]
                # the person, over TCP with the same token: answered
                from websockets.asyncio.client import connect

                ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"})
                async with Peer(ws) as person:
                    answered = await person.result("approval.respond", session_id=sid,
                                                   approval_id=apr, decision="once")
                finished = await peer.wait_terminal(sid, r["admission_id"])

    reply = json.loads((work / "tcp-reply.json").read_text())
    assert reply["error"]["message"] == "forbidden" and reply["error"]["code"] == -32003
    assert "agent" in reply["error"]["data"]["detail"]
    assert [p["approval_id"] for p in pending] == [apr]
    assert answered["status"] == "resolved"
    assert finished["outcome"] == "completed" and (work / "made-by-agent").exists()
