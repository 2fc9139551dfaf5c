"""tether.daemon.fleet: one owner as a node of a fleet on a shared PostgreSQL database.

node.py: leases, fencing, heartbeat and the recovery of dead nodes. Nothing
here runs on the home's own state.db (docs/scale-out.md).
"""
