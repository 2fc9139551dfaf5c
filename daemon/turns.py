"""The turn runner: takes admissions from the scheduler and runs each as a turn.

A turn is: mark the admission started (with its user message and
``message.start``) in one commit, run the agent loop with a sink that turns its
progress into events and transcript rows, then record the terminal outcome
with ``message.complete`` in one commit. Whatever happens in between (provider
failure, interrupt, owner shutdown), the admission ends terminal; only a crash
leaves it ``started``, which the next owner turns into ``unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tether.store import StorageError, admissions, messages, sessions

from .agent import AgentResult, run_agent
from .events import Tx
from .ledger import TURN_OPTION_KEY
from .resolve import ResolveError, TurnSettings, build_provider, resolve_turn
from .runtime import Runtime
from .tools import ToolCallContext, tools_for

__all__ = ["TurnRunner", "EventSink", "chat_history", "session_info_payload"]

log = logging.getLogger("tether.turns")

#: deltas are coalesced into one event per this many seconds or characters
DELTA_SECONDS = 0.05
DELTA_CHARS = 2048
#: storage retries of a turn's start and outcome back off up to this many seconds
RETRY_MAX_SECONDS = 2.0
#: while the owner drains, a failing outcome write is given up after this many tries
FINISH_ATTEMPTS_WHILE_DRAINING = 5
RULES_FILES = ("AGENTS.md", ".tether/rules.md")
RULES_MAX_BYTES = 64 * 1024

SYSTEM_PROMPT = (
    "You are an agent running inside tether, a persistent session daemon. "
    "Answer the user's request. Use delegate_task to hand independent pieces of work "
    "to helper agents when that helps; their results come back to you as tool results "
    "(or, for background delegations, as a later message)."
)


#: the reply given to the model for a tool call whose turn ended before it returned
UNFINISHED_TOOL_CALL = orjson.dumps({"error": (
    "this tool call never returned: its turn was stopped (interrupted, cancelled or the "
    "owner crashed) before it finished")}).decode()


def chat_history(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Transcript rows → chat-completions messages.

    A turn stopped inside a tool call (crash, interrupt) leaves an assistant
    ``tool_calls`` message with no ``role=tool`` reply; OpenAI-compatible servers
    refuse such a history (400), which would fail every later turn of the
    session. Each unanswered call gets a synthetic error reply here, so the
    stored transcript stays exactly what happened.
    """
    out: list[dict[str, Any]] = []
    unanswered: list[tuple[str, str | None]] = []  # (call id, tool name)

    def close_calls() -> None:
        for call_id, name in unanswered:
            reply = {"role": "tool", "tool_call_id": call_id, "content": UNFINISHED_TOOL_CALL}
            if name:
                reply["name"] = name
            out.append(reply)
        unanswered.clear()

    for r in rows:
        if r["role"] != "tool":
            close_calls()
        m: dict[str, Any] = {"role": r["role"], "content": r["content"]}
        if r.get("tool_calls"):
            m["tool_calls"] = r["tool_calls"]
            unanswered.extend((c.get("id"), (c.get("function") or {}).get("name"))
                              for c in r["tool_calls"])
        if r.get("tool_call_id"):
            m["tool_call_id"] = r["tool_call_id"]
            unanswered[:] = [u for u in unanswered if u[0] != r["tool_call_id"]]
        if r.get("name") and r["role"] == "tool":
            m["name"] = r["name"]
        out.append(m)
    close_calls()
    return out


def user_text(payload: dict[str, Any]) -> str:
    """The user message of an admission: its text plus any text attachments."""
    text = payload["text"]
    for a in payload.get("attachments") or ():
        text += f"\n\n[attachment {a['name']} ({a.get('mime_type', 'text/plain')})]\n{a['content']}"
    return text


def rules_message(cwd: str | None) -> dict[str, Any] | None:
    """Project rules (AGENTS.md) from the session's cwd, unless ignore_rules."""
    if not cwd:
        return None
    for name in RULES_FILES:
        path = Path(cwd) / name
        try:
            with path.open("rb") as f:
                text = f.read(RULES_MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        return {"role": "system", "content": f"Project rules from {path}:\n{text}"}
    return None


def session_info_payload(rt: Runtime, session_id: str) -> dict[str, Any]:
    """The session's pending admissions (queued ones, then those being admitted)
    and its running one."""
    pending = rt.scheduler.queued(session_id) + rt.admitting.get(session_id, [])
    return {"pending": pending, "running": rt.scheduler.running.get(session_id)}


class EventSink:
    """AgentSink that writes a session's events and transcript through the journal.

    Deltas are coalesced: held for at most DELTA_SECONDS or DELTA_CHARS, and
    always flushed before any other event so order is preserved.
    """

    def __init__(self, rt: Runtime, session_id: str, admission_id: str | None) -> None:
        self.rt = rt
        self.session_id = session_id
        self.admission_id = admission_id
        self._buf: list[str] = []
        self._buf_kind = "message.delta"
        self._chars = 0
        self._timer: asyncio.TimerHandle | None = None
        self._pending: list[asyncio.Future[Any]] = []
        self._error: BaseException | None = None  # first failed write
        self.streamed: list[str] = []  # every delta, for the final text of a failed stream

    def _queue(self, fn: Any) -> asyncio.Future[Any]:
        fut = self.rt.journal.submit(fn)
        self._pending.append(fut)
        fut.add_done_callback(self._written)
        return fut

    def _written(self, fut: asyncio.Future[Any]) -> None:
        try:
            self._pending.remove(fut)
        except ValueError:
            pass
        if not fut.cancelled() and fut.exception() is not None and self._error is None:
            self._error = fut.exception()

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
        await asyncio.shield(self._queue(lambda tx: tx.event(sid, type_, payload, aid)))

    async def record(self, new: list[dict[str, Any]]) -> None:
        self.flush()
        sid, aid = self.session_id, self.admission_id
        rows = [{**m, "admission_id": aid} for m in new]
        await asyncio.shield(self._queue(lambda tx: messages.append(tx.conn, sid, rows, tx.now)))

    async def tool_start(self, call_id: str, name: str, arguments: str) -> None:
        await self.event("tool.start", {"call_id": call_id, "name": name,
                                        "arguments": arguments})

    async def tool_complete(self, call_id: str, name: str, result: str,
                            error: str | None) -> None:
        payload: dict[str, Any] = {"call_id": call_id, "name": name, "result": result}
        if error:
            payload["error"] = error
        await self.event("tool.complete", payload)

    async def settle(self) -> None:
        """Flush and wait for every queued write; raises the first storage error."""
        self.flush()
        for fut in list(self._pending):
            await asyncio.shield(fut)
        if self._error is not None:
            raise self._error


@dataclass
class _Running:
    session_id: str
    admission_id: str
    task: asyncio.Task[None]
    # why it was cancelled: "cancelled" (user) or "interrupted" (owner)
    cancel_outcome: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # the task has taken its first step: until then a stop is only noted (see _cancel)
    entered: bool = False
    # its outcome is being recorded: a stop now would only lose it (see _finish)
    finishing: bool = False


class TurnRunner:
    def __init__(self, rt: Runtime, services: Any) -> None:
        self.rt = rt
        self.services = services
        self.running: dict[str, _Running] = {}  # by session_id

    # -- scheduling -------------------------------------------------------

    def pump(self) -> None:
        """Start every turn the scheduler allows now."""
        if self.rt.draining:
            return
        while (item := self.rt.scheduler.next()) is not None:
            session_id, admission_id = item
            task = self.rt.spawn(self._turn(session_id, admission_id), f"turn:{admission_id}")
            self.running[session_id] = _Running(session_id, admission_id, task)

    def stop(self, session_id: str, outcome: str, admission_id: str | None = None) -> str | None:
        """Cancel the session's running turn (only if it runs ``admission_id``, when
        given); returns the admission_id it stopped."""
        run = self.running.get(session_id)
        if run is None or (admission_id is not None and run.admission_id != admission_id):
            return None
        if run.finishing:
            return None  # it has ended; only its outcome is still being written
        self._cancel(run, outcome)
        return run.admission_id

    @staticmethod
    def _cancel(run: _Running, outcome: str) -> None:
        """Stop ``run`` with ``outcome``. A task cancelled before its first step
        never runs its body, not even a ``finally``: the session would stay
        running for good. So a turn that has not begun is only told, and _turn
        settles it as soon as it begins."""
        if run.cancel_outcome is not None or run.finishing:
            return
        run.cancel_outcome = outcome
        if run.entered:
            run.task.cancel(f"turn {outcome}")

    async def wait(self, session_id: str, admission_id: str, timeout: float) -> None:
        run = self.running.get(session_id)
        if run is not None and run.admission_id == admission_id:
            try:
                await asyncio.wait_for(run.done.wait(), timeout)
            except TimeoutError:
                pass

    async def stop_all(self, grace: float) -> None:
        """Shutdown: let running turns finish within ``grace``, then interrupt them."""
        runs = list(self.running.values())
        if runs:
            await asyncio.wait([r.task for r in runs], timeout=grace)
        for run in list(self.running.values()):
            self._cancel(run, "interrupted")
        for run in runs:
            await run.done.wait()

    # -- one turn ---------------------------------------------------------

    async def _turn(self, session_id: str, admission_id: str) -> None:
        run = self.running[session_id]
        run.entered = True
        try:
            if run.cancel_outcome is None:
                await self._run(run)
            elif run.cancel_outcome == "cancelled":
                # stopped before it began: nothing of it ran, the admission is queued
                await self._finish(session_id, admission_id, "cancelled", "", {},
                                   "turn cancelled before it ran")
            # "interrupted" before it began (shutdown): it stays queued for the next owner
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the owner
            log.exception("turn %s crashed", admission_id)
            # ...nor leave the admission started with nobody running it: its
            # submitter would wait forever and the next owner would call it unknown
            with contextlib.suppress(Exception):
                await self._finish(session_id, admission_id, "failed", "", {},
                                   f"internal_error: the turn crashed ({type(exc).__name__}); "
                                   "the owner's log has the details")
        finally:
            run.done.set()
            self.running.pop(session_id, None)
            self.rt.scheduler.finished(session_id)
            self.pump()

    async def _run(self, run: _Running) -> None:
        rt, sid, aid = self.rt, run.session_id, run.admission_id
        # starting is not interruptible halfway: once begun, we learn whether the
        # admission was marked started, so a stop right now still records an outcome
        start = asyncio.ensure_future(self._start(sid, aid))
        try:
            started = await asyncio.shield(start)
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            if await start is not None:
                outcome = run.cancel_outcome or "interrupted"
                await self._finish(sid, aid, outcome, "", {}, f"turn {outcome} before it ran")
            return
        if started is None:
            return
        row, session, history = started
        payload = orjson.loads(row["payload_json"])
        sink = EventSink(rt, sid, aid)
        result: AgentResult | None = None
        outcome, error = "failed", None
        try:
            settings = resolve_turn(rt.config, session["options"],
                                    payload.get(TURN_OPTION_KEY, {}))
            provider = build_provider(settings, rt.config, rt.http, rt.providers, rt.home.config)
            msgs = [{"role": "system", "content": SYSTEM_PROMPT}]
            if not settings.ignore_rules and (rules := rules_message(session.get("cwd"))):
                msgs.append(rules)
            msgs.extend(chat_history(history))
            result = await run_agent(
                provider=provider, model=settings.model, reasoning=settings.reasoning,
                messages=msgs, tools=self._tools(settings), max_turns=settings.max_turns,
                sink=sink, tool_context=self._context(sid, aid, bool(payload.get("finite")),
                                                      settings),
            )
            outcome = "completed" if result.ok else "failed"
            error = result.error
            await sink.settle()
        except ResolveError as exc:
            error = f"bad_settings: {exc}"
        except StorageError as exc:
            error = f"storage_unavailable: {exc.detail}"
        except asyncio.CancelledError:
            outcome = run.cancel_outcome or "interrupted"
            error = "turn cancelled by request" if outcome == "cancelled" else (
                "owner shut down before the turn finished")
            # this task was cancelled on purpose; finish recording below
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            sink.flush()
        text = result.text if result is not None else "".join(sink.streamed)
        usage = result.usage if result is not None else {}
        await self._finish(sid, aid, outcome, text, usage, error)

    def _tools(self, settings: TurnSettings) -> dict[str, Any]:
        return tools_for(settings.toolsets, depth=0,
                         max_depth=self.rt.config.delegation.max_depth)

    def _context(self, sid: str, aid: str, finite: bool, settings: TurnSettings) -> Any:
        def make(call_id: str) -> ToolCallContext:
            return ToolCallContext(session_id=sid, admission_id=aid, finite=finite, depth=0,
                                   toolsets=settings.toolsets, call_id=call_id,
                                   services=self.services, settings=settings)
        return make

    async def _start(self, sid: str, aid: str) -> tuple[dict, dict, list] | None:
        """Mark the admission started; (row, session, transcript), or None if it no
        longer was queued. A failing store is retried until it heals (the turn keeps
        its place: the session's queue waits); while draining it gives up instead,
        leaving the admission queued for the next owner."""
        rt = self.rt
        info = session_info_payload(rt, sid)

        def unit(tx: Tx) -> tuple[dict, dict] | None:
            row = admissions.mark_started(tx.conn, aid, rt.epoch, tx.now)
            if row is None:
                return None
            session = sessions.get(tx.conn, sid)
            assert session is not None  # admissions reference their session
            payload = orjson.loads(row["payload_json"])
            messages.append(tx.conn, sid, [{"role": "user", "content": user_text(payload),
                                            "admission_id": aid}], tx.now)
            tx.event(sid, "message.start", {"admission_id": aid}, aid)
            tx.event(sid, "session.info", info)
            return row, session

        failures = 0
        while True:
            try:
                started = await rt.journal.write(unit)
                break
            except StorageError as exc:
                failures += 1
                if rt.draining:
                    log.error("could not start admission %s (%s); it stays queued",
                              aid, exc.detail)
                    return None
                log.warning("could not start admission %s (%s); retrying", aid, exc.detail)
                await asyncio.sleep(_retry_delay(failures))
        if started is None:
            return None
        # the transcript can be long: read it on the reader thread, never in a write
        # unit (those run on the event loop). Reads keep working while writes fail.
        try:
            history = await rt.db.read(lambda c: messages.list_for(c, sid))
        except StorageError as exc:
            # started but cannot see its transcript: end it failed rather than leave it
            # started (which only a restart would turn into `unknown`)
            await self._finish(sid, aid, "failed", "", {},
                               f"storage_unavailable: cannot read the transcript: {exc.detail}")
            return None
        return started[0], started[1], history

    async def _finish(self, sid: str, aid: str, outcome: str, text: str,
                      usage: dict[str, int], error: str | None) -> None:
        rt = self.rt
        if (run := self.running.get(sid)) is not None and run.admission_id == aid:
            # from here on a stop (interrupt, cancel) must not cut the retries short:
            # that would leave the admission started, and the next owner calls it unknown
            run.finishing = True
        result: dict[str, Any] = {"text": text, "usage": usage}
        if error:
            result["error"] = error
        result_json = orjson.dumps(result).decode()
        complete = {"admission_id": aid, "outcome": outcome, "text": text}
        if error:
            complete["error"] = error

        def unit(tx: Tx) -> None:
            if admissions.finish(tx.conn, aid, outcome, result_json, tx.now):
                tx.event(sid, "message.complete", complete, aid)
                info = session_info_payload(rt, sid)
                info["running"] = None
                tx.event(sid, "session.info", info)

        # The outcome must not be lost: retry until the store takes it, holding the
        # session's turn slot meanwhile (its queue waits; the receipt says started).
        # Only a shutdown ends this early: the admission then stays `started`, and
        # the next owner reports it `unknown` rather than guessing its outcome.
        failures = 0
        while True:
            try:
                await rt.journal.write(unit)
                if failures:
                    log.warning("recorded the outcome of %s after %d failed attempts",
                                aid, failures)
                return
            except StorageError as exc:
                failures += 1
                if rt.draining and failures >= FINISH_ATTEMPTS_WHILE_DRAINING:
                    log.error("could not record the outcome of %s (%s %s) before shutdown; "
                              "the next owner will report it unknown", aid, outcome, error)
                    return
                log.warning("could not record the outcome of %s (attempt %d: %s); retrying",
                            aid, failures, exc.detail)
                await asyncio.sleep(_retry_delay(failures))


def _retry_delay(failures: int) -> float:
    """Backoff between storage retries: 0.1 s doubling, at most RETRY_MAX_SECONDS."""
    return min(0.1 * 2 ** min(failures, 10), RETRY_MAX_SECONDS)
