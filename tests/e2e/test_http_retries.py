"""The official ``openai`` client with its default retries against the real
owner: a retry is attached to its first attempt, never run again
(docs/http.md, "Retries")."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from fakeprovider import Status, prompt_of, text_reply, tool_call_reply
from harness import until
from httpkit import Clients, api_admissions, base_url, mint
from scene import Scene


class Model:
    """``SLOW`` answers after 3 s; ``ACT`` runs a command that appends to
    ``marker``, then the model fails; ``FLAKY`` fails once, then answers."""

    def __init__(self, marker) -> None:
        self.marker = marker
        self.flaky = 0

    def __call__(self, req: dict):
        said = prompt_of(req)
        if said == "SLOW":
            time.sleep(3)
            return text_reply("SLOW DONE")
        if said == "ACT":
            if req["messages"][-1]["role"] == "tool":
                return Status(400, '{"error": {"message": "the model gave up", "type": "x"}}')
            return tool_call_reply("terminal", {"command": f"echo ran >> {self.marker}"})
        if said == "FLAKY":
            self.flaky += 1
            if self.flaky == 1:
                return Status(400, '{"error": {"message": "try again", "type": "x"}}')
        return text_reply(f"ECHO {said}")


@pytest.fixture
async def served(scene, tmp_path):
    model = Model(tmp_path / "marker")
    # the command only counts its runs in a file beside the test (outside any
    # session's workspace): no sandbox, the subject here is retries
    async with scene(model, session=False, args=("--tcp", "127.0.0.1:0"),
                     approvals={"mode": "never"}, sandbox={"mode": "off"},
                     http={"retry_claim_seconds": 1.0}) as s:
        yield s, model


@pytest.fixture
async def clients():
    made = Clients()
    yield made
    await made.close()


def sessions(s: Scene) -> int:
    return s.rows("SELECT COUNT(*) FROM sessions WHERE source = 'api'")[0][0]


@pytest.mark.store_agnostic
async def test_a_client_timeout_retried_by_the_sdk_runs_the_turn_once(served, clients):
    s, _ = served
    owner, provider = s.owner, s.provider
    # the SDK's defaults (2 retries), with a timeout shorter than the turn
    api = clients(owner, await mint(owner), max_retries=2, timeout=1.5)
    done = await api.chat.completions.create(model="tether",
                                             messages=[{"role": "user", "content": "SLOW"}])
    assert done.choices[0].message.content == "SLOW DONE"
    assert len(provider.requests) == 1 and sessions(s) == 1
    assert [row[2] for row in api_admissions(s.store)] == ["completed"]


async def test_a_failure_after_a_tool_ran_is_not_retried(served, clients):
    s, model = served
    owner, provider = s.owner, s.provider
    api = clients(owner, await mint(owner), max_retries=2)
    with pytest.raises(openai.InternalServerError) as exc:
        await api.chat.completions.with_raw_response.create(
            model="tether", messages=[{"role": "user", "content": "ACT"}])
    assert exc.value.response.headers["x-should-retry"] == "false"
    assert "after its tools ran" in exc.value.body["message"]
    assert model.marker.read_text() == "ran\n"  # the command ran once
    assert len(provider.requests) == 2 and sessions(s) == 1

    # a failure before anything was done: the SDK's retry runs it anew
    flaky = await api.chat.completions.create(model="tether",
                                              messages=[{"role": "user", "content": "FLAKY"}])
    assert flaky.choices[0].message.content == "ECHO FLAKY"
    assert model.flaky == 2


@pytest.mark.store_agnostic
async def test_a_retry_claims_a_turn_whose_client_left_and_an_unclaimed_one_is_cancelled(
        served):
    s, _ = served
    owner, provider = s.owner, s.provider
    token = await mint(owner)
    headers = {"Authorization": f"Bearer {token}", "x-stainless-retry-count": "0"}
    body = {"model": "tether", "messages": [{"role": "user", "content": "SLOW"}]}
    async with httpx.AsyncClient(base_url=base_url(owner)) as raw:
        with pytest.raises(httpx.ReadTimeout):
            await raw.post("/chat/completions", json=body, headers=headers, timeout=0.5)
        # past the claim window (1 s here), nobody claimed it: cancelled
        await until(lambda: api_admissions(s.store)[-1][1:3] == ("terminal", "cancelled"),
                    "the unclaimed turn to be cancelled")
        # a retry within the window claims its first attempt, however long it runs
        body["messages"][0]["content"] = "again"
        first = await raw.post("/chat/completions", json=body, headers=headers)
        retried = await raw.post("/chat/completions", json=body,
                                 headers={**headers, "x-stainless-retry-count": "1"})
        assert retried.json()["id"] == first.json()["id"]
        assert retried.headers["idempotency-replayed"] == "true"
        # without the header it is a new request, run again
        fresh = await raw.post("/chat/completions", json=body, headers=headers)
        assert fresh.json()["id"] != first.json()["id"]
    assert [p for p in map(prompt_of, provider.requests)] == ["SLOW", "again", "again"]
