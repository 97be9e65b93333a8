"""Grouped and mapped functions that run colmz inside Spark's Python workers.

Design
------
A Spark DataFrame of updates has data columns, a ``time`` column and a ``diff`` column; Spark
has no unsigned 64-bit type, so in Spark a time is a non-negative ``long`` (colmz's ``uint64``
restricted to ``[0, 2**63)``) and a diff is a ``long``.

Everything here works on *streams* of Arrow record batches, the iterator forms of
``mapInArrow`` / ``applyInArrow`` / ``applyInPandas``, so a big group or partition is never
held raw in one piece: batches are consolidated as they arrive into a short list of
consolidated *runs* whose sizes fall geometrically (a newer run is merged into the one before
it while it holds more than half as many updates). Memory is bounded by the consolidated size
of the group plus one flush of raw rows, and every update is merged ``O(log n)`` times.

Two layers:

* :func:`consolidate_fn` / :func:`snapshot_fn` return a :class:`GroupedFunction` -- a function
  plus its output schema -- for ``df.groupBy(...).applyInArrow(*gf)``, ``applyInPandas(*gf)``
  (``form="pandas"``) or ``df.mapInArrow(*gf)``, for users' own pipelines.
* :func:`consolidate` / :func:`snapshot` are DataFrame operations. They shuffle by a hash of
  the data columns (:func:`bucket_columns`: ``repartition``, so no sort by group key is
  needed as ``groupBy().applyIn*`` would add) and consolidate each bucket with ``mapInArrow``.
  Optionally (``partial=True``) each input partition is consolidated *before* the shuffle
  too; it switches itself to a pass-through when a probe shows the partition barely shrinks.
  It is off by default because the extra Arrow hand-off measured costlier than the shuffle
  it saves on this machine (see :func:`consolidate`).

Equality of data follows colmz (SQL ``GROUP BY``): NULL = NULL, NaN = NaN, -0.0 = 0.0. Spark's
hash distinguishes -0.0 from 0.0, so the bucket expressions map -0.0 to 0.0 first.
"""

# No ``from __future__ import annotations``: pyspark picks the iterator forms of
# applyInPandas/applyInArrow from the functions' evaluated type hints.
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

import colmz
from colmz.frontier import check_time

__all__ = [
    "ColumnMissingError",
    "GroupedFunction",
    "InputError",
    "bucket_columns",
    "check_update_columns",
    "check_update_values",
    "consolidate",
    "consolidate_fn",
    "snapshot",
    "snapshot_fn",
    "updates_schema",
]

#: Largest time representable in a Spark ``long`` time column.
SPARK_MAX_TIME = 2**63 - 1

#: Raw rows gathered before they are consolidated into a run (bounded memory per call).
FLUSH_ROWS = 1 << 20

#: Rows per output record batch handed back to Spark.
OUT_BATCH_ROWS = 1 << 16

#: Rows a partial consolidation looks at before deciding whether to keep consolidating.
PARTIAL_PROBE_ROWS = 1 << 16

#: A partial (pre-shuffle) consolidation that keeps more than this share of its input
#: switches to pass-through: sorting mostly-distinct updates twice buys nothing.
PARTIAL_KEEP_RATIO = 0.8


class InputError(ValueError):
    """Input updates or events that colmz cannot take (bad values, not bad code)."""


class ColumnMissingError(InputError, KeyError):
    """A named column is not in the DataFrame."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class GroupedFunction(NamedTuple):
    """A function over a stream of batches and the Spark schema of what it yields.

    Unpacks into the two arguments of ``applyInArrow``/``applyInPandas``/``mapInArrow``.
    """

    fn: Callable
    schema: object  # pyspark.sql.types.StructType


# ----------------------------------------------------------------------------- schemas


def _spark_types():
    from pyspark.sql import types as T

    integers = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    data = (
        *integers, T.FloatType, T.DoubleType, T.BooleanType, T.StringType, T.BinaryType,
        T.DateType, T.TimestampType, T.TimestampNTZType,
    )
    return T, integers, data


def check_update_columns(
    schema, data: Sequence[str] | None, time: str, diff: str
) -> list[str]:
    """Validate the columns of a DataFrame of updates; return the data column names.

    Parameters
    ----------
    schema : pyspark.sql.types.StructType
    data : sequence of str, optional
        Data columns (default: every column but ``time`` and ``diff``, in order).
    time, diff : str
        Names of the time and diff columns; both must be integer columns.

    Raises
    ------
    ColumnMissingError
        A named column is not in ``schema``.
    TypeError
        A column has a type colmz cannot take (the message names it and its type).
    ValueError
        ``data`` names ``time``/``diff`` or repeats a column.

    Examples
    --------
    >>> from pyspark.sql import types as T
    >>> s = T.StructType([T.StructField("k", T.StringType()), T.StructField("time", T.LongType()),
    ...                   T.StructField("diff", T.IntegerType())])
    >>> check_update_columns(s, None, "time", "diff")
    ['k']
    >>> try:
    ...     check_update_columns(s, ["k"], "t", "diff")
    ... except KeyError as e:
    ...     print(e)
    time column 't' is not in the DataFrame; columns are ['k', 'time', 'diff']
    """
    T, integers, supported = _spark_types()
    fields = {f.name: f for f in schema.fields}
    names = list(fields)
    for role, col in (("time", time), ("diff", diff)):
        if col not in fields:
            raise ColumnMissingError(f"{role} column {col!r} is not in the DataFrame; columns are {names}")
        if not isinstance(fields[col].dataType, integers):
            raise TypeError(
                f"{role} column {col!r} has type {fields[col].dataType.simpleString()}; "
                "it must be an integer type (byte/short/int/long)"
            )
    if time == diff:
        raise ValueError(f"time and diff must be different columns, both are {time!r}")
    if data is None:
        data = [n for n in names if n not in (time, diff)]
    else:
        if isinstance(data, str):
            data = [data]
        data = list(data)
        for n in data:
            if n not in fields:
                raise ColumnMissingError(f"data column {n!r} is not in the DataFrame; columns are {names}")
            if n in (time, diff):
                raise ValueError(f"data column {n!r} is also the time or diff column")
        if len(set(data)) != len(data):
            raise ValueError(f"data names a column twice: {data}")
    for n in data:
        t = fields[n].dataType
        if not isinstance(t, supported):
            raise TypeError(
                f"data column {n!r} has type {t.simpleString()}; colmz takes integers, floats, "
                "boolean, string, binary, date and timestamp columns"
            )
    return data


def check_update_values(df, time: str = "time", diff: str = "diff") -> int:
    """Check a DataFrame's update values with one aggregation; return its row count.

    Raises
    ------
    InputError
        NULL or negative times, NULL diffs (each problem with its count and one row).
    """
    from pyspark.sql import functions as F

    t, d = F.col(time), F.col(diff)
    problems = {
        f"NULL {time}": t.isNull(),
        f"negative {time}": t < 0,
        f"NULL {diff}": d.isNull(),
    }
    return check_rows(df, problems, "bad updates")


def check_rows(df, problems, what: str) -> int:
    """Count the rows matching each problem condition in one aggregation; return the row count.

    ``problems`` maps a description to a boolean Column. When any row matches, raises
    :class:`InputError` ``"<what>: <n> row(s) with <description>, e.g. <row as JSON>; ..."``.
    """
    from pyspark.sql import functions as F

    row = F.to_json(F.struct(*[F.col(c) for c in df.columns]))
    aggs = [F.count(F.lit(1)).alias("rows")]
    for i, cond in enumerate(problems.values()):
        aggs.append(F.sum(F.when(cond, 1).otherwise(0)).alias(f"n{i}"))
        aggs.append(F.first(F.when(cond, row), ignorenulls=True).alias(f"e{i}"))
    r = df.agg(*aggs).collect()[0]
    found = [
        f"{r[f'n{i}']} row(s) with {desc}, e.g. {r[f'e{i}']}"
        for i, desc in enumerate(problems)
        if r[f"n{i}"]
    ]
    if found:
        raise InputError(f"{what}: " + "; ".join(found))
    return int(r["rows"])


def updates_schema(schema, data: Sequence[str], time: str = "time", diff: str = "diff"):
    """The Spark schema of updates over ``data`` columns taken from ``schema``.

    Data fields keep their types and nullability; ``time`` and ``diff`` are non-null ``long``.

    >>> from pyspark.sql import types as T
    >>> s = T.StructType([T.StructField("k", T.StringType())])
    >>> updates_schema(s, ["k"]).simpleString()
    'struct<k:string,time:bigint,diff:bigint>'
    """
    from pyspark.sql import types as T

    fields = {f.name: f for f in schema.fields}
    return T.StructType(
        [fields[n] for n in data]
        + [T.StructField(time, T.LongType(), False), T.StructField(diff, T.LongType(), False)]
    )


def _check_bound(value, name: str) -> int | None:
    if value is None:
        return None
    # One statement of the range on Spark, whatever the violation: colmz's own check would
    # name uint64's range, which Spark times never reach.
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= SPARK_MAX_TIME:
        raise ValueError(f"{name} must be a time in [0, 2**63-1] on Spark (a non-negative long), got {value!r}")
    v = check_time(value, name)
    if v > SPARK_MAX_TIME:
        raise ValueError(f"{name} must be a time in [0, 2**63-1] on Spark (a non-negative long), got {value!r}")
    return v


# ----------------------------------------------------------------------------- in-worker helpers


def _as_updates(batch: pa.RecordBatch, data: Sequence[str], time: str, diff: str) -> colmz.Updates:
    return colmz.Updates(
        {n: batch.column(n) for n in data}, batch.column(time), batch.column(diff)
    )


def _filter_upper(batch: pa.RecordBatch, time: str, since: int | None, upper: int | None) -> pa.RecordBatch:
    """Keep the updates whose time, advanced to ``since``, is before ``upper``."""
    if upper is None:
        return batch
    if since is not None and since >= upper:
        return batch.slice(0, 0)
    t = batch.column(time).to_numpy(zero_copy_only=False)
    keep = t < upper
    if keep.all():
        return batch
    return batch.filter(pa.array(keep))


def _to_batches(
    u: colmz.Updates, data: Sequence[str], time: str, diff: str, types: Sequence[pa.DataType]
) -> Iterator[pa.RecordBatch]:
    """``Updates`` as record batches in Spark's layout: data columns, long time, long diff."""
    arrays = []
    for n, t in zip(data, types):
        c = u.column(n)
        arrays.append(c if c.type == t else c.cast(t))
    # Times came from a Spark long column (< 2**63), so the uint64 bits read as int64 unchanged.
    arrays.append(pa.array(np.asarray(u.time).view(np.int64)))
    arrays.append(pa.array(np.asarray(u.diff)))
    names = [*data, time, diff]
    n = len(u)
    for start in range(0, n, OUT_BATCH_ROWS):
        stop = min(start + OUT_BATCH_ROWS, n)
        yield pa.RecordBatch.from_arrays([a.slice(start, stop - start) for a in arrays], names=names)


class _Runs:
    """Consolidates a stream of updates into geometrically shrinking consolidated runs."""

    def __init__(self, since: int | None, flush_rows: int = FLUSH_ROWS):
        self.since = since
        self.flush_rows = flush_rows
        self.runs: list[colmz.Updates] = []
        self.pending: list[colmz.Updates] = []
        self.pending_rows = 0
        self.raw_rows = 0

    def add(self, u: colmz.Updates) -> bool:
        """Add a batch; return True when it triggered a flush."""
        if not len(u):
            return False
        self.pending.append(u)
        self.pending_rows += len(u)
        self.raw_rows += len(u)
        if self.pending_rows >= self.flush_rows:
            self.flush()
            return True
        return False

    def flush(self) -> None:
        if not self.pending:
            return
        run = colmz.consolidate(colmz.concat(self.pending), since=self.since)
        self.pending, self.pending_rows = [], 0
        if len(run):
            self.runs.append(run)
        # Merge while the newest run is more than half the one before: O(log n) runs.
        while len(self.runs) >= 2 and 2 * len(self.runs[-1]) > len(self.runs[-2]):
            b, a = self.runs.pop(), self.runs.pop()
            merged = colmz.consolidate(colmz.concat([a, b]))
            if len(merged):
                self.runs.append(merged)

    def result(self) -> colmz.Updates | None:
        self.flush()
        if not self.runs:
            return None
        if len(self.runs) == 1:
            return self.runs[0]
        return colmz.consolidate(colmz.concat(self.runs))

    def held(self) -> int:
        return self.pending_rows + sum(len(r) for r in self.runs)


def _stream_consolidate(
    batches: Iterable[pa.RecordBatch],
    data: Sequence[str],
    time: str,
    diff: str,
    since: int | None,
    upper: int | None,
    partial: bool,
    flush_rows: int = FLUSH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Consolidate a stream of Arrow batches (the body of every consolidating function).

    With ``partial`` the output may still hold duplicates (a later consolidation follows):
    after ``PARTIAL_PROBE_ROWS`` rows and after every flush, if consolidation kept more than
    ``PARTIAL_KEEP_RATIO`` of the rows, the rest of the stream passes through untouched.
    """
    runs = _Runs(since, flush_rows)
    types: list[pa.DataType] | None = None
    passthrough = False
    decided = False
    for batch in batches:
        if types is None:
            types = [batch.schema.field(n).type for n in data]
        batch = _filter_upper(batch, time, since, upper)
        if not batch.num_rows:
            continue
        if passthrough:
            yield batch.select([*data, time, diff])
            continue
        flushed = runs.add(_as_updates(batch, data, time, diff))
        if partial and not decided and runs.raw_rows >= PARTIAL_PROBE_ROWS:
            # Probe early, like Spark's adaptive partial aggregation: consolidate what came
            # so far and keep going only if it shrank.
            decided = True
            if not flushed:
                runs.flush()
            flushed = True
        if partial and flushed and runs.held() > PARTIAL_KEEP_RATIO * runs.raw_rows:
            passthrough = True
            out = runs.result()
            runs = _Runs(since, flush_rows)
            if out is not None:
                yield from _to_batches(out, data, time, diff, types)
    out = runs.result()
    if out is not None and types is not None:
        yield from _to_batches(out, data, time, diff, types)


# ----------------------------------------------------------------------------- grouped functions


def consolidate_fn(
    schema,
    data: Sequence[str] | None = None,
    time: str = "time",
    diff: str = "diff",
    *,
    since: int | None = None,
    upper: int | None = None,
    form: str = "arrow",
) -> GroupedFunction:
    """A grouped function that consolidates each group (or partition) of updates.

    The function streams: it takes an iterator of batches and yields batches, so a large
    group is consolidated in bounded memory (see the module notes). Use it with
    ``groupBy(...).applyInArrow`` (``form="arrow"``), ``groupBy(...).applyInPandas``
    (``form="pandas"``), or ``mapInArrow`` when the DataFrame is already partitioned by the
    data (e.g. ``df.repartition(n, *bucket_columns(df, data))``).

    Parameters
    ----------
    schema : pyspark.sql.types.StructType
        Schema of the input DataFrame.
    data, time, diff : column names (``data`` defaults to all but ``time`` and ``diff``)
    since : int, optional
        Advance every time to ``max(time, since)`` first.
    upper : int, optional
        Keep only updates whose (advanced) time is ``< upper``.
    form : ``"arrow"`` or ``"pandas"``
        ``"pandas"`` exchanges pandas DataFrames (``Iterator[pd.DataFrame]``); pandas turns
        integer columns with NULLs into floats, so prefer ``"arrow"`` for such data.

    Returns
    -------
    GroupedFunction
        ``(fn, schema)``; each group's output is consolidated: each ``(data, time)`` once, no
        zero diffs, sorted by ``(time, data)``.

    Examples
    --------
    >>> from colmz.spark.udfs import bucket_columns, consolidate_fn
    >>> gf = consolidate_fn(df.schema, ["k"])  # doctest: +SKIP
    >>> df.groupBy(bucket_columns(df, ["k"], 16)).applyInArrow(*gf)  # doctest: +SKIP
    >>> df.groupBy("k").applyInPandas(*consolidate_fn(df.schema, ["k"], form="pandas"))  # doctest: +SKIP
    """
    data = check_update_columns(schema, data, time, diff)
    since = _check_bound(since, "since")
    upper = _check_bound(upper, "upper")
    out_schema = updates_schema(schema, data, time, diff)
    return _make_fn(data, time, diff, since, upper, form, out_schema, partial=False)


def snapshot_fn(
    schema,
    as_of: int,
    data: Sequence[str] | None = None,
    time: str = "time",
    diff: str = "diff",
    *,
    form: str = "arrow",
) -> GroupedFunction:
    """A grouped function yielding each group's collection as of ``as_of``.

    The collection at ``as_of`` is the sum of all updates with ``time <= as_of``; it is
    returned as updates at time ``as_of`` (``diff`` = multiplicity, never 0), so the output
    is itself a valid, consolidated collection of updates.

    Examples
    --------
    >>> from colmz.spark.udfs import snapshot_fn
    >>> df.groupBy("k").applyInArrow(*snapshot_fn(df.schema, 10, ["k"]))  # doctest: +SKIP
    """
    as_of = _check_bound(as_of, "as_of")
    if as_of is None:
        raise ValueError("as_of must be a time, got None")
    if as_of == SPARK_MAX_TIME:
        raise ValueError(f"as_of must be < 2**63-1 (as_of + 1 is the read upper), got {as_of}")
    return consolidate_fn(schema, data, time, diff, since=as_of, upper=as_of + 1, form=form)


def _make_fn(data, time, diff, since, upper, form, out_schema, partial) -> GroupedFunction:
    data = list(data)
    if form == "arrow":

        def colmz_consolidate_arrow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield from _stream_consolidate(batches, data, time, diff, since, upper, partial)

        return GroupedFunction(colmz_consolidate_arrow, out_schema)
    if form == "pandas":

        def colmz_consolidate_pandas(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            batches = (
                pa.RecordBatch.from_pandas(f[[*data, time, diff]], preserve_index=False) for f in frames
            )
            for b in _stream_consolidate(batches, data, time, diff, since, upper, partial):
                yield b.to_pandas()

        return GroupedFunction(colmz_consolidate_pandas, out_schema)
    raise ValueError(f"form must be 'arrow' or 'pandas', got {form!r}")


# ----------------------------------------------------------------------------- DataFrame operations


def bucket_columns(df, data: Sequence[str], n: int | None = None):
    """Expressions to hash-partition ``df`` by its data columns with colmz's equality.

    Float columns are normalised so that ``-0.0`` and ``0.0`` land together (NaNs already
    hash alike in Spark). With ``n``, returns one ``int`` bucket column
    ``pmod(hash(...), n)`` for ``groupBy``; without, the list of normalised columns for
    ``repartition(k, *cols)``.

    Examples
    --------
    >>> df.groupBy(bucket_columns(df, ["k"], 64)).applyInArrow(*consolidate_fn(df.schema))  # doctest: +SKIP
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    types = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for name in data:
        c = F.col(name)
        if isinstance(types[name], (T.FloatType, T.DoubleType)):
            c = F.when(c == F.lit(0.0), F.lit(0.0).cast(types[name])).otherwise(c)
        cols.append(c)
    if n is None:
        return cols
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not cols:
        return F.lit(0).alias("_colmz_bucket")
    return F.pmod(F.hash(*cols), F.lit(n)).alias("_colmz_bucket")


def _shuffle_partitions(df) -> int:
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))


def _normalised(df, data, time, diff):
    """``df`` reduced to ``data..., time, diff`` with long time and diff."""
    from pyspark.sql import functions as F

    return df.select(*data, F.col(time).cast("long").alias(time), F.col(diff).cast("long").alias(diff))


def consolidate(
    df,
    data: Sequence[str] | None = None,
    time: str = "time",
    diff: str = "diff",
    since: int | None = None,
    upper: int | None = None,
    *,
    buckets: int | None = None,
    partial: bool = False,
):
    """Consolidate a DataFrame of updates: equal ``(data, time)`` summed, zero diffs dropped.

    Rows are shuffled by a hash of the data columns into ``buckets`` partitions and each is
    consolidated with colmz's kernels as it streams in. With ``partial=True`` each input
    partition is consolidated before the shuffle too.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    data : column names, optional
        Data columns (default: all but ``time`` and ``diff``).
    time, diff : str
        Integer columns; times must be >= 0 (a negative time fails the job with
        ``ValueError``).
    since : int, optional
        Advance times to ``max(time, since)`` (logical compaction).
    upper : int, optional
        Keep only updates whose advanced time is ``< upper``.
    buckets : int, optional
        Partitions of the shuffle (default ``spark.sql.shuffle.partitions``).
    partial : bool
        Also consolidate each input partition before the shuffle (it passes rows through by
        itself when a probe shows they do not shrink). Off by default: colmz consolidates a
        million updates in tens of milliseconds, so the cost is the extra Arrow hand-off to
        Python, which measured more than the shuffle it saves even when every ``(data,
        time)`` repeats 4x or 64x (``asv_benchmarks/bench_spark.py``). Worth it when the
        input already lives in Python workers' reach or the shuffle is the bottleneck
        (a network between executors).

    Returns
    -------
    pyspark.sql.DataFrame
        ``data..., time, diff`` (long time and diff), consolidated; no row order.

    Examples
    --------
    >>> import colmz.spark
    >>> df = spark.createDataFrame([("a", 1, 1), ("a", 1, -1), ("b", 2, 1)], "k string, time long, diff long")  # doctest: +SKIP
    >>> colmz.spark.consolidate(df).collect()  # doctest: +SKIP
    [Row(k='b', time=2, diff=1)]
    """
    data = check_update_columns(df.schema, data, time, diff)
    since = _check_bound(since, "since")
    upper = _check_bound(upper, "upper")
    if buckets is None:
        buckets = _shuffle_partitions(df)
    if not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"buckets must be a positive int, got {buckets!r}")
    src = _normalised(df, data, time, diff)
    schema = updates_schema(src.schema, data, time, diff)
    if partial:
        pre = _make_fn(data, time, diff, since, upper, "arrow", schema, partial=True)
        src = src.mapInArrow(pre.fn, pre.schema)
    # Equal data must meet in one partition: hash-partition by the (normalised) data columns.
    # With no data columns every update is the same row: one partition.
    shuffled = src.repartition(buckets, *bucket_columns(src, data)) if data else src.repartition(1)
    final = _make_fn(data, time, diff, since, upper, "arrow", schema, partial=False)
    return shuffled.mapInArrow(final.fn, final.schema)


def snapshot(
    df,
    as_of: int,
    data: Sequence[str] | None = None,
    time: str = "time",
    diff: str = "diff",
    *,
    buckets: int | None = None,
    partial: bool = False,
):
    """The collection a DataFrame of updates accumulates to at ``as_of``.

    The sum of all updates with ``time <= as_of``, as consolidated updates at time
    ``as_of``: ``data..., time (= as_of), diff (multiplicity, non-zero)``.

    Examples
    --------
    >>> import colmz.spark
    >>> df = spark.createDataFrame([("a", 1, 1), ("a", 5, -1), ("b", 2, 1)], "k string, time long, diff long")  # doctest: +SKIP
    >>> sorted(colmz.spark.snapshot(df, 3).collect())  # doctest: +SKIP
    [Row(k='a', time=3, diff=1), Row(k='b', time=3, diff=1)]
    """
    as_of = _check_bound(as_of, "as_of")
    if as_of is None:
        raise ValueError("as_of must be a time, got None")
    if as_of == SPARK_MAX_TIME:
        raise ValueError(f"as_of must be < 2**63-1 (as_of + 1 is the read upper), got {as_of}")
    return consolidate(df, data, time, diff, since=as_of, upper=as_of + 1, buckets=buckets, partial=partial)


def worker_pid_env() -> dict[str, str | int]:
    """What a Python worker sees (pid, interpreter, Numba cache): used by tests and benchmarks.

    >>> sorted(worker_pid_env())
    ['NUMBA_CACHE_DIR', 'NUMBA_NUM_THREADS', 'PYSPARK_PYTHON', 'pid', 'python']
    """
    import sys

    return {
        "pid": os.getpid(),
        "python": sys.executable,
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", ""),
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", ""),
        "NUMBA_NUM_THREADS": os.environ.get("NUMBA_NUM_THREADS", ""),
    }
