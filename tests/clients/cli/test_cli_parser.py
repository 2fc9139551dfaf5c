"""The parser built for the running command alone (clients/cli/entry.py): it reads
argv as the whole parser does, the one-shot path loads no other command's module,
and help and usage errors still name every command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness import clean_env

from tether.clients.cli import build_parser, main
from tether.clients.cli.entry import _command_named, _parse

ARGVS = [
    ["chat", "--oneshot", "-q", "hi"],
    ["--home", "/tmp/h", "chat", "-Q", "--max-turns", "3", "--toolsets", "files,terminal"],
    ["--home=/tmp/h", "status", "--json"],
    ["sessions", "--limit", "5"],
    ["sessions", "rename", "ses_1", "a title"],
    ["cron", "list"],
    ["mcp", "add", "docs", "--url", "https://example.com/mcp"],
    ["approve", "req_1", "--always"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda a: " ".join(a))
def test_one_command_parses_as_the_whole_parser_does(argv):
    def plain(ns):
        return {k: v for k, v in vars(ns).items() if k != "func"}

    whole, whole_unknown = build_parser().parse_known_args(argv)
    parser, args, unknown = _parse(argv)
    assert (plain(args), unknown) == (plain(whole), whole_unknown)
    assert args.func.__qualname__ == whole.func.__qualname__
    # the parser really was the single command's
    assert list(parser._subparsers._group_actions[0].choices) == [args.command]


def test_the_command_is_found_after_the_home_and_not_for_help():
    assert _command_named(["--home", "/h", "chat", "-q", "x"]) == "chat"
    assert _command_named(["--version"]) == ""
    assert _command_named(["--help"]) is None
    assert _command_named(["--home"]) is None
    assert _command_named([]) is None


def test_a_mistyped_command_is_answered_by_the_whole_parser(capsys):
    assert main(["chta"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'chta'" in err and "'completion'" in err and "'mcp'" in err
    assert main(["chat", "--max-turns", "900", "-q", "x"]) == 2
    assert "must be between 1 and 200" in capsys.readouterr().err


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("chat", "cron", "mcp", "completion", "bench"))


def test_the_one_shot_path_loads_no_other_commands_module():
    code = ("import json, sys; from tether.clients.cli.entry import _parse; "
            "_parse(['chat', '--oneshot', '-q', 'x']); "
            "print(json.dumps([m for m in sys.modules if m.startswith('tether.clients.cli.')]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=clean_env(Path("/nonexistent")), check=True, timeout=60)
    loaded = json.loads(out.stdout)
    assert "tether.clients.cli.entry" in loaded
    assert not [m for m in loaded if m.rsplit(".", 1)[-1] in ("cron_cmd", "mcp_cmd", "doctor")]
