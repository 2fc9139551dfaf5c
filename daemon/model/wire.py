"""The connections of the model client's own transport (transport.py): each a TCP
connection on an asyncio protocol, with h11's state machine for the exchanges on it,
and the pool that keeps them.

`connect` opens it (every address of the host in turn, as anyio does for httpcore);
`Wire` reads and writes bytes with the timeouts a request carries and knows whether an
idle connection is still usable; `Pool` keeps them by origin; `Target` is a URL taken
apart for them; `traced` reports a step as httpcore's trace extension does. Failures are
raised as httpx's exceptions, as httpx's default transport raises them, so errors.py
translates both alike.
"""

from __future__ import annotations

import asyncio
import select
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import h11
import httpx

__all__ = ["READ_BYTES", "Pool", "Target", "Trace", "Wire", "connect", "traced"]

Trace = Callable[[str, dict[str, Any]], Awaitable[None]]

#: the most one read hands to h11, and how much may wait unread before the socket
#: is no longer read (as httpcore's 64 KiB reads)
READ_BYTES = 64 * 1024
#: the longest response head h11 may buffer (httpcore's limit)
MAX_HEAD_BYTES = 100 * 1024


class Wire(asyncio.Protocol):
    """The bytes of one connection and its h11 state. ``origin`` is (host, port)."""

    def __init__(self, origin: tuple[str, int]) -> None:
        self.origin = origin
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0  # loop time it went back to the pool
        self._chunks: list[bytes] = []
        self._size = 0
        self._eof = False
        self._error: BaseException | None = None
        self._reader: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._read_paused = False
        self._fd = -1
        self._on_close: Any = None

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None else -1

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        if self._size >= READ_BYTES and not self._read_paused and self.transport is not None:
            self._read_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # the transport closes: nothing is written after the server's end

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._error = exc
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    def _wake(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    # -- for the transport

    async def read(self, timeout: float | None) -> bytes:
        """What has arrived (waiting for it up to ``timeout``); b"" once the server closed.
        httpx.ReadTimeout, httpx.ReadError."""
        if not self._chunks and not self._eof:
            self._reader = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:
                    await self._reader
                else:
                    try:
                        async with asyncio.timeout(timeout):
                            await self._reader
                    except TimeoutError:
                        raise httpx.ReadTimeout(
                            f"no response bytes for {timeout:g} s") from None
            finally:
                self._reader = None
        if self._chunks:
            data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
            self._chunks.clear()
            self._size = 0
            if self._read_paused and self.transport is not None:
                self._read_paused = False
                self.transport.resume_reading()
            return data
        if self._error is not None:
            raise httpx.ReadError(str(self._error) or type(self._error).__name__) \
                from self._error
        return b""

    def write(self, data: bytes) -> bool:
        """Hand ``data`` to the socket; False when the connection is already closing, so
        nothing of it can be sent (the server's answer, if any, is still read)."""
        if self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(data)
        return not self.transport.is_closing()  # the first send failed: nothing went out

    async def drain(self, timeout: float | None) -> None:
        """Wait until the socket takes what was written; httpx.WriteTimeout past ``timeout``."""
        if self._drained is None:
            return
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._drained)
        except TimeoutError:
            raise httpx.WriteTimeout(f"the request could not be sent in {timeout:g} s") from None

    def usable(self) -> bool:
        """Whether an idle connection may carry the next request: nothing arrived while
        it was idle (an early response, a close) and h11 is ready for a new cycle."""
        if self.closed or self._chunks or self._eof or self.transport is None \
                or self.transport.is_closing():
            return False
        if self.h11.our_state is not h11.IDLE or self.h11.their_state is not h11.IDLE:
            return False
        # a close the loop has not yet read: the socket is readable (httpcore looks too)
        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        try:
            return not poll.poll(0)
        except OSError:
            return False

    def close(self) -> None:
        """Close the connection now (no await: safe while a task is being cancelled)."""
        if self.closed:
            return
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        if self._on_close is not None:
            self._on_close(self)


def _numeric(host: str, port: int) -> list[tuple[Any, ...]] | None:
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                  flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return None


async def connect(origin: tuple[str, int], timeout: float | None) -> Wire:
    """A new connection to ``origin``; each of the host's addresses is tried in turn.
    httpx.ConnectTimeout past ``timeout``, else httpx.ConnectError (whose cause is the
    last address's OSError, a ConnectionRefusedError when nothing listens)."""
    loop = asyncio.get_running_loop()
    host, port = origin
    try:
        async with asyncio.timeout(timeout):
            infos = _numeric(host, port)
            if infos is None:
                try:
                    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                except OSError as exc:
                    raise httpx.ConnectError(str(exc)) from exc
            failures: list[OSError] = []
            for family, kind, proto, _, address in infos:
                sock = socket.socket(family, kind, proto)
                try:
                    sock.setblocking(False)
                    await loop.sock_connect(sock, address)
                    _, wire = await loop.create_connection(lambda: Wire(origin), sock=sock)
                    return wire
                except OSError as exc:
                    sock.close()
                    failures.append(exc)
                except BaseException:
                    sock.close()
                    raise
    except TimeoutError:
        raise httpx.ConnectTimeout(
            f"connecting to {host}:{port} took longer than {timeout:g} s") from None
    if len(failures) == 1:
        raise httpx.ConnectError(str(failures[0])) from failures[0]
    # as anyio words it: errors.py's refused() knows this sentence
    raise httpx.ConnectError("All connection attempts failed") from (
        failures[-1] if failures else None)


class Pool:
    """Open connections by origin: the idle ones, and how many there are in all. At
    most ``max_keepalive`` idle ones are kept, each for at most ``expiry`` seconds, and
    at most ``max_connections`` are open; a kept connection that the server closed
    while it was idle is found before it is used (`Wire.usable`)."""

    def __init__(self, max_connections: int, max_keepalive: int, expiry: float) -> None:
        self.max_connections = max_connections
        self.max_keepalive = max_keepalive
        self.expiry = expiry
        self.idle: dict[tuple[str, int], list[Wire]] = {}
        self.open: set[Wire] = set()
        self.reserved = 0  # connections being opened
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, origin: tuple[str, int], timeout: float | None, *,
                      reuse: bool = True) -> Wire | None:
        """An idle connection to ``origin`` (unless not ``reuse``), or None: the caller may
        open one (and must call `opened` or `abandon`). httpx.PoolTimeout when none frees
        up in time."""
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            kept = self.idle.get(origin) if reuse else None
            while kept:
                wire = kept.pop()  # the most recently used
                if now - wire.idle_since <= self.expiry and wire.usable():
                    return wire
                wire.close()
            if len(self.open) + self.reserved < self.max_connections:
                self.reserved += 1
                return None
            oldest = min((w for ws in self.idle.values() for w in ws),
                         key=lambda w: w.idle_since, default=None)
            if oldest is not None:
                self.idle[oldest.origin].remove(oldest)
                oldest.close()
                continue
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(timeout):
                    await waiter
            except BaseException as exc:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake()  # woken as it gave up: the next waiter's turn
                if isinstance(exc, TimeoutError):
                    raise httpx.PoolTimeout(f"no connection of the {self.max_connections} "
                                            f"freed up in {timeout:g} s") from None
                raise

    def opened(self, wire: Wire) -> None:
        self.reserved -= 1
        self.open.add(wire)
        wire._on_close = self._closed

    def abandon(self) -> None:
        """The connection `acquire` allowed was not opened."""
        self.reserved -= 1
        self._wake()

    def release(self, wire: Wire) -> None:
        """A response ended whole: keep its connection idle, or close it past the limit."""
        if not wire.closed and sum(map(len, self.idle.values())) < self.max_keepalive:
            wire.idle_since = asyncio.get_running_loop().time()
            self.idle.setdefault(wire.origin, []).append(wire)
            self._wake()
        else:
            wire.close()

    def _closed(self, wire: Wire) -> None:
        self.open.discard(wire)
        kept = self.idle.get(wire.origin)
        if kept and wire in kept:
            kept.remove(wire)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close_all(self) -> None:
        for wire in list(self.open):
            wire.close()
        self.idle.clear()


class Target:
    """Where `H11Transport.post` sends: an ``http://`` URL taken apart once."""

    __slots__ = ("url", "origin", "host_header", "path")

    def __init__(self, url: httpx.URL) -> None:
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"this transport speaks plain http, not {url.scheme!r}")
        self.url = str(url)
        self.origin = (url.host, url.port or 80)
        self.host_header = url.netloc
        self.path = url.raw_path


class traced:
    """httpcore's `Trace`: ``name.started`` before the step, then ``name.complete`` (with
    ``return_value`` if the step set one in the dict it is given) or ``name.failed``."""

    __slots__ = ("_trace", "_name", "_info", "_out")

    def __init__(self, trace: Trace | None, name: str, info: dict[str, Any]) -> None:
        self._trace = trace
        self._name = name
        self._info = info
        self._out: dict[str, Any] = {"return_value": None}

    async def __aenter__(self) -> dict[str, Any]:
        if self._trace is not None:
            await self._trace(self._name + ".started", self._info)
        return self._out

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._trace is None:
            return
        if exc is None:
            await self._trace(self._name + ".complete", self._out)
        elif not isinstance(exc, asyncio.CancelledError | GeneratorExit):
            await self._trace(self._name + ".failed", {"exception": exc})
