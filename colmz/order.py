"""Order-preserving encoding of data rows into ``uint64`` words.

Design
------
Every kernel sorts, merges and compares *rows of words*: a row of data becomes a fixed
sequence of ``uint64`` words whose lexicographic order is colmz's total order on data. The
encoding is a pure function of the row's values -- no dictionary, no per-batch state -- so
the order is the same in every batch, process and file, and two encoded rows are equal exactly
when the rows are equal with ``NULL = NULL``, ``NaN = NaN`` and ``-0.0 = 0.0`` (SQL
``GROUP BY`` equality).

Layout of a row: one *segment* per data column, then one *null word* whose bit ``c`` says
column ``c`` is NULL (a NULL's value words are zero). Segment widths:

=====================================  ======  ==============================================
Arrow type                             words   word
=====================================  ======  ==============================================
int8..int64, date, time, timestamp,    1       two's complement with the sign bit flipped
duration
uint8..uint64                          1       the value
float16/32/64                          1       IEEE bits of the float64 value; negatives
                                               inverted, positives with the sign bit set;
                                               ``-0.0 -> 0.0``, every NaN -> one NaN (last)
bool                                   1       0 or 1
string, large_string, binary,          1..k    7 bytes per word, big-endian, and a marker
large_binary                                   byte: 8 = "continues", else the byte count
                                               of the last block (0 for the empty string)
list, large_list (arrays)              1..k    its order bytes (:mod:`colmz.order_bytes`),
                                               encoded as a binary value
month_day_nano_interval                4       its 24 order bytes (PostgreSQL's comparison
                                               value, then months and days), as binary
null (all-NULL column)                 0       --
=====================================  ======  ==============================================

The string encoding is order-preserving: a shorter string whose bytes are a prefix of a
longer one ends with a marker below 8 where the longer one continues with 8, and a zero
byte inside a string beats an ended block by its marker. A batch's layout is the tuple of its
segment widths plus whether it has a null word; the fixed-width fast path is one word per
column and no null word -- an ``int64`` key costs one ``uint64``.

**Harmonising.** Layouts differ between batches only by trailing zero words: a string segment
is as wide as the batch's longest string, the null word exists only when the batch holds a
NULL, an all-NULL column has no value words. Padding each segment with zero words to the
wider layout (:func:`pad_keys`) therefore yields exactly the encoding the wider batch would
have produced, so rows of any two batches compare correctly after padding. Structures pad
lazily, when they combine batches.

The loops over string bytes and the padding are kernels (``kernels/encode.py``, each with a
pure-Python reference); this module is the data model around them.

The NULL bits sit after all values, so NULLs sort among the values' order by the value word 0
(before every non-NULL of a signed column, tied with 0 of an unsigned one, then after it).
The order is total and stable; it is not SQL's ``NULLS FIRST``, which colmz does not promise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colmz.kernels.encode import (
    bytes_widths,
    decode_bytes_fill,
    decode_bytes_lengths,
    encode_bytes,
    pad_words,
)

__all__ = [
    "ColumnSpec",
    "SIGN_BIT",
    "array_from_numpy",
    "Layout",
    "decode_columns",
    "encode_columns",
    "kind_of",
    "narrow_rows",
    "pad_keys",
    "column_from_raw_words",
    "raw_words",
    "search_range",
    "search_rows",
    "unify_layouts",
]

#: The bit an int64 word flips: a signed value plus the bit orders as an unsigned word.
SIGN_BIT = np.uint64(1 << 63)

#: Segment widths per column, then 1 if the null word is present else 0.
Layout = tuple[int, ...]


@dataclass(frozen=True)
class ColumnSpec:
    """A data column's name and Arrow type (``pa.null()`` until a batch gives a real type)."""

    name: str
    type: pa.DataType

    @property
    def kind(self) -> str:
        return kind_of(self.type, self.name)


def kind_of(t: pa.DataType, name: str = "?") -> str:
    """The encoding family of an Arrow type, or ``TypeError`` naming the column.

    >>> kind_of(pa.int32()), kind_of(pa.string()), kind_of(pa.timestamp("us"))
    ('int', 'bytes', 'int')
    """
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_interval(t):
        if t != pa.month_day_nano_interval():
            raise TypeError(f"data column {name!r} has unsupported interval type {t}: colmz keeps "
                            "intervals as month_day_nano_interval (PostgreSQL's months, days, time)")
        return "interval"
    if pa.types.is_signed_integer(t) or pa.types.is_temporal(t):
        return "int"
    if pa.types.is_unsigned_integer(t):
        return "uint"
    if pa.types.is_floating(t):
        return "float"
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return "bytes"
    if pa.types.is_dictionary(t):
        return kind_of(t.value_type, name)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        from colmz.order_bytes import check_element_type

        check_element_type(t, name)
        return "list"
    raise TypeError(
        f"data column {name!r} has unsupported type {t}: colmz supports signed/unsigned "
        "integers, floats, bool, date/time/timestamp/duration, intervals, string/binary and arrays of them"
    )


# ----------------------------------------------------------------------------- helpers


def array_from_numpy(values: np.ndarray, type: pa.DataType | None = None, mask=None) -> pa.Array:
    """A zero-copy Arrow array over a numeric or bool numpy array (``mask``: True = NULL).

    Built from buffers rather than with ``pa.array``, which imports pandas (a third of a
    second) the first time it sees a numpy array.

    >>> array_from_numpy(np.array([1, 2], np.int32), mask=np.array([False, True])).to_pylist()
    [1, None]
    """
    values = np.ascontiguousarray(values)
    n = len(values)
    if type is None:
        type = pa.bool_() if values.dtype == np.bool_ else pa.from_numpy_dtype(values.dtype)
    validity = None
    null_count = 0
    if mask is not None:
        null_count = int(np.count_nonzero(mask))
        if null_count:
            validity = pa.py_buffer(np.packbits(~np.asarray(mask, bool), bitorder="little"))
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(values)
    return pa.Array.from_buffers(type, n, [validity, data], null_count=null_count)


def _validity(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), np.bool_)
    if pa.types.is_null(arr.type):
        return np.zeros(len(arr), np.bool_)
    return _bits(arr.buffers()[0], arr.offset, len(arr))


def _bits(buf, offset: int, n: int) -> np.ndarray:
    # An Arrow bitmap as bools, without pyarrow.compute or the pandas import of to_numpy.
    if buf is None:
        return np.zeros(n, np.bool_)
    raw = np.frombuffer(buf, np.uint8)
    return np.unpackbits(raw, bitorder="little")[offset:offset + n].astype(bool)


def _fixed_values(arr: pa.Array, np_dtype) -> np.ndarray:
    # The physical values buffer, zero-copy; slots under NULLs hold arbitrary bytes.
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr), np_dtype)
    return np.frombuffer(buf, dtype=np_dtype, count=len(arr), offset=arr.offset * np.dtype(np_dtype).itemsize)


def _physical_int(t: pa.DataType):
    return np.dtype(f"int{t.bit_width}")


def _float_words(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = np.where(x == 0.0, 0.0, x)  # -0.0 -> 0.0
    x = np.where(np.isnan(x), np.nan, x)  # one NaN
    bits = x.view(np.uint64)
    neg = (bits >> np.uint64(63)).astype(bool)
    return np.where(neg, ~bits, bits | SIGN_BIT)


def _float_from_words(w: np.ndarray) -> np.ndarray:
    top = (w & SIGN_BIT).astype(bool)
    bits = np.where(top, w ^ SIGN_BIT, ~w)
    return bits.view(np.float64)


def _column_width(arr: pa.Array, kind: str) -> int:
    if kind == "null":
        return 0
    if kind != "bytes":
        return 1
    arr = _as_large(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    return int(bytes_widths(offsets, _validity(arr)))


def _as_large(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pa.types.is_string(t):
        return arr.cast(pa.large_string())
    if pa.types.is_binary(t):
        return arr.cast(pa.large_binary())
    return arr


def _flatten(arr) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


# ----------------------------------------------------------------------------- API


def encode_columns(columns, kinds=None, *, n: int | None = None) -> tuple[np.ndarray, Layout]:
    """Encode Arrow columns into a ``(n, W)`` ``uint64`` key matrix and its layout.

    ``n`` is the row count; it is needed only when there are no columns to take it from
    (updates without data columns: every row is the one empty row).

    >>> keys, layout = encode_columns([pa.array([2, -1, None])])
    >>> layout
    (1, 1)
    >>> [tuple(int(x) for x in r) for r in keys]  # doctest: +NORMALIZE_WHITESPACE
    [(9223372036854775810, 0), (9223372036854775807, 0), (0, 1)]
    """
    columns = [_flatten(c) for c in columns]
    if n is None:
        n = len(columns[0]) if columns else 0
    plain = _plain_words(columns, kinds, n)
    if plain is not None:
        return plain
    if kinds is None:
        kinds = [kind_of(c.type) for c in columns]
    if "list" in kinds or "interval" in kinds:
        # an array or an interval is encoded as its order bytes (colmz.order_bytes), a binary value
        from colmz.order_bytes import interval_to_order_bytes, list_to_order_bytes

        columns = [list_to_order_bytes(c) if k == "list" else interval_to_order_bytes(c) if k == "interval"
                   else c for c, k in zip(columns, kinds)]
        kinds = ["bytes" if k in ("list", "interval") else k for k in kinds]
    widths = [_column_width(c, k) for c, k in zip(columns, kinds)]
    has_nulls = any(c.null_count for c in columns)
    layout = (*widths, 1 if has_nulls else 0)
    W = sum(layout)
    keys = np.empty((n, W), np.uint64)
    col = 0
    null_word = np.zeros(n, np.uint64) if has_nulls else None
    for ci, (arr, kind, width) in enumerate(zip(columns, kinds, widths)):
        valid = _validity(arr)
        if null_word is not None and arr.null_count:
            null_word |= (~valid).astype(np.uint64) << np.uint64(ci)
        if kind == "null":
            continue
        if kind == "int":
            t = arr.type
            v = _fixed_values(arr, _physical_int(t)).astype(np.int64).view(np.uint64) ^ SIGN_BIT
        elif kind == "uint":
            v = _fixed_values(arr, np.dtype(f"uint{arr.type.bit_width}")).astype(np.uint64)
        elif kind == "float":
            v = _float_words(_fixed_values(arr, np.dtype(f"float{arr.type.bit_width}")))
        elif kind == "bool":
            v = _bits(arr.buffers()[1], arr.offset, len(arr)).astype(np.uint64)
        else:
            arr = _as_large(arr)
            offsets = np.frombuffer(
                arr.buffers()[1], np.int64, count=len(arr) + 1, offset=arr.offset * 8
            )
            data = arr.buffers()[2]
            data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
            encode_bytes(offsets, data, valid, width, keys, col)
            col += width
            continue
        if arr.null_count:
            v = np.where(valid, v, np.uint64(0))
        keys[:, col] = v
        col += 1
    if has_nulls:
        keys[:, col] = null_word
    return keys, layout


#: The kind :func:`encode_columns` gives each 64-bit integer type (the types :func:`_plain_words` encodes).
_PLAIN_KINDS = {pa.int64(): "int", pa.uint64(): "uint"}


def _plain_words(columns: list, kinds, n: int) -> tuple[np.ndarray, Layout] | None:
    """:func:`encode_columns` of 64-bit integer columns without NULLs (the common key and
    payload of a one-row commit), or ``None`` for any others: each column's word is its
    value (sign bit flipped when signed) -- the general path's answer, without its per-column
    set-up (kind lookups, widths, validity), which dominates a batch of a few rows."""
    if not columns:
        return None
    for i, c in enumerate(columns):
        k = _PLAIN_KINDS.get(c.type)
        if k is None or c.null_count or len(c) != n or (kinds is not None and kinds[i] != k):
            return None
    keys = np.empty((n, len(columns)), np.uint64)
    for i, c in enumerate(columns):
        buf = c.buffers()[1]
        if buf is None:
            return None
        v = np.frombuffer(buf, np.uint64, count=n, offset=c.offset * 8)
        if c.type == _INT64:
            np.bitwise_xor(v, SIGN_BIT, out=keys[:, i])
        else:
            keys[:, i] = v
    return keys, (*(1,) * len(columns), 0)


def decode_columns(keys: np.ndarray, layout: Layout, specs) -> list[pa.Array]:
    """Rebuild Arrow columns from encoded keys (inverse of :func:`encode_columns`).

    >>> keys, layout = encode_columns([pa.array(["b", None, ""])])
    >>> decode_columns(keys, layout, [ColumnSpec("s", pa.string())])[0].to_pylist()
    ['b', None, '']
    """
    n = keys.shape[0]
    has_nulls = layout[-1] == 1
    null_word = keys[:, sum(layout[:-1])] if has_nulls else None
    out = []
    col = 0
    for ci, (spec, width) in enumerate(zip(specs, layout[:-1])):
        t = spec.type
        kind = kind_of(t, spec.name)
        if null_word is not None:
            is_null = ((null_word >> np.uint64(ci)) & np.uint64(1)).astype(bool)
        else:
            is_null = np.zeros(n, bool)
        mask = is_null if is_null.any() else None
        if width == 0:
            # An all-NULL segment; the column may have a real type from other batches.
            out.append(pa.nulls(n, type=t))
            continue
        if kind == "null":
            raise TypeError(f"data column {spec.name!r} has values but type null")
        w = keys[:, col]
        if kind == "int":
            v = (w ^ SIGN_BIT).view(np.int64).astype(_physical_int(t), copy=False)
            arr = array_from_numpy(v, t, mask)
        elif kind == "uint":
            arr = array_from_numpy(w.astype(f"uint{t.bit_width}"), t, mask)
        elif kind == "float":
            arr = array_from_numpy(_float_from_words(w).astype(f"float{t.bit_width}"), t, mask)
        elif kind == "bool":
            arr = array_from_numpy(w != 0, pa.bool_(), mask)
        else:
            valid = ~is_null
            offsets = np.empty(n + 1, np.int64)
            decode_bytes_lengths(keys, col, width, valid, offsets)
            data = np.empty(int(offsets[-1]), np.uint8)
            decode_bytes_fill(keys, col, width, valid, offsets, data)
            large = pa.large_binary() if "binary" in str(t) or kind in ("list", "interval") \
                else pa.large_string()
            validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if mask is not None else None
            arr = pa.Array.from_buffers(
                large, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                null_count=int(is_null.sum()),
            )
            if kind == "list":
                from colmz.order_bytes import order_bytes_to_list

                arr = order_bytes_to_list(arr, t)
            elif kind == "interval":
                from colmz.order_bytes import order_bytes_to_interval

                arr = order_bytes_to_interval(arr)
            elif arr.type != t:
                arr = arr.cast(t)
        out.append(arr)
        col += width
    return out


def raw_words(columns) -> tuple[np.ndarray, np.ndarray] | None:
    """A lone 64-bit integer column without NULLs as ``(n, 1)`` ``uint64`` words, zero-copy.

    Returns ``(words, flips)`` -- the column's values viewed as ``uint64`` and the mask that
    turns them into the column's key words (``2**63`` for a signed column, whose key word is
    the value with its sign bit flipped; ``0`` for an unsigned one) -- for kernels that take
    flipped keys (``sort_consolidate(..., flips=)``), or ``None`` for any other columns. It
    saves encoding (a copy) the common key of a large batch; :func:`column_from_raw_words`
    is the way back.

    >>> words, flips = raw_words([pa.array([-1, 2])])
    >>> words.ravel().tolist(), flips.tolist()
    ([18446744073709551615, 2], [9223372036854775808])
    >>> raw_words([pa.array([1, None])]) is None
    True
    """
    if len(columns) != 1:
        return None
    col = columns[0]
    if not isinstance(col, pa.Array) or col.null_count:
        return None
    t = col.type
    if t == _INT64:
        flip = SIGN_BIT
    elif t == _UINT64:
        flip = np.uint64(0)
    else:
        return None
    buf = col.buffers()[1]
    if buf is None:
        return None
    words = np.frombuffer(buf, np.uint64, count=len(col), offset=col.offset * 8)
    if not words.flags.aligned:
        words = words.copy()
    return words.reshape(len(col), 1), np.array([flip], np.uint64)


def column_from_raw_words(words: np.ndarray, spec: ColumnSpec) -> pa.Array:
    """The Arrow column of ``(k, 1)`` raw words (inverse of :func:`raw_words`), zero-copy.

    >>> column_from_raw_words(np.array([[5]], np.uint64), ColumnSpec("k", pa.int64())).to_pylist()
    [5]
    """
    values = words.reshape(len(words))
    if spec.type == _INT64:
        values = values.view(np.int64)
    return array_from_numpy(values, spec.type)


_INT64 = pa.int64()
_UINT64 = pa.uint64()


def unify_layouts(*layouts: Layout) -> Layout:
    """The segment-wise widest of several layouts.

    >>> unify_layouts((1, 2, 0), (1, 3, 1))
    (1, 3, 1)
    """
    return tuple(max(ws) for ws in zip(*layouts))


def pad_keys(keys: np.ndarray, layout: Layout, target: Layout) -> np.ndarray:
    """Re-lay ``keys`` from ``layout`` out to the wider ``target`` by zero padding.

    >>> import numpy as np
    >>> pad_keys(np.array([[7]], np.uint64), (1, 0), (2, 1)).tolist()
    [[7, 0, 0]]
    """
    if layout == target:
        return keys
    if len(layout) != len(target) or any(a > b for a, b in zip(layout, target)):
        raise ValueError(f"cannot pad layout {layout} to {target}")
    src_starts = np.cumsum((0, *layout[:-1]), dtype=np.int64)
    dst_starts = np.cumsum((0, *target[:-1]), dtype=np.int64)
    out = np.empty((keys.shape[0], sum(target)), np.uint64)
    pad_words(keys, src_starts, np.array(layout, np.int64), dst_starts, out)
    return out


# ----------------------------------------------------------------------------- rows of words


def narrow_rows(rows: np.ndarray, layout: Layout, target: Layout) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` re-laid out in ``target`` and whether each can occur there at all.

    Padding is exact (module docstring); a segment narrower in ``target`` drops words, and a
    row whose dropped words are not all zero (a longer string, a NULL where ``target`` has no
    null word) cannot occur in a batch of that layout.
    """
    wide = unify_layouts(layout, target)
    rows = pad_keys(rows, layout, wide)
    if wide == target:
        return rows, np.ones(len(rows), bool)
    keep = []
    present = np.ones(len(rows), bool)
    start = 0
    for w, t in zip(wide, target):
        keep.extend(range(start, start + t))
        if w > t:
            present &= ~rows[:, start + t:start + w].any(axis=1)
        start += w
    return np.ascontiguousarray(rows[:, keep]), present


def search_range(sorted_rows: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(search_rows(sorted_rows, q, "left"), search_rows(sorted_rows, q, "right"))``: the
    rows equal to each query are ``[lo, hi)``.

    For a few queries of several words (:data:`SCALAR_SEARCHES`) the right end is found by
    galloping from the left one -- probes ``lo``, ``lo + 1``, ``lo + 3``, ... then a binary
    search in the last gap -- so a key held once or not at all (a consolidated run searched
    for a commit's row) costs one or two probes beyond the left search, not a second whole
    binary search (``O(log(hi - lo + 1))`` probes).

    >>> rows = np.array([[1, 5], [2, 0], [2, 0], [2, 7]], np.uint64)
    >>> lo, hi = search_range(rows, np.array([[2, 0], [0, 0], [2, 7]], np.uint64))
    >>> lo.tolist(), hi.tolist()
    ([1, 0, 3], [3, 0, 4])
    """
    n, w = sorted_rows.shape
    m = len(q)
    if w <= 1 or m > SCALAR_SEARCHES:
        return search_rows(sorted_rows, q, "left"), search_rows(sorted_rows, q, "right")
    lo_out = search_rows(sorted_rows, q, "left")
    hi_out = np.empty(m, np.int64)
    for i, row in enumerate(q.tolist()):
        a = int(lo_out[i])
        last, probe, step = a - 1, a, 1  # rows up to last equal row; probe is the next to look at
        while probe < n and sorted_rows[probe].tolist() == row:
            last, probe, step = probe, a + step, step * 2
        # the first unequal row is in (last, probe]: a binary search of that gap (rows from
        # a on are at least row: the equal ones come first)
        lo, hi = last + 1, min(probe, n)
        while lo < hi:
            mid = (lo + hi) // 2
            if sorted_rows[mid].tolist() == row:
                lo = mid + 1
            else:
                hi = mid
        hi_out[i] = lo
    return lo_out, hi_out


#: Up to this many queries :func:`search_rows` searches rows of several words one query at
#: a time (scalar probes), above it all at once (vectorised).
SCALAR_SEARCHES = 4


def search_rows(sorted_rows: np.ndarray, q: np.ndarray, side: str) -> np.ndarray:
    """``np.searchsorted`` for rows of words compared lexicographically (vectorised): one
    binary search over all of ``q`` at once, ``O(len(q) * log(len(sorted_rows)))``.

    >>> rows = np.array([[1, 5], [2, 0], [2, 7]], np.uint64)
    >>> search_rows(rows, np.array([[2, 0], [2, 3], [9, 9]], np.uint64), "left").tolist()
    [1, 2, 3]
    >>> search_rows(rows, np.array([[2, 0]], np.uint64), "right").tolist()
    [2]
    """
    n, w = sorted_rows.shape
    m = len(q)
    if w == 0:
        return np.full(m, 0 if side == "left" else n, np.int64)
    if w == 1:
        return np.searchsorted(sorted_rows[:, 0], q[:, 0], side).astype(np.int64)
    if m <= SCALAR_SEARCHES:
        # A few queries (a one-row commit's): a binary search each over Python lists of the
        # words, a fraction of a microsecond per probe, instead of the vectorised loop's
        # dozen array operations per probe.
        out = np.empty(m, np.int64)
        left = side == "left"
        for i, row in enumerate(q.tolist()):
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) // 2
                at = sorted_rows[mid].tolist()
                if at < row or (not left and at == row):
                    lo = mid + 1
                else:
                    hi = mid
            out[i] = lo
        return out
    lo = np.zeros(m, np.int64)
    hi = np.full(m, n, np.int64)
    idx = np.arange(m)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        at = sorted_rows[np.minimum(mid, n - 1)]
        neq = at != q
        c = neq.argmax(axis=1)
        less = neq.any(axis=1) & (at[idx, c] < q[idx, c])
        right = less if side == "left" else less | ~neq.any(axis=1)
        lo = np.where(active & right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)
