"""``Distinct``'s state (``colmz.dataflow.distinct``): the bytes its arrangement holds under
bulk steps, and the merge work of one-row steps while its oldest run is being merged."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

import colmz
import colmz.rows
from colmz.dataflow import Distinct
from colmz.dataflow.accumulable import Accumulators
from colmz.dataflow.fueled import SPACE_FACTOR

VIEWS = {"d": "SELECT DISTINCT k FROM t", "s": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k"}


def _bytes_ratio(cat: colmz.Catalog, name: str) -> float:
    """The view's arrangements' bytes (runs and key indexes, as EXPLAIN and bench_ivm count
    them) over the Arrow bytes of the data columns they hold."""
    held = arrow = 0
    for a in cat.object(name).maintained.arrangements():
        held += a.nbytes + getattr(a, "index_nbytes", 0)
        if isinstance(a, Accumulators):  # one row per group: the view's own rows
            rows = cat.read(name)
        else:
            rows = a.base.snapshot() if getattr(a, "shared", False) else a.snapshot()
        arrow += sum(rows.column(c).nbytes for c in rows.column_names)
    return held / arrow


def test_a_distinct_views_arrangements_stay_within_twice_their_arrow_bytes_under_bulk_steps():
    # bench_ivm's shape at 50 k rows: t(k, v) in 5 000 groups, then 1 % bulk inserts into
    # existing groups, their retractions and 1 % bulk deletes of the initial rows. The
    # distinct's counts were two words a row (exactly 2x the key column's Arrow bytes) and the
    # runs the bulk steps left unmerged came on top (2.85x after five steps at 100 k rows).
    n, groups = 50_000, 5_000
    rng = np.random.default_rng(3)
    t = pa.table({"k": rng.integers(0, groups, n), "v": rng.integers(0, 1000, n)})
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.append("t", t)
    for name, body in VIEWS.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {name} WITH (INCREMENTAL = 'require') AS {body}")
    m = n // 100
    batches = [pa.table({"k": rng.integers(0, groups, m), "v": rng.integers(0, 1000, m)}) for _ in range(12)]
    deletes = [t.slice(i * m, m) for i in range(12)]
    steps = [(b, 1) for b in batches] + [(b, -1) for b in batches] + [(b, -1) for b in deletes]
    worst = {name: _bytes_ratio(cat, name) for name in VIEWS}
    runs = 0
    for b, sign in steps:
        cat.append("t", colmz.Updates({"k": b.column("k"), "v": b.column("v")}, time=np.zeros(m, np.uint64),
                                      diff=np.full(m, sign, np.int64)), time=cat.now + 1)
        for name in VIEWS:
            worst[name] = max(worst[name], _bytes_ratio(cat, name))
        runs = max(runs, cat.object("d").maintained.arrangements()[0].runs)
    assert worst["d"] <= 2.0 and worst["s"] <= 2.0, worst
    assert runs >= 2  # bulk steps did leave runs to merge later (the ratio counted them)
    for name, body in VIEWS.items():  # and the views are right
        held = colmz.rows.expand(cat.read(name))
        want = cat.sql(body)
        assert sorted(zip(*[held.column(c).to_pylist() for c in held.column_names])) == sorted(
            zip(*[want.column(c).to_pylist() for c in want.column_names]))


def test_one_row_steps_stay_bounded_while_the_oldest_run_is_merged():
    # 20 000 keys, then 6 000 one-row steps changing their counts: the runs they make climb
    # to the oldest run's layer (an eighth of its rows, colmz.dataflow.fueled's Space) and
    # merge into it, a little per step. Each step reads at most min_fuel times the scale of
    # the merges in progress (the oldest run's at most SPACE_FACTOR // 2 + 1) plus what it
    # coalesces, never the 20 000-row run at once.
    n = 20_000
    d = Distinct({"k": pa.int64()})
    d.step(0, colmz.Updates({"k": np.arange(n)}, time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64)))
    a = d.arrangement
    rng = np.random.default_rng(8)
    counts = np.ones(n, np.int64)
    merged_before, oldest = a.rows_merged, a.state_runs()[0].serial
    for t in range(1, 6001):
        k = int(rng.integers(0, n))
        diff = -1 if counts[k] > 1 and t % 2 else 1
        counts[k] += diff
        out = d.step(t, colmz.Updates({"k": [k]}, time=[t], diff=[diff]))
        assert len(out) == 0  # a count above 0 stays above 0
    assert a.state_runs()[0].serial != oldest  # the oldest run was merged (a little per step)
    assert len(a.state_runs()[0].diff) == n
    assert a.max_step_merged <= 1024 * (SPACE_FACTOR // 2 + 1) + 2 * 1024, a.max_step_merged  # (any step's)
    assert (a.rows_merged - merged_before) / 6000 <= 2 * SPACE_FACTOR + 4 + 15  # amortised: a constant + log n
    assert a.counts([pa.array(np.arange(n))]).tolist() == counts.tolist()
