"""The value types config sections are built of: strict as YAML gives them (a
string is not a number, ``yes`` is not true, 1 is not true), lists read as tuples,
numbers never negative unless a section asks for more."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict

__all__ = ["Bool", "Str", "Strs", "Count", "AtLeastOne", "Number", "Positive"]

Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
#: a YAML list of strings (a tuple, so the section stays immutable)
Strs = tuple[Str, ...]
#: a whole number, 0 or more
Count = Annotated[int, Strict(), Field(ge=0)]
AtLeastOne = Annotated[int, Strict(), Field(ge=1)]
#: an int or a float, kept as float, 0 or more
Number = Annotated[float, Strict(), Field(ge=0)]
#: seconds and the like that must be more than 0
Positive = Annotated[float, Strict(), Field(gt=0)]
