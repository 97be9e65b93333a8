"""``TemporalFilter``: ``mz_now()`` compared with a column, as updates at the times the
predicate flips, held by the operator until those times come.

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

Held updates. The updates at times after the step's are *held* by the operator, as
Materialize's temporal bucketing holds a dataflow's future updates until the frontier
reaches them (its bucket chain, ``src/timely-util/src/temporal.rs``): a step at ``T``
emits the input's updates at ``T`` and every held update whose time has come -- those in
``(last step, T]``, each at its own time -- so the output of a step at ``T`` holds times
in ``(last step, T]`` only (a :class:`~colmz.dataflow.ViewSink` writes each at its time).
A view with one must be stepped (with an empty change when nothing else happened) for its
flips to come out; :meth:`TemporalFilter.next_time` says when the next one is due.

The held updates are a :class:`~colmz.dataflow.keyed.KeyedArrangement` keyed by their time
(the column ``mz_timestamp`` first, then the output's columns renamed ``c0, c1, ...``
by position, so no output name can clash with it): a step inserts the new future updates and the negation of those
it emitted, so the arrangement's contents are exactly the updates still to come -- the
state ``colmz.dataflow.state`` exports, a durable catalog keeps beside the view and a
reopen restores. Finding what is due reads, in each run, the keys in ``(last step, T]`` by
binary search: the updates at or before the last step sum to zero (each was emitted and
negated once), so they are never read again, however long their negations wait for a merge
to cancel them. A retraction of a row before its lower bound holds the negation of both of
its future updates, which cancel in the arrangement.

Invariant: after a step at ``T`` the arrangement's contents, consolidated, are the input's
integral mapped to its flips at times ``> T``; the operator's output summed over its steps
is the input's integral mapped to all its flips at times ``<= T``.

Bounds read an integer column plus a constant offset (``mz_now() <= t + 60``); the
comparison is exact (Python integers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.step import Clock, as_schema, check_delta
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec, decode_columns, encode_columns, narrow_rows, search_rows
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["Bound", "TemporalFilter"]

_OPS = ("=", "<", "<=", ">", ">=")
_MAX_TIME = 2**64 - 1
_TIME = ColumnSpec("mz_timestamp", pa.uint64())


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
    """Rows visible while every bound holds, as updates at the times they flip (the future
    ones held until their time comes).

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
    [(1, 5, 1), (2, 5, 1)]
    >>> f.next_time(), len(f.held)
    (11, 2)
    >>> f.step(12, colmz.Updates.empty(f.input_schema)).to_pylist()  # each flip at its own time
    [(1, 11, -1)]
    >>> f.next_time()
    14
    """

    ROLLBACK_FIELDS = ("_clock", "_held")

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
        # The held updates by time: "mz_timestamp" then the output's columns renamed by
        # position (an output column may be called "mz_timestamp" too).
        self._names = (_TIME.name, *(f"c{i}" for i in range(len(self.schema))))
        self._held = KeyedArrangement((_TIME, *(ColumnSpec(n, c.type) for n, c in zip(self._names[1:], self.schema))),
                                      [_TIME.name])
        self.rows_seen = 0
        #: held updates read back by steps (a work counter: the due ones, never those emitted before)
        self.rows_released = 0

    @property
    def held(self) -> KeyedArrangement:
        """The updates still to come, keyed by their time (column ``mz_timestamp``, then the
        output's columns by position, ``c0, c1, ...``): the operator's state."""
        return self._held

    def next_time(self) -> int | None:
        """The earliest time after the last step at which a held update may come due (its
        updates may yet cancel), or ``None`` when none is held: a step before it emits
        only the input's own change."""
        lo = 0 if self._clock.last is None else self._clock.last + 1
        if lo > _MAX_TIME:
            return None
        best = None
        for run in self._held.state_runs():
            i = _search(run, lo)
            if i < len(run.diff):
                t = int(decode_columns(run.keys[i:i + 1], run.key_layout, [_TIME])[0][0].as_py())
                best = t if best is None else min(best, t)
        return best

    def step(self, time, delta: Updates) -> Updates:
        """The output's change for the input's change ``delta`` at ``time``: the updates at
        ``time`` and the held ones that came due since the last step, each at its own time
        (consolidated); the updates at later times are held."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, time)
        last = self._clock.last
        n = len(delta)
        self.rows_seen += n
        due = self._due(0 if last is None else last + 1, time)
        if not n and not len(due):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        now, later = self._flips(time, delta)
        with undone_on_error(self):
            if len(due) or len(later):
                held = [later] if len(later) else []
                if len(due):
                    held.append(self._as_held(due.negated()))
                self._held.insert_checked(time, concat(held) if len(held) > 1 else held[0])
            self._clock.advance(time)
        if not len(due):
            return now
        return consolidate(concat([now, due]) if len(now) else due)

    def _flips(self, time: int, delta: Updates) -> tuple[Updates, Updates]:
        """The updates ``delta`` maps to: those at ``time`` (the output's columns,
        consolidated) and those after it (as held: ``mz_timestamp`` then ``c0, c1, ...``)."""
        n = len(delta)
        if not n:
            return Updates.empty(self.schema), Updates.empty(self._held.schema)
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
        times_ = np.asarray(times, np.uint64)
        diffs_ = np.asarray(diffs, np.int64)
        cols = [rows.column(src) for src, _ in self.select]
        at = times_ == np.uint64(time)
        now = Updates({c.name: col.filter(pa.array(at)) for c, col in zip(self.schema, cols)},
                      times_[at], diffs_[at], copy=False)
        fut = ~at
        later = Updates({_TIME.name: pa.array(times_[fut], pa.uint64()),
                         **{n: col.filter(pa.array(fut)) for n, col in zip(self._names[1:], cols)}},
                        np.full(int(fut.sum()), time, np.uint64), diffs_[fut], copy=False)
        return consolidate(now), later

    def _as_held(self, u: Updates) -> Updates:
        """Output updates as rows of the held arrangement (their times as the ``mz_timestamp`` column)."""
        return Updates({_TIME.name: pa.array(np.asarray(u.time, np.uint64), pa.uint64()),
                        **{n: u.column(c.name) for n, c in zip(self._names[1:], self.schema)}},
                       np.asarray(u.time, np.uint64), u.diff, copy=False)

    def _due(self, lo: int, hi: int) -> Updates:
        """The held updates at times ``lo <= t <= hi``, each at its time, consolidated."""
        if lo > hi:
            return Updates.empty(self.schema)
        parts = []
        for run in self._held.state_runs():
            a = _search(run, lo)
            b = len(run.diff) if hi >= _MAX_TIME else _search(run, hi + 1)
            if b <= a:
                continue
            [t] = decode_columns(np.ascontiguousarray(run.keys[a:b]), run.key_layout, [_TIME])
            vals = decode_columns(np.ascontiguousarray(run.vals[a:b]), run.val_layout, self.schema)
            parts.append(Updates({c.name: v for c, v in zip(self.schema, vals)},
                                 t.to_numpy(zero_copy_only=False).astype(np.uint64), run.diff[a:b], copy=False))
        if not parts:
            return Updates.empty(self.schema)
        self.rows_released += sum(len(p) for p in parts)
        return consolidate(concat(parts) if len(parts) > 1 else parts[0])

    def __repr__(self) -> str:
        return f"TemporalFilter({list(self.bounds)})"


def _search(run, t: int) -> int:
    """The first row of ``run`` (a held arrangement's run, sorted by time first) at a time
    ``>= t``."""
    q, layout = encode_columns([pa.array([t], pa.uint64())])
    mine, present = narrow_rows(q, layout, run.key_layout)
    return int(search_rows(run.keys, mine, "left")[0]) if present[0] else len(run.diff)
