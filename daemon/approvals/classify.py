"""What one simple command is (package-internal; see policy.py): on the hard line,
what it writes, what it reads that it should not (readonly.py: whether it is read-only).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from .shell import Simple, Unparseable
from .wrappers import parse

__all__ = ["hard", "hard_words", "write_targets", "private_read", "outside", "root_like",
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
OUTPUT = {">", ">>", ">|", "&>", "&>>", ">&", "<>"}
HARMLESS_OUT = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
#: hard-line command names a word that is not a literal could turn out to be
_CANDIDATES = ("rm", "mkfs", "dd", "shred", "chmod", "chown")


def _braces(word: str, limit: int = 64) -> list[str]:
    """Brace expansion as bash does it ({a,b} and {1..3}), bounded; for the hard line."""
    out: list[str] = []
    todo, steps = [word], 0
    while todo and len(out) < limit and steps < 8 * limit:
        steps += 1
        current = todo.pop()
        m = re.search(r"\{([^{}]*)\}", current)
        if not m or ("," not in m.group(1) and ".." not in m.group(1)):
            out.append(current)
            continue
        inner = m.group(1)
        if "," in inner:
            choices = inner.split(",")
        else:
            lo, _, hi = inner.partition("..")
            choices = [str(n) for n in range(int(lo), min(int(hi), int(lo) + limit) + 1)] \
                if lo.isdigit() and hi.isdigit() else [inner]
        todo.extend(current[:m.start()] + c + current[m.end():]
                    for c in reversed(choices[:limit]))
    return out or [word]


def flags_of(args: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            found.add(arg.split("=")[0])
        elif arg.startswith("-") and len(arg) > 1:
            found.update(arg[1:])
    return found


def operands(args: list[str]) -> list[str]:
    out, ended = [], False
    for arg in args:
        if arg == "--" and not ended:
            ended = True
        elif ended or not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


def root_like(target: str) -> bool:
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
    flags = flags_of(args)
    targets = operands(args)
    if name == "rm" and ({"r", "R", "--recursive"} & flags) and (
            any(root_like(t) for t in targets) or "--no-preserve-root" in flags):
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
    if name == "find" and _find_ruins(args):
        return "removing every file under the root, home or a system directory"
    for text in re.findall(r"'([^']*)'|\"([^\"]*)\"", s.code or ""):
        why = _hard_text(text[0] or text[1])  # os.system("rm -rf /")
        if why:
            return f"{why} (in the program {s.name} runs)"
    if s.bomb or s.code and re.search(r"\bfork\b", s.code) and \
            re.search(r"\b(while|for|until|loop|repeat|do)\b", s.code):
        return "a fork bomb"
    return None


_FIND_PLAIN = {"-depth", "-xdev", "-mount", "-L", "-H", "-P", "-maxdepth", "-mindepth",
               "-print", "-print0", "-ignore_readdir_race", "-noleaf", "-d"}


def _find_ruins(args: list[str]) -> bool:
    """find from the root, home or a system directory deleting every file it meets (no
    test narrows it): ``find / -delete``, ``find ~ -exec rm -rf {} +``."""
    first = next((i for i, a in enumerate(args) if a.startswith(("-", "(", "!"))), len(args))
    if not any(root_like(a) for a in args[:first]):
        return False
    ruin, i = False, first
    while i < len(args):
        arg = args[i]
        if arg in ("-exec", "-execdir"):
            end = next((j for j in range(i + 1, len(args)) if args[j] in (";", "+")),
                       len(args))
            ruin |= args[i + 1:i + 2] != [] and args[i + 1].rsplit("/", 1)[-1] in (
                "rm", "shred", "unlink")
            i = end + 1
            continue
        if arg == "-delete":
            ruin = True
        elif arg not in _FIND_PLAIN and not arg.isdigit():
            return False  # a test (-name, -mtime, …) or an action of another kind
        i += 1
    return ruin


def write_targets(s: Simple) -> list[tuple[str, bool]]:
    """The paths ``s`` writes, as far as known: (path, is it a literal)."""
    out = [(r.target, r.literal) for r in s.redirects if r.op in OUTPUT and r.target]
    out += [(w, True) for w in s.writes]
    name, args = s.name, s.args
    lit = dict(zip(s.words, s.literal, strict=False))
    ops = operands(args)
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
    elif name in ("uniq", "xxd"):
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
    if path in HARMLESS_OUT or path.startswith("/dev/fd/"):
        return False
    if not cwd or path.startswith("~") or "$" in path or "`" in path:
        return True
    full = posixpath.normpath(posixpath.join(cwd, path))
    root = posixpath.normpath(cwd)
    return not (full == root or full.startswith(root.rstrip("/") + "/"))


#: well-known credentials of the user (ssh, cloud, package registries, databases, and
#: tether's own default home: config with API keys, tokens)
_SECRETS = re.compile(r"(^|/)(\.ssh(/|$)|\.aws/|\.gnupg(/|$)|\.netrc$|\.pgpass$|\.kube/"
                      r"|\.docker/config\.json|\.config/gh/|\.git-credentials|\.npmrc$"
                      r"|\.pypirc$|\.config/gcloud/|\.azure/"
                      r"|\.local/share/tether(/|$)|Application Support/tether(/|$))")


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
    memory, descriptors), credentials, one of the ``private`` paths (the owner's
    home), or reads them by recursion or a pattern."""
    if s.name == "ps" and any(not a.startswith("-") and "e" in a for a in s.args):
        return "ps e shows the environment of processes"
    flags = flags_of(s.args)
    recursive = s.name in ("rg", "ag", "ack", "rsync", "tar", "zip", "7z") or (
        s.name in ("grep", "egrep", "fgrep", "diff", "zgrep", "cp") and
        bool({"r", "R", "a", "--recursive", "--dereference-recursive", "--archive"} & flags))
    words = list(s.words[1:]) + [r.target for r in s.redirects if r.target] + s.assigns
    for word in words:
        for value in {word, word.split("=", 1)[-1]}:
            path = posixpath.normpath(posixpath.join(cwd or "/", value)) if value else ""
            if _proc(path) or re.search(r"/proc/+([$*?\[\d]|self|thread-self)", value):
                return f"it reads a process's files under /proc ({value})"
            if _SECRETS.search(value):
                return f"it reads credentials ({value})"
            for root in private:
                if path == root or path.startswith(root.rstrip("/") + "/"):
                    return f"it reads the owner's private files ({value})"
            away = outside(value, cwd) if cwd else \
                value.startswith(("/", "~", "$")) or ".." in value.split("/")
            if not value or value.startswith("-") or not away:
                continue
            if re.search(r"[*?\[]", value):
                return f"a pattern outside the working directory may name private files " \
                       f"({value})"
            if recursive and (root_like(value) or any(
                    r == path or r.startswith(path.rstrip("/") + "/") for r in private) or
                    (cwd and posixpath.normpath(cwd).startswith(path.rstrip("/") + "/"))):
                return f"it reads every file under {value}, private ones included"
    return None


def _hard_text(text: str) -> str | None:
    """Why ``text``, run as a shell command, would be on the hard line, or None."""
    if " " not in text.strip():
        return None
    try:
        parsed = parse(text)
    except Unparseable:
        return None
    if parsed.bombs:
        return "a fork bomb"
    return next((why for inner in parsed.commands if (why := hard(inner))), None)


def hard_words(s: Simple) -> str | None:
    """An argument of ``s`` that, run as a shell command, is on the hard line (what a
    wrapper the policy does not know might do with it)."""
    for word in s.args:
        for piece in {word, word.split("=", 1)[-1], word.split("=", 1)[-1].lstrip("!")}:
            why = _hard_text(piece)
            if why:
                return why
    return None
