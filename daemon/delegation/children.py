"""Run a delegate_task call's tasks as child agents, each in a child session of its own.

A child starts with no parent history: a system prompt, its task as the one
user message, and never a toolset its parent lacks. At most
``delegation.max_concurrent_children`` of one call run at once, and at most
``delegation.max_running_children`` per depth in the whole owner. A child's
end is announced in the parent's session with ``subagent.complete`` (and, for
a background delegation, saved on its row) as soon as it ends.
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

from tether.store import StorageError
from tether.store.tables import delegations, sessions

from ..config.core import Config
from ..config.turn import ResolveError, TurnSettings, resolve_child
from ..engine.core import AgentRun, Engine
from ..engine.sink import EventSink
from ..ledger.journal import Journal, Tx
from ..runtime.supervisor import Supervisor
from .tasks import CHILD_SYSTEM_PROMPT, TaskSpec, child_prompt, child_toolsets

__all__ = ["ChildRunner", "Parent"]

log = logging.getLogger("tether.delegation")

SUMMARY_MAX_CHARS = 4000


@dataclass(frozen=True)
class Parent:
    """The agent that delegated: its session, admission (None for a child), settings, depth."""

    session_id: str
    admission_id: str | None
    settings: TurnSettings
    depth: int
    cwd: str | None = None  # the session's working directory, which children share


Done = Callable[[int, dict[str, Any], dict[str, Any]], None]


class ChildRunner:
    def __init__(self, engine: Engine, journal: Journal, supervisor: Supervisor,
                 config: Config) -> None:
        self._engine = engine
        self._journal = journal
        self._supervisor = supervisor
        self._config = config
        self._per_depth: dict[int, asyncio.Semaphore] = {}

    async def run(self, parent: Parent, tasks: list[TaskSpec], *,
                  delegation_id: str | None = None,
                  results: list[dict[str, Any] | None] | None = None) -> list[dict[str, Any]]:
        """Run every task as a child agent, at most max_concurrent_children at once.

        ``results`` (one slot per task) is filled in place as children finish, so a
        caller that is cancelled still knows which ones completed. Per-task failures
        are reported in that task's result; cancellation of the caller cancels every
        child. With ``delegation_id``, each finished child is also saved on the row.
        """
        slots = asyncio.Semaphore(max(1, self._config.delegation.max_concurrent_children))
        filled: list[dict[str, Any] | None] = [None] * len(tasks) if results is None else results

        def done(index: int, child: dict[str, Any], result: dict[str, Any]) -> None:
            filled[index] = result
            payload = {**child, "status": result["status"], "summary": result["summary"]}
            progress = None
            if delegation_id is not None:
                progress = orjson.dumps({"results": [r for r in filled if r is not None],
                                         "partial": True}).decode()

            usage, model, calls = result.get("usage") or {}, result["model"], result["api_calls"]
            if usage:
                payload["usage"] = usage

            def unit(tx: Tx) -> None:
                # what the child spent counts for its own session and for the session
                # that delegated (docs/long-sessions.md, "Tokens and cost")
                for sid in (child["child_session_id"], parent.session_id):
                    sessions.add_usage(tx.conn, sid, model, usage, calls)
                tx.event(parent.session_id, "subagent.complete", payload, parent.admission_id)
                if delegation_id is not None and progress is not None:
                    # a crash now still keeps this child's work
                    delegations.record_progress(tx.conn, delegation_id, progress)

            # queued synchronously: ordered before whatever the parent writes next
            self._write_now_or_later(unit, f"the end of child {index} of {parent.session_id}")

        async def one(index: int, task: TaskSpec) -> None:
            async with slots, self._owner_slots(parent.depth):
                await self._child(parent, index, task, delegation_id, done)

        async with asyncio.TaskGroup() as tg:
            for i, t in enumerate(tasks):
                tg.create_task(one(i, t), name=f"child:{parent.session_id}:{i}")
        return [r for r in filled if r is not None]

    def _write_now_or_later(self, unit: Callable[[Tx], None], what: str) -> None:
        """Submit ``unit`` now (keeping its place in the session's order); if the store
        refuses it, keep writing it in the background until the store heals."""
        fut = self._journal.submit(unit)
        sup, journal = self._supervisor, self._journal

        def after(f: asyncio.Future[Any]) -> None:
            if f.cancelled() or not isinstance(f.exception(), StorageError):
                return
            sup.spawn(journal.persist(unit, what, give_up=lambda _: sup.draining),
                      f"retry:{what}").add_done_callback(
                lambda t: t.cancelled() or t.exception())

        fut.add_done_callback(after)

    def _owner_slots(self, depth: int) -> asyncio.Semaphore:
        """The owner-wide bound on running children (SPEC §10: bounded children).

        One semaphore per depth: a child waiting for its own children holds a slot
        of its level only, so the deepest level always makes progress and nested
        delegation cannot deadlock on a shared pool.
        """
        sem = self._per_depth.get(depth)
        if sem is None:
            limit = max(1, self._config.delegation.max_running_children)
            sem = self._per_depth[depth] = asyncio.Semaphore(limit)
        return sem

    async def _child(self, parent: Parent, index: int, task: TaskSpec,
                     delegation_id: str | None, done: Done) -> None:
        started = time.monotonic()
        toolsets = child_toolsets(task.toolsets, parent.settings.toolsets)
        settings = resolve_child(self._config, parent.settings, toolsets)
        child_id = "ses_" + secrets.token_hex(12)
        child: dict[str, Any] = {"task_index": index, "child_session_id": child_id}
        if delegation_id:
            child["delegation_id"] = delegation_id

        def create(tx: Tx) -> None:
            sessions.insert(tx.conn, session_id=child_id, request_id=None, params_digest=None,
                            parent_session_id=parent.session_id, source="delegation",
                            title=task.goal[:200], cwd=parent.cwd,
                            options={"provider": settings.provider, "model": settings.model,
                                     "toolsets": list(toolsets)}, now=tx.now)
            tx.event(parent.session_id, "subagent.start", {**child, "goal": task.goal},
                     parent.admission_id)

        result: dict[str, Any] = {"task_index": index, "status": "failed", "summary": "",
                                  "api_calls": 0, "duration_seconds": 0.0,
                                  "model": settings.model, "exit_reason": "failed"}
        try:
            await self._journal.write(create)
            prompt = child_prompt(task)
            sink = EventSink(self._journal, child_id, None, durable=True)
            await sink.record([{"role": "user", "content": prompt}])
            # no late delivery: a child's own delegations join inside the child
            # unattended: nobody watches a child's session to answer its prompts
            run = AgentRun(session_id=child_id, admission_id=None, depth=parent.depth + 1,
                           late_delivery=False, cwd=parent.cwd, attended=False)
            out = await self._engine.run(run, settings, [
                {"role": "system", "content": CHILD_SYSTEM_PROMPT},
                {"role": "user", "content": prompt}], sink)
            result.update(status="completed" if out.ok else "failed",
                          summary=out.text[:SUMMARY_MAX_CHARS], api_calls=out.api_calls,
                          exit_reason=out.exit_reason, usage=out.usage)
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
            log.exception("child %s of %s crashed", index, parent.session_id)
            result["error"] = f"internal error in child agent: {type(exc).__name__}"
        result["duration_seconds"] = round(time.monotonic() - started, 3)
        done(index, child, result)
