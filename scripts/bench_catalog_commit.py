"""One-row INSERT into a ``colmz.Catalog`` table of N rows: a given git revision of colmz
(``--before``, run from its own tree in a child process) beside the working tree's.

``python scripts/bench_catalog_commit.py [--before REV] [--durable] N...`` prints, per N, the
median and mean wall time of one ``INSERT INTO t VALUES (...)`` (after one warm-up insert) for
each: 7 inserts in memory, 33 durable (two maintenance passes). The table is ``(k BIGINT, s
TEXT)`` loaded with one append of N rows. Without ``--before`` only the working tree is timed.
The revision runs whole (``git archive`` into a temporary directory), never one old module
beside today's others. Run it under ``flock /tmp/colmz_bench.lock`` so no other benchmark
overlaps.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def import_tree(tree: Path):
    """``colmz`` imported from the source tree ``tree`` (its top-level ``kernels/`` and
    ``spark/`` folders are ``colmz.kernels`` and ``colmz.spark``, as an install maps them)."""
    sys.path.insert(0, str(tree))
    for pkg in ("kernels", "spark"):
        spec = importlib.util.spec_from_file_location(
            f"colmz.{pkg}", tree / pkg / "__init__.py", submodule_search_locations=[str(tree / pkg)])
        sys.modules[f"colmz.{pkg}"] = importlib.util.module_from_spec(spec)
    import colmz

    for pkg in ("kernels", "spark"):
        mod = sys.modules[f"colmz.{pkg}"]
        mod.__spec__.loader.exec_module(mod)
    if not Path(colmz.__file__).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"colmz was imported from {colmz.__file__}, not from {tree}")
    return colmz


def revision_tree(rev: str) -> Path:
    """A temporary directory holding colmz at git revision ``rev``."""
    out = Path(tempfile.mkdtemp(prefix="colmz-before-"))
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def one_row_insert_ms(colmz, n: int, reps: int = 7, durable: bool = False) -> tuple[float, float]:
    cat = colmz.Catalog(tempfile.mkdtemp()) if durable else colmz.Catalog()
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
    p.add_argument("--before", help="git revision to time beside the working tree")
    p.add_argument("--durable", action="store_true", help="a durable catalog in a fresh directory")
    p.add_argument("--tree", help=argparse.SUPPRESS)  # the child: time the colmz of this tree
    p.add_argument("sizes", nargs="*", type=int, default=[10_000, 1_000_000, 4_000_000])
    args = p.parse_args()
    reps = 33 if args.durable else 7  # durable: two maintenance passes (every 16 commits) included
    if args.tree:
        colmz = import_tree(Path(args.tree))
        colmz.warmup()
        print(json.dumps([one_row_insert_ms(colmz, n, reps, durable=args.durable) for n in args.sizes]))
        return
    colmz = import_tree(ROOT)
    colmz.warmup()
    tree = revision_tree(args.before) if args.before else None
    print(f"{'rows':>10} {'before median':>14} {'after median':>13} {'before mean':>12} {'after mean':>11}  (ms)")
    for n in args.sizes:
        b = (float("nan"), float("nan"))
        if tree is not None:  # one child per size, so before and after alternate
            child = [sys.executable, __file__, "--tree", str(tree), *(["--durable"] if args.durable else []), str(n)]
            env = {**os.environ, "NUMBA_CACHE_DIR": str(tree / ".numba_cache")}
            b = tuple(json.loads(subprocess.run(child, check=True, capture_output=True, text=True,
                                                env=env).stdout.splitlines()[-1])[0])
        a = one_row_insert_ms(colmz, n, reps, durable=args.durable)
        print(f"{n:>10} {b[0]:>14.2f} {a[0]:>13.2f} {b[1]:>12.2f} {a[1]:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
