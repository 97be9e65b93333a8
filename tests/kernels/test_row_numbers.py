"""``row_number``'s change kernels (``colmz.kernels.ranking``) against their reference, compiled
and as their own Python, over random sorted entries (positions in the keys' low bits, or in a
permutation; repeated keys whose diffs add up, cancel or go negative); and their work: the
emitted entries are exactly the numbers that move (counted)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.ranking import (
    positions_below,
    row_number_change_ref,
    row_number_count,
    row_number_fill,
)


def py(kernel):
    """The kernel's own Python (``NUMBA_DISABLE_JIT=1`` leaves the function itself)."""
    return getattr(kernel, "py_func", kernel)


def entries(rows, one_partition, low_bits):
    """``rows``: (partition, row, tag, diff) -> the kernels' sorted entries: the read's
    (tag 0) positions first, the delta's after; key = partition in bits 9 up, the row in bits
    1-8, the tag in bit 0."""
    read = [r for r in rows if r[2] == 0]
    delta = [r for r in rows if r[2] == 1]
    keys = np.array([((0 if one_partition else p) << 9) | (r << 1) | t for p, r, t, _ in read + delta], np.uint64)
    diff = np.array([d for *_, d in read + delta], np.int64)
    n = len(keys)
    if low_bits:
        bits = max(int(n - 1).bit_length(), 1)
        words = np.sort((keys << np.uint64(bits)) | np.arange(n, dtype=np.uint64), kind="stable")
        return words, bits, np.zeros(0, np.int64), diff, len(read), 1, 64 if one_partition else 9
    perm = np.argsort(keys, kind="stable")
    return keys[perm], 0, perm, diff, len(read), 1, 64 if one_partition else 9


def run(count, fill, args, part_low, after):
    m, least, old, new = count(*args, after)
    out = [np.zeros(m, np.int64) for _ in range(4)]
    fill(*args, part_low, after, *out)
    return list(zip(*(o.tolist() for o in out))), int(least), int(old), int(new)


rows = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 1), st.integers(-3, 3)),
                max_size=40)


@settings(max_examples=300, deadline=None)
@given(rows, st.booleans(), st.booleans(), st.booleans(), st.integers(0, 5))
def test_kernels_match_the_reference(rs, read_is_after, one_partition, low_bits, part_low):
    args = entries(rs, one_partition, low_bits)
    want = row_number_change_ref(*args, part_low, read_is_after)
    for count, fill in ((row_number_count, row_number_fill), (py(row_number_count), py(row_number_fill))):
        got = run(count, fill, args, part_low, read_is_after)
        assert got[1:] == want[1:]
        if want[1] >= 0:  # a negative multiplicity: the caller raises, the entries mean nothing
            assert got[0] == want[0]


def test_only_moved_numbers_are_emitted():
    # one partition of 1,000 rows held once; a row inserted at place 901: the 100 rows after
    # it move (a retraction and an insertion each), the new row is inserted -- 201 entries,
    # whatever the partition's size
    n = 1000
    rs = [(0, 2 * i, 0, 1) for i in range(n)] + [(0, 2 * 900 - 1, 1, 1)]
    keys = np.array([(r << 1) | t for _, r, t, _ in rs], np.uint64)  # positions: read 0..n-1, delta n
    perm = np.argsort(keys, kind="stable")
    args = (keys[perm], 0, perm, np.ones(n + 1, np.int64), n, 1, 64)
    assert row_number_count(*args, False) == (201, 0, n, n + 1)
    got = run(row_number_count, row_number_fill, args, 0, False)[0]
    assert got == row_number_change_ref(*args, 0, False)[0]
    assert got[:3] == [(0, n, 901, 1), (0, 900, 901, -1), (0, 900, 902, 1)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**40), max_size=50))
def test_positions_below_matches_numpy(keys):
    keys = np.array(keys, np.uint64)
    bits = max(int(len(keys) - 1).bit_length(), 1)
    want = (keys << np.uint64(bits)) | np.arange(len(keys), dtype=np.uint64)
    for kernel in (positions_below, py(positions_below)):
        out = np.zeros(len(keys), np.uint64)
        kernel(keys, bits, out)
        assert out.tolist() == want.tolist()
