"""``TopK``: ``ORDER BY … LIMIT n OFFSET m`` per group, recomputed for the groups a delta
touches.

Design
------
Materialize's ``BasicTopK`` (``src/compute-types/src/plan/top_k.rs``) keeps hierarchical
buckets, its ``MonotonicTopK`` only each group's first rows. This plan keeps two
arrangements by the group key (:class:`~colmz.dataflow.KeyedArrangement`): the input, and --
with a limit -- each group's *kept places* (:attr:`TopK.top`): the rows holding its first
``P = offset + limit`` places, each row's diff the number of places it holds (a row of
multiplicity 3 at the boundary may hold 1). A step:

* a group the delta only inserts into (no negative diff among its delta rows): its new
  places are the first ``P`` of (its kept places + the inserted rows) -- exact, since the
  ``P`` first of a multiset ``M + I`` are among the ``P`` first of ``M`` and ``I`` -- so the
  input arrangement is not read for it (a bulk insert costs its rows plus ``P`` per group);
* a group the delta retracts from (a delete of the k-th row, of a tie, to zero): its new
  places are ranked from all its rows (read from the input arrangement) and the delta's;
  a row left with a negative multiplicity raises ``NegativeMultiplicity``;
* the kept places take ``new − old`` (their runs' words as the ranking consolidated them,
  sorted: no second sort); the output is the window ``offset … P`` of ``new`` minus that of
  ``old`` -- with no offset the window is the kept places and the two changes are one.

Without a limit every place is in the window: nothing is kept beside the input, and each
affected group is ranked from all its rows before and after the delta. Ranking is on the
arrangements' order-preserving words (``colmz.order``) -- one kernel sort and consolidation
of (group, each ``ORDER BY`` item's NULL flag and value words, inverted for ``DESC``, the
row's words) -- and only the rows of the output's change are decoded.

Invariants: after every step, for each group, :attr:`TopK.top` holds exactly its first ``P``
places (the Hypothesis test in ``tests/colmz/dataflow/test_topk.py`` checks it against a
model); a step that raises leaves both arrangements unchanged (``colmz.rollback``). Work
counters: ``rows_ranked`` (rows given to the ranking sorts), ``groups_reread`` (groups read
whole from the input arrangement) and the arrangements' own.

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

from colmz.dataflow.gather import Found, concat_found, difference, gather_words, subset
from colmz.dataflow.keyed import KeyedArrangement, consolidate_words
from colmz.dataflow.regroup import affected_groups, check_orderable
from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.order import decode_columns, encode_columns, search_rows
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

    ROLLBACK_FIELDS = ("_arranged", "_top", "_clock")

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
        # the places kept per group (``offset + limit``) and, with a limit, the rows holding
        # them: the module docstring's prefix arrangement
        self._places = None if limit is None else offset + limit
        self._top = None if limit is None else KeyedArrangement(self.schema, self.group_by)
        self._group_specs = tuple(c for g in self.group_by for c in self.schema if c.name == g)
        # the payload: the columns not in the group key, in schema order (the arrangement's)
        self._val_specs = tuple(c for c in self.schema if c.name not in self.group_by)
        self._val_index = {c.name: j for j, c in enumerate(self._val_specs)}
        self._empty_layout = (0,) * (len(self._val_specs) + 1)
        self._clock = Clock()
        self.rows_ranked = 0
        self.groups_reread = 0

    @property
    def arrangement(self) -> KeyedArrangement:
        """The input arranged by the group key (for inspection and its work counters)."""
        return self._arranged

    @property
    def top(self) -> KeyedArrangement | None:
        """Each group's rows holding its first ``offset + limit`` places (a row's diff: the
        places it holds), arranged by the group key; ``None`` without a limit."""
        return self._top

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta``."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.schema, time)
        if not len(delta):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        keys, layout = affected_groups(delta, self.group_by, False)
        with undone_on_error(self):
            n = len(delta)
            kw, _ = encode_columns([delta.column(g) for g in self.group_by], n=n)
            dv, dvl = encode_columns([delta.column(c.name) for c in self._val_specs], n=n)
            # the delta's rows, each at its group's position among ``keys``
            added = Found(search_rows(keys, kw, "left"), dv, dvl, np.asarray(delta.diff, np.int64))
            if self._top is None:
                change = self._by_input(keys, layout, added)
            else:
                change = self._by_top(keys, layout, added, time)
            self._arranged.insert_checked(time, delta)
            result = self._output(keys, layout, change, time)
            self._clock.advance(time)
        return result

    def _by_input(self, keys: np.ndarray, layout, added: Found) -> Found:
        """Without a limit: each affected group's window from all its rows, before and after
        the delta (read once; the rows after are those and the delta's)."""
        found = gather_words(self._arranged, keys, layout, self._empty_layout)
        self.groups_reread += len(keys)
        old = self._window(found, self.offset, None)
        new = self._window(concat_found([found, added]), self.offset, None)
        return difference(old, new)

    def _by_top(self, keys: np.ndarray, layout, added: Found, time: int) -> Found:
        """With a limit: the new places of a group the delta only inserts into from its kept
        places and the inserted rows; of a group it retracts from, from all its rows. The
        kept places take their change; the window's change is returned."""
        old_top = gather_words(self._top, keys, layout, self._empty_layout)
        retracting = np.zeros(len(keys), bool)
        retracting[added.query[added.diff < 0]] = True
        parts = [subset(old_top, ~retracting[old_top.query])]
        slow = np.flatnonzero(retracting)
        if len(slow):
            found = gather_words(self._arranged, np.ascontiguousarray(keys[slow]), layout, self._empty_layout)
            parts.append(Found(slow[found.query], found.vals, found.val_layout, found.diff))
            self.groups_reread += len(slow)
        parts.append(added)
        new_top = self._window(concat_found(parts), 0, self._places)
        top_change = difference(old_top, new_top)
        # consolidated words of (group position, payload): sorted as the arrangement's runs are
        self._top.insert_words(time, np.ascontiguousarray(keys[top_change.query]), layout,
                               top_change.vals, top_change.val_layout, top_change.diff, consolidated=True)
        if not self.offset:
            return top_change  # the window is the kept places
        return difference(self._window(old_top, self.offset, self._places),
                          self._window(new_top, self.offset, self._places))

    def _window(self, found: Found, lo: int, hi: int | None) -> Found:
        """The places ``lo … hi`` (``None``: on to the end) of each group of the rows
        ``found``, as words: ``(query position, payload words, payload layout, places held)``
        per row holding any; ``NegativeMultiplicity`` for a row of negative multiplicity."""
        vl, vals, n = found.val_layout, found.vals, len(found.diff)
        if not n:
            return found
        self.rows_ranked += n
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
        hi = np.iinfo(np.int64).max if hi is None else hi
        inside = np.clip(end, lo, hi) - np.clip(start, lo, hi)
        keep = np.flatnonzero(inside > 0)
        return Found(q[keep], np.ascontiguousarray(words[keep, sort_width:]), vl, inside[keep])

    def _output(self, keys: np.ndarray, layout, change: Found, time: int) -> Updates:
        """The window's change (consolidated words), decoded."""
        if not len(change.diff):
            return Updates.empty(self.schema)
        key_cols = decode_columns(np.ascontiguousarray(keys[change.query]), layout, self._group_specs)
        val_cols = decode_columns(change.vals, change.val_layout, self._val_specs)
        cols = dict(zip(self.group_by, key_cols)) | dict(zip((c.name for c in self._val_specs), val_cols))
        out = Updates({c.name: cols[c.name] for c in self.schema}, np.full(len(change.diff), time, np.uint64),
                      change.diff, copy=False)
        return consolidated_at(out, time)

    def __repr__(self) -> str:
        return f"TopK(group_by={list(self.group_by)}, order_by={list(self.order_by)}, limit={self.limit}, offset={self.offset})"
