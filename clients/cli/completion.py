"""``tether completion bash|zsh|fish``: the shell completion script, made from the
CLI's own parser, so it always knows every command, option and choice.

bash and zsh scripts come from shtab (docs/dependencies.md); shtab has no fish
output, so fish's ``complete`` lines are written here from the same parser:
commands (with their help) first, then each command's options and the choices
of its positionals (``tether completion <Tab>``: bash, zsh, fish)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["cmd_completion", "fish_script"]


def cmd_completion(args: Any) -> int:
    from .entry import build_parser

    parser = build_parser()
    if args.shell == "fish":
        print(fish_script(parser))
    else:
        import shtab

        print(shtab.complete(parser, shell=args.shell))
    return 0


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _options(parser: argparse.ArgumentParser, condition: str) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        desc = f" -d {_quote(action.help.split(';')[0][:80])}" if action.help else ""
        if action.option_strings:
            flags = ""
            for opt in action.option_strings:
                flags += f" -l {opt[2:]}" if opt.startswith("--") else f" -s {opt[1:]}"
            takes = " -r" if action.nargs != 0 else ""
            choices = (f" -xa {_quote(' '.join(map(str, action.choices)))}"
                       if action.choices else "")
            out.append(f"complete -c tether -n {_quote(condition)}{flags}{takes}{choices}{desc}")
        elif action.choices:
            out.append(f"complete -c tether -n {_quote(condition)} -f -a "
                       f"{_quote(' '.join(map(str, action.choices)))}{desc}")
    return out


def fish_script(parser: argparse.ArgumentParser) -> str:
    commands = _subcommands(parser)
    helps = _helps(parser)
    lines = ["# tether completion for fish (tether completion fish)",
             "complete -c tether -f"]
    lines += _options(parser, "__fish_use_subcommand")
    for name in commands:
        lines.append(f"complete -c tether -n '__fish_use_subcommand' -a {name} "
                     f"-d {_quote(helps.get(name, '')[:80])}")
    for name, sub in commands.items():
        condition = f"__fish_seen_subcommand_from {name}"
        nested = _subcommands(sub)
        if nested:
            nested_helps = _helps(sub)
            inner = " ".join(nested)
            first = f"{condition}; and not __fish_seen_subcommand_from {inner}"
            for child in nested:
                lines.append(f"complete -c tether -n {_quote(first)} -a {child} "
                             f"-d {_quote(nested_helps.get(child, '')[:80])}")
            for child, p in nested.items():
                lines += _options(p, f"{condition}; and __fish_seen_subcommand_from {child}")
        lines += _options(sub, condition)
    return "\n".join(lines)
