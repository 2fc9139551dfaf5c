"""`tether token list | revoke | create --ttl` and `tether web`, through the real CLI."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from harness import OwnerProcess, write_config


def test_token_create_list_revoke(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home, "--tcp", "127.0.0.1:0"):
        plain = run_cli(home, "token", "--label", "plain")
        assert plain.returncode == 0, plain.stderr
        assert plain.stdout.strip().startswith("tt_")
        short = run_cli(home, "token", "create", "--label", "short", "--ttl", "8h")
        assert short.returncode == 0 and "valid for 28800 s" in short.stderr
        listed = run_cli(home, "token", "list")
        assert listed.returncode == 0, listed.stderr
        rows = listed.stdout.strip().splitlines()
        assert len(rows) == 2 and rows[0].endswith("plain") and rows[1].endswith("short")
        assert "expires never" in rows[0] and "expires never" not in rows[1]
        assert plain.stdout.strip() not in listed.stdout  # never shown again
        token_id = rows[0].split()[0]
        revoked = run_cli(home, "token", "revoke", token_id)
        assert revoked.returncode == 0 and "revoked" in revoked.stderr
        assert len(run_cli(home, "token", "list").stdout.strip().splitlines()) == 1
        again = run_cli(home, "token", "revoke", token_id)
        assert again.returncode != 0 and "not_found" in again.stderr
        for bad in (["token", "create", "--ttl", "soon"], ["token", "revoke"],
                    ["token", "list", "--ttl", "1h"], ["token", "create", "tok_x"]):
            wrong = run_cli(home, *bad)
            assert wrong.returncode == 2, (bad, wrong.stderr)
        assert len(run_cli(home, "token", "list").stdout.strip().splitlines()) == 1


def test_web_prints_a_link_that_works_once(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home, "--tcp", "127.0.0.1:0") as owner:
        out = run_cli(home, "web", "--no-open")
        assert out.returncode == 0, out.stderr
        link = out.stdout.strip()
        base = owner.descriptor["tcp_url"].replace("ws://", "http://")
        assert link.startswith(base + "web/#once=tt_")
        once = link.split("#once=", 1)[1]
        with urllib.request.urlopen(base + "web/", timeout=10) as page:
            assert page.status == 200 and b"viewer.js" in page.read()
            assert page.headers["Content-Security-Policy"].startswith("default-src 'self'")
        req = urllib.request.Request(base + "web/exchange",
                                     headers={"Authorization": f"Bearer {once}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read())["token"].startswith("tt_")
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("a one-time link worked twice")
        except urllib.error.HTTPError as err:
            assert err.code == 401
        try:
            urllib.request.urlopen(base + "web/../state.db", timeout=10)
            raise AssertionError("served a file outside daemon/web")
        except urllib.error.HTTPError as err:
            assert err.code == 404
        listed = run_cli(home, "token", "list").stdout
        assert "web viewer" in listed and "one-time link" not in listed


def test_web_opens_the_tcp_listener_of_a_running_owner_without_stopping_it(tmp_path,
                                                                          run_cli):
    import subprocess
    import threading
    import time

    from clihelp import CLI
    from fakeprovider import FakeProvider, Held

    gate = threading.Event()
    home = tmp_path / "home"
    answer_message = {"role": "assistant", "content": "SLOW_ANSWER"}
    with FakeProvider(lambda req: Held(answer_message, gate, before=0)) as fake:
        write_config(home, fake.url)
        with OwnerProcess(home) as owner:
            assert json.loads((home / "daemon.json").read_text())["tcp_url"] is None
            turn = subprocess.Popen([*CLI, "chat", "-Q", "-q", "a long turn"],
                                    env=owner.env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 30
                while not fake.requests and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert fake.requests, "the turn never reached the model"
                refused = run_cli(home, "web", "--no-open", "--tcp", "192.0.2.1:80")
                assert refused.returncode == 3 and "not a loopback address" in refused.stderr
                out = run_cli(home, "web", "--no-open", "--tcp", "127.0.0.1:0")
                assert out.returncode == 0, out
                desc = json.loads((home / "daemon.json").read_text())
                base = desc["tcp_url"].replace("ws://", "http://")
                assert out.stdout.strip().startswith(base + "web/#once=tt_")
                assert "now listens on" in out.stderr
                assert desc["pid"] == owner.proc.pid  # the same owner, not a new one
                with urllib.request.urlopen(base + "web/", timeout=10) as page:
                    assert page.status == 200
                again = run_cli(home, "web", "--no-open")  # listening already: the same port
                assert again.returncode == 0 and again.stdout.startswith(base + "web/#once=")
                assert "now listens" not in again.stderr
                gate.set()
                answer, _ = turn.communicate(timeout=60)
            finally:
                gate.set()
                if turn.poll() is None:
                    turn.kill()
                    turn.communicate()
            # the turn that ran meanwhile was not disturbed
            assert turn.returncode == 0 and answer == "SLOW_ANSWER\n"


def test_web_starts_an_owner_with_a_tcp_listener(tmp_path, run_cli, reap_owners):
    home = tmp_path / "home"
    write_config(home)
    reap_owners(home)
    out = run_cli(home, "web", "--tcp", "127.0.0.1:0", "--no-open")
    assert out.returncode == 0, out.stderr
    desc = json.loads((home / "daemon.json").read_text())
    assert out.stdout.strip().startswith(desc["tcp_url"].replace("ws://", "http://") + "web/#once=")
