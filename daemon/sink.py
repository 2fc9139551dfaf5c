"""The agent's progress, written down: events and transcript rows through the journal.

An `EventSink` is what the agent loop reports to (the ``AgentSink`` protocol of
agent.py) for one session: text deltas, tool progress, new transcript
messages. Writes are queued in call order, so the session's events keep the
order the agent produced them in.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson

from tether.rpc.previews import preview
from tether.store import StorageError, messages

from .journal import Journal, Unit

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
    """

    def __init__(self, journal: Journal, session_id: str, admission_id: str | None, *,
                 durable: bool = False) -> None:
        self._journal = journal
        # durable: a write the store refuses is written again on settle() until the
        # store takes it, instead of failing the run (a child's answer is its
        # parent's result; see delegation/children.py)
        self._durable = durable
        self._refused: list[Unit[Any]] = []
        self.session_id = session_id
        self.admission_id = admission_id
        self._buf: list[str] = []
        self._buf_kind = "message.delta"
        self._chars = 0
        self._timer: asyncio.TimerHandle | None = None
        self._pending: list[asyncio.Future[Any]] = []
        self._error: BaseException | None = None  # first failed write
        self.streamed: list[str] = []  # every delta, for the final text of a failed stream

    def _queue(self, fn: Unit[Any]) -> asyncio.Future[Any]:
        fut = self._journal.submit(fn)
        self._pending.append(fut)
        fut.add_done_callback(lambda f: self._written(f, fn))
        return fut

    async def _write(self, fn: Unit[Any]) -> None:
        """Queue ``fn`` and wait for its commit (a durable sink's refused write is
        kept for settle() instead of failing the caller)."""
        try:
            await asyncio.shield(self._queue(fn))
        except StorageError:
            if not self._durable:
                raise

    def _written(self, fut: asyncio.Future[Any], fn: Unit[Any]) -> None:
        try:
            self._pending.remove(fut)
        except ValueError:
            pass
        if fut.cancelled() or (error := fut.exception()) is None:
            return
        if self._durable and isinstance(error, StorageError):
            self._refused.append(fn)
        elif self._error is None:
            self._error = error

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
        """Flush and wait for every queued write; raises the first storage error (a
        durable sink writes refused ones again, in order, until the store heals)."""
        self.flush()
        for fut in list(self._pending):
            with contextlib.suppress(Exception):
                await asyncio.shield(fut)
        while self._refused:
            await self._journal.persist(self._refused.pop(0),
                                        f"the progress of session {self.session_id}")
        if self._error is not None:
            raise self._error
