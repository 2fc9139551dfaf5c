"""The sandbox around the agent's commands, through the real owner (needs bubblewrap).

A scripted model runs commands as an attacker would: writes outside the
working directory, reads of the owner's home, socket and environment, a
connection to a listener of the test; each is refused and the result says so.
An escalation asks a person, runs outside when approved and is denied on an
unattended turn. ``process kill`` ends a command and what it left behind at
once. Nothing destructive runs: every write aims at the test's own directories.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, clean_env, sandbox_missing, write_config
from toolscript import ScriptedModel, tool_results

pytestmark = [pytest.mark.sqlite_only,
              pytest.mark.skipif(sandbox_missing() is not None,
                                 reason=f"no sandbox can be made here: {sandbox_missing()}")]

OWNER_SECRET = "hunter2-owner-only"


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory outside /tmp (which the sandbox replaces with a private one), so that
    what a command may reach there is what it could reach in a user's project."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="tether-sandbox-test-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on 127.0.0.1 and what connections to it sent."""
    got: list[bytes] = []
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                got.append(conn.recv(100))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1], got
    finally:
        stop.set()
        t.join(5)
        srv.close()


def connect(port: int) -> str:
    return (f"python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), "
            f"timeout=5); s.sendall(b'reached'); print('CONNECTED')\"")


async def test_inside_the_sandbox_a_command_reaches_only_its_working_directory(scratch):
    tmp_path = scratch
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    home = tmp_path / "home"
    private = f"/tmp/tether-sandbox-{secrets.token_hex(4)}"
    owner_pid: dict[str, int] = {}
    with listener() as (port, got):
        model = ScriptedModel({"probe": [
            ("terminal", {"command": f"touch {elsewhere}/x"}),
            # a workdir names where it runs, not what it may write
            ("terminal", {"command": "touch y", "workdir": str(elsewhere)}),
            ("terminal", {"command": f"echo inside > made.txt && echo ok > {private} && "
                                     f"cat {private}"}),
            ("terminal", {"command": f"cat {home}/config.yaml; ls -a {home}; "
                                     f"test -S {home}/daemon.sock && echo SOCKET-VISIBLE"}),
            ("terminal", lambda rs: {"command": (
                "ls /proc | grep -c '^[0-9]'; cat /proc/*/environ | tr '\\0' '\\n'; "
                f"cat /proc/{owner_pid['pid']}/environ || echo NO-OWNER-PROC")}),
            ("terminal", {"command": connect(port)}),
            ("terminal", {"command": "env"}),
            ("terminal", {"command": f"touch {elsewhere}/z", "background": True}),
            ("process", lambda rs: {"action": "wait", "id": rs[-1]["process_id"],
                                    "timeout_s": 30}),
        ]})
        with FakeProvider(model) as provider:
            write_config(home, provider.url, model={"api_key": "sk-config-key-never-shown"},
                         approvals={"mode": "never"})
            env = clean_env(home, DB_PASS=OWNER_SECRET, MYAPP_PW=OWNER_SECRET)
            with OwnerProcess(home, env=env) as owner:
                assert owner.proc is not None
                owner_pid["pid"] = owner.proc.pid
                async with await Peer.connect(home) as peer:
                    sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                    r = await peer.result("prompt.submit", session_id=sid, input_id="p",
                                          text="probe the sandbox")
                    done = await peer.wait_terminal(sid, r["admission_id"])
    assert done["outcome"] == "completed"
    outside, workdir, inside, owner_home, procs, net, printed, _, waited = \
        tool_results(model, "probe")
    # a write outside the cwd is refused, and the result says why and what to do
    assert outside["exit_code"] != 0 and "Read-only file system" in outside["output"]
    assert not (elsewhere / "x").exists()
    assert outside["sandbox"] == "workspace-write"
    assert "refused a write outside the working directory" in outside["sandbox_refused"]
    assert "escalate: true" in outside["sandbox_refused"]
    assert "nobody can approve" not in outside["sandbox_refused"]  # a person is there
    assert workdir["exit_code"] != 0 and not (elsewhere / "y").exists()
    assert f"outside the working directory {work}" in workdir["sandbox_refused"]
    # the cwd is writable; /tmp is a private one, gone with the command
    assert inside["exit_code"] == 0 and inside["output"] == "ok\n"
    assert (work / "made.txt").read_text() == "inside\n"
    assert not Path(private).exists()
    assert "sandbox_refused" not in inside
    # the owner's home (config.yaml, its socket) is not there
    assert "sk-config-key" not in owner_home["output"] and "api_key" not in owner_home["output"]
    assert "SOCKET-VISIBLE" not in owner_home["output"]
    assert "daemon.sock" not in owner_home["output"]
    # a pid namespace of its own: a handful of processes, none of them the owner's
    assert int(procs["output"].splitlines()[0]) < 10
    assert OWNER_SECRET not in procs["output"] and "TETHER_HOME" not in procs["output"]
    assert "NO-OWNER-PROC" in procs["output"]
    # no network: the test's listener heard nothing
    assert net["exit_code"] != 0 and "CONNECTED" not in net["output"] and got == []
    assert "network" in net["sandbox_refused"]
    # the environment is the allowlist: no DB_PASS, no MYAPP_PW, no home or key
    assert OWNER_SECRET not in printed["output"]
    assert "TETHER_HOME" not in printed["output"] and "OPENAI" not in printed["output"]
    assert "PATH=" in printed["output"]
    # a background command refused so says it when it is followed
    assert waited["state"] == "exited" and waited["sandbox"] == "workspace-write"
    assert "refused a write outside" in waited["sandbox_refused"]


async def test_an_escalation_asks_runs_outside_when_approved_and_is_denied_unattended(
        tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    with listener() as (port, got):
        call = ("terminal", {"command": connect(port), "escalate": True,
                             "reason": "reach the test's listener"})
        model = ScriptedModel({"escalate": [call], "unattended": [call],
                               "no reason": [("terminal", {"command": "true",
                                                           "escalate": True})]})
        with FakeProvider(model) as provider:
            # mode auto: the command alone would run unasked; as an escalation it asks
            write_config(home, provider.url, approvals={"mode": "auto"})
            with OwnerProcess(home):
                async with await Peer.connect(home) as peer:
                    sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                    r = await peer.result("prompt.submit", session_id=sid, input_id="e",
                                          text="escalate please")
                    ev = await peer.wait_event(lambda e: e["type"] == "approval.requested")
                    assert got == []  # nothing ran before the answer
                    await peer.result("approval.respond", session_id=sid, decision="once",
                                      approval_id=ev["payload"]["approval_id"])
                    await peer.wait_terminal(sid, r["admission_id"])
                    r2 = await peer.result("prompt.submit", session_id=sid, input_id="u",
                                           text="unattended escalation", finite=True)
                    await peer.wait_terminal(sid, r2["admission_id"])
                    r3 = await peer.result("prompt.submit", session_id=sid, input_id="n",
                                           text="no reason given", finite=True)
                    await peer.wait_terminal(sid, r3["admission_id"])
    assert "outside the sandbox" in ev["payload"]["why"]
    assert "reach the test's listener" in ev["payload"]["why"]
    [ran] = tool_results(model, "escalate")
    assert ran["exit_code"] == 0 and "CONNECTED" in ran["output"] and ran["sandbox"] == "none"
    assert got == [b"reached"]  # only the approved escalation reached it
    [denied] = tool_results(model, "unattended")
    assert denied["denied"] is True and "nobody can answer" in denied["error"]
    [bad] = tool_results(model, "no reason")
    assert "needs a reason" in bad["error"]


def _left(tag: str) -> str:
    """Our sleeps still running (pgrep -f 'sleep 30[12]', told apart by ``tag``)."""
    return subprocess.run(["pgrep", "-af", f"sleep 30[12][.]{tag}"], capture_output=True,
                          text=True, check=False).stdout


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_process_kill_ends_what_escaped_its_group_at_once(tmp_path, mode):
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    tag = str(secrets.randbelow(9000) + 1000)  # tells our sleeps from anyone else's
    times: list[float] = []
    script = ScriptedModel({"kill": [
        ("terminal", {"command": f"setsid sleep 301.{tag} & sleep 302.{tag}",
                      "background": True}),
        ("process", lambda rs: {"action": "wait", "id": rs[0]["process_id"], "timeout_s": 1}),
        ("process", lambda rs: {"action": "kill", "id": rs[0]["process_id"]}),
        # in the foreground, what a command leaves running ends with it
        ("terminal", {"command": f"setsid sleep 301.{tag} & echo left-behind"}),
    ]})

    def model(req: dict):
        times.append(time.monotonic())
        return script(req)

    with FakeProvider(model) as provider:
        write_config(home, provider.url, approvals={"mode": "never"}, sandbox={"mode": mode})
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="k",
                                      text="kill it")
                await peer.wait_terminal(sid, r["admission_id"])
                left = _left(tag)
    started, waited, killed, foreground = tool_results(script, "kill")
    assert started["sandbox"] == ("none" if mode == "off" else mode)
    assert waited["state"] == "running"  # both sleeps were up
    assert killed["state"] == "killed"
    # the model asked for the kill at times[2] and had its result by times[3]
    assert times[3] - times[2] < 5.0, times
    assert foreground["exit_code"] == 0 and foreground["output"] == "left-behind\n"
    assert foreground["duration_seconds"] < 5.0
    assert left == ""


async def test_a_turn_may_tighten_the_sandbox_never_loosen_it(scratch):
    import sys

    work, home = scratch / "work", scratch / "home"
    work.mkdir()
    model = ScriptedModel({"write": [("terminal", {"command": "touch made-here"})]})
    with FakeProvider(model) as provider:
        write_config(home, provider.url, approvals={"mode": "never"})
        with OwnerProcess(home):
            # the real CLI: one finite turn in a read-only sandbox
            chat = subprocess.run(
                [sys.executable, "-m", "tether.clients.cli", "chat", "-Q", "--sandbox",
                 "read-only", "-q", "write a file"], env=clean_env(home), cwd=work,
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                check=False)
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                looser = await peer.call("prompt.submit", session_id=sid, input_id="o",
                                         text="write a file", sandbox="off")
                default = await peer.call("session.create", cwd=str(work), sandbox="off")
                listed = await peer.result("session.list")
    assert chat.returncode == 0, chat.stderr
    [refused] = tool_results(model, "write")
    assert refused["sandbox"] == "read-only" and refused["exit_code"] != 0
    assert not (work / "made-here").exists()
    assert "refused a write (read-only" in refused["sandbox_refused"]
    assert "nobody can approve an escalation" in refused["sandbox_refused"]  # -Q: unattended
    for reply in (looser, default):
        assert reply["error"]["data"]["reason"] == "invalid_params"
        assert "sandbox off is looser than the owner's sandbox.mode workspace-write" \
            in reply["error"]["data"]["detail"]
    assert len(listed["sessions"]) == 2  # the refused session.create recorded nothing
