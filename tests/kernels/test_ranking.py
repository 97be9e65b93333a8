"""``row_number``'s change kernels (``colmz.kernels.ranking``) against their reference, compiled
and as their own Python, over random sorted, consolidated entries; and their work: the
emitted entries are exactly the numbers that move (counted)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.ranking import row_number_change_ref, row_number_count, row_number_fill


def py(kernel):
    """The kernel's own Python (``NUMBA_DISABLE_JIT=1`` leaves the function itself)."""
    return getattr(kernel, "py_func", kernel)


def entries(rows, one_partition):
    """``rows``: (partition, row, tag, diff) -> the kernels' inputs, sorted by (partition, row,
    tag) with each (partition, row, tag) once, tag in bit 0, the row in bits 1-8."""
    seen = {}
    for p, r, tag, d in rows:
        if d:
            seen[(0 if one_partition else p, r, tag)] = d
    keys = sorted(seen)
    n_read = sum(1 for k in keys if k[2] == 0)
    ps = np.array([(p << 9) | (r << 1) | t for p, r, t in keys], np.uint64)
    read_at, delta_at = iter(range(n_read)), iter(range(n_read, len(keys)))
    perm = np.array([next(delta_at) if t else next(read_at) for _, _, t in keys], np.int64)
    diff = np.array([seen[k] for k in keys], np.int64)
    return ps, perm, diff, n_read, 1, 64 if one_partition else 9


def run(kernel_count, kernel_fill, args):
    m, least, old, new = kernel_count(*args)
    at, number, sign = (np.zeros(m, np.int64) for _ in range(3))
    kernel_fill(*args, at, number, sign)
    return list(zip(at.tolist(), number.tolist(), sign.tolist())), int(least), int(old), int(new)


rows = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 1), st.integers(-3, 3)),
                max_size=40)


@settings(max_examples=300, deadline=None)
@given(rows, st.booleans(), st.booleans())
def test_kernels_match_the_reference(rs, read_is_after, one_partition):
    args = (*entries(rs, one_partition), read_is_after)
    want = row_number_change_ref(*args)
    for count, fill in ((row_number_count, row_number_fill), (py(row_number_count), py(row_number_fill))):
        got = run(count, fill, args)
        assert got[1:] == want[1:]
        if want[1] >= 0:  # a negative multiplicity: the caller raises, the entries mean nothing
            assert got[0] == want[0]


def test_only_moved_numbers_are_emitted():
    # one partition of 1,000 rows held once; a row inserted at place 901: the 100 rows after
    # it move (a retraction and an insertion each), the new row is inserted -- 201 entries,
    # whatever the partition's size
    n = 1000
    rs = [(0, 2 * i, 0, 1) for i in range(n)] + [(0, 2 * 900 - 1, 1, 1)]
    ps = np.array(sorted(((r << 1) | t) for _, r, t, _ in rs), np.uint64)
    perm = np.array([n if int(x) & 1 else int(x) >> 2 for x in ps], np.int64)
    perm[perm < n] = np.arange(n)
    args = (ps, perm, np.ones(n + 1, np.int64), n, 1, 64, False)
    m, least, old, new = row_number_count(*args)
    assert (m, least, old, new) == (201, 0, n, n + 1)
    got = run(row_number_count, row_number_fill, args)[0]
    assert got == row_number_change_ref(*args)[0]
    assert got[0][1:] == (901, 1) and got[1][1:] == (901, -1) and got[2][1:] == (902, 1)
