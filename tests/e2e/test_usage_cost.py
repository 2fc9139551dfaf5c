"""Tokens and cost where people look (docs/long-sessions.md): each turn's usage (and the
context window's fill it left) in its receipt and ``message.complete``, the session's
totals in ``session.info``, snapshots,
session.list and session.lookup, and in the CLI (`tether sessions`, `status --json`).

The model is the scripted fake; it reports usage with cached and reasoning tokens
nested as OpenAI does. Prices come from config; a model with no price is "unknown".
"""

from __future__ import annotations

import subprocess
import sys

import orjson
from fakeprovider import Message
from harness import until
from scene import Scene

USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
         "prompt_tokens_details": {"cached_tokens": 400},
         "completion_tokens_details": {"reasoning_tokens": 50}}
PRICES = {"test-model": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}
#: (600 uncached × 2 + 400 cached × 0.5 + 200 × 8) per million
TURN_USD = 0.003


def reply(request: dict) -> Message:
    return Message({"role": "assistant", "content": "done"}, usage=USAGE)


def cli(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tether.clients.cli", *args],
                          env=scene.env(), capture_output=True, text=True, timeout=60,
                          check=False)


async def test_usage_and_cost_of_turns_and_sessions(scene) -> None:
    async with scene(reply, model={"prices": PRICES}) as s:
        peer, sid = s.peer, s.session_id
        for n in range(2):
            r = await peer.result("prompt.submit", session_id=sid, input_id=f"i{n}",
                                  text="hello", finite=True)
            receipt = await peer.wait_terminal(sid, r["admission_id"])
        result = receipt["result"]
        assert result["usage"] == {"prompt_tokens": 1000, "completion_tokens": 200,
                                   "total_tokens": 1200, "cached_tokens": 400,
                                   "reasoning_tokens": 50}
        assert result["model"] == "test-model"
        assert abs(result["cost_usd"] - TURN_USD) < 1e-9

        events = await peer.all_events(sid)
        complete = [e for e in events if e["type"] == "message.complete"][-1]["payload"]
        assert complete["usage"]["cached_tokens"] == 400
        assert abs(complete["cost_usd"] - TURN_USD) < 1e-9
        info = [e for e in events if e["type"] == "session.info"
                and "usage" in e["payload"]][-1]["payload"]["usage"]
        assert info["prompt_tokens"] == 2000 and info["requests"] == 2
        assert abs(info["cost_usd"] - 2 * TURN_USD) < 1e-9
        assert info["by_model"]["test-model"]["reasoning_tokens"] == 100

        snap = await peer.result("session.resume", session_id=sid)
        assert snap["info"]["usage"]["total_tokens"] == 2400
        # the context window's fill the turn left: its last request's prompt and
        # answer, less the reasoning; the default window (no config, no table entry)
        fill = {"used": 1000 + 200 - 50, "window": 32_768, "estimated": False}
        assert complete["context"] == fill and snap["info"]["context"] == fill

        # a model no table prices: its cost is unknown, never a guess
        other = (await peer.result("session.create", model="mystery-model"))["session_id"]
        r = await peer.result("prompt.submit", session_id=other, input_id="m", text="hi",
                              finite=True)
        receipt = await peer.wait_terminal(other, r["admission_id"])
        assert receipt["result"]["model"] == "mystery-model"
        assert receipt["result"]["cost_usd"] is None
        listed = {s["session_id"]: s for s in
                  (await peer.result("session.list"))["sessions"]}
        assert abs(listed[sid]["usage"]["cost_usd"] - 2 * TURN_USD) < 1e-9
        assert listed[other]["usage"]["cost_usd"] is None
        assert listed[other]["usage"]["total_tokens"] == 1200
        found = await peer.result("session.lookup", prefix=sid)
        assert found["matches"][0]["usage"]["requests"] == 2

        table = cli(s, "sessions")
        assert table.returncode == 0, table.stderr
        assert "COST" in table.stdout.splitlines()[0]
        rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
        assert "$0.0060" in rows[sid] and "2.4k" in rows[sid]
        assert "unknown" in rows[other]
        status = cli(s, "status", "--json")
        assert status.returncode == 0, status.stderr
        usage = orjson.loads(status.stdout)["usage"]
        assert usage["total_tokens"] == 3600 and usage["requests"] == 3
        assert usage["cost_usd"] is None  # one session's model has no price


async def test_the_http_endpoint_keeps_openais_usage_shape(scene) -> None:
    import httpx

    async with scene(reply, session=False, args=("--tcp", "127.0.0.1:0")) as s:
        token = (await s.peer.result("token.create", label="api"))["token"]
        url = s.owner.descriptor["tcp_url"].replace("ws://", "http://").rstrip("/")
        async with httpx.AsyncClient() as http:
            got = await http.post(f"{url}/v1/chat/completions", timeout=30,
                                  headers={"Authorization": f"Bearer {token}"},
                                  json={"model": "test-model", "messages": [
                                      {"role": "user", "content": "hello"}]})
            answered = await http.post(f"{url}/v1/responses", timeout=30,
                                       headers={"Authorization": f"Bearer {token}"},
                                       json={"model": "test-model", "input": "hello"})
    assert got.status_code == 200, got.text
    assert got.json()["usage"] == {
        "prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200,
        "prompt_tokens_details": {"cached_tokens": 400},
        "completion_tokens_details": {"reasoning_tokens": 50}}
    # the Responses API's shape of the same counts
    assert answered.status_code == 200, answered.text
    assert answered.json()["usage"] == {
        "input_tokens": 1000, "input_tokens_details": {"cached_tokens": 400},
        "output_tokens": 200, "output_tokens_details": {"reasoning_tokens": 50},
        "total_tokens": 1200}


async def test_a_turn_stopped_halfway_counts_what_it_spent(scene) -> None:
    from fakeprovider import Stall, tool_call_reply

    def halfway(request: dict):
        if request["messages"][-1]["role"] == "tool":
            return Stall(20)  # the second request never answers
        reply = tool_call_reply("list_dir", {"path": "."})
        reply.usage = USAGE
        return reply

    async with scene(halfway, model={"prices": PRICES}) as s:
        fake, peer, sid = s.provider, s.peer, s.session_id
        r = await peer.result("prompt.submit", session_id=sid, input_id="h", text="look")
        await peer.wait_event(lambda e: e["type"] == "tool.complete")
        await until(lambda: len(fake.requests) >= 2, "the second request")
        await peer.result("session.interrupt", session_id=sid)
        receipt = await peer.wait_terminal(sid, r["admission_id"])
        assert receipt["outcome"] == "cancelled"
        assert receipt["result"]["usage"]["prompt_tokens"] == 1000
        assert abs(receipt["result"]["cost_usd"] - TURN_USD) < 1e-9
        found = await peer.result("session.lookup", prefix=sid)
        assert found["matches"][0]["usage"]["requests"] == 1
