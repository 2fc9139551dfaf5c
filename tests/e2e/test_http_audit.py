"""The HTTP endpoint under the security audit's cases, on the real owner: tokens
that expire or are revoked mid-stream, slow bodies, deep JSON, concurrent
duplicates of one Idempotency-Key, and error messages that name no internal
address (docs/http.md)."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import openai
import pytest
from fakeprovider import Held, Status, prompt_of, text_reply
from harness import Peer, until
from httpkit import Clients, api_admissions, base_url, mint
from websockets.asyncio.client import connect

HOLD = [{"role": "user", "content": "HOLD"}]


class Model:
    """``HOLD`` waits for ``gate``; ``MISSING`` is a 404 from the model server;
    anything else is echoed."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def __call__(self, req: dict):
        said = prompt_of(req)
        if said == "HOLD":
            return Held(text_reply("HELD_ANSWER_TEXT").message, self.gate, before=1)
        if said == "MISSING":
            return Status(404, '{"error": {"message": "no such model", "type": "x"}}')
        return text_reply(f"ECHO {said}")


@pytest.fixture
async def served(scene):
    model = Model()
    async with scene(model, session=False, args=("--tcp", "127.0.0.1:0"),
                     http={"max_concurrent_requests": 16, "body_timeout_seconds": 1.0,
                           "keepalive_seconds": 0.5}) as s:
        yield s, model
        model.gate.set()


@pytest.fixture
async def clients():
    made = Clients()
    yield made
    await made.close()


async def test_a_token_that_expires_or_is_revoked_ends_its_connections_and_streams(
        served, clients):
    s, model = served
    owner, provider = s.owner, s.provider
    short = await mint(owner, ttl_seconds=4)
    stream = await clients(owner, short).chat.completions.create(
        model="tether", messages=HOLD, stream=True)
    assert (await stream.__anext__()).choices[0].delta.role == "assistant"
    url = owner.descriptor["tcp_url"]
    async with connect(url, additional_headers={"Authorization": f"Bearer {short}"},
                       subprotocols=["tether.v1"]) as ws:
        # nothing is sent: the expiry alone ends the stream and the connection
        with pytest.raises(openai.APIError) as exc:
            async for _ in stream:
                pass
        assert "expired" in str(exc.value)
        await asyncio.wait_for(ws.wait_closed(), 10)
    assert (ws.close_code, ws.close_reason) == (1008, "token expired")
    await until(lambda: api_admissions(s.store)[-1][1:3] == ("terminal", "cancelled"),
                "the expired token's turn to be cancelled")

    kept = await mint(owner)
    stream = await clients(owner, kept).chat.completions.create(
        model="tether", messages=HOLD, stream=True)
    await stream.__anext__()
    async with await Peer.connect(owner.home) as peer:
        (token_id,) = [t["token_id"] for t in (await peer.result("token.list"))["tokens"]
                       if t["expires_at"] is None]
        revoked = await peer.result("token.revoke", token_id=token_id)
    assert revoked == {"revoked": True, "closed_connections": 1}  # the stream
    with pytest.raises(openai.APIError) as exc:
        async for _ in stream:
            pass
    assert "revoked" in str(exc.value)
    await until(lambda: api_admissions(s.store)[-1][1:3] == ("terminal", "cancelled"),
                "the revoked token's turn to be cancelled")
    assert not any(r["messages"][-1]["role"] == "tool" for r in provider.requests)


@pytest.mark.store_agnostic
async def test_slow_bodies_hold_no_slot_and_time_out(served, clients):
    s, _ = served
    owner, provider = s.owner, s.provider
    token = await mint(owner)
    port = int(owner.descriptor["tcp_url"].rsplit(":", 1)[1].strip("/"))
    slow = []
    for _ in range(20):  # more than http.max_concurrent_requests (16)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + token.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"mod")
        await writer.drain()
        slow.append((reader, writer))
    # the slow senders hold no slot: a whole request is answered meanwhile
    done = await clients(owner, token).chat.completions.create(
        model="tether", messages=[{"role": "user", "content": "quick"}])
    assert done.choices[0].message.content == "ECHO quick"
    for reader, writer in slow:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
        assert head.startswith(b"HTTP/1.1 408"), head[:200]
        size = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        body = json.loads(await reader.readexactly(size))
        assert body["error"]["code"] == "request_timeout"
        writer.close()
    assert len(provider.requests) == 1


@pytest.mark.store_agnostic
async def test_deep_json_is_a_400_in_openais_envelope(served):
    s, _ = served
    owner = s.owner
    token = await mint(owner)
    async with httpx.AsyncClient(base_url=base_url(owner),
                                 headers={"Authorization": f"Bearer {token}"}) as raw:
        for depth in (254, 5000):
            deep = b'{"model": "tether", "x": ' + b"[" * depth + b"]" * depth + b"}"
            bad = await raw.post("/chat/completions", content=deep)
            assert bad.status_code == 400
            assert bad.json()["error"]["code"] == "invalid_json"


async def test_every_concurrent_duplicate_of_a_key_says_it_was_replayed(served):
    s, model = served
    owner, provider = s.owner, s.provider
    token = await mint(owner)
    body = {"model": "tether", "messages": HOLD, "stream": True}
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "dup-1"}

    async def one(raw: httpx.AsyncClient) -> tuple[str | None, str]:
        async with raw.stream("POST", "/chat/completions", json=body, headers=headers) as r:
            assert r.status_code == 200
            replayed = r.headers.get("idempotency-replayed")
            chunks = [json.loads(line[6:]) async for line in r.aiter_lines()
                      if line.startswith("data: {")]
            return replayed, "".join(c["choices"][0]["delta"].get("content") or ""
                                     for c in chunks if c["choices"])

    async with httpx.AsyncClient(base_url=base_url(owner), timeout=60) as raw:
        runs = [asyncio.ensure_future(one(raw)) for _ in range(12)]
        await until(lambda: len(provider.requests) == 1, "the one turn to reach the model")
        model.gate.set()
        answers = await asyncio.gather(*runs)
    assert sorted(str(replayed) for replayed, _ in answers) == ["None"] + ["true"] * 11
    assert {text for _, text in answers} == {"HELD_ANSWER_TEXT"}
    assert len(provider.requests) == 1


@pytest.mark.store_agnostic
async def test_a_model_failure_names_no_internal_address(served, clients):
    s, _ = served
    owner, provider = s.owner, s.provider
    api = clients(owner, await mint(owner))
    with pytest.raises(openai.InternalServerError) as exc:
        await api.chat.completions.create(model="tether",
                                          messages=[{"role": "user", "content": "MISSING"}])
    message = exc.value.body["message"]
    assert exc.value.body["code"] == "model_failed" and "404" in message
    port = provider.url.split(":")[2].split("/")[0]
    assert "127.0.0.1" not in message and port not in message and "http://" not in message
