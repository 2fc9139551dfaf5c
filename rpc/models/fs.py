"""Wire models of the editor as executor of the file tools: fs.offer and fs.respond
(the ``fs.request`` notice they answer is in events.py; docs/acp.md, "The editor's buffers")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Model
from .core import Id

__all__ = ["FS_TEXT_MAX_CHARS", "FsOfferParams", "FsOfferResult", "FsRespondParams",
           "FsRespondResult"]

#: the most text one fs.respond may carry (write_file's own bound)
FS_TEXT_MAX_CHARS = 5_000_000


class FsOfferParams(Model):
    """This connection executes the file tools' reads (``read``) and writes (``write``)
    of ``session_id`` from now on; both false withdraws its offer."""

    session_id: Id
    read: bool = False
    write: bool = False


class FsOfferResult(Model):
    """This connection's offer now held for the session (both false: none of its own)."""

    session_id: str
    read: bool
    write: bool


class FsRespondParams(Model):
    """The answer to one ``fs.request``: ``text`` for a read, nothing for a write done,
    ``error`` when the editor could not (the tool then uses the disk)."""

    request_id: Id
    text: Annotated[str, Field(max_length=FS_TEXT_MAX_CHARS)] | None = None
    error: Annotated[str, Field(max_length=2000)] | None = None


class FsRespondResult(Model):
    """``taken``: the tool got this answer (it was still waiting)."""

    status: Literal["taken"]

