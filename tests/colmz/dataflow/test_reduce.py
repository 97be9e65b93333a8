"""``AccumulableReduce`` and ``MinMaxReduce`` against a recompute of SQL's GROUP BY in Python."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import dataflow_model as dm
import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings

import colmz
from colmz.dataflow import (
    AccumulableReduce,
    Avg,
    BoolAnd,
    BoolOr,
    Count,
    Max,
    Min,
    MinMaxReduce,
    StddevPop,
    StddevSamp,
    Sum,
    VarPop,
    VarSamp,
)
from colmz.errors import NegativeMultiplicity

NAN = dm.NAN
S = {"k": pa.string(), "g": pa.float64(), "v": pa.int64(), "f": pa.float64(), "b": pa.bool_()}
POOL = [(k, g, v, f, b) for k, g, v, f, b in zip(
    [None, "a", "a", "", "bb", None, "a", "bb", "", "a", "a"],
    [1.0, float("nan"), -0.0, 0.0, None, 1.0, float("nan"), 2.5, None, -0.0, 1.0],
    [None, -3, 5, 2**40, 7, 5, None, -3, 0, 2**40, 1],
    [1.0, -2.5, None, float("nan"), float("inf"), -float("inf"), 0.5, 1.0, None, -2.5, 4.0],
    [True, False, None, True, True, False, None, True, False, True, None])]
AGGS = {"c": Count(), "cv": Count("v"), "s": Sum("v"), "a": Avg("v"), "sf": Sum("f"), "af": Avg("f"),
        "ba": BoolAnd("b"), "bo": BoolOr("b")}


def _pg_float_sum(vals):
    total = 0.0
    for v, c in vals:
        total += (math.nan if v is NAN else v) * c
    return total


def model_accumulable(held: Counter, group: list[int], global_: bool) -> Counter:
    groups: dict = {}
    for row, c in held.items():
        groups.setdefault(tuple(row[i] for i in group), []).append((row, c))
    if global_ and not groups:
        groups[()] = []
    out: Counter = Counter()
    for key, rows in groups.items():
        vs = [(r[2], c) for r, c in rows if r[2] is not None]
        fs = [(r[3], c) for r, c in rows if r[3] is not None]
        bs = [(r[4], c) for r, c in rows if r[4] is not None]
        n_v, n_f, n_b = sum(c for _, c in vs), sum(c for _, c in fs), sum(c for _, c in bs)
        s = sum(v * c for v, c in vs)
        sf = _pg_float_sum(fs)
        vals = (
            sum(c for _, c in rows),
            n_v,
            s if n_v else None,
            float(Fraction(s, n_v)) if n_v else None,
            sf if n_f else None,
            sf / n_f if n_f else None,
            all(b for b, _ in bs) if n_b else None,
            any(b for b, _ in bs) if n_b else None,
        )
        out[key + tuple(NAN if isinstance(x, float) and math.isnan(x) else x for x in vals)] += 1
    return out


def run(op, steps, model):
    held: Counter = Counter()
    prev: Counter = Counter()
    for t, step in enumerate(steps):
        b = dm.batch(S, [r for r, _ in step], [d for _, d in step], t)
        held.update(dm.counter_of(b))
        held = Counter({k: v for k, v in held.items() if v})
        got = dm.as_delta(op.step(t, b), t)
        now = model(held)
        assert got == dm.diff_of(prev, now), f"step {t}"
        prev = now


@settings(max_examples=us.examples(80))
@given(dm.change_steps(POOL, max_steps=8))
def test_accumulable_by_nullable_keys_matches_the_model(steps):
    run(AccumulableReduce(S, ["k", "g"], AGGS), steps, lambda h: model_accumulable(h, [0, 1], False))


@settings(max_examples=us.examples(60))
@given(dm.change_steps(POOL, max_steps=6))
def test_global_accumulable_matches_the_model_even_when_empty(steps):
    run(AccumulableReduce(S, [], AGGS), steps, lambda h: model_accumulable(h, [], True))


def test_global_aggregate_answers_on_empty_input_and_after_retraction():
    r = AccumulableReduce(S, [], {"c": Count(), "s": Sum("v")})
    assert r.step(0, colmz.Updates.empty(S)).to_pylist() == [(0, None, 0, 1)]
    assert r.step(1, dm.batch(S, [POOL[2]], [1], 1)).to_pylist() == [(0, None, 1, -1), (1, 5, 1, 1)]
    assert r.step(2, dm.batch(S, [POOL[2]], [-1], 2)).to_pylist() == [(0, None, 2, 1), (1, 5, 2, -1)]
    assert len(r.step(3, colmz.Updates.empty(S))) == 0


def test_sums_are_exact_beyond_int64_and_raise_only_at_an_output_outside_it():
    schema = {"k": pa.int64(), "v": pa.int64()}
    r = AccumulableReduce(schema, ["k"], {"s": Sum("v"), "a": Avg("v")})
    big = 2**63 - 1
    r.step(0, colmz.Updates({"k": [1, 1], "v": [big, -1]}, time=[0, 0], diff=[1, 1]))  # sum big - 1
    with pytest.raises(OverflowError, match=r"sum\(v\) of the group"):
        r.step(1, colmz.Updates({"k": [1], "v": [big]}, time=[1], diff=[1]))  # 2 * big - 1
    # The failed step changed nothing; avg of a sum beyond int64 is exact then rounded once.
    a = AccumulableReduce(schema, ["k"], {"a": Avg("v"), "c": Count()})
    a.step(0, colmz.Updates({"k": [1, 1, 1], "v": [big, big, 3]}, time=[0] * 3, diff=[1, 1, 1]))
    out = a.step(1, colmz.Updates({"k": [1], "v": [-5]}, time=[1], diff=[1]))
    assert out.to_pylist() == [(1, float(Fraction(2 * big - 2, 4)), 4, 1, 1),
                               (1, float(Fraction(2 * big + 3, 3)), 3, 1, -1)]
    out = r.step(1, colmz.Updates({"k": [1], "v": [1]}, time=[1], diff=[1]))
    assert out.to_pylist() == [(1, big - 1, float(Fraction(big - 1, 2)), 1, -1),
                               (1, big, float(Fraction(big, 3)), 1, 1)]


def test_float_sum_recovers_after_nan_and_infinities_leave():
    schema = {"k": pa.int64(), "f": pa.float64()}
    r = AccumulableReduce(schema, ["k"], {"s": Sum("f")})
    r.step(0, colmz.Updates({"k": [1, 1, 1], "f": [1.5, float("nan"), float("inf")]}, time=[0] * 3, diff=[1] * 3))
    out = r.step(1, colmz.Updates({"k": [1, 1], "f": [float("nan"), float("inf")]}, time=[1, 1], diff=[-1, -1]))
    assert [row[1] for row in out.to_pylist() if row[3] > 0] == [1.5]


def test_negative_counts_are_refused_and_change_nothing():
    r = AccumulableReduce(S, ["k"], {"c": Count()})
    r.step(0, dm.batch(S, [POOL[1]], [1], 0))
    with pytest.raises(NegativeMultiplicity, match=r"group \('a',\)"):
        r.step(1, dm.batch(S, [POOL[1]], [-2], 1))
    assert r.step(1, dm.batch(S, [POOL[1]], [-1], 1)).to_pylist() == [("a", 1, 1, -1)]


def test_bad_aggregates_are_refused_by_name():
    with pytest.raises(TypeError, match="sum\\(k\\) of a string column"):
        AccumulableReduce(S, [], {"s": Sum("k")})
    with pytest.raises(TypeError, match="boolean column"):
        BoolAnd("v").bind(pa.int64())
    with pytest.raises(ValueError, match="not among"):
        AccumulableReduce(S, ["zz"], {"c": Count()})
    with pytest.raises(ValueError, match="reads column 'zz'"):
        AccumulableReduce(S, [], {"c": Count("zz")})


def test_one_row_change_touches_log_groups_of_100k():
    n = 100_000
    rng = np.random.default_rng(3)
    schema = {"k": pa.int64(), "v": pa.int64()}
    r = AccumulableReduce(schema, ["k"], {"s": Sum("v"), "c": Count()})
    r.step(0, colmz.Updates({"k": rng.integers(0, n // 10, n), "v": rng.integers(0, 100, n)},
                            time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64)))
    for t in range(1, 30):
        r.step(t, colmz.Updates({"k": [t], "v": [1]}, time=[t], diff=[1]))
    st = r.state
    before = st.keys_searched + st.rows_merged + st.rows_inserted + r.rows_touched
    out = r.step(30, colmz.Updates({"k": [5], "v": [2]}, time=[30], diff=[1]))
    assert len(out) == 2
    assert st.keys_searched + st.rows_merged + st.rows_inserted + r.rows_touched - before <= 2 + 2 * st.runs + 64


# ----------------------------------------------------------------------------- min / max


def _pg_key(v):
    return (1, 0.0) if v is NAN else (0, v)


def model_minmax(held: Counter, global_: bool) -> Counter:
    groups: dict = {}
    for row in held:
        groups.setdefault((row[0],), []).append(row)
    if global_:
        groups = {(): [r for rs in groups.values() for r in rs]}
    out: Counter = Counter()
    for key, rows in groups.items():
        vals = []
        for col in (2, 3, 1):
            vs = [r[col] for r in rows if r[col] is not None]
            vals.extend([min(vs, key=_pg_key) if vs else None, max(vs, key=_pg_key) if vs else None])
        out[key + tuple(vals)] += 1
    return out


MINMAX = {"lo_v": Min("v"), "hi_v": Max("v"), "lo_f": Min("f"), "hi_f": Max("f"), "lo_g": Min("g"), "hi_g": Max("g")}


@settings(max_examples=us.examples(80))
@given(dm.change_steps(POOL, max_steps=8))
def test_minmax_matches_the_model(steps):
    run(MinMaxReduce(S, ["k"], MINMAX), steps, lambda h: model_minmax(h, False))


@settings(max_examples=us.examples(40))
@given(dm.change_steps(POOL, max_steps=6))
def test_global_minmax_matches_the_model(steps):
    run(MinMaxReduce(S, [], MINMAX), steps, lambda h: model_minmax(h, True))


def test_minmax_work_is_the_affected_group_not_the_input():
    n = 100_000
    schema = {"k": pa.int64(), "v": pa.int64()}
    r = MinMaxReduce(schema, ["k"], {"lo": Min("v")})
    k = np.arange(n) % 10_000  # 10 rows per group
    r.step(0, colmz.Updates({"k": k, "v": np.arange(n)}, time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64)))
    a = r.arrangement
    before = a.rows_found
    out = r.step(1, colmz.Updates({"k": [7], "v": [7]}, time=[1], diff=[-1]))  # delete the group's minimum
    assert out.to_pylist() == [(7, 7, 1, -1), (7, 10_007, 1, 1)]
    # The group's 10 rows, read once as words before the retraction enters (the rows path
    # read them before and after: 10 + 11)
    assert a.rows_found - before == 10


def test_minmax_refuses_text_and_negative_counts():
    with pytest.raises(TypeError, match="collation"):
        MinMaxReduce(S, [], {"m": Min("k")})
    r = MinMaxReduce(S, ["k"], {"m": Min("v")})
    with pytest.raises(NegativeMultiplicity):
        r.step(0, dm.batch(S, [POOL[1]], [-1], 0))
    assert r.step(0, dm.batch(S, [POOL[1]], [1], 0)).to_pylist() == [("a", -3, 0, 1)]


def test_count_of_a_text_column_counts_its_non_null_values():
    r = AccumulableReduce(S, ["b"], {"n": Count("k"), "c": Count()})
    out = r.step(0, dm.batch(S, POOL[:3], [1, 1, 2], 0))  # k: None, 'a', 'a'
    assert sorted(out.to_pylist(), key=str) == sorted([(True, 0, 1, 0, 1), (False, 1, 1, 0, 1), (None, 2, 2, 0, 1)],
                                                      key=str)


BIG_POOL = [(k, g, v, f, b) for k in (None, "a", "b" * 12) for g in (1.0, float("nan"))
            for v, f, b in ((None, 1.0, True), (3, None, False), (-7, 2.5, None), (2**40, float("inf"), True))]


@settings(max_examples=us.examples(15))
@given(dm.change_steps(BIG_POOL, max_steps=14, max_rows=60))
def test_bulk_changes_match_the_models(steps):
    run(AccumulableReduce(S, ["k", "g"], AGGS), steps, lambda h: model_accumulable(h, [0, 1], False))
    run(MinMaxReduce(S, ["k"], MINMAX), steps, lambda h: model_minmax(h, False))


SPREAD_POOL = [(k, None, v, None, None) for k in (None, "a") for v in (None, -3, 0, 5, 2**40, -(2**40) + 7)]


@settings(max_examples=us.examples(60))
@given(dm.change_steps(SPREAD_POOL, max_steps=8))
def test_variances_match_pythons_statistics(steps):
    import statistics

    aggs = {"vs": VarSamp("v"), "vp": VarPop("v"), "ss": StddevSamp("v"), "sp": StddevPop("v")}
    r = AccumulableReduce(S, ["k"], aggs)
    held: Counter = Counter()
    view: Counter = Counter()
    for t, step in enumerate(steps):
        b = dm.batch(S, [x for x, _ in step], [d for _, d in step], t)
        held.update(dm.counter_of(b))
        held = Counter({k: v for k, v in held.items() if v})
        for row, d in dm.as_delta(r.step(t, b), t).items():
            view[row] += d
        view = Counter({k: v for k, v in view.items() if v})
        groups: dict = {}
        for row, c in held.items():
            groups.setdefault(row[0], []).extend([row[2]] * c)
        assert len(view) == len(groups)
        for (k, *got), c in view.items():
            assert c == 1
            vals = [v for v in groups[k] if v is not None]
            want = [statistics.variance(vals) if len(vals) > 1 else None,
                    statistics.pvariance(vals) if vals else None,
                    statistics.stdev(vals) if len(vals) > 1 else None,
                    statistics.pstdev(vals) if vals else None]
            for g, w in zip(got, want):
                assert (g is None and w is None) or math.isclose(g, w, rel_tol=1e-15, abs_tol=0.0)


def test_variance_of_floats_is_refused():
    with pytest.raises(TypeError, match="integer columns only"):
        AccumulableReduce(S, [], {"v": VarSamp("f")})


def test_a_one_group_change_comes_out_consolidated_without_a_sort():
    # One group changed: its old row out and its new one in, ordered by their encoding (the
    # new row first when it sorts first) and marked consolidated; an output that comes out
    # the same (the row count changed, the sum did not) cancels to nothing.
    r = AccumulableReduce({"k": pa.int64(), "v": pa.int64()}, ["k"], {"s": Sum("v")})
    r.step(1, colmz.Updates({"k": [1], "v": [5]}, time=[1], diff=[1]))
    assert len(r.step(2, colmz.Updates({"k": [1], "v": [0]}, time=[2], diff=[1]))) == 0
    out = r.step(3, colmz.Updates({"k": [1], "v": [-2]}, time=[3], diff=[1]))
    assert out.to_pylist() == [(1, 3, 3, 1), (1, 5, 3, -1)] == colmz.consolidate(out).to_pylist()
    assert out.consolidated_order == "time"
    out = r.step(4, colmz.Updates({"k": [1], "v": [4]}, time=[4], diff=[1]))
    assert out.to_pylist() == [(1, 3, 4, -1), (1, 7, 4, 1)]
