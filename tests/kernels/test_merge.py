"""k-way merge (``colmz.kernels.merge``) against its references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.consolidate import consolidate_ref
from colmz.kernels.merge import (
    merge_runs,
    merge_runs_ref,
    merge_sorted_words,
    merge_sorted_words_ref,
)

MAX = 2**64 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@settings(max_examples=100)
@given(st.lists(st.lists(st.integers(0, 20) | st.sampled_from([0, MAX, 2**63]), max_size=30), max_size=9))
def test_merge_sorted_words_matches_reference(runs):
    runs = [sorted(r) for r in runs]
    words = np.array([x for r in runs for x in r], np.uint64)
    lengths = [len(r) for r in runs]
    ends = np.cumsum(lengths, dtype=np.int64)
    starts = ends - np.array(lengths, np.int64)
    out = np.empty(len(words), np.uint64)
    n = merge_sorted_words(words, starts, ends, out)
    assert n == len(words)
    np.testing.assert_array_equal(out[:n], merge_sorted_words_ref(words, starts, ends))


@st.composite
def runs_strategy(draw, order, huge_diffs=False):
    """Sorted, consolidated runs of one key width (built by the reference consolidation)."""
    w = draw(st.integers(0, 3))
    k = draw(st.integers(0, 8))
    wide = draw(st.booleans())  # values spanning the whole uint64 range: several packed words
    value = st.integers(0, MAX) if wide else st.integers(0, 6)
    pools = [draw(st.lists(value, min_size=1, max_size=4)) for _ in range(w)]
    times = draw(st.lists(st.integers(0, 8) | st.sampled_from([MAX, MAX - 1]), min_size=1, max_size=5))
    diff = st.integers(-2, 2)
    if huge_diffs:
        diff = diff | st.sampled_from([INT64_MIN, INT64_MAX, 2**62])
    runs = []
    for _ in range(k):
        n = draw(st.integers(0, 25))
        keys = np.array(
            [[draw(st.sampled_from(p)) for p in pools] for _ in range(n)], np.uint64
        ).reshape(n, w)
        time = np.array([draw(st.sampled_from(times)) for _ in range(n)], np.uint64)
        d = np.array([draw(diff) for _ in range(n)], np.int64)
        try:
            runs.append(consolidate_ref(keys, time, d, order))
        except OverflowError:
            continue
    return w, runs


def stays_sorted(run, since):
    """Whether advancing ``run``'s times to ``since`` keeps it strictly sorted by (time, data),
    as merge_runs requires of a time-ordered run (advance_runs cuts one that would not be)."""
    rows = [(max(int(t), since), tuple(int(x) for x in k)) for k, t in zip(run[0], run[1])]
    return all(a < b for a, b in zip(rows, rows[1:]))


def check_merge(runs, order, since, w):
    copies = [tuple(a.copy() for a in r) for r in runs]
    try:
        expected = merge_runs_ref(runs, order, since) if runs else None
    except OverflowError:
        with pytest.raises(OverflowError, match="diff overflow"):
            merge_runs(runs, order, since)
        return
    got = merge_runs(runs, order, since)
    if expected is None:
        assert got[0].shape == (0, 0) and len(got[1]) == 0
        return
    assert got[0].shape == (len(got[1]), w)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e.reshape(g.shape) if g.ndim == 2 else e)
    for r, c in zip(runs, copies):
        for a, b in zip(r, c):
            np.testing.assert_array_equal(a, b)


@settings(max_examples=120)
@given(st.data(), st.sampled_from(["time", "data"]))
def test_merge_runs_matches_reference(data, order):
    w, runs = data.draw(runs_strategy(order))
    since = data.draw(st.none() | st.integers(0, 9) | st.just(MAX))
    if order == "time" and since is not None and not all(stays_sorted(r, since) for r in runs):
        # Advancing would unsort a time-ordered run: rows of two stale times, or a stale time's
        # rows meeting rows at ``since`` (merge_runs' contract excludes it; advance_runs cuts
        # such a run first).
        since = None
    check_merge(runs, order, since, w)


@settings(max_examples=60)
@given(st.data(), st.sampled_from(["time", "data"]))
def test_merge_runs_with_huge_diffs(data, order):
    w, runs = data.draw(runs_strategy(order, huge_diffs=True))
    check_merge(runs, order, None, w)


def test_merge_overflow_exactly_at_the_final_sum():
    def run(diff, key=5):
        return (np.array([[key]], np.uint64), np.array([3], np.uint64), np.array([diff], np.int64))

    filler = run(1, key=9)
    with pytest.raises(OverflowError, match="diff overflow"):
        merge_runs([run(INT64_MAX), run(1), filler])
    with pytest.raises(OverflowError, match="diff overflow"):
        merge_runs([run(2**62), run(2**62), filler])  # embedded path (small diff range)
    # partial sums leave int64, final sums fit
    for diffs in [
        [INT64_MIN, -1, INT64_MAX, 1],
        [INT64_MIN, -1, 1],
        [2**62, 2**62, -1],
        [2**62] * 2 + [-(2**62)] * 2,
    ]:
        total = sum(diffs)
        k, t, d = merge_runs([run(x) for x in diffs] + [filler], "data")
        assert d.tolist() == ([total] if total else []) + [1]


def test_merge_edge_cases():
    empty = (np.empty((0, 2), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64))
    k, t, d = merge_runs([empty, empty])
    assert k.shape == (0, 2) and len(t) == 0
    k, t, d = merge_runs([])
    assert k.shape == (0, 0)
    one = (np.array([[1, 2]], np.uint64), np.array([4], np.uint64), np.array([3], np.int64))
    k, t, d = merge_runs([empty, one])
    assert k.tolist() == [[1, 2]] and not np.shares_memory(k, one[0])  # a copy, not the input
    k, t, d = merge_runs([one], since=10)
    assert t.tolist() == [10]


def test_merge_eight_runs_like_the_benchmark():
    rng = np.random.default_rng(3)
    runs = []
    for _ in range(8):
        keys = rng.integers(0, 500, (400, 1)).astype(np.uint64)
        time = rng.integers(0, 50, 400).astype(np.uint64)
        diff = rng.choice([-1, 1], 400).astype(np.int64)
        runs.append(consolidate_ref(keys, time, diff, "data"))
    check_merge(runs, "data", None, 1)
    check_merge(runs, "data", 25, 1)


@settings(max_examples=60)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 3) | st.just(MAX), st.integers(0, MAX), st.integers(0, 9)), max_size=80),
        min_size=1, max_size=6,
    ),
    st.sampled_from(["time", "data"]),
    st.one_of(st.none(), st.integers(0, 10)),
    st.lists(st.integers(-3, 3) | st.sampled_from([INT64_MAX, INT64_MIN]), min_size=1, max_size=5),
)
def test_merge_runs_wide_keys_take_the_row_merge(raw_runs, order, since, diff_pool):
    # Two full-range key words: the packed key needs several words, so merge_runs merges row
    # indices (merge_rows_tree) -- sizes beyond the tiny path, times that the since advances.
    import colmz.kernels.merge as km

    runs = []
    for i, rows in enumerate(raw_runs):
        keys = np.array([[a, b] for a, b, _ in rows], np.uint64).reshape(len(rows), 2)
        time = np.array([t for _, _, t in rows], np.uint64)
        diff = np.array([diff_pool[(j + i) % len(diff_pool)] for j in range(len(rows))], np.int64)
        try:
            runs.append(consolidate_ref(keys, time, diff, order, since if order == "data" else None))
        except OverflowError:
            return
    if order == "time" and since is not None:
        since = None  # time-ordered runs are cut before advancing (colmz.kernels.advance)
    try:
        expected = merge_runs_ref(runs, order, since)
    except OverflowError:
        expected = None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(km, "_TINY", 0)
        if expected is None:
            with pytest.raises(OverflowError):
                merge_runs(runs, order, since)
            return
        got = merge_runs(runs, order, since)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=60)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=20), max_size=6))
def test_merge_rows_tree_matches_reference(raw_runs):
    from colmz.kernels.merge import merge_rows_tree, merge_rows_tree_ref

    runs = [sorted(r) for r in raw_runs]
    words = np.array([x for r in runs for x in r], np.uint64).reshape(-1, 2)
    lengths = [len(r) for r in runs]
    ends = np.cumsum(lengths, dtype=np.int64)
    starts = ends - np.array(lengths, np.int64)
    perm = merge_rows_tree(words, starts, ends)
    assert sorted(perm.tolist()) == list(range(len(words)))
    np.testing.assert_array_equal(words[perm], words[merge_rows_tree_ref(words, starts, ends)])
