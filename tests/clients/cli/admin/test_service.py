"""`tether service install | uninstall | status`: the systemd unit and launchd agent as
text, installing into a temporary XDG_CONFIG_HOME, and the owner they run.

There is no user systemd on the machines this suite runs on, so where a test needs
``systemctl --user`` to answer, a stand-in script on PATH plays it: it records its
arguments and, for ``enable --now`` / ``disable --now``, starts and stops the real
owner with the real CLI as systemd would run the unit's command.
"""

from __future__ import annotations

import os
import plistlib
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from clihelp import CLI
from harness import clean_env

SYSTEMCTL_UNUSABLE = """#!/bin/sh
echo "Failed to connect to bus: No medium found" >&2
exit 1
"""

# answers like a user manager; `enable --now` runs the unit's owner, detached
SYSTEMCTL_STANDIN = """#!/bin/sh
echo "$@" >> "$STANDIN_LOG"
case "$*" in
  "--user show-environment") echo "HOME=$HOME" ;;
  "--user enable --now "*) "$STANDIN_TETHER" serve --home "$STANDIN_HOME" >/dev/null ;;
  "--user disable --now "*) "$STANDIN_TETHER" stop --home "$STANDIN_HOME" >/dev/null ;;
  "--user is-enabled "*) echo enabled ;;
  "--user is-active "*) echo active ;;
esac
exit 0
"""


def _env(tmp_path: Path, home: Path, systemctl: str, **extra: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "systemctl"
    script.write_text(systemctl)
    script.chmod(0o755)
    env = clean_env(home, HOME=str(tmp_path / "user"), XDG_CONFIG_HOME=str(tmp_path / "xdg"),
                    PATH=f"{bin_dir}:{os.environ['PATH']}", USER="alice", **extra)
    env.pop("XDG_DATA_HOME", None)
    env.pop("TETHER_HOME", None)
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "service", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False, stdin=subprocess.DEVNULL)


def test_dry_run_prints_the_systemd_unit_and_writes_nothing(tmp_path):
    default = tmp_path / "user" / ".local" / "share" / "tether"
    other = tmp_path / "my 100% home"
    env = _env(tmp_path, default, SYSTEMCTL_UNUSABLE)
    plain = _cli(env, "install", "--dry-run", "--platform", "systemd", "--home", str(default))
    hashed = _cli(env, "install", "--dry-run", "--platform", "systemd", "--home", str(other),
                  "--tcp", "127.0.0.1:8765")
    assert plain.returncode == 0 and hashed.returncode == 0, (plain.stderr, hashed.stderr)
    units = tmp_path / "xdg" / "systemd" / "user"
    first = plain.stdout.splitlines()
    # the default home's unit is tether.service; another home's is named by its path
    assert first[0] == f"# {units / 'tether.service'}"
    name = hashed.stdout.splitlines()[0].rsplit("/", 1)[1]
    assert name.startswith("tether-") and name.endswith(".service") and len(name) == 23
    tether = Path(sys.executable).with_name("tether")
    assert f"ExecStart={tether} serve --foreground --home {default}" in first
    assert (f'ExecStart={tether} serve --foreground --home "{tmp_path}/my 100%% home" --tcp '
            "127.0.0.1:8765") in hashed.stdout.splitlines()
    for line in ("Restart=on-failure", "RestartPreventExitStatus=2 3",
                 "WantedBy=default.target", "[Install]"):
        assert line in first
    assert first[-1] == ("# then: systemctl --user daemon-reload && systemctl --user enable "
                         "--now tether.service")
    assert not (tmp_path / "xdg").exists()


def test_dry_run_prints_the_launchd_agent(tmp_path):
    home = tmp_path / "home"
    env = _env(tmp_path, home, SYSTEMCTL_UNUSABLE)
    done = _cli(env, "install", "--dry-run", "--platform", "launchd", "--home", str(home),
                "--store", "postgresql://db.internal/tether")
    assert done.returncode == 0, done.stderr
    head, _, rest = done.stdout.partition("\n")
    body, _, then = rest.rpartition("# then: ")
    label = head.rsplit("/", 1)[1].removesuffix(".plist")
    assert head == f"# {tmp_path}/user/Library/LaunchAgents/{label}.plist"
    assert label.startswith("dev.tether.owner-")
    agent = plistlib.loads(body.encode())
    assert agent["Label"] == label
    assert agent["ProgramArguments"] == [
        str(Path(sys.executable).with_name("tether")), "serve", "--foreground", "--home",
        str(home), "--store", "postgresql://db.internal/tether"]
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["StandardErrorPath"] == str(home / "logs" / "service.log")
    assert then.strip() == (f"launchctl bootstrap gui/{os.getuid()} "
                            f"{tmp_path}/user/Library/LaunchAgents/{label}.plist")
    assert not (tmp_path / "user" / "Library").exists()


def test_without_a_user_manager_install_writes_the_unit_and_says_how_to_enable_it(tmp_path):
    home = tmp_path / "home"
    env = _env(tmp_path, home, SYSTEMCTL_UNUSABLE)
    missing = _cli(env, "status", "--platform", "systemd", "--home", str(home))
    assert missing.returncode == 1 and "— not installed" in missing.stdout

    done = _cli(env, "install", "--platform", "systemd", "--home", str(home))
    assert done.returncode == 0, done.stderr
    [unit] = (tmp_path / "xdg" / "systemd" / "user").iterdir()
    assert done.stdout.strip() == f"tether: wrote {unit}"
    assert stat.S_IMODE(unit.stat().st_mode) == 0o600
    assert "systemctl --user cannot reach a user service manager (Failed to connect to bus" \
        in done.stderr
    assert "written but not enabled" in done.stderr
    assert f"systemctl --user enable --now {unit.name}" in done.stderr
    assert "loginctl enable-linger alice" in done.stderr
    assert f"--home {home}" in unit.read_text()

    status = _cli(env, "status", "--platform", "systemd", "--home", str(home))
    assert status.returncode == 0, status.stderr
    lines = dict(line.split(None, 1) for line in status.stdout.splitlines())
    assert lines["file"] == str(unit)
    assert lines["runs"].endswith(f"serve --foreground --home {home}")
    assert lines["manager"].startswith("unavailable: systemctl --user cannot reach")
    assert lines["owner"] == "not running"

    gone = _cli(env, "uninstall", "--platform", "systemd", "--home", str(home))
    assert gone.returncode == 0, gone.stderr
    assert not unit.exists() and f"removed {unit}" in gone.stdout
    again = _cli(env, "uninstall", "--platform", "systemd", "--home", str(home))
    assert again.returncode == 0 and "no service is installed" in again.stdout


def test_with_a_user_manager_install_enables_and_starts_it_and_stop_is_clean(tmp_path):
    home = tmp_path / "home"
    log = tmp_path / "systemctl.log"
    env = _env(tmp_path, home, SYSTEMCTL_STANDIN, STANDIN_LOG=str(log), STANDIN_HOME=str(home),
               STANDIN_TETHER=str(Path(sys.executable).with_name("tether")))
    try:
        done = _cli(env, "install", "--platform", "systemd", "--home", str(home))
        assert done.returncode == 0, done.stderr
        assert "is enabled and its owner runs (pid " in done.stdout
        name = next((tmp_path / "xdg" / "systemd" / "user").iterdir()).name
        assert log.read_text().splitlines() == [
            "--user show-environment", "--user daemon-reload", f"--user enable --now {name}"]
        status = _cli(env, "status", "--platform", "systemd", "--home", str(home))
        assert "manager   systemd: enabled, active" in status.stdout
        assert "owner     running (pid " in status.stdout

        # installing again beside the running owner only enables it for the next login
        again = _cli(env, "install", "--platform", "systemd", "--home", str(home))
        assert again.returncode == 0, again.stderr
        assert "an owner already runs for" in again.stdout and "tether stop &&" in again.stdout
        assert log.read_text().splitlines()[-1] == f"--user enable {name}"

        gone = _cli(env, "uninstall", "--platform", "systemd", "--home", str(home))
        assert gone.returncode == 0, gone.stderr
        assert log.read_text().splitlines()[-2:] == [f"--user disable --now {name}",
                                                      "--user daemon-reload"]
        assert "the owner it ran was stopped" in gone.stdout
        assert not (home / "daemon.json").exists()
    finally:
        subprocess.run([*CLI, "stop"], env=clean_env(home), capture_output=True, timeout=90,
                       check=False)


def test_the_foreground_owner_exits_0_on_tether_stop_and_on_sigterm(tmp_path):
    """What Restart=on-failure and KeepAlive/SuccessfulExit rely on: a stop is a success."""
    home = tmp_path / "home"
    env = clean_env(home)
    for how in ("tether stop", "SIGTERM"):
        owner = subprocess.Popen([*CLI, "serve", "--foreground", "--home", str(home)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (home / "daemon.json").exists():
                assert owner.poll() is None and time.monotonic() < deadline, "owner never served"
                time.sleep(0.05)
            if how == "tether stop":
                stop = subprocess.run([*CLI, "stop"], env=env, capture_output=True, text=True,
                                      timeout=90, check=False)
                assert stop.returncode == 0, stop.stderr
            else:
                owner.send_signal(signal.SIGTERM)
            assert owner.wait(timeout=60) == 0, how
        finally:
            if owner.poll() is None:
                owner.kill()
                owner.wait()
