"""The few lines a viewer shows under a tool call's summary (``tool.complete``'s
``preview``): the owner computes them from the tool's result when it records the
event, and a client replaying a stored transcript computes them the same way
from the tool message. Pure, no I/O: both sides import it from here."""

from __future__ import annotations

from typing import Any

__all__ = ["preview", "PREVIEW_DIFF_LINES", "PREVIEW_OUTPUT_LINES", "PREVIEW_LINE_CHARS"]

#: a tool.complete preview: at most this many lines, each cut to PREVIEW_LINE_CHARS
PREVIEW_DIFF_LINES = 40
PREVIEW_OUTPUT_LINES = 5
PREVIEW_LINE_CHARS = 200


def preview(result: dict[str, Any]) -> str | None:
    """What a viewer shows under a tool's summary: an edit's diff (``diff``), else
    the last lines of a command's ``output`` (None: nothing worth showing)."""
    diff, output = result.get("diff"), result.get("output")
    if isinstance(diff, str) and diff.strip():
        lines = diff.rstrip("\n").split("\n")
        more = len(lines) - PREVIEW_DIFF_LINES
        lines = lines[:PREVIEW_DIFF_LINES] + ([f"… {more} more lines"] if more > 0 else [])
    elif isinstance(output, str) and output.strip():
        lines = [ln for ln in output.rstrip().split("\n") if ln.strip()]
        more = len(lines) - PREVIEW_OUTPUT_LINES
        lines = ([f"… {more} lines before"] if more > 0 else []) + \
            lines[-PREVIEW_OUTPUT_LINES:]
    else:
        return None
    return "\n".join(ln if len(ln) <= PREVIEW_LINE_CHARS else ln[:PREVIEW_LINE_CHARS - 1] + "…"
                     for ln in lines)
