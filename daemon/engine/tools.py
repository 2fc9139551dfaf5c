"""Tools: what one is, what a call of one may use, and the registry the owner fills.

A tool is an async function ``run(args: dict, ctx: ToolContext) -> str``
returning the text that goes back to the model as the ``role=tool`` message.
Tools report their own failures in that text (a bad argument is something the
model can fix), so only bugs escape as exceptions.

The owner's wiring registers every tool explicitly on one `ToolRegistry`
(owner.py); nothing registers itself on import.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..approvals.policy import Verdict
from ..config.turn import TOOLSETS, TurnSettings

__all__ = ["Tool", "ToolContext", "ToolRegistry", "Emit", "Approve", "Verdict", "DynamicTools"]

#: write one event into the calling agent's session (in order with its other events)
Emit = Callable[[str, dict[str, Any]], Awaitable[None]]


class Approve(Protocol):
    """Ask whether this call may run a command / write a path: ``approve(tool, kind,
    subject)`` with kind ``command`` or ``file``; may wait for a person
    (daemon/approvals). A command names the ``sandbox`` it will run in
    (``workspace-write``, ``read-only`` or ``none``) and whether it asks to
    ``escalate`` out of it, with the model's ``reason``."""

    def __call__(self, tool: str, kind: str, subject: str, *, sandbox: str = "none",
                 escalate: bool = False, reason: str | None = None) -> Awaitable[Verdict]: ...


async def no_approval(tool: str, kind: str, subject: str, *, sandbox: str = "none",
                      escalate: bool = False, reason: str | None = None) -> Verdict:
    """The approval capability of a context built without one: nothing risky runs."""
    return Verdict(False, "denied: no approval service is available to this agent")


@dataclass(frozen=True)
class ToolContext:
    """What a tool call may know and use: the turn that called it, and its capabilities."""

    session_id: str
    admission_id: str | None  # None inside a child agent
    call_id: str
    depth: int  # 0 for a turn's agent, 1 for its children, ...
    settings: TurnSettings  # the calling agent's resolved settings
    #: the channel capability (SPEC §12): False when nobody can receive a result
    #: after this turn (a finite turn, and every child agent), so a tool that would
    #: promise a later delivery must finish inside the call or refuse
    late_delivery: bool
    emit: Emit
    #: the session's working directory (commands run and relative paths resolve there)
    cwd: str | None = None
    #: whether a person can answer an approval prompt (an interactive turn)
    attended: bool = False
    approve: Approve = no_approval


@dataclass(frozen=True)
class Tool:
    name: str
    toolset: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], Awaitable[str]]
    #: offered only to agents shallower than this depth (None: at any depth)
    max_depth: int | None = None
    #: a stand-in: a name ending in ``*`` answers calls of any name with that prefix
    #: that no offered tool has (an MCP server that is down explains itself);
    #: stand-ins are never offered to the model
    stand_in: bool = False

    def matches(self, name: str) -> bool:
        """Whether a call of ``name`` reaches this stand-in."""
        return self.stand_in and name.startswith(self.name.rstrip("*"))

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


#: the tools of a toolset whose list changes while the owner runs (MCP servers):
#: asked at the start of every agent run, with its session and depth
DynamicTools = Callable[[str, int], Awaitable[dict[str, Tool]]]


class ToolRegistry:
    """Every tool the owner offers, by toolset."""

    def __init__(self) -> None:
        self._toolsets: dict[str, dict[str, Tool]] = {name: {} for name in TOOLSETS}
        self._dynamic: dict[str, DynamicTools] = {}

    def add_dynamic(self, toolset: str, source: DynamicTools) -> None:
        """Let ``source(session_id, depth)`` give ``toolset``'s tools at each agent run."""
        if toolset not in self._toolsets:
            raise ValueError(f"unknown toolset {toolset!r}")
        self._dynamic[toolset] = source

    async def offered(self, toolsets: tuple[str, ...], depth: int,
                      session_id: str = "") -> dict[str, Tool]:
        """`for_agent` plus the dynamic toolsets' tools of this moment."""
        out = self.for_agent(toolsets, depth)
        for name in toolsets:
            source = self._dynamic.get(name)
            if source is not None:
                for tool in (await source(session_id, depth)).values():
                    out.setdefault(tool.name, tool)
        return out

    def add(self, tool: Tool) -> Tool:
        tools = self._toolsets.get(tool.toolset)
        if tools is None:
            raise ValueError(f"tool {tool.name}: unknown toolset {tool.toolset!r}")
        if any(tool.name in ts for ts in self._toolsets.values()):
            raise ValueError(f"tool {tool.name} registered twice")
        tools[tool.name] = tool
        return tool

    def names(self) -> frozenset[str]:
        """Every tool's name (an HTTP client's own tools may not take one)."""
        return frozenset(name for tools in self._toolsets.values() for name in tools)

    def for_agent(self, toolsets: tuple[str, ...], depth: int) -> dict[str, Tool]:
        """The tools an agent with ``toolsets`` at ``depth`` may call."""
        out: dict[str, Tool] = {}
        for name in toolsets:
            for tool in self._toolsets.get(name, {}).values():
                if tool.max_depth is None or depth < tool.max_depth:
                    out[tool.name] = tool
        return out
