"""The approval service: prompts as durable rows, answered by any viewer, exactly once.

``check`` runs the policy (policy.py); when it says ``ask``, it writes a
``pending`` row with ``approval.requested`` (and ``session.info`` naming the
prompt the turn awaits) in one commit, then waits for the first of:

- an answer (``respond``, from any connection): the row is resolved in one
  conditional update, so of two answers at once exactly one wins; the other is
  told ``already_resolved``. ``session`` and ``always`` also store a rule
  (``approval_rules``) in that same commit;
- the timeout (``approvals.timeout_seconds``): ``expired``, and the model is
  told that silence is not consent;
- the turn being stopped (interrupt, cancel, owner shutdown): ``cancelled``,
  cause ``interrupted`` or ``shutdown``; the cancellation goes on up.

Every resolution writes ``approval.resolved`` to the session's viewers. At
start-up ``recover`` cancels every row still pending: its turn died with the
previous owner, so nobody waits for the answer, and what it asked never ran.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

from tether.rpc.errors import InvalidParams, NotFound
from tether.store import StorageError
from tether.store.tables import approvals as rows

from ..config.core import ApprovalsConfig
from ..ledger.journal import Journal, Tx, ride_out
from ..ledger.scheduler import Scheduler
from ..runtime.supervisor import Supervisor
from .policy import Decision, Request, Rule, Verdict, decide, exact_pattern, parse_rule

__all__ = ["ApprovalService", "ApprovalCall", "public"]

log = logging.getLogger("tether.approvals")

_STATUS = {"once": "approved", "session": "approved", "always": "approved", "deny": "denied"}



class _Withdrawn(Exception):
    """An answer's unit found its prompt's turn gone: the unit rolls back alone."""

class ApprovalCall:
    """Who asks: the tool call, its session and turn, and whether a person can answer."""

    __slots__ = ("session_id", "admission_id", "call_id", "tool", "cwd", "attended")

    def __init__(self, session_id: str, admission_id: str | None, call_id: str, tool: str,
                 cwd: str | None, attended: bool) -> None:
        self.session_id = session_id
        self.admission_id = admission_id
        self.call_id = call_id
        self.tool = tool
        self.cwd = cwd
        self.attended = attended


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A prompt row as the wire shows it (rpc ApprovalPrompt)."""
    return {k: row[k] for k in ("approval_id", "session_id", "admission_id", "call_id", "tool",
                                "kind", "subject", "why", "cwd", "status", "decision",
                                "cause", "answered_by", "reason", "created_at", "expires_at",
                                "resolved_at")}


class ApprovalService:
    def __init__(self, journal: Journal, scheduler: Scheduler, supervisor: Supervisor,
                 config: ApprovalsConfig, *, epoch: int,
                 private: tuple[str, ...] = ()) -> None:
        self._journal = journal
        self._scheduler = scheduler
        self._supervisor = supervisor
        self._config = config
        self._epoch = epoch
        #: paths no command may read unasked (the owner's home): Request.private
        self._private = private
        self._allow = [parse_rule(r) for r in config.allow]
        self._deny = [parse_rule(r) for r in config.deny]
        #: approval_id → the future its waiting tool call awaits: (decision, reason)
        self._waiting: dict[str, asyncio.Future[tuple[str, str | None]]] = {}

    # -- deciding ---------------------------------------------------------

    async def _decide(self, call: ApprovalCall, kind: str, subject: str, sandbox: str,
                      escalate: bool) -> Decision:
        stored = await self._journal.db.read(lambda c: rows.rules_for(c, call.session_id))
        allow = self._allow + [Rule(r["kind"], r["pattern"],
                                    "session" if r["session_id"] else "always", r["rule_id"])
                               for r in stored]
        req = Request(kind, subject, call.cwd, call.attended,  # type: ignore[arg-type]
                      sandbox=sandbox, escalate=escalate, private=self._private)
        # parsing a long hostile line can take a good part of a second: off the loop
        return await asyncio.to_thread(
            decide, req, mode=self._config.mode, unattended=self._config.unattended,
            allow=allow, deny=self._deny)

    async def check(self, call: ApprovalCall, kind: str, subject: str, *,
                    sandbox: str = "none", escalate: bool = False,
                    reason: str | None = None) -> Verdict:
        """May ``call`` run ``subject`` (a command, in ``sandbox``; outside it when it
        asks to ``escalate``, for the model's ``reason``) / write it (a path)? Asks a
        person when the policy says so, and waits; CancelledError if the turn is
        stopped."""
        # an escalation asks a person (ask, auto) and is denied unattended: the policy's
        decision = await self._decide(call, kind, subject, sandbox, escalate)
        if decision.action == "allow":
            return Verdict(True, decision.reason)
        if decision.action == "deny":
            return Verdict(False, decision.reason)
        why = decision.reason
        if escalate:
            said = " ".join((reason or "").split())[:500]
            # first: a prompt shown shortened still says what is asked, and why
            why = f"to run OUTSIDE the sandbox (escalation); the model says: {said} — {why}"
        return await self._ask(call, kind, subject, why)

    async def _ask(self, call: ApprovalCall, kind: str, subject: str, why: str) -> Verdict:
        approval_id = "apr_" + secrets.token_hex(10)
        timeout = self._config.timeout_seconds
        sid, epoch, scheduler = call.session_id, self._epoch, self._scheduler

        def unit(tx: Tx) -> None:
            rows.insert(tx.conn, approval_id=approval_id, session_id=sid,
                        admission_id=call.admission_id, call_id=call.call_id, tool=call.tool,
                        kind=kind, subject=subject, why=why, cwd=call.cwd, owner_epoch=epoch,
                        now=tx.now, expires_at=tx.now + timeout)
            tx.event(sid, "approval.requested", {
                "approval_id": approval_id, "call_id": call.call_id, "tool": call.tool,
                "kind": kind, "subject": subject, "why": why, "cwd": call.cwd,
                "choices": ["once", "session", "always", "deny"],
                "expires_at": tx.now + timeout}, call.admission_id)
            tx.event(sid, "session.info", {**scheduler.view(sid),
                                           "awaiting_approval": approval_id})

        fut: asyncio.Future[tuple[str, str | None]] = asyncio.get_running_loop().create_future()
        self._waiting[approval_id] = fut
        try:
            # a store that blinks is ridden out, as the turn's own writes are
            await ride_out(self._journal, lambda: self._journal.write(unit),
                           f"record approval prompt {approval_id}",
                           give_up=lambda: self._supervisor.draining)
            try:
                decision, reason = await asyncio.wait_for(asyncio.shield(fut), timeout)
            except TimeoutError:
                decision, reason = await self._expire(call, approval_id)
        except asyncio.CancelledError:
            cause = "shutdown" if self._supervisor.draining else "interrupted"
            # queued, not awaited: the turn is being stopped; a write that still fails
            # leaves the row pending, and the next owner's recovery cancels it
            self._journal.submit(lambda tx: self._resolve_unit(
                tx, approval_id, sid, call.admission_id, "cancelled", cause, None, None, None))
            raise
        finally:
            self._waiting.pop(approval_id, None)
        if decision == "deny":
            text = f"denied by the user{': ' + reason if reason else ''}"
            return Verdict(False, text, approval_id)
        if decision == "expired":
            return Verdict(False, f"denied: nobody answered the approval prompt within "
                                  f"{timeout:g} s (silence is not consent); do not retry it "
                                  "unless the user asks", approval_id)
        return Verdict(True, f"approved by the user ({decision})", approval_id)

    async def _expire(self, call: ApprovalCall, approval_id: str) -> tuple[str, str | None]:
        sid, aid = call.session_id, call.admission_id

        def unit(tx: Tx) -> tuple[str, str | None]:
            if self._resolve_unit(tx, approval_id, sid, aid, "expired", "timeout", None, None,
                                  None):
                return "expired", None
            # an answer won the race with the deadline: it counts
            row = rows.get(tx.conn, approval_id) or {}
            return row.get("decision") or "expired", row.get("reason")

        return await self._journal.persist(unit, f"the timeout of approval {approval_id}")

    def _resolve_unit(self, tx: Tx, approval_id: str, session_id: str,
                      admission_id: str | None, status: str, cause: str,
                      decision: str | None, answered_by: str | None,
                      reason: str | None) -> bool:
        if not rows.resolve(tx.conn, approval_id, status=status, cause=cause,
                            decision=decision, answered_by=answered_by, reason=reason,
                            now=tx.now):
            return False
        tx.event(session_id, "approval.resolved", {
            "approval_id": approval_id, "status": status, "decision": decision,
            "cause": cause, "reason": reason}, admission_id)
        tx.event(session_id, "session.info", {**self._scheduler.view(session_id),
                                              "awaiting_approval": None})
        return True

    # -- answering --------------------------------------------------------

    async def respond(self, session_id: str, approval_id: str, decision: str,
                      reason: str | None, answered_by: str) -> dict[str, Any]:
        """The first answer resolves the prompt; a later one is told so
        (``status: already_resolved`` and how it was resolved)."""
        def unit(tx: Tx) -> dict[str, Any]:
            row = rows.get(tx.conn, approval_id)
            if row is None or row["session_id"] != session_id:
                raise NotFound(f"no approval {approval_id!r} in session {session_id!r}",
                               approval_id=approval_id, session_id=session_id)
            if row["status"] != "pending" or approval_id not in self._waiting:
                return {"status": "already_resolved", "approval": public(row)}
            if decision in ("session", "always"):
                rows.add_rule(tx.conn, rule_id="rul_" + secrets.token_hex(8),
                              kind=row["kind"], pattern=_rule_pattern(row),
                              session_id=session_id if decision == "session" else "",
                              approval_id=approval_id, now=tx.now)
            self._resolve_unit(tx, approval_id, session_id, row["admission_id"],
                               _STATUS[decision], "answered", decision, answered_by, reason)
            resolved = rows.get(tx.conn, approval_id) or row
            if approval_id not in self._waiting:
                # the turn that asked ended while this unit waited for the store (on
                # PostgreSQL the loop runs meanwhile): nothing is approved for it
                raise _Withdrawn
            return {"status": "resolved", "approval": public(resolved)}

        try:
            out = await self._journal.write(unit)
        except _Withdrawn:
            now = await self._journal.db.read(lambda c: rows.get(c, approval_id))
            if now is None:
                raise NotFound(f"no approval {approval_id!r} in session {session_id!r}",
                               approval_id=approval_id, session_id=session_id) from None
            return {"status": "already_resolved", "approval": public(now)}
        fut = self._waiting.get(approval_id)
        if out["status"] == "resolved" and fut is not None and not fut.done():
            fut.set_result((decision, reason))
        return out

    # -- listing, rules, recovery -----------------------------------------

    async def pending(self, session_id: str | None) -> list[dict[str, Any]]:
        found = await self._journal.db.read(lambda c: rows.pending(c, session_id))
        return [public(r) for r in found]

    async def rules(self) -> list[dict[str, Any]]:
        stored = await self._journal.db.read(rows.all_rules)
        out = [{"rule_id": None, "kind": r.kind, "pattern": r.pattern, "effect": effect,
                "session_id": None, "source": "config", "created_at": None}
               for effect, rules in (("allow", self._allow), ("deny", self._deny))
               for r in rules]
        out += [{"rule_id": r["rule_id"], "kind": r["kind"], "pattern": r["pattern"],
                 "effect": "allow", "session_id": r["session_id"] or None,
                 "source": "session" if r["session_id"] else "always",
                 "created_at": r["created_at"]} for r in stored]
        return out

    async def remove_rule(self, rule_id: str) -> bool:
        if not rule_id.startswith("rul_"):
            raise InvalidParams(f"{rule_id!r} is not a stored rule id (config rules are "
                                "removed from config.yaml)")
        return await self._journal.write(lambda tx: rows.remove_rule(tx.conn, rule_id))

    async def recover(self, dead_epoch: int | None = None) -> None:
        """Cancel the prompts a previous owner (in a fleet: the dead node of
        ``dead_epoch``) left pending (their turns died with it)."""
        def unit(tx: Tx) -> int:
            cancelled = rows.cancel_pending(tx.conn, "shutdown", tx.now, dead_epoch)
            for r in cancelled:
                tx.event(r["session_id"], "approval.resolved", {
                    "approval_id": r["approval_id"], "status": "cancelled",
                    "decision": None, "cause": "shutdown",
                    "reason": "the owner stopped while the prompt was pending"},
                    r["admission_id"])
            return len(cancelled)

        try:
            n = await self._journal.persist(unit, "the recovery of approval prompts")
        except StorageError as exc:  # pragma: no cover - persist retries until it heals
            log.error("could not recover approval prompts: %s", exc.detail)
            return
        if n:
            log.info("cancelled %d approval prompt(s) left pending by the previous owner", n)


def _rule_pattern(row: dict[str, Any]) -> str:
    """What a remembered answer allows: exactly this command, or this path."""
    return exact_pattern(row["subject"] if row["kind"] == "file"
                         else " ".join(row["subject"].split()))


