"""The admission service: record a submission durably, then acknowledge it.

``submit`` answers a receipt only after the row is committed. Identity is
(principal, session, request_id = input_id); a retry with the same canonical
payload gets the stored receipt whatever its status and never runs twice, a
different payload is ``admission_conflict``. Concurrent duplicates are safe
because the check and the insert happen in one unit on the single writer.

The owner's own producers (delegation results) admit through ``admit`` with
their principal. What prompt.cancel and prompt.resolve_unknown do to a row is
decided by ledger.py; the writes are outcomes.py's.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any, Protocol

from tether.rpc.errors import (
    AdmissionConflict,
    InvalidParams,
    NotFound,
    Overloaded,
    RuntimeDraining,
    UnknownExecution,
)
from tether.rpc.models import TURN_OPTION_FIELDS, PromptSubmitParams
from tether.store import StorageError
from tether.store.conn import Conn
from tether.store.tables import admissions, sessions

from ..config.core import DaemonConfig
from ..config.turn import check_turn_options
from ..runtime.supervisor import Supervisor
from . import outcomes
from . import rules as ledger
from .journal import Journal, Tx
from .placement import Placement
from .rules import CancelAction, Event
from .scheduler import Scheduler

__all__ = ["AdmissionService", "Turns", "payload_of"]

#: a turn's start as outcomes.start returns it: the admission's row, the session's
Started = tuple[dict[str, Any], dict[str, Any]]

#: how long prompt.cancel waits for a started turn to record its outcome
CANCEL_WAIT_SECONDS = 10.0


class Turns(Protocol):
    """What the ledger tells the side that runs turns (turns.py's TurnRunner), which
    it does not import: ``pump`` — sessions may have a turn ready to start (an
    admission committed, a pause lifted, a withdrawal undone); ``begin`` — run the
    turn an admission's own commit started (`Scheduler.start_now`), given that
    start's (row, session); ``stop_and_wait`` —
    stop the turn a started admission runs, wherever it runs."""

    def pump(self) -> None: ...

    def begin(self, session_id: str, admission_id: str, started: Started) -> None: ...

    async def stop_and_wait(self, session_id: str, admission_id: str | None,
                            wait: float) -> str | None: ...


def new_admission_id() -> str:
    return "adm_" + secrets.token_hex(12)


def payload_of(p: PromptSubmitParams) -> dict[str, Any]:
    """The canonical payload (SPEC §4) of a prompt.submit, as stored in the ledger."""
    options = {k: getattr(p, k) for k in TURN_OPTION_FIELDS}
    attachments = [a.model_dump() for a in p.attachments] if p.attachments else None
    return ledger.canonical_payload(p.text, p.finite, options, attachments)


class AdmissionService:
    def __init__(self, journal: Journal, scheduler: Scheduler, supervisor: Supervisor,
                 turns: Turns, limits: DaemonConfig, placement: Placement, *, epoch: int,
                 sandbox_mode: str = "workspace-write") -> None:
        self._journal = journal
        #: sandbox.mode: a turn may ask for a stricter sandbox, not a looser one
        self.sandbox_mode = sandbox_mode
        # whether the session's turns run on this owner (in a fleet: its lease);
        # an admission placed elsewhere is only recorded here (fleet/node.py)
        self._placement = placement
        self._scheduler = scheduler
        self._supervisor = supervisor
        self._turns = turns
        self._limits = limits
        self._epoch = epoch

    # -- prompt.submit ----------------------------------------------------

    def check_submit(self, p: PromptSubmitParams) -> None:
        # attachments become part of the user message, so they count toward it too
        total = len(p.text) + sum(len(a.content) for a in p.attachments or ())
        if (refusal := self._too_long(len(p.text), total)) is not None:
            raise refusal
        check_turn_options(p.provider, p.toolsets, p.base_url, p.sandbox, self.sandbox_mode)

    def _too_long(self, text_chars: int, total_chars: int) -> InvalidParams | None:
        """The refusal of a prompt longer than ``daemon.max_text_chars``, if it is."""
        limit = self._limits.max_text_chars
        if text_chars > limit:
            return InvalidParams(f"text is {text_chars} characters; the limit is {limit}",
                                 fields=[{"loc": "text", "msg": f"longer than {limit}",
                                          "type": "too_long"}])
        if total_chars > limit:
            return InvalidParams(
                f"text and attachments are {total_chars} characters; the limit is {limit}",
                fields=[{"loc": "attachments", "msg": f"text + attachments longer than {limit}",
                         "type": "too_long"}])
        return None

    def oversize(self, raw: dict[str, Any]) -> InvalidParams | None:
        """For prompt.submit params that failed validation: the configured limit's
        refusal when their text is too long. A text beyond the protocol's ceiling
        (MAX_TEXT_CHARS) fails validation before check_submit could see it; this
        gives it the same words as any other text over ``daemon.max_text_chars``,
        which config.py keeps at or below that ceiling."""
        text = raw.get("text")
        if not isinstance(text, str):
            return None
        attachments = raw.get("attachments")
        contents = [a.get("content") for a in attachments if isinstance(a, dict)] \
            if isinstance(attachments, list) else []
        total = len(text) + sum(len(c) for c in contents if isinstance(c, str))
        return self._too_long(len(text), total)

    async def submit(self, p: PromptSubmitParams) -> dict[str, Any]:
        payload_json = ledger.encode_payload(payload_of(p))
        try:
            self.check_submit(p)
        except InvalidParams:
            # a retry of what was admitted under other limits (the owner restarted
            # with a lower max_text_chars, say) still gets its receipt
            existing = await self._find("local", p.session_id, p.input_id)
            if existing is None:
                raise
            return self._receipt(_same(existing, ledger.digest(payload_json)))
        # an untitled session is named by its first prompt
        return await self.admit("local", p.session_id, p.input_id, payload_json,
                                title=title_of(p.text))

    async def admit(self, principal: str, session_id: str, request_id: str,
                    payload_json: str, extra_unit: Callable[[Tx], None] | None = None,
                    internal: bool = False,
                    prepare: Callable[[Tx], None] | None = None,
                    title: str | None = None) -> dict[str, Any]:
        """Record (or find) the admission and return its receipt.

        ``extra_unit(tx)`` runs in the same transaction as a new row (delegation
        delivery marks its row delivered there). ``internal`` admissions (the
        owner's own producers) bypass draining and the per-session queue bound:
        a result that is already computed must not be dropped. ``prepare(tx)``
        runs first in that transaction (a cron fire creates the run's session there).
        ``title`` names the session with a new row if it has no title yet.
        """
        digest = ledger.digest(payload_json)
        refusal = self._refusal(session_id, internal)
        if refusal is not None or prepare is not None:
            # a retry is answered even when a new admission would be refused, and
            # before ``prepare`` runs again; otherwise the unit's insert finds it
            existing = await self._find(principal, session_id, request_id)
            if existing is not None:
                return self._receipt(_same(existing, digest))
            refusal = self._refusal(session_id, internal)
        if refusal is not None:
            raise refusal
        limit = self._limits.max_queued_per_session
        admission_id = new_admission_id()
        scheduler, epoch, place = self._scheduler, self._epoch, self._placement.place
        supervisor = self._supervisor
        # a fleet's turn starts under its lease, in a unit of its own (docs/scale-out.md)
        fold = not self._placement.shared

        def unit(tx: Tx) -> tuple[bool, dict[str, Any], Started | None]:
            # the session's bound and the insert (one statement on PostgreSQL), then the
            # placement sent along, conditional on the insert: one wait for the three
            if prepare is not None:
                prepare(tx)
            # nothing is ahead of it: its turn starts in this commit, so its row goes in
            # started (outcomes.begun writes the rest of the start below). The slot is
            # taken here; `admitted` frees it if the unit inserts nothing or fails.
            start = fold and not supervisor.draining and scheduler.start_now(session_id,
                                                                             admission_id)
            attempt = admissions.admit(
                tx.conn, admission_id=admission_id, target_session_id=session_id,
                principal_id=principal, request_id=request_id, payload_json=payload_json,
                payload_digest=digest, owner_epoch=epoch, now=tx.now,
                bound=None if internal else limit, started=start)
            placed = place(tx, session_id, admission_id)
            got = attempt()
            if got.last_seq is not None:
                tx.seen_last(session_id, got.last_seq)
            if not got.present:
                raise NotFound(f"no session {session_id!r}", session_id=session_id)
            if got.row is None:
                # the identity exists (a concurrent duplicate got there first), or the
                # session is at its bound: a retry is answered even then
                found = admissions.find(tx.conn, principal, session_id, request_id)
                if found is not None:
                    return False, found, None
                assert not internal and got.open >= limit
                raise Overloaded(f"session {session_id} already has {limit} open admissions",
                                 limit=limit)
            if title and got.untitled:
                sessions.title_if_untitled(tx.conn, session_id, title)
            if extra_unit is not None:
                extra_unit(tx)
            if start:
                # its turn starts in this commit (outcomes.begun announces the
                # session's state); a failure from here on frees the slot
                started = outcomes.begun(tx, scheduler, session_id, admission_id, got.row,
                                         sessions.get(tx.conn, session_id))
                return True, got.row, started
            if not placed():
                # another node of the fleet holds the session: it announces its queue
                return True, got.row, None
            # last: nothing after it in this unit can fail (the group still can)
            scheduler.admitting(session_id, admission_id)
            tx.event(session_id, "session.info", scheduler.view(session_id))
            return True, got.row, None

        fut = self._journal.submit(unit)
        # scheduled from a done-callback: runs even if this caller is cancelled
        # after the commit, so a committed admission is always scheduled
        fut.add_done_callback(lambda f: self._on_admitted(f, session_id, admission_id))
        (created, row, _started), _ = await asyncio.shield(fut)
        return self._receipt(_same(row, digest) if not created else row)

    def _refusal(self, session_id: str, internal: bool) -> Exception | None:
        """Why a new admission of the session is refused now, if it is."""
        if internal:
            return None
        if self._supervisor.draining:
            return RuntimeDraining("the owner is shutting down and admits nothing new")
        if paused_on := self._scheduler.unknown(session_id):
            # a new prompt would wait behind the pause with nobody told why (a finite
            # CLI would hang): refuse it, naming what to resolve (docs/recovery.md)
            return UnknownExecution(
                f"session {session_id} is paused: admission(s) {', '.join(paused_on)} were "
                "running when the previous owner stopped; settle them with "
                "prompt.resolve_unknown", admission_id=paused_on[0], admission_ids=paused_on)
        return None

    async def _find(self, principal: str, session_id: str,
                    request_id: str) -> dict[str, Any] | None:
        """The admission with this identity, if any: a read by key, on the loop (a
        retry needs no thread hop and no writer round trip)."""
        return await self._journal.db.lookup(
            lambda c: admissions.find(c, principal, session_id, request_id), single=True)

    def _on_admitted(self, fut: asyncio.Future[Any], session_id: str,
                     admission_id: str) -> None:
        done = not fut.cancelled() and fut.exception() is None
        created, _, started = fut.result()[0] if done else (False, None, None)
        self._scheduler.admitted(session_id, admission_id, committed=created)
        if created and started is not None:
            # started in the admission's commit: its turn runs now, even if the
            # owner began draining meanwhile (stop_all then gives it the grace)
            self._turns.begin(session_id, admission_id, started)
        self._turns.pump()

    # -- prompt.receipt ---------------------------------------------------

    async def receipt(self, session_id: str, admission_id: str | None,
                      input_id: str | None) -> dict[str, Any]:
        def read(c: Conn) -> dict[str, Any] | None:
            if admission_id is not None:
                row = admissions.get(c, admission_id)
                return row if row and row["target_session_id"] == session_id else None
            return admissions.find(c, "local", session_id, input_id or "")

        row = await self._journal.db.lookup(read, single=True)
        if row is None:
            which = f"admission {admission_id!r}" if admission_id else f"input_id {input_id!r}"
            raise NotFound(f"no {which} in session {session_id!r}")
        return self._receipt(row)

    def _receipt(self, row: dict[str, Any]) -> dict[str, Any]:
        """The wire receipt; a queued admission of a paused session says what it
        waits behind, so its submitter can stop waiting and say so."""
        receipt = ledger.receipt_from_row(row)
        if receipt["status"] == ledger.Status.QUEUED and \
                (paused_by := self._scheduler.unknown(receipt["session_id"])):
            receipt["paused_by"] = paused_by
        return receipt

    # -- prompt.cancel / prompt.resolve_unknown ---------------------------

    async def cancel(self, session_id: str, admission_id: str) -> dict[str, Any]:
        """queued → terminal/cancelled; started → its turn is stopped (outcome cancelled)."""
        row = await self.receipt(session_id, admission_id, None)
        action = ledger.decide_cancel(row["status"])
        if action is CancelAction.REFUSE:
            raise UnknownExecution(
                f"admission {admission_id} is unknown (it was running when the previous owner "
                "stopped); settle it with prompt.resolve_unknown", admission_id=admission_id)
        place = self._scheduler.cancel(session_id, admission_id) \
            if action is CancelAction.WITHDRAW else None
        if place is not None:
            try:
                await self._settle(session_id, admission_id, Event.WITHDRAW, "cancelled",
                                   "cancelled before it ran")
            except StorageError:
                # not recorded: it is still queued, so it keeps its place and runs
                # (or a retried cancel settles it)
                self._scheduler.restore(session_id, admission_id, place)
                self._turns.pump()
                raise
        elif action is not CancelAction.NOTHING:
            if action is CancelAction.WITHDRAW and self._placement.shared \
                    and not self._scheduler.knows(session_id, admission_id) \
                    and await self._settle(session_id, admission_id, Event.WITHDRAW,
                                           "cancelled", "cancelled before it ran"):
                # in a fleet it waited in another node's queue: withdrawn in the store,
                # that node skips it (a turn starts only from queued)
                return await self.receipt(session_id, admission_id, None)
            # queued but no longer in the scheduler: it has just been handed to a turn
            # (here, or on the node that holds the session)
            await self._turns.stop_and_wait(session_id, admission_id, CANCEL_WAIT_SECONDS)
        return await self.receipt(session_id, admission_id, None)

    async def resolve_unknown(self, session_id: str, admission_id: str) -> dict[str, Any]:
        row = await self.receipt(session_id, admission_id, None)
        decision = ledger.decide_resolve(row["status"])
        if decision is None:
            raise InvalidParams(f"admission {admission_id} is {row['status']}, not unknown",
                                fields=[{"loc": "admission_id", "msg": "not unknown",
                                         "type": "status"}])
        if decision:
            await self._settle(session_id, admission_id, Event.RESOLVE, "interrupted",
                               "the owner stopped while this turn ran; resolved as interrupted")
            self._scheduler.unblock(session_id, admission_id)
            self._turns.pump()
        return await self.receipt(session_id, admission_id, None)

    async def _settle(self, session_id: str, admission_id: str, event: Event, outcome: str,
                      error: str) -> bool:
        return await self._journal.write(lambda tx: outcomes.settle(
            tx, self._scheduler, session_id, admission_id, event, outcome, error=error))


def _same(row: dict[str, Any], digest: str) -> dict[str, Any]:
    """``row``, if it was admitted with this digest; admission_conflict if not."""
    if row["payload_digest"] != digest:
        raise AdmissionConflict(
            f"input_id {row['request_id']!r} was already submitted with a different payload",
            admission_id=row["admission_id"])
    return row


#: how much of a first prompt titles an untitled session
TITLE_CHARS = 80


def title_of(text: str) -> str:
    """A session's title from its first prompt: the first line with text, its
    whitespace collapsed, cut at a word near TITLE_CHARS (with …)."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[40:] else cut) + "…"
