"""Tool registry: toolsets, their JSON schemas for the model, and dispatch.

A tool is an async function ``run(args: dict, call: ToolCallContext) -> str``
returning the text that goes back to the model as the ``role=tool`` message.
Tools report their own failures in that text (a bad argument is something the
model can fix), so only bugs escape as exceptions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Tool", "ToolCallContext", "TOOLSETS", "DEFAULT_TOOLSETS", "register", "tools_for",
           "unknown_toolsets"]


@dataclass
class ToolCallContext:
    """Everything a tool may know about the turn that called it."""

    session_id: str
    admission_id: str | None  # None inside a child agent
    finite: bool
    depth: int  # 0 for a turn's agent, 1 for its children, ...
    toolsets: tuple[str, ...]
    call_id: str
    services: Any  # the owner's service bundle (delegation uses it)
    settings: Any  # the turn's resolved TurnSettings


@dataclass(frozen=True)
class Tool:
    name: str
    toolset: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolCallContext], Awaitable[str]]
    # available only while depth < limit(config); None = always
    max_depth_key: str | None = None

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


TOOLSETS: dict[str, dict[str, Tool]] = {}
DEFAULT_TOOLSETS: tuple[str, ...] = ("delegation",)


def register(tool: Tool) -> Tool:
    tools = TOOLSETS.setdefault(tool.toolset, {})
    if tool.name in tools:
        raise ValueError(f"tool {tool.name} registered twice")
    tools[tool.name] = tool
    return tool


def unknown_toolsets(names: list[str] | tuple[str, ...]) -> list[str]:
    _load()
    return [n for n in names if n not in TOOLSETS]


def tools_for(toolsets: tuple[str, ...], *, depth: int, max_depth: int) -> dict[str, Tool]:
    """The tools an agent at ``depth`` may call: delegate_task only below max_depth."""
    _load()
    out: dict[str, Tool] = {}
    for name in toolsets:
        for tool in TOOLSETS.get(name, {}).values():
            if tool.max_depth_key is not None and depth >= max_depth:
                continue
            out[tool.name] = tool
    return out


def _load() -> None:
    # toolset modules register themselves on import
    from . import delegation  # noqa: F401
