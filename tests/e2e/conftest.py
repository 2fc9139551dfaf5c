"""The end-to-end suite runs twice: on the home's state.db and on PostgreSQL.

Every test here is parametrised by ``store``. Under ``postgresql`` each test
gets a fresh schema, and every owner it starts keeps its state there; tests of
what only SQLite has (the state.db file, its locks and quotas) are marked
``sqlite_only`` and run once, as are those marked ``store_agnostic``, whose
subject does not touch the store at all (the HTTP endpoint's parsing, headers
and CORS): a second run would test nothing more.

``scene`` is the end-to-end start-up (tests/scene.py) on the run's store and
transport. The transport is the Unix socket, except for tests marked
``both_transports``, which run on the TCP listener with a bearer token too:
those whose subject is what a peer sees on the wire (events, replies, limits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import harness
import pgstore
import pytest
from scene import TRANSPORTS, start_scene


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker("sqlite_only") or \
            metafunc.definition.get_closest_marker("store_agnostic")
        metafunc.parametrize("store", ["sqlite"] if marked else ["sqlite", "postgresql"],
                             indirect=True)
    if "transport" in metafunc.fixturenames:
        both = metafunc.definition.get_closest_marker("both_transports")
        metafunc.parametrize("transport", list(TRANSPORTS) if both else ["unix"],
                             indirect=True)


@pytest.fixture
def store_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """Where this run of the test keeps its state: None for the home's state.db, or
    a fresh PostgreSQL schema's URL."""
    callspec = getattr(request.node, "callspec", None)
    backend = callspec.params.get("store", "sqlite") if callspec else "sqlite"
    if backend == "sqlite":
        yield None
        return
    with pgstore.fresh_schema() as url:
        yield url


@pytest.fixture(autouse=True)
def store(store_url: str | None) -> Iterator[str]:
    """The backend this run of the test uses. Tests not yet on ``scene`` reach it
    through harness.STORE_URL (the harness's own helpers read it)."""
    harness.STORE_URL = store_url
    try:
        yield "sqlite" if store_url is None else "postgresql"
    finally:
        harness.STORE_URL = None


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str:
    """How the test's peer reaches the owner: "unix" or "tcp" (a bearer token)."""
    return getattr(request, "param", "unix")


@pytest.fixture
def scene(tmp_path: Path, store_url: str | None, transport: str) -> Callable[..., Any]:
    """``async with scene(handler, **config) as s``: tests/scene.py's start-up."""
    return start_scene(tmp_path, store_url, transport)
