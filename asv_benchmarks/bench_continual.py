"""asv benchmarks for ``colmz.ContinualTask``: the UPSERT task, side by side.

Workload: ``rows`` appended rows ``(key, val)`` of ``int64`` in 1000 times (``rows / 1000`` per
time), keys drawn from ``rows / 10`` values, fixed seed. The task is upstream's UPSERT
example (two statements: ``DELETE`` the keys seen, ``INSERT`` each key's max value). Three
ways to the same final state:

* ``time_continual_task``: the colmz task catching up over all the times in one ``run``: it
  evaluates runs of times as batches, one DuckDB query per statement per batch;
* ``time_continual_task_stepwise``: the task run after every time (a batch of one time each:
  the time-by-time path, what a deployment that runs at every commit pays);
* ``time_naive_recompute``: at every time, the final-state query over the whole log so far
  (recompute from history; quadratic in the number of times);
* ``time_one_query``: that query once over the whole log (the batch lower bound).

The input is written before the clock starts (its cost is the table's, not the task's).
``track_per_time_ms`` / ``track_per_time_stepwise_ms`` are the task's mean cost per time and
``track_duckdb_floor_ms`` what DuckDB alone costs per time at that size (registering the two
Arrow tables and running the two statements' queries): the floor of a design that runs the
statements once per time. Targets: per time <= 2 ms at 1,000 rows per time; >= 20x the naive
recompute; within 5x of the one-query lower bound. ``python bench_continual.py ROWS`` prints
every figure from one process (the ratios of one run).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

N_TIMES = 1000
SEED = 11

UPSERT = [
    "DELETE FROM upsert WHERE key IN (SELECT key FROM append_only)",
    "INSERT INTO upsert SELECT key, max(val) FROM append_only GROUP BY key",
]
# The UPSERT task's final state from the whole log: per key, the max value of the latest
# time that holds the key ("last batch wins").
FINAL = """
SELECT key, max(val) AS val FROM (
    SELECT key, val, time, max(time) OVER (PARTITION BY key) AS last FROM log
) WHERE time = last GROUP BY key
"""


def make_log(rows: int, n_times: int = N_TIMES):
    rng = np.random.default_rng(SEED)
    keys = rng.integers(0, max(rows // 10, 1), rows).astype(np.int64)
    vals = rng.integers(0, 1_000_000, rows).astype(np.int64)
    times = np.repeat(np.arange(1, n_times + 1, dtype=np.uint64), rows // n_times)
    times = np.concatenate([times, np.full(rows - len(times), n_times, np.uint64)])
    return keys, vals, times


def batches(keys, vals, times):
    import colmz

    cuts = np.flatnonzero(np.diff(times)) + 1
    bounds = [0, *cuts.tolist(), len(times)]
    return [
        (int(times[a]), colmz.Updates({"key": keys[a:b], "val": vals[a:b]}, time=times[a:b],
                                      diff=np.ones(b - a, np.int64)))
        for a, b in zip(bounds[:-1], bounds[1:])
    ]


def make_input(parts):
    """The input collection holding every time of ``parts`` (built before timing)."""
    from colmz.continual import MemoryCollection

    inp = MemoryCollection({"key": pa.int64(), "val": pa.int64()})
    for t, u in parts:
        inp.compare_and_append(u, inp.upper, t + 1)
    return inp


class Prefix:
    """``inp`` as complete only below ``upper`` (set by the caller): a growing input."""

    def __init__(self, inp, upper: int):
        self.inp, self.upper = inp, upper
        self.schema, self.since = inp.schema, inp.since

    def snapshot(self, as_of):
        return self.inp.snapshot(as_of)

    def updates(self, lower, upper):
        return self.inp.updates(lower, upper)


def run_task(inp, stepwise: bool = False):
    from colmz.continual import ContinualTask

    schema = {"key": pa.int64(), "val": pa.int64()}
    src = Prefix(inp, 1) if stepwise else inp
    task = ContinualTask("upsert", {"append_only": src}, UPSERT, columns=schema, as_of=0)
    if stepwise:
        for t in range(1, inp.upper):
            src.upper = t + 1
            task.run()
    else:
        task.run()
    return task


def run_naive(con, table, times):
    for t in np.unique(times):
        con.register("log", table.filter(pa.compute.less_equal(table.column("time"), pa.scalar(int(t), pa.uint64()))))
        con.sql(FINAL).fetchall()
        con.unregister("log")


def run_one_query(con, table):
    con.register("log", table)
    out = con.sql(FINAL).fetchall()
    con.unregister("log")
    return out


class ContinualUpsert:
    params = [[20_000, 1_000_000]]
    param_names = ["rows"]
    timeout = 1800
    number = 1
    repeat = 1

    def setup(self, rows):
        import pyarrow.compute  # noqa: F401 - used through pa.compute

        import colmz
        from colmz.sql import connect

        colmz.warmup()
        self.keys, self.vals, self.times = make_log(rows)
        self.inp = make_input(batches(self.keys, self.vals, self.times))
        self.table = pa.table({"key": self.keys, "val": self.vals, "time": self.times})
        self.con = connect()

    def time_continual_task(self, rows):
        run_task(self.inp)

    def time_continual_task_stepwise(self, rows):
        run_task(self.inp, stepwise=True)

    def time_naive_recompute(self, rows):
        run_naive(self.con, self.table, self.times)

    def time_one_query(self, rows):
        run_one_query(self.con, self.table)

    def track_per_time_ms(self, rows):
        t0 = time.perf_counter()
        run_task(self.inp)
        return (time.perf_counter() - t0) / N_TIMES * 1000

    track_per_time_ms.unit = "ms"

    def track_per_time_stepwise_ms(self, rows):
        t0 = time.perf_counter()
        run_task(self.inp, stepwise=True)
        return (time.perf_counter() - t0) / N_TIMES * 1000

    track_per_time_stepwise_ms.unit = "ms"

    def track_duckdb_floor_ms(self, rows):
        # What DuckDB alone costs per time: registering one time's input and an output of
        # the final state's size, and the two statements' queries, fetched as Arrow.
        con, n = self.con, len(self.keys) // N_TIMES
        inp = self.table.slice(0, n).select(["key", "val"])
        out = pa.table(dict(zip(["key", "val"], map(pa.array, zip(*run_one_query(con, self.table))))))
        t0 = time.perf_counter()
        for _ in range(50):
            con.register("append_only", inp)
            con.register("upsert", out)
            con.sql(UPSERT[0].replace("DELETE FROM upsert WHERE", "SELECT * FROM upsert WHERE")).to_arrow_table()
            con.sql(UPSERT[1].replace("INSERT INTO upsert ", "")).to_arrow_table()
            con.unregister("append_only")
            con.unregister("upsert")
        return (time.perf_counter() - t0) / 50 * 1000

    track_duckdb_floor_ms.unit = "ms"

    def track_final_state_matches(self, rows):
        # 1 when the task's final state equals the one-query answer (a benchmark of a wrong
        # answer is no benchmark).
        task = run_task(self.inp)
        got = sorted((r[0], r[1]) for r in task.output.snapshot(N_TIMES).to_pylist())
        want = sorted(run_one_query(self.con, self.table))
        return int(got == want)


if __name__ == "__main__":
    import sys

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    b = ContinualUpsert()
    b.setup(rows)

    def clock(f):
        t0 = time.perf_counter()
        f(rows)
        return time.perf_counter() - t0

    one = clock(b.time_one_query)
    batched = clock(b.time_continual_task)
    stepwise = clock(b.time_continual_task_stepwise)
    naive = clock(b.time_naive_recompute)
    floor = b.track_duckdb_floor_ms(rows)
    ok = b.track_final_state_matches(rows)
    print(f"rows={rows} times={N_TIMES} rows/time={rows // N_TIMES} final state matches: {bool(ok)}")
    print(f"continual task, batched : {batched:8.3f} s  {batched / N_TIMES * 1e3:7.3f} ms/time")
    print(f"continual task, stepwise: {stepwise:8.3f} s  {stepwise / N_TIMES * 1e3:7.3f} ms/time")
    print(f"naive recompute         : {naive:8.3f} s  {naive / N_TIMES * 1e3:7.3f} ms/time")
    print(f"one batch query         : {one:8.3f} s")
    print(f"DuckDB floor, one query pair per time: {floor:7.3f} ms/time")
    print(f"batched: {naive / batched:.1f}x faster than naive, {batched / one:.2f}x the one query")
    print(f"stepwise: {naive / stepwise:.1f}x faster than naive, {stepwise / one:.2f}x the one query")
