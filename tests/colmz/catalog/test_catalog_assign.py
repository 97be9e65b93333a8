"""Assignment casts on ``INSERT``: PostgreSQL's ``pg_cast`` assignment context, checked
against the machine's PostgreSQL 15 (``tests/storage_servers.py``) and in continual tasks."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import colmz
from colmz.sql import SQLError
from colmz.sql.assign import assignment_cast, pg_type_name

# Source columns (name, type, values) and expressions of their own type.
SOURCES = [
    ("i2", "SMALLINT", ["7", "-3"]),
    ("i4", "INTEGER", ["2", "-5"]),
    ("i8", "BIGINT", ["30000", "-1"]),
    ("f4", "REAL", ["2.5", "-1.5"]),
    ("f8", "DOUBLE PRECISION", ["3.5", "0.1"]),
    ("b", "BOOLEAN", ["true", "false"]),
    ("s", "TEXT", ["'abc'", "'12'"]),
    ("d", "DATE", ["'2024-02-03'", "'1999-12-31'"]),
    ("ts", "TIMESTAMP", ["'2024-02-03 04:05:06.5'", "'2000-01-01 00:00:00'"]),
    ("tz", "TIMESTAMPTZ", ["'2024-02-03 04:05:06+00'", "'2000-01-01 12:00:00.25+00'"]),
    # the same bytea literals in both: colmz reads them as PostgreSQL's hex input
    ("bt", "BYTEA", ["'\\x0aff'", "'\\x'"]),
]
# numeric in both: an integer plus a numeric literal (2.5 and -4.5: PostgreSQL rounds half
# away from zero to integers).
EXPRESSIONS = [(f"{name}", name) for name, _, _ in SOURCES] + [("i4 + 0.5", "numeric")]
TARGETS = ["SMALLINT", "INTEGER", "BIGINT", "REAL", "DOUBLE PRECISION", "TEXT", "BOOLEAN", "DATE",
           "TIMESTAMP", "TIMESTAMPTZ", "BYTEA"]


def _setup_sql(engine: int) -> list[str]:
    cols = ", ".join(f"{n} {t}" for n, t, _ in SOURCES)
    pick = lambda v: v[engine] if isinstance(v, tuple) else v  # noqa: E731
    rows = ", ".join("(" + ", ".join(f"{pick(v[i])}::{t}" for _, t, v in SOURCES) + ")" for i in range(2))
    return [f"CREATE TABLE src ({cols})", f"INSERT INTO src VALUES {rows}"]


def _same(a, b, target: str) -> bool:
    if a is None or b is None:
        return a is b
    if target == "REAL":
        return np.float32(a) == np.float32(b)
    if isinstance(a, memoryview) or isinstance(b, memoryview):
        return bytes(a) == bytes(b)
    return a == b


def _colmz_outcome(cat, i, expr, target):
    cat.execute(f"CREATE TABLE t{i} (c {target})")
    try:
        cat.execute(f"INSERT INTO t{i} SELECT {expr} FROM src")
    except (SQLError, colmz.SchemaError, OverflowError) as e:
        return ("error", str(e).split(": ", 1)[1])
    return ("ok", sorted(cat.sql(f"SELECT c FROM t{i}").column(0).to_pylist(), key=repr))


def _pg_outcome(conn, i, expr, target):
    import psycopg

    conn.execute(f"CREATE TABLE t{i} (c {target})")
    try:
        with conn.transaction():
            conn.execute(f"INSERT INTO t{i} SELECT {expr} FROM src")
    except psycopg.Error as e:
        return ("error", str(e).splitlines()[0])
    return ("ok", sorted((r[0] for r in conn.execute(f"SELECT c FROM t{i}").fetchall()), key=repr))


def test_insert_select_converts_as_postgresql_15_does(pg_url):
    # Before: an INSERT of an integer column into a text column raised SchemaError ("query
    # columns did not match"); PostgreSQL converts every pair its pg_cast allows on assignment.
    import psycopg
    from storage_servers import fresh_schema_url

    cat = colmz.Catalog()
    with psycopg.connect(fresh_schema_url(pg_url), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        for pg, mine in zip(_setup_sql(0), _setup_sql(1)):
            conn.execute(pg)
            cat.execute(mine)
        checked = {"ok": 0, "error": 0}
        i = 0
        for expr, _ in EXPRESSIONS:
            for target in TARGETS:
                i += 1
                pg = _pg_outcome(conn, i, expr, target)
                mine = _colmz_outcome(cat, i, expr, target)
                assert mine[0] == pg[0], (expr, target, mine, pg)
                if pg[0] == "ok":
                    assert len(mine[1]) == len(pg[1]) and all(
                        _same(a, b, target) for a, b in zip(mine[1], pg[1])), (expr, target, mine, pg)
                else:
                    assert mine[1] == pg[1], (expr, target)
                checked[pg[0]] += 1
        # UPDATE ... SET converts by assignment too
        for sql in ["CREATE TABLE u (k INT, s TEXT, f REAL)", "INSERT INTO u VALUES (1, 'a', 0.5)",
                    "UPDATE u SET k = k + 1.5, s = f * 3, f = k / 4.0"]:
            conn.execute(sql)
            cat.execute(sql)
        pg_row = conn.execute("SELECT k, s, f FROM u").fetchone()
        assert cat.sql("SELECT k, s, f FROM u").to_pylist() == [{"k": pg_row[0], "s": pg_row[1], "f": pg_row[2]}]
        assert pg_row == (3, "1.5", 0.25)
    assert checked["ok"] > 50 and checked["error"] > 30  # both kinds of pair were compared


def test_out_of_range_and_unsupported_assignments_name_the_type():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k SMALLINT, s TEXT); CREATE TABLE n (k INT, d DOUBLE)")
    cat.execute("INSERT INTO n VALUES (40000, 1e10)")
    with pytest.raises(OverflowError, match="INSERT INTO t: smallint out of range"):
        cat.execute("INSERT INTO t (k) SELECT k FROM n")
    with pytest.raises(OverflowError, match="smallint out of range"):
        cat.execute("INSERT INTO t (k) SELECT d FROM n")
    with pytest.raises(colmz.sql.UnsupportedSQL, match='interval to text column "s"'):
        cat.execute("INSERT INTO t (s) SELECT INTERVAL '14 months' FROM n")
    assert cat.read("t").to_pylist() == [] and cat.now == 1
    assert pg_type_name(pa.float64()) == "double precision"
    assert assignment_cast(pa.int64(), pa.int64(), "k") is None


@pytest.mark.parametrize("durable", [False, True])
def test_continual_task_inserts_convert_by_assignment(tmp_path, durable):
    # INSERT INTO a task's text column from an integer column, and a double into an integer:
    # converted inside the statement's query (batched and time-by-time alike), kept on reopen.
    cat = colmz.Catalog(tmp_path if durable else None)
    cat.execute("CREATE TABLE input (id INT, x DOUBLE PRECISION)")
    cat.execute("""CREATE CONTINUAL TASK ct (s TEXT, n SMALLINT) ON INPUT input AS (
        INSERT INTO ct SELECT id, x FROM input;
        DELETE FROM ct WHERE s IN (SELECT (id - 10)::TEXT FROM input))""")
    cat.execute("INSERT INTO input VALUES (1, 2.5), (2, 3.5)")
    cat.execute("INSERT INTO input VALUES (3, -0.5)")
    if durable:
        cat = colmz.Catalog(tmp_path)
    cat.execute("INSERT INTO input VALUES (11, 1e3)")
    got = sorted(tuple(r.values()) for r in cat.sql("SELECT s, n FROM ct").to_pylist())
    assert got == [("11", 1000), ("2", 4), ("3", 0)]
    assert cat.object("ct").schema == (colmz.ColumnSpec("s", pa.string()), colmz.ColumnSpec("n", pa.int16()))
    with pytest.raises(colmz.SchemaError, match=r'CONTINUAL TASK bad statement 1 \(INSERT INTO bad\) query columns '
                                               'did not match: column "n" is of type integer but expression is of type text'):
        cat.execute("CREATE CONTINUAL TASK bad (n INT) ON INPUT input AS (INSERT INTO bad SELECT id::TEXT FROM input)")
    assert "bad" not in cat


def test_insert_arity_as_postgresql_15(pg_url):
    # Before: an INSERT without a column list giving fewer expressions than the table has
    # columns raised SchemaError ("the task has 2 column(s)"); PostgreSQL fills the rest with
    # their defaults. Too many expressions, or a column list of another length, now raise
    # PostgreSQL's own words.
    import psycopg
    from storage_servers import fresh_schema_url

    statements = ["INSERT INTO u SELECT k FROM t", "INSERT INTO u VALUES (5)", "INSERT INTO u (v) VALUES (7)",
                  "INSERT INTO t SELECT k, k FROM t", "INSERT INTO u (v) VALUES (1, 2)",
                  "INSERT INTO u (k, v) VALUES (1)", "INSERT INTO u (k, v) SELECT k FROM t"]
    setup = "CREATE TABLE t (k INT); CREATE TABLE u (k INT, v INT); INSERT INTO t VALUES (1)"
    cat = colmz.Catalog()
    cat.execute(setup)
    with psycopg.connect(fresh_schema_url(pg_url), autocommit=True) as conn:
        conn.execute(setup)
        for stmt in statements:
            try:
                conn.execute(stmt)
                expected = None
            except psycopg.Error as e:
                expected = str(e).splitlines()[0]
            try:
                cat.execute(stmt)
                got = None
            except colmz.SchemaError as e:
                got = str(e).split(": ", 1)[1]
            assert got == expected, stmt
        pg_rows = sorted(conn.execute("SELECT k, v FROM u").fetchall(), key=repr)
    assert sorted(cat.sql("SELECT k, v FROM u").to_pylist(), key=repr) == sorted(
        ({"k": k, "v": v} for k, v in pg_rows), key=repr)
    assert len(pg_rows) == 3
    with pytest.raises(colmz.sql.UnsupportedSQL, match="an empty select list"):
        cat.execute("INSERT INTO t SELECT FROM t")  # PostgreSQL: a row of defaults per row


def test_an_exact_assignment_runs_no_query(monkeypatch):
    # Integers into a wider integer column, text into text: Arrow's checked cast is
    # PostgreSQL's assignment there, so a one-row INSERT runs its VALUES query only (before:
    # a second DuckDB query per INSERT converted int4 to int8, 2.5 -> 6.2 ms per insert).
    # Out of range still takes DuckDB's path and PostgreSQL's message.
    import colmz.catalog.queries
    import colmz.sql.write

    calls = []
    real = colmz.sql.write.run_query
    for module in (colmz.catalog.queries, colmz.sql.write):  # the statement's query, the casts
        monkeypatch.setattr(module, "run_query", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, s TEXT); CREATE TABLE n (k SMALLINT)")
    calls.clear()
    cat.execute("INSERT INTO t VALUES (1, 'x')")
    assert len(calls) == 1 and cat.sql("SELECT k, s FROM t").to_pylist() == [{"k": 1, "s": "x"}]
    assert cat.object("t").schema[0].type == pa.int64()
    with pytest.raises(OverflowError, match="smallint out of range"):
        cat.execute("INSERT INTO n VALUES (40000)")


# (table, INSERT ... VALUES, the query whose rows are compared)
VALUES_MIXES = [
    # Before: DuckDB's "Cannot combine types VARCHAR and DECIMAL(2,1)" (the VALUES rows were
    # combined before their literals had their column's type)
    ("f (x DOUBLE PRECISION)", "INSERT INTO f VALUES ('NaN'), (1.5), (2)", "SELECT x::text FROM f"),
    ("f (x REAL)", "INSERT INTO f VALUES (1), (2.5), ('NaN')", "SELECT x::text FROM f"),
    ("f (x DOUBLE PRECISION)", "INSERT INTO f VALUES (1), (2.5)", "SELECT x FROM f"),
    ("f (ts TIMESTAMPTZ)", "INSERT INTO f VALUES ('2024-01-01 00:00:00+00'), (TIMESTAMPTZ '2024-01-02 00:00:00+00')",
     "SELECT ts FROM f"),
    ("f (d DATE)", "INSERT INTO f VALUES ('2024-01-01'), (DATE '2024-01-02'), (NULL)", "SELECT d FROM f"),
    ("f (b BOOLEAN)", "INSERT INTO f VALUES ('yes'), (true), ('off')", "SELECT b FROM f"),
    ("f (k INT, s TEXT)", "INSERT INTO f VALUES (1, 'a'), (2.5, 3)", "SELECT k, s FROM f"),
    ("f (ts TIMESTAMPTZ, s TEXT)", "INSERT INTO f VALUES (NULL, NULL), ('2024-01-01', 'a')", "SELECT ts, s FROM f"),
    ("f (ts TIMESTAMPTZ, s TEXT)", "INSERT INTO f VALUES (now(), 'x'), ('2024-01-01', 'a')",
     "SELECT ts > '2025-01-01', s FROM f"),
    ("f (x BIGINT)", "INSERT INTO f VALUES (1), (9000000000), ('12')", "SELECT x FROM f"),
    # Before: answered (inf, and 3) where PostgreSQL's input functions refuse the text
    ("f (x DOUBLE PRECISION)", "INSERT INTO f VALUES ('1e400')", "SELECT x FROM f"),
    ("f (x DOUBLE PRECISION)", "INSERT INTO f VALUES (1.5), ('1e400')", "SELECT x FROM f"),
    ("f (x INT)", "INSERT INTO f VALUES ('2.5')", "SELECT x FROM f"),
    ("f (x INT)", "INSERT INTO f VALUES (2.5), (' 7 ')", "SELECT x FROM f"),  # numeric rounds
    ("f (x INT)", "INSERT INTO f VALUES (1), (9000000000)", "SELECT x FROM f"),
    ("f (x INT, y INT)", "INSERT INTO f VALUES ('1')", "SELECT x, y FROM f"),  # fills the first
]


def test_insert_values_mixing_literal_kinds_as_postgresql_15(pg_url):
    # Each VALUES item takes its column's type before the rows are combined
    # (PostgreSQL's transformInsertStmt): answered or refused as PostgreSQL does.
    import psycopg
    from storage_servers import fresh_schema_url

    with psycopg.connect(fresh_schema_url(pg_url), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        for table, insert, query in VALUES_MIXES:
            cat = colmz.Catalog()
            conn.execute("DROP TABLE IF EXISTS f")
            conn.execute(f"CREATE TABLE {table}")
            cat.execute(f"CREATE TABLE {table}")
            try:
                conn.execute(insert)
                expected = sorted(conn.execute(query).fetchall(), key=repr)
            except psycopg.Error as e:
                expected = str(e).splitlines()[0]
            try:
                cat.execute(insert)
                got = sorted((tuple(r.values()) for r in cat.sql(query).to_pylist()), key=repr)
            except (SQLError, OverflowError) as e:
                got = str(e)
            if isinstance(expected, str):
                assert isinstance(got, str) and expected in got, (insert, got, expected)
                assert cat.read("f").to_pylist() == []  # nothing written
            else:
                assert got == expected, insert
