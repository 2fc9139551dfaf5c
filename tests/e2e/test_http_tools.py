"""A client's own tools and structured output through the HTTP endpoint of the
real owner: the ``openai`` client by hand, then langchain-openai's
``bind_tools`` loop and ``with_structured_output`` (docs/http.md, "Client
tools and structured output")."""

from __future__ import annotations

import json

import openai
import pytest
from fakeprovider import prompt_of, text_reply, tool_call_reply
from httpkit import Clients, base_url, mint
from scene import Scene

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def model(req: dict):
    """Calls the client's get_weather when offered, answers from its result;
    answers JSON when the request asks for a JSON answer."""
    last = req["messages"][-1]
    if last["role"] == "tool":
        return text_reply(f"It is {last['content']} in Paris")
    offered = {t["function"]["name"] for t in req.get("tools") or ()}
    if "response_format" in req:
        return text_reply(json.dumps({"name": "Ada", "age": 36}))
    if "get_weather" in offered and "weather" in prompt_of(req):
        return tool_call_reply("get_weather", {"city": "Paris"}, "call_w1")
    return text_reply(f"ECHO {prompt_of(req)}")


@pytest.fixture
async def served(scene):
    made = Clients()
    async with scene(model, session=False, args=("--tcp", "127.0.0.1:0")) as s:
        yield s, made, await mint(s.owner)
        await made.close()


def sessions(s: Scene) -> int:
    return s.rows("SELECT COUNT(*) FROM sessions")[0][0]


async def test_a_client_tool_call_ends_the_turn_and_its_result_continues_the_session(served):
    s, clients, token = served
    owner, provider = s.owner, s.provider
    api = clients(owner, token)
    asked = [{"role": "user", "content": "what is the weather in Paris?"}]
    first = await api.chat.completions.create(model="tether", messages=asked, tools=[WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == \
        ("call_w1", "get_weather", {"city": "Paris"})
    # the model was offered tether's tools and the client's
    offered = {t["function"]["name"] for t in provider.requests[0]["tools"]}
    assert {"get_weather", "terminal", "read_file"} <= offered

    follow = asked + [choice.message.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    stream = await api.chat.completions.create(model="tether", messages=follow,
                                               tools=[WEATHER], stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "It is sunny in Paris"
    # the same session went on: the model saw its own call and the client's result
    assert sessions(s) == 1
    seen = provider.requests[-1]["messages"]
    assert [m["role"] for m in seen[-3:]] == ["user", "assistant", "tool"]

    # streamed, a tool call arrives as tool_calls deltas and finish_reason tool_calls
    stream = await api.chat.completions.create(model="tether", messages=asked,
                                               tools=[WEATHER], stream=True)
    chunks = [c async for c in stream if c.choices]
    deltas = [tc for c in chunks for tc in c.choices[0].delta.tool_calls or ()]
    assert [(d.id, d.function.name) for d in deltas] == [("call_w1", "get_weather")]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    # results that answer no pending call are refused, and nothing runs
    before = len(provider.requests)
    stray = [{"role": "user", "content": "hi"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "call_zz", "type": "function",
                  "function": {"name": "get_weather", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "call_other", "content": "x"}]
    with pytest.raises(openai.BadRequestError) as exc:
        await api.chat.completions.create(model="tether", messages=stray, tools=[WEATHER])
    assert exc.value.body["code"] == "invalid_messages"
    with pytest.raises(openai.BadRequestError) as exc:
        await api.chat.completions.create(model="tether", messages=asked, tools=[
            {"type": "function", "function": {"name": "terminal", "parameters": {}}}])
    assert "tether's own tools" in exc.value.body["message"]
    assert len(provider.requests) == before


@pytest.mark.store_agnostic
async def test_langchain_bind_tools_loop_and_structured_output(served):
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    s, _, token = served
    owner, provider = s.owner, s.provider

    @tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return "sunny" if city == "Paris" else "unknown"

    llm = ChatOpenAI(model="tether", base_url=base_url(owner), api_key=token, max_retries=0,
                     timeout=60)
    try:
        await _tool_loop_and_structured(llm, get_weather, provider, s)
    finally:
        await llm.root_async_client.close()


async def _tool_loop_and_structured(llm, get_weather, provider, s: Scene) -> None:
    from langchain_core.messages import HumanMessage
    from pydantic import BaseModel

    bound = llm.bind_tools([get_weather])
    messages = [HumanMessage("what is the weather in Paris?")]
    ai = await bound.ainvoke(messages)
    assert [c["name"] for c in ai.tool_calls] == ["get_weather"]
    messages.append(ai)
    messages += [get_weather.invoke(call) for call in ai.tool_calls]
    final = await bound.ainvoke(messages)
    assert final.content == "It is sunny in Paris" and not final.tool_calls
    assert sessions(s) == 1

    class Person(BaseModel):
        name: str
        age: int

    person = await llm.with_structured_output(Person).ainvoke("who wrote the first program?")
    assert person == Person(name="Ada", age=36)
    sent = provider.requests[-1]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Person"
