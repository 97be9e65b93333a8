"""Name resolution and the helpers every lowering of ``colmz.dataflow.plan`` shares.

Design
------
:class:`Scope` binds a column reference against the ``FROM`` scopes of a query (each a
:class:`Source`: an alias and its columns under the plan's names), as Materialize's name
resolution does: qualified and unqualified names, ambiguity an error (:class:`PlanError`),
``*`` and ``t.*``. :class:`Unsupported` is raised inside the planner for a construct outside
the incremental subset (the planner turns it into a ``Fallback`` naming it); :class:`Refused`
for one no path answers as PostgreSQL does. The rest are
pure functions of the parse tree (``colmz.sql.tree``) or the text: conjuncts, correlation
equalities, constants typed as a column, set-operation and ``WITH`` text, the types
PostgreSQL gives native aggregates. Nothing here holds state.
"""

from __future__ import annotations

import decimal
import functools
import math
from dataclasses import dataclass, field

import pyarrow as pa

from colmz.dataflow.plan_nodes import (
    Aggregate,
    Comparison,
    IsNullPredicate,
    Node,
    Predicate,
    Reduce,
    Schema,
)
from colmz.dataflow.render import (
    ACCUMULABLE,
    HIERARCHICAL,
)
from colmz.sql.errors import UnsupportedSQL
from colmz.sql.tokens import tokenize
from colmz.sql.tree import Expression, Query

__all__ = ['COMPARE_OPS', 'FLIPPED', 'POSTGRES_TYPES', 'PlanError', 'Refused', 'SAFE_ORDER_AGGREGATES', 'SETOPS', 'SETOP_MODIFIERS', 'Scope', 'Source', 'Unsupported', 'aggregate_names', 'array_any', 'conjuncts', 'constant_of', 'correlation', 'has_grouping_sets', 'integer_versus_numeric', 'is_aggregate', 'is_now', 'leaves', 'native_typed', 'postgres_typed', 'reads_outside', 'setop_parts', 'unify', 'unique_names', 'untyped_aggregates', 'unparenthesized']


class PlanError(ValueError):
    """The query does not bind against the schemas (an unknown table or column, an ambiguous
    column, a select list of the wrong width): an error in the query, not a Fallback."""


class Unsupported(Exception):
    """Raised inside the planner: the construct is outside the incremental subset."""


class Refused(UnsupportedSQL):
    """Raised inside the planner: a construct neither the operators nor a recompute answer as
    PostgreSQL does (the view is refused when it is created, not recomputed)."""


# ---------------------------------------------------------------------------- binding

COMPARE_OPS = {"COMPARE_EQUAL": "=", "COMPARE_NOTEQUAL": "<>", "COMPARE_LESSTHAN": "<",
                "COMPARE_GREATERTHAN": ">", "COMPARE_LESSTHANOREQUALTO": "<=",
                "COMPARE_GREATERTHANOREQUALTO": ">="}
#: Aggregates an ``ORDER BY`` subquery dropped with it may compute: none raises.
SAFE_ORDER_AGGREGATES = frozenset({"count", "count_star", "sum", "avg", "min", "max"})
FLIPPED = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


@functools.cache
def aggregate_names() -> frozenset[str]:
    """DuckDB's aggregate function names (``duckdb_functions()``), with ``count_star`` and
    jsonb's ``jsonb_agg`` / ``jsonb_object_agg``: a call of one of these makes a query aggregate."""
    from colmz.sql.run import session

    cur = session(external_access=False)
    try:
        rows = cur.execute("SELECT DISTINCT function_name FROM duckdb_functions() "
                           "WHERE function_type = 'aggregate'").fetchall()
    finally:
        cur.close()
    # jsonb's aggregates are colmz's own (translate rewrites them: colmz/sql/jsonb.py)
    return (frozenset(r[0] for r in rows) | {"count_star", "jsonb_agg", "jsonb_object_agg"} | set(ACCUMULABLE)
            | set(HIERARCHICAL))


def is_aggregate(e: Expression) -> bool:
    return e.cls == "FUNCTION" and len(e.name) >= 1 and e.name[-1] in aggregate_names()


@dataclass
class Source:
    """One ``FROM`` item in scope: its alias and its columns (name -> plan name, type);
    ``hidden`` columns are reachable qualified only (the right side's ``USING`` columns);
    ``ambiguous`` names are several of its columns (a subquery's ``count(*), count(v)``):
    a reference to one raises PostgreSQL's error, and the columns renamed apart for ``*``
    (``renamed``: ``count_2``) are not reachable by name."""

    alias: str
    columns: dict[str, tuple[str, pa.DataType]]
    hidden: set = field(default_factory=set)
    ambiguous: set = field(default_factory=set)
    renamed: set = field(default_factory=set)

    def check_unambiguous(self, name: str) -> None:
        if name in self.ambiguous:
            raise PlanError(f'column reference "{name}" is ambiguous')


class Scope:
    def __init__(self, sources: list[Source]):
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
                    raise Unsupported(f"column reference {'.'.join(parts)!r} matched only ignoring case "
                                       "(quoted and unquoted identifiers are not told apart)") from None
            raise

    def exact(self, parts: tuple[str, ...]) -> str:
        if len(parts) == 1:
            for s in self.sources:
                s.check_unambiguous(parts[0])
            hits = [s.columns[parts[0]][0] for s in self.sources
                    if parts[0] in s.columns and parts[0] not in s.hidden and parts[0] not in s.renamed]
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
                    s.check_unambiguous(parts[1])
                    if parts[1] not in s.columns or parts[1] in s.renamed:
                        raise PlanError(f"column {parts[1]!r} does not exist in {parts[0]!r}")
                    return s.columns[parts[1]][0]
            raise PlanError(f"missing FROM-clause entry for table {parts[0]!r} (in {'.'.join(parts)})")
        raise Unsupported(f"column reference {'.'.join(parts)!r} with a schema or catalog")

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


def conjuncts(e: Expression | None) -> list[Expression]:
    if e is None:
        return []
    if e.cls == "CONJUNCTION" and e.type == "CONJUNCTION_AND":
        return [c for child in e.children for c in conjuncts(child)]
    return [e]


def correlation(where: Expression | None, inner, outer) -> tuple[list, list[Expression]]:
    """Split a correlated subquery's ``WHERE`` into its correlation -- ``(outer column, inner
    column reference)`` for each conjunct equating a column of the ``inner`` scope with one of
    the ``outer`` scope -- and the conjuncts left (``local``)."""
    pairs, local = [], []
    for c in conjuncts(where):
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


def constant_of(value, t: pa.DataType):
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


def integer_versus_numeric(col: str, op: str, c: decimal.Decimal, t: pa.DataType) -> Predicate:
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


def native_typed(node: Node, computed) -> bool:
    """Whether every native aggregate under ``node`` is read as PostgreSQL reads it: typed
    as PostgreSQL's (:func:`postgres_typed`), or an exact integer sum (numeric there) when
    no aggregate is ``computed`` (read by an expression: integer arithmetic is not
    numeric's) -- as an output column (cast at the sink) or a window's key, it compares
    and sorts as the numeric does; ``avg`` and the variances of integers (float64 here)
    never."""
    return all(a.function == "sum" and pa.types.is_integer(types[a.column]) and not computed
               for a, types in untyped_aggregates(node))


def untyped_aggregates(node: Node):
    """Each native aggregate under ``node`` whose output type is not PostgreSQL's
    (:func:`postgres_typed`), with its reduce's input column types."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Reduce):
            types = {c.name: c.type for c in n.input.schema}
            for a in n.aggregates:
                if not postgres_typed(a, types):
                    yield a, types
        stack.extend(i for i in n.inputs if i is not None)


def postgres_typed(a: Aggregate, types: dict[str, pa.DataType]) -> bool:
    """Whether the native operator's output type of aggregate ``a`` is PostgreSQL's: counts
    (bigint), ``min``/``max`` (the column's), the boolean ones, and the numeric ones over
    ``double precision`` (float8 in, float8 out); ``sum``/``avg``/variances of integers are
    ``numeric`` in PostgreSQL, not the operator's type."""
    if a.function in ("count", "min", "max", "bool_and", "bool_or", "every"):
        return True
    return a.column is not None and pa.types.is_float64(types[a.column])


SETOPS = frozenset({"UNION", "EXCEPT", "INTERSECT"})
SETOP_MODIFIERS = frozenset({"ORDER", "LIMIT", "OFFSET", "FETCH"})


def unparenthesized(text: str, start: int, end: int) -> tuple[int, int]:
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


def setop_parts(text: str, span: tuple[int, int]) -> list[tuple[int, int]] | None:
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
        if depth == 0 and word in SETOPS:
            parts.append((at, start + tok.start))
            nxt = toks[j + 1].text.upper() if j + 1 < len(toks) else ""
            at = start + (toks[j + 1].end if nxt in ("ALL", "DISTINCT") else tok.end)
            last = j
        elif depth == 0 and word in SETOP_MODIFIERS and last is not None:
            end = start + tok.start
            break
        elif depth == 0 and word == "WITH" and j == 0:
            return None
    parts.append((at, end))
    parts = [p for p in parts if text[p[0]:p[1]].strip()]
    return parts if len(parts) > 1 else None


#: PostgreSQL's name of an Arrow type, for a typed NULL (a key absent from a grouping set).
POSTGRES_TYPES = {pa.int16(): "smallint", pa.int32(): "integer", pa.int64(): "bigint", pa.string(): "text",
                   pa.bool_(): "boolean", pa.float64(): "double precision", pa.float32(): "real",
                   pa.date32(): "date", pa.timestamp("us"): "timestamp", pa.month_day_nano_interval(): "interval"}


def has_grouping_sets(q: Query) -> bool:
    """Whether ``q`` groups by sets other than all its ``GROUP BY`` items at once, or calls
    ``GROUPING()``."""
    if q.grouping_sets and sorted(set(q.grouping_sets[0])) != list(range(len(q.group_by))):
        return True
    return len(q.grouping_sets) > 1 or any(sub.cls == "OPERATOR" and sub.type == "GROUPING_FUNCTION"
                                           for e in q.items for sub in e.walk())


def reads_outside(q: Query | None) -> bool:
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


def leaves(q: Query) -> int:
    return sum(leaves(c) for c in q.children) if q.type == "SET_OPERATION_NODE" else 1


def array_any(e: Expression) -> bool:
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


def is_now(e: Expression) -> bool:
    return e.cls == "FUNCTION" and e.name == ("mz_now",) and not e.children


def unify(a: Schema, b: Schema) -> Schema:
    from colmz.updates import unify_schemas

    return unify_schemas(a, b)


def unique_names(select: list[tuple[str, str]]) -> list[tuple[str, str]]:
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
