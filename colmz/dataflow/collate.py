"""``Collation``: one reduce's output rows from reduces of different types over one input.

Design
------
A ``GROUP BY`` whose aggregates are of different reduction types (``sum`` and ``max``) is
rendered as Materialize renders it (``ReducePlan::Collation``,
``src/compute-types/src/plan/reduce.rs``): one reduce per type over the same input and group
key -- here an :class:`~colmz.dataflow.AccumulableReduce` and a
:class:`~colmz.dataflow.MinMaxReduce` -- whose outputs are joined on the group key into the
query's rows. Both hold one row per group that has input rows (and, without group columns,
one global row from the first step on), so after a step a group has a row in both or in
neither.

State: each input arranged by the group key (a :class:`~colmz.dataflow.KeyedArrangement`,
as ``MinMaxReduce`` arranges its input), so a step looks up only the groups its deltas touch
and saving the state for a rollback costs the number of runs, not the groups. Groups are
``GROUP BY``'s: ``NULL`` is a key like any other, ``NaN`` equals ``NaN``. A step reads each
affected group's row of every input before and after applying the deltas and emits the old
combined row retracted and the new one inserted: the cost is the affected groups'. A step
that raises leaves the state as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.regroup import affected_groups, group_rows
from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.ops import concat
from colmz.order import ColumnSpec, decode_columns
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["Collation"]


class Collation:
    """The rows of ``group_by`` + every input's other columns, joined per group.

    Parameters
    ----------
    inputs : two or more schemas, each ``group_by``'s columns (the same types) then its own
        output columns (names distinct across inputs)
    group_by : sequence of column names, the group key every input starts with

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> c = Collation([{"k": pa.int64(), "s": pa.int64()}, {"k": pa.int64(), "hi": pa.int64()}], ["k"])
    >>> c.step(1, colmz.Updates({"k": [1], "s": [5]}, time=[1], diff=[1]),
    ...           colmz.Updates({"k": [1], "hi": [5]}, time=[1], diff=[1])).to_pylist()
    [(1, 5, 5, 1, 1)]
    >>> c.step(2, colmz.Updates({"k": [1, 1], "s": [5, 12]}, time=[2, 2], diff=[-1, 1]),
    ...           colmz.Updates({"k": [1, 1], "hi": [5, 7]}, time=[2, 2], diff=[-1, 1])).to_pylist()
    [(1, 5, 5, 2, -1), (1, 12, 7, 2, 1)]
    """

    ROLLBACK_FIELDS = ("_arranged", "_clock")

    def __init__(self, inputs: Sequence, group_by: Sequence[str]):
        schemas = tuple(as_schema(s, f"inputs[{i}]") for i, s in enumerate(inputs))
        if len(schemas) < 2:
            raise ValueError(f"a collation needs at least two inputs, got {len(schemas)}")
        group = check_columns(group_by, schemas[0], "group_by")
        head = schemas[0][:len(group)]
        seen = set(group)
        for i, s in enumerate(schemas):
            if tuple(c.name for c in s[:len(group)]) != group or s[:len(group)] != head:
                raise ValueError(f"inputs[{i}] does not start with the group columns {list(group)} "
                                 f"of one type: {[(c.name, str(c.type)) for c in s]}")
            for c in s[len(group):]:
                if c.name in seen:
                    raise ValueError(f"column {c.name!r} of inputs[{i}] is named twice across the inputs")
                seen.add(c.name)
        self.group_by = group
        self.input_schemas = schemas
        self.schema: tuple[ColumnSpec, ...] = head + tuple(c for s in schemas for c in s[len(group):])
        self._group_specs = head
        self._arranged = [KeyedArrangement(sch, group) for sch in schemas]
        self._clock = Clock()

    @property
    def arrangements(self) -> list[KeyedArrangement]:
        """Each input arranged by the group key (for inspection and their work counters)."""
        return list(self._arranged)

    def step(self, time, *deltas: Updates) -> Updates:
        """The combined rows' change at ``time`` for each input's change."""
        time = self._clock.check(time)
        if len(deltas) != len(self.input_schemas):
            raise ValueError(f"a step of this collation takes {len(self.input_schemas)} deltas, got {len(deltas)}")
        checked = [check_delta(d, s, time, f"deltas[{i}]") for i, (d, s) in enumerate(zip(deltas, self.input_schemas))]
        groups = concat([Updates({g: d.column(g) for g in self.group_by}, d.time, d.diff, schema=self._group_specs,
                                 copy=False) for d in checked if len(d)] or [Updates.empty(self._group_specs)])
        if not len(groups):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        keys, layout = affected_groups(groups, self.group_by, False)
        group_cols = decode_columns(keys, layout, self._group_specs)
        with undone_on_error(self):
            before = self._rows_of(keys, layout)
            for arr, d in zip(self._arranged, checked):
                if len(d):
                    arr.insert_checked(time, d)
            after = self._rows_of(keys, layout)
            out = []
            for rows, diff in ((before, -1), (after, 1)):
                both = np.flatnonzero(np.all([r >= 0 for r, _ in rows], axis=0))
                if not len(both):
                    continue
                take = pa.array(both)
                cols = [c.take(take) for c in group_cols]
                for (r, values) in rows:
                    idx = pa.array(r[both])
                    cols.extend(v.take(idx) for v in values)
                out.append(Updates({c.name: col for c, col in zip(self.schema, cols)},
                                   np.full(len(both), time, np.uint64), np.full(len(both), diff, np.int64),
                                   schema=self.schema, copy=False))
            result = consolidated_at(concat(out), time) if out else Updates.empty(self.schema)
            self._clock.advance(time)
        return result

    def _rows_of(self, keys: np.ndarray, layout) -> list[tuple[np.ndarray, list[pa.Array]]]:
        """Per input: the position of each key's one row among the found rows (-1: none)
        and the found rows' value columns."""
        g = len(self.group_by)
        out = []
        for i, arr in enumerate(self._arranged):
            names = [c.name for c in self.input_schemas[i][g:]]
            rows = group_rows(arr.lookup_words(keys, layout), names)
            q = rows.column(rows.column_names[0]).to_numpy()
            if len(q) and ((rows.diff != 1).any() or (q[1:] == q[:-1]).any()):
                raise NegativeMultiplicity(f"deltas[{i}] leaves a group with more than one row: the "
                                           "input of a collation holds one row per group")
            pos = np.full(len(keys), -1, np.int64)
            pos[q] = np.arange(len(q))
            out.append((pos, [rows.column(n) for n in names]))
        return out

    def __repr__(self) -> str:
        return f"Collation(group_by={list(self.group_by)}, inputs={len(self.input_schemas)})"
