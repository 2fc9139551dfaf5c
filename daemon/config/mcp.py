"""The ``mcp`` section of config.yaml (MCP servers whose tools the agent may call,
docs/mcp.md), and the error every section's parser raises. Re-exported by
``config``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConfigError", "McpConfig", "McpServerConfig", "mcp_server", "parse_mcp"]


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server (docs/mcp.md): a command over stdio, or a streamable-HTTP url.
    ``${VAR}`` in env values and headers is taken from the owner's environment."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    enabled: bool = True
    tools_allow: tuple[str, ...] = ()  # fnmatch patterns of the server's own tool names
    tools_deny: tuple[str, ...] = ()
    timeout_seconds: float = 60.0  # start-up, a tools listing, one call
    #: a stdio server runs in the sandbox (docs/mcp.md); false is the user's escalation
    sandbox: bool = True
    network: bool = True  # a sandboxed stdio server may use the network


@dataclass(frozen=True)
class McpConfig:
    servers: tuple[McpServerConfig, ...] = ()



class ConfigError(Exception):
    """config.yaml is unreadable or has bad keys/values: ``errors`` holds every one
    found (the message is them, one a line)."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or [message]


_ALIASES = {"name": "default", "model": "default", "model_name": "default", "url": "base_url",
            "key": "api_key", "apikey": "api_key", "endpoint": "base_url"}


def _unknown(key: Any, known: list[str], where: str) -> ConfigError:
    """An unknown key, named with the nearest valid one."""
    import difflib

    text = str(key)
    near = _ALIASES.get(text.lower()) if _ALIASES.get(text.lower()) in known else None
    if near is None:
        close = difflib.get_close_matches(text.lower(), known, n=1, cutoff=0.6)
        near = close[0] if close else None
    hint = f"; did you mean `{near}`?" if near else f"; valid keys: {', '.join(known)}"
    return ConfigError(f"config.yaml: unknown key `{where}{text}`{hint}")


_MCP_KEYS = ["command", "args", "env", "url", "headers", "enabled", "tools", "timeout_seconds",
             "sandbox", "network"]


def _strings(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"config.yaml: `{where}` must map names to strings")
    return tuple(value.items())


def mcp_server(name: Any, raw: Any) -> McpServerConfig:
    where = f"mcp.servers.{name}"
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9_-]{0,30}[A-Za-z0-9])?", name) \
            or "__" in name:
        raise ConfigError(f"config.yaml: `mcp.servers` name {name!r} must be 1-32 letters, "
                          "digits, - and _ (no __; it becomes part of tool names)")
    if not isinstance(raw, dict):
        raise ConfigError(f"config.yaml: `{where}` must be a mapping")
    for key in raw:
        if key not in _MCP_KEYS:
            raise _unknown(key, _MCP_KEYS, f"{where}.")
    command, url, args = raw.get("command"), raw.get("url"), raw.get("args") or []
    if (command is None) == (url is None):
        raise ConfigError(f"config.yaml: `{where}` needs either `command` (stdio) or `url` "
                          "(streamable HTTP), not both")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ConfigError(f"config.yaml: `{where}.command` must be a non-empty string")
    if url is not None and (not isinstance(url, str)
                            or not re.match(r"https?://[^\s/]+", url)):
        raise ConfigError(f"config.yaml: `{where}.url` must be an http:// or https:// URL")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"config.yaml: `{where}.args` must be a list of strings")
    if command is None and (args or raw.get("env")):
        raise ConfigError(f"config.yaml: `{where}.args` and `env` are for a `command` server")
    if url is None and raw.get("headers"):
        raise ConfigError(f"config.yaml: `{where}.headers` are for a `url` server")
    flags = {}
    for key in ("enabled", "sandbox", "network"):
        flags[key] = raw.get(key, True)
        if not isinstance(flags[key], bool):
            raise ConfigError(f"config.yaml: `{where}.{key}` must be true or false")
    if command is None and ("sandbox" in raw or "network" in raw):
        raise ConfigError(f"config.yaml: `{where}.sandbox` and `network` are for a `command` "
                          "server (tether does not run a `url` server)")
    tools = raw.get("tools") or {}
    if not isinstance(tools, dict) or any(k not in ("allow", "deny") for k in tools) or not all(
            isinstance(v, list) and all(isinstance(p, str) for p in v) for v in tools.values()):
        raise ConfigError(f"config.yaml: `{where}.tools` takes `allow` and `deny`, lists of "
                          "tool names or patterns")
    timeout = raw.get("timeout_seconds", 60.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"config.yaml: `{where}.timeout_seconds` must be more than 0")
    return McpServerConfig(
        name=name, command=command, args=tuple(args), env=_strings(raw.get("env"), f"{where}.env"),
        url=url, headers=_strings(raw.get("headers"), f"{where}.headers"), enabled=flags["enabled"],
        tools_allow=tuple(tools.get("allow") or ()), tools_deny=tuple(tools.get("deny") or ()),
        timeout_seconds=float(timeout), sandbox=flags["sandbox"], network=flags["network"])


def parse_mcp(raw: Any) -> McpConfig:
    """The `mcp` section: ``servers: {NAME: {...}}``."""
    if raw is None:
        return McpConfig()
    if not isinstance(raw, dict):
        raise ConfigError("config.yaml: `mcp` must be a mapping")
    for key in raw:
        if key != "servers":
            raise _unknown(key, ["servers"], "mcp.")
    servers = raw.get("servers") or {}
    if not isinstance(servers, dict):
        raise ConfigError("config.yaml: `mcp.servers` must map server names to settings")
    return McpConfig(tuple(mcp_server(n, s) for n, s in servers.items()))
