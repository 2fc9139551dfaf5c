"""The measuring side of ``tether bench``: clients and timing helpers.

`Conn` is an ordinary websockets client making sequential calls; `RawViewer`
is a hand-made WebSocket client cheap enough that a hundred of them in one
process measure the owner, not the bench. `timed` and `pct` turn calls into
latency percentiles; `progress` reports to stderr.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import itertools
import os
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Conn", "RawViewer", "fanout_latency", "pct", "progress", "timed"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextlib.contextmanager
def no_collector_pauses() -> Iterator[None]:
    """While timing in the bench's own process: its cyclic garbage collector held
    off. The fan-out keeps every frame its viewers get (hundreds of thousands of
    objects), and a full collection over them stops the process for tens of
    milliseconds, which would be counted as the owner's latency; where such a
    pause fell moved with whatever the earlier phases had allocated. Whatever was
    alive before is frozen first, so the collection after starts from that."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def fanout_latency(viewers: list[tuple[RawViewer, int]], last: int,
                   created: dict[int, float]) -> dict[str, Any]:
    """Per event, from its ``created_at`` to its arrival at the last of the viewers
    to get it (a viewer's first copy counts: a feed may deliver twice), and how many
    of the events after each viewer's floor (its pair's int) it never got."""
    arrival: dict[int, float] = {}
    lost = gaps = 0
    for viewer, floor in viewers:
        seqs: set[int] = set()
        for at, frame in viewer.frames:
            msg = orjson.loads(frame)
            if msg.get("method") != "event":
                continue
            ev = msg["params"]
            if ev["type"] == "session.replay_gap":
                gaps += 1
            elif ev["seq"] not in seqs:
                seqs.add(ev["seq"])
                arrival[ev["seq"]] = max(at, arrival.get(ev["seq"], 0.0))
        lost += len(set(range(floor + 1, last + 1)) - seqs)
    lat = [(arrival[s] - created[s]) * 1000 for s in created if s in arrival]
    return {"p50_ms": round(pct(lat, 0.5), 2) if lat else None,
            "p99_ms": round(pct(lat, 0.99), 2) if lat else None,
            "received": len(lat), "lost": lost, "replay_gaps": gaps}


def progress(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class Conn:
    """One client connection: sequential calls; events that arrive meanwhile are kept."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, sock: Path) -> Conn:
        from websockets.asyncio.client import unix_connect

        ws = await unix_connect(str(sock), compression=None, max_size=None,
                                ping_interval=None)
        return cls(ws)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        rid = next(self.ids)
        await self.ws.send(orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                         "params": params}), text=True)
        while True:
            msg = orjson.loads(await self.ws.recv())
            if msg.get("id") == rid:
                return msg
            if msg.get("method") == "event":
                self.events.append(msg["params"])

    async def result(self, method: str, **params: Any) -> dict[str, Any]:
        reply = await self.call(method, **params)
        if "result" not in reply:
            raise RuntimeError(f"{method} failed: {reply.get('error')}")
        return reply["result"]

    async def run_turns(self, sid: str, n: int, tag: str) -> list[dict[str, Any]]:
        """Submit ``n`` finite turns ("hello", input ids ``{tag}-0``, ``{tag}-1``, ...)
        back to back, then wait for as many ``message.complete`` events (those already
        kept count) and return them."""
        for i in range(n):
            reply = await self.call("prompt.submit", session_id=sid, input_id=f"{tag}-{i}",
                                    text="hello", finite=True)
            if "result" not in reply:
                raise RuntimeError(f"prompt.submit failed: {reply['error']}")
        done = [e for e in self.events if e["type"] == "message.complete"]
        while len(done) < n:
            msg = orjson.loads(await self.ws.recv())
            if msg.get("method") == "event" and msg["params"]["type"] == "message.complete":
                done.append(msg["params"])
        return done

    async def extend_log(self, sid: str, start: int, target: int, *, text: str,
                         tag: str) -> int:
        """Submit turns of ``text`` (input ids ``{tag}-0``, ``{tag}-1``, ...) one after
        another, each to its ``message.complete``, until the session's log stands
        ``target`` events past ``start``; return the log's last seq then."""
        seq, i = start, 0
        while seq - start < target:
            aid = (await self.result("prompt.submit", session_id=sid, input_id=f"{tag}-{i}",
                                     text=text, finite=True))["admission_id"]
            while not any(e["type"] == "message.complete" and e["admission_id"] == aid
                          for e in self.events):
                msg = orjson.loads(await self.ws.recv())
                if msg.get("method") == "event":
                    self.events.append(msg["params"])
            seq = max(e["seq"] for e in self.events)
            self.events.clear()
            i += 1
        # the final session.info follows message.complete: ask the log where it ends
        await asyncio.sleep(0.05)
        return (await self.result("session.events.since", session_id=sid,
                                  after_seq=seq))["last_seq"]

    async def close(self) -> None:
        await self.ws.close()


class RawViewer(asyncio.Protocol):
    """A viewer that costs its process as little as possible while it is measured.

    A hand-made WebSocket client (RFC 6455: masked frames out, unmasked in) on
    the owner's socket: each complete text frame is kept, unparsed, with the
    wall-clock time its last byte arrived; pings are answered. A websockets
    client spends tens of microseconds per frame, so a hundred of them in one
    process would measure the bench, not the owner.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.upgraded = asyncio.get_running_loop().create_future()
        self.frames: list[tuple[float, bytes]] = []
        self.frames_seen = 0  # event frames
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, sock: Path) -> RawViewer:
        loop = asyncio.get_running_loop()
        _, viewer = await loop.create_unix_connection(cls, str(sock))
        key = base64.b64encode(os.urandom(16)).decode()
        assert viewer.transport is not None
        viewer.transport.write(
            f"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\n\r\n".encode())
        await asyncio.wait_for(viewer.upgraded, 10)
        return viewer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        head = (struct.pack("!BB", 0x80 | opcode, 0x80 | n) if n < 126
                else struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n))
        masked = (int.from_bytes(payload, "big")
                  ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
        assert self.transport is not None
        self.transport.write(head + mask + masked)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        rid = next(self._ids)
        self._send(0x1, orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                      "params": params}))
        for _ in range(1000):
            for _at, frame in self.frames:
                msg = orjson.loads(frame)
                if msg.get("id") == rid:
                    self.frames = [f for f in self.frames if f[1] is not frame]
                    if "result" not in msg:
                        raise RuntimeError(f"{method} failed: {msg.get('error')}")
                    return msg["result"]
            await asyncio.sleep(0.01)
        raise RuntimeError(f"no reply to {method}")

    def data_received(self, data: bytes) -> None:
        now = time.time()
        buf = self.buf
        buf += data
        if not self.upgraded.done():
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if not buf.startswith(b"HTTP/1.1 101"):
                self.upgraded.set_exception(RuntimeError(bytes(buf[:200]).decode()))
                return
            del buf[:end + 4]
            self.upgraded.set_result(None)
        pos, size = 0, len(buf)
        while size - pos >= 2:
            b0, n = buf[pos], buf[pos + 1] & 0x7F
            head = 2
            if n == 126:
                if size - pos < 4:
                    break
                n, head = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
            elif n == 127:
                if size - pos < 10:
                    break
                n, head = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
            if size - pos < head + n:
                break
            payload = bytes(buf[pos + head:pos + head + n])
            pos += head + n
            opcode = b0 & 0x0F
            if opcode == 0x1:
                self.frames.append((now, payload))
                self.frames_seen += payload.startswith(b'{"jsonrpc":"2.0","method"')
            elif opcode == 0x9:
                self._send(0xA, payload)  # pong
        del buf[:pos]

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def timed(n: int, fn: Callable[[int], Awaitable[Any]]) -> list[float]:
    """Microseconds of each of ``n`` sequential calls (no_collector_pauses)."""
    out = []
    clock = time.perf_counter
    with no_collector_pauses():
        for i in range(n):
            t0 = clock()
            await fn(i)
            out.append((clock() - t0) * 1e6)
    return out
