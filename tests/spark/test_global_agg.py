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
]


def recompute(query: str, table: str, held: Counter, t: int) -> colmz.Updates:
    """The view over ``held`` whole, from a fresh pipeline: the oracle."""
    return render(plan(query, SCHEMAS)).step(t, {table: updates([(*r, t, c) for r, c in held.items()], SCHEMAS[table])})


@pytest.mark.parametrize("query", GLOBAL)
def test_partials_per_bucket_then_one_final_bucket_equal_the_maintained_view(query):
    """Each bucket's partials (no state), then the final bucket restored from its own state
    only: the output equals the maintained view's at every step -- the first one's row over
    an empty input, empty steps, everything retracted at the end --, and the final state
    equals the in-process reduce's."""
    view = bucketed_view(query, SCHEMAS)
    assert view.kind == "global"
    partial, final = view.stages()
    assert partial.states() == () and [n for n, _ in view.states()] == ["1:0.state"]
    table = view.tables[0]
    mv = maintained(query)
    rng = random.Random(zlib.crc32(query.encode()))
    held = Counter()
    state, state_time = {}, None
    buckets = 3
    total = None
    for t in range(1, 10):
        if t == 9:
            data = [(*r, t, -c) for r, c in held.items()]
            held.clear()
        elif t in (1, 4):
            data = []  # nothing changes: the final bucket steps anyway (the first step's row)
        else:
            data = random_delta(rng, held, t, table)
        delta = updates(data, SCHEMAS[table])
        partials = []
        cols = [delta.column(c).to_pylist() for c in partial.keys[0]]
        for b in range(buckets):
            mine = delta.take([j for j in range(len(delta)) if bucket_of(tuple(c[j] for c in cols), buckets) == b])
            if len(mine):
                out, st = step_bucket(partial, {}, state_time, [mine], t)
                assert st == {}
                partials.append(out)
        ins = colmz.concat(partials) if partials else colmz.Updates.empty(final.inputs[0])
        assert len(ins) <= buckets  # a row per touched bucket, not per input row
        out, st = step_bucket(final, state, state_time, [ins], t)
        expected = mv.step(t, {n: updates(data if n == table else [], SCHEMAS[n]) for n in SCHEMAS})
        if t > 1:  # the maintained view emitted its row over the empty input at its creation
            assert rows(out) == rows(expected), (query, t)
        total = colmz.concat([total, out]) if t > 1 else out
        assert rows(total) == rows(recompute(query, table, held, t)), (query, t)
        state = {n: colmz.consolidate(colmz.concat([state.get(n, colmz.Updates.empty(u.schema)), u]), since=t)
                 for n, u in st.items()}
        state_time = t
        [whole] = [rows(s.delta((), 0)) for s in operator_states(mv.pipeline)]
        assert rows(state["0.state"]) == whole, (query, t)


def test_what_does_not_combine_from_partials_is_refused_by_name():
    for bad, why in [
        ("SELECT max(v) AS m FROM t", r"not accumulable \(max\(t.v\)\)"),
        ("SELECT sum(v + 1) AS s FROM t", r"recomputed in DuckDB \(sum\(v \+ 1\)\)"),
        ("SELECT count(*) AS c FROM t JOIN u ON t.k = u.k", "global aggregate .* over a Join"),
        ("SELECT k, c FROM (SELECT k, count(*) AS c, max(v) AS m FROM t GROUP BY k) s WHERE mz_now() <= m",
         "has a TemporalFilter where"),
    ]:
        with pytest.raises(ValueError, match=why) as e:
            bucketed_view(bad, SCHEMAS)
        assert "-- " in str(e.value), bad  # the plan's EXPLAIN


@pytest.mark.spark
def test_a_global_aggregate_on_spark_equals_the_maintained_view(spark, tmp_path):
    """Several commits on local Spark, the state reopened before each (one an empty step):
    each output equals the maintained view's change, one compare-and-set per step, and the
    final bucket's task reads its one state row (the global accumulators) per step, not the
    table's rows."""
    query = GLOBAL[0]
    view = bucketed_view(query, SCHEMAS)
    url = str(tmp_path / "store")
    mv = maintained(query)
    rng = random.Random(3)
    held = Counter()
    total = None
    for t in range(1, 6):
        if t == 5:
            data = [(*r, t, -c) for r, c in held.items()]
            held.clear()
        elif t == 3:
            data = []
        else:
            data = random_delta(rng, held, t, "t") + [(k, v, t, 1) for k in range(4) for v in range(10)]
            held.update((k, v) for k in range(4) for v in range(10))
        state = BucketState.open(url, view, 3)
        out = step_buckets(spark, state, [spark.createDataFrame(data, SPARK_TYPES["t"])], t, compact_runs=2)
        expected = mv.step(t, {"t": updates(data, SCHEMAS["t"]), "u": updates([], SCHEMAS["u"])})
        if t > 1:  # the maintained view emitted its row over the empty input at its creation
            assert rows(out) == rows(expected), t
        total = colmz.concat([total, out]) if t > 1 else out
        assert rows(total) == rows(recompute(query, "t", held, t)), t
        assert state.rows_read == (0 if t == 1 else 1), t  # the one global row (compacted: one run)
        again = BucketState.open(url, view, 3)
        assert (again.time, again.seqno) == (t, t)
        [whole] = [rows(s.delta((), 0)) for s in operator_states(mv.pipeline)]
        assert rows(again.contents(0, "1:0.state")) == whole, t
