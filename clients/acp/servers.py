"""The editor's MCP servers (``session/new``, ``session/load``) given to the session's
turns with mcp.attach (docs/acp.md, "The editor's MCP servers"): stdio and http servers
are taken, with names made tether-shaped; sse ones are logged and left out."""

from __future__ import annotations

import logging
import re
from typing import Any

from tether.rpc.errors import RpcError

from ..library.client import TetherClient

__all__ = ["attach_mcp", "mcp_specs"]

log = logging.getLogger("tether.acp")


async def attach_mcp(tether: TetherClient, sid: str, servers: list[Any] | None) -> None:
    """The editor's MCP servers, for this session's turns (mcp.attach). A server
    the owner refuses is logged; the session works on without it."""
    specs, skipped = mcp_specs(servers or [])
    if skipped:
        log.warning("MCP servers not attached (tether takes stdio and http): %s",
                    ", ".join(skipped))
    if not specs:
        return
    try:
        out = await tether.call("mcp.attach", session_id=sid, servers=specs)
    except RpcError as exc:
        log.warning("the editor's MCP servers were not attached: %s", exc.detail)
        return
    log.info("MCP servers attached to %s: %s", sid,
             ", ".join(s["name"] for s in out["servers"]))


def _server_name(name: str, taken: set[str]) -> str:
    """An editor's server name as tether's (letters, digits, - and _; no __)."""
    base = re.sub(r"_{2,}", "_", re.sub(r"[^a-z0-9_-]+", "-", name.lower())).strip("-_")[:28]
    base = base.strip("-_") or "editor"
    out, n = base, 2
    while out in taken:
        out, n = f"{base}-{n}", n + 1
    taken.add(out)
    return out


def mcp_specs(servers: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The MCP servers an editor passed (stdio, http) as mcp.attach specs, and the
    names of those tether cannot attach (sse, acp)."""
    specs: list[dict[str, Any]] = []
    skipped: list[str] = []
    taken: set[str] = set()
    for s in servers:
        kind = getattr(s, "type", None)
        if kind is None and getattr(s, "command", None):
            specs.append({"name": _server_name(s.name, taken), "command": s.command,
                          "args": list(s.args or []),
                          "env": {e.name: e.value for e in s.env or []}})
        elif kind == "http":
            specs.append({"name": _server_name(s.name, taken), "url": s.url,
                          "headers": {h.name: h.value for h in s.headers or []}})
        else:
            skipped.append(f"{getattr(s, 'name', '?')} ({kind})")
    return specs, skipped
