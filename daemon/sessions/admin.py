"""Session management: rename, delete (with delegation children), prune, lookup.

Delete refuses a session that still has work: an admission that is not
terminal (queued, started, unknown) or a background delegation not yet
delivered, in the session or in any of its delegation child sessions; the
caller is told to cancel or resolve first. Otherwise the session is removed
with its child sessions — they are part of its history and mean nothing
alone (docs/decisions.md, "Deleting sessions"). Checks and deletion happen in
one store transaction, which is also where admissions are written, so no
prompt can slip in between.
"""

from __future__ import annotations

from typing import Any

import orjson

from tether.rpc.errors import InvalidParams, NotFound
from tether.rpc.names import AUTOMATED_SOURCES
from tether.store.conn import Conn
from tether.store.tables import session_admin as rows

from ..ledger.journal import Journal, Tx
from ..ledger.scheduler import Scheduler
from ..model.usage import Prices, totals

__all__ = ["SessionAdmin", "LOOKUP_MAX"]

#: matches session.lookup returns at most
LOOKUP_MAX = 10
_ID_PREFIX = "ses_"


class SessionAdmin:
    def __init__(self, journal: Journal, scheduler: Scheduler,
                 prices: Prices | None = None) -> None:
        self._prices = prices or Prices()
        self._journal = journal
        self._db = journal.db
        self._scheduler = scheduler

    async def rename(self, session_id: str, title: str) -> dict[str, Any]:
        title = " ".join(title.split())
        if not title:
            raise InvalidParams("a title needs a visible character",
                                fields=[{"loc": "title", "msg": "blank", "type": "value_error"}])
        if not await self._journal.write(lambda tx: rows.rename(tx.conn, session_id, title)):
            raise NotFound(f"no session {session_id!r}", session_id=session_id)
        return {"session_id": session_id, "title": title}

    async def delete(self, session_id: str, *, force: bool = False,
                     attached: int = 0) -> dict[str, Any]:
        """``attached``: how many other viewers follow the session on this owner; a
        session someone is watching is kept unless ``force``."""
        running = self._scheduler.running

        def unit(tx: Tx) -> list[str]:
            ids = rows.subtree(tx.conn, session_id)
            exists = tx.conn.execute("SELECT 1 FROM sessions WHERE session_id = ?",
                                     (session_id,)).fetchone()
            if exists is None:
                raise NotFound(f"no session {session_id!r}", session_id=session_id)
            open_, undelivered, processes = rows.busy(tx.conn, ids)
            if open_ or undelivered or processes or any(i in running for i in ids):
                what = []
                if open_ or any(i in running for i in ids):
                    what.append(f"{open_} prompt(s) queued, running or unknown")
                if undelivered:
                    what.append(f"{undelivered} background delegation(s) not yet delivered")
                if processes:
                    what.append(f"{processes} background process(es) running or with a "
                                "notice not yet delivered")
                raise InvalidParams(
                    f"session {session_id} still has work ({'; '.join(what)}); cancel it "
                    "(`tether cancel`) or settle it (`tether resolve`) first",
                    session_id=session_id, busy=True)
            if attached and not force:
                raise InvalidParams(
                    f"session {session_id} is open in {attached} viewer(s) (a chat, attach "
                    "or the web page); close them first, or delete it anyway with force",
                    session_id=session_id, attached=attached)
            rows.delete(tx.conn, ids)
            return ids

        return {"deleted": await self._journal.write(unit)}

    async def prune(self, older_than: float, dry_run: bool) -> dict[str, Any]:
        running = self._scheduler.running

        def unit(tx: Tx) -> list[str]:
            ids = [i for i in rows.empty_before(tx.conn, tx.now - older_than)
                   if i not in running]
            if ids and not dry_run:
                rows.delete(tx.conn, ids)
            return ids

        return {"pruned": await self._journal.write(unit)}

    async def lookup(self, prefix: str | None, last: bool) -> dict[str, Any]:
        if (prefix is None) == (not last):
            raise InvalidParams("give exactly one of prefix and last")

        def read(c: Conn) -> list[dict[str, Any]]:
            if prefix is None:
                return rows.last_active(c, AUTOMATED_SOURCES)
            found = rows.by_prefix(c, prefix, LOOKUP_MAX + 1)
            if not found and not prefix.startswith(_ID_PREFIX):
                found = rows.by_prefix(c, _ID_PREFIX + prefix, LOOKUP_MAX + 1)
            return found

        found = await self._db.read(read)
        running = self._scheduler.running
        for r in found:
            r["running"] = r["session_id"] in running
            raw = r.pop("usage_json", None)
            r["usage"] = totals(orjson.loads(raw) if raw else {}, self._prices)
        return {"matches": found[:LOOKUP_MAX], "more": len(found) > LOOKUP_MAX}
