"""Rows on PostgreSQL answer as sqlite3.Row does (store/pg/connection.py's
row_factory), and the row type of a set of columns is made once."""

from __future__ import annotations

import pgstore
import psycopg

from tether.store.pg import row_factory


def test_rows_answer_by_index_and_by_name_and_share_their_type():
    with pgstore.fresh_schema() as url, \
            psycopg.connect(url, autocommit=True, row_factory=row_factory) as conn:
        first = conn.execute("SELECT 1 AS seq, 'a' AS \"naïve\", 2").fetchone()
        assert tuple(first) == (1, "a", 2)
        assert first[0] == 1 and first["seq"] == 1 and first["naïve"] == "a"
        assert first.keys() == ("seq", "naïve", "?column?")
        assert dict(first) == {"seq": 1, "naïve": "a", "?column?": 2}
        second = conn.execute("SELECT 5 AS seq, 'b' AS \"naïve\", 6").fetchone()
        assert type(second) is type(first) and second["naïve"] == "b"
        other = conn.execute("SELECT 7 AS other").fetchone()
        assert type(other) is not type(first) and other.keys() == ("other",)
        assert conn.execute("SELECT 1 WHERE false").fetchone() is None
        assert conn.execute("CREATE TABLE t(a integer)").description is None
