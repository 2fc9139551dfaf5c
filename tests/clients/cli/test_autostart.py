"""The fresh-user path: no owner, no config — `tether chat` starts one and the demo answers.

Also the owner lifecycle commands: the autostarted owner outlives the CLI and
is reused; `tether stop` ends it and cleans up; `tether status` then exits 3;
`tether serve` refuses a second owner, naming the first one's pid.
"""

from __future__ import annotations

from clihelp import owner_pid, pid_alive
from harness import clean_env


def test_chat_autostarts_the_demo_owner_and_stop_ends_it(tmp_path, run_cli, reap_owners):
    home = tmp_path / "home"
    reap_owners(home)
    env = clean_env(home)

    first = run_cli(home, "chat", "-Q", "-q", "Plan a picnic for four", env=env)
    assert first.returncode == 0, first
    assert "[demo provider]" in first.stdout
    assert "The helpers reported back (2 tasks)" in first.stdout  # two children, joined
    assert first.stderr == ""
    pid = owner_pid(home)
    assert pid_alive(pid), "the owner keeps running after the CLI exits"

    second = run_cli(home, "chat", "-Q", "-q", "hi", env=env)
    assert second.returncode == 0, second
    assert owner_pid(home) == pid, "a second chat reuses the running owner"

    status = run_cli(home, "status", env=env)
    assert status.returncode == 0 and f"pid           {pid}" in status.stdout, status

    stopped = run_cli(home, "stop", env=env)
    assert stopped.returncode == 0, stopped
    assert not pid_alive(pid)
    assert not (home / "daemon.json").exists() and not (home / "daemon.sock").exists()

    after = run_cli(home, "status", env=env)
    assert after.returncode == 3, after
    assert after.stderr.startswith("tether: not_running:") and "hint:" in after.stderr


def test_serve_detached_refuses_a_second_owner(tmp_path, run_cli, reap_owners):
    home = tmp_path / "home"
    reap_owners(home)
    started = run_cli(home, "--home", str(home), "serve")
    assert started.returncode == 0, started
    pid = owner_pid(home)
    assert pid_alive(pid) and f"pid {pid}" in started.stdout

    again = run_cli(home, "serve", "--home", str(home))
    assert again.returncode == 3, again
    assert f"pid {pid}" in again.stderr and "hint:" in again.stderr

    assert run_cli(home, "stop", "--home", str(home)).returncode == 0
    assert not pid_alive(pid)
