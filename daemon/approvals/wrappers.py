"""Exec-style wrappers looked into (package-internal; see shell.py).

``unwrap`` turns one simple command into the commands it runs: ``timeout -s KILL 5
rm -rf /`` is ``rm -rf /`` with the wrapper ``timeout`` recorded; ``sh -c '…'``,
``eval …``, ``env -S'…'`` and the like are parsed again; ``find -exec``, ``xargs``,
``sort --compress-program`` and ``rg --pre`` add the command they run beside
themselves. An interpreter's inline program (``python -c``, ``perl -e``) is kept
as ``code``; one the policy cannot see at all (a shell string that is not a
literal, a program on standard input) is marked ``hidden``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import replace

from .interpreters import AWKS, SHELLS, awk, interpreter, run_inline
from .shell import MAX_DEPTH, Parsed, Simple, Unparseable, options, rough_split, walk

__all__ = ["parse", "rough", "unwrap"]

_Handler = Callable[[Simple, int, list[Simple]], None]
def parse(command: str, depth: int = 0) -> Parsed:
    """Every simple command ``command`` would run, wrappers looked into (raises
    Unparseable)."""
    walked = walk(command, depth)
    out: list[Simple] = []
    for simple in walked.commands:
        out.extend(unwrap(simple, depth))
    single = walked.single and len(out) == 1 and not out[0].wrappers
    return Parsed(out, single, walked.bombs)


def rough(command: str) -> list[Simple]:
    """A line the parser cannot read, cut roughly (shell.rough), wrappers looked into
    where they can be."""
    out: list[Simple] = []
    for simple in rough_split(command):
        try:
            out.extend(unwrap(simple, 0))
        except Unparseable:
            out.append(simple)
    return out


def unwrap(simple: Simple, depth: int) -> list[Simple]:
    out: list[Simple] = []
    _unwrap(simple, depth, out)
    return out


def _inner(s: Simple, start: int, label: str, depth: int, out: list[Simple], *,
           words: list[str] | None = None, literal: list[bool] | None = None,
           assigns: list[str] | None = None, writes: list[str] | None = None,
           hidden: str | None = None) -> None:
    """Unwrap the command at ``s.words[start:]`` (or ``words``) run by ``label``."""
    w = s.words[start:] if words is None else words
    lit = s.literal[start:] if literal is None else literal
    inner = replace(s, words=w, literal=lit, text=" ".join(w),
                    assigns=s.assigns + (assigns or []), wrappers=s.wrappers + (label,),
                    hidden=s.hidden or hidden, writes=s.writes + (writes or []), code=None)
    _unwrap(inner, depth + 1, out)


def _shell_string(s: Simple, code: str, literal: bool, label: str, depth: int,
                  out: list[Simple]) -> None:
    """The commands a shell string runs (sh -c, eval, su -c, watch, trap, alias)."""
    if not literal:
        out.append(replace(s, hidden=f"{label} runs a string that is not a literal"))
        return
    parsed = parse(code, depth + 1)
    for inner in parsed.commands:
        out.append(replace(inner, outer=s.outer, redirects=s.redirects + inner.redirects,
                           bomb=inner.bomb or bool(parsed.bombs),
                           assigns=s.assigns + inner.assigns,
                           wrappers=s.wrappers + (label,) + inner.wrappers,
                           hidden=s.hidden or inner.hidden, writes=s.writes + inner.writes))


def _unwrap(s: Simple, depth: int, out: list[Simple]) -> None:
    if depth > MAX_DEPTH * 2:
        raise Unparseable("wrappers nested too deep")
    if s.words and s.literal[0] and re.search(r"[*?\[]", s.words[0]):
        s = replace(s, literal=[False, *s.literal[1:]])  # /???/?m: a pathname expansion
    if not s.words or not s.literal[0]:
        out.append(s)
        return
    name = s.name
    handler = _HANDLERS.get(name)
    if handler is not None:
        handler(s, depth, out)
        return
    if name in SHELLS:
        _shell(s, depth, out)
    elif interpreter(name):
        out.append(run_inline(s, interpreter(name) or name))
    elif name in AWKS:
        out.append(awk(s))
    else:
        out.append(s)


def _generic(short_arg: str, long_arg: set[str], operands: int = 0, optional: str = "",
             none_if: str = "") -> _Handler:
    """A wrapper of the shape ``NAME [OPTIONS] [N OPERANDS] COMMAND [ARGS]``."""
    def handler(s: Simple, depth: int, out: list[Simple]) -> None:
        opts, i = options(s.words, 1, short_arg, long_arg, optional)
        flags = {f for f, _, _ in opts}
        i += operands
        writes = [v for f, v, _ in opts if f in ("-o", "--output") and v and s.name in
                  ("time", "strace", "ltrace")]
        if i >= len(s.words) or flags & {"-" + c for c in none_if}:
            out.append(s)  # no command: the wrapper alone
            return
        hidden = None if all(s.literal[1:i]) else f"an argument of {s.name} is not a literal"
        _inner(s, i, s.name, depth, out, writes=writes, hidden=hidden)
    return handler


def _env(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "uCS", {"--unset", "--chdir", "--split-string"})
    split = [(v, idx) for f, v, idx in opts if f in ("-S", "--split-string")]
    if split:
        value, idx = split[0]
        try:
            words = shlex.split(value or "")
        except ValueError:
            raise Unparseable("env -S with a string it cannot split") from None
        lit = s.literal[idx] and "$" not in (value or "")
        rest = s.words[i:]
        again = replace(s, words=["env", *words, *rest],
                        literal=[True] + [lit] * len(words) + s.literal[i:])
        _env(again, depth + 1, out)
        return
    assigns = []
    while i < len(s.words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", s.words[i]):
        assigns.append(s.words[i])
        i += 1
    if i >= len(s.words):
        out.append(replace(s, assigns=s.assigns + assigns))
        return
    _inner(s, i, "env", depth, out, assigns=assigns)


def _sudo(s: Simple, depth: int, out: list[Simple]) -> None:
    if s.name == "doas":
        opts, i = options(s.words, 1, "uC", set())
    else:
        opts, i = options(s.words, 1, "ughpCDrtTUR",
                           {"--user", "--group", "--host", "--prompt", "--close-from",
                            "--chdir", "--role", "--type", "--command-timeout",
                            "--other-user", "--chroot"})
    flags = {f for f, _, _ in opts}
    assigns = []
    while i < len(s.words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", s.words[i]):
        assigns.append(s.words[i])
        i += 1
    if i >= len(s.words) or flags & {"-e", "--edit", "-l", "--list", "-v", "-k", "-K"}:
        out.append(s)
        return
    _inner(s, i, s.name, depth, out, assigns=assigns)


def _xargs(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "adEILnPs",
                       {"--arg-file", "--delimiter", "--max-args", "--max-procs",
                        "--max-chars", "--process-slot-var"}, optional="eil")
    replace_str = None
    for flag, value, _ in opts:
        if flag == "-I":
            replace_str = value
        elif flag in ("-i", "--replace"):
            replace_str = value or "{}"
    words = s.words[i:] or ["echo"]
    literal = s.literal[i:] or [True]
    if replace_str:
        literal = [lit and replace_str not in w for w, lit in zip(words, literal, strict=True)]
    _inner(s, 0, "xargs", depth, out, words=words, literal=literal)


def _shell(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "oO", {"--rcfile", "--init-file"})
    if any(f == "-c" for f, _, _ in opts):
        if i < len(s.words):
            _shell_string(s, s.words[i], s.literal[i], f"{s.name} -c", depth, out)
        else:
            out.append(s)
        return
    if i >= len(s.words) or any(f == "-s" for f, _, _ in opts):
        for r in s.redirects:  # bash <<EOF … EOF, bash <<< '…': commands in the line
            if r.op in ("<<", "<<-", "<<<"):
                text = r.body if r.body is not None else r.target
                _shell_string(replace(s, redirects=[]), text or "", r.literal,
                              f"{s.name} {r.op}", depth, out)
                return
        out.append(replace(s, hidden=f"{s.name} reads its commands from standard input"))
    else:
        out.append(s)  # a script file


def _eval(s: Simple, depth: int, out: list[Simple]) -> None:
    if len(s.words) > 1:
        _shell_string(s, " ".join(s.words[1:]), all(s.literal[1:]), "eval", depth, out)
    else:
        out.append(s)


def _su(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "csgGuw",
                       {"--command", "--shell", "--group", "--supp-group", "--user",
                        "--session-command", "--whitelist-environment"})
    for flag, value, idx in opts:
        if flag in ("-c", "--command", "--session-command"):
            _shell_string(s, value or "", s.literal[idx], f"{s.name} -c", depth, out)
            return
    user = any(f in ("-u", "--user") for f, _, _ in opts)
    if user and i < len(s.words):
        _inner(s, i, s.name, depth, out)
    else:
        out.append(replace(s, hidden=f"{s.name} starts a shell"))


def _watch(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "n", {"--interval"}, optional="d")
    if i >= len(s.words):
        out.append(s)
    elif any(f in ("-x", "--exec") for f, _, _ in opts):
        _inner(s, i, "watch", depth, out)
    else:
        _shell_string(s, " ".join(s.words[i:]), all(s.literal[i:]), "watch", depth, out)


def _flock(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "wEc", {"--timeout", "--conflict-exit-code", "--command"})
    for flag, value, idx in opts:
        if flag in ("-c", "--command"):
            _shell_string(s, value or "", s.literal[idx], "flock -c", depth, out)
            return
    if i + 1 < len(s.words):
        if s.words[i + 1] in ("-c", "--command") and i + 2 < len(s.words):
            _shell_string(s, s.words[i + 2], s.literal[i + 2], "flock -c", depth, out)
        else:
            _inner(s, i + 1, "flock", depth, out)
    else:
        out.append(s)


def _chroot(s: Simple, depth: int, out: list[Simple]) -> None:
    _, i = options(s.words, 1, "", {"--userspec", "--groups"})
    if i + 1 < len(s.words):
        _inner(s, i + 1, "chroot", depth, out)
    else:
        out.append(replace(s, hidden="chroot starts a shell"))


def _script(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "cEeIOTtBm", {"--command", "--log-io", "--log-out",
                                                 "--log-in", "--log-timing", "--timing"})
    writes = s.words[i:i + 1] or ["typescript"]
    for flag, value, idx in opts:
        if flag in ("-c", "--command"):
            _shell_string(replace(s, writes=s.writes + writes), value or "", s.literal[idx],
                          "script -c", depth, out)
            return
    out.append(replace(s, writes=s.writes + writes, hidden="script starts a shell"))


def _busybox(s: Simple, depth: int, out: list[Simple]) -> None:
    if len(s.words) > 1 and not s.words[1].startswith("-"):
        _inner(s, 1, "busybox", depth, out)
    else:
        out.append(s)


def _find(s: Simple, depth: int, out: list[Simple]) -> None:
    writes: list[str] = []
    i = 1
    while i < len(s.words):
        word = s.words[i]
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(s.words) and s.words[end] not in (";", "+"):
                end += 1
            words = s.words[i + 1:end]
            literal = [lit and "{}" not in w
                       for w, lit in zip(words, s.literal[i + 1:end], strict=True)]
            if words:
                _inner(replace(s, redirects=[]), 0, f"find {word}", depth, out,
                       words=words, literal=literal)
            i = end + 1
            continue
        if word in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(s.words):
            writes.append(s.words[i + 1])
        i += 1
    out.append(replace(s, writes=s.writes + writes))


def _adds_program(flags: set[str], label: str) -> _Handler:
    """A command that runs another one given as an option's value (sort
    --compress-program, rg --pre): itself, and that program."""
    def handler(s: Simple, depth: int, out: list[Simple]) -> None:
        for i, word in enumerate(s.words[1:], 1):
            name, eq, value = word.partition("=")
            if name in flags:
                index = i if eq else i + 1
                if not eq:
                    value = s.words[i + 1] if i + 1 < len(s.words) else ""
                lit = s.literal[index] if index < len(s.literal) else True
                _inner(replace(s, redirects=[]), 0, label, depth, out, words=[value],
                       literal=[lit])
        out.append(s)
    return handler


def _trap(s: Simple, depth: int, out: list[Simple]) -> None:
    if len(s.words) > 2 and not s.words[1].startswith("-"):
        _shell_string(s, s.words[1], s.literal[1], "trap", depth, out)
    out.append(s)


def _alias(s: Simple, depth: int, out: list[Simple]) -> None:
    for word, lit in zip(s.words[1:], s.literal[1:], strict=True):
        if "=" in word:
            _shell_string(s, word.split("=", 1)[1], lit, "alias", depth, out)
    out.append(s)


def _command(s: Simple, depth: int, out: list[Simple]) -> None:
    opts, i = options(s.words, 1, "", set())
    if {f for f, _, _ in opts} & {"-v", "-V"} or i >= len(s.words):
        out.append(s)  # a lookup, runs nothing
    else:
        _inner(s, i, "command", depth, out)


_HANDLERS: dict[str, _Handler] = {
    "env": _env,
    "sudo": _sudo, "doas": _sudo,
    "xargs": _xargs,
    "eval": _eval,
    "su": _su, "runuser": _su,
    "watch": _watch,
    "flock": _flock,
    "chroot": _chroot,
    "script": _script,
    "busybox": _busybox,
    "find": _find,
    "trap": _trap,
    "alias": _alias,
    "command": _command,
    "builtin": _generic("", set()),
    "timeout": _generic("sk", {"--signal", "--kill-after"}, operands=1),
    "nice": _generic("n", {"--adjustment"}),
    "ionice": _generic("cnpPu", {"--class", "--classdata", "--pid", "--pgid", "--uid"},
                       none_if="pPu"),
    "nohup": _generic("", set()),
    "setsid": _generic("", set()),
    "stdbuf": _generic("ioe", {"--input", "--output", "--error"}),
    "time": _generic("fo", {"--format", "--output"}),
    "exec": _generic("a", set()),
    "unshare": _generic("SGRwt", {"--setuid", "--setgid", "--root", "--wd"}),
    "nsenter": _generic("tSGTwr", {"--target", "--setuid", "--setgid"}),
    "strace": _generic("oepsuEabIOPSX", {"--output", "--trace", "--attach", "--user"},
                       none_if="p"),
    "ltrace": _generic("oepsuEabIOPSX", {"--output"}, none_if="p"),
    "taskset": _generic("", set(), operands=1),
    "chrt": _generic("", set(), operands=1),
    "sort": _adds_program({"--compress-program"}, "sort --compress-program"),
    "rg": _adds_program({"--pre"}, "rg --pre"),
}
