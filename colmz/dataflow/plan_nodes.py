"""The nodes of a view's relational plan (``colmz.dataflow.plan``), frozen.

Design
------
Materialize's ``MirRelationExpr`` kinds as lowered by ``src/compute-types/src/plan/``: each
node has ``schema`` (its output columns under the plan's names), ``inputs``, ``describe()``
(one EXPLAIN line) and ``cost()`` (its cost class: ``incremental O(delta)``, ``per affected
group``, ``per affected partition``, :data:`PER_OUTER_KEY` or ``recompute: <reason>`` for a
:class:`Fallback`).
:func:`fused` makes adjacent map-filter segments one. Nodes never change once built: a plan
is a value, rendered (``colmz.dataflow.render``) into operators that own the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

from colmz.dataflow.minmax import bucketing
from colmz.order import ColumnSpec

__all__ = ["INCREMENTAL", "ITERATED", "PER_GROUP", "PER_OUTER_KEY", "PER_PARTITION", "Aggregate", "BasicReduce", "Comparison", "Constant",
           "Distinct", "ErrorGuard", "Fallback", "FlatMap", "Get", "GroupSql", "IsNullPredicate", "Join", "JsonbCheck", "LetRec", "MapFilter",
           "Negate", "Node",
           "Plan", "Predicate", "Reduce", "Schema", "SqlMapFilter", "SqlTopK", "TemporalFilter", "Threshold", "TopK", "Union",
           "Variable", "Window", "fused", "placeholder", "pushed_below_sql", "renamed", "variable_key", "with_inputs"]

Schema = tuple[ColumnSpec, ...]

INCREMENTAL = "incremental O(delta)"
PER_GROUP = "per affected group"
PER_PARTITION = "per affected partition"
#: A correlated subquery's join with its distinct outer keys under a condition other than an
#: equality with them (Materialize's decorrelation): each change of the subquery's input is
#: compared with every distinct outer key, each new outer key with the whole input.
PER_OUTER_KEY = "per change O(distinct outer keys); per new outer key O(subquery input)"
#: A recursion (:class:`LetRec`): its recursive term's delta rules once per iteration the
#: change reaches (a change of a table the term reads: every iteration).
ITERATED = "incremental O(delta) per iteration reached"


# ---------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class Comparison:
    """``column op value``, ``value`` a constant of the column's type (native)."""

    column: str
    op: str
    value: object

    def __str__(self) -> str:
        return f"{self.column} {self.op} {self.value!r}"


@dataclass(frozen=True)
class IsNullPredicate:
    """``column IS [NOT] NULL`` (native)."""

    column: str
    negated: bool = False

    def __str__(self) -> str:
        return f"{self.column} IS {'NOT ' if self.negated else ''}NULL"


Predicate = Comparison | IsNullPredicate


@dataclass(frozen=True)
class Node:
    """A plan node: ``schema`` is its output's columns."""

    schema: Schema

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()

    def describe(self) -> str:
        raise NotImplementedError  # every node kind below defines it

    def cost(self) -> str:
        return INCREMENTAL


@dataclass(frozen=True)
class Get(Node):
    """Table ``table`` read as ``alias``: its columns renamed ``(source, name)``."""

    table: str = ""
    alias: str = ""
    columns: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return f"Get {self.table} AS {self.alias} ({', '.join(f'{s} AS {n}' for s, n in self.columns)})"


@dataclass(frozen=True)
class MapFilter(Node):
    """``where`` (native predicates, ANDed) then ``select`` as ``(source, name)`` pairs."""

    input: Node | None = None
    where: tuple[Predicate, ...] = ()
    select: tuple[tuple[str, str], ...] | None = None

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        parts = []
        if self.where:
            parts.append(f"where=[{' AND '.join(str(p) for p in self.where)}]")
        if self.select is not None:
            parts.append(f"select=[{', '.join(s if s == n else f'{s} AS {n}' for s, n in self.select)}]")
        return "MapFilter " + " ".join(parts)


@dataclass(frozen=True)
class Join(Node):
    """``kind`` ``inner`` (any number of inputs), ``left``, ``right`` or ``full`` (two);
    ``on`` the equi keys; ``residual`` predicates applied after an inner join.
    ``nulls_equal``: a NULL key matches a NULL (Materialize's MIR join equality, not SQL's
    ``=``): the semijoin on whole rows that finds an outer join's matched rows."""

    inputs_: tuple[Node, ...] = ()
    kind: str = "inner"
    on: tuple[tuple[str, str], ...] = ()
    residual: tuple[Predicate, ...] = ()
    nulls_equal: bool = False
    #: Its cost class where the planner knows better than ``incremental O(delta)``: a join
    #: with a correlated subquery's distinct outer keys and no equi key to them
    #: (:data:`PER_OUTER_KEY`); ``""``: the default.
    cost_class: str = ""

    @property
    def inputs(self):
        return self.inputs_

    def cost(self) -> str:
        return self.cost_class or INCREMENTAL

    def describe(self) -> str:
        keys = ", ".join(f"{a} = {b}" for a, b in self.on)
        res = f" residual=[{' AND '.join(map(str, self.residual))}]" if self.residual else ""
        if self.nulls_equal:
            return f"Join {self.kind} on=[{keys}] NULLs equal (semijoin on whole rows, inputs arranged by them)"
        return f"Join {self.kind} on=[{keys}]{res} (delta join, inputs arranged by key)"


@dataclass(frozen=True)
class Aggregate:
    """One aggregate: output ``name``, ``function``, input ``column`` (``None``: ``count(*)``)
    and its reduction type (``accumulable``, ``hierarchical``, ``basic``)."""

    name: str
    function: str
    column: str | None
    reduction: str

    def __str__(self) -> str:
        return f"{self.name}: {self.function}({self.column or '*'}) {self.reduction}"


@dataclass(frozen=True)
class Reduce(Node):
    """A native reduce; ``monotonic``: its input is append-only (proved by the planner), so
    its min/max take Materialize's monotonic plan; else ``expected_group_size`` (the query's
    ``AGGREGATE INPUT GROUP SIZE`` hint) takes the bucketed plan with stages for groups of
    that size; neither: the per-group plan (``colmz.dataflow.minmax``)."""

    input: Node | None = None
    group_by: tuple[str, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    monotonic: bool = False
    expected_group_size: int | None = None

    @property
    def inputs(self):
        return (self.input,)

    @property
    def hierarchical_plan(self) -> str | None:
        """The min/max part's plan (``MinMaxReduce.plan``), ``None`` without min/max."""
        if not any(a.reduction == "hierarchical" for a in self.aggregates):
            return None
        if self.monotonic:
            return "monotonic"
        return "per group" if self.expected_group_size is None else "bucketed"

    def describe(self) -> str:
        kinds = {a.reduction for a in self.aggregates}
        how = " (collation of accumulable and hierarchical)" if len(kinds) > 1 else ""
        hint = "" if self.expected_group_size is None else f"AGGREGATE INPUT GROUP SIZE = {self.expected_group_size}"
        plan = self.hierarchical_plan
        if plan == "monotonic":
            how += " (monotonic input: hierarchical plan monotonic" + (f"; {hint} not needed)" if hint else ")")
        elif plan == "bucketed":
            stages = "/".join(map(str, bucketing(self.expected_group_size))) or "one stage"
            how += f" ({hint}: hierarchical plan bucketed {stages})"
        elif hint:
            how += f" ({hint}: no min/max, no effect)"
        return f"Reduce group_by=[{', '.join(self.group_by)}] aggregates=[{', '.join(map(str, self.aggregates))}]{how}"

    def cost(self) -> str:
        return INCREMENTAL if all(a.reduction == "accumulable" for a in self.aggregates) else PER_GROUP


@dataclass(frozen=True)
class Distinct(Node):
    input: Node | None = None

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return "Distinct"


@dataclass(frozen=True)
class Threshold(Node):
    input: Node | None = None

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return "Threshold"


@dataclass(frozen=True)
class TopK(Node):
    """``order_by`` as ``(column, descending, nulls_first)``, ``limit`` (``None``: none),
    ``offset``, per group of ``group_by`` (``DISTINCT ON``; none: one global top-k)."""

    input: Node | None = None
    order_by: tuple[tuple[str, bool, bool], ...] = ()
    limit: int | None = None
    offset: int = 0
    group_by: tuple[str, ...] = ()
    #: The query's ``DISTINCT ON INPUT GROUP SIZE`` / ``LIMIT INPUT GROUP SIZE`` hint as
    #: ``(name, value)``: recorded, not used -- colmz's top-k has one plan, per affected group
    #: (Materialize's hint sizes its bucketed top-k's stages, which colmz has not).
    hint: tuple[str, int] | None = None

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        keys = ", ".join(f"{c}{' DESC' if d else ''} NULLS {'FIRST' if n else 'LAST'}" for c, d, n in self.order_by)
        group = f"group_by=[{', '.join(self.group_by)}] " if self.group_by else ""
        hint = "" if self.hint is None else (f" ({self.hint[0]} = {self.hint[1]} recorded: colmz's top-k has one "
                                             "plan, per affected group)")
        return f"TopK {group}order_by=[{keys}] limit={self.limit} offset={self.offset}{hint}"

    def cost(self) -> str:
        return PER_GROUP


@dataclass(frozen=True)
class Union(Node):
    inputs_: tuple[Node, ...] = ()

    @property
    def inputs(self):
        return self.inputs_

    def describe(self) -> str:
        return "Union"


@dataclass(frozen=True)
class Negate(Node):
    input: Node | None = None

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return "Negate"


@dataclass(frozen=True)
class SqlMapFilter(Node):
    """A Map/Filter segment whose expressions need SQL (:mod:`colmz.dataflow.sqlmap`):
    ``where`` predicates and ``select`` ``(text, name)`` items, the user's PostgreSQL text
    with each column reference replaced by the placeholder of its input column; ``shown``
    the user's text of each, for EXPLAIN; ``kinds`` the kind (``jsonb``, ``json``, ``text``,
    ``None``: not told) of each input column, by which PostgreSQL's jsonb rules of a column's
    type apply to the segment (:mod:`colmz.sql.jsonbcols`; empty: none told)."""

    input: Node | None = None
    where: tuple[str, ...] = ()
    select: tuple[tuple[str, str], ...] | None = None
    shown: tuple[str, ...] = ()
    kinds: tuple[str | None, ...] = ()

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"MapFilter via SQL [{', '.join(self.shown)}] (one DuckDB call per commit)"


@dataclass(frozen=True)
class JsonbCheck(Node):
    """The input passed on, the jsonb columns at positions ``columns`` checked
    (:mod:`colmz.dataflow.jsonbcheck`): a DISTINCT, GROUP BY, set operation or join key above
    compares them as text, jsonb's equality only when each value's text is its only one
    (:func:`colmz.sql.jsonb.jsonb_plain`); another value is refused, as the query path
    refuses it. ``shown`` says each check, for EXPLAIN."""

    input: Node | None = None
    columns: tuple[int, ...] = ()
    shown: tuple[str, ...] = ()

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"Check [{', '.join(self.shown)}] (no DuckDB call)"


@dataclass(frozen=True)
class ErrorGuard(Node):
    """An error of the view, ``message``, while ``input`` holds a row
    (:mod:`colmz.dataflow.guard`); it outputs no row (``schema`` the columns of the ``Union``
    it stands in). ``shown`` says the error's cause, for EXPLAIN."""

    input: Node | None = None
    message: str = ""
    shown: str = ""

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"ErrorGuard [{self.shown}] (an error of the view while its input holds a row; no output row)"


@dataclass(frozen=True)
class FlatMap(SqlMapFilter):
    """A table function read per input row (Materialize's ``FlatMap``): ``lateral`` the
    SQL text following the input in ``FROM`` (the function's call, arguments the row's
    columns as placeholders or constants), ``select`` over the input's columns and the
    function's. Linear: each output row keeps its input row's time and diff."""

    lateral: str = ""

    def describe(self) -> str:
        return f"FlatMap via SQL [{', '.join(self.shown)}] (per row, one DuckDB call per commit)"


@dataclass(frozen=True)
class Fallback(Node):
    """A subtree (``text``, the query block) not maintained incrementally, and why.

    ``query`` is the subtree's runnable query (a ``FROM`` subquery's text) when the planner
    was given ``subquery_schema`` to type it: such a Fallback has its output ``schema`` and
    renders (``render(..., fallback=)``) as that query recomputed; ``""`` otherwise."""

    text: str = ""
    reason: str = ""
    query: str = ""

    def describe(self) -> str:
        return f"Fallback {self.text!r}"

    def cost(self) -> str:
        return f"recompute: {self.reason}"


# ---- recursion (WITH RECURSIVE)

def variable_key(name: str, role: str) -> str:
    """The name under which a rendered recursive term reads its :class:`Variable` ``name``
    of ``role`` (``"work"`` or ``"all"``): a name no table has (it starts with a NUL).

    >>> variable_key("c", "work")
    '\\x00c:work'
    """
    return f"\x00{name}:{role}"


@dataclass(frozen=True)
class Variable(Node):
    """A recursive CTE read inside its own recursive term (Materialize's ``Get`` of a
    ``LetRec`` binding): ``role`` ``"work"`` is the working table (the rows the previous
    iteration produced), ``"all"`` the rows every iteration so far produced (read by a
    ``UNION`` recursion to drop rows already produced)."""

    name: str = ""
    role: str = "work"

    def describe(self) -> str:
        what = "rows of the previous iteration" if self.role == "work" else "rows produced so far"
        return f"Variable {self.name} ({what})"


@dataclass(frozen=True)
class LetRec(Node):
    """``WITH RECURSIVE name AS (base UNION [ALL] step)`` (Materialize's ``LetRec``),
    iterated to its fixed point at every commit (:mod:`colmz.dataflow.iterate`): ``base``
    the non-recursive term, ``step`` the recursive term reading the working table as
    ``Variable(name, "work")``; ``distinct`` (``UNION``): ``base`` is distinct and ``step``
    drops the rows produced so far (``Variable(name, "all")``), as PostgreSQL evaluates it.
    At most ``limit`` iterations (:data:`colmz.dataflow.iterate.RECURSION_LIMIT`). Its
    inputs are ``(base, step)``; the step is rendered once per iteration, never as an
    input of the rest of the plan."""

    base: Node | None = None
    step: Node | None = None
    name: str = ""
    distinct: bool = False
    limit: int = 0

    @property
    def inputs(self):
        return (self.base, self.step)

    def describe(self) -> str:
        how = "UNION" if self.distinct else "UNION ALL"
        return (f"LetRec {self.name} ({how}; base, then the recursive term iterated to a fixed point per commit, "
                f"each iteration's state its own, at most {self.limit} iterations)")

    def cost(self) -> str:
        return ITERATED


# ---- node kinds recomputed per affected group by DuckDB, constants, temporal filters

@dataclass(frozen=True)
class Constant(Node):
    """A constant relation (``SELECT 1, 'a'`` without ``FROM``): its ``rows``, each once."""

    rows: tuple[tuple, ...] = ()

    def describe(self) -> str:
        return f"Constant rows={list(self.rows)}"


@dataclass(frozen=True)
class GroupSql(Node):
    """A group-local query recomputed by DuckDB over the groups a change touches
    (:class:`colmz.dataflow.recompute.GroupRecompute`): ``key`` the input's group columns,
    ``items`` the ``(name, user text)`` computed, ``sql`` the translated query reading the
    input as ``input_rows``."""

    input: Node | None = None
    key: tuple[str, ...] = ()
    items: tuple[tuple[str, str], ...] = ()
    sql: str = ""

    @property
    def inputs(self):
        return (self.input,)

    def listed(self) -> str:
        return ", ".join(f"{n}: {t}" for n, t in self.items)

    def cost(self) -> str:
        return PER_GROUP


@dataclass(frozen=True)
class BasicReduce(GroupSql):
    """A reduce with a *basic* aggregate (``string_agg``, ``DISTINCT`` or ``FILTER``
    aggregates, any expression over aggregates, a ``HAVING`` needing SQL): Materialize
    re-reduces the affected keys; here DuckDB does, per affected group."""

    having: str = ""

    def describe(self) -> str:
        having = f" having=[{self.having}]" if self.having else ""
        return (f"Reduce group_by=[{', '.join(self.key)}] aggregates=[{self.listed()}] basic{having} "
                "(recomputed per affected group in DuckDB)")


@dataclass(frozen=True)
class Window(GroupSql):
    """Window functions (and the select items around them) recomputed per affected
    partition: ``key`` the columns every window partitions by (none: one partition)."""

    def describe(self) -> str:
        return (f"Window partition_by=[{', '.join(self.key)}] items=[{self.listed()}] "
                "(recomputed per affected partition in DuckDB)")

    def cost(self) -> str:
        return PER_PARTITION


@dataclass(frozen=True)
class SqlTopK(GroupSql):
    """``ORDER BY ... LIMIT`` (or ``DISTINCT ON``) whose order needs SQL (text by its
    collation): the affected groups' windows recomputed by DuckDB."""

    def describe(self) -> str:
        return f"TopK group_by=[{', '.join(self.key)}] {self.items[0][1]} (recomputed per affected group in DuckDB)"


@dataclass(frozen=True)
class TemporalFilter(Node):
    """``mz_now()`` compared with a column: each row is in the output from its ``lower``
    bound to its ``upper`` bound (exclusive), as updates at the times the predicate flips
    (Materialize's ``MfpPlan`` temporal bounds); ``bounds`` as ``(column, offset, op)``
    meaning ``mz_now() op column + offset``; then ``select``."""

    input: Node | None = None
    bounds: tuple[tuple[str, int, str], ...] = ()
    select: tuple[tuple[str, str], ...] = ()

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        preds = " AND ".join(f"mz_now() {op} {c}{f' + {o}' if o > 0 else f' - {-o}' if o < 0 else ''}"
                             for c, o, op in self.bounds)
        sel = ", ".join(s if s == n else f"{s} AS {n}" for s, n in self.select)
        return f"TemporalFilter where=[{preds}] select=[{sel}] (updates at the times the predicate flips)"


@dataclass(frozen=True)
class Plan:
    """A view's plan: the ``root`` node, the query ``text`` and the ``tables`` it reads.

    ``names`` are the view's output column names (the root's schema's names).
    """

    root: Node
    text: str
    tables: Mapping[str, Schema] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.root.schema]

    def fallbacks(self) -> list[Fallback]:
        """Every Fallback node, preorder."""
        out = []
        stack = [self.root]
        while stack:
            n = stack.pop()
            if isinstance(n, Fallback):
                out.append(n)
            stack.extend(reversed(n.inputs))
        return out

    @property
    def incremental(self) -> bool:
        """Whether no node is a Fallback."""
        return not self.fallbacks()

    def explain(self) -> str:
        """One line per node, children indented, each with its strategy and cost class."""
        lines: list[str] = []

        def walk(n: Node, depth: int) -> None:
            lines.append(f"{'  ' * depth}{n.describe()}  -- {n.cost()}")
            for c in n.inputs:
                walk(c, depth + 1)

        walk(self.root, 0)
        return "\n".join(lines)


def placeholder(i: int) -> str:
    """The SQL name of a segment's ``i``-th input column in its expressions' text
    (:class:`SqlMapFilter`'s ``where`` and ``select``).

    >>> placeholder(3)
    '"colmz_c3"'
    """
    return f'"colmz_c{i}"'


def renamed(p: Predicate, source: dict[str, str]) -> Predicate:
    if isinstance(p, Comparison):
        return Comparison(source[p.column], p.op, p.value)
    return IsNullPredicate(source[p.column], p.negated)


def fused(schema: Schema, input: Node, where: tuple[Predicate, ...], select) -> MapFilter:
    """A :class:`MapFilter` node over ``input``, fused with ``input`` when it is one: one
    segment filters then projects, so ``select(where2(select1(where1(X))))`` is
    ``select'(where1 AND where2'(X))`` with ``where2``'s and ``select``'s columns read
    through ``select1`` (Materialize fuses MapFilterProject the same way)."""
    where = tuple(where)
    select = None if select is None else tuple(select)
    if isinstance(input, MapFilter):
        inner = input
        if inner.select is not None:
            source = {n: s for s, n in inner.select}
            where = tuple(renamed(p, source) for p in where)
            select = inner.select if select is None else tuple((source[s], n) for s, n in select)
        below, where = pushed_below_sql(inner.input, where)
        return MapFilter(schema, below, inner.where + where, select)
    input, where = pushed_below_sql(input, where)
    return MapFilter(schema, input, where, select)


def pushed_below_sql(input: Node, where: tuple[Predicate, ...]) -> tuple[Node, tuple[Predicate, ...]]:
    """``(input', where')``: the native predicates of ``where`` on columns a SQL segment
    ``input`` passes through unchanged moved below it, the rest left. PostgreSQL evaluates a
    subquery's select list only for the rows the outer ``WHERE`` keeps (the planner pulls the
    subquery up), so ``SELECT ... FROM (SELECT k, r * r AS y FROM t) u WHERE k <> 4`` never
    computes ``r * r`` of the row it drops -- and raises no overflow for it. The filter is
    native (it cannot raise) and commutes with the segment's own predicates."""
    if not where or type(input) is not SqlMapFilter or input.select is None:
        return input, where
    names = {placeholder(i): c.name for i, c in enumerate(input.input.schema)}
    through = {n: names[text] for text, n in input.select if text in names}
    push = tuple(p for p in where if p.column in through)
    if not push:
        return input, where
    below = fused(input.input.schema, input.input, tuple(renamed(p, through) for p in push), None)
    kept = tuple(p for p in where if p.column not in through)
    return replace(input, input=below), kept


def with_inputs(node: Node, inputs) -> Node:
    """``node`` with its inputs (``node.inputs``, in order) replaced by ``inputs``; ``node``
    itself when each is the same object."""
    old = node.inputs
    if all(a is b for a, b in zip(old, inputs)):
        return node
    changes = {}
    for f in fields(node):
        v = getattr(node, f.name)
        if isinstance(v, Node):
            changes[f.name] = inputs[[id(i) for i in old].index(id(v))]
        elif isinstance(v, tuple) and v and all(isinstance(x, Node) for x in v):
            changes[f.name] = tuple(inputs[[id(i) for i in old].index(id(x))] for x in v)
    return replace(node, **changes)
