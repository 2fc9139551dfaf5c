"""An export document (export.py) as Markdown, for a person to read.

Turns in order, each with its prompt, its tool calls (arguments and whole
results, in fences long enough for any backticks inside), approvals,
delegations, answer and usage; a compaction appears where it took effect,
before the first turn it did not cover. Nothing is left out or cut.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

__all__ = ["render_markdown"]


def _fence(text: str, lang: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return "-"
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cost(usd: Any) -> str:
    return "unknown" if usd is None else f"${usd:.4f}"


def _usage_line(usage: dict[str, Any], cost: Any) -> str:
    parts = [f"{usage.get(k, 0)} {k.removesuffix('_tokens')}"
             for k in ("prompt_tokens", "cached_tokens", "completion_tokens",
                       "reasoning_tokens") if k in usage]
    return f"tokens: {', '.join(parts) or 'none reported'}; cost {_cost(cost)}"


def _turn(n: int, t: dict[str, Any], out: list[str]) -> None:
    out.append(f"## Turn {n}: {t['outcome'] or 'running'}")
    who = f" from {t['principal']}" if t.get("principal") else ""
    out.append(f"_admission {t['admission_id']}{who}; seq {t.get('start_seq')}–"
               f"{t.get('end_seq')}_\n")
    if t.get("prompt") is not None:
        out += ["### Prompt", _fence(t["prompt"]), ""]
    for c in t["tool_calls"]:
        out.append(f"### Tool call `{c['name']}` ({c['call_id']})")
        out += [_fence(c["arguments"], "json"), ""]
        if c.get("error"):
            out.append(f"Error: {c['error']}\n")
        result = c.get("result")
        out += ["Result:", _fence(result if result is not None else "(never returned)"), ""]
    for a in t["approvals"]:
        verdict = a.get("decision") or a.get("status")
        out.append(f"- Approval {a['approval_id']}: {a['tool']} `{a['subject']}` ({a['why']})"
                   f" → {a['status']} ({verdict}; {a.get('cause') or '-'})"
                   + (f": {a['reason']}" if a.get("reason") else ""))
    for d in t["delegations"]:
        out.append(f"- Delegation to {d.get('child_session_id')} (task {d.get('task_index')}):"
                   f" {d.get('goal') or ''} → {d.get('status') or 'running'}"
                   + (f": {d['summary']}" if d.get("summary") else ""))
    if t["approvals"] or t["delegations"]:
        out.append("")
    out += ["### Answer", t["answer"] or "_(no answer)_", ""]
    if t.get("error"):
        out.append(f"Error: {t['error']}\n")
    if t.get("model"):
        out.append(f"_{t['model']}; {_usage_line(t['usage'], t.get('cost_usd'))}_\n")


def _compaction(c: dict[str, Any], out: list[str]) -> None:
    focus = f", focus: {c['focus']}" if c.get("focus") else ""
    out.append(f"## Compaction {c['compaction_id']} ({c['kind']}{focus})")
    out.append(f"_messages {c['first_index']}–{c['end_index'] - 1} summarised by "
               f"{c['model']}; about {c['tokens_before']} → {c['tokens_after']} tokens_\n")
    out += [c["summary"], ""]


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc["session"]
    out = [f"# {s.get('title') or 'Session'} ({s['session_id']})", "",
           f"- created: {_when(s['created_at'])}",
           f"- model: {s.get('model') or 'the owner default'}",
           f"- working directory: {s.get('cwd') or '-'}"]
    if s.get("forked_from"):
        out.append(f"- forked from {s['forked_from']} at seq {s.get('forked_at_seq')}")
    if s.get("parent_session_id"):
        out.append(f"- delegated by {s['parent_session_id']}")
    u = s["usage"]
    out += [f"- {_usage_line(u, u.get('cost_usd'))} over {u.get('requests', 0)} requests",
            f"- exported: {_when(doc['exported_at'])} (last seq {doc['last_seq']})", ""]
    first_index: dict[Any, int] = {}
    for m in doc["messages"]:
        first_index.setdefault(m.get("admission_id"), m["index"])
    pending = sorted(doc["compactions"], key=lambda c: c["end_index"])
    for n, t in enumerate(doc["turns"], 1):
        start = first_index.get(t["admission_id"])
        while pending and start is not None and pending[0]["end_index"] <= start:
            _compaction(pending.pop(0), out)
        _turn(n, t, out)
    for c in pending:
        _compaction(c, out)
    if not doc["turns"] and doc["messages"]:  # a delegation child: its transcript only
        out.append("## Transcript")
        for m in doc["messages"]:
            out += [f"**{m['role']}**", _fence(m["content"] or ""), ""]
    return "\n".join(out).rstrip() + "\n"
