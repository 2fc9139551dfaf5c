"""Finding the owner of a home, and starting one when there is none (SPEC §1).

Given a home (found by ``tether.rpc.home.resolve_home``, as the owner finds it;
its paths are ``tether.rpc.home.HomeLayout``'s), a client reads ``daemon.json``
and checks that the owner it names is alive: its pid exists and its socket
accepts a connection. When there is no live owner it starts one,
detached (own session, stdin from /dev/null, stdout appended to
``<home>/logs/daemon.log``), waits for the descriptor, and returns it. The
client never owns the daemon's lifetime: nothing here waits for, signals or
reaps the process it started beyond noticing that it exited early.

While the owner starts, its stderr is a pipe this client reads: an owner that
cannot start says why there, and the client shows it. A pipe needs no disk, so
the reason arrives even when the failure is a full disk and daemon.log stays
empty. Once it serves, the owner points its stderr at daemon.log as well
(``--detached``) and the client copies what it read into the log.

Races are expected and harmless: two clients may start an owner at once; the
loser's owner finds the lock taken and exits with ``EXIT_OWNER_RUNNING`` (3),
and its client simply keeps waiting for the winner's descriptor.

Nothing here imports pydantic, websockets or the daemon: this is on the CLI's
hot path.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tether.rpc.home import EXIT_OWNER_RUNNING, HomeLayout

__all__ = [
    "OwnerUnavailable",
    "describe_owner",
    "ensure_owner",
    "live_descriptor",
    "lock_holder",
    "pid_alive",
    "read_descriptor",
    "start_owner",
    "stopped_on_purpose",
]

#: how long a client waits for a freshly started owner to write its descriptor
START_TIMEOUT = 15.0
#: owners this process started and that still ran when last looked at. Holding
#: the Popen objects lets us reap them (no zombie once an owner exits while a
#: long-lived client, e.g. an editor plugin, still runs) and keeps Popen.__del__
#: from warning that a deliberately detached process is still running.
_STARTED: list[subprocess.Popen[bytes]] = []
#: how often the descriptor is polled while waiting
POLL_SECONDS = 0.02
#: how much of a starting owner's stderr a client keeps: the end, where the reason is
STDERR_KEPT = 64 * 1024
#: how long a client waits, once the owner serves, for it to move its stderr to the log
HANDOVER_SECONDS = 2.0


class OwnerUnavailable(Exception):
    """No owner could be reached or started for a home (the CLI's exit code 3).

    ``reason`` is a stable snake_case word (``not_running``, ``start_failed``,
    ``start_timeout``, ``unreachable``, ``permission_denied``); ``hint`` is one line for a human.
    """

    def __init__(self, reason: str, detail: str, hint: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.hint = hint


def read_descriptor(home: Path, strict: bool = False) -> dict[str, Any] | None:
    """``daemon.json`` as a dict, or None if it is missing or half-written;
    ``strict``: one this user may not read is ``permission_denied``, not None."""
    path = HomeLayout(home).descriptor
    try:
        data = json.loads(path.read_bytes())
    except PermissionError:
        if strict:
            raise permission_denied(home, str(path), "its descriptor") from None
        return None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, but belongs to someone else
    # A zombie (exited, not yet reaped: e.g. an owner we started ourselves, or one
    # orphaned in a container whose pid 1 does not reap) is not alive.
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): trust kill(0)


def _socket_error(path: str, timeout: float = 1.0) -> OSError | None:
    """Why the socket at ``path`` accepts no connection (None: it accepts one)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except OSError as exc:
        return exc
    finally:
        s.close()
    return None


def permission_denied(home: Path, path: str, what: str) -> OwnerUnavailable:
    """The error of an owner this user may not reach (not "not running": it may be)."""
    return OwnerUnavailable(
        "permission_denied", f"cannot reach the owner of {home}: permission denied on "
        f"{what} {path}", f"the owner runs as another user, or the home's permissions "
        f"changed (`ls -l {path}`): run tether as the owner's user, or give this user "
        "its own home (--home)")


def live_descriptor(home: Path) -> dict[str, Any] | None:
    """The descriptor of a live owner of ``home``, or None.

    Live means the pid exists and the socket accepts a connection: a descriptor
    left by a crashed owner (or naming a pid since reused) does not count.
    """
    desc = read_descriptor(home, strict=True)
    if desc is None or not pid_alive(desc.get("pid")):
        return None
    sock = desc.get("socket") or str(HomeLayout(home).socket)
    if not isinstance(sock, str):
        return None
    error = _socket_error(sock)
    if isinstance(error, PermissionError):
        raise permission_denied(home, sock, "its socket")
    return desc if error is None else None


def lock_holder(home: Path) -> int | None:
    """The pid an owner wrote into daemon.lock, if that process still exists.

    A hint only: reading the file does not take the lock (taking it, even
    briefly, would make a starting owner believe another one runs).
    """
    try:
        pid = int(HomeLayout(home).lock.read_text().strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if pid != os.getpid() and pid_alive(pid) else None


def start_owner(home: Path, *, tcp: str | None = None) -> subprocess.Popen[bytes]:
    """Start ``python -m tether.daemon --home HOME --detached``; return at once.

    Its stdout goes to logs/daemon.log; its stderr is ``proc.stderr``, a
    non-blocking pipe the caller reads (and closes) while the owner starts.
    """
    layout = HomeLayout(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    layout.logs.mkdir(mode=0o700, exist_ok=True)
    args = [sys.executable, "-m", "tether.daemon", "--home", str(home), "--detached"]
    if tcp:
        args += ["--tcp", tcp]
    fd = os.open(layout.owner_stdio_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        # start_new_session: the owner must survive the terminal (SIGHUP, Ctrl-C to the
        # CLI's process group) and the CLI's exit. cwd = home so the owner never pins
        # the directory the user happened to be in.
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=fd,
                                stderr=subprocess.PIPE, cwd=str(home),
                                start_new_session=True, close_fds=True)
    finally:
        os.close(fd)
    if proc.stderr is not None:
        os.set_blocking(proc.stderr.fileno(), False)
    return proc


def _home_hint(home: Path) -> str:
    """What to do about a home the owner could not be started in."""
    for path in (home, *home.parents):
        if path.exists():
            if not path.is_dir():
                return (f"{path} is a file, not a directory: give --home (or TETHER_HOME) "
                        "a directory path")
            break
    return "check that the home directory is writable"


class _StartReport:
    """What an owner this client started writes to its stderr pipe while it starts."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.kept = bytearray()

    def read(self) -> bool:
        """Take what is in the pipe now; True once it is at its end (the owner
        exited, or moved its stderr to the log)."""
        pipe = self.proc.stderr
        if pipe is None or pipe.closed:
            return True
        try:
            while chunk := os.read(pipe.fileno(), 65536):
                self.kept += chunk
                del self.kept[:-STDERR_KEPT]
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True

    async def handover(self) -> None:
        """Read until the owner, now serving, points its stderr at the log."""
        import asyncio

        deadline = time.monotonic() + HANDOVER_SECONDS
        while not self.read() and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)

    def reason(self) -> str:
        """The owner's own one-line ``tether: …`` verdict, else its last lines."""
        tail = self.kept.decode(errors="replace").strip().splitlines()[-200:]
        for line in reversed(tail):
            if line.startswith("tether: "):
                return line[len("tether: "):]
        return " | ".join(tail[-5:])

    def close(self, home: Path) -> None:
        """Stop reading, and keep what was read in daemon.log, where the owner's
        stderr would have gone (best effort: on a full disk it cannot)."""
        self.read()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        if self.kept:
            with contextlib.suppress(OSError), open(HomeLayout(home).owner_stdio_log, "ab") as log:
                log.write(bytes(self.kept))
            self.kept.clear()


def stopped_on_purpose(home: Path, instance_id: str | None) -> bool:
    """Whether the owner ``instance_id`` left ``stopped.json``: it was stopped on purpose,
    and a client that lost it must not start another (HomeLayout.stopped)."""
    try:
        marker = json.loads(HomeLayout(home).stopped.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and instance_id is not None \
        and marker.get("instance_id") == instance_id


async def ensure_owner(home: Path, *, autostart: bool = True, tcp: str | None = None,
                       timeout: float = START_TIMEOUT) -> dict[str, Any]:
    """The live owner's descriptor, starting an owner first if needed.

    Raises ``OwnerUnavailable`` when there is none and ``autostart`` is false,
    when the started owner fails (its own reason is in ``detail``), or
    when no descriptor appears within ``timeout`` seconds.
    """
    _STARTED[:] = [p for p in _STARTED if p.poll() is None]
    desc = live_descriptor(home)
    if desc is not None:
        return desc
    if not autostart:
        raise OwnerUnavailable("not_running", f"no owner is running for {home}",
                               "start one with `tether serve`")
    reports: list[_StartReport] = []
    try:
        return await _start_and_wait(home, tcp, timeout, reports)
    finally:
        for report in reports:
            report.close(home)


async def _start_and_wait(home: Path, tcp: str | None, timeout: float,
                          reports: list[_StartReport]) -> dict[str, Any]:
    """Start an owner (again, after a lost start race) until a live one answers.

    Each owner started gets a report in ``reports``, for the caller to close.
    """
    import asyncio

    deadline = time.monotonic() + timeout
    proc: subprocess.Popen[bytes] | None = None
    # An owner that holds the lock but has no descriptor yet is starting (another
    # client's) or stopping (a restart): give it a moment before competing.
    next_spawn = time.monotonic() + (0.5 if lock_holder(home) else 0.0)
    backoff = 0.2
    while True:
        desc = live_descriptor(home)
        if desc is not None:
            if proc is not None:
                if proc.poll() is None and desc.get("pid") != proc.pid:
                    # Another client's owner won while ours is still starting. Ours
                    # would exit at the lock anyway, unless the winner stops first:
                    # then it would become an owner nobody is waiting for. End it.
                    proc.terminate()
                elif desc.get("pid") == proc.pid:
                    await reports[-1].handover()
                _STARTED.append(proc)
            return desc
        if proc is not None:
            reports[-1].read()  # a starting owner never blocks on a full pipe
        if proc is not None and proc.poll() is not None:
            reports[-1].read()  # what it wrote before it exited is all in the pipe now
            code = proc.returncode
            if code != EXIT_OWNER_RUNNING:
                raise OwnerUnavailable("start_failed", "the owner could not start: "
                                       + (reports[-1].reason() or f"exit status {code}"),
                                       f"see {HomeLayout(home).logs} for details")
            # Lost a start race, or an old owner is still on its way out: wait for the
            # winner's descriptor, and try again later if none appears. (The pid in
            # daemon.lock is only a hint; it may be a reused pid, so it never stops us.)
            proc = None
            next_spawn = time.monotonic() + backoff
            backoff = min(backoff * 2, 2.0)
        if proc is None and time.monotonic() >= next_spawn:
            try:
                proc = start_owner(home, tcp=tcp)
            except OSError as exc:
                raise OwnerUnavailable("start_failed", f"cannot start the owner: {exc}",
                                       _home_hint(home)) from None
            reports.append(_StartReport(proc))
        if time.monotonic() > deadline:
            holder = lock_holder(home)
            who = f" (pid {holder} holds the lock but does not answer)" if holder else ""
            raise OwnerUnavailable("start_timeout",
                                   f"no owner came up for {home} within {timeout:g} s{who}",
                                   f"see {HomeLayout(home).logs}; `tether status` shows what runs")
        await asyncio.sleep(POLL_SECONDS)


def describe_owner(desc: dict[str, Any]) -> str:
    """One line naming an owner for humans."""
    where = desc.get("socket", "?")
    if desc.get("tcp_url"):
        where += f" and {desc['tcp_url']}"
    return f"pid {desc.get('pid')}, epoch {desc.get('epoch')}, serving {where}"
