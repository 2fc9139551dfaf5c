"""The error every config section raises, and pydantic's validation errors said in
config.yaml's words: each names the file and the key path as written
(``config.yaml: `daemon.max_turns` must be at least 1``), an unknown key with the
nearest valid one. Re-exported by ``config``."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

__all__ = ["ConfigError", "unknown_key", "problems", "one_of"]


class ConfigError(Exception):
    """config.yaml is unreadable or has bad keys/values: ``errors`` holds every one
    found (the message is them, one a line)."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or [message]


_ALIASES = {"name": "default", "model": "default", "model_name": "default", "url": "base_url",
            "key": "api_key", "apikey": "api_key", "endpoint": "base_url"}


def unknown_key(key: Any, known: list[str], where: str) -> str:
    """An unknown key, named with the nearest valid one."""
    text = str(key)
    near = _ALIASES.get(text.lower()) if _ALIASES.get(text.lower()) in known else None
    if near is None:
        close = difflib.get_close_matches(text.lower(), known, n=1, cutoff=0.6)
        near = close[0] if close else None
    hint = f"; did you mean `{near}`?" if near else f"; valid keys: {', '.join(known)}"
    return f"unknown key `{where}{text}`{hint}"


def one_of(*choices: str) -> Callable[[str], str]:
    """An after-validator: the value is one of ``choices`` (a list kept elsewhere)."""

    def check(value: str) -> str:
        if value not in choices:
            raise ValueError(f"must be {_alternatives(choices)}, not {value!r}")
        return value

    return check


def _alternatives(choices: tuple[str, ...] | list[str]) -> str:
    return ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]


def _plain(hint: Any) -> Any:
    """The class a type hint validates into, through Annotated and ``X | None``."""
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        return _plain(hint)
    return hint


def _hints(cls: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except TypeError:
        return {}


def _walk(root: type, loc: tuple[Any, ...]) -> tuple[Any, Any]:
    """(the class holding the last key of ``loc``, that key's type hint)."""
    holder: Any = root
    hint: Any = None
    for part in loc:
        plain = _plain(hint) if hint is not None else holder
        origin = typing.get_origin(plain)
        if origin in (tuple, list, dict):  # an item: of a list, or a mapping's value
            hint = typing.get_args(plain)[-1 if origin is dict else 0]
            continue
        holder, hint = plain, _hints(plain).get(part)
    return holder, hint


def _keys(cls: Any) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return list(_hints(cls))


def _meta(hint: Any) -> tuple[dict[str, Any], str]:
    """The bounds (ge, gt, le, lt) and the description a field's type carries."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None: X's
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    bounds: dict[str, Any] = {}
    why = ""
    for meta in typing.get_args(hint)[1:] if typing.get_origin(hint) is typing.Annotated else ():
        for item in (meta, *getattr(meta, "metadata", ())):  # Field(ge=) keeps them inside
            for name in ("ge", "gt", "le", "lt"):
                if getattr(item, name, None) is not None:
                    bounds[name] = getattr(item, name)
        why = getattr(meta, "description", None) or why
    return bounds, why


_KINDS = {"int_type": "a whole number", "float_type": "a number", "string_type": "a string",
          "bool_type": "true or false", "tuple_type": "a list of strings",
          "list_type": "a list of strings", "dict_type": "a mapping",
          "dataclass_type": "a mapping", "model_type": "a mapping"}


def _say(err: Any, root: type, loc: tuple[Any, ...], shown: str) -> str:
    kind, value = err["type"], err.get("input")
    holder, hint = _walk(root, loc)
    if kind in ("unexpected_keyword_argument", "extra_forbidden", "invalid_key"):
        extra = root_sections(root) if len(loc) == 1 else []
        parent = shown.rpartition(".")[0]
        return unknown_key(loc[-1], _keys(holder) + extra, f"{parent}." if parent else "")
    if kind == "missing":
        parent, _, key = shown.rpartition(".")
        return f"`{parent}` needs `{key}`"
    if kind in _KINDS:
        return f"`{shown}` must be {_KINDS[kind]}, not {value!r}"
    if kind == "literal_error":
        choices = [c.strip().strip("'") for c in
                   err["ctx"]["expected"].replace(" or ", ", ").split(", ")]
        return f"`{shown}` must be {_alternatives(choices)}, not {value!r}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        b, why = _meta(hint)
        low = f"at least {b['ge']}" if "ge" in b else f"more than {b['gt']}" if "gt" in b else ""
        if "le" in b and ("ge" in b):
            said = f"from {b['ge']} to {b['le']}"
        else:
            said = low or (f"at most {b['le']}" if "le" in b else f"less than {b.get('lt')}")
        return f"`{shown}` must be {said}" + (f" ({why})" if why else "")
    if kind in ("value_error", "assertion_error"):
        said = str(err["ctx"]["error"])
        return f"`{shown}`{':' if said.startswith('`') else ''} {said}"
    return f"`{shown}`: {err['msg']}"  # a kind this file never meets; pydantic's words


def root_sections(root: type) -> list[str]:
    """Top-level keys read elsewhere, which the root accepts by name (``OTHER_SECTIONS``)."""
    return list(getattr(root, "OTHER_SECTIONS", ()))


def _path(loc: tuple[Any, ...], raw: Any) -> tuple[list[str], list[int]]:
    """``loc`` as the keys written in ``raw`` (a mapping validated as a list, as
    ``mcp.servers``, gives its keys back), and each key's place in its mapping."""
    parts, places, node = [], [], raw
    for part in loc:
        if isinstance(part, int) and isinstance(node, dict) and part < len(node):
            part = list(node)[part]
        keys = list(node) if isinstance(node, dict) else []
        places.append(keys.index(part) if part in keys else len(keys))
        parts.append(str(part))
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
    return parts, places


def problems(exc: ValidationError, root: type, raw: Any, *, within: tuple[Any, ...] = (),
             file: str = "config.yaml") -> list[str]:
    """Each error of ``exc`` (validating ``raw`` as ``root``) as one line naming the
    file and the key path, in the order of ``root``'s fields, then as written."""
    order = _keys(root)
    found = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        parts, places = _path(loc, raw)
        if loc[-1:] == ("name",) and err["type"] == "value_error" and (
                len(loc) == 1 or isinstance(loc[-2], int)):
            # a server's name is its key: say so rather than a `name` key never written
            shown = ".".join((*map(str, within), *parts[:-1])).rpartition(".")[0]
            line = f"`{shown}` name {err['input']!r} {err['ctx']['error']}"
        else:
            shown = ".".join((*map(str, within), *parts))
            line = _say(err, root, loc, shown)
        section = order.index(loc[0]) if loc and loc[0] in order else -1
        found.append(((section, places), f"{file}: {line}"))
    return [line for _, line in sorted(found, key=lambda f: f[0])]
