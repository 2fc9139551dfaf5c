"""Long pastes in the chat's input line, and the chat's history file.

A bracketed paste of more than PASTE_LINES lines or PASTE_CHARS characters is
kept aside and stands in the input line as ``[pasted N lines]`` (``#2`` and on
when several are pasted): the line stays short to edit, the echo of a sent
prompt stays one line, and the whole text is what is sent (``expand``).

``ChatHistory`` is the history file (``<home>/chat_history``): readable by its
owner only (0600, also when an older tether left it wider), and without the
prompts that held a long paste or are longer than HISTORY_MAX_CHARS — a
history of pasted logs and files is a leak and a slow Up key, not a help.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prompt_toolkit.history import FileHistory

__all__ = ["Pastes", "ChatHistory", "PASTE_LINES", "PASTE_CHARS", "HISTORY_MAX_CHARS"]

PASTE_LINES = 10
PASTE_CHARS = 1000
HISTORY_MAX_CHARS = 4000


class Pastes:
    def __init__(self) -> None:
        self._kept: dict[str, str] = {}

    def collapse(self, data: str) -> str:
        """What a paste puts in the input line: itself, or its placeholder."""
        data = data.replace("\r\n", "\n").replace("\r", "\n")
        lines = data.count("\n") + (0 if data.endswith("\n") else 1)
        if lines <= PASTE_LINES and len(data) <= PASTE_CHARS:
            return data
        what = f"{lines} lines" if lines > 1 else f"{len(data)} characters"
        token = f"[pasted {what}]"
        n = 1
        while token in self._kept and self._kept[token] != data:
            n += 1
            token = f"[pasted {what} #{n}]"
        self._kept[token] = data
        return token

    def expand(self, text: str) -> str:
        """``text`` with every placeholder replaced by what was pasted."""
        for token, data in self._kept.items():
            if token in text:
                text = text.replace(token, data)
        return text

    def holds_paste(self, text: str) -> bool:
        return any(token in text for token in self._kept)


class ChatHistory(FileHistory):
    """The chat's FileHistory: mode 0600, long prompts and pastes left out."""

    def __init__(self, path: Path, pastes: Pastes) -> None:
        super().__init__(str(path))
        self._pastes = pastes
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)

    def store_string(self, string: str) -> None:
        if len(string) > HISTORY_MAX_CHARS or self._pastes.holds_paste(string):
            return
        super().store_string(string)


def paste_binding(kb: Any, pastes: Pastes) -> None:
    """Bind bracketed paste on ``kb``: long ones collapse to a placeholder."""
    from prompt_toolkit.keys import Keys

    @kb.add(Keys.BracketedPaste)
    def _paste(event: Any) -> None:
        event.current_buffer.insert_text(pastes.collapse(event.data))
