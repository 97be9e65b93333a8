"""Named windows (``WINDOW w AS (...)``, ``OVER w``): the window functions recomputed per
affected partition in DuckDB with the query's ``WINDOW`` clause (its column references
read from the input), the partition the named spec's ``PARTITION BY`` -- views equal to the
recompute across inserts, deletes, NULLs and partitions retracted to none."""

from __future__ import annotations

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_models import catalogs, check_random_scripts, check_script
from test_maintained import script

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT k, v, sum(v) OVER w AS s, count(*) OVER w AS n FROM t WINDOW w AS (PARTITION BY k)",
    "SELECT k, v, rank() OVER w AS r, max(v) OVER p AS m FROM t WINDOW w AS (ORDER BY v), p AS (PARTITION BY s)",
    "SELECT * FROM (SELECT k, s, lag(v) OVER w AS prev FROM t WINDOW w AS (PARTITION BY k ORDER BY v, s)) x",
    # a window spec naming a window: one partition (coarser than PARTITION BY k: still exact)
    "SELECT k, sum(v) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM t WINDOW w AS (PARTITION BY k "
    "ORDER BY v, s)",
]
PARTITIONS = [["t.k"], [], ["t.k"], []]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (1, 3, 'b'), (NULL, 5, 'a'), (2, NULL, NULL), (4, 1, 'c'), (1, 2, 'a')",
    "DELETE FROM t WHERE k = 4",  # a partition retracted to none
    "INSERT INTO t VALUES (2, 8, 'b'), (NULL, NULL, 'a')",
    "UPDATE t SET v = v + 10 WHERE k = 1",
    "DELETE FROM t",
    "INSERT INTO t VALUES (3, 3, NULL)",
]


def _catalogs():
    cats = catalogs(BODIES)
    for i, b in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        windows = [n for n in _nodes(mv.plan.root) if type(n).__name__ == "Window"]
        assert [list(n.key) for n in windows] == [PARTITIONS[i]], b
    return cats


def _nodes(n):
    yield n
    for c in n.inputs:
        yield from _nodes(c)


def test_named_windows_equal_the_recompute():
    check_script(_catalogs(), SCRIPT)


@settings(max_examples=us.examples(10), deadline=None)
@given(st.lists(script(), min_size=1, max_size=6))
def test_named_windows_equal_the_recompute_after_random_scripts(scripts):
    check_random_scripts(_catalogs(), scripts)
