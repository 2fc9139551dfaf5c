"""``tether bench --store URL``: private owners on PostgreSQL, one node and a fleet of three.

The bench makes a fresh schema in the database the URL names (pgside.py) and
starts three private owners ("nodes" a, b, c), each in a temporary home of its
own, each with ``TETHER_STORE`` naming that schema; the schema is dropped at
the end. The phases:

- ``submit`` / ``retry``: as on SQLite (phases.py), one sequential client on
  node a: a receipt on PostgreSQL waits for the server's commit.
- ``idle``: the three nodes with nothing to do (their heartbeats and lease
  ticks): the background the database counters are corrected by.
- ``admissions``: the same 64 clients as on SQLite, turns held at the provider;
  alternating rounds of (one writer's sequential commits on the server; all
  clients and sessions on node a, b and c idle; clients and their sessions
  spread over a, b, c). The held turns are not run afterwards: the nodes are
  restarted on the emptied schema for what follows.
- ``turns``: 64 sessions, each on its own connection, finite turns, from the
  first submit to the last ``message.complete``; one node, then spread.
- ``cross_node``: a session whose turns run on node a, viewers subscribed
  (``session.resume``) on a and on c; per event, from its ``created_at`` (stamped
  on a in the transaction that appends it) to its arrival at the last viewer of
  each node. Without a cross-node event feed, viewers on c receive nothing:
  the phase says so instead of giving a figure.

Each measured stretch records wall time, every node's CPU, the measuring
clients' CPU (this process), the CPU of the server's processes serving the
nodes (and of all its processes), the machine's busy time, and the database's
committed transactions and WAL bytes: enough to say which side limits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .clients import Conn, RawViewer, fanout_latency, no_collector_pauses, progress
from .pgside import PgSide, cpu_spent
from .phases import PER_SESSION, Bench
from .processes import Processes, machine_busy, stop_all
from .servers import HOLD_PREFIX, STREAM_PREFIX

__all__ = ["FLEET_SIZES", "FleetBench", "NODES"]

NODES = ("a", "b", "c")
#: viewers on another node that received nothing this long after the last event:
#: events from other nodes are not delivered
FEED_WAIT = 5.0

FLEET_SIZES: dict[str, dict[str, Any]] = {
    # settle: PostgreSQL reports a backend's counts at most about once a second,
    # so the database's counters are read this long after each stretch of load
    "quick": dict(submit=30, retry=30, idle_s=1.0, settle=1.2, adm_clients=6, adm_each=8, adm_rounds=2,
                  turn_sessions=6, turn_each=3, turn_rounds=1, x_viewers=2, x_events=60),
    "default": dict(submit=500, retry=500, idle_s=2.0, settle=2.0, adm_clients=64, adm_each=45,
                    adm_rounds=3, turn_sessions=64, turn_each=8, turn_rounds=2, x_viewers=10,
                    x_events=1000),
    "long": dict(submit=2000, retry=2000, idle_s=4.0, settle=2.0, adm_clients=64, adm_each=240,
                 adm_rounds=6, turn_sessions=64, turn_each=30, turn_rounds=3, x_viewers=10,
                 x_events=5000),
}

#: the two placements compared: everything on node a, or spread over a, b, c
LAYOUTS = {"one_node": False, "three_nodes": True}


class _Tally:
    """Sums over the measured stretches of one layout."""

    def __init__(self, nodes: int) -> None:
        self.wall = self.clients = self.busy = 0.0
        self.trips = 0.0  # round trips to PostgreSQL, all nodes (store/pg/db.py counts them)
        self.db = {"commits": 0.0, "rows": 0.0, "wal": 0.0}
        self.nodes = [0.0] * nodes
        self.pg: dict[str, float] | None = {"ours": 0.0, "all": 0.0}

    def figures(self, n: int) -> dict[str, Any]:
        """Rates, CPU per item (µs) and average cores in use, for ``n`` items."""
        w = self.wall

        def each(s: float | None) -> int | None:
            return None if s is None else round(s / n * 1e6)

        def cores(s: float | None) -> float | None:
            return None if s is None else round(s / w, 2)

        pg: dict[str, float | None] = {"ours": None, "all": None}
        if self.pg is not None:
            pg.update(self.pg)
        # whatever else ran on the machine meanwhile (unknown without the server's CPU)
        other = (None if self.pg is None
                 else self.busy - sum(self.nodes) - self.pg["all"] - self.clients)
        return {"per_s": round(n / w, 1), "n": n, "seconds": round(w, 2),
                "db_commits_per_s": round(self.db["commits"] / w),
                "db_commits_each": round(self.db["commits"] / n, 2),
                "round_trips_each": round(self.trips / n, 1),
                "db_rows_each": round(self.db["rows"] / n, 1),
                "wal_bytes_each": round(self.db["wal"] / n),
                "cpu_us_each": {"nodes": each(sum(self.nodes)), "postgres": each(pg["ours"]),
                                "postgres_all": each(pg["all"]), "clients": each(self.clients)},
                "cores": {"nodes": [cores(c) for c in self.nodes], "postgres": cores(pg["ours"]),
                          "postgres_all": cores(pg["all"]), "clients": cores(self.clients),
                          "other": cores(other), "machine": cores(self.busy)}}


class FleetBench:
    """The phases, against ``nodes`` (started, on ``pg``'s schema) with ``sizes``."""

    def __init__(self, nodes: list[Processes], pg: PgSide, sizes: dict[str, Any]) -> None:
        self.nodes, self.pg, self.n = nodes, pg, sizes
        self.bench = Bench(nodes[0], sizes)  # node a: the admin connection, submit, receipts
        self.out: dict[str, Any] = {}
        # the database's counters per second with the nodes idle
        self.idle_rate = {"commits": 0.0, "rows": 0.0, "wal": 0.0}
        self.idle_trips = 0.0  # round trips per second of the three idle nodes

    def sock(self, k: int, spread: bool) -> Path:
        return self.nodes[k % len(self.nodes)].sock if spread else self.nodes[0].sock

    def _reading(self) -> tuple[float, list[float], float, float, Any]:
        return (time.perf_counter(), [p.owner_cpu_s() for p in self.nodes],
                time.process_time(), machine_busy()[0], self.pg.cpu())

    async def measure(self, work: Callable[[], Awaitable[None]], tally: _Tally,
                      settle_first: bool) -> None:
        """Run ``work`` between two readings of everything. The database's counters
        are read ``settle`` seconds after the load (before it, too, unless the previous
        stretch just did); their idle rate outside the stretch is taken off."""
        if settle_first:
            await asyncio.sleep(self.n["settle"])
        c0, t0 = self.pg.counters(), time.monotonic()
        r0 = await self._round_trips()
        w0, n0, k0, b0, p0 = self._reading()
        await work()
        w1, n1, k1, b1, p1 = self._reading()
        r1 = await self._round_trips()
        # the nodes' own background (heartbeats, lease ticks) is taken off
        tally.trips += max(0.0, r1 - r0 - self.idle_trips * (w1 - w0))
        await asyncio.sleep(self.n["settle"])
        c1, t1 = self.pg.counters(), time.monotonic()
        tally.wall += w1 - w0
        tally.clients += k1 - k0
        tally.busy += b1 - b0
        tally.nodes = [t + b - a for t, a, b in zip(tally.nodes, n0, n1, strict=True)]
        if p0 is None or p1 is None or tally.pg is None:
            tally.pg = None
        else:
            tally.pg = {kind: tally.pg[kind] + cpu_spent(p0[kind], p1[kind]) for kind in p1}
        outside = (t1 - t0) - (w1 - w0)
        for key, total in tally.db.items():
            spent = c1[key] - c0[key] - self.idle_rate[key] * outside
            tally.db[key] = total + max(0.0, spent)

    async def _round_trips(self) -> int:
        return sum([await p.round_trips() for p in self.nodes])

    # -- phases -------------------------------------------------------------

    async def idle(self) -> None:
        progress(f"{len(self.nodes)} idle nodes: the database's background")
        await asyncio.sleep(self.n["settle"])
        c0, t0 = self.pg.counters(), time.monotonic()
        n0 = [p.owner_cpu_s() for p in self.nodes]
        r0 = await self._round_trips()
        await asyncio.sleep(self.n["idle_s"])
        r1 = await self._round_trips()
        c1, t1 = self.pg.counters(), time.monotonic()
        n1 = [p.owner_cpu_s() for p in self.nodes]
        self.idle_trips = (r1 - r0) / (t1 - t0)
        self.idle_rate = {k: max(0.0, (c1[k] - c0[k]) / (t1 - t0)) for k in c1}
        self.out["idle"] = {"db_commits_per_s": round(self.idle_rate["commits"], 1),
                            "round_trips_per_s": round(self.idle_trips, 1),
                            "db_rows_per_s": round(self.idle_rate["rows"], 1),
                            "node_cores": [round((b - a) / (t1 - t0), 3)
                                           for a, b in zip(n0, n1, strict=True)]}

    async def admissions(self) -> None:
        clients, each, rounds = self.n["adm_clients"], self.n["adm_each"], self.n["adm_rounds"]
        progress(f"admissions: {clients} clients on one node, then on {len(self.nodes)}")
        per_client = max(1, -(-each // PER_SESSION))
        per_round = max(1, each // rounds)
        sids = {lay: await self.bench.sessions(clients * per_client) for lay in LAYOUTS}
        conns = {lay: [await Conn.open(self.sock(k, spread)) for k in range(clients)]
                 for lay, spread in LAYOUTS.items()}
        tallies = {lay: _Tally(len(self.nodes)) for lay in LAYOUTS}
        base_s = base_client = 0.0  # one connection's sequential commits: time, own CPU
        base_server: float | None = 0.0  # and its server process's CPU

        async def client(lay: str, k: int, first: int) -> None:
            mine = sids[lay][k * per_client:(k + 1) * per_client]
            for i in range(first, first + per_round):
                sid, iid = mine[i % len(mine)], f"adm-{lay}-{k}-{i}"
                reply = await conns[lay][k].call("prompt.submit", session_id=sid,
                                                 input_id=iid, text=f"{HOLD_PREFIX}1",
                                                 finite=True)
                if "result" not in reply:
                    raise RuntimeError(f"prompt.submit failed: {reply['error']}")

        for r in range(rounds):
            seconds, server, own = self.pg.sequential_commits(clients * per_round)
            base_s, base_client = base_s + seconds, base_client + own
            base_server = None if base_server is None or server is None else base_server + server
            for j, lay in enumerate(LAYOUTS):
                async def work(lay: str = lay, first: int = r * per_round) -> None:
                    await asyncio.gather(*(client(lay, k, first) for k in range(clients)))
                await self.measure(work, tallies[lay], settle_first=j == 0)
        for cs in conns.values():
            for c in cs:
                await c.close()
        n = clients * per_round * rounds
        self.out["admissions"] = {
            "clients": clients, "n": n,
            # one connection's sequential commits: the rate, and what each costs the
            # server process and the client (psycopg) in CPU
            "pg_sequential_commits_per_s": round(n / base_s),
            "pg_sequential_server_us_each": (None if base_server is None
                                             else round(base_server / n * 1e6)),
            "pg_sequential_client_us_each": round(base_client / n * 1e6),
            **{lay: {**t.figures(n), "rows": self.pg.admissions(f"adm-{lay}-")}
               for lay, t in tallies.items()}}
        # thousands of held turns remain: running them takes a minute on PostgreSQL
        # and measures nothing; the next phase starts on an empty schema instead
        await self.restart()

    async def restart(self) -> None:
        """Stop the nodes (their held turns let go first), empty the schema, start
        them again."""
        progress("restarting the nodes on an empty schema")
        assert self.bench.admin is not None
        await self.bench.admin.close()
        for p in self.nodes:
            p.release_held_turns()
        await asyncio.to_thread(stop_all, self.nodes)
        self.pg.reset()
        for p in self.nodes:
            await asyncio.to_thread(p.start_owner)
        self.bench.admin = await Conn.open(self.nodes[0].sock)

    async def turns(self) -> None:
        n_sessions, each, rounds = (self.n["turn_sessions"], self.n["turn_each"],
                                    self.n["turn_rounds"])
        progress(f"turns: {n_sessions} sessions on one node, then on {len(self.nodes)}")
        conns = {lay: [await Conn.open(self.sock(k, spread)) for k in range(n_sessions)]
                 for lay, spread in LAYOUTS.items()}
        sids = {lay: [(await self.bench.sessions(1, subscribe=c))[0] for c in cs]
                for lay, cs in conns.items()}
        tallies = {lay: _Tally(len(self.nodes)) for lay in LAYOUTS}

        async def session(conn: Conn, sid: str, r: int) -> None:
            conn.events.clear()
            await conn.run_turns(sid, each, f"turn-{r}")

        for r in range(rounds):
            for j, lay in enumerate(LAYOUTS):
                async def work(lay: str = lay, r: int = r) -> None:
                    await asyncio.wait_for(asyncio.gather(*(
                        session(c, s, r) for c, s in zip(conns[lay], sids[lay], strict=True))),
                        300)
                await self.measure(work, tallies[lay], settle_first=j == 0)
        for cs in conns.values():
            for c in cs:
                await c.close()
        n = n_sessions * each * rounds
        self.out["turns"] = {"sessions": n_sessions, **{lay: t.figures(n)
                                                        for lay, t in tallies.items()}}

    async def cross_node(self) -> None:
        n_viewers, target = self.n["x_viewers"], self.n["x_events"]
        here, there = self.nodes[0], self.nodes[-1]
        progress(f"cross-node events: {target} events appended on node {NODES[0]}, "
                 f"{n_viewers} viewers on it and {n_viewers} on node {NODES[-1]}")
        driver = await Conn.open(here.sock)
        [sid] = await self.bench.sessions(1, subscribe=driver)
        groups = {"same_node": [await RawViewer.open(here.sock) for _ in range(n_viewers)],
                  "other_node": [await RawViewer.open(there.sock) for _ in range(n_viewers)]}
        floors = {id(v): (await v.call("session.resume", session_id=sid))["last_seq"]
                  for vs in groups.values() for v in vs}
        start = min(floors.values())
        with no_collector_pauses():
            last = await driver.extend_log(sid, start, target, text=f"{STREAM_PREFIX}20",
                                           tag="x")
            done = time.monotonic()

            def missing(vs: list[RawViewer]) -> bool:
                return any(v.frames_seen < last - floors[id(v)] for v in vs)

            while time.monotonic() < done + 30 and (missing(groups["same_node"])
                                                    or missing(groups["other_node"])):
                if (time.monotonic() > done + FEED_WAIT
                        and not any(v.frames_seen for v in groups["other_node"])):
                    break  # nothing from the other node at all: no feed
                await asyncio.sleep(0.05)
        await driver.close()
        for vs in groups.values():
            for v in vs:
                v.close()
        created = self.pg.created_at(sid, start)
        result: dict[str, Any] = {"events": last - start, "viewers_per_node": n_viewers,
                                  "appended_on": NODES[0], "viewed_on": NODES[-1]}
        for name, vs in groups.items():
            result[name] = fanout_latency([(v, floors[id(v)]) for v in vs], last, created)
        other = result["other_node"]
        other["available"] = other["received"] > 0
        if not other["available"]:
            other["reason"] = (f"the viewers on node {NODES[-1]} received none of the "
                               f"{last - start} events appended on node {NODES[0]} within "
                               f"{FEED_WAIT:g} s: events from other nodes are not delivered")
        self.out["cross_node"] = result

    async def run(self, phases: set[str] | None = None) -> dict[str, Any]:
        """Every phase in order (``phases``: only these)."""
        self.bench.admin = await Conn.open(self.nodes[0].sock)
        if phases is None or "submit" in phases:
            await self.bench.submit_and_retry()
            self.out.update(self.bench.out)
        if phases is None or phases & {"admissions", "turns"}:
            await self.idle()
        for name, phase in (("admissions", self.admissions), ("turns", self.turns),
                            ("cross", self.cross_node)):
            if phases is None or name in phases:
                await phase()
        await self.bench.admin.close()
        self.out["owner_rss_mib"] = [p.owner_rss_mib() for p in self.nodes]
        return self.out


