"""A streaming sink run in its own process (the kill-and-restart tests start and SIGKILL it).

``python stream_job.py INDIR STORE CHECKPOINT`` processes the files there now (one file per
micro-batch) and prints one line per micro-batch.
"""

from __future__ import annotations

import sys


def main(indir: str, store: str, checkpoint: str) -> None:
    import colmz.spark
    from colmz.spark.stream import stream_sink

    spark = colmz.spark.session("local[1]", "colmz-stream-job", numba_cache_dir=colmz.spark.default_cache_dir(),
                                shuffle_partitions=2)
    events = (spark.readStream.schema("k long, v string, valid_from long, valid_to long")
              .option("maxFilesPerTrigger", 1).parquet(indir))

    def progress(f: dict) -> None:
        print(f"batch {f['batch']} replayed={f['replayed']} runs={f['runs']}", flush=True)

    q = stream_sink(events, store, checkpoint, keys=["k"], value="v", available_now=True, on_batch=progress)
    q.awaitTermination()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
