"""``NATURAL [INNER|LEFT|RIGHT|FULL] JOIN``, planned as PostgreSQL defines it: ``USING`` the
columns both sides show under one name, in the left side's order -- views equal to the recompute across inserts, deletes, NULL keys and duplicates."""

from __future__ import annotations

import pytest
from test_maintained import TABLES, check_equal, run

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT * FROM t NATURAL JOIN u",
    "SELECT * FROM t NATURAL FULL JOIN u",
    "SELECT k, v, w FROM t NATURAL LEFT JOIN u",
    "SELECT k, u.k AS uk, w FROM t NATURAL RIGHT JOIN u",
    "SELECT * FROM (SELECT k, s AS w FROM t) a NATURAL JOIN u",  # two columns in common
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'x'), (1, 3, 'y'), (NULL, 5, 'x'), (2, NULL, NULL)",
    "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (NULL, 'x'), (3, 'y')",
    "INSERT INTO r VALUES (1, true, 1.5), (NULL, NULL, NULL)",
    "DELETE FROM u WHERE k = 1",
    "INSERT INTO u VALUES (2, NULL), (1, 'y')",
    "DELETE FROM t WHERE k = 1 AND v = 3",
    "DELETE FROM t; DELETE FROM r",
]


def test_natural_joins_equal_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        for i, b in enumerate(BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    for i, b in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, mv.reasons)
    assert list(cats[0].sql("SELECT * FROM v1").column_names) == ["k", "v", "s", "w"]
    check_equal(cats, "creation")
    for text in SCRIPT:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
