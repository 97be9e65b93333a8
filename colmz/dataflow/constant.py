"""``Constant``: a constant relation (``SELECT 1, 'a'`` without ``FROM``).

Design
------
Materialize's ``MirRelationExpr::Constant``: its rows are the collection at every time, so
its change is the rows at the first step and nothing after. Stateless beyond whether it has
stepped.
"""

from __future__ import annotations

from collections.abc import Sequence

from colmz.dataflow.step import Clock, as_schema
from colmz.updates import Updates

__all__ = ["Constant"]


class Constant:
    """The relation of ``rows`` (tuples of the schema's columns), each once.

    >>> import pyarrow as pa
    >>> c = Constant({"a": pa.int32(), "b": pa.string()}, [(1, "x")])
    >>> c.step(3).to_pylist(), c.step(4).to_pylist()
    ([(1, 'x', 3, 1)], [])
    """

    ROLLBACK_FIELDS = ("_clock",)

    def __init__(self, schema, rows: Sequence[tuple]):
        self.schema = as_schema(schema, "schema")
        rows = [tuple(r) for r in rows]
        for r in rows:
            if len(r) != len(self.schema):
                raise ValueError(f"row {r!r} has {len(r)} values, the schema {len(self.schema)} columns")
        self.rows = rows
        self._clock = Clock()

    def step(self, time) -> Updates:
        """The rows at the first step; nothing after."""
        first = self._clock.last is None
        time = self._clock.check(time)
        self._clock.advance(time)
        if not first or not self.rows:
            return Updates.empty(self.schema)
        cols = {c.name: [r[i] for r in self.rows] for i, c in enumerate(self.schema)}
        return Updates(cols, time=[time] * len(self.rows), diff=[1] * len(self.rows),
                       schema={c.name: c.type for c in self.schema})
