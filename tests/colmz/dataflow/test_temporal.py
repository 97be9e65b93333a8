"""Temporal filters: the view's contents at every time equal the query evaluated with
``mz_now()`` at that time (a naive model, and DuckDB through a plan), the flips held by the
filter between the steps that emit them."""

from __future__ import annotations

from collections import Counter

import dataflow_model as dm
import duckdb
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
import colmz.rows
from colmz.dataflow import ViewSink
from colmz.dataflow.plan import TemporalFilter as TemporalNode
from colmz.dataflow.plan import plan, render
from colmz.dataflow.temporal import Bound, TemporalFilter

T = {"k": pa.int64(), "t": pa.int64()}
POOL = [(k, t) for k in (1, 2) for t in (None, -3, 0, 2, 3, 5, 9)]
BOUNDS = [Bound("t", ">="), Bound("t", "<", 3), Bound("t", "<=", 4)]  # visible in [t, t + 3)


def visible(row, now: int, bounds) -> bool:
    x = row[1]
    if x is None:
        return False
    ops = {"=": now.__eq__, "<": now.__lt__, "<=": now.__le__, ">": now.__gt__, ">=": now.__ge__}
    return all(ops[b.op](x + b.offset) for b in bounds)


def contents(sink: ViewSink, t: int) -> Counter:
    return dm.counter_of(sink.collection.snapshot(t))


@settings(max_examples=us.examples(40), deadline=None)
@given(dm.change_steps(POOL, max_steps=8), st.lists(st.sampled_from(BOUNDS + [Bound("t", "=", 1)]),
                                                    min_size=1, max_size=3, unique_by=repr),
       st.lists(st.integers(0, 2), min_size=8, max_size=8))
def test_the_view_at_every_time_equals_the_predicate_at_that_time(steps, bounds, gaps):
    f = TemporalFilter(T, bounds)
    sink = ViewSink(f.schema)
    held: Counter = Counter()
    now = 0
    for i, step in enumerate(steps):
        delta = dm.batch(T, [r for r, _ in step], [d for _, d in step], now)
        for r, d in step:
            held[r] += d
        sink.step(now, f.step(now, delta))
        assert contents(sink, now) == Counter({r: c for r, c in held.items() if c and visible(r, now, bounds)})
        # times with no change: the view still flips, written by steps of empty changes
        for _ in range(gaps[i]):
            now += 1
            sink.step(now, f.step(now, colmz.Updates.empty(T)))
            assert contents(sink, now) == Counter({r: c for r, c in held.items() if c and visible(r, now, bounds)})
        now += 1


def test_a_step_emits_the_flips_and_costs_its_delta():
    f = TemporalFilter(T, [Bound("t", ">="), Bound("t", "<", 3)], select=[("t", "at"), "k"])
    out = f.step(4, dm.batch(T, [(1, 5), (2, 1), (3, 2), (4, None)], [1, 1, 2, 1], 4))
    # (1, 5): from 5 to 8; (2, 1): already gone at 4; (3, 2): from 4 to 5; NULL: never
    assert out.to_pylist() == [(2, 3, 4, 2)]  # the updates at 4; the later ones are held
    assert f.schema[0].name == "at" and f.rows_seen == 4
    held = dm.counter_of(f.held.snapshot())
    assert held == Counter({(5, 5, 1): 1, (8, 5, 1): -1, (5, 2, 3): -2})  # (time, at, k)
    assert f.next_time() == 5
    # a retraction before the row enters cancels both of its held updates
    assert f.step(4, dm.batch(T, [(1, 5)], [-1], 4)).to_pylist() == []
    assert dm.counter_of(f.held.snapshot()) == Counter({(5, 2, 3): -2})
    # a step with no change emits what came due, each at its own time
    assert f.step(9, colmz.Updates.empty(T)).to_pylist() == [(2, 3, 5, -2)]
    assert len(f.held.snapshot()) == 0 and f.next_time() is None
    assert f.step(12, colmz.Updates.empty(T)).to_pylist() == []


def test_a_held_update_is_read_back_once():
    """Each step reads only the held updates in (last step, now]: those emitted before are
    never read again, however long their negations wait in other runs for a merge."""
    n = 200
    f = TemporalFilter(T, [Bound("t", ">="), Bound("t", "<", 3)])
    rows = [(k, k) for k in range(n)]
    out = f.step(0, dm.batch(T, rows, [1] * n, 0))
    assert out.to_pylist() == [(0, 0, 0, 1)]
    flips = Counter({(0, 0, 0): 1})
    for now in range(1, n + 5):
        got = f.step(now, colmz.Updates.empty(T))
        assert set(int(x) for x in got.time) <= {now}  # one step per time: each flip at its own
        flips.update({(k, t, int(tm)): d for (k, t, tm, d) in got.to_pylist()})
    assert flips == Counter({**{(k, k, k): 1 for k in range(n)}, **{(k, k, k + 3): -1 for k in range(n)}})
    assert f.rows_released == 2 * n - 1  # each held update once (row 0 entered at once)
    assert f.next_time() is None and len(f.held.snapshot()) == 0


def test_bad_bounds_are_named():
    with pytest.raises(ValueError, match="op must be one of"):
        Bound("t", "<>")
    with pytest.raises(TypeError, match="integer columns only"):
        TemporalFilter({"t": pa.string()}, [Bound("t", "<")])
    with pytest.raises(ValueError, match="at least one Bound"):
        TemporalFilter(T, [])
    with pytest.raises(ValueError, match="not among the columns"):
        TemporalFilter(T, [Bound("zz", "<")])


SCHEMAS = {"t": {"k": pa.int64(), "v": pa.int64(), "s": pa.string()}}
V_POOL = [(k, v, s) for k in (1, 2) for v, s in ((None, "a"), (-2, "b"), (0, None), (3, "a"), (6, "c"))]
BODIES = [
    "SELECT k, s FROM t WHERE mz_now() <= v + 2 AND v <= mz_now()",
    "SELECT * FROM t WHERE mz_now() < v AND s = 'a'",
    "SELECT v AS x FROM t WHERE v - 1 = mz_now()",
]
_CON = duckdb.connect()


@settings(max_examples=us.examples(20), deadline=None)
@given(dm.change_steps(V_POOL, max_steps=6))
def test_planned_temporal_views_equal_duckdb_at_every_time(steps):
    pipes = [render(plan(q, SCHEMAS)) for q in BODIES]
    sinks = [ViewSink(p.schema) for p in pipes]
    held: Counter = Counter()
    for now in range(len(steps) + 4):
        step = steps[now] if now < len(steps) else []
        for r, d in step:
            held[r] += d
        rows = [r for r, c in held.items() for _ in range(c)]
        _CON.register("t", pa.table({n: pa.array([r[i] for r in rows], ty)
                                     for i, (n, ty) in enumerate(SCHEMAS["t"].items())}))
        delta = dm.batch(SCHEMAS["t"], [r for r, _ in step], [d for _, d in step], now)
        for q, pipe, sink in zip(BODIES, pipes, sinks):
            sink.step(now, pipe.step(now, {"t": delta}))
            want = Counter(_CON.execute(q.replace("mz_now()", str(now))).fetchall())
            got = Counter(tuple(r.values()) for r in colmz.rows.expand(sink.collection.snapshot(now)).to_pylist())
            assert got == want, f"{q!r} at {now}"


def test_the_plan_puts_the_temporal_filter_at_its_top():
    p = plan("SELECT k FROM t WHERE mz_now() <= v + 60 AND k IS NOT NULL", SCHEMAS)
    assert isinstance(p.root, TemporalNode) and p.root.bounds == (("t.v", 60, "<="),)
    assert p.explain().splitlines()[0] == (
        "TemporalFilter where=[mz_now() <= t.v + 60] select=[t.k AS k] (updates at the times the predicate "
        "flips)  -- incremental O(delta)")
    for text, word in [("SELECT DISTINCT k FROM t WHERE mz_now() <= v", "below DISTINCT"),
                       ("SELECT k FROM t WHERE mz_now() <> v", "other than compared"),
                       ("SELECT k FROM t WHERE mz_now() <= s", "integers only"),
                       ("SELECT k FROM t WHERE mz_now() > k * v", "plus or minus an integer")]:
        reasons = [f.reason for f in plan(text, SCHEMAS).fallbacks()]
        assert reasons and any(word in r for r in reasons), (text, reasons)
