"""Config values the model client shares with config: the default OpenAI API root, the check of a
base URL, and the stream modes (``model.stream``)."""

from __future__ import annotations

__all__ = ["OPENAI_BASE_URL", "STREAM_MODES", "base_url_problem", "normalise_mode"]

OPENAI_BASE_URL = "https://api.openai.com/v1"

STREAM_MODES = ("auto", "true", "false")


def normalise_mode(value: object) -> str | None:
    """``auto``, ``true`` or ``false`` for a config value (YAML booleans included), or None
    when the value is none of them."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str) and value.strip().lower() in STREAM_MODES:
        return value.strip().lower()
    return None



def base_url_problem(base_url: str) -> str | None:
    """Why no request could be made to ``base_url``, or None if one can."""
    if not base_url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    import httpx  # only when a URL is checked: config loads without it

    try:
        url = httpx.URL(base_url)
        port = url.port
    except (httpx.InvalidURL, ValueError) as exc:
        return f"is not a valid URL ({exc})"
    if not url.host:
        return "has no host"
    if port is not None and not 0 < port < 65536:
        return f"has port {port}, outside 1..65535"
    return None
