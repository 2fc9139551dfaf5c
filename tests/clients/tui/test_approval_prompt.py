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

from tether.clients.tui.approval_prompt import parse_answer

TOUCH = "touch made-by-agent"
ASK = b"approve?"


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
                term.read_until(ASK, after=term.output.index(b"[y] once"))
                before = len(term.output)
                os.write(master, b"maybe\n")  # not an answer: refused, saying why
                term.read_until(b"'maybe' is not an answer", after=before)
                os.write(master, b"\x15y\n")  # Ctrl-U clears the line, then the answer
                term.read_until(b"approved once: " + TOUCH.encode())
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


def chat_on_a_pty(home, work, env, *args):
    master, slave = os.openpty()
    proc = subprocess.Popen([*CLI, "chat", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=work, start_new_session=True)
    os.close(slave)
    return proc, master, Terminal(master)


def pending_approval(home) -> str:
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rows = db_rows(home, "SELECT approval_id FROM approvals WHERE status = 'pending'")
        if rows:
            return rows[0][0]
        time.sleep(0.05)
    raise AssertionError("no pending approval")


@pytest.mark.parametrize("how", ["elsewhere", "ctrl-c"])
def test_a_prompt_resolved_elsewhere_or_dismissed_loses_no_line(tmp_path, how):
    """The question leaves the input line at once; the next line typed is a prompt."""
    model = ScriptedModel({"make": [("terminal", {"command": TOUCH})]})
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        env = clean_env(home, TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1")
        with OwnerProcess(home, env=env):
            proc, master, term = chat_on_a_pty(home, work, env, "-q", "make a file")
            try:
                term.read_until(ASK)
                apr = pending_approval(home)
                before = len(term.output)
                if how == "elsewhere":
                    out = subprocess.run([*CLI, "deny", apr, "--reason", "not now"], env=env,
                                         capture_output=True, text=True, timeout=60)
                    assert out.returncode == 0, out
                    term.read_until(b"the prompt was answered elsewhere: denied", after=before)
                else:
                    os.write(master, b"\x03")
                    term.read_until(b"denied (Ctrl-C at the prompt): " + TOUCH.encode(),
                                    after=before)
                term.read_until(b"DONE", after=before)
                done_at = term.output.index(b"DONE", before)
                term.read_until("›".encode(), after=done_at)
                os.write(master, b"the next line\r")
                term.read_until(b"ANSWER: the next line", after=done_at)
                os.write(master, b"\x04")
                code = proc.wait(timeout=20)
                term.drain(0.5)  # what it drew on leaving
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(master)
    assert code == 0, term.text
    assert not (work / "made-by-agent").exists()
    reason = "not now" if how == "elsewhere" else "declined at the chat's prompt (Ctrl-C)"
    assert db_rows(home, "SELECT status, reason FROM approvals") == [("denied", reason)]
    assert "resolved elsewhere" not in term.text and "^[" not in term.text
    # the question was withdrawn, not left on the screen under the transcript
    from test_interactive_tty import Screen

    screen = [line.rstrip() for line in Screen(term).lines() if line.strip()]
    assert not any(line.startswith("approve?") for line in screen), screen
    # nor a status line frozen when the question took the input line over
    assert not any("leaves (the turn goes on)" in line for line in screen), screen
