"""An MCP server's resources and prompts: the agent's two resource tools, and
the listing ``mcp.resources`` (``tether mcp resources NAME``) gives people.

A server that says it has resources (its ``resources`` capability) gets two
tools besides its own: ``mcp__<server>__list_resources`` (its resources and
resource templates) and ``mcp__<server>__read_resource {uri}`` (one resource's
contents: text as is, binary saved under ``mcp-media`` like a tool's images).
Both pass the approval check as calls of those names, like the server's own
tools (``approvals.allow: ["mcp__docs__read_resource *"]``), and the server's
``tools`` allow and deny lists take or leave them by those names; a tool of the
server's own with the same name wins.

Prompts are for people (MCP calls them user-controlled): listed by
``mcp.resources`` with their arguments, never offered to the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from .results import render_contents, tool_name
from .server import McpServer, allowed

__all__ = ["LIST", "READ", "resource_tools", "listing"]

LIST, READ = "list_resources", "read_resource"
#: at most this many resources, templates and prompts are listed (pages are followed)
MAX_LISTED = 500
_PARAMETERS = {
    LIST: {"type": "object", "properties": {}},
    READ: {"type": "object", "required": ["uri"], "properties": {"uri": {
        "type": "string", "description": "the resource's URI, from list_resources (a "
        "template's URI with its {placeholders} filled in)"}}},
}


def offers_resources(server: McpServer) -> bool:
    caps = server.capabilities
    return server.state == "ready" and caps is not None and caps.resources is not None


async def _paged(server: McpServer, method: str, field: str) -> list[Any]:
    out: list[Any] = []
    cursor = None
    while len(out) < MAX_LISTED:
        page = await server.request(
            lambda c, cur=cursor: getattr(c, method)(cursor=cur))  # type: ignore[misc]
        out.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return out[:MAX_LISTED]


async def _resources(server: McpServer) -> dict[str, Any]:
    resources = await _paged(server, "list_resources", "resources")
    templates = await _paged(server, "list_resource_templates", "resource_templates")
    return {
        "resources": [{"uri": str(r.uri), "name": r.name, "description": r.description,
                       "mime_type": r.mime_type} for r in resources],
        "templates": [{"uri_template": t.uri_template, "name": t.name,
                       "description": t.description, "mime_type": t.mime_type}
                      for t in templates]}


async def listing(server: McpServer) -> dict[str, Any]:
    """The server's resources, templates and prompts (empty lists for what it does
    not offer)."""
    caps = server.capabilities
    out: dict[str, Any] = {"resources": [], "templates": [], "prompts": []}
    if caps is not None and caps.resources is not None:
        out.update(await _resources(server))
    if caps is not None and caps.prompts is not None:
        out["prompts"] = [
            {"name": p.name, "description": p.description,
             "arguments": [{"name": a.name, "description": a.description,
                            "required": bool(a.required)} for a in p.arguments or []]}
            for p in await _paged(server, "list_prompts", "prompts")]
    return out


def resource_tools(server: McpServer) -> list[tuple[str, str, dict[str, Any], Any]]:
    """(model name, what it does, parameters, run(args, media, limit) → result
    JSON) of the resource tools of ``server``; none if it offers no resources."""
    if not offers_resources(server):
        return []
    from ..toolsets.output import cap

    async def list_(args: dict[str, Any], media: Path, limit: int) -> str:
        found = await _resources(server)
        text = orjson.dumps(found).decode()
        return orjson.dumps({"server": server.name, "tool": LIST, "content": cap(text, limit),
                             "summary": f"{len(found['resources'])} resources, "
                                        f"{len(found['templates'])} templates"}).decode()

    async def read(args: dict[str, Any], media: Path, limit: int) -> str:
        uri = args.get("uri")
        if not isinstance(uri, str) or not uri or len(uri) > 4096:
            return orjson.dumps({"error": "give `uri`: a resource's URI, from "
                                          f"{tool_name(server.name, LIST)}"}).decode()
        result = await server.request(lambda c: c.read_resource(uri))
        text = render_contents(list(result.contents or []), media)
        return orjson.dumps({"server": server.name, "tool": READ, "uri": uri,
                             "content": cap(text, limit),
                             "summary": f"read {uri}"[:120]}).decode()

    cfg = server.config
    return [t for t in [
        (tool_name(server.name, LIST), f"List the resources (and resource templates) of "
         f"the MCP server {server.name}: their URIs, names and types.", _PARAMETERS[LIST],
         list_),
        (tool_name(server.name, READ), f"Read one resource of the MCP server {server.name} "
         "by its URI.", _PARAMETERS[READ], read),
    ] if allowed(t[0].rsplit("__", 1)[1], cfg.tools_allow, cfg.tools_deny)]
