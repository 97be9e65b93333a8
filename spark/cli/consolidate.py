"""``colmz consolidate`` and ``colmz snapshot``: updates in, consolidated updates out, on Spark.

Design
------
The input is a Parquet path of updates ``(data..., time, diff)`` or a colmz store (read
through its metadata, never its folder). ``consolidate`` sums equal ``(data, time)`` and drops
zero diffs (``--since`` advances times first, ``--upper`` keeps times before it);
``snapshot`` is the collection at ``--as-of``: updates with ``time`` the as-of and ``diff``
the multiplicity (``colmz read`` shows the same collection as a view with a ``count``
column). The output directory is written by Spark into a sibling staging directory and
renamed into place, so it is whole or absent; an existing output is refused unless
``--overwrite``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time as _time
import uuid
from pathlib import Path

from colmz.spark.arrangement_io import part_list, read_parts
from colmz.spark.cli.base import (
    InputError,
    Progress,
    add_spark_options,
    as_input_error,
    check_exists,
    consensus_url,
    csv_list,
    nonneg,
    open_input_store,
    read_parquet,
    start_spark,
)
from colmz.spark.frames import consolidate, snapshot
from colmz.spark.schemas import check_update_columns, check_update_values

__all__ = ["add_parser", "render", "run"]

def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz consolidate`` or ``colmz snapshot`` (``name``) to the subparsers ``sub``."""
    c = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ": equal "
                       "(data, time) summed, zero diffs dropped; written atomically as Parquet (data..., time, diff).")
    c.add_argument("input", help="input: a Parquet path of updates (data..., time, diff) or a colmz store")
    c.add_argument("--consensus", type=consensus_url, default=None, help="the input store's metadata database (s3:// stores)")
    c.add_argument("output", help="output Parquet directory")
    c.add_argument("--data", type=csv_list, default=None, help="data columns (default: all but time and diff)")
    c.add_argument("--time", default="time", help="time column (default: %(default)s)")
    c.add_argument("--diff", default="diff", help="diff column (default: %(default)s)")
    if name == "consolidate":
        c.add_argument("--since", type=nonneg, default=None, help="advance times to at least this")
        c.add_argument("--upper", type=nonneg, default=None, help="keep only times before this")
    else:
        c.add_argument("--as-of", type=nonneg, required=True, help="the time to read the collection at")
    c.add_argument("--partial", action="store_true",
                   help="also consolidate each input partition before the shuffle")
    c.add_argument("--overwrite", action="store_true", help="replace an existing output")
    add_spark_options(c)
    return c


def _write_atomic(df, output: str, overwrite: bool) -> int:
    """Write ``df`` as Parquet to ``output`` via a sibling staging directory and a rename."""
    import pyarrow.parquet as pq

    target = Path(output).absolute()
    if target.exists() and not overwrite:
        raise InputError(f"output {output!r} exists; pass --overwrite to replace it")
    staging = target.parent / f".{target.name}.colmz-staging-{uuid.uuid4().hex}"
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        df.write.mode("errorifexists").parquet(str(staging))
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in staging.glob("part-*.parquet"))
        if target.exists():
            # Replace: move the old output aside first so the rename below cannot fail on it.
            old = target.parent / f".{target.name}.colmz-old-{uuid.uuid4().hex}"
            os.rename(target, old)
            os.rename(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return rows


def run(args, out) -> dict:
    """``colmz consolidate`` / ``colmz snapshot`` for parsed ``args``; return a summary."""
    t0 = _time.perf_counter()
    if "://" not in args.input:
        check_exists(args.input, "input")
    if Path(args.output).exists() and not args.overwrite:
        raise InputError(f"output {args.output!r} exists; pass --overwrite to replace it")
    store = open_input_store(args.input, args.consensus)  # a store is read through its metadata
    progress = Progress(out, quiet=args.quiet)
    try:
        return _consolidate(args, store, progress, t0)
    finally:
        progress.close()


def _consolidate(args, store, progress: Progress, t0: float) -> dict:
    with progress.phase("starting Spark"):
        spark = progress.spark = start_spark(args)
    with progress.phase(f"reading {args.input}"):
        if store is not None:
            arr = store.arrangement
            df = None if arr.schema is None else read_parts(spark, store.url, arr.schema, part_list(arr))
            if df is None:
                raise InputError(f"store {args.input!r} holds nothing yet")
        else:
            df = read_parquet(spark, args.input, "input")
        with as_input_error():
            data = check_update_columns(df.schema, args.data, args.time, args.diff)
        rows_in = check_update_values(df, args.time, args.diff)
    with progress.phase(f"{args.command} -> {args.output}"):
        with as_input_error():  # argument checks only: the DataFrame is lazy
            if args.command == "snapshot":
                result = snapshot(df, args.as_of, data, args.time, args.diff, buckets=args.buckets,
                                  partial=args.partial)
            else:
                result = consolidate(df, data, args.time, args.diff, since=args.since, upper=args.upper,
                                     buckets=args.buckets, partial=args.partial)
        rows_out = _write_atomic(result, args.output, args.overwrite)
    return {"input_rows": rows_in, "output_rows": rows_out, "output": str(Path(args.output).absolute()),
            "seconds": round(_time.perf_counter() - t0, 3)}




def render(summary: dict, out) -> None:
    print(f"{summary['input_rows']} updates in, {summary['output_rows']} out -> "
          f"{summary['output']} ({summary['seconds']:.1f} s)", file=out)
