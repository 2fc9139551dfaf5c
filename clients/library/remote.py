"""Where a CLI command finds its owner: the home's, or the nodes named by ``--url``.

The commands that talk to an owner as a client (``REMOTE_COMMANDS``) take
``--url URL[,URL...]`` (else ``$TETHER_URL``) and ``--token TOKEN`` (else
``$TETHER_TOKEN``). With a URL the command connects to those TCP listeners, in
order, failing over from one node of a fleet to the next (nodes.py), and never
looks for or starts the home's owner; without one it uses the home as always.
Light on purpose: cli.py imports it to build the parser. Which session a command means
(``resolve_session``: an id, an unambiguous prefix of one, or ``--last``) is here too,
shared by the commands and the chat.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

from .exits import CONTEXT, EXIT_OK, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from .client import TetherClient

__all__ = ["REMOTE_COMMANDS", "Remote", "add_remote_options", "connect_owner", "remote_of",
           "remote_status", "resolve_session", "session_arg"]

#: the commands that accept --url/--token (tokens and shutdown stay on the Unix socket)
REMOTE_COMMANDS = frozenset({"chat", "status", "sessions", "cancel", "attach", "events",
                             "resolve", "approvals", "approve", "deny", "cron", "export"})


class Remote(NamedTuple):
    urls: list[str]
    token: str | None


def add_remote_options(parser: Any) -> None:
    parser.add_argument("--url", metavar="URL[,URL...]",
                        help="talk to the owner's TCP listener at URL instead of the home's "
                             "owner (never starting one); several nodes of a fleet, comma-"
                             "separated, are tried in order (default: $TETHER_URL)")
    parser.add_argument("--token", metavar="TOKEN",
                        help="the bearer token for --url (default: $TETHER_TOKEN, which "
                             "other users cannot see in the process list)")


def remote_of(args: Any) -> Remote | None:
    """The nodes ``args`` (and the environment) name, or None for the home's owner."""
    from .nodes import parse_urls

    if not hasattr(args, "url"):
        return None  # a command that only ever talks to the home's owner
    urls = parse_urls(args.url if args.url is not None else os.environ.get("TETHER_URL"))
    if not urls:
        if args.token:
            raise CliError(EXIT_USAGE, "usage", "--token is for --url",
                           "name the node's TCP listener: --url ws://HOST:PORT/")
        return None
    for url in urls:
        if not url.startswith(("ws://", "wss://")):
            raise CliError(EXIT_USAGE, "usage", f"{url!r} is not a ws:// or wss:// URL",
                           "give the owner's TCP listener, e.g. --url ws://127.0.0.1:8765/ "
                           "(`tether status` on its machine shows it)")
    return Remote(urls, args.token or os.environ.get("TETHER_TOKEN") or None)


async def connect_owner(home: Any, *, autostart: bool = True,
                        blocking: bool = False) -> TetherClient:
    """A ``TetherClient`` of the command's owner: the nodes of ``CONTEXT.remote``,
    else the owner of ``home`` (started if ``autostart``). ``blocking``: the home's
    owner through ``BlockingClient``, whose coroutines ``blocking.run_sync`` runs."""
    remote: Remote | None = CONTEXT.remote
    if remote is None and blocking:
        from .blocking import BlockingClient

        return await BlockingClient.connect(home, autostart=autostart)
    from .client import TetherClient

    if remote is None:
        return await TetherClient.connect(home, autostart=autostart)
    return await TetherClient.connect(url=remote.urls, token=remote.token)


async def remote_status(as_json: bool) -> int:
    """``tether status --url``: which node answered, and what it says of itself."""
    from .usage_fmt import add_up, cost, tokens, top_level_usage

    remote: Remote = CONTEXT.remote
    async with await connect_owner(None) as client:
        info = await client.describe()
        node = client.url
        usage = add_up(await top_level_usage(client))
    if as_json:
        import orjson

        print(orjson.dumps({"node": node, "nodes": remote.urls, "runtime": info,
                            "usage": usage}).decode())
        return EXIT_OK
    others = [u for u in remote.urls if u != node]
    print(f"node {node} answered" + (f" (also given: {', '.join(others)})" if others else ""))
    print(f"  pid           {info.get('pid')}")
    print(f"  version       {info.get('version')} ({info.get('protocol')})")
    print(f"  instance      {info.get('instance_id')}, epoch {info.get('epoch')}")
    print(f"  capabilities  {', '.join(info.get('capabilities') or [])}")
    print(f"  usage         {tokens(usage['total_tokens'])} tokens in {usage['requests']} "
          f"requests, cost {cost(usage)}")
    return EXIT_OK


def session_arg(args: Any) -> str | None:
    """The id (or prefix) a command was given, or None with ``--last``."""
    given = getattr(args, "session_id", None)
    if getattr(args, "last", False):
        if given is not None:
            raise CliError(EXIT_USAGE, "usage", "give a session id or --last, not both",
                           f"see `tether {CONTEXT.command} --help`")
        return None
    if given is None:
        raise CliError(EXIT_USAGE, "usage", "which session? give its id (a prefix will do) "
                       "or --last", "`tether sessions` lists them")
    return str(given)


async def resolve_session(client: Any, given: str | None) -> str:
    """The full session id for ``given`` (None: the most recently active one)."""
    if given is None:
        found = await client.call("session.lookup", last=True)
        if not found["matches"]:
            raise CliError(EXIT_USAGE, "not_found", "there is no session with messages yet",
                           "`tether chat` starts one")
        sid = str(found["matches"][0]["session_id"])
        CONTEXT.session_id = sid
        return sid
    found = await client.call("session.lookup", prefix=given)
    matches = found["matches"]
    if matches and matches[0]["session_id"] == given:
        sid = given
    elif len(matches) == 1:
        sid = str(matches[0]["session_id"])
    elif not matches:
        raise CliError(EXIT_USAGE, "not_found", f"no session starts with {given!r}",
                       "`tether sessions` lists the sessions this owner knows")
    else:
        listed = ", ".join(m["session_id"] for m in matches[:5])
        more = " and more" if found["more"] or len(matches) > 5 else ""
        raise CliError(EXIT_USAGE, "ambiguous", f"{given!r} matches {len(matches)} sessions: "
                       f"{listed}{more}", "type more of the id")
    CONTEXT.session_id = sid
    return sid
