"""`tether mcp add | list | tools | rm` and `tether doctor`'s MCP lines, with the real CLI,
an owner it starts, and an MCP server written with the `mcp` package."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from harness import write_config

from tether.daemon.toolsets.sandbox import probe

DEMO = str(Path(__file__).resolve().parents[3] / "mcp" / "mcpdemo.py")


def test_add_list_tools_doctor_rm(tmp_path, run_cli, reap_owners):
    home = tmp_path / "home"
    write_config(home, None, approvals={"mode": "ask"})
    reap_owners(home)
    added = run_cli(home, "mcp", "add", "demo", "--env", "DEMO_SECRET=${X}", "--",
                    sys.executable, DEMO)
    assert added.returncode == 0, added.stderr
    cfg = yaml.safe_load((home / "config.yaml").read_text())
    assert cfg["mcp"]["servers"]["demo"] == {"command": sys.executable, "args": [DEMO],
                                             "env": {"DEMO_SECRET": "${X}"}}
    assert cfg["approvals"] == {"mode": "ask"}  # the rest of the file is kept
    broken = run_cli(home, "mcp", "add", "broken", "--", sys.executable, "-c",
                     "import sys; sys.exit('cannot start: missing token')")
    assert broken.returncode == 0, broken.stderr
    own = run_cli(home, "mcp", "add", "own", "--no-sandbox", "--no-network", "--", "srv")
    assert own.returncode == 0, own.stderr
    assert yaml.safe_load((home / "config.yaml").read_text())["mcp"]["servers"]["own"] == {
        "command": "srv", "sandbox": False, "network": False}
    assert run_cli(home, "mcp", "rm", "own").returncode == 0
    # bad input: refused, and config.yaml is unchanged
    before = (home / "config.yaml").read_text()
    both = run_cli(home, "mcp", "add", "x", "--url", "http://127.0.0.1:9/mcp", "--", "cmd")
    bad_url = run_cli(home, "mcp", "add", "y", "--url", "ftp://example.com")
    bad_name = run_cli(home, "mcp", "add", "a__b", "--", "cmd")
    url_box = run_cli(home, "mcp", "add", "z", "--no-sandbox", "--url", "http://127.0.0.1:9/")
    again = run_cli(home, "mcp", "add", "demo", "--", "cmd")
    assert [r.returncode for r in (both, bad_url, bad_name, again, url_box)] == [2] * 5
    assert "url" in bad_url.stderr and "already configured" in again.stderr
    assert (home / "config.yaml").read_text() == before

    listed = run_cli(home, "mcp", "list")  # starts the owner, but no MCP server
    assert listed.returncode == 0, listed.stderr
    assert "demo" in listed.stdout and "idle" in listed.stdout
    tools = run_cli(home, "mcp", "tools", "demo")
    assert tools.returncode == 0, tools.stderr
    assert "ready" in tools.stdout and "mcp__demo__add: Add two integers." in tools.stdout
    failed = run_cli(home, "mcp", "tools", "broken")
    assert failed.returncode == 1 and "cannot start: missing token" in failed.stdout
    unknown = run_cli(home, "mcp", "tools", "nope")
    assert unknown.returncode == 2 and "no MCP server 'nope'" in unknown.stderr
    doctor = run_cli(home, "doctor")
    lines = {line.split()[1]: line for line in doctor.stdout.splitlines()
             if len(line.split()) > 1 and line.split()[1].startswith("mcp:")}
    assert "ready, 9 tools" in lines["mcp:demo"]
    if probe().ok:  # a stdio server runs in the sandbox, and both say so
        assert "sandboxed, network on" in lines["mcp:demo"]
        assert "runs in: sandboxed, network on" in tools.stdout
    assert lines["mcp:broken"].startswith("FAIL") and "missing token" in lines["mcp:broken"]
    assert doctor.returncode == 1

    removed = run_cli(home, "mcp", "rm", "broken")
    assert removed.returncode == 0 and "tether stop" in removed.stdout
    assert list(yaml.safe_load((home / "config.yaml").read_text())["mcp"]["servers"]) == [
        "demo"]
    missing = run_cli(home, "mcp", "rm", "broken")
    assert missing.returncode == 1 and "no MCP server 'broken'" in missing.stderr
