"""The model's retries are not only in owner.log: each wait before another attempt is a
`model.retry` event, which every viewer shows (`retrying 2/3: …`)."""

from __future__ import annotations

import io
import json

from fakeprovider import FakeProvider, Status, text_reply
from harness import OwnerProcess, clean_env, write_config

from tether.clients.render import Renderer


def test_retries_are_events_a_viewer_shows(tmp_path, run_cli):
    replies = iter([Status(500, "overloaded, try later"), Status(500, "still overloaded")])

    def model(req):
        return next(replies, text_reply("FINALLY"))

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=clean_env(home)):
            out = run_cli(home, "chat", "--json", "-q", "hello")
    assert out.returncode == 0, out
    events = [json.loads(line) for line in out.stdout.splitlines()]
    retries = [e["payload"] for e in events if e.get("type") == "model.retry"]
    assert [(r["attempt"], r["attempts"], r["reason"]) for r in retries] == [
        (2, 3, "server_error"), (3, 3, "server_error")], retries
    assert "HTTP 500" in retries[0]["detail"] and fake.url in retries[0]["detail"]
    assert events[-1]["result"]["text"] == "FINALLY"

    shown = io.StringIO()
    renderer = Renderer(shown, color=False, mine=None)
    renderer.event({"type": "model.retry", "admission_id": "a",
                    "payload": {**retries[0], "delay_seconds": 4.0}})
    assert shown.getvalue().startswith("  · retrying 2/3 in 4 s: provider returned HTTP 500")
