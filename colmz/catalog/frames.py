"""What ``Catalog.append`` commits: a table's input -- ``colmz.Updates``, a pandas
DataFrame or an Arrow table -- checked once and made a batch of updates at one time.

A frame of exactly the table's columns (in any order) is rows, each inserted once (diff
+1); one with ``time`` and ``diff`` besides is a batch of updates. The commit time is
``time`` when given, else the batch's single time, else (rows without times) ``now + 1``;
it is never below ``now`` (earlier times are sealed). Columns convert to the table's types
as ``colmz.rows.conform`` converts them. An interval holds whole microseconds (PostgreSQL's
resolution, and DuckDB's: a finer one would read back as another value than the one stored,
so a retraction computed by SQL would miss it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.frontier import MAX_TIME, check_time
from colmz.order import ColumnSpec
from colmz.rows import conform
from colmz.updates import SchemaError, Updates

__all__ = ["table_batch"]


def table_batch(name: str, schema: Sequence[ColumnSpec], updates, time: int | None,
                now: int) -> tuple[Updates, int]:
    """The batch ``updates`` (module docstring) commits to table ``name`` of columns
    ``schema`` in a catalog at ``now``, and its time; ``ValueError``/``SchemaError``/
    ``OverflowError`` naming what is wrong, before anything changes.

    >>> import pandas as pd
    >>> b, t = table_batch("t", (ColumnSpec("k", pa.int64()),), pd.DataFrame({"k": [7]}), None, 4)
    >>> b.to_pylist(), t
    ([(7, 5, 1)], 5)
    """
    columns = [c.name for c in schema]
    if not isinstance(updates, Updates):
        updates, time = _frame_updates(updates, columns, name, time, now)
    at_own_time = time is None  # the batch's times are the commit's (checked below)
    if time is None:
        if len(updates) == 0:
            raise ValueError("updates is empty and no time= is given: nothing says when to commit")
        lo, hi = int(updates.time.min()), int(updates.time.max())
        if lo != hi:
            raise ValueError(f"updates span times {lo}..{hi}; append commits at one time (pass time=)")
        time = lo
    time = check_time(time, "time")
    if time < now:
        raise ValueError(f"time={time} is before cat.now={now}: times before now are sealed")
    if time > MAX_TIME - 1:
        raise OverflowError(f"a commit at time {time} needs an upper past 2**64-1")
    if [c.name for c in updates.schema] != columns:
        raise SchemaError(f"updates have columns {updates.column_names}, table {name!r} has {columns}")
    data = {c.name: _cast_column(updates.column(c.name), c, name) for c in schema}
    if at_own_time and all(data[c.name] is updates.column(c.name) for c in schema):
        return updates, time  # at one time, of the table's types already: the batch as it is
    return Updates(data, np.full(len(updates), time, np.uint64), updates.diff, copy=False), time


def _cast_column(col: pa.Array, spec: ColumnSpec, table: str) -> pa.Array:
    if col.type != spec.type:
        col = conform(pa.table({spec.name: col}), (spec,), f"append to {table}").column(0)
    if col.type == pa.month_day_nano_interval() and len(col):
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        ns = np.frombuffer(arr.buffers()[1], np.int64, count=2 * len(arr), offset=arr.offset * 16)[1::2]
        valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), bool)
        bad = np.flatnonzero(valid & (ns % 1000 != 0))
        if len(bad):
            raise ValueError(f"append to {table}: column {spec.name!r} holds an interval of "
                             f"{int(ns[bad[0]])} nanoseconds; intervals hold whole microseconds")
    return col


def _frame_updates(frame, columns: list[str], name: str, time: int | None, now: int):
    """A DataFrame / Arrow input as updates and the time to commit at (module docstring)."""
    import pandas as pd

    if isinstance(frame, pd.DataFrame):
        table = pa.Table.from_pandas(frame, preserve_index=False)
    elif isinstance(frame, pa.RecordBatch):
        table = pa.Table.from_batches([frame])
    elif isinstance(frame, pa.Table):
        table = frame
    else:
        raise TypeError("updates must be colmz.Updates, a pandas DataFrame or an Arrow table, "
                        f"got {type(frame).__name__}")
    have = list(table.column_names)
    if len(set(have)) != len(have):
        raise SchemaError(f"updates for table {name!r} name a column twice: {have}")
    if sorted(have) == sorted(columns):
        time = now + 1 if time is None else check_time(time, "time")
        n = table.num_rows
        data = {c: table.column(c) for c in columns}
        return Updates(data, np.full(n, min(time, MAX_TIME), np.uint64), np.ones(n, np.int64)), time
    if sorted(have) == sorted([*columns, "time", "diff"]):
        return Updates.from_arrow(table.select([*columns, "time", "diff"]), time="time", diff="diff"), time
    raise SchemaError(f"updates for table {name!r} have columns {have}: give the table's columns "
                      f"{columns} (rows, each inserted once) or those with 'time' and 'diff'")
