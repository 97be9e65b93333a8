"""``colmz maintain STORE``: compaction and garbage collection of a store, in place, no Spark.

Design
------
A store's parts pile up as runs append: every ``colmz sink`` run adds its corrections as new
parts, and compaction replaces merged parts with one. This command does what
``Arrangement.maintain()`` then ``Arrangement.gc()`` do -- drain the unsealed parts into the
trace, merge trace batches (each step its own compare-and-set: a concurrent writer loses
nothing, and a step that loses to it is redone on the new state), then delete the parts no
committed state names and that are older than the lease (``--lease``, default the store's:
a part younger than it may belong to a writer that has not committed yet). The store's
contents at every final tick are unchanged; its parts are fewer and its reads faster.

It is what ``colmz consolidate STORE STORE`` is not: that writes plain Parquet updates
elsewhere and refuses its own store as output.
"""

from __future__ import annotations

import argparse
import time as _time

from colmz.spark.cli.base import InputError, check_exists, consensus_url, open_input_store, positive

__all__ = ["add_parser", "render", "run"]


def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz maintain`` to the subparsers ``sub``."""
    m = sub.add_parser(
        name,
        help=summary,
        description="Compact a colmz store in place (drain unsealed parts, merge trace batches: "
        "each step one compare-and-set) and delete the parts no committed state names and "
        "older than the lease. The contents at every final tick are unchanged. No Spark.",
    )
    m.add_argument("store", help="the store (what colmz sink --store wrote)")
    m.add_argument("--consensus", type=consensus_url, default=None,
                   help="the store's metadata database (required for s3:// stores)")
    m.add_argument("--fuel", type=positive, default=None,
                   help="stop after reading about this many updates (default: do everything)")
    m.add_argument("--lease", type=float, default=None,
                   help="delete unreferenced parts older than this many seconds (default: the store's lease)")
    m.add_argument("--no-gc", action="store_true", help="compact only; delete nothing")
    m.add_argument("--json", action="store_true", help="print only a JSON summary")
    m.add_argument("--quiet", "-q", action="store_true", help="print only the summary")
    return m


def _shape(arr) -> dict:
    meta = arr.meta()
    parts = arr.parts()
    return {"trace_batches": len(meta["trace_batches"]), "unsealed_batches": len(meta["unsealed_batches"]),
            "parts": len(parts)}


def run(args, out) -> dict:
    """``colmz maintain``: returns a summary (batches and parts before and after, deleted)."""
    t0 = _time.perf_counter()
    if args.lease is not None and not args.lease >= 0:
        raise InputError(f"--lease must be a non-negative number of seconds, got {args.lease}")
    if "://" not in args.store:
        check_exists(args.store, "store")
    store = open_input_store(args.store, args.consensus)
    if store is None:
        raise InputError(f"{args.store!r} is not a colmz store (no arrangement)")
    arr = store.arrangement
    before = _shape(arr)
    last = [0.0]

    def progress(done: int, total: int, label: str) -> None:
        now = _time.perf_counter()
        if not args.quiet and not args.json and (done == total or now - last[0] > 1.0):
            last[0] = now
            print(f"compacting: {done:,} of {total:,} updates ({label})", file=out, flush=True)

    report = arr.maintain(args.fuel, progress=progress)
    deleted = [] if args.no_gc else arr.gc(lease_seconds=args.lease)
    after = _shape(arr)
    return {"store": store.url, "before": before, "after": after, "deleted_parts": len(deleted),
            "merging": bool(report.get("merging")), "seconds": round(_time.perf_counter() - t0, 3)}


def render(summary: dict, out) -> None:
    """One line: the store's batches and parts before and after, and what was deleted."""
    b, a = summary["before"], summary["after"]
    more = " (a merge is half done: run again to go on)" if summary["merging"] else ""
    print(f"{summary['store']}: trace batches {b['trace_batches']} -> {a['trace_batches']}, "
          f"unsealed {b['unsealed_batches']} -> {a['unsealed_batches']}, parts {b['parts']} -> "
          f"{a['parts']}, {summary['deleted_parts']} unreferenced parts deleted "
          f"({summary['seconds']:.1f} s){more}", file=out)
