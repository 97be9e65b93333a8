"""``ViewSink``: the collection equals the view's model after every step; self-correcting."""

from __future__ import annotations

from collections import Counter

import dataflow_model as dm
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.continual.model import MemoryCollection
from colmz.dataflow import AccumulableReduce, Count, DeltaJoin, Sum, ViewSink

T = {"k": pa.int64(), "v": pa.int64()}
U = {"uk": pa.int64(), "w": pa.string()}
T_POOL = [(k, v) for k in (None, 1, 2, 3) for v in (None, 4, -2)]
U_POOL = [(k, w) for k in (None, 1, 2) for w in ("x", "y")]


@settings(max_examples=us.examples(40))
@given(dm.change_steps(T_POOL, max_steps=8))
def test_sum_view_collection_equals_the_model_at_every_time(steps):
    r = AccumulableReduce(T, ["k"], {"s": Sum("v"), "c": Count()})
    sink = ViewSink(r.schema)
    held: Counter = Counter()
    for i, step in enumerate(steps):
        t = 2 * i + 1  # times with gaps: the upper moves to t + 1 each step
        b = dm.batch(T, [r_ for r_, _ in step], [d for _, d in step], t)
        held.update(dm.counter_of(b))
        held = Counter({k: v for k, v in held.items() if v})
        sink.step(t, r.step(t, b))
        assert sink.collection.upper == t + 1
        expect: Counter = Counter()
        groups: dict = {}
        for (k, v), c in held.items():
            groups.setdefault(k, []).append((v, c))
        for k, rows in groups.items():
            vs = [(v, c) for v, c in rows if v is not None]
            expect[(k, sum(v * c for v, c in vs) if vs else None, sum(c for _, c in rows))] += 1
        assert dm.counter_of(sink.collection.snapshot(t)) == expect


@settings(max_examples=us.examples(30))
@given(dm.change_steps(T_POOL, max_steps=5), dm.change_steps(U_POOL, max_steps=5))
def test_rebuilt_join_over_an_existing_view_writes_only_the_difference(ts, us_):
    j = DeltaJoin([T, U], on=[("k", "uk")])
    sink = ViewSink(j.schema)
    for t in range(max(len(ts), len(us_))):
        a = ts[t] if t < len(ts) else []
        b = us_[t] if t < len(us_) else []
        sink.step(t, j.step(t, dm.batch(T, [r for r, _ in a], [d for _, d in a], t),
                            dm.batch(U, [r for r, _ in b], [d for _, d in b], t)))
    last = sink.collection.upper - 1
    before = dm.counter_of(sink.collection.snapshot(last))
    # A new dataflow over the same inputs, its whole output at once, into the same collection.
    j2 = DeltaJoin([T, U], on=[("k", "uk")])
    full_t: Counter = Counter()
    full_u: Counter = Counter()
    for steps, full in ((ts, full_t), (us_, full_u)):
        for step in steps:
            for row, d in step:
                full[row] += d
    ta = dm.batch(T, [r for r, c in full_t.items() if c], [c for c in full_t.values() if c], last + 1)
    ub = dm.batch(U, [r for r, c in full_u.items() if c], [c for c in full_u.values() if c], last + 1)
    again = ViewSink(j2.schema, sink.collection)
    written = again.step(last + 1, j2.step(last + 1, ta, ub))
    assert len(written) == 0
    assert dm.counter_of(sink.collection.snapshot(last + 1)) == before


class FailingCollection(MemoryCollection):
    """A collection whose next ``compare_and_append`` fails when told to."""

    fail = False

    def compare_and_append(self, updates, expected_upper, new_upper):
        if self.fail:
            raise OSError("injected: the write failed")
        super().compare_and_append(updates, expected_upper, new_upper)


def test_a_failed_write_changes_nothing_and_bad_times_are_refused():
    c = FailingCollection(T)
    sink = ViewSink(T, c)
    sink.step(0, colmz.Updates({"k": [1], "v": [1]}, time=[0], diff=[1]))
    c.fail = True
    with pytest.raises(OSError, match="injected"):
        sink.step(1, colmz.Updates({"k": [1], "v": [1]}, time=[1], diff=[-1]))
    c.fail = False
    # The failed step's desired change left the buffer: a later step writes only its own.
    assert sink.step(2, colmz.Updates({"k": [2], "v": [2]}, time=[2], diff=[1])).to_pylist() == [(2, 2, 2, 1)]
    assert dm.counter_of(c.snapshot(2)) == Counter({(1, 1): 1, (2, 2): 1})
    with pytest.raises(ValueError, match="below the collection's upper 3"):
        sink.step(2, colmz.Updates({"k": [2], "v": [2]}, time=[2], diff=[1]))
    with pytest.raises(ValueError, match="at time 2, before the collection's upper 3"):
        sink.step(4, colmz.Updates({"k": [2], "v": [2]}, time=[2], diff=[1]))
    # an update from the upper on but before the step's time (a temporal filter's flip that
    # came due since the last step) is written at its own time
    assert sink.step(4, colmz.Updates({"k": [3], "v": [3]}, time=[3], diff=[1])).to_pylist() == [(3, 3, 3, 1)]
    assert dm.counter_of(c.snapshot(3)) == Counter({(1, 1): 1, (2, 2): 1, (3, 3): 1})
    # an update at a later time waits in the correction until it is due
    assert sink.step(5, colmz.Updates({"k": [2], "v": [2]}, time=[7], diff=[-1])).to_pylist() == []
    assert sink.step(6, colmz.Updates.empty(c.schema)).to_pylist() == []
    assert sink.step(8, colmz.Updates.empty(c.schema)).to_pylist() == [(2, 2, 7, -1)]  # written at its own time
    assert dm.counter_of(c.snapshot(6)) == Counter({(1, 1): 1, (2, 2): 1, (3, 3): 1})
    assert dm.counter_of(c.snapshot(7)) == Counter({(1, 1): 1, (3, 3): 1})
    with pytest.raises(colmz.SchemaError):
        ViewSink({"x": pa.int64()}, c)


@settings(max_examples=us.examples(60))
@given(st.lists(st.lists(st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from([0, 0, 0, 1, 3]),
                                   st.sampled_from([1, 1, -1, 2])), max_size=4), max_size=10),
       st.booleans(), st.booleans())
def test_sink_writes_every_update_at_its_time(steps, reopen, consolidated):
    # the model: the collection as of time a holds every update given with a time <= a (a
    # temporal filter's updates due later wait in the correction)
    rows: Counter = Counter()
    c = MemoryCollection(T)
    if reopen:  # a sink opened over contents feeds them back: the short path waits
        c.compare_and_append(colmz.Updates({"k": [1], "v": [0]}, time=[0], diff=[1]), 0, 1)
        rows[(1, 0, 0)] += 1
    sink = ViewSink(T, c)
    for i, step in enumerate(steps):
        t = 1 + 2 * i
        b = colmz.Updates({"k": [k for k, _, _ in step], "v": [t] * len(step)},
                          time=[t + dt for _, dt, _ in step], diff=[d for _, _, d in step], schema=T)
        for k, dt, d in step:
            rows[(k, t, t + dt)] += d
        if reopen and i == 0:  # the rebuilt dataflow desires the persisted row too
            b = colmz.concat([b, colmz.Updates({"k": [1], "v": [0]}, time=[t], diff=[1])])
        if consolidated:  # said so: a caught-up sink writes it as it is, unless some update waits
            b = colmz.consolidate(b)
        sink.step(t, b)
        for a in range(t + 1):
            want: Counter = Counter()
            for (k, v, when), n in rows.items():
                if when <= a:
                    want[(k, v)] += n
            assert dm.counter_of(sink.collection.snapshot(a)) == {r: n for r, n in want.items() if n}


# ----------------------------------------------------------------------------- drained writes

BIG = 70_000  # more than a correction chunk (65,536 rows): the write is read in several chunks


def big_batch(n: int, t: int) -> colmz.Updates:
    return colmz.Updates({"k": list(range(n)), "v": [7] * n}, time=[t] * n, diff=[1] * n)


def test_a_write_that_was_all_the_buffer_held_leaves_it_empty():
    sink = ViewSink(T)
    assert len(sink.step(3, big_batch(BIG, 3))) == BIG  # the initial output (a CREATE's)
    assert len(sink.correction) == 0 and sink.correction.since == 4
    before = sink.rows_consolidated
    # the next step consolidates its own change only, not the write and its negation
    assert sink.step(4, colmz.Updates({"k": [1], "v": [7]}, time=[4], diff=[-1])).to_pylist() == [(1, 7, 4, -1)]
    assert sink.rows_consolidated - before <= 2
    assert len(sink.correction.stats()["pending_low"]) == 0
    assert dm.counter_of(sink.collection.snapshot(4)) == Counter({(k, 7): 1 for k in range(BIG) if k != 1})


def test_a_big_write_with_future_updates_buffered_is_fed_back():
    # an update at a later time stays buffered: the write is fed back, the later one written when due
    sink = ViewSink(T)
    sink.step(3, colmz.concat([big_batch(BIG, 3), colmz.Updates({"k": [0], "v": [7]}, time=[9], diff=[-1])]))
    assert len(sink.correction) > 0
    assert sink.step(8, colmz.Updates.empty(T)).to_pylist() == []
    assert sink.step(9, colmz.Updates.empty(T)).to_pylist() == [(0, 7, 9, -1)]
    assert dm.counter_of(sink.collection.snapshot(9)) == Counter({(k, 7): 1 for k in range(1, BIG)})


def test_a_failed_drained_write_changes_nothing():
    c = FailingCollection(T)
    sink = ViewSink(T, c)
    corr = sink.correction
    c.fail = True
    with pytest.raises(OSError, match="injected"):
        sink.step(0, big_batch(BIG, 0))
    c.fail = False
    assert sink.correction is corr and len(corr) == 0
    assert len(sink.step(1, big_batch(BIG, 1))) == BIG and len(sink.correction) == 0


def test_the_first_commit_after_create_consolidates_only_its_change():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (uk BIGINT, w BIGINT)")
    cat.append("t", pa.table({"k": pa.array(range(BIG), pa.int64()), "v": pa.array([1] * BIG, pa.int64())}))
    cat.append("u", pa.table({"uk": pa.array(range(BIG), pa.int64()), "w": pa.array([2] * BIG, pa.int64())}))
    cat.execute("CREATE MATERIALIZED VIEW j AS SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.uk")
    sink = cat.object("j").maintained.sink
    assert len(sink.correction) == 0  # the creation's write left nothing to consolidate
    before = sink.rows_consolidated
    cat.execute("INSERT INTO t VALUES (5, 3)")
    assert sink.rows_consolidated - before <= 2  # the commit's delta: one row
    assert len(cat.read("j")) == BIG + 1


# ----------------------------------------------------------------------------- passed through


def test_a_consolidated_change_to_a_caught_up_sink_is_written_without_a_sort():
    sink = ViewSink(T)
    sink.step(3, big_batch(BIG, 3))  # drained: the correction is empty
    before, passed = sink.rows_consolidated, sink.rows_passed
    change = colmz.consolidate(colmz.Updates({"k": list(range(0, BIG, 2)), "v": [7] * (BIG // 2)},
                                             time=[4] * (BIG // 2), diff=[-1] * (BIG // 2)))
    written = sink.step(4, change)
    assert written is change and sink.rows_passed - passed == BIG // 2
    assert sink.rows_consolidated == before and len(sink.correction) == 0 and sink.correction.since == 5
    assert dm.counter_of(sink.collection.snapshot(4)) == Counter({(k, 7): 1 for k in range(1, BIG, 2)})
    # again at once: still caught up
    assert len(sink.step(5, colmz.consolidate(big_batch(3, 5)))) == 3 and sink.rows_passed - passed == BIG // 2 + 3
    # a batch not said to be consolidated, or one with an update after the step's time, goes
    # through the correction (the later update waits there)
    sink.step(6, colmz.Updates({"k": [1, 1], "v": [7, 7]}, time=[6, 6], diff=[1, 1]))
    assert sink.rows_passed - passed == BIG // 2 + 3
    assert dm.counter_of(sink.collection.snapshot(6))[(1, 7)] == 4
    late = colmz.consolidate(colmz.Updates({"k": [2, 3], "v": [7, 7]}, time=[7, 9], diff=[1, 1]))
    assert sink.step(7, late).to_pylist() == [(2, 7, 7, 1)] and sink.rows_passed - passed == BIG // 2 + 3
    assert len(sink.correction) > 0
    # not caught up: a consolidated batch is corrected, not passed
    assert sink.step(8, colmz.consolidate(big_batch(2, 8))).to_pylist() == [(0, 7, 8, 1), (1, 7, 8, 1)]
    assert sink.rows_passed - passed == BIG // 2 + 3
    assert sink.step(9, colmz.Updates.empty(T)).to_pylist() == [(3, 7, 9, 1)]


def test_a_failed_passed_write_changes_nothing():
    c = FailingCollection(T)
    sink = ViewSink(T, c)
    sink.step(0, big_batch(BIG, 0))
    corr = sink.correction
    c.fail = True
    with pytest.raises(OSError, match="injected"):
        sink.step(1, colmz.consolidate(big_batch(5, 1)))
    c.fail = False
    assert sink.correction is corr and len(corr) == 0 and corr.since == 1 and c.upper == 1
    assert len(sink.step(2, colmz.consolidate(big_batch(5, 2)))) == 5
    assert dm.counter_of(c.snapshot(2))[(4, 7)] == 2
