"""The two judgements of a parsed command that depend on the sandbox
(package-internal; see policy.py): without one, is it one plain read-only
command; with one, in mode ``auto``, why must it still ask."""

from __future__ import annotations

from .classify import hard_words, outside, private_read, write_targets
from .patterns import dangerous
from .readonly import not_read_only, runs_hidden
from .shell import Parsed, Simple

__all__ = ["strict", "risk_in_auto", "PRIVILEGED", "LONGEST"]

#: a command's text longer than this is not searched for dangerous patterns in mode
#: auto (that costs time on the owner's loop): it asks
LONGEST = 4096
#: wrappers that run a command as another user (a rule must name them)
PRIVILEGED = {"sudo", "doas", "su", "runuser", "chroot", "nsenter", "unshare", "pkexec"}


def strict(command: str, parsed: Parsed, cwd: str | None,
            private: tuple[str, ...]) -> str | None:
    """Without a sandbox: why ``command`` is not one plain read-only command."""
    if "\n" in command.strip():
        return "it spans several lines"
    if not parsed.single:
        return ("it is more than one simple command (a list, a pipe, a group, a "
                "substitution, a background job or a wrapper)")
    s = parsed.commands[0]
    if not all(s.literal):
        return "a word in it is not a literal (a variable, a substitution or braces)"
    for r in s.redirects:
        if r.target not in (None, "/dev/null") or r.op in ("<<", "<<-", "<<<"):
            return f"it redirects ({r.op} {r.target or ''})".replace(" )", ")")
    if s.assigns:
        return "it sets variables for the command"
    return not_read_only(s) or private_read(s, cwd, private)


def risk_in_auto(s: Simple, cwd: str | None, private: tuple[str, ...]) -> str | None:
    """Why ``s`` asks in mode auto (with a sandbox), or None."""
    if s.words and not s.named_literally():
        return f"its command word {s.words[0]!r} is not a literal"
    if s.hidden:
        return s.hidden
    if any(w.split()[0] in PRIVILEGED for w in s.wrappers) or s.name in PRIVILEGED:
        return "it runs as root or as another user"
    why = private_read(s, cwd, private) or runs_hidden(s)
    if why:
        return why
    if len(s.outer) > LONGEST:
        return "it is too long to check for dangerous patterns"
    risk = dangerous(s.outer) or dangerous(s.text)
    if risk:
        return f"it matches a dangerous pattern ({risk})"
    if not_read_only(s) is None:
        return None
    hidden = hard_words(s)
    if hidden:
        return f"an argument would be on the hard line if run ({hidden})"
    for path, literal in write_targets(s):
        if not literal or outside(path, cwd):
            return f"it writes outside the session's working directory ({path})"
    return None
