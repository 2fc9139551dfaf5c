"""A fleet node's tick adopts the open admissions of the sessions it holds from a
read of the store; what leaves the scheduler while that read is in flight (a
turn that ends, an unknown admission resolved here) must not come back from the
read's stale rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether.daemon.fleet.node import FleetNode
from tether.daemon.ledger.scheduler import Scheduler


class _Reads:
    """The store's read side: answers ``rows``, running ``during`` first, as a
    resolve that lands while the read is in flight."""

    def __init__(self, rows: list[dict[str, Any]], during: Callable[[], None]) -> None:
        self.rows, self.during = rows, during

    async def read(self, fn: Callable[..., Any]) -> list[dict[str, Any]]:
        self.during()
        return self.rows


class _Journal:
    def __init__(self, db: _Reads) -> None:
        self.db = db
        self.units = 0

    async def write(self, fn: Callable[..., Any]) -> list[str]:
        self.units += 1  # the idle-lease release: nothing let go
        return []


def _node(scheduler: Scheduler, rows: list[dict[str, Any]],
          during: Callable[[], None]) -> FleetNode:
    node = FleetNode(_Journal(_Reads(rows, during)), scheduler, None,  # type: ignore[arg-type]
                     node_id="n1", epoch=7, lease_seconds=10.0, policy="manual")
    node.held["s1"] = 1
    return node


async def test_an_unknown_admission_resolved_during_the_read_stays_resolved():
    s = Scheduler(max_running=4)
    s.block("s1", "adm_u")
    rows = [{"target_session_id": "s1", "admission_id": "adm_u", "status": "unknown"}]
    node = _node(s, rows, lambda: s.unblock("s1", "adm_u"))
    await node._adopt_held()
    assert s.unknown("s1") == []
    assert s.paused() == {}


async def test_a_turn_that_ended_during_the_read_is_not_queued_again():
    s = Scheduler(max_running=4)
    s.enqueue("s1", "adm_q")
    assert s.next() == ("s1", "adm_q")
    rows = [{"target_session_id": "s1", "admission_id": "adm_q", "status": "queued"}]
    node = _node(s, rows, lambda: s.finished("s1"))
    await node._adopt_held()
    assert s.queued("s1") == [] and s.next() is None


async def test_rows_read_undisturbed_are_adopted():
    s = Scheduler(max_running=4)
    rows = [{"target_session_id": "s1", "admission_id": "adm_q", "status": "queued"},
            {"target_session_id": "s1", "admission_id": "adm_u", "status": "unknown"},
            {"target_session_id": "s2", "admission_id": "adm_x", "status": "queued"}]
    node = _node(s, rows, lambda: None)
    await node._adopt_held()
    assert s.unknown("s1") == ["adm_u"]
    assert s.queued("s1") == ["adm_q"]
    assert s.queued("s2") == []  # not held here
