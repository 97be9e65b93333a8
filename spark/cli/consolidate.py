"""``colmz consolidate`` and ``colmz snapshot``: updates in, consolidated updates out, on Spark.

Design
------
The input is a Parquet path of updates ``(data..., time, diff)`` or a colmz store (read
through its metadata, never its folder). ``consolidate`` sums equal ``(data, time)`` and drops
zero diffs (``--since`` advances times first, ``--upper`` keeps times before it);
``snapshot`` is the collection at ``--as-of``: updates with ``time`` the as-of and ``diff``
the multiplicity (``colmz read`` shows the same collection as a view with a ``count``
column). A store of at most :data:`LOCAL_ROWS` updates is consolidated in this process with
pyarrow, as ``colmz read`` reads it (``--spark``: on Spark anyway); anything else on Spark.
The output directory is written into a sibling staging directory and renamed into place, so
it is whole or absent; an existing output is refused unless ``--overwrite``, and an output
at, inside or above the input store always.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time as _time
import uuid
from pathlib import Path

from colmz.spark.arrangement_io import part_list, read_parts, read_parts_local
from colmz.spark.cli.base import (
    InputError,
    Progress,
    add_spark_options,
    as_input_error,
    check_apart,
    check_as_of,
    check_outside_stores,
    check_store_url,
    consensus_url,
    csv_list,
    damaged_part,
    nonneg,
    open_input_store,
    output_path,
    parquet_schema,
    read_parquet,
    start_spark,
)
from colmz.spark.frames import consolidate, snapshot
from colmz.spark.schemas import check_update_columns, check_update_values
from colmz.spark.sink_store import SinkStoreError

__all__ = ["LOCAL_ROWS", "add_parser", "render", "run"]

#: Most stored updates of an input store consolidated in this process (pyarrow; a few hundred
#: MB of Arrow at most) rather than on Spark, whose start alone costs seconds.
LOCAL_ROWS = 2_000_000

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
    c.add_argument("--spark", action="store_true",
                   help=f"run on Spark also when the input is a store of at most {LOCAL_ROWS:,} updates "
                   "(by default consolidated in this process, as colmz read reads)")
    add_spark_options(c)
    return c


def _write_atomic(write, target: Path, overwrite: bool) -> int:
    """Have ``write(staging)`` write Parquet files into a sibling staging directory, then
    rename it to ``target`` (replacing it with ``overwrite``); return the rows written."""
    import pyarrow.parquet as pq

    if target.exists() and not overwrite:
        raise InputError(f"output {str(target)!r} exists; pass --overwrite to replace it")
    staging = target.parent / f".{target.name}.colmz-staging-{uuid.uuid4().hex}"
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        write(staging)
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in staging.glob("part-*.parquet"))
        if target.exists():
            # Replace: move the old output aside first so the rename below cannot fail on it.
            old = target.parent / f".{target.name}.colmz-old-{uuid.uuid4().hex}"
            os.rename(target, old)
            os.rename(staging, target)
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()
        else:
            os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return rows


def run(args, out) -> dict:
    """``colmz consolidate`` / ``colmz snapshot`` for parsed ``args``; return a summary.

    Everything that needs no Spark is checked first: the input (a store's metadata and parts,
    or the Parquet footers: the columns), the output's place (never at, inside or above the
    input store), ``--as-of`` against the store's final ticks, ``--since``/``--upper``.
    """
    t0 = _time.perf_counter()
    if "://" in args.input or args.consensus is not None:
        check_store_url(args.input, args.consensus, "input")
    target = output_path(args.output, "output", directory=True)
    if target.exists() and not args.overwrite:
        raise InputError(f"output {args.output!r} exists; pass --overwrite to replace it")
    since, upper = getattr(args, "since", None), getattr(args, "upper", None)
    if since is not None and upper is not None and since >= upper:
        raise InputError(f"--since {since} is not below --upper {upper}: every time is advanced to at "
                         "least --since and only times before --upper are kept, so nothing would be left")
    store = open_input_store(args.input, args.consensus)  # a store is read through its metadata
    if store is not None:
        check_apart(args.output, "output", [args.input])
    check_outside_stores(args.output, "output", replaced=target.exists())
    if store is not None:
        arr = store.arrangement
        if arr.schema is None:
            raise InputError(f"store {args.input!r} holds nothing yet")
        if args.command == "snapshot":
            check_as_of(arr, args.as_of, args.input)
        schema = _store_schema(arr)
    else:
        schema = parquet_schema(args.input, "input")
    if schema is not None:
        with as_input_error():
            check_update_columns(schema, args.data, args.time, args.diff)
    progress = Progress(out, quiet=args.quiet)
    try:
        if store is not None and not args.spark and int(store.arrangement.stats()["stored_updates"]) <= LOCAL_ROWS:
            summary = _consolidate_local(args, store, target, progress)
            if summary is not None:
                summary["seconds"] = round(_time.perf_counter() - t0, 3)
                return summary
        try:
            return _consolidate(args, store, target, progress, t0)
        except Exception as e:
            # a part an executor found damaged (CorruptPart/MissingPart inside Spark's
            # error): the line naming it, as colmz read and colmz sink give
            damaged = damaged_part(e) if store is not None else None
            if damaged is None:
                raise
            raise SinkStoreError(f"store {args.input!r} is damaged: {damaged}") from None
    finally:
        progress.close()


def _bounds(args) -> tuple[int | None, int | None]:
    """``(since, upper)`` of the consolidation: a snapshot at ``t`` is ``(t, t + 1)``."""
    if args.command == "snapshot":
        return args.as_of, args.as_of + 1
    return args.since, args.upper


def _consolidate_local(args, store, target: Path, progress: Progress) -> dict | None:
    """A store of at most :data:`LOCAL_ROWS` updates, consolidated in this process with pyarrow
    (what ``colmz read`` does; no Spark session). None when pyarrow cannot group by the
    data columns' types: Spark then does it."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    arr = store.arrangement
    data = [c.name for c in arr.schema] if args.data is None else list(args.data)
    since, upper = _bounds(args)
    with progress.phase(f"reading {args.input} (in process)"):
        table = read_parts_local(store.url, arr.schema, part_list(arr))
        rows_in = table.num_rows
    with progress.phase(f"{args.command} -> {args.output}"):
        t = table.select([*data, args.time, args.diff])
        if since is not None:
            t = t.set_column(len(data), args.time, pc.max_element_wise(t.column(args.time), pa.scalar(since, pa.int64())))
        if upper is not None:
            t = t.filter(pc.less(t.column(args.time), upper))
        try:
            g = t.group_by([*data, args.time], use_threads=False).aggregate([(args.diff, "sum")])
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        g = g.select([*data, args.time, f"{args.diff}_sum"]).rename_columns([*data, args.time, args.diff])
        g = g.filter(pc.not_equal(g.column(args.diff), 0))
        # time and diff are never null: said in the schema, as Spark's output says it
        g = g.cast(pa.schema([*g.schema][: len(data)] + [pa.field(args.time, pa.int64(), nullable=False),
                                                          pa.field(args.diff, pa.int64(), nullable=False)]))
        rows_out = _write_atomic(lambda d: (d.mkdir(), pq.write_table(g, d / "part-00000.parquet")),
                                 target, args.overwrite)
    return {"input_rows": rows_in, "output_rows": rows_out, "output": str(target), "ran_on": "local"}


def _store_schema(arr):
    """The Spark schema of a store's updates (its data columns, ``time``, ``diff``)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema([(c.name, c.type) for c in arr.schema]
                                       + [("time", pa.int64()), ("diff", pa.int64())]))


def _consolidate(args, store, target: Path, progress: Progress, t0: float) -> dict:
    with progress.phase("starting Spark"):
        spark = progress.spark = start_spark(args)
    with progress.phase(f"reading {args.input}"):
        if store is not None:
            arr = store.arrangement
            df = read_parts(spark, store.url, arr.schema, part_list(arr))
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
        rows_out = _write_atomic(lambda d: result.write.mode("errorifexists").parquet(str(d)), target,
                                 args.overwrite)
    return {"input_rows": rows_in, "output_rows": rows_out, "output": str(target), "ran_on": "spark",
            "seconds": round(_time.perf_counter() - t0, 3)}




def render(summary: dict, out) -> None:
    print(f"{summary['input_rows']} updates in, {summary['output_rows']} out -> "
          f"{summary['output']} ({summary['seconds']:.1f} s)", file=out)
