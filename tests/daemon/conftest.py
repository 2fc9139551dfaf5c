"""Fixtures of the daemon's unit tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from wiring import wired

from tether.daemon.model.provider import Provider


@pytest.fixture
def wire(tmp_path: Path) -> Callable[..., Any]:
    """``async with wire(providers) as parts``: the services on tmp_path/state.db."""
    def make(providers: Mapping[str, Provider], **kw: Any) -> Any:
        return wired(tmp_path / "state.db", providers, **kw)
    return make
