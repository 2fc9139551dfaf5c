"""A session's transcript shown again (`tether chat --resume ID`, `tether attach ID`) says
how each turn ended, as the live chat did: a cancelled turn is followed by its
`turn cancelled` line, not left looking like a prompt the model never answered."""

from __future__ import annotations

import re
import subprocess
import threading
import time

from clihelp import CLI, read_until
from fakeprovider import FakeProvider, Held, prompt_of, text_reply
from harness import OwnerProcess, db_rows, write_config
from test_chat_tty import Chat, tty_env
from test_interactive_tty import PROMPT

CANCELLED = "· turn cancelled: turn cancelled by request"


def _in_order(text: str, *parts: str) -> None:
    at = 0
    for part in parts:
        found = text.find(part, at)
        assert found >= 0, f"{part!r} not after offset {at} in:\n{text}"
        at = found + len(part)


def test_a_cancelled_turn_replays_with_its_outcome_line(tmp_path, run_cli):
    gate = threading.Event()

    def model(req):
        if prompt_of(req) == "a long job":
            return Held({"role": "assistant", "content": "PARTIAL___" + "REST______" * 2},
                        gate, before=2)
        return text_reply("ANSWER: " + prompt_of(req))

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        env = tty_env(home)
        with OwnerProcess(home, env=env):
            finite = subprocess.Popen([*CLI, "chat", "-Q", "-q", "a long job"], env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not db_rows(
                        home, "SELECT count(*) FROM events WHERE type = 'message.delta'")[0][0]:
                    time.sleep(0.05)
                [(sid,)] = db_rows(home, "SELECT session_id FROM sessions")
                cancelled = run_cli(home, "cancel", sid, env=env)
                assert cancelled.returncode == 0, cancelled
                assert finite.wait(timeout=30) == 1
            finally:
                gate.set()
                if finite.poll() is None:
                    finite.kill()
                    finite.wait()
            second = run_cli(home, "chat", "-Q", "--resume", sid, "-q", "second question",
                             env=env)
            assert second.returncode == 0 and "ANSWER: second question" in second.stdout, second

            # the interactive chat, on a terminal
            chat = Chat(home, "--resume", sid)
            try:
                at = chat.until("ANSWER: second question", after=0)
                chat.until(PROMPT, after=at)
                code = chat.leave()
            finally:
                chat.close()
            # a viewer whose output is piped
            attach = subprocess.Popen([*CLI, "attach", sid], env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            try:
                attached = read_until(attach, b"(following").decode()
            finally:
                attach.kill()
                attach.communicate()
    assert db_rows(home, "SELECT outcome FROM session_admissions ORDER BY seq") == [
        ("cancelled",), ("completed",)]
    assert code == 0, chat.term.text
    for shown in (chat.term.text, attached):
        _in_order(shown, "› a long job", CANCELLED, "› second question",
                  "ANSWER: second question")
        # the completed turn gets no outcome line
        assert len(re.findall(r"· turn \w+", shown)) == 1, shown
