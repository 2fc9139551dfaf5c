"""The CLI's exit codes and error lines (SPEC §8), and its read-only commands.

0 completed; 1 turn failed/cancelled/interrupted; 2 usage or invalid input;
3 cannot reach or start the owner. Every error is `tether: reason: detail`
plus a `hint:` line, never a traceback.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from clihelp import CLI
from fakeprovider import FakeProvider, Status, text_reply
from harness import OwnerProcess, clean_env, db_rows, write_config

from tether.rpc.methods import METHODS


def assert_error(result, code: int, reason: str) -> None:
    assert result.returncode == code, result
    assert result.stderr.startswith(f"tether: {reason}:"), result.stderr
    assert "\nhint: " in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("args", [
    ["chat", "-q", "hi", "--max-turns", "0"],
    ["chat", "-q", "hi", "--reasoning", "extreme"],
    ["chat", "-q", "a", "--query-file", "b"],
    ["no-such-command"],
    ["chat", "--no-such-flag"],
])
def test_usage_errors_exit_2(tmp_path, run_cli, args):
    assert_error(run_cli(tmp_path / "home", *args), 2, "usage")
    assert not (tmp_path / "home").exists(), "usage errors never start an owner"


def test_bad_input_exits_2(tmp_path, run_cli):
    home = tmp_path / "home"
    assert_error(run_cli(home, "chat", "-Q", "--query-file", str(tmp_path / "missing.txt")),
                 2, "unreadable_query_file")
    assert_error(run_cli(home, "chat", "-Q", "-q", "   "), 2, "empty_query")
    assert_error(run_cli(home, "chat", "-Q"), 2, "empty_query")  # stdin is /dev/null
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"caf\xe9\n")
    with latin1.open("rb") as f:  # piped stdin that is not UTF-8
        assert_error(run_cli(home, "chat", "-Q", stdin=f.fileno()), 2, "unreadable_query")
    with latin1.open("rb") as f:
        assert_error(run_cli(home, "chat", "-Q", "--query-file", "-", stdin=f.fileno()),
                     2, "unreadable_query")
    # an argument that is not UTF-8 (the shell passed raw bytes)
    raw = subprocess.run([*CLI, "chat", "-Q", "-q", b"caf\xe9"], env=clean_env(home),
                         cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                         check=False)
    assert raw.returncode == 2, raw
    assert raw.stderr.startswith(b"tether: unreadable_query: the prompt from -q"), raw.stderr
    assert b"Traceback" not in raw.stderr and b"never retrieved" not in raw.stderr
    assert_error(run_cli(home, "events", "ses_x", "--since", str(2**64)), 2, "usage")
    assert_error(run_cli(home, "sessions", "--limit", "0"), 2, "usage")
    assert_error(run_cli(home, "chat", "-Q", "-q", "x", "--input-id", ""), 2, "usage")
    assert_error(run_cli(home, "chat", "-Q", "-q", "x", "--resume", " "), 2, "usage")
    assert not home.exists()


def test_help_and_version(tmp_path, run_cli):
    top = run_cli(tmp_path, "--help")
    assert top.returncode == 0 and "chat" in top.stdout and "Exit codes" in top.stdout
    chat = run_cli(tmp_path, "chat", "--help")
    for flag in ("-q", "--query-file", "-Q", "--oneshot", "--resume", "--provider", "--model",
                 "--base-url", "--toolsets", "--max-turns", "--reasoning", "--ignore-rules",
                 "--input-id", "--json"):
        assert flag in chat.stdout, flag
    version = run_cli(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("tether ")


def test_owner_that_cannot_start_exits_3(tmp_path, run_cli):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_cli(blocker / "home", "chat", "-Q", "-q", "hi", cwd=tmp_path)
    assert_error(result, 3, "start_failed")
    assert f"hint: {blocker} is a file, not a directory" in result.stderr


def test_an_owner_that_cannot_start_says_why_at_once(tmp_path, run_cli):
    """The owner's own one-line reason reaches the user, not a start timeout: a
    start failure is not mistaken for a lost start race and retried."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)  # too long for a Unix socket path
    result = run_cli(deep, "chat", "-Q", "-q", "hi", cwd=tmp_path)
    assert_error(result, 3, "start_failed")
    assert "could not start: cannot start the owner:" in result.stderr, result.stderr

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("model: [unclosed\n")
    result = run_cli(home, "chat", "-Q", "-q", "hi", cwd=tmp_path)
    assert_error(result, 3, "start_failed")
    first = result.stderr.splitlines()[0]
    assert "invalid configuration: cannot read" in first and "config.yaml" in first, first

    (home / "config.yaml").write_text("model: {provider: opnai}\n")
    result = run_cli(home, "chat", "-Q", "-q", "hi", cwd=tmp_path)
    assert_error(result, 3, "start_failed")
    assert "`model.provider` must be custom, openai or demo" in result.stderr


def test_schema_names_every_method(tmp_path, run_cli):
    result = run_cli(tmp_path / "home", "schema")
    assert result.returncode == 0, result
    schema = json.loads(result.stdout)
    assert set(schema["methods"]) == set(METHODS)
    assert not (tmp_path / "home").exists()


def test_turns_exit_codes_and_viewers(tmp_path, run_cli):
    home = tmp_path / "home"

    def model(request: dict):
        users = [m for m in request["messages"] if m["role"] == "user"]
        if "FAIL" in users[-1]["content"]:
            return Status(500)
        return text_reply("OK_" + users[-1]["content"].split()[-1])

    with FakeProvider(model) as fake:
        write_config(home, fake.url, model={"max_retries": 1})
        with OwnerProcess(home):
            ok = run_cli(home, "chat", "--json", "-q", "say alpha", "--input-id", "in-1")
            assert ok.returncode == 0, ok
            lines = [json.loads(line) for line in ok.stdout.splitlines()]
            receipt = lines[-1]
            assert receipt["status"] == "terminal" and receipt["result"]["text"] == "OK_alpha"
            sid = receipt["session_id"]
            events = lines[:-1]
            assert [e["type"] for e in events if e["type"].startswith("message.")][-1] == \
                "message.complete"

            # an input id as long as the protocol allows works for a new session too
            longest = run_cli(home, "chat", "-Q", "-q", "say delta", "--input-id", "i" * 200)
            assert longest.returncode == 0 and longest.stdout == "OK_delta\n", longest
            # the same input id on the same session: the same turn, not a second one
            again = run_cli(home, "chat", "-Q", "--resume", sid, "-q", "say alpha",
                            "--input-id", "in-1")
            assert again.returncode == 0 and again.stdout == "OK_alpha\n", again
            conflict = run_cli(home, "chat", "-Q", "--resume", sid, "-q", "say beta",
                               "--input-id", "in-1")
            assert_error(conflict, 2, "admission_conflict")
            assert_error(run_cli(home, "chat", "-Q", "--resume", "ses_missing", "-q", "x"),
                         2, "not_found")
            empty = run_cli(home, "events", "")
            assert_error(empty, 2, "invalid_params")
            assert "`tether events --help`" in empty.stderr  # the command that was run
            # not quiet, output redirected: nothing announces a session that is not there
            assert_error(run_cli(home, "chat", "--resume", "ses_missing", "-q", "x"),
                         2, "not_found")
            resumed = run_cli(home, "chat", "--resume", sid, "-q", "say gamma")
            assert resumed.returncode == 0 and resumed.stdout == "OK_gamma\n", resumed
            assert "continue it with" not in resumed.stderr

            failed = run_cli(home, "chat", "-Q", "--resume", sid, "-q", "please FAIL")
            assert_error(failed, 1, "turn_failed")
            assert failed.stdout == ""
            assert "500" in failed.stderr

            listed = run_cli(home, "sessions")
            assert listed.returncode == 0 and sid in listed.stdout, listed
            dumped = run_cli(home, "events", sid, "--since", "0")
            assert dumped.returncode == 0, dumped
            seqs = [json.loads(line)["seq"] for line in dumped.stdout.splitlines()]
            assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 5
            tail = run_cli(home, "events", sid, "--since", "3")
            assert json.loads(tail.stdout.splitlines()[0])["seq"] == 4
            token = run_cli(home, "token", "--label", "test")
            assert token.returncode == 0 and token.stdout.startswith("tt_"), token


def test_attach_prints_transcript_then_follows_until_ctrl_c(tmp_path, run_cli):
    import os
    import select
    import signal
    import subprocess
    import time

    from clihelp import CLI
    from harness import clean_env

    home = tmp_path / "home"
    out = b""

    def read_until(proc, token: bytes, count: int = 1, timeout: float = 20.0) -> None:
        nonlocal out
        deadline = time.monotonic() + timeout
        while out.count(token) < count and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
        assert out.count(token) >= count, out

    with FakeProvider(lambda r: text_reply("FIRST_ANSWER")) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            done = run_cli(home, "chat", "--json", "-q", "hello there")
            sid = json.loads(done.stdout.splitlines()[-1])["session_id"]
            viewer = subprocess.Popen([*CLI, "attach", sid], env=clean_env(home),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
            try:
                read_until(viewer, b"(following")
                again = run_cli(home, "chat", "-Q", "--resume", sid, "-q", "once more")
                assert again.returncode == 0, again
                read_until(viewer, b"FIRST_ANSWER", count=2)  # transcript + the live turn
                viewer.send_signal(signal.SIGINT)
                rest, err = viewer.communicate(timeout=10)
            finally:
                if viewer.poll() is None:
                    viewer.kill()
                    viewer.communicate()
    text = (out + rest).decode()
    assert viewer.returncode == 0, (text, err)
    assert "› hello there" in text and text.count("FIRST_ANSWER") == 2, text
    assert b"Traceback" not in err


def test_resolve_settles_what_a_crashed_owner_was_running(tmp_path, run_cli):
    """After a SIGKILL mid-turn the session is paused behind an unknown admission:
    chat says so and names `tether resolve`, which records it interrupted; the
    session then takes prompts again."""
    import threading

    home = tmp_path / "home"
    stuck = threading.Event()

    def model(req):
        if "slow" in req["messages"][-1]["content"]:
            stuck.wait(30)
        return text_reply("OK")

    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        owner = OwnerProcess(home).start()
        chat = subprocess.Popen([*CLI, "chat", "-Q", "-q", "slow one"], env=clean_env(home),
                                cwd=tmp_path, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not db_rows(home, "SELECT 1 FROM session_admissions "
                                    "WHERE status = 'started'"):
                assert time.monotonic() < deadline, "the turn never started"
                time.sleep(0.05)
        finally:
            # the CLI first: one that saw its owner die would start another
            chat.kill()
            chat.wait(10)
            # the turn is held at the model: kill the owner under it
            owner.proc.kill()
            owner.proc.wait(10)
            owner.kill()
        sid = db_rows(home, "SELECT target_session_id FROM session_admissions")[0][0]
        stuck.set()
        with OwnerProcess(home):
            paused = run_cli(home, "chat", "-Q", "--resume", sid, "-q", "next")
            assert_error(paused, 1, "unknown_execution")
            assert f"`tether resolve {sid}`" in paused.stderr
            settled = run_cli(home, "resolve", sid)
            assert settled.returncode == 0, settled
            assert settled.stdout.endswith(": terminal/interrupted\n"), settled.stdout
            again = run_cli(home, "resolve", sid)
            assert again.returncode == 0 and again.stdout == ""
            assert "nothing to settle" in again.stderr
            after = run_cli(home, "chat", "-Q", "--resume", sid, "-q", "next")
            assert after.returncode == 0 and after.stdout == "OK\n", after
            assert_error(run_cli(home, "resolve", "ses_missing"), 2, "not_found")


def test_a_prompt_larger_than_a_frame_is_refused_at_once(tmp_path, run_cli):
    """A prompt past the owner's frame limit (the owner closes with 1009) is a usage
    error at once, not a connection lost and resent until the retry budget ends."""
    home = tmp_path / "home"
    with FakeProvider(lambda r: text_reply("never asked")) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home):
            result = run_cli(home, "chat", "-Q", input="x" * (5 * 1024 * 1024), timeout=30)
    assert result.returncode == 2, result
    assert "invalid_params" in result.stderr and "max_frame_bytes" in result.stderr, result
    assert "Traceback" not in result.stderr and "unexpected_error" not in result.stderr
    assert fake.requests == []


@pytest.mark.parametrize("args", [("sessions",), ("events", "--last"), ("attach", "--last"),
                                  ("cancel",)])
def test_read_only_commands_never_start_an_owner(tmp_path, run_cli, args):
    """Looking needs no owner: with none running these say so (exit 3), and none starts."""
    home = tmp_path / "home"
    result = run_cli(home, *args, timeout=30)
    assert result.returncode == 3, result
    assert "not_running" in result.stderr and "tether serve" in result.stderr, result
    assert not (home / "daemon.json").exists()
    assert not (home / "daemon.lock").exists()
