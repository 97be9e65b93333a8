"""Consolidating a batch for an arrangement write, ordered by its first data column.

Design
------
A part holds its updates sorted by ``(data, time)`` and consolidated
(``colmz.arrangement_parts``). The general way there is ``colmz.consolidate(order="data")``,
which turns every data column into order-preserving key words (a string column into ranks)
and sorts the rows by all of them. The common batch of a large write, however, starts with
a 64-bit integer key that is unique or nearly so (a row id, a hash); its order alone then
decides the order of the rows, and no two rows can consolidate. :func:`consolidate_data`
uses that:

1. the first column's values become one word per row (``colmz.order.raw_words``, sign bit
   flipped for a signed column, so words compare as the values do);
2. when the words already increase strictly, the batch is in order as it stands; otherwise
   one radix sort of one word per row -- the value's offset from the least value above the
   row number (:func:`sort_keys`) -- gives the permutation;
3. rows whose word occurs once keep that place. Rows that share a word with another row (the
   *tied* rows) are consolidated by ``colmz.consolidate`` on their own -- it orders them by
   the remaining columns and time and sums their diffs -- and put back between the others
   by their word;
4. rows with a zero diff are dropped, and every column is gathered once by the final row
   order.

When more than :data:`MAX_TIED_FRACTION` of the rows are tied, or the first column is not a
64-bit integer without NULLs, the first-column order saves nothing and the batch goes to
``colmz.consolidate`` whole.

Invariant: ``consolidate_data(u)`` equals ``colmz.consolidate(u, order="data")`` for every
batch ``u`` -- the same rows, the same order, the same types.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from colmz.kernels.consolidate import read_only
from colmz.kernels.sort import (
    RADIX_MSD_MIN,
    pack_one_with_diff,
    radix_digits,
    radix_sort_words_into,
    radix_work_shape,
)
from colmz.ops import consolidate
from colmz.order import raw_words
from colmz.updates import Updates

__all__ = ["MAX_TIED_FRACTION", "MIN_ROWS", "consolidate_data", "order_by_first_column", "order_data",
           "sort_keys"]

#: Batches shorter than this go to ``colmz.consolidate`` whole (the shortcut's bookkeeping
#: does not pay for a few rows).
MIN_ROWS = 4096
#: Largest fraction of tied rows (rows sharing their first-column value with another row)
#: for which the first-column order is used.
MAX_TIED_FRACTION = 0.25


def order_by_first_column(updates: Updates) -> tuple[np.ndarray | None, Updates | None] | None:
    """The row order that sorts and consolidates ``updates`` by ``(data, time)``, found
    from the first data column; None when that column cannot decide it (see the module
    docstring).

    Returns ``(rows, extra)``: ``rows`` are positions, in output order, into ``updates``
    followed by ``extra`` (the consolidated tied rows, or None when there are none);
    ``rows`` is None when ``updates`` is already the answer as it stands.
    """
    schema = updates.schema
    if not schema:
        return None
    raw = raw_words([updates.column(schema[0].name)])
    if raw is None:
        return None
    words, flips = raw
    keys = words[:, 0] ^ flips[0]
    n = len(keys)
    diff = updates.diff
    if n < 2 or bool(np.all(keys[1:] > keys[:-1])):
        # already in order, every value once: only zero diffs can go
        if bool(np.all(diff != 0)):
            return None, None
        return np.flatnonzero(diff != 0), None
    rows, keys = sort_keys(keys)
    same = None if keys is None else keys[1:] == keys[:-1]
    if same is None or not same.any():  # every value once
        return (rows if bool(np.all(diff != 0)) else rows[diff[rows] != 0]), None
    tied = np.zeros(n, bool)
    tied[1:] = same
    tied[:-1] |= same
    n_tied = int(np.count_nonzero(tied))
    if n_tied > MAX_TIED_FRACTION * n:
        return None
    untied = ~tied
    alone = rows[untied]
    keep = diff[alone] != 0
    alone = alone[keep]
    extra = consolidate(updates.take(rows[tied]), order="data")
    if not len(extra):
        return alone, None
    extra_words, _ = raw_words([extra.column(schema[0].name)])
    extra_keys = extra_words[:, 0] ^ flips[0]
    alone_keys = keys[untied][keep]  # the sorted words, not a second gather from ``words``
    # Tied and untied rows never share a value: each tied row goes before the untied rows
    # with greater values, after its own predecessors among the tied rows.
    at = np.searchsorted(alone_keys, extra_keys) + np.arange(len(extra_keys))
    out = np.empty(len(alone) + len(extra_keys), np.int64)
    is_extra = np.zeros(len(out), bool)
    is_extra[at] = True
    out[is_extra] = n + np.arange(len(extra_keys))
    out[~is_extra] = alone
    return out, extra


def sort_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The rows that sort ``keys`` (``uint64``) ascending, and the keys in that order -- or
    None in their place when no two keys are equal (then the caller needs no more than the
    rows).

    Each row becomes one word, its key's offset from the least key above its row number,
    sorted by one radix sort that reads main memory once (``radix_sort_words_into``: a pass
    by the top digit, then each bucket in the cache) and moves 8 bytes per row instead of a
    ``(key, row)`` pair's 16. When offsets and row numbers do not fit in 64 bits together,
    the offsets lose their lowest bits: rows whose shortened offsets are equal may then be
    out of order, and only those runs are sorted again by the whole key. Shortened offsets
    that all differ prove every key distinct, so the sorted keys are never gathered.

    >>> rows, sorted_keys = sort_keys(np.array([30, 10, 20, 10], np.uint64))
    >>> rows.tolist(), sorted_keys.tolist()
    ([1, 3, 2, 0], [10, 10, 20, 30])
    >>> sort_keys(np.array([2**63, 5, 2**64 - 1], np.uint64))
    (array([1, 0, 2]), None)
    """
    n = len(keys)
    row_bits = max(1, (n - 1).bit_length())
    lo = keys.min() if n else np.uint64(0)
    span = int(keys.max() - lo).bit_length() if n else 0
    drop = max(0, span + row_bits - 64)
    offsets = keys - lo
    if drop:
        offsets >>= np.uint64(drop)
    digits, digit_bits = radix_digits(span - drop)
    hist = np.zeros((digits, 1 << digit_bits), np.int64)
    words, tmp = np.empty(n, np.uint64), np.empty(n, np.uint64)
    field = np.zeros(1, np.int64)  # one packed field: key word 0, the offset as it is
    zero = np.zeros(1, np.uint64)
    # The row number takes pack_one_with_diff's low "diff" bits, the offset the bits above;
    # the offsets stand in for the (unused) times too. Read-only inputs share the compiled
    # kernel with colmz.consolidate's.
    pack_one_with_diff(read_only(offsets.reshape(n, 1)), read_only(offsets),
                       read_only(np.arange(n, dtype=np.int64)), np.uint64(0), field, zero, zero,
                       zero, np.int64(0), row_bits, words, hist, np.int64(RADIX_MSD_MIN))
    del offsets
    work = np.empty(radix_work_shape(digits, 1 << digit_bits), np.int64)
    if radix_sort_words_into(words, tmp, np.int64(row_bits), hist, np.int64(RADIX_MSD_MIN), work):
        words, tmp = tmp, words
    del tmp
    rows = (words & np.uint64((1 << row_bits) - 1)).view(np.int64)
    high = words >> np.uint64(row_bits)
    del words
    if not drop:
        high += lo
        return rows, high  # the whole keys, sorted
    equal = high[1:] == high[:-1]
    if not equal.any():
        return rows, None
    # runs of equal shortened offsets: sort each by the whole key
    start = np.ones(n, bool)
    start[1:] = ~equal
    run = np.cumsum(start)
    within = np.zeros(n, bool)
    within[1:] = equal
    within[:-1] |= equal
    at = np.flatnonzero(within)
    picked = rows[at]
    rows[at] = picked[np.lexsort((keys[picked], run[at]))]
    return rows, keys[rows]


def order_data(updates: Updates) -> tuple[Updates, np.ndarray | None]:
    """``colmz.consolidate(updates, order="data")`` as ``(source, rows)``: the result is
    ``source``'s rows at the positions ``rows``, in that order (``rows`` None: ``source``
    as it stands). A writer gathers the rows piece by piece instead of all at once.

    >>> import colmz
    >>> u = colmz.Updates({"k": [3, 1, 2]}, time=[0, 0, 0], diff=[1, 1, 1])
    >>> source, rows = order_data(u)
    >>> source.to_pylist(), rows
    ([(1, 0, 1), (2, 0, 1), (3, 0, 1)], None)
    """
    if len(updates) >= MIN_ROWS:
        found = order_by_first_column(updates)
        if found is not None:
            rows, extra = found
            return (updates if extra is None else _concat(updates, extra)), rows
    return consolidate(updates, order="data"), None


def consolidate_data(updates: Updates) -> Updates:
    """``colmz.consolidate(updates, order="data")``, sorting by the first data column when
    that decides the order (module docstring).

    >>> import colmz
    >>> u = colmz.Updates({"k": [3, 1, 2, 1], "v": ["c", "b", "x", "a"]}, time=[0, 0, 0, 0],
    ...                   diff=[1, 1, 0, 1])
    >>> consolidate_data(u).to_pylist()
    [(1, 'a', 0, 1), (1, 'b', 0, 1), (3, 'c', 0, 1)]
    """
    source, rows = order_data(updates)
    return source if rows is None else source.take(rows)


def _concat(a: Updates, b: Updates) -> Updates:
    cols = {s.name: pa.concat_arrays([a.column(s.name), b.column(s.name)]) for s in a.schema}
    return Updates(cols, np.concatenate([a.time, b.time]), np.concatenate([a.diff, b.diff]), copy=False)
