"""Maintained views whose set operation holds a bare string literal beside a typed column:
PostgreSQL types the literal by the other branches (``colmz.sql.setop_types``), and the planner
casts the literal's branch to that type (``SetOpLowering.coerce_literals``), so the view is
kept by its operators -- no Fallback -- and equals the recompute path and PostgreSQL 15 after
inserts, deletes and updates. A literal that is not of the type, two literals made text
beside a typed column, and a branch that makes its literal text raise PostgreSQL's error at
CREATE, as the query does."""

from __future__ import annotations

import pytest
from reference_models import check_script
from sql_oracle import jsonb_text_connection, require, views_equal_postgres

import colmz

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

TABLES = ["CREATE TABLE t (k INT, b BIGINT, f DOUBLE PRECISION, d DATE, ts TIMESTAMPTZ, s TEXT, j JSONB)"]

BODIES = [
    "SELECT k FROM t UNION SELECT '5'",
    "SELECT '5' UNION ALL SELECT k FROM t",  # the literal first: still the integer column
    "SELECT b, s FROM t UNION ALL SELECT ' 7 ', 'z'",  # text beside text stays text
    "SELECT f FROM t EXCEPT SELECT '2.5'",
    "SELECT k FROM t INTERSECT ALL SELECT '1'",
    "SELECT d FROM t UNION SELECT '2024-01-01'",
    "SELECT ts FROM t UNION ALL SELECT '2024-02-29 12:00:00+02'",
    "SELECT k FROM t UNION SELECT '5' UNION SELECT '6'",  # folded left: each literal an integer
    """SELECT j FROM t UNION SELECT '{"a":1}'""",  # jsonb: the literal's canonical text
    "SELECT a * 2 AS c FROM (SELECT k AS a FROM t UNION ALL SELECT '3') q WHERE a > 1",
]

SCRIPT = [
    """INSERT INTO t VALUES (1, 10, 0.5, '2024-01-01', '2024-02-29 10:00:00+00', 'a', '{"a": 1}'),
       (5, 7, 2.5, '2024-03-01', NULL, NULL, '[1, 2]'), (NULL, NULL, NULL, NULL, NULL, NULL, NULL)""",
    "UPDATE t SET k = 6, d = '2024-01-02' WHERE k = 1",
    "DELETE FROM t WHERE k = 5",
    """INSERT INTO t VALUES (3, 7, 2.5, '2024-01-01', '2024-02-29 10:00:00+00', 'z', '{"a":1}')""",
    "DELETE FROM t",
]


def catalogs() -> list[colmz.Catalog]:
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0])
        for i, body in enumerate(BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {body}")
    return cats


def test_each_body_is_kept_by_its_operators_and_equals_the_recompute():
    cats = catalogs()
    for i, body in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and mv.plan is not None and not mv.plan.fallbacks(), (body, mv.reasons)
    check_script(cats, SCRIPT)


def test_the_literal_takes_the_columns_type():
    cat = catalogs()[0]
    assert "MapFilter via SQL [CAST('5' AS integer)]" in str(cat.explain("v0"))
    assert "[CAST(' 7 ' AS bigint)]" in str(cat.explain("v2"))  # 'z' beside text: not cast
    types = {i: str(cat.sql(f"SELECT * FROM v{i}").schema.types[0]) for i in (0, 1, 3, 5, 6)}
    assert types == {0: "int32", 1: "int32", 3: "double", 5: "date32[day]", 6: "timestamp[us, tz=UTC]"}
    assert cat.sql("SELECT * FROM v8").to_pylist() == [{"j": '{"a": 1}'}]  # not '{"a":1}'


@pytest.mark.parametrize(("body", "error"), [
    ("SELECT k FROM t UNION ALL SELECT 'x'", 'invalid input syntax for type integer: "x"'),
    ("SELECT '5' UNION SELECT '6' UNION SELECT k FROM t", "UNION types text and integer cannot be matched"),
    ("SELECT k FROM t UNION (SELECT DISTINCT '5')", "UNION types integer and text cannot be matched"),
    ("SELECT f FROM t EXCEPT SELECT 'abc'", 'invalid input syntax for type double precision: "abc"'),
])
def test_a_literal_postgresql_cannot_type_raises_its_error_at_create(body, error):
    cat = colmz.Catalog(views="incremental")
    cat.execute(TABLES[0])
    with pytest.raises(colmz.sql.SQLError, match=error):
        cat.sql(body)
    with pytest.raises(colmz.sql.SQLError, match=error):
        cat.execute(f"CREATE MATERIALIZED VIEW bad AS {body}")
    assert "bad" not in cat.names


# ---------------------------------------------------------------------------- PostgreSQL 15


def test_each_body_equals_postgres():
    conn = jsonb_text_connection()
    try:
        conn.execute("SET TIME ZONE 'UTC'")
        script = ["; ".join(s.split(";")) for s in SCRIPT]
        assert views_equal_postgres(conn, TABLES, BODIES, script) == len(BODIES) * (len(SCRIPT) + 1)
    finally:
        conn.close()
