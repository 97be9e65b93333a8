"""Materialized views holding arrays (``array_agg``), kept by their operators.

An array column is kept by colmz's row encoding as its order bytes (``colmz.order_bytes``),
so a view's state may hold arrays: ``array_agg`` is a basic aggregate recomputed per
affected group (Materialize's plan for non-invertible aggregates), and the arrays it makes
pass through filters, joins (as a key too), ``GROUP BY``, ``DISTINCT``, ``min``/``max`` and
``ORDER BY ... LIMIT`` (those two ordered by DuckDB: PostgreSQL's array order, not the
encoding's); ``ARRAY(subquery)`` is a global basic reduce of the subquery's rows; a slice of
an array column of a CTE, a subquery, a constant relation or a view is a SQL segment's. Checked
after every commit against PostgreSQL 15 (``CI=1``) and against the
recompute path, in memory and durable (reopened from its operator state); work counters
show a one-row change recomputes its group, not the table.
"""

from __future__ import annotations

from collections import Counter

import pytest
import updates_strategies as us
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql_oracle import require
from test_maintained import contents
from test_views_postgres import POOLS, TABLES, check, commit_each, insert, setup_bodies, statement

import colmz

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")

GROUPED = "(SELECT k, array_agg(v ORDER BY v) AS vs FROM t GROUP BY k) q"

#: (name, body) over test_views_postgres's tables t(k, v, s), u(k, w), r(k, b, x).
VIEWS = [
    ("av1", "SELECT k, array_agg(v ORDER BY v) AS vs FROM t GROUP BY k"),
    ("av2", "SELECT k, array_agg(s ORDER BY s) AS ss, count(*) AS n FROM t GROUP BY k"),
    ("av3", f"SELECT q.k, q.vs, u.w FROM {GROUPED} JOIN u ON q.k = u.k WHERE u.w IS NOT NULL"),
    ("av4", f"SELECT vs, count(*) AS n FROM {GROUPED} GROUP BY vs"),
    ("av5", f"SELECT DISTINCT vs FROM {GROUPED}"),
    ("av6", f"SELECT max(vs) AS hi, min(vs) AS lo FROM {GROUPED}"),
    ("av7", f"SELECT k, vs FROM {GROUPED} ORDER BY vs DESC, k LIMIT 2"),
    ("av8", f"SELECT k, vs[1] AS first, cardinality(vs) AS n FROM {GROUPED}"),
    ("av9", "SELECT k, array_agg(x ORDER BY x) AS xs, array_agg(b ORDER BY b) AS bs FROM r GROUP BY k"),
    ("av10", "SELECT a.k, a.vs, b.k AS other FROM av1 a JOIN av1 b ON a.vs = b.vs"),
    ("av11", "SELECT vs, count(*) AS n FROM av1 WHERE k IS NOT NULL GROUP BY vs"),
    # ARRAY(subquery) and EXISTS as values: global reduces crossed with the query's rows
    ("av12", "SELECT k, w, ARRAY(SELECT v FROM t WHERE v > 0 ORDER BY v DESC) AS vs FROM u"),
    ("av13", "SELECT EXISTS (SELECT 1 FROM t WHERE v > 5) AS big, ARRAY(SELECT s FROM t WHERE k > 1 ORDER BY s) AS ss"),
    # slices of a CTE's, a subquery's and a constant relation's array column: the planner's
    # segment is told its input column is an array (colmz.dataflow.sqlmap.array_relations)
    ("av14", "WITH c AS (SELECT k, array_agg(v ORDER BY v) AS a FROM t GROUP BY k) "
             "SELECT k, a[2:] AS rest, a[:1] AS head, a[k:k + 1] AS mid FROM c"),
    ("av15", "SELECT k, w[1:1] AS first, w[2:] AS rest FROM (SELECT k, string_to_array(s, 'a') AS w FROM t) q"),
    ("av16", "SELECT u.k, q.a[2:] AS x, q.a[:u.k] AS y FROM (SELECT ARRAY[1, 2, 3] AS a) q, u WHERE u.k < 3"),
    # ... and of a view's (the catalog tells translate its array columns, for the recompute)
    ("av17", "SELECT k, vs[2:] AS rest, vs[k:k + 1] AS mid FROM av1"),
]
NAMES = [n for n, _ in VIEWS]

SCRIPT = [[insert("t", POOLS["t"][4:]), insert("u", POOLS["u"][5:9])],
          ["DELETE FROM t WHERE k = 1", insert("r", POOLS["r"][4:])],
          ["UPDATE t SET v = v + 1 WHERE k = 2", "UPDATE r SET b = NOT b WHERE k = 1"],
          [insert("t", [(5, 4, "a"), (6, 4, "a"), (5, None, None)])],
          ["DELETE FROM t WHERE k = 99"],
          ["DELETE FROM t WHERE k IS NULL", "DELETE FROM r WHERE k = 3", insert("t", POOLS["t"][:3])],
          ["DELETE FROM t", "DELETE FROM u", "DELETE FROM r"]]


def catalog(cat: colmz.Catalog | None = None) -> colmz.Catalog:
    cat = colmz.Catalog() if cat is None else cat
    for s in [*TABLES, insert("t", POOLS["t"][:4]), insert("u", POOLS["u"][:5]), insert("r", POOLS["r"][:4])]:
        cat.execute(s)
    for n, b in VIEWS:
        cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    return cat


def test_array_views_are_maintained_without_a_fallback():
    cat = catalog()
    for n in NAMES:
        mv = cat.object(n).maintained
        assert mv.incremental and not mv.plan.fallbacks(), (n, cat.explain(n))
    assert "array_agg(v ORDER BY v)] basic (recomputed per affected group in DuckDB)" in str(cat.explain("av1"))


def test_array_views_equal_postgres_after_a_fixed_script(pg):
    counts: Counter = Counter()
    cat = setup_bodies(pg, VIEWS)
    check(pg, cat, NAMES, "creation", counts)
    commit_each(SCRIPT, lambda text: check(pg, cat, NAMES, text, counts), pg, cat)
    assert counts["compared"] == len(NAMES) * (len(SCRIPT) + 1)


@settings(max_examples=us.examples(10), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(statement(), min_size=1, max_size=3), min_size=1, max_size=5))
def test_array_views_equal_postgres_after_random_scripts(pg, script):
    counts: Counter = Counter()
    cat = setup_bodies(pg, VIEWS)
    commit_each(script, lambda text: check(pg, cat, NAMES, text, counts), pg, cat)


def _equal_to_the_recompute(inc: colmz.Catalog, rec: colmz.Catalog, after: str) -> None:
    for n in NAMES:
        assert contents(inc, n) == contents(rec, n), f"view {n} after {after!r}"


@settings(max_examples=us.examples(10), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.lists(statement(), min_size=1, max_size=3), min_size=1, max_size=6))
def test_array_views_equal_the_recompute_after_random_scripts(script):
    inc, rec = catalog(colmz.Catalog(views="incremental")), catalog(colmz.Catalog(views="recompute"))
    _equal_to_the_recompute(inc, rec, "creation")
    commit_each(script, lambda text: _equal_to_the_recompute(inc, rec, text), inc, rec)


def test_durable_array_views_resume_from_their_state(tmp_path):
    rec = catalog(colmz.Catalog(views="recompute"))
    cat = catalog(colmz.Catalog(tmp_path))
    for i, stmts in enumerate(SCRIPT[:-1]):
        text = "; ".join(stmts)
        cat.execute(text)
        rec.execute(text)
        if i % 2:
            cat = colmz.Catalog(tmp_path)  # reopened: the operators' state read back
            assert all(cat.object(n).maintained.incremental for n in NAMES)
        _equal_to_the_recompute(cat, rec, text)


@pytest.mark.parametrize("n", [2_000, 40_000])
def test_a_one_row_change_recomputes_its_group_not_the_table(n):
    import numpy as np
    import pyarrow as pa

    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.append("t", pa.table({"k": np.arange(n) % (n // 10), "v": np.arange(n)}))  # groups of 10
    cat.execute("CREATE MATERIALIZED VIEW a AS SELECT k, array_agg(v ORDER BY v) AS vs FROM t GROUP BY k")
    cat.execute("CREATE MATERIALIZED VIEW j AS SELECT a.k, a.vs, t.v FROM a JOIN t ON a.k = t.k WHERE t.v = 7")
    for i in range(3):
        cat.execute(f"INSERT INTO t VALUES ({i}, -1)")
        work = [w for _, _, w in cat.object("a").maintained.last_work]
        # the group's rows found and recomputed, a few rows merged: bounded whatever n
        assert sum(work) <= 80, (n, work)
        assert sum(w for _, _, w in cat.object("j").maintained.last_work) <= 80
        assert contents(cat, "a")[(i, (-1, *range(i, n, n // 10)))] == 1
    assert contents(cat, "j") == Counter({(7, tuple(range(7, n, n // 10)), 7): 1})
