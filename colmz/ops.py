"""Whole-batch operations: ``consolidate``, ``order_data`` and ``concat``.

Design
------
These functions are the API layer over ``colmz.kernels``: they validate arguments, take the
fast paths (empty input, nothing to do), encode the data columns into order-preserving words
(``colmz.order``), call the kernels and decode the result. A call that raises returns nothing
and changes nothing -- ``Updates`` are immutable.

This module is colmz's one consolidation dispatcher. ``consolidate`` chooses how to key the
rows (a lone 64-bit column read in place, strings ranked, or the full encoding);
``order_data`` -- the arrangement writer's consolidation by ``(data, time)``, as a row order
to gather -- also chooses the first-column strategy (``colmz.first_column``) when the first
data column decides the order, and consolidates the rows it cannot decide. Strategies plug in
here; none of them calls back into this module.

Overflow reports. The kernels detect a diff sum that leaves ``int64`` where it happens, deep
in a compiled loop that knows words, not rows. :func:`find_overflow` finds the culprit
afterwards -- on the error path only, so the kernels stay lean -- and :class:`DiffOverflowError`
carries it: the data row (decoded), the time and the exact sum. ``consolidate``, the
correction buffer and the spine all report overflows this way.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from colmz import first_column
from colmz.frontier import check_time
from colmz.kernels.consolidate import ORDERS, sort_consolidate
from colmz.kernels.strings import rank_strings
from colmz.order import (
    ColumnSpec,
    array_from_numpy,
    column_from_raw_words,
    decode_columns,
    encode_columns,
    raw_words,
)
from colmz.progress import ProgressCallback, check_progress
from colmz.updates import (
    Encoded,
    Updates,
    cached_encoding,
    concat_encoded,
    held_columns,
    unify_schemas,
)

__all__ = [
    "CONSOLIDATE_STEPS",
    "DiffOverflowError",
    "concat",
    "consolidate",
    "consolidate_data",
    "diff_overflow_error",
    "find_overflow",
    "order_data",
]

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1


class DiffOverflowError(OverflowError):
    """A sum of diffs leaves ``int64``: names the data row, the time and the exact sum.

    ``row`` is the data row as a tuple of Python values, ``time`` the (advanced) time and
    ``total`` the exact sum that does not fit.
    """

    def __init__(self, message: str, row: tuple, time: int, total: int):
        super().__init__(message)
        self.row = row
        self.time = time
        self.total = total


def find_overflow(keys: np.ndarray, time: np.ndarray, diff: np.ndarray, since: int | None = None):
    """The first ``(data, time)`` group whose exact diff sum leaves ``int64``, or ``None``.

    Times are first advanced to ``since`` (when given). Returns ``(row, time, total)``: the
    index of one input row of the group, the group's time and its exact sum; of several such
    groups the one with the smallest ``(time, data)``. An error-path helper: one numpy sort
    and exact sums in two 32-bit halves (groups of fewer than ``2**31`` rows).

    >>> k = np.array([[5], [5], [6]], np.uint64)
    >>> find_overflow(k, np.array([1, 1, 1], np.uint64), np.array([2**62, 2**62, 1]))
    (0, 1, 9223372036854775808)
    >>> find_overflow(k, np.array([1, 2, 1], np.uint64), np.array([2**62, 2**62, 1])) is None
    True
    """
    n = len(time)
    if n == 0:
        return None
    t = np.asarray(time, np.uint64)
    if since is not None:
        t = np.maximum(t, np.uint64(since))
    # Sort by (time, key words): np.lexsort's last key is the primary one.
    order = np.lexsort((*(keys[:, c] for c in range(keys.shape[1] - 1, -1, -1)), t))
    ks, ts = keys[order], t[order]
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = (ts[1:] != ts[:-1]) | (ks[1:] != ks[:-1]).any(axis=1)
    starts = np.flatnonzero(new)
    high, low = _group_sums(np.asarray(diff, np.int64)[order], starts)
    # The exact sum is high * 2**32 + low with 0 <= low < 2**32: it fits int64 exactly when
    # high fits 32 signed bits.
    bad = np.flatnonzero((high < -(2**31)) | (high >= 2**31))
    if not len(bad):
        return None
    g = bad[0]  # groups are in (time, data) order
    return int(order[starts[g]]), int(ts[starts[g]]), int(high[g]) * 2**32 + int(low[g])


def _group_sums(d: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact sums of the groups of ``d`` starting at ``starts``, as ``(high, low)`` int64 pairs.

    Each diff splits into a signed high half and an unsigned low half of 32 bits; their group
    sums fit ``int64`` for groups of fewer than ``2**31`` rows, and the carry of the low sum
    moves into the high one, leaving ``0 <= low < 2**32``.
    """
    hi = np.add.reduceat(d >> 32, starts)
    lo = np.add.reduceat(d & 0xFFFFFFFF, starts)
    return hi + (lo >> 32), lo & 0xFFFFFFFF


def describe_row(keys: np.ndarray, layout, schema, i: int) -> tuple:
    """Row ``i`` of encoded ``keys`` decoded to a tuple of Python values."""
    cols = decode_columns(np.ascontiguousarray(keys[i:i + 1]), layout, schema)
    return tuple(c[0].as_py() for c in cols)


def diff_overflow_error(keys, time, diff, layout, schema, since: int | None = None,
                        where: str = "") -> DiffOverflowError | None:
    """A :class:`DiffOverflowError` naming the first overflowing group, or ``None``.

    ``where`` (e.g. ``"in a flush of the stage"``) is added to the message.

    >>> import pyarrow as pa
    >>> from colmz.order import ColumnSpec
    >>> k = np.array([[5], [5]], np.uint64)
    >>> e = diff_overflow_error(k, np.array([3, 3], np.uint64), np.array([2**62, 2**62]), (1, 0),
    ...                         (ColumnSpec("k", pa.uint64()),))
    >>> print(e)
    diff overflow: the updates of data row (5,) at time 3 sum to 9223372036854775808, outside int64
    """
    found = find_overflow(keys, time, diff, since)
    if found is None:
        return None
    i, t, total = found
    row = describe_row(keys, layout, schema, i)
    msg = f"diff overflow{' ' + where if where else ''}: the updates of data row {row!r} at time {t} sum to {total}, outside int64"
    return DiffOverflowError(msg, row, t, total)


def _check_order(order: str) -> str:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    return order


def consolidate(updates: Updates, *, order: str = "time", since: int | None = None,
                progress: ProgressCallback | None = None) -> Updates:
    """Sort, sum equal ``(data, time)`` and drop zero diffs.

    Parameters
    ----------
    updates : Updates
    order : ``"time"`` (sort by ``(time, data)``, the default) or ``"data"`` (by ``(data, time)``)
    since : int, optional
        Advance every time to ``max(time, since)`` first (logical compaction).
    progress : callable, optional
        ``progress(done, total, label)`` (``colmz.progress``), in steps: called as each of
        :data:`CONSOLIDATE_STEPS` starts (``done`` = its index) and once at the end with
        ``done == total`` and the label ``"done"``. A consolidation is one kernel call per
        step, so the steps are what a long one can report.

    Returns
    -------
    Updates
        Consolidated: sorted by ``order``, each ``(data, time)`` once, no zero diff. Data are
        compared with NULL = NULL, NaN = NaN and -0.0 = 0.0; the order within equal times is
        colmz's total order on data (``colmz.order``). The result is marked so
        (``Updates.consolidated_order``), and a batch so marked -- consolidated already, in
        ``order`` (or at one time), no time before ``since`` -- is returned as it is.

    Raises
    ------
    OverflowError
        When a summed diff leaves the ``int64`` range.

    Examples
    --------
    >>> import colmz
    >>> u = colmz.Updates({"k": ["b", "a", "b"]}, time=[1, 2, 1], diff=[1, 1, 1])
    >>> colmz.consolidate(u).to_pylist()
    [('b', 1, 2), ('a', 2, 1)]
    >>> colmz.consolidate(u, since=2).to_pylist()
    [('a', 2, 1), ('b', 2, 2)]
    >>> steps = []
    >>> _ = colmz.consolidate(u, progress=lambda done, total, label: steps.append((done, total, label)))
    >>> steps
    [(0, 3, 'encoding'), (1, 3, 'sorting'), (2, 3, 'decoding'), (3, 3, 'done')]
    """
    if not isinstance(updates, Updates):
        raise TypeError(f"updates must be colmz.Updates, got {type(updates).__name__}")
    _check_order(order)
    if since is not None:
        since = check_time(since, "since")
    report = _step_reporter(check_progress(progress))
    if _known_consolidated(updates, order, since):
        # consolidated already (colmz.consolidate's output, or declared by its maker): as it is
        for step in range(len(CONSOLIDATE_STEPS) + 1):
            report(step)
        return updates
    report(0)
    schema = updates.schema
    as_given = len(updates) <= 2 and all(s.kind in _AS_GIVEN and not pa.types.is_dictionary(s.type) for s in schema)
    if as_given and len(updates) <= 1:
        out = _consolidate_one(updates, since, report)
    elif as_given and (two := _consolidate_two(updates, order, since, report)) is not None:
        out = two
    elif len(updates) >= _RANK_MIN_ROWS and any(s.kind == "bytes" for s in schema):
        out = _consolidate_ranked(updates, order, since, report)
    elif cached_encoding(updates) is None and (raw := raw_words(held_columns(updates))) is not None:
        out = _consolidate_raw(updates, raw, order, since, report)
    else:
        out = _consolidate_encoded(updates, order, since, report)
    report(len(CONSOLIDATE_STEPS))
    out.assume_consolidated(order)
    return out


def _known_consolidated(u: Updates, order: str, since: int | None) -> bool:
    """Whether ``u`` is known to be what consolidating it (``order``, ``since``) gives:
    consolidated in ``order`` (``Updates.consolidated_order``; with one time, ``"time"`` and
    ``"data"`` order agree) and no time before ``since``."""
    have = u.consolidated_order
    if have is None or not len(u):
        return False
    t = u.time
    if have != order:
        one_time = t[0] == t[-1] if have == "time" else t.min() == t.max()
        if not one_time:
            return False
    if since is not None:
        low = t[0] if have == "time" else t.min()
        if low < since:
            return False
    return True


#: Column kinds a consolidation returns exactly as given (the encoding canonicalises a float's
#: ``-0.0`` and NaN payloads, and decodes a dictionary column): a batch of at most one update
#: of these kinds is consolidated without encoding it (a one-row commit pays no kernel call).
_AS_GIVEN = frozenset({"int", "uint", "bool", "bytes", "null"})


def _consolidate_one(updates: Updates, since, report) -> Updates:
    # One update is sorted and its row unique: only a zero diff and the since change it.
    report(1)
    report(2)
    if not len(updates):
        return updates
    if updates.diff[0] == 0:
        return updates.slice(0, 0)
    if since is not None and int(updates.time[0]) < since:
        return Updates({c.name: updates.column(c.name) for c in updates.schema}, np.array([since], np.uint64),
                       updates.diff, copy=False)
    return updates


def _consolidate_two(updates: Updates, order: str, since, report) -> Updates | None:
    # Two updates (a one-row change's old row out and new row in) are compared by their
    # encoding and time, no kernel call: swapped when out of order, summed when equal. None
    # when their diffs' sum would leave int64 (the kernels' path names the row).
    t = updates.time
    if since is not None and (t[0] < since or t[1] < since):
        t = np.maximum(t, np.uint64(since))
        updates = Updates({c.name: updates.column(c.name) for c in updates.schema}, t, updates.diff, copy=False)
    report(1)
    wa, wb = updates.encode().keys.tolist()
    ta, tb = int(t[0]), int(t[1])
    a, b = ((ta, wa), (tb, wb)) if order == "time" else ((wa, ta), (wb, tb))
    report(2)
    if a == b:
        total = int(updates.diff[0]) + int(updates.diff[1])
        if not -(2**63) <= total < 2**63:
            return None
        if total == 0:
            return updates.slice(0, 0)
        one = updates.slice(0, 1)
        return Updates({c.name: one.column(c.name) for c in one.schema}, one.time, np.array([total], np.int64),
                       copy=False)
    keep = [i for i in ((1, 0) if a > b else (0, 1)) if updates.diff[i] != 0]
    if keep == [0, 1]:
        return updates
    if len(keep) == 1:
        return updates.slice(keep[0], keep[0] + 1)
    return updates.take(np.array(keep, np.int64))


#: The steps :func:`consolidate` reports to a progress callback, in order.
CONSOLIDATE_STEPS = ("encoding", "sorting", "decoding")


def _step_reporter(progress):
    if progress is None:
        return lambda step: None
    total = len(CONSOLIDATE_STEPS)

    def report(step: int) -> None:
        progress(step, total, CONSOLIDATE_STEPS[step] if step < total else "done")

    return report


def _sort_consolidate_explained(updates: Updates, keys, time, diff, order: str, since, flips=None):
    # The kernel on keys derived from ``updates`` (encoded, raw words or ranks); a diff overflow
    # is re-raised as DiffOverflowError naming the row, found on the full encoding.
    try:
        return sort_consolidate(keys, time, diff, order, since, flips)
    except OverflowError:
        enc = updates.encode()
        err = diff_overflow_error(enc.keys, enc.time, enc.diff, enc.layout, updates.schema, since)
        if err is None:
            raise
        raise err from None


def _consolidate_encoded(updates: Updates, order: str, since, report) -> Updates:
    schema = updates.schema
    enc = updates.encode()
    report(1)
    keys, time, diff = _sort_consolidate_explained(updates, enc.keys, enc.time, enc.diff, order, since)
    report(2)
    return Updates.decode(Encoded(keys, time, diff, enc.layout), schema)


def _consolidate_raw(updates: Updates, raw, order: str, since, report) -> Updates:
    # A lone 64-bit integer column (the common key of a large batch): the kernels read its
    # values in place and write the result's column directly, no encoding and no decoding.
    words, flips = raw
    schema = updates.schema
    report(1)
    keys, time, diff = _sort_consolidate_explained(updates, words, updates.time, updates.diff, order, since, flips)
    report(2)
    column = column_from_raw_words(keys, schema[0])
    return Updates.from_checked({schema[0].name: column}, time, diff)


# Below this many rows strings are sorted by their full encoding; above it, by rank.
_RANK_MIN_ROWS = 256


def _rank_column(col: pa.Array):
    """A string/binary column as ``uint64`` ranks that order and compare like the strings,
    and where each rank's value is: ``source.take(reps)[r]`` is the value of rank ``r``.

    Ranks are computed within one call and never leave it, so colmz's order stays a pure
    function of the values. The empty string takes rank 0 and every other value its position
    among the sorted distinct values, shifted so that 0 is free for NULL (whose value word is
    0 and whose null bit sorts it after ``""``), exactly as the full encoding orders them.

    The ranks come from ``colmz.kernels.strings.rank_strings``. Values that repeat (per
    a sample of the rows) are numbered by Arrow's hash table
    (``dictionary_encode``) first and only the distinct ones are ranked; ``source`` is then
    the dictionary, else the column itself.
    """
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    nulls = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
    if len(col) >= 4 * _RANK_MIN_ROWS and _values_repeat(col):
        enc = col.dictionary_encode()
        ranks, reps = _rank_strings_of(enc.dictionary)
        codes = enc.indices.fill_null(0).to_numpy(zero_copy_only=False) if nulls is not None \
            else enc.indices.to_numpy(zero_copy_only=False)
        if len(ranks):
            ranks = ranks[codes]
        else:
            ranks = np.zeros(len(col), np.uint64)
        return array_from_numpy(ranks, pa.uint64(), nulls), enc.dictionary, reps
    ranks, reps = _rank_strings_of(col)
    return array_from_numpy(ranks, pa.uint64(), nulls), col, reps


def _values_repeat(col: pa.Array, sample: int = 8192) -> bool:
    # More than one in twenty of up to ``sample`` evenly spaced rows (a quarter of the rows
    # at most) repeats an earlier one: Arrow's hash table numbers such values faster than
    # sorting every row (the sort visits each repeat once per word of it). A sample of s rows
    # of k equally frequent values holds about s * s / (2 * k) repeats.
    import pyarrow.compute as pc

    n = len(col)
    s = min(sample, n // 4)
    if s < 64:
        return False
    picked = col.take(array_from_numpy((np.arange(s, dtype=np.int64) * n) // s))
    return 20 * pc.count_distinct(picked, mode="all").as_py() < 19 * s


def _rank_strings_of(col: pa.Array):
    # rank_strings over an Arrow string/binary array's buffers (any offset).
    n = len(col)
    large = pa.types.is_large_string(col.type) or pa.types.is_large_binary(col.type)
    bufs = col.buffers()
    offsets = np.frombuffer(bufs[1], np.int64 if large else np.int32, count=n + 1,
                            offset=col.offset * (8 if large else 4)) if n else np.zeros(1, np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    validity = np.frombuffer(bufs[0], np.uint8) if col.null_count else np.zeros(0, np.uint8)
    return rank_strings(offsets, data, validity, col.offset)


def _consolidate_ranked(updates: Updates, order: str, since, report) -> Updates:
    # Long strings take several key words each and force the multi-word sort; their ranks
    # take one. Consolidate on ranks, then map the surviving ranks back to strings with one
    # take of each rank's representative (from the column, or its dictionary).
    schema = updates.schema
    columns = list(held_columns(updates))
    ranked = {}
    for i, spec in enumerate(schema):
        if spec.kind == "bytes":
            columns[i], source, reps = _rank_column(columns[i])
            ranked[i] = (source, reps)
    keys, layout = encode_columns(columns)
    report(1)
    k, t, d = _sort_consolidate_explained(updates, keys, updates.time, updates.diff, order, since)
    report(2)
    specs = [ColumnSpec(s.name, pa.uint64()) if i in ranked else s for i, s in enumerate(schema)]
    out = decode_columns(k, layout, specs)
    for i, (source, reps) in ranked.items():
        r = out[i]
        pos = np.frombuffer(r.buffers()[1], np.uint64, count=len(r), offset=r.offset * 8)
        mask = r.is_null().to_numpy(zero_copy_only=False) if r.null_count else None
        # A NULL's rank is 0, whose representative may be -1 (no ""): the mask hides it.
        rows = np.maximum(reps[pos], 0)
        col = source.take(array_from_numpy(rows, pa.int64(), mask))
        out[i] = col if col.type == schema[i].type else col.cast(schema[i].type)
    return Updates.from_checked({s.name: c for s, c in zip(schema, out)}, t, d)


def order_data(updates: Updates) -> tuple[Updates, np.ndarray | None]:
    """``consolidate(updates, order="data")`` as ``(source, rows)``: the result is
    ``source``'s rows at the positions ``rows``, in that order (``rows`` None: ``source`` as it
    stands). A writer gathers the rows piece by piece instead of all at once.

    Batches of at least ``colmz.first_column.MIN_ROWS`` rows whose first data column decides
    the order take the first-column strategy (``colmz.first_column``); its tied rows are
    consolidated here, on their own. The rest are consolidated whole.

    >>> import colmz
    >>> u = colmz.Updates({"k": [3, 1, 2]}, time=[0, 0, 0], diff=[1, 1, 1])
    >>> source, rows = order_data(u)
    >>> source.to_pylist(), rows
    ([(1, 0, 1), (2, 0, 1), (3, 0, 1)], None)
    """
    if len(updates) >= first_column.MIN_ROWS:
        found = first_column.order_by_first_column(updates)
        if found is not None:
            if found.tied is None:
                return updates, found.rows
            extra = consolidate(updates.take(found.tied), order="data")
            rows = first_column.place_tied(found, extra, len(updates))
            return (updates if not len(extra) else _append_columns(updates, extra)), rows
    return consolidate(updates, order="data"), None


def _append_columns(a: Updates, b: Updates) -> Updates:
    # ``b`` (same schema) after ``a``, column by column: a writer gathers from the columns, so
    # this must not become a lazily decoded encoding as ``concat`` of handed-out batches does.
    cols = tuple(pa.concat_arrays([x, y]) for x, y in zip(held_columns(a), held_columns(b)))
    return Updates.from_checked({s.name: c for s, c in zip(a.schema, cols)}, np.concatenate([a.time, b.time]),
                                np.concatenate([a.diff, b.diff]))


def consolidate_data(updates: Updates) -> Updates:
    """``consolidate(updates, order="data")`` through :func:`order_data`'s dispatch, gathered.

    >>> import colmz
    >>> u = colmz.Updates({"k": [3, 1, 2, 1], "v": ["c", "b", "x", "a"]}, time=[0, 0, 0, 0],
    ...                   diff=[1, 1, 0, 1])
    >>> consolidate_data(u).to_pylist()
    [(1, 'a', 0, 1), (1, 'b', 0, 1), (3, 'c', 0, 1)]
    """
    source, rows = order_data(updates)
    return source if rows is None else source.take(rows)


def concat(batches: Iterable[Updates]) -> Updates:
    """One ``Updates`` holding all rows of ``batches``, in order.

    All batches must have the same data columns; an all-NULL column (Arrow type ``null``) or
    an empty batch combines with any type. An empty batch with *no* data columns (what a
    structure hands out before it has seen any columns) combines with any columns: it
    contributes nothing and fixes no schema.

    >>> import colmz
    >>> a = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    >>> b = colmz.Updates({"k": [None]}, time=[1], diff=[1])
    >>> colmz.concat([a, b]).to_pylist()
    [(1, 0, 1), (None, 1, 1)]
    >>> colmz.concat([colmz.Updates.empty(), a]).column_names
    ['k']
    """
    batches = list(batches)
    if len(batches) == 1 and isinstance(batches[0], Updates):
        return batches[0]  # a read of one chunk: the sink's common case, kept cheap
    if not batches:
        raise ValueError("concat needs at least one batch")
    for i, b in enumerate(batches):
        if not isinstance(b, Updates):
            raise TypeError(f"batches[{i}] must be colmz.Updates, got {type(b).__name__}")
    # Empty batches without columns carry no schema: leave them out (all of them being such
    # batches, the first one is the answer).
    batches = [b for b in batches if len(b) or b.schema] or batches[:1]
    schema = batches[0].schema
    for b in batches[1:]:
        schema = unify_schemas(schema, b.schema)
    if len(batches) == 1:
        return batches[0]
    encodings = [cached_encoding(b) for b in batches]
    if all(e is not None for e in encodings) and all(b.schema == schema for b in batches):
        # Batches a structure handed out (a read's chunks): concatenate their encodings and
        # decode lazily, so feeding the result back into a structure encodes nothing.
        return Updates.from_encoded(concat_encoded(encodings), schema)
    data = {}
    for ci, spec in enumerate(schema):
        chunks = []
        for b in batches:
            col = held_columns(b)[ci]
            if col.type != spec.type:
                col = pa.nulls(len(col), spec.type) if pa.types.is_null(col.type) else col.cast(spec.type)
            chunks.append(col)
        data[spec.name] = pa.concat_arrays(chunks)
    time = np.concatenate([b.time for b in batches])
    diff = np.concatenate([b.diff for b in batches])
    return Updates.from_checked(data, time, diff)

