"""The pure admission ledger: canonical payload, digest, retries, receipts, and the
status machine, every status × every event, in the table and in the store's SQL."""

import itertools
import sqlite3
from pathlib import Path

import orjson
import pytest

from tether.daemon.ledger import rules as ledger
from tether.daemon.ledger.admissions import payload_of as stored_payload
from tether.daemon.ledger.rules import CancelAction, Event, IllegalTransition, Status
from tether.rpc.models import TURN_OPTION_FIELDS, PromptSubmitParams
from tether.store.sqlite.migrations import migrate
from tether.store.tables import admissions as admission_rows
from tether.store.tables import sessions as session_rows

NO_OPTIONS = dict.fromkeys(TURN_OPTION_FIELDS)


def payload_of(params: dict) -> dict:
    """What the admission service stores for these prompt.submit params."""
    p = PromptSubmitParams.model_validate(params)
    return stored_payload(p)


def retry_params(session_id: str, request_id: str, payload: dict) -> dict:
    """SPEC §4's recipe: a client rebuilds its exact retry from a stored row."""
    params = {"session_id": session_id, "input_id": request_id}
    params.update({k: v for k, v in payload.items() if k != ledger.TURN_OPTION_KEY})
    params.update(payload.get(ledger.TURN_OPTION_KEY, {}))
    return params


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
    rebuilt = retry_params("ses_1", "in_1", orjson.loads(stored))
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
    # model and cost_usd: null for a result stored without them (a turn that asked no model)
    assert done["result"] == {"text": "ok", "usage": {"prompt_tokens": 3}, "error": None,
                              "model": None, "cost_usd": None}
    priced = ledger.receipt_from_row(row(
        status="terminal", outcome="completed",
        result_json='{"text":"ok","usage":{},"model":"gpt-4o","cost_usd":0.25}'))
    assert (priced["result"]["model"], priced["result"]["cost_usd"]) == ("gpt-4o", 0.25)
    failed = ledger.receipt_from_row(row(
        status="terminal", outcome="failed",
        result_json='{"text":"","usage":{},"error":"server_error: boom"}'))
    assert failed["result"]["error"] == "server_error: boom"


EXPECTED = {
    # (status, event): next status; every pair not listed is refused
    ("queued", "start"): "started",
    ("queued", "withdraw"): "terminal",
    ("started", "finish"): "terminal",
    ("started", "orphan"): "unknown",
    ("unknown", "resolve"): "terminal",
}
PAIRS = list(itertools.product(list(Status), list(Event)))


@pytest.mark.parametrize(("status", "event"), PAIRS, ids=[f"{s}-{e}" for s, e in PAIRS])
def test_every_status_and_event(status, event):
    expected = EXPECTED.get((status.value, event.value))
    if expected is None:
        with pytest.raises(IllegalTransition):
            ledger.next_status(status, event)
        assert status.value not in ledger.sources(event)
    else:
        assert ledger.next_status(status, event) == expected
        assert status.value in ledger.sources(event)


def test_terminal_is_final_and_each_event_records_only_its_outcomes():
    assert not any((Status.TERMINAL, e) in ledger.TRANSITIONS for e in Event)
    assert ledger.outcomes(Event.FINISH) == ledger.OUTCOMES
    assert ledger.outcomes(Event.WITHDRAW) == ("cancelled", "failed")
    assert ledger.outcomes(Event.RESOLVE) == ("interrupted",)
    assert ledger.outcomes(Event.START) == () == ledger.outcomes(Event.ORPHAN)
    assert ledger.check("started", Event.FINISH, "completed") == Status.TERMINAL
    with pytest.raises(IllegalTransition):
        ledger.check("unknown", Event.RESOLVE, "completed")
    with pytest.raises(IllegalTransition):
        ledger.check("queued", Event.WITHDRAW, "completed")
    with pytest.raises(IllegalTransition):
        ledger.check("queued", Event.START, "completed")


def test_what_cancel_and_resolve_do_in_each_status():
    assert [ledger.decide_cancel(s) for s in Status] == [
        CancelAction.WITHDRAW, CancelAction.STOP, CancelAction.REFUSE, CancelAction.NOTHING]
    assert [ledger.decide_resolve(s) for s in Status] == [None, None, True, False]


def _apply(conn: sqlite3.Connection, event: Event, admission_id: str) -> str:
    """Apply ``event`` with the store's own statements; the row's status after it."""
    if event is Event.START:
        admission_rows.mark_started(conn, admission_id, 2, 2.0, ledger.sources(event))
    elif event is Event.ORPHAN:
        admission_rows.mark_unknown_before(conn, 3, ledger.sources(event))
    else:
        admission_rows.finish(conn, admission_id, ledger.outcomes(event)[0], "{}", 2.0,
                              ledger.sources(event))
    return admission_rows.get(conn, admission_id)["status"]


@pytest.mark.parametrize(("status", "event"), PAIRS, ids=[f"{s}-{e}" for s, e in PAIRS])
def test_the_store_changes_a_row_exactly_as_the_table_says(tmp_path: Path, status, event):
    conn = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    session_rows.insert(conn, session_id="ses_1", request_id=None, params_digest=None,
                        parent_session_id=None, source="api", title=None, cwd=None,
                        options={}, now=1.0)
    admission_rows.insert_new(conn, admission_id="adm_1", target_session_id="ses_1",
                              principal_id="local", request_id="in_1", payload_json="{}",
                              payload_digest="d", owner_epoch=1, now=1.0)
    conn.execute("UPDATE session_admissions SET status = ?, outcome = ? "
                 "WHERE admission_id = 'adm_1'",
                 (status.value, "completed" if status is Status.TERMINAL else None))
    after = _apply(conn, event, "adm_1")
    assert after == EXPECTED.get((status.value, event.value), status.value)
    conn.close()


def test_a_unit_told_the_last_seq_numbers_its_events_after_it(tmp_path: Path):
    from tether.daemon.ledger.journal import Tx
    from tether.store.tables import events as event_rows

    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    migrate(conn)
    session_rows.insert(conn, session_id="S", request_id=None, params_digest=None,
                        parent_session_id=None, source="api", title=None, cwd=None,
                        options={}, now=1.0)
    for _ in range(3):
        event_rows.append(conn, "S", "session.info", "{}", None, 1.0)
    tx = Tx(conn, 2.0)
    tx.seen_last("S", 3)
    assert [tx.event("S", "session.info", {}), tx.event("S", "session.info", {})] == [4, 5]
    # what was told before is kept: a later, stale answer does not move it back
    tx.seen_last("S", 3)
    assert tx.event("S", "session.info", {}) == 6
    assert [r[0] for r in conn.execute("SELECT seq FROM events WHERE session_id = 'S' "
                                       "ORDER BY seq")] == [1, 2, 3, 4, 5, 6]
