"""The ``delegate_task`` tool: inline when nobody can take a late result, else background.

The mode is decided per call from the calling turn's channel capability
(``ToolContext.late_delivery``, from the admission's stored ``finite`` flag),
never from ambient process state:

- no late delivery (finite turns, and child agents): the call returns only when
  every child ended, and the parent's next model request carries all results in
  the same turn. Nothing is written to ``async_delegations``.
- otherwise the call returns ``{"status": "dispatched", "delegation_id"}`` at
  once and the results arrive later as a new admission (background.py).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from ..config.core import DelegationConfig
from ..engine.tools import Tool, ToolContext
from .background import BackgroundDelegations
from .children import ChildRunner, Parent
from .tasks import TOOL_DESCRIPTION, TOOL_NAME, TOOL_PARAMETERS, parse_tasks

__all__ = ["delegate_task_tool"]


def delegate_task_tool(children: ChildRunner, background: BackgroundDelegations,
                       config: DelegationConfig) -> Tool:
    """The tool, bound to the owner's child runner and background delegations."""

    async def run(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            tasks = parse_tasks(args, config.max_tasks)
        except ValueError as exc:
            return orjson.dumps({"error": f"{TOOL_NAME}: {exc}"}).decode()
        parent = Parent(ctx.session_id, ctx.admission_id, ctx.settings, ctx.depth, ctx.cwd)
        if not ctx.late_delivery or ctx.admission_id is None:
            started = time.monotonic()
            results = await children.run(parent, tasks)
            return orjson.dumps({"results": results, "total_duration_seconds":
                                 round(time.monotonic() - started, 3)}).decode()
        delegation_id = await background.dispatch(parent, tasks)
        return orjson.dumps({"status": "dispatched", "delegation_id": delegation_id,
                             "tasks": len(tasks)}).decode()

    return Tool(name=TOOL_NAME, toolset="delegation", description=TOOL_DESCRIPTION,
                parameters=TOOL_PARAMETERS, run=run, max_depth=config.max_depth)
