"""The database side of ``tether bench --store``: a private schema, the server's
counters, the CPU of its processes, and the baseline of sequential commits.

`PgSide` creates a fresh schema (``bench_<hex>``) in the database the user
named and drops it afterwards, so no row of the user's is read or written: the
bench's owners get a URL whose ``search_path`` is that schema and whose
``application_name`` is the bench's own, which is how their server processes
(backends) are told apart from everyone else's in ``pg_stat_activity``. When the
server runs on this machine (a Unix socket or a loopback address, its processes
visible in /proc), their CPU time is read from /proc; otherwise those figures
are None.

Requires psycopg 3 (the ``postgresql`` extra), imported only here.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from .processes import cpu_s

__all__ = ["PgSide", "cpu_spent", "private_url"]


def private_url(url: str, schema: str, app: str) -> str:
    """``url`` with ``search_path`` set to ``schema`` and ``application_name`` to ``app``
    (any ``options`` the URL already has are kept, the search path after them)."""
    head, _, tail = url.partition("?")  # (urlunsplit would lose the "//" of postgresql:///db)
    query = dict(parse_qsl(tail, keep_blank_values=True))
    query["options"] = " ".join(filter(None, [query.get("options"), f"-csearch_path={schema}"]))
    query["application_name"] = app
    return f"{head}?{urlencode(query, quote_via=quote)}"


class PgSide:
    """One run's private schema on the server at ``url``; `create` before, `drop` after."""

    def __init__(self, url: str) -> None:
        self.base = url
        self.schema = "bench_" + secrets.token_hex(6)
        self.app = f"tether-{self.schema}"
        self.url = private_url(url, self.schema, self.app)
        self._mon: Any = None
        self._server_pid: int | None = None  # the postmaster, when it runs here

    # -- the schema ---------------------------------------------------------

    def create(self) -> None:
        import psycopg

        with psycopg.connect(self.base, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {self.schema}")
        # the bench's own queries: in the schema, but not among the owners' backends
        self._mon = psycopg.connect(private_url(self.base, self.schema, self.app + "-monitor"),
                                    autocommit=True, connect_timeout=5)
        self._server_pid = self._find_server()

    def reset(self) -> None:
        """The schema emptied (dropped and made again), its owners stopped."""
        self._mon.execute(f"DROP SCHEMA {self.schema} CASCADE")
        self._mon.execute(f"CREATE SCHEMA {self.schema}")

    def drop(self) -> None:
        import psycopg

        if self._mon is not None:
            self._mon.close()
            self._mon = None
        with psycopg.connect(self.base, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")

    def one(self, sql: str, *args: Any) -> Any:
        row = self._mon.execute(sql, args or None).fetchone()
        return None if row is None else row[0]

    def describe(self) -> dict[str, Any]:
        return {"server": "PostgreSQL " + str(self.one("SHOW server_version")),
                "schema": self.schema, "local": self._server_pid is not None}

    # -- the server's counters ----------------------------------------------

    def counters(self) -> dict[str, float]:
        """The server's counters so far: ``commits``, transactions committed in the
        database (every client's, reads included); ``rows``, rows inserted, updated
        and deleted in the private schema (the bench's nodes' alone); ``wal``, the
        WAL position in bytes (the whole server's). A backend reports the first two
        at most about once a second, and a second after its last transaction
        at the latest while it keeps working; the WAL position is immediate."""
        row = self._mon.execute(
            "SELECT d.xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn, "
            "(SELECT COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0) "
            " FROM pg_stat_user_tables WHERE schemaname = %s) "
            "FROM pg_stat_database d WHERE d.datname = current_database()",
            (self.schema,)).fetchone()
        return {"commits": float(row[0]), "wal": float(row[1]), "rows": float(row[2])}

    def sequential_commits(self, n: int) -> tuple[float, float | None, float]:
        """``n`` sequential single-row commits by one connection (each an autocommit
        INSERT: one round trip and one WAL flush), in the private schema: (seconds,
        CPU seconds of the server process that ran them (None: not on this machine),
        CPU seconds of this process, the client)."""
        import psycopg

        with psycopg.connect(private_url(self.base, self.schema, self.app + "-baseline"),
                             autocommit=True, connect_timeout=5) as conn:
            backend = conn.info.backend_pid if self._server_pid is not None else None
            conn.execute("CREATE TABLE IF NOT EXISTS bench_baseline(seq BIGSERIAL PRIMARY KEY, "
                         "admission_id TEXT UNIQUE, request_id TEXT, payload_json TEXT, "
                         "created_at DOUBLE PRECISION)")
            payload = '{"finite":true,"text":"hello"}'
            sql = ("INSERT INTO bench_baseline(admission_id, request_id, payload_json, "
                   "created_at) VALUES (%s, %s, %s, %s)")
            conn.execute(sql, (os.urandom(12).hex(), "in", payload, time.time()), prepare=True)
            server0 = None if backend is None else cpu_s(backend)
            t0, own0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                conn.execute(sql, (os.urandom(12).hex(), "in", payload, time.time()),
                             prepare=True)
            seconds, own = time.perf_counter() - t0, time.process_time() - own0
            server = None if backend is None or server0 is None else cpu_s(backend) - server0
            return seconds, server, own

    # -- rows the owners wrote ----------------------------------------------

    def created_at(self, session_id: str, after: int) -> dict[int, float]:
        """Each event's ``created_at`` (stamped by the node that appended it)."""
        rows = self._mon.execute("SELECT seq, created_at FROM events WHERE session_id = %s "
                                 "AND seq > %s", (session_id, after)).fetchall()
        return {int(s): float(c) for s, c in rows}

    def admissions(self, prefix: str) -> int:
        """Admissions whose input_id starts with ``prefix``."""
        return int(self.one("SELECT COUNT(*) FROM session_admissions WHERE request_id LIKE %s",
                            prefix + "%"))

    # -- the server's processes ---------------------------------------------

    def _find_server(self) -> int | None:
        """The postmaster's pid when the server runs on this machine, else None."""
        addr = self.one("SELECT host(inet_server_addr())")
        if addr not in (None, "127.0.0.1", "::1"):
            return None
        backend = int(self.one("SELECT pg_backend_pid()"))
        try:
            if Path(f"/proc/{backend}/comm").read_text().strip() != "postgres":
                return None
            return _ppid(backend)
        except (OSError, ValueError):
            return None

    def cpu(self) -> dict[str, dict[int, float]] | None:
        """CPU seconds so far of the owners' backends (``ours``) and of every process
        of the server (``all``: other clients' backends and its background writers
        too), by pid; None when the server is not on this machine."""
        if self._server_pid is None:
            return None
        ours = [int(r[0]) for r in self._mon.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            (self.app,)).fetchall()]
        everyone = [self._server_pid]
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if _ppid(int(entry.name)) == self._server_pid:
                        everyone.append(int(entry.name))
                except (OSError, ValueError):
                    continue
        return {"ours": _cpu_of(ours), "all": _cpu_of(everyone)}


def _ppid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise ValueError(f"no PPid for {pid}")


def _cpu_of(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            out[pid] = cpu_s(pid)
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
    return out


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two `PgSide.cpu` readings of one kind; a process that
    started in between counts from zero."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
