"""``tether bench --phases http_turns``: turns against a model server over real HTTP.

The turns phase's InstantProvider answers inside the owner, so it leaves out
what every real turn pays: the model client (the request body with the
session's tool schemas, the HTTP request, reading and parsing the event
stream). Here the sessions name the ``custom`` provider at the bench's model
server (modelserver.py, a process of its own on 127.0.0.1 that answers at
once), so the owner's CPU per turn is that of a turn against a real server.
``sessions`` sessions, each on its own connection, submit ``each`` finite
turns in a row and wait for their ``message.complete`` events; the figures
are turns per second (first submit to last completion), the owner's CPU per
turn (its admission included) and the model server's.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .clients import Conn, progress
from .processes import cpu_s

__all__ = ["ModelServer", "http_turns"]


class ModelServer:
    """The model server's process (``python -m tether.bench --serve-model PORTFILE``)."""

    def __init__(self, home: Path) -> None:
        self.port_file = home / "bench-model.port"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    async def start(self) -> str:
        self.port_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "tether.bench", "--serve-model",
                                      str(self.port_file)], stdin=subprocess.DEVNULL)
        for _ in range(1000):
            if self.port_file.exists():
                self.url = f"http://127.0.0.1:{int(self.port_file.read_text())}/v1"
                return self.url
            if self.proc.poll() is not None:
                break
            await asyncio.sleep(0.01)
        raise RuntimeError("the bench's model server did not start")

    def cpu_s(self) -> float:
        assert self.proc is not None
        return cpu_s(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def http_turns(bench: Any, sessions: int, each: int) -> dict[str, Any]:
    """Run the phase against ``bench``'s owner (a `phases.Bench`)."""
    progress(f"turns over HTTP: {sessions * each} finite turns across {sessions} sessions "
             "against a model server")
    server = ModelServer(bench.home)
    url = await server.start()
    try:
        conns = [await Conn.open(bench.sock) for _ in range(sessions)]
        sids = [(await c.result("session.create", source="api", provider="custom",
                                base_url=url, model="bench-model"))["session_id"]
                for c in conns]
        # one turn each first: connections to the server, its /models answer, warm caches
        await asyncio.gather(*(_turns(c, s, "warm", 1) for c, s in zip(conns, sids, strict=True)))
        t0, cpu0, model0 = time.perf_counter(), bench.procs.owner_cpu_s(), server.cpu_s()
        await asyncio.wait_for(asyncio.gather(
            *(_turns(c, s, "http", each) for c, s in zip(conns, sids, strict=True))), 300)
        seconds = time.perf_counter() - t0
        n = sessions * each
        owner, model = bench.procs.owner_cpu_s() - cpu0, server.cpu_s() - model0
        for c in conns:
            await c.close()
    finally:
        server.stop()
    return {"per_s": round(n / seconds, 1), "owner_cpu_us_each": round(owner / n * 1e6),
            "model_server_cpu_us_each": round(model / n * 1e6), "sessions": sessions, "n": n}


async def _turns(conn: Conn, sid: str, tag: str, each: int) -> None:
    conn.events.clear()
    done = await conn.run_turns(sid, each, tag)
    conn.events.clear()
    failed = [e for e in done if e["payload"].get("outcome") != "completed"]
    if failed:
        raise RuntimeError(f"a turn against the model server did not complete: {failed[0]}")
