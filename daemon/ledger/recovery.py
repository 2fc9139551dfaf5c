"""Start-up recovery of the ledger: what an owner does before it serves (SPEC §7).

Admissions the previous owner had started become ``unknown`` (never replayed:
the turn may have had side effects), and the inline children those turns were
running end for viewers with ``subagent.complete`` (status ``interrupted``),
as any child ends. Queued admissions go back into the scheduler; a session
with an unknown admission is paused behind it, unless ``daemon.unknown_policy``
is ``interrupt``, which settles them at once, as ``prompt.resolve_unknown``
would. Background delegations recover on their own (delegation/background.py).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from tether.store.tables import admissions, events

from . import outcomes
from .journal import Journal, Tx
from .rules import Event, Status
from .scheduler import Scheduler

__all__ = ["recover", "adopt", "POLICY_INTERRUPTED"]

log = logging.getLogger("tether.recovery")

#: result error of an unknown admission settled by ``daemon.unknown_policy: interrupt``
POLICY_INTERRUPTED = ("the owner stopped while this turn ran; interrupted by "
                      "daemon.unknown_policy")


async def recover(journal: Journal, epoch: int, scheduler: Scheduler, policy: str, *,
                  dead_epoch: int | None = None, schedule: bool = True) -> None:
    """Put the ledger back into ``scheduler`` after a restart (docs/recovery.md).

    In a fleet (docs/scale-out.md) this runs for one dead node, ``dead_epoch``:
    only what that node had started becomes unknown, and ``schedule`` is False,
    because the queued work of its sessions goes to whichever node takes each
    session's lease next (which calls `adopt`)."""

    def orphan(tx: Tx) -> list[str]:
        unknown = outcomes.orphan(tx, epoch, dead_epoch)
        for row in admissions.all_open(tx.conn):
            if row["admission_id"] in unknown:
                _end_children(tx, row["target_session_id"], row["admission_id"])
        return unknown

    unknown = await journal.write(orphan)
    if unknown:
        log.warning("%d admission(s) were running when %s stopped; now unknown: %s",
                    len(unknown), "the previous owner" if dead_epoch is None
                    else f"node {dead_epoch}", ", ".join(unknown))
    rows = await journal.db.read(admissions.all_open)
    if schedule:
        adopt(scheduler, rows, policy)
    if policy == "interrupt":
        def settle(tx: Tx) -> None:
            for row in rows:
                if row["status"] == Status.UNKNOWN:
                    outcomes.settle(tx, scheduler, row["target_session_id"],
                                    row["admission_id"], Event.RESOLVE, "interrupted",
                                    error=POLICY_INTERRUPTED)

        await journal.write(settle)


def adopt(scheduler: Scheduler, rows: list[dict[str, Any]], policy: str) -> list[str]:
    """Schedule the open admissions ``rows`` (in admission order) that the scheduler
    does not know yet: queued ones run, unknown ones pause their session (policy
    ``manual``). The sessions whose queue it changed."""
    changed: dict[str, None] = {}
    for row in rows:
        sid, aid = row["target_session_id"], row["admission_id"]
        if scheduler.knows(sid, aid):
            continue
        if row["status"] == Status.QUEUED:
            scheduler.enqueue(sid, aid)
            changed[sid] = None
        elif row["status"] == Status.UNKNOWN and policy == "manual":
            scheduler.block(sid, aid)
    return list(changed)


def _end_children(tx: Tx, session_id: str, admission_id: str) -> None:
    """``subagent.complete`` (interrupted) for each inline child of the admission that
    started and never completed; nothing for one that did (so this may run again)."""
    open_children: dict[Any, dict[str, Any]] = {}
    for type_, text in events.of_admission(tx.conn, session_id, admission_id,
                                           ("subagent.start", "subagent.complete")):
        payload = orjson.loads(text)
        if not isinstance(payload, dict) or payload.get("delegation_id"):
            continue  # a background child: its delegation's recovery ends it
        key = payload.get("child_session_id")
        if type_ == "subagent.start":
            open_children[key] = payload
        else:
            open_children.pop(key, None)
    for child in open_children.values():
        tx.event(session_id, "subagent.complete",
                 {"task_index": child.get("task_index"),
                  "child_session_id": child.get("child_session_id"),
                  "status": "interrupted", "summary": ""}, admission_id)
