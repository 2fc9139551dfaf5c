/* eslint-disable */
// Generated from `tether schema` (protocol tether/1) by scripts/gen-types.mjs.
// Do not edit: run `npm run gen` after changing the protocol.

/**
 * One event: a union discriminated by ``type``
 */
export type AnyEvent = (SessionInfoEvent | MessageStartEvent | MessageDeltaEvent | ReasoningDeltaEvent | ToolStartEvent | ToolCompleteEvent | ToolProgressEvent | SubagentStartEvent | SubagentCompleteEvent | DelegationDispatchedEvent | DelegationCompleteEvent | MessageCompleteEvent | ApprovalRequestedEvent | ApprovalResolvedEvent | ProcessCompleteEvent | SessionReplayGapEvent | CronNoticeEvent | ModelRetryEvent | SessionCompactedEvent | FsRequestEvent | TerminalRequestEvent)
/**
 * One entry of a session's durable event log (never a notice: the replay gap, fs.request, terminal.request).
 */
export type Event = (SessionInfoEvent | MessageStartEvent | MessageDeltaEvent | ReasoningDeltaEvent | ToolStartEvent | ToolCompleteEvent | ToolProgressEvent | SubagentStartEvent | SubagentCompleteEvent | DelegationDispatchedEvent | DelegationCompleteEvent | MessageCompleteEvent | ApprovalRequestedEvent | ApprovalResolvedEvent | ProcessCompleteEvent | CronNoticeEvent | ModelRetryEvent | SessionCompactedEvent)
/**
 * Look a receipt up by exactly one of admission_id or input_id.
 */
export type PromptReceiptParams = ({
session_id: string
admission_id?: (string | null)
input_id?: (string | null)
} & ({
admission_id: string
input_id?: null
} | {
input_id: string
admission_id?: null
}))

export interface TetherProtocolTypes {
AdmissionConflictErrorData?: AdmissionConflictErrorData
AnyEvent?: AnyEvent
ApprovalListParams?: ApprovalListParams
ApprovalListResult?: ApprovalListResult
ApprovalPrompt?: ApprovalPrompt
ApprovalRequestedEvent?: ApprovalRequestedEvent
ApprovalRequestedPayload?: ApprovalRequestedPayload
ApprovalResolvedEvent?: ApprovalResolvedEvent
ApprovalResolvedPayload?: ApprovalResolvedPayload
ApprovalRespondParams?: ApprovalRespondParams
ApprovalRespondResult?: ApprovalRespondResult
ApprovalRule?: ApprovalRule
ApprovalRuleRemoveParams?: ApprovalRuleRemoveParams
ApprovalRuleRemoveResult?: ApprovalRuleRemoveResult
ApprovalRulesParams?: ApprovalRulesParams
ApprovalRulesResult?: ApprovalRulesResult
Attachment?: Attachment
ContextFill?: ContextFill
CronCreateParams?: CronCreateParams
CronJob?: CronJob
CronListParams?: CronListParams
CronListResult?: CronListResult
CronNameParams?: CronNameParams
CronNoticeEvent?: CronNoticeEvent
CronNoticePayload?: CronNoticePayload
CronRemoveResult?: CronRemoveResult
CronRun?: CronRun
CronRunsParams?: CronRunsParams
CronRunsResult?: CronRunsResult
CronUpdateParams?: CronUpdateParams
DelegationCompleteEvent?: DelegationCompleteEvent
DelegationCompletePayload?: DelegationCompletePayload
DelegationDispatchedEvent?: DelegationDispatchedEvent
DelegationDispatchedPayload?: DelegationDispatchedPayload
DelegationTask?: DelegationTask
ErrorData?: ErrorData
ErrorObject?: ErrorObject
Event?: Event
EventNotification?: EventNotification
EventsSinceResult?: EventsSinceResult
ExportApproval?: ExportApproval
ExportCompaction?: ExportCompaction
ExportDelegation?: ExportDelegation
ExportDocument?: ExportDocument
ExportMessage?: ExportMessage
ExportSession?: ExportSession
ExportToolCall?: ExportToolCall
ExportTurn?: ExportTurn
FieldProblem?: FieldProblem
ForbiddenErrorData?: ForbiddenErrorData
FsOfferParams?: FsOfferParams
FsOfferResult?: FsOfferResult
FsRequestEvent?: FsRequestEvent
FsRequestPayload?: FsRequestPayload
FsRespondParams?: FsRespondParams
FsRespondResult?: FsRespondResult
InternalErrorErrorData?: InternalErrorErrorData
InterruptResult?: InterruptResult
InvalidParamsErrorData?: InvalidParamsErrorData
InvalidRequestErrorData?: InvalidRequestErrorData
JsonRpcError?: JsonRpcError
JsonRpcRequest?: JsonRpcRequest
JsonRpcResult?: JsonRpcResult
ListenTcpParams?: ListenTcpParams
ListenTcpResult?: ListenTcpResult
McpAttachParams?: McpAttachParams
McpAttachResult?: McpAttachResult
McpListParams?: McpListParams
McpListResult?: McpListResult
McpPromptArgument?: McpPromptArgument
McpPromptInfo?: McpPromptInfo
McpResourceInfo?: McpResourceInfo
McpResourceTemplateInfo?: McpResourceTemplateInfo
McpResourcesParams?: McpResourcesParams
McpResourcesResult?: McpResourcesResult
McpServerInfo?: McpServerInfo
McpServerSpec?: McpServerSpec
McpToolInfo?: McpToolInfo
McpToolsParams?: McpToolsParams
MessageCompleteEvent?: MessageCompleteEvent
MessageCompletePayload?: MessageCompletePayload
MessageDeltaEvent?: MessageDeltaEvent
MessageDeltaPayload?: MessageDeltaPayload
MessageStartEvent?: MessageStartEvent
MessageStartPayload?: MessageStartPayload
MethodNotFoundErrorData?: MethodNotFoundErrorData
ModelRetryEvent?: ModelRetryEvent
ModelRetryPayload?: ModelRetryPayload
NotFoundErrorData?: NotFoundErrorData
OkResult?: OkResult
OverloadedErrorData?: OverloadedErrorData
ParseErrorErrorData?: ParseErrorErrorData
PendingAdmission?: PendingAdmission
PingParams?: PingParams
PingResult?: PingResult
ProcessCompleteEvent?: ProcessCompleteEvent
ProcessCompletePayload?: ProcessCompletePayload
PromptCancelParams?: PromptCancelParams
PromptReceiptParams?: PromptReceiptParams
PromptResolveUnknownParams?: PromptResolveUnknownParams
PromptSubmitParams?: PromptSubmitParams
ReasoningDeltaEvent?: ReasoningDeltaEvent
ReasoningDeltaPayload?: ReasoningDeltaPayload
Receipt?: Receipt
ReplayGapPayload?: ReplayGapPayload
RuntimeDescribeParams?: RuntimeDescribeParams
RuntimeDescribeResult?: RuntimeDescribeResult
RuntimeDrainingErrorData?: RuntimeDrainingErrorData
RuntimeShutdownParams?: RuntimeShutdownParams
SessionCompactParams?: SessionCompactParams
SessionCompactResult?: SessionCompactResult
SessionCompactedEvent?: SessionCompactedEvent
SessionCompactedPayload?: SessionCompactedPayload
SessionCreateParams?: SessionCreateParams
SessionDeleteParams?: SessionDeleteParams
SessionDeleteResult?: SessionDeleteResult
SessionDetachParams?: SessionDetachParams
SessionEventsSinceParams?: SessionEventsSinceParams
SessionExportParams?: SessionExportParams
SessionExportResult?: SessionExportResult
SessionForkParams?: SessionForkParams
SessionForkResult?: SessionForkResult
SessionInfo?: SessionInfo
SessionInfoEvent?: SessionInfoEvent
SessionInfoPayload?: SessionInfoPayload
SessionInterruptParams?: SessionInterruptParams
SessionListParams?: SessionListParams
SessionListResult?: SessionListResult
SessionLookupParams?: SessionLookupParams
SessionLookupResult?: SessionLookupResult
SessionPruneParams?: SessionPruneParams
SessionPruneResult?: SessionPruneResult
SessionRenameParams?: SessionRenameParams
SessionRenameResult?: SessionRenameResult
SessionReplayGapEvent?: SessionReplayGapEvent
SessionResumeParams?: SessionResumeParams
SessionSummary?: SessionSummary
SessionUsage?: SessionUsage
ShutdownResult?: ShutdownResult
Snapshot?: Snapshot
StorageUnavailableErrorData?: StorageUnavailableErrorData
SubagentCompleteEvent?: SubagentCompleteEvent
SubagentCompletePayload?: SubagentCompletePayload
SubagentStartEvent?: SubagentStartEvent
SubagentStartPayload?: SubagentStartPayload
TaskStatus?: TaskStatus
TerminalExit?: TerminalExit
TerminalOfferParams?: TerminalOfferParams
TerminalOfferResult?: TerminalOfferResult
TerminalRequestEvent?: TerminalRequestEvent
TerminalRequestPayload?: TerminalRequestPayload
TerminalRespondParams?: TerminalRespondParams
TerminalRespondResult?: TerminalRespondResult
TokenCreateParams?: TokenCreateParams
TokenCreateResult?: TokenCreateResult
TokenInfo?: TokenInfo
TokenListParams?: TokenListParams
TokenListResult?: TokenListResult
TokenRevokeParams?: TokenRevokeParams
TokenRevokeResult?: TokenRevokeResult
ToolCompleteEvent?: ToolCompleteEvent
ToolCompletePayload?: ToolCompletePayload
ToolProgressEvent?: ToolProgressEvent
ToolProgressPayload?: ToolProgressPayload
ToolStartEvent?: ToolStartEvent
ToolStartPayload?: ToolStartPayload
TranscriptMessage?: TranscriptMessage
TurnDefaults?: TurnDefaults
TurnOptions?: TurnOptions
TurnResult?: TurnResult
UnknownExecutionErrorData?: UnknownExecutionErrorData
}
export interface AdmissionConflictErrorData {
reason: "admission_conflict"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
admission_id: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
/**
 * One problem ``invalid_params`` found: the dotted path, a message, a type tag.
 */
export interface FieldProblem {
loc: string
msg: string
type: string
}
/**
 * The session's queue changed: admissions waiting, and the running one.
 */
export interface SessionInfoEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "session.info"
payload: SessionInfoPayload
}
/**
 * The session's queue changed: admissions waiting, and the running one.
 */
export interface SessionInfoPayload {
pending: string[]
running: (string | null)
/**
 * the approval the running turn waits on (null once answered); sent only by the approval events' session.info
 */
awaiting_approval?: (string | null)
/**
 * the session's token and cost totals; sent by the session.info that ends a turn
 */
usage?: (SessionUsage | null)
[k: string]: unknown | undefined
}
/**
 * A session's tokens, summed over every model request made for it (its turns,
 * its compactions and the delegation children it started). ``cost_usd`` is null
 * when any model used has no known price: unknown, never a guess.
 */
export interface SessionUsage {
prompt_tokens: number
completion_tokens: number
total_tokens: number
cached_tokens: number
reasoning_tokens: number
/**
 * model requests made
 */
requests: number
cost_usd: (number | null)
/**
 * the same counters (and requests) per model name
 */
by_model: {
[k: string]: {
[k: string]: number | undefined
} | undefined
}
}
/**
 * A turn began: which input, who sent it, and what it asked (every viewer sees
 * what another client asked).
 */
export interface MessageStartEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "message.start"
payload: MessageStartPayload
}
/**
 * A turn began: which input, who sent it, and what it asked (every viewer sees
 * what another client asked).
 */
export interface MessageStartPayload {
admission_id: string
input_id: string
/**
 * local, api:<token_id>, delegation, process, cron
 */
principal: string
/**
 * the admitted prompt, its first 4,000 characters
 */
text: string
text_truncated?: (boolean | null)
[k: string]: unknown | undefined
}
/**
 * A piece of the answer as the model streams it.
 */
export interface MessageDeltaEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "message.delta"
payload: MessageDeltaPayload
}
/**
 * A piece of the answer as the model streams it.
 */
export interface MessageDeltaPayload {
text: string
[k: string]: unknown | undefined
}
/**
 * A piece of the model's reasoning, for models that stream it.
 */
export interface ReasoningDeltaEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "reasoning.delta"
payload: ReasoningDeltaPayload
}
/**
 * A piece of the model's reasoning, for models that stream it.
 */
export interface ReasoningDeltaPayload {
text: string
[k: string]: unknown | undefined
}
/**
 * A tool call began. ``arguments`` is the JSON text the model wrote, verbatim:
 * usually an object, but a model can write malformed JSON, so parse it defensively.
 */
export interface ToolStartEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "tool.start"
payload: ToolStartPayload
}
/**
 * A tool call began. ``arguments`` is the JSON text the model wrote, verbatim:
 * usually an object, but a model can write malformed JSON, so parse it defensively.
 */
export interface ToolStartPayload {
call_id: string
name: string
arguments: string
/**
 * what the call acts on: the command, path or search pattern
 */
subject?: (string | null)
[k: string]: unknown | undefined
}
/**
 * A tool call ended; ``result`` is its (truncated) text, ``error`` set on failure.
 */
export interface ToolCompleteEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "tool.complete"
payload: ToolCompletePayload
}
/**
 * A tool call ended; ``result`` is its (truncated) text, ``error`` set on failure.
 */
export interface ToolCompletePayload {
call_id: string
name: string
result: string
error?: (string | null)
/**
 * one short line on what it did
 */
summary?: (string | null)
/**
 * a few lines a viewer shows under the summary: the unified diff of a file edit, the last lines of a command's output
 */
preview?: (string | null)
[k: string]: unknown | undefined
}
/**
 * A running tool call reported progress (an MCP server's progress notifications,
 * at most about two a second per call, and always the one that reaches ``total``).
 */
export interface ToolProgressEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "tool.progress"
payload: ToolProgressPayload
}
/**
 * A running tool call reported progress (an MCP server's progress notifications,
 * at most about two a second per call, and always the one that reaches ``total``).
 */
export interface ToolProgressPayload {
call_id: string
name: string
progress: number
total: (number | null)
message: (string | null)
[k: string]: unknown | undefined
}
/**
 * A delegated task's child session started (``delegation_id`` only for background).
 */
export interface SubagentStartEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "subagent.start"
payload: SubagentStartPayload
}
/**
 * A delegated task's child session started (``delegation_id`` only for background).
 */
export interface SubagentStartPayload {
task_index: number
child_session_id: string
goal: string
delegation_id?: (string | null)
[k: string]: unknown | undefined
}
/**
 * The subagent.complete event.
 */
export interface SubagentCompleteEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "subagent.complete"
payload: SubagentCompletePayload
}
export interface SubagentCompletePayload {
task_index: (number | null)
child_session_id: (string | null)
status: string
summary: string
delegation_id?: (string | null)
[k: string]: unknown | undefined
}
/**
 * A background delegation was recorded; its children run while the turn goes on.
 */
export interface DelegationDispatchedEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "delegation.dispatched"
payload: DelegationDispatchedPayload
}
/**
 * A background delegation was recorded; its children run while the turn goes on.
 */
export interface DelegationDispatchedPayload {
delegation_id: string
tasks: DelegationTask[]
[k: string]: unknown | undefined
}
export interface DelegationTask {
goal: string
[k: string]: unknown | undefined
}
/**
 * A background delegation ended; ``admission_id`` is the admission delivering it.
 */
export interface DelegationCompleteEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "delegation.complete"
payload: DelegationCompletePayload
}
/**
 * A background delegation ended; ``admission_id`` is the admission delivering it.
 */
export interface DelegationCompletePayload {
delegation_id: string
state: string
admission_id: (string | null)
results: TaskStatus[]
[k: string]: unknown | undefined
}
export interface TaskStatus {
task_index: (number | null)
status: (string | null)
[k: string]: unknown | undefined
}
/**
 * A turn ended with ``outcome``; ``text`` is the whole answer.
 */
export interface MessageCompleteEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "message.complete"
payload: MessageCompletePayload
}
/**
 * A turn ended with ``outcome``; ``text`` is the whole answer.
 */
export interface MessageCompletePayload {
admission_id: string
outcome: ("completed" | "failed" | "cancelled" | "interrupted")
text: string
error?: (string | null)
/**
 * the turn's tokens: prompt_tokens, completion_tokens, total_tokens, and cached_tokens, reasoning_tokens where the model server reports them
 */
usage?: ({
[k: string]: number | undefined
} | null)
/**
 * the model the turn asked
 */
model?: (string | null)
/**
 * the turn's cost in USD; null when the model has no known price
 */
cost_usd?: (number | null)
/**
 * the context window's fill the turn left (sent when the turn asked a model)
 */
context?: (ContextFill | null)
[k: string]: unknown | undefined
}
/**
 * How full the model's context window is after a turn: the tokens the session's
 * next request starts from (``used``) of the model's window (``window``).
 */
export interface ContextFill {
/**
 * the last model request's prompt tokens plus its answer's (reasoning left out), as the model server reported them; else tether's own count
 */
used: number
/**
 * the model's context window, in tokens
 */
window: number
/**
 * true when used is tether's count (the server reported no usage)
 */
estimated: boolean
}
/**
 * A tool call waits for a person's answer (approval.respond).
 */
export interface ApprovalRequestedEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "approval.requested"
payload: ApprovalRequestedPayload
}
/**
 * A tool call waits for a person's answer (approval.respond).
 */
export interface ApprovalRequestedPayload {
approval_id: string
call_id: string
tool: string
kind: string
subject: string
why: string
cwd: (string | null)
choices: ("once" | "session" | "always" | "deny")[]
expires_at: number
[k: string]: unknown | undefined
}
/**
 * An approval prompt ended: answered, timed out, or cancelled with its turn.
 */
export interface ApprovalResolvedEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "approval.resolved"
payload: ApprovalResolvedPayload
}
/**
 * An approval prompt ended: answered, timed out, or cancelled with its turn.
 */
export interface ApprovalResolvedPayload {
approval_id: string
status: ("approved" | "denied" | "expired" | "cancelled")
decision: (("once" | "session" | "always" | "deny") | null)
cause: ("answered" | "timeout" | "interrupted" | "shutdown")
reason: (string | null)
[k: string]: unknown | undefined
}
/**
 * A background process with notify_on_complete ended; its notice is admitted with it.
 */
export interface ProcessCompleteEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "process.complete"
payload: ProcessCompletePayload
}
/**
 * A background process with notify_on_complete ended; its notice is admitted with it.
 */
export interface ProcessCompletePayload {
process_id: string
state: ("exited" | "killed" | "lost")
exit_code: (number | null)
command: string
[k: string]: unknown | undefined
}
/**
 * Events after ``last_seq`` were not delivered: resume with ``after_seq`` = it.
 */
export interface SessionReplayGapEvent {
session_id: string
seq: null
admission_id: null
type: "session.replay_gap"
payload: ReplayGapPayload
}
/**
 * Events after ``last_seq`` were not delivered: resume with ``after_seq`` = it.
 */
export interface ReplayGapPayload {
last_seq: number
reason: ("viewer_queue_overflow" | "client_queue_overflow")
[k: string]: unknown | undefined
}
/**
 * A scheduled job's answer delivered into this session; it starts no turn.
 */
export interface CronNoticeEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "cron.notice"
payload: CronNoticePayload
}
/**
 * A scheduled job's answer delivered into this session; it starts no turn.
 */
export interface CronNoticePayload {
job: string
run_id: string
scheduled_for: number
session_id: string
admission_id: (string | null)
outcome: (("completed" | "failed" | "cancelled" | "interrupted") | null)
text: string
error: (string | null)
[k: string]: unknown | undefined
}
/**
 * The owner waits to ask the model again after a transient failure.
 */
export interface ModelRetryEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "model.retry"
payload: ModelRetryPayload
}
/**
 * The owner waits to ask the model again after a transient failure.
 */
export interface ModelRetryPayload {
attempt: number
attempts: number
delay_seconds: number
reason: string
detail: string
[k: string]: unknown | undefined
}
/**
 * Older turns were summarised: from now on a request sends ``summary`` in place
 * of transcript messages [first_index, end_index); the transcript stays whole.
 */
export interface SessionCompactedEvent {
session_id: string
seq: number
admission_id: (string | null)
type: "session.compacted"
payload: SessionCompactedPayload
}
/**
 * Older turns were summarised: from now on a request sends ``summary`` in place
 * of transcript messages [first_index, end_index); the transcript stays whole.
 */
export interface SessionCompactedPayload {
compaction_id: string
first_index: number
end_index: number
summary: string
model: string
/**
 * estimated tokens of the history a request sent before (summary and messages)
 */
tokens_before: number
/**
 * ... and after (the new summary and what is kept)
 */
tokens_after: number
kind: ("auto" | "manual")
focus: (string | null)
[k: string]: unknown | undefined
}
/**
 * A notice to one viewer, never stored: a file tool asks the connection that offered
 * (fs.offer) to read or write ``path`` (absolute, checked and approved); fs.respond.
 */
export interface FsRequestEvent {
session_id: string
seq: null
admission_id: (string | null)
type: "fs.request"
payload: FsRequestPayload
}
/**
 * A notice to one viewer, never stored: a file tool asks the connection that offered
 * (fs.offer) to read or write ``path`` (absolute, checked and approved); fs.respond.
 */
export interface FsRequestPayload {
request_id: string
op: ("read" | "write")
path: string
/**
 * write: the whole new text
 */
content?: (string | null)
/**
 * after this the tool uses the disk instead
 */
expires_at: number
[k: string]: unknown | undefined
}
/**
 * A notice to one viewer, never stored: the terminal tool asks the connection that
 * offered (terminal.offer) to do one step of running a sandboxed command (already
 * approved, its argv the sandbox's) in an editor's terminal; terminal.respond.
 */
export interface TerminalRequestEvent {
session_id: string
seq: null
admission_id: (string | null)
type: "terminal.request"
payload: TerminalRequestPayload
}
/**
 * A notice to one viewer, never stored: the terminal tool asks the connection that
 * offered (terminal.offer) to do one step of running a sandboxed command (already
 * approved, its argv the sandbox's) in an editor's terminal; terminal.respond.
 */
export interface TerminalRequestPayload {
request_id: string
op: ("create" | "output" | "wait_for_exit" | "kill" | "release")
/**
 * create: the tool call whose card shows the terminal
 */
call_id?: (string | null)
/**
 * every op but create
 */
terminal_id?: (string | null)
/**
 * create: the program (bwrap)
 */
command?: (string | null)
/**
 * create: its arguments
 */
args?: (string[] | null)
/**
 * create: its environment
 */
env?: ({
[k: string]: string | undefined
} | null)
/**
 * create: where it starts (absolute)
 */
cwd?: (string | null)
/**
 * create: the output the terminal keeps (its end)
 */
output_byte_limit?: (number | null)
/**
 * after this the tool no longer waits for the answer
 */
expires_at: number
[k: string]: unknown | undefined
}
export interface ApprovalListParams {
session_id?: (string | null)
}
export interface ApprovalListResult {
approvals: ApprovalPrompt[]
}
/**
 * An approval prompt: what a tool call asks to do, and how it was resolved.
 * 
 * ``kind`` command (``subject`` is the command) or file (``subject`` is the
 * absolute path written); ``why`` says why it needs an answer.
 */
export interface ApprovalPrompt {
approval_id: string
session_id: string
admission_id: (string | null)
call_id: string
tool: string
kind: ("command" | "file")
subject: string
why: string
cwd: (string | null)
status: ("pending" | "approved" | "denied" | "expired" | "cancelled")
decision: (("once" | "session" | "always" | "deny") | null)
cause: (("answered" | "timeout" | "interrupted" | "shutdown") | null)
answered_by: (string | null)
reason: (string | null)
created_at: number
expires_at: number
resolved_at: (number | null)
}
export interface ApprovalRespondParams {
session_id: string
approval_id: string
decision: ("once" | "session" | "always" | "deny")
reason?: (string | null)
}
/**
 * ``resolved``: this answer decided; ``already_resolved``: an earlier answer, the
 * timeout or the turn's end did (``approval`` says how).
 */
export interface ApprovalRespondResult {
status: ("resolved" | "already_resolved")
approval: ApprovalPrompt
}
export interface ApprovalRule {
rule_id: (string | null)
kind: ("command" | "file")
pattern: string
effect: ("allow" | "deny")
source: ("config" | "session" | "always")
session_id: (string | null)
created_at: (number | null)
}
export interface ApprovalRuleRemoveParams {
rule_id: string
}
export interface ApprovalRuleRemoveResult {
removed: boolean
}
export interface ApprovalRulesParams {

}
export interface ApprovalRulesResult {
rules: ApprovalRule[]
}
export interface Attachment {
name: string
content: string
mime_type: string
}
/**
 * A new job. ``tz`` defaults to the owner's zone (``cron.timezone``, else its
 * local zone); ``grace_seconds`` to half the schedule's period, clamped to
 * 120–7200 s; ``deliver`` is ``file:/absolute/path`` or ``session:ID``. The
 * per-turn options apply to every run.
 */
export interface CronCreateParams {
provider?: (string | null)
model?: (string | null)
base_url?: (string | null)
toolsets?: (string[] | null)
reasoning?: (("none" | "low" | "medium" | "high") | null)
max_turns?: (number | null)
ignore_rules?: (boolean | null)
sandbox?: (("workspace-write" | "read-only" | "off") | null)
name: string
schedule: string
prompt: string
tz?: (string | null)
cwd?: (string | null)
deliver?: (string | null)
overlap?: ("skip" | "queue")
missed?: ("catch_up" | "skip")
grace_seconds?: (number | null)
paused?: boolean
}
export interface CronJob {
job_id: string
name: string
schedule: string
tz: string
prompt: string
options: TurnOptions
cwd: (string | null)
paused: boolean
overlap: ("skip" | "queue")
missed: ("catch_up" | "skip")
grace_seconds: number
grace_default: boolean
deliver: (string | null)
next_run_at: (number | null)
created_at: number
updated_at: number
last_run: (CronRun | null)
}
/**
 * Per-turn options accepted by session.create (as session defaults) and prompt.submit.
 * 
 * ``None`` means "not sent": the daemon falls back to session, environment,
 * config and built-in defaults, in that order (SPEC §9).
 */
export interface TurnOptions {
provider?: (string | null)
model?: (string | null)
base_url?: (string | null)
toolsets?: (string[] | null)
reasoning?: (("none" | "low" | "medium" | "high") | null)
max_turns?: (number | null)
ignore_rules?: (boolean | null)
sandbox?: (("workspace-write" | "read-only" | "off") | null)
}
/**
 * One scheduled time of a job. ``status`` admitted: its admission
 * (``session_id``, ``admission_id``; ``admission_status``/``outcome`` are the
 * ledger's, ``result`` its answer once terminal); skipped: ``skip_reason``
 * (still_running | missed | paused) and, for missed/paused, ``missed_count``
 * times that did not fire. ``delivery_status`` (pending | delivered | failed)
 * only when the job delivers its answers.
 */
export interface CronRun {
run_id: string
job: string
scheduled_for: number
fired_at: number
kind: ("scheduled" | "late" | "catch_up" | "manual")
status: ("skipped" | "admitted")
skip_reason: (("still_running" | "missed" | "paused") | null)
missed_count: number
session_id: (string | null)
admission_id: (string | null)
input_id: (string | null)
admission_status: (("queued" | "started" | "unknown" | "terminal") | null)
outcome: (("completed" | "failed" | "cancelled" | "interrupted") | null)
result: (TurnResult | null)
delivery_status: (("pending" | "delivered" | "failed") | null)
delivery_error: (string | null)
}
export interface TurnResult {
text: string
usage: {
[k: string]: number | undefined
}
error: (string | null)
model: (string | null)
cost_usd: (number | null)
}
export interface CronListParams {

}
export interface CronListResult {
jobs: CronJob[]
}
export interface CronNameParams {
name: string
}
export interface CronRemoveResult {
removed: boolean
}
export interface CronRunsParams {
name: string
limit?: number
before?: (number | null)
}
export interface CronRunsResult {
runs: CronRun[]
next_before: (number | null)
}
/**
 * Change the keys that are sent (``deliver: null`` and ``grace_seconds: null``
 * clear them; a turn option sent as null returns to the default). A new schedule
 * or zone is counted from now.
 */
export interface CronUpdateParams {
provider?: (string | null)
model?: (string | null)
base_url?: (string | null)
toolsets?: (string[] | null)
reasoning?: (("none" | "low" | "medium" | "high") | null)
max_turns?: (number | null)
ignore_rules?: (boolean | null)
sandbox?: (("workspace-write" | "read-only" | "off") | null)
name: string
schedule?: (string | null)
prompt?: (string | null)
tz?: (string | null)
cwd?: (string | null)
deliver?: (string | null)
overlap?: (("skip" | "queue") | null)
missed?: (("catch_up" | "skip") | null)
grace_seconds?: (number | null)
}
/**
 * An error's ``data``: ``reason`` and ``detail`` always; the rest by reason.
 */
export interface ErrorData {
reason: string
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface ErrorObject {
code: number
message: string
data: ErrorData
}
/**
 * The ``event`` notification the owner sends a subscribed connection.
 */
export interface EventNotification {
jsonrpc: "2.0"
method: "event"
params: AnyEvent
}
export interface EventsSinceResult {
events: Event[]
last_seq: number
}
export interface ExportApproval {
approval_id: string
tool: string
kind: string
subject: string
why: string
/**
 * pending, approved, denied, expired or cancelled
 */
status: string
decision: (string | null)
cause: (string | null)
reason: (string | null)
}
export interface ExportCompaction {
compaction_id: string
first_index: number
end_index: number
summary: string
model: string
tokens_before: number
tokens_after: number
kind: ("auto" | "manual")
focus: (string | null)
usage: {
[k: string]: number | undefined
}
created_at: number
}
export interface ExportDelegation {
child_session_id: (string | null)
task_index: (number | null)
goal: (string | null)
status: (string | null)
summary: (string | null)
delegation_id: (string | null)
}
/**
 * A whole session as a program loads it: every turn, the whole transcript (its
 * messages in order, tool results whole), the compactions, and the totals.
 */
export interface ExportDocument {
format: "tether.session"
version: 1
exported_at: number
last_seq: number
session: ExportSession
turns: ExportTurn[]
compactions: ExportCompaction[]
messages: ExportMessage[]
}
export interface ExportSession {
session_id: string
title: (string | null)
source: (string | null)
cwd: (string | null)
model: (string | null)
provider: (string | null)
created_at: number
parent_session_id: (string | null)
forked_from: (string | null)
forked_at_seq: (number | null)
usage: SessionUsage
}
/**
 * One admission, from its start to its outcome.
 */
export interface ExportTurn {
admission_id: string
input_id: (string | null)
principal: (string | null)
/**
 * the whole prompt (null: it never ran)
 */
prompt: (string | null)
answer: string
/**
 * null: still running when exported
 */
outcome: (("completed" | "failed" | "cancelled" | "interrupted") | null)
error: (string | null)
usage: {
[k: string]: number | undefined
}
model: (string | null)
cost_usd: (number | null)
start_seq: (number | null)
end_seq: (number | null)
tool_calls: ExportToolCall[]
approvals: ExportApproval[]
delegations: ExportDelegation[]
}
export interface ExportToolCall {
call_id: string
name: string
/**
 * the JSON text the model wrote, verbatim
 */
arguments: string
/**
 * the whole result the model was given (null: the call never returned)
 */
result: (string | null)
error: (string | null)
}
/**
 * A transcript message with its position (compactions and turns refer to it).
 */
export interface ExportMessage {
role: ("user" | "assistant" | "tool" | "system")
content: (string | null)
tool_calls: ({
[k: string]: unknown | undefined
}[] | null)
tool_call_id: (string | null)
name: (string | null)
admission_id: (string | null)
created_at: number
index: number
}
export interface ForbiddenErrorData {
reason: "forbidden"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
/**
 * This connection executes the file tools' reads (``read``) and writes (``write``)
 * of ``session_id`` from now on; both false withdraws its offer.
 */
export interface FsOfferParams {
session_id: string
read?: boolean
write?: boolean
}
/**
 * This connection's offer now held for the session (both false: none of its own).
 */
export interface FsOfferResult {
session_id: string
read: boolean
write: boolean
}
/**
 * The answer to one ``fs.request``: ``text`` for a read, nothing for a write done,
 * ``error`` when the editor could not (the tool then uses the disk).
 */
export interface FsRespondParams {
request_id: string
text?: (string | null)
error?: (string | null)
}
/**
 * ``taken``: the tool got this answer (it was still waiting).
 */
export interface FsRespondResult {
status: "taken"
}
export interface InternalErrorErrorData {
reason: "internal_error"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface InterruptResult {
interrupted: boolean
admission_id: (string | null)
}
export interface InvalidParamsErrorData {
reason: "invalid_params"
detail: string
fields: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface InvalidRequestErrorData {
reason: "invalid_request"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface JsonRpcError {
jsonrpc: "2.0"
id: (string | number | null)
error: ErrorObject
}
/**
 * A request a client sends (a notification has no ``id``).
 */
export interface JsonRpcRequest {
jsonrpc: "2.0"
id?: (string | number | null)
method: string
params?: ({
[k: string]: unknown | undefined
} | null)
}
export interface JsonRpcResult {
jsonrpc: "2.0"
id: (string | number | null)
result: {
[k: string]: unknown | undefined
}
}
export interface ListenTcpParams {
address?: (string | null)
}
export interface ListenTcpResult {
tcp_url: string
opened: boolean
}
export interface McpAttachParams {
session_id: string
/**
 * @maxItems 16
 */
servers: McpServerSpec[]
}
/**
 * A server a client brings for one session (an editor's, over ACP): as in
 * config.yaml's ``mcp.servers``, either ``command`` (+ ``args``, ``env``) or
 * ``url`` (+ ``headers``).
 */
export interface McpServerSpec {
name: string
command: (string | null)
/**
 * @maxItems 256
 */
args: string[]
env: {
[k: string]: string | undefined
}
url: (string | null)
headers: {
[k: string]: string | undefined
}
}
export interface McpAttachResult {
servers: McpServerInfo[]
}
/**
 * A configured MCP server: how it is reached, its state and its tools.
 */
export interface McpServerInfo {
name: string
transport: ("stdio" | "http")
target: string
enabled: boolean
state: string
error: (string | null)
retry_at: (number | null)
starts: number
protocol: (string | null)
tools: McpToolInfo[]
sandbox: (string | null)
session_id: (string | null)
}
export interface McpToolInfo {
name: string
tool: string
description: string
}
export interface McpListParams {

}
export interface McpListResult {
servers: McpServerInfo[]
now: number
}
export interface McpPromptArgument {
name: string
description: (string | null)
required: boolean
}
export interface McpPromptInfo {
name: string
description: (string | null)
arguments: McpPromptArgument[]
}
export interface McpResourceInfo {
uri: string
name: string
description: (string | null)
mime_type: (string | null)
}
export interface McpResourceTemplateInfo {
uri_template: string
name: string
description: (string | null)
mime_type: (string | null)
}
export interface McpResourcesParams {
server: string
}
/**
 * A server's resources, resource templates and prompts (empty lists for what it
 * does not offer; at most 500 of each).
 */
export interface McpResourcesResult {
server: string
state: string
error: (string | null)
resources: McpResourceInfo[]
templates: McpResourceTemplateInfo[]
prompts: McpPromptInfo[]
}
export interface McpToolsParams {
server: string
}
export interface MethodNotFoundErrorData {
reason: "method_not_found"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface NotFoundErrorData {
reason: "not_found"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface OkResult {
ok: boolean
}
export interface OverloadedErrorData {
reason: "overloaded"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface ParseErrorErrorData {
reason: "parse_error"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
/**
 * A non-terminal admission as a snapshot shows it: its receipt and its prompt text.
 */
export interface PendingAdmission {
receipt: Receipt
text: string
}
/**
 * Where an admission stands. ``outcome`` and ``result`` are set once ``terminal``.
 * ``paused_by`` (sent only then) names the unknown admissions a queued one waits
 * behind: it runs once they are settled (prompt.resolve_unknown, ``tether resolve``).
 */
export interface Receipt {
admission_id: string
session_id: string
input_id: string
status: ("queued" | "started" | "unknown" | "terminal")
outcome: (("completed" | "failed" | "cancelled" | "interrupted") | null)
result: (TurnResult | null)
paused_by?: (string[] | null)
}
export interface PingParams {

}
export interface PingResult {
pong: boolean
}
export interface PromptCancelParams {
session_id: string
admission_id: string
}
export interface PromptResolveUnknownParams {
session_id: string
admission_id: string
}
export interface PromptSubmitParams {
/**
 * one of the owner's providers
 */
provider?: (("custom" | "openai" | "demo") | null)
model?: (string | null)
base_url?: (string | null)
/**
 * toolsets the owner offers (runtime.describe)
 */
toolsets?: (("terminal" | "files" | "delegation" | "mcp")[] | null)
reasoning?: (("none" | "low" | "medium" | "high") | null)
max_turns?: (number | null)
ignore_rules?: (boolean | null)
sandbox?: (("workspace-write" | "read-only" | "off") | null)
session_id: string
input_id: string
text: string
finite?: boolean
attachments?: (Attachment[] | null)
}
export interface RuntimeDescribeParams {

}
export interface RuntimeDescribeResult {
protocol: string
version: string
instance_id: string
epoch: number
pid: number
capabilities: string[]
providers: string[]
toolsets: string[]
turn_defaults: TurnDefaults
sandbox: string
sandbox_mode: ("workspace-write" | "read-only" | "off")
approvals_mode: ("ask" | "auto" | "never")
mcp_servers: McpServerInfo[]
}
/**
 * What a turn that names no provider, model or base_url runs with, from the owner's
 * configuration (a session's own options come first). ``base_url`` is the endpoint
 * its requests go to, without credentials or query (null for the offline demo).
 */
export interface TurnDefaults {
provider: string
model: string
base_url: (string | null)
}
export interface RuntimeDrainingErrorData {
reason: "runtime_draining"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
export interface RuntimeShutdownParams {

}
export interface SessionCompactParams {
session_id: string
/**
 * what the summary must keep, in a few words
 */
focus?: (string | null)
}
/**
 * ``compacted`` false: nothing to summarise (``reason`` says why).
 */
export interface SessionCompactResult {
compacted: boolean
compaction: (ExportCompaction | null)
reason: (string | null)
}
export interface SessionCreateParams {
/**
 * one of the owner's providers
 */
provider?: (("custom" | "openai" | "demo") | null)
model?: (string | null)
base_url?: (string | null)
/**
 * toolsets the owner offers (runtime.describe)
 */
toolsets?: (("terminal" | "files" | "delegation" | "mcp")[] | null)
reasoning?: (("none" | "low" | "medium" | "high") | null)
max_turns?: (number | null)
ignore_rules?: (boolean | null)
sandbox?: (("workspace-write" | "read-only" | "off") | null)
request_id?: (string | null)
source?: (string | null)
title?: (string | null)
cwd?: (string | null)
}
export interface SessionDeleteParams {
session_id: string
force?: boolean
}
export interface SessionDeleteResult {
deleted: string[]
}
export interface SessionDetachParams {
session_id: string
}
export interface SessionEventsSinceParams {
session_id: string
after_seq: number
limit?: number
}
export interface SessionExportParams {
session_id: string
format?: ("markdown" | "json")
}
/**
 * ``document`` for format json, ``markdown`` for format markdown.
 */
export interface SessionExportResult {
format: ("markdown" | "json")
document: (ExportDocument | null)
markdown: (string | null)
}
/**
 * Fork ``session_id`` at event ``at_seq`` (default: its last): the new session's
 * history is every turn that had ended by then.
 */
export interface SessionForkParams {
session_id: string
at_seq?: (number | null)
}
export interface SessionForkResult {
/**
 * the new session
 */
session_id: string
forked_from: string
/**
 * the seq of the last turn end the fork holds (at most at_seq; 0: none)
 */
forked_at_seq: number
message_count: number
/**
 * compaction records copied with the messages
 */
compactions: number
}
export interface SessionInfo {
source: (string | null)
title: (string | null)
cwd: (string | null)
model: (string | null)
provider: (string | null)
toolsets: (string[] | null)
created_at: number
parent_session_id: (string | null)
usage: (SessionUsage | null)
context: (ContextFill | null)
forked_from: (string | null)
forked_at_seq: (number | null)
}
export interface SessionInterruptParams {
session_id: string
}
export interface SessionListParams {
limit?: number
cursor?: (string | null)
}
export interface SessionListResult {
sessions: SessionSummary[]
next_cursor: (string | null)
}
export interface SessionSummary {
session_id: string
title: (string | null)
source: (string | null)
created_at: number
updated_at: number
message_count: number
running: boolean
parent_session_id: (string | null)
cwd: (string | null)
usage: (SessionUsage | null)
}
/**
 * Exactly one of ``prefix`` (a session id or its start, with or without the
 * ``ses_``) and ``last`` (the most recently active top-level session with
 * messages whose source is not automated: not cron, the HTTP endpoint, a helper).
 */
export interface SessionLookupParams {
prefix?: (string | null)
last?: boolean
}
export interface SessionLookupResult {
matches: SessionSummary[]
more: boolean
}
export interface SessionPruneParams {
older_than_seconds?: number
dry_run?: boolean
}
export interface SessionPruneResult {
pruned: string[]
}
export interface SessionRenameParams {
session_id: string
title: string
}
export interface SessionRenameResult {
session_id: string
title: string
}
export interface SessionResumeParams {
session_id: string
after_seq?: (number | null)
}
export interface ShutdownResult {
draining: boolean
}
/**
 * A session as a viewer needs it on (re)attach; ``events`` only with ``after_seq``;
 * ``approvals``: its pending approval prompts, for a viewer that attaches late.
 */
export interface Snapshot {
session_id: string
stored_session_id: string
info: SessionInfo
messages: TranscriptMessage[]
pending: PendingAdmission[]
running: (string | null)
last_seq: number
events: (Event[] | null)
approvals: ApprovalPrompt[]
}
export interface TranscriptMessage {
role: ("user" | "assistant" | "tool" | "system")
content: (string | null)
tool_calls: ({
[k: string]: unknown | undefined
}[] | null)
tool_call_id: (string | null)
name: (string | null)
admission_id: (string | null)
created_at: number
}
export interface StorageUnavailableErrorData {
reason: "storage_unavailable"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
storage_reason: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}
/**
 * How a command in an editor's terminal ended: its exit code, or the signal that
 * ended it (ACP's TerminalExitStatus).
 */
export interface TerminalExit {
exit_code: (number | null)
signal: (string | null)
}
/**
 * This connection runs the sandboxed commands of ``session_id``'s terminal tool in
 * its editor's terminals from now on; ``run`` false withdraws its offer.
 */
export interface TerminalOfferParams {
session_id: string
run?: boolean
}
/**
 * Whether this connection's offer is the one now held for the session.
 */
export interface TerminalOfferResult {
session_id: string
run: boolean
}
/**
 * The answer to one ``terminal.request``: what its ``op`` gives (``create``:
 * ``terminal_id``; ``output``: ``output``, ``truncated`` and, once it ended,
 * ``exit_status``; ``wait_for_exit``: ``exit_status``; ``kill``, ``release``:
 * nothing), or ``error``. ``refused``: the editor answered the request with an error
 * of its own, so it did not do it (a ``create`` refused started nothing).
 */
export interface TerminalRespondParams {
request_id: string
terminal_id?: (string | null)
output?: (string | null)
truncated?: (boolean | null)
exit_status?: (TerminalExit | null)
error?: (string | null)
refused?: boolean
}
/**
 * ``taken``: the tool got this answer (it was still waiting).
 */
export interface TerminalRespondResult {
status: "taken"
}
export interface TokenCreateParams {
label?: (string | null)
ttl_seconds?: (number | null)
once?: (boolean | null)
}
/**
 * The bearer token is shown once; the owner stores only its hash.
 */
export interface TokenCreateResult {
token: string
token_id: string
}
/**
 * A token as listed: never the token itself (the owner keeps only its hash).
 */
export interface TokenInfo {
token_id: string
label: (string | null)
created_at: number
expires_at: (number | null)
once: boolean
}
export interface TokenListParams {

}
export interface TokenListResult {
tokens: TokenInfo[]
}
export interface TokenRevokeParams {
token_id: string
}
export interface TokenRevokeResult {
revoked: boolean
closed_connections: number
}
export interface UnknownExecutionErrorData {
reason: "unknown_execution"
detail: string
/**
 * invalid_params: every problem found (always sent with it)
 */
fields?: (FieldProblem[] | null)
/**
 * admission_conflict: the admission the input id belongs to
 */
admission_id?: (string | null)
/**
 * unknown_outcome and friends: the admissions concerned
 */
admission_ids?: (string[] | null)
/**
 * overloaded, invalid_request: the bound
 */
limit?: (number | null)
/**
 * storage_unavailable: full, locked, readonly, io, constraint
 */
storage_reason?: (string | null)
/**
 * internal_error: the id to find in the owner's log
 */
error_id?: (string | null)
/**
 * not_found: the session asked for
 */
session_id?: (string | null)
/**
 * method_not_found: the name asked for
 */
method?: (string | null)
/**
 * invalid_params for after_seq: the session's last seq
 */
last_seq?: (number | null)
/**
 * parse_error: lone_surrogate when the text was not Unicode
 */
problem?: (string | null)
[k: string]: unknown | undefined
}

export const PROTOCOL = "tether/1" as const;

/** Every method: its params (what the owner accepts) and result (what it sends). */
export interface Methods {
  /** Identify the owner: protocol, version, instance id, epoch, pid, capabilities. */
  "runtime.describe": { params: RuntimeDescribeParams; result: RuntimeDescribeResult };
  /** Liveness check; answers {pong: true}. */
  "ping": { params: PingParams; result: PingResult };
  /** Ask the owner to drain (refuse new admissions, let running turns finish) and exit. */
  "runtime.shutdown": { params: RuntimeShutdownParams; result: ShutdownResult };
  /** Open the owner's TCP listener (WebSocket, the viewer page, the HTTP API) if it has none, until it stops; Unix socket only. Running turns go on (`tether web`). */
  "runtime.listen_tcp": { params: ListenTcpParams; result: ListenTcpResult };
  /** Mint a bearer token for the TCP listener; the token is shown once. */
  "token.create": { params: TokenCreateParams; result: TokenCreateResult };
  /** List the TCP tokens (ids, labels, expiry; never the tokens); Unix socket only. */
  "token.list": { params: TokenListParams; result: TokenListResult };
  /** Revoke a TCP token and close the connections using it; Unix socket only. */
  "token.revoke": { params: TokenRevokeParams; result: TokenRevokeResult };
  /** Create a session (idempotent by request_id) and subscribe this connection to it. */
  "session.create": { params: SessionCreateParams; result: Snapshot };
  /** Snapshot a session, with events after after_seq, and subscribe this connection. */
  "session.resume": { params: SessionResumeParams; result: Snapshot };
  /** List sessions a page at a time; pass next_cursor back as cursor for the next page. */
  "session.list": { params: SessionListParams; result: SessionListResult };
  /** Replay a session's durable events after a seq. */
  "session.events.since": { params: SessionEventsSinceParams; result: EventsSinceResult };
  /** Stop receiving a session's events on this connection; the session lives on. */
  "session.detach": { params: SessionDetachParams; result: OkResult };
  /** Stop the session's running turn; its admission ends terminal/cancelled. */
  "session.interrupt": { params: SessionInterruptParams; result: InterruptResult };
  /** Admit a prompt durably (idempotent by input_id) and return its receipt. */
  "prompt.submit": { params: PromptSubmitParams; result: Receipt };
  /** Look up an admission's receipt by admission_id or input_id. */
  "prompt.receipt": { params: PromptReceiptParams; result: Receipt };
  /** Cancel a queued admission, or interrupt it if it has started. */
  "prompt.cancel": { params: PromptCancelParams; result: Receipt };
  /** Settle an unknown admission as interrupted so the session's queue resumes. */
  "prompt.resolve_unknown": { params: PromptResolveUnknownParams; result: Receipt };
  /** Answer a pending approval prompt; the first answer wins, a later one is told already_resolved. */
  "approval.respond": { params: ApprovalRespondParams; result: ApprovalRespondResult };
  /** Pending approval prompts of one session, or of every session. */
  "approval.list": { params: ApprovalListParams; result: ApprovalListResult };
  /** The approval rules in force: config allow/deny, and remembered answers. */
  "approval.rules": { params: ApprovalRulesParams; result: ApprovalRulesResult };
  /** Forget a remembered answer (a session or always rule) by its rule_id. */
  "approval.rule_remove": { params: ApprovalRuleRemoveParams; result: ApprovalRuleRemoveResult };
  /** Create a scheduled job (a prompt run on a schedule, each run a finite admission). */
  "cron.create": { params: CronCreateParams; result: CronJob };
  /** List scheduled jobs by name. */
  "cron.list": { params: CronListParams; result: CronListResult };
  /** A scheduled job, with its last run. */
  "cron.get": { params: CronNameParams; result: CronJob };
  /** Change a job's schedule, zone, prompt, options, delivery or policies. */
  "cron.update": { params: CronUpdateParams; result: CronJob };
  /** Stop a job firing; times that pass while paused are recorded skipped(paused). */
  "cron.pause": { params: CronNameParams; result: CronJob };
  /** Let a paused job fire again, from its next time after now. */
  "cron.resume": { params: CronNameParams; result: CronJob };
  /** Delete a job and its run history (the runs' sessions stay). */
  "cron.remove": { params: CronNameParams; result: CronRemoveResult };
  /** Fire a job now; returns the run, whose receipt prompt.receipt reaches. */
  "cron.run": { params: CronNameParams; result: CronRun };
  /** A job's runs, newest first, each with its admission's status and outcome. */
  "cron.runs": { params: CronRunsParams; result: CronRunsResult };
  /** Set a session's title. */
  "session.rename": { params: SessionRenameParams; result: SessionRenameResult };
  /** Delete an idle session and its delegation child sessions; refused while work is open. */
  "session.delete": { params: SessionDeleteParams; result: SessionDeleteResult };
  /** Delete empty sessions (no message, admission or child) older than older_than_seconds. */
  "session.prune": { params: SessionPruneParams; result: SessionPruneResult };
  /** The configured MCP servers, their state and their tools (starts none). */
  "mcp.list": { params: McpListParams; result: McpListResult };
  /** Start one MCP server if it is not running, and list its state and tools. */
  "mcp.tools": { params: McpToolsParams; result: McpServerInfo };
  /** Give one session MCP servers of the caller's (an editor's); Unix socket only. */
  "mcp.attach": { params: McpAttachParams; result: McpAttachResult };
  /** This connection executes the file tools' reads and/or writes of a session (an editor's buffers) while it lives; the newest offer wins; Unix socket only. */
  "fs.offer": { params: FsOfferParams; result: FsOfferResult };
  /** Answer an fs.request sent to this connection: text read, write done, or error (the tool then uses the disk); an unknown or expired request is not_found. */
  "fs.respond": { params: FsRespondParams; result: FsRespondResult };
  /** This connection runs a session's sandboxed commands in its editor's terminals while it lives; the newest offer wins; Unix socket only. */
  "terminal.offer": { params: TerminalOfferParams; result: TerminalOfferResult };
  /** Answer a terminal.request sent to this connection (what its op gives, or error); an unknown or expired request is not_found. */
  "terminal.respond": { params: TerminalRespondParams; result: TerminalRespondResult };
  /** Start one MCP server if it is not running, and list its resources and prompts. */
  "mcp.resources": { params: McpResourcesParams; result: McpResourcesResult };
  /** Find sessions by id prefix, or the most recently active top-level one (last). */
  "session.lookup": { params: SessionLookupParams; result: SessionLookupResult };
  /** Copy a session's history up to a seq (its turns ended by then, compactions included) into a new session; the original is untouched. */
  "session.fork": { params: SessionForkParams; result: SessionForkResult };
  /** The whole session as a document: turns, tool calls with results, approvals, delegations, compactions, usage (json or markdown). */
  "session.export": { params: SessionExportParams; result: SessionExportResult };
  /** Summarise the session's older turns now (all but the newest), so requests send the summary in their place; the transcript stays whole. */
  "session.compact": { params: SessionCompactParams; result: SessionCompactResult };
}
export type MethodName = keyof Methods;

/** Event type -> its payload. */
export interface EventPayloads {
  "session.info": SessionInfoPayload;
  "message.start": MessageStartPayload;
  "message.delta": MessageDeltaPayload;
  "reasoning.delta": ReasoningDeltaPayload;
  "tool.start": ToolStartPayload;
  "tool.complete": ToolCompletePayload;
  "tool.progress": ToolProgressPayload;
  "subagent.start": SubagentStartPayload;
  "subagent.complete": SubagentCompletePayload;
  "delegation.dispatched": DelegationDispatchedPayload;
  "delegation.complete": DelegationCompletePayload;
  "message.complete": MessageCompletePayload;
  "approval.requested": ApprovalRequestedPayload;
  "approval.resolved": ApprovalResolvedPayload;
  "process.complete": ProcessCompletePayload;
  "session.replay_gap": ReplayGapPayload;
  "cron.notice": CronNoticePayload;
  "model.retry": ModelRetryPayload;
  "session.compacted": SessionCompactedPayload;
  "fs.request": FsRequestPayload;
  "terminal.request": TerminalRequestPayload;
}
export type EventType = keyof EventPayloads;
export const EVENT_TYPES: readonly EventType[] = ["session.info","message.start","message.delta","reasoning.delta","tool.start","tool.complete","tool.progress","subagent.start","subagent.complete","delegation.dispatched","delegation.complete","message.complete","approval.requested","approval.resolved","process.complete","session.replay_gap","cron.notice","model.retry","session.compacted","fs.request","terminal.request"];

/** Error reason -> its data; the code of each is in ERROR_CODES. */
export interface ErrorDataByReason {
  "parse_error": ParseErrorErrorData;
  "invalid_request": InvalidRequestErrorData;
  "method_not_found": MethodNotFoundErrorData;
  "invalid_params": InvalidParamsErrorData;
  "internal_error": InternalErrorErrorData;
  "not_found": NotFoundErrorData;
  "admission_conflict": AdmissionConflictErrorData;
  "runtime_draining": RuntimeDrainingErrorData;
  "unknown_execution": UnknownExecutionErrorData;
  "overloaded": OverloadedErrorData;
  "storage_unavailable": StorageUnavailableErrorData;
  "forbidden": ForbiddenErrorData;
}
export type ErrorReason = keyof ErrorDataByReason;
export const ERROR_CODES: Readonly<Record<ErrorReason, number>> = {"parse_error":-32700,"invalid_request":-32600,"method_not_found":-32601,"invalid_params":-32602,"internal_error":-32603,"not_found":-32004,"admission_conflict":-32009,"runtime_draining":-32010,"unknown_execution":-32011,"overloaded":-32012,"storage_unavailable":-32013,"forbidden":-32003};
