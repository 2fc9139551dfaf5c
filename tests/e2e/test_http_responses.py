"""OpenAI's Responses API on the real owner, with the official ``openai``
client: create (whole, streamed, the SDK's stream helper), previous_response_id,
retrieve, background with cancel, and a response fetched after an owner
restart (docs/http.md, "Responses")."""

from __future__ import annotations

import asyncio
import threading

import openai
import pytest
from fakeprovider import FakeProvider, Held, prompt_of, text_reply
from harness import OwnerProcess, until, write_config
from httpkit import Clients, mint
from scene import owner_env


class Model:
    def __init__(self) -> None:
        self.gate = threading.Event()

    def __call__(self, req: dict):
        said = prompt_of(req)
        if said == "HOLD":
            return Held(text_reply("HELD").message, self.gate, before=1)
        return text_reply(f"ECHO {said} after {len(req['messages'])}")


@pytest.fixture
async def served(tmp_path, store_url):
    """(an owner on the home and the test's store, to start, the fake model, its
    handler, the test's clients): the second test restarts the owner."""
    home = tmp_path / "home"
    model = Model()
    made = Clients()
    with FakeProvider(model) as provider:
        write_config(home, provider.url, http={"retry_claim_seconds": 0.5})
        yield (lambda: OwnerProcess(home, "--tcp", "127.0.0.1:0",
                                    env=owner_env(home, store_url))), provider, model, made
        model.gate.set()
        await made.close()


@pytest.mark.store_agnostic
async def test_responses_created_continued_streamed_and_retrieved(served):
    owner_on_home, provider, _, clients = served
    with owner_on_home() as owner:
        token = await mint(owner)
        api = clients(owner, token)
        first = await api.responses.with_raw_response.create(
            model="tether", input="hello", instructions="be brief", temperature=0.1)
        made = first.parse()
        assert made.status == "completed" and made.id.startswith("resp_")
        assert made.output_text.startswith("ECHO hello after ")
        assert first.headers["x-tether-ignored"] == "temperature"
        count = int(made.output_text.rsplit(" ", 1)[1])

        # previous_response_id continues that response's session: only the new input
        again = await api.responses.with_raw_response.create(
            model="tether", input=[{"role": "user", "content": [
                {"type": "input_text", "text": "again"}]}], previous_response_id=made.id)
        assert again.headers["x-tether-session-id"] == first.headers["x-tether-session-id"]
        assert again.parse().output_text == f"ECHO again after {count + 2}"
        assert again.parse().previous_response_id == made.id

        stream = await api.responses.create(model="tether", input="streamed", stream=True)
        events = [e async for e in stream]
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert "response.output_text.delta" in kinds and kinds[-1] == "response.completed"
        assert events[-1].response.output_text.startswith("ECHO streamed")
        assert [e.sequence_number for e in events] == list(range(len(events)))

        async with api.responses.stream(model="tether", input="helper") as helper:
            final = await helper.get_final_response()
        assert final.output_text.startswith("ECHO helper") and final.status == "completed"

        fetched = await api.responses.retrieve(made.id)
        assert (fetched.status, fetched.output_text, fetched.instructions) == \
            ("completed", made.output_text, "be brief")
        with pytest.raises(openai.NotFoundError):
            await api.responses.retrieve("resp_0000")
        with pytest.raises(openai.NotFoundError):  # another token's response
            await clients(owner, await mint(owner)).responses.retrieve(made.id)
        with pytest.raises(openai.BadRequestError) as exc:
            await api.responses.create(model="tether", input="x", tools=[
                {"type": "function", "name": "f", "parameters": {}}])
        assert "/v1/chat/completions" in exc.value.body["message"]
        with pytest.raises(openai.NotFoundError) as exc:  # a model not served, as OpenAI
            await api.responses.create(model="gpt-none", input="x")
        assert exc.value.body["code"] == "model_not_found"


async def test_a_background_response_is_cancelled_or_fetched_after_a_restart(served):
    owner_on_home, provider, model, clients = served
    with owner_on_home() as owner:
        token = await mint(owner)
        api = clients(owner, token)
        held = await api.responses.create(model="tether", input="HOLD", background=True)
        assert held.status in ("queued", "in_progress") and held.background
        await until(lambda: len(provider.requests) == 1, "the turn to reach the model")
        assert (await api.responses.retrieve(held.id)).status == "in_progress"
        cancelled = await api.responses.cancel(held.id)
        assert cancelled.status == "cancelled"

        # a streamed background response runs on after its client leaves, past the
        # time an SDK's retry has to claim a turn (0.5 s here)
        stream = await api.responses.create(model="tether", input="HOLD", background=True,
                                            stream=True)
        running = (await stream.__anext__()).response
        await stream.close()
        await asyncio.sleep(1.5)
        assert (await api.responses.retrieve(running.id)).status == "in_progress"
        assert (await api.responses.cancel(running.id)).status == "cancelled"

        done = await api.responses.create(model="tether", input="later", background=True)
        for _ in range(600):
            if (await api.responses.retrieve(done.id)).status == "completed":
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the background response never completed")
    with owner_on_home() as owner:
        fetched = await clients(owner, token).responses.retrieve(done.id)
        assert fetched.status == "completed"
        assert fetched.output_text.startswith("ECHO later")
        assert (await clients(owner, token).responses.retrieve(held.id)).status == "cancelled"
