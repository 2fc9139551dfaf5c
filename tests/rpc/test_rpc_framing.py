"""Client-side framing: requests, notifications, events, and reading replies back."""

import orjson
import pytest

from tether.rpc import (
    AdmissionConflict,
    Event,
    InternalError,
    NotFound,
    ParseError,
    PromptSubmitParams,
    RpcError,
    decode_reply,
    encode_error,
    encode_event,
    encode_notification,
    encode_request,
    encode_result,
)


def test_request_with_model_params_leaves_out_unsent_options():
    params = PromptSubmitParams(session_id="s", input_id="i", text="hi", model="m")
    assert orjson.loads(encode_request(3, "prompt.submit", params)) == {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "prompt.submit",
        "params": {"session_id": "s", "input_id": "i", "text": "hi", "finite": False, "model": "m"},
    }


def test_request_without_params_omits_the_member():
    assert orjson.loads(encode_request("a", "ping")) == {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "ping",
    }
    assert orjson.loads(encode_request(1, "ping", {}))["params"] == {}


def test_notification_has_no_id():
    assert orjson.loads(encode_notification("ping", {})) == {
        "jsonrpc": "2.0",
        "method": "ping",
        "params": {},
    }


def test_event_notification():
    ev = Event(
        session_id="s", seq=7, type="message.delta", payload={"text": "hé"}, admission_id="a"
    )
    assert orjson.loads(encode_event(ev)) == {
        "jsonrpc": "2.0",
        "method": "event",
        "params": {
            "session_id": "s",
            "seq": 7,
            "type": "message.delta",
            "payload": {"text": "hé"},
            "admission_id": "a",
        },
    }


def test_result_and_error_replies_decode_back():
    assert decode_reply(encode_result(1, {"pong": True})) == {"pong": True}
    assert decode_reply(orjson.loads(encode_result("x", [1, 2]))) == [1, 2]
    with pytest.raises(AdmissionConflict) as info:
        decode_reply(encode_error(4, AdmissionConflict("payload differs", admission_id="adm-1")))
    assert info.value.data == {"admission_id": "adm-1"}
    assert info.value.detail == "payload differs"


def test_error_reply_with_unencodable_extra_still_goes_out():
    reply = orjson.loads(encode_error(1, NotFound("x", thing=object())))
    assert reply["error"]["message"] == "not_found"
    assert reply["error"]["data"]["thing"].startswith("<object")


def test_decode_reply_unknown_reason_is_base_rpc_error():
    reply = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32050,
            "message": "brand_new",
            "data": {"reason": "brand_new", "detail": "d"},
        },
    }
    with pytest.raises(RpcError) as info:
        decode_reply(reply)
    assert type(info.value) is RpcError
    assert (info.value.code, info.value.reason) == (-32050, "brand_new")


@pytest.mark.parametrize("reply", [{"jsonrpc": "2.0", "id": 1}, [], b"[1]"])
def test_decode_reply_malformed(reply):
    with pytest.raises(InternalError, match="malformed reply"):
        decode_reply(reply)


def test_decode_reply_not_json():
    with pytest.raises(ParseError):
        decode_reply(b"{oops")
