"""`delegate_task`: child agents, joined inline or delivered once in the background.

- tasks.py: the tool's arguments, a child's prompt and toolsets, result shapes
  (pure; the demo provider reads its prompts from here).
- children.py: run a call's tasks as child agents, bounded, each in its own
  child session.
- background.py: a dispatched delegation's row, its run, its exactly-once
  delivery into the origin session, and recovery after a restart.
- tool.py: the tool itself, which picks inline or background by the calling
  turn's channel capability.

docs/delegation.md has the whole story (events, limits, the exactly-once
argument).

May import: config, runtime, model, ledger, approvals, engine. No toolset imports delegation.
"""
