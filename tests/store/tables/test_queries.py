"""The per-table queries, on a real migrated SQLite file (no event loop needed)."""

import sqlite3
from contextlib import closing

import pytest

from tether.store.sqlite.migrations import migrate
from tether.store.tables import admissions, events, messages, runtime, sessions, tokens

# the statuses each statement may start from (daemon/ledger/rules.py decides them)
QUEUED = ("queued",)
STARTED = ("started",)
OPEN = ("queued", "started", "unknown")


@pytest.fixture
def conn(tmp_path):
    with closing(sqlite3.connect(tmp_path / "state.db", isolation_level=None)) as c:
        c.row_factory = sqlite3.Row
        c.execute("PRAGMA foreign_keys=ON")
        migrate(c)
        yield c


def new_session(conn, sid, now=1.0, **over):
    fields = {"session_id": sid, "request_id": None, "params_digest": None,
              "parent_session_id": None, "source": "cli", "title": None, "cwd": None,
              "options": {}, "now": now, **over}
    sessions.insert(conn, **fields)


def admit(conn, aid, sid="S", request_id=None, principal="local", now=1.0):
    return admissions.insert_new(
        conn, admission_id=aid, target_session_id=sid, principal_id=principal,
        request_id=request_id or aid, payload_json='{"finite":false,"text":"t"}',
        payload_digest="d", owner_epoch=1, now=now)


# -- sessions -----------------------------------------------------------------------


def test_session_round_trip_and_lookup_by_request(conn):
    new_session(conn, "S", request_id="req", params_digest="pd", title="T",
                options={"model": "m", "toolsets": ["a"]})
    row = sessions.get(conn, "S")
    assert row["title"] == "T" and row["options"] == {"model": "m", "toolsets": ["a"]}
    assert row["message_count"] == 0 and row["created_at"] == row["updated_at"] == 1.0
    assert sessions.get_by_request(conn, "req")["session_id"] == "S"
    assert sessions.get(conn, "nope") is None and sessions.get_by_request(conn, "x") is None
    with pytest.raises(sqlite3.IntegrityError):
        new_session(conn, "S2", request_id="req")


def test_session_pages_are_newest_created_first_and_complete(conn):
    for i in range(7):
        new_session(conn, f"S{i}", now=float(i % 3))  # ties on created_at
    seen, cursor = [], None
    while True:
        page = sessions.list_page(conn, 3, cursor)
        seen += [r["session_id"] for r in page]
        if len(page) < 3:
            break
        cursor = (page[-1]["created_at"], page[-1]["session_id"])
        # a turn in a session not listed yet does not move it past the cursor
        for row in [sessions.get(conn, f"S{i}") for i in range(7)]:
            if row["session_id"] not in seen:
                sessions.touch(conn, row["session_id"], 100.0 + len(seen), 2)
                break
    assert sorted(seen) == [f"S{i}" for i in range(7)] and len(seen) == 7
    keys = [(sessions.get(conn, s)["created_at"], s) for s in seen]
    assert keys == sorted(keys, reverse=True)
    plan = " ".join(str(tuple(r)) for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT session_id FROM sessions WHERE (created_at, session_id) "
        "< (1.0, 'x') ORDER BY created_at DESC, session_id DESC LIMIT 3"))
    assert "sessions_created" in plan and "TEMP B-TREE" not in plan, plan


def test_a_child_session_names_its_parent(conn):
    new_session(conn, "P")
    new_session(conn, "C1", parent_session_id="P")
    assert sessions.get(conn, "C1")["parent_session_id"] == "P"
    assert sessions.get(conn, "P")["parent_session_id"] is None
    with pytest.raises(sqlite3.IntegrityError):  # a parent that does not exist
        new_session(conn, "C2", parent_session_id="missing")


# -- messages -----------------------------------------------------------------------


def test_messages_append_in_order_and_count_on_the_session(conn):
    new_session(conn, "S")
    call = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    messages.append(conn, "S", [{"role": "user", "content": "hi", "admission_id": "a"}], 2.0)
    messages.append(conn, "S", [
        {"role": "assistant", "content": None, "tool_calls": call},
        {"role": "tool", "content": "r", "tool_call_id": "c1", "name": "f"},
        {"role": "assistant", "content": "done"}], 3.0)
    messages.append(conn, "S", [], 9.0)  # nothing to add changes nothing
    got = messages.list_for(conn, "S")
    assert [(m["role"], m["content"]) for m in got] == [
        ("user", "hi"), ("assistant", None), ("tool", "r"), ("assistant", "done")]
    assert got[0]["admission_id"] == "a"
    assert got[1]["tool_calls"] == call and got[0]["tool_calls"] is None
    assert got[2]["tool_call_id"] == "c1" and got[2]["name"] == "f"
    row = sessions.get(conn, "S")
    assert row["message_count"] == 4 and row["updated_at"] == 3.0


def test_messages_need_a_session_and_a_known_role(conn):
    with pytest.raises(sqlite3.IntegrityError):
        messages.append(conn, "missing", [{"role": "user", "content": "x"}], 1.0)
    new_session(conn, "S")
    with pytest.raises(sqlite3.IntegrityError):
        messages.append(conn, "S", [{"role": "narrator", "content": "x"}], 1.0)


# -- admissions ---------------------------------------------------------------------


def test_admission_identity_is_unique_per_principal_and_session(conn):
    new_session(conn, "S")
    new_session(conn, "T")
    row = admit(conn, "a1", request_id="in")
    assert row["status"] == "queued" and row["outcome"] is None and row["seq"] >= 1
    assert admissions.find(conn, "local", "S", "in")["admission_id"] == "a1"
    assert admit(conn, "a2", request_id="in") is None  # the identity is taken
    assert admissions.get(conn, "a2") is None
    # the same request_id is another identity in another session or for another principal
    admit(conn, "a3", sid="T", request_id="in")
    admit(conn, "a4", request_id="in", principal="delegation")
    assert admissions.find(conn, "delegation", "S", "in")["admission_id"] == "a4"
    assert admissions.find(conn, "cron", "S", "in") is None


def test_admission_status_machine(conn):
    new_session(conn, "S")
    admit(conn, "a1")
    assert admissions.mark_started(conn, "a1", epoch=2, now=5.0, from_statuses=QUEUED)
    assert not admissions.mark_started(conn, "a1", epoch=2, now=6.0, from_statuses=QUEUED)  # only from queued
    row = admissions.get(conn, "a1")
    assert (row["status"], row["owner_epoch"], row["started_at"]) == ("started", 2, 5.0)
    assert admissions.finish(conn, "a1", "completed", '{"text":"x"}', 7.0, OPEN)
    assert not admissions.finish(conn, "a1", "failed", None, 8.0, OPEN)  # terminal stays terminal
    row = admissions.get(conn, "a1")
    assert (row["status"], row["outcome"], row["finished_at"]) == ("terminal", "completed", 7.0)
    admit(conn, "a2")
    assert admissions.finish(conn, "a2", "cancelled", None, 9.0, OPEN)  # queued → cancelled
    assert not admissions.mark_started(conn, "a2", epoch=2, now=9.5, from_statuses=QUEUED)
    with pytest.raises(sqlite3.IntegrityError):
        admissions.finish(conn, admit(conn, "a3")["admission_id"], "exploded", None, 1.0, OPEN)


def test_started_admissions_of_older_epochs_become_unknown(conn):
    new_session(conn, "S")
    for aid, epoch in (("old", 1), ("new", 3)):
        admit(conn, aid)
        admissions.mark_started(conn, aid, epoch=epoch, now=1.0, from_statuses=QUEUED)
    admit(conn, "queued")
    admit(conn, "done")
    admissions.mark_started(conn, "done", epoch=1, now=1.0, from_statuses=QUEUED)
    admissions.finish(conn, "done", "completed", None, 2.0, OPEN)
    assert admissions.mark_unknown_before(conn, 3, STARTED) == ["old"]
    statuses = {a: admissions.get(conn, a)["status"] for a in ("old", "new", "queued", "done")}
    assert statuses == {"old": "unknown", "new": "started", "queued": "queued",
                        "done": "terminal"}
    assert admissions.finish(conn, "old", "interrupted", None, 4.0, OPEN)  # unknown → interrupted


def test_open_admissions_in_ledger_order(conn):
    new_session(conn, "S")
    new_session(conn, "T")
    for aid, sid in (("a1", "S"), ("b1", "T"), ("a2", "S"), ("a3", "S")):
        admit(conn, aid, sid=sid)
    admissions.finish(conn, "a2", "cancelled", None, 1.0, OPEN)
    assert [r["admission_id"] for r in admissions.open_for_session(conn, "S")] == ["a1", "a3"]
    assert [r["admission_id"] for r in admissions.all_open(conn)] == ["a1", "b1", "a3"]
    assert admissions.open_count(conn, "S") == 2 and admissions.open_count(conn, "T") == 1
    seqs = [admissions.get(conn, a)["seq"] for a in ("a1", "b1", "a2", "a3")]
    assert seqs == sorted(seqs)  # seq is the ledger's order, across sessions


def test_an_admission_needs_its_session(conn):
    with pytest.raises(sqlite3.IntegrityError):
        admit(conn, "a1", sid="missing")


# -- events -------------------------------------------------------------------------


def test_event_seqs_are_per_session_and_gap_free(conn):
    assert events.last_seq(conn, "S") == 0
    assert [events.append(conn, "S", "t", "{}", None, 1.0) for _ in range(3)] == [1, 2, 3]
    assert events.append(conn, "T", "t", "{}", "a", 1.0) == 1
    conn.execute("BEGIN")
    conn.execute("SAVEPOINT unit")
    assert events.append(conn, "S", "lost", "{}", None, 1.0) == 4
    conn.execute("ROLLBACK TO unit")
    conn.execute("RELEASE unit")
    conn.execute("COMMIT")
    assert events.append(conn, "S", "t", '{"k":1}', "a", 2.0) == 4  # the rollback left no gap
    assert (events.last_seq(conn, "S"), events.last_seq(conn, "T")) == (4, 1)
    tail = events.since(conn, "S", 2, 10)
    assert [(r["seq"], r["type"]) for r in tail] == [(3, "t"), (4, "t")]
    assert tail[1]["payload_json"] == '{"k":1}' and tail[1]["admission_id"] == "a"
    assert [r["seq"] for r in events.since(conn, "S", 0, 2)] == [1, 2]
    assert events.since(conn, "S", 4, 10) == []


def test_payloads_of_one_type_in_seq_order(conn):
    events.append(conn, "S", "a", '{"n":1}', None, 1.0)
    events.append(conn, "S", "b", '{"n":2}', None, 1.0)
    events.append(conn, "S", "a", '{"n":3}', None, 1.0)
    events.append(conn, "T", "a", '{"n":4}', None, 1.0)
    assert events.payloads_of_type(conn, "S", "a") == ['{"n":1}', '{"n":3}']
    assert events.payloads_of_type(conn, "S", "c") == []


def test_an_event_page_ends_once_its_payloads_reach_max_bytes(conn):
    for _ in range(5):
        events.append(conn, "S", "t", "x" * 10, None, 1.0)

    def seqs(limit: int, max_bytes: int | None, after: int = 0) -> list[int]:
        return [r["seq"] for r in events.since(conn, "S", after, limit, max_bytes)]

    assert seqs(10, 25) == [1, 2, 3]  # 10 + 10 < 25 <= 30: the third ends the page
    assert seqs(10, 30) == [1, 2, 3]
    assert seqs(10, 1) == [1]  # at least one event, however large
    assert seqs(2, 1000) == [1, 2]  # the count limit still holds
    assert seqs(10, 25, after=3) == [4, 5]
    assert seqs(10, None) == [1, 2, 3, 4, 5]


# -- runtime ------------------------------------------------------------------------


def test_epoch_increments_per_start(conn):
    assert runtime.current_epoch(conn) == 0
    assert [runtime.bump_epoch(conn) for _ in range(3)] == [1, 2, 3]
    assert runtime.current_epoch(conn) == 3


def test_tokens_are_found_by_hash_only(conn):
    tokens.insert(conn, "tok_1", "hash-1", "laptop", 1.0)
    assert tokens.valid_id(conn, "hash-1", 2.0) == "tok_1"
    assert tokens.valid_id(conn, "tok_1", 2.0) is None
    with pytest.raises(sqlite3.IntegrityError):
        tokens.insert(conn, "tok_2", "hash-1", None, 2.0)


def test_insert_new_yields_the_row_or_none_for_an_existing_identity(conn):
    new_session(conn, "S")
    fields = {"target_session_id": "S", "principal_id": "local", "request_id": "in",
              "payload_json": "{}", "payload_digest": "d", "owner_epoch": 1, "now": 1.0}
    row = admissions.insert_new(conn, admission_id="a1", **fields)
    assert row == admissions.get(conn, "a1") and row["status"] == "queued"
    assert admissions.insert_new(conn, admission_id="a2", **fields) is None
    assert admissions.get(conn, "a2") is None
    assert admissions.find(conn, "local", "S", "in")["admission_id"] == "a1"
    with pytest.raises(sqlite3.IntegrityError):  # other constraints still raise
        admissions.insert_new(conn, admission_id="a3", **{**fields, "target_session_id": "X"})


def test_open_count_is_none_without_the_session(conn):
    assert admissions.open_count(conn, "S") is None
    new_session(conn, "S")
    assert admissions.open_count(conn, "S") == 0
    admit(conn, "a1")
    admit(conn, "a2")
    admissions.finish(conn, "a2", "cancelled", None, 1.0, OPEN)
    assert admissions.open_count(conn, "S") == 1


def test_admit_says_whether_the_session_had_a_title_and_its_last_event(conn):
    def attempt(aid, sid="S", bound=None):
        return admissions.admit(
            conn, admission_id=aid, target_session_id=sid, principal_id="local",
            request_id=aid, payload_json="{}", payload_digest="d", owner_epoch=1, now=1.0,
            bound=bound)()

    missing = attempt("a0")
    assert (missing.present, missing.row) == (False, None)
    new_session(conn, "S")
    first = attempt("a1")
    assert first.untitled and first.row["admission_id"] == "a1" and first.open == 0
    assert first.last_seq == 0  # no event yet
    sessions.title_if_untitled(conn, "S", "named")
    for _ in range(2):
        events.append(conn, "S", "session.info", "{}", None, 1.0)
    second = attempt("a2")
    assert not second.untitled and second.open == 1 and second.last_seq == 2
    new_session(conn, "E", title="")  # an empty title is no title
    assert attempt("a3", "E").untitled
    full = attempt("a4", bound=2)  # at its bound: nothing inserted, the count said
    assert (full.present, full.open, full.row) == (True, 2, None)
    assert admissions.get(conn, "a4") is None
