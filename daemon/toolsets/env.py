"""The environment a command runs with: an allowlist of the owner's, never the rest.

The owner's environment holds API keys, tokens and passwords under names no
list can foresee (``DB_PASS``, ``MYAPP_PW``); a command the model runs could
print them into the transcript or send them away. So a command sees only the
variables named here (``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TERM``, ``TZ``,
``USER``, ``SHELL``) and those the owner's configuration adds
(``sandbox.env_allow``: names, or prefixes ending in ``*``). As a second
guard, an allowed variable is dropped all the same when its value contains one
of the keys the owner was configured with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["command_env", "ALLOWED"]

#: the variables every command sees (a name ending in ``*`` is a prefix)
ALLOWED: tuple[str, ...] = ("PATH", "HOME", "LANG", "LC_*", "TERM", "TZ", "USER", "SHELL")


def _allowed(name: str, patterns: Iterable[str]) -> bool:
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def command_env(environ: Mapping[str, str], allow: Iterable[str] = (),
                secrets: Iterable[str | None] = ()) -> dict[str, str]:
    """The variables of ``environ`` that ``ALLOWED`` or ``allow`` name, minus any whose
    value holds one of ``secrets``."""
    patterns = (*ALLOWED, *allow)
    values = {s for s in secrets if s}
    return {k: v for k, v in environ.items()
            if _allowed(k, patterns) and not any(s in v for s in values)}
