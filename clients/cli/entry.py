"""The ``tether`` command: argument parsing, the small commands, and error reporting.

``main()`` is the console script. Each subcommand is one ``cmd_*`` function
of commands.py; ``chat`` lives in ``chat.py``. Imports are lazy and per command: ``tether
chat`` loads the client (websockets, orjson) but never pydantic, httpx, yaml or
the daemon; only ``serve --foreground``, ``bench``, ``config check`` and ``doctor``
import ``tether.daemon``.
Every failure leaves through ``main()``, which prints ``tether: reason: detail``
and a hint (exits.py), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, cast

from ..library.exits import (
    CONTEXT,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_USAGE,
    CliError,
    from_exception,
    report,
)
from ..library.remote import REMOTE_COMMANDS, add_remote_options
from .approvals_parser import add_approval_parsers
from .commands import (
    cmd_attach,
    cmd_bench,
    cmd_cancel,
    cmd_chat,
    cmd_events,
    cmd_resolve,
    cmd_schema,
    cmd_serve,
    cmd_status,
    cmd_stop,
)
from .help import add_examples
from .session_parser import add_sessions_parser

__all__ = ["main", "build_parser"]

def _lazy(module: str, name: str) -> Any:
    """A command whose module is imported only when it runs."""

    def run(args: Any) -> int:
        import importlib

        return int(getattr(importlib.import_module(f"tether.clients.{module}"), name)(args))

    return run


class _Unused:
    """The parser of a command other than the one running: it takes every call and keeps
    nothing, so ``build_parser(only=...)`` reads the same as the whole parser but builds
    one command (argparse spends more on two dozen subparsers than a one-shot chat
    spends on its own work)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kw: self


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors follow the CLI's error format (exit 2)."""

    def error(self, message: str) -> Any:
        raise CliError(EXIT_USAGE, "usage", message, f"see `{self.prog} --help`")


class _Version(argparse.Action):
    """--version, resolved only when asked (importlib.metadata costs ~20 ms)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        from ..library.version import installed_version

        print(f"tether {installed_version()}")
        parser.exit()


def _home_option(parser: argparse.ArgumentParser, *, default: Any) -> None:
    parser.add_argument("--home", metavar="DIR", default=default,
                        help="the owner's home (default: $TETHER_HOME, else the platform's "
                             "user data dir)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``tether`` parser: every command, or with ``only`` just that one (the
    others are left out: ``tether --help`` and usage errors use the whole parser)."""
    parser = _Parser(prog="tether", description=(
        "tether keeps agent sessions alive in one owner process per home; this command "
        "talks to it (starting it when needed)."),
        epilog="Exit codes: 0 completed, 1 turn failed/cancelled/interrupted, 2 usage or "
               "invalid input, 3 owner unreachable. Run `tether COMMAND --help` for details.")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    _home_option(parser, default=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def command(name: str, help: str, home: bool = True,  # noqa: A002
                **kw: Any) -> argparse.ArgumentParser:
        if only is not None and name != only:
            return cast(argparse.ArgumentParser, _Unused())
        p = sub.add_parser(name, help=help, description=kw.pop("description", help), **kw)
        add_examples(p, name)
        if home:
            # --home works before or after the command; SUPPRESS keeps the global value
            _home_option(p, default=argparse.SUPPRESS)
        if name in REMOTE_COMMANDS:  # --url/--token: an owner's TCP listener, a fleet
            add_remote_options(p)
        return p

    p = command("serve", "run the owner for a home (detached unless --foreground)")
    p.add_argument("--tcp", metavar="HOST:PORT",
                   help="also listen on loopback TCP (clients need a token: `tether token`)")
    p.add_argument("--foreground", action="store_true",
                   help="run in this process and log to stderr too; Ctrl-C stops it")
    p.add_argument("--store", metavar="URL",
                   help="keep state in this postgresql:// database, as one node of a fleet "
                        "(default: store.url in config.yaml, $TETHER_STORE, else state.db)")
    p.set_defaults(func=cmd_serve)

    p = command("service", "start the owner at login: a systemd user unit or launchd agent",
                description=(
                    "install: write a systemd user unit (Linux) or launchd agent (macOS) that "
                    "runs `tether serve --foreground` for this home at login and starts it "
                    "again when it fails, and enable it where the service manager can be "
                    "reached. uninstall: disable and remove it. status: the file, the "
                    "manager's view and the owner. --dry-run prints what would be written "
                    "and run. docs/service.md has the details."))
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--tcp", metavar="HOST:PORT", help="install: the owner also listens on TCP")
    p.add_argument("--store", metavar="URL",
                   help="install: the owner keeps state in this postgresql:// database")
    p.add_argument("--dry-run", action="store_true",
                   help="print the file and the commands; change nothing")
    p.add_argument("--platform", choices=("systemd", "launchd"),
                   help="the service manager (default: launchd on macOS, else systemd)")
    p.set_defaults(func=_lazy("cli.admin.service_cmd", "cmd_service"))

    p = command("stop", "ask the owner to drain and exit; waits until it has")
    p.set_defaults(func=cmd_stop)

    p = command("status", "show the owner (exit 3 if none is running)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--store", metavar="URL",
                   help="show the nodes of the fleet on this postgresql:// database, with "
                        "the sessions each holds (exit 3 if none is alive)")
    p.set_defaults(func=cmd_status)

    p = command("config", "show the effective configuration and where each value came from",
                description=(
                    "`tether config check` (the default): the configuration an owner of this "
                    "home would start with — config.yaml, the environment (OPENAI_BASE_URL, "
                    "OPENAI_API_KEY) and the defaults — every setting with where its value "
                    "came from, secrets masked. Exit 0 when valid; 2 with the reason when the "
                    "owner would refuse it. Never starts an owner."))
    p.add_argument("action", nargs="?", choices=("check",), default="check")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_lazy("cli.admin.config_cmd", "cmd_config"))

    p = command("doctor", "check the configuration, the owner and the model endpoint",
                description=(
                    "One line per check, ok or FAIL with how to fix it: the configuration "
                    "is valid; the owner runs (pid, addresses) or not; its socket answers; "
                    "it uses the configuration here; the model endpoint answers GET "
                    "{base_url}/models with the configured key and serves the configured "
                    "model. Exit 0 when nothing failed, 1 otherwise. Never starts an owner."))
    p.set_defaults(func=_lazy("cli.admin.doctor", "cmd_doctor"))

    p = command("logs", "show the end of the owner's log (never starts an owner)",
                description=(
                    "Show the end of the owner's log, <home>/logs/owner.log: what the owner "
                    "did and every error, with times. --stdio shows <home>/logs/daemon.log "
                    "instead: the raw output of an owner a client started (why it could not "
                    "start, a crash's traceback). Never starts an owner."))
    p.add_argument("-n", "--lines", type=int, default=20, metavar="N",
                   help="how many of the last lines (default 20)")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep printing new lines, across rotations and restarts, until Ctrl-C")
    p.add_argument("--stdio", action="store_true",
                   help="show logs/daemon.log, the owner's raw stdout/stderr")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per record: time, level, logger, message, and an "
                        "activity line's event and fields (turn.end, tool.start, ...)")
    p.set_defaults(func=_lazy("cli.admin.logs_cmd", "cmd_logs"))

    p = command("chat", "chat with an agent: one finite turn, or interactive on a terminal",
                description=(
                    "Chat with an agent. Finite (one turn, delegations joined before the "
                    "answer, then exit) with -Q, --oneshot, --json, or when stdout or stdin "
                    "is not a terminal; otherwise interactive (a -q query seeds the first "
                    "prompt; background results arrive as new turns).\n\n"
                    "Interactive keys: arrows edit and recall history; Alt-Enter inserts a "
                    "newline; a paste stays one prompt; Ctrl-C clears the line, or "
                    "interrupts the running turn; Ctrl-D leaves at once (a running turn "
                    "goes on in the owner). /help lists the chat's commands (/new, /resume "
                    "ID, /sessions, /cancel, /model M, /exit)."),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    query = p.add_mutually_exclusive_group()
    query.add_argument("-q", "--query", dest="q", metavar="TEXT", help="the prompt")
    query.add_argument("--query-file", metavar="PATH|-",
                       help="read the prompt from a file (- for stdin)")
    p.add_argument("-Q", "--quiet", action="store_true",
                   help="finite; print only the final answer")
    p.add_argument("--oneshot", action="store_true",
                   help="finite: one turn, print only the final answer, exit")
    p.add_argument("--resume", metavar="ID",
                   help="continue an existing session (an unambiguous id prefix will do)")
    p.add_argument("--last", action="store_true",
                   help="continue the most recently active session")
    p.add_argument("--provider", metavar="P", help="demo, openai or custom (this turn)")
    p.add_argument("--model", metavar="M", help="model name (this turn)")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (this turn)")
    p.add_argument("--toolsets", metavar="a,b", type=_csv,
                   help="comma-separated toolsets: terminal, files, delegation (default: all)")
    p.add_argument("--max-turns", metavar="N", type=_max_turns,
                   help="model calls allowed in the turn (1-200)")
    p.add_argument("--reasoning", metavar="LEVEL", choices=("none", "low", "medium", "high"),
                   help="reasoning effort: none, low, medium or high")
    p.add_argument("--ignore-rules", action="store_true",
                   help="do not load project rules (AGENTS.md) from the working directory")
    p.add_argument("--sandbox", metavar="MODE", choices=("workspace-write", "read-only", "off"),
                   help="the sandbox of this turn's commands: workspace-write, read-only or "
                        "off; at least as strict as the owner's sandbox.mode")
    p.add_argument("--input-id", metavar="ID",
                   help="idempotency key of the (first) prompt; re-running with the same id "
                        "returns the same turn instead of running it again")
    p.add_argument("--json", action="store_true",
                   help="finite; print events as JSON lines, the final receipt last")
    p.set_defaults(func=cmd_chat)

    add_sessions_parser(command, _Parser)

    p = command("cancel", "cancel the running turn of a session, from any terminal")
    p.add_argument("session_id", metavar="ID", nargs="?",
                   help="the session (a prefix will do); default: the one session running")
    p.add_argument("--last", action="store_true", help="the most recently active session")
    p.set_defaults(func=cmd_cancel)

    p = command("attach", "watch a session live: its transcript, then new events (Ctrl-C)")
    p.add_argument("session_id", metavar="ID", nargs="?", help="the session (a prefix will do)")
    p.add_argument("--last", action="store_true", help="the most recently active session")
    p.set_defaults(func=cmd_attach)

    p = command("events", "print a session's stored events as JSON lines")
    p.add_argument("session_id", metavar="ID", nargs="?", help="the session (a prefix will do)")
    p.add_argument("--last", action="store_true", help="the most recently active session")
    p.add_argument("--since", type=int, default=0, metavar="N",
                   help="only events with seq > N (default 0: all)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    p.set_defaults(func=cmd_events)

    p = command("resolve", "settle a session's unknown admissions (running when an owner "
                           "crashed) as interrupted, so its queue goes on")
    p.add_argument("session_id", metavar="ID", help="the session (a prefix will do)")
    p.add_argument("--admission", metavar="ADM", help="only this admission")
    p.set_defaults(func=cmd_resolve)

    add_approval_parsers(command)
    if only in (None, "cron"):
        from .cron_cmd import add_cron_parser

        add_cron_parser(command, _Parser)
    if only in (None, "mcp"):
        from .admin.mcp_cmd import add_mcp_parser

        add_mcp_parser(command)
    p = command("acp", "speak the Agent Client Protocol on stdin/stdout for an editor (Zed, "
                       "JetBrains, Neovim): a viewer of the owner, which it starts if needed")
    p.set_defaults(func=_lazy("acp.agent", "cmd_acp"))

    p = command("schema", "print the JSON Schema of the whole protocol")
    p.set_defaults(func=cmd_schema)

    p = command("token", "TCP tokens: create (the default; shown once), list, revoke ID")
    p.add_argument("action", nargs="?", choices=("create", "list", "revoke"),
                   help="what to do (default: create)")
    p.add_argument("token_id", nargs="?", help="the token to revoke (see `tether token list`)")
    p.add_argument("--label", help="a note to recognise the token by")
    p.add_argument("--ttl", metavar="DURATION",
                   help="the token stops working after this long: 90s, 15m, 8h, 30d, 2w")
    p.set_defaults(func=_lazy("cli.admin.web", "cmd_token"))

    p = command("web", "print (and on a desktop open) a one-time link to the viewer page")
    p.add_argument("--tcp", metavar="HOST:PORT",
                   help="where the owner listens if it does not yet: it opens the port "
                        "without stopping (default 127.0.0.1:8765; port 0: any free one)")
    p.add_argument("--no-open", action="store_true", help="only print the link")
    p.set_defaults(func=_lazy("cli.admin.web", "cmd_web"))

    p = command("completion", "print a shell completion script: bash, zsh or fish",
                home=False, description="Print the completion script of a shell: commands, "
                "options and their choices complete on Tab. Load it from your shell's "
                "completion directory (see the examples).")
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    p.set_defaults(func=_lazy("cli.completion", "cmd_completion"))

    # the bench runs a private owner of its own; its options (--home among them) are
    # its own, so they all pass through untouched
    p = command("bench", "measure a private owner (see `tether bench --help`)", home=False,
                add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)
    return parser


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _max_turns(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 1 <= n <= 200:
        raise argparse.ArgumentTypeError("must be between 1 and 200")
    return n


def _command_named(argv: list[str]) -> str | None:
    """The command ``argv`` runs ("" for ``--version``), or None when it names none
    (``tether --help``, a mistake): then the whole parser is built."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--home":
            i += 2
        elif arg.startswith("--home="):
            i += 1
        elif arg == "--version":
            return ""
        else:
            return None if arg.startswith("-") else arg
    return None


def _parse(argv: list[str]) -> tuple[argparse.ArgumentParser, Any, list[str]]:
    """The parser and what it made of ``argv``: parsed by the running command's parser
    alone, and by the whole one when that finds a usage error (so the error names
    every command). parse_known_args: everything after `bench` is the bench's own."""
    only = _command_named(argv)
    if only is not None:
        parser = build_parser(only)
        try:
            return parser, *parser.parse_known_args(argv)
        except CliError:
            pass
    parser = build_parser()
    return parser, *parser.parse_known_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The console script: run one command, return its exit code."""
    try:
        parser, args, unknown = _parse(sys.argv[1:] if argv is None else argv)
        if args.command == "bench":
            args.rest = [*unknown, *args.rest]
        elif args.command == "mcp" and unknown[:1] == ["--"]:
            # `tether mcp add NAME [options] -- COMMAND ARGS`: the server's own argv
            args.server_command = [*args.server_command, *unknown[1:]]
        elif unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        CONTEXT.command = args.command
        return int(args.func(args) or 0)
    except SystemExit as exc:  # --help, --version, and the owner's own main()
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        hint = CONTEXT.resume_hint()
        going = "; a turn already sent goes on in the owner" if CONTEXT.input_id else ""
        print(f"\ntether: interrupted: stopped by Ctrl-C{going}"
              + (f"\nhint: {hint}" if hint else ""), file=sys.stderr)
        return EXIT_SIGINT
    except BrokenPipeError:
        # stdout closed early (`tether events ID | head`): not an error worth a message
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep exit-time flush quiet
        except OSError:
            pass
        return EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - the CLI's one boundary: never a traceback
        if os.environ.get("TETHER_DEBUG"):
            import traceback

            traceback.print_exc()
        return report(from_exception(exc))

