"""The ledger's transitions as store units, each with the events that announce it.

Every change of an admission's status after it was admitted is written by a
function here, inside a journal unit, with the ``WHERE status IN (...)`` that
ledger.py's table allows, so a transition the table does not allow changes
nothing. Settling (any → terminal) is written once: the row, then
``message.complete`` and ``session.info``, in one commit.
"""

from __future__ import annotations

from typing import Any

import orjson

from tether.store.tables import admissions, messages, sessions

from ..model.usage import Prices, totals, turn_cost
from .journal import Tx
from .rules import Event, IllegalTransition, input_messages, outcomes, result_json, sources
from .scheduler import Scheduler

__all__ = ["start", "begun", "settle", "orphan", "start_payload", "START_TEXT_CHARS"]


def start(tx: Tx, view: Scheduler, session_id: str, admission_id: str,
          epoch: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """queued → started, with its user message, ``session.info`` and
    ``message.start``; (row, session), or None if it was no longer queued."""
    # the session's row is asked for first, so that it is answered with the
    # transition's (one wait on PostgreSQL)
    session_row = sessions.get_later(tx.conn, session_id)
    row = admissions.mark_started(tx.conn, admission_id, epoch, tx.now, sources(Event.START))
    session = session_row()
    if row is None:
        # A retry of a start whose COMMIT answer was lost (store/pg/db.py) finds the row
        # started by this very owner: that start was stored, with its user message
        # and events; the turn is this one's to run, not to write again.
        row = admissions.get(tx.conn, admission_id)
        if row is None or row["status"] != "started" or row["owner_epoch"] != epoch:
            return None
        assert session is not None
        return row, session
    return begun(tx, view, session_id, admission_id, row, session)


def begun(tx: Tx, view: Scheduler, session_id: str, admission_id: str, row: dict[str, Any],
          session: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a start writes besides the row's status: the user message,
    ``session.info`` and ``message.start``; (row, session). `start` calls it after
    marking the row started; an admission whose turn starts in the same unit
    inserts its row started and calls it directly (one statement fewer)."""
    assert session is not None  # admissions reference their session
    payload = orjson.loads(row["payload_json"])
    messages.append(tx.conn, session_id, [{**m, "admission_id": admission_id}
                                          for m in input_messages(payload)], tx.now)
    # the session's state first (it now names the turn as running), then the turn's
    # first event, as docs/protocol.md §6 shows them
    tx.event(session_id, "session.info", view.view(session_id))
    tx.event(session_id, "message.start", start_payload(admission_id, row, payload),
             admission_id)
    return row, session


#: characters of the prompt that ``message.start`` carries (docs/protocol.md §5)
START_TEXT_CHARS = 4000


def start_payload(admission_id: str, row: dict[str, Any],
                  payload: dict[str, Any]) -> dict[str, Any]:
    """What ``message.start`` tells every viewer: which input, who sent it, what it asked."""
    text = str(payload.get("text") or "")
    out: dict[str, Any] = {"admission_id": admission_id, "input_id": row.get("request_id"),
                           "principal": row.get("principal_id"),
                           "text": text[:START_TEXT_CHARS]}
    if len(text) > START_TEXT_CHARS:
        out["text_truncated"] = True
    return out


def settle(tx: Tx, view: Scheduler, session_id: str, admission_id: str, event: Event,
           outcome: str, *, text: str = "", usage: dict[str, Any] | None = None,
           error: str | None = None, model: str | None = None, requests: int = 0,
           prices: Prices | None = None, tool_calls: list[dict[str, Any]] | None = None,
           context: dict[str, Any] | None = None,
           record: list[dict[str, Any]] | None = None) -> bool:
    """→ terminal/``outcome`` by ``event``, announced with ``message.complete`` and
    ``session.info``; False (and nothing written) if the row's status does not
    allow ``event`` (it was settled already, say).

    ``record``: the turn's answer, as transcript rows, written in the same unit
    (only with the outcome: a retry of a unit that was stored writes neither).

    A turn that asked a model (``model``) also adds its ``usage`` to the session's
    sums in the same commit: ``message.complete`` carries the turn's usage and
    cost (and ``context``, the context window's fill it left), ``session.info`` the
    session's totals (docs/long-sessions.md)."""
    if outcome not in outcomes(event):
        raise IllegalTransition(f"{event.value} cannot record {outcome!r}")
    usage = usage or {}
    prices = prices or Prices()
    extra: dict[str, Any] = {}
    if model is not None:
        extra = {"model": model, "cost_usd": turn_cost(prices, model, usage)}
    body = result_json(text, usage, error, extra, tool_calls)
    # the session's sums are asked for first, so that they are answered with the
    # transition's (one wait on PostgreSQL)
    sums = sessions.usage_later(tx.conn, session_id) if model is not None else None
    if not admissions.finish(tx.conn, admission_id, outcome, body, tx.now, sources(event)):
        return False
    if record:
        messages.append(tx.conn, session_id, record, tx.now)
    complete: dict[str, Any] = {"admission_id": admission_id, "outcome": outcome, "text": text,
                                "usage": usage, **extra}
    if error:
        complete["error"] = error
    if context is not None and model is not None:
        complete["context"] = context
    now_sums = None
    if model is not None:
        now_sums = sessions.add_usage(tx.conn, session_id, model, usage, requests, sums)
    tx.event(session_id, "message.complete", complete, admission_id)
    info: dict[str, Any] = dict(view.view(session_id))
    if info["running"] == admission_id:
        info["running"] = None  # its turn is ending: the slot is freed right after this
    if now_sums is not None:  # the totals changed: say so (only a turn that asked a model)
        info["usage"] = totals(now_sums, prices)
    tx.event(session_id, "session.info", info)
    return True


def orphan(tx: Tx, epoch: int, only: int | None = None) -> list[str]:
    """Admissions started by an owner older than ``epoch`` (with ``only``: by that
    dead node of a fleet) → unknown (SPEC §7)."""
    return admissions.mark_unknown_before(tx.conn, epoch, sources(Event.ORPHAN), only)
