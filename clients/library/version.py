"""The installed tether's version, as ``tether --version``, ``tether doctor`` and the
ACP handshake report it.

Read from the package's metadata only when asked: importlib.metadata costs more to
import than the rest of a one-shot command's own modules.
"""

from __future__ import annotations

__all__ = ["installed_version"]


def installed_version() -> str:
    """The installed distribution's version, or ``0+unknown`` in a bare checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tether")
    except PackageNotFoundError:
        return "0+unknown"
