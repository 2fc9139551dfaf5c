"""What a non-Python client can get wrong on the wire, and what the owner answers.

Each case was a way a TypeScript caller could hang or be misled: a string cut in
the middle of a UTF-16 pair (``JSON.stringify`` writes ``"\\ud83d"``), a binary
frame, an ``after_seq`` from somewhere else, an ``invalid_params`` without
``fields``, and tokens that could be neither listed, revoked nor made to expire.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from fakeprovider import text_reply
from harness import Peer
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus


@pytest.fixture
async def wire(scene):
    """An owner with a TCP listener; tests reach it on either transport themselves."""
    async with scene(lambda req: text_reply("ANSWER"), session=False,
                     args=("--tcp", "127.0.0.1:0")) as s:
        yield s


async def reply_to(peer: Peer, frame: str | bytes) -> dict:
    """The next frame that is not an event, after sending ``frame`` raw."""
    before = len(peer.other)
    await peer.send_raw(frame)
    for _ in range(200):
        if len(peer.other) > before:
            return peer.other[before]
        await asyncio.sleep(0.05)
    raise AssertionError("no reply")


async def test_a_lone_surrogate_gets_an_error_under_the_request_id(wire):
    async with await Peer.connect(wire.home) as peer:
        sid = (await peer.result("session.create"))["session_id"]
        # what JSON.stringify writes for "\ud83d" (half an emoji)
        frame = ('{"jsonrpc":"2.0","id":"req-7","method":"prompt.submit","params":'
                 '{"session_id":"' + sid + '","input_id":"i","text":"cut \\ud83d"}}')
        reply = await reply_to(peer, frame)
        assert reply["id"] == "req-7"
        assert reply["error"]["message"] == "parse_error"
        assert reply["error"]["data"]["problem"] == "lone_surrogate"
        # nothing was admitted; in a batch, each member gets its own id back
        assert wire.rows("SELECT COUNT(*) FROM session_admissions") == [(0,)]
        batch = ('[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\\udc00"}},'
                 '{"jsonrpc":"2.0","id":2,"method":"ping"}]')
        replies = await reply_to(peer, batch)
        assert [r["id"] for r in replies] == [1, 2]
        # JSON that is broken for other reasons still answers id null
        broken = await reply_to(peer, '{"jsonrpc":"2.0","id":3,"method":')
        assert broken["id"] is None and broken["error"]["message"] == "parse_error"
        assert (await peer.result("ping")) == {"pong": True}


async def test_binary_frames_are_refused_under_their_id(wire):
    async with await Peer.connect(wire.home) as peer:
        reply = await reply_to(peer, b'{"jsonrpc":"2.0","id":5,"method":"ping"}')
        assert reply["id"] == 5 and reply["error"]["message"] == "invalid_request"
        assert "text frame" in reply["error"]["data"]["detail"]
        assert (await peer.result("ping")) == {"pong": True}


async def test_after_seq_beyond_last_seq_is_refused(wire):
    async with await Peer.connect(wire.home) as peer:
        sid = (await peer.result("session.create"))["session_id"]
        for method in ("session.resume", "session.events.since"):
            reply = await peer.call(method, session_id=sid, after_seq=50)
            data = reply["error"]["data"]
            assert reply["error"]["message"] == "invalid_params", method
            assert data["fields"][0]["loc"] == "after_seq" and data["last_seq"] == 0
        # at last_seq is fine
        assert (await peer.result("session.resume", session_id=sid, after_seq=0))["events"] == []


async def test_every_invalid_params_names_its_fields_over_tcp(wire):
    async with await Peer.connect(wire.home) as peer:
        token = (await peer.result("token.create", label="t"))["token"]
    ws = await connect(wire.owner.descriptor["tcp_url"],
                       additional_headers={"Authorization": f"Bearer {token}"})
    async with Peer(ws) as peer:
        for method in ("token.create", "runtime.shutdown", "token.list"):
            reply = await peer.call(method)
            assert reply["error"]["message"] == "invalid_params", method
            assert reply["error"]["data"]["fields"], method
        positional = await reply_to(peer, '{"jsonrpc":"2.0","id":9,"method":"ping","params":[]}')
        assert positional["id"] == 9 and positional["error"]["data"]["fields"]


async def test_runtime_describe_lists_providers_and_toolsets(wire):
    async with await Peer.connect(wire.home) as peer:
        described = await peer.result("runtime.describe")
    assert described["toolsets"] == ["terminal", "files", "delegation", "mcp"]
    assert set(described["providers"]) == {"custom", "openai", "demo"}


async def test_tokens_are_listed_revoked_and_expire(wire):
    url = wire.owner.descriptor["tcp_url"]
    async with await Peer.connect(wire.home) as unix:
        kept = await unix.result("token.create", label="kept")
        short = await unix.result("token.create", label="short", ttl_seconds=1)
        listed = (await unix.result("token.list"))["tokens"]
        assert [(t["token_id"], t["label"]) for t in listed] == [
            (kept["token_id"], "kept"), (short["token_id"], "short")]
        assert listed[0]["expires_at"] is None and listed[1]["expires_at"] > time.time()
        assert all("token" not in t for t in listed)

        ws = await connect(url, additional_headers={"Authorization": f"Bearer {kept['token']}"})
        async with Peer(ws) as tcp:
            assert (await tcp.result("ping")) == {"pong": True}
            revoked = await unix.result("token.revoke", token_id=kept["token_id"])
            assert revoked == {"revoked": True, "closed_connections": 1}
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.wait_closed(), 10)
                await ws.recv()
        assert ws.close_code == 1008
        with pytest.raises(InvalidStatus) as exc:
            await connect(url, additional_headers={"Authorization": f"Bearer {kept['token']}"})
        assert exc.value.response.status_code == 401
        again = await unix.call("token.revoke", token_id=kept["token_id"])
        assert again["error"]["message"] == "not_found"

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and time.time() < listed[1]["expires_at"]:
            await asyncio.sleep(0.1)
        with pytest.raises(InvalidStatus) as exc:
            await connect(url, additional_headers={"Authorization": f"Bearer {short['token']}"})
        assert exc.value.response.status_code == 401


async def test_a_one_time_token_is_no_bearer_token_and_trades_once(wire):
    import urllib.error
    import urllib.request

    http = wire.owner.descriptor["tcp_url"].replace("ws://", "http://")
    async with await Peer.connect(wire.home) as unix:
        once = (await unix.result("token.create", label="web", once=True, ttl_seconds=60))["token"]
    with pytest.raises(InvalidStatus):
        await connect(wire.owner.descriptor["tcp_url"],
                      additional_headers={"Authorization": f"Bearer {once}"})

    def get(path: str, token: str) -> tuple[int, dict]:
        req = urllib.request.Request(http + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    status, minted = await asyncio.to_thread(get, "web/exchange", once)
    assert status == 200 and minted["token"].startswith("tt_")
    assert (await asyncio.to_thread(get, "web/exchange", once))[0] == 401  # used up
    assert (await asyncio.to_thread(get, "web/status", minted["token"])) == (200, {"ok": True})
    status, body = await asyncio.to_thread(get, "web/status", "tt_wrong")
    assert status == 401 and body["reason"] == "unauthorized"
    ws = await connect(wire.owner.descriptor["tcp_url"],
                       subprotocols=[f"tether.token.{minted['token']}"],
                       origin=http.rstrip("/"))  # the page's own origin needs no config
    async with Peer(ws) as peer:
        assert (await peer.result("ping")) == {"pong": True}
