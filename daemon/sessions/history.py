"""session.fork, session.export, session.compact: the methods of long sessions.

Fork copies, in one store transaction, what a session held at a turn's end
(store/history.py); export reads everything in one read and builds the
document (export.py, export_md.py); compact asks compaction.py for a manual
compaction with the session's own model (docs/long-sessions.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tether.rpc.dispatch import Dispatcher
from tether.rpc.errors import InvalidParams, NotFound
from tether.rpc.models import history as mh
from tether.store.conn import Conn
from tether.store.tables import compactions, events, messages, sessions
from tether.store.tables import history as rows

from ..config.core import Config
from ..config.turn import ResolveError, resolve_turn
from ..engine.compaction import CompactionFailed, Compactor, Target
from ..engine.core import Engine
from ..ledger.journal import Journal, Tx
from ..model.usage import Prices
from .export import build_document
from .markdown import render_markdown
from .service import new_session_id

__all__ = ["History", "history_handlers", "record_view"]


class History:
    def __init__(self, journal: Journal, prices: Prices, engine: Engine, config: Config,
                 compactor: Compactor) -> None:
        self._journal = journal
        self._prices = prices
        self._engine = engine
        self._config = config
        self._compactor = compactor

    async def compact(self, session_id: str, focus: str | None) -> dict[str, Any]:
        """A manual compaction: everything but the newest turn, summarised now."""
        row = await self._journal.db.read(lambda c: sessions.get(c, session_id))
        if row is None:
            raise NotFound(f"no session {session_id!r}", session_id=session_id)
        if self._config.model.compact == "off":
            return _not_compacted("compaction is off (config model.compact)")
        try:
            settings = resolve_turn(self._config, row["options"], {})
            provider = self._engine.provider(settings)
        except ResolveError as exc:
            raise InvalidParams(f"the session's model settings do not resolve: {exc}",
                                session_id=session_id) from None
        target = Target(session_id, settings.model, settings.reasoning, None, focus, "manual")
        try:
            record = await self._compactor.compact(target, provider,
                                                   await self._engine.budget(settings))
        except CompactionFailed as exc:
            return _not_compacted(f"the model could not summarise ({exc})")
        if record is None:
            return _not_compacted("nothing to compact: only the newest turn is left")
        return {"compacted": True, "compaction": record_view(record), "reason": None}

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
            return {"format": "markdown", "document": None, "markdown": render_markdown(doc)}
        return {"format": "json", "document": doc, "markdown": None}


def _not_compacted(reason: str) -> dict[str, Any]:
    return {"compacted": False, "compaction": None, "reason": reason}


def record_view(record: dict[str, Any]) -> dict[str, Any]:
    """A compaction record as the wire shows it (rpc ExportCompaction)."""
    return {k: record.get(k) for k in ("compaction_id", "first_index", "end_index", "summary",
                                       "model", "tokens_before", "tokens_after", "kind",
                                       "focus", "usage", "created_at")}


def history_handlers(history: History) -> Callable[[Dispatcher], None]:
    """A registrar for ``build_dispatcher(register=...)``."""

    def register(d: Dispatcher) -> None:
        @d.register("session.fork")
        async def fork(p: mh.SessionForkParams, call: Any) -> dict[str, Any]:
            return await history.fork(p.session_id, p.at_seq)

        @d.register("session.export")
        async def export(p: mh.SessionExportParams, call: Any) -> dict[str, Any]:
            return await history.export(p.session_id, p.format)

        @d.register("session.compact")
        async def compact(p: mh.SessionCompactParams, call: Any) -> dict[str, Any]:
            return await history.compact(p.session_id, p.focus)

    return register
