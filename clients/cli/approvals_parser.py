"""The parsers of ``tether approvals``, ``approve`` and ``deny`` (their commands are in
approvals_cmd.py, imported only when one runs)."""

from __future__ import annotations

from typing import Any

__all__ = ["add_approval_parsers"]


def _approvals_command(name: str) -> Any:
    """A command of approvals_cmd.py, imported only when it runs."""
    def run(args: Any) -> int:
        from . import approvals_cmd

        return int(getattr(approvals_cmd, name)(args))

    return run


def add_approval_parsers(command: Any) -> None:
    """Add the three commands through cli.py's ``command(name, help, ...)`` helper."""
    p = command("approvals", "list pending approval prompts of every session; `rules` lists "
                             "the rules in force, `rm RULE_ID` forgets a remembered answer")
    p.add_argument("action", nargs="?", choices=("list", "rules", "rm"), default="list")
    p.add_argument("rule_id", nargs="?", metavar="RULE_ID")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    p.set_defaults(func=_approvals_command("cmd_approvals"))

    p = command("approve", "approve a pending prompt (once, unless --session or --always)",
                description="Approve a pending approval prompt of any session, from any "
                "terminal: the agent's tool call goes ahead. ID is the approval's id or any "
                "unambiguous beginning of it (`apr_` may be left out); `tether approvals` "
                "lists the pending ones. The first answer wins.")
    p.add_argument("approval_id", metavar="ID", help="the approval (a prefix will do)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--session", action="store_true",
                       help="also approve the same in this session without asking")
    scope.add_argument("--always", action="store_true",
                       help="also approve the same in every session (a stored rule)")
    p.add_argument("--reason", metavar="R", help="a note recorded with the answer")
    p.set_defaults(func=_approvals_command("cmd_approve"))

    p = command("deny", "deny a pending prompt; the agent is told (with the reason)",
                description="Deny a pending approval prompt of any session: the tool call "
                "is not made and the model is told, with --reason if given. ID is the "
                "approval's id or any unambiguous beginning of it.")
    p.add_argument("approval_id", metavar="ID", help="the approval (a prefix will do)")
    p.add_argument("--reason", metavar="R", help="why; the agent sees it")
    p.set_defaults(func=_approvals_command("cmd_deny"))
