"""tether's events and transcript as ACP ``session/update`` notifications.

Pure functions (no I/O) used by agent.py: a live event becomes zero or
more updates; a stored transcript (session/load) becomes the updates that
replay it. A tool call's ACP id is ``<admission_id>/<call_id>`` (a model's call
ids repeat from turn to turn). Tool calls carry a kind, a title, the paths they
touch (``locations``) and, for file edits, a diff the editor can show.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from acp import RequestError, helpers
from acp.schema import (
    ListSessionsResponse,
    PermissionOption,
    SessionInfo,
    ToolCallLocation,
    ToolCallUpdate,
    Usage,
)

from tether.rpc.errors import RpcError

from ..library.client import OwnerUnavailable, new_input_id

__all__ = ["input_id_for", "error_for", "event_updates", "transcript_updates", "call_id",
           "cut_off", "tool_update", "terminal_shown", "PERMISSION_OPTIONS", "DECISIONS", "prompt_text",
           "turn_usage", "session_page"]

_KINDS = {"terminal": "execute", "process": "execute", "read_file": "read", "list_dir": "read",
          "write_file": "edit", "edit_file": "edit", "search_files": "search",
          "delegate_task": "think"}

#: the choices of an approval prompt, as the editor offers them
PERMISSION_OPTIONS = [
    PermissionOption(option_id="once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="session", name="Allow in this session", kind="allow_always"),
    PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="deny", name="Reject", kind="reject_once"),
]
DECISIONS = {o.option_id for o in PERMISSION_OPTIONS}


def call_id(admission_id: str | None, call: str) -> str:
    return f"{admission_id or '-'}/{call}"


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = orjson.loads(arguments or "{}")
    except (orjson.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def _path(value: Any, cwd: str | None) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    path = os.path.expanduser(value)
    return os.path.normpath(path if os.path.isabs(path) or not cwd else os.path.join(cwd, path))


def _describe(name: str, args: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    """kind, title, locations and diff content of a call of ``name`` with ``args``."""
    path = _path(args.get("path"), cwd)
    short = args.get("path") or "."
    if name == "terminal":
        title = f"Run `{str(args.get('command', ''))[:200]}`"
    elif name == "process":
        title = f"Process {args.get('action', '')} {args.get('id') or ''}".strip()
    elif name == "read_file":
        title = f"Read {short}"
    elif name == "list_dir":
        title = f"List {short}"
    elif name == "write_file":
        title = f"Write {short}"
    elif name == "edit_file":
        title = f"Edit {short}"
    elif name == "search_files":
        title = f"Search {str(args.get('pattern', ''))[:100]} in {short}"
    elif name == "delegate_task":
        goals = [t.get("goal", "") for t in args.get("tasks") or [] if isinstance(t, dict)]
        title = "Delegate: " + "; ".join(str(g)[:80] for g in (goals or [args.get("goal", "")]))
    elif name.startswith("mcp__"):
        _, server, tool = (name.split("__", 2) + ["", ""])[:3]
        title = f"{server}: {tool}"
    else:
        title = name
    out: dict[str, Any] = {"kind": _KINDS.get(name, "other"), "title": title,
                           "locations": [ToolCallLocation(path=path)] if path else None,
                           "content": None}
    if name == "write_file" and path and isinstance(args.get("content"), str):
        out["content"] = [helpers.tool_diff_content(path, args["content"], None)]
    elif name == "edit_file" and path and isinstance(args.get("new"), str):
        out["content"] = [helpers.tool_diff_content(path, args["new"],
                                                    str(args.get("old") or ""))]
    return out


def _start(key: str, name: str, arguments: Any, cwd: str | None,
           terminal: str | None = None) -> Any:
    args = _args(arguments)
    d = _describe(name, args, cwd)
    content = [helpers.tool_terminal_ref(terminal)] if terminal else d["content"]
    return helpers.start_tool_call(key, d["title"], kind=d["kind"], status="in_progress",
                                   content=content, locations=d["locations"],
                                   raw_input=args)


def terminal_shown(key: str, terminal: str) -> Any:
    """The tool call ``key`` shows the editor's terminal ``terminal`` (its command runs
    there: docs/acp.md, "The editor's terminals")."""
    return helpers.update_tool_call(key, content=[helpers.tool_terminal_ref(terminal)])


def tool_update(key: str, name: str, arguments: Any, cwd: str | None) -> ToolCallUpdate:
    """The tool call a permission request is about."""
    args = _args(arguments)
    d = _describe(name, args, cwd)
    return ToolCallUpdate(tool_call_id=key, title=d["title"], kind=d["kind"],
                          status="pending", locations=d["locations"], content=d["content"],
                          raw_input=args)


def _done(key: str, result: str, failed: bool, in_terminal: bool = False) -> Any:
    text = result if len(result) <= 20_000 else result[:20_000] + "…"
    status: Literal["completed", "failed"] = "failed" if failed else "completed"
    if in_terminal:
        # the card keeps the terminal, which shows the output (a released terminal
        # must not be named again)
        return helpers.update_tool_call(key, status=status, raw_output=text)
    return helpers.update_tool_call(key, status=status,
                                    content=[helpers.tool_content(helpers.text_block(text))],
                                    raw_output=text)


def _result_failed(result: str) -> bool:
    try:
        value = orjson.loads(result)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and "error" in value


def event_updates(event: dict[str, Any], cwd: str | None, own_inputs: set[str],
                  terminals: dict[str, str] | None = None) -> list[Any]:
    """The updates of one live event (``own_inputs``: prompts this editor sent, whose
    text it shows already; ``terminals``: the editor's terminal of a call, by key)."""
    terminals = terminals or {}
    kind, p = event.get("type"), event.get("payload") or {}
    aid = event.get("admission_id")
    if kind == "message.delta":
        return [helpers.update_agent_message_text(p.get("text", ""))]
    if kind == "reasoning.delta":
        return [helpers.update_agent_thought_text(p.get("text", ""))]
    if kind == "message.start" and p.get("input_id") not in own_inputs:
        return [helpers.update_user_message_text(p.get("text", ""))]
    if kind == "tool.start":
        key = call_id(aid, p["call_id"])
        return [_start(key, p.get("name", ""), p.get("arguments"), cwd, terminals.get(key))]
    if kind == "tool.complete":
        failed = bool(p.get("error")) or _result_failed(p.get("result", ""))
        key = call_id(aid, p["call_id"])
        return [_done(key, p.get("result", ""), failed, key in terminals)]
    if kind == "tool.progress":
        total = f"/{p['total']:g}" if p.get("total") is not None else ""
        text = f"{p.get('message') or 'progress'} ({p.get('progress', 0):g}{total})"
        return [helpers.update_tool_call(call_id(aid, p["call_id"]), status="in_progress",
                                         content=[helpers.tool_content(helpers.text_block(text))])]
    if kind == "subagent.start":
        key = f"helper/{p.get('child_session_id')}"
        return [helpers.start_tool_call(key, f"Helper {p.get('task_index', '')}: "
                                             f"{str(p.get('goal', ''))[:120]}", kind="think",
                                        status="in_progress")]
    if kind == "subagent.complete" and p.get("child_session_id"):
        key = f"helper/{p['child_session_id']}"
        return [helpers.update_tool_call(
            key, status="completed" if p.get("status") == "completed" else "failed",
            content=[helpers.tool_content(helpers.text_block(str(p.get("summary", ""))))])]
    if kind == "message.complete" and p.get("outcome") == "failed" and p.get("error"):
        return [helpers.update_agent_message_text(f"\n\n[the turn failed: {p['error']}]")]
    return []


#: what a call whose turn ended without its result shows (a cancel or an interrupt
#: that came while it waited for its approval, say)
NO_RESULT = "no result: the turn ended before this call finished"


def cut_off(key: str) -> Any:
    """The update that closes the call ``key``: its turn ended without its result."""
    return _done(key, NO_RESULT, True)


def transcript_updates(messages: list[dict[str, Any]], cwd: str | None,
                       running: str | None = None) -> list[Any]:
    """The updates that replay a stored transcript (session/load). A call with no
    result is closed as failed unless its turn is ``running`` (the admission running
    now, whose live events go on)."""
    out: list[Any] = []
    open_calls: dict[str, str | None] = {}  # ACP call id → its admission
    for m in messages:
        role, text, aid = m.get("role"), m.get("content") or "", m.get("admission_id")
        if role == "user" and text:
            out.append(helpers.update_user_message_text(text))
        elif role == "assistant":
            if text:
                out.append(helpers.update_agent_message_text(text))
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                key = call_id(aid, tc.get("id", ""))
                open_calls[key] = aid
                out.append(_start(key, fn.get("name", ""), fn.get("arguments"), cwd))
        elif role == "tool" and m.get("tool_call_id"):
            key = call_id(aid, m["tool_call_id"])
            open_calls.pop(key, None)
            out.append(_done(key, text, _result_failed(text)))
    out += [cut_off(key) for key, aid in open_calls.items() if aid is None or aid != running]
    return out


def prompt_text(blocks: list[Any]) -> tuple[str, list[dict[str, str]]]:
    """An ACP prompt as tether's text and attachments (embedded text resources)."""
    parts: list[str] = []
    attachments: list[dict[str, str]] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[{block.name}]({block.uri})")
        elif kind == "resource":
            res = block.resource
            if getattr(res, "text", None) is not None:
                attachments.append({"name": str(res.uri)[-256:], "content": res.text,
                                    "mime_type": res.mime_type or "text/plain"})
            else:
                parts.append(f"[binary resource {res.uri} not attached]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} not attached: tether takes text]")
    return "\n".join(parts), attachments


def session_page(page: dict[str, Any], cwd: str | None) -> ListSessionsResponse:
    """A session.list page as session/list's: top-level sessions (of ``cwd`` if given)."""
    out = [SessionInfo(session_id=s["session_id"], cwd=s.get("cwd") or "",
                       title=s.get("title"),
                       updated_at=datetime.fromtimestamp(s["updated_at"], UTC).isoformat())
           for s in page["sessions"]
           if not s.get("parent_session_id") and (cwd is None or s.get("cwd") == cwd)]
    return ListSessionsResponse(sessions=out, next_cursor=page.get("next_cursor"))


def input_id_for(session_id: str, message_id: Any) -> str:
    """The prompt's input id: derived from the editor's message id when it sends one
    (``_meta.messageId``), so a prompt sent again (a restarted adapter, a retry) is
    the same admission, never a second turn; else a fresh one."""
    if isinstance(message_id, str) and 0 < len(message_id) <= 200:
        import hashlib

        return "in_acp_" + hashlib.sha256(f"{session_id}\0{message_id}".encode()).hexdigest()[:32]
    return new_input_id()


def turn_usage(usage: Any) -> Usage | None:
    """A turn's tokens (message.complete's ``usage``) as a prompt response's."""
    if not isinstance(usage, dict) or not usage.get("total_tokens"):
        return None
    return Usage(total_tokens=int(usage.get("total_tokens") or 0),
                 input_tokens=int(usage.get("prompt_tokens") or 0),
                 output_tokens=int(usage.get("completion_tokens") or 0),
                 thought_tokens=usage.get("reasoning_tokens") or None,
                 cached_read_tokens=usage.get("cached_tokens") or None)


def error_for(exc: BaseException) -> RequestError:
    if isinstance(exc, RpcError):
        return RequestError(-32000, f"{exc.reason}: {exc.detail}")
    if isinstance(exc, OwnerUnavailable):
        return RequestError(-32000, f"tether owner unavailable ({exc.reason}): {exc}")
    return RequestError.internal_error({"detail": str(exc)})
