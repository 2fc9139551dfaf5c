"""`tether doctor` against a real owner and the fake model server: a served model, an
unknown one, a base_url without /v1, a wrong key, no server; never starting an owner."""

import json

from fakeprovider import FakeProvider, text_reply
from harness import OwnerProcess, sandbox_missing, write_config


def _bubblewrap() -> str:
    """What `bwrap --version` says (e.g. "bubblewrap 0.8.0")."""
    import subprocess

    return subprocess.run(["bwrap", "--version"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _checks(out: str) -> dict[str, tuple[str, str, str]]:
    """check name -> (state, detail, fix) from doctor's lines."""
    found: dict[str, tuple[str, str, str]] = {}
    name = ""
    for line in out.splitlines():
        state, _, rest = line.partition(" ")
        if not state:  # an indented fix line
            fix = line.strip().removeprefix("fix: ")
            found[name] = (*found[name][:2], fix)
            continue
        name, _, detail = rest.strip().partition(" ")
        found[name] = (state, detail.strip(), "")
    return found


def _ok(req):
    return text_reply("ok")


def test_all_pass_with_a_served_model_and_a_running_owner(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(_ok, models=("other", "test-model"), api_key="local-test-only") as fake:
        write_config(home, fake.url)
        with OwnerProcess(home) as owner:
            done = run_cli(home, "doctor")
            # the configuration now says something else than what the owner read
            write_config(home, fake.url, model={"default": "other"})
            stale = run_cli(home, "doctor")
    assert done.returncode == 0, done
    checks = _checks(done.stdout)
    assert list(checks) == ["config", "owner", "socket", "settings", "sandbox", "model",
                           "stream"]
    # the boundary the running owner puts around commands (CI installs bubblewrap)
    if sandbox_missing() is None:
        assert checks.pop("sandbox")[:2] == ("ok", "the owner runs commands in: "
                                                   f"{_bubblewrap()}, workspace-write, "
                                                   "network off")
    else:
        assert checks.pop("sandbox")[0] == "warn"
    assert {c[0] for c in checks.values()} == {"ok"}, done.stdout
    assert checks["owner"][1].startswith(f"running: pid {owner.proc.pid}, started ")
    assert f"at {home}/daemon.sock" in checks["owner"][1]
    assert checks["model"][1] == f"test-model is served at {fake.url}/models (HTTP 200, 2 models)"
    assert checks["stream"][1] == "test-model streams answers with tools (model.stream auto works)"
    # the configured key went with the request
    assert fake.gets[0] == ("/v1/models", fake.gets[0][1])
    assert fake.gets[0][1]["authorization"] == "Bearer local-test-only"
    assert stale.returncode == 1
    state, detail, fix = _checks(stale.stdout)["settings"]
    assert state == "FAIL" and "model test-model" in detail and "model other" in detail
    assert "`tether stop`" in fix
    assert _checks(stale.stdout)["model"][0] == "ok"  # `other` is served too


def test_an_unknown_model_is_named_with_the_served_ones(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(_ok, models=("llama3", "qwen2.5")) as fake:
        write_config(home, fake.url)
        done = run_cli(home, "doctor")
    assert done.returncode == 1
    state, detail, fix = _checks(done.stdout)["model"]
    assert state == "FAIL"
    assert detail == f"model test-model is not served at {fake.url}/models; it serves 2: " \
                     "llama3, qwen2.5"
    assert fix.startswith("set model.default in config.yaml (or pass --model)")
    assert not (home / "daemon.json").exists()  # doctor never starts an owner


def test_a_404_without_v1_suggests_it_and_a_wrong_key_says_so(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(_ok) as fake:
        write_config(home, fake.url.removesuffix("/v1"))
        missing = run_cli(home, "doctor")
    with FakeProvider(_ok, api_key="the-right-one") as fake:
        write_config(home, fake.url)
        wrong = run_cli(home, "doctor")
    state, detail, fix = _checks(missing.stdout)["model"]
    assert state == "FAIL" and missing.returncode == 1
    root = fake.url.removesuffix("/v1")
    assert detail.startswith(f"GET {root.rsplit(':', 1)[0]}:") and "answered HTTP 404" in detail
    assert "missing `/v1`" in fix
    state, detail, fix = _checks(wrong.stdout)["model"]
    assert state == "FAIL" and "answered HTTP 401" in detail
    assert "check the API key" in fix
    assert "local-test-only" not in wrong.stdout


def test_no_server_and_demo_and_an_invalid_configuration(tmp_path, run_cli):
    home = tmp_path / "home"
    with FakeProvider(_ok) as fake:
        url = fake.url
    write_config(home, url)  # nothing listens there any more
    down = run_cli(home, "doctor")
    port = url.split(":")[2].split("/")[0]
    state, detail, fix = _checks(down.stdout)["model"]
    assert state == "FAIL" and detail.startswith(f"no server at 127.0.0.1:{port} ")
    assert "start the model server" in fix
    write_config(home)
    demo = run_cli(home, "doctor")
    assert demo.returncode == 0, demo
    assert _checks(demo.stdout)["model"] == ("ok", "provider demo is offline: it needs no "
                                                   "endpoint", "")
    assert _checks(demo.stdout)["owner"][1].startswith("not running")
    assert _checks(demo.stdout)["stream"][0] == "skip"
    assert _checks(down.stdout)["stream"] == ("skip", "no served model to ask", "")
    (home / "config.yaml").write_text("modle: {}\n")
    bad = run_cli(home, "doctor")
    checks = _checks(bad.stdout)
    assert bad.returncode == 1
    assert checks["config"][0] == "FAIL" and "did you mean `model`?" in checks["config"][1]
    assert checks["model"][0] == "skip"
    assert not (home / "daemon.json").exists()


def test_a_descriptor_whose_socket_accepts_nothing_fails_the_socket_check(tmp_path, run_cli):
    import json
    import subprocess

    home = tmp_path / "home"
    write_config(home)
    other = subprocess.Popen(["sleep", "60"])  # a live pid that is not an owner
    try:
        (home / "daemon.json").write_text(json.dumps({
            "pid": other.pid, "socket": str(home / "daemon.sock"),
            "started_at": "2024-01-01T00:00:00+00:00"}))
        done = run_cli(home, "doctor")
    finally:
        other.kill()
        other.wait()
    checks = _checks(done.stdout)
    assert done.returncode == 1
    assert checks["owner"][1].startswith(f"running: pid {other.pid}")
    state, detail, fix = checks["socket"]
    assert state == "FAIL" and detail.startswith(f"{home}/daemon.sock accepts no connection")
    assert f"`kill {other.pid}`" in fix
    assert checks["settings"][0] == "skip"
    assert not (home / "daemon.sock").exists()  # nothing was started


def test_on_a_terminal_the_marks_are_ticks_and_crosses(tmp_path):
    import os
    import pty
    import subprocess

    from clihelp import CLI
    from harness import clean_env

    home = tmp_path / "home"
    write_config(home, "http://127.0.0.1:9/v1")  # nothing listens on the discard port
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([*CLI, "doctor"], env=clean_env(home), stdin=subprocess.DEVNULL,
                              stdout=follower, stderr=subprocess.PIPE, timeout=60, check=False)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
    text = out.decode()
    assert done.returncode == 1
    assert "✓    config" in text and "-    socket" in text and "✗    model" in text


def test_stream_says_which_mode_a_server_that_cannot_stream_tools_needs(tmp_path, run_cli):
    from fakeservers import llama_cpp_python

    home = tmp_path / "home"
    results = {}
    with FakeProvider(llama_cpp_python(_ok)) as fake:
        for mode in ("auto", "true", "false"):
            write_config(home, fake.url, model={"stream": mode})
            results[mode] = run_cli(home, "doctor")
        streams = [r["stream"] for r in fake.requests]
        assert all(r["tools"] and r["max_tokens"] == 16 for r in fake.requests)
    # each run: the streamed question, then the plain one
    assert streams == [True, False] * 3
    for mode, done in results.items():
        assert done.stderr == ""  # the model client's log lines are not doctor's output
        state, detail, fix = _checks(done.stdout)["stream"]
        assert detail.startswith("test-model answers with tools only without streaming "
                                 "(streamed: provider sent a malformed response"), detail
        if mode == "true":
            assert (state, done.returncode) == ("FAIL", 1)
            assert "model.stream true fails every turn" in detail
            assert fix == "set model.stream: auto (or false) in config.yaml"
        else:
            assert (state, done.returncode, fix) == ("ok", 0, "")
    assert "model.stream auto falls back" in _checks(results["auto"].stdout)["stream"][1]


def test_stream_fails_when_no_request_with_a_tool_works(tmp_path, run_cli):
    from fakeprovider import Status

    home = tmp_path / "home"
    with FakeProvider(lambda req: Status(400, '{"error": {"message": "tools are not '
                                              'supported by this model"}}')) as fake:
        write_config(home, fake.url)
        done = run_cli(home, "doctor")
        assert [r["stream"] for r in fake.requests] == [True]
    state, detail, fix = _checks(done.stdout)["stream"]
    assert (state, done.returncode) == ("FAIL", 1)
    assert detail.startswith("a request with a tool failed: bad_request: provider returned "
                             "HTTP 400") and "tools are not supported" in detail
    assert "Local model servers" in fix


def test_without_a_sandbox_the_owner_starts_and_doctor_and_config_check_say_none(
        tmp_path, run_cli):
    """A bwrap that cannot make namespaces (as where user namespaces are off) comes first
    on PATH: the owner starts and runs commands without a sandbox, and says so."""
    import asyncio
    import os

    from harness import Peer, clean_env
    from toolscript import ScriptedModel, tool_results

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission "
                                "denied' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = clean_env(home, PATH=f"{fake}:{os.environ['PATH']}")
    model = ScriptedModel({"run": [("terminal", {"command": "echo $((6*7)) > out.txt"})]})

    async def turn() -> None:
        async with await Peer.connect(home) as peer:
            sid = (await peer.result("session.create", cwd=str(work)))["session_id"]
            r = await peer.result("prompt.submit", session_id=sid, input_id="r", text="run")
            await peer.wait_terminal(sid, r["admission_id"])

    with FakeProvider(model, api_key="local-test-only") as provider:
        write_config(home, provider.url, approvals={"mode": "never"})
        with OwnerProcess(home, env=env):
            asyncio.run(turn())
            done = run_cli(home, "doctor", env=env)
        checked = run_cli(home, "config", "check", "--json", env=env)
        write_config(home, provider.url, sandbox={"mode": "off"})
        off = run_cli(home, "doctor")  # bubblewrap works here, but the owner is told off
    [ran] = tool_results(model, "run")
    assert ran["exit_code"] == 0 and ran["sandbox"] == "none"
    assert (work / "out.txt").read_text() == "42\n"
    assert done.returncode == 0, done.stdout  # a warning, not a failure
    state, detail, fix = _checks(done.stdout)["sandbox"]
    assert state == "warn"
    assert detail.startswith("the owner runs commands in: none — ")
    assert "cannot make a sandbox here (bwrap: setting up uid map" in detail
    assert "fails closed" in detail and "install bubblewrap" in fix
    report = json.loads(checked.stdout)
    assert report["sandbox"].startswith("none — ") and "uid map" in report["sandbox"]
    assert report["settings"]["sandbox.mode"] == {"value": "workspace-write",
                                                  "source": "default"}
    state, detail, fix = _checks(off.stdout)["sandbox"]
    assert state == "warn" and "none — sandbox.mode is off" in detail
    assert "sandbox.mode: workspace-write" in fix
