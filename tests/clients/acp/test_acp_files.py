"""`tether acp` with an editor that offers fs/read_text_file and fs/write_text_file (the
ACP package's own client side, a real owner, a scripted model): the file tools read its
unsaved buffers and write into them, only after the owner's own checks and approval;
an editor that never answers leaves the tools on the disk within the timeout."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from acp import spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from fakeprovider import FakeProvider
from harness import clean_env, write_config
from toolscript import ScriptedModel, tool_results


class BufferEditor:
    """An editor with unsaved buffers: reads answer from them, writes go into them."""

    def __init__(self, buffers: dict[str, str], *, silent: bool = False) -> None:
        self.buffers = buffers
        self.silent = silent  # never answers a file request
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.asked: list[str] = []
        self.order: list[str] = []  # "ask <title>", "write <path>" as they came
        self.answer = "once"

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        return None

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kw: Any) -> RequestPermissionResponse:
        self.asked.append(tool_call.title)
        self.order.append(f"ask {tool_call.title.split(' — ')[0]}")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answer))

    async def read_text_file(self, session_id: str, path: str, **kw: Any
                             ) -> ReadTextFileResponse:
        self.reads.append(path)
        if self.silent:
            await asyncio.sleep(3600)
        return ReadTextFileResponse(content=self.buffers.get(path, Path(path).read_text()))

    async def write_text_file(self, session_id: str, path: str, content: str, **kw: Any
                              ) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.order.append(f"write {Path(path).name}")
        if self.silent:
            await asyncio.sleep(3600)
        self.buffers[path] = content
        return WriteTextFileResponse()


@contextlib.asynccontextmanager
async def adapter(home: Path, editor: BufferEditor) -> AsyncIterator[Any]:
    async with spawn_agent_process(editor, sys.executable, "-m", "tether.clients.cli", "acp",
                                   env=clean_env(home),
                                   transport_kwargs={"stderr": None}) as (conn, proc):
        fs = FileSystemCapabilities(read_text_file=True, write_text_file=True)
        await asyncio.wait_for(conn.initialize(
            protocol_version=1, client_capabilities=ClientCapabilities(fs=fs)), 60)
        yield conn


def setup(tmp_path: Path, provider_url: str, **tools: Any) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "buf.txt").write_text("on disk\n")
    (tmp_path / "outside.txt").write_text("outside on disk\n")
    (work / "link.txt").symlink_to(tmp_path / "outside.txt")
    write_config(home, provider_url, approvals={"mode": "ask"}, tools=tools)
    return home, work


async def ask(conn: Any, sid: str, text: str) -> None:
    done = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(text)]), 60)
    assert done.stop_reason == "end_turn"


async def test_the_tools_read_and_write_the_editor_s_buffers_within_the_boundary(
        tmp_path, reap_owners):
    model = ScriptedModel({
        "read": [("read_file", {"path": "buf.txt"})],
        "edit": [("edit_file", {"path": "buf.txt", "old": "unsaved", "new": "edited"})],
        "write": [("write_file", {"path": "buf.txt", "content": "from the agent\n"})],
        "create": [("write_file", {"path": "new/fresh.txt", "content": "fresh\n"})],
        "outside": [("read_file", {"path": "../outside.txt"})],
        "escape": [("read_file", {"path": "link.txt"})],
        "private": [("read_file", {"path": "../home/config.yaml"})],
        "deny": [("write_file", {"path": "../outside.txt", "content": "overwritten\n"})],
    })
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url)
        reap_owners(home)
        buf = str(work / "buf.txt")
        editor = BufferEditor({buf: "unsaved buffer\n"})
        async with adapter(home, editor) as conn:
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            for text in ("read", "edit", "write", "create", "outside", "escape", "private"):
                await ask(conn, sid, text)
            editor.answer = "deny"
            await ask(conn, sid, "deny")
    [read] = tool_results(model, "read")
    assert "unsaved buffer" in read["content"] and "on disk" not in read["content"]
    # the edit applies to the buffer, is recorded with its diff, and goes to the editor
    [edit] = tool_results(model, "edit")
    assert "-unsaved buffer" in edit["diff"] and "+edited buffer" in edit["diff"]
    assert editor.writes[:2] == [(buf, "edited buffer\n"), (buf, "from the agent\n")]
    assert tool_results(model, "write")[0]["summary"].startswith("wrote ")
    # ACP's write is the editor's: tether does not write the disk as well
    assert (work / "buf.txt").read_text() == "on disk\n"
    assert editor.buffers[buf] == "from the agent\n"
    # a new file is the disk's (the editor writes files that exist)
    assert (work / "new" / "fresh.txt").read_text() == "fresh\n"
    # outside the working directory: the disk, never the editor; refusals before it
    assert "outside on disk" in tool_results(model, "outside")[0]["content"]
    assert tool_results(model, "escape")[0]["refused"] == "escape"
    assert tool_results(model, "private")[0]["refused"] == "forbidden"
    assert tool_results(model, "deny")[0]["denied"] is True
    assert (tmp_path / "outside.txt").read_text() == "outside on disk\n"
    assert editor.reads == [buf, buf]  # read_file, edit_file
    assert [path for path, _ in editor.writes] == [buf, buf]
    # writes were approved as for the disk, before the editor wrote
    assert [t.split(" — ")[0] for t in editor.asked] == [
        "Edit buf.txt", "Write buf.txt", "Write new/fresh.txt", "Write ../outside.txt"]
    assert editor.order[:4] == ["ask Edit buf.txt", "write buf.txt", "ask Write buf.txt",
                                "write buf.txt"]


async def test_an_editor_that_never_answers_leaves_the_tools_on_the_disk(
        tmp_path, reap_owners):
    model = ScriptedModel({
        "read": [("read_file", {"path": "buf.txt"})],
        "write": [("write_file", {"path": "buf.txt", "content": "written\n"})],
    })
    with FakeProvider(model) as provider:
        home, work = setup(tmp_path, provider.url, editor_fs_timeout_seconds=1)
        reap_owners(home)
        buf = str(work / "buf.txt")
        editor = BufferEditor({buf: "unsaved buffer\n"}, silent=True)
        async with adapter(home, editor) as conn:
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            started = time.monotonic()
            await ask(conn, sid, "read")
            await ask(conn, sid, "write")
            took = time.monotonic() - started
    assert "on disk" in tool_results(model, "read")[0]["content"]
    assert (work / "buf.txt").read_text() == "written\n"
    assert editor.reads == [buf] and editor.writes == [(buf, "written\n")]
    assert 1.8 <= took < 30
