"""Rows gathered by position: a sorted write's rows, a merged read's columns.

Layer
-----
Part of the *parts* layer of ``colmz.arrangement`` (``docs/arrangement.md``): Arrow arrays in,
Arrow arrays out, no storage. An internal API of the arrangement: a write gathers a batch's
rows in sorted order (:func:`take_rows`, ``colmz.arrangement.part_writer``), a merged read
gathers each column once in the merged order (:func:`gather_column`, :func:`gather_binary`,
``colmz.arrangement.read``).

Design
------
String and binary columns without NULLs are gathered by ``colmz.kernels.gather`` (each value
copied by address, its cache lines prefetched; a merged read's straight from the runs'
pieces, two threads on halves of the output), fixed-width columns of whole bytes without
NULLs by ``take_fixed`` (:func:`take_fixed_width`), every other column by Arrow's ``take``.
Values whose total length leaves a 32-bit offset type go to Arrow's ``take``, which decides.

Memory: a large read hands what Arrow's allocator holds back to the system as its inputs go
(:func:`release_memory`, reads of :data:`RELEASE_BYTES` or more); smaller reads leave it to
be reused by the next.

Invariant: a gather's result equals ``array.take(rows)`` (types, values and NULLs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.kernels.gather import (
    fill_spans,
    gather_bytes,
    gather_lengths,
    take_bytes,
    take_fixed,
    take_lengths,
)
from colmz.order import ColumnSpec

__all__ = [
    "RELEASE_BYTES",
    "binary_buffers",
    "binary_without_nulls",
    "gather_binary",
    "gather_column",
    "is_binary_type",
    "release_memory",
    "take_fixed_width",
    "take_rows",
]

def is_binary_type(typ: pa.DataType) -> bool:
    """Whether ``typ`` is a string or binary type of offsets and data (large or not): what
    :func:`binary_buffers` reads."""
    return (pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
            or pa.types.is_large_binary(typ))


def binary_buffers(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The Arrow offsets (``int32``, or ``int64`` for large types; ``len(col) + 1`` of them,
    from the array's own offset) and the data bytes of a string or binary array, as numpy
    views (an internal API of the arrangement: merged reads, write gathers)."""
    bufs = col.buffers()
    large = pa.types.is_large_string(col.type) or pa.types.is_large_binary(col.type)
    odt = np.int64 if large else np.int32
    offsets = np.frombuffer(bufs[1], odt, count=len(col) + 1, offset=col.offset * odt().itemsize)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def take_fixed_width(arr: pa.Array, rows: np.ndarray) -> pa.Array | None:
    """``arr.take(rows)`` by ``colmz.kernels.gather.take_fixed`` for a fixed-width array of
    whole bytes without NULLs (numbers, times, dates; not booleans or decimals), None for
    any other (an internal API of the arrangement: write gathers, merged reads). ``rows``
    are ``int64`` positions within ``arr``.

    >>> take_fixed_width(pa.array([10, 20, 30]), np.array([2, 2, 0])).to_pylist()
    [30, 30, 10]
    >>> take_fixed_width(pa.array([1, None]), np.array([0])) is None
    True
    """
    typ = arr.type
    if (arr.null_count or not pa.types.is_primitive(typ) or pa.types.is_boolean(typ)
            or typ.bit_width not in (8, 16, 32, 64)):
        return None
    width = typ.bit_width // 8
    word = np.dtype(f"u{width}")
    src = np.frombuffer(arr.buffers()[1], word, count=len(arr), offset=arr.offset * width)
    m = len(rows)
    buf = pa.allocate_buffer(m * width)
    take_fixed(rows, src if len(src) else np.zeros(1, word), 0, m, np.frombuffer(buf, word))
    return pa.Array.from_buffers(typ, m, [None, buf])


def take_rows(table: pa.Table, rows: np.ndarray, constant: Sequence[str] = ()) -> pa.Table:
    """``table``'s rows in the order ``rows`` gives: string and binary columns of one chunk
    without NULLs by ``colmz.kernels.gather.take_bytes`` (which prefetches the scattered
    values a sorted write reads: 819,200 40-byte values in row groups of 65,536, 74-78 ms
    of CPU by Arrow's ``take``, 24-32 ms), fixed-width columns of one chunk without NULLs
    by :func:`take_fixed_width`, the columns named in ``constant`` -- which the caller knows
    to hold one value throughout -- as a slice, the others by Arrow's ``take``.

    >>> t = pa.table({"s": ["a", "bc", "d"], "i": [1, 2, 3], "c": [7, 7, 7]})
    >>> take_rows(t, np.array([2, 0]), constant=["c"]).to_pylist()
    [{'s': 'd', 'i': 3, 'c': 7}, {'s': 'a', 'i': 1, 'c': 7}]
    """
    rows = np.ascontiguousarray(rows, np.int64)
    taken = None
    columns = []
    for name, col in zip(table.column_names, table.columns):
        if name in constant and len(rows) <= len(col):
            columns.append(col.slice(0, len(rows)))
            continue
        if is_binary_type(col.type) and col.num_chunks == 1 and not col.null_count:
            columns.append(_take_binary(col.chunk(0), rows))
            continue
        fixed = take_fixed_width(col.chunk(0), rows) if col.num_chunks == 1 else None
        if fixed is not None:
            columns.append(fixed)
            continue
        if taken is None:
            taken = pa.array(rows, pa.int64())
        columns.append(col.take(taken))
    return pa.Table.from_arrays(columns, schema=table.schema)


def _take_binary(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    # The values' lengths summed in int64 first: taken values (rows may repeat) can exceed
    # what the array's 32-bit offsets hold, and Arrow's take then decides.
    offsets, data = binary_buffers(arr)
    m = len(rows)
    ends = np.empty(m + 1, np.int64)
    ends[0] = 0
    take_lengths(rows, offsets, 0, m, ends[1:])
    np.cumsum(ends[1:], out=ends[1:])
    odt = offsets.dtype
    if int(ends[-1]) > np.iinfo(odt).max:
        return arr.take(pa.array(rows, pa.int64()))
    offsets_buf = pa.allocate_buffer((m + 1) * odt.itemsize)
    out_offsets = np.frombuffer(offsets_buf, odt)
    out_offsets[:] = ends
    data_buf = pa.allocate_buffer(max(int(ends[-1]), 1))
    take_bytes(rows, offsets, data if len(data) else np.zeros(1, np.uint8), 0, m, out_offsets,
               np.frombuffer(data_buf, np.uint8))
    return pa.Array.from_buffers(arr.type, m, [None, offsets_buf, data_buf])


def gather_column(cols: list[pa.Array], spec: ColumnSpec, rows: np.ndarray,
                  release: bool = False) -> pa.Array:
    """The column of a merged read's ``rows`` (positions in the pieces ``cols`` laid end to
    end): the pieces concatenated and dropped (``cols`` is emptied), then one take in output
    order (writes sequential, reads following the runs' ascending streams) --
    :func:`take_fixed_width` for fixed-width values without NULLs, Arrow's take for the
    others. At most two copies of the column exist at once, where Arrow's take of a chunked
    array would hold the inputs, their concatenation and the output together."""
    whole = cols[0] if len(cols) == 1 else pa.concat_arrays(cols)
    cols.clear()
    release_memory(release)
    taken = take_fixed_width(whole, rows)
    if taken is None:
        taken = whole.take(pa.array(rows, pa.int64()))
    del whole
    release_memory(release)
    return taken


def binary_without_nulls(cols: list[pa.Array]) -> bool:
    """Whether :func:`gather_binary` takes ``cols``: strings or binaries without NULLs."""
    return is_binary_type(cols[0].type) and not any(c.null_count for c in cols)


def gather_binary(cols: list[pa.Array], rows: np.ndarray, bounds: np.ndarray,
                  pool, empty=np.empty) -> pa.Array | None:
    """A string or binary column without NULLs gathered in the order of ``rows`` straight
    from its pieces ``cols`` (``bounds``: where each piece starts among the rows;
    ``kernels/gather.gather_bytes``: no concatenation, two threads on halves of the output
    when ``pool`` is given); None for other columns. Empties ``cols`` when it gathers."""
    typ = cols[0].type
    if not binary_without_nulls(cols):
        return None
    bufs = [binary_buffers(c) for c in cols]
    odt = bufs[0][0].dtype
    if sum(int(o[-1]) - int(o[0]) for o, _ in bufs) > np.iinfo(odt).max:
        return None
    # each global row's value: its address (in its piece's data buffer) and its length,
    # side by side (the gather reads both for each row)
    n = int(bounds[-1])
    spans = empty(2 * n, np.int64).reshape(n, 2)

    # each piece's offsets and the address of its data (binary_buffers views the whole buffer)
    sources = [(o, np.int64(data.ctypes.data)) for o, data in bufs]

    def fill(p0: int, p1: int) -> None:
        for p in range(p0, p1):
            fill_spans(*sources[p], spans[bounds[p]:bounds[p + 1]])

    # the pieces in two groups of about n / 2 rows, side by side
    half = int(np.searchsorted(bounds, n // 2))
    _halves(pool, [0, len(cols)] if pool is None else [0, half, len(cols)], fill)
    m = len(rows)
    offsets_buf = pa.allocate_buffer((m + 1) * odt.itemsize)
    out_offsets = np.frombuffer(offsets_buf, odt)
    out_offsets[0] = 0
    ends = out_offsets[1:]
    cuts = [0, m] if pool is None else [0, m // 2, m]
    _halves(pool, cuts, lambda i0, i1: gather_lengths(rows, spans, i0, i1, ends))
    np.cumsum(ends, out=ends)
    data_buf = pa.allocate_buffer(max(int(out_offsets[-1]), 1))
    out_data = np.frombuffer(data_buf, np.uint8)
    _halves(pool, cuts, lambda i0, i1: gather_bytes(rows, spans, i0, i1, out_offsets, out_data))
    out = pa.Array.from_buffers(typ, m, [None, offsets_buf, data_buf])
    del bufs
    cols.clear()  # the pieces' buffers, whose addresses the kernel read, were held till here
    return out


def _halves(pool, cuts: list[int], fn) -> None:
    # fn(i0, i1) over consecutive ranges of ``cuts``, side by side on ``pool`` when given.
    if pool is None:
        for i0, i1 in zip(cuts, cuts[1:]):
            fn(i0, i1)
        return
    for f in [pool.submit(fn, i0, i1) for i0, i1 in zip(cuts, cuts[1:])]:
        f.result()


#: Reads whose inputs take at least this many bytes hand the memory Arrow's allocator holds
#: back to the system as they go (:func:`release_memory`); smaller reads leave it to be reused.
RELEASE_BYTES = 256 << 20


def release_memory(release: bool = True) -> None:
    """Hand the memory Arrow's allocator holds freed back to the system now, when ``release``
    (reads of :data:`RELEASE_BYTES` or more)."""
    # Arrow's allocator keeps what the reader threads allocated and the main thread frees in
    # those threads' heaps, where the gather's allocations do not reuse it (a 1 GiB read from
    # 14 runs peaked at 2.52x its result's size without, 1.93x with). The price is paid by
    # the next read, whose allocations then take fresh pages from the system (here slower
    # than writing them): a 50 MiB read from 8 runs took 10-25% longer releasing than
    # leaving the memory to be reused, so reads below RELEASE_BYTES -- whose held memory is
    # bounded by it -- do not.
    if release:
        pa.default_memory_pool().release_unused()
