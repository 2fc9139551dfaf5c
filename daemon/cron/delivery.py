"""Following a cron run to its end, and delivering its answer exactly once.

The answer always stays in the run's own session. A job with a ``deliver``
target also gets it there once the run's admission is terminal:

- ``file:PATH``: a dated markdown record appended to PATH, opened by a marker
  line naming the run; a delivery that is retried (the owner died between the
  append and recording it) finds its marker and appends nothing;
- ``session:ID``: a ``cron.notice`` event in that session, written in the same
  transaction that records the delivery, so it is written once (the one
  late-delivery rule, daemon/ledger/delivery.py); it is an event only and never
  starts a turn there.

The result is recorded on the run row (``delivered``, or ``failed`` with the
reason) through ``Journal.persist``. A run whose admission became ``unknown``
waits: it is delivered (as interrupted) once someone resolves it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tether.store import StorageError
from tether.store.tables import admissions, sessions
from tether.store.tables import cron as cron_rows

from ..ledger.delivery import announce_once, claim, recover
from ..ledger.journal import Journal, Tx
from ..runtime.supervisor import Supervisor
from .schedule import ScheduleError, iso, zone

__all__ = ["Deliveries", "check_target", "NOTICE_EVENT"]

log = logging.getLogger("tether.cron")

NOTICE_EVENT = "cron.notice"
#: following a run: its receipt is read this often at first, then less often
POLL_FIRST_SECONDS = 0.05
POLL_MAX_SECONDS = 1.0
#: an unknown admission waits for a person: looked at this often
POLL_UNKNOWN_SECONDS = 5.0
#: a file target's tail searched for the run's marker before appending
MARKER_SCAN_BYTES = 1024 * 1024


def check_target(target: str) -> str | None:
    """Why ``target`` is not a delivery target (None: it is one)."""
    kind, _, rest = target.partition(":")
    if kind == "file":
        if not rest or not os.path.isabs(rest):
            return "file: needs an absolute path, e.g. file:/home/me/reports/daily.md"
        return None
    if kind == "session":
        return None if rest else "session: needs a session id, e.g. session:ses_…"
    return "a target is file:/absolute/path or session:SESSION_ID"


class Deliveries:
    def __init__(self, journal: Journal, supervisor: Supervisor,
                 on_end: Callable[[], None]) -> None:
        self._journal = journal
        self._supervisor = supervisor
        self._on_end = on_end
        self._following: dict[str, asyncio.Task[None]] = {}

    def follow(self, run: dict[str, Any]) -> None:
        """Watch the run's admission until it is terminal, then wake the schedule
        and deliver (once; a run already followed is left alone)."""
        run_id = run["run_id"]
        if run_id in self._following or self._supervisor.draining:
            return
        task = self._supervisor.spawn(self._follow(run_id, run["admission_id"]),
                                      f"cron-run:{run_id}")
        self._following[run_id] = task
        task.add_done_callback(lambda _: self._following.pop(run_id, None))

    def stop(self) -> None:
        for task in list(self._following.values()):
            task.cancel("owner draining")

    async def recover(self) -> None:
        """After a start: follow every run still pending delivery."""
        async def follow(row: dict[str, Any]) -> None:
            self.follow(row)

        await recover(self._journal, "cron runs", "run_id", cron_rows.pending_deliveries,
                      follow)

    async def _follow(self, run_id: str, admission_id: str) -> None:
        delay = POLL_FIRST_SECONDS
        while True:
            try:
                row = await self._journal.db.lookup(lambda c: admissions.get(c, admission_id))
            except StorageError:
                row = {"status": "queued"}  # try again later
            if row is None or row["status"] == "terminal":
                break
            await asyncio.sleep(POLL_UNKNOWN_SECONDS if row["status"] == "unknown" else delay)
            delay = min(delay * 2, POLL_MAX_SECONDS)
        self._on_end()
        try:
            await self.deliver(run_id)
        except StorageError as exc:
            log.error("cron run %s: could not record its delivery: %s", run_id, exc.detail)

    async def deliver(self, run_id: str) -> None:
        """Deliver the run's answer to its job's target, if it is still pending."""
        def read(c: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
            run = cron_rows.get_run(c, run_id)
            job = cron_rows.get_job(c, run["job_id"]) if run else None
            return run, job

        run, job = await self._journal.db.read(read)
        if run is None or run["delivery_status"] != "pending":
            return
        target = job["deliver"] if job else None
        if not target:
            await self._record(run_id, "failed", "the job no longer has a delivery target")
            return
        kind, _, where = target.partition(":")
        record = _record_text(run, job)  # type: ignore[arg-type]
        if kind == "file":
            try:
                await asyncio.to_thread(_append_once, Path(where), run_id, record)
            except OSError as exc:
                await self._record(run_id, "failed", f"cannot append to {where}: "
                                                      f"{exc.strerror or exc}")
                return
            await self._record(run_id, "delivered", None)
            return
        payload = {"job": job["name"], "run_id": run_id,  # type: ignore[index]
                   "scheduled_for": run["scheduled_for"], "session_id": run["session_id"],
                   "admission_id": run["admission_id"], "outcome": run["outcome"],
                   "text": record["text"], "error": record["error"]}

        def unit(tx: Tx) -> None:
            if sessions.get(tx.conn, where) is None:
                cron_rows.set_delivery(tx.conn, run_id, "failed", f"no session {where!r}",
                                       tx.now)
                return
            claim(tx, lambda c, now: cron_rows.set_delivery(c, run_id, "delivered", None, now))
            tx.event(where, NOTICE_EVENT, payload)

        await announce_once(self._journal, unit, f"the delivery of cron run {run_id}")

    async def _record(self, run_id: str, status: str, error: str | None) -> None:
        if error:
            log.warning("cron run %s: delivery failed: %s", run_id, error)
        await self._journal.persist(
            lambda tx: cron_rows.set_delivery(tx.conn, run_id, status, error, tx.now),
            f"the delivery of cron run {run_id}")


def _record_text(run: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    result = orjson.loads(run["result_json"]) if run.get("result_json") else {}
    try:
        when = iso(run["scheduled_for"], zone(job["tz"]))
    except ScheduleError:
        when = iso(run["scheduled_for"])
    return {"text": result.get("text") or "", "error": result.get("error"),
            "outcome": run.get("outcome") or "interrupted", "when": when,
            "name": job["name"]}


def _append_once(path: Path, run_id: str, record: dict[str, Any]) -> None:
    marker = f"<!-- tether cron run {run_id} -->"
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - MARKER_SCAN_BYTES))
            if marker.encode() in f.read():
                return  # appended before the owner could record it
    except FileNotFoundError:
        pass
    lines = [marker, f"## {record['name']} · {record['when']} · {record['outcome']}", ""]
    if record["text"]:
        lines += [record["text"].rstrip("\n"), ""]
    if record["error"]:
        lines += [f"> error: {record['error']}", ""]
    with path.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
