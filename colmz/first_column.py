"""The first-column strategy of consolidation by data: order a batch by its first column.

Design
------
A part holds its updates sorted by ``(data, time)`` and consolidated
(``colmz.arrangement.parts``). The general way there is ``colmz.consolidate(order="data")``,
which turns every data column into order-preserving key words (a string column into ranks)
and sorts the rows by all of them. The common batch of a large write, however, starts with
a 64-bit integer key that is unique or nearly so (a row id, a hash); its order alone then
decides the order of the rows, and no two rows can consolidate. This module is the strategy
for that case; ``colmz.ops`` is the one dispatcher that chooses it (``colmz.ops.order_data``)
and consolidates what it cannot decide:

1. the first column's values become one word per row (``colmz.order.raw_words``, sign bit
   flipped for a signed column, so words compare as the values do);
2. when the words already increase strictly, the batch is in order as it stands; otherwise
   one radix sort of one word per row -- the value's offset from the least value above the
   row number (:func:`sort_keys`) -- gives the permutation;
3. rows whose word occurs once keep that place. Rows that share a word with another row (the
   *tied* rows) are handed back to the dispatcher (:attr:`FirstColumnOrder.tied`), which
   consolidates them on their own -- ordering them by the remaining columns and time and
   summing their diffs -- and :func:`place_tied` puts the result back between the others by
   its word;
4. rows with a zero diff are dropped, and every column is gathered once by the final row
   order.

When more than :data:`MAX_TIED_FRACTION` of the rows are tied, or the first column is not a
64-bit integer without NULLs, the first-column order saves nothing: :func:`order_by_first_column`
returns None and the dispatcher consolidates the batch whole.

Invariant: ``colmz.ops.order_data(u)``, gathered, equals ``colmz.consolidate(u, order="data")``
for every batch ``u`` -- the same rows, the same order, the same types. This module imports
nothing from ``colmz.ops``: the strategy plugs into the dispatcher, not the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from colmz.kernels.consolidate import read_only
from colmz.kernels.sort import (
    RADIX_MSD_MIN,
    counted_digits,
    pack_one_with_diff,
    radix_digits,
    radix_scatter_top,
    radix_sort_buckets,
    radix_sort_words_into,
    radix_work_shape,
)
from colmz.order import raw_words
from colmz.threads import shared_pool
from colmz.updates import Updates

__all__ = ["MAX_TIED_FRACTION", "MIN_ROWS", "PARALLEL_SORT_ROWS", "FirstColumnOrder",
           "order_by_first_column", "place_tied", "sort_keys"]

#: Batches shorter than this are consolidated whole (the shortcut's bookkeeping does not pay
#: for a few rows).
MIN_ROWS = 4096
#: From this many rows on, :func:`sort_keys` sorts the top digit's buckets on two threads
#: (after one scatter by that digit, the buckets are independent; half the rows each).
PARALLEL_SORT_ROWS = 1 << 18
#: Largest fraction of tied rows (rows sharing their first-column value with another row)
#: for which the first-column order is used.
MAX_TIED_FRACTION = 0.25


@dataclass(frozen=True)
class FirstColumnOrder:
    """What the first column decides of a batch's order by ``(data, time)``.

    ``rows`` are the positions, in output order, of the rows whose first-column value occurs
    once, zero diffs dropped (None: the batch is the answer as it stands). ``tied`` are the
    positions of the other rows, for the dispatcher to consolidate on their own and hand to
    :func:`place_tied` (None: no two rows share a value).
    """

    rows: np.ndarray | None
    tied: np.ndarray | None
    keys: np.ndarray | None  # the sorted words of ``rows`` (when ``tied`` is not None)
    flip: np.uint64 | None


def order_by_first_column(updates: Updates) -> FirstColumnOrder | None:
    """The order of ``updates`` by ``(data, time)`` as far as the first data column decides
    it; None when that column cannot decide it (see the module docstring).

    >>> import colmz
    >>> u = colmz.Updates({"k": [30, 10, 20, 10, 80, 50, 60, 70], "v": list("cbxadefg")},
    ...                   time=[0] * 8, diff=[1] * 8)
    >>> found = order_by_first_column(u)
    >>> found.rows.tolist(), found.tied.tolist()  # key 10 is tied
    ([2, 0, 5, 6, 7, 4], [1, 3])
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
            return FirstColumnOrder(None, None, None, None)
        return FirstColumnOrder(np.flatnonzero(diff != 0), None, None, None)
    rows, keys = sort_keys(keys)
    same = None if keys is None else keys[1:] == keys[:-1]
    if same is None or not same.any():  # every value once
        return FirstColumnOrder(rows if bool(np.all(diff != 0)) else rows[diff[rows] != 0], None, None, None)
    tied = np.zeros(n, bool)
    tied[1:] = same
    tied[:-1] |= same
    n_tied = int(np.count_nonzero(tied))
    if n_tied > MAX_TIED_FRACTION * n:
        return None
    untied = ~tied
    alone = rows[untied]
    keep = diff[alone] != 0
    # the sorted words, not a second gather from ``words``
    return FirstColumnOrder(alone[keep], rows[tied], keys[untied][keep], flips[0])


def place_tied(found: FirstColumnOrder, extra: Updates, n: int) -> np.ndarray:
    """The output order of a batch of ``n`` rows followed by ``extra`` (its tied rows,
    consolidated): positions below ``n`` are ``found.rows``, ``n + i`` is ``extra``'s row i.

    Tied and untied rows never share a value: each tied row goes before the untied rows
    with greater values, after its own predecessors among the tied rows.
    """
    if not len(extra):
        return found.rows
    extra_words, _ = raw_words([extra.column(extra.schema[0].name)])
    extra_keys = extra_words[:, 0] ^ found.flip
    at = np.searchsorted(found.keys, extra_keys) + np.arange(len(extra_keys))
    out = np.empty(len(found.rows) + len(extra_keys), np.int64)
    is_extra = np.zeros(len(out), bool)
    is_extra[at] = True
    out[is_extra] = n + np.arange(len(extra_keys))
    out[~is_extra] = found.rows
    return out


def _sort_words(words, tmp, lo_bit, hist, work) -> bool:
    # radix_sort_words_into, its buckets after the top digit's scatter split in two halves
    # of about n / 2 rows, one sorted by a helper thread: on two cores the bucket passes,
    # most of the sort, take half the time.
    n = len(words)
    digits, buckets = hist.shape
    msd = np.int64(RADIX_MSD_MIN)
    if n < PARALLEL_SORT_ROWS or counted_digits(n, digits, msd) == 0:
        return radix_sort_words_into(words, tmp, lo_bit, hist, msd, work)
    radix_scatter_top(words, tmp, lo_bit, hist, work)
    starts = work[2, :buckets + 1]
    mid = int(np.searchsorted(starts, n // 2))
    other = np.empty_like(work)
    first = shared_pool("sort", 1).submit(radix_sort_buckets, words, tmp, lo_bit, hist, starts,
                                          0, mid, other)
    try:
        in_tmp = radix_sort_buckets(words, tmp, lo_bit, hist, starts, mid, buckets, work)
    finally:
        first.result()
    return in_tmp


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
    if _sort_words(words, tmp, np.int64(row_bits), hist, work):
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
