"""Names the owner accepts in turn options, for the schema and for clients.

The owner's own tables (daemon/provider.py ``PROVIDER_NAMES``, daemon/settings.py
``TOOLSETS``) are the ones it checks against; a test keeps these equal to them,
since rpc/ may import nothing of the daemon.
"""

from __future__ import annotations

__all__ = ["PROVIDER_NAMES", "TOOLSETS"]

#: the ``provider`` values session.create and prompt.submit accept
PROVIDER_NAMES: tuple[str, ...] = ("custom", "openai", "demo")
#: the ``toolsets`` values they accept (runtime.describe lists them too)
TOOLSETS: tuple[str, ...] = ("delegation",)
