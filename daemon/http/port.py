"""Routing a TCP connection of the shared port by its first request head.

``HeadRouter`` stands in as a connection's asyncio protocol until the head
(up to the blank line) has arrived, then hands the transport and the bytes
read so far to WebSocket (a request with ``Upgrade: websocket``) or to a new
HTTP protocol (anything else, a malformed or oversized head included: the
HTTP side answers it). h11 parses the head; nothing here parses HTTP by hand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import h11

__all__ = ["HeadRouter", "is_upgrade", "MAX_HEAD_BYTES", "HEAD_TIMEOUT"]

#: bytes of a request head read before routing (about websockets' own bound)
MAX_HEAD_BYTES = 16 * 1024
#: seconds a connection may take to send its request head
HEAD_TIMEOUT = 10.0


def is_upgrade(head: bytes) -> bool:
    """Whether a complete request head asks to upgrade to WebSocket."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    conn.receive_data(head)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return False
    return isinstance(event, h11.Request) and any(
        name == b"upgrade" and b"websocket" in value.lower() for name, value in event.headers)


class HeadRouter(asyncio.Protocol):
    def __init__(self, http: Callable[[], asyncio.Protocol],
                 websocket: Callable[[asyncio.Transport, bytes], None]) -> None:
        self._http = http
        self._websocket = websocket
        self._head = b""
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._timer = asyncio.get_running_loop().call_later(HEAD_TIMEOUT, transport.abort)

    def data_received(self, data: bytes) -> None:
        if self._transport is None:
            return  # routed already (a read raced the hand-over)
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0 and len(self._head) < MAX_HEAD_BYTES:
            return
        transport, head = self._transport, self._head
        self._transport, self._head = None, b""
        if self._timer is not None:
            self._timer.cancel()
        if end >= 0 and is_upgrade(head[:end + 4]):
            self._websocket(transport, head)
            return
        protocol = self._http()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        protocol.data_received(head)

    def eof_received(self) -> bool | None:
        return False  # closes the transport: it ended before its request did

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
