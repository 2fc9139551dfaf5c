"""The sandbox's parts: modes, the hint of a refusal, credential files, and the
layouts where the owner's home and the working directory hold one another
(each run through the real bubblewrap where it is installed)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

import pytest
from harness import sandbox_missing

from tether.daemon.config.core import ConfigError, SandboxConfig, build_config
from tether.daemon.config.turn import check_turn_options
from tether.daemon.toolsets.sandbox import (
    NONE,
    Probe,
    Sandbox,
    clamp,
    probe,
    refusal,
    store_credentials,
)
from tether.rpc.errors import InvalidParams

needs_bwrap = pytest.mark.skipif(sandbox_missing() is not None,
                                 reason=f"no sandbox can be made here: {sandbox_missing()}")


def test_a_turn_may_make_the_sandbox_stricter_never_looser():
    assert clamp("workspace-write", None) == "workspace-write"
    assert clamp("workspace-write", "read-only") == "read-only"
    assert clamp("workspace-write", "off") == "workspace-write"
    assert clamp("off", "workspace-write") == "workspace-write"
    assert clamp("read-only", "workspace-write") == "read-only"
    check_turn_options(None, None, None, "read-only", "workspace-write")
    check_turn_options(None, None, None, "off", "off")
    with pytest.raises(InvalidParams, match="sandbox workspace-write is looser"):
        check_turn_options(None, None, None, "workspace-write", "read-only")


def test_the_sandbox_section_of_the_configuration():
    assert build_config({}, {}).sandbox == SandboxConfig("workspace-write", False, ())
    # YAML reads a bare `off` as false
    assert build_config({"sandbox": {"mode": False}}, {}).sandbox.mode == "off"
    cfg = build_config({"sandbox": {"network": True, "env_allow": ["CARGO_HOME", "NPM_*"]}}, {})
    assert cfg.sandbox.network is True and cfg.sandbox.env_allow == ("CARGO_HOME", "NPM_*")
    with pytest.raises(ConfigError, match="must be workspace-write, read-only or off"):
        build_config({"sandbox": {"mode": "strict"}}, {})
    with pytest.raises(ConfigError, match="takes variable names"):
        build_config({"sandbox": {"env_allow": ["A=B"]}}, {})
    with pytest.raises(ConfigError, match="did you mean `network`"):
        build_config({"sandbox": {"netwrok": True}}, {})


def test_a_refusal_is_named_only_when_the_sandbox_made_it():
    cwd = "/srv/project"
    ro = "touch: cannot touch '/etc/x': Read-only file system\n"
    hint = refusal("workspace-write", False, 1, ro, cwd)
    assert hint is not None and "refused a write outside the working directory /srv/project" \
        in hint and "escalate: true" in hint
    assert "read-only: nothing may be written" in (refusal("read-only", False, 1, ro, cwd) or "")
    denied = "sh: 1: cannot create /var/lib/x: Permission denied\n"
    assert refusal("workspace-write", False, 2, denied, cwd) is not None
    inside = f"sh: 1: cannot create {cwd}/x: Permission denied\n"
    assert refusal("workspace-write", False, 2, inside, cwd) is None  # not the sandbox
    net = "curl: (6) Could not resolve host: example.com\n"
    assert "network" in (refusal("workspace-write", False, 6, net, cwd) or "")
    assert refusal("workspace-write", True, 6, net, cwd) is None  # the network was on
    assert refusal("workspace-write", False, 0, ro, cwd) is None  # it succeeded
    assert refusal(NONE, False, 1, ro, cwd) is None  # no sandbox, no hint


def test_the_credential_files_of_the_store():
    env = {"HOME": "/home/u"}
    assert store_credentials(None, env) == ["/home/u/.pgpass",
                                            "/home/u/.postgresql/postgresql.key"]
    env = {"HOME": "/home/u", "PGPASSFILE": "/etc/pg/pass", "PGSSLKEY": "/etc/pg/key"}
    found = store_credentials("postgresql://db/x?passfile=/srv/p&sslkey=/srv/k", env)
    assert found == ["/etc/pg/pass", "/etc/pg/key", "/srv/p", "/srv/k"]


def test_without_bwrap_on_path_there_is_no_sandbox_and_commands_run_plain(tmp_path):
    found = probe(str(tmp_path))  # a PATH with no bwrap on it
    assert not found.ok and found.why == "bwrap not found"
    box = Sandbox(SandboxConfig(), found, home=tmp_path / "home")
    assert box.boundary() == NONE and box.boundary("read-only") == NONE
    assert box.argv("echo hi", str(tmp_path), NONE, workspace=str(tmp_path)) == [
        "/bin/sh", "-c", "echo hi"]
    assert box.describe().startswith("none — bwrap not found; ")
    assert Sandbox(SandboxConfig(mode="off"), Probe("/usr/bin/bwrap", "bubblewrap 0.8.0"),
                   home=tmp_path).boundary() == NONE


def _run(box: Sandbox, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(box.argv(command, str(cwd), "workspace-write", workspace=str(cwd)),
                          env=box.env,
                          cwd=cwd, capture_output=True, text=True, timeout=30, check=False)


@needs_bwrap
@pytest.mark.parametrize("layout", ["cwd-in-home", "home-in-cwd", "cwd-is-home"])
def test_the_home_stays_hidden_and_the_cwd_usable_whichever_holds_the_other(layout):
    import tempfile

    # outside /tmp, which the sandbox replaces with a private one anyway
    base = Path(tempfile.mkdtemp(prefix="tether-sandbox-unit-", dir="/var/tmp"))
    try:
        home = base / "home" if layout != "home-in-cwd" else base / "proj" / ".tether"
        cwd = {"cwd-in-home": home / "work", "home-in-cwd": base / "proj",
               "cwd-is-home": home}[layout]
        for d in (home / "logs", cwd):
            d.mkdir(parents=True, exist_ok=True)
        (home / "config.yaml").write_text("api_key: sk-in-config\n")
        (home / "logs" / "owner.log").write_text("logged sk-in-log\n")
        pgpass = cwd / ".pgpass"
        pgpass.write_text("db:5432:*:u:pg-secret\n")
        box = Sandbox(SandboxConfig(), probe(), home=home, hidden_files=[str(pgpass)],
                      environ={"PATH": "/usr/bin:/bin"})
        done = _run(box, f"cat {home}/config.yaml {home}/logs/owner.log .pgpass; "
                         "echo written > made && cat made", cwd)
        assert "sk-in" not in done.stdout and "pg-secret" not in done.stdout, done
        assert done.stdout.endswith("written\n") and (cwd / "made").exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_bwrap
def test_a_workspace_of_the_whole_tree_leaves_nothing_writable(tmp_path):
    box = Sandbox(SandboxConfig(), probe(), home=tmp_path / "home",
                  environ={"PATH": "/usr/bin:/bin"})
    argv = box.argv("touch /var/tmp/tether-never-made-$$ || echo REFUSED", "/",
                    "workspace-write", workspace="/")
    done = subprocess.run(argv, env=box.env, capture_output=True, text=True, timeout=30,
                          check=False)
    assert "REFUSED" in done.stdout and "Read-only file system" in done.stderr, done


@needs_bwrap
def test_with_sandbox_network_true_a_command_reaches_the_network(tmp_path):
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    got: list[bytes] = []

    def accept() -> None:
        srv.settimeout(20)
        with contextlib.suppress(OSError):
            conn, _ = srv.accept()
            with conn:
                got.append(conn.recv(10))

    t = threading.Thread(target=accept)
    t.start()
    box = Sandbox(SandboxConfig(network=True), probe(), home=tmp_path / "home",
                  environ={"PATH": "/usr/bin:/bin"})
    try:
        done = _run(box, f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
                         f"{port})).sendall(b'hi')\"", tmp_path)
    finally:
        t.join(25)
        srv.close()
    assert done.returncode == 0 and got == [b"hi"], done
    assert box.describe().endswith(", workspace-write, network on")


@needs_bwrap
@pytest.mark.parametrize("network", [True, False])
def test_a_server_sees_no_home_writes_only_its_state_and_has_the_network_it_is_given(
        network):
    import socket
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="tether-sandbox-server-", dir="/var/tmp"))
    srv = socket.create_server(("127.0.0.1", 0))
    try:
        home, elsewhere = base / "home", base / "elsewhere"
        elsewhere.mkdir()
        home.mkdir()
        (home / "config.yaml").write_text("api_key: sk-in-config\n")
        state = home / "mcp-state" / "srv"
        box = Sandbox(SandboxConfig(), probe(), home=home, environ={"PATH": "/usr/bin:/bin"})
        assert box.serves()
        port = srv.getsockname()[1]
        script = (f"cat {home}/config.yaml; touch {elsewhere}/x || echo NOWRITE; "
                  f"echo mine > {state}/cache && echo WROTE; pwd; python3 -c \"import socket; "
                  f"socket.create_connection(('127.0.0.1', {port}), timeout=5)\" "
                  "&& echo NET || echo NONET")
        argv = box.server_argv(["/bin/sh", "-c", script], state_dir=str(state),
                               network=network, cwd=str(home))
        done = subprocess.run(argv, env=box.env, capture_output=True, text=True, timeout=30,
                              check=False)
        assert "sk-in-config" not in done.stdout and "NOWRITE" in done.stdout, done
        assert not (elsewhere / "x").exists()
        assert "WROTE" in done.stdout and (state / "cache").read_text() == "mine\n"
        assert f"\n{state}\n" in done.stdout  # a cwd the home hides: its own directory
        assert ("NET\n" if network else "NONET\n") in done.stdout, done
    finally:
        srv.close()
        shutil.rmtree(base, ignore_errors=True)
    off = Sandbox(SandboxConfig(mode="off"), probe(), home=base)
    assert not off.serves()
    with pytest.raises(ValueError):
        off.server_argv(["true"], state_dir=str(base / "s"), network=True)


@needs_bwrap
def test_a_server_whose_program_lies_under_tmp_runs_and_still_sees_no_home(tmp_path):
    # a checkout (or virtualenv) under /tmp, the owner's home beside it: the private
    # /tmp shows the server's own files again, read-only, and never the home
    assert str(tmp_path).startswith("/tmp/")
    checkout, home = tmp_path / "checkout", tmp_path / "home"
    checkout.mkdir()
    home.mkdir()
    (home / "config.yaml").write_text("api_key: sk-in-config\n")
    server = checkout / "server.sh"
    server.write_text(f"#!/bin/sh\necho RAN\ncat {home}/config.yaml\n"
                      f"touch {checkout}/w 2>/dev/null || echo READONLY\n")
    server.chmod(0o755)
    box = Sandbox(SandboxConfig(), probe(), home=home, environ={"PATH": "/usr/bin:/bin"})
    argv = box.server_argv([str(server)], state_dir=str(home / "mcp-state" / "s"),
                           network=False, cwd=str(checkout))
    done = subprocess.run(argv, env=box.env, capture_output=True, text=True, timeout=30,
                          check=False)
    assert "RAN" in done.stdout and "READONLY" in done.stdout, done
    assert "sk-in-config" not in done.stdout + done.stderr
    assert not (checkout / "w").exists()
