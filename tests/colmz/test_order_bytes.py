"""Array columns in colmz's row encoding (``colmz.order_bytes`` through ``colmz.order``).

Against a naive model: an array's key is the tuple of its elements' keys (a NULL element
``(1,)``, a value ``(2, key)``) closed by ``(0,)``, where a number's key is its value (every
NaN one value, above the others; ``-0.0`` is ``0.0``) and a string's its UTF-8 bytes. The
encoded rows must decode to the arrays, be equal exactly when the model's keys are and
sort as the keys do; consolidation of updates holding arrays cancels exactly equal arrays,
NULL elements included.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.order import ColumnSpec, decode_columns, encode_columns, kind_of
from colmz.order_bytes import list_to_order_bytes, order_bytes_to_list

ELEMENTS = {
    "int": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "small": (pa.int16(), st.integers(-3, 3)),
    "text": (pa.string(), st.text(alphabet="ab\x00\xff é", max_size=4)),
    "float": (pa.float64(), st.sampled_from([0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan, 1e300])),
    "bool": (pa.bool_(), st.booleans()),
    "binary": (pa.binary(), st.binary(max_size=3)),
}


def arrays(element: st.SearchStrategy, depth: int) -> st.SearchStrategy:
    inner = element if depth == 0 else arrays(element, depth - 1)
    return st.lists(st.none() | inner, max_size=4)


@st.composite
def columns(draw):
    name = draw(st.sampled_from(sorted(ELEMENTS)))
    t, element = ELEMENTS[name]
    depth = draw(st.integers(0, 1))
    for _ in range(depth + 1):
        t = pa.list_(t)
    values = draw(st.lists(st.none() | arrays(element, depth), min_size=1, max_size=12))
    # some values twice: equality is what consolidation relies on
    values += draw(st.lists(st.sampled_from(values), max_size=4))
    return t, values


def model_key(v):
    if v is None:
        return (1,)
    if isinstance(v, list):
        return (2, tuple(model_key(e) for e in v) + ((0,),))
    if isinstance(v, float):
        return (2, (1, 0.0) if math.isnan(v) else (0, v + 0.0))
    if isinstance(v, str):
        return (2, v.encode())
    return (2, v)


def canonical(v):
    if isinstance(v, list):
        return [canonical(e) for e in v]
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else v + 0.0
    return v


@settings(max_examples=us.examples(150), deadline=None)
@given(columns())
def test_arrays_round_trip_and_compare_as_the_model(col):
    t, values = col
    arr = pa.array(values, t)
    assert kind_of(t) == "list"
    keys, layout = encode_columns([arr])
    (back,) = decode_columns(keys, layout, [ColumnSpec("a", t)])
    assert back.type == t
    assert canonical(back.to_pylist()) == canonical(values)
    rows = [tuple(r) for r in keys.tolist()]
    # a NULL array: its null word, after the (zero) value words of an empty array... apart
    model = [(0,) if v is None else model_key(v) for v in values]
    for i in range(len(values)):
        for j in range(len(values)):
            assert (rows[i] == rows[j]) == (model[i] == model[j]), (values[i], values[j])
            if values[i] is not None and values[j] is not None:
                assert (rows[i] < rows[j]) == (model[i] < model[j]), (values[i], values[j])


@settings(max_examples=us.examples(60), deadline=None)
@given(columns(), st.data())
def test_consolidation_cancels_exactly_equal_arrays(col, data):
    t, values = col
    diffs = data.draw(st.lists(st.sampled_from([-1, 1, 2]), min_size=len(values), max_size=len(values)))
    u = colmz.Updates({"a": pa.array(values, t), "k": pa.array([0] * len(values), pa.int64())},
                      np.zeros(len(values), np.uint64), np.array(diffs, np.int64))
    out = colmz.consolidate(u)
    want: Counter = Counter()
    for v, d in zip(values, diffs):
        want[repr(model_key(v) if v is not None else None)] += d
    got: Counter = Counter()
    for row in out.to_pylist():
        v, _, _, d = row
        got[repr(model_key(v) if v is not None else None)] += d
    assert {k: n for k, n in want.items() if n} == dict(got)
    assert all(d != 0 for *_, d in out.to_pylist())


def test_order_bytes_of_arrays_are_named_by_their_layout():
    # the documented layout: tag, big-endian word, tag per element; the end tag
    a = list_to_order_bytes(pa.array([[1, None], [], None, [-1]], pa.list_(pa.int64())))
    assert a.to_pylist() == [bytes.fromhex("02" "8000000000000001" "01" "00"), b"\x00", None,
                             bytes.fromhex("02" "7fffffffffffffff" "00")]
    s = list_to_order_bytes(pa.array([["a\x00b"]], pa.list_(pa.string())))
    assert s.to_pylist() == [b"\x02a\x00\xffb\x00\x01\x00"]
    t = pa.list_(pa.list_(pa.string()))
    nested = pa.array([[["x", None], None, []]], t)
    assert order_bytes_to_list(list_to_order_bytes(nested), t).to_pylist() == nested.to_pylist()


def test_a_sliced_array_column_encodes_its_own_rows():
    arr = pa.array([[1], [2, 3], None, [4]], pa.list_(pa.int64())).slice(1, 2)
    keys, layout = encode_columns([arr])
    assert decode_columns(keys, layout, [ColumnSpec("a", arr.type)])[0].to_pylist() == [[2, 3], None]


@pytest.mark.parametrize("t", [pa.list_(pa.decimal128(10, 2)), pa.list_(pa.list_(pa.struct([("a", pa.int64())])))])
def test_arrays_of_unsupported_elements_name_the_column(t):
    with pytest.raises(TypeError, match=r"data column 'payload' has unsupported type"):
        kind_of(t, "payload")


@settings(max_examples=us.examples(25), deadline=None)
@given(st.lists(st.lists(st.tuples(st.none() | arrays(st.none() | st.sampled_from(["", "a", "a\x00", "prefix-0123-y" * 3]), 0),
                                   st.sampled_from([0, 1, None]), st.integers(0, 3), st.integers(-2, 2)),
                         min_size=1, max_size=6), min_size=1, max_size=5))
def test_a_durable_arrangement_of_arrays_reads_as_consolidated(batches):
    # parts of two rows and several runs: reads merge them, array columns ordered by their
    # full encodings (colmz.arrangement.read_words: an array's words are not exact)
    import uuid

    from colmz.arrangement import Arrangement

    schema = {"a": pa.list_(pa.string()), "i": pa.int64()}

    def updates(rows):
        a, i, t, d = zip(*rows)
        return colmz.Updates({"a": pa.array(a, schema["a"]), "i": pa.array(i, pa.int64())},
                             time=np.array(t, np.uint64), diff=np.array(d, np.int64))

    arr = Arrangement.open(f"mem://arrays-{uuid.uuid4().hex}", schema, part_rows=2, fan_in=64)
    written = []
    for rows in batches:
        arr.write(updates(rows))
        written += rows
    arr.seal(4)
    want = colmz.consolidate(updates(written), order="data", since=3)  # times advanced to the read's
    assert arr.read(3) == want
    arr.maintain()
    assert arr.read(3) == want
