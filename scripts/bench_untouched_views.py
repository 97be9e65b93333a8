"""Commit cost of a catalog with N materialized views a one-row INSERT does not touch.

A catalog with tables ``src_i`` each read by one view ``v_i`` (``SELECT k, sum(v) FROM
src_i GROUP BY k``) and a table ``t`` no view reads; each commit inserts one row into ``t``.
Durable (the default: an embedded directory store), prints per N the median commit time and
the store's work per commit (``Catalog.store_work``: entries applied, runs written). With
``--in-memory``, an in-memory catalog: the median commit time and the rollback saves' work
per commit (``Catalog.save_work``: structures kept, elements copied).

    NUMBA_CACHE_DIR=/work/main/.numba_cache flock /tmp/colmz_heavy.lock \
        .venv/bin/python scripts/bench_untouched_views.py 1 10 30 100
    NUMBA_CACHE_DIR=/work/main/.numba_cache flock /tmp/colmz_heavy.lock \
        .venv/bin/python scripts/bench_untouched_views.py --in-memory 1 10 100 1000

With ``--ddl`` (either store), per N the median time of a DDL statement followed by a one-row
INSERT into ``t`` (the commit after a DDL pays for a schedule it made stale, if any) over a
cycle of CREATE TABLE, CREATE MATERIALIZED VIEW, CREATE CONTINUAL TASK, DROP TASK, DROP VIEW
and DROP TABLE, and the schedule entries those changed per statement
(``Engine.schedule_work``).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

from colmz import Catalog


def setup(n: int, durable: bool) -> Catalog:
    """A catalog of table ``t`` and ``n`` tables ``src_i`` each read by a view ``v_i``."""
    cat = Catalog(tempfile.mkdtemp(), maintain_every=0) if durable else Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    # set up in scripts of up to 50 tables and views (a call keeps each object once)
    for lo in range(0, n, 50):
        cat.execute("; ".join(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT)" for i in range(lo, min(n, lo + 50))))
        cat.execute("; ".join(f"INSERT INTO src_{i} VALUES (1, {i})" for i in range(lo, min(n, lo + 50))))
        cat.execute("; ".join(f"CREATE MATERIALIZED VIEW v_{i} AS SELECT k, sum(v) AS s FROM src_{i} GROUP BY k"
                              for i in range(lo, min(n, lo + 50))))
    return cat


def run(n: int, commits: int = 15, durable: bool = True) -> dict:
    cat = setup(n, durable)
    work = (lambda: cat.store_work) if durable else (lambda: cat.save_work)
    keys = ("entries_applied", "runs_written") if durable else ("kept", "copied")
    before = work()
    times = []
    for j in range(commits):
        t0 = time.perf_counter()
        cat.execute(f"INSERT INTO t VALUES ({j}, {j})")
        times.append(time.perf_counter() - t0)
    after = work()
    per = {k: (after[k] - before.get(k, 0)) / commits for k in keys}
    return {"n": n, "ms": 1000 * statistics.median(times), **per}


DDL = ["CREATE TABLE z (k BIGINT, v BIGINT)",
       "CREATE MATERIALIZED VIEW zv AS SELECT k, sum(v) AS s FROM z GROUP BY k",
       "CREATE CONTINUAL TASK zt (k BIGINT) ON INPUT z AS (INSERT INTO zt SELECT k FROM z)",
       "DROP CONTINUAL TASK zt", "DROP MATERIALIZED VIEW zv", "DROP TABLE z"]


def run_ddl(n: int, cycles: int = 3, durable: bool = True) -> dict:
    cat = setup(n, durable)
    eng = cat._engine
    entries = lambda: getattr(eng, "schedule_work", {}).get("entries", 0)  # noqa: E731
    before = entries()
    times = []
    for j in range(cycles):
        for sql in DDL:
            t0 = time.perf_counter()
            cat.execute(sql)
            cat.execute(f"INSERT INTO t VALUES ({j}, {j})")
            times.append(time.perf_counter() - t0)
            eng = cat._engine  # a durable handle may have loaded a new engine
    return {"n": n, "ms": 1000 * statistics.median(times),
            "schedule entries": (entries() - before) / (cycles * len(DDL))}


if __name__ == "__main__":
    args = sys.argv[1:]
    durable = "--in-memory" not in args
    ddl = "--ddl" in args
    sizes = [int(a) for a in args if not a.startswith("--")] or ([1, 10, 30] if durable else [1, 10, 100])
    for n in sizes:
        if ddl:
            r = run_ddl(n, durable=durable)
            print(f"N={r['n']:4d}  DDL + commit {r['ms']:8.2f} ms  schedule entries/DDL "
                  f"{r['schedule entries']:7.1f}", flush=True)
            continue
        r = run(n, durable=durable)
        work = "  ".join(f"{k}/commit {v:7.1f}" for k, v in r.items() if k not in ("n", "ms"))
        print(f"N={r['n']:4d}  commit {r['ms']:8.2f} ms  {work}", flush=True)
