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
parent history and never a toolset its parent lacks, at most
``delegation.max_concurrent_children`` at once per call. docs/delegation.md
has the whole story (events, limits, the exactly-once argument).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tether.store import StorageError, admissions, delegations, events, sessions

from . import faults
from .agent import run_agent
from .demo import CHILD_MARKER, RESULTS_MARKER
from .events import Tx
from .ledger import TURN_OPTION_KEY, encode_payload
from .resolve import ResolveError, TurnSettings, build_provider, resolve_child
from .tools import Tool, ToolCallContext, register, tools_for
from .turns import EventSink

__all__ = ["DelegationService", "TaskSpec", "parse_tasks", "child_toolsets", "DELEGATE_TOOL"]

log = logging.getLogger("tether.delegation")

CHILD_SYSTEM_PROMPT = (
    "You are a helper agent started by another agent through tether's delegate_task. "
    "Do the task you are given and answer with a concise summary of the result; "
    "that summary is all the other agent will see."
)
SUMMARY_MAX_CHARS = 4000
#: how long shutdown waits for cancelled background delegations to record themselves
STOP_WAIT_SECONDS = 10.0
_TASK_KEYS = ("goal", "context", "toolsets")


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
        raise ValueError(f"{where} must be an object with a `goal`")
    extra = set(obj) - set(_TASK_KEYS)
    if extra:
        raise ValueError(f"{where} has unknown keys: {', '.join(sorted(extra))} "
                         f"(a task has {', '.join(_TASK_KEYS)})")
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
    """``{goal, context?, toolsets?}`` or ``{tasks: [...]}`` → tasks; ValueError says why.

    The messages are written for the model that made the call: it reads them as
    the tool's result and can correct itself.
    """
    if "tasks" in args:
        if mixed := sorted(set(args) - {"tasks"}):
            raise ValueError(f"give either `tasks` or one task's keys, not both "
                             f"(also got: {', '.join(mixed)})")
        tasks = args["tasks"]
        if not isinstance(tasks, list) or not tasks:
            raise ValueError("`tasks` must be a non-empty list of {goal, context?, toolsets?}")
        if len(tasks) > max_tasks:
            raise ValueError(f"{len(tasks)} tasks given; at most {max_tasks} per call")
        return [_task(t, f"tasks[{i}]") for i, t in enumerate(tasks)]
    if "goal" not in args:
        raise ValueError("give `goal` (one task) or `tasks` (a list of tasks)")
    return [_task(args, "arguments")]


def child_toolsets(requested: tuple[str, ...] | None,
                   parent: tuple[str, ...]) -> tuple[str, ...]:
    """A child's toolsets: what its task asked for (default: all of the parent's),
    minus anything the parent itself does not have."""
    wanted = parent if requested is None else requested
    return tuple(dict.fromkeys(t for t in wanted if t in parent))


def _interrupted(index: int, model: str, error: str) -> dict[str, Any]:
    return {"task_index": index, "status": "interrupted", "summary": "", "api_calls": 0,
            "duration_seconds": 0.0, "model": model, "exit_reason": "interrupted",
            "error": error}


def _fill_interrupted(results: list[dict[str, Any] | None], model: str,
                      error: str) -> list[dict[str, Any]]:
    """Keep every finished child's result; the others say interrupted."""
    return [r if r is not None else _interrupted(i, model, error)
            for i, r in enumerate(results)]


OWNER_STOPPED = "the owner stopped before this task finished"


class DelegationService:
    def __init__(self, services: Any) -> None:
        self.svc = services
        self.rt = services.rt
        self._background: dict[str, asyncio.Task[None]] = {}
        self._running_children: dict[int, asyncio.Semaphore] = {}

    # -- children ---------------------------------------------------------

    async def run_children(self, parent_session_id: str, parent: TurnSettings, depth: int,
                           tasks: list[TaskSpec], *, admission_id: str | None = None,
                           delegation_id: str | None = None,
                           results: list[dict[str, Any] | None] | None = None
                           ) -> list[dict[str, Any]]:
        """Run every task as a child agent, at most max_concurrent_children at once.

        ``results`` (one slot per task) is filled in place as children finish, so a
        caller that is cancelled still knows which ones completed. Per-task failures
        are reported in that task's result; cancellation of the caller cancels every
        child. With ``delegation_id``, each finished child is also saved on the row.
        """
        slots = asyncio.Semaphore(max(1, self.rt.config.delegation.max_concurrent_children))
        if results is None:
            results = [None] * len(tasks)

        def done(index: int, child: dict[str, Any], result: dict[str, Any]) -> None:
            results[index] = result
            payload = {**child, "status": result["status"], "summary": result["summary"]}
            progress = None
            if delegation_id is not None:
                progress = orjson.dumps({"results": [r for r in results if r is not None],
                                         "partial": True}).decode()

            def unit(tx: Tx) -> None:
                tx.event(parent_session_id, "subagent.complete", payload, admission_id)
                if delegation_id is not None and progress is not None:
                    # a crash now still keeps this child's work
                    delegations.record_progress(tx.conn, delegation_id, progress)

            # queued synchronously: ordered before whatever the parent writes next
            fut = self.rt.journal.submit(unit)
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def one(index: int, task: TaskSpec) -> None:
            async with slots, self._owner_slots(depth):
                await self._child(parent_session_id, parent, depth, index, task,
                                  admission_id, delegation_id, done)

        async with asyncio.TaskGroup() as tg:
            for i, t in enumerate(tasks):
                tg.create_task(one(i, t), name=f"child:{parent_session_id}:{i}")
        return [r for r in results if r is not None]

    def _owner_slots(self, depth: int) -> asyncio.Semaphore:
        """The owner-wide bound on running children (SPEC §10: bounded children).

        One semaphore per depth: a child waiting for its own children holds a slot
        of its level only, so the deepest level always makes progress and nested
        delegation cannot deadlock on a shared pool.
        """
        sem = self._running_children.get(depth)
        if sem is None:
            limit = max(1, self.rt.config.delegation.max_running_children)
            sem = self._running_children[depth] = asyncio.Semaphore(limit)
        return sem

    async def _child(self, parent_session_id: str, parent: TurnSettings, depth: int,
                     index: int, task: TaskSpec, admission_id: str | None,
                     delegation_id: str | None,
                     done: Callable[[int, dict[str, Any], dict[str, Any]], None]) -> None:
        rt = self.rt
        started = time.monotonic()
        toolsets = child_toolsets(task.toolsets, parent.toolsets)
        settings = resolve_child(rt.config, parent, toolsets)
        child_id = "ses_" + secrets.token_hex(12)
        child: dict[str, Any] = {"task_index": index, "child_session_id": child_id}
        if delegation_id:
            child["delegation_id"] = delegation_id

        def create(tx: Tx) -> None:
            sessions.insert(tx.conn, session_id=child_id, request_id=None, params_digest=None,
                            parent_session_id=parent_session_id, source="delegation",
                            title=task.goal[:200], cwd=None,
                            options={"provider": settings.provider, "model": settings.model,
                                     "toolsets": list(toolsets)}, now=tx.now)
            tx.event(parent_session_id, "subagent.start", {**child, "goal": task.goal},
                     admission_id)

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
                # finite: a child's own delegations join inside the child
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
            done(index, child, result)
            raise
        except (ResolveError, StorageError) as exc:
            result["error"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - one child's bug is that task's failure
            log.exception("child %s of %s crashed", index, parent_session_id)
            result["error"] = f"internal error in child agent: {type(exc).__name__}"
        result["duration_seconds"] = round(time.monotonic() - started, 3)
        done(index, child, result)

    # -- the tool ---------------------------------------------------------

    async def tool(self, args: dict[str, Any], ctx: ToolCallContext) -> str:
        try:
            tasks = parse_tasks(args, self.rt.config.delegation.max_tasks)
        except ValueError as exc:
            return orjson.dumps({"error": f"delegate_task: {exc}"}).decode()
        if ctx.finite or ctx.admission_id is None:
            started = time.monotonic()
            results = await self.run_children(ctx.session_id, ctx.settings, ctx.depth, tasks,
                                              admission_id=ctx.admission_id)
            return orjson.dumps({"results": results, "total_duration_seconds":
                                 round(time.monotonic() - started, 3)}).decode()
        delegation_id = await self.dispatch(ctx, tasks)
        return orjson.dumps({"status": "dispatched", "delegation_id": delegation_id,
                             "tasks": len(tasks)}).decode()

    # -- background -------------------------------------------------------

    async def dispatch(self, ctx: ToolCallContext, tasks: list[TaskSpec]) -> str:
        rt = self.rt
        delegation_id = "dlg_" + secrets.token_hex(12)
        task_json = orjson.dumps({
            "tasks": [t.as_json() for t in tasks], "depth": ctx.depth,
            "settings": _settings_json(ctx.settings),
            # what the children run on, for a result written by recovery
            "child_model": resolve_child(rt.config, ctx.settings, ()).model}).decode()

        def unit(tx: Tx) -> None:
            delegations.insert(tx.conn, delegation_id=delegation_id,
                               origin_session_id=ctx.session_id,
                               origin_admission_id=ctx.admission_id or "",
                               task_json=task_json, owner_epoch=rt.epoch, now=tx.now)
            tx.event(ctx.session_id, "delegation.dispatched",
                     {"delegation_id": delegation_id, "tasks": [t.as_json() for t in tasks]},
                     ctx.admission_id)

        def start(fut: asyncio.Future[Any]) -> None:
            # tied to the commit, not to this caller: a turn stopped while it waits
            # here still leaves a recorded delegation that runs and is delivered
            if fut.cancelled() or fut.exception() is not None:
                return
            task = rt.spawn(self._background_run(delegation_id, ctx.session_id, ctx.settings,
                                                 ctx.depth, tasks),
                            f"delegation:{delegation_id}")
            self._background[delegation_id] = task
            task.add_done_callback(lambda _: self._background.pop(delegation_id, None))

        fut = rt.journal.submit(unit)
        fut.add_done_callback(start)
        await asyncio.shield(fut)
        return delegation_id

    async def _background_run(self, delegation_id: str, origin: str, settings: TurnSettings,
                              depth: int, tasks: list[TaskSpec]) -> None:
        # runs in the owner's TaskGroup: nothing may escape from here but cancellation
        # of the recording itself, which recovery then covers on the next start
        started = time.monotonic()
        results: list[dict[str, Any] | None] = [None] * len(tasks)
        try:
            await self.run_children(origin, settings, depth, tasks,
                                    delegation_id=delegation_id, results=results)
            state = "completed" if any(r and r["status"] == "completed" for r in results) \
                else "failed"
        except asyncio.CancelledError:
            state = "interrupted"
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - a bug here must not take the owner down
            log.exception("background delegation %s crashed", delegation_id)
            state = "failed"
        model = resolve_child(self.rt.config, settings, ()).model
        body = {"results": _fill_interrupted(results, model, OWNER_STOPPED if state ==
                                             "interrupted" else "internal error"),
                "total_duration_seconds": round(time.monotonic() - started, 3)}
        try:
            await self.rt.journal.write(lambda tx: delegations.finish(
                tx.conn, delegation_id, state, orjson.dumps(body).decode(), tx.now))
            # the crash suite kills the owner here: finished but not yet delivered
            await faults.pause("pause_before_delivery")
            await self.deliver(delegation_id)
        except Exception:  # noqa: BLE001 - recovery delivers it on the next start
            log.exception("could not record/deliver delegation %s", delegation_id)

    async def deliver(self, delegation_id: str) -> None:
        """Deliver a finished row into its origin session, exactly once.

        The new admission (principal ``delegation``, request_id = delegation_id) and
        the row's ``delivered`` mark commit together or not at all; the ledger's
        unique identity makes any second attempt find the first admission.
        """
        def read(c: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
            row = delegations.get(c, delegation_id)
            dispatcher = admissions.get(c, row["origin_admission_id"]) if row else None
            return row, dispatcher

        row, dispatcher = await self.rt.db.read(read)
        if row is None or row["state"] == "running" or row["delivery_state"] == "delivered":
            return
        origin = row["origin_session_id"]  # stored routing only, never ambient state
        results = orjson.loads(row["result_json"] or '{"results": []}')
        text = (f"{RESULTS_MARKER} Background delegation {delegation_id} finished "
                f"({row['state']}). Results:\n" + orjson.dumps(results).decode())
        payload: dict[str, Any] = {"text": text, "finite": False, "delegation_id": delegation_id}
        if dispatcher is not None:
            # the follow-up turn runs with the per-turn options of the turn that
            # dispatched (its model, provider, endpoint), not the session's defaults;
            # they are stored, so a repeated delivery builds the same payload
            options = orjson.loads(dispatcher["payload_json"]).get(TURN_OPTION_KEY)
            if options:
                payload[TURN_OPTION_KEY] = options
        payload_json = encode_payload(payload)
        statuses = [{"task_index": r.get("task_index"), "status": r.get("status")}
                    for r in results.get("results", [])]

        def mark(tx: Tx) -> None:
            if not delegations.mark_delivered(tx.conn, delegation_id, tx.now):
                raise _AlreadyDelivered
            adm = admissions.find(tx.conn, "delegation", origin, delegation_id)
            tx.event(origin, "delegation.complete",
                     {"delegation_id": delegation_id, "state": row["state"],
                      "admission_id": adm["admission_id"] if adm else None,
                      "results": statuses})

        try:
            await self.svc.admissions.admit("delegation", origin, delegation_id, payload_json,
                                            extra_unit=mark, internal=True)
        except _AlreadyDelivered:
            pass

    async def recover(self) -> None:
        """After a restart: rows an older owner left running → interrupted (keeping the
        children that had finished); then deliver every finished, undelivered row."""
        rt = self.rt

        def interrupt(tx: Tx) -> None:
            for row in delegations.running_before(tx.conn, rt.epoch):
                dlg = row["delegation_id"]
                try:
                    spec = orjson.loads(row["task_json"])
                    saved = orjson.loads(row["result_json"] or "{}").get("results", [])
                    slots: list[dict[str, Any] | None] = [None] * len(spec["tasks"])
                    for r in saved:
                        if isinstance(r.get("task_index"), int) and \
                                0 <= r["task_index"] < len(slots):
                            slots[r["task_index"]] = r
                    model = spec.get("child_model") or spec.get("settings", {}).get("model", "")
                    body = {"results": _fill_interrupted(slots, model, OWNER_STOPPED),
                            "total_duration_seconds": 0.0}
                except (ValueError, KeyError, TypeError, AttributeError):
                    log.exception("delegation %s has an unreadable row", dlg)
                    body = {"results": [], "total_duration_seconds": 0.0}
                    slots = []
                delegations.finish(tx.conn, dlg, "interrupted", orjson.dumps(body).decode(),
                                   tx.now)
                # children that had started and were still running when the owner
                # died end here, for viewers, as any child ends: with subagent.complete
                origin = row["origin_session_id"]
                for child in _started_children(tx.conn, origin, dlg):
                    index = child.get("task_index")
                    if isinstance(index, int) and 0 <= index < len(slots) \
                            and slots[index] is None:
                        tx.event(origin, "subagent.complete",
                                 {"task_index": index, "child_session_id":
                                  child.get("child_session_id"), "delegation_id": dlg,
                                  "status": "interrupted", "summary": ""},
                                 row["origin_admission_id"] or None)

        try:
            await rt.journal.write(interrupt)
            pending = await rt.db.read(delegations.undelivered)
        except StorageError as exc:
            log.error("could not recover background delegations: %s", exc.detail)
            return
        for row in pending:
            try:
                await self.deliver(row["delegation_id"])
            except Exception:  # noqa: BLE001 - the next start tries again
                log.exception("could not deliver delegation %s", row["delegation_id"])

    async def stop_all(self) -> None:
        """Shutdown: cancel background children; each delegation records itself
        interrupted and is delivered (its admission runs after the next start)."""
        tasks = list(self._background.values())
        for task in tasks:
            task.cancel("owner shutting down")
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT_SECONDS)


class _AlreadyDelivered(Exception):
    pass


def _started_children(conn: Any, session_id: str, delegation_id: str) -> list[dict[str, Any]]:
    """The subagent.start payloads of ``delegation_id`` in the origin session's log."""
    out = []
    for text in events.payloads_of_type(conn, session_id, "subagent.start"):
        payload = orjson.loads(text)
        if isinstance(payload, dict) and payload.get("delegation_id") == delegation_id:
            out.append(payload)
    return out


def _settings_json(s: TurnSettings) -> dict[str, Any]:
    # no api_key: task_json is stored in state.db
    return {"provider": s.provider, "model": s.model, "toolsets": list(s.toolsets)}


async def _delegate_task(args: dict[str, Any], ctx: ToolCallContext) -> str:
    return await ctx.services.delegations.tool(args, ctx)


_TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal": {"type": "string", "description": "What the helper agent must achieve."},
        "context": {"type": "string", "description": "Facts the helper needs; it sees "
                                                     "nothing of this conversation."},
        "toolsets": {"type": "array", "items": {"type": "string"},
                     "description": "Toolsets the helper may use (at most yours)."},
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
