"""A global aggregate on Spark: per-bucket partial aggregates, then one final bucket.

Design
------
A reduce without ``GROUP BY`` has one group, so bucketing by its key puts every row in one
bucket; and it has a row even over an empty input (``count`` 0, ``sum`` NULL, ``min``
NULL), so it must step at every step, touched or not. Materialize's plan splits such a
reduce: partial aggregates wherever the rows are, then one combine
(``src/compute-types/src/plan/reduce.rs``: accumulable aggregates are sums; hierarchical
ones, ``min``/``max``, are associative). Here, the stages of a ``"global"`` view
(``colmz.spark.views``), all in its one compare-and-set:

* **lower stages** -- when the reduce reads more than Map/Filters over one table (a join, a
  reduce grouped by a key, a union), its input subtree is cut into stages as any view's plan
  (``colmz.spark.stages``), each bucketed by its own key; the last one's output (columns
  ``c0, c1, ...``) is the partial stage's input.
* :class:`PartialStage` -- per bucket of the reduce's input rows (bucketed by every column,
  as a stage of Map/Filters is): the Map/Filters below the reduce (over a table), then the
  bucket's partials, one output schema (:meth:`PartialStage.schema`) for two kinds of row:

  - accumulable aggregates (``count``, ``sum``, ``avg``, ``bool_and``/``bool_or``,
    variances: each a vector of sums, ``colmz.dataflow.accumulable``): one row of slot sums
    ``a0, a1, ...`` (``AccumulableReduce.partials``: rows, non-NULL counts, exact sums, ...)
    at the step's time; no state, a function of the delta;
  - ``min``/``max``: the bucket's *extremes* ``x0, x1, ...``, kept by a
    :class:`~colmz.dataflow.MinMaxReduce` over the bucket's rows (its state: the bucket's
    input arranged, so retracting the bucket's extreme re-reduces the bucket); the output is
    the change of the bucket's one row of extremes (the old retracted, the new inserted),
    rows whose extremes are all NULL left out (a filter, so linear: the final bucket holds,
    per bucket with a non-NULL value, its current extremes -- at most one row per bucket).

  A row of one kind holds NULLs in the other kind's columns (``a0``, the row count, is never
  NULL in an accumulable row).
* :class:`FinalStage` -- one bucket (key: no column; bucket 0), fed every touched bucket's
  partials and one row of zeros at diff 0, so it runs at every step (the first one emits the
  row over an empty input): the accumulable reduce restored from its state (one row: the
  global accumulators) stepped with the partials summed
  (``AccumulableReduce.step_partials``); a ``MinMaxReduce`` over the buckets' extremes (its
  state: at most one row per bucket), whose ``min`` of the buckets' ``min`` is the global
  one, NULLs skipped; both joined into the one output row by a
  :class:`~colmz.dataflow.collate.Collation` (Materialize's ``ReducePlan::Collation``) when
  the reduce has both kinds; then the Map/Filters above the reduce (``HAVING``, the select
  list).

Sums are exact for integers and extremes are exact, so the output equals the in-process
reduce's. A float sum from SQL never reaches it: the planner keeps float sums per affected
group (``colmz.dataflow.plan_reduce``), which a global view refuses below.

Refused, naming the construct: a global aggregate DuckDB recomputes (of an expression,
``string_agg``, ...: it does not combine from partials) and one over a subtree that does not
run in stages (a LIMIT over all rows, a cross join, a constant).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import colmz
from colmz.dataflow.plan_nodes import BasicReduce, Get, MapFilter, Plan, Reduce, SqlMapFilter
from colmz.order import ColumnSpec
from colmz.spark.stages import StageError, plan_stages, positional

__all__ = ["FINAL_INPUT", "FinalStage", "GlobalParts", "PartialStage", "global_parts", "lower_plan"]

#: The table name the final stage's Map/Filters read the reduce's output as.
FINAL_INPUT = "_colmz_global"


def _below(node):
    while isinstance(node, (MapFilter, SqlMapFilter)):
        node = node.input
    return node


@dataclass(frozen=True)
class GlobalParts:
    """A global reduce's plan in parts: ``uppers`` the Map/Filters above it (top first),
    ``reduce`` the reduce, ``get`` the table below its Map/Filters (``None`` when its input
    is cut into lower stages), ``lower`` the plan of its input subtree (``None`` with a
    ``get``)."""

    uppers: tuple
    reduce: Reduce
    get: Get | None
    lower: Plan | None


def global_parts(p: Plan) -> GlobalParts | None:
    """The :class:`GlobalParts` of a plan whose root is a reduce without ``GROUP BY`` through
    Map/Filters, ``None`` for any other plan; ``ValueError`` naming what a global reduce
    holds that does not run per bucket."""
    uppers, node = [], p.root
    while isinstance(node, (MapFilter, SqlMapFilter)):
        uppers.append(node)
        node = node.input
    if isinstance(node, BasicReduce) and not node.key:
        raise ValueError(f"has a global aggregate (no GROUP BY) recomputed in DuckDB "
                         f"({', '.join(text for _, text in node.items)}): only count, sum, avg, bool_and/or, "
                         "variances, min and max of columns combine from per-bucket partials")
    if not (isinstance(node, Reduce) and not node.group_by):
        return None
    basic = [f"{a.function}({a.column or '*'})" for a in node.aggregates
             if a.reduction not in ("accumulable", "hierarchical")]
    if basic:
        raise ValueError(f"has a global aggregate (no GROUP BY) with aggregates that are neither accumulable "
                         f"nor min/max ({', '.join(basic)}): only count, sum, avg, bool_and/or, variances, min "
                         "and max combine from per-bucket partials")
    get = _below(node.input)
    if isinstance(get, Get):
        return GlobalParts(tuple(uppers), node, get, None)
    lower = Plan(node.input, p.text, dict(p.tables))
    try:
        plan_stages(lower)
    except StageError as e:
        raise ValueError(f"has a global aggregate (no GROUP BY) over a {type(get).__name__} whose subtree does "
                         f"not run in stages: its input {e}") from None
    return GlobalParts(tuple(uppers), node, None, lower)


@functools.lru_cache(maxsize=64)
def _parts(view) -> tuple[Plan, GlobalParts]:
    from colmz.dataflow.plan import plan

    p = plan(view.query, {t: {c.name: c.type for c in s} for t, s in zip(view.tables, view.inputs)})
    return p, global_parts(p)


@functools.lru_cache(maxsize=64)
def _lower(view) -> tuple:
    """``(the plan of the reduce's input, its stages)`` of a global view cut into lower
    stages (``(None, ())`` for none); the last stage's output renamed ``c0, c1, ...``."""
    _, parts = _parts(view)
    if parts.lower is None:
        return None, ()
    stages = plan_stages(parts.lower)
    last = dataclasses.replace(stages[-1], schema=positional(stages[-1].schema))
    return parts.lower, (*stages[:-1], last)


def lower_plan(view) -> tuple:
    """``(the plan of a global view's reduce input, its stages)`` when it is cut into lower
    stages (the last one's output columns ``c0, c1, ...``), ``(None, ())`` when the reduce
    reads Map/Filters over one table."""
    return _lower(view)


def _kinds(view) -> tuple[tuple, tuple]:
    _, parts = _parts(view)
    aggs = parts.reduce.aggregates
    return (tuple(a for a in aggs if a.reduction == "accumulable"),
            tuple(a for a in aggs if a.reduction == "hierarchical"))


def _accumulable(view):
    """A fresh accumulable reduce of the global reduce's accumulable aggregates (``None``
    without one)."""
    from colmz.dataflow.render import reduce_operator

    _, parts = _parts(view)
    acc, _ = _kinds(view)
    return reduce_operator(tuple(parts.reduce.input.schema), (), acc) if acc else None


def _extremes_in_bucket(view):
    """A fresh ``MinMaxReduce`` of one bucket's rows, output ``x0, x1, ...`` (``None``
    without min/max)."""
    from colmz.dataflow.minmax import MinMaxReduce
    from colmz.dataflow.render import HIERARCHICAL

    _, parts = _parts(view)
    _, hier = _kinds(view)
    if not hier:
        return None
    return MinMaxReduce(tuple(parts.reduce.input.schema), [],
                        {f"x{i}": HIERARCHICAL[a.function](a.column) for i, a in enumerate(hier)})


def _extremes_of_buckets(view):
    """A fresh ``MinMaxReduce`` over the buckets' extremes, output named as the reduce's
    (``None`` without min/max)."""
    from colmz.dataflow.minmax import MinMaxReduce
    from colmz.dataflow.render import HIERARCHICAL

    bucket = _extremes_in_bucket(view)
    if bucket is None:
        return None
    _, hier = _kinds(view)
    return MinMaxReduce(tuple(bucket.schema), [], {a.name: HIERARCHICAL[a.function](f"x{i}") for i, a in enumerate(hier)})


def _partial_schema(view) -> tuple[ColumnSpec, ...]:
    acc, ext = _accumulable(view), _extremes_in_bucket(view)
    return (*(acc.partial_schema if acc is not None else ()), *(ext.schema if ext is not None else ()))


def _padded(u: colmz.Updates, schema) -> colmz.Updates:
    """``u`` with ``schema``'s other columns NULL (a row of the other kind's columns)."""
    n = len(u)
    cols = {c.name: u.column(c.name) if c.name in u.column_names else pa.nulls(n, c.type) for c in schema}
    return colmz.Updates(cols, u.time, u.diff, schema=schema)


class _Partial:
    def __init__(self, below, accumulable, extremes):
        self.below, self.accumulable, self.extremes = below, accumulable, extremes
        self.operators = [extremes] if extremes is not None else []


class _Final:
    def __init__(self, accumulable, extremes, collation, project, upper):
        self.accumulable, self.extremes, self.collation = accumulable, extremes, collation
        self.project, self.upper = project, upper
        self.operators = [o for o in (accumulable, extremes, collation) if o is not None]


@dataclass(frozen=True)
class PartialStage:
    """The stage of a ``"global"`` view computing each bucket's partials (module
    docstring): its input a table's rows or the last lower stage's output."""

    view: object
    kind = "stage"

    @property
    def index(self) -> int:
        return len(_lower(self.view)[1])

    @property
    def inputs(self) -> tuple[tuple[ColumnSpec, ...], ...]:
        _, parts = _parts(self.view)
        if parts.get is None:
            return (positional(parts.reduce.input.schema),)
        return (tuple(self.view.inputs[self.view.tables.index(parts.get.table)]),)

    @property
    def keys(self) -> tuple[tuple[str, ...], ...]:
        return (tuple(c.name for c in self.inputs[0]),)

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        _, parts = _parts(self.view)
        if parts.get is None:
            return (("stage", str(self.index - 1)),)
        return (("table", parts.get.table),)

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        return _partial_schema(self.view)

    def operator(self):
        from colmz.dataflow.render import render

        p, parts = _parts(self.view)
        below = None if parts.get is None else render(Plan(parts.reduce.input, p.text, dict(p.tables)))
        return _Partial(below, _accumulable(self.view), _extremes_in_bucket(self.view))

    def operators(self, op) -> list:
        return op.operators

    def step(self, op, time: int, deltas) -> colmz.Updates:
        _, parts = _parts(self.view)
        if op.below is not None:
            rows = op.below.step(time, {parts.get.table: deltas[0]})
        else:
            rows = deltas[0].rename([c.name for c in parts.reduce.input.schema])
        schema = self.schema
        out = []
        if op.accumulable is not None and len(rows):
            out.append(_padded(op.accumulable.partials(rows), schema))
        if op.extremes is not None:
            ext = op.extremes.step(time, rows)
            # a bucket's row of NULL extremes holds nothing the final min/max reads: left out
            valid = np.zeros(len(ext), bool)
            for c in ext.schema:
                valid |= np.asarray(pc.is_valid(ext.column(c.name)).to_numpy(zero_copy_only=False), bool)
            out.append(_padded(ext.take(np.flatnonzero(valid)), schema))
        return colmz.concat(out) if out else colmz.Updates.empty(schema)

    def states(self) -> tuple[tuple[str, tuple[ColumnSpec, ...]], ...]:
        from colmz.dataflow.state import operator_states_of

        ext = _extremes_in_bucket(self.view)
        return () if ext is None else tuple((st.name, st.schema) for st in operator_states_of([ext]))


@dataclass(frozen=True)
class FinalStage:
    """The last stage of a ``"global"`` view: the one bucket combining the partials (module
    docstring)."""

    view: object
    kind = "stage"

    @property
    def index(self) -> int:
        return len(_lower(self.view)[1]) + 1

    @property
    def inputs(self) -> tuple[tuple[ColumnSpec, ...], ...]:
        return (_partial_schema(self.view),)

    @property
    def keys(self) -> tuple[tuple[str, ...], ...]:
        return ((),)

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        return (("stage", str(self.index - 1)),)

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        p, _ = _parts(self.view)
        return tuple(p.root.schema)

    def operator(self):
        from colmz.dataflow.collate import Collation
        from colmz.dataflow.mapfilter import MapFilter as MapFilterOp
        from colmz.dataflow.render import render

        p, parts = _parts(self.view)
        node = parts.reduce
        top = Get(node.schema, FINAL_INPUT, FINAL_INPUT, tuple((c.name, c.name) for c in node.schema))
        for u in reversed(parts.uppers):
            top = dataclasses.replace(u, input=top)
        upper = render(Plan(top, p.text, {FINAL_INPUT: tuple(node.schema)}))
        acc, ext = _accumulable(self.view), _extremes_of_buckets(self.view)
        collation = project = None
        if acc is not None and ext is not None:
            collation = Collation([acc.schema, ext.schema], [])
            project = MapFilterOp(collation.schema, select=[a.name for a in node.aggregates])
        return _Final(acc, ext, collation, project, upper)

    def operators(self, op) -> list:
        return op.operators

    def step(self, op, time: int, deltas) -> colmz.Updates:
        d = deltas[0]
        acc = ext = None
        if op.accumulable is not None:
            mine = d if op.extremes is None else d.take(np.flatnonzero(
                np.asarray(pc.is_valid(d.column("a0")).to_numpy(zero_copy_only=False), bool)))
            schema = op.accumulable.partial_schema
            acc = op.accumulable.step_partials(time, colmz.Updates({c.name: mine.column(c.name) for c in schema},
                                                                   mine.time, mine.diff, schema=schema))
        if op.extremes is not None:
            mine = d if op.accumulable is None else d.take(np.flatnonzero(
                np.asarray(pc.is_null(d.column("a0")).to_numpy(zero_copy_only=False), bool)))
            schema = op.extremes.input_schema
            ext = op.extremes.step(time, colmz.Updates({c.name: mine.column(c.name) for c in schema},
                                                       mine.time, mine.diff, schema=schema))
        if acc is not None and ext is not None:
            out = op.project.step(time, op.collation.step(time, acc, ext))
        else:
            out = acc if acc is not None else ext
        return op.upper.step(time, {FINAL_INPUT: out})

    def states(self) -> tuple[tuple[str, tuple[ColumnSpec, ...]], ...]:
        from colmz.dataflow.state import operator_states_of

        return tuple((st.name, st.schema) for st in operator_states_of(self.operator().operators))
