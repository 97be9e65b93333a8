"""Set operations, ``WITH`` and ``FROM`` subqueries for ``colmz.dataflow.plan``:
:class:`SetOpLowering`.

Design
------
A mixin of the planner (``colmz.dataflow.plan``'s ``_Planner``): ``UNION`` / ``EXCEPT`` /
``INTERSECT`` [``ALL``] as Union, Negate, Threshold and Distinct (a branch that falls back
recomputed alone when its text is known), a ``WITH`` query planned at each reference (its
column names from the text), a ``FROM`` subquery as a scope of its output columns (a
Fallback leaf of its own when it falls back and can be typed).

``WITH RECURSIVE name AS (base UNION [ALL] step)`` is a :class:`LetRec`
(:meth:`SetOpLowering.recursive`): ``base`` planned where the CTE is defined, ``step`` with
``name`` bound to a :class:`WorkingTable` whose references are :class:`Variable` leaves.
``UNION`` or ``UNION ALL`` is the tree's (``Query.setop_all`` of the CTE's node). For
``UNION`` the base is distinct and the step ``Threshold(Distinct(step) − Variable("all"))``:
PostgreSQL's iteration, each working table distinct and without the rows produced so far.
The recursive term is admitted only when :func:`strict`: it gives no row over an empty
working table (every row derives from one of its rows), the invariant by which
``colmz.dataflow.iterate`` stops at the first empty iteration; it must read the CTE once
(PostgreSQL refuses more) and give the base's column types. A recursive CTE whose step does
not read it is an ordinary ``UNION``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pyarrow as pa

from colmz.dataflow.iterate import RECURSION_LIMIT
from colmz.dataflow.plan_binding import (
    PlanError,
    Source,
    Unsupported,
    leaves,
    setop_parts,
    unify,
    unparenthesized,
)
from colmz.dataflow.plan_nodes import (
    BasicReduce,
    Distinct,
    Fallback,
    FlatMap,
    GroupSql,
    Join,
    JsonbCheck,
    LetRec,
    MapFilter,
    Negate,
    Node,
    Reduce,
    Schema,
    SqlMapFilter,
    Threshold,
    TopK,
    Union,
    Variable,
    fused,
)
from colmz.dataflow.sqlmap import placeholder
from colmz.dataflow.step import as_schema
from colmz.order import ColumnSpec
from colmz.sql.assign import pg_type_name
from colmz.sql.errors import SQLError
from colmz.sql.setop_types import UNKNOWN, common_type
from colmz.sql.tokens import cte_columns_of
from colmz.sql.tree import Query, Table, parse_tree
from colmz.updates import SchemaError

__all__ = ["SetOpLowering", "WorkingTable", "bare_string", "strict", "variables"]


class WorkingTable:
    """The working table of the recursive CTE ``name`` while its recursive term is planned:
    each reference is a :class:`Variable` (counted in ``references``)."""

    def __init__(self, name: str, schema: Schema):
        self.name = name
        self.schema = schema
        self.references = 0

    def source(self, alias: str, column_aliases, what: str):
        """The reference ``FROM name AS alias (column_aliases)``: a scope of its columns."""
        self.references += 1
        names = [c.name for c in self.schema]
        if len(column_aliases) > len(names):
            raise PlanError(f"{what} has {len(names)} columns available but {len(column_aliases)} columns specified")
        names = list(column_aliases) + names[len(column_aliases):]
        cols = tuple((c.name, f"{alias}.{n}") for c, n in zip(self.schema, names))
        node = fused(tuple(ColumnSpec(p, c.type) for (_, p), c in zip(cols, self.schema)),
                     Variable(self.schema, self.name, "work"), (), cols)
        return node, [Source(alias, {n: (p, c.type) for n, (_, p), c in zip(names, cols, self.schema)})], []


def variables(node: Node) -> list[Variable]:
    """The :class:`Variable` nodes under ``node``."""
    out, stack, seen = [], [node], set()
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen.add(id(n))
            out.extend([n] if isinstance(n, Variable) else [])
            stack.extend(n.inputs)
    return out


def strict(node: Node) -> bool:
    """Whether ``node`` gives no row when the working table (``Variable`` ``"work"``) is
    empty, whatever the tables hold -- as far as its shape proves: every row it gives
    derives from a row of the working table (a reduce with groups, not a global one; an
    inner join with it on any side, an outer join with it on the preserved side; what a
    ``Threshold`` keeps of a difference, by its positive part)."""
    if isinstance(node, Variable):
        return node.role == "work"
    if isinstance(node, (MapFilter, SqlMapFilter, FlatMap, JsonbCheck, Distinct, Negate, TopK)):
        return strict(node.inputs[0])
    if isinstance(node, Threshold):
        return _strict_positive(node.input)
    if isinstance(node, Union):
        return all(strict(i) for i in node.inputs)
    if isinstance(node, Join):
        ins = node.inputs
        if node.kind == "inner":
            return any(strict(i) for i in ins)
        if node.kind == "left":
            return strict(ins[0])
        if node.kind == "right":
            return strict(ins[1])
        return all(strict(i) for i in ins)
    if isinstance(node, (Reduce, BasicReduce)):
        return bool(node.group_by if isinstance(node, Reduce) else node.key) and strict(node.input)
    if isinstance(node, GroupSql):  # a window, a top-k by SQL: rows of its input
        return strict(node.input)
    return False


def bare_string(q: Query, k: int) -> bool:
    """Whether select item ``k`` of branch ``q`` is a string literal PostgreSQL has not typed
    yet (``unknown``): a plain ``SELECT`` (no set operation, DISTINCT, grouping or sort,
    which make it text) whose item is the literal itself."""
    if q.children or q.modifiers or q.group_by or q.having is not None or k >= len(q.items):
        return False
    e = q.items[k]
    return e.cls == "CONSTANT" and e.literal is not None and e.literal.kind == "STRING"


def _strict_positive(node: Node) -> bool:
    # the positive part of a difference: the branches a Negate does not take away
    if isinstance(node, Union):
        return all(_strict_positive(i) for i in node.inputs)
    if isinstance(node, Negate):
        return True
    return strict(node)


class SetOpLowering:
    """The planner's set operations, ``WITH`` queries and ``FROM`` subqueries."""

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
        aligned = self.coerce_literals(q, aligned)
        schema = aligned[0].schema
        try:
            for b in aligned[1:]:
                schema = unify(schema, b.schema)
        except SchemaError as e:
            raise Unsupported(f"{q.setop} of columns of different types ({e})") from None
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
        raise Unsupported(f"{q.setop}{' ALL' if q.setop_all else ''}")

    def coerce_literals(self, q: Query, branches: list[Node]) -> list[Node]:
        """``branches`` of set operation ``q`` with each column a bare string literal gives
        cast to the column's type, as PostgreSQL types it (``colmz.sql.setop_types``: an
        ``unknown`` literal takes the common type of the other inputs, folded left as its
        left-deep tree of branches; two literals make text). A column whose common type is
        text or not known is left as it is; two types PostgreSQL cannot match are
        ``Unsupported`` (the recompute path raises PostgreSQL's error)."""
        casts: dict[int, dict[int, str]] = {}
        for k in range(len(branches[0].schema)):
            types = [UNKNOWN if bare_string(child, k) else self.pg_type(child, b.schema[k], k)
                     for child, b in zip(q.children, branches)]
            if UNKNOWN not in types or all(t == UNKNOWN for t in types):
                continue
            target = types[0]
            try:
                for t in types[1:]:
                    target = common_type(target, t, q.setop)
            except SQLError as e:
                raise Unsupported(f"{q.setop} column {k + 1}: {e}") from None
            for i, t in enumerate(types):
                if t == UNKNOWN and target not in (None, "text"):
                    casts.setdefault(i, {})[k] = target
        out = list(branches)
        for i, cols in casts.items():
            names = [c.name for c in out[i].schema]
            texts = {k: f"CAST({placeholder(k)} AS {t})" for k, t in cols.items()}
            out[i] = self.items_segment(out[i], [(n, n) for n in names], texts,
                                        [f"CAST({self.span(q.children[i].items[k])} AS {t})" for k, t in cols.items()])
        return out

    def pg_type(self, q: Query, c: ColumnSpec, k: int) -> str:
        """PostgreSQL's name of the type of column ``c``, the ``k``-th of branch ``q`` (a
        string column: ``jsonb`` or ``json`` when the query path reads its item so or its
        kind is noted, else text)."""
        e = q.items[k] if not q.children and k < len(q.items) else None
        kind = (self.ref_kinds.get((e.start, e.end)) if e is not None and e.cls == "COLUMN_REF" else None
                ) or self.column_kinds.get(c.name)
        if kind in ("jsonb", "json") and (pa.types.is_string(c.type) or pa.types.is_large_string(c.type)):
            return kind
        return pg_type_name(c.type)

    def branch(self, q: Query, i: int, f: Fallback) -> Fallback:
        """Branch ``i`` of set operation ``q``, which falls back, as a Fallback leaf
        recomputing its own text (typed by ``subquery_schema``), its change fed to the set
        operator; ``Unsupported`` (the enclosing query falls back) when its text is not
        known alone -- a ``CTE`` in scope, no typing -- or the typing refuses it."""
        why = f"{q.setop} branch: {f.reason}"
        if self.subquery_schema is None or any(self.ctes):
            raise Unsupported(why)
        span = self.branch_span(q.children[i])
        text = self.text[span[0]:span[1]] if span is not None else ""
        schema = self.subquery_schema(text) if text else None
        if schema is None:
            raise Unsupported(why)
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
        parts = setop_parts(self.text, span)
        if parts is None:
            return None
        at, found = 0, {}
        for child in parent.children:
            want, got, first = leaves(child), 0, at
            while got < want and at < len(parts):
                try:
                    got += leaves(parse_tree(self.text[parts[at][0]:parts[at][1]])[0])
                except SQLError:
                    return None
                at += 1
            if got != want:
                return None
            found[id(child)] = unparenthesized(self.text, parts[first][0], parts[at - 1][1])
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
                self.recursive_names[id(cq)] = name
            frame[name] = (cq, dict(frame), self.cte_columns(name))
        self.ctes.append(frame)
        try:
            return self.query_checked(dataclasses.replace(q, ctes=()))
        finally:
            self.ctes.pop()

    def recursive(self, q: Query) -> Node:
        """A ``WITH RECURSIVE`` CTE's query (``base UNION [ALL] step``) as a :class:`LetRec`:
        ``base`` planned where the CTE is defined, ``step`` with the CTE's name bound to the
        working table (a :class:`Variable`); ``UNION``: ``base`` distinct and the step's rows
        distinct, minus the rows produced so far (PostgreSQL's evaluation). ``Unsupported``
        when a term falls back, the step's columns are not typed as the base's, the step reads
        the CTE more than once (PostgreSQL refuses it) or could give rows over an empty working
        table (its iterations would not end where the planner's invariant needs:
        ``colmz.dataflow.iterate``). A step not reading the CTE is an ordinary ``UNION``."""
        name = self.recursive_names.get(id(q), "")
        what = f"WITH RECURSIVE {name}"
        if not name or len(q.children) != 2 or q.modifiers:
            raise Unsupported(f"{what}: a recursive query of other than the form base UNION [ALL] step")
        union_all = q.setop_all
        base = self.query(q.children[0])
        if isinstance(base, Fallback):
            raise Unsupported(f"{what}: its non-recursive term: {base.reason}")
        names = list(self.cte_columns(name))
        written = self.output_names(q.children[0]) if len(names) < len(base.schema) else []
        if written is None:
            raise Unsupported(f"{what}: its column names are not read from its non-recursive term")
        names += written[len(names):]
        if len(names) != len(base.schema) or len(set(names)) != len(names):
            raise Unsupported(f"{what}: its column names {names} are not one per column of its non-recursive term")
        schema = tuple(ColumnSpec(n, c.type) for n, c in zip(names, base.schema))
        base = fused(schema, base, (), tuple((c.name, n) for c, n in zip(base.schema, names)))
        working = WorkingTable(name, schema)
        self.ctes.append({name: working})
        try:
            step = self.query(q.children[1])
        finally:
            self.ctes.pop()
        if isinstance(step, Fallback):
            raise Unsupported(f"{what}: its recursive term: {step.reason}")
        if len(step.schema) != len(schema):
            raise PlanError(f"each UNION query must have the same number of columns: {len(schema)} and "
                            f"{len(step.schema)}")
        differ = [(a.name, str(a.type), str(b.type)) for a, b in zip(schema, step.schema) if a.type != b.type]
        if differ:
            raise Unsupported(f"{what}: column {differ[0][0]} is {differ[0][1]} in the non-recursive term, "
                              f"{differ[0][2]} in the recursive term")
        step = fused(schema, step, (), tuple((c.name, n) for c, n in zip(step.schema, names)))
        if not working.references:  # not recursive: an ordinary UNION
            node: Node = Union(schema, (base, step))
            return node if union_all else Distinct(schema, node)
        if working.references > 1:
            raise Unsupported(f"{what}: its recursive term reads {name} more than once (PostgreSQL refuses it)")
        if not strict(step):
            raise Unsupported(f"{what}: its recursive term may give rows when the working table is empty")
        if any(v.name != name for v in variables(step)):
            raise Unsupported(f"{what}: its recursive term reads an enclosing recursive query")
        if not union_all:
            base = Distinct(schema, base)
            step = Threshold(schema, Union(schema, (Distinct(schema, step),
                                                    Negate(schema, Variable(schema, name, "all")))))
        return LetRec(schema, base, step, name, not union_all, RECURSION_LIMIT)

    def cte(self, name: str):
        """The query of CTE ``name`` in scope, planned in the scope it was defined in."""
        for depth in range(len(self.ctes) - 1, -1, -1):
            if name in self.ctes[depth]:
                return self.ctes[:depth], self.ctes[depth][name]
        return None

    def cte_columns(self, name: str) -> tuple[str, ...]:
        """The column names ``WITH name (a, b) AS (...)`` gives CTE ``name`` (``()``: none),
        read from the text (the parse tree keeps no CTE's column names, :func:`cte_columns_of`);
        ``Unsupported`` when the text's definitions of ``name`` are not read or disagree."""
        found = cte_columns_of(self.text).get(name)
        if found is None or len(found) != 1:
            raise Unsupported(f"WITH {name!r}: its column names are not read from the text")
        (cols,) = found
        return cols

    def cte_source(self, found, alias: str, column_aliases, what: str):
        if isinstance(found[1], WorkingTable):
            return found[1].source(alias, column_aliases, what)
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
            self.spans[id(query)] = unparenthesized(self.text, t.start, t.end)
        inner = self.query(query)
        if isinstance(inner, Fallback):
            if t is None:
                raise Unsupported(f"{what}: {inner.reason}")
            inner = self.subtree(inner, t, what)
        names = [c.name for c in inner.schema]
        if len(column_aliases) > len(names):
            raise PlanError(f"{what} has {len(names)} columns available but {len(column_aliases)} columns specified")
        names = list(column_aliases) + names[len(column_aliases):]
        cols = tuple((c.name, f"{alias}.{n}") for c, n in zip(inner.schema, names))
        node = fused(tuple(ColumnSpec(p, c.type) for (_, p), c in zip(cols, inner.schema)), inner, (), cols)
        # PostgreSQL's names of the columns (the plan renamed repeated ones apart): a name
        # several columns share is ambiguous, the renamed copies are no names of its
        written = self.output_names(query)
        ambiguous, renamed = set(), set()
        if written is not None and len(written) == len(names):
            written = list(column_aliases) + written[len(column_aliases):]
            counts = Counter(written)
            ambiguous = {w for w, k in counts.items() if k > 1}
            renamed = {n for n, w in zip(names, written) if w in ambiguous and n != w}
            names = [n if w in ambiguous else w for n, w in zip(names, written)]
        source = Source(alias, {n: (p, c.type) for n, (_, p), c in zip(names, cols, inner.schema)},
                        ambiguous=ambiguous, renamed=renamed)
        return node, [source], []

    def output_names(self, query: Query) -> list[str] | None:
        """The names PostgreSQL gives the columns of a ``SELECT`` without ``*`` (``None``
        for other queries: not told)."""
        if query.type != "SELECT_NODE" or any(e.cls == "STAR" for e in query.items):
            return None
        return [self.item_name(e) for e in query.items]

    def subtree(self, f: Fallback, t: Table, what: str) -> Fallback:
        """A ``FROM`` subquery that falls back, as a Fallback leaf recomputing its own query
        (typed by ``subquery_schema``); ``Unsupported`` (the enclosing query falls back) when
        the planner has no way to type it or the typing refuses."""
        text = self.text[t.start:t.end].strip() if t.start >= 0 else ""
        if text.startswith("(") and text.endswith(")"):
            text = text[1:-1].strip()
        schema = self.subquery_schema(text) if (self.subquery_schema is not None and text) else None
        if schema is None:
            raise Unsupported(f"{what}: {f.reason}")
        return Fallback(as_schema(schema, what), f.text, f.reason, text)
