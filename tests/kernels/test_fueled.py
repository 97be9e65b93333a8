"""The resumable fueled merge kernel against its pure-Python reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.consolidate import consolidate_ref
from colmz.kernels.fueled import (
    fueled_merge,
    fueled_merge_1,
    fueled_merge_ref,
    is_done,
    new_cursor,
    run_merge,
)

MAX = 2**64 - 1
I64 = (-(2**63), 2**63 - 1)


def make_run(rows, width):
    """A consolidated run sorted by (key words, time) from ``{(key, time): diff}``."""
    items = sorted((k, t, d) for (k, t), d in rows.items() if d != 0)
    keys = np.array([k for k, _, _ in items], np.uint64).reshape(len(items), width)
    time = np.array([t for _, t, _ in items], np.uint64)
    diff = np.array([d for _, _, d in items], np.int64)
    return keys, time, diff


@st.composite
def runs(draw, width=None):
    w = draw(st.sampled_from([0, 1, 1, 2, 3])) if width is None else width
    word = st.sampled_from([0, 1, 2, 5, 2**63, MAX])
    key = st.tuples(*([word] * w))
    time = st.sampled_from([0, 1, 2, 3, 7, 2**63, MAX - 1, MAX])
    diff = st.one_of(st.integers(-3, 3), st.sampled_from([I64[0], I64[1], 2**62]))

    def one():
        return draw(st.dictionaries(st.tuples(key, time), diff, max_size=25))

    a, b = make_run(one(), w), make_run(one(), w)
    since = draw(st.sampled_from([0, 1, 3, 2**63, MAX]))
    budgets = draw(st.lists(st.integers(-1, 6), min_size=1, max_size=12))
    return a, b, since, budgets


def outputs(n, w):
    return np.zeros((n, w), np.uint64), np.zeros(n, np.uint64), np.zeros(n, np.int64)


def step(fn, a, b, since, cur, out, budget, one_word):
    ak, at, ad = a
    bk, bt, bd = b
    ok, ot, od = out
    if one_word:
        return fn(ak.reshape(-1), at, ad, bk.reshape(-1), bt, bd, np.uint64(since), cur,
                  ok.reshape(-1), ot, od, np.int64(budget))
    return fn(ak, at, ad, bk, bt, bd, np.uint64(since), cur, ok, ot, od, np.int64(budget))


def drive(fn, a, b, since, budgets, one_word=False):
    """Run ``fn`` with the budgets (then unlimited); record (produced, cursor) per call."""
    w = a[0].shape[1]
    out = outputs(len(a[1]) + len(b[1]), w)
    cur = new_cursor()
    trace = []
    for budget in [*budgets, 2**62]:
        try:
            produced = step(fn, a, b, since, cur, out, budget, one_word)
        except OverflowError:
            trace.append(("overflow", tuple(cur.tolist())))
            return trace, None
        trace.append((int(produced), tuple(cur.tolist())))
    o = int(cur[2])
    assert is_done(cur, len(a[1]), len(b[1]))
    return trace, (out[0][:o].copy(), out[1][:o].copy(), out[2][:o].copy())


def expected(a, b, since):
    keys = np.concatenate([a[0], b[0]])
    time = np.concatenate([a[1], b[1]])
    diff = np.concatenate([a[2], b[2]])
    return consolidate_ref(keys, time, diff, "data", since)


def same(x, y):
    return all(np.array_equal(p, q) for p, q in zip(x, y))


@settings(max_examples=150, deadline=None)
@given(runs())
def test_kernel_matches_reference_step_by_step(case):
    a, b, since, budgets = case
    ref_trace, ref_out = drive(fueled_merge_ref, a, b, since, budgets)
    trace, out = drive(fueled_merge, a, b, since, budgets)
    assert trace == ref_trace
    if ref_out is None:
        return
    assert same(out, ref_out)
    try:
        want = expected(a, b, since)
    except OverflowError:
        pytest.fail("the reference merged what consolidation calls an overflow")
    assert same(out, want)


@settings(max_examples=150, deadline=None)
@given(runs(width=1))
def test_one_word_kernel_matches_reference(case):
    a, b, since, budgets = case
    ref_trace, ref_out = drive(fueled_merge_ref, a, b, since, budgets)
    trace, out = drive(fueled_merge_1, a, b, since, budgets, one_word=True)
    assert trace == ref_trace
    if ref_out is not None:
        assert same(out, ref_out)


@settings(max_examples=40, deadline=None)
@given(runs())
def test_kernel_python_source_matches_reference(case):
    # The kernels' own Python (what NUMBA_DISABLE_JIT=1 runs) against the reference.
    a, b, since, budgets = case
    ref_trace, ref_out = drive(fueled_merge_ref, a, b, since, budgets)
    with np.errstate(over="ignore"):
        trace, out = drive(fueled_merge.py_func, a, b, since, budgets)
        assert trace == ref_trace
        if a[0].shape[1] == 1:
            trace1, _ = drive(fueled_merge_1.py_func, a, b, since, budgets, one_word=True)
            assert trace1 == ref_trace
    if ref_out is not None:
        assert same(out, ref_out)


@settings(max_examples=100, deadline=None)
@given(runs(), st.integers(1, 5))
def test_run_merge_resumes_to_the_full_merge(case, budget):
    a, b, since, _ = case
    try:
        want = expected(a, b, since)
    except OverflowError:
        want = None
    w = a[0].shape[1]
    out = outputs(len(a[1]) + len(b[1]), w)
    cur = new_cursor()
    calls = 0
    try:
        while not is_done(cur, len(a[1]), len(b[1])):
            produced = run_merge(a, b, since, cur, out, budget)
            assert produced <= budget
            calls += 1
    except OverflowError:
        assert want is None
        return
    assert want is not None
    o = int(cur[2])
    assert same((out[0][:o], out[1][:o], out[2][:o]), want)
    # Each call but the last writes its whole budget.
    assert calls <= len(want[1]) // budget + 1


def k1(*xs):
    return np.array([[x] for x in xs], np.uint64).reshape(len(xs), 1)


def u64(*xs):
    return np.array(xs, np.uint64)


def i64(*xs):
    return np.array(xs, np.int64)


def test_zero_or_negative_budget_does_nothing():
    a = (k1(1), u64(0), i64(1))
    out = outputs(2, 1)
    cur = new_cursor()
    for budget in (0, -5):
        assert run_merge(a, a, 0, cur, out, budget) == 0
        assert cur.tolist() == [0, 0, 0]


def test_cancelling_merge_completes_in_one_call_with_no_output():
    keys = k1(*range(100))
    time = np.zeros(100, np.uint64)
    a = (keys, time, np.ones(100, np.int64))
    b = (keys, time, -np.ones(100, np.int64))
    out = outputs(200, 1)
    cur = new_cursor()
    assert run_merge(a, b, 0, cur, out, budget=1) == 0
    assert cur.tolist() == [100, 100, 0]


def test_collapsed_group_is_summed_across_calls():
    # Key 7 has ten stale times in A and five in B: with since 100 they form one group, which
    # a budget of one output per call must still emit once, summed.
    a = (k1(*([7] * 10 + [8])), u64(*range(10), 0), i64(*([1] * 10), 1))
    b = (k1(*([7] * 5)), u64(*range(20, 25)), i64(*([2] * 5)))
    out = outputs(16, 1)
    cur = new_cursor()
    assert run_merge(a, b, 100, cur, out, budget=1) == 1
    assert cur.tolist() == [10, 5, 1]
    assert run_merge(a, b, 100, cur, out, budget=1) == 1
    assert out[0][:2].ravel().tolist() == [7, 8]
    assert out[1][:2].tolist() == [100, 100]
    assert out[2][:2].tolist() == [20, 1]


def test_overflow_raises_and_leaves_the_cursor():
    a = (k1(1, 2), u64(0, 0), i64(1, 2**63 - 1))
    b = (k1(2), u64(0), i64(1))
    out = outputs(3, 1)
    cur = new_cursor()
    assert run_merge(a, b, 0, cur, out, budget=1) == 1
    with pytest.raises(OverflowError):
        run_merge(a, b, 0, cur, out, budget=5)
    assert cur.tolist() == [1, 0, 1]


def test_intermediate_wrap_with_in_range_sum_is_exact():
    # A contributes MAX then +1 (wraps), B contributes -1 (wraps back): the sum is MAX.
    a = (k1(1, 1), u64(0, 1), i64(2**63 - 1, 1))
    b = (k1(1), u64(2), i64(-1))
    for fn in (fueled_merge, fueled_merge_ref):
        out = outputs(3, 1)
        cur = new_cursor()
        assert step(fn, a, b, 5, cur, out, 10, False) == 1
        assert out[2][0] == 2**63 - 1


def test_max_times_and_since():
    a = (k1(3, 3), u64(MAX - 1, MAX), i64(1, 1))
    b = (k1(3), u64(0), i64(1))
    out = outputs(3, 1)
    cur = new_cursor()
    run_merge(a, b, MAX, cur, out, 10)
    assert cur.tolist() == [2, 1, 1]
    assert out[1][0] == MAX and out[2][0] == 3


def test_wide_keys_compare_lexicographically_before_time():
    a = (np.array([[1, 9], [2, 0]], np.uint64), u64(5, 0), i64(1, 1))
    b = (np.array([[1, 9], [1, 10]], np.uint64), u64(1, 0), i64(1, 1))
    out = outputs(4, 2)
    cur = new_cursor()
    run_merge(a, b, 0, cur, out, 10)
    o = int(cur[2])
    assert out[0][:o].tolist() == [[1, 9], [1, 9], [1, 10], [2, 0]]
    assert out[1][:o].tolist() == [1, 5, 0, 0]


def test_zero_width_keys():
    a = (np.zeros((2, 0), np.uint64), u64(0, 3), i64(1, 1))
    b = (np.zeros((1, 0), np.uint64), u64(1), i64(4))
    out = outputs(3, 0)
    cur = new_cursor()
    run_merge(a, b, 2, cur, out, 10)
    assert out[1][: cur[2]].tolist() == [2, 3]
    assert out[2][: cur[2]].tolist() == [5, 1]


def test_one_word_and_matrix_merges_share_one_body():
    # Both entry points are compiled from the same Python code (specialised by a constant).
    one = getattr(fueled_merge_1, "py_func", fueled_merge_1)
    many = getattr(fueled_merge, "py_func", fueled_merge)
    assert one.__code__ is many.__code__
    assert [c.cell_contents for c in one.__closure__] != [c.cell_contents for c in many.__closure__]
