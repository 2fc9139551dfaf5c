"""What ``tether COMMAND --help`` shows besides the options: examples for every
command, kept here so cli.py stays about parsing.

``HelpFormatter`` wraps descriptions as argparse does but prints an epilog that
starts with "examples:" as written (one example a line)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["EXAMPLES", "HelpFormatter", "examples", "add_examples"]

EXAMPLES: dict[str, str] = {
    "serve": """\
  tether serve                      # start the owner in the background
  tether serve --tcp 127.0.0.1:8765 # also for the web page and remote CLIs
  tether serve --foreground         # in this terminal, log on stderr""",
    "stop": """\
  tether stop                       # drain and stop this home's owner""",
    "status": """\
  tether status                     # pid, socket, model, provider
  tether status --json""",
    "config": """\
  tether config                     # every setting and where it came from
  tether config check               # every error in config.yaml, in one run""",
    "doctor": """\
  tether doctor                     # config, owner, socket, model endpoint""",
    "logs": """\
  tether logs                       # the end of owner.log
  tether logs -f                    # and follow it""",
    "chat": """\
  tether chat                       # interactive, a new session
  tether chat --last                # continue the chat you had last
  tether chat --resume 3f2a         # continue a session (an id prefix will do)
  tether chat -Q -q 'summarise README.md' > summary.txt
  git diff | tether chat -Q --query-file -""",
    "sessions": """\
  tether sessions                   # your sessions, newest first
  tether sessions --all             # also cron runs, HTTP, helpers, empty ones
  tether sessions --source cron     # only the runs of scheduled jobs
  tether sessions rename 3f2a 'release notes'
  tether sessions rm 3f2a           # asks first on a terminal
  tether sessions prune --dry-run
  tether sessions fork 3f2a --at 120 # a new session with the turns ended by seq 120
  tether sessions compact 3f2a      # summarise its older turns now""",
    "export": """\
  tether export 3f2a > session.md   # the whole session as Markdown
  tether export --last --format json -o session.json""",
    "cancel": """\
  tether cancel                     # the one session running a turn
  tether cancel 3f2a""",
    "attach": """\
  tether attach --last              # watch the last session live
  tether attach 3f2a""",
    "events": """\
  tether events 3f2a --since 120
  tether events --last -f | jq .type""",
    "resolve": """\
  tether resolve 3f2a               # after a crash: let the queue go on""",
    "approvals": """\
  tether approvals                  # what waits for an answer, in every session
  tether approvals rules            # the rules in force
  tether approvals rm rul_9c1e      # forget a remembered answer""",
    "approve": """\
  tether approve apr_3f             # once (an id prefix will do)
  tether approve 3f --session       # and the same again in that session
  tether approve 3f --always        # and in every session (a stored rule)""",
    "deny": """\
  tether deny apr_3f
  tether deny 3f --reason 'use the staging database instead'""",
    "cron": """\
  tether cron add digest --schedule '0 9 * * 1-5' --tz Europe/Paris -q 'summarise the inbox'
  tether cron list
  tether cron run digest            # fire it now and print the answer
  tether cron runs digest           # when it ran, the outcome, the answer's first line""",
    "schema": """\
  tether schema > tether.schema.json""",
    "token": """\
  tether token --label laptop --ttl 30d
  tether token list
  tether token revoke tok_51aa""",
    "web": """\
  tether web                        # a one-time link to the viewer page
  tether web --no-open""",
    "service": """\
  tether service install            # start the owner at login (systemd or launchd)
  tether service install --dry-run  # show the unit and commands, change nothing
  tether service status
  tether service uninstall""",
    "mcp": """\
  tether mcp list                   # the servers and their state
  tether mcp tools github           # the tools one server gives the agent
  tether mcp add github --env GITHUB_TOKEN='${GITHUB_TOKEN}' -- npx -y @modelcontextprotocol/server-github
  tether mcp add docs --url https://example.com/mcp
  tether mcp rm docs""",
    "acp": """\
  tether acp                        # run by an editor (Zed, JetBrains, Neovim), not by hand
  # Zed's settings.json: "agent_servers": {"tether": {"command": "tether", "args": ["acp"]}}""",
    "completion": """\
  tether completion bash > ~/.local/share/bash-completion/completions/tether
  tether completion zsh > ~/.zfunc/_tether   # with fpath+=(~/.zfunc) in .zshrc
  tether completion fish > ~/.config/fish/completions/tether.fish""",
    "cron add": """\
  tether cron add digest --schedule '0 9 * * 1-5' -q 'summarise the commits of yesterday'
  tether cron add backup-check --schedule @daily --tz UTC --query-file check.md \\
      --deliver file:/home/me/reports/backup.md
  tether cron add once --schedule 'in 20m' -q 'remind me to stretch'""",
}


def examples(name: str) -> str | None:
    text = EXAMPLES.get(name)
    return f"examples:\n{text}" if text else None


class HelpFormatter(argparse.HelpFormatter):
    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return text
        return super()._fill_text(text, width, indent)


def add_examples(parser: Any, name: str) -> None:
    """Give ``parser`` (a command's) its examples as epilog."""
    parser.epilog = examples(name)
    parser.formatter_class = HelpFormatter
