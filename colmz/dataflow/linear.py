"""``Union`` and ``Negate``: the linear operators without state.

Design
------
``Δ(A ∪ B) = ΔA ∪ ΔB`` (UNION ALL) and ``Δ(−A) = −ΔA``: each step costs its delta and owns
nothing but its clock. With :class:`colmz.dataflow.Threshold` they make ``EXCEPT`` and
``INTERSECT`` (Materialize's lowering).
"""

from __future__ import annotations

from collections.abc import Sequence

from colmz.dataflow.step import Clock, as_schema, check_delta, consolidated_at
from colmz.ops import concat
from colmz.updates import SchemaError, Updates, unify_schemas

__all__ = ["Negate", "Union"]


class Union:
    """UNION ALL of two or more inputs with the same columns.

    >>> import colmz, pyarrow as pa
    >>> u = Union([{"k": pa.int64()}, {"k": pa.int64()}])
    >>> u.step(2, colmz.Updates({"k": [1]}, time=[2], diff=[1]),
    ...           colmz.Updates({"k": [1, 5]}, time=[2, 2], diff=[1, -1])).to_pylist()
    [(1, 2, 2), (5, 2, -1)]
    """

    ROLLBACK_FIELDS = ("_clock",)

    def __init__(self, inputs: Sequence):
        schemas = [as_schema(s, f"inputs[{i}]") for i, s in enumerate(inputs)]
        if len(schemas) < 2:
            raise ValueError(f"a union needs at least two inputs, got {len(schemas)}")
        schema = schemas[0]
        for i, s in enumerate(schemas[1:], 1):
            try:
                schema = unify_schemas(schema, s)
            except SchemaError as e:
                raise SchemaError(f"inputs[{i}] does not match inputs[0]: {e}") from None
        self.input_schemas = tuple(schemas)
        self.schema = schema
        self._clock = Clock()

    def step(self, time, *deltas: Updates) -> Updates:
        """The output's change at ``time``: the inputs' changes (one per input) together."""
        time = self._clock.check(time)
        if len(deltas) != len(self.input_schemas):
            raise ValueError(f"a step of this union takes {len(self.input_schemas)} deltas, got {len(deltas)}")
        checked = [check_delta(d, self.schema, time, f"deltas[{i}]") for i, d in enumerate(deltas)]
        self._clock.advance(time)
        return consolidated_at(concat(checked), time)


class Negate:
    """Every diff negated.

    >>> import colmz, pyarrow as pa
    >>> Negate({"k": pa.int64()}).step(0, colmz.Updates({"k": [3]}, time=[0], diff=[2])).to_pylist()
    [(3, 0, -2)]
    """

    ROLLBACK_FIELDS = ("_clock",)

    def __init__(self, schema):
        self.schema = as_schema(schema, "schema")
        self._clock = Clock()

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time``: ``-delta``."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.schema, time)
        self._clock.advance(time)
        return consolidated_at(delta.negated(), time)
