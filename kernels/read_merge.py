"""Kernels of a merged read: order words of a data column, the merge of runs of word rows,
and consolidating the merged rows.

Design
------
A read of several sorted runs (``colmz.arrangement.read``) merges them without encoding
every data column in full: each column becomes **one** ``uint64`` *order word* per row, the
runs are merged by rows of those words (:func:`merge_word_rows`, giving a
permutation), and the Arrow columns are gathered once in the merged order
(``colmz.kernels.gather``). A word is a
monotone coarsening of colmz's order on the column (``colmz.order``): ``a < b`` in words
implies ``a < b`` in data, equal words may hide different values. Fixed-width columns take
their full encoding word (exact). A string or binary column takes, after skipping ``skip``
bytes every value shares:

* **exact** words when every value is at most ``skip + 8 * nwords - 1`` bytes long (up to
  :data:`EXACT_WORDS` words): the next ``8 * nwords - 1`` bytes, big-endian and
  zero-padded, then the length past ``skip`` in the last word's low byte. Zero padding puts
  a value that ended before a byte before any value that goes on; equal padded bytes leave
  the shorter first, as the length says; so words compare exactly as the values do, and
  equal words are equal values;
* a **prefix** word otherwise: the next 8 bytes, big-endian, zero-padded (``b"a"`` and
  ``b"a\\0"`` share one: equal words must then be resolved by the full values, and the
  columns after it cannot order rows, so the caller's words stop there).

NULL takes the word 0 (the caller adds colmz's null word when a column has NULLs).

:func:`merge_word_rows` merges the runs by rounds of pairwise merges that move, per row,
its *lead* word (the first) and its row number only: the words after the lead stay in
``rest``, by row number, and are read where two leads are equal (rare when the first
column's words tell its values apart: random keys, strings past their shared prefix). A
round thus moves 16 bytes a row for any number of words -- 14 runs of 750,000 three-word
rows moved 32 -- and ties read ``rest`` through a few ascending streams (every run keeps its
rows' order). :func:`consolidate_merged` walks the merged rows the same way: a group of
rows with equal words is one data row at one time when every word is exact -- its diffs are
summed, zero sums dropped, the group's first row stands for it -- and otherwise a *tie
group* left to the caller to resolve on full encodings (rare: equal data, or long strings
sharing 8 bytes past the skip).

Spec (kernel / reference)
-------------------------
``string_words(offsets, data, valid, skip, nwords, exact, out, col)`` writes
``out[i, col:col + nwords]``; ``string_words_ref(values, skip, nwords, exact)`` takes a list
of ``bytes`` or ``None``.
``merge_word_rows(lead, idx, rest, starts, ends, tmp_lead, tmp_idx)`` /
``merge_word_rows_ref(words, idx, starts, ends)``: the runs' rows of words (``words[r]`` is
``lead[r]`` then ``rest[idx[r]]``) merged, carrying their row numbers.
``merge_pair(src_l, src_i, rest, a0, a1, b0, b1, dst_l, dst_i, o)`` is one pairwise merge of
a round, ``co_rank(src_l, src_i, rest, a0, a1, b0, b1, c)`` / ``co_rank_ref`` where it splits
in two.
``consolidate_merged(lead, perm, rest, diff, exact, rows, diffs, g_lo, g_hi, g_at)`` ->
``(count, groups)`` / ``consolidate_merged_ref(words, perm, diff, exact)`` (``words`` the
merged rows in full) -> ``(rows, diffs, groups)`` with ``groups`` a list of ``(lo, hi, at)``:
merged positions ``[lo, hi)`` to resolve, whose rows belong before output ``at``.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import jit, load8, prefetch

#: Most words a string column's exact order words take (values up to ``8 * EXACT_WORDS - 1``
#: bytes past the shared prefix); longer values take one prefix word.
EXACT_WORDS = 3

__all__ = [
    "EXACT_WORDS",
    "consolidate_merged",
    "consolidate_merged_ref",
    "co_rank",
    "co_rank_ref",
    "merge_pair",
    "merge_word_rows",
    "merge_word_rows_ref",
    "pack_lead",
    "pack_lead_ref",
    "lead_plan",
    "string_words",
    "string_words_ref",
]


@jit
def string_words(offsets, data, valid, skip, nwords, exact, out, col):
    """Write the ``nwords`` order words of each value (module docstring) into
    ``out[:, col:col + nwords]``.

    ``offsets`` are the ``n + 1`` Arrow offsets of the values (absolute into ``data``),
    ``valid`` one byte per row (empty: no NULLs), ``skip`` the shared prefix length. Exact
    words hold ``8 * nwords - 1`` bytes and the length past ``skip`` in the last word's low
    byte; prefix words hold ``8 * nwords`` bytes.
    """
    n = offsets.shape[0] - 1
    size = data.shape[0]
    has_valid = valid.shape[0] > 0
    for i in range(n):
        if has_valid and valid[i] == 0:
            for q in range(nwords):
                out[i, col + q] = np.uint64(0)
            continue
        start = np.int64(offsets[i]) + skip
        end = np.int64(offsets[i + 1])
        for q in range(nwords):
            base = start + 8 * q
            if base + 8 <= end:
                w = load8(data, base)
            elif base >= end:  # the value ended before this word
                w = np.uint64(0)
            elif base + 8 <= size:
                # it ends within this word: one load, the bytes after its end masked off
                # (a loop over the bytes took three times as long for 16-byte keys)
                w = load8(data, base) & (~np.uint64(0) << np.uint64(8 * (base + 8 - end)))
            else:  # within the last 8 bytes of the buffer: byte by byte, zeros after the end
                w = np.uint64(0)
                for b in range(8):
                    w = w << np.uint64(8)
                    if base + b < end:
                        w |= np.uint64(data[base + b])
            if exact and q == nwords - 1:
                # seven bytes, then the length past the prefix in the low byte
                length = end - start
                w = (w & ~np.uint64(0xFF)) | np.uint64(length if length > 0 else 0)
            out[i, col + q] = w


def string_words_ref(values, skip: int, nwords: int, exact: bool) -> list[list[int]]:
    """Reference for :func:`string_words` on a list of ``bytes`` (``None``: NULL).

    >>> string_words_ref([b"ab", None], 0, 1, True) == [[(0x61620000000000 << 8) | 2], [0]]
    True
    """
    out = []
    for v in values:
        if v is None:
            out.append([0] * nwords)
            continue
        rest = v[skip:]
        size = 8 * nwords - (1 if exact else 0)
        padded = rest[:size].ljust(8 * nwords, b"\0")
        words = [int.from_bytes(padded[8 * q:8 * q + 8], "big") for q in range(nwords)]
        if exact:
            words[-1] = (words[-1] & ~0xFF) | len(rest)
        out.append(words)
    return out


@jit(inline=True)
def _add_checked(a, b):
    s = a + b
    if ((a ^ s) & (b ^ s)) < 0:
        raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
    return s


#: Rows ahead whose diff :func:`consolidate_merged` prefetches (diffs are read by row
#: number, from every run at once: more streams than the hardware prefetcher follows).
DIFF_AHEAD = 32


@jit(inline=True)
def _rest_equal(rest, r, q):
    # Rows r and q of ``rest`` (the words after the lead, by input row) hold equal words.
    for c in range(rest.shape[1]):  # noqa: SIM110 (a loop compiles; all() of a generator not)
        if rest[r, c] != rest[q, c]:
            return False
    return True


@jit
def consolidate_merged(lead, perm, rest, diff, exact, rows, diffs, g_lo, g_hi, g_at):
    """Consolidate merged rows: position ``i`` holds input row ``perm[i]``, whose words are
    ``lead[i]`` (the merged lead words, ascending) then ``rest[perm[i]]`` (by input row),
    and whose diff is ``diff[perm[i]]``.

    Adjacent rows with equal words form a group (``rest`` is compared only where leads are
    equal). A single row is emitted (``rows[k] = perm[i]``, ``diffs[k] = diff[perm[i]]``); a
    group of several is summed and emitted once (its first row) when ``exact``, dropped
    when the sum is 0, and otherwise recorded as a tie group ``(g_lo, g_hi, g_at)``: merged
    positions ``[lo, hi)``, to be placed before output ``at``. Returns ``(count, groups)``.
    """
    n = lead.shape[0]
    k = 0
    g = 0
    i = 0
    diff_base = diff.ctypes.data
    rest_base = rest.ctypes.data
    row_step = rest.strides[0]
    word_step = rest.strides[1]
    while i < n:
        if i + DIFF_AHEAD < n:
            a = i + DIFF_AHEAD
            row = np.int64(perm[a])  # (an int32 row number would overflow in the address)
            prefetch(diff_base + row * 8)
            if lead[a] == lead[a - 1] or (a + 1 < n and lead[a] == lead[a + 1]):
                # a row of a tie ahead: its rest words will be compared by row number (a
                # sink's retractions beside the rows they retract: 79,400 ties in 895,259
                # rows at k = 14; 7.6 -> 6.0 ms for one thread's pass over them)
                for c in range(rest.shape[1]):
                    prefetch(rest_base + row * row_step + c * word_step)
        j = i + 1
        while j < n and lead[j] == lead[i] and _rest_equal(rest, perm[j], perm[i]):
            j += 1
        if j == i + 1:
            d = diff[perm[i]]
            if d != 0:
                rows[k] = perm[i]
                diffs[k] = d
                k += 1
        elif exact:
            acc = diff[perm[i]]
            for t in range(i + 1, j):
                acc = _add_checked(acc, diff[perm[t]])
            if acc != 0:
                rows[k] = perm[i]
                diffs[k] = acc
                k += 1
        else:
            g_lo[g] = i
            g_hi[g] = j
            g_at[g] = k
            g += 1
        i = j
    return k, g


def consolidate_merged_ref(words, perm, diff, exact: bool):
    """Reference for :func:`consolidate_merged`: ``(rows, diffs, [(lo, hi, at), ...])``.

    >>> w = np.array([[1], [1], [2]], np.uint64)
    >>> consolidate_merged_ref(w, np.array([0, 2, 1]), np.array([1, 5, 1]), True)
    ([0, 1], [2, 5], [])
    """
    rows: list[int] = []
    diffs: list[int] = []
    groups: list[tuple[int, int, int]] = []
    n = len(perm)
    i = 0
    while i < n:
        key = tuple(int(x) for x in words[i])
        j = i + 1
        while j < n and tuple(int(x) for x in words[j]) == key:
            j += 1
        if j - i == 1 or exact:
            acc = sum(int(diff[perm[t]]) for t in range(i, j))
            if not -(2**63) <= acc < 2**63:
                raise OverflowError("diff overflow: the summed multiplicity leaves the int64 range")
            if acc:
                rows.append(int(perm[i]))
                diffs.append(acc)
        else:
            groups.append((i, j, len(rows)))
        i = j
    return rows, diffs, groups


@jit(inline=True)
def _rest_less(rest, r, q):
    # Input row r strictly before input row q on the words after the lead.
    for c in range(rest.shape[1]):
        x = rest[r, c]
        y = rest[q, c]
        if x != y:
            return x < y
    return False


@jit(inline=True)
def _before(src_l, src_i, rest, a, b):
    # Merged position a strictly before position b: lead words, then the rest by input row.
    x = src_l[a]
    y = src_l[b]
    if x != y:
        return x < y
    return _rest_less(rest, src_i[a], src_i[b])


@jit
def merge_pair(src_l, src_i, rest, a0, a1, b0, b1, dst_l, dst_i, o):
    """Merge positions ``[a0, a1)`` and ``[b0, b1)`` (each ascending) into ``dst_l``/``dst_i``
    from position ``o``; ties take the ``a`` side first.

    A position is a lead word ``src_l[p]`` and an input row ``src_i[p]``; rows with equal
    leads are ordered by ``rest[src_i[p]]`` -- the row's remaining words, which stay where
    the words were made and are read only on those ties. So each round moves 16 bytes a row
    whatever the number of words (three-word rows moved 32), and a tie reads the rest from a
    few ascending streams (each run keeps its rows' order). Branch-free in the comparison of
    unequal leads (the position to copy is selected arithmetically): runs of random keys
    interleave at random, and a branch there would mispredict on about half of them. Equal
    leads, rare unless the first column repeats, leave that loop for one step: testing for
    them inside it, even never taken, cost the loop its branch-free form (2,000,000 random
    leads: 7.7 ms against 15.9).
    """
    i = a0
    j = b0
    while i < a1 and j < b1:
        # unequal leads: the branch-free step
        while i < a1 and j < b1:
            x = src_l[i]
            y = src_l[j]
            if x == y:
                break
            take_b = np.int64(y < x)
            dst_l[o] = y if take_b else x
            dst_i[o] = src_i[i + (j - i) * take_b]
            j += take_b
            i += 1 - take_b
            o += 1
        if i < a1 and j < b1:  # equal leads: the rest decides (a first when equal too)
            take_b = np.int64(_rest_less(rest, src_i[j], src_i[i]))
            r = i + (j - i) * take_b
            dst_l[o] = src_l[r]
            dst_i[o] = src_i[r]
            j += take_b
            i += 1 - take_b
            o += 1
    while i < a1:
        dst_l[o] = src_l[i]
        dst_i[o] = src_i[i]
        i += 1
        o += 1
    while j < b1:
        dst_l[o] = src_l[j]
        dst_i[o] = src_i[j]
        j += 1
        o += 1


@jit
def co_rank(src_l, src_i, rest, a0, a1, b0, b1, c):
    """How many of the first ``c`` positions :func:`merge_pair` outputs come from
    ``[a0, a1)``: the merge of the two ranges splits there into two independent merges (the
    "merge path"), which two threads run side by side."""
    na = a1 - a0
    nb = b1 - b0
    lo = c - nb if c > nb else 0
    hi = c if c < na else na
    while lo < hi:
        i = (lo + hi) >> 1
        j = c - i
        # Too few taken from a while a[i] still precedes b[j - 1] (b goes first only when
        # strictly smaller), i.e. not b[j - 1] < a[i].
        if j > 0 and i < na and not _before(src_l, src_i, rest, b0 + j - 1, a0 + i):
            lo = i + 1
        else:
            hi = i
    return lo


@jit
def merge_word_rows(lead, idx, rest, starts, ends, tmp_lead, tmp_idx):
    """Merge the ascending position ranges ``[starts[r], ends[r])`` (tiling ``lead`` in
    order), carrying ``idx``, by rounds of :func:`merge_pair`: each round reads two
    ascending streams and writes one. Stable: equal rows keep run order. Returns ``True``
    when the result is in ``tmp_lead``/``tmp_idx``.
    """
    k = starts.shape[0]
    bounds = np.empty(k + 1, np.int64)
    for r in range(k):
        bounds[r] = starts[r]
    bounds[k] = ends[k - 1] if k > 0 else 0
    src_l = lead
    src_i = idx
    dst_l = tmp_lead
    dst_i = tmp_idx
    in_tmp = False
    while k > 1:
        nk = (k + 1) // 2
        for p in range(nk):
            a0 = bounds[2 * p]
            a1 = bounds[2 * p + 1]
            b1 = bounds[2 * p + 2] if 2 * p + 1 < k else a1
            merge_pair(src_l, src_i, rest, a0, a1, a1, b1, dst_l, dst_i, a0)
        for p in range(nk):
            bounds[p] = bounds[2 * p]
        bounds[nk] = bounds[k]
        k = nk
        src_l, dst_l = dst_l, src_l
        src_i, dst_i = dst_i, src_i
        in_tmp = not in_tmp
    return in_tmp


def co_rank_ref(words, a0, a1, b0, b1, c) -> int:
    """Reference for :func:`co_rank`: merge stably and count.

    >>> co_rank_ref(np.array([[1], [3], [2], [3]], np.uint64), 0, 2, 2, 4, 3)
    2
    """
    rows = [(tuple(int(x) for x in words[r]), 0, r) for r in range(a0, a1)]
    rows += [(tuple(int(x) for x in words[r]), 1, r) for r in range(b0, b1)]
    rows.sort(key=lambda t: (t[0], t[1]))
    return sum(1 for t in rows[:c] if t[1] == 0)


def merge_word_rows_ref(words, idx, starts, ends):
    """Reference for :func:`merge_word_rows`: ``(words, idx)`` sorted stably by row.

    >>> w = np.array([[1], [3], [2], [3]], np.uint64)
    >>> mw, mi = merge_word_rows_ref(w, np.arange(4), [0, 2], [2, 4])
    >>> mw.ravel().tolist(), mi.tolist()
    ([1, 2, 3, 3], [0, 2, 1, 3])
    """
    rows = [(tuple(int(x) for x in words[i]), r, int(idx[i]))
            for r, (s, e) in enumerate(zip(starts, ends)) for i in range(s, e)]
    rows.sort(key=lambda t: (t[0], t[1]))
    w = words.shape[1]
    return (np.array([t[0] for t in rows], np.uint64).reshape(len(rows), w),
            np.array([t[2] for t in rows], np.int64))


def lead_plan(lows, highs):
    """How :func:`pack_lead` packs rows of words whose column ``c`` lies in
    ``[lows[c], highs[c]]``: ``(lows, bits, take)`` with ``bits[c]`` the bit length of column
    ``c``'s range and ``take[c]`` how many of its top bits the lead word holds (all of them
    while they fit in the 64, then the top bits of the first column that does not, then
    none).

    >>> lead_plan([0, 10, 5], [3, 10 + 2**40, 5 + 2**62])
    ([0, 10, 5], [2, 41, 63], [2, 41, 21])
    """
    lows = [int(x) for x in lows]
    bits = [(int(h) - lo).bit_length() for lo, h in zip(lows, highs)]
    take, room = [], 64
    for b in bits:
        t = min(b, room)
        take.append(t)
        room -= t
    return lows, bits, take


@jit
def pack_lead(words, lows, bits, take, out):
    """``out[i]``: row ``i``'s lead word -- each column's offset from its low
    (``words[i, c] - lows[c]``), its top ``take[c]`` of ``bits[c]`` bits, the columns'
    bits one after another from the high end.

    Order-preserving: columns taken whole compare exactly and the first column taken in
    part compares by its top bits, so a smaller lead is a smaller row, and rows with equal
    leads are ordered by the columns after the first (which the merge compares in full
    then). A first column of few values (a region, a flag) thus leaves room for the next
    ones, where its word alone would tie on most rows.
    """
    n = words.shape[0]
    m = bits.shape[0]
    for i in range(n):
        acc = np.uint64(0)
        for c in range(m):
            t = take[c]
            if t == 0:
                continue
            v = (words[i, c] - lows[c]) >> np.uint64(bits[c] - t)
            acc = v if t == 64 else (acc << np.uint64(t)) | v
        out[i] = acc


def pack_lead_ref(words, lows, highs) -> list[int]:
    """Reference for :func:`pack_lead` with :func:`lead_plan`'s plan, on Python integers.

    >>> pack_lead_ref(np.array([[1, 12]], np.uint64), [0, 10], [3, 13])
    [6]
    """
    lows, bits, take = lead_plan(lows, highs)
    out = []
    for row in words:
        acc = 0
        for c, (lo, b, t) in enumerate(zip(lows, bits, take)):
            acc = (acc << t) | ((int(row[c]) - lo) >> (b - t))
        out.append(acc)
    return out
