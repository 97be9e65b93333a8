"""The streaming consolidation every colmz UDF runs, tested in-process (no JVM)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.spark.batches import Runs, stream_consolidate


def _batches(rows: list[tuple], size: int) -> list[pa.RecordBatch]:
    k = [r[0] for r in rows]
    t = [r[1] for r in rows]
    d = [r[2] for r in rows]
    table = pa.table({"k": pa.array(k, pa.string()), "time": pa.array(t, pa.int64()),
                      "diff": pa.array(d, pa.int64())})
    return table.to_batches(max_chunksize=size) if rows else []


def _reference(rows, since, upper):
    if not rows:
        return []
    u = colmz.Updates({"k": pa.array([r[0] for r in rows], pa.string())},
                      time=[r[1] for r in rows], diff=[r[2] for r in rows])
    out = colmz.consolidate(u, since=since).to_pylist()
    return sorted((r for r in out if upper is None or r[1] < upper), key=repr)


def _run(batches, since, upper, partial, flush_rows):
    out = list(stream_consolidate(batches, ["k"], "time", "diff", since, upper, partial, flush_rows))
    rows = [r for b in out for r in zip(*(c.to_pylist() for c in b.columns))]
    for b in out:
        assert b.schema.names == ["k", "time", "diff"]
        assert b.schema.field("time").type == pa.int64()
    return rows


rows_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", None, ""]), st.integers(0, 6), st.integers(-2, 2)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(rows=rows_st, since=st.none() | st.integers(0, 7), upper=st.none() | st.integers(0, 8),
       size=st.integers(1, 9), flush=st.integers(1, 20))
def test_full_consolidation_matches_colmz(rows, since, upper, size, flush):
    got = _run(_batches(rows, size), since, upper, partial=False, flush_rows=flush)
    assert sorted(got, key=repr) == _reference(rows, since, upper)
    keys = [(r[0], r[1]) for r in got]
    assert len(keys) == len(set(keys))


@settings(max_examples=100, deadline=None)
@given(rows=rows_st, since=st.none() | st.integers(0, 7), upper=st.none() | st.integers(0, 8),
       size=st.integers(1, 9), flush=st.integers(1, 20))
def test_partial_consolidation_preserves_the_sum(rows, since, upper, size, flush):
    # Partial output may hold duplicates or unadvanced times; consolidating it again must
    # give the same as consolidating the input.
    got = _run(_batches(rows, size), since, upper, partial=True, flush_rows=flush)
    again = _reference([(k, t, d) for k, t, d in got], since, upper)
    assert again == _reference(rows, since, upper)


def test_partial_switches_to_passthrough_on_distinct_updates():
    rows = [(str(i), i % 5, 1) for i in range(100)]
    batches = _batches(rows, 10)
    out = list(stream_consolidate(batches, ["k"], "time", "diff", None, None, True, 20))
    # After the first flush showed no shrinkage the remaining batches pass through as they are.
    assert any(b.num_rows == 10 for b in out)
    assert sum(b.num_rows for b in out) == 100


def test_runs_stay_logarithmic():
    r = Runs(None, flush_rows=4)
    for i in range(256):
        r.add(colmz.Updates({"k": np.array([i], np.int64)}, time=[0], diff=[1]))
        assert len(r.runs) <= 10
    assert len(r.result()) == 256


@pytest.mark.parametrize("upper", [0, 3])
def test_since_at_or_after_upper_gives_nothing(upper):
    rows = [("a", 1, 1), ("b", 5, 1)]
    assert _run(_batches(rows, 1), 3, upper, partial=False, flush_rows=10) == []
