"""The interactive chat's own commands (``/help``, ``/exit``, ``/new``, ``/resume ID``,
``/cancel``, ``/model M``, ``/sessions``, ``/cost``, ``/compact``); anything else starting with ``/`` is
refused with the list, never sent to the model (``//text`` sends ``/text``).
"""

from __future__ import annotations

from typing import Any

from ..library.exits import CliError
from .render import shorten

#: clients.interactive.Chat, which imports this module (so it is not imported back)
Chat = Any

__all__ = ["HELP", "compact_line", "run_command"]

HELP = """\
/help             this list
/exit             leave (also Ctrl-D on an empty line); running turns go on
/new              start a new session with the next prompt
/resume ID        switch to another session (an id prefix will do)
/sessions         the latest sessions
/cancel           interrupt the running turn (also Ctrl-C on an empty line)
/model [M]        show, or set for the next prompts, the model
/cost             this session's tokens and cost
/compact [FOCUS]  summarise older turns now (FOCUS: what the summary must keep)
//text            send "/text" as a prompt
Keys: Alt-Enter or Esc Enter inserts a newline; a paste stays one prompt; Up/Down history."""


async def run_command(chat: Chat, line: str) -> None:
    name, _, arg = line[1:].partition(" ")
    arg = arg.strip()
    if name in ("help", "?"):
        chat.say(HELP)
    elif name in ("exit", "quit", "q"):
        chat.leave()
    elif name == "cancel":
        chat.interrupt()
    elif name == "new":
        await chat.detach()
        chat.session_id = None
        chat.say("the next prompt starts a new session")
    elif name == "resume":
        if not arg:
            chat.say("usage: /resume ID (an id prefix will do; /sessions lists them)")
            return
        from ..library.remote import resolve_session

        try:
            sid = await resolve_session(chat.client, arg)
        except CliError as err:
            chat.renderer.progress(f"{err.reason}: {err.detail}")
            return
        await chat.detach()
        chat.renderer = chat._new_renderer()
        chat.say(f"session {sid}")
        await chat.attach(sid, transcript=True)
    elif name == "model":
        if arg:
            chat.options["model"] = arg
            chat.say(f"the next prompts use model {arg}")
        else:
            chat.say(f"model: {await current_model(chat)}")
    elif name == "cost":
        if chat.session_id is None:
            chat.say("no session yet: nothing spent")
            return
        from ..library.usage_fmt import cost_lines

        found = await chat.client.call("session.lookup", prefix=chat.session_id)
        usage = (found["matches"] or [{}])[0].get("usage")
        for line in cost_lines(usage):
            chat.say(line)
    elif name == "compact":
        if chat.session_id is None:
            chat.say("no session yet: nothing to compact")
            return
        chat.say(await compact_line(chat.client, chat.session_id, arg or None))
    elif name == "sessions":
        page = await chat.client.list_sessions(limit=50)
        shown = [s for s in page["sessions"]
                 if not s.get("parent_session_id") and s.get("message_count")][:10]
        for s in shown:
            mark = "*" if s["session_id"] == chat.session_id else " "
            chat.say(f"{mark} {s['session_id']}  {s.get('message_count', 0):>4} msgs  "
                     f"{shorten(s.get('title') or '', 50)}")
        if not shown:
            chat.say("no sessions yet")
    else:
        chat.say(f"unknown command /{name}; /help lists them (//text sends /text)")


async def current_model(chat: Any) -> str:
    """The model the next prompt runs with, by name, and where that comes from."""
    if chat.options.get("model"):
        return f"{chat.options['model']} (set in this chat)"
    if chat.session_id is not None and chat.info.get("model"):
        return f"{chat.info['model']} (this session's)"
    try:
        defaults = (await chat.client.describe()).get("turn_defaults") or {}
    except Exception:  # noqa: BLE001 - the owner's default, if it says
        defaults = {}
    where = f", {defaults['provider']}" if defaults.get("provider") else ""
    if defaults.get("model"):
        return f"{defaults['model']} (the owner's default{where})"
    return "the owner's default (this owner does not name it: `tether status`)"


async def compact_line(client: Any, session_id: str, focus: str | None) -> str:
    """One line on what a manual compaction did (the chat's /compact)."""
    out = await client.call("session.compact", session_id=session_id, focus=focus)
    if not out["compacted"]:
        return f"nothing compacted: {out.get('reason')}"
    c = out["compaction"]
    return (f"compacted messages {c['first_index']}–{c['end_index'] - 1} into a summary of "
            f"{len(c['summary'])} characters (about {c['tokens_before']} → "
            f"{c['tokens_after']} tokens per request)")
