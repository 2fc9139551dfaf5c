"""The owner's connections: the WebSocket server, its method handlers, the TCP listener,
bearer tokens, peer identification, the viewer page, and the fan-out of committed events.

May import: config, runtime, model, ledger, approvals, engine, toolsets (which processes are
the agent's), sessions, and http (the TCP listener hands plain HTTP to it). Nothing but the
owner imports transport.
"""
