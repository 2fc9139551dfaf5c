"""budget.py, windows.py and compaction.split_point: counting, fitting, where to cut."""

from __future__ import annotations

import httpx
from fakeprovider import FakeProvider, text_reply

from tether.daemon.config.core import build_config
from tether.daemon.config.turn import TurnSettings
from tether.daemon.engine.compaction import render, split_point
from tether.daemon.model.budget import (
    DEFAULT_CONTEXT_WINDOW,
    Budget,
    count_messages,
    count_text,
    squeeze,
    tokenizer_for,
)
from tether.daemon.model.windows import ContextWindows


def test_openai_names_are_counted_with_cl100k_and_others_estimated() -> None:
    for name in ("gpt-4o", "openai/gpt-4.1-mini", "o3", "o4-mini", "chatgpt-4o-latest"):
        assert tokenizer_for(name) == "cl100k_base", name
    for name in ("llama3", "claude-3-5-sonnet", "qwen2.5-coder", "o", None):
        assert tokenizer_for(name) == "estimate", name
    assert count_text("hello world", "cl100k_base") == 2  # exact: [15339, 1917]
    assert count_text("hello world", "estimate") == 3  # 11 characters / 4, rounded up
    assert count_text("", "cl100k_base") == 0
    msgs = [{"role": "user", "content": "hello world"}]
    assert count_messages(msgs, None, "estimate") == 3 + 4 + 3


def _chat(turns: int, size: int) -> list[dict]:
    msgs = [{"role": "system", "content": "system prompt"}]
    for n in range(turns):
        msgs += [{"role": "user", "content": f"q{n} " + "x" * size},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"c{n}", "type": "function",
                      "function": {"name": "read_file", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{n}", "content": "r" * size},
                 {"role": "assistant", "content": f"a{n}"}]
    return msgs


def test_squeeze_cuts_big_contents_first_and_keeps_pairs() -> None:
    budget = Budget(1000, 0.8, "local-model")
    msgs = _chat(2, 100) + [{"role": "user", "content": "now"}]
    msgs[2 + 4]["content"] = "r" * 40_000  # the second turn's tool output is huge
    assert squeeze(msgs, None, budget) == 1
    assert budget.count(msgs) <= budget.limit
    cut = msgs[6]["content"]
    assert cut.startswith("rrr") and "characters cut here" in cut and cut.endswith("rrr")
    assert [m["role"] for m in msgs] == [m["role"] for m in _chat(2, 1)] + ["user"]


def test_squeeze_leaves_out_whole_old_turns_and_says_so() -> None:
    budget = Budget(2000, 0.8, "local-model")
    msgs = _chat(30, 150) + [{"role": "user", "content": "the newest question"}]
    squeeze(msgs, None, budget)
    assert budget.count(msgs) <= budget.limit
    assert msgs[0]["content"] == "system prompt"
    assert msgs[1]["role"] == "system" and "earlier messages of this session are not sent" \
        in msgs[1]["content"]
    assert msgs[2]["role"] == "user" and msgs[-1]["content"] == "the newest question"
    # every tool result that is sent still follows its call
    calls = {c["id"] for m in msgs for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in calls for m in msgs if m["role"] == "tool")


def test_a_request_that_fits_is_left_alone() -> None:
    msgs = _chat(2, 10)
    before = [dict(m) for m in msgs]
    assert squeeze(msgs, [{"type": "function"}], Budget(DEFAULT_CONTEXT_WINDOW, 0.8)) == 0
    assert msgs == before


def test_the_fill_is_the_last_request_s_tokens_or_our_count() -> None:
    budget = Budget(50_000, 0.8)
    msgs = _chat(2, 10)
    # the server's count: prompt and answer, less the reasoning the next request drops
    reported = budget.fill({"prompt_tokens": 900, "completion_tokens": 120,
                            "reasoning_tokens": 20}, msgs)
    assert reported == {"used": 1000, "window": 50_000, "estimated": False}
    # nothing reported: what the messages and tools count
    tools = [{"type": "function", "function": {"name": "t", "parameters": {}}}]
    ours = budget.fill({}, msgs, tools)
    assert ours == {"used": budget.count(msgs, tools), "window": 50_000, "estimated": True}
    assert ours["used"] > budget.fill({}, msgs)["used"] > 0


def test_split_point_keeps_whole_turns() -> None:
    rows = [{"role": r, "content": "y" * 400, "admission_id": f"a{n}"}
            for n in range(6) for r in ("user", "assistant")]
    assert split_point(rows, 0, "estimate") == 10  # manual: all but the newest turn
    assert split_point(rows, 450, "estimate") == 8  # as many newest turns as fit
    assert split_point(rows[:2], 10_000, "estimate") == 0  # only one turn: nothing
    assert split_point(rows, 10_000, "estimate") == 0  # everything fits: nothing
    assert "[calls tool t with" in render(
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "t", "arguments": "{}"}}]}, 100)


def _settings(base_url: str, model: str) -> TurnSettings:
    return TurnSettings(provider="custom", base_url=base_url, model=model, api_key=None,
                        toolsets=(), reasoning=None, max_turns=3, ignore_rules=True)


async def test_context_window_from_config_then_server_then_table() -> None:
    models = ({"id": "served", "max_model_len": 4096}, "plain")
    with FakeProvider(lambda req: text_reply("x"), models=models) as fake:
        async with httpx.AsyncClient() as http:
            windows = ContextWindows(build_config({}, env={}), http)
            assert await windows.window(_settings(fake.url, "served")) == 4096
            assert await windows.window(_settings(fake.url, "plain")) == DEFAULT_CONTEXT_WINDOW
            assert await windows.window(_settings(fake.url, "gpt-4o")) == 128_000  # table
            asked = len(fake.gets)
            await windows.window(_settings(fake.url, "served"))
            assert len(fake.gets) == asked  # asked once per endpoint and model
            configured = ContextWindows(build_config(
                {"model": {"context_window": 1000, "compact_at": 0.5}}, env={}), http)
            budget = await configured.budget(_settings(fake.url, "served"))
            assert (budget.context_window, budget.limit) == (1000, 500)
    async with httpx.AsyncClient() as http:  # a server that is gone: not reported
        gone = ContextWindows(build_config({}, env={}), http)
        assert await gone.window(_settings("http://127.0.0.1:9/v1", "x")) == \
            DEFAULT_CONTEXT_WINDOW
