"""chat_history: the stored transcript as the model is shown it."""

import orjson

from tether.daemon.engine.transcript import UNFINISHED_TOOL_CALL, chat_history


def call(call_id: str, name: str = "delegate_task") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_answered_tool_calls_pass_through_unchanged():
    rows = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call("a")]},
        {"role": "tool", "content": "done", "tool_call_id": "a", "name": "delegate_task"},
        {"role": "assistant", "content": "ok"},
    ]
    assert chat_history(rows) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call("a")]},
        {"role": "tool", "content": "done", "tool_call_id": "a", "name": "delegate_task"},
        {"role": "assistant", "content": "ok"},
    ]


def test_a_turn_stopped_inside_a_tool_call_gets_an_error_reply_for_it():
    # the owner died (or the turn was interrupted) while call "b" ran: no reply stored
    rows = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "content": "done", "tool_call_id": "a", "name": "delegate_task"},
        {"role": "user", "content": "second"},
    ]
    out = chat_history(rows)
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert out[3] == {"role": "tool", "tool_call_id": "b", "name": "delegate_task",
                      "content": UNFINISHED_TOOL_CALL}
    assert "never returned" in orjson.loads(out[3]["content"])["error"]


def test_unanswered_calls_at_the_end_are_closed_too():
    rows = [{"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [call("z", "other")]}]
    assert chat_history(rows)[-1] == {"role": "tool", "tool_call_id": "z", "name": "other",
                                      "content": UNFINISHED_TOOL_CALL}
