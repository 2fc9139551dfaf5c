"""Approval policy, pure: what a tool call may do without asking a person.

``decide`` takes one request (a shell command, or a file write) and the policy
in force, and says ``allow``, ``deny`` or ``ask``, with the reason. The order,
first match wins:

1. the built-in hard line (``hard_line``): nothing approves it, not a rule, not
   a mode, not a person;
2. ``deny`` rules (config);
3. mode ``never``: allow;
4. ``allow`` rules (config, and answers remembered as ``session`` / ``always``);
5. commands on the built-in read-only list (``read_only``) that match no
   dangerous pattern: allow;
6. file writes outside the session's cwd: ask (whatever the mode);
7. mode ``auto``: allow unless a dangerous pattern (``dangerous``) matches;
   mode ``ask``: ask;
8. an ``ask`` on an unattended turn (nobody will answer: a finite turn, a
   child agent) becomes ``approvals.unattended``: deny (default) or allow.

No I/O, no clock: unit-tested exhaustively in tests/daemon/test_approval_policy.py.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass
from typing import Literal

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


def normalize(command: str) -> str:
    """A command with runs of whitespace folded, so patterns see one spelling."""
    return " ".join(command.split())


def exact_pattern(subject: str) -> str:
    """An fnmatch pattern matching exactly ``subject`` (for a remembered answer)."""
    return re.sub(r"([*?\[])", r"[\1]", subject)


# -- commands: parsing --------------------------------------------------------

# ; && || | & and newlines separate commands; the & of 2>&1 or &> does not
_SEPARATORS = re.compile(r"\|\||&&|[;|\n]|(?<![<>])&(?!>)")
_WRAPPERS = {"sudo", "doas", "env", "nice", "nohup", "time", "command", "exec", "timeout",
             "ionice", "stdbuf", "xargs"}
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish"}


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a command line, each as argv (wrappers stripped;
    ``sh -c '...'`` looked into). A segment that does not parse is kept as raw words."""
    out: list[list[str]] = []
    for part in _SEPARATORS.split(command):
        part = part.strip().lstrip("({").rstrip(")}").strip()
        if not part:
            continue
        try:
            argv = shlex.split(part)
        except ValueError:
            argv = part.split()
        first = argv[:1]
        while argv and (os.path.basename(argv[0]) in _WRAPPERS or "=" in argv[0]
                        and not argv[0].startswith("=")):
            argv = argv[1:]
            # the wrapper's own options (sudo -u x, timeout 10, nice -n 5)
            while argv and (argv[0].startswith("-") or argv[0].isdigit()):
                argv = argv[1:]
        if not argv:  # `env` alone, `FOO=1` alone: the wrapper is the command
            if not first or "=" in first[0]:
                continue
            argv = first
        name = os.path.basename(argv[0])
        if name in _SHELLS and "-c" in argv[1:]:
            i = argv.index("-c")
            if i + 1 < len(argv):
                out.extend(_segments(argv[i + 1]))
                continue
        out.append([name, *argv[1:]])
    return out


def _flags(argv: list[str]) -> set[str]:
    """Short flags (``-rf`` → r, f) and long ones (``--force``) of an argv."""
    found: set[str] = set()
    for arg in argv[1:]:
        if arg.startswith("--"):
            found.add(arg)
        elif arg.startswith("-") and len(arg) > 1:
            found.update(arg[1:])
    return found


_ROOTS = {"/", "/*", "~", "~/", "~/*", "$HOME", "$HOME/", "${HOME}", "/.", "/.."}
_DISK = re.compile(r"/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|md\d|dm-\d)")
_FORK_BOMB = re.compile(r"(\S+)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}\s*;?\s*\1")


def hard_line(command: str) -> str | None:
    """Why ``command`` is on the built-in hard line (never approvable), or None."""
    text = normalize(command)
    if _FORK_BOMB.search(text):
        return "a fork bomb"
    if re.search(r">\s*" + _DISK.pattern, text):
        return "a raw write to a disk device"
    for argv in _segments(text):
        name, args = argv[0], argv[1:]
        flags = _flags(argv)
        targets = [a for a in args if not a.startswith("-")]
        if name == "rm" and ({"r", "R", "--recursive"} & flags) and (
                any(t.rstrip("/") in ("", "~", "$HOME", "${HOME}") or t in _ROOTS
                    or re.fullmatch(r"/[a-z]+/?", t) and t.strip("/") in _SYSTEM_DIRS
                    for t in targets) or "--no-preserve-root" in flags):
            return "recursive removal of the root, home or a system directory"
        if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs"):
            return "formatting a filesystem"
        if name == "dd" and any(a.startswith("of=") and _DISK.search(a) for a in args):
            return "a raw write to a disk device"
        if name in ("shred", "blkdiscard") and any(_DISK.search(t) for t in targets):
            return "erasing a disk device"
        if name in ("chmod", "chown", "chgrp") and ({"R", "--recursive"} & flags) and \
                any(t in ("/", "/*") for t in targets):
            return "changing ownership or modes of the whole filesystem"
    return None


_SYSTEM_DIRS = {"bin", "boot", "dev", "etc", "home", "lib", "lib64", "opt", "proc", "root",
                "sbin", "srv", "sys", "usr", "var"}

# -- commands: dangerous patterns ---------------------------------------------

_DANGEROUS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), why) for p, why in (
        (r"(^|[;&|\s(])rm\s+(-\S*\s+)*-\S*[rR]", "recursive removal"),
        (r"(^|[;&|\s(])rm\s+(-\S*\s+)*-\S*f", "forced removal"),
        (r"\bchmod\s+(-\S+\s+)*(0?777|a\+w|o\+w)\b", "world-writable permissions"),
        (r"\b(chown|chgrp)\s+(-\S+\s+)*-\S*R", "recursive change of ownership"),
        (r">\s*/etc/", "overwriting a system file"),
        (r"\b(curl|wget|fetch)\b[^|]*\|\s*(sudo\s+)?(sh|bash|zsh|python\d?|perl|ruby)\b",
         "running a downloaded script"),
        (r"\bgit\s+push\b.*(--force|\s-f\b)", "force-pushing"),
        (r"\bgit\s+reset\s+--hard\b", "discarding commits and changes"),
        (r"\bgit\s+clean\s+(-\S*\s+)*-\S*f", "deleting untracked files"),
        (r"\b(drop\s+(table|database|schema)|truncate\s+table)\b", "dropping data"),
        (r"\bdelete\s+from\s+\w+\s*(;|$|\")", "deleting every row"),
        (r"\b(kill|pkill|killall)\b", "killing processes"),
        (r"\bsystemctl\s+(stop|disable|mask|restart|kill)\b", "stopping a service"),
        (r"\b(shutdown|reboot|halt|poweroff)\b", "stopping the machine"),
        (r"\bdocker\s+(rm|rmi|kill|stop|system\s+prune|volume\s+rm)\b",
         "removing containers or images"),
        (r"\bfind\b.*\s-(delete|exec(dir)?)\b", "find that deletes or executes"),
        (r"\bsudo\b", "running as root"),
        (r"\btether\s+(stop|serve)\b", "controlling the tether owner itself"),
        (r"\b(mv|cp)\s+.*\s/(etc|usr|bin|boot|lib)\b", "changing system directories"),
    ))


def dangerous(command: str) -> str | None:
    """The first dangerous pattern ``command`` matches (why it is risky), or None."""
    text = normalize(command)
    for pattern, why in _DANGEROUS:
        if pattern.search(text):
            return why
    return None


# -- commands: read-only ------------------------------------------------------

_READ_ONLY = {"ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "grep", "egrep",
              "fgrep", "rg", "stat", "file", "which", "whoami", "id", "date", "uname", "du",
              "df", "tree", "sort", "uniq", "cut", "diff", "true", "false", "env", "printenv",
              "basename", "dirname", "realpath", "readlink", "hostname", "nl", "less", "more",
              "md5sum", "sha256sum", "sha1sum", "cmp", "test", "[", "type", "ps", "uptime",
              "free", "column", "tr", "jq"}
_GIT_READ_ONLY = {"status", "log", "diff", "show", "branch", "rev-parse", "ls-files",
                  "describe", "blame", "remote", "tag", "shortlog", "grep"}
# output redirection other than to /dev/null or between descriptors writes a file
_WRITE_REDIRECT = re.compile(r"(^|[^<>&0-9])\d*>>?\s*(?!&|/dev/null\b)\S")


def read_only(command: str) -> bool:
    """Whether every part of ``command`` is on the built-in read-only list (no
    redirection into files, no command substitution)."""
    text = normalize(command)
    if not text or "$(" in text or "`" in text or _WRITE_REDIRECT.search(text):
        return False
    segments = _segments(text)
    if not segments:
        return False
    for argv in segments:
        name = argv[0]
        if name == "git":
            sub = next((a for a in argv[1:] if not a.startswith("-")), "")
            if sub not in _GIT_READ_ONLY or (sub == "branch" and {"d", "D", "m", "M"}
                                             & _flags(argv)):
                return False
        elif name == "find":
            if any(a in ("-delete", "-exec", "-execdir", "-ok", "-fprint") for a in argv):
                return False
        elif name == "sort" and "o" in _flags(argv):
            return False
        elif name not in _READ_ONLY:
            return False
    return True


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


def _matches(rule: Rule, req: Request) -> bool:
    if rule.kind != req.kind:
        return False
    if req.kind == "file":
        return _path_matches(rule, req.subject, req.cwd)
    return fnmatch.fnmatchcase(normalize(req.subject), rule.pattern)


def decide(req: Request, *, mode: str, unattended: str, allow: list[Rule],
           deny: list[Rule]) -> Decision:
    """allow / deny / ask for ``req`` under the policy (see the module docstring).

    For a file write, ``req.subject`` is the absolute, normalised path."""
    if req.kind == "command":
        why = hard_line(req.subject)
        if why:
            return Decision("deny", f"refused: {why} is on the built-in hard line, which "
                                    "no rule or answer can approve", hard=True)
    elif req.subject.startswith(_HARD_PATHS) and req.subject != "/dev/null":
        return Decision("deny", f"refused: writing {req.subject} is on the built-in hard "
                                "line, which no rule or answer can approve", hard=True)
    for rule in deny:
        if _matches(rule, req):
            return Decision("deny", f"denied by the rule {rule.pattern!r} (approvals.deny)")
    if mode == "never":
        return Decision("allow", "approvals.mode is never")
    for rule in allow:
        if _matches(rule, req):
            return Decision("allow", f"allowed by the {rule.source} rule {rule.pattern!r}")
    if req.kind == "command":
        risk = dangerous(req.subject)
        if risk is None and read_only(req.subject):
            return Decision("allow", "on the built-in read-only list")
        if mode == "auto" and risk is None:
            return Decision("allow", "approvals.mode is auto and no dangerous pattern matched")
        why = f"it matches a dangerous pattern ({risk})" if risk else \
            "approvals.mode is ask and no rule allows it"
    elif not _inside(req.subject, req.cwd):
        why = "it writes outside the session's working directory"
    elif mode == "auto":
        return Decision("allow", "approvals.mode is auto and the path is inside the "
                                 "session's working directory")
    else:
        why = "approvals.mode is ask and no rule allows it"
    if req.attended:
        return Decision("ask", why)
    if unattended == "allow":
        return Decision("allow", f"unattended turn and approvals.unattended is allow ({why})")
    return Decision("deny", f"denied: this turn is unattended (nobody can answer a prompt) "
                            f"and approvals.unattended is deny; it needs approval because {why}")
