"""Approval policy, pure: what a tool call may do without asking a person.

``decide`` takes one request (a shell command, or a file write) and the policy
in force, and says ``allow``, ``deny`` or ``ask``, with the reason. A command is
first parsed (shell.py, with bashlex) into every simple command it would run:
lists, pipes, subshells, groups, loop and function bodies, substitutions, and the
commands exec-style wrappers run (wrappers.py: ``env -S``, ``timeout``, ``sudo``,
``xargs``, ``sh -c``, ``eval``, ``busybox``, ``find -exec``, …). The order for a
command, first match wins:

1. the built-in hard line (``hard_line``) on any of those commands: deny, and
   nothing approves it, not a rule, not a mode, not a person;
2. ``deny`` rules (config), matched against the whole command or any of them;
3. an escalation (the model asks to run outside the sandbox): mode ``never``
   allows, an attended turn asks, an unattended turn is denied, always;
4. mode ``never``: allow;
5. a command the parser cannot read: ask;
6. ``allow`` rules (config, and answers remembered as ``session`` / ``always``):
   allow when every simple command is covered by a rule or is read-only (the
   whole command matches a rule only when it is one simple command, or the rule
   is an exact remembered command);
7. no sandbox in force (``Request.sandbox`` is ``none``): fail closed, only one
   plain read-only command runs unasked (no list, pipe, substitution, wrapper,
   variable or redirection other than to /dev/null); everything else asks, in
   mode ``auto`` too;
8. a sandbox in force: every simple command read-only (classify.py): allow;
   mode ``auto``: allow unless one matches a dangerous pattern, hides what it
   runs (a command word that is not a literal, ``sh -c "$X"``, ``python -c``, a
   git pager option, awk ``system()``), runs as another user, reads a process's
   files under /proc, writes outside the working directory, or has an argument
   that would be on the hard line if run; mode ``ask``: ask.

A file write: the hard paths (/dev, /proc, /sys), deny rules, ``never``, allow
rules; then outside the session's cwd asks whatever the mode, inside it ``auto``
allows and ``ask`` asks.

Last, an ``ask`` on an unattended turn (nobody will answer: a finite turn, a
child agent, cron) becomes ``approvals.unattended``: deny (default) or allow;
an escalation is denied whatever that says.

No I/O, no clock: unit-tested in tests/daemon/test_approval_policy.py and
test_approval_attacks.py.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, replace
from typing import Literal

from .checks import LONGEST, PRIVILEGED, risk_in_auto, strict
from .classify import DISK, hard, hard_words, private_read, root_like
from .patterns import dangerous, normalize
from .readonly import not_read_only
from .shell import Parsed, Simple, Unparseable
from .wrappers import parse, rough

__all__ = ["Rule", "Request", "Decision", "Verdict", "decide", "hard_line", "dangerous",
           "read_only", "normalize", "exact_pattern", "parse_rule", "MODES", "UNATTENDED",
           "DECISIONS"]

MODES = ("ask", "auto", "never")
UNATTENDED = ("deny", "allow")
DECISIONS = ("once", "session", "always", "deny")
Kind = Literal["command", "file"]


@dataclass(frozen=True)
class Rule:
    """An allow or deny rule: a command pattern or a path glob (fnmatch)."""

    kind: Kind
    pattern: str
    source: str = "config"  # config | always | session
    rule_id: str | None = None


@dataclass(frozen=True)
class Request:
    """What a tool call wants to do: run ``subject`` (a command) or write it (a path)."""

    kind: Kind
    subject: str
    cwd: str | None
    attended: bool  # a person can answer (an interactive turn)
    #: the operating-system boundary the command will run in: ``workspace-write`` or
    #: ``read-only`` (bubblewrap), or ``none`` (no sandbox could be made, or
    #: ``sandbox.mode: off``): the policy then fails closed
    sandbox: str = "none"
    #: the model asked to run this command outside the sandbox (network, writes
    #: beyond the workspace): always asks a person, never runs unattended
    escalate: bool = False
    #: paths no command may read unasked (the owner's home: config, tokens, logs)
    private: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    action: Literal["allow", "deny", "ask"]
    reason: str
    hard: bool = False  # the hard line: nothing may approve it


@dataclass(frozen=True)
class Verdict:
    """The end of an approval check, as a tool sees it."""

    allowed: bool
    reason: str
    approval_id: str | None = None  # set when a person was asked


def parse_rule(text: str) -> Rule:
    """A config rule: ``path:GLOB`` for file writes, anything else a command pattern."""
    if text.startswith("path:"):
        return Rule("file", text[5:].strip())
    return Rule("command", normalize(text))


def exact_pattern(subject: str) -> str:
    """An fnmatch pattern matching exactly ``subject`` (for a remembered answer)."""
    return re.sub(r"([*?\[])", r"[\1]", subject)


# -- files --------------------------------------------------------------------

_HARD_PATHS = ("/dev/", "/proc/", "/sys/")


def _inside(path: str, cwd: str | None) -> bool:
    if not cwd:
        return False
    root = os.path.normpath(cwd)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _path_matches(rule: Rule, path: str, cwd: str | None) -> bool:
    pattern = rule.pattern
    if not os.path.isabs(pattern) and not pattern.startswith("~"):
        if not cwd:
            return False
        pattern = os.path.join(cwd, pattern)
    return fnmatch.fnmatchcase(path, os.path.expanduser(pattern))


# -- the decision -------------------------------------------------------------

#: NAME(){ NAME|NAME& };NAME — NAME starts at a separator and is taken whole
#: (possessive), so a long line costs linear time, not quadratic
_FORK_BOMB = re.compile(r"(?<![^\s;&|(){}'\"])([^\s;&|(){}'\"]++)\s*\(\)\s*\{\s*\1\s*\|\s*\1"
                        r"\s*&\s*\}\s*;?\s*\1")


def _read(command: str) -> tuple[Parsed | None, str | None]:
    """The parsed command, or None and why it cannot be read."""
    try:
        return parse(command), None
    except Unparseable as exc:
        return None, str(exc)


def _units(command: str, parsed: Parsed | None) -> list[Simple]:
    return parsed.commands if parsed is not None else rough(command)


def _where(s: Simple, command: str) -> str:
    """``s`` named for a reason, when it is not the whole command."""
    text = normalize(s.text)
    via = f" under {', '.join(s.wrappers)}" if s.wrappers else ""
    return "" if text == normalize(command) else f" ({text!r}{via})"


def _hard(command: str, parsed: Parsed | None) -> str | None:
    text = normalize(command)
    if _FORK_BOMB.search(text) or (parsed is not None and parsed.bombs):
        return "a fork bomb"
    if re.search(r">\s*" + DISK.pattern, text):
        return "a raw write to a disk device"
    units = _units(command, parsed)
    if any(s.hidden and "standard input" in s.hidden for s in units):
        # `echo 'rm -rf /' | sh`: what the shell reads may be any argument here
        for s in units:
            why = hard_words(s)
            if why:
                return f"{why} (fed to a shell)"
    home = False  # a cd into the root or home: `rm -rf *` then empties it
    for s in units:
        why = hard(s)
        if why:
            return why + _where(s, command)
        if s.name in ("cd", "pushd") and s.named_literally():
            home = not s.args or root_like(s.args[-1])
        elif home and s.name == "rm" and hard(replace(s, words=[
                "rm", *["/" if a in ("*", ".", "./", "./*", ".*", "..") else a
                        for a in s.args]])):
            return "recursive removal of the root or home directory after cd" + \
                _where(s, command)
    return None


def hard_line(command: str) -> str | None:
    """Why ``command`` is on the built-in hard line (never approvable), or None. Every
    simple command in it counts, wrappers looked into; a line the shell parser cannot
    read is cut roughly, so the hard line holds on it too."""
    return _hard(command, _read(command)[0])


def read_only(command: str) -> bool:
    """Whether every simple command in ``command`` is read-only: on the built-in list,
    no redirection into a file, nothing hidden from the policy, no process's files."""
    parsed, error = _read(command)
    if parsed is None or not parsed.commands:
        return False
    return all(not_read_only(s) is None and private_read(s, None) is None
               for s in parsed.commands)


def _exact(pattern: str) -> bool:
    """A pattern without wildcards (a remembered answer is one)."""
    return not re.search(r"[*?\[]", re.sub(r"\[([*?\[])\]", "", pattern))


def _rule_for(s: Simple, rules: list[Rule]) -> Rule | None:
    if s.words and not s.named_literally():
        return None  # which command it is is not known: no rule can say it is fine
    privileged = any(w.split()[0] in PRIVILEGED for w in s.wrappers)
    for rule in rules:
        if rule.kind != "command":
            continue
        if fnmatch.fnmatchcase(normalize(s.outer), rule.pattern) or (
                not privileged and fnmatch.fnmatchcase(normalize(s.text), rule.pattern)):
            return rule
    return None


def _finish(why: str, req: Request, unattended: str) -> Decision:
    if req.attended:
        return Decision("ask", why)
    if unattended == "allow" and not req.escalate:
        return Decision("allow", f"unattended turn and approvals.unattended is allow ({why})")
    return Decision("deny", f"denied: this turn is unattended (nobody can answer a prompt) "
                            f"and approvals.unattended is deny; it needs approval because {why}")


def decide(req: Request, *, mode: str, unattended: str, allow: list[Rule],
           deny: list[Rule]) -> Decision:
    """allow / deny / ask for ``req`` under the policy (see the module docstring).

    For a file write, ``req.subject`` is the absolute, normalised path."""
    if req.kind == "file":
        return _decide_file(req, mode, unattended, allow, deny)
    command = req.subject
    parsed, error = _read(command)
    why = _hard(command, parsed)
    if why:
        return Decision("deny", f"refused: {why} is on the built-in hard line, which no "
                                "rule or answer can approve", hard=True)
    units = _units(command, parsed)
    for rule in deny:
        if rule.kind != "command":
            continue
        hit = next((s for s in units if fnmatch.fnmatchcase(normalize(s.text), rule.pattern)
                    or fnmatch.fnmatchcase(normalize(s.outer), rule.pattern)), None)
        if hit is not None or fnmatch.fnmatchcase(normalize(command), rule.pattern):
            where = _where(hit, command) if hit is not None else ""
            return Decision("deny", f"denied by the rule {rule.pattern!r} (approvals.deny)"
                                    f"{where}")
    if req.escalate:
        if mode == "never":
            return Decision("allow", "approvals.mode is never (it runs outside the sandbox)")
        why = "it asks to run outside the sandbox (network, or writes beyond the workspace)"
        if req.attended:
            return Decision("ask", why)
        return Decision("deny", f"denied: this turn is unattended (nobody can answer a "
                                f"prompt) and {why}; an escalation is never granted without "
                                "a person")
    if mode == "never":
        return Decision("allow", "approvals.mode is never")
    rules = [r for r in allow if r.kind == "command"]
    exact = next((r for r in rules if _exact(r.pattern)
                  and fnmatch.fnmatchcase(normalize(command), r.pattern)), None)
    if exact is not None:  # a person's answer for exactly this text, parsed or not
        return Decision("allow", f"allowed by the {exact.source} rule {exact.pattern!r}")
    if parsed is None:
        return _finish(f"the command cannot be checked: {error}", req, unattended)
    if not parsed.commands:
        return _finish("the command is empty", req, unattended)
    private = req.private
    literal = all(not s.words or s.named_literally() for s in parsed.commands)
    whole = next((r for r in rules if literal and parsed.single
                  and fnmatch.fnmatchcase(normalize(command), r.pattern)), None)
    if whole is not None:
        return Decision("allow", f"allowed by the {whole.source} rule {whole.pattern!r}")
    if rules:
        used: list[Rule] = []
        for s in parsed.commands:
            covering = _rule_for(s, rules)
            if covering is None and (not_read_only(s) or private_read(s, req.cwd, private)):
                break
            if covering is not None and covering not in used:
                used.append(covering)
        else:
            if used:
                names = ", ".join(f"the {r.source} rule {r.pattern!r}" for r in used)
                return Decision("allow", f"allowed by {names} (the rest is read-only)")
    if req.sandbox not in ("workspace-write", "read-only"):
        why = strict(command, parsed, req.cwd, private)
        if why is None:
            return Decision("allow", "one command on the built-in read-only list")
        return _finish(f"no sandbox is in force, so only one plain read-only command runs "
                       f"unasked, and {why}", req, unattended)
    reasons = [(s, not_read_only(s) or private_read(s, req.cwd, private))
               for s in parsed.commands]
    first = next(((s, w) for s, w in reasons if w), None)
    if first is None:
        return Decision("allow", "every command in it is on the built-in read-only list")
    if mode == "auto":
        risk = dangerous(command) if len(command) <= LONGEST else None
        why = f"it matches a dangerous pattern ({risk})" if risk else None
        for s in parsed.commands:
            if why:
                break
            risk = risk_in_auto(s, req.cwd, private)
            why = risk + _where(s, command) if risk else None
        if why is None:
            return Decision("allow", f"approvals.mode is auto, the sandbox ({req.sandbox}) "
                                     "is in force and nothing in it is dangerous")
        return _finish(why, req, unattended)
    s, why = first
    return _finish(f"approvals.mode is ask and no rule allows it: {why}{_where(s, command)}",
                   req, unattended)


def _decide_file(req: Request, mode: str, unattended: str, allow: list[Rule],
                 deny: list[Rule]) -> Decision:
    if req.subject.startswith(_HARD_PATHS) and req.subject != "/dev/null":
        return Decision("deny", f"refused: writing {req.subject} is on the built-in hard "
                                "line, which no rule or answer can approve", hard=True)
    for rule in deny:
        if rule.kind == "file" and _path_matches(rule, req.subject, req.cwd):
            return Decision("deny", f"denied by the rule {rule.pattern!r} (approvals.deny)")
    if mode == "never":
        return Decision("allow", "approvals.mode is never")
    for rule in allow:
        if rule.kind == "file" and _path_matches(rule, req.subject, req.cwd):
            return Decision("allow", f"allowed by the {rule.source} rule {rule.pattern!r}")
    if not _inside(req.subject, req.cwd):
        why = "it writes outside the session's working directory"
    elif mode == "auto":
        return Decision("allow", "approvals.mode is auto and the path is inside the "
                                 "session's working directory")
    else:
        why = "approvals.mode is ask and no rule allows it"
    return _finish(why, req, unattended)
