"""The owner's activity in logs/owner.log: one structured line per thing it did.

Every event this owner commits passes through ``record`` (Journal, after the
commit), which writes the ones a person reading the log wants — turns
starting and ending (with outcome and duration), tool calls, approvals asked
and answered, delegations, background processes, compactions — as

    2026-12-01 14:08:25,114 INFO tether.activity: turn.end session=ses_… outcome=completed seconds=2.41

the event name first, then ``key=value`` fields (logfmt: a value with spaces
or quotes is a JSON string). ``tether logs --json`` turns each line into an
object. Prompts and answers are never logged (only their length); a command
or path is cut at SUBJECT_CHARS.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from .events import EventRecord

__all__ = ["record", "fields", "log"]

log = logging.getLogger("tether.activity")

SUBJECT_CHARS = 120
#: when each turn this owner runs started (admission id → monotonic time)
_started: dict[str, float] = {}


def fields(event: str, **values: Any) -> str:
    """``event key=value ...``; None values are left out."""
    parts = [event]
    for key, value in values.items():
        if value is None:
            continue
        text = str(value) if not isinstance(value, float) else f"{value:.2f}"
        if not text or any(c in text for c in ' "=\n\t\\'):
            text = json.dumps(text, ensure_ascii=False)
        parts.append(f"{key}={text}")
    return " ".join(parts)


def _cut(text: Any) -> str | None:
    if text is None:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= SUBJECT_CHARS else text[:SUBJECT_CHARS - 1] + "…"


def _line(ev: EventRecord) -> tuple[int, str] | None:
    p, sid, aid = ev.payload, ev.session_id, ev.admission_id
    match ev.type:
        case "message.start":
            _started[aid or ""] = time.monotonic()
            return logging.INFO, fields("turn.start", session=sid, admission=aid,
                                        principal=p.get("principal"),
                                        prompt_chars=len(p.get("text") or ""))
        case "message.complete":
            began = _started.pop(aid or "", None)
            outcome = p.get("outcome")
            return (logging.INFO if outcome in ("completed", "cancelled") else logging.WARNING,
                    fields("turn.end", session=sid, admission=aid, outcome=outcome,
                           seconds=time.monotonic() - began if began is not None else None,
                           answer_chars=len(p.get("text") or ""), error=_cut(p.get("error"))))
        case "tool.start":
            return logging.INFO, fields("tool.start", session=sid, admission=aid,
                                        tool=p.get("name"), subject=_cut(p.get("subject")))
        case "tool.complete":
            return logging.INFO, fields("tool.end", session=sid, admission=aid,
                                        tool=p.get("name"), summary=_cut(p.get("summary")),
                                        error=_cut(p.get("error")))
        case "approval.requested":
            return logging.INFO, fields("approval.asked", session=sid, approval=p.get(
                "approval_id"), tool=p.get("tool"), subject=_cut(p.get("subject")))
        case "approval.resolved":
            return logging.INFO, fields("approval.resolved", session=sid,
                                        approval=p.get("approval_id"), status=p.get("status"),
                                        decision=p.get("decision"), cause=p.get("cause"),
                                        reason=_cut(p.get("reason")))
        case "delegation.dispatched" | "delegation.complete":
            return logging.INFO, fields(ev.type, session=sid,
                                        delegation=p.get("delegation_id"), state=p.get("state"))
        case "process.complete":
            return logging.INFO, fields("process.end", session=sid,
                                        process=p.get("process_id"), state=p.get("state"),
                                        exit_code=p.get("exit_code"))
        case "session.compacted":
            return logging.INFO, fields("session.compacted", session=sid)
    return None


def record(events: list[EventRecord]) -> None:
    """Log what ``events`` (one commit's, in order) say the owner did."""
    if not log.isEnabledFor(logging.INFO):
        return
    for ev in events:
        try:
            line = _line(ev)
        except Exception:  # noqa: BLE001 - the log must never fail a commit's publication
            continue
        if line is not None:
            log.log(*line)
