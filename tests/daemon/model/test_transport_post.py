"""The model client's own posts (`H11Transport.post`, with no httpx above the transport)
against real servers on 127.0.0.1: what goes out, and the `Reply` that comes back."""

from __future__ import annotations

import gzip
import zlib

import httpx
import pytest
from rawhttp import Peer, Server, answering, chunked, head, plain

from tether.daemon.model.provider import OpenAIProvider
from tether.daemon.model.transport import H11Transport, Reply, model_client
from tether.daemon.model.wire import Target

TIMEOUTS = {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}


async def post(transport: H11Transport, url: str, body: bytes = b"{}") -> Reply:
    return await transport.post(Target(httpx.URL(url + "/v1/chat/completions")),
                                [(b"Content-Type", b"application/json")], body, TIMEOUTS, None)


def recording(answer: bytes, seen: list[bytes]):
    async def script(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            seen.append(req)
            await peer.send(answer)
    return script


async def test_a_post_sends_host_length_and_the_given_headers_with_the_body():
    seen: list[bytes] = []
    transport = H11Transport()
    async with Server(recording(plain(b"ok"), seen)) as server:
        url = server.url
        reply = await post(transport, url, b'{"model": "m"}')
        body = b"".join([p async for p in reply.aiter_bytes()])
        await reply.aclose()
        await transport.aclose()
    assert (reply.status_code, body) == (200, b"ok")
    start, _, sent = seen[0].partition(b"\r\n\r\n")
    lines = start.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    port = url.rsplit(":", 1)[1]
    assert set(lines[1:]) == {b"Host: 127.0.0.1:" + port.encode(), b"Content-Length: 14",
                              b"Content-Type: application/json"}
    assert sent == b'{"model": "m"}'
    assert reply.url == url + "/v1/chat/completions"


async def test_a_reply_read_to_its_end_leaves_its_connection_for_the_next_post():
    transport = H11Transport()
    async with Server(answering(plain(b"one"), head() + chunked(b"tw", b"o"))) as server:
        got = []
        for _ in range(3):
            reply = await post(transport, server.url)
            got.append(b"".join([p async for p in reply.aiter_bytes()]))
            await reply.aclose()
        await transport.aclose()
    assert got == [b"one", b"two", b"two"]
    assert len(server.peers) == 1


@pytest.mark.parametrize("coding, pack", [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("gzip, deflate", lambda b: zlib.compress(gzip.compress(b))),
])
async def test_a_compressed_body_is_inflated_as_its_content_encoding_says(coding, pack):
    text = b"data: squeezed\n\n" * 500
    packed = pack(text)
    answer = head(extra=b"Content-Encoding: " + coding.encode() + b"\r\n") + chunked(
        packed[:10], packed[10:30], packed[30:])
    transport = H11Transport()
    async with Server(answering(answer)) as server:
        reply = await post(transport, server.url)
        got = b"".join([p async for p in reply.aiter_bytes()])
        await reply.aclose()
        await transport.aclose()
    assert got == text


async def test_a_body_that_is_not_its_content_encoding_is_a_decoding_error():
    transport = H11Transport()
    async with Server(answering(plain(b"not gzip at all", extra=b"Content-Encoding: gzip\r\n"))) \
            as server:
        reply = await post(transport, server.url)
        with pytest.raises(httpx.DecodingError):
            [p async for p in reply.aiter_bytes()]
        await reply.aclose()
        await transport.aclose()


async def test_text_is_decoded_by_the_charset_and_split_characters_are_joined():
    word = "grüße, ∑"
    raw = word.encode("utf-8")
    utf8 = head(extra=b"Content-Type: text/event-stream\r\n") + chunked(raw[:3], raw[3:])
    latin = plain("grüße".encode("latin-1"),
                  extra=b'Content-Type: text/plain; charset="ISO-8859-1"\r\n')
    transport = H11Transport()
    async with Server(answering(utf8, latin)) as server:
        texts = []
        for _ in range(2):
            reply = await post(transport, server.url)
            texts.append("".join([t async for t in reply.aiter_text()]))
            await reply.aclose()
        await transport.aclose()
    assert texts == [word, "grüße"]


async def test_headers_are_by_lower_case_name_and_repeated_ones_joined():
    answer = plain(b"", extra=b"X-Thing: a\r\nx-thing: b\r\nRetry-After: 3\r\n")
    transport = H11Transport()
    async with Server(answering(answer)) as server:
        reply = await post(transport, server.url)
        await reply.aclose()
        await transport.aclose()
    assert reply.headers["x-thing"] == "a, b"
    assert reply.headers.get("retry-after") == "3"


async def test_the_owners_client_posts_a_provider_request_without_httpx_above_it():
    seen: list[bytes] = []
    sse = (b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, '
           b'"finish_reason": "stop"}]}\n\ndata: [DONE]\n\n')
    answer = head(extra=b"Content-Type: text/event-stream\r\n") + chunked(sse)
    async with Server(recording(answer, seen)) as server, model_client() as http:
        assert http.direct is not None
        provider = OpenAIProvider(http, name="custom", base_url=server.url + "/v1",
                                  api_key="sk-direct-0123")
        done = await provider.complete(messages=[{"role": "user", "content": "x"}],
                                       tools=None, model="m")
    assert done.text == "hi"
    start = seen[0].partition(b"\r\n\r\n")[0].lower()
    assert b"user-agent: tether" in start
    assert b"accept-encoding: identity" in start  # httpx would have asked for gzip
    assert b"authorization: bearer sk-direct-0123" in start
    assert b"python-httpx" not in start


async def test_a_target_is_plain_http_only():
    with pytest.raises(httpx.UnsupportedProtocol):
        Target(httpx.URL("https://api.example.com/v1/chat/completions"))
