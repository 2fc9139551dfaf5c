"""The interactive chat driven through a real pseudo-terminal, key by key, as a person types.

Each case is one symptom a user reported: escape bytes sent as the prompt, a paste
split into turns, output landing in the middle of typing, Ctrl-D waiting for the
turn, Ctrl-C quitting with text typed, empty sessions left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

from clihelp import CLI
from fakeprovider import FakeProvider, Held, prompt_of, text_reply
from harness import OwnerProcess, clean_env, db_rows, write_config
from test_interactive_tty import PROMPT, WITH_CONTROLLING_TTY, Terminal

LEFT, UP = b"\x1b[D", b"\x1b[A"
CTRL_C, CTRL_D, ENTER = b"\x03", b"\x04", b"\r"


def paste(text: str) -> bytes:
    """What a terminal sends for a paste once the application asked for bracketed paste."""
    return b"\x1b[200~" + text.encode() + b"\x1b[201~"


def answer(req: dict) -> object:
    return text_reply("ANSWER: " + prompt_of(req).replace("\n", " / "))


def tty_env(home):
    # NO_CPR: the test terminal does not answer cursor-position requests
    return clean_env(home, TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1")


class Chat:
    """`tether chat ARGS` on a fresh pty."""

    def __init__(self, home, *args: str, env=None) -> None:
        master, slave = os.openpty()
        # the pty is the chat's controlling terminal, as in a shell: a Ctrl-C typed while
        # the terminal is not in raw mode reaches it as SIGINT
        self.proc = subprocess.Popen([CLI[0], *WITH_CONTROLLING_TTY, "chat", *args],
                                     stdin=slave, stdout=slave, stderr=slave,
                                     env=env or tty_env(home), cwd=home.parent)
        os.close(slave)
        self.master = master
        self.term = Terminal(master)

    def type(self, *keys: bytes) -> None:
        for key in keys:
            os.write(self.master, key)
            time.sleep(0.05)  # keys arrive apart, as typed (a burst would read as a paste)

    def until(self, token: str | bytes, after: int | None = None, timeout: float = 20.0) -> int:
        """Wait for ``token``; the offset just past it."""
        token = token.encode() if isinstance(token, str) else token
        start = len(self.term.output) if after is None else after
        self.term.read_until(token, timeout=timeout, after=start)
        return self.term.output.index(token, start) + len(token)

    def leave(self) -> int:
        self.type(CTRL_D)
        code = self.proc.wait(timeout=20)
        self.term.drain(0.2)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def prompts(home) -> list[str]:
    rows = db_rows(home, "SELECT payload_json FROM session_admissions ORDER BY seq")
    return [json.loads(r[0])["text"] for r in rows]


def test_editing_history_paste_ctrl_c_and_slash_commands(tmp_path):
    home = tmp_path / "home"
    with FakeProvider(answer) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=tty_env(home)):
            chat = Chat(home)
            try:
                chat.until(PROMPT, after=0)
                # opening a chat creates nothing yet
                assert db_rows(home, "SELECT count(*) FROM sessions") == [(0,)]
                chat.type(b"helo", LEFT, LEFT, b"l", ENTER)
                at = chat.until("ANSWER: hello")
                chat.until(PROMPT, after=at)
                chat.type(UP, ENTER)  # history: the same prompt again
                at = chat.until("ANSWER: hello", after=at)
                chat.type(paste("line one\nline two\nline three"), ENTER)
                at = chat.until("ANSWER: line one / line two / line three", after=at)
                chat.type(b"discard me", CTRL_C, b"kept", ENTER)
                at = chat.until("ANSWER: kept", after=at)
                chat.type(b"/help", ENTER)
                at = chat.until("/resume ID", after=at)
                chat.type(b"/nonsense", ENTER)
                at = chat.until("unknown command /nonsense", after=at)
                chat.until(PROMPT, after=at)
                code = chat.leave()
            finally:
                chat.close()
    text = chat.term.text
    assert code == 0, text
    assert "Traceback" not in text and "\x1b[A" not in "".join(prompts(home)), text
    assert prompts(home) == ["hello", "hello", "line one\nline two\nline three", "kept"]
    [(sid, title)] = db_rows(home, "SELECT session_id, title FROM sessions")
    assert title == "hello"
    # leaving says how to come back, on a line of its own
    assert text.rstrip().endswith(f"continue with `tether chat --resume {sid}`"), text
    assert text.endswith("\n"), repr(text[-80:])
    history = (home / "chat_history").read_text()
    assert "helo" not in history and "+hello" in history and "+kept" in history


def test_background_output_leaves_the_typed_text_intact(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(answer) as fake:
        write_config(home, fake.url)
        env = tty_env(home)
        with OwnerProcess(home, env=env):
            chat = Chat(home)
            try:
                chat.until(PROMPT, after=0)
                chat.type(b"first", ENTER)
                at = chat.until("ANSWER: first")
                [(sid,)] = db_rows(home, "SELECT session_id FROM sessions")
                chat.type(b"half-typed next ques")
                elsewhere = run_cli(home, "chat", "-Q", "--resume", sid[:12], "-q",
                                    "asked from elsewhere", env=clean_env(home))
                assert elsewhere.returncode == 0, elsewhere
                at = chat.until("ANSWER: asked from elsewhere", after=at)
                # the draft is drawn again under the output that arrived ...
                chat.until("half-typed next ques", after=at)
                # ... and still there to finish
                chat.type(b"tion", ENTER)
                chat.until("ANSWER: half-typed next question", after=at)
                code = chat.leave()
            finally:
                chat.close()
    text = chat.term.text
    assert code == 0, text
    # another client's prompt is shown with what it asked
    assert "new turn from another client" in text and "› asked from elsewhere" in text, text
    assert prompts(home) == ["first", "asked from elsewhere", "half-typed next question"]


def test_ctrl_d_during_a_running_turn_leaves_and_the_owner_finishes_it(tmp_path):
    gate = threading.Event()
    home = tmp_path / "home"
    reply = {"role": "assistant", "content": "ONE_______TWO_______THREE_____"}
    with FakeProvider(lambda req: Held(reply, gate, before=2)) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=tty_env(home)):
            chat = Chat(home, "-q", "a long job")
            try:
                chat.until("working", after=0)  # the status line while the turn runs
                code = chat.leave()  # returns while the model still holds the answer
                assert not gate.is_set()
            finally:
                gate.set()
                chat.close()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and db_rows(
                    home, "SELECT outcome FROM session_admissions") != [("completed",)]:
                time.sleep(0.05)
    text = chat.term.text
    assert code == 0, text
    assert "the turn goes on in the owner" in text and "tether chat --resume ses_" in text
    assert db_rows(home, "SELECT outcome FROM session_admissions") == [("completed",)]
    assert db_rows(home, "SELECT content FROM messages WHERE role = 'assistant'") == [
        (reply["content"],)]


def test_resume_of_a_running_session_shows_the_turn_and_ctrl_c_interrupts_it(tmp_path):
    gate = threading.Event()
    home = tmp_path / "home"
    reply = {"role": "assistant", "content": "SO_FAR____" + "LATER_____" * 2}
    with FakeProvider(lambda req: Held(reply, gate, before=2)) as fake:
        write_config(home, fake.url)
        env = tty_env(home)
        with OwnerProcess(home, env=env):
            finite = subprocess.Popen([*CLI, "chat", "-Q", "-q", "started elsewhere"], env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            chat = None
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not db_rows(
                        home, "SELECT count(*) FROM events WHERE type = 'message.delta'")[0][0]:
                    time.sleep(0.05)
                chat = Chat(home, "--last")
                chat.until("› started elsewhere", after=0)
                chat.until("SO_FAR", after=0)  # the status line shows the line streaming
                chat.until("Ctrl-C interrupts", after=0)
                chat.type(CTRL_C)
                chat.until("turn cancelled", after=0)
                assert finite.wait(timeout=30) == 1  # its turn was cancelled
                code = chat.leave()
            finally:
                gate.set()
                if finite.poll() is None:
                    finite.kill()
                    finite.wait()
                if chat is not None:
                    chat.close()
    assert code == 0, chat.term.text
    assert db_rows(home, "SELECT outcome FROM session_admissions") == [("cancelled",)]


def test_a_refused_prompt_leaves_no_session(tmp_path):
    home = tmp_path / "home"
    with FakeProvider(answer) as fake:
        write_config(home, fake.url, daemon={"max_text_chars": 50})
        with OwnerProcess(home, env=tty_env(home)):
            chat = Chat(home)
            try:
                chat.until(PROMPT, after=0)
                chat.type(b"x" * 80, ENTER)
                at = chat.until("not sent: invalid_params")
                chat.until(PROMPT, after=at)
                assert db_rows(home, "SELECT count(*) FROM sessions") == [(0,)]
                code = chat.leave()
            finally:
                chat.close()
    assert code == 0, chat.term.text
    assert "--resume" not in chat.term.text
    assert db_rows(home, "SELECT count(*) FROM sessions") == [(0,)]


def test_a_failed_turn_in_the_chat_gets_the_url_and_a_hint(tmp_path):
    from fakeprovider import Status

    home = tmp_path / "home"
    with FakeProvider(lambda req: Status(404, '{"detail": "Not Found"}')) as fake:
        # the classic mistake: the server's address without /v1
        write_config(home, fake.url.removesuffix("/v1"))
        with OwnerProcess(home, env=tty_env(home)):
            chat = Chat(home)
            try:
                chat.until(PROMPT, after=0)
                chat.type(b"hi", ENTER)
                at = chat.until("turn failed")
                chat.until("hint: check the model settings", after=at)
                code = chat.leave()
            finally:
                chat.close()
    text = chat.term.text
    assert code == 0, text
    assert "missing `/v1`" in text and f"{home}/logs/owner.log" in text, text


def test_tether_stop_is_not_undone_by_an_open_chat_which_waits_for_the_next_owner(tmp_path,
                                                                                run_cli):
    from clihelp import owner_pid, pid_alive, read_until

    home = tmp_path / "home"
    with FakeProvider(answer) as fake:
        write_config(home, fake.url)
        env = tty_env(home)
        assert run_cli(home, "serve", env=env).returncode == 0
        first = owner_pid(home)
        chat = Chat(home, env=env)
        attach = None
        try:
            chat.until(PROMPT, after=0)
            chat.type(b"hello", ENTER)
            chat.until("ANSWER: hello")
            attach = subprocess.Popen([*CLI, "attach", "--last"], env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)
            read_until(attach, b"following")
            stopped = run_cli(home, "stop", env=env)
            assert stopped.returncode == 0, stopped
            # attach says the owner stopped and leaves; the chat stays, waiting
            out, _ = attach.communicate(timeout=30)
            assert attach.returncode == 3 and b"owner_stopped" in out, out
            at = chat.until("this chat waits for the next owner")
            time.sleep(1.5)
            assert chat.proc.poll() is None and owner_pid(home) is None, \
                "the chat left, or started an owner by itself"
            # any new command starts one, and the open chat follows it there
            again = run_cli(home, "chat", "-Q", "-q", "after the stop", env=clean_env(home))
            assert again.returncode == 0 and "ANSWER: after the stop" in again.stdout, again
            at = chat.until("the chat follows the new owner", after=at)
            chat.type(b"back again", ENTER)
            at = chat.until("ANSWER: back again", after=at)
            # stopped again, the person's own prompt starts the next owner
            assert run_cli(home, "stop", env=env).returncode == 0
            at = chat.until("this chat waits for the next owner", after=at)
            chat.type(b"start it for me", ENTER)
            at = chat.until("ANSWER: start it for me", after=at)
            code = chat.leave()
        finally:
            chat.close()
            if attach is not None and attach.poll() is None:
                attach.kill()
                attach.communicate()
        assert code == 0, chat.term.text
        assert not pid_alive(first)
        assert chat.term.text.count("owner_stopped") == 0, chat.term.text  # no error, a note
        counts = db_rows(home, "SELECT count(*) FROM session_admissions GROUP BY "
                               "target_session_id ORDER BY count(*)")
        # the chat's three prompts in its one session, across three owners; the other
        # session is the finite chat's
        assert counts == [(1,), (3,)], counts
        run_cli(home, "stop", env=env)


def test_a_long_paste_is_one_line_and_stays_out_of_the_history_and_model_is_named(tmp_path):
    import stat


    big = "\n".join(f"log line {i:03d} " + "x" * 40 for i in range(60))
    seen: list[str] = []

    def model(req):
        seen.append(prompt_of(req))
        return text_reply(f"GOT {len(prompt_of(req))} CHARS")

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        (home / "chat_history").write_text("")
        (home / "chat_history").chmod(0o644)  # as an older tether left it
        with OwnerProcess(home, env=tty_env(home)):
            chat = Chat(home)
            try:
                at = chat.until(PROMPT, after=0)
                chat.type(b"/model", ENTER)
                at = chat.until("model: test-model (the owner's default, custom)", after=at)
                chat.type(b"what is wrong here: ", paste(big), ENTER)
                at = chat.until(f"GOT {len('what is wrong here: ') + len(big)} CHARS", after=at)
                chat.type(b"short one", ENTER)
                at = chat.until("GOT 9 CHARS", after=at)
                chat.type(b"/model other-model", ENTER)
                at = chat.until("the next prompts use model other-model", after=at)
                chat.type(b"/model", ENTER)
                at = chat.until("model: other-model (set in this chat)", after=at)
                chat.until(PROMPT, after=at)
                code = chat.leave()
            finally:
                chat.close()
    text = chat.term.text
    assert code == 0, text
    assert seen[0] == "what is wrong here: " + big  # the whole paste was sent
    # the input line and its echo held the placeholder, never the pasted lines
    assert "[pasted 60 lines]" in text and "log line 030" not in text, text[-2000:]
    history = home / "chat_history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    kept = history.read_text()
    assert "+short one" in kept and "log line" not in kept and "pasted" not in kept


def test_pastes_collapse_and_expand():
    from tether.clients.tui.pastes import Pastes

    p = Pastes()
    assert p.collapse("a\nb") == "a\nb"
    one = p.collapse("\n".join("x" * 5 for _ in range(20)))
    two = p.collapse("\n".join("y" * 5 for _ in range(20)))
    wide = p.collapse("z" * 5000)
    assert (one, two, wide) == ("[pasted 20 lines]", "[pasted 20 lines #2]",
                                "[pasted 5000 characters]")
    assert p.expand(f"see {one} and {two}") == "see " + "\n".join(["xxxxx"] * 20) + \
        " and " + "\n".join(["yyyyy"] * 20)
    assert p.expand("no paste here") == "no paste here"


def test_a_prompt_sent_while_a_turn_runs_leaves_no_frozen_status_line(tmp_path):
    from test_interactive_tty import Screen

    gate = threading.Event()

    def model(req):
        if prompt_of(req) == "slow one":
            return Held({"role": "assistant", "content": "SLOW DONE"}, gate, before=0)
        return text_reply("ANSWER: " + prompt_of(req))

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=tty_env(home)):
            chat = Chat(home)
            screen = Screen(chat.term)
            try:
                chat.until(PROMPT, after=0)
                chat.type(b"slow one", ENTER)
                screen.until(lambda line: "working" in line and "Ctrl-C interrupts" in line)
                chat.type(b"queued one", ENTER)
                at = chat.until("queued behind the running turn")
                gate.set()
                chat.until("ANSWER: queued one", after=at)
                code = chat.leave()
            finally:
                gate.set()
                chat.close()
    assert code == 0, chat.term.text
    lines = [line for line in screen.lines() if line.strip()]
    sent = next(i for i, line in enumerate(lines) if line.startswith("› queued one"))
    # the accepted line stays on the screen without the status line it was drawn under
    assert "leaves (the turn goes on)" not in lines[sent - 1], lines
    assert not any("leaves (the turn goes on)" in line for line in lines), lines
