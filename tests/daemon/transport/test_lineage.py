"""Telling the agent's processes apart (daemon/toolsets/lineage.py, daemon/transport/peers.py), on
real processes: by ancestry, by session, by the environment marker; and the
owner's end of a TCP connection mapped back to the process holding it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether.daemon.toolsets import lineage
from tether.daemon.transport import peers
from tether.rpc.errors import Forbidden

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def wait_for_pid(path: Path) -> int:
    """The pid written to ``path``, once that process has become ``sleep`` (its env
    and setsid steps are done)."""
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text().strip()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no pid in {path}")
        time.sleep(0.02)
    pid = int(path.read_text().split()[0])
    while Path(f"/proc/{pid}/comm").read_text().strip() != "sleep":
        if time.monotonic() > deadline:
            raise TimeoutError(f"{pid} never ran sleep")
        time.sleep(0.02)
    return pid


def start(command: str, **env: str) -> subprocess.Popen[bytes]:
    base = {k: v for k, v in os.environ.items() if k != lineage.MARKER}
    return subprocess.Popen(["/bin/sh", "-c", command], env={**base, **env},
                            start_new_session=True)


def test_ancestry_session_and_marker_each_tell(tmp_path):
    procs, orphans = [], []
    try:
        # a registered tool process: its child descends from it (in a session of its
        # own and without the marker, so only the ancestry tells)
        tool = start(f"env -u {lineage.MARKER} setsid sleep 60 & echo $! > {tmp_path}/child; "
                     "wait")
        procs.append(tool)
        lineage.register(tool.pid)
        child = wait_for_pid(tmp_path / "child")
        assert "descends from a command the agent ran" in (lineage.tool_lineage(child) or "")
        # what it leaves behind when its shell exits keeps the session, marker or not
        leaver = start(f"env -u {lineage.MARKER} sleep 60 & echo $! > {tmp_path}/left")
        procs.append(leaver)
        lineage.register(leaver.pid)
        left = wait_for_pid(tmp_path / "left")
        orphans.append(left)
        leaver.wait(30)
        lineage.unregister(leaver.pid)
        assert "session of a command the agent ran" in (lineage.tool_lineage(left) or "")
        # a double fork into a session of its own: the marker still tells
        marked = start(f"(setsid sleep 60 & echo $! > {tmp_path}/escaped) ",
                       **{lineage.MARKER: "1"})
        procs.append(marked)
        escaped = wait_for_pid(tmp_path / "escaped")
        orphans.append(escaped)
        assert lineage.MARKER in (lineage.tool_lineage(escaped) or "")
        # anything else is nobody's: this test, and a process unrelated to any tool
        plain = start("sleep 60")
        procs.append(plain)
        assert lineage.tool_lineage(os.getpid()) is None
        assert lineage.tool_lineage(plain.pid) is None
        assert not lineage.descends_from_tool(plain.pid)
    finally:
        for p in procs:
            lineage.unregister(p.pid)
            p.kill()
            p.wait(10)
        for pid in orphans:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def test_a_recycled_pid_is_not_taken_for_a_tool_process():
    # a session leader that now has the pid a tool process had: the kernel's start
    # time differs from the one registered, so neither ancestry nor session match
    plain = start("sleep 60")
    try:
        lineage.register(plain.pid)
        assert lineage.tool_lineage(plain.pid) is not None  # the real one: it tells
        lineage._live[plain.pid] = lineage._sessions[plain.pid] = "1"  # a process long gone
        assert lineage.tool_lineage(plain.pid) is None
    finally:
        lineage.unregister(plain.pid)
        lineage._sessions.pop(plain.pid, None)
        plain.kill()
        plain.wait(10)


def test_the_guard_refuses_only_protected_methods_of_the_agents_processes():
    class Call:
        def __init__(self, peer: peers.Peer | None) -> None:
            self.peer = peer

    me = peers.Peer(pid=os.getpid(), started=lineage.start_time(os.getpid()))
    assert peers.guard("approval.respond", Call(me)) is None  # the test is a person
    tool = start("sleep 60")
    try:
        lineage.register(tool.pid)
        agent = peers.Peer(pid=tool.pid, started=lineage.start_time(tool.pid))
        for method in ("approval.respond", "token.create", "token.list", "cron.create",
                       "cron.run", "mcp.attach", "fs.offer", "fs.respond", "terminal.offer",
                       "terminal.respond"):
            err = peers.guard(method, Call(agent))
            assert isinstance(err, Forbidden) and err.reason == "forbidden", method
            assert "agent" in err.detail
        for method in ("approval.list", "prompt.submit", "session.create", "ping", "mcp.list"):
            assert peers.guard(method, Call(agent)) is None, method
        assert peers.guard("approval.respond", Call(None)) is None  # in-process callers
    finally:
        lineage.unregister(tool.pid)
        tool.kill()
        tool.wait(10)
    # the process that connected has exited: whoever holds the connection is unknown
    assert isinstance(peers.guard("approval.respond", Call(agent)), Forbidden)


def test_a_tcp_connection_is_traced_to_the_process_holding_its_far_end():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    conn, remote = server.accept()
    try:
        local = conn.getsockname()
        assert os.getpid() in lineage.socket_pids(local, remote)
        assert lineage.socket_pids(local, ("127.0.0.1", 1)) == []
        peer = peers.tcp_peer(local, remote)
        assert peer.local == local and peer.remote == remote
    finally:
        for s in (conn, client, server):
            s.close()
