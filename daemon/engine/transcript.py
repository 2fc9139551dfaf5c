"""What an agent is shown: system prompt, project rules, the stored transcript as messages.

Pure functions over stored rows and files; no store, no loop. The turn runner
builds a parent agent's messages from them, and ``chat_history`` keeps a
transcript that a crash or a stop cut short acceptable to a model server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

__all__ = ["SYSTEM_PROMPT", "SUMMARY_HEADER", "UNFINISHED_TOOL_CALL", "chat_history",
           "client_request", "rules_message", "turn_messages"]

RULES_FILES = ("AGENTS.md", ".tether/rules.md")
RULES_MAX_BYTES = 64 * 1024
SYSTEM_PROMPT = (
    "You are an agent running inside tether, a persistent session daemon. "
    "Answer the user's request. Use the tools you are given: read_file, search_files and "
    "list_dir to look at the project, edit_file and write_file to change it, terminal to "
    "run commands (risky ones wait for the user's approval; a denial tells you why). "
    "Use delegate_task to hand independent pieces of work "
    "to helper agents when that helps; their results come back to you as tool results "
    "(or, for background delegations, as a later message)."
)


#: what a request shows before a compaction's summary, in place of the turns it stands for
SUMMARY_HEADER = ("Summary of the earlier part of this session (older turns were compacted; "
                  "the full transcript is kept by tether, this is what you remember of it):\n")


#: the reply given to the model for a tool call whose turn ended before it returned
UNFINISHED_TOOL_CALL = orjson.dumps({"error": (
    "this tool call never returned: its turn was stopped (interrupted, cancelled or the "
    "owner crashed) before it finished")}).decode()


def chat_history(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Transcript rows → chat-completions messages.

    A turn stopped inside a tool call (crash, interrupt) leaves an assistant
    ``tool_calls`` message with no ``role=tool`` reply; OpenAI-compatible servers
    refuse such a history (400), which would fail every later turn of the
    session. Each unanswered call gets a synthetic error reply here, so the
    stored transcript stays exactly what happened.
    """
    out: list[dict[str, Any]] = []
    unanswered: list[tuple[str, str | None]] = []  # (call id, tool name)

    def close_calls() -> None:
        for call_id, name in unanswered:
            reply = {"role": "tool", "tool_call_id": call_id, "content": UNFINISHED_TOOL_CALL}
            if name:
                reply["name"] = name
            out.append(reply)
        unanswered.clear()

    for r in rows:
        if r["role"] != "tool":
            close_calls()
        m: dict[str, Any] = {"role": r["role"], "content": r["content"]}
        if r.get("tool_calls"):
            m["tool_calls"] = r["tool_calls"]
            unanswered.extend((c.get("id"), (c.get("function") or {}).get("name"))
                              for c in r["tool_calls"])
        if r.get("tool_call_id"):
            m["tool_call_id"] = r["tool_call_id"]
            unanswered[:] = [u for u in unanswered if u[0] != r["tool_call_id"]]
        if r.get("name") and r["role"] == "tool":
            m["name"] = r["name"]
        out.append(m)
    close_calls()
    return out


def client_request(payload: dict[str, Any]) -> dict[str, Any]:
    """What an HTTP client's request adds to its turn's model requests: its own
    tools, and ``response_format`` / ``tool_choice`` (engine.run's keywords)."""
    out: dict[str, Any] = {}
    if payload.get("client_tools"):
        out["client_tools"] = payload["client_tools"]
    extras = {k: payload[k] for k in ("response_format", "tool_choice") if payload.get(k)}
    if extras:
        out["extras"] = extras
    return out


def rules_message(cwd: str | None) -> dict[str, Any] | None:
    """Project rules (AGENTS.md) from the session's cwd, unless ignore_rules."""
    if not cwd:
        return None
    for name in RULES_FILES:
        path = Path(cwd) / name
        try:
            with path.open("rb") as f:
                text = f.read(RULES_MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        return {"role": "system", "content": f"Project rules from {path}:\n{text}"}
    return None


def turn_messages(history: list[dict[str, Any]], cwd: str | None,
                  ignore_rules: bool, summary: str | None = None) -> list[dict[str, Any]]:
    """A parent turn's messages: the system prompt, the project rules (unless
    ``ignore_rules``), the latest compaction's ``summary`` (the older turns it
    stands for are not in ``history``), then the session's transcript (its new
    user message last)."""
    system = SYSTEM_PROMPT
    if cwd:  # relative paths and commands work there
        system += f"\nThe session's working directory is {cwd}."
    msgs = [{"role": "system", "content": system}]
    if not ignore_rules and (rules := rules_message(cwd)):
        msgs.append(rules)
    if summary:
        msgs.append({"role": "system", "content": SUMMARY_HEADER + summary})
    msgs.extend(chat_history(history))
    return msgs
