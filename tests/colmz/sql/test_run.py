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


def test_sessions_share_the_database_settings_not_registrations():
    import pyarrow as pa

    from colmz.sql import session

    a, b = session(), session()
    for con in (a, b):  # the database's settings, not the first connection's
        assert con.sql("SELECT 7 / 2, current_setting('TimeZone'), "
                       "current_setting('python_enable_replacements')").fetchall() == [(3, "UTC", False)]
        with pytest.raises(Exception, match="locked"):
            con.execute("SET integer_division = false")
    a.register("only_a", pa.table({"k": [1, 2]}))
    assert a.sql("SELECT sum(k) FROM only_a").fetchall() == [(3,)]
    with pytest.raises(Exception, match="only_a"):
        b.sql("SELECT * FROM only_a").fetchall()
    local = pa.table({"k": [9]})  # noqa: F841 -- replacement scans would find it
    with pytest.raises(Exception, match="local"):
        b.sql("SELECT * FROM local").fetchall()


def test_session_without_external_access_is_its_own_database():
    from colmz.sql import session

    open_, closed = session(), session(external_access=False)
    assert open_.sql("SELECT current_setting('enable_external_access')").fetchall() == [(True,)]
    assert closed.sql("SELECT current_setting('enable_external_access')").fetchall() == [(False,)]
    with pytest.raises(TypeError, match="external_access must be a bool, got 'no'"):
        session(external_access="no")


_FORK_CHILD = """
import multiprocessing as mp
from colmz.sql import run, session

session()
parent = run._DATABASES[True]

def child(q):
    got = session().sql("SELECT 7 / 2").fetchall()
    q.put((run._DATABASES[True] is not parent, got))

ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
print(q.get(timeout=60))
p.join(60)
assert p.exitcode == 0 and run._DATABASES[True] is parent
"""


def test_a_forked_child_opens_its_own_database():
    # In a fresh interpreter: forking a process whose DuckDB threads are busy (other tests'
    # databases) can leave the child waiting on a lock one of them held.
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FORK_CHILD], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(True, [(3,)])"


def test_text_that_is_no_number_is_said_as_postgresql_says_it():
    """A failed cast of text to a number or boolean is PostgreSQL's message, without the SQL
    colmz generated around it (`CAST("__colmz_values"."column1" AS INTEGER)`)."""
    import colmz
    from colmz.sql import SQLError

    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k INT, b BOOLEAN)")
    for sql, want in (("INSERT INTO t VALUES ('x', true)", 'invalid input syntax for type integer: "x"'),
                      ("INSERT INTO t VALUES (1, 'maybe')", 'invalid input syntax for type boolean: "maybe"'),
                      ("SELECT 'it''s'::bigint", 'invalid input syntax for type bigint: "it\'s"'),
                      ("SELECT 'x'::float8", 'invalid input syntax for type double precision: "x"')):
        with pytest.raises(SQLError) as e:
            cat.execute(sql)
        assert str(e.value) == want
    assert cat.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 0}]
