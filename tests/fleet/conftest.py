"""Fleet tests need PostgreSQL: without one they skip, saying why (CI requires it)."""

import pgstore
import pytest


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    pgstore.require()
