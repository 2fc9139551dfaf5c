"""JSON Schema export of the whole protocol: every method, the event envelope, the errors.

``tether schema`` prints ``protocol_schema()``; it is derived from the method
table and the models, so it cannot drift from what the dispatcher enforces.
"""

from __future__ import annotations

from typing import Any

from .envelope import EVENT_TYPES
from .errors import ERRORS
from .methods import METHODS
from .models import Event
from .protocol import EVENT_METHOD, PROTOCOL

__all__ = ["protocol_schema"]


def protocol_schema() -> dict[str, Any]:
    """The protocol as one JSON-serialisable dict.

    Params schemas describe what the owner accepts (validation mode); result and
    event schemas describe what it sends (serialisation mode).
    """
    return {
        "protocol": PROTOCOL,
        "methods": {
            name: {
                "doc": m.doc,
                "params": m.params.model_json_schema(mode="validation"),
                "result": m.result.model_json_schema(mode="serialization"),
            }
            for name, m in METHODS.items()
        },
        "events": {
            "method": EVENT_METHOD,
            "envelope": Event.model_json_schema(mode="serialization"),
            "types": list(EVENT_TYPES),
        },
        "errors": [{"code": cls.code, "reason": reason} for reason, cls in ERRORS.items()],
    }
