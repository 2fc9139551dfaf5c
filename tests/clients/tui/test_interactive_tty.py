"""A `tether chat -q` on a terminal stays interactive: background delegation, results as a new turn.

The CLI runs under a pseudo-terminal (stdin and stdout are its slave side), so
it sees a TTY exactly as a user's shell would give it. The seeded prompt must be
submitted non-finite: the owner dispatches the delegation in the background (an
async_delegations row exists), the parent answers at once, and the children's
results arrive later as a new turn that the still-open chat prints. Ctrl-D then
ends the chat with exit 0.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time

from clihelp import CLI
from fakeprovider import FakeProvider, Message, Stall, is_child, text_reply, tool_call_reply
from harness import OwnerProcess, clean_env, db_rows, write_config

# Runs the CLI as the leader of a new session whose controlling terminal is the pty
# (stdin), so Ctrl-C typed on the pty reaches it as SIGINT, as in a real terminal.
WITH_CONTROLLING_TTY = [
    "-c", "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'tether.clients.cli', *sys.argv[1:]])"]
#: the chat's input line: prompt_toolkit draws "›" and moves the cursor past the space
PROMPT = "›".encode()
RESULTS_TOKEN = "BACKGROUND_RESULTS_SYNTHESIZED"
ACK = "DISPATCH_ACKNOWLEDGED"
CHILD = "CHILD_SUMMARY_READY"


def background_model(request: dict):
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    if is_child(request):
        return text_reply(CHILD)
    if last.get("role") == "user" and last["content"].startswith("[delegation results]"):
        # only the message that delivers the children's results earns the token
        return text_reply(RESULTS_TOKEN if CHILD in last["content"] else "RESULTS_MISSING")
    if last.get("role") == "tool":
        status = json.loads(last["content"]).get("status")
        return text_reply(ACK if status == "dispatched" else "JOINED_INLINE_WRONGLY")
    return tool_call_reply("delegate_task", {"goal": "independent background task"})


class Terminal:
    """The master side of a pty, with a transcript of everything the CLI printed."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.output = b""

    def read_until(self, token: bytes, timeout: float = 20.0, after: int = 0) -> bytes:
        """Read until ``token`` was printed at or after offset ``after`` of the output."""
        deadline = time.monotonic() + timeout
        while token not in self.output[after:]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{token!r} not printed; got:\n{self.text}")
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.2))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # EIO: the CLI closed the terminal (exited)
                    break
                if not chunk:
                    break
                self.output += chunk
        if token not in self.output[after:]:
            raise AssertionError(f"{token!r} not printed; got:\n{self.text}")
        return self.output

    def drain(self, seconds: float = 0.5) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.output += chunk

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")


class Screen:
    """What a terminal of 80×24 shows of a ``Terminal``'s output (pyte emulates it):
    prompt_toolkit redraws only the cells that changed, so a line that was edited in
    place is in no single stretch of the raw output."""

    def __init__(self, term: Terminal, columns: int = 80, rows: int = 24) -> None:
        import pyte

        self.term = term
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.fed = 0

    def lines(self) -> list[str]:
        self.stream.feed(self.term.output[self.fed:])
        self.fed = len(self.term.output)
        return [line.rstrip() for line in self.screen.display]

    def until(self, check, timeout: float = 20.0) -> str:
        """Read until a line on the screen passes ``check``; that line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((line for line in self.lines() if check(line)), None)
            if found is not None:
                return found
            self.term.drain(0.05)
        raise AssertionError("no such line on the screen:\n" + "\n".join(self.lines()))


def test_tty_seeded_chat_keeps_background_delegation_and_prints_results(tmp_path):
    home = tmp_path / "home"
    with FakeProvider(background_model) as fake:
        write_config(home, fake.url)
        env = clean_env(home, TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1")
        with OwnerProcess(home, env=env) as owner:
            master, slave = os.openpty()
            proc = subprocess.Popen([*CLI, "chat", "-q", "Delegate a task"], stdin=slave,
                                    stdout=slave, stderr=slave, env=env, cwd=tmp_path,
                                    start_new_session=True)
            os.close(slave)
            term = Terminal(master)
            try:
                term.read_until(ACK.encode())
                term.read_until(RESULTS_TOKEN.encode())
                # the prompt ("› ") is back after the results turn
                results_at = term.output.index(RESULTS_TOKEN.encode())
                term.read_until(PROMPT, after=results_at)
                os.write(master, b"\x04")  # Ctrl-D on an empty line: end of input
                code = proc.wait(timeout=20)
                term.drain(0.2)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(master)
            assert owner.alive
    transcript = term.text
    assert code == 0, transcript
    assert "Traceback" not in transcript, transcript
    # non-finite: dispatched in the background, not joined inline
    rows = db_rows(home, "SELECT state, delivery_state FROM async_delegations")
    assert rows == [("completed", "delivered")], rows
    assert "JOINED_INLINE_WRONGLY" not in transcript
    # the results came back as a second turn, shown after the first turn's answer
    assert transcript.index(ACK) < transcript.index(RESULTS_TOKEN), transcript
    assert "new turn" in transcript, transcript
    admissions = db_rows(home, "SELECT principal_id, status, outcome FROM session_admissions "
                               "ORDER BY seq")
    assert admissions == [("local", "terminal", "completed"),
                          ("delegation", "terminal", "completed")], admissions
    payload = json.loads(db_rows(home, "SELECT payload_json FROM session_admissions "
                                       "WHERE principal_id = 'local'")[0][0])
    assert payload["finite"] is False


def test_ctrl_c_interrupts_the_running_turn_and_the_chat_goes_on(tmp_path):
    def model(request: dict):
        if "slow" in request["messages"][-1]["content"]:
            return Stall(20)
        return text_reply("QUICK_ANSWER")

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        env = clean_env(home, TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1")
        with OwnerProcess(home, env=env):
            master, slave = os.openpty()
            proc = subprocess.Popen([CLI[0], *WITH_CONTROLLING_TTY, "chat", "-q", "be slow"],
                                    stdin=slave, stdout=slave, stderr=slave, env=env,
                                    cwd=tmp_path)
            os.close(slave)
            term = Terminal(master)
            try:
                term.read_until("› be slow".encode())
                deadline = time.monotonic() + 20
                while not fake.requests and time.monotonic() < deadline:
                    time.sleep(0.05)
                os.write(master, b"\x03")  # Ctrl-C while the turn runs
                term.read_until(b"turn cancelled")
                os.write(master, b"hello\n")
                term.read_until(b"QUICK_ANSWER")
                term.read_until(PROMPT, after=term.output.index(b"QUICK_ANSWER"))
                os.write(master, b"\x04")
                code = proc.wait(timeout=20)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(master)
    assert code == 0, term.text
    assert db_rows(home, "SELECT outcome FROM session_admissions ORDER BY seq") == [
        ("cancelled",), ("completed",)]


def test_cost_and_compact_in_the_chat(tmp_path):
    """/cost prints the session's tokens and cost (priced from config); /compact asks
    the model for a summary and says what it did."""
    def model(request: dict):
        if request["messages"][0]["content"].startswith("You compact the history"):
            return text_reply("SUMMARY_OF_EARLIER_TURNS")
        asked = request["messages"][-1]["content"]
        return Message({"role": "assistant", "content": f"ANSWER_TO_{asked.upper()}"},
                       usage={"prompt_tokens": 1000, "completion_tokens": 100,
                              "total_tokens": 1100})

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url, model={"prices": {"test-model": {"input": 1.0,
                                                                      "output": 10.0}}})
        env = clean_env(home, TERM="xterm", NO_COLOR="1", PROMPT_TOOLKIT_NO_CPR="1")
        with OwnerProcess(home, env=env):
            master, slave = os.openpty()
            proc = subprocess.Popen([CLI[0], *WITH_CONTROLLING_TTY, "chat", "-q", "first"],
                                    stdin=slave, stdout=slave, stderr=slave, env=env,
                                    cwd=tmp_path)
            os.close(slave)
            term = Terminal(master)
            try:
                term.read_until(b"ANSWER_TO_FIRST")
                term.read_until(PROMPT, after=term.output.rindex(b"ANSWER_TO_FIRST"))
                term.drain(0.3)
                os.write(master, b"second\n")
                term.read_until(b"ANSWER_TO_SECOND")
                deadline = time.monotonic() + 20  # both turns settled: their usage is in
                while db_rows(home, "SELECT COUNT(*) FROM session_admissions WHERE "
                                    "status = 'terminal'")[0][0] < 2:
                    assert time.monotonic() < deadline, term.text
                    time.sleep(0.05)
                term.drain(0.3)
                term.read_until(PROMPT, after=term.output.rindex(b"ANSWER_TO_SECOND"))
                os.write(master, b"/cost\n")
                term.read_until(b"cost: $0.0040")
                os.write(master, b"/compact the answers\n")
                term.read_until(b"compacted messages 0")
                term.read_until(PROMPT, after=term.output.rindex(b"compacted messages 0"))
                os.write(master, b"\x04")
                code = proc.wait(timeout=20)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                os.close(master)
    assert code == 0, term.text
    assert "tokens: 2000 prompt (0 cached), 200 completion (0 reasoning), 2 requests" \
        in term.text
    assert db_rows(home, "SELECT kind, focus FROM compactions") == [("manual", "the answers")]
