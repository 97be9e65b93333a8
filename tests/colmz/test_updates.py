"""``colmz.Updates``: construction, validation messages, conversions, zero-copy, schemas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.order import ColumnSpec
from colmz.updates import Encoded, SchemaError, Updates, unify_schemas

# ----------------------------------------------------------------------------- round trips


@settings(max_examples=us.examples(80))
@given(us.updates(max_rows=20))
def test_arrow_roundtrip(u):
    t = u.to_arrow()
    assert t.schema.names == [*u.column_names, "time", "diff"]
    assert t.schema.field("time").type == pa.uint64()
    assert t.schema.field("diff").type == pa.int64()
    v = Updates.from_arrow(t)
    assert v == u
    assert v.schema == u.schema
    assert us.canon_rows(v) == us.canon_rows(u)


@settings(max_examples=us.examples(60))
@given(us.updates(max_rows=20))
def test_pandas_roundtrip_keeps_values(u):
    df = u.to_pandas()
    assert list(df.columns) == [*u.column_names, "time", "diff"]
    # An empty object column carries no type: the caller gives it (it raises otherwise).
    untyped = {s.name: s.type for s in u.schema if not len(u) and df[s.name].dtype == object}
    v = Updates.from_pandas(df, schema=untyped)
    assert v.column_names == u.column_names
    assert v.time.tolist() == u.time.tolist() and v.diff.tolist() == u.diff.tolist()
    # pandas has no NULL for every type: an int column with NULLs becomes float64 (NaN),
    # a float NULL becomes NaN, dates and timestamps become pandas' own types. Compare the
    # values that survive the trip.
    for s in u.schema:
        col = u.column(s.name)
        if pa.types.is_temporal(s.type) or (s.kind in ("int", "uint") and col.null_count):
            continue
        a = us.column_values(col)
        b = us.column_values(v.column(s.name))
        if s.kind == "float":
            a = [us.NAN if x is None else us._canon(x) for x in a]
            b = [us.NAN if x is None else us._canon(x) for x in b]
        assert a == b, s


def test_to_pylist_repr_and_html():
    u = Updates({"k": ["a", None], "x": [1.5, float("nan")]}, time=[0, 2**64 - 1], diff=[1, -1])
    rows = u.to_pylist()
    assert rows[0] == ("a", 1.5, 0, 1)
    assert rows[1][0] is None and rows[1][2:] == (2**64 - 1, -1)
    r = repr(u)
    assert r.startswith("Updates(2 updates; k: string, x: double, time: uint64, diff: int64)")
    assert "18446744073709551615" in r
    many = Updates({"k": np.arange(12)}, np.arange(12), np.ones(12, np.int64))
    assert "... 7 more" in repr(many)
    h = many._repr_html_()
    assert ">k</th>" in h and "2 more" in h and "k: int64, time: uint64, diff: int64" in h
    assert repr(Updates.empty({"k": pa.int64()})) == "Updates(0 updates; k: int64, time: uint64, diff: int64)"
    assert "<b>Updates</b> 1 update " in Updates({"k": ["<&>"]}, [0], [1])._repr_html_()
    assert "&lt;&amp;&gt;" in Updates({"k": ["<&>"]}, [0], [1])._repr_html_()


def test_no_data_columns():
    u = Updates({}, time=[1, 2], diff=[1, -1])
    assert len(u) == 2 and u.column_names == [] and u.to_pylist() == [(1, 1), (2, -1)]
    assert colmz.consolidate(u).to_pylist() == [(1, 1), (2, -1)]
    assert colmz.consolidate(Updates({}, time=[1, 1], diff=[1, -1])).to_pylist() == []


# ----------------------------------------------------------------------------- zero copy, memory


def test_numpy_inputs_with_copy_false_are_wrapped_read_only():
    k = np.arange(1000, dtype=np.int64)
    t = np.arange(1000, dtype=np.uint64)
    d = np.ones(1000, np.int64)
    u = Updates({"k": k}, t, d, copy=False)
    assert np.shares_memory(u.time, t) and np.shares_memory(u.diff, d)
    assert u.column("k").buffers()[1].address == k.ctypes.data
    # colmz cannot write through what it keeps; the caller's handles stay writable.
    assert not u._time.flags.writeable and not u._diff.flags.writeable
    assert t.flags.writeable and d.flags.writeable and k.flags.writeable
    assert u.to_pylist()[:2] == [(0, 0, 1), (1, 1, 1)]


def test_numpy_inputs_are_copied_by_default():
    k = np.arange(1000, dtype=np.int64)
    t = np.arange(1000, dtype=np.uint64)
    d = np.ones(1000, np.int64)
    u = Updates({"k": k}, t, d)
    assert not np.shares_memory(u.time, t) and not np.shares_memory(u.diff, d)
    assert u.column("k").buffers()[1].address != k.ctypes.data
    before = u.to_pylist()
    k[:] = -1
    t[:] = 7
    d[:] = 0
    assert u.to_pylist() == before
    assert u.time.tolist() == list(range(1000)) and u.diff.tolist() == [1] * 1000


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.uint64, np.float32, np.float64, np.bool_])
def test_numpy_data_columns_are_owned(dtype):
    k = (np.arange(6) % 2).astype(dtype)
    u = Updates({"k": k}, time=[0] * 6, diff=[1] * 6)
    before = u.to_pylist()
    k[:] = k[::-1].copy() if dtype == np.bool_ else 5
    assert u.to_pylist() == before
    assert colmz.consolidate(u).to_pylist() == colmz.consolidate(Updates({"k": pa.array([r[0] for r in before])},
                                                                         time=[0] * 6, diff=[1] * 6)).to_pylist()


def test_pandas_columns_are_owned():
    df = pd.DataFrame({"k": [1, 2, 3], "f": [0.5, 1.5, 2.5], "s": ["a", "b", "c"],
                       "time": np.array([0, 1, 2], np.uint64), "diff": [1, 1, 1]})
    u = Updates.from_pandas(df)
    before = u.to_pylist()
    df.loc[0, "k"] = 99
    df.loc[0, "f"] = 99.5
    df.loc[0, "s"] = "z"
    df.loc[0, "time"] = 7
    df.loc[0, "diff"] = 5
    assert u.to_pylist() == before == [(1, 0.5, "a", 0, 1), (2, 1.5, "b", 1, 1), (3, 2.5, "c", 2, 1)]
    # copy=False: a promise not to mutate the frame; what colmz keeps is read-only.
    v = Updates.from_pandas(df, copy=False)
    assert not v._time.flags.writeable and not v._diff.flags.writeable


def test_series_backed_by_caller_array_is_copied():
    # A Series wrapping a 1-D array hands that very array to numpy: copy it too.
    t = np.array([0, 1], np.uint64)
    d = np.array([1, 1], np.int64)
    u = Updates({"k": pd.Series(np.array([4, 5]))}, time=pd.Series(t), diff=pd.Series(d))
    t[:] = 9
    d[:] = 0
    assert u.to_pylist() == [(4, 0, 1), (5, 1, 1)]


def test_converted_inputs_are_not_copied_twice():
    # A dtype conversion already makes a new array: it is kept as it is (one copy, not two).
    t = np.array([0, 1], np.int64)
    u = Updates({"k": [1, 2]}, time=t, diff=[1, 1])
    assert u._time.flags.writeable and u._time.base is None
    t[:] = 5
    assert u.time.tolist() == [0, 1]


def test_copy_must_be_bool():
    with pytest.raises(TypeError, match="copy must be a bool"):
        Updates({"k": [1]}, time=[0], diff=[1], copy=1)


def test_internal_constructions_do_not_copy():
    u = Updates({"k": np.arange(10)}, np.arange(10, dtype=np.uint64), np.ones(10, np.int64))
    s = u.slice(2, 6)
    assert np.shares_memory(s.time, u.time) and np.shares_memory(s.diff, u.diff)
    n = u.negated()
    assert np.shares_memory(n.time, u.time)
    c = colmz.consolidate(u)
    enc = c.encode()
    back = Updates.decode(enc, c.schema)
    assert back._time is enc.time and back._diff is enc.diff
    both = colmz.concat([u])
    assert both is u


def test_arrow_inputs_are_wrapped_not_copied():
    table = pa.table(
        {"k": pa.array(np.arange(100)), "time": pa.array(np.arange(100, dtype=np.uint64)),
         "diff": pa.array(np.ones(100, np.int64))}
    )
    u = Updates.from_arrow(table)
    addr = lambda name: table.column(name).chunk(0).buffers()[1].address  # noqa: E731
    assert u.column("k").buffers()[1].address == addr("k")
    assert u.time.ctypes.data == addr("time")
    assert u.diff.ctypes.data == addr("diff")
    back = u.to_arrow()
    assert back.column("time").chunk(0).buffers()[1].address == addr("time")


def test_fixed_width_memory_overhead_at_most_ten_percent():
    n = 100_000
    cols = {"a": np.arange(n, dtype=np.int64), "b": np.arange(n, dtype=np.float64)}
    t = np.zeros(n, np.uint64)
    d = np.ones(n, np.int64)
    raw = sum(c.nbytes for c in cols.values()) + t.nbytes + d.nbytes
    before = pa.total_allocated_bytes()
    u = Updates(cols, t, d, copy=False)
    arrow_allocated = pa.total_allocated_bytes() - before
    assert u.nbytes == raw
    assert arrow_allocated <= 0.1 * raw  # zero-copy: nothing allocated beyond the inputs


def test_time_and_diff_are_read_only():
    u = Updates({"k": [1]}, time=[1], diff=[1])
    with pytest.raises(ValueError):
        u.time[0] = 5
    with pytest.raises(ValueError):
        u.diff[0] = 5
    with pytest.raises(AttributeError):
        u.foo = 1


# ----------------------------------------------------------------------------- conversions of time


def test_time_and_diff_conversions():
    u = Updates({"k": [1, 2]}, time=np.array([1.0, 2.0]), diff=np.array([1, -1], np.int8))
    assert u.time.dtype == np.uint64 and u.time.tolist() == [1, 2]
    assert u.diff.dtype == np.int64 and u.diff.tolist() == [1, -1]
    u = Updates({"k": [1, 2]}, time=[0, 2**64 - 1], diff=np.array([3, 4], np.uint32))
    assert u.time.tolist() == [0, 2**64 - 1] and u.diff.tolist() == [3, 4]
    u = Updates({"k": [1]}, time=np.array([7], np.int32), diff=[-(2**63)])
    assert u.time.tolist() == [7] and u.diff.tolist() == [-(2**63)]


def test_slice_and_negated():
    u = Updates({"k": ["a", "b", "c"]}, time=[0, 1, 2], diff=[1, -2, 3])
    s = u.slice(1, 3)
    assert s.to_pylist() == [("b", 1, -2), ("c", 2, 3)]
    assert np.shares_memory(s.time, u.time)
    assert u.negated().diff.tolist() == [-1, 2, -3]
    assert u.slice(2, 1).to_pylist() == []
    with pytest.raises(OverflowError, match=r"-2\*\*63"):
        Updates({"k": [1]}, time=[0], diff=[-(2**63)]).negated()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=3)), st.floats(allow_nan=True),
                          st.integers(0, 2**64 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=12),
       st.data())
def test_take_equals_picking_rows(rows, data):
    u = Updates({"s": pa.array([r[0] for r in rows], pa.string()), "f": pa.array([r[1] for r in rows], pa.float64())},
                time=np.array([r[2] for r in rows], np.uint64), diff=[r[3] for r in rows])
    idx = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=20) if rows else st.just([]))
    got = u.take(np.array(idx, dtype=np.int64))
    assert got.schema == u.schema
    want = [u.to_pylist()[i] for i in idx]
    assert repr(got.to_pylist()) == repr(want)  # repr: NaN compares equal to itself


def test_take_refuses_bad_positions():
    u = Updates({"k": [1, 2]}, time=[0, 1], diff=[1, 1])
    with pytest.raises(IndexError, match="position 2, outside a batch of 2"):
        u.take([0, 2])
    with pytest.raises(IndexError, match="position -1"):
        u.take([-1])
    with pytest.raises(TypeError, match="integer positions"):
        u.take(np.array([0.5]))
    assert u.take([]).to_pylist() == [] and u.take(np.array([], dtype=float)).schema == u.schema


def test_empty_and_column_access():
    e = Updates.empty({"k": pa.int64(), "s": pa.string()})
    assert len(e) == 0 and [s.type for s in e.schema] == [pa.int64(), pa.string()]
    assert e.to_pandas().shape == (0, 4)
    e2 = Updates.empty([ColumnSpec("k", pa.int64())])
    assert e2.schema == (ColumnSpec("k", pa.int64()),)
    with pytest.raises(KeyError, match="no data column 'zz'; data columns are"):
        e.column("zz")


def test_pandas_object_columns():
    df = pd.DataFrame({"s": ["a", None, "b"], "n": [None, None, None], "time": [0, 1, 2], "diff": [1, 1, 1]})
    u = Updates.from_pandas(df)
    assert [s.type for s in u.schema] == [pa.string(), pa.null()]
    assert u.to_pylist() == [("a", None, 0, 1), (None, None, 1, 1), ("b", None, 2, 1)]
    df = pd.DataFrame({"k": [1.5, np.nan], "t": [0, 1], "d": [1, 1]})
    u = Updates.from_pandas(df, time="t", diff="d")
    assert u.column("k").null_count == 0  # float NaN stays a NaN value, not NULL


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "make, exc, msg",
    [
        (lambda: Updates.from_arrow(pa.table({"k": [1], "diff": [1]})), KeyError,
         r"time column 'time' is missing"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": [1]})), KeyError,
         r"diff column 'diff' is missing"),
        (lambda: Updates.from_pandas(pd.DataFrame({"k": [1], "t": [1], "diff": [1]})), KeyError,
         r"time column 'time' is missing"),
        (lambda: Updates.from_pandas(pd.DataFrame({"k": [1], "time": [1]}), diff="w"), KeyError,
         r"diff column 'w' is missing"),
        (lambda: Updates({"k": [1]}, time=np.array([-1]), diff=[1]), ValueError,
         r"time column 'time' has negative time -1"),
        (lambda: Updates({"k": [1, 2]}, time=[3, -5], diff=[1, 1]), ValueError,
         r"time column 'time' has negative time -5"),
        (lambda: Updates({"k": [1]}, time=[-1.0], diff=[1]), ValueError,
         r"time column 'time' has negative time"),
        (lambda: Updates({"k": [1]}, time=[1.5], diff=[1]), ValueError,
         r"time column 'time' has fractional or infinite time"),
        (lambda: Updates({"k": [1]}, time=[float("inf")], diff=[1]), ValueError,
         r"fractional or infinite time"),
        (lambda: Updates({"k": [1]}, time=[None], diff=[1]), ValueError,
         r"time column 'time' has null time"),
        (lambda: Updates({"k": [1]}, time=[float("nan")], diff=[1]), ValueError,
         r"time column 'time' has null \(NaN\) time"),
        (lambda: Updates({"k": [1]}, time=[2**64], diff=[1]), ValueError,
         r"time column 'time' has a time beyond 2\*\*64-1"),
        (lambda: Updates({"k": [1]}, time=["x"], diff=[1]), TypeError,
         r"time column 'time' has non-integer"),
        (lambda: Updates({"k": [1]}, time=[True], diff=[1]), TypeError,
         r"time column 'time' has non-integer dtype bool"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": pa.array([None], pa.int64()), "diff": [1]})),
         ValueError, r"time column 'time' has 1 null time"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": [-3], "diff": [1]})), ValueError,
         r"time column 'time' has negative time -3"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": [0.5], "diff": [1]})), ValueError,
         r"fractional or infinite time"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": ["1"], "diff": [1]})), TypeError,
         r"time column 'time' has non-integer type string"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": pa.array([1], pa.date32()), "diff": [1]})),
         TypeError, r"time column 'time' has type date32\[day\]; colmz times are integers"),
        (lambda: Updates.from_pandas(pd.DataFrame({"k": [1], "time": pd.array([None], dtype="Int64"), "diff": [1]})),
         ValueError, r"time column 'time' has null"),
        (lambda: Updates({"k": [1]}, time=[1], diff=[None]), ValueError,
         r"diff column 'diff' has null diff"),
        (lambda: Updates({"k": [1]}, time=[1], diff=[float("nan")]), ValueError,
         r"diff column 'diff' has null \(NaN\) diff"),
        (lambda: Updates({"k": [1]}, time=[1], diff=[1.0]), TypeError,
         r"diff column 'diff' has non-integer dtype float64"),
        (lambda: Updates({"k": [1]}, time=[1], diff=["a"]), TypeError,
         r"diff column 'diff' has non-integer"),
        (lambda: Updates({"k": [1]}, time=[1], diff=[2**63]), OverflowError,
         r"diff column 'diff' has a diff beyond int64"),
        (lambda: Updates({"k": [1]}, time=[1], diff=np.array([2**63], np.uint64)), OverflowError,
         r"diff column 'diff' has a diff beyond int64"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": [1], "diff": pa.array([None], pa.int64())})),
         ValueError, r"diff column 'diff' has 1 null diff"),
        (lambda: Updates.from_arrow(pa.table({"k": [1], "time": [1], "diff": [1.5]})), TypeError,
         r"diff column 'diff' has non-integer type double"),
        (lambda: Updates.from_pandas(pd.DataFrame({"k": [1], "time": [1], "diff": pd.array([None], dtype="Int64")})),
         ValueError, r"diff column 'diff' has null"),
        # (arrays of supported types are data: colmz.order_bytes; an array of structs is not)
        (lambda: Updates.from_arrow(pa.table({"k": [[{"a": 1}]], "time": [1], "diff": [1]})), TypeError,
         r"data column 'k' has unsupported type struct<a: int64>"),
        (lambda: Updates.from_arrow(pa.table({"rec": [{"a": 1}], "time": [1], "diff": [1]})), TypeError,
         r"data column 'rec' has unsupported type struct<a: int64>"),
        (lambda: Updates.from_pandas(pd.DataFrame({"k": [[{"a": 1}]], "time": [1], "diff": [1]})), TypeError,
         r"data column 'k' has unsupported type struct"),
        (lambda: Updates({"k": pa.array([b"ab"], pa.binary(2))}, time=[1], diff=[1]), TypeError,
         r"data column 'k' has unsupported type fixed_size_binary"),
        (lambda: Updates({"k": np.array([1 + 2j])}, time=[1], diff=[1]), TypeError,
         r"data column 'k'"),
        (lambda: Updates({"k": [1, 2]}, time=[1], diff=[1]), ValueError,
         r"data column 'k' has 2 values but time has 1"),
        (lambda: Updates({"k": [1]}, time=[1], diff=[1, 2]), ValueError,
         r"diff has 2 values but time has 1"),
        (lambda: Updates({"time": [1]}, time=[1], diff=[1]), ValueError,
         r"data column named 'time' clashes with the time column"),
        (lambda: Updates({f"c{i}": [1] for i in range(65)}, time=[1], diff=[1]), ValueError,
         r"data has 65 columns; colmz supports at most 64"),
    ],
)
def test_bad_input_messages(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()


# ----------------------------------------------------------------------------- schemas


def test_unify_schemas():
    i = (ColumnSpec("k", pa.int64()), ColumnSpec("s", pa.string()))
    n = (ColumnSpec("k", pa.null()), ColumnSpec("s", pa.string()))
    n2 = (ColumnSpec("k", pa.int64()), ColumnSpec("s", pa.null()))
    assert unify_schemas(i, n) == i and unify_schemas(n, i) == i
    assert unify_schemas(n, n2) == i
    with pytest.raises(SchemaError, match=r"data columns differ: \['k', 's'\] vs \['k'\]"):
        unify_schemas(i, i[:1])
    with pytest.raises(SchemaError, match=r"data column 'k' has type int64 in one batch and double"):
        unify_schemas(i, (ColumnSpec("k", pa.float64()), ColumnSpec("s", pa.string())))
    assert issubclass(SchemaError, TypeError)


@settings(max_examples=us.examples(60))
@given(us.updates(max_rows=15))
def test_encode_decode_roundtrip(u):
    enc = u.encode()
    assert isinstance(enc, Encoded) and len(enc) == len(u)
    assert enc.nbytes == enc.keys.nbytes + enc.time.nbytes + enc.diff.nbytes
    back = Updates.decode(enc, u.schema)
    assert back.schema == u.schema
    assert us.canon_rows(back) == us.canon_rows(u)
    wide = enc.padded(tuple(w + 1 if s.kind == "bytes" else w for w, s in zip(enc.layout, u.schema)) + (1,))
    assert us.canon_rows(Updates.decode(wide, u.schema)) == us.canon_rows(u)


@given(st.lists(st.integers(0, 2**64 - 1), max_size=10))
@settings(max_examples=us.examples(30))
def test_python_int_times(times):
    u = Updates({"k": np.zeros(len(times), np.int64)}, time=times, diff=[1] * len(times))
    assert u.time.tolist() == times


# ----------------------------------------------------------------------------- input never guesses


def test_groupby_index_becomes_the_key_column():
    # The reported case: the key lives in the index after groupby; dropping it merged keys.
    events = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3], "time": [0, 0, 0], "diff": [1, 1, 1]})
    summed = events.groupby("k").sum()
    u = Updates.from_pandas(summed)
    assert u.column_names == ["k", "v"]
    assert colmz.consolidate(u).to_pylist() == [("a", 4, 0, 2), ("b", 2, 0, 1)]
    # Named MultiIndex levels lead, in order; time may be one of them.
    multi = events.groupby(["k", "time"]).agg({"v": "sum", "diff": "sum"})
    assert Updates.from_pandas(multi).to_pylist() == [("a", 4, 0, 2), ("b", 2, 0, 1)]


def test_unnamed_index_is_dropped_only_when_it_is_row_numbers():
    df = pd.DataFrame({"k": [1, 2, 3], "time": [0, 0, 0], "diff": [1, 1, 1]})
    assert Updates.from_pandas(df).column_names == ["k"]  # default RangeIndex: row numbers
    assert Updates.from_pandas(df.iloc[1:]).column_names == ["k"]  # still a RangeIndex
    filtered = df[df.k != 2]  # an unnamed Index([0, 2]): colmz does not guess
    with pytest.raises(ValueError, match=r"unnamed levels: colmz does not guess.*preserve_index=False"):
        Updates.from_pandas(filtered)
    assert Updates.from_pandas(filtered, preserve_index=False).to_pylist() == [(1, 0, 1), (3, 0, 1)]
    kept = Updates.from_pandas(filtered, preserve_index=True)
    assert kept.column_names == ["__index_level_0__", "k"]
    assert kept.to_pylist() == [(0, 1, 0, 1), (2, 3, 0, 1)]
    named = Updates.from_pandas(df.set_index("k"), preserve_index=False)
    assert named.column_names == []
    with pytest.raises(ValueError, match=r"index level\(s\) \['k'\] have the same name as a column"):
        Updates.from_pandas(df.set_index(pd.Index([5, 6, 7], name="k")))
    with pytest.raises(TypeError, match="preserve_index must be None or a bool"):
        Updates.from_pandas(df, preserve_index="yes")


def test_mixed_types_in_a_list_raise_like_pandas():
    # The reported case: ["1", 1] used to become two equal strings and merge.
    with pytest.raises(TypeError, match="data column 'k' cannot be converted to Arrow") as from_list:
        Updates({"k": ["1", 1]}, time=[0, 0], diff=[1, 1])
    with pytest.raises(TypeError, match="data column 'k' cannot be converted to Arrow") as from_frame:
        Updates.from_pandas(pd.DataFrame({"k": ["1", 1], "time": [0, 0], "diff": [1, 1]}))
    assert str(from_list.value) == str(from_frame.value)
    with pytest.raises(TypeError, match="data column 'b' cannot be converted"):
        Updates({"b": [True, 2]}, time=[0, 0], diff=[1, 1])  # numpy made this [1, 2]
    # What pandas accepts stays accepted and typed alike.
    for values in ([1, 2.5], [1, None], [2**64 - 1, 1], ["a", None], [1.5, float("nan")]):
        a = Updates({"k": values}, time=[0, 0], diff=[1, 1])
        b = Updates.from_pandas(pd.DataFrame({"k": values, "time": [0, 0], "diff": [1, 1]}))
        assert a.schema[0].type == b.schema[0].type or values == [1, None], values
    with pytest.raises(TypeError, match="fit neither int64 nor uint64"):
        Updates({"k": [-1, 2**64 - 1]}, time=[0, 0], diff=[1, 1])


def test_empty_untyped_columns_raise_or_take_the_callers_schema():
    with pytest.raises(TypeError, match=r"data column 'k' is empty and its values give no type: pass schema="):
        Updates({"k": []}, time=[], diff=[])
    u = Updates({"k": [], "s": []}, time=[], diff=[], schema={"k": pa.int32(), "s": pa.string()})
    assert u.schema == (ColumnSpec("k", pa.int32()), ColumnSpec("s", pa.string()))
    empty = pd.DataFrame({"s": pd.Series([], dtype=object), "n": pd.Series([], dtype="int64"),
                          "time": pd.Series([], dtype="int64"), "diff": pd.Series([], dtype="int64")})
    with pytest.raises(TypeError, match="data column 's' is empty"):
        Updates.from_pandas(empty)
    v = Updates.from_pandas(empty, schema={"s": pa.string()})
    assert v.schema == (ColumnSpec("s", pa.string()), ColumnSpec("n", pa.int64()))
    # Typed empties (numpy, Arrow) and all-NULL columns with rows need no schema.
    assert Updates({"k": np.array([], np.int16)}, time=[], diff=[]).schema[0].type == pa.int16()
    assert Updates({"k": [None, None]}, time=[0, 0], diff=[1, 1]).schema[0].type == pa.null()


def test_schema_keyword_converts_and_checks():
    u = Updates({"k": [1, 2], "f": np.array([0.5, 1.5])}, time=[0, 0], diff=[1, 1],
                schema=[ColumnSpec("k", pa.int16()), ColumnSpec("f", pa.float32())])
    assert [s.type for s in u.schema] == [pa.int16(), pa.float32()]
    assert u.to_pylist() == [(1, 0.5, 0, 1), (2, 1.5, 0, 1)]
    with pytest.raises(TypeError, match="data column 'k' of type int64 does not convert to the schema's type int8"):
        Updates({"k": np.array([1000])}, time=[0], diff=[1], schema={"k": pa.int8()})
    with pytest.raises(TypeError, match="data column 'k' cannot be converted to Arrow: Value 1000 too large"):
        Updates({"k": [1000]}, time=[0], diff=[1], schema={"k": pa.int8()})
    with pytest.raises(ValueError, match="schema names column 'z', which is not a data column"):
        Updates({"k": [1]}, time=[0], diff=[1], schema={"z": pa.int8()})
    with pytest.raises(TypeError, match="not an Arrow type"):
        Updates({"k": [1]}, time=[0], diff=[1], schema={"k": int})
    with pytest.raises(TypeError, match="unsupported type"):
        Updates({"k": [[{"a": 1}]]}, time=[0], diff=[1], schema={"k": pa.list_(pa.struct([("a", pa.int64())]))})
    # an array of a supported type is data
    assert Updates({"k": [[1, None]]}, time=[0], diff=[1], schema={"k": pa.list_(pa.int64())}).to_pylist() == \
        [([1, None], 0, 1)]


@pytest.mark.parametrize(
    ("a", "b", "wide"),
    [(pa.int32(), pa.int64(), pa.int64()), (pa.int8(), pa.int16(), pa.int16()),
     (pa.uint8(), pa.uint64(), pa.uint64()), (pa.float32(), pa.float64(), pa.float64()),
     (pa.float16(), pa.float32(), pa.float32())],
)
def test_lossless_widening_unifies(a, b, wide):
    sa = (ColumnSpec("k", a),)
    sb = (ColumnSpec("k", b),)
    assert unify_schemas(sa, sb) == unify_schemas(sb, sa) == (ColumnSpec("k", wide),)
    x = Updates({"k": pa.array([1, 2], a)}, time=[0, 0], diff=[1, 1])
    y = Updates({"k": pa.array([2, 3], b)}, time=[1, 1], diff=[1, 1])
    both = colmz.concat([x, y])
    assert both.schema == (ColumnSpec("k", wide),)
    assert colmz.consolidate(both, since=1).to_pylist() == [(1, 1, 1), (2, 1, 2), (3, 1, 1)]


@pytest.mark.parametrize(
    ("a", "b"),
    [(pa.int64(), pa.uint64()), (pa.uint32(), pa.int64()), (pa.int32(), pa.float64()),
     (pa.int64(), pa.float64()), (pa.timestamp("ms"), pa.timestamp("us")), (pa.int64(), pa.string())],
)
def test_lossy_mixing_still_raises(a, b):
    with pytest.raises(SchemaError, match="only lossless widening"):
        unify_schemas((ColumnSpec("k", a),), (ColumnSpec("k", b),))


# ----------------------------------------------------------------------------- encodings kept


@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
    st.booleans(),
    st.integers(0, 3),
)
@settings(max_examples=60, deadline=None)
def test_plain_int_fast_encoding_agrees_with_encode_columns(values, unsigned, offset):
    from colmz.order import encode_columns
    from colmz.updates import plain_int_words

    col = pa.array([v % 2**64 for v in values], pa.uint64()) if unsigned else pa.array(values, pa.int64())
    col = col.slice(min(offset, len(values)))  # the fast path must respect the Arrow offset
    n = len(col)
    fast = plain_int_words([col])
    keys, layout = encode_columns([col], n=n)
    assert layout == (1, 0)
    assert fast is not None and np.array_equal(fast, keys)
    u = Updates({"a": col}, time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64))
    assert u.encode().layout == layout and np.array_equal(u.encode().keys, keys)


def test_fast_encoding_declines_nulls_other_types_and_several_columns():
    from colmz.updates import plain_int_words

    assert plain_int_words([pa.array([1, None], pa.int64())]) is None
    assert plain_int_words([pa.array([1, 2], pa.int32())]) is None
    assert plain_int_words([pa.array([1]), pa.array([2])]) is None
    u = Updates({"a": [1, -2], "b": [3, 4]}, time=[0, 0], diff=[1, 1])
    from colmz.order import encode_columns

    keys, layout = encode_columns(list(u._columns))
    assert u.encode().layout == layout and np.array_equal(u.encode().keys, keys)


def test_structure_output_is_decoded_lazily_and_concat_keeps_encodings():
    c = colmz.Correction(chunk_size=2)
    c.insert(Updates({"k": ["a", "b", "c"]}, time=[1, 1, 1], diff=[1, 2, 3]))
    parts = list(c.updates_before(2))
    assert len(parts) == 2 and all(p._cols is None for p in parts)
    both = colmz.concat(parts)
    assert both._cols is None and both._enc is not None  # nothing decoded yet
    c.insert_negated(both)
    assert both._cols is None  # fed back without decoding
    assert both.to_pylist() == [("a", 1, 1), ("b", 1, 2), ("c", 1, 3)]
    assert both == Updates({"k": ["a", "b", "c"]}, time=[1, 1, 1], diff=[1, 2, 3])
    assert colmz.concat(c.updates_before(2)).to_pylist() == []
    neg = both.negated()
    assert neg._enc is not None and neg.to_pylist() == [("a", 1, -1), ("b", 1, -2), ("c", 1, -3)]


def test_negation_overflow_is_checked_in_one_place():
    from colmz.updates import negated_diff

    with pytest.raises(OverflowError, match="-2\\*\\*63"):
        negated_diff(np.array([1, -(2**63)], np.int64))
    enc = Updates({"k": [1]}, time=[0], diff=[-(2**63)]).encode()
    with pytest.raises(OverflowError, match="-2\\*\\*63"):
        enc.negated()
    assert enc.slice(0, 1).diff.tolist() == [-(2**63)]


def test_held_parts_are_the_batch_own_arrays_and_ops_and_correction_read_no_field():
    import inspect
    import re

    import colmz.ops
    from colmz.updates import cached_encoding, held_columns

    t, d = np.array([3, 1], np.uint64), np.array([1, -1], np.int64)
    u = Updates({"k": pa.array([7, 8])}, time=t, diff=d, copy=False)
    assert np.shares_memory(u.time, t) and np.shares_memory(u.diff, d)
    assert held_columns(u)[0].to_pylist() == [7, 8] and cached_encoding(u) is None
    made = Updates({"k": [7, 8]}, time=[3, 1], diff=[1, -1])
    out = Updates.decode(made.encode(), made.schema)
    assert cached_encoding(out) is not None and held_columns(out)[0].to_pylist() == [7, 8]
    # colmz.ops and colmz.correction take batches apart only through these (and build them
    # with Updates.from_checked / from_encoded): no reads of a batch's fields.
    import colmz.correction

    for module in (colmz.ops, colmz.correction):
        fields = re.findall(r"(?<!self)\.(_cols|_columns|_time|_diff|_enc|_schema)\b", inspect.getsource(module))
        assert fields == [], (module.__name__, fields)
