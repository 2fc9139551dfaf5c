"""Fleet tests: several owners ("nodes"), each with its own home, on one PostgreSQL schema.

Every test here needs PostgreSQL: without one it skips, saying why (or fails,
under TETHER_REQUIRE_POSTGRES, as in CI).

``fleet_url`` is a fresh schema's store URL; ``start_nodes`` starts one owner
per name on it, all before the test submits anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

import harness
import pgstore
import pytest
from harness import OwnerProcess


@pytest.fixture
def fleet_url() -> Iterator[str]:
    with pgstore.fresh_schema() as url:
        yield url


@pytest.fixture
def start_nodes(tmp_path: Path, fleet_url: str
                ) -> Callable[..., AbstractContextManager[list[OwnerProcess]]]:
    """``with start_nodes(provider_url, "a", "b") as (a, b):`` owners on the fleet's
    schema, each with a home of its own, stopped on exit."""

    @contextmanager
    def start(provider_url: str, *names: str) -> Iterator[list[OwnerProcess]]:
        with ExitStack() as stack:
            nodes = []
            for name in names:
                home = tmp_path / name
                harness.write_config(home, provider_url)
                env = harness.clean_env(home, TETHER_STORE=fleet_url)
                nodes.append(stack.enter_context(OwnerProcess(home, env=env)))
            yield nodes

    return start


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    pgstore.require()
