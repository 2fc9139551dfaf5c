"""How a PostgreSQL store's connections show in ``pg_stat_activity``: the writer
is ``tether-writer PID`` unless the URL names the application, and then every
connection of the store carries that name (an operator, or ``tether bench
--store``, tells one node's server processes from another's by it)."""

import os

import pgstore
import pytest

from tether.store.pg import PgDatabase


@pytest.fixture
def url():
    with pgstore.fresh_schema() as url:
        yield url


def _names(url: str, pids: list[int]) -> list[str]:
    return sorted(r[0] for r in pgstore.rows(
        url, "SELECT application_name FROM pg_stat_activity WHERE pid = ANY(?)", pids))


async def test_the_writer_is_tether_writer_and_its_pid_by_default(url):
    db = await PgDatabase.open(url, readers=1)
    try:
        await db.write(lambda conn: conn.execute("SELECT 1"))
        writer = db._writer.raw.info.backend_pid
        assert _names(url, [writer]) == [f"tether-writer {os.getpid()}"]
    finally:
        await db.close()


async def test_an_application_name_in_the_url_names_every_connection(url):
    named = f"{url}&application_name=node-x"
    db = await PgDatabase.open(named, readers=1)
    try:
        await db.write(lambda conn: conn.execute("SELECT 1"))
        reader = await db.read(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        writer = db._writer.raw.info.backend_pid
        assert _names(url, [writer, reader]) == ["node-x", "node-x"]
    finally:
        await db.close()
