"""The pure scheduler: per-session FIFO, one turn per session, a global bound,
cancel, and sessions paused behind unknown admissions."""

import pytest

from tether.daemon.ledger.scheduler import Scheduler


def drain(s: Scheduler) -> list[tuple[str, str]]:
    out = []
    while (item := s.next()) is not None:
        out.append(item)
    return out


def test_one_turn_per_session_in_fifo_order():
    s = Scheduler(max_running=8)
    for aid in ("a1", "a2", "a3"):
        s.enqueue("A", aid)
    assert drain(s) == [("A", "a1")]
    assert s.running == {"A": "a1"}
    assert s.queued("A") == ["a2", "a3"]
    s.finished("A")
    assert drain(s) == [("A", "a2")]
    s.finished("A")
    assert drain(s) == [("A", "a3")]
    s.finished("A")
    assert drain(s) == [] and s.running == {} and s.queued("A") == []


def test_sessions_run_concurrently_up_to_the_bound_in_arrival_order():
    s = Scheduler(max_running=2)
    s.enqueue("A", "a1")
    s.enqueue("B", "b1")
    s.enqueue("C", "c1")
    s.enqueue("A", "a2")
    assert drain(s) == [("A", "a1"), ("B", "b1")]
    # C waited longer than A's second admission
    s.finished("A")
    assert drain(s) == [("C", "c1")]
    s.finished("B")
    assert drain(s) == [("A", "a2")]


def test_cancel_removes_only_queued_admissions():
    s = Scheduler(max_running=1)
    s.enqueue("A", "a1")
    s.enqueue("A", "a2")
    s.enqueue("A", "a3")
    assert drain(s) == [("A", "a1")]
    assert s.cancel("A", "a1") is None  # running, not queued
    assert s.cancel("A", "a2") == 0  # its place in the queue
    assert s.cancel("A", "a2") is None
    assert s.cancel("B", "zz") is None
    s.finished("A")
    assert drain(s) == [("A", "a3")]


def test_cancelling_the_last_queued_admission_forgets_the_session():
    s = Scheduler(max_running=1)
    s.enqueue("A", "a1")
    s.enqueue("B", "b1")
    assert s.cancel("A", "a1") == 0
    assert drain(s) == [("B", "b1")]


def test_a_cancel_that_could_not_be_recorded_is_restored_in_place():
    s = Scheduler(max_running=1)
    for a in ("a1", "a2", "a3"):
        s.enqueue("A", a)
    place = s.cancel("A", "a2")
    assert place == 1
    s.restore("A", "a2", place)
    assert s.queued("A") == ["a1", "a2", "a3"]
    only = Scheduler(max_running=1)
    only.enqueue("B", "b1")
    only.restore("B", "b1", only.cancel("B", "b1"))  # the session is ready again
    assert drain(only) == [("B", "b1")]


def test_an_unknown_admission_pauses_its_session_only():
    s = Scheduler(max_running=4)
    s.block("A", "u1")
    s.enqueue("A", "a1")
    s.enqueue("B", "b1")
    assert s.unknown("A") and not s.unknown("B")
    assert drain(s) == [("B", "b1")]
    s.enqueue("A", "a2")  # still paused
    assert drain(s) == []
    assert s.queued("A") == ["a1", "a2"]
    s.unblock("A", "u1")
    assert not s.unknown("A")
    assert drain(s) == [("A", "a1")]


def test_every_unknown_admission_must_be_resolved():
    s = Scheduler(max_running=4)
    s.enqueue("A", "a1")
    s.block("A", "u1")  # blocking after enqueue pauses too
    s.block("A", "u2")
    s.unblock("A", "u1")
    assert drain(s) == []
    s.unblock("A", "never-blocked")
    assert drain(s) == []
    s.unblock("A", "u2")
    assert drain(s) == [("A", "a1")]


def test_unblock_of_a_session_with_nothing_queued_starts_nothing():
    s = Scheduler(max_running=1)
    s.block("A", "u1")
    s.unblock("A", "u1")
    assert drain(s) == []
    s.enqueue("A", "a1")
    assert drain(s) == [("A", "a1")]


def test_the_bound_must_be_positive():
    with pytest.raises(ValueError):
        Scheduler(max_running=0)


def test_a_watch_collects_what_leaves_while_it_is_held():
    """Finished, cancelled and resolved admissions are collected while a watch is
    held; what is merely queued or blocked is not, and nothing after the block."""
    s = Scheduler(max_running=4)
    s.enqueue("s1", "a1")
    s.enqueue("s2", "a2")
    s.block("s3", "u3")
    with s.watch() as left:
        assert s.next() == ("s1", "a1")
        s.finished("s1")
        assert s.cancel("s2", "a2") == 0
        s.unblock("s3", "u3")
        s.enqueue("s4", "a4")
        s.block("s5", "u5")
        s.finished("s6")  # nothing ran there
        assert left == {"a1", "a2", "u3"}
    s.unblock("s5", "u5")
    assert left == {"a1", "a2", "u3"}


def test_start_now_only_when_nothing_is_ahead():
    s = Scheduler(max_running=2)
    assert s.start_now("A", "a1")  # idle session, free slot, nobody waiting
    assert s.running == {"A": "a1"} and s.view("A") == {"pending": [], "running": "a1"}
    assert not s.start_now("A", "a2")  # its session runs a turn
    s.admitting("B", "b1")
    assert not s.start_now("B", "b2")  # an earlier admission of B is committing
    s.admitted("B", "b1", committed=True)
    assert not s.start_now("C", "c1")  # B is ready and waited first
    assert drain(s) == [("B", "b1")]
    assert not s.start_now("C", "c1")  # both slots taken
    s.finished("B")
    s.block("D", "d0")
    assert not s.start_now("D", "d1")  # paused behind an unknown admission
    assert s.start_now("C", "c1")
    s.admitted("C", "c1", committed=True)
    s.admitted("A", "a1", committed=True)
    assert s.running == {"A": "a1", "C": "c1"} and drain(s) == []


def test_a_slot_start_now_took_is_freed_if_its_unit_does_not_commit():
    s = Scheduler(max_running=1)
    assert s.start_now("A", "a1")
    s.enqueue("B", "b1")  # waits for the only slot
    assert drain(s) == []
    s.admitted("A", "a1", committed=False)
    assert s.running == {} and s.held() == ["B"]
    assert drain(s) == [("B", "b1")]
