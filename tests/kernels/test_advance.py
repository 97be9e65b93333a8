"""Since advancement (``colmz.kernels.advance``) against its references.

Covers the three strategies of the correction buffer's since advancement -- no stale time (plain merge),
1..31 stale times (cut into per-time runs, merge) and 32 or more (advance, sort,
consolidate) -- including exactly 31 and exactly 32 distinct stale times, and the c/b/a
example of §2.4.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.advance import (
    MAX_STALE_RUNS,
    advance_runs,
    advance_runs_ref,
    stale_bounds,
    stale_bounds_ref,
    strategy,
)
from colmz.kernels.consolidate import consolidate_ref
from colmz.order import ColumnSpec, decode_columns, encode_columns

MAX = 2**64 - 1


@settings(max_examples=100)
@given(
    st.lists(st.integers(0, 45) | st.sampled_from([MAX - 1, MAX]), max_size=80),
    st.integers(0, 50) | st.sampled_from([MAX - 1, MAX]),
    st.sampled_from([1, 2, 5, 31, 32, 40]),
)
def test_stale_bounds_matches_reference(times, since, cap):
    time = np.array(sorted(times), np.uint64)
    got = stale_bounds(time, np.uint64(since), cap)
    np.testing.assert_array_equal(got, stale_bounds_ref(time, since, cap))
    distinct = len({t for t in times if t < since})
    assert len(got) - 1 == min(distinct, cap)


def run_with_times(times, key_of=lambda i: i % 3):
    """A consolidated run sorted by (time, data) holding one or more updates per time."""
    keys = np.array([[key_of(i)] for i in range(len(times))], np.uint64).reshape(len(times), 1)
    return consolidate_ref(keys, np.array(times, np.uint64), np.ones(len(times), np.int64), "time")


@pytest.mark.parametrize(
    "stale, expected",
    [(0, ("merge", 0)), (1, ("cut", 1)), (31, ("cut", 31)), (32, ("sort", 32)), (33, ("sort", 32))],
)
def test_strategy_switches_at_32_distinct_stale_times(stale, expected):
    since = 100
    times = [t for t in range(stale) for _ in range(2)] + [since, since + 5]
    run = run_with_times(times)
    assert strategy([run], since) == expected
    check_advance([run, run], since)


def test_strategy_counts_each_run_separately():
    # 16 + 16 stale times in two runs: counted as 32 (an upper bound, as upstream), so sort
    a = run_with_times(list(range(16)) + [50])
    b = run_with_times(list(range(16)))
    assert strategy([a, b], 40) == ("sort", 32)
    assert strategy([a], 40) == ("cut", 16)
    assert strategy([a, b], 0) == ("merge", 0)
    check_advance([a, b], 40)


@pytest.mark.parametrize("stale", [31, 32])
def test_exactly_31_and_32_stale_times_give_the_reference_result(stale):
    rng = np.random.default_rng(stale)
    since = 1000
    runs = []
    for r in range(3):
        n = 300
        times = np.sort(rng.integers(0, stale, n))
        times[:stale] = np.arange(stale) if r == 0 else times[:stale]
        times = np.sort(np.concatenate([times, rng.integers(since, since + 10, 50)]))
        keys = rng.integers(0, 20, (len(times), 1)).astype(np.uint64)
        diff = rng.choice([-1, 1], len(times)).astype(np.int64)
        runs.append(consolidate_ref(keys, times.astype(np.uint64), diff, "time"))
    distinct = len({int(t) for t in runs[0][1] if t < since})
    assert distinct == stale
    how, _ = strategy(runs[:1], since)
    assert how == ("cut" if stale == 31 else "sort")
    check_advance(runs, since)
    check_advance(runs[:1], since)


def check_advance(runs, since, order="time"):
    got = advance_runs(runs, since, order)
    expected = advance_runs_ref(runs, since, order)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


@st.composite
def time_runs(draw, order="time"):
    k = draw(st.integers(1, 6))
    span = draw(st.sampled_from([3, 10, 45]))
    runs = []
    for _ in range(k):
        n = draw(st.integers(0, 60))
        keys = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.uint64)
        times = draw(st.lists(st.integers(0, span) | st.just(MAX), min_size=n, max_size=n))
        diff = draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n))
        runs.append(
            consolidate_ref(keys.reshape(n, 1), np.array(times, np.uint64), np.array(diff, np.int64), order)
        )
    return runs


@settings(max_examples=120)
@given(time_runs(), st.none() | st.integers(0, 50) | st.just(MAX))
def test_advance_runs_matches_reference(runs, since):
    check_advance(runs, since)


@settings(max_examples=40)
@given(time_runs(order="data"), st.none() | st.integers(0, 50))
def test_advance_runs_data_order(runs, since):
    check_advance(runs, since, "data")


def test_semantics_2_4_cba_example():
    # since = [2]; chains [(c,1,+1),(b,2,-1),(a,3,-1)] and [(b,1,+1),(a,2,+1),(c,2,-1)]
    def chain(rows):
        keys, layout = encode_columns([pa.array([r[0] for r in rows])])
        return (keys, np.array([r[1] for r in rows], np.uint64), np.array([r[2] for r in rows], np.int64)), layout

    (c1, l1) = chain([("c", 1, 1), ("b", 2, -1), ("a", 3, -1)])
    (c2, l2) = chain([("b", 1, 1), ("a", 2, 1), ("c", 2, -1)])
    assert l1 == l2 == (1, 0)
    assert strategy([c1, c2], 2) == ("cut", 2)
    keys, time, diff = advance_runs([c1, c2], 2)
    data = decode_columns(keys, l1, [ColumnSpec("d", pa.string())])[0].to_pylist()
    assert list(zip(data, time.tolist(), diff.tolist())) == [("a", 2, 1), ("a", 3, -1)]
    check_advance([c1, c2], 2)
    # advancing the times in place would leave the first chain unsorted: (c,2) before (b,2)
    assert np.maximum(c1[1], 2).tolist()[:2] == [2, 2]
    assert tuple(c1[0][0]) > tuple(c1[0][1])


def test_empty_and_edge_cases():
    empty = (np.empty((0, 1), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64))
    assert strategy([empty], 5) == ("merge", 0)
    k, t, d = advance_runs([empty, empty], 5)
    assert k.shape == (0, 1) and len(t) == 0
    run = run_with_times([0, 1, MAX])
    check_advance([run, empty], MAX)
    k, t, d = advance_runs([run], MAX)
    assert set(t.tolist()) == {MAX}
    assert stale_bounds(run[1], np.uint64(0), MAX_STALE_RUNS).tolist() == [0]
