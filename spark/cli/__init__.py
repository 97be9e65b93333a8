"""The ``colmz`` command: the self-correcting sink job, reading its store back,
consolidate/snapshot over Parquet files or stores, streaming, continual tasks, migration.

Layout (as pip lays out its commands): :data:`COMMANDS` maps each command's name to its
module and one-line summary; ``colmz.spark.cli.base`` holds what commands share (exit codes,
argument types, errors, progress, starting Spark); each command is one module --
``sink``, ``read``, ``consolidate`` (also ``snapshot``), ``migrate``, ``stream``, ``ct`` --
with ``add_parser(sub, name, summary)``, ``run(args, out) -> summary`` and
``render(summary, out)``. :func:`main` parses, runs, prints the summary (``--json``: the
dict as JSON, else ``render``) and turns the errors ``base`` names into one line and an exit
status.

Each command's module says what it does (``colmz.spark.cli.sink``: the main job, its steps
and guarantees); ``colmz.spark.sink_store`` says what ``colmz sink`` and ``colmz stream`` write.

``colmz read STORE [--as-of T] [--output FILE]`` prints (or writes) the view the store holds
at a time, without Spark; ``colmz sql [CATALOG]`` is a psql-like shell on a catalog; ``colmz migrate OLD NEW`` converts a store of colmz 0.1.

Every check that needs no Spark (arguments, paths, the store's metadata and the parts it
names) runs before a session starts. With ``--json`` standard output carries only the JSON
summary; progress goes to standard error.

Progress: on a terminal, one line redrawn in place (``colmz.progress.Bar``) shows the phase
(the sink's names its tick range), the tasks done of the running Spark stages with their rate
and time left, and the compaction's updates read; it is wiped before the summary. When the
output is not a terminal (a pipe, a log file) each finished phase prints one line -- its
name, its time and what it found -- and no bar. ``--quiet`` prints only the summary.

Exit status: 0 success, 2 bad input or usage, 1 any other failure (the store is unchanged).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from colmz.spark.cli.base import EXIT_FAIL, EXIT_INPUT, EXIT_OK, FAILURES, InputError, print_json

__all__ = ["COMMANDS", "CommandInfo", "build_parser", "main"]


class CommandInfo(NamedTuple):
    """A ``colmz`` command: the module that implements it and its one-line summary."""

    module: str
    summary: str


#: Every ``colmz`` command, in the order ``colmz --help`` lists them.
COMMANDS: dict[str, CommandInfo] = {
    "sink": CommandInfo("colmz.spark.cli.sink",
                        "keep a store of updates equal to a temporal-filter view of events"),
    "read": CommandInfo("colmz.spark.cli.read", "print (or write) the view a store holds at a time"),
    "consolidate": CommandInfo("colmz.spark.cli.consolidate",
                               "consolidate a Parquet file of updates (or a store)"),
    "snapshot": CommandInfo("colmz.spark.cli.consolidate",
                            "the collection a Parquet file of updates (or a store) holds at a time, as updates"),
    "migrate": CommandInfo("colmz.spark.cli.migrate", "convert a store written by colmz 0.1 into an arrangement"),
    "stream": CommandInfo("colmz.spark.cli.stream",
                          "keep an arrangement equal to a temporal-filter view of streaming events"),
    "ct": CommandInfo("colmz.spark.cli.ct", "run a continual task over a Parquet file of its input's updates"),
    "maintain": CommandInfo("colmz.spark.cli.maintain",
                            "compact a store in place and delete the parts no state names (no Spark)"),
    "sql": CommandInfo("colmz.spark.cli.sql", "a psql-like shell on a colmz catalog (or run -c SQL / -f FILE)"),
}


def command_module(name: str):
    """The module implementing command ``name``."""
    return importlib.import_module(COMMANDS[name].module)


def build_parser() -> argparse.ArgumentParser:
    """The ``colmz`` argument parser (``colmz --help``, ``colmz sink --help``, ...)."""
    p = argparse.ArgumentParser(
        prog="colmz",
        description="colmz on Spark: a self-correcting materialized-view sink, and "
        "consolidate/snapshot over Parquet files of updates (data..., time, diff).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, info in COMMANDS.items():
        command_module(name).add_parser(sub, name, info.summary)
    return p


def main(argv: Sequence[str] | None = None, out=None) -> int:
    """Entry point of the ``colmz`` console script; returns the exit status."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    module = command_module(args.command)
    # With --json, stdout carries only the JSON summary; progress goes to stderr.
    progress_out = sys.stderr if args.json else out
    try:
        summary = module.run(args, progress_out)
    except InputError as e:
        print(f"colmz {args.command}: bad input: {e}", file=sys.stderr)
        return EXIT_INPUT
    except FAILURES as e:
        print(f"colmz {args.command}: failed, store unchanged: {e}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print_json(summary, out)
    else:
        module.render(summary, out)
    return EXIT_OK
