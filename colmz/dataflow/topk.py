"""``TopK``: ``ORDER BY … LIMIT n OFFSET m`` per group, recomputed for the groups a delta
touches.

Design
------
Materialize's ``BasicTopK`` (``src/compute-types/src/plan/top_k.rs``) keeps hierarchical
buckets; this first plan keeps the input arranged by the group key
(:class:`~colmz.dataflow.KeyedArrangement`) and recomputes the window of each affected group
before and after the delta enters: output ``new − old``, consolidated. Work is the affected
groups' rows (a global top-k is one group: its rows all), read once per step (the rows after
the delta are those plus the delta's) and never decoded: each window is computed on the
arrangement's order-preserving words (``colmz.order``) -- one kernel sort and consolidation of
(group, each ``ORDER BY`` item's NULL flag and value words, inverted for ``DESC``, the row's
words) -- and only the rows of ``new − old`` are decoded.

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

from colmz.dataflow.gather import Found, gather_words
from colmz.dataflow.keyed import KeyedArrangement, consolidate_words
from colmz.dataflow.regroup import affected_groups, check_orderable
from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.order import decode_columns, encode_columns, pad_keys, search_rows, unify_layouts
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
        # the payload: the columns not in the group key, in schema order (the arrangement's)
        self._val_specs = tuple(c for c in self.schema if c.name not in self.group_by)
        self._val_index = {c.name: j for j, c in enumerate(self._val_specs)}
        self._empty_layout = (0,) * (len(self._val_specs) + 1)
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
            # The groups' rows are read once, before the delta enters; with the delta's rows
            # (their group's position among ``keys``) they are the groups' rows after it.
            found = gather_words(self._arranged, keys, layout, self._empty_layout)
            n = len(delta)
            kw, _ = encode_columns([delta.column(g) for g in self.group_by], n=n)
            dq = search_rows(keys, kw, "left")
            dv, dvl = encode_columns([delta.column(c.name) for c in self._val_specs], n=n)
            vl = unify_layouts(found.val_layout, dvl)
            after = Found(np.concatenate([found.query, dq]),
                          np.concatenate([pad_keys(found.vals, found.val_layout, vl), pad_keys(dv, dvl, vl)]),
                          vl, np.concatenate([found.diff, np.asarray(delta.diff, np.int64)]))
            old = self._window(found)
            new = self._window(after)
            self._arranged.insert_checked(time, delta)
            result = self._output(keys, layout, old, new, time)
            self._clock.advance(time)
        return result

    def _window(self, found: Found) -> tuple[np.ndarray, np.ndarray, tuple, np.ndarray]:
        """The window of each group of the rows ``found`` as words: ``(query position,
        payload words, payload layout, places in the window)`` per row in it."""
        vl, vals, n = found.val_layout, found.vals, len(found.diff)
        if not n:
            return found.query, vals, vl, found.diff
        # One matrix sorted and consolidated by one kernel call: the group, then each ORDER BY
        # item (NULLs first or last, then its value words, inverted for DESC), then the row's
        # payload words (colmz's total order on the row: its group columns are the group's).
        starts = np.cumsum((0, *vl[:-1]))
        null_word = vals[:, starts[-1]] if vl[-1] else None
        parts = [found.query.astype(np.uint64)[:, None]]
        for o in self.order_by:
            j = self._val_index.get(o.column)
            if j is None:  # a group column: one value per group
                continue
            if null_word is not None:
                null = (null_word >> np.uint64(j)) & np.uint64(1)
                parts.append((null ^ np.uint64(1) if o.nulls_first else null)[:, None])
            words = vals[:, starts[j]:starts[j] + vl[j]]
            parts.append(~words if o.descending else words)
        parts.append(vals)
        sort_width = sum(p.shape[1] for p in parts) - vals.shape[1]
        words, diff = consolidate_words(np.hstack(parts), found.diff)
        if len(diff) and diff.min() < 0:
            raise NegativeMultiplicity("the input of a top-k retracts rows it does not hold "
                                       f"(a multiplicity of {int(diff.min())})")
        q = words[:, 0].astype(np.int64)
        ends = np.cumsum(diff)
        group_start = np.r_[True, q[1:] != q[:-1]]
        base = np.maximum.accumulate(np.where(group_start, ends - diff, 0))
        start, end = ends - diff - base, ends - base
        lo = self.offset
        hi = np.iinfo(np.int64).max if self.limit is None else self.offset + self.limit
        inside = np.clip(end, lo, hi) - np.clip(start, lo, hi)
        keep = np.flatnonzero(inside > 0)
        return q[keep], np.ascontiguousarray(words[keep, sort_width:]), vl, inside[keep]

    def _output(self, keys: np.ndarray, layout, old, new, time: int) -> Updates:
        """``new − old`` of the windows, decoded (only the rows that change)."""
        vl = unify_layouts(old[2], new[2])
        q = np.concatenate([old[0], new[0]])
        vals = np.concatenate([pad_keys(old[1], old[2], vl), pad_keys(new[1], new[2], vl)])
        diff = np.concatenate([-old[3], new[3]])
        words, diff = consolidate_words(np.hstack([q.astype(np.uint64)[:, None], vals]), diff)
        if not len(diff):
            return Updates.empty(self.schema)
        key_cols = decode_columns(keys[words[:, 0].astype(np.int64)], layout, self._group_specs)
        val_cols = decode_columns(np.ascontiguousarray(words[:, 1:]), vl, self._val_specs)
        cols = dict(zip(self.group_by, key_cols)) | dict(zip((c.name for c in self._val_specs), val_cols))
        out = Updates({c.name: cols[c.name] for c in self.schema}, np.full(len(diff), time, np.uint64), diff,
                      copy=False)
        return consolidated_at(out, time)

    def __repr__(self) -> str:
        return f"TopK(group_by={list(self.group_by)}, order_by={list(self.order_by)}, limit={self.limit}, offset={self.offset})"
