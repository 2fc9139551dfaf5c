"""`tether config check`: the effective configuration, where each value came from,
secrets masked; a configuration the owner would refuse is an error line, exit 2."""

import json

from harness import OwnerProcess, clean_env, write_config

KEY = "sk-proj-0123456789abcdefwxyz"


def _settings(out: str) -> dict[str, dict]:
    return json.loads(out)["settings"]


def test_each_value_says_where_it_came_from_and_keys_are_masked(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home, model={"provider": "custom", "base_url": "http://127.0.0.1:9/v1",
                              "default": "m1"}, daemon={"max_turns": 12})
    env = clean_env(home, OPENAI_API_KEY=KEY,
                    OPENAI_BASE_URL="http://user:pw-secret@127.0.0.1:8/v1?k=q-secret",
                    TETHER_STORE="postgresql://tether:db-secret@db.internal/tether")
    done = run_cli(home, "config", "check", "--json", env=env)
    assert done.returncode == 0, done
    report = json.loads(done.stdout)
    assert report["home"] == str(home) and report["home_source"] == "env TETHER_HOME"
    s = report["settings"]
    assert s["model.provider"] == {"value": "custom", "source": "config.yaml"}
    assert s["model.base_url"] == {"value": "http://127.0.0.1:8/v1",
                                   "source": "env OPENAI_BASE_URL"}
    assert s["model.api_key"] == {"value": "sk-…wxyz", "source": "env OPENAI_API_KEY"}
    assert s["model.default"] == {"value": "m1", "source": "config.yaml"}
    assert s["daemon.max_turns"] == {"value": 12, "source": "config.yaml"}
    assert s["daemon.grace_seconds"] == {"value": 10.0, "source": "default"}
    assert s["delegation.api_key"] == {"value": None, "source": "default"}
    # where the state is kept: the store's URL with its password masked
    assert s["store.url"] == {"value": "postgresql://tether:***@db.internal/tether",
                              "source": "env TETHER_STORE"}
    assert s["store.lease_seconds"] == {"value": 15.0, "source": "default"}
    assert report["turn_defaults"] == {"provider": "custom", "model": "m1",
                                       "base_url": "http://127.0.0.1:8/v1"}
    text = run_cli(home, "config", env=env)  # `check` is the default action
    assert text.returncode == 0, text
    assert "daemon.max_turns" in text.stdout and "env OPENAI_API_KEY" in text.stdout
    for out in (done.stdout, text.stdout):
        assert KEY not in out and "0123456789" not in out and "secret" not in out
    assert not (home / "daemon.json").exists()  # looked, started nothing


def test_the_environment_alone_can_pick_the_provider_and_a_short_key_is_only_set(
        tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home, model={"api_key": "short-key"})
    env = clean_env(home, OPENAI_BASE_URL="http://127.0.0.1:8/v1")
    s = _settings(run_cli(home, "config", "check", "--json", env=env).stdout)
    assert s["model.provider"] == {"value": "custom", "source": "env OPENAI_BASE_URL"}
    assert s["model.api_key"] == {"value": "(set)", "source": "config.yaml"}
    flagged = run_cli(home, "config", "check", "--json", "--home", str(home),
                      env=clean_env(tmp_path / "elsewhere"))
    assert json.loads(flagged.stdout)["home_source"] == "flag --home"


def test_an_invalid_configuration_is_one_error_line_with_a_hint(tmp_path, run_cli):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  baseurl: http://127.0.0.1:9/v1\n")
    done = run_cli(home, "config", "check")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "tether: invalid_config: config.yaml: unknown key `model.baseurl`; did you mean "
        "`base_url`?",
        f"hint: fix {home}/config.yaml (docs/configuration.md lists every key); until then "
        "an owner of this home refuses to start"]
    (home / "config.yaml").write_text("daemon:\n  max_text_chars: 2000000\n")
    assert "must be from 1 to 1000000" in run_cli(home, "config", "check").stderr


def test_a_running_owner_is_said_to_use_what_it_read_at_start(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home)
    with OwnerProcess(home) as owner:
        done = run_cli(home, "config", "check")
    assert done.returncode == 0, done
    assert f"owner   running (pid {owner.proc.pid}" in done.stdout
    assert "turns   demo (offline), model tether-demo" in done.stdout


def test_every_error_is_reported_in_one_run(tmp_path, run_cli):
    home = tmp_path / "home"
    write_config(home, model={"provider": "custom", "base_url": "http://127.0.0.1:9/v1",
                              "defualt": "m1", "timeout_seconds": "soon"},
                 daemon={"max_turns": 0}, approvals={"mode": "sometimes"},
                 cron={"timezone": "Mars/Olympus"}, store={"readers": 0})
    done = run_cli(home, "config", "check")
    assert done.returncode == 2, done
    lines = done.stderr.splitlines()
    assert lines[0] == "tether: invalid_config: 6 problems:", done.stderr
    problems = [line.strip() for line in lines[1:7]]
    assert problems == [
        "- config.yaml: unknown key `model.defualt`; did you mean `default`?",
        "- config.yaml: `model.timeout_seconds` must be a number, not 'soon'",
        "- config.yaml: `daemon.max_turns` must be at least 1",
        "- config.yaml: `approvals.mode` must be ask, auto or never, not 'sometimes'",
        "- config.yaml: `cron.timezone` 'Mars/Olympus' is not an IANA time zone",
        "- config.yaml: `store.readers` must be at least 1"], done.stderr
    assert lines[7].startswith("hint: fix "), done.stderr
