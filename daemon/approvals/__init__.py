"""Approvals: what a tool call may do without asking, and asking a person durably.

- policy.py: the pure policy (hard line, dangerous patterns, read-only list,
  rules, modes, sandbox) → allow / deny / ask; shell.py parses a command line,
  wrappers.py and interpreters.py look inside exec-style wrappers, classify.py
  (hard line, writes, private reads), readonly.py (the read-only list) and
  patterns.py (dangerous patterns) say what one simple command is, checks.py
  what that means with or without a sandbox;
- service.py: `ApprovalService`, prompts as durable rows that any viewer can
  answer, the wait with its timeout, cancellation, recovery, remembered answers.

May import: config, runtime, ledger (prompts are journal units). Never the engine or a toolset.
"""
