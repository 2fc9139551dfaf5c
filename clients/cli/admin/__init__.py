"""tether.clients.cli.admin: the commands that look after the owner itself rather than
its sessions: ``service`` (an owner that starts at login), ``config check``,
``doctor``, ``logs``, ``status --store`` (a fleet's nodes), ``mcp``, ``token`` and ``web``.

May import: what the CLI may (the library, ``cli``'s own modules, the terminal chat's
formatting); the daemon only lazily, inside the command that needs it.
"""
