"""The method table: each wire method's name, params model, result model and one-line doc.

This table is the single source the dispatcher validates against, ``tether
schema`` prints, and docs/protocol.md describes; adding a method starts here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import (
    EventsSinceResult,
    InterruptResult,
    Model,
    OkResult,
    PingParams,
    PingResult,
    PromptCancelParams,
    PromptReceiptParams,
    PromptResolveUnknownParams,
    PromptSubmitParams,
    Receipt,
    RuntimeDescribeParams,
    RuntimeDescribeResult,
    RuntimeShutdownParams,
    SessionCreateParams,
    SessionDetachParams,
    SessionEventsSinceParams,
    SessionInterruptParams,
    SessionListParams,
    SessionListResult,
    SessionResumeParams,
    ShutdownResult,
    Snapshot,
    TokenCreateParams,
    TokenCreateResult,
)
from .models.approvals import (
    ApprovalListParams,
    ApprovalListResult,
    ApprovalRespondParams,
    ApprovalRespondResult,
    ApprovalRuleRemoveParams,
    ApprovalRuleRemoveResult,
    ApprovalRulesParams,
    ApprovalRulesResult,
)
from .models.cron import (
    CronCreateParams,
    CronJob,
    CronListParams,
    CronListResult,
    CronNameParams,
    CronRemoveResult,
    CronRun,
    CronRunsParams,
    CronRunsResult,
    CronUpdateParams,
)
from .models.fs import FsOfferParams, FsOfferResult, FsRespondParams, FsRespondResult
from .models.history import (
    SessionCompactParams,
    SessionCompactResult,
    SessionExportParams,
    SessionExportResult,
    SessionForkParams,
    SessionForkResult,
)
from .models.mcp import (
    McpAttachParams,
    McpAttachResult,
    McpListParams,
    McpListResult,
    McpResourcesParams,
    McpResourcesResult,
    McpServerInfo,
    McpToolsParams,
)
from .models.sessions import (
    SessionDeleteParams,
    SessionDeleteResult,
    SessionLookupParams,
    SessionLookupResult,
    SessionPruneParams,
    SessionPruneResult,
    SessionRenameParams,
    SessionRenameResult,
)
from .models.terminal import (
    TerminalOfferParams,
    TerminalOfferResult,
    TerminalRespondParams,
    TerminalRespondResult,
)
from .models.tokens import (
    ListenTcpParams,
    ListenTcpResult,
    TokenListParams,
    TokenListResult,
    TokenRevokeParams,
    TokenRevokeResult,
)

__all__ = ["METHODS", "Method"]


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    params: type[Model]
    result: type[Model]
    doc: str


def _table(*methods: Method) -> dict[str, Method]:
    return {m.name: m for m in methods}


METHODS: dict[str, Method] = _table(
    Method(
        "runtime.describe",
        RuntimeDescribeParams,
        RuntimeDescribeResult,
        "Identify the owner: protocol, version, instance id, epoch, pid, capabilities.",
    ),
    Method("ping", PingParams, PingResult, "Liveness check; answers {pong: true}."),
    Method(
        "runtime.shutdown",
        RuntimeShutdownParams,
        ShutdownResult,
        "Ask the owner to drain (refuse new admissions, let running turns finish) and exit.",
    ),
    Method(
        "runtime.listen_tcp",
        ListenTcpParams,
        ListenTcpResult,
        "Open the owner's TCP listener (WebSocket, the viewer page, the HTTP API) if it has "
        "none, until it stops; Unix socket only. Running turns go on (`tether web`).",
    ),
    Method(
        "token.create",
        TokenCreateParams,
        TokenCreateResult,
        "Mint a bearer token for the TCP listener; the token is shown once.",
    ),
    Method(
        "token.list",
        TokenListParams,
        TokenListResult,
        "List the TCP tokens (ids, labels, expiry; never the tokens); Unix socket only.",
    ),
    Method(
        "token.revoke",
        TokenRevokeParams,
        TokenRevokeResult,
        "Revoke a TCP token and close the connections using it; Unix socket only.",
    ),
    Method(
        "session.create",
        SessionCreateParams,
        Snapshot,
        "Create a session (idempotent by request_id) and subscribe this connection to it.",
    ),
    Method(
        "session.resume",
        SessionResumeParams,
        Snapshot,
        "Snapshot a session, with events after after_seq, and subscribe this connection.",
    ),
    Method(
        "session.list",
        SessionListParams,
        SessionListResult,
        "List sessions a page at a time; pass next_cursor back as cursor for the next page.",
    ),
    Method(
        "session.events.since",
        SessionEventsSinceParams,
        EventsSinceResult,
        "Replay a session's durable events after a seq.",
    ),
    Method(
        "session.detach",
        SessionDetachParams,
        OkResult,
        "Stop receiving a session's events on this connection; the session lives on.",
    ),
    Method(
        "session.interrupt",
        SessionInterruptParams,
        InterruptResult,
        "Stop the session's running turn; its admission ends terminal/cancelled.",
    ),
    Method(
        "prompt.submit",
        PromptSubmitParams,
        Receipt,
        "Admit a prompt durably (idempotent by input_id) and return its receipt.",
    ),
    Method(
        "prompt.receipt",
        PromptReceiptParams,
        Receipt,
        "Look up an admission's receipt by admission_id or input_id.",
    ),
    Method(
        "prompt.cancel",
        PromptCancelParams,
        Receipt,
        "Cancel a queued admission, or interrupt it if it has started.",
    ),
    Method(
        "prompt.resolve_unknown",
        PromptResolveUnknownParams,
        Receipt,
        "Settle an unknown admission as interrupted so the session's queue resumes.",
    ),
    Method(
        "approval.respond",
        ApprovalRespondParams,
        ApprovalRespondResult,
        "Answer a pending approval prompt; the first answer wins, a later one is told "
        "already_resolved.",
    ),
    Method(
        "approval.list",
        ApprovalListParams,
        ApprovalListResult,
        "Pending approval prompts of one session, or of every session.",
    ),
    Method(
        "approval.rules",
        ApprovalRulesParams,
        ApprovalRulesResult,
        "The approval rules in force: config allow/deny, and remembered answers.",
    ),
    Method(
        "approval.rule_remove",
        ApprovalRuleRemoveParams,
        ApprovalRuleRemoveResult,
        "Forget a remembered answer (a session or always rule) by its rule_id.",
    ),
    Method("cron.create", CronCreateParams, CronJob,
           "Create a scheduled job (a prompt run on a schedule, each run a finite admission)."),
    Method("cron.list", CronListParams, CronListResult, "List scheduled jobs by name."),
    Method("cron.get", CronNameParams, CronJob, "A scheduled job, with its last run."),
    Method("cron.update", CronUpdateParams, CronJob,
           "Change a job's schedule, zone, prompt, options, delivery or policies."),
    Method("cron.pause", CronNameParams, CronJob,
           "Stop a job firing; times that pass while paused are recorded skipped(paused)."),
    Method("cron.resume", CronNameParams, CronJob,
           "Let a paused job fire again, from its next time after now."),
    Method("cron.remove", CronNameParams, CronRemoveResult,
           "Delete a job and its run history (the runs' sessions stay)."),
    Method("cron.run", CronNameParams, CronRun,
           "Fire a job now; returns the run, whose receipt prompt.receipt reaches."),
    Method("cron.runs", CronRunsParams, CronRunsResult,
           "A job's runs, newest first, each with its admission's status and outcome."),
    Method(
        "session.rename",
        SessionRenameParams,
        SessionRenameResult,
        "Set a session's title.",
    ),
    Method(
        "session.delete",
        SessionDeleteParams,
        SessionDeleteResult,
        "Delete an idle session and its delegation child sessions; refused while work is open.",
    ),
    Method(
        "session.prune",
        SessionPruneParams,
        SessionPruneResult,
        "Delete empty sessions (no message, admission or child) older than older_than_seconds.",
    ),
    Method("mcp.list", McpListParams, McpListResult,
           "The configured MCP servers, their state and their tools (starts none)."),
    Method("mcp.tools", McpToolsParams, McpServerInfo,
           "Start one MCP server if it is not running, and list its state and tools."),
    Method("mcp.attach", McpAttachParams, McpAttachResult,
           "Give one session MCP servers of the caller's (an editor's); Unix socket only."),
    Method("fs.offer", FsOfferParams, FsOfferResult,
           "This connection executes the file tools' reads and/or writes of a session "
           "(an editor's buffers) while it lives; the newest offer wins; Unix socket only."),
    Method("fs.respond", FsRespondParams, FsRespondResult,
           "Answer an fs.request sent to this connection: text read, write done, or error "
           "(the tool then uses the disk); an unknown or expired request is not_found."),
    Method("terminal.offer", TerminalOfferParams, TerminalOfferResult,
           "This connection runs a session's sandboxed commands in its editor's terminals "
           "while it lives; the newest offer wins; Unix socket only."),
    Method("terminal.respond", TerminalRespondParams, TerminalRespondResult,
           "Answer a terminal.request sent to this connection (what its op gives, or "
           "error); an unknown or expired request is not_found."),
    Method("mcp.resources", McpResourcesParams, McpResourcesResult,
           "Start one MCP server if it is not running, and list its resources and prompts."),
    Method(
        "session.lookup",
        SessionLookupParams,
        SessionLookupResult,
        "Find sessions by id prefix, or the most recently active top-level one (last).",
    ),
    Method("session.fork", SessionForkParams, SessionForkResult,
           "Copy a session's history up to a seq (its turns ended by then, compactions "
           "included) into a new session; the original is untouched."),
    Method("session.export", SessionExportParams, SessionExportResult,
           "The whole session as a document: turns, tool calls with results, approvals, "
           "delegations, compactions, usage (json or markdown)."),
    Method("session.compact", SessionCompactParams, SessionCompactResult,
           "Summarise the session's older turns now (all but the newest), so requests "
           "send the summary in their place; the transcript stays whole."),
)
