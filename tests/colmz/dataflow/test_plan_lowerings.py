"""Constructs the planner lowers without a Fallback that it once refused (the corpus's
remaining Fallback bodies): ``WITH c(x, y)`` (a CTE's column names), ``ORDER
BY`` a subquery without ``LIMIT`` (dropped, its tables still the view's inputs), window
functions over a ``GROUP BY`` (a Window over the reduce), a scalar subquery in ``HAVING`` (a
``WHERE`` over the grouped rows), grouping sets with a basic aggregate (``FILTER``,
``DISTINCT``),
each view equal to the recompute after a fixed and random change scripts and after a
durable catalog's reopen."""

from __future__ import annotations

import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_models import catalogs, check_durable_resume, check_random_scripts, check_script
from test_maintained import script

import colmz
from colmz.dataflow.plan import PlanError, plan

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

SCHEMAS = {"t": {"k": pa.int64(), "v": pa.int64(), "s": pa.string()}, "u": {"k": pa.int64(), "w": pa.string()}}

#: WITH c(x, y): the CTE's column names rename its output columns, in order.
CTE_COLUMNS = [
    "WITH c(x, y) AS (SELECT k, k FROM t) SELECT x, y FROM c",
    "WITH c(v, k) AS (SELECT k, v FROM t) SELECT k, v FROM c WHERE k > 0",  # names swapped
    "WITH c(a) AS (SELECT k, s FROM t), d AS (SELECT a, count(*) AS n FROM c GROUP BY a) "
    "SELECT d.a, d.n, q.z FROM d JOIN c AS q(z) ON d.a = q.z",
    'WITH "C d"("X y") AS (SELECT k FROM u) SELECT "X y" FROM "C d"',
]

#: ORDER BY without LIMIT is dropped; a subquery in it still names an input of the view.
ORDER_BY = [
    "SELECT k, v FROM t ORDER BY (SELECT count(*) FROM u WHERE u.k = t.k) DESC, k",
    "SELECT k, w FROM u ORDER BY (SELECT max(v) FROM t WHERE t.k = u.k AND t.v > 0) NULLS FIRST",
]

#: Window functions over a GROUP BY: a Window over the reduce's groups.
WINDOW_OVER_GROUPS = [
    "SELECT k, rank() OVER (ORDER BY sum(v) DESC) AS r FROM t GROUP BY k",
    "SELECT s, count(*) AS n, lag(min(v)) OVER (ORDER BY s) AS p FROM t WHERE k IS NOT NULL GROUP BY s "
    "HAVING count(*) > 0",
    "SELECT t.k, sum(v) AS sv, dense_rank() OVER (PARTITION BY count(u.w) ORDER BY sum(v) DESC NULLS LAST, t.k) "
    "AS d FROM t JOIN u ON t.k = u.k GROUP BY t.k ORDER BY 1",
    "SELECT s, string_agg(u.w, ',' ORDER BY u.w) AS a, row_number() OVER (ORDER BY count(*), s) AS n "
    "FROM t LEFT JOIN u ON t.k = u.k GROUP BY s",
    "SELECT k, sum(v) * 2 AS twice, rank() OVER (ORDER BY count(*) DESC, k) AS r FROM t GROUP BY k",
]

#: A subquery in HAVING: a WHERE over the grouped rows, the scalar subquery crossed in.
HAVING_SUBQUERY = [
    "SELECT k FROM t GROUP BY k HAVING sum(v) > (SELECT avg(v) FROM t)",
    "SELECT s, count(*) AS n FROM t GROUP BY s HAVING count(*) >= (SELECT count(*) FROM u) AND s IS NOT NULL",
    "SELECT t.k, max(v) AS m FROM t JOIN u ON t.k = u.k GROUP BY t.k HAVING max(v) > (SELECT min(v) FROM t) "
    "ORDER BY 1",
]

#: A window over the groups, and a HAVING subquery with it, and a correlated scalar
#: subquery in WHERE (of integers: numeric in PostgreSQL, avg re-planned as DuckDB's).
MIXED = [
    "SELECT k, rank() OVER (ORDER BY avg(v)) AS r FROM t GROUP BY k HAVING count(*) > (SELECT count(*) FROM u) - 3",
    "SELECT k, v FROM t WHERE v > (SELECT avg(v) FROM t)",
    "SELECT k, v FROM t WHERE v > (SELECT avg(v) FROM t t2 WHERE t2.s = t.s)",
]

#: Grouping sets with a basic aggregate: one per-group recompute per set, in a Union.
GROUPING_SETS_BASIC = [
    "SELECT k, count(*) FILTER (WHERE v > 0) AS n FROM t GROUP BY CUBE (k)",
    "SELECT k, s, count(DISTINCT v) AS d, sum(v) AS sv FROM t GROUP BY ROLLUP (k, s)",
    "SELECT s, string_agg(w, ',' ORDER BY w) AS ws, grouping(s) AS g FROM t JOIN u ON t.k = u.k "
    "GROUP BY GROUPING SETS ((s), ())",
]

BODIES = CTE_COLUMNS + ORDER_BY + WINDOW_OVER_GROUPS + HAVING_SUBQUERY + MIXED + GROUPING_SETS_BASIC

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'x'), (1, 3, 'y'), (NULL, 5, 'x'), (2, NULL, NULL), (4, -1, 'c'), (1, 2, 'x')",
    "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (2, NULL), (NULL, 'x'), (1, 'y')",
    "DELETE FROM u WHERE k = 1",
    "UPDATE t SET v = 7 WHERE k = 1 AND v = 2",
    "INSERT INTO t VALUES (2, 9, 'z'), (NULL, NULL, NULL); INSERT INTO u VALUES (4, 'c')",
    "DELETE FROM t WHERE k = 4",
    "DELETE FROM t; DELETE FROM u",
]


def test_lowered_bodies_equal_the_recompute():
    check_script(catalogs(BODIES), SCRIPT)


@settings(max_examples=us.examples(10), deadline=None)
@given(st.lists(script(), min_size=1, max_size=5))
def test_lowered_bodies_equal_the_recompute_after_random_scripts(scripts):
    check_random_scripts(catalogs(BODIES), scripts)


def test_a_durable_catalog_resumes_them_without_reading_inputs(tmp_path):
    check_durable_resume(str(tmp_path / "cat"), BODIES, SCRIPT, 3)


def test_cte_column_names_rename_in_order():
    # the tree keeps no CTE column names: once, x and y bound to the query's own columns
    p = plan("WITH c(v, k) AS (SELECT k, v FROM t) SELECT k FROM c", SCHEMAS)
    assert p.explain().splitlines()[0] == "MapFilter select=[t.v AS k]  -- incremental O(delta)"
    # the reference's own column names rename first, the CTE's the rest
    p = plan("WITH c(x, y) AS (SELECT k, v FROM t) SELECT * FROM c AS q(a)", SCHEMAS)
    assert p.names == ["a", "y"]
    with pytest.raises(PlanError, match="2 columns available but 3 columns specified"):
        plan("WITH c(a, b, z) AS (SELECT k, v FROM t) SELECT * FROM c", SCHEMAS)
    with pytest.raises(PlanError, match="column 'k' does not exist"):
        plan("WITH c(v) AS (SELECT k, v FROM t) SELECT c.k FROM c", SCHEMAS)


def test_cte_names_the_text_does_not_give_fall_back():
    # two definitions of one name with different column names: not guessed
    p = plan("WITH c(x) AS (SELECT k FROM t) SELECT x FROM c "
             "WHERE x IN (WITH c(y) AS (SELECT k FROM u) SELECT y FROM c)", SCHEMAS)
    assert any("column names are not read" in f.reason for f in p.fallbacks())


def test_a_dropped_order_by_subquery_is_an_input_or_falls_back():
    p = plan("SELECT k, v FROM t ORDER BY (SELECT count(*) FROM u WHERE u.k = t.k) DESC, k", SCHEMAS)
    assert p.incremental and sorted(p.tables) == ["t", "u"]  # the catalog resolves both
    # PostgreSQL evaluates it per row: one that may raise (more than one row, a function's
    # error) is not dropped silently
    for q in ["SELECT k FROM t ORDER BY (SELECT w FROM u WHERE u.k = t.k)",
              "SELECT k FROM t ORDER BY (SELECT max(length(w)) FROM u)",
              "SELECT k FROM t ORDER BY (SELECT count(*) FROM u WHERE 1 / u.k > 0)"]:
        assert any("it may raise" in f.reason for f in plan(q, SCHEMAS).fallbacks()), q


def test_a_window_over_groups_is_a_window_over_the_reduce():
    p = plan("SELECT k, rank() OVER (ORDER BY sum(v) DESC) AS r FROM t GROUP BY k", SCHEMAS)
    lines = p.explain().splitlines()
    assert p.names == ["k", "r"]
    assert lines[1].lstrip().startswith("Window partition_by=[]") and "Reduce group_by=[t.k]" in lines[3]
    # an integer sum (numeric in PostgreSQL) sorts as the numeric does: native; read by an
    # expression it would not compute as numeric does, nor would avg (float64 here) sort:
    # the reduce is DuckDB's then (basic)
    for q, how in [("SELECT k, rank() OVER (ORDER BY sum(v)) FROM t GROUP BY k", "sum(t.v) accumulable"),
                   ("SELECT k, sum(sum(v)) OVER () AS r FROM t GROUP BY k", "sum(v)] basic"),
                   ("SELECT k, rank() OVER (ORDER BY avg(v)) FROM t GROUP BY k", "avg(v)] basic")]:
        assert how in plan(q, SCHEMAS).explain(), q
    for q, word in [("SELECT k, rank() OVER w FROM t GROUP BY k WINDOW w AS (ORDER BY k)", "a named window"),
                    ("SELECT k % 2, rank() OVER (ORDER BY count(*)) FROM t GROUP BY k % 2", "not a column"),
                    ("SELECT k, rank() OVER (ORDER BY count(*)) FROM t GROUP BY k LIMIT 2", "LIMIT")]:
        falls = plan(q, SCHEMAS).fallbacks()
        assert falls and any(word in f.reason for f in falls), (q, [f.reason for f in falls])


def test_a_having_subquery_is_a_condition_over_the_groups():
    p = plan("SELECT s, count(*) AS n FROM t GROUP BY s HAVING count(*) >= (SELECT count(*) FROM u)", SCHEMAS)
    text = p.explain()
    assert p.incremental and p.names == ["s", "n"] and sorted(p.tables) == ["t", "u"]
    assert "MapFilter via SQL" in text and "Reduce group_by=[]" in text
    # avg of integers is numeric in PostgreSQL: the reduces re-planned as DuckDB's (basic)
    text = plan("SELECT k FROM t GROUP BY k HAVING sum(v) > (SELECT avg(v) FROM t)", SCHEMAS).explain()
    assert "aggregates=[agg" in text and "avg(v)] basic" in text and "accumulable" not in text
    # correlated with the grouped query: not rewritten
    falls = plan("SELECT s FROM t o GROUP BY s HAVING count(*) > (SELECT count(*) FROM u WHERE u.w = o.s)",
                 SCHEMAS).fallbacks()
    assert falls and "a subquery in HAVING" in falls[0].reason


def test_an_outer_filter_on_a_subquerys_passed_column_runs_before_its_sql_items():
    # PostgreSQL pulls the subquery up: r * r is never computed for the row k <> 4 drops, so
    # it raises no overflow; the maintained view must answer as the recompute does
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE reals (k BIGINT, r DOUBLE PRECISION)")
    cat.execute("INSERT INTO reals VALUES (1, 2.0), (4, 1e200)")
    body = "SELECT k, y FROM (SELECT k, r * r AS y FROM reals) u WHERE k <> 4"
    cat.execute(f"CREATE MATERIALIZED VIEW mv WITH (INCREMENTAL = 'require') AS {body}")
    text = str(cat.explain("mv"))
    assert text.index("MapFilter via SQL") < text.index("where=[reals.k <> 4]")  # the filter below
    cat.execute("INSERT INTO reals VALUES (4, 1e300), (2, 3.0); DELETE FROM reals WHERE k = 1")
    assert cat.sql("SELECT * FROM mv ORDER BY k").to_pylist() == cat.sql(f"{body} ORDER BY k").to_pylist() \
        == [{"k": 2, "y": 9.0}]
