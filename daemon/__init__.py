"""tether.daemon: the owner process.

It owns everything that runs on behalf of a home. Its folders are its architecture, lowest
first: config (config.yaml and per-turn settings), runtime (the home, its lock, the
supervisor), model (the model client), ledger (admissions, journal, scheduler, recovery, late
delivery, event fan-out), approvals, engine (the agent loop and turn runner), toolsets, mcp,
delegation, cron, sessions, fleet, http, transport (the WebSocket server and its handlers).
services.py wires them together (owner.py runs the process around them), demo.py is the offline stand-in model wired when nothing is
configured; docs/architecture.md maps the modules and tests/test_layout.py holds the direction
between the folders. The bench (`tether bench`) is its own package, beside the clients.
"""
