"""The one-shot commands' blocking WebSocket client (clients/library/blocking.py) against
the websockets server the owner runs: the handshake, masked frames out, fragmented
messages in, pings answered, and both closing handshakes."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, unix_serve

from tether.clients.library.blocking import _Socket
from tether.clients.library.routing import CLOSE_TOO_BIG, ConnectionLost


class Server:
    """A websockets server on a Unix socket, in a thread with its own loop; each
    connection runs ``script``."""

    def __init__(self, path: Path, script, max_size: int = 1 << 20) -> None:
        self.path, self.script, self.max_size = path, script, max_size
        self.seen: list[object] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _start(self) -> None:
        async def handler(ws: ServerConnection) -> None:
            await self.script(ws, self.seen)
        self.server = await unix_serve(handler, str(self.path), max_size=self.max_size,
                                       compression=None)

    def __enter__(self) -> Server:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(5)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self.server.close()
            await self.server.wait_closed()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def dial(tmp_path: Path) -> Iterator:
    opened: list[_Socket] = []

    def connect(path: Path) -> _Socket:
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(5)
        sock.connect(str(path))
        ws = _Socket(sock)
        ws.handshake()
        opened.append(ws)
        return ws

    yield connect
    for ws in opened:
        ws.sock.close()


def test_messages_of_every_length_go_out_masked_and_come_back_whole(tmp_path, dial):
    async def echo(ws, seen):
        async for message in ws:
            seen.append(message)
            await ws.send(message)

    with Server(tmp_path / "s", echo) as server:
        ws = dial(server.path)
        # the three length encodings of RFC 6455 §5.2, and an empty frame
        for text in ("", "é" * 3, "x" * 125, "y" * 126, "z" * 70_000):
            ws.send(0x1, text.encode())
            assert ws.message() == text.encode()
        assert server.seen == ["", "é" * 3, "x" * 125, "y" * 126, "z" * 70_000]
        ws.close()
        assert ws.done and ws.close_code == 1000  # our closing handshake, answered


def test_fragmented_messages_are_joined_and_pings_answered(tmp_path, dial):
    async def script(ws, seen):
        await ws.send(["frag", "mented", " message"])  # three frames, one message
        pong = await ws.ping(b"are you there")
        await ws.send("after the ping")
        await asyncio.wait_for(pong, 5)
        seen.append("pong")
        await ws.close(1001, "going away")

    with Server(tmp_path / "s", script) as server:
        ws = dial(server.path)
        assert ws.message() == b"fragmented message"
        assert ws.message() == b"after the ping"  # the ping in between was answered
        with pytest.raises(ConnectionLost):
            ws.message()
        assert ws.close_code == 1001
        assert server.seen == ["pong"]
        ws.close()  # the owner began it: nothing more is sent


def test_a_frame_too_big_for_the_owner_is_a_close_with_its_code(tmp_path, dial):
    async def script(ws, seen):
        async for message in ws:  # ends when the server refuses the frame
            seen.append(message)

    with Server(tmp_path / "s", script, max_size=1000) as server:
        ws = dial(server.path)
        ws.send(0x1, b"x" * 5000)
        with pytest.raises(ConnectionLost):
            ws.message()
        assert ws.close_code == CLOSE_TOO_BIG and server.seen == []
        ws.close()


def test_a_server_that_is_not_a_websocket_is_refused(tmp_path):
    path = tmp_path / "plain"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)

    def answer() -> None:
        conn, _ = listener.accept()
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(5)
    sock.connect(str(path))
    with pytest.raises(ConnectionError, match="refused the WebSocket handshake"):
        _Socket(sock).handshake()
    sock.close()
    thread.join(5)
    listener.close()
