"""SQLite's schema and PostgreSQL's are the same schema (store/migrations.py and
store/pg/schema.py): the query modules run unchanged on both.

Each database is migrated from empty and read back from its own catalogue —
SQLite's PRAGMA table_info / index_list / index_info / foreign_key_list,
PostgreSQL's information_schema and pg_index — into one neutral description:
every table; each column's type class, NOT NULL, default and whether it numbers
itself; the primary key; every foreign key with its ON DELETE; every unique
constraint; every CHECK; every index with its columns, uniqueness and partial
predicate. The
two descriptions must be equal but for `ALLOWED`, each entry with its reason.

Normalised, because the engines say one thing two ways (not differences):
type names to classes (INTEGER/BIGINT → integer, REAL/DOUBLE PRECISION → real,
BLOB/BYTEA → blob, JSON/JSONB → json); a primary key column counts as NOT NULL
(PostgreSQL makes it so; SQLite's table_info does not report it for TEXT keys);
a default's ``::type`` cast; an expression's (index predicate, CHECK) casts,
brackets and ``<>``, and PostgreSQL's ``x = ANY (ARRAY[…])`` for ``x IN (…)``.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pgstore
import pytest

from tether.store.pg.schema import migrate_pg
from tether.store.sqlite.migrations import migrate

#: differences that are meant, each (kind, table, detail) with why
ALLOWED: dict[tuple[str, ...], str] = {
    ("only_pg", "nodes"): "the fleet's nodes: a fleet runs on PostgreSQL only (docs/scale-out.md)",
    ("only_pg", "session_leases"): "the fleet's session leases: PostgreSQL only",
    ("only_pg", "turn_stops"): "stops asked across the fleet's nodes: PostgreSQL only",
    ("only_pg", "tether_schema"): "PostgreSQL's schema version; SQLite keeps it in "
                                  "PRAGMA user_version",
}

_TYPE_CLASSES = {
    "integer": "integer", "int": "integer", "bigint": "integer", "smallint": "integer",
    "text": "text", "character varying": "text", "varchar": "text",
    "real": "real", "double precision": "real", "double": "real", "float": "real",
    "blob": "blob", "bytea": "blob", "json": "json", "jsonb": "json",
    "boolean": "boolean",
}


def _type_class(name: str) -> str:
    return _TYPE_CLASSES.get(name.strip().lower(), f"other:{name.lower()}")


def _default(value: Any) -> str | None:
    if value is None:
        return None
    text = re.sub(r"::[a-z ]+$", "", str(value).strip())
    return text.strip("()") if text.startswith("(") else text


def _predicate(text: str | None) -> str | None:
    """An expression in one spelling for both engines."""
    if not text:
        return None
    text = re.sub(r"(\w+) = any \(array\[(.*?)\]\)", r"\1 in (\2)", text.lower())
    text = re.sub(r"::[a-z ]+?(?=[,)\] ]|$)", "", text).replace("<>", "!=")
    return " ".join(text.replace("(", " ").replace(")", " ").replace(",", " , ").split())


def _sqlite_checks(sql: str) -> list[str]:
    """The CHECK expressions of a CREATE TABLE statement (balanced brackets)."""
    found = []
    for match in re.finditer(r"\bCHECK\s*\(", sql):
        end, depth = match.end(), 1
        while depth:
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            end += 1
        found.append(_predicate(sql[match.end():end - 1]) or "")
    return found


def _describe(tables: dict[str, dict[str, Any]]) -> dict[tuple[str, ...], Any]:
    """The flat description both sides are compared by: key → value."""
    out: dict[tuple[str, ...], Any] = {}
    for table, t in tables.items():
        out[("table", table)] = True
        pk = tuple(t["pk"])
        out[("primary_key", table)] = pk
        for col, c in t["columns"].items():
            out[("column", table, col)] = (c["type"], c["notnull"] or col in pk,
                                           c["default"], c["auto"])
        for fk in t["fks"]:
            out[("foreign_key", table, fk[0])] = fk[1:]
        for cols in t["unique"]:
            out[("unique", table, ",".join(cols))] = True
        for name, idx in t["indexes"].items():
            out[("index", table, name)] = idx
        out[("checks", table)] = tuple(sorted(t["checks"]))
    return out


# -- SQLite ------------------------------------------------------------------------


def _sqlite_tables() -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(conn)
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        tables: dict[str, dict[str, Any]] = {}
        for table in names:
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                               (table,)).fetchone()[0]
            info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
            columns = {}
            for _, col, type_, notnull, default, _pos in info:
                # INTEGER PRIMARY KEY [AUTOINCREMENT] is the rowid: it numbers itself
                auto = pk == [col] and type_.upper() == "INTEGER"
                columns[col] = {"type": _type_class(type_), "notnull": bool(notnull),
                                "default": _default(default), "auto": auto}
            assert "AUTOINCREMENT" not in sql.upper() or any(c["auto"] for c in columns.values())
            fks = [(r[3], r[2], r[4], r[6].upper())
                   for r in conn.execute(f'PRAGMA foreign_key_list("{table}")')]
            unique: list[tuple[str, ...]] = []
            indexes: dict[str, Any] = {}
            for _, name, is_unique, origin, partial in conn.execute(
                    f'PRAGMA index_list("{table}")'):
                cols = tuple(r[2] for r in conn.execute(f'PRAGMA index_info("{name}")'))
                if origin == "pk":
                    continue  # the primary key, compared above
                if origin == "u":
                    unique.append(cols)
                    continue
                index_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                         (name,)).fetchone()[0]
                where = index_sql.split(" WHERE ", 1)[1] if partial else None
                indexes[name] = (cols, bool(is_unique), _predicate(where))
            checks = _sqlite_checks(sql)
            tables[table] = {"columns": columns, "pk": pk, "fks": fks, "unique": unique,
                             "indexes": indexes, "checks": checks}
        return tables
    finally:
        conn.close()


# -- PostgreSQL --------------------------------------------------------------------

_PG_DELETE = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL",
              "d": "SET DEFAULT"}


def _pg_tables(url: str) -> dict[str, dict[str, Any]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        migrate_pg(conn)
        names = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name")]
        tables: dict[str, dict[str, Any]] = {}
        for table in names:
            columns = {}
            for col, type_, nullable, default, identity in conn.execute(
                    "SELECT column_name, data_type, is_nullable, column_default, is_identity "
                    "FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = %s ORDER BY ordinal_position", (table,)):
                auto = identity == "YES" or str(default or "").startswith("nextval(")
                columns[col] = {"type": _type_class(type_), "notnull": nullable == "NO",
                                "default": None if auto else _default(default), "auto": auto}
            fks = [(r[0], r[1], r[2], _PG_DELETE[r[3]]) for r in conn.execute(
                "SELECT a.attname, ft.relname, fa.attname, c.confdeltype "
                "FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
                "JOIN pg_class ft ON ft.oid = c.confrelid "
                "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
                "JOIN pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = c.confkey[1] "
                "WHERE c.contype = 'f' AND t.relname = %s "
                "AND t.relnamespace = current_schema()::regnamespace", (table,))]
            pk: list[str] = []
            unique: list[tuple[str, ...]] = []
            indexes: dict[str, Any] = {}
            for name, is_unique, primary, constraint, cols, where in conn.execute(
                    "SELECT ic.relname, i.indisunique, i.indisprimary, "
                    "EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid), "
                    "ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY AS k(n, o) "
                    "      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n "
                    "      ORDER BY k.o), "
                    "pg_get_expr(i.indpred, i.indrelid) "
                    "FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid "
                    "JOIN pg_class t ON t.oid = i.indrelid "
                    "WHERE t.relname = %s AND t.relnamespace = current_schema()::regnamespace",
                    (table,)):
                if primary:
                    pk = list(cols)
                elif constraint:
                    unique.append(tuple(cols))
                else:
                    indexes[name] = (tuple(cols), bool(is_unique), _predicate(where))
            checks = [_predicate(r[0].removeprefix("CHECK ")) for r in conn.execute(
                "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c "
                "JOIN pg_class t ON t.oid = c.conrelid WHERE c.contype = 'c' "
                "AND t.relname = %s AND t.relnamespace = current_schema()::regnamespace",
                (table,))]
            tables[table] = {"columns": columns, "pk": pk, "fks": fks, "unique": unique,
                             "indexes": indexes, "checks": checks}
        return tables


# -- the comparison ----------------------------------------------------------------


def _differences(lite: dict[tuple[str, ...], Any],
                 pg: dict[tuple[str, ...], Any]) -> dict[tuple[str, ...], str]:
    """Every difference, keyed as ALLOWED is: a table on one side only is one entry."""
    only_lite = {k[1] for k in lite if k[0] == "table"} - {k[1] for k in pg if k[0] == "table"}
    only_pg = {k[1] for k in pg if k[0] == "table"} - {k[1] for k in lite if k[0] == "table"}
    found: dict[tuple[str, ...], str] = {("only_sqlite", t): "" for t in only_lite}
    found |= {("only_pg", t): "" for t in only_pg}
    for key in sorted(lite.keys() | pg.keys()):
        if key[1] in only_lite | only_pg:
            continue
        a, b = lite.get(key), pg.get(key)
        if a != b:
            found[key] = f"sqlite {a!r} != postgresql {b!r}"
    return found


@pytest.fixture(scope="module")
def schemas() -> tuple[dict[tuple[str, ...], Any], dict[tuple[str, ...], Any]]:
    with pgstore.fresh_schema() as url:
        pg = _describe(_pg_tables(url))
    return _describe(_sqlite_tables()), pg


def test_both_descriptions_are_read_whole(schemas):
    lite, pg = schemas
    # a reader that saw nothing would compare equal: check it saw what we know is there
    for side in (lite, pg):
        assert side[("primary_key", "messages")] == ("session_id", "idx")
        assert side[("column", "session_admissions", "seq")] == ("integer", True, None, True)
        assert side[("column", "async_delegations", "delivery_state")] == \
            ("text", True, "'pending'", False)
        assert side[("foreign_key", "session_admissions", "target_session_id")] == \
            ("sessions", "session_id", "NO ACTION")
        assert side[("unique", "session_admissions",
                     "principal_id,target_session_id,request_id")] is True
        assert side[("index", "session_admissions", "admissions_open")] == \
            (("target_session_id", "seq"), False, "status != 'terminal'")
        assert "status in 'queued' , 'started' , 'unknown' , 'terminal'" in \
            side[("checks", "session_admissions")]
        assert len(side[("checks", "cron_runs")]) == 6
    assert pg[("foreign_key", "session_leases", "session_id")] == \
        ("sessions", "session_id", "CASCADE")


def test_sqlite_and_postgresql_have_the_same_schema(schemas):
    lite, pg = schemas
    found = _differences(lite, pg)
    unexplained = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not unexplained, "the schemas differ:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(unexplained.items()))
    # an allowance for a difference that is gone is removed with it
    assert not ALLOWED.keys() - found.keys(), f"stale allowances: {ALLOWED.keys() - found.keys()}"


def test_a_difference_is_found():
    lite = {("table", "t"): True, ("column", "t", "a"): ("integer", True, None, False)}
    pg = {("table", "t"): True, ("column", "t", "a"): ("real", True, None, False),
          ("table", "u"): True}
    assert set(_differences(lite, pg)) == {("column", "t", "a"), ("only_pg", "u")}
    assert _type_class("DOUBLE PRECISION") == _type_class("REAL") == "real"
    assert _predicate("(status <> 'terminal'::text)") == _predicate("status != 'terminal'")
    assert _predicate("(kind = ANY (ARRAY['a'::text, 'b'::text]))") == \
        _predicate("kind IN ('a', 'b')")
    assert _sqlite_checks("CREATE TABLE t (a TEXT CHECK (a IN ('x')), CHECK ((a = 'x')))") \
        == ["a in 'x'", "a = 'x'"]
    assert _default("'pending'::text") == "'pending'" and _default("0") == "0"
