"""``tether chat``'s plan: which mode, which prompt, which turn options (SPEC §8).

Decided from the arguments and the terminals before anything is sent; a bad
prompt or flag is a usage error (exit 2) here, with nothing sent.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

from ..library.exits import EXIT_USAGE, CliError

__all__ = ["ChatPlan", "plan_chat", "turn_options", "RECEIPT_POLL_SECONDS"]

#: the CLI's own turn options (flag dest -> wire name), sent only when given
TURN_FLAGS = ("provider", "model", "base_url", "toolsets", "reasoning", "max_turns", "sandbox")
#: while waiting on a turn with no events, check its receipt this often
RECEIPT_POLL_SECONDS = 5.0


class ChatPlan(NamedTuple):  # not a dataclass: building one costs ~0.2 ms more per chat
    query: str | None
    interactive: bool
    quiet: bool  # -Q / --oneshot: only the answer on stdout
    json: bool
    stream_to_terminal: bool  # finite, but stdout is a terminal: show progress live
    options: dict[str, Any]
    resume: str | None
    input_id: str | None
    last: bool = False  # --last: resume the most recently active session


def _isatty(stream: Any) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        return False


def _read_query_file(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        where = "stdin" if path == "-" else path
        raise CliError(EXIT_USAGE, "unreadable_query_file", f"cannot read {where}: "
                       f"{getattr(exc, 'strerror', None) or exc}",
                       "give a readable UTF-8 text file, or - for stdin") from None


def _not_text(where: str) -> None:
    raise CliError(EXIT_USAGE, "unreadable_query", f"the prompt from {where} is not UTF-8 text",
                   "give the prompt as UTF-8 text")


def turn_options(args: Any) -> dict[str, Any]:
    """The per-turn options the user gave, under their wire names."""
    options = {name: getattr(args, name) for name in TURN_FLAGS
               if getattr(args, name, None) is not None}
    if getattr(args, "ignore_rules", False):
        options["ignore_rules"] = True
    return options


def plan_chat(args: Any, stdin: Any = None, stdout: Any = None) -> ChatPlan:
    """Decide the mode and read the query; raises CliError (exit 2) for bad input."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    for flag, value in (("--input-id", args.input_id), ("--resume", args.resume)):
        if value is not None and not value.strip():
            raise CliError(EXIT_USAGE, "usage", f"{flag} is empty",
                           f"give {flag} a value, or leave the flag out")
    if args.resume is not None and getattr(args, "last", False):
        raise CliError(EXIT_USAGE, "usage", "give --resume ID or --last, not both",
                       "see `tether chat --help`")
    stdin_tty, stdout_tty = _isatty(stdin), _isatty(stdout)
    quiet = bool(args.quiet or args.oneshot)
    interactive = stdin_tty and stdout_tty and not (quiet or args.json)
    query = args.q
    if args.query_file is not None:
        query = _read_query_file(args.query_file)
    if query is None and not interactive:
        if stdin_tty or stdin is None:
            raise CliError(EXIT_USAGE, "no_query",
                           "this chat runs one finite turn (stdout is not a terminal, or "
                           "-Q/--oneshot/--json was given) but no query was given",
                           'give the prompt with -q "TEXT", --query-file PATH, or on stdin')
        try:
            query = stdin.read()  # `echo prompt | tether chat`
        except UnicodeDecodeError:
            query = None
            _not_text("stdin")
    if query is not None:
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:  # bytes that were not UTF-8, kept as lone surrogates
            _not_text("stdin" if args.q is None and args.query_file in (None, "-")
                      else args.query_file or "-q")
    if query is not None and not query.strip():
        raise CliError(EXIT_USAGE, "empty_query", "the query is empty",
                       'give the prompt with -q "TEXT" or --query-file PATH')
    return ChatPlan(query=query, interactive=interactive, quiet=quiet, json=bool(args.json),
                    stream_to_terminal=stdout_tty and not (quiet or args.json),
                    options=turn_options(args), resume=args.resume, input_id=args.input_id,
                    last=bool(getattr(args, "last", False)))
