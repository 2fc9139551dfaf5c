"""tether.clients.library: the async Python client of a tether owner, what a program
embedding tether imports.

- ``client``: ``TetherClient``: typed calls, reconnects, the resilient submit.
- ``stream``: ``SessionStream``, a session's events in order, across reconnects.
- ``connection``: one WebSocket: request/reply matching, event routing.
- ``discovery``: owner liveness (descriptor, pid, socket), detached autostart.
- ``nodes``: the TCP nodes of a fleet, tried in order.
- ``joining``: joining a session mid-turn.
- ``remote``, ``exits``, ``usage_fmt``, ``version``: what every front end shares:
  which owner and which session a person named, exit codes and the one-line error,
  tokens and cost as text, the installed version.

May import: ``tether.rpc``'s pydantic-free modules; never the CLI, the terminal chat
or the ACP adapter (tests/test_layout.py).
"""
