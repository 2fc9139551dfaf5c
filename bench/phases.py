"""The phases of ``tether bench``: each figure measured against its baseline.

`Bench` drives the private owner and the echo baseline (started by
processes.py) with the clients of clients.py, and collects one dict of
figures; command.py judges and prints it. What each phase measures and why is
in the package docstring and docs/performance.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
import subprocess
import sys
import time
from typing import Any

from .clients import Conn, RawViewer, fanout_latency, no_collector_pauses, pct, progress, timed
from .processes import Processes
from .servers import HOLD_PREFIX, STREAM_PREFIX

__all__ = ["Bench", "PER_SESSION"]

#: per-session bound on open admissions the bench stays under (default limit 64)
PER_SESSION = 48


async def _ping(conn: Conn, _i: int) -> Any:
    return await conn.call("ping")


class Bench:
    """The phases, run against ``procs`` (its owner already started) with ``sizes``."""

    def __init__(self, procs: Processes, sizes: dict[str, int],
                 hermes: str | None = None) -> None:
        self.procs = procs
        #: hermes-agent's ``hermes`` to compare the one-shot fan-out with (--hermes)
        self.hermes = hermes
        self.home = procs.home
        self.sock = procs.sock
        self.echo_sock = procs.echo_sock
        self.n = sizes
        self.admin: Conn | None = None
        self.out: dict[str, Any] = {}

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

    async def ping(self) -> None:
        progress("ping vs. websockets echo")
        tether, base = await Conn.open(self.sock), await Conn.open(self.echo_sock)
        t_lat: list[float] = []
        b_lat: list[float] = []
        for conn in (tether, base):
            await timed(200, functools.partial(_ping, conn))  # warm up
        block = self.n["ping_block"]
        for _ in range(max(1, self.n["ping"] // block)):  # interleaved: same conditions
            t_lat += await timed(block, lambda _i: tether.call("ping"))
            b_lat += await timed(block, lambda _i: base.call("ping"))
        await tether.close()
        await base.close()
        p50, base50 = pct(t_lat, 0.5), pct(b_lat, 0.5)
        self.out["ping"] = {"p50_us": round(p50, 1), "p99_us": round(pct(t_lat, 0.99), 1),
                            "baseline_p50_us": round(base50, 1),
                            "baseline_p99_us": round(pct(b_lat, 0.99), 1),
                            "ratio": round(p50 / base50, 2), "n": len(t_lat)}

    async def submit_and_retry(self) -> None:
        progress("prompt.submit and retry latency")
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

        lat = await timed(n, submit)
        await self.wait_terminal(dict(sent))

        async def retry(i: int) -> None:
            sid, iid = sent[i % len(sent)]
            reply = await conn.call("prompt.submit", session_id=sid, input_id=iid,
                                    text="hello", finite=True)
            if reply.get("result", {}).get("status") != "terminal":
                raise RuntimeError(f"a retry did not return its terminal receipt: {reply}")

        rlat = await timed(self.n["retry"], retry)
        await conn.close()
        self.out["submit"] = {"p50_us": round(pct(lat, 0.5), 1),
                              "p99_us": round(pct(lat, 0.99), 1), "n": n}
        self.out["retry"] = {"p50_us": round(pct(rlat, 0.5), 1),
                             "p99_us": round(pct(rlat, 0.99), 1), "n": len(rlat)}

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
        progress(f"admissions: {clients} concurrent clients vs. sequential SQLite commits")
        per_client = max(1, -(-each // PER_SESSION))
        sids = await self.sessions(clients * per_client)
        conns = [await Conn.open(self.sock) for _ in range(clients)]
        echoes = [await Conn.open(self.echo_sock) for _ in range(clients)]
        last: dict[str, str] = {}
        spent = {"tether": 0.0, "sqlite": 0.0, "echo": 0.0}
        cpu = own_cpu = 0.0
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
            t0, cpu0, own0 = time.perf_counter(), self.procs.owner_cpu_s(), time.process_time()
            await asyncio.gather(*(client(k, c, r * per_round) for k, c in enumerate(conns)))
            spent["tether"] += time.perf_counter() - t0
            cpu += self.procs.owner_cpu_s() - cpu0
            own_cpu += time.process_time() - own0
            t0 = time.perf_counter()
            await asyncio.gather(*(echo(c) for c in echoes))
            spent["echo"] += time.perf_counter() - t0
        for c in (*conns, *echoes):
            await c.close()
        self.procs.release_held_turns()
        await self.wait_terminal(last)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                (self.home / f"bench-baseline.db{suffix}").unlink()
        n = clients * per_round * rounds
        rate, base = n / spent["tether"], n / spent["sqlite"]
        self.out["admissions_per_s"] = {
            "tether": round(rate), "sqlite_baseline": round(base),
            "ratio": round(rate / base, 2), "echo_floor": round(n / spent["echo"]),
            "clients": clients, "n": n, "owner_cpu_us_each": round(cpu / n * 1e6),
            # the measuring clients' own CPU per admission (the machine's other core)
            "clients_cpu_us_each": round(own_cpu / n * 1e6)}

    async def turns(self) -> None:
        n_sessions, each = self.n["turn_sessions"], self.n["turn_each"]
        progress(f"turns: {n_sessions * each} finite turns across {n_sessions} sessions")
        conns = [await Conn.open(self.sock) for _ in range(n_sessions)]
        sids = [(await self.sessions(1, subscribe=c))[0] for c in conns]
        go = asyncio.Event()
        done_at: list[float] = []

        async def session(conn: Conn, sid: str) -> None:
            conn.events.clear()
            await go.wait()
            await conn.run_turns(sid, each, "turn")
            done_at.append(time.perf_counter())

        tasks = [asyncio.create_task(session(c, s)) for c, s in zip(conns, sids, strict=True)]
        await asyncio.sleep(0.05)
        t0, cpu0 = time.perf_counter(), self.procs.owner_cpu_s()
        go.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
        self.out["turns_per_s"] = round(n_sessions * each / (max(done_at) - t0), 1)
        self.out["turn_owner_cpu_us_each"] = round(
            (self.procs.owner_cpu_s() - cpu0) / (n_sessions * each) * 1e6)
        for c in conns:
            await c.close()

    async def fanout(self) -> None:
        n_viewers, target = self.n["viewers"], self.n["events"]
        progress(f"fan-out: {target} events to {n_viewers} viewers")
        driver = await Conn.open(self.sock)
        [sid] = await self.sessions(1, subscribe=driver)
        viewers = [await RawViewer.open(self.sock) for _ in range(n_viewers)]
        floors = []
        for v in viewers:
            floors.append((await v.call("session.resume", session_id=sid))["last_seq"])
        start = min(floors)
        with no_collector_pauses():
            last = await driver.extend_log(sid, start, target, text=f"{STREAM_PREFIX}20",
                                           tag="fan")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(
                    v.frames_seen < last - f for v, f in zip(viewers, floors, strict=True)):
                await asyncio.sleep(0.05)
        await driver.close()
        for v in viewers:
            v.close()

        created = self._created_at(sid, start)
        self.out["fanout"] = {"viewers": n_viewers, "events": last - start,
                              **fanout_latency(list(zip(viewers, floors, strict=True)),
                                               last, created)}

    def _created_at(self, sid: str, after: int) -> dict[int, float]:
        db = sqlite3.connect(f"file:{self.home / 'state.db'}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT seq, created_at FROM events WHERE session_id = ? "
                              "AND seq > ?", (sid, after)).fetchall()
        finally:
            db.close()
        return {int(s): float(c) for s, c in rows}

    def oneshot(self) -> None:
        progress("one-shot CLI vs. python -c pass")
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
        floors: list[float] = []
        shots: list[float] = []
        for _ in range(self.n["floor"]):
            floors.append(run(floor_cmd)[0])
            if rc == 0 and len(shots) < self.n["oneshot"]:
                ms, rc = run(cli)
                shots.append(ms)
        floor = pct(floors, 0.5)
        result: dict[str, Any] = {"p50": None, "python_floor_ms": round(floor, 1),
                                  "ratio": None}
        if rc == 0 and shots:
            result["p50"] = round(pct(shots, 0.5), 1)
            result["ratio"] = round(result["p50"] / floor, 2)
        else:
            result["error"] = f"`tether chat --oneshot` exited with {rc}"
        self.out["oneshot_ms"] = result

    async def run(self, phases: set[str] | None = None) -> dict[str, Any]:
        """Every phase in order (``phases``: only these, for profiling one)."""
        self.admin = await Conn.open(self.sock)
        await self.procs.start_echo()
        for name, phase in (("ping", self.ping), ("submit", self.submit_and_retry),
                            ("admissions", self.admissions), ("turns", self.turns),
                            ("fanout", self.fanout)):
            if phases is None or name in phases:
                await phase()
        if phases is None or "http_turns" in phases:
            from .httpturns import http_turns

            self.out["http_turns"] = await http_turns(self, self.n["http_sessions"],
                                                      self.n["http_each"])
        if phases is not None and "long_session" in phases:  # on request only: it is long
            from .longsession import long_session

            progress(f"long session: {self.n['long_turns']} turns in one session")
            self.out["long_session"] = await long_session(self, self.n["long_turns"])
        if phases is not None and "oneshot_fanout" in phases:  # on request: hermes is slow
            from .versus import oneshot_fanout

            self.out["oneshot_fanout"] = await oneshot_fanout(self, self.n["fanout_runs"],
                                                              self.hermes)
        await self.admin.close()
        if phases is None or "oneshot" in phases:
            self.oneshot()
        self.out["owner_rss_mib"] = self.procs.owner_rss_mib()
        return self.out
