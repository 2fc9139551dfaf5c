"""Whether a model request streams: ``model.stream`` (auto | true | false) and what the
owner learned about each endpoint.

Local model servers differ in what they can stream: llama-cpp-python's
``chatml-function-calling`` format sends the role chunk and then ends the stream when
a request carries tools, some servers fail mid-stream, some refuse ``stream`` with a
4xx that says so. With ``auto`` (the default) a streamed request that fails like that
before any text, reasoning or tool call reached the turn is asked again once without
streaming, and `StreamMemory` remembers the (base_url, model) pair so later requests
to it go straight to a plain answer, until the owner restarts. ``true`` always streams
(the failure is the turn's), ``false`` never does. docs/configuration.md has the table
of known servers.
"""

from __future__ import annotations

import logging
import re
import threading

from ..config.values import STREAM_MODES, normalise_mode
from .completions import AttemptFailed

__all__ = ["STREAM_MODES", "CannotStream", "StreamMemory", "normalise_mode", "stream_failure"]

log = logging.getLogger(__name__)

#: the values of ``model.stream``
class CannotStream(Exception):
    """A streamed attempt failed in a way that asking without streaming may fix."""

    def __init__(self, failure: AttemptFailed) -> None:
        super().__init__(failure.what)
        self.failure = failure


class StreamMemory:
    """The (base_url, model) pairs that could not stream: asked without streaming from
    then on. One per owner, in memory only (a restarted owner tries streaming again,
    so a server that was upgraded or restarted with other flags is met as it is now)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plain: dict[tuple[str, str], str] = {}

    def streams(self, base_url: str, model: str) -> bool:
        with self._lock:
            return (base_url, model) not in self._plain

    def remember(self, base_url: str, model: str, why: str) -> None:
        with self._lock:
            if (base_url, model) in self._plain:
                return
            self._plain[(base_url, model)] = why
        log.warning("model %s at %s cannot stream (%s): asking it without streaming until "
                    "the owner restarts; set model.stream: false to skip the first try",
                    model, base_url, why)

    def known(self) -> dict[tuple[str, str], str]:
        """Every pair that falls back, with the failure that taught it."""
        with self._lock:
            return dict(self._plain)


def stream_failure(failure: AttemptFailed, *, in_stream: bool, answered: bool) -> bool:
    """Whether ``failure`` of a streamed attempt says the server cannot stream this request,
    so that the same request without streaming may succeed.

    ``in_stream``: the failure came while reading a 2xx event stream (not from the status
    line); ``answered``: text, reasoning or a tool call had already arrived, after which
    asking again would repeat the answer. A timeout is never one (the server is slow, not
    unable to stream), nor a rate limit or an authentication failure.
    """
    if answered:
        return False
    if in_stream:
        return failure.reason in ("malformed_response", "server_error", "connection_error")
    if failure.reason == "bad_request" and failure.status is not None:
        # "stream", "streaming", "stream_options"; not "upstream" (a proxy's words)
        return re.search(r"(?<![a-z])stream", f"{failure.body} {failure.what}".lower()) is not None
    return False
