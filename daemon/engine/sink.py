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
from typing import Any, TypeVar

import orjson

from tether.rpc.previews import preview
from tether.store import StorageError
from tether.store.tables import messages

from ..ledger.journal import Journal, Tx, Unit, outage_error, retry_delay

log = logging.getLogger("tether.sink")

__all__ = ["EventSink", "Unfinished", "DELTA_SECONDS", "DELTA_CHARS"]

T = TypeVar("T")

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
                 durable: bool = False, give_up: Callable[[], bool] = lambda: False,
                 hold_answer: bool = False) -> None:
        self._journal = journal
        # hold_answer: the final answer's transcript row is not written alone but with
        # the turn's outcome, in one unit (`finish`); so is what is still unsent then
        self._hold = hold_answer
        self._held: list[dict[str, Any]] | None = None
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
        # set whenever a batch lands or a resend goes out (`_quiet` waits on it)
        self._moved = asyncio.Event()
        self._error: BaseException | None = None  # first failed write
        self.streamed: list[str] = []  # every delta, for the final text of a failed stream

    def _queue(self, fn: Unit[Any], send: bool = True) -> asyncio.Future[Any]:
        """Add ``fn`` to the backlog; with ``send``, send the backlog now if nothing
        is in flight. A write that follows at once queues without sending, so the
        two go in one batch (one commit)."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.add_done_callback(self._observed)
        self._backlog.append((fn, done))
        self._idle.clear()
        if send:
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
        self._moved.set()
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
        self._moved.set()
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

    def flush(self, send: bool = True) -> None:
        """Queue the coalesced deltas as one event; ``send=False`` when a write is
        queued right after (it carries them along)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buf:
            return
        text, kind = "".join(self._buf), self._buf_kind
        self._buf.clear()
        self._chars = 0
        sid, aid = self.session_id, self.admission_id
        self._queue(lambda tx: tx.event(sid, kind, {"text": text}, aid), send)

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
        self.flush(send=False)
        sid, aid = self.session_id, self.admission_id
        await self._write(lambda tx: tx.event(sid, type_, payload, aid))

    async def record(self, new: list[dict[str, Any]], final: bool = False) -> None:
        """Write transcript rows. ``final`` marks the answer that ends the run: a
        sink that holds the answer keeps it for `finish` instead (not yet stored)."""
        self.flush(send=False)
        sid, aid = self.session_id, self.admission_id
        rows = [{**m, "admission_id": aid} for m in new]
        if final and self._hold:
            self._held = (self._held or []) + rows
            return
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
        failure (a durable sink waits until the store took every one). A held
        answer is written now, as any other row."""
        if self._held is not None:
            rows, self._held = self._held, None
            sid = self.session_id
            self._queue(lambda tx: messages.append(tx.conn, sid, rows, tx.now), send=False)
        self.flush(send=False)
        self._send()
        await self._idle.wait()
        if self._error is not None:
            raise self._error

    async def reported(self) -> None:
        """Wait until what the run reported is stored, or held for the outcome;
        raises the first failed write. A sink that holds the answer waits only for
        the batch in flight: what is unsent goes with the outcome (`finish`)."""
        if not self._hold:
            await self.settle()
            return
        self.flush(send=False)
        await self._quiet()
        if self._error is not None:
            raise self._error

    async def _quiet(self) -> None:
        """Until no batch is in flight and none waits to be sent again."""
        while self._inflight or self._resend is not None:
            self._moved.clear()
            await self._moved.wait()

    async def finish(self, make: Callable[[list[dict[str, Any]] | None], Unit[T]]) -> T:
        """The run's last writes and its outcome in one unit, one commit: what is
        still unsent (coalesced deltas), then ``make(held)``, the outcome's unit
        given the held answer's rows (it writes them, or nothing if the outcome is
        not recorded). Raises `Unfinished` with the held rows if that unit was not
        stored; the unsent writes are then back in the sink, in order, and a
        caller settles them before it writes the outcome by itself."""
        self.flush(send=False)
        await self._quiet()
        held, self._held = self._held, None
        pending, self._backlog = self._backlog, []
        outcome = make(held)
        if self._broken is not None:
            self._backlog = pending
            raise Unfinished(held, self._broken)

        def unit(tx: Tx) -> T:
            for fn, _done in pending:
                fn(tx)
            return outcome(tx)

        try:
            value = await self._journal.write(unit)
        except StorageError as exc:
            if exc.ambiguous:  # it may have been stored: none of it is written again
                for _fn, done in pending:
                    _fail(done, exc)
            else:
                self._backlog = pending + self._backlog
            raise Unfinished(held, exc) from exc
        except BaseException as exc:  # a unit's own failure (Fenced, a bug)
            self._held = held
            for _fn, done in pending:
                _fail(done, exc)
            self._send()
            raise
        for _fn, done in pending:
            if not done.done():
                done.set_result(None)
        if not self._backlog and not self._inflight:
            self._idle.set()
        return value


class Unfinished(Exception):
    """`EventSink.finish`'s unit was not stored (``error`` says why); ``held`` are
    the answer's rows the outcome still has to write."""

    def __init__(self, held: list[dict[str, Any]] | None, error: StorageError) -> None:
        super().__init__(error.detail)
        self.held = held
        self.error = error


def _fail(done: asyncio.Future[Any], error: BaseException) -> None:
    if not done.done():
        done.set_exception(error)
