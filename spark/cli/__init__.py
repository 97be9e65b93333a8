"""The ``colmz`` command: the self-correcting sink job, reading its store back,
consolidate/snapshot over Parquet files or stores, streaming, continual tasks, SQL.

Layout (as pip lays out its commands): :data:`COMMANDS` maps each command's name to its
module and one-line summary; ``colmz.spark.cli.base`` holds what commands share (exit codes,
argument types, errors, progress, starting Spark); each command is one module --
``sink``, ``read``, ``consolidate`` (also ``snapshot``), ``stream``, ``ct``, ``maintain``, ``sql`` --
with ``add_parser(sub, name, summary)``, ``run(args, out) -> summary`` and
``render(summary, out)``. :func:`main` parses, runs, prints the summary (``--json``: the
dict as JSON, else ``render``) and turns the errors ``base`` names into one line and an exit
status.

Each command's module says what it does (``colmz.spark.cli.sink``: the main job, its steps
and guarantees); ``colmz.spark.sink_store`` says what ``colmz sink`` and ``colmz stream`` write.

``colmz read STORE [--as-of T] [--output FILE]`` prints (or writes) the view the store holds
at a time, without Spark; ``colmz sql [CATALOG]`` is a psql-like shell on a catalog.

Every check that needs no Spark (arguments, paths, the store's metadata and the parts it
names) runs before a session starts. With ``--json`` standard output carries only the JSON
summary; progress goes to standard error.

Progress: on a terminal, one line redrawn in place (``colmz.progress.Bar``) shows the phase
(the sink's names its tick range), the tasks done of the running Spark stages with their rate
and time left, and the compaction's updates read; it is wiped before the summary. When the
output is not a terminal (a pipe, a log file) each finished phase prints one line -- its
name, its time and what it found -- and no bar. ``--quiet`` prints only the summary.

Errors are one line on standard error, ``colmz CMD: ...``, naming the fix; a traceback means
a bug. Exit status: 0 success, 2 bad input or usage (also a missing optional dependency, a
path of the wrong kind), 1 any other failure (the store is unchanged), 130 interrupted, 141
standard output closed by its reader.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import NamedTuple

from colmz.spark.cli.base import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_OK,
    FAILURES,
    InputError,
    one_line,
    print_json,
    stop_started_sessions,
)

__all__ = ["COMMANDS", "EXIT_PIPE", "PATH_ERRORS", "CommandInfo", "Parser", "build_parser", "main", "version"]

#: Exit status when standard output's reader went away (128 + SIGPIPE, as a shell reports ``cat``'s).
EXIT_PIPE = 128 + signal.SIGPIPE


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


class Parser(argparse.ArgumentParser):
    """argparse's parser, its usage errors said in one line naming ``--help`` (status 2)."""

    def error(self, message: str):
        self.exit(EXIT_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def version() -> str:
    """The installed colmz's version (``colmz --version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("colmz")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The ``colmz`` argument parser (``colmz --help``, ``colmz sink --help``, ...)."""
    p = Parser(
        prog="colmz",
        description="colmz on Spark: a self-correcting materialized-view sink, and "
        "consolidate/snapshot over Parquet files of updates (data..., time, diff).",
    )
    p.add_argument("--version", action="version", version=f"colmz {version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name, info in COMMANDS.items():
        command_module(name).add_parser(sub, name, info.summary)
    return p


#: What a path given on the command line can raise when it is the wrong kind of thing (a file
#: given as a directory, a directory under a file): bad input, reported in one line.
PATH_ERRORS = (NotADirectoryError, FileExistsError, IsADirectoryError)


def main(argv: Sequence[str] | None = None, out=None) -> int:
    """Entry point of the ``colmz`` console script; returns the exit status.

    Output cut short by its reader (``colmz read STORE | head -2``) ends the command quietly,
    as ``cat`` ends, with the status of a SIGPIPE (141).
    """
    out = out or sys.stdout
    try:
        status = _main(argv, out)
        out.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    finally:
        stop_started_sessions()
    return status


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's flush at exit cannot raise
    ``BrokenPipeError`` again (Python's documented way, docs.python.org/3/library/signal.html)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (an in-process caller's stream)
        pass


def _main(argv: Sequence[str] | None, out) -> int:
    args = build_parser().parse_args(argv)
    module = command_module(args.command)
    # With --json, stdout carries only the JSON summary; progress goes to stderr.
    progress_out = sys.stderr if args.json else out
    try:
        summary = module.run(args, progress_out)
    except InputError as e:
        print(f"colmz {args.command}: bad input: {one_line(e)}", file=sys.stderr)
        return EXIT_INPUT
    except PATH_ERRORS as e:
        print(f"colmz {args.command}: bad input: {one_line(e)}", file=sys.stderr)
        return EXIT_INPUT
    except ImportError as e:
        if "pip install" not in str(e):
            raise  # not a missing optional dependency: a bug
        print(f"colmz {args.command}: {one_line(e)}", file=sys.stderr)
        return EXIT_INPUT
    except FAILURES as e:
        print(f"colmz {args.command}: failed, store unchanged: {one_line(e)}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print_json(summary, out)
    else:
        module.render(summary, out)
    return EXIT_OK
