"""This owner as one node of a fleet: leases, fencing, and recovering dead nodes.

Several owners share one PostgreSQL database (docs/scale-out.md). Any node
admits any prompt; a session's turns run on the node that holds the session's
lease, one at a time. The pieces:

- **Placement.** The unit that admits a prompt also takes the session's lease
  when it is free, expired or already this node's (`place`); then the turn
  runs here. When another live node holds it, the admission is only recorded,
  and the holder picks it up (`_adopt_held`, each tick).
- **Heartbeat.** Every tick renews this node's row and every lease it holds
  (one statement each). A node that finds its row declared dead has paused
  past its lease (SIGSTOP, a frozen VM): it stops serving at once.
- **Fencing.** Each lease has a generation that grows whenever it changes
  hands. Every unit of a turn checks, under a row lock, that this node still
  holds the session at the generation it took it at (`journal_for`); when it
  does not, the unit writes nothing and raises `Fenced`. The check is the
  unit's first statement and is not waited for: the server skips what the unit
  sends after it, and the refusal is raised at the unit's first wait, or at
  its group's COMMIT, which then rolls the group back (the other units of the
  group are told to write again).
- **Recovery.** A node whose row ran out is claimed by one live node (``FOR
  UPDATE SKIP LOCKED``), marked dead and its leases freed with their
  generations moved on, in one transaction; then what it left is recovered as
  a restarted owner would: its started admissions become unknown, its
  background delegations interrupted and delivered, its processes lost, its
  approval prompts cancelled. The queued work of its sessions goes to whichever
  node takes each lease next (`_claim_unplaced`).
- **Idle leases** are let go (each tick), so the next prompt of a session runs
  wherever it arrives.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tether.store.tables import admissions
from tether.store.tables import fleet as fleet_rows

from ..ledger.journal import Fenced, Journal, Tx, Unit
from ..ledger.placement import Recoverer
from ..ledger.recovery import adopt, recover
from ..ledger.scheduler import Scheduler
from ..runtime.supervisor import Supervisor

__all__ = ["FleetNode"]

T = TypeVar("T")
log = logging.getLogger("tether.fleet")

#: sessions claimed per tick from dead or idle holders
CLAIM_BATCH = 32


class _FencedJournal(Journal):
    """A journal whose every unit first sends a fence (store/fleet.py's ``fence``:
    answered with the unit's first wait, or its group's COMMIT); ``lost`` is told,
    on the loop, when one refused."""

    def __init__(self, base: Journal, check: Callable[[Tx], int],
                 lost: Callable[[int | None], None]) -> None:
        super().__init__(base.db, base.bus, base.announce,
                         outage_seconds=base.outage_seconds)
        self._check = check
        self._lost = lost

    def submit(self, fn: Unit[T]) -> asyncio.Future[tuple[T, list[Any]]]:
        check = self._check
        fenced_at: list[int] = []  # the lease's generation the unit was fenced with

        def fenced(tx: Tx) -> T:
            fenced_at.append(check(tx))
            return fn(tx)

        future = super().submit(fenced)
        future.add_done_callback(lambda f: self._refused(f, fenced_at))
        return future

    def _refused(self, future: asyncio.Future[Any], fenced_at: list[int]) -> None:
        if not future.cancelled() and isinstance(future.exception(), Fenced):
            self._lost(fenced_at[-1] if fenced_at else None)


class FleetNode:
    """One owner's part in a fleet: see the module docstring. The owner's `Placement`
    (ledger/placement.py) when its store is shared."""

    shared = True

    def __init__(self, journal: Journal, scheduler: Scheduler, supervisor: Supervisor, *,
                 node_id: str, epoch: int, lease_seconds: float, policy: str) -> None:
        self._journal = journal
        self._scheduler = scheduler
        self._supervisor = supervisor
        self.node_id = node_id
        self.epoch = epoch
        self.ttl = lease_seconds
        self._policy = policy
        self.tick = min(0.25, lease_seconds / 10)
        self.held: dict[str, int] = {}  # session_id -> the generation it is held at
        self.fenced_out = False
        self._recoverers: list[Recoverer] = []
        self._pump: Callable[[], None] = lambda: None
        self._stop: Callable[[str, str], Any] = lambda _sid, _aid: None

    # -- joining and leaving ------------------------------------------------

    async def start(self, address: str | None, home: str, pump: Callable[[], None],
                    stop: Callable[[str, str], Any], *, settle: Sequence[Recoverer],
                    deliver: Mapping[str, Recoverer]) -> None:
        """Register this node (serving), recover what dead nodes left and claim the
        work nobody runs, all before it serves; then begin the tick. ``settle`` and
        ``deliver`` each recover one dead node's rows of their kind, by its epoch
        (its prompts, then its late deliveries); ``stop`` cancels a turn running
        here (a stop asked through another node)."""
        self._pump = pump
        self._stop = stop
        self._recoverers = [*settle, *deliver.values()]
        await self._journal.persist(
            lambda tx: fleet_rows.register(tx.conn, node_id=self.node_id, epoch=self.epoch,
                                           address=address, pid=os.getpid(),
                                           host=socket.gethostname(), home=home,
                                           now=tx.now, ttl=self.ttl),
            "this node's registration")
        await self._recover_dead()
        await self._claim_unplaced()
        self._supervisor.spawn(self._run(), "fleet")

    async def serving(self, address: str | None) -> None:
        """Where clients reach this node (its TCP listener, once bound)."""
        await self._journal.write(lambda tx: fleet_rows.set_address(tx.conn, self.epoch,
                                                                    address))

    async def drain(self) -> None:
        """Stop taking sessions (a draining node takes no new lease)."""
        await self._journal.write(lambda tx: fleet_rows.set_state(tx.conn, self.epoch,
                                                                  "draining"))

    async def leave(self) -> None:
        """Clean stop: hand every lease back and say so."""
        def unit(tx: Tx) -> None:
            fleet_rows.release_all(tx.conn, self.epoch)
            fleet_rows.set_state(tx.conn, self.epoch, "stopped")

        if not self.fenced_out:
            await self._journal.write(unit)
        self.held.clear()

    # -- placement and fencing ---------------------------------------------

    def place(self, tx: Tx, session_id: str, admission_id: str) -> Callable[[], bool]:
        """In the unit that admits a prompt: hold the session's lease if it can be
        had, if the admission was inserted (the take rides with the insert, one
        wait for both); the function returned says whether its turns run here."""
        taken = fleet_rows.take_admitted(tx.conn, session_id, admission_id, self.epoch,
                                         tx.now, self.ttl)

        def placed() -> bool:
            return self._hold(session_id, taken())

        return placed

    def _take(self, tx: Tx, session_id: str) -> bool:
        """Hold the session's lease if it can be had (a claim of unplaced work)."""
        return self._hold(session_id, fleet_rows.take(tx.conn, session_id, self.epoch,
                                                      tx.now, self.ttl))

    def _hold(self, session_id: str, generation: int | None) -> bool:
        if generation is None:
            return False
        self.held[session_id] = generation
        return True

    def journal_for(self, session_id: str) -> Journal:
        """The journal a turn of ``session_id`` writes through: fenced by its lease."""
        def refusal() -> Fenced:
            return Fenced(f"this node (epoch {self.epoch}) no longer holds session "
                          f"{session_id}: another node took it over")

        def check(tx: Tx) -> int:
            generation = self.held.get(session_id)
            if generation is None:
                raise refusal()
            fleet_rows.fence(tx.conn, session_id, self.epoch, generation, refusal)
            return generation

        def lost(generation: int | None) -> None:
            # only the lease that refused: a unit that ran since may have taken the
            # session again, at a new generation
            if generation is None or self.held.get(session_id) == generation:
                self.held.pop(session_id, None)

        return _FencedJournal(self._journal, check, lost)

    # -- stops across nodes ----------------------------------------------------

    async def stop_elsewhere(self, session_id: str, admission_id: str | None,
                             wait: float) -> str | None:
        """Stop the session's turn running on another node: ask its holder, then wait
        up to ``wait`` seconds for the turn to end. The admission it asked about,
        or None when no turn of the session runs anywhere."""
        aid = await self._journal.write(
            lambda tx: fleet_rows.request_stop(tx.conn, session_id, admission_id, tx.now))
        if aid is None:
            return None
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            row = await self._journal.db.read(lambda c: admissions.get(c, aid))
            if row is None or row["status"] != "started":
                break
            await asyncio.sleep(self.tick / 2)
        return aid

    async def _honour_stops(self) -> None:
        for sid, aid in await self._journal.write(
                lambda tx: fleet_rows.stops_for(tx.conn, self.epoch)):
            log.info("stopping turn %s of session %s, as asked through another node", aid, sid)
            self._stop(sid, aid)

    # -- the tick -------------------------------------------------------------

    async def _run(self) -> None:
        next_beat = 0.0
        while not self._supervisor.draining:
            try:
                if time.monotonic() >= next_beat:
                    if not await self._heartbeat():
                        return
                    next_beat = time.monotonic() + self.ttl / 3
                await self._recover_dead()
                await self._claim_unplaced()
                await self._adopt_held()
                await self._honour_stops()
            except Exception as exc:  # noqa: BLE001 - a failing store: try next tick
                log.warning("fleet tick failed: %s", exc)
            await asyncio.sleep(self.tick)

    async def _heartbeat(self) -> bool:
        alive = await self._journal.write(
            lambda tx: fleet_rows.heartbeat(tx.conn, self.epoch, tx.now, self.ttl))
        if alive:
            return True
        # paused past the lease: another node has recovered this one's work; every
        # turn write of it would be fenced. Stop serving, as a restart would.
        self.fenced_out = True
        self.held.clear()
        log.error("this node (epoch %d) was declared dead by the fleet (it missed its "
                  "heartbeat for %.0f s); stopping", self.epoch, self.ttl)
        self._supervisor.stop_requested.set()
        return False

    async def _recover_dead(self) -> None:
        while (dead := await self._journal.write(
                lambda tx: fleet_rows.claim_dead(tx.conn, tx.now))) is not None:
            epoch = int(dead["epoch"])
            log.warning("node %s (epoch %d) stopped renewing its lease; recovering its work",
                        dead["node_id"], epoch)
            await recover(self._journal, self.epoch, self._scheduler, self._policy,
                          dead_epoch=epoch, schedule=False)
            for recoverer in self._recoverers:
                try:
                    await recoverer(epoch)
                except Exception:  # noqa: BLE001 - one kind failing must not stop the rest
                    log.exception("could not recover node %d's rows", epoch)

    async def _claim_unplaced(self) -> None:
        sessions = await self._journal.db.read(
            lambda c: fleet_rows.unplaced_queued(c, time.time(), CLAIM_BATCH))
        if not sessions:
            return

        def unit(tx: Tx) -> list[str]:
            claimable = fleet_rows.lock_claimable(tx.conn, sessions, tx.now)
            # every take waits for its answer: what is held is noted after the last
            # one, so a unit that fails halfway leaves nothing noted
            taken = [(sid, fleet_rows.take(tx.conn, sid, self.epoch, tx.now, self.ttl))
                     for sid in claimable]
            return [sid for sid, generation in taken if self._hold(sid, generation)]

        if await self._journal.write(unit):
            await self._adopt_held()

    async def _adopt_held(self) -> None:
        """Schedule what others admitted for sessions held here; let idle leases go."""
        with self._scheduler.watch() as left:
            rows = await self._journal.db.read(lambda c: fleet_rows.held_open(c, self.epoch))
        # an admission that finished or was resolved here while the rows were read is
        # stale in them: adopting it would queue or pause it again
        rows = [r for r in rows if r["target_session_id"] in self.held
                and r["admission_id"] not in left]
        if changed := adopt(self._scheduler, rows, self._policy):
            # the node that admitted them could not say what the queue is: the holder does
            def announce(tx: Tx) -> None:
                for sid in changed:
                    tx.event(sid, "session.info", self._scheduler.view(sid))

            await self._journal.write(announce)
            self._pump()
        unknown = {(r["target_session_id"], r["admission_id"]) for r in rows
                   if r["status"] == "unknown"}
        for sid, aids in self._scheduler.paused().items():
            for aid in aids:
                if (sid, aid) not in unknown:  # resolved through another node
                    self._scheduler.unblock(sid, aid)
                    self._pump()

        def release(tx: Tx) -> list[str]:
            keep = self._scheduler.held()
            gone = fleet_rows.release_idle(tx.conn, self.epoch, keep)
            # work may have come back for one of them while the release waited (a
            # cancel that could not be recorded puts its prompt back): take it again
            now_held = set(self._scheduler.held())
            back = [sid for sid in gone if sid in now_held]
            for sid in gone:
                self.held.pop(sid, None)
            for sid in back:
                self._take(tx, sid)
            return gone

        await self._journal.write(release)
