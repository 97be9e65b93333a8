"""colmz.sql.pushdown: an outer WHERE over a subquery's passed-through columns filters rows
before the subquery's checked items are computed, as PostgreSQL 15 pulls the subquery up.
Expected answers are PostgreSQL 15's (the server tests/storage_servers.py starts; the same
queries are in tests/sql_corpus.py as ``pd_*``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("duckdb")

import colmz  # noqa: E402
from colmz.sql import SQLError  # noqa: E402
from colmz.sql.pushdown import push_filters  # noqa: E402

#: r * r overflows a real only at k = 4
SUB = "(SELECT k AS q, r * r AS y FROM reals) u"


@pytest.fixture
def cat():
    c = colmz.Catalog()
    c.execute("CREATE TABLE reals (k BIGINT, r REAL)")
    c.execute("INSERT INTO reals VALUES (1, 2), (2, 1.5), (4, 3e38), (5, NULL)")
    return c


def rows(cat, sql):
    t = cat.sql(sql)
    return sorted(zip(*(c.to_pylist() for c in t.columns)), key=repr)


@pytest.mark.parametrize("sql", [
    f"SELECT q, y FROM {SUB} WHERE abs(q - 4) > 0",
    f"SELECT q, y FROM {SUB} WHERE (q % 4)::text <> '0'",
    f"SELECT u.q, u.y FROM {SUB} WHERE abs(u.q - 4) > 0 ORDER BY u.y",
    f"SELECT q, y FROM (SELECT q, y FROM {SUB}) v WHERE q % 4 <> 0",
    "WITH u AS (SELECT k AS q, r * r AS y FROM reals) SELECT q, y FROM u WHERE abs(q - 4) > 0",
    "SELECT q, y FROM (SELECT DISTINCT k AS q, r * r AS y FROM reals) u WHERE abs(q - 4) > 0",
    "SELECT q, y FROM (SELECT DISTINCT ON (k) k AS q, r * r AS y FROM reals ORDER BY k) u WHERE abs(q - 4) > 0",
    "SELECT a, b FROM (SELECT k, r * r FROM reals) u(a, b) WHERE abs(a - 4) > 0",
])
def test_an_outer_filter_on_passed_through_columns_drops_rows_before_the_overflow_check(cat, sql):
    # PostgreSQL 15 answers (the row whose r * r overflows is filtered out first); colmz
    # raised "value out of range: overflow" before (DuckDB kept the filter above the check)
    assert rows(cat, sql) == [(1, 4.0), (2, 2.25), (5, None)]


def test_the_moved_filter_keeps_the_subquerys_own_filter(cat):
    got = rows(cat, "SELECT q, y FROM (SELECT k AS q, r * r AS y FROM reals WHERE k > 1) u "
                    "WHERE abs(q - 4) > 0")
    assert got == [(2, 2.25), (5, None)]


def test_a_recomputed_materialized_view_of_such_a_query_answers_as_the_query():
    # views="recompute" runs the view's query as cat.sql does, at creation and each commit
    cat = colmz.Catalog(views="recompute")
    cat.execute("CREATE TABLE reals (k BIGINT, r REAL)")
    cat.execute("INSERT INTO reals VALUES (1, 2), (4, 3e38)")
    cat.execute(f"CREATE MATERIALIZED VIEW mv AS SELECT q, y FROM {SUB} WHERE abs(q - 4) > 0")
    cat.execute("INSERT INTO reals VALUES (2, 1.5), (5, NULL), (4, 3.1e38)")
    assert rows(cat, "SELECT q, y FROM mv") == [(1, 4.0), (2, 2.25), (5, None)]


@pytest.mark.parametrize("sql", [
    f"SELECT u.q, u.y FROM {SUB} JOIN reals t ON t.k = u.q WHERE abs(u.q - 4) > 0 AND t.k > 0",
    f"SELECT u.q, u.y FROM {SUB} LEFT JOIN reals t ON t.k = u.q + 10 WHERE abs(u.q - 4) > 0",
    f"SELECT u.q, u.y FROM reals t RIGHT JOIN {SUB} ON t.k = u.q + 10 WHERE abs(u.q - 4) > 0",
])
def test_in_a_join_the_subquerys_own_conjuncts_move(cat, sql):
    # PostgreSQL 15 answers these (corpus pd_join_*); colmz raised the overflow before
    assert rows(cat, sql) == [(1, 4.0), (2, 2.25), (5, None)]


def test_a_filter_on_an_outer_joins_nullable_side_is_not_moved():
    # moving u.q IS NULL below the LEFT JOIN would keep rows the join nulls out
    sql = ("SELECT t.k FROM t LEFT JOIN (SELECT k AS q, __colmz_f(r) AS y FROM t) u ON t.k = u.q + 10 "
           "WHERE u.q IS NULL")
    assert push_filters(sql) == sql


@pytest.mark.parametrize("sql", [
    f"SELECT q, y FROM {SUB} WHERE y > 0",  # the computed column: PostgreSQL raises too
    f"SELECT q, y FROM {SUB} WHERE abs(q - 4) > 0 AND y > 0",  # PostgreSQL: r * r > 0 first
    f"SELECT q, y FROM {SUB} WHERE abs(q - 4) > random() - 1",  # volatile: not pushed
    "SELECT q, y FROM (SELECT k AS q, r * r AS y FROM reals ORDER BY k LIMIT 5) u WHERE abs(q - 4) > 0",
    "WITH u AS MATERIALIZED (SELECT k AS q, r * r AS y FROM reals) SELECT q, y FROM u WHERE abs(q - 4) > 0",
    "WITH u AS (SELECT k AS q, r * r AS y FROM reals) SELECT a.q, a.y FROM u a, u b WHERE abs(a.q - 4) > 0 "
    "AND a.q = b.q",  # a CTE read twice is not inlined
])
def test_where_postgresql_raises_colmz_raises(cat, sql):
    with pytest.raises(SQLError, match="value out of range: overflow"):
        cat.sql(sql)


def test_push_filters_moves_only_a_whole_where_on_passed_through_columns():
    guarded = "SELECT q FROM (SELECT k AS q, __colmz_f(r) AS y FROM t ORDER BY k) u WHERE {}"
    assert push_filters(guarded.format("q % 3 <> 1 AND u.q > 0")) == (
        "SELECT q FROM (SELECT k AS q, __colmz_f(r) AS y FROM t WHERE (k % 3 <> 1) AND (k > 0) ORDER BY k) u "
        "WHERE true AND true")
    for where in ("q > 0 AND y > 0", "q > random()", "q IN (SELECT 1)", "v.q > 0", "z > 0"):
        assert push_filters(guarded.format(where)) == guarded.format(where)
    # a subquery with no reserved-prefix check, a window, a LIMIT or a star: unchanged
    for sql in ("SELECT q FROM (SELECT k AS q, r * r AS y FROM t) u WHERE q > 0",
                "SELECT q FROM (SELECT k AS q, __colmz_f(r) OVER () AS y FROM t) u WHERE q > 0",
                "SELECT q FROM (SELECT k AS q, __colmz_f(r) AS y FROM t LIMIT 3) u WHERE q > 0",
                "SELECT q FROM (SELECT *, k AS q, __colmz_f(r) AS y FROM t) u WHERE q > 0"):
        assert push_filters(sql) == sql
    # an item naming another item's alias may be read as that alias (DuckDB): not passed through
    clash = "SELECT q FROM (SELECT y AS q, __colmz_f(r) AS y FROM t) u WHERE q > 0"
    assert push_filters(clash) == clash


def test_real_overflow_is_still_raised_for_an_output_row(cat):
    with pytest.raises(SQLError, match="value out of range: overflow"):
        cat.sql(f"SELECT q, y FROM {SUB} WHERE q >= 2")
    assert rows(cat, f"SELECT q, y FROM {SUB} WHERE q = 2")[0][1] == float(np.float32(1.5)) ** 2


def test_a_filter_on_grouping_columns_moves_below_the_grouping():
    # PostgreSQL pushes it into the grouped subquery as a HAVING, and moves a HAVING without
    # aggregates to the WHERE: the groups it drops are never aggregated
    assert push_filters("SELECT * FROM (SELECT k, __colmz_f(avg(f)) AS a FROM t GROUP BY k) q WHERE k % 3 = 1") == \
        "SELECT * FROM (SELECT k, __colmz_f(avg(f)) AS a FROM t WHERE (k % 3 = 1) GROUP BY k) q WHERE true"
    # an aggregate's column, or a grouping set, keeps it where it is
    for text in ("SELECT * FROM (SELECT k, __colmz_f(avg(f)) AS a FROM t GROUP BY k) q WHERE a % 3 = 1",
                 "SELECT * FROM (SELECT k, __colmz_f(avg(f)) AS a FROM t GROUP BY ROLLUP (k)) q WHERE k % 3 = 1"):
        assert push_filters(text) == text
