"""The processes ``tether bench`` measures, seen from the bench: start, stop, probe.

`Processes` starts the private owner and the echo baseline (servers.py) as
subprocesses of the bench (``python -m tether.bench --serve-owner HOME``
/ ``--serve-echo SOCK``), reads the owner's CPU time and memory from /proc, and
signals it to release the turns the bench holds at its provider. With a store
URL the owner keeps its state there (``TETHER_STORE``); without one it keeps
state.db in its home, whatever the bench's own environment says.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

__all__ = ["Processes", "cpu_s", "machine_busy", "stop_all"]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, all cores (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]  # idle, iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - idle) / tick, sum(fields) / tick


def stop_all(procs: list[Processes]) -> None:
    """Stop several owners at once: all are asked first, then each is waited for."""
    for p in procs:
        if p.owner is not None and p.owner.poll() is None:
            p.owner.send_signal(signal.SIGTERM)
    for p in procs:
        p.stop_owner()


class Processes:
    """The bench's owner and echo server on ``home``.
    ``store``: the owner's PostgreSQL URL (None: state.db in the home)."""

    def __init__(self, home: Path, store: str | None = None) -> None:
        self.home = home
        self.store = store
        self.sock = home / "daemon.sock"
        self.echo_sock = home / "bench-echo.sock"
        self.owner: subprocess.Popen[bytes] | None = None
        self.echo: subprocess.Popen[bytes] | None = None

    # -- the owner --------------------------------------------------------

    def start_owner(self) -> None:
        """Start the owner and wait for its descriptor (RuntimeError if it does not come)."""
        desc = self.home / "daemon.json"
        env = {k: v for k, v in os.environ.items() if k != "TETHER_STORE"}
        if self.store is not None:
            env["TETHER_STORE"] = self.store
        self.owner = subprocess.Popen(
            [sys.executable, "-m", "tether.bench", "--serve-owner", str(self.home)],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
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

    def release_held_turns(self) -> None:
        """Let turns waiting at the provider (``bench-hold``) go on (SIGUSR1)."""
        assert self.owner is not None
        self.owner.send_signal(signal.SIGUSR1)

    async def round_trips(self) -> int:
        """Round trips the owner has made to PostgreSQL so far (it writes the count
        when sent SIGUSR2: tether.store.pg.round_trips)."""
        from .servers import ROUND_TRIPS_FILE

        assert self.owner is not None
        path = self.home / ROUND_TRIPS_FILE
        path.unlink(missing_ok=True)
        self.owner.send_signal(signal.SIGUSR2)
        for _ in range(500):
            try:
                if text := path.read_text():
                    return int(text)
            except FileNotFoundError:
                pass
            await asyncio.sleep(0.01)
        raise RuntimeError("the bench owner did not report its round trips")

    def owner_cpu_s(self) -> float:
        """CPU seconds (user + system) the owner has used so far."""
        assert self.owner is not None
        return cpu_s(self.owner.pid)

    def owner_rss_mib(self) -> float:
        assert self.owner is not None
        for line in Path(f"/proc/{self.owner.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
        return float("nan")

    # -- the echo baseline ------------------------------------------------

    async def start_echo(self) -> None:
        """The baseline server: bare websockets echo, same options, own process."""
        self.echo = subprocess.Popen([sys.executable, "-m", "tether.bench",
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
