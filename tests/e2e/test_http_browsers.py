"""The HTTP endpoint for browsers and chat frontends, on the real owner: CORS
for ``daemon.tcp_allowed_origins``, and a frontend's own conversation key
(``X-Tether-Conversation``, ``X-OpenWebUI-Chat-Id``) naming one session per
token (docs/http.md, "Browsers and chat frontends")."""

from __future__ import annotations

import httpx
import pytest
from fakeprovider import prompt_of, text_reply
from httpkit import Clients, base_url, mint

PAGE = "http://app.example:3000"


@pytest.fixture
async def served(scene):
    made = Clients()
    model = lambda req: text_reply(f"ECHO {prompt_of(req)} after {len(req['messages'])}")  # noqa: E731
    async with scene(model, session=False, args=("--tcp", "127.0.0.1:0"),
                     daemon={"tcp_allowed_origins": [PAGE]}) as s:
        yield s, made
        await made.close()


@pytest.mark.store_agnostic
async def test_a_listed_origin_gets_its_preflight_and_cors_headers_on_every_answer(served):
    s, _ = served
    owner, provider = s.owner, s.provider
    token = await mint(owner)
    async with httpx.AsyncClient(base_url=base_url(owner), timeout=30) as raw:
        pre = await raw.options("/chat/completions", headers={
            "Origin": PAGE, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"})
        assert pre.status_code == 204
        assert pre.headers["access-control-allow-origin"] == PAGE
        assert "POST" in pre.headers["access-control-allow-methods"]
        assert pre.headers["access-control-allow-headers"] == \
            "authorization, content-type, x-stainless-os"
        assert int(pre.headers["access-control-max-age"]) > 0
        assert "access-control-allow-private-network" not in pre.headers
        # a public page reaching loopback (Chromium's Private Network Access)
        pna = await raw.options("/models", headers={
            "Origin": PAGE, "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Private-Network": "true"})
        assert pna.headers["access-control-allow-private-network"] == "true"

        page = {"Origin": PAGE, "Authorization": f"Bearer {token}"}
        body = {"model": "tether", "stream": True,
                "messages": [{"role": "user", "content": "from a page"}]}
        async with raw.stream("POST", "/chat/completions", json=body, headers=page) as r:
            assert r.status_code == 200
            assert r.headers["access-control-allow-origin"] == PAGE
            assert "x-tether-session-id" in r.headers["access-control-expose-headers"]
            assert "ECHO from a page" in (await r.aread()).decode()
        for answer in (await raw.get("/models", headers={"Origin": PAGE}),  # 401
                       await raw.get("/nowhere", headers=page)):  # 404
            assert answer.status_code in (401, 404)
            assert answer.headers["access-control-allow-origin"] == PAGE

        other = "http://evil.example"
        refused = await raw.options("/chat/completions", headers={
            "Origin": other, "Access-Control-Request-Method": "POST"})
        assert refused.status_code == 403
        assert "access-control-allow-origin" not in refused.headers
        refused = await raw.post("/chat/completions", json=body,
                                 headers={**page, "Origin": other})
        assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    assert [prompt_of(r) for r in provider.requests] == ["from a page"]


async def test_a_conversation_key_names_one_session_per_token(served):
    s, clients = served
    owner, provider = s.owner, s.provider
    token = await mint(owner)
    chat = clients(owner, token, default_headers={"X-Tether-Conversation": "chat-1"})
    history = [{"role": "system", "content": "be brief"},
               {"role": "user", "content": "one"}]
    first = await chat.chat.completions.with_raw_response.create(model="tether",
                                                                 messages=history)
    sid = first.headers["x-tether-session-id"]
    said = first.parse().choices[0].message.content
    assert said.startswith("ECHO one after ")
    before = int(said.rsplit(" ", 1)[1])
    # a frontend sends the whole conversation again: only the last message is new,
    # whatever it says the earlier turns were
    history += [{"role": "assistant", "content": "EDITED BY THE FRONTEND"},
                {"role": "user", "content": "two"}]
    second = await chat.chat.completions.with_raw_response.create(model="tether",
                                                                  messages=history)
    assert second.headers["x-tether-session-id"] == sid
    assert second.parse().choices[0].message.content == f"ECHO two after {before + 2}"
    sent = [m.get("content") for m in provider.requests[-1]["messages"]]
    assert "EDITED" not in str(sent) and said in sent

    # Open WebUI's header names a conversation too; another key is another session
    webui = clients(owner, token, default_headers={"X-OpenWebUI-Chat-Id": "chat-1"})
    same = await webui.chat.completions.with_raw_response.create(
        model="tether", messages=[{"role": "user", "content": "three"}])
    assert same.headers["x-tether-session-id"] == sid
    fresh = await clients(owner, token, default_headers={"X-Tether-Conversation": "chat-2"}
                          ).chat.completions.with_raw_response.create(
        model="tether", messages=[{"role": "user", "content": "elsewhere"}])
    assert fresh.headers["x-tether-session-id"] != sid
    # the same key under another token is another conversation
    other = await clients(owner, await mint(owner),
                          default_headers={"X-Tether-Conversation": "chat-1"}
                          ).chat.completions.with_raw_response.create(
        model="tether", messages=[{"role": "user", "content": "mine"}])
    assert other.headers["x-tether-session-id"] not in (sid, fresh.headers["x-tether-session-id"])
    assert s.rows("SELECT COUNT(*) FROM api_conversations") == [(3,)]
    assert s.rows("SELECT COUNT(*) FROM sessions") == [(3,)]
