"""The ``colmz stream`` and ``colmz ct`` subcommands (registered by ``colmz.spark.cli``).

Design
------
``colmz stream`` runs :func:`colmz.spark.stream.stream_sink` over a directory of Parquet event
files (Spark's file source: files added later are picked up), one line of progress per
micro-batch (on a terminal, above a bar counting the micro-batches: ``colmz.progress.Bar``). ``--available-now`` processes what is there and stops (tests, cron jobs); without
it the query runs until interrupted. ``colmz ct`` runs :func:`colmz.spark.continual.continual_task`
over a Parquet file of input updates and writes the task's output updates as Parquet.

Everything that can be checked before Spark writes is checked first and reported as bad input
(exit status 2): missing paths, no event files, columns, a checkpoint bound to another store,
SQL that does not define one continual task, an existing output. A micro-batch with bad events,
or one that finds the store written by another query (another input, another tick kind), fails
the query before that batch commits anything (also exit status 2); any other failure of a
micro-batch leaves the store as its last committed batch left it (exit status 1).

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

import json
import logging
import os
import re
import signal
import sys
import threading
import time as _time
from pathlib import Path

from colmz.progress import Bar
from colmz.spark.schemas import InputError
from colmz.spark.store import StoreError

__all__ = ["EXIT_INTERRUPTED", "STOP_TIMEOUT", "StreamFailed", "add_parsers", "print_summary", "run_ct",
           "run_stream"]

#: Exit status of ``colmz stream`` stopped by SIGINT (128 + the signal's number, as shells report it).
EXIT_INTERRUPTED = 128 + signal.SIGINT
#: Seconds a stop waits for the micro-batch in flight (Spark's ``spark.sql.streaming.stopTimeout``).
STOP_TIMEOUT = 60


class StreamFailed(StoreError):
    """A micro-batch failed; the store holds what the batches before it committed."""


def add_parsers(sub, common, csv, positive) -> None:
    """Add ``stream`` and ``ct`` to the ``colmz`` subparsers (``common`` adds the Spark options)."""
    s = sub.add_parser(
        "stream",
        help="keep an arrangement equal to a temporal-filter view of streaming events",
        description="Structured Streaming sink: every micro-batch of events (Parquet files in "
        "--input; new files are picked up) is one tick. The view 'rows (keys..., value) with "
        "valid_from <= t < valid_to' (times in ticks) is kept in the arrangement at --store: "
        "ticks before its seal are final, the far-future retractions wait in it by time range. "
        "Exactly once: a micro-batch replayed from --checkpoint after a crash writes nothing.",
    )
    s.add_argument("--input", "-i", required=True, help="directory of Parquet event files")
    s.add_argument("--store", required=True,
                   help="the arrangement's store: a directory, or s3://bucket/prefix with --consensus")
    s.add_argument("--checkpoint", required=True, help="Spark's checkpoint directory (bound to --store)")
    s.add_argument("--available-now", action="store_true", help="process the files there now, then stop")
    s.add_argument("--keys", type=csv, required=True, help="key columns, comma-separated")
    s.add_argument("--value", default="value", help="value column (default: %(default)s)")
    s.add_argument("--valid-from", default="valid_from", help="interval start column (default: %(default)s)")
    s.add_argument("--valid-to", default="valid_to", help="interval end column, exclusive (default: %(default)s)")
    s.add_argument("--name", default="arrangement", help="the arrangement's name in the store (default: %(default)s)")
    s.add_argument("--consensus", default=None, help="the store's metadata database (s3:// stores)")
    s.add_argument("--tick", choices=("processing", "event"), default="processing",
                   help="processing: micro-batch n closes tick n; event: ticks are the events' "
                   "times, closed when the watermark (greatest valid_from seen - --delay) passes "
                   "them (default: %(default)s)")
    s.add_argument("--delay", type=int, default=0,
                   help="with --tick event: ticks an event may be late and keep its own time (default: %(default)s)")
    s.add_argument("--files-per-batch", type=positive, default=None,
                   help="at most this many new files per micro-batch (default: all new files)")
    common(s)

    c = sub.add_parser(
        "ct",
        help="run a continual task over a Parquet file of its input's updates",
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
    c.add_argument("--partition-by", type=csv, default=None, help="key columns, comma-separated")
    c.add_argument("--time", default="time", help="time column (default: %(default)s)")
    c.add_argument("--diff", default="diff", help="diff column (default: %(default)s)")
    c.add_argument("--overwrite", action="store_true", help="replace an existing output")
    common(c)


def _say(args, out, msg: str) -> None:
    if not args.quiet:
        print(msg, file=out, flush=True)


def run_stream(args, out, spark_of) -> dict:
    """``colmz stream``: returns a summary (batches run, replayed, updates written, seconds)."""
    from colmz.spark.stream import StreamBindingError, stream_sink

    started = _time.perf_counter()
    indir = Path(args.input)
    if not indir.is_dir():
        raise InputError(f"--input {args.input!r} is not a directory")
    if not any(p.suffix == ".parquet" for p in indir.rglob("*.parquet")):
        raise InputError(f"--input {args.input!r} holds no .parquet files (their schema is the stream's)")
    spark = spark_of(args)
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
                print_summary("stream", {**done, "interrupted": True}, sys.stdout if args.json else out, args.json)
                raise SystemExit(EXIT_INTERRUPTED)
            q.awaitTermination()  # raises the query's exception, if any
    except Exception as e:  # StreamingQueryException: the failing batch committed nothing
        msg = str(e)
        # Spark wraps the Python error of foreachBatch in its own text: name colmz's line.
        found = re.findall(r"(\w+Error|\w+Conflict|\w+Exception): (.+)", msg)
        reason = found[-1][1].strip() if found else (msg.splitlines()[0] if msg else type(e).__name__)
        # Bad events, or a store another query writes: retrying cannot help (exit status 2).
        refused = [f for f in found if f[0] in ("InputError", "StreamBindingError")]
        if refused:
            raise InputError(refused[-1][1].strip()) from e
        raise StreamFailed(f"{found[-1][0]}: {reason}" if found else reason) from e
    return summary()


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


def run_ct(args, out, spark_of) -> dict:
    """``colmz ct``: returns a summary (output rows and path)."""
    from colmz.spark.continual import continual_task, define_task
    from colmz.sql import SQLError

    started = _time.perf_counter()
    if not os.path.isfile(args.sql):
        raise InputError(f"--sql {args.sql!r} is not a file")
    if not os.path.exists(args.input):
        raise InputError(f"--input {args.input!r} does not exist")
    if os.path.exists(args.output) and not args.overwrite:
        raise InputError(f"--output {args.output!r} exists (use --overwrite to replace it)")
    with open(args.sql) as f:
        sql = f.read()
    try:
        define_task(args.catalog, sql)  # refuse a bad definition before Spark starts
        spark = spark_of(args)
        df = spark.read.parquet(args.input)
        result = continual_task(args.catalog, sql, df, partition_by=args.partition_by,
                                time=args.time, diff=args.diff, buckets=args.buckets)
    except (SQLError, TypeError, ValueError, KeyError) as e:
        raise InputError(str(e).strip("'\"")) from e
    result.write.mode("overwrite" if args.overwrite else "errorifexists").parquet(args.output)
    rows = spark.read.parquet(args.output).count()
    summary = {"output": args.output, "rows": rows, "seconds": round(_time.perf_counter() - started, 3)}
    return summary


def print_summary(command: str, summary: dict, out, as_json: bool) -> None:
    """The last line of ``colmz stream`` / ``colmz ct``."""
    if as_json:
        print(json.dumps(summary), file=out)
    elif command == "stream":
        print(f"{summary['batches']} micro-batches committed, {summary['replayed']} replayed, "
              f"{summary['updates']} updates -> {summary['store']} ({summary['seconds']:.1f} s)", file=out)
    else:
        print(f"{summary['rows']} output updates -> {summary['output']} ({summary['seconds']:.1f} s)", file=out)
