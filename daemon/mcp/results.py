"""An MCP tool result as the model reads it, and tool names as the model may call them.

A result's content blocks become text: text as is; an image, an audio clip or
a binary resource is written to ``<home>/mcp-media/`` (named by its digest) and
named by path, MIME type and size, so the model can refer to it without its
bytes in the context; a text resource keeps its text; a resource link is named.
Structured content comes along as JSON when the text does not already carry it.
``isError`` says the tool failed (the model may fix its call and retry).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
import re
from pathlib import Path
from typing import Any

import orjson

__all__ = ["render", "render_contents", "tool_name", "NAME_CHARS"]

#: what a tool name may hold on the OpenAI API (and at most 64 of them)
NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters a model API refuses replaced by ``_``
    and cut to 64 characters."""
    return NAME_CHARS.sub("_", f"mcp__{server}__{tool}")[:64]


def _save(media: Path, data: str, mime: str) -> str:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{mime} content that is not valid base64; dropped]"
    ext = mimetypes.guess_extension(mime or "") or ".bin"
    path = media / (hashlib.sha256(raw).hexdigest()[:24] + ext)
    try:
        media.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_bytes(raw)
    except OSError as exc:
        return f"[{mime}, {len(raw)} bytes; could not be saved: {exc.strerror}]"
    return f"[{mime}, {len(raw)} bytes, saved as {path}]"


def _block(block: Any, media: Path) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return _save(media, block.data, block.mime_type)
    if kind == "resource_link":
        return f"[resource {block.uri}: {block.name}{', ' + block.mime_type if block.mime_type else ''}]"
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if text is not None:
            return f"[resource {res.uri}]\n{text}"
        return f"[resource {res.uri}] " + _save(media, getattr(res, "blob", ""),
                                                 res.mime_type or "application/octet-stream")
    return f"[content of type {kind!r}, not shown]"


def render(server: str, tool: str, result: Any, media: Path, limit: int) -> tuple[str, bool]:
    """(the tool message for the model, whether the tool reported an error)."""
    from ..toolsets.output import cap

    texts = [_block(b, media) for b in result.content or []]
    text = "\n".join(t for t in texts if t)
    out: dict[str, Any] = {"server": server, "tool": tool}
    if result.is_error:
        out["error"] = cap(text or "the tool reported an error and said nothing more", limit)
    else:
        out["content"] = cap(text, limit)
    structured = result.structured_content
    if structured is not None:
        dumped = orjson.dumps(structured).decode()
        if dumped not in text and not (len(structured) == 1 and "result" in structured
                                       and str(structured["result"]) == text.strip()):
            out["structured_content"] = structured if len(dumped) <= limit else cap(dumped, limit)
    first = (text.strip().splitlines() or [""])[0]
    out["summary"] = (("error: " if result.is_error else "") + first)[:120]
    return orjson.dumps(out).decode(), bool(result.is_error)


def render_contents(contents: list[Any], media: Path) -> str:
    """A resource's contents (resources/read) as text: text as is, under its URI
    when there are several; binary saved under ``media`` and named."""
    parts = []
    for c in contents:
        text = getattr(c, "text", None)
        body = text if text is not None else _save(media, getattr(c, "blob", ""),
                                                   c.mime_type or "application/octet-stream")
        parts.append(body if len(contents) == 1 else f"[resource {c.uri}]\n{body}")
    return "\n".join(parts)
