"""``TopK``: ``ORDER BY … LIMIT n OFFSET m`` per group, recomputed for the groups a delta
touches.

Design
------
Materialize's ``BasicTopK`` (``src/compute-types/src/plan/top_k.rs``) keeps hierarchical
buckets; this first plan keeps the input arranged by the group key
(:class:`~colmz.dataflow.KeyedArrangement`) and recomputes the window of each affected group
before and after the delta enters: output ``new − old``, consolidated. Work is the affected
groups' rows (a global top-k is one group: its rows all).

Order: the ``ORDER BY`` columns as PostgreSQL sorts them -- ``ASC`` with NULLs last, ``DESC``
with NULLs first unless said otherwise, floats with ``NaN`` above every number -- then, for
rows equal on those, colmz's total order on the whole row, so that the window is one
well-defined multiset (SQL leaves ties unspecified; a maintained view must not flicker). A row
of multiplicity ``c`` occupies ``c`` places. Text columns are refused in ``ORDER BY`` (the
collation's order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.regroup import affected_groups, check_orderable, fresh_name, group_rows
from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.ops import concat
from colmz.order import encode_columns
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["OrderBy", "TopK"]


class OrderBy:
    """One ``ORDER BY`` item: ``column [ASC|DESC] [NULLS FIRST|LAST]`` (PostgreSQL's defaults:
    NULLs last ascending, first descending)."""

    __slots__ = ("column", "descending", "nulls_first")

    def __init__(self, column: str, descending: bool = False, nulls_first: bool | None = None):
        if not isinstance(column, str):
            raise TypeError(f"column must be a column name (str), got {column!r}")
        if not isinstance(descending, bool):
            raise TypeError(f"descending must be a bool, got {descending!r}")
        if nulls_first is not None and not isinstance(nulls_first, bool):
            raise TypeError(f"nulls_first must be a bool or None, got {nulls_first!r}")
        self.column = column
        self.descending = descending
        self.nulls_first = descending if nulls_first is None else nulls_first

    def __repr__(self) -> str:
        return (f"OrderBy({self.column!r}{', DESC' if self.descending else ''}, "
                f"NULLS {'FIRST' if self.nulls_first else 'LAST'})")


class TopK:
    """Per group of ``group_by``: the rows ranked ``offset + 1 … offset + limit`` by ``order_by``.

    Parameters
    ----------
    schema : the input's columns
    group_by : sequence of column names (empty: one global top-k)
    order_by : sequence of column names (ascending) or :class:`OrderBy`
    limit : int or None (no limit)
    offset : int, default 0

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> t = TopK({"g": pa.int64(), "v": pa.int64()}, ["g"], [OrderBy("v", descending=True)], limit=1)
    >>> t.step(1, colmz.Updates({"g": [1, 1, 2], "v": [5, 9, 1]}, time=[1] * 3, diff=[1] * 3)).to_pylist()
    [(1, 9, 1, 1), (2, 1, 1, 1)]
    >>> t.step(2, colmz.Updates({"g": [1], "v": [9]}, time=[2], diff=[-1])).to_pylist()
    [(1, 5, 2, 1), (1, 9, 2, -1)]
    """

    ROLLBACK_FIELDS = ("_arranged", "_clock")

    def __init__(self, schema, group_by: Sequence[str], order_by: Sequence[str | OrderBy], *,
                 limit: int | None, offset: int = 0):
        self.schema = as_schema(schema, "schema")
        self.group_by = check_columns(group_by, self.schema, "group_by")
        if isinstance(order_by, str):
            raise TypeError(f"order_by must be a sequence of column names or OrderBy, got the string {order_by!r}")
        items = tuple(OrderBy(o) if isinstance(o, str) else o for o in order_by)
        types = {c.name: c.type for c in self.schema}
        for o in items:
            if not isinstance(o, OrderBy):
                raise TypeError(f"order_by holds {o!r}, neither a column name nor an OrderBy")
            if o.column not in types:
                raise ValueError(f"order_by names column {o.column!r}, which is not among the columns {list(types)}")
            check_orderable(types[o.column], o.column, "order_by")
        for name, v in (("limit", limit), ("offset", offset)):
            if v is None and name == "limit":
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be a non-negative int{' or None' if name == 'limit' else ''}, got {v!r}")
        self.order_by = items
        self.limit = limit
        self.offset = offset
        self._arranged = KeyedArrangement(self.schema, self.group_by)
        self._group_specs = tuple(c for g in self.group_by for c in self.schema if c.name == g)
        self._clock = Clock()

    @property
    def arrangement(self) -> KeyedArrangement:
        """The input arranged by the group key (for inspection and its work counters)."""
        return self._arranged

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta``."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.schema, time)
        if not len(delta):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        keys, layout = affected_groups(delta, self.group_by, False)
        with undone_on_error(self):
            old = self._window(keys, layout, time)
            self._arranged.insert_checked(time, delta)
            new = self._window(keys, layout, time)
            result = consolidated_at(concat([old.negated(), new]), time)
            self._clock.advance(time)
        return result

    def _window(self, keys, layout, time: int) -> Updates:
        names = [c.name for c in self.schema]
        rows = group_rows(self._arranged.lookup_words(keys, layout), names)
        n = len(rows)
        if not n:
            return Updates.empty(self.schema)
        q = rows.column(fresh_name(names)).to_numpy()
        sort_keys = []
        for o in reversed(self.order_by):
            col = rows.column(o.column)
            words, lay = encode_columns([col])
            values = words[:, :lay[0]]
            if o.descending:
                values = ~values
            sort_keys.extend(values[:, w] for w in range(values.shape[1] - 1, -1, -1))
            null = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else np.zeros(n, bool)
            sort_keys.append(~null if o.nulls_first else null)
        sort_keys.append(q)
        # Stable: rows equal on every key keep the consolidated order, colmz's row order.
        order = np.lexsort(sort_keys)
        q, diff = q[order], np.asarray(rows.diff, np.int64)[order]
        ends = np.cumsum(diff)
        group_start = np.r_[True, q[1:] != q[:-1]]
        base = np.maximum.accumulate(np.where(group_start, ends - diff, 0))
        start, end = ends - diff - base, ends - base
        lo = self.offset
        hi = np.iinfo(np.int64).max if self.limit is None else self.offset + self.limit
        inside = np.clip(end, lo, hi) - np.clip(start, lo, hi)
        keep = np.flatnonzero(inside > 0)
        picked = rows.take(order[keep])
        return Updates({c: picked.column(c) for c in names}, np.full(len(keep), time, np.uint64), inside[keep],
                       copy=False)

    def __repr__(self) -> str:
        return f"TopK(group_by={list(self.group_by)}, order_by={list(self.order_by)}, limit={self.limit}, offset={self.offset})"
