"""Failover between the nodes of a fleet: two real owners on one PostgreSQL schema.

Each owner has its own home and a TCP listener; a token minted on one works on
both (tokens live in the shared database). Both start before anything is
submitted: a node that starts recovers the ledger of other epochs. A client
given both URLs moves on to the other node when it loses the one it was on,
and a prompt resubmitted there by its input id is the same admission, stored
once. Skipped where no PostgreSQL answers (tests/pgstore.py).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pgstore
import pytest
from fakeprovider import FakeProvider, Held, prompt_of, text_reply
from harness import OwnerProcess, Peer, clean_env, until, write_config

from tether.clients.library import client as client_module
from tether.clients.library.client import TetherClient
from tether.clients.library.nodes import Nodes, parse_urls


def answer(gate: threading.Event):
    """Quotes the prompt; a prompt with HOLD gets its answer's end only once ``gate`` is set."""

    def reply(req: dict) -> Any:
        prompt = prompt_of(req)
        if "HOLD" in prompt:
            return Held({"role": "assistant", "content": "The held answer, now complete."},
                        gate, before=2)
        return text_reply(f"You said: {prompt}")

    return reply


@contextmanager
def two_nodes(tmp_path: Path, gate: threading.Event,
              **config: dict[str, Any]) -> Iterator[tuple[str, list[OwnerProcess]]]:
    """(the store URL, [owner A, owner B]): both running, each with a TCP listener."""
    with pgstore.fresh_schema() as store, FakeProvider(answer(gate)) as provider:
        owners: list[OwnerProcess] = []
        try:
            for name in ("a", "b"):
                home = tmp_path / f"node {name}"
                write_config(home, provider.url, **config)
                owners.append(OwnerProcess(home, "--tcp", "127.0.0.1:0",
                                           env=clean_env(home, TETHER_STORE=store)).start())
            yield store, owners
        finally:
            gate.set()
            for owner in owners:
                try:
                    if owner.alive:
                        owner.stop()
                finally:
                    owner.kill()


async def mint_token(owner: OwnerProcess) -> str:
    """A token minted over A's Unix socket (tokens are minted only there)."""
    async with await Peer.connect(owner.home) as peer:
        return (await peer.result("token.create", label="fleet"))["token"]


class CutProxy:
    """A TCP relay to a node that a test can cut: every relayed connection dropped
    (as by a network failure), new ones refused."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.server: asyncio.Server | None = None
        self.transports: list[asyncio.BaseTransport] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return f"ws://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"

    async def _relay(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.port)
        self.transports += [down_w.transport, up_w.transport]

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except OSError:
                pass
            finally:
                w.transport.abort()

        await asyncio.gather(pump(down_r, up_w), pump(up_r, down_w))

    def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for transport in self.transports:
            transport.abort()  # type: ignore[attr-defined]


def port_of(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


def test_urls_are_parsed_and_tried_from_the_last_one_that_worked():
    assert parse_urls(" ws://a/ ,ws://b/,,ws://a/") == ["ws://a/", "ws://b/"]
    assert parse_urls(["ws://a/,ws://b/", "ws://c/"]) == ["ws://a/", "ws://b/", "ws://c/"]
    assert parse_urls(None) == [] and parse_urls("") == []
    nodes = Nodes(["ws://a/", "ws://b/", "ws://c/"])
    assert nodes.order(moving_on=False) == ["ws://a/", "ws://b/", "ws://c/"]
    nodes.worked("ws://b/")
    assert nodes.order(moving_on=False) == ["ws://b/", "ws://c/", "ws://a/"]
    # after losing b: the next node first, b itself last
    assert nodes.order(moving_on=True) == ["ws://c/", "ws://a/", "ws://b/"]


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_an_idle_client_carries_on_on_the_next_node(tmp_path, how):
    with two_nodes(tmp_path, threading.Event()) as (_, (a, b)):
        token = await mint_token(a)
        urls = [a.descriptor["tcp_url"], b.descriptor["tcp_url"]]
        async with await TetherClient.connect(url=urls, token=token, retry_seconds=30) as client:
            assert client.url == urls[0]
            assert (await client.describe())["pid"] == a.proc.pid
            sid = (await client.create_session(source="test"))["session_id"]
            a.stop() if how == "stop" else a.kill()
            receipt = await client.submit_and_wait(sid, "hello", finite=True)
            assert client.url == urls[1]
            assert (await client.describe())["pid"] == b.proc.pid
        assert (receipt["status"], receipt["outcome"]) == ("terminal", "completed")
        assert receipt["result"]["text"] == "You said: hello"


async def test_a_draining_node_hands_over_to_the_next_at_once(tmp_path):
    # A drains while a turn of its own is held: it admits nothing new for as long
    # as the grace lasts, and the client does not wait for it to go
    with two_nodes(tmp_path, gate := threading.Event(),
                   daemon={"grace_seconds": 120}) as (store, (a, b)):
        token = await mint_token(a)
        urls = [a.descriptor["tcp_url"], b.descriptor["tcp_url"]]
        async with await Peer.connect(a.home) as peer, \
                await TetherClient.connect(url=urls, token=token, retry_seconds=30) as client:
            busy = (await peer.result("session.create"))["session_id"]
            held = await peer.result("prompt.submit", session_id=busy, input_id="held",
                                     text="HOLD on A")
            await until(lambda: pgstore.rows(
                store, "SELECT status FROM session_admissions WHERE admission_id = ?",
                held["admission_id"]) == [("started",)], "the held turn to start")
            sid = (await client.create_session(source="test"))["session_id"]
            a.proc.send_signal(signal.SIGTERM)
            await wait_until_draining(peer)
            receipt = await client.submit_and_wait(sid, "hello", input_id="in_drain",
                                                   finite=True)
            assert client.url == urls[1]
            assert a.alive, "the client waited for the draining node to exit"
            gate.set()
        assert (receipt["status"], receipt["outcome"]) == ("terminal", "completed")
        assert pgstore.rows(store, "SELECT COUNT(*) FROM session_admissions WHERE "
                                   "request_id = 'in_drain'") == [(1,)]


async def wait_until_draining(peer: Peer) -> None:
    """Poll until the owner refuses admissions; the probe never creates anything."""
    while (await peer.call("prompt.submit", session_id="ses_probe", input_id="probe",
                           text="probe"))["error"]["message"] != "runtime_draining":
        await asyncio.sleep(0.02)


async def test_a_prompt_whose_node_drops_after_admission_is_resubmitted_on_the_next(
        tmp_path, monkeypatch):
    # the turn goes on on A, which the client no longer reaches, so B sends none of
    # its events: the client learns its end from the receipt, asked this often
    monkeypatch.setattr(client_module, "POLL_SECONDS", 0.3)
    gate = threading.Event()
    with two_nodes(tmp_path, gate) as (store, (a, b)):
        token = await mint_token(a)
        proxy = CutProxy(port_of(a.descriptor["tcp_url"]))
        urls = [await proxy.start(), b.descriptor["tcp_url"]]
        async with await TetherClient.connect(url=urls, token=token, retry_seconds=30) as client:
            sid = (await client.create_session(source="test"))["session_id"]
            submits: list[tuple[str | None, str]] = []  # (node, admission_id) per submission
            submit = client.submit

            async def recording_submit(*args: Any, **kwargs: Any) -> dict[str, Any]:
                node = client.url
                receipt = await submit(*args, **kwargs)
                submits.append((node, receipt["admission_id"]))
                return receipt

            client.submit = recording_submit  # type: ignore[method-assign]
            seen: list[dict[str, Any]] = []
            waiting = asyncio.ensure_future(client.submit_and_wait(
                sid, "HOLD this one", input_id="in_failover", finite=True, on_event=seen.append))
            await until(lambda: any(e["type"] == "message.delta" for e in seen),
                        "the turn to run on A")
            proxy.cut()
            await until(lambda: len(submits) >= 2, "the resubmission")
            gate.set()
            receipt = await asyncio.wait_for(waiting, 60)
        assert [node for node, _ in submits[:2]] == urls
        assert {adm for _, adm in submits} == {receipt["admission_id"]}
        assert (receipt["status"], receipt["outcome"]) == ("terminal", "completed")
        assert receipt["result"]["text"] == "The held answer, now complete."
        rows = pgstore.rows(store, "SELECT admission_id FROM session_admissions "
                                   "WHERE target_session_id = ? AND request_id = ?",
                            sid, "in_failover")
        assert [r[0] for r in rows] == [receipt["admission_id"]]
        # the events reached the caller each once, in order, across the two nodes
        seqs = [e["seq"] for e in seen]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        text = "".join(e["payload"]["text"] for e in seen if e["type"] == "message.delta")
        assert text == receipt["result"]["text"]


async def test_the_cli_with_two_urls_answers_through_the_node_that_is_up(tmp_path, run_cli):
    with two_nodes(tmp_path, threading.Event()) as (_, (a, b)):
        token = await mint_token(a)
        urls = f"{a.descriptor['tcp_url']},{b.descriptor['tcp_url']}"
        a.stop()
        home = tmp_path / "cli home"  # no owner of its own, and none is started
        env = clean_env(home)
        done = run_cli(home, "chat", "-q", "hello fleet", "--url", urls, "--token", token,
                       env=env, stdin=None, input="")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "You said: hello fleet\n"
        status = run_cli(home, "status", "--json", env=clean_env(
            home, TETHER_URL=urls, TETHER_TOKEN=token))
        assert status.returncode == 0, status.stderr
        shown = orjson.loads(status.stdout)
        assert shown["node"] == b.descriptor["tcp_url"]
        assert shown["runtime"]["pid"] == b.proc.pid
        assert shown["usage"]["requests"] >= 1  # the fleet's sessions' totals
        text = run_cli(home, "status", "--url", urls, env=clean_env(home, TETHER_TOKEN=token))
        assert text.stdout.startswith(f"node {b.descriptor['tcp_url']} answered"), text
        assert not home.exists()


def test_cli_url_flags_are_checked(tmp_path, run_cli):
    home = tmp_path / "home"
    bad = run_cli(home, "sessions", "--url", "http://127.0.0.1:1/")
    assert bad.returncode == 2 and "is not a ws:// or wss:// URL" in bad.stderr
    lone = run_cli(home, "status", "--token", "tt_x")
    assert lone.returncode == 2 and "--token is for --url" in lone.stderr
    assert not home.exists()
