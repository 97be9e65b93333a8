"""Outer joins whose ``ON`` holds conditions other than equalities of a left and a right
column (a cross-side residual, a condition on the preserved side, ``ON false``, no equality
at all), lowered as Materialize lowers them: the pairs (the inner join filtered by the
residual) plus each preserved side's rows matching no pair, padded with NULLs -- those rows
found by a semijoin on whole rows with NULLs equal -- and ``[NOT] EXISTS`` correlated by
equalities plus such conditions, the same pairs and semijoin. Views equal to the recompute across
inserts, deletes, duplicate rows, NULLs in keys and residual columns (NaN and -0.0 among the
floats) and matches retracted to none."""

from __future__ import annotations

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_models import catalogs, check_durable_resume, check_random_scripts, check_script
from test_maintained import TABLES, check_equal, script

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k AND u.w <> t.s",
    "SELECT t.*, r.k AS rk, r.b, r.x FROM t FULL JOIN r ON t.k = r.k AND t.v > r.x",
    "SELECT t.k, t.s, u.k AS uk, u.w FROM t RIGHT JOIN u ON t.k = u.k AND (t.s = u.w OR u.w IS NULL)",
    "SELECT t.k, t.v, r.x FROM t LEFT JOIN r ON t.v < r.x",  # no equality: a cross join filtered
    "SELECT t.k, u.w FROM t LEFT JOIN u ON false",
    "SELECT a.k, a.v, b.v AS bv FROM t a LEFT JOIN t b ON a.k = b.k AND a.v <> b.v",  # a self-join
    "SELECT t.k, count(u.w) AS n FROM t LEFT JOIN u ON t.k = u.k AND t.s = u.w GROUP BY t.k",
    "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k AND t.v > 2",  # on the preserved side
    "SELECT r.k, r.x, r.b, t.v FROM r FULL JOIN t ON r.k = t.k AND r.b",
    "SELECT u.k, u.w, r.x FROM u LEFT JOIN r ON u.k = r.k AND upper(u.w) = 'X' WHERE u.k IS NOT NULL",
    "SELECT k, v FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w <> t.s)",
    "SELECT k, v, s FROM t WHERE EXISTS (SELECT 1 FROM r WHERE r.k = t.k AND r.x > t.v AND r.b)",
    "SELECT a.k, a.v FROM t a WHERE NOT EXISTS (SELECT 1 FROM t b WHERE b.k = a.k AND b.v > a.v)",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'x'), (1, 3, 'y'), (NULL, 5, 'x'), (2, NULL, NULL), (4, 1, 'c'), (1, 2, 'x')",
    "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (2, NULL), (NULL, 'x'), (1, 'y')",
    "INSERT INTO r VALUES (1, true, 1.5), (1, false, 'NaN'), (NULL, true, 7.0), (4, NULL, NULL), (2, true, -0.0)",
    "DELETE FROM u WHERE k = 1",  # a key's matches retracted to none: its rows padded again
    "INSERT INTO u VALUES (4, 'c'), (1, 'y'), (NULL, NULL)",
    "UPDATE r SET b = true WHERE k = 1",
    "DELETE FROM t WHERE k = 4",
    "INSERT INTO t VALUES (NULL, NULL, NULL), (NULL, NULL, NULL), (1, 9, 'y')",
    "UPDATE t SET v = 0 WHERE k = 1 AND v = 2",
    "DELETE FROM u; DELETE FROM r",
    "DELETE FROM t",
]


def test_outer_joins_with_a_residual_equal_the_recompute():
    check_script(catalogs(BODIES), SCRIPT)


@settings(max_examples=us.examples(12), deadline=None)
@given(st.lists(script(), min_size=1, max_size=6))
def test_outer_joins_with_a_residual_equal_the_recompute_after_random_scripts(scripts):
    check_random_scripts(catalogs(BODIES), scripts)


def test_explain_names_the_pairs_the_semijoin_and_the_padding():
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    cat.execute(f"CREATE MATERIALIZED VIEW j AS {BODIES[1]}")
    text = str(cat.explain("j"))
    assert "MapFilter via SQL [t.v > r.x]" in text  # the residual on the inner join's pairs
    # each preserved side's unmatched rows: a semijoin on whole rows, NULLs equal, padded
    assert text.count("NULLs equal (semijoin on whole rows") == 2
    assert "FULL JOIN's unmatched rows padded with NULLs" in text
    assert "recompute" not in text


def test_a_row_holding_nulls_is_matched_by_itself():
    # the semijoin on whole rows matches a NULL with a NULL: a left row with a NULL column
    # that has a pair is not also emitted padded
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        cat.execute("CREATE MATERIALIZED VIEW j AS SELECT t.k, t.s, u.w FROM t LEFT JOIN u ON t.k = u.k AND u.w <> 'z'")
        cat.execute("INSERT INTO t VALUES (1, NULL, NULL), (1, NULL, NULL); INSERT INTO u VALUES (1, 'x')")
    check_equal(cats, "pairs")
    assert sorted(cats[0].sql("SELECT * FROM j").to_pylist(), key=str) == [{"k": 1, "s": None, "w": "x"}] * 2
    for cat in cats:
        cat.execute("UPDATE u SET w = 'z'")
    check_equal(cats, "unmatched")
    assert cats[0].sql("SELECT * FROM j").to_pylist() == [{"k": 1, "s": None, "w": None}] * 2


def test_a_join_with_nulls_equal_matches_a_null_key_with_a_null_key():
    import pyarrow as pa

    from colmz.dataflow import DeltaJoin

    schemas = [{"a": pa.int64(), "s": pa.string()}, {"b": pa.int64(), "z": pa.string()}]
    left = colmz.Updates({"a": [1, None, None], "s": ["p", None, "q"]}, time=[1] * 3, diff=[1, 1, 2])
    right = colmz.Updates({"b": [None, 1], "z": [None, "r"]}, time=[1, 1], diff=[1, 1])
    nulls_equal = DeltaJoin(schemas, on=[("a", "b"), ("s", "z")], nulls_equal=True)
    assert sorted(nulls_equal.step(1, left, right).to_pylist(), key=str) == [(None, None, None, None, 1, 1)]
    sql_equal = DeltaJoin(schemas, on=[("a", "b"), ("s", "z")])
    assert sql_equal.step(1, left, right).to_pylist() == []
    # retracting the left NULL row takes its match back
    gone = colmz.Updates({"a": [None], "s": [None]}, time=[2], diff=[-1])
    empty = colmz.Updates.empty(schemas[1])
    assert nulls_equal.step(2, gone, empty).to_pylist() == [(None, None, None, None, 2, -1)]


def test_explain_names_the_exists_residual():
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    cat.execute(f"CREATE MATERIALIZED VIEW e AS {BODIES[-3]}")
    text = str(cat.explain("e"))
    assert "MapFilter via SQL [u.w <> t.s]" in text
    assert "NULLs equal (semijoin on whole rows" in text


def test_a_durable_catalog_resumes_these_views_without_reading_inputs(tmp_path):
    check_durable_resume(str(tmp_path / "cat"), BODIES, SCRIPT, 5)


def _join_work(pipe) -> tuple[int, int, int]:
    """(pair joins, rows inserted into their arrangements, keys they searched): the inner
    joins on the ``ON`` equalities (not the semijoins on whole rows)."""
    from colmz.dataflow import DeltaJoin
    from colmz.dataflow.plan import Join

    joins = {id(op): op for _, node, op, _, _ in pipe.steps()
             if isinstance(op, DeltaJoin) and isinstance(node, Join) and not node.nulls_equal}.values()
    arrs = [a for j in joins for a in j.arrangements.values()]
    return len(joins), sum(a.rows_inserted for a in arrs), sum(a.keys_searched for a in arrs)


@pytest.mark.parametrize("kind", ["LEFT", "FULL"])
def test_the_pairs_and_the_preserved_side_are_rendered_once(kind):
    # The pairs are both output and the source of each preserved side's matched rows, and
    # the preserved side is both the pairs' input and the semijoin's: each is one operator
    # (Materialize's Let/Get), so each input row is arranged once per commit, not twice.
    import pyarrow as pa

    from colmz.dataflow.plan import plan, render

    schemas = {"t": {"k": pa.int64(), "v": pa.int64()}, "u": {"k": pa.int64(), "w": pa.int64()}}
    p = plan(f"SELECT t.k, t.v, u.w FROM t {kind} JOIN u ON t.k = u.k AND t.v < u.w", schemas)
    pipe = render(p)
    t = colmz.Updates({"k": [1, 1, 2, 3], "v": [1, 5, 2, None]}, time=[1] * 4, diff=[1] * 4)
    u = colmz.Updates({"k": [1, 2, 2], "w": [3, 1, 9]}, time=[1] * 3, diff=[1] * 3)
    out = pipe.step(1, {"t": t, "u": u})
    assert sorted(out.to_pylist(), key=str) == sorted(
        [(1, 1, 3, 1, 1), (1, 5, None, 1, 1), (2, 2, 9, 1, 1), (3, None, None, 1, 1)]
        + ([(None, None, 1, 1, 1)] if kind == "FULL" else []), key=str)
    joins, inserted, searched = _join_work(pipe)
    assert joins == 1  # the pairs' join, once
    assert inserted == len(t) + len(u)  # each input row arranged once (twice when rendered twice)
    assert searched > 0
    ops = pipe.operators
    assert len({id(op) for op in ops}) == len(ops)
    # a second commit: one row each side, each arranged once more
    pipe.step(2, {"t": colmz.Updates({"k": [2], "v": [0]}, time=[2], diff=[1]),
                  "u": colmz.Updates({"k": [3], "w": [4]}, time=[2], diff=[1])})
    assert _join_work(pipe)[1] == len(t) + len(u) + 2


def test_identical_subplans_are_rendered_once():
    # two branches of a UNION ALL reading the same filtered table: one MapFilter, its delta
    # handed to the union twice
    import pyarrow as pa

    from colmz.dataflow.linear import Union as UnionOp
    from colmz.dataflow.mapfilter import MapFilter as MapFilterOp
    from colmz.dataflow.plan import plan, render

    p = plan("SELECT k FROM t WHERE k > 1 UNION ALL SELECT k FROM t WHERE k > 1", {"t": {"k": pa.int64()}})
    pipe = render(p)
    # the union, the filter, the table's read (a renaming MapFilter): each once, not twice
    assert [type(op) for op in pipe.operators] == [UnionOp, MapFilterOp, MapFilterOp]
    out = pipe.step(1, {"t": colmz.Updates({"k": [1, 2, 3]}, time=[1] * 3, diff=[1] * 3)})
    assert sorted(out.to_pylist()) == [(2, 1, 2), (3, 1, 2)]
