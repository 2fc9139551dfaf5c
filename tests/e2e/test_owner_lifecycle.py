"""The owner's life: one per home, its files and their modes, clean stop, graceful drain."""

import asyncio
import os
import stat
import subprocess
import sys
import threading
from datetime import datetime

from fakeprovider import FakeProvider, prompt_of, text_reply
from harness import OwnerProcess, Peer, write_config
from scene import Store, owner_env


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def wait_until_draining(peer: Peer) -> None:
    """Poll until the owner refuses admissions; the probe never creates anything."""
    for _ in range(500):
        reply = await peer.call("prompt.submit", session_id="ses_probe", input_id="probe",
                                text="probe")
        if reply["error"]["message"] == "runtime_draining":
            return
        assert reply["error"]["message"] == "not_found", reply
        await asyncio.sleep(0.01)
    raise TimeoutError("the owner never started draining")


def test_one_owner_per_home_its_files_and_a_clean_stop(tmp_path, store_url):
    home = tmp_path / "home"
    env = owner_env(home, store_url)
    write_config(home)
    home.chmod(0o755)  # the owner tightens an existing home
    owner = OwnerProcess(home, env=env).start()
    try:
        assert mode(home) == 0o700
        assert mode(home / "daemon.json") == 0o600
        assert mode(home / "daemon.sock") == 0o600
        assert stat.S_ISSOCK(os.stat(home / "daemon.sock").st_mode)
        # what the owner writes is the user's alone
        assert mode(home / "logs") == 0o700
        stored = [home / "state.db"] if store_url is None else []
        for private in [*stored, home / "daemon.lock", *(home / "logs").iterdir()]:
            assert mode(private) == 0o600, private

        desc = owner.descriptor
        assert set(desc) == {"protocol", "version", "pid", "instance_id", "epoch", "socket",
                             "tcp_url", "started_at", "store"}
        assert desc["protocol"] == "tether/1"
        assert desc["pid"] == owner.proc.pid
        assert desc["socket"] == str(home / "daemon.sock")
        assert os.path.isabs(desc["socket"])
        assert desc["tcp_url"] is None
        # where its state is: state.db, or the PostgreSQL database (no password shown)
        assert desc["store"] == (str(home / "state.db") if store_url is None else store_url)
        assert desc["epoch"] == 1
        assert isinstance(desc["version"], str) and desc["version"]
        assert desc["instance_id"]
        datetime.fromisoformat(desc["started_at"])

        second = subprocess.run(
            [sys.executable, "-m", "tether.daemon", "--home", str(home)],
            env=env, capture_output=True, text=True, timeout=30)
        assert second.returncode != 0
        assert f"pid {owner.proc.pid}" in second.stderr
        assert "Traceback" not in second.stderr
        # the refused owner touched nothing of the running one
        assert owner.alive
        assert (home / "daemon.json").read_text()
        assert (home / "daemon.sock").exists()

        assert owner.stop() == 0
        assert not (home / "daemon.json").exists()
        assert not (home / "daemon.sock").exists()
    finally:
        owner.kill()

    # the next owner on the home starts a new epoch and instance
    with OwnerProcess(home, env=env) as again:
        assert again.descriptor["epoch"] == 2
        assert again.descriptor["instance_id"] != desc["instance_id"]


async def test_drain_lets_a_turn_finish_within_grace_and_refuses_new_work(tmp_path, store_url):
    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    gate = threading.Event()

    def handler(req):
        if prompt_of(req) == "finish me":
            gate.wait(10)
        return text_reply("FINISHED")

    with FakeProvider(handler) as provider:
        write_config(home, provider.url, daemon={"grace_seconds": 10})
        owner = OwnerProcess(home, env=env).start()
        try:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                running = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                            text="finish me")
                queued = await peer.result("prompt.submit", session_id=sid, input_id="b",
                                           text="left for the next owner")
                await peer.wait_event(lambda e: e["type"] == "message.start")

                owner.proc.terminate()
                await wait_until_draining(peer)
                refused = await peer.call("prompt.submit", session_id=sid, input_id="c",
                                          text="too late")
                assert refused["error"]["code"] == -32010
                assert refused["error"]["message"] == "runtime_draining"
                refused = await peer.call("session.create", title="too late")
                assert refused["error"]["message"] == "runtime_draining"
                # a retry of an admitted input is still answered during drain
                retry = await peer.result("prompt.submit", session_id=sid, input_id="b",
                                          text="left for the next owner")
                assert retry["admission_id"] == queued["admission_id"]
                assert retry["status"] == "queued"

                gate.set()
                done = await peer.wait_event(lambda e: e["type"] == "message.complete")
                assert done["payload"]["outcome"] == "completed"
                assert done["payload"]["text"] == "FINISHED"
                await peer.ws.wait_closed()
                assert peer.ws.close_code == 1001
            assert owner.proc.wait(30) == 0
        finally:
            gate.set()
            owner.kill()
    rows = store.rows("SELECT admission_id, status, outcome FROM session_admissions "
                      "ORDER BY seq")
    assert rows == [(running["admission_id"], "terminal", "completed"),
                    (queued["admission_id"], "queued", None)]
    assert store.rows("SELECT COUNT(*) FROM sessions") == [(1,)]
    assert sum(1 for r in provider.requests if prompt_of(r) == "left for the next owner") == 0


async def test_drain_interrupts_a_turn_longer_than_grace(tmp_path, store_url):
    home = tmp_path / "home"
    env = owner_env(home, store_url)
    gate = threading.Event()

    def handler(req):
        gate.wait(20)
        return text_reply("TOO LATE")

    with FakeProvider(handler) as provider:
        write_config(home, provider.url, daemon={"grace_seconds": 0.3})
        owner = OwnerProcess(home, env=env).start()
        try:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create"))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="a",
                                      text="never ends")
                await peer.wait_event(lambda e: e["type"] == "message.start")
                owner.proc.terminate()
                done = await peer.wait_event(lambda e: e["type"] == "message.complete")
                assert done["payload"]["outcome"] == "interrupted"
            assert owner.proc.wait(30) == 0
        finally:
            gate.set()
            owner.kill()

        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                receipt = await peer.result("prompt.receipt", session_id=sid,
                                            admission_id=r["admission_id"])
        assert receipt["status"] == "terminal"
        assert receipt["outcome"] == "interrupted"
        assert receipt["result"]["error"]
    assert len(provider.requests) == 1
