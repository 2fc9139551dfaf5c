"""fs.offer / fs.request / fs.respond over the real socket of a real owner: the file tools
ask only the connection that offered, only it may answer (once, in time), and a silent
or gone editor leaves the tool on the disk within tools.editor_fs_timeout_seconds."""

from __future__ import annotations

import asyncio
import time

from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, write_config
from toolscript import ScriptedModel, tool_results

TIMEOUT = 1.0


async def _run(peer: Peer, sid: str, text: str) -> dict:
    r = await peer.result("prompt.submit", session_id=sid, input_id=text, text=text)
    return r


async def test_only_the_offering_connection_answers_and_a_silent_one_falls_back(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "buf.txt").write_text("on disk\n")
    model = ScriptedModel({"read": [("read_file", {"path": "buf.txt"})]})
    with FakeProvider(model) as provider:
        write_config(home, provider.url, tools={"editor_fs_timeout_seconds": TIMEOUT})
        with OwnerProcess(home):
            async with await Peer.connect(home) as other:
                editor = await Peer.connect(home)
                sid = (await editor.result("session.create", cwd=str(work)))["session_id"]
                await other.result("session.resume", session_id=sid)
                offered = await editor.result("fs.offer", session_id=sid, read=True)
                missing = await editor.call("fs.offer", session_id="ses_nope", read=True)
                # answered by the editor: the tool reads its text
                one = await _run(other, sid, "read one")
                asked = await editor.wait_event(lambda e: e["type"] == "fs.request")
                rid = asked["payload"]["request_id"]
                stolen = await other.call("fs.respond", request_id=rid, text="not mine\n")
                taken = await editor.result("fs.respond", request_id=rid, text="in buffer\n")
                again = await editor.call("fs.respond", request_id=rid, text="twice\n")
                unknown = await editor.call("fs.respond", request_id="fsr_nope", text="x")
                await other.wait_terminal(sid, one["admission_id"])
                first = tool_results(model, "read one")
                # a silent editor: the disk, after the timeout
                started = time.monotonic()
                two = await _run(other, sid, "read two")
                late = await editor.wait_event(lambda e: e["type"] == "fs.request"
                                               and e["payload"]["request_id"] != rid)
                await other.wait_terminal(sid, two["admission_id"])
                silent = time.monotonic() - started
                expired = await editor.call("fs.respond", request_id=late["payload"]
                                            ["request_id"], text="too late\n")
                second = tool_results(model, "read two")
                # the offer ends with its connection: the disk at once
                await editor.ws.close()
                await asyncio.sleep(0.2)
                started = time.monotonic()
                three = await _run(other, sid, "read three")
                await other.wait_terminal(sid, three["admission_id"])
                gone = time.monotonic() - started
                third = tool_results(model, "read three")
    assert offered == {"session_id": sid, "read": True, "write": False}
    assert missing["error"]["data"]["reason"] == "not_found"
    assert asked["seq"] is None and asked["session_id"] == sid
    assert asked["admission_id"] == one["admission_id"]
    assert asked["payload"]["op"] == "read"
    assert asked["payload"]["path"] == str(work / "buf.txt")
    assert stolen["error"]["data"]["reason"] == "forbidden"
    assert taken == {"status": "taken"}
    assert again["error"]["data"]["reason"] == "not_found"
    assert unknown["error"]["data"]["reason"] == "not_found"
    assert "in buffer" in first[0]["content"] and "not mine" not in first[0]["content"]
    assert "on disk" in second[0]["content"]
    assert TIMEOUT * 0.9 <= silent < TIMEOUT + 10
    assert expired["error"]["data"]["reason"] == "not_found"
    assert "on disk" in third[0]["content"] and gone < TIMEOUT
    # the notice went to the connection that offered, never to another viewer
    assert not [e for e in other.events if e["type"] == "fs.request"]
    assert (work / "buf.txt").read_text() == "on disk\n"


async def test_the_newest_offer_wins_and_a_withdrawn_one_asks_nobody(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "buf.txt").write_text("on disk\n")
    model = ScriptedModel({"read": [("read_file", {"path": "buf.txt"})]})
    with FakeProvider(model) as provider:
        write_config(home, provider.url, tools={"editor_fs_timeout_seconds": TIMEOUT})
        with OwnerProcess(home):
            async with await Peer.connect(home) as old, await Peer.connect(home) as new:
                sid = (await old.result("session.create", cwd=str(work)))["session_id"]
                await old.result("fs.offer", session_id=sid, read=True, write=True)
                await new.result("fs.offer", session_id=sid, read=True)
                withdrawn_by_old = await old.result("fs.offer", session_id=sid)
                one = await _run(old, sid, "read one")
                asked = await new.wait_event(lambda e: e["type"] == "fs.request")
                await new.result("fs.respond", request_id=asked["payload"]["request_id"],
                                 text="newest\n")
                await old.wait_terminal(sid, one["admission_id"])
                withdrawn = await new.result("fs.offer", session_id=sid)
                started = time.monotonic()
                two = await _run(old, sid, "read two")
                await old.wait_terminal(sid, two["admission_id"])
                quick = time.monotonic() - started
    # the old connection's withdrawal does not touch the newer offer
    assert withdrawn_by_old == {"session_id": sid, "read": False, "write": False}
    assert "newest" in tool_results(model, "read one")[0]["content"]
    assert not [e for e in old.events if e["type"] == "fs.request"]
    assert withdrawn == {"session_id": sid, "read": False, "write": False}
    assert "on disk" in tool_results(model, "read two")[0]["content"] and quick < TIMEOUT
