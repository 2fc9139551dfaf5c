"""The transcripts of recently active sessions, kept between their turns.

A turn shows the model its session's transcript from the latest compaction on.
Stored messages are never changed, only appended (store/messages.py), so a
session's next turn needs only what was added since its last one: `Recall`
keeps what a turn read and reads only the rest, in one statement. It reads the
whole again when it keeps nothing for the session, when a compaction was
recorded since (anywhere: another node of a fleet too), or when more than
`NEW_MOST` messages were added since. It keeps `KEPT_SESSIONS` sessions and
`KEPT_CHARS` characters at most, dropping the least recently read first.
Whatever it hands out is a copy: a turn may change its list.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tether.store.tables import compactions

__all__ = ["Recall", "KEPT_SESSIONS", "NEW_MOST"]

#: the sessions whose transcripts are kept (the least recently read go first) ...
KEPT_SESSIONS = 256
#: ... and the most text they may hold together (characters of content)
KEPT_CHARS = 8_000_000
#: more new messages than this since a session's last turn: read it all, off the loop
NEW_MOST = 64


#: what a turn reads of a kept message (transcript.chat_history; ``index`` for a
#: compaction's cut); the rest of the row (its admission, its time) is not kept
_ALWAYS = ("role", "content", "index")
_IF_SET = ("tool_calls", "tool_call_id", "name")


def _slim(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with only what a turn reads of it: the cache holds thousands."""
    out = {k: row[k] for k in _ALWAYS}
    out["role"] = sys.intern(out["role"])  # four words, shared by every row
    for k in _IF_SET:
        if row.get(k):
            out[k] = row[k]
    return out


@dataclass
class _Kept:
    mark: str | None  # the latest compaction's id when read (None: never compacted)
    summary: str | None
    rows: list[dict[str, Any]]
    next_index: int  # the transcript's length when read
    chars: int = 0  # of content held

    def add(self, rows: list[dict[str, Any]]) -> None:
        rows = [_slim(r) for r in rows]
        self.rows.extend(rows)
        self.chars += sum(len(r["content"] or "") for r in rows)
        if rows:
            self.next_index = rows[-1]["index"] + 1


class Recall:
    """Transcripts by session, over ``db`` (a store: ``read`` and ``lookup``)."""

    def __init__(self, db: Any, keep: int = KEPT_SESSIONS, chars: int = KEPT_CHARS) -> None:
        self._db = db
        self._keep = keep
        self._max_chars = chars
        self._chars = 0
        self._kept: OrderedDict[str, _Kept] = OrderedDict()

    def forget(self, session_id: str) -> None:
        if (kept := self._kept.pop(session_id, None)) is not None:
            self._chars -= kept.chars

    async def transcript(self, session_id: str) -> tuple[list[dict[str, Any]], str | None]:
        """(the messages from the latest compaction on, with ``index``; that
        compaction's summary, None if never compacted)."""
        kept = self._kept.get(session_id)
        self.forget(session_id)
        if kept is not None:
            start = kept.next_index
            added = await self._db.read(
                lambda c: compactions.since(c, session_id, start, NEW_MOST), single=True)
            if added is not None and added[0] == kept.mark:
                kept.add(added[1])
                return self._hold(session_id, kept)
        rows, summary, mark = await self._db.read(
            lambda c: compactions.current(c, session_id), single=True)
        if not rows and mark is not None:
            # compacted up to its last message: where the transcript ends is not
            # known from here, so nothing is kept (rare; the next turn reads it all)
            return rows, summary
        kept = _Kept(mark, summary, [], 0)
        kept.add(rows)
        return self._hold(session_id, kept)

    def _hold(self, session_id: str, kept: _Kept) -> tuple[list[dict[str, Any]], str | None]:
        out = list(kept.rows), kept.summary
        self.forget(session_id)  # another turn of it may have kept one meanwhile
        if kept.chars <= self._max_chars:
            self._kept[session_id] = kept
            self._chars += kept.chars
        while self._kept and (len(self._kept) > self._keep or self._chars > self._max_chars):
            self.forget(next(iter(self._kept)))
        return out
