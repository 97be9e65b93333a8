"""Uncorrelated scalar subqueries that are not one row by their shape (no aggregate, or
``GROUP BY``/``LIMIT``), decorrelated as Materialize does: the subquery's rows, or a NULL
while it has none, crossed in -- guarded by a global count whose SQL filter raises
PostgreSQL's "more than one row returned by a subquery used as an expression" when a commit
leaves the subquery with more than one row: that commit fails in both paths and changes
nothing. Views equal to the recompute across inserts, deletes, NULLs and the subquery
emptied."""

from __future__ import annotations

import pytest
from test_maintained import TABLES, check_equal, run

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT t.k, t.v, (SELECT w FROM u WHERE u.k = 1) AS w1 FROM t",
    "SELECT (SELECT w FROM u WHERE k = 2) AS w2, 'tag' AS tag",
    "SELECT k, s FROM t WHERE v > (SELECT k FROM u WHERE w = 'top')",
    "SELECT k, (SELECT k FROM u ORDER BY k DESC NULLS LAST LIMIT 1) AS top FROM t WHERE k IS NOT NULL",
    "SELECT (SELECT count(*) FROM t GROUP BY s HAVING s = 'a') AS na",
]

SCRIPT = [
    ("INSERT INTO t VALUES (1, 2, 'a'), (1, 3, 'b'), (NULL, 5, 'a'), (2, NULL, NULL)", None),
    ("INSERT INTO u VALUES (1, 'x'), (2, NULL), (0, 'top')", None),
    ("INSERT INTO u VALUES (1, 'y')", "SQLError"),  # two rows under k = 1: the commit fails
    ("INSERT INTO u VALUES (3, 'top'); INSERT INTO t VALUES (9, 9, 'z')", "SQLError"),
    ("UPDATE u SET w = 'z' WHERE k = 1", None),
    ("DELETE FROM u WHERE k = 1", None),  # emptied: NULL
    ("INSERT INTO t VALUES (4, 1, 'a')", None),
    ("INSERT INTO u VALUES (1, NULL), (5, 'top'); DELETE FROM u WHERE k = 0", None),
    ("INSERT INTO t VALUES (5, 1, 'a')", None),  # one group s = 'a' however many rows: one row
    ("DELETE FROM t; DELETE FROM u", None),
]


def test_guarded_scalar_subqueries_equal_the_recompute_and_fail_as_it_does():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        for i, b in enumerate(BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    for i, b in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, mv.reasons)
    assert "at most one row, else an error" in str(cats[0].explain("v0"))
    check_equal(cats, "creation")
    for text, error in SCRIPT:
        outcome = run(cats, text)
        assert outcome == [error, error], (text, outcome)
        check_equal(cats, text)
