"""``colmz.consolidate`` and ``colmz.concat`` (runtime control is tested in ``test_runtime.py``).

``consolidate`` is checked against a multiset oracle (a ``Counter`` over Python values with
NULL = NULL, NaN = NaN and -0.0 = 0.0) and the reference total order of
``updates_strategies``; ``concat`` against the concatenation of the rows.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.ops import DiffOverflowError, find_overflow

INT64_MAX, INT64_MIN = us.INT64_MAX, us.INT64_MIN


def check_consolidated(u: colmz.Updates, out: colmz.Updates, order: str, since) -> None:
    """``out`` is the consolidation of ``u``: the oracle's multiset, strictly sorted."""
    assert out.schema == u.schema
    assert us.as_dict(out) == us.oracle(u, since)
    kinds = us.kinds_of(u)
    rows = us.canon_rows(out)
    times = out.time.tolist()
    if order == "time":
        keys = [(t, us.ref_key(kinds, r)) for r, t in zip(rows, times)]
    else:
        keys = [(us.ref_key(kinds, r), t) for r, t in zip(rows, times)]
    assert all(a < b for a, b in zip(keys, keys[1:])), "not strictly sorted"


def consolidate_or_overflow(u, order, since):
    try:
        expected = us.oracle(u, since)
    except OverflowError:
        with pytest.raises(OverflowError, match="diff overflow"):
            colmz.consolidate(u, order=order, since=since)
        return None
    out = colmz.consolidate(u, order=order, since=since)
    assert len(out) == len(expected)
    check_consolidated(u, out, order, since)
    return out


@settings(max_examples=us.examples(200))
@given(
    us.updates(max_rows=30),
    st.sampled_from(["time", "data"]),
    st.none() | us.time_strategy(),
)
def test_consolidate_matches_multiset_oracle(u, order, since):
    consolidate_or_overflow(u, order, since)


@settings(max_examples=us.examples(60))
@given(us.updates(max_rows=30, huge_diffs=False), st.sampled_from(["time", "data"]))
def test_consolidate_is_idempotent_and_ignores_input_order(u, order):
    out = colmz.consolidate(u, order=order)
    assert colmz.consolidate(out, order=order) == out
    perm = np.random.default_rng(len(u)).permutation(len(u))
    shuffled = colmz.Updates(
        {n: u.column(n).take(pa.array(perm, pa.int64())) for n in u.column_names},
        u.time[perm],
        u.diff[perm],
    )
    assert colmz.consolidate(shuffled, order=order) == out


@settings(max_examples=us.examples(40))
@given(us.updates(min_rows=1, max_rows=20, huge_diffs=False))
def test_all_cancelling_input_consolidates_to_nothing(u):
    both = colmz.concat([u, u.negated()])
    for order in ("time", "data"):
        out = colmz.consolidate(both, order=order)
        assert len(out) == 0 and out.schema == u.schema


@st.composite
def batch_lists(draw):
    schema = draw(us.schemas(max_cols=3))
    k = draw(st.integers(1, 4))
    batches = []
    for _ in range(k):
        b = draw(us.updates(schema=schema, max_rows=8, huge_diffs=False))
        if draw(st.booleans()):  # an all-NULL column arrives as type null in this batch
            i = draw(st.integers(0, len(schema) - 1))
            cols = {n: b.column(n) for n in b.column_names}
            name = schema[i][0]
            cols[name] = pa.nulls(len(b))
            b = colmz.Updates(cols, b.time, b.diff)
        batches.append(b)
    return batches


@settings(max_examples=us.examples(80))
@given(batch_lists())
def test_concat_matches_rows_and_consolidates(batches):
    whole = colmz.concat(batches)
    assert len(whole) == sum(len(b) for b in batches)
    assert sum((us.canon_rows(b) for b in batches), []) == us.canon_rows(whole)
    assert whole.time.tolist() == sum((b.time.tolist() for b in batches), [])
    assert whole.diff.tolist() == sum((b.diff.tolist() for b in batches), [])
    for s in whole.schema:
        typed = {b.column(s.name).type for b in batches} - {pa.null()}
        assert s.type == (typed.pop() if typed else pa.null())
    check_consolidated(whole, colmz.consolidate(whole), "time", None)


# ----------------------------------------------------------------------------- examples


def test_empty_and_single_row():
    e = colmz.Updates.empty({"k": pa.int64(), "s": pa.string()})
    for order in ("time", "data"):
        out = colmz.consolidate(e, order=order, since=5)
        assert len(out) == 0 and out.schema == e.schema
    one = colmz.Updates({"k": [7], "s": ["x"]}, time=[3], diff=[-2])
    assert colmz.consolidate(one).to_pylist() == [(7, "x", 3, -2)]
    assert colmz.consolidate(one, since=10).to_pylist() == [(7, "x", 10, -2)]
    zero = colmz.Updates({"k": [7]}, time=[3], diff=[0])
    assert len(colmz.consolidate(zero)) == 0


def test_null_nan_and_negative_zero_equalities():
    u = colmz.Updates(
        {"f": [float("nan"), -float("nan"), -0.0, 0.0, None, None], "s": ["", "", "a", "a", None, ""]},
        time=[1] * 6,
        diff=[1, 1, 1, 1, 1, 1],
    )
    out = colmz.consolidate(u)
    rows = [(us._canon(f), s, d) for f, s, _, d in out.to_pylist()]
    assert sorted(rows, key=repr) == sorted(
        [(us.NAN, "", 2), (0.0, "a", 2), (None, None, 1), (None, "", 1)], key=repr
    )


def test_times_at_the_top_of_the_range():
    top = 2**64 - 1
    u = colmz.Updates({"k": [1, 1, 2, 2]}, time=[top, top, top - 1, 0], diff=[1, 1, 1, -1])
    assert colmz.consolidate(u).to_pylist() == [(2, 0, -1), (2, top - 1, 1), (1, top, 2)]
    assert colmz.consolidate(u, since=top).to_pylist() == [(1, top, 2)]
    # (2, top-1, +1) and (2, 0 -> top-1, -1) cancel
    assert colmz.consolidate(u, order="data", since=top - 1).to_pylist() == [(1, top, 2)]


@pytest.mark.parametrize(
    "diffs, raises",
    [
        ([INT64_MAX, 1], True),  # the final sum is 2**63
        ([INT64_MIN, -1], True),
        ([INT64_MAX, INT64_MAX, INT64_MAX], True),
        ([INT64_MAX, 1, -1], False),  # a partial sum leaves int64, the final sum fits
        ([INT64_MIN, -1, 1], False),
        ([INT64_MAX, INT64_MAX, -INT64_MAX, -INT64_MAX], False),  # cancels to zero
        ([INT64_MAX, INT64_MAX, INT64_MIN, INT64_MIN], False),  # sum -2
        ([INT64_MIN, INT64_MIN, INT64_MAX, INT64_MAX, 1], False),  # sum -1
        ([INT64_MAX, 0], False),
        ([INT64_MIN, 0], False),
        # small diff range: key and diff share one packed word (the embedded path)
        ([2**60] * 8, True),
        ([2**60] * 8 + [-1], False),
        ([2**60] * 7, False),
        ([-(2**60)] * 8, False),  # exactly -2**63
        ([-(2**60)] * 8 + [-1], True),
        ([-(2**60)] * 9 + [2**60], False),
    ],
)
@pytest.mark.parametrize("order", ["time", "data"])
@pytest.mark.parametrize("key", ["int", "string", "wide"])
def test_diff_overflow_exactly_when_the_final_sum_leaves_int64(diffs, raises, order, key):
    n = len(diffs)
    if key == "int":
        data, other = {"k": np.full(n, 5, np.int64)}, {"k": [6]}
    elif key == "string":
        data, other = {"k": ["a long string value"] * n}, {"k": [""]}
    else:  # fields that do not fit one packed word: the multi-word sort path
        data, other = {"a": [2**63 - 1] * n, "b": [-(2**63)] * n}, {"a": [0], "b": [5]}
    u = colmz.Updates(data, time=[9] * n, diff=diffs)
    # plus an unrelated row so the input is not a single key
    u = colmz.concat([u, colmz.Updates(other, time=[0], diff=[1])])
    total = sum(diffs)
    if raises:
        with pytest.raises(DiffOverflowError, match="diff overflow") as e:
            colmz.consolidate(u, order=order)
        assert (e.value.row, e.value.time, e.value.total) == (u.to_pylist()[0][:-2], 9, total)
        with pytest.raises(DiffOverflowError, match=f"at time 100 sum to {total}"):
            colmz.consolidate(u, order=order, since=100)
    else:
        out = colmz.consolidate(u, order=order)
        got = [r[-1] for r in out.to_pylist() if r[-2] == 9]
        assert got == ([total] if total else [])
    assert raises == (not INT64_MIN <= total <= INT64_MAX)


def test_overflow_leaves_input_untouched():
    u = colmz.Updates({"k": [1, 1]}, time=[0, 0], diff=[INT64_MAX, 1])
    before = (u.time.copy(), u.diff.copy())
    with pytest.raises(OverflowError):
        colmz.consolidate(u)
    assert np.array_equal(u.time, before[0]) and np.array_equal(u.diff, before[1])


def test_consolidate_argument_errors():
    u = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    with pytest.raises(ValueError, match=r"order must be one of \('time', 'data'\), got 'key'"):
        colmz.consolidate(u, order="key")
    with pytest.raises(ValueError, match=r"since must be a time in \[0, 2\*\*64-1\], got -1"):
        colmz.consolidate(u, since=-1)
    with pytest.raises(ValueError, match=r"since must be a time"):
        colmz.consolidate(u, since=2**64)
    with pytest.raises(TypeError, match=r"since must be an integer time, got float 1.5"):
        colmz.consolidate(u, since=1.5)
    with pytest.raises(TypeError, match=r"updates must be colmz.Updates, got DataFrame"):
        colmz.consolidate(u.to_pandas())


def test_concat_errors_and_edge_cases():
    a = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    assert colmz.concat([a]) is a
    with pytest.raises(ValueError, match="concat needs at least one batch"):
        colmz.concat([])
    with pytest.raises(TypeError, match=r"batches\[1\] must be colmz.Updates, got list"):
        colmz.concat([a, [1]])
    with pytest.raises(colmz.SchemaError, match=r"data column 'k' has type int64 in one batch and string"):
        colmz.concat([a, colmz.Updates({"k": ["x"]}, time=[0], diff=[1])])
    with pytest.raises(colmz.SchemaError, match=r"data columns differ"):
        colmz.concat([a, colmz.Updates({"j": [1]}, time=[0], diff=[1])])
    e = colmz.Updates.empty({"k": pa.null()})
    n = colmz.Updates({"k": [None, None]}, time=[1, 2], diff=[1, 1])
    out = colmz.concat([e, n, a, e])
    assert out.schema[0].type == pa.int64()
    assert out.to_pylist() == [(None, 1, 1), (None, 2, 1), (1, 0, 1)]
    assert colmz.consolidate(colmz.concat([n, n])).to_pylist() == [(None, 1, 2), (None, 2, 2)]


def test_large_mixed_batch_against_oracle():
    rng = np.random.default_rng(7)
    n = 20_000
    s = np.array(["", "a", "a\x00", "abcdefgh", "abcdefghijklmnopq", "z"], object)[rng.integers(0, 6, n)]
    s = [None if i % 97 == 0 else v for i, v in enumerate(s)]
    u = colmz.Updates(
        {
            "i": rng.integers(-50, 50, n),
            "s": s,
            "f": rng.choice([0.0, -0.0, np.nan, 1.5, np.inf], n),
            "b": rng.integers(0, 2, n).astype(bool),
        },
        time=rng.integers(0, 20, n).astype(np.uint64),
        diff=rng.choice([-1, 1], n),
    )
    for order in ("time", "data"):
        for since in (None, 10):
            out = colmz.consolidate(u, order=order, since=since)
            check_consolidated(u, out, order, since)


@pytest.mark.slow
@settings(max_examples=us.examples(1000))
@given(
    us.updates(max_rows=200),
    st.sampled_from(["time", "data"]),
    st.none() | us.time_strategy(),
)
def test_consolidate_matches_multiset_oracle_thorough(u, order, since):
    consolidate_or_overflow(u, order, since)


@pytest.mark.slow
def test_wheel_installs_and_imports(tmp_path):
    """A built wheel (not the editable install) provides colmz, colmz.kernels, colmz.spark."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dist, target = tmp_path / "dist", tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "-o", str(dist), repo],
        check=True, capture_output=True, timeout=600,
    )
    wheel = next(dist.glob("colmz-*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True, capture_output=True, timeout=600,
    )
    code = (
        "import colmz, colmz.kernels, colmz.spark, colmz.kernels.consolidate\n"
        f"assert colmz.__file__.startswith({str(target)!r}), colmz.__file__\n"
        f"assert colmz.kernels.consolidate.__file__.startswith({str(target)!r})\n"
        "import importlib.util\n"
        "assert importlib.util.find_spec('kernels') is None and importlib.util.find_spec('spark') is None\n"
        "u = colmz.Updates({'k': ['b', 'a', 'b']}, time=[1, 1, 1], diff=[1, 1, -1])\n"
        "assert colmz.consolidate(u).to_pylist() == [('a', 1, 1)]\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target), NUMBA_CACHE_DIR=str(tmp_path / "nc"))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=str(tmp_path), timeout=600)


# ----------------------------------------------------------------------------- ranked strings

_STRINGS = ["", "a", "ab", "a\x00", "b", "longer than seven", "longer than sevem", "x" * 30]


@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from(_STRINGS)),
            st.one_of(st.none(), st.sampled_from(_STRINGS)),
            st.one_of(st.none(), st.integers(-2, 2)),
            st.integers(0, 6),
            st.sampled_from([-1, 1, 2]),
        ),
        max_size=60,
    ),
    order=st.sampled_from(["time", "data"]),
    since=st.one_of(st.none(), st.integers(0, 7)),
    string_type=st.sampled_from([pa.string(), pa.large_string()]),
)
@settings(max_examples=80, deadline=None)
def test_ranked_strings_path_equals_full_encoding(rows, order, since, string_type):
    # Large inputs with strings consolidate on per-call ranks; the result, order included,
    # must be exactly what the full order-preserving encoding gives.
    import colmz.ops as ops
    from colmz.kernels.consolidate import sort_consolidate
    from colmz.updates import Encoded

    u = colmz.Updates(
        {
            "s": pa.array([r[0] for r in rows], string_type),
            "b": pa.array([None if r[1] is None else r[1].encode() for r in rows], pa.binary()),
            "k": pa.array([r[2] for r in rows], pa.int64()),
        },
        time=np.array([r[3] for r in rows], np.uint64),
        diff=np.array([r[4] for r in rows], np.int64),
    )
    enc = u.encode()
    k, t, d = sort_consolidate(enc.keys, enc.time, enc.diff, order, since)
    full = colmz.Updates.decode(Encoded(k, t, d, enc.layout), u.schema)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ops, "_RANK_MIN_ROWS", 0)
        ranked = colmz.consolidate(u, order=order, since=since)
    assert ranked.to_pylist() == full.to_pylist()
    assert ranked.schema == u.schema


def test_consolidate_names_the_overflowing_row():
    u = colmz.Updates({"k": ["a", "b", "a"], "n": [1, None, 1]}, time=[2, 2, 2], diff=[2**62, 1, 2**62])
    with pytest.raises(DiffOverflowError, match=r"data row \('a', 1\) at time 2 sum to 9223372036854775808"):
        colmz.consolidate(u)
    strs = colmz.Updates({"s": ["long string " * 3] * 5000}, time=[0] * 5000, diff=[2**62] * 5000)
    with pytest.raises(DiffOverflowError, match="long string"):
        colmz.consolidate(strs, order="data")


@settings(max_examples=us.examples(150))
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3),
                       st.sampled_from([1, -1, 2**62, -(2**62), 2**63 - 1, -(2**63), 3 * 2**61])),
             min_size=1, max_size=30),
    st.none() | st.integers(0, 3),
    st.integers(1, 3),
)
def test_find_overflow_names_the_first_overflowing_group(rows, since, width):
    keys = np.array([[k] * width for k, _, _ in rows], np.uint64)
    time = np.array([t for _, t, _ in rows], np.uint64)
    diff = np.array([d for _, _, d in rows], np.int64)
    sums = {}
    for k, t, d in rows:
        t = t if since is None else max(t, since)
        sums[(t, k)] = sums.get((t, k), 0) + d
    bad = sorted(g for g, v in sums.items() if not INT64_MIN <= v <= INT64_MAX)
    got = find_overflow(keys, time, diff, since)
    if not bad:
        assert got is None
    else:
        i, t, total = got
        assert (t, rows[i][0]) == bad[0] and total == sums[bad[0]]


@pytest.mark.parametrize("columns", [
    {"k": np.arange(1000, dtype=np.int64) % 7},                                   # one 64-bit int column
    {"k": [f"s{i % 13}" for i in range(1000)]},                                   # strings, by rank
    {"a": np.arange(10, dtype=np.int32), "b": [None, 1.5] * 5},                   # the full encoding
])
def test_consolidate_reports_its_steps(columns):
    n = len(next(iter(columns.values())))
    u = colmz.Updates(columns, time=np.arange(n) % 3, diff=np.ones(n, np.int64))
    seen = []
    out = colmz.consolidate(u, progress=lambda done, total, label: seen.append((done, total, label)))
    assert seen == [(0, 3, "encoding"), (1, 3, "sorting"), (2, 3, "decoding"), (3, 3, "done")]
    assert out.to_pylist() == colmz.consolidate(u).to_pylist()


def test_consolidate_rejects_a_progress_that_is_not_callable():
    u = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    with pytest.raises(TypeError, match="progress"):
        colmz.consolidate(u, progress=5)


@pytest.mark.parametrize("column", [
    pa.array(np.arange(600, dtype=np.int64) % 7),  # one 64-bit integer column: the raw-words path
    pa.array(np.arange(600, dtype=np.uint64) % 7),
    pa.array([f"value {i % 9}" for i in range(600)], pa.large_string()),  # ranked strings
    pa.array([f"v{i % 5}".encode() for i in range(600)], pa.binary()),
    pa.array([None if i % 4 == 0 else i % 3 for i in range(600)], pa.int32()),  # full encoding
])
def test_consolidate_output_columns_have_the_schema_types(column):
    # Each path builds its result from the input's schema: the columns must have those types.
    u = colmz.Updates({"c": column}, time=np.zeros(600, np.uint64), diff=np.ones(600, np.int64))
    out = colmz.consolidate(u)
    assert out.schema == u.schema
    assert [out.column(s.name).type for s in out.schema] == [s.type for s in u.schema]
    assert sorted(map(repr, out.to_pylist())) == sorted(map(repr, {
        (v, 0, column.to_pylist().count(v)) for v in column.to_pylist()}))


def test_one_update_is_consolidated_without_a_kernel_call(monkeypatch):
    import colmz.ops

    def refuse(*a, **k):
        raise AssertionError("a kernel call for one update")

    one = colmz.Updates({"k": [None], "s": ["a"], "b": [True]}, time=[3], diff=[2])
    with monkeypatch.context() as m:
        m.setattr(colmz.ops, "sort_consolidate", refuse)
        assert colmz.consolidate(one).to_pylist() == [(None, "a", True, 3, 2)]
        assert colmz.consolidate(one, since=5, order="data").to_pylist() == [(None, "a", True, 5, 2)]
        assert colmz.consolidate(one, since=1).to_pylist() == [(None, "a", True, 3, 2)]
        zero = colmz.Updates({"k": [1]}, time=[3], diff=[0])
        assert len(colmz.consolidate(zero)) == 0 and colmz.consolidate(zero).column_names == ["k"]
        steps = []
        colmz.consolidate(one, progress=lambda d, t, label: steps.append(label))
        assert steps == ["encoding", "sorting", "decoding", "done"]
    # a float is canonicalised by the encoding (-0.0 is 0.0), so it still goes through it
    f = colmz.consolidate(colmz.Updates({"x": [-0.0]}, time=[1], diff=[1])).column("x").to_pylist()[0]
    assert math.copysign(1.0, f) == 1.0


def test_a_consolidated_batch_is_known_so_and_not_sorted_again():
    # consolidate's output is marked (Updates.consolidated_order): consolidating it again
    # returns it as it is; what keeps it consolidated keeps the mark (slice, negated, one time
    # moved to another, rename) and what may not (a since past its times, the other order over
    # several times) consolidates for real.
    from colmz.rows import at_time

    u = colmz.Updates({"k": [3, 1, 1, 2]}, time=[2, 1, 1, 2], diff=[1, 1, 1, -1])
    c = colmz.consolidate(u)
    assert c.consolidated_order == "time" and u.consolidated_order is None
    assert colmz.consolidate(c) is c
    assert c.slice(1, 3).consolidated_order == "time" and c.negated().consolidated_order == "time"
    assert c.rename(["key"]).consolidated_order == "time"
    by_data = colmz.consolidate(c, order="data")  # two times: the data order is another sort
    assert by_data is not c and by_data.to_pylist() == [(1, 1, 2), (2, 2, -1), (3, 2, 1)]
    assert colmz.consolidate(c, since=2).to_pylist() == [(1, 2, 2), (2, 2, -1), (3, 2, 1)]
    one = c.slice(1, 3)  # one time: either order, and moved to another time
    assert colmz.consolidate(one, order="data") is one
    assert at_time(one, 7).consolidated_order == "time" and at_time(c, 7).consolidated_order is None
    assert colmz.consolidate(at_time(c, 7)).to_pylist() == [(1, 7, 2), (2, 7, -1), (3, 7, 1)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, "", "a", "ab"]), st.integers(-2, 2), st.integers(0, 3),
                          st.integers(-3, 3)), min_size=2, max_size=2),
       st.sampled_from(["time", "data"]), st.sampled_from([None, 0, 2]))
def test_two_updates_consolidate_as_a_sort_would(rows, order, since):
    # Two updates (the old row out, the new one in) are compared without the kernels: the
    # same answer as consolidating them among more rows and keeping theirs.
    u = colmz.Updates({"s": [r[0] for r in rows], "k": pa.array([r[1] for r in rows], pa.int64())},
                      time=[r[2] for r in rows], diff=[r[3] for r in rows])
    pad = colmz.Updates({"s": ["zzz"] * 3, "k": pa.array([9, 9, 9], pa.int64())}, time=[9, 9, 9],
                        diff=[1, 1, -2])  # three rows that cancel: the kernels' path
    want = colmz.consolidate(colmz.concat([u, pad]), order=order, since=since)
    got = colmz.consolidate(u, order=order, since=since)
    assert got.to_pylist() == want.to_pylist()
    assert got.consolidated_order == order
