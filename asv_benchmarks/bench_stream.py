"""asv benchmarks for ``colmz.spark.stream_sink`` beside Spark's own stateful streaming.

One stream, two sinks, side by side in one process (one setup, read the ``track_*`` figures):

* the stream: file 0 holds ``far`` events valid from tick 0 to far-future ticks (their
  retractions sit in the sink's state for the whole run), ``FAR_PER_KEY`` per key with one
  end time per key (so the peer registers one timer per key, not per event), then
  ``BATCHES`` files of ``EVENTS`` short-lived events each, one file per micro-batch, on keys
  that overlap the far events' keys;
* ``colmz``: ``stream_sink`` into an arrangement (``Trigger.AvailableNow``,
  ``maxFilesPerTrigger=1``);
* ``peer``: the same temporal filter as ``transformWithStateInPandas`` with event-time timers
  (per key: a list state of ``(value, valid_to)``, +1 emitted on arrival, a timer at
  ``valid_to`` emitting the -1; RocksDB state store; the watermark is ``valid_from``), written
  to a no-op sink.

Before the measured runs a short stream warms the session up (JIT-compiled kernels, Python
workers), so neither side pays for start-up. Per-micro-batch latency is Spark's
``triggerExecution`` of each batch after file 0 (median); throughput is the batches' events
(``EVENTS`` each: Spark's ``numInputRows`` counts a row once per scan, and colmz's sink scans a
batch more than once) over their summed latencies. Targets: colmz's latency with
``far = 2,000,000`` within 1.3x of its latency with ``far = 0``; colmz's throughput >= 5x the
peer's.

Sizes: ``COLMZ_BENCH_STREAM_FAR`` (default ``2000000``), ``COLMZ_BENCH_STREAM_EVENTS`` (default
``20000``), ``COLMZ_BENCH_STREAM_BATCHES`` (default ``8``). The peer takes minutes per batch of
20,000 events on two cores, so it runs over the first ``COLMZ_BENCH_STREAM_PEER_BATCHES``
(default ``3``) batch files of the same stream. Skips itself without pyspark or Java,
and the peer without ``transformWithStateInPandas``. Run::

    asv run --python=same --quick --show-stderr --bench bench_stream
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile

from .common import spark_session

FAR = int(os.environ.get("COLMZ_BENCH_STREAM_FAR", "2000000"))
EVENTS = int(os.environ.get("COLMZ_BENCH_STREAM_EVENTS", "20000"))
BATCHES = int(os.environ.get("COLMZ_BENCH_STREAM_BATCHES", "8"))
FAR_TICK = 1_000_000
FAR_PER_KEY = 1000
PEER_BATCHES = int(os.environ.get("COLMZ_BENCH_STREAM_PEER_BATCHES", "3"))


def _session():
    # The transformWithStateInPandas peer needs the RocksDB state store.
    return spark_session({
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    })


def write_stream(d: str, far: int, events: int, batches: int) -> None:
    """The benchmark's event files (module docstring), one per micro-batch, in mtime order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    tables = []
    i = np.arange(far, dtype=np.int64)
    k = i % max(far // FAR_PER_KEY, 1)
    tables.append(pa.table({"k": k, "v": i, "valid_from": np.zeros(far, np.int64),
                            "valid_to": FAR_TICK + k}))
    for i in range(1, batches + 1):
        k = rng.integers(0, 10 * events, events)
        vf = np.full(events, i, np.int64)
        tables.append(pa.table({"k": k, "v": -1 - rng.integers(0, 97, events), "valid_from": vf,
                                "valid_to": vf + rng.integers(1, 6, events)}))
    for i, t in enumerate(tables):
        p = os.path.join(d, f"part-{i:04d}.parquet")
        pq.write_table(t, p)
        os.utime(p, (1e9 + i, 1e9 + i))


def _measure(q, n_events: int) -> tuple[float, float]:
    """(median latency s, events/s) over the batches after the first, from Spark's progress."""
    q.awaitTermination()
    prog = [p for p in q.recentProgress if p["numInputRows"] and p["batchId"] >= 1]
    if not prog:
        raise RuntimeError("no measured micro-batch")
    secs = [p["durationMs"]["triggerExecution"] / 1000 for p in prog]
    return statistics.median(secs), n_events * len(prog) / sum(secs)


def run_colmz(spark, indir: str, work: str, n_events: int = EVENTS) -> tuple[float, float]:
    from colmz.spark.stream import stream_sink

    events = (spark.readStream.schema("k long, v long, valid_from long, valid_to long")
              .option("maxFilesPerTrigger", 1).parquet(indir))
    q = stream_sink(events, os.path.join(work, "store"), os.path.join(work, "ck"),
                    keys=["k"], value="v", available_now=True)
    return _measure(q, n_events)


def run_peer(spark, indir: str, work: str, n_events: int = EVENTS) -> tuple[float, float]:
    """The temporal filter with ``transformWithStateInPandas`` and event-time timers."""
    import pandas as pd
    from pyspark.sql import functions as F

    try:
        from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    except ImportError:
        raise NotImplementedError("this pyspark has no transformWithStateInPandas") from None
    try:
        import google.protobuf.descriptor  # noqa: F401  (its state server speaks protobuf)
    except ImportError:
        raise NotImplementedError("transformWithStateInPandas needs protobuf (extra stream-peer)") from None

    out_schema = "k long, v long, time long, diff long"

    class TemporalFilter(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.rows = handle.getListState("rows", "v long, valid_to long")

        def handleInputRows(self, key, rows, timerValues):
            (k,) = key
            outs = []
            for pdf in rows:
                self.rows.appendList(list(zip(pdf["v"].tolist(), pdf["valid_to"].tolist())))
                for t in set(pdf["valid_to"].tolist()):
                    self.handle.registerTimer(int(t) * 1000)
                outs.append(pd.DataFrame({"k": k, "v": pdf["v"], "time": pdf["valid_from"], "diff": 1}))
            yield pd.concat(outs) if outs else pd.DataFrame(columns=["k", "v", "time", "diff"])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            (k,) = key
            upto = expiredTimerInfo.getExpiryTimeInMs() // 1000
            keep, gone = [], []
            for v, vt in self.rows.get():
                (gone if vt <= upto else keep).append((v, vt))
            self.rows.clear()
            if keep:
                self.rows.put(keep)
            yield pd.DataFrame({"k": [k] * len(gone), "v": [g[0] for g in gone],
                                "time": [g[1] for g in gone], "diff": [-1] * len(gone)})

        def close(self) -> None:
            pass

    events = (spark.readStream.schema("k long, v long, valid_from long, valid_to long")
              .option("maxFilesPerTrigger", 1).parquet(indir)
              .withColumn("ts", F.timestamp_seconds("valid_from"))
              .withWatermark("ts", "0 seconds"))
    out = events.groupBy("k").transformWithStateInPandas(
        TemporalFilter(), out_schema, "append", "EventTime")
    q = (out.writeStream.format("noop").option("checkpointLocation", os.path.join(work, "peer-ck"))
         .trigger(availableNow=True).start())
    return _measure(q, n_events)


class StreamSink:
    """colmz's micro-batch latency with 0 and with ``FAR`` far-future retractions, and the peer."""

    timeout = 3600
    number = 1
    repeat = 1

    def setup(self):
        spark = _session()
        self.work = tempfile.mkdtemp(prefix="colmz-bench-stream-")
        self.figures = {}
        warm = os.path.join(self.work, "warm")
        write_stream(os.path.join(warm, "in"), 1000, 1000, 3)
        run_colmz(spark, os.path.join(warm, "in"), warm, 1000)
        for far in (0, FAR):
            d = os.path.join(self.work, f"far{far}")
            write_stream(os.path.join(d, "in"), far, EVENTS, BATCHES)
            self.figures[("colmz", far)] = run_colmz(spark, os.path.join(d, "in"), d)
        d = os.path.join(self.work, f"far{FAR}")
        peer_in = os.path.join(d, "peer-in")
        os.makedirs(peer_in)
        for i in range(min(PEER_BATCHES, BATCHES) + 1):
            name = f"part-{i:04d}.parquet"
            shutil.copy2(os.path.join(d, "in", name), os.path.join(peer_in, name))
        try:
            self.figures[("peer", FAR)] = run_peer(spark, peer_in, d)
        except NotImplementedError:
            self.figures[("peer", FAR)] = None

    def teardown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def track_colmz_latency_no_far(self):
        return self.figures[("colmz", 0)][0]

    def track_colmz_latency_far(self):
        return self.figures[("colmz", FAR)][0]

    def track_ratio_latency_far_over_none(self):
        return self.figures[("colmz", FAR)][0] / self.figures[("colmz", 0)][0]

    def track_peer_latency_far(self):
        if self.figures[("peer", FAR)] is None:
            raise NotImplementedError("no transformWithStateInPandas")
        return self.figures[("peer", FAR)][0]

    def track_ratio_throughput_colmz_over_peer(self):
        if self.figures[("peer", FAR)] is None:
            raise NotImplementedError("no transformWithStateInPandas")
        return self.figures[("colmz", FAR)][1] / self.figures[("peer", FAR)][1]


for _name in ("track_colmz_latency_no_far", "track_colmz_latency_far", "track_peer_latency_far"):
    getattr(StreamSink, _name).unit = "seconds"
