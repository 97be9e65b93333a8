"""Resumable fueled 2-way merge of ``(data, time)``-sorted runs.

Design
------
The spine (``colmz.spine``) merges two adjacent batches a little at a time: every call is
given a *budget* of output updates and must return after producing at most that many, leaving
an explicit cursor so the next call continues where this one stopped. This module is that
merge.

Inputs are two runs ``A`` and ``B``, each sorted by ``(key words..., time)`` and consolidated
(each ``(key, time)`` at most once, no zero diff). Rows compare lexicographically as
``(key words..., time)``. Logical compaction is applied on the way: every time ``t`` is read
as ``max(t, since)``. That keeps each run sorted -- ``max(., since)`` is monotone within a key
-- but it makes *equal neighbours*: all of a key's times below ``since`` collapse onto
``since``. Those must be summed into one output row.

The kernel therefore works in whole *output groups*: one step picks the smallest
``(key, advanced time)`` among the two run heads, consumes every row of ``A`` and every row
of ``B`` with exactly that key and advanced time (each a contiguous range, because the runs
are sorted), sums their diffs and writes one output row when the sum is non-zero. Because a
step never stops inside a group, the cursor always sits on a group boundary and rows equal
across the boundary between two calls cannot exist: nothing needs to be held back.

Budget and cost. Fuel is counted in output rows *written* (as differential dataflow's batch
mergers count it, ``differential-dataflow/src/trace/implementations/ord_neu.rs``), so a merge
whose inputs cancel out costs little fuel and still finishes once both inputs are exhausted. A call can overshoot its reads (not its writes) by one group when a key
has many stale times; reads are visible to the caller through the cursor.

Diff sums are exact: additions wrap in ``int64`` and count how often they wrapped, and a group
whose true sum leaves the ``int64`` range raises ``OverflowError`` without moving the cursor
(the cursor is written back only when a call returns normally).

Spec (kernel / reference)
-------------------------
``fueled_merge(ak, at, ad, bk, bt, bd, since, cursor, ok, ot, od, budget)`` -> ``produced``.
``ak``/``bk`` are ``(n, W)`` ``uint64`` key matrices of one width (``W >= 0``), ``at``/``bt``
``uint64`` times, ``ad``/``bd`` ``int64`` diffs, ``since`` a ``uint64`` (0 = no compaction),
``cursor`` an ``int64[3]`` ``(i, j, o)``: the next row of ``A``, the next row of ``B`` and the
number of rows already written to the preallocated outputs ``ok`` (``(cap, W)``), ``ot``,
``od`` (``cap >= len(A) + len(B)``). The call writes rows ``o .. o + produced`` and advances
the cursor. It stops as soon as ``produced == budget`` (a ``budget <= 0`` does nothing) or both
runs are exhausted; :func:`is_done` tells the latter. ``fueled_merge_1`` is the same contract
for one-word keys given as 1-D arrays (``ak``, ``bk``, ``ok`` of shape ``(n,)``), the fast path;
both are compiled from one body, specialised on the key shape (``_fueled_merge_for``).
``fueled_merge_ref`` is the pure-Python reference of :func:`fueled_merge`.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import jit

__all__ = [
    "CURSOR_LEN",
    "fueled_merge",
    "fueled_merge_1",
    "fueled_merge_ref",
    "is_done",
    "new_cursor",
    "run_merge",
]

#: Length of the cursor array: ``(i, j, o)``.
CURSOR_LEN = 3


def new_cursor() -> np.ndarray:
    """A fresh cursor ``(0, 0, 0)``.

    >>> new_cursor().tolist()
    [0, 0, 0]
    """
    return np.zeros(CURSOR_LEN, np.int64)


def is_done(cursor: np.ndarray, na: int, nb: int) -> bool:
    """Whether a merge with runs of lengths ``na`` and ``nb`` has consumed both.

    >>> is_done(np.array([2, 3, 4]), 2, 3)
    True
    """
    return int(cursor[0]) >= na and int(cursor[1]) >= nb


@jit
def _row_eq(x, p, y, q):
    # Rows x[p] and y[q] of two key matrices of one width are equal. (An explicit loop:
    # Numba compiles it to straight-line compares, where all() over a generator would not.)
    for c in range(x.shape[1]):  # noqa: SIM110
        if x[p, c] != y[q, c]:
            return False
    return True


@jit
def _row_lt(x, p, tx, y, q, ty):
    # (x[p], tx) < (y[q], ty) lexicographically.
    for c in range(x.shape[1]):
        a = x[p, c]
        b = y[q, c]
        if a != b:
            return a < b
    return tx < ty


def _fueled_merge_for(words: int, name: str):
    """The fueled merge for one-word keys (``words == 1``: 1-D key arrays) or for key matrices
    of any width (``words == 2``), as a plain function for :func:`jit`.

    One body for both: ``words`` is a constant of the closure, so Numba prunes the branches
    on it before typing and each entry point compiles to a loop with only its own key
    handling -- a scalar key kept in a register for one word (tested first in a group, being
    the cheaper test), a key row written to ``ok[o]`` and compared word by word (after the
    time) for a matrix. Numba caches each (the closure's constant is part of the cache key).
    """

    def merge(ak, at, ad, bk, bt, bd, since, cursor, ok, ot, od, budget):
        i = cursor[0]
        j = cursor[1]
        o = cursor[2]
        na = at.shape[0]
        nb = bt.shape[0]
        produced = 0
        while produced < budget:
            if i < na:
                t = at[i]
                if t < since:
                    t = since
                if words == 1:
                    k = ak[i]
                else:
                    from_a = True
                    g = i
                if j < nb:
                    tb = bt[j]
                    if tb < since:
                        tb = since
                    if words == 1:
                        kb = bk[j]
                        if kb < k or (kb == k and tb < t):
                            k = kb
                            t = tb
                    elif _row_lt(bk, j, tb, ak, i, t):
                        from_a = False
                        g = j
                        t = tb
            elif j < nb:
                t = bt[j]
                if t < since:
                    t = since
                if words == 1:
                    k = bk[j]
                else:
                    from_a = False
                    g = j
            else:
                break
            if words != 1:
                # The group key goes to ok[o] (a scratch write: o only advances if the sum is kept).
                if from_a:
                    for c in range(ak.shape[1]):
                        ok[o, c] = ak[g, c]
                else:
                    for c in range(bk.shape[1]):
                        ok[o, c] = bk[g, c]
            acc = np.int64(0)
            wraps = 0
            while i < na:
                # The group's rows: one word tests the key first (the cheaper test), a key
                # matrix the time first. (A branch on the constant alone: Numba prunes it.)
                if words == 1:
                    if ak[i] != k or (at[i] if at[i] > since else since) != t:
                        break
                elif (at[i] if at[i] > since else since) != t or not _row_eq(ak, i, ok, o):
                    break
                d = ad[i]
                s = acc + d
                if ((acc ^ s) & (d ^ s)) < 0:
                    wraps += 1 if d > 0 else -1
                acc = s
                i += 1
            while j < nb:
                # The group's rows: one word tests the key first (the cheaper test), a key
                # matrix the time first. (A branch on the constant alone: Numba prunes it.)
                if words == 1:
                    if bk[j] != k or (bt[j] if bt[j] > since else since) != t:
                        break
                elif (bt[j] if bt[j] > since else since) != t or not _row_eq(bk, j, ok, o):
                    break
                d = bd[j]
                s = acc + d
                if ((acc ^ s) & (d ^ s)) < 0:
                    wraps += 1 if d > 0 else -1
                acc = s
                j += 1
            if wraps != 0:
                raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
            if acc != 0:
                if words == 1:
                    ok[o] = k
                ot[o] = t
                od[o] = acc
                o += 1
                produced += 1
        cursor[0] = i
        cursor[1] = j
        cursor[2] = o
        return produced

    merge.__name__ = merge.__qualname__ = name
    merge.__doc__ = (
        "One-word-key fueled merge (keys as 1-D ``uint64``); see the module spec."
        if words == 1 else "Fueled merge of runs with ``(n, W)`` key matrices; see the module spec.")
    return merge


#: The one-word fast path and the general merge: one body (see ``_fueled_merge_for``).
fueled_merge_1 = jit(_fueled_merge_for(1, "fueled_merge_1"))
fueled_merge = jit(_fueled_merge_for(2, "fueled_merge"))


def fueled_merge_ref(ak, at, ad, bk, bt, bd, since, cursor, ok, ot, od, budget):
    """Pure-Python reference of :func:`fueled_merge` (same arguments, same effects).

    It enumerates the distinct ``(key, advanced time)`` groups of what remains of both runs
    in sorted order and takes each group's rows off the fronts of the runs.

    >>> k = lambda *xs: np.array([[x] for x in xs], np.uint64)
    >>> u = lambda *xs: np.array(xs, np.uint64)
    >>> i = lambda *xs: np.array(xs, np.int64)
    >>> cur = new_cursor()
    >>> ok, ot, od = np.zeros((4, 1), np.uint64), np.zeros(4, np.uint64), np.zeros(4, np.int64)
    >>> fueled_merge_ref(k(1, 1, 2), u(0, 1, 0), i(1, 1, 5), k(1, 2), u(3, 0), i(1, -5),
    ...                  2, cur, ok, ot, od, budget=10)
    2
    >>> cur.tolist(), ok[:2].ravel().tolist(), ot[:2].tolist(), od[:2].tolist()
    ([3, 2, 2], [1, 1], [2, 3], [2, 1])
    """
    i, j, o = (int(x) for x in cursor)
    s = int(since)

    def rows(keys, time, start):
        return [(tuple(int(x) for x in keys[r]), max(int(time[r]), s)) for r in range(start, len(time))]

    ra = rows(ak, at, i)
    rb = rows(bk, bt, j)
    produced = 0
    pa = pb = 0
    for group in sorted(set(ra) | set(rb)):
        if produced >= max(int(budget), 0):
            break
        total = 0
        while pa < len(ra) and ra[pa] == group:
            total += int(ad[i + pa])
            pa += 1
        while pb < len(rb) and rb[pb] == group:
            total += int(bd[j + pb])
            pb += 1
        if not -(2**63) <= total < 2**63:
            raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
        if total != 0:
            ok[o] = group[0]
            ot[o] = group[1]
            od[o] = total
            o += 1
            produced += 1
    cursor[0], cursor[1], cursor[2] = i + pa, j + pb, o
    return produced


def run_merge(a, b, since: int, cursor: np.ndarray, out, budget: int) -> int:
    """Advance the merge of runs ``a`` and ``b`` (``(keys, time, diff)``) into ``out``.

    Dispatches to :func:`fueled_merge_1` for one-word keys and :func:`fueled_merge`
    otherwise; ``budget`` is clipped to the ``int64`` range. Returns the rows produced.

    >>> a = (np.array([[1], [3]], np.uint64), np.array([0, 0], np.uint64), np.array([1, 1]))
    >>> b = (np.array([[2]], np.uint64), np.array([0], np.uint64), np.array([1]))
    >>> out = (np.empty((3, 1), np.uint64), np.empty(3, np.uint64), np.empty(3, np.int64))
    >>> cur = new_cursor()
    >>> run_merge(a, b, 0, cur, out, budget=2), cur.tolist()
    (2, [1, 1, 2])
    >>> run_merge(a, b, 0, cur, out, budget=2), out[0].ravel().tolist()
    (1, [1, 2, 3])
    """
    ak, at, ad = a
    bk, bt, bd = b
    ok, ot, od = out
    budget = np.int64(min(max(int(budget), 0), 2**63 - 1))
    s = np.uint64(since)
    if ak.shape[1] == 1:
        # A C-contiguous (n, 1) matrix reshapes to a contiguous 1-D view: no copy.
        return int(fueled_merge_1(
            ak.reshape(-1), at, ad, bk.reshape(-1), bt, bd, s, cursor, ok.reshape(-1), ot, od,
            budget,
        ))
    return int(fueled_merge(ak, at, ad, bk, bt, bd, s, cursor, ok, ot, od, budget))
