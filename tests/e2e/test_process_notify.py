"""notify_on_complete through the real owner: one notice per process, interactive turns only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, clean_env, db_rows, until, write_config
from toolscript import ScriptedModel, newest_user, tool_results

NOTICE = "[process notice]"


def model() -> ScriptedModel:
    return ScriptedModel({
        "quick": [("terminal", {"command": "echo hello-from-bg; exit 3", "background": True,
                                "notify_on_complete": True})],
        "long": [("terminal", {"command": "echo started; exec sleep 120", "background": True,
                               "notify_on_complete": True})],
        "finite": [("terminal", {"command": "touch should-not-exist", "background": True,
                                 "notify_on_complete": True})],
    })


def notices(m: ScriptedModel) -> list[str]:
    return sorted({newest_user(r) for r in m.requests if newest_user(r).startswith(NOTICE)})


def setup(tmp_path: Path, url: str, sandbox: str = "workspace-write") -> tuple[Path, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = tmp_path / "home"
    write_config(home, url, approvals={"mode": "never"}, sandbox={"mode": sandbox})
    return home, work


def ended(pid: int) -> bool:
    """``pid`` is gone, or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].startswith("Z")
    except OSError:
        return True


def process_admissions(home: Path) -> list[tuple]:
    return db_rows(home, "SELECT request_id, status FROM session_admissions "
                         "WHERE principal_id = 'process'")


async def test_a_notice_is_delivered_exactly_once(tmp_path):
    m = model()
    with FakeProvider(m) as provider:
        home, work = setup(tmp_path, provider.url)
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="q",
                                      text="quick job")
                await peer.wait_terminal(sid, r["admission_id"])
                ev = await peer.wait_event(lambda e: e["type"] == "process.complete")
                notice = await peer.wait_event(
                    lambda e: e["type"] == "message.complete"
                    and e["admission_id"] != r["admission_id"])
        with OwnerProcess(home):  # a restart delivers nothing again
            async with await Peer.connect(home) as peer:
                await peer.result("ping")
    [started] = tool_results(m, "quick")
    pid = started["process_id"]
    assert ev["payload"]["process_id"] == pid and ev["payload"]["exit_code"] == 3
    assert notice["payload"]["outcome"] == "completed"
    [text] = notices(m)
    assert text.startswith(f"{NOTICE} process {pid} `echo hello-from-bg; exit 3` exited 3")
    assert "hello-from-bg" in text
    assert process_admissions(home) == [(pid, "terminal")]
    assert db_rows(home, "SELECT state, exit_code, delivery_state FROM processes") == [
        ("exited", 3, "delivered")]


async def test_a_crash_between_exit_and_delivery_still_delivers_once(tmp_path):
    m = model()
    with FakeProvider(m) as provider:
        home, work = setup(tmp_path, provider.url)
        env = clean_env(home, TETHER_FAULT="pause_before_process_notice:60")
        with OwnerProcess(home, env=env) as owner:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="q",
                                      text="quick job")
                await peer.wait_terminal(sid, r["admission_id"])
            await until(lambda: db_rows(home, "SELECT state FROM processes") == [("exited",)],
                        "the exit recorded")
            owner.kill()
        assert process_admissions(home) == []
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await until(lambda: process_admissions(home) == [
                    (db_rows(home, "SELECT process_id FROM processes")[0][0], "terminal")],
                    "the notice delivered and run")
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await peer.result("ping")
    assert len(process_admissions(home)) == 1
    assert len(notices(m)) == 1 and "exited 3" in notices(m)[0]


async def test_notify_is_refused_on_a_finite_turn_with_no_row(tmp_path):
    m = model()
    with FakeProvider(m) as provider:
        home, work = setup(tmp_path, provider.url)
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="f",
                                      text="finite job", finite=True)
                done = await peer.wait_terminal(sid, r["admission_id"])
    assert done["outcome"] == "completed"
    [res] = tool_results(m, "finite")
    assert res["refused"] == "notify_unsupported" and "process wait" in res["error"]
    assert db_rows(home, "SELECT count(*) FROM processes") == [(0,)]
    assert not (work / "should-not-exist").exists()


@pytest.mark.parametrize("sandbox", ["workspace-write", "off"])
async def test_processes_lost_in_a_crash_are_reported_once(tmp_path, sandbox):
    m = model()
    with FakeProvider(m) as provider:
        home, work = setup(tmp_path, provider.url, sandbox)
        with OwnerProcess(home) as owner:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="l",
                                      text="long job")
                await peer.wait_terminal(sid, r["admission_id"])
            [(pid,)] = await until(lambda: db_rows(
                home, "SELECT pid FROM processes WHERE pid IS NOT NULL"), "the pid recorded")
            owner.kill()
        if sandbox == "off":
            assert not ended(pid)  # the orphan outlived the owner ...
        else:  # bubblewrap's --die-with-parent: the sandbox ends with its owner
            await until(lambda: ended(pid), "the sandbox ended with the owner")
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await until(lambda: len(process_admissions(home)) == 1
                            and process_admissions(home)[0][1] == "terminal",
                            "the lost notice delivered")
                await until(lambda: ended(pid), "the orphan ended")  # ... or recovery ends it
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await peer.result("ping")
    assert len(process_admissions(home)) == 1
    [text] = notices(m)
    assert "was lost when the owner stopped" in text
    assert db_rows(home, "SELECT state, delivery_state FROM processes") == [
        ("lost", "delivered")]


async def test_stopping_the_owner_ends_its_processes_and_reports_them_once(tmp_path):
    m = model()
    with FakeProvider(m) as provider:
        home, work = setup(tmp_path, provider.url)
        with OwnerProcess(home) as owner:
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="l",
                                      text="long job")
                await peer.wait_terminal(sid, r["admission_id"])
            [(pid,)] = await until(lambda: db_rows(
                home, "SELECT pid FROM processes WHERE pid IS NOT NULL"), "the pid recorded")
            assert owner.stop() == 0
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(
            ") ")[1].startswith("Z")
        assert db_rows(home, "SELECT state FROM processes") == [("lost",)]
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                await until(lambda: [s for _, s in process_admissions(home)] == ["terminal"],
                            "the notice run after the restart")
    assert len(process_admissions(home)) == 1
    [text] = notices(m)
    assert "was lost when the owner stopped" in text

