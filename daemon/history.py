"""session.fork and session.export (and the registrar of the long-session methods).

Fork copies, in one store transaction, what a session held at a turn's end
(store/history.py); export reads everything in one read and builds the
document (export.py, export_md.py). session.compact is compaction.py's; it is
registered here so the three methods of docs/long-sessions.md stay together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tether.rpc import models_history as mh
from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams, NotFound
from tether.store import compactions, events, messages, sessions
from tether.store import history as rows
from tether.store.conn import Conn

from .export import build_document
from .export_md import render_markdown
from .journal import Journal, Tx
from .sessions import new_session_id
from .usage import Prices

__all__ = ["History", "history_handlers"]


class History:
    def __init__(self, journal: Journal, prices: Prices) -> None:
        self._journal = journal
        self._prices = prices

    async def fork(self, session_id: str, at_seq: int | None) -> dict[str, Any]:
        new_id = new_session_id()

        def unit(tx: Tx) -> dict[str, Any]:
            if sessions.get(tx.conn, session_id) is None:
                raise NotFound(f"no session {session_id!r}", session_id=session_id)
            last = events.last_seq(tx.conn, session_id)
            if at_seq is not None and at_seq > last:
                msg = f"at_seq {at_seq} is beyond the session's last_seq {last}"
                raise InvalidParams(msg, fields=[{"loc": "at_seq", "msg": msg,
                                                  "type": "at_seq_beyond_last_seq"}],
                                    last_seq=last)
            seq, end_index = rows.turn_end(tx.conn, session_id, last if at_seq is None
                                           else at_seq)
            copied, records = rows.fork(tx.conn, session_id, new_id, seq, end_index, tx.now)
            return {"session_id": new_id, "forked_from": session_id, "forked_at_seq": seq,
                    "message_count": copied, "compactions": records}

        return await self._journal.write(unit)

    async def export(self, session_id: str, format_: str) -> dict[str, Any]:
        def read(c: Conn) -> dict[str, Any] | None:
            row = sessions.get(c, session_id)
            if row is None:
                return None
            return build_document(row, messages.list_for(c, session_id, with_index=True),
                                  rows.events_for_export(c, session_id),
                                  compactions.list_for(c, session_id),
                                  events.last_seq(c, session_id), time.time(), self._prices)

        doc = await self._journal.db.read(read)
        if doc is None:
            raise NotFound(f"no session {session_id!r}", session_id=session_id)
        if format_ == "markdown":
            return {"format": "markdown", "markdown": render_markdown(doc)}
        return {"format": "json", "document": doc}


def history_handlers(history: History,
                     compact: Callable[[str, str | None], Any] | None = None,
                     ) -> Callable[[Dispatcher], None]:
    """A registrar for ``build_dispatcher(register=...)``; ``compact(session_id,
    focus)`` runs a manual compaction (compaction.py)."""

    def register(d: Dispatcher) -> None:
        @d.register("session.fork")
        async def fork(p: mh.SessionForkParams, call: Any) -> dict[str, Any]:
            return await history.fork(p.session_id, p.at_seq)

        @d.register("session.export")
        async def export(p: mh.SessionExportParams, call: Any) -> dict[str, Any]:
            return await history.export(p.session_id, p.format)

        if compact is not None:
            @d.register("session.compact")
            async def compact_now(p: mh.SessionCompactParams, call: Any) -> dict[str, Any]:
                return dict(await compact(p.session_id, p.focus))

    return register
