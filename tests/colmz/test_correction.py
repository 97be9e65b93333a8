"""Correction against an exact multiset reference model of ``src/compute/src/sink/correction_v2.rs``'s contract, plus its edge cases.

The reference model: the multiset ``M`` of all inserted updates (negated where applicable,
times clamped to the since at insert time). A read ``updates_before(U)`` with ``since = s < U``
returns ``consolidate{(d, max(t, s), r) : max(t, s) < U}`` sorted by ``(time, data)``.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import given as hypothesis_given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import colmz
from colmz.correction import Correction
from colmz.errors import SinceRegression
from colmz.kernels.advance import MAX_STALE_RUNS
from colmz.ops import DiffOverflowError
from colmz.rollback import roll_back, save

MAX = 2**64 - 1


# ----------------------------------------------------------------------------- the model


def _norm(v):
    # NaN = NaN for comparisons; -0.0 = 0.0.
    if isinstance(v, float):
        if math.isnan(v):
            return ("nan",)
        if v == 0.0:
            return 0.0
    return v


class Model:
    """The naive multiset reference buffer."""

    def __init__(self):
        self.m = collections.Counter()
        self.since = 0

    def insert(self, rows, negate=False):
        if self.since is None:
            return
        for *data, t, d in rows:
            key = tuple(_norm(v) for v in data)
            self.m[(key, max(t, self.since))] += -d if negate else d

    def read(self, upper):
        s = self.since
        if s is None or not (upper is None or s < upper):
            return collections.Counter()
        out = collections.Counter()
        for (data, t), r in self.m.items():
            t2 = max(t, s)
            if upper is None or t2 < upper:
                out[(data, t2)] += r
        return +out if all(v > 0 for v in out.values()) else collections.Counter({k: v for k, v in out.items() if v != 0})


def read_rows(c: Correction, upper):
    return [r for part in c.updates_before(upper) for r in part.to_pylist()]


def as_counter(rows):
    out = collections.Counter()
    for *data, t, d in rows:
        out[(tuple(_norm(v) for v in data), t)] += d
    return out


def check_read(rows, expected: collections.Counter):
    got = as_counter(rows)
    assert len(got) == len(rows), "read returned a (data, time) twice"
    assert all(r[-1] != 0 for r in rows), "read returned a zero diff"
    times = [r[-2] for r in rows]
    assert times == sorted(times), "read not sorted by time"
    assert got == expected


def upd(keys, times, diffs, **extra):
    data = {"k": keys, **extra}
    return colmz.Updates(data, time=np.array(times, np.uint64), diff=np.array(diffs, np.int64))


# ----------------------------------------------------------------------------- state machine

data_values = st.one_of(
    st.integers(0, 5),
    st.none(),
)
str_values = st.one_of(st.sampled_from(["", "a", "b", "longer than seven", "x" * 20]), st.none())
float_values = st.one_of(st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf")]), st.none())
times = st.one_of(st.integers(0, 40), st.integers(2**40, 2**40 + 5), st.just(MAX), st.just(MAX - 1))
diffs = st.sampled_from([-2, -1, 1, 1, 2])


@st.composite
def batches(draw):
    n = draw(st.integers(0, 12))
    ks = [draw(data_values) for _ in range(n)]
    ss = [draw(str_values) for _ in range(n)]
    fs = [draw(float_values) for _ in range(n)]
    ts = [draw(times) for _ in range(n)]
    ds = [draw(diffs) for _ in range(n)]
    return ks, ss, fs, ts, ds


def to_updates(b):
    ks, ss, fs, ts, ds = b
    return colmz.Updates(
        {"k": pa.array(ks, pa.int64()), "s": pa.array(ss, pa.string()), "f": pa.array(fs, pa.float64())},
        time=np.array(ts, np.uint64), diff=np.array(ds, np.int64),
    )


class CorrectionMachine(RuleBasedStateMachine):
    """Sink-shaped operation sequences against the model; every invariant after every step."""

    @initialize(
        stage=st.sampled_from([1, 4, 64]),
        chunk=st.sampled_from([1, 3, 1000]),
        prop=st.sampled_from([2.0, 3.0]),
        fuel=st.sampled_from([1, 1_000_000]),
    )
    def setup(self, stage, chunk, prop, fuel):
        self.c = Correction(stage_size=stage, chunk_size=chunk, chain_proportionality=prop, restore_fuel=fuel)
        self.model = Model()
        self.last_read = []

    @rule(b=batches())
    def insert_desired(self, b):
        u = to_updates(b)
        self.c.insert(u)
        self.model.insert(u.to_pylist())

    @rule(b=batches())
    def insert_persisted(self, b):
        u = to_updates(b)
        self.c.insert_negated(u)
        self.model.insert(u.to_pylist(), negate=True)

    @precondition(lambda self: self.last_read)
    @rule()
    def feed_back_last_read(self):
        rows = self.last_read
        u = colmz.Updates(
            {"k": pa.array([r[0] for r in rows], pa.int64()), "s": pa.array([r[1] for r in rows], pa.string()),
             "f": pa.array([r[2] for r in rows], pa.float64())},
            time=np.array([r[3] for r in rows], np.uint64), diff=np.array([r[4] for r in rows], np.int64),
        )
        self.c.insert_negated(u)
        self.model.insert(rows, negate=True)
        self.last_read = []

    @rule(step=st.integers(0, 6))
    def advance_since(self, step):
        if self.model.since is None:
            return
        s = min(self.model.since + step, MAX)
        self.c.advance_since(s)
        self.model.since = s

    @rule(upper=st.one_of(st.integers(0, 45), st.just(2**40 + 3), st.just(MAX), st.none()))
    def read(self, upper):
        rows = read_rows(self.c, upper)
        check_read(rows, self.model.read(upper))
        self.last_read = rows

    @rule(upper=st.one_of(st.integers(0, 45), st.just(2**40 + 3), st.none()))
    def read_and_feed_back_the_read_itself(self, upper):
        # The sink's tick: the read's own Updates go straight back (its encoding is kept).
        out = colmz.concat(self.c.updates_before(upper))
        rows = out.to_pylist() if len(out) % 2 else []  # sometimes decoded first, sometimes not
        self.c.insert_negated(out)
        rows = rows or out.to_pylist()
        check_read(rows, self.model.read(upper))
        self.model.insert(rows, negate=True)
        self.last_read = []

    @rule()
    def read_just_past_since(self):
        s = self.model.since
        if s is None or s == MAX:
            return
        rows = read_rows(self.c, s + 1)
        check_read(rows, self.model.read(s + 1))
        self.last_read = rows

    @rule()
    def consolidate_at_since(self):
        self.c.consolidate_at_since()
        s = self.model.since
        if s is not None and s < MAX:
            rows = list(r for p in self.c.consolidated_updates_before(s + 1) for r in p.to_pylist())
            check_read(rows, self.model.read(s + 1))

    @invariant()
    def invariants_hold(self):
        self.c.check_invariants()
        assert self.c.since == self.model.since


CorrectionMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestCorrectionMachine = CorrectionMachine.TestCase


# ----------------------------------------------------------------------------- edge cases (§2.7)


def test_since_advancement_unsorts_chains_cba_example():
    # Since advancement: since=[2]; the two chains must merge to [(a,2,+1),(a,3,-1)].
    c = Correction(stage_size=1)
    c.insert(upd(["c", "b", "a"], [1, 2, 3], [1, -1, -1]))
    c.insert(upd(["b", "a", "c"], [1, 2, 2], [1, 1, -1]))
    c.advance_since(2)
    assert read_rows(c, 4) == [("a", 2, 1), ("a", 3, -1)]
    c.check_invariants()


@pytest.mark.parametrize("n_times", [MAX_STALE_RUNS - 1, MAX_STALE_RUNS])
def test_stale_time_strategy_switch(n_times):
    # 31 distinct stale times cut runs; 32 sort. Both must give the model's answer.
    c = Correction(stage_size=1)
    model = Model()
    for t in range(n_times):
        u = upd([t % 3, 7], [t, t], [1, 1])
        c.insert(u)
        model.insert(u.to_pylist())
        read_rows(c, t + 1)  # build emitted / pending_low chains at many times
    c.advance_since(n_times)
    model.since = n_times
    sorts_before = c.work.sorts
    rows = read_rows(c, n_times + 1)
    check_read(rows, model.read(n_times + 1))
    assert all(r[1] == n_times for r in rows)
    assert (c.work.sorts > sorts_before) == (n_times >= MAX_STALE_RUNS)


def test_since_jump():
    # upstream since_jump: 100 times with a-t +1, a-t -1, b-t +1 -> 100 updates at time 100.
    c = Correction()
    for t in range(100):
        c.insert(upd([f"a-{t}", f"a-{t}", f"b-{t}"], [t, t, t], [1, -1, 1]))
    c.advance_since(100)
    c.consolidate_at_since()
    rows = read_rows(c, 101)
    assert len(rows) == 100
    assert {r[1] for r in rows} == {100} and {r[2] for r in rows} == {1}
    assert {r[0] for r in rows} == {f"b-{t}" for t in range(100)}


def test_upper_not_beyond_since():
    c = Correction()
    c.insert(upd(["a"], [5], [1]))
    c.advance_since(10)
    before = c.stats()
    assert read_rows(c, 7) == []
    assert c.stats() == before  # no state change
    assert read_rows(c, 11) == [("a", 10, 1)]


def test_read_at_upper_that_splits_a_chunk():
    c = Correction(chunk_size=10, stage_size=1000)
    n = 100
    c.insert(upd(list(range(n)), list(range(n)), [1] * n))
    rows = read_rows(c, 50)
    assert [r[1] for r in rows] == list(range(50))
    c.check_invariants()
    rows = read_rows(c, 100)
    assert [r[1] for r in rows] == list(range(100))


def test_regressing_upper():
    c = Correction()
    c.insert(upd(list(range(12)), list(range(12)), [1] * 12))
    assert [r[1] for r in read_rows(c, 10)] == list(range(10))
    assert [r[1] for r in read_rows(c, 5)] == list(range(5))
    c.check_invariants()
    assert len(c.stats()["pending_low"]) >= 1  # [5, 10) went back to pending_low
    assert [r[1] for r in read_rows(c, 10)] == list(range(10))


def test_empty_upper_reads_everything_then_routes_to_pending_low():
    c = Correction()
    c.insert(upd([1, 2], [3, MAX], [1, 1]))
    assert read_rows(c, None) == [(1, 3, 1), (2, MAX, 1)]
    assert c.boundary is None
    assert c.stats()["buckets"] == []
    c.insert(upd([3], [7], [1]))
    read_rows(c, None)
    c.check_invariants()
    assert c.stats()["pending_low"] == [] and c.stats()["emitted"] == 3


def test_empty_since_drops_inserts_and_reads_nothing():
    c = Correction()
    c.insert(upd([1], [3], [1]))
    c.advance_since(None)
    c.insert(upd([2], [4], [1]))
    assert read_rows(c, None) == []
    assert read_rows(c, 100) == []
    with pytest.raises(SinceRegression, match="since must not regress"):
        c.advance_since(5)


def test_retractions_consolidate_to_nothing():
    c = Correction(stage_size=2)
    c.insert(upd([1, 1], [3, 3], [1, -1]))  # within one insert
    c.insert(upd([2], [3], [1]))
    c.insert_negated(upd([2], [3], [1]))  # across stage and chains
    assert read_rows(c, 10) == []
    c.insert(upd([5], [4], [1]))
    out = read_rows(c, 10)
    assert out == [(5, 4, 1)]
    c.insert_negated(upd([5], [4], [1]))  # across emitted and feedback
    assert read_rows(c, 10) == []
    assert len(c) == 0


def test_far_future_retractions_are_never_touched():
    # temporal-filter shape: each tick inserts rows and their retractions at t + 2**40
    c = Correction(stage_size=16, chunk_size=64)
    future = 2**40
    for t in range(200):
        c.insert(upd([t, t + 1000], [t, t], [1, 1]))
        c.insert(upd([t, t + 1000], [t + future, t + future], [-1, -1]))
        for part in c.updates_before(t + 1):
            c.insert_negated(part)
        c.advance_since(t + 1)
    far = sum(b["chain_counts"] and sum(b["chain_counts"]) or 0 for b in c.stats()["buckets"] if b["offset"] >= 2**39)
    staged = c.stats()["stage"]  # a small remainder of the last read waits in the stage
    assert far + staged == 400 and staged <= 16
    # a read below the far-future mass copies none of it
    copied = c.work.copied
    c.insert(upd([7], [300], [1]))
    rows = read_rows(c, 301)
    assert rows == [(7, 300, 1)]
    # at most the staged rows (the new row, feedback, the <= 16 remainder) are copied: none of
    # the far-future updates in the bucket chain is copied or touched
    assert c.work.copied - copied <= 4 + staged


def test_late_feedback_below_boundary_cancels_emitted():
    c = Correction()
    c.insert(upd(["x"], [2], [1]))
    assert read_rows(c, 5) == [("x", 2, 1)]
    c.insert_negated(upd(["x"], [2], [1]))  # late: below boundary 5 -> pending_low
    assert c.stats()["stage"] == 1
    assert read_rows(c, 5) == []
    c.check_invariants()


def test_small_trickling_inserts_are_not_routed_until_a_read():
    c = Correction(stage_size=100)
    for t in range(10):
        c.insert(upd([t], [t], [1]))
    s = c.stats()
    assert s["stage"] == 10 and s["chains"] == 0
    assert len(read_rows(c, 100)) == 10
    assert c.stats()["stage"] == 0


def test_max_time_and_consolidate_at_since_noop_at_max():
    c = Correction()
    c.insert(upd([1, 2], [MAX, MAX - 1], [1, 1]))
    c.advance_since(MAX)
    before = c.stats()
    c.consolidate_at_since()
    assert c.stats() == before
    assert read_rows(c, None) == [(1, MAX, 1), (2, MAX, 1)]


def _state(c):
    s = c.stats()
    s.pop("work")
    return s


def test_diff_overflow_on_insert_leaves_buffer_unchanged():
    c = Correction(stage_size=1)
    c.insert(upd([1], [1], [2**63 - 1]))
    before = _state(c)
    with pytest.raises(DiffOverflowError, match=r"data row \(1,\) at time 1 sum to 9223372036854775808") as e:
        c.insert(upd([1], [1], [1]))  # the flush merges into the same bucket and overflows
    assert (e.value.row, e.value.time, e.value.total) == ((1,), 1, 2**63)
    assert _state(c) == before
    assert read_rows(c, 5) == [(1, 1, 2**63 - 1)]


def test_diff_overflow_on_read_leaves_buffer_unchanged():
    c = Correction(stage_size=100)
    c.insert(upd([1], [1], [2**63 - 1]))
    c.insert(upd([1], [1], [1]))
    before = _state(c)
    with pytest.raises(DiffOverflowError, match=r"in a flush of the stage: the updates of data row \(1,\) at time 1"):
        read_rows(c, 5)
    assert _state(c) == before
    c.insert(upd([1], [1], [-2]))  # now the sum fits again
    assert read_rows(c, 5) == [(1, 1, 2**63 - 2)]


def test_equivalence_workload_upsert():
    # upstream equivalence_with_v1: 50 times, 4 keys, k-t +1 and k-(t-1) -1 at time t.
    c = Correction(stage_size=8)
    model = Model()
    for t in range(50):
        for k in range(4):
            rows = [(f"{k}-{t}", t, 1)] + ([(f"{k}-{t - 1}", t, -1)] if t else [])
            u = upd([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            c.insert(u)
            model.insert(u.to_pylist())
    for t in range(50):
        rows = read_rows(c, t + 1)
        check_read(rows, model.read(t + 1))
        if rows:
            fb = upd([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            c.insert_negated(fb)
            model.insert(fb.to_pylist(), negate=True)
        c.advance_since(t + 1)
        model.since = t + 1
        c.check_invariants()
    assert len(read_rows(c, None)) == 0


def test_null_and_empty_batches_combine():
    c = Correction()
    c.insert(colmz.Updates({"k": pa.nulls(2)}, time=[1, 2], diff=[1, 1]))
    c.insert(colmz.Updates({"k": pa.array([], pa.string())}, time=np.array([], np.uint64), diff=np.array([], np.int64)))
    c.insert(colmz.Updates({"k": ["a"]}, time=[1], diff=[1]))
    rows = read_rows(c, 10)
    assert as_counter(rows) == collections.Counter({((None,), 1): 1, ((None,), 2): 1, (("a",), 1): 1})
    with pytest.raises(colmz.SchemaError):
        c.insert(colmz.Updates({"k": [1]}, time=[1], diff=[1]))


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="chain_proportionality"):
        Correction(chain_proportionality=1.0)
    with pytest.raises(ValueError, match="chunk_size"):
        Correction(chunk_size=0)
    c = Correction()
    with pytest.raises(TypeError, match="updates must be colmz.Updates"):
        c.insert([1, 2])
    c.advance_since(5)
    with pytest.raises(SinceRegression, match="current since 5, got 4"):
        c.advance_since(4)
    with pytest.raises(ValueError, match="upper"):
        c.updates_before(-1)
    with pytest.raises(OverflowError, match="negated"):
        c.insert_negated(upd([1], [1], [-(2**63)]))
    assert len(c) == 0


def test_repr_and_stats():
    c = Correction()
    c.insert(upd([1, 2], [1, 2], [1, 1]))
    read_rows(c, 2)
    s = c.stats()
    assert s["updates"] == 2 and s["emitted"] == 1
    assert "Correction(updates=2" in repr(c)
    assert s["bytes"] > 0


# ----------------------------------------------------------------------------- complexity


def _fill_and_drain(ticks: int, jump: bool) -> int:
    c = Correction(stage_size=4096, chunk_size=4096)
    for t in range(ticks):
        keys = [t * 16 + i for i in range(16)]
        c.insert(upd(keys, [t] * 16, [1] * 16))
    if jump:
        c.advance_since(ticks)
        for part in c.updates_before(ticks + 1):
            c.insert_negated(part)
    else:
        for t in range(ticks):
            for part in c.updates_before(t + 1):
                c.insert_negated(part)
            c.advance_since(t + 1)
    return c.work.copied


@pytest.mark.parametrize("jump", [False, True])
def test_catch_up_work_is_linear(jump):
    # §2.6(9): work grows <= 8x when ticks grow 4x (quadratic would be 16x).
    small = _fill_and_drain(512, jump)
    large = _fill_and_drain(2048, jump)
    assert large <= 8 * small, (small, large)


def test_chains_per_bucket_are_logarithmic():
    c = Correction(stage_size=1, chain_proportionality=3.0)
    n = 0
    for t in range(400):
        c.insert(upd([t], [10**6 + t], [1]))
        n += 1
    for b in c.stats()["buckets"]:
        assert b["chains"] <= math.log(n, 3) + 1
        counts = b["chain_counts"]
        assert all(a >= 3 * b_ for a, b_ in zip(counts, counts[1:]))


def test_reads_of_nothing_concatenate_to_an_empty_batch_of_the_columns():
    c = Correction()
    assert len(colmz.concat(c.updates_before(5))) == 0  # nothing inserted yet
    c.insert(upd(["a"], [7], [1]))
    empty = colmz.concat(c.updates_before(5))
    assert len(empty) == 0 and empty.column_names == ["k"]
    c.advance_since(9)
    assert len(colmz.concat(c.updates_before(3))) == 0  # upper <= since: short-circuited
    assert colmz.concat(c.updates_before(10)).to_pylist() == [("a", 9, 1)]


# ----------------------------------------------------------------------------- caller memory


def test_mutating_callers_arrays_after_insert_changes_nothing():
    # The reported repro: one reused buffer per batch must not reach the staged updates.
    c = Correction()
    t = np.array([0, 0], np.uint64)
    d = np.array([1, 1], np.int64)
    c.insert(colmz.Updates({"k": [1, 2]}, time=t, diff=d))
    d[:] = 0
    t[:] = 5
    assert read_rows(c, 1) == [(1, 0, 1), (2, 0, 1)]


def test_reused_buffers_for_every_batch_including_data_and_negated():
    c = Correction(stage_size=1000)
    k = np.zeros(2, np.int64)
    t = np.zeros(2, np.uint64)
    d = np.zeros(2, np.int64)
    model = collections.Counter()
    for i in range(10):
        k[:] = [i, i + 100]
        t[:] = [i, i]
        d[:] = [1, 2]
        u = colmz.Updates({"k": k}, time=t, diff=d)
        if i % 3 == 0:
            c.insert_negated(u)
            sign = -1
        else:
            c.insert(u)
            sign = 1
        model[((i,), i)] += sign
        model[((i + 100,), i)] += 2 * sign
    k[:] = 0
    d[:] = 0
    got = as_counter(read_rows(c, 20))
    assert got == {key: v for key, v in model.items() if v}


def test_copy_false_is_zero_copy_into_the_stage():
    c = Correction()
    t = np.array([0, 1], np.uint64)
    d = np.array([1, 1], np.int64)
    u = colmz.Updates({"k": [1, 2]}, time=t, diff=d, copy=False)
    c.insert(u)
    staged = c._stage.parts[0]
    assert np.shares_memory(staged.time, t) and np.shares_memory(staged.diff, d)
    assert not staged.time.flags.writeable and not staged.diff.flags.writeable
    assert read_rows(c, 2) == [(1, 0, 1), (2, 1, 1)]


# ----------------------------------------------------------------------------- overflow reports


@pytest.mark.parametrize("stale_times", [1, 40])
def test_overflow_in_a_read_names_the_row_and_the_since(stale_times):
    # Separately fine, the updates of one row at many times sum past int64 once a read
    # advances them to the since: the read names the row and the since, and rolls back.
    c = Correction(stage_size=1)
    big = 2**63 - 1
    c.insert(upd(["x"] * stale_times, list(range(stale_times)), [1] * stale_times))
    c.insert(upd(["k"], [stale_times], [big]))
    c.insert(upd(["k"], [stale_times + 1], [1]))
    c.insert(upd(["z"], [stale_times + 1], [5]))
    c.advance_since(stale_times + 1)
    before = _state(c)
    with pytest.raises(DiffOverflowError, match=rf"data row \('k',\) at time {stale_times + 1} sum to 9223372036854775808"):
        read_rows(c, stale_times + 2)
    assert _state(c) == before
    c.insert(upd(["k"], [stale_times + 1], [-1]))  # the retraction: the buffer works again
    assert read_rows(c, stale_times + 2) == [
        ("k", stale_times + 1, big), ("x", stale_times + 1, stale_times), ("z", stale_times + 1, 5)]
    c.check_invariants()


def test_overflow_in_a_small_merge_names_the_row():
    c = Correction(stage_size=1)
    c.insert(upd([7, 8], [3, 3], [-(2**63), 1]))
    with pytest.raises(DiffOverflowError, match=r"data row \(7,\) at time 3 sum to -9223372036854775809"):
        c.insert(upd([7], [3], [-1]))
    assert read_rows(c, 4) == [(7, 3, -(2**63)), (8, 3, 1)]



def test_feeding_back_a_small_read_holding_the_min_diff_raises():
    # A small read notes whether its output can be negated; feeding back one that holds
    # -2**63 still raises and changes nothing, and one that does not is accepted.
    c = Correction()
    c.insert(upd([1, 2], [1, 1], [-(2**63), 3]))
    out = colmz.concat(c.updates_before(2))
    before = _state(c)
    with pytest.raises(OverflowError, match="cannot be negated"):
        c.insert_negated(out)
    assert _state(c) == before
    c.insert(upd([1], [1], [1]))  # brings the sum to -2**63 + 1
    out = colmz.concat(c.updates_before(2))
    assert out.to_pylist() == [(1, 1, -(2**63) + 1), (2, 1, 3)]
    c.insert_negated(out)
    c.advance_since(2)
    assert read_rows(c, 3) == [] and len(c) == 0


def test_small_reads_of_read_only_and_strided_batches():
    # Batches given up with copy=False (read-only, here also strided) read like any other,
    # alone and beside a staged remainder.
    c = Correction()
    model = collections.Counter()
    for t in range(6):
        k = (np.arange(8, dtype=np.int64) + 10 * t)[::2]
        times = np.array([t, 0, t, 0, t + 2**40, 0, t, 0], np.uint64)[::2]
        d = np.array([1, 2, 3, -1, 9, 9, 9, 9], np.int64)[::2]
        c.insert(colmz.Updates({"k": k}, time=times, diff=d, copy=False))
        for key, tm, df in zip(k.tolist(), times.tolist(), d.tolist()):
            model[((key,), tm)] += df
        got = as_counter(read_rows(c, t + 1))
        assert got == {(key, tm): v for (key, tm), v in model.items() if tm < t + 1 and v}
        c.insert_negated(colmz.concat(c.updates_before(t + 1)))
        for (key, tm), v in got.items():
            model[(key, tm)] -= v
        c.advance_since(t + 1)
        c.check_invariants()


# ----------------------------------------------------------------------------- reading before any insert


def test_feeding_back_an_empty_first_read_fixes_no_schema():
    # A sink whose first tick has nothing to write: read, feed back the empty read, advance,
    # then write real data on the second tick.
    c = Correction()
    first = colmz.concat(c.updates_before(1))
    assert len(first) == 0 and first.column_names == []
    c.insert_negated(first)
    c.advance_since(1)
    assert c.schema is None
    c.insert(upd(["a", "b"], [1, 3], [1, 1]))
    assert c.schema[0].name == "k"
    second = colmz.concat(c.updates_before(2))
    assert second.to_pylist() == [("a", 1, 1)]
    c.insert_negated(second)
    c.advance_since(2)
    assert colmz.concat(c.updates_before(4)).to_pylist() == [("b", 3, 1)]
    c.check_invariants()


def test_concat_of_an_empty_no_column_read_with_real_data():
    empty = colmz.concat(Correction().updates_before(5))
    real = upd(["a"], [1], [1])
    assert colmz.concat([empty, real]).to_pylist() == [("a", 1, 1)]
    assert colmz.concat([real, empty, empty]).to_pylist() == [("a", 1, 1)]
    assert colmz.concat([empty, empty]).column_names == []


def test_empty_batches_with_columns_fix_nothing_but_must_agree_with_fixed_columns():
    c = Correction()
    c.insert(colmz.Updates.empty({"j": pa.int64()}))
    assert c.schema is None
    c.insert(upd(["a"], [1], [1]))
    with pytest.raises(colmz.SchemaError, match="data columns differ"):
        c.insert(colmz.Updates.empty({"j": pa.int64()}))
    c.insert_negated(colmz.Updates.empty())  # no columns: always fine
    assert read_rows(c, 5) == [("a", 1, 1)]


def test_schema_at_construction():
    c = Correction(schema={"k": pa.string()})
    empty = colmz.concat(c.updates_before(3))
    assert empty.column_names == ["k"] and empty.schema[0].type == pa.string()
    c.insert_negated(empty)
    c.insert(upd(["a"], [4], [1]))
    assert read_rows(c, 5) == [("a", 4, 1)]
    with pytest.raises(colmz.SchemaError):
        c.insert(colmz.Updates({"x": [1]}, time=[1], diff=[1]))
    with pytest.raises(ValueError, match="schema"):
        Correction(schema={"k": "not a type"})


# ----------------------------------------------------------------------------- drain_stepwise


def _rows(batch):
    return [(*(_norm(v) for v in r[:-2]), r[-2], r[-1]) for r in batch.to_pylist()]


def _loop(c: Correction, uppers):
    outs = []
    for u in uppers:
        out = colmz.concat(c.updates_before(u))
        c.insert_negated(out)
        c.advance_since(u)
        outs.extend(_rows(out))
    return outs


def _same_answers(a: Correction, b: Correction):
    assert (a.since, a.boundary, a.schema) == (b.since, b.boundary, b.schema)
    for u in (a.since, None if a.since is None else a.since + 1, None):
        if u is None or u <= MAX:
            ra = [r for p in a.consolidated_updates_before(u) for r in _rows(p)]
            rb = [r for p in b.consolidated_updates_before(u) for r in _rows(p)]
            assert ra == rb


upper_steps = st.one_of(st.integers(0, 3), st.integers(0, 20), st.just(2**40), st.just(MAX))


@st.composite
def drain_ops(draw):
    ops = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["insert", "insert", "negated", "drain", "drain", "read"]))
        if kind in ("insert", "negated"):
            ops.append((kind, draw(batches())))
        elif kind == "read":
            ops.append((kind, draw(st.one_of(st.integers(0, 45), st.just(MAX), st.none()))))
        else:
            steps = draw(st.lists(upper_steps, max_size=6))
            start_below = draw(st.booleans()) and draw(st.integers(0, 3)) == 0
            regress_at = draw(st.one_of(st.none(), st.integers(0, 5)))
            to_none = draw(st.integers(0, 9)) == 0
            ops.append((kind, (steps, start_below, regress_at, to_none)))
    return ops


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@hypothesis_given(ops=drain_ops(), stage=st.sampled_from([1, 5, 64]), chunk=st.sampled_from([1, 3, 1000]))
def test_drain_stepwise_equals_the_tick_loop(ops, stage, chunk):
    a = Correction(stage_size=stage, chunk_size=chunk)  # drained in one call
    b = Correction(stage_size=stage, chunk_size=chunk)  # the loop
    model = Model()
    for kind, arg in ops:
        if kind in ("insert", "negated"):
            u = to_updates(arg)
            for c in (a, b):
                (c.insert if kind == "insert" else c.insert_negated)(u)
            model.insert(u.to_pylist(), negate=kind == "negated")
        elif kind == "read":
            ra = [r for p in a.updates_before(arg) for r in _rows(p)]
            assert ra == [r for p in b.updates_before(arg) for r in _rows(p)]
            check_read(ra, model.read(arg))
        else:
            steps, start_below, regress_at, to_none = arg
            since = a.since
            if since is None:
                uppers = [None] * len(steps)
            else:
                uppers, t = [], since - 1 if start_below and since > 0 else since
                for s in steps:
                    t = min(t + s, MAX)
                    uppers.append(t)
                if to_none:
                    uppers.append(None)
            bad = bool(uppers) and since is not None and uppers[0] is not None and uppers[0] < since
            if regress_at is not None and regress_at + 1 < len(uppers) and uppers[regress_at] not in (None, 0):
                uppers[regress_at + 1] = uppers[regress_at] - 1
                bad = True
            if bad:
                before = _state(a)
                with pytest.raises(ValueError, match="uppers|since must not regress"):
                    a.drain_stepwise(uppers)
                assert _state(a) == before
                continue
            out = a.drain_stepwise(uppers)
            got = _rows(out)
            assert got == _loop(b, uppers)
            # and against the reference model, one step at a time
            expected = collections.Counter()
            for u in uppers:
                r = model.read(u)
                for k, v in r.items():
                    expected[k] += v
                model.insert([(*k[0], k[1], v) for k, v in r.items()], negate=True)
                model.since = u
            assert as_counter(out.to_pylist()) == collections.Counter({k: v for k, v in expected.items() if v})
            if uppers:
                cut = np.searchsorted(out.time, [u for u in uppers if u is not None])
                assert (np.diff(cut) >= 0).all()
        a.check_invariants()
        _same_answers(a, b)
    # the two buffers keep answering alike
    for u in (None,):
        assert [r for p in a.updates_before(u) for r in _rows(p)] == [r for p in b.updates_before(u) for r in _rows(p)]


def test_drain_stepwise_cases():
    c = Correction()
    assert len(c.drain_stepwise([])) == 0
    assert len(c.drain_stepwise([0, 0])) == 0 and c.since == 0
    c.insert(upd(["a", "b", "c", "d"], [0, 3, 7, MAX], [1, 1, 1, 1]))
    out = c.drain_stepwise([3, 3, 8])
    assert out.to_pylist() == [("a", 0, 1), ("b", 3, 1), ("c", 7, 1)]
    assert np.searchsorted(out.time, [3, 3, 8]).tolist() == [1, 1, 3]
    assert (c.since, c.boundary) == (8, 8)
    # consolidated_updates_before holds the last step's corrections, as after the loop
    assert [r for p in c.consolidated_updates_before(9) for r in p.to_pylist()] == [("b", 3, 1), ("c", 7, 1)]
    assert read_rows(c, MAX) == []
    with pytest.raises(SinceRegression, match="uppers\\[0\\] = 7"):
        c.drain_stepwise([7, 9])
    with pytest.raises(ValueError, match=r"uppers\[1\] is 9, uppers\[2\] is 8"):
        c.drain_stepwise([9, 9, 8])
    with pytest.raises(ValueError, match=r"uppers\[0\]"):
        c.drain_stepwise([-1])
    assert c.drain_stepwise([None]).to_pylist() == [("d", MAX, 1)]
    assert c.since is None and len(c.drain_stepwise([None, None])) == 0
    with pytest.raises(SinceRegression):
        c.drain_stepwise([5])


def test_drain_stepwise_refuses_a_correction_it_cannot_negate():
    c = Correction()
    c.insert(upd(["a", "b"], [1, 5], [-(2**63), 1]))
    before = _state(c)
    with pytest.raises(OverflowError, match="-2\\*\\*63"):
        c.drain_stepwise([2, 6])
    assert _state(c) == before
    assert read_rows(c, 6) == [("a", 1, -(2**63)), ("b", 5, 1)]


def test_drain_stepwise_work_does_not_grow_with_the_uppers():
    # One read's merges whatever the number of uppers.
    c = Correction()
    n = 4096
    c.insert(colmz.Updates({"k": np.arange(n) % 16}, time=np.arange(n, dtype=np.uint64) // 16,
                           diff=np.ones(n, np.int64)))
    merges = c.work.merges
    out = c.drain_stepwise(range(1, n // 16 + 1))
    assert len(out) == n and c.work.merges - merges <= 2


def test_int32_after_int64_widens_instead_of_raising():
    c = Correction(stage_size=2)
    c.insert(colmz.Updates({"k": pa.array([1, 2], pa.int64())}, time=[0, 1], diff=[1, 1]))
    c.insert(colmz.Updates({"k": pa.array([1, 3], pa.int32())}, time=[0, 1], diff=[1, 1]))
    c.insert(colmz.Updates({"k": pa.array([2], pa.int16())}, time=[1], diff=[-1]))
    assert c.schema == (colmz.ColumnSpec("k", pa.int64()),)
    out = colmz.concat(c.updates_before(2))
    assert out.schema == c.schema
    assert out.to_pylist() == [(1, 0, 2), (3, 1, 1)]
    f = Correction()
    f.insert(colmz.Updates({"x": pa.array([0.5], pa.float32())}, time=[0], diff=[1]))
    f.insert(colmz.Updates({"x": pa.array([0.5], pa.float64())}, time=[0], diff=[1]))
    assert read_rows(f, 1) == [(0.5, 0, 2)] and f.schema[0].type == pa.float64()
    with pytest.raises(colmz.SchemaError, match="only lossless widening"):
        f.insert(colmz.Updates({"x": pa.array([1], pa.int64())}, time=[0], diff=[1]))


def test_rollback_state_declares_every_field_that_changes():
    # Configuration and the cumulative work counters are not rolled back; everything else is.
    c = Correction()
    fixed = {"chain_proportionality", "chunk_size", "stage_size", "restore_fuel", "work"}
    assert set(vars(c)) - fixed == set(Correction.ROLLBACK_FIELDS)
    c.insert(upd([1, 2], [1, 9], [1, 1]))
    state = save(c)
    before = _state(c)
    read_rows(c, 5)
    c.advance_since(4)
    roll_back(c, state)
    assert _state(c) == before
    roll_back(c, state)  # a saved state can be rolled back to again
    assert read_rows(c, 5) == [(1, 1, 1)]
    c.check_invariants()


# ----------------------------------------------------------------------------- per-call overhead


def _sink_batch(t: int, arrow: bool) -> colmz.Updates:
    keys = np.arange(16, dtype=np.int64) + 16 * t
    names = np.array([f"n{k}" for k in keys])
    data = {"k": pa.array(keys), "s": pa.array(names.tolist())} if arrow else {"k": keys, "s": names}
    return colmz.Updates(data, time=np.full(16, t, np.uint64), diff=np.ones(16, np.int64))


@pytest.mark.parametrize("arrow", [True, False])
def test_columns_are_classified_once_per_batch_not_per_step(arrow):
    # An Arrow (or numpy) column's kind is worked out when the batch is built; inserting it,
    # reading, feeding the read back and advancing do not classify it again.
    from unittest import mock

    import colmz.order
    import colmz.updates

    def counted(fn):
        with mock.patch.object(colmz.order, "kind_of", wraps=colmz.order.kind_of) as a, \
                mock.patch.object(colmz.updates, "kind_of", wraps=colmz.updates.kind_of) as b:
            out = fn()
        return a.call_count + b.call_count, out

    c = Correction()
    for t in range(3):
        n, u = counted(lambda t=t: _sink_batch(t, arrow))
        assert n == 2  # once per data column, on construction
        n, _ = counted(lambda u=u: c.insert(u))
        assert n <= (2 if t == 0 else 0)  # the first insert of a schema may fill its cache
        n, out = counted(lambda t=t: colmz.concat(c.updates_before(t + 1)))
        assert n == 0 and len(out) == 16
        n, _ = counted(lambda out=out, t=t: (c.insert_negated(out), c.advance_since(t + 1)))
        assert n == 0
    assert colmz.concat(c.updates_before(4)).to_pylist() == []  # everything fed back cancelled


def test_sink_tick_python_calls_do_not_grow_with_the_ticks():
    # The tick loop's Python work per tick is bounded and the same early and late: a buffer
    # with a thousand ticks behind it costs what one with a hundred does.
    import sys

    batches = [colmz.Updates({"k": np.arange(16, dtype=np.int64) + 16 * t}, time=np.full(16, t, np.uint64),
                             diff=np.ones(16, np.int64)) for t in range(1100)]
    c = Correction()

    def tick(t):
        c.insert(batches[t])
        c.insert_negated(colmz.concat(c.updates_before(t + 1)))
        c.advance_since(t + 1)

    def calls_per_tick(ticks):
        n = [0]

        def profile(frame, event, arg):
            if event in ("call", "c_call"):
                n[0] += 1

        sys.setprofile(profile)
        try:
            for t in ticks:
                tick(t)
        finally:
            sys.setprofile(None)
        return n[0] / len(ticks)

    for t in range(100):
        tick(t)
    early = calls_per_tick(range(100, 164))
    for t in range(164, 1036):
        tick(t)
    late = calls_per_tick(range(1036, 1100))
    assert late <= early * 1.1 + 2, (early, late)
    assert late < 200, late  # a few dozen Python calls a tick, not hundreds
    assert colmz.concat(c.updates_before(2000)).to_pylist() == [] and len(c) == 0
