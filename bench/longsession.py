"""``tether bench --phases long_session``: one session's cost per turn as it ages.

One session gets ``turns`` finite turns in a row, each a prompt of about 2,000
characters, against the bench's owner (default config: a 32,768-token window,
compaction ``auto`` at 0.8), so the transcript outgrows the budget within a few
dozen turns and is compacted again and again. The owner's CPU is read around
each turn (in ticks of 10 ms, so figures are means over 100 turns): the mean
over turns 25–124 (around "turn 50", once the first compaction has made the
request as big as it will get) and over the last 100 turns, their ratio, the mean of the turns during which a compaction ran
(what compaction costs the owner, the model's time aside: InstantProvider
answers at once), and the owner's RSS at turn 50 and at the end.
"""

from __future__ import annotations

from statistics import mean
from typing import Any

import orjson

from .clients import Conn

__all__ = ["long_session", "PROMPT"]

PROMPT = "bench-long " + "the quick brown fox jumps over the lazy dog, " * 44


async def _one_turn(conn: Conn, sid: str, i: int) -> bool:
    """Run turn ``i``; whether a compaction happened during it."""
    conn.events.clear()
    reply = await conn.call("prompt.submit", session_id=sid, input_id=f"long-{i}",
                            text=f"{PROMPT}{i}", finite=True)
    if "result" not in reply:
        raise RuntimeError(f"prompt.submit failed: {reply['error']}")
    seen = list(conn.events)
    while not any(e["type"] == "message.complete" for e in seen):
        msg = orjson.loads(await conn.ws.recv())
        if msg.get("method") == "event":
            seen.append(msg["params"])
    return any(e["type"] == "session.compacted" for e in seen)


async def long_session(bench: Any, turns: int) -> dict[str, Any]:
    conn = await Conn.open(bench.sock)
    [sid] = await bench.sessions(1, subscribe=conn)
    cpu: list[float] = []
    compacting: list[int] = []
    rss_50 = 0.0
    for i in range(turns):
        before = bench.procs.owner_cpu_s()
        if await _one_turn(conn, sid, i):
            compacting.append(i)
        cpu.append(bench.procs.owner_cpu_s() - before)
        if i == 50:
            rss_50 = bench.procs.owner_rss_mib()
    await conn.close()
    early = cpu[min(25, turns // 4):min(125, turns // 2)]
    at_50 = mean(early) * 1000
    last = mean(cpu[-min(100, turns // 2):]) * 1000
    return {"turns": turns, "compactions": len(compacting),
            "cpu_ms_turn_50": round(at_50, 2), "cpu_ms_last_100": round(last, 2),
            "ratio": round(last / at_50, 2) if at_50 else None,
            "cpu_ms_compacting_turn": round(mean(cpu[i] for i in compacting) * 1000, 2)
            if compacting else None,
            "rss_mib_turn_50": rss_50, "rss_mib_end": bench.procs.owner_rss_mib()}
