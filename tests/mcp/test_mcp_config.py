"""config.yaml's `mcp.servers`: what is accepted, what is refused and how it is shown."""

from __future__ import annotations

import pytest
import yaml

from tether.daemon.config.core import ConfigError, build_config
from tether.daemon.config.report import config_report
from tether.daemon.mcp.results import tool_name


def servers(**named):
    return build_config({"mcp": {"servers": named}}, {}).mcp.servers


def test_a_stdio_and_an_http_server():
    a, b = servers(gh={"command": "npx", "args": ["-y", "srv"], "env": {"T": "${TOK}"},
                       "tools": {"deny": ["delete_*"]}},
                   docs={"url": "https://example.com/mcp", "headers": {"A": "b"},
                         "timeout_seconds": 5, "enabled": False})
    assert (a.name, a.command, a.args, a.env, a.tools_deny) == (
        "gh", "npx", ("-y", "srv"), (("T", "${TOK}"),), ("delete_*",))
    assert (b.url, b.headers, b.timeout_seconds, b.enabled) == (
        "https://example.com/mcp", (("A", "b"),), 5.0, False)
    assert "${TOK}" not in repr(a) and "'b'" not in repr(b)  # values may be secrets
    # a stdio server runs sandboxed, with the network, unless the user says otherwise
    assert (a.sandbox, a.network) == (True, True)
    [c] = servers(own={"command": "srv", "sandbox": False, "network": False})
    assert (c.sandbox, c.network) == (False, False)


@pytest.mark.parametrize("raw, words", [
    ({"x": {}}, "either `command`"),
    ({"x": {"command": "a", "url": "http://h/"}}, "not both"),
    ({"x": {"url": "ftp://h/"}}, "http:// or https://"),
    ({"x": {"command": "a", "args": "b"}}, "list of strings"),
    ({"x": {"command": "a", "headers": {"a": "b"}}}, "`url` server"),
    ({"x": {"url": "http://h/", "env": {"a": "b"}}}, "`command` server"),
    ({"x": {"command": "a", "env": {"a": 1}}}, "map names to strings"),
    ({"x": {"command": "a", "enabled": "yes"}}, "true or false"),
    ({"x": {"command": "a", "timeout_seconds": 0}}, "more than 0"),
    ({"x": {"command": "a", "sandbox": "no"}}, "`mcp.servers.x.sandbox` must be true or false"),
    ({"x": {"command": "a", "network": 0}}, "`mcp.servers.x.network` must be true or false"),
    ({"x": {"url": "http://h/", "sandbox": False}}, "are for a `command` server"),
    ({"x": {"command": "a", "tools": {"only": ["a"]}}}, "unknown key `mcp.servers.x.tools.only`; valid keys: allow, deny"),
    ({"x": {"command": "a", "comand": "b"}}, "did you mean `command`"),
    ({"a__b": {"command": "a"}}, "no __"),
    ({"-a": {"command": "a"}}, "letters, digits"),
])
def test_bad_servers_are_refused_with_the_reason(raw, words):
    with pytest.raises(ConfigError, match="mcp") as err:
        build_config({"mcp": {"servers": raw}}, {})
    assert words in str(err.value)


def test_the_report_names_env_and_headers_but_never_their_values(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"mcp": {"servers": {
        "gh": {"command": "npx", "args": ["srv"], "env": {"TOKEN": "ghp_secret"}},
        "docs": {"url": "https://u:pw@example.com/mcp?key=k", "headers": {"Auth": "Bearer x"}},
    }}}))
    report = config_report(path, {})
    shown = {s.key: s.value for s in report.settings if s.key.startswith("mcp.")}
    assert shown["mcp.servers.gh"]["command"] == "npx srv"
    assert shown["mcp.servers.gh"]["env"] == ["TOKEN"]
    assert shown["mcp.servers.gh"]["sandbox"] is True and "sandbox" not in shown[
        "mcp.servers.docs"]
    assert shown["mcp.servers.docs"]["url"] == "https://example.com/mcp"
    assert shown["mcp.servers.docs"]["headers"] == ["Auth"]
    assert "secret" not in str(shown) and "pw" not in str(shown) and "Bearer" not in str(shown)


def test_tool_names_fit_a_model_api():
    assert tool_name("gh", "create_issue") == "mcp__gh__create_issue"
    assert tool_name("gh", "repo.read/file") == "mcp__gh__repo_read_file"
    assert len(tool_name("gh", "x" * 100)) == 64
