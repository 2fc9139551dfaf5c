"""The session service: create (idempotent by request_id), snapshot, list, replay.

A viewer subscribes to a session by creating or resuming it. The subscription
starts *before* the snapshot is read and is released right after the reply is
sent, so the viewer sees every event after the snapshot's ``last_seq`` exactly
once, in order, with no gap between snapshot and stream.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

import orjson

from tether.rpc.envelope import event_envelope
from tether.rpc.errors import (
    AdmissionConflict,
    InvalidParams,
    NotFound,
    Overloaded,
    RuntimeDraining,
)
from tether.rpc.models import TURN_OPTION_FIELDS, SessionCreateParams
from tether.store.conn import Conn
from tether.store.tables import admissions, events, messages, sessions
from tether.store.tables import approvals as approval_rows

from ..config.turn import check_turn_options
from ..ledger import rules as ledger
from ..ledger.events import EventBus, Viewer
from ..ledger.journal import Journal, Tx
from ..ledger.scheduler import Scheduler
from ..model.usage import Prices, totals
from ..runtime.supervisor import Supervisor

__all__ = ["SessionService", "new_session_id", "event_dicts"]

#: events returned inline by session.resume; more must be paged with events.since
RESUME_EVENTS_MAX = 10_000
#: payload characters after which a page of events ends early (docs/protocol.md):
#: a reply stays about this size however large the events, so a peer that
#: pipelines pages without reading them holds the owner to 64 of these
PAGE_BYTES = 1024 * 1024


#: how many of a session's newest turn ends and compactions a snapshot looks through
#: for the context window's fill (a turn that asked no model leaves none)
CONTEXT_LOOKBACK = 20


def context_fill(c: Conn, session_id: str) -> dict[str, Any] | None:
    """The context window's fill the session's latest turn left (message.complete's
    ``context``), lowered to a compaction's estimate when one came after it."""
    compacted: int | None = None
    for type_, raw in events.newest_of_types(c, session_id, ("message.complete",
                                                             "session.compacted"),
                                             CONTEXT_LOOKBACK):
        p = orjson.loads(raw)
        if type_ == "session.compacted":
            if compacted is None and isinstance(p.get("tokens_after"), int):
                compacted = p["tokens_after"]
        elif isinstance(p.get("context"), dict):
            fill = dict(p["context"])
            if compacted is not None:
                fill.update(used=compacted, estimated=True)
            return fill
    return None


#: the columns of an approval prompt a snapshot shows (rpc ApprovalPrompt)
APPROVAL_FIELDS = ("approval_id", "session_id", "admission_id", "call_id", "tool", "kind",
                   "subject", "why", "cwd", "status", "decision", "cause", "answered_by",
                   "reason", "created_at", "expires_at", "resolved_at")


def new_session_id() -> str:
    return "ses_" + secrets.token_hex(12)


def event_dicts(session_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event_envelope(session_id, r["seq"], r["type"], orjson.loads(r["payload_json"]),
                           r["admission_id"])
            for r in rows]


def _info(row: dict[str, Any], prices: Prices) -> dict[str, Any]:
    opts = row["options"]
    return {"source": row["source"], "title": row["title"], "cwd": row["cwd"],
            "model": opts.get("model"), "provider": opts.get("provider"),
            "toolsets": opts.get("toolsets"), "created_at": row["created_at"],
            "parent_session_id": row["parent_session_id"],
            "usage": totals(row["usage"], prices), "forked_from": row["forked_from"],
            "forked_at_seq": row["forked_at_seq"]}


#: first element of every session.list cursor: a cursor of another shape (one
#: from an owner that paged on updated_at, or made up) is refused, not misread
_CURSOR_TAG = "created"


def _encode_cursor(created_at: float, session_id: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([_CURSOR_TAG, created_at, session_id])).decode()


def _decode_cursor(cursor: str) -> tuple[float, str]:
    """The (created_at, session_id) a cursor from ``_encode_cursor`` carries."""
    try:
        value = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, orjson.JSONDecodeError):
        value = None
    match value:
        case [str(tag), int() | float() as created_at, str(session_id)] \
                if tag == _CURSOR_TAG and not isinstance(created_at, bool):
            return float(created_at), session_id
    raise InvalidParams("cursor is not one this owner issued",
                        fields=[{"loc": "cursor", "msg": "malformed", "type": "value_error"}])


def _same_session(found: dict[str, Any], request_id: str, digest: str) -> str:
    """The session a create with this request_id made, if it was made with the same
    params (a retry); a conflict if not."""
    if found["params_digest"] != digest:
        raise AdmissionConflict(f"request_id {request_id!r} already created a session with "
                                "different params", session_id=found["session_id"])
    return str(found["session_id"])


class SessionService:
    def __init__(self, journal: Journal, bus: EventBus, scheduler: Scheduler,
                 supervisor: Supervisor, prices: Prices | None = None, *,
                 sandbox_mode: str = "workspace-write") -> None:
        self._prices = prices or Prices()
        #: sandbox.mode: a session's default sandbox may not be looser
        self.sandbox_mode = sandbox_mode
        self._journal = journal
        self._db = journal.db
        self._bus = bus
        self._scheduler = scheduler
        self._supervisor = supervisor

    @property
    def journal(self) -> Journal:
        return self._journal

    @property
    def prices(self) -> Prices:
        return self._prices

    @property
    def scheduler(self) -> Scheduler:
        return self._scheduler

    async def create(self, p: SessionCreateParams, viewer: Viewer | None) -> tuple[dict, Any]:
        """Create (or find by request_id) a session; returns (snapshot, release)."""
        check_turn_options(p.provider, p.toolsets, p.base_url, p.sandbox, self.sandbox_mode)
        options = {k: v for k in TURN_OPTION_FIELDS if (v := getattr(p, k)) is not None}
        params = p.model_dump(exclude={"request_id"}, exclude_none=True)
        digest = ledger.digest(ledger.encode_payload(params))
        session_id = new_session_id()
        # read once, on the loop: a drain that starts later does not undo this call
        draining = self._supervisor.draining

        def unit(tx: Tx) -> str:
            if p.request_id is not None:
                found = sessions.get_by_request(tx.conn, p.request_id)
                if found is not None:
                    return _same_session(found, p.request_id, digest)
            if draining:  # a retry above is still answered; nothing new is created
                raise RuntimeDraining("the owner is shutting down and creates nothing new")
            sessions.insert(tx.conn, session_id=session_id, request_id=p.request_id,
                            params_digest=digest, parent_session_id=None, source=p.source,
                            title=p.title, cwd=p.cwd, options=options, now=tx.now)
            return session_id

        bus = self._bus
        # take the subscription slot before writing: a connection at its bound is
        # refused with nothing created, not left with a session it cannot follow
        if viewer is not None and not bus.subscribe(viewer, session_id):
            # ... unless this is a retry: the session exists, and following it again
            # may need no new slot (snapshot() decides)
            found = await self._by_request(p.request_id, digest)
            if found is None:
                raise Overloaded(f"this connection already follows {viewer.max_subscriptions}"
                                 " sessions; detach one first", limit=viewer.max_subscriptions)
            return await self.snapshot(found, None, viewer)
        sid: str | None = None
        try:
            sid = await self._journal.write(unit)
        finally:
            if viewer is not None and sid != session_id:
                bus.abandon(viewer, session_id)  # failed, or found an existing one
        # a new session is already subscribed (the slot taken above); a found one is not
        return await self.snapshot(sid, None, viewer, subscribe=sid != session_id)

    async def _by_request(self, request_id: str | None, digest: str) -> str | None:
        """The session ``request_id`` created, if any (a conflict if its params differ)."""
        if request_id is None:
            return None
        found = await self._db.read(lambda c: sessions.get_by_request(c, request_id))
        return None if found is None else _same_session(found, request_id, digest)

    async def snapshot(self, session_id: str, after_seq: int | None,
                       viewer: Viewer | None, subscribe: bool = True) -> tuple[dict, Any]:
        """The session's snapshot; with a viewer, also subscribe it (``subscribe``
        False: the caller already did, for this snapshot).

        Returns (snapshot, release): call ``release()`` once the reply is queued.
        """
        bus = self._bus
        if viewer is not None and subscribe and not bus.subscribe(viewer, session_id):
            raise Overloaded(f"this connection already follows {viewer.max_subscriptions} "
                             "sessions; detach one first", limit=viewer.max_subscriptions)

        def read(c: Conn) -> dict[str, Any] | None:
            row = sessions.get(c, session_id)
            if row is None:
                return None
            pending = []
            for a in admissions.open_for_session(c, session_id):
                payload = orjson.loads(a["payload_json"])
                pending.append({"receipt": ledger.receipt_from_row(a), "text": payload["text"]})
            snap = {
                "session_id": session_id, "stored_session_id": session_id,
                "info": {**_info(row, self._prices), "context": context_fill(c, session_id)},
                "messages": messages.list_for(c, session_id), "pending": pending,
                "last_seq": events.last_seq(c, session_id), "events": None,
                # pending approval prompts: a viewer that attaches late can answer them
                "approvals": [{k: r[k] for k in APPROVAL_FIELDS}
                              for r in approval_rows.pending(c, session_id)],
            }
            if after_seq is not None:
                snap["events"] = event_dicts(
                    session_id, events.since(c, session_id, after_seq, RESUME_EVENTS_MAX,
                                                 PAGE_BYTES))
            return snap

        try:
            snap = await self._db.read(read)
        except Exception:
            if viewer is not None:
                bus.abandon(viewer, session_id)
            raise
        if snap is None:
            if viewer is not None:
                bus.abandon(viewer, session_id)
            raise NotFound(f"no session {session_id!r}", session_id=session_id)
        snap["running"] = self._scheduler.running.get(session_id)
        last = snap["last_seq"]
        if after_seq is not None and after_seq > last:
            if viewer is not None:
                bus.abandon(viewer, session_id)
            raise _beyond_last(after_seq, last)

        def release() -> None:
            if viewer is not None:
                bus.activate(viewer, session_id, last)

        return snap, release

    async def list(self, limit: int, cursor: str | None) -> dict[str, Any]:
        """A page of sessions, newest-created first (docs/protocol.md, session.list)."""
        after = _decode_cursor(cursor) if cursor else None
        # one row more than asked tells whether this page is the last
        rows = await self._db.read(lambda c: sessions.list_page(c, limit + 1, after))
        more, rows = len(rows) > limit, rows[:limit]
        running = self._scheduler.running
        out = [{"session_id": r["session_id"], "title": r["title"], "source": r["source"],
                "created_at": r["created_at"], "updated_at": r["updated_at"],
                "message_count": r["message_count"], "running": r["session_id"] in running,
                "parent_session_id": r["parent_session_id"], "cwd": r["cwd"],
                "usage": totals(r["usage"], self._prices)} for r in rows]
        nxt = _encode_cursor(rows[-1]["created_at"], rows[-1]["session_id"]) if more else None
        return {"sessions": out, "next_cursor": nxt}

    async def events_since(self, session_id: str, after_seq: int, limit: int) -> dict[str, Any]:
        def read(c: Conn) -> dict[str, Any] | None:
            if sessions.get(c, session_id) is None:
                return None
            return {"events": event_dicts(session_id,
                                          events.since(c, session_id, after_seq, limit,
                                                       PAGE_BYTES)),
                    "last_seq": events.last_seq(c, session_id)}

        out = await self._db.read(read)
        if out is None:
            raise NotFound(f"no session {session_id!r}", session_id=session_id)
        if after_seq > out["last_seq"]:
            raise _beyond_last(after_seq, out["last_seq"])
        return out

    async def exists(self, session_id: str) -> bool:
        row = await self._db.read(lambda c: sessions.get(c, session_id))
        return row is not None


def _beyond_last(after_seq: int, last: int) -> InvalidParams:
    """``after_seq`` names an event this session never had: the caller's seq is from
    elsewhere (another home, a mistyped id), so answering "nothing new" would hide it."""
    msg = f"after_seq {after_seq} is beyond the session's last_seq {last}"
    return InvalidParams(msg, fields=[{"loc": "after_seq", "msg": msg,
                                       "type": "after_seq_beyond_last_seq"}], last_seq=last)
