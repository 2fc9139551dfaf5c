"""The dangerous patterns (package-internal; see policy.py): regular expressions over
a command's text that make mode ``auto`` ask."""

from __future__ import annotations

import re

__all__ = ["dangerous", "normalize"]


def normalize(command: str) -> str:
    """A command with runs of whitespace folded, so patterns see one spelling."""
    return " ".join(command.split())


_DANGEROUS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), why) for p, why in (
        (r"(^|[;&|\s(])rm\s+(-\S*\s+)*-\S*[rR]", "recursive removal"),
        (r"(^|[;&|\s(])rm\s+(-\S*\s+)*-\S*f", "forced removal"),
        (r"\bchmod\s+(-\S+\s+)*(0?777|a\+w|o\+w)\b", "world-writable permissions"),
        (r"\b(chown|chgrp)\s+(-\S+\s+)*-\S*R", "recursive change of ownership"),
        (r">\s*/etc/", "overwriting a system file"),
        (r"\b(curl|wget|fetch)\b[^|]*\|\s*(sudo\s+)?(sh|bash|zsh|python\d?|perl|ruby)\b",
         "running a downloaded script"),
        (r"\bgit\s+push\b[^;&|\n]*(--force|\s-f\b)", "force-pushing"),
        (r"\bgit\s+reset\s+--hard\b", "discarding commits and changes"),
        (r"\bgit\s+clean\s+(-\S*\s+)*-\S*f", "deleting untracked files"),
        (r"\b(drop\s+(table|database|schema)|truncate\s+table)\b", "dropping data"),
        (r"\bdelete\s+from\s+\w+\s*(;|$|\")", "deleting every row"),
        (r"\b(kill|pkill|killall)\b", "killing processes"),
        (r"\bsystemctl\s+(stop|disable|mask|restart|kill)\b", "stopping a service"),
        (r"\b(shutdown|reboot|halt|poweroff)\b", "stopping the machine"),
        (r"\bdocker\s+(rm|rmi|kill|stop|system\s+prune|volume\s+rm)\b",
         "removing containers or images"),
        (r"\bfind\b[^;&|\n]*\s-(delete|exec(dir)?)\b", "find that deletes or executes"),
        (r"\b(sudo|doas|pkexec)\b", "running as root"),
        (r"\btether\s+(stop|serve|approve|deny|approvals|token|cron|config)\b",
         "controlling the tether owner itself"),
        (r"\b(mv|cp)\s+[^;&|\n]*\s/(etc|usr|bin|boot|lib)\b", "changing system directories"),
    ))


def dangerous(command: str) -> str | None:
    """The first dangerous pattern ``command`` matches (why it is risky), or None."""
    text = normalize(command)
    for pattern, why in _DANGEROUS:
        if pattern.search(text):
            return why
    return None
