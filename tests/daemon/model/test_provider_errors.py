"""Every exception httpx can raise becomes a classified failure, and the key stays out of it."""

from __future__ import annotations

import inspect

import httpx
import pytest

from tether.daemon.model.errors import HTTP_FAILURES, attempt_failure, scrub_key

REASONS = {"rate_limited", "server_error", "timeout", "connection_error", "auth_failed",
           "not_found", "bad_request", "malformed_response"}
#: httpx exceptions no request raises (a cookie jar lookup)
NOT_FROM_A_REQUEST = {httpx.CookieConflict}
URL = "http://127.0.0.1:1/v1/chat/completions"


def instance(cls: type[Exception]) -> Exception:
    params = inspect.signature(cls.__init__).parameters
    if "response" in params:
        request = httpx.Request("POST", URL)
        return cls("boom", request=request, response=httpx.Response(500, request=request))
    return cls() if len(params) == 1 else cls("boom")


def classify(exc: Exception):
    return attempt_failure(exc, url=URL, connect_timeout=10, read_timeout=120)


HTTPX_EXCEPTIONS = sorted(
    (c for c in vars(httpx).values() if inspect.isclass(c) and issubclass(c, Exception)
     and c not in NOT_FROM_A_REQUEST),
    key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", HTTPX_EXCEPTIONS, ids=lambda c: c.__name__)
def test_every_httpx_exception_is_a_classified_failure(cls):
    assert issubclass(cls, HTTP_FAILURES)
    failure = classify(instance(cls))
    assert failure.reason in REASONS


@pytest.mark.parametrize("exc, reason, retryable", [
    (httpx.DecodingError("Error -3 while decompressing data: incorrect header check"),
     "malformed_response", False),
    (httpx.TooManyRedirects("Exceeded maximum allowed redirects."), "bad_request", False),
    (httpx.RemoteProtocolError("peer closed connection"), "connection_error", True),
    (httpx.ReadError("reset"), "connection_error", True),
    (httpx.ConnectTimeout("slow"), "timeout", True),
    (httpx.WriteTimeout("slow"), "timeout", True),
    (httpx.PoolTimeout("busy"), "timeout", True),
    (httpx.UnsupportedProtocol("ftp"), "bad_request", False),
    (httpx.StreamClosed(), "connection_error", False),
    (UnicodeEncodeError("ascii", "é", 0, 1, "ordinal not in range(128)"),
     "bad_request", False),
])
def test_classification(exc, reason, retryable):
    failure = classify(exc)
    assert (failure.reason, failure.retryable) == (reason, retryable)


def test_a_header_h11_refuses_is_not_quoted():
    key = "sk-live-0123456789\n"
    failure = classify(httpx.LocalProtocolError(f"Illegal header value b'Bearer {key!r}'"))
    assert (failure.reason, failure.retryable) == ("bad_request", False)
    assert "0123456789" not in failure.what


@pytest.mark.parametrize("key", ["sk-live-0123456789", "sk-live-0123456789\n", " sk-live-0123456789 "])
def test_the_key_is_scrubbed_as_sent_stripped_or_escaped(key):
    text = f"plain {key} / stripped {key.strip()} / escaped {key!r}"
    assert "0123456789" not in scrub_key(text, key)
