"""Compaction through the real owner, with a scripted model and a tiny context window.

The fake model records every request; the test measures each one with the
documented estimate (docs/long-sessions.md: 4 characters a token, 4 per
message, 3 per request; the model name is not OpenAI's, so no tokenizer) and
checks none passes the budget, over a session of more than a hundred turns.
"""

from __future__ import annotations

import math
import subprocess
import sys

import orjson
from fakeprovider import Message, text_reply
from scene import Scene, Store, owner_env

WINDOW = 1024
LIMIT = int(WINDOW * 0.8)
TURNS = 100
SUMMARY = "Summary: the user sent numbered notes; the agent acknowledged each one. " * 2


def tokens(request: dict) -> int:
    return 3 + sum(4 + math.ceil(len(m.get("content") or "") / 4)
                   + (math.ceil(len(orjson.dumps(m["tool_calls"])) / 4)
                      if m.get("tool_calls") else 0)
                   for m in request["messages"])


def is_compaction(request: dict) -> bool:
    return request["messages"][0]["content"].startswith("You compact the history")


def model(request: dict) -> Message:
    if is_compaction(request):
        return text_reply(SUMMARY)
    prompt = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return text_reply("Noted: " + prompt[:120])


def note(n: int) -> str:
    return f"note {n}: " + ("keep this in mind about the project, " * 5)


def cli(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether.clients.cli", *args],
                          env=scene.env(), capture_output=True, text=True, timeout=60,
                          check=False)


async def turn(peer, sid: str, text: str, input_id: str) -> dict:
    r = await peer.result("prompt.submit", session_id=sid, input_id=input_id, text=text,
                          finite=True)
    return await peer.wait_terminal(sid, r["admission_id"])


async def test_a_long_session_stays_under_budget_with_compactions(scene):
    cfg = {"model": {"context_window": WINDOW, "default": "scripted-model"}}
    async with scene(model, **cfg) as s:
        fake, peer = s.provider, s.peer
        sid = (await peer.result("session.create", toolsets=[]))["session_id"]
        for n in range(TURNS):
            receipt = await turn(peer, sid, note(n), f"n{n}")
            assert receipt["outcome"] == "completed", receipt
        # every request, turns and compactions alike, fits the budget
        sizes = [tokens(r) for r in fake.requests]
        assert max(sizes) <= LIMIT, max(sizes)
        compacting = [r for r in fake.requests if is_compaction(r)]
        asked = [r for r in fake.requests if not is_compaction(r)]
        assert len(asked) == TURNS and len(compacting) >= 10
        # a later compaction folds the summary so far into the new one
        assert SUMMARY.strip() in compacting[-1]["messages"][1]["content"]
        # the last turn sent the summary and recent turns, not the first notes
        last = asked[-1]["messages"]
        assert any(m["role"] == "system" and m["content"].endswith(SUMMARY.strip())
                   for m in last)
        assert note(TURNS - 1) in [m["content"] for m in last]
        assert not any(note(0) == m["content"] for m in last)

        events = await peer.all_events(sid)
        compacted = [e["payload"] for e in events if e["type"] == "session.compacted"]
        # one record per compaction; a compaction may have asked in several chunks
        assert 10 <= len(compacted) <= len(compacting)
        ends = [c["end_index"] for c in compacted]
        assert ends == sorted(ends) and all(c["first_index"] == 0 for c in compacted)
        assert all(c["tokens_after"] < c["tokens_before"] and c["kind"] == "auto"
                   for c in compacted)
        # the transcript stays whole; its usage counts the compaction requests too
        snap = await peer.result("session.resume", session_id=sid)
        assert len(snap["messages"]) == 2 * TURNS
        assert snap["messages"][0]["content"] == note(0)
        assert snap["info"]["usage"]["requests"] == len(fake.requests)
        export = (await peer.result("session.export", session_id=sid))["document"]
        assert len(export["turns"]) == TURNS
        assert len(export["compactions"]) == len(compacted)

        # a fork keeps the compactions: its next request is as small as the original's
        fork = await peer.result("session.fork", session_id=sid)
        assert fork["compactions"] == len(compacted)
        before = len(fake.requests)
        await turn(peer, fork["session_id"], "what did I tell you?", "f1")
        sent = [r for r in fake.requests[before:] if not is_compaction(r)][0]
        assert any(m["content"].endswith(SUMMARY.strip()) for m in sent["messages"])
        assert tokens(sent) <= LIMIT
    kinds = s.rows("SELECT kind, COUNT(*) FROM compactions WHERE session_id = ? "
                   "GROUP BY kind", sid)
    assert [tuple(k) for k in kinds] == [("auto", len(compacted))]


async def test_manual_compaction_with_a_focus_and_off(scene):
    cfg = {"model": {"context_window": 8192, "default": "scripted-model", "compact": "manual"}}
    async with scene(model, **cfg) as s:
        fake, peer = s.provider, s.peer
        sid = (await peer.result("session.create", toolsets=[]))["session_id"]
        for n in range(4):
            await turn(peer, sid, note(n), f"n{n}")
        assert not any(is_compaction(r) for r in fake.requests)  # manual: never by itself
        done = cli(s, "sessions", "compact", sid, "--focus", "the numbered notes")
        assert done.returncode == 0, done.stderr
        assert "compacted messages 0–5" in done.stderr
        [asked] = [r for r in fake.requests if is_compaction(r)]
        assert "keep in particular: the numbered notes" in asked["messages"][0]["content"]
        assert note(3) not in asked["messages"][1]["content"]  # the newest turn stays whole
        await turn(peer, sid, "and now?", "after")
        sent = fake.requests[-1]["messages"]
        assert sent[1]["content"].endswith(SUMMARY.strip())
        assert [m["content"] for m in sent if m["role"] == "user"] == [note(3), "and now?"]
        again = await peer.result("session.compact", session_id=sid)
        assert again["compacted"] is True and again["compaction"]["first_index"] == 0
        assert again["compaction"]["kind"] == "manual"
        unknown = await peer.call("session.compact", session_id="ses_nope")
        assert unknown["error"]["data"]["reason"] == "not_found"


async def test_compaction_off_never_summarises_and_a_huge_prompt_is_cut(scene):
    cfg = {"model": {"context_window": WINDOW, "default": "scripted-model", "compact": "off"}}
    huge = "begin " + "x" * 20_000 + " end"
    async with scene(model, **cfg) as s:
        fake, peer = s.provider, s.peer
        sid = (await peer.result("session.create", toolsets=[]))["session_id"]
        # one turn alone far over the budget: cut with a marker, stored whole
        receipt = await turn(peer, sid, huge, "h")
        assert receipt["outcome"] == "completed"
        prompt = fake.requests[0]["messages"][-1]["content"]
        assert prompt.startswith("begin ") and prompt.endswith(" end")
        assert "characters cut here to fit the model's context window" in prompt
        snap = await peer.result("session.resume", session_id=sid)
        assert snap["messages"][0]["content"] == huge
        for n in range(10):
            await turn(peer, sid, note(n), f"n{n}")
        out = await peer.result("session.compact", session_id=sid)
        assert out == {"compacted": False, "compaction": None,
                       "reason": "compaction is off (config model.compact)"}
        assert not any(is_compaction(r) for r in fake.requests)
        # still never over the budget: the oldest contents are cut instead
        assert max(tokens(r) for r in fake.requests) <= LIMIT


async def test_kill_9_during_compaction_leaves_no_half_summary(tmp_path, store_url):
    """The owner dies while the model is summarising: nothing of the compaction is
    stored; the next owner compacts again from scratch, and the turn goes on."""
    import asyncio
    import threading

    from fakeprovider import FakeProvider
    from harness import OwnerProcess, Peer, write_config

    asked, gate = threading.Event(), threading.Event()

    def held(request: dict) -> Message:
        if is_compaction(request):
            asked.set()
            gate.wait(30)
        return model(request)

    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    with FakeProvider(held) as fake:
        write_config(home, fake.url, model={"context_window": WINDOW,
                                            "default": "scripted-model"},
                     daemon={"unknown_policy": "interrupt"})
        with OwnerProcess(home, env=env) as owner:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", toolsets=[]))["session_id"]
                for n in range(40):
                    r = await peer.result("prompt.submit", session_id=sid, input_id=f"n{n}",
                                          text=note(n), finite=True)
                    while not asked.is_set():  # this turn ends, or it compacts first
                        got = await peer.result("prompt.receipt", session_id=sid,
                                                admission_id=r["admission_id"])
                        if got["status"] == "terminal":
                            break
                        await asyncio.sleep(0.02)
                    if asked.is_set():
                        break
                assert asked.is_set()
                owner.kill()  # SIGKILL while the summary is being written
        assert store.rows("SELECT COUNT(*) FROM compactions")[0][0] == 0
        assert store.rows("SELECT COUNT(*) FROM events WHERE type = 'session.compacted'"
                          )[0][0] == 0
        gate.set()
        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                receipt = await turn(peer, sid, "after the crash", "again")
                assert receipt["outcome"] == "completed"
                snap = await peer.result("session.resume", session_id=sid)
        [(summary, first, end)] = store.rows(
            "SELECT summary, first_index, end_index FROM compactions")
        assert summary == SUMMARY.strip() and first == 0 and end > 0
        assert snap["messages"][-1]["content"] == "Noted: after the crash"


async def test_a_delegated_child_obeys_the_same_budget(scene, tmp_path):
    """A child agent reads a file far bigger than the window: its next request is cut
    to fit, with the marker, like a turn's."""
    from fakeprovider import is_child, tool_call_reply

    work = tmp_path / "work"
    work.mkdir()
    (work / "big.txt").write_text("start of file\n" + "data line\n" * 6000 + "end of file")

    def scripted(request: dict) -> Message:
        last = request["messages"][-1]
        if is_child(request):
            if last["role"] == "tool":
                return text_reply("child read it")
            return tool_call_reply("read_file", {"path": "big.txt"}, "r1")
        if last["role"] == "tool":
            return text_reply("parent done")
        return tool_call_reply("delegate_task", {"tasks": [{"goal": "read big.txt"}]}, "d1")

    def sent_tokens(request: dict) -> int:
        tools = request.get("tools")
        return tokens(request) + (math.ceil(len(orjson.dumps(tools)) / 4) if tools else 0)

    cfg = {"model": {"context_window": 4096, "default": "scripted-model"}}
    async with scene(scripted, **cfg) as s:
        fake, peer = s.provider, s.peer
        sid = (await peer.result("session.create", cwd=str(work),
                                 toolsets=["files", "delegation"]))["session_id"]
        receipt = await turn(peer, sid, "delegate the reading", "d")
        assert receipt["outcome"] == "completed" and receipt["result"]["text"] == "parent done"
        children = [r for r in fake.requests if is_child(r)]
        assert len(children) == 2
        assert all(sent_tokens(r) <= int(4096 * 0.8) for r in fake.requests)
        result = children[1]["messages"][-1]["content"]
        assert "characters cut here to fit the model's context window" in result
        assert "start of file" in result
