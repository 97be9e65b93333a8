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

State: the current row of each reduce per group, keyed by the group's values (``NULL`` is a
key like any other, ``NaN`` equals ``NaN``, ``-0.0`` equals ``0.0``: the groups of
``GROUP BY``, not the equalities of a join). A step applies each input's change (a group's
old row retracted, its new row inserted) and, for the groups it touches, emits the old
combined row retracted and the new one inserted: the cost is the affected groups'.
A step that raises leaves the state as it was.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.order import ColumnSpec
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["Collation"]

_NAN = ("NaN",)  # one key for every NaN (a tuple: no value of a column equals it)


def _key(values: tuple) -> tuple:
    return tuple(_NAN if isinstance(v, float) and math.isnan(v) else v for v in values)


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

    ROLLBACK_FIELDS = ("_rows", "_clock")

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
        self._rows: dict[tuple, tuple] = {}  # group key -> (group values, one row tuple or None per input)
        self._clock = Clock()

    def step(self, time, *deltas: Updates) -> Updates:
        """The combined rows' change at ``time`` for each input's change."""
        time = self._clock.check(time)
        if len(deltas) != len(self.input_schemas):
            raise ValueError(f"a step of this collation takes {len(self.input_schemas)} deltas, got {len(deltas)}")
        checked = [check_delta(d, s, time, f"deltas[{i}]") for i, (d, s) in enumerate(zip(deltas, self.input_schemas))]
        g = len(self.group_by)
        with undone_on_error(self):
            before: dict[tuple, tuple] = {}
            for i, d in enumerate(checked):
                if not len(d):
                    continue
                names = [c.name for c in self.input_schemas[i]]
                cols = [d.column(n).to_pylist() for n in names]
                diffs = d.diff.tolist()
                # a group's old row retracted before its new row is inserted
                for r in sorted(range(len(diffs)), key=lambda r: diffs[r]):
                    diff = diffs[r]
                    row = tuple(c[r] for c in cols)
                    key = _key(row[:g])
                    entry = self._rows.get(key)
                    if key not in before:
                        before[key] = entry
                    values, parts = entry if entry is not None else (row[:g], (None,) * len(checked))
                    parts = list(parts)
                    if diff == -1 and parts[i] is not None and _key(parts[i]) == _key(row[g:]):
                        parts[i] = None
                    elif diff == 1 and parts[i] is None:
                        parts[i] = row[g:]
                    else:
                        raise NegativeMultiplicity(f"deltas[{i}] changes group {row[:g]} by {diff} where the "
                                                   "group holds one row or none")
                    if all(p is None for p in parts):
                        self._rows.pop(key, None)
                    else:
                        self._rows[key] = (values, tuple(parts))
            out_rows, out_diffs = [], []
            for key, old in before.items():
                new = self._rows.get(key)
                for entry, diff in ((old, -1), (new, 1)):
                    if entry is not None and all(p is not None for p in entry[1]):
                        out_rows.append(entry[0] + tuple(v for p in entry[1] for v in p))
                        out_diffs.append(diff)
            result = consolidated_at(Updates({c.name: [r[j] for r in out_rows] for j, c in enumerate(self.schema)},
                                             time=[time] * len(out_rows), diff=out_diffs, schema=self.schema), time)
            self._clock.advance(time)
        return result

    def __repr__(self) -> str:
        return f"Collation(group_by={list(self.group_by)}, inputs={len(self.input_schemas)})"
