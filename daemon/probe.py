"""`tether doctor`'s look at a model endpoint: ``GET {base_url}/models`` with the key.

One request, no retries, nothing sent to the model: does a server answer at
the configured address, does it take the configured key, and does it serve
the configured model? The answer is a `ModelsProbe`: a line for a person and,
when something is wrong, the likely fix. Failures are classified as a model
request's are (provider_errors.py: the same "missing `/v1`" and API-key hints),
except that a refused connection says plainly ``no server at HOST:PORT``. The
key is sent only to this endpoint and never appears in what comes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from .provider_errors import BUILD_FAILURES, attempt_failure, refused, scrub_key, status_fix
from .settings import shown_url

__all__ = ["ModelsProbe", "probe_models"]

#: served models named in a report at most (OpenAI serves about a hundred)
SHOWN_MODELS = 12


@dataclass(frozen=True)
class ModelsProbe:
    ok: bool
    url: str  # the URL asked, without credentials or query
    status: int | None  # the HTTP status, None when no answer came
    detail: str  # one line: what happened
    fix: str = ""  # what to do about it ("" when ok)
    served: list[str] = field(default_factory=list)  # model ids the server listed


def _host_port(url: httpx.URL) -> str:
    port = url.port or (443 if url.scheme == "https" else 80)
    return f"{url.host}:{port}"


def probe_models(base_url: str, api_key: str | None, model: str, *,
                 connect_timeout: float = 10.0, timeout: float = 20.0) -> ModelsProbe:
    """Ask ``{base_url}/models`` whether ``model`` is served, with ``api_key``."""
    url = base_url.rstrip("/") + "/models"
    shown = shown_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout)) as http:
            response = http.get(url, headers=headers)
    except BUILD_FAILURES as exc:
        if isinstance(exc, httpx.ConnectError) and refused(exc):
            return ModelsProbe(False, shown, None,
                               f"no server at {_host_port(httpx.URL(url))} (GET {shown})",
                               "start the model server, or set model.base_url (or "
                               "OPENAI_BASE_URL) to the address it listens on")
        failure = attempt_failure(exc, url=shown, connect_timeout=connect_timeout,
                                  read_timeout=timeout)
        return ModelsProbe(False, shown, None, scrub_key(failure.what, api_key),
                           "check that the model server runs and that model.base_url is "
                           "its address")
    status = response.status_code
    if status != 200:
        fix = status_fix(status, url).removeprefix("; ")
        body = scrub_key(" ".join(response.text.split())[:200], api_key)
        return ModelsProbe(False, shown, status,
                           f"GET {shown} answered HTTP {status}" + (f": {body}" if body else ""),
                           fix or "check model.base_url: it should be the server's OpenAI-"
                                  "compatible root, where /models and /chat/completions are")
    try:
        listed = response.json().get("data")
        served = [str(m["id"]) for m in listed]
    except (ValueError, AttributeError, TypeError, KeyError):
        return ModelsProbe(False, shown, status,
                           f"GET {shown} answered HTTP 200, but not with a list of models",
                           "check model.base_url: it should be the server's OpenAI-compatible "
                           "root, where /models and /chat/completions are")
    if model in served:
        return ModelsProbe(True, shown, status,
                           f"{model} is served at {shown} (HTTP 200, {len(served)} model"
                           f"{'' if len(served) == 1 else 's'})", served=served)
    names = ", ".join(served[:SHOWN_MODELS]) + (" …" if len(served) > SHOWN_MODELS else "")
    return ModelsProbe(False, shown, status,
                       f"model {model} is not served at {shown}; it serves "
                       + (f"{len(served)}: {names}" if served else "none"),
                       "set model.default in config.yaml (or pass --model) to a model it "
                       "serves", served=served)
