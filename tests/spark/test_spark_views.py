"""``colmz.spark.views``: the sum and join views stepped per key bucket on local Spark, each
step's output and committed state compared with the in-process operators'."""

from __future__ import annotations

import contextlib
import random
from collections import Counter

import pyarrow as pa
import pytest

import colmz
from colmz.dataflow import Avg, Count, Sum
from colmz.spark.views import (
    BucketState,
    BucketStateConflict,
    bucketed_view,
    join_view,
    step_bucket,
    step_buckets,
    sum_view,
)
from colmz.storage.url import open_blob

T = {"k": pa.int64(), "v": pa.int64()}
SPARK_T = "k long, v long, time long, diff long"


def rows(u: colmz.Updates) -> list:
    return sorted(((*r[:-2], r[-1]) for r in colmz.consolidate(u).to_pylist()), key=repr)


def random_delta(rng: random.Random, held: Counter, t: int, keys=(1, 2, 3, 4, 5, None)) -> list:
    """Inserts and retractions (of rows ``held`` holds only), as ``(k, v, t, diff)``."""
    out = []
    for _ in range(rng.randint(1, 6)):
        if held and rng.random() < 0.35:
            row = rng.choice(sorted(held, key=repr))
            out.append((*row, t, -1))
            held[row] -= 1
            if not held[row]:
                del held[row]
        else:
            row = (rng.choice(keys), rng.randint(-5, 20))
            out.append((*row, t, 1))
            held[row] += 1
    return out


def updates(data: list, schema: dict) -> colmz.Updates:
    names = list(schema)
    return colmz.Updates({n: pa.array([r[i] for r in data], schema[n]) for i, n in enumerate(names)},
                         time=[r[-2] for r in data], diff=[r[-1] for r in data])


def contents(state: BucketState, i: int) -> list:
    parts = [state.contents(b, i) for b in range(state.buckets)]
    return rows(colmz.concat(parts))


def test_step_bucket_is_the_operator_rebuilt_from_its_state():
    view = sum_view(T, ["k"], {"s": Sum("v"), "c": Count()})
    op = view.operator()
    old = updates([(1, 5, 1, 1), (1, 7, 1, 1), (2, 3, 1, 1)], T)
    op.step(1, old)
    delta = updates([(1, 5, 2, -1), (3, 1, 2, 1)], T)
    assert rows(step_bucket(view, [old], 1, [delta], 2)) == rows(op.step(2, delta))
    with pytest.raises(ValueError, match="time 1 is not after the state's time 1"):
        step_bucket(view, [old], 1, [delta], 1)


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


def test_bucketed_view_reads_the_sum_and_join_shapes_from_sql():
    schemas = {"t": T, "u": {"k": pa.int64(), "w": pa.string()}}
    for bad, why in [("SELECT k, max(v) AS m FROM t GROUP BY k", "non-accumulable"),
                     ("SELECT count(*) AS n FROM t", "no GROUP BY"),
                     ("SELECT k FROM t WHERE v > 1", "MapFilter at its root"),
                     ("SELECT t.k FROM t LEFT JOIN u ON t.k = u.k", "not an inner equi-join")]:
        with pytest.raises(ValueError, match=why):
            bucketed_view(bad, schemas)


@pytest.mark.spark
@pytest.mark.parametrize("query", [
    "SELECT sum(v) AS s, k AS key, avg(v) AS a FROM t GROUP BY k",
    "SELECT u.w, t.v, t.k FROM t JOIN u ON u.k = t.k",
])
def test_a_view_from_sql_per_bucket_equals_its_rendered_plan(spark, tmp_path, query):
    from colmz.dataflow.plan import plan, render

    U = {"k": pa.int64(), "w": pa.string()}
    schemas = {"t": T, "u": U}
    view = bucketed_view(query, schemas)
    ref = render(plan(query, schemas))
    url = str(tmp_path / "store")
    rng = random.Random(3)
    held_t: Counter = Counter()
    for t in range(1, 4):
        dt = random_delta(rng, held_t, t)
        du = [(rng.choice([1, 2, 3]), rng.choice("xy"), t, 1)]
        frames = [spark.createDataFrame(dt, SPARK_T)]
        deltas = {"t": updates(dt, T)}
        if view.kind == "join":
            frames.append(spark.createDataFrame(du, "k long, w string, time long, diff long"))
            deltas["u"] = updates(du, U)
        out = step_buckets(spark, BucketState.open(url, view, 2), frames, t)
        assert rows(out) == rows(ref.step(t, deltas)), (query, t)


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
        assert contents(again, 0) == sorted(((*r, n) for r, n in held.items()), key=repr)
        assert max(len(again.runs(b, 0)) for b in range(3)) < 3  # compacted at 3 runs

    # A step failing in one bucket (a retraction of a row never inserted) commits nothing
    # and deletes the parts the other buckets wrote.
    state = BucketState.open(url, view, 3)
    before = (state.seqno, state.time, contents(state, 0), state.referenced())
    bad = [(k, 1, 5, 1) for k in (1, 2, 3, 4, 5)] + [(99, 99, 5, -1)]
    with pytest.raises(Exception, match="NegativeMultiplicity|retracts rows"):
        step_buckets(spark, state, [spark.createDataFrame(bad, SPARK_T)], 5, owner="failedstep")
    again = BucketState.open(url, view, 3)
    assert (again.seqno, again.time, contents(again, 0), again.referenced()) == before
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
    assert state.seqno == 1 and contents(state, 0) == [(1, 2, 1), (2, 3, 1)]
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
        assert contents(again, 1) == sorted(((*r, n) for r, n in held_u.items()), key=repr)


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
    assert contents(state, 0) == [(1, 2, 1), (1, 9, 1), (2, 1, 1), (2, 3, 1)]
    ref.step(3, updates(third, T))  # it committed: the reference takes it too
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
    assert contents(state, 0) == [(1, 2, 1), (2, 3, 1)]
    second = [(1, 7, 2, 1)]
    out = step_buckets(spark, state, [spark.createDataFrame(second, SPARK_T)], 2)
    assert rows(out) == rows(ref.step(2, updates(second, T)))
