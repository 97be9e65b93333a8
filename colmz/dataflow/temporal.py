"""``TemporalFilter``: ``mz_now()`` compared with a column, as updates at the times the
predicate flips.

Design
------
Materialize's ``MfpPlan`` (``src/compute-types/src/plan/``, rendered in
``src/compute/src/render/``) pulls temporal predicates out of a map-filter-project: each
``mz_now() op expr`` conjunct bounds the times a row is visible -- ``mz_now() >= x`` a
lower bound ``x``, ``mz_now() < x`` an upper bound ``x`` (exclusive), ``<=``/``>`` the
same shifted by one, ``=`` both. A row's bounds are the greatest lower and least upper;
an input update ``(row, t, d)`` becomes ``(row, max(t, lower), d)`` and, when the upper is
finite, ``(row, upper, −d)`` -- nothing when ``upper <= max(t, lower)``. A NULL bound makes
the comparison NULL: the row is never visible. Times are ``mz_timestamp`` s (``uint64``):
a lower bound below 0 is 0, an upper bound past ``2**64 - 1`` is no bound.

The operator is stateless and linear. Its output holds updates at *future* times: only a
sink's :class:`~colmz.Correction` (``ViewSink``) may take them, holding each until the
view's upper passes its time -- so a temporal filter is the last operator before the sink
(the plan puts it there). A retraction of a row before its lower bound emits the negation
of both of its future updates, which cancel in the correction.

Bounds read an integer column plus a constant offset (``mz_now() <= t + 60``); the
comparison is exact (Python integers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.step import Clock, as_schema, check_delta
from colmz.ops import consolidate
from colmz.order import ColumnSpec
from colmz.updates import Updates

__all__ = ["Bound", "TemporalFilter"]

_OPS = ("=", "<", "<=", ">", ">=")
_MAX_TIME = 2**64 - 1


class Bound:
    """``mz_now() op column + offset`` (``op`` one of ``=``, ``<``, ``<=``, ``>``, ``>=``)."""

    __slots__ = ("column", "offset", "op")

    def __init__(self, column: str, op: str, offset: int = 0):
        if not isinstance(column, str):
            raise TypeError(f"column must be a column name (str), got {column!r}")
        if op not in _OPS:
            raise ValueError(f"op must be one of {_OPS}, got {op!r}")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise TypeError(f"offset must be an int, got {offset!r}")
        self.column, self.op, self.offset = column, op, offset

    def limits(self, value: int) -> tuple[int | None, int | None]:
        """``(lower, upper)`` of the times ``mz_now() op value`` holds (``None``: none)."""
        return {"=": (value, value + 1), "<": (None, value), "<=": (None, value + 1),
                ">": (value + 1, None), ">=": (value, None)}[self.op]

    def __repr__(self) -> str:
        off = f" + {self.offset}" if self.offset > 0 else f" - {-self.offset}" if self.offset < 0 else ""
        return f"Bound(mz_now() {self.op} {self.column}{off})"


class TemporalFilter:
    """Rows visible while every bound holds, as updates at the times they flip.

    Parameters
    ----------
    schema : the input's columns
    bounds : sequence of :class:`Bound` (each reads an integer column)
    select : optional sequence of column names or ``(source, name)`` pairs (the output's
        projection; default every column)

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> f = TemporalFilter({"k": pa.int64(), "t": pa.int64()}, [Bound("t", "<=", 10)], select=["k"])
    >>> f.step(5, colmz.Updates({"k": [1, 2], "t": [0, 3]}, time=[5, 5], diff=[1, 1])).to_pylist()
    [(1, 5, 1), (2, 5, 1), (1, 11, -1), (2, 14, -1)]
    """

    ROLLBACK_FIELDS = ("_clock",)

    def __init__(self, schema, bounds: Sequence[Bound], select=None):
        self.input_schema = as_schema(schema, "schema")
        types = {c.name: c.type for c in self.input_schema}
        bounds = tuple(bounds)
        if not bounds:
            raise ValueError("bounds must hold at least one Bound (else the filter is not temporal)")
        for b in bounds:
            if not isinstance(b, Bound):
                raise TypeError(f"bounds holds {b!r}, not a Bound")
            if b.column not in types:
                raise ValueError(f"bounds names column {b.column!r}, which is not among the columns {list(types)}")
            if not pa.types.is_integer(types[b.column]):
                raise TypeError(f"bounds compare mz_now() with column {b.column!r} of type {types[b.column]}: "
                                "integer columns only")
        self.bounds = bounds
        pairs = []
        for s in (list(types) if select is None else select):
            src, name = (s, s) if isinstance(s, str) else tuple(s)
            if src not in types:
                raise ValueError(f"select names column {src!r}, which is not among the columns {list(types)}")
            pairs.append((src, name))
        if len({n for _, n in pairs}) != len(pairs):
            raise ValueError(f"select names an output column twice: {[n for _, n in pairs]}")
        self.select = tuple(pairs)
        self.schema = tuple(ColumnSpec(n, types[src]) for src, n in pairs)
        self._clock = Clock()
        self.rows_seen = 0

    def step(self, time, delta: Updates) -> Updates:
        """The output's change for the input's change ``delta`` at ``time``: updates at
        ``time`` and at the later times the rows' bounds flip (consolidated)."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, time)
        self._clock.advance(time)
        n = len(delta)
        self.rows_seen += n
        if not n:
            return Updates.empty(self.schema)
        lower = [time] * n
        upper: list[int | None] = [None] * n
        for b in self.bounds:
            for i, v in enumerate(delta.column(b.column).to_pylist()):
                if v is None:
                    lower[i], upper[i] = time, time  # NULL: never visible
                    continue
                lo, hi = b.limits(v + b.offset)
                if lo is not None:
                    lower[i] = max(lower[i], lo)
                if hi is not None:
                    upper[i] = hi if upper[i] is None else min(upper[i], hi)
        diff = np.asarray(delta.diff, np.int64)
        keep, times, diffs = [], [], []
        for i in range(n):
            lo, hi = lower[i], upper[i]
            if hi is not None and hi <= lo:
                continue
            if lo > _MAX_TIME:
                continue
            keep.append(i)
            times.append(lo)
            diffs.append(int(diff[i]))
            if hi is not None and hi <= _MAX_TIME:
                keep.append(i)
                times.append(hi)
                diffs.append(-int(diff[i]))
        rows = delta.take(np.asarray(keep, np.int64))
        return consolidate(Updates({n: rows.column(src) for src, n in self.select},
                                   np.asarray(times, np.uint64), np.asarray(diffs, np.int64), copy=False))

    def __repr__(self) -> str:
        return f"TemporalFilter({list(self.bounds)})"

