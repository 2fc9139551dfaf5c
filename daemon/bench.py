"""``tether bench``: measure a private owner against the baselines that bound it.

The bench starts its own owner as a subprocess (so the measuring clients never
share its GIL or loop) on a temporary home, or on ``--home``, with inference
replaced by `InstantProvider`, which answers at once: every figure is the cost
of tether itself. Each figure is measured in the same run as the baseline that
bounds it, so the ratio holds on a noisy machine:

- ``ping``: round trip of ``ping`` vs. a bare websockets echo server (same
  library, same options) on a Unix socket, measured in interleaved blocks;
- ``submit`` / ``retry``: a new ``prompt.submit`` to its durable receipt, and a
  resubmission of a terminal input_id (a read);
- ``admissions_per_s``: 64 clients on their own connections submitting at once
  (their turns held at the provider, as behind a model still thinking), vs. one
  writer making sequential single-row commits (WAL, synchronous=FULL) in the
  same directory: what group commit has to beat. Rounds of the two alternate;
  ``echo_floor`` is the same 64 clients against the echo server;
- ``turns_per_s``: finite turns from submit to terminal across 64 sessions;
- ``fanout``: 100 viewers of one session while turns stream deltas; latency is
  from the event's append (its ``created_at``, stamped in the committing
  transaction, read back from state.db afterwards) to its arrival at the last
  viewer, so it includes the commit's fsync;
- ``oneshot_ms``: ``tether chat --oneshot`` against the warm owner vs.
  ``python -c pass``;
- ``owner_rss_mib``: VmRSS of the owner after the run.

With ``--json`` the last line of stdout is one JSON object; otherwise a table
with the targets. Progress goes to stderr. docs/performance.md records runs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import os
import platform
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from .provider import Completion, DeltaCallback

__all__ = ["InstantProvider", "TARGETS", "main"]

#: (key path, comparison, limit): this round's targets (docs/performance.md)
TARGETS: list[tuple[str, str, float]] = [
    ("ping.ratio", "<=", 2.0),
    ("submit.p50_us", "<=", 3000.0),
    ("retry.p50_us", "<=", 1500.0),
    ("admissions_per_s.ratio", ">=", 1.0),
    ("turns_per_s", ">=", 500.0),
    ("fanout.lost", "<=", 0),
    ("fanout.p99_ms", "<=", 50.0),
    ("oneshot_ms.ratio", "<=", 12.0),
    ("owner_rss_mib", "<=", 80.0),
]

#: iterations per mode; the client counts (64, 100) are part of what is measured
SIZES: dict[str, dict[str, int]] = {
    "quick": dict(ping=200, ping_block=50, submit=60, retry=60, adm_clients=8, adm_each=10,
                  adm_rounds=2, turn_sessions=8, turn_each=3, viewers=4, events=120,
                  oneshot=1, floor=2),
    "default": dict(ping=4000, ping_block=250, submit=1500, retry=1500, adm_clients=64,
                    adm_each=45, adm_rounds=3, turn_sessions=64, turn_each=16, viewers=100,
                    events=2000, oneshot=8, floor=8),
    "long": dict(ping=20000, ping_block=500, submit=6000, retry=6000, adm_clients=64,
                 adm_each=240, adm_rounds=6, turn_sessions=64, turn_each=60, viewers=100,
                 events=10000, oneshot=25, floor=25),
}

#: prompt text that makes InstantProvider stream this many small chunks
STREAM_PREFIX = "bench-stream "
#: prompt text that makes InstantProvider wait for the bench's release signal
HOLD_PREFIX = "bench-hold "
#: per-session bound on open admissions the bench stays under (default limit 64)
PER_SESSION = 48


# -- the owner side -------------------------------------------------------


class InstantProvider:
    """A Provider that answers at once, offline: inference costs nothing.

    ``"bench-stream N"`` as the prompt streams N small chunks, alternating
    text and reasoning so each becomes its own event (a change of kind ends a
    coalesced delta). ``"bench-hold K"`` waits until `release` was called K
    times (SIGUSR1 to the bench owner), like a model still thinking. Anything
    else streams and answers ``ok``.
    """

    name = "bench"

    def __init__(self) -> None:
        self.released = 0
        self._changed = asyncio.Event()

    def release(self) -> None:
        self.released += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def complete(self, *, messages: list[dict], tools: list[dict] | None, model: str,
                       reasoning: str | None = None, on_delta: DeltaCallback | None = None,
                       on_reasoning: DeltaCallback | None = None) -> Completion:
        last = messages[-1].get("content") if messages else None
        chunks = 1
        if isinstance(last, str) and last.startswith(STREAM_PREFIX):
            chunks = int(last[len(STREAM_PREFIX):].split()[0])
        elif isinstance(last, str) and last.startswith(HOLD_PREFIX):
            gate = int(last[len(HOLD_PREFIX):].split()[0])
            while self.released < gate:
                await self._changed.wait()
        for i in range(chunks):
            sink = on_reasoning if i % 2 else on_delta
            if sink is not None:
                await sink(f"chunk {i} ")
        return Completion(text="ok", tool_calls=[], usage={"total_tokens": 1},
                          finish_reason="stop", reasoning=None, model=model)


def _serve_owner(home_dir: str) -> int:
    """The bench's private owner: default limits, the demo provider replaced."""
    from .config import Config
    from .home import Home, OwnerRunning
    from .owner import run_owner, setup_logging

    home = Home(Path(home_dir))
    home.ensure()
    setup_logging(home, foreground=False)
    provider = InstantProvider()

    async def serve() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, provider.release)
        # the default provider name is "demo": the override makes every turn instant
        await run_owner(home, config=Config(), providers={"demo": provider})

    try:
        asyncio.run(serve())
    except OwnerRunning as exc:
        print(f"{exc}; give the bench a home of its own", file=sys.stderr)
        return 3
    return 0


def _serve_echo(path: str) -> int:
    from .server import serve_echo

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        server = await serve_echo(Path(path))
        await stop.wait()
        server.close()

    asyncio.run(run())
    return 0


# -- measuring helpers ----------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _progress(msg: str) -> None:
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


async def _timed(n: int, fn: Callable[[int], Awaitable[Any]]) -> list[float]:
    """Microseconds of each of ``n`` sequential calls."""
    out = []
    clock = time.perf_counter
    for i in range(n):
        t0 = clock()
        await fn(i)
        out.append((clock() - t0) * 1e6)
    return out


class Bench:
    def __init__(self, home: Path, sizes: dict[str, int]) -> None:
        self.home = home
        self.sock = home / "daemon.sock"
        self.n = sizes
        self.owner: subprocess.Popen[bytes] | None = None
        self.echo: subprocess.Popen[bytes] | None = None
        self.echo_sock = home / "bench-echo.sock"
        self.admin: Conn | None = None
        self.out: dict[str, Any] = {}

    # -- processes --------------------------------------------------------

    def start_owner(self) -> None:
        desc = self.home / "daemon.json"
        self.owner = subprocess.Popen(
            [sys.executable, "-m", "tether.daemon.bench", "--serve-owner", str(self.home)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.home / "bench-owner.log", "ab"))  # noqa: SIM115
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.owner.poll() is not None:
                log = (self.home / "bench-owner.log").read_text(errors="replace").strip()
                why = log.splitlines()[-1] if log else f"exit status {self.owner.returncode}"
                raise RuntimeError(f"the bench owner did not start: {why}")
            try:
                if orjson.loads(desc.read_bytes()).get("pid") == self.owner.pid:
                    return
            except (FileNotFoundError, orjson.JSONDecodeError):
                pass
            time.sleep(0.02)
        raise RuntimeError("the bench owner did not start within 30 s")

    def stop_owner(self) -> None:
        if self.owner is not None and self.owner.poll() is None:
            self.owner.send_signal(signal.SIGTERM)
            try:
                self.owner.wait(30)
            except subprocess.TimeoutExpired:
                self.owner.kill()
                self.owner.wait()

    def owner_cpu_s(self) -> float:
        """CPU seconds (user + system) the owner has used so far."""
        assert self.owner is not None
        fields = Path(f"/proc/{self.owner.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def owner_rss_mib(self) -> float:
        assert self.owner is not None
        for line in Path(f"/proc/{self.owner.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
        return float("nan")

    # -- shared steps -----------------------------------------------------

    async def sessions(self, n: int, subscribe: Conn | None = None) -> list[str]:
        """``n`` new sessions; followed by ``subscribe``, else by nobody."""
        conn = subscribe or self.admin
        assert conn is not None
        out = []
        for _ in range(n):
            sid = (await conn.result("session.create", source="api"))["session_id"]
            if subscribe is None:
                await conn.result("session.detach", session_id=sid)
            out.append(sid)
        return out

    async def wait_terminal(self, last: dict[str, str], timeout: float = 120.0) -> None:
        """Wait until the given input_id of each session is terminal (FIFO per
        session: so is every earlier one)."""
        assert self.admin is not None
        deadline = time.monotonic() + timeout
        for sid, input_id in last.items():
            while True:
                r = await self.admin.result("prompt.receipt", session_id=sid, input_id=input_id)
                if r["status"] == "terminal":
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"turns did not finish within {timeout} s")
                await asyncio.sleep(0.02)

    # -- phases -----------------------------------------------------------

    async def start_echo(self) -> None:
        """The baseline server: bare websockets echo, same options, own process."""
        self.echo_sock = self.home / "bench-echo.sock"
        self.echo = subprocess.Popen([sys.executable, "-m", "tether.daemon.bench",
                                      "--serve-echo", str(self.echo_sock)],
                                     stdin=subprocess.DEVNULL)
        for _ in range(1000):
            if self.echo_sock.exists():
                return
            await asyncio.sleep(0.01)
        raise RuntimeError("the echo server did not start")

    def stop_echo(self) -> None:
        if self.echo is not None and self.echo.poll() is None:
            self.echo.send_signal(signal.SIGTERM)
            self.echo.wait(10)

    async def ping(self) -> None:
        _progress("ping vs. websockets echo")
        tether, base = await Conn.open(self.sock), await Conn.open(self.echo_sock)
        t_lat: list[float] = []
        b_lat: list[float] = []
        for conn in (tether, base):
            await _timed(200, lambda _i, c=conn: c.call("ping"))  # warm up
        block = self.n["ping_block"]
        for _ in range(max(1, self.n["ping"] // block)):  # interleaved: same conditions
            t_lat += await _timed(block, lambda _i: tether.call("ping"))
            b_lat += await _timed(block, lambda _i: base.call("ping"))
        await tether.close()
        await base.close()
        p50, base50 = _pct(t_lat, 0.5), _pct(b_lat, 0.5)
        self.out["ping"] = {"p50_us": round(p50, 1), "p99_us": round(_pct(t_lat, 0.99), 1),
                            "baseline_p50_us": round(base50, 1),
                            "baseline_p99_us": round(_pct(b_lat, 0.99), 1),
                            "ratio": round(p50 / base50, 2), "n": len(t_lat)}

    async def submit_and_retry(self) -> None:
        _progress("prompt.submit and retry latency")
        n = self.n["submit"]
        sids = await self.sessions(max(1, -(-n // PER_SESSION)))
        conn = await Conn.open(self.sock)
        sent: list[tuple[str, str]] = []

        async def submit(i: int) -> None:
            sid, iid = sids[i % len(sids)], f"sub-{i}"
            reply = await conn.call("prompt.submit", session_id=sid, input_id=iid,
                                    text="hello", finite=True)
            if "result" not in reply:
                raise RuntimeError(f"prompt.submit failed: {reply['error']}")
            sent.append((sid, iid))

        lat = await _timed(n, submit)
        await self.wait_terminal(dict(sent))

        async def retry(i: int) -> None:
            sid, iid = sent[i % len(sent)]
            reply = await conn.call("prompt.submit", session_id=sid, input_id=iid,
                                    text="hello", finite=True)
            if reply.get("result", {}).get("status") != "terminal":
                raise RuntimeError(f"a retry did not return its terminal receipt: {reply}")

        rlat = await _timed(self.n["retry"], retry)
        await conn.close()
        self.out["submit"] = {"p50_us": round(_pct(lat, 0.5), 1),
                              "p99_us": round(_pct(lat, 0.99), 1), "n": n}
        self.out["retry"] = {"p50_us": round(_pct(rlat, 0.5), 1),
                             "p99_us": round(_pct(rlat, 0.99), 1), "n": len(rlat)}

    def sqlite_baseline(self, n: int) -> float:
        """Seconds for ``n`` sequential single-row commits, WAL + synchronous=FULL,
        in the home's directory (next to state.db)."""
        path = self.home / "bench-baseline.db"
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("CREATE TABLE IF NOT EXISTS admissions(seq INTEGER PRIMARY KEY, "
                       "admission_id TEXT UNIQUE, request_id TEXT, payload_json TEXT, "
                       "created_at REAL)")
            payload = '{"finite":true,"text":"hello"}'
            t0 = time.perf_counter()
            for _ in range(n):
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO admissions(admission_id, request_id, payload_json, "
                           "created_at) VALUES (?, ?, ?, ?)",
                           (os.urandom(12).hex(), "in", payload, time.time()))
                db.execute("COMMIT")
            return time.perf_counter() - t0
        finally:
            db.close()

    async def admissions(self) -> None:
        """Rounds of: sequential SQLite commits, 64 clients submitting to tether, the
        same 64 clients against the echo server; each rate over all its rounds."""
        clients, each, rounds = self.n["adm_clients"], self.n["adm_each"], self.n["adm_rounds"]
        _progress(f"admissions: {clients} concurrent clients vs. sequential SQLite commits")
        per_client = max(1, -(-each // PER_SESSION))
        sids = await self.sessions(clients * per_client)
        conns = [await Conn.open(self.sock) for _ in range(clients)]
        echoes = [await Conn.open(self.echo_sock) for _ in range(clients)]
        last: dict[str, str] = {}
        spent = {"tether": 0.0, "sqlite": 0.0, "echo": 0.0}
        cpu = 0.0
        per_round = max(1, each // rounds)

        async def client(k: int, conn: Conn, first: int) -> None:
            mine = sids[k * per_client:(k + 1) * per_client]
            for i in range(first, first + per_round):
                sid, iid = mine[i % len(mine)], f"adm-{k}-{i}"
                # held at the "model": the turns wait, as behind a real model, and
                # the owner's time goes to admitting (turns_per_s measures turns)
                reply = await conn.call("prompt.submit", session_id=sid, input_id=iid,
                                        text=f"{HOLD_PREFIX}1", finite=True)
                if "result" not in reply:
                    raise RuntimeError(f"prompt.submit failed: {reply['error']}")
                last[sid] = iid

        async def echo(conn: Conn) -> None:
            for i in range(per_round):
                await conn.call("prompt.submit", session_id="ses_x", input_id=f"e-{i}",
                                text=f"{HOLD_PREFIX}1", finite=True)

        for r in range(rounds):
            spent["sqlite"] += self.sqlite_baseline(clients * per_round)
            t0, cpu0 = time.perf_counter(), self.owner_cpu_s()
            await asyncio.gather(*(client(k, c, r * per_round) for k, c in enumerate(conns)))
            spent["tether"] += time.perf_counter() - t0
            cpu += self.owner_cpu_s() - cpu0
            t0 = time.perf_counter()
            await asyncio.gather(*(echo(c) for c in echoes))
            spent["echo"] += time.perf_counter() - t0
        for c in (*conns, *echoes):
            await c.close()
        assert self.owner is not None
        self.owner.send_signal(signal.SIGUSR1)  # let the held turns run
        await self.wait_terminal(last)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                (self.home / f"bench-baseline.db{suffix}").unlink()
        n = clients * per_round * rounds
        rate, base = n / spent["tether"], n / spent["sqlite"]
        self.out["admissions_per_s"] = {
            "tether": round(rate), "sqlite_baseline": round(base),
            "ratio": round(rate / base, 2), "echo_floor": round(n / spent["echo"]),
            "clients": clients, "n": n, "owner_cpu_us_each": round(cpu / n * 1e6)}

    async def turns(self) -> None:
        n_sessions, each = self.n["turn_sessions"], self.n["turn_each"]
        _progress(f"turns: {n_sessions * each} finite turns across {n_sessions} sessions")
        conns = [await Conn.open(self.sock) for _ in range(n_sessions)]
        sids = [(await self.sessions(1, subscribe=c))[0] for c in conns]
        go = asyncio.Event()
        done_at: list[float] = []

        async def session(conn: Conn, sid: str) -> None:
            conn.events.clear()
            await go.wait()
            for i in range(each):
                reply = await conn.call("prompt.submit", session_id=sid, input_id=f"turn-{i}",
                                        text="hello", finite=True)
                if "result" not in reply:
                    raise RuntimeError(f"prompt.submit failed: {reply['error']}")
            seen = sum(e["type"] == "message.complete" for e in conn.events)
            while seen < each:
                msg = orjson.loads(await conn.ws.recv())
                if msg.get("method") == "event" and msg["params"]["type"] == "message.complete":
                    seen += 1
            done_at.append(time.perf_counter())

        tasks = [asyncio.create_task(session(c, s)) for c, s in zip(conns, sids, strict=True)]
        await asyncio.sleep(0.05)
        t0, cpu0 = time.perf_counter(), self.owner_cpu_s()
        go.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
        self.out["turns_per_s"] = round(n_sessions * each / (max(done_at) - t0), 1)
        self.out["turn_owner_cpu_us_each"] = round(
            (self.owner_cpu_s() - cpu0) / (n_sessions * each) * 1e6)
        for c in conns:
            await c.close()

    async def fanout(self) -> None:
        n_viewers, target = self.n["viewers"], self.n["events"]
        _progress(f"fan-out: {target} events to {n_viewers} viewers")
        driver = await Conn.open(self.sock)
        [sid] = await self.sessions(1, subscribe=driver)
        viewers = [await RawViewer.open(self.sock) for _ in range(n_viewers)]
        floors = []
        for v in viewers:
            floors.append((await v.call("session.resume", session_id=sid))["last_seq"])
        start = min(floors)
        chunks = 20
        i = 0
        seq = start
        while seq - start < target:
            reply = await driver.result("prompt.submit", session_id=sid, input_id=f"fan-{i}",
                                        text=f"{STREAM_PREFIX}{chunks}", finite=True)
            aid = reply["admission_id"]
            while not any(e["type"] == "message.complete" and e["admission_id"] == aid
                          for e in driver.events):
                msg = orjson.loads(await driver.ws.recv())
                if msg.get("method") == "event":
                    driver.events.append(msg["params"])
            seq = max(e["seq"] for e in driver.events)
            driver.events.clear()
            i += 1
        # the final session.info follows message.complete: ask the log where it ends
        await asyncio.sleep(0.05)
        last = (await driver.result("session.events.since", session_id=sid,
                                    after_seq=seq))["last_seq"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
                v.frames_seen < last - f for v, f in zip(viewers, floors, strict=True)):
            await asyncio.sleep(0.05)
        await driver.close()
        for v in viewers:
            v.close()

        created = self._created_at(sid, start)
        lost = gaps = 0
        arrival: dict[int, float] = {}
        for v, floor in zip(viewers, floors, strict=True):
            seqs = set()
            for at, frame in v.frames:
                msg = orjson.loads(frame)
                if msg.get("method") != "event":
                    continue
                ev = msg["params"]
                if ev["type"] == "session.replay_gap":
                    gaps += 1
                    continue
                seqs.add(ev["seq"])
                if at > arrival.get(ev["seq"], 0.0):
                    arrival[ev["seq"]] = at
            lost += len(set(range(floor + 1, last + 1)) - seqs)
        lat = [(arrival[s] - created[s]) * 1000 for s in created if s in arrival]
        self.out["fanout"] = {"viewers": n_viewers, "events": last - start,
                              "p50_ms": round(_pct(lat, 0.5), 2),
                              "p99_ms": round(_pct(lat, 0.99), 2), "lost": lost,
                              "replay_gaps": gaps}

    def _created_at(self, sid: str, after: int) -> dict[int, float]:
        db = sqlite3.connect(f"file:{self.home / 'state.db'}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT seq, created_at FROM events WHERE session_id = ? "
                              "AND seq > ?", (sid, after)).fetchall()
        finally:
            db.close()
        return {int(s): float(c) for s, c in rows}

    def oneshot(self) -> None:
        _progress("one-shot CLI vs. python -c pass")
        env = {**os.environ, "TETHER_HOME": str(self.home)}
        cli = [sys.executable, "-m", "tether.clients.cli", "chat", "--oneshot", "-q", "hello",
               "--home", str(self.home)]
        floor_cmd = [sys.executable, "-c", "pass"]

        def run(cmd: list[str]) -> tuple[float, int]:
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=60)
            ms = (time.perf_counter() - t0) * 1000
            if cmd is cli and proc.returncode == 0 and b"ok" not in proc.stdout:
                return ms, -1  # exited 0 without the answer: not a working one-shot
            return ms, proc.returncode

        run(floor_cmd)
        _, rc = run(cli)  # warm the page cache; also: does the CLI work at all?
        floors, shots = [], []
        for _ in range(self.n["floor"]):
            floors.append(run(floor_cmd)[0])
            if rc == 0 and len(shots) < self.n["oneshot"]:
                ms, rc = run(cli)
                shots.append(ms)
        floor = _pct(floors, 0.5)
        result: dict[str, Any] = {"p50": None, "python_floor_ms": round(floor, 1),
                                  "ratio": None}
        if rc == 0 and shots:
            result["p50"] = round(_pct(shots, 0.5), 1)
            result["ratio"] = round(result["p50"] / floor, 2)
        else:
            result["error"] = f"`tether chat --oneshot` exited with {rc}"
        self.out["oneshot_ms"] = result

    async def run(self, phases: set[str] | None = None) -> dict[str, Any]:
        """Every phase in order (``phases``: only these, for profiling one)."""
        self.admin = await Conn.open(self.sock)
        await self.start_echo()
        for name, phase in (("ping", self.ping), ("submit", self.submit_and_retry),
                            ("admissions", self.admissions), ("turns", self.turns),
                            ("fanout", self.fanout)):
            if phases is None or name in phases:
                await phase()
        await self.admin.close()
        if phases is None or "oneshot" in phases:
            self.oneshot()
        self.out["owner_rss_mib"] = self.owner_rss_mib()
        return self.out


# -- report ---------------------------------------------------------------


def _get(data: dict[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def judge(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target with the measured value and whether it holds (None: not measured)."""
    out = {}
    for path, op, limit in TARGETS:
        value = _get(data, path)
        ok = None if value is None else (value <= limit if op == "<=" else value >= limit)
        out[path] = {"value": value, "target": f"{op} {limit:g}", "ok": ok}
    return out


def _table(data: dict[str, Any]) -> str:
    m = data["machine"]
    lines = [f"tether bench ({data['mode']}, {data['seconds']} s, {m['cpus']} CPU, "
             f"Python {m['python']}, {m['disk']})", ""]
    for path, t in data["targets"].items():
        mark = {True: "PASS", False: "FAIL", None: "n/a "}[t["ok"]]
        lines.append(f"  {mark}  {path:<24} {t['value']!s:>12}   target {t['target']}")
    p, s, r = data["ping"], data["submit"], data["retry"]
    a, f = data["admissions_per_s"], data["fanout"]
    lines += ["",
              f"  ping        p50 {p['p50_us']} us, p99 {p['p99_us']} us; "
              f"echo baseline p50 {p['baseline_p50_us']} us",
              f"  submit      p50 {s['p50_us']} us, p99 {s['p99_us']} us",
              f"  retry       p50 {r['p50_us']} us, p99 {r['p99_us']} us",
              f"  admissions  {a['tether']}/s with {a['clients']} clients; "
              f"SQLite sequential commits {a['sqlite_baseline']}/s; "
              f"echo floor {a['echo_floor']}/s",
              f"  turns       {data['turns_per_s']}/s",
              f"  fan-out     {f['events']} events x {f['viewers']} viewers: p50 {f['p50_ms']} ms, "
              f"p99 {f['p99_ms']} ms, lost {f['lost']}",
              f"  one-shot    p50 {data['oneshot_ms']['p50']} ms; python -c pass "
              f"{data['oneshot_ms']['python_floor_ms']} ms",
              f"  owner RSS   {data['owner_rss_mib']} MiB"]
    return "\n".join(lines)


def _machine(home: Path) -> dict[str, Any]:
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    disk = "unknown"
    with contextlib.suppress(OSError):
        best = ""
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, fstype = line.split()[:3]
            inside = str(home).startswith(mount.rstrip("/") + "/") or str(home) == mount
            if inside and len(mount) > len(best):
                best, disk = mount, f"{fstype} on {device} (mounted at {mount})"
    return {"cpus": os.cpu_count(), "cpu_model": model,
            "python": platform.python_version(), "platform": platform.platform(),
            "home": str(home), "disk": disk}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tether bench",
        description="Measure a private owner (instant provider) against its baselines.")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object as the last line of stdout")
    parser.add_argument("--home", help="run the private owner here (default: a temporary "
                                       "directory); must not have an owner running")
    parser.add_argument("--long", action="store_true", help="more iterations of everything")
    parser.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--phases", help=argparse.SUPPRESS)  # e.g. ping,fanout: profiling
    parser.add_argument("--serve-owner", metavar="HOME", help=argparse.SUPPRESS)
    parser.add_argument("--serve-echo", metavar="SOCK", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_owner:
        return _serve_owner(args.serve_owner)
    if args.serve_echo:
        return _serve_echo(args.serve_echo)

    mode = "quick" if args.quick else "long" if args.long else "default"
    temp = args.home is None
    home = Path(tempfile.mkdtemp(prefix="tether-bench-") if temp else args.home).absolute()
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    bench = Bench(home, SIZES[mode])
    t0 = time.monotonic()
    try:
        try:
            bench.start_owner()
        except RuntimeError as exc:
            print(f"tether bench: {exc}", file=sys.stderr)
            return 3
        data = asyncio.run(bench.run(set(args.phases.split(",")) if args.phases else None))
    except (OSError, RuntimeError) as exc:
        print(f"tether bench: failed: {exc}", file=sys.stderr)
        return 1
    finally:
        bench.stop_echo()
        bench.stop_owner()
        if temp:
            shutil.rmtree(home, ignore_errors=True)
    data["mode"] = mode
    data["seconds"] = round(time.monotonic() - t0, 1)
    data["machine"] = _machine(home)
    data["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data["targets"] = judge(data)
    if args.phases:
        print(orjson.dumps(data).decode())
        return 0
    data["pass"] = all(t["ok"] for t in data["targets"].values())
    if args.json:
        print(orjson.dumps(data).decode())
    else:
        print(_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
