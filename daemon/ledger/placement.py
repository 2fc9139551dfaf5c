"""Where a session's turns run: the one interface a lone owner and a fleet node share.

The core (the admission service, the turn runner, cron) is handed one `Placement`
and asks it, never "is there a fleet?":

- ``place``: in the unit that admits a prompt, whether the session's turns run on
  this owner (an admission placed elsewhere is only recorded here); asked before
  the admission's insert is answered, told after;
- ``journal_for``: the journal a turn of the session writes through;
- ``stop_elsewhere``: stop the session's turn when another owner runs it;
- ``shared``: whether other owners change the store too, unannounced.

and the owner's start-up and shutdown go through it: ``start`` (recovery, before
anything is served), ``serving`` (the listeners are up), ``drain``, ``leave``.

`SingleOwner` is the owner alone on its store (the home's state.db): every
session's turns run here, and at start it recovers what the previous owner of
the home left. `FleetNode` (fleet/node.py) is one node of several on one
PostgreSQL database: leases, fencing, and the recovery of dead nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from ..runtime.supervisor import Supervisor
from .journal import Journal, Tx
from .recovery import recover
from .scheduler import Scheduler

__all__ = ["Placement", "Recoverer", "SingleOwner"]

#: recovers the rows of one kind a stopped owner left, by that owner's epoch (None:
#: every older one, as a restarted lone owner does)
Recoverer = Callable[[int | None], Coroutine[Any, Any, None]]


class Placement(Protocol):
    """See the module docstring."""

    @property
    def shared(self) -> bool: ...

    def place(self, tx: Tx, session_id: str, admission_id: str) -> Callable[[], bool]:
        """In the unit that admits ``admission_id``, right after its insert was sent
        and before its answer is read: take what the session's turns need here, if
        the admission was inserted. The function returned says, once the insert is
        known to have happened, whether the turns run on this owner (the last thing
        the unit asks: nothing after it may fail)."""

    def journal_for(self, session_id: str) -> Journal: ...

    async def stop_elsewhere(self, session_id: str, admission_id: str | None,
                             wait: float) -> str | None: ...

    async def start(self, address: str | None, home: str, pump: Callable[[], None],
                    stop: Callable[[str, str], Any], *, settle: Sequence[Recoverer],
                    deliver: Mapping[str, Recoverer]) -> None:
        """Before anything is served: recover what stopped owners left. ``settle``
        recovers rows that must be settled before serving (approval prompts);
        ``deliver`` the late deliveries they owe, by name. ``pump`` starts what
        the scheduler allows; ``stop`` cancels a turn running here."""

    async def serving(self, address: str | None) -> None:
        """The owner listens now (``address``: its TCP listener, if any)."""

    async def drain(self) -> None: ...

    async def leave(self) -> None: ...


def _here() -> bool:
    return True


class SingleOwner:
    """The owner alone on its store: every turn runs here, through the one journal."""

    shared = False

    def __init__(self, journal: Journal, scheduler: Scheduler, supervisor: Supervisor, *,
                 epoch: int, policy: str) -> None:
        self._journal = journal
        self._scheduler = scheduler
        self._supervisor = supervisor
        self._epoch = epoch
        self._policy = policy
        self._deliver: Mapping[str, Recoverer] = {}

    def place(self, tx: Tx, session_id: str, admission_id: str) -> Callable[[], bool]:
        return _here

    def journal_for(self, session_id: str) -> Journal:
        return self._journal

    async def stop_elsewhere(self, session_id: str, admission_id: str | None,
                             wait: float) -> str | None:
        return None  # no turn runs anywhere but here

    async def start(self, address: str | None, home: str, pump: Callable[[], None],
                    stop: Callable[[str, str], Any], *, settle: Sequence[Recoverer],
                    deliver: Mapping[str, Recoverer]) -> None:
        """The ledger back into the scheduler (started admissions of older epochs
        become unknown), then ``settle``; ``deliver`` waits until the owner serves,
        so the turns the deliveries admit can run."""
        await recover(self._journal, self._epoch, self._scheduler, self._policy)
        for recoverer in settle:
            await recoverer(None)
        self._deliver = deliver

    async def serving(self, address: str | None) -> None:
        for name, recoverer in self._deliver.items():
            self._supervisor.spawn(recoverer(None), f"{name}-recovery")

    async def drain(self) -> None:
        return None

    async def leave(self) -> None:
        return None
