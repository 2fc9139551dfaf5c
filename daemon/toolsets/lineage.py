"""Which processes are the agent's: the owner's tool processes and what descends from them.

The terminal tool's foreground commands and the process tool's background ones
are ``register``-ed when spawned (processes.spawn) and ``unregister``-ed when
reaped; every one of them also gets ``MARKER=1`` in its environment and runs in
a session (setsid) of its own. ``tool_lineage(pid)`` says whether a process is
one of them or came from one, by three signals, each checked on the process
and on every ancestor up to init (``/proc/<pid>/stat``):

- **ancestry**: an ancestor is a live registered tool process (same pid and
  kernel start time, so a recycled pid is not mistaken for one);
- **session**: it is in the session of a tool process (``setsid``'s session id
  outlives the shell that made it: a command's ``cmd &`` left behind, reparented
  to init, still has it), unless that pid now belongs to a different process;
- **marker**: ``/proc/<pid>/environ`` (the environment it was started with)
  holds ``MARKER=1``.

A hostile command can still escape all three without the sandbox: double-fork,
``setsid`` and a cleaned environment together (docs/tools.md, "Security model").
Inside the sandbox the owner's socket is not even mounted, and the pid
namespace keeps every process a descendant of the registered one.

``socket_pids`` finds the processes holding the local end of a TCP connection
(``/proc/net/tcp{,6}``, then each process's descriptors), so a connection to
the TCP listener is checked as a Unix-socket peer is. Linux only: elsewhere
nothing here knows anything (and says so by returning None / empty).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections import OrderedDict

__all__ = ["MARKER", "register", "unregister", "descends_from_tool", "tool_lineage",
           "start_time", "socket_pids"]

#: set to "1" in the environment of every tool process (the sandbox's allowlist keeps it)
MARKER = "TETHER_TOOL_PROCESS"
#: sessions of tool processes remembered after their leader is reaped (the oldest go first)
MAX_SESSIONS = 4096
_MAX_DEPTH = 512  # ancestors walked at most (a chain is never this long)

_live: dict[int, str | None] = {}  # pid -> start time, while the process runs
_sessions: OrderedDict[int, str | None] = OrderedDict()  # session id -> leader's start time


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 onwards)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].decode("ascii", "replace").split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (None: no such process, or no /proc)."""
    fields = _stat(pid)
    return fields[19] if fields and len(fields) > 19 else None


def register(pid: int) -> None:
    """``pid`` is a tool process (the group and session leader of a command)."""
    started = start_time(pid)
    _live[pid] = started
    _sessions[pid] = started
    _sessions.move_to_end(pid)
    while len(_sessions) > MAX_SESSIONS:
        _sessions.popitem(last=False)


def unregister(pid: int) -> None:
    """``pid`` was reaped; its session is remembered (what it left behind lives on)."""
    _live.pop(pid, None)


def _marked(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read(1 << 20)
    except OSError:
        return False
    return f"{MARKER}=1".encode() in env.split(b"\0")


def _ours(session: int) -> bool:
    if session not in _sessions:
        return False
    now = start_time(session)
    # the leader is gone (its orphans keep the session), or still the same process
    return now is None or now == _sessions[session]


def tool_lineage(pid: int) -> str | None:
    """Why ``pid`` is one of the agent's processes (None: it is not, as far as can be told)."""
    seen: set[int] = set()
    current = pid
    while current > 1 and current not in seen and len(seen) < _MAX_DEPTH:
        seen.add(current)
        fields = _stat(current)
        if fields is None:
            break
        started = fields[19] if len(fields) > 19 else None
        if current in _live and _live[current] == started:
            return f"it descends from a command the agent ran (pid {current})"
        with contextlib.suppress(ValueError, IndexError):
            if _ours(int(fields[3])):
                return f"it is in the session of a command the agent ran (session {fields[3]})"
        if _marked(current):
            return f"it was started by a command the agent ran ({MARKER} in pid {current})"
        try:
            current = int(fields[1])
        except (ValueError, IndexError):
            break
    return None


def descends_from_tool(pid: int) -> bool:
    return tool_lineage(pid) is not None


def _parse(hexaddr: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    host, port = hexaddr.split(":")
    raw = bytes.fromhex(host)
    # the kernel prints each 32-bit word of the address in host (little-endian) order
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(raw), int(port, 16)


def _plain(addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def socket_pids(local: tuple[str, int], remote: tuple[str, int]) -> list[int]:
    """The pids holding the far end of the TCP connection ``local`` <- ``remote`` when
    that end is on this machine (its socket bound at ``remote``, connected to ``local``)."""
    want_here, want_there = (_plain(remote[0]), remote[1]), (_plain(local[0]), local[1])
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) < 10:
                        continue
                    try:
                        here, there = _parse(cols[1]), _parse(cols[2])
                    except ValueError:
                        continue
                    here = (_plain(str(here[0])), here[1])
                    there = (_plain(str(there[0])), there[1])
                    if here == want_here and there == want_there:
                        inodes.add(cols[9])
    if not inodes:
        return []
    targets = {f"socket:[{i}]" for i in inodes}
    pids: list[int] = []
    with contextlib.suppress(OSError), os.scandir("/proc") as procs:
        for entry in procs:
            if entry.name.isdigit() and _holds(entry.name, targets):
                pids.append(int(entry.name))
    return pids


def _holds(pid: str, targets: set[str]) -> bool:
    with contextlib.suppress(OSError), os.scandir(f"/proc/{pid}/fd") as fds:
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(fd.path) in targets:
                    return True
    return False
