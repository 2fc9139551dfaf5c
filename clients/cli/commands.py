"""The ``tether`` subcommands other than ``chat`` (chat.py): one ``cmd_*`` each.

Each command imports what it needs inside itself, so loading this module
costs nothing on the one-shot path; cli.py parses the arguments and calls one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ..library.exits import CONTEXT, EXIT_OK, EXIT_OWNER, EXIT_USAGE, CliError

#: how long `tether stop` waits for the owner to drain and exit
STOP_TIMEOUT = 60.0


def _home(args: Any) -> Any:
    from tether.rpc.home import resolve_home

    from ..library.remote import remote_of

    CONTEXT.home = resolve_home(args.home)
    CONTEXT.remote = remote_of(args)
    return CONTEXT.home


def _run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


# -- owner lifecycle ----------------------------------------------------------


def cmd_serve(args: Any) -> int:
    from tether.rpc.home import HomeLayout

    from ..library.discovery import describe_owner, ensure_owner, live_descriptor

    home = _home(args)
    if args.foreground:
        from tether.daemon.__main__ import main as owner_main

        argv = ["--home", str(home), "--foreground"] + (["--tcp", args.tcp] if args.tcp else [])
        return owner_main(argv + (["--store", args.store] if args.store else []))
    if args.store:
        os.environ["TETHER_STORE"] = args.store  # the owner started below inherits it
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
    from ..library.discovery import live_descriptor

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

    from ..library.client import ConnectionLost, TetherClient
    from ..library.discovery import pid_alive

    pid = desc.get("pid")
    async with await TetherClient.connect(home, autostart=False) as client:
        try:
            await client.shutdown()
        except ConnectionLost:
            pass  # it was already on its way out
    started = time.monotonic()
    deadline = started + STOP_TIMEOUT
    said = False
    while pid_alive(pid) or HomeLayout(home).descriptor.exists():
        if not said and time.monotonic() - started > 1.0:
            said = True  # not a silent wait: the owner lets running turns finish first
            print(f"tether: the owner (pid {pid}) is letting running turns finish before it "
                  "exits (its grace is daemon.grace_seconds, 10 s by default)…",
                  file=sys.stderr, flush=True)
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
    from ..library.discovery import live_descriptor, read_descriptor

    if getattr(args, "store", None):
        from .admin.fleet_status import fleet_status

        return fleet_status(args.store, args.json)
    home = _home(args)
    if CONTEXT.remote is not None:
        from ..library.remote import remote_status

        return _run(remote_status(args.json))
    desc = live_descriptor(home)
    if desc is None:
        stale = read_descriptor(home)
        note = f" (stale descriptor of pid {stale.get('pid')})" if stale else ""
        raise CliError(EXIT_OWNER, "not_running", f"no owner is running for {home}{note}",
                       "`tether serve` starts one (any `tether chat` does too)")
    return _run_blocking(_status(home, desc, args.json))


async def _status(home: Any, desc: dict[str, Any], as_json: bool) -> int:
    """Run by ``_run_blocking``: the home's owner on the blocking client."""
    from ..library.blocking import BlockingClient
    from ..library.usage_fmt import add_up, cost, tokens, top_level_usage

    async with await BlockingClient.connect(home, autostart=False) as client:
        info = await client.describe()
        usage = add_up(await top_level_usage(client))
    if as_json:
        import orjson

        print(orjson.dumps({"home": str(home), "descriptor": desc, "runtime": info,
                            "usage": usage}).decode())
        return EXIT_OK
    print(f"owner running for {home}")
    print(f"  pid           {info.get('pid')}")
    print(f"  version       {info.get('version')} ({info.get('protocol')})")
    print(f"  instance      {info.get('instance_id')}, epoch {info.get('epoch')}")
    print(f"  socket        {desc.get('socket')}")
    print(f"  tcp           {desc.get('tcp_url') or '-'}")
    print(f"  started       {desc.get('started_at')}")
    defaults = info.get("turn_defaults")
    if isinstance(defaults, dict):  # an older owner does not say
        where = defaults.get("base_url") or "offline, no endpoint"
        print(f"  provider      {defaults.get('provider')} ({where})")
        print(f"  model         {defaults.get('model')}")
    if isinstance(info.get("sandbox"), str):  # an older owner does not say
        print(f"  sandbox       {info['sandbox']}")
    print(f"  capabilities  {', '.join(info.get('capabilities') or [])}")
    print(f"  usage         {tokens(usage['total_tokens'])} tokens in {usage['requests']} "
          f"requests, cost {cost(usage)}")
    if changed := config_changed_since(home, desc.get("started_at")):
        print(f"  note          {changed}")
    return EXIT_OK


def config_changed_since(home: Any, started_at: Any) -> str:
    """A note when config.yaml was written after the owner read it, else ""."""
    from datetime import datetime

    from tether.rpc.home import HomeLayout

    try:
        started = datetime.fromisoformat(str(started_at)).timestamp()
        written = HomeLayout(home).config.stat().st_mtime
    except (OSError, ValueError):
        return ""
    if written <= started + 1:  # started_at has whole seconds
        return ""
    return ("config.yaml changed after the owner started, which read it then: "
            "`tether stop` and the next command starts an owner with it")


# -- chat and viewers ---------------------------------------------------------


def _run_blocking(coro: Any) -> Any:
    """Run a command's coroutine on the blocking client (library/blocking.py)."""
    from ..library.blocking import run_sync

    return run_sync(coro)


def cmd_chat(args: Any) -> int:
    from ..tui.chat import plan_chat, run_chat

    home = _home(args)
    plan = plan_chat(args)
    if not plan.interactive and CONTEXT.remote is None:
        # a finite chat on the home's owner: no event loop, websockets or orjson to load
        return _run_blocking(run_chat(home, plan, blocking=True))
    return _run(run_chat(home, plan))


def cmd_sessions(args: Any) -> int:
    if args.limit < 1:
        raise CliError(EXIT_USAGE, "usage", "--limit must be 1 or more",
                       "see `tether sessions --help`")
    home = _home(args)
    if args.action is None and CONTEXT.remote is None:  # the list: a one-shot read
        return _run_blocking(_sessions(home, args, blocking=True))
    return _run(_sessions(home, args))


async def _sessions(home: Any, args: Any, blocking: bool = False) -> int:
    from ..library.remote import connect_owner
    from . import long_cmds, session_cmds

    run = {None: session_cmds.cmd_sessions_list, "rm": session_cmds.cmd_sessions_rm,
           "rename": session_cmds.cmd_sessions_rename,
           "prune": session_cmds.cmd_sessions_prune, "fork": long_cmds.cmd_sessions_fork,
           "compact": long_cmds.cmd_sessions_compact}[args.action]
    async with await connect_owner(home, autostart=False, blocking=blocking) as client:
        return await run(client, args)


def cmd_export(args: Any) -> int:
    from .long_cmds import export

    return int(_run(export(_home(args), args)))


def cmd_cancel(args: Any) -> int:
    return _run(_cancel(_home(args), args))


async def _cancel(home: Any, args: Any) -> int:
    from ..library.remote import connect_owner
    from .session_cmds import cmd_cancel as cancel

    async with await connect_owner(home, autostart=False) as client:
        return await cancel(client, args)


def cmd_attach(args: Any) -> int:
    from .session_cmds import session_arg

    given = session_arg(args)
    try:
        return _run(_attach(_home(args), given))
    except KeyboardInterrupt:
        return EXIT_OK  # Ctrl-C is how a viewer leaves; the session carries on


async def _attach(home: Any, given: str | None) -> int:
    from ..library.joining import open_session, unfinished_turns
    from ..library.remote import connect_owner
    from ..tui.render import Renderer, use_color
    from .session_cmds import resolve_session

    async with await connect_owner(home, autostart=False) as client:
        client.keep_owner_stopped = True  # a viewer: `tether stop` must stay stopped
        session_id = await resolve_session(client, given)
        # a running turn is replayed from its start: the answer so far, then live
        stream, snap, messages = await open_session(client, session_id)
        r = Renderer(sys.stdout, color=use_color(sys.stdout), mine=None)
        info = snap.get("info") or {}
        r.note(f"session {session_id} · {info.get('source') or '-'} · {info.get('title') or ''}")
        r.transcript(messages, await unfinished_turns(client, session_id, messages))
        for pending in snap.get("pending") or ():
            if pending.get("receipt", {}).get("admission_id") == snap.get("running"):
                continue
            receipt = pending.get("receipt") or {}
            r.progress(f"{receipt.get('status')}: {pending.get('text', '')[:70]}")
        r.note("(following; Ctrl-C to leave)")
        while True:
            event = await stream.get()
            if event is not None:
                r.event(event)


def cmd_events(args: Any) -> int:
    from .session_cmds import session_arg

    args.session_id = session_arg(args)
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

    from ..library.remote import connect_owner
    from .session_cmds import resolve_session

    async with await connect_owner(home, autostart=False) as client:
        args.session_id = await resolve_session(client, args.session_id)
        last = args.since
        async for event in client.all_events_since(args.session_id, args.since):
            sys.stdout.write(orjson.dumps(event).decode() + "\n")
            last = event["seq"]
        sys.stdout.flush()
        if args.follow:
            client.keep_owner_stopped = True  # a viewer: `tether stop` must stay stopped
            stream = client.events(args.session_id, after_seq=last)
            async for event in stream:
                sys.stdout.write(orjson.dumps(event).decode() + "\n")
                sys.stdout.flush()
    return EXIT_OK


def cmd_resolve(args: Any) -> int:
    return _run(_resolve(_home(args), args.session_id, args.admission))


async def _resolve(home: Any, session_id: str, admission_id: str | None) -> int:
    from ..library.remote import connect_owner
    from .session_cmds import resolve_session

    async with await connect_owner(home) as client:
        session_id = await resolve_session(client, session_id)
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


def cmd_bench(args: Any) -> int:
    try:
        from tether.bench import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name != "tether.bench":
            raise
        raise CliError(EXIT_USAGE, "unavailable", "this build of tether has no bench",
                       "install tether from a full source checkout") from None
    return bench_main(list(args.rest))
