"""``row_number()``'s change over sorted, consolidated rows: the numbers each row leaves and takes.

Design
------
A ranking window's step (``colmz.dataflow.ranking``) sorts and consolidates the affected
partitions' rows read from the input arrangement (tagged 0) with the step's delta (tagged 1),
each row packed into one ``uint64`` (partition in the top field, the row's words below, the tag
in the lowest ``row_shift`` bits). A row then has a read entry, a delta entry, or both, adjacent.
Its multiplicity before and after the delta follow (``read_is_after``: the read holds the
delta already, so before is read − delta), and per partition their running sums place each
row: it held the numbers ``[a, b)`` and holds ``[c, d)``. The change is, per row, the numbers
``[a, b) \\ [c, d)`` retracted and ``[c, d) \\ [a, b)`` inserted -- in ascending number order,
rows in their sorted order, which is the consolidated order of the answer ``(row, number)``.

One pass counts (:func:`row_number_count`: the entries to emit, the least multiplicity and the
totals before and after, for the caller's checks), a second emits
(:func:`row_number_fill`) into arrays of exactly that size: no intermediate array per row, no
sort of the emitted change. Work: linear in the entries plus the numbers emitted.

Spec (kernel / reference)
-------------------------
``row_number_count(ps, perm, diff, n_read, row_shift, part_shift, read_is_after)`` ->
``(emitted, least multiplicity, total before, total after)``;
``row_number_fill(ps, perm, diff, n_read, row_shift, part_shift, read_is_after, out_at,
out_number, out_sign)`` fills, per emitted entry, the position of its row's first entry, its
number (1-based) and its sign; ``row_number_change_ref`` gives both answers in plain Python.
``part_shift`` 64 means one partition (no partition field).
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import jit

__all__ = ["row_number_change_ref", "row_number_count", "row_number_fill"]


@jit
def _walk(ps, perm, diff, n_read, row_shift, part_shift, read_is_after, fill, out_at, out_number, out_sign):
    n = ps.shape[0]
    emitted = 0
    least = 0
    total_old = 0
    total_new = 0
    start_old = 0
    start_new = 0
    prev_part = np.uint64(0)
    i = 0
    while i < n:
        key = ps[i] >> np.uint64(row_shift)
        part = ps[i] >> np.uint64(part_shift) if part_shift < 64 else np.uint64(0)
        if i == 0 or part != prev_part:
            start_old = 0
            start_new = 0
        prev_part = part
        c0 = 0  # the read entry's diff
        c1 = 0  # the delta entry's diff
        if perm[i] >= n_read:
            c1 = diff[i]
            j = i + 1
        else:
            c0 = diff[i]
            j = i + 1
            if j < n and perm[j] >= n_read and (ps[j] >> np.uint64(row_shift)) == key:
                c1 = diff[j]
                j += 1
        if read_is_after:
            old = c0 - c1
            new = c0
        else:
            old = c0
            new = c0 + c1
        least = min(least, old, new)
        total_old += old
        total_new += new
        a = start_old
        b = a + old
        c = start_new
        d = c + new
        start_old = b
        start_new = d
        if a != c or b != d:
            # retracted [a, min(b, c)) or inserted [c, min(d, a)) (at most one is non-empty,
            # both start at min(a, c)), then retracted [max(a, d), b) or inserted [max(c, b), d)
            for lo, hi, sign in ((a, min(b, c), -1), (c, min(d, a), 1), (max(a, d), b, -1), (max(c, b), d, 1)):
                if hi > lo:
                    if fill:
                        for x in range(lo, hi):
                            out_at[emitted] = i
                            out_number[emitted] = x + 1
                            out_sign[emitted] = sign
                            emitted += 1
                    else:
                        emitted += hi - lo
        i = j
    return emitted, least, total_old, total_new


@jit
def row_number_count(ps, perm, diff, n_read, row_shift, part_shift, read_is_after):
    """The entries :func:`row_number_fill` emits, the least multiplicity before or after
    (negative: a retraction of rows not held), and the multiplicities' totals before and after.

    >>> import numpy as np
    >>> ps = np.array([2, 3, 4], np.uint64)  # rows 1 (read and delta) and 2 (read), tag in bit 0
    >>> row_number_count(ps, np.array([0, 2, 1]), np.array([1, 1, 1]), 2, 1, 64, False)
    (3, 0, 2, 3)
    """
    z = np.zeros(0, np.int64)
    return _walk(ps, perm, diff, n_read, row_shift, part_shift, read_is_after, False, z, z, z)


@jit
def row_number_fill(ps, perm, diff, n_read, row_shift, part_shift, read_is_after, out_at, out_number, out_sign):
    """Fill the change :func:`row_number_count` counted (module docstring).

    >>> import numpy as np
    >>> ps = np.array([2, 3, 4], np.uint64)
    >>> at, number, sign = (np.zeros(3, np.int64) for _ in range(3))
    >>> _ = row_number_fill(ps, np.array([0, 2, 1]), np.array([1, 1, 1]), 2, 1, 64, False, at, number, sign)
    >>> at.tolist(), number.tolist(), sign.tolist()
    ([0, 2, 2], [2, 2, 3], [1, -1, 1])
    """
    return _walk(ps, perm, diff, n_read, row_shift, part_shift, read_is_after, True, out_at, out_number, out_sign)


def row_number_change_ref(ps, perm, diff, n_read, row_shift, part_shift, read_is_after):
    """Reference: ``(entries as (at, number, sign), least, total before, total after)`` by
    numbering each partition's rows before and after in full and comparing the sets."""
    ps = [int(x) for x in ps]
    rows: list = []  # (first entry, partition, old, new)
    i = 0
    while i < len(ps):
        key = ps[i] >> row_shift
        part = ps[i] >> part_shift if part_shift < 64 else 0
        c = [0, 0]
        j = i
        while j < len(ps) and ps[j] >> row_shift == key and (part_shift >= 64 or ps[j] >> part_shift == part):
            c[int(perm[j] >= n_read)] += int(diff[j])
            j += 1
        old, new = (c[0] - c[1], c[0]) if read_is_after else (c[0], c[0] + c[1])
        rows.append((i, part, old, new))
        i = j
    out = []
    placed: dict = {}
    for first, part, old, new in rows:
        a, c = placed.get(part, (0, 0))
        held, holds = set(range(a, a + max(old, 0))), set(range(c, c + max(new, 0)))
        placed[part] = (a + old, c + new)
        out.extend(sorted([(first, x + 1, -1) for x in held - holds] + [(first, x + 1, 1) for x in holds - held],
                          key=lambda e: e[1]))
    least = min([0] + [min(o, n) for _, _, o, n in rows])
    return out, least, sum(r[2] for r in rows), sum(r[3] for r in rows)
