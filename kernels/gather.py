"""Kernels gathering a string or binary column in a given row order.

Design
------
Two callers put string values in an order other than the one they are stored in: a merged
read (``colmz.arrangement.read``) gathers each column once in the merged order, from the
runs' pieces; a write (``colmz.arrangement.parts``) gathers a batch's rows in sorted order,
a row group at a time. Both are reads at scattered positions: the bytes of consecutive
output rows lie far apart, and each row first needs its value's position. Arrow's ``take``
waits on memory for each row in turn. These kernels instead *prefetch*
(``colmz.kernels.decorators.prefetch``): the position of the row :data:`SPAN_AHEAD` rows
ahead and the bytes of the row :data:`BYTES_AHEAD` ahead are requested while the current row
is copied, so dozens of rows' memory accesses are in flight at once. Values are copied by
address (``colmz.kernels.decorators.copy_from_address``: short values 8 bytes at a time).

* :func:`gather_lengths` / :func:`gather_bytes` take from **several pieces** where they lie:
  output row ``i`` is global row ``g = rows[i]``, whose value's address and length the
  caller lays out per row beforehand in ``spans`` (a search over the pieces' row bounds per
  row mispredicts its branches: 40 ns a row), side by side so one cache line serves both.
  Concatenating the pieces first would copy the column once more, into fresh memory whose
  pages the system must first supply. (A scatter -- each piece written to its rows' output
  positions -- reads each piece once but sweeps the whole output once per piece: measured
  3x slower at 8 pieces.) In a merged read each run keeps its order, so reads follow the
  runs' ascending streams -- but interleaved, from more runs than the hardware prefetcher
  follows: 16-byte values from 14 runs took 6.1 ms, 4.3 ms prefetched.
* :func:`take_lengths` / :func:`take_bytes` take from **one array** by its offsets (no
  per-row layout to build: a write's batch may be large). A write's sorted order of random
  keys is a random permutation: 819,200 40-byte values in row groups of 65,536 take 74-78
  ms of CPU by Arrow's ``take``, 24-32 ms here.

Every cache line a value touches is prefetched (:func:`prefetch_value`, up to
:data:`PREFETCH_LINES`): a 40-byte value crosses a line 39 times in 64, and prefetching its
first byte alone left the second line to a demand miss -- the 40-byte take above took 48 ms
so, 8-byte values 12.

Output row ranges are independent, so callers may run halves side by side.

Spec (kernel / reference)
-------------------------
``gather_lengths(rows, spans, i0, i1, out_ends)`` and ``gather_bytes(rows, spans, i0, i1,
out_offsets, out_data)`` (``spans[g]`` the address and length of global row ``g``) /
``gather_binary_ref(pieces, rows)``.
``take_lengths(rows, offsets, i0, i1, out_ends)`` and ``take_bytes(rows, offsets, data, i0,
i1, out_offsets, out_data)`` / ``gather_binary_ref([values], rows)``.
``take_fixed(rows, src, i0, i1, out)`` / ``take_fixed_ref(rows, src)``.
``fill_spans(offsets, address, out)`` / ``fill_spans_ref(offsets, address)``.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import copy_from_address, jit, prefetch

__all__ = [
    "BYTES_AHEAD",
    "PREFETCH_LINES",
    "SPAN_AHEAD",
    "gather_binary_ref",
    "gather_bytes",
    "gather_lengths",
    "fill_spans",
    "fill_spans_ref",
    "take_bytes",
    "take_fixed",
    "take_fixed_ref",
    "take_lengths",
]

#: Rows ahead of the copy whose position (span or offsets) is prefetched.
SPAN_AHEAD = 64
#: Rows ahead of the copy whose bytes are prefetched (their position has arrived by then).
BYTES_AHEAD = 32
#: Cache lines of a value prefetched at most (longer values are copied by ``memcpy``, whose
#: sequential reads the hardware prefetcher follows).
PREFETCH_LINES = 4


@jit(inline=True)
def prefetch_value(address, length):
    # Every cache line of a value, up to PREFETCH_LINES of them: one of 40 bytes crosses a
    # line 39 times in 64, and a prefetch of its first byte alone left the second line to a
    # demand miss (819,200 values taken at random: 48 ms, against 12 for 8-byte ones).
    line = address & ~np.int64(63)
    end = min(address + length, line + PREFETCH_LINES * 64)
    while line < end:
        prefetch(line)
        line += 64


@jit
def gather_lengths(rows, spans, i0, i1, out_ends):
    """``out_ends[i] = spans[rows[i], 1]`` for ``i`` in ``[i0, i1)``: the output values'
    lengths, whose running sum (``out_ends`` being ``out_offsets[1:]``) gives the offsets."""
    span_base = spans.ctypes.data
    for i in range(i0, i1):
        if i + SPAN_AHEAD < i1:
            prefetch(span_base + rows[i + SPAN_AHEAD] * 16)
        out_ends[i] = spans[rows[i], 1]


@jit
def fill_spans(offsets, address, out):
    """One piece's rows of :func:`gather_bytes`' ``spans``: ``out[i] = (address +
    offsets[i], offsets[i + 1] - offsets[i])`` -- its values' addresses (``address`` that of
    the piece's data buffer) and lengths -- in one pass over its Arrow ``offsets``. Pieces
    fill disjoint rows, so callers fill several side by side."""
    for i in range(out.shape[0]):
        start = np.int64(offsets[i])
        out[i, 0] = address + start
        out[i, 1] = np.int64(offsets[i + 1]) - start


def fill_spans_ref(offsets, address: int) -> list[tuple[int, int]]:
    """Reference for :func:`fill_spans`: ``[(address + start, length)]`` per value.

    >>> fill_spans_ref([0, 3, 3, 5], 100)
    [(100, 3), (103, 0), (103, 2)]
    """
    return [(address + int(a), int(b) - int(a)) for a, b in zip(offsets[:-1], offsets[1:])]


@jit
def gather_bytes(rows, spans, i0, i1, out_offsets, out_data):
    """Copy the value of global row ``g = rows[i]`` for ``i`` in ``[i0, i1)`` --
    ``spans[g, 1]`` bytes at address ``spans[g, 0]``, in a buffer the caller keeps alive --
    to ``out_data`` at ``out_offsets[i]`` (``spans`` C-ordered)."""
    span_base = spans.ctypes.data
    for i in range(i0, i1):
        if i + SPAN_AHEAD < i1:
            prefetch(span_base + rows[i + SPAN_AHEAD] * 16)
        if i + BYTES_AHEAD < i1:
            ahead = rows[i + BYTES_AHEAD]
            prefetch_value(spans[ahead, 0], spans[ahead, 1])
        g = rows[i]
        size = spans[g, 1]
        if size > 0:
            copy_from_address(out_data, np.int64(out_offsets[i]), spans[g, 0], size)


@jit
def take_lengths(rows, offsets, i0, i1, out_ends):
    """``out_ends[i]``: the length of value ``rows[i]`` of an array with Arrow ``offsets``,
    for ``i`` in ``[i0, i1)``."""
    base = offsets.ctypes.data
    size = offsets.itemsize
    for i in range(i0, i1):
        if i + SPAN_AHEAD < i1:
            prefetch(base + rows[i + SPAN_AHEAD] * size)
        g = rows[i]
        out_ends[i] = offsets[g + 1] - offsets[g]


@jit
def take_bytes(rows, offsets, data, i0, i1, out_offsets, out_data):
    """Copy value ``rows[i]`` of the array with Arrow ``offsets`` into ``data`` to
    ``out_data`` at ``out_offsets[i]``, for ``i`` in ``[i0, i1)``."""
    base = offsets.ctypes.data
    size = offsets.itemsize
    data_base = data.ctypes.data
    for i in range(i0, i1):
        if i + SPAN_AHEAD < i1:
            prefetch(base + rows[i + SPAN_AHEAD] * size)
        if i + BYTES_AHEAD < i1:
            ahead = rows[i + BYTES_AHEAD]
            at = np.int64(offsets[ahead])
            prefetch_value(data_base + at, np.int64(offsets[ahead + 1]) - at)
        g = rows[i]
        start = np.int64(offsets[g])
        length = np.int64(offsets[g + 1]) - start
        if length > 0:
            copy_from_address(out_data, np.int64(out_offsets[i]), data_base + start, length)


@jit
def take_fixed(rows, src, i0, i1, out):
    """``out[i] = src[rows[i]]`` for ``i`` in ``[i0, i1)``: a fixed-width column taken in
    the order ``rows`` gives, the value :data:`SPAN_AHEAD` rows ahead prefetched (819,200
    random ``int64`` values in groups of 65,536: Arrow's ``take`` 7-8 ms, NumPy's 7-11,
    this 2.6-3.5)."""
    base = src.ctypes.data
    size = src.itemsize
    for i in range(i0, i1):
        if i + SPAN_AHEAD < i1:
            prefetch(base + rows[i + SPAN_AHEAD] * size)
        out[i] = src[rows[i]]


def take_fixed_ref(rows, src) -> list:
    """Reference for :func:`take_fixed`: ``[src[r] for r in rows]``.

    >>> take_fixed_ref([2, 0], [5, 6, 7])
    [7, 5]
    """
    return [src[r] for r in rows]


def gather_binary_ref(pieces, rows) -> list[bytes]:
    """Reference for :func:`gather_lengths` and :func:`gather_bytes` together (and, with one
    piece, for :func:`take_lengths` and :func:`take_bytes`): the value of each global row
    (``pieces`` lists of ``bytes``, their rows numbered one after another).

    >>> gather_binary_ref([[b"a", b"b"], [b"c"]], [2, 0])
    [b'c', b'a']
    """
    flat = [v for piece in pieces for v in piece]
    return [flat[g] for g in rows]
