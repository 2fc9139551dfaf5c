"""Approvals: what a tool call may do without asking, and asking a person durably.

- policy.py: the pure policy (hard line, dangerous patterns, read-only list,
  rules, modes) → allow / deny / ask;
- service.py: `ApprovalService`, prompts as durable rows that any viewer can
  answer, the wait with its timeout, cancellation, recovery, remembered answers.
"""
