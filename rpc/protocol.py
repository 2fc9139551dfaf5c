"""The protocol's fixed names and ceilings, which the owner and every client share.

Plain constants, no imports: a client reads them without loading pydantic, and
the models, the transport and the owner use these same objects rather than
copies of them.
"""

from __future__ import annotations

__all__ = [
    "EVENT_METHOD",
    "JSONRPC_VERSION",
    "MAX_ATTACHMENTS",
    "MAX_ID_CHARS",
    "MAX_SEQ",
    "MAX_TEXT_CHARS",
    "PROTOCOL",
    "SUBPROTOCOL",
    "TOKEN_PREFIX",
]

#: what ``runtime.describe`` and daemon.json name as the protocol; a client refuses
#: an owner that names another one
PROTOCOL = "tether/1"
#: the ``jsonrpc`` member of every request and reply
JSONRPC_VERSION = "2.0"
#: the method of the owner's notification carrying one event envelope as params
EVENT_METHOD = "event"

#: the WebSocket subprotocol a client may offer; the owner then echoes it (SPEC §1)
SUBPROTOCOL = "tether.v1"
#: a subprotocol ``tether.token.<token>`` carries a bearer token, for peers (browsers)
#: that cannot set an Authorization header (SPEC §10)
TOKEN_PREFIX = "tether.token."

# Protocol-level ceilings. They bound what a single frame may ask for; the owner
# enforces its own, usually lower, configured limits on top of them.
#: longest id (session_id, input_id, request_id, admission_id) a request may carry
MAX_ID_CHARS = 200
#: longest prompt or attachment text
MAX_TEXT_CHARS = 1_000_000
#: most attachments on one prompt.submit
MAX_ATTACHMENTS = 16
#: a seq is stored as a SQLite INTEGER (signed 64-bit); a larger one cannot name an event
MAX_SEQ = 2**63 - 1
