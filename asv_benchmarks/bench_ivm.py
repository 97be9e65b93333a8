"""Views kept by delta rules (``colmz.dataflow``): the operators alone, and the whole matrix
through ``colmz.Catalog``, beside the recompute path and DuckDB recomputing.

Tables: ``t(k bigint, v bigint)`` of ``n`` rows in ``n / 10`` groups, ``u(uk bigint, w
bigint)`` of ``n / 10`` rows, one per key (:func:`tables`, deterministic).

Operators alone (``IvmOneRowChange``, ``IvmBulk``, ``IvmMinMax``): the sum view's
``AccumulableReduce`` and the join's ``DeltaJoin``, each output through a ``ViewSink``; one row
inserted into or deleted from ``t`` per step:

* ``track_step_us`` / ``track_sink_us`` -- the operator's / the sink's ``step`` (medians);
* ``track_step_max_us`` -- the slowest step;
* ``track_duckdb_recompute_ms`` -- DuckDB inserting the row and recomputing the view;
* ``track_matches_duckdb`` -- 1 when the view equals DuckDB's answer after the changes;
* ``IvmBulk.track_bulk_step_ms`` -- a 1 % change (``n / 100`` rows at one time);
* ``IvmMinMax`` -- ``MinMaxReduce`` deleting the current minimum of a 10 k-row group.

Through the catalog (``IvmCatalog``): the views of :data:`VIEWS` -- sum, join, min/max,
distinct, top-k (``DISTINCT ON``), window, outer join -- each ``WITH (INCREMENTAL =
'require')``, at every size of :data:`SIZES` (10 M with ``COLMZ_BENCH_10M=1``), for the
changes of :data:`CHANGE_KINDS`: one row inserted, one row of the initial table deleted, one
updated (its old row out, the new one in), 1 % of ``n`` rows inserted -- each committed alone
by ``Catalog.append``. Per cell:

* ``track_view_maintenance_ms`` -- in memory, the commit with the view minus the same commit
  without it (lower quartiles, :data:`QUANTILE`, over commits interleaved between the two
  catalogs; every timed figure of the matrix is a lower quartile);
* ``track_commit_ms`` / ``track_commit_without_view_ms`` / ``track_commit_max_ms``;
* ``track_recompute_path_ms`` -- the same difference with ``Catalog(views="recompute")``;
* ``track_duckdb_recompute_ms`` -- DuckDB (native tables) applying the change and recomputing
  the view into a temporary table;
* ``track_durable_view_ms`` -- a durable catalog (a temporary directory): commit with the view
  minus commit without;
* ``track_state_bytes_ratio`` -- the view's arrangements' bytes over the Arrow size of the
  columns they hold (:func:`arranged_ratio` says how each is counted);
* ``track_matches_duckdb`` -- 1 when the maintained view equals DuckDB's answer to its query
  after the changes of that kind (a benchmark of a wrong answer is no benchmark).

``setup_cache`` measures the whole matrix once, side by side, so that every figure comes from
one run on one machine state. Targets (the issue's): view maintenance <= 1 ms for the sum and
join views at 10 M rows, growth 10 k -> 10 M <= 1.5x; a 1 % bulk change <= 30 % of DuckDB
recomputing; min/max deleting the extreme of a 10 k-row group <= 5 ms; durable commit with a
view <= without + 5 ms; arrangements <= 2x the Arrow size of their columns.

By hand, a table of one size: ``python asv_benchmarks/bench_ivm.py N [view ...] [--changes
insert,delete] [--no-durable] [--operators]``; the first commit after ``CREATE`` alone
(:func:`measure_first_commit`): ``python asv_benchmarks/bench_ivm.py N [view ...]
--first-commit``; with asv: ``asv run --python=same --bench bench_ivm``.

Beside other systems, on these tables and changes (:func:`all_batches`): PostgreSQL's pg_ivm
in :mod:`bench_ivm_pg`, Pathway in :mod:`bench_ivm_pathway`.
"""

from __future__ import annotations

import os
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


# ----------------------------------------------------------------------------- through the catalog

#: The views of the catalog matrix, over ``t(k, v)`` and ``u(uk, w)`` (every one maintained
#: with no Fallback: ``WITH (INCREMENTAL = 'require')``).
VIEWS = {
    "sum": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k",
    "join": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.uk",
    "minmax": "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k",
    "distinct": "SELECT DISTINCT k FROM t",
    "topk": "SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v DESC",
    "window": "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t",
    "outer": "SELECT u.uk, u.w, t.v FROM u LEFT JOIN t ON t.k = u.uk AND t.v < 500",
}
#: The changes of ``t`` each view is timed on, each committed alone (``Catalog.append``).
CHANGE_KINDS = ("insert", "delete", "update", "bulk")
#: Sizes of the matrix: 10 M rows (the target size) only with ``COLMZ_BENCH_10M=1`` (tens of
#: seconds to build each catalog, gigabytes of memory).
SIZES = [10_000, 100_000, 1_000_000] + ([10_000_000] if os.environ.get("COLMZ_BENCH_10M") == "1" else [])
#: Commits timed per change kind: in memory, through ``views="recompute"``, durable, and of
#: the 1 % bulk change.
#: The figure of a set of timed commits: their lower quartile. The machine these run on is
#: shared, and other work delays a fraction of the commits by far more than the few hundred
#: microseconds measured; the lower quartile is the commit's cost without that delay (the
#: slowest commit is reported beside it).
QUANTILE = 25
MEMORY_COMMITS = 60
RECOMPUTE_COMMITS = 3
DURABLE_COMMITS = 12
BULK_COMMITS = 3


def change_batches(n: int, kind: str, count: int, taken: set) -> list:
    """``count`` changes of ``t`` (``n`` rows at the start, :func:`tables`) of one kind, as
    Arrow tables with a ``diff`` column: ``insert`` a new row; ``delete`` a row of the
    initial table (each once: ``taken`` holds the rows used); ``update`` such a row's ``v``
    (its old row out, the new one in); ``bulk`` ``n / 100`` new rows."""
    rng = np.random.default_rng([SEED, n, CHANGE_KINDS.index(kind)])
    groups = max(n // 10, 1)
    t, _ = tables(n)
    out = []
    for _ in range(count):
        if kind in ("insert", "bulk"):
            m = max(n // 100, 1) if kind == "bulk" else 1
            out.append(pa.table({"k": rng.integers(0, groups, m), "v": rng.integers(0, 1000, m),
                                 "diff": np.ones(m, np.int64)}))
            continue
        while True:
            j = int(rng.integers(0, n))
            if j not in taken:
                taken.add(j)
                break
        k, v = t.column("k")[j].as_py(), t.column("v")[j].as_py()
        if kind == "delete":
            out.append(pa.table({"k": [k], "v": [v], "diff": [-1]}))
        else:
            out.append(pa.table({"k": [k, k], "v": [v, (v + 1) % 1000], "diff": [-1, 1]}))
    return out


def as_updates(batch: pa.Table, time_: int):
    import colmz

    m = batch.num_rows
    return colmz.Updates({"k": batch.column("k"), "v": batch.column("v")}, time=np.full(m, time_, np.uint64),
                         diff=batch.column("diff").to_numpy())


def open_catalog(n: int, view: str | None, path=None, views: str = "incremental"):
    """A catalog holding ``t`` and ``u`` of :func:`tables` (and the view ``mv`` over them)."""
    import colmz

    t, u = tables(n)
    cat = colmz.Catalog(path, views=views) if path is not None else colmz.Catalog(views=views)
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (uk BIGINT, w BIGINT)")
    cat.append("t", t)
    cat.append("u", u)
    if view is not None:
        mode = " WITH (INCREMENTAL = 'require')" if views == "incremental" else ""
        cat.execute(f"CREATE MATERIALIZED VIEW mv{mode} AS {VIEWS[view]}")
    return cat


def timed_commits(cats: list, batches: list) -> list[list[float]]:
    """Commit each batch to every catalog of ``cats`` in turn (interleaved, so that load on
    the machine falls on all alike); the seconds of each commit, per catalog."""
    times: list[list[float]] = [[] for _ in cats]
    for b in batches:
        for c, out in zip(cats, times):
            u = as_updates(b, c.now + 1)
            a = time.perf_counter()
            c.append("t", u)
            out.append(time.perf_counter() - a)
    return times


def arranged_ratio(cat) -> tuple[int, int]:
    """``(bytes of the view's arrangements, Arrow bytes of the columns they hold)``: a
    ``KeyedArrangement``'s runs and key indexes (``index_nbytes``, as EXPLAIN counts them)
    over its rows (``snapshot()``, data columns); ``Accumulators`` hold one row per group,
    counted as the view's own rows (group key and one value per aggregate)."""
    from colmz.dataflow.accumulable import Accumulators

    mv = cat.object("mv").maintained
    held = arrow = 0
    for a in mv.arrangements():
        held += a.nbytes + getattr(a, "index_nbytes", 0)
        if isinstance(a, Accumulators):
            rows = cat.read("mv")
        elif getattr(a, "shared", False):  # a SharedInput: the shared arrangement it reads
            rows = a.base.snapshot()
        else:
            rows = a.snapshot()
        arrow += sum(rows.column(c).nbytes for c in rows.column_names)
    return held, arrow


def matches(cat, view: str) -> int:
    """1 when the maintained view holds exactly what DuckDB answers to its query now."""
    import colmz.rows

    held = colmz.rows.expand(cat.read("mv"))
    got = sorted(zip(*[held.column(c).to_pylist() for c in held.column_names]), key=repr)
    want = cat.sql(VIEWS[view])
    want = sorted(zip(*[want.column(c).to_pylist() for c in want.column_names]), key=repr)
    return int(got == want)


def duckdb_recompute(n: int, view: str, batches: dict) -> dict:
    """Per change kind, the milliseconds (lower quartile) of DuckDB (native tables) applying the change
    and recomputing the view into a temporary table."""
    import duckdb

    t, u = tables(n)
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.register("t_in", t)
    con.register("u_in", u)
    con.execute("CREATE TABLE t AS SELECT * FROM t_in")
    con.execute("CREATE TABLE u AS SELECT * FROM u_in")
    out = {}
    for kind, bs in batches.items():
        times = []
        for b in bs[:RECOMPUTES]:
            con.register("b_in", b)
            a = time.perf_counter()
            con.execute("INSERT INTO t SELECT k, v FROM b_in WHERE diff > 0")
            if kind in ("delete", "update"):
                con.execute("DELETE FROM t WHERE rowid IN (SELECT min(t.rowid) FROM t, b_in "
                            "WHERE b_in.diff < 0 AND t.k = b_in.k AND t.v = b_in.v GROUP BY b_in.k, b_in.v)")
            con.execute(f"CREATE OR REPLACE TEMP TABLE v AS {VIEWS[view]}")
            times.append(time.perf_counter() - a)
            con.unregister("b_in")
        out[kind] = 1e3 * float(np.percentile(times, QUANTILE))
    con.close()
    return out


def all_batches(n: int, kinds=CHANGE_KINDS) -> dict:
    """The changes of every kind of ``kinds`` that :func:`measure_catalog` commits, by kind
    (deterministic: a side-by-side measure gives the same ones to another system)."""
    taken: set = set()
    return {k: change_batches(n, k, BULK_COMMITS if k == "bulk" else MEMORY_COMMITS, taken) for k in kinds}


def measure_catalog(view: str, n: int, durable: bool = True, kinds=CHANGE_KINDS, recompute: bool = True) -> dict:
    """Every figure of one view at ``n`` rows, per change kind (what ``IvmCatalog`` tracks).

    In memory: a catalog with the view and one without take the same commits interleaved;
    view maintenance is the difference of their lower quartiles. Then (``recompute``)
    ``Catalog(views="recompute")`` on the same commits and DuckDB recomputing, and
    (``durable``) a durable catalog with and without the view in temporary directories.
    The commits are :func:`all_batches`'s.
    """
    import colmz

    colmz.warmup()
    batches = all_batches(n, kinds)
    figures: dict = {k: {} for k in kinds}
    plain, with_view = open_catalog(n, None), open_catalog(n, view)
    held, arrow = arranged_ratio(with_view)
    for k in kinds:
        without, with_ = timed_commits([plain, with_view], batches[k])
        f = figures[k]
        f["commit_without_ms"] = 1e3 * float(np.percentile(without, QUANTILE))
        f["commit_ms"] = 1e3 * float(np.percentile(with_, QUANTILE))
        f["commit_max_ms"] = 1e3 * float(np.max(with_))
        f["view_ms"] = f["commit_ms"] - f["commit_without_ms"]
        f["matches"] = matches(with_view, view)
        f["state_bytes_ratio"] = held / arrow if arrow else float("nan")
        f["state_bytes"] = held
    del plain, with_view
    if recompute:
        again = open_catalog(n, view, views="recompute")
        plain = open_catalog(n, None)
        for k in kinds:
            without, with_ = timed_commits([plain, again], batches[k][:RECOMPUTE_COMMITS])
            figures[k]["recompute_path_ms"] = 1e3 * (float(np.percentile(with_, QUANTILE))
                                                     - float(np.percentile(without, QUANTILE)))
        del again, plain
        for k, ms in duckdb_recompute(n, view, batches).items():
            figures[k]["duckdb_recompute_ms"] = ms
    if durable:
        import shutil
        import tempfile

        dirs = [tempfile.mkdtemp(prefix="colmz_bench_ivm_") for _ in range(2)]
        try:
            plain, with_view = open_catalog(n, None, dirs[0]), open_catalog(n, view, dirs[1])
            for k in kinds:
                c = BULK_COMMITS if k == "bulk" else DURABLE_COMMITS
                without, with_ = timed_commits([plain, with_view], batches[k][:c])
                figures[k]["durable_without_ms"] = 1e3 * float(np.percentile(without, QUANTILE))
                figures[k]["durable_view_ms"] = (1e3 * float(np.percentile(with_, QUANTILE))
                                                 - figures[k]["durable_without_ms"])
            del plain, with_view
        finally:
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
    return figures


def measure_first_commit(view: str, n: int, repeats: int = 3) -> dict:
    """The first commit after ``CREATE MATERIALIZED VIEW`` (one row inserted into ``t``, in
    memory): its milliseconds with the view and, on a catalog without it, the same commit's
    (medians over ``repeats`` fresh catalogs); and the rows the view sink's correction
    consolidated in that commit (``ViewSink.rows_consolidated``, a work counter: bounded by
    the commit's change when the creation's write left the correction empty)."""
    import colmz

    colmz.warmup()
    batch = change_batches(n, "insert", 1, set())[0]
    with_, without, consolidated = [], [], []
    for _ in range(repeats):
        plain, cat = open_catalog(n, None), open_catalog(n, view)
        sink = cat.object("mv").maintained.sink
        before = sink.rows_consolidated
        for c, out in ((plain, without), (cat, with_)):
            u = as_updates(batch, c.now + 1)
            a = time.perf_counter()
            c.append("t", u)
            out.append(time.perf_counter() - a)
        consolidated.append(sink.rows_consolidated - before)
        del plain, cat
    return {"first_commit_ms": 1e3 * float(np.median(with_)),
            "first_commit_without_ms": 1e3 * float(np.median(without)),
            "first_commit_consolidated": max(consolidated)}


class IvmCatalog:
    """The matrix through ``colmz.Catalog``: every view, size and change kind in one run
    (``setup_cache`` measures them all once; each ``track_*`` reads its cell)."""

    params = [list(VIEWS), SIZES, list(CHANGE_KINDS)]
    param_names = ["view", "n", "change"]
    number = 1
    repeat = 1
    timeout = 6 * 3600

    def setup_cache(self):
        return {(v, n): measure_catalog(v, n) for n in SIZES for v in VIEWS}

    def _get(self, figures, view, n, change, key):
        return figures[(view, n)][change].get(key, float("nan"))

    def track_view_maintenance_ms(self, figures, view, n, change):
        """In memory: commit with the view minus commit without (lower quartiles)."""
        return self._get(figures, view, n, change, "view_ms")

    track_view_maintenance_ms.unit = "ms"

    def track_commit_ms(self, figures, view, n, change):
        return self._get(figures, view, n, change, "commit_ms")

    track_commit_ms.unit = "ms"

    def track_commit_without_view_ms(self, figures, view, n, change):
        return self._get(figures, view, n, change, "commit_without_ms")

    track_commit_without_view_ms.unit = "ms"

    def track_commit_max_ms(self, figures, view, n, change):
        """The slowest commit with the view (a merge of an arrangement's runs lands on one)."""
        return self._get(figures, view, n, change, "commit_max_ms")

    track_commit_max_ms.unit = "ms"

    def track_recompute_path_ms(self, figures, view, n, change):
        """``Catalog(views="recompute")``: commit with the view minus commit without."""
        return self._get(figures, view, n, change, "recompute_path_ms")

    track_recompute_path_ms.unit = "ms"

    def track_duckdb_recompute_ms(self, figures, view, n, change):
        return self._get(figures, view, n, change, "duckdb_recompute_ms")

    track_duckdb_recompute_ms.unit = "ms"

    def track_durable_view_ms(self, figures, view, n, change):
        """Durable: commit with the view minus commit without (target <= 5 ms)."""
        return self._get(figures, view, n, change, "durable_view_ms")

    track_durable_view_ms.unit = "ms"

    def track_state_bytes_ratio(self, figures, view, n, change):
        """The view's arrangements' bytes over the Arrow size of what they hold (target <= 2)."""
        return self._get(figures, view, n, change, "state_bytes_ratio")

    track_state_bytes_ratio.unit = "x"

    def track_matches_duckdb(self, figures, view, n, change):
        return self._get(figures, view, n, change, "matches")


COLUMNS = [("view", "view_ms"), ("commit", "commit_ms"), ("without", "commit_without_ms"),
           ("max", "commit_max_ms"), ("recompute path", "recompute_path_ms"),
           ("DuckDB", "duckdb_recompute_ms"), ("durable view", "durable_view_ms"),
           ("state/Arrow", "state_bytes_ratio"), ("ok", "matches")]


def table(rows: list[tuple[str, int, str, dict]]) -> str:
    """The figures as a Markdown table, one row per (view, n, change)."""
    head = "| view | n | change | " + " | ".join(h for h, _ in COLUMNS) + " |"
    out = [head, "|" + "---|" * (3 + len(COLUMNS))]
    for view, n, kind, f in rows:
        cells = []
        for _, key in COLUMNS:
            x = f.get(key)
            cells.append("-" if x is None else (f"{x:d}" if isinstance(x, int) else
                                                f"{x:.2f}" if key == "state_bytes_ratio" else f"{x:.2f}"))
        out.append(f"| {view} | {n:,} | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> None:
    """The hand-run entry point: the catalog matrix of one size as a table (module docstring)."""
    import argparse

    ap = argparse.ArgumentParser(prog="bench_ivm.py", description="colmz view maintenance, by hand")
    ap.add_argument("n", type=int, nargs="?", default=100_000)
    ap.add_argument("views", nargs="*", default=[], help=f"any of {list(VIEWS)} (default: all)")
    ap.add_argument("--changes", default=",".join(CHANGE_KINDS))
    ap.add_argument("--no-durable", action="store_true")
    ap.add_argument("--operators", action="store_true", help="also the operators alone (sum and join)")
    ap.add_argument("--first-commit", action="store_true",
                    help="only the first commit after CREATE (with and without the view)")
    a = ap.parse_args(argv)
    kinds = tuple(k for k in a.changes.split(",") if k)
    bad = [k for k in kinds if k not in CHANGE_KINDS]
    if bad:
        ap.error(f"--changes takes {list(CHANGE_KINDS)}, got {bad}")
    unknown = [v for v in a.views if v not in VIEWS]
    if unknown:
        ap.error(f"views are {list(VIEWS)}, got {unknown}")
    if a.first_commit:
        for v in a.views or list(VIEWS):
            f = measure_first_commit(v, a.n)
            print(f"{v}, n = {a.n:,}: first commit after CREATE {f['first_commit_ms']:.2f} ms "
                  f"(without the view {f['first_commit_without_ms']:.2f} ms); the sink consolidated "
                  f"{f['first_commit_consolidated']:,} rows", flush=True)
        return
    rows = []
    print("\n".join(table([]).splitlines()[:2]), flush=True)
    for v in a.views or list(VIEWS):
        f = measure_catalog(v, a.n, durable=not a.no_durable, kinds=kinds)
        rows.extend((v, a.n, k, f[k]) for k in kinds)
        print("\n".join(table(rows[-len(kinds):]).splitlines()[2:]), flush=True)
    if a.operators:
        for v in ("sum", "join"):
            if v in (a.views or list(VIEWS)):
                f = measure(v, a.n)
                print(f"operators alone, {v}: step {f['step_us']:.0f} us (max {f['step_max_us']:.0f}), sink "
                      f"{f['sink_us']:.0f} us; 1 % bulk step {measure_bulk(v, a.n):.1f} ms")
        print(f"min/max deleting the minimum of a 10,000-row group: {measure_extreme():.2f} ms")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
