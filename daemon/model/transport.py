"""The model client's transport for plain ``http://`` endpoints: HTTP/1.1 on h11 over
asyncio, under httpx's API and, for the model client's own requests, with nothing above it.

Local model servers (vLLM, llama.cpp, Ollama, LM Studio) speak plain HTTP/1.1 on the same
machine or network, and a turn's model request spent more of the owner's CPU in httpx's
default transport (httpcore on anyio) than in everything tether does with the answer
(docs/performance.md, "Round 7"). `H11Transport` is that transport made small: each
request is h11's state machine fed from an asyncio protocol (wire.py), with httpcore's
behaviour wherever httpx and errors.py can see it:

- a pool of kept-alive connections per (host, port) (wire.py's `Pool`): a connection
  goes back to it only when its response was read to the end (h11
  ``start_next_cycle``); when the request's first write finds a kept connection
  closed, the request is sent once more on a new connection (nothing of it went out);
- the request's ``timeout`` extension (connect, read, write, pool) and its ``trace``
  extension, with httpcore's event names (``connection.connect_tcp``,
  ``http11.send_request_headers``, ... ``http11.response_closed``, each ``.started`` and
  ``.complete`` or ``.failed``): request_clock.py listens to them;
- httpx's exceptions, as httpx's default transport raises them (ConnectError with the
  socket's error as its cause, RemoteProtocolError, ReadError, each timeout kind).

It serves any request of the owner's httpx client (`handle_async_request`), and `post`,
for provider.py's chat-completions requests with nothing above the transport: httpx's
request and response objects, cookie jar, auth and redirect steps cost a turn about as
much CPU as the transport itself (docs/performance.md, "Round 11"). `model_client`
builds the owner's client, a `ModelClient`: this transport for ``http://`` unless a
proxy variable of the environment applies to plain HTTP (then httpx stays whole, as for
every ``https://`` endpoint).
"""

from __future__ import annotations

import codecs
import functools
import urllib.request
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import h11
import httpx

from .wire import Pool, Target, Trace, Wire, connect, traced

__all__ = ["H11Transport", "ModelClient", "Reply", "direct_route", "encode_head", "model_client"]


class ModelClient(httpx.AsyncClient):
    """The owner's httpx client, and ``direct``, the `H11Transport` mounted for plain
    ``http://`` when no proxy of the environment applies to it (else None): the model
    client posts its requests to that transport itself (`H11Transport.post`), without
    httpx's request and response objects, cookies and hooks above it."""

    def __init__(self, direct: H11Transport | None, *, proxied: bool = True) -> None:
        mounts = {"http://": direct} if direct is not None else None
        if proxied:
            super().__init__(mounts=mounts)
        else:
            # no proxy variable at all (given a ``transport``, httpx ignores them)
            super().__init__(mounts=mounts, transport=_OnFirstUse())
        self.direct = direct


def model_client() -> ModelClient:
    """The owner's client for model servers (the caller closes it)."""
    proxies = urllib.request.getproxies()
    if proxies.get("http") or proxies.get("all"):
        return ModelClient(None)
    # httpx mounts a NO_PROXY host to its own transport (a more specific pattern), but
    # with no proxy for plain HTTP, the model client's posts may all go direct
    return ModelClient(H11Transport(), proxied=bool(proxies))


Post = Callable[[list[tuple[bytes, bytes]], bytes, dict[str, Any], Trace | None],
               Awaitable["Reply"]]


def direct_route(client: httpx.AsyncClient, url: httpx.URL | str) -> Post | None:
    """``url``'s `H11Transport.post` on the owner's client's own transport, for a plain
    ``http://`` URL (None: its requests go through httpx)."""
    if isinstance(client, ModelClient) and client.direct is not None \
            and isinstance(url, httpx.URL) and url.scheme == "http":
        return functools.partial(client.direct.post, Target(url))
    return None


#: what a post says besides the caller's headers (httpx's client would add its own of
#: each): an answer from a model server nearby costs less to read than to inflate
_OWN_HEADERS = ((b"Accept-Encoding", b"identity"), (b"User-Agent", b"tether"))


def encode_head(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """A post's ``headers``, as ASCII (UnicodeEncodeError, as httpx raises it)."""
    return [*((k.encode("ascii"), v.encode("ascii")) for k, v in headers.items()),
            *_OWN_HEADERS]


class _OnFirstUse(httpx.AsyncBaseTransport):
    """httpx's default transport, made on the first request that needs it. Making one
    loads the TLS trust store (about 25–75 ms), and closing one, even unused, imports
    anyio (about 40 ms): an owner whose model server is local pays neither, at its
    start or its stop."""

    def __init__(self) -> None:
        self.made: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.made is None:
            self.made = httpx.AsyncHTTPTransport()
        return await self.made.handle_async_request(request)

    async def aclose(self) -> None:
        if self.made is not None:
            await self.made.aclose()


class Reply:
    """A response of `H11Transport.post`, with the part of httpx.Response's API that the
    model client reads: ``status_code``, ``headers`` (a dict by lower-case name, repeated
    headers joined by ", " as httpx joins them), ``url``, `aiter_bytes` (gzip and deflate
    undone, other codings left as they are, as httpx does), `aiter_text` and `aclose`."""

    __slots__ = ("status_code", "headers", "url", "_body")

    def __init__(self, status_code: int, raw: Any, url: str, body: _Body) -> None:
        self.status_code = status_code
        headers: dict[str, str] = {}
        for name, value in raw:  # h11's names are lower-case already
            key, text = name.decode("latin-1"), value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers = headers
        self.url = url
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        codings = [c.strip().lower() for c in self.headers.get("content-encoding", "").split(",")]
        inflaters = [zlib.decompressobj(zlib.MAX_WBITS | (16 if c in ("gzip", "x-gzip") else 32))
                     for c in reversed(codings) if c in ("gzip", "x-gzip", "deflate")]
        if not inflaters:
            async for chunk in self._body:
                yield chunk
            return
        try:
            async for chunk in self._body:
                for inflater in inflaters:
                    chunk = inflater.decompress(chunk)
                if chunk:
                    yield chunk
            tail = b""
            for inflater in inflaters:
                tail = inflater.decompress(tail) + inflater.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(f"the body's Content-Encoding is broken: {exc}") from None
        if tail:
            yield tail

    async def aiter_text(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder(self._charset())(errors="replace")
        async for chunk in self.aiter_bytes():
            if text := decoder.decode(chunk):
                yield text
        if text := decoder.decode(b"", True):
            yield text

    def _charset(self) -> str:
        for param in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset":
                try:
                    return codecs.lookup(value.strip().strip('"')).name
                except LookupError:
                    break
        return "utf-8"

    async def aclose(self) -> None:
        await self._body.aclose()


class _NotSent(Exception):
    """A kept connection turned out closed at the request's first write."""


class H11Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 for ``http://`` URLs; see the module docstring. The limits default to
    httpx's (100 connections, 20 kept alive for 5 s)."""

    def __init__(self, *, max_connections: int = 100, max_keepalive: int = 20,
                 keepalive_expiry: float = 5.0) -> None:
        self._pool = Pool(max_connections, max_keepalive, keepalive_expiry)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"this transport speaks plain http, not {url.scheme!r}")
        timeouts = request.extensions.get("timeout", {})
        trace: Trace | None = request.extensions.get("trace")
        stream = request.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        info = {"request": request}
        wire, event = await self._send((url.host, url.port or 80), request.method.encode("ascii"),
                                       url.raw_path, request.headers.raw, stream,
                                       timeouts, trace, info)
        return httpx.Response(
            event.status_code, headers=event.headers.raw_items(),
            stream=_Body(self._pool, wire, info, timeouts.get("read"), trace),
            extensions={"http_version": b"HTTP/" + event.http_version,
                        "reason_phrase": event.reason},
        )

    async def post(self, target: Target, headers: list[tuple[bytes, bytes]], body: bytes,
                   timeouts: dict[str, Any], trace: Trace | None) -> Reply:
        """POST ``body`` to ``target`` with no httpx above the transport: the model
        client's own requests (provider.py). ``headers`` are sent as given, after Host and
        Content-Length; the same exceptions, timeouts and trace events as through httpx."""
        info = {"url": target.url}
        head = [(b"Host", target.host_header), (b"Content-Length", b"%d" % len(body)),
                *headers]
        wire, event = await self._send(target.origin, b"POST", target.path, head, body,
                                       timeouts, trace, info)
        return Reply(event.status_code, event.headers, target.url,
                     _Body(self._pool, wire, info, timeouts.get("read"), trace))

    async def _send(self, origin: tuple[str, int], method: bytes, target: bytes,
                    headers: Any, body: Any, timeouts: dict[str, Any], trace: Trace | None,
                    info: dict[str, Any]) -> tuple[Wire, h11.Response]:
        """The request sent on a pooled or new connection and its response's head read;
        ``body`` bytes or an httpx stream (either may be sent twice)."""
        reuse = True
        while True:
            wire = await self._pool.acquire(origin, timeouts.get("pool"), reuse=reuse)
            reused = wire is not None
            if wire is None:
                wire = await self._connect(origin, timeouts.get("connect"), trace)
            try:
                event = await self._exchange(wire, method, target, headers, body, timeouts,
                                             trace, info, reused)
                return wire, event
            except _NotSent:
                wire.close()  # sent once more, on a new connection
                reuse = False
                continue
            except BaseException:
                wire.close()
                raise

    async def _connect(self, origin: tuple[str, int], timeout: float | None,
                       trace: Trace | None) -> Wire:
        info = {"host": origin[0], "port": origin[1], "local_address": None,
                "timeout": timeout, "socket_options": None}
        wire: Wire | None = None
        try:
            async with traced(trace, "connection.connect_tcp", info) as done:
                wire = await connect(origin, timeout)
                done["return_value"] = wire
        except BaseException:
            self._pool.abandon()
            if wire is not None:  # cancelled in the trace callback after connecting
                wire.close()
            raise
        self._pool.opened(wire)
        return wire

    async def _exchange(self, wire: Wire, method: bytes, target: bytes, headers: Any,
                        body: Any, timeouts: dict[str, Any], trace: Trace | None,
                        info: dict[str, Any], reused: bool) -> h11.Response:
        conn = wire.h11
        write_timeout = timeouts.get("write")
        async with traced(trace, "http11.send_request_headers", info):
            try:
                head = conn.send(h11.Request(method=method, target=target, headers=headers))
            except h11.LocalProtocolError as exc:
                raise httpx.LocalProtocolError(str(exc)) from None
        # a small request goes out in one write with its body; a write that finds the
        # connection closed is not an error yet: the server may have answered (httpcore)
        out = bytearray(head or b"")
        first = True
        async with traced(trace, "http11.send_request_body", info):
            if isinstance(body, bytes):
                out += conn.send(h11.Data(data=body)) or b""
            else:
                async for chunk in body:
                    out += conn.send(h11.Data(data=chunk)) or b""
                    if len(out) >= 64 * 1024:
                        first = await self._write(wire, out, write_timeout, reused and first)
                        out = bytearray()
            out += conn.send(h11.EndOfMessage()) or b""
            await self._write(wire, out, write_timeout, reused and first)
        read_timeout = timeouts.get("read")
        async with traced(trace, "http11.receive_response_headers", info) as done:
            while True:
                event = await _next_event(wire, read_timeout)
                if isinstance(event, h11.Response):
                    break
                if not isinstance(event, h11.InformationalResponse):
                    raise httpx.RemoteProtocolError(
                        f"unexpected {type(event).__name__} before the response")
            done["return_value"] = (b"HTTP/" + event.http_version, event.status_code,
                                    event.reason, event.headers.raw_items())
        return event

    @staticmethod
    async def _write(wire: Wire, data: bytearray, timeout: float | None, first: bool) -> bool:
        """Write ``data``; _NotSent if it was the reused connection's first write and the
        connection was closed. False once a write went out (none after it is first)."""
        if data and not wire.write(bytes(data)) and first:
            raise _NotSent
        await wire.drain(timeout)
        return False

    async def aclose(self) -> None:
        self._pool.close_all()


async def _next_event(wire: Wire, read_timeout: float | None) -> Any:
    """h11's next event of the response, reading as it needs; httpx's exceptions."""
    conn = wire.h11
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from None
        if event is not h11.NEED_DATA:
            if event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError("the server closed the connection mid-response")
            return event
        data = await wire.read(read_timeout)
        if not data and conn.their_state is h11.SEND_RESPONSE:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        try:
            conn.receive_data(data)
        except RuntimeError:  # receive_data after the end of the connection
            raise httpx.RemoteProtocolError(
                "the server closed the connection mid-response") from None


class _Body(httpx.AsyncByteStream):
    """A response's body as it arrives. Read to its end and closed, its connection goes back
    to the pool; closed before (or failed, or cancelled), its connection is closed."""

    def __init__(self, pool: Pool, wire: Wire, info: dict[str, Any],
                 read_timeout: float | None, trace: Trace | None) -> None:
        self._pool = pool
        self._wire = wire
        self._info = info
        self._read_timeout = read_timeout
        self._trace = trace
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._closed:
            raise httpx.StreamClosed()
        try:
            async with traced(self._trace, "http11.receive_response_body", self._info):
                while True:
                    event = await _next_event(self._wire, self._read_timeout)
                    if isinstance(event, h11.Data):
                        yield bytes(event.data)
                    elif isinstance(event, h11.EndOfMessage):
                        break
        except BaseException:
            self._close(keep=False)  # no await: this may be a cancellation
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        conn = self._wire.h11
        done = conn.our_state is h11.DONE and conn.their_state is h11.DONE
        async with traced(self._trace, "http11.response_closed", self._info):
            self._close(keep=done)

    def _close(self, *, keep: bool) -> None:
        if self._closed:
            return
        self._closed = True
        wire = self._wire
        if keep and not wire.closed:
            wire.h11.start_next_cycle()
            if not wire.h11.trailing_data[0]:  # nothing the server sent past the response
                self._pool.release(wire)
                return
        wire.close()
