"""SPEC §11, the seed's acceptance scenario: a finite `tether chat` joins two parallel children.

Real owner, real CLI (a subprocess), real agent loops and delegate_task; only
inference is faked. Both children's requests must meet at a two-party barrier
(so they run at once), and the provider writes the token only from tool results
the parent actually received, so the answer proves the join happened in-turn.
"""

from __future__ import annotations

import json
import threading

import pytest
from fakeprovider import FakeProvider, text_reply, tool_call_reply
from harness import OwnerProcess, Peer, clean_env, db_rows, write_config

WORKERS = ("WORKER_ALPHA", "WORKER_BETA")
TOKEN = "FANOUT_JOINED_AND_SYNTHESIZED"
EARLY = "PARENT_ENDED_BEFORE_JOIN"
MODE_FLAGS = {"quiet": ["-Q"], "oneshot": ["--oneshot"], "redirected": [], "resumed": ["-Q"]}


class SeedModel:
    """The seed's scripted model, as a FakeProvider handler."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2)
        self.lock = threading.Lock()
        self.children: list[str] = []
        self.joined_results: list[dict] = []

    def __call__(self, request: dict):
        messages = request.get("messages") or []
        users = [str(m.get("content") or "") for m in messages if m["role"] == "user"]
        worker = next((w for w in WORKERS if w in users[-1]), None)
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        if worker:
            with self.lock:
                self.children.append(worker)
            self.barrier.wait(timeout=20)  # both children in flight at once, or this fails
            return text_reply(worker + "_COMPLETE")
        if results:
            with self.lock:
                self.joined_results.extend(results)
            joined = all(w + "_COMPLETE" in json.dumps(results) for w in WORKERS)
            return text_reply(TOKEN if joined else EARLY)
        return tool_call_reply("delegate_task", {
            "tasks": [{"goal": f"Complete {w} and return its completion token."} for w in WORKERS],
        }, call_id="call_fanout")


def rebuild_retry(session_id: str, request_id: str, payload: dict) -> dict:
    """SPEC §4: the exact prompt.submit params, rebuilt from a ledger row."""
    wire = {k: v for k, v in payload.items() if k != "cli_turn_v1"}
    return {"session_id": session_id, "input_id": request_id, **wire,
            **payload.get("cli_turn_v1", {})}


@pytest.mark.parametrize("mode", list(MODE_FLAGS))
async def test_finite_chat_joins_parallel_children_before_final_answer(tmp_path, mode, run_cli):
    home = tmp_path / "home"
    model = SeedModel()
    query = tmp_path / "query.txt"
    query.write_text("Delegate two independent tasks, then synthesize their results.",
                     encoding="utf-8")
    with FakeProvider(model) as fake:
        write_config(home, fake.url, delegation={
            "max_concurrent_children": 2, "base_url": fake.url, "api_key": "local-test-only",
            "model": "test-model"})
        env = clean_env(home, HOME=str(tmp_path), OPENAI_BASE_URL=fake.url,
                        OPENAI_API_KEY="local-test-only")
        with OwnerProcess(home, env=env) as owner:
            if mode == "resumed":
                async with await Peer.connect(home) as peer:
                    created = await peer.result(
                        "session.create", request_id="interactive-origin", source="cli",
                        model="test-model", provider="custom", base_url=fake.url,
                        toolsets=["delegation"], cwd=str(tmp_path), ignore_rules=True)
                sid = created["stored_session_id"]
                args = ["chat", "-Q", "--resume", sid, "--query-file", str(query)]
            else:
                args = ["chat", *MODE_FLAGS[mode], "--provider", "custom", "--model",
                        "test-model", "--base-url", fake.url, "--toolsets", "delegation",
                        "--ignore-rules", "--query-file", str(query), "--reasoning", "high",
                        "--max-turns", "10"]
            result = run_cli(home, *args, env=env, cwd=tmp_path, timeout=75)
            diagnostic = (result.stdout, result.stderr, model.joined_results, model.children,
                          fake.errors)

            assert owner.alive, "a finite client must not own the owner's lifetime"
            rows = db_rows(home, "SELECT target_session_id, request_id, payload_json, status "
                                 "FROM session_admissions")
            assert [r[3] for r in rows] == ["terminal"], (rows, diagnostic)
            # inline children never leave a detached-result row for a later viewer
            assert db_rows(home, "SELECT count(*) FROM async_delegations") == [(0,)]

            sid, request_id, payload_json, _ = rows[0]
            payload = json.loads(payload_json)
            assert payload["finite"] is True
            retry = rebuild_retry(sid, request_id, payload)
            async with await Peer.connect(home) as peer:
                assert "result" in await peer.call("session.resume", session_id=sid)
                again = await peer.call("prompt.submit", **retry)
                assert again["result"]["status"] == "terminal", again
                conflict = await peer.call("prompt.submit", **{**retry, "finite": False})
                assert conflict["error"]["message"] == "admission_conflict", conflict
                invalid = await peer.call("prompt.submit", **{**retry, "finite": "true"})
                assert invalid["error"]["message"] == "invalid_params", invalid
            assert len(db_rows(home, "SELECT 1 FROM session_admissions")) == 1

    assert result.returncode == 0, diagnostic
    assert TOKEN in result.stdout, diagnostic
    assert EARLY not in result.stdout, diagnostic
    if mode in ("quiet", "oneshot", "resumed"):
        assert result.stdout.strip() == TOKEN, diagnostic  # only the answer
    assert "Traceback" not in result.stderr, diagnostic
    assert sorted(model.children) == sorted(WORKERS), diagnostic
    assert not fake.errors, diagnostic
    assert len(model.joined_results) == 1, diagnostic
    assert [r["status"] for r in model.joined_results[0]["results"]] == ["completed"] * 2
    assert [r["summary"] for r in model.joined_results[0]["results"]] == [
        w + "_COMPLETE" for w in WORKERS]
