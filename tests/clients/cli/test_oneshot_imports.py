"""The one-shot commands run on the blocking client (clients/library/blocking.py):
against a running owner, `tether chat --oneshot`, `status` and `sessions` load
neither asyncio, nor websockets (nor importlib.metadata, which it loads), nor orjson,
and still print what they did on the asyncio client."""

import re
import subprocess
import sys

from harness import OwnerProcess, clean_env

HEAVY = ("asyncio", "websockets", "importlib.metadata", "orjson")


def _imported(log: str) -> set[str]:
    return {name for name in HEAVY
            if re.search(rf"\|\s+{re.escape(name)}(\.|$)", log, re.MULTILINE)}


def _run(home, *args):
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "tether.clients.cli",
                           *args, "--home", str(home)], env=clean_env(home),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False)


def test_one_shot_commands_load_no_event_loop_websockets_or_orjson(tmp_path):
    home = tmp_path / "home"
    with OwnerProcess(home, env=clean_env(home)):
        chat = _run(home, "chat", "--oneshot", "-q", "hello")
        status = _run(home, "status")
        listed = _run(home, "sessions")
    assert chat.returncode == 0, chat.stderr[-2000:]
    assert "hello" in chat.stdout
    assert status.returncode == 0 and status.stdout.startswith("owner running for ")
    assert listed.returncode == 0 and "hello" in listed.stdout
    for result in (chat, status, listed):
        assert _imported(result.stderr) == set(), result.args
