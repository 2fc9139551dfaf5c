"""config.yaml values no turn could run with stop the owner at start, and the same
URL rules refuse a per-turn base_url on the wire (invalid_params, nothing recorded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.daemon.config.core import ConfigError, load_config
from tether.daemon.config.turn import check_turn_options
from tether.daemon.config.values import base_url_problem
from tether.rpc.errors import InvalidParams


@pytest.mark.parametrize("url, problem", [
    ("http://127.0.0.1:8000/v1", None),
    ("https://api.example.com/v1", None),
    ("ftp://host/v1", "must start with http:// or https://"),
    ("http://127.0.0.1:99999/v1", "has port 99999, outside 1..65535"),
    ("http://[::1", "is not a valid URL"),
    ("http:///v1", "has no host"),
])
def test_base_url_problems(url, problem):
    found = base_url_problem(url)
    assert (found is None) if problem is None else (found or "").startswith(problem), found


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("yaml_text, says", [
    ("model: {provider: bogus}", "`model.provider` must be one of custom, openai, demo"),
    ("delegation: {provider: nope}", "`delegation.provider` must be one of"),
    ("model: {provider: custom, base_url: 'http://127.0.0.1:99999/v1'}",
     "`model.base_url` 'http://127.0.0.1:99999/v1' has port 99999"),
    ("delegation: {base_url: 'http://[::1'}", "`delegation.base_url`"),
    ("daemon: {max_turns: 0}", "`daemon.max_turns`"),
    ("model: {request_timeout_seconds: 0}", "`model.request_timeout_seconds` must be more than 0"),
    ("model: {timeout_seconds: 0}", "`model.timeout_seconds` must be more than 0"),
    ("model: {request_timeout_seconds: '10m'}", "`model.request_timeout_seconds` has the wrong type"),
])
def test_values_no_turn_could_run_with_are_refused(tmp_path, yaml_text, says):
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, yaml_text), env={})
    assert says in str(caught.value)


def test_a_bad_openai_base_url_in_the_environment_is_named_as_such(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_config(None, env={"OPENAI_BASE_URL": "http://host:0/v1"})
    assert str(caught.value).startswith("OPENAI_BASE_URL 'http://host:0/v1' has port 0")
    good = load_config(None, env={"OPENAI_BASE_URL": "http://host:8080/v1"})
    assert (good.model.provider, good.model.base_url) == ("custom", "http://host:8080/v1")


def test_a_bad_base_url_on_the_wire_is_invalid_params():
    check_turn_options("custom", None, "http://127.0.0.1:8000/v1")
    with pytest.raises(InvalidParams) as caught:
        check_turn_options("custom", None, "http://127.0.0.1:99999/v1")
    assert caught.value.data["fields"][0]["loc"] == "base_url"


def test_the_request_timeout_has_a_finite_default_and_can_be_set(tmp_path):
    assert load_config(None, env={}).model.request_timeout_seconds == 600.0
    small = load_config(write(tmp_path, "model: {request_timeout_seconds: 2}"), env={})
    assert small.model.request_timeout_seconds == 2.0


@pytest.mark.parametrize("yaml_text, says", [
    ("model: {provider: custom, baseurl: 'http://127.0.0.1:8000/v1'}",
     "unknown key `model.baseurl`; did you mean `base_url`?"),
    ("delegaton: {max_tasks: 2}", "unknown key `delegaton`; did you mean `delegation`?"),
    ("model: {provider: custom, base_url: 'http://127.0.0.1:8000/v1', name: m}",
     "unknown key `model.name`; did you mean `default`?"),
    ("daemon: {zzz: 1}", "unknown key `daemon.zzz`; valid keys: max_connections"),
    ("model: {provider: openai}", "`model.provider` is openai but no API key is set"),
])
def test_config_mistakes_are_named_with_the_fix(tmp_path, yaml_text, says):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, yaml_text), env={})
    assert says in str(err.value)


def test_openai_with_a_key_from_the_environment_is_fine(tmp_path):
    config = load_config(write(tmp_path, "model: {provider: openai}"),
                         env={"OPENAI_API_KEY": "sk-test"})
    assert config.model.api_key == "sk-test"


def test_a_config_symlink_to_a_missing_file_is_an_error_not_the_demo(tmp_path):
    link = tmp_path / "config.yaml"
    link.symlink_to(tmp_path / "elsewhere" / "config.yaml")
    with pytest.raises(ConfigError, match="is a symlink to .*elsewhere/config.yaml, which does "
                                          "not exist"):
        load_config(link, env={})


def test_the_http_section_is_read_and_checked(tmp_path):
    cfg = load_config(write(tmp_path, "http:\n  max_concurrent_requests: 3\n"
                                      "  models: [small, large]\n"), env={})
    assert cfg.http.max_concurrent_requests == 3 and cfg.http.models == ("small", "large")
    assert load_config(None, env={}).http.max_concurrent_requests == 8
    for bad in ("max_concurrent_requests: 0", "keepalive_seconds: 0", "models: small"):
        with pytest.raises(ConfigError, match="http"):
            load_config(write(tmp_path, f"http:\n  {bad}\n"), env={})


def test_store_outage_seconds_default_value_and_refusals(tmp_path):
    from tether.daemon.config.store import load_store_config

    assert load_store_config(write(tmp_path, "model: {}\n"), env={}).outage_seconds == 30.0
    cfg = load_store_config(write(tmp_path, "store:\n  outage_seconds: 2.5\n"), env={})
    assert cfg.outage_seconds == 2.5
    for bad in ("-1", "'soon'", "true"):
        with pytest.raises(ConfigError, match="store.outage_seconds"):
            load_store_config(write(tmp_path, f"store:\n  outage_seconds: {bad}\n"), env={})
