"""Spark reads an arrangement's current contents from ``Arrangement.parts()`` alone, with
``spark.read.parquet``, and gets what ``Arrangement.read()`` gives (after consolidation)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import colmz
from colmz.arrangement import Arrangement

pytestmark = pytest.mark.spark

SCHEMA = {"k": pa.string(), "n": pa.int64()}


def ups(rows) -> colmz.Updates:
    k, n, t, d = zip(*rows)
    return colmz.Updates({"k": pa.array(k, pa.string()), "n": pa.array(n, pa.int64())},
                         time=np.array(t, np.uint64), diff=np.array(d, np.int64))


def spark_contents(spark, a: Arrangement) -> Counter:
    from pyspark.sql import functions as F

    frames = []
    for kind in ("trace", "unsealed"):
        parts = [p for p in a.parts() if p.kind == kind]
        if parts:
            # Spark has no unsigned type: Parquet's uint64 ``time`` reads as decimal(20,0).
            df = spark.read.parquet(*[p.url for p in parts])
            frames.append(df.where(F.col("time") >= F.lit(parts[0].min_time)))
    df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    rows = (df.withColumn("time", F.greatest(F.col("time"), F.lit(a.since())).cast("long"))
            .groupBy("k", "n", "time").agg(F.sum("diff").alias("diff"))
            .where(F.col("diff") != 0)
            .collect())
    return Counter({(r["k"], r["n"], r["time"]): r["diff"] for r in rows})


def test_spark_reads_parts_as_read_does(spark, tmp_path):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, fan_in=2, part_rows=2)
    for t in range(6):
        a.write(ups([(f"k{i}", i % 2, t, 1 if (i + t) % 3 else -1) for i in range(4)]))
        a.seal(t + 1)
        if t % 2:
            a.maintain()
    a.advance_since(3)
    a.write(ups([("z", 0, 9, 1), ("k1", 1, 8, 1)]))
    assert {p.kind for p in a.parts()} == {"trace", "unsealed"}
    expected = Counter({(k, n, t): d for k, n, t, d in a.read().to_pylist()})
    assert expected and spark_contents(spark, a) == expected
