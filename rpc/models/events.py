"""The schema of every event type's payload, and of the ``event`` notification that
carries one (the other JSON-RPC frames are in frames.py).

``models.Event`` keeps ``payload`` a free object so a client survives a newer
owner's types; these models say what each type the owner sends carries. They
exist for ``tether schema`` (and the code generated from it: a discriminated
union on ``type``) and for tests that validate real traffic; the owner builds
its events as plain dicts (envelope.py) and never pays for them.

Payloads accept keys they do not list (``extra="allow"``): an owner may add a
key to an event without breaking a client generated from an older schema.
Envelopes are closed: the owner's own code is their only writer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from ..envelope import NOTICE_TYPES
from .core import Outcome
from .usage import ContextFill, SessionUsage

__all__ = ["EVENT_MODELS", "EVENT_PAYLOADS", "AnyEvent", "EventNotification"]



class Payload(BaseModel):
    """An event payload: the keys listed are always sent unless marked optional."""

    model_config = ConfigDict(extra="allow", strict=True)


class SessionInfoPayload(Payload):
    """The session's queue changed: admissions waiting, and the running one."""

    pending: list[str]
    running: str | None
    awaiting_approval: str | None = Field(default=None, description=(
        "the approval the running turn waits on (null once answered); sent only by "
        "the approval events' session.info"))
    usage: SessionUsage | None = Field(default=None, description=(
        "the session's token and cost totals; sent by the session.info that ends a turn"))


class MessageStartPayload(Payload):
    """A turn began: which input, who sent it, and what it asked (every viewer sees
    what another client asked)."""

    admission_id: str
    input_id: str
    principal: str = Field(description="local, api:<token_id>, delegation, process, cron")
    text: str = Field(description="the admitted prompt, its first 4,000 characters")
    text_truncated: bool | None = None


class DeltaPayload(Payload):
    text: str


class MessageDeltaPayload(DeltaPayload):
    """A piece of the answer as the model streams it."""


class ReasoningDeltaPayload(DeltaPayload):
    """A piece of the model's reasoning, for models that stream it."""


class ToolStartPayload(Payload):
    """A tool call began. ``arguments`` is the JSON text the model wrote, verbatim:
    usually an object, but a model can write malformed JSON, so parse it defensively."""

    call_id: str
    name: str
    arguments: str
    subject: str | None = Field(default=None, description=(
        "what the call acts on: the command, path or search pattern"))


class ToolCompletePayload(Payload):
    """A tool call ended; ``result`` is its (truncated) text, ``error`` set on failure."""

    call_id: str
    name: str
    result: str
    error: str | None = None
    summary: str | None = Field(default=None, description="one short line on what it did")
    preview: str | None = Field(
        default=None, description="a few lines a viewer shows under the summary: the "
        "unified diff of a file edit, the last lines of a command's output")


class ToolProgressPayload(Payload):
    """A running tool call reported progress (an MCP server's progress notifications,
    at most about two a second per call, and always the one that reaches ``total``)."""

    call_id: str
    name: str
    progress: float
    total: float | None = None
    message: str | None = None


class SubagentStartPayload(Payload):
    """A delegated task's child session started (``delegation_id`` only for background)."""

    task_index: int
    child_session_id: str
    goal: str
    delegation_id: str | None = None


class SubagentCompletePayload(Payload):
    task_index: int | None
    child_session_id: str | None
    status: str
    summary: str
    delegation_id: str | None = None


class DelegationTask(Payload):
    goal: str


class DelegationDispatchedPayload(Payload):
    """A background delegation was recorded; its children run while the turn goes on."""

    delegation_id: str
    tasks: list[DelegationTask]


class TaskStatus(Payload):
    task_index: int | None
    status: str | None


class DelegationCompletePayload(Payload):
    """A background delegation ended; ``admission_id`` is the admission delivering it."""

    delegation_id: str
    state: str
    admission_id: str | None
    results: list[TaskStatus]


class MessageCompletePayload(Payload):
    """A turn ended with ``outcome``; ``text`` is the whole answer."""

    admission_id: str
    outcome: Outcome
    text: str
    error: str | None = None
    usage: dict[str, int] | None = Field(default=None, description=(
        "the turn's tokens: prompt_tokens, completion_tokens, total_tokens, and "
        "cached_tokens, reasoning_tokens where the model server reports them"))
    model: str | None = Field(default=None, description="the model the turn asked")
    cost_usd: float | None = Field(default=None, description=(
        "the turn's cost in USD; null when the model has no known price"))
    context: ContextFill | None = Field(default=None, description=(
        "the context window's fill the turn left (sent when the turn asked a model)"))


class ReplayGapPayload(Payload):
    """Events after ``last_seq`` were not delivered: resume with ``after_seq`` = it."""

    last_seq: int
    reason: Literal["viewer_queue_overflow", "client_queue_overflow"]


class ApprovalRequestedPayload(Payload):
    """A tool call waits for a person's answer (approval.respond)."""

    approval_id: str
    call_id: str
    tool: str
    kind: str
    subject: str
    why: str
    cwd: str | None
    choices: list[Literal["once", "session", "always", "deny"]]
    expires_at: float


class ApprovalResolvedPayload(Payload):
    """An approval prompt ended: answered, timed out, or cancelled with its turn."""

    approval_id: str
    status: Literal["approved", "denied", "expired", "cancelled"]
    decision: Literal["once", "session", "always", "deny"] | None
    cause: Literal["answered", "timeout", "interrupted", "shutdown"]
    reason: str | None


class ProcessCompletePayload(Payload):
    """A background process with notify_on_complete ended; its notice is admitted with it."""

    process_id: str
    state: Literal["exited", "killed", "lost"]
    exit_code: int | None
    command: str


class FsRequestPayload(Payload):
    """A notice to one viewer, never stored: a file tool asks the connection that offered
    (fs.offer) to read or write ``path`` (absolute, checked and approved); fs.respond."""

    request_id: str
    op: Literal["read", "write"]
    path: str
    content: str | None = Field(default=None, description="write: the whole new text")
    expires_at: float = Field(description="after this the tool uses the disk instead")


class TerminalRequestPayload(Payload):
    """A notice to one viewer, never stored: the terminal tool asks the connection that
    offered (terminal.offer) to do one step of running a sandboxed command (already
    approved, its argv the sandbox's) in an editor's terminal; terminal.respond."""

    request_id: str
    op: Literal["create", "output", "wait_for_exit", "kill", "release"]
    call_id: str | None = Field(default=None, description=(
        "create: the tool call whose card shows the terminal"))
    terminal_id: str | None = Field(default=None, description="every op but create")
    command: str | None = Field(default=None, description="create: the program (bwrap)")
    args: list[str] | None = Field(default=None, description="create: its arguments")
    env: dict[str, str] | None = Field(default=None, description="create: its environment")
    cwd: str | None = Field(default=None, description="create: where it starts (absolute)")
    output_byte_limit: int | None = Field(default=None, description=(
        "create: the output the terminal keeps (its end)"))
    expires_at: float = Field(description="after this the tool no longer waits for the answer")


class ModelRetryPayload(Payload):
    """The owner waits to ask the model again after a transient failure."""

    attempt: int
    attempts: int
    delay_seconds: float
    reason: str
    detail: str


class CronNoticePayload(Payload):
    """A scheduled job's answer delivered into this session; it starts no turn."""

    job: str
    run_id: str
    scheduled_for: float
    session_id: str
    admission_id: str | None
    outcome: Outcome | None
    text: str
    error: str | None


class SessionCompactedPayload(Payload):
    """Older turns were summarised: from now on a request sends ``summary`` in place
    of transcript messages [first_index, end_index); the transcript stays whole."""

    compaction_id: str
    first_index: int
    end_index: int
    summary: str
    model: str
    tokens_before: int = Field(description=(
        "estimated tokens of the history a request sent before (summary and messages)"))
    tokens_after: int = Field(description="... and after (the new summary and what is kept)")
    kind: Literal["auto", "manual"]
    focus: str | None = None


#: event type -> its payload model (the order of envelope.EVENT_TYPES)
EVENT_PAYLOADS: dict[str, type[Payload]] = {
    "session.info": SessionInfoPayload,
    "message.start": MessageStartPayload,
    "message.delta": MessageDeltaPayload,
    "reasoning.delta": ReasoningDeltaPayload,
    "tool.start": ToolStartPayload,
    "tool.complete": ToolCompletePayload,
    "tool.progress": ToolProgressPayload,
    "subagent.start": SubagentStartPayload,
    "subagent.complete": SubagentCompletePayload,
    "delegation.dispatched": DelegationDispatchedPayload,
    "delegation.complete": DelegationCompletePayload,
    "message.complete": MessageCompletePayload,
    "approval.requested": ApprovalRequestedPayload,
    "approval.resolved": ApprovalResolvedPayload,
    "process.complete": ProcessCompletePayload,
    "session.replay_gap": ReplayGapPayload,
    "cron.notice": CronNoticePayload,
    "model.retry": ModelRetryPayload,
    "session.compacted": SessionCompactedPayload,
    "fs.request": FsRequestPayload,
    "terminal.request": TerminalRequestPayload,
}


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    session_id: str
    seq: Annotated[int, Field(ge=1)]
    admission_id: str | None


def _event_model(type_: str, payload: type[Payload]) -> type[_Envelope]:
    name = "".join(part.capitalize() for part in type_.replace("_", ".").split(".")) + "Event"
    fields: dict[str, Any] = {"type": (Literal[type_], ...), "payload": (payload, ...)}
    if type_ in NOTICE_TYPES:
        # a notice, not a stored event: no seq of its own (envelope.replay_gap)
        fields["seq"] = (None, ...)
        if type_ == "session.replay_gap":
            fields["admission_id"] = (None, ...)
    from pydantic import create_model

    model: type[_Envelope] = create_model(name, __base__=_Envelope, **fields)
    model.__doc__ = (payload.__doc__ or "").strip() or f"The {type_} event."
    return model


#: event type -> the model of its whole envelope
EVENT_MODELS: dict[str, type[_Envelope]] = {t: _event_model(t, p)
                                           for t, p in EVENT_PAYLOADS.items()}


class AnyEvent(RootModel[Any]):
    """One event: a union discriminated by ``type`` (filled in by schema.py)."""


class EventNotification(BaseModel):
    """The ``event`` notification the owner sends a subscribed connection."""

    model_config = ConfigDict(extra="forbid", strict=True)

    jsonrpc: Literal["2.0"]
    method: Literal["event"]
    params: AnyEvent
