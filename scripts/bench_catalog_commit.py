"""One-row INSERT into an in-memory ``colmz.Catalog`` table of N rows: the catalog module of
a given git revision (``--before``) against the working tree's, in one process.

``python scripts/bench_catalog_commit.py [--before REV] [--durable] N...`` prints, per N, the median
and mean wall time of one ``INSERT INTO t VALUES (...)`` (after one warm-up insert) for each
module: 7 inserts in memory, 33 durable (two maintenance passes). The table is ``(k BIGINT, s TEXT)`` loaded with one append of N rows. Run it under
``flock /tmp/colmz_bench.lock`` so no other benchmark overlaps.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import colmz
import colmz.catalog


def load_revision(rev: str):
    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "show", f"{rev}:colmz/catalog.py"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "catalog_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("colmz_catalog_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def one_row_insert_ms(catalog_cls, n: int, reps: int = 7, durable: bool = False) -> tuple[float, float]:
    cat = catalog_cls(tempfile.mkdtemp()) if durable else catalog_cls()
    cat.execute("CREATE TABLE t (k BIGINT, s TEXT)")
    cat.append("t", colmz.Updates({"k": np.arange(n, dtype=np.int64), "s": [f"v{i % 97}" for i in range(n)]},
                                  time=np.ones(n, np.uint64), diff=np.ones(n, np.int64)))
    cat.execute(f"INSERT INTO t VALUES ({n}, 'warm')")
    times = []
    for i in range(reps):
        t0 = time.perf_counter()
        cat.execute(f"INSERT INTO t VALUES ({n + 1 + i}, 'x')")
        times.append(time.perf_counter() - t0)
    del cat
    gc.collect()
    return statistics.median(times) * 1e3, statistics.mean(times) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="8586d48", help="git revision of the 'before' catalog.py")
    p.add_argument("--durable", action="store_true", help="a durable catalog in a fresh directory")
    p.add_argument("sizes", nargs="*", type=int, default=[10_000, 1_000_000, 4_000_000])
    args = p.parse_args()
    before = load_revision(args.before)
    colmz.warmup()
    reps = 33 if args.durable else 7  # durable: two maintenance passes (every 16 commits) included
    print(f"{'rows':>10} {'before median':>14} {'after median':>13} {'before mean':>12} {'after mean':>11}  (ms)")
    for n in args.sizes:
        b = one_row_insert_ms(before.Catalog, n, reps, durable=args.durable)
        a = one_row_insert_ms(colmz.catalog.Catalog, n, reps, durable=args.durable)
        print(f"{n:>10} {b[0]:>14.2f} {a[0]:>13.2f} {b[1]:>12.2f} {a[1]:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
