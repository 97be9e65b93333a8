"""Order-preserving encoding (``colmz.order``) against a Python reference order.

Properties: the lexicographic order of encoded rows is the reference total order on values
(:func:`updates_strategies.ref_key`), encoded rows are equal exactly when the rows are equal
with NULL = NULL, NaN = NaN and -0.0 = 0.0, the order holds across batches once their layouts
are harmonised by ``pad_keys``, and decoding inverts encoding.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.order import (
    ColumnSpec,
    decode_columns,
    encode_columns,
    kind_of,
    pad_keys,
    unify_layouts,
)


def dense_ranks(keys: list) -> list[int]:
    index = {k: i for i, k in enumerate(sorted(set(keys)))}
    return [index[k] for k in keys]


def word_rows(keys: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(r) for r in keys.tolist()]


def encode(u: colmz.Updates):
    return encode_columns([u.column(n) for n in u.column_names], us.kinds_of(u))


def assert_same_order(word_keys: list, ref_keys: list) -> None:
    """Same dense ranks: equal iff equal, and the same order, for every pair of rows."""
    assert dense_ranks(word_keys) == dense_ranks(ref_keys)


# ----------------------------------------------------------------------------- properties


@settings(max_examples=us.examples(150))
@given(us.updates(max_rows=30))
def test_encoded_order_is_reference_order(u):
    keys, layout = encode(u)
    assert keys.dtype == np.uint64 and keys.shape == (len(u), sum(layout))
    kinds = us.kinds_of(u)
    ref = [us.ref_key(kinds, row) for row in us.canon_rows(u)]
    assert_same_order(word_rows(keys), ref)


@settings(max_examples=us.examples(100))
@given(us.updates(max_rows=20))
def test_equal_words_iff_equal_values(u):
    keys, _ = encode(u)
    rows = us.canon_rows(u)
    words = word_rows(keys)
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            assert (words[i] == words[j]) == (rows[i] == rows[j]), (rows[i], rows[j])


@st.composite
def two_batches(draw):
    """Two batches of one collection; a column may be all-NULL of type null in one of them."""
    schema = draw(us.schemas())
    batches = []
    for _ in range(2):
        n = draw(st.integers(0, 15))
        cols = draw(us.arrow_columns(schema, n))
        nulled = draw(st.lists(st.booleans(), min_size=len(schema), max_size=len(schema)))
        cols = [pa.nulls(n) if z else c for c, z in zip(cols, nulled)]
        batches.append(
            colmz.Updates(
                {name: c for (name, _), c in zip(schema, cols)},
                np.zeros(n, np.uint64),
                np.ones(n, np.int64),
            )
        )
    return batches


@settings(max_examples=us.examples(120))
@given(two_batches())
def test_order_across_batches_after_pad(batches):
    a, b = batches
    ka, la = encode(a)
    kb, lb = encode(b)
    target = unify_layouts(la, lb)
    both = np.concatenate([pad_keys(ka, la, target), pad_keys(kb, lb, target)])
    whole = colmz.concat([a, b])
    kinds = us.kinds_of(whole)
    ref = [us.ref_key(kinds, r) for r in us.canon_rows(a) + us.canon_rows(b)]
    assert_same_order(word_rows(both), ref)
    # Padding gives exactly the encoding of the combined batch.
    kw, lw = encode(whole)
    assert lw == target
    np.testing.assert_array_equal(kw, both)


@settings(max_examples=us.examples(120))
@given(us.updates(max_rows=25))
def test_decode_inverts_encode(u):
    keys, layout = encode(u)
    cols = decode_columns(keys, layout, u.schema)
    for spec, col in zip(u.schema, cols):
        assert col.type == spec.type
    back = colmz.Updates({s.name: c for s, c in zip(u.schema, cols)}, u.time, u.diff)
    assert us.canon_rows(back) == us.canon_rows(u)


@settings(max_examples=us.examples(60))
@given(us.updates(max_rows=15), st.integers(0, 3))
def test_decode_of_padded_keys(u, extra):
    keys, layout = encode(u)
    # A wider layout (longer strings elsewhere, a null word) decodes to the same values.
    specs = u.schema
    target = tuple(
        w if s.kind != "bytes" else w + extra for w, s in zip(layout[:-1], specs)
    ) + (1,)
    cols = decode_columns(pad_keys(keys, layout, target), target, specs)
    back = colmz.Updates({s.name: c for s, c in zip(specs, cols)}, u.time, u.diff)
    assert us.canon_rows(back) == us.canon_rows(u)


# ----------------------------------------------------------------------------- examples


def test_string_order_examples():
    values = [
        "", "\x00", "\x00\x00", "a", "a\x00", "a\x00\x00", "ab", "abcdefg", "abcdefg\x00",
        "abcdefgh", "abcdefghijklmn", "abcdefghijklmn\x00", "abcdefghijklmno", "b", "é",
        "\U0010ffff",
    ]
    assert values == sorted(values, key=lambda s: s.encode())
    shuffled = values[::-1]
    keys, layout = encode_columns([pa.array(shuffled)])
    order = sorted(range(len(shuffled)), key=lambda i: tuple(keys[i].tolist()))
    assert [shuffled[i] for i in order] == values
    assert layout == (3, 0)  # 16-byte values: three 7-byte words


def test_long_strings_roundtrip():
    values = ["x" * n for n in (0, 6, 7, 8, 13, 14, 15, 21, 22, 100)] + ["\x00" * 15, None]
    for t in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        arr = pa.array([v if v is None or "string" in str(t) else v.encode() for v in values], t)
        keys, layout = encode_columns([arr])
        assert layout == (15, 1)
        out = decode_columns(keys, layout, [ColumnSpec("s", t)])[0]
        assert out.type == t and out.to_pylist() == arr.to_pylist()


def test_float_order_and_equality():
    values = [-math.inf, -1e300, -1.5, -5e-324, -0.0, 0.0, 5e-324, 1.5, 1e300, math.inf]
    keys, _ = encode_columns([pa.array(values)])
    w = keys[:, 0].tolist()
    assert w == sorted(w)
    assert w[4] == w[5]  # -0.0 == 0.0
    assert len(set(w)) == len(values) - 1
    nans = np.array([np.nan, -np.nan, np.float64("nan")], np.float64)
    nans = np.concatenate([nans, np.array([0x7FF0000000000001, 0xFFF8000000000123], np.uint64).view(np.float64)])
    kn, _ = encode_columns([pa.array(nans)])
    assert len(set(kn[:, 0].tolist())) == 1  # every NaN is one value
    assert kn[0, 0] > max(w)  # and it sorts last


def test_null_sorts_by_value_word_zero_then_null_bit():
    keys, layout = encode_columns([pa.array([None, -(2**63), 0], pa.int64())])
    assert layout == (1, 1)
    assert keys.tolist() == [[0, 1], [0, 0], [2**63, 0]]
    keys, _ = encode_columns([pa.array([None, ""])])
    assert keys.tolist() == [[0, 1], [0, 0]]  # NULL != "" (the null word differs)


def test_all_null_column_takes_no_value_words():
    keys, layout = encode_columns([pa.nulls(3), pa.array([1, 2, 3], pa.int64())])
    assert layout == (0, 1, 1)
    assert keys[:, 1].tolist() == [1, 1, 1]  # bit 0: column 0 is NULL


def test_fixed_width_fast_path_is_one_word_per_column():
    cols = [pa.array(np.arange(5, dtype=t)) for t in ("int8", "uint64", "float32")]
    cols.append(pa.array([True, False, True, False, True]))
    keys, layout = encode_columns(cols)
    assert layout == (1, 1, 1, 1, 0) and keys.shape == (5, 4)


@pytest.mark.parametrize(
    "t, values",
    [
        (pa.date32(), [0, -1, 19000, None]),
        (pa.date64(), [0, 86_400_000, None]),
        (pa.timestamp("ns"), [0, -1, 2**62, None]),
        (pa.timestamp("us", tz="UTC"), [0, -(10**12), None]),
        (pa.time32("s"), [0, 86_399, None]),
        (pa.time64("us"), [0, 10**9, None]),
        (pa.duration("ms"), [-5, 5, None]),
        (pa.float16(), [np.float16(1.5), np.float16(-0.0), None]),
        (pa.uint64(), [0, 2**64 - 1, None]),
        (pa.int8(), [-128, 127, None]),
        (pa.bool_(), [True, False, None]),
    ],
)
def test_roundtrip_and_order_of_other_types(t, values):
    if pa.types.is_temporal(t):
        arr = pa.array([v for v in values], pa.int64() if t.bit_width == 64 else pa.int32()).cast(t)
    else:
        arr = pa.array(values, t)
    keys, layout = encode_columns([arr])
    out = decode_columns(keys, layout, [ColumnSpec("x", t)])[0]
    assert out.type == t
    assert us.column_values(out) == [
        None if v is None else (0.0 if v == 0 and pa.types.is_floating(t) else v)
        for v in us.column_values(arr)
    ]
    kinds = [kind_of(t)]
    ref = [us.ref_key(kinds, (v,)) for v in us.column_values(arr)]
    assert_same_order(word_rows(keys), ref)


def test_sliced_and_chunked_and_dictionary_inputs():
    base = pa.array([5, None, -3, 7, None, 2], pa.int64())
    s = pa.array(["aaaaaaaaaa", None, "", "b", "c", "dddddddddddddddd"])
    k1, l1 = encode_columns([base.slice(2, 3), s.slice(2, 3)])
    k2, l2 = encode_columns([pa.array([-3, 7, None]), pa.array(["", "b", "c"])])
    assert l1 == l2
    np.testing.assert_array_equal(k1, k2)
    chunked = pa.chunked_array([base.slice(0, 2), base.slice(2)])
    np.testing.assert_array_equal(encode_columns([chunked])[0], encode_columns([base])[0])
    d = pa.array(["x", "y", "x", None]).dictionary_encode()
    np.testing.assert_array_equal(
        encode_columns([d])[0], encode_columns([pa.array(["x", "y", "x", None])])[0]
    )


@pytest.mark.parametrize(
    "t",
    [pa.list_(pa.decimal128(10, 2)), pa.list_(pa.int64(), 2), pa.struct([("a", pa.int64())]), pa.map_(pa.string(), pa.int64()),
     pa.decimal128(10, 2), pa.binary(3)],
)
def test_unsupported_type_names_the_column(t):
    with pytest.raises(TypeError, match=r"data column 'payload' has unsupported type"):
        kind_of(t, "payload")


def test_unify_and_pad_errors():
    assert unify_layouts((1, 2, 0), (1, 3, 1), (1, 1, 0)) == (1, 3, 1)
    keys = np.array([[1, 2, 3]], np.uint64)
    assert pad_keys(keys, (1, 2, 0), (1, 2, 0)) is keys
    assert pad_keys(keys, (1, 2, 0), (1, 4, 1)).tolist() == [[1, 2, 3, 0, 0, 0]]
    with pytest.raises(ValueError, match="cannot pad layout"):
        pad_keys(keys, (1, 2, 0), (1, 1, 0))
    with pytest.raises(ValueError, match="cannot pad layout"):
        pad_keys(keys, (1, 2, 0), (1, 2))


def test_empty_input():
    keys, layout = encode_columns([pa.array([], pa.string()), pa.array([], pa.int64())])
    assert keys.shape == (0, 1) and layout == (0, 1, 0)
    cols = decode_columns(keys, layout, [ColumnSpec("s", pa.string()), ColumnSpec("i", pa.int64())])
    assert [len(c) for c in cols] == [0, 0] and cols[0].type == pa.string()


def test_raw_words_views_a_lone_64_bit_column_and_round_trips():
    from colmz.order import column_from_raw_words, raw_words

    arr = pa.array([5, -3, 7, 2**62, -(2**63)], pa.int64()).slice(1, 3)
    words, flips = raw_words([arr])
    assert words.shape == (3, 1) and flips.tolist() == [2**63]
    keys, _ = encode_columns([arr])
    np.testing.assert_array_equal(words ^ flips, keys)  # flipped raw words are the key words
    back = column_from_raw_words(words.copy(), ColumnSpec("k", pa.int64()))
    assert back.to_pylist() == [-3, 7, 2**62]
    u = pa.array([1, 2**64 - 1], pa.uint64())
    words, flips = raw_words([u])
    assert flips.tolist() == [0]
    assert column_from_raw_words(words, ColumnSpec("k", pa.uint64())).to_pylist() == [1, 2**64 - 1]
    for other in ([pa.array([1, None])], [pa.array([1], pa.int32())], [arr, arr],
                  [pa.chunked_array([[1], [2]])], []):
        assert raw_words(other) is None


def test_search_rows_of_a_few_queries_matches_the_vectorised_search():
    # A few queries are searched one at a time (scalar probes), more all at once: the same
    # positions, for either side, over rows of several words with repeats.
    from colmz.order import SCALAR_SEARCHES, search_rows

    rng = np.random.default_rng(11)
    for n in (0, 1, 7, 300):
        rows = rng.integers(0, 4, (n, 3)).astype(np.uint64)
        rows = rows[np.lexsort(rows.T[::-1])] if n else rows
        q = rng.integers(0, 5, (40, 3)).astype(np.uint64)
        for side in ("left", "right"):
            want = search_rows(rows, q, side)  # 40 queries: vectorised
            got = np.concatenate([search_rows(rows, q[i:i + SCALAR_SEARCHES], side)
                                  for i in range(0, 40, SCALAR_SEARCHES)])
            assert got.tolist() == want.tolist()
            keys = [tuple(x) for x in rows.tolist()]
            for i, r in enumerate(q.tolist()):  # and both are bisect's answer
                b = (bisect.bisect_left if side == "left" else bisect.bisect_right)(keys, tuple(r))
                assert got[i] == b


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=60),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=6))
@settings(max_examples=200, deadline=None)
def test_search_range_is_both_bisects(rows, queries):
    # a few queries gallop from the left end to the right one, more take two searches: both
    # are bisect's left and right ends, keys held many times, once or not at all
    from colmz.order import search_range

    keys = sorted(rows)
    sorted_rows = np.array(keys, np.uint64).reshape(len(keys), 2)
    q = np.array(queries, np.uint64).reshape(len(queries), 2)
    lo, hi = search_range(sorted_rows, q)
    assert lo.tolist() == [bisect.bisect_left(keys, r) for r in queries]
    assert hi.tolist() == [bisect.bisect_right(keys, r) for r in queries]


@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**64 - 1)), max_size=8),
       st.integers(0, 3))
def test_64_bit_integer_columns_encode_to_their_words(rows, offset):
    # int64 / uint64 columns without NULLs (a one-row commit's) take the short path: each
    # word is the value, a signed one's sign bit flipped; sliced arrays read from their offset
    pad = [(0, 0)] * offset
    ints = pa.array([r[0] for r in pad + rows], pa.int64()).slice(offset)
    uints = pa.array([r[1] for r in pad + rows], pa.uint64()).slice(offset)
    keys, layout = encode_columns([ints, uints])
    assert layout == (1, 1, 0)
    assert word_rows(keys) == [(a + 2**63, b) for a, b in rows]
    with_null = pa.array([r[0] for r in rows] + [None], pa.int64())  # the general path's words agree
    assert word_rows(encode_columns([with_null])[0])[:-1] == [(a + 2**63, 0) for a, _ in rows]
