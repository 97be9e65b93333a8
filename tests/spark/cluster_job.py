"""A sink run on ``local-cluster[2,1,1024]``: two executor JVMs, as on a real cluster.

Run by ``test_cluster.py`` in its own process (one process can hold only one SparkContext).
Prints one JSON line: what the executors' Python workers saw, the sink's summary, and the
task-retry check.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator

import pyarrow as pa


def main(workdir: str) -> dict:
    import colmz.spark
    from colmz.spark import cli
    from colmz.spark.session import worker_pid_env

    # The run's kernel cache when it has one (scripts/test warms it), so the driver loads the
    # kernels instead of compiling all of them again; what is checked is that the executors
    # get the driver's cache directory, whichever it is.
    cache = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(workdir, "numba-cache")
    spark = colmz.spark.session("local-cluster[2,1,1024]", "colmz-cluster-test", numba_cache_dir=cache)
    driver_jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())

    # 1. the executors' Python workers: interpreter, environment, parent JVM
    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import time

        for _ in batches:
            pass
        time.sleep(1.0)  # keep both executors busy so tasks spread over them
        env = {k: str(v) for k, v in worker_pid_env().items()}
        env["ppid"] = str(os.getppid())
        yield pa.RecordBatch.from_pylist([env])

    schema = ("pid string, python string, PYSPARK_PYTHON string, NUMBA_CACHE_DIR string, "
              "NUMBA_NUM_THREADS string, ppid string")
    workers = [r.asDict() for r in spark.range(8, numPartitions=4).mapInArrow(probe, schema).collect()]

    # 2. the sink job end to end (the CLI reuses this session)
    out = io.StringIO()
    store = os.path.join(workdir, "store")
    argv = ["sink", "--store", store, "--ticks", "60", "--example-events", "50000", "--verify-ticks", "4",
            "--json", "--quiet"]
    status = cli.main(argv, out=out)
    summary = json.loads(out.getvalue().strip().splitlines()[-1]) if status == 0 else None
    out2 = io.StringIO()
    rerun = json.loads(out2.getvalue().strip()) if cli.main(argv, out=out2) == 0 else None

    # 3. a task whose first attempt fails after emitting rows: the store must hold them once
    from colmz.spark.events import EventsSpec, desired_updates, example_events

    events = example_events(spark, 50_000, ticks=40, seed=3)
    desired = desired_updates(events, EventsSpec(("customer", "region"), "plan"))
    corrections = colmz.spark.sink(desired, None, range(40), data=["customer", "region", "plan"])

    def flaky(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        yield from batches
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            raise RuntimeError("first attempt dies after writing its run")

    from collections import Counter

    from colmz.arrangement.runs import WrittenRun
    from colmz.spark.arrangement_io import RUN_SCHEMA, part_list, partition_runs, read_parts_local

    url = os.path.join(workdir, "retry-store")
    schema = {"customer": pa.int64(), "region": pa.string(), "plan": pa.string()}
    arr = colmz.Arrangement.open(url, schema=schema)
    # the run writer's tasks, the first attempt of one dying after its parts are written
    write = partition_runs(url, arr.schema, prefix=arr.prefix, seqno=arr.seqno)
    rows = corrections.mapInArrow(write, RUN_SCHEMA).mapInArrow(flaky, RUN_SCHEMA).collect()
    arr.append_runs([WrittenRun.from_dict(r.asDict()) for r in rows], seal=40)

    def consolidated(items) -> Counter:
        c: Counter = Counter()
        for *data, time, diff in items:
            c[(*data, time)] += diff
        return Counter({k: d for k, d in c.items() if d})

    table = read_parts_local(url, arr.schema, part_list(arr))
    stored = consolidated(tuple(d.values()) for d in table.to_pylist())
    direct = consolidated(tuple(r) for r in corrections.select(*schema, "time", "diff").collect())
    spark.stop()
    return {
        "driver_python": sys.executable,
        "driver_jvm": driver_jvm,
        "cache": cache,
        "workers": workers,
        "status": status,
        "summary": summary,
        "rerun": rerun,
        "retry_rows_stored": len(stored),
        "retry_rows_direct": len(direct),
        "retry_equal": stored == direct,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
