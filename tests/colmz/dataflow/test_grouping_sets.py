"""GROUPING SETS / ROLLUP / CUBE and GROUPING() planned as a Union of one native reduce per
grouping set (``colmz.dataflow.plan``): views equal to the recompute across inserts,
deletes, NULL keys and retraction to zero rows."""

from __future__ import annotations

import pyarrow as pa
import pytest
from test_maintained import TABLES, check_equal, run

import colmz
from colmz.dataflow.plan import Fallback, Reduce, Union, plan

SCHEMAS = {"t": {"k": pa.int64(), "v": pa.int64(), "s": pa.string()}}


def nodes(n):
    yield n
    for c in n.inputs:
        yield from nodes(c)

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY ROLLUP (k)",
    "SELECT k, s, grouping(k, s) AS g, count(*) AS n, min(v) AS lo FROM t GROUP BY CUBE (k, s)",
    "SELECT k, s, count(v) AS n FROM t GROUP BY GROUPING SETS ((k), (s), (), (k))",
    "SELECT grouping(k) AS g FROM t GROUP BY ROLLUP (k)",
    "SELECT k, count(*) AS n FROM t GROUP BY ROLLUP (k) HAVING count(*) > 1 ORDER BY k NULLS FIRST LIMIT 2",
    "SELECT v > 2 AS big, count(*) AS n FROM t GROUP BY GROUPING SETS ((v > 2), ())",
    "SELECT k, grouping(k) AS g, max(v) - min(v) AS r FROM t GROUP BY k",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (1, 3, 'b'), (NULL, 5, 'a'), (2, NULL, NULL)",
    "INSERT INTO t VALUES (1, 2, 'a'), (3, 1, 'c')",
    "DELETE FROM t WHERE k = 1",
    "INSERT INTO t VALUES (NULL, NULL, NULL)",
    "DELETE FROM t WHERE k IS NULL",
    "DELETE FROM t",  # retraction to zero: the empty set's row stays (count 0, NULL sums)
    "INSERT INTO t VALUES (4, 4, 'd')",
]


def test_grouping_sets_plan_as_a_union_of_reduces():
    p = plan(BODIES[0], SCHEMAS)
    assert not p.fallbacks() and isinstance(p.root, Union)
    groups = sorted(n.group_by for n in nodes(p.root) if isinstance(n, Reduce))
    assert groups == [(), ("t.k",)]
    # GROUPING() inside an expression is not planned: a Fallback naming it
    f = plan("SELECT k, grouping(k) + 1 AS g FROM t GROUP BY ROLLUP (k)", SCHEMAS).root
    assert isinstance(f, Fallback) and "GROUPING() inside an expression" in f.reason


def test_grouping_sets_views_equal_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0])
        for i, b in enumerate(BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    inc = cats[0]
    for i, b in enumerate(BODIES):
        mv = inc.object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), b
    check_equal(cats, "creation")
    for text in SCRIPT:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
