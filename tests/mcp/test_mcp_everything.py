"""The reference MCP server, @modelcontextprotocol/server-everything (npm, pinned in
clients/typescript's lock file), as a stdio server of a real owner."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from mcphelp import offered, owner, turn
from toolscript import ScriptedModel, tool_results

EVERYTHING = (Path(__file__).resolve().parents[2] / "clients" / "typescript" / "node_modules"
              / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js")


@pytest.fixture
def everything() -> dict[str, object]:
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        if os.environ.get("CI"):
            pytest.fail("CI runs npm ci in clients/typescript, which installs server-everything")
        pytest.skip("node or clients/typescript/node_modules missing (npm ci there)")
    return {"command": node, "args": [str(EVERYTHING), "stdio"], "env": {"GREETING": "hi"}}


async def test_the_reference_server_s_tools_through_an_owner(tmp_path, everything):
    model = ScriptedModel({"go": [
        ("mcp__everything__echo", {"message": "hello"}),
        ("mcp__everything__get-sum", {"a": 2, "b": 40}),
        ("mcp__everything__get-tiny-image", {}),
        ("mcp__everything__get-structured-content", {"location": "New York"}),
        ("mcp__everything__get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
        ("mcp__everything__trigger-long-running-operation", {"duration": 1, "steps": 2}),
    ]})
    async with owner(tmp_path, model, {"everything": everything}) as (home, peer, sid):
        await turn(peer, sid, "go", "e1")
        progress = [e["payload"] for e in await peer.all_events(sid)
                    if e["type"] == "tool.progress"]
        [server] = (await peer.result("mcp.list"))["servers"]
    echo, total, image, structured, resource, long_op = tool_results(model, "go")
    assert server["state"] == "ready" and server["protocol"].startswith("2025")
    assert "mcp__everything__echo" in offered(model, "go")
    assert echo["content"] == "Echo: hello"
    assert "42" in total["content"]
    assert "image/png" in image["content"] and "saved as" in image["content"]
    # structured content the text already carries is not repeated
    assert '"temperature"' in structured["content"] and "structured_content" not in structured
    assert "[resource " in resource["content"]
    assert "error" not in long_op, long_op
    assert progress and progress[-1]["total"] == progress[-1]["progress"]
