"""String ranking: dense, order-preserving ``uint64`` ranks of a string/binary column.

Design
------
Consolidating updates with a long string column on its full encoding (``colmz.order``: seven
bytes and a marker per word) makes every row several words wide and forces the multi-word
sort. Sorting on *ranks* instead -- one small integer per row that orders and compares like
the strings -- keeps the key narrow; the caller maps surviving ranks back to strings with one
``take`` on the original column through :func:`rank_strings`' representatives.

The ranks come from an MSD sort over *words*: the ``8 * depth .. 8 * depth + 8`` bytes of a
value, big-endian, zero-padded past its end, so that unsigned word order is byte order.
Zero padding makes ``b"a"`` and ``b"a\\0"`` share a word, so a word alone never decides
equality; the *tail* ``c = min(length - 8 * depth, 9)`` does. Within rows that share every
byte before ``8 * depth`` (and so are at least ``8 * depth`` long):

* different words: the words decide (a padded zero sits where the shorter value has ended,
  and a real zero byte never beats it, because the shorter value is then a prefix);
* equal words and ``c <= 8``: the value ends inside this word, so rows with equal ``c`` are
  equal values and a smaller ``c`` (a prefix of the others) sorts first;
* equal words and ``c == 9`` for all: they go on to ``depth + 1``.

Work is a list of *segments* ``(start, stop, depth)`` of the permutation whose rows share all
bytes before ``8 * depth``; a segment is sorted by its words, runs of equal words are split by
``c``, and each run that continues is pushed back with ``depth + 1``. The sort of a segment is
an LSD radix sort on only its most significant varying digits -- as many as carry
``log2(rows) + 1`` bits by their distinct byte counts -- moving the whole words, then the few
ties on those digits by whole word (insertion sort, or
:func:`colmz.kernels.sort.radix_sort_pairs` for long ties); a handful of rows are sorted by
comparing whole values. A segment whose rows all share the word is first compared whole
against its first row: repeated values end there instead of going down word by word.

Values that repeat a lot (a sample of up to ``_SAMPLE`` rows holds more than one repeat in
twenty) are first numbered with an open-addressing hash table in one sequential pass, and only
the distinct values are sorted: sorting every row would visit the bytes of each repeated value
at random places once per word. The list is an
explicit stack, so a long common prefix costs loop iterations, not recursion; segments on the
stack are disjoint and hold two rows or more, so it never needs more than ``n // 2`` entries.
Every byte is read a bounded number of times per depth it takes part in, so the cost is one
radix sort of the prefixes plus work proportional to the bytes of the values that tie on them.

Ranks follow colmz's full encoding of a string column exactly (``colmz.order``): the empty
string takes rank 0, NULL also takes rank 0 (its value word is 0; the caller's null bit sorts
it after ``""``), and the distinct non-empty values take ``1, 2, ...`` in byte order.

Spec (kernel / reference)
-------------------------
``rank_strings(offsets, data, validity, bit_offset)`` -> ``(ranks, reps)``: ``ranks[i]`` is
the rank of row ``i`` (0 for NULL); ``reps[r]`` is a row holding the value of rank ``r``
(``reps[0] == -1`` when no row holds ``""``). ``offsets`` are the Arrow offsets (``int32`` or
``int64``, ``n + 1`` of them, absolute into ``data``; the kernels see them as ``int64``),
``validity`` the Arrow validity bitmap as ``uint8`` (empty: no NULLs) starting at bit
``bit_offset``. ``rank_into`` runs the steps (``valid_rows``, the sampling and numbering of
repeated values, the sort, ``assign_ranks``) as separate kernels.
``rank_strings_ref(values)`` takes a list of ``bytes`` or ``None``.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels import pool
from colmz.kernels.consolidate import read_only
from colmz.kernels.decorators import jit, load8
from colmz.kernels.sort import radix_sort_pairs

__all__ = ["assign_ranks", "compare_from", "rank_into", "rank_strings", "rank_strings_ref",
           "valid_rows"]

# Rows sampled to choose between sorting every row and numbering distinct values first.
_SAMPLE = 8192
# Segments of at most this many rows are sorted by comparing whole values (insertion sort):
# the radix set-up costs more than a few comparisons.
_SMALL = 16


@jit(inline=True)
def _word(offsets, data, row, depth):
    # Bytes [8 * depth, 8 * depth + 8) of value ``row``, big-endian, zero-padded past its end.
    start = offsets[row] + 8 * depth
    end = offsets[row + 1]
    w = np.uint64(0)
    if end - start >= 8:
        for b in range(8):
            w = (w << np.uint64(8)) | np.uint64(data[start + b])
    else:
        for b in range(8):
            w = w << np.uint64(8)
            if start + b < end:
                w |= np.uint64(data[start + b])
    return w


@jit
def compare_from(offsets, data, a, b, skip):
    """Byte order of values ``a`` and ``b`` (-1, 0, 1), both known equal before byte ``skip``;
    a value that is a prefix of the other sorts first."""
    pa_ = offsets[a] + skip
    pb = offsets[b] + skip
    ea = offsets[a + 1]
    eb = offsets[b + 1]
    while pa_ < ea and pb < eb:
        x = data[pa_]
        y = data[pb]
        if x != y:
            return -1 if x < y else 1
        pa_ += 1
        pb += 1
    la = ea - pa_
    lb = eb - pb
    if la == lb:
        return 0
    return -1 if la < lb else 1


@jit(inline=True)
def _small_segment(offsets, data, perm, brk, a, b, depth):
    # Insertion sort of perm[a:b] on whole values (all equal before byte 8 * depth), then
    # mark where the value changes.
    skip = 8 * depth
    for i in range(a + 1, b):
        x = perm[i]
        j = i - 1
        while j >= a and compare_from(offsets, data, x, perm[j], skip) < 0:
            perm[j + 1] = perm[j]
            j -= 1
        perm[j + 1] = x
    for i in range(a + 1, b):
        brk[i] = 1 if compare_from(offsets, data, perm[i - 1], perm[i], skip) != 0 else 0


@jit(inline=True)
def _tail(offsets, row, depth):
    # min(length - 8 * depth, 9): <= 8 ends in this word (the byte count), 9 goes on.
    rest = offsets[row + 1] - offsets[row] - 8 * depth
    return rest if rest < 9 else 9


@jit(inline=True)
def _split_run(offsets, perm, brk, tmp, a, b, depth, st_a, st_b, st_d, top):
    # perm[a:b] share their word at ``depth``: order them by tail (counting sort), mark the
    # groups, push the rows that go on (tail 9). Returns the new stack top.
    counts = np.zeros(10, np.int64)
    for i in range(a, b):
        counts[_tail(offsets, perm[i], depth)] += 1
    distinct = 0
    for c in range(10):
        if counts[c]:
            distinct += 1
    if distinct > 1:
        pos = np.empty(10, np.int64)
        acc = a
        for c in range(10):
            pos[c] = acc
            acc += counts[c]
        for i in range(a, b):
            r = perm[i]
            c = _tail(offsets, r, depth)
            tmp[pos[c]] = r
            pos[c] += 1
        for i in range(a, b):
            perm[i] = tmp[i]
    # Group starts at tail changes; rows within one tail group are equal (tail <= 8) or
    # still unresolved (tail 9, pushed).
    acc = a
    for c in range(10):
        k = counts[c]
        if k == 0:
            continue
        if acc > a:
            brk[acc] = 1
        for i in range(acc + 1, acc + k):
            brk[i] = 0
        if c == 9 and k > 1:
            st_a[top] = acc
            st_b[top] = acc + k
            st_d[top] = depth + 1
            top += 1
        acc += k
    return top


@jit(inline=True)
def _sort_by_key(keys, perm, a, b):
    # Insertion sort of perm[a:b] by keys[a:b] (few rows).
    for i in range(a + 1, b):
        k = keys[i]
        x = perm[i]
        j = i - 1
        while j >= a and keys[j] > k:
            keys[j + 1] = keys[j]
            perm[j + 1] = perm[j]
            j -= 1
        keys[j + 1] = k
        perm[j + 1] = x


@jit(inline=True)
def _radix_range(keys, perm, tk, tv, a, b):
    # Radix sort of (keys, perm)[a:b] in place.
    if radix_sort_pairs(keys[a:b], perm[a:b], tk[a:b], tv[a:b]):
        for i in range(a, b):
            keys[i] = tk[i]
            perm[i] = tv[i]


@jit(inline=True)
def _top_digit(keys, a, b, hist):
    # The lowest digit the words of keys[a:b] need to be sorted on to split the rows into
    # groups of about one: the most significant varying digits whose distinct byte counts
    # carry log2(rows) + 1 bits. Sorting on those skips the low digits' radix passes; the
    # rare rows that tie on them are sorted on the whole word afterwards. Fills ``hist``.
    hist[:, :] = 0
    for i in range(a, b):
        k = keys[i]
        for d in range(8):
            hist[d, (k >> np.uint64(8 * d)) & np.uint64(255)] += 1
    need = np.log2(b - a) + 1.0
    have = 0.0
    for d in range(7, -1, -1):
        distinct = 0
        for v in range(256):
            if hist[d, v]:
                distinct += 1
        if distinct > 1:
            have += np.log2(distinct)
            if have >= need:
                return d
    return 0


@jit(inline=True)
def _lsd_from(keys, perm, tk, tv, a, b, hist, low):
    # Stable LSD radix sort of (keys, perm)[a:b] on digits low..7 only (8-bit digits, those
    # constant over the range skipped); the whole words move, so ties on those digits keep
    # their words for the sort that follows. The result is left in (keys, perm).
    n = b - a
    offs = np.empty(256, np.int64)
    src_k, src_v, dst_k, dst_v = keys[a:b], perm[a:b], tk[a:b], tv[a:b]
    in_tmp = False
    for d in range(low, 8):
        skip = False
        for v in range(256):
            if hist[d, v] == n:
                skip = True
                break
            if hist[d, v] != 0:
                break
        if skip:
            continue
        acc = 0
        for v in range(256):
            offs[v] = acc
            acc += hist[d, v]
        sh = np.uint64(8 * d)
        for i in range(n):
            k = src_k[i]
            v = (k >> sh) & np.uint64(255)
            p = offs[v]
            dst_k[p] = k
            dst_v[p] = src_v[i]
            offs[v] = p + 1
        src_k, src_v, dst_k, dst_v = dst_k, dst_v, src_k, src_v
        in_tmp = not in_tmp
    if in_tmp:
        for i in range(n):
            keys[a + i] = tk[a + i]
            perm[a + i] = tv[a + i]


@jit
def _resolve(offsets, data, perm, keys, tk, tv, brk, a0, b0):
    # Sort perm[a0:b0] (rows of valid values) into byte order and set brk[a0+1:b0] (1 where
    # the value differs from the previous row's).
    cap = (b0 - a0) // 2 + 1
    st_a = np.empty(cap, np.int64)
    st_b = np.empty(cap, np.int64)
    st_d = np.empty(cap, np.int64)
    hist = np.empty((8, 256), np.int64)
    top = 0
    if b0 - a0 > 1:
        st_a[0] = a0
        st_b[0] = b0
        st_d[0] = 0
        top = 1
    # The segment whose rows were last found not all equal: when it comes back whole one
    # word deeper, it is not compared again (that would cost its bytes once per depth).
    unequal_a = -1
    unequal_b = -1
    while top > 0:
        top -= 1
        a = st_a[top]
        b = st_b[top]
        depth = st_d[top]
        if b - a <= _SMALL:
            _small_segment(offsets, data, perm, brk, a, b, depth)
            continue
        lo = _word(offsets, data, perm[a], depth)
        hi = lo
        for i in range(a, b):
            w = _word(offsets, data, perm[i], depth)
            keys[i] = w
            lo = min(lo, w)
            hi = max(hi, w)
        if lo == hi and not (a == unequal_a and b == unequal_b):
            # One word for all: most likely one value repeated (consolidation's common
            # case). Compare whole values once instead of going down word by word.
            first = perm[a]
            same = True
            for i in range(a + 1, b):
                if compare_from(offsets, data, first, perm[i], 8 * depth) != 0:
                    same = False
                    break
            if same:
                for i in range(a + 1, b):
                    brk[i] = 0
                continue
            unequal_a = a
            unequal_b = b
        if lo != hi:
            low = _top_digit(keys, a, b, hist)
            _lsd_from(keys, perm, tk, tv, a, b, hist, low)
            if low > 0:
                # Ties on the top digits: sort them on the whole word.
                sh = np.uint64(8 * low)
                i = a
                while i < b:
                    top_i = keys[i] >> sh
                    j = i + 1
                    while j < b and (keys[j] >> sh) == top_i:
                        j += 1
                    if j - i > 4 * _SMALL:
                        _radix_range(keys, perm, tk, tv, i, j)
                    elif j - i > 1:
                        _sort_by_key(keys, perm, i, j)
                    i = j
        # Runs of equal words: split each by tail (tv is free scratch again here).
        i = a
        while i < b:
            j = i + 1
            while j < b and keys[j] == keys[i]:
                j += 1
            if i > a:
                brk[i] = 1
            if j - i > 1:
                top = _split_run(offsets, perm, brk, tv, i, j, depth, st_a, st_b, st_d, top)
            i = j


@jit(inline=True)
def _hash(offsets, data, row):
    # A 64-bit hash of value ``row`` (length, then 8-byte blocks, mixed multiplicatively).
    s = offsets[row]
    e = offsets[row + 1]
    h = np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(e - s)
    p = s
    while p + 8 <= e:
        h = (h ^ load8(data, p)) * np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(32)
        p += 8
    if p < e:
        w = np.uint64(0)
        for q in range(p, e):
            w = (w << np.uint64(8)) | np.uint64(data[q])
        h = (h ^ w) * np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(32)
    return h


@jit(inline=True)
def _equal(offsets, data, a, b):
    # Whether values a and b are equal, eight bytes at a time.
    pa_ = offsets[a]
    pb = offsets[b]
    n = offsets[a + 1] - pa_
    if offsets[b + 1] - pb != n:
        return False
    i = 0
    while i + 8 <= n:
        if load8(data, pa_ + i) != load8(data, pb + i):
            return False
        i += 8
    while i < n:
        if data[pa_ + i] != data[pb + i]:
            return False
        i += 1
    return True


@jit
def _dedupe(offsets, data, rows, m, codes, firsts, hashes):
    # Number the distinct values of rows[:m] in order of first appearance with an
    # open-addressing hash table: codes[rows[i]] = the number, firsts[k] = first row of value
    # k, hashes[k] its hash. The table grows at half full. Returns the number of values.
    size = 1024
    slots = np.full(size, -1, np.int64)
    k = 0
    for i in range(m):
        r = rows[i]
        h = _hash(offsets, data, r)
        j = np.int64(h & np.uint64(size - 1))
        while True:
            c = slots[j]
            if c == -1:
                slots[j] = k
                firsts[k] = r
                hashes[k] = h
                codes[r] = k
                k += 1
                break
            if hashes[c] == h and _equal(offsets, data, firsts[c], r):
                codes[r] = c
                break
            j = (j + 1) & (size - 1)
        if 2 * k > size:
            size *= 2
            slots = np.full(size, -1, np.int64)
            for c in range(k):
                j = np.int64(hashes[c] & np.uint64(size - 1))
                while slots[j] != -1:
                    j = (j + 1) & (size - 1)
                slots[j] = c
    return k


def _mostly_repeats(offsets, data, perm, m, codes, firsts, hashes) -> bool:
    # Whether values repeat often enough to number them first: among min(_SAMPLE, m // 4)
    # evenly spaced rows of perm[:m], more than one in twenty is a repeat. (A sample of s
    # rows from k equally frequent values holds about s * s / (2 * k) repeats, so this takes
    # the hash table for k below about 10 * s: all-distinct columns never do.) Python around
    # one _dedupe call: a kernel of its own would compile _dedupe a second time inside it.
    s = min(_SAMPLE, m // 4)
    if s < 64:
        return False
    sample = perm[(np.arange(s, dtype=np.int64) * m) // s]
    return 20 * _dedupe(offsets, data, sample, s, codes, firsts, hashes) < 19 * s


@jit
def valid_rows(validity, bit_offset, perm, brk, ranks):
    """Zero ``ranks``, list the rows of valid (non-NULL) values in ``perm`` and clear their
    ``brk``; return how many there are. ``validity`` empty: no NULLs."""
    n = ranks.shape[0]
    has_nulls = validity.shape[0] > 0
    m = 0
    for i in range(n):
        ranks[i] = 0
        if has_nulls:
            bit = bit_offset + i
            if not (validity[bit >> 3] >> (bit & 7)) & 1:
                continue
        perm[m] = i
        brk[m] = 0
        m += 1
    return m


@jit
def assign_ranks(offsets, perm, rows, m, k, hashed, codes, brk, keys, ranks, reps):
    """Number the groups of the sorted ``rows[:k]`` (``brk`` marks where a value changes) into
    ``ranks`` and ``reps``; return the number of ranks. ``hashed``: ``rows`` are the first rows
    of the value numbers in ``codes``, and each of the ``m`` valid rows in ``perm`` takes its
    number's rank (``keys`` is scratch then)."""
    # "" sorts first and takes rank 0; without it non-empty values start at 1.
    shift = 1
    if k > 0 and offsets[rows[0] + 1] == offsets[rows[0]]:
        shift = 0
    reps[0] = -1
    r = shift - 1
    for j in range(k):
        if j == 0 or brk[j]:
            r += 1
            reps[r] = rows[j]
        if hashed:
            keys[codes[rows[j]]] = np.uint64(r)  # rank of each value number
        else:
            ranks[rows[j]] = np.uint64(r)
    if hashed:
        for i in range(m):
            row = perm[i]
            ranks[row] = keys[codes[row]]
    return r + 1


def rank_into(offsets, data, validity, bit_offset, perm, keys, tk, tv, brk, codes, firsts,
              ranks, reps):
    """Fill ``ranks`` (``n``) and ``reps`` (at least ``n + 1``) and return the number of ranks.

    ``offsets`` are ``int64``. ``perm``, ``keys``, ``tk``, ``tv``, ``brk``, ``codes`` and
    ``firsts`` are scratch space of ``n`` entries (``int64``, ``uint64``, ``uint64``, ``int64``,
    ``uint8``, ``int64``, ``int64``; contents undefined).

    When a sample says values mostly repeat, the distinct values are numbered first with a
    hash table (one sequential pass; the table stays small) and only they are sorted: sorting
    every row would revisit each repeated value at random places once per word of it.

    The steps are separate kernels called from here, not one kernel calling the others:
    Numba compiles a kernel together with every kernel it calls and optimises the callees
    again inside each caller, so one kernel over the whole ranking cost a quarter more to
    compile than its parts (``docs/kernels.md``).
    """
    bit_offset = np.int64(bit_offset)
    m = valid_rows(validity, bit_offset, perm, brk, ranks)
    hashed = _mostly_repeats(offsets, data, perm, m, codes, firsts, tk)
    rows = perm
    k = m
    if hashed:
        k = _dedupe(offsets, data, perm, m, codes, firsts, tk)
        rows = firsts
    _resolve(offsets, data, rows, keys, tk, tv, brk, 0, k)
    return assign_ranks(offsets, perm, rows, m, k, hashed, codes, brk, keys, ranks, reps)


def rank_strings(offsets, data, validity, bit_offset: int = 0):
    """Dense ranks of a string/binary column in byte order, and a representative per rank.

    See the module docstring for the rank rules and the argument layout. Temporaries come
    from the scratch pool (``colmz.kernels.pool``); ``ranks`` and ``reps`` are new arrays.

    >>> import numpy as np
    >>> offsets = np.array([0, 1, 1, 2, 3], np.int64)
    >>> ranks, reps = rank_strings(offsets, np.frombuffer(b"bab", np.uint8), np.zeros(0, np.uint8))
    >>> ranks.tolist(), reps.tolist()
    ([2, 0, 1, 2], [1, 2, 0])
    """
    # Read-only views of the inputs and int64 offsets: the kernels compile for one signature,
    # whatever buffers (Arrow's are read-only, string offsets int32, large_string int64) the
    # caller hands in. Widening int32 offsets copies 8 bytes a row, little beside the sort.
    offsets = offsets.astype(np.int64, copy=False)
    offsets, data, validity = (read_only(a) for a in (offsets, data, validity))
    n = len(offsets) - 1
    ranks = np.empty(n, np.uint64)
    if n <= _SMALL:
        # One call on fresh tiny arrays: the pool's Python costs more than they do.
        perm, keys, tk, tv = (np.empty(n, t) for t in (np.int64, np.uint64, np.uint64, np.int64))
        brk, reps = np.empty(n, np.uint8), np.empty(n + 1, np.int64)
        codes, firsts = np.empty(n, np.int64), np.empty(n, np.int64)
    else:
        perm = pool.scratch("strings_perm", n, np.int64)
        keys = pool.scratch("strings_keys", n, np.uint64)
        tk = pool.scratch("strings_tk", n, np.uint64)
        tv = pool.scratch("strings_tv", n, np.int64)
        brk = pool.scratch("strings_brk", n, np.uint8)
        reps = pool.scratch("strings_reps", n + 1, np.int64)
        codes = pool.scratch("strings_codes", n, np.int64)
        firsts = pool.scratch("strings_firsts", n, np.int64)
    k = rank_into(offsets, data, validity, np.int64(bit_offset), perm, keys, tk, tv, brk,
                  codes, firsts, ranks, reps)
    return ranks, reps[:k].copy()


def rank_strings_ref(values):
    """Reference for :func:`rank_strings`: ``sorted`` on Python ``bytes``.

    >>> ranks, reps = rank_strings_ref([b"b", None, b"", b"a", b"b"])
    >>> ranks.tolist(), reps.tolist()
    ([2, 0, 0, 1, 2], [2, 3, 0])
    """
    distinct = sorted({v for v in values if v is not None})
    shift = 0 if distinct and distinct[0] == b"" else 1
    rank_of = {v: i + shift for i, v in enumerate(distinct)}
    ranks = np.array([0 if v is None else rank_of[v] for v in values], np.uint64)
    reps = np.full(len(distinct) + shift, -1, np.int64)
    for i, v in enumerate(values):
        if v is not None and reps[rank_of[v]] == -1:
            reps[rank_of[v]] = i
    return ranks, reps
