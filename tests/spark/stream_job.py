"""A streaming sink run in its own process (the kill-and-restart and race tests start it).

``python stream_job.py INDIR STORE CHECKPOINT`` processes the files there now (one file per
micro-batch) and stops; with ``--until FILE`` it keeps following INDIR until FILE exists, then
stops the query. One line per micro-batch on stdout
(``batch <id> replayed=<bool> runs=<n> conflicts=<n>``), ``done`` at the end.

A job whose JVM was killed by a signal it did not send (the JVM is in the job's process
group, so a test that kills the group kills it too; anything else that kills it is outside
the test) says so on stderr and exits with :data:`JVM_KILLED`, so a test can tell that from
a failure of the job itself (exit status 1: Python's error).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

#: Exit status of a job whose JVM died of a signal while the Python driver lived.
JVM_KILLED = 3


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("indir")
    ap.add_argument("store")
    ap.add_argument("checkpoint")
    ap.add_argument("--until", default=None, help="follow the input until this file exists")
    args = ap.parse_args(argv)

    import colmz.spark
    from colmz.spark.stream import stream_sink

    spark = colmz.spark.session("local[1]", "colmz-stream-job", numba_cache_dir=colmz.spark.default_cache_dir(),
                                shuffle_partitions=2)
    events = (spark.readStream.schema("k long, v string, valid_from long, valid_to long")
              .option("maxFilesPerTrigger", 1).parquet(args.indir))

    def progress(f: dict) -> None:
        print(f"batch {f['batch']} replayed={f['replayed']} runs={f['runs']} conflicts={f['conflicts']}", flush=True)

    q = stream_sink(events, args.store, args.checkpoint, keys=["k"], value="v",
                    available_now=args.until is None, on_batch=progress)
    if args.until is None:
        q.awaitTermination()
    else:
        while not os.path.exists(args.until):
            if q.awaitTermination(0.2):
                raise SystemExit(f"the query stopped by itself: {q.exception()}")
        q.stop()
    print("done", flush=True)
    spark.stop()


def jvm_signal(wait: float = 5.0) -> int | None:
    """The signal that ended the driver's JVM, or None (not started, still running, or
    exited by itself). Waits up to ``wait`` seconds for a dying JVM to be gone."""
    import subprocess

    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return None
    try:
        status = proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return None
    return -status if status < 0 else None


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        if "pyspark" in sys.modules and (sig := jvm_signal()) is not None:
            traceback.print_exc()
            print(f"stream_job: the JVM was killed by signal {sig}; the Python driver was not", file=sys.stderr,
                  flush=True)
            sys.exit(JVM_KILLED)
        raise
