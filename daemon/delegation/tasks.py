"""What a delegation is made of, with no I/O: tasks, child prompts, result shapes.

The texts here are what models read: the child's system prompt, its first user
message, and the message that delivers background results into the origin
session (it opens with `RESULTS_PREFIX`, which viewers also recognise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from ..engine.arguments import Arguments, ArgumentsOf, non_blank

__all__ = [
    "TaskSpec", "parse_tasks", "child_toolsets", "child_prompt", "CHILD_SYSTEM_PROMPT",
    "RESULTS_PREFIX", "results_message", "interrupted_result", "fill_interrupted",
    "OWNER_STOPPED", "TOOL_NAME", "TOOL_DESCRIPTION", "TOOL_PARAMETERS",
]

TOOL_NAME = "delegate_task"
CHILD_SYSTEM_PROMPT = (
    "You are a helper agent started by another agent through tether's delegate_task. "
    "Do the task you are given and answer with a concise summary of the result; "
    "that summary is all the other agent will see."
)
#: the first words of the message that delivers a background delegation's results
RESULTS_PREFIX = "[delegation results]"
OWNER_STOPPED = "the owner stopped before this task finished"


@dataclass(frozen=True)
class TaskSpec:
    goal: str
    context: str | None = None
    toolsets: tuple[str, ...] | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"goal": self.goal}
        if self.context:
            out["context"] = self.context
        if self.toolsets is not None:
            out["toolsets"] = list(self.toolsets)
        return out


_GOAL = "What the helper agent must achieve."
_CONTEXT = "Facts the helper needs; it sees nothing of this conversation."
_TOOLSETS = "Toolsets the helper may use (at most yours)."


class Task(Arguments):
    goal: Annotated[str, Field(description=_GOAL), AfterValidator(non_blank)]
    context: Annotated[str, Field(description=_CONTEXT)] | None = None
    toolsets: Annotated[list[str], Field(description=_TOOLSETS)] | None = None

    def spec(self) -> TaskSpec:
        toolsets = tuple(self.toolsets) if self.toolsets is not None else None
        return TaskSpec(self.goal, self.context, toolsets)


class DelegateTask(Arguments):
    """One task's keys, or ``tasks``: a list of them."""

    goal: Annotated[str, Field(description=_GOAL), AfterValidator(non_blank)] | None = None
    context: Annotated[str, Field(description=_CONTEXT)] | None = None
    toolsets: Annotated[list[str], Field(description=_TOOLSETS)] | None = None
    tasks: Annotated[list[Task], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> DelegateTask:
        if self.tasks is not None and (mixed := sorted(self.model_fields_set - {"tasks"})):
            raise ValueError(f"give either `tasks` or one task's keys, not both "
                             f"(also got: {', '.join(mixed)})")
        if self.tasks is None and self.goal is None:
            raise ValueError("give `goal` (one task) or `tasks` (a list of tasks)")
        return self


ARGUMENTS = ArgumentsOf(DelegateTask)


def parse_tasks(args: dict[str, Any], max_tasks: int) -> list[TaskSpec]:
    """``{goal, context?, toolsets?}`` or ``{tasks: [...]}`` → tasks; ValueError says why.

    The messages are written for the model that made the call: it reads them as
    the tool's result and can correct itself.
    """
    a = ARGUMENTS.parse(args)
    if a.tasks is None:
        return [Task(goal=a.goal or "", context=a.context, toolsets=a.toolsets).spec()]
    if len(a.tasks) > max_tasks:
        raise ValueError(f"{len(a.tasks)} tasks given; at most {max_tasks} per call")
    return [t.spec() for t in a.tasks]


def child_toolsets(requested: tuple[str, ...] | None,
                   parent: tuple[str, ...]) -> tuple[str, ...]:
    """A child's toolsets: what its task asked for (default: all of the parent's),
    minus anything the parent itself does not have."""
    wanted = parent if requested is None else requested
    return tuple(dict.fromkeys(t for t in wanted if t in parent))


def child_prompt(task: TaskSpec) -> str:
    """A child's first (and only) user message: its goal, then its context."""
    return task.goal + (f"\n\nContext:\n{task.context}" if task.context else "")


def results_message(delegation_id: str, state: str, results_json: str) -> str:
    """The user message that delivers a background delegation's results."""
    return (f"{RESULTS_PREFIX} Background delegation {delegation_id} finished ({state}). "
            f"Results:\n{results_json}")


def interrupted_result(index: int, model: str, error: str) -> dict[str, Any]:
    return {"task_index": index, "status": "interrupted", "summary": "", "api_calls": 0,
            "duration_seconds": 0.0, "model": model, "exit_reason": "interrupted",
            "error": error}


def fill_interrupted(results: list[dict[str, Any] | None], model: str,
                     error: str) -> list[dict[str, Any]]:
    """Keep every finished child's result; the others say interrupted."""
    return [r if r is not None else interrupted_result(i, model, error)
            for i, r in enumerate(results)]


TOOL_DESCRIPTION = (
    "Hand one task ({goal, context?, toolsets?}) or several ({tasks: [...]}) to "
    "helper agents that run in parallel. Each helper starts with no history. "
    "Returns {results: [{task_index, status, summary, ...}]} when the helpers "
    "finish, or {status: 'dispatched', delegation_id} when they run in the "
    "background and their results arrive later as a new message.")
TOOL_PARAMETERS = ARGUMENTS.schema
