"""Bad input on the real socket: malformed frames, unknown methods, oversize frames and
batches. Each gets its answer (or a clean close) and the owner keeps serving."""

import asyncio
import json

import pytest
from harness import Peer
from websockets.exceptions import ConnectionClosed

FRAME_LIMIT = 65536


async def stray(peer: Peer, n: int) -> list[dict]:
    """The first ``n`` frames that answered no ``Peer.call`` (id null, batches, ...).

    Requests on one connection run concurrently, so these may arrive after later replies.
    """
    for _ in range(500):
        if len(peer.other) >= n:
            return peer.other[:n]
        await asyncio.sleep(0.01)
    raise TimeoutError(f"only {len(peer.other)} stray frames: {peer.other}")


@pytest.fixture
async def wire(scene):
    """An owner with a small frame limit and no model, reached on the test's transport."""
    async with scene(None, session=False, daemon={"max_frame_bytes": FRAME_LIMIT}) as s:
        yield s


async def test_malformed_frame_gets_parse_error_and_the_connection_stays_usable(wire):
    async with await wire.connect() as peer:
        await peer.send_raw('{"jsonrpc": "2.0", "id": 1, "method": "ping"')
        pong = await peer.call("ping")  # the reply to the broken frame came first
        assert pong["result"] == {"pong": True}
        [err] = await stray(peer, 1)
        assert err["id"] is None
        assert err["error"]["code"] == -32700
        assert err["error"]["message"] == err["error"]["data"]["reason"] == "parse_error"

        await peer.send_raw(b"\xff\xfe not utf-8")
        await peer.send_raw('"just a string"')
        assert (await peer.call("ping"))["result"] == {"pong": True}
        answers = sorted((m["id"], m["error"]["message"]) for m in await stray(peer, 3))
        # the binary frame is refused as such (text frames only), not parsed
        assert answers == [(None, "invalid_request"), (None, "invalid_request"),
                           (None, "parse_error")]


async def test_unknown_method_and_invalid_requests(wire):
    async with await wire.connect() as peer:
        reply = await peer.call("session.teleport")
        assert reply["error"]["code"] == -32601
        assert reply["error"]["message"] == "method_not_found"
        assert reply["error"]["data"]["method"] == "session.teleport"

        await peer.send_raw(json.dumps({"jsonrpc": "1.0", "id": 7, "method": "ping"}))
        await peer.send_raw(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping",
                                        "params": [1, 2]}))
        assert (await peer.call("ping"))["result"] == {"pong": True}
        answers = sorted((m["id"], m["error"]["message"]) for m in await stray(peer, 2))
        assert answers == [(7, "invalid_request"), (8, "invalid_params")]


@pytest.mark.both_transports
async def test_oversize_frame_closes_only_that_connection(wire):
    async with await wire.connect() as bystander, \
            await wire.connect() as peer:
        sid = (await bystander.result("session.create"))["session_id"]
        huge = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompt.submit",
                           "params": {"session_id": sid, "input_id": "big",
                                      "text": "x" * (FRAME_LIMIT + 10)}})
        await peer.send_raw(huge)
        await peer.ws.wait_closed()
        assert peer.ws.close_code == 1009  # message too big
        with pytest.raises(ConnectionClosed):
            await peer.ws.send('{"jsonrpc":"2.0","id":2,"method":"ping"}')

        # everyone else is still served, and nothing of the big frame was admitted
        assert (await bystander.call("ping"))["result"] == {"pong": True}
        missing = await bystander.call("prompt.receipt", session_id=sid, input_id="big")
        assert missing["error"]["message"] == "not_found"
        async with await wire.connect() as fresh:
            assert (await fresh.call("ping"))["result"] == {"pong": True}
    assert wire.owner.alive


async def test_batches_are_answered_per_member(wire):
    async with await wire.connect() as peer:
        batch = [
            {"jsonrpc": "2.0", "id": "a", "method": "ping"},
            {"jsonrpc": "2.0", "method": "ping"},  # a notification: no reply
            {"jsonrpc": "2.0", "id": "b", "method": "no.such.method"},
            {"jsonrpc": "2.0", "id": "c", "method": "session.create",
             "params": {"title": "from a batch"}},
            {"jsonrpc": "2.0", "id": "d", "method": "runtime.describe"},
        ]
        await peer.send_raw(json.dumps(batch))
        await peer.send_raw(json.dumps([]))
        assert (await peer.call("ping"))["result"] == {"pong": True}
        answers = await stray(peer, 2)
        [replies] = [a for a in answers if isinstance(a, list)]
        [empty] = [a for a in answers if isinstance(a, dict)]
        assert [r["id"] for r in replies] == ["a", "b", "c", "d"]
        assert replies[0]["result"] == {"pong": True}
        assert replies[1]["error"]["message"] == "method_not_found"
        assert replies[2]["result"]["info"]["title"] == "from a batch"
        describe = replies[3]["result"]
        assert describe["protocol"] == "tether/1"
        assert describe["pid"] == wire.owner.proc.pid
        assert describe["instance_id"] == wire.owner.descriptor["instance_id"]
        assert empty["id"] is None and empty["error"]["message"] == "invalid_request"

        # the session created inside the batch is real and this connection follows it
        sid = replies[2]["result"]["session_id"]
        snap = await peer.result("session.resume", session_id=sid)
        assert snap["info"]["title"] == "from a batch"
