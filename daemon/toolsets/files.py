"""The ``files`` toolset: read_file, write_file, edit_file, search_files, list_dir.

Paths resolve with paths.py: beneath the session's working directory a symlink
is followed only while it stays beneath (``openat2`` ``RESOLVE_BENEATH``, or an
``O_NOFOLLOW`` walk); a path outside it is used as named, never through a
symlink at its last component; the owner's home is refused outright
(``forbidden``), never asked. Reading (read_file, search_files, list_dir) never
asks, outside the working directory too. Every write goes through the approval
check (ToolContext.approve, kind ``file``, subject the resolved absolute path),
where a write outside the working directory always needs an answer or a rule;
the write itself is a fresh temp file renamed over the name (paths.write_atomic).
Results are JSON with a short ``summary`` that viewers show; a refusal carries
``refused`` (``escape``, ``link`` or ``forbidden``). docs/tools.md has the rules.
"""

from __future__ import annotations

import asyncio
import fnmatch
import io
import os
import re
import shutil
import stat
from collections.abc import Iterable
from typing import Annotated, Any

import orjson
from pydantic import Field

from ..config.core import ToolsConfig
from ..engine.arguments import Arguments, ArgumentsOf
from ..engine.tools import Tool, ToolContext
from .editor import EditorFiles
from .paths import Place, Refused, locate, open_dir, open_read, write_atomic

__all__ = ["file_tools"]

MAX_WRITE_CHARS = 5_000_000
SEARCH_MATCHES = 200
LIST_ENTRIES = 500
SEARCH_FILE_BYTES = 2_000_000
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
              ".ruff_cache", ".pytest_cache", ".tox"}


class ReadFile(Arguments):
    path: str
    offset: Annotated[int, Field(ge=1)] = 1  # lines
    limit: Annotated[int, Field(ge=1)] | None = None  # None: tools.read_lines


class WriteFile(Arguments):
    path: str
    content: Annotated[str, Field(max_length=MAX_WRITE_CHARS)]


class EditFile(Arguments):
    path: str
    old: Annotated[str, Field(min_length=1)]
    new: str
    replace_all: bool = False


class SearchFiles(Arguments):
    pattern: Annotated[str, Field(min_length=1)]
    path: str = "."
    glob: str | None = None


class ListDir(Arguments):
    path: str = "."


READ_FILE, WRITE_FILE, EDIT_FILE = ArgumentsOf(ReadFile), ArgumentsOf(WriteFile), \
    ArgumentsOf(EditFile)
SEARCH_FILES, LIST_DIR = ArgumentsOf(SearchFiles), ArgumentsOf(ListDir)


def _json(obj: dict[str, Any]) -> str:
    return orjson.dumps(obj).decode()


def _error(message: str, **extra: Any) -> str:
    return _json({"error": message, **extra, "summary": message[:120]})


def _refused(tool: str, exc: Refused) -> str:
    return _error(f"{tool}: {exc}", refused=exc.kind)


def _read_text(place: Place, limit: int) -> str:
    with os.fdopen(open_read(place), "rb") as f:
        data = f.read(limit + 1)
    if b"\0" in data[:8192]:
        raise ValueError(f"{place.shown} looks like a binary file")
    if len(data) > limit:
        raise ValueError(f"{place.shown} is larger than {limit} bytes; edit it another way")
    return data.decode("utf-8", "replace")


def _checked(text: str, shown: str, limit: int) -> str:
    """An editor's buffer held to the disk's rules (_read_text)."""
    if "\0" in text[:8192]:
        raise ValueError(f"{shown} looks like a binary file")
    if len(text) > limit:
        raise ValueError(f"{shown} is larger than {limit} characters; edit it another way")
    return text


def _page(lines: Iterable[str], offset: int, limit: int,
          max_chars: int) -> tuple[list[str], int, int]:
    """The numbered lines from ``offset`` (at most ``limit`` lines, about ``max_chars``),
    the number of lines in all, and the last line taken."""
    out: list[str] = []
    chars, total, last = 0, 0, offset - 1
    for number, line in enumerate(lines, 1):
        total = number
        if number < offset or len(out) >= limit or chars >= max_chars:
            continue
        shown_line = f"{number:6d}\t{line.rstrip(chr(10))}"
        out.append(shown_line)
        chars += len(shown_line) + 1
        last = number
    return out, total, last


def _is_dir(place: Place) -> bool:
    try:
        return stat.S_ISDIR(os.stat(place.name, dir_fd=place.dir_fd,
                                    follow_symlinks=False).st_mode)
    except OSError:
        return False


def _denied(what: str, verdict: Any) -> str:
    return _json({"error": f"not {what}: {verdict.reason}", "denied": True,
                  "approval_id": verdict.approval_id,
                  "summary": f"not {what}: " + verdict.reason[:100]})


def file_tools(config: ToolsConfig, *, home: str | None = None,
               editor: EditorFiles | None = None) -> list[Tool]:
    """The file tools; ``home`` is the owner's home, which they refuse (forbidden);
    ``editor``: the editors that offered to read and write a session's files."""

    async def _by_editor(place: Place, ctx: ToolContext, content: str) -> bool:
        """Whether the session's editor wrote ``content`` to the file at ``place`` (checked
        and approved): only an existing regular file beneath the working directory."""
        if editor is None or not place.inside or place.rest \
                or not editor.offers(ctx.session_id, "write"):
            return False
        try:
            os.close(open_read(place))  # a regular file, no hard link of the home's
        except (OSError, Refused):
            return False
        return await editor.write(ctx.session_id, ctx.admission_id, place.shown, content)

    async def read_file(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            a = READ_FILE.parse(args)
            offset, limit = a.offset, min(a.limit or config.read_lines, config.read_lines)
            with locate(ctx.cwd, a.path, home=home) as place:
                path, inside = place.shown, place.inside
                fd = open_read(place)
            with os.fdopen(fd, "rb") as raw:
                # checked and open: an editor that offered may give its buffer instead
                buffer = await editor.read(ctx.session_id, ctx.admission_id, path) \
                    if editor is not None and inside else None
                if buffer is None and b"\0" in raw.read(8192):
                    raise ValueError(f"{path} looks like a binary file")
                raw.seek(0)
                lines = io.StringIO(_checked(buffer, path, len(buffer))) if buffer is not None \
                    else io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
                page = _page(lines, offset, limit, config.read_chars)
        except Refused as exc:
            return _refused("read_file", exc)
        except IsADirectoryError as exc:
            return _error(f"read_file: {exc.filename} is a directory (use list_dir)")
        except (OSError, ValueError) as exc:
            return _error(f"read_file: {exc}")
        out, total, last = page
        content = "\n".join(out)
        note = f"lines {offset}-{last} of {total}" if out else f"no lines at {offset} ({total} in all)"
        if last < total:
            note += f"; more: read_file with offset={last + 1}"
        return _json({"path": path, "content": content, "lines": note,
                      "summary": f"read {path} ({note})"})

    async def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            a = WRITE_FILE.parse(args)
            content = a.content
            place = locate(ctx.cwd, a.path, home=home, missing_ok=True)
        except Refused as exc:
            return _refused("write_file", exc)
        except (OSError, ValueError) as exc:
            return _error(f"write_file: {exc}")
        with place:
            path = place.shown
            if not place.name or (not place.rest and _is_dir(place)):
                return _error(f"write_file: {path} is a directory")
            verdict = await ctx.approve("write_file", "file", path)
            if not verdict.allowed:
                return _denied("written", verdict)
            try:
                # the editor writes only a file that exists
                existed = await _by_editor(place, ctx, content)
                if not existed:
                    place.make_dirs()
                    existed = write_atomic(place, content.encode())
            except OSError as exc:
                return _error(f"write_file: {exc}")
        return _json({"path": path, "created": not existed, "chars": len(content),
                      "summary": f"{'created' if not existed else 'wrote'} {path} "
                                 f"({len(content)} characters)"})

    async def edit_file(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            a = EDIT_FILE.parse(args)
            old, new, replace_all = a.old, a.new, a.replace_all
            place = locate(ctx.cwd, a.path, home=home)
        except Refused as exc:
            return _refused("edit_file", exc)
        except (OSError, ValueError) as exc:
            return _error(f"edit_file: {exc}")
        with place:
            path = place.shown
            # an editor that reads and writes: the edit applies to its buffer
            by_editor = editor is not None and place.inside and \
                editor.offers(ctx.session_id, "read", "write")
            try:
                text = _read_text(place, MAX_WRITE_CHARS)
                if by_editor and editor is not None:
                    buffer = await editor.read(ctx.session_id, ctx.admission_id, path)
                    text = _checked(buffer, path, MAX_WRITE_CHARS) if buffer is not None \
                        else text
            except Refused as exc:
                return _refused("edit_file", exc)
            except (OSError, ValueError) as exc:
                return _error(f"edit_file: {exc}")
            count = text.count(old)
            if count == 0:
                return _error(f"edit_file: the old text was not found in {path} (it must "
                              "match exactly, whitespace included); read the file and try "
                              "again")
            if count > 1 and not replace_all:
                return _error(f"edit_file: the old text occurs {count} times in {path}; "
                              "include more surrounding lines so it is unique, or set "
                              "replace_all")
            verdict = await ctx.approve("edit_file", "file", path)
            if not verdict.allowed:
                return _denied("edited", verdict)
            after = text.replace(old, new) if replace_all else text.replace(old, new, 1)
            try:
                if not (by_editor and await _by_editor(place, ctx, after)):
                    write_atomic(place, after.encode())
            except OSError as exc:
                return _error(f"edit_file: {exc}")
        line = text[:text.index(old)].count("\n") + 1
        return _json({"path": path, "replacements": count if replace_all else 1,
                      "first_line": line, "summary": f"edited {path} at line {line}",
                      "diff": _diff(text, after, path)})

    async def search_files(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            a = SEARCH_FILES.parse(args)
            pattern, glob = a.pattern, a.glob
            regex = re.compile(pattern)
            with locate(ctx.cwd, a.path, home=home) as place:
                root = place.shown
                if place.name:  # a file: it must be one we may read
                    try:
                        os.close(open_read(place))
                    except IsADirectoryError:
                        pass
        except Refused as exc:
            return _refused("search_files", exc)
        except (OSError, ValueError, re.error) as exc:
            return _error(f"search_files: {exc}")
        if shutil.which("rg"):
            matches = await _ripgrep(pattern, root, glob)
        else:
            matches = await asyncio.to_thread(_python_search, regex, root, glob)
        if home:  # the owner's home may lie beneath the searched directory
            inner = os.path.realpath(home).rstrip("/") + "/"
            matches = [m for m in matches if not os.path.realpath(m.split(":", 1)[0])
                       .startswith(inner)]
        more = len(matches) > SEARCH_MATCHES
        matches = matches[:SEARCH_MATCHES]
        return _json({"matches": matches, "truncated": more,
                      "summary": f"{len(matches)}{'+' if more else ''} match(es) of "
                                 f"{pattern!r} under {root}"})

    async def list_dir(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            with locate(ctx.cwd, LIST_DIR.parse(args).path, home=home) as place:
                path = place.shown
                fd = open_dir(place)
            try:
                with os.scandir(fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
                out = []
                for e in entries[:LIST_ENTRIES]:
                    try:
                        is_dir = e.is_dir(follow_symlinks=False)
                        size = None if is_dir else e.stat(follow_symlinks=False).st_size
                    except OSError:
                        is_dir, size = False, None
                    out.append({"name": e.name + ("/" if is_dir else ""), "size": size})
            finally:
                os.close(fd)
        except Refused as exc:
            return _refused("list_dir", exc)
        except (OSError, ValueError) as exc:
            return _error(f"list_dir: {exc}")
        return _json({"path": path, "entries": out, "truncated": len(entries) > LIST_ENTRIES,
                      "summary": f"{len(entries)} entries in {path}"})

    return [
        Tool("read_file", "files", "Read a text file, line-numbered; offset/limit page "
             "through long files.", READ_FILE.schema, read_file),
        Tool("write_file", "files", "Write (create or replace) a text file. May need the "
             "user's approval.", WRITE_FILE.schema, write_file),
        Tool("edit_file", "files", "Replace the exact, unique text `old` with `new` in a "
             "file (replace_all for every occurrence). May need the user's approval.",
             EDIT_FILE.schema, edit_file),
        Tool("search_files", "files", "Search file contents for a regular expression "
             "(optionally under path, in files matching glob).", SEARCH_FILES.schema,
             search_files),
        Tool("list_dir", "files", "List a directory's entries (directories end in /).",
             LIST_DIR.schema, list_dir),
    ]


async def _ripgrep(pattern: str, root: str, glob: str | None) -> list[str]:
    argv = ["rg", "--line-number", "--with-filename", "--no-heading", "--color", "never",
            "--max-columns", "300", "-e", pattern]
    if glob:
        argv += ["-g", glob]
    proc = await asyncio.create_subprocess_exec(*argv, "--", root,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL)
    out = []
    assert proc.stdout is not None
    async for line in proc.stdout:
        out.append(line.decode("utf-8", "replace").rstrip("\n"))
        if len(out) > SEARCH_MATCHES:
            proc.kill()
            break
    await proc.wait()
    return out


def _python_search(regex: re.Pattern[str], root: str, glob: str | None) -> list[str]:
    out: list[str] = []
    paths = [root] if os.path.isfile(root) else None
    if paths is None:
        paths = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            paths += [os.path.join(folder, f) for f in sorted(files)
                      if glob is None or fnmatch.fnmatch(f, glob)
                      or fnmatch.fnmatch(os.path.relpath(os.path.join(folder, f), root), glob)]
    for path in paths:
        try:
            if os.path.islink(path) or os.path.getsize(path) > SEARCH_FILE_BYTES:
                continue  # a symlink may lead anywhere; ripgrep skips them too
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                out.append(f"{path}:{number}:{line[:300]}")
                if len(out) > SEARCH_MATCHES:
                    return out
    return out


#: an edit's diff in its result: at most this many lines (the model reads it too)
DIFF_MAX_LINES = 60


def _diff(before: str, after: str, path: str) -> str:
    """The unified diff of an edit (one line of context), cut at DIFF_MAX_LINES."""
    import difflib

    name = os.path.basename(path)
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                      f"a/{name}", f"b/{name}", n=1, lineterm=""))
    if len(lines) > DIFF_MAX_LINES:
        lines = lines[:DIFF_MAX_LINES] + [f"… {len(lines) - DIFF_MAX_LINES} more lines"]
    return "\n".join(lines)
