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
  and variances of float8; ``sum(bigint)`` is numeric there), else a :class:`BasicReduce`.
  PostgreSQL's rules of a string column's type hold there as in the query: given the
  tables' column kinds, the kind the query path gives each column reference
  (:func:`colmz.sql.jsonbcols.column_ref_kinds`) is noted for the plan column it binds to,
  and a segment (``SqlMapFilter.kinds``), a group's SQL and a native comparison of a jsonb
  column with a literal holding no number (its canonical jsonb text) apply
  :mod:`colmz.sql.jsonbcols` by it; a column passed on or renamed keeps its source's kind
  (a subquery's, a CTE's). jsonb's text equality is its value's only where no number is
  written with trailing zeros: a jsonb equality of two columns is a SQL condition, a literal
  holding a number a SQL segment, and the jsonb columns a Distinct, Reduce, TopK's groups,
  a group's SQL or a join key compare are checked below by a :class:`JsonbCheck` (natively,
  no DuckDB call: refusing ``1.0`` as the query path does); a top-k ordered by jsonb, or a group's SQL
  comparing a jsonb column it was not translated for, falls back;
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
  :class:`Union`, :class:`Negate`, :class:`Constant` (``SELECT`` of literals; an item
  without ``FROM`` that is not one, ``ARRAY[1, 2]``, is a SQL segment over its row);
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
each reference (a CTE sees the ones before it, ``WITH c(x, y)`` renames its columns); ``WITH
RECURSIVE`` is a :class:`LetRec` (Materialize's): the non-recursive term, and the recursive term
reading the working table as a :class:`Variable`, iterated to its fixed point at every commit by
one instance of its operators per iteration (:mod:`colmz.dataflow.iterate`; ``UNION`` drops the
rows produced so far, PostgreSQL's evaluation; :meth:`_Planner.recursive`);
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
such conditions is the same pairs and semijoin (:meth:`_Planner.semi_residual`). A subquery
correlated otherwise -- by ``<>``/``<``/``>``, a nested subquery inside ``[NOT] EXISTS``
reading the outer query -- is decorrelated on the distinct outer keys
(:meth:`_Planner.keyed_subquery`): the distinct non-NULL values of the outer columns it reads,
joined into its ``FROM`` (an equality an equi key, other conditions a residual; a join on
no equi key of theirs costs :data:`PER_OUTER_KEY`), the subquery computed per key and
joined back on it (``[NOT] EXISTS``, ``x IN``, a scalar aggregate), each outer column an
operand of a comparison in its ``WHERE`` (a NULL one: the subquery's answer over no
rows). A table
function in ``FROM`` (``generate_series``, ``unnest``, jsonb's ``jsonb_each[_text]``,
``jsonb_array_elements[_text]``, ``jsonb_object_keys``) or a ``LATERAL (VALUES ...)`` list
over the left side's columns is a :class:`FlatMap` (:meth:`_Planner.flat_map`). ``x op
ANY|ALL (subquery)`` as a value is a cross join with the subquery's bound and counts
(:meth:`_Planner.quantified_value`; an integer literal ``x`` with any comparison, ``IN`` and
``NOT IN`` too, with counts of the rows deciding it: :meth:`_Planner.constant_quantified`);
``(a, b) IN (subquery)`` in ``WHERE`` is a semijoin on every column, and as a value one
branch per NULL pattern of ``(a, b)``, each left-joined with the subquery's rows by theirs
(PostgreSQL's NULLs of row comparisons: :meth:`_Planner.row_in_value`); an uncorrelated
scalar subquery not one row by its shape is its rows or a NULL, its count past one row an error of the view (an
:class:`ErrorGuard`: the commit lands, reading the view raises PostgreSQL's error; :meth:`_Planner.at_most_one`).
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
the above, subqueries reading an outer column that no comparison of theirs has as an
operand, correlated scalar subqueries of other than one aggregate (or arithmetic over aggregates
NULL over no rows), ``LATERAL`` subqueries
correlated otherwise, ``NATURAL`` joins, a recursive term that may give rows over an empty
working table, volatile functions
(``random()``, ``now()``), a temporal filter below a reduce, ... -- is a :class:`Fallback`
whose reason names it.

Adjacent MapFilter nodes are fused into one segment (:func:`fused`). ``Plan.explain()``
prints one line per node, children indented, with its cost class: ``incremental O(delta)``
(linear segments, joins, accumulable reduces, distinct, temporal filters), ``per affected
group`` (reduces with ``min``/``max`` or basic aggregates, top-k), ``per affected
partition`` (windows), :data:`PER_OUTER_KEY` (a correlated subquery's join with its
distinct outer keys on no equi key of theirs) or ``recompute: <reason>`` (a Fallback). The
nodes are in ``colmz.dataflow.plan_nodes``, the rendering in ``colmz.dataflow.render``; this
module binds and exports them all.

Names: a binding error (an unknown table or column, an ambiguous column) raises
:class:`PlanError` naming it; an output column's name is its alias, its column's name or
PostgreSQL's name of the expression (``colmz.sql.parse.output_names``: ``count(*)`` is ``count``,
a cast its operand's), so a query reads a CTE's or subquery's derived column by that name;
made unique with ``_2``, ``_3`` suffixes. Semantics are PostgreSQL's (``ORDER BY``'s
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
import math
from collections.abc import Mapping, Sequence

import pyarrow as pa

from colmz.dataflow.interval_keys import interval_key
from colmz.dataflow.plan_binding import (
    COMPARE_OPS,
    FLIPPED,
    SAFE_ORDER_AGGREGATES,
    PlanError,
    Scope,
    Source,
    Unsupported,
    array_any,
    constant_of,
    has_grouping_sets,
    integer_versus_numeric,
    is_aggregate,
    is_now,
    unique_names,
    unparenthesized,
)
from colmz.dataflow.plan_joins import JoinLowering
from colmz.dataflow.plan_nodes import (
    INCREMENTAL,
    PER_GROUP,
    PER_OUTER_KEY,
    PER_PARTITION,
    Aggregate,
    BasicReduce,
    Comparison,
    Constant,
    Distinct,
    ErrorGuard,
    Fallback,
    FlatMap,
    Get,
    GroupSql,
    IsNullPredicate,
    Join,
    JsonbCheck,
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
    with_inputs,
)
from colmz.dataflow.plan_pushdown import (
    grouped_item_conjuncts,
    join_item_conjuncts,
    sql_pushed_below_sql,
)
from colmz.dataflow.plan_reduce import ReduceLowering
from colmz.dataflow.plan_setops import SetOpLowering
from colmz.dataflow.plan_subqueries import SubqueryLowering
from colmz.dataflow.plan_windows import WindowLowering
from colmz.dataflow.recompute import INPUT_RELATION, GroupRecompute
from colmz.dataflow.render import (
    CollatedReduce,
    Pipeline,
    render,
)
from colmz.dataflow.sqlmap import SqlMapFilter as SqlMapFilterOp
from colmz.dataflow.sqlmap import array_relations, placeholder
from colmz.dataflow.step import as_schema
from colmz.order import ColumnSpec
from colmz.sql.build import identifier
from colmz.sql.errors import SQLError
from colmz.sql.hints import strip_hints
from colmz.sql.jsonb import SPELLED, jsonb_dump, jsonb_load, spell_operators
from colmz.sql.jsonbcols import column_ref_kinds
from colmz.sql.parse import output_names
from colmz.sql.tokens import tokenize
from colmz.sql.tree import Expression, Order, Query, Table, parse_tree

__all__ = ["INCREMENTAL", "PER_GROUP", "PER_OUTER_KEY", "PER_PARTITION", "Aggregate", "BasicReduce", "CollatedReduce", "Comparison",
           "Constant", "Distinct", "ErrorGuard", "Fallback", "Get", "GroupSql", "IsNullPredicate", "Join", "JsonbCheck", "MapFilter",
           "Negate", "Node", "Pipeline", "Plan", "PlanError", "Predicate", "Reduce", "SqlMapFilter", "SqlTopK",
           "TemporalFilter", "Threshold",
           "TopK", "Union", "Window", "fused", "monotonic_plan", "plan", "render"]


class _Planner(JoinLowering, SubqueryLowering, ReduceLowering, SetOpLowering, WindowLowering):
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
        #: A ``WITH RECURSIVE`` CTE's query (by ``id``) -> its name (:meth:`recursive`).
        self.recursive_names: dict[int, str] = {}
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
        #: id(FROM subquery in a join) -> the WHERE conjuncts it takes before the join
        #: (plan_pushdown.join_item_conjuncts); the ids of the conjuncts so placed
        self.item_where: dict[int, list[Expression]] = {}
        self.item_placed: set[int] = set()
        #: A scalar subquery inside a WHERE condition (by ``id``) -> the column holding its
        #: value, joined into the condition's input (:meth:`query_checked`).
        self.subquery_columns: dict[int, str] = {}
        #: The WINDOW clause of the query whose window functions are being planned
        #: (:meth:`window_clause`), or ``None``.
        self.named_windows = None
        #: The inner and outer scopes of the ``EXISTS`` last decorrelated with conditions
        #: reading both (:meth:`correlated`), binding its residual (:meth:`semi_residual`).
        self.exists_scope: tuple[Scope, Scope] | None = None
        #: Every reduce planned as a :class:`BasicReduce` (DuckDB's aggregates, typed as
        #: PostgreSQL's): set to re-plan a subquery whose native aggregates would be read
        #: with another type (:meth:`typed_subquery`, :meth:`over_groups`).
        self.basic_only = False
        #: The distinct outer keys of the correlated subquery being planned, as a relation
        #: its ``FROM`` reads (by a name no table has) and the outer aliases it binds:
        #: :meth:`keyed_subquery`.
        self.outer_keys: dict[str, tuple[Node, list[Source]]] = {}
        #: The kind (``jsonb``, ``json``, ``text``) of each column reference (by its span) the
        #: query path resolves (:func:`colmz.sql.jsonbcols.column_ref_kinds`), and of each plan
        #: column such a reference was bound to (:meth:`noted_kind`): by these PostgreSQL's
        #: jsonb rules of a column's type apply to the SQL segments and native predicates
        #: exactly where they apply to the query.
        self.ref_kinds: dict[tuple[int, int], str] = {}
        self.column_kinds: dict[str, str] = {}
        #: The tables' column kinds as colmz.sql.jsonbcols reads them (``()``: not told).
        self.relations: tuple = ()

    def span(self, e) -> str:
        return self.text[e.start:e.end] if e.start >= 0 else e.type

    def item_name(self, e: Expression) -> str:
        """The name of select item ``e``'s column: its alias, else its column's name, else
        PostgreSQL's name of it (``colmz.sql.parse.output_names``: ``count(*)`` is ``count``,
        ``x::int`` is ``x``, a scalar subquery its own column's, an operator ``?column?``),
        which a query over it reads it by. An item without a span (written by the planner)
        or one DuckDB cannot parse alone is named by its text."""
        if e.alias:
            return e.alias
        if e.cls == "COLUMN_REF":
            return e.name[-1]
        names = output_names("SELECT " + self.span(e)) if e.start >= 0 else None
        return names[0] if names and len(names) == 1 and names[0] is not None else self.span(e)

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
        if bare.cls in ("COLUMN_REF", "FUNCTION") and (bare.cls == "COLUMN_REF" or is_aggregate(bare)):
            col = column_of(bare)
            if not pa.types.is_boolean(types[col]):
                raise Unsupported(f"predicate {self.span(e)!r}: a {types[col]} value as a condition")
            return (Comparison(col, "=", not negated),)
        return (self.predicate(e, column_of, types),)

    def noted_kind(self, ref: Expression, col: str) -> str | None:
        """The kind the query path gives column reference ``ref`` (``None``: not told), noted
        as plan column ``col``'s; ``Unsupported`` when ``col`` was noted of another kind (one
        plan name for two columns: the segments reading it could not apply both rules)."""
        kind = self.ref_kinds.get((ref.start, ref.end)) if ref.start >= 0 else None
        if kind is not None and self.column_kinds.setdefault(col, kind) != kind:
            raise Unsupported(f"column {self.span(ref)!r}: its plan column {col!r} is read as "
                              f"{self.column_kinds[col]} and as {kind}")
        return kind

    def kinds_of(self, schema: Schema) -> tuple[str | None, ...]:
        """The kind noted for each column of ``schema`` (``()`` when none is)."""
        kinds = tuple(self.column_kinds.get(c.name) for c in schema)
        return kinds if any(k is not None for k in kinds) else ()

    def predicate(self, e: Expression, column_of, types: dict[str, pa.DataType], text: str = "") -> Predicate:
        """A native predicate for ``e``; ``column_of(expr)`` binds its column side."""
        if e.cls == "OPERATOR" and e.type in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL") and len(e.children) == 1:
            return IsNullPredicate(column_of(e.children[0]), e.type == "OPERATOR_IS_NOT_NULL")
        if e.cls == "COMPARISON" and e.type in COMPARE_OPS and len(e.children) == 2:
            a, b = e.children
            op = COMPARE_OPS[e.type]
            if a.cls == "CONSTANT" and b.cls != "CONSTANT":
                a, b, op = b, a, FLIPPED[op]
            what = text or self.span(e)
            if b.cls != "CONSTANT" or b.literal is None:
                raise Unsupported(f"predicate {what!r}: not a column compared with a constant")
            col = column_of(a)
            value = b.literal.value if b.literal.kind != "NULL_LITERAL" else None
            if value is None:
                raise Unsupported(f"predicate {what!r}: a comparison with NULL")
            t = types[col]
            v = constant_of(value, t)
            if (v is None and pa.types.is_integer(t) and not isinstance(value, bool)
                    and isinstance(value, (int, decimal.Decimal)) and decimal.Decimal(value).is_finite()):
                # a numeric literal, or an integer one beyond the column's type (numeric too)
                return integer_versus_numeric(col, op, decimal.Decimal(value), t)
            if v is None:
                raise Unsupported(f"predicate {what!r}: the constant is not of the column's type {t}")
            if isinstance(v, float) and math.isnan(v):
                raise Unsupported(f"predicate {what!r}: a NaN constant")
            kind = self.noted_kind(a, col)
            if isinstance(v, str) and kind == "jsonb" and op in ("=", "<>"):
                # PostgreSQL reads the literal as jsonb (colmz.sql.jsonbcols): its canonical
                # text, as colmz keeps a jsonb column's values, compares as jsonb does
                try:
                    doc = jsonb_load(v)
                except ValueError:
                    raise Unsupported(f"predicate {what!r}: the literal is not JSON") from None
                v = jsonb_dump(doc)
                if any(c.isdigit() for c in _json_numbers(doc)):
                    # jsonb compares a number by its value (1.0 is 1): not the text
                    raise Unsupported(f"predicate {what!r}: a jsonb literal holding a number")
            elif isinstance(v, str) and kind in ("jsonb", "json"):
                raise Unsupported(f"predicate {what!r}: a {kind} column {op} a string literal")
            if isinstance(v, str) and op not in ("=", "<>"):
                raise Unsupported(f"predicate {what!r}: text ordered by the collation")
            return Comparison(col, op, v)
        raise Unsupported(f"predicate {self.span(e)!r}: not a column compared with a constant or IS [NOT] NULL")

    # ---- FROM

    TABLE_FUNCTIONS = {"generate_series": (2, 3), "unnest": (1,), "jsonb_array_elements": (1,),
                       "jsonb_array_elements_text": (1,), "jsonb_object_keys": (1,), "jsonb_each": (1,),
                       "jsonb_each_text": (1,), "regexp_matches": (2, 3), "regexp_split_to_table": (2, 3),
                       "generate_subscripts": (2, 3)}
    #: The output columns a table function names itself (PostgreSQL's OUT parameters): a
    #: column alias list renames them; a function not listed has one column, named by its
    #: column alias, else its table alias, else the function (colmz/sql/jsonb.py names the
    #: same when translate rewrites the call).
    TABLE_FUNCTION_COLUMNS = {"jsonb_each": ("key", "value"), "jsonb_each_text": ("key", "value"),
                              "jsonb_array_elements": ("value",), "jsonb_array_elements_text": ("value",)}

    def query(self, q: Query) -> Node:
        self.depth += 1
        try:
            return self.query_checked(q)
        except Unsupported as e:
            return Fallback((), self.query_text(q), str(e))
        finally:
            self.depth -= 1

    def query_text(self, q: Query) -> str:
        spans = [e for e in (*q.items, q.where, q.having) if e is not None and e.start >= 0]
        if not spans:
            return self.text
        return self.text[min(e.start for e in spans):max(e.end for e in spans)]

    def query_checked(self, q: Query) -> Node:
        if q.type == "RECURSIVE_CTE_NODE":
            return self.recursive(q)
        if q.ctes:
            return self.with_ctes(q)
        if q.type == "SET_OPERATION_NODE":
            return self.modifiers(self.setop(q), q)
        if q.type != "SELECT_NODE":
            raise Unsupported(f"a {q.type}")
        if q.from_ is None:
            return self.modifiers(self.constant(q), q)
        for what, present in (("QUALIFY", q.qualify is not None), ("USING SAMPLE", q.sampled),
                              ("GROUP BY ALL", q.aggregate_handling != "STANDARD_HANDLING")):
            if present:
                raise Unsupported(what)
        if q.having is not None and q.group_by and not has_grouping_sets(q) \
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
                    raise Unsupported(f"a subquery in an expression ({self.span(sub)!r})")
        where, semi, temporal = self.split_where(q.where)
        windowed = any(sub.cls == "WINDOW" for e in q.items for sub in e.walk())
        # a join's subquery filtered by the conjuncts reading only its passed-through columns
        # before the join, as the recompute path (colmz.sql.pushdown) and PostgreSQL do
        taken = join_item_conjuncts(q.from_, where, self.VOLATILE_CALLS) or self.grouped_item_where(q.from_, where)
        self.item_where.update(taken)
        try:
            node, sources, conds = self.table(q.from_)
        finally:
            for k in taken:
                self.item_where.pop(k, None)
        where = [c for c in where if id(c) not in self.item_placed]
        scope = Scope(sources)
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
                    if sub.cls == "SUBQUERY" and not array_any(sub) and self.inlined(sub) is None:
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
            # the conjuncts reading only a FROM subquery's passed columns run before its items
            node = sql_pushed_below_sql(node, self.VOLATILE_CALLS)
            if node.schema != before:
                node = fused(before, node, (), tuple((c.name, c.name) for c in before))
        for e, negated in semi:
            node = self.semijoin(node, scope, e, negated)
        aggregated = bool(q.group_by) or q.having is not None or any(
            is_aggregate(s) for e in q.items for s in e.walk() if s.cls != "WINDOW")
        if (aggregated or windowed) and temporal:
            raise Unsupported("a temporal filter (mz_now()) below a reduce or a window")
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

    def grouped_item_where(self, from_: Table, where: list[Expression]) -> dict[int, list[Expression]]:
        """``{id(from_): conjuncts}``: the ``WHERE`` conjuncts that filter the one ``FROM``
        item ``from_`` below its grouping (``plan_pushdown.grouped_item_conjuncts``) -- a
        grouped subquery, or a grouped CTE referenced once in the text without a column
        list, as the recompute path (``colmz.sql.pushdown``) inlines it -- so a group they
        drop is never computed (nor raises), as in PostgreSQL; ``{}`` when none moves."""
        if from_.type == "SUBQUERY" and from_.subquery is not None and from_.alias:
            item, alias = from_.subquery, from_.alias
        elif from_.type == "BASE_TABLE" and len(from_.name) == 1 and self.cte(from_.name[0]) is not None:
            name = from_.name[0]
            found = self.cte(name)[1]
            toks = tokenize(self.text)
            if not isinstance(found, tuple) or found[2] or any(t.upper == "RECURSIVE" for t in toks) or sum(
                    t.kind in ("word", "qident") and t.text.strip('"').lower() == name.lower() for t in toks) != 2:
                return {}  # as colmz.sql.pushdown: a CTE it does not inline
            item, alias = found[0], from_.alias or name
        else:
            return {}
        mine = grouped_item_conjuncts(item, alias, from_.column_aliases, where, self.VOLATILE_CALLS)
        return {id(from_): mine} if mine else {}

    def select_rest(self, q: Query, node: Node, scope: Scope, sources, aggregated: bool, windowed: bool,
                    temporal, sql_items) -> Node:
        """A ``SELECT``'s reduce or window, select list and modifiers over its ``FROM`` and
        ``WHERE`` (``node``)."""
        if aggregated and has_grouping_sets(q):
            return self.modifiers(self.grouping_union(q, node, scope), q)
        if aggregated and self.basic_only:
            node, select = self.basic_reduce(q, node, scope, "aggregates read as PostgreSQL types them")
        elif aggregated:
            # native reduce (expressions over its groups and aggregates a SQL segment over its
            # output: O(delta)), else every aggregate recomputed by DuckDB per affected group
            try:
                red, select, agg_sql, shown_agg = self.reduce(q, node, scope)
                if agg_sql:
                    red = self.items_segment(red, unique_names(select), agg_sql, shown_agg)
                    return self.modifiers(red, q)
                node = red
            except Unsupported as native:
                node, select = self.basic_reduce(q, node, scope, str(native))
        elif windowed:
            node, select = self.window(q, node, scope)
        else:
            select = []
            for e in q.items:
                if e.cls == "STAR":
                    if e.star_modified:
                        raise Unsupported(f"{self.span(e)!r} (EXCLUDE/REPLACE/RENAME/COLUMNS)")
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
                elif e.cls == "SUBQUERY" and self.inlined(e) is not None:  # (SELECT outer_column)
                    sql_items[len(select)] = e
                    select.append(("", self.item_name(e)))
                elif e.cls == "SUBQUERY":
                    node, col = self.scalar_subquery(node, e, scope)
                    select.append((col, self.item_name(e)))
                else:  # a scalar expression: SQL over the delta (one DuckDB call per commit)
                    sql_items[len(select)] = e
                    select.append(("", self.item_name(e)))
        select = unique_names(select)
        shown = len(select)
        if not temporal:
            select += self.order_columns(q, select, sql_items, scope)
        if sql_items:
            if temporal:
                raise Unsupported("a temporal filter (mz_now()) with select items needing SQL")
            names = [c.name for c in node.schema]
            texts = {i: self.sql_text(e, names, scope.column) for i, e in sql_items.items()}
            node = self.items_segment(node, select, texts, [self.span(e) for e in sql_items.values()])
            return self.without_order_columns(self.modifiers(node, q, shown), shown)
        types = {c.name: c.type for c in node.schema}
        if temporal:
            return self.temporal(node, scope, temporal, select, q)
        node = fused(tuple(ColumnSpec(n, types[s]) for s, n in select), node, (), tuple(select))
        return self.without_order_columns(self.modifiers(node, q, shown), shown)

    def order_columns(self, q: Query, select, sql_items, scope: Scope) -> list[tuple[str, str]]:
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
        # a derived item's name (``v`` of ``v::text``) read by ORDER BY is the input column of
        # that name where there is one, as the recompute path binds it (PostgreSQL reads the
        # output column first: a difference of the query path, which this plan follows)
        derived = {self.item_name(e) for e in q.items if not e.alias and e.cls not in ("STAR", "COLUMN_REF")}

        def bound(e: Expression) -> bool:
            try:
                scope.column(e)
            except PlanError:
                return False
            return True

        hidden: list[tuple[str, str]] = []
        for e in exprs:
            if e.start < 0:
                continue
            if e.cls == "COLUMN_REF" and not (len(e.name) == 1 and e.name[0] in names
                                               and not (e.name[0] in derived and bound(e))):
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

    def modifiers(self, node: Node, q: Query, shown: int | None = None) -> Node:
        """``node`` under ``q``'s ``DISTINCT [ON]``, ``ORDER BY``, ``LIMIT``/``OFFSET``:
        ``node``'s first ``shown`` columns (all by default) are the select list's, the rest
        hidden order columns (:meth:`order_columns`)."""
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
                        raise Unsupported(f"{what} {self.span(e)!r}: not a non-negative integer constant")
                    if what == "LIMIT":
                        limit = e.literal.value
                    else:
                        offset = e.literal.value
            else:
                raise Unsupported(m.type.replace("_MODIFIER", "").replace("_", " "))
        if distinct:
            node = Distinct(node.schema, node)
        if limit is None and offset == 0 and not distinct_on:
            # ORDER BY alone orders nothing a view keeps (Materialize drops it too), whatever
            # it reads: the query's own binding already checked it
            self.dropped_order(order)
            return node
        keys = [self.order_key(o, names, "ORDER BY") for o in order]
        # a LATERAL subquery's rows are per correlation key (its last select items, before
        # the hidden order columns): so is its top-k
        end = len(names) if shown is None else shown
        per = tuple(names[end - self.lateral_keys[id(q)]:end]) if id(q) in self.lateral_keys else ()
        if distinct_on:
            on = [self.order_key(Order(e), names, "DISTINCT ON")[0] for e in distinct_on]
            # PostgreSQL: the leading ORDER BY items are the DISTINCT ON expressions (in any
            # order); the rest orders each group, whose first row is kept (Materialize's TopK
            # with limit 1)
            lead = {k[0] for k in keys[:len(on)]}
            if not lead <= set(on) or (len(keys) >= len(on) and lead != set(on)):
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
        constants (one row by its shape, never an error); ``Unsupported`` for any other."""
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
                safe = safe and (agg.cls == "FUNCTION" and agg.name[-1] in SAFE_ORDER_AGGREGATES
                                 and not agg.distinct and agg.filter is None and not agg.order_by
                                 and agg.over is None and all(c.cls == "COLUMN_REF" for c in agg.children))
                safe = safe and all(c.cls in ("COLUMN_REF", "CONSTANT") or c.type in COMPARE_OPS
                                    or c.type == "CONJUNCTION_AND" for c in (sub.where.walk() if sub.where else ()))
                if not safe:
                    raise Unsupported(f"ORDER BY subquery {text!r} (dropped without LIMIT) of other than one "
                                       "aggregate of columns over a table filtered by comparisons: it may raise")
                name = sub.from_.name[0]
                if self.cte(name) is not None or name not in self.schemas:
                    raise Unsupported(f"ORDER BY subquery {text!r} reads {name!r}, not a table")
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
            raise Unsupported(f"{what} {self.span(e)!r}: not an output column")
        desc = o.direction == "DESCENDING"
        nulls_first = desc if o.nulls == "ORDER_DEFAULT" else o.nulls == "NULLS FIRST"
        return col, desc, nulls_first

    def top_k(self, node: Node, group: tuple[str, ...], keys: tuple, limit, offset: int, hint=None) -> Node:
        """A native :class:`TopK` (``hint``: its group-size hint, recorded), or -- when the
        order reads text (the collation's order, SQL's business) or an array (PostgreSQL's
        array order, not colmz's encoding's) -- a :class:`SqlTopK` recomputed by DuckDB per
        affected group."""
        types = {c.name: c.type for c in node.schema}
        if not any(pa.types.is_string(types[c]) or pa.types.is_large_string(types[c])
                   or pa.types.is_list(types[c]) or pa.types.is_large_list(types[c]) for c, _, _ in keys):
            return TopK(node.schema, node, keys, limit, offset, group, hint)
        order = ", ".join(f"{identifier(c)}{' DESC' if d else ' ASC'} NULLS {'FIRST' if n else 'LAST'}"
                          for c, d, n in keys) or "1"
        rn = identifier("__rn")
        bound = f"{rn} > {offset}" + ("" if limit is None else f" AND {rn} <= {offset + limit}")
        part = f"PARTITION BY {', '.join(identifier(g) for g in group)} " if group else ""
        # (the input's columns listed, not DuckDB's * EXCLUDE: translate reads PostgreSQL's SQL)
        cols = ", ".join(identifier(c.name) for c in node.schema)
        sql = (f"SELECT {cols} FROM (SELECT *, row_number() OVER ({part}ORDER BY {order}) AS {rn} "
               f"FROM {INPUT_RELATION}) WHERE {bound}")
        what = f"order_by=[{order}] limit={limit} offset={offset}"
        return SqlTopK(node.schema, node, group, (("top", what),), self.checked_sql(sql, node.schema, group, "ORDER BY"))

    def constant(self, q: Query) -> Node:
        """``SELECT`` of literals without ``FROM``: one row, PostgreSQL's literal types
        (an integer literal is ``integer`` if it fits, else ``bigint``)."""
        if q.where is not None or q.group_by or q.having is not None:
            raise Unsupported("SELECT without FROM with WHERE, GROUP BY or HAVING")
        names, values, types = [], [], []
        subqueries = {i: e for i, e in enumerate(q.items)
                      if e.cls == "SUBQUERY" or self.quantified_constant(e) is not None}
        if subqueries:
            return self.constant_with_subqueries(q, subqueries)
        computed = {i: e for i, e in enumerate(q.items) if self.typed_null(e) is None and self.typed_literal(e) is None
                    and (e.cls != "CONSTANT" or e.literal is None or e.literal.kind not in ("INTEGER", "STRING", "BOOLEAN"))}
        if computed:
            return self.constant_computed(q, computed)
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
                raise Unsupported(f"select item {self.span(e)!r} without FROM: not an integer, text or boolean "
                                   "literal or a NULL cast to one of their types")
            v = lit.value
            if lit.kind == "INTEGER":
                t = pa.int32() if -(2**31) <= v < 2**31 else pa.int64() if -(2**63) <= v < 2**63 else None
                if t is None:
                    raise Unsupported(f"select item {self.span(e)!r}: an integer literal beyond bigint (numeric)")
            else:
                t = pa.string() if lit.kind == "STRING" else pa.bool_()
            names.append(e.alias or "?column?")
            values.append(v)
            types.append(t)
        names = [n for _, n in unique_names([(n, n) for n in names])]
        return Constant(tuple(ColumnSpec(n, t) for n, t in zip(names, types)), (tuple(values),))

    def constant_computed(self, q: Query, computed: dict[int, Expression]) -> Node:
        """``SELECT`` without ``FROM`` whose ``computed`` items are expressions rather than
        literals (``ARRAY[1, 2]``, ``1 + 2``): the other items' constant row (with a column of
        its own, so that it is never empty) under a SQL segment computing them, so their
        values and types are the query path's; an item reading a column is ``Unsupported``."""
        rest = tuple(e for i, e in enumerate(q.items) if i not in computed)
        anchor = self.fresh("row")
        const = self.constant(dataclasses.replace(q, items=rest, modifiers=()))
        node: Node = Constant(const.schema + (ColumnSpec(anchor, pa.int32()),),
                              tuple((*r, 1) for r in const.rows))
        names = [c.name for c in node.schema]

        def no_column(e: Expression) -> str:
            raise Unsupported(f"select item {self.span(e)!r} without FROM: a column of no relation")

        at = iter(names)
        select, texts, shown = [], {}, []
        for i, e in enumerate(q.items):
            if i in computed:
                texts[i] = self.sql_text(e, names, no_column)
                shown.append(self.span(e))
                select.append((anchor, self.item_name(e)))
            else:
                src = next(at)
                select.append((src, src))
        return self.items_segment(node, unique_names(select), texts, shown)

    def constant_with_subqueries(self, q: Query, subqueries: dict[int, Expression]) -> Node:
        """``SELECT`` without ``FROM`` whose items include scalar subqueries of one row by
        their shape: the other items' constant row (with a column of its own, so that it is
        never empty) crossed with each subquery (:meth:`scalar_subquery`), projected to the
        items in order."""
        rest = tuple(e for i, e in enumerate(q.items) if i not in subqueries)
        anchor = self.fresh("row")
        const = self.constant(dataclasses.replace(q, items=rest, modifiers=()))
        if not isinstance(const, Constant):
            raise Unsupported("SELECT without FROM of scalar subqueries beside items computed by SQL")
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
                select.append((col, self.item_name(e)))
            else:
                select.append((next(at), ""))
        types = {c.name: c.type for c in node.schema}
        select = [(src, name or src) for src, name in select]
        select = unique_names(select)
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
            raise Unsupported(f"an expression without a position in the text ({e.type})")
        refs: dict[tuple[int, int], str] = {}
        stack = [e]
        while stack:
            sub = stack.pop()
            if sub.cls == "SUBQUERY":
                raise Unsupported(f"a subquery in an expression ({self.span(sub)!r})")
            if sub.cls in ("FUNCTION", "WINDOW") and sub.name and sub.name[-1].lower() in self.VOLATILE_CALLS:
                raise Unsupported(f"{sub.name[-1]}() in {self.span(e)!r}: its value depends on when it runs")
            group = self.group_key(sub) if sub.cls != "COLUMN_REF" else None
            if sub.cls == "COLUMN_REF" or group is not None:
                if (self.named_windows is not None and sub.cls == "COLUMN_REF"
                        and self.named_windows[0] <= sub.start and sub.end <= self.named_windows[1]):
                    continue  # a named window's, read in the WINDOW clause (:meth:`window`)
                if sub.start < e.start or sub.end > e.end:
                    raise Unsupported(f"column reference outside {self.span(e)!r}")
                # a GROUP BY expression reads its column; a reference DuckDB copied (simple
                # CASE) is one position, replaced once
                refs[(sub.start, sub.end)] = group if group is not None else column_of(sub)
                if group is None:
                    self.noted_kind(sub, refs[(sub.start, sub.end)])
                continue
            stack.extend(sub.children)
        out, at = [], e.start
        for (start, end), col in sorted(refs.items()):
            if start < at:
                raise Unsupported(f"{self.span(e)!r}: a reference without its own position")
            out.append(self.text[at:start])
            out.append(identifier(col))
            at = end
        out.append(self.text[at:e.end])
        return "".join(out)

    # ---- scalars as SQL over each delta (Map/Filter segments, views39c)

    def native(self, e: Expression, scope: Scope, sources: list[Source]) -> bool:
        """Whether conjunct ``e`` is an equality of columns or a native predicate."""
        try:
            if self.equality(e, scope) is not None:
                return True
            types = {p: t for s in sources for p, t in s.columns.values()}
            self.predicates(e, scope.column, types)
            return True
        except (Unsupported, PlanError):
            # PlanError: the predicate binds an expression where a column goes (``v % 2 = 0``);
            # an unknown column is refused by binding the SQL text's column references
            return False

    def sql_text(self, e: Expression, names: list[str], column_of, aggregate_of=None) -> str:
        """The user's text of ``e`` with each column reference replaced by the placeholder of
        its column among ``names`` (the segment's input) -- and, with ``aggregate_of`` (over a
        reduce's output), each aggregate call by its output column's; ``Unsupported`` for
        what SQL over a delta cannot evaluate (subqueries, window functions, aggregates
        without ``aggregate_of``, volatile functions). A scalar subquery that is an outer
        expression (:meth:`inlined`) is that expression, parenthesized."""
        if e.start < 0:
            raise Unsupported(f"expression {e.type}: no position in the text")
        # (start, end, text): a span of the user's text replaced
        refs: list[tuple[int, int, str]] = []

        def ref(sub: Expression, col: str) -> None:
            refs.append((sub.start, sub.end, placeholder(names.index(col))))

        def visit(sub: Expression) -> None:
            if sub.cls != "COLUMN_REF" and self.group_key(sub) is not None and self.group_key(sub) in names:
                ref(sub, self.group_key(sub))  # a GROUP BY expression: its column
                return
            item = self.inlined(sub) if sub.cls == "SUBQUERY" else None
            if item is not None:  # (SELECT item) -> (item)
                refs.extend(((sub.start, item.start, "("), (item.end, sub.end, ")")))
                visit(item)
                return
            if array_any(sub):
                # x op ANY (ARRAY[...]), which DuckDB reads as a subquery over unnest: a
                # scalar over the row, the user's text as written
                for part in (*sub.children, *sub.subquery.items[0].children):
                    visit(part)
                return
            if sub.cls == "SUBQUERY" and id(sub) in self.subquery_columns:
                ref(sub, self.subquery_columns[id(sub)])  # its value, joined in
                return
            if sub.cls == "SUBQUERY":
                raise Unsupported(f"a subquery in an expression ({self.span(sub)!r})")
            if sub.cls == "WINDOW":
                raise Unsupported(f"a window function ({self.span(sub)!r})")
            if sub.cls == "STAR":
                raise Unsupported(f"{self.span(e)!r}: a * inside an expression")
            if is_aggregate(sub):
                if aggregate_of is None:
                    raise Unsupported(f"{self.span(e)!r}: an aggregate inside an expression")
                ref(sub, aggregate_of(sub))
                return
            if sub.cls == "FUNCTION" and sub.name and sub.name[-1].lower() in self.VOLATILE_CALLS:
                raise Unsupported(f"{self.span(e)!r}: {sub.name[-1]} is volatile")
            if sub.cls == "COLUMN_REF":
                col = column_of(sub)
                ref(sub, col)
                self.noted_kind(sub, col)
                return
            for c in sub.children:
                visit(c)

        visit(e)
        out, at, last = [], e.start, None
        for r in sorted(refs, key=lambda r: r[0]):
            if r == last:
                continue  # one reference DuckDB copied (CASE x WHEN a ... is x = a per WHEN)
            start, end, text = r
            if start < at or end > e.end:
                raise Unsupported(f"{self.span(e)!r}: a reference without its own position")
            last = r
            out += [self.text[at:start], text]
            at = end
        out.append(self.text[at:e.end])
        return "".join(out)

    def sql_segment(self, node: Node, where: tuple[str, ...], select, shown: list[str]) -> Node:
        """A :class:`SqlMapFilter` over ``node``, its output types DuckDB's for the
        translated segment (``Unsupported`` naming the error when it does not translate or bind)."""
        if isinstance(node, SqlMapFilter) and node.select is None:
            # one segment: a filter's output columns are its input's, so the placeholders of
            # ``where`` and ``select`` read the same columns (one DuckDB call, not two)
            where, shown, node = node.where + where, [*node.shown, *shown], node.input
        try:
            schema = SqlMapFilterOp(node.schema, where, select, kinds=self.kinds_of(node.schema)).schema
            # PostgreSQL's WHERE takes a boolean only; DuckDB reads an integer as one
            typed = SqlMapFilterOp(node.schema, (), [(w, f"w{i}") for i, w in enumerate(where)]).schema if where else ()
        except (SQLError, TypeError, ValueError) as e:
            raise Unsupported(f"{', '.join(repr(x) for x in shown)}: {e}") from None
        for c, text in zip(typed, shown):
            if not (pa.types.is_boolean(c.type) or pa.types.is_null(c.type)):
                raise Unsupported(f"predicate {text!r}: a {c.type} value as a condition")
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
        from colmz.sql.column_rules import SEGMENT_RULES, column_type, column_type_rules
        from colmz.sql.translate import translate

        try:
            # the PostgreSQL rules of a float, jsonb or interval column's type
            # (colmz.sql.column_rules), as the catalog's queries get them
            schema = as_schema(schema, "schema")
            kinds = self.kinds_of(schema) or (None,) * len(schema)
            translated = column_type_rules(translate(sql, array_relations(INPUT_RELATION, (
                (n, c.type) for i, c in enumerate(schema) for n in (c.name, placeholder(i)[1:-1])))), ((
                    INPUT_RELATION, tuple((n.lower(), *column_type(c.type, k)) for i, (c, k) in enumerate(zip(schema, kinds))
                                          for n in (c.name, placeholder(i)[1:-1]))),), SEGMENT_RULES)
            GroupRecompute(schema, list(key), translated)
        except (SQLError, TypeError, ValueError) as e:
            raise Unsupported(f"{what} through SQL: {e}") from None
        return translated

    def temporal(self, node: Node, scope: Scope, conds: list[Expression], select, q: Query) -> Node:
        """``mz_now() op column [+|- integer]`` conjuncts as a :class:`TemporalFilter` at the
        top of the plan (its output holds future updates, which only the view's sink --
        its ``Correction`` -- may hold: nothing stateful sits above it)."""
        if any(m.type != "ORDER_MODIFIER" for m in q.modifiers):
            raise Unsupported("a temporal filter (mz_now()) below DISTINCT, LIMIT or OFFSET")
        if self.depth > 1:
            # its output holds future updates, which no operator above it takes
            raise Unsupported("a temporal filter (mz_now()) in a subquery, CTE or set-operation branch")
        types = {c.name: c.type for c in node.schema}
        bounds = []
        for c in conds:
            if not (c.cls == "COMPARISON" and c.type in COMPARE_OPS and len(c.children) == 2):
                raise Unsupported(f"{self.span(c)!r}: mz_now() other than compared with a column")
            a, b = c.children
            op = COMPARE_OPS[c.type]
            if not is_now(a):
                a, b, op = b, a, FLIPPED[op]
            if not is_now(a) or op == "<>":
                raise Unsupported(f"{self.span(c)!r}: mz_now() other than compared (=, <, <=, >, >=) with a column")
            col, offset = self.bound_expression(b, scope, self.span(c))
            t = types[col]
            if not pa.types.is_integer(t):
                raise Unsupported(f"{self.span(c)!r}: mz_now() compared with a {t} column (integers only)")
            bounds.append((col, offset, op))
        types = {c.name: c.type for c in node.schema}
        schema = tuple(ColumnSpec(n, types[s]) for s, n in select)
        return TemporalFilter(schema, node, tuple(bounds), tuple(select))

    def bound_expression(self, e: Expression, scope: Scope, text: str) -> tuple[str, int]:
        if e.cls == "COLUMN_REF":
            return scope.column(e), 0
        if e.cls == "FUNCTION" and e.name in (("+",), ("-",)) and len(e.children) == 2:
            x, y = e.children
            if e.name == ("+",) and x.cls == "CONSTANT":
                x, y = y, x
            if (x.cls == "COLUMN_REF" and y.cls == "CONSTANT" and y.literal is not None
                    and y.literal.kind == "INTEGER"):
                return scope.column(x), y.literal.value if e.name == ("+",) else -y.literal.value
        raise Unsupported(f"{text!r}: mz_now() compared with other than a column plus or minus an integer")



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
    node = with_inputs(node, rebuilt)
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


def plan(query_text: str, schemas: Mapping[str, object], subquery_schema=None, append_only=(),
         kinds: Mapping[str, Sequence[str | None]] | None = None) -> Plan:
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
    INPUT GROUP SIZE`` is recorded on its node (colmz's top-k has one plan). ``kinds``, when
    given, tells the kind of each column of a table (``"jsonb"``, ``"json"``, ``"text"`` or
    ``None``, in its columns' order; :mod:`colmz.catalog.column_kinds`): PostgreSQL's rules
    of a column's type (:mod:`colmz.sql.jsonbcols`: a jsonb column compared with a string
    literal compares jsonb, ``||`` of two jsonb columns merges them) then apply to the SQL
    segments and native predicates wherever the query path applies them to the query.

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
    # jsonb's #>, #>>, ?, ?|, ?& spelled as operators DuckDB parses (translate's first step):
    # every span and slice is of this text, and translate leaves a spelled text's operators
    # as they are and rewrites them by its rules; what the plan shows (a Fallback's text and
    # reason, EXPLAIN's texts) is written back as the user wrote it
    spelled = spell_operators(text, tokenize(text))
    user = _user_text(text, spelled)
    text = spelled
    try:
        stmts = parse_tree(text)
    except SQLError as e:
        raise type(e)(user(str(e))) from None
    if len(stmts) != 1:
        raise PlanError(f"query_text holds {len(stmts)} statements; a view's query is one")
    p = _Planner(text, checked, subquery_schema, hints)
    if kinds:
        p.relations = _relations(checked, kinds)
        p.ref_kinds = column_ref_kinds(text, p.relations)
    p.spans[id(stmts[0])] = unparenthesized(text, 0, len(text))
    try:
        root = p.query(stmts[0])
    except PlanError as e:
        raise PlanError(user(str(e))) from None
    if p.column_kinds or p.relations:
        # (a table's column read as it is has its table's kind)
        tables = {name: dict(cols) for name, cols in p.relations}
        for get in _gets(root, {}):
            for src, col in get.columns:
                kind = tables.get(get.table.lower(), {}).get(src.lower())
                if kind is not None:
                    p.column_kinds.setdefault(col, kind)
        try:
            root = _with_kinds(root, p.column_kinds)
        except Unsupported as e:
            root = Fallback((), user(text), user(str(e)))
    if user is not _as_is:
        root = _shown_as_written(root, user, {})
    keyed = interval_key(root)
    if keyed is not None:
        # PostgreSQL's equality of intervals is DuckDB's, not that of colmz's keys
        root = Fallback((), user(text), keyed)
    if append_only:
        if isinstance(append_only, str) or not all(isinstance(n, str) for n in append_only):
            raise TypeError(f"append_only must be a collection of relation names, got {append_only!r}")
        root, _ = monotonic_plan(root, frozenset(append_only))
    return Plan(root, query_text, dict(p.used))


def _json_numbers(v) -> str:
    # the text of every number in the JSON value ``v`` (as jsonb_load reads it), joined
    if isinstance(v, dict):
        return "".join(_json_numbers(x) for x in v.values())
    if isinstance(v, list):
        return "".join(_json_numbers(x) for x in v)
    return "" if v is None or isinstance(v, (str, bool)) else str(v) or "0"


def _relations(schemas: Mapping[str, Schema], kinds: Mapping[str, Sequence[str | None]]) -> tuple:
    # colmz.sql.jsonbcols' relations: each table's (name, kind) pairs, by its own name
    out = []
    for name, schema in schemas.items():
        told = kinds.get(name)
        if told is None:
            continue
        told = tuple(told)
        if len(told) != len(schema):
            raise ValueError(f"kinds[{name!r}]: {len(told)} kind(s) for {len(schema)} column(s)")
        out.append((name.lower(), tuple((c.name.lower(), k) for c, k in zip(schema, told))))
    return tuple(out)


def _with_kinds(node: Node, kinds: Mapping[str, str], done: dict | None = None) -> Node:
    """``node`` with each SQL segment's ``kinds`` those of its input's columns, set once the
    whole query is planned (a conjunct moved into a segment below reads it there): a column
    noted of a kind (:meth:`_Planner.noted_kind`) has it, and so has a column renamed or
    passed on from one (a subquery's, a CTE's output); and with jsonb's text compared only
    where it is jsonb's equality -- the jsonb columns a DISTINCT, GROUP BY, set operation,
    DISTINCT ON or join key compares are checked below (a :class:`JsonbCheck`),
    and a top-k ordered by one, or a group's SQL reading one it was not translated as jsonb
    for, is ``Unsupported`` (jsonb's order is not its text's)."""
    done = {} if done is None else done
    if id(node) in done:
        return done[id(node)]
    ins = tuple(_with_kinds(i, kinds, done) for i in node.inputs)
    out = with_inputs(node, ins)
    told = [_kinds_out(i, kinds) for i in ins]
    if isinstance(out, SqlMapFilter):
        k = tuple(told[0].get(c.name) for c in out.input.schema)
        out = dataclasses.replace(out, kinds=k if any(x is not None for x in k) else ())
    elif isinstance(out, (Distinct, Threshold)):
        out = with_inputs(out, (_plain_below(ins[0], told[0], [c.name for c in ins[0].schema]),))
    elif isinstance(out, Reduce):
        out = with_inputs(out, (_plain_below(ins[0], told[0], out.group_by),))
    elif isinstance(out, TopK):
        jsonb = [c for c, *_ in out.order_by if told[0].get(c) == "jsonb"]
        if jsonb:
            raise Unsupported(f"a top-k ordered by the jsonb column {jsonb[0]} (jsonb's order is not its text's)")
        out = with_inputs(out, (_plain_below(ins[0], told[0], out.group_by),))
    elif isinstance(out, GroupSql):
        unread = [c.name for c in ins[0].schema if told[0].get(c.name) == "jsonb" and kinds.get(c.name) != "jsonb"]
        if unread and any(w in out.sql.upper() for w in _COMPARING_SQL):
            raise Unsupported(f"a group's SQL reading the jsonb column {unread[0]} as text")
        out = with_inputs(out, (_plain_below(ins[0], told[0], out.key),))
    elif isinstance(out, Join) and out.on:
        left = {c.name for c in ins[0].schema} if len(ins) == 2 else set()
        keys = [c for pair in out.on for c in pair if any(t.get(c) == "jsonb" for t in told)]
        if keys and len(ins) == 2:
            out = with_inputs(out, (_plain_below(ins[0], told[0], [c for c in keys if c in left]),
                                    _plain_below(ins[1], told[1], [c for c in keys if c not in left])))
        elif keys:
            raise Unsupported(f"a join keyed by the jsonb column {keys[0]}")
    done[id(node)] = out
    return out


#: What a group's SQL compares or orders its values by, when its text holds one of these.
_COMPARING_SQL = ("ORDER BY", "PARTITION BY", "DISTINCT", "GROUP BY", " IN ", "BETWEEN", "=", "<", ">")


def _gets(node: Node, seen: dict) -> list:
    # the Get nodes of a plan
    if id(node) in seen:
        return []
    seen[id(node)] = node
    own = [node] if isinstance(node, Get) else []
    return own + [g for i in node.inputs for g in _gets(i, seen)]


def _kinds_out(node: Node, kinds: Mapping[str, str]) -> dict[str, str | None]:
    """The kind of each output column of ``node`` (planned, its inputs' kinds set): the one
    noted for its name, else its source column's where the column is passed on or renamed."""
    ins = [_kinds_out(i, kinds) for i in node.inputs]
    out: dict[str, str | None] = {}
    if isinstance(node, MapFilter) and node.select is not None:
        out = {name: ins[0].get(src) for src, name in node.select}
    elif isinstance(node, SqlMapFilter) and not isinstance(node, FlatMap) and node.select is not None:
        names = [c.name for c in node.input.schema]
        out = {name: ins[0].get(names[i]) for text, name in node.select
               for i in range(len(names)) if text == placeholder(i)}
    elif isinstance(node, Union) and ins:
        first = [c.name for c in node.inputs[0].schema]
        out = {c.name: ins[0].get(first[i]) for i, c in enumerate(node.schema) if i < len(first)}
    elif not isinstance(node, (Fallback, Constant, GroupSql)) or isinstance(node, SqlMapFilter):
        for k in ins:
            out.update(k)
    return {c.name: kinds.get(c.name) or out.get(c.name) for c in node.schema}


def _plain_below(node: Node, told: Mapping[str, str | None], columns) -> Node:
    """``node``, or a :class:`JsonbCheck` over it of its jsonb ``columns``."""
    names = [c.name for c in node.schema]
    plain = tuple(names.index(c) for c in columns if c in names and told.get(c) == "jsonb")
    if not plain:
        return node
    shown = tuple(f"jsonb text of {names[i]} only its value's" for i in plain)
    return JsonbCheck(node.schema, node, plain, shown)


def _as_is(s: str) -> str:
    return s


def _user_text(text: str, spelled: str):
    """The function writing a slice of ``spelled`` (``text`` with jsonb's operators spelled:
    :func:`colmz.sql.jsonb.spell_operators`), or a message quoting one, as the user wrote
    it: each operator spelled (``" <<@@ "``, the spelling padded with one space each side)
    back to the user's (``#>``). The identity when nothing was spelled, or when ``text``
    itself holds a spelling (a string literal's: not told from one written by the planner).

    >>> from colmz.sql.jsonb import spell_operators
    >>> from colmz.sql.tokens import tokenize
    >>> q = "SELECT j #> '{a}', j?'b' FROM t"
    >>> _user_text(q, spell_operators(q, tokenize(q)))("'j  <<@@  '{a}'': x; j @@<< 'b'")
    "'j #> '{a}'': x; j?'b'"
    """
    if spelled == text or any(s in text for s in SPELLED.values()):
        return _as_is
    back = [(f" {s} ", op) for op, s in SPELLED.items()]

    def user(s: str) -> str:
        for padded, op in back:  # no padded spelling holds another
            s = s.replace(padded, op)
        return s

    return user


#: The fields of plan nodes that show the user's text (never run: a Fallback's ``query``,
#: a segment's ``where`` and ``select`` stay the planner's text).
_SHOWN_FIELDS = ("text", "reason", "shown", "items", "having")


def _shown_as_written(node: Node, user, done: dict) -> Node:
    """``node`` with the texts it shows (:data:`_SHOWN_FIELDS`) written by ``user``."""
    if id(node) in done:
        return done[id(node)]
    out = with_inputs(node, tuple(_shown_as_written(i, user, done) for i in node.inputs))

    def written(v):
        if isinstance(v, str):
            return user(v)
        if isinstance(v, tuple):
            return tuple(written(x) for x in v)
        return v

    changes = {f.name: written(getattr(out, f.name)) for f in dataclasses.fields(out) if f.name in _SHOWN_FIELDS}
    changes = {k: v for k, v in changes.items() if v != getattr(out, k)}
    out = dataclasses.replace(out, **changes) if changes else out
    done[id(node)] = out
    return out
