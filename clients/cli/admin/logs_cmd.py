"""``tether logs``: the end of the owner's log, and following it (``-f``).

A home has two log files (``tether.rpc.home.HomeLayout``):

- ``logs/owner.log``, the owner's log: what it did and every error, with times
  (an ``internal_error``'s id is there), and the warnings of the libraries it
  runs on. Rotated at 5 MiB into ``owner.log.1`` … ``.3``. ``tether logs``
  shows it.
- ``logs/daemon.log``, the raw stdout and stderr of an owner a client started:
  only what never went through the log, such as why an owner could not start
  or the traceback of a crash. ``tether logs --stdio`` shows it.

Reading a file never starts an owner. ``-f`` follows the file as ``tail -F``
does, across the owner's rotations and restarts, until Ctrl-C.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

from ...library.exits import CONTEXT, EXIT_OK, EXIT_USAGE, CliError

__all__ = ["cmd_logs", "last_lines"]

#: how often a followed file is looked at for new lines
POLL_SECONDS = 0.25
_BLOCK = 64 * 1024


def last_lines(f: BinaryIO, n: int) -> bytes:
    """The last ``n`` lines of the open file ``f`` (read from its end, not all of it);
    ``f`` is left at its end."""
    end = f.seek(0, os.SEEK_END)
    if n <= 0:
        return b""
    pos, data = end, b""
    # one newline more than n lines need: the one before the first of them
    while pos > 0 and data.count(b"\n", 0, len(data) - 1) < n:
        step = min(_BLOCK, pos)
        pos -= step
        f.seek(pos)
        data = f.read(step) + data
    f.seek(end)
    lines = data.split(b"\n")
    trailing = data.endswith(b"\n")
    keep = lines[-(n + 1):] if trailing else lines[-n:]
    return b"\n".join(keep)


def _write(data: bytes) -> None:
    if _JSON is not None:
        _JSON.feed(data)
    elif data:
        sys.stdout.write(data.decode("utf-8", "replace"))
        sys.stdout.flush()


#: a log line's head: "2026-12-01 14:08:25,114 INFO tether.activity: message"
_HEAD = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ([A-Z]+) ([\w.]+): (.*)$")
#: an activity line's message: "event key=value key=\"quoted value\" ..."
_EVENT = re.compile(r"^([a-z]+\.[a-z_.]+)((?: [a-z_]+=(?:\"(?:[^\"\\]|\\.)*\"|\S+))*)$")
_FIELD = re.compile(r' ([a-z_]+)=("(?:[^"\\]|\\.)*"|\S+)')


def parse_line(line: str) -> dict[str, Any] | None:
    """One log line as a record (None: not the head of one, e.g. a traceback's line):
    ``time``, ``level``, ``logger``, ``message``; an activity line also ``event`` and
    its fields."""
    import json

    head = _HEAD.match(line)
    if head is None:
        return None
    rec: dict[str, Any] = {"time": head[1].replace(",", "."), "level": head[2],
                           "logger": head[3], "message": head[4]}
    event = _EVENT.match(head[4])
    if event is not None:
        rec["event"] = event[1]
        for key, value in _FIELD.findall(event[2]):
            if value.startswith('"'):
                value = json.loads(value)
            rec[key] = value
    return rec


class JsonLines:
    """Log lines in, one JSON object per record out; the lines after a record's head
    that are not heads themselves (a traceback) are its ``detail``."""

    def __init__(self) -> None:
        self.partial = ""
        self.held: dict[str, Any] | None = None

    def feed(self, data: bytes) -> None:
        text = self.partial + data.decode("utf-8", "replace")
        *lines, self.partial = text.split("\n")
        for line in lines:
            rec = parse_line(line)
            if rec is not None:
                self.emit()
                self.held = rec
            elif self.held is not None and line.strip():
                self.held["detail"] = (self.held.get("detail", "") + line + "\n")
        if not data:  # nothing new: what is held is complete
            self.emit()

    def emit(self) -> None:
        import orjson

        if self.held is not None:
            sys.stdout.write(orjson.dumps(self.held).decode() + "\n")
            sys.stdout.flush()
            self.held = None


_JSON: JsonLines | None = None


def cmd_logs(args: Any) -> int:
    from tether.rpc.home import HomeLayout, resolve_home

    global _JSON
    CONTEXT.home = home = resolve_home(args.home)
    layout = HomeLayout(home)
    _JSON = JsonLines() if getattr(args, "json", False) and not args.stdio else None
    path = layout.owner_stdio_log if args.stdio else layout.owner_log
    if args.lines < 0:
        raise CliError(EXIT_USAGE, "usage", "-n takes 0 or more lines", "see `tether logs --help`")
    try:
        if not path.exists():
            if not args.follow:
                raise CliError(EXIT_USAGE, "not_found",
                               f"no log at {path}: no owner has run for this home yet",
                               "`tether serve` starts one; `--home` or $TETHER_HOME picks "
                               "another home")
            print(f"[tether] waiting for {path} (Ctrl-C to leave)", file=sys.stderr, flush=True)
            _follow(path, None)
            return EXIT_OK
        with open(path, "rb") as f:
            _write(last_lines(f, args.lines))
            _write(b"")  # the last record is whole
            at = f.tell()
        if not args.follow:
            if not args.stdio:
                _mention_stdio(layout, path)
            return EXIT_OK
        _follow(path, at)
    except KeyboardInterrupt:
        print(file=sys.stdout, flush=True)  # leave the shell's prompt on a line of its own
    return EXIT_OK


def _mention_stdio(layout: Any, shown: Path) -> None:
    """A note when daemon.log holds something written after owner.log's last line
    (a crash's traceback, a failed start): it is where the reason is."""
    try:
        stdio = layout.owner_stdio_log.stat()
        if stdio.st_size and stdio.st_mtime > shown.stat().st_mtime:
            print(f"[tether] {layout.owner_stdio_log} (the owner's own output) was written "
                  "after this log: `tether logs --stdio` shows it", file=sys.stderr)
    except OSError:
        pass


def _follow(path: Path, at: int | None) -> None:
    """Print what is appended to ``path`` from offset ``at`` (None: wait for the file,
    then from its start), reopening it when it is replaced (rotated) or cut short."""
    f: BinaryIO | None = None
    try:
        while True:
            if f is None:
                try:
                    f = open(path, "rb")  # noqa: SIM115 - kept open across polls
                except FileNotFoundError:
                    time.sleep(POLL_SECONDS)
                    continue
                f.seek(at or 0)
                at = None
            _write(f.read())
            try:
                current = os.stat(path)
            except FileNotFoundError:
                current = None  # mid-rotation: the new file is not there yet
            mine = os.fstat(f.fileno())
            if current is None or current.st_ino != mine.st_ino:
                _write(f.read())  # the last lines written to the old file
                f.close()
                f = None
                continue
            if current.st_size < f.tell():
                f.seek(0)  # truncated in place: start again from its beginning
                continue
            time.sleep(POLL_SECONDS)
    finally:
        if f is not None:
            f.close()
