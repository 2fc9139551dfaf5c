"""PostgreSQL for the tests: a fresh schema per test on the local server.

``TETHER_TEST_PG`` names the server (default: the local socket, database
``test``). Each test that runs on PostgreSQL gets a schema of its own, named in
the store URL's ``search_path``, dropped when the test ends. Where no server
answers, those tests skip with the reason, unless ``TETHER_REQUIRE_POSTGRES``
is set (CI sets it): then they fail, so a run cannot pass by skipping them.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
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


# -- a private server, for tests that restart it ------------------------------------


def _bindir() -> Path | None:
    """Where PostgreSQL's server programs (initdb, pg_ctl) are, if installed."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                      else 0)
    if versions:  # Debian's layout; its /usr/bin has only wrappers
        return versions[-1].parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


class PrivateServer:
    """A PostgreSQL server of the test's own, in a temporary directory, on a Unix
    socket only: a test may restart or stop it while owners use it, which it must
    never do to the shared server other test runs use. PostgreSQL refuses to run
    as root, so under root (as in CI) it runs as the ``postgres`` user."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.dir = Path(tempfile.mkdtemp(prefix="tpg"))  # short: a socket path is ≤ 107 bytes
        self.data = self.dir / "data"
        self.port = 5432  # the socket is in a directory of its own: no port is shared
        self.user: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                self.user = None
            else:
                self.user = "postgres"
                shutil.chown(self.dir, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql://tether@/postgres?host={self.dir}&port={self.port}"

    def _run(self, *args: str, timeout: float = 120) -> None:
        assert self.bindir is not None
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        # output to a file, not a pipe: a server pg_ctl starts would hold a pipe open
        with tempfile.TemporaryFile() as out:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout)
            out.seek(0)
            said = out.read().decode(errors="replace")
        if proc.returncode != 0:
            log = self.dir / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {said}{tail}")

    def start(self) -> PrivateServer:
        if self.bindir is None:
            raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-U", "tether", "-A", "trust",
                      "-E", "UTF8", "--no-sync", "--no-instructions")
        opts = (f"-k {self.dir} -p {self.port} -c listen_addresses='' -c fsync=off "
                "-c shared_buffers=16MB -c max_connections=60")
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-o", opts,
                  "-l", str(self.dir / "server.log"))
        return self

    def restart(self, down_seconds: float = 0.0) -> None:
        """A fast restart, as an operator's or a failover's: every connection is cut,
        transactions in flight roll back, and for ``down_seconds`` nothing answers."""
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", str(self.data))
        time.sleep(down_seconds)
        self.start()

    def stop(self) -> None:
        if self.data.exists():
            with contextlib.suppress(Exception):
                self._run("pg_ctl", "stop", "-m", "immediate", "-D", str(self.data))
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def private_server() -> Iterator[PrivateServer]:
    """A private PostgreSQL server (see PrivateServer), removed afterwards. Skips (or,
    under TETHER_REQUIRE_POSTGRES, fails) where PostgreSQL is not installed."""
    server = PrivateServer()
    root_alone = os.geteuid() == 0 and server.user is None
    if server.bindir is None or root_alone or unavailable() is not None:
        shutil.rmtree(server.dir, ignore_errors=True)
        require()
        why = ("PostgreSQL's server programs (initdb, pg_ctl) are not installed"
               if server.bindir is None else
               "running as root with no `postgres` user to run a private server as")
        if os.environ.get("TETHER_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL is required here (TETHER_REQUIRE_POSTGRES): {why}")
        pytest.skip(why)
    try:
        yield server.start()
    finally:
        server.stop()
