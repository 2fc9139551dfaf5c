"""How a model request fails: `ProviderError`, and the one translation of httpx's exceptions.

Every failure a caller of the model client can see is a `ProviderError`. Its ``reason``
is one of:

=================== ====================================================== =========
reason              when                                                   retryable
=================== ====================================================== =========
rate_limited        HTTP 429                                               yes
server_error        HTTP 5xx, or an ``error`` object inside a 200 body      yes
timeout             connect timeout, no bytes for ``read_timeout``, 408     yes
timeout             the request's deadline (``request_timeout``) passed     no
connection_error    refused, reset, closed mid-body, a broken HTTP reply    yes
auth_failed         HTTP 401 / 403                                         no
not_found           HTTP 404 (usually a wrong base_url or model)           no
bad_request         any other 4xx, a URL httpx cannot speak to, a header   no
                    (say, the API key) HTTP cannot carry, a redirect loop
malformed_response  a body or SSE stream that is not a chat completion,    no
                    a body that does not decode as its Content-Encoding
                    says, or an answer larger than ``max_response_bytes``
=================== ====================================================== =========

A request's deadline bounds all of its attempts, so once it has passed there is nothing
left to retry in. `attempt_failure` maps each exception httpx can raise (the tree under
``httpx.HTTPError``, ``httpx.StreamError`` and ``httpx.InvalidURL``) to the one attempt's
`AttemptFailed`; the retry loop in provider.py turns the last one into a `ProviderError`.
No other module catches httpx exceptions (probe.py, `tether doctor`'s look at an endpoint,
catches `BUILD_FAILURES` and classifies them here too).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from .answers import Response
from .completions import AttemptFailed, classify_status, malformed, retry_after_seconds

__all__ = [
    "BUILD_FAILURES",
    "HTTP_FAILURES",
    "ProviderError",
    "attempt_detail",
    "attempt_failure",
    "final_error",
    "refused",
    "scrub_key",
    "status_failure",
    "status_fix",
]

# How much of an error body we read: enough for any useful message, bounded so a
# misbehaving server cannot make us buffer megabytes of HTML.
_ERROR_BODY_READ_LIMIT = 4096
_ERROR_EXCERPT_CHARS = 200
_REDACTED = "[redacted]"


class ProviderError(Exception):
    """A request to the model failed; ``reason`` is stable snake_case, ``detail`` is for humans."""

    def __init__(
        self, reason: str, detail: str, *, status: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.status = status
        self.retryable = retryable

    def __repr__(self) -> str:
        return (
            f"ProviderError(reason={self.reason!r}, status={self.status!r}, detail={self.detail!r})"
        )


#: what sending a request and reading its answer with httpx can raise, besides our own
#: AttemptFailed (a port out of range is the socket layer's OverflowError)
HTTP_FAILURES: tuple[type[Exception], ...] = (
    httpx.HTTPError,
    httpx.StreamError,
    httpx.InvalidURL,
    OverflowError,
)
#: ...and what building the request can raise: httpx encodes header values (the key) as ASCII
BUILD_FAILURES: tuple[type[Exception], ...] = (UnicodeEncodeError, *HTTP_FAILURES)


def attempt_failure(
    exc: Exception, *, url: str, connect_timeout: float, read_timeout: float
) -> AttemptFailed:
    """The classified failure of one attempt that raised ``exc``: one of `HTTP_FAILURES`,
    or the UnicodeEncodeError of a header value while the request is built.

    The exception's own text is left out where it may quote a request header, since
    that is where the API key travels.
    """
    name = type(exc).__name__
    if isinstance(exc, UnicodeEncodeError):
        # httpx encodes header values as ASCII while it builds the request
        return AttemptFailed(
            "bad_request",
            "a request header has characters HTTP headers cannot carry: check model.api_key "
            "for non-ASCII characters",
            retryable=False,
        )
    if isinstance(exc, httpx.TimeoutException):
        if isinstance(exc, httpx.ConnectTimeout):
            what = f"connecting to provider at {url} timed out after {connect_timeout:g} s"
        elif isinstance(exc, httpx.ReadTimeout):
            what = f"provider sent nothing for {read_timeout:g} s"
        elif isinstance(exc, httpx.WriteTimeout):
            what = f"sending the request to provider at {url} stalled for {read_timeout:g} s"
        else:
            what = f"provider request timed out ({name})"
        return AttemptFailed("timeout", what, retryable=True)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL | OverflowError):
        return AttemptFailed("bad_request", f"cannot request {url}: {exc}", retryable=False)
    if isinstance(exc, httpx.LocalProtocolError):
        # h11 refusing to send what we asked, e.g. a header value with a newline in it;
        # its message quotes that value, which may be the key.
        return AttemptFailed(
            "bad_request",
            f"the request to {url} is not valid HTTP ({name}): check model.api_key "
            "and base_url for spaces, line breaks or control characters",
            retryable=False,
        )
    if isinstance(exc, httpx.ConnectError) and refused(exc):
        host = httpx.URL(url).netloc.decode("ascii", "replace") if "://" in url else url
        what = (f"connection refused by {host} (nothing listens there): is the model "
                f"server running, and is {url} its address?")
        return AttemptFailed("connection_error", what, retryable=True)
    if isinstance(exc, httpx.TransportError):
        what = f"connection to provider at {url} failed ({name}: {exc})"
        return AttemptFailed("connection_error", what, retryable=True)
    if isinstance(exc, httpx.DecodingError):
        return malformed(f"the body does not decode as its Content-Encoding says: {exc}")
    if isinstance(exc, httpx.TooManyRedirects):
        return AttemptFailed(
            "bad_request", f"provider at {url} redirected too often: {exc}", retryable=False
        )
    # What is left (HTTPStatusError, a StreamError) means httpx was used in a way this
    # client does not use it; classified anyway, and not repeated.
    return AttemptFailed(
        "connection_error", f"request to provider at {url} failed ({name}: {exc})",
        retryable=False,
    )


def _where(response: Response) -> str:
    try:
        return str(response.url)
    except RuntimeError:  # an httpx.Response built without its request (tests)
        return ""


def _html_summary(text: str) -> str | None:
    """An HTML error page in one phrase (its title or first heading), not its markup."""
    import html
    import re

    if not re.match(r"\s*(<!doctype html|<html|<head|<body|<h1|<title)", text, re.I):
        return None
    for tag in ("title", "h1", "h2"):
        found = re.search(rf"<{tag}[^>]*>(.*?)</{tag}>", text, re.I | re.S)
        if found:
            inner = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())
            if inner:
                return f"an HTML page titled {inner[:120]!r}"
    return "an HTML page"


def status_fix(status: int, url: str) -> str:
    """The likely fix for a status, when the URL suggests one."""
    if status == 404:
        path = url.split("://", 1)[-1].partition("/")[2]
        if "v1/" not in path + "/" and url:
            return ("; the base_url may be missing `/v1` (most OpenAI-compatible servers "
                    "serve http://HOST:PORT/v1)")
        return "; check the base_url and that the server serves this model"
    if status in (401, 403):
        return "; check the API key (model.api_key or OPENAI_API_KEY)"
    if status == 501:
        return "; this server does not implement chat completions at this URL"
    return ""


def refused(exc: BaseException) -> bool:
    """Whether a connect failed because nothing listens at the address."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return "all connection attempts failed" in str(exc).lower()


async def status_failure(
    response: Response, heard: Callable[[], None], api_key: str | None
) -> AttemptFailed:
    """The failure of an attempt answered with a non-2xx status, with an excerpt of its body
    (an HTML page summarised), the URL, and the likely fix when there is one."""
    reason, retryable = classify_status(response.status_code)
    raw = bytearray()
    try:
        async for piece in response.aiter_bytes():
            heard()
            raw += piece
            if len(raw) >= _ERROR_BODY_READ_LIMIT:
                break
    except HTTP_FAILURES:
        pass  # the status is what matters; a body we could not read is just left out
    # Scrub before cutting, so a key straddling the cut cannot leave a readable prefix.
    text = scrub_key(raw.decode("utf-8", "replace"), api_key)
    excerpt = _html_summary(text) or " ".join(text.split())
    url = _where(response)
    return AttemptFailed(
        reason,
        f"provider returned HTTP {response.status_code}",
        where=(f"POST {url}" if url else "") + status_fix(response.status_code, url),
        retryable=retryable,
        status=response.status_code,
        body=excerpt[:_ERROR_EXCERPT_CHARS],
        retry_after=retry_after_seconds(response.headers.get("retry-after")),
    )


def final_error(
    failure: AttemptFailed, attempts: int, why_not: str, api_key: str | None
) -> ProviderError:
    """The request's failure after its last attempt; ``why_not`` says why a failure
    that could be retried was not ("" for none)."""
    detail = f"{failure.what} after {attempts} attempt{'s' if attempts != 1 else ''}"
    if why_not:
        detail += f" (not retried: {why_not})"
    detail += _said(failure)
    return ProviderError(
        failure.reason,
        scrub_key(detail, api_key),
        status=failure.status,
        retryable=failure.retryable,
    )


def _said(failure: AttemptFailed) -> str:
    out = f": {failure.body}" if failure.body else ""
    if failure.where:
        out += f" ({failure.where.removeprefix('; ')})"
    return out


def attempt_detail(failure: AttemptFailed, api_key: str | None) -> str:
    """One attempt's failure for a person: what happened, the server's words, where."""
    return scrub_key(failure.what + _said(failure), api_key)


def scrub_key(text: str, api_key: str | None) -> str:
    """``text`` with the API key taken out, also as a server or library may quote it:
    without surrounding whitespace, or escaped as in a Python ``repr``."""
    if not api_key:
        return text
    forms = {api_key, api_key.strip(), repr(api_key)[1:-1], repr(api_key.strip())[1:-1]}
    for form in sorted((f for f in forms if f), key=len, reverse=True):
        text = text.replace(form, _REDACTED)
    return text
