"""The self-correcting materialized-view sink on Spark Structured Streaming.

Design
------
Events arrive in micro-batches; each is a temporal-filter row ``(keys..., value)`` valid
while ``valid_from <= t < valid_to``, i.e. the updates ``(row, valid_from, +1)`` and
``(row, valid_to, -1)`` -- the retraction is usually far in the future. The sink keeps the
view in one durable :class:`colmz.Arrangement`:

* **Output** is the sealed part: at every time before the arrangement's seal the
  arrangement accumulates to the view (``Arrangement.read(as_of=t)``); those ticks are final.
* **State** is the unsealed part: the updates at or after the seal -- the scheduled
  retractions and any other future change -- waiting for their tick.

**What a tick is.** Tick ``n`` is micro-batch ``n`` (a processing-time tick): micro-batch
``n`` takes its events' updates in at times ``max(time, n)`` -- a change to an already
closed tick is corrected at the first open one, as the correction buffer does when it
advances its since -- and closes tick ``n`` by moving the seal to ``n + 1``. Event times
(``valid_from``/``valid_to``) are therefore in tick units. Processing time was chosen over
an event-time watermark because the seal then *is* the batch-id tag: a micro-batch's output
(the newly sealed tick), its state (new future updates) and its batch id commit in one
compare-and-set (``Arrangement.append_runs(runs, seal=n + 1)``), with no side record that
would have to commit separately. Spark's offset log fixes each batch id's input, so a batch
replayed after a crash sees the same events; a batch whose id is below the seal was already
committed and writes nothing. (An event-time watermark would need a user field in the
arrangement's record to hold the batch id in the same commit; colmz's arrangement has none.)

**Per micro-batch** (``foreachBatch``):

1. refresh the arrangement; ``batch_id < seal`` -> replay: return at once;
2. check the batch's schema (it must not change between batches) and values (NULL or
   negative times, ``valid_to < valid_from``) with one aggregation -- nothing is written yet;
3. per key bucket (a hash shuffle by the data columns, ``mapInArrow``): consolidate the
   bucket's updates (times advanced to the tick), split them by *time range*, and write one
   run of parts per range into the arrangement's blob store (``write_run``); only run
   descriptions go back to the driver;
4. the driver commits all runs and the new seal in one compare-and-set, then drains the
   newly sealed tick into the trace (``Arrangement.maintain``). A failure before the commit
   deletes the batch's parts (their keys carry the batch's owner tag).

**Time ranges keep a micro-batch's cost independent of far-future mass.** A run covers times
``[s, s + w)`` aligned to its width ``w = 2**floor(log2(d + 1))``, where ``d`` is its distance
from the micro-batch's tick -- the same geometric layout the bucketed correction buffer uses
in memory. The arrangement's drain reads only unsealed batches whose time range meets
``[trace upper, seal)`` and trims only those that start before it, so a micro-batch reads and
rewrites the runs near its tick and never touches a far-future run until the seal reaches it.
A run straddling the seal is trimmed (its rest rewritten) once per tick while the seal is
inside it; a wide range written long ago stays wide (ranges are not re-split as the seal
approaches), so its remaining mass is rewritten per tick for its last ``w`` ticks. The
arrangement's metadata grows with the number of runs (about ``log2(distance)`` per bucket
per micro-batch), not with their mass.

A store is bound to a checkpoint by ``colmz_stream.json`` in the checkpoint directory, so a
checkpoint of another query or store is refused before the query starts.
"""

# No ``from __future__ import annotations``: pyspark reads the UDF's type hints at runtime.
import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from colmz.spark.events import EventsSpec, check_schema
from colmz.spark.schemas import InputError, check_rows
from colmz.spark.sink_store import NAME

__all__ = ["BINDING", "StreamBindingError", "batch_writer", "bind_checkpoint", "range_starts", "stream_sink"]

#: File in the checkpoint directory naming the store and columns the query writes.
BINDING = "colmz_stream.json"


class StreamBindingError(ValueError):
    """The checkpoint belongs to another query (another store, name or columns)."""


def range_starts(t: np.ndarray, tick: int) -> tuple[np.ndarray, np.ndarray]:
    """The aligned time range ``[start, start + width)`` of each time ``t >= tick``.

    ``width = 2**floor(log2(t - tick + 1))``; ``start = t - t % width``. Near times get narrow
    ranges, far ones wide ranges, so a tick's runs hold little of the far future.

    >>> s, w = range_starts(np.array([5, 6, 8, 100], np.uint64), 5)
    >>> s.tolist(), w.tolist()
    ([5, 6, 8, 64], [1, 2, 4, 64])
    """
    t = np.asarray(t, dtype=np.uint64)
    d = t - np.uint64(tick) + np.uint64(1)
    k = np.floor(np.log2(d.astype(np.float64))).astype(np.int64)
    # float log2 may round up at exact powers of two minus one: correct both ways
    width = np.left_shift(np.uint64(1), k.astype(np.uint64))
    too_big = width > d
    width[too_big] >>= np.uint64(1)
    too_small = (width << np.uint64(1)) <= d
    width[too_small] <<= np.uint64(1)
    return t - t % width, width


def bind_checkpoint(checkpoint: str, binding: dict) -> None:
    """Record ``binding`` in the checkpoint directory, or check it against the recorded one.

    Raises
    ------
    StreamBindingError
        The checkpoint was written by a query with another binding.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> bind_checkpoint(d, {"store": "a"}); bind_checkpoint(d, {"store": "a"})
    >>> try:
    ...     bind_checkpoint(d, {"store": "b"})
    ... except StreamBindingError as e:
    ...     print(str(e)[:35])
    checkpoint belongs to another query
    """
    os.makedirs(checkpoint, exist_ok=True)
    path = os.path.join(checkpoint, BINDING)
    if os.path.exists(path):
        with open(path) as f:
            have = json.load(f)
        if have != binding:
            raise StreamBindingError(
                f"checkpoint belongs to another query: it writes {have}, not {binding} ({path})")
        return
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        json.dump(binding, f, sort_keys=True)
    os.replace(tmp, path)


def _runs_partition(url: str, schema, prefix: str, owner: str, data: Sequence[str], tick: int):
    """The per-bucket function: consolidate, split by time range, write one run per range."""
    import colmz
    from colmz.arrangement_runs import write_run
    from colmz.storage.url import open_blob

    names = [s.name for s in schema]
    out_schema = pa.schema([("keys", pa.list_(pa.string())), ("len", pa.int64()),
                            ("ts_lower", pa.int64()), ("ts_upper", pa.int64()),
                            ("size_bytes", pa.int64())])

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = []
        for b in batches:
            if b.num_rows:
                cols = {n: (b.column(n).cast(s.type) if b.schema.field(n).type != s.type else b.column(n))
                        for n, s in zip(names, schema)}
                parts.append(colmz.Updates(cols, b.column("time"), b.column("diff")))
        if not parts:
            return
        u = colmz.consolidate(colmz.concat(parts))
        if not len(u):
            return
        starts, _ = range_starts(u.time, tick)
        blob = open_blob(url)
        table = u.to_arrow()
        rows = []
        for s in np.unique(starts):
            idx = np.flatnonzero(starts == s)
            piece = colmz.Updates.from_arrow(table.take(pa.array(idx)))
            run = write_run(blob, schema, piece, prefix=prefix, owner=owner)
            if run is not None:
                rows.append(run.to_dict())
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=out_schema)

    return write


def batch_writer(
    events_schema,
    url: str,
    checkpoint: str,
    *,
    keys: Sequence[str],
    value: str,
    valid_from: str = "valid_from",
    valid_to: str = "valid_to",
    name: str = NAME,
    consensus: str | None = None,
    buckets: int = 2,
    on_batch: Callable[[dict], None] | None = None,
    maintain: bool = True,
) -> Callable:
    """The ``foreachBatch`` function of :func:`stream_sink`: ``fn(batch_df, batch_id)``.

    Checks the schema, binds ``checkpoint`` to the store and opens (creates) the arrangement;
    each call does one micro-batch as the module docstring says. A call whose batch id is
    below the seal by one (a replay of the last committed batch) writes nothing; a seal that
    is neither the batch id nor one past it means another writer or another checkpoint wrote
    the store, and the call raises :class:`StreamBindingError` before writing.

    >>> fn = batch_writer(events.schema, store, ckpt, keys=["k"], value="v")  # doctest: +SKIP
    >>> fn(spark.read.parquet(f), 0); fn(spark.read.parquet(f), 0)  # the second writes nothing  # doctest: +SKIP
    """
    import time as _time

    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from colmz.arrangement import Arrangement
    from colmz.arrangement_runs import owned_keys
    from colmz.order import ColumnSpec
    from colmz.spark.frames import bucket_columns

    spec = EventsSpec(tuple([keys] if isinstance(keys, str) else keys), value, valid_from, valid_to)
    check_schema(events_schema, spec)
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"buckets must be a positive int, got {buckets!r}")
    arrow = to_arrow_schema(events_schema)
    schema = tuple(ColumnSpec(n, arrow.field(n).type) for n in spec.data)
    first_schema = events_schema
    binding = {"store": str(url), "name": name, "keys": list(spec.keys), "value": spec.value,
               "valid_from": valid_from, "valid_to": valid_to}
    bind_checkpoint(checkpoint, binding)
    arr = Arrangement.open(url, schema, consensus=consensus, name=name)

    def one_batch(df, batch_id: int) -> None:
        started = _time.perf_counter()
        arr.refresh()
        seal = arr.get_seal()
        figures = {"batch": int(batch_id), "replayed": False, "events": 0, "runs": 0,
                   "updates": 0, "seconds": 0.0}
        if seal is None or not batch_id <= seal <= batch_id + 1:
            raise StreamBindingError(
                f"micro-batch {batch_id} does not follow the store's seal {seal}: another writer "
                f"or another checkpoint has written {url!r}; nothing was written")
        if batch_id < seal:
            figures["replayed"] = True
            figures["seconds"] = _time.perf_counter() - started
            if on_batch is not None:
                on_batch(figures)
            return
        if df.schema != first_schema:
            raise InputError(f"micro-batch {batch_id} has schema {df.schema.simpleString()}, "
                             f"not the query's {first_schema.simpleString()}")
        vf, vt = F.col(valid_from), F.col(valid_to)
        figures["events"] = check_rows(df, {
            f"NULL {valid_from}": vf.isNull(),
            f"NULL {valid_to}": vt.isNull(),
            f"negative {valid_from}": vf < 0,
            f"negative {valid_to}": vt < 0,
            f"{valid_to} < {valid_from}": vt < vf,
        }, f"bad events in micro-batch {batch_id}")
        tick = int(batch_id)
        runs = []
        owner = f"b{tick}x{uuid.uuid4().hex[:12]}"
        try:
            if figures["events"]:
                data = [F.col(c) for c in spec.data]
                t0 = F.lit(tick).cast("long")
                plus = df.select(*data, F.greatest(vf.cast("long"), t0).alias("time"),
                                 F.lit(1).cast("long").alias("diff"))
                minus = df.select(*data, F.greatest(vt.cast("long"), t0).alias("time"),
                                  F.lit(-1).cast("long").alias("diff"))
                upd = plus.unionByName(minus)
                upd = upd.repartition(buckets, *bucket_columns(upd, spec.data))
                fn = _runs_partition(str(url), schema, arr.prefix, owner, spec.data, tick)
                rows = upd.mapInArrow(
                    fn, "keys array<string>, len long, ts_lower long, ts_upper long, size_bytes long"
                ).collect()
                runs = [r.asDict() for r in rows]
            arr.append_runs(runs, seal=tick + 1)
        except BaseException:
            for k in owned_keys(arr.store, arr.prefix, owner):
                with contextlib.suppress(Exception):  # best effort; gc collects the rest
                    arr.store.delete(k)
            raise
        figures["runs"] = len(runs)
        figures["updates"] = sum(r["len"] for r in runs)
        if maintain:
            # After the commit: a crash here loses nothing, the next batch drains it.
            arr.maintain()
        figures["seconds"] = _time.perf_counter() - started
        if on_batch is not None:
            on_batch(figures)

    return one_batch


def stream_sink(
    events,
    url: str,
    checkpoint: str,
    *,
    keys: Sequence[str],
    value: str,
    valid_from: str = "valid_from",
    valid_to: str = "valid_to",
    name: str = NAME,
    consensus: str | None = None,
    buckets: int | None = None,
    available_now: bool = False,
    on_batch: Callable[[dict], None] | None = None,
    maintain: bool = True,
):
    """Maintain the temporal-filter view of a streaming events DataFrame in an arrangement.

    Parameters
    ----------
    events : pyspark.sql.DataFrame
        A streaming (or, for tests, any) DataFrame of events with ``keys``, ``value``,
        ``valid_from`` and ``valid_to`` (integer times in ticks: tick ``n`` is micro-batch
        ``n``, module docstring).
    url : str
        The arrangement's store (a directory, ``mem://`` only within one process, ``s3://``
        with ``consensus``); executors write parts there directly.
    checkpoint : str
        Spark's checkpoint directory; bound to this store and these columns.
    keys, value, valid_from, valid_to : column names
    name : str
        The arrangement's name in the store.
    buckets : int, optional
        Key buckets per micro-batch (default ``spark.sql.shuffle.partitions``).
    available_now : bool
        Process what is there now and stop (``Trigger.AvailableNow``).
    on_batch : callable, optional
        Called on the driver after each micro-batch with a dict of its figures
        (``batch``, ``replayed``, ``events``, ``runs``, ``updates``, ``seconds``).
    maintain : bool
        Drain the newly sealed tick into the trace after each commit (default).

    Returns
    -------
    pyspark.sql.streaming.StreamingQuery

    Raises
    ------
    ColumnMissingError, TypeError, ValueError
        A bad schema (before the query starts).
    StreamBindingError
        The checkpoint belongs to another store or columns.
    colmz.arrangement.SchemaMismatch
        The store holds another view.

    Bad values in a micro-batch (NULL or negative times, ``valid_to < valid_from``) or a
    schema change fail the query with :class:`colmz.spark.InputError` before the batch
    commits anything.

    Examples
    --------
    >>> events = spark.readStream.schema(schema).parquet(indir)  # doctest: +SKIP
    >>> q = stream_sink(events, store, ckpt, keys=["k"], value="v", available_now=True)  # doctest: +SKIP
    >>> q.awaitTermination()  # doctest: +SKIP
    >>> colmz.Arrangement.open(store).read(as_of=3)  # doctest: +SKIP
    """
    from colmz.spark.frames import shuffle_partitions

    spec = EventsSpec(tuple([keys] if isinstance(keys, str) else keys), value, valid_from, valid_to)
    check_schema(events.schema, spec)
    if buckets is None:
        buckets = shuffle_partitions(events)
    one_batch = batch_writer(events.schema, url, checkpoint, keys=spec.keys, value=value,
                             valid_from=valid_from, valid_to=valid_to, name=name, consensus=consensus,
                             buckets=buckets, on_batch=on_batch, maintain=maintain)
    writer = events.writeStream.foreachBatch(one_batch).option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()
