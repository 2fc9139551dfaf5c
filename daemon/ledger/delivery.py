"""Late delivery: a result that arrives after the turn that asked for it, delivered once.

Three producers deliver into a session after the turn that started them has
ended: background delegations (delegation/background.py), the notices of
background processes (toolsets/processes.py) and cron runs whose job delivers
to a session (cron/delivery.py). Each keeps a durable row whose delivery is
``pending`` until it is delivered, and all three follow one rule, written here:

*Exactly once.* A delivery is one store unit that *claims* the row — a
conditional UPDATE, pending → delivered, that matches only a finished,
undelivered row — and writes what the delivery is: a follow-up admission
of the producer's principal whose request_id is the row's id, with the event
that announces it (`LateDelivery`), or for cron only the event
(`announce_once`). If the claim matches nothing the unit raises
`AlreadyDelivered` and rolls back entirely, admission included; and the
ledger's unique identity (principal, session, request_id) makes any attempt
after a crash find the first admission instead of adding one. So a crash
between recording a result and delivering it, or a second deliver of the same
row, delivers nothing twice and loses nothing: the row is still pending until
the unit that delivers it commits.

*Into the right session.* The session is read from the row (stored when the
producer started), never from a connection or any "current" state. The
follow-up turn runs with the per-turn options (model, provider, …) of the
admission that started the producer, copied from the ledger, so a repeated
attempt builds the same payload.

*Recovered at start.* `recover` is the one path an owner takes at start for
each producer: finish what an older owner left running (the producer's unit),
then hand every row still due to its deliverer. Writes that must happen go
through `until_stored`: retried until the store heals, given up only while the
owner drains (after ATTEMPTS_WHILE_DRAINING tries; the next start delivers).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from tether.store import StorageError
from tether.store.conn import Conn
from tether.store.tables import admissions

from ..runtime.supervisor import Supervisor
from .journal import Journal, Tx, Unit, never, until_stored
from .rules import TURN_OPTION_KEY, encode_payload

__all__ = ["Admit", "AlreadyDelivered", "Letter", "LateDelivery", "claim", "announce_once",
           "recover", "ATTEMPTS_WHILE_DRAINING"]

log = logging.getLogger("tether.delivery")

#: The window between recording a producer's end and delivering it, by principal:
#: the crash suite (tests/faults.py) hangs a pause here in the owners it starts, to
#: kill one inside that window. Empty in every owner but those.
BEFORE_DELIVERY: dict[str, Callable[[], Awaitable[None]]] = {}

#: while the owner drains, a failing result or delivery write is given up after this
#: many tries (the next owner's recovery finishes and delivers the row)
ATTEMPTS_WHILE_DRAINING = 5


class Admit(Protocol):
    """AdmissionService.admit: record an admission (or find it) and return its receipt."""

    def __call__(self, principal: str, session_id: str, request_id: str, payload_json: str,
                 extra_unit: Callable[[Tx], None] | None = None,
                 internal: bool = False) -> Awaitable[dict[str, Any]]: ...


class AlreadyDelivered(Exception):
    """The claim found the row delivered already: the delivery's unit rolls back."""


def claim(tx: Tx, mark: Callable[[Conn, float], bool]) -> None:
    """In a delivery's unit: ``mark`` (the row pending → delivered, a conditional
    UPDATE) or AlreadyDelivered, which undoes the whole unit, whatever it wrote
    before or after."""
    if not mark(tx.conn, tx.now):
        raise AlreadyDelivered


async def announce_once(journal: Journal, unit: Unit[None], what: str,
                        give_up: Callable[[int], bool] = never) -> bool:
    """Write a delivery that is an event only (``unit`` claims, then announces);
    False if it had been delivered already."""
    try:
        await journal.persist(unit, what, give_up)
    except AlreadyDelivered:
        return False
    return True


async def recover(journal: Journal, what: str, key: str,
                  due: Callable[[Conn], list[dict[str, Any]]],
                  on_due: Callable[[dict[str, Any]], Awaitable[None]],
                  finish_orphans: Unit[None] | None = None,
                  give_up: Callable[[int], bool] = never) -> None:
    """At an owner's start, for one producer: write ``finish_orphans`` (what an
    older owner left running ends), then ``on_due`` every row ``due`` lists (each
    named by its ``key`` column). A row that fails is logged and left for the next
    start."""
    try:
        if finish_orphans is not None:
            await journal.persist(finish_orphans, f"the recovery of {what}", give_up)
        rows = await journal.db.read(due)
    except StorageError as exc:
        log.error("could not recover %s: %s", what, exc.detail)
        return
    for row in rows:
        try:
            await on_due(row)
        except Exception:  # noqa: BLE001 - the next start tries again
            log.exception("could not deliver %s %s", what, row.get(key))


@dataclass
class Letter:
    """What one row delivers: the follow-up admission's text and payload fields,
    where it goes, and the event(s) written with it."""

    session_id: str
    text: str
    #: payload fields naming the producer's row, e.g. {"process_id": …}
    fields: dict[str, Any] = field(default_factory=dict)
    #: writes the announcing event(s), given the follow-up admission's id
    announce: Callable[[Tx, str | None], None] | None = None


class LateDelivery:
    """One producer's deliveries into the ledger: each row's follow-up admission
    (principal ``principal``, request_id = the row's id), at most once."""

    def __init__(self, journal: Journal, supervisor: Supervisor, admit: Admit, *,
                 principal: str, what: str, get: Callable[[Conn, str], dict[str, Any] | None],
                 mark: Callable[[Conn, str, float], bool], origin_column: str,
                 letter: Callable[[dict[str, Any]], Letter]) -> None:
        self._journal = journal
        self._supervisor = supervisor
        self._admit = admit
        self.principal = principal
        self._what = what
        self._get = get
        self._mark = mark
        #: the row's column naming the admission whose turn started the producer:
        #: the follow-up runs with that turn's per-turn options
        self._origin_column = origin_column
        self._letter = letter

    def give_up(self, failures: int) -> bool:
        """While the owner drains, a failing write ends after a few tries."""
        return self._supervisor.draining and failures >= ATTEMPTS_WHILE_DRAINING

    async def finish(self, key: str, unit: Unit[Any], deliver: bool = True) -> None:
        """Record the producer's end (``unit``), then deliver it when ``deliver``.
        Never raises but for cancellation: what is not written here the next
        owner's recovery writes."""
        try:
            await self._journal.persist(unit, f"the end of {self._what} {key}", self.give_up)
            if deliver:
                # the crash suite kills the owner here: finished, not yet delivered
                if (pause := BEFORE_DELIVERY.get(self.principal)) is not None:
                    await pause()
                await self.deliver(key)
        except Exception:  # noqa: BLE001 - recovery records and delivers on the next start
            log.exception("could not record/deliver %s %s", self._what, key)

    async def deliver(self, key: str) -> None:
        """Deliver a finished row, exactly once; a failing store is retried."""
        await until_stored(lambda: self._deliver_once(key), f"the delivery of {self._what} {key}",
                           self.give_up)

    async def _deliver_once(self, key: str) -> bool:
        get, column = self._get, self._origin_column

        def read(c: Conn) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
            row = get(c, key)
            origin = row[column] if row is not None else None
            return row, admissions.get(c, origin) if origin else None

        row, origin = await self._journal.db.read(read)
        if row is None or row["state"] == "running" or row["delivery_state"] != "pending":
            return False
        letter = self._letter(row)
        payload: dict[str, Any] = {"text": letter.text, "finite": False, **letter.fields}
        if origin is not None:
            options = orjson.loads(origin["payload_json"]).get(TURN_OPTION_KEY)
            if options:
                payload[TURN_OPTION_KEY] = options
        principal, sid, mark = self.principal, letter.session_id, self._mark

        def unit(tx: Tx) -> None:
            claim(tx, lambda c, now: mark(c, key, now))
            if letter.announce is not None:
                adm = admissions.find(tx.conn, principal, sid, key)
                letter.announce(tx, adm["admission_id"] if adm else None)

        with contextlib.suppress(AlreadyDelivered):
            await self._admit(principal, sid, key, encode_payload(payload), extra_unit=unit,
                              internal=True)
            return True
        return False

    async def recover(self, finish_orphans: Unit[None],
                      due: Callable[[Conn], list[dict[str, Any]]], key: str) -> None:
        """At start: ``finish_orphans``, then deliver every row ``due`` lists."""
        await recover(self._journal, self._what + "s", key, due,
                      lambda row: self.deliver(row[key]), finish_orphans, self.give_up)
