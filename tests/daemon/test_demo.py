"""The offline demo provider walks a user through delegate -> children -> joined answer."""

from __future__ import annotations

import json

from tether.daemon.delegation.tasks import CHILD_SYSTEM_PROMPT, RESULTS_PREFIX
from tether.daemon.demo import DemoProvider
from tether.daemon.model.provider import Provider

PROMPT = "Explain why the sea has tides and how the moon and the sun pull on the oceans"
DELEGATE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "delegate_task",
            "description": "delegate",
            "parameters": {"type": "object"},
        },
    }
]


class Recorder:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def __call__(self, text: str) -> None:
        self.chunks.append(text)


def child_messages(goal: str) -> list[dict]:
    """A child agent's request, as the owner makes it."""
    return [{"role": "system", "content": CHILD_SYSTEM_PROMPT}, {"role": "user", "content": goal}]


async def run_children(demo: DemoProvider, goals: list[str]) -> list[dict]:
    """What the daemon does for an inline delegation: one child agent per goal."""
    results = []
    for index, goal in enumerate(goals):
        child = await demo.complete(
            messages=child_messages(goal), tools=[], model="demo"
        )
        assert child.tool_calls == []
        results.append(
            {"task_index": index, "status": "completed", "summary": child.text, "api_calls": 1}
        )
    return results


async def delegate(demo: DemoProvider) -> tuple[list[dict], list[str]]:
    """Run the fresh-prompt step; return the transcript so far and the delegated goals."""
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": PROMPT},
    ]
    first = await demo.complete(messages=messages, tools=DELEGATE_TOOLS, model="demo")
    assert first.text is None
    assert first.finish_reason == "tool_calls"
    (call,) = first.tool_calls
    assert call.name == "delegate_task"
    tasks = json.loads(call.arguments)["tasks"]
    goals = [task["goal"] for task in tasks]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        }
    )
    return messages, goals


async def test_is_a_provider():
    demo = DemoProvider()
    assert isinstance(demo, Provider)
    assert demo.name == "demo"


async def test_fresh_prompt_delegates_two_halves():
    _, goals = await delegate(DemoProvider())
    assert len(goals) == 2
    assert goals[0].startswith("Summarise the prompt's first half: Explain why the sea")
    assert goals[1].startswith("Summarise the prompt's second half:")
    assert goals[1].endswith("pull on the oceans")


async def test_inline_flow_joins_child_summaries():
    demo = DemoProvider(config_path="/home/me/.tether/config.yaml")
    messages, goals = await delegate(demo)
    results = await run_children(demo, goals)
    summaries = [r["summary"] for r in results]
    assert "first half" in summaries[0] and "Explain why the sea" in summaries[0]
    assert "second half" in summaries[1]
    call_id = messages[-1]["tool_calls"][0]["id"]
    messages.append(
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": json.dumps({"results": results, "total_duration_seconds": 0.1}),
        }
    )
    deltas = Recorder()
    final = await demo.complete(
        messages=messages, tools=DELEGATE_TOOLS, model="demo", on_delta=deltas
    )
    assert final.tool_calls == []
    assert final.finish_reason == "stop"
    assert final.text.startswith("[demo provider]")
    for summary in summaries:
        assert summary in final.text
    *_, blank, last_line = final.text.splitlines()
    assert blank == ""  # the hint is a paragraph of its own, not part of the last item
    assert "model.provider: custom" in last_line and "model.base_url" in last_line
    assert "/home/me/.tether/config.yaml" in last_line
    assert "--provider custom --base-url URL --model M" in last_line
    # Streamed in a few pieces that add up to the answer.
    assert len(deltas.chunks) > 1
    assert "".join(deltas.chunks) == final.text
    assert final.usage["completion_tokens"] == len(final.text.split())
    assert (
        final.usage["total_tokens"]
        == final.usage["prompt_tokens"] + final.usage["completion_tokens"]
    )


async def test_failed_child_is_reported():
    demo = DemoProvider()
    messages, goals = await delegate(demo)
    results = await run_children(demo, goals[:1])
    results.append(
        {"task_index": 1, "status": "failed", "summary": None, "error": "provider timed out"}
    )
    messages.append(
        {"role": "tool", "tool_call_id": "x", "content": json.dumps({"results": results})}
    )
    final = await demo.complete(messages=messages, tools=DELEGATE_TOOLS, model="demo")
    assert results[0]["summary"] in final.text
    assert "[failed]" in final.text and "provider timed out" in final.text


async def test_background_dispatch_then_results_turn():
    demo = DemoProvider()
    messages, goals = await delegate(demo)
    messages.append(
        {
            "role": "tool",
            "tool_call_id": "x",
            "content": json.dumps({"status": "dispatched", "delegation_id": "dlg_1"}),
        }
    )
    ack = await demo.complete(messages=messages, tools=DELEGATE_TOOLS, model="demo")
    assert ack.tool_calls == []
    assert ack.text.startswith("[demo provider]")
    assert "background" in ack.text and "new turn" in ack.text

    results = await run_children(demo, goals)
    messages.append({"role": "assistant", "content": ack.text})
    delivery = {"delegation_id": "dlg_1", "state": "completed", "result": {"results": results}}
    messages.append({"role": "user", "content": f"{RESULTS_PREFIX}\n{json.dumps(delivery)}"})
    final = await demo.complete(messages=messages, tools=DELEGATE_TOOLS, model="demo")
    assert final.tool_calls == []
    assert final.text.startswith("[demo provider]")
    for result in results:
        assert result["summary"] in final.text
    assert "model.provider: custom" in final.text.splitlines()[-1]


async def test_child_never_delegates_even_if_offered():
    demo = DemoProvider()
    answer = await demo.complete(
        messages=child_messages("Summarise the prompt's first half: hi there"),
        tools=DELEGATE_TOOLS,
        model="demo",
    )
    assert answer.tool_calls == []
    assert "hi there" in answer.text


async def test_child_counts_words_and_names_an_empty_half():
    demo = DemoProvider()

    async def summary(goal: str) -> str:
        answer = await demo.complete(messages=child_messages(goal),
                                     tools=None, model="demo")
        return answer.text

    assert "(1 word) reads “second”" in await summary(
        "Summarise the prompt's first half: second")
    assert "(3 words)" in await summary("Summarise the prompt's first half: a b c")
    assert await summary("Summarise the prompt's second half: (empty)") == \
        "[demo] The second half is empty."


async def test_without_delegate_tool_it_echoes_with_hint():
    deltas = Recorder()
    answer = await DemoProvider().complete(
        messages=[{"role": "user", "content": "ping the demo"}],
        tools=None,
        model="",
        on_delta=deltas,
    )
    assert answer.text.startswith("[demo provider]")
    assert "ping the demo" in answer.text
    assert "--provider custom" in answer.text.splitlines()[-1]
    assert answer.model == "demo"
    assert "".join(deltas.chunks) == answer.text


async def test_deterministic():
    demo = DemoProvider()
    messages = [{"role": "user", "content": PROMPT}]
    one = await demo.complete(messages=messages, tools=DELEGATE_TOOLS, model="demo")
    two = await demo.complete(messages=messages, tools=DELEGATE_TOOLS, model="demo")
    assert one == two
