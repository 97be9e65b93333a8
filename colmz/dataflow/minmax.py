"""``MinMaxReduce``: ``min`` and ``max`` per group, re-reduced from the arranged input.

Design
------
``min``/``max`` are not invertible: retracting the current extreme needs the group's other
rows. Materialize's *hierarchical* plan (``src/compute-types/src/plan/reduce.rs``) keeps a tree
of bucketed reductions; this first plan keeps the input arranged by the group key
(:class:`~colmz.dataflow.KeyedArrangement`) and, per step, re-reduces each group the delta
touches, before and after the delta enters the arrangement: output ``−(key, old)`` and
``+(key, new)``, consolidated. Work is the affected groups' rows (the bucketed tree, later,
makes it logarithmic in a group).

Shared input. Given ``arranged`` (a :class:`~colmz.dataflow.shared.SharedInput` of the input
by the group key: the catalog's shared arrangement, fed the step's changes before the step),
the reduce inserts nothing and reads the groups' old rows as the arrangement minus the delta
(``SharedInput.lookup_words(minus=)``), their new rows as it stands.

Values order as PostgreSQL's ``min``/``max`` do for numbers, booleans, times and ``bytea``:
colmz's words (``NaN`` above every number, ``-0.0 = 0.0``); NULLs are skipped (a group of only
NULLs gives NULL). Text is refused (its order is the collation's). Groups compare NULL = NULL;
a group whose rows are all retracted disappears; with no group columns the one global row
exists from the first step on (NULLs over an empty input).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.regroup import affected_groups, check_orderable, fresh_name, group_rows
from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.ops import concat
from colmz.order import ColumnSpec, decode_columns
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["Max", "Min", "MinMaxReduce"]


class _Extreme:
    def __init__(self, column: str):
        if not isinstance(column, str):
            raise TypeError(f"{type(self).__name__} takes a column name (str), got {column!r}")
        self.column = column

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.column!r})"


class Min(_Extreme):
    """``min(column)``."""


class Max(_Extreme):
    """``max(column)``."""


class MinMaxReduce:
    """``SELECT group_by..., min/max(...) FROM input GROUP BY group_by``.

    Parameters
    ----------
    schema : the input's columns
    group_by : sequence of column names (empty: one global group)
    aggregates : mapping of output column name to :class:`Min` / :class:`Max`
    arranged : ``SharedInput``, optional
        The input arranged by ``group_by`` in the catalog's shared arrangement (module docstring).

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> r = MinMaxReduce({"k": pa.int64(), "v": pa.float64()}, ["k"], {"lo": Min("v"), "hi": Max("v")})
    >>> r.step(1, colmz.Updates({"k": [1, 1, 1], "v": [2.0, float("nan"), -1.0]}, time=[1] * 3, diff=[1] * 3)).to_pylist()
    [(1, -1.0, nan, 1, 1)]
    >>> r.step(2, colmz.Updates({"k": [1], "v": [-1.0]}, time=[2], diff=[-1])).to_pylist()
    [(1, -1.0, nan, 2, -1), (1, 2.0, nan, 2, 1)]
    """

    ROLLBACK_FIELDS = ("_arranged", "_clock")

    def __init__(self, schema, group_by: Sequence[str], aggregates: Mapping[str, _Extreme], arranged=None):
        self.input_schema = as_schema(schema, "schema")
        self.group_by = check_columns(group_by, self.input_schema, "group_by")
        if not isinstance(aggregates, Mapping) or not aggregates:
            raise TypeError("aggregates must be a non-empty mapping of output names to Min/Max")
        types = {c.name: c.type for c in self.input_schema}
        for name, a in aggregates.items():
            if not isinstance(a, _Extreme):
                raise TypeError(f"aggregates[{name!r}] is {a!r}, not Min or Max")
            if a.column not in types:
                raise ValueError(f"aggregates[{name!r}] reads column {a.column!r}, which is not among "
                                 f"the input's columns {list(types)}")
            check_orderable(types[a.column], a.column, f"aggregates[{name!r}]")
        self.aggregates = dict(aggregates)
        values = [c for c in dict.fromkeys(a.column for a in aggregates.values()) if c not in self.group_by]
        self._arranged_columns = (*self.group_by, *values)
        columns = tuple(c for n in self._arranged_columns for c in self.input_schema if c.name == n)
        self._group_specs = columns[:len(self.group_by)]
        self.schema = as_schema([*self._group_specs, *(ColumnSpec(n, types[a.column]) for n, a in aggregates.items())],
                                "the output")
        self._shared = arranged is not None
        if self._shared:
            if tuple(arranged.key) != self.group_by or tuple(arranged.schema) != self.input_schema:
                raise ValueError(f"arranged is keyed by {list(arranged.key)} over {[c.name for c in arranged.schema]}; "
                                 f"the reduce needs {list(self.group_by)} over {[c.name for c in self.input_schema]}")
            self._arranged = arranged
        else:
            self._arranged = KeyedArrangement(columns, self.group_by)
        self._clock = Clock()

    @property
    def arrangement(self) -> KeyedArrangement:
        """The input arranged by the group key (for inspection and its work counters)."""
        return self._arranged

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta``."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, time)
        first = self._clock.last is None
        glob = not self.group_by
        if not len(delta) and not (glob and first):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        keys, layout = affected_groups(delta, self.group_by, glob)
        group_cols = decode_columns(keys, layout, self._group_specs)
        with undone_on_error(self):
            out = []
            if not first or not glob:
                old = delta if self._shared else None  # a shared arrangement holds the delta already
                out.append(self._reduced(keys, layout, group_cols, glob, time, old).negated())
            if not self._shared:
                arranged = Updates({c: delta.column(c) for c in self._arranged_columns}, delta.time, delta.diff,
                                   copy=False)
                self._arranged.insert_checked(time, arranged)
            out.append(self._reduced(keys, layout, group_cols, glob, time))
            result = consolidated_at(concat(out), time)
            self._clock.advance(time)
        return result

    def _reduced(self, keys, layout, group_cols, glob: bool, time: int, minus: Updates | None = None) -> Updates:
        """The output rows of the groups ``keys`` from the arrangement as it stands (less
        ``minus``, the changes a shared arrangement holds already)."""
        m = len(keys)
        found = (self._arranged.lookup_words(keys, layout, minus=minus) if self._shared
                 else self._arranged.lookup_words(keys, layout))
        qname = fresh_name(c.name for c in self._arranged.schema)
        total = np.zeros(m, np.int64)
        np.add.at(total, found.query, found.rows.diff)
        if len(total) and total.min() < 0:
            raise NegativeMultiplicity("the input retracts rows it does not hold: a group would hold "
                                       f"{int(total.min())} rows")
        present = (total > 0) | glob
        idx = np.flatnonzero(present)
        out = {s.name: c.take(pa.array(idx)) for s, c in zip(self._group_specs, group_cols)}
        by_column = {}
        for name, agg in self.aggregates.items():
            if agg.column not in by_column:
                # Sorted by (group, value): consolidated on the one column each aggregate reads.
                by_column[agg.column] = group_rows(found, [agg.column])
            rows = by_column[agg.column]
            q = rows.column(qname).to_numpy()
            col = rows.column(agg.column)
            valid = col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else np.ones(len(col), bool)
            vq = q[valid]
            pos = np.flatnonzero(valid)
            # Rows are sorted by (group, value): a group's first valid row is its min, its last its max.
            if isinstance(agg, Min):
                pick = pos[np.r_[True, vq[1:] != vq[:-1]]] if len(vq) else pos
            else:
                pick = pos[np.r_[vq[1:] != vq[:-1], True]] if len(vq) else pos
            which = np.full(m, -1, np.int64)
            which[q[pick]] = pick
            which = which[idx]
            mask = which < 0
            out[name] = col.take(pa.array(np.where(mask, 0, which), mask=mask if mask.any() else None))
        return Updates(out, np.full(len(idx), time, np.uint64), np.ones(len(idx), np.int64),
                       schema=self.schema, copy=False)

    def __repr__(self) -> str:
        return f"MinMaxReduce(group_by={list(self.group_by)}, aggregates={self.aggregates})"
