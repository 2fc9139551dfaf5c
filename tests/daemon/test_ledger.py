"""The pure admission ledger: canonical payload, digest, retry params, receipts."""

import orjson
import pytest

from tether.daemon import ledger
from tether.daemon.admissions import AdmissionService
from tether.rpc.models import TURN_OPTION_FIELDS, PromptSubmitParams

NO_OPTIONS = dict.fromkeys(TURN_OPTION_FIELDS)


def payload_of(params: dict) -> dict:
    """What the admission service stores for these prompt.submit params."""
    p = PromptSubmitParams.model_validate(params)
    return AdmissionService.payload_of(p)


def test_canonical_payload_groups_only_the_options_that_were_sent():
    assert ledger.canonical_payload("hi", False, NO_OPTIONS) == {"text": "hi", "finite": False}
    payload = ledger.canonical_payload(
        "hi", True, {**NO_OPTIONS, "model": "m", "max_turns": 2, "ignore_rules": False,
                     "toolsets": []})
    # False, 0-like and empty values were sent, so they are kept; None was not sent
    assert payload == {"text": "hi", "finite": True,
                       "cli_turn_v1": {"model": "m", "max_turns": 2, "ignore_rules": False,
                                       "toolsets": []}}


def test_encoded_payload_is_sorted_compact_utf8():
    payload = {"text": "ünïcode ✓", "finite": True, "cli_turn_v1": {"toolsets": ["b", "a"],
                                                                     "model": "m"}}
    text = ledger.encode_payload(payload)
    assert text == '{"cli_turn_v1":{"model":"m","toolsets":["b","a"]},"finite":true,' \
                   '"text":"ünïcode ✓"}'
    # key order of the input does not matter; list order does
    shuffled = {"finite": True, "cli_turn_v1": {"model": "m", "toolsets": ["b", "a"]},
                "text": "ünïcode ✓"}
    assert ledger.encode_payload(shuffled) == text
    assert ledger.digest(ledger.encode_payload(shuffled)) == ledger.digest(text)
    reordered = {**payload, "cli_turn_v1": {"model": "m", "toolsets": ["a", "b"]}}
    assert ledger.digest(ledger.encode_payload(reordered)) != ledger.digest(text)


def test_digest_tells_apart_what_a_conflict_must_catch():
    base = payload_of({"session_id": "s", "input_id": "i", "text": "hi"})
    variants = [
        {"text": "hi", "finite": True},
        {"text": "hi "},
        {"text": "hi", "model": "m"},
        {"text": "hi", "attachments": [{"name": "a.txt", "content": "x"}]},
    ]
    digests = {ledger.digest(ledger.encode_payload(base))}
    for v in variants:
        digests.add(ledger.digest(ledger.encode_payload(
            payload_of({"session_id": "s", "input_id": "i", **v}))))
    assert len(digests) == 1 + len(variants)
    # an option sent as null is the same as leaving it out
    with_null = payload_of({"session_id": "s", "input_id": "i", "text": "hi", "model": None})
    assert ledger.encode_payload(with_null) == ledger.encode_payload(base)


@pytest.mark.parametrize("params", [
    {"text": "plain"},
    {"text": "finite", "finite": True},
    {"text": "all options", "provider": "custom", "model": "m", "base_url": "http://x/v1",
     "toolsets": ["delegation"], "reasoning": "high", "max_turns": 5, "ignore_rules": True},
    {"text": "with files", "attachments": [{"name": "a.md", "content": "# A",
                                            "mime_type": "text/markdown"}]},
])
def test_retry_params_rebuild_an_identical_submission(params):
    sent = {"session_id": "ses_1", "input_id": "in_1", **params}
    stored = ledger.encode_payload(payload_of(sent))
    rebuilt = ledger.retry_params("ses_1", "in_1", orjson.loads(stored))
    # the rebuilt params are valid as they are and digest the same
    assert ledger.encode_payload(payload_of(rebuilt)) == stored
    assert rebuilt["session_id"] == "ses_1" and rebuilt["input_id"] == "in_1"
    assert "cli_turn_v1" not in rebuilt


def row(**over):
    base = {"admission_id": "adm_1", "target_session_id": "ses_1", "request_id": "in_1",
            "status": "queued", "outcome": None, "result_json": None}
    return {**base, **over}


def test_receipt_of_an_open_admission_has_no_outcome_or_result():
    for status in ("queued", "started", "unknown"):
        assert ledger.receipt_from_row(row(status=status)) == {
            "admission_id": "adm_1", "session_id": "ses_1", "input_id": "in_1",
            "status": status, "outcome": None, "result": None}


def test_receipt_of_a_terminal_admission_always_has_text_usage_and_error():
    done = ledger.receipt_from_row(row(
        status="terminal", outcome="completed",
        result_json='{"text":"ok","usage":{"prompt_tokens":3}}'))
    assert done["outcome"] == "completed"
    assert done["result"] == {"text": "ok", "usage": {"prompt_tokens": 3}, "error": None}
    failed = ledger.receipt_from_row(row(
        status="terminal", outcome="failed",
        result_json='{"text":"","usage":{},"error":"server_error: boom"}'))
    assert failed["result"]["error"] == "server_error: boom"


def test_transitions():
    assert ledger.can_cancel("queued") and ledger.can_cancel("started")
    assert not ledger.can_cancel("unknown") and not ledger.can_cancel("terminal")
    assert ledger.can_resolve("unknown")
    assert not any(ledger.can_resolve(s) for s in ("queued", "started", "terminal"))
