"""The group-commit writer of store/sqlite/db.py, and its migrations.

Units run on the event loop; COMMIT runs on the commit thread (a small group's,
on a disk whose commits are short, on the loop). To make
grouping deterministic, ``ParkedCommit`` holds the commit of the group in flight
on a ``threading.Event`` while the units under test are queued behind it;
releasing it lets the database fold everything queued into its next transaction.
"""

import asyncio
import sqlite3
import threading
from contextlib import closing

import pytest

from tether.store import SCHEMA_VERSION, Database, StorageError
from tether.store.sqlite import migrations
from tether.store.sqlite.db import LOOP_COMMIT_SECONDS, LOOP_COMMIT_UNITS


def make_table(conn):
    conn.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER)")
    conn.execute("CREATE TABLE IF NOT EXISTS marks (n INTEGER)")


def insert(key, value=0):
    def unit(conn):
        conn.execute("INSERT INTO t(k, v) VALUES (?, ?)", (key, value))
        return key
    return unit


class ParkedCommit:
    """Holds the next COMMIT on the commit thread until ``release()``. Every group
    that writes then commits on that thread (none on the loop, however small)."""

    def __init__(self, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        writer = db._writer
        commit = writer.commit
        monkeypatch.setattr(writer, "loop_commit_units", 0)

        def parked_commit() -> None:
            if not self.gate.is_set():
                self.entered.set()
                self.gate.wait(10)
            commit()

        monkeypatch.setattr(writer, "commit", parked_commit)

    async def wait_parked(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 10)

    def release(self) -> None:
        self.gate.set()


def park(conn):
    """A unit that writes a row of its own: its group's commit is the one parked (a
    group that changed nothing commits on the loop and is never parked)."""
    conn.execute("INSERT INTO marks(n) VALUES (1)")


@pytest.fixture
async def db(tmp_path):
    database = await Database.open(tmp_path / "state.db")
    await database.write(make_table)
    yield database
    await database.close()


async def keys(db):
    return await db.read(lambda c: [r[0] for r in c.execute("SELECT k FROM t ORDER BY k")])


async def test_concurrent_writes_share_one_commit(db, monkeypatch):
    held = ParkedCommit(db, monkeypatch)
    parked = db.submit(park)
    await held.wait_parked()
    before = db.commits
    units = 50
    writes = [asyncio.ensure_future(db.write(insert(f"k{i:02}"))) for i in range(units)]
    await asyncio.sleep(0)  # every write is queued behind the parked commit
    held.release()
    await parked
    assert await asyncio.gather(*writes) == [f"k{i:02}" for i in range(units)]
    # the parked group, then everything queued behind it in one transaction
    assert db.commits - before == 2
    assert len(await keys(db)) == units


async def test_a_failing_unit_rolls_back_alone(db, monkeypatch):
    held = ParkedCommit(db, monkeypatch)
    parked = db.submit(park)
    await held.wait_parked()

    def half_done_then_fail(conn):
        conn.execute("INSERT INTO t(k, v) VALUES ('bad', 1)")
        raise ValueError("the unit's own error")

    first = db.submit(insert("a"))
    failing = db.submit(half_done_then_fail)
    duplicate = db.submit(insert("a"))  # a constraint violation fails only this unit
    last = db.submit(insert("c"))
    held.release()
    await parked
    assert await first == "a"
    with pytest.raises(ValueError, match="own error"):
        await failing
    with pytest.raises(sqlite3.IntegrityError):
        await duplicate
    assert await last == "c"
    assert await keys(db) == ["a", "c"]


async def test_a_cancelled_caller_does_not_lose_its_committed_unit(db, monkeypatch):
    held = ParkedCommit(db, monkeypatch)
    parked = db.submit(park)
    await held.wait_parked()
    announced = []
    task = asyncio.create_task(db.write(insert("kept"), after_commit=announced.append))
    await asyncio.sleep(0)  # the unit is queued
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    held.release()
    await parked
    await db.write(lambda c: None)  # a later unit commits after it
    assert await keys(db) == ["kept"]
    assert announced == ["kept"]  # committed work is still announced


async def test_after_commit_hooks_run_in_submit_order(db, monkeypatch):
    held = ParkedCommit(db, monkeypatch)
    parked = db.submit(park)
    await held.wait_parked()
    order = []
    futures = []
    for i in range(10):
        if i == 4:
            futures.append(db.submit(lambda c: 1 / 0, after_commit=order.append))
        else:
            futures.append(db.submit(insert(f"k{i}"), after_commit=order.append))
    held.release()
    await parked
    await asyncio.gather(*futures, return_exceptions=True)
    # a failed unit has nothing to announce
    assert order == [f"k{i}" for i in range(10) if i != 4]


async def test_reads_see_only_committed_data(db, monkeypatch):
    held = ParkedCommit(db, monkeypatch)
    pending = db.submit(insert("pending"))
    await held.wait_parked()  # the unit ran; its commit has not happened yet
    assert await keys(db) == []
    assert await db.lookup(lambda c: c.execute("SELECT k FROM t").fetchall()) == []
    held.release()
    await pending
    assert await keys(db) == ["pending"]
    assert await db.lookup(lambda c: [r[0] for r in c.execute("SELECT k FROM t")]) == ["pending"]


async def test_a_failing_read_is_a_storage_error_and_the_reader_goes_on(db):
    await db.write(insert("a"))
    for read in (db.read, db.lookup):
        with pytest.raises(StorageError) as err:
            await read(lambda c: c.execute("SELECT * FROM no_such_table").fetchall())
        assert err.value.reason == "storage_error" and "no_such_table" in err.value.detail

        def own_error(c):
            raise KeyError("the caller's own")

        with pytest.raises(KeyError):  # not a storage failure: left as it is
            await read(own_error)
    assert await keys(db) == ["a"]  # the read transaction of each failure was ended


async def test_a_read_sees_one_snapshot_while_writes_commit(db):
    await db.write(insert("a"))
    started, go_on = threading.Event(), threading.Event()

    def two_queries(c):
        first = c.execute("SELECT COUNT(*) FROM t").fetchone()[0]
        started.set()
        go_on.wait(10)
        return first, c.execute("SELECT COUNT(*) FROM t").fetchone()[0]

    reading = asyncio.ensure_future(db.read(two_queries))
    assert await asyncio.to_thread(started.wait, 10)
    await db.write(insert("b"))  # commits while the read is between its queries
    go_on.set()
    assert await reading == (1, 1)
    assert await keys(db) == ["a", "b"]


async def test_a_write_lock_held_elsewhere_is_waited_for_off_the_loop(db, tmp_path):
    other = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(db.write(insert("late")))
        ticks = 0
        for _ in range(20):  # the loop keeps running while the write waits for the lock
            await asyncio.sleep(0.005)
            ticks += 1
        assert ticks == 20 and not write.done()
        other.execute("COMMIT")
        assert await asyncio.wait_for(write, 10) == "late"
    finally:
        other.close()
    assert await keys(db) == ["late"]


async def test_closed_database_refuses_work(tmp_path):
    db = await Database.open(tmp_path / "state.db")
    await db.close()
    with pytest.raises(StorageError) as err:
        await db.write(lambda c: None)
    assert err.value.reason == "closed"
    with pytest.raises(StorageError):
        await db.read(lambda c: None)
    with pytest.raises(StorageError):
        await db.lookup(lambda c: None)


async def test_before_group_sets_the_writer_up_for_each_group(db):
    read_only = False
    calls = []

    def before_group(conn):
        calls.append(conn.in_transaction)
        conn.execute(f"PRAGMA query_only={int(read_only)}")

    db.before_group = before_group
    assert await db.write(insert("a")) == "a"
    read_only = True
    with pytest.raises(StorageError) as err:
        await db.write(insert("b"))
    assert err.value.reason == "read_only"
    assert await keys(db) == ["a"]  # reads are not the writer's business
    read_only = False
    assert await db.write(insert("c")) == "c"
    assert await keys(db) == ["a", "c"]
    assert calls == [False, False, False]  # once per group, before its BEGIN


async def test_a_failing_before_group_fails_its_group_only(db):
    def broken(conn):
        raise RuntimeError("hook bug")

    db.before_group = broken
    with pytest.raises(RuntimeError, match="hook bug"):
        await db.write(insert("lost"))
    db.before_group = None
    assert await db.write(insert("kept")) == "kept"
    assert await keys(db) == ["kept"]


def user_version(path):
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


def tables(path):
    with closing(sqlite3.connect(path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


async def test_a_new_file_is_migrated_from_version_zero(tmp_path):
    path = tmp_path / "state.db"
    db = await Database.open(path)
    await db.close()
    assert user_version(path) == SCHEMA_VERSION
    assert {"runtime", "sessions", "messages", "session_admissions", "async_delegations",
            "events", "tokens"} <= tables(path)
    # opening again migrates nothing and keeps data
    db = await Database.open(path)
    await db.write(lambda c: c.execute("INSERT INTO runtime(key, value) VALUES ('x', 'y')"))
    await db.close()
    db = await Database.open(path)
    assert await db.read(lambda c: c.execute("SELECT value FROM runtime").fetchall()[0][0]) == "y"
    await db.close()


async def test_a_newer_schema_is_refused_untouched(tmp_path):
    path = tmp_path / "state.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE future (x)")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
        conn.commit()
    with pytest.raises(StorageError) as err:
        await Database.open(path)
    assert f"schema version {SCHEMA_VERSION + 1}" in err.value.detail
    assert user_version(path) == SCHEMA_VERSION + 1
    assert tables(path) == {"future"}


async def test_a_failing_migration_leaves_the_previous_version(tmp_path, monkeypatch):
    path = tmp_path / "state.db"
    db = await Database.open(path)
    await db.close()
    broken = "CREATE TABLE extra (x); INSERT INTO no_such_table VALUES (1)"
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, broken))
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(StorageError):
        await Database.open(path)
    assert user_version(path) == SCHEMA_VERSION
    assert "extra" not in tables(path)


def hold_commit_thread(db):
    """Keeps the commit thread busy until the returned gate is set; the future
    resolves once it is free again."""
    gate = threading.Event()
    loop = asyncio.get_running_loop()
    blocked = loop.create_future()
    db._groups.worker.call(lambda: gate.wait(10), loop,
                           lambda ok, value: blocked.set_result(ok))
    return gate, blocked


async def test_retries_that_find_their_rows_do_not_wait_for_the_commit_thread(db, monkeypatch):
    await db.write(insert("k", 1))
    monkeypatch.setattr(db._writer, "loop_commit_units", 0)  # only a no-change group here
    gate, blocked = hold_commit_thread(db)

    def find_or_skip(conn):  # a retry's shape: an insert that finds the row, a read
        conn.execute("INSERT INTO t(k, v) VALUES ('k', 2) ON CONFLICT DO NOTHING")
        return conn.execute("SELECT v FROM t WHERE k = 'k'").fetchone()[0]

    try:
        assert await asyncio.wait_for(db.write(find_or_skip), 5) == 1
        writing = asyncio.ensure_future(db.write(insert("other")))
        done, _ = await asyncio.wait({writing}, timeout=0.3)
        assert not done  # a group that wrote a row waits for its COMMIT's thread
    finally:
        gate.set()
    assert await blocked is True
    assert await writing == "other"
    assert await keys(db) == ["k", "other"]


async def test_a_small_group_on_a_fast_disk_commits_on_the_loop(db):
    await db.write(insert("warm"))  # the smoothed COMMIT time starts from real ones
    assert db._writer.commit_seconds < LOOP_COMMIT_SECONDS
    gate, blocked = hold_commit_thread(db)
    try:
        # a lone write, then LOOP_COMMIT_UNITS queued together: neither waits for the
        # busy thread, and each is durable when its write returns
        assert await asyncio.wait_for(db.write(insert("lone")), 5) == "lone"
        pair = [db.submit(insert(f"pair{i}")) for i in range(LOOP_COMMIT_UNITS)]
        assert await asyncio.wait_for(asyncio.gather(*pair), 5) == \
            [f"pair{i}" for i in range(LOOP_COMMIT_UNITS)]
        assert committed_keys(db.path) == \
            ["lone", *(f"pair{i}" for i in range(LOOP_COMMIT_UNITS)), "warm"]
        # one unit more than that is a group for the thread: it waits
        more = [db.submit(insert(f"more{i}")) for i in range(LOOP_COMMIT_UNITS + 1)]
        done, _ = await asyncio.wait(more, timeout=0.3)
        assert not done
    finally:
        gate.set()
    assert await blocked is True
    assert len(await asyncio.gather(*more)) == LOOP_COMMIT_UNITS + 1


async def waits_for_the_thread(db, key):
    """Writes ``key`` while the commit thread is held: whether the write waited."""
    gate, blocked = hold_commit_thread(db)
    try:
        write = asyncio.ensure_future(db.write(insert(key)))
        done, _ = await asyncio.wait({write}, timeout=0.3)
    finally:
        gate.set()
    assert await blocked is True
    assert await write == key
    return not done


async def test_a_slow_disk_keeps_every_commit_on_the_thread(db):
    await db.write(insert("warm"))
    db._writer.commit_seconds = LOOP_COMMIT_SECONDS * 2  # as after slow fsyncs
    assert await waits_for_the_thread(db, "lone")


async def test_the_wal_is_checkpointed_on_the_thread_every_few_commits(db, monkeypatch):
    writer = db._writer
    monkeypatch.setattr(writer, "checkpoint_every", 4)
    for i in range(3):
        await db.write(insert(f"k{i}"))  # the first commits since the table was made
    # the fourth commit since the last checkpoint carries one: it goes to the thread
    assert await waits_for_the_thread(db, "k3")
    # the writer's autocheckpoint is off: only these keep the WAL from growing with
    # every commit (it is written from its start again once checkpointed)
    for i in range(4, 60):
        await db.write(insert(f"k{i:02}", i))
    bounded = wal_frames(db.path)
    monkeypatch.setattr(writer, "checkpoint_every", 10 ** 9)
    for i in range(60, 116):
        await db.write(insert(f"k{i:03}", i))
    grown = wal_frames(db.path)
    assert bounded <= 4 * 3 < 56 <= grown  # at most 4 commits' frames; without: all 56
    assert len(await keys(db)) == 116


def wal_frames(path):
    """The frames in the WAL not yet copied back (then copied, by this call)."""
    with closing(sqlite3.connect(path)) as conn:
        _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return frames


def committed_keys(path):
    """The rows another connection sees: what the writer has committed."""
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT k FROM t ORDER BY k")]


def _admission(seq, request_id, status="queued"):
    outcome = "completed" if status == "terminal" else None
    return (seq, f"adm_{seq}", "ses_1", "local", request_id, '{"text":"hi"}', "d", status,
            outcome, None, 1, 100.0 + seq, None, None)


async def test_version_8_keeps_every_admission_with_its_seq(tmp_path):
    path = tmp_path / "state.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for script in migrations.MIGRATIONS[:7]:
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("PRAGMA user_version=7")
        conn.execute("INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
                     "VALUES ('ses_1', '{}', 1, 1)")
        before = [_admission(1, "a", "terminal"), _admission(2, "b"), _admission(5, "c")]
        conn.executemany("INSERT INTO session_admissions VALUES "
                         "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", before)
    db = await Database.open(path)
    try:
        after = await db.read(lambda c: c.execute(
            "SELECT * FROM session_admissions ORDER BY seq").fetchall())
        assert [tuple(r) for r in after] == before
        # the next admission is numbered after the last, and the partial index is back
        seq = await db.write(lambda c: c.execute(
            "INSERT INTO session_admissions(admission_id, target_session_id, principal_id, "
            "request_id, payload_json, payload_digest, status, owner_epoch, created_at) "
            "VALUES ('adm_new', 'ses_1', 'local', 'd', '{}', 'x', 'queued', 1, 200)"
        ).lastrowid)
        assert seq == 6
        sql = await db.read(lambda c: c.execute(
            "SELECT group_concat(sql, ';') FROM sqlite_master WHERE tbl_name = "
            "'session_admissions'").fetchone()[0])
        assert "AUTOINCREMENT" not in sql.upper() and "admissions_open" in sql
        plan = await db.read(lambda c: c.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM session_admissions WHERE "
            "target_session_id = 'ses_1' AND status != 'terminal' ORDER BY seq").fetchall())
        assert any("admissions_open" in str(row[-1]) for row in plan)
    finally:
        await db.close()
    assert user_version(path) == SCHEMA_VERSION


async def test_an_admissions_retry_writes_nothing_to_the_wal(tmp_path):
    from tether.store.tables import admissions

    path = tmp_path / "state.db"
    db = await Database.open(path)
    fields = dict(admission_id="adm_1", target_session_id="ses_1", principal_id="local",
                  request_id="in-1", payload_json='{"text":"hi"}', payload_digest="d",
                  owner_epoch=1, now=1.0)
    try:
        def first(c):
            c.execute("INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
                      "VALUES ('ses_1', '{}', 1, 1)")
            return admissions.insert_new(c, **fields)

        assert (await db.write(first))["seq"] == 1
        wal = path.with_name("state.db-wal")
        size = wal.stat().st_size
        for _ in range(20):  # a retry: the insert meets its own identity
            assert await db.write(lambda c: admissions.insert_new(
                c, **{**fields, "admission_id": "adm_2"})) is None
        assert wal.stat().st_size == size
    finally:
        await db.close()
