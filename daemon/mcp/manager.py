"""The owner's MCP servers as the ``mcp`` toolset, and the mcp.* methods.

Each configured server's tools are offered as ``mcp__<server>__<tool>`` with
the server's JSON Schema. Every call goes through the approval check like a
command: ``ctx.approve(name, "command", "<name> <arguments as JSON>")``, so
``approvals.allow: ["mcp__github__*"]`` trusts a server and
``["mcp__github__get_issue *"]`` one tool (docs/mcp.md). A server that is down
is a clear tool error, never a failed turn or owner: its known tools stay
offered and say why, and a stand-in answers calls of its other names.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams, NotFound

from ..config.core import ConfigError, McpConfig, McpServerConfig, mcp_server
from ..config.turn import shown_url
from ..engine.tools import Tool, ToolContext
from ..toolsets.sandbox import Sandbox
from .resources import listing, resource_tools
from .results import render, tool_name
from .server import McpServer, Unavailable

__all__ = ["McpManager", "mcp_handlers"]

#: the subject shown in an approval prompt holds at most this much of the arguments
SUBJECT_ARGS_CHARS = 1000


def _error(message: str, **extra: Any) -> str:
    return orjson.dumps({"error": message, **extra, "summary": message[:120]}).decode()


def _schema(raw: Any) -> dict[str, Any]:
    schema = dict(raw) if isinstance(raw, dict) else {}
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


#: tool.progress events of one call are at least this far apart (but the last is sent)
PROGRESS_SECONDS = 0.5


def _progress(ctx: ToolContext, name: str) -> Callable[..., Awaitable[None]]:
    """The progress callback of one call: a tool.progress event, throttled."""
    last = [0.0]

    async def report(progress: float, total: float | None = None,
                     message: str | None = None) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_SECONDS and not (total is not None and progress >= total):
            return
        last[0] = now
        payload: dict[str, Any] = {"call_id": ctx.call_id, "name": name,
                                   "progress": float(progress)}
        if total is not None:
            payload["total"] = float(total)
        if message:
            payload["message"] = str(message)[:500]
        await ctx.emit("tool.progress", payload)

    return report


#: servers clients attached to sessions (mcp.attach), across the owner
MAX_ATTACHED = 64


class McpManager:
    def __init__(self, config: McpConfig, *, env: Mapping[str, str], logs: Path, media: Path,
                 version: str, output_chars: int, sandbox: Sandbox | None = None,
                 state: Path | None = None) -> None:
        self._env, self._logs, self._version = env, logs, version
        self._sandbox, self._state = sandbox, state
        self._servers = {c.name: self._new(c) for c in config.servers}
        #: session_id → name → a server a client brought for that session
        self._attached: dict[str, dict[str, McpServer]] = {}
        self._media = media
        self._limit = output_chars

    def _new(self, config: McpServerConfig) -> McpServer:
        return McpServer(config, env=self._env, logs=self._logs, version=self._version,
                         sandbox=self._sandbox, state=self._state)

    @property
    def servers(self) -> dict[str, McpServer]:
        return self._servers

    async def attach(self, session_id: str, configs: list[McpServerConfig]) -> list[McpServer]:
        """Give ``session_id`` these servers besides config.yaml's (which keep their
        names: a server of the same name is not attached). The same server attached
        again is kept running; one of that name with other settings replaces it."""
        mine = self._attached.setdefault(session_id, {})
        total = sum(len(s) for s in self._attached.values())
        out: list[McpServer] = []
        for config in configs:
            if config.name in self._servers:
                continue
            old = mine.get(config.name)
            if old is not None and old.config == config:
                out.append(old)
                continue
            if old is None and total >= MAX_ATTACHED:
                raise InvalidParams(f"at most {MAX_ATTACHED} MCP servers can be attached to "
                                    "sessions at once")
            if old is not None:
                await old.close()
            else:
                total += 1
            mine[config.name] = server = self._new(config)
            out.append(server)
        return out

    async def tools(self, session_id: str | None = None, depth: int = 0) -> dict[str, Tool]:
        """The tools of every enabled server (config.yaml's, and those attached to
        ``session_id``), starting the servers not started yet (at once, each bounded
        by its timeout_seconds); one whose start failed is retried in the
        background, so a broken server never holds a turn up twice."""
        servers = [s for s in (*self._servers.values(),
                               *self._attached.get(session_id or "", {}).values())
                   if s.config.enabled]
        if not servers:  # every turn asks: most owners have none
            return {}
        for s in servers:
            if s.start_failed:
                s.retry_in_background()
        await asyncio.gather(*(s.ensure() for s in servers if not s.start_failed))
        out: dict[str, Tool] = {}
        for server in servers:
            for tool in [*(self._tool(server, t) for t in server.tools),
                         *self._resource_tools(server)]:
                out.setdefault(tool.name, tool)
            if server.state != "ready":
                stand_in = self._stand_in(server)
                out[stand_in.name] = stand_in
        return out

    def _tool(self, server: McpServer, mcp_tool: Any) -> Tool:
        original = mcp_tool.name
        limit, media = self._limit, self._media

        async def call(args: dict[str, Any], ctx: ToolContext) -> str:
            result = await server.call(original, args, _progress(ctx, tool_name(server.name,
                                                                                original)))
            return render(server.name, original, result, media, limit)[0]

        description = (mcp_tool.description or mcp_tool.title or original).strip()
        return self._gated(server, tool_name(server.name, original), description,
                           _schema(mcp_tool.input_schema), call)

    def _gated(self, server: McpServer, name: str, description: str,
               parameters: dict[str, Any], call: Callable[..., Awaitable[str]]) -> Tool:
        """A tool of ``server`` that asks the approval check before ``call``."""

        async def run(args: dict[str, Any], ctx: ToolContext) -> str:
            from mcp import MCPError

            if server.state != "ready":
                return _error(server.why_unavailable(), unavailable=True)
            shown = orjson.dumps(args).decode()
            if len(shown) > SUBJECT_ARGS_CHARS:
                shown = shown[:SUBJECT_ARGS_CHARS] + "…"
            # a sandboxed server writes nothing but its own directory: as a command in
            # a read-only sandbox; any other fails closed like a command without one
            verdict = await ctx.approve(name, "command", f"{name} {shown}",
                                        sandbox="read-only" if server.sandboxed else "none")
            if not verdict.allowed:
                return _error(f"the MCP tool was not called: {verdict.reason}", denied=True,
                              approval_id=verdict.approval_id)
            try:
                return await call(args, ctx)
            except Unavailable as exc:
                return _error(str(exc), unavailable=True)
            except MCPError as exc:
                return _error(f"the MCP server {server.name!r} refused the call: "
                              f"{exc.message}")

        return Tool(name=name, toolset="mcp", run=run, parameters=parameters,
                    description=f"[MCP server {server.name}] {description}"[:4000])

    def _resource_tools(self, server: McpServer) -> list[Tool]:
        limit, media = self._limit, self._media
        out = []
        for name, description, parameters, read in resource_tools(server):
            async def call(args: dict[str, Any], ctx: ToolContext, read: Any = read) -> str:
                return str(await read(args, media, limit))

            out.append(self._gated(server, name, description, parameters, call))
        return out

    def _stand_in(self, server: McpServer) -> Tool:
        async def run(args: dict[str, Any], ctx: ToolContext) -> str:
            return _error(server.why_unavailable(), unavailable=True)

        return Tool(name=tool_name(server.name, "") + "*", toolset="mcp", run=run,
                    parameters={"type": "object"}, description="", stand_in=True)

    def describe(self, server: McpServer, session_id: str | None = None) -> dict[str, Any]:
        c = server.config
        return {"session_id": session_id,
            "name": server.name,
            "transport": "stdio" if c.command else "http",
            "target": " ".join((c.command or "", *c.args)) if c.command
            else shown_url(c.url or ""),
            "enabled": c.enabled, "state": server.state, "error": server.error,
            "retry_at": server.retry_at, "starts": server.starts, "protocol": server.protocol,
            "sandbox": server.boundary(),
            "tools": [{"name": tool_name(server.name, t.name), "tool": t.name,
                       "description": (t.description or "")[:500]} for t in server.tools],
        }

    def describe_all(self) -> list[dict[str, Any]]:
        return [self.describe(s) for s in self._servers.values()] + [
            self.describe(s, sid) for sid, named in self._attached.items()
            for s in named.values()]

    async def close(self) -> None:
        attached = [s for named in self._attached.values() for s in named.values()]
        await asyncio.gather(*(s.close() for s in (*self._servers.values(), *attached)))


def mcp_handlers(manager: McpManager, session_exists: Callable[[str], Awaitable[bool]],
                 ) -> Callable[[Dispatcher], None]:
    """What registers mcp.list, mcp.tools, mcp.resources and mcp.attach on a dispatcher."""
    from tether.rpc.models import mcp as m

    def register(d: Dispatcher) -> None:
        @d.register("mcp.list")
        async def list_(p: m.McpListParams, call: Any) -> dict[str, Any]:
            return {"servers": manager.describe_all(), "now": time.time()}

        async def started(name: str) -> McpServer:
            server = manager.servers.get(name)
            if server is None:
                known = ", ".join(manager.servers) or "none is configured"
                raise InvalidParams(f"no MCP server {name!r} (known: {known})",
                                    fields=[{"loc": "server", "msg": "unknown MCP server",
                                             "type": "value_error"}])
            await server.ensure(now=True)  # asked by a person: backoff or not
            return server

        @d.register("mcp.tools")
        async def tools(p: m.McpToolsParams, call: Any) -> dict[str, Any]:
            return manager.describe(await started(p.server))

        @d.register("mcp.resources")
        async def resources(p: m.McpResourcesParams, call: Any) -> dict[str, Any]:
            server = await started(p.server)
            out: dict[str, Any] = {"server": server.name, "state": server.state,
                                   "error": server.error, "resources": [], "templates": [],
                                   "prompts": []}
            if server.state == "ready":
                from mcp import MCPError

                try:
                    out.update(await listing(server))
                except (Unavailable, MCPError) as exc:
                    out["error"] = str(exc)
                    out["state"] = server.state
            return out

        @d.register("mcp.attach")
        async def attach(p: m.McpAttachParams, call: Any) -> dict[str, Any]:
            if call.transport != "unix":
                raise InvalidParams("mcp.attach is only accepted over the Unix socket (it "
                                    "starts programs)", fields=[{
                                        "loc": "transport", "msg": "Unix socket only",
                                        "type": "value_error"}])
            configs = []
            for i, spec in enumerate(p.servers):
                raw = spec.model_dump(exclude_defaults=True)
                try:
                    configs.append(mcp_server(raw.pop("name"), raw))
                except ConfigError as exc:
                    why = str(exc).replace("config.yaml: ", "").replace("`mcp.servers", "`servers")
                    raise InvalidParams(why, fields=[{"loc": f"servers.{i}", "msg": why,
                                                      "type": "value_error"}]) from None
            if not await session_exists(p.session_id):
                raise NotFound(f"no session {p.session_id!r}", session_id=p.session_id)
            servers = await manager.attach(p.session_id, configs)
            return {"servers": [manager.describe(s, p.session_id) for s in servers]}

    return register
