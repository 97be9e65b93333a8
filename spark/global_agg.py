"""A global accumulable aggregate on Spark: per-bucket partial aggregates, then one final bucket.

Design
------
A reduce without ``GROUP BY`` has one group, so bucketing by its key puts every row in one
bucket; and it has a row even over an empty input (``count`` 0, ``sum`` NULL), so it must
step at every step, touched or not. When every aggregate is *accumulable* (``count``,
``sum``, ``avg``, ``bool_and``/``bool_or``, variances: each a vector of sums,
``colmz.dataflow.accumulable``), Materialize's plan splits it: partial aggregates
wherever the rows are, then one combine. Here, two stages of a ``"global"`` view
(``colmz.spark.views``):

* :class:`PartialStage` -- per bucket of the table's rows (bucketed by every column, as a
  stage of Map/Filters is): the Map/Filters below the reduce, then the bucket's
  *partials* (``AccumulableReduce.partials``: one row of slot sums -- rows, non-NULL counts,
  exact sums, ... -- at the step's time). No state: a partial is a function of the delta.
* :class:`FinalStage` -- one bucket (key: no column; bucket 0), fed the partials of every
  touched bucket and one row of zeros at diff 0, so it runs at every step (the first one
  emits the row over an empty input): the reduce restored from its state (one row: the
  global accumulators), stepped with the partials summed (``AccumulableReduce.step_partials``),
  then the Map/Filters above it. Its state is committed with the partial stage's (none) in
  the view's one compare-and-set, under ``"1:<name>"``.

Sums are exact for integers, so the output equals the in-process reduce's; float sums add
per-bucket partial sums, rounded in another order than one process adds the rows.

Only Map/Filters over one table below the reduce and Map/Filters above it are taken here;
a global aggregate with a ``min``/``max`` or an aggregate DuckDB recomputes (of an
expression, ``string_agg``, ...) is refused, naming it. ``HAVING`` over accumulable
aggregates is a filter above the reduce: it runs in the final bucket.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import colmz
from colmz.dataflow.plan_nodes import BasicReduce, Get, MapFilter, Plan, Reduce, SqlMapFilter
from colmz.order import ColumnSpec

__all__ = ["FINAL_INPUT", "FinalStage", "PartialStage", "global_parts"]

#: The table name the final stage's Map/Filters read the reduce's output as.
FINAL_INPUT = "_colmz_global"


def _below(node):
    while isinstance(node, (MapFilter, SqlMapFilter)):
        node = node.input
    return node


def global_parts(p: Plan) -> tuple[list, Reduce, Get] | None:
    """``(the Map/Filters above, top first; the global reduce; the table's Get below)`` of a
    plan whose root is a reduce without ``GROUP BY`` through Map/Filters, ``None`` for any
    other plan; ``ValueError`` naming what a global reduce holds that does not run per
    bucket."""
    uppers, node = [], p.root
    while isinstance(node, (MapFilter, SqlMapFilter)):
        uppers.append(node)
        node = node.input
    if isinstance(node, BasicReduce) and not node.key:
        raise ValueError(f"has a global aggregate (no GROUP BY) recomputed in DuckDB "
                         f"({', '.join(text for _, text in node.items)}): only count, sum, avg, bool_and/or "
                         "and variances of columns combine from per-bucket partials")
    if not (isinstance(node, Reduce) and not node.group_by):
        return None
    basic = [f"{a.function}({a.column or '*'})" for a in node.aggregates if a.reduction != "accumulable"]
    if basic:
        raise ValueError(f"has a global aggregate (no GROUP BY) with aggregates that are not accumulable "
                         f"({', '.join(basic)}): only count, sum, avg, bool_and/or and variances combine "
                         "from per-bucket partials")
    get = _below(node.input)
    if not isinstance(get, Get):
        raise ValueError(f"has a global aggregate (no GROUP BY) over a {type(get).__name__}: only one over "
                         "Map/Filters of one table runs as per-bucket partials")
    return uppers, node, get


@functools.lru_cache(maxsize=64)
def _parts(view):
    from colmz.dataflow.plan import plan

    p = plan(view.query, {t: {c.name: c.type for c in s} for t, s in zip(view.tables, view.inputs)})
    return p, global_parts(p)


def _reduce(view):
    from colmz.dataflow.render import reduce_operator

    _, (_, node, _) = _parts(view)
    return reduce_operator(tuple(node.input.schema), (), node.aggregates)


class _Partial:
    def __init__(self, below, reduce):
        self.below, self.reduce, self.operators = below, reduce, []


class _Final:
    def __init__(self, reduce, upper):
        self.reduce, self.upper, self.operators = reduce, upper, [reduce]


@dataclass(frozen=True)
class PartialStage:
    """Stage 0 of a ``"global"`` view: each bucket's partials (module docstring)."""

    view: object
    index = 0
    kind = "stage"

    @property
    def inputs(self) -> tuple[tuple[ColumnSpec, ...], ...]:
        return (tuple(self.view.inputs[0]),)

    @property
    def keys(self) -> tuple[tuple[str, ...], ...]:
        return (tuple(c.name for c in self.view.inputs[0]),)

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        return (("table", self.view.tables[0]),)

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        return tuple(_reduce(self.view).partial_schema)

    def operator(self):
        from colmz.dataflow.render import render

        p, (_, node, _) = _parts(self.view)
        return _Partial(render(Plan(node.input, p.text, dict(p.tables))), _reduce(self.view))

    def operators(self, op) -> list:
        return op.operators

    def step(self, op, time: int, deltas) -> colmz.Updates:
        rows = op.below.step(time, {self.view.tables[0]: deltas[0]})
        return op.reduce.partials(rows) if len(rows) else colmz.Updates.empty(self.schema)

    def states(self) -> tuple:
        return ()


@dataclass(frozen=True)
class FinalStage:
    """Stage 1 of a ``"global"`` view: the one bucket combining the partials (module
    docstring)."""

    view: object
    index = 1
    kind = "stage"

    @property
    def inputs(self) -> tuple[tuple[ColumnSpec, ...], ...]:
        return (tuple(_reduce(self.view).partial_schema),)

    @property
    def keys(self) -> tuple[tuple[str, ...], ...]:
        return ((),)

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        return (("stage", "0"),)

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        p, _ = _parts(self.view)
        return tuple(p.root.schema)

    def operator(self):
        from colmz.dataflow.render import render

        p, (uppers, node, _) = _parts(self.view)
        top = Get(node.schema, FINAL_INPUT, FINAL_INPUT, tuple((c.name, c.name) for c in node.schema))
        for u in reversed(uppers):
            top = dataclasses.replace(u, input=top)
        return _Final(_reduce(self.view), render(Plan(top, p.text, {FINAL_INPUT: tuple(node.schema)})))

    def operators(self, op) -> list:
        return op.operators

    def step(self, op, time: int, deltas) -> colmz.Updates:
        out = op.reduce.step_partials(time, deltas[0])
        return op.upper.step(time, {FINAL_INPUT: out})

    def states(self) -> tuple[tuple[str, tuple[ColumnSpec, ...]], ...]:
        from colmz.dataflow.state import operator_states_of

        return tuple((st.name, st.schema) for st in operator_states_of([_reduce(self.view)]))
