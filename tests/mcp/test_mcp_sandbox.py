"""A stdio MCP server runs in the sandbox: it cannot read the owner's config.yaml
nor write outside a directory of its own (its HOME), but reaches the network; a
server with ``sandbox: false`` (the user's escalation) runs as the owner's user."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from harness import sandbox_missing
from mcphelp import owner, stdio_server, turn
from toolscript import ScriptedModel, tool_results


@pytest.fixture
def outside() -> object:
    """A directory the test's user may write, outside /tmp (which every sandbox has
    its own of) and outside the owner's home."""
    where = Path(tempfile.mkdtemp(prefix="tether-mcp-", dir=Path.home()))
    yield where
    shutil.rmtree(where, ignore_errors=True)


async def test_a_sandboxed_server_reads_nothing_of_the_owner_and_writes_only_its_state(
        tmp_path, outside):
    why = sandbox_missing()
    if why:
        pytest.skip(why)
    home = tmp_path / "home"
    config, escape = str(home / "config.yaml"), str(outside / "escape.txt")
    probe = {"read": [config], "write": [escape, "~/cache.txt"]}
    model = ScriptedModel({"reach": [("mcp__boxed__reach", probe)],
                           "free": [("mcp__free__reach", probe)]})
    marker = f"hung-{uuid.uuid4().hex}"  # in the argv of a sandboxed server that never answers
    servers = {"boxed": stdio_server(), "free": {**stdio_server(), "sandbox": False},
               "hung": {"command": sys.executable, "timeout_seconds": 2,
                        "args": ["-c", "import os, pathlib, time; pathlib.Path(os.environ["
                                 "'HOME'], 'started').touch(); time.sleep(120)", marker]}}
    # the subjects name paths outside the workspace: trusted here, not asked about
    approvals = {"mode": "auto", "allow": ["mcp__boxed__*", "mcp__free__*"]}
    async with owner(tmp_path, model, servers, approvals=approvals) as (home, peer, sid):
        await turn(peer, sid, "reach out", "s1")
        boxed_info = {s["name"]: s for s in (await peer.result("mcp.list"))["servers"]}
        boxed_escape = Path(escape).exists()
        # the owner gave up on the hung server: nothing of its sandbox is left running
        deadline = time.monotonic() + 15
        while (left := running(marker)) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await turn(peer, sid, "free to go", "s2")
        listed = {s["name"]: s for s in (await peer.result("mcp.list"))["servers"]}
    [boxed] = tool_results(model, "reach")
    [free] = tool_results(model, "free")
    import json

    b, f = json.loads(boxed["content"]), json.loads(free["content"])
    state = home / "mcp-state" / "boxed"
    # the owner's home is not there; a write outside the state directory is refused
    assert b[f"read {config}"] == "FileNotFoundError"
    assert b[f"write {escape}"] in ("OSError", "PermissionError") and not boxed_escape
    # its HOME is its own directory, which it can write, and which the owner keeps
    assert b["HOME"] == str(state) and b["write ~/cache.txt"] == "ok"
    assert (state / "cache.txt").read_text().startswith("written by ")
    assert boxed_info["boxed"]["sandbox"].startswith("sandboxed, network on")
    # sandbox: false is the user's escalation: that server reads and writes as the owner
    assert f[f"read {config}"].startswith("ok: ") and f[f"write {escape}"] == "ok"
    assert f["HOME"] != str(state)
    assert listed["free"]["sandbox"].startswith("none — mcp.servers.free.sandbox is false")
    # it did not start within its 2 s: failed, or (its first backoff is 1 s, and the
    # turn asked for the tools again after that) already being tried again
    hung = boxed_info["hung"]
    assert "within 2 s" in hung["error"]
    assert hung["state"] == "failed" or (hung["state"] == "starting" and hung["starts"] >= 2)
    assert (home / "mcp-state" / "hung" / "started").exists() and not left, left


def running(marker: str) -> list[str]:
    """The processes whose command line holds ``marker``."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in line:
                out.append(f"{proc.name}: {line}")
    return out
