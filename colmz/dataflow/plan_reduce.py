"""``GROUP BY``, aggregates and grouping sets for ``colmz.dataflow.plan``:
:class:`ReduceLowering`.

Design
------
A mixin of the planner (``colmz.dataflow.plan``'s ``_Planner``): a native ``Reduce`` whose
aggregates are classified as ``src/compute-types/src/plan/reduce.rs`` does (accumulable,
hierarchical), else a ``BasicReduce`` (DuckDB per affected group); ``GROUP BY``
expressions computed by a SQL segment before the reduce; grouping sets as a Union of one
reduce per set; a grouped query read as a select over its groups (windows over a ``GROUP
BY``, a subquery in ``HAVING``: :meth:`ReduceLowering.over_groups`).
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from colmz.dataflow.plan_binding import (
    POSTGRES_TYPES,
    PlanError,
    Scope,
    Unsupported,
    conjuncts,
    has_grouping_sets,
    is_aggregate,
    native_typed,
    postgres_typed,
    unique_names,
)
from colmz.dataflow.plan_nodes import (
    Aggregate,
    BasicReduce,
    Fallback,
    Node,
    Reduce,
    Schema,
    Union,
    fused,
)
from colmz.dataflow.recompute import INPUT_RELATION, output_schema
from colmz.dataflow.render import (
    ACCUMULABLE,
    HIERARCHICAL,
    reduce_operator,
)
from colmz.dataflow.sqlmap import placeholder
from colmz.sql.build import identifier
from colmz.sql.errors import SQLError
from colmz.sql.hints import select_offset
from colmz.sql.jsonbcols import column_ref_kinds
from colmz.sql.tokens import tokenize
from colmz.sql.tree import Expression, Query, parse_tree

__all__ = ["ReduceLowering", "is_float_column"]


def is_float_column(schema: Schema, column: str) -> bool:
    """Whether ``column`` of ``schema`` holds floats (whose running sums drift).

    >>> import pyarrow as pa
    >>> from colmz.order import ColumnSpec
    >>> is_float_column((ColumnSpec("x", pa.float64()), ColumnSpec("i", pa.int64())), "x")
    True
    """
    return any(c.name == column and pa.types.is_floating(c.type) for c in schema)


class ReduceLowering:
    """The planner's ``GROUP BY``: native, basic and grouping-set reduces."""

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
        as PostgreSQL's, per affected group). ``Unsupported`` for what this rewrite does
        not cover: grouping sets, a named window, ``LIMIT`` / ``OFFSET`` / ``DISTINCT ON``,
        a subquery in a select item, a ``WITH`` query in scope, a ``GROUP BY`` expression,
        a subquery correlated with the grouped query."""
        if any(self.ctes) or has_grouping_sets(q) or not q.group_by:
            raise Unsupported(f"{why}: with a WITH query in scope, grouping sets or no GROUP BY")
        for m in q.modifiers:
            if m.type == "LIMIT_MODIFIER" or (m.type == "DISTINCT_MODIFIER" and m.expressions) \
                    or m.type not in ("LIMIT_MODIFIER", "DISTINCT_MODIFIER", "ORDER_MODIFIER"):
                raise Unsupported(f"{why}: with {m.type.replace('_MODIFIER', '')}")
        for o in (o for m in q.modifiers if m.type == "ORDER_MODIFIER" for o in m.orders):
            if any(x.cls == "SUBQUERY" for x in o.expression.walk()):
                raise Unsupported(f"{why}: ORDER BY a subquery")
        groups: dict[str, tuple[str, ...]] = {}
        for g in q.group_by:
            if g.cls != "COLUMN_REF" or g.start < 0 or g.name[-1] in groups:
                raise Unsupported(f"{why}: GROUP BY {self.span(g)!r} (not a column, or a name twice)")
            groups[g.name[-1]] = g.name
        # the FROM clause's text: from its keyword to the WHERE or GROUP BY of this SELECT
        at = self.select_at(q)
        toks = tokenize(self.text)
        level = [t for i, t in enumerate(toks) if t.kind == "word" and t.upper in ("FROM", "WHERE", "GROUP")
                 and t.start > at and select_offset(toks, i) == at]
        if at < 0 or len(level) < 2 or level[0].upper != "FROM" or level[1].upper == "FROM" \
                or any(e.start < 0 for e in q.items) or (q.having is not None and q.having.start < 0):
            raise Unsupported(f"{why}: a span unknown")
        from_text = self.text[level[0].start:level[1].start]

        def group_of(ref: Expression) -> str:
            name = groups.get(ref.name[-1])
            if name is None or (len(name) > 1 and len(ref.name) > 1 and name != ref.name):
                raise Unsupported(f"{why}: {self.span(ref)!r} read outside an aggregate and not a GROUP BY column")
            return ref.name[-1]

        aggregates: dict[str, str] = {}  # aggregate call text -> its column
        computed: set[str] = set()  # the aggregates' columns read by an expression (not as a key)

        def rewritten(e: Expression, item: bool) -> str:
            if any(self.ref_kinds.get((x.start, x.end)) in ("jsonb", "json") for x in e.walk()
                   if x.cls == "COLUMN_REF") and any(
                    (x.cls == "CONSTANT" and x.literal is not None and x.literal.kind == "STRING")
                    or (x.cls == "FUNCTION" and x.name == ("||",)) for x in e.walk()):
                # over the grouped subquery written below, the query path's jsonb rules would
                # not resolve this reference (colmz.sql.jsonbcols): not planned so
                raise Unsupported(f"{why}: {self.span(e)!r} reads a jsonb column with a string literal or ||")
            edits: list[tuple[int, int, str]] = []
            skip: list[tuple[int, int]] = []
            keys = {id(e)} if item else set()  # an output column, a window's PARTITION BY / ORDER BY
            for x in e.walk():
                if any(a <= x.start and x.end <= b for a, b in skip):
                    continue
                if x.cls == "SUBQUERY":
                    if item:
                        raise Unsupported(f"{why}: a subquery in {self.span(e)!r}")
                    skip.append((x.start, x.end))  # its own text, planned as a WHERE's subquery
                    continue
                if x.start < 0:
                    raise Unsupported(f"{why}: a span unknown")
                if x.cls == "WINDOW" and x.over is not None:
                    keys.update(id(y) for y in x.over.partitions)
                    keys.update(id(o.expression) for o in x.over.orders)
                if x.cls == "WINDOW":
                    after = [t for t in tokenize(self.text[x.start:x.end]) if t.kind != "op" or t.text == "("]
                    over = [i for i, t in enumerate(after) if t.kind == "word" and t.upper == "OVER"]
                    if not over or over[-1] + 1 >= len(after) or after[over[-1] + 1].text != "(":
                        raise Unsupported(f"{why}: a named window ({self.span(x)!r})")
                if x.cls == "FUNCTION" and is_aggregate(x):
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
                raise Unsupported(f"{why}: *")
            name = self.item_name(e)
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
        except Unsupported:  # a condition's subquery reading a native aggregate, say: again
            node = None
        if node is None or not native_typed(node, computed):
            node = self.planned_alone(text, why, basic_only=True)
            if not native_typed(node, computed):
                raise Unsupported(f"{why}: a native aggregate not typed as PostgreSQL's is read by an expression")
        return node

    def planned_alone(self, text: str, why: str, basic_only: bool) -> Node:
        """The plan of query ``text`` (written by this planner) by a planner of its own over
        the same schemas, its tables added to this one's; ``Unsupported`` when it falls
        back or does not bind (a subquery correlated with the query rewritten)."""
        try:
            stmts = parse_tree(text)
            sub = type(self)(text, self.schemas, self.subquery_schema)
            if self.relations:  # the column kinds its own references resolve to
                sub.relations, sub.ref_kinds = self.relations, column_ref_kinds(text, self.relations)
            sub.counter = self.counter
            sub.basic_only = basic_only
            sub.spans[id(stmts[0])] = (0, len(text))
            node = sub.query(stmts[0])
        except (PlanError, SQLError) as e:
            raise Unsupported(f"{why}: {e}") from None
        self.counter = sub.counter
        if isinstance(node, Fallback):
            raise Unsupported(f"{why}: {node.reason}")
        for col, kind in sub.column_kinds.items():
            if self.column_kinds.setdefault(col, kind) != kind:
                raise Unsupported(f"{why}: its plan column {col!r} is read as {self.column_kinds[col]} and as {kind}")
        self.used.update(sub.used)
        return node

    def reduce(self, q: Query, node: Node, scope: Scope):
        """The native reduce of an aggregated query: its node (with ``HAVING``), the select
        list as ``(source, name)``, the SQL text of select items that are expressions over
        group columns and aggregates (by position; their ``source`` is ``""``), and those
        items' text. ``Unsupported`` when an aggregate or ``HAVING`` is not native."""
        group = self.group_columns(q, scope)
        aggs: list[Aggregate] = []

        def aggregate(e: Expression) -> str:
            fn = e.name[-1] if e.name else ""
            if len(e.name) != 1:
                raise Unsupported(f"aggregate {self.span(e)!r} with a schema")
            if e.distinct:
                raise Unsupported(f"aggregate {self.span(e)!r}: DISTINCT aggregates (basic)")
            if e.filter is not None:
                raise Unsupported(f"aggregate {self.span(e)!r}: FILTER (WHERE ...)")
            if e.order_by:
                raise Unsupported(f"aggregate {self.span(e)!r}: ORDER BY inside an aggregate")
            if fn in ACCUMULABLE:
                reduction = "accumulable"
            elif fn in HIERARCHICAL:
                reduction = "hierarchical"
            else:
                raise Unsupported(f"aggregate {self.span(e)!r}: {fn} (basic, recomputed per group: absent)")
            if fn == "count_star":
                column, fn = None, "count"
            elif len(e.children) == 1 and e.children[0].cls == "COLUMN_REF":
                column = scope.column(e.children[0])
            elif fn == "count" and not e.children:
                column = None
            else:
                raise Unsupported(f"aggregate {self.span(e)!r}: an argument other than one column")
            if fn == "avg" and column is not None and any(
                    c.name == column and pa.types.is_interval(c.type) for c in node.schema):
                # PostgreSQL's avg of intervals is interval_div of their sum (its rounding): the
                # group's SQL computes it (colmz.sql.intervalcols)
                raise Unsupported(f"aggregate {self.span(e)!r}: avg of an interval (summed per affected group)")
            if fn in ("sum", "avg") and column is not None and is_float_column(node.schema, column):
                # a running float sum keeps no low bits of what a large term swamped, and
                # retracting that term leaves them lost (1e15 + -3.3 - 1e15 = -3.25): the
                # group's held rows are summed again instead, as a recompute sums them
                raise Unsupported(f"aggregate {self.span(e)!r}: a float sum under retractions drifts "
                                  "from the recompute (summed per affected group)")
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
                raise Unsupported(f"{self.span(e)!r}: a column of a GROUP BY expression outside it")
            if c not in group:
                raise PlanError(f"column {'.'.join(e.name)!r} must appear in the GROUP BY clause "
                                "or be used in an aggregate function")
            return c

        select: list[tuple[str, str]] = []
        mapped: dict[int, Expression] = {}
        for e in q.items:
            if self.group_key(e) is not None:
                select.append((self.group_key(e), self.item_name(e)))
            elif e.cls == "COLUMN_REF":
                select.append((group_column(e), e.alias or e.name[-1]))
            elif is_aggregate(e):
                select.append((aggregate(e), self.item_name(e)))
            elif e.cls == "STAR":
                raise Unsupported(f"{self.span(e)!r} over a GROUP BY")
            else:
                # an expression over the groups: SQL over the reduce's output (its aggregates
                # added to the reduce first: the map reads their columns)
                for sub in e.walk():
                    if is_aggregate(sub):
                        aggregate(sub)
                mapped[len(select)] = e
                select.append(("", self.item_name(e)))
        having = conjuncts(q.having)

        def having_column(e: Expression) -> str:
            if self.group_key(e) is not None:
                return self.group_key(e)
            if e.cls == "FUNCTION":
                return aggregate(e)
            if e.cls == "COLUMN_REF":
                return group_column(e)
            raise Unsupported(f"HAVING {self.span(e)!r}: not an aggregate or a group column")

        # HAVING may read aggregates the select list does not: add them before the reduce
        # is built (the predicates need its output types).
        for h in having:
            for sub in h.walk():
                if is_aggregate(sub):
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
            if not postgres_typed(a, in_types):
                raise Unsupported(f"{self.span(e)!r} inside an expression: the native {a.function} is not "
                                   "typed as PostgreSQL's")
            return name

        names = [c.name for c in out_schema]
        texts = {i: self.sql_text(e, names, group_column, typed_aggregate) for i, e in mapped.items()}
        return red, select, texts, [self.span(e) for e in mapped.values()]

    def grouping_union(self, q: Query, node: Node, scope: Scope) -> Node:
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
                    raise Unsupported(f"GROUP BY {self.span(g)!r}: an expression needing SQL")
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
                    t = POSTGRES_TYPES.get(types[c])
                    if t is None:
                        raise Unsupported(f"grouping set without {self.span(e)!r}: a NULL of type {types[c]}")
                    fixed[i] = f"CAST(NULL AS {t})"
                else:
                    if any(sub.cls == "OPERATOR" and sub.type == "GROUPING_FUNCTION" for sub in e.walk()):
                        raise Unsupported(f"{self.span(e)!r}: GROUPING() inside an expression")
                    kept.append(i)
            if q.having is not None and any(sub.cls == "OPERATOR" and sub.type == "GROUPING_FUNCTION"
                                            for sub in q.having.walk()):
                raise Unsupported("GROUPING() in HAVING")
            items = tuple(q.items[i] for i in kept)
            if not gset and not any(is_aggregate(x) for e in items for x in e.walk()):
                # the empty set without aggregates is still one row (a global reduce needs
                # an aggregate to hold it: a count, projected away)
                items += (Expression("FUNCTION", "FUNCTION", -1, -1, name=("count_star",)),)
            sub = dataclasses.replace(q, items=items, group_by=tuple(keys[i] for i in gset), grouping_sets=())
            try:
                try:
                    if self.basic_only:
                        raise Unsupported("aggregates read as PostgreSQL types them")
                    red, select, agg_sql, shown = self.reduce(sub, node, scope)
                except Unsupported as native:
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
                raise Unsupported(f"grouping set ({', '.join(self.span(keys[i]) for i in gset)}): {e}") from None
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
            out = unique_names([("", self.item_name(e))
                           for e in q.items])
            items = [(t, n) for (t, _), (_, n) in zip(items, out)]
            branches.append(self.sql_segment(red, (), items, texts))
        schema = branches[0].schema
        for b in branches[1:]:
            if [c.type for c in b.schema] != [c.type for c in schema]:
                raise Unsupported(f"grouping sets typed differently: {b.schema} and {schema}")
        return branches[0] if len(branches) == 1 else Union(schema, tuple(branches))

    def reduce_schema(self, schema: Schema, group: list[str], aggs: list[Aggregate]) -> Schema:
        """The reduce's output columns, by the operator's own type rules."""
        try:
            return reduce_operator(schema, tuple(group), tuple(aggs)).schema
        except (TypeError, ValueError) as e:
            raise Unsupported(f"aggregates over these column types: {e}") from None

    def group_item(self, q: Query, g: Expression, scope: Scope) -> Expression:
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

    def group_expressions(self, q: Query, node: Node, scope: Scope) -> Node:
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
            if any(sub.cls in ("SUBQUERY", "WINDOW") or is_aggregate(sub) for sub in g.walk()):
                raise Unsupported(f"GROUP BY {self.span(g)!r}: an expression needing SQL")
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

    def group_columns(self, q: Query, scope: Scope) -> list[str]:
        group: list[str] = []
        for g in q.group_by:
            g = self.group_item(q, g, scope)
            c = self.group_key(g)
            if c is None:
                if g.cls != "COLUMN_REF":
                    raise Unsupported(f"GROUP BY {self.span(g)!r}: an expression needing SQL")
                c = scope.column(g)
            if c not in group:
                group.append(c)
        return group

    def basic_reduce(self, q: Query, node: Node, scope: Scope, why: str) -> tuple[Node, list[tuple[str, str]]]:
        """A reduce the native operators cannot hold (``why``): every aggregate, select item
        and ``HAVING`` recomputed by DuckDB per affected group (Materialize's basic plan)."""
        group = self.group_columns(q, scope)
        select, items, texts = [], [], []
        for e in q.items:
            if e.cls == "STAR":
                raise Unsupported(f"{self.span(e)!r} over a GROUP BY")
            if self.group_key(e) is not None:
                select.append((self.group_key(e), self.item_name(e)))
                continue
            if e.cls == "COLUMN_REF" and scope.column(e) in group:
                select.append((scope.column(e), e.alias or e.name[-1]))
                continue
            name = self.fresh("agg")
            items.append((name, self.span(e)))
            texts.append(f"{self.recompute_text(e, scope.column)} AS {identifier(name)}")
            select.append((name, self.item_name(e)))
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
