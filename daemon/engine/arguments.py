"""A tool's arguments as one pydantic model: the JSON Schema the model is offered
and the validation of each call, from the same class.

``Arguments`` is the base (unknown arguments refused, types strict: JSON gives
exact types, so "2" is not a number and 1 is not true). ``ArgumentsOf(model)``
builds the schema once, when a tool is defined, cleaned to the shape chat APIs
take for function parameters: no ``title``s, no ``$ref`` (nested models inlined),
an optional argument's ``null`` branch and its default left out, descriptions
and bounds kept. ``parse(args)`` returns the model or raises ``BadArguments``,
whose message names each bad argument in words a model can act on
(``\\`offset\\` must be at least 1``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["Arguments", "ArgumentsOf", "BadArguments", "clean_schema", "non_blank"]


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BadArguments(ValueError):
    """A call's arguments do not fit its tool's schema (the message says how)."""


M = TypeVar("M", bound=BaseModel)


def non_blank(value: str) -> str:
    """An after-validator: the string has more than whitespace in it."""
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (pydantic's) in the shape offered to a model (see the module doc)."""
    defs = schema.get("$defs", {})

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            node = {**defs[node["$ref"].rsplit("/", 1)[-1]],
                    **{k: v for k, v in node.items() if k != "$ref"}}
        branches = node.get("anyOf")
        if branches and {"type": "null"} in branches:  # optional: not required is enough
            rest = [b for b in branches if b != {"type": "null"}]
            inner = rest[0] if len(rest) == 1 else {"anyOf": rest}
            node = {**{k: v for k, v in node.items() if k != "anyOf"}, **clean(inner)}
        out = {}
        for key, value in node.items():
            if key in ("title", "$defs", "default"):
                continue
            out[key] = ({k: clean(v) for k, v in value.items()} if key == "properties"
                        else clean(value))
        return out

    out = clean(schema)
    out.pop("description", None)  # the tool's own description says it
    return dict(out)


_KINDS = {"string_type": "a string", "int_type": "an integer", "float_type": "a number",
          "bool_type": "true or false", "list_type": "a list", "model_type": "an object",
          "dict_type": "an object", "model_attributes_type": "an object"}
_BOUNDS = {"greater_than_equal": ("ge", "at least {}"), "greater_than": ("gt", "more than {}"),
           "less_than_equal": ("le", "at most {}"), "less_than": ("lt", "less than {}")}


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _known(schema: dict[str, Any], loc: tuple[Any, ...]) -> list[str]:
    node = schema
    for part in loc:
        node = node.get("items", {}) if isinstance(part, int) else \
            node.get("properties", {}).get(part, {})
    return list(node.get("properties", {}))


def _say(err: Any, schema: dict[str, Any]) -> str:
    loc, kind, ctx = tuple(err["loc"]), err["type"], err.get("ctx") or {}
    at = f"`{_path(loc)}`" if loc else "the arguments"
    if kind == "extra_forbidden":
        return (f"{at} is not an argument here (known: "
                f"{', '.join(_known(schema, loc[:-1]))})")
    if kind == "missing":
        return f"{at} is required"
    if kind in _KINDS:
        return f"{at} must be {_KINDS[kind]}"
    if kind == "literal_error":
        return f"{at} must be one of {ctx['expected'].replace(chr(39), '')}"
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        return f"{at} must be {words.format(ctx[name])}"
    if kind in ("too_short", "string_too_short"):
        return f"{at} must not be empty" if ctx.get("min_length") == 1 else \
            f"{at} must have at least {ctx.get('min_length')} items"
    if kind in ("too_long", "string_too_long"):
        what = "characters" if kind == "string_too_long" else "items"
        return f"{at} must have at most {ctx.get('max_length')} {what}"
    if kind in ("value_error", "assertion_error"):
        said = str(ctx.get("error", err["msg"]))
        return f"{at} {said}" if loc else said
    return f"{at}: {err['msg']}"


class ArgumentsOf(Generic[M]):
    """A tool's argument model with its schema, built once."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.schema = clean_schema(model.model_json_schema())

    def parse(self, args: Any) -> M:
        try:
            return self.model.model_validate(args)
        except ValidationError as exc:
            said = [_say(e, self.schema) for e in exc.errors(include_url=False)]
            raise BadArguments("; ".join(said)) from None
