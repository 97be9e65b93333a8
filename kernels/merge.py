"""k-way merge of sorted, consolidated runs, consolidating as it goes.

Design
------
Merging is how colmz's structures combine what they hold: the correction buffer merges the
chains below a read upper, the spine merges batches of a layer. Every input run is sorted by
the same order (``"time"`` or ``"data"``) and consolidated; the output is one run with the same
two properties.

The runs are packed with one shared :class:`~colmz.kernels.sort.PackPlan` (ranges taken over all
runs), so each row becomes a ``uint64`` whose order is the row order, with the diff riding in
the low bits. :func:`merge_tree` then merges the runs by rounds of branch-free two-way merges
-- ``ceil(log2 K)`` sequential passes, ``O(N log K)`` in all -- and the consolidation passes of
``colmz.kernels.consolidate`` sum equal keys and unpack. (A binary heap of run heads,
:func:`merge_sorted_words`, does the same comparisons but mispredicts a branch on most of them;
it is kept as the streaming alternative and for the tests.) Rows whose fields and diff do not fit
one word take the general path: concatenate and sort (the sort is a stable radix sort, so this
is still ``O(N)`` passes).

``since`` advances times on the way in. That keeps a run sorted when the run is sorted by
``(data, time)`` (``max(t, s)`` is monotone within a data group) but not when it is sorted by
``(time, data)``; time-ordered runs that hold several stale times must be cut into per-time
runs first (``colmz.kernels.advance``).

Spec (kernel / reference)
-------------------------
``merge_sorted_words(words, starts, ends, out)`` -> ``n``: the heap merge of the ascending
slices ``words[starts[r]:ends[r]]`` into ``out``. ``merge_tree(words, starts, ends, tmp)``: the
same by pairwise rounds (slices tile ``words``); returns whether the result is in ``tmp``. ``merge_runs(runs, order, since)`` /
``merge_runs_ref`` -> ``(keys, time, diff)``.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels import pool
from colmz.kernels.consolidate import (
    consolidate_ref,
    consolidate_sorted_words,
    finish_embedded,
    gather_rows,
    order_significance,
    read_only,
    sort_consolidate,
)
from colmz.kernels.decorators import jit
from colmz.kernels.sort import (
    RADIX_MSD_MIN,
    field_ranges_into,
    pack,
    pack_one_with_diff,
    plan_packing,
    unpack,
)

__all__ = [
    "merge_runs",
    "merge_runs_ref",
    "merge_sorted_words",
    "merge_sorted_words_ref",
    "merge_rows_tree",
    "merge_rows_tree_ref",
    "merge_tree",
]

# Below this many updates in total, merge_runs sorts the union instead of merging: the
# one-call small sort up to _TINY, the radix sort of one-word keys up to _SMALL.
_TINY = 48
_SMALL = 2048


@jit
def merge_sorted_words(words, starts, ends, out):
    """Merge the ascending slices ``words[starts[r]:ends[r]]`` into ``out``; return its length."""
    k = starts.shape[0]
    heap_val = np.empty(k, np.uint64)
    heap_run = np.empty(k, np.int64)
    pos = starts.copy()
    size = 0
    for r in range(k):
        if pos[r] < ends[r]:
            # sift up
            v = words[pos[r]]
            c = size
            size += 1
            while c > 0:
                p = (c - 1) >> 1
                if heap_val[p] <= v:
                    break
                heap_val[c] = heap_val[p]
                heap_run[c] = heap_run[p]
                c = p
            heap_val[c] = v
            heap_run[c] = r
    o = 0
    while size > 0:
        r = heap_run[0]
        out[o] = heap_val[0]
        o += 1
        p_r = pos[r] + 1
        pos[r] = p_r
        if p_r < ends[r]:
            v = words[p_r]
        else:
            size -= 1
            if size == 0:
                break
            v = heap_val[size]
            r = heap_run[size]
        # sift down the new head from the root
        c = 0
        while True:
            left = 2 * c + 1
            if left >= size:
                break
            m = left
            right = left + 1
            if right < size and heap_val[right] < heap_val[left]:
                m = right
            if heap_val[m] >= v:
                break
            heap_val[c] = heap_val[m]
            heap_run[c] = heap_run[m]
            c = m
        heap_val[c] = v
        heap_run[c] = r
    return o


@jit
def _merge2(src, a0, a1, b0, b1, dst, o):
    # Branch-free two-way merge of src[a0:a1] and src[b0:b1] into dst[o:]: the comparison
    # selects with arithmetic, so random interleavings cost no mispredictions.
    i = a0
    j = b0
    while i < a1 and j < b1:
        x = src[i]
        y = src[j]
        take_a = x <= y
        dst[o] = x if take_a else y
        i += np.int64(take_a)
        j += np.int64(1 - take_a)
        o += 1
    o = _copy_tail(src, i, a1, dst, o)
    return _copy_tail(src, j, b1, dst, o)


@jit
def _copy_tail(src, i, end, dst, o):
    # What is left of one input after the other ran out: dst[o:] = src[i:end].
    while i < end:
        dst[o] = src[i]
        i += 1
        o += 1
    return o


@jit
def _run_bounds(starts, ends):
    # Run r is [bounds[r], bounds[r + 1]); the runs tile the input in order.
    k = starts.shape[0]
    bounds = np.empty(k + 1, np.int64)
    for r in range(k):
        bounds[r] = starts[r]
    bounds[k] = ends[k - 1] if k > 0 else 0
    return bounds


@jit
def _halved(bounds, k):
    # After a round of pairwise merges run p of the next round is runs 2p and 2p + 1.
    nk = (k + 1) // 2
    out = np.empty(nk + 1, np.int64)
    for p in range(nk):
        out[p] = bounds[2 * p]
    out[nk] = bounds[k]
    return out


@jit
def merge_tree(words, starts, ends, tmp):
    """Merge the ascending slices ``words[starts[r]:ends[r]]`` by rounds of pairwise merges.

    The slices must tile ``words`` in order (``ends[r] == starts[r + 1]``). Each round halves
    the number of runs, ping-ponging between ``words`` and ``tmp``; ``ceil(log2 K)`` passes in
    all. Returns ``True`` when the merged result is in ``tmp`` (else in ``words``).
    """
    k = starts.shape[0]
    bounds = _run_bounds(starts, ends)
    src = words
    dst = tmp
    in_tmp = False
    while k > 1:
        nk = (k + 1) // 2
        for p in range(nk):
            a0 = bounds[2 * p]
            if 2 * p + 1 < k:
                _merge2(src, a0, bounds[2 * p + 1], bounds[2 * p + 1], bounds[2 * p + 2], dst, a0)
            else:
                _copy_tail(src, a0, bounds[2 * p + 1], dst, a0)
        bounds = _halved(bounds, k)
        k = nk
        src, dst = dst, src
        in_tmp = not in_tmp
    return in_tmp


def merge_sorted_words_ref(words, starts, ends):
    """Reference for :func:`merge_sorted_words`: concatenate and sort."""
    parts = [int(x) for s, e in zip(starts, ends) for x in words[s:e]]
    return np.array(sorted(parts), np.uint64)


def merge_runs(runs, order: str = "time", since: int | None = None):
    """Merge sorted, consolidated runs ``[(keys, time, diff), ...]`` into one.

    Each run is sorted by ``order`` and consolidated; all runs have the same key width. With
    ``since``, times are advanced to ``max(t, since)``, which must keep every run sorted.

    >>> import numpy as np
    >>> a = (np.array([[1], [4]], np.uint64), np.array([0, 0], np.uint64), np.array([1, 1]))
    >>> b = (np.array([[1], [2]], np.uint64), np.array([0, 0], np.uint64), np.array([-1, 5]))
    >>> k, t, d = merge_runs([a, b], order="data")
    >>> k.ravel().tolist(), d.tolist()
    ([2, 4], [5, 1])
    """
    w = runs[0][0].shape[1] if runs else 0
    # Read-only views: the kernels below are the ones sort_consolidate calls on read-only
    # inputs, and read-only is part of a Numba signature, so writable runs would compile
    # (and cache) a second copy of each.
    runs = [(read_only(k), read_only(t), read_only(d)) for k, t, d in runs if len(t)]
    if not runs:
        return np.empty((0, w), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64)
    if len(runs) == 1 and since is None:
        k, t, d = runs[0]
        return k.copy(), t.copy(), d.copy()
    n = sum(len(r[1]) for r in runs)
    if n <= _TINY:
        return _sort_union(runs, order, since)
    mins = np.full(w + 1, 2**64 - 1, np.uint64)
    maxs = np.zeros(w + 1, np.uint64)
    dmin, dmax = None, None
    flips = np.zeros(w, np.uint64)
    lo = np.empty(w + 1, np.uint64)
    hi = np.empty(w + 1, np.uint64)
    for keys, time, diff in runs:
        dl, dh = field_ranges_into(keys, time, diff, flips, lo, hi)
        np.minimum(mins, lo, out=mins)
        np.maximum(maxs, hi, out=maxs)
        dmin = int(dl) if dmin is None else min(dmin, int(dl))
        dmax = int(dh) if dmax is None else max(dmax, int(dh))
    s = 0 if since is None else since
    mins[w] = max(int(mins[w]), s)
    maxs[w] = max(int(maxs[w]), s)
    plan = plan_packing(mins, maxs, order_significance(order, w))
    key_bits = sum(int(x).bit_length() for x in plan.mask)
    diff_bits = (dmax - dmin).bit_length()
    if plan.n_words == 0:
        return _sort_union(runs, order, since)  # every row has one key: a single sum
    if plan.n_words > 1 or key_bits + diff_bits > 64:
        return _merge_rows(runs, n, plan, s, w, order, since)
    if n <= _SMALL:
        # Small one-word merges: the radix sort of the union beats per-run set-up.
        return _sort_union(runs, order, since)
    words = pool.scratch("merge_in", n, np.uint64)
    starts = np.empty(len(runs), np.int64)
    ends = np.empty(len(runs), np.int64)
    no_hist = np.zeros((0, 256), np.int64)
    at = 0
    for i, (keys, time, diff) in enumerate(runs):
        m = len(time)
        pack_one_with_diff(
            keys, time, diff, np.uint64(s), plan.src, plan.mins, plan.shift, flips,
            np.int64(dmin), diff_bits, words[at:at + m], no_hist, np.int64(RADIX_MSD_MIN),
        )
        starts[i] = at
        at += m
        ends[i] = at
    merged = pool.scratch("merge_out", n, np.uint64)
    if merge_tree(words, starts, ends, merged):
        pass
    else:
        merged = words
    try:
        return finish_embedded(merged, diff_bits, dmin, plan, w)
    except OverflowError:
        # A partial sum left int64; the exact reference decides whether a final sum does.
        return merge_runs_ref(runs, order, since)


def _sort_union(runs, order, since):
    keys = np.concatenate([r[0] for r in runs])
    time = np.concatenate([r[1] for r in runs])
    diff = np.concatenate([r[2] for r in runs])
    return sort_consolidate(keys, time, diff, order, since)


@jit
def _row_le(words, a, b):
    for c in range(words.shape[1]):
        x = words[a, c]
        y = words[b, c]
        if x != y:
            return x < y
    return True


@jit
def merge_rows_tree(words, starts, ends):
    """Permutation that merges the ascending row slices ``words[starts[r]:ends[r]]``.

    Rows of ``words`` (``(n, m)`` ``uint64``) compare lexicographically. The slices tile the
    rows in order. Rounds of pairwise merges of row indices: ``ceil(log2 K)`` passes of
    ``O(m)`` comparisons per row -- for keys wider than one word, where a radix sort would
    need eight passes per word.
    """
    n = words.shape[0]
    k = starts.shape[0]
    src = np.arange(n)
    dst = np.empty(n, np.int64)
    bounds = _run_bounds(starts, ends)
    while k > 1:
        nk = (k + 1) // 2
        for p in range(nk):
            a0 = bounds[2 * p]
            if 2 * p + 1 < k:
                a1 = bounds[2 * p + 1]
                b1 = bounds[2 * p + 2]
                i = a0
                j = a1
                o = a0
                while i < a1 and j < b1:
                    if _row_le(words, src[i], src[j]):
                        dst[o] = src[i]
                        i += 1
                    else:
                        dst[o] = src[j]
                        j += 1
                    o += 1
                o = _copy_tail(src, i, a1, dst, o)
                _copy_tail(src, j, b1, dst, o)
            else:
                _copy_tail(src, a0, bounds[2 * p + 1], dst, a0)
        bounds = _halved(bounds, k)
        k = nk
        src, dst = dst, src
    return src


def merge_rows_tree_ref(words, starts, ends):
    """Reference for :func:`merge_rows_tree`: a stable sort of the rows (ties: run order)."""
    rows = [tuple(int(x) for x in r) for r in words]
    return np.array(sorted(range(len(rows)), key=rows.__getitem__), np.int64)


def _merge_rows(runs, n, plan, since_value, w, order, since):
    # Keys wider than one packed word: pack every run's rows with the shared plan, merge row
    # indices, gather, consolidate, unpack.
    m = plan.n_words
    words = pool.scratch("merge_rows_in", n * m, np.uint64).reshape(n, m)
    starts = np.empty(len(runs), np.int64)
    ends = np.empty(len(runs), np.int64)
    at = 0
    for i, (keys, time, _) in enumerate(runs):
        k = len(time)
        pack(keys, time, np.uint64(since_value), plan.src, plan.mins, plan.word, plan.shift, words[at:at + k])
        starts[i] = at
        at += k
        ends[i] = at
    diff = read_only(np.concatenate([r[2] for r in runs]))
    perm = merge_rows_tree(words, starts, ends)
    sorted_words = pool.scratch("merge_rows_out", n * m, np.uint64).reshape(n, m)
    d = np.empty(n, np.int64)
    gather_rows(words, diff, perm, sorted_words, d)
    try:
        k = consolidate_sorted_words(sorted_words, d)
    except OverflowError:
        return merge_runs_ref(runs, order, since)
    ok = np.empty((k, w), np.uint64)
    ot = np.empty(k, np.uint64)
    unpack(
        sorted_words[:k], plan.src, plan.mins, plan.word, plan.shift, plan.mask,
        plan.const_src, plan.const_val, ok, ot,
    )
    return ok, ot, d[:k].copy()


def merge_runs_ref(runs, order: str = "time", since: int | None = None):
    """Reference for :func:`merge_runs`: consolidate the union."""
    if not runs:
        return np.empty((0, 0), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64)
    keys = np.concatenate([r[0] for r in runs])
    time = np.concatenate([r[1] for r in runs])
    diff = np.concatenate([r[2] for r in runs])
    return consolidate_ref(keys, time, diff, order, since)
