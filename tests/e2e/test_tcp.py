"""The optional loopback TCP listener of the real owner (SPEC §1, §10).

``--tcp 127.0.0.1:0`` binds a free port and the descriptor's ``tcp_url`` names
it. Tokens are minted over the Unix socket only and stored hashed; a client
presents one as ``Authorization: Bearer <t>`` or as the subprotocol
``tether.token.<t>`` (what a browser can send). A missing or wrong token is
refused at the upgrade (401), a browser Origin not in
``daemon.tcp_allowed_origins`` too (403). A non-loopback address is refused at
start unless ``daemon.tcp_allow_remote``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from fakeprovider import text_reply
from harness import OwnerProcess, Peer, write_config
from scene import owner_env
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

ALLOWED_ORIGIN = "http://localhost:5173"


@pytest.fixture
async def served(scene):
    async with scene(lambda req: text_reply("OVER_TCP"), session=False,
                     args=("--tcp", "127.0.0.1:0"),
                     daemon={"tcp_allowed_origins": [ALLOWED_ORIGIN]}) as s:
        yield s


@pytest.fixture
def owner(served):
    return served.owner


async def mint(owner: OwnerProcess, label: str = "test") -> str:
    async with await Peer.connect(owner.home) as peer:
        return (await peer.result("token.create", label=label))["token"]


async def refused(url: str, **kwargs) -> int:
    with pytest.raises(InvalidStatus) as exc:
        await connect(url, **kwargs)
    return exc.value.response.status_code


async def test_descriptor_names_the_bound_port_and_tokens_are_stored_hashed(owner, served):
    url = owner.descriptor["tcp_url"]
    assert url.startswith("ws://127.0.0.1:") and url.endswith("/")
    assert int(url.rsplit(":", 1)[1].rstrip("/")) > 0  # the real port, not 0
    token = await mint(owner)
    assert served.rows("SELECT label FROM tokens") == [("test",)]
    assert token.encode() not in served.store.dump(), "the token is stored"
    (stored,) = served.rows("SELECT token_hash FROM tokens")[0]
    assert stored != token and len(stored) == 64


async def test_a_valid_token_in_either_form_serves_a_full_turn(owner):
    url = owner.descriptor["tcp_url"]
    token = await mint(owner)

    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"})
    async with Peer(ws) as peer:
        assert (await peer.result("ping")) == {"pong": True}
        sid = (await peer.result("session.create", title="over tcp"))["session_id"]
        receipt = await peer.result("prompt.submit", session_id=sid, input_id="t-1", text="hi")
        done = await peer.wait_terminal(sid, receipt["admission_id"])
        assert done["outcome"] == "completed" and done["result"]["text"] == "OVER_TCP"
        complete = await peer.wait_event(lambda e: e["type"] == "message.complete")
        assert complete["payload"]["text"] == "OVER_TCP"

    # a browser cannot set headers: the token rides in the subprotocol, and the
    # server must pick one of the offered protocols
    ws = await connect(url, subprotocols=[f"tether.token.{token}"], origin=ALLOWED_ORIGIN)
    async with Peer(ws) as peer:
        assert ws.subprotocol == f"tether.token.{token}"
        assert (await peer.result("ping")) == {"pong": True}
    ws = await connect(url, subprotocols=["tether.v1", f"tether.token.{token}"])
    async with Peer(ws) as peer:
        assert ws.subprotocol == "tether.v1"
        assert (await peer.result("session.resume", session_id=sid))["session_id"] == sid


async def test_missing_or_wrong_tokens_and_foreign_origins_are_refused(owner):
    url = owner.descriptor["tcp_url"]
    token = await mint(owner)
    assert await refused(url) == 401
    assert await refused(url, additional_headers={"Authorization": "Bearer tt_wrong"}) == 401
    assert await refused(url, additional_headers={"Authorization": f"Basic {token}"}) == 401
    assert await refused(url, subprotocols=["tether.token.tt_wrong"]) == 401
    assert await refused(url, subprotocols=["tether.v1"]) == 401
    # the token checked is the first offered, the one the handshake would echo
    assert await refused(url, subprotocols=["tether.token.tt_wrong",
                                            f"tether.token.{token}"]) == 401
    # a page from another origin is refused even with a valid token
    assert await refused(url, additional_headers={"Authorization": f"Bearer {token}"},
                         origin="http://evil.example") == 403
    assert await refused(url, subprotocols=[f"tether.token.{token}"],
                         origin="http://localhost:5174") == 403
    # the endpoint is / only
    assert await refused(url + "other", additional_headers={
        "Authorization": f"Bearer {token}"}) == 404
    # and the owner serves on
    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                       origin=ALLOWED_ORIGIN)
    async with Peer(ws) as peer:
        assert (await peer.result("ping")) == {"pong": True}


async def test_tokens_and_shutdown_are_for_the_unix_socket_only(owner, served):
    url = owner.descriptor["tcp_url"]
    token = await mint(owner)
    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"})
    async with Peer(ws) as peer:
        minted = await peer.call("token.create", label="from tcp")
        assert minted["error"]["message"] == "invalid_params"
        stop = await peer.call("runtime.shutdown")
        assert stop["error"]["message"] == "invalid_params"
        assert (await peer.result("ping")) == {"pong": True}
    assert owner.alive
    assert served.rows("SELECT label FROM tokens") == [("test",)]


def test_a_non_loopback_address_is_refused_at_start(tmp_path, store_url):
    home = tmp_path / "home"
    write_config(home)
    for address in ("0.0.0.0:0", "[::]:0", "192.0.2.1:0", "nonsense"):
        proc = subprocess.run(
            [sys.executable, "-m", "tether.daemon", "--home", str(home), "--tcp", address],
            env=owner_env(home, store_url), capture_output=True, text=True, timeout=30)
        assert proc.returncode != 0, address
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("tether: cannot start the owner:"), proc.stderr
        if address != "nonsense":
            assert "loopback" in proc.stderr and "tcp_allow_remote" in proc.stderr
    # it stopped before anything was opened or listened on
    assert not (home / "daemon.json").exists()
    assert not (home / "daemon.sock").exists()
    assert not (home / "state.db").exists()
