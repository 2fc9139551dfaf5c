"""Pydantic models of every method's params and result, and of the event envelope.

Params are validated strictly (SPEC §2): unknown keys, missing required keys and
wrong JSON types are errors, and nothing is coerced (``"true"`` is not a bool,
``1`` is not a string, ``1.0`` is not an int). Timestamps are floats of unix
seconds. Ids are non-empty strings of at most 200 characters.

Result models are built by the daemon from plain keyword arguments, nested values
as plain dicts (store rows): validation runs once, in pydantic-core. On a 200-message
snapshot that is ~2x faster than building nested models first and ~5x faster than
``model_construct`` (which also warns when serialising dicts where models belong).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from ..protocol import MAX_ATTACHMENTS, MAX_ID_CHARS, MAX_SEQ, MAX_TEXT_CHARS
from .base import Model
from .mcp import McpServerInfo
from .usage import ContextFill, SessionUsage

__all__ = ["TURN_OPTION_FIELDS", "Attachment", "Event", "EventsSinceResult", "InterruptResult",
           "Model", "OkResult", "PendingAdmission", "PingParams", "PingResult",
           "PromptCancelParams", "PromptReceiptParams", "PromptResolveUnknownParams",
           "PromptSubmitParams", "Receipt", "RuntimeDescribeParams", "RuntimeDescribeResult",
           "RuntimeShutdownParams", "SessionCreateParams", "SessionDetachParams",
           "SessionEventsSinceParams", "SessionInfo", "SessionInterruptParams",
           "SessionListParams", "SessionListResult", "SessionResumeParams", "SessionSummary",
           "ShutdownResult", "Snapshot", "TokenCreateParams", "TokenCreateResult",
           "TranscriptMessage", "TurnDefaults", "TurnOptions", "TurnResult"]

Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
Timestamp = float  # unix seconds
ToolsetName = Annotated[str, Field(max_length=64, description=(
    "terminal, files, delegation or mcp (runtime.describe lists them)"))]

Reasoning = Literal["none", "low", "medium", "high"]
SandboxMode = Literal["workspace-write", "read-only", "off"]
Status = Literal["queued", "started", "unknown", "terminal"]
Outcome = Literal["completed", "failed", "cancelled", "interrupted"]
Role = Literal["user", "assistant", "tool", "system"]



# --------------------------------------------------------------------------- params


class TurnOptions(Model):
    """Per-turn options accepted by session.create (as session defaults) and prompt.submit.

    ``None`` means "not sent": the daemon falls back to session, environment,
    config and built-in defaults, in that order (SPEC §9).
    """

    # The length caps are not in SPEC; they only keep one frame from carrying
    # absurd values into the ledger's canonical payload.
    provider: Annotated[str, Field(max_length=64)] | None = None
    model: Annotated[str, Field(max_length=256)] | None = None
    base_url: Annotated[str, Field(max_length=2048)] | None = None
    toolsets: Annotated[list[ToolsetName], Field(max_length=64)] | None = None
    reasoning: Reasoning | None = None
    max_turns: Annotated[int, Field(ge=1, le=200)] | None = None
    ignore_rules: bool | None = None
    sandbox: SandboxMode | None = None  # never looser than the owner's sandbox.mode


TURN_OPTION_FIELDS: tuple[str, ...] = ("provider", "model", "base_url", "toolsets", "reasoning",
                                       "max_turns", "ignore_rules", "sandbox")


class RuntimeDescribeParams(Model):
    pass


class PingParams(Model):
    pass


class RuntimeShutdownParams(Model):
    pass


class TokenCreateParams(Model):
    label: Annotated[str, Field(max_length=200)] | None = None
    #: the token stops working this many seconds after it is minted (none: never)
    ttl_seconds: Annotated[int, Field(ge=1, le=10 * 366 * 86400)] | None = None
    #: a one-time token: accepted by one ``GET /web/exchange`` only (``tether web``)
    once: bool | None = None


class SessionCreateParams(TurnOptions):
    request_id: Id | None = None
    source: Annotated[str, Field(max_length=32)] | None = None  # cli, editor, api, cron, ...
    title: Annotated[str, Field(max_length=200)] | None = None
    cwd: Annotated[str, Field(max_length=4096)] | None = None


class SessionResumeParams(Model):
    session_id: Id
    after_seq: Annotated[int, Field(ge=0, le=MAX_SEQ)] | None = None


class SessionListParams(Model):
    limit: Annotated[int, Field(ge=1, le=500)] = 50
    cursor: Annotated[str, Field(max_length=1024)] | None = None


class SessionEventsSinceParams(Model):
    session_id: Id
    after_seq: Annotated[int, Field(ge=0, le=MAX_SEQ)]
    limit: Annotated[int, Field(ge=1, le=10_000)] = 1000


class SessionDetachParams(Model):
    session_id: Id


class SessionInterruptParams(Model):
    session_id: Id


class Attachment(Model):
    name: Annotated[str, Field(min_length=1, max_length=256)]
    content: Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
    mime_type: Annotated[str, Field(max_length=255)] = "text/plain"


class PromptSubmitParams(TurnOptions):
    session_id: Id
    input_id: Id
    text: Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
    finite: bool = False
    attachments: Annotated[list[Attachment], Field(max_length=MAX_ATTACHMENTS)] | None = None


class PromptReceiptParams(Model):
    """Look a receipt up by exactly one of ``admission_id`` or ``input_id``."""

    session_id: Id
    admission_id: Id | None = None
    input_id: Id | None = None

    @model_validator(mode="after")
    def _exactly_one_key(self) -> PromptReceiptParams:
        if (self.admission_id is None) == (self.input_id is None):
            raise ValueError("exactly one of admission_id or input_id is required")
        return self


class PromptCancelParams(Model):
    session_id: Id
    admission_id: Id


class PromptResolveUnknownParams(Model):
    session_id: Id
    admission_id: Id


# --------------------------------------------------------------------------- results


class TurnDefaults(Model):
    """What a turn that names no provider, model or base_url runs with, from the owner's
    configuration (a session's own options come first). ``base_url`` is the endpoint
    its requests go to, without credentials or query (null for the offline demo)."""

    provider: str
    model: str
    base_url: str | None


class RuntimeDescribeResult(Model):
    protocol: str
    version: str
    instance_id: str
    epoch: int
    pid: int
    capabilities: list[str]
    #: the provider and toolset names turn options accept
    providers: list[str]
    toolsets: list[str]
    turn_defaults: TurnDefaults
    sandbox: str  # the boundary around commands, e.g. "bubblewrap 0.8.0, workspace-write, …"
    sandbox_mode: SandboxMode = "workspace-write"  # configured; turns may ask for stricter
    approvals_mode: Literal["ask", "auto", "never"] = "ask"  # configured; no client changes it
    #: the configured MCP servers, their state and the tools they offer (docs/mcp.md)
    mcp_servers: list[McpServerInfo] = []


class PingResult(Model):
    pong: bool


class OkResult(Model):
    ok: bool


class ShutdownResult(Model):
    draining: bool


class TokenCreateResult(Model):
    """The bearer token is shown once; the owner stores only its hash."""

    token: str
    token_id: str


class TurnResult(Model):
    # model and cost_usd (null: no known price): sent for a turn that asked a model
    text: str
    usage: dict[str, int]
    error: str | None = None
    model: str | None = None
    cost_usd: float | None = None


class Receipt(Model):
    """Where an admission stands. ``outcome`` and ``result`` are set once ``terminal``.
    ``paused_by`` (sent only then) names the unknown admissions a queued one waits
    behind: it runs once they are settled (prompt.resolve_unknown, ``tether resolve``)."""

    admission_id: str
    session_id: str
    input_id: str
    status: Status
    outcome: Outcome | None = None
    result: TurnResult | None = None
    paused_by: list[str] | None = None


class SessionInfo(Model):
    source: str | None
    title: str | None
    cwd: str | None
    model: str | None
    provider: str | None
    toolsets: list[str] | None
    created_at: Timestamp
    parent_session_id: str | None = None
    usage: SessionUsage | None = None
    #: the context window's fill the latest turn that asked a model left (null: none yet)
    context: ContextFill | None = None
    #: a fork's origin: the session and the seq it was forked at (session.fork)
    forked_from: str | None = None
    forked_at_seq: int | None = None


class TranscriptMessage(Model):
    role: Role
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    admission_id: str | None = None
    created_at: Timestamp


class PendingAdmission(Model):
    """A non-terminal admission as a snapshot shows it: its receipt and its prompt text."""

    receipt: Receipt
    text: str


class Event(Model):
    """One entry of a session's durable, gap-free event sequence (SPEC §6).

    The validating model of the envelope that ``envelope.event_envelope`` builds.
    Sent as the params of an ``event`` notification and returned by
    session.events.since. ``type`` is one of ``envelope.EVENT_TYPES``; it is kept a plain
    string so an older client survives a newer owner's event types. Payload keys
    by type (``?`` = may be absent):

    =====================  =========================================================
    session.info           pending: [admission_id], running: admission_id | null,
                           awaiting_approval?: approval_id | null
    message.start          admission_id, input_id, principal, text (the prompt,
                           first 4000 characters), text_truncated? (true when cut);
                           see events.MessageStartPayload
    message.delta          text
    reasoning.delta        text
    tool.start             call_id, name, arguments, subject? (command or path)
    tool.complete          call_id, name, result (str, truncated), error?,
                           summary? (one short line)
    tool.progress          call_id, name, progress, total?, message? (an MCP call)
    subagent.start         delegation_id?, task_index, goal, child_session_id
    subagent.complete      delegation_id?, task_index, status, summary,
                           child_session_id
    delegation.dispatched  delegation_id, tasks
    delegation.complete    delegation_id, state, admission_id (of the delivery),
                           results: [{task_index, status}]
    message.complete       admission_id, outcome, text, error?, usage?, model?, cost_usd?,
                           context? (the context window's fill the turn left)
    approval.requested     approval_id, call_id, tool, kind, subject, why, cwd,
                           choices, expires_at
    approval.resolved      approval_id, status, decision, cause, reason
    process.complete       process_id, state, exit_code, command (its notice
                           was admitted as a new turn)
    session.replay_gap     last_seq, reason
    cron.notice            job, run_id, scheduled_for, session_id, admission_id,
                           outcome, text, error (a scheduled job's delivered answer)
    model.retry            attempt (the next, from 2), attempts, delay_seconds, reason,
                           detail (why the last attempt failed)
    session.compacted      compaction_id, first_index, end_index, summary, model, ...
    fs.request             request_id, op, path, content?, expires_at (a notice to the
                           viewer that made fs.offer; seq null, never stored)
    terminal.request       request_id, op, call_id?, terminal_id?, command?, args?,
                           env?, cwd?, output_byte_limit?, expires_at (a notice to the
                           viewer that made terminal.offer; seq null, never stored)
    =====================  =========================================================
    """

    session_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    admission_id: str | None = None


class ApprovalPrompt(Model):
    """An approval prompt: what a tool call asks to do, and how it was resolved.

    ``kind`` command (``subject`` is the command) or file (``subject`` is the
    absolute path written); ``why`` says why it needs an answer."""

    approval_id: str
    session_id: str
    admission_id: str | None
    call_id: str
    tool: str
    kind: Literal["command", "file"]
    subject: str
    why: str
    cwd: str | None
    status: Literal["pending", "approved", "denied", "expired", "cancelled"]
    decision: Literal["once", "session", "always", "deny"] | None
    cause: Literal["answered", "timeout", "interrupted", "shutdown"] | None
    answered_by: str | None
    reason: str | None
    created_at: Timestamp
    expires_at: Timestamp
    resolved_at: Timestamp | None


class Snapshot(Model):
    """A session as a viewer needs it on (re)attach; ``events`` only with ``after_seq``;
    ``approvals``: its pending approval prompts, for a viewer that attaches late."""

    session_id: str
    stored_session_id: str
    info: SessionInfo
    messages: list[TranscriptMessage]
    pending: list[PendingAdmission]
    running: str | None  # admission_id of the running turn
    last_seq: int
    events: list[Event] | None = None
    approvals: list[ApprovalPrompt] = []


class SessionSummary(Model):
    session_id: str
    title: str | None
    source: str | None
    created_at: Timestamp
    updated_at: Timestamp
    message_count: int
    running: bool
    parent_session_id: str | None = None
    cwd: str | None = None  # the session's working directory
    usage: SessionUsage | None = None


class SessionListResult(Model):
    sessions: list[SessionSummary]
    next_cursor: str | None  # pass back as params.cursor; null on the last page


class EventsSinceResult(Model):
    events: list[Event]
    last_seq: int


class InterruptResult(Model):
    interrupted: bool
    admission_id: str | None
