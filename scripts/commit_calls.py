"""Python calls per one-row commit through ``Catalog.append``, with no view, the sum view or the
join view of ``asv_benchmarks/bench_ivm.py``: a count that does not depend on the machine's load.

For each of no view, ``sum`` and ``join``: a catalog of ``n`` rows (``bench_ivm.open_catalog``),
then per change kind (``insert``, ``delete``, ``update``: ``bench_ivm.change_batches``) ten
untimed commits and ``commits`` commits under ``cProfile``; prints cProfile's total calls over
the commits. The commit path's fixed costs are per call (a one-row change's arrays hold one or
two rows), so fewer calls is the figure that a change to that path moves.

    NUMBA_CACHE_DIR=/work/main/.numba_cache .venv/bin/python scripts/commit_calls.py 100000 --commits 200
"""

from __future__ import annotations

import argparse
import cProfile
import pathlib
import pstats
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "asv_benchmarks"))

import bench_ivm  # noqa: E402

KINDS = ("insert", "delete", "update")


def calls_per_commit(n: int, view: str | None, commits: int) -> dict[str, float]:
    """``{kind: calls per commit}`` for a catalog of ``n`` rows with ``view`` (or none)."""
    cat = bench_ivm.open_catalog(n, view)
    taken: set = set()
    out = {}
    for kind in KINDS:
        batches = bench_ivm.change_batches(n, kind, commits + 10, taken)
        for b in batches[:10]:
            cat.append("t", bench_ivm.as_updates(b, cat.now + 1))
        ups = [bench_ivm.as_updates(b, cat.now + 1 + i) for i, b in enumerate(batches[10:])]
        prof = cProfile.Profile()
        prof.enable()
        for u in ups:
            cat.append("t", u)
        prof.disable()
        out[kind] = pstats.Stats(prof).total_calls / commits
    return out


def main(argv: list[str]) -> None:
    import colmz

    ap = argparse.ArgumentParser(prog="commit_calls.py", description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=100_000)
    ap.add_argument("--commits", type=int, default=200)
    a = ap.parse_args(argv)
    if a.commits < 1:
        ap.error(f"--commits must be at least 1, got {a.commits}")
    colmz.warmup()
    for view in (None, "sum", "join"):
        got = calls_per_commit(a.n, view, a.commits)
        cells = ", ".join(f"{k} {v:,.0f}" for k, v in got.items())
        print(f"{view or 'no view'}, n = {a.n:,}: calls per commit: {cells}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
