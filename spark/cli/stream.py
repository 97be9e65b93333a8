"""``colmz stream``: the temporal-filter view over streaming events, kept in an arrangement.

Design
------
``colmz stream`` runs :func:`colmz.spark.stream.stream_sink` over a directory of Parquet event
files (Spark's file source: files added later are picked up), one line of progress per
micro-batch (on a terminal, above a bar counting the micro-batches: ``colmz.progress.Bar``).
``--available-now`` processes what is there and stops (tests, cron jobs); without it the query
runs until interrupted.

``colmz stream --example-events DIR`` writes a generated example log into ``DIR`` as Parquet
files (one per time range, in arrival order; :func:`write_example_events`) and stops, so the
walk-through in ``docs/streaming.md`` starts from nothing. Its times are ticks: with
``--tick event`` one micro-batch over them closes every tick up to the greatest
``valid_from``; with ``--tick processing`` micro-batch ``n`` closes tick ``n`` only.

Everything that needs no Spark is checked before a session starts and reported as bad input
(exit status 2): missing flags, paths (a file given as --checkpoint), no event files, the
events' columns (from their Parquet footers), an existing store's tick kind and columns (from
its metadata). A checkpoint bound to another store, a micro-batch with bad events, or one that
finds the store written by another query fails the query before that batch commits anything
(also exit status 2); any other failure of a micro-batch leaves the store as its last
committed batch left it (exit status 1). Either is one line on standard error; Spark's trace
of it only with ``--verbose``.

**Ctrl-C (SIGINT)** stops ``colmz stream`` promptly, also while it races another writer for a
batch's compare-and-set: the first SIGINT only sets a flag (a ``KeyboardInterrupt`` raised
inside a Py4J call would break that connection and leave Py4J's own traceback on the
console); the main thread, which waits for the query in short slices, then asks the batch in
flight to stop before its commit (:class:`colmz.spark.stream.StreamStopped`) and stops the
query, waiting at most :data:`STOP_TIMEOUT` seconds. It prints what the store holds and exits
with status 130. A micro-batch commits whole or not at all, so the store always holds whole
batches; rerunning with the same ``--checkpoint`` resumes. A second SIGINT exits at once,
which is as safe as a crash (the next run finds a batch committed by this one in the store).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
import time as _time
from pathlib import Path

from colmz.progress import Bar
from colmz.spark.cli.base import (
    EXIT_INTERRUPTED,
    InputError,
    add_spark_options,
    as_input_error,
    check_outside_stores,
    check_store_url,
    consensus_url,
    csv_list,
    is_store_dir,
    output_path,
    parquet_schema,
    positive,
    print_json,
    start_spark,
    url_scheme,
)
from colmz.spark.sink_store import SinkStoreError

__all__ = ["STOP_TIMEOUT", "StreamFailed", "add_parser", "render", "run", "write_example_events"]


#: Seconds a stop waits for the micro-batch in flight (Spark's ``spark.sql.streaming.stopTimeout``).
STOP_TIMEOUT = 60

#: The flags ``colmz stream`` needs unless it only writes ``--example-events``.
REQUIRED = ("input", "store", "checkpoint", "keys")


class StreamFailed(SinkStoreError):
    """A micro-batch failed; the store holds what the batches before it committed."""


def add_parser(sub, name: str, summary: str) -> argparse.ArgumentParser:
    """Add ``colmz stream`` to the subparsers ``sub``."""
    s = sub.add_parser(
        name,
        help=summary,
        description="Structured Streaming sink: every micro-batch of events (Parquet files in "
        "--input; new files are picked up) is one tick. The view 'rows (keys..., value) with "
        "valid_from <= t < valid_to' (times in ticks) is kept in the arrangement at --store: "
        "ticks before its seal are final, the far-future retractions wait in it by time range. "
        "Exactly once: a micro-batch replayed from --checkpoint after a crash writes nothing. "
        "--example-events DIR writes a generated example log to stream from, and stops.",
    )
    s.add_argument("--input", "-i", default=None, help="directory of Parquet event files (required)")
    s.add_argument("--store", default=None,
                   help="the arrangement's store: a directory, or s3://bucket/prefix with --consensus")
    s.add_argument("--checkpoint", default=None, help="Spark's checkpoint directory (bound to --store)")
    s.add_argument("--available-now", action="store_true", help="process the files there now, then stop")
    s.add_argument("--keys", type=csv_list, default=None, help="key columns, comma-separated")
    s.add_argument("--value", default="value", help="value column (default: %(default)s)")
    s.add_argument("--valid-from", default="valid_from", help="interval start column (default: %(default)s)")
    s.add_argument("--valid-to", default="valid_to", help="interval end column, exclusive (default: %(default)s)")
    s.add_argument("--name", default="arrangement", help="the arrangement's name in the store (default: %(default)s)")
    s.add_argument("--consensus", type=consensus_url, default=None, help="the store's metadata database (s3:// stores)")
    s.add_argument("--tick", choices=("processing", "event"), default="processing",
                   help="processing: micro-batch n closes tick n; event: ticks are the events' "
                   "times, closed when the watermark (greatest valid_from seen - --delay) passes "
                   "them (default: %(default)s)")
    s.add_argument("--delay", type=int, default=0,
                   help="with --tick event: ticks an event may be late and keep its own time (default: %(default)s)")
    s.add_argument("--files-per-batch", type=positive, default=None,
                   help="at most this many new files per micro-batch (default: all new files)")
    s.add_argument("--example-events", metavar="DIR", default=None,
                   help="write a generated example log of events (customer, region, plan, valid_from, "
                   "valid_to; times 0..99) into DIR as Parquet files, and stop; then stream it with "
                   "--input DIR --keys customer --value plan --tick event")
    s.add_argument("--verbose", "-v", action="store_true",
                   help="when a micro-batch fails, also print Spark's whole trace (default: one line)")
    add_spark_options(s)
    return s


def _say(args, out, msg: str) -> None:
    if not args.quiet:
        print(msg, file=out, flush=True)


def run(args, out) -> dict:
    """``colmz stream``: returns a summary (batches run, replayed, updates written, seconds)."""
    if args.example_events is not None:
        return write_example_events(args.example_events)
    missing = [f"--{n}" for n in REQUIRED if getattr(args, n) is None]
    if missing:
        raise InputError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required "
                         "(or --example-events DIR to write example events)")
    from colmz.spark.stream import StreamBindingError, stream_sink

    started = _time.perf_counter()
    indir = _check_before_spark(args)
    spark = start_spark(args)
    if not args.verbose:
        quiet_query_failures(spark)
    schema = spark.read.parquet(str(indir)).schema
    reader = spark.readStream.schema(schema)
    if args.files_per_batch:
        reader = reader.option("maxFilesPerTrigger", args.files_per_batch)
    events = reader.parquet(str(indir))
    batches: list[dict] = []
    # On a terminal a bar counts the micro-batches (of those known to come, with
    # --available-now --files-per-batch) and each batch's line is printed above it.
    bar = Bar(sys.stderr, quiet=args.quiet)
    files = sum(1 for _ in indir.rglob("*.parquet"))
    expected = -(-files // args.files_per_batch) if args.available_now and args.files_per_batch else 0

    def progress(f: dict) -> None:
        batches.append(f)
        what = "already in the store" if f["replayed"] else (
            f"{f['events']} events, {f['updates']} updates in {f['runs']} runs")
        line = f"batch {f['batch']}: {what}, seal {f['seal']} ({f['seconds']:.2f} s)"
        if bar.enabled:
            bar.note(line)
            bar(len(batches), max(expected, len(batches)) if expected else 0, "micro-batches")
        else:
            _say(args, out, line)

    # Read when the query starts (its session is a copy): bounds StreamingQuery.stop().
    spark.conf.set("spark.sql.streaming.stopTimeout", f"{STOP_TIMEOUT}s")
    stop = threading.Event()
    try:
        q = stream_sink(events, args.store, args.checkpoint, keys=args.keys, value=args.value,
                        valid_from=args.valid_from, valid_to=args.valid_to, name=args.name,
                        consensus=args.consensus, buckets=args.buckets,
                        available_now=args.available_now, on_batch=progress, tick=args.tick,
                        delay=args.delay, stop=stop)
    except (TypeError, ValueError, StreamBindingError) as e:
        raise InputError(str(e)) from e
    _say(args, out, f"streaming {args.input} -> {args.store} (checkpoint {args.checkpoint})")

    def summary() -> dict:
        return {
            "batches": sum(1 for f in batches if not f["replayed"]),
            "replayed": sum(1 for f in batches if f["replayed"]),
            "updates": sum(f["updates"] for f in batches),
            "store": args.store,
            "seconds": round(_time.perf_counter() - started, 3),
        }

    interrupted = threading.Event()
    try:
        with bar, _interruptible(interrupted):
            # short waits, so the main thread sees the flag a SIGINT sets
            while not interrupted.is_set() and not q.awaitTermination(0.25):
                pass
            if interrupted.is_set():
                # The batch in flight is now made to fail on purpose (StreamStopped, or its
                # cancelled Spark job); Spark would log that as the query's error.
                spark.sparkContext.setLogLevel("OFF")
                stop.set()
                _stop_query(q)
                done = summary()
                print(f"colmz stream: interrupted: stopped after {done['batches']} micro-batches committed "
                      f"({done['replayed']} found in the store); the store holds whole micro-batches only "
                      f"(the one in flight, if any, committed whole or not at all); rerun with --checkpoint "
                      f"{args.checkpoint} to resume", file=sys.stderr, flush=True)
                done["interrupted"] = True
                if args.json:
                    print_json(done, sys.stdout)
                else:
                    render(done, out)
                raise SystemExit(EXIT_INTERRUPTED)
            q.awaitTermination()  # raises the query's exception, if any
    except Exception as e:  # StreamingQueryException: the failing batch committed nothing
        msg = str(e)
        # Spark wraps the Python error of foreachBatch in its own text: name colmz's line.
        found = re.findall(r"(\w+Error|\w+Conflict|\w+Exception): (.+)", msg)
        reason = found[-1][1].strip() if found else (msg.splitlines()[0] if msg else type(e).__name__)
        # Bad events, or a store another query writes: retrying cannot help (exit status 2).
        refused = [f for f in found if f[0] in ("InputError", "StreamBindingError")]
        if args.verbose:
            print(msg, file=sys.stderr)  # Spark's and the batch's whole trace
        if refused:
            raise InputError(refused[-1][1].strip()) from None
        raise StreamFailed(f"{found[-1][0]}: {reason}" if found else reason) from None
    return summary()


def _check_before_spark(args) -> Path:
    """Everything about the flags, paths, columns and store that needs no Spark; the input
    directory. The store's tick kind and columns are read from its metadata (an existing
    store), the events' columns from their Parquet footers."""
    from colmz.arrangement import Arrangement
    from colmz.spark.events import EventsSpec, check_schema
    from colmz.spark.stream import StreamBindingError, check_tick
    from colmz.storage.base import StorageError
    from colmz.storage.url import local_path

    check_store_url(args.store, args.consensus, "--store")
    check_outside_stores(args.store, "--store")
    check_outside_stores(args.checkpoint, "--checkpoint")
    if is_store_dir(Path(args.checkpoint)):
        raise InputError(f"--checkpoint {args.checkpoint!r} is a colmz store; give Spark's checkpoint its own directory")
    for flag, path in (("--checkpoint", args.checkpoint), ("--input", args.input)):
        checked = output_path(path, flag, directory=True)
        if checked.exists() and not checked.is_dir():
            raise InputError(f"{flag} {path!r} is a file; give a directory")
    indir = Path(args.input)
    if not indir.is_dir():
        raise InputError(f"--input {args.input!r} is not a directory")
    if not any(p.suffix == ".parquet" for p in indir.rglob("*.parquet")):
        raise InputError(f"--input {args.input!r} holds no .parquet files (their schema is the stream's)")
    spec = EventsSpec(tuple(args.keys), args.value, args.valid_from, args.valid_to)
    schema = parquet_schema(str(indir), "--input")
    if schema is not None:
        with as_input_error():
            check_schema(schema, spec)
    if args.delay and args.tick != "event":
        raise InputError(f"--delay {args.delay} needs --tick event (a processing tick closes every micro-batch)")
    local = local_path(args.store) if url_scheme(args.store) in ("", "file") else None
    if local is not None and args.consensus is None and not (local / "consensus.sqlite").is_file():
        return indir  # a new store (opening it here would create its files)
    try:
        arr = Arrangement.open(args.store, consensus=args.consensus, name=args.name, create=False)
    except FileNotFoundError:
        return indir  # a new store
    except StorageError as e:
        raise SinkStoreError(f"store {args.store!r} is unreachable: {e}") from None
    try:
        check_tick(arr.properties(), args.tick)
    except StreamBindingError as e:
        raise InputError(f"store {args.store!r}: {e}") from None
    if arr.schema is not None and [c.name for c in arr.schema] != list(spec.data):
        raise InputError(f"store {args.store!r} holds columns {[c.name for c in arr.schema]}, the view has "
                         f"{list(spec.data)} (give the store's --keys and --value, or another store)")
    return indir


#: Spark's loggers that print a failed streaming query's whole JVM and Python trace (~80 lines)
#: as it ends; ``colmz stream`` reports the failure itself in one line (``--verbose``: both).
QUERY_FAILURE_LOGGERS = ("org.apache.spark.sql.execution.streaming.MicroBatchExecution",
                         "org.apache.spark.sql.execution.streaming.StreamExecution",
                         "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
                         "org.apache.spark.sql.execution.streaming.runtime.StreamExecution")


def quiet_query_failures(spark) -> None:
    """Silence :data:`QUERY_FAILURE_LOGGERS` and py4j's logging of the failed ``foreachBatch``
    call (best effort: a log4j 2 JVM)."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    try:
        jvm = spark.sparkContext._jvm
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in QUERY_FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)
    except Exception:  # noqa: BLE001 - another logging backend: Spark's lines stay
        pass


class _interruptible:
    """While active: the first SIGINT sets ``flag`` (and says so), a second exits at once.

    The handler only sets a flag and writes a line: it runs in the main thread, possibly in
    the middle of the main thread's own Py4J call, so it must not call into the JVM."""

    def __init__(self, flag: threading.Event) -> None:
        self.flag = flag
        self.before = None

    def handle(self, signum, frame) -> None:
        again = self.flag.is_set()
        self.flag.set()
        # The batch in flight is about to fail on purpose; Py4J would log that error with its
        # traceback as if something had gone wrong.
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        # os.write: the handler may run while the main thread is inside a print to stderr
        os.write(sys.stderr.fileno(), b"colmz stream: interrupted again: exiting now; the store holds whole "
                 b"micro-batches only\n" if again else b"colmz stream: interrupted: stopping "
                 b"(Ctrl-C again to exit at once)\n")
        if again:
            os._exit(EXIT_INTERRUPTED)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.before = signal.signal(signal.SIGINT, self.handle)
        return self

    def __exit__(self, *exc) -> bool:
        if self.before is not None:
            signal.signal(signal.SIGINT, self.before)
        return False


def _stop_query(q) -> None:
    """Stop ``q`` after a SIGINT; if its batch does not stop within STOP_TIMEOUT, end the JVM
    (a crash is as safe as a stop: a batch commits whole or not at all)."""
    try:
        q.stop()
    except Exception as e:  # TimeoutException: the batch in flight did not stop in time
        from pyspark import SparkContext

        print(f"colmz stream: the micro-batch in flight did not stop within {STOP_TIMEOUT} s "
              f"({type(e).__name__}); ending Spark", file=sys.stderr, flush=True)
        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is not None:
            proc.kill()


def write_example_events(directory: str, events: int = 2000, ticks: int = 100, files: int = 10,
                         seed: int = 0) -> dict:
    """Write a generated events log into ``directory`` as ``files`` Parquet files.

    The events are the first ``events`` of ``colmz.spark.events.example_events_table`` at the
    density that puts that many over ``ticks`` (``customer, region, plan, valid_from,
    valid_to``), split by ``valid_from`` into equal time
    ranges, one file per range, in time order (file modification times too, so Spark's file
    source reads them in that order). Refuses a directory that holds Parquet files already.

    >>> import tempfile, pyarrow.parquet as pq
    >>> d = tempfile.mkdtemp() + "/events"
    >>> s = write_example_events(d, events=100, ticks=10, files=2)
    >>> s["files"], s["events"], pq.read_table(d).num_rows
    (2, 100, 100)
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from colmz.spark.events import EXAMPLE_SPAN, example_events_table

    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise InputError(f"--example-events {directory!r} exists and is not a directory")
    if target.is_dir() and any(target.rglob("*.parquet")):
        raise InputError(f"--example-events {directory!r} holds Parquet files already; give a new directory")
    target.mkdir(parents=True, exist_ok=True)
    density = -(-events * EXAMPLE_SPAN // ticks)  # events per EXAMPLE_SPAN ticks
    table = example_events_table(density, ticks=ticks, seed=seed).slice(0, events)
    table = table.take(pc.sort_indices(table, [("valid_from", "ascending")]))
    start = _time.time() - files
    width = -(-ticks // files)
    for i in range(files):
        vf = table.column("valid_from")
        part = table.filter(pc.and_(pc.greater_equal(vf, i * width), pc.less(vf, (i + 1) * width)))
        path = target / f"events-{i:04d}.parquet"
        pq.write_table(part, path)
        os.utime(path, (start + i, start + i))  # arrival order = time order
    return {"example_events": str(target.absolute()), "files": files, "events": table.num_rows,
            "ticks": ticks}


def render(summary: dict, out) -> None:
    """The last line of ``colmz stream``."""
    if "example_events" in summary:
        print(f"{summary['events']} example events over ticks 0..{summary['ticks'] - 1} in "
              f"{summary['files']} files -> {summary['example_events']}", file=out)
        return
    print(f"{summary['batches']} micro-batches committed, {summary['replayed']} replayed, "
          f"{summary['updates']} updates -> {summary['store']} ({summary['seconds']:.1f} s)", file=out)
