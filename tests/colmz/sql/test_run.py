"""``colmz.sql.run``: colmz's DuckDB connection and the one-query check."""

from __future__ import annotations

import pytest

from colmz.sql import connect


def test_duckdb_reads_postgres_arithmetic():
    con = connect()
    got = con.sql("SELECT 7 / 2 AS a, 7.0 / 2 AS b, -7 / 2 AS c, 7 % 3 AS d, 'x' || 1 AS e, "
                  "7::DOUBLE / 2 AS f").fetchall()
    assert got == [(3, 3.5, -3, 1, "x1", 3.5)]
    if con.sql("SELECT count(*) FROM duckdb_settings() WHERE name = 'error_on_division_by_zero'").fetchall()[0][0]:
        for q in ("SELECT 1 / 0", "SELECT 1.5 / 0", "SELECT 1 % 0"):
            with pytest.raises(Exception, match="(?i)division by zero"):
                con.sql(q).fetchall()


def test_missing_duckdb_names_the_extra(monkeypatch):
    import sys

    import colmz
    from colmz.sql import require_duckdb

    monkeypatch.setitem(sys.modules, "duckdb", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'colmz\[sql\]'"):
        require_duckdb()
    with pytest.raises(ImportError, match="sql"):
        colmz.Catalog()


def test_check_one_query_lets_through_one_select_only():
    from colmz.sql import SQLError, check_one_query

    con = connect()
    for ok in ["SELECT 1", "WITH a AS (SELECT 1) SELECT * FROM a", "VALUES (1)", "(SELECT 1) UNION ALL SELECT 2"]:
        check_one_query(con, ok)
    for bad, what in [("SELECT 1; SELECT 2", "2 statements"), ("COPY (SELECT 1) TO 'x'", r"\(COPY\)"),
                      ("ATTACH 'x' AS y", r"\(ATTACH\)"), ("SET integer_division = false", r"\(SET\)"),
                      ("CALL pragma_version()", r"\(CALL\)"), ("SELECT * FROM", "syntax error")]:
        with pytest.raises(SQLError, match=what):
            check_one_query(con, bad)
