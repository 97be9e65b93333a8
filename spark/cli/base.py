"""What every ``colmz`` command shares: exit codes, argument types, errors, progress, Spark.

Design
------
A command module (``colmz.spark.cli.sink``, ``read``, ...) adds its parser, runs, and renders
its summary; this module holds what they have in common, so no command imports another:

* **Exit codes** -- :data:`EXIT_OK` 0, :data:`EXIT_FAIL` 1 (the store is unchanged),
  :data:`EXIT_INPUT` 2 (bad input or usage, as argparse's own), :data:`EXIT_INTERRUPTED` 130.
* **Errors** -- :class:`InputError` (bad input, status 2) and :data:`FAILURES` (a store that
  cannot be used, a failed verification: status 1); both print one line and no traceback.
  Anything else is a bug and keeps its traceback.
* **Argument types** -- :func:`csv_list`, :func:`nonneg`, :func:`positive`,
  :func:`consensus_url`: argparse calls them, so a bad value is one usage line and status 2.
* **Progress** -- :class:`Progress` (a bar on a terminal, a line per phase elsewhere, nothing
  with ``--quiet``) and its :class:`Phase`.
* **Spark** -- :func:`start_spark`: the session a command runs on (the quick-start JVM on a
  local master).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
import time as _time
import urllib.parse
from pathlib import Path

from colmz.arrangement import ArrangementError
from colmz.progress import Bar
from colmz.spark.schemas import InputError
from colmz.spark.sink_store import OLD_MANIFEST, SinkStore, SinkStoreError, open_sink_store
from colmz.storage.url import local_path

__all__ = [
    "EXIT_FAIL",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "FAILURES",
    "InputError",
    "Phase",
    "Progress",
    "VerificationError",
    "add_spark_options",
    "as_input_error",
    "check_exists",
    "check_store_url",
    "consensus_url",
    "csv_list",
    "nonneg",
    "open_input_store",
    "positive",
    "print_json",
    "read_parquet",
    "start_spark",
]

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
#: Exit status of a command stopped by SIGINT (128 + the signal's number, as shells report it).
EXIT_INTERRUPTED = 128 + signal.SIGINT


class VerificationError(RuntimeError):
    """The store would not equal the view at some verified tick (nothing was committed)."""


#: Failures reported as ``colmz CMD: failed, store unchanged: ...`` with status 1.
FAILURES: tuple[type[BaseException], ...] = (SinkStoreError, VerificationError, ArrangementError)


# ----------------------------------------------------------------------------- argument types


def csv_list(s: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (column lists)."""
    return [x.strip() for x in s.split(",") if x.strip()]


def _integer(s: str, what: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None


def nonneg(s: str) -> int:
    """A non-negative integer argument (a time)."""
    v = _integer(s, "a non-negative integer")
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {v}")
    return v


def positive(s: str) -> int:
    """A positive integer argument (a count); ``0`` and ``-5`` get the same message."""
    v = _integer(s, "a positive integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def consensus_url(s: str) -> str:
    """A consensus URL: ``postgresql://...`` or ``sqlite:///absolute/path``.

    ``sqlite:///name.sqlite`` is an absolute path in the filesystem root, almost always a
    relative path meant; it is refused with the absolute spelling rather than creating a file
    in ``/`` (``colmz.storage.url.sqlite_path``, the library's own rule).

    >>> consensus_url("sqlite:///tmp/c.sqlite")
    'sqlite:///tmp/c.sqlite'
    >>> consensus_url("sqlite:///c.sqlite")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'sqlite:///c.sqlite' names '/c.sqlite', a file in the filesystem root; for a path relative to here write sqlite:///ABSOLUTE/PATH, e.g. sqlite:///$PWD/c.sqlite
    """
    parts = urllib.parse.urlsplit(s)
    if parts.scheme == "sqlite":
        from colmz.storage.url import sqlite_path

        try:
            sqlite_path(s)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return s
    if parts.scheme in ("postgresql", "postgres"):
        return s
    raise argparse.ArgumentTypeError(f"expected postgresql://... or sqlite:///absolute/path, got {s!r}")


def add_spark_options(sp: argparse.ArgumentParser) -> None:
    """The options of every command that runs Spark (``--master``, ``--partitions``, ...)."""
    sp.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s); "
                    "e.g. local[*], local-cluster[2,1,1024], yarn")
    sp.add_argument("--partitions", type=positive, default=None,
                    help="spark.sql.shuffle.partitions (default: the local cores)")
    sp.add_argument("--buckets", type=positive, default=None,
                    help="key buckets of the shuffle (default: --partitions)")
    sp.add_argument("--quiet", "-q", action="store_true", help="print only the summary")
    sp.add_argument("--json", action="store_true", help="print the summary as JSON")


# ----------------------------------------------------------------------------- checks


@contextlib.contextmanager
def as_input_error():
    """Report the column and argument checks' ``TypeError``/``ValueError`` as bad input.

    Only wrapped around checks that run before anything is written; everywhere else such an
    exception is a bug and keeps its traceback.
    """
    try:
        yield
    except InputError:
        raise
    except (TypeError, ValueError) as e:
        raise InputError(str(e)) from e


def check_exists(path: str, what: str) -> None:
    if not Path(path).exists():
        raise InputError(f"{what} {path!r} does not exist")


def check_store_url(url: str, consensus: str | None) -> None:
    """An ``s3://`` store needs ``--consensus``: said as bad input, naming the flag."""
    if url.startswith("s3://") and consensus is None:
        raise InputError(f"store {url!r} is on S3, which has no compare-and-set: give its metadata "
                         "database with --consensus postgresql://user@host/db or sqlite:///absolute/path")


def open_input_store(path: str, consensus: str | None = None) -> SinkStore | None:
    """The store at ``path`` when it is one (what ``colmz sink`` writes), checked; None for
    anything else (a Parquet path). A colmz 0.1 store is refused with ``colmz migrate``."""
    check_store_url(path, consensus)
    p = local_path(path)
    if p is None or (p / "consensus.sqlite").is_file() or (p / OLD_MANIFEST).is_file() or consensus is not None:
        store = open_sink_store(path, consensus)
        return store if store.exists else None
    return None


def read_parquet(spark, path: str, what: str):
    """``spark.read.parquet(path)``, a path that is not Parquet reported as bad input."""
    check_exists(path, what)
    try:
        return spark.read.parquet(path)
    except Exception as e:  # AnalysisException: not Parquet, no files
        raise InputError(f"cannot read {what} {path!r} as Parquet: {str(e).splitlines()[0]}") from None


def start_spark(args):
    """The session a command runs on (``--master``, ``--partitions``)."""
    from colmz.spark.session import session

    # A command is a short job: on a local master, the quick-start JVM (session's docs).
    spark = session(args.master, "colmz-" + args.command, shuffle_partitions=args.partitions,
                    quick_start=args.master.startswith("local"))
    quiet_task_failures(spark)
    return spark


#: Spark's loggers that print a failed task's whole Python and JVM traceback (about 40 lines)
#: as it happens. A command reports the failure itself: one line for what it recognises (a
#: damaged part), else the job's exception, whose text carries the same worker traceback.
TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager")


def quiet_task_failures(spark) -> None:
    """Silence :data:`TASK_FAILURE_LOGGERS` in this JVM (best effort: a log4j 2 JVM)."""
    try:
        jvm = spark.sparkContext._jvm
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in TASK_FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)
    except Exception:  # noqa: BLE001 - another logging backend: Spark's lines stay
        pass


def print_json(summary: dict, out) -> None:
    print(json.dumps(summary), file=out)


# ----------------------------------------------------------------------------- progress


class Progress:
    """What a command shows while it works, on ``out``.

    - On a terminal: a single line redrawn in place (:class:`colmz.progress.Bar`) -- the
      phase, and while Spark runs jobs the tasks done of the active stages with their rate
      and time left (library calls such as ``Arrangement.maintain`` feed it through
      :meth:`callback`); the line is wiped when the command ends, leaving its summary.
    - Elsewhere (a pipe, a file, a CI log): one line per finished phase with what it found
      and how long it took -- no bar, no redrawn frames.
    - ``--quiet``: nothing but the summary.
    """

    def __init__(self, out, spark=None, quiet: bool = False, interval: float = 0.25):
        self.bar = Bar(out, quiet=quiet)
        self.out = out
        self.spark = spark
        self.lines = not quiet and not self.bar.enabled
        self.interval = interval
        self.t0 = _time.perf_counter()
        self.phases: dict[str, float] = {}
        self.current: Phase | None = None

    def say(self, msg: str) -> None:
        """A finding: part of the running phase's line, or a line of its own outside one."""
        if self.current is not None:
            self.current.notes.append(msg)
        elif self.lines:
            print(msg, file=self.out, flush=True)
        else:
            self.bar.note(msg)

    def phase(self, name: str) -> Phase:
        return Phase(self, name)

    def callback(self, label: str):
        """A ``progress(done, total, step)`` callback drawing ``label: step`` on the bar."""

        def progress(done: int, total: int, step: str) -> None:
            if self.current is not None:
                self.current.fed = True  # the phase's own figures replace the idle line
            self.bar(done, total, f"{label}: {step}")

        return progress

    def close(self) -> None:
        self.bar.close(clear=True)


class Phase:
    def __init__(self, progress: Progress, name: str):
        self.p = progress
        self.name = name
        self.notes: list[str] = []
        self.fed = False  # a library callback draws this phase's progress
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Phase:
        self.start = _time.perf_counter()
        self.p.current = self
        self.p.bar(0, 0, self.name)
        if self.p.bar.enabled:
            self.thread = threading.Thread(target=self._watch, daemon=True)
            self.thread.start()
        return self

    def _watch(self) -> None:
        # Spark reports task counts per stage (the sink runs all its ticks inside tasks);
        # between jobs the line shows the phase and its time so far.
        tracker = self.p.spark.sparkContext.statusTracker() if self.p.spark is not None else None
        while not self.stop.wait(self.p.interval):
            done = total = 0
            stages = []
            try:
                for sid in tracker.getActiveStageIds() if tracker is not None else ():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        stages.append(sid)
                        done += info.numCompletedTasks
                        total += info.numTasks
            except Exception:  # the context is stopping (the command failed): the line stays
                tracker = None
            if stages:
                ids = ",".join(map(str, sorted(stages)))
                self.p.bar(done, total, f"{self.name}: stage{'s' if len(stages) > 1 else ''} {ids}")
            elif not self.fed:
                self.p.bar(0, 0, self.name)

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.p.current = None
        took = _time.perf_counter() - self.start
        self.p.phases[self.name] = took
        if exc[0] is None and self.p.lines:
            found = "".join(f"; {n}" for n in self.notes)
            print(f"[{_time.perf_counter() - self.p.t0:7.1f}s] {self.name}: done in {took:.1f} s{found}",
                  file=self.p.out, flush=True)
        return False


