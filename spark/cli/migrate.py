"""``colmz migrate OLD NEW``: convert a store of colmz 0.1 into an arrangement (no Spark).

Design
------
The only command that reads colmz 0.1's layout (``colmz.spark.store_v01``): every update is
copied into a new arrangement store (``colmz.spark.sink_store.migrate``), sealed after its
last time and compacted; the old store is left as it is. Every other command refuses an old
store, naming this one.
"""

from __future__ import annotations

import argparse
import time as _time

from colmz.spark.cli.base import (
    Progress,
    check_apart,
    check_exists,
    check_outside_stores,
    check_store_url,
    consensus_url,
)
from colmz.spark.sink_store import migrate

__all__ = ["add_parser", "render", "run"]



def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz migrate`` to the subparsers ``sub``."""
    m = sub.add_parser(
        name,
        help=summary,
        description="Copy every update of a colmz 0.1 store (a _colmz_store.json manifest and "
        "commits/ folders) into a new arrangement store, seal it after its last time and compact "
        "it. The old store is left as it is. Needs no Spark.",
    )
    m.add_argument("old", help="the colmz 0.1 store directory")
    m.add_argument("new", help="the new store: a directory, or s3://bucket/prefix with --consensus")
    m.add_argument("--consensus", type=consensus_url, default=None, help="the new store's metadata database")
    m.add_argument("--json", action="store_true", help="print the summary as JSON")
    m.add_argument("--quiet", "-q", action="store_true", help="print only the summary")
    return m


def run(args, out) -> dict:
    """``colmz migrate OLD NEW``: return a summary (updates copied, seal)."""
    t0 = _time.perf_counter()
    check_exists(args.old, "store")
    check_store_url(args.new, args.consensus, "NEW")
    check_apart(args.new, "NEW", [args.old])
    check_outside_stores(args.new, "NEW")
    progress = Progress(out, quiet=args.quiet)
    try:
        with progress.phase(f"migrating {args.old} -> {args.new}"):
            summary = migrate(args.old, args.new, consensus=args.consensus,
                              progress=progress.callback("migrating"))
    finally:
        progress.close()
    summary["seconds"] = round(_time.perf_counter() - t0, 3)
    return summary


def render(summary: dict, out) -> None:
    print(f"{summary['updates']} updates from {summary['from']} -> {summary['to']} "
          f"(sealed through tick {summary['sealed_through']})", file=out)
