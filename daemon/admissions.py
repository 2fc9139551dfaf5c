"""The admission service: record a submission durably, then acknowledge it.

``submit`` answers a receipt only after the row is committed. Identity is
(principal, session, request_id = input_id); a retry with the same canonical
payload gets the stored receipt whatever its status and never runs twice, a
different payload is ``admission_conflict``. Concurrent duplicates are safe
because the check and the insert happen in one unit on the single writer.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from typing import Any

import orjson

from tether.rpc.errors import (
    AdmissionConflict,
    InvalidParams,
    NotFound,
    Overloaded,
    RuntimeDraining,
    StorageUnavailable,
    UnknownExecution,
)
from tether.rpc.models import TURN_OPTION_FIELDS, PromptSubmitParams
from tether.store import StorageError, admissions

from . import ledger
from .events import Tx
from .resolve import check_turn_options
from .runtime import Runtime
from .turns import TurnRunner, session_info_payload

__all__ = ["AdmissionService", "storage_error"]

#: how long prompt.cancel waits for a started turn to record its outcome
CANCEL_WAIT_SECONDS = 10.0


def storage_error(exc: StorageError) -> StorageUnavailable:
    return StorageUnavailable(f"the state database failed: {exc.detail}",
                              storage_reason=exc.reason)


def new_admission_id() -> str:
    return "adm_" + secrets.token_hex(12)


class AdmissionService:
    def __init__(self, rt: Runtime, turns: TurnRunner) -> None:
        self.rt = rt
        self.turns = turns

    # -- prompt.submit ----------------------------------------------------

    @staticmethod
    def payload_of(p: PromptSubmitParams) -> dict[str, Any]:
        """The canonical payload (SPEC §4) of a prompt.submit, as stored in the ledger."""
        options = {k: getattr(p, k) for k in TURN_OPTION_FIELDS}
        attachments = [a.model_dump() for a in p.attachments] if p.attachments else None
        return ledger.canonical_payload(p.text, p.finite, options, attachments)

    def check_submit(self, p: PromptSubmitParams) -> None:
        limit = self.rt.config.daemon.max_text_chars
        if len(p.text) > limit:
            raise InvalidParams(f"text is {len(p.text)} characters; the limit is {limit}",
                                fields=[{"loc": "text", "msg": f"longer than {limit}",
                                         "type": "too_long"}])
        # attachments become part of the user message, so they count toward it too
        total = len(p.text) + sum(len(a.content) for a in p.attachments or ())
        if total > limit:
            raise InvalidParams(
                f"text and attachments are {total} characters; the limit is {limit}",
                fields=[{"loc": "attachments", "msg": f"text + attachments longer than {limit}",
                         "type": "too_long"}])
        check_turn_options(p.provider, p.toolsets, p.base_url)

    async def submit(self, p: PromptSubmitParams) -> dict[str, Any]:
        payload_json = ledger.encode_payload(self.payload_of(p))
        try:
            self.check_submit(p)
        except InvalidParams:
            # a retry of what was admitted under other limits (the owner restarted
            # with a lower max_text_chars, say) still gets its receipt
            existing = await self._find("local", p.session_id, p.input_id)
            if existing is None:
                raise
            return self._same(existing, ledger.digest(payload_json))
        return await self.admit("local", p.session_id, p.input_id, payload_json)

    async def admit(self, principal: str, session_id: str, request_id: str,
                    payload_json: str, extra_unit: Any = None,
                    internal: bool = False) -> dict[str, Any]:
        """Record (or find) the admission and return its receipt.

        ``extra_unit(tx)`` runs in the same transaction as a new row (delegation
        delivery marks its row delivered there). ``internal`` admissions (the
        owner's own producers) bypass draining and the per-session queue bound:
        a result that is already computed must not be dropped.
        """
        rt = self.rt
        digest = ledger.digest(payload_json)
        existing = await self._find(principal, session_id, request_id)
        if existing is not None:
            return self._same(existing, digest)
        if rt.draining and not internal:
            raise RuntimeDraining("the owner is shutting down and admits nothing new")
        if not internal and (paused_on := rt.scheduler.unknown(session_id)):
            # a new prompt would wait behind the pause with nobody told why (a finite
            # CLI would hang): refuse it, naming what to resolve (docs/recovery.md)
            raise UnknownExecution(
                f"session {session_id} is paused: admission(s) {', '.join(paused_on)} were "
                "running when the previous owner stopped; settle them with "
                "prompt.resolve_unknown", admission_id=paused_on[0], admission_ids=paused_on)
        limit = rt.config.daemon.max_queued_per_session
        admission_id = new_admission_id()

        def unit(tx: Tx) -> tuple[bool, dict[str, Any]]:
            # the common case is two statements: the bound, then an insert that
            # yields the row, or nothing when a concurrent duplicate got there first
            open_now = admissions.open_count(tx.conn, session_id)
            if open_now is None:
                raise NotFound(f"no session {session_id!r}", session_id=session_id)
            if not internal and open_now >= limit:
                found = admissions.find(tx.conn, principal, session_id, request_id)
                if found is not None:
                    return False, found  # a retry is answered even at the bound
                raise Overloaded(f"session {session_id} already has {limit} open admissions",
                                 limit=limit)
            row = admissions.insert_new(
                tx.conn, admission_id=admission_id, target_session_id=session_id,
                principal_id=principal, request_id=request_id, payload_json=payload_json,
                payload_digest=digest, owner_epoch=rt.epoch, now=tx.now)
            if row is None:
                found = admissions.find(tx.conn, principal, session_id, request_id)
                assert found is not None
                return False, found
            if extra_unit is not None:
                extra_unit(tx)
            info = session_info_payload(rt, session_id)
            info["pending"].append(admission_id)
            tx.event(session_id, "session.info", info)
            # last: nothing after it in this unit can fail (the group still can)
            rt.admitting.setdefault(session_id, []).append(admission_id)
            return True, row

        try:
            fut = rt.journal.submit(unit)
        except StorageError as exc:
            raise storage_error(exc) from None
        # enqueue from a done-callback: runs even if this caller is cancelled
        # after the commit, so a committed admission is always scheduled
        fut.add_done_callback(lambda f: self._on_admitted(f, session_id, admission_id))
        try:
            (created, row), _ = await asyncio.shield(fut)
        except StorageError as exc:
            raise storage_error(exc) from None
        except sqlite3.IntegrityError as exc:
            raise storage_error(StorageError(str(exc), "constraint")) from None
        if not created:
            return self._same(row, digest)
        return ledger.receipt_from_row(row)

    async def _find(self, principal: str, session_id: str,
                    request_id: str) -> dict[str, Any] | None:
        """The admission with this identity, if any: a read by key, on the loop (a
        retry needs no thread hop and no writer round trip)."""
        try:
            return await self.rt.db.lookup(
                lambda c: admissions.find(c, principal, session_id, request_id))
        except StorageError as exc:
            raise storage_error(exc) from None

    def _on_admitted(self, fut: asyncio.Future[Any], session_id: str,
                     admission_id: str) -> None:
        admitting = self.rt.admitting.get(session_id)
        if admitting is not None and admission_id in admitting:
            admitting.remove(admission_id)
            if not admitting:
                del self.rt.admitting[session_id]
        if fut.cancelled() or fut.exception() is not None:
            return
        (created, row), _ = fut.result()
        if created:
            self.rt.scheduler.enqueue(row["target_session_id"], row["admission_id"])
            self.turns.pump()

    @staticmethod
    def _same(row: dict[str, Any], digest: str) -> dict[str, Any]:
        if row["payload_digest"] != digest:
            raise AdmissionConflict(
                f"input_id {row['request_id']!r} was already submitted with a different payload",
                admission_id=row["admission_id"])
        return ledger.receipt_from_row(row)

    # -- prompt.receipt ---------------------------------------------------

    async def receipt(self, session_id: str, admission_id: str | None,
                      input_id: str | None) -> dict[str, Any]:
        def read(c: sqlite3.Connection) -> dict[str, Any] | None:
            if admission_id is not None:
                row = admissions.get(c, admission_id)
                return row if row and row["target_session_id"] == session_id else None
            return admissions.find(c, "local", session_id, input_id or "")

        try:
            row = await self.rt.db.lookup(read)
        except StorageError as exc:
            raise storage_error(exc) from None
        if row is None:
            which = f"admission {admission_id!r}" if admission_id else f"input_id {input_id!r}"
            raise NotFound(f"no {which} in session {session_id!r}")
        return ledger.receipt_from_row(row)

    # -- prompt.cancel / prompt.resolve_unknown ---------------------------

    async def cancel(self, session_id: str, admission_id: str) -> dict[str, Any]:
        """queued → terminal/cancelled; started → its turn is stopped (outcome cancelled)."""
        row = await self.receipt(session_id, admission_id, None)
        status = row["status"]
        if status == "unknown":
            raise UnknownExecution(
                f"admission {admission_id} is unknown (it was running when the previous owner "
                "stopped); settle it with prompt.resolve_unknown", admission_id=admission_id)
        place = self.rt.scheduler.cancel(session_id, admission_id) if status == "queued" \
            else None
        if place is not None:
            try:
                await self._settle(session_id, admission_id, "cancelled",
                                   "cancelled before it ran")
            except StorageUnavailable:
                # not recorded: it is still queued, so it keeps its place and runs
                # (or a retried cancel settles it)
                self.rt.scheduler.restore(session_id, admission_id, place)
                self.turns.pump()
                raise
        elif status in ("queued", "started"):
            # queued but no longer in the scheduler: it has just been handed to a turn
            if self.turns.stop(session_id, "cancelled", admission_id) is not None:
                await self.turns.wait(session_id, admission_id, CANCEL_WAIT_SECONDS)
        return await self.receipt(session_id, admission_id, None)

    async def resolve_unknown(self, session_id: str, admission_id: str) -> dict[str, Any]:
        row = await self.receipt(session_id, admission_id, None)
        if row["status"] == "unknown":
            await self._settle(session_id, admission_id, "interrupted",
                               "the owner stopped while this turn ran; resolved as interrupted")
            self.rt.scheduler.unblock(session_id, admission_id)
            self.turns.pump()
        elif row["status"] != "terminal":
            raise InvalidParams(f"admission {admission_id} is {row['status']}, not unknown")
        return await self.receipt(session_id, admission_id, None)

    async def _settle(self, session_id: str, admission_id: str, outcome: str,
                      error: str) -> None:
        rt = self.rt
        result_json = orjson.dumps({"text": "", "usage": {}, "error": error}).decode()

        def unit(tx: Tx) -> None:
            if admissions.finish(tx.conn, admission_id, outcome, result_json, tx.now):
                tx.event(session_id, "message.complete",
                         {"admission_id": admission_id, "outcome": outcome, "text": "",
                          "error": error}, admission_id)
                tx.event(session_id, "session.info", session_info_payload(rt, session_id))

        try:
            await rt.journal.write(unit)
        except StorageError as exc:
            raise storage_error(exc) from None
