"""Finite chats queued behind a turn that an owner crash left unknown.

Three `tether chat -Q --resume SID` run in one session: A's turn is in the
model when the owner is killed (-9); B and C are queued behind it. The next
owner (started by the CLIs themselves) reports A's admission unknown, and the
session pauses behind it. None of them may wait for ever: A says its turn is
unknown, B and C that they are queued behind it, and all three name
`tether resolve SID`; once that runs, B's and C's prompts run.
"""

from __future__ import annotations

import subprocess
import threading
import time

from clihelp import CLI
from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, Peer, clean_env, db_rows, write_config


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


async def test_queued_chats_behind_an_unknown_turn_stop_waiting_and_name_resolve(
        tmp_path, reap_owners):
    home = tmp_path / "home"
    reap_owners(home)
    gate = threading.Event()

    def model(request: dict):
        last = str(request["messages"][-1].get("content") or "")
        if last == "A holds the turn":
            gate.wait(60)  # the owner is killed while this request is in flight
        return text_reply("ANSWER " + last)

    procs: dict[str, subprocess.Popen[str]] = {}
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        env = clean_env(home)
        owner = OwnerProcess(home, env=env).start()
        try:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", source="test"))["session_id"]
            for name, text in (("A", "A holds the turn"), ("B", "B waits"), ("C", "C waits")):
                procs[name] = subprocess.Popen(
                    [*CLI, "chat", "-Q", "--resume", sid, "-q", text], env=env, cwd=tmp_path,
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)
                admitted = len(procs)
                wait_for(lambda: len(db_rows(home, "SELECT 1 FROM session_admissions"))
                         == admitted, what=f"{name}'s admission")  # noqa: B023
            wait_for(lambda: any("A holds" in str(r) for r in fake.requests),
                     what="A's turn in the model")
            owner.kill()
            results = {n: p.communicate(timeout=60) for n, p in procs.items()}
        finally:
            gate.set()
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.communicate()
            owner.kill()

        codes = {n: p.returncode for n, p in procs.items()}
        assert codes == {"A": 1, "B": 1, "C": 1}, results
        assert "turn_unknown" in results["A"][1], results["A"]
        for name in "BC":
            out, err = results[name]
            assert out == "" and "session_paused" in err, (name, out, err)
        for name in "ABC":
            assert f"tether resolve {sid}" in results[name][1], results[name]
            assert "Traceback" not in results[name][1]

        resolved = subprocess.run([*CLI, "resolve", sid], env=env, cwd=tmp_path,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=60)
        assert resolved.returncode == 0, resolved
        wait_for(lambda: db_rows(home, "SELECT COUNT(*) FROM session_admissions "
                                       "WHERE status = 'terminal' AND outcome = 'completed'"
                                 ) == [(2,)], what="B and C to run after the resolve")
    asked = [str(r["messages"][-1].get("content")) for r in fake.requests]
    assert asked.count("B waits") == 1 and asked.count("C waits") == 1, asked
