"""``tether approvals``, ``tether approve`` and ``tether deny``: answering the agent's prompts.

A prompt can be answered from any terminal, not only from the chat that
caused it: ``tether approvals`` lists what is pending across sessions,
``tether approve ID`` (``--session``: and the same in this session without
asking; ``--always``: in every session) and ``tether deny ID [--reason R]``
answer it; ID may be any unambiguous beginning of the id (``apr_`` may be left
out). The first answer wins; a later one is told the prompt was already
resolved, and how. ``tether approvals rules`` lists the rules in force and
``tether approvals rm RULE_ID`` forgets a remembered answer.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson

from ..library.exits import CONTEXT, EXIT_OK, EXIT_TURN, EXIT_USAGE, CliError
from ..tui.render import format_time, shorten

__all__ = ["cmd_approvals", "cmd_approve", "cmd_deny", "describe", "match_pending"]


def _home(args: Any) -> Any:
    from tether.rpc.home import resolve_home

    from ..library.remote import remote_of

    CONTEXT.home = resolve_home(args.home)
    CONTEXT.remote = remote_of(args)
    return CONTEXT.home


def describe(prompt: dict[str, Any]) -> str:
    """One line: what the prompt asks to do."""
    verb = "run" if prompt.get("kind") == "command" else "write"
    return f"{prompt.get('tool', '?')} wants to {verb}: {prompt.get('subject', '')}"


def cmd_approvals(args: Any) -> int:
    return asyncio.run(_approvals(_home(args), args))


async def _approvals(home: Any, args: Any) -> int:
    from ..library.remote import connect_owner

    async with await connect_owner(home) as client:
        if args.action == "rules":
            rules = (await client.call("approval.rules"))["rules"]
            if args.json:
                for r in rules:
                    print(orjson.dumps(r).decode())
            elif not rules:
                print("no approval rules (approvals.allow/deny in config.yaml, or answer a "
                      "prompt with --session/--always)")
            for r in rules if not args.json else ():
                scope = f"session {r['session_id']}" if r["session_id"] else "all sessions"
                print(f"{r['rule_id'] or '(config)':<22} {r['effect']:<5} {r['kind']:<7} "
                      f"{r['pattern']}  [{r['source']}, {scope}]")
            return EXIT_OK
        if args.action == "rm":
            if not args.rule_id:
                raise CliError(2, "usage", "tether approvals rm RULE_ID",
                               "see `tether approvals rules` for the ids")
            removed = (await client.call("approval.rule_remove", rule_id=args.rule_id))
            if not removed["removed"]:
                raise CliError(EXIT_TURN, "not_found", f"no stored rule {args.rule_id}",
                               "see `tether approvals rules`")
            print(f"removed {args.rule_id}")
            return EXIT_OK
        pending = (await client.call("approval.list"))["approvals"]
    if args.json:
        for p in pending:
            print(orjson.dumps(p).decode())
        return EXIT_OK
    if not pending:
        print("no pending approvals")
    for p in pending:
        print(f"{p['approval_id']}  session {p['session_id']}  {format_time(p['created_at'])}\n"
              f"  {describe(p)}\n  why: {shorten(p['why'], 200)}")
    return EXIT_OK


def cmd_approve(args: Any) -> int:
    decision = "always" if args.always else "session" if args.session else "once"
    return asyncio.run(_answer(_home(args), args.approval_id, decision, args.reason))


def cmd_deny(args: Any) -> int:
    return asyncio.run(_answer(_home(args), args.approval_id, "deny", args.reason))


def match_pending(pending: list[dict[str, Any]], given: str) -> dict[str, Any]:
    """The one pending prompt ``given`` names: its id, or an unambiguous beginning of
    it (``apr_`` may be left out, a trailing … is ignored)."""
    key = given.strip().rstrip("…").rstrip(".")
    if not key:
        raise CliError(EXIT_USAGE, "usage", "which approval? give its id (a prefix will do)",
                       "`tether approvals` lists the pending ones")
    exact = [p for p in pending if p["approval_id"] == key]
    if exact:
        return exact[0]
    found = [p for p in pending if p["approval_id"].startswith(key)
             or p["approval_id"].startswith("apr_" + key)]
    if len(found) == 1:
        return found[0]
    if not found:
        hint = (f"{len(pending)} pending: `tether approvals` lists them" if pending
                else "nothing is pending now: it may have been answered, timed out or "
                "ended with its turn")
        raise CliError(EXIT_TURN, "not_pending", f"no pending approval matches {given!r}", hint)
    listed = "; ".join(f"{p['approval_id']} ({shorten(describe(p), 50)})" for p in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    raise CliError(EXIT_USAGE, "ambiguous", f"{given!r} matches {len(found)} pending "
                   f"approvals: {listed}{more}", "type more of the id")


async def _answer(home: Any, given: str, decision: str, reason: str | None) -> int:
    from ..library.remote import connect_owner

    async with await connect_owner(home) as client:
        pending = (await client.call("approval.list"))["approvals"]
        found = match_pending(pending, given)
        approval_id = found["approval_id"]
        CONTEXT.session_id = found["session_id"]
        params: dict[str, Any] = {"session_id": found["session_id"],
                                  "approval_id": approval_id, "decision": decision}
        if reason:
            params["reason"] = reason
        out = await client.call("approval.respond", **params)
    prompt = out["approval"]
    if out["status"] == "already_resolved":
        print(f"{approval_id} was already resolved: {prompt['status']}"
              + (f" ({prompt['decision']})" if prompt.get("decision") else ""), file=sys.stderr)
        return EXIT_TURN
    print(f"{approval_id}: {prompt['status']} ({decision}) — {describe(prompt)}")
    return EXIT_OK
