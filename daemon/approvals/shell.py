"""A shell command line as the approval policy sees it (package-internal).

``walk`` reads a command line with bashlex and returns every simple command it
would run: the parts of lists, pipelines, subshells, ``{ }`` groups, ``if`` /
``for`` / ``while`` bodies, function bodies, command and process substitutions;
wrappers.py's ``parse`` then looks into the commands that exec-style wrappers run
(``env``, ``timeout``, ``sudo``, ``xargs``, ``sh -c``, ``eval``, ``busybox``,
``find -exec``, …). A line bashlex cannot parse, or that uses a construct it does
not model, raises ``Unparseable``: the policy then asks.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

import bashlex  # type: ignore[import-untyped]
import bashlex.subst  # type: ignore[import-untyped]

__all__ = ["Simple", "Redirect", "Parsed", "Unparseable", "walk", "rough_split", "options",
           "MAX_DEPTH"]

#: wrappers inside wrappers inside shell strings: deeper than this is refused
MAX_DEPTH = 8
_MAX_LENGTH = 16_000


class Unparseable(Exception):
    """The command line cannot be read reliably (the message says why)."""


@dataclass(frozen=True)
class Redirect:
    op: str  # > >> >| &> >& < << <<< …
    target: str | None  # a path, or None for a descriptor (2>&1, >&-)
    literal: bool = True
    body: str | None = None  # a here-document's text


@dataclass
class Simple:
    """One simple command, with what is known of its words."""

    words: list[str]  # argv; a word that is not literal keeps its source text
    literal: list[bool]  # per word: no parameter, substitution or brace expansion
    text: str  # its own source text, wrappers excluded
    outer: str  # the source text of the simple command it was unwrapped from
    redirects: list[Redirect] = field(default_factory=list)
    assigns: list[str] = field(default_factory=list)  # VAR=value before it or via env
    wrappers: tuple[str, ...] = ()  # the exec-style wrappers around it, outermost first
    #: why what it runs cannot be seen: a shell string or eval that is not a literal,
    #: a program given inline (python -c) or on standard input, words from xargs
    hidden: str | None = None
    code: str | None = None  # an interpreter's inline program (python -c, perl -e, awk)
    writes: list[str] = field(default_factory=list)  # paths its wrappers write (time -o)
    bomb: bool = False  # it comes from a shell string that defines a fork bomb

    @property
    def name(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""

    @property
    def args(self) -> list[str]:
        return self.words[1:]

    def named_literally(self) -> bool:
        return bool(self.literal) and self.literal[0]


@dataclass
class Parsed:
    commands: list[Simple]
    #: the whole line is one simple command: no list, pipe, group, background,
    #: substitution, function or wrapper around another command
    single: bool
    #: functions the line defines whose body runs themselves in a pipeline or in the
    #: background (a fork bomb)
    bombs: list[str] = field(default_factory=list)


def walk(command: str, depth: int = 0) -> Parsed:
    """Every simple command of ``command`` as written, wrappers not yet looked into
    (wrappers.parse does that); raises Unparseable."""
    if depth > MAX_DEPTH:
        raise Unparseable("wrappers and shell strings nested too deep")
    if len(command) > _MAX_LENGTH:
        raise Unparseable("the command is too long to read")
    if "\0" in command:
        raise Unparseable("the command contains a NUL character")
    if not command.strip():
        return Parsed([], False)
    try:
        trees = _bashlex(command)
    except Unparseable:
        # bashlex lacks the `time` keyword and arithmetic `$(( ))`: the keyword blanked
        # out, an arithmetic expansion read as a parameter of the same length (so
        # positions hold: a word that is not a literal), the rest is read as it stands
        blanked = _arithmetic(_TIME.sub(lambda m: m.group(1) + " " * len(m.group(2)),
                                        command))
        if blanked == command:
            raise
        trees = _bashlex(blanked)
        command = blanked
    walker = _Walker(command, depth)
    try:
        for tree in trees:
            walker.node(tree, ())
    except RecursionError:
        raise Unparseable("the command is nested too deep to read") from None
    single = (len(trees) == 1 and trees[0].kind == "command" and len(walker.simples) == 1
              and not walker.nested)
    return Parsed(walker.simples, single, walker.bombs)


_TIME = re.compile(r"(^|[;&|\n(!{]\s*)(time(\s+-p)?)(?=\s)")


def _arithmetic(command: str) -> str:
    """``$((1 + $n))`` → ``$AAAAAAAAAA`` (same length); one holding a command
    substitution is left as it is (and stays unreadable)."""
    out, i = [], 0
    while (start := command.find("$((", i)) >= 0:
        depth, j = 0, start + 1
        while j < len(command):
            depth += {"(": 1, ")": -1}.get(command[j], 0)
            if depth == 0:
                break
            j += 1
        inner = command[start + 3:j - 1]
        if j >= len(command) or command[j - 1] != ")" or "`" in inner or "$(" in inner:
            out.append(command[i:start + 3])
            i = start + 3
            continue
        out.append(command[i:start] + "$" + "A" * (j - start))
        i = j + 1
    return "".join(out) + command[i:]


class _OverBudget(Exception):
    pass


#: function calls bashlex may make for one command line: a few hundred plus up to 30
#: a character for an ordinary one; far more means it is looping (it can, on some
#: malformed input), and the owner's loop must not wait for it
_CALLS_BASE, _CALLS_PER_CHAR = 20_000, 40


def _bashlex(command: str) -> list[Any]:
    """bashlex.parse under a budget of function calls: the policy runs on the owner's
    loop and a command line is the model's to write."""
    calls, limit = 0, _CALLS_BASE + _CALLS_PER_CHAR * len(command)

    def budget(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += 1
        if calls > limit:
            raise _OverBudget
        return None  # no line events: only calls are counted

    previous = sys.gettrace()
    sys.settrace(budget)
    try:
        return list(bashlex.parse(command))
    except _OverBudget:
        raise Unparseable("the shell parser gave up on it (too complex)") from None
    except (bashlex.errors.ParsingError, NotImplementedError, RecursionError, IndexError,
            AttributeError, TypeError, ValueError, AssertionError, KeyError) as exc:
        detail = str(exc).split(" (position")[0].strip() or type(exc).__name__
        raise Unparseable(f"the shell parser cannot read it ({detail})") from None
    finally:
        sys.settrace(previous)


def _guarded_paramexpand(parserobj: Any, string: str, sindex: int) -> Any:
    # bashlex 0.18 loops forever on `${` without a closing `}` in a word
    if string[sindex + 1:sindex + 2] == "{" and string.find("}", sindex + 2) < 0:
        raise bashlex.errors.ParsingError("bad substitution: no closing '}'", string, sindex)
    return _paramexpand(parserobj, string, sindex)


_paramexpand = bashlex.subst._paramexpand
bashlex.subst._paramexpand = _guarded_paramexpand


_NON_LITERAL = {"parameter", "commandsubstitution", "processsubstitution"}
_BRACES = re.compile(r"\{[^{}\s]*(,|\.\.)[^{}\s]*\}")


class _Walker:
    def __init__(self, source: str, depth: int) -> None:
        self.source = source
        self.depth = depth
        self.simples: list[Simple] = []
        self.nested = False  # a substitution or function body was met
        self.bombs: list[str] = []

    def text(self, node: Any) -> str:
        start, end = node.pos
        return self.source[start:end]

    def node(self, node: Any, redirects: tuple[Redirect, ...]) -> None:
        kind = node.kind
        if kind in ("list", "pipeline"):
            for part in node.parts:
                self.node(part, redirects)
        elif kind == "compound":
            extra = tuple(self.redirect(r) for r in getattr(node, "redirects", []))
            for part in node.list:
                self.node(part, redirects + extra)
        elif kind in ("if", "for", "while", "until"):
            for part in node.parts:
                if part.kind == "word":  # for NAME in WORDS: the words' substitutions
                    self.word(part)
                else:
                    self.node(part, redirects)
        elif kind == "function":
            self.nested = True
            before = len(self.simples)
            name = node.name.word
            self.node(node.body, redirects)
            body = self.simples[before:]
            if any(s.words and s.words[0] == name for s in body) and \
                    re.search(r"[|&]", self.text(node.body)):
                self.bombs.append(name)
        elif kind == "command":
            self.command(node, redirects)
        elif kind in ("reservedword", "operator", "pipe"):
            return
        else:
            raise Unparseable(f"the shell parser returned a construct it does not model "
                              f"({kind})")

    def command(self, node: Any, redirects: tuple[Redirect, ...]) -> None:
        words: list[str] = []
        literal: list[bool] = []
        assigns: list[str] = []
        own: list[Redirect] = list(redirects)
        for part in node.parts:
            if part.kind == "word":
                words.append(part.word)
                literal.append(self.word(part) and not _BRACES.search(part.word))
            elif part.kind == "assignment":
                self.word(part)
                if words:  # after the command word: an argument (export X=1)
                    words.append(part.word)
                    literal.append(not part.parts)
                else:
                    assigns.append(part.word)
            elif part.kind == "redirect":
                own.append(self.redirect(part))
            else:
                raise Unparseable(f"the shell parser returned a construct it does not "
                                  f"model ({part.kind})")
        text = self.text(node)
        self.simples.append(Simple(words, literal, text, text, own, assigns))

    def word(self, node: Any) -> bool:
        """Walk the substitutions of a word; whether the word is a literal."""
        literal = True
        for part in getattr(node, "parts", []) or []:
            if part.kind in ("commandsubstitution", "processsubstitution"):
                self.nested = True
                self.node(part.command, ())
            elif part.kind == "parameter":
                value = getattr(part, "value", "") or ""
                found = re.search(r"\$\(|`|<\(|>\(", value)
                if found:
                    # ${x:-$(cmd)}: bashlex leaves the inner substitution unparsed
                    self.nested = True
                    inner = walk("echo " + value[found.start():], self.depth + 1)
                    self.simples.extend(inner.commands)
                    self.bombs.extend(inner.bombs)
            elif part.kind == "tilde":
                continue
            if part.kind in _NON_LITERAL:
                literal = False
        return literal

    def redirect(self, node: Any) -> Redirect:
        op = node.type
        out = node.output
        heredoc = getattr(node, "heredoc", None)
        if heredoc is not None and re.search(r"\$\(|`|\$\{", heredoc.value or ""):
            raise Unparseable("a here-document that expands commands or parameters")
        if isinstance(out, int) or out == "-" or out is None:
            return Redirect(op, None)
        if getattr(out, "kind", "") != "word":
            raise Unparseable("a redirection the shell parser does not model")
        literal = self.word(out)
        if op in ("<<", "<<-"):  # a here-document: data, or a shell's commands
            body = (heredoc.value or "") if heredoc is not None else ""
            return Redirect(op, None, True, body.rsplit("\n", 1)[0] if "\n" in body else "")
        if op == ">&" and out.word.isdigit():
            return Redirect(op, None)
        return Redirect(op, out.word, literal)


_ROUGH = re.compile(r"\|\||&&|[;|\n(){}`]|\$\(|<\(|>\(|(?<![<>])&(?!>)")


def rough_split(command: str) -> list[Simple]:
    """A line the parser cannot read, cut on anything that may separate commands and
    split into words as well as can be (wrappers not yet looked into): only for the
    hard line, which must hold on what the parser refuses too."""
    out: list[Simple] = []
    for part in _ROUGH.split(command):
        part = part.strip()
        if not part:
            continue
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        assigns = []
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            assigns.append(words.pop(0))
        if words:
            out.append(Simple(words, ["$" not in w for w in words], part, part, [], assigns))
    return out


def options(words: list[str], start: int, short_arg: str, long_arg: set[str],
            optional: str = "") -> tuple[list[tuple[str, str | None, int]], int]:
    """Options from ``words[start:]``: (flag, value, index of the value's word) and the
    index of the first operand. ``--`` ends them; a lone ``-`` is an operand."""
    opts: list[tuple[str, str | None, int]] = []
    i = start
    while i < len(words):
        word = words[i]
        if word == "--":
            return opts, i + 1
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if name in long_arg and not eq and i + 1 < len(words):
                opts.append((name, words[i + 1], i + 1))
                i += 2
                continue
            opts.append((name, value if eq else None, i))
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            break
        for j in range(1, len(word)):
            ch = word[j]
            if ch in short_arg or ch in optional:
                rest = word[j + 1:]
                if rest or ch in optional:
                    opts.append(("-" + ch, rest, i))
                elif i + 1 < len(words):
                    i += 1
                    opts.append(("-" + ch, words[i], i))
                else:
                    opts.append(("-" + ch, "", i))
                break
            opts.append(("-" + ch, None, i))
        i += 1
    return opts, i
