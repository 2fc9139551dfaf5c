"""Wire models of long sessions: fork, export (and the export document), compaction.

docs/long-sessions.md says what each does; methods.py puts them in the one
method table. The export document is a model too, so `tether schema` says
what a program that loads an export gets.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..protocol import MAX_SEQ
from .core import Id, Model, Outcome, TranscriptMessage
from .usage import SessionUsage

__all__ = ["EXPORT_FORMAT", "ExportApproval", "ExportCompaction", "ExportDelegation",
           "ExportDocument", "ExportMessage", "ExportSession", "ExportToolCall", "ExportTurn",
           "SessionCompactParams", "SessionCompactResult", "SessionExportParams",
           "SessionExportResult", "SessionForkParams", "SessionForkResult"]

#: ``format`` of every export document (its ``version`` says which shape)
EXPORT_FORMAT = "tether.session"


class SessionForkParams(Model):
    """Fork ``session_id`` at event ``at_seq`` (default: its last): the new session's
    history is every turn that had ended by then."""

    session_id: Id
    at_seq: Annotated[int, Field(ge=0, le=MAX_SEQ)] | None = None


class SessionForkResult(Model):
    session_id: str = Field(description="the new session")
    forked_from: str
    forked_at_seq: int = Field(description=(
        "the seq of the last turn end the fork holds (at most at_seq; 0: none)"))
    message_count: int
    compactions: int = Field(description="compaction records copied with the messages")


class SessionExportParams(Model):
    session_id: Id
    format: Literal["markdown", "json"] = "json"


class ExportMessage(TranscriptMessage):
    """A transcript message with its position (compactions and turns refer to it)."""

    index: int


class ExportToolCall(Model):
    call_id: str
    name: str
    arguments: str = Field(description="the JSON text the model wrote, verbatim")
    result: str | None = Field(description="the whole result the model was given "
                                           "(null: the call never returned)")
    error: str | None = None


class ExportApproval(Model):
    approval_id: str
    tool: str
    kind: str
    subject: str
    why: str
    status: str = Field(description="pending, approved, denied, expired or cancelled")
    decision: str | None = None
    cause: str | None = None
    reason: str | None = None


class ExportDelegation(Model):
    child_session_id: str | None
    task_index: int | None
    goal: str | None = None
    status: str | None = None
    summary: str | None = None
    delegation_id: str | None = None


class ExportTurn(Model):
    """One admission, from its start to its outcome."""

    admission_id: str
    input_id: str | None = None
    principal: str | None = None
    prompt: str | None = Field(description="the whole prompt (null: it never ran)")
    answer: str
    outcome: Outcome | None = Field(description="null: still running when exported")
    error: str | None = None
    usage: dict[str, int] = {}
    model: str | None = None
    cost_usd: float | None = None
    start_seq: int | None = None
    end_seq: int | None = None
    tool_calls: list[ExportToolCall] = []
    approvals: list[ExportApproval] = []
    delegations: list[ExportDelegation] = []


class ExportCompaction(Model):
    compaction_id: str
    first_index: int
    end_index: int
    summary: str
    model: str
    tokens_before: int
    tokens_after: int
    kind: Literal["auto", "manual"]
    focus: str | None
    usage: dict[str, int]
    created_at: float


class ExportSession(Model):
    session_id: str
    title: str | None
    source: str | None
    cwd: str | None
    model: str | None
    provider: str | None
    created_at: float
    parent_session_id: str | None
    forked_from: str | None
    forked_at_seq: int | None
    usage: SessionUsage


class ExportDocument(Model):
    """A whole session as a program loads it: every turn, the whole transcript (its
    messages in order, tool results whole), the compactions, and the totals."""

    format: Literal["tether.session"]
    version: Literal[1]
    exported_at: float
    last_seq: int
    session: ExportSession
    turns: list[ExportTurn]
    compactions: list[ExportCompaction]
    messages: list[ExportMessage]


class SessionExportResult(Model):
    """``document`` for format json, ``markdown`` for format markdown."""

    format: Literal["markdown", "json"]
    document: ExportDocument | None = None
    markdown: str | None = None


class SessionCompactParams(Model):
    session_id: Id
    focus: Annotated[str, Field(min_length=1, max_length=2000)] | None = Field(
        default=None, description="what the summary must keep, in a few words")


class SessionCompactResult(Model):
    """``compacted`` false: nothing to summarise (``reason`` says why)."""

    compacted: bool
    compaction: ExportCompaction | None = None
    reason: str | None = None
