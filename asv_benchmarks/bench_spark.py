"""asv benchmarks for ``colmz.spark``, each beside its Spark SQL alternative.

Read the ratios (``track_ratio_*``, measured in one process, best of two each):

* ``SparkConsolidate``: ``colmz.spark.consolidate`` vs Spark SQL ``groupBy(k, time).sum(diff)``
  + non-zero filter on the same cached rows -- the reference workload of ``common.py``
  (``n // 4`` distinct int64 keys, 1000 times, diffs +-1; shape ``distinct``) and the same keys
  with each key at one time (shape ``repeats``: every ``(k, time)`` about 4 times, where
  consolidation before the shuffle can pay) and ``n // 64`` keys each at one time (shape
  ``churn``: every ``(k, time)`` about 64 times, mostly cancelling). Target: <= 0.8x Spark
  SQL's time.
* ``SparkSink``: the sink over 1000 ticks on the generated events vs a Spark SQL job per tick
  (a sample of ticks, scaled to 1000) and vs computing all updates at once in Spark SQL
  (+1 at ``valid_from``, -1 at ``valid_to``; plain and consolidated). Targets: >= 30x faster
  than a job per tick, within 5x of all at once.
* ``SparkColdStart``: a fresh Python interpreter on an executor importing colmz and running its
  first consolidation, with a warm and with an empty Numba cache (per-worker cold start).

Sizes: ``COLMZ_BENCH_SPARK_N`` (comma-separated, default ``1000000``; the issue's target is
``10000000``) and ``COLMZ_BENCH_SPARK_EVENTS`` (default ``200000``; target ``1000000``). Every
benchmark skips itself when pyspark or Java is missing. Run::

    asv run --python=same --quick --show-stderr --bench bench_spark
    COLMZ_BENCH_SPARK_N=10000000 COLMZ_BENCH_SPARK_EVENTS=1000000 asv run --python=same --bench bench_spark
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from .common import spark_session

SIZES = [int(x) for x in os.environ.get("COLMZ_BENCH_SPARK_N", "1000000").split(",")]
EVENTS = [int(x) for x in os.environ.get("COLMZ_BENCH_SPARK_EVENTS", "200000").split(",")]
TICKS = 1000
PER_TICK_SAMPLE = 5

def _session():
    return spark_session()


def _noop(df) -> None:
    """Run ``df`` to the end without collecting it (Spark's ``noop`` sink)."""
    df.write.format("noop").mode("overwrite").save()


def _best(fn, repeat: int = 2) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def updates_frame(spark, n: int, shape: str):
    """The reference workload as a cached DataFrame ``k, time, diff`` (deterministic)."""
    from pyspark.sql import functions as F

    def h(salt):
        return F.xxhash64(F.col("id"), F.lit(salt))

    k = F.pmod(h(1), F.lit(max(n // (64 if shape == "churn" else 4), 1)))
    if shape == "distinct":
        t = F.pmod(h(2), F.lit(1000))
    elif shape in ("repeats", "churn"):
        t = F.pmod(F.xxhash64(k, F.lit(2)), F.lit(1000))  # one time per key
    else:
        raise ValueError(f"shape must be 'distinct', 'repeats' or 'churn', got {shape!r}")
    df = spark.range(n).select(k.alias("k"), t.alias("time"), (F.pmod(h(3), F.lit(2)) * 2 - 1).alias("diff"))
    df = df.cache()
    df.count()
    return df


class SparkConsolidate:
    params = [SIZES, ["distinct", "repeats", "churn"]]
    param_names = ["n", "shape"]
    timeout = 3600
    number = 1
    repeat = 2
    warmup_time = 0

    def setup(self, n, shape):
        from pyspark.sql import functions as F

        import colmz.spark

        self.spark = _session()
        self.df = updates_frame(self.spark, n, shape)
        self.colmz = lambda: _noop(colmz.spark.consolidate(self.df))
        self.colmz_partial = lambda: _noop(colmz.spark.consolidate(self.df, partial=True))
        self.sql = lambda: _noop(
            self.df.groupBy("k", "time").agg(F.sum("diff").alias("diff")).filter(F.col("diff") != 0)
        )
        self.colmz()  # Python workers started, kernels loaded

    def teardown(self, n, shape):
        self.df.unpersist()

    def time_colmz_consolidate(self, n, shape):
        self.colmz()

    def time_colmz_consolidate_partial(self, n, shape):
        self.colmz_partial()

    def time_spark_sql_groupby(self, n, shape):
        self.sql()

    def track_ratio_colmz_over_sql(self, n, shape):
        return _best(self.colmz) / _best(self.sql)

    track_ratio_colmz_over_sql.unit = "ratio"

    def track_ratio_colmz_partial_over_sql(self, n, shape):
        return _best(self.colmz_partial) / _best(self.sql)

    track_ratio_colmz_partial_over_sql.unit = "ratio"


class SparkSink:
    params = [EVENTS]
    param_names = ["events"]
    timeout = 3600
    number = 1
    repeat = 2
    warmup_time = 0

    def setup(self, n):
        from pyspark.sql import functions as F

        import colmz.spark
        from colmz.spark.events import EventsSpec, desired_updates, example_events

        self.spark = spark = _session()
        self.events = example_events(spark, n, ticks=TICKS).cache()
        self.events.count()
        spec = EventsSpec(("customer", "region"), "plan")
        data = spec.data
        desired = desired_updates(self.events, spec)
        self.sink = lambda: _noop(colmz.spark.sink(desired, None, range(TICKS), data=data))
        self.all_at_once = lambda: _noop(desired)
        self.all_at_once_consolidated = lambda: _noop(
            desired.filter(F.col("time") < TICKS).groupBy(*data, "time")
            .agg(F.sum("diff").alias("diff")).filter(F.col("diff") != 0)
        )
        self.events.createOrReplaceTempView("colmz_bench_events")
        step = TICKS // PER_TICK_SAMPLE
        self.sample = [step // 2 + i * step for i in range(PER_TICK_SAMPLE)]

        def per_tick_sample():
            for t in self.sample:
                _noop(spark.sql(
                    "SELECT customer, region, plan, COUNT(*) AS n FROM colmz_bench_events "
                    f"WHERE valid_from <= {t} AND {t} < valid_to GROUP BY customer, region, plan"
                ))

        self.per_tick_sample = per_tick_sample
        self.sink()  # Python workers started, kernels loaded

    def teardown(self, n):
        self.events.unpersist()

    def time_sink_1000_ticks(self, n):
        self.sink()

    def time_sql_per_tick_sample(self, n):
        self.per_tick_sample()

    def track_sql_per_tick_scaled_to_1000(self, n):
        return _best(self.per_tick_sample) / PER_TICK_SAMPLE * TICKS

    track_sql_per_tick_scaled_to_1000.unit = "s"

    def time_sql_all_at_once(self, n):
        self.all_at_once()

    def time_sql_all_at_once_consolidated(self, n):
        self.all_at_once_consolidated()

    def track_ratio_per_tick_sql_over_sink(self, n):
        per_tick = _best(self.per_tick_sample) / PER_TICK_SAMPLE * TICKS
        return per_tick / _best(self.sink)

    track_ratio_per_tick_sql_over_sink.unit = "ratio"

    def track_ratio_sink_over_all_at_once(self, n):
        return _best(self.sink) / _best(self.all_at_once)

    track_ratio_sink_over_all_at_once.unit = "ratio"

    def track_ratio_sink_over_all_at_once_consolidated(self, n):
        return _best(self.sink) / _best(self.all_at_once_consolidated)

    track_ratio_sink_over_all_at_once_consolidated.unit = "ratio"


_COLD_START = (
    "import time; t0 = time.perf_counter(); import numpy as np; import colmz; "
    "from colmz.spark.batches import stream_consolidate; "
    "u = colmz.Updates({'k': np.arange(100) % 7}, time=np.arange(100) % 3, diff=np.ones(100, np.int64)); "
    "colmz.consolidate(u); print(time.perf_counter() - t0)"
)


def _worker_cold_start(cache_dir: str | None) -> float:
    """Seconds for a fresh interpreter on an executor to import colmz and consolidate once."""
    from collections.abc import Iterator

    import pyarrow as pa

    spark = _session()
    code = _COLD_START

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        env = dict(os.environ)
        tmp = None
        if cache_dir is None:
            tmp = tempfile.mkdtemp(prefix="colmz-cold-")
            env["NUMBA_CACHE_DIR"] = tmp
        try:
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        yield pa.RecordBatch.from_pylist([{"s": float(r.stdout.strip())}])

    rows = spark.range(1, numPartitions=1).mapInArrow(probe, "s double").collect()
    return rows[0].s


class SparkColdStart:
    timeout = 600
    number = 1
    repeat = 1

    def setup(self):
        _session()

    def track_worker_cold_start_warm_cache(self):
        return _worker_cold_start("warm")

    track_worker_cold_start_warm_cache.unit = "s"

    def track_worker_cold_start_empty_cache(self):
        return _worker_cold_start(None)

    track_worker_cold_start_empty_cache.unit = "s"
