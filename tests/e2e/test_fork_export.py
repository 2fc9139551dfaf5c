"""Fork and export through the real owner (docs/long-sessions.md).

One session with three turns: a tool call whose result has backticks in it, a
command that waited for (and got) an approval, and a plain answer. Its export
must hold every turn whole and load back as the same document; a fork at the
first turn's end must hold that turn only, leave the original alone, and go on
from there with the model seeing exactly that history.
"""

from __future__ import annotations

import subprocess
import sys

import orjson
from harness import Peer
from scene import Scene
from toolscript import ScriptedModel

from tether.rpc.models.history import ExportDocument

NOTES = "first line\n```python\nprint('fenced')\n```\nlast line"
TOUCH = "touch made-by-agent"


def cli(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether.clients.cli", *args],
                          env=scene.env(), capture_output=True, text=True, timeout=60,
                          check=False)


async def three_turns(peer: Peer, sid: str) -> list[str]:
    """read notes (a tool), make a file (approved), hello (text); their admission ids."""
    aids = []
    r = await peer.result("prompt.submit", session_id=sid, input_id="t1", text="read notes")
    aids.append(r["admission_id"])
    await peer.wait_terminal(sid, r["admission_id"])
    r = await peer.result("prompt.submit", session_id=sid, input_id="t2", text="make a file")
    aids.append(r["admission_id"])
    ev = await peer.wait_event(lambda e: e["type"] == "approval.requested")
    await peer.result("approval.respond", session_id=sid,
                      approval_id=ev["payload"]["approval_id"], decision="once")
    await peer.wait_terminal(sid, r["admission_id"])
    r = await peer.result("prompt.submit", session_id=sid, input_id="t3", text="hello")
    aids.append(r["admission_id"])
    await peer.wait_terminal(sid, r["admission_id"])
    return aids


async def test_export_holds_every_turn_and_round_trips_and_fork_cuts_at_a_turn(scene, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text(NOTES)
    model = ScriptedModel({"read": [("read_file", {"path": "notes.md"})],
                           "make": [("terminal", {"command": TOUCH})]})
    async with scene(model, session={"cwd": str(work), "title": "project"}) as s:
        peer, sid = s.peer, s.session_id
        aids = await three_turns(peer, sid)
        snap = await peer.result("session.resume", session_id=sid)

        out = await peer.result("session.export", session_id=sid, format="json")
        doc = out["document"]
        # the document validates, and loads back from its JSON text unchanged
        text = orjson.dumps(doc)
        assert ExportDocument.model_validate_json(text).model_dump(mode="json") == doc
        assert [t["admission_id"] for t in doc["turns"]] == aids
        assert [t["prompt"] for t in doc["turns"]] == ["read notes", "make a file",
                                                       "hello"]
        assert all(t["outcome"] == "completed" for t in doc["turns"])
        assert all(t["usage"].get("total_tokens") for t in doc["turns"])
        [read] = doc["turns"][0]["tool_calls"]
        assert read["name"] == "read_file" and NOTES.splitlines()[1] in read["result"]
        whole = [m["content"] for m in snap["messages"] if m["role"] == "tool"][0]
        assert read["result"] == whole  # the whole result, not the event's cut
        [approval] = doc["turns"][1]["approvals"]
        assert (approval["status"], approval["decision"]) == ("approved", "once")
        assert approval["subject"] == TOUCH
        assert doc["turns"][2]["answer"] == "ANSWER: hello"
        assert [m["content"] for m in doc["messages"]] == [
            m["content"] for m in snap["messages"]]
        assert doc["session"]["usage"]["requests"] == 5
        assert doc["last_seq"] == snap["last_seq"]

        md = (await peer.result("session.export", session_id=sid,
                                format="markdown"))["markdown"]
        assert md.startswith("# project (")
        assert "### Tool call `read_file`" in md and "print('fenced')" in md
        assert "````" in md  # a fence longer than the backticks inside the result
        assert "Approval" in md and TOUCH in md and "ANSWER: hello" in md

        # fork at the end of the first turn
        first_end = doc["turns"][0]["end_seq"]
        fork = await peer.result("session.fork", session_id=sid,
                                 at_seq=first_end + 1)
        assert fork["forked_at_seq"] == first_end and fork["forked_from"] == sid
        fsnap = await peer.result("session.resume", session_id=fork["session_id"])
        first_turn = [m for m in snap["messages"] if m["admission_id"] == aids[0]]
        assert fsnap["messages"] == first_turn
        assert fsnap["info"]["forked_from"] == sid
        assert fsnap["info"]["usage"]["requests"] == 0  # its own spending starts
        assert fsnap["last_seq"] == first_end
        refused = await peer.call("session.fork", session_id=sid,
                                  at_seq=snap["last_seq"] + 1)
        assert refused["error"]["data"]["reason"] == "invalid_params"
        # the fork goes on from its own history; the original is untouched
        r = await peer.result("prompt.submit", session_id=fork["session_id"],
                              input_id="f1", text="hello again")
        await peer.wait_terminal(fork["session_id"], r["admission_id"])
        seen = [m["content"] for m in model.requests[-1]["messages"]
                if m["role"] == "user"]
        assert seen == ["read notes", "hello again"]
        after = await peer.result("session.resume", session_id=sid)
        assert after["messages"] == snap["messages"]
        assert after["last_seq"] == snap["last_seq"]

        # the CLI: fork by prefix, export to a file, both formats
        forked = cli(s, "sessions", "fork", sid[4:12])
        assert forked.returncode == 0, forked.stderr
        whole_fork = forked.stdout.strip()
        target = tmp_path / "out.json"
        done = cli(s, "export", sid, "--format", "json", "-o", str(target))
        assert done.returncode == 0, done.stderr
        loaded = ExportDocument.model_validate_json(target.read_bytes())
        stored = [r[0] for r in s.rows("SELECT admission_id FROM session_admissions "
                                        "WHERE target_session_id = ? ORDER BY seq",
                                        sid)] if s.store_url is None else aids
        assert [t.admission_id for t in loaded.turns] == stored
        md = cli(s, "export", whole_fork)
        assert md.returncode == 0, md.stderr
        assert "forked from " + sid in md.stdout and "ANSWER: hello" in md.stdout
        bad = cli(s, "export", "ses_nope")
        assert bad.returncode == 2 and "no session" in bad.stderr

