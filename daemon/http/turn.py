"""One chat-completions request as a finite admission, and following it.

``open`` finds or creates the request's session and admits its prompt:

- without ``X-Tether-Session-Id``: a fresh session (source ``api``) whose
  transcript is the body's earlier messages, written in the transaction that
  creates it; with an Idempotency-Key the session's request_id is
  ``api:<token_id>:<key>`` and its digest the body's, so a retry finds it and a
  changed body is a conflict;
- with it: the stored session, the last user message appended (the body's
  history is ignored);
- with a conversation key (``X-Tether-Conversation``): the session this token's
  key names, or, the first time, a fresh one (as without a header) that the
  key names from then on, created with the mapping in one transaction.

The admission's principal is ``api:<token_id>``, its input id the key (or a
fresh one), ``finite: true`` (delegate_task joins inline), and its payload
carries the body's digest, so the ledger itself answers a retry or refuses a
changed body. ``follow`` yields the turn's text as it is committed, keep-alive
marks while nothing is said, and the terminal receipt last.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from tether.rpc.errors import AdmissionConflict, InvalidParams, NotFound
from tether.store.tables import admissions, conversations, events, messages, sessions

from ..config.core import HttpConfig
from ..ledger import rules as ledger
from ..ledger.admissions import AdmissionService
from ..ledger.events import EventBus, Viewer
from ..ledger.journal import Journal, Tx
from ..sessions.service import new_session_id
from .request import DEFAULT_MODEL, ChatRequest

__all__ = ["ApiTurns", "Opened", "Delta", "KeepAlive", "Done"]

log = logging.getLogger("tether.http")

#: the conversation key under which a client tool call's session is found: a
#: header's key has no spaces, so none can be taken for one of these
CALL_KEY = "tool call "

#: events a follower may be behind before it is told of a gap (then it polls)
FOLLOW_QUEUE = 10_000
#: how often a follower that lost events checks the receipt
POLL_SECONDS = 0.2
#: where following stops: the turn ended, or it was running when an owner died
#: (unknown: it never finishes by itself; tether resolve settles it)
SETTLED = (ledger.Status.TERMINAL.value, ledger.Status.UNKNOWN.value)
#: events that mean "working, nothing to say yet": a keep-alive goes out at once
BUSY_EVENTS = ("tool.start", "subagent.start", "delegation.dispatched")


def response_id(admission_id: str) -> str:
    """A response's id (/v1/responses) is its admission's."""
    return "resp_" + admission_id.removeprefix("adm_")


def admission_of(resp_id: str) -> str | None:
    """The admission id of a response id (None: not one of ours)."""
    tail = resp_id.removeprefix("resp_")
    return "adm_" + tail if tail != resp_id and tail.isalnum() else None


@dataclass(frozen=True)
class Opened:
    session_id: str
    admission_id: str
    receipt: dict[str, Any]  # as admitted (terminal already on a replay of a finished one)
    replayed: bool
    token_id: str = ""


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class KeepAlive:
    pass


@dataclass(frozen=True)
class Done:
    receipt: dict[str, Any]


class ApiTurns:
    def __init__(self, journal: Journal, bus: EventBus, admission_service: AdmissionService,
                 config: HttpConfig) -> None:
        self._journal = journal
        self._bus = bus
        self._admissions = admission_service
        self._config = config

    async def open(self, token_id: str, key: str | None, req: ChatRequest,
                   session_id: str | None, conversation: str | None = None) -> Opened:
        principal = f"api:{token_id}"
        input_id = key if key is not None else "http_" + secrets.token_hex(12)
        if req.tool_results and conversation is None and session_id is None:
            # the session whose turn ended with these calls, if it was ours
            session_id = await self._session_of_calls(token_id, req)
        if conversation is not None:
            session_id = await self._fresh_session(token_id, None, req, conversation)
        elif session_id is None:
            session_id = await self._fresh_session(token_id, key, req)
        else:
            await self.exists(session_id)
        if req.tool_results:
            await self._check_pending(session_id, req)
        options = {"model": req.model} if req.model != DEFAULT_MODEL else {}
        payload = ledger.canonical_payload(req.prompt, True, options,
                                           extra=req.payload_extra())
        made: list[bool] = []  # filled in the unit that inserts a new row, only
        receipt = await self._admissions.admit(principal, session_id, input_id,
                                               ledger.encode_payload(payload),
                                               extra_unit=lambda tx: made.append(True))
        # a key's every answer but the one that admitted it is a replay, however
        # close together the duplicates came
        return Opened(session_id, receipt["admission_id"], receipt, not made, token_id)

    async def _fresh_session(self, token_id: str, key: str | None, req: ChatRequest,
                             conversation: str | None = None) -> str:
        request_id = f"api:{token_id}:{key}" if key is not None else None
        new_id = new_session_id()
        title = " ".join(req.prompt.split())[:80] or "tool results"
        options = {"model": req.model} if req.model != DEFAULT_MODEL else {}
        history = req.history

        def unit(tx: Tx) -> str:
            if conversation is not None and (
                    named := conversations.get(tx.conn, token_id, conversation)) is not None:
                return named
            if request_id is not None:
                found = sessions.get_by_request(tx.conn, request_id)
                if found is not None:
                    if found["params_digest"] != req.digest:
                        raise AdmissionConflict(
                            "this Idempotency-Key was already used with a different body")
                    return str(found["session_id"])
            sessions.insert(tx.conn, session_id=new_id, request_id=request_id,
                            params_digest=req.digest, parent_session_id=None, source="api",
                            title=title, cwd=None, options=options, now=tx.now)
            messages.append(tx.conn, new_id, history, tx.now)
            if conversation is not None:
                conversations.insert(tx.conn, token_id, conversation, new_id, tx.now)
            return new_id

        return await self._journal.write(unit)

    async def _session_of_calls(self, token_id: str, req: ChatRequest) -> str | None:
        """The one session these tool results' calls came from (None: not ours)."""
        keys = [CALL_KEY + r["tool_call_id"] for r in req.tool_results]
        found = await self._journal.db.lookup(
            lambda c: {conversations.get(c, token_id, k) for k in keys})
        return found.pop() if len(found) == 1 and None not in found else None

    async def _check_pending(self, session_id: str, req: ChatRequest) -> None:
        """Tool results must answer calls the session is waiting on."""
        rows = await self._journal.db.lookup(lambda c: messages.tail(c, session_id, 64))
        answered: set[str] = set()
        pending: set[str] = set()
        for row in reversed(rows):
            if row["role"] == "tool":
                answered.add(row["tool_call_id"])
                continue
            if row["role"] == "assistant" and row["tool_calls"]:
                pending = {c["id"] for c in row["tool_calls"]} - answered
            break
        if not {r["tool_call_id"] for r in req.tool_results} <= pending:
            raise InvalidParams(f"session {session_id} is not waiting on these tool results "
                                "(tool_call_id); its last answer called no such tool")

    async def remember_calls(self, token_id: str, session_id: str,
                             calls: list[dict[str, Any]]) -> None:
        """Calls of the client's tools that ended a turn: the request that brings
        their results continues this session (``_session_of_calls``)."""
        def unit(tx: Tx) -> None:
            for call in calls:
                conversations.put(tx.conn, token_id, CALL_KEY + call["id"], session_id, tx.now)

        await self._journal.write(unit)

    async def client_calls(self, opened: Opened) -> list[dict[str, Any]]:
        """The calls of the client's tools that ended this settled turn, if any."""
        aid = opened.admission_id
        row = await self._journal.db.lookup(lambda c: admissions.get(c, aid))
        result = orjson.loads(row["result_json"]) if row and row["result_json"] else {}
        return list(result.get("tool_calls") or ())

    async def response_row(self, token_id: str, resp_id: str) -> dict[str, Any]:
        """The admission row of one of this token's responses; NotFound if there
        is none (another token's is not found either)."""
        aid = admission_of(resp_id)
        row = None if aid is None else await self._journal.db.lookup(
            lambda c: admissions.get(c, aid))
        if row is None or row["principal_id"] != f"api:{token_id}":
            raise NotFound(f"no response {resp_id!r}")
        return row

    async def session_of_response(self, token_id: str, resp_id: str) -> str:
        """The session a previous response ran in (``previous_response_id``)."""
        return str((await self.response_row(token_id, resp_id))["target_session_id"])

    async def cancel_admission(self, row: dict[str, Any]) -> None:
        """Stop a response's turn (``POST /v1/responses/{id}/cancel``); a settled
        one stays as it is."""
        await self._admissions.cancel(row["target_session_id"], row["admission_id"])

    async def exists(self, session_id: str) -> None:
        found = await self._journal.db.lookup(lambda c: sessions.get(c, session_id))
        if found is None:
            raise NotFound(f"no session {session_id!r}")

    async def side_effects(self, opened: Opened) -> bool:
        """Whether the turn did anything besides talking: ran a tool, started a child."""
        sid, aid = opened.session_id, opened.admission_id
        return bool(await self._journal.db.lookup(
            lambda c: events.of_admission(c, sid, aid, BUSY_EVENTS)))

    async def receipt(self, opened: Opened) -> dict[str, Any]:
        return await self._admissions.receipt(opened.session_id, opened.admission_id, None)

    async def cancel(self, opened: Opened) -> None:
        """Stop the turn nobody can fetch any more (its client went away)."""
        await self._admissions.cancel(opened.session_id, opened.admission_id)

    async def cancel_quietly(self, opened: Opened) -> None:
        """``cancel``, for a client that is gone: nobody to tell if it fails (the
        turn may have ended meanwhile, or the store may be failing)."""
        try:
            await self.cancel(opened)
        except Exception as exc:  # noqa: BLE001 - logged, and nobody else to tell
            log.info("could not cancel %s: %s", opened.admission_id, exc)

    async def follow(self, opened: Opened) -> AsyncIterator[Delta | KeepAlive | Done]:
        """The turn's text as it is committed, then its terminal receipt."""
        if opened.receipt["status"] in SETTLED:
            yield Done(opened.receipt)
            return
        sid = opened.session_id
        viewer = Viewer(FOLLOW_QUEUE, 1)
        bus = self._bus
        bus.subscribe(viewer, sid)
        try:
            last = await self._journal.db.lookup(lambda c: events.last_seq(c, sid))
            bus.activate(viewer, sid, last)
            receipt = await self.receipt(opened)
            if receipt["status"] in SETTLED:
                yield Done(receipt)
                return
            async for piece in self._events(viewer, opened):
                yield piece
        finally:
            bus.drop_viewer(viewer)
            viewer.close()

    async def _events(self, viewer: Viewer,
                      opened: Opened) -> AsyncIterator[Delta | KeepAlive | Done]:
        aid = opened.admission_id
        while True:
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a
                # cancellation that lands as the frame arrives, and a follower whose
                # client left must stop
                async with asyncio.timeout(self._config.keepalive_seconds):
                    frame = await viewer.next_frame()
            except TimeoutError:
                yield KeepAlive()
                continue
            ev = orjson.loads(frame)["params"]
            kind = ev["type"]
            if kind == "session.replay_gap":
                async for piece in self._poll(opened):
                    yield piece
                return
            if ev.get("admission_id") != aid:
                continue
            if kind == "message.delta":
                yield Delta(ev["payload"]["text"])
            elif kind in BUSY_EVENTS:
                yield KeepAlive()
            elif kind == "message.complete":
                yield Done(await self.receipt(opened))
                return

    async def _poll(self, opened: Opened) -> AsyncIterator[KeepAlive | Done]:
        """Until terminal, when events were lost (the follower fell far behind)."""
        waited = 0.0
        while (receipt := await self.receipt(opened))["status"] not in SETTLED:
            await asyncio.sleep(POLL_SECONDS)
            waited += POLL_SECONDS
            if waited >= self._config.keepalive_seconds:
                waited = 0.0
                yield KeepAlive()
        yield Done(receipt)
