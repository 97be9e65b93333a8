"""The core of ``colmz.Arrangement``: the unit vectors of upstream ``arrangement.rs`` and
``background.rs`` and the edge cases of the old persist arrangement, each its own test."""

from __future__ import annotations

import pyarrow as pa
import pytest

import colmz
from colmz.arrangement import (
    Arrangement,
    EmptyBatch,
    InvalidBatchBounds,
    InvalidSnapshotBounds,
    NonContiguousMerge,
    SchemaMismatch,
    SealRegression,
    SeqNoMismatch,
    SinceBehindInput,
    SinceRegression,
    TimeBeforeTraceUpper,
)
from colmz.arrangement.errors import CorruptMeta, MissingPart
from colmz.arrangement.meta import (
    CompactTraceReq,
    CompactTraceRes,
    Description,
    DrainUnsealedReq,
    DrainUnsealedRes,
    TraceBatchMeta,
    UnsealedSnapshot,
)
from colmz.storage import MemBlob

KV = {"k": pa.string(), "v": pa.string()}


def ups(rows):
    """Updates of ``((k, v), t, d)`` rows, as upstream's tests write them."""
    return colmz.Updates(
        {"k": pa.array([r[0][0] for r in rows], pa.string()),
         "v": pa.array([r[0][1] for r in rows], pa.string())},
        time=[r[1] for r in rows], diff=[r[2] for r in rows],
    ) if rows else colmz.Updates.empty(KV)


def rows(u: colmz.Updates):
    return [((k, v), t, d) for k, v, t, d in u.to_pylist()]


def kv_times(times):
    return [(("k", "v"), t, 1) for t in times]


def new(**kw) -> Arrangement:
    return Arrangement(MemBlob(), schema=KV, **kw)


def cleared(batches):
    """Unsealed metas without keys and sizes (keys are random)."""
    return [(list(b.seqnos), b.ts_lower, b.ts_upper) for b in batches]


def trace_shape(a):
    return [(b.desc.to_list(), b.level) for b in a.trace_batches]


def slurp(a, lo, hi):
    return rows(a.fetch_unsealed(a.unsealed_snapshot(lo, hi)))


def desc(lo, hi, since):
    return Description(lo, hi, since)


# ---------------------------------------------------------------- arrangement.rs tests


def test_append_trace_ts_upper_invariant():
    a = Arrangement.from_meta(
        {"seal": 0, "since": 0, "unsealed_batches": [],
         "trace_batches": [{"desc": [0, 2, 0], "level": 1, "keys": []}]},
        MemBlob(), schema=KV,
    )
    with pytest.raises(TimeBeforeTraceUpper, match="time 1 before the trace upper 2"):
        a.unsealed_append(ups([(("k", "v"), 1, 1)]), (0, 1))
    assert a.unsealed_batches == []
    a.unsealed_append(ups([(("k", "v"), 2, 1)]), (0, 1))
    assert len(a.unsealed_batches) == 1


def test_append_detect_min_max_times():
    a = new()
    a.unsealed_append(ups([(("k", "v"), 3, 1), (("k", "v"), 2, 1)]), (0, 1))
    m = a.unsealed_batches[0]
    assert (m.ts_lower, m.ts_upper) == (2, 3)


def test_unsealed_evict():
    a = new()
    a.unsealed_append(ups(kv_times([0])), (0, 1))
    a.unsealed_append(ups(kv_times([1])), (1, 2))
    a.unsealed_append(ups(kv_times([0, 1])), (2, 3))
    assert sorted(slurp(a, 0, None)) == sorted(kv_times([0, 0, 1, 1]))
    assert cleared(a.unsealed_batches) == [([0, 1], 0, 0), ([1, 2], 1, 1), ([2, 3], 0, 1)]
    assert a.unsealed_evict() == []
    a.update_seal(1)
    a.drain()
    assert [list(b.seqnos) for b in a.unsealed_evict()] == [[0, 1]]
    assert a.unsealed_evict() == []  # idempotent
    assert sorted(slurp(a, 0, None)) == sorted(kv_times([0, 1, 1]))
    assert cleared(a.unsealed_batches) == [([1, 2], 1, 1), ([2, 3], 0, 1)]
    a.update_seal(2)
    a.drain()
    assert [list(b.seqnos) for b in a.unsealed_evict()] == [[1, 2], [2, 3]]
    assert a.unsealed_evict() == []
    a.validate()


def test_unsealed_snapshot_bounds():
    a = new()
    updates = [(("k", "v"), 3, 1), (("k", "v"), 5, 1)]
    a.unsealed_append(ups(updates), (0, 2))
    assert slurp(a, 0, None) == updates
    assert slurp(a, 0, 6) == updates
    assert slurp(a, 0, 2) == []
    assert slurp(a, 6, None) == []
    assert slurp(a, 6, 8) == []
    assert slurp(a, 3, 3) == []
    with pytest.raises(InvalidSnapshotBounds, match="upper 3 is before its lower 4"):
        a.unsealed_snapshot(4, 3)
    assert slurp(a, 3, 6) == updates
    assert slurp(a, 3, 4) == updates[:1]
    assert slurp(a, 4, 5) == []
    assert slurp(a, 5, 6) == updates[1:]


def test_unsealed_snapshot_batch_overlap_filter():
    a = new()
    a.unsealed_append(ups([(("k", "v"), 3, 1), (("k", "v"), 5, 1)]), (0, 1))
    # a batch is read iff lo <= ts_upper and not hi <= ts_lower
    assert len(a.unsealed_snapshot(5, None).batches) == 1
    assert len(a.unsealed_snapshot(6, None).batches) == 0
    assert len(a.unsealed_snapshot(0, 4).batches) == 1
    assert len(a.unsealed_snapshot(0, 3).batches) == 0
    assert len(a.unsealed_snapshot(4, 5).batches) == 1  # metadata overlap, no rows
    assert slurp(a, 4, 5) == []


def test_unsealed_batch_trim():
    a = new()
    updates = kv_times([0, 1, 2])
    a.unsealed_append(ups(updates), (0, 2))
    a.update_seal(1)
    assert slurp(a, 0, None) == updates  # a seal moves nothing
    a.drain()
    assert a.unsealed_step() is True
    assert slurp(a, 0, None) == updates[1:]
    assert cleared(a.unsealed_batches) == [([0, 2], 1, 2)]
    assert a.unsealed_step() is False
    a.validate_data()


def test_allow_compaction():
    a = Arrangement.from_meta(
        {"seal": 10, "since": 5, "unsealed_batches": [],
         "trace_batches": [{"desc": [0, 10, 5], "level": 1, "keys": []}]},
        MemBlob(), schema=KV,
    )
    a.validate_allow_compaction(6)
    a.allow_compaction(6)
    a.validate_allow_compaction(6)
    a.allow_compaction(6)
    with pytest.raises(SinceRegression, match="since 5 is before the current since 6"):
        a.validate_allow_compaction(5)
    with pytest.raises(colmz.SinceRegression):  # one except for every structure's regression
        a.validate_allow_compaction(5)
    a.validate_allow_compaction(10)  # to the seal
    a.validate_allow_compaction(11)  # beyond the seal
    assert a.since() == 6


def test_trace_seal():
    a = Arrangement.from_meta(
        {"seal": 10, "since": 5, "unsealed_batches": [],
         "trace_batches": [{"desc": [0, 10, 5], "level": 1, "keys": []}]},
        MemBlob(), schema=KV,
    )
    a.validate_seal(11)
    a.update_seal(11)
    a.validate_seal(11)
    a.update_seal(11)
    with pytest.raises(SealRegression, match="seal 10 is before the current seal 11"):
        a.validate_seal(10)
    assert a.get_seal() == 11


def test_trace_compact_level_rule():
    a = new()
    a.update_seal(10)
    a.unsealed_append(ups([(("k", "v"), 0, 1), (("k2", "v2"), 0, 1)]), (0, 1))
    a.update_seal(1)  # a revert below 10: the drain produces [0, 1)
    a.drain()
    assert len(a.trace_batches) == 1
    a.unsealed_append(ups([(("k", "v"), 2, 1), (("k3", "v3"), 2, 1)]), (1, 2))
    a.update_seal(3)
    a.drain()
    a.unsealed_append(ups([(("k", "v"), 5, 1)]), (2, 3))
    a.update_seal(9)
    a.drain()
    assert trace_shape(a) == [([0, 1, 0], 0), ([1, 3, 0], 0), ([3, 9, 0], 0)]

    a.validate_allow_compaction(3)
    a.allow_compaction(3)
    written = a.stats()["blob_bytes_written"]
    deleted = a.compact()
    assert a.stats()["blob_bytes_written"] > written
    assert [b.desc.to_list() for b in deleted] == [[1, 3, 0], [0, 1, 0]]
    assert a.compact() == []  # nothing to compact
    assert trace_shape(a) == [([0, 3, 3], 1), ([3, 9, 0], 0)]
    snap = a.trace_snapshot()
    assert (snap.since, snap.ts_upper) == (3, 9)
    assert rows(snap.updates) == [
        (("k", "v"), 3, 2), (("k", "v"), 5, 1), (("k2", "v2"), 3, 1), (("k3", "v3"), 3, 1),
    ]

    a.update_seal(11)
    a.unsealed_append(ups([(("k", "v"), 9, 1)]), (3, 4))
    a.update_seal(10)
    a.drain()
    a.validate_allow_compaction(10)
    a.allow_compaction(10)
    deleted = a.compact()
    assert [b.desc.to_list() for b in deleted] == [[9, 10, 0], [3, 9, 0]]
    # not larger than both parents (1 update from 1 and 1): the level stays 0
    assert trace_shape(a) == [([0, 3, 3], 1), ([3, 10, 10], 0)]
    snap = a.trace_snapshot()
    assert (snap.since, snap.ts_upper) == (10, 10)
    assert rows(snap.updates) == [
        (("k", "v"), 3, 2), (("k", "v"), 10, 2), (("k2", "v2"), 3, 1), (("k3", "v3"), 3, 1),
    ]
    a.validate_data()


def test_compaction_beyond_upper():
    a = new()
    a.unsealed_append(ups([(("k1", "v1"), 0, 1), (("k2", "v2"), 1, 1)]), (0, 1))
    a.update_seal(10)
    a.drain()
    a.unsealed_append(ups([(("k3", "v3"), 10, 1), (("k4", "v4"), 11, 1)]), (1, 2))
    a.validate_allow_compaction(30)
    a.allow_compaction(30)
    expected = [(("k1", "v1"), 30, 1), (("k2", "v2"), 30, 1), (("k3", "v3"), 30, 1), (("k4", "v4"), 30, 1)]
    assert (a.since(), a.get_seal()) == (30, 10)
    assert rows(a.snapshot()) == expected
    a.compact()
    assert rows(a.snapshot()) == expected
    a.validate()


# ---------------------------------------------------------------- background.rs vectors


def _write_batch(a: Arrangement, parts, d: Description, level=0) -> TraceBatchMeta:
    from colmz.arrangement.part_writer import PartWriter

    keys, n = [], 0
    for p in parts:
        w = PartWriter(a.store, a.schema, a.new_blob_key, {"kind": "trace", "desc": d.to_list()},
                       part_rows=a.part_rows)
        w.add_updates(colmz.consolidate(ups(p), order="data"))
        keys += w.finish()
        n += w.rows
    return TraceBatchMeta(d, level, tuple(keys), n, None)


def test_compact_trace_errors():
    a = new()
    b = lambda lo, hi, s: TraceBatchMeta(desc(lo, hi, s), 0, ())  # noqa: E731
    with pytest.raises(NonContiguousMerge, match=r"\[0, 2, 0\] and \[3, 4, 0\]"):
        a.compact_trace(CompactTraceReq((b(0, 2, 0), b(3, 4, 0)), 0))
    with pytest.raises(NonContiguousMerge, match=r"\[0, 2, 0\] and \[1, 4, 0\]"):
        a.compact_trace(CompactTraceReq((b(0, 2, 0), b(1, 4, 0)), 0))
    with pytest.raises(SinceBehindInput, match="output since 0 is before input since 1"):
        a.compact_trace(CompactTraceReq((b(0, 2, 1), b(2, 4, 0)), 0))
    with pytest.raises(SinceBehindInput, match="output since 0 is before input since 1"):
        a.compact_trace(CompactTraceReq((b(0, 2, 0), b(2, 4, 1)), 0))
    assert a.store.list_keys() == []


K, K2, K3 = ("k", "v"), ("k2", "v2"), ("k3", "v3")
EXPECTED = [(K, 2, 2), (K2, 2, 1), (K3, 2, 1)]
CASES = {
    "one_part_each": ([[(K, 0, 1), (K2, 0, 1)]], [[(K, 2, 1), (K3, 2, 1)]], 1),
    "b0_two_parts": ([[(K, 0, 1)], [(K2, 0, 1)]], [[(K, 2, 1), (K3, 2, 1)]], 1),
    "both_two_parts": ([[(K, 0, 1)], [(K2, 0, 1)]], [[(K, 2, 1)], [(K3, 2, 1)]], 1),
    "empty_parts": ([[], [(K, 0, 1)], [], [(K2, 0, 1)], []], [[(K, 2, 1)], [(K3, 2, 1)]], 1),
    "b0_all_empty": ([[], [], []], [[(K, 2, 2), (K2, 2, 1), (K3, 2, 1)]], 0),
    "b0_no_parts": ([], [[(K, 2, 2), (K2, 2, 1), (K3, 2, 1)]], 0),
}


@pytest.mark.parametrize("part_rows", [1 << 20, 1])
@pytest.mark.parametrize("case", sorted(CASES))
def test_compact_trace_vectors(case, part_rows):
    # Upstream's levels here compare encoded bytes (more parts, more bytes); colmz compares
    # update counts, so the expected level is the count rule's: 3 merged > 2 and > 2 -> 1;
    # 3 merged from 0 and 3 -> not larger than both -> 0.
    b0_parts, b1_parts, level = CASES[case]
    a = new(part_rows=part_rows)
    b0 = _write_batch(a, b0_parts, desc(0, 1, 0))
    b1 = _write_batch(a, b1_parts, desc(1, 3, 0))
    res = a.compact_trace(CompactTraceReq((b0, b1), 2))
    m = res.merged
    assert m.desc == desc(0, 3, 2)
    assert m.level == level
    assert len(m.keys) == (3 if part_rows == 1 else 1)
    a.unsealed_handle_drain_response(DrainUnsealedRes(None, m))  # the merged batch as the trace
    a.update_seal(3)
    a.allow_compaction(2)
    assert rows(a.trace_snapshot().updates) == EXPECTED
    from colmz.arrangement.parts import part_metadata

    assert [part_metadata(a.store, k)["index"] for k in m.keys] == list(range(len(m.keys)))
    assert all(part_metadata(a.store, k)["desc"] == [0, 3, 2] for k in m.keys)
    a.validate_data()


def test_merged_part_boundary_inside_one_data_row():
    # One data row at many times split across parts: advancing to the since must still
    # consolidate it into one update (the merge never cuts inside a data row).
    a = new(part_rows=2)
    b0 = _write_batch(a, [[(K, 0, 1), (K, 1, 1), (K, 2, 1), (K, 3, 1), (K2, 3, 1)]], desc(0, 4, 0))
    b1 = _write_batch(a, [[(K, 4, 1), (K, 5, -1), (K3, 5, 1)]], desc(4, 6, 0))
    assert len(b0.keys) == 3
    m = a.compact_trace(CompactTraceReq((b0, b1), 6)).merged
    a.unsealed_handle_drain_response(DrainUnsealedRes(None, m))  # the merged batch as the trace
    a.update_seal(6)
    a.allow_compaction(6)
    assert rows(a.trace_snapshot().updates) == [(K, 6, 4), (K2, 6, 1), (K3, 6, 1)]
    a.validate_data()


# ---------------------------------------------------------------- edge cases


def test_seal_revert_then_drain():
    a = new()
    a.unsealed_append(ups(kv_times([0, 5])))
    a.update_seal(10)
    a.update_seal(1)
    a.drain()
    assert trace_shape(a) == [([0, 1, 0], 0)]


def test_seal_revert_below_trace_upper_fails_drain():
    a = new()
    a.unsealed_append(ups(kv_times([0, 5])))
    a.update_seal(3)
    a.drain()
    a.update_seal(2)
    meta = a.meta()
    with pytest.raises(InvalidBatchBounds, match=r"\[3, 2\)"):
        a.unsealed_next_drain_req()
    with pytest.raises(InvalidBatchBounds):
        a.drain()
    assert a.meta() == meta


def test_empty_drain_keeps_trace_upper():
    a = new()
    a.update_seal(5)
    assert a.drain() is False
    assert a.trace_ts_upper() == 0 and a.trace_batches == []
    # the documented weakness: times between the trace upper and the seal still pass
    a.unsealed_append(ups(kv_times([2])))
    assert a.unsealed_batches[0].ts_lower == 2


def test_drain_of_cancelling_updates_advances_trace_upper():
    a = new()
    a.unsealed_append(ups([(K, 1, 1)]))
    a.unsealed_append(ups([(K, 1, -1)]))
    a.update_seal(4)
    assert a.drain() is True
    assert trace_shape(a) == [([0, 4, 0], 0)]
    assert a.trace_batches[0].keys == () and a.trace_batches[0].len == 0
    assert rows(a.snapshot()) == []


def test_drain_reuses_a_single_unsealed_batch_parts():
    a = new()
    m = a.unsealed_append(ups(kv_times([0, 1])))
    a.update_seal(2)
    written = a.stats()["parts_written"]
    a.drain()
    assert a.trace_batches[0].keys == m.keys
    assert a.stats()["parts_written"] == written
    a.unsealed_evict()
    a.validate_data()


def test_stale_drain_response_is_a_noop():
    a = new()
    a.unsealed_append(ups(kv_times([0])))
    a.update_seal(1)
    req = a.unsealed_next_drain_req()
    res = a.drain_unsealed(req)
    a.unsealed_handle_drain_response(res)
    shape = trace_shape(a)
    a.unsealed_handle_drain_response(res)  # its lower is no longer the trace upper
    assert trace_shape(a) == shape
    a.unsealed_handle_drain_response(DrainUnsealedRes(req, None))
    assert trace_shape(a) == shape
    assert isinstance(req, DrainUnsealedReq) and isinstance(req.snap, UnsealedSnapshot)


def test_stale_compaction_response_is_a_noop():
    a = new()
    for t in range(3):
        a.unsealed_append(ups(kv_times([t])))
        a.update_seal(t + 1)
        a.drain()
    a.allow_compaction(3)
    req = a.trace_next_compact_req()
    res = a.compact_trace(req)
    assert len(a.trace_handle_compact_response(res)) == 2
    shape = trace_shape(a)
    assert a.trace_handle_compact_response(res) == []
    assert trace_shape(a) == shape
    fake = CompactTraceRes(CompactTraceReq((a.trace_batches[0], a.trace_batches[0]), 3), res.merged)
    assert a.trace_handle_compact_response(fake) == []


def test_compact_req_needs_equal_levels_and_since():
    a = new()
    for t in range(2):
        a.unsealed_append(ups(kv_times([t])))
        a.update_seal(t + 1)
        a.drain()
    assert a.trace_next_compact_req() is None  # since 0: upper 2 is not <= 0
    a.allow_compaction(1)
    assert a.trace_next_compact_req() is None  # batch[1].upper = 2 > 1
    a.allow_compaction(2)
    req = a.trace_next_compact_req()
    assert [b.desc.to_list() for b in req.batches] == [[0, 1, 0], [1, 2, 0]]


def test_seqno_mismatch_and_empty_batch_change_nothing():
    a = new()
    a.unsealed_append(ups(kv_times([0])))
    meta, keys = a.meta(), a.store.list_keys()
    with pytest.raises(SeqNoMismatch, match=r"\[0, 1\] do not start at the seqno upper 1"):
        a.unsealed_append(ups(kv_times([1])), (0, 1))
    with pytest.raises(SeqNoMismatch, match="empty range"):
        a.unsealed_append(ups(kv_times([1])), (1, 1))
    with pytest.raises(EmptyBatch):
        a.unsealed_append(ups([]))
    with pytest.raises(SchemaMismatch, match="column 'k' has type int64"):
        a.unsealed_append(colmz.Updates({"k": [1], "v": ["x"]}, time=[1], diff=[1]))
    assert a.meta() == meta and a.store.list_keys() == keys


def test_seal_to_the_empty_frontier():
    a = new()
    a.unsealed_append(ups(kv_times([0, 2**64 - 1])))
    a.validate_seal(None)
    a.update_seal(None)
    a.drain()
    assert a.trace_ts_upper() is None
    assert trace_shape(a) == [([0, None, 0], 0)]
    assert a.unsealed_next_drain_req() is None
    assert [b.seqnos for b in a.unsealed_evict()] == [(0, 1)]
    with pytest.raises(TimeBeforeTraceUpper):
        a.unsealed_append(ups(kv_times([5])))
    assert rows(a.snapshot()) == kv_times([0, 2**64 - 1])
    a.validate_data()


def test_from_meta_round_trip_and_validate():
    a = new()
    a.unsealed_append(ups(kv_times([0, 3])))
    a.update_seal(2)
    a.drain()
    b = Arrangement.from_meta(a.meta(), a.store, schema=KV)
    assert b.meta() == a.meta()
    b.validate()
    assert rows(b.snapshot()) == rows(a.snapshot())


@pytest.mark.parametrize("meta, match", [
    ({"seal": 5, "since": 0, "unsealed_batches": [],
      "trace_batches": [{"desc": [0, 6, 0], "level": 0, "keys": []}]}, "beyond the seal"),
    ({"seal": 5, "since": 0, "unsealed_batches": [],
      "trace_batches": [{"desc": [0, 2, 0], "level": 0, "keys": []},
                        {"desc": [3, 4, 0], "level": 0, "keys": []}]}, "followed by"),
    ({"seal": 5, "since": 0, "unsealed_batches": [],
      "trace_batches": [{"desc": [0, 2, 0], "level": 0, "keys": []},
                        {"desc": [2, 4, 0], "level": 1, "keys": []}]}, "level 0 followed by 1"),
    ({"seal": 5, "since": 0, "unsealed_batches": [],
      "trace_batches": [{"desc": [0, 2, 1], "level": 0, "keys": []}]}, "since 1 is beyond"),
    ({"seal": 5, "since": 0, "unsealed_batches": [],
      "trace_batches": [{"desc": [1, 2, 0], "level": 0, "keys": []}]}, "starts at 1"),
    ({"seal": 5, "since": 0, "unsealed_batches": [],
      "trace_batches": [{"desc": [0, 0, 0], "level": 0, "keys": []}]}, "empty or inverted"),
    ({"seal": 5, "since": 0, "trace_batches": [], "unsealed_batches": [
        {"seqnos": [0, 2], "ts_lower": 0, "ts_upper": 0, "keys": []},
        {"seqnos": [1, 3], "ts_lower": 0, "ts_upper": 0, "keys": []}]}, "followed by"),
    ({"seal": 5, "since": 0, "trace_batches": [], "unsealed_batches": [
        {"seqnos": [1, 1], "ts_lower": 0, "ts_upper": 0, "keys": []}]}, "empty seqno range"),
    ({"seal": 5, "since": 0, "unsealed_batches": [],
      "trace_batches": [{"desc": [0, 2, 0], "level": 0, "keys": ["a"]},
                        {"desc": [2, 4, 0], "level": 0, "keys": ["a"]}]}, "appears twice"),
])
def test_validate_names_the_broken_invariant(meta, match):
    a = Arrangement.from_meta(meta, MemBlob(), schema=KV)  # the constructor does not validate
    with pytest.raises(CorruptMeta, match=match):
        a.validate()


@pytest.mark.parametrize("meta, match", [
    ({"seal": 0, "since": 0, "unsealed_batches": []}, "no 'trace_batches'"),
    ({"seal": -1, "since": 0, "unsealed_batches": [], "trace_batches": []}, "seal must be"),
    ({"seal": 0, "since": None, "unsealed_batches": [], "trace_batches": []}, "since must be"),
    ({"seal": 0, "since": 0, "unsealed_batches": [], "trace_batches": [{"desc": [0, 1], "level": 0, "keys": []}]},
     "desc must be"),
    ({"seal": 0, "since": 0, "unsealed_batches": [], "trace_batches": [{"desc": [0, 1, 0], "level": 0, "keys": [1]}]},
     "keys must be"),
    ("nope", "must be a dict"),
])
def test_from_meta_rejects_malformed_meta(meta, match):
    with pytest.raises(CorruptMeta, match=match):
        Arrangement.from_meta(meta, MemBlob())


def test_missing_part_is_named():
    a = new()
    m = a.unsealed_append(ups(kv_times([0])))
    a.store.delete(m.keys[0])
    with pytest.raises(MissingPart, match=m.keys[0]):
        a.snapshot()


def test_since_must_be_a_time():
    a = new()
    with pytest.raises(ValueError, match="no empty since"):
        a.validate_allow_compaction(None)
    with pytest.raises(TypeError, match="since must be an integer time"):
        a.validate_allow_compaction(1.5)
    with pytest.raises(ValueError, match="since must be a time"):
        a.validate_allow_compaction(-1)


def test_part_size_bound_and_order():
    a = new(part_rows=3)
    data = [((f"k{i % 7}", "v"), i % 5, 1) for i in range(40)]
    m = a.unsealed_append(ups(data))
    assert len(m.keys) == -(-m.len // 3)
    for k in m.keys:
        from colmz.arrangement.parts import read_part

        assert len(read_part(a.store, k, a.schema)) <= 3
    a.validate_data()


def test_geometric_policy_merges_fan_in_batches():
    a = new(fan_in=3)
    for t in range(3):
        a.unsealed_append(ups(kv_times([t])))
        a.update_seal(t + 1)
        a.drain()
    req = a.geometric_compact_req()
    assert len(req.batches) == 3 and req.since == 0
    a.compact(req)
    assert trace_shape(a) == [([0, 3, 0], 1)]
    assert rows(a.snapshot()) == kv_times([0, 1, 2])
    a.validate_data()


def test_repr_and_html():
    a = new()
    a.unsealed_append(ups(kv_times([0])))
    r = repr(a)
    assert "seal=0" in r and "1 unsealed" in r and "k: string" in r
    assert "<table>" in a._repr_html_()


def test_compaction_holds_about_one_part_per_input():
    # a work counter, not a timing: the merge holds a few parts, not the batches
    a = new(part_rows=10)
    b0 = _write_batch(a, [[((f"k{i:04d}", "v"), 0, 1) for i in range(0, 400, 2)]], desc(0, 1, 0))
    b1 = _write_batch(a, [[((f"k{i:04d}", "v"), 1, 1) for i in range(1, 400, 2)]], desc(1, 2, 0))
    assert len(b0.keys) == len(b1.keys) == 20
    m = a.compact_trace(CompactTraceReq((b0, b1), 2)).merged
    assert m.len == 400 and len(m.keys) == 40
    assert 0 < a.stats()["merge_peak_rows"] <= 4 * 10


def test_from_meta_without_schema_reads_it_from_the_parts():
    a = new()
    a.unsealed_append(ups(kv_times([0, 3])))
    b = Arrangement.from_meta(a.meta(), a.store)
    assert b.schema is None
    assert rows(b.snapshot()) == kv_times([0, 3])
    assert [(s.name, s.type) for s in b.schema] == [("k", pa.string()), ("v", pa.string())]


def test_updates_without_data_columns():
    a = Arrangement(MemBlob(), schema={}, part_rows=2)
    a.unsealed_append(colmz.Updates({}, time=[0, 1, 1, 2, 3], diff=[1, 1, 1, -1, 4]))
    a.update_seal(2)
    a.drain()
    a.unsealed_append(colmz.Updates({}, time=[2, 5], diff=[1, 1]))
    a.update_seal(6)
    a.drain()
    a.allow_compaction(6)
    a.compact()
    assert a.snapshot().to_pylist() == [(6, 8)]
    a.validate_data()


def test_float_and_null_data_round_trip_through_parts():
    a = Arrangement(MemBlob(), schema={"f": pa.float64(), "s": pa.string()})
    u = colmz.Updates({"f": [float("nan"), -0.0, 0.0, None, 1.5], "s": [None, "", "x", "x", None]},
                      time=[0, 0, 0, 1, 1], diff=[1, 1, 1, 1, 1])
    a.unsealed_append(u)
    a.update_seal(2)
    a.drain()
    got = a.snapshot().to_pylist()
    assert len(got) == 5 and sum(d for *_, d in got) == 5
    assert any(isinstance(r[0], float) and r[0] != r[0] for r in got)  # NaN kept
    a.validate_data()
