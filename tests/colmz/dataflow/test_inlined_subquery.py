"""A scalar subquery without ``FROM`` reading the outer query's columns -- ``(SELECT v) > 3``
-- is the outer expression itself (``SubqueryLowering.inlined``): planned as that expression
in the condition or select item where it stands, with no Fallback, its column references
bound in the outer query's ``FROM`` (never to a select item's alias: ``s AS v ... WHERE
(SELECT v)`` reads ``t.v``). Each body equals the recompute path and PostgreSQL 15 after
inserts (NULLs, duplicates), updates onto and off the condition and deletes; a subquery
that is not such an expression keeps its own plan."""

from __future__ import annotations

import pyarrow as pa
import pytest
from reference_models import catalogs, check_script
from sql_oracle import views_equal_postgres

from colmz.dataflow.plan import plan

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

SCHEMAS = {"t": {"k": pa.int64(), "v": pa.int64(), "s": pa.string()}, "u": {"k": pa.int64(), "w": pa.string()},
           "r": {"k": pa.int64(), "b": pa.bool_(), "x": pa.float64()}}

BODIES = [
    "SELECT k, v FROM t WHERE (SELECT v) > 3",
    "SELECT k, s AS v FROM t WHERE (SELECT v) > 3",  # v is t.v, not the item's alias
    "SELECT k, (SELECT v + k) AS w FROM t WHERE (SELECT (SELECT s)) = 'a' OR (SELECT k) IS NULL",
    "SELECT k, x FROM r WHERE (SELECT b)",
    "SELECT k, x FROM r WHERE NOT (SELECT b AND x > 0)",
    "SELECT t.k, u.w FROM t JOIN u ON t.k = u.k WHERE (SELECT u.w) <> (SELECT t.s)",
    "SELECT k, count(*) AS n FROM t WHERE (SELECT v) IS NOT NULL GROUP BY k",
    "SELECT k, (SELECT s) AS s2, (SELECT upper(s)) AS us FROM t",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (2, 5, 'b'), (NULL, 7, 'a'), (3, NULL, NULL), (2, 5, 'b'), (4, 4, 'x')",
    "INSERT INTO u VALUES (1, 'a'), (2, 'c'), (2, 'b'), (NULL, 'a'), (4, NULL)",
    "INSERT INTO r VALUES (1, true, 0.5), (2, false, -1.0), (3, NULL, 2.0), (4, true, -0.25), (1, true, 0.5)",
    "UPDATE t SET v = 9 WHERE k = 1",  # onto the condition
    "UPDATE t SET v = 0, s = 'a' WHERE k = 2",  # off it
    "UPDATE r SET b = NOT b WHERE k IN (1, 2)",
    "DELETE FROM t WHERE s = 'a'; DELETE FROM u WHERE k = 2",
    "DELETE FROM r WHERE x > 0",
    "DELETE FROM t",
]


def test_each_body_plans_without_a_fallback_and_equals_the_recompute():
    cats = catalogs(BODIES)  # each planned without a Fallback
    for i in range(len(BODIES)):
        assert "scalar" not in str(cats[0].explain(f"v{i}")), BODIES[i]  # no join with a one-row relation
    check_script(cats, SCRIPT)


def test_the_subquery_is_the_outer_expression_in_one_sql_segment():
    p = plan(BODIES[1], SCHEMAS)
    text = p.explain()
    assert "Fallback" not in text and "Join" not in text, text
    assert "MapFilter via SQL [(SELECT v) > 3]" in text
    assert p.names == ["k", "v"]


@pytest.mark.parametrize("text", [
    "SELECT k FROM t WHERE (SELECT sum(v)) > 3",  # the outer query's aggregate in PostgreSQL
    "SELECT k FROM t WHERE (SELECT v WHERE v > 1) > 3",  # a WHERE: none or one row
    "SELECT k FROM t WHERE (SELECT v LIMIT 1) > 3",
    "SELECT k FROM t WHERE (SELECT v FROM u) > 3",
    "SELECT k FROM t WHERE (SELECT v UNION SELECT k) > 3",
])
def test_other_subqueries_are_not_inlined(text):
    # none is the outer expression: each keeps the scalar subquery's own plan (here a Fallback)
    assert plan(text, SCHEMAS).fallbacks()


def test_each_body_equals_postgres(pg):
    from test_maintained import TABLES

    for b in BODIES:
        assert not plan(b, SCHEMAS).fallbacks(), b
    assert views_equal_postgres(pg, TABLES, BODIES, SCRIPT) == len(BODIES) * (len(SCRIPT) + 1)
