"""PostgreSQL for the tests: a fresh schema per test on the local server.

``TETHER_TEST_PG`` names the server (default: the local socket, database
``test``). Each test that runs on PostgreSQL gets a schema of its own, named in
the store URL's ``search_path``, dropped when the test ends. Where no server
answers, those tests skip with the reason, unless ``TETHER_REQUIRE_POSTGRES``
is set (CI sets it): then they fail, so a run cannot pass by skipping them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any
from urllib.parse import quote

import pytest

BASE_URL = os.environ.get("TETHER_TEST_PG", "postgresql:///test?host=/var/run/postgresql")


@cache
def unavailable() -> str | None:
    """Why PostgreSQL cannot be used here, or None when it can."""
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(BASE_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means: no server to test against
        return f"no PostgreSQL at {BASE_URL}: {' '.join(str(exc).split())}"
    return None


def require() -> None:
    """Skip (or, under TETHER_REQUIRE_POSTGRES, fail) when PostgreSQL is unusable."""
    why = unavailable()
    if why is None:
        return
    if os.environ.get("TETHER_REQUIRE_POSTGRES"):
        pytest.fail(f"PostgreSQL is required here (TETHER_REQUIRE_POSTGRES): {why}")
    pytest.skip(why)


def schema_url(schema: str) -> str:
    sep = "&" if "?" in BASE_URL else "?"
    return f"{BASE_URL}{sep}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A new, empty schema; yields a store URL that uses it; drops it afterwards."""
    import psycopg

    require()
    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema_url(schema)
    finally:
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def rows(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """A query, written with ``?`` as for SQLite, run on the store at ``url``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql.replace("%", "%%").replace("?", "%s"), args or None)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def dicts(url: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        cur = conn.execute(sql.replace("%", "%%").replace("?", "%s"), args or None)
        return list(cur.fetchall())


def _tables(conn: Any) -> list[str]:
    rows = conn.execute("SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
                        "AND table_name != 'tether_schema' ORDER BY table_name").fetchall()
    return [r[0] for r in rows]


def table_counts(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
                for t in _tables(conn)}


def dump(url: str) -> str:
    """Every row of every table, as text."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return "\n".join(r[0] for t in _tables(conn)
                         for r in conn.execute(f'SELECT t::text FROM "{t}" t').fetchall())
