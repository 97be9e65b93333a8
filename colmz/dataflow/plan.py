"""The relational plan of a view's query, and the pipeline of operators it renders to.

Design
------
:func:`plan` reads a query through DuckDB's own parse tree (:func:`colmz.sql.tree.parse_tree`),
binds its column names against the schemas it is given (Materialize's name resolution: ``FROM``
scopes with aliases, qualified and unqualified columns, ``*`` and ``t.*``, subqueries in
``FROM`` as scopes of their output columns) and builds a tree of frozen nodes -- Materialize's
``MirRelationExpr`` kinds lowered the way ``src/compute-types/src/plan/`` lowers them:

* :class:`Get` -- a table's columns under the plan's own names (``alias.column``, so the inputs
  of a join never share a name);
* :class:`MapFilter` -- a fused segment: native predicates ANDed, then a projection;
* :class:`SqlMapFilter` -- a Map/Filter segment needing SQL: select items and ``WHERE`` (and
  inner-join ``ON``) conjuncts the native predicates cannot evaluate, the user's text with
  column references as placeholders, translated and run by DuckDB on each delta
  (:mod:`colmz.dataflow.sqlmap`), unless it calls a volatile function or a ``WHERE``
  conjunct is not boolean (PostgreSQL refuses one; DuckDB would read it); select items over
  a native reduce's groups and aggregates are such a segment over the reduce's output when
  those aggregates' native types are PostgreSQL's (counts, ``min``/``max``, booleans, sums
  and variances of float8; ``sum(bigint)`` is numeric there), else a :class:`BasicReduce`;
* :class:`FlatMap` -- a table function (or ``VALUES`` list) read per row of its input, one
  SQL segment whose ``FROM`` joins it laterally to the delta;
* :class:`Join` -- ``kind`` (inner, left, right, full), equi keys, residual predicates, and
  ``nulls_equal`` for a semijoin on whole rows (a NULL matching a NULL). Inner
  joins are flattened into one multiway join whose keys are the ``ON`` and ``WHERE``
  equalities between inputs (so ``FROM t, u WHERE t.k = u.k`` is an equi-join); their other
  native conjuncts each read one input and are pushed below the join onto it (so the
  residual is empty today: it is where predicates over several inputs will go);
* :class:`Reduce` -- ``GROUP BY`` columns and aggregates, each classified as
  ``src/compute-types/src/plan/reduce.rs`` does: *accumulable* (``count``, ``sum``, ``avg``,
  ``bool_and/or``, variances), *hierarchical* (``min``, ``max``) or *basic* (the rest);
* :class:`Distinct`, :class:`Threshold`, :class:`TopK` (per group for ``DISTINCT ON``),
  :class:`Union`, :class:`Negate`, :class:`Constant` (``SELECT`` of literals);
* :class:`GroupSql` nodes -- a group-local query DuckDB recomputes over the groups a change
  touches (:class:`colmz.dataflow.recompute.GroupRecompute`, scalars as the user's text
  through ``colmz.sql.translate``): :class:`BasicReduce` (Materialize's *basic* aggregates:
  ``string_agg``, ``DISTINCT`` / ``FILTER`` / ordered aggregates, expressions inside
  aggregates or over non-native ones, a ``HAVING`` needing SQL, ``min``/``max`` of text), :class:`Window` (window
  functions and the select items around them, per affected partition: the columns every
  window's ``PARTITION BY`` names), :class:`SqlTopK` (an order reading text: the
  collation's order is SQL's);
* :class:`TemporalFilter` -- ``mz_now()`` compared with an integer column plus a constant:
  updates at the times the predicate flips, at the top of the plan (its future updates are
  held by the view sink's ``Correction``);
* :class:`Fallback` -- a subtree not yet maintained incrementally, with the reason naming the
  construct. A plan is never a wrong answer: what is not in the incremental subset is a
  Fallback, never an approximation. A ``FROM`` subquery that falls back is a Fallback leaf
  of its own when ``plan`` is given ``subquery_schema`` to type it (``Fallback.query``):
  the query around it is planned, and the leaf renders as its query recomputed. So is a
  set operation's branch that falls back, where its text alone is known (no ``WITH`` in
  scope): its change is fed to the set operator.

Lowering (Materialize's ``src/sql/src/plan/lowering.rs``): ``WITH`` is a ``Let`` planned at
each reference (a CTE sees the ones before it, ``WITH c(x, y)`` renames its columns; ``WITH
RECURSIVE`` falls back: its fixed point, Materialize's ``LetRec``, is not iterated);
window functions over a ``GROUP BY`` are a :class:`Window` over the reduce
(:meth:`_Planner.over_groups`; a ``HAVING`` holding a subquery, the same: a
``WHERE`` over the grouped rows); an ``ORDER BY`` without ``LIMIT`` is dropped, the
tables a subquery in it reads still inputs (:meth:`_Planner.dropped_order`); ``x IN
(subquery)`` and a correlated ``EXISTS`` (equalities of inner and outer columns, other
conditions local to the subquery) are semijoins -- a join with the subquery's distinct keys,
projected back -- and ``NOT EXISTS`` is the input minus its semijoin (a NULL key matches
nothing, so its row stays); ``x NOT IN (subquery)`` keeps PostgreSQL's NULLs: every row
when the subquery is empty, else the non-NULL rows without a match while the subquery holds
no NULL (two global counts crossed in; a change of the subquery's counts re-reads the
outer input); an uncorrelated scalar subquery of one aggregate in the select list is a cross
join with that one-row relation (so is one in a ``SELECT`` without ``FROM``, crossed with the
constant row); correlated by equalities of columns it is a left join with the subquery
grouped by its inner keys (``count`` coalesced to 0, the aggregate over no rows); a
``LATERAL`` subquery correlated by equalities of columns is joined on its inner keys, which
it carries (into its ``GROUP BY``, its top-k's groups), a global aggregate left-joined as
one row per outer row, and one without ``FROM`` is a Map over the left side
(:meth:`_Planner.lateral`); a scalar subquery of these shapes inside a ``WHERE`` condition is
such a column joined in before the condition (a SQL segment reading it) and projected away
after -- when the aggregates under it are typed as PostgreSQL's; ``x IN (subquery)`` as a
select item's value is a left join with the subquery's distinct values crossed with its
global counts of rows and of non-NULL values (PostgreSQL's NULLs: :meth:`_Planner.in_value`).
An outer join whose ``ON`` holds conditions other than equalities of a left and a right
column is the pairs (the inner join on the equalities filtered by those conditions) plus each
preserved side's rows matching no pair, found by a semijoin on whole rows with NULLs equal
and padded with NULLs (:meth:`_Planner.outer_residual`); a correlated ``[NOT] EXISTS`` with
such conditions is the same pairs and semijoin (:meth:`_Planner.semi_residual`). A table
function in ``FROM`` (``generate_series``, ``unnest``) or a ``LATERAL (VALUES ...)`` list
over the left side's columns is a :class:`FlatMap` (:meth:`_Planner.flat_map`). ``x op
ANY|ALL (subquery)`` as a value is a cross join with the subquery's bound and counts
(:meth:`_Planner.quantified_value`; an integer literal ``x`` with any comparison, ``IN`` and
``NOT IN`` too, with counts of the rows deciding it: :meth:`_Planner.constant_quantified`);
``(a, b) IN (subquery)`` in ``WHERE`` is a semijoin on every column; an uncorrelated scalar subquery not one row by its shape
is its rows or a NULL, guarded by a count whose filter raises PostgreSQL's error past one
row (:meth:`_Planner.at_most_one`).
``NATURAL JOIN`` is ``USING`` the columns both sides show under one name;
``JOIN ... USING`` equates the columns (inner and left
joins: the right side's column reachable qualified only, ``*`` listing it once, first; right
and full joins: the merged column ``COALESCE(l.c, r.c)`` computed after the join); an
outer join's ``ON`` condition reading only its NULL-padded side filters that side first;
inputs not connected by equalities are a cross join; ``INTERSECT [ALL]`` is ``a − max(a −
b, 0)``; ``GROUPING SETS`` / ``ROLLUP`` / ``CUBE`` are a Union of one native reduce per
grouping set over the same input, the keys absent from a set NULL and ``GROUPING()`` a
constant per branch (:meth:`_Planner.grouping_union`).

The incremental subset: the above, with ``WHERE`` and ``HAVING`` conjunctions of a column
compared with a constant of its type (an integer column with a numeric constant as
PostgreSQL compares them), ``IS [NOT] NULL``, ``BETWEEN`` constants and a boolean column as
a condition (what :class:`colmz.dataflow.MapFilter` evaluates natively), other scalars in a
:class:`SqlMapFilter`;
``GROUP BY`` columns (and grouping sets) with the native aggregates (``count``, ``sum``, ``avg``,
``bool_and``, ``bool_or``, the variances, ``min``, ``max``; both reduction types in one
query as a :class:`~colmz.dataflow.collate.Collation` of two reduces, as Materialize does)
or any aggregate DuckDB runs (a :class:`BasicReduce`); ``DISTINCT [ON]``; ``ORDER BY``
output columns with ``LIMIT``/``OFFSET`` (``ORDER BY`` without them orders nothing a view
keeps and is dropped, as Materialize does); ``UNION [ALL]``, ``EXCEPT [ALL]``,
``INTERSECT [ALL]``; column projection and renaming. Every other construct -- ``GROUP BY``
expressions, grouping sets with a ``HAVING``
reading a key, ``GROUPING()`` inside an expression, subqueries inside expressions other than
the above, scalar subqueries correlated other than by equalities or of other than one
aggregate, ``LATERAL`` subqueries correlated otherwise, ``NATURAL`` joins, ``WITH RECURSIVE``, volatile functions
(``random()``, ``now()``), a temporal filter below a reduce, ... -- is a :class:`Fallback`
whose reason names it.

Adjacent MapFilter nodes are fused into one segment (:func:`fused`). ``Plan.explain()``
prints one line per node, children indented, with its cost class: ``incremental O(delta)``
(linear segments, joins, accumulable reduces, distinct, temporal filters), ``per affected
group`` (reduces with ``min``/``max`` or basic aggregates, top-k), ``per affected
partition`` (windows) or ``recompute: <reason>`` (a Fallback). The nodes are in
``colmz.dataflow.plan_nodes``, the rendering in ``colmz.dataflow.render``; this module
binds and exports them all.

Names: a binding error (an unknown table or column, an ambiguous column) raises
:class:`PlanError` naming it; an output column's name is its alias, its column's name or its
text, made unique with ``_2``, ``_3`` suffixes. Semantics are PostgreSQL's (``ORDER BY``'s
default NULLs order is last ascending, first descending).

:func:`render` builds the operators of a plan without Fallback and returns a
:class:`Pipeline`: ``step(time, deltas)`` steps every operator once for ``time`` given each
table's delta (a table without one has an empty delta) and returns the view's delta.
A Fallback renders only as a leaf with its own query, through ``render(..., fallback=)``
(``colmz.dataflow.maintained`` recomputes it); otherwise :func:`render` refuses the plan with
the Fallback's reason. A view with a :class:`TemporalFilter` must be stepped at every time
(an empty delta when nothing changed) for its sink to write the flips that come due.

>>> import pyarrow as pa
>>> p = plan("SELECT k, sum(v) AS s FROM t WHERE v >= 0 GROUP BY k", {"t": {"k": pa.int64(), "v": pa.int64()}})
>>> print(p.explain())
MapFilter select=[t.k AS k, agg1 AS s]  -- incremental O(delta)
  Reduce group_by=[t.k] aggregates=[agg1: sum(t.v) accumulable]  -- incremental O(delta)
    MapFilter where=[t.v >= 0]  -- incremental O(delta)
      Get t AS t (k AS t.k, v AS t.v)  -- incremental O(delta)
"""

from __future__ import annotations

import dataclasses
import decimal
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from colmz.dataflow.plan_nodes import (
    INCREMENTAL,
    PER_GROUP,
    PER_PARTITION,
    Aggregate,
    BasicReduce,
    Comparison,
    Constant,
    Distinct,
    Fallback,
    FlatMap,
    Get,
    GroupSql,
    IsNullPredicate,
    Join,
    MapFilter,
    Negate,
    Node,
    Plan,
    Predicate,
    Reduce,
    Schema,
    SqlMapFilter,
    SqlTopK,
    TemporalFilter,
    Threshold,
    TopK,
    Union,
    Window,
    fused,
)
from colmz.dataflow.recompute import INPUT_RELATION, GroupRecompute, output_schema
from colmz.dataflow.render import (
    ACCUMULABLE,
    HIERARCHICAL,
    CollatedReduce,
    Pipeline,
    reduce_operator,
    render,
)
from colmz.dataflow.sqlmap import SqlMapFilter as SqlMapFilterOp
from colmz.dataflow.sqlmap import placeholder
from colmz.dataflow.step import as_schema
from colmz.order import ColumnSpec
from colmz.sql.build import identifier
from colmz.sql.errors import SQLError
from colmz.sql.hints import select_offset, strip_hints
from colmz.sql.tokens import closing, tokenize
from colmz.sql.tree import Expression, Order, Query, Table, parse_tree
from colmz.updates import SchemaError, widen

__all__ = ["INCREMENTAL", "PER_GROUP", "PER_PARTITION", "Aggregate", "BasicReduce", "CollatedReduce", "Comparison",
           "Constant", "Distinct", "Fallback", "Get", "GroupSql", "IsNullPredicate", "Join", "MapFilter", "Negate",
           "Node", "Pipeline", "Plan", "PlanError", "Predicate", "Reduce", "SqlMapFilter", "SqlTopK",
           "TemporalFilter", "Threshold",
           "TopK", "Union", "Window", "fused", "monotonic_plan", "plan", "render"]


class PlanError(ValueError):
    """The query does not bind against the schemas (an unknown table or column, an ambiguous
    column, a select list of the wrong width): an error in the query, not a Fallback."""


class _Unsupported(Exception):
    """Raised inside the planner: the construct is outside the incremental subset."""


# ---------------------------------------------------------------------------- binding

_COMPARE_OPS = {"COMPARE_EQUAL": "=", "COMPARE_NOTEQUAL": "<>", "COMPARE_LESSTHAN": "<",
                "COMPARE_GREATERTHAN": ">", "COMPARE_LESSTHANOREQUALTO": "<=",
                "COMPARE_GREATERTHANOREQUALTO": ">="}
#: Aggregates an ``ORDER BY`` subquery dropped with it may compute: none raises.
_SAFE_ORDER_AGGREGATES = frozenset({"count", "count_star", "sum", "avg", "min", "max"})
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


@functools.cache
def aggregate_names() -> frozenset[str]:
    """DuckDB's aggregate function names (``duckdb_functions()``), with ``count_star``: a
    call of one of these makes a query aggregate."""
    from colmz.sql.run import session

    cur = session(external_access=False)
    try:
        rows = cur.execute("SELECT DISTINCT function_name FROM duckdb_functions() "
                           "WHERE function_type = 'aggregate'").fetchall()
    finally:
        cur.close()
    return frozenset(r[0] for r in rows) | {"count_star"} | set(ACCUMULABLE) | set(HIERARCHICAL)


def _is_aggregate(e: Expression) -> bool:
    return e.cls == "FUNCTION" and len(e.name) >= 1 and e.name[-1] in aggregate_names()


@dataclass
class _Source:
    """One ``FROM`` item in scope: its alias and its columns (name -> plan name, type);
    ``hidden`` columns are reachable qualified only (the right side's ``USING`` columns)."""

    alias: str
    columns: dict[str, tuple[str, pa.DataType]]
    hidden: set = field(default_factory=set)


class _Scope:
    def __init__(self, sources: list[_Source]):
        self.sources = sources

    def column(self, e: Expression) -> str:
        parts = e.name
        try:
            return self.exact(parts)
        except PlanError:
            # DuckDB's tree does not tell "K" from K: a name found only ignoring case may be
            # an unquoted identifier PostgreSQL folds to lower case -- not decided here.
            folded = tuple(p.lower() for p in parts)
            if folded != parts:
                try:
                    self.exact(folded)
                except PlanError:
                    pass
                else:
                    raise _Unsupported(f"column reference {'.'.join(parts)!r} matched only ignoring case "
                                       "(quoted and unquoted identifiers are not told apart)") from None
            raise

    def exact(self, parts: tuple[str, ...]) -> str:
        if len(parts) == 1:
            hits = [s.columns[parts[0]][0] for s in self.sources
                    if parts[0] in s.columns and parts[0] not in s.hidden]
            if len(hits) > 1:
                raise PlanError(f"column reference {parts[0]!r} is ambiguous: it is a column of "
                                f"{[s.alias for s in self.sources if parts[0] in s.columns]}")
            if not hits:
                raise PlanError(f"column {parts[0]!r} does not exist in "
                                f"{[s.alias for s in self.sources]}")
            return hits[0]
        if len(parts) == 2:
            for s in self.sources:
                if s.alias == parts[0]:
                    if parts[1] not in s.columns:
                        raise PlanError(f"column {parts[1]!r} does not exist in {parts[0]!r}")
                    return s.columns[parts[1]][0]
            raise PlanError(f"missing FROM-clause entry for table {parts[0]!r} (in {'.'.join(parts)})")
        raise _Unsupported(f"column reference {'.'.join(parts)!r} with a schema or catalog")

    def star(self, relation: str) -> list[tuple[str, str]]:
        """``(name, plan name)`` of ``*`` or ``relation.*``."""
        out = []
        for s in self.sources:
            if relation and s.alias != relation:
                continue
            out.extend((n, p) for n, (p, _) in s.columns.items() if relation or n not in s.hidden)
        if relation and not out:
            raise PlanError(f"missing FROM-clause entry for table {relation!r} (in {relation}.*)")
        return out


def _conjuncts(e: Expression | None) -> list[Expression]:
    if e is None:
        return []
    if e.cls == "CONJUNCTION" and e.type == "CONJUNCTION_AND":
        return [c for child in e.children for c in _conjuncts(child)]
    return [e]


def _correlation(where: Expression | None, inner, outer) -> tuple[list, list[Expression]]:
    """Split a correlated subquery's ``WHERE`` into its correlation -- ``(outer column, inner
    column reference)`` for each conjunct equating a column of the ``inner`` scope with one of
    the ``outer`` scope -- and the conjuncts left (``local``)."""
    pairs, local = [], []
    for c in _conjuncts(where):
        if (c.cls == "COMPARISON" and c.type == "COMPARE_EQUAL"
                and all(x.cls == "COLUMN_REF" for x in c.children)):
            bound = []
            for x in c.children:
                try:
                    bound.append(("in", x, inner.column(x)))
                except PlanError:
                    bound.append(("out", x, outer.column(x)))
            kinds = [k for k, _, _ in bound]
            if sorted(kinds) == ["in", "out"]:
                pairs.append((bound[kinds.index("out")][2], bound[kinds.index("in")][1]))
                continue
        local.append(c)
    return pairs, local


def _constant(value, t: pa.DataType):
    """``value`` (a literal's) as a constant of column type ``t``, or ``None`` when the
    comparison is not native (the constant's type is not the column's)."""
    if isinstance(value, bool):
        return value if pa.types.is_boolean(t) else None
    if isinstance(value, int):
        if pa.types.is_integer(t):
            info = (pa.types.is_signed_integer(t), t.bit_width)
            lo, hi = (-(2 ** (info[1] - 1)), 2 ** (info[1] - 1)) if info[0] else (0, 2 ** info[1])
            return value if lo <= value < hi else None
        if pa.types.is_float64(t):
            f = float(value)
            return f if int(f) == value else None
        return None
    if isinstance(value, decimal.Decimal):
        # PostgreSQL compares a float8 column with a numeric literal as float8.
        if pa.types.is_float64(t) and value.is_finite():
            return float(value)
        return None
    if isinstance(value, str):
        return value if (pa.types.is_string(t) or pa.types.is_large_string(t)) else None
    return None


class _Planner:
    def __init__(self, text: str, schemas: Mapping[str, Schema], subquery_schema=None, hints=()):
        self.text = text
        #: The query hints (``colmz.sql.hints``) by the offset of their SELECT keyword.
        self.hints: dict[int, dict[str, int]] = {}
        for h in hints:
            self.hints.setdefault(h.select_at, {})[h.name] = h.value
        self.schemas = schemas
        self.subquery_schema = subquery_schema
        self.used: dict[str, Schema] = {}
        self.counter = 0
        #: The CTEs in scope, innermost last (name -> query): a reference is planned as that
        #: query (Materialize's ``Let``, inlined at each use).
        self.ctes: list[dict[str, Query]] = []
        #: How many queries are being planned, nested: 1 for the outermost one (where
        #: alone a temporal filter may be, its future updates going to the view's sink).
        self.depth = 0
        #: The text span of a query (by ``id``) where it is known -- the whole text, a
        #: ``FROM`` subquery, a set operation's branch -- and each set-operation branch's
        #: parent, so that a branch that falls back is recomputed alone (:meth:`branch_text`).
        self.spans: dict[int, tuple[int, int]] = {}
        #: The aggregated query's GROUP BY expressions (by their text, spaces collapsed)
        #: and the column a Map before the reduce computes each into.
        self.group_exprs: dict[str, str] = {}
        self.parents: dict[int, Query] = {}
        #: A LATERAL subquery rewritten to carry its correlation keys (by ``id``): how many
        #: of its last output columns are those keys (its top-k is per key: :meth:`lateral`).
        self.lateral_keys: dict[int, int] = {}
        #: ``ORDER BY``/``DISTINCT ON`` items (by span) -> the output column they sort by, when
        #: not an output column by name (:meth:`order_columns`).
        self.order_names: dict[tuple[int, int], str] = {}
        #: A right or full join's ``USING`` columns (by the join's ``id``), merged after it.
        self.merging: dict[int, list[tuple[str, str, str]]] = {}
        #: A scalar subquery inside a WHERE condition (by ``id``) -> the column holding its
        #: value, joined into the condition's input (:meth:`query_checked`).
        self.subquery_columns: dict[int, str] = {}
        #: The WINDOW clause of the query whose window functions are being planned
        #: (:meth:`window_clause`), or ``None``.
        self.named_windows = None
        #: The inner and outer scopes of the ``EXISTS`` last decorrelated with conditions
        #: reading both (:meth:`correlated`), binding its residual (:meth:`semi_residual`).
        self.exists_scope: tuple[_Scope, _Scope] | None = None
        #: Every reduce planned as a :class:`BasicReduce` (DuckDB's aggregates, typed as
        #: PostgreSQL's): set to re-plan a subquery whose native aggregates would be read
        #: with another type (:meth:`typed_subquery`, :meth:`over_groups`).
        self.basic_only = False

    def span(self, e) -> str:
        return self.text[e.start:e.end] if e.start >= 0 else e.type

    def hint(self, q: Query, name: str) -> int | None:
        """The value of hint ``name`` in the ``OPTIONS`` of ``SELECT`` ``q`` (``None``: not
        given): the hint's SELECT keyword is the last one before ``q``'s first positioned part."""
        if not self.hints:
            return None
        return self.hints.get(self.select_at(q), {}).get(name)

    def select_at(self, q: Query) -> int:
        """The offset of ``SELECT`` ``q``'s keyword: the last one before its first positioned
        part (``-1``: unknown)."""
        if q.type != "SELECT_NODE":
            return -1
        parts = [x.start for x in (*q.items, q.from_, q.where) if x is not None and x.start >= 0]
        if not parts:
            return -1
        first = min(parts)
        return max((t.start for t in tokenize(self.text) if t.kind == "word" and t.upper == "SELECT"
                    and t.start < first), default=-1)

    def window_clause(self, q: Query) -> tuple[int, int, dict[str, tuple[int, int]]] | None:
        """``SELECT`` ``q``'s ``WINDOW`` clause: the span of its definitions and each named
        window's span (``name AS (spec)``: the spec with its parentheses); ``None`` without one."""
        at = self.select_at(q)
        if at < 0:
            return None
        toks = tokenize(self.text)
        for i, t in enumerate(toks):
            if t.kind == "word" and t.upper == "WINDOW" and t.start > at and select_offset(toks, i) == at:
                break
        else:
            return None
        named, j = {}, i + 1
        while j + 2 < len(toks) and toks[j + 1].upper == "AS" and toks[j + 2].text == "(":
            close = closing(toks, j + 2)
            if close < 0:
                return None
            named[toks[j].name] = (toks[j + 2].start, toks[close].end)
            j = close + 1
            if j < len(toks) and toks[j].text == ",":
                j += 1
            else:
                break
        if not named:
            return None
        return toks[i + 1].start, toks[j - 1].end, named

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ---- predicates

    def predicates(self, e: Expression, column_of, types: dict[str, pa.DataType]) -> tuple[Predicate, ...]:
        """The native predicates one conjunct is: ``x BETWEEN a AND b`` is ``x >= a AND x <= b``
        (PostgreSQL's definition), a boolean column ``b`` is ``b = true`` and ``NOT b`` is
        ``b = false`` (NULL drops the row either way); otherwise :meth:`predicate`."""
        if e.cls == "BETWEEN" and e.type == "COMPARE_BETWEEN" and len(e.children) == 3:
            x, lo, hi = e.children
            if lo.cls == "CONSTANT" and hi.cls == "CONSTANT":
                return tuple(self.predicate(Expression("COMPARISON", kind, e.start, e.end, (x, bound)),
                                            column_of, types, self.span(e))
                             for kind, bound in (("COMPARE_GREATERTHANOREQUALTO", lo),
                                                 ("COMPARE_LESSTHANOREQUALTO", hi)))
        negated = e.cls == "OPERATOR" and e.type == "OPERATOR_NOT" and len(e.children) == 1
        bare = e.children[0] if negated else e
        if bare.cls in ("COLUMN_REF", "FUNCTION") and (bare.cls == "COLUMN_REF" or _is_aggregate(bare)):
            col = column_of(bare)
            if not pa.types.is_boolean(types[col]):
                raise _Unsupported(f"predicate {self.span(e)!r}: a {types[col]} value as a condition")
            return (Comparison(col, "=", not negated),)
        return (self.predicate(e, column_of, types),)

    def predicate(self, e: Expression, column_of, types: dict[str, pa.DataType], text: str = "") -> Predicate:
        """A native predicate for ``e``; ``column_of(expr)`` binds its column side."""
        if e.cls == "OPERATOR" and e.type in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL") and len(e.children) == 1:
            return IsNullPredicate(column_of(e.children[0]), e.type == "OPERATOR_IS_NOT_NULL")
        if e.cls == "COMPARISON" and e.type in _COMPARE_OPS and len(e.children) == 2:
            a, b = e.children
            op = _COMPARE_OPS[e.type]
            if a.cls == "CONSTANT" and b.cls != "CONSTANT":
                a, b, op = b, a, _FLIPPED[op]
            what = text or self.span(e)
            if b.cls != "CONSTANT" or b.literal is None:
                raise _Unsupported(f"predicate {what!r}: not a column compared with a constant")
            col = column_of(a)
            value = b.literal.value if b.literal.kind != "NULL_LITERAL" else None
            if value is None:
                raise _Unsupported(f"predicate {what!r}: a comparison with NULL")
            t = types[col]
            v = _constant(value, t)
            if (v is None and pa.types.is_integer(t) and not isinstance(value, bool)
                    and isinstance(value, (int, decimal.Decimal)) and decimal.Decimal(value).is_finite()):
                # a numeric literal, or an integer one beyond the column's type (numeric too)
                return _integer_versus_numeric(col, op, decimal.Decimal(value), t)
            if v is None:
                raise _Unsupported(f"predicate {what!r}: the constant is not of the column's type {t}")
            if isinstance(v, float) and math.isnan(v):
                raise _Unsupported(f"predicate {what!r}: a NaN constant")
            if isinstance(v, str) and op not in ("=", "<>"):
                raise _Unsupported(f"predicate {what!r}: text ordered by the collation")
            return Comparison(col, op, v)
        raise _Unsupported(f"predicate {self.span(e)!r}: not a column compared with a constant or IS [NOT] NULL")

    # ---- FROM

    def table(self, t: Table) -> tuple[Node, list[_Source], list[Expression]]:
        """The node of a ``FROM`` item, its scope and the inner-join conditions still to place."""
        if t.type == "BASE_TABLE":
            if len(t.name) != 1:
                raise _Unsupported(f"table name {'.'.join(t.name)!r} with a schema or catalog")
            name = t.name[0]
            cte = self.cte(name)
            if cte is not None:
                return self.cte_source(cte, t.alias or name, t.column_aliases, f"WITH {name!r}")
            if name not in self.schemas and name.lower() in self.schemas:
                raise _Unsupported(f"table {name!r} matched only ignoring case "
                                   "(quoted and unquoted identifiers are not told apart)")
            if name not in self.schemas:
                raise PlanError(f"relation {name!r} does not exist among the schemas {sorted(self.schemas)}")
            if t.column_aliases:
                raise _Unsupported(f"column aliases on table {name!r}")
            schema = self.schemas[name]
            self.used[name] = schema
            alias = t.alias or name
            cols = tuple((c.name, f"{alias}.{c.name}") for c in schema)
            node = Get(tuple(ColumnSpec(p, c.type) for (_, p), c in zip(cols, schema)), name, alias, cols)
            src = _Source(alias, {c.name: (p, c.type) for (_, p), c in zip(cols, schema)})
            return node, [src], []
        if t.type == "SUBQUERY":
            if not t.alias:
                raise _Unsupported("a subquery in FROM without an alias")
            return self.subquery_source(t.subquery, t.alias, t.column_aliases, f"subquery {t.alias!r}", t)
        if t.type == "JOIN":
            return self.join(t)
        raise _Unsupported(f"FROM item of type {t.type} ({self.span(t)!r})")

    def join(self, t: Table) -> tuple[Node, list[_Source], list[Expression]]:
        if t.ref_type not in ("REGULAR", "CROSS", "NATURAL"):
            raise _Unsupported(f"{t.ref_type} join")
        kind = {"INNER": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(t.join_type)
        if kind is None:
            raise _Unsupported(f"{t.join_type} join")
        left, lsrc, lconds = self.table(t.children[0])
        sub = t.children[1]
        if sub.type == "TABLE_FUNCTION" and kind in ("inner", "left"):
            return self.table_function(t, kind, left, lsrc, lconds)
        values = sub.subquery if sub.type == "SUBQUERY" else None
        if (kind in ("inner", "left") and sub.alias and values is not None and values.type == "SELECT_NODE"
                and values.from_ is not None and values.from_.type == "EXPRESSION_LIST" and values.from_.rows
                and not values.ctes and values.where is None and not values.group_by and values.having is None
                and not values.modifiers and [e.cls for e in values.items] == ["STAR"]
                and any(x.cls == "COLUMN_REF" for row in values.from_.rows for e in row for x in e.walk())):
            # a VALUES list has no columns of its own: one reading a column reads the left side
            return self.lateral_values(t, kind, left, lsrc, lconds)
        lateral = sub.type == "SUBQUERY" and kind in ("inner", "left") and _reads_outside(sub.subquery)
        if lateral and sub.subquery.from_ is None:
            # LATERAL: the subquery reads the left side's columns (PostgreSQL binds them there)
            return self.lateral(t, kind, left, lsrc, lconds)
        try:
            right, rsrc, rconds = self.table(sub)
        except PlanError:
            if not lateral:
                raise
            return self.lateral(t, kind, left, lsrc, lconds)
        twice = {s.alias for s in lsrc} & {s.alias for s in rsrc}
        if twice:
            raise PlanError(f"table name {sorted(twice)[0]!r} specified more than once (give each an alias)")
        conds = [c for e in t.expressions for c in _conjuncts(e)]
        if t.ref_type == "NATURAL":
            # NATURAL JOIN is USING the columns both sides show under one name (PostgreSQL's
            # definition), in the left side's order
            right_names = {n for x in rsrc for n in x.columns if n not in x.hidden}
            common = [n for x in lsrc for n in x.columns if n not in x.hidden and n in right_names]
            t = dataclasses.replace(t, using=tuple(dict.fromkeys(common)), ref_type="REGULAR")
        using = self.using(t, kind, lsrc, rsrc) if t.using else []
        if kind == "inner":
            # one multiway inner join; conditions placed once the whole FROM is known
            ins = []
            for side in (left, right):
                if isinstance(side, Join) and side.kind == "inner" and not side.on:
                    ins.extend(side.inputs_)
                else:
                    ins.append(side)
            node = Join(tuple(c for n in ins for c in n.schema), tuple(ins), "inner")
            return node, lsrc + rsrc, lconds + rconds + conds + using
        # an outer join: its sides are complete (their own conditions placed)
        left = self.place(left, lsrc, lconds)
        right = self.place(right, rsrc, rconds)
        scope = _Scope(lsrc + rsrc)
        lnames = {c.name for c in left.schema}
        on = []
        # A condition reading only the side that may be NULL-padded filters that side before
        # the join (PostgreSQL's ON semantics) when it is native; any other condition that
        # is not an equality of a left and a right column is the residual, evaluated on the
        # join's pairs (:meth:`outer_residual`).
        padded = {"left": (1,), "right": (0,), "full": ()}[kind]
        pushed: dict[int, list[Predicate]] = {}
        residual: list[Expression] = []
        for c in conds:
            pair = self.equality(c, scope)
            if pair is not None and (pair[0] in lnames) != (pair[1] in lnames):
                a, b = pair
                on.append((a, b) if a in lnames else (b, a))
                continue
            side = self.one_side(c, scope, lnames)
            if side is not None and side in padded:
                types = {x.name: x.type for x in (left, right)[side].schema}
                try:
                    pushed.setdefault(side, []).extend(self.predicates(c, scope.column, types))
                    continue
                except _Unsupported:
                    pass
            residual.append(c)
        on.extend(self.equality(c, scope) for c in using)
        if 0 in pushed:
            left = fused(left.schema, left, tuple(pushed[0]), None)
        if 1 in pushed:
            right = fused(right.schema, right, tuple(pushed[1]), None)
        self.check_keys(on, left.schema + right.schema)
        if residual:
            join = self.outer_residual(kind, left, right, tuple(on), residual, scope)
        elif not on:
            raise _Unsupported(f"{kind.upper()} JOIN without an equality of columns")
        else:
            join = Join(left.schema + right.schema, (left, right), kind, tuple(on))
        if id(t) in self.merging:
            return self.merged_using(join, self.merging.pop(id(t)), lsrc + rsrc)
        return join, lsrc + rsrc, []

    def outer_residual(self, kind: str, left: Node, right: Node, on, residual: list[Expression],
                       scope: _Scope) -> Node:
        """An outer join whose ``ON`` holds conditions other than equalities of a left and a
        right column, as Materialize lowers it (``src/sql/src/plan/lowering.rs``): the pairs
        -- the inner join on the equalities (a cross join without any), filtered by the
        residual conditions (one SQL segment) -- plus, for each preserved side, its rows
        matching no pair, padded with NULLs. A side's unmatched rows are the side minus its
        semijoin with the distinct matched rows (their columns projected from the pairs),
        joined on every column with NULLs equal, so a row holding a NULL finds itself.
        Every part is incremental: a change costs its delta's pairs and the rows whose
        matched state it flips."""
        both = left.schema + right.schema
        names = [c.name for c in both]
        inner = Join(both, (left, right), "inner", on)
        where = tuple(self.sql_text(e, names, scope.column) for e in residual)
        pairs = self.sql_segment(inner, where, None, [self.span(e) for e in residual])
        parts = [pairs]
        for side in {"left": (0,), "right": (1,), "full": (0, 1)}[kind]:
            parts.append(self.padded(self.unmatched((left, right)[side], pairs), both, kind))
        return Union(both, tuple(parts))

    def unmatched(self, side: Node, pairs: Node) -> Node:
        """``side``'s rows (with their multiplicities) whose value is no pair's projection on
        ``side``'s columns: ``side − side ⋉ distinct(π_side pairs)``, the semijoin on every
        column with NULLs equal."""
        tag = self.fresh("matched")
        sel = tuple((c.name, f"{tag}.{i}") for i, c in enumerate(side.schema))
        proj = fused(tuple(ColumnSpec(n, c.type) for (_, n), c in zip(sel, side.schema)), pairs, (), sel)
        dist = Distinct(proj.schema, proj)
        keys = tuple((c.name, n) for c, (_, n) in zip(side.schema, sel))
        join = Join(side.schema + dist.schema, (side, dist), "inner", keys, nulls_equal=True)
        semi = fused(side.schema, join, (), tuple((c.name, c.name) for c in side.schema))
        return Union(side.schema, (side, Negate(side.schema, semi)))

    def padded(self, rows: Node, schema: Schema, kind: str) -> Node:
        """``rows`` (one side's columns) with the other side's columns NULL, in ``schema``'s
        order: one SQL segment, each NULL cast to its column's PostgreSQL type."""
        at = [c.name for c in rows.schema]
        items = []
        for c in schema:
            if c.name in at:
                items.append((placeholder(at.index(c.name)), c.name))
                continue
            t = _POSTGRES_TYPES.get(c.type)
            if t is None:
                raise _Unsupported(f"{kind.upper()} JOIN with a residual condition: a NULL of type {c.type}")
            items.append((f"CAST(NULL AS {t})", c.name))
        node = self.sql_segment(rows, (), items, [f"{kind.upper()} JOIN's unmatched rows padded with NULLs"])
        if [c.type for c in node.schema] != [c.type for c in schema]:
            raise _Unsupported(f"{kind.upper()} JOIN's NULL padding typed {node.schema}, not {schema}")
        return node

    def merged_using(self, join: Join, merged, sources: list[_Source]):
        """A right or full ``JOIN ... USING``'s merged columns, ``COALESCE(l.c, r.c)`` each,
        computed after the join (one SQL segment) and in scope first, unqualified."""
        names = [c.name for c in join.schema]
        tag = self.fresh("using")
        items = [(placeholder(i), n) for i, n in enumerate(names)]
        items += [(f"coalesce({placeholder(names.index(lc))}, {placeholder(names.index(rc))})", f"{tag}.{name}")
                  for name, lc, rc in merged]
        node = self.sql_segment(join, (), items, [f"USING ({', '.join(n for n, _, _ in merged)})"])
        types = {c.name: c.type for c in node.schema}
        src = _Source("", {name: (f"{tag}.{name}", types[f"{tag}.{name}"]) for name, _, _ in merged})
        return node, [src, *sources], []

    def lateral(self, t: Table, kind: str, left: Node, lsrc: list[_Source], lconds) -> tuple[Node, list[_Source], list]:
        """A ``LATERAL`` subquery (``FROM x, LATERAL (...) y``, ``[LEFT] JOIN LATERAL (...) y ON
        true``) reading the left side's columns, decorrelated as Materialize's lowering does
        for what colmz can prove equal to it:

        * without ``FROM`` (``LATERAL (SELECT x.a * 2 AS b)``): a Map over the left side;
        * correlated by equalities of inner and outer columns in its ``WHERE`` (every other
          outer reference refused): the subquery with those conditions taken off and its
          inner key columns carried along -- added to ``GROUP BY`` when it aggregates, to the
          groups of its top-k when it has ``LIMIT``/``OFFSET`` -- joined with the left side on
          the keys (inner, or left for ``LEFT JOIN``); a global aggregate (no ``GROUP BY``) is
          one row per left row, so it is left-joined, each aggregate over no rows NULL or, for
          ``count``, coalesced to 0."""
        r = t.children[1]
        sub, alias = r.subquery, r.alias
        what = f"LATERAL subquery {alias!r}"
        if not alias:
            raise _Unsupported(f"{what} without an alias")
        if any(not (c.cls == "CONSTANT" and c.literal is not None and c.literal.kind == "BOOLEAN" and c.literal.value)
               for e in t.expressions for c in _conjuncts(e)):
            raise _Unsupported(f"{what}: a join condition other than ON true")
        if sub.type != "SELECT_NODE" or sub.ctes:
            raise _Unsupported(f"{what}: not one SELECT")
        left = self.place(left, lsrc, lconds)
        outer = _Scope(lsrc)
        if sub.from_ is None:
            return self.lateral_map(sub, alias, r.column_aliases, left, lsrc, outer, what)
        right, n, pairs, glob, counts = self.decorrelated(sub, outer, what)
        names = [c.name for c in right.schema[:n]]
        if len(r.column_aliases) > n:
            raise PlanError(f"{what} has {n} columns available but {len(r.column_aliases)} columns specified")
        names = list(r.column_aliases) + names[len(r.column_aliases):]
        tag = self.fresh("lateral")
        cols = tuple((c.name, f"{alias}.{nm}") for c, nm in zip(right.schema, names)) + tuple(
            (c.name, f"{tag}.key{i}") for i, c in enumerate(right.schema[n:]))
        if len({p for _, p in cols}) != len(cols):
            raise _Unsupported(f"{what}: two output columns named alike")
        right = fused(tuple(ColumnSpec(p, c.type) for (_, p), c in zip(cols, right.schema)), right, (), cols)
        on = tuple((o, cols[n + i][1]) for i, (o, _) in enumerate(pairs))
        self.check_keys(on, left.schema + right.schema)
        both = left.schema + right.schema
        join = Join(both, (left, right), "left" if glob or kind == "left" else kind, on)
        shown = [c for c in both if not c.name.startswith(f"{tag}.")]
        if counts:
            at = [c.name for c in both]
            items = [(placeholder(at.index(c.name)), c.name) for c in shown]
            for i in counts:
                col = cols[i][1]
                items[[x for _, x in items].index(col)] = (f"coalesce({placeholder(at.index(col))}, 0)", col)
            node = self.sql_segment(join, (), items, [self.span(sub.items[i]) for i in counts])
        else:
            node = fused(tuple(shown), join, (), tuple((c.name, c.name) for c in shown))
        src = _Source(alias, {nm: (p, c.type) for nm, (_, p), c in zip(names, cols, right.schema)})
        return node, lsrc + [src], []

    #: Table functions read per row (a FlatMap): one output column each, named as
    #: PostgreSQL names it (the column alias, else the table alias, else the function).
    TABLE_FUNCTIONS = {"generate_series": (2, 3), "unnest": (1,)}

    def table_function(self, t: Table, kind: str, left: Node, lsrc: list[_Source], lconds):
        """``FROM x, [LATERAL] f(args) [AS g[(c)]]`` (``CROSS JOIN``, ``JOIN ... ON true``,
        ``LEFT JOIN ... ON true``) with ``f`` a table function of one output column whose
        arguments are the left side's columns or constants: a FlatMap over the left side
        (Materialize's lowering of a table function in ``FROM``), the call evaluated per row
        by DuckDB through translate, each output row keeping its row's diff; for ``LEFT
        JOIN`` a row the function gives no rows keeps one row, NULL in the function's column."""
        r = t.children[1]
        what = f"table function {self.span(r)!r}"
        if any(not (c.cls == "CONSTANT" and c.literal is not None and c.literal.kind == "BOOLEAN" and c.literal.value)
               for e in t.expressions for c in _conjuncts(e)):
            raise _Unsupported(f"{what}: a join condition other than ON true")
        if len(r.expressions) != 1:
            raise _Unsupported(f"{what}: not one function call")
        call = r.expressions[0]
        fn = call.name[-1] if call.cls == "FUNCTION" and len(call.name) == 1 else ""
        if fn not in self.TABLE_FUNCTIONS or len(call.children) not in self.TABLE_FUNCTIONS[fn]:
            raise _Unsupported(f"{what}: a table function other than generate_series or unnest of one array")
        if "ordinality" in self.text[r.start:r.end].lower():
            raise _Unsupported(f"{what}: WITH ORDINALITY")
        if len(r.column_aliases) > 1:
            raise PlanError(f"{what} has 1 column available but {len(r.column_aliases)} columns specified")
        left = self.place(left, lsrc, lconds)
        names = [c.name for c in left.schema]
        # the call's own position covers its arguments only: its text rebuilt around theirs
        column_of = _Scope(lsrc).column
        call_text = f"{fn}({', '.join(self.sql_text(a, names, column_of) for a in call.children)})"
        shown = f"{fn}({', '.join(self.span(a) for a in call.children)})"
        column = r.column_aliases[0] if r.column_aliases else (r.alias or fn)
        return self.flat_map(kind, left, lsrc, call_text, r.alias or fn, [column], shown, what)

    def flat_map(self, kind: str, left: Node, lsrc: list[_Source], call: str, alias: str, columns: list[str],
                 shown: str, what: str):
        """A FlatMap over ``left`` (its conditions placed): the SQL ``call`` (a table function
        or ``VALUES`` list over the left row's placeholders) joined laterally -- ``LEFT JOIN
        ... ON true`` for ``kind`` left -- its ``columns`` in scope as ``alias``."""
        names = [c.name for c in left.schema]
        join = ", LATERAL " if kind == "inner" else " LEFT JOIN LATERAL "
        vs = [f'"colmz_v{i}"' for i in range(len(columns))]
        lateral = f'{join}{call} AS "colmz_f"({", ".join(vs)}){" ON true" if kind == "left" else ""}'
        outs = [f"{alias}.{c}" for c in columns]
        if len(set(outs)) != len(outs) or set(outs) & set(names):
            raise _Unsupported(f"{what}: its columns named alike, or as a column of the left side")
        items = tuple((placeholder(i), n) for i, n in enumerate(names)) + tuple(
            (f'"colmz_f".{v}', out) for v, out in zip(vs, outs))
        try:
            schema = SqlMapFilterOp(left.schema, (), items, lateral=lateral).schema
        except (SQLError, TypeError, ValueError) as e:
            raise _Unsupported(f"{what}: {e}") from None
        node = FlatMap(schema, left, (), items, (f"{'LEFT JOIN ' if kind == 'left' else ''}{shown}",), lateral)
        types = {c.name: c.type for c in schema}
        src = _Source(alias, {c: (out, types[out]) for c, out in zip(columns, outs)})
        return node, lsrc + [src], []

    def lateral_values(self, t: Table, kind: str, left: Node, lsrc: list[_Source], lconds):
        """``FROM x, LATERAL (VALUES (...), ...) AS v(a, b)`` reading the left side's columns
        (an unpivot): a FlatMap over the left side, each row giving one row per ``VALUES``
        row; columns unnamed by the alias are PostgreSQL's ``column1``, ``column2``, ..."""
        r = t.children[1]
        what = f"LATERAL VALUES {r.alias!r}"
        if any(not (c.cls == "CONSTANT" and c.literal is not None and c.literal.kind == "BOOLEAN" and c.literal.value)
               for e in t.expressions for c in _conjuncts(e)):
            raise _Unsupported(f"{what}: a join condition other than ON true")
        rows = r.subquery.from_.rows
        width = len(rows[0])
        if any(len(row) != width for row in rows):
            raise PlanError("VALUES lists must all be the same length")
        if len(r.column_aliases) > width:
            raise PlanError(f"{what} has {width} columns available but {len(r.column_aliases)} columns specified")
        left = self.place(left, lsrc, lconds)
        names = [c.name for c in left.schema]
        column_of = _Scope(lsrc).column
        call = "(VALUES " + ", ".join("(" + ", ".join(self.sql_text(e, names, column_of) for e in row) + ")"
                                      for row in rows) + ")"
        columns = list(r.column_aliases) + [f"column{i + 1}" for i in range(len(r.column_aliases), width)]
        shown = "VALUES " + ", ".join("(" + ", ".join(self.span(e) for e in row) + ")" for row in rows)
        return self.flat_map(kind, left, lsrc, call, r.alias, columns, shown, what)

    def decorrelated(self, sub: Query, outer: _Scope, what: str):
        """A subquery correlated by equalities of inner and outer columns in its ``WHERE``
        (every other outer reference refused), planned with those conditions taken off and
        its inner key columns carried as its last output columns -- added to ``GROUP BY``
        when it aggregates, to the groups of its top-k (:meth:`modifiers`). Returns ``(node,
        number of its own columns, [(outer column, inner key expression)], whether it is a
        global aggregate, positions of its count items)``: a global aggregate's keys
        without rows have no row here, where the subquery has one (NULLs, counts 0)."""
        _, isrc, _ = self.table(sub.from_)  # the inner scope, to tell inner columns from outer ones
        inner = _Scope(isrc)
        pairs, local = _correlation(sub.where, inner, outer)
        if not pairs:
            raise _Unsupported(f"{what}: correlated other than by equalities of columns")
        keys = tuple(x for _, x in pairs)
        aggregated = bool(sub.group_by) or sub.having is not None or any(
            _is_aggregate(x) for e in sub.items for x in e.walk() if x.cls != "WINDOW")
        if any(x.cls == "WINDOW" for e in sub.items for x in e.walk()):
            raise _Unsupported(f"{what}: window functions")
        if _grouping_sets(sub):
            raise _Unsupported(f"{what}: grouping sets")
        glob = aggregated and not sub.group_by
        counts: list[int] = []
        if glob:
            if sub.having is not None or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers):
                raise _Unsupported(f"{what}: a global aggregate with HAVING, DISTINCT or LIMIT")
            for i, e in enumerate(sub.items):
                fn = e.name[-1] if e.cls == "FUNCTION" and len(e.name) == 1 else ""
                if not _is_aggregate(e) or fn not in self.NULL_WHEN_EMPTY | {"count", "count_star"}:
                    raise _Unsupported(f"{what}: a global aggregate's item {self.span(e)!r} other than one "
                                       "aggregate call")
                if fn in ("count", "count_star"):
                    counts.append(i)
        where = None
        if local:
            where = local[0] if len(local) == 1 else Expression("CONJUNCTION", "CONJUNCTION_AND", -1, -1,
                                                                  tuple(local))
        n = len(sub.items)
        if any(e.cls == "STAR" for e in sub.items):
            raise _Unsupported(f"{what}: * in its select list")
        rewritten = dataclasses.replace(sub, where=where, items=(*sub.items, *keys),
                                        group_by=(*sub.group_by, *keys) if aggregated else sub.group_by,
                                        grouping_sets=())
        self.lateral_keys[id(rewritten)] = len(keys)
        try:
            right = self.query(rewritten)
        except PlanError as e:  # an outer column read elsewhere than an equality
            raise _Unsupported(f"{what}: {e} (correlated other than by equalities of columns)") from None
        finally:
            self.lateral_keys.pop(id(rewritten), None)
        if isinstance(right, Fallback):
            raise _Unsupported(f"{what}: {right.reason}")
        return right, n, pairs, glob, counts

    def lateral_map(self, sub: Query, alias: str, column_aliases, left: Node, lsrc, outer: _Scope, what: str):
        """A ``LATERAL`` subquery without ``FROM``: its items, expressions over the left side's
        columns, computed per left row (a Map, one SQL segment)."""
        if sub.where is not None or sub.group_by or sub.having is not None or sub.modifiers:
            raise _Unsupported(f"{what}: SELECT without FROM with WHERE, GROUP BY, HAVING or modifiers")
        names_in = [c.name for c in left.schema]
        tag = self.fresh("lateral")
        items = [(placeholder(i), c) for i, c in enumerate(names_in)]
        out_names = []
        for j, e in enumerate(sub.items):
            if e.cls in ("STAR", "SUBQUERY") or any(x.cls in ("SUBQUERY", "WINDOW") or _is_aggregate(x)
                                                     for x in e.walk()):
                raise _Unsupported(f"{what}: item {self.span(e)!r}")
            name = column_aliases[j] if j < len(column_aliases) else (
                e.alias or (e.name[-1] if e.cls == "COLUMN_REF" else f"{tag}.{j}"))
            out_names.append(name)
            items.append((self.sql_text(e, names_in, outer.column), f"{alias}.{name}"))
        if len(column_aliases) > len(sub.items):
            raise PlanError(f"{what} has {len(sub.items)} columns available but {len(column_aliases)} columns specified")
        if len(set(out_names)) != len(out_names):
            raise _Unsupported(f"{what}: two output columns named alike")
        node = self.sql_segment(left, (), items, [self.span(e) for e in sub.items])
        types = {c.name: c.type for c in node.schema}
        src = _Source(alias, {nm: (f"{alias}.{nm}", types[f"{alias}.{nm}"]) for nm in out_names})
        return node, lsrc + [src], []

    def equality(self, e: Expression, scope: _Scope) -> tuple[str, str] | None:
        if (e.cls == "COMPARISON" and e.type == "COMPARE_EQUAL" and len(e.children) == 2
                and all(c.cls == "COLUMN_REF" for c in e.children)):
            return scope.column(e.children[0]), scope.column(e.children[1])
        return None

    def check_keys(self, on, schema: Schema) -> None:
        types = {c.name: c.type for c in schema}
        for a, b in on:
            ta, tb = types[a], types[b]
            if ta != tb and (widen(ta, tb) is None or pa.types.is_temporal(ta) != pa.types.is_temporal(tb)):
                raise _Unsupported(f"join of {a} ({ta}) with {b} ({tb}): a cast")

    def place(self, node: Node, sources: list[_Source], conds: list[Expression]) -> Node:
        """An inner join's conditions placed: equalities between inputs as keys, native
        predicates as a filter; a single-input node with conditions gets a filter."""
        scope = _Scope(sources)
        if not isinstance(node, Join) or node.kind != "inner" or node.on:
            if not conds:
                return node
            types = {c.name: c.type for c in node.schema}
            preds = tuple(q for c in conds for q in self.predicates(c, scope.column, types))
            return fused(node.schema, node, preds, None)
        owner = {c.name: i for i, n in enumerate(node.inputs_) for c in n.schema}
        types = {c.name: c.type for c in node.schema}
        on, residual = [], []
        for c in conds:
            pair = self.equality(c, scope)
            if pair is not None:
                if owner[pair[0]] == owner[pair[1]]:
                    raise _Unsupported(f"join condition {self.span(c)!r}: equates two columns of one input")
                on.append(pair)
            else:
                residual.extend(self.predicates(c, scope.column, types))
        # inputs not connected by equalities are a cross join (DeltaJoin looks them up whole)
        self.check_keys(on, node.schema)
        # a native predicate reads one column, so one input: pushed below the join (its
        # arrangement holds only the rows that can match), as Materialize's predicate pushdown
        pushed: dict[int, list[Predicate]] = {}
        for p in residual:
            pushed.setdefault(owner[p.column], []).append(p)
        inputs = tuple(fused(n.schema, n, tuple(pushed[i]), None) if i in pushed else n
                       for i, n in enumerate(node.inputs_))
        return Join(node.schema, inputs, "inner", tuple(on))

    # ---- SELECT

    def query(self, q: Query) -> Node:
        self.depth += 1
        try:
            return self.query_checked(q)
        except _Unsupported as e:
            return Fallback((), self.query_text(q), str(e))
        finally:
            self.depth -= 1

    def query_text(self, q: Query) -> str:
        spans = [e for e in (*q.items, q.where, q.having) if e is not None and e.start >= 0]
        if not spans:
            return self.text
        return self.text[min(e.start for e in spans):max(e.end for e in spans)]

    def query_checked(self, q: Query) -> Node:
        if q.ctes:
            return self.with_ctes(q)
        if q.type == "SET_OPERATION_NODE":
            return self.modifiers(self.setop(q), q)
        if q.type != "SELECT_NODE":
            raise _Unsupported(f"a {q.type}")
        if q.from_ is None:
            return self.modifiers(self.constant(q), q)
        for what, present in (("QUALIFY", q.qualify is not None), ("USING SAMPLE", q.sampled),
                              ("GROUP BY ALL", q.aggregate_handling != "STANDARD_HANDLING")):
            if present:
                raise _Unsupported(what)
        if q.having is not None and q.group_by and not _grouping_sets(q) \
                and any(x.cls == "SUBQUERY" for x in q.having.walk()) \
                and not any(x.cls == "SUBQUERY" for e in (*q.items, *q.group_by) for x in e.walk()):
            # a subquery in HAVING: the condition a WHERE over the grouped rows
            return self.over_groups(q, "a subquery in HAVING")
        for e in (*q.items, *(x for x in (q.having,) if x is not None), *q.group_by):
            # a select item that is a subquery, or a quantified comparison (ALL is NOT over one)
            quantified = self.quantifier(e) or self.quantified_constant(e)
            whole = {id(e), id(quantified[0])} if quantified else {id(e)}
            for sub in e.walk():
                if sub.cls == "SUBQUERY" and not (id(sub) in whole and any(e is i for i in q.items)):
                    raise _Unsupported(f"a subquery in an expression ({self.span(sub)!r})")
        where, semi, temporal = self.split_where(q.where)
        windowed = any(sub.cls == "WINDOW" for e in q.items for sub in e.walk())
        node, sources, conds = self.table(q.from_)
        scope = _Scope(sources)
        # conjuncts the operators cannot evaluate natively: SQL over the delta, after the FROM
        inner = isinstance(node, Join) and node.kind == "inner" and not node.on
        sql_where = [c for c in (conds + where if inner else where) if not self.native(c, scope, sources)]
        if inner:
            conds = [c for c in conds if not any(c is x for x in sql_where)]
        where = [c for c in where if not any(c is x for x in sql_where)]
        if inner:
            node = self.place(node, sources, conds + where)
        else:
            node = self.place(node, sources, conds)
            if where:
                types = {c.name: c.type for c in node.schema}
                node = fused(node.schema, node, tuple(q for c in where for q in self.predicates(c, scope.column, types)), None)
        if sql_where:
            # scalar subqueries inside the conditions: each a column joined in (Materialize's
            # lowering: a cross join with a one-row relation, or a left join with the
            # subquery decorrelated by its keys), read by the condition, projected away after
            before = node.schema
            joined = []
            for c in sql_where:
                for sub in c.walk():
                    if sub.cls == "SUBQUERY" and not _array_any(sub):
                        # (a CTE planned at each reference joins its subqueries each time)
                        node, col = self.typed_subquery(node, sub, scope)
                        self.subquery_columns[id(sub)] = col
                        joined.append(id(sub))
            names = [c.name for c in node.schema]
            try:
                texts = tuple(self.sql_text(c, names, scope.column) for c in sql_where)
            finally:
                for i in joined:
                    self.subquery_columns.pop(i, None)
            node = self.sql_segment(node, texts, None, [self.span(c) for c in sql_where])
            if node.schema != before:
                node = fused(before, node, (), tuple((c.name, c.name) for c in before))
        for e, negated in semi:
            node = self.semijoin(node, scope, e, negated)
        aggregated = bool(q.group_by) or q.having is not None or any(
            _is_aggregate(s) for e in q.items for s in e.walk() if s.cls != "WINDOW")
        if (aggregated or windowed) and temporal:
            raise _Unsupported("a temporal filter (mz_now()) below a reduce or a window")
        if aggregated and windowed:
            return self.over_groups(q, "window functions over a GROUP BY")
        sql_items: dict[int, Expression] = {}
        saved_groups = self.group_exprs
        if aggregated:
            node = self.group_expressions(q, node, scope)
        try:
            return self.select_rest(q, node, scope, sources, aggregated, windowed, temporal, sql_items)
        finally:
            self.group_exprs = saved_groups

    def over_groups(self, q: Query, why: str) -> Node:
        """A grouped ``SELECT`` read as its select list (and ``HAVING``) over a ``FROM``
        subquery that groups: window functions over a ``GROUP BY`` (``SELECT k, rank() OVER
        (ORDER BY sum(v)) FROM t GROUP BY k``, computed over the grouped rows as SQL defines
        them: a :class:`Window` over the reduce) and a ``HAVING`` holding a subquery (a
        ``WHERE`` over the grouped rows, whose scalar subquery is joined in as any
        ``WHERE``'s). Written as text and planned by a planner of its own: the subquery
        computes the ``GROUP BY`` columns (each a column, named as itself) and every
        outermost aggregate call (a fresh name) with the query's ``FROM``, ``WHERE`` and
        ``GROUP BY`` text; the select items and the ``HAVING`` condition read them in place
        of the aggregate calls and the grouped columns; the output columns keep their names.

        Types: a native aggregate not typed as PostgreSQL's (``sum``/``avg`` of integers,
        numeric there) may be read only as an output column or a window's key (an exact
        integer sum sorts as the numeric does); read by an expression, the query is
        planned again with every reduce a :class:`BasicReduce` (DuckDB's aggregates, typed
        as PostgreSQL's, per affected group). ``_Unsupported`` for what this rewrite does
        not cover: grouping sets, a named window, ``LIMIT`` / ``OFFSET`` / ``DISTINCT ON``,
        a subquery in a select item, a ``WITH`` query in scope, a ``GROUP BY`` expression,
        a subquery correlated with the grouped query."""
        if any(self.ctes) or _grouping_sets(q) or not q.group_by:
            raise _Unsupported(f"{why}: with a WITH query in scope, grouping sets or no GROUP BY")
        for m in q.modifiers:
            if m.type == "LIMIT_MODIFIER" or (m.type == "DISTINCT_MODIFIER" and m.expressions) \
                    or m.type not in ("LIMIT_MODIFIER", "DISTINCT_MODIFIER", "ORDER_MODIFIER"):
                raise _Unsupported(f"{why}: with {m.type.replace('_MODIFIER', '')}")
        for o in (o for m in q.modifiers if m.type == "ORDER_MODIFIER" for o in m.orders):
            if any(x.cls == "SUBQUERY" for x in o.expression.walk()):
                raise _Unsupported(f"{why}: ORDER BY a subquery")
        groups: dict[str, tuple[str, ...]] = {}
        for g in q.group_by:
            if g.cls != "COLUMN_REF" or g.start < 0 or g.name[-1] in groups:
                raise _Unsupported(f"{why}: GROUP BY {self.span(g)!r} (not a column, or a name twice)")
            groups[g.name[-1]] = g.name
        # the FROM clause's text: from its keyword to the WHERE or GROUP BY of this SELECT
        at = self.select_at(q)
        toks = tokenize(self.text)
        level = [t for i, t in enumerate(toks) if t.kind == "word" and t.upper in ("FROM", "WHERE", "GROUP")
                 and t.start > at and select_offset(toks, i) == at]
        if at < 0 or len(level) < 2 or level[0].upper != "FROM" or level[1].upper == "FROM" \
                or any(e.start < 0 for e in q.items) or (q.having is not None and q.having.start < 0):
            raise _Unsupported(f"{why}: a span unknown")
        from_text = self.text[level[0].start:level[1].start]

        def group_of(ref: Expression) -> str:
            name = groups.get(ref.name[-1])
            if name is None or (len(name) > 1 and len(ref.name) > 1 and name != ref.name):
                raise _Unsupported(f"{why}: {self.span(ref)!r} read outside an aggregate and not a GROUP BY column")
            return ref.name[-1]

        aggregates: dict[str, str] = {}  # aggregate call text -> its column
        computed: set[str] = set()  # the aggregates' columns read by an expression (not as a key)

        def rewritten(e: Expression, item: bool) -> str:
            edits: list[tuple[int, int, str]] = []
            skip: list[tuple[int, int]] = []
            keys = {id(e)} if item else set()  # an output column, a window's PARTITION BY / ORDER BY
            for x in e.walk():
                if any(a <= x.start and x.end <= b for a, b in skip):
                    continue
                if x.cls == "SUBQUERY":
                    if item:
                        raise _Unsupported(f"{why}: a subquery in {self.span(e)!r}")
                    skip.append((x.start, x.end))  # its own text, planned as a WHERE's subquery
                    continue
                if x.start < 0:
                    raise _Unsupported(f"{why}: a span unknown")
                if x.cls == "WINDOW" and x.over is not None:
                    keys.update(id(y) for y in x.over.partitions)
                    keys.update(id(o.expression) for o in x.over.orders)
                if x.cls == "WINDOW":
                    after = [t for t in tokenize(self.text[x.start:x.end]) if t.kind != "op" or t.text == "("]
                    over = [i for i, t in enumerate(after) if t.kind == "word" and t.upper == "OVER"]
                    if not over or over[-1] + 1 >= len(after) or after[over[-1] + 1].text != "(":
                        raise _Unsupported(f"{why}: a named window ({self.span(x)!r})")
                if x.cls == "FUNCTION" and _is_aggregate(x):
                    col = aggregates.setdefault(self.span(x), self.fresh("grouped_agg"))
                    if id(x) not in keys:
                        computed.add(col)
                    edits.append((x.start, x.end, identifier(col)))
                    skip.append((x.start, x.end))
                elif x.cls == "COLUMN_REF":
                    edits.append((x.start, x.end, identifier(group_of(x))))
            out, at = [], e.start
            for a, b, r in sorted(edits):
                out.append(self.text[at:a] + r)
                at = b
            out.append(self.text[at:e.end])
            return "".join(out)

        items = []
        for e in q.items:
            if e.cls == "STAR":
                raise _Unsupported(f"{why}: *")
            name = e.alias or (e.name[-1] if e.cls == "COLUMN_REF" else self.span(e))
            items.append(f"{rewritten(e, True)} AS {identifier(name)}")
        having = rewritten(q.having, False) if q.having is not None else ""
        inner = [f"{identifier(n)} AS {identifier(n)}" if len(groups[n]) == 1
                 else f"{'.'.join(map(identifier, groups[n]))} AS {identifier(n)}" for n in groups]
        inner += [f"{text} AS {identifier(col)}" for text, col in aggregates.items()]
        parts = [f"SELECT {', '.join(inner)} {from_text}"]
        if q.where is not None:
            parts.append(f"WHERE {self.span(q.where)}")
        parts.append(f"GROUP BY {', '.join(self.span(g) for g in q.group_by)}")
        distinct = any(m.type == "DISTINCT_MODIFIER" for m in q.modifiers)
        text = (f"SELECT {'DISTINCT ' if distinct else ''}{', '.join(items)} "
                f"FROM ({' '.join(parts)}) AS {identifier(self.fresh('grouped'))}")
        if having:
            text += f" WHERE {having}"
        try:
            node = self.planned_alone(text, why, basic_only=False)
        except _Unsupported:  # a condition's subquery reading a native aggregate, say: again
            node = None
        if node is None or not _native_typed(node, computed):
            node = self.planned_alone(text, why, basic_only=True)
            if not _native_typed(node, computed):
                raise _Unsupported(f"{why}: a native aggregate not typed as PostgreSQL's is read by an expression")
        return node

    def planned_alone(self, text: str, why: str, basic_only: bool) -> Node:
        """The plan of query ``text`` (written by this planner) by a planner of its own over
        the same schemas, its tables added to this one's; ``_Unsupported`` when it falls
        back or does not bind (a subquery correlated with the query rewritten)."""
        try:
            stmts = parse_tree(text)
            sub = _Planner(text, self.schemas, self.subquery_schema)
            sub.counter = self.counter
            sub.basic_only = basic_only
            sub.spans[id(stmts[0])] = (0, len(text))
            node = sub.query(stmts[0])
        except (PlanError, SQLError) as e:
            raise _Unsupported(f"{why}: {e}") from None
        self.counter = sub.counter
        if isinstance(node, Fallback):
            raise _Unsupported(f"{why}: {node.reason}")
        self.used.update(sub.used)
        return node

    def select_rest(self, q: Query, node: Node, scope: _Scope, sources, aggregated: bool, windowed: bool,
                    temporal, sql_items) -> Node:
        """A ``SELECT``'s reduce or window, select list and modifiers over its ``FROM`` and
        ``WHERE`` (``node``)."""
        if aggregated and _grouping_sets(q):
            return self.modifiers(self.grouping_union(q, node, scope), q)
        if aggregated and self.basic_only:
            node, select = self.basic_reduce(q, node, scope, "aggregates read as PostgreSQL types them")
        elif aggregated:
            # native reduce (expressions over its groups and aggregates a SQL segment over its
            # output: O(delta)), else every aggregate recomputed by DuckDB per affected group
            try:
                red, select, agg_sql, shown_agg = self.reduce(q, node, scope)
                if agg_sql:
                    red = self.items_segment(red, _unique(select), agg_sql, shown_agg)
                    return self.modifiers(red, q)
                node = red
            except _Unsupported as native:
                node, select = self.basic_reduce(q, node, scope, str(native))
        elif windowed:
            node, select = self.window(q, node, scope)
        else:
            select = []
            for e in q.items:
                if e.cls == "STAR":
                    if e.star_modified:
                        raise _Unsupported(f"{self.span(e)!r} (EXCLUDE/REPLACE/RENAME/COLUMNS)")
                    select.extend((p, n) for n, p in scope.star(e.relation))
                elif e.cls == "COLUMN_REF":
                    select.append((scope.column(e), e.alias or e.name[-1]))
                elif e.cls == "SUBQUERY" and not e.children and self.span(e).lstrip().upper().startswith("EXISTS"):
                    node, col = self.exists_value(node, scope, e)
                    select.append((col, e.alias or "exists"))
                elif self.quantified_constant(e) is None and e.cls == "SUBQUERY" and e.children and self.is_in(e):
                    node, col = self.in_value(node, scope, e)
                    select.append((col, e.alias or "?column?"))
                elif self.quantifier(e) is not None:
                    node, col = self.quantified_value(node, scope, e, *self.quantifier(e))
                    select.append((col, e.alias or "?column?"))
                elif self.quantified_constant(e) is not None:
                    node, col = self.constant_quantified(node, e, *self.quantified_constant(e))
                    select.append((col, e.alias or "?column?"))
                elif e.cls == "SUBQUERY":
                    node, col = self.scalar_subquery(node, e, scope)
                    select.append((col, e.alias or self.span(e)))
                else:  # a scalar expression: SQL over the delta (one DuckDB call per commit)
                    sql_items[len(select)] = e
                    select.append(("", e.alias or self.span(e)))
        select = _unique(select)
        shown = len(select)
        if not temporal:
            select += self.order_columns(q, select, sql_items, scope)
        if sql_items:
            if temporal:
                raise _Unsupported("a temporal filter (mz_now()) with select items needing SQL")
            names = [c.name for c in node.schema]
            texts = {i: self.sql_text(e, names, scope.column) for i, e in sql_items.items()}
            node = self.items_segment(node, select, texts, [self.span(e) for e in sql_items.values()])
            return self.without_order_columns(self.modifiers(node, q), shown)
        types = {c.name: c.type for c in node.schema}
        if temporal:
            return self.temporal(node, scope, temporal, select, q)
        node = fused(tuple(ColumnSpec(n, types[s]) for s, n in select), node, (), tuple(select))
        return self.without_order_columns(self.modifiers(node, q), shown)

    def order_columns(self, q: Query, select, sql_items, scope: _Scope) -> list[tuple[str, str]]:
        """The input columns a top-k's ``ORDER BY`` / ``DISTINCT ON`` reads that the select
        list does not output (PostgreSQL sorts by them): hidden output columns (``(source,
        name)``), projected away after the top-k (:meth:`without_order_columns`); and each
        ``ORDER BY`` expression written as a select item is that item's column. Only where
        a top-k keeps rows (``LIMIT``/``OFFSET``, ``DISTINCT ON``), not under ``DISTINCT``."""
        mods = {m.type for m in q.modifiers}
        if "LIMIT_MODIFIER" not in mods and not any(m.type == "DISTINCT_MODIFIER" and m.expressions
                                                    for m in q.modifiers):
            return []
        if any(m.type == "DISTINCT_MODIFIER" and not m.expressions for m in q.modifiers):
            return []
        names = [n for _, n in select]
        texts = {" ".join(self.span(e).split()): names[i] for i, e in enumerate(q.items)
                 if i < len(names) and e.cls not in ("STAR", "COLUMN_REF") and e.start >= 0}
        exprs = [o.expression for m in q.modifiers if m.type == "ORDER_MODIFIER" for o in m.orders]
        exprs += [e for m in q.modifiers if m.type == "DISTINCT_MODIFIER" for e in m.expressions]
        hidden: list[tuple[str, str]] = []
        for e in exprs:
            if e.start < 0:
                continue
            if e.cls == "COLUMN_REF" and not (len(e.name) == 1 and e.name[0] in names):
                try:
                    col = scope.column(e)
                except PlanError:
                    continue  # order_key names it
                name = next((n for c, n in hidden if c == col), None)
                if name is None:  # one hidden column per input column (DISTINCT ON (c) ORDER BY c)
                    name = self.fresh("order")
                    hidden.append((col, name))
                self.order_names[(e.start, e.end)] = name
            elif e.cls != "COLUMN_REF" and " ".join(self.span(e).split()) in texts:
                self.order_names[(e.start, e.end)] = texts[" ".join(self.span(e).split())]
        return hidden

    def without_order_columns(self, node: Node, shown: int) -> Node:
        """``node`` without its hidden order columns (those after the first ``shown``)."""
        if len(node.schema) == shown:
            return node
        keep = node.schema[:shown]
        return fused(keep, node, (), tuple((c.name, c.name) for c in keep))

    def reduce(self, q: Query, node: Node, scope: _Scope):
        """The native reduce of an aggregated query: its node (with ``HAVING``), the select
        list as ``(source, name)``, the SQL text of select items that are expressions over
        group columns and aggregates (by position; their ``source`` is ``""``), and those
        items' text. ``_Unsupported`` when an aggregate or ``HAVING`` is not native."""
        group = self.group_columns(q, scope)
        aggs: list[Aggregate] = []

        def aggregate(e: Expression) -> str:
            fn = e.name[-1] if e.name else ""
            if len(e.name) != 1:
                raise _Unsupported(f"aggregate {self.span(e)!r} with a schema")
            if e.distinct:
                raise _Unsupported(f"aggregate {self.span(e)!r}: DISTINCT aggregates (basic)")
            if e.filter is not None:
                raise _Unsupported(f"aggregate {self.span(e)!r}: FILTER (WHERE ...)")
            if e.order_by:
                raise _Unsupported(f"aggregate {self.span(e)!r}: ORDER BY inside an aggregate")
            if fn in ACCUMULABLE:
                reduction = "accumulable"
            elif fn in HIERARCHICAL:
                reduction = "hierarchical"
            else:
                raise _Unsupported(f"aggregate {self.span(e)!r}: {fn} (basic, recomputed per group: absent)")
            if fn == "count_star":
                column, fn = None, "count"
            elif len(e.children) == 1 and e.children[0].cls == "COLUMN_REF":
                column = scope.column(e.children[0])
            elif fn == "count" and not e.children:
                column = None
            else:
                raise _Unsupported(f"aggregate {self.span(e)!r}: an argument other than one column")
            for a in aggs:
                if (a.function, a.column) == (fn, column):
                    return a.name
            a = Aggregate(self.fresh("agg"), fn, column, reduction)
            aggs.append(a)
            return a.name

        def group_column(e: Expression) -> str:
            c = scope.column(e)
            if c not in group and self.group_exprs:
                # a column inside a GROUP BY expression written another way: DuckDB's business
                raise _Unsupported(f"{self.span(e)!r}: a column of a GROUP BY expression outside it")
            if c not in group:
                raise PlanError(f"column {'.'.join(e.name)!r} must appear in the GROUP BY clause "
                                "or be used in an aggregate function")
            return c

        select: list[tuple[str, str]] = []
        mapped: dict[int, Expression] = {}
        for e in q.items:
            if self.group_key(e) is not None:
                select.append((self.group_key(e), e.alias or self.span(e)))
            elif e.cls == "COLUMN_REF":
                select.append((group_column(e), e.alias or e.name[-1]))
            elif _is_aggregate(e):
                select.append((aggregate(e), e.alias or self.span(e)))
            elif e.cls == "STAR":
                raise _Unsupported(f"{self.span(e)!r} over a GROUP BY")
            else:
                # an expression over the groups: SQL over the reduce's output (its aggregates
                # added to the reduce first: the map reads their columns)
                for sub in e.walk():
                    if _is_aggregate(sub):
                        aggregate(sub)
                mapped[len(select)] = e
                select.append(("", e.alias or self.span(e)))
        having = _conjuncts(q.having)

        def having_column(e: Expression) -> str:
            if self.group_key(e) is not None:
                return self.group_key(e)
            if e.cls == "FUNCTION":
                return aggregate(e)
            if e.cls == "COLUMN_REF":
                return group_column(e)
            raise _Unsupported(f"HAVING {self.span(e)!r}: not an aggregate or a group column")

        # HAVING may read aggregates the select list does not: add them before the reduce
        # is built (the predicates need its output types).
        for h in having:
            for sub in h.walk():
                if _is_aggregate(sub):
                    having_column(sub)
        out_schema = self.reduce_schema(node.schema, group, aggs)
        red: Node = Reduce(out_schema, node, tuple(group), tuple(aggs),
                           expected_group_size=self.hint(q, "AGGREGATE INPUT GROUP SIZE"))
        if having:
            rtypes = {c.name: c.type for c in out_schema}
            preds = tuple(q for h in having for q in self.predicates(h, having_column, rtypes))
            red = fused(out_schema, red, preds, None)
        in_types = {c.name: c.type for c in node.schema}

        def typed_aggregate(e: Expression) -> str:
            # SQL over the reduce's output reads each aggregate in the native operator's type:
            # exact only where that is PostgreSQL's (sum(bigint) is numeric there, so
            # sum(v) / count(*) must not divide integers)
            name = aggregate(e)
            a = next(x for x in aggs if x.name == name)
            if not _postgres_typed(a, in_types):
                raise _Unsupported(f"{self.span(e)!r} inside an expression: the native {a.function} is not "
                                   "typed as PostgreSQL's")
            return name

        names = [c.name for c in out_schema]
        texts = {i: self.sql_text(e, names, group_column, typed_aggregate) for i, e in mapped.items()}
        return red, select, texts, [self.span(e) for e in mapped.values()]

    def grouping_union(self, q: Query, node: Node, scope: _Scope) -> Node:
        """``GROUPING SETS`` / ``ROLLUP`` / ``CUBE`` (and ``GROUPING()``) as Materialize lowers
        them: a Union (ALL: PostgreSQL keeps a set listed twice) of one native reduce per
        grouping set over the same input, each branch's select list with the keys absent
        from its set a NULL of the key's type and ``GROUPING(a, b, ...)`` the constant whose
        bit for an argument (the first one most significant) is 1 when that key is absent.
        A set whose aggregates the native reduce cannot hold (``FILTER``, ``DISTINCT``,
        ``string_agg``) is a :class:`BasicReduce` over that set's keys. ``HAVING`` or a
        select expression reading a key absent from a set falls back."""
        keys = [self.group_item(q, g, scope) for g in q.group_by]
        cols = []
        for g in keys:
            c = self.group_key(g)
            if c is None:
                if g.cls != "COLUMN_REF":
                    raise _Unsupported(f"GROUP BY {self.span(g)!r}: an expression needing SQL")
                c = scope.column(g)
            cols.append(c)
        types = {c.name: c.type for c in node.schema}

        def key_column(e: Expression) -> str | None:
            c = self.group_key(e)
            if c is None and e.cls == "COLUMN_REF":
                c = scope.column(e)
            return c if c in cols else None

        sets = q.grouping_sets or (tuple(range(len(keys))),)
        branches: list[Node] = []
        for gset in sets:
            present = {cols[i] for i in gset}
            kept, fixed = [], {}
            for i, e in enumerate(q.items):
                c = key_column(e)
                if e.cls == "OPERATOR" and e.type == "GROUPING_FUNCTION":
                    bits = 0
                    for a in e.children:
                        ca = key_column(a)
                        if ca is None:
                            raise PlanError(f"arguments to GROUPING must be grouping expressions of the "
                                            f"associated query level ({self.span(a)!r})")
                        bits = 2 * bits + (ca not in present)
                    fixed[i] = f"CAST({bits} AS integer)"
                elif c is not None and c not in present:
                    t = _POSTGRES_TYPES.get(types[c])
                    if t is None:
                        raise _Unsupported(f"grouping set without {self.span(e)!r}: a NULL of type {types[c]}")
                    fixed[i] = f"CAST(NULL AS {t})"
                else:
                    if any(sub.cls == "OPERATOR" and sub.type == "GROUPING_FUNCTION" for sub in e.walk()):
                        raise _Unsupported(f"{self.span(e)!r}: GROUPING() inside an expression")
                    kept.append(i)
            if q.having is not None and any(sub.cls == "OPERATOR" and sub.type == "GROUPING_FUNCTION"
                                            for sub in q.having.walk()):
                raise _Unsupported("GROUPING() in HAVING")
            items = tuple(q.items[i] for i in kept)
            if not gset and not any(_is_aggregate(x) for e in items for x in e.walk()):
                # the empty set without aggregates is still one row (a global reduce needs
                # an aggregate to hold it: a count, projected away)
                items += (Expression("FUNCTION", "FUNCTION", -1, -1, name=("count_star",)),)
            sub = dataclasses.replace(q, items=items, group_by=tuple(keys[i] for i in gset), grouping_sets=())
            try:
                try:
                    if self.basic_only:
                        raise _Unsupported("aggregates read as PostgreSQL types them")
                    red, select, agg_sql, shown = self.reduce(sub, node, scope)
                except _Unsupported as native:
                    # a basic aggregate (FILTER, DISTINCT, string_agg): this set's reduce
                    # recomputed by DuckDB per affected group (its key columns), as any --
                    # but the count added to hold the empty set has no text to recompute
                    if any(x.start < 0 for e in sub.items for x in e.walk()):
                        raise
                    red, select = self.basic_reduce(sub, node, scope, str(native))
                    agg_sql = {}
            except PlanError as e:
                # a column of a key absent from this set, read outside the key (HAVING, an
                # expression): NULL there, SQL's business
                raise _Unsupported(f"grouping set ({', '.join(self.span(keys[i]) for i in gset)}): {e}") from None
            names = [c.name for c in red.schema]
            items, texts = [], []
            at = {i: j for j, i in enumerate(kept)}
            for i, e in enumerate(q.items):
                if i in fixed:
                    items.append((fixed[i], ""))
                    texts.append(self.span(e))
                    continue
                j = at[i]
                src, _ = select[j]
                items.append((agg_sql[j] if j in agg_sql else placeholder(names.index(src)), ""))
                texts.append(self.span(e))
            out = _unique([("", e.alias or (e.name[-1] if e.cls == "COLUMN_REF" else self.span(e)))
                           for e in q.items])
            items = [(t, n) for (t, _), (_, n) in zip(items, out)]
            branches.append(self.sql_segment(red, (), items, texts))
        schema = branches[0].schema
        for b in branches[1:]:
            if [c.type for c in b.schema] != [c.type for c in schema]:
                raise _Unsupported(f"grouping sets typed differently: {b.schema} and {schema}")
        return branches[0] if len(branches) == 1 else Union(schema, tuple(branches))

    def reduce_schema(self, schema: Schema, group: list[str], aggs: list[Aggregate]) -> Schema:
        """The reduce's output columns, by the operator's own type rules."""
        try:
            return reduce_operator(schema, tuple(group), tuple(aggs)).schema
        except (TypeError, ValueError) as e:
            raise _Unsupported(f"aggregates over these column types: {e}") from None

    def modifiers(self, node: Node, q: Query) -> Node:
        names = [c.name for c in node.schema]
        order, limit, offset, distinct, distinct_on = (), None, 0, False, ()
        for m in q.modifiers:
            if m.type == "DISTINCT_MODIFIER":
                if m.expressions:
                    distinct_on = m.expressions
                else:
                    distinct = True
            elif m.type == "ORDER_MODIFIER":
                order = m.orders
            elif m.type == "LIMIT_MODIFIER":
                for what, e in (("LIMIT", m.limit), ("OFFSET", m.offset)):
                    if e is None or (e.cls == "CONSTANT" and e.literal is not None
                                     and e.literal.kind == "NULL_LITERAL"):
                        continue  # LIMIT ALL / LIMIT NULL: no limit (OFFSET NULL: none)
                    if e.cls != "CONSTANT" or e.literal is None or e.literal.kind != "INTEGER" or e.literal.value < 0:
                        raise _Unsupported(f"{what} {self.span(e)!r}: not a non-negative integer constant")
                    if what == "LIMIT":
                        limit = e.literal.value
                    else:
                        offset = e.literal.value
            else:
                raise _Unsupported(m.type.replace("_MODIFIER", "").replace("_", " "))
        if distinct:
            node = Distinct(node.schema, node)
        if limit is None and offset == 0 and not distinct_on:
            # ORDER BY alone orders nothing a view keeps (Materialize drops it too), whatever
            # it reads: the query's own binding already checked it
            self.dropped_order(order)
            return node
        keys = [self.order_key(o, names, "ORDER BY") for o in order]
        # a LATERAL subquery's rows are per correlation key (its last columns): so is its top-k
        per = tuple(names[len(names) - self.lateral_keys[id(q)]:]) if id(q) in self.lateral_keys else ()
        if distinct_on:
            on = [self.order_key(Order(e), names, "DISTINCT ON")[0] for e in distinct_on]
            # PostgreSQL: the leading ORDER BY items are the DISTINCT ON expressions; the rest
            # orders each group, whose first row is kept (Materialize's TopK with limit 1)
            if [k[0] for k in keys[:len(on)]] != on[:len(keys)]:
                raise PlanError("SELECT DISTINCT ON expressions must match initial ORDER BY expressions")
            node = self.top_k(node, (*on, *per), tuple(keys[len(on):]), 1, 0, self.top_k_hint(q, "DISTINCT ON"))
            keys = [] if limit is None and offset == 0 else keys
        if limit is None and offset == 0:
            return node  # ORDER BY alone orders nothing a view keeps
        return self.top_k(node, per, tuple(keys), limit, offset, self.top_k_hint(q, "LIMIT"))

    def dropped_order(self, order) -> None:
        """An ``ORDER BY`` dropped (no ``LIMIT``/``OFFSET``) whose items hold subqueries: the
        tables they read are the view's inputs still (the catalog resolves them; a change of
        them changes nothing the view keeps), each subquery one that cannot raise, since
        PostgreSQL evaluates it per row -- one aggregate of columns (``count``, ``sum``,
        ``avg``, ``min``, ``max``) over base tables filtered by comparisons of columns and
        constants (one row by its shape, never an error); ``_Unsupported`` for any other."""
        for o in order:
            for x in o.expression.walk():
                if x.cls != "SUBQUERY":
                    continue
                sub = x.subquery
                text = self.span(x)
                safe = (sub is not None and sub.type == "SELECT_NODE" and len(sub.items) == 1 and not sub.group_by
                        and sub.having is None and sub.qualify is None and not sub.modifiers and not sub.ctes
                        and sub.from_ is not None and sub.from_.type == "BASE_TABLE" and len(sub.from_.name) == 1
                        and not sub.from_.column_aliases and not sub.sampled)
                agg = sub.items[0] if safe else None
                safe = safe and (agg.cls == "FUNCTION" and agg.name[-1] in _SAFE_ORDER_AGGREGATES
                                 and not agg.distinct and agg.filter is None and not agg.order_by
                                 and agg.over is None and all(c.cls == "COLUMN_REF" for c in agg.children))
                safe = safe and all(c.cls in ("COLUMN_REF", "CONSTANT") or c.type in _COMPARE_OPS
                                    or c.type == "CONJUNCTION_AND" for c in (sub.where.walk() if sub.where else ()))
                if not safe:
                    raise _Unsupported(f"ORDER BY subquery {text!r} (dropped without LIMIT) of other than one "
                                       "aggregate of columns over a table filtered by comparisons: it may raise")
                name = sub.from_.name[0]
                if self.cte(name) is not None or name not in self.schemas:
                    raise _Unsupported(f"ORDER BY subquery {text!r} reads {name!r}, not a table")
                self.used[name] = self.schemas[name]

    def top_k_hint(self, q: Query, kind: str) -> tuple[str, int] | None:
        name = f"{kind} INPUT GROUP SIZE"
        value = self.hint(q, name)
        return None if value is None else (name, value)

    def order_key(self, o, names: list[str], what: str) -> tuple[str, bool, bool]:
        """``(output column, descending, nulls first)`` of one ``ORDER BY`` item."""
        e = o.expression
        if (e.start, e.end) in self.order_names and self.order_names[(e.start, e.end)] in names:
            col = self.order_names[(e.start, e.end)]  # a hidden column, or a select item written alike
        elif e.cls == "CONSTANT" and e.literal is not None and e.literal.kind == "INTEGER":
            i = e.literal.value
            if not 1 <= i <= len(names):
                raise PlanError(f"{what} position {i} is not in the select list")
            col = names[i - 1]
        elif e.cls == "COLUMN_REF" and len(e.name) == 1 and e.name[0] in names:
            col = e.name[0]
        else:
            raise _Unsupported(f"{what} {self.span(e)!r}: not an output column")
        desc = o.direction == "DESCENDING"
        nulls_first = desc if o.nulls == "ORDER_DEFAULT" else o.nulls == "NULLS FIRST"
        return col, desc, nulls_first

    def top_k(self, node: Node, group: tuple[str, ...], keys: tuple, limit, offset: int, hint=None) -> Node:
        """A native :class:`TopK` (``hint``: its group-size hint, recorded), or -- when the
        order reads text (the collation's order, SQL's business) -- a :class:`SqlTopK`
        recomputed by DuckDB per affected group."""
        types = {c.name: c.type for c in node.schema}
        if not any(pa.types.is_string(types[c]) or pa.types.is_large_string(types[c]) for c, _, _ in keys):
            return TopK(node.schema, node, keys, limit, offset, group, hint)
        order = ", ".join(f"{identifier(c)}{' DESC' if d else ' ASC'} NULLS {'FIRST' if n else 'LAST'}"
                          for c, d, n in keys) or "1"
        rn = identifier("__rn")
        bound = f"{rn} > {offset}" + ("" if limit is None else f" AND {rn} <= {offset + limit}")
        part = f"PARTITION BY {', '.join(identifier(g) for g in group)} " if group else ""
        sql = (f"SELECT * EXCLUDE ({rn}) FROM (SELECT *, row_number() OVER ({part}ORDER BY {order}) AS {rn} "
               f"FROM {INPUT_RELATION}) WHERE {bound}")
        what = f"order_by=[{order}] limit={limit} offset={offset}"
        return SqlTopK(node.schema, node, group, (("top", what),), self.checked_sql(sql, node.schema, group, "ORDER BY"))

    def setop(self, q: Query) -> Node:
        for b in q.children:
            self.parents[id(b)] = q
        branches = [self.query(b) for b in q.children]
        for i, b in enumerate(branches):
            if isinstance(b, Fallback):
                branches[i] = self.branch(q, i, b)
        first = branches[0].schema
        names = [c.name for c in first]
        aligned = []
        for b in branches:
            if len(b.schema) != len(first):
                raise PlanError(f"each {q.setop} query must have the same number of columns: "
                                f"{len(first)} and {len(b.schema)}")
            if [c.name for c in b.schema] != names:
                b = fused(tuple(ColumnSpec(n, c.type) for n, c in zip(names, b.schema)), b, (),
                              tuple((c.name, n) for c, n in zip(b.schema, names)))
            aligned.append(b)
        schema = aligned[0].schema
        try:
            for b in aligned[1:]:
                schema = _unify(schema, b.schema)
        except SchemaError as e:
            raise _Unsupported(f"{q.setop} of columns of different types ({e})") from None
        if q.setop == "UNION":
            node: Node = Union(schema, tuple(aligned))
            return node if q.setop_all else Distinct(schema, node)
        if q.setop in ("EXCEPT", "INTERSECT") and len(aligned) == 2:
            a, b = aligned
            if not q.setop_all:
                a, b = Distinct(a.schema, a), Distinct(b.schema, b)
            minus = Threshold(schema, Union(schema, (a, Negate(b.schema, b))))
            if q.setop == "EXCEPT":
                return minus
            # INTERSECT ALL: min(a, b) = a - max(a - b, 0) (Materialize lowers it so)
            return Threshold(schema, Union(schema, (a, Negate(schema, minus))))
        raise _Unsupported(f"{q.setop}{' ALL' if q.setop_all else ''}")

    def branch(self, q: Query, i: int, f: Fallback) -> Fallback:
        """Branch ``i`` of set operation ``q``, which falls back, as a Fallback leaf
        recomputing its own text (typed by ``subquery_schema``), its change fed to the set
        operator; ``_Unsupported`` (the enclosing query falls back) when its text is not
        known alone -- a ``CTE`` in scope, no typing -- or the typing refuses it."""
        why = f"{q.setop} branch: {f.reason}"
        if self.subquery_schema is None or any(self.ctes):
            raise _Unsupported(why)
        span = self.branch_span(q.children[i])
        text = self.text[span[0]:span[1]] if span is not None else ""
        schema = self.subquery_schema(text) if text else None
        if schema is None:
            raise _Unsupported(why)
        return Fallback(as_schema(schema, f"{q.setop} branch"), text, f.reason, text)

    def branch_span(self, q: Query) -> tuple[int, int] | None:
        """The text span of query ``q`` when it is known: recorded (the whole query, a
        ``FROM`` subquery) or a set operation's branch, found by splitting the parent's
        text at its top-level ``UNION``/``EXCEPT``/``INTERSECT`` into parts and giving each
        branch as many parts as it has ``SELECT`` leaves (DuckDB flattens a chain of one
        operator into one node; parenthesized parts are parsed for their leaves)."""
        if id(q) in self.spans:
            return self.spans[id(q)]
        parent = self.parents.get(id(q))
        if parent is None:
            return None
        span = self.branch_span(parent)
        if span is None:
            return None
        parts = _setop_parts(self.text, span)
        if parts is None:
            return None
        at, found = 0, {}
        for child in parent.children:
            want, got, first = _leaves(child), 0, at
            while got < want and at < len(parts):
                try:
                    got += _leaves(parse_tree(self.text[parts[at][0]:parts[at][1]])[0])
                except SQLError:
                    return None
                at += 1
            if got != want:
                return None
            found[id(child)] = _unparenthesized(self.text, parts[first][0], parts[at - 1][1])
        if at != len(parts):
            return None
        self.spans.update(found)
        return found.get(id(q))

    # ---- WITH, FROM subqueries, USING, constants (plan39)

    def with_ctes(self, q: Query) -> Node:
        """``WITH``: each CTE is planned where it is referenced (Materialize's ``Let``,
        inlined); a CTE sees the CTEs before it, never itself."""
        frame: dict[str, tuple[Query, dict, tuple[str, ...]]] = {}
        for name, cq in q.ctes:
            if cq.type == "RECURSIVE_CTE_NODE":
                raise _Unsupported("WITH RECURSIVE: a fixed point iterated to convergence at every commit "
                                   "(Materialize's LetRec), which colmz's operators do not iterate")
            frame[name] = (cq, dict(frame), self.cte_columns(name))
        self.ctes.append(frame)
        try:
            return self.query_checked(dataclasses.replace(q, ctes=()))
        finally:
            self.ctes.pop()

    def cte(self, name: str):
        """The query of CTE ``name`` in scope, planned in the scope it was defined in."""
        for depth in range(len(self.ctes) - 1, -1, -1):
            if name in self.ctes[depth]:
                return self.ctes[:depth], self.ctes[depth][name]
        return None

    def cte_columns(self, name: str) -> tuple[str, ...]:
        """The column names ``WITH name (a, b) AS (...)`` gives CTE ``name`` (``()``: none),
        read from the text (the parse tree keeps no CTE's column names, :func:`_cte_columns`);
        ``_Unsupported`` when the text's definitions of ``name`` are not read or disagree."""
        found = _cte_columns(self.text).get(name)
        if found is None or len(found) != 1:
            raise _Unsupported(f"WITH {name!r}: its column names are not read from the text")
        (cols,) = found
        return cols

    def cte_source(self, found, alias: str, column_aliases, what: str):
        outer, (cq, earlier, cte_columns) = found
        # the reference's own column aliases rename the CTE's (renamed) columns first
        column_aliases = (*column_aliases, *cte_columns[len(column_aliases):])
        saved = self.ctes
        self.ctes = [*outer, earlier]
        try:
            return self.subquery_source(cq, alias, column_aliases, what)
        finally:
            self.ctes = saved

    def subquery_source(self, query: Query, alias: str, column_aliases, what: str, t: Table | None = None):
        """A subquery (``t``: in ``FROM``) or a CTE as a scope of its output columns; a
        ``FROM`` subquery that falls back is a Fallback leaf of its own (:meth:`subtree`)."""
        if t is not None and t.start >= 0:
            self.spans[id(query)] = _unparenthesized(self.text, t.start, t.end)
        inner = self.query(query)
        if isinstance(inner, Fallback):
            if t is None:
                raise _Unsupported(f"{what}: {inner.reason}")
            inner = self.subtree(inner, t, what)
        names = [c.name for c in inner.schema]
        if len(column_aliases) > len(names):
            raise PlanError(f"{what} has {len(names)} columns available but {len(column_aliases)} columns specified")
        names = list(column_aliases) + names[len(column_aliases):]
        cols = tuple((c.name, f"{alias}.{n}") for c, n in zip(inner.schema, names))
        node = fused(tuple(ColumnSpec(p, c.type) for (_, p), c in zip(cols, inner.schema)), inner, (), cols)
        return node, [_Source(alias, {n: (p, c.type) for n, (_, p), c in zip(names, cols, inner.schema)})], []

    def subtree(self, f: Fallback, t: Table, what: str) -> Fallback:
        """A ``FROM`` subquery that falls back, as a Fallback leaf recomputing its own query
        (typed by ``subquery_schema``); ``_Unsupported`` (the enclosing query falls back) when
        the planner has no way to type it or the typing refuses."""
        text = self.text[t.start:t.end].strip() if t.start >= 0 else ""
        if text.startswith("(") and text.endswith(")"):
            text = text[1:-1].strip()
        schema = self.subquery_schema(text) if (self.subquery_schema is not None and text) else None
        if schema is None:
            raise _Unsupported(f"{what}: {f.reason}")
        return Fallback(as_schema(schema, what), f.text, f.reason, text)

    def using(self, t: Table, kind: str, lsrc: list[_Source], rsrc: list[_Source]) -> list[Expression]:
        """``JOIN ... USING (c, ...)`` as the equalities ``l.c = r.c``; the right side's ``c``
        is then reachable qualified only and ``*`` lists the ``USING`` columns first, as
        PostgreSQL does (for inner and left joins the merged column is the left one's; for
        right and full joins it is ``COALESCE(l.c, r.c)``, a column of its own computed after
        the join, both sides' ``c`` reachable qualified only: :meth:`merged_using`)."""
        self.merging.pop(id(t), None)  # planned again (a CTE's second reference): merged afresh
        if len(lsrc) != 1:
            raise _Unsupported("JOIN ... USING with several relations on its left")
        out = []
        for name in t.using:
            ls = [x for x in lsrc if name in x.columns and name not in x.hidden]
            rs = [x for x in rsrc if name in x.columns and name not in x.hidden]
            for side, found in (("left", ls), ("right", rs)):
                if len(found) != 1:
                    raise PlanError(f"column {name!r} specified in USING clause does not exist in {side} table"
                                    if not found else f"common column name {name!r} appears more than once in {side} table")
            out.append(Expression("COMPARISON", "COMPARE_EQUAL", -1, -1, (
                Expression("COLUMN_REF", "COLUMN_REF", -1, -1, name=(ls[0].alias, name)),
                Expression("COLUMN_REF", "COLUMN_REF", -1, -1, name=(rs[0].alias, name)))))
            rs[0].hidden.add(name)
            if kind in ("right", "full"):
                ls[0].hidden.add(name)
                self.merging.setdefault(id(t), []).append((name, ls[0].columns[name][0], rs[0].columns[name][0]))
        cols = lsrc[0].columns
        lsrc[0].columns = {**{n: cols[n] for n in t.using}, **{n: v for n, v in cols.items() if n not in t.using}}
        return out

    def one_side(self, e: Expression, scope: _Scope, lnames: set[str]) -> int | None:
        """0 or 1 when every column ``e`` reads is on the join's left or right input."""
        sides = set()
        for sub in e.walk():
            if sub.cls == "SUBQUERY":
                return None
            if sub.cls == "COLUMN_REF":
                sides.add(0 if scope.column(sub) in lnames else 1)
        return sides.pop() if len(sides) == 1 else None

    def constant(self, q: Query) -> Node:
        """``SELECT`` of literals without ``FROM``: one row, PostgreSQL's literal types
        (an integer literal is ``integer`` if it fits, else ``bigint``)."""
        if q.where is not None or q.group_by or q.having is not None:
            raise _Unsupported("SELECT without FROM with WHERE, GROUP BY or HAVING")
        names, values, types = [], [], []
        subqueries = {i: e for i, e in enumerate(q.items)
                      if e.cls == "SUBQUERY" or self.quantified_constant(e) is not None}
        if subqueries:
            return self.constant_with_subqueries(q, subqueries)
        for e in q.items:
            null = self.typed_null(e)
            if null is not None:  # NULL::int and the like: a NULL of that type, named by it
                names.append(e.alias or null[0])
                values.append(None)
                types.append(null[1])
                continue
            cast = self.typed_literal(e)
            if cast is not None:  # 20::bigint and the like: the literal's value in that type
                names.append(e.alias or cast[0])
                values.append(cast[2])
                types.append(cast[1])
                continue
            lit = e.literal if e.cls == "CONSTANT" else None
            if lit is None or lit.kind not in ("INTEGER", "STRING", "BOOLEAN"):
                raise _Unsupported(f"select item {self.span(e)!r} without FROM: not an integer, text or boolean "
                                   "literal or a NULL cast to one of their types")
            v = lit.value
            if lit.kind == "INTEGER":
                t = pa.int32() if -(2**31) <= v < 2**31 else pa.int64() if -(2**63) <= v < 2**63 else None
                if t is None:
                    raise _Unsupported(f"select item {self.span(e)!r}: an integer literal beyond bigint (numeric)")
            else:
                t = pa.string() if lit.kind == "STRING" else pa.bool_()
            names.append(e.alias or "?column?")
            values.append(v)
            types.append(t)
        names = [n for _, n in _unique([(n, n) for n in names])]
        return Constant(tuple(ColumnSpec(n, t) for n, t in zip(names, types)), (tuple(values),))

    def constant_with_subqueries(self, q: Query, subqueries: dict[int, Expression]) -> Node:
        """``SELECT`` without ``FROM`` whose items include scalar subqueries of one row by
        their shape: the other items' constant row (with a column of its own, so that it is
        never empty) crossed with each subquery (:meth:`scalar_subquery`), projected to the
        items in order."""
        rest = tuple(e for i, e in enumerate(q.items) if i not in subqueries)
        anchor = self.fresh("row")
        const = self.constant(dataclasses.replace(q, items=rest, modifiers=()))
        node: Node = Constant(const.schema + (ColumnSpec(anchor, pa.int32()),),
                              tuple((*r, 1) for r in const.rows))
        at = iter(c.name for c in const.schema)
        select = []
        for i, e in enumerate(q.items):
            if i in subqueries and self.quantified_constant(e) is not None:
                node, col = self.constant_quantified(node, e, *self.quantified_constant(e))
                select.append((col, e.alias or "?column?"))
            elif i in subqueries:
                node, col = self.scalar_subquery(node, e)
                select.append((col, e.alias or self.span(e)))
            else:
                select.append((next(at), ""))
        types = {c.name: c.type for c in node.schema}
        select = [(src, name or src) for src, name in select]
        select = _unique(select)
        return fused(tuple(ColumnSpec(n, types[src]) for src, n in select), node, (), tuple(select))

    #: Types a ``NULL`` cast to them may hold in a constant relation: the written type (one
    #: word, lower case) -> PostgreSQL's name of it (the column's name, as PostgreSQL names a
    #: cast) and the Arrow type the recompute path gives the column.
    NULL_CASTS = {"int": ("int4", pa.int32()), "integer": ("int4", pa.int32()), "int4": ("int4", pa.int32()),
                  "bigint": ("int8", pa.int64()), "int8": ("int8", pa.int64()), "text": ("text", pa.string()),
                  "varchar": ("varchar", pa.string()), "boolean": ("bool", pa.bool_()),
                  "bool": ("bool", pa.bool_())}

    def typed_literal(self, e: Expression):
        """``(name, type, value)`` of a select item ``n::t`` / ``CAST(n AS t)``: an integer
        literal cast to an integer type of :data:`NULL_CASTS` it fits, else ``None``."""
        if e.cls != "CAST" or len(e.children) != 2 or e.children[1].children:
            return None
        x, t = e.children
        if x.cls != "CONSTANT" or x.literal is None or x.literal.kind != "INTEGER" or t.start < 0:
            return None
        found = self.NULL_CASTS.get(self.text[t.start : t.end].strip().lower())
        if found is None or not pa.types.is_integer(found[1]):
            return None
        bits = found[1].bit_width
        v = x.literal.value
        return (*found, v) if -(2 ** (bits - 1)) <= v < 2 ** (bits - 1) else None

    def typed_null(self, e: Expression):
        """``(name, type)`` of a select item ``NULL::t`` / ``CAST(NULL AS t)`` for ``t`` of
        :data:`NULL_CASTS`, else ``None``."""
        if e.cls != "CAST" or len(e.children) != 2 or e.children[1].children:
            return None
        x, t = e.children
        if x.cls != "CONSTANT" or x.literal is None or x.literal.kind != "NULL_LITERAL" or t.start < 0:
            return None
        return self.NULL_CASTS.get(self.text[t.start : t.end].strip().lower())

    # ---- scalars as SQL text (per-group recompute by DuckDB)

    #: Calls whose value depends on when they run: never recomputed per group.
    VOLATILE_CALLS = frozenset({"random", "setseed", "gen_random_uuid", "uuid", "uuidv4", "uuidv7", "now",
                                "current_timestamp", "get_current_timestamp", "get_current_time", "current_date",
                                "current_time", "localtimestamp", "localtime", "transaction_timestamp",
                                "statement_timestamp", "clock_timestamp", "timeofday", "today", "txid_current",
                                "mz_now", "nextval", "currval", "current_setting"})

    def recompute_text(self, e: Expression, column_of) -> str:
        """The user's text of ``e`` with every column reference replaced, by position, with
        the quoted plan name ``column_of`` binds it to (so it reads the input's columns)."""
        if e.start < 0:
            raise _Unsupported(f"an expression without a position in the text ({e.type})")
        refs: dict[tuple[int, int], str] = {}
        stack = [e]
        while stack:
            sub = stack.pop()
            if sub.cls == "SUBQUERY":
                raise _Unsupported(f"a subquery in an expression ({self.span(sub)!r})")
            if sub.cls in ("FUNCTION", "WINDOW") and sub.name and sub.name[-1].lower() in self.VOLATILE_CALLS:
                raise _Unsupported(f"{sub.name[-1]}() in {self.span(e)!r}: its value depends on when it runs")
            group = self.group_key(sub) if sub.cls != "COLUMN_REF" else None
            if sub.cls == "COLUMN_REF" or group is not None:
                if (self.named_windows is not None and sub.cls == "COLUMN_REF"
                        and self.named_windows[0] <= sub.start and sub.end <= self.named_windows[1]):
                    continue  # a named window's, read in the WINDOW clause (:meth:`window`)
                if sub.start < e.start or sub.end > e.end:
                    raise _Unsupported(f"column reference outside {self.span(e)!r}")
                # a GROUP BY expression reads its column; a reference DuckDB copied (simple
                # CASE) is one position, replaced once
                refs[(sub.start, sub.end)] = group if group is not None else column_of(sub)
                continue
            stack.extend(sub.children)
        out, at = [], e.start
        for (start, end), col in sorted(refs.items()):
            if start < at:
                raise _Unsupported(f"{self.span(e)!r}: a reference without its own position")
            out.append(self.text[at:start])
            out.append(identifier(col))
            at = end
        out.append(self.text[at:e.end])
        return "".join(out)

    # ---- scalars as SQL over each delta (Map/Filter segments, views39c)

    def native(self, e: Expression, scope: _Scope, sources: list[_Source]) -> bool:
        """Whether conjunct ``e`` is an equality of columns or a native predicate."""
        try:
            if self.equality(e, scope) is not None:
                return True
            types = {p: t for s in sources for p, t in s.columns.values()}
            self.predicates(e, scope.column, types)
            return True
        except (_Unsupported, PlanError):
            # PlanError: the predicate binds an expression where a column goes (``v % 2 = 0``);
            # an unknown column is refused by binding the SQL text's column references
            return False

    def sql_text(self, e: Expression, names: list[str], column_of, aggregate_of=None) -> str:
        """The user's text of ``e`` with each column reference replaced by the placeholder of
        its column among ``names`` (the segment's input) -- and, with ``aggregate_of`` (over a
        reduce's output), each aggregate call by its output column's; ``_Unsupported`` for
        what SQL over a delta cannot evaluate (subqueries, window functions, aggregates
        without ``aggregate_of``, volatile functions)."""
        if e.start < 0:
            raise _Unsupported(f"expression {e.type}: no position in the text")
        refs: list[tuple[Expression, str]] = []

        def visit(sub: Expression) -> None:
            if sub.cls != "COLUMN_REF" and self.group_key(sub) is not None and self.group_key(sub) in names:
                refs.append((sub, self.group_key(sub)))  # a GROUP BY expression: its column
                return
            if _array_any(sub):
                # x op ANY (ARRAY[...]), which DuckDB reads as a subquery over unnest: a
                # scalar over the row, the user's text as written
                for part in (*sub.children, *sub.subquery.items[0].children):
                    visit(part)
                return
            if sub.cls == "SUBQUERY" and id(sub) in self.subquery_columns:
                refs.append((sub, self.subquery_columns[id(sub)]))  # its value, joined in
                return
            if sub.cls == "SUBQUERY":
                raise _Unsupported(f"a subquery in an expression ({self.span(sub)!r})")
            if sub.cls == "WINDOW":
                raise _Unsupported(f"a window function ({self.span(sub)!r})")
            if sub.cls == "STAR":
                raise _Unsupported(f"{self.span(e)!r}: a * inside an expression")
            if _is_aggregate(sub):
                if aggregate_of is None:
                    raise _Unsupported(f"{self.span(e)!r}: an aggregate inside an expression")
                refs.append((sub, aggregate_of(sub)))
                return
            if sub.cls == "FUNCTION" and sub.name and sub.name[-1].lower() in self.VOLATILE_CALLS:
                raise _Unsupported(f"{self.span(e)!r}: {sub.name[-1]} is volatile")
            if sub.cls == "COLUMN_REF":
                refs.append((sub, column_of(sub)))
                return
            for c in sub.children:
                visit(c)

        visit(e)
        out, at, last = [], e.start, None
        for c, col in sorted(refs, key=lambda r: r[0].start):
            if last is not None and (c.start, c.end, col) == last:
                continue  # one reference DuckDB copied (CASE x WHEN a ... is x = a per WHEN)
            if c.start < at or c.end > e.end:
                raise _Unsupported(f"{self.span(e)!r}: a reference without its own position")
            last = (c.start, c.end, col)
            out += [self.text[at:c.start], placeholder(names.index(col))]
            at = c.end
        out.append(self.text[at:e.end])
        return "".join(out)

    def sql_segment(self, node: Node, where: tuple[str, ...], select, shown: list[str]) -> Node:
        """A :class:`SqlMapFilter` over ``node``, its output types DuckDB's for the
        translated segment (``_Unsupported`` naming the error when it does not translate or bind)."""
        if isinstance(node, SqlMapFilter) and node.select is None:
            # one segment: a filter's output columns are its input's, so the placeholders of
            # ``where`` and ``select`` read the same columns (one DuckDB call, not two)
            where, shown, node = node.where + where, [*node.shown, *shown], node.input
        try:
            schema = SqlMapFilterOp(node.schema, where, select).schema
            # PostgreSQL's WHERE takes a boolean only; DuckDB reads an integer as one
            typed = SqlMapFilterOp(node.schema, (), [(w, f"w{i}") for i, w in enumerate(where)]).schema if where else ()
        except (SQLError, TypeError, ValueError) as e:
            raise _Unsupported(f"{', '.join(repr(x) for x in shown)}: {e}") from None
        for c, text in zip(typed, shown):
            if not (pa.types.is_boolean(c.type) or pa.types.is_null(c.type)):
                raise _Unsupported(f"predicate {text!r}: a {c.type} value as a condition")
        return SqlMapFilter(schema, node, where, None if select is None else tuple(select), tuple(shown))

    def items_segment(self, node: Node, select: list[tuple[str, str]], texts: dict[int, str],
                      shown: list[str]) -> Node:
        """The select list over ``node`` as one SQL segment: items ``texts`` (by position)
        as SQL, the others their column's placeholder."""
        names = [c.name for c in node.schema]
        items = [(texts[i] if i in texts else placeholder(names.index(src)), n) for i, (src, n) in enumerate(select)]
        return self.sql_segment(node, (), items, shown)

    def checked_sql(self, sql: str, schema: Schema, key, what: str) -> str:
        """``sql`` translated, with its answer's columns checked over an empty input."""
        from colmz.sql.floatcols import column_kind, float_column_rules
        from colmz.sql.translate import translate

        try:
            # a float column's PostgreSQL rules (colmz.sql.floatcols), as the catalog's queries get
            translated = float_column_rules(translate(sql), frozenset(
                (n.lower(), column_kind(c.type)) for i, c in enumerate(as_schema(schema, "schema"))
                for n in (c.name, placeholder(i)[1:-1])))
            GroupRecompute(schema, list(key), translated)
        except (SQLError, TypeError, ValueError) as e:
            raise _Unsupported(f"{what} through SQL: {e}") from None
        return translated

    def group_item(self, q: Query, g: Expression, scope: _Scope) -> Expression:
        """GROUP BY item ``g`` as the expression it names (a select item by position or by
        alias, as PostgreSQL reads them)."""
        if g.cls == "CONSTANT" and g.literal is not None and g.literal.kind == "INTEGER":
            i = g.literal.value
            if not 1 <= i <= len(q.items):
                raise PlanError(f"GROUP BY position {i} is not in the select list")
            g = q.items[i - 1]
        if g.cls == "COLUMN_REF" and len(g.name) == 1:
            # PostgreSQL reads an input column first, then a select item's alias
            try:
                scope.column(g)
            except PlanError:
                named = [e for e in q.items if e.alias == g.name[0]]
                if not named:
                    raise
                g = named[0]
        return g

    def group_key(self, e: Expression) -> str | None:
        """The column a Map before the reduce computes GROUP BY expression ``e`` into."""
        if e.cls == "COLUMN_REF" or e.start < 0:
            return None
        return self.group_exprs.get(" ".join(self.span(e).split()))

    def group_expressions(self, q: Query, node: Node, scope: _Scope) -> Node:
        """``node`` with a column per ``GROUP BY`` expression that is not a column, computed
        by a SQL segment before the reduce (Materialize maps group keys before a Reduce);
        :attr:`group_exprs` names them."""
        self.group_exprs = {}
        exprs = []
        for g in q.group_by:
            g = self.group_item(q, g, scope)
            if g.cls == "COLUMN_REF" or g.start < 0:
                continue
            key = " ".join(self.span(g).split())
            if key in self.group_exprs or any(key == " ".join(self.span(x).split()) for x in exprs):
                continue
            if any(sub.cls in ("SUBQUERY", "WINDOW") or _is_aggregate(sub) for sub in g.walk()):
                raise _Unsupported(f"GROUP BY {self.span(g)!r}: an expression needing SQL")
            exprs.append(g)
        if not exprs:
            return node
        names = [c.name for c in node.schema]
        items = [(placeholder(i), n) for i, n in enumerate(names)]
        found = {}
        for g in exprs:
            col = self.fresh("group")
            items.append((self.sql_text(g, names, scope.column), col))
            found[" ".join(self.span(g).split())] = col
        node = self.sql_segment(node, (), items, [self.span(g) for g in exprs])
        self.group_exprs = found
        return node

    def group_columns(self, q: Query, scope: _Scope) -> list[str]:
        group: list[str] = []
        for g in q.group_by:
            g = self.group_item(q, g, scope)
            c = self.group_key(g)
            if c is None:
                if g.cls != "COLUMN_REF":
                    raise _Unsupported(f"GROUP BY {self.span(g)!r}: an expression needing SQL")
                c = scope.column(g)
            if c not in group:
                group.append(c)
        return group

    def basic_reduce(self, q: Query, node: Node, scope: _Scope, why: str) -> tuple[Node, list[tuple[str, str]]]:
        """A reduce the native operators cannot hold (``why``): every aggregate, select item
        and ``HAVING`` recomputed by DuckDB per affected group (Materialize's basic plan)."""
        group = self.group_columns(q, scope)
        select, items, texts = [], [], []
        for e in q.items:
            if e.cls == "STAR":
                raise _Unsupported(f"{self.span(e)!r} over a GROUP BY")
            if self.group_key(e) is not None:
                select.append((self.group_key(e), e.alias or self.span(e)))
                continue
            if e.cls == "COLUMN_REF" and scope.column(e) in group:
                select.append((scope.column(e), e.alias or e.name[-1]))
                continue
            name = self.fresh("agg")
            items.append((name, self.span(e)))
            texts.append(f"{self.recompute_text(e, scope.column)} AS {identifier(name)}")
            select.append((name, e.alias or self.span(e)))
        having = self.recompute_text(q.having, scope.column) if q.having is not None else ""
        sql = f"SELECT {', '.join([*(identifier(g) for g in group), *texts])} FROM {INPUT_RELATION}"
        if group:
            sql += f" GROUP BY {', '.join(identifier(g) for g in group)}"
        if having:
            sql += f" HAVING {having}"
        translated = self.checked_sql(sql, node.schema, group, f"aggregates ({why})")
        schema = output_schema(node.schema, translated)
        shown = self.span(q.having) if q.having is not None else ""
        return BasicReduce(schema, node, tuple(group), tuple(items), translated, shown), select

    def window(self, q: Query, node: Node, scope: _Scope) -> tuple[Node, list[tuple[str, str]]]:
        """Window functions: the select items needing SQL computed by DuckDB per affected
        partition -- the columns every window's ``PARTITION BY`` names (Materialize's basic
        plan for window functions). Named windows (``OVER w``, ``WINDOW w AS (...)``): the
        named spec's ``PARTITION BY``, and the query's ``WINDOW`` clause -- its column
        references read from the input -- appended to the SQL DuckDB runs; a spec naming a
        window and adding to it (``OVER (w ROWS ...)``) is one partition (coarser, still exact)."""
        select, items, texts = [], [], []
        key: list[str] | None = None
        clause = self.window_clause(q)
        self.named_windows = clause
        try:
            return self.window_items(q, node, scope, clause, select, items, texts, key)
        finally:
            self.named_windows = None

    def window_items(self, q, node, scope, clause, select, items, texts, key):
        for e in q.items:
            if e.cls == "STAR":
                if e.star_modified:
                    raise _Unsupported(f"{self.span(e)!r} (EXCLUDE/REPLACE/RENAME/COLUMNS)")
                select.extend((p, n) for n, p in scope.star(e.relation))
                continue
            if e.cls == "COLUMN_REF":
                select.append((scope.column(e), e.alias or e.name[-1]))
                continue
            for w in e.walk():
                if w.cls == "WINDOW":
                    part = self.partition_columns(w, scope)
                    key = part if key is None else [c for c in key if c in part]
            name = self.fresh("w")
            items.append((name, self.span(e)))
            texts.append(f"{self.recompute_text(e, scope.column)} AS {identifier(name)}")
            select.append((name, e.alias or self.span(e)))
        key = key or []
        sql = f"SELECT *, {', '.join(texts)} FROM {INPUT_RELATION}"
        if clause is not None:
            # the named windows' definitions, their column references read from the input
            refs = {}
            for e in q.items:
                for sub in e.walk():
                    if sub.cls == "COLUMN_REF" and clause[0] <= sub.start and sub.end <= clause[1]:
                        refs[(sub.start, sub.end)] = scope.column(sub)
            out, at = [], clause[0]
            for (start, end), col in sorted(refs.items()):
                out += [self.text[at:start], identifier(col)]
                at = end
            out.append(self.text[at:clause[1]])
            sql += " WINDOW " + "".join(out)
        translated = self.checked_sql(sql, node.schema, key, "window functions")
        schema = output_schema(node.schema, translated)
        return Window(schema, node, tuple(key), tuple(items), translated), select

    def partition_columns(self, w: Expression, scope: _Scope) -> list[str]:
        """The columns of a window's ``PARTITION BY`` (each must be a column)."""
        text = self.text[w.start:w.end]
        toks = tokenize(text)
        over = next((i for i, t in enumerate(toks) if t.kind == "word" and t.text.upper() == "OVER"), None)
        base = w.start
        if (over is not None and over + 2 == len(toks) and toks[over + 1].kind in ("word", "qident")
                and self.named_windows is not None and toks[over + 1].name in self.named_windows[2]):
            # OVER name: the spec of the query's WINDOW clause (DuckDB copied it into the call)
            base, end = self.named_windows[2][toks[over + 1].name]
            text = self.text[base:end]
            toks = (None, *tokenize(text))  # toks[over + 1] is the spec's "("
            over = 0
        elif over is None or over + 1 >= len(toks) or toks[over + 1].text != "(":
            raise _Unsupported(f"window {self.span(w)!r}: a named window")
        lo = hi = None
        depth = 0
        for i in range(over + 1, len(toks)):
            t = toks[i]
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
                if depth == 0:
                    hi = hi if hi is not None else (t.start if lo is not None else None)
                    break
            elif depth == 1 and t.kind == "word":
                word = t.text.upper()
                if word == "PARTITION" and i + 1 < len(toks) and toks[i + 1].text.upper() == "BY":
                    lo = toks[i + 1].end
                elif lo is not None and hi is None and word in ("ORDER", "ROWS", "RANGE", "GROUPS"):
                    hi = t.start
        if lo is None:
            return []
        cols = []
        for c in w.children:
            if c.start >= 0 and base + lo <= c.start and c.end <= base + hi:
                if c.cls != "COLUMN_REF":
                    raise _Unsupported(f"window {self.span(w)!r}: PARTITION BY an expression")
                cols.append(scope.column(c))
        return cols

    # ---- subqueries in WHERE: semijoins and antijoins (plan39)

    def split_where(self, where: Expression | None):
        """``WHERE``'s conjuncts as ``(plain, semijoins, temporal)``: ``[NOT] EXISTS`` and
        ``IN`` subqueries become semijoins (``(expr, negated)``), conjuncts calling
        ``mz_now()`` temporal bounds."""
        plain, semi, temporal = [], [], []
        for c in _conjuncts(where):
            negated = c.cls == "OPERATOR" and c.type == "OPERATOR_NOT" and len(c.children) == 1
            bare = c.children[0] if negated else c
            if bare.cls == "SUBQUERY" and not _array_any(bare):
                semi.append((bare, negated))
                continue
            subs = list(c.walk())
            now = any(x.cls == "FUNCTION" and x.name and x.name[-1].lower() == "mz_now" for x in subs)
            if any(x.cls == "SUBQUERY" and not _array_any(x) for x in subs) and now:
                raise _Unsupported(f"a subquery in an expression ({self.span(c)!r})")
            # (a scalar subquery inside a condition is a column joined in: query_checked)
            if now:
                temporal.append(c)
                continue
            plain.append(c)
        return plain, semi, temporal

    def semijoin(self, node: Node, scope: _Scope, e: Expression, negated: bool) -> Node:
        """``node`` restricted to the rows with (``negated``: without) a match in the
        subquery: a join with the distinct keys of the subquery's side (Materialize's
        decorrelation), projected back to ``node``'s columns; an antijoin is ``node`` minus
        that semijoin."""
        text = self.span(e)
        if e.children:  # x IN (subquery)
            x = e.children[0]
            after = [t.text.upper() for t in tokenize(self.text[x.end:e.end])[:2]]
            if x.start >= 0 and after[:1] != ["IN"] and not (negated and after == ["NOT", "IN"]):
                # DuckDB reads x > ALL (S) as NOT (x <= ANY (S)), its span x's: the user's
                # operator and quantifier follow x in the text
                after = [t.text.upper() for t in tokenize(self.text[x.end:])[:2]]
                if after in (["=", "ANY"], ["=", "SOME"]) and not negated:
                    after = ["IN"]  # = ANY is IN
                elif len(after) == 2 and after[1] in ("ANY", "SOME", "ALL") and negated == (after[1] == "ALL"):
                    return self.quantified(node, scope, e, x, after[0], after[1] == "ALL")
            if after[:1] != ["IN"] and not (negated and after == ["NOT", "IN"]):
                raise _Unsupported(f"{text!r}: a quantified comparison (ANY/ALL/SOME)")
            if (not negated and x.cls == "FUNCTION" and x.name == ("row",) and x.children
                    and all(c.cls == "COLUMN_REF" for c in x.children)):
                return self.row_in(node, scope, e, x, text)
            if x.cls != "COLUMN_REF":
                raise _Unsupported(f"{text!r}: IN of an expression needing SQL")
            if not negated and _reads_outside(e.subquery):
                try:
                    return self.correlated_in(node, scope, e, x, text)
                except _Unsupported:
                    pass  # not decorrelated: the uncorrelated path says why
            right = self.one_column_subquery(e, text, "IN subquery")
            pairs = [(scope.column(x), right.schema[0].name)]
            if negated:
                return self.not_in(node, right, pairs[0])
        else:
            if not self.text[e.start:e.end].lstrip().upper().startswith("EXISTS"):
                raise _Unsupported(f"a scalar subquery as a condition ({text!r})")
            cross: list[Expression] = []
            right, pairs = self.correlated(e.subquery, scope, text, cross)
            if cross:
                return self.semi_residual(node, right, pairs, cross, negated, text)
        semi = self.semi(node, right, pairs)
        if not negated:
            return semi
        return Union(node.schema, (node, Negate(node.schema, semi)))

    def row_in(self, node: Node, scope: _Scope, e: Expression, x: Expression, text: str) -> Node:
        """``(a, b, ...) IN (subquery)`` in ``WHERE``, columns compared with an uncorrelated
        subquery's columns: a semijoin on all of them (a row with a NULL among them matches
        nothing: the comparison is false or unknown, the row dropped either way)."""
        try:
            right = self.query(e.subquery)
        except PlanError as err:
            raise _Unsupported(f"IN subquery {text!r}: {err} (correlated ones are absent)") from None
        if isinstance(right, Fallback):
            raise _Unsupported(f"IN subquery {text!r}: {right.reason}")
        if len(right.schema) != len(x.children):
            raise PlanError(f"subquery has {'too many' if len(right.schema) > len(x.children) else 'too few'} "
                            f"columns in {text!r}")
        return self.semi(node, right, [(scope.column(c), r.name) for c, r in zip(x.children, right.schema)])

    def correlated_in(self, node: Node, scope: _Scope, e: Expression, x: Expression, text: str) -> Node:
        """``x IN (subquery)`` as a ``WHERE`` conjunct, the subquery correlated by equalities of
        columns (:meth:`decorrelated`): a semijoin on ``x`` and the outer columns against the
        subquery's value and inner keys. A global aggregate's keys without rows have no row
        here, where the subquery has one: right for aggregates that are NULL over no rows (a
        NULL matches nothing), refused for ``count`` (0 there)."""
        sub = e.subquery
        if sub.type != "SELECT_NODE" or sub.ctes or sub.from_ is None or len(sub.items) != 1:
            raise _Unsupported(f"IN subquery {text!r}: correlated, not one SELECT ... FROM of one column")
        right, n, pairs, _, counts = self.decorrelated(sub, scope, f"IN subquery {text!r}")
        if counts:
            raise _Unsupported(f"IN subquery {text!r}: a correlated count (0 over no rows)")
        cols = [c.name for c in right.schema]
        on = [(scope.column(x), cols[0]), *((o, cols[n + i]) for i, (o, _) in enumerate(pairs))]
        if len({o for o, _ in on}) != len(on):
            raise _Unsupported(f"IN subquery {text!r}: one outer column matched twice (a filter)")
        return self.semi(node, right, on)

    def is_in(self, e: Expression) -> bool:
        """Whether subquery expression ``e`` is ``x IN (subquery)`` (or ``x = ANY``/``SOME``)."""
        x = e.children[0]
        if x.start < 0:
            return False
        after = [t.text.upper() for t in tokenize(self.text[x.end:e.end])[:2]]
        if after[:1] == ["IN"]:
            return True
        after = [t.text.upper() for t in tokenize(self.text[x.end:])[:2]]
        return after in (["=", "ANY"], ["=", "SOME"])

    def in_value(self, node: Node, scope: _Scope, e: Expression) -> tuple[Node, str]:
        """``x IN (subquery)`` as a select item's value, with PostgreSQL's NULLs: true when
        ``x`` matches a row; else false when the subquery is empty; else NULL when ``x`` is
        NULL or the subquery holds a NULL; else false. ``node`` left-joined with the
        subquery's distinct values (a NULL ``x`` matches none) and crossed with the
        subquery's global counts of rows and of non-NULL values (one row, empty input
        included): O(delta) but for a change of those counts, which re-reads ``node``."""
        text = self.span(e)
        x = e.children[0]
        if x.cls != "COLUMN_REF":
            raise _Unsupported(f"select item {text!r}: IN of an expression needing SQL")
        right = self.one_column_subquery(e, text, "IN subquery")
        col = right.schema[0].name
        tag = self.fresh("in")
        aggs = (Aggregate(f"{tag}.rows", "count", None, "accumulable"),
                Aggregate(f"{tag}.values", "count", col, "accumulable"))
        counts = Reduce(self.reduce_schema(right.schema, [], list(aggs)), right, (), aggs)
        key = f"{tag}.key"
        dist = Distinct((ColumnSpec(key, right.schema[0].type),),
                        fused((ColumnSpec(key, right.schema[0].type),), right, (), ((col, key),)))
        crossed = Join(node.schema + counts.schema, (node, counts), "inner")
        on = ((scope.column(x), key),)
        self.check_keys(on, crossed.schema + dist.schema)
        both = crossed.schema + dist.schema
        join = Join(both, (crossed, dist), "left", on)
        names = [c.name for c in both]
        ph = {n: placeholder(names.index(n)) for n in (key, aggs[0].name, aggs[1].name, scope.column(x))}
        value = f"{tag}.value"
        sql = (f"CASE WHEN {ph[key]} IS NOT NULL THEN true WHEN {ph[aggs[0].name]} = 0 THEN false "
               f"WHEN {ph[scope.column(x)]} IS NULL OR {ph[aggs[0].name]} > {ph[aggs[1].name]} "
               "THEN CAST(NULL AS BOOLEAN) ELSE false END")
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)] + [(sql, value)]
        return self.sql_segment(join, (), items, [text]), value

    def one_column_subquery(self, e: Expression, text: str, what: str) -> Node:
        """The plan of ``e``'s uncorrelated one-column subquery (of an ``IN`` or a quantified
        comparison, ``what``); a correlated or falling-back one is not planned here."""
        try:
            right = self.query(e.subquery)
        except PlanError as err:
            raise _Unsupported(f"{what} {text!r}: {err} (correlated ones are absent)") from None
        if isinstance(right, Fallback):
            raise _Unsupported(f"{what} {text!r}: {right.reason}")
        if len(right.schema) != 1:
            raise PlanError(f"subquery has too many columns ({len(right.schema)}) in {text!r}")
        return right

    def quantified(self, node: Node, scope: _Scope, e: Expression, x: Expression, op: str, every: bool) -> Node:
        """``x op ANY (S)`` / ``x op ALL (S)`` as a ``WHERE`` conjunct, ``op`` an order and
        ``x`` an integer column: ``node`` crossed with one global reduce of ``S`` and filtered.
        In ``WHERE`` (unknown drops the row as false does) ``x > ANY (S)`` is ``x > min(S)``
        (``min`` skips NULLs; an empty or all-NULL ``S`` is NULL: no row); ``x > ALL (S)``
        is ``count(*) = 0 OR (x > max(S) AND count(y) = count(*))`` (an empty ``S`` keeps
        every row, even a NULL ``x``; a NULL in ``S`` leaves each row false or unknown).
        Integers only: their order is DuckDB's and PostgreSQL's alike."""
        text = self.span(e)
        if op not in ("<", "<=", ">", ">="):
            raise _Unsupported(f"{text!r}: a quantified comparison ({op} {'ALL' if every else 'ANY'})")
        if x.cls != "COLUMN_REF":
            raise _Unsupported(f"{text!r}: a quantified comparison of an expression")
        right = self.one_column_subquery(e, text, "quantified comparison")
        col, y = scope.column(x), right.schema[0]
        types = {c.name: c.type for c in node.schema}
        if not (pa.types.is_integer(types[col]) and pa.types.is_integer(y.type)):
            raise _Unsupported(f"{text!r}: a quantified comparison of {types[col]} with {y.type} (integers only)")
        tag = self.fresh("quant")
        bound = "max" if (op in (">", ">=")) == every else "min"
        aggs = [Aggregate(f"{tag}.bound", bound, y.name, "hierarchical")]
        if every:
            aggs += [Aggregate(f"{tag}.rows", "count", None, "accumulable"),
                     Aggregate(f"{tag}.values", "count", y.name, "accumulable")]
        one = Reduce(self.reduce_schema(right.schema, [], aggs), right, (), tuple(aggs))
        both = node.schema + one.schema
        names = [c.name for c in both]
        ph = {c.name: placeholder(names.index(c.name)) for c in both}
        cond = f"{ph[col]} {op} {ph[aggs[0].name]}"
        if every:
            rows, values = ph[aggs[1].name], ph[aggs[2].name]
            cond = f"({rows} = 0 OR ({cond} AND {values} = {rows}))"
        joined = self.sql_segment(Join(both, (node, one), "inner"), (cond,), None, [text])
        return fused(node.schema, joined, (), tuple((c.name, c.name) for c in node.schema))

    def quantifier(self, e: Expression):
        """``(subquery expression, x, op, every)`` when ``e`` is ``x op ANY|SOME (S)`` or
        ``x op ALL (S)`` with ``op`` an order (DuckDB reads ``ALL`` as ``NOT (x op' ANY
        (S))``, its span ``x``'s: the user's operator and quantifier follow ``x`` in the
        text); ``None`` otherwise."""
        negated = e.cls == "OPERATOR" and e.type == "OPERATOR_NOT" and len(e.children) == 1
        sub = e.children[0] if negated else e
        if sub.cls != "SUBQUERY" or len(sub.children) != 1 or sub.children[0].start < 0:
            return None
        x = sub.children[0]
        after = [t.text.upper() for t in tokenize(self.text[x.end:])[:2]]
        if (len(after) != 2 or after[0] not in ("<", "<=", ">", ">=")
                or after[1] not in ("ANY", "SOME", "ALL") or negated != (after[1] == "ALL")):
            return None
        return sub, x, after[0], after[1] == "ALL"

    def quantified_constant(self, e: Expression):
        """``(subquery expression, x, op, every)`` when ``e`` is an integer literal ``x``
        compared with a subquery: ``x op ANY|SOME|ALL (S)`` with any comparison ``op``, ``x
        IN (S)`` (``= ANY``) or ``x NOT IN (S)`` (``<> ALL``); ``None`` otherwise."""
        negated = e.cls == "OPERATOR" and e.type == "OPERATOR_NOT" and len(e.children) == 1
        sub = e.children[0] if negated else e
        if sub.cls != "SUBQUERY" or len(sub.children) != 1:
            return None
        x = sub.children[0]
        if x.cls != "CONSTANT" or x.literal is None or x.literal.kind != "INTEGER" or x.start < 0:
            return None
        after = [t.text.upper() for t in tokenize(self.text[x.end:])[:2]]
        if after[:1] == ["IN"]:
            op, every = "=", False
        elif after == ["NOT", "IN"]:
            op, every = "<>", True
        elif len(after) == 2 and after[0] in _FLIPPED and after[1] in ("ANY", "SOME", "ALL"):
            op, every = after[0], after[1] == "ALL"
        else:
            return None
        return (sub, x, op, every) if negated == every else None

    def constant_quantified(self, node: Node, e: Expression, sub: Expression, x: Expression, op: str,
                            every: bool) -> tuple[Node, str]:
        """An integer literal ``x`` compared with ``ANY``/``ALL`` of an integer subquery ``S``
        (``IN``, ``NOT IN`` too) as a value, with PostgreSQL's NULLs: ``node`` crossed with
        global counts of ``S`` -- its rows, its non-NULL values, and the rows deciding the
        answer (``ANY``: ``x op s`` holds; ``ALL``: it fails), a native filter of ``S`` --
        and the value one SQL segment over them: ``ANY`` true when a row holds, ``ALL``
        false when one fails; else NULL when ``S`` holds a NULL; else false (``ANY``) or
        true (``ALL``, an empty ``S`` included)."""
        text = self.span(e)
        right = self.one_column_subquery(sub, text, "quantified comparison")
        y = right.schema[0]
        if not pa.types.is_integer(y.type):
            raise _Unsupported(f"{text!r}: a quantified comparison of an integer with {y.type} (integers only)")
        v = _constant(x.literal.value, y.type)
        if v is None:
            raise _Unsupported(f"{text!r}: {x.literal.value} beyond the subquery's type {y.type}")
        negate = {"=": "<>", "<>": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
        deciding = _FLIPPED[op] if not every else negate[_FLIPPED[op]]  # x op s is s flipped(op) x
        tag = self.fresh("quant")
        aggs = (Aggregate(f"{tag}.rows", "count", None, "accumulable"),
                Aggregate(f"{tag}.values", "count", y.name, "accumulable"))
        counts = Reduce(self.reduce_schema(right.schema, [], list(aggs)), right, (), aggs)
        hit = Aggregate(f"{tag}.deciding", "count", None, "accumulable")
        decided = fused(right.schema, right, (Comparison(y.name, deciding, v),), None)
        found = Reduce(self.reduce_schema(right.schema, [], [hit]), decided, (), (hit,))
        both = node.schema + counts.schema + found.schema
        names = [c.name for c in both]
        ph = {c.name: placeholder(names.index(c.name)) for c in both}
        rows, values, n = ph[aggs[0].name], ph[aggs[1].name], ph[hit.name]
        sql = (f"CASE WHEN {n} > 0 THEN {'false' if every else 'true'} WHEN {rows} > {values} "
               f"THEN CAST(NULL AS BOOLEAN) ELSE {'true' if every else 'false'} END")
        value = f"{tag}.value"
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)] + [(sql, value)]
        return self.sql_segment(Join(both, (node, counts, found), "inner"), (), items, [text]), value

    def quantified_value(self, node: Node, scope: _Scope, e: Expression, sub: Expression, x: Expression,
                         op: str, every: bool) -> tuple[Node, str]:
        """``x op ANY (S)`` / ``x op ALL (S)`` as a select item's value, ``op`` an order and
        ``x`` an integer column, with PostgreSQL's NULLs: ``node`` crossed with one global
        reduce of ``S`` -- the bound ``b`` (``min``/``max`` of its non-NULL values, the one
        deciding the comparison), its counts of rows and of non-NULL values -- and the
        value one SQL segment over them. ``ANY``: false when ``S`` is empty; true when ``x
        op b``; else NULL when ``x`` is NULL or ``S`` holds a NULL; else false. ``ALL``:
        true when ``S`` is empty; false when ``NOT (x op b)``; else NULL when ``x`` is
        NULL or ``S`` holds a NULL; else true. O(delta) but for a change of the global
        values, which re-reads ``node`` (as :meth:`in_value`)."""
        text = self.span(e)
        if x.cls != "COLUMN_REF":
            raise _Unsupported(f"select item {text!r}: a quantified comparison of an expression")
        right = self.one_column_subquery(sub, text, "quantified comparison")
        col, y = scope.column(x), right.schema[0]
        types = {c.name: c.type for c in node.schema}
        if not (pa.types.is_integer(types[col]) and pa.types.is_integer(y.type)):
            raise _Unsupported(f"{text!r}: a quantified comparison of {types[col]} with {y.type} (integers only)")
        tag = self.fresh("quant")
        bound = "max" if (op in (">", ">=")) == every else "min"
        aggs = (Aggregate(f"{tag}.bound", bound, y.name, "hierarchical"),
                Aggregate(f"{tag}.rows", "count", None, "accumulable"),
                Aggregate(f"{tag}.values", "count", y.name, "accumulable"))
        one = Reduce(self.reduce_schema(right.schema, [], list(aggs)), right, (), aggs)
        both = node.schema + one.schema
        names = [c.name for c in both]
        ph = {c.name: placeholder(names.index(c.name)) for c in both}
        b, rows, values, xv = ph[aggs[0].name], ph[aggs[1].name], ph[aggs[2].name], ph[col]
        unknown = f"WHEN {xv} IS NULL OR {rows} > {values} THEN CAST(NULL AS BOOLEAN)"
        if every:
            sql = (f"CASE WHEN {rows} = 0 THEN true WHEN {xv} IS NOT NULL AND {values} > 0 AND NOT ({xv} {op} {b}) "
                   f"THEN false {unknown} ELSE true END")
        else:
            sql = (f"CASE WHEN {rows} = 0 THEN false WHEN {xv} IS NOT NULL AND {values} > 0 AND {xv} {op} {b} "
                   f"THEN true {unknown} ELSE false END")
        value = f"{tag}.value"
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)] + [(sql, value)]
        return self.sql_segment(Join(both, (node, one), "inner"), (), items, [text]), value

    def semi_residual(self, node: Node, right: Node, pairs, cross: list[Expression], negated: bool,
                      text: str) -> Node:
        """``[NOT] EXISTS`` correlated by equalities and by other conditions reading outer
        columns (Materialize's decorrelation: the join's residual): the pairs of ``node``
        and the subquery's rows joined on the equalities and filtered by those conditions
        (one SQL segment); ``NOT EXISTS`` is ``node``'s rows matching no pair
        (:meth:`unmatched`, the semijoin on whole rows with NULLs equal), ``EXISTS`` the
        others."""
        inner, outer = self.exists_scope
        both = node.schema + right.schema
        names = [c.name for c in both]
        if len(set(names)) != len(names):
            raise _Unsupported(f"EXISTS {text!r}: inner and outer columns named alike")

        def column_of(x: Expression) -> str:
            try:
                return inner.column(x)
            except PlanError:
                return outer.column(x)

        self.check_keys(pairs, both)
        join = Join(both, (node, right), "inner", tuple(pairs))
        where = tuple(self.sql_text(c, names, column_of) for c in cross)
        matched = self.sql_segment(join, where, None, [self.span(c) for c in cross])
        unmatched = self.unmatched(node, matched)
        if negated:
            return unmatched
        return Union(node.schema, (node, Negate(node.schema, unmatched)))

    def semi(self, node: Node, right: Node, pairs) -> Node:
        """``node``'s rows whose ``(outer, inner)`` key columns match a row of ``right``:
        ``node`` joined with ``right``'s distinct keys, projected back."""
        tag = self.fresh("semi")
        keys = tuple((r, f"{tag}.{i}") for i, (_, r) in enumerate(pairs))
        rtypes = {c.name: c.type for c in right.schema}
        proj = fused(tuple(ColumnSpec(n, rtypes[r]) for r, n in keys), right, (), keys)
        dist = Distinct(proj.schema, proj)
        on = tuple((o, n) for (o, _), (_, n) in zip(pairs, keys))
        self.check_keys(on, node.schema + dist.schema)
        join = Join(node.schema + dist.schema, (node, dist), "inner", on)
        return fused(node.schema, join, (), tuple((c.name, c.name) for c in node.schema))

    def not_in(self, node: Node, right: Node, pair: tuple[str, str]) -> Node:
        """``x NOT IN (subquery)`` with PostgreSQL's NULLs: every row when the subquery is
        empty; otherwise only a non-NULL ``x`` matching no row, while the subquery holds no
        NULL (else the comparison is unknown and the row dropped). With ``F`` the one-row
        flag "the subquery has a row" and ``N`` "it has a NULL" (``N`` implies ``F``), and
        ``anti`` the non-NULL rows minus their semijoin: ``node − node×F + anti×F −
        anti×N``. The flags are distinct rows of a constant crossed with the subquery, so
        they change only when the subquery becomes (non-)empty or gains (loses) its NULLs --
        then every row of the view changes, as it must; any other change costs its delta."""
        x, col = pair
        tag = self.fresh("notin")
        nonempty = self.flag(right, f"{tag}.some")
        nulls = self.flag(fused(right.schema, right, (IsNullPredicate(col),), None), f"{tag}.null")
        present = fused(node.schema, node, (IsNullPredicate(x, True),), None)
        anti = Union(node.schema, (present, Negate(node.schema, self.semi(present, right, [pair]))))
        return Union(node.schema, (node, Negate(node.schema, self.crossed(node, nonempty)),
                                   self.crossed(anti, nonempty), Negate(node.schema, self.crossed(anti, nulls))))

    def flag(self, over: Node, name: str) -> Node:
        """One row ``(1)`` while ``over`` has a row: ``over`` crossed with a constant, its
        distinct rows."""
        one = Constant((ColumnSpec(name, pa.int32()),), ((1,),))
        j = Join(over.schema + one.schema, (over, one), "inner")
        return Distinct(one.schema, fused(one.schema, j, (), ((name, name),)))

    def crossed(self, node: Node, flag: Node) -> Node:
        """``node``'s rows while the one-row ``flag`` holds its row."""
        both = node.schema + flag.schema
        return fused(node.schema, Join(both, (node, flag), "inner"), (), tuple((c.name, c.name) for c in node.schema))

    def exists_value(self, node: Node, scope: _Scope, e: Expression) -> tuple[Node, str]:
        """A correlated ``EXISTS (subquery)`` as a select item's boolean: ``node`` left-joined
        with the subquery's distinct correlation keys (:meth:`correlated`; at most one match
        per row), the value whether a match was found -- a NULL outer key matches nothing,
        so is false, as PostgreSQL's ``EXISTS`` of no row is."""
        text = self.span(e)
        right, pairs = self.correlated(e.subquery, scope, text)
        tag = self.fresh("exists")
        keys = tuple((r, f"{tag}.{i}") for i, (_, r) in enumerate(pairs))
        rtypes = {c.name: c.type for c in right.schema}
        proj = fused(tuple(ColumnSpec(n, rtypes[r]) for r, n in keys), right, (), keys)
        dist = Distinct(proj.schema, proj)
        on = tuple((o, n) for (o, _), (_, n) in zip(pairs, keys))
        self.check_keys(on, node.schema + dist.schema)
        both = node.schema + dist.schema
        join = Join(both, (node, dist), "left", on)
        names = [c.name for c in both]
        value = f"{tag}.value"
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)]
        items.append((f"{placeholder(names.index(keys[0][1]))} IS NOT NULL", value))
        return self.sql_segment(join, (), items, [text]), value

    def scalar_subquery(self, node: Node, e: Expression, scope: _Scope | None = None) -> tuple[Node, str]:
        """An uncorrelated scalar subquery in the select list that is one row by its shape
        (aggregates without ``GROUP BY``/``HAVING``): ``node`` crossed with that one-row
        relation (Materialize's lowering), and the column holding its value. Correlated by
        equalities of columns (with ``scope`` the outer query's), it is
        :meth:`correlated_aggregate`."""
        text = self.span(e)
        sub = e.subquery
        if e.children or self.text[e.start:e.end].lstrip().upper().startswith("EXISTS"):
            raise _Unsupported(f"select item {text!r}: EXISTS or IN as a value")
        constant = (sub is not None and sub.type == "SELECT_NODE" and sub.from_ is None and sub.where is None
                    and not sub.group_by and sub.having is None and not sub.modifiers and len(sub.items) == 1)
        shaped = constant or not (
                sub is None or sub.type != "SELECT_NODE" or sub.from_ is None or sub.group_by
                or sub.having is not None or len(sub.items) != 1
                or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers)
                or not any(_is_aggregate(x) for x in sub.items[0].walk() if x.cls != "WINDOW"))
        other = (f"select item {text!r}: a scalar subquery other than one aggregate "
                 "without GROUP BY (one row by its shape)")
        if not shaped and sub is None:
            raise _Unsupported(other)
        try:
            right = self.query(sub)
        except PlanError as err:
            if not shaped:
                raise _Unsupported(f"{other}, correlated ({err})") from None
            if scope is None:
                raise _Unsupported(f"select item {text!r}: {err} (correlated subqueries are absent)") from None
            return self.correlated_aggregate(node, scope, e, err)
        if isinstance(right, Fallback):
            raise _Unsupported(f"scalar subquery {text!r}: {right.reason}")
        if len(right.schema) != 1:
            raise PlanError(f"subquery must return only one column ({text!r})")
        name = f"{self.fresh('scalar')}.{right.schema[0].name}"
        one = fused((ColumnSpec(name, right.schema[0].type),), right, (), ((right.schema[0].name, name),))
        if not shaped:
            one = self.at_most_one(one, text)
        return Join(node.schema + one.schema, (node, one), "inner"), name

    def at_most_one(self, rows: Node, text: str) -> Node:
        """A scalar subquery's one column ``rows`` as exactly one row, as Materialize
        decorrelates one not one row by its shape: its rows when it has one, a NULL when it
        has none, and an error -- PostgreSQL's, failing the commit -- when a change leaves it
        with more than one. The guard is a global count of ``rows`` filtered by ``CASE WHEN
        n > 1 THEN error(...) ELSE n = 0 END`` (one SQL segment over the count's change): its
        row, while ``rows`` is empty, is crossed with a constant NULL. (DuckDB's recompute
        raises the same error whether or not the outer query has rows.)"""
        col = rows.schema[0]
        tag = self.fresh("one")
        count = Aggregate(f"{tag}.rows", "count", None, "accumulable")
        counts = Reduce(self.reduce_schema(rows.schema, [], [count]), rows, (), (count,))
        n = placeholder(0)
        guard = self.sql_segment(counts, (f"CASE WHEN {n} > 1 THEN error('more than one row returned by a subquery "
                                           f"used as an expression') ELSE {n} = 0 END",), None,
                                 [f"{text}: at most one row, else an error"])
        null = Constant((ColumnSpec(col.name, col.type),), ((None,),))
        empty = Join(null.schema + guard.schema, (null, guard), "inner")
        empty = fused(null.schema, empty, (), ((col.name, col.name),))
        return Union(rows.schema, (rows, empty))

    def typed_subquery(self, node: Node, sub: Expression, scope: _Scope) -> tuple[Node, str]:
        """A scalar subquery read by a condition (:meth:`scalar_subquery`) whose native
        aggregates are typed as PostgreSQL's; else the subquery re-planned with every
        reduce a :class:`BasicReduce` (DuckDB's aggregates through ``translate``: ``avg``
        of integers numeric, as PostgreSQL's), recomputed per affected group."""
        text = self.span(sub)
        joined, col = self.scalar_subquery(node, sub, scope)
        try:
            self.check_postgres_typed(joined, col, text)
            return joined, col
        except _Unsupported:
            if self.basic_only:
                raise
        self.basic_only = True
        try:
            joined, col = self.scalar_subquery(node, sub, scope)
        finally:
            self.basic_only = False
        self.check_postgres_typed(joined, col, text)
        return joined, col

    def check_postgres_typed(self, node: Node, col: str, text: str) -> None:
        """Refuse a subquery's value read by SQL (a condition) when a native aggregate under
        it is not typed as PostgreSQL's (``sum``/``avg`` of integers are numeric there):
        the condition would compare another value."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, Reduce):
                types = {c.name: c.type for c in n.input.schema}
                for a in n.aggregates:
                    if not _postgres_typed(a, types):
                        raise _Unsupported(f"subquery {text!r} in a condition: the native {a.function} is not typed "
                                           "as PostgreSQL's")
            stack.extend(i for i in n.inputs if i is not None)

    #: Aggregates whose value over no rows is NULL (``count`` is 0: coalesced).
    NULL_WHEN_EMPTY = frozenset({"sum", "avg", "min", "max", "bool_and", "bool_or", "every", "string_agg",
                                 "array_agg", "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp",
                                 "var_pop"})

    def correlated_aggregate(self, node: Node, scope: _Scope, e: Expression, err: PlanError) -> tuple[Node, str]:
        """A scalar subquery of one aggregate correlated by equalities of inner and outer
        columns (``(SELECT sum(x) FROM u WHERE u.k = t.k AND ...)``), decorrelated as
        Materialize's lowering does for equality correlation: the subquery grouped by its
        inner key columns (its other conditions kept), ``node`` left-joined with it on the
        outer columns -- a row whose key has no inner rows (a NULL key included) gets the
        aggregate over no rows: NULL, or 0 for ``count``."""
        text = self.span(e)
        sub = e.subquery
        agg = sub.items[0]
        fn = agg.name[-1] if agg.cls == "FUNCTION" and len(agg.name) == 1 else ""
        if not _is_aggregate(agg) or sub.ctes or fn not in self.NULL_WHEN_EMPTY | {"count", "count_star"}:
            raise _Unsupported(f"select item {text!r}: {err} (a correlated scalar subquery other than one "
                               "aggregate call)")
        inner_node, sources, _ = self.table(sub.from_)
        inner = _Scope(sources)
        pairs, local = _correlation(sub.where, inner, scope)
        if not pairs:
            raise _Unsupported(f"select item {text!r}: {err} (correlated other than by equalities of columns)")
        where = None
        if local:
            where = local[0] if len(local) == 1 else Expression("CONJUNCTION", "CONJUNCTION_AND", -1, -1,
                                                                  tuple(local))
        keys = tuple(x for _, x in pairs)
        grouped = dataclasses.replace(sub, where=where, group_by=keys, grouping_sets=(), items=(*keys, agg))
        try:
            right = self.query(grouped)
        except PlanError as err2:  # an outer column read elsewhere than an equality
            raise _Unsupported(f"select item {text!r}: {err2} (correlated other than by equalities of "
                               "columns)") from None
        if isinstance(right, Fallback):
            raise _Unsupported(f"correlated scalar subquery {text!r}: {right.reason}")
        tag = self.fresh("scalar")
        cols = tuple((c.name, f"{tag}.{i}") for i, c in enumerate(right.schema))
        right = fused(tuple(ColumnSpec(n, c.type) for (_, n), c in zip(cols, right.schema)), right, (), cols)
        on = tuple((o, cols[i][1]) for i, (o, _) in enumerate(pairs))
        self.check_keys(on, node.schema + right.schema)
        both = node.schema + right.schema
        join = Join(both, (node, right), "left", on)
        names = [c.name for c in both]
        value = cols[-1][1]
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)]
        at = placeholder(names.index(value))
        items.append((f"coalesce({at}, 0)" if fn in ("count", "count_star") else at, value))
        if fn in ("count", "count_star"):
            return self.sql_segment(join, (), items, [text]), value
        proj = tuple((c.name, c.name) for c in node.schema) + ((value, value),)
        return fused(tuple(c for c in both if c.name in dict(proj)), join, (), proj), value

    def correlated(self, sub: Query, outer: _Scope, text: str, cross: list | None = None
                   ) -> tuple[Node, list[tuple[str, str]]]:
        """An ``EXISTS`` subquery decorrelated: its ``FROM`` and local conditions planned,
        its equalities with outer columns as ``(outer column, inner column)`` keys. With
        ``cross`` a list, the other conditions reading outer columns are appended to it (the
        residual of :meth:`semi_residual`, bound by the inner scope, then the outer) instead
        of refused."""
        if (sub.type != "SELECT_NODE" or sub.ctes or sub.group_by or sub.having is not None
                or sub.from_ is None or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers)
                or any(_is_aggregate(x) for e in sub.items for x in e.walk())):
            raise _Unsupported(f"EXISTS {text!r}: a subquery other than SELECT ... FROM ... WHERE")
        node, sources, conds = self.table(sub.from_)
        inner = _Scope(sources)
        pairs, local = [], []
        for c in _conjuncts(sub.where):
            if (c.cls == "COMPARISON" and c.type == "COMPARE_EQUAL"
                    and all(x.cls == "COLUMN_REF" for x in c.children)):
                bound = []
                for x in c.children:
                    try:
                        bound.append(("in", inner.column(x)))
                    except PlanError:
                        bound.append(("out", outer.column(x)))
                kinds = [k for k, _ in bound]
                if sorted(kinds) == ["in", "out"]:
                    o = bound[kinds.index("out")][1]
                    pairs.append((o, bound[kinds.index("in")][1]))
                    continue
            reads_outer = False
            for x in c.walk():
                if x.cls == "SUBQUERY":
                    raise _Unsupported(f"EXISTS {text!r}: a nested subquery")
                if x.cls == "COLUMN_REF":
                    try:
                        inner.column(x)
                    except PlanError:
                        outer.column(x)  # PlanError when neither scope has it
                        reads_outer = True
            (cross if reads_outer and cross is not None else local).append(c)
            if reads_outer and cross is None:
                raise _Unsupported(f"EXISTS {text!r}: a correlated condition other than an "
                                   f"equality of columns ({self.span(c)!r})")
        if not pairs and cross:
            # pairs by other conditions alone: a cross join of the outer and inner inputs
            raise _Unsupported(f"EXISTS {text!r}: a correlated condition other than an equality of columns "
                               f"({self.span(cross[0])!r}) without one")
        if not pairs:
            raise _Unsupported(f"EXISTS {text!r}: not correlated by an equality of columns")
        if cross:
            self.exists_scope = (inner, outer)
        if isinstance(node, Join) and node.kind == "inner" and not node.on:
            node = self.place(node, sources, conds + local)
        else:
            node = self.place(node, sources, conds)
            if local:
                types = {c.name: c.type for c in node.schema}
                node = fused(node.schema, node, tuple(p for c in local for p in self.predicates(c, inner.column, types)),
                             None)
        return node, pairs

    # ---- temporal filters (plan39)

    def temporal(self, node: Node, scope: _Scope, conds: list[Expression], select, q: Query) -> Node:
        """``mz_now() op column [+|- integer]`` conjuncts as a :class:`TemporalFilter` at the
        top of the plan (its output holds future updates, which only the view's sink --
        its ``Correction`` -- may hold: nothing stateful sits above it)."""
        if any(m.type != "ORDER_MODIFIER" for m in q.modifiers):
            raise _Unsupported("a temporal filter (mz_now()) below DISTINCT, LIMIT or OFFSET")
        if self.depth > 1:
            # its output holds future updates, which no operator above it takes
            raise _Unsupported("a temporal filter (mz_now()) in a subquery, CTE or set-operation branch")
        types = {c.name: c.type for c in node.schema}
        bounds = []
        for c in conds:
            if not (c.cls == "COMPARISON" and c.type in _COMPARE_OPS and len(c.children) == 2):
                raise _Unsupported(f"{self.span(c)!r}: mz_now() other than compared with a column")
            a, b = c.children
            op = _COMPARE_OPS[c.type]
            if not _is_now(a):
                a, b, op = b, a, _FLIPPED[op]
            if not _is_now(a) or op == "<>":
                raise _Unsupported(f"{self.span(c)!r}: mz_now() other than compared (=, <, <=, >, >=) with a column")
            col, offset = self.bound_expression(b, scope, self.span(c))
            t = types[col]
            if not pa.types.is_integer(t):
                raise _Unsupported(f"{self.span(c)!r}: mz_now() compared with a {t} column (integers only)")
            bounds.append((col, offset, op))
        types = {c.name: c.type for c in node.schema}
        schema = tuple(ColumnSpec(n, types[s]) for s, n in select)
        return TemporalFilter(schema, node, tuple(bounds), tuple(select))

    def bound_expression(self, e: Expression, scope: _Scope, text: str) -> tuple[str, int]:
        if e.cls == "COLUMN_REF":
            return scope.column(e), 0
        if e.cls == "FUNCTION" and e.name in (("+",), ("-",)) and len(e.children) == 2:
            x, y = e.children
            if e.name == ("+",) and x.cls == "CONSTANT":
                x, y = y, x
            if (x.cls == "COLUMN_REF" and y.cls == "CONSTANT" and y.literal is not None
                    and y.literal.kind == "INTEGER"):
                return scope.column(x), y.literal.value if e.name == ("+",) else -y.literal.value
        raise _Unsupported(f"{text!r}: mz_now() compared with other than a column plus or minus an integer")



def _name(t) -> str | None:
    """The identifier a token names (a word as written, a quoted one unquoted), else ``None``."""
    if t.kind == "word":
        return t.text
    if t.kind == "qident":
        return t.text[1:-1].replace('""', '"')
    return None


@functools.lru_cache(maxsize=256)
def _cte_columns(text: str) -> dict[str, frozenset[tuple[str, ...]]]:
    """Every ``WITH`` list's CTEs in ``text``: name -> the column-name lists its definitions
    give (``()`` for none), as PostgreSQL's grammar writes them: ``WITH [RECURSIVE] name
    [(col, ...)] AS [[NOT] MATERIALIZED] (query), ...``. A definition not read to its
    body's closing parenthesis is not recorded (its CTE then has no entry: the planner
    refuses it rather than guess its names)."""
    toks = tokenize(text)
    n = len(toks)
    found: dict[str, set[tuple[str, ...]]] = {}

    def op(j: int, s: str) -> bool:
        return j < n and toks[j].kind == "op" and toks[j].text == s

    def word(j: int, s: str) -> bool:
        return j < n and toks[j].kind == "word" and toks[j].upper == s

    for i, t in enumerate(toks):
        if not (t.kind == "word" and t.upper == "WITH"):
            continue
        j = i + 2 if word(i + 1, "RECURSIVE") else i + 1
        while j < n:
            name = _name(toks[j])
            if name is None:
                break
            j += 1
            cols: tuple[str, ...] = ()
            if op(j, "("):
                close = closing(toks, j)
                if close < 0:
                    break
                inner = toks[j + 1:close]
                names = [_name(x) for x in inner[::2]]
                if not names or None in names or not all(x.kind == "op" and x.text == "," for x in inner[1::2]) \
                        or len(inner) % 2 == 0:
                    break
                cols = tuple(names)
                j = close + 1
            if not word(j, "AS"):
                break
            j += 1
            if word(j, "NOT"):
                j += 1
            if word(j, "MATERIALIZED"):
                j += 1
            if not op(j, "("):
                break
            close = closing(toks, j)
            if close < 0:
                break
            found.setdefault(name, set()).add(cols)
            j = close + 1
            if not op(j, ","):
                break
            j += 1
    return {k: frozenset(v) for k, v in found.items()}


def _integer_versus_numeric(col: str, op: str, c: decimal.Decimal, t: pa.DataType) -> Predicate:
    """``col op c`` for an integer column and a numeric constant, exactly as PostgreSQL
    compares them (as numerics): ``v > 1.5`` is ``v > 1``, ``v >= 1.5`` is ``v >= 2``, ``v =
    1.5`` is never true and ``v <> 1.5`` is ``v IS NOT NULL``; a bound beyond the column's
    type is always or never true (NULL never)."""
    lo = -(2 ** (t.bit_width - 1)) if pa.types.is_signed_integer(t) else 0
    hi = lo + 2 ** t.bit_width - 1
    never = Comparison(col, "<", lo)  # no value of the type is below its least
    always = IsNullPredicate(col, True)
    floor, ceil = math.floor(c), math.ceil(c)
    if op in ("=", "<>"):
        if floor != ceil or not lo <= floor <= hi:
            return never if op == "=" else always
        return Comparison(col, op, floor)
    bound = {">": floor, "<=": floor, ">=": ceil, "<": ceil}[op]
    if bound < lo:
        return always if op in (">", ">=") else never
    if bound > hi:
        return never if op in (">", ">=") else always
    return Comparison(col, op, bound)


def _native_typed(node: Node, computed) -> bool:
    """Whether every native aggregate under ``node`` is read as PostgreSQL reads it: typed
    as PostgreSQL's (:func:`_postgres_typed`), or an exact integer sum (numeric there) when
    no aggregate is ``computed`` (read by an expression: integer arithmetic is not
    numeric's) -- as an output column (cast at the sink) or a window's key, it compares
    and sorts as the numeric does; ``avg`` and the variances of integers (float64 here)
    never."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Reduce):
            types = {c.name: c.type for c in n.input.schema}
            for a in n.aggregates:
                if _postgres_typed(a, types):
                    continue
                if a.function != "sum" or not pa.types.is_integer(types[a.column]) or computed:
                    return False
        stack.extend(i for i in n.inputs if i is not None)
    return True


def _postgres_typed(a: Aggregate, types: dict[str, pa.DataType]) -> bool:
    """Whether the native operator's output type of aggregate ``a`` is PostgreSQL's: counts
    (bigint), ``min``/``max`` (the column's), the boolean ones, and the numeric ones over
    ``double precision`` (float8 in, float8 out); ``sum``/``avg``/variances of integers are
    ``numeric`` in PostgreSQL, not the operator's type."""
    if a.function in ("count", "min", "max", "bool_and", "bool_or", "every"):
        return True
    return a.column is not None and pa.types.is_float64(types[a.column])


_SETOPS = frozenset({"UNION", "EXCEPT", "INTERSECT"})
_SETOP_MODIFIERS = frozenset({"ORDER", "LIMIT", "OFFSET", "FETCH"})


def _unparenthesized(text: str, start: int, end: int) -> tuple[int, int]:
    """``text[start:end]`` without surrounding whitespace and enclosing parentheses."""
    while True:
        while start < end and text[start].isspace():
            start += 1
        while end > start and (text[end - 1].isspace() or text[end - 1] == ";"):
            end -= 1
        toks = tokenize(text[start:end])
        if len(toks) < 2 or toks[0].text != "(" or toks[-1].text != ")":
            return start, end
        depth = 0
        for j, tok in enumerate(toks):
            depth += tok.text == "("
            depth -= tok.text == ")"
            if depth == 0 and j != len(toks) - 1:
                return start, end  # "(a) UNION (b)": the first parenthesis closes early
        start, end = start + toks[0].end, start + toks[-1].start


def _setop_parts(text: str, span: tuple[int, int]) -> list[tuple[int, int]] | None:
    """The spans of ``text[span]``'s parts between its top-level set-operation keywords
    (a trailing ``ORDER BY``/``LIMIT``/``OFFSET`` belongs to the whole: cut off)."""
    start, end = span
    parts, depth, at, last = [], 0, start, None
    toks = tokenize(text[start:end])
    for j, tok in enumerate(toks):
        if tok.kind == "op":
            depth += tok.text == "("
            depth -= tok.text == ")"
            continue
        word = tok.text.upper() if tok.kind == "word" else ""
        if depth == 0 and word in _SETOPS:
            parts.append((at, start + tok.start))
            nxt = toks[j + 1].text.upper() if j + 1 < len(toks) else ""
            at = start + (toks[j + 1].end if nxt in ("ALL", "DISTINCT") else tok.end)
            last = j
        elif depth == 0 and word in _SETOP_MODIFIERS and last is not None:
            end = start + tok.start
            break
        elif depth == 0 and word == "WITH" and j == 0:
            return None
    parts.append((at, end))
    parts = [p for p in parts if text[p[0]:p[1]].strip()]
    return parts if len(parts) > 1 else None


#: PostgreSQL's name of an Arrow type, for a typed NULL (a key absent from a grouping set).
_POSTGRES_TYPES = {pa.int16(): "smallint", pa.int32(): "integer", pa.int64(): "bigint", pa.string(): "text",
                   pa.bool_(): "boolean", pa.float64(): "double precision", pa.float32(): "real",
                   pa.date32(): "date", pa.timestamp("us"): "timestamp"}


def _grouping_sets(q: Query) -> bool:
    """Whether ``q`` groups by sets other than all its ``GROUP BY`` items at once, or calls
    ``GROUPING()``."""
    if q.grouping_sets and sorted(set(q.grouping_sets[0])) != list(range(len(q.group_by))):
        return True
    return len(q.grouping_sets) > 1 or any(sub.cls == "OPERATOR" and sub.type == "GROUPING_FUNCTION"
                                           for e in q.items for sub in e.walk())


def _reads_outside(q: Query | None) -> bool:
    """Whether a ``FROM`` subquery reads a column of a relation outside it (a ``LATERAL``
    subquery's correlation): a qualified reference whose qualifier names no relation of its
    own ``FROM`` (nor of a nested query's), or any column reference without ``FROM``."""
    if q is None or q.type != "SELECT_NODE":
        return False
    refs = [x for e in (*q.items, q.where, q.having, *q.group_by) if e is not None for x in e.walk()
            if x.cls == "COLUMN_REF"]
    if q.from_ is None:
        return bool(refs)
    own: set[str] = set()
    stack = [q.from_]
    while stack:
        t = stack.pop()
        if t.type == "BASE_TABLE":
            own.add(t.alias or t.name[-1])
        elif t.type == "SUBQUERY" and t.alias:
            own.add(t.alias)
        stack.extend(c for c in t.children if c is not None)
    return any(len(x.name) == 2 and x.name[0] not in own for x in refs)


def _leaves(q: Query) -> int:
    return sum(_leaves(c) for c in q.children) if q.type == "SET_OPERATION_NODE" else 1


def _array_any(e: Expression) -> bool:
    """Whether ``e`` is ``x op ANY|SOME|ALL (ARRAY[...])`` -- DuckDB's parse: a subquery
    without ``FROM`` selecting ``unnest`` of an array constructor, ``x`` its one child."""
    q = e.subquery
    if e.cls != "SUBQUERY" or q is None or q.type != "SELECT_NODE" or q.from_ is not None or len(e.children) != 1:
        return False
    if len(q.items) != 1 or q.where is not None or q.group_by or q.modifiers or q.ctes:
        return False
    item = q.items[0]
    return (item.cls == "FUNCTION" and item.name == ("unnest",) and len(item.children) == 1
            and item.children[0].type == "ARRAY_CONSTRUCTOR" and item.children[0].start >= 0)


def _is_now(e: Expression) -> bool:
    return e.cls == "FUNCTION" and e.name == ("mz_now",) and not e.children


def _unify(a: Schema, b: Schema) -> Schema:
    from colmz.updates import unify_schemas

    return unify_schemas(a, b)


def _unique(select: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out = []
    for s, n in select:
        name, i = n, 1
        while name in seen:
            i += 1
            name = f"{n}_{i}"
        seen.add(name)
        out.append((s, name))
    return out


def monotonic_plan(node: Node, append_only) -> tuple[Node, bool]:
    """``node`` with every ``Reduce`` whose input is append-only marked ``monotonic``, and
    whether ``node``'s own output is append-only. Append-only (Materialize's monotonicity
    analysis, restricted to what colmz can prove): a ``Get`` of a relation in
    ``append_only``, a constant, and maps, filters, inner joins and unions of append-only
    inputs; anything else -- a reduce's, distinct's, top-k's or window's output (their
    changes retract), negation, set differences, outer joins (their padded rows are
    retracted when matches arrive), temporal filters (rows expire), a Fallback -- is not."""
    inputs = node.inputs
    rebuilt, flags = [], []
    for i in inputs:
        r, f = monotonic_plan(i, append_only) if i is not None else (None, False)
        rebuilt.append(r)
        flags.append(f)
    if any(r is not i for r, i in zip(rebuilt, inputs)):
        changes = {}
        for f in dataclasses.fields(node):
            v = getattr(node, f.name)
            if isinstance(v, Node):
                changes[f.name] = rebuilt[[id(i) for i in inputs].index(id(v))]
            elif isinstance(v, tuple) and v and all(isinstance(x, Node) for x in v):
                changes[f.name] = tuple(rebuilt[[id(i) for i in inputs].index(id(x))] for x in v)
        node = dataclasses.replace(node, **changes)
    if isinstance(node, Get):
        return node, node.table in append_only
    if isinstance(node, Constant):
        return node, True
    if isinstance(node, Reduce):
        if flags[0] and any(a.reduction == "hierarchical" for a in node.aggregates):
            node = dataclasses.replace(node, monotonic=True)
        return node, False
    if isinstance(node, (MapFilter, Union)) or (isinstance(node, Join) and node.kind == "inner"):
        return node, bool(flags) and all(flags)
    return node, False


def plan(query_text: str, schemas: Mapping[str, object], subquery_schema=None, append_only=()) -> Plan:
    """The relational plan of ``query_text`` (one ``SELECT``) over tables ``schemas``
    (a mapping of table name to its columns: a mapping of name to Arrow type, or ``ColumnSpec`` s).

    Raises :class:`colmz.sql.SQLError` when DuckDB cannot parse the text or it is not one
    query, :class:`PlanError` when a name does not bind. What is outside the incremental
    subset is a :class:`Fallback` node (see the module docstring). ``subquery_schema(text)``,
    when given, types a ``FROM`` subquery that falls back (its output columns, or ``None``):
    that subquery becomes a Fallback leaf of its own (``Fallback.query``) and the query
    around it is planned. ``append_only`` names relations that only ever insert (their
    owner's promise, checked at every step): a min/max over them takes the monotonic plan
    (:func:`monotonic_plan`; a catalog passes its tables created ``WITH (APPEND ONLY)``).
    Materialize's query hints (``OPTIONS (AGGREGATE INPUT GROUP SIZE = n)`` after a
    ``GROUP BY``, :mod:`colmz.sql.hints`) choose the min/max's bucketed plan with stages for
    groups of ``n`` rows (``Reduce.expected_group_size``); a top-k's ``DISTINCT ON`` / ``LIMIT
    INPUT GROUP SIZE`` is recorded on its node (colmz's top-k has one plan).

    >>> import pyarrow as pa
    >>> p = plan("SELECT t.k, u.w FROM t JOIN u ON t.k = u.k WHERE u.w IS NOT NULL",
    ...          {"t": {"k": pa.int64()}, "u": {"k": pa.int64(), "w": pa.string()}})
    >>> print(p.explain())
    MapFilter select=[t.k AS k, u.w AS w]  -- incremental O(delta)
      Join inner on=[t.k = u.k] (delta join, inputs arranged by key)  -- incremental O(delta)
        Get t AS t (k AS t.k)  -- incremental O(delta)
        MapFilter where=[u.w IS NOT NULL]  -- incremental O(delta)
          Get u AS u (k AS u.k, w AS u.w)  -- incremental O(delta)
    >>> plan("SELECT upper(w) || random() FROM u", {"u": {"w": pa.string()}}).fallbacks()[0].reason
    "'upper(w) || random()': random is volatile"
    """
    if not isinstance(schemas, Mapping):
        raise TypeError(f"schemas must be a mapping of table name to columns, got {type(schemas).__name__}")
    checked = {}
    for name, s in schemas.items():
        if not isinstance(name, str):
            raise TypeError(f"schemas must be keyed by table name (str), got {name!r}")
        checked[name] = as_schema(s, f"schemas[{name!r}]")
    # OPTIONS (...) hints blanked: DuckDB parses the rest, every offset unchanged
    text, hints = strip_hints(query_text)
    stmts = parse_tree(text)
    if len(stmts) != 1:
        raise PlanError(f"query_text holds {len(stmts)} statements; a view's query is one")
    p = _Planner(text, checked, subquery_schema, hints)
    p.spans[id(stmts[0])] = _unparenthesized(text, 0, len(text))
    root = p.query(stmts[0])
    if append_only:
        if isinstance(append_only, str) or not all(isinstance(n, str) for n in append_only):
            raise TypeError(f"append_only must be a collection of relation names, got {append_only!r}")
        root, _ = monotonic_plan(root, frozenset(append_only))
    return Plan(root, query_text, dict(p.used))
