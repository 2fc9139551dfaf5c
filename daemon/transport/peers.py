"""Who is at the other end of a connection, and the methods an agent's process may not call.

An agent must not answer its own approval prompts, drop the rules a person set,
mint tokens, schedule itself, start programs of its choosing as MCP servers,
open the owner to the network or stop it: ``approval.respond``,
``approval.rule_remove``, ``token.*``, ``cron.*``, ``mcp.attach``, ``fs.*`` and
``terminal.*`` (an editor's executor),
``runtime.listen_tcp`` and ``runtime.shutdown`` are refused
(``forbidden``) to a connection whose peer process is one of the owner's tool
processes or came from one (toolsets/lineage.py), in every approvals mode.

The peer is found when the connection opens: over the Unix socket by
``SO_PEERCRED`` (its pid, with the kernel's start time of that pid); over TCP by
the connection's two addresses, whose local end ``lineage.socket_pids`` finds in
``/proc/net/tcp`` when it is on this machine. The check runs only when one of
these methods is called. A Unix peer whose pid has exited (or been reused) by
then is refused: whoever holds the connection now cannot be told apart.
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any

from tether.rpc.errors import Forbidden, RpcError

from ..toolsets import lineage

__all__ = ["Peer", "PROTECTED", "unix_peer", "tcp_peer", "guard", "agent_reason"]

#: methods refused to the agent's own processes: exact names, and name prefixes
PROTECTED = frozenset({"approval.respond", "approval.rule_remove", "mcp.attach",
                       "fs.offer", "fs.respond", "terminal.offer", "terminal.respond",
                       "runtime.listen_tcp", "runtime.shutdown"})
PROTECTED_PREFIXES = ("token.", "cron.")


@dataclass(frozen=True)
class Peer:
    """The process at the other end, as far as it can be known."""

    pid: int | None = None  # Unix socket: SO_PEERCRED
    started: str | None = None  # the kernel's start time of that pid, at connect
    local: tuple[str, int] | None = None  # TCP: our address ...
    remote: tuple[str, int] | None = None  # ... and theirs


def unix_peer(sock: socket.socket | None) -> tuple[Peer, int | None]:
    """The peer of a Unix-socket connection, and its uid (None where unknown)."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return Peer(), None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return Peer(pid=pid or None, started=lineage.start_time(pid) if pid else None), uid


def tcp_peer(local: Any, remote: Any) -> Peer:
    if not (isinstance(local, tuple) and isinstance(remote, tuple)):
        return Peer()
    return Peer(local=(str(local[0]), int(local[1])), remote=(str(remote[0]), int(remote[1])))


def _why(peer: Peer) -> str | None:
    """Why ``peer`` counts as one of the agent's processes (None: it does not)."""
    if sys.platform != "linux":
        return None  # no /proc: the sandbox (where there is one) is the only line
    if peer.pid is not None:
        if peer.started is None or lineage.start_time(peer.pid) != peer.started:
            return ("the process that opened this connection has exited, so whoever "
                    "holds it now cannot be told apart from the agent's processes")
        return lineage.tool_lineage(peer.pid)
    if peer.local is not None and peer.remote is not None:
        for pid in lineage.socket_pids(peer.local, peer.remote):
            why = lineage.tool_lineage(pid)
            if why:
                return why
    return None


def agent_reason(call: Any) -> str | None:
    """Why the caller of ``call`` is one of the agent's processes (None: it is not, or
    cannot be told: an in-process caller, a system without /proc). For handlers that
    refuse the agent one option of a method (a looser sandbox, say), not the method."""
    peer = getattr(call, "peer", None)
    return _why(peer) if isinstance(peer, Peer) else None


def guard(method: str, call: Any) -> RpcError | None:
    """The dispatcher's guard: ``forbidden`` for a protected method from an agent's process."""
    if method not in PROTECTED and not method.startswith(PROTECTED_PREFIXES):
        return None
    why = agent_reason(call)
    if why is None:
        return None
    return Forbidden(f"{method} is refused to the agent's own processes: the caller's "
                     f"process is not the person's ({why}); run it from your own terminal",
                     method=method)
