"""`tether acp` sends the context window's fill and the session's cost (ACP
``usage_update``) after each turn and on session/load, from what the owner reports:
the last request's tokens (or the owner's own count when the model server reports
none), the configured window and the priced cost; over a real owner and a fake model."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from acp import spawn_agent_process, text_block
from fakeprovider import FakeProvider, Message, prompt_of
from harness import Peer, clean_env, write_config

WINDOW = 100_000
#: USD per million tokens
PRICES = {"test-model": {"input": 3.0, "output": 15.0}}


class Editor:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    def usage(self) -> list[Any]:
        return [u for u in self.updates if u.session_update == "usage_update"]


@contextlib.asynccontextmanager
async def adapter(home: Path, editor: Editor) -> AsyncIterator[Any]:
    async with spawn_agent_process(editor, sys.executable, "-m", "tether.clients.cli", "acp",
                                   env=clean_env(home),
                                   transport_kwargs={"stderr": None}) as (conn, proc):
        await asyncio.wait_for(conn.initialize(protocol_version=1), 60)
        yield conn


def model(req: dict) -> Message:
    """Reports 1,200 prompt and 34 answer tokens; nothing at all for "quiet"."""
    answer = {"role": "assistant", "content": "an answer"}
    if prompt_of(req).startswith("quiet"):
        return Message(answer, usage={})
    return Message(answer, usage={"prompt_tokens": 1200, "completion_tokens": 34,
                                  "total_tokens": 1234})


async def until_usage(editor: Editor, count: int) -> list[Any]:
    for _ in range(600):
        if len(editor.usage()) >= count:
            return editor.usage()
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(editor.usage())} usage updates, wanted {count}")


async def test_the_context_window_s_fill_and_the_cost_reach_the_editor(tmp_path, reap_owners):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    with FakeProvider(model) as provider:
        write_config(home, provider.url, model={"context_window": WINDOW, "prices": PRICES})
        reap_owners(home)
        editor = Editor()
        async with adapter(home, editor) as conn:
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            for text in ("one", "two"):
                await asyncio.wait_for(conn.prompt(session_id=sid,
                                                   prompt=[text_block(text)]), 60)
            after_two = await until_usage(editor, 2)
        reopened = Editor()
        async with adapter(home, reopened) as conn:
            await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            loaded = await until_usage(reopened, 1)
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("quiet")]),
                                   60)
            quiet = (await until_usage(reopened, 2))[-1]
        async with await Peer.connect(home) as peer:
            info = (await peer.result("session.resume", session_id=sid))["info"]
    one_turn = (1200 * 3.0 + 34 * 15.0) / 1e6
    first, second = after_two
    assert (first.used, first.size) == (1234, WINDOW)
    assert first.cost.currency == "USD" and abs(first.cost.amount - one_turn) < 1e-12
    assert (second.used, second.size) == (1234, WINDOW)
    assert abs(second.cost.amount - 2 * one_turn) < 1e-12  # the session's, summed
    # a session opened again starts from the same figures
    [again] = loaded
    assert (again.used, again.size) == (1234, WINDOW)
    assert abs(again.cost.amount - 2 * one_turn) < 1e-12
    # a server that reports no usage: the owner's own count of what the context holds
    assert quiet.size == WINDOW and quiet.used > 0 and quiet.used != 1234
    assert abs(quiet.cost.amount - 2 * one_turn) < 1e-12
    assert info["context"] == {"used": quiet.used, "window": WINDOW, "estimated": True}
    assert abs(info["usage"]["cost_usd"] - 2 * one_turn) < 1e-12
