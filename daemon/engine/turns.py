"""The turn runner: takes admissions from the scheduler and runs each as a turn.

A turn is: mark the admission started (with its user message and
``message.start``) in one commit, run the agent engine with a sink that turns
its progress into events and transcript rows, then record the terminal outcome
with ``message.complete`` in one commit (outcomes.py writes both). Whatever
happens in between (provider failure, interrupt, owner shutdown), the
admission ends terminal; only a crash leaves it ``started``, which the next
owner turns into ``unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from tether.store import StorageError

from ..config.core import Config
from ..config.turn import ResolveError, resolve_turn
from ..ledger import outcomes
from ..ledger.journal import Fenced, Journal, Unit, ride_out
from ..ledger.placement import Placement
from ..ledger.rules import TURN_OPTION_KEY, Event
from ..ledger.scheduler import Scheduler
from ..model.retry_notice import RETRY_LISTENER
from ..model.usage import Prices
from ..runtime.supervisor import Supervisor
from .agent import AgentResult
from .compaction import CompactionFailed, Compactor, Target
from .core import AgentRun, Engine
from .recall import Recall
from .sink import EventSink, Unfinished
from .transcript import client_request, turn_messages

__all__ = ["TurnRunner"]

log = logging.getLogger("tether.turns")

#: while the owner drains, a failing outcome write is given up after this many tries
FINISH_ATTEMPTS_WHILE_DRAINING = 5


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
    # what it reports to; it holds the answer until the outcome is written with it
    sink: EventSink | None = None


class TurnRunner:
    def __init__(self, engine: Engine, journal: Journal, scheduler: Scheduler,
                 supervisor: Supervisor, config: Config, placement: Placement, *,
                 epoch: int) -> None:
        self._engine = engine
        self._journal = journal
        # a turn writes through its placement's journal (in a fleet: fenced by the
        # session's lease), and a stop reaches a turn another node runs through it
        self._journal_for = placement.journal_for
        self._placement = placement
        self._scheduler = scheduler
        self._supervisor = supervisor
        self._config = config
        self._epoch = epoch
        self.prices = Prices(config.model.prices)
        self.compactor = Compactor(journal)
        self.recall = Recall(journal.db)
        self.running: dict[str, _Running] = {}  # by session_id

    # -- scheduling -------------------------------------------------------

    def pump(self) -> None:
        """Start every turn the scheduler allows now."""
        if self._supervisor.draining:
            return
        while (item := self._scheduler.next()) is not None:
            session_id, admission_id = item
            task = self._supervisor.spawn(self._turn(session_id, admission_id), f"turn:{admission_id}")
            self.running[session_id] = _Running(session_id, admission_id, task)

    def begin(self, session_id: str, admission_id: str,
              started: tuple[dict[str, Any], dict[str, Any]]) -> None:
        """Run the turn its admission's own commit started (the scheduler gave it
        its slot in that unit: `Scheduler.start_now`); ``started`` is that start's
        (row, session). Even while draining: it is started, so it runs until
        stop_all interrupts it, and ends with an outcome."""
        task = self._supervisor.spawn(self._turn(session_id, admission_id, started),
                                      f"turn:{admission_id}")
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

    async def stop_and_wait(self, session_id: str, admission_id: str | None,
                            wait: float) -> str | None:
        """Cancel the session's running turn wherever it runs and wait up to ``wait``
        seconds for it to end; the admission_id it stopped (None: none ran)."""
        aid = self.stop(session_id, "cancelled", admission_id)
        if aid is not None:
            await self.wait(session_id, aid, wait)
            return aid
        if session_id not in self.running:
            return await self._placement.stop_elsewhere(session_id, admission_id, wait)
        return None

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
        # an admission whose unit started its turn may still be committing: once
        # every unit before this one has, its turn is among those running
        with contextlib.suppress(StorageError):
            await self._journal.write(lambda tx: None)
        runs = list(self.running.values())
        if runs:
            await asyncio.wait([r.task for r in runs], timeout=grace)
        for run in list(self.running.values()):
            self._cancel(run, "interrupted")
        for run in runs:
            await run.done.wait()

    # -- one turn ---------------------------------------------------------

    async def _turn(self, session_id: str, admission_id: str,
                    started: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        run = self.running[session_id]
        run.entered = True
        try:
            if run.cancel_outcome is None or started is not None:
                # (one started with its admission has an outcome to record, even when
                # stopped before it began: _run records it)
                await self._run(run, started)
            elif run.cancel_outcome == "cancelled":
                # stopped before it began: nothing of it ran, the admission is queued
                await self._finish(session_id, admission_id, Event.WITHDRAW, "cancelled",
                                   error="turn cancelled before it ran")
            # "interrupted" before it began (shutdown): it stays queued for the next owner
        except Fenced as exc:
            # another node of the fleet took the session over: the turn is its now,
            # and nothing more of it may be written from here
            log.warning("turn %s abandoned: %s", admission_id, exc)
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the owner
            log.exception("turn %s crashed", admission_id)
            # ...nor leave the admission started with nobody running it: its
            # submitter would wait forever and the next owner would call it unknown
            error = (f"internal_error: the turn crashed ({type(exc).__name__}); "
                     "the owner's log has the details")
            with contextlib.suppress(Exception):
                # whichever applies: it had started, or it crashed before it could
                for event in (Event.FINISH, Event.WITHDRAW):
                    await self._finish(session_id, admission_id, event, "failed", error=error,
                                       sink=run.sink)
        finally:
            run.done.set()
            self.running.pop(session_id, None)
            self._scheduler.finished(session_id)
            self.pump()

    async def _run(self, run: _Running,
                   started_with: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        sid, aid = run.session_id, run.admission_id
        # starting is not interruptible halfway: once begun, we learn whether the
        # admission was marked started, so a stop right now still records an outcome
        start = asyncio.ensure_future(self._start(sid, aid, started_with))
        try:
            started = await asyncio.shield(start)
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            if await start is not None:
                outcome = run.cancel_outcome or "interrupted"
                await self._finish(sid, aid, Event.FINISH, outcome,
                                   error=f"turn {outcome} before it ran")
            return
        if started is None:
            return
        if run.cancel_outcome is not None:
            # stopped before it began; only a turn its admission started gets here
            await self._finish(sid, aid, Event.FINISH, run.cancel_outcome,
                               error=f"turn {run.cancel_outcome} before it ran")
            return
        row, session, history, summary = started
        payload = orjson.loads(row["payload_json"])
        sink = run.sink = EventSink(self._journal_for(sid), sid, aid, hold_answer=True,
                                    give_up=lambda: self._supervisor.draining)
        result: AgentResult | None = None
        # filled as the agent goes: a turn stopped halfway still counts what it spent
        progress = AgentResult(text="", exit_reason="interrupted", model="")
        outcome, error = "failed", None
        budget: Any = None
        msgs: list[dict[str, Any]] = []
        try:
            settings = resolve_turn(self._config, session["options"],
                                    payload.get(TURN_OPTION_KEY, {}))
            progress.model = settings.model
            msgs = turn_messages(history, session.get("cwd"), settings.ignore_rules, summary)
            request = client_request(payload)
            # after settings and request: a budget set means _fill below may use them
            budget = await self._engine.budget(settings)
            if self._config.model.compact == "auto" and budget.count(msgs, await self._engine.schemas(
                    settings, 0, sid, request.get("client_tools"))) > budget.limit:
                record = await self._compact(sid, aid, settings, budget)
                if record is not None:  # the request sends the new summary and the rest
                    history = [r for r in history if r["index"] >= record["end_index"]]
                    msgs = turn_messages(history, session.get("cwd"), settings.ignore_rules,
                                         record["summary"])
            agent = AgentRun(session_id=sid, admission_id=aid, depth=0,
                             late_delivery=not payload.get("finite"), cwd=session.get("cwd"),
                             attended=not payload.get("finite"))
            # the model's retries are shown to viewers as model.retry events
            RETRY_LISTENER.set(lambda info: sink.event("model.retry", info))
            result = await self._engine.run(agent, settings, msgs, sink, budget, progress,
                                            **request)
            outcome = "completed" if result.ok else "failed"
            error = result.error
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
        text = result.text if result is not None else "".join(sink.streamed)
        spent = result or (progress if progress.api_calls else None)
        calls = result.tool_calls if result is not None else None
        context = None
        if spent is not None and spent.api_calls and budget is not None:
            # the context window's fill the turn leaves (viewers show it; ACP usage_update)
            with contextlib.suppress(Exception):
                context = await self._fill(budget, spent, msgs, settings, sid, request)
        await self._finish(sid, aid, Event.FINISH, outcome, text=text,
                           usage=spent.usage if spent else {}, error=error,
                           model=spent.model if spent else None,
                           requests=spent.api_calls if spent else 0, tool_calls=calls,
                           context=context, sink=sink)

    async def _fill(self, budget: Any, spent: AgentResult, msgs: list[dict[str, Any]],
                    settings: Any, sid: str, request: dict[str, Any]) -> dict[str, Any]:
        """The context window's fill a turn leaves (Budget.fill); the tool schemas
        are asked for only when the server reported no usage to go by."""
        schemas = None if spent.last_usage.get("prompt_tokens") else \
            await self._engine.schemas(settings, 0, sid, request.get("client_tools"))
        return budget.fill(spent.last_usage, msgs, schemas)

    async def _compact(self, sid: str, aid: str, settings: Any, budget: Any) -> dict | None:
        """Auto-compaction before a turn's first request (compaction.py); a failure
        is logged and the request is cut to fit instead (budget.squeeze)."""
        target = Target(sid, settings.model, settings.reasoning, aid, None, "auto")
        try:
            return await self.compactor.compact(target, self._engine.provider(settings),
                                                budget, self._journal_for(sid))
        except CompactionFailed as exc:
            log.warning("compaction of %s failed: %s", sid, exc)
            return None

    async def _start(self, sid: str, aid: str,
                     started: tuple[dict[str, Any], dict[str, Any]] | None = None,
                     ) -> tuple[dict, dict, list, str | None] | None:
        """Mark the admission started (unless its admission's unit did: ``started``);
        (row, session, transcript from the latest
        compaction on, that compaction's summary), or None if it no longer was queued. A failing store is retried until it heals (the turn keeps
        its place: the session's queue waits); while draining it gives up instead,
        leaving the admission queued for the next owner."""
        if started is None:
            try:
                started = await self._journal_for(sid).persist(
                    lambda tx: outcomes.start(tx, self._scheduler, sid, aid, self._epoch),
                    f"the start of admission {aid}",
                    give_up=lambda _: self._supervisor.draining)
            except StorageError:
                return None
        if started is None:
            return None
        # the transcript can be long: read it off the loop, never in a write unit
        # (those run on the event loop). Reads keep working while writes fail; a store
        # that blinks (a restart, a lost connection) is ridden out, up to
        # store.outage_seconds.
        # a turn reads from its latest compaction on, so its cost does not grow with
        # the session's age (docs/long-sessions.md), and only what was added since the
        # session's last turn when that one's is still kept (recall.py); one statement
        try:
            history, summary = await ride_out(
                self._journal, lambda: self.recall.transcript(sid),
                f"read the transcript of {sid}", give_up=lambda: self._supervisor.draining)
        except StorageError as exc:
            # started but cannot see its transcript: end it failed rather than leave it
            # started (which only a restart would turn into `unknown`)
            await self._finish(sid, aid, Event.FINISH, "failed",
                               error=f"storage_unavailable: cannot read the transcript: "
                                     f"{exc.detail}")
            return None
        return started[0], started[1], history, summary

    async def _finish(self, sid: str, aid: str, event: Event, outcome: str, *,
                      text: str = "", usage: dict[str, Any] | None = None,
                      error: str | None = None, model: str | None = None,
                      requests: int = 0,
                      tool_calls: list[dict[str, Any]] | None = None,
                      context: dict[str, Any] | None = None,
                      sink: EventSink | None = None) -> None:
        if (run := self.running.get(sid)) is not None and run.admission_id == aid:
            # from here on a stop (interrupt, cancel) must not cut the retries short:
            # that would leave the admission started, and the next owner calls it unknown
            run.finishing = True
        # The outcome must not be lost: retry until the store takes it, holding the
        # session's turn slot meanwhile (its queue waits; the receipt says started).
        # Only a shutdown ends this early: the admission then stays `started`, and
        # the next owner reports it `unknown` rather than guessing its outcome.
        sup = self._supervisor

        def unit(held: list[dict[str, Any]] | None) -> Unit[bool]:
            return lambda tx: outcomes.settle(
                tx, self._scheduler, sid, aid, event, outcome, text=text, usage=usage,
                error=error, model=model, requests=requests, prices=self.prices,
                tool_calls=tool_calls, context=context, record=held)

        held = None
        if sink is not None:
            # the turn's last writes (its unsent deltas, its answer) and its outcome go
            # in one unit: one commit ends the turn
            try:
                await sink.finish(unit)
                return
            except Unfinished as exc:
                held = exc.held
            # not stored: what the turn reported is stored (or given up) first, so the
            # outcome's events come last even when the store was refusing writes
            try:
                await sink.settle()
            except StorageError as exc:
                if outcome == "completed":
                    # refused past store.outage_seconds: as for any write of a running
                    # turn, it ends failed, the answer kept as its text, not as a row
                    outcome, error, held = "failed", f"storage_unavailable: {exc.detail}", None
            except Exception:  # noqa: BLE001 - its outcome is written whatever happened
                pass
        with contextlib.suppress(StorageError):
            await self._journal_for(sid).persist(
                unit(held), f"the outcome of {aid} ({outcome})",
                give_up=lambda n: sup.draining and n >= FINISH_ATTEMPTS_WHILE_DRAINING)
