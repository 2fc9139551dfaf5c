"""`tether completion bash|zsh|fish`, and --help with examples for every command."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from clihelp import CLI

from tether.clients.cli import build_parser
from tether.clients.cli.completion import _subcommands


def script(shell: str) -> str:
    out = subprocess.run([*CLI, "completion", shell], capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_commands_options_and_choices(tmp_path):
    path = tmp_path / "tether.bash"
    path.write_text(script("bash"))

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (f"source {path}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
                 f"COMP_CWORD={len(words) - 1}; COMP_LINE={line!r}; COMP_POINT={len(line)}; "
                 "_shtab_tether; printf '%s\\n' \"${COMPREPLY[@]}\"")
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return sorted(out.stdout.split())

    assert complete("tether", "ses") == ["sessions"]
    assert complete("tether", "completion", "") == ["bash", "fish", "zsh"]
    assert complete("tether", "chat", "--re") == ["--reasoning", "--resume"]
    assert "--force" in complete("tether", "sessions", "rm", "--")


def test_zsh_and_fish_scripts_know_every_command():
    zsh, fish = script("zsh"), script("fish")
    assert zsh.startswith("#compdef tether")
    for name in _subcommands(build_parser()):
        assert f"'__fish_use_subcommand' -a {name} " in fish, name
        assert name in zsh
    assert "-n '__fish_seen_subcommand_from chat' -l resume -r" in fish
    assert ("-n '__fish_seen_subcommand_from cron; and __fish_seen_subcommand_from add' "
            "-l schedule -r") in fish
    assert "-n '__fish_seen_subcommand_from completion' -f -a 'bash zsh fish'" in fish


def test_every_command_has_examples_and_a_description():
    parser = build_parser()
    commands = _subcommands(parser)
    for name, sub in commands.items():
        if name == "bench":  # its options and help are the bench's own parser's
            continue
        text = sub.format_help()
        assert "examples:\n  tether " + name in text, name
        assert sub.description, name
    approve = " ".join(commands["approve"].format_help().split())
    assert "a prefix will do" in approve and "unambiguous beginning" in approve
    add = _subcommands(commands["cron"])["add"].format_help()
    assert "examples:\n  tether cron add" in add and "catch-up run" in " ".join(add.split())
