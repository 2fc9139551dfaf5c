"""The model client's own transport (daemon/model/transport.py) against real servers on
127.0.0.1: bodies in every framing, the keep-alive pool, and the trace events
request_clock.py listens to, the same as httpx's default transport sends."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from rawhttp import Peer, Server, answering, chunked, gzipped, head, plain

from tether.daemon.model.transport import H11Transport

ORIGIN_PATH = "/v1/chat/completions"


async def post(client: httpx.AsyncClient, url: str, body: bytes = b"{}") -> tuple[int, bytes]:
    async with client.stream("POST", url + ORIGIN_PATH, content=body) as response:
        return response.status_code, b"".join([p async for p in response.aiter_bytes()])


async def test_one_connection_serves_every_request_read_to_its_end():
    async with Server(answering(plain(b"length body"), head() + chunked(b"chun", b"ked"))) \
            as server, httpx.AsyncClient(transport=H11Transport()) as client:
        got = [await post(client, server.url) for _ in range(4)]
    assert got == [(200, b"length body")] + [(200, b"chunked")] * 3
    assert len(server.peers) == 1


async def test_request_bytes_reach_the_server_whole():
    seen: list[bytes] = []

    async def script(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            seen.append(req)
            await peer.send(plain(b"ok"))

    body = b'{"messages": "' + b"x" * 200_000 + b'"}'  # more than one write
    async with Server(script) as server, httpx.AsyncClient(transport=H11Transport()) as client:
        assert await post(client, server.url, body) == (200, b"ok")
        assert await post(client, server.url, b"{}") == (200, b"ok")
    assert seen[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert seen[0].endswith(b"\r\n\r\n" + body)
    assert b"\r\ncontent-length: %d\r\n" % len(body) in seen[0].lower()
    assert seen[1].endswith(b"\r\n\r\n{}")


async def test_a_gzip_body_is_decoded_as_its_content_encoding_says():
    async with Server(answering(gzipped(b"data: squeezed\n\n" * 50))) as server, \
            httpx.AsyncClient(transport=H11Transport()) as client:
        status, body = await post(client, server.url)
        async with client.stream("POST", server.url + ORIGIN_PATH, content=b"{}") as response:
            text = "".join([t async for t in response.aiter_text()])
    assert body == b"data: squeezed\n\n" * 50
    assert text == "data: squeezed\n\n" * 50
    assert len(server.peers) == 1


async def test_a_server_closing_after_each_answer_costs_only_a_new_connection():
    async with Server(answering(plain(b"once"), close_after=True)) as server, \
            httpx.AsyncClient(transport=H11Transport()) as client:
        for _ in range(3):
            assert await post(client, server.url) == (200, b"once")
            await asyncio.sleep(0.05)  # the close arrives while the connection is idle
        assert await post(client, server.url) == (200, b"once")  # and right away
    assert len(server.peers) == 4


async def test_a_kept_connection_found_closed_at_the_first_write_is_sent_on_a_new_one():
    seen: list[bytes] = []

    async def script(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            seen.append(req)
            await peer.send(plain(b"ok"))

    transport = H11Transport()
    async with Server(script) as server, httpx.AsyncClient(transport=transport) as client:
        assert await post(client, server.url) == (200, b"ok")
        (idle,) = [w for ws in transport._pool.idle.values() for w in ws]
        # the kept socket can no longer send, and nothing says so before the write
        assert idle.transport is not None
        idle.transport.get_extra_info("socket").shutdown(socket.SHUT_WR)
        assert await post(client, server.url, b'{"second": 1}') == (200, b"ok")
    assert len(server.peers) == 2
    assert len(seen) == 2 and seen[1].endswith(b'{"second": 1}')  # sent once, on the new one


@pytest.mark.parametrize("kind", ["h11", "httpx"])
async def test_a_kept_connection_closed_after_the_request_is_an_error_not_a_resend(kind):
    seen: list[bytes] = []

    async def script(peer: Peer) -> None:
        seen.append(await peer.request() or b"")
        await peer.send(plain(b"ok"))
        seen.append(await peer.request() or b"")
        peer.writer.close()  # read the request, answered nothing

    transport = H11Transport() if kind == "h11" else None
    async with Server(script) as server, httpx.AsyncClient(transport=transport) as client:
        assert await post(client, server.url) == (200, b"ok")
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await post(client, server.url)
    assert len(server.peers) == 1 and len(seen) == 2


async def test_a_response_abandoned_midway_closes_its_connection():
    closed = asyncio.Event()

    async def script(peer: Peer) -> None:
        await peer.request()
        await peer.send(head() + b"5\r\nfirst\r\n")
        if await peer.closed_by_client():
            closed.set()

    transport = H11Transport()
    async with Server(script) as server, httpx.AsyncClient(transport=transport) as client:
        async with client.stream("POST", server.url + ORIGIN_PATH, content=b"{}") as response:
            async for piece in response.aiter_bytes():
                assert piece == b"first"
                break
        await asyncio.wait_for(closed.wait(), 5)
        assert not transport._pool.open
        assert not any(transport._pool.idle.values())
        server.script = answering(plain(b"ok"))
        assert await post(client, server.url) == (200, b"ok")
    assert len(server.peers) == 2


async def test_a_read_cancelled_midway_closes_its_connection_and_the_pool_goes_on():
    closed = asyncio.Event()

    async def script(peer: Peer) -> None:
        req = await peer.request()
        if len(seen) == 0:
            seen.append(req)
            await peer.send(head() + b"5\r\nfirst\r\n")  # and then nothing
            if await peer.closed_by_client():
                closed.set()
            return
        await peer.send(plain(b"ok"))

    seen: list[bytes | None] = []
    transport = H11Transport(max_connections=1)
    async with Server(script) as server, httpx.AsyncClient(transport=transport) as client:
        reading = asyncio.create_task(post(client, server.url))
        await asyncio.sleep(0.2)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        await asyncio.wait_for(closed.wait(), 5)
        assert not transport._pool.open
        # the one connection allowed is free again
        assert await post(client, server.url) == (200, b"ok")


async def test_closing_the_transport_closes_its_connections():
    closes: list[bool] = []

    async def script(peer: Peer) -> None:
        await peer.request()
        await peer.send(plain(b"ok"))
        closes.append(await peer.closed_by_client())

    transport = H11Transport()
    async with Server(script) as server:
        async with httpx.AsyncClient(transport=transport) as client:
            await asyncio.gather(*(post(client, server.url) for _ in range(3)))
            assert len(transport._pool.open) == 3
        await asyncio.sleep(0.2)
        assert closes == [True, True, True]
        assert not transport._pool.open


async def test_idle_connections_past_the_keepalive_bound_or_expiry_are_closed():
    async with Server(answering(plain(b"ok"))) as server:
        transport = H11Transport(max_keepalive=2, keepalive_expiry=0.2)
        async with httpx.AsyncClient(transport=transport) as client:
            await asyncio.gather(*(post(client, server.url) for _ in range(4)))
            assert len(server.peers) == 4
            assert len(transport._pool.open) == 2  # two kept, two closed
            await post(client, server.url)
            assert len(server.peers) == 4  # a kept one served it
            await asyncio.sleep(0.3)
            await post(client, server.url)
            assert len(server.peers) == 5  # the kept ones had expired
            assert len(transport._pool.open) == 1


async def test_a_request_waits_for_a_connection_when_all_are_busy():
    release = asyncio.Event()

    async def script(peer: Peer) -> None:
        while await peer.request() is not None:
            await release.wait()
            await peer.send(plain(b"ok"))

    transport = H11Transport(max_connections=1)
    async with Server(script) as server, httpx.AsyncClient(transport=transport) as client:
        first = asyncio.create_task(post(client, server.url))
        second = asyncio.create_task(post(client, server.url))
        await asyncio.sleep(0.1)
        assert not second.done()
        release.set()
        assert await first == (200, b"ok") and await second == (200, b"ok")
    assert len(server.peers) == 1


async def _trace_names(client: httpx.AsyncClient, url: str) -> list[list[str]]:
    runs = []
    for _ in range(2):  # a new connection, then the kept one
        names: list[str] = []

        async def trace(name: str, info: dict, names: list[str] = names) -> None:
            names.append(name)

        request = client.build_request("POST", url + ORIGIN_PATH, content=b"{}",
                                       extensions={"trace": trace})
        response = await client.send(request, stream=True)
        await response.aread()
        await response.aclose()
        runs.append(names)
    return runs


async def test_trace_events_are_httpx_default_transports():
    async with Server(answering(head() + chunked(b"a", b"b"))) as server:
        async with httpx.AsyncClient() as default:
            expected = await _trace_names(default, server.url)
        async with httpx.AsyncClient(transport=H11Transport()) as ours:
            got = await _trace_names(ours, server.url)
    assert got == expected
    assert got[0][:2] == ["connection.connect_tcp.started", "connection.connect_tcp.complete"]
    assert got[1][0] == "http11.send_request_headers.started"
    assert got[1][-1] == "http11.response_closed.complete"
