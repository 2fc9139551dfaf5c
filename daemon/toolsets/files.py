"""The ``files`` toolset: read_file, write_file, edit_file, search_files, list_dir.

Paths resolve against the session's working directory. Reading never asks;
every write goes through the approval check (ToolContext.approve, kind
``file``, subject the resolved absolute path, symlinks followed), where a write
outside the working directory always needs an answer or a rule. Results are
JSON with a short ``summary`` that viewers show.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import shutil
from typing import Any

import orjson

from ..config import ToolsConfig
from ..tools import Tool, ToolContext

__all__ = ["file_tools", "resolve"]

MAX_WRITE_CHARS = 5_000_000
SEARCH_MATCHES = 200
LIST_ENTRIES = 500
SEARCH_FILE_BYTES = 2_000_000
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
              ".ruff_cache", ".pytest_cache", ".tox"}


def _json(obj: dict[str, Any]) -> str:
    return orjson.dumps(obj).decode()


def _error(message: str) -> str:
    return _json({"error": message, "summary": message[:120]})


def resolve(ctx: ToolContext, path: Any) -> str:
    """``path`` made absolute against the session's cwd (ValueError if not a path)."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError("path must be a non-empty string")
    base = ctx.cwd or os.path.expanduser("~")
    return os.path.realpath(os.path.join(base, os.path.expanduser(path)))


def _string(args: dict[str, Any], key: str, *, empty: bool = True) -> str:
    value = args.get(key)
    if not isinstance(value, str) or (not empty and not value):
        raise ValueError(f"{key} must be {'a' if empty else 'a non-empty'} string")
    return value


def _read_text(path: str, limit: int) -> str:
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if b"\0" in data[:8192]:
        raise ValueError(f"{path} looks like a binary file")
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes; edit it another way")
    return data.decode("utf-8", "replace")


def _write_text(path: str, text: str) -> None:
    tmp = f"{path}.tether-{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    if os.path.exists(path):
        shutil.copymode(path, tmp)
    os.replace(tmp, path)


def file_tools(config: ToolsConfig) -> list[Tool]:
    async def read_file(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            path = resolve(ctx, args.get("path"))
            offset = args.get("offset", 1)
            limit = args.get("limit", config.read_lines)
            if not isinstance(offset, int) or offset < 1 or not isinstance(limit, int) \
                    or limit < 1:
                raise ValueError("offset and limit must be positive integers (lines)")
            limit = min(limit, config.read_lines)
            if os.path.isdir(path):
                raise ValueError(f"{path} is a directory (use list_dir)")
            with open(path, "rb") as f:
                if b"\0" in f.read(8192):
                    raise ValueError(f"{path} looks like a binary file")
            out: list[str] = []
            chars, total, last = 0, 0, offset - 1
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    total = number
                    if number < offset or len(out) >= limit or chars >= config.read_chars:
                        continue
                    text = f"{number:6d}\t{line.rstrip(chr(10))}"
                    out.append(text)
                    chars += len(text) + 1
                    last = number
        except (OSError, ValueError) as exc:
            return _error(f"read_file: {exc}")
        content = "\n".join(out)
        note = f"lines {offset}-{last} of {total}" if out else f"no lines at {offset} ({total} in all)"
        if last < total:
            note += f"; more: read_file with offset={last + 1}"
        return _json({"path": path, "content": content, "lines": note,
                      "summary": f"read {path} ({note})"})

    async def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            path = resolve(ctx, args.get("path"))
            content = _string(args, "content")
            if len(content) > MAX_WRITE_CHARS:
                raise ValueError(f"content is longer than {MAX_WRITE_CHARS} characters")
            if os.path.isdir(path):
                raise ValueError(f"{path} is a directory")
        except ValueError as exc:
            return _error(f"write_file: {exc}")
        verdict = await ctx.approve("write_file", "file", path)
        if not verdict.allowed:
            return _json({"error": f"not written: {verdict.reason}", "denied": True,
                          "approval_id": verdict.approval_id,
                          "summary": "not written: " + verdict.reason[:100]})
        existed = os.path.exists(path)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write_text(path, content)
        except OSError as exc:
            return _error(f"write_file: {exc}")
        return _json({"path": path, "created": not existed, "chars": len(content),
                      "summary": f"{'created' if not existed else 'wrote'} {path} "
                                 f"({len(content)} characters)"})

    async def edit_file(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            path = resolve(ctx, args.get("path"))
            old = _string(args, "old", empty=False)
            new = _string(args, "new")
            replace_all = args.get("replace_all", False)
            if not isinstance(replace_all, bool):
                raise ValueError("replace_all must be a boolean")
            text = _read_text(path, MAX_WRITE_CHARS)
        except (OSError, ValueError) as exc:
            return _error(f"edit_file: {exc}")
        count = text.count(old)
        if count == 0:
            return _error(f"edit_file: the old text was not found in {path} (it must match "
                          "exactly, whitespace included); read the file and try again")
        if count > 1 and not replace_all:
            return _error(f"edit_file: the old text occurs {count} times in {path}; include "
                          "more surrounding lines so it is unique, or set replace_all")
        verdict = await ctx.approve("edit_file", "file", path)
        if not verdict.allowed:
            return _json({"error": f"not edited: {verdict.reason}", "denied": True,
                          "approval_id": verdict.approval_id,
                          "summary": "not edited: " + verdict.reason[:100]})
        after = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        try:
            _write_text(path, after)
        except OSError as exc:
            return _error(f"edit_file: {exc}")
        line = text[:text.index(old)].count("\n") + 1
        return _json({"path": path, "replacements": count if replace_all else 1,
                      "first_line": line, "summary": f"edited {path} at line {line}",
                      "diff": _diff(text, after, path)})

    async def search_files(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            pattern = _string(args, "pattern", empty=False)
            root = resolve(ctx, args.get("path", "."))
            glob = args.get("glob")
            if glob is not None and not isinstance(glob, str):
                raise ValueError("glob must be a string")
            regex = re.compile(pattern)
        except (ValueError, re.error) as exc:
            return _error(f"search_files: {exc}")
        if shutil.which("rg"):
            matches = await _ripgrep(pattern, root, glob)
        else:
            matches = await asyncio.to_thread(_python_search, regex, root, glob)
        more = len(matches) > SEARCH_MATCHES
        matches = matches[:SEARCH_MATCHES]
        return _json({"matches": matches, "truncated": more,
                      "summary": f"{len(matches)}{'+' if more else ''} match(es) of "
                                 f"{pattern!r} under {root}"})

    async def list_dir(args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            path = resolve(ctx, args.get("path", "."))
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (OSError, ValueError) as exc:
            return _error(f"list_dir: {exc}")
        out = []
        for e in entries[:LIST_ENTRIES]:
            try:
                is_dir = e.is_dir()
                size = None if is_dir else e.stat().st_size
            except OSError:
                is_dir, size = False, None
            out.append({"name": e.name + ("/" if is_dir else ""), "size": size})
        return _json({"path": path, "entries": out, "truncated": len(entries) > LIST_ENTRIES,
                      "summary": f"{len(entries)} entries in {path}"})

    def obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required}

    s, i = {"type": "string"}, {"type": "integer"}
    return [
        Tool("read_file", "files", "Read a text file, line-numbered; offset/limit page "
             "through long files.", obj({"path": s, "offset": i, "limit": i}, ["path"]),
             read_file),
        Tool("write_file", "files", "Write (create or replace) a text file. May need the "
             "user's approval.", obj({"path": s, "content": s}, ["path", "content"]),
             write_file),
        Tool("edit_file", "files", "Replace the exact, unique text `old` with `new` in a "
             "file (replace_all for every occurrence). May need the user's approval.",
             obj({"path": s, "old": s, "new": s, "replace_all": {"type": "boolean"}},
                 ["path", "old", "new"]), edit_file),
        Tool("search_files", "files", "Search file contents for a regular expression "
             "(optionally under path, in files matching glob).",
             obj({"pattern": s, "path": s, "glob": s}, ["pattern"]), search_files),
        Tool("list_dir", "files", "List a directory's entries (directories end in /).",
             obj({"path": s}, []), list_dir),
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
            if os.path.getsize(path) > SEARCH_FILE_BYTES:
                continue
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
