"""The plan ``tether acp`` shows an editor: the tasks of the session's delegations.

tether's agent has no to-do list of its own; what it plans ahead is the work it
hands to helpers (``delegate_task``). Each delegation is a group of plan
entries, one per task, in the order given: ``pending`` when the call is made
(or a background delegation is recorded), ``in_progress`` when its helper
starts, ``completed`` when it ends (a helper that failed or was interrupted
says so in its entry). ACP replaces the whole plan with each update, so every
change sends every entry; groups whose tasks all ended are dropped when the
next delegation starts.

Pure (no I/O): :meth:`DelegationPlan.on_event` takes a live event and answers
the update to send, or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from acp import helpers
from acp.schema import AgentPlanUpdate

__all__ = ["DelegationPlan"]

_GOAL_CHARS = 200
_DELEGATE = "delegate_task"


@dataclass
class _Task:
    goal: str
    status: str = "pending"  # ACP: pending, in_progress, completed
    child: str | None = None
    note: str = ""  # why a task that ended did not complete


def _goals(arguments: Any) -> list[str]:
    """The goals of a delegate_task call's arguments (none if they are malformed)."""
    try:
        args = orjson.loads(arguments) if isinstance(arguments, str) else arguments
    except orjson.JSONDecodeError:
        return []
    if not isinstance(args, dict):
        return []
    tasks = args.get("tasks") if "tasks" in args else [args]
    if not isinstance(tasks, list):
        return []
    return [str(t.get("goal", ""))[:_GOAL_CHARS] for t in tasks if isinstance(t, dict)]


class DelegationPlan:
    """One session's delegations, as ACP plan entries."""

    def __init__(self) -> None:
        #: "call:<admission>/<call>" (a delegate_task call) or "dlg:<delegation id>"
        self._groups: dict[str, list[_Task]] = {}

    def on_event(self, event: dict[str, Any]) -> AgentPlanUpdate | None:
        kind, p = event.get("type"), event.get("payload") or {}
        aid = event.get("admission_id") or "-"
        changed = False
        if kind == "tool.start" and p.get("name") == _DELEGATE:
            goals = _goals(p.get("arguments"))
            changed = bool(goals) and self._add(f"call:{aid}/{p.get('call_id')}",
                                                [_Task(g) for g in goals])
        elif kind == "delegation.dispatched":
            changed = self._dispatched(aid, p)
        elif kind == "subagent.start":
            changed = self._started(aid, p)
        elif kind == "subagent.complete":
            changed = self._ended(p)
        elif kind == "tool.complete" and p.get("name") == _DELEGATE:
            changed = self._finish(f"call:{aid}/{p.get('call_id')}", "")
        elif kind == "delegation.complete":
            changed = self._finish(f"dlg:{p.get('delegation_id')}", p.get("state") or "")
        return self.update() if changed else None

    def update(self) -> AgentPlanUpdate:
        """Every entry, as the editor should show it now."""
        return helpers.update_plan([
            helpers.plan_entry(t.goal + (f" ({t.note})" if t.note else ""),
                               priority="medium", status=t.status)  # type: ignore[arg-type]
            for tasks in self._groups.values() for t in tasks])

    def _add(self, key: str, tasks: list[_Task]) -> bool:
        for old in [k for k, ts in self._groups.items()
                    if all(t.status == "completed" for t in ts)]:
            del self._groups[old]
        self._groups[key] = tasks
        return True

    def _dispatched(self, aid: str, p: dict[str, Any]) -> bool:
        goals = [str(t.get("goal", ""))[:_GOAL_CHARS] for t in p.get("tasks") or []
                 if isinstance(t, dict)]
        # the delegate_task call that recorded it is the same group, from now on by id
        for key, tasks in reversed(list(self._groups.items())):
            if key.startswith(f"call:{aid}/") and [t.goal for t in tasks] == goals:
                self._groups[f"dlg:{p.get('delegation_id')}"] = self._groups.pop(key)
                return False
        return bool(goals) and self._add(f"dlg:{p.get('delegation_id')}",
                                         [_Task(g) for g in goals])

    def _started(self, aid: str, p: dict[str, Any]) -> bool:
        index, goal = p.get("task_index"), str(p.get("goal", ""))[:_GOAL_CHARS]
        if p.get("delegation_id"):
            candidates = [self._groups.get(f"dlg:{p['delegation_id']}") or []]
        else:
            candidates = [ts for k, ts in reversed(list(self._groups.items()))
                          if k.startswith(f"call:{aid}/")]
        for tasks in candidates:
            if isinstance(index, int) and 0 <= index < len(tasks) \
                    and tasks[index].goal == goal and tasks[index].status == "pending":
                tasks[index].status, tasks[index].child = "in_progress", p.get("child_session_id")
                return True
        return False

    def _ended(self, p: dict[str, Any]) -> bool:
        child = p.get("child_session_id")
        for tasks in self._groups.values():
            for t in tasks:
                if child and t.child == child and t.status != "completed":
                    t.status = "completed"
                    if p.get("status") != "completed":
                        t.note = str(p.get("status") or "failed")
                    return True
        return False

    def _finish(self, key: str, state: str) -> bool:
        """The delegation ended: a task still open never ran to its end."""
        changed = False
        for t in self._groups.get(key) or []:
            if t.status != "completed":
                t.status, t.note, changed = "completed", state or "not run", True
        return changed
