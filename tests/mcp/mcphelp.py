"""Helpers of the MCP tests: a real owner with MCP servers and a scripted model."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, clean_env, write_config
from toolscript import ScriptedModel

DEMO = str(Path(__file__).resolve().parent / "mcpdemo.py")


def stdio_server(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [DEMO], **extra}


@contextlib.asynccontextmanager
async def owner(tmp_path: Path, model: ScriptedModel, servers: dict[str, Any],
                approvals: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> AsyncIterator[tuple[Path, Peer, str]]:
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    with FakeProvider(model) as provider:
        write_config(home, provider.url, mcp={"servers": servers},
                     approvals=approvals or {"mode": "auto"})
        with OwnerProcess(home, env=clean_env(home, **(env or {}))):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                yield home, peer, sid


async def turn(peer: Peer, sid: str, text: str, input_id: str, **kw: Any) -> dict[str, Any]:
    r = await peer.result("prompt.submit", session_id=sid, input_id=input_id, text=text, **kw)
    done = await peer.wait_terminal(sid, r["admission_id"], timeout=60)
    assert done["outcome"] == "completed", done
    return done


def offered(model: ScriptedModel, prompt: str) -> dict[str, dict[str, Any]]:
    """The tools (name → function schema) of the model's last request for ``prompt``."""
    req = [r for r in model.requests
           if [m for m in r["messages"] if m["role"] == "user"][-1]["content"].startswith(prompt)]
    return {t["function"]["name"]: t["function"] for t in req[-1].get("tools") or []}
