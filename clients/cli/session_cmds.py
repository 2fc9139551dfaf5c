"""Session commands: ``tether sessions [rm|rename|prune]``, ``tether cancel``, and
resolving what a person typed (a short id prefix, ``--last``) to one session id.

Every command that takes a session id goes through ``resolve_session``
(library/remote.py, which the chat shares): an
exact id, or any unambiguous beginning of one (``ses_`` may be left out); an
ambiguous prefix is refused with the candidates listed. Columns of the
session table are padded by display width (wcwidth), so CJK titles line up.
"""

from __future__ import annotations

import sys
from typing import Any

from tether.rpc.names import AUTOMATED_SOURCES

from ..library.exits import CONTEXT, EXIT_OK, EXIT_USAGE, CliError
from ..library.remote import resolve_session, session_arg

__all__ = ["resolve_session", "pad", "cmd_sessions_list", "cmd_sessions_rm",
           "cmd_sessions_rename", "cmd_sessions_prune", "cmd_cancel", "session_arg"]


def width(text: str) -> int:
    from wcwidth import wcswidth

    w = wcswidth(text)
    return w if w >= 0 else len(text)


def pad(text: str, cols: int) -> str:
    """``text`` cut to ``cols`` display columns (with … when cut) and padded to them."""
    from wcwidth import wcwidth

    text = " ".join(str(text or "").split())
    if width(text) > cols:
        out, used = [], 0
        for ch in text:
            w = max(wcwidth(ch), 0)
            if used + w > cols - 1:
                break
            out.append(ch)
            used += w
        text = "".join(out) + "…"
    return text + " " * max(cols - width(text), 0)


#: what people call a source → what the owner records
SOURCE_ALIASES = {"http": "api", "child": "delegation", "helper": "delegation"}


def short_path(path: str | None, cols: int) -> str:
    """``path`` with the home directory as ~, its end kept when cut to ``cols``."""
    import os

    if not path:
        return "-"
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + "/")):
        path = "~" + path[len(home):]
    return path if len(path) <= cols else "…" + path[-(cols - 1):]


def _shown(s: dict[str, Any], args: Any, sources: set[str]) -> bool:
    if sources:
        return (s.get("source") or "") in sources
    if args.all:
        return True
    # an empty session (opened, nothing asked) is clutter; so are helpers' and
    # automated runs' sessions in a list of one's own chats
    empty = not s.get("message_count") and not s.get("running")
    return not (s.get("parent_session_id") or empty
                or s.get("source") in AUTOMATED_SOURCES)


async def cmd_sessions_list(client: Any, args: Any) -> int:
    from ..tui.render import format_time

    sources = {SOURCE_ALIASES.get(x, x) for x in (args.source or [])}
    shown: list[dict[str, Any]] = []
    hidden: dict[str, int] = {}
    cursor = None
    while len(shown) < args.limit:
        page = await client.list_sessions(limit=min(500, max(args.limit, 1)), cursor=cursor)
        for s in page["sessions"]:
            if _shown(s, args, sources):
                shown.append(s)
            elif not sources and s.get("source") in AUTOMATED_SOURCES \
                    and not s.get("parent_session_id"):
                hidden[s["source"]] = hidden.get(s["source"], 0) + 1
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
        print("no sessions yet; `tether chat` starts one" if not sources else
              f"no sessions from {', '.join(sorted(sources))}", file=sys.stderr)
    else:
        print(f"{'SESSION':<28}  {'UPDATED':<16}  {'MSGS':>4}  {'TOKENS':>6}  {'COST':>8}  "
              f"{'STATE':<7}  {'SOURCE':<10}  {'CWD':<24}  TITLE")
    from ..library.usage_fmt import cost, tokens

    for s in shown:
        state = "running" if s.get("running") else "idle"
        usage = s.get("usage") or {}
        print(f"{s['session_id']:<28}  {format_time(s.get('updated_at')):<16}  "
              f"{s.get('message_count', 0):>4}  {tokens(usage.get('total_tokens')):>6}  "
              f"{cost(usage):>8}  {state:<7}  "
              f"{pad(s.get('source') or '-', 10)}  {pad(short_path(s.get('cwd'), 24), 24)}  "
              f"{pad(s.get('title') or '', 40).rstrip()}")
    if hidden:
        what = ", ".join(f"{n} {src}" for src, n in sorted(hidden.items()))
        print(f"({what} session(s) not shown: `--all`, or `--source cron` for example)",
              file=sys.stderr)
    return EXIT_OK


def _confirm(question: str) -> bool:
    """Ask on the terminal; anything but y/yes (or end of input) is no."""
    print(question, end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()  # "" at end of input
    return answer.strip().lower() in ("y", "yes")


async def cmd_sessions_rm(client: Any, args: Any) -> int:
    """Delete sessions: asks first on a terminal (``--yes`` does not), and keeps a
    session another viewer has open unless ``--force``."""
    from tether.rpc.errors import RpcError

    from ..tui.render import format_time

    ids = list(dict.fromkeys([await resolve_session(client, given) for given in args.ids]))
    if not (args.yes or args.force) and sys.stdin.isatty():
        for sid in ids:
            [info] = (await client.call("session.lookup", prefix=sid))["matches"][:1]
            title = pad(info.get("title") or "(untitled)", 50).rstrip()
            print(f"{sid}  {title}  ({info.get('message_count', 0)} messages, last active "
                  f"{format_time(info.get('updated_at'))})", file=sys.stderr)
        what = "this session" if len(ids) == 1 else f"these {len(ids)} sessions"
        if not _confirm(f"delete {what} and everything in it? [y/N] "):
            print("nothing deleted", file=sys.stderr)
            return EXIT_USAGE
    for sid in ids:
        try:
            out = await client.call("session.delete", session_id=sid, force=args.force)
        except RpcError as exc:
            if exc.data.get("attached"):
                raise CliError(EXIT_USAGE, "attached", exc.detail,
                               "`tether sessions rm --force` deletes it anyway") from None
            raise
        children = len(out["deleted"]) - 1
        extra = f" and {children} delegation child session(s)" if children else ""
        print(f"deleted {sid}{extra}")
    return EXIT_OK


async def cmd_sessions_rename(client: Any, args: Any) -> int:
    sid = await resolve_session(client, args.session_id)
    out = await client.call("session.rename", session_id=sid, title=args.title)
    print(f"{sid}: {out['title']}")
    return EXIT_OK


async def cmd_sessions_prune(client: Any, args: Any) -> int:
    out = await client.call("session.prune", older_than_seconds=args.older_than * 60.0,
                            dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    for sid in out["pruned"]:
        print(sid)
    print(f"{verb} {len(out['pruned'])} empty session(s)", file=sys.stderr)
    return EXIT_OK


async def cmd_cancel(client: Any, args: Any) -> int:
    """Stop the running turn of a session (default: the one running session)."""
    if args.session_id is None and not args.last:
        running = [s for s in (await client.list_sessions(limit=500))["sessions"]
                   if s.get("running") and not s.get("parent_session_id")]
        if len(running) != 1:
            what = "no session is running a turn" if not running else (
                f"{len(running)} sessions are running turns: "
                + ", ".join(s["session_id"] for s in running[:5]))
            raise CliError(EXIT_USAGE, "usage", what,
                           "name one: `tether cancel ID` (an id prefix will do)")
        sid = str(running[0]["session_id"])
    else:
        sid = await resolve_session(client, session_arg(args))
    CONTEXT.session_id = sid
    out = await client.interrupt(sid)
    if out.get("interrupted"):
        print(f"cancelled the running turn of {sid} (admission {out.get('admission_id')})")
    else:
        print(f"{sid} has no running turn; nothing to cancel", file=sys.stderr)
    return EXIT_OK
