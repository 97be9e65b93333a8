"""``colmz ct``: a continual task over a Parquet file of its input's updates, on Spark.

Design
------
``colmz ct`` runs :func:`colmz.spark.continual.continual_task` over a Parquet file of input
updates and writes the task's output updates as Parquet. Everything that can be checked
before Spark starts is checked first and reported as bad input (exit status 2): missing paths,
SQL that does not define one continual task (a syntax error is said to be one), an existing
output, a ``--catalog`` that holds no catalog. The catalog is only read: it is opened with
``create=False``, so a failed command never leaves a new catalog behind, and a catalog on a
read-only directory serves.
"""

from __future__ import annotations

import argparse
import os
import time as _time

from colmz.spark.cli.base import (
    InputError,
    add_spark_options,
    csv_list,
    parquet_schema,
    start_spark,
)

__all__ = ["add_parser", "render", "run"]



def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz ct`` to the subparsers ``sub``."""
    c = sub.add_parser(
        name,
        help=summary,
        description="Run the CREATE CONTINUAL TASK in --sql (with CREATE TABLE for its input, "
        "or --catalog holding it) over input updates (the input's columns, time >= 1, diff) and "
        "write the task's output updates (columns, time, diff) as Parquet. With --partition-by "
        "each key bucket runs the task in a grouped Arrow UDF (the statements must relate only "
        "rows of equal key); without, the driver runs it.",
    )
    c.add_argument("--sql", required=True, help="file with the task's SQL")
    c.add_argument("--input", "-i", required=True, help="Parquet file or directory of input updates")
    c.add_argument("--output", "-o", required=True, help="output Parquet directory")
    c.add_argument("--catalog", default=None, help="a durable colmz catalog defining the input table")
    c.add_argument("--partition-by", type=csv_list, default=None, help="key columns, comma-separated")
    c.add_argument("--time", default="time", help="time column (default: %(default)s)")
    c.add_argument("--diff", default="diff", help="diff column (default: %(default)s)")
    c.add_argument("--overwrite", action="store_true", help="replace an existing output")
    add_spark_options(c)
    return c


def run(args, out) -> dict:
    """``colmz ct``: returns a summary (output rows and path)."""
    from colmz.spark.continual import continual_task, define_task
    from colmz.sql import SQLError

    started = _time.perf_counter()
    if not os.path.isfile(args.sql):
        raise InputError(f"--sql {args.sql!r} is not a file")
    if args.catalog is not None and os.path.isfile(args.catalog):
        raise InputError(f"--catalog {args.catalog!r} is a file, not a catalog directory")
    if not os.path.exists(args.input):
        raise InputError(f"--input {args.input!r} does not exist")
    if os.path.exists(args.output) and not args.overwrite:
        raise InputError(f"--output {args.output!r} exists (use --overwrite to replace it)")
    with open(args.sql) as f:
        sql = f.read()
    catalog = None
    if args.catalog is not None:
        from colmz import Catalog

        try:
            catalog = Catalog(args.catalog, create=False)  # read only: nothing is created
        except (FileNotFoundError, NotADirectoryError, ValueError) as e:
            raise InputError(f"--catalog {args.catalog!r}: {e}") from e
    try:
        defn = define_task(catalog, sql)  # refuse a bad definition before Spark starts
        # ... and input updates that lack the input's columns (the Parquet schema tells)
        found = parquet_schema(args.input, "--input")  # None: types only Spark can say
        have = found.names if found is not None else None
        want = [c.name for c in defn.input_schema] + [args.time, args.diff]
        missing = [] if have is None else [c for c in want if c not in have]
        if missing:
            raise InputError(f"--input {args.input!r} lacks the column(s) {missing} of the task's input "
                             f"{defn.input!r} (its columns, then --time and --diff); it has {have}")
        spark = start_spark(args)
        df = spark.read.parquet(args.input)
        result = continual_task(catalog, sql, df, partition_by=args.partition_by,
                                time=args.time, diff=args.diff, buckets=args.buckets)
    except (SQLError, TypeError, ValueError, KeyError) as e:
        # a KeyError's str() is its repr (quoted); any other message is whole -- stripping
        # quotes from it cut DuckDB's "Candidate bindings: \"key\"" mid-string
        raise InputError(e.args[0] if isinstance(e, KeyError) and e.args else str(e)) from e
    result.write.mode("overwrite" if args.overwrite else "errorifexists").parquet(args.output)
    rows = spark.read.parquet(args.output).count()
    summary = {"output": args.output, "rows": rows, "seconds": round(_time.perf_counter() - started, 3)}
    return summary


def render(summary: dict, out) -> None:
    """The last line of ``colmz ct``."""
    print(f"{summary['rows']} output updates -> {summary['output']} ({summary['seconds']:.1f} s)", file=out)
