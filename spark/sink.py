"""The self-correcting materialized-view sink on Spark (Materialize's materialized-view sink, ``src/compute/src/sink/materialized_view.rs``).

Design
------
A sink keeps a *persisted* collection of updates equal to a *desired* one by appending only
corrections. Materialize does it with a correction buffer (``colmz.Correction``): insert the
desired updates, insert the persisted ones negated, and at each write upper append whatever
the buffer holds before it -- ``desired - persisted`` -- then feed what was appended back
(negated) and advance the buffer's since to the upper.

:func:`sink` runs that loop per key bucket. Desired updates and persisted ones (marked) are
hash-partitioned by their data columns into ``buckets`` partitions, so all updates of one
row meet in one Python worker; there a ``Correction`` takes them in as they stream in (desired
and negated persisted updates cancel as its chains merge, so the buffer holds the difference,
not both inputs) and then, for each tick ``t`` in order:

1. ``updates_before(t + 1)`` -- the corrections at times ``<= t`` -- are yielded;
2. they are fed back with ``insert_negated`` (they are now persisted);
3. ``advance_since(t + 1)``.

All ticks of a bucket are one call, ``Correction.drain_stepwise(uppers)``: the same loop as
one consolidation, returning every tick's corrections in one ``Updates`` sorted by time (the
corrections of tick ``i`` are its times in ``[upper_{i-1}, upper_i)``).

After tick ``t`` the persisted collection plus everything yielded so far accumulates to the
desired collection at every time ``<= t``. Updates at times after the last tick stay in the
buffer and are not written: with a temporal filter those are the scheduled far-future
retractions, which is the workload the bucketed buffer is built for.

Output is deterministic: a bucket's corrections depend only on the multiset of its input
rows (the buffer consolidates and sorts), so a retried Spark task yields exactly the same
rows, and the driver commits one written run per task (``colmz.spark.arrangement_io``).

Statistics (largest buffer sizes, corrections per tick) travel back to the driver through a
Spark accumulator keyed by partition id, so a retried task overwrites, never adds to, its
entry (:class:`SinkStats`).
"""

# No ``from __future__ import annotations``: pyspark reads the UDF's type hints at runtime.
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import colmz
from colmz.spark.batches import as_updates, to_batches
from colmz.spark.frames import bucket_columns, normalised
from colmz.spark.schemas import SPARK_MAX_TIME, check_bound, check_update_columns, updates_schema

__all__ = ["SinkStats", "check_ticks", "sink"]

_SIDE = "_colmz_persisted"


def check_ticks(ticks: Sequence[int]) -> list[int]:
    """Validate ticks: a non-empty, strictly increasing sequence of times ``< 2**63 - 1``.

    >>> check_ticks(range(3))
    [0, 1, 2]
    >>> check_ticks([3, 2])
    Traceback (most recent call last):
    ...
    ValueError: ticks must be strictly increasing: ticks[1] = 2 follows 3
    """
    out = []
    for i, t in enumerate(ticks):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"ticks[{i}] must be an int time, got {t!r}")
        t = int(t)
        if t < 0 or t >= SPARK_MAX_TIME:
            raise ValueError(f"ticks[{i}] must be in [0, 2**63-1), got {t}")
        if out and t <= out[-1]:
            raise ValueError(f"ticks must be strictly increasing: ticks[{i}] = {t} follows {out[-1]}")
        out.append(t)
    if not out:
        raise ValueError("ticks must not be empty")
    return out


class _MergeByPartition:
    """AccumulatorParam: a dict partition id -> stats; later entries replace earlier ones."""

    def zero(self, value):
        return {}

    def addInPlace(self, a, b):
        a.update(b)
        return a


class SinkStats:
    """Per-tick statistics of a :func:`sink` run, gathered from the executors.

    Create it before building the sink, pass it as ``stats=``, run an action on the result,
    then read the properties. Values refer to the last completed run of each partition.

    Examples
    --------
    >>> st = SinkStats(spark)  # doctest: +SKIP
    >>> out = colmz.spark.sink(desired, persisted, range(1000), stats=st)  # doctest: +SKIP
    >>> out.write.parquet(path); st.written, st.largest_buffer  # doctest: +SKIP
    """

    def __init__(self, spark):
        from pyspark.accumulators import AccumulatorParam

        class _Param(_MergeByPartition, AccumulatorParam):
            pass

        self._acc = spark.sparkContext.accumulator({}, _Param())

    @property
    def accumulator(self):
        return self._acc

    @property
    def partitions(self) -> dict:
        """partition id -> ``{"buffer": largest buffer, "written": array per tick, "inserted": n}``."""
        return dict(self._acc.value)

    def _sum(self, key: str) -> np.ndarray:
        parts = [p[key] for p in self.partitions.values()]
        if not parts:
            return np.zeros(0, np.int64)
        return np.sum(np.stack(parts), axis=0)

    @property
    def written_per_tick(self) -> np.ndarray:
        """Corrections yielded at each tick."""
        return self._sum("written")

    @property
    def largest_buffer(self) -> int:
        """The buckets' largest correction buffers, summed: each bucket's is the larger of its
        size after taking its inputs in and after draining all ticks (an upper bound of the
        total held at any one time; the ticks are drained in one call, so there is no
        per-tick figure)."""
        return int(sum(p["buffer"] for p in self.partitions.values()))

    @property
    def written(self) -> int:
        return int(self.written_per_tick.sum())

    @property
    def inserted(self) -> int:
        """Updates inserted into the buffers (desired plus persisted)."""
        return int(sum(p["inserted"] for p in self.partitions.values()))


def _sink_partition(
    batches, data, time, diff, ticks, since, tunables, acc
) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    c = colmz.Correction(**tunables)
    if since is not None:
        c.advance_since(since)
    types = None
    inserted = 0
    for b in batches:
        if not b.num_rows:
            continue
        if types is None:
            types = [b.schema.field(n).type for n in data]
        side = b.column(_SIDE).to_numpy(zero_copy_only=False)
        inserted += b.num_rows
        if not side.any():
            c.insert(as_updates(b, data, time, diff))
        elif side.all():
            c.insert_negated(as_updates(b, data, time, diff))
        else:
            mask = pa.array(side)
            c.insert(as_updates(b.filter(pc.invert(mask)), data, time, diff))
            c.insert_negated(as_updates(b.filter(mask), data, time, diff))
    n = len(ticks)
    written = np.zeros(n, np.int64)
    buffered = len(c)
    if types is not None:
        # All ticks in one call: the read / feed back / advance loop of the module notes as
        # one consolidation (Correction.drain_stepwise). A tick at or before an initial since
        # reads nothing and must not move it back, hence the max.
        uppers = [max(t + 1, c.since) for t in ticks]
        out = c.drain_stepwise(uppers)
        buffered = max(buffered, len(c))
        if len(out):
            # corrections of tick i: times in [uppers[i-1], uppers[i])
            cuts = np.searchsorted(np.asarray(out.time), np.asarray(uppers, dtype=np.uint64))
            written[:] = np.diff(np.concatenate([[0], cuts]))
            yield from to_batches(out, data, time, diff, types)
    if acc is not None:
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        acc.add({pid: {"buffer": buffered, "written": written, "inserted": inserted}})


def sink(
    desired,
    persisted,
    ticks: Sequence[int],
    *,
    data: Sequence[str] | None = None,
    time: str = "time",
    diff: str = "diff",
    since: int | None = None,
    buckets: int | None = None,
    stats: SinkStats | None = None,
    tunables: Mapping[str, object] | None = None,
):
    """The corrections to append so ``persisted`` accumulates to ``desired`` at every tick.

    Parameters
    ----------
    desired : pyspark.sql.DataFrame
        Updates ``data..., time, diff`` of the collection the sink should hold.
    persisted : pyspark.sql.DataFrame or None
        Updates already written (same data columns and types); ``None`` for an empty store.
    ticks : sequence of int
        Strictly increasing write times. At tick ``t`` the corrections at times ``<= t`` are
        emitted; updates after the last tick are not.
    data, time, diff : column names
        As in :func:`colmz.spark.consolidate` (``data`` defaults to all other columns).
    since : int, optional
        Initial compaction frontier: earlier times are advanced to it (e.g. the store's
        compaction time). Default: none.
    buckets : int, optional
        Key buckets = partitions of the shuffle (default ``spark.sql.shuffle.partitions``).
        Each runs one ``colmz.Correction`` through all ticks.
    stats : SinkStats, optional
        Receives per-tick buffer sizes and correction counts when an action runs.
    tunables : mapping, optional
        Keyword arguments for ``colmz.Correction``.

    Returns
    -------
    pyspark.sql.DataFrame
        Corrections ``data..., time, diff`` (long time and diff), consolidated per tick.

    Raises
    ------
    ColumnMissingError, TypeError
        Missing or mistyped columns, or ``persisted`` columns that differ from ``desired``'s.
    ValueError
        Bad ``ticks``, ``since`` or ``buckets``.

    Examples
    --------
    >>> import colmz.spark
    >>> want = spark.createDataFrame([("a", 1, 1), ("a", 3, -1)], "k string, time long, diff long")  # doctest: +SKIP
    >>> sorted(colmz.spark.sink(want, None, range(5)).collect())  # doctest: +SKIP
    [Row(k='a', time=1, diff=1), Row(k='a', time=3, diff=-1)]
    """
    from pyspark.sql import functions as F

    data = check_update_columns(desired.schema, data, time, diff)
    ticks = check_ticks(ticks)
    since = check_bound(since, "since")
    if buckets is None:
        buckets = int(desired.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 1:
        raise ValueError(f"buckets must be a positive int, got {buckets!r}")
    tunables = dict(tunables or {})
    colmz.Correction(**tunables)  # validate the tunables on the driver, not in a task
    want = normalised(desired, data, time, diff).withColumn(_SIDE, F.lit(False))
    if persisted is not None:
        check_update_columns(persisted.schema, data, time, diff)
        dtypes = {f.name: f.dataType for f in desired.schema.fields}
        ptypes = {f.name: f.dataType for f in persisted.schema.fields}
        for n in data:
            if dtypes[n] != ptypes[n]:
                raise TypeError(
                    f"persisted column {n!r} has type {ptypes[n].simpleString()} but desired has "
                    f"{dtypes[n].simpleString()}"
                )
        have = normalised(persisted, data, time, diff).withColumn(_SIDE, F.lit(True))
        both = want.unionByName(have)
    else:
        both = want
    schema = updates_schema(both.schema, data, time, diff)
    acc = stats.accumulator if stats is not None else None
    cols = list(data)

    def colmz_sink(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from _sink_partition(batches, cols, time, diff, ticks, since, tunables, acc)

    # Hash partitioning is deterministic, so a retried task sees the same rows.
    shuffled = both.repartition(buckets, *bucket_columns(both, data)) if data else both.repartition(1)
    return shuffled.mapInArrow(colmz_sink, schema)
