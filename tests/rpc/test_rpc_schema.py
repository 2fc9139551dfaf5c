"""protocol_schema(): complete, JSON-serialisable, and as strict as the models."""

import orjson

from tether.rpc import ERRORS, EVENT_TYPES, METHODS, PROTOCOL, protocol_schema


def test_schema_covers_every_method_event_and_error():
    schema = protocol_schema()
    orjson.dumps(schema)  # must be plain JSON
    assert schema["protocol"] == PROTOCOL == "tether/1"
    assert list(schema["methods"]) == list(METHODS)
    for name, entry in schema["methods"].items():
        assert entry["doc"] == METHODS[name].doc and entry["doc"]
        assert entry["params"]["type"] == "object"
        assert entry["params"]["additionalProperties"] is False
        assert entry["result"]["type"] == "object"
    assert schema["events"]["types"] == list(EVENT_TYPES)
    assert schema["events"]["method"] == "event"
    assert set(schema["events"]["envelope"]["required"]) == {"session_id", "seq", "type", "payload"}
    assert schema["errors"] == [{"code": c.code, "reason": r} for r, c in ERRORS.items()]
    assert len(schema["errors"]) == 11


def test_schema_shows_required_keys_and_bounds():
    submit = protocol_schema()["methods"]["prompt.submit"]["params"]
    assert set(submit["required"]) == {"session_id", "input_id", "text"}
    assert submit["properties"]["finite"] == {
        "default": False,
        "title": "Finite",
        "type": "boolean",
    }
    assert submit["properties"]["text"]["maxLength"] == 1_000_000
    assert submit["properties"]["input_id"]["minLength"] == 1


def test_snapshot_result_schema_nests_its_models():
    result = protocol_schema()["methods"]["session.create"]["result"]
    assert {"SessionInfo", "TranscriptMessage", "PendingAdmission", "Receipt", "Event"} <= set(
        result["$defs"]
    )
