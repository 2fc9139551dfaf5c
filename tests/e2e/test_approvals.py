"""Approvals through the real owner: durable prompts any viewer answers, exactly once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from harness import OwnerProcess, Peer
from scene import Scene
from toolscript import ScriptedModel, tool_results

TOUCH = "touch made-by-agent"


def script() -> ScriptedModel:
    return ScriptedModel({
        "make": [("terminal", {"command": TOUCH})],
        "again": [("terminal", {"command": TOUCH})],
        "format": [("terminal", {"command": "mkfs.ext4 /nonexistent/tether-test-disk"})],
        "write outside": [("write_file", {"path": "../outside.txt", "content": "x"})],
    })


@contextlib.asynccontextmanager
async def approving(scene: Callable[..., Any], tmp_path: Path, model: ScriptedModel,
                    **approvals: Any,
                    ) -> AsyncIterator[tuple[Scene, Path, OwnerProcess, Peer, str]]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    async with scene(model, session={"cwd": str(work)}, approvals=approvals) as s:
        yield s, work, s.owner, s.peer, s.session_id


def requested(e: dict) -> bool:
    return e["type"] == "approval.requested"


async def submit(peer: Peer, sid: str, text: str, input_id: str, **kw: Any) -> str:
    r = await peer.result("prompt.submit", session_id=sid, input_id=input_id, text=text, **kw)
    return r["admission_id"]


async def test_a_late_viewer_sees_the_pending_prompt_and_answers_it(scene, tmp_path):
    model = script()
    async with approving(scene, tmp_path, model) as (s, work, owner, peer, sid):
        aid = await submit(peer, sid, "make a file", "m1")
        ev = await peer.wait_event(requested)
        assert ev["payload"]["subject"] == TOUCH and ev["payload"]["kind"] == "command"
        # the turn is visibly waiting
        await peer.wait_event(lambda e: e["type"] == "session.info"
                              and e["payload"].get("awaiting_approval"))
        assert not (work / "made-by-agent").exists()
        async with await s.connect() as late:
            snap = await late.result("session.resume", session_id=sid)
            [prompt] = snap["approvals"]
            assert prompt["approval_id"] == ev["payload"]["approval_id"]
            assert prompt["status"] == "pending" and prompt["subject"] == TOUCH
            out = await late.result("approval.respond", session_id=sid,
                                    approval_id=prompt["approval_id"], decision="once")
            assert out["status"] == "resolved" and out["approval"]["status"] == "approved"
        done = await peer.wait_terminal(sid, aid)
        resolved = await peer.wait_event(lambda e: e["type"] == "approval.resolved")
    assert done["outcome"] == "completed"
    assert (work / "made-by-agent").exists()
    assert resolved["payload"]["cause"] == "answered"
    assert resolved["payload"]["decision"] == "once"
    [res] = tool_results(model, "make")
    assert res["exit_code"] == 0


async def test_two_viewers_answer_at_once_and_exactly_one_wins(scene, tmp_path):
    async with approving(scene, tmp_path, script()) as (s, work, owner, peer, sid):
        aid = await submit(peer, sid, "make a file", "m1")
        apr = (await peer.wait_event(requested))["payload"]["approval_id"]
        async with await s.connect() as other:
            a, b = await asyncio.gather(
                peer.result("approval.respond", session_id=sid, approval_id=apr,
                            decision="deny", reason="not now"),
                other.result("approval.respond", session_id=sid, approval_id=apr,
                             decision="once"))
        await peer.wait_terminal(sid, aid)
        late = await peer.result("approval.respond", session_id=sid, approval_id=apr,
                                 decision="once")
    statuses = sorted([a["status"], b["status"]])
    assert statuses == ["already_resolved", "resolved"]
    winner = a if a["status"] == "resolved" else b
    assert late["status"] == "already_resolved"
    assert late["approval"]["decision"] == winner["approval"]["decision"]
    ran = (work / "made-by-agent").exists()
    assert ran == (winner["approval"]["decision"] == "once")


async def test_silence_is_not_consent(scene, tmp_path):
    model = script()
    async with approving(scene, tmp_path, model, timeout_seconds=1) as (s, work, owner, peer, sid):
        aid = await submit(peer, sid, "make a file", "m1")
        done = await peer.wait_terminal(sid, aid)
        resolved = await peer.wait_event(lambda e: e["type"] == "approval.resolved")
    assert done["outcome"] == "completed"
    assert resolved["payload"]["cause"] == "timeout"
    [res] = tool_results(model, "make")
    assert res["denied"] is True and "silence is not consent" in res["error"]
    assert not (work / "made-by-agent").exists()
    assert s.rows("SELECT status, cause FROM approvals") == [("expired", "timeout")]


async def test_an_interrupt_cancels_the_pending_prompt(scene, tmp_path):
    async with approving(scene, tmp_path, script()) as (s, work, owner, peer, sid):
        aid = await submit(peer, sid, "make a file", "m1")
        apr = (await peer.wait_event(requested))["payload"]["approval_id"]
        out = await peer.result("session.interrupt", session_id=sid)
        assert out["interrupted"] is True
        done = await peer.wait_terminal(sid, aid)
        resolved = await peer.wait_event(lambda e: e["type"] == "approval.resolved")
        late = await peer.result("approval.respond", session_id=sid, approval_id=apr,
                                 decision="once")
    assert done["outcome"] == "cancelled"
    assert resolved["payload"]["cause"] == "interrupted"
    assert late["status"] == "already_resolved"
    assert late["approval"]["status"] == "cancelled"
    assert not (work / "made-by-agent").exists()


async def test_a_crash_while_pending_cancels_the_prompt_and_nothing_ran(scene, tmp_path):
    async with approving(scene, tmp_path, script()) as (s, work, owner, peer, sid):
        await submit(peer, sid, "make a file", "m1")
        apr = (await peer.wait_event(requested))["payload"]["approval_id"]
        owner.kill()
    with OwnerProcess(s.home, env=s.env()):
        async with await Peer.connect(s.home) as peer:
            snap = await peer.result("session.resume", session_id=sid, after_seq=0)
            late = await peer.result("approval.respond", session_id=sid, approval_id=apr,
                                     decision="once")
            pending = await peer.result("approval.list")
    assert snap["approvals"] == [] and pending["approvals"] == []
    assert late["status"] == "already_resolved"
    assert late["approval"]["status"] == "cancelled"
    assert late["approval"]["cause"] == "shutdown"
    resolved = [e for e in snap["events"] if e["type"] == "approval.resolved"]
    assert [e["payload"]["cause"] for e in resolved] == ["shutdown"]
    assert not (work / "made-by-agent").exists()


async def test_the_hard_line_is_refused_whatever_the_rules(scene, tmp_path):
    model = script()
    async with approving(scene, tmp_path, model, mode="never", allow=["*", "mkfs*"],
                     unattended="allow") as (s, work, owner, peer, sid):
        aid = await submit(peer, sid, "format the disk", "f1")
        done = await peer.wait_terminal(sid, aid)
    assert done["outcome"] == "completed"
    [res] = tool_results(model, "format")
    assert res["denied"] is True and "hard line" in res["error"]
    assert s.rows("SELECT count(*) FROM approvals") == [(0,)]


async def test_an_always_answer_applies_next_time_without_asking(scene, tmp_path):
    async with approving(scene, tmp_path, script()) as (s, work, owner, peer, sid):
        aid = await submit(peer, sid, "make a file", "m1")
        apr = (await peer.wait_event(requested))["payload"]["approval_id"]
        await peer.result("approval.respond", session_id=sid, approval_id=apr,
                          decision="always")
        await peer.wait_terminal(sid, aid)
        (work / "made-by-agent").unlink()
        # another session, same command: the remembered answer covers it
        sid2 = (await peer.result("session.create", cwd=str(work)))["session_id"]
        aid2 = await submit(peer, sid2, "again please", "a1")
        done = await peer.wait_terminal(sid2, aid2)
        rules = (await peer.result("approval.rules"))["rules"]
    assert done["outcome"] == "completed"
    assert (work / "made-by-agent").exists()
    assert s.rows("SELECT count(*) FROM approvals") == [(1,)]
    [rule] = [r for r in rules if r["source"] == "always"]
    assert rule["pattern"] == TOUCH and rule["rule_id"].startswith("rul_")


async def test_a_finite_turn_never_asks_and_denies_per_policy(scene, tmp_path):
    model = script()
    async with approving(scene, tmp_path, model) as (s, work, owner, peer, sid):
        aid = await submit(peer, sid, "make a file", "m1", finite=True)
        done = await peer.wait_terminal(sid, aid)
        aid2 = await submit(peer, sid, "write outside the cwd", "w1", finite=True)
        await peer.wait_terminal(sid, aid2)
    assert done["outcome"] == "completed"
    [res] = tool_results(model, "make")
    assert res["denied"] is True and "unattended" in res["error"]
    [res2] = tool_results(model, "write outside")
    assert res2["denied"] is True and "outside" in res2["error"]
    assert not (work / "made-by-agent").exists()
    assert not (tmp_path / "outside.txt").exists()
    assert s.rows("SELECT count(*) FROM approvals") == [(0,)]


async def test_unattended_allow_lets_a_finite_turn_run_it(scene, tmp_path):
    async with approving(scene, tmp_path, script(), unattended="allow") as (
            s, work, owner, peer, sid):
        aid = await submit(peer, sid, "make a file", "m1", finite=True)
        done = await peer.wait_terminal(sid, aid)
    assert done["outcome"] == "completed"
    assert (work / "made-by-agent").exists()


async def test_a_prompt_waiting_for_an_answer_holds_no_other_session_up(scene, tmp_path):
    async with approving(scene, tmp_path, script()) as (s, work, owner, peer, a):
        ra = await submit(peer, a, "make a file", "a")
        await peer.wait_event(requested)
        b = (await peer.result("session.create", cwd=str(work)))["session_id"]
        rb = await submit(peer, b, "hello", "b")
        done_b = await peer.wait_terminal(b, rb)
        still = await peer.result("prompt.receipt", session_id=a, admission_id=ra)
    assert done_b["outcome"] == "completed" and still["status"] == "started"


async def test_an_owner_that_stops_cancels_the_pending_prompt(scene, tmp_path):
    model = script()
    work = tmp_path / "work"
    work.mkdir()
    async with scene(model, session={"cwd": str(work)}, daemon={"grace_seconds": 0.5}) as s:
        peer, sid = s.peer, s.session_id
        aid = await submit(peer, sid, "make a file", "m1")
        await peer.wait_event(requested)
        assert s.owner.stop() == 0
    assert s.rows("SELECT status, cause FROM approvals") == [("cancelled", "shutdown")]
    assert s.rows("SELECT status, outcome FROM session_admissions "
                  "WHERE admission_id = ?", aid) == [("terminal", "interrupted")]
    assert not (work / "made-by-agent").exists()
