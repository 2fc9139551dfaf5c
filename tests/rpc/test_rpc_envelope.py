"""The event envelope and the replay-gap notice, as both sides build and send them."""

import orjson

from tether.rpc import (
    EVENT_TYPES,
    GAP_CLIENT_QUEUE_OVERFLOW,
    GAP_VIEWER_QUEUE_OVERFLOW,
    REPLAY_GAP,
    Event,
    encode_event,
    event_envelope,
    replay_gap,
)


def test_an_envelope_has_every_key_and_admission_id_defaults_to_null():
    assert event_envelope("s", 4, "message.delta", {"text": "x"}) == {
        "session_id": "s",
        "seq": 4,
        "type": "message.delta",
        "payload": {"text": "x"},
        "admission_id": None,
    }
    assert event_envelope("s", 5, "message.start", {}, "adm")["admission_id"] == "adm"


def test_the_replay_gap_names_the_last_seq_delivered_and_reuses_no_seq():
    gap = replay_gap("s", 9, GAP_VIEWER_QUEUE_OVERFLOW)
    assert gap == {
        "session_id": "s",
        "seq": None,
        "type": "session.replay_gap",
        "payload": {"last_seq": 9, "reason": "viewer_queue_overflow"},
        "admission_id": None,
    }
    assert gap["type"] == REPLAY_GAP and REPLAY_GAP in EVENT_TYPES
    assert replay_gap("s", 0, GAP_CLIENT_QUEUE_OVERFLOW)["payload"]["reason"] == (
        "client_queue_overflow"
    )


def test_envelopes_are_valid_events():
    envelope = event_envelope("s", 1, "message.complete", {"outcome": "completed"}, "a")
    assert Event.model_validate(envelope).model_dump() == envelope


def test_an_envelope_and_its_model_encode_to_the_same_frame():
    envelope = event_envelope("s", 7, "message.delta", {"text": "hé"}, "a")
    frame = encode_event(envelope)
    assert frame == encode_event(Event.model_validate(envelope))
    assert orjson.loads(frame) == {"jsonrpc": "2.0", "method": "event", "params": envelope}
