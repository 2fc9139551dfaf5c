"""`Recall`: a session's next turn reads only the messages added since its last one,
on SQLite and on PostgreSQL, and reads the whole again whenever what it kept
could be wrong (a compaction since, too much added, nothing kept)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pgstore
import pytest

from tether.daemon.engine import recall as recall_mod
from tether.daemon.engine.recall import Recall
from tether.daemon.engine.transcript import chat_history
from tether.store.pg import PgDatabase
from tether.store.sqlite.db import Database
from tether.store.tables import compactions, messages

SID = "ses_recall"


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request, tmp_path) -> AsyncIterator[Any]:
    if request.param == "sqlite":
        store = await Database.open(tmp_path / "state.db")
        try:
            yield store
        finally:
            await store.close()
        return
    with pgstore.fresh_schema() as url:
        store = await PgDatabase.open(url, readers=1)
        try:
            yield store
        finally:
            await store.close()


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    """What the recall asked the store: a whole read (``current``) or what was added
    (``since``)."""
    made: list[str] = []
    for name in ("current", "since"):
        real = getattr(compactions, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            made.append(_name)
            return _real(*args)

        monkeypatch.setattr(compactions, name, counted)
    return made


async def new_session(db: Any) -> None:
    await db.write(lambda c: c.execute(
        "INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
        "VALUES (?, '{}', 0, 0)", (SID,)))


async def say(db: Any, *texts: str) -> None:
    await db.write(lambda c: messages.append(
        c, SID, [{"role": "user", "content": t} for t in texts], 1.0))


def texts(rows: list[dict[str, Any]]) -> list[str]:
    return [r["content"] for r in rows]


async def test_a_later_turn_reads_only_what_was_added(db, calls):
    await new_session(db)
    recall = Recall(db)
    await say(db, "one", "two")
    rows, summary = await recall.transcript(SID)
    assert texts(rows) == ["one", "two"] and summary is None
    assert [r["index"] for r in rows] == [0, 1]
    rows.append({"index": 99, "content": "the turn's own list"})  # a copy: not kept
    await say(db, "three")
    rows, _ = await recall.transcript(SID)
    assert texts(rows) == ["one", "two", "three"] and rows[-1]["index"] == 2
    rows, _ = await recall.transcript(SID)  # nothing new
    assert texts(rows) == ["one", "two", "three"]
    assert calls == ["current", "since", "since"]
    # what it hands out is what a whole read gives, as a turn reads it (the rows'
    # admission and time are not kept)
    whole, summary, mark = await db.read(lambda c: compactions.current(c, SID))
    assert chat_history(whole) == chat_history(rows) and summary is None and mark is None
    assert [r["index"] for r in whole] == [r["index"] for r in rows]
    assert set(rows[0]) == {"role", "content", "index"}


async def test_a_compaction_since_makes_it_read_the_whole(db, calls):
    await new_session(db)
    recall = Recall(db)
    await say(db, "one", "two", "three")
    await recall.transcript(SID)
    record = {"compaction_id": "cmp_1", "session_id": SID, "first_index": 0, "end_index": 2,
              "summary": "one and two", "model": "m", "tokens_before": 10,
              "tokens_after": 2, "kind": "auto", "focus": None, "usage": {},
              "created_at": 2.0}
    await db.write(lambda c: compactions.insert(c, record))
    await say(db, "four")
    rows, summary = await recall.transcript(SID)
    assert texts(rows) == ["three", "four"] and summary == "one and two"
    # another summary over the same span (a compaction asked for again) is seen too
    await db.write(lambda c: compactions.insert(
        c, {**record, "compaction_id": "cmp_2", "summary": "again", "created_at": 3.0}))
    rows, summary = await recall.transcript(SID)
    assert texts(rows) == ["three", "four"] and summary == "again"
    await say(db, "five")
    rows, summary = await recall.transcript(SID)
    assert texts(rows) == ["three", "four", "five"] and summary == "again"
    assert calls == ["current", "since", "current", "since", "current", "since"]


async def test_much_added_or_nothing_kept_reads_the_whole(db, calls, monkeypatch):
    monkeypatch.setattr(recall_mod, "NEW_MOST", 3)
    await new_session(db)
    recall = Recall(db, keep=1)
    await say(db, "a")
    await recall.transcript(SID)
    await say(db, "b", "c", "d", "e")  # four new: more than NEW_MOST
    rows, _ = await recall.transcript(SID)
    assert texts(rows) == ["a", "b", "c", "d", "e"]
    assert calls == ["current", "since", "current"]
    other = "ses_other"
    await db.write(lambda c: c.execute(
        "INSERT INTO sessions(session_id, options_json, created_at, updated_at) "
        "VALUES (?, '{}', 0, 0)", (other,)))
    await recall.transcript(other)  # keeps one session only: SID's goes
    calls.clear()
    rows, _ = await recall.transcript(SID)
    assert texts(rows) == ["a", "b", "c", "d", "e"] and calls == ["current"]
    recall.forget(SID)
    calls.clear()
    await recall.transcript(SID)
    assert calls == ["current"]


async def test_what_it_keeps_is_bounded_by_its_text_too(db, calls):
    await new_session(db)
    recall = Recall(db, chars=10)
    await say(db, "12345", "67890")
    await recall.transcript(SID)
    await say(db, "x")  # 11 characters now: more than it may keep
    rows, _ = await recall.transcript(SID)
    assert texts(rows) == ["12345", "67890", "x"]
    calls.clear()
    rows, _ = await recall.transcript(SID)
    assert texts(rows) == ["12345", "67890", "x"] and calls == ["current"]
