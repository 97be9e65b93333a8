"""Rendering a view's plan into the operators of ``colmz.dataflow``: :func:`render` and the
:class:`Pipeline` it returns.

Design
------
Each plan node (``colmz.dataflow.plan_nodes``) becomes one operator owning its state.
Identical subplans are rendered once (hash-consed: nodes are frozen values, so two equal
nodes compute the same collection from the same inputs): a node the lowering uses twice --
an antijoin's input (``X − X ⋉ Y``), an outer join's preserved side and its pairs (the
pairs are both output and the source of the matched rows), an ``INTERSECT``'s input -- is
one operator whose output feeds every parent, as Materialize's lowering binds such a
subplan with ``Let`` and reads it with ``Get``. The rendered operators form a DAG;
``Pipeline.step(time, deltas)`` steps every operator exactly once for ``time``, inputs
first (a shared operator's delta is computed once and handed to each parent), and returns
the view's delta. A step that raises in any operator leaves all of them as they were
(``colmz.rollback``). ``Pipeline.steps`` lists each rendered node once (its work counted
once); ``Pipeline.tree`` is the tree EXPLAIN prints, where a shared node's later parents
refer to it by number instead of repeating its subtree.

Shared arrangements. Rendered with ``shared=`` (a :class:`colmz.dataflow.shared.SharedSource`,
the catalog engine's), an operator that arranges an input *as is* -- a delta join's or an
outer join's input, a min/max reduce's or a per-group SQL recompute's (basic aggregates,
window functions) input that is a ``Get`` -- takes the shared arrangement of that relation
by that key instead of building its own (the choice is :func:`shared_inputs` and
``_shared_arranged``); any other arranged input (one behind a Map/Filter, a join's result) is
the operator's own. The engine feeds the shared arrangements before the pipeline steps.

The aggregate functions' operators by reduction type
(:data:`ACCUMULABLE`, :data:`HIERARCHICAL`) are here, read by the binder to classify
aggregates as ``src/compute-types/src/plan/reduce.rs`` does.
"""

from __future__ import annotations

from collections.abc import Mapping

from colmz.dataflow import accumulable as acc
from colmz.dataflow.collate import Collation
from colmz.dataflow.constant import Constant as ConstantOp
from colmz.dataflow.distinct import Distinct as DistinctOp
from colmz.dataflow.distinct import Threshold as ThresholdOp
from colmz.dataflow.guard import ErrorGuard as ErrorGuardOp
from colmz.dataflow.iterate import Iterate
from colmz.dataflow.join import DeltaJoin
from colmz.dataflow.jsonbcheck import JsonbCheck as JsonbCheckOp
from colmz.dataflow.linear import Negate as NegateOp
from colmz.dataflow.linear import Union as UnionOp
from colmz.dataflow.mapfilter import Column, Compare, IsNull
from colmz.dataflow.mapfilter import MapFilter as MapFilterOp
from colmz.dataflow.minmax import Max, Min, MinMaxReduce
from colmz.dataflow.outer import OuterJoin
from colmz.dataflow.plan_nodes import (
    Aggregate,
    Comparison,
    Constant,
    Distinct,
    ErrorGuard,
    Fallback,
    FlatMap,
    Get,
    GroupSql,
    Join,
    JsonbCheck,
    LetRec,
    MapFilter,
    Negate,
    Node,
    Plan,
    Predicate,
    Reduce,
    Schema,
    SqlMapFilter,
    TemporalFilter,
    Threshold,
    TopK,
    Union,
    Variable,
    variable_key,
)
from colmz.dataflow.recompute import GroupRecompute
from colmz.dataflow.shared import SharedInput, SharedSource
from colmz.dataflow.sqlmap import SqlMapFilter as SqlMapFilterOp
from colmz.dataflow.temporal import Bound
from colmz.dataflow.temporal import TemporalFilter as TemporalFilterOp
from colmz.dataflow.topk import OrderBy
from colmz.dataflow.topk import TopK as TopKOp
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["ACCUMULABLE", "CONSOLIDATING", "HIERARCHICAL", "CollatedReduce", "Pipeline", "reduce_operator", "render",
           "shared_inputs"]

#: Aggregates by reduction type (src/compute-types/src/plan/reduce.rs, ``reduction_type``).
ACCUMULABLE = {"count": acc.Count, "count_star": acc.Count, "sum": acc.Sum, "avg": acc.Avg,
               "bool_and": acc.BoolAnd, "bool_or": acc.BoolOr, "every": acc.BoolAnd,
               "var_samp": acc.VarSamp, "variance": acc.VarSamp, "var_pop": acc.VarPop,
               "stddev_samp": acc.StddevSamp, "stddev": acc.StddevSamp, "stddev_pop": acc.StddevPop}
HIERARCHICAL = {"min": Min, "max": Max}


class CollatedReduce:
    """A reduce whose aggregates are of both types: an ``AccumulableReduce`` and a
    ``MinMaxReduce`` over the same input, their rows joined per group by a
    :class:`~colmz.dataflow.collate.Collation` (Materialize's ``ReducePlan::Collation``),
    output columns in the order of ``order``."""

    ROLLBACK_FIELDS = ("accumulable", "hierarchical", "collation", "project")

    def __init__(self, schema: Schema, group: tuple[str, ...], aggs: tuple[Aggregate, ...], arranged=None,
                 monotonic: bool = False, expected_group_size: int | None = None):
        self.accumulable = reduce_operator(schema, group, tuple(a for a in aggs if a.reduction == "accumulable"))
        self.hierarchical = reduce_operator(schema, group, tuple(a for a in aggs if a.reduction == "hierarchical"),
                                            arranged, monotonic, expected_group_size)
        self.collation = Collation([self.accumulable.schema, self.hierarchical.schema], list(group))
        self.project = MapFilterOp(self.collation.schema, select=[*group, *(a.name for a in aggs)])
        self.schema = self.project.schema

    @property
    def strategy(self) -> str:
        """The min/max part's plan (``MinMaxReduce.strategy``)."""
        return self.hierarchical.strategy

    def step(self, time, delta: Updates) -> Updates:
        return self.project.step(time, self.collation.step(
            time, self.accumulable.step(time, delta), self.hierarchical.step(time, delta)))


def reduce_operator(schema: Schema, group: tuple[str, ...], aggs: tuple[Aggregate, ...], arranged=None,
                    monotonic: bool = False, expected_group_size: int | None = None):
    """The operator of a reduce by the aggregates' reduction types. The min/max part's plan
    (``colmz.dataflow.minmax``, as ``Reduce.hierarchical_plan`` names it): ``monotonic`` (an
    append-only input) its monotonic plan; else ``expected_group_size`` (the query's
    ``AGGREGATE INPUT GROUP SIZE``) its bucketed plan with stages for groups of that size;
    else its per-group plan, over ``arranged`` (a ``SharedInput`` of the input by ``group``)
    when given."""
    kinds = {a.reduction for a in aggs}
    if len(kinds) > 1:
        return CollatedReduce(schema, group, aggs, arranged, monotonic, expected_group_size)
    if kinds == {"hierarchical"}:
        extremes = {a.name: HIERARCHICAL[a.function](a.column) for a in aggs}
        if monotonic:
            return MinMaxReduce(schema, list(group), extremes, plan="monotonic")
        if expected_group_size is not None:
            return MinMaxReduce(schema, list(group), extremes, plan="bucketed",
                                expected_group_size=expected_group_size)
        return MinMaxReduce(schema, list(group), extremes, arranged=arranged)
    return acc.AccumulableReduce(schema, list(group),
                                 {a.name: (ACCUMULABLE[a.function](a.column) if a.column is not None
                                           else acc.Count()) for a in aggs})


#: Nodes whose operators' steps return their delta consolidated (``consolidated_at``): a
#: Map/Filter over one of them that only renames passes the delta through.
CONSOLIDATING = (Get, MapFilter, SqlMapFilter, JsonbCheck, GroupSql, TopK, Distinct, Threshold, Negate, Union)


def _predicate_operator(p: Predicate):
    if isinstance(p, Comparison):
        return Compare(p.column, p.op, p.value)
    return IsNull(p.column, p.negated)


class _Step:
    """A rendered node: its operator and its inputs' rendered nodes (shared between the
    parents of a subplan rendered once)."""

    def __init__(self, node: Node, op, inputs: list[_Step], table: str | None = None):
        self.node = node
        self.op = op
        self.inputs = inputs
        self.table = table
        self.schema = node.schema
        #: steps shown under this one by EXPLAIN but not its inputs (a recursion's first
        #: iteration's instance: stepped by its operator, not by this step)
        self.shown: list[_Step] = []
        # rows into and out of the operator at its last step (EXPLAIN's rows touched)
        self.rows_in = 0
        self.rows_out = 0

    def step(self, time: int, deltas: Mapping[str, Updates], tables: Mapping[str, Schema],
             done: dict[int, Updates]) -> Updates:
        """The operator's output at ``time``, stepped once per pipeline step: ``done`` holds
        the outputs of the steps already stepped at ``time`` (by ``id``)."""
        out = done.get(id(self))
        if out is not None:
            return out
        if self.table is not None:
            d = deltas.get(self.table)
            if d is None:
                d = Updates.empty(tables[self.table])
            out = self.op.step(time, d)
            self.rows_in, self.rows_out = len(d), len(out)
        else:
            ins = [i.step(time, deltas, tables, done) for i in self.inputs]
            # a recursion's operator feeds the tables' changes to its iterations itself
            out = self.op.step(time, *ins, deltas=deltas) if getattr(self.op, "reads_deltas", False) \
                else self.op.step(time, *ins)
            self.rows_in, self.rows_out = sum(len(i) for i in ins), len(out)
        done[id(self)] = out
        return out


def shared_inputs(node: Join, shared: SharedSource | None) -> dict:
    """For a join: input index -> function of a key giving that input's shared arrangement,
    for each input that is a ``Get`` (arranged as is); empty without ``shared``."""
    if shared is None:
        return {}
    return {j: (lambda key, g=g: shared.input(g.table, g.columns, key))
            for j, g in enumerate(node.inputs) if isinstance(g, Get)}


def _shared_arranged(node: Reduce, shared: SharedSource | None) -> SharedInput | None:
    """A reduce's input arranged by its group key in the shared arrangement, when the reduce
    has a min/max part and its input is a ``Get``."""
    if shared is None or not isinstance(node.input, Get):
        return None
    if not any(a.reduction == "hierarchical" for a in node.aggregates):
        return None
    return shared.input(node.input.table, node.input.columns, node.group_by)


def _render(node: Node, tables: Mapping[str, Schema], fallback=None, shared: SharedSource | None = None,
            rendered: dict | None = None) -> _Step:
    """``node``'s step, rendered once per equal node: ``rendered`` maps the nodes rendered
    so far to their steps (a node that cannot be hashed is keyed by its identity)."""
    if rendered is None:
        rendered = {}
    try:
        key = ("node", node)
        hash(key)
    except TypeError:  # a constant of an unhashable value: shared only when the same object
        key = ("id", id(node))
    step = rendered.get(key)
    if step is None:
        step = rendered[key] = _render_node(node, tables, fallback, shared, rendered)
    return step


def _render_node(node: Node, tables: Mapping[str, Schema], fallback, shared: SharedSource | None,
                 rendered: dict) -> _Step:
    if isinstance(node, Fallback):
        if fallback is None or not node.query:
            raise ValueError(f"the plan holds a Fallback ({node.reason}); rendering it needs fallback= "
                             "and a Fallback with its own query")
        return _Step(node, fallback(node), [])
    if isinstance(node, Get):
        op = MapFilterOp(tables[node.table], select=[Column(s, n) for s, n in node.columns])
        return _Step(node, op, [], node.table)
    if isinstance(node, Constant):
        return _Step(node, ConstantOp(node.schema, node.rows), [])
    if isinstance(node, Variable):  # read in a recursion's iteration, fed by its Iterate
        return _Step(node, MapFilterOp(node.schema), [], variable_key(node.name, node.role))
    if isinstance(node, LetRec):
        return _recursion(node, tables, fallback, shared, rendered)
    ins = [_render(i, tables, fallback, shared, rendered) for i in node.inputs]
    if isinstance(node, GroupSql):
        arranged = shared.input(node.input.table, node.input.columns, node.key) \
            if shared is not None and isinstance(node.input, Get) else None
        return _Step(node, GroupRecompute(ins[0].schema, node.key, node.sql, arranged), ins)
    if isinstance(node, TemporalFilter):
        op = TemporalFilterOp(ins[0].schema, [Bound(c, op, off) for c, off, op in node.bounds], node.select)
        return _Step(node, op, ins)
    if isinstance(node, MapFilter):
        op = MapFilterOp(ins[0].schema, where=[_predicate_operator(p) for p in node.where],
                         select=None if node.select is None else [Column(s, n) for s, n in node.select],
                         consolidated_input=isinstance(node.input, CONSOLIDATING))
    elif isinstance(node, Join):
        schemas = [i.schema for i in ins]
        op = (DeltaJoin(schemas, node.on, shared=shared_inputs(node, shared), nulls_equal=node.nulls_equal)
              if node.kind == "inner"
              else OuterJoin(schemas, node.on, kind=node.kind, shared=shared_inputs(node, shared)))
        step = _Step(node, op, ins)
        if node.residual:
            filt = MapFilterOp(op.schema, where=[_predicate_operator(p) for p in node.residual])
            return _Step(node, filt, [step])
        return step
    elif isinstance(node, SqlMapFilter):  # a FlatMap too: its table function after the delta
        op = SqlMapFilterOp(ins[0].schema, node.where, node.select,
                            lateral=node.lateral if isinstance(node, FlatMap) else "", kinds=node.kinds)
    elif isinstance(node, JsonbCheck):
        op = JsonbCheckOp(ins[0].schema, node.columns)
    elif isinstance(node, ErrorGuard):
        op = ErrorGuardOp(ins[0].schema, node.schema, node.message)
    elif isinstance(node, Reduce):
        own = node.hierarchical_plan != "per group"  # the monotonic and bucketed plans keep their own state
        op = reduce_operator(ins[0].schema, node.group_by, node.aggregates,
                             None if own else _shared_arranged(node, shared), node.monotonic,
                             node.expected_group_size)
    elif isinstance(node, Distinct):
        op = DistinctOp(ins[0].schema)
    elif isinstance(node, Threshold):
        op = ThresholdOp(ins[0].schema)
    elif isinstance(node, Negate):
        op = NegateOp(ins[0].schema)
    elif isinstance(node, Union):
        op = UnionOp([i.schema for i in ins])
    elif isinstance(node, TopK):
        op = TopKOp(ins[0].schema, list(node.group_by), [OrderBy(c, d, n) for c, d, n in node.order_by],
                    limit=node.limit, offset=node.offset)
    else:  # pragma: no cover - every node kind is above
        raise TypeError(f"no operator for {type(node).__name__}")
    return _Step(node, op, ins)


def _recursion(node: LetRec, tables: Mapping[str, Schema], fallback, shared: SharedSource | None,
               rendered: dict) -> _Step:
    """A ``LetRec``'s step: its base rendered into the plan's DAG, its recursive term
    rendered once per iteration by its :class:`~colmz.dataflow.iterate.Iterate` (each a
    ``Pipeline`` of its own, its arrangements its own), the first iteration's shown under
    it in EXPLAIN."""
    base = _render(node.base, tables, fallback, shared, rendered)
    read = {g.table: tables[g.table] for g in _gets(node.step)}
    work = variable_key(node.name, "work")
    all_rows = variable_key(node.name, "all") if node.distinct else None
    inner = {**read, work: node.schema, **({all_rows: node.schema} if all_rows else {})}
    term = Plan(node.step, "", inner)

    def instance() -> Pipeline:
        return Pipeline(term, fallback)

    op = Iterate(node.schema, node.name, node.distinct, read, instance, work, all_rows, node.limit)
    step = _Step(node, op, [base])
    step.shown = [op.instances[0]._root]
    return step


def _gets(node: Node) -> list[Get]:
    """The ``Get`` nodes under ``node`` (a recursion's recursive term: the tables it reads)."""
    out, stack, seen = [], [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Get):
            out.append(n)
        stack.extend(n.inputs)
    return out


class Pipeline:
    """The operators of a plan: ``step(time, deltas)`` steps each once and returns the view's
    delta at ``time`` (``deltas``: table name -> ``Updates`` of that table's columns; a table
    without one has an empty delta). ``schema`` is the view's columns."""

    #: Every operator, each saved and rolled back in place: a step that raises in one
    #: operator leaves all of them as they were.
    ROLLBACK_FIELDS = ("_operators",)

    def __init__(self, p: Plan, fallback=None, shared: SharedSource | None = None):
        self.plan = p
        self.tables = dict(p.tables)
        self._root = _render(p.root, self.tables, fallback, shared)
        self.schema: Schema = self._root.schema
        self._layout()
        # each operator once, root first, in this order always: the durable state's names
        # number the operators by it (colmz.dataflow.state)
        self._operators: list = []
        seen: set[int] = set()
        stack = [self._root]
        while stack:
            s = stack.pop()
            if id(s) in seen:  # a subplan rendered once, reached from its second parent
                continue
            seen.add(id(s))
            self._operators.append(s.op)
            stack.extend(s.inputs)

    @property
    def operators(self) -> list:
        """The operators, root first, each once (for inspection and their work counters)."""
        return list(self._operators)

    @property
    def shared(self) -> list[SharedInput]:
        """The shared arrangements the operators read (``SharedInput`` s, each once)."""
        out: dict[int, SharedInput] = {}
        for op in self._operators:
            for a in _state_of(op):
                if isinstance(a, SharedInput):
                    out.setdefault(id(a), a)
        return list(out.values())

    def steps(self) -> list[tuple[int, Node, object, int, int]]:
        """``(depth, node, operator, rows in, rows out at the last step)`` per rendered node,
        each once, preorder of the plan's tree at its first occurrence (a join's residual
        filter is a step of the join's node, above it): a subplan rendered once is listed
        once, at the depth of its first parent, so its work is counted once. :meth:`tree`
        gives where its other parents refer to it."""
        return [(depth, self._preorder[k].node, self._preorder[k].op, self._preorder[k].rows_in,
                 self._preorder[k].rows_out) for depth, k, _, first in self._tree if first]

    def tree(self) -> list[tuple[int, int, int | None, bool]]:
        """The plan's tree as EXPLAIN prints it: ``(depth, k, shared, first)`` per occurrence
        of a rendered node, preorder, ``k`` its index in :meth:`steps`, ``shared`` its number
        (1, 2, ... in order of first occurrence) when more than one parent reads it, else
        ``None``, and ``first`` whether this is its first occurrence. A later occurrence of a
        shared node is a reference to it (Materialize's ``Get`` of a ``Let`` binding): its
        inputs are not listed again.

        >>> from colmz.dataflow.plan import plan
        >>> import pyarrow as pa
        >>> pipe = render(plan("SELECT k FROM t INTERSECT SELECT k FROM u",
        ...                    {"t": {"k": pa.int64()}, "u": {"k": pa.int64()}}))
        >>> any(shared is not None and not first for _, _, shared, first in pipe.tree())
        True
        """
        return list(self._tree)

    def _layout(self) -> None:
        """The preorder of the rendered steps (each once) and the tree's occurrences."""
        parents: dict[int, int] = {}
        seen: set[int] = set()
        stack = [self._root]
        while stack:
            s = stack.pop()
            if id(s) in seen:
                continue
            seen.add(id(s))
            for i in s.inputs + s.shown:  # each step's edges once: its inputs' parents
                parents[id(i)] = parents.get(id(i), 0) + 1
            stack.extend(s.inputs + s.shown)
        self._preorder: list[_Step] = []
        self._tree: list[tuple[int, int, int | None, bool]] = []
        index: dict[int, int] = {}
        numbers: dict[int, int] = {}
        stack2: list[tuple[_Step, int]] = [(self._root, 0)]
        while stack2:
            s, depth = stack2.pop()
            shared = None
            if parents.get(id(s), 0) > 1:
                shared = numbers.setdefault(id(s), len(numbers) + 1)
            k = index.get(id(s))
            if k is not None:  # a shared step's later parent: a reference, not its subtree again
                self._tree.append((depth, k, shared, False))
                continue
            k = index[id(s)] = len(self._preorder)
            self._preorder.append(s)
            self._tree.append((depth, k, shared, True))
            stack2.extend((i, depth + 1) for i in reversed(s.inputs + s.shown))

    def step(self, time, deltas: Mapping[str, Updates]) -> Updates:
        if not isinstance(deltas, Mapping):
            raise TypeError(f"deltas must be a mapping of table name to Updates, got {type(deltas).__name__}")
        for name in deltas:
            if name not in self.tables:
                raise ValueError(f"deltas names table {name!r}, which the view does not read "
                                 f"(it reads {sorted(self.tables)})")
        with undone_on_error(self):
            return self._root.step(time, deltas, self.tables, {})


def _state_of(op) -> list:
    """The arrangements an operator holds (a join's, a reduce's arranged input, a collated
    reduce's parts')."""
    out = list(op.arrangements.values()) if isinstance(op, (DeltaJoin, OuterJoin)) else []
    if isinstance(op, MinMaxReduce):
        out.extend(op.arrangements.values())
    if isinstance(op, CollatedReduce):
        out.extend(_state_of(op.hierarchical))
    if isinstance(op, GroupRecompute):
        out.extend(op.arrangements)
    return out


def render(p: Plan, fallback=None, shared: SharedSource | None = None) -> Pipeline:
    """The :class:`Pipeline` of plan ``p``; ``ValueError`` naming the reason when ``p`` holds
    a :class:`Fallback` and no ``fallback``. ``fallback(node)`` gives the operator of a
    Fallback leaf with its own query (``step(time) -> Updates`` of its output's change:
    ``colmz.dataflow.maintained`` recomputes the subquery). With ``shared`` (the catalog
    engine's ``SharedSource``), inputs arranged as is use the shared arrangements (module
    docstring); whoever gives it feeds them before each step.

    >>> import colmz, pyarrow as pa
    >>> from colmz.dataflow.plan import plan
    >>> pipe = render(plan("SELECT k, count(*) AS c FROM t GROUP BY k", {"t": {"k": pa.int64()}}))
    >>> pipe.step(1, {"t": colmz.Updates({"k": [1, 1, 2]}, time=[1] * 3, diff=[1] * 3)}).to_pylist()
    [(1, 2, 1, 1), (2, 1, 1, 1)]
    """
    if not isinstance(p, Plan):
        raise TypeError(f"render takes a Plan, got {type(p).__name__}")
    return Pipeline(p, fallback, shared)
