"""The built-in read-only list (package-internal; see policy.py): a simple command
that neither writes a file nor runs a program the policy cannot see.
"""

from __future__ import annotations

import re

from .classify import HARMLESS_OUT, OUTPUT, flags_of, operands
from .interpreters import SHELLS, interpreter
from .shell import Simple

__all__ = ["not_read_only", "runs_hidden"]

#: commands none of whose options write a file or run a program
_PLAIN = {"ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "grep", "egrep",
          "fgrep", "stat", "which", "whoami", "id", "uname", "du", "df", "cut", "diff",
          "true", "false", "basename", "dirname", "realpath", "readlink", "nl", "md5sum",
          "sha256sum", "sha1sum", "sha512sum", "cmp", "test", "[", "type", "ps", "uptime",
          "free", "column", "tr", "jq", "cd", "pushd", "popd", ":", "printenv", "seq",
          "comm", "join", "paste", "fold", "expand", "unexpand", "rev", "tac", "od",
          "hexdump", "strings", "cksum", "b2sum", "nproc", "arch", "groups", "locale",
          "lsb_release", "getconf", "tty"}
#: commands read-only unless an option says otherwise (checked in _careful)
_CAREFUL = {"git", "find", "sort", "uniq", "xxd", "rg", "tree", "date", "hostname", "file", "less",
            "more", "env", "command", "awk", "gawk", "mawk", "nawk"}
_GIT_READ_ONLY = {"status", "log", "diff", "show", "branch", "rev-parse", "ls-files",
                  "describe", "blame", "remote", "tag", "shortlog", "grep", "ls-tree",
                  "cat-file", "rev-list", "reflog", "whatchanged", "show-ref", "version"}
_GIT_TOP = {"-C", "--git-dir", "--work-tree", "--no-pager", "-P", "--bare",
            "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs",
            "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks"}
_GIT_UNSAFE = ("--output", "-O", "--open-files-in-pager", "--ext-diff", "--textconv",
               "--exec-path", "--paginate", "--config-env", "--upload-pack",
               "--receive-pack", "--exec", "--filters")
#: variables an assignment may set on a read-only command
_SAFE_VARS = re.compile(r"^(LANG|LANGUAGE|LC_[A-Z]+|TZ|TERM|COLUMNS|LINES|NO_COLOR|"
                        r"CLICOLOR|CLICOLOR_FORCE|FORCE_COLOR|GREP_COLOR|GREP_COLORS|"
                        r"LS_COLORS|[a-z_][a-z0-9_]*)=")
_TRANSPARENT = {"nice", "ionice", "timeout", "stdbuf", "command", "builtin", "env", "exec",
                "time", "busybox", "eval"}
_AWK_UNSAFE = re.compile(r"system|getline|[|>]|@load|@include|fflush|close")


def not_read_only(s: Simple) -> str | None:
    """Why ``s`` is not read-only (None: it is)."""
    for label in s.wrappers:
        if label not in _TRANSPARENT and label.split()[0] not in SHELLS:  # bash -c, bash <<
            return f"it runs under {label}"
    if s.hidden:
        return s.hidden
    bad = [a for a in s.assigns if not _SAFE_VARS.match(a)]
    if bad:
        return f"it sets {bad[0].split('=')[0]} for the command"
    for r in s.redirects:
        if r.op in OUTPUT and r.target and r.target not in HARMLESS_OUT:
            return f"it writes {r.target} (redirection {r.op})"
    if s.writes:
        return f"it writes {s.writes[0]}"
    if not s.words:
        return None  # assignments alone
    if not s.named_literally():
        return f"its command word {s.words[0]!r} is not a literal"
    name = s.name
    if name in _PLAIN:
        return None
    if name in _CAREFUL:
        if not all(s.literal[1:]):
            return f"{name} with an argument that is not a literal"
        return _careful(s)
    if name in SHELLS or interpreter(name) or name in ("source", "."):
        return f"{name} runs a program"
    return f"{name} is not on the read-only list"


def _careful(s: Simple) -> str | None:
    name, args = s.name, s.args
    flags = flags_of(args)
    if name == "git":
        i = 0
        while i < len(args) and args[i].startswith("-"):
            opt = args[i].split("=")[0]
            if opt not in _GIT_TOP:
                return f"git {args[i]} can run programs or write files"
            i += 2 if opt in ("-C", "--git-dir", "--work-tree") and "=" not in args[i] \
                else 1
        sub = args[i] if i < len(args) else ""
        rest = args[i + 1:]
        if sub not in _GIT_READ_ONLY:
            return f"git {sub or '(no subcommand)'} is not on the read-only list"
        for arg in rest:
            if arg.split("=")[0] in _GIT_UNSAFE or arg.startswith("-O"):
                return f"git {sub} {arg} can run programs or write files"
        ops = operands(rest)
        if sub in ("branch", "tag"):
            listing = {"--list", "-l", "--contains", "--no-contains", "--merged",
                       "--no-merged", "--points-at", "--show-current"}
            changing = {"d", "D", "m", "M", "c", "C", "f", "u", "a", "s", "e", "--delete",
                        "--move", "--copy", "--force", "--set-upstream-to", "--track",
                        "--unset-upstream", "--edit-description", "--annotate", "--sign",
                        "-F", "--file", "--no-track", "--create-reflog"}
            if sub == "branch":
                changing -= {"a"}  # git branch -a lists all
            if (flags & changing) or (ops and not (set(rest) & listing)):
                return f"git {sub} {' '.join(rest)} changes the repository"
        if sub == "remote" and ops and ops[0] not in ("show", "get-url"):
            return f"git remote {ops[0]} changes the repository"
        if sub == "reflog" and ops and ops[0] not in ("show",):
            return f"git reflog {ops[0]} changes the repository"
        return None
    if name == "find":
        for arg in args:
            if arg in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint",
                       "-fprint0", "-fprintf", "-fls"):
                return f"find {arg} runs programs or writes files"
        return None
    if name == "sort" and ({"o", "--output", "--compress-program"} & flags):
        return "sort writes a file or runs a program"
    if name == "uniq" and len([a for a in operands(args) if not a.isdigit()]) > 1:
        return "uniq with two files writes the second"
    if name == "xxd" and len(operands(args)) > 1:
        return "xxd with two files writes the second"
    if name == "rg" and ({"--pre", "--pre-glob"} & flags or any(a.startswith("--pre")
                                                                  for a in args)):
        return "rg --pre runs a program"
    if name == "tree" and ({"o"} & flags):
        return "tree -o writes a file"
    if name == "date" and ({"s", "--set"} & flags):
        return "date --set changes the clock"
    if name == "hostname" and (operands(args) or {"F", "--file"} & flags):
        return "hostname with a name changes it"
    if name == "file" and ({"C", "--compile"} & flags):
        return "file -C writes a file"
    if name in ("less", "more") and (any(a.startswith("+") for a in args) or
                                     {"o", "O", "--log-file", "--LOG-FILE"} & flags):
        return f"{name} with commands or a log file"
    if name == "env" and not s.wrappers and args:
        return None
    if name == "command" and not ({"v", "V"} & flags):
        return "command runs a program"
    if name in ("awk", "gawk", "mawk", "nawk"):
        if s.code is None or _AWK_UNSAFE.search(s.code) or "i" in flags:
            return f"{name} program that can run commands or write files"
    return None


def runs_hidden(s: Simple) -> str | None:
    """An option of ``s`` that runs a program the policy cannot see (a git pager or
    config, an awk program calling system())."""
    if s.name == "git":
        top = True
        for arg in s.args:
            opt = arg.split("=")[0]
            if top and not arg.startswith("-"):
                top = False  # the subcommand: what follows are its own options
            if (top and opt in ("-c", "--config-env", "--exec-path", "--paginate", "-p")) or \
                    opt in ("--open-files-in-pager", "--ext-diff", "--upload-pack",
                            "--receive-pack", "--exec", "--filters") or \
                    (arg.startswith("-O") and "grep" in s.args):
                return f"git {opt} can run a program the policy cannot see"
    if s.name in ("awk", "gawk", "mawk", "nawk") and (
            s.code is None or re.search(r"system|getline|\|", s.code or "")):
        return f"{s.name} with a program that can run commands"
    if s.name in ("less", "more") and any(a.startswith("+") for a in s.args):
        return f"{s.name} with commands to run"
    return None


