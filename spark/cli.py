"""The ``colmz`` command: the self-correcting sink job, reading its store back, and
consolidate/snapshot over Parquet files or stores.

``colmz sink`` keeps a store of updates equal to a temporal-filter view of an events table,
writing only corrections::

    colmz sink                                  # generated example events, ./colmz_store
    colmz sink --input events.parquet --keys customer,region --value plan --store out/

The store is a ``colmz.Arrangement`` (``colmz.spark.sink_store``): a directory, or
``s3://bucket/prefix`` with ``--consensus postgresql://...``. Steps:
check the arguments and the store without Spark; read and validate the events (nothing is
written when they are bad); read the store on the executors; run :func:`colmz.spark.sink` over
the ticks not yet final in the store, the executors writing the corrections as parts; verify
store plus corrections against the view evaluated straight from the events at a sample of
ticks (``--verify-with``: pyarrow in the driver for small inputs, Spark SQL otherwise);
commit the parts and the new seal (the last tick + 1) in one compare-and-set on the driver;
compact; print a summary. A run that fails or loses the compare-and-set commits nothing and
deletes the parts it wrote.

Ticks before the store's seal are final: a re-run over the same ticks has nothing to do (and
needs no Spark), and a run over changed events writes the difference at its first tick at or
after the seal.

``colmz read STORE [--as-of T] [--output FILE]`` prints (or writes) the view the store holds
at a time, without Spark; ``colmz migrate OLD NEW`` converts a store of colmz 0.1.

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
import contextlib
import json
import os
import shutil
import sys
import threading
import time as _time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from colmz.arrangement import Arrangement, ArrangementError, CommitConflict
from colmz.order import ColumnSpec
from colmz.progress import Bar
from colmz.spark import stream_cli
from colmz.spark.arrangement_io import part_list, read_parts, read_parts_local, write_runs
from colmz.spark.events import (
    EventsSpec,
    check_event_values,
    check_events,
    check_schema,
    desired_updates,
    example_events_table,
    verify,
    verify_local,
)
from colmz.spark.frames import consolidate, snapshot
from colmz.spark.schemas import (
    SPARK_MAX_TIME,
    InputError,
    check_update_columns,
    check_update_values,
)
from colmz.spark.session import start_python_workers, stop_tasks
from colmz.spark.sink import SinkStats, check_ticks, sink
from colmz.spark.sink_store import NAME, SinkStore, discard_run, migrate, open_sink_store
from colmz.spark.store import MANIFEST, Store, StoreError, view_table

__all__ = ["VerificationError", "main", "run_consolidate", "run_migrate", "run_read", "run_sink"]

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


class VerificationError(RuntimeError):
    """The store would not equal the view at some verified tick (nothing was committed)."""


# ----------------------------------------------------------------------------- progress


class _Progress:
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
        self.current: _Phase | None = None

    def say(self, msg: str) -> None:
        """A finding: part of the running phase's line, or a line of its own outside one."""
        if self.current is not None:
            self.current.notes.append(msg)
        elif self.lines:
            print(msg, file=self.out, flush=True)
        else:
            self.bar.note(msg)

    def phase(self, name: str) -> _Phase:
        return _Phase(self, name)

    def callback(self, label: str):
        """A ``progress(done, total, step)`` callback drawing ``label: step`` on the bar."""

        def progress(done: int, total: int, step: str) -> None:
            if self.current is not None:
                self.current.fed = True  # the phase's own figures replace the idle line
            self.bar(done, total, f"{label}: {step}")

        return progress

    def close(self) -> None:
        self.bar.close(clear=True)


class _Phase:
    def __init__(self, progress: _Progress, name: str):
        self.p = progress
        self.name = name
        self.notes: list[str] = []
        self.fed = False  # a library callback draws this phase's progress
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> _Phase:
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


# ----------------------------------------------------------------------------- helpers


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _nonneg(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {v}")
    return v


def _positive(s: str) -> int:
    v = _nonneg(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


@contextlib.contextmanager
def _as_input_error():
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


def sample_ticks(ticks: Sequence[int], k: int) -> list[int]:
    """``k`` ticks spread evenly over ``ticks``, always including the first and the last.

    >>> sample_ticks(range(1000), 5)
    [0, 250, 500, 749, 999]
    >>> sample_ticks([3, 7], 5)
    [3, 7]
    """
    ticks = list(ticks)
    if k <= 0 or not ticks:
        return []
    if k >= len(ticks):
        return ticks
    if k == 1:
        return [ticks[-1]]
    idx = sorted({round(i * (len(ticks) - 1) / (k - 1)) for i in range(k)})
    return [ticks[i] for i in idx]


def _spark(args):
    from colmz.spark.session import session

    # A command is a short job: on a local master, the quick-start JVM (session's docs).
    return session(args.master, "colmz-" + args.command, shuffle_partitions=args.partitions,
                   quick_start=args.master.startswith("local"))


def _check_exists(path: str, what: str) -> None:
    if not Path(path).exists():
        raise InputError(f"{what} {path!r} does not exist")


def _input_store(path: str, consensus: str | None = None) -> Store | SinkStore | None:
    """The store at ``path`` when it is one, checked: a colmz 0.1 store (a directory with a
    manifest) or an arrangement (what ``colmz sink`` writes); None for anything else."""
    p = Path(path) if "://" not in path else None
    if p is not None and p.is_dir() and (p / MANIFEST).is_file():
        store = Store(p)
        store.verify()
        return store
    if p is None or (p / "consensus.sqlite").is_file() or consensus is not None:
        store = open_sink_store(path, consensus)
        return store if store.exists else None
    return None


def _store_updates(spark, store):
    """The updates a checked input store holds, as a DataFrame (None when it holds nothing)."""
    if isinstance(store, Store):
        return store.read(spark)
    arr = store.arrangement
    if arr.schema is None:
        return None
    return read_parts(spark, store.url, arr.schema, part_list(arr))


def _read_parquet(spark, path: str, what: str):
    _check_exists(path, what)
    try:
        return spark.read.parquet(path)
    except Exception as e:  # AnalysisException: not Parquet, no files
        raise InputError(f"cannot read {what} {path!r} as Parquet: {str(e).splitlines()[0]}") from None


# ----------------------------------------------------------------------------- colmz sink


@dataclass
class _SinkRun:
    """What the phases of one ``colmz sink`` run hand each other."""

    args: argparse.Namespace
    ticks: list[int]
    store: SinkStore
    owner: str = field(default_factory=lambda: uuid.uuid4().hex)
    floor: int = 0  # the first tick not yet final in the store (its seal, or its since if later)
    live: list[int] = field(default_factory=list)
    events: object = None
    events_table: object = None  # the events as a pyarrow.Table when they are in the driver
    spec: EventsSpec | None = None
    n_events: int = 0
    source: str = ""
    persisted: object = None
    runs: list = field(default_factory=list)
    schema: tuple = ()
    stats: SinkStats | None = None
    checked: dict = field(default_factory=dict)
    verified_with: str = ""  # "local" or "spark" once verified
    committed: bool = False


def run_sink(args, out=None) -> dict:
    """Run the sink job for parsed ``args``; return the summary (see :func:`main`)."""
    out = out or sys.stdout
    t_start = _time.perf_counter()
    run = _plan_sink(args)  # everything that needs no Spark, before the session starts
    if not run.live:
        # Every tick is final in the store already: nothing can be written, no Spark needed.
        progress = _Progress(out, None, quiet=args.quiet)
        progress.say(f"{run.store.describe()}: ticks through {run.ticks[-1]} are final, nothing to "
                     "write (run more --ticks to go on)")
        return _summary(run, progress, t_start)
    progress = _Progress(out, quiet=args.quiet)
    try:
        with progress.phase("starting Spark"):
            spark = progress.spark = _spark(args)
            if args.master.startswith("local"):
                # The Python workers start while the JVM reads the events and plans the sink.
                start_python_workers(spark)
        try:
            _read_events(spark, run, progress)
            _read_store(spark, run, progress)
            _write_corrections(spark, run, progress)
            _verify(spark, run, progress)
            _commit(run, progress)
        except BaseException:
            if not run.committed:
                with contextlib.suppress(Exception):  # e.g. the JVM is gone: nothing runs then
                    stop_tasks(spark)  # a failed job's other tasks may still be writing parts
                discard_run(run.store, run.owner)  # the parts this run wrote, failed attempts included
            raise
        _maintain(run, progress)
    finally:
        progress.close()  # wipe the bar before the summary or an error is printed
    return _summary(run, progress, t_start)


def _plan_sink(args) -> _SinkRun:
    """Check the arguments, the input path and the store (metadata, parts) without Spark."""
    last = args.first_tick + (args.ticks - 1) * args.tick_step
    if last >= SPARK_MAX_TIME:
        raise InputError(f"the last tick {last} does not fit a Spark long")
    ticks = check_ticks(range(args.first_tick, last + 1, args.tick_step))
    if args.input is not None:
        if args.keys is None:
            raise InputError("--keys is required with --input (the key columns of the events)")
        _check_exists(args.input, "events")
    store = open_sink_store(args.store, args.consensus)
    run = _SinkRun(args, ticks, store)
    arr = store.arrangement
    if arr is not None and arr.get_seal() is None:
        raise StoreError(f"store {args.store!r} is sealed for good (its upper is the empty frontier)")
    # Ticks before the store's seal are final: this run can only write at later ticks.
    run.floor = 0 if arr is None else max(arr.get_seal(), arr.since())
    run.live = [t for t in ticks if t >= run.floor]
    return run


def _read_events(spark, run: _SinkRun, progress) -> None:
    args = run.args
    with progress.phase("reading events"):
        if args.input is None:
            # Generated here (numpy), checked here, handed to Spark as Arrow: no Spark job.
            import pyarrow.compute as pc

            n_ticks = len(run.ticks) * args.tick_step
            table = example_events_table(args.example_events, ticks=n_ticks, seed=args.seed)
            for c in ("valid_from", "valid_to"):
                table = table.set_column(table.schema.get_field_index(c), c, pc.add(table.column(c), args.first_tick))
            events = spark.createDataFrame(table)
            spec = EventsSpec(("customer", "region"), "plan")
            source = f"generated example ({args.example_events} events, seed {args.seed})"
            with _as_input_error():
                check_schema(events.schema, spec)
                run.n_events = check_event_values(table, spec)
            run.events_table = table
        else:
            events = _read_parquet(spark, args.input, "events")
            spec = EventsSpec(tuple(args.keys), args.value, args.valid_from, args.valid_to)
            source = args.input
            with _as_input_error():
                run.n_events = check_events(events, spec)
        run.events, run.spec, run.source = events, spec, source
        progress.say(f"{run.n_events} events from {source}; view columns {spec.data}")


def _read_store(spark, run: _SinkRun, progress) -> None:
    arr = run.store.pinned
    with progress.phase("reading store"):
        progress.say(f"{run.store.describe()}")
        if arr is None:
            return
        stored = [s.name for s in arr.schema]
        if stored != list(run.spec.data):
            raise StoreError(
                f"store {run.args.store!r} holds columns {[*stored, 'time', 'diff']}, the view has "
                f"{[*run.spec.data, 'time', 'diff']}"
            )
        run.persisted = read_parts(spark, run.store.url, arr.schema, part_list(arr))


def _write_corrections(spark, run: _SinkRun, progress) -> None:
    args = run.args
    arr = run.store.pinned
    ticks = f"{run.live[0]}..{run.live[-1]}" if len(run.live) > 1 else f"{run.live[0]}"
    with progress.phase(f"sink over {len(run.live)} ticks ({ticks}, writing corrections)"):
        # Building the plan is part of the phase: Spark analyses it (for its schema) here.
        run.stats = SinkStats(spark)
        desired = desired_updates(run.events, run.spec)
        with _as_input_error():  # column checks only: the DataFrame is lazy
            corrections = sink(desired, run.persisted, run.live, data=run.spec.data, since=run.floor or None,
                               buckets=args.buckets, stats=run.stats)
        schema = _arrow_schema(corrections, run.spec.data)
        if arr is not None and tuple(arr.schema) != schema:
            raise InputError(f"the view's column types {_describe_specs(schema)} differ from the store's "
                             f"{_describe_specs(arr.schema)}")
        run.store.prepare()
        run.runs = write_runs(corrections, run.store.url, schema, prefix=f"{NAME}/parts/", owner=run.owner)
        n = sum(r.len for r in run.runs)
        progress.say(f"{n} corrections in {len(run.runs)} runs; largest correction buffer "
                     f"{run.stats.largest_buffer} updates")
        wpt = run.stats.written_per_tick
        if len(wpt):
            busy = int((wpt > 0).sum())
            progress.say(f"corrections at {busy} of {len(run.live)} ticks, at most {int(wpt.max())} per tick")
    run.schema = schema


#: Most events, and most stored plus written updates, ``--verify-with auto`` evaluates in
#: the driver (a few hundred MB of Arrow at most); beyond either, Spark SQL does it.
LOCAL_VERIFY_ROWS = 2_000_000


def _verify_where(run: _SinkRun) -> str:
    """``local`` or ``spark``: where ``--verify-with`` (``auto`` by size) has the view evaluated."""
    choice = run.args.verify_with
    if choice != "auto":
        return choice
    arr = run.store.pinned
    stored = int(arr.stats()["stored_updates"]) if arr is not None else 0
    written = sum(r.len for r in run.runs)
    small = run.n_events <= LOCAL_VERIFY_ROWS and stored + written <= LOCAL_VERIFY_ROWS
    return "local" if small else "spark"


def _verify(spark, run: _SinkRun, progress) -> None:
    sample = sample_ticks(run.live, run.args.verify_ticks)
    if not sample or run.stats is None:
        return
    run.verified_with = where = _verify_where(run)
    against = "a local evaluation" if where == "local" else "Spark SQL"
    with progress.phase(f"verifying {len(sample)} ticks against {against}"):
        written = [(k, 0) for r in run.runs for k in r.keys]
        if where == "local":
            # The events (collected when Spark holds them) and the store's parts plus the
            # written ones, read in the driver; the view is counted with pyarrow.
            events = run.events_table
            if events is None:
                cols = [*run.spec.data, run.spec.valid_from, run.spec.valid_to]
                events = run.events.select(*cols).toArrow()
            arr = run.store.pinned
            stored = part_list(arr) if arr is not None else []
            after = read_parts_local(run.store.url, run.schema, [*stored, *written])
            run.checked = verify_local(events, after, run.spec, sample)
        else:
            after = read_parts(spark, run.store.url, run.schema, written)
            if run.persisted is not None:
                after = run.persisted.unionByName(after)
            run.checked = verify(spark, run.events, after, run.spec, sample)
        progress.say("ticks " + ", ".join(f"{t} ({r['rows']} rows)" for t, r in run.checked.items())
                     + f": {sum(r['mismatches'] for r in run.checked.values())} mismatches")
        bad = {t: r for t, r in run.checked.items() if r["mismatches"]}
        if bad:
            raise VerificationError(f"store would differ from the view at ticks {sorted(bad)}: {bad}")


def _commit(run: _SinkRun, progress) -> None:
    if not run.live:
        return
    upper = run.live[-1] + 1
    with progress.phase("committing"):
        arr = run.store.arrangement
        if arr is None:
            arr = Arrangement.open(run.store.url, schema=run.schema, consensus=run.store.consensus, name=NAME)
            if arr.seqno != 1:
                raise StoreError(f"store {run.args.store!r} was created by another writer during this run; "
                                 "nothing committed (re-run the job)")
            run.store.arrangement = arr
        try:
            arr.append_runs(run.runs, seal=upper)
        except CommitConflict as e:
            raise StoreError(f"store {run.args.store!r} was changed by another writer during this run "
                             f"({e}); the corrections would be wrong, nothing committed (re-run the job)") from None
        run.committed = True
        n = sum(r.len for r in run.runs)
        progress.say(f"version {arr.seqno}: {n} updates, sealed through tick {upper - 1}"
                     if n else f"nothing to write: the store already equals the view; "
                     f"sealed through tick {upper - 1}")


def _maintain(run: _SinkRun, progress) -> None:
    arr = run.store.arrangement
    if arr is None or not run.committed:
        return
    with progress.phase("compacting"):
        report = arr.maintain(progress=progress.callback("compacting"))
        progress.say(f"{report['drains']} drains, {report['compactions']} compactions; "
                     f"{arr.stats()['trace_batches']} trace batches")


def _summary(run: _SinkRun, progress, t_start: float) -> dict:
    arr = run.store.arrangement
    st = arr.stats() if arr is not None else {"stored_updates": 0, "parts": 0}
    seal = arr.get_seal() if arr is not None else 0
    return {
        "ticks": len(run.ticks),
        "first_tick": run.ticks[0],
        "last_tick": run.ticks[-1],
        "live_ticks": len(run.live),
        "events": run.n_events,
        "updates_written": sum(r.len for r in run.runs) if run.committed else 0,
        "largest_correction_buffer": run.stats.largest_buffer if run.stats else 0,
        "inserted": run.stats.inserted if run.stats else 0,
        "store": run.store.url,
        "store_version": arr.seqno if arr is not None else 0,
        "store_updates": int(st["stored_updates"]),
        "store_parts": int(st["parts"]),
        "sealed_through": seal - 1,
        "verified_ticks": sorted(run.checked),
        "verified_with": run.verified_with,
        "seconds": round(_time.perf_counter() - t_start, 3),
        "phases": {k: round(v, 3) for k, v in progress.phases.items()},
    }


def _arrow_schema(df, data) -> tuple[ColumnSpec, ...]:
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(df.schema)
    return tuple(ColumnSpec(n, arrow.field(n).type) for n in data)


def _describe_specs(schema) -> str:
    return "(" + ", ".join(f"{s.name}: {s.type}" for s in schema) + ")"


def _print_summary(summary: dict, out, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary), file=out)
        return
    print("summary", file=out)
    print(f"  ticks                      {summary['ticks']} ({summary['first_tick']}..{summary['last_tick']})", file=out)
    print(f"  events                     {summary['events']}", file=out)
    print(f"  updates written            {summary['updates_written']}", file=out)
    print(f"  largest correction buffer  {summary['largest_correction_buffer']}", file=out)
    print(f"  verified ticks             {summary['verified_ticks']}", file=out)
    print(f"  store                      {summary['store']} (version {summary['store_version']}, "
          f"{summary['store_updates']} updates in {summary['store_parts']} parts, sealed through "
          f"tick {summary['sealed_through']})", file=out)
    print(f"  time                       {summary['seconds']:.1f} s", file=out)


# ----------------------------------------------------------------------------- consolidate / snapshot


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


def run_consolidate(args, out=None) -> dict:
    """``colmz consolidate`` / ``colmz snapshot`` for parsed ``args``; return a summary."""
    out = out or sys.stdout
    t0 = _time.perf_counter()
    if "://" not in args.input:
        _check_exists(args.input, "input")
    if Path(args.output).exists() and not args.overwrite:
        raise InputError(f"output {args.output!r} exists; pass --overwrite to replace it")
    store = _input_store(args.input, args.consensus)  # a store is read through its metadata
    progress = _Progress(out, quiet=args.quiet)
    try:
        return _consolidate(args, store, progress, t0)
    finally:
        progress.close()


def _consolidate(args, store, progress: _Progress, t0: float) -> dict:
    with progress.phase("starting Spark"):
        spark = progress.spark = _spark(args)
    with progress.phase(f"reading {args.input}"):
        if store is not None:
            df = _store_updates(spark, store)
            if df is None:
                raise InputError(f"store {args.input!r} holds nothing yet")
        else:
            df = _read_parquet(spark, args.input, "input")
        with _as_input_error():
            data = check_update_columns(df.schema, args.data, args.time, args.diff)
        rows_in = check_update_values(df, args.time, args.diff)
    with progress.phase(f"{args.command} -> {args.output}"):
        with _as_input_error():  # argument checks only: the DataFrame is lazy
            if args.command == "snapshot":
                result = snapshot(df, args.as_of, data, args.time, args.diff, buckets=args.buckets,
                                  partial=args.partial)
            else:
                result = consolidate(df, data, args.time, args.diff, since=args.since, upper=args.upper,
                                     buckets=args.buckets, partial=args.partial)
        rows_out = _write_atomic(result, args.output, args.overwrite)
    return {"input_rows": rows_in, "output_rows": rows_out, "output": str(Path(args.output).absolute()),
            "seconds": round(_time.perf_counter() - t0, 3)}


# ----------------------------------------------------------------------------- read


def run_read(args, out=None) -> dict:
    """``colmz read``: the view a store holds at a time, without Spark; return a summary."""
    import pyarrow.parquet as pq

    out = out or sys.stdout
    t0 = _time.perf_counter()
    if "://" not in args.store:
        _check_exists(args.store, "store")
    store = _input_store(args.store, args.consensus)
    if store is None:
        raise InputError(f"{args.store!r} is not a colmz store (neither an arrangement nor {MANIFEST})")
    if isinstance(store, Store):
        view = store.view(args.as_of)
        if view is None:
            raise InputError(f"store {args.store!r} holds nothing yet")
        as_of = args.as_of
        if as_of is None:
            t = store.read_arrow().column("time")
            as_of = int(max(t.to_pylist())) if len(t) else 0
    else:
        view, as_of = _arrangement_view(store, args.as_of)
    where = str(store.path) if isinstance(store, Store) else store.url
    summary = {"store": where, "as_of": as_of, "rows": view.num_rows,
               "total_count": int(sum(view.column("count").to_pylist()))}
    if args.output is not None:
        target = Path(args.output)
        if target.exists() and not args.overwrite:
            raise InputError(f"output {args.output!r} exists; pass --overwrite to replace it")
        tmp = target.parent / f".{target.name}.colmz-{uuid.uuid4().hex}.tmp"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(view, tmp)
        os.replace(tmp, target)
        summary["output"] = str(target.absolute())
    elif not args.json:
        _print_table(view, out, args.limit)
    summary["seconds"] = round(_time.perf_counter() - t0, 3)
    return summary


def _arrangement_view(store: SinkStore, as_of: int | None):
    """The view an arrangement store holds at ``as_of`` (default: its last final tick)."""
    arr = store.arrangement
    seal = arr.get_seal()
    if seal == 0 or arr.schema is None:
        raise InputError(f"store {store.url!r} holds nothing final yet (nothing sealed)")
    last = (seal - 1) if seal is not None else None
    if as_of is None:
        if last is None:
            raise InputError(f"store {store.url!r} is closed for good; give --as-of")
        as_of = last
    if as_of < arr.since() or (last is not None and as_of > last):
        raise InputError(f"--as-of {as_of} is outside the final, uncompacted ticks of store "
                         f"{store.url!r}: [{arr.since()}, {last}]")
    return view_table(arr.read(as_of)), as_of  # read(as_of) is consolidated, in data order


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


# ----------------------------------------------------------------------------- migrate


def run_migrate(args, out=None) -> dict:
    """``colmz migrate OLD NEW``: convert a colmz 0.1 store into an arrangement (no Spark)."""
    t0 = _time.perf_counter()
    _check_exists(args.old, "store")
    progress = _Progress(out or sys.stdout, quiet=args.quiet)
    try:
        with progress.phase(f"migrating {args.old} -> {args.new}"):
            summary = migrate(args.old, args.new, consensus=args.consensus,
                              progress=progress.callback("migrating"))
    finally:
        progress.close()
    summary["seconds"] = round(_time.perf_counter() - t0, 3)
    return summary


# ----------------------------------------------------------------------------- argparse


def build_parser() -> argparse.ArgumentParser:
    """The ``colmz`` argument parser (``colmz --help``, ``colmz sink --help``, ...)."""
    p = argparse.ArgumentParser(
        prog="colmz",
        description="colmz on Spark: a self-correcting materialized-view sink, and "
        "consolidate/snapshot over Parquet files of updates (data..., time, diff).",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp):
        sp.add_argument("--master", default="local[2]", help="Spark master (default: %(default)s); "
                        "e.g. local[*], local-cluster[2,1,1024], yarn")
        sp.add_argument("--partitions", type=_positive, default=None,
                        help="spark.sql.shuffle.partitions (default: the local cores)")
        sp.add_argument("--buckets", type=_positive, default=None,
                        help="key buckets of the shuffle (default: --partitions)")
        sp.add_argument("--quiet", "-q", action="store_true", help="print only the summary")
        sp.add_argument("--json", action="store_true", help="print the summary as JSON")

    s = sub.add_parser(
        "sink",
        help="keep a store of updates equal to a temporal-filter view of events",
        description="Keep a store of updates (data..., time, diff) -- a colmz arrangement -- equal "
        "to the view 'rows (keys..., value) of the events with valid_from <= t < valid_to' at every "
        "tick t, appending only corrections. Without --input, runs on a generated example log. "
        "Ticks before the store's seal are final: a re-run over them appends nothing (and needs no "
        "Spark), a run over more ticks goes on, and a run over changed events writes the "
        "difference at its first tick at or after the seal. Bad events are reported before "
        "anything is written; a failed run commits nothing and deletes what it wrote.",
    )
    s.add_argument("--input", "-i", default=None, help="events table (Parquet file or directory); "
                   "default: a generated example")
    s.add_argument("--keys", type=_csv, default=None, help="key columns, comma-separated (required with --input)")
    s.add_argument("--value", default="value", help="value column (default: %(default)s)")
    s.add_argument("--valid-from", default="valid_from", help="interval start column (default: %(default)s)")
    s.add_argument("--valid-to", default="valid_to", help="interval end column, exclusive (default: %(default)s)")
    s.add_argument("--store", default="colmz_store",
                   help="the store: a directory, or s3://bucket/prefix with --consensus (default: %(default)s)")
    s.add_argument("--consensus", default=None,
                   help="the store's metadata database: postgresql://... or sqlite:///abs/path "
                   "(required for s3:// stores; default: the directory's own SQLite file)")
    s.add_argument("--ticks", type=_positive, default=1000, help="number of ticks (default: %(default)s)")
    s.add_argument("--first-tick", type=_nonneg, default=0, help="time of the first tick (default: %(default)s)")
    s.add_argument("--tick-step", type=_positive, default=1, help="time between ticks (default: %(default)s)")
    s.add_argument("--verify-ticks", type=_nonneg, default=5,
                   help="sample ticks at which store + corrections are checked against the view "
                   "evaluated straight from the events, 0 to skip (default: %(default)s)")
    s.add_argument("--verify-with", choices=("auto", "local", "spark"), default="auto",
                   help="where the view is evaluated for that check: 'local' in the driver with "
                   "pyarrow (the events and the store's parts are read into memory), 'spark' with "
                   "Spark SQL jobs; 'auto' (default) is local when the events and the stored plus "
                   f"written updates are each at most {LOCAL_VERIFY_ROWS:,} rows")
    s.add_argument("--example-events", type=_positive, default=20_000,
                   help="size of the generated example (default: %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="seed of the generated example (default: %(default)s)")
    common(s)

    r = sub.add_parser(
        "read",
        help="print (or write) the view a store holds at a time",
        description="The collection a colmz store holds at --as-of (default: its latest time): "
        "every update with time <= as-of counts, equal data rows are summed, zero counts are "
        "dropped. Reads only the files the store's manifest lists; needs no Spark. Prints a "
        "table, or writes Parquet (data columns and count) with --output.",
    )
    r.add_argument("store", help="the store (what colmz sink --store wrote)")
    r.add_argument("--consensus", default=None, help="the store's metadata database (s3:// stores)")
    r.add_argument("--as-of", type=_nonneg, default=None, help="the time to read at (default: the latest)")
    r.add_argument("--output", "-o", default=None, help="write the view as a Parquet file instead of printing it")
    r.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    r.add_argument("--limit", type=_positive, default=50, help="rows to print (default: %(default)s)")
    r.add_argument("--json", action="store_true", help="print only a JSON summary")

    m = sub.add_parser(
        "migrate",
        help="convert a store written by colmz 0.1 into an arrangement",
        description="Copy every update of a colmz 0.1 store (a _colmz_store.json manifest and "
        "commits/ folders) into a new arrangement store, seal it after its last time and compact "
        "it. The old store is left as it is. Needs no Spark.",
    )
    m.add_argument("old", help="the colmz 0.1 store directory")
    m.add_argument("new", help="the new store: a directory, or s3://bucket/prefix with --consensus")
    m.add_argument("--consensus", default=None, help="the new store's metadata database")
    m.add_argument("--json", action="store_true", help="print the summary as JSON")
    m.add_argument("--quiet", "-q", action="store_true", help="print only the summary")

    for name, helptext in (("consolidate", "consolidate a Parquet file of updates"),
                           ("snapshot", "the collection a Parquet file of updates holds at a time")):
        c = sub.add_parser(name, help=helptext, description=helptext.capitalize() + ": equal "
                           "(data, time) summed, zero diffs dropped; written atomically as Parquet.")
        c.add_argument("input", help="input: a Parquet path of updates (data..., time, diff) or a colmz store")
        c.add_argument("--consensus", default=None, help="the input store's metadata database (s3:// stores)")
        c.add_argument("output", help="output Parquet directory")
        c.add_argument("--data", type=_csv, default=None, help="data columns (default: all but time and diff)")
        c.add_argument("--time", default="time", help="time column (default: %(default)s)")
        c.add_argument("--diff", default="diff", help="diff column (default: %(default)s)")
        if name == "consolidate":
            c.add_argument("--since", type=_nonneg, default=None, help="advance times to at least this")
            c.add_argument("--upper", type=_nonneg, default=None, help="keep only times before this")
        else:
            c.add_argument("--as-of", type=_nonneg, required=True, help="the time to read the collection at")
        c.add_argument("--partial", action="store_true",
                       help="also consolidate each input partition before the shuffle")
        c.add_argument("--overwrite", action="store_true", help="replace an existing output")
        common(c)
    stream_cli.add_parsers(sub, common, _csv, _positive)
    return p


def main(argv: Sequence[str] | None = None, out=None) -> int:
    """Entry point of the ``colmz`` console script; returns the exit status."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    # With --json, stdout carries only the JSON summary; progress goes to stderr.
    progress_out = sys.stderr if args.json else out
    try:
        if args.command == "sink":
            summary = run_sink(args, progress_out)
            _print_summary(summary, out, args.json)
        elif args.command == "migrate":
            summary = run_migrate(args, progress_out)
            if args.json:
                print(json.dumps(summary), file=out)
            else:
                print(f"{summary['updates']} updates from {summary['from']} -> {summary['to']} "
                      f"(sealed through tick {summary['sealed_through']})", file=out)
        elif args.command in ("stream", "ct"):
            run = stream_cli.run_stream if args.command == "stream" else stream_cli.run_ct
            summary = run(args, progress_out, _spark)
            stream_cli.print_summary(args.command, summary, out, args.json)
        elif args.command == "read":
            summary = run_read(args, out)
            if args.json:
                print(json.dumps(summary), file=out)
            elif "output" in summary:
                print(f"{summary['rows']} rows as of {summary['as_of']} -> {summary['output']}", file=out)
        else:
            summary = run_consolidate(args, progress_out)
            if args.json:
                print(json.dumps(summary), file=out)
            else:
                print(f"{summary['input_rows']} updates in, {summary['output_rows']} out -> "
                      f"{summary['output']} ({summary['seconds']:.1f} s)", file=out)
    except InputError as e:
        print(f"colmz {args.command}: bad input: {e}", file=sys.stderr)
        return EXIT_INPUT
    except (StoreError, VerificationError, ArrangementError) as e:
        print(f"colmz {args.command}: failed, store unchanged: {e}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
