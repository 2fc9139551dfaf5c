"""Wire models of MCP servers: runtime.describe's ``mcp_servers``, mcp.list, mcp.tools,
mcp.attach, mcp.resources."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from .base import Model

__all__ = ["McpToolInfo", "McpServerInfo", "McpListParams", "McpListResult", "McpToolsParams",
           "McpServerSpec", "McpAttachParams", "McpAttachResult", "McpResourcesParams",
           "McpResourcesResult"]

_Text = Annotated[str, StringConstraints(max_length=4096)]


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
    #: what a stdio server runs in ("sandboxed, network on, ..." or "none — why");
    #: null for a url server
    sandbox: str | None = None
    #: the session a server attached by a client serves (mcp.attach); null: config.yaml's
    session_id: str | None = None


class McpListParams(Model):
    pass


class McpListResult(Model):
    servers: list[McpServerInfo]
    now: float


class McpToolsParams(Model):
    #: the server to start (if it is not running) and list
    server: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class McpServerSpec(Model):
    """A server a client brings for one session (an editor's, over ACP): as in
    config.yaml's ``mcp.servers``, either ``command`` (+ ``args``, ``env``) or
    ``url`` (+ ``headers``)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=32)]
    command: _Text | None = None
    args: Annotated[list[_Text], Field(max_length=256)] = []
    env: Annotated[dict[str, _Text], Field(max_length=256)] = {}
    url: _Text | None = None
    headers: Annotated[dict[str, _Text], Field(max_length=256)] = {}


class McpAttachParams(Model):
    session_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    servers: Annotated[list[McpServerSpec], Field(max_length=16)]


class McpAttachResult(Model):
    servers: list[McpServerInfo]


class McpResourcesParams(Model):
    #: the server to start (if it is not running) and list
    server: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class McpResourceInfo(Model):
    uri: str
    name: str
    description: str | None
    mime_type: str | None


class McpResourceTemplateInfo(Model):
    uri_template: str  # an RFC 6570 URI template, e.g. "docs://page/{name}"
    name: str
    description: str | None
    mime_type: str | None


class McpPromptArgument(Model):
    name: str
    description: str | None
    required: bool


class McpPromptInfo(Model):
    name: str
    description: str | None
    arguments: list[McpPromptArgument]


class McpResourcesResult(Model):
    """A server's resources, resource templates and prompts (empty lists for what it
    does not offer; at most 500 of each)."""

    server: str
    state: str  # as in McpServerInfo: the lists are empty unless "ready"
    error: str | None
    resources: list[McpResourceInfo]
    templates: list[McpResourceTemplateInfo]
    prompts: list[McpPromptInfo]
