"""A small read in one compiled call: gather two runs, sort, consolidate, cut at the upper.

Design
------
A sink's tick reads a handful of updates: the batch it just inserted, perhaps a few staged
from the last read (``colmz.correction``). The general consolidation
(``colmz.kernels.consolidate.sort_consolidate``) plans a packing, sorts and unpacks in several
calls, and the caller then concatenates its inputs first and binary-searches the upper after;
at 16 updates a tick each of those Python-level calls costs more than the work. This kernel
does the whole read of at most a few dozen updates in one call:

1. gather the rows of run ``a`` then run ``b``, times advanced to ``since``
   (``max(time, since)``);
2. insertion-sort their row numbers by ``(time, key words)`` -- the inputs are short and
   mostly sorted (a staged remainder is sorted, a batch is usually in one time), so this is
   the cheapest sort there is at this size;
3. write each run of equal ``(time, keys)`` to the output once, with its summed diff,
   dropping zero sums;
4. find the first row at or beyond ``upper``.

The caller allocates the outputs (``len(a) + len(b)`` rows): boxing arrays made inside a
compiled function costs more per array than the whole read, so the kernel returns integers
only. The two inputs are separate arguments, not one concatenated run, so the common read
(a staged remainder plus one new batch) concatenates nothing.

Spec (kernel / reference)
-------------------------
``sort_consolidate_cut(ak, at, ad, bk, bt, bd, since, upper, bounded, ok, ot, od)`` ->
``(m, cut, negatable)``: rows ``[0, m)`` of ``ok``, ``ot``, ``od`` hold the consolidated rows
of both runs, times advanced to ``since``, sorted by ``(time, keys)``; ``cut`` is the first
row with time ``>= upper`` (``m`` when ``bounded`` is false: no upper); ``negatable`` is false
when a diff of rows ``[0, cut)`` is ``-2**63``, which cannot be negated within ``int64``.
``m == -1`` when a sum leaves ``int64`` (the outputs then hold nothing meaningful). The
reference is ``sort_consolidate_cut_ref`` (Python ints, a sort by tuples).
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import jit

__all__ = ["sort_consolidate_cut", "sort_consolidate_cut_ref"]

_I64_MIN = -(2**63)


@jit
def sort_consolidate_cut(ak, at, ad, bk, bt, bd, since, upper, bounded, ok, ot, od):
    """Sort and consolidate runs ``a`` and ``b`` into ``ok, ot, od``; cut at ``upper``.

    >>> import numpy as np
    >>> ak = np.array([[3], [1]], np.uint64); at = np.array([5, 2], np.uint64)
    >>> ad = np.array([1, 1], np.int64)
    >>> bk = np.array([[1]], np.uint64); bt = np.array([4], np.uint64); bd = np.array([-1])
    >>> ok = np.empty((3, 1), np.uint64); ot = np.empty(3, np.uint64); od = np.empty(3, np.int64)
    >>> sort_consolidate_cut(ak, at, ad, bk, bt, bd, np.uint64(4), np.uint64(5), True, ok, ot, od)
    (1, 0, True)
    >>> ok[:1].ravel().tolist(), ot[:1].tolist(), od[:1].tolist()
    ([3], [5], [1])
    """
    na = at.shape[0]
    n = na + bt.shape[0]
    w = ok.shape[1]
    # Gather both runs (times advanced) into one, then insertion-sort row numbers: the rows
    # move once, into the output, instead of at every step of the sort.
    kk = np.empty((n, w), np.uint64)
    tt = np.empty(n, np.uint64)
    dd = np.empty(n, np.int64)
    for i in range(n):
        if i < na:
            t = at[i]
            dd[i] = ad[i]
            for c in range(w):
                kk[i, c] = ak[i, c]
        else:
            t = bt[i - na]
            dd[i] = bd[i - na]
            for c in range(w):
                kk[i, c] = bk[i - na, c]
        tt[i] = t if t > since else since
    idx = np.empty(n, np.int64)
    for i in range(n):
        x = i
        tx = tt[x]
        j = i - 1
        while j >= 0:
            y = idx[j]
            # Is row x before row y in (time, key words)? (Written out: a helper call per
            # comparison costs more than the comparison.)
            ty = tt[y]
            if tx != ty:
                before = tx < ty
            else:
                before = False
                for c in range(w):
                    if kk[x, c] != kk[y, c]:
                        before = kk[x, c] < kk[y, c]
                        break
            if not before:
                break
            idx[j + 1] = y
            j -= 1
        idx[j + 1] = x
    # Consolidate runs of equal rows into the output.
    m = 0
    i = 0
    while i < n:
        x = idx[i]
        acc = dd[x]
        j = i + 1
        while j < n:
            y = idx[j]
            if tt[y] != tt[x]:
                break
            same = True
            for c in range(w):
                if kk[y, c] != kk[x, c]:
                    same = False
                    break
            if not same:
                break
            b = dd[y]
            s = acc + b
            if ((acc ^ s) & (b ^ s)) < 0:
                return -1, 0, False  # a sum leaves int64
            acc = s
            j += 1
        if acc != 0:
            for c in range(w):
                ok[m, c] = kk[x, c]
            ot[m] = tt[x]
            od[m] = acc
            m += 1
        i = j
    cut = m
    if bounded:
        cut = 0
        while cut < m and ot[cut] < upper:
            cut += 1
    negatable = True
    for i in range(cut):
        if od[i] == _I64_MIN:
            negatable = False
    return m, cut, negatable


def sort_consolidate_cut_ref(ak, at, ad, bk, bt, bd, since, upper, bounded):
    """Reference for :func:`sort_consolidate_cut`: returns ``(keys, time, diff, cut, negatable)``
    as new arrays (rows ``[0, m)``), or ``None`` when a sum leaves ``int64``.

    >>> k = np.array([[2], [2]], np.uint64); t = np.array([0, 3], np.uint64)
    >>> e = np.empty((0, 1), np.uint64)
    >>> keys, time, diff, cut, ok = sort_consolidate_cut_ref(
    ...     k, t, np.array([1, 1]), e, e[:, 0], np.empty(0, np.int64), 3, 9, True)
    >>> keys.ravel().tolist(), time.tolist(), diff.tolist(), cut, ok
    ([2], [3], [2], 1, True)
    """
    w = ak.shape[1]
    sums: dict[tuple, int] = {}
    for keys, time, diff in ((ak, at, ad), (bk, bt, bd)):
        for i in range(len(time)):
            row = (max(int(time[i]), int(since)), *(int(x) for x in keys[i]))
            sums[row] = sums.get(row, 0) + int(diff[i])
    rows = sorted((r, d) for r, d in sums.items() if d != 0)
    if any(not _I64_MIN <= d < 2**63 for _, d in rows):
        return None
    keys = np.array([r[1:] for r, _ in rows], np.uint64).reshape(len(rows), w)
    time = np.array([r[0] for r, _ in rows], np.uint64)
    diff = np.array([d for _, d in rows], np.int64)
    cut = int(np.searchsorted(time, np.uint64(upper))) if bounded else len(rows)
    return keys, time, diff, cut, bool(all(int(d) != _I64_MIN for d in diff[:cut]))
