"""Params strictness and limits, and that result models build and serialise as the daemon needs."""

import orjson
import pytest
from pydantic import ValidationError

from tether.rpc import (
    EVENT_TYPES,
    MAX_TEXT_CHARS,
    TURN_OPTION_FIELDS,
    Event,
    PingParams,
    PromptReceiptParams,
    PromptSubmitParams,
    Receipt,
    SessionCreateParams,
    SessionEventsSinceParams,
    SessionListParams,
    SessionResumeParams,
    Snapshot,
    TurnOptions,
)

SUBMIT = {"session_id": "s1", "input_id": "in-1", "text": "hello"}


def problems(model, data):
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return {(".".join(map(str, e["loc"])), e["type"]) for e in info.value.errors()}


def test_submit_defaults():
    p = PromptSubmitParams.model_validate(SUBMIT)
    assert p.finite is False
    assert p.attachments is None
    assert all(getattr(p, name) is None for name in TURN_OPTION_FIELDS)


@pytest.mark.parametrize(
    ("patch", "loc", "kind"),
    [
        ({"finite": "true"}, "finite", "bool_type"),
        ({"finite": 1}, "finite", "bool_type"),
        ({"text": 1}, "text", "string_type"),
        ({"session_id": 7}, "session_id", "string_type"),
        ({"max_turns": "3"}, "max_turns", "int_type"),
        ({"max_turns": 3.0}, "max_turns", "int_type"),
        ({"max_turns": True}, "max_turns", "int_type"),
        ({"max_turns": 0}, "max_turns", "greater_than_equal"),
        ({"max_turns": 201}, "max_turns", "less_than_equal"),
        ({"reasoning": "extreme"}, "reasoning", "literal_error"),
        ({"toolsets": "web"}, "toolsets", "list_type"),
        ({"toolsets": ["web", 3]}, "toolsets.1", "string_type"),
        ({"ignore_rules": "yes"}, "ignore_rules", "bool_type"),
        ({"input_id": ""}, "input_id", "string_too_short"),
        ({"input_id": "x" * 201}, "input_id", "string_too_long"),
        ({"surprise": 1}, "surprise", "extra_forbidden"),
        (
            {"attachments": [{"name": "a", "content": "b", "extra": 1}]},
            "attachments.0.extra",
            "extra_forbidden",
        ),
        ({"attachments": [{"name": "", "content": "b"}]}, "attachments.0.name", "string_too_short"),
        ({"attachments": [{"name": "a", "content": "b"}] * 17}, "attachments", "too_long"),
    ],
)
def test_submit_rejects_without_coercion(patch, loc, kind):
    assert (loc, kind) in problems(PromptSubmitParams, {**SUBMIT, **patch})


@pytest.mark.parametrize("missing", ["session_id", "input_id", "text"])
def test_submit_requires_its_keys(missing):
    data = {k: v for k, v in SUBMIT.items() if k != missing}
    assert problems(PromptSubmitParams, data) == {(missing, "missing")}


def test_text_bound_is_the_module_constant():
    PromptSubmitParams.model_validate({**SUBMIT, "text": "x" * MAX_TEXT_CHARS})
    assert ("text", "string_too_long") in problems(
        PromptSubmitParams, {**SUBMIT, "text": "x" * (MAX_TEXT_CHARS + 1)}
    )


def test_turn_option_fields_match_the_mixin_in_order():
    assert tuple(TurnOptions.model_fields) == TURN_OPTION_FIELDS
    for model in (SessionCreateParams, PromptSubmitParams):
        assert set(TURN_OPTION_FIELDS) <= set(model.model_fields)


def test_session_create_all_optional_and_bounded():
    p = SessionCreateParams.model_validate({})
    assert p.request_id is None and p.source is None
    SessionCreateParams.model_validate({"source": "x" * 32, "title": "t" * 200, "model": "m"})
    assert ("source", "string_too_long") in problems(SessionCreateParams, {"source": "x" * 33})
    assert ("title", "string_too_long") in problems(SessionCreateParams, {"title": "t" * 201})
    assert ("cwd", "string_too_long") in problems(SessionCreateParams, {"cwd": "/" * 4097})
    assert ("request_id", "string_too_short") in problems(SessionCreateParams, {"request_id": ""})


def test_paging_defaults_and_bounds():
    assert SessionListParams.model_validate({}).limit == 50
    assert ("limit", "less_than_equal") in problems(SessionListParams, {"limit": 501})
    since = SessionEventsSinceParams.model_validate({"session_id": "s", "after_seq": 0})
    assert since.limit == 1000
    assert ("after_seq", "greater_than_equal") in problems(
        SessionEventsSinceParams, {"session_id": "s", "after_seq": -1}
    )
    assert ("after_seq", "missing") in problems(SessionEventsSinceParams, {"session_id": "s"})
    assert SessionResumeParams.model_validate({"session_id": "s"}).after_seq is None


def test_empty_params_models_reject_anything():
    assert problems(PingParams, {"x": 1}) == {("x", "extra_forbidden")}


@pytest.mark.parametrize(
    "data",
    [
        {"session_id": "s"},
        {"session_id": "s", "admission_id": "a", "input_id": "i"},
        {"session_id": "s", "admission_id": None, "input_id": None},
    ],
)
def test_receipt_lookup_needs_exactly_one_key(data):
    with pytest.raises(ValidationError, match="exactly one of admission_id or input_id"):
        PromptReceiptParams.model_validate(data)


def test_receipt_lookup_by_either_key():
    assert PromptReceiptParams.model_validate({"session_id": "s", "input_id": "i"}).input_id == "i"
    assert (
        PromptReceiptParams.model_validate({"session_id": "s", "admission_id": "a"}).admission_id
        == "a"
    )


def test_event_types_are_spec_section_6():
    assert EVENT_TYPES == (
        "session.info",
        "message.start",
        "message.delta",
        "reasoning.delta",
        "tool.start",
        "tool.complete",
        "tool.progress",  # issue 23: an MCP server's progress notifications
        "subagent.start",
        "subagent.complete",
        "delegation.dispatched",
        "delegation.complete",
        "message.complete",
        # SPEC §12: approvals, and the notice of a background process
        "approval.requested",
        "approval.resolved",
        "process.complete",
        "session.replay_gap",
        "cron.notice",  # SPEC §12: a scheduled job's answer delivered to a session
        "model.retry",
        "session.compacted",  # SPEC §13: long sessions
        "fs.request",  # issue 23: a notice to the editor that executes the file tools
        "terminal.request",  # issue 23: ... and the sandboxed commands
    )
    for name in EVENT_TYPES:
        assert name in Event.__doc__


SNAPSHOT = {
    "session_id": "s1",
    "stored_session_id": "s1",
    "info": {
        "source": "cli",
        "title": None,
        "cwd": "/tmp",
        "model": None,
        "provider": "demo",
        "toolsets": ["delegation"],
        "created_at": 1700000000.25,
    },
    "messages": [
        {"role": "user", "content": "hi", "admission_id": "a1", "created_at": 1700000001},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function"}],
            "created_at": 1700000002.0,
        },
    ],
    "pending": [
        {
            "receipt": {
                "admission_id": "a2",
                "session_id": "s1",
                "input_id": "i2",
                "status": "queued",
            },
            "text": "next",
        }
    ],
    "running": None,
    "last_seq": 4,
    "events": [{"session_id": "s1", "seq": 4, "type": "message.delta", "payload": {"text": "he"}}],
}


def test_snapshot_builds_from_plain_dicts_and_round_trips_json():
    snap = Snapshot(**SNAPSHOT)
    wire = orjson.loads(snap.model_dump_json())
    assert wire["info"]["parent_session_id"] is None
    assert wire["messages"][0]["created_at"] == 1700000001.0
    assert wire["pending"][0]["receipt"]["outcome"] is None
    assert wire["events"][0]["admission_id"] is None
    # what a client reads back validates strictly against the same model
    assert Snapshot.model_validate(wire) == snap


def test_receipt_terminal_with_result():
    r = Receipt(
        admission_id="a",
        session_id="s",
        input_id="i",
        status="terminal",
        outcome="completed",
        result={"text": "done", "usage": {"prompt_tokens": 3}},
    )
    assert r.model_dump(mode="json")["result"] == {
        "text": "done",
        "usage": {"prompt_tokens": 3},
        "error": None,
        "model": None,
        "cost_usd": None,
    }
    with pytest.raises(ValidationError):
        Receipt(admission_id="a", session_id="s", input_id="i", status="done")
