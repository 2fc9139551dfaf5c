"""Small HTTP/1.1 servers on 127.0.0.1 for the transport's tests: each connection is
handed to a script that reads requests and writes raw bytes, so a test says exactly
what the server sends, how it frames it and when it closes."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable

Script = Callable[["Peer"], Awaitable[None]]


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def head(status: int = 200, *, length: int | None = None, extra: bytes = b"") -> bytes:
    size = (b"Content-Length: %d\r\n" % length if length is not None
            else b"Transfer-Encoding: chunked\r\n")
    return b"HTTP/1.1 %d OK\r\n" % status + size + extra + b"\r\n"


def plain(body: bytes, *, extra: bytes = b"") -> bytes:
    return head(length=len(body), extra=extra) + body


def gzipped(body: bytes) -> bytes:
    packed = gzip.compress(body)
    return plain(packed, extra=b"Content-Encoding: gzip\r\n")


class Peer:
    """One accepted connection, as its script sees it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def request(self) -> bytes | None:
        """The next request (head and Content-Length body), None when the client closed."""
        try:
            start = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = 0
        for line in start.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return start + await self.reader.readexactly(length)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def closed_by_client(self, within: float = 5) -> bool:
        """Whether the client closes its end within ``within`` seconds."""
        try:
            async with asyncio.timeout(within):
                while await self.reader.read(65536):
                    pass
            return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True


class Server:
    """Runs ``script`` for every connection; ``peers`` are the connections so far."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.peers: list[Peer] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for peer in self.peers:
            peer.writer.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer)
        self.peers.append(peer)
        try:
            await self.script(peer)
        except (ConnectionError, asyncio.CancelledError):
            pass  # the client went, or the test is over


def answering(*responses: bytes, close_after: bool = False) -> Script:
    """A script that answers each request on a connection with the next of ``responses``
    (the last one repeated), and closes after each answer when ``close_after``."""
    async def script(peer: Peer) -> None:
        n = 0
        while await peer.request() is not None:
            await peer.send(responses[min(n, len(responses) - 1)])
            n += 1
            if close_after:
                peer.writer.close()
                return
    return script
