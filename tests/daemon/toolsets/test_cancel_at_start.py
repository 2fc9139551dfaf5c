"""A turn stopped while its command is being started (the stop lands within
milliseconds of the tool call) takes the command with it: the stop does not
hang, and no process of the command is left running, the sandbox's own
included (daemon/toolsets/launch.py's ``spawn``)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from harness import sandbox_missing

from tether.daemon.config.core import SandboxConfig
from tether.daemon.toolsets import launch
from tether.daemon.toolsets.sandbox import Sandbox, probe
from tether.daemon.toolsets.terminal import _foreground

pytestmark = pytest.mark.skipif(sandbox_missing() is not None,
                                reason=f"no sandbox can be made here: {sandbox_missing()}")


def _marked(tag: bytes) -> list[int]:
    """Processes whose environment carries a command token and ``tag``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if launch.TOKEN_ENV.encode() + b"=" in env and tag in env:
            found.append(int(name))
    return found


@pytest.mark.parametrize("delay", [0.0, 0.001, 0.005, 0.05])
async def test_a_command_cancelled_as_it_starts_is_ended_with_everything_it_started(
        tmp_path: Path, delay: float):
    run_id = f"cancel-{os.getpid()}-{delay}"
    tag = f"TETHER_TEST_RUN={run_id}".encode()
    sandbox = Sandbox(SandboxConfig(), probe(), home=tmp_path / "home")
    sandbox.env["TETHER_TEST_RUN"] = run_id  # this test's commands, told apart
    work = str(tmp_path)
    for _ in range(3):
        run = asyncio.create_task(_foreground(sandbox, "sleep 30", work, work,
                                              "workspace-write", 60, 1000))
        await asyncio.sleep(delay)
        run.cancel()
        # the stop returns at once, whatever the command was doing
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 10)
    deadline = time.monotonic() + 10
    while left := _marked(tag):
        assert time.monotonic() < deadline, f"processes of the command left running: {left}"
        await asyncio.sleep(0.05)
