"""colmz.first_column, through its dispatcher colmz.ops.order_data: the first-column strategy
equals colmz.consolidate(order="data")."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pool_counting import count_submissions

import colmz
from colmz import first_column
from colmz.first_column import order_by_first_column
from colmz.ops import consolidate_data, order_data


def same(a: colmz.Updates, b: colmz.Updates) -> None:
    assert a.schema == b.schema
    assert a.to_pylist() == b.to_pylist()


@pytest.fixture
def always(monkeypatch):
    # every batch, however short, takes the shortcut when it can
    monkeypatch.setattr(first_column, "MIN_ROWS", 0)


def batch(keys, second, times, diffs, key_type=None):
    return colmz.Updates({"k": pa.array(keys, key_type or pa.int64()), "v": second}, time=times, diff=diffs)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 60),
    key_range=st.sampled_from([2, 10, 1000, 2**40]),
    signed=st.booleans(),
    second=st.sampled_from(["str", "int", "nullable_str"]),
    seed=st.integers(0, 2**32 - 1),
    presorted=st.booleans(),
)
def test_equals_consolidate(n, key_range, signed, second, seed, presorted):
    first_column.MIN_ROWS, saved = 0, first_column.MIN_ROWS
    try:
        rng = np.random.default_rng(seed)
        lo = -key_range if signed else 0
        keys = rng.integers(lo, key_range, n)
        if presorted:
            keys = np.sort(keys)
        if second == "int":
            col = pa.array(rng.integers(0, 3, n))
        else:
            vals = [["a", "bb", "", "long string value here"][i] for i in rng.integers(0, 4, n)]
            if second == "nullable_str":
                vals = [None if x == "" else x for x in vals]
            col = pa.array(vals, pa.string())
        key_type = pa.int64() if signed else pa.uint64()
        u = batch(keys, col, rng.integers(0, 3, n), rng.integers(-1, 2, n), key_type)
        same(consolidate_data(u), colmz.consolidate(u, order="data"))
    finally:
        first_column.MIN_ROWS = saved


def test_unique_keys_sort_by_the_key_alone(always):
    u = batch([5, -3, 9, 0], ["a", "b", "c", "d"], [0, 1, 2, 3], [1, 2, 3, 4])
    source, rows = order_data(u)
    assert rows.tolist() == [1, 3, 0, 2] and source is u
    same(consolidate_data(u), colmz.consolidate(u, order="data"))


def test_sorted_input_is_returned_as_it_is(always):
    u = batch([1, 2, 3], ["x", "y", "z"], [0, 0, 0], [1, 1, 1])
    found = order_by_first_column(u)
    assert found.rows is None and found.tied is None
    assert order_data(u) == (u, None) and consolidate_data(u) is u
    z = batch([1, 2, 3], ["x", "y", "z"], [0, 0, 0], [1, 0, 1])  # a zero diff still goes
    source, rows = order_data(z)
    assert rows.tolist() == [0, 2] and source is z
    same(consolidate_data(z), colmz.consolidate(z, order="data"))


def test_ties_are_consolidated_and_put_back_in_place(always):
    # key 4 is tied: its rows sum and order by the string, between keys 1 and 7
    u = batch([7, 4, 1, 4, 4, 9, 8, 10, 11, 12, 13, 14], ["a", "z", "m", "b", "z"] + ["q"] * 7,
              [0] * 12, [1, 1, 1, 1, 2] + [1] * 7)
    assert order_by_first_column(u).tied.tolist() == [1, 3, 4]
    source, rows = order_data(u)
    assert source.to_pylist()[12:] == [(4, "b", 0, 1), (4, "z", 0, 3)]
    # 12 and 13 index the consolidated tied rows (after the batch's 12)
    assert rows.tolist() == [2, 12, 13, 0, 6, 5, 7, 8, 9, 10, 11]
    same(consolidate_data(u), colmz.consolidate(u, order="data"))
    # tied rows that cancel out leave only the others
    c = batch([3, 1, 3, 2, 5, 6, 7, 8, 9], ["s", "b", "s", "d", "e", "f", "g", "h", "i"],
              [0] * 9, [1, 1, -1, 1, 1, 1, 1, 1, 1])
    source, rows = order_data(c)
    assert source is c and rows.tolist() == [1, 3, 4, 5, 6, 7, 8]
    same(consolidate_data(c), colmz.consolidate(c, order="data"))


def test_mostly_tied_or_other_first_columns_take_the_general_path(always):
    tied = batch([1, 1, 1, 2], ["b", "a", "c", "d"], [0, 0, 0, 0], [1, 1, 1, 1])
    assert order_by_first_column(tied) is None  # three of four rows tied
    same(consolidate_data(tied), colmz.consolidate(tied, order="data"))
    nulls = batch([2, None, 1], ["a", "b", "c"], [0, 0, 0], [1, 1, 1])
    strings = colmz.Updates({"s": ["b", "a"], "k": [1, 2]}, time=[0, 0], diff=[1, 1])
    ints32 = colmz.Updates({"k": pa.array([2, 1], pa.int32())}, time=[0, 0], diff=[1, 1])
    for u in (nulls, strings, ints32):
        assert order_by_first_column(u) is None
        same(consolidate_data(u), colmz.consolidate(u, order="data"))


def test_short_batches_go_to_consolidate_whole():
    u = batch([2, 1], ["a", "b"], [0, 0], [1, 1])
    assert len(u) < first_column.MIN_ROWS
    same(consolidate_data(u), colmz.consolidate(u, order="data"))


def test_large_batch_with_a_few_ties():
    rng = np.random.default_rng(7)
    n = 50_000
    keys = rng.integers(-(2**62), 2**62, n)
    keys[rng.integers(0, n, 300)] = keys[rng.integers(0, n, 300)]  # some rows share a key
    u = batch(keys, pa.array(rng.integers(0, 5, n).astype(str)), rng.integers(0, 4, n),
              rng.integers(-2, 3, n))
    found = order_by_first_column(u)
    assert found is not None and found.tied is not None
    same(consolidate_data(u), colmz.consolidate(u, order="data"))


@pytest.mark.parametrize("store", ["local", "mem"])
def test_arrangement_write_of_a_large_batch_gathers_by_row_group(tmp_path, monkeypatch, store):
    # the write path: rows gathered a (small) row group at a time into several parts
    from colmz.arrangement import part_writer
    from colmz.arrangement.runs import write_run
    from colmz.storage import LocalBlob, MemBlob

    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 1000)
    rng = np.random.default_rng(11)
    n = 9000
    keys = rng.integers(-(2**40), 2**40, n)
    keys[rng.integers(0, n, 200)] = keys[rng.integers(0, n, 200)]
    u = batch(keys, pa.array(rng.integers(0, 50, n).astype(str)), rng.integers(0, 3, n),
              rng.integers(-1, 3, n))
    blob = LocalBlob(tmp_path) if store == "local" else MemBlob()
    a = colmz.Arrangement(blob, part_rows=4000)
    a.unsealed_append(u)
    want = colmz.consolidate(u, order="data")
    (b,) = a.unsealed_batches
    assert len(b.keys) == -(-len(want) // 4000) and b.len == len(want)
    a.validate_seal(3)
    a.update_seal(3)
    assert a.drain()
    a.validate_data()
    same(a.trace_snapshot().updates, want)
    run = write_run(blob, u.schema, u, part_rows=5000)
    t = want.time
    assert (run.len, run.ts_lower, run.ts_upper) == (len(want), int(t.min()), int(t.max()))


def clustered_keys(rng, n, clusters, low_bits):
    # keys around a few far-apart centres, differing in their low bits only: the full span is
    # wide, so sort_keys shortens the offsets and sorts the runs of equal prefixes again
    centres = rng.integers(0, 2**64, clusters, dtype=np.uint64, endpoint=False)
    centres[0] = 0
    centres[-1] = np.uint64(2**64 - 1)
    picked = centres[rng.integers(0, clusters, n)]
    low = rng.integers(0, 1 << low_bits, n).astype(np.uint64)
    return np.where(picked > np.uint64(2**63), picked - low, picked + low)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 300), clusters=st.integers(1, 5), low_bits=st.integers(0, 12),
       wide=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_sort_keys_is_a_stable_argsort(n, clusters, low_bits, wide, seed):
    rng = np.random.default_rng(seed)
    if wide:
        keys = clustered_keys(rng, n, max(clusters, 2), low_bits)
    else:
        keys = rng.integers(0, 1 << (low_bits + 1), n).astype(np.uint64)
    original = keys.copy()
    rows, sorted_keys = first_column.sort_keys(keys)
    assert np.array_equal(keys, original)  # the input is left alone
    assert rows.tolist() == np.argsort(keys, kind="stable").tolist()
    if sorted_keys is None:
        assert len(np.unique(keys)) == n  # None only when every key is distinct
    else:
        assert sorted_keys.tolist() == np.sort(keys).tolist()


def test_sort_keys_sorts_the_buckets_on_two_threads(monkeypatch):
    # From PARALLEL_SORT_ROWS rows on, half the top digit's buckets are sorted by the "sort"
    # pool's thread (counted), the result the same stable argsort: unique keys, ties, and
    # keys so wide that offsets are shortened.
    submitted = count_submissions(monkeypatch, first_column, "sort")
    monkeypatch.setattr(first_column, "PARALLEL_SORT_ROWS", 50_000)
    rng = np.random.default_rng(21)
    n = 80_000
    for keys in (rng.permutation(n).astype(np.uint64) * np.uint64(977),
                 rng.integers(0, n // 3, n).astype(np.uint64),
                 clustered_keys(rng, n, 3, 20)):
        before = len(submitted)
        rows, sorted_keys = first_column.sort_keys(keys)
        assert len(submitted) == before + 1
        assert rows.tolist() == np.argsort(keys, kind="stable").tolist()
        if sorted_keys is not None:
            assert sorted_keys.tolist() == np.sort(keys).tolist()
    small = rng.integers(0, 2**40, 40_000).astype(np.uint64)
    before = len(submitted)
    assert first_column.sort_keys(small)[0].tolist() == np.argsort(small, kind="stable").tolist()
    assert len(submitted) == before  # below PARALLEL_SORT_ROWS: one thread


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 200), clusters=st.integers(2, 5), low_bits=st.integers(0, 10),
       seed=st.integers(0, 2**32 - 1))
def test_wide_clustered_keys_equal_consolidate(n, clusters, low_bits, seed):
    # signed keys spanning the whole int64 range, ties and near-ties inside each cluster
    rng = np.random.default_rng(seed)
    keys = clustered_keys(rng, n, clusters, low_bits).view(np.int64)
    vals = pa.array([["a", "bb", "", "c"][i] for i in rng.integers(0, 4, n)], pa.string())
    u = batch(keys, vals, rng.integers(0, 3, n), rng.integers(-1, 2, n))
    first_column.MIN_ROWS, saved = 0, first_column.MIN_ROWS
    try:
        same(consolidate_data(u), colmz.consolidate(u, order="data"))
    finally:
        first_column.MIN_ROWS = saved
