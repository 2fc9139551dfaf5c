"""protocol_schema(): complete, JSON-serialisable, one $defs entry per type, as strict as
the models, and strong enough to generate types from."""

import orjson

from tether.rpc import ERRORS, EVENT_TYPES, METHODS, PROTOCOL, protocol_schema


def deref(schema: dict, ref: dict) -> dict:
    return schema["$defs"][ref["$ref"].rsplit("/", 1)[1]]


def test_schema_covers_every_method_event_and_error():
    schema = protocol_schema()
    orjson.dumps(schema)  # must be plain JSON
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["protocol"] == PROTOCOL == "tether/1"
    assert list(schema["methods"]) == list(METHODS)
    for name, entry in schema["methods"].items():
        assert entry["doc"] == METHODS[name].doc and entry["doc"]
        params = deref(schema, entry["params"])
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert deref(schema, entry["result"])["type"] == "object"
    events = schema["events"]
    assert events["types"] == list(EVENT_TYPES) == list(events["payloads"]) == list(events["events"])
    assert events["method"] == "event"
    union = schema["$defs"]["AnyEvent"]
    assert union["discriminator"] == {"propertyName": "type"}
    assert len(union["oneOf"]) == len(EVENT_TYPES)
    for type_, ref in events["events"].items():
        event = deref(schema, ref)
        assert event["properties"]["type"]["const"] == type_
        assert set(event["required"]) == {"session_id", "seq", "type", "payload", "admission_id"}
    assert [(e["code"], e["reason"]) for e in schema["errors"]] == [
        (c.code, r) for r, c in ERRORS.items()]
    assert len(schema["errors"]) == 12
    invalid = deref(schema, next(e for e in schema["errors"] if e["reason"] == "invalid_params")
                    ["data"])
    assert {"reason", "detail", "fields"} <= set(invalid["required"])
    assert set(schema["frames"]) == {"request", "result", "error", "event"}


def test_titles_are_unique_and_properties_carry_none():
    schema = protocol_schema()
    titles = [d["title"] for d in schema["$defs"].values()]
    assert titles == list(schema["$defs"]) and len(set(titles)) == len(titles)
    for d in schema["$defs"].values():
        for prop in (d.get("properties") or {}).values():
            assert "title" not in prop


def test_schema_shows_required_keys_and_bounds():
    schema = protocol_schema()
    submit = deref(schema, schema["methods"]["prompt.submit"]["params"])
    assert set(submit["required"]) == {"session_id", "input_id", "text"}
    assert submit["properties"]["finite"] == {"default": False, "type": "boolean"}
    assert submit["properties"]["text"]["maxLength"] == 1_000_000
    assert submit["properties"]["input_id"]["minLength"] == 1


def test_always_sent_fields_are_required_in_results():
    schema = protocol_schema()
    receipt = schema["$defs"]["Receipt"]
    assert set(receipt["required"]) == {"admission_id", "session_id", "input_id", "status",
                                        "outcome", "result"}  # paused_by: only when paused
    snapshot = schema["$defs"]["Snapshot"]
    assert "events" in snapshot["required"] and "running" in snapshot["required"]
    describe = schema["$defs"]["RuntimeDescribeResult"]
    assert {"providers", "toolsets"} <= set(describe["required"])


