"""Wire models of MCP servers: runtime.describe's ``mcp_servers``, mcp.list, mcp.tools."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StringConstraints

from .models_base import Model

__all__ = ["McpToolInfo", "McpServerInfo", "McpListParams", "McpListResult", "McpToolsParams"]


class McpToolInfo(Model):
    name: str  # as the model calls it: mcp__<server>__<tool>
    tool: str  # as the server names it
    description: str


class McpServerInfo(Model):
    """A configured MCP server: how it is reached, its state and its tools."""

    name: str
    transport: Literal["stdio", "http"]
    target: str  # the command line, or the URL without credentials
    enabled: bool
    #: idle (not needed yet) | starting | ready | failed | disabled | stopped
    state: str
    error: str | None  # why it failed
    retry_at: float | None  # when a failed server is tried again (unix seconds)
    starts: int  # start attempts since the owner started
    protocol: str | None  # the MCP protocol version negotiated
    tools: list[McpToolInfo]  # the tools offered (the last known, when not ready)


class McpListParams(Model):
    pass


class McpListResult(Model):
    servers: list[McpServerInfo]
    now: float


class McpToolsParams(Model):
    #: the server to start (if it is not running) and list
    server: Annotated[str, StringConstraints(min_length=1, max_length=64)]
