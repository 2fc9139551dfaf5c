"""Helpers for the client suites: the CLI command line, reading a CLI's output up to a
mark, and finding/stopping owners.

Owners a CLI started by itself (autostart) are not children of the test, so
``stop_owner_of`` ends them by the pid in their home's daemon.json / daemon.lock,
after checking that the pid really is a tether owner.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

CLI = [sys.executable, "-m", "tether.clients.cli"]


def read_until(proc: subprocess.Popen, token: bytes, timeout: float = 20.0) -> bytes:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    out = b""
    deadline = time.monotonic() + timeout
    while token not in out:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{token!r} not printed; got {out!r}"
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.2))
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"ended before {token!r}; got {out!r}"
            out += chunk
    return out


def owner_pid(home: Path) -> int | None:
    try:
        return json.loads((home / "daemon.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def _is_owner(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"tether.daemon" in cmdline


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def stop_owner_of(home: Path, timeout: float = 15.0) -> None:
    pids = {owner_pid(home)}
    with contextlib.suppress(OSError, ValueError):
        pids.add(int((home / "daemon.lock").read_text().strip() or 0))
    for pid in pids - {None, 0}:
        if not pid_alive(pid) or not _is_owner(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
