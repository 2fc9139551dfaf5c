"""``tether bench --phases oneshot_fanout [--hermes PATH]``: a one-shot that fans out.

``tether chat --oneshot`` on the warm owner sends a prompt that makes the
model delegate `FANOUT_TASKS` tasks; the model is the bench's server
(modelserver.py, its own process on 127.0.0.1, answering at once), so what is
timed is the client's start, the owner's turn, its helpers joined before the
answer, and the exit. With ``--hermes PATH``, ``PATH -z`` (hermes-agent's
one-shot) gets the same prompt against the same server, from a private
HERMES_HOME whose config names it as a custom endpoint; runs of the two
alternate. Every run must print the fanned-out answer, and the server's counts
must show that each run delegated once and answered once after its helpers:
a run that skipped the fan-out is not a figure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from .clients import pct, progress
from .modelserver import FANNED_OUT, FANOUT, FANOUT_TASKS

__all__ = ["oneshot_fanout"]

PROMPT = f"{FANOUT} split this into {FANOUT_TASKS} parts and answer each"


def _counts(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/bench/counts", timeout=10) as reply:
        return dict(orjson.loads(reply.read()))


def _hermes_home(root: Path, url: str) -> Path:
    """A HERMES_HOME naming the bench's server; hermes refuses a window under 64K."""
    home = root / "hermes-home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(
        "model:\n  default: bench-model\n  provider: custom\n"
        f"  base_url: {url}\n  api_key: bench\n  context_length: 131072\n")
    return home


def _run(name: str, cmd: list[str], env: dict[str, str], cwd: Path, url: str) -> float:
    """One timed run (ms), checked: the answer printed, one delegation, one join."""
    before = _counts(url)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=300)
    ms = (time.perf_counter() - t0) * 1000
    after = _counts(url)
    delta = {k: after[k] - before.get(k, 0) for k in after}
    if proc.returncode != 0 or FANNED_OUT not in proc.stdout.decode(errors="replace"):
        tail = (proc.stderr or proc.stdout).decode(errors="replace").strip()[-300:]
        raise RuntimeError(f"{name} exited {proc.returncode} without the answer: {tail}")
    if delta["delegations"] != 1 or delta["fanned_out"] != 1 \
            or delta["answers"] < FANOUT_TASKS:
        raise RuntimeError(f"{name} did not fan out as asked (the server saw {delta})")
    return ms


async def oneshot_fanout(bench: Any, runs: int, hermes: str | None) -> dict[str, Any]:
    """Run the phase with ``bench``'s owner (a `phases.Bench`) and its model server.
    The runs block the loop: nothing else is measured meanwhile."""
    from .httpturns import ModelServer

    server = ModelServer(bench.home)
    url = await server.start()
    work = bench.home / "fanout-cwd"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "TETHER_HOME": str(bench.home)}
    tether = [sys.executable, "-m", "tether.clients.cli", "chat", "--oneshot", "-q", PROMPT,
              "--provider", "custom", "--base-url", url, "--model", "bench-model",
              "--home", str(bench.home)]
    hermes_env = ({**env, "HERMES_HOME": str(_hermes_home(bench.home, url))}
                  if hermes else {})
    progress(f"one-shot fan-out ({FANOUT_TASKS} helpers): tether"
             + (f" vs. {hermes} -z, alternating" if hermes else ""))
    ours: list[float] = []
    theirs: list[float] = []
    try:
        _run("tether chat --oneshot", tether, env, work, url)  # warm: caches, connections
        if hermes:
            _run(f"{hermes} -z", [hermes, "-z", PROMPT], hermes_env, work, url)
        for _ in range(runs):
            ours.append(_run("tether chat --oneshot", tether, env, work, url))
            if hermes:
                theirs.append(_run(f"{hermes} -z", [hermes, "-z", PROMPT], hermes_env,
                                   work, url))
    finally:
        server.stop()
    out: dict[str, Any] = {"helpers": FANOUT_TASKS, "runs": runs,
                           "tether_ms": {"p50": round(pct(ours, 0.5), 1),
                                         "min": round(min(ours), 1),
                                         "max": round(max(ours), 1)}}
    if theirs:
        out["hermes_ms"] = {"p50": round(pct(theirs, 0.5), 1), "min": round(min(theirs), 1),
                            "max": round(max(theirs), 1)}
        # from the figures as printed, so the ratio is the one a reader computes
        out["hermes_over_tether"] = round(out["hermes_ms"]["p50"] / out["tether_ms"]["p50"], 1)
    return out
