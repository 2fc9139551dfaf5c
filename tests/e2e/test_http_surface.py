"""The OpenAI parameters and routes today's clients send, against the real
owner with the official ``openai`` client (docs/http.md, "What a request
becomes")."""

from __future__ import annotations

import openai
import pytest
from fakeprovider import prompt_of, text_reply
from httpkit import Clients, mint


@pytest.fixture
async def api(scene):
    made = Clients()
    async with scene(lambda req: text_reply(f"ECHO {prompt_of(req)}"), session=False,
                     args=("--tcp", "127.0.0.1:0")) as s:
        yield made(s.owner, await mint(s.owner)), s.provider
        await made.close()


@pytest.mark.store_agnostic
async def test_parameters_that_change_nothing_are_accepted_and_named(api):
    client, provider = api
    raw = await client.chat.completions.with_raw_response.create(
        model="tether", messages=[{"role": "user", "content": "hi"}],
        prompt_cache_key="k1", safety_identifier="u-hash", verbosity="low",
        web_search_options={}, user="me", metadata={"app": "x"}, temperature=0.2,
        response_format={"type": "text"},
        extra_body={"n": None, "top_k": 5, "repetition_penalty": 1.1})
    assert raw.parse().choices[0].message.content == "ECHO hi"
    assert raw.headers["x-tether-ignored"] == ("metadata,prompt_cache_key,repetition_penalty,"
                                               "safety_identifier,temperature,top_k,user,"
                                               "verbosity,web_search_options")
    # none of it reaches the model: the agent's own settings decide
    assert not {"top_k", "prompt_cache_key", "user"} & set(provider.requests[-1])

    with pytest.raises(openai.BadRequestError) as exc:
        await client.chat.completions.create(
            model="tether", messages=[{"role": "user", "content": "hi"}], n=2)
    assert exc.value.body["code"] == "unsupported_parameter" and "n:" in exc.value.body["message"]
    with pytest.raises(openai.BadRequestError) as exc:
        await client.chat.completions.create(
            model="tether", messages=[{"role": "user", "content": "hi"}],
            extra_body={"tempreature": 1})
    assert exc.value.body["code"] == "unknown_parameter"
    with pytest.raises(openai.BadRequestError) as exc:
        await client.chat.completions.create(model="tether", messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    assert exc.value.body["code"] == "invalid_content"
    assert "image_url parts are not supported" in exc.value.body["message"]
    assert len(provider.requests) == 1


@pytest.mark.store_agnostic
async def test_a_model_is_retrieved_by_its_name(api):
    client, _ = api
    found = await client.models.retrieve("test-model")
    assert (found.id, found.object, found.owned_by) == ("test-model", "model", "tether")
    assert (await client.models.retrieve("tether")).id == "tether"
    with pytest.raises(openai.NotFoundError) as exc:
        await client.models.retrieve("gpt-4o")
    assert exc.value.body["code"] == "model_not_found"
