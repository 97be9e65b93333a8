"""Grouped functions: colmz consolidation as a function plus its output schema, for users'
own ``groupBy().applyInArrow`` / ``applyInPandas`` / ``mapInArrow`` pipelines.

Design
------
Each function streams (iterator in, iterator out) through
:func:`colmz.spark.batches.stream_consolidate`, so a large group is consolidated in bounded
memory. The schema and bounds are checked on the driver when the function is built.
"""

# No ``from __future__ import annotations``: pyspark picks the iterator forms of
# applyInPandas/applyInArrow from the functions' evaluated type hints.
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import pandas as pd
import pyarrow as pa

from colmz.spark.batches import stream_consolidate
from colmz.spark.schemas import SPARK_MAX_TIME, check_bound, check_update_columns, updates_schema

__all__ = ["GroupedFunction", "consolidate_fn", "make_fn", "snapshot_fn"]


class GroupedFunction(NamedTuple):
    """A function over a stream of batches and the Spark schema of what it yields.

    Unpacks into the two arguments of ``applyInArrow``/``applyInPandas``/``mapInArrow``.
    """

    fn: Callable
    schema: object  # pyspark.sql.types.StructType


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
    >>> from colmz.spark import bucket_columns, consolidate_fn
    >>> gf = consolidate_fn(df.schema, ["k"])  # doctest: +SKIP
    >>> df.groupBy(bucket_columns(df, ["k"], 16)).applyInArrow(*gf)  # doctest: +SKIP
    >>> df.groupBy("k").applyInPandas(*consolidate_fn(df.schema, ["k"], form="pandas"))  # doctest: +SKIP
    """
    data = check_update_columns(schema, data, time, diff)
    since = check_bound(since, "since")
    upper = check_bound(upper, "upper")
    out_schema = updates_schema(schema, data, time, diff)
    return make_fn(data, time, diff, since, upper, form, out_schema, partial=False)


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
    >>> from colmz.spark.grouped import snapshot_fn
    >>> df.groupBy("k").applyInArrow(*snapshot_fn(df.schema, 10, ["k"]))  # doctest: +SKIP
    """
    as_of = check_bound(as_of, "as_of")
    if as_of is None:
        raise ValueError("as_of must be a time, got None")
    if as_of == SPARK_MAX_TIME:
        raise ValueError(f"as_of must be < 2**63-1 (as_of + 1 is the read upper), got {as_of}")
    return consolidate_fn(schema, data, time, diff, since=as_of, upper=as_of + 1, form=form)


def make_fn(data, time, diff, since, upper, form, out_schema, partial) -> GroupedFunction:
    """The consolidating function over checked arguments (``form`` is ``"arrow"`` or ``"pandas"``).

    >>> make_fn(["k"], "time", "diff", None, None, "arrow", None, False).fn.__name__
    'colmz_consolidate_arrow'
    """
    data = list(data)
    if form == "arrow":

        def colmz_consolidate_arrow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield from stream_consolidate(batches, data, time, diff, since, upper, partial)

        return GroupedFunction(colmz_consolidate_arrow, out_schema)
    if form == "pandas":

        def colmz_consolidate_pandas(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            batches = (
                pa.RecordBatch.from_pandas(f[[*data, time, diff]], preserve_index=False) for f in frames
            )
            for b in stream_consolidate(batches, data, time, diff, since, upper, partial):
                yield b.to_pandas()

        return GroupedFunction(colmz_consolidate_pandas, out_schema)
    raise ValueError(f"form must be 'arrow' or 'pandas', got {form!r}")
