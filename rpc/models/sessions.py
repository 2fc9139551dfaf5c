"""Wire models of session management: rename, delete, prune, lookup by id prefix.

Kept apart from models.py so this feature's additions stay in one place;
methods.py imports them into the one method table. Also the payload model of
``message.start`` (documented here; events keep a plain ``payload`` dict on
the wire so older clients survive newer keys).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .core import Id, Model, SessionSummary

__all__ = [
    "MessageStartPayload",
    "SessionDeleteParams",
    "SessionDeleteResult",
    "SessionLookupParams",
    "SessionLookupResult",
    "SessionPruneParams",
    "SessionPruneResult",
    "SessionRenameParams",
    "SessionRenameResult",
]

Title = Annotated[str, Field(min_length=1, max_length=200)]


class MessageStartPayload(Model):
    """``message.start``: a turn begins. ``text`` is the prompt that was asked (its
    first 4000 characters; ``text_truncated`` true when it was cut), ``input_id``
    the submitter's idempotency key and ``principal`` who submitted it (``local``
    for the Unix socket, a token id over TCP, ``delegation`` for results delivered
    by the owner). All but ``admission_id`` are absent from events written by an
    owner older than this field."""

    admission_id: str
    input_id: str | None = None
    principal: str | None = None
    text: str | None = None
    text_truncated: bool | None = None


class SessionRenameParams(Model):
    session_id: Id
    title: Title


class SessionRenameResult(Model):
    session_id: str
    title: str


class SessionDeleteParams(Model):
    session_id: Id
    #: delete even while other viewers follow the session (refused otherwise)
    force: bool = False


class SessionDeleteResult(Model):
    #: the session and the delegation child sessions deleted with it
    deleted: list[str]


class SessionPruneParams(Model):
    #: only sessions created at least this long ago (a chat being opened is spared)
    older_than_seconds: Annotated[float, Field(ge=0, le=10 * 365 * 86400)] = 3600.0
    dry_run: bool = False


class SessionPruneResult(Model):
    #: empty sessions (no message, no admission, no child) removed, or that would be
    pruned: list[str]


class SessionLookupParams(Model):
    """Exactly one of ``prefix`` (a session id or its start, with or without the
    ``ses_``) and ``last`` (the most recently active top-level session with
    messages whose source is not automated: not cron, the HTTP endpoint, a helper)."""

    prefix: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    last: bool = False


class SessionLookupResult(Model):
    #: at most 10 matches, exact match first; more is true when there were others
    matches: list[SessionSummary]
    more: bool
