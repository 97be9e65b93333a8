"""A durable catalog's one-row commit with a materialized view, against the same commit
without it: the durable cell of ``bench_ivm.py``'s matrix, alone and with more commits.

Two catalogs in temporary directories (``bench_ivm.open_catalog``: ``t(k, v)`` of ``n`` rows,
``u(uk, w)``), one with the view ``mv`` (``bench_ivm.VIEWS``), take the same one-row inserts
interleaved (``bench_ivm.timed_commits``): :data:`WARM` untimed, then :data:`TIMED` timed.
Printed: each catalog's lower quartile and median commit, and their differences -- the
durable cost of keeping the view (the issue's target: at most 5 ms) -- the store's work
counters, and the consensus transactions per timed commit (each one flush of the SQLite
log: the record's compare-and-set and the apply's one step). ``--profile`` runs the timed commits of the catalog with the view under cProfile
instead and prints where the time goes.

``--reopen-delete`` measures instead the retraction check of a reopened catalog: the one
with the view is closed and reopened (:data:`REOPENS` times), and :data:`DELETES` one-row
deletes of rows loaded with ``t`` (spread over the table) are timed after each -- the first,
the second, the median of the rest and of the last five -- with the table's counters: the
rows its index encoded and searched (``counts_work``), whether the deletes loaded the table
(``base loaded``) and the point lookups in its arrangement (``lookup_stats``: lookups, rows
decoded, restarts of their index).

By hand: ``python asv_benchmarks/bench_durable_commit.py N {sum,join,...} [--profile | --reopen-delete]``.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_ivm  # noqa: E402

#: Untimed commits first (the first commits after CREATE do one-time work), then timed ones.
WARM = 8
TIMED = 40
#: Reopens of ``--reopen-delete``, and the one-row deletes timed after each.
REOPENS = 3
DELETES = 30


def measure(n: int, view: str, profile: bool = False) -> str:
    """The figures (or, with ``profile``, the cProfile listing) of one shape, as text."""
    import colmz

    colmz.warmup()
    dirs = [tempfile.mkdtemp(prefix="colmz_bench_durable_") for _ in range(2)]
    try:
        plain = bench_ivm.open_catalog(n, None, dirs[0])
        with_view = bench_ivm.open_catalog(n, view, dirs[1])
        batches = bench_ivm.change_batches(n, "insert", WARM + TIMED, set())
        bench_ivm.timed_commits([plain, with_view], batches[:WARM])
        if profile:
            prof = cProfile.Profile()
            for b in batches[WARM:]:
                u = bench_ivm.as_updates(b, with_view.now + 1)
                prof.enable()
                with_view.append("t", u)
                prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(60)
            return out.getvalue()
        transactions = [c._loc.consensus.stats["commits"] for c in (with_view, plain)]  # noqa: SLF001
        without, with_ = bench_ivm.timed_commits([plain, with_view], batches[WARM:])
        per_commit = [(c._loc.consensus.stats["commits"] - t) / TIMED  # noqa: SLF001
                      for c, t in zip((with_view, plain), transactions)]

        def q(x):
            return 1e3 * float(np.percentile(x, bench_ivm.QUANTILE))

        def m(x):
            return 1e3 * float(np.median(x))

        return (f"n={n} view={view} without q25 {q(without):.2f} med {m(without):.2f}  with q25 {q(with_):.2f} "
                f"med {m(with_):.2f}  diff q25 {q(with_) - q(without):.2f} med {m(with_) - m(without):.2f}\n"
                f"store stats (with, without): {with_view._store.stats} {plain._store.stats}\n"  # noqa: SLF001
                f"consensus transactions per commit (with, without): {per_commit[0]:.2f} {per_commit[1]:.2f}")
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def measure_reopen_delete(n: int, view: str) -> str:
    """The one-row deletes (:data:`DELETES`) after each of :data:`REOPENS` reopens, as text."""
    import colmz

    colmz.warmup()
    d = tempfile.mkdtemp(prefix="colmz_bench_reopen_")
    try:
        cat = bench_ivm.open_catalog(n, view, d)
        for b in bench_ivm.change_batches(n, "insert", WARM, set()):
            cat.append("t", bench_ivm.as_updates(b, cat.now + 1))
        rows = cat.read("t")
        # rows spread over the table (its row groups), none deleted twice
        pick = np.random.default_rng(46).choice(len(rows), DELETES * REOPENS, replace=False)
        loaded = rows.take(pick).to_pylist()
        del cat
        lines = [f"n={n} view={view} reopen, then {DELETES} one-row deletes of rows loaded with t"]
        for r in range(REOPENS):
            again = colmz.Catalog(d)
            dur = again._mirror.arrangements["t"].arrangement  # noqa: SLF001
            times = []
            for k, v, _, _ in loaded[DELETES * r: DELETES * (r + 1)]:
                a = time.perf_counter()
                again.append("t", colmz.Updates({"k": [k], "v": [v]}, time=[again.now + 1], diff=[-1]))
                times.append(1e3 * (time.perf_counter() - a))
            mem = again.object("t").collection
            rest = times[2:]
            lines.append(f"first {times[0]:.2f} ms, second {times[1]:.2f} ms, "
                         f"3rd-{DELETES}th median {np.median(rest):.2f} ms, last five median "
                         f"{np.median(rest[-5:]):.2f} ms, all {sum(times):.1f} ms; "
                         f"counts_work {mem.stats['counts_work']}, base loaded {not mem.base_pending}, "
                         f"lookups {getattr(dur, 'lookup_stats', 'n/a')}")
        return "\n".join(lines)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="bench_durable_commit.py", description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("view", choices=list(bench_ivm.VIEWS))
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reopen-delete", action="store_true")
    a = ap.parse_args()
    print(measure_reopen_delete(a.n, a.view) if a.reopen_delete else measure(a.n, a.view, a.profile))
