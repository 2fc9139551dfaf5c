"""Answers are markdown: rendered on a terminal with colour, literal everywhere else.

The model's answer has a heading, bold text, a fenced code block and a list. On a
pseudo-terminal the CLI shows it rendered (no `**`, no fence, bold as an ANSI
attribute) — in a finite chat, in the interactive chat as it streams, and in a
transcript shown again by `chat --resume`. With NO_COLOR=1 or with stdout piped the
text is exactly what the model wrote, and rich is never imported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

from clihelp import CLI
from fakeprovider import FakeProvider, Held, prompt_of, text_reply
from harness import OwnerProcess, clean_env, db_rows, write_config
from test_chat_tty import ENTER, Chat, prompts
from test_interactive_tty import PROMPT, Terminal

ANSWER = ("# Quarterly Title\n\nThis is **important** news.\n\n"
          "```python\nvalue = 41 + 1\n```\n\n- first item\n- last item\n")
#: bold switched on right before the word (rich may combine it with other attributes)
BOLD_WORD = re.compile(r"\x1b\[(?:\d+;)*1(?:;\d+)*mimportant")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def model(req):
    return text_reply(ANSWER if "markdown" in prompt_of(req) else "ANSWER: " + prompt_of(req))


def color_env(home, **extra):
    env = clean_env(home, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
    env.pop("NO_COLOR", None)
    return env | extra


def on_a_terminal(env, *args: str, importtime: bool = False) -> tuple[int, str, str]:
    """`tether ARGS` with stdout on a fresh pty and stdin from /dev/null (a finite chat);
    (exit code, what the terminal showed, stderr)."""
    master, slave = os.openpty()
    cli = [sys.executable, "-X", "importtime", *CLI[1:]] if importtime else CLI
    proc = subprocess.Popen([*cli, *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE, env=env)
    os.close(slave)
    term = Terminal(master)
    try:
        _, err = proc.communicate(timeout=60)
        term.drain(0.3)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return proc.returncode, term.text, err.decode(errors="replace")


def imported(importtime_log: str, package: str) -> bool:
    return re.search(rf"\|\s+{package}(\.|$)", importtime_log, re.MULTILINE) is not None


def assert_rendered(shown: str) -> None:
    assert BOLD_WORD.search(shown), shown
    plain = ANSI.sub("", shown)
    assert "**" not in plain and "```" not in plain and "# Quarterly" not in plain, shown
    assert "Quarterly Title" in plain and "value = 41 + 1" in re.sub(r" +", " ", plain), shown
    assert "first item" in plain and "last item" in plain, shown


def test_finite_chat_renders_on_a_terminal_and_is_literal_otherwise(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=clean_env(home)):
            code, shown, err = on_a_terminal(color_env(home), "chat", "-q", "markdown please",
                                             importtime=True)
            assert code == 0, (shown, err)
            assert_rendered(shown)
            assert imported(err, "rich")  # what the checks below look for is there to see

            code, shown, err = on_a_terminal(color_env(home, NO_COLOR="1"), "chat", "-q",
                                             "markdown please", importtime=True)
            assert code == 0, (shown, err)
            assert ANSWER.replace("\n", "\r\n") in shown and "\x1b[" not in shown, shown
            assert not imported(err, "rich") and not imported(err, "markdown_it"), err

            env = color_env(home)
            piped = subprocess.run([sys.executable, "-X", "importtime", *CLI[1:], "chat", "-q",
                                    "markdown please"], env=env, stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=60, check=False)
            assert piped.returncode == 0, piped
            assert piped.stdout == ANSWER, piped.stdout
            assert not imported(piped.stderr, "rich"), piped.stderr
            assert not imported(piped.stderr, "prompt_toolkit"), piped.stderr


def test_interactive_chat_renders_the_streamed_answer_and_the_replayed_one(tmp_path):
    gate = threading.Event()

    def held_model(req):
        if "markdown" in prompt_of(req):
            return Held({"role": "assistant", "content": ANSWER}, gate, before=2)
        return model(req)

    home = tmp_path / "home"
    with FakeProvider(held_model) as fake:
        write_config(home, fake.url)
        env = color_env(home)
        with OwnerProcess(home, env=env):
            chat = Chat(home, env=env)
            try:
                chat.until(PROMPT, after=0)
                chat.type(b"markdown please", ENTER)
                at = chat.until("working")
                # typing goes on while the answer arrives above the input line
                chat.type(b"half-typed dra")
                chat.until("half-typed dra", after=at)
                gate.set()
                at = chat.until("last item", after=at)
                chat.until("half-typed dra", after=at)  # the draft is drawn again below
                chat.type(b"ft", ENTER)
                chat.until("ANSWER: half-typed draft", after=at)
                code = chat.leave()
            finally:
                gate.set()
                chat.close()
            live = chat.term.text
            assert code == 0, live
            assert prompts(home) == ["markdown please", "half-typed draft"]
            assert BOLD_WORD.search(live), live
            # the lines written above the input are rendered (the status line may show
            # the raw line while it streams)
            bold_line = live[live.rindex("\n", 0, BOLD_WORD.search(live).start()):]
            assert "**" not in bold_line.split("\n", 2)[1], live

            [(sid,)] = db_rows(home, "SELECT session_id FROM sessions")
            again = Chat(home, "--resume", sid, env=env)
            try:
                at = again.until("ANSWER: half-typed draft", after=0)
                again.until(PROMPT, after=at)
                code = again.leave()
            finally:
                again.close()
    replayed = again.term.text
    assert code == 0, replayed
    # before the input line is drawn: only the transcript, rendered
    assert_rendered(replayed[:replayed.index("ANSWER: half-typed draft")])
