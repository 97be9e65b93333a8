"""Sorting kernels: order-preserving packing and radix sorts of ``uint64`` words.

Design
------
colmz sorts updates by a key made of *fields*: the encoded data words (see ``colmz.order``)
and the time, in the order the caller asks for -- ``(time, data)`` for the correction buffer,
``(data, time)`` for spine batches. Every field is a ``uint64`` whose unsigned order is the
field's order.

Most fields use few of their 64 bits: an ``int64`` key with 2.5 M distinct values spans 22
bits above its minimum, a day of second-granular times 17. :func:`plan_packing` measures each
field's span ``max - min``, drops constant fields, and lays the remaining ones out
most-significant first in as few ``uint64`` *super-words* as hold them (a field never straddles
two words). Because ``x -> x - min`` is monotone and the fields are concatenated in
significance order, the lexicographic order of the super-words equals the order of the fields.
Packing is invertible (:func:`unpack`), so after sorting and consolidating the super-words
colmz rebuilds the key words and times from them and never gathers the original columns.

One super-word is the fast path: a radix sort with digits of up to 11 bits
(:func:`radix_digits`), its histograms counted by the packing pass, and digits that are
constant skipped. Large inputs are scattered by the top digit first and each bucket, small
enough for the cache, is then histogrammed and sorted by the remaining digits
(:func:`radix_sort_words`), so main memory is crossed once for the sort whatever the key
width; the cost does not depend on the data's order and is several times below a comparison
sort at 10 M updates. When the diffs' range fits beside the key, key and diff share the word
(:func:`pack_one_with_diff`). Wider keys are sorted by
:func:`argsort_words`: the same radix pass applied to each super-word from least to most
significant, carrying a permutation (stable LSD order over words).

Flipped keys. Kernels that read key words take a mask per key word, ``flips``, and read word
``j`` as ``keys[:, j] ^ flips[j]``. A signed 64-bit column's key word is its value with the
sign bit flipped (``colmz/order.py``), so with ``flips = 2**63`` the kernels sort the column's
own buffer in place of an encoded copy, and write results back unflipped.

Kernels take and fill preallocated arrays; the callers own allocation (and reuse scratch
space, because touching fresh pages is slow on the machines colmz targets).

Spec (kernel / reference)
-------------------------
``field_ranges(keys, time, diff, flips)`` -> ``(mins, maxs, dmin, dmax)``; key words, time last
``pack(keys, time, since, src, mins, word, shift, out)`` fills ``out[n, m]``
``unpack(words, src, mins, word, shift, mask, keys, time)`` inverse of ``pack``
``radix_sort_pairs(keys, vals, tk, tv)`` sorts ``(keys, vals)`` by keys, stable; returns
                                         ``True`` when the result sits in ``(tk, tv)``
``argsort_words(words)``                -> stable permutation sorting rows lexicographically
``pack_one_with_diff(keys, time, diff, since, src, mins, shift, flips, dmin, lo_bit, out, hist,
msd_min)``                              fills ``out[n]`` and the digit histograms ``hist``
                                        that the sort reads (``counted_digits``)
``radix_sort_words(keys, tmp, lo_bit, hist, msd_min)`` sorts by the bits above ``lo_bit``,
                                        stable; returns ``True`` when the result is in ``tmp``
References: ``<kernel>_ref`` beside each kernel.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import jit

__all__ = [
    "PackPlan",
    "argsort_words",
    "argsort_words_ref",
    "field_ranges",
    "field_ranges_into",
    "field_ranges_ref",
    "pack",
    "pack_ref",
    "plan_packing",
    "radix_sort_pairs",
    "radix_sort_pairs_ref",
    "RADIX_MSD_MIN",
    "radix_digits",
    "counted_digits",
    "radix_sort_words",
    "radix_scatter_top",
    "radix_sort_buckets",
    "radix_sort_words_into",
    "radix_sort_words_ref",
    "radix_work_shape",
    "pack_one_with_diff",
    "pack_one_with_diff_ref",
    "unpack",
    "unpack_ref",
]

_RADIX_BITS = 8
_RADIX = 1 << _RADIX_BITS
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


# ----------------------------------------------------------------------------- ranges


@jit
def _range_u64(col, fl):
    lo = _ALL_ONES
    hi = np.uint64(0)
    for i in range(col.shape[0]):
        v = col[i] ^ fl
        lo = min(lo, v)
        hi = max(hi, v)
    return lo, hi


@jit
def field_ranges(keys, time, diff, flips):
    """Min and max of every key word column and of ``time`` (last), and of ``diff``.

    Key words are read as ``keys[:, j] ^ flips[j]`` (see *Flipped keys* in the module
    docstring). Returns ``(mins, maxs, dmin, dmax)``; for empty input ``mins > maxs``. Column
    by column, so each loop is a simple reduction the compiler vectorises.
    """
    w = keys.shape[1]
    mins = np.empty(w + 1, np.uint64)
    maxs = np.empty(w + 1, np.uint64)
    dmin, dmax = field_ranges_into(keys, time, diff, flips, mins, maxs)
    return mins, maxs, dmin, dmax


@jit
def field_ranges_into(keys, time, diff, flips, mins, maxs):
    """:func:`field_ranges` into the caller's ``mins`` and ``maxs`` (``w + 1`` each); returns
    ``(dmin, dmax)``. Allocating nothing, its compiled code needs none of Numba's array
    support loaded, which a fresh process's first call would otherwise import."""
    n, w = keys.shape
    for j in range(w):
        mins[j], maxs[j] = _range_u64(keys[:, j], flips[j])
    mins[w], maxs[w] = _range_u64(time, np.uint64(0))
    dmin = np.int64(0)
    dmax = np.int64(0)
    if n > 0:
        dmin = diff[0]
        dmax = diff[0]
    for i in range(n):
        x = diff[i]
        dmin = min(dmin, x)
        dmax = max(dmax, x)
    return dmin, dmax


def field_ranges_ref(keys, time, diff, flips=None):
    """Reference for :func:`field_ranges`."""
    w = keys.shape[1]
    fl = [0] * w if flips is None else [int(x) for x in flips]
    mins = [2**64 - 1] * (w + 1)
    maxs = [0] * (w + 1)
    for i in range(len(time)):
        row = [int(x) ^ f for x, f in zip(keys[i], fl)] + [int(time[i])]
        for j, v in enumerate(row):
            mins[j] = min(mins[j], v)
            maxs[j] = max(maxs[j], v)
    ds = [int(x) for x in diff]
    return (
        np.array(mins, np.uint64),
        np.array(maxs, np.uint64),
        min(ds, default=0),
        max(ds, default=0),
    )


# ----------------------------------------------------------------------------- packing


class PackPlan:
    """Where each field goes in the packed super-words.

    Fields are numbered like :func:`field_ranges`' output: key words ``0..w-1``, time ``w``.
    ``src[f]``, ``mins[f]``, ``word[f]``, ``shift[f]`` and ``mask[f]`` describe the ``f``-th
    *packed* field (constant fields are left out and restored from ``const_src``/``const_val``).
    """

    __slots__ = ("src", "mins", "word", "shift", "mask", "n_words", "const_src", "const_val")

    def __init__(self, src, mins, word, shift, mask, n_words, const_src, const_val):
        self.src = src
        self.mins = mins
        self.word = word
        self.shift = shift
        self.mask = mask
        self.n_words = n_words
        self.const_src = const_src
        self.const_val = const_val

    def __repr__(self) -> str:
        bits = [int(m).bit_length() for m in self.mask]
        return f"PackPlan(words={self.n_words}, fields={list(self.src)}, bits={bits})"


def plan_packing(mins, maxs, significance) -> PackPlan:
    """Lay out fields most-significant first in as few ``uint64`` words as hold them.

    ``significance`` lists field numbers from most to least significant. Fields whose
    min equals max (or that are empty: min > max) are constant and take no bits.

    >>> import numpy as np
    >>> p = plan_packing(np.array([0, 5], np.uint64), np.array([1000, 5], np.uint64), [1, 0])
    >>> p.n_words, p.src.tolist(), p.shift.tolist()
    (1, [0], [0])
    """
    packed: list[tuple[int, int]] = []  # (field, bits)
    const_src, const_val = [], []
    for f in significance:
        lo, hi = int(mins[f]), int(maxs[f])
        if hi <= lo:
            const_src.append(f)
            const_val.append(lo if hi == lo else 0)
        else:
            packed.append((f, (hi - lo).bit_length()))
    # Greedy fill from the most significant end; each word's fields are laid out so the
    # first field of the word takes its highest bits.
    words: list[list[tuple[int, int]]] = [[]]
    used = 0
    for f, b in packed:
        if used + b > 64:
            words.append([])
            used = 0
        words[-1].append((f, b))
        used += b
    src, mn, wd, sh, mk = [], [], [], [], []
    for wi, fields in enumerate(words):
        remaining = sum(b for _, b in fields)
        for f, b in fields:
            remaining -= b
            src.append(f)
            mn.append(int(mins[f]))
            wd.append(wi)
            sh.append(remaining)
            mk.append((1 << b) - 1)
    n_words = len(words) if packed else 0
    return PackPlan(
        np.array(src, np.int64),
        np.array(mn, np.uint64),
        np.array(wd, np.int64),
        np.array(sh, np.uint64),
        np.array(mk, np.uint64),
        n_words,
        np.array(const_src, np.int64),
        np.array(const_val, np.uint64),
    )


@jit
def _or_field(out, keys, time, s, since, mn, sh, fl):
    # out |= (field s of each row - mn) << sh, where field w (the key width) is the time,
    # advanced to since, and key word s is read flipped by fl. One streaming pass per field,
    # which the compiler vectorises.
    n, w = keys.shape
    if s == w:
        for i in range(n):
            v = time[i]
            v = v if v > since else since
            out[i] |= (v - mn) << sh
    else:
        col = keys[:, s]
        for i in range(n):
            out[i] |= ((col[i] ^ fl) - mn) << sh


@jit
def pack(keys, time, since, src, mins, word, shift, out):
    """Pack the fields ``src`` of ``(keys, max(time, since))`` into ``out`` (``(n, n_words)``).

    Field by field, so each inner loop is a streaming pass the compiler vectorises.
    """
    n, w = keys.shape
    m = out.shape[1]
    nf = src.shape[0]
    for i in range(n):
        for k in range(m):
            out[i, k] = 0
    for f in range(nf):
        _or_field(out[:, word[f]], keys, time, src[f], since, mins[f], shift[f], np.uint64(0))


def pack_ref(keys, time, since, plan: PackPlan):
    """Reference for :func:`pack`: Python integers, one field at a time."""
    n, w = keys.shape
    out = np.zeros((n, plan.n_words), np.uint64)
    for i in range(n):
        acc = [0] * plan.n_words
        for s, lo, wd, sh in zip(plan.src, plan.mins, plan.word, plan.shift):
            v = max(int(time[i]), int(since)) if s == w else int(keys[i, s])
            acc[wd] |= (v - int(lo)) << int(sh)
        out[i] = acc
    return out


@jit
def unpack(words, src, mins, word, shift, mask, const_src, const_val, keys, time):
    """Inverse of :func:`pack`: rebuild ``keys`` and ``time`` from packed ``words``."""
    n, w = keys.shape
    nf = src.shape[0]
    nc = const_src.shape[0]
    for f in range(nf):
        s = src[f]
        mn = mins[f]
        sh = shift[f]
        mk = mask[f]
        col = words[:, word[f]]
        dst = time if s == w else keys[:, s]
        for i in range(n):
            dst[i] = ((col[i] >> sh) & mk) + mn
    for c in range(nc):
        s = const_src[c]
        v = const_val[c]
        dst = time if s == w else keys[:, s]
        for i in range(n):
            dst[i] = v


def unpack_ref(words, plan: PackPlan, w: int):
    """Reference for :func:`unpack`; returns ``(keys, time)``."""
    n = words.shape[0]
    keys = np.zeros((n, w), np.uint64)
    time = np.zeros(n, np.uint64)
    for i in range(n):
        row = [0] * (w + 1)
        for s, lo, wd, sh, mk in zip(plan.src, plan.mins, plan.word, plan.shift, plan.mask):
            row[s] = ((int(words[i, wd]) >> int(sh)) & int(mk)) + int(lo)
        for s, v in zip(plan.const_src, plan.const_val):
            row[s] = int(v)
        keys[i] = row[:w]
        time[i] = row[w]
    return keys, time


# ----------------------------------------------------------------------------- radix sort


@jit
def radix_sort_pairs(keys, vals, tmp_keys, tmp_vals):
    """Stable LSD radix sort of ``(keys, vals)`` by ``keys`` (``uint64``).

    Digits are 8 bits; all histograms come from one pass and digits that are the same for
    every key are skipped. The sorted pairs end up either in ``(keys, vals)`` or in
    ``(tmp_keys, tmp_vals)``; the return value is ``True`` for the latter.
    """
    n = keys.shape[0]
    if n < 2:
        return False
    hist = np.zeros((8, 256), np.int64)
    for i in range(n):
        k = keys[i]
        for d in range(8):
            hist[d, (k >> np.uint64(8 * d)) & np.uint64(255)] += 1
    src_k, src_v, dst_k, dst_v = keys, vals, tmp_keys, tmp_vals
    in_tmp = False
    for d in range(8):
        h = hist[d]
        skip = False
        for b in range(256):
            if h[b] == n:
                skip = True
                break
            if h[b] != 0:
                break
        if skip:
            continue
        offs = np.empty(256, np.int64)
        acc = 0
        for b in range(256):
            offs[b] = acc
            acc += h[b]
        shift = np.uint64(8 * d)
        for i in range(n):
            k = src_k[i]
            b = (k >> shift) & np.uint64(255)
            p = offs[b]
            dst_k[p] = k
            dst_v[p] = src_v[i]
            offs[b] = p + 1
        src_k, src_v, dst_k, dst_v = dst_k, dst_v, src_k, src_v
        in_tmp = not in_tmp
    return in_tmp


@jit
def _digit_bits(hist):
    # hist has 2**bits columns.
    bits = 0
    while (1 << bits) < hist.shape[1]:
        bits += 1
    return bits


@jit
def pack_one_with_diff(keys, time, diff, since, src, mins, shift, flips, dmin, lo_bit, out, hist,
                       msd_min):
    """Pack fields and the diff into one ``uint64`` per row and histogram its radix digits.

    The diff, offset by ``dmin``, takes the low ``lo_bit`` bits; the fields sit above it at
    ``shift + lo_bit``. Times are advanced to ``since`` on the way (``since = 0`` leaves them
    as they are); key word ``j`` is read as ``keys[:, j] ^ flips[j]``. ``hist`` (``(digits,
    2**b)``, zeroed) receives the counts of the ``b``-bit digits of the bits at and above
    ``lo_bit`` that :func:`radix_sort_words_into` with the same ``msd_min`` reads
    (:func:`counted_digits`), so the sort needs no histogram pass of its own; other rows stay
    zero.
    """
    n, w = keys.shape
    nf = src.shape[0]
    nd = hist.shape[0]
    lo = np.uint64(lo_bit)
    for i in range(n):
        out[i] = np.uint64(diff[i] - dmin)
    for f in range(nf):
        s = src[f]
        fl = flips[s] if s < w else np.uint64(0)
        _or_field(out, keys, time, s, since, mins[f], shift[f] + lo, fl)
    # A pass per digit with its row as a 1-D array: the increments of one row do not wait on
    # another's, which runs about twice as fast as counting every digit of a word at once.
    db = _digit_bits(hist)
    dmask = np.uint64(hist.shape[1] - 1)
    for d in range(counted_digits(n, nd, msd_min), nd):
        h = hist[d]
        sh = np.uint64(lo_bit + db * d)
        for i in range(n):
            h[(out[i] >> sh) & dmask] += 1


@jit
def counted_digits(n, digits, msd_min):
    """The first digit whose histogram :func:`radix_sort_words_into` reads for ``n`` keys:
    ``0`` (all of them) for an LSD sort, the top digit alone from ``msd_min`` keys on, where
    each bucket of the top digit is histogrammed as it is sorted.

    >>> counted_digits(10, 3, 100), counted_digits(100, 3, 100), counted_digits(100, 1, 100)
    (0, 2, 0)
    """
    if n >= msd_min and digits >= 2:
        return digits - 1
    return 0


def pack_one_with_diff_ref(keys, time, diff, since, plan: PackPlan, flips, dmin, lo_bit, digits,
                           digit_bits=8):
    """Reference for :func:`pack_one_with_diff`: returns ``(words, hist)`` as new arrays.

    Each word is ``(packed fields << lo_bit) | (diff - dmin)``, the packed fields as
    :func:`pack_ref` lays them out (one word) with key words flipped by ``flips``.
    """
    flips = np.zeros(keys.shape[1], np.uint64) if flips is None else np.asarray(flips, np.uint64)
    packed = pack_ref(keys ^ flips, time, since, plan)
    words = [(int(p[0]) << lo_bit) | (int(d) - int(dmin)) for p, d in zip(packed, diff)]
    hist = np.zeros((digits, 1 << digit_bits), np.int64)
    for x in words:
        for d in range(digits):
            hist[d, ((x >> lo_bit) >> (digit_bits * d)) & ((1 << digit_bits) - 1)] += 1
    return np.array(words, np.uint64), hist


#: From this many keys on, :func:`radix_sort_words` sorts by its top digit first, then each
#: bucket while it sits in the cache (see :func:`radix_sort_words`).
RADIX_MSD_MIN = 1 << 15

#: Buckets (and sub-buckets) of the top digit this small are insertion-sorted
#: (:func:`radix_sort_buckets`).
RADIX_BUCKET_INSERTION_MAX = 32


@jit
def _constant_digit(h, n):
    # Whether every key has the same value of this digit (its histogram has one full bucket).
    for b in range(h.shape[0]):
        if h[b] == n:
            return True
        if h[b] != 0:
            return False
    return True


@jit
def _scatter(src, dst, lo, hi, sh, dmask, offs):
    # One stable counting-sort pass of src[lo:hi] into dst by the digit at sh; offs holds the
    # bucket starts (absolute positions in dst) and is advanced.
    for i in range(lo, hi):
        k = src[i]
        b = (k >> sh) & dmask
        p = offs[b]
        dst[p] = k
        offs[b] = p + 1


def radix_sort_words(keys, tmp, lo_bit, hist, msd_min):
    """Stable radix sort of ``keys`` by their bits at and above ``lo_bit``: see
    :func:`radix_sort_words_into`, which this calls with its work space allocated."""
    work = np.empty(radix_work_shape(hist.shape[0], hist.shape[1]), np.int64)
    return radix_sort_words_into(keys, tmp, lo_bit, hist, msd_min, work)


def radix_work_shape(digits: int, buckets: int) -> tuple[int, int]:
    """Shape of :func:`radix_sort_words_into`'s work space: rows for the active digits, the
    bucket offsets, the bucket starts and a histogram per remaining digit.

    >>> radix_work_shape(3, 2048), radix_work_shape(14, 8)
    ((6, 2049), (17, 14))
    """
    return digits + 3, max(buckets + 1, digits)


@jit
def radix_sort_words_into(keys, tmp, lo_bit, hist, msd_min, work):
    """Stable radix sort of ``keys`` by their bits at and above ``lo_bit``.

    ``hist`` holds the histograms of the ``b``-bit digits (``(digits, 2**b)``) from
    :func:`counted_digits` on, as :func:`pack_one_with_diff` counts them; digits that are the
    same for every key are skipped. Returns ``True`` when the sorted keys are in ``tmp``.

    Below ``msd_min`` keys (or with one digit to sort) it is an LSD sort: one scatter pass per
    digit, least significant first. From ``msd_min`` keys on, the first pass scatters by the
    *most* significant digit, and each of its buckets -- at most a few thousand keys, which
    fit in the cache -- is then sorted by the remaining bits in place between ``tmp`` and
    ``keys`` (:func:`radix_sort_buckets`: one more pass by a digit sized to the bucket, then
    insertion sorts of its tiny sub-buckets): one pass over main memory instead of one per
    digit, the same stable order. A bucket of at most :data:`RADIX_BUCKET_INSERTION_MAX`
    keys is insertion-sorted at once.

    ``work`` is ``int64`` of :func:`radix_work_shape`: the
    kernel allocates nothing, so its compiled code needs none of Numba's array support loaded.
    """
    n = keys.shape[0]
    nd = hist.shape[0]
    nb = hist.shape[1]
    if n < 2:
        return False
    db = _digit_bits(hist)
    dmask = np.uint64(nb - 1)
    offs = work[1]
    if counted_digits(n, nd, msd_min) == 0:
        active = work[0]
        na = 0
        for d in range(nd):
            if not _constant_digit(hist[d], n):
                active[na] = d
                na += 1
        src, dst = keys, tmp
        in_tmp = False
        for a in range(na):
            d = active[a]
            _digit_starts(hist[d], 0, offs)
            _scatter(src, dst, np.int64(0), n, np.uint64(lo_bit + db * d), dmask, offs)
            src, dst = dst, src
            in_tmp = not in_tmp
        return in_tmp
    radix_scatter_top(keys, tmp, lo_bit, hist, work)
    return radix_sort_buckets(keys, tmp, lo_bit, hist, work[2], 0, nb, work)


@jit
def radix_scatter_top(keys, tmp, lo_bit, hist, work):
    """The first pass of :func:`radix_sort_words_into`'s MSD sort: ``keys`` scattered into
    ``tmp`` by the top digit, whose histogram ``hist[-1]`` holds; ``work[2, :nb + 1]``
    receives the buckets' starts (``work`` as for :func:`radix_sort_words_into`)."""
    n = keys.shape[0]
    nb = hist.shape[1]
    top = hist.shape[0] - 1
    starts = work[2]
    offs = work[1]
    acc = 0
    for b in range(nb):
        starts[b] = acc
        offs[b] = acc
        acc += hist[top, b]
    starts[nb] = n
    _scatter(keys, tmp, np.int64(0), n, np.uint64(lo_bit + _digit_bits(hist) * top),
             np.uint64(nb - 1), offs)


@jit
def radix_sort_buckets(keys, tmp, lo_bit, hist, starts, b0, b1, work):
    """Sort buckets ``[b0, b1)`` of the top digit after :func:`radix_scatter_top`: each by
    the bits below the top digit (``hist``'s shape gives the digits and their values), in
    the cache. Returns where the sorted buckets are: ``True`` for ``tmp`` (one digit only,
    which the top scatter sorted), else ``False`` (``keys``), the same for every bucket.
    Buckets are disjoint ranges of both arrays, so two calls on different buckets may run
    side by side, each with a ``work`` of its own (:func:`radix_work_shape`; rows 0, 1 and 3
    are used).

    A bucket holds about ``n / 2**b`` keys (a few hundred for a million keys and 11-bit
    digits), too few for ``2**b``-counter histograms per digit: zeroing and summing them
    would cost several times the keys' own passes. So each bucket takes one more
    most-significant pass by a digit of about ``log2`` of its size -- sub-buckets of about
    one key -- and each sub-bucket is then insertion-sorted (at most
    :data:`RADIX_BUCKET_INSERTION_MAX` keys) or LSD-sorted by the bits left with digits sized
    to it (:func:`_lsd_range`: crowded keys). Every step is stable."""
    db = _digit_bits(hist)
    bits = db * (hist.shape[0] - 1)  # each bucket's bits to sort, below the top digit
    if bits == 0:
        return True
    offs = work[1]
    ends = work[0]
    h = work[3]
    for bucket in range(b0, b1):
        lo = starts[bucket]
        hi = starts[bucket + 1]
        m = hi - lo
        if m <= RADIX_BUCKET_INSERTION_MAX:
            for i in range(lo, hi):
                keys[i] = tmp[i]
            _insertion_sort(keys, lo, hi, lo_bit)
            continue
        w = min(db, bits, _bit_length(m))
        sh = np.uint64(lo_bit + bits - w)
        nsub = 1 << w
        mask = np.uint64(nsub - 1)
        _count_digit(tmp, lo, hi, sh, mask, h[:nsub])
        most = _digit_starts(h[:nsub], lo, offs)
        _scatter(tmp, keys, lo, hi, sh, mask, offs)  # offs[b] is now sub-bucket b's end
        if bits == w:
            continue  # the keys of a sub-bucket are equal in every sorted bit
        if most <= RADIX_BUCKET_INSERTION_MAX:
            # Out of order only within sub-buckets of a few keys: one insertion sort of the
            # whole bucket moves those few, without a branch per (mostly empty) sub-bucket.
            _insertion_sort(keys, lo, hi, lo_bit)
            continue
        for b in range(nsub):
            ends[b] = offs[b]
        s = lo
        for b in range(nsub):
            e = ends[b]
            if e - s > RADIX_BUCKET_INSERTION_MAX:
                if _lsd_range(keys, tmp, s, e, lo_bit, bits - w, db, h, offs):
                    for i in range(s, e):
                        keys[i] = tmp[i]
            elif e - s > 1:
                _insertion_sort(keys, s, e, lo_bit)
            s = e
    return False


@jit(inline=True)
def _count_digit(src, lo, hi, sh, mask, h):
    # h[b]: how many of src[lo:hi] have the digit b at sh (h's length is the digit's values).
    for b in range(h.shape[0]):
        h[b] = 0
    for i in range(lo, hi):
        h[(src[i] >> sh) & mask] += 1


@jit(inline=True)
def _digit_starts(h, lo, offs):
    # offs[b]: where the keys of digit b start, counting from position lo (the counts h
    # summed before b). Returns the largest count.
    acc = lo
    most = 0
    for b in range(h.shape[0]):
        c = h[b]
        offs[b] = acc
        acc += c
        most = max(most, c)
    return most


@jit
def _bit_length(m):
    # Bits of the non-negative integer m (0 for 0).
    b = 0
    while m >> b:
        b += 1
    return b


@jit
def _lsd_range(a, b, lo, hi, lo_bit, bits, widest, h, offs):
    # Stable LSD sort of a[lo:hi] by its bits [lo_bit, lo_bit + bits), b[lo:hi] the other
    # buffer, with digits of about log2 of the range's size (at most `widest` bits), so a
    # pass's counters cost no more than its keys; a digit the same for every key is skipped.
    # Returns True when the sorted range is in b. Bits above the range's (a last digit may
    # reach into them) are equal across it.
    m = hi - lo
    w = min(widest, bits, _bit_length(m))
    nsub = 1 << w
    mask = np.uint64(nsub - 1)
    src, dst = a, b
    in_b = False
    for p in range((bits + w - 1) // w):
        sh = np.uint64(lo_bit + p * w)
        _count_digit(src, lo, hi, sh, mask, h[:nsub])
        if _constant_digit(h[:nsub], m):
            continue
        _digit_starts(h[:nsub], lo, offs)
        _scatter(src, dst, lo, hi, sh, mask, offs)
        src, dst = dst, src
        in_b = not in_b
    return in_b


@jit
def _insertion_sort(keys, lo, hi, lo_bit):
    # Stable insertion sort of keys[lo:hi] by the bits at and above lo_bit: for the top
    # digit's small buckets, where zeroing and summing a digit histogram would cost more.
    sh = np.uint64(lo_bit)
    for i in range(lo + 1, hi):
        x = keys[i]
        kx = x >> sh
        j = i - 1
        while j >= lo and (keys[j] >> sh) > kx:
            keys[j + 1] = keys[j]
            j -= 1
        keys[j + 1] = x


def radix_sort_words_ref(keys, lo_bit):
    """Reference for :func:`radix_sort_words`: a stable sort by the bits at and above
    ``lo_bit``; returns a new array."""
    return np.array(sorted((int(x) for x in keys), key=lambda x: x >> lo_bit), np.uint64)


def radix_digits(bits: int, widest: int = 11) -> tuple[int, int]:
    """``(digits, digit_bits)`` for an LSD radix sort of ``bits``-bit keys.

    As few passes as digits of at most ``widest`` bits allow, the bits spread evenly over
    them: 32 bits take three 11-bit passes rather than four 8-bit ones (a histogram of
    ``2**11`` counters still sits in the first-level cache).

    >>> radix_digits(32), radix_digits(17), radix_digits(0)
    ((3, 11), (2, 9), (0, 8))
    """
    if bits <= 0:
        return 0, 8
    digits = -(-bits // widest)
    return digits, -(-bits // digits)


def radix_sort_pairs_ref(keys, vals):
    """Reference for :func:`radix_sort_pairs`: a stable sort by key; returns new arrays."""
    order = sorted(range(len(keys)), key=lambda i: int(keys[i]))
    return keys[order], vals[order]


@jit
def _gather_col(words, perm, j, out):
    for i in range(perm.shape[0]):
        out[i] = words[perm[i], j]


@jit
def argsort_words(words):
    """Stable permutation that sorts the rows of ``words`` (``(n, m)`` uint64) ascending."""
    n, m = words.shape
    perm = np.arange(n)
    col = np.empty(n, np.uint64)
    tk = np.empty(n, np.uint64)
    tv = np.empty(n, np.int64)
    for j in range(m - 1, -1, -1):
        _gather_col(words, perm, j, col)
        if radix_sort_pairs(col, perm, tk, tv):
            # A loop, not ``perm[:] = tv``: Numba's array-to-array assignment brings its
            # broadcasting checks and their formatted error messages, about two seconds of
            # a cold compile for what is one copy.
            for i in range(n):
                perm[i] = tv[i]
    return perm


def argsort_words_ref(words):
    """Reference for :func:`argsort_words`: Python's stable sort on row tuples."""
    rows = [tuple(int(x) for x in r) for r in words]
    return np.array(sorted(range(len(rows)), key=rows.__getitem__), np.int64)
