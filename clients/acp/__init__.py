"""tether.clients.acp: ``tether acp``, the Agent Client Protocol on stdin/stdout for an
editor, as one more viewer of the owner.

- ``agent``: the ACP agent: sessions, prompts, cancel, permission requests.
- ``updates``: tether's events and transcript as ACP ``session/update`` notifications.
- ``options``: the session settings an editor shows (config options, modes).
- ``asking``: permission requests, withdrawn when an approval is answered elsewhere.
- ``plan``: a turn's delegations as the editor's plan.
- ``files``, ``terminals``: the editor's ``fs/*`` and ``terminal/*`` executing the
  owner's checked file reads and writes and its sandboxed commands; ``relay``:
  what the two share (each request answered in a task of its own).
- ``usage``: the context window's fill and the session's cost (``usage_update``).
- ``servers``: the editor's MCP servers, given to its sessions (mcp.attach).
- ``session``: what is kept for each session an editor has open.

May import: the library (``tether.clients.library``), ``tether.rpc`` and the
``acp`` distribution; never the CLI or the terminal chat. The CLI imports it only
when ``tether acp`` runs.
"""
