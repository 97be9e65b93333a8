"""Splitting at an upper (``colmz.kernels.split``): reference equality and work counts.

"Split at upper: one binary search plus at most one chunk copied" is checked by counting,
never by timing: the kernel's own Python (``lower_bound.py_func``) runs over an array that
counts the elements it reads, and ``colmz.chain.Chain.split_at`` reports chunks touched and
updates copied.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels import split as split_mod
from colmz.kernels.advance import stale_bounds
from colmz.kernels.split import lower_bound, lower_bound_ref

MAX = 2**64 - 1


def py(kernel):
    """The kernel's own Python (``NUMBA_DISABLE_JIT=1`` leaves the function itself)."""
    return getattr(kernel, "py_func", kernel)


@settings(max_examples=150)
@given(
    st.lists(st.integers(0, 30) | st.sampled_from([0, MAX - 1, MAX, 2**63]), max_size=60),
    st.integers(0, 32) | st.sampled_from([0, 1, MAX - 1, MAX, 2**63, 2**63 + 1]),
)
def test_lower_bound_matches_reference(times, u):
    time = np.array(sorted(times), np.uint64)
    i = int(lower_bound(time, np.uint64(u)))
    assert i == lower_bound_ref(time, u)
    assert all(t < u for t in time[:i].tolist()) and all(t >= u for t in time[i:].tolist())


class CountingArray:
    """A read-only sequence that counts element reads (each read is one comparison)."""

    def __init__(self, values):
        self.values = np.asarray(values)
        self.shape = self.values.shape
        self.reads = 0

    def __getitem__(self, i):
        self.reads += 1
        return self.values[i]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 1000, 2**16 + 3])
def test_lower_bound_is_one_binary_search(n):
    rng = np.random.default_rng(n)
    time = np.sort(rng.integers(0, max(n // 3, 1), n)).astype(np.uint64)
    bound = math.floor(math.log2(n)) + 1 if n else 0
    for u in [0, 1, n // 6, n // 3, MAX]:
        arr = CountingArray(time)
        i = py(lower_bound)(arr, np.uint64(u))
        assert i == lower_bound_ref(time, u)
        assert arr.reads <= bound, (n, u, arr.reads)


def test_stale_bounds_does_one_binary_search_per_stale_time(monkeypatch):
    # count the binary searches and their element reads through the kernel's own Python
    searches = []
    real = py(split_mod.lower_bound)

    def counting_lower_bound(time, u):
        arr = CountingArray(time)
        searches.append(arr)
        return real(arr, u)

    import colmz.kernels.advance as adv

    monkeypatch.setattr(adv, "lower_bound", counting_lower_bound)
    n = 10_000
    time = np.sort(np.random.default_rng(0).integers(0, 20, n)).astype(np.uint64)
    bounds = py(stale_bounds)(time, np.uint64(10), 32)
    assert len(bounds) - 1 == 10 and len(searches) == 10
    assert all(s.reads <= math.floor(math.log2(n)) + 1 for s in searches)


@settings(max_examples=60)
@given(st.integers(1, 400), st.integers(1, 64), st.integers(0, 60), st.randoms(use_true_random=False))
def test_chain_split_touches_one_chunk_and_copies_at_most_one(n, chunk_size, upper, rnd):
    chain_mod = pytest.importorskip("colmz.chain")
    times = np.array(sorted(rnd.randrange(0, 50) for _ in range(n)), np.uint64)
    keys = np.arange(n, dtype=np.uint64).reshape(n, 1)
    diff = np.ones(n, np.int64)
    chain = chain_mod.Chain.from_arrays(keys, times, diff, (1, 0), chunk_size)
    work = chain_mod.Work()
    lower, upper_part = chain.split_at(upper, work)
    cut = lower_bound_ref(times, upper)
    assert len(lower) == cut and len(upper_part) == n - cut
    assert work.chunks_touched <= 1
    assert work.copied < chunk_size
    got = [c.time for c in lower.chunks] + [c.time for c in upper_part.chunks]
    assert np.concatenate(got).tolist() == times.tolist()
