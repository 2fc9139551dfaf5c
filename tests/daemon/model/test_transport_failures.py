"""How the model client's own transport fails, against real sockets on 127.0.0.1: the same
httpx exceptions as httpx's default transport (each case is run on both), which errors.py
translates; and which endpoints keep httpx's default transport (proxies, https)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest
from rawhttp import Peer, Server, answering, head, plain

from tether.daemon.model.errors import refused
from tether.daemon.model.provider import OpenAIProvider, ProviderError
from tether.daemon.model.transport import H11Transport, _OnFirstUse, model_client

KINDS = ["h11", "httpx"]


def client(kind: str, *, max_connections: int = 100, **timeouts: float) -> httpx.AsyncClient:
    timeout = httpx.Timeout(10, **timeouts)  # type: ignore[arg-type]
    if kind == "h11":
        return httpx.AsyncClient(transport=H11Transport(max_connections=max_connections),
                                 timeout=timeout)
    return httpx.AsyncClient(limits=httpx.Limits(max_connections=max_connections),
                             timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def post(c: httpx.AsyncClient, url: str, body: bytes = b"{}") -> bytes:
    async with c.stream("POST", url + "/v1/chat/completions", content=body) as response:
        return b"".join([p async for p in response.aiter_bytes()])


@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_connection_is_a_connect_error_errors_py_calls_refused(kind):
    async with client(kind) as c:
        with pytest.raises(httpx.ConnectError) as caught:
            await post(c, f"http://127.0.0.1:{free_port()}")
    assert refused(caught.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_name_that_does_not_resolve_is_a_connect_error(kind):
    async with client(kind) as c:
        with pytest.raises(httpx.ConnectError) as caught:
            await post(c, "http://no-such-host.invalid")
    assert not refused(caught.value)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_speaking_garbage_is_a_remote_protocol_error(kind):
    async def script(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"SSH-2.0-OpenSSH_9.6\r\nnot http at all\r\n\r\n")

    async with Server(script) as server, client(kind) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            await post(c, server.url)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_body_cut_short_is_a_remote_protocol_error(kind):
    async def script(peer: Peer) -> None:
        await peer.request()
        await peer.send(head(length=100) + b"only some")
        peer.writer.close()

    async with Server(script) as server, client(kind) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            await post(c, server.url)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_connection_reset_midway_is_a_read_error(kind):
    async def script(peer: Peer) -> None:
        await peer.request()
        await peer.send(head() + b"5\r\nfirst\r\n")
        sock = peer.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        peer.writer.transport.abort()  # RST

    async with Server(script) as server, client(kind) as c:
        with pytest.raises(httpx.ReadError):
            await post(c, server.url)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_silent_before_or_within_the_answer_is_a_read_timeout(kind):
    async def script(peer: Peer) -> None:
        await peer.request()
        await asyncio.sleep(1)  # no head in time
        await peer.send(plain(b"late"))
        await peer.request()
        await peer.send(head() + b"5\r\nfirst\r\n")  # and the rest never comes
        await asyncio.sleep(5)

    async with Server(script) as server, client(kind, read=0.2) as c:
        with pytest.raises(httpx.ReadTimeout):
            await post(c, server.url)
        with pytest.raises(httpx.ReadTimeout):
            await post(c, server.url)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_does_not_read_the_request_is_a_write_timeout(kind):
    async def script(peer: Peer) -> None:
        await asyncio.sleep(10)  # reads nothing: the socket buffers fill

    async with Server(script) as server, client(kind, write=0.2) as c:
        with pytest.raises(httpx.WriteTimeout):
            await post(c, server.url, b"x" * (64 * 1024 * 1024))


@pytest.mark.parametrize("kind", KINDS)
async def test_a_listener_that_never_accepts_is_a_connect_timeout(kind):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filling = []
        for _ in range(3):  # fill its accept queue: the next handshake is never answered
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            filling.append(s)
        await asyncio.sleep(0.1)
        try:
            async with client(kind, connect=0.3) as c:
                with pytest.raises(httpx.ConnectTimeout):
                    await post(c, f"http://127.0.0.1:{port}")
        finally:
            for s in filling:
                s.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_no_connection_free_in_time_is_a_pool_timeout(kind):
    async def script(peer: Peer) -> None:
        await peer.request()
        await peer.send(head() + b"5\r\nfirst\r\n")  # the body goes on and on
        await asyncio.sleep(5)

    async with Server(script) as server, client(kind, max_connections=1, pool=0.2) as c:
        async with c.stream("POST", server.url + "/v1", content=b"{}"):
            with pytest.raises(httpx.PoolTimeout):
                await post(c, server.url)


def test_a_close_that_arrives_between_two_turns_of_the_loop_is_seen_before_the_write():
    """The server closes the kept connection while the loop is busy elsewhere: the close
    is in the socket but not yet read, and the next request must not be written into it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[int] = []

    def serve() -> None:
        while len(accepted) < 2:
            conn, _ = listener.accept()
            accepted.append(1)
            conn.recv(65536)
            conn.sendall(plain(b"ok"))
            time.sleep(0.1)  # after the client has read the answer
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    async def run() -> list[bytes]:
        async with httpx.AsyncClient(transport=H11Transport()) as c:
            first = await post(c, url)
            time.sleep(0.4)  # the loop is busy: the close is not read
            return [first, await post(c, url)]

    try:
        assert asyncio.run(run()) == [b"ok", b"ok"]
    finally:
        listener.close()
        thread.join(2)
    assert len(accepted) == 2


async def test_the_provider_reports_a_refused_connection_as_before():
    async with model_client() as http:
        provider = OpenAIProvider(http, name="custom", max_retries=0,
                                  base_url=f"http://127.0.0.1:{free_port()}/v1", api_key=None)
        with pytest.raises(ProviderError) as caught:
            await provider.complete(messages=[{"role": "user", "content": "x"}],
                                    tools=None, model="m")
    assert caught.value.reason == "connection_error"
    assert "connection refused by 127.0.0.1" in caught.value.detail


def _transport_for(http: httpx.AsyncClient, url: str) -> object:
    return http._transport_for_url(httpx.URL(url))


async def test_plain_http_uses_the_own_transport_and_https_httpxs(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    async with model_client() as http:
        assert isinstance(_transport_for(http, "http://127.0.0.1:8000/v1"), H11Transport)
        https = _transport_for(http, "https://api.openai.com/v1")
        assert isinstance(https, _OnFirstUse) and https.made is None
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with model_client() as http:  # a NO_PROXY host keeps httpx's transport
        assert isinstance(_transport_for(http, "http://127.0.0.1:8000/v1"),
                          httpx.AsyncHTTPTransport)
        assert isinstance(_transport_for(http, "http://10.0.0.5:8000/v1"), H11Transport)


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_proxy_in_the_environment_leaves_httpxs_transport_in_place(monkeypatch, variable):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    targets: list[bytes] = []

    async def proxy(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            targets.append(req.split(b"\r\n")[0])
            await peer.send(plain(b"via the proxy"))

    async with Server(proxy) as server, Server(answering(plain(b"direct"))) as origin:
        monkeypatch.setenv(variable, server.url)
        async with model_client() as http:
            assert not isinstance(_transport_for(http, origin.url), H11Transport)
            assert await post(http, origin.url) == b"via the proxy"
        target = origin.url.encode() + b"/v1/chat/completions"
    assert targets == [b"POST " + target + b" HTTP/1.1"]


async def test_httpxs_default_transport_is_made_only_when_a_request_needs_it(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    lazy = _OnFirstUse()
    await lazy.aclose()  # never used: nothing to close, nothing made
    assert lazy.made is None
    async with Server(answering(plain(b"through httpx's own"))) as server:
        async with httpx.AsyncClient(transport=lazy) as c:
            assert await post(c, server.url) == b"through httpx's own"
        assert isinstance(lazy.made, httpx.AsyncHTTPTransport)
