"""``colmz sink``: keep a store of updates equal to a temporal-filter view of events.

Design
------
``colmz sink`` keeps a store of updates equal to a temporal-filter view of an events table,
writing only corrections::

    colmz sink                                  # generated example events, ./colmz_store
    colmz sink --input events.parquet --keys customer,region --value plan --store out/

The store is a ``colmz.Arrangement`` (``colmz.spark.sink_store`` says what it holds): a
directory, or ``s3://bucket/prefix`` with ``--consensus postgresql://...``. Steps: check the
arguments, the events' schema (a Parquet footer) and the store (metadata, the parts it names
and their footers; on S3, one small object written, read back and deleted, so missing
credentials are named before any part is written) without Spark; read and validate the events (nothing is written when they
are bad); read the store on the executors; run :func:`colmz.spark.sink` over the ticks not yet
final in the store, the executors writing the corrections as parts; verify store plus
corrections against the view evaluated straight from the events at a sample of ticks
(``--verify-with``: pyarrow in the driver for small inputs, Spark SQL otherwise; both count
rows with their multiplicity, as ``colmz read``'s ``total_count``); commit the parts and the
new seal (the last tick + 1) in one compare-and-set on the driver; compact; print a summary.
A run that fails or loses the compare-and-set commits nothing and deletes the parts it wrote
(also in a new store, whose own parts then look like lost metadata: no record names them).

Ticks before the store's seal are final: a re-run over the same ticks has nothing to do (and
needs no Spark), and a run over changed events writes the difference at its first tick at or
after the seal.
"""

from __future__ import annotations

import argparse
import contextlib
import time as _time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from colmz.arrangement import Arrangement, ArrangementError, CommitConflict, SealMismatch
from colmz.order import ColumnSpec
from colmz.spark.arrangement_io import part_list, read_parts, read_parts_local, write_runs
from colmz.spark.cli.base import (
    InputError,
    Progress,
    VerificationError,
    add_spark_options,
    as_input_error,
    check_outside_stores,
    check_store_url,
    consensus_url,
    csv_list,
    damaged_part,
    nonneg,
    parquet_schema,
    positive,
    probe_store_writes,
    read_parquet,
    start_spark,
    url_scheme,
)
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
from colmz.spark.schemas import SPARK_MAX_TIME
from colmz.spark.session import start_python_workers, stop_tasks
from colmz.spark.sink import SinkStats, check_ticks, sink
from colmz.spark.sink_store import NAME, SinkStore, SinkStoreError, discard_run, open_sink_store

__all__ = ["LOCAL_VERIFY_ROWS", "add_parser", "render", "run", "sample_ticks", "written_part_unreadable"]


#: Most events, and most stored plus written updates, ``--verify-with auto`` evaluates in
#: the driver (a few hundred MB of Arrow at most); beyond either, Spark SQL does it.
LOCAL_VERIFY_ROWS = 2_000_000


def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz sink`` to the subparsers ``sub``."""
    s = sub.add_parser(
        name,
        help=summary,
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
    s.add_argument("--keys", type=csv_list, default=None, help="key columns, comma-separated (required with --input)")
    s.add_argument("--value", default="value", help="value column (default: %(default)s)")
    s.add_argument("--valid-from", default="valid_from", help="interval start column (default: %(default)s)")
    s.add_argument("--valid-to", default="valid_to", help="interval end column, exclusive (default: %(default)s)")
    s.add_argument("--store", default="colmz_store",
                   help="the store: a directory, or s3://bucket/prefix with --consensus (default: %(default)s)")
    s.add_argument("--consensus", type=consensus_url, default=None,
                   help="the store's metadata database: postgresql://... or sqlite:///abs/path "
                   "(required for s3:// stores; default: the directory's own SQLite file)")
    s.add_argument("--ticks", type=positive, default=1000, help="number of ticks (default: %(default)s)")
    s.add_argument("--first-tick", type=nonneg, default=0, help="time of the first tick (default: %(default)s)")
    s.add_argument("--tick-step", type=positive, default=1, help="time between ticks (default: %(default)s)")
    s.add_argument("--verify-ticks", type=nonneg, default=5,
                   help="sample ticks at which store + corrections are checked against the view "
                   "evaluated straight from the events, 0 to skip (default: %(default)s)")
    s.add_argument("--verify-with", choices=("auto", "local", "spark"), default="auto",
                   help="where the view is evaluated for that check: 'local' in the driver with "
                   "pyarrow (the events and the store's parts are read into memory), 'spark' with "
                   "Spark SQL jobs; 'auto' (default) is local when the events and the stored plus "
                   f"written updates are each at most {LOCAL_VERIFY_ROWS:,} rows")
    s.add_argument("--example-events", type=positive, default=20_000,
                   help="density of the generated example: events per 1000 ticks, so a run over more "
                   "--ticks extends the same log (default: %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="seed of the generated example (default: %(default)s)")
    add_spark_options(s)
    return s



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


@dataclass
class _SinkRun:
    """What the phases of one ``colmz sink`` run hand each other."""

    args: argparse.Namespace
    ticks: list[int]
    store: SinkStore
    owner: str = field(default_factory=lambda: uuid.uuid4().hex)
    floor: int = 0  # the first tick not yet final in the store (its seal, or its since if later)
    seal: int = 0  # the store's seal the corrections were computed against
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


def run(args, out) -> dict:
    """Run the sink job for parsed ``args``, progress on ``out``; return the summary."""
    t_start = _time.perf_counter()
    run = _plan_sink(args)  # everything that needs no Spark, before the session starts
    if not run.live:
        # Every tick is final in the store already: nothing can be written, no Spark needed.
        progress = Progress(out, None, quiet=args.quiet)
        progress.say(f"{run.store.describe()}: ticks through {run.ticks[-1]} are final, nothing to "
                     "write (run more --ticks to go on)")
        return _summary(run, progress, t_start)
    progress = Progress(out, quiet=args.quiet)
    try:
        with progress.phase("starting Spark"):
            spark = progress.spark = start_spark(args)
            if args.master.startswith("local"):
                # The Python workers start while the JVM reads the events and plans the sink.
                start_python_workers(spark)
        try:
            _read_events(spark, run, progress)
            _read_store(spark, run, progress)
            _write_corrections(spark, run, progress)
            _verify(spark, run, progress)
            _commit(run, progress)
        except BaseException as e:
            if not run.committed:
                with contextlib.suppress(Exception):  # e.g. the JVM is gone: nothing runs then
                    stop_tasks(spark)  # a failed job's other tasks may still be writing parts
                discard_run(run.store, run.owner)  # the parts this run wrote, failed attempts included
            written = written_part_unreadable(e, run.owner, args.store)
            if written is not None:
                raise SinkStoreError(written) from None
            damaged = damaged_part(e)
            if damaged is not None:
                raise SinkStoreError(f"store {args.store!r} is damaged: {damaged}") from None
            raise
        _maintain(run, progress)
    finally:
        progress.close()  # wipe the bar before the summary or an error is printed
    return _summary(run, progress, t_start)


def written_part_unreadable(e: BaseException, owner: str, store: str) -> str | None:
    """The line for a part this run's own tasks wrote that reads back damaged (its key carries
    the run's ``owner``), else None. On S3 that is what unsigned requests leave on some
    servers: the executors lack the AWS credentials the driver has (its write probe passed).
    """
    found = damaged_part(e)  # found by a Spark task
    if found is None and isinstance(e, ArrangementError) and str(e).strip():
        found = str(e).strip().splitlines()[0]  # found in the driver
    if found is None or f"-{owner}_" not in found:
        return None
    hint = ("; the executors' S3 requests may be unsigned: give them AWS credentials (e.g. "
            "spark.executorEnv.AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)") if url_scheme(store) == "s3" else ""
    return f"a part this run wrote reads back damaged: {found}{hint}; the parts it wrote are deleted"


def _plan_sink(args) -> _SinkRun:
    """Check the arguments, the input path and the store (metadata, parts) without Spark."""
    last = args.first_tick + (args.ticks - 1) * args.tick_step
    if last >= SPARK_MAX_TIME:
        raise InputError(f"the last tick {last} does not fit a Spark long")
    ticks = check_ticks(range(args.first_tick, last + 1, args.tick_step))
    if args.input is not None:
        if args.keys is None:
            raise InputError("--keys is required with --input (the key columns of the events)")
        _check_events_schema(args)
    check_store_url(args.store, args.consensus, "--store")
    check_outside_stores(args.store, "--store")
    store = open_sink_store(args.store, args.consensus)
    run = _SinkRun(args, ticks, store)
    arr = store.arrangement
    if arr is not None and arr.get_seal() is None:
        raise SinkStoreError(f"store {args.store!r} is sealed for good (its upper is the empty frontier)")
    # Ticks before the store's seal are final: this run can only write at later ticks.
    run.floor = 0 if arr is None else max(arr.get_seal(), arr.since())
    run.seal = 0 if arr is None else arr.get_seal()
    run.live = [t for t in ticks if t >= run.floor]
    if run.live and url_scheme(args.store) == "s3":
        probe_store_writes(store.url)  # e.g. no AWS credentials: said before any part is written
    return run


def _check_events_schema(args) -> None:
    """The events' columns, checked from their Parquet footers before Spark starts (an empty
    directory or a file that is not Parquet is said here too); the same check runs again on
    the schema Spark reads."""
    schema = parquet_schema(args.input, "events")
    if schema is None:
        return
    spec = EventsSpec(tuple(args.keys), args.value, args.valid_from, args.valid_to)
    with as_input_error():
        check_schema(schema, spec)


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
            with as_input_error():
                check_schema(events.schema, spec)
                run.n_events = check_event_values(table, spec)
            run.events_table = table
        else:
            events = read_parquet(spark, args.input, "events")
            spec = EventsSpec(tuple(args.keys), args.value, args.valid_from, args.valid_to)
            source = args.input
            with as_input_error():
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
            raise SinkStoreError(
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
        with as_input_error():  # column checks only: the DataFrame is lazy
            corrections = sink(desired, run.persisted, run.live, data=run.spec.data, since=run.floor or None,
                               buckets=args.buckets, stats=run.stats)
        schema = _arrow_schema(corrections, run.spec.data)
        if arr is not None and tuple(arr.schema) != schema:
            raise InputError(f"the view's column types {_describe_specs(schema)} differ from the store's "
                             f"{_describe_specs(arr.schema)}")
        run.store.prepare()
        run.runs = write_runs(corrections, run.store.url, schema, prefix=f"{NAME}/parts/", owner=run.owner,
                              seqno=None if arr is None else arr.seqno)
        n = sum(r.len for r in run.runs)
        progress.say(f"{n} corrections in {len(run.runs)} runs; largest correction buffer "
                     f"{run.stats.largest_buffer} updates")
        wpt = run.stats.written_per_tick
        if len(wpt):
            busy = int((wpt > 0).sum())
            progress.say(f"corrections at {busy} of {len(run.live)} ticks, at most {int(wpt.max())} per tick")
    run.schema = schema


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
        written = [(p, 0) for r in run.runs for p in r.parts]
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
        # rows counted with their multiplicity: colmz read's total_count, not its rows
        progress.say("ticks " + ", ".join(f"{t} ({r['rows']} rows with multiplicity)"
                                          for t, r in run.checked.items())
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
                raise SinkStoreError(f"store {run.args.store!r} was created by another writer during this run; "
                                 "nothing committed (re-run the job)")
            run.store.arrangement = arr
        try:
            # One durable call: it lands only on the seal the corrections were computed
            # against (another sink run sealing meanwhile refuses it); a compare-and-set lost
            # to a commit that left the seal (maintenance) is retried by the arrangement.
            arr.append_runs(run.runs, seal=upper, expect=run.seal)
        except (SealMismatch, CommitConflict) as e:
            raise SinkStoreError(f"store {run.args.store!r} was changed by another writer during this run "
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


def render(summary: dict, out) -> None:
    """The summary for a reader (``--json`` prints the dict itself)."""
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


