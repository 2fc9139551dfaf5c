"""The agent's progress, written down: events and transcript rows through the journal.

An `EventSink` is what the agent loop reports to (the ``AgentSink`` protocol of
agent.py) for one session: text deltas, tool progress, new transcript
messages. Writes are queued in call order, so the session's events keep the
order the agent produced them in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson

from tether.rpc.previews import preview
from tether.store import StorageError
from tether.store.tables import messages

from ..ledger.journal import Journal, Unit, outage_error, retry_delay

log = logging.getLogger("tether.sink")

__all__ = ["EventSink", "DELTA_SECONDS", "DELTA_CHARS"]

#: tool results shown in tool.complete events are cut to this many characters
EVENT_RESULT_CHARS = 2000
#: tool.start's subject and tool.complete's summary are cut to this many characters
SUBJECT_CHARS = 500


def _object(text: str) -> dict[str, Any]:
    """``text`` as a JSON object, or {} if it is not one."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}

#: deltas are coalesced into one event per this many seconds or characters
DELTA_SECONDS = 0.05
DELTA_CHARS = 2048


class EventSink:
    """AgentSink that writes a session's events and transcript through the journal.

    Deltas are coalesced: held for at most DELTA_SECONDS or DELTA_CHARS, and
    always flushed before any other event so order is preserved.

    Writes reach the store in the order they were made: a batch of them (all
    made since the last batch was sent) is submitted at once, the next only
    when it has landed. A batch the store refuses for a transient reason
    (`StorageError.transient`: the database restarting, a lost connection, a
    lock, a full disk) is sent again, backing off, ahead of what came after
    it, until it lands or the journal's ``outage_seconds`` have passed since
    the first refusal; then this write and every later one fail with
    `outage_error`, which names the database. An awaited write (an event, a
    transcript row) waits meanwhile, so the agent goes on only once what it
    reported is stored.
    """

    def __init__(self, journal: Journal, session_id: str, admission_id: str | None, *,
                 durable: bool = False, give_up: Callable[[], bool] = lambda: False) -> None:
        self._journal = journal
        # durable: a write the store refuses is kept, in order, and written again
        # until the store takes it, with no deadline; the run does not wait for it
        # (a child's answer is its parent's result; see delegation/children.py)
        self._durable = durable
        # checked at each refusal: True stops riding out the store (the owner drains)
        self._give_up = give_up
        self.session_id = session_id
        self.admission_id = admission_id
        self._buf: list[str] = []
        self._buf_kind = "message.delta"
        self._chars = 0
        self._timer: asyncio.TimerHandle | None = None
        # writes not yet sent, in order; the batch in flight; the pending resend
        self._backlog: list[tuple[Unit[Any], asyncio.Future[Any]]] = []
        self._inflight: list[tuple[Unit[Any], asyncio.Future[Any]]] = []
        self._resend: asyncio.TimerHandle | None = None
        self._refusals = 0
        self._outage_since: float | None = None  # first refusal of the current outage
        self._broken: StorageError | None = None  # past the deadline: every write fails
        self._stalled: asyncio.Future[None] | None = None  # durable writers wait on it
        self._idle = asyncio.Event()
        self._idle.set()
        self._error: BaseException | None = None  # first failed write
        self.streamed: list[str] = []  # every delta, for the final text of a failed stream

    def _queue(self, fn: Unit[Any]) -> asyncio.Future[Any]:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.add_done_callback(self._observed)
        self._backlog.append((fn, done))
        self._idle.clear()
        self._send()
        return done

    def _send(self) -> None:
        """Submit the backlog as one batch, unless a batch is in flight or waits."""
        if self._inflight or self._resend is not None:
            return
        if not self._backlog:
            self._idle.set()
            return
        batch, self._backlog = self._backlog, []
        if self._broken is not None:
            for _fn, done in batch:
                _fail(done, self._broken)
            self._idle.set()
            return
        self._inflight = batch
        sent: list[asyncio.Future[Any]] = []
        for fn, _done in batch:
            try:
                sent.append(self._journal.submit(fn))
            except StorageError as exc:  # the store is closed: this one fails at once
                refused: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                refused.set_exception(exc)
                sent.append(refused)
        asyncio.gather(*sent, return_exceptions=True).add_done_callback(self._landed)

    def _landed(self, gathered: asyncio.Future[list[Any]]) -> None:
        batch, self._inflight = self._inflight, []
        again: list[tuple[Unit[Any], asyncio.Future[Any]]] = []
        last: StorageError | None = None
        for (fn, done), value in zip(batch, gathered.result(), strict=True):
            if not isinstance(value, BaseException):
                if not done.done():
                    done.set_result(value)
            elif (isinstance(value, StorageError) and value.transient and not value.ambiguous
                  and not self._give_up()):
                again.append((fn, done))
                last = value
            else:
                _fail(done, value)
        if last is None:
            self._refusals, self._outage_since = 0, None
            self._send()
            return
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
            log.warning("session %s: the store refused its writes (%s); retrying for up to "
                        "%g s", self.session_id, last.detail, self._journal.outage_seconds)
        if self._stalled is not None and not self._stalled.done():
            self._stalled.set_result(None)
        if not self._durable and now - self._outage_since >= self._journal.outage_seconds:
            self._broken = outage_error(self._journal.db, self._journal.outage_seconds, last)
            log.error("session %s: %s", self.session_id, self._broken.detail)
            for _fn, done in again + self._backlog:
                _fail(done, self._broken)
            self._backlog = []
            self._send()
            return
        self._backlog = again + self._backlog
        self._refusals += 1
        delay = retry_delay(self._refusals - 1)
        self._resend = asyncio.get_running_loop().call_later(delay, self._resend_now)

    def _resend_now(self) -> None:
        self._resend = None
        self._send()

    def _observed(self, done: asyncio.Future[Any]) -> None:
        if done.cancelled() or (error := done.exception()) is None:
            return
        if self._error is None:
            self._error = error

    async def _write(self, fn: Unit[Any]) -> None:
        """Queue ``fn`` and wait until it is stored (raising what it failed with).
        A durable sink waits only until it is stored or the store starts refusing:
        then it is kept in order and written later."""
        done = self._queue(fn)
        if not self._durable:
            await asyncio.shield(done)
            return
        if self._outage_since is None:
            if self._stalled is None or self._stalled.done():
                self._stalled = asyncio.get_running_loop().create_future()
            await asyncio.wait([done, self._stalled], return_when=asyncio.FIRST_COMPLETED)
        if done.done() and not done.cancelled() and done.exception() is not None:
            raise done.exception()  # type: ignore[misc]

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buf:
            return
        text, kind = "".join(self._buf), self._buf_kind
        self._buf.clear()
        self._chars = 0
        sid, aid = self.session_id, self.admission_id
        self._queue(lambda tx: tx.event(sid, kind, {"text": text}, aid))

    async def _buffer(self, kind: str, text: str) -> None:
        if not text:
            return
        if self._buf and kind != self._buf_kind:
            self.flush()
        self._buf_kind = kind
        self._buf.append(text)
        self._chars += len(text)
        if self._chars >= DELTA_CHARS:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(DELTA_SECONDS, self.flush)

    async def delta(self, text: str) -> None:
        self.streamed.append(text)
        await self._buffer("message.delta", text)

    async def reasoning(self, text: str) -> None:
        await self._buffer("reasoning.delta", text)

    async def event(self, type_: str, payload: dict[str, Any]) -> None:
        self.flush()
        sid, aid = self.session_id, self.admission_id
        await self._write(lambda tx: tx.event(sid, type_, payload, aid))

    async def record(self, new: list[dict[str, Any]]) -> None:
        self.flush()
        sid, aid = self.session_id, self.admission_id
        rows = [{**m, "admission_id": aid} for m in new]
        await self._write(lambda tx: messages.append(tx.conn, sid, rows, tx.now))

    async def tool_start(self, call_id: str, name: str, arguments: str) -> None:
        payload = {"call_id": call_id, "name": name, "arguments": arguments}
        # what the call acts on, for viewers: the command, or the path
        args = _object(arguments)
        subject = args.get("command") or args.get("path") or args.get("pattern")
        if isinstance(subject, str):
            payload["subject"] = subject[:SUBJECT_CHARS]
        await self.event("tool.start", payload)

    async def tool_complete(self, call_id: str, name: str, result: str,
                            error: str | None) -> None:
        payload: dict[str, Any] = {"call_id": call_id, "name": name,
                                   "result": result[:EVENT_RESULT_CHARS]}
        if error:
            payload["error"] = error
        obj = _object(result)
        summary = obj.get("summary")  # a tool's own one-line account
        if isinstance(summary, str):
            payload["summary"] = summary[:SUBJECT_CHARS]
        if shown := preview(obj):
            payload["preview"] = shown
        await self.event("tool.complete", payload)

    async def settle(self) -> None:
        """Flush and wait until every write was stored or failed; raises the first
        failure (a durable sink waits until the store took every one)."""
        self.flush()
        await self._idle.wait()
        if self._error is not None:
            raise self._error


def _fail(done: asyncio.Future[Any], error: BaseException) -> None:
    if not done.done():
        done.set_exception(error)
