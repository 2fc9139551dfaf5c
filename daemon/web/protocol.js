/* eslint-disable */
// Generated from `tether schema` (protocol tether/1) by scripts/gen-types.mjs.
// Do not edit: run `npm run gen` after changing the protocol.
export const PROTOCOL = "tether/1";
export const EVENT_TYPES = ["session.info", "message.start", "message.delta", "reasoning.delta", "tool.start", "tool.complete", "tool.progress", "subagent.start", "subagent.complete", "delegation.dispatched", "delegation.complete", "message.complete", "approval.requested", "approval.resolved", "process.complete", "session.replay_gap", "cron.notice", "model.retry", "session.compacted", "fs.request", "terminal.request"];
export const ERROR_CODES = { "parse_error": -32700, "invalid_request": -32600, "method_not_found": -32601, "invalid_params": -32602, "internal_error": -32603, "not_found": -32004, "admission_conflict": -32009, "runtime_draining": -32010, "unknown_execution": -32011, "overloaded": -32012, "storage_unavailable": -32013, "forbidden": -32003 };
