"""Order words: what a merged read (``colmz.arrangement.read``) orders rows by.

Layer
-----
Part of the *read* layer of ``colmz.arrangement`` (``docs/arrangement.md``): arrays in, words
out, no storage. The kernels are ``colmz.kernels.read_merge``'s.

Design
------
:func:`order_words` turns each data column of a read's pieces into ``uint64`` words, one or
more a row, column-major: fixed-width columns their full encoding word (``colmz.order``), an
array column the first word of its full encoding (a prefix, so not exact), string columns up to
:data:`~colmz.kernels.read_merge.EXACT_WORDS` words of 8 bytes after the prefix every value of
the first column shares (read off the runs' first and last rows, which bound a sorted column),
then colmz's null word when a column has NULLs and the time advanced
to the since unless every time collapses to one. Words stop after the first column whose
words are not exact (a long string's prefix), and after the first column alone when that is
fixed-width with (almost) no equal neighbours within a run (:data:`FIRST_COLUMN_TIES`):
rows tied there are resolved on their full encodings. :func:`disjoint_order` proves when the
runs need no merge; :func:`lead_words` packs the columns of a first column of few values
into one word by range (:data:`PACK_ROOM`).

Invariant: rows with strictly smaller words are strictly smaller data in colmz's order
(``colmz.order``); equal words are equal data when every word is exact.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from colmz.arrangement.gather import binary_buffers
from colmz.kernels.read_merge import EXACT_WORDS, lead_plan, pack_lead, string_words
from colmz.order import SIGN_BIT, ColumnSpec, encode_columns, kind_of
from colmz.updates import Updates

__all__ = ["FIRST_COLUMN_TIES", "PACK_ROOM", "disjoint_order", "lead_words", "order_words"]

def order_words(pieces: list[Updates], schema, since: int, collapse: bool, n: int, pool=None,
                empty=np.empty):
    """The order words of the ``n`` rows of ``pieces`` (an ``n x w`` array, column-major) and
    whether they are exact.

    Order words per data column (kernels/read_merge.py), then colmz's null word when a
    column has NULLs and the advanced time unless every time collapses to one. Words order
    rows only up to the first column whose words are not exact (a long string's prefix):
    rows tied there may differ in it, so the later columns cannot order them, and the
    words stop after that column (its ties are resolved on full encodings)."""
    plans = []
    exact = True
    for c, spec in enumerate(schema):
        kind = kind_of(spec.type, spec.name)
        if kind in ("list", "interval"):
            # an array's or interval's first full-encoding word (of its order bytes) is a
            # prefix: not exact
            plans.append((spec, kind, 0, 1, False))
            exact = False
            break
        if kind != "bytes":
            plans.append((spec, kind, 0, 1, True))
            continue
        cols = [u.column(spec.name) for u in pieces]
        skip = _shared_prefix(cols) if c == 0 else 0
        need = max(_max_length(col) for col in cols) - skip + 1  # bytes and the length
        nwords = max(1, -(-need // 8))
        col_exact = nwords <= EXACT_WORDS
        plans.append((spec, kind, skip, nwords if col_exact else 1, col_exact))
        if not col_exact:
            exact = False
            break
    if not exact and len(plans) > 1 and _distinct_within_runs(pieces, schema[0]):
        # The words are not exact anyway (rows with equal words are resolved on their full
        # encodings), and the first column is fixed-width with no two neighbours in a run
        # equal -- random keys -- so its word alone orders almost every row: the later
        # columns' words would be computed and moved through every merge round for the
        # few rows whose keys meet across runs, which the resolution orders as well.
        plans = plans[:1]
    has_nulls = exact and any(u.column(s.name).null_count for u in pieces for s in schema)
    timed = exact and not collapse
    w = sum(p[3] for p in plans) + int(has_nulls) + int(timed)
    # column-major: each word column is contiguous (the lead word is the merge's input; the
    # others are read by row number on ties only)
    words = empty(n * w, np.uint64).reshape(w, n).T
    starts = np.cumsum([0] + [len(u) for u in pieces])

    def fill_strings(p: int) -> None:
        # the string columns' words of piece p: one kernel call each, without the GIL
        u = pieces[p]
        block = words[starts[p]:starts[p] + len(u)]
        col_at = 0
        for spec, kind, skip, nwords, col_exact in plans:
            if kind == "bytes":
                col = u.column(spec.name)
                offsets, data = binary_buffers(col)
                valid = _valid(col).view(np.uint8) if col.null_count else np.empty(0, np.uint8)
                string_words(offsets, data, valid, np.int64(skip), np.int64(nwords), col_exact,
                             block, col_at)
            col_at += nwords

    def fill_fixed(p: int) -> None:
        # the other words of piece p: fixed-width columns, the null word, the time
        u = pieces[p]
        m = len(u)
        block = words[starts[p]:starts[p] + m]
        col_at = 0
        for spec, kind, _skip, nwords, _col_exact in plans:
            col = u.column(spec.name)
            if kind == "null":
                block[:, col_at] = 0
            elif kind == "int" and col.type == pa.int64() and not col.null_count:
                # colmz.order's int word (the sign bit flipped), made in place
                np.bitwise_xor(col.to_numpy(zero_copy_only=True).view(np.uint64), SIGN_BIT,
                               out=block[:, col_at])
            elif kind in ("list", "interval"):
                # an array's (an interval's) first word of its full encoding; none when every value is NULL
                # (a segment of no words: the first word would be the null word)
                keys, layout = encode_columns([col], [kind])
                block[:, col_at] = keys[:, 0] if layout[0] else 0
            elif kind != "bytes":
                block[:, col_at] = encode_columns([col], [kind])[0][:, 0]
            col_at += nwords
        if has_nulls:
            null_word = np.zeros(m, np.uint64)
            for c, spec in enumerate(schema):
                col = u.column(spec.name)
                if col.null_count:
                    null_word |= (~_valid(col)).astype(np.uint64) << np.uint64(c)
            block[:, col_at] = null_word
        if timed:
            block[:, w - 1] = np.maximum(u.time, np.uint64(since))

    # The string words are made on the pool, piece by piece (each a kernel call that
    # releases the GIL), while this thread makes the fixed-width words: those are a few
    # short NumPy calls per piece, and two threads passing the GIL between them took three
    # times as long as one (819,200 rows in 8 pieces: 9 ms against 3).
    strings = any(p[1] == "bytes" for p in plans)
    if pool is None or len(pieces) == 1 or not strings:
        for p in range(len(pieces)):
            if strings:
                fill_strings(p)
            fill_fixed(p)
    else:
        futures = [pool.submit(fill_strings, p) for p in range(len(pieces))]
        try:
            for p in range(len(pieces)):
                fill_fixed(p)
        finally:
            for f in futures:
                f.result()
    return words, exact


#: Most neighbouring rows of a run with equal first-column values (a fraction of all rows)
#: for which a merge whose words are not exact orders rows by the first column's word alone.
FIRST_COLUMN_TIES = 1 / 1024


def _distinct_within_runs(pieces: list[Updates], spec: ColumnSpec) -> bool:
    # Whether a fixed-width first column without NULLs has (almost) no equal neighbours
    # within the pieces: one vectorised comparison per piece.
    if kind_of(spec.type, spec.name) in ("bytes", "null", "list", "interval"):
        return False
    ties = 0
    for u in pieces:
        col = u.column(spec.name)
        if col.null_count or not pa.types.is_primitive(col.type) or pa.types.is_boolean(col.type):
            return False
        a = col.to_numpy(zero_copy_only=True)
        ties += int(np.count_nonzero(a[1:] == a[:-1]))
    return ties <= FIRST_COLUMN_TIES * sum(len(u) for u in pieces)


def disjoint_order(words: np.ndarray, run_bounds: np.ndarray) -> list[int] | None:
    """The no-merge proof: ordered by their first rows, each run's last row is strictly below
    the next run's first row (words order data monotonically, so strictly smaller words
    are strictly smaller data): the runs' concatenation in that order is the merge."""
    k = len(run_bounds) - 1
    firsts = [tuple(int(x) for x in words[run_bounds[r]]) for r in range(k)]
    lasts = [tuple(int(x) for x in words[run_bounds[r + 1] - 1]) for r in range(k)]
    order = sorted(range(k), key=lambda r: firsts[r])
    if any(lasts[a] >= firsts[b] for a, b in zip(order, order[1:])):
        return None
    return order


#: Fewest bits of a lead word left over by the first column's range for which the merge's
#: lead words are packed (:func:`colmz.kernels.read_merge.pack_lead`).
PACK_ROOM = 16


def lead_words(words: np.ndarray, empty=np.empty) -> tuple[np.ndarray, bool]:
    """The words the merge moves, one a row: the first column's (an array the merge then
    reuses), or -- when its range leaves PACK_ROOM bits or more of the 64 unused (a first
    column of few values) -- each row's columns packed by range into one word, so rows
    that tie on the first column are told apart by the next without reading them.
    Returns the lead words and whether they are packed."""
    if words.shape[1] == 1:
        return words[:, 0], False
    first = words[:, 0]
    lo, hi = int(first.min()), int(first.max())
    if 64 - (hi - lo).bit_length() < PACK_ROOM:
        return first, False
    lows = [lo] + [int(words[:, c].min()) for c in range(1, words.shape[1])]
    highs = [hi] + [int(words[:, c].max()) for c in range(1, words.shape[1])]
    lows, bits, take = lead_plan(lows, highs)
    out = empty(len(words), np.uint64)
    pack_lead(words, np.array(lows, np.uint64), np.array(bits, np.int64),
              np.array(take, np.int64), out)
    return out, True


def _valid(col: pa.Array) -> np.ndarray:
    if col.null_count == 0:
        return np.ones(len(col), bool)
    return np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)


def _max_length(col: pa.Array) -> int:
    if not len(col):
        return 0
    offsets, _ = binary_buffers(col)
    if col.null_count:
        lengths = np.diff(offsets)[_valid(col)]
        return int(lengths.max()) if len(lengths) else 0
    return int(np.diff(offsets).max())


def _shared_prefix(cols: list[pa.Array]) -> int:
    # The first data column of a sorted run is sorted, so its values lie between its first
    # and last; every value shares the common prefix of all those bounds. NULLs sort among
    # the empty values, so a column with NULLs shares nothing.
    if any(c.null_count for c in cols):
        return 0
    ends = []
    for c in cols:
        if len(c):
            ends.append(_value_bytes(c[0]))
            ends.append(_value_bytes(c[len(c) - 1]))
    if not ends:
        return 0
    lo, hi = min(ends), max(ends)
    n = 0
    for a, b in zip(lo, hi):
        if a != b:
            break
        n += 1
    return n


def _value_bytes(scalar) -> bytes:
    v = scalar.as_py()
    return v.encode() if isinstance(v, str) else bytes(v)
