"""What one simple command is (package-internal; see policy.py): on the hard line,
read-only, what it writes, what it reads that it should not.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from .interpreters import SHELLS, interpreter
from .shell import Redirect, Simple, Unparseable, parse

__all__ = ["hard", "not_read_only", "write_targets", "private_read", "outside",
           "DISK", "ROOTS", "SYSTEM_DIRS"]

ROOTS = {"/", "/*", "~", "~/", "~/*", "$HOME", "$HOME/", "${HOME}", "${HOME}/", "/.", "/..",
         "$HOME/*", "${HOME}/*"}
SYSTEM_DIRS = {"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc",
               "root", "sbin", "srv", "sys", "usr", "var", "Users", "System", "Library",
               "Applications", "private"}
DISK = re.compile(r"/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|r?disk\d|md\d|"
                  r"dm-\d|loop\d|mapper/|disk/by-|sr\d|fd\d|mtdblock\d|ubi)")
_MKFS = {"mke2fs", "mkswap", "wipefs", "mkdosfs", "mkntfs", "mkexfatfs", "mkfatfs",
         "newfs", "newfs_msdos", "newfs_apfs"}
_OUTPUT = {">", ">>", ">|", "&>", "&>>", ">&", "<>"}
_HARMLESS_OUT = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
#: hard-line command names a word that is not a literal could turn out to be
_CANDIDATES = ("rm", "mkfs", "dd", "shred", "chmod", "chown")


def _braces(word: str, limit: int = 64) -> list[str]:
    """Brace expansion as bash does it ({a,b} and {1..3}), bounded; for the hard line."""
    m = re.search(r"\{([^{}]*)\}", word)
    if not m or ("," not in m.group(1) and ".." not in m.group(1)):
        return [word]
    inner = m.group(1)
    if "," in inner:
        choices = inner.split(",")
    else:
        lo, _, hi = inner.partition("..")
        choices = [str(n) for n in range(int(lo), int(hi) + 1)][:limit] \
            if lo.isdigit() and hi.isdigit() else [inner]
    out: list[str] = []
    for choice in choices:
        out.extend(_braces(word[:m.start()] + choice + word[m.end():], limit))
        if len(out) >= limit:
            break
    return out[:limit]


def _flags(args: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            found.add(arg.split("=")[0])
        elif arg.startswith("-") and len(arg) > 1:
            found.update(arg[1:])
    return found


def _operands(args: list[str]) -> list[str]:
    out, ended = [], False
    for arg in args:
        if arg == "--" and not ended:
            ended = True
        elif ended or not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def _root_like(target: str) -> bool:
    if target in ROOTS or target.rstrip("/") in ("", "~", "$HOME", "${HOME}"):
        return True
    norm = posixpath.normpath(target) if target.startswith("/") else target
    if norm in ("/", "//"):
        return True
    first = norm.lstrip("/").split("/")[0] if norm.startswith("/") else ""
    if norm.startswith("/") and "/" not in norm.strip("/") and first in SYSTEM_DIRS:
        return True
    return bool(norm.startswith("/") and re.search(r"[*?\[]", first))  # /u*, /[a-z]*


def hard(s: Simple) -> str | None:
    """Why ``s`` is on the hard line, or None."""
    if s.words and not s.named_literally():
        for name in _CANDIDATES:  # `$(echo rm) -rf /`: what if the word is rm?
            if name == "mkfs" and not any(DISK.search(a) for a in s.args):
                continue
            why = hard(Simple([name, *s.args], [True] * len(s.words), s.text, s.outer,
                              s.redirects))
            if why:
                return f"{why} (if the command word {s.words[0]!r}, not a literal, is {name})"
    words = [w for word in s.words for w in _braces(word)]
    name = words[0].rsplit("/", 1)[-1] if words else ""
    args = words[1:]
    flags = _flags(args)
    targets = _operands(args)
    if name == "rm" and ({"r", "R", "--recursive"} & flags) and (
            any(_root_like(t) for t in targets) or "--no-preserve-root" in flags):
        return "recursive removal of the root, home or a system directory"
    if name.startswith("mkfs") or name in _MKFS:
        return "formatting a filesystem"
    if name == "dd" and any(a.startswith("of=") and DISK.search(a) for a in args):
        return "a raw write to a disk device"
    if name in ("shred", "blkdiscard") and any(DISK.search(t) for t in targets):
        return "erasing a disk device"
    if name in ("chmod", "chown", "chgrp") and ({"R", "--recursive"} & flags) and \
            any(t in ("/", "/*") or posixpath.normpath(t) == "/" for t in targets
                if t.startswith("/")):
        return "changing ownership or modes of the whole filesystem"
    if any(DISK.search(path) for path, _ in write_targets(s)):
        return "a raw write to a disk device"
    if s.code and re.search(r"\bfork\b", s.code) and \
            re.search(r"\b(while|for|until|loop|repeat|do)\b", s.code):
        return "a fork bomb"
    return None


def write_targets(s: Simple) -> list[tuple[str, bool]]:
    """The paths ``s`` writes, as far as known: (path, is it a literal)."""
    out = [(r.target, r.literal) for r in s.redirects if r.op in _OUTPUT and r.target]
    out += [(w, True) for w in s.writes]
    name, args = s.name, s.args
    lit = dict(zip(s.words, s.literal, strict=False))
    ops = _operands(args)
    paths: list[str] = []
    if name == "tee":
        paths = ops
    elif name in ("cp", "mv", "install", "ln", "rsync", "scp"):
        for i, a in enumerate(args):
            if a in ("-t", "--target-directory") and i + 1 < len(args):
                paths.append(args[i + 1])
            elif a.startswith("--target-directory="):
                paths.append(a.split("=", 1)[1])
        if not paths and len(ops) >= 2:
            paths = ops[-1:]
    elif name == "dd":
        paths = [a[3:] for a in args if a.startswith("of=")]
    elif name in ("sort", "git", "curl", "wget", "time"):
        opt = {"sort": ("-o", "--output"), "git": ("--output", "--output"),
               "curl": ("-o", "--output"), "wget": ("-O", "--output-document"),
               "time": ("-o", "--output")}[name]
        for i, a in enumerate(args):
            if a in opt and i + 1 < len(args):
                paths.append(args[i + 1])
            elif a.startswith(opt[1] + "="):
                paths.append(a.split("=", 1)[1])
            elif a.startswith(opt[0]) and len(a) > len(opt[0]) and not a.startswith("--"):
                paths.append(a[len(opt[0]):])
    elif name == "uniq":
        rest = [a for a in ops if not a.isdigit()]
        paths = rest[1:2]
    elif name in ("touch", "mkdir", "rmdir", "rm", "truncate", "shred", "unlink"):
        paths = [a for a in ops if not re.fullmatch(r"[0-9.+-]+[KMGTPkmgtp]?", a)] \
            if name == "truncate" else ops
    elif name in ("chmod", "chown", "chgrp"):
        paths = ops[1:]
    return out + [(p, lit.get(p, True) and not re.search(r"[$`]", p)) for p in paths]


def outside(path: str, cwd: str | None) -> bool:
    """Whether a written path lies outside ``cwd`` (unknown cwd: everything does)."""
    if path in _HARMLESS_OUT or path.startswith("/dev/fd/"):
        return False
    if not cwd or path.startswith("~") or "$" in path or "`" in path:
        return True
    full = posixpath.normpath(posixpath.join(cwd, path))
    root = posixpath.normpath(cwd)
    return not (full == root or full.startswith(root.rstrip("/") + "/"))


def _proc(path: str) -> bool:
    """/proc itself or a process's directory in it (/proc/1, /proc/self, /proc/*)."""
    if path.rstrip("/") == "/proc":
        return True
    if not path.startswith("/proc/"):
        return False
    first = path[6:].lstrip("/").split("/")[0]
    return first in ("self", "thread-self") or not re.fullmatch(r"[a-z_]+", first)


def private_read(s: Simple, cwd: str | None, private: tuple[str, ...] = ()) -> str | None:
    """Whether ``s`` names another process's files under /proc (its environment,
    memory, descriptors), or one of the ``private`` paths (the owner's home)."""
    words = list(s.words[1:]) + [r.target for r in s.redirects if r.target] + s.assigns
    for word in words:
        for value in {word, word.split("=", 1)[-1]}:
            path = posixpath.normpath(posixpath.join(cwd or "/", value)) if value else ""
            if _proc(path) or re.search(r"/proc/+([$*?\[\d]|self|thread-self)", value):
                return f"it reads a process's files under /proc ({value})"
            for root in private:
                if path == root or path.startswith(root.rstrip("/") + "/"):
                    return f"it reads the owner's private files ({value})"
    return None


# -- read-only ----------------------------------------------------------------

#: commands none of whose options write a file or run a program
_PLAIN = {"ls", "cat", "head", "tail", "wc", "pwd", "echo", "printf", "grep", "egrep",
          "fgrep", "stat", "which", "whoami", "id", "uname", "du", "df", "cut", "diff",
          "true", "false", "basename", "dirname", "realpath", "readlink", "nl", "md5sum",
          "sha256sum", "sha1sum", "sha512sum", "cmp", "test", "[", "type", "ps", "uptime",
          "free", "column", "tr", "jq", "cd", "pushd", "popd", ":", "printenv", "seq",
          "comm", "join", "paste", "fold", "expand", "unexpand", "rev", "tac", "od",
          "hexdump", "xxd", "strings", "cksum", "b2sum", "nproc", "arch", "groups", "locale",
          "lsb_release", "getconf", "tty", "sleep"}
#: commands read-only unless an option says otherwise (checked in _careful)
_CAREFUL = {"git", "find", "sort", "uniq", "rg", "tree", "date", "hostname", "file", "less",
            "more", "env", "command", "awk", "gawk", "mawk", "nawk"}
_GIT_READ_ONLY = {"status", "log", "diff", "show", "branch", "rev-parse", "ls-files",
                  "describe", "blame", "remote", "tag", "shortlog", "grep", "ls-tree",
                  "cat-file", "rev-list", "reflog", "whatchanged", "show-ref", "version"}
_GIT_TOP = {"-C", "--git-dir", "--work-tree", "--no-pager", "-P", "--bare",
            "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs",
            "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks"}
_GIT_UNSAFE = ("--output", "-O", "--open-files-in-pager", "--ext-diff", "--textconv",
               "--exec-path", "--paginate", "-p", "--config-env", "--upload-pack",
               "--receive-pack", "--exec")
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
        if label not in _TRANSPARENT and not (label.endswith(" -c") and
                                              label.split()[0] in SHELLS):
            return f"it runs under {label}"
    if s.hidden:
        return s.hidden
    bad = [a for a in s.assigns if not _SAFE_VARS.match(a)]
    if bad:
        return f"it sets {bad[0].split('=')[0]} for the command"
    for r in s.redirects:
        if r.op in _OUTPUT and r.target and r.target not in _HARMLESS_OUT:
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
    flags = _flags(args)
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
        ops = _operands(rest)
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
    if name == "uniq" and len([a for a in _operands(args)]) > 1:
        return "uniq with two files writes the second"
    if name == "rg" and ({"--pre", "--pre-glob"} & flags or any(a.startswith("--pre")
                                                                  for a in args)):
        return "rg --pre runs a program"
    if name == "tree" and ({"o"} & flags):
        return "tree -o writes a file"
    if name == "date" and ({"s", "--set"} & flags):
        return "date --set changes the clock"
    if name == "hostname" and (_operands(args) or {"F", "--file"} & flags):
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


def hard_words(s: Simple) -> str | None:
    """An argument of ``s`` that, run as a shell command, is on the hard line (what a
    wrapper the policy does not know might do with it)."""
    for word in s.args:
        for piece in (word, word.split("=", 1)[-1], word.split("=", 1)[-1].lstrip("!")):
            if " " not in piece.strip():
                continue
            try:
                parsed = parse(piece)
            except Unparseable:
                continue
            if parsed.bombs:
                return "a fork bomb"
            for inner in parsed.commands:
                why = hard(inner)
                if why:
                    return why
    return None


def runs_hidden(s: Simple) -> str | None:
    """An option of ``s`` that runs a program the policy cannot see (a git pager or
    config, an awk program calling system())."""
    if s.name == "git":
        for arg in s.args:
            opt = arg.split("=")[0]
            if opt in ("-c", "--config-env", "--exec-path", "--open-files-in-pager",
                       "--ext-diff", "--upload-pack", "--receive-pack", "--exec",
                       "--paginate") or (arg.startswith("-O") and "grep" in s.args):
                return f"git {opt} can run a program the policy cannot see"
    if s.name in ("awk", "gawk", "mawk", "nawk") and (
            s.code is None or re.search(r"system|getline|\|", s.code or "")):
        return f"{s.name} with a program that can run commands"
    if s.name in ("less", "more") and any(a.startswith("+") for a in s.args):
        return f"{s.name} with commands to run"
    return None


def redirect_reads(redirects: list[Redirect]) -> list[str]:
    return [r.target for r in redirects if r.op == "<" and r.target]
