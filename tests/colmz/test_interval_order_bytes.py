"""Interval columns in colmz's row encoding (``colmz.order_bytes`` through ``colmz.order``).

Against a naive model: an interval is its fields ``(months, days, nanoseconds)``; its value
is PostgreSQL's ``interval_cmp_value`` (``(months * 30 + days) * DAY + nanoseconds``, Python
integers, no overflow) and its key ``(value, months, days)``. Encoded rows must decode to the
fields exactly, sort as the keys do (NULLs apart), hold equal first 16 order bytes exactly
when the values are equal (PostgreSQL's equality), and be equal exactly when the fields are
(colmz keeps written forms apart); consolidation of updates holding intervals cancels exactly
equal written forms only; the Parquet form (``colmz.column_types``) reads back exactly, in
a file and in a durable arrangement; arrays of intervals round-trip.
"""

from __future__ import annotations

import io
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.column_types import STORED_INTERVAL, from_storage, storage_table
from colmz.order import ColumnSpec, decode_columns, encode_columns, kind_of
from colmz.order_bytes import (
    DAY_NS,
    INTERVAL_VALUE_BYTES,
    interval_to_order_bytes,
    list_to_order_bytes,
    order_bytes_to_interval,
    order_bytes_to_list,
)

T = pa.month_day_nano_interval()
I32 = st.integers(-(2**31), 2**31 - 1)
#: fields: near-equal written forms (small values, whole days and months of time) and extremes
FIELDS = st.one_of(
    st.tuples(st.integers(-2, 2), st.integers(-60, 60), st.sampled_from([0, 1, -1, DAY_NS, -DAY_NS, 30 * DAY_NS,
                                                                        -30 * DAY_NS, 1000, 12 * 3600 * 10**9])),
    st.tuples(I32, I32, st.integers(-(2**63), 2**63 - 1)),
)
VALUES = st.lists(st.none() | FIELDS, max_size=12)


def model_value(f) -> int:
    months, days, ns = f
    return (months * 30 + days) * DAY_NS + ns


def model_key(f):
    return model_value(f), f[0], f[1]


def as_fields(arr: pa.Array) -> list:
    return [None if v is None else (v.months, v.days, v.nanoseconds) for v in arr.to_pylist()]


def test_kind():
    assert kind_of(T) == "interval"


@settings(max_examples=us.examples(200), deadline=None)
@given(VALUES)
def test_order_bytes_round_trip_order_and_equality(values):
    arr = pa.array(values, T)
    b = interval_to_order_bytes(arr)
    assert as_fields(order_bytes_to_interval(b)) == values
    raw = b.to_pylist()
    for i, x in enumerate(values):
        for j, y in enumerate(values):
            if x is None or y is None:
                continue
            assert (raw[i] < raw[j]) == (model_key(x) < model_key(y))
            assert (raw[i] == raw[j]) == (x == y)
            assert (raw[i][:INTERVAL_VALUE_BYTES] == raw[j][:INTERVAL_VALUE_BYTES]) == (model_value(x) == model_value(y))


@settings(max_examples=us.examples(200), deadline=None)
@given(VALUES, st.integers(0, 3))
def test_row_encoding_round_trip_and_sorts_as_the_model(values, cut):
    arr = pa.array(values, T).slice(min(cut, len(values)))  # offsets too
    kept = values[min(cut, len(values)):]
    keys, layout = encode_columns([arr])
    assert as_fields(decode_columns(keys, layout, [ColumnSpec("d", T)])[0]) == kept
    present = [i for i, v in enumerate(kept) if v is not None]
    rows = sorted(present, key=lambda i: tuple(int(w) for w in keys[i]))
    assert [model_key(kept[i]) for i in rows] == sorted(model_key(kept[i]) for i in present)


@settings(max_examples=us.examples(100), deadline=None)
@given(st.lists(st.tuples(st.none() | FIELDS, st.integers(0, 2), st.integers(-2, 2)), max_size=20))
def test_consolidation_keeps_written_forms_apart(rows):
    u = colmz.Updates({"d": pa.array([r[0] for r in rows], T)}, time=[r[1] for r in rows], diff=[r[2] for r in rows])
    c = colmz.consolidate(u)
    got = Counter()
    for d, t, n in zip(as_fields(c.column("d")), c.time, c.diff):
        assert got[(d, int(t))] == 0  # each (data, time) once
        got[(d, int(t))] += int(n)
    want = Counter()
    for d, t, n in rows:
        want[(d, t)] += n
    assert got == {k: v for k, v in want.items() if v} and all(v != 0 for v in got.values())


@settings(max_examples=us.examples(100), deadline=None)
@given(VALUES)
def test_parquet_form_reads_back_exactly(values):
    table = pa.table({"k": pa.array(range(len(values)), pa.int64()), "d": pa.array(values, T)})
    stored = storage_table(table)
    assert stored.schema.field("d").type == STORED_INTERVAL
    sink = io.BytesIO()
    pq.write_table(stored, sink)
    back = from_storage(pq.read_table(io.BytesIO(sink.getvalue())), {"d": T})
    assert back.schema.field("d").type == T and as_fields(back.column("d").combine_chunks()) == values


@settings(max_examples=us.examples(25), deadline=None)
@given(st.lists(st.tuples(FIELDS, st.integers(-2, 2)), max_size=10))
def test_durable_arrangement_holds_intervals(tmp_path_factory, rows):
    from colmz.arrangement import Arrangement

    path = tmp_path_factory.mktemp("arr")
    a = Arrangement.open(str(path), {"d": T})
    u = colmz.Updates({"d": pa.array([r[0] for r in rows], T)}, time=[0] * len(rows), diff=[r[1] for r in rows])
    a.write(u)
    a.seal(1)
    a.compact()
    want = Counter()
    for d, n in rows:
        want[d] += n
    b = Arrangement.open(str(path), {"d": T})
    snap = b.snapshot()
    got = Counter()
    for d, n in zip(as_fields(snap.column("d")), snap.diff):
        got[d] += int(n)
    assert got == {k: v for k, v in want.items() if v}


@settings(max_examples=us.examples(100), deadline=None)
@given(st.lists(st.none() | st.lists(st.none() | FIELDS, max_size=3), max_size=5))
def test_arrays_of_intervals_round_trip(values):
    t = pa.list_(T)
    back = order_bytes_to_list(list_to_order_bytes(pa.array(values, t)), t).to_pylist()
    assert [None if a is None else [None if v is None else (v.months, v.days, v.nanoseconds) for v in a]
            for a in back] == values
