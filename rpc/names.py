"""Names the owner accepts in turn options, for the schema, clients and the owner.

The one table of them: the owner checks turn options against these
(daemon/config/turn.py, daemon/model/provider.py import them), the schema lists them as
enums, and clients may offer them.
"""

from __future__ import annotations

__all__ = ["PROVIDER_NAMES", "TOOLSETS", "AUTOMATED_SOURCES"]

#: the ``provider`` values session.create and prompt.submit accept
PROVIDER_NAMES: tuple[str, ...] = ("custom", "openai", "demo")
#: the ``toolsets`` values they accept (runtime.describe lists them too)
TOOLSETS: tuple[str, ...] = ("terminal", "files", "delegation", "mcp")
#: session sources no person typed into (scheduled runs, the HTTP endpoint, helper
#: agents): left out of ``session.lookup {last}`` and of the lists people read
AUTOMATED_SOURCES: tuple[str, ...] = ("cron", "api", "delegation")
