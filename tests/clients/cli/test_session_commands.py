"""Managing sessions from the CLI: short id prefixes, --last, rename, rm, prune, wide titles,
`tether cancel` from another terminal, attach mid-turn, and no empty sessions left behind."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

from clihelp import CLI, read_until
from fakeprovider import FakeProvider, Held, Stall, prompt_of, text_reply
from harness import OwnerProcess, clean_env, db_rows, write_config
from wcwidth import wcswidth

LONG_CJK_TITLE = "日本語のとても長いセッションのタイトルです、幅を正しく数えること"


def sessions(run_cli, home, *extra):
    out = run_cli(home, "sessions", "--json", *extra)
    assert out.returncode == 0, out
    return [json.loads(line) for line in out.stdout.splitlines()]


def wait_for(predicate, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_prefixes_last_rename_rm_and_wide_titles(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("ANSWER: " + prompt_of(req))) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=clean_env(home)):
            assert run_cli(home, "chat", "-Q", "-q", "first question").returncode == 0
            assert run_cli(home, "chat", "-Q", "-q", LONG_CJK_TITLE).returncode == 0
            newest, oldest = sessions(run_cli, home)
            assert oldest["title"] == "first question"

            # a short prefix, with or without ses_, names one session
            short = oldest["session_id"][4:12]
            events = run_cli(home, "events", short)
            assert events.returncode == 0, events
            starts = [json.loads(line) for line in events.stdout.splitlines()
                      if json.loads(line)["type"] == "message.start"]
            # message.start carries what was asked, and by whom
            assert starts[0]["payload"]["text"] == "first question", starts
            assert starts[0]["payload"]["principal"] == "local"

            # --last: the most recently active session
            last = run_cli(home, "events", "--last")
            assert newest["session_id"] in last.stdout and LONG_CJK_TITLE in last.stdout

            # an ambiguous prefix is refused with the candidates, changing nothing
            ambiguous = run_cli(home, "sessions", "rm", "ses_")
            assert ambiguous.returncode == 2, ambiguous
            assert ambiguous.stderr.startswith("tether: ambiguous: 'ses_' matches 2 sessions")
            assert len(sessions(run_cli, home)) == 2

            renamed = run_cli(home, "sessions", "rename", short, "会議のメモ  for Monday")
            assert renamed.returncode == 0, renamed
            assert sessions(run_cli, home)[1]["title"] == "会議のメモ for Monday"

            # the table's columns line up by display width, wide titles cut to 40 columns
            table = run_cli(home, "sessions").stdout.splitlines()
            title_at = table[0].index("TITLE")
            for line in table[1:]:
                # every column before the title is as wide as its header says
                assert line[title_at - 2: title_at] == "  " and line[title_at] != " ", line
                title = line[title_at:]
                assert 0 < wcswidth(title) <= 40, title
                assert line[:28].strip() in (newest["session_id"], oldest["session_id"])
            assert any(line.endswith("…") for line in table[1:]), table

            removed = run_cli(home, "sessions", "rm", short)
            assert removed.returncode == 0, removed
            assert [s["session_id"] for s in sessions(run_cli, home)] == [newest["session_id"]]
            assert db_rows(home, "SELECT count(*) FROM messages WHERE session_id = ?",
                           oldest["session_id"]) == [(0,)]
            gone = run_cli(home, "attach", short)
            assert gone.returncode == 2 and gone.stderr.startswith("tether: not_found:"), gone


def test_rm_refuses_a_running_session_and_cancel_works_from_another_terminal(tmp_path,
                                                                              run_cli):
    home = tmp_path / "home"
    with FakeProvider(lambda req: Stall(30)) as fake:
        write_config(home, fake.url)
        env = clean_env(home)
        with OwnerProcess(home, env=env):
            chat = subprocess.Popen([*CLI, "chat", "-Q", "-q", "be slow"], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            try:
                wait_for(lambda: fake.requests, "the model request")
                sid = sessions(run_cli, home)[0]["session_id"]
                refused = run_cli(home, "sessions", "rm", sid[:10])
                assert refused.returncode == 2, refused
                assert "still has work" in refused.stderr and "tether cancel" in refused.stderr
                # no id: the one session running a turn
                cancelled = run_cli(home, "cancel")
                assert cancelled.returncode == 0, cancelled
                assert f"cancelled the running turn of {sid}" in cancelled.stdout
                _, err = chat.communicate(timeout=30)
            finally:
                if chat.poll() is None:
                    chat.kill()
                    chat.wait()
            assert chat.returncode == 1 and "turn_cancelled" in err, err
            idle = run_cli(home, "cancel", sid[:10])
            assert idle.returncode == 0 and "nothing to cancel" in idle.stderr, idle
            assert run_cli(home, "sessions", "rm", sid[:10]).returncode == 0
            assert sessions(run_cli, home, "--all") == []


def test_no_empty_session_is_left_by_a_refused_prompt_and_prune_removes_old_ones(tmp_path,
                                                                                  run_cli):
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("ok")) as fake:
        write_config(home, fake.url, daemon={"max_text_chars": 50})
        with OwnerProcess(home, env=clean_env(home)):
            refused = run_cli(home, "chat", "-Q", "-q", "x" * 80)
            assert refused.returncode == 2 and "invalid_params" in refused.stderr, refused
            assert sessions(run_cli, home, "--all") == []
            assert run_cli(home, "chat", "-Q", "-q", "kept").returncode == 0
            # an empty session as an older client would leave it
            empty = subprocess.run(
                [CLI[0], "-c", "import asyncio, sys; from tether.clients import TetherClient\n"
                 "async def main():\n"
                 "    async with await TetherClient.connect(sys.argv[1]) as c:\n"
                 "        print((await c.create_session(source='old'))['session_id'])\n"
                 "asyncio.run(main())", str(home)],
                env=clean_env(home), capture_output=True, text=True, timeout=60, check=True)
            empty_id = empty.stdout.strip()
            listed = [s["session_id"] for s in sessions(run_cli, home)]
            assert empty_id not in listed, "empty sessions are not listed by default"
            assert empty_id in [s["session_id"] for s in sessions(run_cli, home, "--all")]
            dry = run_cli(home, "sessions", "prune", "--older-than", "0", "--dry-run")
            assert dry.stdout.split() == [empty_id], dry
            pruned = run_cli(home, "sessions", "prune", "--older-than", "0")
            assert pruned.stdout.split() == [empty_id], pruned
            assert [s["title"] for s in sessions(run_cli, home, "--all")] == ["kept"]


def test_attach_mid_turn_shows_the_answer_so_far_and_what_was_asked(tmp_path, run_cli):
    gate = threading.Event()
    head, middle, tail = "HEAD_PART_", "MIDDLE_PT_", "TAIL_PART_"
    home = tmp_path / "home"
    with FakeProvider(lambda req: Held({"role": "assistant", "content": head + middle + tail},
                                       gate, before=2)) as fake:
        write_config(home, fake.url)
        env = clean_env(home)
        with OwnerProcess(home, env=env):
            chat = subprocess.Popen([*CLI, "chat", "-Q", "-q", "the question asked elsewhere"],
                                    env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            attach = None
            try:
                wait_for(lambda: db_rows(home, "SELECT count(*) FROM events WHERE type = "
                                               "'message.delta'")[0][0], "the first delta")
                attach = subprocess.Popen([*CLI, "attach", "--last"], env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT)
                seen = read_until(attach, head.encode())
                assert b"the question asked elsewhere" in seen, seen
                assert tail.encode() not in seen
                gate.set()
                seen += read_until(attach, tail.encode())
                assert chat.wait(timeout=30) == 0
            finally:
                gate.set()
                for proc in (chat, attach):
                    if proc is not None:
                        if proc.poll() is None:
                            proc.kill()
                        proc.communicate(timeout=30)  # reaped, its pipes closed
    text = seen.decode()
    assert text.count(head) == 1, text  # the partial answer once, then the rest after it
    assert text.index(head) < text.index(middle) < text.index(tail), text


def test_rm_takes_the_delegation_children_with_it(tmp_path, run_cli):
    from fakeprovider import is_child, tool_call_reply

    def model(req):
        if is_child(req):
            return text_reply("CHILD_DONE")
        if req["messages"][-1]["role"] == "tool":
            return text_reply("PARENT_DONE")
        return tool_call_reply("delegate_task", {"tasks": [{"goal": "one"}, {"goal": "two"}]})

    home = tmp_path / "home"
    with FakeProvider(model) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=clean_env(home)):
            done = run_cli(home, "chat", "-Q", "-q", "split the work")
            assert done.returncode == 0 and "PARENT_DONE" in done.stdout, done
            everything = sessions(run_cli, home, "--all")
            [parent] = [s for s in everything if not s["parent_session_id"]]
            children = [s for s in everything if s["parent_session_id"]]
            assert len(children) == 2
            removed = run_cli(home, "sessions", "rm", parent["session_id"][4:10])
            assert removed.returncode == 0, removed
            assert "and 2 delegation child session(s)" in removed.stdout
            assert sessions(run_cli, home, "--all") == []
    for table in ("sessions", "messages", "events", "session_admissions"):
        assert db_rows(home, f"SELECT count(*) FROM {table}") == [(0,)], table


def rm_on_a_terminal(home, sid: str, answer: str) -> subprocess.CompletedProcess[str]:
    """`tether sessions rm SID` with a terminal for stdin, answering its question."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([*CLI, "sessions", "rm", sid], env=clean_env(home),
                                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        os.write(master, answer.encode() + b"\n")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_rm_asks_on_a_terminal_and_keeps_a_session_open_elsewhere(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(lambda req: text_reply("ok")) as fake:
        write_config(home, fake.url)
        env = clean_env(home)
        with OwnerProcess(home, env=env):
            assert run_cli(home, "chat", "-Q", "-q", "keep me please").returncode == 0
            [s] = sessions(run_cli, home)
            sid = s["session_id"]
            kept = rm_on_a_terminal(home, sid[4:9], "n")
            assert kept.returncode == 2 and "nothing deleted" in kept.stderr, kept
            # it showed what it would delete before asking
            assert "keep me please" in kept.stderr and "2 messages" in kept.stderr, kept
            assert "delete this session and everything in it? [y/N]" in kept.stderr
            assert [x["session_id"] for x in sessions(run_cli, home)] == [sid]

            attach = subprocess.Popen([*CLI, "attach", sid], env=env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)
            try:
                read_until(attach, b"keep me please")
                refused = run_cli(home, "sessions", "rm", "--yes", sid)
                assert refused.returncode == 2, refused
                assert refused.stderr.startswith("tether: attached: "), refused
                assert "--force" in refused.stderr
                assert [x["session_id"] for x in sessions(run_cli, home)] == [sid]
                forced = run_cli(home, "sessions", "rm", "--force", sid)
                assert forced.returncode == 0 and f"deleted {sid}" in forced.stdout, forced
            finally:
                attach.kill()
                attach.communicate(timeout=30)
            assert sessions(run_cli, home, "--all") == []

            assert run_cli(home, "chat", "-Q", "-q", "second one").returncode == 0
            [s] = sessions(run_cli, home)
            gone = rm_on_a_terminal(home, s["session_id"], "y")
            assert gone.returncode == 0 and f"deleted {s['session_id']}" in gone.stdout, gone
            assert sessions(run_cli, home, "--all") == []


async def test_cron_and_http_sessions_stay_out_of_the_list_and_last(tmp_path, run_cli):
    import asyncio

    from harness import Peer

    home = tmp_path / "home"
    work = tmp_path / "project"
    work.mkdir()

    def cli(*args):
        return asyncio.to_thread(run_cli, home, *args)

    with FakeProvider(lambda req: text_reply("ANSWER: " + prompt_of(req))) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home, env=clean_env(home)):
            mine = await cli("chat", "-Q", "-q", "my own question")
            assert mine.returncode == 0, mine
            async with await Peer.connect(home) as peer:
                # a cron run and an HTTP conversation, both newer than the chat
                for source, text in (("cron", "nightly report"), ("api", "from a script")):
                    sid = (await peer.result("session.create", source=source, title=text,
                                             cwd=str(work)))["session_id"]
                    r = await peer.result("prompt.submit", session_id=sid, input_id=source,
                                          text=text)
                    await peer.wait_terminal(sid, r["admission_id"])
            listed = await cli("sessions")
            everything = await cli("sessions", "--all", "--json")
            cron_only = await cli("sessions", "--source", "cron", "--json")
            http_only = await cli("sessions", "--source", "http", "--json")
            last = await cli("events", "--last")
    assert listed.returncode == 0, listed
    rows = listed.stdout.splitlines()
    assert rows[0].split() == ["SESSION", "UPDATED", "MSGS", "TOKENS", "COST", "STATE", "SOURCE",
                               "CWD", "TITLE"]
    [row] = rows[1:]
    assert "my own question" in row and " cli " in row
    # the chat ran in the CLI's working directory (the home's parent), its end shown
    assert "…" + tmp_path.name[-23:] in row, row
    assert "1 api, 1 cron session(s) not shown" in listed.stderr, listed.stderr
    assert {json.loads(x)["source"] for x in everything.stdout.splitlines()} == {
        "cli", "cron", "api"}
    [cron] = [json.loads(x) for x in cron_only.stdout.splitlines()]
    assert cron["title"] == "nightly report" and cron["cwd"] == str(work)
    assert [json.loads(x)["title"] for x in http_only.stdout.splitlines()] == ["from a script"]
    # --last is the chat a person had, not the newer automated runs
    assert "my own question" in last.stdout and "nightly report" not in last.stdout
