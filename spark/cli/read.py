"""``colmz read STORE [--as-of T] [--output FILE]``: the view a store holds at a time, no Spark.

Design
------
The view at tick ``t`` is every update with ``time <= t``, summed per data row, rows whose
sum is 0 dropped (``colmz.spark.sink_store.view_table``). It is printed as a table, or written
with ``--output`` as Parquet with the data columns and ``count`` -- the row's multiplicity.
That is a *view*, not updates: ``colmz snapshot`` writes updates ``(data..., time, diff)``
instead (``diff`` the multiplicity, ``time`` the as-of), which other colmz commands take as
input. The summary's ``rows`` counts distinct rows, ``total_count`` sums their counts (what
``colmz sink``'s verification counts).
"""

from __future__ import annotations

import argparse
import os
import time as _time
import uuid

from colmz.spark.cli.base import (
    InputError,
    check_apart,
    check_as_of,
    check_exists,
    check_outside_stores,
    check_store_url,
    consensus_url,
    nonneg,
    not_a_store,
    open_input_store,
    output_path,
    positive,
    url_scheme,
)
from colmz.spark.sink_store import view_table
from colmz.storage.url import local_path

__all__ = ["add_parser", "render", "run"]



def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz read`` to the subparsers ``sub``."""
    r = sub.add_parser(
        name,
        help=summary,
        description="The collection a colmz store holds at --as-of (default: its last final tick): "
        "every update with time <= as-of counts, equal data rows are summed, zero counts are "
        "dropped. Reads only the parts the store's metadata names; needs no Spark. Prints a "
        "table, or writes Parquet with --output: the data columns and count (the row's "
        "multiplicity) -- a view, where colmz snapshot writes updates (data..., time, diff).",
    )
    r.add_argument("store", help="the store (what colmz sink --store wrote)")
    r.add_argument("--consensus", type=consensus_url, default=None,
                   help="the store's metadata database (required for s3:// stores)")
    r.add_argument("--as-of", type=nonneg, default=None, help="the time to read at (default: the last final tick)")
    r.add_argument("--output", "-o", default=None,
                   help="write the view as a Parquet file (data columns and count) instead of printing it")
    r.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    r.add_argument("--limit", type=positive, default=50, help="rows to print (default: %(default)s)")
    r.add_argument("--json", action="store_true", help="print only a JSON summary")
    return r


def run(args, out) -> dict:
    """``colmz read``: print the view on ``out`` (unless ``--output``/``--json``); return a summary."""
    import pyarrow.parquet as pq

    t0 = _time.perf_counter()
    check_store_url(args.store, args.consensus)
    if url_scheme(args.store) in ("", "file"):
        check_exists(str(local_path(args.store)), "store")
    target = None
    if args.output is not None:
        target = output_path(args.output, "--output", directory=True)
        check_apart(args.output, "--output", [args.store])
        check_outside_stores(args.output, "--output")
        if target.is_dir():
            raise InputError(f"--output {args.output!r} is a directory; give the Parquet file to write")
        if target.exists() and not args.overwrite:
            raise InputError(f"output {args.output!r} exists; pass --overwrite to replace it")
    store = open_input_store(args.store, args.consensus)
    if store is None:
        raise not_a_store(args.store, args.consensus)
    as_of = check_as_of(store.arrangement, args.as_of, store.url)
    view = view_table(store.arrangement.read(as_of))  # read(as_of) is consolidated, in data order
    summary = {"store": store.url, "as_of": as_of, "rows": view.num_rows,
               "total_count": int(sum(view.column("count").to_pylist()))}
    if target is not None:
        tmp = target.parent / f".{target.name}.colmz-{uuid.uuid4().hex}.tmp"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(view, tmp)
        os.replace(tmp, target)
        summary["output"] = str(target)
    elif not args.json:
        _print_table(view, out, args.limit)
    summary["seconds"] = round(_time.perf_counter() - t0, 3)
    return summary


def render(summary: dict, out) -> None:
    """The table was printed by :func:`run`; with ``--output``, one line saying what was written."""
    if "output" in summary:
        print(f"{summary['rows']} rows as of {summary['as_of']} (columns: data..., count) -> "
              f"{summary['output']}", file=out)


def _print_table(table, out, limit: int) -> None:
    """A plain console table of the first ``limit`` rows."""
    names = table.column_names
    rows = [[_cell(v) for v in r.values()] for r in table.slice(0, limit).to_pylist()]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    print("  ".join(n.ljust(w) for n, w in zip(names, widths)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)), file=out)
    if table.num_rows > limit:
        print(f"... {table.num_rows - limit} more rows (--limit, or --output FILE for all)", file=out)


def _cell(v) -> str:
    return "NULL" if v is None else str(v)
