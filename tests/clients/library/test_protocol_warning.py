"""A Python client that reaches an owner over TCP which names another protocol warns,
once per protocol, and carries on (daemon.json tells the Unix-socket client, which
refuses such an owner instead)."""

import json
import warnings

import pytest
from websockets.asyncio.server import serve

from tether.clients.library.client import TetherClient
from tether.clients.library.connection import ProtocolMismatchWarning


async def test_an_owner_of_another_protocol_is_warned_about_once(monkeypatch):
    import tether.clients.library.connection as connection

    monkeypatch.setattr(connection, "_warned", set())
    asked = []

    async def owner(ws):
        async for frame in ws:
            request = json.loads(frame)
            asked.append(request["method"])
            result = {"protocol": "tether/0", "version": "0.0.1"} \
                if request["method"] == "runtime.describe" else {"pong": True}
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}))

    async with serve(owner, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        url = f"ws://127.0.0.1:{port}/"
        with pytest.warns(ProtocolMismatchWarning, match="speaks protocol 'tether/0', this "
                                                         "client speaks 'tether/1'"):
            client = await TetherClient.connect(url=url, token="t")
        assert await client.ping() == {"pong": True}
        await client.close()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a second client: no second warning
            again = await TetherClient.connect(url=url, token="t")
            await again.close()
    assert asked == ["runtime.describe", "ping", "runtime.describe"]
