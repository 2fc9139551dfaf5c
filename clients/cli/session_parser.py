"""The argument parsers of ``tether sessions`` (list, rm, rename, prune, fork,
compact) and ``tether export``, added through cli.py's ``command`` helper."""

from __future__ import annotations

import argparse
from typing import Any

from .commands import cmd_export, cmd_sessions

__all__ = ["add_sessions_parser"]


def add_sessions_parser(command: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``tether sessions …`` and ``tether export``; ``parser_class`` is the
    CLI's own (its error format)."""
    p = command("sessions", "list sessions, newest first; rm, rename, prune, fork, compact them",
                description=(
                    "List sessions, newest first (empty ones, delegation children and "
                    "those of cron jobs and the HTTP endpoint only with --all or --source), "
                    "or manage them: `tether sessions rm ID...`, `tether "
                    "sessions rename ID TITLE`, `tether sessions prune`, `tether sessions fork "
                    "ID [--at SEQ]`, `tether sessions compact ID`. Wherever a session "
                    "id is taken, an unambiguous prefix of it will do (`ses_` may be left "
                    "out)."))
    p.add_argument("--limit", type=int, default=20, metavar="N", help="how many (default 20)")
    p.add_argument("--all", action="store_true",
                   help="include delegation child sessions, empty sessions, and those of "
                        "cron jobs and the HTTP endpoint")
    p.add_argument("--source", action="append", metavar="SOURCE",
                   help="only sessions from SOURCE: cli, web, acp, cron, http (api), "
                        "delegation; may be repeated")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    p.set_defaults(func=cmd_sessions, action=None)
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=parser_class)
    a = actions.add_parser("rm", help="delete sessions (with their delegation children)",
                           description="Delete sessions with their delegation child sessions. "
                           "On a terminal it shows what it will delete and asks first. "
                           "A session with a queued or running prompt, an unknown admission, "
                           "a running background process or an undelivered background "
                           "delegation is refused; so is one open in another viewer (a chat, "
                           "attach, the web page) unless --force.")
    a.add_argument("ids", metavar="ID", nargs="+")
    a.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    a.add_argument("-f", "--force", action="store_true",
                   help="do not ask, and delete even while another viewer has it open")
    a = actions.add_parser("rename", help="set a session's title")
    a.add_argument("session_id", metavar="ID")
    a.add_argument("title", metavar="TITLE")
    a = actions.add_parser("prune", help="delete empty sessions (nothing ever asked)")
    a.add_argument("--older-than", type=float, default=60.0, metavar="MIN",
                   help="only those created at least MIN minutes ago (default 60)")
    a.add_argument("--dry-run", action="store_true", help="list them, delete nothing")
    a = actions.add_parser("fork", help="copy a session's history into a new session",
                           description="A new session whose history is the session's turns "
                           "that had ended by seq SEQ (default: all that have ended), "
                           "compactions included; the original is untouched. Prints the "
                           "new session's id.")
    a.add_argument("session_id", metavar="ID")
    a.add_argument("--at", type=int, metavar="SEQ", help="the event seq to fork at "
                   "(`tether events ID` shows them)")
    a = actions.add_parser("compact", help="summarise a session's older turns now",
                           description="Ask the model to summarise the session's older "
                           "turns; later requests send the summary in their place. The "
                           "transcript stays whole (attach, events and export show it).")
    a.add_argument("session_id", metavar="ID")
    a.add_argument("--focus", metavar="TEXT", help="what the summary must keep")

    p = command("export", "write a session's whole transcript as Markdown or JSON")
    p.add_argument("session_id", metavar="ID", nargs="?", help="the session (a prefix will do)")
    p.add_argument("--last", action="store_true", help="the most recently active session")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown",
                   help="markdown for people (default), json for programs")
    p.add_argument("-o", "--output", metavar="FILE", help="write FILE (default: stdout)")
    p.set_defaults(func=cmd_export)
