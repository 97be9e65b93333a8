"""``colmz.spark.frames`` (consolidate, snapshot, bucket_columns) and the grouped functions of
``colmz.spark.grouped`` they run, against in-process colmz."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import colmz
import colmz.spark
from colmz.spark.frames import bucket_columns
from colmz.spark.grouped import consolidate_fn, snapshot_fn

pytestmark = pytest.mark.spark


def _norm(v):
    # Compare floats with colmz's equality: NaN = NaN, -0.0 = 0.0.
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return v + 0.0
    return v


def _rows(rows) -> list[tuple]:
    return sorted((tuple(_norm(v) for v in r) for r in rows), key=repr)


@pytest.fixture(scope="module")
def updates_path(tmp_path_factory):
    """Mixed-type updates with NULLs, NaN, -0.0, duplicates and cancellations."""
    rng = np.random.default_rng(7)
    n = 3000
    s = rng.choice(np.array(["x", "y", "zz", ""], dtype=object), n)
    s[rng.random(n) < 0.1] = None
    f = rng.choice(np.array([0.0, -0.0, 1.5, np.nan]), n)
    i = rng.integers(-3, 4, n)
    i_null = rng.random(n) < 0.1
    table = pa.table({
        "s": pa.array(s.tolist(), pa.string()),
        "f": pa.array(f, pa.float64()),
        "i": pa.array(i, pa.int64(), mask=i_null),
        "time": pa.array(rng.integers(0, 20, n), pa.int64()),
        "diff": pa.array(rng.integers(-2, 3, n), pa.int64()),
    })
    path = tmp_path_factory.mktemp("upd") / "u.parquet"
    pq.write_table(table, path, row_group_size=500)
    return str(path), table


def _expected(table, since=None, upper=None):
    u = colmz.Updates.from_arrow(table)
    rows = colmz.consolidate(u, since=since).to_pylist()
    return _rows(r for r in rows if upper is None or r[-2] < upper)


@pytest.mark.parametrize(("since", "upper"), [(None, None), (5, None), (None, 12), (8, 15), (10, 10)])
def test_consolidate_matches_colmz(spark, updates_path, since, upper):
    path, table = updates_path
    df = spark.read.parquet(path).repartition(3)
    out = colmz.spark.consolidate(df, since=since, upper=upper, partial=True)
    assert out.columns == ["s", "f", "i", "time", "diff"]
    assert _rows(out.collect()) == _expected(table, since, upper)


def test_consolidate_default_and_more_buckets(spark, updates_path):
    path, table = updates_path
    df = spark.read.parquet(path)
    out = colmz.spark.consolidate(df, data=["s", "f", "i"], buckets=5)
    assert _rows(out.collect()) == _expected(table)


def test_consolidate_subset_of_columns_and_renamed(spark):
    df = spark.createDataFrame(
        [("a", 1, 0, 1, 9), ("a", 1, 0, -1, 9), ("b", 2, 3, 2, 9), ("b", 2, 3, 1, 9)],
        "k string, v long, t int, d int, extra long",
    )
    out = colmz.spark.consolidate(df, data=["k", "v"], time="t", diff="d")
    assert out.columns == ["k", "v", "t", "d"]
    assert sorted(out.collect()) == [("b", 2, 3, 3)]


def test_snapshot_matches_colmz(spark, updates_path):
    path, table = updates_path
    df = spark.read.parquet(path)
    for as_of in (0, 7, 19, 40):
        got = _rows(colmz.spark.snapshot(df, as_of).collect())
        assert got == _expected(table, since=as_of, upper=as_of + 1)
        assert all(r[-2] == as_of and r[-1] != 0 for r in got)


def test_grouped_functions(spark, updates_path):
    path, table = updates_path
    df = spark.read.parquet(path)
    want = _expected(table)
    # applyInArrow, grouped by a hash bucket of the data columns
    gf = consolidate_fn(df.schema)
    by_bucket = df.groupBy(bucket_columns(df, ["s", "f", "i"], 4)).applyInArrow(*gf)
    assert _rows(by_bucket.collect()) == want
    # mapInArrow over a DataFrame already partitioned by the data
    parted = df.repartition(3, *bucket_columns(df, ["s", "f", "i"]))
    assert _rows(parted.mapInArrow(*gf).collect()) == want
    # snapshot as a grouped function
    snap = df.groupBy(bucket_columns(df, ["s", "f", "i"], 2)).applyInArrow(*snapshot_fn(df.schema, 9))
    assert _rows(snap.collect()) == _expected(table, since=9, upper=10)


def test_pandas_form(spark):
    # pandas form: integer data without NULLs keeps its type through pandas.
    rng = np.random.default_rng(3)
    n = 2000
    pdf = {"k": rng.integers(0, 50, n).tolist(), "time": rng.integers(0, 9, n).tolist(),
           "diff": rng.integers(-1, 2, n).tolist()}
    df = spark.createDataFrame(list(zip(*pdf.values())), "k long, time long, diff long")
    gf = consolidate_fn(df.schema, ["k"], form="pandas", since=3)
    got = sorted(df.groupBy("k").applyInPandas(*gf).collect())
    u = colmz.Updates({"k": np.array(pdf["k"])}, time=pdf["time"], diff=pdf["diff"])
    assert got == sorted(colmz.consolidate(u, since=3).to_pylist())


def test_iterator_forms_are_selected(spark):
    # pyspark picks the iterator forms from the type hints; without them a generator would
    # get the whole group as one table/DataFrame.
    from pyspark.sql.pandas.typehints import (
        infer_group_arrow_eval_type_from_func,
        infer_group_pandas_eval_type_from_func,
    )
    from pyspark.util import PythonEvalType

    schema = spark.range(1).selectExpr("id as k", "0L as time", "1L as diff").schema
    arrow = consolidate_fn(schema).fn
    pandas = consolidate_fn(schema, form="pandas").fn
    assert infer_group_arrow_eval_type_from_func(arrow) == PythonEvalType.SQL_GROUPED_MAP_ARROW_ITER_UDF
    assert infer_group_pandas_eval_type_from_func(pandas) == PythonEvalType.SQL_GROUPED_MAP_PANDAS_ITER_UDF


def test_column_errors(spark):
    df = spark.createDataFrame([("a", "1", 1)], "k string, time string, diff long")
    with pytest.raises(TypeError, match="time column 'time' has type string"):
        colmz.spark.consolidate(df)
    df = spark.createDataFrame([("a", 1, 1)], "k string, t long, diff long")
    with pytest.raises(colmz.spark.ColumnMissingError, match="time column 'time' is not in"):
        colmz.spark.consolidate(df)
    with pytest.raises(colmz.spark.ColumnMissingError, match="data column 'nope'"):
        colmz.spark.consolidate(df, data=["nope"], time="t")
    arr = spark.createDataFrame([([1], 1, 1)], "k array<int>, time long, diff long")
    with pytest.raises(TypeError, match="data column 'k' has type array<int>"):
        colmz.spark.consolidate(arr)
    ok = spark.createDataFrame([("a", 1, 1)], "k string, time long, diff long")
    # one statement of the time range on Spark, for every out-of-range bound
    for kw, v in (("since", -1), ("upper", 2**63), ("upper", 2**64 - 1), ("since", 2**64)):
        with pytest.raises(ValueError, match=rf"{kw} must be a time in \[0, 2\*\*63-1\] on Spark"):
            colmz.spark.consolidate(ok, **{kw: v})
    with pytest.raises(ValueError, match="buckets must be a positive int"):
        colmz.spark.consolidate(ok, buckets=0)
    with pytest.raises(ValueError, match="form must be"):
        consolidate_fn(ok.schema, form="polars")


def test_check_update_values(spark):
    df = spark.createDataFrame([("a", -1, 1), ("b", None, 1), ("c", 2, None)], "k string, time long, diff long")
    with pytest.raises(colmz.spark.InputError) as e:
        colmz.spark.check_update_values(df)
    msg = str(e.value)
    assert "1 row(s) with negative time" in msg and "NULL time" in msg and "NULL diff" in msg
    good = spark.createDataFrame([("a", 1, 1)], "k string, time long, diff long")
    assert colmz.spark.check_update_values(good) == 1


def test_workers_get_the_environment(spark):
    import os
    import sys

    from colmz.spark.session import worker_pid_env

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        env = worker_pid_env()
        yield pa.RecordBatch.from_pylist([{k: str(v) for k, v in env.items()}])

    schema = "pid string, python string, PYSPARK_PYTHON string, NUMBA_CACHE_DIR string, NUMBA_NUM_THREADS string"
    rows = spark.range(4, numPartitions=2).mapInArrow(probe, schema).collect()
    for r in rows:
        assert r.python == sys.executable
        assert os.environ["NUMBA_CACHE_DIR"] == r.NUMBA_CACHE_DIR
        assert r.NUMBA_NUM_THREADS == "1"
