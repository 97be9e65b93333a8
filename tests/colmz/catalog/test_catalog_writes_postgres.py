"""Catalog ``INSERT``/``UPDATE``/``DELETE`` beside the machine's PostgreSQL 15
(``tests/storage_servers.py``): each case's statements run in both, one at a time; every
statement must succeed in both or fail in both with PostgreSQL's words, and the table read
back afterwards must hold the same rows -- so a statement that raises changed nothing.
Definitions (``CREATE TABLE``, ``CREATE MATERIALIZED VIEW``) are compared the same way, the
catalog's objects unchanged by one that raises. Cases PostgreSQL answers and colmz refuses
by name (:class:`colmz.sql.UnsupportedSQL`) are listed apart and checked to be refused,
with the table unchanged."""

from __future__ import annotations

import math

import pytest

import colmz
from colmz.sql import SQLError, UnsupportedSQL

# (setup statements, the statement compared, the query reading the table back)
CASES = [
    # varchar(n): too long is an error, unless the excess is blanks (cut); an explicit cast truncates
    ("CREATE TABLE t (h varchar(3))", "INSERT INTO t VALUES ('abcd')", "SELECT h FROM t"),
    ("CREATE TABLE t (h varchar(3))", "INSERT INTO t VALUES ('abc   '), ('ab '), (NULL)", "SELECT h, length(h) FROM t"),
    ("CREATE TABLE t (h varchar(3))", "INSERT INTO t VALUES ('abcdef'::varchar(3))", "SELECT h FROM t"),
    ("CREATE TABLE t (h varchar(3))", "INSERT INTO t VALUES (12345)", "SELECT h FROM t"),
    ("CREATE TABLE t (h character varying(3), k int)", "INSERT INTO t SELECT 'xyzw', 1 UNION ALL SELECT 'x', 2",
     "SELECT h, k FROM t"),
    ("CREATE TABLE t (h VARCHAR(3), k int)", "INSERT INTO t (k, h) VALUES (1, 'ééé'), (2, 'éééé ')", "SELECT h, k FROM t"),
    ("CREATE TABLE t (h varchar(3), k int)", "INSERT INTO t (k, h) VALUES (1, 'ééé'), (2, 'éé')", "SELECT h, k FROM t"),
    ("CREATE TABLE t (h varchar(3), g text); INSERT INTO t VALUES ('ab', 'abcdef')", "UPDATE t SET h = g",
     "SELECT h, g FROM t"),
    ("CREATE TABLE t (h varchar(3)); INSERT INTO t VALUES ('ab')", "UPDATE t SET h = h || ' '", "SELECT h FROM t"),
    ("CREATE TABLE t (h varchar(3)); INSERT INTO t VALUES ('ab')", "UPDATE t SET h = h || 'cd'", "SELECT h FROM t"),
    # DEFAULT: colmz's columns have no default, so NULL
    ("CREATE TABLE t (a int, b text)", "INSERT INTO t VALUES (DEFAULT, 'x'), (2, DEFAULT)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b text)", "INSERT INTO t (b) VALUES (DEFAULT)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2)", "UPDATE t SET a = DEFAULT, b = a + b",
     "SELECT a, b FROM t"),
    # UPDATE: every value read from the old row; the multiple-column forms
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10), (2, 20)", "UPDATE t SET a = b, b = a",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10), (2, 20)", "UPDATE t SET (a, b) = (b + 1, a + 1)",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2)",
     "UPDATE t SET (a, b) = ROW(b, DEFAULT) WHERE a IS DISTINCT FROM b", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2)", "UPDATE t SET b = 3, (a) = ROW(b)",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "UPDATE t SET (a) = (5)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "UPDATE t SET (a, b) = (1, 2, 3)",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "UPDATE t SET a = 2, a = 3", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "UPDATE t SET (a, b) = (b, 3), a = 4",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2), (3, 4)",
     "UPDATE t SET b = (SELECT max(a) FROM t) WHERE a < (SELECT max(a) FROM t)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int[]); INSERT INTO t VALUES ('{1,2}')", "UPDATE t SET a = '{4,5}'", "SELECT a FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "UPDATE t SET a = 1e10", "SELECT a, b FROM t"),
    # tables have no keys: an UPDATE may make rows alike, a DELETE then removes every copy
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10), (2, 10)", "UPDATE t SET a = 1",
     "SELECT a, b, count(*) FROM t GROUP BY a, b"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10), (1, 10), (2, 10)",
     "DELETE FROM t WHERE a IN (SELECT min(a) FROM t)", "SELECT a, b FROM t"),
    # a SELECT's string literals are of unknown type, as VALUES's (not under UNION or in a
    # subquery); a CASE of them is text
    ("CREATE TABLE t (d date, a int, b boolean, i interval, x int[])",
     "INSERT INTO t SELECT '2024-01-02', '5', 'yes', '1 day', '{1,2}'", "SELECT d::text, a, b, i::text, x FROM t"),
    ("CREATE TABLE t (a int)", "INSERT INTO t SELECT '5' FROM (VALUES (1)) v(k)", "SELECT a FROM t"),
    ("CREATE TABLE t (a int)", "INSERT INTO t (SELECT '5' LIMIT 1)", "SELECT a FROM t"),
    ("CREATE TABLE t (a int)", "INSERT INTO t SELECT 'x'", "SELECT a FROM t"),
    ("CREATE TABLE t (d date)", "INSERT INTO t SELECT '2024-01-02' UNION SELECT '2024-01-03'", "SELECT d FROM t"),
    ("CREATE TABLE t (a int)", "INSERT INTO t SELECT * FROM (SELECT '5') s", "SELECT a FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2)", "INSERT INTO t VALUES (CASE WHEN true THEN '7' END, 1)",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2)", "UPDATE t SET a = CASE WHEN b = 2 THEN '7' END",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a smallint); INSERT INTO t VALUES (1)", "UPDATE t SET a = a + 40000", "SELECT a FROM t"),
    # INSERT column lists
    ("CREATE TABLE t (a int, b int)", "INSERT INTO t (a, a) VALUES (1, 2)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b text)", "INSERT INTO t (b, a) VALUES ('x', 1), ('y', 2)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2), (3, 4)",
     "INSERT INTO t SELECT a + 10, b FROM t UNION SELECT 5, 5 ORDER BY 1 DESC LIMIT 2", "SELECT a, b FROM t"),
    # DELETE with subqueries over the same table and correlated EXISTS
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10), (2, 20)",
     "DELETE FROM t WHERE b IN (SELECT max(b) FROM t)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); CREATE TABLE u (a int); INSERT INTO t VALUES (1, 10), (2, 20); "
     "INSERT INTO u VALUES (2)", "DELETE FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2), (3, 4)", "DELETE FROM t WHERE a = (SELECT a FROM t)",
     "SELECT a, b FROM t"),
    # numbers out of their column's range, in PostgreSQL's words
    ("CREATE TABLE t (c bigint)", "INSERT INTO t VALUES (9223372036854775808)", "SELECT c FROM t"),
    ("CREATE TABLE t (c bigint)", "INSERT INTO t VALUES (9223372036854775807.5)", "SELECT c FROM t"),
    ("CREATE TABLE t (b int)", "INSERT INTO t VALUES (2147483647.5)", "SELECT b FROM t"),
    ("CREATE TABLE t (a smallint)", "INSERT INTO t VALUES (-32768.5)", "SELECT a FROM t"),
    ("CREATE TABLE t (a smallint)", "INSERT INTO t VALUES (-32768.4)", "SELECT a FROM t"),
    ("CREATE TABLE t (d real)", "INSERT INTO t SELECT 1e40::float8", "SELECT d FROM t"),
    ("CREATE TABLE t (d real)", "INSERT INTO t SELECT 1e-50::float8", "SELECT d FROM t"),
    ("CREATE TABLE t (d real); INSERT INTO t VALUES (1.5)", "UPDATE t SET d = 1e-50::float8", "SELECT d FROM t"),
    ("CREATE TABLE t (d real)", "INSERT INTO t VALUES (1.5), (1e-50)", "SELECT d FROM t"),
    ("CREATE TABLE t (d real)", "INSERT INTO t VALUES (1.5), (-1e-50)", "SELECT d FROM t"),
    ("CREATE TABLE t (d double precision)", "INSERT INTO t VALUES (1e400)", "SELECT d FROM t"),
    ("CREATE TABLE t (d double precision, e real)", "INSERT INTO t VALUES (1.5, 1), (2, 2.5), (NULL, 'NaN')",
     "SELECT d, e FROM t"),
    # each VALUES item converts to its text column before the rows are combined
    ("CREATE TABLE t (g text)",
     "INSERT INTO t VALUES (1.50), (true), ('2024-01-01'::date), (1e20::float8), (0.1::real), (2::float8)",
     "SELECT g FROM t"),
    ("CREATE TABLE t (g text)", "INSERT INTO t VALUES (interval '1 day'), (interval '1 month')", "SELECT g FROM t"),
    # arrays to text[] by their elements' casts
    ("CREATE TABLE t (a text[], b int[]); INSERT INTO t VALUES ('{x}', '{1,2}')", "UPDATE t SET a = b",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a text[], b real[]); INSERT INTO t VALUES ('{x}', '{1.5,2,1e20}')", "INSERT INTO t SELECT b, b FROM t",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a text[])", "INSERT INTO t VALUES (ARRAY[true, NULL])", "SELECT a FROM t"),
    # no assignment cast to jsonb but from text (and unknown)
    ("CREATE TABLE t (n jsonb)", "INSERT INTO t VALUES (1)", "SELECT n::text FROM t"),
    ("CREATE TABLE t (n jsonb, k int); INSERT INTO t VALUES ('{}', 1)", "UPDATE t SET n = k", "SELECT n::text, k FROM t"),
    ("CREATE TABLE t (n json)", "INSERT INTO t SELECT true", "SELECT n::text FROM t"),
    ("CREATE TABLE t (n jsonb, m json)", "INSERT INTO t VALUES (NULL, '[1]'), ('{\"b\":1}', DEFAULT)",
     "SELECT n::text, m::text FROM t"),
]

# (setup, statement colmz refuses by name, the query reading the table back)
REFUSED = [
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "UPDATE t SET a = 5 RETURNING a",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2), (3, 4)", "UPDATE t SET a = u.b FROM t AS u WHERE u.a = 3",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "UPDATE t SET (a, b) = (SELECT 7, 8)",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 10)", "DELETE FROM t WHERE a = 1 RETURNING b",
     "SELECT a, b FROM t"),
    ("CREATE TABLE t (g text)", "INSERT INTO t VALUES (ARRAY[1, 2])", "SELECT g FROM t"),
]


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split("; ") if s.strip()]


def _pg_run(conn, sql: str):
    import psycopg

    try:
        with conn.transaction():
            conn.execute(sql)
    except psycopg.Error as e:
        return str(e).splitlines()[0]
    return None


def _same_rows(mine, theirs) -> bool:
    def same(a, b):  # (a real read back is a double in one and the real's text in the other)
        if isinstance(a, float) and isinstance(b, float):
            return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return a == b

    return len(mine) == len(theirs) and all(
        len(x) == len(y) and all(same(a, b) for a, b in zip(x, y)) for x, y in zip(mine, theirs))


def _key(row):
    return repr(tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in row))


@pytest.fixture
def pg(pg_url):
    import psycopg
    from storage_servers import fresh_schema_url

    with psycopg.connect(fresh_schema_url(pg_url), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        yield conn


def _fresh(pg, setup: str):
    pg.execute("DROP TABLE IF EXISTS t, u")
    cat = colmz.Catalog()
    for s in _statements(setup):
        pg.execute(s)
        cat.execute(s)
    return cat


@pytest.mark.parametrize(("setup", "statement", "query"), CASES, ids=[c[1][:60] for c in CASES])
def test_writes_as_postgresql_15(pg, setup, statement, query):
    cat = _fresh(pg, setup)
    before = cat.sql(query).to_pylist()
    expected_error = _pg_run(pg, statement)
    theirs = sorted((tuple(r) for r in pg.execute(query).fetchall()), key=_key)
    try:
        cat.execute(statement)
        got_error = None
    except (SQLError, colmz.SchemaError, OverflowError) as e:
        assert not isinstance(e, UnsupportedSQL), (statement, e)
        got_error = str(e)
    if expected_error is None:
        assert got_error is None, (statement, got_error)
    else:
        assert got_error is not None and expected_error in got_error, (statement, got_error, expected_error)
        assert cat.sql(query).to_pylist() == before  # a statement that raises changes nothing
    mine = sorted((tuple(r.values()) for r in cat.sql(query).to_pylist()), key=_key)
    assert _same_rows(mine, theirs), (statement, mine, theirs)


@pytest.mark.parametrize(("setup", "statement", "query"), REFUSED, ids=[c[1][:60] for c in REFUSED])
def test_writes_postgresql_answers_are_refused_by_name(pg, setup, statement, query):
    cat = _fresh(pg, setup)
    before = cat.sql(query).to_pylist()
    assert _pg_run(pg, statement) is None  # PostgreSQL runs it
    with pytest.raises(UnsupportedSQL, match="is not supported by colmz"):
        cat.execute(statement)
    assert cat.sql(query).to_pylist() == before


def test_continual_task_varchar_n_column_is_refused_by_name():
    # A task's INSERT does not measure its values against n: refused, nothing created.
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE i (s text)")
    with pytest.raises(UnsupportedSQL, match="continual task column 'v' of type varchar\\(2\\)"):
        cat.execute("CREATE CONTINUAL TASK ct (v varchar(2)) ON INPUT i AS (INSERT INTO ct SELECT s FROM i)")
    assert [r["name"] for r in cat.sql("SHOW OBJECTS").to_pylist()] == ["i"]
    from colmz.collection import MemoryCollection
    from colmz.continual import ContinualTask

    with pytest.raises(UnsupportedSQL, match="varchar\\(2\\)"):
        ContinualTask("ct", {"i": MemoryCollection({"s": "text"})}, ["INSERT INTO ct SELECT s FROM i"],
                      columns={"v": "varchar(2)"})


def test_varchar_length_survives_a_durable_reopen(tmp_path):
    # the declared n is the definition's: a reopened catalog measures as the first did
    cat = colmz.Catalog(str(tmp_path / "c"))
    cat.execute("CREATE TABLE t (h varchar(2)); INSERT INTO t VALUES ('ab ')")
    again = colmz.Catalog(str(tmp_path / "c"))
    with pytest.raises(SQLError, match=r"value too long for type character varying\(2\)"):
        again.execute("INSERT INTO t VALUES ('abc')")
    assert again.sql("SELECT h FROM t").to_pylist() == [{"h": "ab"}]


# (setup, a statement creating an object or misplacing DEFAULT, a query reading what it made or None)
DDL = [
    ("CREATE TABLE t (a int); INSERT INTO t VALUES (1)", "CREATE MATERIALIZED VIEW v (x) AS SELECT a, a + 1 AS b FROM t",
     "SELECT * FROM v"),
    ("CREATE TABLE t (a int)", "CREATE MATERIALIZED VIEW v (x, y, z) AS SELECT a, a + 1 AS b FROM t", None),
    ("CREATE TABLE t (a int)", "CREATE MATERIALIZED VIEW v AS SELECT a, a FROM t", None),
    ("CREATE TABLE t (a int)", "CREATE MATERIALIZED VIEW v (b) AS SELECT a, 1 AS b FROM t", None),
    ("", "CREATE TABLE t (a int, a text)", None),
    ("CREATE TABLE t (a int, b text)", "INSERT INTO t SELECT 1, DEFAULT", "SELECT a, b FROM t"),
    ("CREATE TABLE t (a int, b text); INSERT INTO t VALUES (1, 'x')", "UPDATE t SET b = DEFAULT || 'a'",
     "SELECT a, b FROM t"),
]


@pytest.mark.parametrize(("setup", "statement", "query"), DDL, ids=[c[1][:60] for c in DDL])
def test_definitions_as_postgresql_15(pg, setup, statement, query):
    pg.execute("DROP MATERIALIZED VIEW IF EXISTS v")
    cat = _fresh(pg, setup)
    objects = cat.sql("SHOW OBJECTS").to_pylist()
    expected_error = _pg_run(pg, statement)
    try:
        cat.execute(statement)
        got_error = None
    except (SQLError, colmz.SchemaError) as e:
        assert not isinstance(e, UnsupportedSQL), (statement, e)
        got_error = str(e)
    if expected_error is None:
        assert got_error is None, (statement, got_error)
    else:
        assert got_error is not None and expected_error in got_error, (statement, got_error, expected_error)
        assert cat.sql("SHOW OBJECTS").to_pylist() == objects
    if query is not None:
        cur = pg.execute(query)
        got = cat.sql(query)
        assert got.column_names == [d.name for d in cur.description]
        assert sorted(tuple(r.values()) for r in got.to_pylist()) == sorted(tuple(r) for r in cur.fetchall())


@pytest.mark.parametrize("statement", ["CREATE TABLE t ()", "CREATE TABLE t AS SELECT 1 AS a"])
def test_tables_postgresql_creates_are_refused_by_name(pg, statement):
    pg.execute("DROP TABLE IF EXISTS t")
    cat = colmz.Catalog()
    assert _pg_run(pg, statement) is None
    with pytest.raises(UnsupportedSQL, match="is not supported by colmz"):
        cat.execute(statement)
    assert cat.sql("SHOW OBJECTS").to_pylist() == []
