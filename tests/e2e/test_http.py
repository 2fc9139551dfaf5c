"""The OpenAI-compatible HTTP endpoint of the real owner, with the official
``openai`` package as the client (docs/http.md).

The owner listens with ``--tcp 127.0.0.1:0``; the same port serves the
WebSocket protocol at ``/`` (test_tcp.py) and HTTP under ``/v1``. Each chat
completion is one finite admission (principal ``api:<token_id>``) in a fresh
``api`` session or, with ``X-Tether-Session-Id``, a stored one.
"""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import openai
import pytest
from fakeprovider import (
    Held,
    Status,
    is_child,
    prompt_of,
    text_reply,
    tool_call_reply,
)
from harness import OwnerProcess, Peer, until
from httpkit import api_admissions
from websockets.asyncio.client import connect


class Model:
    """The fake model: ``FAN OUT`` delegates two tasks (children answer ``DONE:<goal>``)
    and the parent then says whether both came back; ``HOLD`` waits for ``gate``;
    ``FAIL`` is a 400 from the model; anything else is echoed."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    def __call__(self, req: dict):
        if is_child(req):
            return text_reply("DONE:" + prompt_of(req).split()[-1])
        last = req["messages"][-1]
        if last["role"] == "tool":
            joined = "DONE:alpha" in last["content"] and "DONE:beta" in last["content"]
            return text_reply("JOINED" if joined else "NOT_JOINED")
        said = prompt_of(req)
        if said == "FAN OUT":
            return tool_call_reply("delegate_task", {"tasks": [
                {"goal": "do task alpha"}, {"goal": "do task beta"}]}, "call_fan")
        if said == "HOLD":
            return Held(text_reply("HELD_ANSWER_TEXT").message, self.gate, before=1)
        if said == "FAIL":
            return Status(400, '{"error": {"message": "the model refused", "type": "x"}}')
        return text_reply(f"ECHO {said} after {len(req['messages'])} messages")


@pytest.fixture
async def served(scene):
    model = Model()
    async with scene(model, session=False, args=("--tcp", "127.0.0.1:0"),
                     http={"max_concurrent_requests": 2, "keepalive_seconds": 0.2,
                           "retry_claim_seconds": 0.5}) as s:
        yield s, model
        model.gate.set()


async def mint(owner: OwnerProcess) -> str:
    async with await Peer.connect(owner.home) as peer:
        return (await peer.result("token.create", label="api"))["token"]


def base_url(owner: OwnerProcess) -> str:
    return owner.descriptor["tcp_url"].replace("ws://", "http://").rstrip("/") + "/v1"


_made: list[openai.AsyncOpenAI] = []


def client(owner: OwnerProcess, token: str) -> openai.AsyncOpenAI:
    made = openai.AsyncOpenAI(base_url=base_url(owner), api_key=token, max_retries=0,
                              timeout=60)
    _made.append(made)
    return made


@pytest.fixture(autouse=True)
async def _close_clients():
    yield
    while _made:
        await _made.pop().close()


async def test_a_completion_whole_and_streamed_runs_as_a_finite_api_admission(served):
    s, _ = served
    owner, provider = s.owner, s.provider
    api = client(owner, await mint(owner))
    models = await api.models.list()
    assert [m.id for m in models.data] == ["tether", "test-model"]

    done = await api.chat.completions.create(model="tether", messages=[
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "hello"}])
    # the body's earlier messages are the fresh session's transcript
    assert done.choices[0].message.content == "ECHO hello after 5 messages"
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens > 0

    stream = await api.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": "streamed"}], stream=True,
        stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "ECHO streamed after 2 messages"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert provider.requests[-1]["model"] == "test-model"

    (token_id,) = s.rows("SELECT token_id FROM tokens")[0]
    assert api_admissions(s.store) == [(f"api:{token_id}", "terminal", "completed", "api")] * 2
    payloads = s.rows("SELECT payload_json FROM session_admissions")
    assert all('"finite":true' in p for (p,) in payloads)


async def test_a_fan_out_is_joined_inline_before_the_answer(served):
    s, _ = served
    owner, provider = s.owner, s.provider
    api = client(owner, await mint(owner))
    stream = await api.chat.completions.create(
        model="tether", messages=[{"role": "user", "content": "FAN OUT"}], stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "JOINED"
    assert len([r for r in provider.requests if is_child(r)]) == 2
    assert s.rows("SELECT COUNT(*) FROM async_delegations") == [(0,)]


async def test_an_idempotent_retry_is_answered_from_the_ledger(served):
    s, _ = served
    owner, provider = s.owner, s.provider
    api = client(owner, await mint(owner))
    messages = [{"role": "user", "content": "once only"}]
    key = {"Idempotency-Key": "order-42"}
    first = await api.chat.completions.with_raw_response.create(
        model="tether", messages=messages, extra_headers=key)
    again = await api.chat.completions.with_raw_response.create(
        model="tether", messages=messages, extra_headers=key)
    a, b = first.parse(), again.parse()
    assert (b.id, b.choices[0].message.content) == (a.id, a.choices[0].message.content)
    assert "idempotency-replayed" not in first.headers
    assert again.headers["idempotency-replayed"] == "true"
    # a streamed retry of the same body is the same completion too
    stream = await api.chat.completions.create(model="tether", messages=messages,
                                               extra_headers=key, stream=True)
    chunks = [c async for c in stream]
    assert {c.id for c in chunks} == {a.id}
    assert len(provider.requests) == 1  # one inference for all three

    with pytest.raises(openai.ConflictError) as exc:
        await api.chat.completions.create(
            model="tether", messages=[{"role": "user", "content": "changed"}],
            extra_headers=key)
    assert exc.value.status_code == 409
    assert exc.value.body["code"] == "idempotency_conflict"
    assert exc.value.response.headers["x-should-retry"] == "false"  # the SDKs give up
    assert len(provider.requests) == 1

    # the same key under another token is another request
    other = client(owner, await mint(owner))
    fresh = await other.chat.completions.create(
        model="tether", messages=[{"role": "user", "content": "changed"}], extra_headers=key)
    assert fresh.id != a.id and len(provider.requests) == 2


async def test_a_stored_session_is_continued_by_its_id(served):
    s, _ = served
    owner = s.owner
    api = client(owner, await mint(owner))
    first = await api.chat.completions.with_raw_response.create(
        model="tether", messages=[{"role": "user", "content": "one"}])
    sid = first.headers["x-tether-session-id"]
    again = await api.chat.completions.create(
        model="tether", extra_headers={"X-Tether-Session-Id": sid},
        messages=[{"role": "user", "content": "ignored history"},
                  {"role": "user", "content": "two"}])
    # the stored transcript (system, one, its answer, two), not the body's history
    assert again.choices[0].message.content == "ECHO two after 4 messages"
    with pytest.raises(openai.NotFoundError):
        await api.chat.completions.create(
            model="tether", extra_headers={"X-Tether-Session-Id": "ses_nope"},
            messages=[{"role": "user", "content": "x"}])


async def test_refusals_use_openais_error_envelope(served):
    s, _ = served
    owner, provider = s.owner, s.provider
    token = await mint(owner)
    with pytest.raises(openai.AuthenticationError) as exc:
        await client(owner, "tt_wrong").chat.completions.create(
            model="tether", messages=[{"role": "user", "content": "x"}])
    assert exc.value.response.headers["www-authenticate"].startswith("Bearer")
    api = client(owner, token)
    with pytest.raises(openai.BadRequestError) as exc:
        await api.chat.completions.create(
            model="tether", messages=[{"role": "user", "content": "x"}],
            functions=[{"name": "f", "parameters": {}}])
    assert "send `tools`" in exc.value.body["message"]
    # a model not served: 404 model_not_found, as OpenAI answers it
    with pytest.raises(openai.NotFoundError) as exc:
        await api.chat.completions.create(model="gpt-none",
                                          messages=[{"role": "user", "content": "x"}])
    assert exc.value.body["code"] == "model_not_found"
    with pytest.raises(openai.InternalServerError) as exc:
        await api.chat.completions.create(model="tether",
                                          messages=[{"role": "user", "content": "FAIL"}])
    assert exc.value.status_code == 502 and exc.value.body["code"] == "model_failed"
    async with httpx.AsyncClient(base_url=base_url(owner),
                                 headers={"Authorization": f"Bearer {token}"}) as raw:
        bad = await raw.post("/chat/completions", content=b'{"model": "tether", "mess')
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == "invalid_json"
        big = await raw.post("/chat/completions", content=b"x" * (5 * 1024 * 1024))
        assert big.status_code == 413
        health = await raw.get(base_url(owner).removesuffix("/v1") + "/health")
        assert health.json() == {"status": "ok"}
    assert provider.requests and all(prompt_of(r) == "FAIL" for r in provider.requests)


async def test_past_the_concurrency_bound_a_request_gets_429(served):
    s, model = served
    owner = s.owner
    api = client(owner, await mint(owner))
    held = [await api.chat.completions.create(
        model="tether", messages=[{"role": "user", "content": "HOLD"}], stream=True)
        for _ in range(2)]
    with pytest.raises(openai.RateLimitError) as exc:
        await api.chat.completions.create(model="tether",
                                          messages=[{"role": "user", "content": "x"}])
    assert exc.value.response.headers["retry-after"] == "1"
    model.gate.set()
    for stream in held:
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == "HELD_ANSWER_TEXT"


async def test_a_streamed_client_that_leaves_without_a_key_interrupts_its_turn(served):
    """Once no retry claimed it within http.retry_claim_seconds (test_http_retries.py)."""
    s, model = served
    owner = s.owner
    api = client(owner, await mint(owner))
    stream = await api.chat.completions.create(
        model="tether", messages=[{"role": "user", "content": "HOLD"}], stream=True)
    first = await stream.__anext__()
    assert first.choices[0].delta.role == "assistant"
    await stream.close()
    await until(lambda: api_admissions(s.store)[-1][1] == "terminal", "the turn to end")
    assert api_admissions(s.store)[-1][2] == "cancelled"

    # with a key the turn runs on, and a retry fetches its answer
    key = {"Idempotency-Key": "keep-going"}
    stream = await api.chat.completions.create(
        model="tether", messages=[{"role": "user", "content": "HOLD"}], stream=True,
        extra_headers=key)
    await stream.__anext__()
    await stream.close()
    model.gate.set()
    again = await api.chat.completions.create(
        model="tether", messages=[{"role": "user", "content": "HOLD"}], extra_headers=key)
    assert again.choices[0].message.content == "HELD_ANSWER_TEXT"


async def test_an_owner_that_stops_ends_a_running_stream_with_an_error(scene):
    model = Model()
    async with scene(model, session=False, args=("--tcp", "127.0.0.1:0"),
                     daemon={"grace_seconds": 0.2}) as s:
        owner = s.owner
        api = client(owner, await mint(owner))
        stream = await api.chat.completions.create(
            model="tether", messages=[{"role": "user", "content": "HOLD"}], stream=True)
        await stream.__anext__()
        stopping = asyncio.ensure_future(asyncio.to_thread(owner.stop))
        with pytest.raises(openai.APIError) as exc:
            async for _ in stream:
                pass
        assert "interrupted" in str(exc.value)
        assert await stopping == 0
        model.gate.set()


async def test_one_port_serves_the_websocket_protocol_and_http_side_by_side(served):
    s, _ = served
    owner = s.owner
    token = await mint(owner)
    url = owner.descriptor["tcp_url"]
    auth = {"Authorization": f"Bearer {token}"}
    async with connect(url, additional_headers=auth, subprotocols=["tether.v1"]) as ws:
        api = client(owner, token)
        done = await api.chat.completions.create(
            model="tether", messages=[{"role": "user", "content": "both"}])
        assert done.choices[0].message.content == "ECHO both after 2 messages"
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}))
        assert json.loads(await ws.recv())["result"] == {"pong": True}
    async with httpx.AsyncClient() as raw:
        plain = await raw.get(url.replace("ws://", "http://"), headers=auth)
        # plain HTTP to the WebSocket endpoint's path leads a browser to the viewer
        assert (plain.status_code, plain.headers["location"]) == (302, "/web/")
