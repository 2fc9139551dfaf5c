"""model.stream auto | true | false against servers that behave as real ones do: a streamed
request the server cannot stream is asked again without it, and remembered."""

from __future__ import annotations

import json

import pytest
from fakeprovider import FakeProvider, Stall, text_reply, tool_call_reply
from fakeservers import error_mid_stream, llama_cpp_python, ollama, refuses_stream

from tether.daemon.config.core import ConfigError, build_config
from tether.daemon.model.provider import OpenAIProvider, ProviderError
from tether.daemon.model.stream_mode import StreamMemory

USER = [{"role": "user", "content": "what is in notes.txt?"}]
TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def make(client, fake, memory=None, **opts) -> OpenAIProvider:
    return OpenAIProvider(client, name="custom", base_url=fake.url, api_key=None,
                          backoff_base=0.001, backoff_cap=0.01, stream_memory=memory, **opts)


class Deltas:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def __call__(self, text: str) -> None:
        self.texts.append(text)


def calls_then_text(request: dict):
    """A tool call first; once its result is in the transcript, a text answer."""
    if any(m.get("role") == "tool" for m in request["messages"]):
        return text_reply("It says hello.")
    return tool_call_reply("read_file", {"path": "notes.txt"})


@pytest.mark.parametrize("server", [llama_cpp_python, error_mid_stream, refuses_stream],
                         ids=["llama-cpp-python", "500-mid-stream", "400-names-streaming"])
async def test_auto_asks_again_without_streaming_and_remembers(client, server):
    memory = StreamMemory()
    with FakeProvider(server(calls_then_text)) as fake:
        provider = make(client, fake, memory, stream="auto")
        first = await provider.complete(messages=USER, tools=TOOLS, model="m")
        assert [c.name for c in first.tool_calls] == ["read_file"]
        assert json.loads(first.tool_calls[0].arguments) == {"path": "notes.txt"}
        assert [r["stream"] for r in fake.requests] == [True, False]

        # the next request to this endpoint and model (a new provider object, as each
        # turn gets) goes straight to a plain answer, and its text reaches the callback
        deltas = Deltas()
        again = make(client, fake, memory, stream="auto")
        followup = USER + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "hello"}]
        second = await again.complete(messages=followup, tools=TOOLS, model="m",
                                      on_delta=deltas)
        assert second.text == "It says hello." and deltas.texts == ["It says hello."]
        assert [r["stream"] for r in fake.requests] == [True, False, False]
        assert "stream_options" not in fake.requests[-1]
        # another model at the same endpoint is tried streamed again
        assert again.streams("other-model") and not again.streams("m")
    assert list(memory.known()) == [(fake.url, "m")]


async def test_true_never_falls_back_and_says_why(client):
    with FakeProvider(llama_cpp_python(calls_then_text)) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, stream="true").complete(messages=USER, tools=TOOLS,
                                                             model="m")
        assert [r["stream"] for r in fake.requests] == [True]
    assert caught.value.reason == "malformed_response"
    assert "event stream ended" in caught.value.detail


async def test_false_never_streams(client):
    with FakeProvider(llama_cpp_python(calls_then_text)) as fake:
        answer = await make(client, fake, stream=False).complete(messages=USER, tools=TOOLS,
                                                                 model="m")
        assert answer.tool_calls and [r["stream"] for r in fake.requests] == [False]


async def test_ollama_tool_call_in_one_chunk_needs_no_fallback(client):
    memory = StreamMemory()
    with FakeProvider(ollama(calls_then_text)) as fake:
        answer = await make(client, fake, memory, stream="auto").complete(
            messages=USER, tools=TOOLS, model="m")
        assert [r["stream"] for r in fake.requests] == [True]
    assert [(c.id, c.name) for c in answer.tool_calls] == [("call_1", "read_file")]
    assert json.loads(answer.tool_calls[0].arguments) == {"path": "notes.txt"}
    assert memory.known() == {}


async def test_a_stream_that_failed_after_text_is_not_asked_again(client):
    from fakeprovider import RawSSE

    chunk = {"choices": [{"index": 0, "delta": {"content": "half an ans"}}]}
    broken = RawSSE(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    memory = StreamMemory()
    with FakeProvider(lambda req: broken) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, memory, stream="auto").complete(
                messages=USER, tools=TOOLS, model="m", on_delta=Deltas())
        assert [r["stream"] for r in fake.requests] == [True]
    assert caught.value.reason == "malformed_response" and memory.known() == {}


async def test_a_timeout_is_not_a_reason_to_stop_streaming(client):
    memory = StreamMemory()
    with FakeProvider(lambda req: Stall(5)) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, memory, stream="auto", read_timeout=0.3,
                       max_retries=0).complete(messages=USER, tools=TOOLS, model="m")
        assert [r["stream"] for r in fake.requests] == [True]
    assert caught.value.reason == "timeout" and memory.known() == {}


async def test_when_the_plain_request_fails_too_both_failures_are_told(client):
    from fakeprovider import Status

    def handler(req):
        if req["stream"]:
            return llama_cpp_python(text_reply)(req)
        return Status(404)

    memory = StreamMemory()
    with FakeProvider(handler) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, memory, stream="auto").complete(
                messages=USER, tools=TOOLS, model="m")
    assert caught.value.reason == "not_found"
    assert "without streaming after the streamed request failed" in caught.value.detail
    assert "event stream ended" in caught.value.detail
    assert memory.known() == {}


@pytest.mark.parametrize(("written", "mode"), [
    (None, "auto"), (True, "true"), (False, "false"), ("auto", "auto"), ("False", "false")])
def test_model_stream_config(written, mode):
    raw = {} if written is None else {"model": {"stream": written}}
    assert build_config(raw, env={}).model.stream == mode


@pytest.mark.parametrize("bad", ["sometimes", 1, ["auto"]])
def test_model_stream_config_refuses_other_values(bad):
    with pytest.raises(ConfigError, match="model.stream` must be auto, true or false"):
        build_config({"model": {"stream": bad}}, env={})


@pytest.mark.parametrize(("message", "falls_back"), [
    ("Streaming is not supported with tools", True),
    ("unknown field stream_options", True),
    ("upstream model rejected the request", False),
    ("tools are not supported", False)])
def test_which_4xx_names_streaming(message, falls_back):
    from tether.daemon.model.completions import AttemptFailed
    from tether.daemon.model.stream_mode import stream_failure

    failure = AttemptFailed("bad_request", "provider returned HTTP 400", retryable=False,
                            status=400, body=message)
    assert stream_failure(failure, in_stream=False, answered=False) is falls_back
    assert stream_failure(failure, in_stream=False, answered=True) is False


async def test_an_assistant_message_without_text_goes_out_as_every_server_takes_it(client):
    """llama-cpp-python's server refuses ``"content": null`` and its tool-calling
    template reads the key; OpenAI takes "" as well as null."""
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": None, "tool_calls": calls},
               {"role": "tool", "tool_call_id": "c1", "content": "done"},
               {"role": "assistant", "content": None},
               {"role": "user", "content": "again"}]
    with FakeProvider(lambda req: text_reply("ok")) as fake:
        await make(client, fake).complete(messages=history, tools=None, model="m")
        sent = fake.requests[0]["messages"]
    assert sent[1] == {"role": "assistant", "content": "", "tool_calls": calls}
    assert sent[3] == {"role": "assistant", "content": ""}
    assert [sent[0], sent[2], sent[4]] == [history[0], history[2], history[4]]
    assert history[1]["content"] is None  # the transcript itself is left as it was


async def test_the_connection_a_broken_stream_left_is_not_counted_as_a_retry(client, caplog):
    """The server closes the connection after the broken stream; the plain request that
    follows on that pooled connection fails at once and is asked again on a new one,
    without a retry announced or a backoff."""
    with FakeProvider(llama_cpp_python(calls_then_text)) as fake:
        provider = make(client, fake, stream="auto", max_retries=0)
        answer = await provider.complete(messages=USER, tools=TOOLS, model="m")
        assert [r["stream"] for r in fake.requests] == [True, False]
    assert answer.tool_calls
    assert "retrying" not in caplog.text
