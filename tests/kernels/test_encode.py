"""Encoding kernels (``colmz.kernels.encode``) against their pure-Python references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.encode import (
    bytes_widths,
    bytes_widths_ref,
    decode_bytes_fill,
    decode_bytes_lengths,
    decode_bytes_ref,
    encode_bytes,
    encode_bytes_ref,
    pad_words,
    pad_words_ref,
)

EXAMPLES = 80
values = st.lists(st.none() | st.binary(max_size=30) | st.sampled_from([b"", b"\0", b"a" * 7, b"a" * 8]),
                  max_size=30)


def arrow_like(vals):
    """Large-binary offsets, data and validity of a list of ``bytes`` (``None`` = NULL)."""
    valid = np.array([v is not None for v in vals], np.bool_)
    lengths = [len(v) if v is not None else 0 for v in vals]
    offsets = np.zeros(len(vals) + 1, np.int64)
    offsets[1:] = np.cumsum(lengths)
    data = np.frombuffer(b"".join(v for v in vals if v is not None), np.uint8).copy()
    return offsets, data, valid


@settings(max_examples=EXAMPLES)
@given(values, st.integers(0, 2))
def test_encode_decode_match_references(vals, extra):
    offsets, data, valid = arrow_like(vals)
    width = int(bytes_widths(offsets, valid))
    assert width == bytes_widths_ref(vals)
    width += extra  # a wider segment (another batch's layout) pads with zero words
    col = 1
    out = np.full((len(vals), width + 2), 7, np.uint64)
    encode_bytes(offsets, data, valid, width, out, col)
    expected = encode_bytes_ref(vals, width)
    assert [[int(x) for x in r[col:col + width]] for r in out] == expected
    assert (out[:, 0] == 7).all() and (out[:, -1] == 7).all()  # nothing outside the segment
    # the words order as the bytes do (NULLs aside)
    present = [(v, tuple(r)) for v, r in zip(vals, expected) if v is not None]
    for a, ra in present:
        for b, rb in present:
            assert (a < b) == (ra < rb) and (a == b) == (ra == rb)
    # and decode back
    got_offsets = np.empty(len(vals) + 1, np.int64)
    decode_bytes_lengths(out, col, width, valid, got_offsets)
    got = np.empty(int(got_offsets[-1]), np.uint8)
    decode_bytes_fill(out, col, width, valid, got_offsets, got)
    decoded = [bytes(got[got_offsets[i]:got_offsets[i + 1]]) if valid[i] else None for i in range(len(vals))]
    assert decoded == vals == decode_bytes_ref(out, col, width, valid)


@settings(max_examples=EXAMPLES)
@given(st.data())
def test_pad_words_matches_reference(data):
    nseg = data.draw(st.integers(1, 4))
    layout = tuple(data.draw(st.lists(st.integers(0, 3), min_size=nseg, max_size=nseg)))
    target = tuple(a + data.draw(st.integers(0, 2)) for a in layout)
    n = data.draw(st.integers(0, 10))
    keys = np.array(data.draw(st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=sum(layout),
                                                max_size=sum(layout)), min_size=n, max_size=n)),
                    np.uint64).reshape(n, sum(layout))
    out = np.full((n, sum(target)), 9, np.uint64)
    src = np.cumsum((0, *layout[:-1]), dtype=np.int64)
    dst = np.cumsum((0, *target[:-1]), dtype=np.int64)
    pad_words(keys, src, np.array(layout, np.int64), dst, out)
    np.testing.assert_array_equal(out, pad_words_ref(keys, layout, target))
