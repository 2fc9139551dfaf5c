"""`delegate_task`: child agents, joined inline or delivered once in the background.

The mode is decided per admission from its stored ``finite`` flag, never from
ambient process state:

- finite turns (their submitter will not be there later) run children inline:
  the tool call returns only when every child ended, and the parent's next
  model request carries all results in the same turn. Nothing is written to
  ``async_delegations`` and children get no admission rows.
- other turns dispatch: the tool returns ``{"status": "dispatched",
  "delegation_id"}`` at once, an ``async_delegations`` row tracks the children,
  and their results come back into the origin session (by stored session id)
  as a new admission of principal ``delegation``, in the same transaction that
  marks the row delivered. The admission's identity is the delegation_id, so a
  second delivery attempt finds the first and adds nothing.

Each child runs in its own child session (``parent_session_id`` set) with no
parent history, at most ``delegation.max_concurrent_children`` at once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import orjson

from tether.store import StorageError, delegations, sessions

from .agent import run_agent
from .demo import CHILD_MARKER, RESULTS_MARKER
from .events import Tx
from .ledger import encode_payload
from .resolve import ResolveError, TurnSettings, build_provider, resolve_child
from .tools import Tool, ToolCallContext, register, tools_for
from .turns import EventSink

__all__ = ["DelegationService", "TaskSpec", "parse_tasks", "DELEGATE_TOOL"]

log = logging.getLogger("tether.delegation")

CHILD_SYSTEM_PROMPT = (
    "You are a helper agent started by another agent through tether's delegate_task. "
    "Do the task you are given and answer with a concise summary of the result; "
    "that summary is all the other agent will see."
)
SUMMARY_MAX_CHARS = 4000


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


def _task(obj: Any, where: str) -> TaskSpec:
    if not isinstance(obj, dict):
        raise ValueError(f"{where} must be an object")
    extra = set(obj) - {"goal", "context", "toolsets"}
    if extra:
        raise ValueError(f"{where} has unknown keys: {', '.join(sorted(extra))}")
    goal = obj.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        raise ValueError(f"{where}.goal must be a non-empty string")
    context = obj.get("context")
    if context is not None and not isinstance(context, str):
        raise ValueError(f"{where}.context must be a string")
    toolsets = obj.get("toolsets")
    if toolsets is not None and (not isinstance(toolsets, list)
                                 or not all(isinstance(t, str) for t in toolsets)):
        raise ValueError(f"{where}.toolsets must be a list of strings")
    return TaskSpec(goal, context, tuple(toolsets) if toolsets is not None else None)


def parse_tasks(args: dict[str, Any], max_tasks: int) -> list[TaskSpec]:
    """``{goal, context?, toolsets?}`` or ``{tasks: [...]}`` → tasks; ValueError says why."""
    if "tasks" in args:
        if set(args) - {"tasks"}:
            raise ValueError("give either `tasks` or a single `goal`, not both")
        tasks = args["tasks"]
        if not isinstance(tasks, list) or not tasks:
            raise ValueError("`tasks` must be a non-empty list")
        if len(tasks) > max_tasks:
            raise ValueError(f"at most {max_tasks} tasks per call")
        return [_task(t, f"tasks[{i}]") for i, t in enumerate(tasks)]
    return [_task(args, "arguments")]


class DelegationService:
    def __init__(self, services: Any) -> None:
        self.svc = services
        self.rt = services.rt
        self._background: dict[str, asyncio.Task[None]] = {}

    # -- children ---------------------------------------------------------

    async def run_children(self, parent_session_id: str, parent: TurnSettings, depth: int,
                           tasks: list[TaskSpec], delegation_id: str | None
                           ) -> list[dict[str, Any]]:
        """Run every task as a child agent, at most max_concurrent_children at once.

        Per-task failures are reported in that task's result; cancellation of the
        caller cancels every child.
        """
        slots = asyncio.Semaphore(max(1, self.rt.config.delegation.max_concurrent_children))
        results: list[dict[str, Any]] = [{} for _ in tasks]

        async def one(index: int, task: TaskSpec) -> None:
            async with slots:
                results[index] = await self._child(parent_session_id, parent, depth, index,
                                                   task, delegation_id)

        async with asyncio.TaskGroup() as tg:
            for i, t in enumerate(tasks):
                tg.create_task(one(i, t), name=f"child:{parent_session_id}:{i}")
        return results

    async def _child(self, parent_session_id: str, parent: TurnSettings, depth: int,
                     index: int, task: TaskSpec, delegation_id: str | None) -> dict[str, Any]:
        rt = self.rt
        started = time.monotonic()
        wanted = task.toolsets if task.toolsets is not None else parent.toolsets
        # a child never gets a toolset its parent did not have
        toolsets = tuple(t for t in wanted if t in parent.toolsets)
        settings = resolve_child(rt.config, parent, toolsets)
        child_id = "ses_" + secrets.token_hex(12)
        base = {"task_index": index, "child_session_id": child_id}
        if delegation_id:
            base["delegation_id"] = delegation_id

        def create(tx: Tx) -> None:
            sessions.insert(tx.conn, session_id=child_id, request_id=None, params_digest=None,
                            parent_session_id=parent_session_id, source="delegation",
                            title=task.goal[:200], cwd=None,
                            options={"provider": settings.provider, "model": settings.model,
                                     "toolsets": list(toolsets)}, now=tx.now)
            tx.event(parent_session_id, "subagent.start", {**base, "goal": task.goal})

        result: dict[str, Any] = {"task_index": index, "status": "failed", "summary": "",
                                  "api_calls": 0, "duration_seconds": 0.0,
                                  "model": settings.model, "exit_reason": "failed"}
        try:
            await rt.journal.write(create)
            prompt = f"{CHILD_MARKER} {task.goal}"
            if task.context:
                prompt += f"\n\nContext:\n{task.context}"
            sink = EventSink(rt, child_id, None)
            await sink.record([{"role": "user", "content": prompt}])
            provider = build_provider(settings, rt.config, rt.http, rt.providers,
                                      rt.home.config)

            def context(call_id: str) -> ToolCallContext:
                return ToolCallContext(session_id=child_id, admission_id=None, finite=True,
                                       depth=depth + 1, toolsets=toolsets, call_id=call_id,
                                       services=self.svc, settings=settings)

            out = await run_agent(
                provider=provider, model=settings.model, reasoning=settings.reasoning,
                messages=[{"role": "system", "content": CHILD_SYSTEM_PROMPT},
                          {"role": "user", "content": prompt}],
                tools=tools_for(toolsets, depth=depth + 1,
                                max_depth=rt.config.delegation.max_depth),
                max_turns=settings.max_turns, sink=sink, tool_context=context)
            await sink.settle()
            result.update(status="completed" if out.ok else "failed",
                          summary=out.text[:SUMMARY_MAX_CHARS], api_calls=out.api_calls,
                          exit_reason=out.exit_reason)
            if out.error:
                result["error"] = out.error
        except asyncio.CancelledError:
            result.update(status="interrupted", exit_reason="interrupted",
                          error="the child was stopped before it finished")
            result["duration_seconds"] = round(time.monotonic() - started, 3)
            self._announce_nowait(parent_session_id, base, result)
            raise
        except (ResolveError, StorageError) as exc:
            result["error"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - one child's bug is that task's failure
            log.exception("child %s of %s crashed", index, parent_session_id)
            result["error"] = f"internal error in child agent: {type(exc).__name__}"
        result["duration_seconds"] = round(time.monotonic() - started, 3)
        self._announce_nowait(parent_session_id, base, result)
        return result

    def _announce_nowait(self, parent_session_id: str, base: dict[str, Any],
                         result: dict[str, Any]) -> None:
        payload = {**base, "status": result["status"], "summary": result["summary"]}
        # queued synchronously: ordered before whatever the parent writes next
        fut = self.rt.journal.submit(
            lambda tx: tx.event(parent_session_id, "subagent.complete", payload))
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())

    # -- the tool ---------------------------------------------------------

    async def tool(self, args: dict[str, Any], ctx: ToolCallContext) -> str:
        try:
            tasks = parse_tasks(args, self.rt.config.delegation.max_tasks)
        except ValueError as exc:
            return orjson.dumps({"error": f"delegate_task: {exc}"}).decode()
        if ctx.finite or ctx.admission_id is None:
            started = time.monotonic()
            results = await self.run_children(ctx.session_id, ctx.settings, ctx.depth, tasks,
                                              None)
            return orjson.dumps({"results": results, "total_duration_seconds":
                                 round(time.monotonic() - started, 3)}).decode()
        delegation_id = await self.dispatch(ctx, tasks)
        return orjson.dumps({"status": "dispatched", "delegation_id": delegation_id,
                             "tasks": len(tasks)}).decode()

    # -- background -------------------------------------------------------

    async def dispatch(self, ctx: ToolCallContext, tasks: list[TaskSpec]) -> str:
        rt = self.rt
        delegation_id = "dlg_" + secrets.token_hex(12)
        task_json = orjson.dumps({"tasks": [t.as_json() for t in tasks], "depth": ctx.depth,
                                  "settings": _settings_json(ctx.settings)}).decode()

        def unit(tx: Tx) -> None:
            delegations.insert(tx.conn, delegation_id=delegation_id,
                               origin_session_id=ctx.session_id,
                               origin_admission_id=ctx.admission_id or "",
                               task_json=task_json, owner_epoch=rt.epoch, now=tx.now)
            tx.event(ctx.session_id, "delegation.dispatched",
                     {"delegation_id": delegation_id, "tasks": [t.as_json() for t in tasks]},
                     ctx.admission_id)

        await rt.journal.write(unit)
        task = rt.spawn(
            self._background_run(delegation_id, ctx.session_id, ctx.settings, ctx.depth, tasks),
            f"delegation:{delegation_id}")
        self._background[delegation_id] = task
        task.add_done_callback(lambda _: self._background.pop(delegation_id, None))
        return delegation_id

    async def _background_run(self, delegation_id: str, origin: str, settings: TurnSettings,
                              depth: int, tasks: list[TaskSpec]) -> None:
        started = time.monotonic()
        try:
            results = await self.run_children(origin, settings, depth, tasks, delegation_id)
            state = "completed" if any(r["status"] == "completed" for r in results) else "failed"
        except asyncio.CancelledError:
            results = [_interrupted(i, t, settings.model) for i, t in enumerate(tasks)]
            state = "interrupted"
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        body = {"results": results,
                "total_duration_seconds": round(time.monotonic() - started, 3)}
        try:
            await self.rt.journal.write(lambda tx: delegations.finish(
                tx.conn, delegation_id, state, orjson.dumps(body).decode(), tx.now))
            await self.deliver(delegation_id)
        except Exception:  # noqa: BLE001 - recovery delivers it on the next start
            log.exception("could not record/deliver delegation %s", delegation_id)

    async def deliver(self, delegation_id: str) -> None:
        """Deliver a finished row into its origin session, exactly once."""
        row = await self.rt.db.read(lambda c: delegations.get(c, delegation_id))
        if row is None or row["state"] == "running" or row["delivery_state"] == "delivered":
            return
        origin = row["origin_session_id"]
        results = orjson.loads(row["result_json"] or '{"results": []}')
        text = (f"{RESULTS_MARKER} Background delegation {delegation_id} finished "
                f"({row['state']}). Results:\n" + orjson.dumps(results).decode())
        payload_json = encode_payload({"text": text, "finite": False,
                                       "delegation_id": delegation_id})

        def mark(tx: Tx) -> None:
            if not delegations.mark_delivered(tx.conn, delegation_id, tx.now):
                raise _AlreadyDelivered
            tx.event(origin, "delegation.complete",
                     {"delegation_id": delegation_id, "state": row["state"]})

        try:
            await self.svc.admissions.admit("delegation", origin, delegation_id, payload_json,
                                            extra_unit=mark, internal=True)
        except _AlreadyDelivered:
            pass

    async def recover(self) -> None:
        """After a restart: running rows → interrupted; deliver every pending row."""
        rt = self.rt

        def interrupt(conn: Any) -> list[str]:
            ids = []
            for row in [r for r in _running_rows(conn)]:
                spec = orjson.loads(row["task_json"])
                model = spec.get("settings", {}).get("model", "")
                body = {"results": [_interrupted(i, TaskSpec(t["goal"]), model)
                                    for i, t in enumerate(spec["tasks"])],
                        "total_duration_seconds": 0.0}
                if delegations.finish(conn, row["delegation_id"], "interrupted",
                                      orjson.dumps(body).decode(), time.time()):
                    ids.append(row["delegation_id"])
            return ids

        await rt.db.write(interrupt)
        for row in await rt.db.read(delegations.undelivered):
            try:
                await self.deliver(row["delegation_id"])
            except Exception:  # noqa: BLE001
                log.exception("could not deliver delegation %s", row["delegation_id"])

    async def stop_all(self) -> None:
        """Shutdown: cancel background children; each records itself interrupted."""
        tasks = list(self._background.values())
        for task in tasks:
            task.cancel("owner shutting down")
        if tasks:
            await asyncio.wait(tasks, timeout=10)


class _AlreadyDelivered(Exception):
    pass


def _running_rows(conn: Any) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT delegation_id, task_json FROM async_delegations "
                        "WHERE state = 'running'")
    return [dict(r) for r in rows]


def _interrupted(index: int, task: TaskSpec, model: str) -> dict[str, Any]:
    return {"task_index": index, "status": "interrupted", "summary": "", "api_calls": 0,
            "duration_seconds": 0.0, "model": model, "exit_reason": "interrupted",
            "error": "the owner stopped before this task finished"}


def _settings_json(s: TurnSettings) -> dict[str, Any]:
    # no api_key: task_json is stored in state.db
    return {"provider": s.provider, "model": s.model, "toolsets": list(s.toolsets)}


async def _delegate_task(args: dict[str, Any], ctx: ToolCallContext) -> str:
    return await ctx.services.delegations.tool(args, ctx)


_TASK_SCHEMA = {
    "type": "object",
    "properties": {
        "goal": {"type": "string", "description": "What the helper agent must achieve."},
        "context": {"type": "string", "description": "Facts the helper needs; it sees "
                                                     "nothing of this conversation."},
        "toolsets": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["goal"],
}

DELEGATE_TOOL = register(Tool(
    name="delegate_task",
    toolset="delegation",
    description=("Hand one task ({goal, context?, toolsets?}) or several ({tasks: [...]}) to "
                 "helper agents that run in parallel. Each helper starts with no history. "
                 "Returns {results: [{task_index, status, summary, ...}]} when the helpers "
                 "finish, or {status: 'dispatched', delegation_id} when they run in the "
                 "background and their results arrive later as a new message."),
    parameters={
        "type": "object",
        "properties": {
            **_TASK_SCHEMA["properties"],
            "tasks": {"type": "array", "items": _TASK_SCHEMA, "minItems": 1},
        },
    },
    run=_delegate_task,
    max_depth_key="delegation.max_depth",
))
