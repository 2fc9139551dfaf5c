"""The ``mcp`` section of config.yaml (MCP servers whose tools the agent may call,
docs/mcp.md), validated by pydantic. Re-exported by ``config``."""

from __future__ import annotations

import re
from dataclasses import field
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass

from .errors import ConfigError, problems
from .scalars import Bool, Str, Strs

__all__ = ["ConfigError", "McpConfig", "McpServerConfig", "McpTools", "mcp_server"]

_STRICT = ConfigDict(extra="forbid")
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_-]{0,30}[A-Za-z0-9])?")


def _name(value: str) -> str:
    if not _NAME.fullmatch(value) or "__" in value:
        raise ValueError("must be 1-32 letters, digits, - and _ (no __; it becomes part of "
                         "tool names)")
    return value


def _pairs(value: Any) -> Any:
    """``{NAME: VALUE}`` as pairs (kept as pairs: the values may be secrets)."""
    if isinstance(value, tuple):
        return value
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("must map names to strings")
    return tuple(value.items())


def _command(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def _url(value: str) -> str:
    if not re.match(r"https?://[^\s/]+", value):
        raise ValueError("must be an http:// or https:// URL")
    return value


Pairs = Annotated[tuple[tuple[str, str], ...], BeforeValidator(_pairs)]


@dataclass(frozen=True, config=_STRICT)
class McpTools:
    allow: Strs = ()  # fnmatch patterns of the server's own tool names
    deny: Strs = ()


@dataclass(frozen=True, config=_STRICT)
class McpServerConfig:
    """One MCP server (docs/mcp.md): a command over stdio, or a streamable-HTTP url.
    ``${VAR}`` in env values and headers is taken from the owner's environment."""

    name: Annotated[Str, AfterValidator(_name)]
    command: Annotated[Str, AfterValidator(_command)] | None = None
    args: Strs = ()
    env: Pairs = field(default=(), repr=False)
    url: Annotated[Str, AfterValidator(_url)] | None = None
    headers: Pairs = field(default=(), repr=False)
    enabled: Bool = True
    tools: McpTools = McpTools()
    timeout_seconds: Annotated[float, Field(strict=True, gt=0)] = 60.0  # start-up, a listing, a call
    #: a stdio server runs in the sandbox (docs/mcp.md); false is the user's escalation
    sandbox: Bool = True
    network: Bool = True  # a sandboxed stdio server may use the network

    @property
    def tools_allow(self) -> tuple[str, ...]:
        return self.tools.allow

    @property
    def tools_deny(self) -> tuple[str, ...]:
        return self.tools.deny

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, raw: Any) -> Any:
        """A command server or a url server, and only the keys of its kind."""
        if not isinstance(raw, dict):
            return raw
        raw = {k: v for k, v in raw.items()
               if not (v is None and k in ("args", "env", "headers", "tools"))}
        command, url = raw.get("command"), raw.get("url")
        if (command is None) == (url is None):
            raise ValueError("needs either `command` (stdio) or `url` (streamable HTTP), "
                             "not both")
        if command is None and (raw.get("args") or raw.get("env")):
            raise ValueError("`args` and `env` are for a `command` server")
        if url is None and raw.get("headers"):
            raise ValueError("`headers` are for a `url` server")
        if command is None and ("sandbox" in raw or "network" in raw):
            raise ValueError("`sandbox` and `network` are for a `command` server (tether "
                             "does not run a `url` server)")
        return raw


def _servers(value: Any) -> Any:
    """``servers: {NAME: {...}}`` read as a list of servers with their names."""
    if value is None:
        return ()
    if isinstance(value, dict):
        return [{"name": n, **s} if isinstance(s, dict) else s for n, s in value.items()]
    if isinstance(value, tuple):
        return value
    raise ValueError("must map server names to settings")


@dataclass(frozen=True, config=_STRICT)
class McpConfig:
    servers: tuple[McpServerConfig, ...] = ()

    @field_validator("servers", mode="before")
    @classmethod
    def _read(cls, value: Any) -> Any:
        return _servers(value)


_SERVER = TypeAdapter(McpServerConfig)


def mcp_server(name: Any, raw: Any) -> McpServerConfig:
    """One server of ``mcp.servers`` (or of mcp.attach), named ``name``."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config.yaml: `mcp.servers.{name}` must be a mapping")
    body = {"name": name, **raw}
    try:
        return _SERVER.validate_python(body)
    except ValidationError as exc:
        errors = problems(exc, McpServerConfig, body, within=("mcp", "servers", name))
        raise ConfigError("\n".join(errors), errors) from None
