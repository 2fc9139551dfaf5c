"""The interactive chat asks inline: y / s / a / n [reason], answered on the terminal."""

from __future__ import annotations

import os
import subprocess

import pytest
from clihelp import CLI
from fakeprovider import FakeProvider
from harness import OwnerProcess, clean_env, db_rows, write_config
from test_interactive_tty import Terminal
from toolscript import ScriptedModel, tool_results

from tether.clients.approval_prompt import parse_answer

TOUCH = "touch made-by-agent"


@pytest.mark.parametrize("line, answer", [
    ("y", ("once", None)), ("yes", ("once", None)), ("s", ("session", None)),
    ("a", ("always", None)), ("n", ("deny", None)), ("n not today", ("deny", "not today")),
    ("  N  ", ("deny", None)), ("maybe", None), ("", None),
])
def test_parse_answer(line, answer):
    assert parse_answer(line) == answer


def test_the_chat_asks_inline_and_the_answer_decides(tmp_path):
    model = ScriptedModel({"make": [("terminal", {"command": TOUCH})],
                           "again": [("terminal", {"command": TOUCH})]})
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        env = clean_env(home, TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1")
        with OwnerProcess(home, env=env):
            master, slave = os.openpty()
            proc = subprocess.Popen([*CLI, "chat", "-q", "make a file"], stdin=slave,
                                    stdout=slave, stderr=slave, env=env, cwd=work,
                                    start_new_session=True)
            os.close(slave)
            term = Terminal(master)
            try:
                term.read_until(b"the agent wants to run: " + TOUCH.encode())
                term.read_until(b"[y] once")
                term.read_until("›".encode(), after=term.output.index(b"[y] once"))
                before = len(term.output)
                os.write(master, b"maybe\n")  # not an answer: asked again
                term.read_until(b"[y] once", after=before)
                os.write(master, b"y\n")
                term.read_until(b"DONE")
                done_at = term.output.index(b"DONE")
                term.read_until("›".encode(), after=done_at)
                os.write(master, b"again please\n")
                asked = term.read_until(b"the agent wants to run", after=done_at)
                os.write(master, b"n not in this folder\n")
                term.read_until(b"DONE", after=len(asked))
                os.write(master, b"\x04")
                code = proc.wait(timeout=20)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(master)
    assert code == 0, term.text
    assert (work / "made-by-agent").exists()
    assert db_rows(home, "SELECT status, decision, reason FROM approvals ORDER BY created_at") \
        == [("approved", "once", None), ("denied", "deny", "not in this folder")]
    [res] = tool_results(model, "again")
    assert "not in this folder" in res["error"]
