"""``colmz.spine.Spine``: oracle state machine, invariants, edge cases, work counters."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import colmz
from colmz.kernels.consolidate import sort_consolidate
from colmz.kernels.fueled import new_cursor, run_merge
from colmz.ops import DiffOverflowError
from colmz.rollback import roll_back, save
from colmz.spine import (
    BatchBoundsError,
    FrontierRegressionError,
    Spine,
    SpineBatch,
    proportional_exert_logic,
)

# ----------------------------------------------------------------------------- helpers


def ints(keys, times, diffs=None):
    diffs = [1] * len(keys) if diffs is None else diffs
    return colmz.Updates({"k": np.array(keys, np.int64)}, time=np.array(times, np.uint64),
                         diff=np.array(diffs, np.int64))


def fill(s: Spine, n_batches: int, size: int, start: int = 0, seed: int = 0, key_range=2**40):
    rng = np.random.default_rng(seed)
    for i in range(start, start + n_batches):
        s.insert(ints(rng.integers(0, key_range, size), [i] * size), i, i + 1)


def fingerprint(s: Spine):
    """Everything a failed call must leave as it was."""
    batches = tuple(
        (id(b), b.lower, b.upper, b.since, len(b)) for b in s._all_batches()
    )
    cursors = tuple(
        (id(st), None if st.cursor is None else tuple(st.cursor.tolist()), st.complete,
         id(st.result))
        for st in s._layers if st is not None and hasattr(st, "cursor")
    )
    return (repr(s), tuple(s.layers()), batches, cursors, tuple(sorted(s.stats().items())),
            s.upper, s.get_logical_compaction(), s.get_physical_compaction(), s.schema)


def held(s: Spine, adv: int = 0) -> dict:
    """The spine's contents as ``{(data..., time advanced to adv): diff}``."""
    acc: Counter = Counter()
    for b in s._all_batches():
        for *data, t, d in SpineBatch(b, s.schema).updates.to_pylist():
            acc[(*data, max(t, adv))] += d
    return {k: v for k, v in acc.items() if v}


def oracle_view(oracle: Counter, adv: int, through=None) -> dict:
    acc: Counter = Counter()
    for (data, t), d in oracle.items():
        if through is None or t < through:
            acc[(*data, max(t, adv))] += d
    return {k: v for k, v in acc.items() if v}


class Eager:
    """Baseline: a binary counter of batches that merges immediately (no fuel).

    Uses the same merge kernel with an unlimited budget and counts updates written.
    """

    def __init__(self):
        self.batches = []
        self.max_work = 0
        self.copies = 0

    def insert(self, updates):
        e = updates.encode()
        self.batches.append(sort_consolidate(e.keys, e.time, e.diff, "data", None))
        work = 0
        while len(self.batches) >= 2 and len(self.batches[-2][1]) <= 2 * len(self.batches[-1][1]):
            b = self.batches.pop()
            a = self.batches.pop()
            n = len(a[1]) + len(b[1])
            out = (np.empty((n, a[0].shape[1]), np.uint64), np.empty(n, np.uint64),
                   np.empty(n, np.int64))
            cur = new_cursor()
            run_merge(a, b, 0, cur, out, 2**62)
            o = int(cur[2])
            self.batches.append((out[0][:o], out[1][:o], out[2][:o]))
            work += o
        self.copies += work
        self.max_work = max(self.max_work, work)


# ----------------------------------------------------------------------------- state machine

KEYS_INT = st.integers(-3, 3)
KEYS_STR = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "abcdefgh", "abcdefghijklmnop"]))


class SpineMachine(RuleBasedStateMachine):
    """Random operation sequences against a multiset oracle of everything inserted."""

    @initialize(
        effort=st.integers(0, 3),
        logic=st.sampled_from([None, "proportional"]),
        auto=st.booleans(),
        strings=st.booleans(),
    )
    def init(self, effort, logic, auto, strings):
        self.s = Spine(effort, logic, auto_physical=auto)
        self.strings = strings
        self.oracle: Counter = Counter()
        self.adv = 0  # last integer logical frontier: what the batches' times may be advanced to

    # -- helpers

    def updates(self, data, lower, upper, n):
        span = (upper if upper is not None else lower + 4) - lower
        times = data.draw(st.lists(st.integers(lower, lower + span - 1), min_size=n, max_size=n))
        diffs = data.draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n))
        if self.strings:
            s1 = data.draw(st.lists(KEYS_STR, min_size=n, max_size=n))
            s2 = data.draw(st.lists(KEYS_INT, min_size=n, max_size=n))
            cols = {"s": pa.array(s1, pa.string()), "i": pa.array(s2, pa.int64())}
            rows = list(zip(s1, s2))
        else:
            k = data.draw(st.lists(KEYS_INT, min_size=n, max_size=n))
            cols = {"k": pa.array(k, pa.int64())}
            rows = [(x,) for x in k]
        u = colmz.Updates(cols, time=np.array(times, np.uint64), diff=np.array(diffs, np.int64))
        return u, rows, times, diffs

    # -- rules

    def _insert(self, data):
        lower = self.s.upper
        upper = lower + data.draw(st.integers(1, 4))
        n = data.draw(st.one_of(st.just(0), st.integers(1, 12), st.integers(13, 70)))
        u, rows, times, diffs = self.updates(data, lower, upper, n)
        self.s.insert(u, lower, upper)
        for r, t, d in zip(rows, times, diffs):
            self.oracle[(r, t)] += d

    @precondition(lambda self: self.s.upper is not None)
    @rule(data=st.data())
    def insert(self, data):
        self._insert(data)

    @precondition(lambda self: self.s.upper is not None)
    @rule(data=st.data(), count=st.integers(2, 12))
    def insert_many(self, data, count):
        for _ in range(count):
            self._insert(data)

    @precondition(lambda self: self.s.upper is not None)
    @rule(data=st.data())
    def insert_rejected(self, data):
        lower = self.s.upper
        fp = fingerprint(self.s)
        kind = data.draw(st.sampled_from(["lower", "empty_interval", "time"]))
        if kind == "lower":
            u, *_ = self.updates(data, lower, lower + 1, 1)
            with pytest.raises(BatchBoundsError, match="lower"):
                self.s.insert(u, lower + 1, lower + 2)
        elif kind == "empty_interval":
            u = self.updates(data, lower, lower + 1, 0)[0]
            with pytest.raises(BatchBoundsError, match="upper"):
                self.s.insert(u, lower, lower)
        else:
            u, *_ = self.updates(data, lower + 2, lower + 3, 1)
            with pytest.raises(BatchBoundsError, match="time"):
                self.s.insert(u, lower, lower + 2)
        assert fingerprint(self.s) == fp

    @precondition(lambda self: self.s.upper is not None)
    @rule(roll=st.integers(0, 15))
    def close(self, roll):
        # Rarely: a closed spine accepts no more inserts, which ends the interesting part.
        if roll == 0:
            self.s.close()
            assert self.s.upper is None

    @rule(effort=st.one_of(st.none(), st.integers(1, 3000)))
    def exert(self, effort):
        self.s.exert(effort)

    @rule(data=st.data())
    def advance_logical(self, data):
        cur = self.s.get_logical_compaction()
        if cur is None:
            return
        top = (self.s.upper if self.s.upper is not None else cur + 10) + 2
        # The empty frontier (nothing readable any more) only rarely.
        rare_none = data.draw(st.integers(0, 20)) == 0
        f = None if rare_none else data.draw(st.integers(cur, max(cur, top)))
        self.s.set_logical_compaction(f)
        if f is not None:
            self.adv = f
        if cur > 0:
            fp = fingerprint(self.s)
            with pytest.raises(FrontierRegressionError):
                self.s.set_logical_compaction(cur - 1)
            assert fingerprint(self.s) == fp

    @rule(data=st.data())
    def advance_physical(self, data):
        cur = self.s.get_physical_compaction()
        if cur is None:
            return
        top = (self.s.upper if self.s.upper is not None else cur + 10) + 2
        rare_none = data.draw(st.integers(0, 10)) == 0
        f = None if rare_none else data.draw(st.integers(cur, max(cur, top)))
        self.s.set_physical_compaction(f)
        if cur > 0:
            fp = fingerprint(self.s)
            with pytest.raises(FrontierRegressionError):
                self.s.set_physical_compaction(cur - 1)
            assert fingerprint(self.s) == fp

    @rule(data=st.data())
    def snapshot(self, data):
        logical = self.s.get_logical_compaction()
        upper = self.s.upper
        if logical is None:
            with pytest.raises(ValueError):
                self.s.snapshot(0)
            return
        hi = (upper - 1) if upper is not None else logical + 6
        if hi < logical:
            with pytest.raises(ValueError):
                self.s.snapshot(logical)
            return
        as_of = data.draw(st.integers(logical, hi))
        got = self.s.snapshot(as_of).to_pylist()
        want: Counter = Counter()
        for (row, t), d in self.oracle.items():
            if t <= as_of:
                want[row] += d
        want = {r: d for r, d in want.items() if d}
        assert all(t == as_of for *_, t, _ in got)
        assert {tuple(r[:-2]): r[-1] for r in got} == want
        assert len(got) == len(want)
        if logical > 0:
            with pytest.raises(ValueError, match="logical"):
                self.s.snapshot(logical - 1)
        if upper is not None:
            with pytest.raises(ValueError, match="upper"):
                self.s.snapshot(upper)

    @rule(data=st.data())
    def batches_through(self, data):
        s = self.s
        phys, upper, logical = s.get_physical_compaction(), s.upper, s.get_logical_compaction()
        if logical is None or phys is None or (upper is not None and phys > upper):
            return
        # Valid cuts: the physical frontier, the spine's upper, and pending batch boundaries.
        cuts = {phys, upper} | {b.upper for b in s.pending}
        cuts = [c for c in cuts if (c is None or c >= phys) and (upper is None or (c is not None and c <= upper))]
        u = data.draw(st.sampled_from(sorted(cuts, key=lambda c: (c is None, c or 0))))

        def cut_inside(b):
            return len(b) > 0 and u is not None and b.lower < u and (b.upper is None or u < b.upper)

        if any(cut_inside(b) for b in s.pending):
            fp = fingerprint(s)
            with pytest.raises(ValueError, match="straddles"):
                s.batches_through(u)
            assert fingerprint(s) == fp
            return
        got: Counter = Counter()
        last = None
        for b in s.batches_through(u):
            assert len(b) > 0
            if last is not None:
                assert b.lower >= last
            last = b.upper
            for *row, t, d in b.updates.to_pylist():
                got[(*row, max(t, self.adv))] += d
        got = {k: v for k, v in got.items() if v}
        assert got == oracle_view(self.oracle, self.adv, through=u)

    # -- invariants

    @invariant()
    def invariants_hold(self):
        soft = self.s.check_invariants(deep=True)
        if soft:
            event("soft invariant warning")
        assert held(self.s, self.adv) == oracle_view(self.oracle, self.adv)

    def teardown(self):
        st_ = self.s.stats()
        event(f"merges completed: {min(st_['merges_completed'], 10) // 5 * 5}+")
        event(f"layers: {min(st_['layers'], 8) // 4 * 4}+")


SpineMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestSpineMachine = SpineMachine.TestCase


class SpineMachineLong(SpineMachine):
    pass


SpineMachineLong.TestCase.settings = settings(
    max_examples=400, stateful_step_count=80, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestSpineMachineLong = pytest.mark.slow(SpineMachineLong.TestCase)


# ----------------------------------------------------------------------------- basics


def test_insert_snapshot_and_repr():
    s = Spine()
    s.insert(ints([3, 1, 3], [0, 1, 2]), 0, 3)
    s.insert(ints([1], [3], [-1]), 3, 5)
    assert s.snapshot(2).to_pylist() == [(1, 2, 1), (3, 2, 2)]
    assert s.snapshot(4).to_pylist() == [(3, 4, 2)]
    r = repr(s)
    assert r.startswith("Spine(upper=5, logical=0, physical=5, effort=1, layers=[")
    assert r.endswith("layers=[L2: 3, L0: 1], pending=0, updates=4)")
    assert len(s) == 4


def test_batches_are_sorted_by_data_then_time_and_consolidated():
    s = Spine()
    s.insert(ints([5, 1, 5, 1, 2], [1, 2, 0, 2, 1], [1, 1, 1, -1, 3]), 0, 3)
    (b,) = s.batches_through(3)
    assert b.updates.to_pylist() == [(2, 1, 3), (5, 0, 1), (5, 1, 1)]
    assert (b.lower, b.upper, b.since) == (0, 3, 0)
    assert repr(b) == "SpineBatch(lower=0, upper=3, since=0, len=3)"


def test_layers_largest_first_and_levels():
    s = Spine()
    s.insert(ints(range(5), [0] * 5), 0, 1)  # 5 updates -> layer 3
    s.insert(ints([9], [1]), 1, 2)  # 1 update -> layer 0
    assert s.layers() == [(3, 1, 5), (2, 0, 0), (1, 0, 0), (0, 1, 1)]


def test_effort_zero_becomes_one_and_validation():
    assert Spine(0).effort == 1
    with pytest.raises(ValueError, match="effort"):
        Spine(-1)
    with pytest.raises(TypeError, match="effort"):
        Spine(1.5)
    with pytest.raises(ValueError, match="exert_logic"):
        Spine(exert_logic="eager")
    with pytest.raises(TypeError, match="exert_logic"):
        Spine(exert_logic=3)
    with pytest.raises(TypeError, match="auto_physical"):
        Spine(auto_physical=1)
    with pytest.raises(ValueError, match="effort"):
        Spine().exert(0)
    with pytest.raises(TypeError, match="effort"):
        Spine().exert("x")


# ----------------------------------------------------------------------------- errors


def test_insert_errors_name_argument_and_leave_spine_unchanged():
    s = Spine(auto_physical=False)
    s.insert(ints([1, 2], [0, 1]), 0, 2)
    fp = fingerprint(s)
    cases = [
        (BatchBoundsError, "lower must equal the spine's upper 2, got lower=1", lambda: s.insert(ints([1], [1]), 1, 3)),
        (BatchBoundsError, "upper must be beyond lower=2", lambda: s.insert(ints([], []), 2, 2)),
        (BatchBoundsError, "upper must be beyond lower=2", lambda: s.insert(ints([], []), 2, 1)),
        (BatchBoundsError, "time 1 outside", lambda: s.insert(ints([1], [1]), 2, 4)),
        (BatchBoundsError, "time 4 outside", lambda: s.insert(ints([1], [4]), 2, 4)),
        (TypeError, "updates must be colmz.Updates", lambda: s.insert([1], 2, 3)),
        (ValueError, "lower must be a time", lambda: s.insert(ints([], []), -1, 3)),
        (TypeError, "upper must be an integer", lambda: s.insert(ints([], []), 2, 3.0)),
        (colmz.SchemaError, "type", lambda: s.insert(
            colmz.Updates({"k": ["x"]}, time=[2], diff=[1]), 2, 3)),
        (colmz.SchemaError, "columns differ", lambda: s.insert(
            colmz.Updates({"j": [1]}, time=[2], diff=[1]), 2, 3)),
        (DiffOverflowError, r"overflow in the inserted batch: the updates of data row \(1,\) at time 2 sum to 9223372036854775808",
         lambda: s.insert(ints([1, 1], [2, 2], [2**63 - 1, 1]), 2, 3)),
    ]
    for exc, msg, call in cases:
        with pytest.raises(exc, match=msg):
            call()
        assert fingerprint(s) == fp
    assert issubclass(BatchBoundsError, ValueError)
    assert issubclass(FrontierRegressionError, ValueError)


def test_a_batch_whose_merge_would_overflow_is_refused_and_the_spine_keeps_working():
    # Two batches whose diffs for one key sum past int64 once a merge advances their times
    # (logical compaction): the second batch is refused at its insert -- not the later insert
    # whose fuel would drive the merge -- and every later operation works.
    s = Spine()
    s.set_logical_compaction(1)
    s.insert(ints([1, 2], [0, 0], [2**63 - 1, 1]), 0, 1)
    fp = fingerprint(s)
    with pytest.raises(DiffOverflowError, match=r"data row \(1,\) from time 0 through time 1 would sum to 9223372036854775808") as e:
        s.insert(ints([1, 3], [1, 1], [1, 1]), 1, 2)
    assert (e.value.row, e.value.time, e.value.total) == ((1,), 1, 2**63)
    assert fingerprint(s) == fp
    s.insert(ints([1, 3], [1, 1], [-1, 1]), 1, 2)
    s.insert(ints([4], [2]), 2, 3)
    s.exert(100)
    assert s.snapshot(2).to_pylist() == [(1, 2, 2**63 - 2), (2, 2, 1), (3, 2, 1), (4, 2, 1)]
    s.close()
    s.check_invariants(deep=True)


def test_frontier_regressions_raise():
    s = Spine()
    s.set_logical_compaction(5)
    s.set_physical_compaction(7)
    with pytest.raises(FrontierRegressionError, match="logical compaction cannot regress from 5 to 4"):
        s.set_logical_compaction(4)
    with pytest.raises(FrontierRegressionError, match="physical compaction cannot regress from 7 to 6"):
        s.set_physical_compaction(6)
    s.set_logical_compaction(None)
    with pytest.raises(FrontierRegressionError, match=r"from \[\] to 9"):
        s.set_logical_compaction(9)
    assert s.get_logical_compaction() is None and s.get_physical_compaction() == 7


def test_physical_regression_below_the_followed_upper_says_why():
    s = Spine()
    s.insert(colmz.Updates({"k": [1]}, time=[3], diff=[1]), lower=0, upper=7)
    before = s.stats()
    with pytest.raises(FrontierRegressionError, match=r"from 7 to 4; with auto_physical=True .* follows the "
                       r"spine's upper \(now 7\).*Spine\(auto_physical=False\)"):
        s.set_physical_compaction(4)
    assert s.stats() == before and s.get_physical_compaction() == 7
    manual = Spine(auto_physical=False)
    manual.set_physical_compaction(7)
    with pytest.raises(FrontierRegressionError) as e:
        manual.set_physical_compaction(4)
    assert str(e.value) == "physical compaction cannot regress from 7 to 4"


def test_snapshot_bounds():
    s = Spine()
    s.insert(ints([1], [0]), 0, 4)
    s.set_logical_compaction(2)
    with pytest.raises(ValueError, match="as_of=1 is before the logical compaction frontier 2"):
        s.snapshot(1)
    with pytest.raises(ValueError, match="as_of=4 is not before the spine's upper 4"):
        s.snapshot(4)
    assert s.snapshot(3).to_pylist() == [(1, 3, 1)]
    s.set_logical_compaction(None)
    with pytest.raises(ValueError, match="logical"):
        s.snapshot(3)


def test_snapshot_of_fresh_and_empty_spines():
    fresh = Spine()
    with pytest.raises(ValueError, match="upper"):
        fresh.snapshot(0)  # nothing before upper 0 exists yet
    fresh.close()
    assert len(fresh.snapshot(0)) == 0
    s = Spine()
    s.insert(ints([1, 1], [0, 1], [1, -1]), 0, 2)
    out = s.snapshot(1)
    assert len(out) == 0 and out.column_names == ["k"]


def test_batches_through_errors():
    s = Spine(auto_physical=False)
    s.insert(ints([1], [0]), 0, 2)
    s.insert(ints([2], [3]), 2, 5)
    assert s.batches_through(0) == []
    with pytest.raises(ValueError, match="straddles the pending batch"):
        s.batches_through(3)
    with pytest.raises(ValueError, match="beyond the spine's upper 5"):
        s.batches_through(6)
    s.set_physical_compaction(2)
    with pytest.raises(ValueError, match="before the physical compaction frontier 2"):
        s.batches_through(1)
    assert [(b.lower, b.upper) for b in s.batches_through(2)] == [(0, 2)]
    assert [(b.lower, b.upper) for b in s.batches_through(5)] == [(0, 2), (2, 5)]
    s.set_logical_compaction(None)
    with pytest.raises(ValueError, match="logical compaction frontier is empty"):
        s.batches_through(5)


def test_close_then_insert_raises():
    s = Spine()
    s.insert(ints([1], [0]), 0, 1)
    s.close()
    assert s.upper is None
    s.close()  # idempotent
    with pytest.raises(BatchBoundsError, match="closed"):
        s.insert(ints([], []), 1, 2)
    assert s.snapshot(10**6).to_pylist() == [(1, 1000000, 1)]
    s.check_invariants(deep=True)


def test_exert_logic_errors_roll_back_the_call():
    s = Spine(exert_logic=lambda layers: "lots")
    fill(s, 3, 5)
    fp = fingerprint(s)
    with pytest.raises(TypeError, match="exert_logic returned 'lots'"):
        s.exert()
    assert fingerprint(s) == fp
    s2 = Spine(exert_logic=lambda layers: 0)
    with pytest.raises(ValueError, match="exert_logic returned effort 0"):
        s2.exert()


# ----------------------------------------------------------------------------- §4.5 edge cases


def test_empty_batches_fuse_with_the_lowest_empty_single():
    s = Spine()
    s.insert(ints(range(8), [0] * 8), 0, 1)
    for t in range(1, 50):
        s.insert(ints([], []), t, t + 1)
    # The 49 empty batches became one empty batch [1, 50) in one layer.
    assert [(lv, c, n) for lv, c, n in s.layers() if c] == [(3, 1, 8), (0, 1, 0)]
    lowers = [(b.lower, b.upper) for b in s._all_batches()]
    assert lowers == [(0, 1), (1, 50)]
    s.check_invariants(deep=True)


def test_many_empty_batches_do_not_leak():
    # DD #219/#220: empty intervals once leaked memory; here they fuse into one batch.
    s = Spine()
    for t in range(2000):
        s.insert(ints([], []), t, t + 1)
    assert s.stats()["batches"] == 1
    assert len(s.layers()) <= 2


def test_structurally_empty_batches_from_exert():
    s = Spine()
    s.insert(ints(range(2000), [0] * 2000), 0, 1)  # layer 11
    assert s.exert(1000) == 1000  # no merge in progress: a placeholder worth 1000 updates
    assert s.layers()[:2] == [(11, 1, 2000), (10, 1, 0)]
    assert s.stats()["batches"] == 1  # a placeholder is no batch
    assert [(b.lower, b.upper) for b in s.batches_through(1)] == [(0, 1)]
    s.exert(1000)  # a second placeholder meets the first: a (complete) merge of nothing
    assert s.layers()[1] == (10, 2, 0)
    s.exert(1000)  # ... which moves up, and meets the real batch at layer 11
    s.insert(ints([1], [1]), 1, 2)
    s.check_invariants(deep=True)
    assert len(s.snapshot(1)) == 2000


def test_huge_batch_level_warns():
    s = Spine()
    with pytest.warns(RuntimeWarning, match="layer 41"):
        s.exert(2**41)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.exert(2**20)


def test_lagging_physical_frontier_keeps_batches_pending():
    s = Spine(auto_physical=False)
    for t in range(6):
        s.insert(ints([t], [t]), t, t + 1)
    assert len(s.pending) == 6 and s.stats()["merge_copies"] == 0
    p = s.pending[2]
    assert (p.lower, p.upper, p.since, len(p)) == (2, 3, 0, 1)
    assert p.updates.to_pylist() == [(2, 2, 1)]
    assert all(c == 0 for _, c, _ in s.layers())
    assert s.snapshot(5).to_pylist() == [(t, 5, 1) for t in range(6)]
    s.set_physical_compaction(3)
    assert [(b.lower, b.upper) for b in s.pending] == [(3, 4), (4, 5), (5, 6)]
    s.check_invariants(deep=True)
    s.set_physical_compaction(None)
    assert not s.pending
    assert s.snapshot(5).to_pylist() == [(t, 5, 1) for t in range(6)]
    s.check_invariants(deep=True)


def test_cancelling_merge_is_cheap_and_completes():
    s = Spine()
    s.set_logical_compaction(2)
    keys = list(range(64))
    s.insert(ints(keys, [0] * 64), 0, 1)
    s.insert(ints(keys, [1] * 64, [-1] * 64), 1, 2)
    # The second batch enters layer 6 beside the first: a merge that cancels entirely.
    before = s.stats()
    s.insert(ints([], []), 2, 3)
    after = s.stats()
    assert after["merges_completed"] > before["merges_completed"]
    assert after["merge_copies"] == 0 and after["merge_reads"] == 128
    assert len(s) == 0
    s.check_invariants(deep=True)


def test_tidy_layers_moves_a_compacted_batch_down():
    s = Spine()
    s.insert(ints(range(1024), [0] * 1024), 0, 1)  # layer 10
    s.set_logical_compaction(1)
    # Retract all but 3 updates: the merge at layer 10 (compacting to 1) leaves 3 updates.
    s.insert(ints(range(3, 1024), [1] * 1021, [-1] * 1021), 1, 2)
    assert s.layers()[0] == (10, 2, 2045)
    s.insert(ints([], []), 2, 3)
    # The merge completed into layer 11 and tidying moved the 3-update batch down to layer
    # ceil(log2 3) = 2 past the vacant layers.
    assert [(lv, c, n) for lv, c, n in s.layers() if c] == [(2, 1, 3), (0, 1, 0)]
    assert len(s.layers()) == 3
    assert s.snapshot(2).to_pylist() == [(0, 2, 1), (1, 2, 1), (2, 2, 1)]
    s.check_invariants(deep=True)


def test_logical_compaction_applies_during_merges():
    s = Spine()
    for t in range(16):
        s.insert(ints([t % 2], [t]), t, t + 1)
    s.set_logical_compaction(16)
    s.close()
    while s.exert(10**6) is not None and s.stats()["batches"] > 1:
        pass
    (b,) = [b for b in s.batches_through(None) if len(b)]
    assert b.updates.to_pylist() == [(0, 16, 8), (1, 16, 8)]
    assert b.since == 16


def test_no_exert_logic_means_no_idle_merging():
    s = Spine()
    fill(s, 5, 3)
    fp = fingerprint(s)
    assert s.exert() is None
    assert fingerprint(s) == fp


def test_proportional_exert_drives_an_idle_spine_to_one_batch():
    s = Spine(exert_logic="proportional")
    rng = np.random.default_rng(1)
    for t, size in enumerate(rng.integers(0, 300, 40)):
        s.insert(ints(rng.integers(0, 10**6, size), [t] * size), t, t + 1)
    assert s.stats()["batches"] > 1
    steps = 0
    while s.exert() is not None:
        steps += 1
        assert steps < 200
    assert [c for _, c, _ in s.layers() if c] == [1]
    assert s.stats()["batches"] == 1
    s.check_invariants(deep=True)


def test_proportional_logic_matches_materialize_rules():
    logic = proportional_exert_logic(16, 1000)
    assert logic([]) is None
    assert logic([(5, 0, 0), (4, 1, 100)]) is None  # one batch: tidy
    assert logic([(5, 1, 100), (4, 2, 10)]) == 1000  # a merge in progress
    # A non-empty layer below the largest counts while the budget, halved per layer from 16
    # (8, 4, 2, 1 at the next four layers), is positive: up to four layers below.
    big = [(10, 1, 1000)] + [(i, 0, 0) for i in range(9, 6, -1)]
    assert logic(big + [(6, 1, 3)]) == 1000  # four layers below: still merged
    assert logic(big + [(6, 0, 0), (5, 1, 3)]) is None  # five layers below: budget spent
    assert proportional_exert_logic(0)([(3, 1, 8), (2, 1, 4)]) is None
    with pytest.raises(ValueError, match="proportionality"):
        proportional_exert_logic(-1)
    with pytest.raises(ValueError, match="effort"):
        proportional_exert_logic(16, 0)


def test_string_and_null_keys_of_varying_widths():
    s = Spine()
    words = [None, "", "x", "a" * 30, "b" * 7, "b" * 8]
    oracle: Counter = Counter()
    rng = np.random.default_rng(3)
    for t in range(40):
        n = int(rng.integers(0, 5))
        pick = [words[i] for i in rng.integers(0, len(words), n)]
        # Early batches hold only short strings: layouts widen as longer ones arrive.
        if t < 20:
            pick = [w if w is None or len(w) < 2 else "x" for w in pick]
        s.insert(colmz.Updates({"s": pa.array(pick, pa.string())}, time=[t] * n, diff=[1] * n),
                 t, t + 1)
        for w in pick:
            oracle[w] += 1
    got = {r[0]: r[2] for r in s.snapshot(39).to_pylist()}
    assert got == dict(oracle)
    s.check_invariants(deep=True)


def test_all_null_column_then_typed():
    s = Spine()
    s.insert(colmz.Updates({"k": pa.nulls(2)}, time=[0, 0], diff=[1, 1]), 0, 1)
    s.insert(colmz.Updates({"k": pa.array([5], pa.int64())}, time=[1], diff=[1]), 1, 2)
    assert s.snapshot(1).to_pylist() == [(None, 1, 2), (5, 1, 1)]


def test_no_data_columns():
    s = Spine()
    for t in range(5):
        s.insert(colmz.Updates({}, time=[t, t], diff=[1, 2]), t, t + 1)
    s.set_logical_compaction(4)
    s.exert(100)
    assert s.snapshot(4).to_pylist() == [(4, 15)]


def test_stats_counters():
    s = Spine()
    fill(s, 4, 16)
    st_ = s.stats()
    assert st_["inserted_updates"] == 64 and st_["inserted_batches"] == 4
    assert st_["merges_started"] >= 2 and st_["merge_copies"] >= 32
    assert st_["records"] == len(s) == 64
    assert st_["copies_per_update"] == st_["merge_copies"] / 64
    assert set(st_) >= {"merge_reads", "trim_copies", "max_insert_work", "max_call_work",
                        "batches", "layers", "invariant_warnings", "merges_completed"}


# ----------------------------------------------------------------------------- work targets


@pytest.mark.parametrize(
    ("sizes", "target"),
    [([1, 3, 17, 100, 1000, 5000], 2**17), ([1], 2**12), ([1000], 2**18)],
    ids=["mixed", "singletons", "thousands"],
)
def test_amortized_work_and_batch_count_bounds(sizes, target):
    rng = np.random.default_rng(7)
    s = Spine()
    t = 0
    total = 0
    while total < target:
        size = int(rng.choice(sizes))
        s.insert(ints(rng.integers(0, 2**40, size), [t] * size), t, t + 1)
        t += 1
        total += size
        bound = 2 * math.log2(total)
        if total >= 16:
            assert s.stats()["batches"] <= bound, (total, s.stats()["batches"])
        assert not s.check_invariants()
    st_ = s.stats()
    assert st_["merge_copies"] / total <= 2 * math.log2(total), st_


def test_largest_single_insert_is_a_tenth_of_eager():
    # 1e6 updates in 1000-update batches, counted with work counters (never wall-clock).
    rng = np.random.default_rng(11)
    s = Spine()
    eager = Eager()
    for i in range(1000):
        u = ints(rng.integers(0, 2**40, 1000), [i] * 1000)
        s.insert(u, i, i + 1)
        eager.insert(u)
    st_ = s.stats()
    assert eager.max_work >= 500_000
    assert st_["max_insert_work"] * 10 <= eager.max_work, (st_["max_insert_work"], eager.max_work)
    assert st_["merge_copies"] / 1e6 <= 2 * math.log2(1e6)
    assert st_["batches"] <= 2 * math.log2(1e6)
    assert held_count(s) == 10**6


def held_count(s):
    return sum(int(np.abs(b.enc.diff).sum()) for b in s._all_batches())


@pytest.mark.parametrize("effort", [1, 2, 4])
def test_per_insert_work_is_bounded_by_fuel(effort):
    s = Spine(effort)
    fill(s, 300, 100, seed=effort)
    st_ = s.stats()
    # Each of at most len(layers) merges gets (8 << 7) * effort per insert of 100 updates.
    assert st_["max_insert_work"] <= st_["layers"] * (8 << 7) * effort


def test_insert_into_a_merge_in_progress_is_an_internal_error():
    # §4.4(1): the fuel discipline must make this unreachable; the guard raises RuntimeError.
    s = Spine()
    s.insert(ints([1], [0]), 0, 1)
    s.insert(ints([2], [1]), 1, 2)  # layer 0 now merges the two
    assert s.layers()[-1] == (0, 2, 2)
    with pytest.raises(RuntimeError, match="still merging"):
        s._insert_at(None, 0)


def test_no_soft_invariant_breaches_under_mixed_workload():
    rng = np.random.default_rng(5)
    for effort in (1, 2):
        s = Spine(effort, exert_logic="proportional")
        for t in range(200):
            n = int(rng.choice([0, 1, 5, 50, 500]))
            s.insert(ints(rng.integers(0, 1000, n), [t] * n, rng.choice([-1, 1], n)), t, t + 1)
            if t % 7 == 0:
                s.exert()
            if t % 11 == 0:
                s.set_logical_compaction(t)
            assert s.check_invariants() == []


def test_merges_of_different_layouts_pad_once():
    # Later batches hold longer strings (wider keys): every merge pads its inputs once, and
    # fueled steps read the padded copies rather than re-padding.
    s = Spine()
    for t in range(64):
        word = "w" * (1 + t // 8)
        s.insert(colmz.Updates({"s": [word, None]}, time=[t, t], diff=[1, 1]), t, t + 1)
        s.check_invariants(deep=True)
    got = s.snapshot(63).to_pylist()
    assert got == [(None, 63, 64)] + [("w" * i, 63, 8) for i in range(1, 9)]
    st_ = s.stats()
    assert st_["merge_reads"] <= 2 * math.log2(128) * 128


# ----------------------------------------------------------------------------- caller memory


def test_mutating_callers_arrays_after_insert_changes_nothing():
    s = Spine(auto_physical=False)  # batches stay pending: the inserted arrays are kept
    k = np.array([1, 2], np.int64)
    t = np.array([0, 0], np.uint64)
    d = np.array([1, 1], np.int64)
    s.insert(colmz.Updates({"k": k}, time=t, diff=d), 0, 1)
    k[:] = 7
    t[:] = 0
    d[:] = 0
    s.insert(colmz.Updates({"k": k}, time=[1, 1], diff=d + 1), 1, 2)
    k[:] = 9
    d[:] = -1
    assert s.snapshot(1).to_pylist() == [(1, 1, 1), (2, 1, 1), (7, 1, 2)]
    s.set_physical_compaction(2)
    assert s.snapshot(1).to_pylist() == [(1, 1, 1), (2, 1, 1), (7, 1, 2)]
    s.check_invariants(deep=True)


# ----------------------------------------------------------------------------- diff overflow


def test_three_huge_diffs_for_one_key_do_not_jam_the_spine():
    # The reported case: diffs of 2**62 for one key at times 0, 1, 2 used to be accepted,
    # queued into a merge, and then every later insert, exert and close raised forever.
    big = 2**62
    s = Spine()
    s.insert(ints([1], [0], [big]), 0, 1)
    fp = fingerprint(s)
    with pytest.raises(DiffOverflowError, match=r"data row \(1,\) from time 0 through time 1") as e:
        s.insert(ints([1], [1], [big]), 1, 2)
    assert e.value.time == 1 and e.value.total == 2**63
    assert fingerprint(s) == fp
    # The spine advances: the retraction, harmless batches, exertion and closing all work.
    s.insert(ints([1], [1], [-big]), 1, 2)
    for t in range(2, 40):
        s.insert(ints([1, t], [t, t], [-big if t % 2 else big, 1]), t, t + 1)
        s.exert(10)
        if t % 5 == 0:
            s.set_logical_compaction(t)
    s.close()
    s.exert(1000)
    assert s.snapshot(38).to_pylist()[0] == (1, 38, big)
    s.check_invariants(deep=True)


def test_sums_from_any_batch_boundary_are_checked():
    # The key's running total never leaves int64 (-M, 0, M), but the updates from time 1 on
    # sum to 2M: a merge of the batches [1, 2) and [2, 3) under compaction would store that.
    m = 2**63 - 1
    s = Spine(auto_physical=False)  # pending batches keep their boundaries
    s.insert(ints([5], [0], [-m]), 0, 1)
    s.insert(ints([5], [1], [m]), 1, 2)
    with pytest.raises(DiffOverflowError, match=r"from time 1 through time 2 would sum to 18446744073709551614"):
        s.insert(ints([5], [2], [m]), 2, 3)
    # Negative side, a string key, and a prefix of the new batch's own times.
    t = Spine()
    strs = lambda ks, ts, ds: colmz.Updates({"s": ks}, time=ts, diff=ds)  # noqa: E731
    t.insert(strs(["a much longer key", None], [0, 0], [-(2**62), 1]), 0, 1)
    with pytest.raises(DiffOverflowError, match=r"data row \('a much longer key',\) from time 0 through time 2 would sum to -9223372036854775809"):
        t.insert(strs(["x", "a much longer key", "a much longer key"], [1, 1, 2], [1, -(2**62), -1]), 1, 3)
    t.insert(strs(["x", "a much longer key", "a much longer key"], [1, 1, 2], [1, -(2**62), 1]), 1, 3)
    assert t.snapshot(2).to_pylist() == [(None, 2, 1), ("a much longer key", 2, -(2**63) + 1), ("x", 2, 1)]


def test_ordinary_counts_never_pay_the_exact_check():
    s = Spine()
    fill(s, 300, 100, seed=3)
    assert s.stats()["overflow_checks"] == 0


def test_exact_overflow_check_reads_only_the_new_rows_history():
    # Huge diffs everywhere: the cheap bound fails and every insert runs the exact check,
    # which searches each batch and sums only the rows of the inserted keys -- never a pass
    # over the spine.
    rng = np.random.default_rng(4)
    s = Spine()
    total = 0
    for t in range(300):
        keys = rng.integers(0, 2**40, 100)
        s.insert(ints(np.append(keys, 7), [t] * 101, [2**56] * 100 + [1]), t, t + 1)
        total += 101
    st_ = s.stats()
    assert st_["overflow_checks"] == 300
    # Key 7 recurs in every batch; the random keys essentially never do.
    assert st_["overflow_check_rows"] <= 300 * 301 // 2 + 100, st_["overflow_check_rows"]
    assert st_["merge_copies"] / total <= 2 * math.log2(total)
    assert s.snapshot(299).to_pylist()[0] == (7, 299, 300)


def _model_refuses(s: Spine, lower: int, rows, logical) -> bool:
    """The exact rule: some sum of a key's updates from a current batch boundary through a
    time of the new batch, or a (key, time) sum of the new batch, leaves int64."""
    fits = lambda v: -(2**63) <= v < 2**63  # noqa: E731
    new = Counter()
    for k, t, d in rows:
        new[(k, max(t, logical))] += d
    if not all(fits(v) for v in new.values()):
        return True
    held = [b for b in s._all_batches() if len(b)]
    bounds = {b.lower for b in held} | {lower}
    for key in {k for k, _ in new}:
        sums = []
        for a in bounds:
            sums.append(sum(int(d) for b in held if b.lower >= a
                            for k, d in zip(b.enc.keys[:, 0].tolist(), b.enc.diff.tolist())
                            if k == (key ^ (1 << 63))))
        prefix = 0
        for (k, t) in sorted(new, key=lambda kt: kt[1]):
            if k != key or new[(k, t)] == 0:
                continue
            prefix += new[(k, t)]
            if not all(fits(x + prefix) for x in sums):
                return True
    return False


HUGE = [1, -1, 2**61, -(2**61), 2**62, -(2**62), 2**63 - 1, -(2**63)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.tuples(st.just("insert"), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2),
                                                    st.sampled_from(HUGE)), max_size=4)),
    st.tuples(st.just("compact"), st.integers(0, 3)),
    st.tuples(st.just("exert"), st.integers(1, 64)),
    st.tuples(st.just("physical"), st.integers(0, 3)),
), max_size=25), st.booleans())
def test_overflow_is_refused_at_insert_and_nothing_else_ever_overflows(ops, auto):
    s = Spine(auto_physical=auto)
    accepted = []  # (key, time, diff) of accepted batches, times as inserted
    for op, arg in ops:
        upper = s.upper
        if op == "insert":
            rows = [(k, upper + dt, d) for k, dt, d in arg]
            refuse = _model_refuses(s, upper, rows, s.get_logical_compaction())
            fp = fingerprint(s)
            try:
                s.insert(ints([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]),
                         upper, upper + 3)
            except DiffOverflowError:
                assert refuse
                assert fingerprint(s) == fp
                event("refused")
            else:
                assert not refuse
                accepted.extend(rows)
        elif op == "compact":
            s.set_logical_compaction(max(s.get_logical_compaction(), upper - arg))
        elif op == "exert":
            s.exert(arg)
        else:
            s.set_physical_compaction(max(s.get_physical_compaction(), upper - arg))
        if s.upper > s.get_logical_compaction():
            as_of = s.upper - 1
            want = Counter()
            for k, t, d in accepted:
                if t <= as_of:
                    want[k] += d
            got = s.snapshot(as_of).to_pylist()
            assert got == [(k, as_of, v) for k, v in sorted(want.items()) if v]
    s.close()
    s.set_physical_compaction(None)
    for _ in range(20):
        s.exert(1000)  # drives the merges on: none may overflow
    s.check_invariants(deep=True)


def test_deep_check_accepts_advanced_times_under_the_empty_frontier():
    # Times advanced by an earlier compaction stay in a batch merged after the logical
    # frontier became empty; the batch's since is then [] (beyond every time), not a breach.
    s = Spine(auto_physical=False)
    s.insert(ints([1, 2], [0, 1]), 0, 2)
    s.set_logical_compaction(3)
    s.insert(ints([1, 3], [2, 2]), 2, 3)  # its time 2 is advanced to 3 on arrival
    s.set_logical_compaction(None)
    s.set_physical_compaction(None)
    s.exert(100)
    assert any(b.since is None and b.upper == 3 for b in s._all_batches())
    assert s.check_invariants(deep=True) == []


def test_narrower_ints_widen_into_the_spine_schema():
    s = Spine()
    s.insert(colmz.Updates({"k": pa.array([1, 2], pa.int32())}, time=[0, 0], diff=[1, 1]), 0, 1)
    s.insert(colmz.Updates({"k": pa.array([2**40], pa.int64())}, time=[1], diff=[1]), 1, 2)
    assert s.schema == (colmz.ColumnSpec("k", pa.int64()),)
    assert s.snapshot(1).to_pylist() == [(1, 1, 1), (2, 1, 1), (2**40, 1, 1)]


def test_rollback_state_declares_every_field_a_failing_call_can_change():
    # Outside the declared fields: configuration, the per-call work scratch, and the mass
    # bound, which insert grows only after everything else succeeded.
    s = Spine(exert_logic="proportional", auto_physical=False)
    outside = {"_effort", "_exert_logic", "_exert_name", "_auto_physical", "_call_work", "_mass_bound"}
    assert set(vars(s)) - outside == set(Spine.ROLLBACK_FIELDS)
    for t in range(6):
        s.insert(ints([t % 3, 7], [t, t]), lower=t, upper=t + 1)
    s.set_physical_compaction(2)
    state = save(s)

    def seen():
        return (s.upper, s.get_logical_compaction(), s.get_physical_compaction(), s.layers(), s.stats(),
                sorted(s.snapshot(s.upper - 1).to_pylist()))

    before = seen()
    s.set_logical_compaction(4)
    s.set_physical_compaction(6)
    for _ in range(4):
        s.exert(8)
    s.insert(ints([9], [6]), lower=6, upper=8)
    assert seen() != before
    roll_back(s, state)
    assert seen() == before
    s.exert(8)
    roll_back(s, state)  # a saved state can be rolled back to again
    assert seen() == before
    assert s.check_invariants(deep=True) == []
