"""TetherClient against a real owner: typed errors, ordered streams, resilient submit, discovery.

The client runs in the test's event loop; the owner is a real subprocess; only
inference is faked.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest
from clihelp import owner_pid, pid_alive
from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, clean_env, db_rows, write_config

from tether.clients.library import discovery
from tether.clients.library.client import SessionStream, TetherClient
from tether.rpc.errors import InvalidParams, NotFound
from tether.rpc.protocol import PROTOCOL


def slow_model(request: dict):
    time.sleep(0.6)  # long enough to drop the connection while the turn runs
    return text_reply("SLOW_BUT_SURE")


def assert_contiguous(events: list[dict]) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


async def test_typed_errors_and_calls(tmp_path):
    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home):
        async with await TetherClient.connect(home, autostart=False) as client:
            assert (await client.ping()) == {"pong": True}
            info = await client.describe()
            assert info["protocol"] == PROTOCOL and info["pid"] == client.descriptor["pid"]
            with pytest.raises(NotFound):
                await client.resume("ses_nope")
            with pytest.raises(InvalidParams) as caught:
                await client.call("prompt.submit", session_id="s", input_id="i", text="t",
                                  finite="true")
            assert caught.value.data["fields"][0]["loc"] == "finite"
            listed = await client.list_sessions()
            assert listed["sessions"] == []


async def test_submit_and_wait_survives_a_dropped_connection(tmp_path):
    home = tmp_path / "home"
    with FakeProvider(slow_model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            async with await TetherClient.connect(home, autostart=False) as client:
                sid = (await client.create_session(source="test"))["session_id"]
                seen: list[dict] = []
                dropped = []

                def on_event(event: dict) -> None:
                    seen.append(event)
                    if event["type"] == "message.start" and not dropped:
                        # cut the socket under the client while the turn runs
                        dropped.append(client._conn)
                        client._conn.ws.transport.abort()

                receipt = await client.submit_and_wait(sid, "hello", input_id="in-drop",
                                                       finite=True, on_event=on_event)
                assert dropped and client._conn is not dropped[0], "it must have reconnected"
    assert receipt["status"] == "terminal" and receipt["outcome"] == "completed"
    assert receipt["result"]["text"] == "SLOW_BUT_SURE"
    assert_contiguous(seen)  # no gap, no duplicate across the reconnect
    completes = [e for e in seen if e["type"] == "message.complete"]
    assert len(completes) == 1 and completes[0]["admission_id"] == receipt["admission_id"]
    assert len(fake.requests) == 1
    assert db_rows(home, "SELECT request_id, status FROM session_admissions") == [
        ("in-drop", "terminal")]


async def test_event_stream_replays_from_after_seq_and_orders(tmp_path):
    home = tmp_path / "home"
    with FakeProvider(lambda r: text_reply("ONE")) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            async with await TetherClient.connect(home, autostart=False) as client:
                sid = (await client.create_session())["session_id"]
                first = await client.submit_and_wait(sid, "a", finite=True)
                assert first["result"]["text"] == "ONE"
                stream = client.events(sid, after_seq=0)
                assert isinstance(stream, SessionStream)
                replayed = []
                async for event in stream:
                    replayed.append(event)
                    if event["type"] == "message.complete":
                        break
                stream.close()
                paged = [e async for e in client.all_events_since(sid, 0)]
    assert replayed[0]["seq"] == 1
    assert_contiguous(replayed)
    assert [e["seq"] for e in paged][: len(replayed)] == [e["seq"] for e in replayed]


async def test_event_stream_replays_an_idle_session_larger_than_a_page(tmp_path):
    """session.resume's events are one page (about a MiB): a stream from after_seq=0
    on a finished, idle session of ~3 MB still yields every event, with no live
    event to reveal that the snapshot stopped short."""
    home = tmp_path / "home"
    with FakeProvider(lambda r: text_reply("Z" * 500_000)) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            async with await TetherClient.connect(home, autostart=False) as client:
                sid = (await client.create_session())["session_id"]
                for i in range(6):
                    await client.submit_and_wait(sid, f"long {i}", input_id=f"l{i}",
                                                 finite=True)
                await client.detach(sid)
                last = (await client.call("session.events.since", session_id=sid,
                                          after_seq=0, limit=1))["last_seq"]
                stream = client.events(sid, after_seq=0)
                replayed = []
                while len(replayed) < last:
                    event = await stream.get(timeout=10)
                    assert event is not None, f"the stream stopped at {len(replayed)} of {last}"
                    replayed.append(event)
                stream.close()
    assert [e["seq"] for e in replayed] == list(range(1, last + 1))
    assert sum(e["type"] == "message.complete" for e in replayed) == 6


async def test_two_clients_autostart_one_owner(tmp_path, reap_owners):
    home = tmp_path / "fresh"
    reap_owners(home)
    env_home = os.environ.get("TETHER_HOME")
    try:
        os.environ.pop("TETHER_HOME", None)
        a, b = await asyncio.gather(TetherClient.connect(home), TetherClient.connect(home))
    finally:
        if env_home is not None:
            os.environ["TETHER_HOME"] = env_home
    try:
        pa, pb = (await a.describe())["pid"], (await b.describe())["pid"]
    finally:
        await a.close()
        await b.close()
    assert pa == pb == owner_pid(home) and pid_alive(pa)
    assert (home / "logs" / "daemon.log").exists()
    assert oct(home.stat().st_mode & 0o777) == "0o700"


async def test_stale_descriptor_starts_a_new_owner(tmp_path, reap_owners):
    home = tmp_path / "stale"
    home.mkdir(mode=0o700)
    reap_owners(home)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (home / "daemon.json").write_text(json.dumps({
        "protocol": PROTOCOL, "pid": dead.pid, "socket": str(home / "daemon.sock")}))
    assert discovery.live_descriptor(home) is None
    async with await TetherClient.connect(home) as client:
        assert (await client.describe())["pid"] != dead.pid


async def test_no_autostart_reports_not_running(tmp_path):
    with pytest.raises(discovery.OwnerUnavailable) as caught:
        await TetherClient.connect(tmp_path / "empty", autostart=False)
    assert caught.value.reason == "not_running"
    assert not (tmp_path / "empty").exists()


def test_a_session_request_id_fits_the_protocol_bound():
    from tether.clients.tui.chat import _session_request_id
    from tether.rpc.protocol import MAX_ID_CHARS

    assert _session_request_id("x" * 196) == "cli-" + "x" * 196
    long = _session_request_id("x" * 197)
    assert len(long) <= MAX_ID_CHARS and long != _session_request_id("x" * 198)


def test_cli_import_path_is_lean():
    code = ("import sys, tether.clients.cli.entry, tether.clients.tui.chat, "
            "tether.clients.library.client; "
            "heavy = ('pydantic', 'httpx', 'yaml', 'tether.daemon', 'tether.rpc.models', "
            "'tether.store', 'platformdirs', 'prompt_toolkit', 'wcwidth', 'rich', "
            "'markdown_it', 'pygments', 'tether.clients.tui.interactive', "
            "'tether.clients.tui.markdown'); print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=clean_env(__import__("pathlib").Path("/nonexistent")), check=True)
    assert out.stdout.strip() == "[]", out


async def test_tcp_listener_needs_a_token(tmp_path):
    from tether.clients.library.discovery import OwnerUnavailable

    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home, "--tcp", "127.0.0.1:0") as owner:
        url = owner.descriptor["tcp_url"]
        async with await TetherClient.connect(home, autostart=False) as local:
            token = (await local.create_token("test"))["token"]
        async with await TetherClient.connect(url=url, token=token) as remote:
            assert (await remote.ping()) == {"pong": True}
            assert remote.descriptor is None
        with pytest.raises(OwnerUnavailable) as caught:
            await TetherClient.connect(url=url, token="tt_wrong")
        assert caught.value.reason == "refused"


def test_an_overflowing_inbox_becomes_a_replay_gap():
    from tether.clients.library.connection import MAX_BUFFERED_EVENTS, Inbox

    inbox = Inbox("s")
    for seq in range(1, MAX_BUFFERED_EVENTS + 2):
        inbox.put({"session_id": "s", "seq": seq, "type": "message.delta", "payload": {},
                   "admission_id": None})
    gap, last = inbox.items
    assert gap == {"session_id": "s", "seq": None, "type": "session.replay_gap",
                   "payload": {"last_seq": 0, "reason": "client_queue_overflow"},
                   "admission_id": None}
    assert last["seq"] == MAX_BUFFERED_EVENTS + 1
    # a second overflow keeps the first gap's last_seq: the hole still starts there
    for seq in range(MAX_BUFFERED_EVENTS + 2, 2 * MAX_BUFFERED_EVENTS + 2):
        inbox.put({"session_id": "s", "seq": seq, "type": "message.delta", "payload": {},
                   "admission_id": None})
    assert inbox.items[0]["payload"]["last_seq"] == 0 and inbox.items[0]["seq"] is None
