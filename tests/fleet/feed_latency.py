"""Rough cross-node event latency: how much later a viewer of node B gets an event
node A committed than a viewer of node A does.

Not a test (nothing is asserted): run ``python tests/fleet/feed_latency.py``
with PostgreSQL at TETHER_TEST_PG (default: the local socket, database ``test``).
Two owner processes share a fresh schema; one viewer on each follows a session;
turns run on A, each streaming CHUNKS deltas (one event each). For every event
both viewers receive, the script takes B's arrival time minus A's (same clock:
both viewers are in this process) and prints the distribution, for turns one at
a time and for four sessions' turns at once.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness  # noqa: E402
import pgstore  # noqa: E402
from fakeprovider import FakeProvider, RawSSE  # noqa: E402
from harness import OwnerProcess, Peer  # noqa: E402

CHUNKS = 40
TURNS = 10


class Stamped(list):
    """A peer's event list that notes when each event arrived."""

    def append(self, item: Any) -> None:
        item["_at"] = time.perf_counter()
        super().append(item)


def streamed(chunks: int) -> RawSSE:
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    out = [{**base, "choices": [{"index": 0, "delta": {"content": f"[{i}]".ljust(2100, ".")},
                                 "finish_reason": None}]} for i in range(chunks)]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return RawSSE(b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in out)
                  + b"data: [DONE]\n\n")


async def run_turns(pa: Peer, pb: Peer, sids: list[str], turns: int) -> list[float]:
    """Run ``turns`` turns on A in every session at once; B-minus-A arrival times (ms)."""
    for t in range(turns):
        receipts = [await pa.result("prompt.submit", session_id=sid, input_id=f"t{t}",
                                    text="go") for sid in sids]
        for sid, r in zip(sids, receipts, strict=True):
            await pa.wait_terminal(sid, r["admission_id"], timeout=120)
    for sid in sids:
        last = (await pa.result("session.events.since", session_id=sid, after_seq=0,
                                limit=1))["last_seq"]
        for peer in (pa, pb):
            await harness.until(lambda p=peer, s=sid, n=last: any(
                e["session_id"] == s and e["seq"] == n for e in p.events), "catch-up")
    at_a = {(e["session_id"], e["seq"]): e["_at"] for e in pa.events if e["session_id"] in sids}
    return [(e["_at"] - at_a[(e["session_id"], e["seq"])]) * 1000
            for e in pb.events if e["session_id"] in sids]


def report(name: str, delays: list[float]) -> None:
    delays.sort()
    q = statistics.quantiles(delays, n=100)
    print(f"{name}: {len(delays)} events; B after A: median {statistics.median(delays):.2f} ms,"
          f" p90 {q[89]:.2f} ms, p99 {q[98]:.2f} ms, max {delays[-1]:.2f} ms")


async def main() -> None:
    if why := pgstore.unavailable():
        sys.exit(why)
    with pgstore.fresh_schema() as url, tempfile.TemporaryDirectory() as tmp, \
            FakeProvider(lambda req: streamed(CHUNKS)) as fake:
        nodes = []
        for name in ("a", "b"):
            home = Path(tmp) / name
            harness.write_config(home, fake.url)
            nodes.append(OwnerProcess(home, env=harness.clean_env(home, TETHER_STORE=url)))
        with nodes[0], nodes[1]:
            async with await Peer.connect(nodes[0].home) as pa, \
                    await Peer.connect(nodes[1].home) as pb:
                pa.events, pb.events = Stamped(), Stamped()
                sids = [(await pa.result("session.create"))["session_id"] for _ in range(5)]
                for sid in sids:
                    await pb.result("session.resume", session_id=sid)
                report("one session", await run_turns(pa, pb, sids[:1], TURNS))
                report("four sessions at once", await run_turns(pa, pb, sids[1:], TURNS))


if __name__ == "__main__":
    asyncio.run(main())
