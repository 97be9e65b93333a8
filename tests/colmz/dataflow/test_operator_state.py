"""``colmz.dataflow.state``: operator state exported as updates and restored from a snapshot.

A pipeline stepped through random changes exports its states' deltas after every step; a
fresh pipeline restored from the sum of those deltas must step on exactly as the original.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow.plan import plan, render
from colmz.dataflow.state import StateOverflow, operator_states, restore
from colmz.ops import concat, consolidate
from colmz.rows import at_time

T = {"k": pa.int64(), "v": pa.int64()}
U = {"k": pa.int64(), "w": pa.int64()}

VIEWS = {
    "sum": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k",
    "global": "SELECT count(*) AS c, sum(v) AS s FROM t",
    "join": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
    "minmax": "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k",
    "both": "SELECT k, min(v) AS lo, sum(v) AS s FROM t GROUP BY k",
    "distinct": "SELECT DISTINCT k FROM t",
    "topk": "SELECT k, v FROM t ORDER BY v DESC, k LIMIT 3",
    "outer": "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k",
}

rows = st.tuples(st.integers(0, 3) | st.none(), st.integers(-5, 5) | st.none())
scripts = st.lists(st.tuples(st.lists(rows, max_size=4), st.lists(st.integers(0, 7), max_size=2),
                             st.lists(rows, max_size=2)), min_size=1, max_size=6)


def _updates(schema, rs, time, diff):
    names = list(schema)
    return colmz.Updates({n: pa.array([r[i] for r in rs], schema[n]) for i, n in enumerate(names)},
                         time=[time] * len(rs), diff=[diff] * len(rs))


def _sorted(u):
    return sorted(consolidate(u).to_pylist(), key=repr)


PLANS: dict = {}


def _pipeline(view):
    if view not in PLANS:
        PLANS[view] = plan(VIEWS[view], {"t": T, "u": U})
    return render(PLANS[view])


def _folded(s, parts, time):
    return consolidate(at_time(concat([colmz.Updates.empty(s.schema), *parts]), time))


@pytest.mark.parametrize("view", sorted(VIEWS))
@settings(max_examples=10, deadline=None)
@given(script=scripts)
def test_restored_pipeline_steps_on_as_the_original(view, script):
    pipe = _pipeline(view)
    states = operator_states(pipe)
    assert states is not None and states
    marks = {s.name: () for s in states}
    contents = {s.name: [] for s in states}
    held_t, held_u = [], []
    for time, (ins, dels, uins) in enumerate(script, start=1):
        # deletes retract rows held (by position), so the input stays a valid collection
        picked = sorted({i % len(held_t) for i in dels}) if held_t else []
        gone = [held_t[i] for i in picked]
        held_t = [r for i, r in enumerate(held_t) if i not in picked]
        held_t += ins
        held_u += uins
        deltas = {"t": concat([_updates(T, ins, time, 1), _updates(T, gone, time, -1)]),
                  "u": _updates(U, uins, time, 1)}
        deltas = {n: u for n, u in deltas.items() if n in pipe.tables}
        # a restored pipeline, from the contents exported so far, steps as the original
        fresh = _pipeline(view)
        snaps = {s.name: _folded(s, contents[s.name], time - 1) for s in states}
        # (after the first step: a restore stands for operators that have stepped)
        want = pipe.step(time, deltas)
        if time > 1:
            restore(fresh, snaps, time - 1)
            assert _sorted(fresh.step(time, deltas)) == _sorted(want)
        for s in states:
            contents[s.name].append(s.delta(marks[s.name], time))
            marks[s.name] = s.marks()
    # the exported contents are the structures' contents
    for s in states:
        total = _folded(s, contents[s.name], len(script))
        if s.kind == "keyed":
            mine = s.target.snapshot()
            assert sorted(repr(r[:-2] + (r[-1],)) for r in total.to_pylist()) == \
                sorted(repr(r[:-2] + (r[-1],)) for r in mine.to_pylist())


def test_a_delta_reads_only_runs_made_since_the_marks():
    pipe = _pipeline("join")
    states = operator_states(pipe)
    big = _updates(T, [(i % 50, i) for i in range(5000)], 1, 1)
    pipe.step(1, {"t": big, "u": _updates(U, [(i, i) for i in range(50)], 1, 1)})
    marks = {s.name: s.marks() for s in states}
    pipe.step(2, {"t": _updates(T, [(1, -1)], 2, 1)})
    deltas = {s.name: s.delta(marks[s.name], 2) for s in states}
    # the one new row, not the 5000 before it
    assert sorted(len(d) for d in deltas.values()) == [0, 1]


def test_restore_refuses_a_stepped_pipeline_and_wrong_snapshots():
    pipe = _pipeline("sum")
    s = operator_states(pipe)[0]
    with pytest.raises(ValueError, match="snapshots"):
        restore(pipe, {}, 1)
    pipe.step(1, {"t": _updates(T, [(1, 1)], 1, 1)})
    with pytest.raises(ValueError, match="stepped"):
        restore(pipe, {s.name: colmz.Updates.empty(s.schema)}, 1)


def test_a_recomputed_subquery_is_not_resumable():
    from colmz.dataflow.maintained import Recompute

    class Op:
        ROLLBACK_FIELDS = ("_r",)

        def __init__(self):
            self._r = Recompute({"k": pa.int64()}, "why", lambda t: None)

    class Pipe:
        operators = [Op()]

    assert operator_states(Pipe()) is None


def test_an_exact_accumulator_beyond_int64_is_refused_by_name():
    from colmz.dataflow.accumulable import AccumulableReduce, VarPop

    class Pipe:  # the sum of squares of 2**32 leaves int64; the variance does not
        operators = [AccumulableReduce(T, ["k"], {"var": VarPop("v")})]

    s = operator_states(Pipe())[0]
    Pipe.operators[0].step(1, _updates(T, [(1, 2**32)], 1, 1))
    with pytest.raises(StateOverflow, match="0.state"):
        s.delta((), 1)
