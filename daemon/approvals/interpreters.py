"""Shells and interpreters as the approval policy sees them (package-internal).

An interpreter's inline program (``python -c``, ``perl -e``, ``node -e``) is kept as
``code`` and marks the command ``hidden``: the policy cannot read Python or Perl, so
such a command is never read-only and asks in mode ``auto`` (a program in a file,
``python x.py``, runs like any other program). An awk program is read as text:
read-only when it can neither run commands nor write files (no ``system``,
``getline``, ``|``, ``>``; see classify.py).
"""

from __future__ import annotations

import re
from dataclasses import replace

from .shell import Simple, options

__all__ = ["SHELLS", "AWKS", "INTERPRETERS", "interpreter", "run_inline", "awk"]

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash",
          "posh", "rbash"}
AWKS = {"awk", "gawk", "mawk", "nawk"}
#: interpreter → (short options whose value is inline code, long ones, short options
#: taking a value, long options taking a value)
_INTERP: dict[str, tuple[str, set[str], str, set[str]]] = {
    "python": ("c", set(), "WXm", set()),
    "perl": ("eE", set(), "IMxil0CdDF", set()),
    "ruby": ("e", set(), "IrCEFTx", set()),
    "node": ("ep", {"--eval", "--print"}, "r", {"--require", "--import", "--loader"}),
    "bun": ("ep", {"--eval", "--print"}, "r", set()),
    "deno": ("", set(), "", set()),
    "php": ("rBRE", set(), "fcdz", set()),
    "lua": ("e", set(), "l", set()),
    "rscript": ("e", set(), "", set()),
    "julia": ("eE", {"--eval", "--print"}, "", set()),
    "osascript": ("e", set(), "l", set()),
    "pwsh": ("c", {"-command", "-encodedcommand", "-c", "-ec"}, "", set()),
    "tclsh": ("", set(), "", set()),
    "guile": ("c", set(), "Ll", set()),
}
_ALIASES = {"nodejs": "node", "powershell": "pwsh", "wish": "tclsh", "luajit": "lua",
            "pypy": "python", "pypy3": "python"}
INTERPRETERS = set(_INTERP) | set(_ALIASES)


def interpreter(name: str) -> str | None:
    """The interpreter family of a command name (python3.12 → python), or None."""
    low = name.lower()
    if low in _ALIASES:
        return _ALIASES[low]
    base = re.sub(r"[\d.]+$", "", low)
    return base if base in _INTERP else None


def run_inline(s: Simple, family: str) -> Simple:
    """``s`` with its inline program as ``code``, or marked hidden when it reads its
    program from standard input; unchanged when it runs a program file."""
    inline = f"{s.name} runs a program given inline"
    if family == "deno":
        if len(s.words) > 2 and s.words[1] == "eval":
            return replace(s, code=s.words[2], hidden=inline)
        return s
    code_short, code_long, arg_short, arg_long = _INTERP[family]
    i = 1
    while i < len(s.words):
        word = s.words[i]
        if word == "--":
            i += 1
            break
        if word.lower().split("=")[0] in code_long:
            value = word.split("=", 1)[1] if "=" in word else \
                (s.words[i + 1] if i + 1 < len(s.words) else "")
            return replace(s, code=value, hidden=inline)
        if word.startswith("--"):
            i += 2 if word in arg_long else 1
            continue
        if not word.startswith("-") or word == "-":
            break
        for j in range(1, len(word)):
            ch = word[j]
            if ch in code_short:
                value = word[j + 1:] or (s.words[i + 1] if i + 1 < len(s.words) else "")
                return replace(s, code=value, hidden=inline)
            if ch in arg_short:
                if ch == "m" and family == "python":
                    return s  # python -m module: a program from a file
                if not word[j + 1:]:
                    i += 1
                break
        i += 1
    if i >= len(s.words) or s.words[i] == "-":
        return replace(s, hidden=f"{s.name} reads its program from standard input")
    return s  # a program file


def awk(s: Simple) -> Simple:
    """``s`` with its awk program as ``code`` (None: a program from a file, unseen)."""
    opts, i = options(s.words, 1, "FvfeEilW", {"--file", "--source", "--include", "--load",
                                               "--exec", "--field-separator", "--assign"})
    if any(f in ("-f", "--file", "-E", "--exec", "-i", "--include", "-l", "--load")
           for f, _, _ in opts):
        return replace(s, code=None)
    sources = [v or "" for f, v, _ in opts if f in ("-e", "--source")]
    if not sources and i < len(s.words):
        sources = [s.words[i]]
    return replace(s, code="\n".join(sources) if sources else None)
