"""`tether logs`: the owner's log from its end, followed with -f across rotations;
never starting an owner."""

import signal
import subprocess
import time

from clihelp import CLI
from harness import OwnerProcess, clean_env, write_config


def _read_until(proc: subprocess.Popen, text: str, timeout: float = 30.0) -> str:
    """What ``proc`` printed up to and including the first line holding ``text``."""
    out = ""
    deadline = time.monotonic() + timeout
    while text not in out:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise AssertionError(f"no {text!r} in {out!r}")
        out += proc.stdout.readline()
    return out


def test_logs_shows_the_owners_log_and_the_stdio_file(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home) as owner:
        pid = owner.proc.pid
        shown = run_cli(home, "logs", "-n", "50")
    assert shown.returncode == 0, shown
    assert f"(epoch 1, pid {pid}) serving {home}/daemon.sock" in shown.stdout
    assert "owner stopped" in run_cli(home, "logs", "-n", "1").stdout
    lines = [f"entry {i}" for i in range(20_000)]
    (home / "logs" / "owner.log").write_text("\n".join(lines) + "\n")
    assert run_cli(home, "logs", "-n", "3").stdout == "entry 19997\nentry 19998\nentry 19999\n"
    assert run_cli(home, "logs", "-n", "0").stdout == ""
    (home / "logs" / "daemon.log").write_text("Traceback (most recent call last):\nboom\n")
    stdio = run_cli(home, "logs", "--stdio")
    assert stdio.stdout == "Traceback (most recent call last):\nboom\n"
    # daemon.log written after owner.log: the plain command points at it
    assert "`tether logs --stdio`" in run_cli(home, "logs", "-n", "1").stderr


def test_logs_never_starts_an_owner(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home)
    done = run_cli(home, "logs")
    assert done.returncode == 2
    assert done.stderr.startswith(f"tether: not_found: no log at {home}/logs/owner.log")
    assert not (home / "daemon.json").exists() and not (home / "logs").exists()


def test_follow_goes_on_across_rotation_and_leaves_cleanly_on_ctrl_c(tmp_path):
    home = tmp_path / "home"
    logs = home / "logs"
    logs.mkdir(parents=True)
    log = logs / "owner.log"
    log.write_text("old line\n")
    proc = subprocess.Popen([*CLI, "logs", "-f", "-n", "1"], env=clean_env(home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _read_until(proc, "old line") == "old line\n"
        with open(log, "a") as f:
            f.write("appended\n")
        assert _read_until(proc, "appended") == "appended\n"
        # rotated as the owner's RotatingFileHandler does: renamed, then a new file
        with open(log, "a") as f:
            f.write("last before rotation\n")
        log.rename(logs / "owner.log.1")
        log.write_text("first after rotation\n")
        assert _read_until(proc, "first after rotation") == (
            "last before rotation\nfirst after rotation\n")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert out == "\n" and err == ""
    assert not (home / "daemon.json").exists()


def test_library_warnings_land_in_owner_log_not_only_on_stderr(tmp_path):
    code = ("import logging, sys, pathlib\n"
            "from tether.daemon.runtime.home import Home\n"
            "from tether.daemon.owner import setup_logging\n"
            "home = Home(pathlib.Path(sys.argv[1])); home.ensure()\n"
            "setup_logging(home, foreground=False)\n"
            "logging.getLogger('asyncio').error('Task exception was never retrieved')\n"
            "logging.getLogger('websockets.server').error('connection handler failed')\n"
            "logging.getLogger('websockets.server').info('server listening')\n"
            "logging.getLogger('tether.owner').info('owner serving')\n")
    home = tmp_path / "home"
    done = subprocess.run([CLI[0], "-c", code, str(home)], env=clean_env(home),
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr == ""
    log = (home / "logs" / "owner.log").read_text()
    for line in ("ERROR asyncio: Task exception was never retrieved",
                 "ERROR websockets.server: connection handler failed",
                 "INFO tether.owner: owner serving"):
        assert line in log
    assert "server listening" not in log


async def test_owner_log_records_turns_tools_approvals_and_cron_fires_as_json(tmp_path, run_cli):
    import asyncio
    import json

    from fakeprovider import FakeProvider, Status
    from harness import Peer
    from toolscript import ScriptedModel

    script = ScriptedModel({"make": [("terminal", {"command": "touch made by agent"})]})

    def model(req):
        if "break" in (req["messages"][-1].get("content") or ""):
            return Status(400, '{"error": {"message": "no such model"}}')
        return script(req)

    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                r = await peer.result("prompt.submit", session_id=sid, input_id="m",
                                      text="make a file")
                ev = await peer.wait_event(lambda e: e["type"] == "approval.requested")
                await peer.result("approval.respond", session_id=sid, decision="deny",
                                  approval_id=ev["payload"]["approval_id"], reason="not now")
                await peer.wait_terminal(sid, r["admission_id"])
                r = await peer.result("prompt.submit", session_id=sid, input_id="b",
                                      text="break it")
                await peer.wait_terminal(sid, r["admission_id"])
            assert (await asyncio.to_thread(run_cli, home, "cron", "add", "j", "--schedule",
                                            "@daily", "-q", "hello")).returncode == 0
            assert (await asyncio.to_thread(run_cli, home, "cron", "run", "j")).returncode == 0
            shown = await asyncio.to_thread(run_cli, home, "logs", "--json", "-n", "200")
            text = await asyncio.to_thread(run_cli, home, "logs", "-n", "200")
    assert shown.returncode == 0, shown
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    events = [r for r in records if r.get("event")]
    by = {}
    for r in events:
        by.setdefault(r["event"], []).append(r)
    [asked] = by["approval.asked"]
    assert asked["session"] == sid and asked["subject"] == "touch made by agent"
    [resolved] = by["approval.resolved"]
    assert (resolved["status"], resolved["decision"], resolved["reason"]) == (
        "denied", "deny", "not now")
    assert [t["tool"] for t in by["tool.start"]] == ["terminal"]
    ends = {t["session"] + t["outcome"]: t for t in by["turn.end"]}
    assert float(ends[sid + "completed"]["seconds"]) >= 0
    assert ends[sid + "failed"]["level"] == "WARNING" and "no such model" in ends[
        sid + "failed"]["error"]
    [fire] = by["cron.fire"]
    assert fire["job"] == "j" and fire["kind"] == "manual" and fire["session"].startswith("ses_")
    assert len(by["turn.start"]) == 3 and "prompt_chars" in by["turn.start"][0]
    assert "make a file" not in shown.stdout  # prompts are never logged
    # the text log has the same lines, readable
    assert 'tether.activity: approval.asked session=' in text.stdout
    assert 'subject="touch made by agent"' in text.stdout
