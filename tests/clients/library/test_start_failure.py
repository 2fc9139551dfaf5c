"""An owner that cannot start: the CLI shows the owner's own reason, whatever its log holds.

A client that starts an owner reads the owner's stderr through a pipe while it
starts, so the reason reaches the user even when logs/daemon.log cannot keep it:
on a full disk the log stays empty, and that is when the reason matters most.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest


def assert_start_failed(result: subprocess.CompletedProcess[str]) -> str:
    """The error line of a CLI that could not start an owner (exit 3)."""
    assert result.returncode == 3, result
    assert result.stderr.startswith("tether: start_failed: the owner could not start: "), \
        result.stderr
    assert "\nhint: " in result.stderr and "Traceback" not in result.stderr, result.stderr
    return result.stderr.splitlines()[0]


@pytest.fixture
def full_disk(tmp_path):
    """A directory on a real filesystem with no space left (a small tmpfs, filled)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs",
                              str(disk)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        with open(disk / "ballast", "wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        with pytest.raises(OSError) as full:
            (disk / "probe").write_bytes(b"x")
        assert "No space left on device" in str(full.value)
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_is_named_when_the_owner_cannot_start(full_disk, run_cli):
    home = full_disk / "home"
    result = run_cli(home, "chat", "-Q", "-q", "hi", cwd=full_disk.parent)
    line = assert_start_failed(result)
    # the owner's own words, not "exit status 1" and a pointer to an empty log
    assert "[Errno 28] No space left on device" in line, line
    assert not (home / "daemon.json").exists()


def test_the_owners_reason_reaches_the_cli_when_the_log_keeps_nothing(tmp_path, run_cli):
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "daemon.log").symlink_to(os.devnull)  # writes vanish, reads are empty
    (home / "config.yaml").write_text("model: {provider: opnai}\n")
    line = assert_start_failed(run_cli(home, "chat", "-Q", "-q", "hi", cwd=tmp_path))
    assert "invalid configuration" in line and "`model.provider` must be custom, openai or demo" in line, line

    # a crash before the owner could say anything itself: the last of what it printed
    (home / "config.yaml").write_text("{}\n")
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "httpx.py").write_text("raise ImportError('httpx is broken on this machine')\n")
    from harness import clean_env

    env = clean_env(home, PYTHONPATH=str(shadow))
    line = assert_start_failed(run_cli(home, "chat", "-Q", "-q", "hi", env=env, cwd=tmp_path))
    assert line.endswith("ImportError: httpx is broken on this machine"), line


def test_a_start_failure_still_lands_in_the_log(tmp_path, run_cli):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("model: {provider: opnai}\n")
    assert_start_failed(run_cli(home, "chat", "-Q", "-q", "hi", cwd=tmp_path))
    log = (home / "logs" / "daemon.log").read_text()
    assert "`model.provider` must be custom, openai or demo" in log, log


async def test_an_owner_that_starts_writes_its_later_stderr_to_the_log(tmp_path, run_cli,
                                                                       reap_owners):
    """Once the owner serves, the client stops reading its stderr: the owner must
    not be left writing into a pipe nobody reads."""
    from clihelp import owner_pid, pid_alive
    from harness import until

    home = tmp_path / "home"
    reap_owners(home)
    started = run_cli(home, "serve", cwd=tmp_path)
    assert started.returncode == 0, started
    pid = owner_pid(home)
    log = home / "logs" / "daemon.log"
    await until(lambda: Path(os.readlink(f"/proc/{pid}/fd/2")) == log, "stderr on the log")
    assert pid_alive(pid)


def test_a_misspelled_config_key_stops_the_owner_and_the_cli_names_it(tmp_path, run_cli):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.yaml").write_text("model:\n  provider: custom\n  baseurl: http://x/v1\n",
                                      encoding="utf-8")
    line = assert_start_failed(run_cli(home, "chat", "-Q", "-q", "hi"))
    assert "unknown key `model.baseurl`; did you mean `base_url`?" in line, line
