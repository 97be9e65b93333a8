"""A correlated ``EXISTS (subquery)`` as a select item's value, planned as a left join with
the subquery's distinct correlation keys (``colmz.dataflow.plan``'s ``exists_value``):
views equal to the recompute across inserts, deletes, NULL keys on either side and the
subquery's matches retracted to none."""

from __future__ import annotations

import pytest
from test_maintained import TABLES, check_equal, run

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT k, v, EXISTS (SELECT 1 FROM u WHERE u.k = t.k) AS has FROM t",
    "SELECT t.k, EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w = 'x') AS x FROM t WHERE t.v > 0",
    "SELECT k, EXISTS (SELECT * FROM u WHERE t.k = u.k AND u.w IS NULL) AS nul, s FROM t",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (1, 3, 'b'), (NULL, 5, 'a'), (2, NULL, NULL), (4, 1, 'c')",
    "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (2, NULL), (NULL, 'x')",
    "DELETE FROM u WHERE k = 1",  # the match retracted: the value flips to false
    "INSERT INTO u VALUES (4, 'x'), (1, 'y')",
    "DELETE FROM t WHERE k = 4",
    "DELETE FROM u",
    "INSERT INTO t VALUES (NULL, NULL, NULL)",
]


def test_exists_as_a_value_equals_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0] + "; " + TABLES[1])
        for i, b in enumerate(BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    for i, b in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, mv.reasons)
    check_equal(cats, "creation")
    for text in SCRIPT:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
