"""Kernels of the order-preserving encoding: strings to key words and back, layout padding.

Design
------
``colmz/order.py`` defines the encoding of data rows into ``uint64`` key words and does the
fixed-width columns with numpy; the loops it cannot express with numpy live here. A string or
binary value becomes ``ceil(len / 7)`` words (at least one): 7 bytes per word, big-endian in
the word's top 7 bytes, and a low *marker* byte -- 8 when the value continues in the next
word, else the number of bytes of this last word (0 for the empty value). A segment is as
wide as its longest value; shorter values and NULLs fill the rest with zero words. The
markers make the order of the words the bytewise order of the values: a value that is a
proper prefix of another ends with a marker below 8 where the longer one continues with 8.

Padding (:func:`pad_words`) re-lays rows of one layout into a wider one by inserting zero
words at the end of each segment, which is what a batch with longer strings or NULLs would
have produced for the same rows (``colmz/order.py``, *Harmonising*).

Strings arrive as Arrow large (``int64``) offsets and a ``uint8`` data buffer, with a bool
validity array (``True`` = not NULL).

Spec (kernel / reference)
-------------------------
``bytes_widths(offsets, valid)`` -> widest segment in words (0 when no value is valid).
``encode_bytes(offsets, data, valid, width, out, col)`` fills ``out[:, col:col + width]``.
``decode_bytes_lengths(keys, col, width, valid, offsets)`` fills ``offsets`` (``n + 1``) from
the markers; ``decode_bytes_fill(keys, col, width, valid, offsets, data)`` then the bytes.
``pad_words(keys, src_starts, src_widths, dst_starts, out)`` fills the wider ``out``.
References: :func:`bytes_widths_ref`, :func:`encode_bytes_ref`, :func:`decode_bytes_ref`,
:func:`pad_words_ref` (plain Python over ``bytes`` and lists).
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.decorators import jit

__all__ = [
    "bytes_widths",
    "bytes_widths_ref",
    "decode_bytes_fill",
    "decode_bytes_lengths",
    "decode_bytes_ref",
    "encode_bytes",
    "encode_bytes_ref",
    "pad_words",
    "pad_words_ref",
]


@jit
def bytes_widths(offsets, valid):
    """Words of the widest valid value (``ceil(len / 7)``, at least 1); 0 when none is valid."""
    n = offsets.shape[0] - 1
    widest = 0
    for i in range(n):
        if valid[i]:
            length = offsets[i + 1] - offsets[i]
            nb = (length + 6) // 7
            if nb < 1:
                nb = 1
            if nb > widest:
                widest = nb
    return widest


def bytes_widths_ref(values) -> int:
    """Reference for :func:`bytes_widths` over a list of ``bytes`` (``None`` = NULL).

    >>> bytes_widths_ref([b"", None, b"12345678"])
    2
    """
    return max((max(1, -(-len(v) // 7)) for v in values if v is not None), default=0)


@jit
def encode_bytes(offsets, data, valid, width, out, col):
    """Write the 7-bytes-per-word encoding of each value into ``out[:, col:col + width]``."""
    n = offsets.shape[0] - 1
    for i in range(n):
        for k in range(width):
            out[i, col + k] = 0
        if not valid[i]:
            continue
        start = offsets[i]
        length = offsets[i + 1] - start
        k = 0
        pos = 0
        while True:
            take = length - pos
            if take > 7:
                take = 7
            w = np.uint64(0)
            for b in range(take):
                w |= np.uint64(data[start + pos + b]) << np.uint64(56 - 8 * b)
            pos += take
            if pos < length:
                out[i, col + k] = w | np.uint64(8)
                k += 1
            else:
                out[i, col + k] = w | np.uint64(take)
                break


def encode_bytes_ref(values, width: int) -> list[list[int]]:
    """Reference for :func:`encode_bytes`: each value's ``width`` words as Python ints.

    >>> [hex(w) for w in encode_bytes_ref([b"ab"], 2)[0]]
    ['0x6162000000000002', '0x0']
    """
    rows = []
    for v in values:
        words = [0] * width
        if v is not None:
            blocks = [v[i:i + 7] for i in range(0, len(v), 7)] or [b""]
            for k, block in enumerate(blocks):
                marker = 8 if k < len(blocks) - 1 else len(block)
                words[k] = int.from_bytes(block.ljust(7, b"\0"), "big") << 8 | marker
        rows.append(words)
    return rows


@jit
def decode_bytes_lengths(keys, col, width, valid, offsets):
    """Fill ``offsets`` (``n + 1``) with the value boundaries the markers of the segment give."""
    n = keys.shape[0]
    offsets[0] = 0
    for i in range(n):
        length = 0
        if valid[i]:
            for k in range(width):
                marker = keys[i, col + k] & np.uint64(255)
                if marker == 8:
                    length += 7
                else:
                    length += np.int64(marker)
                    break
        offsets[i + 1] = offsets[i] + length


@jit
def decode_bytes_fill(keys, col, width, valid, offsets, data):
    """Copy each valid value's bytes out of its words into ``data`` at ``offsets``."""
    n = keys.shape[0]
    for i in range(n):
        if not valid[i]:
            continue
        pos = offsets[i]
        for k in range(width):
            w = keys[i, col + k]
            marker = w & np.uint64(255)
            take = 7 if marker == 8 else np.int64(marker)
            for b in range(take):
                data[pos] = np.uint8((w >> np.uint64(56 - 8 * b)) & np.uint64(255))
                pos += 1
            if marker != 8:
                break


def decode_bytes_ref(keys, col: int, width: int, valid) -> list[bytes | None]:
    """Reference for :func:`decode_bytes_lengths` and :func:`decode_bytes_fill` together.

    >>> decode_bytes_ref(np.array([[0x6162000000000002, 0]], np.uint64), 0, 2, [True])
    [b'ab']
    """
    out: list[bytes | None] = []
    for i in range(len(keys)):
        if not valid[i]:
            out.append(None)
            continue
        value = b""
        for k in range(width):
            w = int(keys[i, col + k])
            marker = w & 255
            take = 7 if marker == 8 else marker
            value += (w >> 8).to_bytes(7, "big")[:take]
            if marker != 8:
                break
        out.append(value)
    return out


@jit
def pad_words(keys, src_starts, src_widths, dst_starts, out):
    """Copy each segment of ``keys`` to its start in the wider ``out``; the rest is zero."""
    n = keys.shape[0]
    nseg = src_starts.shape[0]
    m = out.shape[1]
    for i in range(n):
        for c in range(m):
            out[i, c] = 0
        for s in range(nseg):
            for k in range(src_widths[s]):
                out[i, dst_starts[s] + k] = keys[i, src_starts[s] + k]


def pad_words_ref(keys, layout, target) -> np.ndarray:
    """Reference for :func:`pad_words` by layouts (segment widths, the null word last).

    >>> pad_words_ref(np.array([[7, 1]], np.uint64), (1, 1), (2, 1)).tolist()
    [[7, 0, 1]]
    """
    rows = []
    for row in keys:
        out, at = [], 0
        for have, want in zip(layout, target):
            out += [int(x) for x in row[at:at + have]] + [0] * (want - have)
            at += have
        rows.append(out)
    return np.array(rows, np.uint64).reshape(len(rows), sum(target))
