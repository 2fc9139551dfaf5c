"""Answers as markdown on a terminal: each finished block rendered by rich, as ANSI text.

Only ``render.Renderer`` with ``markdown=True`` uses this module (a terminal, colour
allowed), and rich itself is imported when the first block is rendered, so the
one-shot ``tether chat -Q`` and every piped output never load it.

An answer streams in as deltas; ``MarkdownStream`` holds the text of the block being
written and gives back each block once it is complete — a blank line outside a code
fence, then a line that starts a new block (not an indented one, which continues a
list item, nor another item of the list being held). ``finish`` renders what is left. A block is written once and never
redrawn: what scrolled up cannot be rewritten reliably, and the interactive chat
draws its output above the input line a whole line at a time.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

__all__ = ["MarkdownStream", "render_markdown"]

_FENCE = re.compile(r"\s*(`{3,}|~{3,})")
_ITEM = re.compile(r" {0,3}([-*+]|\d{1,9}[.)])(\s|$)")
#: the spaces rich pads a line with to the full width, when nothing styles them
_PADDING = re.compile(r" +$")
_console: Any = None


def render_markdown(text: str, width: int | None = None) -> str:
    """``text`` rendered as ANSI-styled lines (no blank line around, no final newline)."""
    global _console
    from rich.console import Console
    from rich.markdown import Markdown

    if _console is None:
        _console = Console(force_terminal=True, highlight=False, emoji=False,
                           legacy_windows=False)
    _console.width = width or shutil.get_terminal_size().columns
    with _console.capture() as captured:
        # links as "text (url)": terminals that do not know OSC 8 links show them too
        _console.print(Markdown(text, hyperlinks=False))
    lines = [_PADDING.sub("", line) for line in captured.get().split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and set(stripped) == {fence[0]}


class MarkdownStream:
    """One answer's text in, rendered blocks out (each ends with a newline)."""

    def __init__(self, width: int | None = None) -> None:
        self.pending = ""  # the text not rendered yet, from the start of a block
        self.width = width
        self._scanned = 0  # how much of ``pending`` was read line by line
        self._fence: str | None = None  # the marker of the code fence left open
        self._after_blank = False  # the last line read was blank (outside a fence)
        self._in_list = False  # the last line read at the margin was a list item
        self._blocks = 0

    def feed(self, text: str) -> str:
        """Take a delta; the blocks it completed, rendered ("" if none)."""
        self.pending += text
        out = []
        while (end := self.pending.find("\n", self._scanned)) >= 0:
            start, self._scanned = self._scanned, end + 1
            line = self.pending[start:end]
            if self._fence is not None:
                if _closes(line, self._fence):
                    self._fence = None
                continue
            if not line.strip():
                self._after_blank = True
                continue
            item = _ITEM.match(line) is not None
            if self._after_blank and not line[:1].isspace() and not (item and self._in_list):
                out.append(self._render(self.pending[:start]))
                self.pending = self.pending[start:]
                self._scanned -= start
            self._after_blank = False
            if not line[:1].isspace():
                self._in_list = item
            if (opened := _FENCE.match(line)) is not None:
                self._fence = opened.group(1)
        return "".join(out)

    def finish(self) -> str:
        """The rest of the answer, rendered ("" if nothing is left)."""
        text, self.pending, self._scanned = self.pending, "", 0
        self._fence, self._after_blank, self._in_list = None, False, False
        return self._render(text) if text.strip() else ""

    def _render(self, block: str) -> str:
        rendered = render_markdown(block, self.width)
        if not rendered:
            return ""
        self._blocks += 1
        return ("\n" if self._blocks > 1 else "") + rendered + "\n"
