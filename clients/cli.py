"""The ``tether`` command: argument parsing, the small commands, and error reporting.

``main()`` is the console script. Each subcommand is one ``cmd_*`` function;
``chat`` lives in ``chat.py``. Imports are lazy and per command: ``tether
chat`` loads the client (websockets, orjson) but never pydantic, httpx, yaml or
the daemon; only ``serve --foreground`` and ``bench`` import ``tether.daemon``.
Every failure leaves through ``main()``, which prints ``tether: reason: detail``
and a hint (exits.py), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .exits import (
    CONTEXT,
    EXIT_OK,
    EXIT_OWNER,
    EXIT_SIGINT,
    EXIT_USAGE,
    CliError,
    from_exception,
    report,
)

__all__ = ["main", "build_parser"]

#: how long `tether stop` waits for the owner to drain and exit
STOP_TIMEOUT = 60.0


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
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("tether")
        except PackageNotFoundError:
            v = "0+unknown"
        print(f"tether {v}")
        parser.exit()


def _home_option(parser: argparse.ArgumentParser, *, default: Any) -> None:
    parser.add_argument("--home", metavar="DIR", default=default,
                        help="the owner's home (default: $TETHER_HOME, else the platform's "
                             "user data dir)")


def build_parser() -> argparse.ArgumentParser:
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
        p = sub.add_parser(name, help=help, description=kw.pop("description", help), **kw)
        if home:
            # --home works before or after the command; SUPPRESS keeps the global value
            _home_option(p, default=argparse.SUPPRESS)
        return p

    p = command("serve", "run the owner for a home (detached unless --foreground)")
    p.add_argument("--tcp", metavar="HOST:PORT",
                   help="also listen on loopback TCP (clients need a token: `tether token`)")
    p.add_argument("--foreground", action="store_true",
                   help="run in this process and log to stderr too; Ctrl-C stops it")
    p.set_defaults(func=cmd_serve)

    p = command("stop", "ask the owner to drain and exit; waits until it has")
    p.set_defaults(func=cmd_stop)

    p = command("status", "show the owner (exit 3 if none is running)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_status)

    p = command("chat", "chat with an agent: one finite turn, or interactive on a terminal",
                description=(
                    "Chat with an agent. Finite (one turn, delegations joined before the "
                    "answer, then exit) with -Q, --oneshot, --json, or when stdout or stdin "
                    "is not a terminal; otherwise interactive (a -q query seeds the first "
                    "prompt; background results arrive as new turns; Ctrl-D leaves)."),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    query = p.add_mutually_exclusive_group()
    query.add_argument("-q", "--query", dest="q", metavar="TEXT", help="the prompt")
    query.add_argument("--query-file", metavar="PATH|-",
                       help="read the prompt from a file (- for stdin)")
    p.add_argument("-Q", "--quiet", action="store_true",
                   help="finite; print only the final answer")
    p.add_argument("--oneshot", action="store_true",
                   help="finite: one turn, print only the final answer, exit")
    p.add_argument("--resume", metavar="ID", help="continue an existing session")
    p.add_argument("--provider", metavar="P", help="demo, openai or custom (this turn)")
    p.add_argument("--model", metavar="M", help="model name (this turn)")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (this turn)")
    p.add_argument("--toolsets", metavar="a,b", type=_csv,
                   help="comma-separated toolsets (e.g. delegation); empty for none")
    p.add_argument("--max-turns", metavar="N", type=_max_turns,
                   help="model calls allowed in the turn (1-200)")
    p.add_argument("--reasoning", metavar="LEVEL", choices=("none", "low", "medium", "high"),
                   help="reasoning effort: none, low, medium or high")
    p.add_argument("--ignore-rules", action="store_true",
                   help="do not load project rules (AGENTS.md) from the working directory")
    p.add_argument("--input-id", metavar="ID",
                   help="idempotency key of the (first) prompt; re-running with the same id "
                        "returns the same turn instead of running it again")
    p.add_argument("--json", action="store_true",
                   help="finite; print events as JSON lines, the final receipt last")
    p.set_defaults(func=cmd_chat)

    p = command("sessions", "list sessions, newest first")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="how many (default 20)")
    p.add_argument("--all", action="store_true", help="include delegation child sessions")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    p.set_defaults(func=cmd_sessions)

    p = command("attach", "watch a session live: its transcript, then new events (Ctrl-C)")
    p.add_argument("session_id", metavar="ID")
    p.set_defaults(func=cmd_attach)

    p = command("events", "print a session's stored events as JSON lines")
    p.add_argument("session_id", metavar="ID")
    p.add_argument("--since", type=int, default=0, metavar="N",
                   help="only events with seq > N (default 0: all)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    p.set_defaults(func=cmd_events)

    p = command("resolve", "settle a session's unknown admissions (running when an owner "
                           "crashed) as interrupted, so its queue goes on")
    p.add_argument("session_id", metavar="ID")
    p.add_argument("--admission", metavar="ADM", help="only this admission")
    p.set_defaults(func=cmd_resolve)

    p = command("schema", "print the JSON Schema of the whole protocol")
    p.set_defaults(func=cmd_schema)

    p = command("token", "mint a bearer token for the TCP listener (shown once)")
    p.add_argument("--label", help="a note to recognise the token by")
    p.set_defaults(func=cmd_token)

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


def _home(args: Any) -> Any:
    from tether.rpc.home import resolve_home

    CONTEXT.home = resolve_home(args.home)
    return CONTEXT.home


def _run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


# -- owner lifecycle ----------------------------------------------------------


def cmd_serve(args: Any) -> int:
    from tether.rpc.home import HomeLayout

    from .discovery import describe_owner, ensure_owner, live_descriptor

    home = _home(args)
    if args.foreground:
        from tether.daemon.__main__ import main as owner_main

        argv = ["--home", str(home), "--foreground"] + (["--tcp", args.tcp] if args.tcp else [])
        return owner_main(argv)
    running = live_descriptor(home)
    if running is not None:
        raise CliError(EXIT_OWNER, "already_running",
                       f"an owner is already running for {home} (pid {running.get('pid')})",
                       "`tether stop` stops it; `tether status` describes it")
    desc = _run(ensure_owner(home, tcp=args.tcp))
    print(f"tether: owner running for {home} ({describe_owner(desc)}); "
          f"log: {HomeLayout(home).logs}")
    return EXIT_OK


def cmd_stop(args: Any) -> int:
    from .discovery import live_descriptor

    home = _home(args)
    desc = live_descriptor(home)
    if desc is None:
        print(f"tether: no owner is running for {home}", file=sys.stderr)
        return EXIT_OK
    return _run(_stop(home, desc))


async def _stop(home: Any, desc: dict[str, Any]) -> int:
    import asyncio
    import time

    from tether.rpc.home import HomeLayout

    from .client import ConnectionLost, TetherClient
    from .discovery import pid_alive

    pid = desc.get("pid")
    async with await TetherClient.connect(home, autostart=False) as client:
        try:
            await client.shutdown()
        except ConnectionLost:
            pass  # it was already on its way out
    deadline = time.monotonic() + STOP_TIMEOUT
    while pid_alive(pid) or HomeLayout(home).descriptor.exists():
        if time.monotonic() > deadline:
            raise CliError(EXIT_OWNER, "stop_timeout",
                           f"the owner (pid {pid}) did not exit within {STOP_TIMEOUT:g} s",
                           f"it may still be draining a turn; `kill -TERM {pid}` stops it too")
        if not pid_alive(pid):
            break  # it is gone; a descriptor left behind is stale and harmless
        await asyncio.sleep(0.05)
    print(f"tether: stopped the owner of {home} (pid {pid})")
    return EXIT_OK


def cmd_status(args: Any) -> int:
    from .discovery import live_descriptor, read_descriptor

    home = _home(args)
    desc = live_descriptor(home)
    if desc is None:
        stale = read_descriptor(home)
        note = f" (stale descriptor of pid {stale.get('pid')})" if stale else ""
        raise CliError(EXIT_OWNER, "not_running", f"no owner is running for {home}{note}",
                       "`tether serve` starts one (any `tether chat` does too)")
    return _run(_status(home, desc, args.json))


async def _status(home: Any, desc: dict[str, Any], as_json: bool) -> int:
    from .client import TetherClient

    async with await TetherClient.connect(home, autostart=False) as client:
        info = await client.describe()
    if as_json:
        import orjson

        print(orjson.dumps({"home": str(home), "descriptor": desc, "runtime": info}).decode())
        return EXIT_OK
    print(f"owner running for {home}")
    print(f"  pid           {info.get('pid')}")
    print(f"  version       {info.get('version')} ({info.get('protocol')})")
    print(f"  instance      {info.get('instance_id')}, epoch {info.get('epoch')}")
    print(f"  socket        {desc.get('socket')}")
    print(f"  tcp           {desc.get('tcp_url') or '-'}")
    print(f"  started       {desc.get('started_at')}")
    print(f"  capabilities  {', '.join(info.get('capabilities') or [])}")
    return EXIT_OK


# -- chat and viewers ---------------------------------------------------------


def cmd_chat(args: Any) -> int:
    from .chat import plan_chat, run_chat

    home = _home(args)
    plan = plan_chat(args)
    return _run(run_chat(home, plan))


def cmd_sessions(args: Any) -> int:
    if args.limit < 1:
        raise CliError(EXIT_USAGE, "usage", "--limit must be 1 or more",
                       "see `tether sessions --help`")
    return _run(_sessions(_home(args), args))


async def _sessions(home: Any, args: Any) -> int:
    from .client import TetherClient
    from .render import format_time, shorten

    shown: list[dict[str, Any]] = []
    async with await TetherClient.connect(home) as client:
        cursor = None
        while len(shown) < args.limit:
            page = await client.list_sessions(limit=min(500, max(args.limit, 1)), cursor=cursor)
            for s in page["sessions"]:
                if args.all or not s.get("parent_session_id"):
                    shown.append(s)
            cursor = page.get("next_cursor")
            if not cursor:
                break
    shown = shown[: args.limit]
    if args.json:
        import orjson

        for s in shown:
            print(orjson.dumps(s).decode())
        return EXIT_OK
    if not shown:
        print("no sessions yet; `tether chat` starts one", file=sys.stderr)
        return EXIT_OK
    print(f"{'SESSION':<28}  {'CREATED':<16}  {'UPDATED':<16}  {'MSGS':>4}  {'STATE':<7}  "
          f"{'SOURCE':<10}  TITLE")
    for s in shown:
        state = "running" if s.get("running") else "idle"
        print(f"{s['session_id']:<28}  {format_time(s.get('created_at')):<16}  "
              f"{format_time(s.get('updated_at')):<16}  {s.get('message_count', 0):>4}  "
              f"{state:<7}  {shorten(s.get('source') or '-', 10):<10}"
              f"  {shorten(s.get('title') or '', 40)}")
    return EXIT_OK


def cmd_attach(args: Any) -> int:
    try:
        return _run(_attach(_home(args), args.session_id))
    except KeyboardInterrupt:
        return EXIT_OK  # Ctrl-C is how a viewer leaves; the session carries on


async def _attach(home: Any, session_id: str) -> int:
    from .client import TetherClient
    from .render import Renderer, use_color

    CONTEXT.session_id = session_id
    async with await TetherClient.connect(home) as client:
        stream = client.events(session_id)
        snap = await client.resilient(stream.open)
        r = Renderer(sys.stdout, color=use_color(sys.stdout), mine=None)
        info = snap.get("info") or {}
        r.note(f"session {session_id} · {info.get('source') or '-'} · {info.get('title') or ''}")
        r.transcript(snap.get("messages") or [])
        for pending in snap.get("pending") or ():
            receipt = pending.get("receipt") or {}
            r.progress(f"{receipt.get('status')}: {pending.get('text', '')[:70]}")
        r.note("(following; Ctrl-C to leave)")
        while True:
            event = await stream.get()
            if event is not None:
                r.event(event)


def cmd_events(args: Any) -> int:
    if not 0 <= args.since < 2**63:
        raise CliError(EXIT_USAGE, "usage", "--since must be a seq from 0 to 2^63-1",
                       "see `tether events --help`")
    try:
        return _run(_events(_home(args), args))
    except KeyboardInterrupt:
        if not args.follow:
            raise
        return EXIT_OK


async def _events(home: Any, args: Any) -> int:
    import orjson

    from .client import TetherClient

    async with await TetherClient.connect(home) as client:
        last = args.since
        async for event in client.all_events_since(args.session_id, args.since):
            sys.stdout.write(orjson.dumps(event).decode() + "\n")
            last = event["seq"]
        sys.stdout.flush()
        if args.follow:
            stream = client.events(args.session_id, after_seq=last)
            async for event in stream:
                sys.stdout.write(orjson.dumps(event).decode() + "\n")
                sys.stdout.flush()
    return EXIT_OK


def cmd_resolve(args: Any) -> int:
    return _run(_resolve(_home(args), args.session_id, args.admission))


async def _resolve(home: Any, session_id: str, admission_id: str | None) -> int:
    from .client import TetherClient

    CONTEXT.session_id = session_id
    async with await TetherClient.connect(home) as client:
        if admission_id is None:
            snap = await client.resume(session_id)
            unknown = [p["receipt"]["admission_id"] for p in snap.get("pending") or ()
                       if p["receipt"]["status"] == "unknown"]
        else:
            unknown = [admission_id]
        for aid in unknown:
            receipt = await client.resolve_unknown(session_id, aid)
            print(f"{aid}: {receipt['status']}/{receipt['outcome']}")
    if not unknown:
        print(f"[tether] session {session_id} has no unknown admissions; nothing to settle",
              file=sys.stderr)
    return EXIT_OK


# -- the rest -----------------------------------------------------------------


def cmd_schema(args: Any) -> int:
    import orjson

    from tether.rpc.schema import protocol_schema  # the one command that needs pydantic

    sys.stdout.write(orjson.dumps(protocol_schema(), option=orjson.OPT_INDENT_2).decode() + "\n")
    return EXIT_OK


def cmd_token(args: Any) -> int:
    return _run(_token(_home(args), args.label))


async def _token(home: Any, label: str | None) -> int:
    from .client import TetherClient

    async with await TetherClient.connect(home) as client:
        minted = await client.create_token(label)
    print(minted["token"])
    print(f"[tether] token {minted['token_id']} minted; it is shown only now (the owner keeps "
          "its hash). Send it as `Authorization: Bearer <token>`.", file=sys.stderr)
    return EXIT_OK


def cmd_bench(args: Any) -> int:
    try:
        from tether.daemon.bench import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name != "tether.daemon.bench":
            raise
        raise CliError(EXIT_USAGE, "unavailable", "this build of tether has no bench",
                       "install tether from a full source checkout") from None
    return bench_main(list(args.rest))


def main(argv: list[str] | None = None) -> int:
    """The console script: run one command, return its exit code."""
    parser = build_parser()
    try:
        # parse_known_args: everything after `bench` belongs to the bench's own parser
        args, unknown = parser.parse_known_args(argv)
        if args.command == "bench":
            args.rest = [*unknown, *args.rest]
        elif unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        CONTEXT.command = args.command
        return int(args.func(args) or 0)
    except SystemExit as exc:  # --help, --version, and the owner's own main()
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        hint = CONTEXT.resume_hint()
        print("\ntether: interrupted" + (f"\nhint: {hint}" if hint else ""), file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
