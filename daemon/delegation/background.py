"""Background delegations: dispatched by interactive turns, delivered exactly once.

``dispatch`` records an ``async_delegations`` row (and ``delegation.dispatched``)
and starts the children once that commit is made, tied to the commit and not
to the calling turn. When they end, the row is finished with every child's
result and delivered into the origin session (by stored session id only) as a
new admission of principal ``delegation`` whose identity is the delegation_id,
by the one late-delivery rule (daemon/ledger/delivery.py: the row marked delivered
in the same transaction, a second attempt finds the first admission and adds
nothing). After a restart, ``recover`` finishes rows an older owner left
running as ``interrupted`` and delivers whatever is undelivered.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

import orjson

from tether.store.conn import Conn
from tether.store.tables import delegations, events

from ..config.core import Config
from ..config.turn import TurnSettings, resolve_child
from ..ledger.delivery import Admit, LateDelivery, Letter
from ..ledger.journal import Journal, Tx
from ..runtime.supervisor import Supervisor
from .children import ChildRunner, Parent
from .tasks import OWNER_STOPPED, TaskSpec, fill_interrupted, results_message

__all__ = ["BackgroundDelegations"]

log = logging.getLogger("tether.delegation")

#: how long shutdown waits for cancelled background delegations to record themselves
STOP_WAIT_SECONDS = 10.0


class BackgroundDelegations:
    def __init__(self, children: ChildRunner, journal: Journal, supervisor: Supervisor,
                 config: Config, admit: Admit, *, epoch: int) -> None:
        self._children = children
        self._journal = journal
        self._supervisor = supervisor
        self._config = config
        self._epoch = epoch
        self._running: dict[str, asyncio.Task[None]] = {}
        self._late = LateDelivery(journal, supervisor, admit, principal="delegation",
                                  what="delegation", get=delegations.get,
                                  mark=delegations.mark_delivered,
                                  origin_column="origin_admission_id", letter=_letter)

    async def dispatch(self, parent: Parent, tasks: list[TaskSpec]) -> str:
        """Record the delegation and start it; its id once the row is committed."""
        delegation_id = "dlg_" + secrets.token_hex(12)
        task_json = orjson.dumps({
            "tasks": [t.as_json() for t in tasks], "depth": parent.depth,
            "settings": _settings_json(parent.settings),
            # what the children run on, for a result written by recovery
            "child_model": resolve_child(self._config, parent.settings, ()).model}).decode()
        epoch = self._epoch

        def unit(tx: Tx) -> None:
            delegations.insert(tx.conn, delegation_id=delegation_id,
                               origin_session_id=parent.session_id,
                               origin_admission_id=parent.admission_id or "",
                               task_json=task_json, owner_epoch=epoch, now=tx.now)
            tx.event(parent.session_id, "delegation.dispatched",
                     {"delegation_id": delegation_id, "tasks": [t.as_json() for t in tasks]},
                     parent.admission_id)

        def start(fut: asyncio.Future[Any]) -> None:
            # tied to the commit, not to this caller: a turn stopped while it waits
            # here still leaves a recorded delegation that runs and is delivered
            if fut.cancelled() or fut.exception() is not None:
                return
            task = self._supervisor.spawn(self._run(delegation_id, parent, tasks),
                                          f"delegation:{delegation_id}")
            self._running[delegation_id] = task
            task.add_done_callback(lambda _: self._running.pop(delegation_id, None))

        fut = self._journal.submit(unit)
        fut.add_done_callback(start)
        await asyncio.shield(fut)
        return delegation_id

    async def _run(self, delegation_id: str, parent: Parent, tasks: list[TaskSpec]) -> None:
        # runs in the owner's TaskGroup: nothing may escape from here but cancellation
        # of the recording itself, which recovery then covers on the next start
        started = time.monotonic()
        results: list[dict[str, Any] | None] = [None] * len(tasks)
        try:
            await self._children.run(parent, tasks, delegation_id=delegation_id,
                                     results=results)
            state = "completed" if any(r and r["status"] == "completed" for r in results) \
                else "failed"
        except asyncio.CancelledError:
            state = "interrupted"
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - a bug here must not take the owner down
            log.exception("background delegation %s crashed", delegation_id)
            state = "failed"
        model = resolve_child(self._config, parent.settings, ()).model
        body = orjson.dumps({
            "results": fill_interrupted(results, model, OWNER_STOPPED if state ==
                                        "interrupted" else "internal error"),
            "total_duration_seconds": round(time.monotonic() - started, 3)}).decode()
        await self._late.finish(
            delegation_id,
            lambda tx: delegations.finish(tx.conn, delegation_id, state, body, tx.now))

    async def recover(self, dead_epoch: int | None = None) -> None:
        """After a restart: rows an older owner (or, in a fleet, the dead node of
        ``dead_epoch``) left running → interrupted (keeping the children that had
        finished); then deliver every finished, undelivered row."""
        epoch = self._epoch

        def interrupt(tx: Tx) -> None:
            for row in delegations.running_before(tx.conn, epoch, dead_epoch):
                _interrupt(tx, row)

        await self._late.recover(interrupt, delegations.undelivered, "delegation_id")

    async def stop_all(self) -> None:
        """Shutdown: cancel background children; each delegation records itself
        interrupted and is delivered (its admission runs after the next start)."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel("owner shutting down")
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT_SECONDS)


def _letter(row: dict[str, Any]) -> Letter:
    """A finished row's results as the follow-up turn's message, and
    ``delegation.complete`` (the statuses, the follow-up's admission) with it."""
    delegation_id, origin, state = row["delegation_id"], row["origin_session_id"], row["state"]
    results = orjson.loads(row["result_json"] or '{"results": []}')
    statuses = [{"task_index": r.get("task_index"), "status": r.get("status")}
                for r in results.get("results", [])]

    def announce(tx: Tx, admission_id: str | None) -> None:
        tx.event(origin, "delegation.complete",
                 {"delegation_id": delegation_id, "state": state,
                  "admission_id": admission_id, "results": statuses})

    return Letter(origin, results_message(delegation_id, state, orjson.dumps(results).decode()),
                  {"delegation_id": delegation_id}, announce)


def _interrupt(tx: Tx, row: dict[str, Any]) -> None:
    """Finish a row whose owner died as ``interrupted``, keeping the children that
    had finished, and end its still-running children for viewers."""
    dlg = row["delegation_id"]
    try:
        spec = orjson.loads(row["task_json"])
        saved = orjson.loads(row["result_json"] or "{}").get("results", [])
        slots: list[dict[str, Any] | None] = [None] * len(spec["tasks"])
        for r in saved:
            if isinstance(r.get("task_index"), int) and 0 <= r["task_index"] < len(slots):
                slots[r["task_index"]] = r
        model = spec.get("child_model") or spec.get("settings", {}).get("model", "")
        body = {"results": fill_interrupted(slots, model, OWNER_STOPPED),
                "total_duration_seconds": 0.0}
    except (ValueError, KeyError, TypeError, AttributeError):
        log.exception("delegation %s has an unreadable row", dlg)
        body = {"results": [], "total_duration_seconds": 0.0}
        slots = []
    delegations.finish(tx.conn, dlg, "interrupted", orjson.dumps(body).decode(), tx.now)
    # children that had started and were still running when the owner died end
    # here, for viewers, as any child ends: with subagent.complete
    origin = row["origin_session_id"]
    for child in _started_children(tx.conn, origin, dlg):
        index = child.get("task_index")
        if isinstance(index, int) and 0 <= index < len(slots) and slots[index] is None:
            tx.event(origin, "subagent.complete",
                     {"task_index": index, "child_session_id": child.get("child_session_id"),
                      "delegation_id": dlg, "status": "interrupted", "summary": ""},
                     row["origin_admission_id"] or None)


def _started_children(conn: Conn, session_id: str, delegation_id: str) -> list[dict[str, Any]]:
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
