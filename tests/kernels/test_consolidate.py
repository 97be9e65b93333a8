"""Consolidation kernels (``colmz.kernels.consolidate``) against their references.

``sort_consolidate`` takes one of four paths by the shape of its input: every row the same
key (no packed word), key and diff sharing one packed word (the embedded radix sort), one
packed key word with the diff beside it, and several packed words (permutation sort). The
strategies reach all four; explicit cases pin each one down.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels import pool
from colmz.kernels.consolidate import (
    consolidate_ref,
    consolidate_sorted_words,
    consolidate_sorted_words_ref,
    order_significance,
    sort_consolidate,
)

MAX = 2**64 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@st.composite
def inputs(draw, max_rows=40, huge_diffs=True):
    n = draw(st.integers(0, max_rows))
    w = draw(st.integers(0, 3))
    cols = []
    for _ in range(w + 1):
        bits = draw(st.sampled_from([0, 1, 3, 8, 20, 33, 63, 64]))
        base = draw(st.sampled_from([0, 2**63, MAX - (2**bits - 1)]))
        base = min(base, MAX - (2**bits - 1))
        values = st.integers(base, base + 2**bits - 1)
        pool = draw(st.lists(values, min_size=1, max_size=5))
        cols.append(draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)))
    keys = np.array(cols[:w], np.uint64).T.reshape(n, w).copy()
    time = np.array(cols[w], np.uint64)
    small = st.integers(-2, 2)
    if huge_diffs:
        small = small | st.sampled_from([INT64_MIN, INT64_MAX, 2**62, -(2**62), 2**60])
    diff = np.array(draw(st.lists(small, min_size=n, max_size=n)), np.int64)
    return keys, time, diff


@pytest.fixture(scope="module", autouse=True, params=[0, None], ids=["packed-paths", "small-path"])
def small_sort_threshold(request):
    """Run every test twice: with the one-call small path off (so the tiny inputs drawn here
    exercise the packed paths) and with its default threshold."""
    import colmz.kernels.consolidate as kc

    mp = pytest.MonkeyPatch()
    if request.param is not None:
        mp.setattr(kc, "_SMALL_SORT", request.param)
    yield
    mp.undo()


def ref_or_overflow(keys, time, diff, order, since):
    try:
        return consolidate_ref(keys, time, diff, order, since)
    except OverflowError:
        return None


def check(keys, time, diff, order, since):
    copies = keys.copy(), time.copy(), diff.copy()
    expected = ref_or_overflow(keys, time, diff, order, since)
    if expected is None:
        with pytest.raises(OverflowError, match="diff overflow"):
            sort_consolidate(keys, time, diff, order, since)
    else:
        got = sort_consolidate(keys, time, diff, order, since)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g, e)
        assert got[0].shape == (len(got[1]), keys.shape[1])
    # inputs are not modified
    for a, b in zip((keys, time, diff), copies):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=150)
@given(
    inputs(),
    st.sampled_from(["time", "data"]),
    st.none() | st.sampled_from([0, 1, 2**63, MAX]) | st.integers(0, MAX),
)
def test_sort_consolidate_matches_reference(arrays, order, since):
    check(*arrays, order, since)


@settings(max_examples=60)
@given(inputs(max_rows=30, huge_diffs=False), st.sampled_from(["time", "data"]))
def test_read_only_inputs(arrays, order):
    keys, time, diff = (a.copy() for a in arrays)
    for a in (keys, time, diff):
        a.flags.writeable = False
    check(keys, time, diff, order, None)


def test_results_do_not_alias_scratch():
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 50, (1000, 1)).astype(np.uint64)
    time = rng.integers(0, 5, 1000).astype(np.uint64)
    diff = rng.choice([-1, 1], 1000).astype(np.int64)
    first = sort_consolidate(keys, time, diff)
    saved = [a.copy() for a in first]
    wide = np.concatenate([keys, rng.integers(0, 2**63, (1000, 1)).astype(np.uint64)], axis=1)
    sort_consolidate(wide, time[::-1].copy(), -diff)  # reuses the same scratch slots
    sort_consolidate(keys, time, (diff * 2**40).astype(np.int64))
    for a, b in zip(first, saved):
        np.testing.assert_array_equal(a, b)
    assert pool.scratch_bytes() > 0
    pool.release()
    assert pool.scratch_bytes() == 0
    for a, b in zip(first, saved):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "keys, time, diff, expected",
    [
        # every row the same key: no packed word at all
        ([[7], [7], [7]], [3, 3, 3], [1, 2, -1], ([[7]], [3], [2])),
        ([[7], [7]], [3, 3], [1, -1], ([], [], [])),
        # key and diff in one word (embedded path)
        ([[3], [1], [3], [2]], [5, 5, 5, 4], [1, 2, 1, -1], ([[2], [1], [3]], [4, 5, 5], [-1, 2, 2])),
        # one key word, wide diff range beside it (pairs path)
        ([[3], [1], [3]], [5, 5, 5], [INT64_MIN, 2**62, 1], ([[1], [3]], [5, 5], [2**62, INT64_MIN + 1])),
        # several packed words (permutation path)
        ([[MAX, 0], [0, MAX], [MAX, 0]], [0, 1, 0], [1, 1, 1], ([[MAX, 0], [0, MAX]], [0, 1], [2, 1])),
    ],
)
def test_paths_by_example(keys, time, diff, expected):
    k = np.array(keys, np.uint64).reshape(len(time), -1)
    t, d = np.array(time, np.uint64), np.array(diff, np.int64)
    got = sort_consolidate(k, t, d)
    assert got[0].tolist() == expected[0] and got[1].tolist() == expected[1]
    assert got[2].tolist() == expected[2]
    check(k, t, d, "time", None)
    check(k, t, d, "data", 4)


@pytest.mark.parametrize(
    "diffs",
    [
        [INT64_MAX, 1],
        [INT64_MIN, -1],
        [2**60] * 8,  # the embedded path: small diff range, sum 2**63
        [-(2**60)] * 8 + [-1],
        [INT64_MAX, INT64_MAX, INT64_MAX],
    ],
)
@pytest.mark.parametrize("width", [0, 1, 2])
def test_overflow_when_the_final_sum_leaves_int64(diffs, width):
    n = len(diffs)
    keys = np.full((n, width), 2**63 + 5, np.uint64)
    if width == 2:
        keys[:, 1] = MAX
    # plus one unrelated row with diff 1 at another time
    keys = np.vstack([keys, np.zeros((1, width), np.uint64)])
    time = np.array([9] * n + [0], np.uint64)
    diff = np.array(diffs + [1], np.int64)
    for order in ("time", "data"):
        with pytest.raises(OverflowError, match="diff overflow"):
            sort_consolidate(keys, time, diff, order)
        with pytest.raises(OverflowError, match="diff overflow"):
            consolidate_ref(keys, time, diff, order)


@pytest.mark.parametrize(
    "diffs",
    [
        [INT64_MAX, 1, -1],
        [INT64_MIN, -1, 1],
        [2**60] * 8 + [-1],
        [INT64_MAX, INT64_MAX, INT64_MIN, INT64_MIN],
        [-(2**60)] * 8,
    ],
)
@pytest.mark.parametrize("width", [0, 1, 2])
def test_partial_sum_overflow_does_not_raise(diffs, width):
    n = len(diffs)
    keys = np.full((n + 1, width), 11, np.uint64)
    if width:
        keys[-1, 0] = 12
    if width == 2:
        keys[:, 1] = MAX
    time = np.array([9] * n + [0], np.uint64)
    diff = np.array(diffs + [1], np.int64)
    total = sum(diffs)
    for order in ("time", "data"):
        k, t, d = sort_consolidate(keys, time, diff, order)
        got = [int(x) for x, tt in zip(d, t) if tt == 9]
        assert got == ([total] if total else [])


@settings(max_examples=80)
@given(st.data())
def test_consolidate_sorted_words_matches_reference(data):
    m = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(0, 40))
    rows = data.draw(st.lists(st.tuples(*[st.integers(0, 3)] * m), min_size=n, max_size=n))
    rows.sort()
    diffs = data.draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n))
    words = np.array(rows, np.uint64).reshape(n, m)
    d = np.array(diffs, np.int64)
    ew, ed = consolidate_sorted_words_ref(words, d)
    k = consolidate_sorted_words(words, d)
    np.testing.assert_array_equal(words[:k], ew)
    np.testing.assert_array_equal(d[:k], ed)


def test_consolidate_sorted_words_overflow():
    words = np.zeros((2, 1), np.uint64)
    with pytest.raises(OverflowError, match="diff overflow"):
        consolidate_sorted_words(words, np.array([INT64_MAX, 1], np.int64))


@settings(max_examples=80)
@given(inputs(max_rows=80), st.sampled_from(["time", "data"]), st.none() | st.sampled_from([0, 1, 2**63]))
def test_flipped_keys_sort_as_their_flips(arrays, order, since):
    """``flips=``: key words sort as ``keys ^ flips`` and come back unflipped."""
    keys, time, diff = arrays
    w = keys.shape[1]
    flips = np.array([2**63, 0, 2**63 | 5][:w], np.uint64)
    expected = ref_or_overflow(keys ^ flips, time, diff, order, since)
    copies = keys.copy(), time.copy(), diff.copy()
    try:
        ok, ot, od = sort_consolidate(keys, time, diff, order, since, flips)
    except OverflowError:
        assert expected is None
        return
    assert expected is not None
    np.testing.assert_array_equal(ok ^ flips, expected[0])
    np.testing.assert_array_equal(ot, expected[1])
    np.testing.assert_array_equal(od, expected[2])
    for a, b in zip((keys, time, diff), copies):
        np.testing.assert_array_equal(a, b)


def test_embedded_results_own_exact_memory():
    """The one-word path hands out its sort buffers cut to the rows kept: each result array
    owns its memory (no view of a larger buffer)."""
    rng = np.random.default_rng(3)
    n = 5000
    keys = rng.integers(0, 40, (n, 1)).astype(np.uint64)
    time = rng.integers(0, 3, n).astype(np.uint64)
    diff = rng.choice([-1, 1], n).astype(np.int64)
    ok, ot, od = sort_consolidate(keys, time, diff, "data")
    assert len(ot) < n
    for a in (ot, od):
        assert a.flags.owndata and a.nbytes == 8 * len(ot)
    assert ok.base is None or ok.base.nbytes == 8 * len(ot)
    e = consolidate_ref(keys, time, diff, "data")
    for a, b in zip((ok, ot, od), e):
        np.testing.assert_array_equal(a, b)


def test_order_significance():
    t = np.array([0, 5, 10, MAX], np.uint64)
    assert order_significance("time", 2) == [2, 0, 1]
    assert order_significance("data", 2) == [0, 1, 2]
    with pytest.raises(ValueError, match="order must be 'time' or 'data', got 'x'"):
        order_significance("x", 1)
    with pytest.raises(ValueError, match="order must be 'time' or 'data'"):
        consolidate_ref(np.zeros((1, 1), np.uint64), t[:1], np.ones(1, np.int64), "x")


def test_empty_input_keeps_width():
    for w in (0, 1, 3):
        k, t, d = sort_consolidate(np.empty((0, w), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64))
        assert k.shape == (0, w) and t.dtype == np.uint64 and d.dtype == np.int64


def test_times_at_max_and_since_max():
    keys = np.array([[1], [2], [1]], np.uint64)
    time = np.array([MAX, 0, MAX - 1], np.uint64)
    diff = np.array([1, 1, 1], np.int64)
    k, t, d = sort_consolidate(keys, time, diff, "time", MAX)
    assert k.ravel().tolist() == [1, 2] and t.tolist() == [MAX, MAX] and d.tolist() == [2, 1]
    check(keys, time, diff, "data", MAX - 1)


@pytest.mark.slow
def test_kernels_own_python_matches_references():
    """The kernel tests again with ``NUMBA_DISABLE_JIT=1``: the Python the kernels are written
    in, not only their compiled form, agrees with the references."""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    files = [os.path.join(here, f"test_{m}.py")
             for m in ("sort", "consolidate", "merge", "advance", "split", "encode", "read_merge", "digest",
                       "gather")]
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning", *files],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_large_input_sorted_top_digit_first():
    """Past the size where the radix sort goes top digit first, the result is still exact."""
    rng = np.random.default_rng(11)
    n = (1 << 18) + 1000
    keys = rng.integers(0, n // 3, (n, 1)).astype(np.uint64)
    time = rng.integers(0, 50, n).astype(np.uint64)
    diff = rng.choice([-1, 1, 2], n).astype(np.int64)
    ok, ot, od = sort_consolidate(keys, time, diff, "data")
    packed = (keys[:, 0] << np.uint64(6)) | time
    uniq, inverse = np.unique(packed, return_inverse=True)
    sums = np.bincount(inverse, weights=diff).astype(np.int64)
    keep = sums != 0
    np.testing.assert_array_equal(ok[:, 0], uniq[keep] >> np.uint64(6))
    np.testing.assert_array_equal(ot, uniq[keep] & np.uint64(63))
    np.testing.assert_array_equal(od, sums[keep])


@pytest.mark.parametrize("width", [1, 2])
def test_large_input_with_result_pages_populated_on_a_helper(monkeypatch, width):
    """Beyond the process's high-water mark the one-word path's buffers are populated on a
    helper thread while the kernels run (``pool.result_arrays``); the result is the same
    as without, and owns exactly its rows' memory."""
    rng = np.random.default_rng(5)
    n = 300_000
    keys = rng.integers(0, n // 3, (n, width)).astype(np.uint64)
    time = rng.integers(0, 50, n).astype(np.uint64)
    diff = rng.choice([-1, 1], n).astype(np.int64)
    plain = sort_consolidate(keys, time, diff, "data")
    monkeypatch.setattr(pool, "FRESH_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(pool, "_high_water", 0)
    started = []
    real = pool.result_arrays

    def spy(m, dtypes):
        arrays, helper = real(m, dtypes)
        started.append(helper)
        return arrays, helper

    monkeypatch.setattr(pool, "result_arrays", spy)
    populated = sort_consolidate(keys, time, diff, "data")
    if pool._madvise is not None:
        assert started and started[0] is not None and not started[0].is_alive()
    for a, b in zip(populated, plain):
        np.testing.assert_array_equal(a, b)
    assert populated[1].flags.owndata and populated[1].nbytes == 8 * len(plain[1])
