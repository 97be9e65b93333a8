"""DataFrame operations over updates: :func:`consolidate`, :func:`snapshot`, and the bucket
expressions that bring equal data together.

Design
------
They shuffle by a hash of the data columns (:func:`bucket_columns`: ``repartition``, so no
sort by group key is needed as ``groupBy().applyIn*`` would add) and consolidate each bucket
with ``mapInArrow``. Optionally (``partial=True``) each input partition is consolidated
*before* the shuffle too; it switches itself to a pass-through when a probe shows the
partition barely shrinks. It is off by default because the extra Arrow hand-off can cost
more than the shuffle it saves (see :func:`consolidate`).

Equality of data follows colmz (SQL ``GROUP BY``): NULL = NULL, NaN = NaN, -0.0 = 0.0. Spark's
hash distinguishes -0.0 from 0.0, so the bucket expressions map -0.0 to 0.0 first.
"""

from __future__ import annotations

from collections.abc import Sequence

from colmz.spark.grouped import make_fn
from colmz.spark.schemas import SPARK_MAX_TIME, check_bound, check_update_columns, updates_schema

__all__ = ["bucket_columns", "consolidate", "normalised", "shuffle_partitions", "snapshot"]


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


def shuffle_partitions(df) -> int:
    """``spark.sql.shuffle.partitions`` of ``df``'s session.

    >>> shuffle_partitions(df)  # doctest: +SKIP
    2
    """
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))


def normalised(df, data, time, diff):
    """``df`` reduced to ``data..., time, diff`` with long time and diff.

    >>> normalised(df, ["k"], "time", "diff").columns  # doctest: +SKIP
    ['k', 'time', 'diff']
    """
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
    since = check_bound(since, "since")
    upper = check_bound(upper, "upper")
    if buckets is None:
        buckets = shuffle_partitions(df)
    if not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"buckets must be a positive int, got {buckets!r}")
    src = normalised(df, data, time, diff)
    schema = updates_schema(src.schema, data, time, diff)
    if partial:
        pre = make_fn(data, time, diff, since, upper, "arrow", schema, partial=True)
        src = src.mapInArrow(pre.fn, pre.schema)
    # Equal data must meet in one partition: hash-partition by the (normalised) data columns.
    # With no data columns every update is the same row: one partition.
    shuffled = src.repartition(buckets, *bucket_columns(src, data)) if data else src.repartition(1)
    final = make_fn(data, time, diff, since, upper, "arrow", schema, partial=False)
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
    as_of = check_bound(as_of, "as_of")
    if as_of is None:
        raise ValueError("as_of must be a time, got None")
    if as_of == SPARK_MAX_TIME:
        raise ValueError(f"as_of must be < 2**63-1 (as_of + 1 is the read upper), got {as_of}")
    return consolidate(df, data, time, diff, since=as_of, upper=as_of + 1, buckets=buckets, partial=partial)
