"""``colmz.spark.stages`` and the views of several stages in ``colmz.spark.views``: a plan
cut where its operators' keys change, each stage stepped per bucket of its own key, the
output of one re-bucketed as the next one's input; compared over seeded commits (inserts,
deletes, NULL keys and values, retraction to zero) with the in-process ``MaintainedView``
and the recompute, in process and on local Spark."""

from __future__ import annotations

import random
import zlib
from collections import Counter

import pyarrow as pa
import pytest

import colmz
from colmz.continual import MemoryCollection
from colmz.dataflow.maintained import MaintainedView
from colmz.dataflow.plan import plan, render
from colmz.dataflow.state import operator_states
from colmz.rows import at_time
from colmz.spark.stages import StageError, plan_stages
from colmz.spark.views import BucketState, bucketed_view, step_bucket, step_buckets
from colmz.storage.url import open_blob

T = {"k": pa.int64(), "v": pa.int64()}
U = {"k": pa.int64(), "w": pa.string()}
SCHEMAS = {"t": T, "u": U}
SPARK_TYPES = {"t": "k long, v long, time long, diff long", "u": "k long, w string, time long, diff long"}

#: Views whose operators are keyed differently, and each stage's (sources, bucket keys).
STAGED = {
    # a join on k, then a reduce grouped by w: the join's output re-bucketed by w
    "SELECT u.w, sum(t.v) AS s, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY u.w":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c3",),))],
    "SELECT t.v, count(*) AS c, max(u.w) AS m FROM t JOIN u ON t.k = u.k GROUP BY t.v":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c1",),))],
    "SELECT u.w, min(t.v) AS lo, max(t.v) AS hi FROM t JOIN u ON t.k = u.k WHERE t.v > 0 GROUP BY u.w":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c3",),))],
    # a reduce over a reduce keyed by its output
    "SELECT c, count(*) AS n FROM (SELECT k, count(*) AS c FROM t GROUP BY k) s GROUP BY c":
        [((("table", "t"),), (("k",),)), ((("stage", "0"),), (("c1",),))],
    "SELECT DISTINCT c FROM (SELECT k, count(*) AS c FROM t GROUP BY k) s":
        [((("table", "t"),), (("k",),)), ((("stage", "0"),), (("c0",),))],
    # keyed by a computed column: a stage of Map/Filters only, bucketed by every column
    "SELECT k + 1 AS k1, count(*) AS c FROM t GROUP BY k + 1":
        [((("table", "t"),), (("k", "v"),)), ((("stage", "0"),), (("c2",),))],
    # a window and a basic aggregate (recomputed per group in DuckDB) per w over the join
    "SELECT w, v, sum(v) OVER (PARTITION BY w) AS s FROM (SELECT t.v, u.w FROM t JOIN u ON t.k = u.k) x":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c1",),))],
    "SELECT u.w, string_agg(CAST(t.v AS VARCHAR), ',' ORDER BY t.v) AS s FROM t JOIN u ON t.k = u.k GROUP BY u.w":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c3",),))],
    # a top-k per w over the join
    "SELECT DISTINCT ON (w) w, v FROM (SELECT t.v, u.w FROM t JOIN u ON t.k = u.k) s ORDER BY w, v DESC":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c0",),))],
    # a self-join: one stage, the table read as two inputs
    "SELECT a.k, a.v, b.v AS v2 FROM t a JOIN t b ON a.k = b.k":
        [((("table", "t"), ("table", "t")), (("k",), ("k",)))],
    # outer joins: a preserved side's key carries on; a NULL-padded side's does not
    "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k":
        [((("table", "t"), ("table", "u")), (("k",), ("k",)))],
    "SELECT u.k, count(*) AS n, sum(t.v) AS s FROM t RIGHT JOIN u ON t.k = u.k GROUP BY u.k":
        [((("table", "t"), ("table", "u")), (("k",), ("k",)))],
    "SELECT u.k, count(*) AS n FROM t LEFT JOIN u ON t.k = u.k GROUP BY u.k":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c2",),))],
    "SELECT u.w, count(*) AS n, count(t.v) AS m FROM t FULL JOIN u ON t.k = u.k GROUP BY u.w":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"),), (("c3",),))],
    # unions and set operations: linear, bucketed by the keyed operators around them
    "SELECT k, count(*) AS n FROM (SELECT k FROM t UNION ALL SELECT k FROM u) s GROUP BY k":
        [((("table", "t"), ("table", "u")), (("k",), ("k",)))],
    "SELECT k FROM t EXCEPT SELECT k FROM u": [((("table", "t"), ("table", "u")), (("k",), ("k",)))],
    "SELECT k, count(*) AS n FROM t GROUP BY k UNION ALL SELECT k, count(*) AS n FROM u GROUP BY k":
        [((("table", "t"), ("table", "u")), (("k",), ("k",)))],
    "SELECT w, count(*) AS n FROM (SELECT u.w FROM t JOIN u ON t.k = u.k UNION ALL SELECT w FROM u) s GROUP BY w":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"), ("table", "u")), (("c0",), ("w",)))],
    # three inputs in one stage (tagged rows in one frame: cogroup takes two)
    "SELECT k FROM t INTERSECT ALL SELECT k FROM u":
        [((("table", "t"), ("table", "t"), ("table", "u")), (("k",), ("k",), ("k",)))],
    "SELECT t.k, u.w, t2.v FROM t JOIN u ON t.k = u.k JOIN t t2 ON t2.k = u.k":
        [((("table", "t"), ("table", "u"), ("table", "t")), (("k",), ("k",), ("k",)))],
    # a view over a view (a CTE, inlined): the outer reduce keyed by the inner one's output
    "WITH m AS (SELECT k, sum(v) AS s FROM t GROUP BY k) SELECT s, count(*) AS n FROM m GROUP BY s":
        [((("table", "t"),), (("k",),)), ((("stage", "0"),), (("c1",),))],
    "WITH j AS (SELECT t.v, u.w FROM t JOIN u ON t.k = u.k), m AS (SELECT w, max(v) AS hi FROM j GROUP BY w) "
    "SELECT m.w, m.hi, u.k FROM m JOIN u ON m.w = u.w":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))), ((("stage", "0"), ("table", "u")), (("c1",), ("w",)))],
    # three stages: a join on k, a join of its output on v with t again, a reduce by w
    "SELECT x.w, count(*) AS n FROM (SELECT t.v, u.w FROM t JOIN u ON t.k = u.k) x JOIN t ON x.v = t.k "
    "GROUP BY x.w":
        [((("table", "t"), ("table", "u")), (("k",), ("k",))),
         ((("stage", "0"), ("table", "t")), (("c0",), ("k",))),
         ((("stage", "1"),), (("c1",),))],
}


def test_plan_stages_cut_where_the_key_changes():
    for query, stages in STAGED.items():
        view = bucketed_view(query, SCHEMAS)
        assert view.kind == "stages", query
        assert [(s.sources, s.keys) for s in view.stages()] == stages, query
        assert [(s.sources, s.keys) for s in plan_stages(plan(query, SCHEMAS))] == stages, query
        names = [n for n, _ in view.states()]
        assert len(names) == len(set(names)) and all(":" in n for n in names), query
    # views keyed alike stay one stage, as before
    assert bucketed_view("SELECT t.k, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY t.k", SCHEMAS).kind == "plan"
    for bad, why in [("SELECT count(*) AS n FROM (SELECT k FROM t ORDER BY k LIMIT 2) s",
                      r"global aggregate \(no GROUP BY\) over a TopK whose subtree does not run in stages"),
                     ("SELECT k FROM t UNION ALL SELECT 1 AS k", "has a Constant where"),
                     ("SELECT k, v FROM t WHERE v > (SELECT max(k) FROM u)", "has a Join without an equality")]:
        with pytest.raises(ValueError, match=why) as e:
            bucketed_view(bad, SCHEMAS)
        assert "-- " in str(e.value), bad  # the plan's EXPLAIN
    with pytest.raises(StageError, match="keyed by nothing"):
        plan_stages(plan("SELECT count(*) AS n FROM t", SCHEMAS))
    with pytest.raises(ValueError, match="step each of view.stages"):
        step_bucket(bucketed_view(next(iter(STAGED)), SCHEMAS), None, None, [], 1)


def rows(u: colmz.Updates) -> list:
    """``u`` consolidated over all its times, as sorted ``(data..., diff)``."""
    return sorted(((*r[:-2], r[-1]) for r in colmz.consolidate(at_time(u, 0)).to_pylist()), key=repr)


def updates(data: list, schema: dict) -> colmz.Updates:
    names = list(schema)
    return colmz.Updates({n: pa.array([r[i] for r in data], schema[n]) for i, n in enumerate(names)},
                         time=[r[-2] for r in data], diff=[r[-1] for r in data])


def churn(rng: random.Random, held: Counter, t: int, new_row, most: int = 6, p_retract: float = 0.35) -> list:
    """Up to ``most`` changes at ``t``, as ``(*row, t, diff)``: retractions of rows ``held``
    holds (each with probability ``p_retract``) and inserts of ``new_row(rng)``; ``held``
    follows them."""
    out = []
    for _ in range(rng.randint(1, most)):
        if held and rng.random() < p_retract:
            row = rng.choice(sorted(held, key=repr))
            out.append((*row, t, -1))
            held[row] -= 1
            if not held[row]:
                del held[row]
        else:
            row = new_row(rng)
            out.append((*row, t, 1))
            held[row] += 1
    return out


def random_delta(rng: random.Random, held: Counter, t: int, table: str) -> list:
    """Inserts (NULL keys and values among them) and retractions of held rows, as
    ``(a, b, t, diff)``."""
    if table == "t":
        return churn(rng, held, t, lambda r: (r.choice([1, 2, 3, 4, 5, None]), r.choice([*range(-2, 6), None])))
    return churn(rng, held, t, lambda r: (r.choice([1, 2, 3, 4, None]), r.choice(["x", "y", "z", None])))


def bucket_of(key: tuple, buckets: int) -> int:
    return zlib.crc32(repr(key).encode()) % buckets


def maintained(query: str) -> MaintainedView:
    """The in-process view (``colmz.dataflow.maintained``), initialized empty at time 0."""
    schema = tuple(plan(query, SCHEMAS).root.schema)
    mv = MaintainedView.create(query, schema, SCHEMAS, MemoryCollection(schema, since=0, upper=0), require=True)
    mv.initialize(0, {})
    return mv


def state_rows(states) -> list:
    """State collections as sorted lists of rows, names aside (a stage's operators are the
    whole pipeline's, indexed in another pipeline)."""
    return sorted((sorted(map(repr, rs)) for rs in states), key=repr)


@pytest.mark.parametrize("query", list(STAGED))
def test_stages_per_bucket_equal_the_maintained_view_and_the_recompute(query):
    """Each stage stepped per bucket in process, each bucket restored from its own state
    only, a stage's outputs re-bucketed by the next stage's key: the root stage's outputs
    equal the maintained view's change and the recompute's; the stages' states together
    equal the whole pipeline's."""
    view = bucketed_view(query, SCHEMAS)
    stages = view.stages()
    mv = maintained(query)
    buckets = 3
    rng = random.Random(zlib.crc32(query.encode()))
    held = {n: Counter() for n in SCHEMAS}
    states = [[{} for _ in range(buckets)] for _ in stages]
    state_time = None

    def recompute(t):
        return render(plan(query, SCHEMAS)).step(t, {n: updates([(*r, t, c) for r, c in h.items()], SCHEMAS[n])
                                                     for n, h in held.items() if n in view.tables})

    prev = recompute(0)
    for t in range(1, 11):
        if t == 10:  # retract everything
            data = {n: [(*r, t, -c) for r, c in h.items()] for n, h in held.items()}
            for h in held.values():
                h.clear()
        else:
            data = {n: random_delta(rng, held[n], t, n) for n in SCHEMAS}
        ins = {n: updates(d, SCHEMAS[n]) for n, d in data.items()}
        outs: list[colmz.Updates] = []
        for i, stage in enumerate(stages):
            frames = [ins[src] if how == "table" else outs[int(src)] for how, src in stage.sources]
            got = []
            for b in range(buckets):
                mine = []
                for d, key in zip(frames, stage.keys):
                    cols = [d.column(c).to_pylist() for c in key]
                    mine.append(d.take([j for j in range(len(d)) if bucket_of(tuple(c[j] for c in cols), buckets) == b]))
                if not any(len(m) for m in mine):
                    continue  # untouched buckets do not step
                out, delta = step_bucket(stage, states[i][b], state_time, mine, t)
                got.append(out)
                for n, u in delta.items():
                    states[i][b][n] = colmz.consolidate(
                        colmz.concat([states[i][b].get(n, colmz.Updates.empty(u.schema)), u]), since=t)
            outs.append(colmz.concat(got) if got else colmz.Updates.empty(stage.schema))
        state_time = t
        expected = mv.step(t, ins)
        assert rows(outs[-1]) == rows(expected), (query, t)
        now = recompute(t)
        assert rows(outs[-1]) == rows(colmz.concat([now, prev.negated()])), (query, t)
        prev = now
        mine = [rows(colmz.concat([s[n] for s in states[i] if n in s])) for i, stage in enumerate(stages)
                for n, _ in stage.states() if any(n in s for s in states[i])]
        whole = [rows(st.delta((), 0)) for st in operator_states(mv.pipeline)]
        assert state_rows(r for r in mine if r) == state_rows(r for r in whole if r), (query, t)
    assert all(not len(u) for per in states for s in per for u in s.values())  # all retracted


def spark_frames(spark, data: dict, tables=("t", "u")) -> list:
    return [spark.createDataFrame(data[n], SPARK_TYPES[n]) for n in tables]


@pytest.mark.spark
@pytest.mark.parametrize("query", [
    "SELECT u.w, sum(t.v) AS s, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY u.w",
    "SELECT x.w, count(*) AS n FROM (SELECT t.v, u.w FROM t JOIN u ON t.k = u.k) x JOIN t ON x.v = t.k "
    "GROUP BY x.w",
    "SELECT u.k, count(*) AS n FROM t LEFT JOIN u ON t.k = u.k GROUP BY u.k",
    "SELECT k FROM t INTERSECT ALL SELECT k FROM u",
    # min/max per w over the join: its arrangement looked up by the groups the delta touches
    "SELECT u.w, min(t.v) AS lo, max(t.v) AS hi FROM t JOIN u ON t.k = u.k GROUP BY u.w",
])
def test_a_view_of_several_stages_on_spark_equals_the_maintained_view(spark, tmp_path, query):
    """Several commits (inserts, deletes, NULL keys, all retracted at the end), the state
    reopened before each: each step's output equals the maintained view's change; one
    compare-and-set per step holds every stage's runs (the record's version counts steps),
    and the committed state equals the whole pipeline's. (The last view is one stage of
    three inputs, run as one tagged frame.)"""
    view = bucketed_view(query, SCHEMAS)
    assert view.kind == "stages" and sorted(view.tables) == ["t", "u"]
    several = len(view.stages()) > 1
    url = str(tmp_path / "store")
    mv = maintained(query)
    rng = random.Random(5)
    held = {n: Counter() for n in SCHEMAS}
    steps = 4
    for t in range(1, steps + 1):
        if t == steps:
            data = {n: [(*r, t, -c) for r, c in h.items()] for n, h in held.items()}
        else:
            data = {n: random_delta(rng, held[n], t, n) for n in SCHEMAS}
        state = BucketState.open(url, view, 2)
        out = step_buckets(spark, state, spark_frames(spark, data, view.tables), t, compact_runs=3)
        assert rows(out) == rows(mv.step(t, {n: updates(d, SCHEMAS[n]) for n, d in data.items()})), (query, t)
        again = BucketState.open(url, view, 2)
        assert (again.time, again.seqno) == (t, t)
        stages = {n.split(":")[0] for b in range(2) for n, _ in view.states() if again.runs(b, n)}
        if t < steps and several:
            assert len(stages) >= 2, (query, t)  # the record names runs of more than one stage
        mine = [rows(colmz.concat([again.contents(b, n) for b in range(2)])) for n, _ in view.states()]
        whole = [rows(st.delta((), 0)) for st in operator_states(mv.pipeline)]
        assert state_rows(r for r in mine if r) == state_rows(r for r in whole if r), (query, t)
    assert all(not len(again.contents(b, n)) for b in range(2) for n, _ in view.states())
    assert set(open_blob(url).list_keys(again.prefix)) == again.referenced()


@pytest.mark.spark
def test_a_staged_step_whose_commit_fails_commits_no_stage(spark, tmp_path):
    """The compare-and-set refused: neither stage's runs are committed and every part the
    step wrote (both stages') is deleted; the next step goes on from the committed state."""
    from colmz.storage.faults import FaultPlan, FaultyConsensus, InjectedDeterminate
    from colmz.storage.url import Location, open_location

    query = "SELECT u.w, sum(t.v) AS s, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY u.w"
    view = bucketed_view(query, SCHEMAS)
    url = str(tmp_path / "store")
    mv = maintained(query)
    first = {"t": [(1, 5, 1, 1), (2, 7, 1, 1), (None, 1, 1, 1)], "u": [(1, "x", 1, 1), (2, "y", 1, 1)]}
    out = step_buckets(spark, BucketState.open(url, view, 2), spark_frames(spark, first), 1)
    assert rows(out) == rows(mv.step(1, {n: updates(d, SCHEMAS[n]) for n, d in first.items()}))
    state = BucketState.open(url, view, 2)
    before = (state.seqno, state.time, {n: [rows(state.contents(b, n)) for b in range(2)] for n, _ in view.states()},
              state.referenced())
    with pytest.raises(ValueError, match=r"deltas\[1\] \(table 'u'\) lacks columns \['w'\]"):
        step_buckets(spark, state, [spark_frames(spark, first)[0], spark.createDataFrame([(1, 2, 1)], "k long, time long, diff long")], 2)
    loc = open_location(url)
    faulty = BucketState.open(Location(loc.blob, FaultyConsensus(loc.consensus, FaultPlan(fail_at=2, mode="before")),
                                       loc.url), view, 2)
    second = {"t": [(1, 3, 2, 1), (2, 7, 2, -1)], "u": [(3, "x", 2, 1), (2, "z", 2, 1)]}
    with pytest.raises(InjectedDeterminate):
        step_buckets(spark, faulty, spark_frames(spark, second), 2, owner="refusedstages")
    again = BucketState.open(url, view, 2)
    assert (again.seqno, again.time, {n: [rows(again.contents(b, n)) for b in range(2)] for n, _ in view.states()},
            again.referenced()) == before
    assert [k for k in open_blob(url).list_keys(again.prefix) if "refusedstages" in k] == []
    out = step_buckets(spark, again, spark_frames(spark, second), 2)
    assert rows(out) == rows(mv.step(2, {n: updates(d, SCHEMAS[n]) for n, d in second.items()}))


@pytest.mark.spark
@pytest.mark.slow
def test_a_driver_killed_after_every_stage_wrote_its_parts_commits_no_stage(spark, tmp_path):
    """SIGKILL of the driver after both stages' tasks wrote their parts, before the one
    compare-and-set: the reopened state is the previous step's, whole (no stage's runs
    named), and the step run again equals the maintained view's."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    query = "SELECT u.w, sum(t.v) AS s, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY u.w"
    view = bucketed_view(query, SCHEMAS)
    url = str(tmp_path / "store")
    mv = maintained(query)
    first = {"t": [(1, 5, 1, 1), (2, 7, 1, 1), (None, 1, 1, 1)], "u": [(1, "x", 1, 1), (2, "y", 1, 1)]}
    step_buckets(spark, BucketState.open(url, view, 2), spark_frames(spark, first), 1)
    mv.step(1, {n: updates(d, SCHEMAS[n]) for n, d in first.items()})
    before = BucketState.open(url, view, 2)
    snapshot = {n: [rows(before.contents(b, n)) for b in range(2)] for n, _ in view.states()}
    second = {"t": [(1, 3, 2, 1), (2, 7, 2, -1)], "u": [(3, "x", 2, 1), (2, "z", 2, 1)]}
    code = textwrap.dedent(f"""
        import os, signal, pyarrow as pa, colmz.spark
        from colmz.spark import views
        spark = colmz.spark.session("local[1]", "killed", numba_cache_dir=colmz.spark.default_cache_dir())
        view = views.bucketed_view({query!r}, {{"t": {{"k": pa.int64(), "v": pa.int64()}},
                                               "u": {{"k": pa.int64(), "w": pa.string()}}}})
        state = views.BucketState.open({url!r}, view, 2)
        views.BucketState._commit = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # after the tasks
        frames = [spark.createDataFrame({second['t']!r}, {SPARK_TYPES['t']!r}),
                  spark.createDataFrame({second['u']!r}, {SPARK_TYPES['u']!r})]
        views.step_buckets(spark, state, frames, 2)
        """)
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        assert proc.wait(timeout=900) == -signal.SIGKILL
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the dead driver's JVM
    state = BucketState.open(url, view, 2)
    assert (state.seqno, state.time) == (1, 1)
    orphans = set(open_blob(url).list_keys(state.prefix)) - state.referenced()
    assert orphans  # the killed step's tasks wrote parts; no record names them
    assert {n: [rows(state.contents(b, n)) for b in range(2)] for n, _ in view.states()} == snapshot
    out = step_buckets(spark, state, spark_frames(spark, second), 2)
    assert rows(out) == rows(mv.step(2, {n: updates(d, SCHEMAS[n]) for n, d in second.items()}))


@pytest.mark.spark
@pytest.mark.parametrize("query", [
    "SELECT u.w, sum(t.v) AS s, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY u.w",  # join, then by w
    "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k",  # an outer join
    "SELECT count(*) AS c, sum(t.v) AS s FROM t JOIN u ON t.k = u.k",  # a global aggregate over the join
])
def test_a_join_inside_stages_reads_the_touched_keys_not_the_buckets_state(spark, tmp_path, query):
    """The work counter: a join inside a view of several stages (inner or outer, below a
    reduce keyed by another column or a global aggregate) reads the arranged rows of the
    keys its delta touches -- a part or two per run per key, parts of 8 rows -- not the
    bucket's 500 arranged rows (the stages above read their own small state); outputs equal
    the maintained view's, NULL keys and deletes included, and the committed state equals
    the in-process pipeline's."""
    view = bucketed_view(query, SCHEMAS)
    assert view.kind in ("stages", "global")
    from colmz.spark.lookups import lead_columns

    assert len(lead_columns(view)) == 2 and not lead_columns(view, stages=False)
    url = str(tmp_path / "store")
    mv = maintained(query)

    def step(t, dt, du):
        state = BucketState.open(url, view, 1)
        assert state.stage_lookups
        out = step_buckets(spark, state, [spark.createDataFrame(dt, SPARK_TYPES["t"]),
                                          spark.createDataFrame(du, SPARK_TYPES["u"])], t,
                           compact_runs=100, part_rows=8)
        expected = mv.step(t, {"t": updates(dt, T), "u": updates(du, U)})
        if t > 1 or view.kind != "global":  # the maintained global row over the empty input came at its creation
            assert rows(out) == rows(expected), (query, t)
        again = BucketState.open(url, view, 1)
        mine = [rows(again.contents(0, n)) for n, _ in view.states()]
        whole = [rows(st.delta((), 0)) for st in operator_states(mv.pipeline)]
        assert state_rows(r for r in mine if r) == state_rows(r for r in whole if r), (query, t)
        return state.rows_read

    first_t = [(k, v, 1, 1) for k in range(100) for v in range(4)]
    first_u = [(k, f"w{k % 3}", 1, 1) for k in range(100)]
    step(1, first_t, first_u)
    held = len(first_t) + len(first_u)  # 500 arranged rows in the one bucket of the join
    # keys 5 (t changes: u looked up) and 77 (u changes: t looked up), a NULL key, a new key
    read = step(2, [(5, 100, 2, 1), (None, 1, 2, 1)], [(77, "q", 2, 1), (1000, "n", 2, 1)])
    assert 0 < read <= 2 * 2 * 2 * 8 + 8, read  # two keys, two parts each, two arrangements; the state above
    # a delete of an extreme and of a matched row (the outer join's row turns unmatched)
    read = step(3, [(5, 100, 3, -1), (77, 1, 3, 1)], [(77, "q", 3, -1), (40, "w1", 3, -1)])
    # three keys, two parts each, in the step-1 run; a part of each step-2 run; the state above
    assert 0 < read <= 2 * (3 * 2 * 8 + 8) + 8, read
    assert read < held // 4, read


#: Views with a temporal filter (at the top of the plan, colmz.dataflow.plan): its flips to
#: come are each bucket's state, and come due without input.
TEMPORAL = [
    "SELECT k, v FROM t WHERE mz_now() <= v",
    "SELECT k, c FROM (SELECT k, count(*) AS c, max(v) AS m FROM t GROUP BY k) s WHERE mz_now() <= m",
    "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k WHERE mz_now() < t.v + 3 AND mz_now() >= t.v",
]


def timed(u: colmz.Updates) -> list:
    """``u`` consolidated, as sorted ``(data..., time, diff)``: each flip at its own time."""
    return sorted(colmz.consolidate(u).to_pylist(), key=repr)


@pytest.mark.parametrize("query", TEMPORAL)
def test_a_temporal_filter_per_bucket_equals_the_maintained_view(query):
    """Each bucket restored from its own state steps when its delta touches it or when it
    holds flips still to come (a temporal filter's, which come due without input): the
    output, each update at its own time, equals the maintained view's at every step --
    inserts, deletes before and after a row's flip, NULL keys and bounds, steps with no
    input --, and a bucket holding no flips and no delta does not step."""
    view = bucketed_view(query, SCHEMAS)
    [stage] = view.stages()
    assert stage.temporal_states(), query
    mv = maintained(query)
    buckets = 3
    rng = random.Random(zlib.crc32(query.encode()))
    held = {n: Counter() for n in SCHEMAS}
    states = [{} for _ in range(buckets)]
    state_time = None
    skipped = 0
    for t in range(1, 13):
        if t in (4, 9, 10, 11):
            data = {n: [] for n in SCHEMAS}  # nothing changes: flips come due anyway
        else:
            data = {n: random_delta(rng, held[n], t, n) for n in SCHEMAS}
        ins = {n: updates(d, SCHEMAS[n]) for n, d in data.items()}
        frames = [ins[src] for _, src in stage.sources]
        got = []
        for b in range(buckets):
            mine = []
            for d, key in zip(frames, stage.keys):
                cols = [d.column(c).to_pylist() for c in key]
                mine.append(d.take([j for j in range(len(d)) if bucket_of(tuple(c[j] for c in cols), buckets) == b]))
            due = any(len(states[b].get(n, ())) for n in stage.temporal_states())
            if not any(len(m) for m in mine) and not due:
                skipped += 1
                continue
            out, delta = step_bucket(stage, states[b], state_time, mine, t)
            got.append(out)
            for n, u in delta.items():
                states[b][n] = colmz.consolidate(colmz.concat([states[b].get(n, colmz.Updates.empty(u.schema)), u]),
                                                 since=t)
        state_time = t
        out = colmz.concat(got) if got else colmz.Updates.empty(stage.schema)
        assert timed(out) == timed(mv.step(t, ins)), (query, t)
    assert skipped, query  # the flips all came: buckets without input rest
    whole = [rows(st.delta((), 0)) for st in operator_states(mv.pipeline)]
    mine = [rows(colmz.concat([s[n] for s in states if n in s])) for n, _ in stage.states()]
    assert state_rows(r for r in mine if r) == state_rows(r for r in whole if r), query


@pytest.mark.spark
def test_a_temporal_filter_on_spark_steps_the_buckets_holding_flips(spark, tmp_path):
    """On local Spark, the state reopened before each step: rows whose bound lies ahead are
    held by their bucket and come out at their own time in a later step with no input (the
    buckets holding flips step); each output equals the maintained view's, times
    included."""
    query = TEMPORAL[2]
    view = bucketed_view(query, SCHEMAS)
    url = str(tmp_path / "store")
    mv = maintained(query)
    steps = {
        1: {"t": [(1, 3, 1, 1), (2, 6, 1, 1), (None, 4, 1, 1), (3, None, 1, 1)],
            "u": [(1, "x", 1, 1), (2, "y", 1, 1), (3, "z", 1, 1), (None, "n", 1, 1)]},
        2: {"t": [], "u": []},
        4: {"t": [(2, 6, 4, -1)], "u": []},  # retracted before it shows
        5: {"t": [], "u": []},
        7: {"t": [(4, 7, 7, 1)], "u": [(4, "w", 7, 1)]},
        9: {"t": [], "u": []},
        12: {"t": [], "u": []},
    }
    for t, data in steps.items():
        state = BucketState.open(url, view, 3)
        out = step_buckets(spark, state, spark_frames(spark, data), t)
        expected = mv.step(t, {n: updates(d, SCHEMAS[n]) for n, d in data.items()})
        assert timed(out) == timed(expected), t
        if t == 4:  # (1, 3, x) shows at 3, its bucket stepped without input
            assert timed(out) == [(1, 3, "x", 3, 1)]
    assert timed(out) == [(4, 7, "w", 10, -1)]  # the last flip came out at step 12, with no input
    again = BucketState.open(url, view, 3)
    assert all(not len(again.contents(b, f"0:{n}")) for b in range(3) for n in view.stages()[0].temporal_states())


@pytest.mark.spark
def test_a_record_written_before_stage_lookups_keeps_its_stages_arrangements_in_their_order(spark, tmp_path):
    """A state whose record says ``stored`` = ``"key-first"`` (written before the joins inside
    stages were stored key columns first) is read in its own column order, stepped on and
    committed in that layout: outputs and state equal the maintained view's. (t is arranged
    by v, its second column: stored key columns first, its order would differ.)"""
    query = "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.v = u.k"
    view = bucketed_view(query, SCHEMAS)
    url = str(tmp_path / "store")
    mv = maintained(query)
    steps = {1: {"t": [(1, 3, 1, 1), (2, 6, 1, 1), (None, 4, 1, 1)], "u": [(1, "x", 1, 1), (None, "n", 1, 1)]},
             2: {"t": [(3, 1, 2, 1), (1, 3, 2, -1)], "u": [(2, "y", 2, 1)]},
             3: {"t": [(2, 6, 3, -1)], "u": [(1, "x", 3, -1), (3, "z", 3, 1)]}}
    for t, data in steps.items():
        state = BucketState.open(url, view, 2)
        if t == 1:
            state.stage_lookups = False  # as a record written before
        assert not state.stage_lookups or t == 1
        out = step_buckets(spark, state, spark_frames(spark, data), t)
        assert rows(out) == rows(mv.step(t, {n: updates(d, SCHEMAS[n]) for n, d in data.items()})), t
        again = BucketState.open(url, view, 2)
        assert again.key_first and not again.stage_lookups
        mine = [rows(colmz.concat([again.contents(b, n) for b in range(2)])) for n, _ in view.states()]
        whole = [rows(st.delta((), 0)) for st in operator_states(mv.pipeline)]
        assert state_rows(r for r in mine if r) == state_rows(r for r in whole if r), t


@pytest.mark.spark
def test_a_bucket_holding_flips_steps_only_when_one_is_due(spark, tmp_path):
    """The work counter: a bucket holding a temporal filter's flips still to come steps
    when its next flip is due or its delta touches it, not at every step (its task reports
    its next flip; the record keeps it): 40 keys held in 8 buckets, flips far ahead, one
    near. Outputs equal the catalog's view throughout. A record keeping no next flip (as
    one written before) steps every bucket holding flips once, then each only when due."""
    import json

    from colmz.storage.base import VersionedData
    from colmz.storage.url import open_location

    query = TEMPORAL[0]
    view = bucketed_view(query, SCHEMAS)
    url = str(tmp_path / "store")
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.execute(f"CREATE MATERIALIZED VIEW live AS {query}")
    total = []

    def step(t, data):
        cat.append("t", updates(data, T), time=t)
        state = BucketState.open(url, view, 8)
        total.append(step_buckets(spark, state, spark_frames(spark, {"t": data}, ("t",)), t))
        assert rows(colmz.concat(total)) == rows(cat.read("live")), t
        return state.buckets_stepped

    first = step(1, [(k, 100, 1, 1) for k in range(40)] + [(7, 5, 1, 1)])
    [name] = view.stages()[0].temporal_states()
    held = {b for b in range(8) if BucketState.open(url, view, 8).runs(b, f"0:{name}")}
    assert first == len(held) >= 6, held  # 40 keys over 8 buckets, each holding its rows' flips
    assert [step(t, []) for t in (2, 3, 4, 5)] == [0] * 4  # no flip due: no bucket steps
    assert step(6, []) == 1  # (7, 5) leaves at 6: its bucket alone
    assert rows(total[-1]) == [(7, 5, -1)]
    assert [step(t, []) for t in (7, 8)] == [0, 0]
    assert step(9, [(3, 12, 9, 1)]) == 1  # the bucket its input touches
    assert step(20, []) == 1  # (3, 12) left at 13: due, its bucket stepped at 20
    assert timed(total[-1]) == [(3, 12, 13, -1)]
    # a record without next flips (as written before they were kept): every bucket holding
    # flips steps once, and reports its next one
    loc = open_location(url)
    head = loc.consensus.head("view/state")
    record = json.loads(head.data)
    assert record["due"] and all(t == 101 for t in record["due"].values()), record["due"]
    del record["due"]
    assert loc.consensus.compare_and_set("view/state", head.seqno,
                                         VersionedData(head.seqno + 1, json.dumps(record).encode()))
    assert step(21, []) == len(held)
    assert step(22, []) == 0
    assert [step(t, []) for t in (101, 102)] == [len(held), 0]  # the far flips, all due at 101
    assert rows(cat.read("live")) == []
