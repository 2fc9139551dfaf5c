"""The wire's pydantic models: every method's params and result, the events and
the JSON-RPC frames (the schema's own), one module per area.

``core``: the shared field types, the session and prompt methods, the event
envelope (what ``from tether.rpc.models import X`` gives); ``base``: the strict
`Model` every params and result model derives from; the rest by area:
``approvals``, ``cron``, ``events`` (each event type's payload), ``frames``
(requests, results and errors as the schema describes them), ``fs`` and
``terminal`` (an editor's files and terminals), ``history``, ``mcp``,
``sessions``, ``tokens``, ``usage``.

May import: the rest of ``tether.rpc`` and pydantic; nothing of the daemon's.
"""

from .core import *  # noqa: F403 - the package is where callers find the core models
from .core import __all__ as __all__  # noqa: PLE0604
