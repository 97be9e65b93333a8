"""Subqueries the planner decorrelates or folds instead of recomputing the view: a scalar
subquery of one aggregate (or arithmetic over aggregates NULL over no rows) correlated by
equalities of columns (a left join with the subquery grouped by its inner keys, ``count``
coalesced to 0), ``SELECT`` without ``FROM``
of scalar subqueries (a constant row crossed with each), ``LATERAL`` subqueries correlated
by equalities (joined on their keys, grouped and top-k'd per key) or without ``FROM`` (a
Map), scalar subqueries inside ``WHERE`` conditions (each a column joined in, by the
shapes above), ``x IN (subquery)`` as a value (PostgreSQL's NULLs), right and full ``JOIN ... USING``
(the merged column a ``COALESCE``), a top-k ordered by columns not in the output -- views
equal to the
recompute
across inserts, deletes, NULL keys on either side and groups retracted to none."""

from __future__ import annotations

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_models import catalogs, check_durable_resume, check_random_scripts, check_script
from test_maintained import TABLES, script

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT k, v, (SELECT count(*) FROM u WHERE u.k = t.k) AS n FROM t",
    "SELECT t.k, (SELECT count(w) FROM u WHERE u.k = t.k AND u.w <> 'y') AS n, s FROM t WHERE t.v > 0",
    "SELECT k, (SELECT max(w) FROM u WHERE t.k = u.k) AS hi, (SELECT min(x) FROM r WHERE r.k = t.k) AS lo FROM t",
    "SELECT k, (SELECT sum(x) FROM r WHERE r.k = t.k AND r.b) AS total FROM t",
    "SELECT u.w, (SELECT bool_or(b) FROM r WHERE r.k = u.k) AS any_b FROM u",
    # arithmetic over aggregates NULL over no rows (a key without inner rows: NULL, as the join gives)
    "SELECT k, (SELECT max(x) + 1 FROM r WHERE r.k = t.k) AS hi1, (SELECT min(x) * 2 - max(x) FROM r "
    "WHERE r.k = t.k AND r.b) AS d FROM t",
    "WITH c AS (SELECT k, x FROM r) SELECT t.k, (SELECT -max(c.x) FROM c WHERE c.k = t.k) AS m FROM t",
    "SELECT k, (SELECT CAST(sum(x) AS BIGINT) % 3 FROM r WHERE r.x > t.v) AS m FROM t",
    "SELECT (SELECT count(*) FROM t) AS n, 'a' AS tag, (SELECT max(x) FROM r) AS hi",
    "SELECT (SELECT min(v) FROM t WHERE v > 0)",
    # LATERAL: correlated by equalities (a join on the keys), or without FROM (a Map)
    "SELECT t.k, x.w FROM t, LATERAL (SELECT w FROM u WHERE u.k = t.k) x",
    "SELECT t.k, t.v, x.n, x.hi FROM t LEFT JOIN LATERAL (SELECT count(*) AS n, max(w) AS hi FROM u "
    "WHERE u.k = t.k) x ON true",
    "SELECT * FROM t, LATERAL (SELECT count(*) FROM u WHERE u.k = t.k AND u.w IS NOT NULL) c",
    "SELECT t.k, y.x FROM t LEFT JOIN LATERAL (SELECT x FROM r WHERE r.k = t.k AND r.b ORDER BY x DESC LIMIT 1) y "
    "ON true",
    "SELECT t.k, g.w, g.n FROM t, LATERAL (SELECT w, count(*) AS n FROM u WHERE t.k = u.k GROUP BY w) g",
    "SELECT t.k, y.s2, y.us FROM t, LATERAL (SELECT t.v * 2 AS s2, upper(t.s) AS us) y WHERE t.k IS NOT NULL",
    "SELECT * FROM t CROSS JOIN LATERAL (SELECT t.k + 1) AS z(k1)",
    # scalar subqueries inside WHERE conditions: a column joined in, read by the condition
    "SELECT k, v FROM t WHERE v > (SELECT min(v) FROM t) + 1",
    "SELECT k, w FROM u WHERE (SELECT count(*) FROM t WHERE t.k = u.k) >= 2",
    "SELECT k, x FROM r WHERE x > (SELECT avg(x) FROM r AS r2 WHERE r2.b = r.b) OR k IS NULL",
    "SELECT s, v FROM t WHERE s LIKE (SELECT 'a%') AND v IN (SELECT k FROM u)",
    # a CTE planned at each of its two references: its subquery joined in each time
    "WITH c AS (SELECT k, w FROM u WHERE (SELECT count(*) FROM t WHERE t.k = u.k) > 0) "
    "SELECT a.k, b.w FROM c AS a JOIN c AS b ON a.k = b.k",
    # x IN (subquery) as a value: true, false or NULL as PostgreSQL answers it
    "SELECT k, v, v IN (SELECT k FROM u) AS inside FROM t",
    "SELECT k, k IN (SELECT k FROM u WHERE w = 'x') AS x_key, s FROM t",
    "SELECT k, k = ANY (SELECT k FROM r WHERE b) AS some_b FROM t",
    # right and full JOIN ... USING: the merged column COALESCE(l.k, r.k)
    "SELECT * FROM t FULL JOIN u USING (k)",
    "SELECT k, t.k AS tk, u.k AS uk, w FROM t RIGHT JOIN u USING (k) WHERE k IS NOT NULL OR w = 'x'",
    "SELECT k, count(*) AS n FROM (SELECT k FROM t) a FULL JOIN (SELECT k FROM r) b USING (k) GROUP BY k",
    # a top-k ordered by columns the select list does not output (hidden, projected away)
    "SELECT k FROM t ORDER BY v DESC NULLS LAST, s, k LIMIT 3",
    "SELECT DISTINCT ON (k) v FROM t ORDER BY k, v DESC, s",
    "SELECT k + 1 AS j, s FROM t WHERE v IS NOT NULL ORDER BY v, s, k LIMIT 2 OFFSET 1",
    # x IN (subquery correlated by equalities): a semijoin on x and the keys
    "SELECT k, v FROM t WHERE v IN (SELECT max(v) FROM t AS t2 WHERE t2.s = t.s)",
    "SELECT k, w FROM u WHERE k IN (SELECT t.v FROM t WHERE t.s = u.w AND t.k IS NOT NULL)",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (1, 3, 'b'), (NULL, 5, 'a'), (2, NULL, NULL), (4, 1, 'c')",
    "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (2, NULL), (NULL, 'x'), (1, 'y')",
    "INSERT INTO r VALUES (1, true, 1.5), (1, false, 2.5), (NULL, true, 7.0), (4, NULL, NULL)",
    "DELETE FROM u WHERE k = 1",  # a key's inner rows retracted to none: count 0, max NULL
    "INSERT INTO u VALUES (4, 'x'), (1, 'y'), (NULL, NULL)",
    "UPDATE r SET b = true WHERE k = 1",
    "DELETE FROM t WHERE k = 4",
    "DELETE FROM u; DELETE FROM r",
    "INSERT INTO t VALUES (NULL, NULL, NULL), (1, 9, 'z')",
]


def test_decorrelated_subqueries_equal_the_recompute():
    check_script(catalogs(BODIES), SCRIPT)


@settings(max_examples=us.examples(12), deadline=None)
@given(st.lists(script(), min_size=1, max_size=6))
def test_decorrelated_subqueries_equal_the_recompute_after_random_scripts(scripts):
    check_random_scripts(catalogs(BODIES), scripts)


def test_a_durable_catalog_resumes_decorrelated_views_without_reading_inputs(tmp_path):
    check_durable_resume(str(tmp_path / "cat"), BODIES, SCRIPT, 4)


def test_a_correlated_value_not_null_over_no_rows_is_recomputed():
    # count(*) + 1 over no rows is 1, coalesce(max(x), 0) is 0: the left join's NULL would
    # differ, so such a subquery is not decorrelated (the view is recomputed, equal all the same)
    for body in ("SELECT k, (SELECT count(*) + 1 FROM u WHERE u.k = t.k) AS n FROM t",
                 "SELECT k, (SELECT coalesce(max(x), 0) FROM r WHERE r.k = t.k) AS m FROM t"):
        cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
        for cat in cats:
            cat.execute("; ".join(TABLES))
            cat.execute(f"CREATE MATERIALIZED VIEW v AS {body}")
        assert cats[0].object("v").maintained.plan.fallbacks(), body
        for text in SCRIPT[:4]:
            for cat in cats:
                cat.execute(text)
            assert sorted(cats[0].sql("SELECT * FROM v").to_pylist(), key=repr) \
                == sorted(cats[1].sql("SELECT * FROM v").to_pylist(), key=repr)
