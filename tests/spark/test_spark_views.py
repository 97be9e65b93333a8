"""``colmz.spark.views``: the sum and join views stepped per key bucket on local Spark, each
step's output and committed state compared with the in-process operators' (their outputs
and their exported state, ``colmz.dataflow.state``) and with the recompute."""

from __future__ import annotations

import contextlib
import random
import zlib
from collections import Counter

import pyarrow as pa
import pytest
from test_stages import churn

import colmz
from colmz.dataflow import Avg, Count, Sum
from colmz.dataflow.state import operator_states_of
from colmz.rows import at_time
from colmz.spark.views import (
    INTEGRATED_LAYOUT,
    LAYOUT,
    BucketState,
    BucketStateConflict,
    BucketStateLayoutError,
    bucketed_view,
    convert_state,
    join_view,
    step_bucket,
    step_buckets,
    sum_view,
)
from colmz.storage.url import open_blob

T = {"k": pa.int64(), "v": pa.int64()}
SPARK_T = "k long, v long, time long, diff long"


def rows(u: colmz.Updates) -> list:
    """``u`` consolidated over all its times, as sorted ``(data..., diff)``."""
    return sorted(((*r[:-2], r[-1]) for r in colmz.consolidate(at_time(u, 0)).to_pylist()), key=repr)


def random_delta(rng: random.Random, held: Counter, t: int, keys=(1, 2, 3, 4, 5, None)) -> list:
    """Inserts and retractions (of rows ``held`` holds only), as ``(k, v, t, diff)``."""
    return churn(rng, held, t, lambda r: (r.choice(keys), r.randint(-5, 20)))


def updates(data: list, schema: dict) -> colmz.Updates:
    names = list(schema)
    return colmz.Updates({n: pa.array([r[i] for r in data], schema[n]) for i, n in enumerate(names)},
                         time=[r[-2] for r in data], diff=[r[-1] for r in data])


def contents(state: BucketState) -> dict:
    """Every state collection of ``state``, all buckets, as rows."""
    return {name: rows(colmz.concat([state.contents(b, name) for b in range(state.buckets)]))
            for name, _ in state.view.states()}


def exported(op) -> dict:
    """The in-process operator's state collections (what a durable catalog keeps), as rows."""
    return {st.name: rows(st.delta((), 0)) for st in operator_states_of([op])}


def recomputed(view, held: list[Counter], t: int) -> colmz.Updates:
    """The view over the inputs ``held`` whole (a fresh operator, one step): the oracle."""
    ins = [updates([(*r, t, n) for r, n in h.items()], schema_of(s)) for h, s in zip(held, view.inputs)]
    out, _ = step_bucket(view, None, None, ins, t)
    return out


def schema_of(specs) -> dict:
    return {c.name: c.type for c in specs}


def test_step_bucket_restores_the_operator_from_its_own_state():
    view = sum_view(T, ["k"], {"s": Sum("v"), "c": Count()})
    op = view.operator()
    old = updates([(1, 5, 1, 1), (1, 7, 1, 1), (2, 3, 1, 1)], T)
    op.step(1, old)
    state = {n: updates(r, {c.name: c.type for c in dict(view.states())[n]}) for n, r in
             {n: [(*x[:-1], 1, x[-1]) for x in r] for n, r in exported(op).items()}.items()}
    assert [len(u) for u in state.values()] == [2]  # one row per group, not per input row
    delta = updates([(1, 5, 2, -1), (3, 1, 2, 1)], T)
    out, state_delta = step_bucket(view, state, 1, [delta], 2)
    assert rows(out) == rows(op.step(2, delta))
    after = rows(colmz.concat([state["0.state"], state_delta["0.state"]]))
    assert after == exported(op)["0.state"]
    # only the changed groups: group 1 (old row out, new row in) and the new group 3
    assert sorted(r[0] for r in rows(state_delta["0.state"])) == [1, 1, 3]
    with pytest.raises(ValueError, match="time 1 is not after the state's time 1"):
        step_bucket(view, state, 1, [delta], 1)
    with pytest.raises(ValueError, match=r"state names \['nope'\]"):
        step_bucket(view, {"nope": state["0.state"]}, 1, [delta], 2)
    with pytest.raises(ValueError, match="state_time is None"):
        step_bucket(view, state, None, [delta], 2)


def as_w(v):
    return None if v is None else str(v)


def bucket_of(key, buckets: int) -> int:
    return zlib.crc32(repr(key).encode()) % buckets


@pytest.mark.parametrize("kind", ["sum", "join"])
@pytest.mark.parametrize("seed", range(6))
def test_buckets_stepped_from_their_own_state_equal_the_operator_and_the_recompute(kind, seed):
    """Seeded random sequences (inserts, deletes, NULL keys, groups retracted to zero, all
    retracted at the end) stepped per bucket in process, each bucket's state only the
    consolidated sum of its state deltas: the union of the buckets' outputs equals the
    in-process operator's and the recompute's delta; the buckets' states together equal the
    operator's exported state."""
    U = {"uk": pa.int64(), "w": pa.string()}
    view = (sum_view(T, ["k"], {"s": Sum("v"), "c": Count(), "a": Avg("v")}) if kind == "sum"
            else join_view(T, U, [("k", "uk")]))
    buckets = 3
    rng = random.Random(seed)
    ref = view.operator()
    held = [Counter() for _ in view.inputs]
    states: list[dict] = [{} for _ in range(buckets)]
    state_time = None
    prev = recomputed(view, held, 0)
    steps = 12
    for t in range(1, steps + 1):
        if t == steps:  # retract everything
            data = [[(*r, t, -n) for r, n in h.items()] for h in held]
            for h in held:
                h.clear()
        else:
            data = [random_delta(rng, held[0], t)]
            if kind == "join":
                data.append(random_delta(rng, held[1], t))
        ins = [updates(data[0], T)]
        if kind == "join":  # the second input's (k, v) rows as (uk, w)
            ins.append(updates([(k, as_w(v), tt, d) for k, v, tt, d in data[1]], U))
        outs = []
        for b in range(buckets):
            mine = [d.take([j for j in range(len(d)) if bucket_of(d.column(d.column_names[0])[j].as_py(), buckets) == b])
                    for d in ins]
            if not any(len(m) for m in mine):
                continue
            out, delta = step_bucket(view, states[b], state_time, mine, t)
            outs.append(out)
            for n, u in delta.items():
                states[b][n] = colmz.consolidate(colmz.concat([states[b].get(n, colmz.Updates.empty(u.schema)), u]),
                                                 since=t)
        state_time = t
        expected = ref.step(t, *ins)
        got = colmz.concat(outs) if outs else colmz.Updates.empty(expected.schema)
        assert rows(got) == rows(expected), (seed, t)
        now = recomputed(view, [held[0], *(Counter({(k, as_w(v)): n for (k, v), n in h.items()}) for h in held[1:])], t)
        assert rows(got) == rows(colmz.concat([now, prev.negated()])), (seed, t)
        prev = now
        mine = {n: rows(colmz.concat([s[n] for s in states if n in s])) if any(n in s for s in states) else []
                for n, _ in view.states()}
        assert mine == exported(ref), (seed, t)
    assert all(not len(u) for s in states for u in s.values())  # all retracted: empty state


def test_bad_views_and_states_are_named(tmp_path):
    with pytest.raises(ValueError, match="group_by must name at least one column"):
        sum_view(T, [], {"c": Count()})
    with pytest.raises(TypeError, match="accumulable aggregate"):
        sum_view(T, ["k"], {"c": "count"})
    with pytest.raises(ValueError, match="on pair \\('v', 'nope'\\)"):
        join_view(T, {"uk": pa.int64()}, [("v", "nope")])
    view = sum_view(T, ["k"], {"c": Count()})
    with pytest.raises(ValueError, match="buckets must be a positive int"):
        BucketState.open(str(tmp_path), view, 0)
    state = BucketState.open(str(tmp_path), view, 2)
    state._commit(1, {})
    with pytest.raises(ValueError, match="with 2 buckets, not .* with 3"):
        BucketState.open(str(tmp_path), view, 3)
    with pytest.raises(ValueError, match="not .*'s'"):
        BucketState.open(str(tmp_path), sum_view(T, ["k"], {"s": Sum("v")}), 2)


U_SQL = {"k": pa.int64(), "w": pa.string()}
SQL_SCHEMAS = {"t": T, "u": U_SQL}

#: Views whose plan is Map/Filters around one keyed stateful operator, and their bucket keys.
CHAINS = {
    "SELECT sum(v) AS s, k AS key, avg(v) AS a FROM t GROUP BY k": (("k",),),
    "SELECT k, sum(v) AS s, count(*) AS c FROM t WHERE v > 0 GROUP BY k": (("k",),),
    "SELECT k, sum(v) AS s FROM t WHERE v + 1 > 3 GROUP BY k HAVING sum(v) > 3": (("k",),),
    "SELECT k % 2 AS m, k, count(*) AS c FROM t GROUP BY k % 2, k": (("k",),),
    "SELECT k, min(v) AS lo, max(v) AS hi, count(v) AS n FROM t GROUP BY k": (("k",),),
    "SELECT u.w, t.v, t.k FROM t JOIN u ON u.k = t.k": (("k",), ("k",)),
    "SELECT t.k, u.w FROM t JOIN u ON t.k = u.k WHERE t.v > 2 AND u.w <> 'x'": (("k",), ("k",)),
    "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k AND t.v < length(u.w) + 4": (("k",), ("k",)),
    "SELECT DISTINCT k FROM t WHERE v > 2": (("k",),),
    # stateful operators over stateful operators, keyed by what the lowest is bucketed by
    "SELECT t.k, count(*) AS c, sum(t.v) AS s FROM t JOIN u ON t.k = u.k GROUP BY t.k": (("k",), ("k",)),
    "SELECT u.k AS uk, max(t.v) AS m FROM t JOIN u ON t.k = u.k WHERE u.w <> '3' GROUP BY u.k HAVING count(*) > 1":
        (("k",), ("k",)),
    "SELECT DISTINCT t.k, u.w FROM t JOIN u ON t.k = u.k": (("k",), ("k",)),
    "SELECT k, count(*) AS n FROM (SELECT k, v FROM t GROUP BY k, v) s GROUP BY k": (("k",),),
    "SELECT v, count(*) AS n FROM (SELECT k, v FROM t GROUP BY k, v) s GROUP BY v": (("v",),),
    # top-k per group, windows, basic aggregates (recomputed per group in DuckDB)
    "SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v DESC": (("k",),),
    "SELECT k, v FROM (SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t) s WHERE r <= 2":
        (("k",),),
    "SELECT k, v, sum(v) OVER (PARTITION BY k) AS s FROM t WHERE v > 0": (("k",),),
    "SELECT k, string_agg(CAST(v AS VARCHAR), ',' ORDER BY v) AS s, count(DISTINCT v) AS n FROM t GROUP BY k":
        (("k",),),
    "SELECT DISTINCT ON (k) k, v FROM (SELECT t.k, t.v FROM t JOIN u ON t.k = u.k) s ORDER BY k, v":
        (("k",), ("k",)),
    "SELECT k, v, w FROM (SELECT t.k, t.v, u.w, row_number() OVER (PARTITION BY t.k ORDER BY t.v, u.w) AS r "
    "FROM t JOIN u ON t.k = u.k) s WHERE r = 1": (("k",), ("k",)),
}


def test_bucketed_view_reads_chains_around_one_keyed_operator_from_sql():
    for query, keys in CHAINS.items():
        view = bucketed_view(query, SQL_SCHEMAS)
        assert (view.kind, view.keys) == ("plan", keys), query
    # a global aggregate (accumulable, min/max) over Map/Filters of a table or over stages:
    # partials, then one bucket (tests/spark/test_global_agg.py)
    for glob in ["SELECT count(*) AS n FROM t", "SELECT max(v) AS n FROM t",
                 "SELECT count(*) AS n FROM (SELECT k FROM t GROUP BY k) s"]:
        assert bucketed_view(glob, SQL_SCHEMAS).kind == "global", glob
    for bad, why in [("SELECT k FROM t WHERE v > 1", "has a Get where its stateful operator goes"),
                     ("SELECT k FROM t ORDER BY k LIMIT 3", "has a TopK keyed by nothing"),
                     ("SELECT k, sum(v) OVER () AS s FROM t", "keyed by nothing"),
                     ("SELECT count(*) AS n FROM (SELECT k FROM t ORDER BY k LIMIT 3) s",
                      r"global aggregate \(no GROUP BY\) over a TopK whose subtree does not run in stages")]:
        with pytest.raises(ValueError, match=why) as e:
            bucketed_view(bad, SQL_SCHEMAS)
        assert "-- " in str(e.value), bad  # the plan's EXPLAIN is in the message
    # operators keyed differently (or by a computed column, or a table read twice) are cut
    # into stages, each bucketed by its own key (tests/spark/test_stages.py)
    for staged in ["SELECT k + 1 AS k1, count(*) AS c FROM t GROUP BY k + 1",
                   "SELECT a.k FROM t a JOIN t b ON a.k = b.k",
                   "SELECT t.k FROM t LEFT JOIN u ON t.k = u.k",
                   "SELECT k FROM t UNION ALL SELECT k FROM u",
                   "SELECT t.v, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY t.v",
                   "SELECT c, count(*) AS n FROM (SELECT k, count(*) AS c FROM t GROUP BY k) s GROUP BY c"]:
        assert bucketed_view(staged, SQL_SCHEMAS).kind == "stages", staged
    # a temporal filter changes without input: it runs in stages, whose buckets holding its
    # flips step at every step (tests/spark/test_stages.py)
    temporal = bucketed_view("SELECT k, c FROM (SELECT k, count(*) AS c, max(ts) AS m FROM t GROUP BY k) s "
                             "WHERE mz_now() <= m", {"t": {**T, "ts": pa.int64()}})
    assert temporal.kind == "stages" and temporal.stages()[-1].temporal_states()
    with pytest.raises(ValueError, match="has a Constant where"):
        bucketed_view("SELECT k FROM t UNION ALL SELECT 1 AS k", SQL_SCHEMAS)


def sql_delta(rng: random.Random, held: list[Counter], tables, t: int) -> list:
    """A random delta per table of ``tables`` (``t``: (k, v); ``u``: (k, w)), as rows."""
    out = []
    for name, h in zip(tables, held):
        if name == "t":
            out.append(random_delta(rng, h, t))
        else:
            d = random_delta(rng, h, t, keys=(1, 2, 3, None))
            out.append(d)
    return out


def as_table(name: str, data: list) -> colmz.Updates:
    if name == "t":
        return updates(data, T)
    return updates([(k, as_w(v), tt, d) for k, v, tt, d in data], U_SQL)


@pytest.mark.parametrize("query", list(CHAINS))
def test_a_chain_per_bucket_equals_its_rendered_plan_and_the_recompute(query):
    """A plan's Map/Filters and its stateful operator per bucket in process (seeded
    inserts, deletes, NULL keys, retraction to zero), each bucket restored from its own
    state only: the union of the outputs equals the rendered plan's and the recompute's
    change; the states together equal the plan's exported state."""
    from colmz.dataflow.plan import plan, render
    from colmz.dataflow.state import operator_states

    view = bucketed_view(query, SQL_SCHEMAS)
    ref = render(plan(query, SQL_SCHEMAS))
    buckets = 3
    rng = random.Random(zlib.crc32(query.encode()))
    held = [Counter() for _ in view.tables]
    states: list[dict] = [{} for _ in range(buckets)]
    state_time = None

    def recompute(t):
        return render(plan(query, SQL_SCHEMAS)).step(t, {n: as_table(n, [(*r, t, c) for r, c in h.items()])
                                                        for n, h in zip(view.tables, held)})

    prev = recompute(0)
    for t in range(1, 11):
        if t == 10:
            data = [[(*r, t, -c) for r, c in h.items()] for h in held]
            for h in held:
                h.clear()
        else:
            data = sql_delta(rng, held, view.tables, t)
        ins = [as_table(n, d) for n, d in zip(view.tables, data)]
        outs = []
        for b in range(buckets):
            mine = []
            for d, key in zip(ins, view.keys):
                cols = [d.column(c).to_pylist() for c in key]
                mine.append(d.take([j for j in range(len(d)) if bucket_of(tuple(c[j] for c in cols), buckets) == b]))
            if not any(len(m) for m in mine):
                continue
            out, delta = step_bucket(view, states[b], state_time, mine, t)
            outs.append(out)
            for n, u in delta.items():
                states[b][n] = colmz.consolidate(colmz.concat([states[b].get(n, colmz.Updates.empty(u.schema)), u]),
                                                 since=t)
        state_time = t
        expected = ref.step(t, dict(zip(view.tables, ins)))
        got = colmz.concat(outs) if outs else colmz.Updates.empty(expected.schema)
        assert rows(got) == rows(expected), (query, t)
        now = recompute(t)
        assert rows(got) == rows(colmz.concat([now, prev.negated()])), (query, t)
        prev = now
        mine = {n: rows(colmz.concat([s[n] for s in states if n in s])) if any(n in s for s in states) else []
                for n, _ in view.states()}
        assert mine == {st.name: rows(st.delta((), 0)) for st in operator_states(ref)}, (query, t)
    assert all(not len(u) for s in states for u in s.values())


@pytest.mark.spark
@pytest.mark.parametrize("query", [
    "SELECT sum(v) AS s, k AS key, avg(v) AS a FROM t GROUP BY k",
    "SELECT k, sum(v) AS s FROM t WHERE v + 1 > 3 GROUP BY k HAVING sum(v) > 3",
    "SELECT k, min(v) AS lo, max(v) AS hi, count(v) AS n FROM t GROUP BY k",
    "SELECT t.k, u.w FROM t JOIN u ON t.k = u.k WHERE t.v > 2 AND u.w <> 'x'",
    "SELECT t.k, count(*) AS c, sum(t.v) AS s FROM t JOIN u ON t.k = u.k GROUP BY t.k",
    "SELECT k, v FROM (SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t) s WHERE r <= 2",
])
def test_a_view_from_sql_per_bucket_equals_its_rendered_plan(spark, tmp_path, query):
    from colmz.dataflow.plan import plan, render

    view = bucketed_view(query, SQL_SCHEMAS)
    ref = render(plan(query, SQL_SCHEMAS))
    url = str(tmp_path / "store")
    rng = random.Random(3)
    held = [Counter() for _ in view.tables]
    spark_types = {"t": SPARK_T, "u": "k long, w string, time long, diff long"}
    for t in range(1, 4):
        data = sql_delta(rng, held, view.tables, t)
        frames = [spark.createDataFrame([(k, as_w(v), tt, d) for k, v, tt, d in rows_] if n == "u" else rows_,
                                        spark_types[n]) for n, rows_ in zip(view.tables, data)]
        out = step_buckets(spark, BucketState.open(url, view, 2), frames, t)
        assert rows(out) == rows(ref.step(t, {n: as_table(n, d) for n, d in zip(view.tables, data)})), (query, t)
    if view.tables != ("t",):
        return
    # A retraction of a row never inserted fails in its bucket's reduce, in process and on
    # Spark: nothing committed, the step's parts deleted; the next step goes on.
    bad = [(k, 9, 4, 1) for k in (1, 2, 3, 4, 5)] + [(99, 99, 4, -1)]
    with pytest.raises(Exception, match="retracts rows it does not hold") as in_process:
        ref.step(4, {"t": as_table("t", bad)})
    state = BucketState.open(url, view, 2)
    before = (state.seqno, state.time, contents(state), state.referenced())
    with pytest.raises(Exception, match=type(in_process.value).__name__):
        step_buckets(spark, state, [spark.createDataFrame(bad, SPARK_T)], 4, owner="failedchain")
    again = BucketState.open(url, view, 2)
    assert (again.seqno, again.time, contents(again), again.referenced()) == before
    assert [k for k in open_blob(url).list_keys(again.prefix) if "failedchain" in k] == []
    good = bad[:-1]
    out = step_buckets(spark, again, [spark.createDataFrame(good, SPARK_T)], 4)
    assert rows(out) == rows(ref.step(4, {"t": as_table("t", good)}))


@pytest.mark.spark
def test_sum_view_per_bucket_equals_the_in_process_operator(spark, tmp_path):
    view = sum_view(T, ["k"], {"s": Sum("v"), "c": Count(), "a": Avg("v")})
    url = str(tmp_path / "store")
    ref = view.operator()
    rng = random.Random(7)
    held: Counter = Counter()
    for t in range(1, 5):
        data = random_delta(rng, held, t)
        state = BucketState.open(url, view, 3)  # reopened before every step
        out = step_buckets(spark, state, [spark.createDataFrame(data, SPARK_T)], t, compact_runs=3)
        assert rows(out) == rows(ref.step(t, updates(data, T))), t
        again = BucketState.open(url, view, 3)
        assert (again.time, again.seqno) == (t, t)
        assert contents(again) == exported(ref)  # the operator's own state: a row per group
        assert len(contents(again)["0.state"]) == len({k for k, _ in held})
        assert max(len(again.runs(b, "0.state")) for b in range(3)) < 3  # compacted at 3 runs

    # A step failing in one bucket (a retraction of a row never inserted) commits nothing
    # and deletes the parts the other buckets wrote.
    state = BucketState.open(url, view, 3)
    before = (state.seqno, state.time, contents(state), state.referenced())
    bad = [(k, 1, 5, 1) for k in (1, 2, 3, 4, 5)] + [(99, 99, 5, -1)]
    with pytest.raises(Exception, match="NegativeMultiplicity|retracts rows"):
        step_buckets(spark, state, [spark.createDataFrame(bad, SPARK_T)], 5, owner="failedstep")
    again = BucketState.open(url, view, 3)
    assert (again.seqno, again.time, contents(again), again.referenced()) == before
    blob = open_blob(url)
    assert [k for k in blob.list_keys(again.prefix) if "failedstep" in k] == []
    assert set(blob.list_keys(again.prefix)) == again.referenced()

    # ... and the next step goes on from the committed state.
    data = random_delta(rng, held, 6)
    out = step_buckets(spark, again, [spark.createDataFrame(data, SPARK_T)], 6)
    assert rows(out) == rows(ref.step(6, updates(data, T)))


@pytest.mark.spark
def test_a_step_racing_another_writer_commits_nothing(spark, tmp_path):
    view = sum_view(T, ["k"], {"s": Sum("v")})
    url = str(tmp_path / "store")
    a, b = BucketState.open(url, view, 2), BucketState.open(url, view, 2)
    df = spark.createDataFrame([(1, 2, 1, 1), (2, 3, 1, 1)], SPARK_T)
    step_buckets(spark, a, [df], 1)
    with pytest.raises(BucketStateConflict, match="since version None"):
        step_buckets(spark, b, [df], 1, owner="loser")
    state = BucketState.open(url, view, 2)
    ref = view.operator()
    ref.step(1, updates([(1, 2, 1, 1), (2, 3, 1, 1)], T))
    assert state.seqno == 1 and contents(state) == exported(ref)
    assert [k for k in open_blob(url).list_keys(state.prefix) if "loser" in k] == []
    with pytest.raises(ValueError, match="time 1 is not after the state's committed time 1"):
        step_buckets(spark, state, [df], 1)


@pytest.mark.spark
def test_join_view_per_bucket_equals_the_in_process_delta_join(spark, tmp_path):
    U = {"uk": pa.int32(), "w": pa.string()}  # another key type: bucketed by the cast key
    view = join_view(T, U, [("k", "uk")])
    url = str(tmp_path / "store")
    ref = view.operator()
    rng = random.Random(11)
    held_t: Counter = Counter()
    held_u: Counter = Counter()
    for t in range(1, 4):
        dt = random_delta(rng, held_t, t)
        du = []
        for _ in range(rng.randint(0, 3)):
            if held_u and rng.random() < 0.3:
                row = rng.choice(sorted(held_u, key=repr))
                du.append((*row, t, -1))
                held_u[row] -= 1
                held_u += Counter()
            else:
                row = (rng.choice([1, 2, 3, None]), rng.choice("xyz"))
                du.append((*row, t, 1))
                held_u[row] += 1
        state = BucketState.open(url, view, 2, name="joined")
        out = step_buckets(spark, state, [spark.createDataFrame(dt, SPARK_T),
                                          spark.createDataFrame(du, "uk int, w string, time long, diff long")], t)
        assert rows(out) == rows(ref.step(t, updates(dt, T), updates(du, U))), t
        again = BucketState.open(url, view, 2, name="joined")
        assert contents(again) == exported(ref)  # each input arranged by its key, NULL keys dropped
        assert contents(again)["0.arrangements.0"] == sorted(
            ((*r, n) for r, n in held_u.items() if r[0] is not None), key=repr)


@pytest.mark.spark
def test_a_commit_failing_before_or_after_the_compare_and_set(spark, tmp_path):
    from colmz.storage.base import Indeterminate
    from colmz.storage.faults import FaultPlan, FaultyConsensus, InjectedDeterminate
    from colmz.storage.url import Location, open_location

    view = sum_view(T, ["k"], {"s": Sum("v")})
    url = str(tmp_path / "store")
    ref = view.operator()

    def faulty(plan):
        loc = open_location(url)
        return BucketState.open(Location(loc.blob, FaultyConsensus(loc.consensus, plan), loc.url), view, 2)

    def step(state, t, data, **kw):
        return step_buckets(spark, state, [spark.createDataFrame(data, SPARK_T)], t, **kw)

    first = [(1, 2, 1, 1), (2, 3, 1, 1), (3, 4, 1, 1)]
    assert rows(step(BucketState.open(url, view, 2), 1, first)) == rows(ref.step(1, updates(first, T)))
    blob = open_blob(url)
    # Call 1 is the open's read of the record, call 2 the step's compare-and-set.
    # Refused before it applies: nothing committed, the step's parts deleted.
    with pytest.raises(InjectedDeterminate):
        step(faulty(FaultPlan(fail_at=2, mode="before")), 2, [(1, 9, 2, 1)], owner="refused")
    state = BucketState.open(url, view, 2)
    assert (state.seqno, state.time) == (1, 1)
    assert [k for k in blob.list_keys(state.prefix) if "refused" in k] == []
    # Applied, reply lost: the head read back says it landed; the step succeeds.
    second = [(1, 9, 2, 1), (3, 4, 2, -1)]
    out = step(faulty(FaultPlan(fail_at=2, mode="after")), 2, second)
    assert rows(out) == rows(ref.step(2, updates(second, T)))
    assert BucketState.open(url, view, 2).seqno == 2
    # Applied, and the read back fails too: unknown outcome, so the parts stay -- the record
    # names them, and reopening reads the committed state whole.
    third = [(2, 1, 3, 1)]
    with pytest.raises(Indeterminate):
        step(faulty(FaultPlan(fail_at=2, mode="after", count=2)), 3, third)
    state = BucketState.open(url, view, 2)
    assert (state.seqno, state.time) == (3, 3)
    assert set(blob.list_keys(state.prefix)) >= state.referenced()
    ref.step(3, updates(third, T))  # it committed: the reference takes it too
    assert contents(state) == exported(ref)
    fourth = [(2, 3, 4, -1)]
    assert rows(step(state, 4, fourth)) == rows(ref.step(4, updates(fourth, T)))


@pytest.mark.spark
def test_a_driver_killed_between_the_part_writes_and_the_commit_leaves_the_state(spark, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    view = sum_view(T, ["k"], {"s": Sum("v")})
    url = str(tmp_path / "store")
    ref = view.operator()
    first = [(1, 2, 1, 1), (2, 3, 1, 1)]
    step_buckets(spark, BucketState.open(url, view, 2), [spark.createDataFrame(first, SPARK_T)], 1)
    ref.step(1, updates(first, T))
    code = textwrap.dedent(f"""
        import os, signal, pyarrow as pa, colmz.spark
        from colmz.dataflow import Sum
        from colmz.spark import views
        spark = colmz.spark.session("local[1]", "killed", numba_cache_dir=colmz.spark.default_cache_dir())
        view = views.sum_view({{"k": pa.int64(), "v": pa.int64()}}, ["k"], {{"s": Sum("v")}})
        state = views.BucketState.open({url!r}, view, 2)
        views.BucketState._commit = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # after the tasks
        df = spark.createDataFrame([(1, 50, 2, 1), (2, 50, 2, 1)], "k long, v long, time long, diff long")
        views.step_buckets(spark, state, [df], 2)
        """)
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        assert proc.wait(timeout=600) == -signal.SIGKILL
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the dead driver's JVM
    state = BucketState.open(url, view, 2)
    assert (state.seqno, state.time) == (1, 1)
    orphans = set(open_blob(url).list_keys(state.prefix)) - state.referenced()
    assert orphans  # the killed step wrote its parts; no record names them
    assert contents(state) == exported(ref)
    second = [(1, 7, 2, 1)]
    out = step_buckets(spark, state, [spark.createDataFrame(second, SPARK_T)], 2)
    assert rows(out) == rows(ref.step(2, updates(second, T)))


@pytest.mark.spark
def test_a_sum_step_reads_the_buckets_groups_not_their_input_rows(spark, tmp_path):
    """The work counter: a touched bucket's task reads its accumulators, one row per group
    (after a compaction), not the rows the groups were made from."""
    view = sum_view(T, ["k"], {"s": Sum("v"), "c": Count()})
    url = str(tmp_path / "store")
    ref = view.operator()
    groups, per = 20, 10
    first = [(k, v, 1, 1) for k in range(groups) for v in range(per)]  # 200 rows in 20 groups
    state = BucketState.open(url, view, 4)
    out = step_buckets(spark, state, [spark.createDataFrame(first, SPARK_T)], 1, compact_runs=2)
    assert rows(out) == rows(ref.step(1, updates(first, T)))
    assert state.rows_read == 0
    for t in (2, 3):
        delta = [(k, 100 + t, t, 1) for k in range(groups)]  # every group, every bucket
        out = step_buckets(spark, state, [spark.createDataFrame(delta, SPARK_T)], t, compact_runs=2)
        assert rows(out) == rows(ref.step(t, updates(delta, T)))
        # the state holds a row per group: 10x fewer than the 200 (then 220) input rows the
        # integrated-input layout read
        assert state.rows_read == groups, t
        assert contents(state) == exported(ref)


def old_layout_state(url, view, data: list, time: int, inputs) -> set:
    """A state record as the integrated-input layout wrote it (one bucket: input ``i``'s rows
    under ``"0/i"``, no ``layout`` field); returns its part keys."""
    import json

    from colmz.arrangement.runs import write_run
    from colmz.storage.base import VersionedData
    from colmz.storage.url import open_location

    loc = open_location(url)
    runs = {}
    for i, (d, schema) in enumerate(zip(data, inputs)):
        run = write_run(loc.blob, view.inputs[i], updates(d, schema), prefix="view/parts/")
        runs[f"0/{i}"] = [run.to_dict()]
    record = {"view": view.describe(), "buckets": 1, "time": time, "runs": runs}
    assert loc.consensus.compare_and_set("view/state", None, VersionedData(1, json.dumps(record).encode()))
    return {k for r in runs.values() for k in r[0]["keys"]}


@pytest.mark.parametrize("kind", ["sum", "join"])
def test_a_state_of_the_integrated_input_layout_is_refused_then_converted(tmp_path, kind):
    from colmz.storage.faults import FaultPlan, FaultyConsensus, InjectedDeterminate
    from colmz.storage.url import Location, open_location

    U = {"uk": pa.int64(), "w": pa.string()}
    view = sum_view(T, ["k"], {"s": Sum("v"), "c": Count()}) if kind == "sum" else join_view(T, U, [("k", "uk")])
    schemas = [T, U][:len(view.inputs)]
    data = [[(1, 5, 1, 1), (1, 7, 1, 1), (2, 3, 1, 1), (None, 4, 1, 1), (2, 3, 1, 1)],
            [(1, "a", 1, 1), (None, "n", 1, 1), (2, "b", 1, 2)]][:len(view.inputs)]
    url = str(tmp_path / "store")
    old_parts = old_layout_state(url, view, data, 1, schemas)
    with pytest.raises(BucketStateLayoutError, match=f"layout '{INTEGRATED_LAYOUT}' \\(each input's integrated "
                       f"rows per bucket\\), not '{LAYOUT}'.*convert_state"):
        BucketState.open(url, view, 1)
    with pytest.raises(ValueError, match="with 1 buckets, not .* with 2"):
        convert_state(url, view, 2)
    # A conversion whose compare-and-set fails (call 1: the open's read, 2: the record read
    # again, 3: the compare-and-set) commits nothing and deletes what it wrote.
    loc = open_location(url)
    with pytest.raises(InjectedDeterminate):
        convert_state(Location(loc.blob, FaultyConsensus(loc.consensus, FaultPlan(fail_at=3, mode="before")),
                               loc.url), view, 1, owner="lost")
    assert [k for k in open_blob(url).list_keys("view/parts/") if "lost" in k] == []
    with pytest.raises(BucketStateLayoutError):
        BucketState.open(url, view, 1)

    state = convert_state(url, view, 1)
    assert (state.seqno, state.time) == (2, 1)
    ref = view.operator()
    ref.step(1, *(updates(d, s) for d, s in zip(data, schemas)))
    again = BucketState.open(url, view, 1)
    assert contents(again) == exported(ref)
    assert not old_parts & set(open_blob(url).list_keys("view/parts/"))  # the old runs' parts are deleted
    assert set(open_blob(url).list_keys("view/parts/")) == again.referenced()
    assert convert_state(url, view, 1).seqno == 2  # converted once: as it is
    # ... and steps on as the operator does.
    snapshot = {n: again.contents(0, n) for n, _ in view.states()}
    nxt = [[(1, 7, 2, -1), (3, 1, 2, 1)], [(1, "c", 2, 1)]][:len(view.inputs)]
    deltas = [updates(d, s) for d, s in zip(nxt, schemas)]
    out, _ = step_bucket(view, snapshot, 1, deltas, 2)
    assert rows(out) == rows(ref.step(2, *deltas))


def test_a_state_bucketed_view_wrote_in_the_integrated_input_layout_is_refused(tmp_path):
    import json

    from colmz.storage.base import VersionedData
    from colmz.storage.url import open_location

    view = bucketed_view("SELECT k, sum(v) AS s FROM t GROUP BY k", SQL_SCHEMAS)
    old_view = {"kind": "sum", "inputs": [[["k", "int64"], ["v", "int64"]]], "keys": [["k"]],
                "aggregates": [["agg1", "Sum", "v"]], "on": [], "names": [],
                "project": [["k", "k"], ["agg1", "s"]]}  # as the first layout's describe() wrote it
    loc = open_location(str(tmp_path))
    record = {"view": old_view, "buckets": 1, "time": 1, "runs": {}}
    assert loc.consensus.compare_and_set("view/state", None, VersionedData(1, json.dumps(record).encode()))
    with pytest.raises(BucketStateLayoutError, match="'integrated-input'"):
        BucketState.open(str(tmp_path), view, 1)
    with pytest.raises(BucketStateLayoutError, match="bucketed_view made from SQL .* build the state again"):
        convert_state(str(tmp_path), view, 1)
    assert loc.consensus.head("view/state").seqno == 1  # unchanged


@pytest.mark.parametrize("kind", ["sum", "join"])
def test_a_bucket_restored_from_its_state_steps_only_the_delta(monkeypatch, kind):
    """The operator is filled from its state collections, never stepped over them: the rows
    the operator steps are the delta's (a work counter on the operator's step)."""
    from colmz.dataflow import AccumulableReduce, DeltaJoin

    U = {"uk": pa.int64(), "w": pa.string()}
    view = sum_view(T, ["k"], {"s": Sum("v")}) if kind == "sum" else join_view(T, U, [("k", "uk")])
    first = [updates([(k % 10, k, 1, 1) for k in range(100)], T)]
    if kind == "join":
        first.append(updates([(k, str(k), 1, 1) for k in range(10)], U))
    _, state = step_bucket(view, None, None, first, 1)
    stepped = []
    cls = AccumulableReduce if kind == "sum" else DeltaJoin
    real = cls.step

    def counted(self, time, *deltas):
        stepped.append(sum(len(d) for d in deltas))
        return real(self, time, *deltas)

    monkeypatch.setattr(cls, "step", counted)
    delta = [updates([(3, 1000, 2, 1)], T)] + ([colmz.Updates.empty(U)] if kind == "join" else [])
    out, _ = step_bucket(view, state, 1, delta, 2)
    assert stepped == [1]  # the one delta row; the state's 100 (+10) rows were never stepped
    ref = view.operator()
    ref.step(1, *first)
    assert rows(out) == rows(ref.step(2, *delta))


@pytest.mark.spark
@pytest.mark.parametrize("how", ["join_view", "sql"])
def test_a_join_step_reads_the_touched_keys_not_the_buckets_state(spark, tmp_path, how):
    """The work counter: a join bucket's task reads the arranged rows of the keys its delta
    touches (a part or two per run per key: parts of 8 rows here), not the bucket's 500
    arranged rows; a compaction reads the collection whole, once; outputs and committed
    state equal the in-process DeltaJoin's (the rendered plan's, from SQL) throughout."""
    U = {"uk": pa.int64(), "w": pa.string()}
    if how == "join_view":
        view = join_view(T, U, [("k", "uk")])
        ref = view.operator()
        ref_step = ref.step
        ref_ops = [ref]
    else:
        view = bucketed_view("SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.uk", {"t": T, "u": U})
        assert view.kind == "plan" and view.join_leads()
        ref = view.operator()
        ref_step = lambda t, a, b: ref.step(t, {"t": a, "u": b})  # noqa: E731
        ref_ops = ref.operators
    url = str(tmp_path / "store")

    def step(t, dt, du, compact_runs=100):
        state = BucketState.open(url, view, 1)
        out = step_buckets(spark, state, [spark.createDataFrame(dt, SPARK_T),
                                          spark.createDataFrame(du, "uk long, w string, time long, diff long")], t,
                           compact_runs=compact_runs, part_rows=8)
        assert rows(out) == rows(ref_step(t, updates(dt, T), updates(du, U))), t
        assert contents(BucketState.open(url, view, 1)) == {
            st.name: rows(st.delta((), 0)) for st in operator_states_of(ref_ops)}, t
        return state.rows_read

    first_t = [(k, v, 1, 1) for k in range(100) for v in range(4)]
    first_u = [(k, f"w{k}", 1, 1) for k in range(100)]
    assert step(1, first_t, first_u) == 0
    held = len(first_t) + len(first_u)  # 500 arranged rows in the one bucket
    # keys 5 (t changes: u looked up) and 77 (u changes: t looked up), a NULL key, a new key
    read = step(2, [(5, 100, 2, 1), (None, 1, 2, 1)], [(77, "q", 2, 1), (1000, "n", 2, 1)])
    assert 0 < read <= 2 * 2 * 8 + 2 * 2 * 8, read  # two keys, two parts each, in two arrangements
    read = step(3, [(5, 100, 3, -1), (77, 1, 3, 1)], [(77, "q", 3, -1)])
    assert 0 < read <= 2 * (2 * 2 * 8) + 8, read  # and the step-2 runs' parts
    assert read < held // 10
    # a compaction (the third run of each touched collection) reads it whole
    read = step(4, [(6, 1, 4, 1)], [(6, "z", 4, 1)], compact_runs=3)
    assert read >= held, read
    read = step(5, [(6, 1, 5, -1), (40, 9, 5, 1)], [], compact_runs=100)
    assert 0 < read <= 4 * 8, read
    state = BucketState.open(url, view, 1)
    assert set(open_blob(url).list_keys(state.prefix)) == state.referenced()


def catalog_of(views: dict, tables: dict) -> colmz.Catalog:
    """An in-process catalog holding ``tables`` (name -> column DDL) and the materialized
    ``views`` (name -> SQL): the oracle a bucketed view's accumulated output equals."""
    cat = colmz.Catalog()
    for name, columns in tables.items():
        cat.execute(f"CREATE TABLE {name} ({columns})")
    for name, query in views.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
    return cat


MIN_MAX = "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k"


def min_max_reads(spark, url: str, groups: int) -> list[int]:
    """The state rows each one-row step of :data:`MIN_MAX` reads, its one bucket holding
    ``groups`` groups of 4 rows (parts of 8 rows), each step's accumulated output checked
    against the catalog's view and its committed state against the in-process operator's."""
    view = bucketed_view(MIN_MAX, {"t": T})
    cat = catalog_of({"mm": MIN_MAX}, {"t": "k BIGINT, v BIGINT"})
    ref = view.operator()
    total, reads = [], []
    steps = [
        [(k, v, 1) for k in range(groups) for v in range(4)],
        [(5, -1, 1)],                    # a new min
        [(5, -1, -1)],                   # the min retracted: group 5 re-reduced from its rows
        [(7, 3, -1)],                    # the max retracted
        [(9, 1, -1)],                    # a row that is no extreme
        [(None, 4, 1), (None, 8, 1)],    # a NULL group
        [(None, 4, -1)],                 # its min retracted: its rows looked up
    ]
    for t, data in enumerate(steps, 1):
        delta = [(k, v, t, d) for k, v, d in data]
        state = BucketState.open(url, view, 1)
        out = step_buckets(spark, state, [spark.createDataFrame(delta, SPARK_T)], t, compact_runs=100, part_rows=8)
        cat.append("t", updates(delta, T), time=t)
        ref.step(t, {"t": updates(delta, T)})
        total.append(out)
        assert rows(colmz.concat(total)) == rows(cat.read("mm")), (groups, t)
        assert contents(BucketState.open(url, view, 1)) == {
            st.name: rows(st.delta((), 0)) for st in operator_states_of(ref.operators)}, (groups, t)
        reads.append(state.rows_read)
    assert (None, 8, 8, 1) in rows(cat.read("mm"))  # the NULL group re-reduced from its looked-up rows
    return reads


@pytest.mark.spark
def test_a_min_max_step_reads_the_touched_groups_not_the_buckets_rows(spark, tmp_path):
    """The work counter: a min/max bucket's task reads the rows of the groups its delta
    touches (a part of 8 rows per run around them), not the bucket's rows: the same rows
    read per one-row step -- a new extreme, a retracted extreme (its group re-reduced from
    its rows), a retracted other row, a NULL group -- whether the one bucket holds 50
    groups or 500; outputs equal the catalog's view, the committed state the in-process
    operator's, throughout."""
    assert bucketed_view(MIN_MAX, {"t": T}).group_leads() == {"1.arranged": ((0,), 0)}
    small, big = (min_max_reads(spark, str(tmp_path / f"store{g}"), g) for g in (50, 500))
    assert small[0] == big[0] == 0
    assert small == big, (small, big)
    # a part (8 rows) of the first run around the group, and each later run's rows
    assert all(0 < r <= 8 + 8 for r in big[1:5]), big
    assert max(big) <= 24 < 500 * 4 // 50, big
