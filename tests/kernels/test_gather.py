"""Gathers of string columns in a given row order (``colmz.kernels.gather``) against their
reference: from several pieces by per-row spans, and from one array by its offsets, each in
two halves as callers run them; values short (copied in words) and past ``SHORT_COPY``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.gather import (
    fill_spans,
    fill_spans_ref,
    gather_binary_ref,
    gather_bytes,
    gather_lengths,
    take_bytes,
    take_fixed,
    take_fixed_ref,
    take_lengths,
)

# bytes from a small alphabet with 0 and 255; lengths 0-20 and 60-100
BYTES = (st.lists(st.sampled_from([0, 97, 98, 255]), max_size=20).map(bytes)
         | st.binary(min_size=60, max_size=100))


@settings(max_examples=200)
@given(st.lists(st.lists(BYTES, max_size=8), min_size=1,
                max_size=5), st.data())
def test_gather_bytes_matches_reference(pieces, data):
    # Pieces as separate Arrow arrays (each its own buffers, some sliced so offsets do not
    # start at 0), gathered by address in two halves, as colmz.arrangement.read lays them out;
    # values of 0-20 bytes (copied in words, then bytes) and of 60-100 (past SHORT_COPY,
    # copied by memcpy).
    arrays = []
    for p in pieces:
        pad = data.draw(st.integers(0, 2))
        arrays.append(pa.array([b"pad"] * pad + p, pa.binary()).slice(pad))
    n = sum(len(p) for p in pieces)
    rows = np.array(data.draw(st.permutations(range(n))), np.int64)[:data.draw(st.integers(0, n))]
    spans = np.zeros((n, 2), np.int64)
    g = 0
    for a in arrays:
        o = np.frombuffer(a.buffers()[1], np.int32, count=len(a) + 1, offset=a.offset * 4)
        base = a.buffers()[2].address if a.buffers()[2] is not None else 0
        fill_spans(o, np.int64(base), spans[g:g + len(a)])
        assert spans[g:g + len(a)].tolist() == [list(x) for x in fill_spans_ref(o, base)]
        g += len(a)
    m = len(rows)
    out_offsets = np.zeros(m + 1, np.int32)
    cut = data.draw(st.integers(0, m))
    gather_lengths(rows, spans, 0, cut, out_offsets[1:])
    gather_lengths(rows, spans, cut, m, out_offsets[1:])
    np.cumsum(out_offsets[1:], out=out_offsets[1:])
    out_data = np.zeros(max(int(out_offsets[-1]), 1), np.uint8)
    gather_bytes(rows, spans, cut, m, out_offsets, out_data)
    gather_bytes(rows, spans, 0, cut, out_offsets, out_data)
    got = [out_data[out_offsets[i]:out_offsets[i + 1]].tobytes() for i in range(m)]
    assert got == gather_binary_ref(pieces, rows.tolist())


@settings(max_examples=200)
@given(st.lists(BYTES | st.none(), max_size=150), st.booleans(), st.data())
def test_take_bytes_matches_reference(values, large, data):
    # One array (sliced, int32 or int64 offsets; NULL slots are empty values to the kernel),
    # rows repeating and in any order, long enough that the prefetches point inside it.
    pad = data.draw(st.integers(0, 2))
    typ = pa.large_binary() if large else pa.binary()
    arr = pa.array([b"pad"] * pad + values, typ).slice(pad)
    odt = np.int64 if large else np.int32
    offsets = np.frombuffer(arr.buffers()[1], odt, count=len(arr) + 1, offset=arr.offset * odt().itemsize)
    buf = arr.buffers()[2]
    data_arr = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(1, np.uint8)
    n = len(values)
    rows = np.array(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=200)) if n else [],
                    np.int64)
    m = len(rows)
    out_offsets = np.zeros(m + 1, np.int64)
    cut = data.draw(st.integers(0, m))
    take_lengths(rows, offsets, cut, m, out_offsets[1:])
    take_lengths(rows, offsets, 0, cut, out_offsets[1:])
    np.cumsum(out_offsets[1:], out=out_offsets[1:])
    out_data = np.zeros(max(int(out_offsets[-1]), 1), np.uint8)
    take_bytes(rows, offsets, data_arr, 0, cut, out_offsets, out_data)
    take_bytes(rows, offsets, data_arr, cut, m, out_offsets, out_data)
    got = [out_data[out_offsets[i]:out_offsets[i + 1]].tobytes() for i in range(m)]
    assert got == gather_binary_ref([[v or b"" for v in values]], rows.tolist())


@settings(max_examples=100)
@given(st.sampled_from([np.uint8, np.int16, np.uint32, np.int64, np.float64]),
       st.lists(st.integers(0, 255), max_size=40), st.data())
def test_take_fixed_matches_reference(dtype, values, data):
    # every width the arrangement takes, repeated and empty row lists, in two halves
    src = np.array(values, dtype)
    n = len(src)
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=60)) if n else [], np.int64)
    out = np.empty(len(rows), dtype)
    half = len(rows) // 2
    source = src if n else np.zeros(1, dtype)
    take_fixed(rows, source, 0, half, out)
    take_fixed(rows, source, half, len(rows), out)
    assert out.tolist() == take_fixed_ref(rows.tolist(), src.tolist())
