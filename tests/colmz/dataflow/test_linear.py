"""``MapFilter``, ``Union``, ``Negate``: against Python evaluation with PostgreSQL's semantics."""

from __future__ import annotations

import datetime
import math
from collections import Counter

import dataflow_model as dm
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute in a custom Output
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow import Column, Compare, IsNull, MapFilter, Negate, Output, Predicate, Union

NAN = dm.NAN
S = {"i": pa.int32(), "f": pa.float64(), "s": pa.string(), "b": pa.bool_()}
POOL = [(i, f, s, b) for i, f, s, b in zip(
    [None, -5, 0, 7, 2**31 - 1, 0, -5],
    [float("nan"), -0.0, 0.0, None, -1.5, float("inf"), 2.0],
    ["a", "", None, "ab", "a", "b", "é"],
    [True, False, None, True, False, True, None])]
OPS = ["=", "<>", "!=", "<", "<=", ">", ">="]


def _pg_cmp(a, op, b) -> bool | None:
    if a is None:
        return None
    ka = (1, 0.0) if a is NAN else (0, a)
    kb = (1, 0.0) if (isinstance(b, float) and math.isnan(b)) else (0, b)
    return {"=": ka == kb, "<>": ka != kb, "!=": ka != kb, "<": ka < kb, "<=": ka <= kb, ">": ka > kb,
            ">=": ka >= kb}[op]


predicates = st.one_of(
    st.builds(Compare, st.just("i"), st.sampled_from(OPS), st.sampled_from([-5, 0, 7, 2**31 - 1])),
    st.builds(Compare, st.just("f"), st.sampled_from(OPS), st.sampled_from([0.0, -0.0, float("nan"), 2.0, -1.5])),
    st.builds(Compare, st.just("s"), st.sampled_from(["=", "<>"]), st.sampled_from(["a", "", "é"])),
    st.builds(Compare, st.just("b"), st.sampled_from(["=", "<>"]), st.booleans()),
    st.builds(IsNull, st.sampled_from(list(S)), st.booleans()),
)


def holds(p, row) -> bool:
    v = row[list(S).index(p.column)]
    if isinstance(p, IsNull):
        return (v is not None) if p.negated else (v is None)
    return _pg_cmp(v, p.op, p.value) is True


@settings(max_examples=us.examples(100))
@given(dm.change_steps(POOL, max_steps=4, valid=False), st.lists(predicates, max_size=3),
       st.lists(st.sampled_from(list(S)), min_size=1, max_size=3, unique=True))
def test_mapfilter_matches_python(steps, where, select):
    out_cols = [Column(c, f"o_{c}") for c in select]
    mf = MapFilter(S, where=where, select=out_cols)
    for t, step in enumerate(steps):
        got = dm.as_delta(mf.step(t, dm.batch(S, [r for r, _ in step], [d for _, d in step], t)), t)
        expect: Counter = Counter()
        for row, d in step:
            canon = us.canon_rows(dm.batch(S, [row], [1], 0))[0]
            if all(holds(p, canon) for p in where):
                expect[tuple(canon[list(S).index(c)] for c in select)] += d
        assert got == {k: v for k, v in expect.items() if v}


def test_constants_must_be_of_the_columns_own_type():
    with pytest.raises(TypeError, match="not of its type"):
        MapFilter(S, where=[Compare("f", ">", 1)])
    with pytest.raises(TypeError, match="not of its type"):
        MapFilter(S, where=[Compare("i", "=", True)])
    with pytest.raises(ValueError, match="does not fit"):
        MapFilter(S, where=[Compare("i", "=", 2**40)])
    with pytest.raises(ValueError, match="collation"):
        MapFilter(S, where=[Compare("s", "<", "a")])
    with pytest.raises(ValueError, match="IsNull"):
        MapFilter(S, where=[Compare("i", "=", None)])
    with pytest.raises(ValueError, match="op must be"):
        Compare("i", "~", 1)
    with pytest.raises(TypeError, match="not a Predicate"):
        MapFilter(S, where=["i > 1"])
    with pytest.raises(ValueError, match="one name twice"):
        MapFilter(S, select=["i", Column("f", "i")])


def test_temporal_constants_compare_natively():
    schema = {"d": pa.date32()}
    mf = MapFilter(schema, where=[Compare("d", ">=", datetime.date(2024, 1, 2))])
    u = colmz.Updates({"d": [datetime.date(2024, 1, 1), datetime.date(2024, 1, 3), None]}, time=[0] * 3,
                      diff=[1] * 3)
    assert mf.step(0, u).to_pylist() == [(datetime.date(2024, 1, 3), 0, 1)]


def test_a_custom_predicate_plugs_in_through_the_protocol():
    class Even:
        def check(self, schema):
            assert [c.name for c in schema] == list(S)

        def mask(self, updates):
            col = updates.column("i").fill_null(1).to_numpy(zero_copy_only=False)
            return col % 2 == 0

    class Doubled:
        name = "i2"

        def bind(self, schema):
            return pa.int64()

        def evaluate(self, updates):
            return pa.compute.multiply(updates.column("i").cast(pa.int64()), 2)

    assert isinstance(Even(), Predicate) and isinstance(Doubled(), Output)
    mf = MapFilter(S, where=[Even()], select=["i", Doubled()])
    assert mf.step(0, dm.batch(S, POOL, [1] * len(POOL), 0)).to_pylist() == [(0, 0, 0, 2)]
    with pytest.raises(TypeError, match="neither a column name nor an Output"):
        MapFilter(S, select=[3])


def test_union_and_negate():
    u = Union([{"k": pa.int32()}, {"k": pa.int64()}])
    assert u.schema[0].type == pa.int64()
    out = u.step(1, colmz.Updates({"k": [1]}, time=[1], diff=[1], schema={"k": pa.int32()}),
                 colmz.Updates({"k": [1, 2]}, time=[1, 1], diff=[-1, 3]))
    assert out.to_pylist() == [(2, 1, 3)]
    with pytest.raises(ValueError, match="takes 2 deltas"):
        u.step(2, colmz.Updates({"k": [1]}, time=[2], diff=[1]))
    with pytest.raises(colmz.SchemaError, match="inputs\\[1\\]"):
        Union([{"k": pa.int64()}, {"k": pa.string()}])
    n = Negate({"k": pa.int64()})
    assert n.step(0, colmz.Updates({"k": [1, 1]}, time=[0, 0], diff=[1, 2])).to_pylist() == [(1, 0, -3)]
    with pytest.raises(OverflowError):
        n.step(1, colmz.Updates({"k": [1]}, time=[1], diff=[-(2**63)]))


def test_a_rename_of_a_consolidated_input_passes_it_through():
    # No predicate, every column in order, renamed: the consolidated delta goes out as it is
    # (no rows consolidated); a reorder, a projection or a filter still consolidates.
    s = {"k": pa.int64(), "v": pa.string()}
    delta = colmz.consolidate(colmz.Updates({"k": [2, 1, 1, None], "v": ["a", "b", "b", None]}, time=[3] * 4,
                                            diff=[1, 1, 1, -1]))
    rename = MapFilter(s, select=[Column("k", "key"), Column("v", "val")], consolidated_input=True)
    assert rename.passes_through
    out = rename.step(3, delta)
    assert out.column_names == ["key", "val"] and out.to_pylist() == delta.to_pylist()
    assert rename.rows_consolidated == 0
    others = [MapFilter(s, select=["v", "k"], consolidated_input=True),
              MapFilter(s, select=["k"], consolidated_input=True),
              MapFilter(s, where=[IsNull("k", negated=True)], consolidated_input=True)]
    for mf in others:
        assert not mf.passes_through
        got = mf.step(3, delta)
        assert got.to_pylist() == colmz.consolidate(got).to_pylist()
        assert mf.rows_consolidated >= len(got) > 0
    # A rename not told its input is consolidated: a batch known consolidated (consolidate's
    # output, Updates.consolidated_order) is renamed and not sorted again; one not known to be
    # is consolidated.
    mf = MapFilter(s, select=[Column("k", "key"), Column("v", "val")])
    assert not mf.passes_through and mf.renames
    got = mf.step(3, delta)
    assert got.to_pylist() == delta.to_pylist() and got.consolidated_order == "time"
    assert mf.rows_consolidated == 0
    raw = colmz.Updates({"k": [2, 1, 1], "v": ["a", "b", "b"]}, time=[4] * 3, diff=[1, 1, 1])
    got = mf.step(4, raw)
    assert got.to_pylist() == [(1, "b", 4, 2), (2, "a", 4, 1)] and mf.rows_consolidated == 3
    with pytest.raises(TypeError, match="consolidated_input must be a bool"):
        MapFilter(s, consolidated_input=1)


def test_the_window_views_rename_passes_through():
    # The plan of a window view renames the window's columns on top: that MapFilter passes the
    # consolidated change of the window through (its work counter stays 0).
    from colmz.dataflow.plan import plan
    from colmz.dataflow.render import render

    t = {"k": pa.int64(), "v": pa.int64()}
    pipe = render(plan("SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t", {"t": t}))
    top = pipe.operators[0]
    assert isinstance(top, MapFilter) and top.passes_through
    out = pipe.step(1, {"t": colmz.Updates({"k": [1, 1, 2, None], "v": [5, 4, 1, 1]}, time=[1] * 4, diff=[1] * 4)})
    assert sorted(out.to_pylist(), key=repr) == sorted(
        [(1, 4, 1, 1, 1), (1, 5, 2, 1, 1), (2, 1, 1, 1, 1), (None, 1, 1, 1, 1)], key=repr)
    out = pipe.step(2, {"t": colmz.Updates({"k": [1], "v": [3]}, time=[2], diff=[1])})
    assert out.to_pylist() == colmz.consolidate(out).to_pylist()
    assert sorted(out.to_pylist(), key=repr) == sorted(
        [(1, 3, 1, 2, 1), (1, 4, 1, 2, -1), (1, 4, 2, 2, 1), (1, 5, 2, 2, -1), (1, 5, 3, 2, 1)], key=repr)
    assert top.rows_consolidated == 0
