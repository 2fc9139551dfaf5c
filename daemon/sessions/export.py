"""The export document of a session (rpc ExportDocument), built from stored rows.

Pure functions: the session row, its whole transcript, its events (deltas left
out: each turn's answer is whole in ``message.complete``) and its compaction
records in; one document out. A turn is an admission as its events tell it
(``message.start`` … ``message.complete``); its prompt and its tool results are
taken whole from the transcript, not from the events (which cut them short).
export_md.py renders the same document for a person.
"""

from __future__ import annotations

from typing import Any

from tether.rpc.models.history import EXPORT_FORMAT

from ..model.usage import Prices, totals

__all__ = ["build_document"]

_SESSION_KEYS = ("session_id", "title", "source", "cwd", "created_at", "parent_session_id",
                 "forked_from", "forked_at_seq")
_APPROVAL_KEYS = ("approval_id", "tool", "kind", "subject", "why")
_COMPACTION_KEYS = ("compaction_id", "first_index", "end_index", "summary", "model",
                    "tokens_before", "tokens_after", "kind", "focus", "usage", "created_at")


def _message(m: dict[str, Any]) -> dict[str, Any]:
    return {"index": m["index"], "role": m["role"], "content": m["content"],
            "tool_calls": m.get("tool_calls"), "tool_call_id": m.get("tool_call_id"),
            "name": m.get("name"), "admission_id": m.get("admission_id"),
            "created_at": m["created_at"]}


def _new_turn(admission_id: str) -> dict[str, Any]:
    return {"admission_id": admission_id, "input_id": None, "principal": None, "prompt": None,
            "answer": "", "outcome": None, "error": None, "usage": {}, "model": None,
            "cost_usd": None, "start_seq": None, "end_seq": None, "tool_calls": [],
            "approvals": [], "delegations": []}


def _apply(turn: dict[str, Any], event: dict[str, Any],
           delegations: dict[tuple[str, Any], dict[str, Any]]) -> None:
    p, kind = event["payload"], event["type"]
    if kind == "message.start":
        turn.update(start_seq=event["seq"], input_id=p.get("input_id"),
                    principal=p.get("principal"))
        turn["prompt"] = turn["prompt"] or p.get("text")
    elif kind == "message.complete":
        turn.update(end_seq=event["seq"], answer=p.get("text") or "", outcome=p.get("outcome"),
                    error=p.get("error"), usage=p.get("usage") or {}, model=p.get("model"),
                    cost_usd=p.get("cost_usd"))
    elif kind == "approval.requested":
        turn["approvals"].append({**{k: p.get(k) for k in _APPROVAL_KEYS},
                                  "status": "pending", "decision": None, "cause": None,
                                  "reason": None})
    elif kind == "approval.resolved":
        for a in turn["approvals"]:
            if a["approval_id"] == p.get("approval_id"):
                a.update({k: p.get(k) for k in ("status", "decision", "cause", "reason")})
    elif kind in ("subagent.start", "subagent.complete"):
        key = (turn["admission_id"], p.get("child_session_id") or p.get("task_index"))
        entry = delegations.get(key)
        if entry is None:
            entry = delegations[key] = {"child_session_id": p.get("child_session_id"),
                                        "task_index": p.get("task_index"), "goal": None,
                                        "status": None, "summary": None,
                                        "delegation_id": p.get("delegation_id")}
            turn["delegations"].append(entry)
        for k in ("goal", "status", "summary"):
            if p.get(k) is not None:
                entry[k] = p[k]


def _tool_calls(msgs: list[dict[str, Any]], errors: dict[str, str | None]) -> list[dict]:
    """The turn's tool calls in order, each with the whole result it was given."""
    results = {m.get("tool_call_id"): m["content"] for m in msgs if m["role"] == "tool"}
    calls = []
    for m in msgs:
        for c in m.get("tool_calls") or ():
            fn = c.get("function") or {}
            cid = str(c.get("id"))
            calls.append({"call_id": cid, "name": str(fn.get("name")),
                          "arguments": str(fn.get("arguments") or ""),
                          "result": results.get(cid), "error": errors.get(cid)})
    return calls


def build_document(row: dict[str, Any], messages: list[dict[str, Any]],
                   events: list[dict[str, Any]], compactions: list[dict[str, Any]],
                   last_seq: int, now: float, prices: Prices) -> dict[str, Any]:
    """The ExportDocument of a session (``messages`` with their ``index``)."""
    opts = row["options"]
    session = {k: row.get(k) for k in _SESSION_KEYS}
    session.update(model=opts.get("model"), provider=opts.get("provider"),
                   usage=totals(row["usage"], prices))
    turns: dict[str, dict[str, Any]] = {}
    delegations: dict[tuple[str, Any], dict[str, Any]] = {}
    tool_errors: dict[str, str | None] = {}
    for e in events:
        aid = e.get("admission_id") or e["payload"].get("admission_id")
        if e["type"] == "tool.complete":
            tool_errors[str(e["payload"].get("call_id"))] = e["payload"].get("error")
        if not aid or e["type"] in ("session.info", "session.compacted"):
            continue
        if aid not in turns:
            if e["type"] not in ("message.start", "message.complete"):
                continue  # a stray event of no turn (never written by this owner)
            turns[aid] = _new_turn(aid)
        _apply(turns[aid], e, delegations)
    by_turn: dict[str, list[dict[str, Any]]] = {}
    for m in messages:
        if m.get("admission_id") in turns:
            by_turn.setdefault(m["admission_id"], []).append(m)
    for aid, turn in turns.items():
        msgs = by_turn.get(aid, [])
        prompt = next((m["content"] for m in msgs if m["role"] == "user"), None)
        if prompt is not None:
            turn["prompt"] = prompt
        turn["tool_calls"] = _tool_calls(msgs, tool_errors)
    return {"format": EXPORT_FORMAT, "version": 1, "exported_at": now, "last_seq": last_seq,
            "session": session, "turns": list(turns.values()),
            "compactions": [{k: c.get(k) for k in _COMPACTION_KEYS} for c in compactions],
            "messages": [_message(m) for m in messages]}
