"""``tether mcp list | tools NAME | resources NAME | add NAME ... | rm NAME``: the
owner's MCP servers.

``list``, ``tools`` and ``resources`` ask the owner (starting it when none
runs): ``list`` shows every configured server's state without starting any;
``tools NAME`` starts that server if needed and lists its tools as the model
sees them; ``resources NAME`` its resources, resource templates and prompts.
``add`` and ``rm`` edit ``mcp.servers`` in config.yaml (checked as the owner
would read it; a change the owner would refuse is refused and nothing is
written); a running owner keeps the servers it started with until it restarts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import orjson

from ...library.exits import CONTEXT, EXIT_OK, EXIT_TURN, EXIT_USAGE, CliError
from ...tui.render import format_time, shorten

__all__ = ["cmd_mcp", "add_mcp_parser"]


def add_mcp_parser(command: Any) -> None:
    p = command("mcp", "MCP servers: list (their state), tools NAME, resources NAME, add NAME, "
                "rm NAME",
                description=(
                    "MCP servers give the agent their tools as mcp__<server>__<tool>. "
                    "`list` and `tools` ask the owner; `add` and `rm` edit config.yaml. "
                    "Examples: tether mcp add github --env GITHUB_TOKEN='${GITHUB_TOKEN}' -- "
                    "npx -y @modelcontextprotocol/server-github; tether mcp add docs --url "
                    "https://example.com/mcp --header 'Authorization=Bearer ${DOCS_TOKEN}'"))
    p.add_argument("action", choices=("list", "tools", "resources", "add", "rm"))
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="the server (tools, resources, add, rm)")
    p.add_argument("server_command", nargs="*", metavar="COMMAND",
                   help="add: the command and its arguments (after --) of a stdio server")
    p.add_argument("--url", help="add: the URL of a streamable-HTTP server")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="add: an environment variable of a stdio server (${VAR} is taken "
                        "from the owner's environment when it starts)")
    p.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                   help="add: an HTTP header of a url server (${VAR} as for --env)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="add: timeout_seconds of start-up and of each call (default 60)")
    p.add_argument("--disabled", action="store_true", help="add: written with enabled: false")
    p.add_argument("--no-network", action="store_true",
                   help="add: the sandboxed stdio server gets no network (network: false)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="add: run the stdio server as your user, outside the sandbox "
                        "(sandbox: false; an escalation: it can read and write all you can)")
    p.add_argument("--json", action="store_true", help="list, tools, resources: print JSON")
    p.set_defaults(func=cmd_mcp)


def _home(args: Any) -> Path:
    from tether.rpc.home import resolve_home

    CONTEXT.home = resolve_home(args.home)
    return CONTEXT.home


def cmd_mcp(args: Any) -> int:
    home = _home(args)
    if args.action in ("tools", "resources", "add", "rm") and not args.name:
        raise CliError(EXIT_USAGE, "usage", f"tether mcp {args.action} NAME",
                       "`tether mcp list` shows the configured servers")
    if args.action != "add" and (args.server_command or args.url or args.env or args.header):
        raise CliError(EXIT_USAGE, "usage", "a command, --url, --env and --header are for "
                       "`tether mcp add`")
    if args.action == "add":
        return _add(home, args)
    if args.action == "rm":
        return _rm(home, args.name)
    import asyncio

    return asyncio.run(_ask(home, args))


async def _ask(home: Path, args: Any) -> int:
    from ...library.remote import connect_owner

    async with await connect_owner(home) as client:
        if args.action == "resources":
            return _show_resources(await client.call("mcp.resources", server=args.name),
                                   args.json)
        if args.action == "list":
            out = await client.call("mcp.list")
            servers = out["servers"]
        else:
            servers = [await client.call("mcp.tools", server=args.name)]
    if args.json:
        for s in servers:
            print(orjson.dumps(s).decode())
        return EXIT_OK
    if not servers:
        print("no MCP servers (add one: tether mcp add NAME -- COMMAND ARGS, or "
              "tether mcp add NAME --url URL)")
    for s in servers:
        _show(s, with_tools=args.action == "tools")
    failed = args.action == "tools" and servers[0]["state"] != "ready"
    return EXIT_TURN if failed else EXIT_OK


def _show(s: dict[str, Any], *, with_tools: bool) -> None:
    state = s["state"]
    if state == "idle":
        state = "idle (starts when a turn needs it)"
    print(f"{s['name']:<16} {state:<10} {s['transport']:<5} {len(s['tools']):>3} tools  "
          f"{shorten(s['target'], 80)}")
    if s.get("sandbox"):
        print(f"  runs in: {shorten(s['sandbox'], 200)}")
    if s.get("session_id"):
        print(f"  attached to session {s['session_id']} by a client (mcp.attach)")
    if s.get("error"):
        retry = f" (tried again after {format_time(s['retry_at'])})" if s.get("retry_at") else ""
        print(f"  error: {shorten(s['error'], 400)}{retry}")
    if with_tools:
        for t in s["tools"]:
            print(f"  {t['name']}: {shorten(t['description'], 100)}")


def _show_resources(r: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(orjson.dumps(r).decode())
    else:
        print(f"{r['server']}: {r['state']}" + (f", error: {shorten(r['error'], 400)}"
                                                if r.get("error") else ""))
        for res in r["resources"]:
            print(f"  resource {res['uri']}  {res['name']}"
                  f"{'  ' + shorten(res['description'], 80) if res.get('description') else ''}")
        for t in r["templates"]:
            print(f"  template {t['uri_template']}  {t['name']}")
        for pr in r["prompts"]:
            names = ", ".join(a["name"] + ("" if a["required"] else "?") for a in pr["arguments"])
            print(f"  prompt   {pr['name']}({names})"
                  f"{'  ' + shorten(pr['description'], 80) if pr.get('description') else ''}")
    return EXIT_OK if r["state"] == "ready" and not r.get("error") else EXIT_TURN


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise CliError(EXIT_USAGE, "usage", f"{flag} takes KEY=VALUE, not {value!r}")
        out[key.strip()] = rest
    return out


def _load(home: Path) -> tuple[Path, dict[str, Any]]:
    from tether.rpc.home import HomeLayout

    path = HomeLayout(home).config
    try:
        from tether.daemon.config.core import ConfigError, read_config_file

        return path, read_config_file(path)
    except ConfigError as exc:
        raise CliError(EXIT_USAGE, "invalid_config", str(exc),
                       "fix config.yaml first (`tether config check`)") from None


def _write(path: Path, raw: dict[str, Any]) -> None:
    """Check ``raw`` as the owner would read it, then replace config.yaml with it."""
    import yaml

    from tether.daemon.config.core import ConfigError, build_config

    try:
        build_config(raw, dict(os.environ))
    except ConfigError as exc:
        raise CliError(EXIT_USAGE, "invalid_config", str(exc).replace("config.yaml: ", ""),
                       "nothing was written") from None
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    if path.exists() and "#" in path.read_text(encoding="utf-8"):
        backup = path.with_name(path.name + ".bak")
        backup.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
        print(f"note: config.yaml is rewritten without its comments; the previous file is "
              f"kept as {backup}", file=sys.stderr)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o600)  # it may hold tokens
    os.replace(tmp, path)


def _restart_note(home: Path) -> None:
    from ...library.discovery import live_descriptor

    if live_descriptor(home) is not None:
        print("the running owner keeps the servers it started with: `tether stop`, and the "
              "next command starts an owner with this configuration")


def _add(home: Path, args: Any) -> int:
    path, raw = _load(home)
    mcp = raw.setdefault("mcp", {}) if isinstance(raw.get("mcp"), dict | None) else None
    if mcp is None:
        raise CliError(EXIT_USAGE, "invalid_config", "`mcp` in config.yaml is not a mapping")
    if raw["mcp"] is None:
        raw["mcp"] = mcp = {}
    servers = mcp.setdefault("servers", {}) or {}
    mcp["servers"] = servers
    if args.name in servers:
        raise CliError(EXIT_USAGE, "exists", f"an MCP server {args.name!r} is already "
                       "configured", f"remove it first: tether mcp rm {args.name}")
    if bool(args.server_command) == bool(args.url):
        raise CliError(EXIT_USAGE, "usage", "give either a command (after --) or --url",
                       "tether mcp add NAME -- COMMAND ARGS, or tether mcp add NAME --url URL")
    entry: dict[str, Any] = {}
    if args.url:
        entry["url"] = args.url
        if args.header:
            entry["headers"] = _pairs(args.header, "--header")
    else:
        entry["command"] = args.server_command[0]
        if args.server_command[1:]:
            entry["args"] = list(args.server_command[1:])
        if args.env:
            entry["env"] = _pairs(args.env, "--env")
    if args.header and not args.url or args.env and args.url:
        raise CliError(EXIT_USAGE, "usage", "--env is for a command server, --header for a "
                       "--url server")
    if (args.no_network or args.no_sandbox) and args.url:
        raise CliError(EXIT_USAGE, "usage", "--no-network and --no-sandbox are for a command "
                       "server (tether does not run a --url server)")
    if args.no_sandbox:
        entry["sandbox"] = False
    if args.no_network:
        entry["network"] = False
    if args.timeout is not None:
        entry["timeout_seconds"] = args.timeout
    if args.disabled:
        entry["enabled"] = False
    servers[args.name] = entry
    _write(path, raw)
    print(f"added MCP server {args.name} to {path}; its tools are offered as "
          f"mcp__{args.name}__<tool> (see `tether mcp tools {args.name}`)")
    _restart_note(home)
    return EXIT_OK


def _rm(home: Path, name: str) -> int:
    path, raw = _load(home)
    servers = (raw.get("mcp") or {}).get("servers") or {}
    if name not in servers:
        known = ", ".join(servers) or "none"
        raise CliError(EXIT_TURN, "not_found", f"no MCP server {name!r} in {path} "
                       f"(configured: {known})")
    del servers[name]
    if not servers:
        raw["mcp"].pop("servers", None)
        if not raw["mcp"]:
            raw.pop("mcp")
    _write(path, raw)
    print(f"removed MCP server {name} from {path}")
    _restart_note(home)
    return EXIT_OK
