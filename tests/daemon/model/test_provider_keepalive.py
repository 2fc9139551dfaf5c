"""A streamed answer's connection is kept for the next request once its body has ended,
and a server that keeps a stream open after ``[DONE]`` delays the answer only briefly
(its connection is closed instead). A real server on 127.0.0.1 counts connections."""

import asyncio
import json
import time

import httpx

from tether.daemon.model import answers
from tether.daemon.model.provider import OpenAIProvider


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")


class Server:
    """Answers every POST with a streamed "hi"; ``end``: the body's end follows
    ``[DONE]``, else the stream stays open until the client goes."""

    def __init__(self, end: bool) -> None:
        self.end = end
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                await reader.readexactly(length)
                chunk = {"object": "chat.completion.chunk", "model": "m",
                         "choices": [{"index": 0, "delta": {"content": "hi"},
                                      "finish_reason": "stop"}]}
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n" + _event(chunk)
                             + _chunk(b"data: [DONE]\n\n"))
                await writer.drain()
                if not self.end:
                    await reader.read()  # until the client closes
                    return
                await asyncio.sleep(0.01)  # the body's end comes a little later
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _three_answers(end: bool) -> tuple[Server, list[float]]:
    server = Server(end)
    url = await server.start()
    took = []
    async with httpx.AsyncClient() as client:
        provider = OpenAIProvider(client, name="custom", base_url=url, api_key=None)
        for _ in range(3):
            t0 = time.monotonic()
            answer = await provider.complete(messages=[{"role": "user", "content": "x"}],
                                             tools=None, model="m")
            took.append(time.monotonic() - t0)
            assert answer.text == "hi"
    assert server.server is not None
    server.server.close()
    return server, took


def test_a_streamed_answers_connection_serves_the_next_request():
    server, _ = asyncio.run(_three_answers(end=True))
    assert server.connections == 1


def test_a_stream_left_open_after_done_costs_a_moment_and_its_connection():
    server, took = asyncio.run(_three_answers(end=False))
    assert server.connections == 3  # each kept-open stream's connection was closed
    assert all(t < answers.DRAIN_SECONDS + 2 for t in took)
    assert all(t >= answers.DRAIN_SECONDS * 0.9 for t in took)
