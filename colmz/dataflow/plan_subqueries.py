"""Subqueries in conditions and values, decorrelated, for ``colmz.dataflow.plan``:
:class:`SubqueryLowering`.

Design
------
A mixin of the planner (``colmz.dataflow.plan``'s ``_Planner``), lowering as Materialize's
``src/sql/src/plan/lowering.rs`` does: ``[NOT] EXISTS`` and ``IN`` as semijoins on the
subquery's distinct keys (antijoins as the input minus its semijoin), ``NOT IN`` and
quantified comparisons with PostgreSQL's NULLs through global counts, scalar subqueries as
a cross join with a one-row relation (guarded past one row) or, correlated by equalities,
a left join with the subquery grouped by its keys (its item one aggregate, or arithmetic
over aggregates NULL over no rows, as a key without inner rows is) -- or, without ``FROM``
and reading outer columns (``(SELECT v) > 3``), as the outer expression it is
(:meth:`SubqueryLowering.inlined`: one row, the item over the outer row); correlated
otherwise (non-equality conditions, a nested subquery reading the outer query), on the
distinct outer keys
(:meth:`SubqueryLowering.keyed_subquery`): the subquery joined with the distinct non-NULL
values of the outer columns it reads, computed per key, joined back on them -- exact
because each outer column is an operand of a comparison in the subquery's ``WHERE``, so a
NULL one (no key) has the subquery's answer over no rows. A native aggregate read by SQL must be
typed as PostgreSQL's (:meth:`SubqueryLowering.typed_subquery` re-plans it as DuckDB's).
Uncorrelated, ``EXISTS (subquery)`` as a value is a global count above zero and
``ARRAY(subquery)`` a global basic reduce of the subquery's rows (one row each, over no rows
too: ``false`` and ``{}``); correlated, ``ARRAY(subquery)`` is a basic reduce of the subquery's
rows by its keys (inner columns of its equalities, else the distinct outer keys) into one
array each, left-joined back, ``{}`` for an outer row whose key has none
(:meth:`SubqueryLowering.correlated_array`); forms it does not decorrelate (``LIMIT``,
``DISTINCT``, aggregates inside, ...) are Unsupported naming the form.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from colmz.dataflow.guard import MORE_THAN_ONE_ROW
from colmz.dataflow.plan_binding import (
    COMPARE_OPS,
    FLIPPED,
    PlanError,
    Scope,
    Source,
    Unsupported,
    array_any,
    conjuncts,
    constant_of,
    correlation,
    is_aggregate,
    reads_outside,
    untyped_aggregates,
)
from colmz.dataflow.plan_nodes import (
    PER_OUTER_KEY,
    Aggregate,
    BasicReduce,
    Comparison,
    Constant,
    Distinct,
    ErrorGuard,
    Fallback,
    IsNullPredicate,
    Join,
    Negate,
    Node,
    Reduce,
    Union,
    fused,
    with_inputs,
)
from colmz.dataflow.recompute import INPUT_RELATION, output_schema
from colmz.dataflow.sqlmap import placeholder
from colmz.order import ColumnSpec
from colmz.sql.build import identifier
from colmz.sql.tokens import tokenize
from colmz.sql.tree import Expression, Query, Table

__all__ = ["SubqueryLowering"]


class SubqueryLowering:
    """The planner's subqueries in conditions and values, decorrelated."""

    def split_where(self, where: Expression | None):
        """``WHERE``'s conjuncts as ``(plain, semijoins, temporal)``: ``[NOT] EXISTS`` and
        ``IN`` subqueries become semijoins (``(expr, negated)``), conjuncts calling
        ``mz_now()`` temporal bounds."""
        plain, semi, temporal = [], [], []
        for c in conjuncts(where):
            negated = c.cls == "OPERATOR" and c.type == "OPERATOR_NOT" and len(c.children) == 1
            bare = c.children[0] if negated else c
            if bare.cls == "SUBQUERY" and not array_any(bare) and self.inlined(bare) is None:
                semi.append((bare, negated))
                continue
            subs = list(c.walk())
            now = any(x.cls == "FUNCTION" and x.name and x.name[-1].lower() == "mz_now" for x in subs)
            if any(x.cls == "SUBQUERY" and not array_any(x) for x in subs) and now:
                raise Unsupported(f"a subquery in an expression ({self.span(c)!r})")
            # (a scalar subquery inside a condition is a column joined in: query_checked)
            if now:
                temporal.append(c)
                continue
            plain.append(c)
        return plain, semi, temporal

    def semijoin(self, node: Node, scope: Scope, e: Expression, negated: bool) -> Node:
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
                raise Unsupported(f"{text!r}: a quantified comparison (ANY/ALL/SOME)")
            if (not negated and x.cls == "FUNCTION" and x.name == ("row",) and x.children
                    and all(c.cls == "COLUMN_REF" for c in x.children)):
                return self.row_in(node, scope, e, x, text)
            if x.cls != "COLUMN_REF":
                raise Unsupported(f"{text!r}: IN of an expression needing SQL")
            if not negated and reads_outside(e.subquery):
                try:
                    return self.correlated_in(node, scope, e, x, text)
                except Unsupported:
                    pass
                try:
                    return self.keyed_in(node, scope, e, x, text)
                except Unsupported:
                    pass  # not decorrelated: the uncorrelated path says why
            right = self.one_column_subquery(e, text, "IN subquery")
            pairs = [(scope.column(x), right.schema[0].name)]
            if negated:
                return self.not_in(node, right, pairs[0])
        else:
            if not self.text[e.start:e.end].lstrip().upper().startswith("EXISTS"):
                raise Unsupported(f"a scalar subquery as a condition ({text!r})")
            cross: list[Expression] = []
            try:
                right, pairs = self.correlated(e.subquery, scope, text, cross)
            except Unsupported as err:
                # a nested subquery, or correlated by other conditions alone: decorrelated on
                # the distinct outer keys, else refused for the first reason
                try:
                    right, pairs = self.keyed_exists(node, scope, e.subquery, text)
                except Unsupported:
                    raise err from None
                cross = []
            if cross:
                return self.semi_residual(node, right, pairs, cross, negated, text)
        semi = self.semi(node, right, pairs)
        if not negated:
            return semi
        return Union(node.schema, (node, Negate(node.schema, semi)))

    def uncorrelated(self, query, what: str, correlated: str, fell_back: str) -> Node:
        """The plan of ``query``, a subquery planned on its own: one that reads an outer column
        (a ``PlanError`` here) is Unsupported as ``what: error (correlated)``, one that falls
        back as ``fell_back: its reason``."""
        try:
            rows = self.query(query)
        except PlanError as err:
            raise Unsupported(f"{what}: {err} ({correlated})") from None
        if isinstance(rows, Fallback):
            raise Unsupported(f"{fell_back}: {rows.reason}")
        return rows

    def row_subquery(self, e: Expression, x: Expression, text: str) -> Node:
        """The plan of a row IN's uncorrelated subquery ``e``, as wide as the row ``x``."""
        right = self.uncorrelated(e.subquery, f"IN subquery {text!r}", "correlated ones are absent",
                                  f"IN subquery {text!r}")
        n = len(x.children)
        if len(right.schema) != n:
            raise PlanError(f"subquery has {'too many' if len(right.schema) > n else 'too few'} "
                            f"columns in {text!r}")
        return right

    def row_in(self, node: Node, scope: Scope, e: Expression, x: Expression, text: str) -> Node:
        """``(a, b, ...) IN (subquery)`` in ``WHERE``, columns compared with an uncorrelated
        subquery's columns: a semijoin on all of them (a row with a NULL among them matches
        nothing: the comparison is false or unknown, the row dropped either way)."""
        right = self.row_subquery(e, x, text)
        return self.semi(node, right, [(scope.column(c), r.name) for c, r in zip(x.children, right.schema)])

    def correlated_in(self, node: Node, scope: Scope, e: Expression, x: Expression, text: str) -> Node:
        """``x IN (subquery)`` as a ``WHERE`` conjunct, the subquery correlated by equalities of
        columns (:meth:`decorrelated`): a semijoin on ``x`` and the outer columns against the
        subquery's value and inner keys. A global aggregate's keys without rows have no row
        here, where the subquery has one: right for aggregates that are NULL over no rows (a
        NULL matches nothing), refused for ``count`` (0 there)."""
        sub = e.subquery
        if sub.type != "SELECT_NODE" or sub.ctes or sub.from_ is None or len(sub.items) != 1:
            raise Unsupported(f"IN subquery {text!r}: correlated, not one SELECT ... FROM of one column")
        right, n, pairs, _, counts = self.decorrelated(sub, scope, f"IN subquery {text!r}")
        if counts:
            raise Unsupported(f"IN subquery {text!r}: a correlated count (0 over no rows)")
        cols = [c.name for c in right.schema]
        on = [(scope.column(x), cols[0]), *((o, cols[n + i]) for i, (o, _) in enumerate(pairs))]
        if len({o for o, _ in on}) != len(on):
            raise Unsupported(f"IN subquery {text!r}: one outer column matched twice (a filter)")
        return self.semi(node, right, on)

    def keyed_in(self, node: Node, scope: Scope, e: Expression, x: Expression, text: str) -> Node:
        """``x IN (subquery)`` as a ``WHERE`` conjunct, the subquery correlated other than by
        equalities alone (:meth:`keyed_subquery`): a semijoin on ``x`` and the outer keys
        against the subquery's value and keys per distinct outer key. A NULL ``x`` or value
        matches nothing, as ``IN`` finds no true comparison there."""
        sub = e.subquery
        what = f"IN subquery {text!r}"
        if (sub.type != "SELECT_NODE" or sub.from_ is None or len(sub.items) != 1 or sub.group_by
                or sub.having is not None or any(is_aggregate(y) for i in sub.items for y in i.walk())
                or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers)):
            raise Unsupported(f"{what}: correlated, not one SELECT ... FROM ... WHERE of one column")
        right, keys = self.keyed_subquery(node, scope, sub, sub.items, False, what)
        on = [(scope.column(x), right.schema[0].name), *keys]
        if len({o for o, _ in on}) != len(on):
            raise Unsupported(f"{what}: one outer column matched twice (a filter)")
        return self.semi(node, right, on)

    def keyed_exists(self, node: Node, scope: Scope, sub: Query, text: str) -> tuple[Node, list[tuple[str, str]]]:
        """An ``EXISTS`` subquery correlated other than by equalities of columns alone (a
        nested subquery reading the outer query, conditions without an equality) as the
        subquery's distinct outer keys (:meth:`keyed_subquery`) and ``(outer column, key
        column)`` pairs for :meth:`semi`."""
        what = f"EXISTS {text!r}"
        if (sub.type != "SELECT_NODE" or sub.group_by or sub.having is not None or sub.from_ is None
                or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers)
                or any(is_aggregate(y) for i in sub.items for y in i.walk())):
            raise Unsupported(f"{what}: a subquery other than SELECT ... FROM ... WHERE")
        return self.keyed_subquery(node, scope, sub, (), False, what)

    def outer_references(self, sub: Query, outer: Scope, what: str) -> list[tuple[str, Expression]]:
        """``(outer column, reference)`` of each ``outer`` column the subquery ``sub`` reads
        (at any depth, qualified by an outer alias: one unqualified does not bind in the
        rewritten query), each with a ``WHERE`` conjunct of ``sub`` comparing it (``=``,
        ``<>``, ``<``, ...) as one operand: with that outer value NULL the conjunct is
        unknown and ``sub`` has no row, which an equality with the key (matching no NULL)
        finds too. ``Unsupported`` otherwise, and when a relation inside ``sub`` is named
        as an outer one."""
        aliases = {src.alias for src in outer.sources}
        inner: set[str] = set()
        refs: list[Expression] = []

        def visit_query(q: Query | None) -> None:
            if q is None:
                return
            if q.type != "SELECT_NODE" or q.ctes:
                raise Unsupported(f"{what}: a set operation or WITH inside a correlated subquery")
            visit_table(q.from_)
            parts = [*q.items, q.where, q.having, q.qualify, *q.group_by]
            for m in q.modifiers:
                parts += [*m.expressions, *(o.expression for o in m.orders), m.limit, m.offset]
            for e in parts:
                if e is not None:
                    for y in e.walk():
                        if y.cls == "COLUMN_REF":
                            refs.append(y)
                        visit_query(y.subquery)

        def visit_table(t: Table | None) -> None:
            if t is None:
                return
            if t.type == "BASE_TABLE":
                inner.add(t.alias or t.name[-1])
            elif t.alias:
                inner.add(t.alias)
            for c in t.children:
                visit_table(c)
            for e in (*t.expressions, *(v for row in t.rows for v in row)):
                for y in e.walk():
                    if y.cls == "COLUMN_REF":
                        refs.append(y)
                    visit_query(y.subquery)
            visit_query(t.subquery)

        visit_query(sub)
        if inner & aliases:
            raise Unsupported(f"{what}: a relation inside named as an outer one ({sorted(inner & aliases)[0]!r})")
        columns: dict[str, None] = {}
        for y in refs:
            if len(y.name) == 2 and y.name[0] in aliases:
                try:
                    columns[outer.column(y)] = None
                except PlanError as err:
                    raise Unsupported(f"{what}: {err}") from None
        if not columns:
            raise Unsupported(f"{what}: reads no outer column by a qualified name")
        compared: dict[str, Expression] = {}
        for c in conjuncts(sub.where):
            if c.cls == "COMPARISON" and c.type in COMPARE_OPS and len(c.children) == 2:
                for y in c.children:
                    if y.cls == "COLUMN_REF" and len(y.name) == 2 and y.name[0] in aliases:
                        compared.setdefault(outer.column(y), y)
        for col in columns:
            if col not in compared:
                raise Unsupported(f"{what}: the outer column {col} is not compared by a WHERE conjunct of its own "
                                   "(its NULL's answer)")
        return [(col, compared[col]) for col in columns]

    def keyed_subquery(self, node: Node, outer: Scope, sub: Query, items, grouped: bool,
                       what: str) -> tuple[Node, list[tuple[str, str]]]:
        """A correlated subquery decorrelated on the distinct outer keys (Materialize's
        ``lowering.rs``: the subquery computed once per distinct value of the outer columns
        it reads): ``K``, the distinct non-NULL values of those columns of ``node``, is a
        relation the subquery's ``FROM`` joins (bound to the outer aliases, qualified
        references only); the subquery's conditions then read ``K``'s columns as its own --
        an equality with one an equi key, others a residual, a nested subquery reading them
        correlated with ``K`` -- and its select list is ``items`` then the key references
        (its ``GROUP BY`` too when ``grouped``). Returns the plan and ``[(outer column, key
        column)]``. A join with ``K`` on no equi key costs :data:`PER_OUTER_KEY` per change.
        A NULL outer key has no row in ``K``: :meth:`outer_references` requires the answer
        of the subquery with no row there."""
        if sub.type != "SELECT_NODE" or sub.ctes or sub.from_ is None:
            raise Unsupported(f"{what}: correlated, not one SELECT ... FROM")
        refs = self.outer_references(sub, outer, what)
        tag = self.fresh("outer")
        types = {c.name: c.type for c in node.schema}
        names = [f"{tag}.{i}" for i in range(len(refs))]
        schema = tuple(ColumnSpec(n, types[o]) for n, (o, _) in zip(names, refs))
        proj = fused(schema, node, tuple(IsNullPredicate(o, True) for o, _ in refs),
                     tuple((o, n) for n, (o, _) in zip(names, refs)))
        keys = Distinct(schema, proj)
        bound: dict[str, dict[str, tuple[str, pa.DataType]]] = {}
        for n, (o, y) in zip(names, refs):
            bound.setdefault(y.name[0], {})[y.name[1]] = (n, types[o])
        relation = f"{tag} (outer keys)"  # no table's name: a word with a space, never bound unquoted
        self.outer_keys[relation] = (keys, [Source(a, cols, set(cols)) for a, cols in bound.items()])
        key_refs = tuple(y for _, y in refs)
        from_ = Table("JOIN", -1, -1, children=(sub.from_, Table("BASE_TABLE", -1, -1, name=(relation,))),
                      join_type="INNER", ref_type="CROSS")
        rewritten = dataclasses.replace(sub, from_=from_, items=(*items, *key_refs),
                                        group_by=(*sub.group_by, *key_refs) if grouped else sub.group_by,
                                        grouping_sets=())
        try:
            right = self.query(rewritten)
        except PlanError as err:
            raise Unsupported(f"{what}: {err}") from None
        finally:
            self.outer_keys.pop(relation, None)
        if isinstance(right, Fallback):
            raise Unsupported(f"{what}: {right.reason}")
        right = self.keyed_cost(right, frozenset(names))
        first = len(right.schema) - len(refs)
        return right, [(o, right.schema[first + i].name) for i, (o, _) in enumerate(refs)]

    def keyed_cost(self, node: Node, keys: frozenset[str]) -> Node:
        """``node`` with each inner join of the outer keys (an input of only ``keys``
        columns) on no equi key of theirs marked :data:`PER_OUTER_KEY`."""
        node = with_inputs(node, [self.keyed_cost(i, keys) if i is not None else None for i in node.inputs])
        if (isinstance(node, Join) and node.kind == "inner"
                and any({c.name for c in i.schema} <= keys for i in node.inputs_)
                and not any(a in keys or b in keys for a, b in node.on)):
            node = dataclasses.replace(node, cost_class=PER_OUTER_KEY)
        return node

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

    def in_value(self, node: Node, scope: Scope, e: Expression) -> tuple[Node, str]:
        """``x IN (subquery)`` as a select item's value, with PostgreSQL's NULLs: true when
        ``x`` matches a row; else false when the subquery is empty; else NULL when ``x`` is
        NULL or the subquery holds a NULL; else false. ``node`` left-joined with the
        subquery's distinct values (a NULL ``x`` matches none) and crossed with the
        subquery's global counts of rows and of non-NULL values (one row, empty input
        included): O(delta) but for a change of those counts, which re-reads ``node``."""
        text = self.span(e)
        x = e.children[0]
        if (x.cls == "FUNCTION" and x.name == ("row",) and 1 < len(x.children) <= self.ROW_IN_COLUMNS
                and all(c.cls == "COLUMN_REF" for c in x.children)):
            return self.row_in_value(node, scope, e, x)
        if x.cls != "COLUMN_REF":
            raise Unsupported(f"select item {text!r}: IN of an expression needing SQL")
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

    #: The widest row ``(a, b, ...) IN (subquery)`` as a value (:meth:`row_in_value`): its
    #: plan has ``2**n`` branches and ``3**n`` lookups.
    ROW_IN_COLUMNS = 3

    def row_in_value(self, node: Node, scope: Scope, e: Expression, x: Expression) -> tuple[Node, str]:
        """``(a1, ..., an) IN (S)`` as a select item's value, ``S`` uncorrelated, with
        PostgreSQL's NULLs for row comparisons: true when a row ``s`` of ``S`` equals the
        row (every ``ai = si``, none NULL); else NULL when some ``s`` has, at each position
        where ``ai`` is not NULL, ``si`` NULL or equal to it (every comparison true or
        unknown); else false (an empty ``S`` included). ``node`` is split by which of the
        ``ai`` are NULL (native filters), a branch's non-NULL positions ``P``; for each
        ``Q`` within ``P``, the rows of ``S`` non-NULL at ``Q`` and NULL at ``P - Q`` decide
        it: their distinct ``Q`` columns left-joined on the ``ai`` of ``Q`` (a match with
        ``Q = P`` all positions is the true one, every other match unknown), or, ``Q``
        empty, their global count crossed in (one row, empty ``S`` included: a change of
        that count re-reads the branch, as :meth:`in_value`'s does). One SQL segment per
        branch computes the value; the branches' union is the result."""
        text = self.span(e)
        right = self.row_subquery(e, x, text)
        n = len(x.children)
        cols = [scope.column(c) for c in x.children]
        ys = right.schema
        self.check_keys(list(zip(cols, (y.name for y in ys))), node.schema + ys)
        tag = self.fresh("rowin")
        value = f"{tag}.value"
        branches = []
        lookup = 0  # numbers each lookup's columns within the tag
        for pattern in range(2 ** n):
            present = [i for i in range(n) if pattern >> i & 1]
            rows: Node = fused(node.schema, node, tuple(IsNullPredicate(cols[i], i in present) for i in range(n)), None)
            true_cond, unknown = None, []
            for subset in range(2 ** len(present)):
                q = [present[j] for j in range(len(present)) if subset >> j & 1]
                decided = fused(ys, right, tuple(IsNullPredicate(ys[i].name, i in q) for i in present), None)
                lookup += 1
                if not q:
                    count = Aggregate(f"{tag}.{lookup}.rows", "count", None, "accumulable")
                    counts = Reduce(self.reduce_schema(ys, [], [count]), decided, (), (count,))
                    rows = Join(rows.schema + counts.schema, (rows, counts), "inner")
                    unknown.append((count.name, "{} > 0"))
                    continue
                keyed = tuple(ColumnSpec(f"{tag}.{lookup}.{i}", ys[i].type) for i in q)
                keys = Distinct(keyed, fused(keyed, decided, (), tuple((ys[i].name, k.name) for i, k in zip(q, keyed))))
                on = tuple((cols[i], k.name) for i, k in zip(q, keyed))
                rows = Join(rows.schema + keys.schema, (rows, keys), "left", on)
                found = (keyed[0].name, "{} IS NOT NULL")
                if len(q) == n:
                    true_cond = found
                else:
                    unknown.append(found)
            at = {c.name: placeholder(i) for i, c in enumerate(rows.schema)}
            sql = "CASE "
            if true_cond is not None:
                sql += f"WHEN {true_cond[1].format(at[true_cond[0]])} THEN true "
            sql += (f"WHEN {' OR '.join(form.format(at[col]) for col, form in unknown)} "
                    "THEN CAST(NULL AS BOOLEAN) ELSE false END")
            items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)] + [(sql, value)]
            branches.append(self.sql_segment(rows, (), items, [text]))
        return Union(branches[0].schema, tuple(branches)), value

    def one_column_subquery(self, e: Expression, text: str, what: str) -> Node:
        """The plan of ``e``'s uncorrelated one-column subquery (of an ``IN`` or a quantified
        comparison, ``what``); a correlated or falling-back one is not planned here."""
        right = self.uncorrelated(e.subquery, f"{what} {text!r}", "correlated ones are absent", f"{what} {text!r}")
        if len(right.schema) != 1:
            raise PlanError(f"subquery has too many columns ({len(right.schema)}) in {text!r}")
        return right

    def quantified(self, node: Node, scope: Scope, e: Expression, x: Expression, op: str, every: bool) -> Node:
        """``x op ANY (S)`` / ``x op ALL (S)`` as a ``WHERE`` conjunct, ``op`` an order and
        ``x`` an integer column: ``node`` crossed with one global reduce of ``S`` and filtered.
        In ``WHERE`` (unknown drops the row as false does) ``x > ANY (S)`` is ``x > min(S)``
        (``min`` skips NULLs; an empty or all-NULL ``S`` is NULL: no row); ``x > ALL (S)``
        is ``count(*) = 0 OR (x > max(S) AND count(y) = count(*))`` (an empty ``S`` keeps
        every row, even a NULL ``x``; a NULL in ``S`` leaves each row false or unknown).
        Integers only: their order is DuckDB's and PostgreSQL's alike."""
        text = self.span(e)
        if op not in ("<", "<=", ">", ">="):
            raise Unsupported(f"{text!r}: a quantified comparison ({op} {'ALL' if every else 'ANY'})")
        both, _, bound, counts, col = self.quantified_bound(node, scope, e, x, op, every, every, text, repr(text))
        cond = f"{col} {op} {bound}"
        if every:
            rows, values = counts
            cond = f"({rows} = 0 OR ({cond} AND {values} = {rows}))"
        joined = self.sql_segment(both, (cond,), None, [text])
        return fused(node.schema, joined, (), tuple((c.name, c.name) for c in node.schema))

    def quantified_bound(self, node: Node, scope: Scope, sub: Expression, x: Expression, op: str, every: bool,
                         counts: bool, text: str, what: str):
        """``x op ANY|ALL (S)``'s inputs, ``x`` an integer column and ``S`` an uncorrelated
        integer subquery: ``node`` crossed with one global reduce of ``S`` -- the bound (``min``
        or ``max`` of its non-NULL values, the one deciding the comparison) and, with
        ``counts``, its counts of rows and of non-NULL values. Returns ``(the join, its
        columns' tag, the bound's placeholder, (rows, values) placeholders or (), x's
        placeholder)`` for SQL over the join (``text``, ``what``: what refusals name)."""
        if x.cls != "COLUMN_REF":
            raise Unsupported(f"{what}: a quantified comparison of an expression")
        right = self.one_column_subquery(sub, text, "quantified comparison")
        col, y = scope.column(x), right.schema[0]
        types = {c.name: c.type for c in node.schema}
        if not (pa.types.is_integer(types[col]) and pa.types.is_integer(y.type)):
            raise Unsupported(f"{text!r}: a quantified comparison of {types[col]} with {y.type} (integers only)")
        tag = self.fresh("quant")
        bound = "max" if (op in (">", ">=")) == every else "min"
        aggs = [Aggregate(f"{tag}.bound", bound, y.name, "hierarchical")]
        if counts:
            aggs += [Aggregate(f"{tag}.rows", "count", None, "accumulable"),
                     Aggregate(f"{tag}.values", "count", y.name, "accumulable")]
        one = Reduce(self.reduce_schema(right.schema, [], aggs), right, (), tuple(aggs))
        both = node.schema + one.schema
        names = [c.name for c in both]
        ph = [placeholder(names.index(a.name)) for a in aggs]
        return Join(both, (node, one), "inner"), tag, ph[0], tuple(ph[1:]), placeholder(names.index(col))

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
        elif len(after) == 2 and after[0] in FLIPPED and after[1] in ("ANY", "SOME", "ALL"):
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
            raise Unsupported(f"{text!r}: a quantified comparison of an integer with {y.type} (integers only)")
        v = constant_of(x.literal.value, y.type)
        if v is None:
            raise Unsupported(f"{text!r}: {x.literal.value} beyond the subquery's type {y.type}")
        negate = {"=": "<>", "<>": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
        deciding = FLIPPED[op] if not every else negate[FLIPPED[op]]  # x op s is s flipped(op) x
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

    def quantified_value(self, node: Node, scope: Scope, e: Expression, sub: Expression, x: Expression,
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
        both, tag, b, (rows, values), xv = self.quantified_bound(node, scope, sub, x, op, every, True, text,
                                                                 f"select item {text!r}")
        unknown = f"WHEN {xv} IS NULL OR {rows} > {values} THEN CAST(NULL AS BOOLEAN)"
        if every:
            sql = (f"CASE WHEN {rows} = 0 THEN true WHEN {xv} IS NOT NULL AND {values} > 0 AND NOT ({xv} {op} {b}) "
                   f"THEN false {unknown} ELSE true END")
        else:
            sql = (f"CASE WHEN {rows} = 0 THEN false WHEN {xv} IS NOT NULL AND {values} > 0 AND {xv} {op} {b} "
                   f"THEN true {unknown} ELSE false END")
        value = f"{tag}.value"
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)] + [(sql, value)]
        return self.sql_segment(both, (), items, [text]), value

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
            raise Unsupported(f"EXISTS {text!r}: inner and outer columns named alike")

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

    def exists_value(self, node: Node, scope: Scope, e: Expression) -> tuple[Node, str]:
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

    def inlined(self, e: Expression) -> Expression | None:
        """The select item of ``e`` when ``e`` is a scalar subquery that is its outer
        query's expression: ``(SELECT item)`` with no ``FROM``, ``WHERE``, ``GROUP BY``,
        ``HAVING``, modifiers or ``WITH``, its one item reading a column (so an outer one:
        the subquery has no columns of its own) and holding no aggregate, window function or
        subquery other than such a one. It is one row whose value is the item over the
        outer row, so it decorrelates to the item itself, read where the subquery stands
        (``sql_text`` splices it in). Else ``None``: a constant item keeps its own
        plan (:meth:`scalar_subquery`), as ``(SELECT '1')`` is text where ``('1')`` is
        unknown; an aggregate of outer columns would be the outer query's (PostgreSQL)."""
        sub = e.subquery
        if (e.cls != "SUBQUERY" or e.children or sub is None or sub.type != "SELECT_NODE"
                or sub.from_ is not None or sub.where is not None or sub.group_by or sub.having is not None
                or sub.qualify is not None or sub.modifiers or sub.ctes or len(sub.items) != 1
                or e.start < 0 or not self.text[e.start:e.end].lstrip().startswith("(")):
            return None
        item = sub.items[0]
        reads = False
        for x in item.walk():
            if x.cls in ("WINDOW", "STAR") or is_aggregate(x):
                return None
            if x.cls == "SUBQUERY":
                if self.inlined(x) is None:
                    return None
                reads = True
            reads = reads or x.cls == "COLUMN_REF"
        return item if reads and item.start >= 0 else None

    def scalar_subquery(self, node: Node, e: Expression, scope: Scope | None = None) -> tuple[Node, str]:
        """An uncorrelated scalar subquery in the select list that is one row by its shape
        (aggregates without ``GROUP BY``/``HAVING``): ``node`` crossed with that one-row
        relation (Materialize's lowering), and the column holding its value. Correlated by
        equalities of columns (with ``scope`` the outer query's), it is
        :meth:`correlated_aggregate`."""
        text = self.span(e)
        sub = e.subquery
        if not e.children and self.text[e.start:e.end].lstrip().upper().startswith("EXISTS"):
            return self.uncorrelated_exists(node, e)
        if e.children:
            raise Unsupported(f"select item {text!r}: IN as a value")
        if self.text[e.start:e.end].lstrip().upper().startswith("ARRAY"):
            return self.array_subquery(node, e, scope)
        constant = (sub is not None and sub.type == "SELECT_NODE" and sub.from_ is None and sub.where is None
                    and not sub.group_by and sub.having is None and not sub.modifiers and len(sub.items) == 1)
        shaped = constant or not (
                sub is None or sub.type != "SELECT_NODE" or sub.from_ is None or sub.group_by
                or sub.having is not None or len(sub.items) != 1
                or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers)
                or not any(is_aggregate(x) for x in sub.items[0].walk() if x.cls != "WINDOW"))
        other = (f"select item {text!r}: a scalar subquery other than one aggregate "
                 "without GROUP BY (one row by its shape)")
        if not shaped and sub is None:
            raise Unsupported(other)
        try:
            right = self.query(sub)
        except PlanError as err:
            if not shaped:
                raise Unsupported(f"{other}, correlated ({err})") from None
            if scope is None:
                raise Unsupported(f"select item {text!r}: {err} (correlated subqueries are absent)") from None
            return self.correlated_aggregate(node, scope, e, err)
        if isinstance(right, Fallback):
            raise Unsupported(f"scalar subquery {text!r}: {right.reason}")
        if len(right.schema) != 1:
            raise PlanError(f"subquery must return only one column ({text!r})")
        name = f"{self.fresh('scalar')}.{right.schema[0].name}"
        one = fused((ColumnSpec(name, right.schema[0].type),), right, (), ((right.schema[0].name, name),))
        if not shaped:
            one = self.at_most_one(one, text)
        return Join(node.schema + one.schema, (node, one), "inner"), name

    def uncorrelated_exists(self, node: Node, e: Expression) -> tuple[Node, str]:
        """An uncorrelated ``EXISTS (subquery)`` as a value: ``node`` crossed with the one row
        of a global count of the subquery's rows (accumulable: one row over no rows too),
        the value whether it is above zero."""
        text = self.span(e)
        rows = self.uncorrelated(e.subquery, f"select item {text!r}", "EXISTS as a value, correlated",
                                 f"EXISTS subquery {text!r}")
        tag = self.fresh("exists")
        count = Aggregate(f"{tag}.rows", "count", None, "accumulable")
        counts = Reduce(self.reduce_schema(rows.schema, [], [count]), rows, (), (count,))
        value = f"{tag}.value"
        flag = self.sql_segment(counts, (), [(f"{placeholder(0)} > 0", value)], [text])
        return Join(node.schema + flag.schema, (node, flag), "inner"), value

    def array_subquery(self, node: Node, e: Expression, scope: Scope | None = None) -> tuple[Node, str]:
        """An uncorrelated ``ARRAY(SELECT x FROM ... [ORDER BY ...])`` in the select list:
        ``node`` crossed with the one-row relation of the array, a global :class:`BasicReduce`
        over the subquery's rows (its order keys kept beside ``x``), recomputed by DuckDB
        when they change (Materialize's basic reduce: an array is not invertible). DuckDB's
        tree holds the subquery as ``SELECT <array_agg of column 1 by the hidden order
        columns> FROM (<the query, each ORDER BY key an extra hidden item>)``: that inner
        query is what is planned. Correlated (with ``scope`` the outer query's), it is
        :meth:`correlated_array`."""
        text = self.span(e)
        sub = e.subquery
        inner = sub.from_.subquery if (sub is not None and sub.type == "SELECT_NODE" and sub.from_ is not None
                                       and sub.from_.type == "SUBQUERY" and not sub.from_.alias) else None
        if inner is None or sub.where is not None or sub.group_by or sub.having is not None or sub.modifiers:
            raise Unsupported(f"select item {text!r}: an ARRAY subquery of another shape than DuckDB's")
        orders = [o for m in inner.modifiers if m.type == "ORDER_MODIFIER" for o in m.orders]
        try:
            rows = self.query(inner)
        except PlanError as err:
            if scope is None:
                raise Unsupported(f"select item {text!r}: {err} (a correlated ARRAY subquery without an "
                                  "outer FROM)") from None
            return self.correlated_array(node, scope, e, inner, orders, err)
        if isinstance(rows, Fallback):
            raise Unsupported(f"ARRAY subquery {text!r}: {rows.reason}")
        name = self.fresh("array")
        value, order = self.array_order(rows.schema, orders, text)
        sql = (f"SELECT ARRAY(SELECT {value} FROM {INPUT_RELATION}{' ORDER BY ' + order if order else ''}) "
               f"AS {identifier(name)}")
        translated = self.checked_sql(sql, rows.schema, (), f"ARRAY subquery {text!r}")
        one = BasicReduce(output_schema(rows.schema, translated), rows, (), ((name, text),), translated)
        return Join(node.schema + one.schema, (node, one), "inner"), name

    @staticmethod
    def ordinal(order) -> bool:
        """Whether an ``ORDER BY`` key of an ARRAY subquery is a position (``ORDER BY 1``, the
        value's): DuckDB adds a hidden item for every other key."""
        lit = order.expression.literal
        return order.expression.cls == "CONSTANT" and lit is not None and lit.kind == "INTEGER"

    def array_order(self, columns, orders, text: str) -> tuple[str, str]:
        """An ARRAY subquery's value (the first of ``columns``, its planned rows') and its
        order (``""``: none), as SQL: each of ``orders`` by its hidden order column (the
        others of ``columns``, in order) or, a position, by the value, with its direction and
        NULLs' place."""
        value, *hidden = (identifier(c.name) for c in columns)
        if len(hidden) != sum(not self.ordinal(o) for o in orders):
            raise PlanError(f"subquery must return only one column ({text!r})")
        keys = iter(hidden)
        out = []
        for o in orders:
            if self.ordinal(o) and o.expression.literal.value != 1:
                raise PlanError(f"ORDER BY position {o.expression.literal.value} is not in select list ({text!r})")
            out.append(f"{value if self.ordinal(o) else next(keys)}{' DESC' if o.direction == 'DESCENDING' else ''}"
                       f"{'' if o.nulls == 'ORDER_DEFAULT' else ' ' + o.nulls}")
        return value, ", ".join(out)

    def correlated_array(self, node: Node, scope: Scope, e: Expression, inner: Query, orders,
                         err: PlanError) -> tuple[Node, str]:
        """``ARRAY(SELECT x FROM ... WHERE inner.k = outer.k ... [ORDER BY ...])`` correlated by
        equalities of inner and outer columns, decorrelated as :meth:`correlated_aggregate`
        is: the subquery's rows (its other conditions kept, its keys beside ``x`` and the
        order keys) grouped by the inner key columns into one array per key, and ``node``
        left-joined with them on the outer columns (:meth:`joined_arrays`). Correlated other
        than by equalities of columns alone (``inner.v > outer.k``), the subquery is computed
        per distinct outer key instead (:meth:`keyed_subquery`), then grouped and joined
        alike. A one-row change of the subquery's input recomputes the arrays of the keys it
        falls in and re-joins the outer rows of those keys; one of the outer input, one row
        (and, keyed, its key's array when the key is new). Forms kept out are refused by
        name: ``LIMIT`` or ``OFFSET``, ``DISTINCT``, ``GROUP BY``, aggregates or window
        functions, ``WITH`` or set operations inside, and a correlation the keys cannot
        carry (:meth:`outer_references`)."""
        text = self.span(e)
        what = f"select item {text!r}: {err} (a correlated ARRAY subquery"
        mods = {m.type for m in inner.modifiers} - {"ORDER_MODIFIER"}
        if inner.type != "SELECT_NODE" or inner.from_ is None:
            raise Unsupported(f"{what} of a set operation or without FROM)")
        if "LIMIT_MODIFIER" in mods or "LIMIT_PERCENT_MODIFIER" in mods:
            raise Unsupported(f"{what} with LIMIT or OFFSET)")
        if mods:
            raise Unsupported(f"{what} with DISTINCT)")
        if inner.ctes:
            raise Unsupported(f"{what} with its own WITH)")
        if (inner.group_by or inner.having is not None or inner.qualify is not None
                or any(is_aggregate(x) or x.cls == "WINDOW" for i in inner.items for x in i.walk())):
            raise Unsupported(f"{what} with GROUP BY, aggregates or window functions)")
        width = 1 + sum(not self.ordinal(o) for o in orders)
        _, sources, _ = self.table(inner.from_)
        pairs, local = correlation(inner.where, Scope(sources), scope)
        rows = None
        if pairs:
            where = None
            if local:
                where = local[0] if len(local) == 1 else Expression("CONJUNCTION", "CONJUNCTION_AND", -1, -1,
                                                                      tuple(local))
            flat = dataclasses.replace(inner, where=where, items=(*(x for _, x in pairs), *inner.items),
                                       modifiers=())
            try:
                rows = self.query(flat)
            except PlanError:  # an outer column read elsewhere than an equality: per outer key
                rows = None
        if rows is not None:
            if isinstance(rows, Fallback):
                raise Unsupported(f"correlated ARRAY subquery {text!r}: {rows.reason}")
            if len(rows.schema) != len(pairs) + width:
                raise PlanError(f"subquery must return only one column ({text!r})")
            keys = [(o, c.name) for (o, _), c in zip(pairs, rows.schema)]
            values = [c.name for c in rows.schema[len(pairs):]]
        else:
            try:
                rows, keys = self.keyed_subquery(node, scope, dataclasses.replace(inner, modifiers=()), inner.items,
                                                 False, "per outer key")
            except Unsupported as why:
                raise Unsupported(f"{what} correlated other than by equalities of columns, {why})") from None
            if len(rows.schema) != len(keys) + width:
                raise PlanError(f"subquery must return only one column ({text!r})")
            values = [c.name for c in rows.schema[:width]]
        return self.joined_arrays(node, rows, keys, values, orders, text)

    def joined_arrays(self, node: Node, rows: Node, keys: list[tuple[str, str]], values: list[str], orders,
                      text: str) -> tuple[Node, str]:
        """``node`` left-joined with the arrays of a correlated ARRAY subquery's ``rows``
        grouped by their key columns (``keys``: each outer column with its key column of
        ``rows``): a :class:`BasicReduce` per key -- ``array_agg`` of the value (the first of
        ``values``) by the subquery's ``orders`` (over the others of ``values``), recomputed
        per affected key -- and a SQL segment giving a row whose key has no inner rows (a
        NULL one included) ``{}``, the array of no rows, not NULL."""
        tag = self.fresh("array")
        group = ", ".join(identifier(k) for _, k in keys)
        x, order = self.array_order([ColumnSpec(v, pa.null()) for v in values], orders, text)
        # (a key has a row: its array is never NULL)
        sql = (f"SELECT {group}, array_agg({x}{' ORDER BY ' + order if order else ''}) AS {identifier(tag)} "
               f"FROM {INPUT_RELATION} GROUP BY {group}")
        translated = self.checked_sql(sql, rows.schema, [k for _, k in keys], f"correlated ARRAY subquery {text!r}")
        grouped = BasicReduce(output_schema(rows.schema, translated), rows, tuple(k for _, k in keys),
                              ((tag, text),), translated)
        cols = tuple((c.name, f"{tag}.{i}") for i, c in enumerate(grouped.schema))
        right = fused(tuple(ColumnSpec(m, c.type) for (_, m), c in zip(cols, grouped.schema)), grouped, (), cols)
        on = tuple((o, cols[i][1]) for i, (o, _) in enumerate(keys))
        self.check_keys(on, node.schema + right.schema)
        both = node.schema + right.schema
        join = Join(both, (node, right), "left", on)
        names = [c.name for c in both]
        value = cols[len(keys)][1]
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)]
        items.append((f"coalesce({placeholder(names.index(value))}, ARRAY[])", value))
        return self.sql_segment(join, (), items, [text]), value

    def at_most_one(self, rows: Node, text: str) -> Node:
        """A scalar subquery's one column ``rows`` as exactly one row, as Materialize
        decorrelates one not one row by its shape: its rows when it has one, a NULL when it
        has none, and while a change leaves it with more than one an error of the view --
        PostgreSQL's words, :data:`MORE_THAN_ONE_ROW` -- that the commit does not fail on:
        reading the view raises it until a later change leaves one row or none
        (:mod:`colmz.dataflow.guard`). The count of ``rows`` is global: its row, while
        ``rows`` is empty, is crossed with a constant NULL; past one it feeds an
        :class:`ErrorGuard`, which stands in the union adding no row. (DuckDB's recompute
        raises the same error whether or not the outer query has rows.)"""
        col = rows.schema[0]
        tag = self.fresh("one")
        count = Aggregate(f"{tag}.rows", "count", None, "accumulable")
        counts = Reduce(self.reduce_schema(rows.schema, [], [count]), rows, (), (count,))
        n = placeholder(0)
        guard = self.sql_segment(counts, (f"{n} = 0",), None, [f"{text}: none, a NULL"])
        null = Constant((ColumnSpec(col.name, col.type),), ((None,),))
        empty = Join(null.schema + guard.schema, (null, guard), "inner")
        empty = fused(null.schema, empty, (), ((col.name, col.name),))
        many = self.sql_segment(counts, (f"{n} > 1",), None, [f"{text}: more than one row"])
        error = ErrorGuard(null.schema, many, MORE_THAN_ONE_ROW, f"{text}: at most one row, else an error")
        return Union(rows.schema, (rows, empty, error))

    def typed_subquery(self, node: Node, sub: Expression, scope: Scope) -> tuple[Node, str]:
        """A scalar subquery read by a condition (:meth:`scalar_subquery`) whose native
        aggregates are typed as PostgreSQL's; else the subquery re-planned with every
        reduce a :class:`BasicReduce` (DuckDB's aggregates through ``translate``: ``avg``
        of integers numeric, as PostgreSQL's), recomputed per affected group."""
        text = self.span(sub)
        joined, col = self.scalar_subquery(node, sub, scope)
        try:
            self.check_postgres_typed(joined, col, text)
            return joined, col
        except Unsupported:
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
        for a, _ in untyped_aggregates(node):
            raise Unsupported(f"subquery {text!r} in a condition: the native {a.function} is not typed "
                              "as PostgreSQL's")

    #: Aggregates whose value over no rows is NULL (``count`` is 0: coalesced).
    NULL_WHEN_EMPTY = frozenset({"sum", "avg", "min", "max", "bool_and", "bool_or", "every", "string_agg",
                                 "array_agg", "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp",
                                 "var_pop"})

    def correlated_aggregate(self, node: Node, scope: Scope, e: Expression, err: PlanError) -> tuple[Node, str]:
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
        if not is_aggregate(agg) and self.null_with_aggregates(agg):
            fn = "expression"  # NULL over no rows, as the left join's missing row gives
        elif not is_aggregate(agg) or fn not in self.NULL_WHEN_EMPTY | {"count", "count_star"}:
            raise Unsupported(f"select item {text!r}: {err} (a correlated scalar subquery other than one "
                               "aggregate call, or arithmetic over aggregates NULL over no rows)")
        if sub.ctes:
            raise Unsupported(f"select item {text!r}: {err} (a correlated scalar subquery with its own WITH)")
        inner_node, sources, _ = self.table(sub.from_)
        inner = Scope(sources)
        pairs, local = correlation(sub.where, inner, scope)
        if not pairs:
            return self.keyed_aggregate(node, scope, e, fn, err)
        where = None
        if local:
            where = local[0] if len(local) == 1 else Expression("CONJUNCTION", "CONJUNCTION_AND", -1, -1,
                                                                  tuple(local))
        keys = tuple(x for _, x in pairs)
        grouped = dataclasses.replace(sub, where=where, group_by=keys, grouping_sets=(), items=(*keys, agg))
        try:
            right = self.query(grouped)
        except PlanError:  # an outer column read elsewhere than an equality
            return self.keyed_aggregate(node, scope, e, fn, err)
        if isinstance(right, Fallback):
            raise Unsupported(f"correlated scalar subquery {text!r}: {right.reason}")
        return self.joined_aggregate(node, right, [(o, i) for i, (o, _) in enumerate(pairs)], len(pairs), fn, text)

    #: Operators whose value is NULL when an operand is (PostgreSQL's strict arithmetic).
    STRICT_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})

    def null_with_aggregates(self, item: Expression) -> bool:
        """Whether the select item ``item`` is arithmetic (and casts) over aggregates of
        :data:`NULL_WHEN_EMPTY` and constants, so NULL over no rows: ``max(x) + 1`` is
        (its value per key is the grouped subquery's, a key without rows NULL as the left
        join gives it); ``count(*) + 1`` or ``coalesce(max(x), 0)`` are not. No column
        is read outside an aggregate's arguments (an outer one would be a correlation)."""
        def strict(n: Expression) -> bool:  # NULL whenever every aggregate under it is
            if is_aggregate(n):
                return len(n.name) == 1 and n.name[-1] in self.NULL_WHEN_EMPTY
            if n.cls == "CAST":
                return strict(n.children[0])
            if n.cls == "FUNCTION" and len(n.name) == 1 and n.name[-1] in self.STRICT_ARITHMETIC:
                return any(strict(c) for c in n.children)
            return False

        def plain(n: Expression) -> bool:  # constants and aggregates only (every aggregate NULL when empty)
            if is_aggregate(n):
                return len(n.name) == 1 and n.name[-1] in self.NULL_WHEN_EMPTY
            return n.cls in ("CONSTANT", "TYPE", "CAST", "FUNCTION") and all(plain(c) for c in n.children)

        return strict(item) and plain(item)

    def keyed_aggregate(self, node: Node, scope: Scope, e: Expression, fn: str, err: PlanError) -> tuple[Node, str]:
        """A scalar subquery of one aggregate correlated other than by equalities of columns
        alone (``(SELECT count(*) FROM u WHERE u.x > t.y)``): grouped by the distinct outer
        keys (:meth:`keyed_subquery`), ``node`` left-joined with it on them -- a key without
        inner rows (a NULL key included) gets the aggregate over no rows."""
        text = self.span(e)
        what = f"select item {text!r}"
        try:
            right, keys = self.keyed_subquery(node, scope, e.subquery, e.subquery.items, True, what)
        except Unsupported as why:
            raise Unsupported(f"{what}: {err} (correlated other than by equalities of columns; {why})") from None
        names = [c.name for c in right.schema]
        return self.joined_aggregate(node, right, [(o, names.index(k)) for o, k in keys], 0, fn, text)

    def joined_aggregate(self, node: Node, right: Node, on: list[tuple[str, int]], at: int, fn: str,
                         text: str) -> tuple[Node, str]:
        """``node`` left-joined with a correlated aggregate grouped by its keys (``right``,
        its column ``at`` the value): ``on`` pairs each outer column with a key's position;
        ``count`` over no rows is 0 (coalesced), the others NULL."""
        tag = self.fresh("scalar")
        cols = tuple((c.name, f"{tag}.{i}") for i, c in enumerate(right.schema))
        right = fused(tuple(ColumnSpec(n, c.type) for (_, n), c in zip(cols, right.schema)), right, (), cols)
        on = tuple((o, cols[i][1]) for o, i in on)
        self.check_keys(on, node.schema + right.schema)
        both = node.schema + right.schema
        join = Join(both, (node, right), "left", on)
        names = [c.name for c in both]
        value = cols[at][1]
        items = [(placeholder(i), c.name) for i, c in enumerate(node.schema)]
        cell = placeholder(names.index(value))
        items.append((f"coalesce({cell}, 0)" if fn in ("count", "count_star") else cell, value))
        if fn in ("count", "count_star"):
            return self.sql_segment(join, (), items, [text]), value
        proj = tuple((c.name, c.name) for c in node.schema) + ((value, value),)
        return fused(tuple(c for c in both if c.name in dict(proj)), join, (), proj), value

    def correlated(self, sub: Query, outer: Scope, text: str, cross: list | None = None
                   ) -> tuple[Node, list[tuple[str, str]]]:
        """An ``EXISTS`` subquery decorrelated: its ``FROM`` and local conditions planned,
        its equalities with outer columns as ``(outer column, inner column)`` keys. With
        ``cross`` a list, the other conditions reading outer columns are appended to it (the
        residual of :meth:`semi_residual`, bound by the inner scope, then the outer) instead
        of refused."""
        if (sub.type != "SELECT_NODE" or sub.ctes or sub.group_by or sub.having is not None
                or sub.from_ is None or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers)
                or any(is_aggregate(x) for e in sub.items for x in e.walk())):
            raise Unsupported(f"EXISTS {text!r}: a subquery other than SELECT ... FROM ... WHERE")
        node, sources, conds = self.table(sub.from_)
        inner = Scope(sources)
        pairs, local = [], []
        for c in conjuncts(sub.where):
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
                    raise Unsupported(f"EXISTS {text!r}: a nested subquery")
                if x.cls == "COLUMN_REF":
                    try:
                        inner.column(x)
                    except PlanError:
                        outer.column(x)  # PlanError when neither scope has it
                        reads_outer = True
            (cross if reads_outer and cross is not None else local).append(c)
            if reads_outer and cross is None:
                raise Unsupported(f"EXISTS {text!r}: a correlated condition other than an "
                                   f"equality of columns ({self.span(c)!r})")
        if not pairs and cross:
            # pairs by other conditions alone: a cross join of the outer and inner inputs
            raise Unsupported(f"EXISTS {text!r}: a correlated condition other than an equality of columns "
                               f"({self.span(cross[0])!r}) without one")
        if not pairs:
            raise Unsupported(f"EXISTS {text!r}: not correlated by an equality of columns")
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
