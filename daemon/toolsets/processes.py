"""Managed processes: commands the terminal tool runs, in their own process group.

A command runs inside the sandbox the terminal tool chose (sandbox.py) and is
started, read and ended whole by launch.py. `ProcessTable` keeps the
background ones: each
has a durable ``processes`` row, a bounded output ring, and a watcher that
records its exit. With ``notify_on_complete`` (interactive turns only: the tool
asks ``ToolContext.late_delivery``), the exit is delivered exactly once into
the session as a new admission of principal ``process`` whose request_id is the
process id, in the same transaction that marks the row delivered — the one
late-delivery rule (daemon/ledger/delivery.py). When the owner
stops, its processes are ended and recorded ``lost``; at the next start,
``recover`` ends what an owner that died left running, records it ``lost``, and
delivers every notice still due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
from dataclasses import dataclass, field
from typing import Any

from tether.store.tables import processes as rows

from ..config.core import ToolsConfig
from ..ledger.delivery import Admit, LateDelivery, Letter
from ..ledger.journal import Journal, Tx
from ..runtime.supervisor import Supervisor
from . import lineage
from .launch import collect, end, kill_now, spawn
from .output import Ring
from .sandbox import Sandbox

__all__ = ["ProcessTable", "Managed", "NOTICE_MARKER", "KILL_SECONDS"]

log = logging.getLogger("tether.processes")

#: how a process notice opens (the renderer and the model recognise it)
NOTICE_MARKER = "[process notice]"
TAIL_CHARS = 2000
#: `process kill` returns within this, whatever the process's pipes do
KILL_SECONDS = 5.0


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (to tell it from a later process with its pid)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass
class Managed:
    process_id: str
    session_id: str
    admission_id: str | None
    command: str
    cwd: str
    notify: bool
    proc: asyncio.subprocess.Process
    ring: Ring
    boundary: str  # workspace-write | read-only | none (sandbox.py)
    workspace: str  # what it may write in the sandbox: the session's cwd
    done: asyncio.Event = field(default_factory=asyncio.Event)
    exit_code: int | None = None
    state: str = "running"
    ending: str | None = None  # killed | lost: why we are ending it

    def status(self) -> dict[str, Any]:
        return {"process_id": self.process_id, "command": self.command, "cwd": self.cwd,
                "pid": self.proc.pid, "state": self.state, "exit_code": self.exit_code,
                "notify_on_complete": self.notify, "output_bytes": self.ring.written,
                "sandbox": self.boundary}


class ProcessTable:
    def __init__(self, journal: Journal, supervisor: Supervisor, admit: Admit,
                 config: ToolsConfig, sandbox: Sandbox, *, epoch: int) -> None:
        self._journal = journal
        self._supervisor = supervisor
        self._late = LateDelivery(journal, supervisor, admit, principal="process",
                                  what="process", get=rows.get, mark=rows.mark_delivered,
                                  origin_column="admission_id", letter=_letter)
        self._config = config
        self.sandbox = sandbox
        self._epoch = epoch
        self._live: dict[str, Managed] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}

    def live(self, session_id: str, process_id: str) -> Managed | None:
        p = self._live.get(process_id)
        return p if p is not None and p.session_id == session_id else None

    def of_session(self, session_id: str) -> list[Managed]:
        return [p for p in self._live.values() if p.session_id == session_id]

    async def stored(self, session_id: str, process_id: str | None = None) -> list[dict[str, Any]]:
        """Rows of the session's processes (those of earlier owners too), newest first."""
        found = await self._journal.db.read(lambda c: rows.for_session(c, session_id))
        return [r for r in found if process_id is None or r["process_id"] == process_id]

    async def start(self, session_id: str, admission_id: str | None, command: str, cwd: str,
                    notify: bool, boundary: str, workspace: str) -> Managed:
        """Record the process, start it, and watch it; ValueError if too many run.

        It runs in ``cwd`` within ``boundary``, where only ``workspace`` may be written.
        Once begun, a start completes even if the calling turn is stopped meanwhile:
        a recorded process is always started and watched (its notice still comes)."""
        return await asyncio.shield(self._start(session_id, admission_id, command, cwd,
                                                notify, boundary, workspace))

    async def _start(self, session_id: str, admission_id: str | None, command: str, cwd: str,
                     notify: bool, boundary: str, workspace: str) -> Managed:
        running = sum(1 for p in self._live.values() if p.state == "running")
        if running >= self._config.max_processes:
            raise ValueError(f"{running} background processes are running already "
                             f"(tools.max_processes); wait for or kill one first")
        process_id = "proc_" + secrets.token_hex(8)
        epoch = self._epoch
        # the row comes first: a crash right after the spawn still leaves a record
        # that recovery turns into `lost` (and a notice, when one was promised)
        await self._journal.write(lambda tx: rows.insert(
            tx.conn, process_id=process_id, session_id=session_id, admission_id=admission_id,
            command=command, cwd=cwd, notify=notify, owner_epoch=epoch, now=tx.now))
        try:
            proc = await spawn(self.sandbox.argv(command, cwd, boundary, workspace=workspace),
                               cwd, self.sandbox.env, stdin=True)
        except OSError as exc:
            why = f"could not start: {exc}"
            await self._journal.persist(lambda tx: rows.finish(
                tx.conn, process_id, "exited", 127, why, tx.now),
                f"the failed start of {process_id}")
            if notify:
                await self._late.deliver(process_id)
            raise ValueError(f"could not start the command: {exc}") from None
        started = _start_time(proc.pid)
        await self._journal.persist(lambda tx: rows.set_pid(tx.conn, process_id, proc.pid,
                                                            started), f"the pid of {process_id}")
        p = Managed(process_id, session_id, admission_id, command, cwd, notify, proc,
                    Ring(self._config.process_ring_bytes), boundary, workspace)
        self._live[process_id] = p
        task = self._supervisor.spawn(self._watch(p), f"process:{process_id}")
        self._watchers[process_id] = task
        task.add_done_callback(lambda _: self._watchers.pop(process_id, None))
        return p

    async def _watch(self, p: Managed) -> None:
        try:
            p.exit_code = await collect(p.proc, p.ring.write)
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            await end(p.proc)
            p.ending = p.ending or "lost"
            p.exit_code = p.proc.returncode
        p.state = p.ending or "exited"
        p.done.set()
        lineage.unregister(p.proc.pid)
        tail = p.ring.tail(TAIL_CHARS)
        await self._late.finish(p.process_id, lambda tx: rows.finish(
            tx.conn, p.process_id, p.state, p.exit_code, tail, tx.now), deliver=p.notify)

    async def kill(self, p: Managed) -> None:
        """End ``p`` and everything it started; returns within KILL_SECONDS."""
        if p.state != "running":
            return
        p.ending = "killed"
        await end(p.proc, grace=min(2.0, KILL_SECONDS / 3))
        try:
            await asyncio.wait_for(asyncio.shield(p.done.wait()), KILL_SECONDS / 3)
        except TimeoutError:
            # its watcher is stuck on the pipes: stopping it records the end
            watcher = self._watchers.get(p.process_id)
            if watcher is not None:
                watcher.cancel()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(p.done.wait()), KILL_SECONDS / 3)

    async def recover(self, dead_epoch: int | None = None) -> None:
        """After a start: what an older owner (in a fleet: the dead node of
        ``dead_epoch``) left running is ended and ``lost``; every notice still due
        is delivered."""
        epoch = self._epoch

        def unit(tx: Tx) -> None:
            for row in rows.running_before(tx.conn, epoch, dead_epoch):
                pid = row["pid"]
                if pid and row["pid_started"] and _start_time(pid) == row["pid_started"]:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
                rows.finish(tx.conn, row["process_id"], "lost", None, "", tx.now)

        await self._late.recover(unit, rows.undelivered, "process_id")

    async def stop_all(self) -> None:
        """Shutdown: end every process (recorded ``lost``: the owner stopped)."""
        for p in self._live.values():
            if p.state == "running":
                p.ending = "lost"
                kill_now(p.proc)
        tasks = list(self._watchers.values())
        if tasks:
            await asyncio.wait(tasks, timeout=10)


def _letter(row: dict[str, Any]) -> Letter:
    """A finished row's notice, and ``process.complete`` with it."""
    process_id, sid = row["process_id"], row["session_id"]
    complete = {"process_id": process_id, "state": row["state"],
                "exit_code": row["exit_code"], "command": row["command"]}

    def announce(tx: Tx, admission_id: str | None) -> None:
        tx.event(sid, "process.complete", complete)

    return Letter(sid, notice_text(row), {"process_id": process_id}, announce)


def notice_text(row: dict[str, Any]) -> str:
    """The message a process notice delivers into its session."""
    pid, cmd = row["process_id"], row["command"]
    tail = (row["output_tail"] or "").rstrip()
    last = f"; last output:\n{tail}" if tail else "; it printed nothing"
    if row["state"] == "lost":
        what = "was lost when the owner stopped (its exit status is unknown)"
    elif row["state"] == "killed":
        what = "was killed"
    else:
        what = f"exited {row['exit_code']}"
    return f"{NOTICE_MARKER} process {pid} `{cmd}` {what}{last}"
