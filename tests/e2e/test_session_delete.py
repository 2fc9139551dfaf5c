"""session.delete through the real owner, on both stores: a session goes with every
row it ever had, whatever kind (approvals and the rules its answers made, background
processes, background delegations and their child sessions, compactions), and is kept while it
still has work or another viewer has it open (unless forced)."""

from __future__ import annotations

import json

import pytest
from fakeprovider import FakeProvider
from harness import OwnerProcess, Peer, until, write_config
from scene import Store, owner_env
from toolscript import ScriptedModel

#: every table and the column naming a session (the fleet's leases and turn stops
#: exist on PostgreSQL only)
CHILD_TABLES = [("sessions", "session_id"), ("events", "session_id"),
                ("messages", "session_id"), ("approvals", "session_id"),
                ("approval_rules", "session_id"), ("processes", "session_id"),
                ("session_admissions", "target_session_id"),
                ("async_delegations", "origin_session_id"), ("compactions", "session_id")]
PG_TABLES = [("session_leases", "session_id"), ("turn_stops", "session_id")]


def model() -> ScriptedModel:
    return ScriptedModel({
        "make": [("terminal", {"command": "touch made-by-agent"})],
        "bg": [("terminal", {"command": "echo bg-out", "background": True})],
        "long": [("terminal", {"command": "exec sleep 60", "background": True})],
        "split": [("delegate_task", {"tasks": [{"goal": "part one"}]})],
    })


def leftovers(store: Store, ids: list[str]) -> dict[str, int]:
    """Rows still naming any of ``ids``, by table (only tables that have some)."""
    tables = CHILD_TABLES + (PG_TABLES if store.url else [])
    found = {}
    for table, column in tables:
        marks = ", ".join("?" * len(ids))
        [(n,)] = store.rows(f"SELECT count(*) FROM {table} WHERE {column} IN ({marks})",
                            *ids)
        if n:
            found[table] = n
    return found


async def turn(peer: Peer, sid: str, text: str) -> dict:
    r = await peer.result("prompt.submit", session_id=sid, input_id=text, text=text)
    return await peer.wait_terminal(sid, r["admission_id"])


@pytest.fixture
def work(tmp_path):
    path = tmp_path / "work"
    path.mkdir()
    return path


async def test_every_kind_of_child_row_goes_with_its_session(scene, work):
    async with scene(model(), session=False, approvals={"mode": "ask"}) as s:
        peer = s.peer

        async def session() -> str:
            return (await peer.result("session.create", cwd=str(work)))["session_id"]

        # an approval, answered "for this session": an approvals row and a rule
        approved = await session()
        r = await peer.result("prompt.submit", session_id=approved, input_id="m",
                              text="make a file")
        ev = await peer.wait_event(lambda e: e["type"] == "approval.requested")
        await peer.result("approval.respond", session_id=approved,
                          approval_id=ev["payload"]["approval_id"], decision="session")
        await peer.wait_terminal(approved, r["admission_id"])
        assert s.rows("SELECT count(*) FROM approval_rules WHERE session_id = ?",
                      approved) == [(1,)]

        # a background process that has ended
        process = await session()
        await turn(peer, process, "bg job")
        await until(lambda: s.rows("SELECT state FROM processes WHERE "
                                   "session_id = ? AND state = 'exited'",
                                   process), what="the process's exit")

        # a background delegation, delivered, with its child session
        delegated = await session()
        await turn(peer, delegated, "split it")
        await until(lambda: s.rows(
            "SELECT 1 FROM async_delegations WHERE origin_session_id = ? AND "
            "delivery_state = 'delivered'", delegated), what="the delivery")
        await until(lambda: s.rows(
            "SELECT 1 FROM session_admissions WHERE target_session_id = ? AND "
            "principal_id = 'delegation' AND status = 'terminal'", delegated),
            what="the delivery turn")
        children = [c for (c,) in s.rows(
            "SELECT session_id FROM sessions WHERE parent_session_id = ?",
            delegated)]
        assert children

        # older turns summarised: a compactions row
        compacted = await session()
        for text in ("first note", "second note"):
            await turn(peer, compacted, text)
        done = await peer.result("session.compact", session_id=compacted)
        assert done["compacted"] is True, done

        kept = await session()
        await turn(peer, kept, "hello")
        for sid, kinds in ((approved, {"approvals", "approval_rules"}),
                           (process, {"processes"}),
                           (delegated, {"async_delegations"}),
                           (compacted, {"compactions"})):
            ids = [sid] + (children if sid == delegated else [])
            assert kinds <= set(leftovers(s.store, ids)), (sid, leftovers(s.store, ids))
            out = await peer.result("session.delete", session_id=sid)
            assert sorted(out["deleted"]) == sorted(ids)
            assert leftovers(s.store, ids) == {}, kinds
        # the others' rows are untouched
        assert {"sessions", "messages", "events"} <= set(leftovers(s.store, [kept]))
        listed = await peer.result("session.list", limit=50)
        assert [x["session_id"] for x in listed["sessions"]] == [kept]


async def test_a_running_process_or_another_viewer_keeps_the_session(tmp_path, store_url, work):
    home = tmp_path / "home"
    store, env = Store(home, store_url), owner_env(home, store_url)
    with FakeProvider(model()) as fake:
        write_config(home, fake.url, approvals={"mode": "never"})
        with OwnerProcess(home, env=env):
            async with await Peer.connect(home) as peer:
                sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
                await turn(peer, sid, "long job")
                refused = await peer.call("session.delete", session_id=sid)
                assert refused["error"]["data"]["reason"] == "invalid_params", refused
                assert "background process" in refused["error"]["data"]["detail"], refused
                assert leftovers(store, [sid])["processes"] == 1

                watched = (await peer.result("session.create", cwd=str(work)))["session_id"]
                await turn(peer, watched, "hello")
                async with await Peer.connect(home) as admin:
                    # the connection that has it open may delete it; another must force
                    refused = await admin.call("session.delete", session_id=watched)
                    error = refused["error"]
                    assert error["data"]["attached"] == 1, refused
                    assert "open in 1 viewer" in error["data"]["detail"]
                    assert "sessions" in leftovers(store, [watched])
                    forced = await admin.result("session.delete", session_id=watched,
                                                force=True)
                    assert forced["deleted"] == [watched]
                assert leftovers(store, [watched]) == {}
    # the owner stopped: the process ended, and the session can go
    with OwnerProcess(home, env=env):
        async with await Peer.connect(home) as peer:
            out = await peer.result("session.delete", session_id=sid)
            assert out["deleted"] == [sid]
    assert leftovers(store, [sid]) == {}
    assert json.dumps(store.rows("SELECT count(*) FROM sessions")) == "[[0]]"
