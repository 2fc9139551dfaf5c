"""Transparent retry: an owner restart between submit and completion still prints the answer once.

The CLI's admission is kept QUEUED (``daemon.max_running_turns: 1`` and a
blocker turn in another session), then the owner is stopped with SIGTERM. A
queued admission survives a restart (SPEC §4), so the CLI must reconnect
(starting the next owner itself, as any client that finds none does),
resubmit the same input_id, get the same admission back, follow it to the end
and print its answer exactly once.
"""

from __future__ import annotations

import subprocess
import time

from clihelp import CLI, owner_pid, pid_alive
from fakeprovider import FakeProvider, Stall, text_reply
from harness import OwnerProcess, Peer, clean_env, db_rows, write_config

ANSWER = "ANSWER_AFTER_RESTART"


def model(request: dict):
    users = [str(m.get("content") or "") for m in request.get("messages") or []
             if m["role"] == "user"]
    if "BLOCKER" in users[-1]:
        return Stall(30)  # holds the only turn slot until the owner stops it
    return text_reply(ANSWER)


def wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


async def test_owner_restart_while_queued_prints_answer_exactly_once(tmp_path, reap_owners):
    home = tmp_path / "home"
    reap_owners(home)
    with FakeProvider(model) as fake:
        write_config(home, fake.url, daemon={"max_running_turns": 1, "grace_seconds": 0.3})
        env = clean_env(home)
        first = OwnerProcess(home, env=env).start()
        cli = None
        try:
            async with await Peer.connect(home) as peer:
                blocker = (await peer.result("session.create", source="test"))["session_id"]
                await peer.result("prompt.submit", session_id=blocker, input_id="blocker",
                                  text="BLOCKER turn")
            wait_for(lambda: any("BLOCKER" in str(r) for r in fake.requests),
                     what="the blocker turn to reach the provider")

            cli = subprocess.Popen([*CLI, "chat", "-Q", "-q", "survive a restart",
                                    "--input-id", "in-restart-1"], env=env, cwd=tmp_path,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
            wait_for(lambda: db_rows(home, "SELECT status FROM session_admissions "
                                           "WHERE request_id = 'in-restart-1'") == [("queued",)],
                     what="the CLI's admission to be queued")

            assert first.stop() == 0  # SIGTERM: drain, interrupt the blocker, exit
            out, err = cli.communicate(timeout=45)
        finally:
            if cli is not None and cli.poll() is None:
                cli.kill()
                cli.communicate()
            first.kill()

    assert cli.returncode == 0, (out, err)
    assert out == ANSWER + "\n", (out, err)  # the answer, exactly once
    assert "Traceback" not in err
    second = owner_pid(home)
    assert second is not None and second != first.proc.pid and pid_alive(second)
    rows = db_rows(home, "SELECT status, outcome FROM session_admissions "
                         "WHERE request_id = 'in-restart-1'")
    assert rows == [("terminal", "completed")], rows  # one row, one run
    assert db_rows(home, "SELECT status, outcome FROM session_admissions "
                         "WHERE request_id = 'blocker'") == [("terminal", "interrupted")]
    assert sum(1 for r in fake.requests if "survive a restart" in str(r)) == 1
