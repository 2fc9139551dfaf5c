"""The model's retries are not only in owner.log: each wait before another attempt is a
`model.retry` event, which every viewer shows (`retrying 2/3: …`); the interactive chat
shows the running turn's on its status line, counting the wait down."""

from __future__ import annotations

import io
import json
import re
import threading

from fakeprovider import FakeProvider, Held, Status, text_reply
from harness import OwnerProcess, clean_env, write_config
from test_chat_tty import ENTER, Chat, tty_env
from test_interactive_tty import PROMPT, Screen

from tether.clients.tui.render import Renderer


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



def test_the_chat_status_line_shows_a_retry_until_the_answer_streams(tmp_path):
    gate = threading.Event()
    replies = iter([Status(503, "busy, come back", retry_after=3)])

    def model(req):
        return next(replies, Held({"role": "assistant", "content": "SO_FAR____" + "LATER_____" * 2},
                                  gate, before=2))

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=tty_env(home)):
            chat = Chat(home)
            screen = Screen(chat.term)
            try:
                chat.until(PROMPT, after=0)
                chat.type(b"hello", ENTER)
                # the status line says what is retried, why, and counts the wait down
                first = screen.until(
                    lambda line: "retrying 2/3 in 3 s: provider returned HTTP 503" in line)
                assert re.search(r"^. retrying 2/3 in 3 s: .*· \d+ s · Ctrl-C interrupts",
                                 first), screen.lines()
                screen.until(lambda line: "retrying 2/3 in 1 s: provider returned" in line)
                # once the answer streams, it is back to "working", the retry gone
                screen.until(lambda line: "SO_FAR" in line)
                shown = screen.lines()
                assert any(re.match(r"^. working \d+ s · Ctrl-C", line) for line in shown), shown
                assert not any("retrying" in line for line in shown), shown
                gate.set()
                chat.until("SO_FAR____LATER_____LATER_____")
                code = chat.leave()
            finally:
                gate.set()
                chat.close()
    text = chat.term.text
    assert code == 0, text
    # it was on the status line only, not printed above the input as well
    assert "· retrying" not in text, text
