"""An MCP server's resources and prompts through a real owner: the agent lists and
reads resources with the two resource tools (through approvals), and
``mcp.resources`` / ``tether mcp resources`` list them and the prompts for people."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness import clean_env
from mcphelp import offered, owner, stdio_server, turn
from toolscript import ScriptedModel, tool_results


async def test_the_agent_reads_resources_and_people_list_them_with_the_prompts(tmp_path):
    model = ScriptedModel({"look": [
        ("mcp__demo__list_resources", {}),
        ("mcp__demo__read_resource", {"uri": "demo://readme"}),
        ("mcp__demo__read_resource", {"uri": "demo://greeting/ada"}),
        ("mcp__demo__read_resource", {"uri": "demo://pixel"}),
        ("mcp__demo__read_resource", {"uri": "demo://nothing-here"}),
        ("mcp__demo__read_resource", {}),
        ("mcp__demo__read_resource", {"uri": "demo://secret"}),
    ]})
    approvals = {"mode": "ask", "allow": ["mcp__demo__*"],
                 "deny": ["mcp__demo__read_resource *secret*"]}
    async with owner(tmp_path, model, {"demo": stdio_server()}, approvals=approvals) \
            as (home, peer, sid):
        await turn(peer, sid, "look around", "t1")
        listed = await peer.result("mcp.resources", server="demo")
        unknown = await peer.call("mcp.resources", server="nope")
        cli = subprocess.run([sys.executable, "-m", "tether.clients.cli", "mcp", "resources",
                              "demo"], env=clean_env(home), capture_output=True, text=True,
                             timeout=60)
    listing, readme, greeting, pixel, missing, no_uri, secret = tool_results(model, "look")
    tools = offered(model, "look")
    assert tools["mcp__demo__read_resource"]["parameters"]["required"] == ["uri"]
    assert tools["mcp__demo__list_resources"]["description"].startswith("[MCP server demo]")
    found = json.loads(listing["content"])
    assert {r["uri"] for r in found["resources"]} == {"demo://readme", "demo://pixel",
                                                     "demo://secret"}
    assert found["templates"][0]["uri_template"] == "demo://greeting/{name}"
    assert readme["content"] == "The demo server, for tether's tests."
    assert greeting["content"] == "hello, ada"
    # binary contents are saved in the home and named, never put in the context
    assert "image/png, 70 bytes, saved as" in pixel["content"]
    saved = Path(pixel["content"].split("saved as ")[1].rstrip("]"))
    assert saved.read_bytes().startswith(b"\x89PNG") and saved.is_relative_to(home)
    assert "refused the call" in missing["error"]
    assert "give `uri`" in no_uri["error"]
    # the approval rules decide as for any MCP tool
    assert secret["denied"] is True and "secret resource" not in json.dumps(secret)
    # for people: resources, templates and prompts with their arguments
    assert listed["state"] == "ready"
    assert [r["name"] for r in listed["resources"]] == ["readme", "pixel", "secret"]
    [prompt] = listed["prompts"]
    assert prompt["name"] == "review"
    assert [(a["name"], a["required"]) for a in prompt["arguments"]] == [
        ("code", True), ("style", False)]
    assert unknown["error"]["data"]["reason"] == "invalid_params"
    assert cli.returncode == 0, cli.stderr
    assert "demo://readme" in cli.stdout and "demo://greeting/{name}" in cli.stdout
    assert "review" in cli.stdout and "code" in cli.stdout
