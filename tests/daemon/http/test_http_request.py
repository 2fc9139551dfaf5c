"""The pure parts of the HTTP endpoint: a request body checked, and a TCP
connection routed by its request head (daemon/http/request.py, port.py)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tether.daemon.http.errors import ApiError
from tether.daemon.http.port import HeadRouter, is_upgrade
from tether.daemon.http.request import parse_chat_request

MODELS = ("tether", "test-model")


def parse(body: dict | bytes, limit: int = 1000):
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return parse_chat_request(raw, MODELS, limit)


def refusal(body: dict | bytes, limit: int = 1000) -> ApiError:
    with pytest.raises(ApiError) as exc:
        parse(body, limit)
    assert exc.value.status == 400
    return exc.value


def test_the_last_user_message_is_the_prompt_and_the_rest_the_history():
    req = parse({"model": "tether", "temperature": 0.3, "messages": [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "now"}]})
    assert req.prompt == "now"
    assert req.history == [{"role": "system", "content": "rules"},
                           {"role": "user", "content": "ab"},
                           {"role": "assistant", "content": "reply"}]
    assert not req.stream


def test_how_a_request_is_delivered_does_not_change_its_identity():
    body = {"model": "tether", "messages": [{"role": "user", "content": "x"}]}
    streamed = parse({**body, "stream": True, "stream_options": {"include_usage": True}})
    assert streamed.stream and streamed.include_usage
    assert streamed.digest == parse(body).digest
    assert parse({**body, "model": "test-model"}).digest != parse(body).digest


@pytest.mark.parametrize(("body", "code"), [
    (b"{not json", "invalid_json"),
    (b"[1, 2]", "invalid_json"),
    ({"messages": [{"role": "user", "content": "x"}]}, "invalid_model"),
    ({"model": "tether", "messages": []}, "invalid_messages"),
    ({"model": "tether", "messages": [{"role": "assistant", "content": "x"}]},
     "invalid_messages"),
    ({"model": "tether", "messages": [{"role": "tool", "content": "x", "tool_call_id": "c"},
                                      {"role": "user", "content": "x"}]}, "invalid_messages"),
    ({"model": "tether", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     "invalid_content"),
    ({"model": "tether", "messages": [{"role": "user", "content": "x"}], "n": 2},
     "unsupported_parameter"),
    ({"model": "tether", "messages": [{"role": "user", "content": "x"}], "stream": "yes"},
     "invalid_type"),
    ({"model": "tether", "messages": [{"role": "user", "content": "x"}], "colour": 1},
     "unknown_parameter"),
    ({"model": "tether", "messages": [{"role": "user", "content": "x" * 1001}]}, "too_long"),
])
def test_bad_bodies_are_refused_with_a_code(body, code):
    assert refusal(body).code == code


def test_a_model_not_served_is_not_found_as_openai_answers_it():
    with pytest.raises(ApiError) as exc:
        parse({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}, 1000)
    assert (exc.value.status, exc.value.code) == (404, "model_not_found")
    assert "gpt-9" in str(exc.value) and "tether" in str(exc.value)


TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def test_a_requests_own_tools_and_their_results_are_taken():
    asked = {"role": "user", "content": "find it"}
    req = parse({"model": "tether", "messages": [asked], "tools": [TOOL],
                 "tool_choice": "required", "response_format": {"type": "json_object"}})
    assert req.client_tools == (TOOL,)
    assert req.extras == {"tool_choice": "required", "response_format": {"type": "json_object"}}
    answered = parse({"model": "tether", "tools": [TOOL], "messages": [
        asked, {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "found"}]})
    assert answered.prompt == ""
    assert answered.tool_results == ({"tool_call_id": "call_1", "content": "found"},)
    assert answered.history[-1]["tool_calls"] == [CALL]
    # tool_choice "none": the client's tools are not offered
    assert parse({"model": "tether", "messages": [asked], "tools": [TOOL],
                  "tool_choice": "none"}).client_tools == ()


@pytest.mark.parametrize(("extra", "said"), [
    ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "other"}}},
     "not one of the request's tools"),
    ({"tools": [TOOL, TOOL]}, "same name"),
    ({"tools": [{"type": "function", "function": {"name": "read_file"}}]}, "tether's own"),
    ({"tool_choice": "required"}, "no `tools`"),
    ({"functions": [{"name": "f"}]}, "send `tools`"),
    ({"response_format": {"type": "json_schema"}}, "needs `json_schema`"),
])
def test_client_tools_that_cannot_be_served_are_refused(extra, said):
    body = {"model": "tether", "messages": [{"role": "user", "content": "x"}], **extra}
    with pytest.raises(ApiError) as exc:
        parse_chat_request(orjson.dumps(body), MODELS, 1000, frozenset({"read_file"}))
    assert said in exc.value.message


HEAD = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def test_only_a_websocket_upgrade_head_is_an_upgrade():
    assert is_upgrade(HEAD)
    assert not is_upgrade(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: 2\r\n\r\n")
    assert not is_upgrade(b"GARBAGE\r\n\r\n")


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.protocol: asyncio.BaseProtocol | None = None
        self.aborted = False

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def abort(self) -> None:
        self.aborted = True


class _Http(asyncio.Protocol):
    def __init__(self) -> None:
        self.received = b""

    def data_received(self, data: bytes) -> None:
        self.received += data


async def test_a_head_split_across_reads_is_routed_once_whole():
    for head, websocket in ((HEAD, True), (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", False)):
        http = _Http()
        got: list[bytes] = []
        router = HeadRouter(lambda http=http: http, lambda t, h, got=got: got.append(h))
        transport = _Transport()
        router.connection_made(transport)
        for i in range(0, len(head), 7):  # arrives in pieces
            router.data_received(head[i:i + 7])
        router.data_received(b"after")  # a late read is the new protocol's, not ours
        assert (got == [head]) is websocket
        assert (http.received == head) is not websocket
        assert (transport.protocol is http) is not websocket
        router.connection_lost(None)
        assert not transport.aborted


def test_json_nested_deeper_than_the_limit_is_refused():
    deep = b'{"model": "tether", "x": ' + b"[" * 200 + b"]" * 200 + b"}"
    assert refusal(deep).code == "invalid_json"
    assert "deeper" in refusal(deep).message


@pytest.mark.parametrize("message", [
    "connecting to provider at http://10.1.2.3:8000/v1/chat/completions timed out",
    "is the server running at llm.internal:8000?",
    "POST https://api.example.com/v1/chat/completions: 500",
    "connection to [fd00::1]:9000 failed",
])
def test_addresses_are_taken_out_of_messages_to_api_clients(message):
    from tether.daemon.http.errors import redact

    shown = redact(message)
    assert "<model server>" in shown
    assert not any(part in shown for part in ("10.1.2.3", "llm.internal", "example.com",
                                              "fd00", "8000", "9000"))


def test_n_null_or_1_and_no_op_values_are_accepted_and_ignored_names_kept():
    body = {"model": "tether", "messages": [{"role": "user", "content": "x"}]}
    for extra in ({"n": None}, {"n": 1}, {"tools": []}, {"tool_choice": "none"},
                  {"response_format": {"type": "text"}}, {"modalities": ["text"]}):
        assert parse({**body, **extra}).ignored == ()
    req = parse({**body, "top_k": 3, "prompt_cache_key": "k", "seed": None,
                 "stream_options": {"include_usage": True, "include_obfuscation": False}})
    assert req.ignored == ("prompt_cache_key", "top_k")  # a null one is not named


@pytest.mark.parametrize(("body", "said"), [
    ({"model": "tether", "messages": [{"role": "bot", "content": "x"}]}, "messages[0].role:"),
    ({"model": "tether", "messages": [{"role": "user", "content": 5}]},
     "messages[0].content: must be a string or a list of text parts"),
    ({"model": "tether", "messages": [{"role": "user", "content": "x"}], "stream": 1},
     "stream:"),
    ({"messages": [{"role": "user", "content": "x"}]}, "model: is required"),
])
def test_a_refusal_names_the_field_at_fault(body, said):
    assert said in refusal(body).message
