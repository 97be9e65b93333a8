"""colmz.spark.continual_task equals colmz.Catalog on random key-local programs, per key
bucket and on the driver; bad definitions and input are refused before any job."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import colmz
from colmz.spark.continual import continual_task, define_task

pytestmark = pytest.mark.spark

TABLE = "CREATE TABLE t (k BIGINT, v BIGINT);\n"

# Statements that only touch output rows whose key has an input row at the time.
INSERTS = [
    "INSERT INTO o SELECT k, v FROM t",
    "INSERT INTO o SELECT k, v FROM t WHERE v > {c}",
    "INSERT INTO o SELECT k, max(v) FROM t GROUP BY k",
    "INSERT INTO o SELECT k, v + {c} FROM t",
    "INSERT INTO o SELECT t.k, o.v FROM t JOIN o ON t.k = o.k",
]
DELETES = [
    "DELETE FROM o WHERE k IN (SELECT k FROM t)",
    "DELETE FROM o WHERE k IN (SELECT k FROM t) AND v < {c}",
    "DELETE FROM o WHERE k IN (SELECT k FROM t WHERE v > {c})",
]


@st.composite
def programs(draw):
    body = []
    if draw(st.booleans()):
        body.append(draw(st.sampled_from(DELETES)).format(c=draw(st.integers(0, 5))))
    for _ in range(draw(st.integers(1, 2))):
        body.append(draw(st.sampled_from(INSERTS)).format(c=draw(st.integers(0, 5))))
    task = "CREATE CONTINUAL TASK o (k BIGINT, v BIGINT) ON INPUT t AS (\n  " + ";\n  ".join(body) + ")"
    rows = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.integers(1, 6)),
                         min_size=0, max_size=25))
    return TABLE + task, rows


def oracle(sql: str, rows) -> Counter:
    cat = colmz.Catalog()
    cat.execute(sql)
    for t in sorted({r[2] for r in rows}):
        at = [r for r in rows if r[2] == t]
        cat.append("t", colmz.Updates({"k": [r[0] for r in at], "v": [r[1] for r in at]},
                                      time=[t] * len(at), diff=[1] * len(at)), time=t)
    out = cat.task("o").output
    return Counter({(k, v, t): d for k, v, t, d in out.updates(0, out.upper).to_pylist() if d})


def collected(df) -> Counter:
    c: Counter = Counter()
    for r in df.collect():
        c[(r[0], r[1], r["time"])] += r["diff"]
    return Counter({key: d for key, d in c.items() if d})


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_equals_catalog_on_random_programs(spark, program):
    sql, rows = program
    df = spark.createDataFrame([(k, v, t, 1) for k, v, t in rows], "k long, v long, time long, diff long")
    want = oracle(sql, rows)
    assert collected(continual_task(None, sql, df, partition_by=["k"], buckets=3)) == want
    assert collected(continual_task(None, sql, df)) == want


def test_input_table_from_a_catalog(spark, tmp_path):
    cat = colmz.Catalog(str(tmp_path / "cat"))
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    task = "CREATE CONTINUAL TASK o ON INPUT t AS (INSERT INTO o SELECT k, v * 2 FROM t)"
    df = spark.createDataFrame([(1, 2, 1, 1), (1, 3, 2, 1)], "k long, v long, time long, diff long")
    want = oracle(TABLE + task, [(1, 2, 1), (1, 3, 2)])
    assert want == Counter({(1, 4, 1): 1, (1, 6, 2): 1})
    assert collected(continual_task(cat, task, df, partition_by="k")) == want
    assert collected(continual_task(str(tmp_path / "cat"), task, df)) == want


def test_bad_definitions_and_input(spark):
    df = spark.createDataFrame([(1, 2, 0, 1)], "k long, v long, time long, diff long")
    task = "CREATE CONTINUAL TASK o ON INPUT t AS (INSERT INTO o SELECT k, v FROM t)"
    with pytest.raises(ValueError, match="not created in sql"):
        define_task(None, task)
    with pytest.raises(ValueError, match="exactly one CREATE CONTINUAL TASK"):
        define_task(None, TABLE)
    with pytest.raises(ValueError, match="may read only its input"):
        define_task(None, TABLE + "CREATE TABLE r (k BIGINT);" + task)
    with pytest.raises(ValueError, match="partition_by"):
        continual_task(None, TABLE + task, df, partition_by=["x"])
    with pytest.raises(colmz.spark.InputError, match="time < 1"):
        continual_task(None, TABLE + task, df)


def write_time_files(d, rows, cuts) -> None:
    """Input rows as Parquet files, file ``i`` holding the times in ``(cuts[i-1], cuts[i]]``
    (increasing mtimes fix the micro-batch order)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(d, exist_ok=True)
    lo = 0
    for i, hi in enumerate(cuts):
        part = [r for r in rows if lo < r[2] <= hi]
        lo = hi
        t = pa.table({"k": pa.array([r[0] for r in part], pa.int64()), "v": pa.array([r[1] for r in part], pa.int64()),
                      "time": pa.array([r[2] for r in part], pa.int64()), "diff": pa.array([1] * len(part), pa.int64())})
        p = os.path.join(d, f"part-{i:04d}.parquet")
        pq.write_table(t, p)
        os.utime(p, (1e9 + i, 1e9 + i))


def history(store: str) -> Counter:
    from colmz.spark.continual import task_output

    return Counter({(k, v, t): d for k, v, t, d in task_output(store, "o").to_pylist() if d})


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True))
def test_streaming_task_equals_catalog(spark, tmp_path_factory, program, cuts):
    sql, rows = program
    d = tmp_path_factory.mktemp("ct")
    cuts = sorted(cuts) + [6]
    write_time_files(str(d / "in"), rows, cuts)
    df = (spark.readStream.schema("k long, v long, time long, diff long")
          .option("maxFilesPerTrigger", 1).parquet(str(d / "in")))
    q = continual_task(None, sql, df, store=str(d / "store"), checkpoint=str(d / "ck"), available_now=True)
    q.awaitTermination()
    assert history(str(d / "store")) == oracle(sql, rows)


def test_streaming_task_replays_exactly_once(spark, tmp_path, monkeypatch):
    from colmz.catalog import Catalog
    from colmz.spark.continual import task_batch_writer

    sql = TABLE + ("CREATE CONTINUAL TASK o (k BIGINT, v BIGINT) ON INPUT t AS (\n"
                   "  DELETE FROM o WHERE k IN (SELECT k FROM t);\n"
                   "  INSERT INTO o SELECT k, max(v) FROM t GROUP BY k)")
    rows = [(1, 5, 1), (2, 3, 1), (1, 7, 2), (2, 1, 3), (1, 2, 4), (3, 3, 4), (1, 9, 5)]
    schema = "k long, v long, time long, diff long"
    b0 = spark.createDataFrame([(*r[:2], r[2], 1) for r in rows if r[2] <= 2], schema)
    b1 = spark.createDataFrame([(*r[:2], r[2], 1) for r in rows if r[2] > 2], schema)
    store, ckpt = str(tmp_path / "store"), str(tmp_path / "ck")
    seen = []
    fn = task_batch_writer(None, sql, b0.schema, store, ckpt, maintain_every=0, on_batch=seen.append)
    fn(b0, 0)
    fn(b0, 0)  # Spark's retry of a batch whose commit log entry was lost: nothing applied
    assert [f["times"] for f in seen] == [2, 0] and seen[1]["skipped"] == 2
    # batch 1 crashes after its first time (3) was committed
    real = Catalog.append
    calls = []

    def flaky(self, *a, **kw):
        calls.append(kw.get("time"))
        if len(calls) == 2:
            raise OSError("killed")
        return real(self, *a, **kw)

    monkeypatch.setattr(Catalog, "append", flaky)
    with pytest.raises(OSError, match="killed"):
        fn(b1, 1)
    monkeypatch.setattr(Catalog, "append", real)
    assert history(store) != oracle(sql, rows)  # half a batch
    fn(b1, 1)  # the replay applies only times 4 and 5
    assert seen[-1]["skipped"] == 1 and seen[-1]["times"] == 2
    assert history(store) == oracle(sql, rows)
    # a new checkpoint-less writer on the same checkpoint: late rows are refused, nothing written
    with pytest.raises(colmz.spark.InputError, match="at or before"):
        fn(spark.createDataFrame([(4, 4, 5, 1)], schema), 2)
    assert history(store) == oracle(sql, rows)
    # an older batch id than the checkpoint's is another query's
    with pytest.raises(Exception, match="another query"):
        fn(b0, 0)
