"""Views kept by delta rules (``colmz.dataflow``): one-row change, beside DuckDB recomputing.

Two views over ``t(k bigint, v bigint)`` of ``n`` rows in ``n / 10``
groups and ``u(uk bigint, w bigint)`` of ``n / 10`` rows, one per key:

* ``sum``: ``SELECT k, sum(v), count(*) FROM t GROUP BY k`` -- ``AccumulableReduce``;
* ``join``: ``SELECT * FROM t JOIN u ON t.k = u.uk`` -- ``DeltaJoin``.

Each view's output goes through ``ViewSink`` (a ``Correction`` into a ``MemoryCollection``).
A change is one row inserted into or deleted from ``t`` at a random key (alternating), one
time per change. Read side by side:

* ``track_step_us`` -- the operator's ``step`` for the change (median of :data:`CHANGES`);
* ``track_sink_us`` -- the sink's ``step`` writing the operator's output (median);
* ``track_step_max_us`` -- the slowest of those steps (a merge of the arrangement's runs
  lands on some step: merges are not fueled yet);
* ``track_duckdb_recompute_ms`` -- DuckDB (native tables) inserting the row and recomputing
  the view into a temporary table, the naive baseline (median of :data:`RECOMPUTES`);
* ``track_matches_duckdb`` -- 1 when the maintained view equals DuckDB's answer after the
  changes (a benchmark of a wrong answer is no benchmark).

``IvmBulk.track_bulk_step_ms`` times a 1 % change (``n / 100`` rows inserted into ``t`` at one
time) through the operator, beside the same DuckDB recompute; ``IvmMinMax`` deletes the
current minimum of a 10 k-row group (``MinMaxReduce`` re-reduces that group).

Targets: view maintenance <= 1 ms at 10 M rows, growth 10 k -> 10 M <= 1.5x; a
1 % bulk change <= 30 % of DuckDB recomputing; min/max deleting the extreme of a 10 k-row
group <= 5 ms.
Run one shape by hand: ``python asv_benchmarks/bench_ivm.py 1000000 sum``.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

SEED = 20_240_601
#: One-row changes timed per shape, after :data:`WARM` untimed ones.
CHANGES = 200
WARM = 20
#: DuckDB recomputes timed per shape.
RECOMPUTES = 7

T = {"k": pa.int64(), "v": pa.int64()}
U = {"uk": pa.int64(), "w": pa.int64()}
QUERIES = {
    "sum": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k",
    "join": "SELECT * FROM t JOIN u ON t.k = u.uk",
}


def tables(n: int):
    """``t`` and ``u`` as Arrow tables (deterministic)."""
    rng = np.random.default_rng(SEED)
    groups = max(n // 10, 1)
    t = pa.table({"k": rng.integers(0, groups, n), "v": rng.integers(0, 1000, n)})
    u = pa.table({"uk": np.arange(groups, dtype=np.int64), "w": np.arange(groups, dtype=np.int64)})
    return t, u


def at(table: pa.Table, time_: int, diff=None):
    import colmz

    n = table.num_rows
    d = np.ones(n, np.int64) if diff is None else np.asarray(diff, np.int64)
    return colmz.Updates({c: table.column(c) for c in table.column_names}, time=np.full(n, time_, np.uint64),
                         diff=d)


class Pipeline:
    """One view's operator and sink, built over ``t`` (and ``u``) at time 0."""

    def __init__(self, view: str, t: pa.Table, u: pa.Table):
        import colmz
        from colmz.dataflow import AccumulableReduce, Count, DeltaJoin, Sum, ViewSink

        self.view = view
        if view == "sum":
            self.op = AccumulableReduce(T, ["k"], {"s": Sum("v"), "c": Count()})
            out = self.op.step(0, at(t, 0))
        else:
            self.op = DeltaJoin([T, U], on=[("k", "uk")])
            out = self.op.step(0, at(t, 0), at(u, 0))
        self.sink = ViewSink(self.op.schema)
        self.sink.step(0, out)
        self.empty_u = colmz.Updates.empty(U)

    def step(self, t: int, delta):
        if self.view == "sum":
            return self.op.step(t, delta)
        return self.op.step(t, delta, self.empty_u)


def changes(n: int, count: int):
    """``count`` one-row changes of ``t``: insert a row, then delete it, at random keys."""
    rng = np.random.default_rng(SEED + 1)
    groups = max(n // 10, 1)
    rows = []
    for _ in range(count // 2):
        row = pa.table({"k": [int(rng.integers(0, groups))], "v": [int(rng.integers(0, 1000))]})
        rows.append((row, 1))
        rows.append((row, -1))
    return rows


def measure(view: str, n: int) -> dict:
    """The figures of one shape (what the ``track_*`` methods report)."""
    import duckdb

    import colmz
    import colmz.rows

    colmz.warmup()
    t, u = tables(n)
    p = Pipeline(view, t, u)
    steps, sinks = [], []
    for i, (row, d) in enumerate(changes(n, WARM + CHANGES)):
        delta = at(row, i + 1, [d])
        a = time.perf_counter()
        out = p.step(i + 1, delta)
        b = time.perf_counter()
        p.sink.step(i + 1, out)
        c = time.perf_counter()
        if i >= WARM:
            steps.append(b - a)
            sinks.append(c - b)
    last = p.sink.collection.upper - 1
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.register("t_in", t)
    con.register("u_in", u)
    con.execute("CREATE TABLE t AS SELECT * FROM t_in")
    con.execute("CREATE TABLE u AS SELECT * FROM u_in")
    held = colmz.rows.expand(p.sink.collection.snapshot(last))
    got = sorted(zip(*[held.column(c).to_pylist() for c in held.column_names]))
    want = sorted(tuple(r) for r in con.execute(QUERIES[view]).fetchall())
    recompute = []
    for i in range(RECOMPUTES):
        a = time.perf_counter()
        con.execute("INSERT INTO t VALUES (?, ?)", [i % max(n // 10, 1), 1])
        con.execute(f"CREATE OR REPLACE TEMP TABLE v AS {QUERIES[view]}")
        recompute.append(time.perf_counter() - a)
    return {
        "step_us": 1e6 * float(np.median(steps)),
        "sink_us": 1e6 * float(np.median(sinks)),
        "step_max_us": 1e6 * float(np.max(steps)),
        "duckdb_recompute_ms": 1e3 * float(np.median(recompute)),
        "matches": int(got == want),
    }


class IvmOneRowChange:
    # 10 M rows (the target size) build in tens of seconds: run it by hand.
    params = [["sum", "join"], [10_000, 100_000, 1_000_000]]
    param_names = ["view", "n"]
    number = 1
    repeat = 1
    timeout = 1800

    def setup(self, view, n):
        self.figures = measure(view, n)

    def track_step_us(self, view, n):
        return self.figures["step_us"]

    track_step_us.unit = "us"

    def track_sink_us(self, view, n):
        return self.figures["sink_us"]

    track_sink_us.unit = "us"

    def track_step_max_us(self, view, n):
        return self.figures["step_max_us"]

    track_step_max_us.unit = "us"

    def track_duckdb_recompute_ms(self, view, n):
        return self.figures["duckdb_recompute_ms"]

    track_duckdb_recompute_ms.unit = "ms"

    def track_matches_duckdb(self, view, n):
        return self.figures["matches"]


#: Bulk changes timed per shape.
BULKS = 5


def measure_bulk(view: str, n: int) -> float:
    """Median milliseconds of the operator's step for a change of ``n / 100`` inserted rows."""
    import colmz

    colmz.warmup()
    t, u = tables(n)
    p = Pipeline(view, t, u)
    rng = np.random.default_rng(SEED + 2)
    b = max(n // 100, 1)
    times = []
    for i in range(1, BULKS + 1):
        rows = pa.table({"k": rng.integers(0, max(n // 10, 1), b), "v": rng.integers(0, 1000, b)})
        delta = at(rows, i)
        a = time.perf_counter()
        p.step(i, delta)
        times.append(time.perf_counter() - a)
    return 1e3 * float(np.median(times))


def measure_extreme(group: int = 10_000) -> float:
    """Median milliseconds of a ``MinMaxReduce`` step deleting its group's current minimum."""
    import colmz
    from colmz.dataflow import Max, Min, MinMaxReduce

    colmz.warmup()
    m = MinMaxReduce(T, ["k"], {"lo": Min("v"), "hi": Max("v")})
    m.step(0, colmz.Updates({"k": np.zeros(group, np.int64), "v": np.arange(group, dtype=np.int64)},
                            time=np.zeros(group, np.uint64), diff=np.ones(group, np.int64)))
    times = []
    for i in range(1, 12):
        delta = colmz.Updates({"k": [0], "v": [i - 1]}, time=[i], diff=[-1])
        a = time.perf_counter()
        m.step(i, delta)
        times.append(time.perf_counter() - a)
    return 1e3 * float(np.median(times))


class IvmBulk:
    params = [["sum", "join"], [100_000, 1_000_000]]
    param_names = ["view", "n"]
    number = 1
    repeat = 1
    timeout = 1800

    def track_bulk_step_ms(self, view, n):
        return measure_bulk(view, n)

    track_bulk_step_ms.unit = "ms"


class IvmMinMax:
    number = 1
    repeat = 1

    def track_delete_extreme_of_10k_group_ms(self):
        return measure_extreme()

    track_delete_extreme_of_10k_group_ms.unit = "ms"


if __name__ == "__main__":
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    views = sys.argv[2:] or ["sum", "join"]
    for v in views:
        f = measure(v, n)
        print(f"{v:5s} n={n:>9,}: step {f['step_us']:.0f} us (max {f['step_max_us']:.0f}), sink {f['sink_us']:.0f} us, "
              f"DuckDB recompute {f['duckdb_recompute_ms']:.2f} ms, matches {f['matches']}")
        print(f"{v:5s} n={n:>9,}: 1 % bulk change ({max(n // 100, 1):,} rows) step {measure_bulk(v, n):.1f} ms")
    print(f"min/max deleting the minimum of a 10,000-row group: {measure_extreme():.2f} ms")
