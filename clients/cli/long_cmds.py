"""Commands of long sessions: `tether sessions fork ID [--at SEQ]`, `tether sessions
compact ID [--focus TEXT]`, `tether export ID [--format markdown|json] [-o FILE]`,
and the chat's `/compact` (docs/long-sessions.md)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..library.exits import EXIT_OK, EXIT_USAGE, CliError

__all__ = ["cmd_sessions_fork", "cmd_sessions_compact", "export"]


async def cmd_sessions_fork(client: Any, args: Any) -> int:
    from .session_cmds import resolve_session

    if args.at is not None and args.at < 0:
        raise CliError(EXIT_USAGE, "usage", "--at must be a seq of 0 or more",
                       "`tether events ID` shows a session's seqs")
    sid = await resolve_session(client, args.session_id)
    out = await client.call("session.fork", session_id=sid, at_seq=args.at)
    print(out["session_id"])
    print(f"forked {sid} at seq {out['forked_at_seq']}: {out['message_count']} message(s), "
          f"{out['compactions']} compaction(s); `tether chat --resume {out['session_id']}` "
          "goes on from there", file=sys.stderr)
    return EXIT_OK


async def cmd_sessions_compact(client: Any, args: Any) -> int:
    from ..tui.slash import compact_line
    from .session_cmds import resolve_session

    sid = await resolve_session(client, args.session_id)
    print(await compact_line(client, sid, args.focus or None), file=sys.stderr)
    return EXIT_OK


async def export(home: Any, args: Any) -> int:
    """`tether export` (commands.cmd_export resolves the home and runs it)."""
    import orjson

    from ..library.remote import connect_owner
    from .session_cmds import resolve_session, session_arg

    async with await connect_owner(home, autostart=False) as client:
        sid = await resolve_session(client, session_arg(args))
        out = await client.call("session.export", session_id=sid, format=args.format)
    if args.format == "json":
        data = orjson.dumps(out["document"], option=orjson.OPT_INDENT_2) + b"\n"
    else:
        data = out["markdown"].encode()
    if args.output in (None, "-"):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return EXIT_OK
    _write_whole(Path(args.output), data)
    print(f"wrote {sid} to {args.output} ({len(data)} bytes, {args.format})", file=sys.stderr)
    return EXIT_OK


def _write_whole(path: Path, data: bytes) -> None:
    """Write ``path`` in one step: a reader never sees half an export."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.")
    except OSError as exc:
        raise CliError(EXIT_USAGE, "usage", f"cannot write {path}: {exc.strerror}",
                       "give -o a file in a directory that exists and is writable") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
