"""Fixtures for the client suites: run the real `tether` CLI as a subprocess, reap owners.

The CLI runs as ``python -m tether.clients.cli`` (what the console script calls)
with stdin from /dev/null unless a test says otherwise, so it is never attached
to the test runner's terminal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# this folder's helper module (clihelp) importable by name, as tests/ is for harness
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from clihelp import CLI, stop_owner_of  # noqa: E402
from harness import clean_env  # noqa: E402


@pytest.fixture
def reap_owners():
    """Register homes whose autostarted owners must be stopped after the test."""
    homes: list[Path] = []
    yield homes.append
    for home in homes:
        stop_owner_of(home)


@pytest.fixture
def run_cli():
    """``run_cli(home, *args, env=..., stdin=..., timeout=...)`` → CompletedProcess (text)."""

    def run(home: Path, *args: str, env: dict[str, str] | None = None,
            stdin: int | None = subprocess.DEVNULL, input: str | None = None,  # noqa: A002
            timeout: float = 60, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], env=env or clean_env(home), cwd=cwd or home.parent,
            stdin=None if input is not None else stdin, input=input, capture_output=True,
            text=True, encoding="utf-8", timeout=timeout, check=False)

    return run
