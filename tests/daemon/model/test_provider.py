"""OpenAIProvider against a real fake server over HTTP: answers, streaming, retries, failures."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from fakeprovider import (
    Drip,
    FakeProvider,
    Message,
    RawSSE,
    Stall,
    Status,
    text_reply,
    tool_call_reply,
)

from tether.daemon.demo import DemoProvider, demo_provider
from tether.daemon.model.completions import LineSplitter
from tether.daemon.model.provider import (
    OpenAIProvider,
    Provider,
    ProviderError,
    SSEDecoder,
)
from tether.daemon.model.providers import make_provider

KEY = "sk-test-SECRET-0123456789"
USER = [{"role": "user", "content": "hello there"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "look something up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def make(client: httpx.AsyncClient, fake: FakeProvider, **opts) -> OpenAIProvider:
    opts.setdefault("backoff_base", 0.001)
    opts.setdefault("backoff_cap", 0.01)
    return OpenAIProvider(
        client, name="custom", base_url=fake.url, api_key=opts.pop("api_key", None), **opts
    )


class Recorder:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    async def __call__(self, text: str) -> None:
        self.chunks.append(text)


async def test_non_streaming_text(client):
    with FakeProvider(lambda req: text_reply("hello world")) as fake:
        deltas = Recorder()
        provider = make(client, fake, stream=False)
        result = await provider.complete(messages=USER, tools=None, model="m1", on_delta=deltas)
    assert result.text == "hello world"
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert result.model == "m1"
    assert result.usage == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    # A non-streamed answer still reaches the viewer, as one delta.
    assert deltas.chunks == ["hello world"]
    (request,) = fake.requests
    assert request["stream"] is False
    assert request["model"] == "m1"
    assert request["messages"] == USER
    assert "tools" not in request and "tool_choice" not in request
    assert "stream_options" not in request
    assert "reasoning_effort" not in request
    assert fake.errors == []


async def test_streaming_text_deltas_in_order(client):
    text = "The quick brown fox jumps over the lazy dog."
    with FakeProvider(
        lambda req: Message(
            {"role": "assistant", "content": text},
            usage={"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16},
        )
    ) as fake:
        deltas = Recorder()
        provider = make(client, fake)
        result = await provider.complete(messages=USER, tools=None, model="m1", on_delta=deltas)
    assert result.text == text
    assert len(deltas.chunks) == 3
    assert "".join(deltas.chunks) == text
    assert result.usage == {"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16}
    assert result.finish_reason == "stop"
    (request,) = fake.requests
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_call_reassembled(client, stream):
    arguments = {"q": "tides and the moon", "limit": 3}
    with FakeProvider(lambda req: tool_call_reply("lookup", arguments, call_id="call_abc")) as fake:
        deltas = Recorder()
        provider = make(client, fake, stream=stream)
        result = await provider.complete(messages=USER, tools=TOOLS, model="m1", on_delta=deltas)
    assert result.text is None
    assert deltas.chunks == []
    assert result.finish_reason == "tool_calls"
    (call,) = result.tool_calls
    assert (call.id, call.name) == ("call_abc", "lookup")
    assert json.loads(call.arguments) == arguments
    (request,) = fake.requests
    assert request["tools"] == TOOLS
    assert request["tool_choice"] == "auto"


async def test_streamed_reasoning_and_reasoning_effort(client):
    message = {"role": "assistant", "content": "42", "reasoning_content": "think think"}
    with FakeProvider(lambda req: Message(message)) as fake:
        thoughts, deltas = Recorder(), Recorder()
        provider = make(client, fake)
        result = await provider.complete(
            messages=USER,
            tools=None,
            model="m1",
            reasoning="high",
            on_delta=deltas,
            on_reasoning=thoughts,
        )
        await provider.complete(messages=USER, tools=None, model="m1", reasoning="none")
    assert result.reasoning == "think think"
    assert "".join(thoughts.chunks) == "think think"
    assert result.text == "42"
    assert fake.requests[0]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in fake.requests[1]


async def test_bearer_only_when_key_set(client):
    with FakeProvider(lambda req: text_reply("ok")) as fake:
        await make(client, fake, api_key=KEY).complete(messages=USER, tools=None, model="m")
        await make(client, fake).complete(messages=USER, tools=None, model="m")
    assert fake.request_headers[0]["authorization"] == f"Bearer {KEY}"
    assert "authorization" not in fake.request_headers[1]


@pytest.mark.parametrize("suffix", ["", "/"])
async def test_base_url_with_or_without_trailing_slash(client, suffix):
    with FakeProvider(lambda req: text_reply("ok")) as fake:
        provider = OpenAIProvider(client, name="custom", base_url=fake.url + suffix, api_key=None)
        result = await provider.complete(messages=USER, tools=None, model="m")
    assert result.text == "ok"


async def test_plain_json_answer_to_streaming_request(client):
    with FakeProvider(
        lambda req: Message({"role": "assistant", "content": "not streamed"}, stream=False)
    ) as fake:
        deltas = Recorder()
        result = await make(client, fake).complete(
            messages=USER, tools=None, model="m", on_delta=deltas
        )
    assert fake.requests[0]["stream"] is True
    assert result.text == "not streamed"
    assert deltas.chunks == ["not streamed"]
    assert result.usage["total_tokens"] == 4


async def test_server_error_then_success(client):
    replies = iter([Status(500, "boom"), text_reply("recovered")])
    with FakeProvider(lambda req: next(replies)) as fake:
        result = await make(client, fake).complete(messages=USER, tools=None, model="m")
    assert result.text == "recovered"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("max_retries", [0, 2])
async def test_server_error_forever(client, max_retries):
    with FakeProvider(lambda req: Status(500, "internal kaboom")) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, max_retries=max_retries).complete(
                messages=USER, tools=None, model="m"
            )
    err = caught.value
    assert err.reason == "server_error"
    assert err.status == 500
    assert err.retryable is True
    attempts = max_retries + 1
    assert len(fake.requests) == attempts
    assert f"HTTP 500 after {attempts} attempt" in err.detail
    assert "internal kaboom" in err.detail


async def test_rate_limited_honours_retry_after(client):
    replies = iter([Status(429, "slow down", retry_after=0.2), text_reply("ok")])
    with FakeProvider(lambda req: next(replies)) as fake:
        started = time.monotonic()
        result = await make(client, fake, backoff_cap=5).complete(
            messages=USER, tools=None, model="m"
        )
        elapsed = time.monotonic() - started
    assert result.text == "ok"
    assert len(fake.requests) == 2
    assert elapsed >= 0.2


async def test_retry_after_is_capped(client):
    with FakeProvider(lambda req: Status(429, "slow down", retry_after=60)) as fake:
        started = time.monotonic()
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, max_retries=1, backoff_cap=0.05).complete(
                messages=USER, tools=None, model="m"
            )
        elapsed = time.monotonic() - started
    assert caught.value.reason == "rate_limited"
    assert len(fake.requests) == 2
    assert elapsed < 2


@pytest.mark.parametrize(
    ("code", "reason"),
    [(400, "bad_request"), (401, "auth_failed"), (403, "auth_failed"), (404, "not_found")],
)
async def test_client_errors_not_retried(client, code, reason):
    with FakeProvider(lambda req: Status(code)) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake).complete(messages=USER, tools=None, model="m")
    assert caught.value.reason == reason
    assert caught.value.status == code
    assert caught.value.retryable is False
    assert len(fake.requests) == 1
    assert "after 1 attempt" in caught.value.detail


async def test_api_key_never_in_error_text(client):
    echo = json.dumps(
        {"error": {"message": f"Incorrect API key provided: {KEY}", "header": f"Bearer {KEY}"}}
    )
    for status in (401, 500):
        with FakeProvider(lambda req, status=status: Status(status, echo)) as fake:
            with pytest.raises(ProviderError) as caught:
                await make(client, fake, api_key=KEY, max_retries=1).complete(
                    messages=USER, tools=None, model="m"
                )
        err = caught.value
        for text in (str(err), repr(err), err.detail):
            assert KEY not in text
        assert "Incorrect API key provided" in err.detail


async def test_stall_after_headers_is_a_timeout(client):
    with FakeProvider(lambda req: Stall(10)) as fake:
        started = time.monotonic()
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, read_timeout=0.3, max_retries=1).complete(
                messages=USER, tools=None, model="m"
            )
        elapsed = time.monotonic() - started
    assert caught.value.reason == "timeout"
    assert caught.value.retryable is True
    assert len(fake.requests) == 2
    assert elapsed < 3


async def test_stall_after_text_is_not_retried(client):
    first = {"choices": [{"index": 0, "delta": {"content": "partial "}, "finish_reason": None}]}
    prefix = b"data: " + json.dumps(first).encode() + b"\n\n"
    with FakeProvider(lambda req: Stall(10, prefix=prefix)) as fake:
        deltas = Recorder()
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, read_timeout=0.3).complete(
                messages=USER, tools=None, model="m", on_delta=deltas
            )
    assert deltas.chunks == ["partial "]
    assert caught.value.reason == "timeout"
    assert "not retried" in caught.value.detail
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "data",
    [
        b"data: {not json\n\n",
        b": keep-alive only\n\n",
        b"data: [DONE]\n\n",
        b'data: {"choices": [{"index": 0, "delta": {"content": "cut"}, "finish_reason": null}]}\n\n',
    ],
    ids=["bad-json", "no-events", "done-without-choice", "truncated"],
)
async def test_malformed_sse(client, data):
    with FakeProvider(lambda req: RawSSE(data)) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake).complete(messages=USER, tools=None, model="m")
    assert caught.value.reason == "malformed_response"
    assert len(fake.requests) == 1


async def test_sse_without_done_but_finished_is_accepted(client):
    events = [
        {"choices": [{"index": 0, "delta": {"content": "fine"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    data = b"".join(b"data:" + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
    with FakeProvider(lambda req: RawSSE(data)) as fake:
        result = await make(client, fake).complete(messages=USER, tools=None, model="m")
    assert result.text == "fine"
    assert result.finish_reason == "stop"


async def test_error_event_in_stream_is_server_error(client):
    data = b'data: {"error": {"message": "engine overloaded"}}\n\n'
    with FakeProvider(lambda req: RawSSE(data)) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, max_retries=1).complete(messages=USER, tools=None, model="m")
    assert caught.value.reason == "server_error"
    assert "engine overloaded" in caught.value.detail
    assert len(fake.requests) == 2


async def test_connection_refused(client):
    with FakeProvider(lambda req: text_reply("never")) as fake:
        url = fake.url
    provider = OpenAIProvider(
        client, name="custom", base_url=url, api_key=KEY, max_retries=1, backoff_base=0.001
    )
    with pytest.raises(ProviderError) as caught:
        await provider.complete(messages=USER, tools=None, model="m")
    assert caught.value.reason == "connection_error"
    assert "after 2 attempts" in caught.value.detail
    assert KEY not in str(caught.value)


async def test_handler_blocking_does_not_block_other_requests(client):
    barrier = threading.Barrier(2, timeout=5)

    def handler(req):
        barrier.wait()
        return text_reply(req["messages"][0]["content"])

    with FakeProvider(handler) as fake:
        provider = make(client, fake)
        results = await asyncio.gather(
            provider.complete(messages=[{"role": "user", "content": "a"}], tools=None, model="m"),
            provider.complete(messages=[{"role": "user", "content": "b"}], tools=None, model="m"),
        )
    assert sorted(r.text for r in results) == ["a", "b"]
    assert fake.errors == []


def test_sse_decoder_joins_multiline_data_and_skips_comments():
    decoder = SSEDecoder()
    out = [decoder.feed_line(line) for line in [": ping", "event: x", "data: a", "data:b", "", ""]]
    assert out == [None, None, None, None, "a\nb", None]
    decoder.feed_line("data: tail")
    assert decoder.flush() == "tail"


async def test_make_provider(client):
    custom = make_provider("custom", client=client, base_url="http://127.0.0.1:1/v1", api_key=None)
    assert isinstance(custom, Provider) and custom.name == "custom"
    openai = make_provider("openai", client=client, base_url=None, api_key=None, stream=False)
    assert (
        isinstance(openai, OpenAIProvider)
        and openai.url == "https://api.openai.com/v1/chat/completions"
    )
    demo = demo_provider(Path("/home/me/.tether/config.yaml"))
    assert isinstance(demo, DemoProvider) and isinstance(demo, Provider)
    assert demo.config_path == "/home/me/.tether/config.yaml"
    with pytest.raises(ValueError, match="unknown provider 'demo'"):  # Providers hands it in
        make_provider("demo", client=None, base_url=None, api_key=None)
    with pytest.raises(ValueError, match="base_url"):
        make_provider("custom", client=client, base_url=None, api_key=None)
    with pytest.raises(ValueError, match="custom, openai, demo"):
        make_provider("anthropic", client=client, base_url=None, api_key=None)


def test_line_splitter_ends_lines_at_cr_lf_and_crlf_only():
    lines = LineSplitter()
    assert lines.feed("data: a\r") == []  # maybe half of a CRLF
    assert lines.feed("\ndata: b\u2028c\n\r") == ["data: a", "data: b\u2028c"]
    assert lines.feed("\rdata: ") == ["", ""]  # "\r\r": two blank lines, not one CRLF
    assert lines.feed("lo") == [] and lines.pending == len("data: lo")
    assert lines.feed("ng\n\n") == ["data: long", ""]
    assert lines.pending == 0
    assert lines.feed("tail\r") == [] and lines.flush() == "tail"
    assert lines.flush() is None


def sse_chunks(pieces: list[str]) -> RawSSE:
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    body = b"".join(
        b"data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {"content": p},
                                                     "finish_reason": None}]}).encode() + b"\n\n"
        for p in pieces)
    return RawSSE(body + b"data: [DONE]\n\n")


@pytest.mark.parametrize("answer", [
    text_reply("x" * 5000),  # a plain body over the cap
    "stream",  # streamed text that adds up past the cap
    RawSSE(b"data: " + b"x" * 5000),  # one line that never ends
    RawSSE(b"data: x\n" * 2500),  # one event that never ends
], ids=["body", "streamed-text", "endless-line", "endless-event"])
async def test_an_answer_larger_than_the_cap_fails_without_a_retry(client, answer):
    reply = sse_chunks(["y" * 100] * 50) if answer == "stream" else answer
    with FakeProvider(lambda req: reply) as fake:
        provider = make(client, fake, max_response_bytes=1000,
                        stream=not isinstance(answer, Message))
        with pytest.raises(ProviderError) as caught:
            await provider.complete(messages=USER, tools=None, model="m", on_delta=Recorder())
    assert caught.value.reason == "malformed_response"
    assert "more than 1000 bytes in one answer" in str(caught.value)
    assert len(fake.requests) == 1


async def test_an_answer_just_under_the_cap_is_whole(client):
    with FakeProvider(lambda req: sse_chunks(["y" * 100] * 9)) as fake:
        done = await make(client, fake, max_response_bytes=1000).complete(
            messages=USER, tools=None, model="m")
    assert done.text == "y" * 900


async def test_a_raw_line_separator_inside_streamed_json_is_text(client):
    """Servers that do not escape U+2028/U+2029 (serde_json, orjson) put them raw in
    the JSON of an SSE line; only CR and LF end an event-stream line."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m",
             "choices": [{"index": 0, "delta": {"content": "one\u2028two\u2029three\x85"},
                          "finish_reason": "stop"}]}
    body = b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\ndata: [DONE]\n\n"
    assert "\u2028".encode() in body
    with FakeProvider(lambda req: RawSSE(body)) as fake:
        done = await make(client, fake).complete(messages=USER, tools=None, model="m")
    assert done.text == "one\u2028two\u2029three\x85"


@pytest.mark.parametrize("stream", [True, False])
async def test_a_body_that_is_not_the_encoding_it_claims_is_malformed(client, stream):
    reply = Message({"role": "assistant", "content": "hi"}, headers={"Content-Encoding": "gzip"})
    with FakeProvider(lambda req: reply) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, stream=stream).complete(messages=USER, tools=None, model="m")
    assert caught.value.reason == "malformed_response"
    assert "Content-Encoding" in caught.value.detail
    assert len(fake.requests) == 1


@pytest.mark.parametrize("key", ["sk-test-0123456789\n", "sk-tést-0123456789"])
async def test_a_key_http_cannot_carry_is_a_bad_request_that_names_no_key(client, key):
    with FakeProvider(lambda req: text_reply("never")) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, api_key=key).complete(messages=USER, tools=None, model="m")
    assert (caught.value.reason, caught.value.retryable) == ("bad_request", False)
    assert "0123456789" not in str(caught.value)
    assert fake.requests == []


async def test_a_stream_that_never_ends_fails_at_the_request_deadline(client):
    with FakeProvider(lambda req: Drip(0.05)) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, read_timeout=0.3, request_timeout=0.6).complete(
                messages=USER, tools=None, model="m"
            )
    assert caught.value.reason == "timeout"
    assert caught.value.retryable is False
    assert "within 0.6 s after 1 attempt" in caught.value.detail
    assert len(fake.requests) == 1


async def test_no_retry_starts_that_the_deadline_would_cut_short(client):
    with FakeProvider(lambda req: Status(503)) as fake:
        with pytest.raises(ProviderError) as caught:
            await make(client, fake, request_timeout=0.5, backoff_base=5, backoff_cap=5,
                       max_retries=3).complete(messages=USER, tools=None, model="m")
    assert caught.value.reason == "server_error"
    assert "deadline would pass first" in caught.value.detail
    assert len(fake.requests) == 1


async def test_a_slow_callback_is_not_the_providers_silence(client):
    async def slow(text: str) -> None:
        await asyncio.sleep(0.5)

    with FakeProvider(lambda req: text_reply("one two three")) as fake:
        result = await make(client, fake, read_timeout=0.2, max_retries=0).complete(
            messages=USER, tools=None, model="m", on_delta=slow
        )
    assert result.text == "one two three"
