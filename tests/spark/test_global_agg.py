"""``colmz.spark.global_agg``: a global accumulable aggregate (no ``GROUP BY``) as per-bucket
partials and one final bucket, compared over seeded commits (inserts, deletes, NULL values,
retraction to zero, empty steps) with the in-process ``MaintainedView``, in process and on
local Spark; what does not combine from partials is refused, naming it."""

from __future__ import annotations

import random
import zlib
from collections import Counter

import pytest
from test_stages import SCHEMAS, SPARK_TYPES, bucket_of, maintained, random_delta, rows, updates

import colmz
from colmz.dataflow.plan import plan, render
from colmz.dataflow.state import operator_states
from colmz.spark.views import BucketState, bucketed_view, step_bucket, step_buckets

GLOBAL = [
    "SELECT sum(v) AS s, count(*) AS c, count(v) AS n, avg(v) AS a FROM t",
    "SELECT count(*) AS c, sum(v) AS s FROM t WHERE v > 1",
    "SELECT sum(v) AS s, var_samp(v) AS vs, stddev_pop(v) AS sd FROM t WHERE k IS NOT NULL",
    "SELECT count(w) AS c FROM u",
    "SELECT count(*) AS c, sum(v) AS s FROM t HAVING count(*) > 2",  # HAVING: a filter above the reduce
    # min/max: per-bucket extremes (the bucket's rows kept), then the extreme of the buckets'
    "SELECT min(v) AS lo, max(v) AS hi FROM t",
    "SELECT max(k) AS hk, min(v) AS lo FROM t WHERE v <> 0 HAVING min(v) < 3",
    # both kinds: partials and extremes in one stage, joined in the final bucket (a collation)
    "SELECT count(*) AS c, min(v) AS lo, sum(v) AS s, max(k) AS hk, avg(v) AS a FROM t",
]

#: Global aggregates over a subtree cut into lower stages (a join, a reduce, an outer join).
OVER_STAGES = [
    "SELECT count(*) AS c, sum(t.v) AS s FROM t JOIN u ON t.k = u.k",
    "SELECT min(t.v) AS lo, max(t.k) AS hi, count(*) AS c FROM t JOIN u ON t.k = u.k WHERE u.w <> 'z'",
    "SELECT count(*) AS n, max(c) AS m FROM (SELECT k, count(*) AS c FROM t GROUP BY k) s",
    "SELECT count(*) AS n, min(u.k) AS m, count(u.w) AS cw FROM t LEFT JOIN u ON t.k = u.k",
]


def recompute(query: str, held: dict, t: int) -> colmz.Updates:
    """The view over ``held`` (rows per table) whole, from a fresh pipeline: the oracle."""
    p = plan(query, SCHEMAS)
    return render(p).step(t, {n: updates([(*r, t, c) for r, c in h.items()], SCHEMAS[n])
                              for n, h in held.items() if n in p.tables})


def step_in_process(view, states, state_time, ins: dict, t: int, buckets: int):
    """Step every stage of ``view`` per bucket in process, each bucket restored from its own
    state only (``states[i][b]``, updated), a one-bucket stage (keyed by no column) at every
    step: ``(the last stage's output, each stage's output)``."""
    outs: list[colmz.Updates] = []
    for i, stage in enumerate(view.stages()):
        frames = [ins[src] if how == "table" else outs[int(src)] for how, src in stage.sources]
        got = []
        for b in range(buckets):
            mine = []
            for d, key in zip(frames, stage.keys):
                cols = [d.column(c).to_pylist() for c in key]
                # keyed by no column: one bucket, 0 (as colmz.spark.views buckets it)
                mine.append(d.take([j for j in range(len(d))
                                    if (bucket_of(tuple(c[j] for c in cols), buckets) if key else 0) == b]))
            if not any(len(m) for m in mine) and (any(stage.keys[0]) or b):
                continue  # untouched buckets do not step; the final bucket does
            out, delta = step_bucket(stage, states[i][b], state_time, mine, t)
            got.append(out)
            for n, u in delta.items():
                states[i][b][n] = colmz.consolidate(
                    colmz.concat([states[i][b].get(n, colmz.Updates.empty(u.schema)), u]), since=t)
        outs.append(colmz.concat(got) if got else colmz.Updates.empty(stage.schema))
    return outs[-1], outs


@pytest.mark.parametrize("query", GLOBAL + OVER_STAGES)
def test_partials_per_bucket_then_one_final_bucket_equal_the_maintained_view(query):
    """Each bucket's partials (accumulable: no state; min/max: the bucket's rows), then the
    final bucket restored from its own state only: the output equals the maintained view's
    and the recompute's at every step -- the first one's row over an empty input, empty
    steps, NULL keys and values, everything retracted at the end --; the final bucket is
    fed at most one row per bucket and kind, and the stages' states together equal the
    in-process pipeline's (the accumulators; each bucket's rows; per bucket its extremes)."""
    view = bucketed_view(query, SCHEMAS)
    assert view.kind == "global"
    *lower, partial, final = view.stages()
    assert bool(lower) == (query in OVER_STAGES)
    assert final.keys == ((),) and partial.sources == ((("stage", str(len(lower) - 1)),) if lower
                                                       else (("table", view.tables[0]),))
    mv = maintained(query)
    rng = random.Random(zlib.crc32(query.encode()))
    held = {n: Counter() for n in SCHEMAS}
    buckets = 3
    states = [[{} for _ in range(buckets)] for _ in view.stages()]
    state_time, total = None, None
    for t in range(1, 10):
        if t == 9:
            data = {n: [(*r, t, -c) for r, c in h.items()] for n, h in held.items()}
            for h in held.values():
                h.clear()
        elif t in (1, 4):
            data = {n: [] for n in SCHEMAS}  # nothing changes: the final bucket steps anyway
        else:
            data = {n: random_delta(rng, held[n], t, n) for n in SCHEMAS}
        ins = {n: updates(d, SCHEMAS[n]) for n, d in data.items()}
        out, outs = step_in_process(view, states, state_time, ins, t, buckets)
        assert len(outs[-2]) <= 3 * buckets  # per touched bucket: partials, an old and a new row of extremes
        expected = mv.step(t, ins)
        if t > 1:  # the maintained view emitted its row over the empty input at its creation
            assert rows(out) == rows(expected), (query, t)
        total = colmz.concat([total, out]) if t > 1 else out
        assert rows(total) == rows(recompute(query, held, t)), (query, t)
        state_time = t
        if partial.states() and not lower:
            # the buckets' rows together are the in-process min/max's input arranged
            [(arranged, schema)] = partial.states()
            mine = rows(colmz.concat([states[0][b][arranged] for b in range(buckets) if arranged in states[0][b]]
                                     or [colmz.Updates.empty(schema)]))
            [whole] = [rows(s.delta((), 0)) for s in operator_states(mv.pipeline)
                       if s.name.endswith("arranged") and "collation" not in s.name]
            assert mine == whole, (query, t)
        # the final bucket holds the global accumulators and at most a row of extremes per bucket
        assert all(sum(r[-1] for r in rows(u)) <= buckets for u in states[-1][0].values()), (query, t)
    assert all(not len(u) for per in states[:-1] for s in per for u in s.values())  # all retracted


def test_what_does_not_combine_from_partials_is_refused_by_name():
    for bad, why in [
        ("SELECT sum(v + 1) AS s FROM t", r"recomputed in DuckDB \(sum\(v \+ 1\)\)"),
        ("SELECT string_agg(w, ',') AS s FROM u", r"recomputed in DuckDB \(string_agg"),
        ("SELECT max(w) AS m FROM u", r"recomputed in DuckDB \(max\(w\)\)"),  # text: the collation's order
        ("SELECT count(*) AS c FROM (SELECT * FROM t LIMIT 3) s",
         "global aggregate .* over a TopK whose subtree does not run in stages"),
        ("SELECT min(v) AS m FROM t, u", "global aggregate .* over a Join whose subtree does not run in stages: "
                                        ".*without an equality"),
        ("SELECT count(*) AS c FROM (SELECT k FROM t WHERE mz_now() <= v ORDER BY k LIMIT 2) s",
         r"has a Fallback where (.|\n)*a temporal filter \(mz_now\(\)\) below DISTINCT, LIMIT"),
    ]:
        with pytest.raises(ValueError, match=why) as e:
            bucketed_view(bad, SCHEMAS)
        assert "-- " in str(e.value), bad  # the plan's EXPLAIN


@pytest.mark.spark
@pytest.mark.parametrize("query", [GLOBAL[0], GLOBAL[-1], OVER_STAGES[1]])
def test_a_global_aggregate_on_spark_equals_the_maintained_view(spark, tmp_path, query):
    """Several commits on local Spark (inserts, deletes of current extremes, NULL keys and
    values, an empty step, everything retracted at the end), the state reopened before each:
    each output equals the maintained view's change and the recompute, one compare-and-set
    per step; the final bucket's state is the global accumulators and at most a row of
    extremes per bucket, and an accumulable-only view's final task reads that one row per
    step, not the table's rows."""
    view = bucketed_view(query, SCHEMAS)
    buckets = 3
    url = str(tmp_path / "store")
    mv = maintained(query)
    rng = random.Random(3)
    held = {n: Counter() for n in SCHEMAS}
    total = None
    for t in range(1, 6):
        if t == 5:
            data = {n: [(*r, t, -c) for r, c in h.items()] for n, h in held.items()}
            for h in held.values():
                h.clear()
        elif t == 3:
            data = {n: [] for n in SCHEMAS}
        else:
            data = {n: random_delta(rng, held[n], t, n) for n in SCHEMAS}
            data["t"] += [(k, v, t, 1) for k in range(4) for v in range(10)]
            held["t"].update((k, v) for k in range(4) for v in range(10))
            if t == 4:  # the current extremes retracted
                for row in (max(r for r in held["t"] if r[1] is not None and r[0] is not None),
                            min(r for r in held["t"] if r[1] is not None and r[0] is not None)):
                    data["t"].append((*row, t, -1))
                    held["t"][row] -= 1
                    if not held["t"][row]:
                        del held["t"][row]
        state = BucketState.open(url, view, buckets)
        frames = [spark.createDataFrame(data[n], SPARK_TYPES[n]) for n in view.tables]
        out = step_buckets(spark, state, frames, t, compact_runs=2)
        expected = mv.step(t, {n: updates(data[n], SCHEMAS[n]) for n in SCHEMAS})
        if t > 1:  # the maintained view emitted its row over the empty input at its creation
            assert rows(out) == rows(expected), (query, t)
        total = colmz.concat([total, out]) if t > 1 else out
        assert rows(total) == rows(recompute(query, held, t)), (query, t)
        if query == GLOBAL[0]:
            assert state.rows_read == (0 if t == 1 else 1), t  # the one global row (compacted: one run)
        again = BucketState.open(url, view, buckets)
        assert (again.time, again.seqno) == (t, t)
        final = len(view.stages()) - 1
        for name, _ in view.states():
            if name.startswith(f"{final}:"):
                assert sum(r[-1] for r in rows(again.contents(0, name))) <= buckets, (query, t, name)
        if query == GLOBAL[0]:
            [whole] = [rows(s.delta((), 0)) for s in operator_states(mv.pipeline)]
            assert rows(again.contents(0, f"{final}:0.state")) == whole, t
    # everything retracted: the buckets' rows and extremes are gone
    assert all(not len(again.contents(b, n)) for b in range(buckets) for n, _ in view.states()
               if not n.endswith(".state") and ".arranged." not in n)
