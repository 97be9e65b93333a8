"""Commit cost of a durable catalog with N materialized views a one-row INSERT does not touch.

A catalog (embedded directory store) with tables ``src_i`` each read by one view ``v_i``
(``SELECT k, sum(v) FROM src_i GROUP BY k``) and a table ``t`` no view reads; each commit
inserts one row into ``t``. Prints, per N, the median commit time and the store's work per
commit (``Catalog.store_work``: entries applied, runs written; the arrangements' consensus
compare-and-sets).

    NUMBA_CACHE_DIR=/work/main/.numba_cache flock /tmp/colmz_heavy.lock \
        .venv/bin/python scripts/bench_untouched_views.py 1 10 30 100
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

from colmz import Catalog


def run(n: int, commits: int = 15) -> dict:
    d = tempfile.mkdtemp()
    cat = Catalog(d, maintain_every=0)
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    for i in range(n):
        cat.execute(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT); INSERT INTO src_{i} VALUES (1, {i})")
        cat.execute(f"CREATE MATERIALIZED VIEW v_{i} AS SELECT k, sum(v) AS s FROM src_{i} GROUP BY k")
    before = cat.store_work
    times = []
    for j in range(commits):
        t0 = time.perf_counter()
        cat.execute(f"INSERT INTO t VALUES ({j}, {j})")
        times.append(time.perf_counter() - t0)
    after = cat.store_work
    per = {k: (after[k] - before.get(k, 0)) / commits for k in ("entries_applied", "runs_written", "commits")}
    return {"n": n, "ms": 1000 * statistics.median(times), **per}


if __name__ == "__main__":
    for n in map(int, sys.argv[1:] or ["1", "10", "30"]):
        r = run(n)
        print(f"N={r['n']:4d}  commit {r['ms']:8.2f} ms  entries_applied/commit {r['entries_applied']:6.1f}  "
              f"runs_written/commit {r['runs_written']:5.1f}", flush=True)
