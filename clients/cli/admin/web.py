"""``tether web`` (the viewer page's link) and ``tether token list | revoke | create``.

Loaded only when one of these commands runs; cli.py parses the arguments.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

from ...library.exits import EXIT_OK, EXIT_OWNER, EXIT_USAGE, CliError
from ..commands import _home, _run

__all__ = ["WEB_DEFAULT_TCP", "cmd_token", "cmd_web", "parse_duration"]

#: where `tether web` asks a new owner to listen when none runs yet
WEB_DEFAULT_TCP = "127.0.0.1:8765"
#: how long the link `tether web` prints stays usable (it works once)
WEB_LINK_TTL = 15 * 60
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> int:
    """``90``, ``90s``, ``15m``, ``8h``, ``30d``, ``2w`` -> seconds (at least 1)."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhdw]?)\s*", text)
    if m is None or int(m.group(1)) == 0:
        raise CliError(EXIT_USAGE, "usage", f"--ttl {text!r} is not a duration",
                       "give a positive number with an optional unit: 90s, 15m, 8h, 30d, 2w")
    return int(m.group(1)) * _UNITS[m.group(2) or "s"]


def cmd_token(args: Any) -> int:
    action = args.action or "create"
    if action != "revoke" and args.token_id is not None:
        raise CliError(EXIT_USAGE, "usage", f"`tether token {action}` takes no token id")
    if action == "revoke" and args.token_id is None:
        raise CliError(EXIT_USAGE, "usage", "`tether token revoke` needs the token's id",
                       "`tether token list` shows the ids")
    ttl = parse_duration(args.ttl) if args.ttl is not None else None
    if action != "create" and (ttl is not None or args.label is not None):
        raise CliError(EXIT_USAGE, "usage", "--label and --ttl are for `tether token create`")
    return int(_run(_token(_home(args), action, args.label, ttl, args.token_id)))


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    shown = time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
    return shown + (" (expired)" if ts <= time.time() else "")


async def _token(home: Any, action: str, label: str | None, ttl: int | None,
                 token_id: str | None) -> int:
    from ...library.client import TetherClient

    async with await TetherClient.connect(home) as client:
        if action == "list":
            tokens = (await client.call("token.list"))["tokens"]
            if not tokens:
                print("[tether] no tokens; `tether token create` mints one", file=sys.stderr)
            for t in tokens:
                kind = "one-time link" if t["once"] else "bearer"
                print(f"{t['token_id']}  {kind:13}  created {_when(t['created_at'])}  "
                      f"expires {_when(t['expires_at'])}  {t['label'] or ''}".rstrip())
            return EXIT_OK
        if action == "revoke":
            done = await client.call("token.revoke", token_id=token_id)
            print(f"[tether] token {token_id} revoked; {done['closed_connections']} "
                  "connection(s) using it closed", file=sys.stderr)
            return EXIT_OK
        minted = await client.call("token.create", label=label, ttl_seconds=ttl)
    print(minted["token"])
    expiry = f", valid for {ttl} s" if ttl else ""
    print(f"[tether] token {minted['token_id']} minted{expiry}; it is shown only now (the owner "
          "keeps its hash). Send it as `Authorization: Bearer <token>`, or from a browser as "
          "the subprotocol `tether.token.<token>` (docs/protocol.md §8).", file=sys.stderr)
    return EXIT_OK


def cmd_web(args: Any) -> int:
    return int(_run(_web(_home(args), args.tcp, args.no_open)))


async def _web(home: Any, tcp: str | None, no_open: bool) -> int:
    from tether.rpc.errors import RpcError

    from ...library.client import TetherClient
    from ...library.discovery import ensure_owner, live_descriptor

    running = live_descriptor(home)
    desc = running or await ensure_owner(home, tcp=tcp or WEB_DEFAULT_TCP)
    async with await TetherClient.connect(home) as client:
        if not desc.get("tcp_url"):
            # an owner started without a TCP listener opens one now; its turns go on
            try:
                out = await client.call("runtime.listen_tcp", address=tcp or WEB_DEFAULT_TCP)
            except RpcError as exc:
                if exc.reason == "method_not_found":  # an older owner
                    raise CliError(EXIT_OWNER, "no_tcp",
                                   f"the owner for {home} (pid {desc.get('pid')}) has no TCP "
                                   "listener and cannot open one", "`tether stop`, then "
                                   f"`tether web` (it starts one on {WEB_DEFAULT_TCP})") from None
                if exc.reason == "invalid_params":
                    raise CliError(EXIT_OWNER, "no_tcp", exc.detail,
                                   "`tether web --tcp HOST:PORT` picks another address "
                                   "(port 0: any free one)") from None
                raise
            desc = {**desc, "tcp_url": out["tcp_url"]}
            if out["opened"]:
                print(f"[tether] the owner now listens on {out['tcp_url']} too, until it "
                      "stops", file=sys.stderr)
        minted = await client.call("token.create", label="web link", once=True,
                                   ttl_seconds=WEB_LINK_TTL)
    url = desc["tcp_url"].replace("ws://", "http://", 1) + "web/#once=" + minted["token"]
    print(url)
    print(f"[tether] the viewer for {home}; the link works once, within "
          f"{WEB_LINK_TTL // 60} minutes", file=sys.stderr)
    desktop = sys.platform == "darwin" or os.environ.get("DISPLAY") or os.environ.get(
        "WAYLAND_DISPLAY")
    if not no_open and desktop and sys.stdout.isatty():
        import webbrowser

        webbrowser.open(url)
    return EXIT_OK
