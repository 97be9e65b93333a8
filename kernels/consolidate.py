"""Consolidation: sort updates by key, sum the diffs of equal keys, drop zeros.

Design
------
A collection of updates ``(data, time, diff)`` is *consolidated* when it is sorted by the
chosen order, holds each ``(data, time)`` at most once and holds no zero diff. Consolidation
is the normal form every colmz structure keeps; two consolidated collections are equal as
multisets exactly when their arrays are equal.

:func:`sort_consolidate` composes the sort kernels (``colmz.kernels.sort``): advance times to
the since (optional), measure field ranges, pack the fields into super-words, radix-sort the
super-words with the diffs (one word) or sort by a permutation (several), sum equal neighbours
in place (:func:`consolidate_sorted_words`), and unpack the survivors. Its cost is a constant
number of linear passes plus ``ceil(bits / 8)`` radix passes, where ``bits`` is the number of
significant bits of the packed key -- the data's order does not matter.

Diffs are ``int64``. A sum that leaves the ``int64`` range raises ``OverflowError`` instead of
wrapping: silently wrapped multiplicities would corrupt the collection.

Orders are named as in ``colmz``: ``"time"`` sorts by ``(time, data)`` (the correction buffer),
``"data"`` by ``(data, time)`` (spine batches, persist).

Spec (kernel / reference)
-------------------------
``consolidate_sorted_words(words, diffs)`` -> ``m``; rows ``[:m]`` of the in-place inputs hold
the result (reference: ``consolidate_sorted_words_ref``).
``embedded_sort_consolidate(...)`` the one-word path in one compiled call, emitting in place
(``emit_embedded``); its buffers become the result (see ``docs/kernels.md``).
``sort_consolidate(keys, time, diff, order, since, flips)`` / ``consolidate_ref(...)``
-> ``(keys, time, diff)`` new arrays.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels import pool
from colmz.kernels.decorators import jit
from colmz.kernels.sort import (
    RADIX_MSD_MIN,
    argsort_words,
    field_ranges_into,
    pack,
    pack_one_with_diff,
    plan_packing,
    radix_digits,
    radix_sort_pairs,
    radix_sort_words_into,
    radix_work_shape,
    unpack,
)

__all__ = [
    "ORDERS",
    "consolidate_ref",
    "consolidate_sorted_words",
    "consolidate_sorted_words_ref",
    "embedded_sort_consolidate",
    "emit_embedded",
    "gather_rows",
    "order_significance",
    "read_only",
    "sort_consolidate",
]

ORDERS = ("time", "data")


@jit
def _add_checked(a, b):
    s = a + b
    # Two's-complement overflow: the operands agree in sign and the sum does not.
    if ((a ^ s) & (b ^ s)) < 0:
        raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
    return s


@jit
def consolidate_sorted_words(words, diffs):
    """Sum the diffs of equal adjacent rows of ``words`` in place and drop zero sums.

    ``words`` is ``(n, m)`` ``uint64`` sorted ascending by rows. Returns ``k``: the first
    ``k`` rows of ``words`` and ``diffs`` hold the consolidated result.
    """
    n, m = words.shape
    out = 0
    i = 0
    while i < n:
        acc = diffs[i]
        j = i + 1
        while j < n:
            same = True
            for c in range(m):
                if words[j, c] != words[i, c]:
                    same = False
                    break
            if not same:
                break
            acc = _add_checked(acc, diffs[j])
            j += 1
        if acc != 0:
            if out != i:
                for c in range(m):
                    words[out, c] = words[i, c]
            diffs[out] = acc
            out += 1
        i = j
    return out


def consolidate_sorted_words_ref(words, diffs):
    """Reference for :func:`consolidate_sorted_words`: returns new ``(words, diffs)``.

    Sums each run of equal rows with Python ints (``OverflowError`` when a sum leaves
    ``int64``) and keeps the non-zero sums.

    >>> w, d = consolidate_sorted_words_ref(np.array([[1], [1], [2]], np.uint64), np.array([1, -1, 3]))
    >>> w.ravel().tolist(), d.tolist()
    ([2], [3])
    """
    n, m = words.shape
    rows: list[tuple] = []
    sums: list[int] = []
    for i in range(n):
        row = tuple(int(x) for x in words[i])
        if rows and rows[-1] == row:
            sums[-1] += int(diffs[i])
        else:
            rows.append(row)
            sums.append(int(diffs[i]))
    kept = [(r, d) for r, d in zip(rows, sums) if d != 0]
    if any(not -(2**63) <= d < 2**63 for _, d in kept):
        raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
    return (np.array([r for r, _ in kept], np.uint64).reshape(len(kept), m),
            np.array([d for _, d in kept], np.int64))


@jit
def _consolidate_sorted_1(words, diffs):
    # One-word specialisation of consolidate_sorted_words: the hot path of every sort.
    n = words.shape[0]
    out = 0
    i = 0
    while i < n:
        w = words[i]
        acc = diffs[i]
        j = i + 1
        while j < n and words[j] == w:
            acc = _add_checked(acc, diffs[j])
            j += 1
        if acc != 0:
            words[out] = w
            diffs[out] = acc
            out += 1
        i = j
    return out


@jit
def gather_rows(words, diffs, perm, out_words, out_diffs):
    """``out_words[i], out_diffs[i] = words[perm[i]], diffs[perm[i]]``: the rows of
    ``(words, diffs)`` (``(n, m)`` and ``(n,)``) in the order of a permutation, in one pass
    (numpy's ``words[perm]`` and ``diffs[perm]`` are its reference).

    >>> w = np.array([[3], [1], [2]], np.uint64)
    >>> ow, od = np.empty_like(w), np.empty(3, np.int64)
    >>> gather_rows(w, np.array([30, 10, 20]), np.array([1, 2, 0]), ow, od)
    >>> ow.ravel().tolist(), od.tolist()
    ([1, 2, 3], [10, 20, 30])
    """
    n, m = words.shape
    for i in range(n):
        p = perm[i]
        for c in range(m):
            out_words[i, c] = words[p, c]
        out_diffs[i] = diffs[p]


@jit
def _count_embedded(words, lo_bit, dmin):
    # Words hold (key << lo_bit) | (diff - dmin), sorted by key: count non-zero groups.
    n = words.shape[0]
    lo = np.uint64(lo_bit)
    low = (np.uint64(1) << lo) - np.uint64(1)
    count = 0
    i = 0
    while i < n:
        k = words[i] >> lo
        acc = np.int64(words[i] & low) + dmin
        j = i + 1
        while j < n and (words[j] >> lo) == k:
            acc = _add_checked(acc, np.int64(words[j] & low) + dmin)
            j += 1
        if acc != 0:
            count += 1
        i = j
    return count


@jit
def emit_embedded(words, lo_bit, dmin, src, mins, shift, mask, const_src, const_val, flips,
                  out_keys, out_time, out_diff):
    """Sum the groups of sorted embedded words and unpack them; return the rows written.

    ``words`` hold ``(packed key << lo_bit) | (diff - dmin)`` sorted by key. Each group's sum
    (``OverflowError`` when a partial sum leaves ``int64``) goes to ``out_diff``, its packed key
    is parked in ``out_time``; then the keys are unpacked field by field (vectorisable) into
    ``out_keys`` (key word ``j`` flipped back by ``flips[j]``), the time field last because it
    overwrites the parked keys in place. Row ``r`` is written after rows ``>= r`` of ``words``
    are read, so ``out_time`` may be ``words`` itself.
    """
    n = words.shape[0]
    w = out_keys.shape[1]
    nf = src.shape[0]
    nc = const_src.shape[0]
    lo = np.uint64(lo_bit)
    low = (np.uint64(1) << lo) - np.uint64(1)
    out = 0
    i = 0
    while i < n:
        k = words[i] >> lo
        acc = np.int64(words[i] & low) + dmin
        j = i + 1
        while j < n and (words[j] >> lo) == k:
            acc = _add_checked(acc, np.int64(words[j] & low) + dmin)
            j += 1
        if acc != 0:
            out_time[out] = k
            out_diff[out] = acc
            out += 1
        i = j
    time_field = -1
    for f in range(nf):
        s = src[f]
        if s == w:
            time_field = f
            continue
        sh = shift[f]
        mk = mask[f]
        mn = mins[f]
        fl = flips[s]
        col = out_keys[:, s]
        for r in range(out):
            col[r] = (((out_time[r] >> sh) & mk) + mn) ^ fl
    for c in range(nc):
        s = const_src[c]
        if s != w:
            col = out_keys[:, s]
            v = const_val[c] ^ flips[s]
            for r in range(out):
                col[r] = v
    if time_field >= 0:
        sh = shift[time_field]
        mk = mask[time_field]
        mn = mins[time_field]
        for r in range(out):
            out_time[r] = ((out_time[r] >> sh) & mk) + mn
    else:
        v = np.uint64(0)
        for c in range(nc):
            if const_src[c] == w:
                v = const_val[c]
        for r in range(out):
            out_time[r] = v
    return out


@jit
def embedded_sort_consolidate(keys, time, diff, since, src, mins, shift, mask, const_src,
                              const_val, flips, dmin, lo_bit, words, tmp, hist, work, words_2d,
                              tmp_2d, keys_into_free, out_keys, out_diff):
    """The one-word path of :func:`sort_consolidate` in one compiled call.

    Packs key fields and diff into ``words`` (:func:`~colmz.kernels.sort.pack_one_with_diff`),
    radix-sorts them with ``tmp`` (:func:`~colmz.kernels.sort.radix_sort_words`) and emits the
    groups (:func:`emit_embedded`) *in place*: the times into the buffer holding the sorted
    words, the keys into the other buffer when ``keys_into_free`` (one key word) or else into
    ``out_keys``, the diffs into ``out_diff``. Returns ``(in_tmp, k)``: whether the sorted
    buffer (and so the times) is ``tmp``, and the number of rows written. One compiled call
    instead of four is one cached kernel to load in a fresh process. ``work`` is the radix
    sort's work space and ``words_2d``/``tmp_2d`` are ``(n, 1)`` views of the buffers: the
    kernel allocates nothing and reshapes nothing, so loading it imports none of Numba's
    array support (``docs/kernels.md``).
    """
    pack_one_with_diff(keys, time, diff, since, src, mins, shift, flips, dmin, lo_bit, words, hist,
                       RADIX_MSD_MIN)
    in_tmp = radix_sort_words_into(words, tmp, lo_bit, hist, RADIX_MSD_MIN, work)
    srt = tmp if in_tmp else words
    ok = (words_2d if in_tmp else tmp_2d) if keys_into_free else out_keys
    k = emit_embedded(srt, lo_bit, dmin, src, mins, shift, mask, const_src, const_val, flips,
                      ok, srt, out_diff)
    return in_tmp, k


@jit
def _row_less(keys, time, a, b, since, time_first):
    ta = time[a] if time[a] > since else since
    tb = time[b] if time[b] > since else since
    if time_first and ta != tb:
        return ta < tb
    for c in range(keys.shape[1]):
        if keys[a, c] != keys[b, c]:
            return keys[a, c] < keys[b, c]
    return ta < tb


@jit
def _small_sort_consolidate(keys, time, diff, since, time_first):
    # Few rows: an insertion sort of row indices and one consolidating pass, all in one
    # compiled call -- the Python set-up of the packed path would cost more than the work.
    n, w = keys.shape
    idx = np.arange(n)
    for i in range(1, n):
        x = idx[i]
        j = i - 1
        while j >= 0 and _row_less(keys, time, x, idx[j], since, time_first):
            idx[j + 1] = idx[j]
            j -= 1
        idx[j + 1] = x
    ok = np.empty((n, w), np.uint64)
    ot = np.empty(n, np.uint64)
    od = np.empty(n, np.int64)
    m = 0
    i = 0
    while i < n:
        a = idx[i]
        acc = diff[a]
        j = i + 1
        while j < n and not _row_less(keys, time, a, idx[j], since, time_first):
            acc = _add_checked(acc, diff[idx[j]])
            j += 1
        if acc != 0:
            for c in range(w):
                ok[m, c] = keys[a, c]
            ot[m] = time[a] if time[a] > since else since
            od[m] = acc
            m += 1
        i = j
    return ok[:m].copy(), ot[:m].copy(), od[:m].copy()


# Up to this many rows sort_consolidate takes the one-call insertion-sort path.
_SMALL_SORT = 48


def order_significance(order: str, width: int) -> list[int]:
    """Field numbers (key words ``0..width-1``, time ``width``) from most significant."""
    if order == "time":
        return [width, *range(width)]
    if order == "data":
        return [*range(width), width]
    raise ValueError(f"order must be 'time' or 'data', got {order!r}")


def sort_consolidate(keys, time, diff, order: str = "time", since: int | None = None, flips=None):
    """Sort ``(keys, time, diff)`` by ``order`` and consolidate; return new arrays.

    ``keys`` is ``(n, w)`` ``uint64`` (encoded data words), ``time`` ``uint64``, ``diff``
    ``int64``. With ``since`` given, times are first advanced to ``max(time, since)``. With
    ``flips`` (``w`` ``uint64`` masks), key word ``j`` sorts as ``keys[:, j] ^ flips[j]`` and the
    result's keys are given back unflipped (*Flipped keys* in ``kernels/sort.py``).

    >>> import numpy as np
    >>> k = np.array([[3], [1], [3]], np.uint64)
    >>> t = np.array([5, 5, 5], np.uint64)
    >>> d = np.array([1, 2, 1], np.int64)
    >>> ok, ot, od = sort_consolidate(k, t, d)
    >>> ok.ravel().tolist(), ot.tolist(), od.tolist()
    ([1, 3], [5, 5], [2, 2])
    >>> signed = np.array([-1, 2, -1], np.int64).view(np.uint64).reshape(3, 1)
    >>> ok, ot, od = sort_consolidate(signed, t, d, flips=np.array([2**63], np.uint64))
    >>> ok.view(np.int64).ravel().tolist(), od.tolist()
    ([-1, 2], [2, 2])
    """
    if flips is not None:
        flips = np.asarray(flips, np.uint64)
        if not flips.any():
            flips = None
    try:
        return _sort_consolidate(keys, time, diff, order, since, flips)
    except OverflowError:
        # A partial sum left int64; the exact reference decides whether a final sum does.
        if flips is None:
            return consolidate_ref(keys, time, diff, order, since)
        return _unflipped(consolidate_ref(keys ^ flips, time, diff, order, since), flips)


def _unflipped(result, flips):
    ok, ot, od = result
    ok ^= flips
    return ok, ot, od


def _zero_flips(w: int) -> np.ndarray:
    return np.zeros(w, np.uint64)


#: The key output passed to embedded_sort_consolidate when the keys go to its free buffer.
_NO_KEYS = np.empty((0, 1), np.uint64)


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it is read-only, else a read-only view of it.

    Kernels take their inputs through this: Numba compiles a kernel once per array type and
    read-only is part of the type, so callers holding writable and read-only arrays (Arrow's
    buffers, ``Updates`` given up with ``copy=False``) share one compiled kernel.
    """
    if not a.flags.writeable:
        return a
    v = a.view()
    v.flags.writeable = False
    return v


def _sort_consolidate(keys, time, diff, order, since, flips):
    keys, time, diff = read_only(keys), read_only(time), read_only(diff)
    n, w = keys.shape
    if flips is not None and n <= _SMALL_SORT:
        return _unflipped(_sort_consolidate(keys ^ flips, time, diff, order, since, None), flips)
    sig = order_significance(order, w)
    if 0 < n <= _SMALL_SORT:
        return _small_sort_consolidate(keys, time, diff, np.uint64(since or 0), order == "time")
    if n == 0:
        return (np.empty((0, w), np.uint64), np.empty(0, np.uint64), np.empty(0, np.int64))
    fl = _zero_flips(w) if flips is None else flips
    fresh = helper = None
    if n * 8 >= pool.FRESH_MIN_BYTES:
        # The one-word path's buffers (both sort buffers and the diffs, which become the
        # result), asked for before the ranges are measured: in a fresh process their pages
        # are populated on a helper thread while this one loads the kernels. Another path
        # drops them (the helper holds them until it is done).
        fresh, helper = pool.result_arrays(n, (np.uint64, np.uint64, np.int64))
    mins = np.empty(w + 1, np.uint64)
    maxs = np.empty(w + 1, np.uint64)
    dmin, dmax = field_ranges_into(keys, time, diff, fl, mins, maxs)
    since = 0 if since is None else since
    mins[w] = max(int(mins[w]), since)
    maxs[w] = max(int(maxs[w]), since)
    plan = plan_packing(mins, maxs, sig)
    m = plan.n_words
    key_bits = sum(int(x).bit_length() for x in plan.mask)
    diff_bits = (int(dmax) - int(dmin)).bit_length()
    if m == 1 and key_bits + diff_bits <= 64:
        return _embedded_path(keys, time, diff, since, plan, key_bits, diff_bits, int(dmin), fl,
                              fresh, helper)
    del fresh
    if flips is not None:
        # The other paths sort encoded words: flip a copy, flip the result back.
        return _unflipped(_sort_consolidate(keys ^ flips, time, diff, order, since, None), flips)
    if m == 0:
        # Every row has the same key: one sum.
        total = 0
        for v in diff.tolist():
            total += v
        if not -(2**63) <= total < 2**63:
            raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
        k = 1 if total != 0 else 0
        ok = np.empty((k, w), np.uint64)
        ot = np.empty(k, np.uint64)
        if k:
            ok[0] = keys[0]
            ot[0] = max(int(time[0]), since)
        return ok, ot, np.full(k, total, np.int64)
    packed = pool.scratch("packed", n * m, np.uint64).reshape(n, m)
    pack(keys, time, np.uint64(since), plan.src, plan.mins, plan.word, plan.shift, packed)
    if m == 1:
        flat = packed.reshape(n)
        d = pool.scratch("diff", n, np.int64)
        d[:] = diff
        tk = pool.scratch("tmp_keys", n, np.uint64)
        tv = pool.scratch("tmp_vals", n, np.int64)
        if radix_sort_pairs(flat, d, tk, tv):
            flat, d = tk, tv
        k = _consolidate_sorted_1(flat, d)
        words = flat[:k].reshape(k, 1)
    else:
        perm = argsort_words(packed)
        sorted_words = pool.scratch("sorted_words", n * m, np.uint64).reshape(n, m)
        d = pool.scratch("diff", n, np.int64)
        gather_rows(packed, diff, perm, sorted_words, d)
        k = consolidate_sorted_words(sorted_words, d)
        words = sorted_words[:k]
    ok = np.empty((k, w), np.uint64)
    ot = np.empty(k, np.uint64)
    unpack(
        words, plan.src, plan.mins, plan.word, plan.shift, plan.mask,
        plan.const_src, plan.const_val, ok, ot,
    )
    return ok, ot, d[:k].copy()


def _embedded_path(keys, time, diff, since, plan, key_bits, diff_bits, dmin, flips, fresh=None,
                   helper=None):
    # The fast path: key fields and diff share one uint64 per row, so the radix sort moves
    # 8 bytes per update per pass instead of 16. Its two word buffers are not scratch: the
    # sorted one becomes the result's times and the other its keys (one key word), each cut to
    # the rows kept. So a call touches three arrays of fresh memory where a sort into scratch
    # and a copy out would touch five -- the first call in a process pays for every fresh page
    # (kernels/pool.py), and later calls allocate no more than the result needs.
    # ``fresh`` are those three buffers when the caller took them from
    # ``pool.result_arrays``, ``helper`` the thread populating them.
    n, w = keys.shape
    digits, digit_bits = radix_digits(key_bits)
    if fresh is None:
        fresh, helper = pool.result_arrays(n, (np.uint64, np.uint64, np.int64))
    words, tmp, od = fresh
    del fresh
    hist = np.zeros((digits, 1 << digit_bits), np.int64)
    work = np.empty(radix_work_shape(digits, 1 << digit_bits), np.int64)
    into_free = w == 1
    out_keys = _NO_KEYS if into_free else np.empty((n, w), np.uint64)
    try:
        in_tmp, k = embedded_sort_consolidate(
            keys, time, diff, np.uint64(since), plan.src, plan.mins, plan.shift, plan.mask,
            plan.const_src, plan.const_val, flips, np.int64(dmin), diff_bits, words, tmp, hist,
            work, words.reshape(n, 1), tmp.reshape(n, 1), into_free, out_keys, od,
        )
    finally:
        if helper is not None:
            helper.join()  # before the buffers are cut to size
    ot, free = (tmp, words) if in_tmp else (words, tmp)
    del words, tmp
    _shrink(ot, (k,))
    _shrink(od, (k,))
    if into_free:
        _shrink(free, (k,))
        return free.reshape(k, 1), ot, od
    _shrink(out_keys, (k, w))
    return out_keys, ot, od


def _shrink(a: np.ndarray, shape) -> None:
    # Cut an array this module allocated (it owns its memory and nothing views it) to its
    # first rows in place: realloc returns the tail to the allocator without a copy.
    if a.shape != shape:
        a.resize(shape, refcheck=False)


def finish_embedded(words, diff_bits: int, dmin: int, plan, w: int):
    """Sum the groups of sorted embedded words and unpack them into new ``(keys, time, diff)``.

    Two passes: one counts the surviving groups (and raises ``OverflowError`` on a partial sum
    that leaves ``int64``) so the outputs are allocated at their exact size, one fills them.
    ``words`` is left as it was (the merge's scratch).
    """
    k = _count_embedded(words, diff_bits, np.int64(dmin))
    ok = np.empty((k, w), np.uint64)
    ot = np.empty(k, np.uint64)
    od = np.empty(k, np.int64)
    emit_embedded(
        words, diff_bits, np.int64(dmin), plan.src, plan.mins, plan.shift, plan.mask,
        plan.const_src, plan.const_val, _zero_flips(w), ok, ot, od,
    )
    return ok, ot, od


def consolidate_ref(keys, time, diff, order: str = "time", since: int | None = None):
    """Reference for :func:`sort_consolidate`: a dict of Python ints, then a sort."""
    w = keys.shape[1]
    acc: dict[tuple, int] = {}
    for i in range(len(time)):
        t = int(time[i])
        if since is not None:
            t = max(t, since)
        row = tuple(int(x) for x in keys[i])
        acc[(row, t)] = acc.get((row, t), 0) + int(diff[i])
    items = [(r, t, d) for (r, t), d in acc.items() if d != 0]
    for _, _, d in items:
        if not -(2**63) <= d < 2**63:
            raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
    if order == "time":
        items.sort(key=lambda x: (x[1], x[0]))
    elif order == "data":
        items.sort(key=lambda x: (x[0], x[1]))
    else:
        raise ValueError(f"order must be 'time' or 'data', got {order!r}")
    ok = np.array([r for r, _, _ in items], np.uint64).reshape(len(items), w)
    ot = np.array([t for _, t, _ in items], np.uint64)
    od = np.array([d for _, _, d in items], np.int64)
    return ok, ot, od
