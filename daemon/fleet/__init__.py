"""A fleet of owners ("nodes") on one PostgreSQL database (docs/scale-out.md).

Each node has its own home and shares the store; what it takes to behave as
one service lives here. `node.py`: placement, leases, fencing, heartbeat, the
recovery of dead nodes and stops asked through other nodes. `feed.py`: every
node's viewers see every session's events, whichever node committed them.
Nothing here runs on the home's own state.db.

May import: config, runtime, ledger.
"""
