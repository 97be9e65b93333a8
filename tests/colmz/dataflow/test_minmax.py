"""Materialize's hierarchical plans for ``min``/``max`` (``colmz.dataflow.minmax``): the
bucketed and monotonic plans against a naive model, their work counters, the planner's
monotonic criterion and EXPLAIN naming the plan."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow import Max, Min, MinMaxReduce
from colmz.dataflow.minmax import NonMonotonicInput, bucketing, row_hash
from colmz.dataflow.plan import Reduce, plan, render
from colmz.dataflow.state import operator_states, restore
from colmz.rollback import roll_back, save

SCHEMA = {"k": pa.int64(), "v": pa.int64(), "f": pa.float64()}
AGGS = {"lo": Min("v"), "hi": Max("v"), "flo": Min("f"), "fhi": Max("f")}


def _batch(rows, diffs, t):
    return colmz.Updates({"k": pa.array([r[0] for r in rows], pa.int64()), "v": pa.array([r[1] for r in rows], pa.int64()),
                          "f": pa.array([r[2] for r in rows], pa.float64())},
                         time=np.full(len(rows), t, np.uint64), diff=np.array(diffs, np.int64))


def _model(held: Counter, glob: bool) -> Counter:
    groups: dict = {}
    for (k, v, f), d in held.items():
        if d > 0:
            groups.setdefault(None if glob else k, []).append((v, f))
    if glob and not groups:
        groups[None] = []
    out = Counter()
    for k, rows in groups.items():
        vs = [v for v, _ in rows if v is not None]
        fs = [f for _, f in rows if f is not None]
        # NaN above every number, as PostgreSQL orders floats
        key = lambda x: (1, 0.0) if x != x else (0, x)  # noqa: E731
        ext = (min(vs) if vs else None, max(vs) if vs else None,
               min(fs, key=key) if fs else None, max(fs, key=key) if fs else None)
        out[(ext if glob else (k, *ext))] += 1
    return out


def _canon(row):
    return tuple("nan" if isinstance(x, float) and x != x else x for x in row)


def _contents(out: Counter, u: colmz.Updates) -> Counter:
    for row, d in zip(u.to_pylist(), u.diff.tolist()):
        out[_canon(row[:-2])] += d
    return Counter({k: v for k, v in out.items() if v})


row = st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(-5, 5)),
                st.one_of(st.none(), st.sampled_from([0.5, -2.0, float("nan"), 7.25])))


@settings(max_examples=us.examples(60), deadline=None)
@given(st.lists(st.lists(st.tuples(row, st.integers(-2, 2)), min_size=1, max_size=10), min_size=1, max_size=10),
       st.sampled_from([2, 17, 300, 65_536]), st.booleans())
def test_bucketed_plan_matches_the_model(steps, group_size, glob):
    # Valid change sequences (never below zero) with every stage count from one to four.
    r = MinMaxReduce(SCHEMA, [] if glob else ["k"], AGGS, plan="bucketed", expected_group_size=group_size)
    assert r.plan == "bucketed" and len(r.buckets) == len(bucketing(group_size)) + 1
    held, got = Counter(), Counter()
    for t, step in enumerate(steps):
        rows, diffs = [], []
        for rw, d in step:
            if held[rw] + d >= 0:
                held[rw] += d
                rows.append(rw)
                diffs.append(d)
        got = _contents(got, r.step(t, _batch(rows, diffs, t)))
        assert got == Counter({_canon(k): v for k, v in _model(held, glob).items()})


@settings(max_examples=us.examples(60), deadline=None)
@given(st.lists(st.lists(row, min_size=0, max_size=8), min_size=1, max_size=10), st.booleans())
def test_monotonic_plan_matches_the_model(steps, glob):
    r = MinMaxReduce(SCHEMA, [] if glob else ["k"], AGGS, plan="monotonic")
    held, got = Counter(), Counter()
    for t, rows in enumerate(steps):
        for rw in rows:
            held[rw] += 1
        got = _contents(got, r.step(t, _batch(rows, [1] * len(rows), t)))
        assert got == Counter({_canon(k): v for k, v in _model(held, glob).items()})
    # One row per group in its state, whatever the rows inserted.
    assert len(r.arrangement.snapshot()) == len({None if glob else k for k, _, _ in held})


def test_deleting_the_extreme_of_a_10k_group_touches_a_few_buckets():
    n = 10_000
    r = MinMaxReduce(SCHEMA, ["k"], {"lo": Min("v"), "hi": Max("v")}, plan="bucketed")
    r.step(0, colmz.Updates({"k": np.zeros(n, np.int64), "v": np.arange(n), "f": np.zeros(n)},
                            time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64)))
    for i in range(1, 11):
        before = list(r.stage_rows)
        touched = r.buckets_touched
        out = r.step(i, colmz.Updates({"k": [0], "v": [i - 1], "f": [0.0]}, time=[i], diff=[-1]))
        assert out.to_pylist() == [(0, i - 1, n - 1, i, -1), (0, i, n - 1, i, 1)]
        read = [a - b for a, b in zip(r.stage_rows, before)]
        # Stage 0: the deleted row's bucket (10 000 rows in 4 096 buckets); then one bucket
        # per stage, each of at most 16 children (twice: before and after); the per-group
        # plan read the 10 000 rows twice.
        assert read[0] <= 2 * 12 and all(x <= 2 * 17 for x in read[1:]), read
        assert sum(read) <= 120 and r.buckets_touched - touched == len(r.buckets)


def test_the_monotonic_plan_refuses_a_retraction_and_changes_nothing():
    r = MinMaxReduce(SCHEMA, ["k"], AGGS, plan="monotonic")
    r.step(1, _batch([(1, 5, 0.5), (1, 3, None)], [1, 1], 1))
    saved = r.arrangement.snapshot().to_pylist()
    with pytest.raises(NonMonotonicInput, match=r"retracted row \(1, 3, None"):
        r.step(2, _batch([(1, 3, None), (1, 9, None)], [-1, 1], 2))
    assert r.arrangement.snapshot().to_pylist() == saved
    # A retraction cancelled within the delta is no retraction.
    out = r.step(2, _batch([(1, 2, None), (1, 2, None), (2, 1, 1.0)], [1, -1, 1], 2))
    assert sorted(out.to_pylist(), key=str) == sorted([(2, 1, 1, 1.0, 1.0, 2, 1)], key=str)
    before = r.stage_rows[0]
    r.step(3, _batch([(1, 1, 9.0)], [1], 3))
    assert r.stage_rows[0] - before == 2  # the group's one kept row and the delta's row


def test_bucketed_state_restores_and_rolls_back():
    def pipeline():  # what colmz.dataflow.state walks: the operators' declared fields
        return SimpleNamespace(operators=[MinMaxReduce(SCHEMA, ["k"], {"lo": Min("v"), "hi": Max("f")},
                                                       plan="bucketed")])

    class Pipe:
        def __init__(self):
            self.ns = pipeline()
            self.operators = self.ns.operators

        ROLLBACK_FIELDS = ("operators",)

        def step(self, t, deltas):
            return self.operators[0].step(t, deltas["t"])

    pipe = Pipe()
    rng = np.random.default_rng(2)
    rows = [(int(k), int(v), float(v)) for k, v in zip(rng.integers(0, 5, 300), rng.integers(-50, 50, 300))]
    pipe.step(1, {"t": _batch(rows, [1] * 300, 1)})
    states = operator_states(pipe)
    assert states is not None and len(states) == 4  # the four stages of the bucketed min/max
    snaps = {s.name: s.delta((), 1) for s in states}
    fresh = Pipe()
    restore(fresh, snaps, 1)
    gone = [r for r in rows if abs(r[1]) >= 40]  # every group's extremes go
    delete = _batch(gone, [-1] * len(gone), 2)
    saved = save(pipe)
    a = pipe.step(2, {"t": delete})
    roll_back(pipe, saved)
    b = pipe.step(2, {"t": delete})
    c = fresh.step(2, {"t": delete})
    assert a.to_pylist() == b.to_pylist() == c.to_pylist() and len(a)


def test_the_planner_proves_monotonic_inputs_only():
    schemas = {"t": SCHEMA, "u": {"k": pa.int64(), "w": pa.int64()}}

    def reduce_of(q, append_only):
        node = plan(q, schemas, append_only=append_only).root
        while not isinstance(node, Reduce):
            node = node.inputs[0]
        return node

    q = "SELECT k, min(v) AS lo FROM t WHERE v > 0 GROUP BY k"
    assert reduce_of(q, {"t"}).monotonic and not reduce_of(q, ()).monotonic
    joined = "SELECT t.k, max(u.w) AS hi FROM t JOIN u ON t.k = u.k GROUP BY t.k"
    assert reduce_of(joined, {"t", "u"}).monotonic and not reduce_of(joined, {"t"}).monotonic
    outer = "SELECT t.k, max(u.w) AS hi FROM t LEFT JOIN u ON t.k = u.k GROUP BY t.k"
    assert not reduce_of(outer, {"t", "u"}).monotonic  # padded rows retract when matches arrive
    nested = "SELECT lo, min(k) AS m FROM (SELECT k, min(v) AS lo FROM t GROUP BY k) s GROUP BY lo"
    assert not reduce_of(nested, {"t"}).monotonic  # a reduce's output retracts
    summed = "SELECT k, sum(v) AS s FROM t GROUP BY k"
    assert not reduce_of(summed, {"t"}).monotonic  # no min/max: nothing to choose
    with pytest.raises(TypeError, match="append_only must be a collection of relation names"):
        plan(q, schemas, append_only="t")
    p = plan(q, schemas, append_only={"t"})
    assert "hierarchical plan monotonic" in p.explain()
    [op] = [o for o in render(p).operators if isinstance(o, MinMaxReduce)]
    assert op.plan == "monotonic" and "monotonic" in op.strategy


def test_explain_names_the_min_max_plan():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.execute("INSERT INTO t VALUES (1, 2), (1, 3), (2, 5)")
    cat.execute("CREATE MATERIALIZED VIEW direct AS SELECT k, min(v) AS lo FROM t GROUP BY k")
    cat.execute("CREATE MATERIALIZED VIEW filtered AS SELECT k, min(v) AS lo, count(*) AS n FROM t "
                "WHERE v > 2 GROUP BY k")
    cat.execute("DELETE FROM t WHERE v = 3")
    direct = str(cat.explain("direct"))
    filtered = str(cat.explain("filtered"))
    assert "per affected group over the shared arrangement" in direct
    assert "per affected group over the input arranged by group" in filtered
    assert [r["lo"] for r in cat.sql("SELECT * FROM filtered ORDER BY k").to_pylist()] == [5]


def test_row_hash_ignores_how_a_batch_encodes_its_values():
    a = row_hash([pa.array([b"ab", b"abcdefghij", None], pa.binary())])
    b = row_hash([pa.array([b"ab"], pa.binary())])
    c = row_hash([pa.array([None, b"ab"], pa.binary())])
    assert a[0] == b[0] == c[1] and a[2] == c[0] and a[0] != a[1]


def test_a_durable_min_max_over_a_filter_resumes_without_reading_its_input(tmp_path):
    from colmz.catalog.durable import Catalog

    url = str(tmp_path / "cat")
    q = "SELECT k, min(v) AS lo, max(v) AS hi FROM t WHERE v > -1000 GROUP BY k"  # not a Get: its own state
    cat, oracle = Catalog(url), colmz.Catalog(views="recompute")
    for c in (cat, oracle):
        c.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
        c.execute("INSERT INTO t VALUES " + ", ".join(f"({i % 3}, {i})" for i in range(200)))
        c.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
        c.execute("DELETE FROM t WHERE v IN (0, 1, 199)")  # extremes of two groups
    assert "per affected group over the input arranged by group" in str(cat.explain("m"))
    again = Catalog(url)
    assert again.view_work == {"initialized": 0, "restored": 1, "input_rows_read": 0}
    for c in (again, oracle):
        c.execute("DELETE FROM t WHERE v IN (2, 3, 198)")
    rows = lambda c: sorted(tuple(r.values()) for r in c.sql("SELECT * FROM m").to_pylist())  # noqa: E731
    assert rows(again) == rows(oracle) == [(0, 6, 195), (1, 4, 196), (2, 5, 197)]


# ----------------------------------------------------------------------------- per group


def _shared_input():
    from colmz.dataflow.shared import SharedArrangements, SharedInput

    reg = SharedArrangements()
    arr = reg.arrangement("t", ("k",), SCHEMA, lambda: colmz.Updates.empty(SCHEMA), 0)
    return arr, SharedInput(reg, "t", arr, [(c, c) for c in SCHEMA], ("k",))


whole = st.tuples(st.integers(0, 3), st.integers(-5, 5), st.sampled_from([0.5, -2.0, float("nan"), 7.25]))


@settings(max_examples=us.examples(60), deadline=None)
@given(st.lists(st.lists(st.tuples(st.one_of(whole, row), st.integers(-2, 2)), min_size=1, max_size=10), min_size=1,
                max_size=8), st.booleans(), st.booleans())
def test_per_group_plan_matches_the_model(steps, shared, words_path):
    # the per-group plan on the arrangement's words (no NULL among the values) and on its
    # rows (else, or with the words path turned off), own or shared arrangement
    from unittest import mock

    arr, si = _shared_input() if shared else (None, None)
    r = MinMaxReduce(SCHEMA, ["k"], AGGS, arranged=si)
    held, got = Counter(), Counter()
    for t, step in enumerate(steps, 1):
        rows, diffs = [], []
        for rw, d in step:
            if held[rw] + d >= 0:
                held[rw] += d
                rows.append(rw)
                diffs.append(d)
        b = _batch(rows, diffs, t)
        if shared:
            arr.insert(t, b)
        if words_path:
            out = r.step(t, b)
        else:
            with mock.patch.object(MinMaxReduce, "_step_words", return_value=None):
                out = r.step(t, b)
        again = colmz.consolidate(colmz.Updates({c: out.column(c) for c in out.column_names}, out.time, out.diff))
        assert [_canon(x) for x in out.to_pylist()] == [_canon(x) for x in again.to_pylist()]  # consolidated
        got = _contents(got, out)
        assert got == Counter({_canon(k): v for k, v in _model(held, False).items()})


@pytest.mark.parametrize("shared", [False, True])
def test_a_per_group_bulk_step_reads_each_affected_row_once(shared):
    # 1 000 groups of 10 rows, no NULL: a step inserting into 100 of them reads their 1 000
    # rows once from the arrangement (the rows path read them twice: before and after)
    arr, si = _shared_input() if shared else (None, None)
    r = MinMaxReduce(SCHEMA, ["k"], {"lo": Min("v"), "hi": Max("v")}, arranged=si)
    rows = [(i % 1000, i, 0.5) for i in range(10_000)]
    b = _batch(rows, [1] * len(rows), 1)
    if shared:
        arr.insert(1, b)
    r.step(1, b)
    counted = si if shared else r.arrangement
    found = counted.rows_found
    change = [(g, -1 - g, 0.5) for g in range(0, 1000, 10)] + [(g, 20_000 + g, 0.5) for g in range(1, 1000, 10)]
    b = _batch(change, [1] * len(change), 2)
    if shared:
        arr.insert(2, b)
    out = r.step(2, b)
    read = counted.rows_found - found
    # the 200 groups' rows, each read once where the runs hold them (and the delta's: shared):
    # this insert-only delta's groups are reduced in place (no row gathered), over an own
    # arrangement by folding the delta into the extremes before, over the shared one (which
    # holds the delta) from the counts of the delta's values and the nearest held values
    assert read == 0
    assert r.stage_rows[0] == (10_000 + 2200 if shared else 2000)
    # only the changed groups emit: 100 new minima, 100 new maxima (old row out, new in)
    assert len(out) == 400
    assert sorted(r for r in out.to_pylist() if r[-1] == 1)[:2] == [(0, -1, 9000, 2, 1), (1, 1, 20_001, 2, 1)]


def test_per_group_values_too_wide_to_pack_reduce_exactly():
    # int64's whole range: (group, value, tag) need more than 64 bits, sorted as words
    from unittest import mock

    lo, hi = -(2**63), 2**63 - 1
    r = MinMaxReduce(SCHEMA, ["k"], {"lo": Min("v"), "hi": Max("v")})
    with mock.patch("colmz.dataflow.minmax.consolidate_packed", side_effect=AssertionError("packed")):
        out = r.step(1, _batch([(1, lo, 0.5), (1, hi, 0.5), (2, 0, 0.5), (2, hi, 0.5)], [1, 1, 1, 1], 1))
        assert sorted(out.to_pylist()) == [(1, lo, hi, 1, 1), (2, 0, hi, 1, 1)]
        out = r.step(2, _batch([(1, lo, 0.5), (2, 5, 0.5), (3, 7, 0.5)], [-1, 1, 1], 2))
    assert sorted(out.to_pylist()) == [(1, lo, hi, 2, -1), (1, hi, hi, 2, 1), (3, 7, 7, 2, 1)]


def test_an_insert_only_step_gathers_no_group_rows():
    # 1 000 groups of 10 rows: inserting into 100 of them reduces their 1 000 rows where the
    # arrangement holds them (rows_found, the rows gathered, does not grow) and reads each
    # once; a step that also retracts gathers them (the sorting path)
    r = MinMaxReduce(SCHEMA, ["k"], {"lo": Min("v"), "hi": Max("v"), "fhi": Max("f")})
    rows = [(i % 1000, i, 0.5) for i in range(10_000)]
    r.step(1, _batch(rows, [1] * len(rows), 1))
    a = r.arrangement
    found, reduced = a.rows_found, r.rows_reduced
    change = [(g, 50_000 + g, 0.5) for g in range(0, 1000, 10)] + [(1, -7, 9.0)]
    out = r.step(2, _batch(change, [1] * len(change), 2))
    assert a.rows_found == found
    assert r.rows_reduced - reduced == 1010 + len(change)
    assert sorted(x for x in out.to_pylist() if x[0] in (0, 1)) == [
        (0, 0, 9000, 0.5, 2, -1), (0, 0, 50_000, 0.5, 2, 1), (1, -7, 9001, 9.0, 2, 1), (1, 1, 9001, 0.5, 2, -1)]
    out = r.step(3, _batch([(0, 0, 0.5), (2, 3, 0.5)], [-1, 1], 3))
    assert a.rows_found > found
    assert sorted(x for x in out.to_pylist()) == [(0, 0, 50_000, 0.5, 3, -1), (0, 1000, 50_000, 0.5, 3, 1)]


inserted = st.tuples(st.integers(0, 3), st.integers(-5, 5), st.sampled_from([0.5, -2.0, float("nan"), 7.25, -0.0]))


@settings(max_examples=us.examples(60), deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.tuples(inserted, st.integers(-2, 2)), min_size=1, max_size=10)),
                min_size=1, max_size=8), st.booleans())
def test_insert_only_steps_match_the_model(steps, shared):
    # insert-only steps (the in-place reduction; over a shared arrangement only the groups
    # whose extremes an inserted value reaches are re-reduced) between steps that also
    # retract (which leave rows of multiplicity 2 and runs whose rows cancel, and send their
    # groups to the sorting path until merged): the view equals the model after every step
    arr, si = _shared_input() if shared else (None, None)
    r = MinMaxReduce(SCHEMA, ["k"], AGGS, arranged=si)
    held, got = Counter(), Counter()
    for t, (only_inserts, step) in enumerate(steps, 1):
        rows, diffs = [], []
        for rw, d in step:
            d = abs(d) or 1 if only_inserts else d
            if held[rw] + d >= 0:
                held[rw] += d
                rows.append(rw)
                diffs.append(d)
        b = _batch(rows, diffs, t)
        if shared:
            arr.insert(t, b)
        got = _contents(got, r.step(t, b))
        assert got == Counter({_canon(k): v for k, v in _model(held, False).items()})


def test_a_shared_insert_only_step_re_reduces_only_groups_whose_extremes_it_reaches():
    # over the shared arrangement (which holds the delta): of 100 groups inserted into, the
    # 90 whose new value lies strictly inside their range emit nothing; the 10 whose minimum
    # it reaches are re-reduced in place; none is gathered
    arr, si = _shared_input()
    r = MinMaxReduce(SCHEMA, ["k"], {"lo": Min("v"), "hi": Max("v")}, arranged=si)
    rows = [(i % 1000, i, 0.5) for i in range(10_000)]
    b = _batch(rows, [1] * len(rows), 1)
    arr.insert(1, b)
    r.step(1, b)
    found = si.rows_found
    change = [(g, 5000 + g, 0.5) for g in range(0, 900, 10)] + [(g, -g - 1, 0.5) for g in range(900, 1000, 10)]
    b = _batch(change, [1] * len(change), 2)
    arr.insert(2, b)
    out = r.step(2, b)
    assert r.easy_groups == 90
    assert si.rows_found - found == 0
    assert sorted(out.to_pylist())[:2] == [(900, -901, 9900, 2, 1), (900, 900, 9900, 2, -1)]
    assert len(out) == 20


@pytest.mark.parametrize("shared", [False, True])
def test_a_retraction_held_in_a_few_groups_leaves_the_others_reduced_in_place(shared):
    # 1 000 groups of 10 rows (group g: g, g + 1000, ..., g + 9000). One-row deletes in groups
    # 0..4 leave retractions in the runs (not yet merged away with their inserts); a bulk
    # insert into group 0 and 100 other groups re-reduces by sorting only group 0: the other
    # groups are reduced in place (own arrangement) or left alone (shared: no inserted value
    # reaches their extremes), none of their rows gathered. (A single held retraction used to
    # send every group of the step to the sorting path.)
    arr, si = _shared_input() if shared else (None, None)
    r = MinMaxReduce(SCHEMA, ["k"], {"lo": Min("v"), "hi": Max("v")}, arranged=si)
    counted = si if shared else r.arrangement

    def step(t, rows, diffs):
        b = _batch(rows, diffs, t)
        if shared:
            arr.insert(t, b)
        return r.step(t, b)

    rows = [(i % 1000, i, 0.5) for i in range(10_000)]
    step(1, rows, [1] * len(rows))
    deleted = [(g, g + 3000, 0.5) for g in range(5)]
    assert step(2, deleted, [-1] * 5).to_pylist() == []  # no extreme deleted
    held = [x for run in counted.base.state_runs() for x in run.diff] if shared else \
        [x for run in counted.state_runs() for x in run.diff]
    assert min(held) < 0  # the retractions are still held as such
    found, easy = counted.rows_found, r.easy_groups
    change = [(0, 4500, 0.5)] + [(g, g + 4500, 0.5) for g in range(100, 200)] + [(g, -1, 0.5) for g in (300, 301)]
    out = step(3, change, [1] * len(change))
    # group 0: its 10 rows and the retraction (and the delta's row, which the shared
    # arrangement holds); groups 300 and 301 (their minimum reached) are re-reduced in place
    assert counted.rows_found - found == (12 if shared else 11)
    if shared:
        assert r.easy_groups - easy == 100
    assert sorted(out.to_pylist()) == [(300, -1, 9300, 3, 1), (300, 300, 9300, 3, -1),
                                       (301, -1, 9301, 3, 1), (301, 301, 9301, 3, -1)]
    # group 0 re-reduced right: deleting its minimum now gives the next one
    out = step(4, [(0, 0, 0.5)], [-1])
    assert sorted(out.to_pylist()) == [(0, 0, 9000, 4, -1), (0, 1000, 9000, 4, 1)]


def _held_rows(held: Counter) -> list:
    return sorted((rw for rw, d in held.items() if d > 0), key=repr)


@settings(max_examples=us.examples(80), deadline=None)
@given(st.data(), st.booleans(), st.booleans())
def test_insert_only_steps_after_held_retractions_match_the_model(data, shared, nulls):
    # Insert-only steps (each group reduced in place unless it holds a retraction, then
    # re-reduced by sorting) after steps that retract held rows -- one row, duplicates,
    # whole groups emptied to zero and later refilled -- with NaN, -0.0 and (``nulls``) NULL
    # values: the view equals the model after every step, own or shared arrangement.
    value = st.integers(-3, 3)
    vrow = st.tuples(st.integers(0, 7), st.one_of(st.none(), value) if nulls else value,
                     st.sampled_from([0.5, -2.0, float("nan"), -0.0, 0.0]))
    arr, si = _shared_input() if shared else (None, None)
    r = MinMaxReduce(SCHEMA, ["k"], AGGS, arranged=si)
    held, got = Counter(), Counter()
    first = data.draw(st.lists(vrow, min_size=1, max_size=40), "first")
    # beside them in the first run, 8 000 rows of other groups, never changed (in the model
    # once): the runs of later steps merge among themselves long before with that run, so a
    # retraction of a first row stays held as such
    filler = [(100 + i % 800, i, 0.5) for i in range(8000)]
    kept = Counter({_canon(k): v for k, v in _model(Counter(filler), False).items()})
    for t in range(1, data.draw(st.integers(3, 10), "steps") + 1):
        rows = _held_rows(held)
        if t == 1:
            step = [(rw, 1) for rw in first]
        elif not rows or data.draw(st.booleans(), f"insert only {t}"):
            step = data.draw(st.lists(st.tuples(vrow, st.integers(1, 2)), min_size=1, max_size=12), f"inserts {t}")
        else:
            step = [(rw, -1) for rw in data.draw(st.lists(st.sampled_from(rows), max_size=4), f"deletes {t}")]
            if data.draw(st.booleans(), f"empty a group {t}"):
                g = data.draw(st.sampled_from(sorted({rw[0] for rw in rows})), f"group {t}")
                step += [(rw, -held[rw]) for rw in rows if rw[0] == g]
            step += [(rw, 1) for rw in data.draw(st.lists(vrow, max_size=3), f"inserts {t}")]
        applied, diffs = [], []
        for rw, d in step:
            if held[rw] + d >= 0:
                held[rw] += d
                applied.append(rw)
                diffs.append(d)
        if t == 1:
            applied, diffs = applied + filler, diffs + [1] * len(filler)
        b = _batch(applied, diffs, t)
        if shared:
            arr.insert(t, b)
        got = _contents(got, r.step(t, b))
        assert got == Counter({_canon(k): v for k, v in _model(held, False).items()}) + kept


def test_a_shared_bulk_reaching_extremes_gathers_only_groups_it_cannot_decide():
    # 1 000 groups of 10 rows (group g: g, g + 1000, ..., g + 9000) over the shared
    # arrangement (which holds the delta). A bulk whose values reach many groups' extremes --
    # a new minimum, a new maximum, a copy of the minimum, a value equal to the minimum held
    # twice, groups new in this step -- is re-reduced in place: no row gathered. Only a group
    # whose delta holds two values at or below its least held one is left to the sorting path.
    arr, si = _shared_input()
    r = MinMaxReduce(SCHEMA, ["k"], AGGS, arranged=si)

    def step(t, rows):
        b = _batch(rows, [1] * len(rows), t)
        arr.insert(t, b)
        return r.step(t, b)

    rows = [(i % 1000, i, 0.5) for i in range(10_000)] + [(700, 700, 0.5)]  # group 700 holds its minimum twice
    step(1, rows)
    held = Counter(rows)
    found = si.rows_found
    change = ([(g, -g - 1, 0.5) for g in range(0, 300)]  # new minima
              + [(g, 50_000, float("nan")) for g in range(300, 600)]  # new maxima (NaN: above all)
              + [(g, g, -0.0) for g in range(600, 700)]  # a copy of the minimum; -0.0 below 0.5
              + [(700, 700, 0.5), (5000, 3, 0.5), (5000, 3, 2.0), (5001, 4, 1.0)]  # a third copy; new groups
              + [(900, -5, 0.5), (900, -3, 0.5)])  # two values below the minimum: the sorting path
    out = step(2, change)
    held.update(change)
    assert si.rows_found - found == 10 + 2  # group 900's rows and its two inserted ones
    view = _contents(Counter({_canon(k): v for k, v in _model(held - Counter(change), False).items()}), out)
    assert view == Counter({_canon(k): v for k, v in _model(held, False).items()})
    # group 700 (its minimum held before) and groups 600..699 (-0.0 = 0.0 < 0.5 is a new minimum
    # of f only) change as the model says; the new groups appear once
    assert {x for x in out.to_pylist() if x[0] in (5000, 5001)} == {(5000, 3, 3, 0.5, 2.0, 2, 1),
                                                                    (5001, 4, 4, 1.0, 1.0, 2, 1)}
