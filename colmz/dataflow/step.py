"""What every operator checks at its entry, once: schemas, the step's time, the delta.

Design
------
An operator of ``colmz.dataflow`` is a type with the state it owns and a method
``step(time, delta) -> Updates``. One step is one time: every update of ``delta`` is at
``time`` (the catalog's commit time), and the output is consolidated with every update at
``time``. Steps come in non-decreasing time order; state is the operator's input integrated
up to the last step (times folded, ``since = now``), which is all a step at a later time reads.

These helpers validate the arguments in one place so that each operator's ``step`` can
call its delta rule on checked values; a call that raises in them changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.frontier import check_time
from colmz.ops import consolidate
from colmz.order import ColumnSpec
from colmz.rows import at_time, cast_to, schema_of
from colmz.updates import SchemaError, Updates

__all__ = ["Clock", "as_schema", "check_columns", "check_delta", "column_validity", "column_values",
           "consolidated_at", "multiply_diffs"]

Schema = tuple[ColumnSpec, ...]


def as_schema(schema, what: str) -> Schema:
    """``schema`` (a mapping of name to Arrow type or SQL type name, or ``ColumnSpec`` s) as a
    tuple of ``ColumnSpec``; errors name ``what``.

    >>> import pyarrow as pa
    >>> as_schema({"k": pa.int64()}, "input")
    (ColumnSpec(name='k', type=DataType(int64)),)
    """
    try:
        return schema_of(schema)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{what}: {e}") from None


def check_columns(names: Sequence[str], schema: Schema, what: str) -> tuple[str, ...]:
    """``names`` as a tuple of distinct column names of ``schema``, or an error naming ``what``."""
    if isinstance(names, str):
        raise TypeError(f"{what} must be a sequence of column names, got the string {names!r}")
    names = tuple(names)
    have = [c.name for c in schema]
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{what} must name columns by str, got {n!r}")
        if n not in have:
            raise ValueError(f"{what} names column {n!r}, which is not among the columns {have}")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} names a column twice: {list(names)}")
    return names


class Clock:
    """The time of an operator's last step: steps must not go back in time.

    >>> c = Clock(); c.advance(c.check(3)); c.last
    3
    """

    __slots__ = ("last",)
    #: Saved and rolled back in place with the operator that owns it (``colmz.rollback``).
    ROLLBACK_FIELDS = ("last",)

    def __init__(self) -> None:
        self.last: int | None = None

    def check(self, time) -> int:
        t = check_time(time, "time")
        if self.last is not None and t < self.last:
            raise ValueError(f"time {t} is before the last step's time {self.last}: steps go forward")
        return t

    def advance(self, time: int) -> None:
        self.last = time


def check_delta(delta, schema: Schema, time: int, what: str = "delta") -> Updates:
    """``delta`` checked to be ``Updates`` of ``schema``'s columns (types cast within a
    family) with every update at ``time``.
    """
    if not isinstance(delta, Updates):
        raise TypeError(f"{what} must be colmz.Updates, got {type(delta).__name__}")
    names = [c.name for c in schema]
    if len(delta) == 0 and not delta.schema:
        return Updates.empty(schema)
    if delta.column_names != names:
        raise SchemaError(f"{what} has columns {delta.column_names}, the operator's input {names}")
    delta = cast_to(delta, schema)
    if len(delta):
        t = delta.time
        # a few updates (a one-row commit's) as Python ints: two reductions cost more
        lo, hi = (min(ts := t.tolist()), max(ts)) if len(t) <= 16 else (int(t.min()), int(t.max()))
        if lo != time or hi != time:
            bad = lo if lo != time else hi
            raise ValueError(f"{what} has an update at time {bad}; a step at time {time} takes updates at {time} only")
    return delta


def consolidated_at(updates: Updates, time: int) -> Updates:
    """``updates`` moved to ``time`` and consolidated (what every ``step`` returns)."""
    return consolidate(at_time(updates, time))


_SAFE = 2.0**62


def multiply_diffs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b`` for ``int64`` diffs, or ``OverflowError`` when a product leaves ``int64``.

    >>> multiply_diffs(np.array([2, -3]), np.array([5, 7])).tolist()
    [10, -21]
    >>> multiply_diffs(np.array([2**40]), np.array([2**40]))
    Traceback (most recent call last):
    ...
    OverflowError: diff overflow: a product of multiplicities 1099511627776 * 1099511627776 leaves int64
    """
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    big = np.abs(a.astype(np.float64)) * np.abs(b.astype(np.float64)) >= _SAFE
    if big.any():
        for x, y in zip(a[big].tolist(), b[big].tolist()):
            if not -(2**63) <= x * y < 2**63:
                raise OverflowError(f"diff overflow: a product of multiplicities {x} * {y} leaves int64")
    return a * b


def column_validity(col: pa.Array) -> np.ndarray:
    """Which values of a column (any type) are not NULL, from its validity bitmap.

    >>> column_validity(pa.array(["a", None])).tolist()
    [True, False]
    """
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if not col.null_count:
        return np.ones(n, bool)
    if pa.types.is_null(col.type):
        return np.zeros(n, bool)
    bits = np.frombuffer(col.buffers()[0], np.uint8)
    return np.unpackbits(bits, bitorder="little")[col.offset:col.offset + n].astype(bool)


def column_values(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A numeric or boolean column as ``(values, valid)`` numpy arrays, NULLs as 0 / False.

    Read from the Arrow buffers (no compute kernel: a one-row delta pays microseconds).

    >>> v, ok = column_values(pa.array([3, None, -1]))
    >>> v.tolist(), ok.tolist()
    ([3, 0, -1], [True, False, True])
    """
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    t = col.type
    bufs = col.buffers()
    valid = column_validity(col)
    if pa.types.is_boolean(t):
        values = np.unpackbits(np.frombuffer(bufs[1], np.uint8), bitorder="little")[col.offset:col.offset + n].astype(bool)
    else:
        dtype = np.dtype(t.to_pandas_dtype())
        values = np.frombuffer(bufs[1], dtype, count=n, offset=col.offset * dtype.itemsize) if n else np.zeros(0, dtype)
    if col.null_count:
        values = np.where(valid, values, values.dtype.type(0))
    return values, valid
