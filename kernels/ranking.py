"""``row_number()``'s change over sorted rows: the numbers each row leaves and takes.

Design
------
A ranking window's step (``colmz.dataflow.ranking``) sorts the affected partitions' rows read
from the input arrangement (tagged 0) with the step's delta (tagged 1), each row packed into
one ``uint64`` key (partition in the top field from ``part_shift`` up, the row's words below,
the tag in the lowest ``row_shift`` bits). The entries come sorted as ``words``: either the
key shifted left by ``index_bits`` with the entry's position in the low bits (one integer
sort gives order and permutation), or (``index_bits`` 0) the keys themselves with the
positions in ``perm``. ``diff`` is indexed by position; a position from ``n_read`` on is a
delta entry.

The kernels walk the sorted entries once: equal keys' diffs add up (the sort's consolidation,
done here: no array of consolidated rows is made), a row's read entries then its delta
entries (the tag orders them) give its multiplicity before and after the delta
(``read_is_after``: the read holds the delta already, so before is read − delta), and per
partition their running sums place each row: it held the numbers ``[a, b)`` and holds
``[c, d)``. The change is, per row, the numbers ``[a, b) \\ [c, d)`` retracted and ``[c, d)
\\ [a, b)`` inserted -- in ascending number order, rows in their sorted order, which is the
consolidated order of the answer ``(row, number)``.

One pass counts (:func:`row_number_count`: the entries to emit, the least multiplicity and the
totals before and after, for the caller's checks), a second emits (:func:`row_number_fill`)
into arrays of exactly that size: per entry its partition (the key's field plus
``part_low``), the position of one of its row's entries (whose payload it is), its number
(1-based) and its sign. No intermediate array per row, no sort of the emitted change. Work:
linear in the entries plus the numbers emitted.

Spec (kernel / reference)
-------------------------
``positions_below(keys, bits, out)`` fills the first form of ``words`` (reference: ``keys <<
bits | arange``).
``row_number_count(words, index_bits, perm, diff, n_read, row_shift, part_shift,
read_is_after)`` -> ``(emitted, least multiplicity, total before, total after)``;
``row_number_fill(words, index_bits, perm, diff, n_read, row_shift, part_shift, part_low,
read_is_after, out_part, out_src, out_number, out_sign)``; ``row_number_change_ref`` gives
both answers in plain Python (entries as ``(partition, src, number, sign)``). ``part_shift``
64 means one partition (no partition field).
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import jit

__all__ = ["positions_below", "row_number_change_ref", "row_number_count", "row_number_fill"]


@jit
def positions_below(keys, bits, out):
    """``out[i] = keys[i] << bits | i``: each key with its position in the low ``bits`` (which
    hold every position), to be sorted as plain integers -- written into ``out`` (a caller's
    reused scratch array: no fresh temporaries).

    >>> import numpy as np
    >>> out = np.zeros(3, np.uint64)
    >>> positions_below(np.array([5, 1, 5], np.uint64), 2, out); out.tolist()
    [20, 5, 22]
    """
    for i in range(keys.shape[0]):
        out[i] = (keys[i] << np.uint64(bits)) | np.uint64(i)


@jit(inline=True)
def _entry(words, index_bits, perm, i):
    """``(key, position)`` of sorted entry ``i``."""
    if index_bits:
        w = words[i]
        return w >> np.uint64(index_bits), np.int64(w & np.uint64((1 << index_bits) - 1))
    return words[i], np.int64(perm[i])


@jit
def _walk(words, index_bits, perm, diff, n_read, row_shift, part_shift, part_low, read_is_after, fill,
          out_part, out_src, out_number, out_sign):
    n = words.shape[0]
    emitted = 0
    least = 0
    total_old = 0
    total_new = 0
    start_old = 0
    start_new = 0
    prev_part = np.uint64(0)
    i = 0
    while i < n:
        key, src = _entry(words, index_bits, perm, i)
        row = key >> np.uint64(row_shift)
        part = key >> np.uint64(part_shift) if part_shift < 64 else np.uint64(0)
        if i == 0 or part != prev_part:
            start_old = 0
            start_new = 0
        prev_part = part
        c0 = 0  # the read entries' diffs
        c1 = 0  # the delta entries'
        j = i
        while j < n:
            k, at = _entry(words, index_bits, perm, j)
            if (k >> np.uint64(row_shift)) != row:
                break
            if at >= n_read:
                c1 += diff[at]
            else:
                c0 += diff[at]
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
                        q = np.int64(part) + part_low
                        for x in range(lo, hi):
                            out_part[emitted] = q
                            out_src[emitted] = src
                            out_number[emitted] = x + 1
                            out_sign[emitted] = sign
                            emitted += 1
                    else:
                        emitted += hi - lo
        i = j
    return emitted, least, total_old, total_new


@jit
def row_number_count(words, index_bits, perm, diff, n_read, row_shift, part_shift, read_is_after):
    """The entries :func:`row_number_fill` emits, the least multiplicity before or after
    (negative: a retraction of rows not held), and the multiplicities' totals before and after.

    >>> import numpy as np
    >>> keys = np.array([2, 3, 4], np.uint64)  # rows 1 (read and delta) and 2 (read), tag in bit 0
    >>> row_number_count(keys, 0, np.array([0, 2, 1]), np.array([1, 1, 1]), 2, 1, 64, False)
    (3, 0, 2, 3)
    """
    z = np.zeros(0, np.int64)
    return _walk(words, index_bits, perm, diff, n_read, row_shift, part_shift, 0, read_is_after, False, z, z, z, z)


@jit
def row_number_fill(words, index_bits, perm, diff, n_read, row_shift, part_shift, part_low, read_is_after,
                    out_part, out_src, out_number, out_sign):
    """Fill the change :func:`row_number_count` counted (module docstring).

    >>> import numpy as np
    >>> keys = np.array([2, 3, 4], np.uint64)
    >>> part, src, number, sign = (np.zeros(3, np.int64) for _ in range(4))
    >>> _ = row_number_fill(keys, 0, np.array([0, 2, 1]), np.array([1, 1, 1]), 2, 1, 64, 7, False,
    ...                     part, src, number, sign)
    >>> part.tolist(), src.tolist(), number.tolist(), sign.tolist()
    ([7, 7, 7], [0, 1, 1], [2, 2, 3], [1, -1, 1])
    """
    return _walk(words, index_bits, perm, diff, n_read, row_shift, part_shift, part_low, read_is_after, True,
                 out_part, out_src, out_number, out_sign)


def row_number_change_ref(words, index_bits, perm, diff, n_read, row_shift, part_shift, part_low, read_is_after):
    """Reference: ``(entries as (partition, src, number, sign), least, total before, total
    after)`` by numbering each partition's rows before and after in full and comparing the sets
    (``src`` the position of the row's first sorted entry)."""
    ents = []
    for i, w in enumerate(words):
        w = int(w)
        ents.append((w >> index_bits, w & ((1 << index_bits) - 1)) if index_bits else (w, int(perm[i])))
    rows: list = []  # (src, partition, old, new)
    i = 0
    while i < len(ents):
        row = ents[i][0] >> row_shift
        part = ents[i][0] >> part_shift if part_shift < 64 else 0
        c = [0, 0]
        j = i
        while j < len(ents) and ents[j][0] >> row_shift == row:
            c[int(ents[j][1] >= n_read)] += int(diff[ents[j][1]])
            j += 1
        old, new = (c[0] - c[1], c[0]) if read_is_after else (c[0], c[0] + c[1])
        rows.append((ents[i][1], part, old, new))
        i = j
    out = []
    placed: dict = {}
    for src, part, old, new in rows:
        a, c = placed.get(part, (0, 0))
        held, holds = set(range(a, a + max(old, 0))), set(range(c, c + max(new, 0)))
        placed[part] = (a + old, c + new)
        q = part + part_low
        out.extend(sorted([(q, src, x + 1, -1) for x in held - holds] + [(q, src, x + 1, 1) for x in holds - held],
                          key=lambda e: e[2]))
    least = min([0] + [min(o, n) for _, _, o, n in rows])
    return out, least, sum(r[2] for r in rows), sum(r[3] for r in rows)
