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

**What a tick is** (``tick=``; docs/streaming.md says which to pick):

* ``"processing"`` (default): tick ``n`` is micro-batch ``n``. Micro-batch ``n`` closes tick
  ``n`` by moving the seal to ``n + 1``, so event times (``valid_from``/``valid_to``) are in
  micro-batch units. Every micro-batch closes a tick, data or not.
* ``"event"``: ticks are the events' own times. The watermark is the greatest ``valid_from``
  seen so far minus ``delay``; a micro-batch moves the seal up to the watermark, closing every
  tick the watermark passed. An idle stream closes nothing.

Either way a micro-batch takes its events' updates in at ``max(time, seal)`` -- a change to
an already closed tick (an event later than ``delay``) is corrected at the first open one, as
the correction buffer does when it advances its since.

**Exactly once.** A micro-batch's output (the ticks it closes), its state (new future
updates), its batch id and its input's fingerprint (a hash of the files and offsets Spark's
checkpoint logged for it, :func:`checkpoint_inputs`) commit in one
compare-and-set: ``Arrangement.append_runs(runs, seal=..., properties=...)``, the batch id and
fingerprints (of the last :data:`RECENT_BATCHES` batches) in the arrangement's properties.
Spark's offset log fixes each batch id's input, so a batch replayed after a crash sees the
same events; one the store already holds (same id, same fingerprint) writes nothing
(:func:`batch_status`). The runs depend only on the seal they were advanced to, so each
micro-batch commits with one durable call, ``append_runs(runs, expect=seal, seal=upper,
expect_properties=properties, properties=...)`` (persist's ``compare_and_append``), and has no
retry of its own: a compare-and-set lost to a commit that changed neither seal nor
properties (another writer's maintenance) is applied again to the store's latest state by the
arrangement's machine (``colmz.arrangement.machine``). A ``SealMismatch`` -- another writer
committed a batch first -- is decided by idempotence: when the store now holds this very
batch (same id, same fingerprint: a racing query over the same stream won), the batch is a
replay and writes nothing; anything else is :class:`StreamBindingError`, nothing written.
So several queries over one stream can write one store: the first to commit a batch wins,
the other finds it there and moves on. Event ticks keep their watermark's input, the
greatest ``valid_from``, in the properties too, so a restarted query resumes it exactly.

**Per micro-batch** (``foreachBatch``):

1. refresh the arrangement; a batch it already holds (:func:`batch_status`) returns at once;
2. check the batch's schema (it must not change between batches) and values (NULL or
   negative times, ``valid_to < valid_from``) with one aggregation, which also finds the
   greatest insertion time (the event watermark's input) -- nothing is written yet;
3. per key bucket (a hash shuffle by the data columns): consolidate the bucket's updates
   (times advanced to the tick), split them by *time range*, and write one run of parts per
   range into the arrangement's blob store -- ``colmz.spark.arrangement_io.write_runs(...,
   split_from=tick)``, the run writer of the batch sink too; only run descriptions go back
   to the driver;
4. the driver commits all runs, the new seal and the batch's properties with one
   ``append_runs``, then drains the newly sealed ticks into the trace
   (``Arrangement.maintain``). A failure before the commit deletes the batch's parts (their
   keys carry the batch's owner tag).

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
import threading
import uuid
from collections.abc import Callable, Sequence

from colmz.arrangement.runs import WrittenRun
from colmz.spark.events import EventsSpec, check_schema, event_problems
from colmz.spark.schemas import InputError, checked_aggregate
from colmz.spark.sink_store import NAME

__all__ = ["BATCH", "BINDING", "EVENT_MAX", "RECENT", "RECENT_BATCHES", "TICK", "TICKS",
           "StreamBindingError", "StreamStopped", "batch_fingerprint", "batch_status", "batch_writer",
           "bind_checkpoint", "check_tick", "checkpoint_inputs", "stream_sink"]

#: File in the checkpoint directory naming the store and columns the query writes.
BINDING = "colmz_stream.json"


class StreamBindingError(ValueError):
    """The checkpoint belongs to another query (another store, name or columns), or the store
    holds another query's batches."""


class StreamStopped(RuntimeError):
    """The query was asked to stop (``stop=`` set) while a micro-batch was in flight: the batch
    stopped before its commit and nothing of it was written."""


def bind_checkpoint(checkpoint: str, binding: dict, *, record: bool = True) -> None:
    """Record ``binding`` in the checkpoint directory, or check it against the recorded one.

    With ``record=False`` only the check is made (nothing is created), so a caller can refuse
    a checkpoint before it opens the store and record the binding once the store is open.

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
    path = os.path.join(checkpoint, BINDING)
    if os.path.exists(path):
        with open(path) as f:
            have = json.load(f)
        if have != binding:
            raise StreamBindingError(
                f"checkpoint belongs to another query: it writes {have}, not {binding} ({path})")
        return
    if not record:
        return
    os.makedirs(checkpoint, exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        json.dump(binding, f, sort_keys=True)
    os.replace(tmp, path)


#: Arrangement properties committed with every micro-batch (``Arrangement.properties``).
BATCH = "colmz.stream.batch"  #: the id of the last committed micro-batch
TICK = "colmz.stream.tick"  #: "processing" or "event"
EVENT_MAX = "colmz.stream.max_event_time"  #: event ticks: the greatest valid_from seen
RECENT = "colmz.stream.recent"  #: input fingerprints of the last RECENT_BATCHES batches
#: How many committed batches a racing writer can be behind and still recognise them.
RECENT_BATCHES = 64
TICKS = ("processing", "event")


def batch_fingerprint(items: Sequence[str]) -> str:
    """A short fingerprint of what identifies a micro-batch's input ("-" when nothing does):
    two queries agree on a batch when their fingerprints do.

    >>> batch_fingerprint(["b.parquet", "a.parquet"]) == batch_fingerprint(["a.parquet", "b.parquet"])
    True
    >>> batch_fingerprint([])
    '-'
    """
    import hashlib

    if not items:
        return "-"
    return hashlib.sha1("\n".join(sorted(items)).encode()).hexdigest()[:16]


def checkpoint_inputs(checkpoint: str, batch_id: int) -> list[str]:
    """What Spark's checkpoint says micro-batch ``batch_id`` read: the files a file source
    logged for it (``sources/*/``) and the sources' offsets before and after it
    (``offsets/``, without the per-query metadata line). Empty when the checkpoint is not a
    local directory or holds no such record.

    The batch DataFrame ``foreachBatch`` gets does not name its files, so the checkpoint --
    which Spark writes before the batch runs -- is where the input is identified.
    """
    import glob

    if checkpoint.startswith("file://"):
        checkpoint = checkpoint[len("file://"):]
    if not os.path.isdir(checkpoint):
        return []
    out = []
    for src in sorted(glob.glob(os.path.join(checkpoint, "sources", "*"))):
        for name in (str(batch_id), f"{batch_id}.compact"):
            path = os.path.join(src, name)
            if not os.path.exists(path):
                continue
            with open(path) as f:
                for line in f.read().splitlines()[1:]:
                    with contextlib.suppress(ValueError, TypeError, KeyError):
                        e = json.loads(line)
                        if int(e["batchId"]) == batch_id:
                            out.append(f"file {os.path.basename(src)} {e['path']}")
    for b in (batch_id - 1, batch_id):
        path = os.path.join(checkpoint, "offsets", str(b))
        if b >= 0 and os.path.exists(path):
            with open(path) as f:
                out.extend(f"offset {b - batch_id} {line}" for line in f.read().splitlines()[2:])
    return out


def check_tick(properties: dict, tick: str) -> None:
    """Refuse to go on with ``tick`` a store whose properties say it was written with the
    other tick kind (its ticks would mean something else). ``colmz stream`` checks this before
    Spark starts; every micro-batch checks it again.

    >>> check_tick({TICK: "event"}, "event")
    >>> try:
    ...     check_tick({TICK: "event"}, "processing")
    ... except StreamBindingError as e:
    ...     print(str(e)[:60])
    the store was written with event ticks, not processing ticks
    """
    mode = properties.get(TICK)
    if mode is not None and mode != tick:
        raise StreamBindingError(f"the store was written with {mode} ticks, not {tick} ticks (tick={mode!r}, "
                                 f"colmz stream --tick {mode}, or another store); nothing was written")


def batch_status(properties: dict, seal, batch_id: int, fingerprint: str, tick: str) -> bool:
    """Whether micro-batch ``batch_id`` is already in the store (True: write nothing) or is
    the next one to commit (False), from the store's properties and seal.

    A batch at or below the last committed one is recognised by its input fingerprint among
    the recent ones (a replay after a crash, or a racing writer that lost); the last batch
    itself is also taken as a replay when fingerprints are unknown (Spark replays a batch with
    the input its offset log fixed). Anything else -- a gap, an older batch with other input,
    a store written with the other tick -- is another query's store.

    Raises
    ------
    StreamBindingError
        The batch neither follows the store's last batch nor is one of its recent batches.

    >>> batch_status({}, 0, 0, "-", "processing")
    False
    >>> batch_status({BATCH: 4, TICK: "event", RECENT: "aa bb"}, 7, 3, "aa", "event")
    True
    """
    where = f"micro-batch {batch_id} does not follow the store's"
    check_tick(properties, tick)
    last = properties.get(BATCH)
    if last is None and tick == "processing" and seal:
        last = seal - 1  # a store written before batch ids were recorded: seal = batch + 1
    if seal is None:
        raise StreamBindingError(f"{where} seal {seal} (closed for good); nothing was written")
    if tick == "processing" and last is not None and seal != last + 1:
        raise StreamBindingError(f"{where} seal {seal} (last batch {last}): another writer has "
                                 "written the store; nothing was written")
    if last is None:
        if batch_id == 0:
            return False
        raise StreamBindingError(f"{where} seal {seal}: another writer or another checkpoint has written "
                                 "the store (or the store is new and the checkpoint is not); nothing was written")
    if batch_id == last + 1:
        return False
    recent = properties.get(RECENT, "").split()
    first = last - len(recent) + 1
    if first <= batch_id <= last and recent:
        have = recent[batch_id - first]
        if have != "-" and fingerprint != "-" and have == fingerprint:
            return True
        if batch_id == last and (have == "-" or fingerprint == "-"):
            return True
        raise StreamBindingError(
            f"micro-batch {batch_id} read other input than the store's batch {batch_id} "
            f"(fingerprint {fingerprint}, stored {have}): another query writes the store; nothing was written")
    if batch_id == last and not recent:
        return True
    raise StreamBindingError(f"{where} seal {seal} (last batch {last}): another writer or another "
                             "checkpoint has written the store; nothing was written")


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
    tick: str = "processing",
    delay: int = 0,
    stop: threading.Event | None = None,
) -> Callable:
    """The ``foreachBatch`` function of :func:`stream_sink`: ``fn(batch_df, batch_id)``.

    Checks the schema, binds ``checkpoint`` to the store and opens (creates) the arrangement;
    each call does one micro-batch as the module docstring says. A batch already in the store
    (:func:`batch_status`: a replay, or a racing writer's batch with the same input) writes
    nothing; one that does not follow the store's last batch raises
    :class:`StreamBindingError` before writing. The batch commits with one ``append_runs``;
    when another writer committed first (``SealMismatch``) the batch is a replay if the store
    now holds it (``conflicts`` is 1 in its figures), else :class:`StreamBindingError`.

    Once ``stop`` is set, a batch in flight raises :class:`StreamStopped` at its next step
    instead of committing (a commit already under way completes): the way to stop a query
    promptly -- set ``stop``, then ``StreamingQuery.stop()``, which cancels the batch's Spark
    jobs.

    >>> fn = batch_writer(events.schema, store, ckpt, keys=["k"], value="v")  # doctest: +SKIP
    >>> fn(spark.read.parquet(f), 0); fn(spark.read.parquet(f), 0)  # the second writes nothing  # doctest: +SKIP
    """
    import time as _time

    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from colmz.arrangement import Arrangement, CommitConflict, SealMismatch
    from colmz.order import ColumnSpec
    from colmz.spark.arrangement_io import write_runs
    from colmz.spark.frames import bucket_columns

    spec = EventsSpec(tuple([keys] if isinstance(keys, str) else keys), value, valid_from, valid_to)
    check_schema(events_schema, spec)
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"buckets must be a positive int, got {buckets!r}")
    if tick not in TICKS:
        raise ValueError(f"tick must be one of {TICKS}, got {tick!r}")
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise ValueError(f"delay must be a non-negative int (ticks), got {delay!r}")
    if delay and tick != "event":
        raise ValueError(f"delay={delay} needs tick='event' (a processing tick closes every micro-batch)")
    arrow = to_arrow_schema(events_schema)
    schema = tuple(ColumnSpec(n, arrow.field(n).type) for n in spec.data)
    first_schema = events_schema
    binding = {"store": str(url), "name": name, "keys": list(spec.keys), "value": spec.value,
               "valid_from": valid_from, "valid_to": valid_to}
    if tick == "event":  # processing-tick checkpoints keep the binding they were written with
        binding.update(tick=tick, delay=delay)
    # Refuse another query's checkpoint before the store is touched, and record the binding
    # only once the store opened: a store holding another view (SchemaMismatch) leaves the
    # checkpoint unbound, so the same checkpoint can still be used with the right store.
    bind_checkpoint(checkpoint, binding, record=False)
    arr = Arrangement.open(url, schema, consensus=consensus, name=name)
    bind_checkpoint(checkpoint, binding)

    def batch_runs(df, open_tick: int, owner: str) -> list[WrittenRun]:
        """Write the batch's runs (not committed, their keys tagged with ``owner``), one per
        key bucket and time range (``colmz.spark.arrangement_io.write_runs``)."""
        vf, vt = F.col(valid_from), F.col(valid_to)
        data = [F.col(c) for c in spec.data]
        t0 = F.lit(open_tick).cast("long")
        plus = df.select(*data, F.greatest(vf.cast("long"), t0).alias("time"), F.lit(1).cast("long").alias("diff"))
        minus = df.select(*data, F.greatest(vt.cast("long"), t0).alias("time"), F.lit(-1).cast("long").alias("diff"))
        upd = plus.unionByName(minus)
        upd = upd.repartition(buckets, *bucket_columns(upd, spec.data))
        # the parts record the version the driver read (a restored older consensus is noticed)
        return write_runs(upd, str(url), schema, prefix=arr.prefix, owner=owner, seqno=arr.seqno,
                          split_from=open_tick)

    def stopped(batch_id: int) -> StreamStopped:
        return StreamStopped(f"micro-batch {batch_id} stopped before its commit: the query was asked "
                             "to stop; nothing of the batch was written")

    def stopping(batch_id: int) -> None:
        if stop is not None and stop.is_set():
            raise stopped(batch_id)

    def replayed(figures: dict, seal, started: float) -> None:
        figures["replayed"] = True
        figures["seal"] = seal
        figures["seconds"] = _time.perf_counter() - started
        if on_batch is not None:
            on_batch(figures)

    def one_batch(df, batch_id: int) -> None:
        started = _time.perf_counter()
        batch_id = int(batch_id)
        figures = {"batch": batch_id, "replayed": False, "events": 0, "runs": 0,
                   "updates": 0, "seconds": 0.0, "seal": None, "conflicts": 0}
        fingerprint = batch_fingerprint(checkpoint_inputs(checkpoint, batch_id))
        stopping(batch_id)
        arr.refresh()
        seal, props = arr.get_seal(), arr.properties()
        if batch_status(props, seal, batch_id, fingerprint, tick):
            replayed(figures, seal, started)
            return
        if df.schema != first_schema:
            raise InputError(f"micro-batch {batch_id} has schema {df.schema.simpleString()}, "
                             f"not the query's {first_schema.simpleString()}")
        # The first open tick: events about closed ticks are corrected there.
        open_tick = int(seal)
        problems = event_problems(spec, F.col(valid_from), F.col(valid_to),
                                  lambda c: c.isNull(), lambda a, b: a < b)
        # the greatest insertion time (the event-time watermark's input) in the same job
        checked = checked_aggregate(df, problems, f"bad events in micro-batch {batch_id}", {
            "event_max": F.max(F.greatest(F.col(valid_from).cast("long"), F.lit(open_tick).cast("long")))})
        figures["events"] = checked["rows"]
        runs: list[WrittenRun] = []
        owner = f"b{batch_id}x{uuid.uuid4().hex[:12]}"
        recent = (props.get(RECENT, "").split() + [fingerprint])[-RECENT_BATCHES:]
        new_props = {BATCH: batch_id, TICK: tick, RECENT: " ".join(recent)}
        if tick == "processing":
            new_seal = batch_id + 1
        else:
            event_max, batch_max = props.get(EVENT_MAX), checked["event_max"]
            if batch_max is not None:
                event_max = batch_max if event_max is None else max(event_max, batch_max)
            if event_max is not None:
                new_props[EVENT_MAX] = event_max
            new_seal = open_tick if event_max is None else max(open_tick, event_max - delay)
        try:
            if figures["events"]:
                runs = batch_runs(df, open_tick, owner)
            # The runs depend only on the seal they were advanced to, the new properties only
            # on the old ones: one durable call commits them only on that seal and those
            # properties. A compare-and-set lost to a commit that changed neither (a racing
            # writer's maintenance) is applied again by the arrangement's machine to the
            # latest state; one that did is SealMismatch, decided below.
            stopping(batch_id)
            arr.append_runs(runs, seal=new_seal, properties=new_props, expect=seal, expect_properties=props)
        except SealMismatch as e:
            # Another writer committed first. Exactly once: when it committed this very batch
            # (a racing query over the same input), this one is a replay; anything else is
            # not this query's to overwrite.
            _delete_owned(arr, owner)
            arr.refresh()
            now, now_props = arr.get_seal(), arr.properties()
            if batch_status(now_props, now, batch_id, fingerprint, tick):
                figures["conflicts"] = 1
                replayed(figures, now, started)
                return
            raise StreamBindingError(
                f"micro-batch {batch_id}: another writer moved the store from seal {seal} to {now} "
                f"(properties {now_props}) while the batch was written, without committing this "
                "batch; nothing of it was written (restart the query, or stop the other writer)") from e
        except BaseException as e:
            _delete_owned(arr, owner)
            if stop is not None and stop.is_set() and not isinstance(e, StreamStopped):
                # a Spark job of the batch cancelled by StreamingQuery.stop(): say so
                # briefly (Spark's long interruption trace is of no use here)
                raise stopped(batch_id) from None
            raise
        figures["runs"] = len(runs)
        figures["updates"] = sum(r.len for r in runs)
        figures["seal"] = new_seal
        if maintain:
            # After the commit: a crash here loses nothing, the next batch drains it; a writer
            # racing this one may do the same maintenance first (its commit wins, ours retries
            # or gives up -- either way the store is consistent).
            with contextlib.suppress(CommitConflict):
                arr.maintain()
        figures["seconds"] = _time.perf_counter() - started
        if on_batch is not None:
            on_batch(figures)

    return one_batch


def _delete_owned(arr, owner: str) -> None:
    from colmz.arrangement.runs import discard_owned

    # Keep what committed state names, re-read: a commit that failed with an unknown
    # outcome may have landed. Best effort; gc collects whatever is left after its lease.
    with contextlib.suppress(Exception):
        arr.refresh()
        discard_owned(arr.store, arr.prefix, owner, arr.referenced_keys())


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
    tick: str = "processing",
    delay: int = 0,
    stop: threading.Event | None = None,
):
    """Maintain the temporal-filter view of a streaming events DataFrame in an arrangement.

    Parameters
    ----------
    events : pyspark.sql.DataFrame
        A streaming (or, for tests, any) DataFrame of events with ``keys``, ``value``,
        ``valid_from`` and ``valid_to`` (integer times in ticks, module docstring).
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
        (``batch``, ``replayed``, ``events``, ``runs``, ``updates``, ``seconds``, ``seal``,
        ``conflicts``).
    maintain : bool
        Drain the newly sealed tick into the trace after each commit (default).
    tick : {"processing", "event"}
        What a tick is (module docstring): ``"processing"`` -- micro-batch ``n`` closes tick
        ``n`` -- or ``"event"`` -- ticks are event times, closed when the watermark (the
        greatest ``valid_from`` seen, minus ``delay``) passes them.
    delay : int
        Event ticks only: how many ticks late an event may arrive and still be placed at its
        own time (later ones are corrected at the first open tick).
    stop : threading.Event, optional
        Set it before ``StreamingQuery.stop()`` to stop promptly: a micro-batch in flight then
        raises :class:`StreamStopped` before its commit instead of committing or retrying
        (:func:`batch_writer`).

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
                             buckets=buckets, on_batch=on_batch, maintain=maintain, tick=tick, delay=delay,
                             stop=stop)
    writer = events.writeStream.foreachBatch(one_batch).option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()
