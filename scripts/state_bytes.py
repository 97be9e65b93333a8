"""The bytes a view's arrangements hold over the Arrow size of their columns, under bulk steps.

For each of ``asv_benchmarks/bench_ivm.py``'s views: a catalog of ``n`` rows with the view
(``bench_ivm.open_catalog``), then ``steps`` 1 % bulk inserts into ``t``
(``bench_ivm.change_batches``, kind ``bulk``), each committed alone. Prints the ratio
(``bench_ivm.arranged_ratio``: runs and key indexes over the Arrow bytes of the columns they
hold; the issue's target is at most 2 for every view) after CREATE and the largest after any
step, and the rows merges read per inserted row over the steps (``rows_merged``, a work
counter, of every arrangement the view reads, shared ones included).

    NUMBA_CACHE_DIR=/work/main/.numba_cache .venv/bin/python scripts/state_bytes.py 100000 --steps 5
    NUMBA_CACHE_DIR=/work/main/.numba_cache flock /tmp/colmz_heavy.lock \
        .venv/bin/python scripts/state_bytes.py 10000000 window outer --steps 3
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "asv_benchmarks"))

import bench_ivm  # noqa: E402


def measure(view: str, n: int, steps: int) -> dict:
    """``{"create": ratio, "worst": largest ratio after a step, "reads_per_row": ...}``."""
    cat = bench_ivm.open_catalog(n, view)
    held, arrow = bench_ivm.arranged_ratio(cat)
    create = worst = held / arrow
    arrs = [getattr(a, "base", a) for a in cat.object("mv").maintained.arrangements()]
    merged = sum(getattr(a, "rows_merged", 0) for a in arrs)
    inserted = 0
    for b in bench_ivm.change_batches(n, "bulk", steps, set()):
        cat.append("t", bench_ivm.as_updates(b, cat.now + 1))
        inserted += b.num_rows
        held, arrow = bench_ivm.arranged_ratio(cat)
        worst = max(worst, held / arrow)
    reads = sum(getattr(a, "rows_merged", 0) for a in arrs) - merged
    return {"create": create, "worst": worst, "reads_per_row": reads / inserted}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="state_bytes.py", description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=100_000)
    ap.add_argument("views", nargs="*", default=[], help=f"any of {list(bench_ivm.VIEWS)} (default: all)")
    ap.add_argument("--steps", type=int, default=5, help="1 %% bulk inserts (default 5)")
    a = ap.parse_args(argv)
    unknown = [v for v in a.views if v not in bench_ivm.VIEWS]
    if unknown:
        ap.error(f"views are {list(bench_ivm.VIEWS)}, got {unknown}")
    print(f"n = {a.n:,}, {a.steps} bulk steps: view, state/Arrow after CREATE, largest after a step, "
          "merge reads per inserted row", flush=True)
    for v in a.views or list(bench_ivm.VIEWS):
        f = measure(v, a.n, a.steps)
        print(f"{v:9s} {f['create']:.2f} {f['worst']:.2f} {f['reads_per_row']:.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
