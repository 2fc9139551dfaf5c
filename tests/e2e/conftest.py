"""The end-to-end suite runs twice: on the home's state.db and on PostgreSQL.

Every test here is parametrised by ``store``. Under ``postgresql`` each test
gets a fresh schema, and every owner it starts (through the harness) keeps its
state there; tests of what only SQLite has (the state.db file, its locks and
quotas) are marked ``sqlite_only`` and run once, as are those marked
``store_agnostic``, whose subject does not touch the store at all (the HTTP
endpoint's parsing, headers and CORS): a second run would test nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator

import harness
import pgstore
import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker("sqlite_only") or \
            metafunc.definition.get_closest_marker("store_agnostic")
        metafunc.parametrize("store", ["sqlite"] if marked else ["sqlite", "postgresql"],
                             indirect=True)


@pytest.fixture(autouse=True)
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend this run of the test uses."""
    backend = getattr(request, "param", "sqlite")
    if backend == "sqlite":
        yield backend
        return
    with pgstore.fresh_schema() as url:
        harness.STORE_URL = url
        try:
            yield backend
        finally:
            harness.STORE_URL = None
