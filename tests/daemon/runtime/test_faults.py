"""The storage fault hook of daemon/runtime/faults.py, on a real Database: what the file
named by TETHER_FAULT_STORAGE says is what the writer suffers, group by group."""

import pytest

from tether.daemon.runtime import faults
from tether.store import Database, StorageError


def blob(key, size=64 * 1024):
    def unit(conn):
        conn.execute("INSERT INTO b(k, v) VALUES (?, randomblob(?))", (key, size))
        return key
    return unit


async def stored(db):
    return await db.read(lambda c: [r[0] for r in c.execute("SELECT k FROM b ORDER BY k")])


@pytest.fixture
async def opened(tmp_path):
    dbs = []

    async def open_db(**kwargs):
        db = await Database.open(tmp_path / "state.db", **kwargs)
        dbs.append(db)
        await db.write(lambda c: c.execute("CREATE TABLE b (k TEXT PRIMARY KEY, v BLOB)"))
        return db

    yield open_db
    for db in dbs:
        await db.close()


async def test_unset_the_database_is_left_alone(opened, monkeypatch, tmp_path):
    monkeypatch.delenv(faults.STORAGE_FAULT_ENV, raising=False)
    (tmp_path / "fault").write_text("readonly")
    db = await opened()
    assert faults.wrap_storage(db) is db
    assert await db.write(blob("a")) == "a"


async def test_readonly_fails_writes_until_cleared(opened, monkeypatch, tmp_path):
    switch = tmp_path / "fault"
    monkeypatch.setenv(faults.STORAGE_FAULT_ENV, str(switch))
    db = faults.wrap_storage(await opened())
    assert await db.write(blob("a")) == "a"  # no file: normal operation
    switch.write_text("readonly\n")
    with pytest.raises(StorageError) as err:
        await db.write(blob("b"))
    assert err.value.reason == "read_only"
    assert await stored(db) == ["a"]
    switch.write_text("")
    assert await db.write(blob("c")) == "c"
    assert await stored(db) == ["a", "c"]


async def test_full_fails_growth_and_clearing_restores_the_owners_quota(
        opened, monkeypatch, tmp_path):
    switch = tmp_path / "fault"
    monkeypatch.setenv(faults.STORAGE_FAULT_ENV, str(switch))
    db = faults.wrap_storage(await opened(max_bytes=1024 * 1024))
    switch.write_text("full")
    with pytest.raises(StorageError) as err:
        await db.write(blob("a"))
    assert err.value.reason == "disk_full"
    switch.write_text("nonsense")  # not a fault it knows: normal operation
    assert await db.write(blob("b")) == "b"
    # the configured 1 MiB quota is in force again, not lifted by the hook
    with pytest.raises(StorageError) as err:
        await db.write(blob("huge", size=2 * 1024 * 1024))
    assert err.value.reason == "disk_full"
    assert await stored(db) == ["b"]
