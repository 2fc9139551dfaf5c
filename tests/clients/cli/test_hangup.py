"""Closing a terminal (SIGHUP) and the owner.

``tether serve --foreground`` runs the owner on the user's terminal: closing that
terminal must stop it as SIGTERM does — drain, record the running turn
terminal, remove daemon.json, exit 0 — not kill it mid-turn. An owner a client
started by itself lives in its own session and never hears of the terminal the
client ran on.

Each command runs as the leader of a new session whose controlling terminal is a
fresh pty. Closing the pty's master side is what closing a terminal window does:
the kernel hangs the terminal up and sends SIGHUP to the session's leader.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

from clihelp import CLI, owner_pid, pid_alive
from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, Peer, clean_env, until, write_config

# setsid, then take stdin (the pty's slave side) as the controlling terminal, then
# become the command: the command is the session leader a hangup is sent to
_LEADER = ("import fcntl, os, sys, termios; os.setsid(); "
           "fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.argv[1], sys.argv[1:])")


def on_a_terminal(args: list[str], env: dict[str, str], cwd: Path,
                  ) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``args`` on a new terminal; returns the process and the terminal's
    master fd (the test's to read and to close)."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-c", _LEADER, *args], stdin=slave,
                                stdout=slave, stderr=slave, env=env, cwd=cwd)
    finally:
        os.close(slave)
    return proc, master


def screen(master: int) -> str:
    """What the command printed so far (read without waiting), so the pty never fills."""
    out = b""
    while select.select([master], [], [], 0)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: nothing holds the slave side any more
            break
        if not chunk:
            break
        out += chunk
    return out.decode(errors="replace")


async def test_closing_the_terminal_of_a_foreground_owner_drains_it(tmp_path):
    home = tmp_path / "home"
    gate = threading.Event()

    def model(request: dict):
        gate.wait(30)
        return text_reply("TOO LATE")

    with FakeProvider(model) as provider:
        write_config(home, provider.url, daemon={"grace_seconds": 0.3})
        proc, master = on_a_terminal([*CLI, "serve", "--foreground", "--home", str(home)],
                                     clean_env(home), tmp_path)
        printed = ""
        try:
            await until(lambda: proc.poll() is not None or owner_pid(home) == proc.pid,
                        "the foreground owner's descriptor")
            assert proc.poll() is None, screen(master)
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                turn = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                         text="runs until the terminal closes")
                await peer.wait_event(lambda e: e["type"] == "message.start")
                printed = screen(master)
                os.close(master)  # the terminal window closes
                master = -1
                code = await asyncio.to_thread(proc.wait, 30)
                assert code == 0, f"exit status {code}, as for SIGTERM\n{printed}"
                done = await peer.wait_event(lambda e: e["type"] == "message.complete")
                assert done["payload"]["outcome"] == "interrupted"
                await peer.ws.wait_closed()
                assert peer.ws.close_code == 1001
            assert not (home / "daemon.json").exists()
            assert not (home / "daemon.sock").exists()
        finally:
            gate.set()
            if master >= 0:
                os.close(master)
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

        # the next owner finds the turn settled, not unknown
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                receipt = await peer.result("prompt.receipt", session_id=sid,
                                            admission_id=turn["admission_id"])
    assert (receipt["status"], receipt["outcome"]) == ("terminal", "interrupted"), receipt
    assert len(provider.requests) == 1


async def test_closing_the_terminal_of_a_chat_leaves_the_owner_it_started(tmp_path,
                                                                         reap_owners):
    home = tmp_path / "home"
    reap_owners(home)
    with FakeProvider(lambda request: text_reply("STILL_HERE")) as provider:
        write_config(home, provider.url)
        env = clean_env(home, TERM="xterm", NO_COLOR="1")
        # an interactive chat: it autostarts the owner, then waits at its prompt
        chat, master = on_a_terminal([*CLI, "chat"], env, tmp_path)
        try:
            await until(lambda: chat.poll() is not None or pid_alive(owner_pid(home)),
                        "the owner the chat started")
            assert chat.poll() is None, screen(master)
            pid = owner_pid(home)
            screen(master)
            os.close(master)  # the terminal window closes: the chat gets SIGHUP
            master = -1
            await asyncio.to_thread(chat.wait, 30)
        finally:
            if master >= 0:
                os.close(master)
            if chat.poll() is None:
                chat.kill()
                chat.wait(10)

        # the owner was not told: same process, still admitting and running turns
        assert owner_pid(home) == pid and pid_alive(pid)
        async with await Peer.connect(home) as peer:
            sid = (await peer.result("session.create"))["session_id"]
            turn = await peer.result("prompt.submit", session_id=sid, input_id="a", text="hi")
            done = await peer.wait_terminal(sid, turn["admission_id"])
    assert done["outcome"] == "completed" and done["result"]["text"] == "STILL_HERE"
    assert owner_pid(home) == pid and pid_alive(pid)
    assert len(provider.requests) == 1
