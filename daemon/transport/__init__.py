"""The owner's connections: the WebSocket server, its method handlers, the TCP listener,
bearer tokens, peer identification, the viewer page, and the fan-out of committed events.

May import: config, runtime, ledger, sessions, engine (for the services the handlers call),
approvals, cron, delegation, mcp, model. Nothing below it imports transport.
"""
