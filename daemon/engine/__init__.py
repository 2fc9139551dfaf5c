"""The agent engine: per-turn settings, the transcript shown to the model, the agent loop,
the turn runner, its progress sink, the context budget and compaction, and what a tool is.

May import: config, runtime, model, ledger, approvals (the policy a tool call is checked by).
"""
