"""The small-read kernel (``colmz.kernels.small_read``) against its pure-Python reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.small_read import sort_consolidate_cut, sort_consolidate_cut_ref

MAX = 2**64 - 1
I64 = (-(2**63), 2**63 - 1)


@st.composite
def run(draw, width):
    n = draw(st.integers(0, 24))
    word = st.sampled_from([0, 1, 2, 5, 2**63, MAX])
    time = st.sampled_from([0, 1, 2, 3, 7, 2**40, 2**63, MAX - 1, MAX])
    diff = st.one_of(st.integers(-3, 3), st.sampled_from([I64[0], I64[1], 2**62]))
    keys = np.array(draw(st.lists(st.tuples(*([word] * width)), min_size=n, max_size=n)),
                    np.uint64).reshape(n, width)
    times = np.array(draw(st.lists(time, min_size=n, max_size=n)), np.uint64)
    diffs = np.array(draw(st.lists(diff, min_size=n, max_size=n)), np.int64)
    return keys, times, diffs


def call(kernel, a, b, since, upper):
    n = len(a[1]) + len(b[1])
    w = a[0].shape[1]
    ok, ot, od = np.empty((n, w), np.uint64), np.empty(n, np.uint64), np.empty(n, np.int64)
    with np.errstate(over="ignore"):  # the kernel's own Python wraps on overflow, then checks
        m, cut, negatable = kernel(*a, *b, np.uint64(since), np.uint64(upper or 0), upper is not None, ok, ot, od)
    return m, cut, negatable, ok[:max(m, 0)], ot[:max(m, 0)], od[:max(m, 0)]


def partial_sums_overflow(a, b, since):
    # Whether adding the diffs of some (time, keys) in input order (a, then b) leaves int64.
    acc: dict[tuple, int] = {}
    for keys, time, diff in (a, b):
        for i in range(len(time)):
            row = (max(int(time[i]), since), *(int(x) for x in keys[i]))
            acc[row] = acc.get(row, 0) + int(diff[i])
            if not I64[0] <= acc[row] <= I64[1]:
                return True
    return False


@pytest.mark.parametrize("kernel", ["jit", "python"])
@settings(max_examples=120, deadline=None)
@given(data=st.data(), width=st.sampled_from([0, 1, 2, 3]),
       since=st.sampled_from([0, 1, 3, 2**63, MAX]),
       upper=st.one_of(st.none(), st.sampled_from([0, 1, 2, 4, 8, 2**40 + 1, 2**63, MAX])))
def test_matches_reference(kernel, data, width, since, upper):
    fn = sort_consolidate_cut if kernel == "jit" else getattr(sort_consolidate_cut, "py_func", sort_consolidate_cut)
    a, b = data.draw(run(width)), data.draw(run(width))
    m, cut, negatable, ok, ot, od = call(fn, a, b, since, upper)
    ref = sort_consolidate_cut_ref(*a, *b, since, upper or 0, upper is not None)
    # Equal rows are summed in input order (the sort is stable): the kernel gives up exactly
    # when a sum leaves int64 on the way, which includes every final sum that does.
    assert (m == -1) == partial_sums_overflow(a, b, since)
    if m == -1:
        return
    assert ref is not None
    keys, time, diff, rcut, rneg = ref
    assert ok.tolist() == keys.tolist() and ot.tolist() == time.tolist() and od.tolist() == diff.tolist()
    assert (cut, negatable) == (rcut, rneg)


def test_sorted_consolidated_and_cut():
    ak = np.array([[9], [1], [4]], np.uint64)
    at = np.array([7, 2, 2], np.uint64)
    ad = np.array([5, 1, 2], np.int64)
    bk = np.array([[1], [4], [9]], np.uint64)
    bt = np.array([1, 3, 7], np.uint64)
    bd = np.array([2, 3, -5], np.int64)
    # since 2: (1, t1) joins (1, t2) -> 3; (4, t2) 2; (4, t3) 3; (9, t7) cancels.
    m, cut, negatable, ok, ot, od = call(sort_consolidate_cut, (ak, at, ad), (bk, bt, bd), 2, 3)
    assert (m, cut, negatable) == (3, 2, True)
    assert ok.ravel().tolist() == [1, 4, 4] and ot.tolist() == [2, 2, 3] and od.tolist() == [3, 2, 3]


def test_min_diff_below_the_cut_is_not_negatable():
    k = np.array([[1], [2]], np.uint64)
    t = np.array([0, 5], np.uint64)
    d = np.array([1, I64[0]], np.int64)
    e = (np.empty((0, 1), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64))
    assert call(sort_consolidate_cut, (k, t, d), e, 0, 5)[2] is True  # -2**63 beyond the cut
    assert call(sort_consolidate_cut, (k, t, d), e, 0, 6)[2] is False


def test_overflowing_sum_gives_up_and_leaves_inputs():
    k = np.array([[1], [1]], np.uint64)
    t = np.array([0, 0], np.uint64)
    d = np.array([I64[1], 1], np.int64)
    e = (np.empty((0, 1), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64))
    assert call(sort_consolidate_cut, (k, t, d), e, 0, None)[0] == -1
    assert d.tolist() == [I64[1], 1] and k.ravel().tolist() == [1, 1]
