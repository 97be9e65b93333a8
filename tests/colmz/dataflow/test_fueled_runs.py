"""Fuelled merges of operator state (``colmz.dataflow.fueled``): ``KeyedArrangement`` and
``Accumulators`` against naive models while merges are in progress, the per-insert merge
work bounded by the delta's size (work counters), rollback and state export mid-merge."""

from __future__ import annotations

from collections import Counter

import dataflow_model as dm
import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow import Accumulators, KeyedArrangement
from colmz.dataflow.fueled import SPACE_FACTOR, FueledRuns, level_of
from colmz.dataflow.keyed import KeyedMerge
from colmz.dataflow.state import OperatorState
from colmz.order import encode_columns
from colmz.rollback import roll_back, save

SCHEMA = {"k": pa.string(), "v": pa.int64()}
KEYS = [None, "", "a", "a" * 20, "b", "zz" * 9]


def _batch(rows, diffs, t):
    return colmz.Updates({"k": pa.array([r[0] for r in rows], pa.string()), "v": pa.array([r[1] for r in rows], pa.int64())},
                         time=np.full(len(rows), t, np.uint64), diff=np.array(diffs, np.int64))


#: The largest scale of a merge's fuel (the oldest run's merge: colmz.dataflow.fueled, Space).
MAX_SCALE = SPACE_FACTOR // 2 + 1


def _in_progress(layers) -> int:
    return sum(1 for _, runs, _ in layers if runs == 2)


row = st.tuples(st.sampled_from(KEYS), st.integers(-3, 3))
steps = st.lists(st.lists(st.tuples(row, st.integers(-2, 3)), min_size=1, max_size=12), min_size=1, max_size=25)


@settings(max_examples=us.examples(80), deadline=None)
@given(steps, st.integers(1, 3))
def test_keyed_lookups_match_the_model_while_merges_are_in_progress(changes, effort):
    # min_fuel=1: merges take several inserts, so lookups read both inputs of merges in
    # progress; string keys of several widths make merges pad runs to a common layout.
    a = KeyedArrangement(SCHEMA, key=["k"], effort=effort, min_fuel=1)
    held: Counter = Counter()
    seen_in_progress = 0
    for t, step in enumerate(changes):
        a.insert(t, _batch([r for r, _ in step], [d for _, d in step], t))
        for r, d in step:
            held[r] += d
        held = Counter({k: v for k, v in held.items() if v})
        seen_in_progress += _in_progress(a.layers)
        assert dm.counter_of(a.snapshot()) == {r: d for r, d in held.items()}
        queries = KEYS + ["nope"]
        assert a.counts([pa.array(queries, pa.string())]).tolist() == [
            sum(d for r, d in held.items() if r[0] == q) for q in queries]
        m = a.lookup([pa.array(queries, pa.string())])
        got: Counter = Counter()
        for q, r, d in zip(m.query.tolist(), m.rows.to_pylist(), m.rows.diff.tolist()):
            assert r[0] == queries[q]
            got[(r[0], r[1])] += d
        assert Counter({k: v for k, v in got.items() if v}) == held
        assert a.runs <= 2 * len(a.layers)


def test_merges_are_in_progress_across_inserts():
    # The model test above is only meaningful if merges do span inserts: check that they do.
    a = KeyedArrangement(SCHEMA, key=["k"], min_fuel=1)
    spans = 0
    for t in range(200):
        a.insert(t, _batch([(KEYS[t % len(KEYS)], t)], [1], t))
        spans += _in_progress(a.layers) > 0
    assert spans > 50
    assert a.counts([pa.array(KEYS, pa.string())]).sum() == 200


# ----------------------------------------------------------------------------- accumulators


def _acc_model_lookup(model, keys):
    return [model.get(k, (0, 0.0)) for k in keys]


big = st.one_of(st.integers(-5, 5), st.sampled_from([2**62, -(2**62), 2**63 + 5]))
acc_steps = st.lists(st.dictionaries(st.integers(0, 12), st.tuples(big, st.sampled_from([0.0, 0.5, -1.25, 3.0])),
                                     min_size=1, max_size=8), min_size=1, max_size=25)


@settings(max_examples=us.examples(80), deadline=None)
@given(acc_steps)
def test_accumulators_match_the_model_while_merges_are_in_progress(changes):
    acc = Accumulators(["int", "float"], min_fuel=1)
    model: dict[int, tuple[int, float]] = {}
    for step in changes:
        keys = sorted(step)
        kw, kl = encode_columns([pa.array(keys, pa.int64())], n=len(keys))
        ints = np.array([step[k][0] for k in keys], object)
        acc.insert(kw, kl, [ints if any(abs(x) >= 2**62 for x in ints) else ints.astype(np.int64),
                            np.array([step[k][1] for k in keys], np.float64)])
        for k in keys:
            i, f = model.get(k, (0, 0.0))
            model[k] = (i + step[k][0], f + step[k][1])
        q = list(range(14))
        qw, ql = encode_columns([pa.array(q, pa.int64())], n=len(q))
        ints, floats = acc.lookup(qw, ql)
        assert [int(x) for x in ints] == [model.get(k, (0, 0.0))[0] for k in q]
        # Halves and quarters of small magnitude: float sums are exact in any order.
        assert floats.tolist() == [model.get(k, (0, 0.0))[1] for k in q]


# ----------------------------------------------------------------------------- work bounds


def test_each_insert_merges_in_proportion_to_its_delta():
    # An arrangement of 200 k rows, then 2,000 inserts of 1..64 rows (inserts and retractions
    # of held rows). An eager geometric merge lands the whole arrangement on the insert that
    # fills its level; fuelled merging bounds every insert's merge reads by its delta:
    # at most min_fuel // 4 rows coalesced, then per merge in progress max(8 * 2**l,
    # min_fuel) rows (l = the introduced run's level) times the merge's scale (its rows over
    # its layer's: above 1 only for the oldest run's merge, moved down below its size --
    # colmz.dataflow.fueled, Space), plus what completes at or below l and a merge that
    # starts on the way (at most the largest scale).
    n = 200_000
    rng = np.random.default_rng(7)
    a = KeyedArrangement({"k": pa.int64(), "v": pa.int64()}, key=["k"])
    a.insert(0, colmz.Updates({"k": rng.integers(0, n // 4, n), "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                              diff=np.ones(n, np.int64)))
    held = np.arange(n)  # an array: rng.choice converted a 200 k list on every insert
    inserted = n
    worst = 0
    for t in range(1, 2001):
        d = int(rng.integers(1, 65))
        layers_before = a.layers
        v = np.arange(inserted, inserted + d)
        diff = np.where(rng.random(d) < 0.3, -1, 1)
        v = np.where(diff < 0, rng.choice(held, d), v)  # retract held rows (any key: their rows differ)
        a.insert(t, colmz.Updates({"k": v % (n // 4), "v": v}, time=np.full(d, t, np.uint64), diff=diff))
        inserted += d
        cap = 1024 // 4
        lvl = level_of(d + cap)
        scales = sum(-(-rows >> (level + 1)) for level, runs, rows in layers_before if runs == 2)
        bound = cap + max(8 << lvl, 1024) * scales + (8 << lvl) * MAX_SCALE + 2 * (1 << lvl)
        assert a._fueled.last_step_merged <= bound, (t, d, a._fueled.last_step_merged, bound, layers_before)
        worst = max(worst, a._fueled.last_step_merged)
    assert a.max_step_merged == worst
    assert worst <= 16_000, worst  # a few merges in progress at 1 024 rows (times their scale), never ~200 k
    assert a.rows_merged <= 2 * inserted * np.log2(inserted)  # O(log N) reads per row, amortised
    assert len(a.layers) <= level_of(inserted) + 2


def test_accumulators_each_insert_merges_in_proportion_to_its_delta():
    n = 100_000
    acc = Accumulators(["int"])
    kw, kl = encode_columns([pa.array(np.arange(n))], n=n)
    acc.insert(kw, kl, [np.ones(n, np.int64)])
    rng = np.random.default_rng(3)
    for _ in range(3000):
        keys = np.unique(rng.integers(0, 2 * n, int(rng.integers(1, 33))))
        kw, kl = encode_columns([pa.array(keys)], n=len(keys))
        acc.insert(kw, kl, [np.ones(len(keys), np.int64)])
    assert acc.max_step_merged <= 12_000  # an eager merge of the 100 k-group run: never here
    assert acc.rows_merged > 3 * n  # the big run was merged, a little at a time


def test_fueled_runs_validate_their_fuel():
    with pytest.raises(ValueError, match="min_fuel must be an int >= 1, got 0"):
        FueledRuns(len, KeyedMerge, 1, 0)
    with pytest.raises(ValueError, match="effort must be an int >= 1"):
        KeyedArrangement(SCHEMA, key=["k"], effort=0)


# ----------------------------------------------------------------------------- rollback, state


def _filled(min_fuel=1):
    a = KeyedArrangement(SCHEMA, key=["k"], min_fuel=min_fuel)
    model: Counter = Counter()
    for t in range(60):
        r = (KEYS[t % len(KEYS)], t % 7)
        a.insert(t, _batch([r], [1], t))
        model[r] += 1
    return a, model


def test_an_insert_that_raises_mid_merge_changes_nothing(monkeypatch):
    a, model = _filled()
    assert _in_progress(a.layers)
    layers, runs, since = a.layers, a.state_runs(), a.since
    calls = {"n": 0}
    step = KeyedMerge.step

    def failing(self, fuel):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("injected")
        return step(self, fuel)

    monkeypatch.setattr(KeyedMerge, "step", failing)
    with pytest.raises(RuntimeError, match="injected"):  # (a merge completes, then the roll-up raises)
        a.insert(60, _batch([("a", i) for i in range(5)], [1] * 5, 60))
    monkeypatch.undo()
    assert a.layers == layers and a.state_runs() == runs and a.since == since
    assert dm.counter_of(a.snapshot()) == model
    a.insert(61, _batch([("a", 1)], [2], 61))
    model[("a", 1)] += 2
    assert dm.counter_of(a.snapshot()) == model


def test_rollback_mid_merge_then_a_later_save():
    # The catalog's case: roll back to an earlier save, step again, roll back to a later
    # save made before -- merges share output arrays, and each position is only ever
    # written with the same row.
    a, model = _filled()
    first = save(a)
    steps = [[(("b", 1), 1), (("a", 2), -1)], [(("zz" * 9, 0), 3)], [((None, 3), 1)] * 2]
    m = Counter(model)
    for t, step in enumerate(steps, 100):
        a.insert(t, _batch([r for r, _ in step], [d for _, d in step], t))
        for r, d in step:
            m[r] += d
    later, later_model = save(a), Counter({k: v for k, v in m.items() if v})
    roll_back(a, first, copy=True)
    assert dm.counter_of(a.snapshot()) == model
    for t in range(200, 230):  # other inserts advance the same merges again
        a.insert(t, _batch([("b", t)], [1], t))
    roll_back(a, later)
    assert dm.counter_of(a.snapshot()) == later_model
    a.insert(300, _batch([("b", 1)], [-1], 300))
    later_model[("b", 1)] -= 1
    assert dm.counter_of(a.snapshot()) == Counter({k: v for k, v in later_model.items() if v})


def test_state_deltas_sum_to_the_contents_while_merges_are_in_progress():
    # colmz.dataflow.state exports a state as the change of its runs between two marks: with
    # merges in progress (both inputs marked) and completing, the deltas still sum to the
    # contents, and a fresh arrangement loaded from them steps on alike.
    a = KeyedArrangement(SCHEMA, key=["k"], min_fuel=1)
    acc = Accumulators(["int"], min_fuel=1)
    sa = OperatorState("a", a)
    sacc = OperatorState("acc", acc, (colmz.order.ColumnSpec("k", pa.int64()),))
    marks_a, marks_acc = (), ()
    total_a, total_acc = Counter(), Counter()
    rng = np.random.default_rng(5)
    for t in range(1, 120):
        rows = [(KEYS[int(i)], int(i) % 3) for i in rng.integers(0, len(KEYS), 3)]
        a.insert(t, _batch(rows, [1, 1, -1] if t > 5 else [1, 1, 1], t))
        keys = np.unique(rng.integers(0, 9, 3))
        kw, kl = encode_columns([pa.array(keys)], n=len(keys))
        acc.insert(kw, kl, [np.ones(len(keys), np.int64)])
        for row_, d in dm.counter_of(sa.delta(marks_a, t)).items():
            total_a[row_] += d
        for row_, d in dm.counter_of(sacc.delta(marks_acc, t)).items():
            total_acc[row_] += d
        marks_a, marks_acc = sa.marks(), sacc.marks()
        assert Counter({k: v for k, v in total_a.items() if v}) == dm.counter_of(a.snapshot())
    fresh = KeyedArrangement(SCHEMA, key=["k"], min_fuel=1)
    snap = colmz.Updates({"c0": pa.array([r[0] for r in total_a], pa.string()),
                          "c1": pa.array([r[1] for r in total_a], pa.int64())},
                         time=np.full(len(total_a), 119, np.uint64), diff=np.array(list(total_a.values()), np.int64))
    OperatorState("a", fresh).load(OperatorState("a", fresh).prepared(snap, 119), 119)
    assert dm.counter_of(fresh.snapshot()) == dm.counter_of(a.snapshot())
    groups = {r[0]: r[1] for r, d in total_acc.items() if d}
    q = np.arange(9)
    qw, ql = encode_columns([pa.array(q)], n=len(q))
    assert acc.lookup(qw, ql)[0].tolist() == [groups.get(int(k), 0) for k in q]


@pytest.mark.slow
def test_a_million_rows_never_merge_on_one_step():
    n = 1_000_000
    rng = np.random.default_rng(11)
    a = KeyedArrangement({"k": pa.int64(), "v": pa.int64()}, key=["k"])
    keys = [rng.integers(0, n // 10, n)]
    a.insert(0, colmz.Updates({"k": keys[0], "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                              diff=np.ones(n, np.int64)))
    for t in range(1, 20_001):
        d = int(rng.integers(1, 9))
        v = np.arange(n + 8 * t, n + 8 * t + d)
        keys.append(v % (n // 10))
        a.insert(t, colmz.Updates({"k": keys[-1], "v": v}, time=np.full(d, t, np.uint64), diff=np.ones(d, np.int64)))
    assert a.max_step_merged <= 16_000
    every = np.concatenate(keys)
    q = np.arange(0, n // 10, 997)
    assert a.counts([pa.array(q)]).tolist() == np.bincount(every, minlength=n // 10)[q].tolist()


def test_a_state_export_reads_no_merge_that_only_regrouped_marked_runs():
    # A merge finishing between two exports changes no contents: the export cancels its
    # result against its marked inputs without reading them (colmz.dataflow.state's hook:
    # the runs left to read are counted here as state.py finds them).
    n = 50_000
    a = KeyedArrangement({"k": pa.int64(), "v": pa.int64()}, key=["k"])
    a.insert(0, colmz.Updates({"k": np.arange(n), "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                              diff=np.ones(n, np.int64)))
    st = OperatorState("a", a)
    marks, total = st.marks(), Counter(dm.counter_of(st.delta((), 0)))
    raw, unread = [], []
    for t in range(1, 1500):
        a.insert(t, colmz.Updates({"k": [n + t], "v": [t]}, time=[t], diff=[1]))
        now = a.state_runs()
        added = [r for r in now if all(r is not m for m in marks)]
        gone = [r for r in marks if all(r is not x for x in now)]
        left = a.unread_merges(added, gone)
        raw.append(sum(len(r.diff) for r in added + gone))
        unread.append(sum(len(r.diff) for r in left[0] + left[1]))
        d = st.delta(marks, t)
        assert len(d) == 1
        for row_, x in dm.counter_of(d).items():
            total[row_] += x
        marks = st.marks()
    assert Counter({k: v for k, v in total.items() if v}) == dm.counter_of(a.snapshot())
    assert max(raw) > 1000  # merges of hundreds of rows completed between exports
    assert max(unread) <= 2 * 256 + 2, max(unread)  # only the small coalesced runs are read


def test_a_small_merge_at_once_equals_the_chunked_merge():
    # Coalescing merges small runs at once (combine_runs, Accumulators._combine): the same
    # run as KeyedMerge / AccumulatorsMerge run to completion in small chunks.

    from colmz.dataflow.accumulable import Accumulators, AccumulatorsMerge
    from colmz.dataflow.fueled import UNLIMITED
    from colmz.dataflow.keyed import KeyedArrangement, KeyedMerge, combine_runs

    rng = np.random.default_rng(5)
    for _ in range(20):
        runs = []
        for n in rng.integers(1, 40, 2):
            a = KeyedArrangement({"k": pa.int64(), "s": pa.string()}, ["k"])
            a.insert(0, colmz.Updates({"k": rng.integers(0, 6, n), "s": [["", "a", "bcdefghijk"][i % 3] for i in
                                                                        rng.integers(0, 3, n)]},
                                      time=np.zeros(n, np.uint64), diff=rng.integers(-2, 3, n)))
            runs.extend(a.state_runs()[:1])
        if len(runs) < 2:
            continue
        m = KeyedMerge(runs[0], runs[1])
        while not m.done:
            m, _ = m.work(3)
        want, got = m.result, combine_runs(runs[0], runs[1])
        assert (want is None) == (got is None)
        if want is not None:
            for f in ("keys", "key_layout", "vals", "val_layout", "diff"):
                assert np.array_equal(np.asarray(getattr(want, f)), np.asarray(getattr(got, f))), f
    acc = Accumulators(["int", "float"])
    for _ in range(20):
        parts = []
        for n in rng.integers(1, 30, 2):
            keys = np.unique(rng.integers(0, 8, n)).astype(np.uint64)[:, None]
            parts.append((keys, (1,), (rng.integers(-2, 3, len(keys)), rng.normal(size=len(keys))), 0))
        m = AccumulatorsMerge(parts[0], parts[1], acc.kinds)
        m = m.work(UNLIMITED)[0]
        want, got = m.result, acc._combine(parts[0], parts[1])
        assert (want is None) == (got is None)
        if want is not None:
            assert np.array_equal(want[0], got[0]) and want[1] == got[1]
            assert all(np.array_equal(x, y) for x, y in zip(want[2], got[2]))


def test_runs_hold_at_most_half_again_the_contents_when_updates_land_on_held_rows():
    # A distinct's state: 10 000 keys whose counts batches of 50..800 rows raise and lower
    # (never to 0), so the contents stay 10 000 rows. Differential's layering alone lets the
    # smaller layers fill with rows the oldest run holds up to its layer's capacity (up to
    # ~2.6x the contents here); the oldest run moved down to the layer of an eighth of its
    # rows takes them in first: at most (1 + 4 / SPACE_FACTOR) x, merges still fuelled.
    n = 10_000
    a = KeyedArrangement({"k": pa.int64()}, key=["k"])
    a.insert(0, colmz.Updates({"k": np.arange(n)}, time=np.zeros(n, np.uint64), diff=np.full(n, 2, np.int64)))
    counts = np.full(n, 2, np.int64)
    rng = np.random.default_rng(13)
    worst, inserted, in_progress = 0.0, 0, 0
    for t in range(1, 301):
        m = int(rng.integers(50, 801))
        keys = rng.choice(n, m, replace=False)
        diff = np.where(counts[keys] > 1, np.where(rng.random(m) < 0.5, -1, 1), 1)
        counts[keys] += diff
        a.insert(t, colmz.Updates({"k": keys}, time=np.full(m, t, np.uint64), diff=diff))
        inserted += m
        worst = max(worst, len(a) / n)
        in_progress += _in_progress(a.layers) > 0
        lvl = level_of(m)
        assert a._fueled.last_step_merged <= max(8 << lvl, 1024) * MAX_SCALE * len(a.layers) + (SPACE_FACTOR + 2) * (2 << lvl)
    assert worst <= 1 + 4 / SPACE_FACTOR, worst
    assert in_progress > 20  # merges did span inserts (the bound held while they were in progress)
    assert a.rows_merged <= (2 * SPACE_FACTOR + 4 + level_of(n)) * (inserted + n)  # O(1 + log n) reads per row
    assert a.counts([pa.array(np.arange(n))]).tolist() == counts.tolist()
