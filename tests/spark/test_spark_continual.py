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
