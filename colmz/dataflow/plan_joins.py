"""The ``FROM`` clause's lowering for ``colmz.dataflow.plan``: :class:`JoinLowering`.

Design
------
A mixin of the planner (``colmz.dataflow.plan``'s ``_Planner``): tables as ``Get`` nodes,
inner joins flattened into one multiway equi-join whose conditions are placed once the
whole ``FROM`` is known (:meth:`JoinLowering.place`), outer joins (with a residual: the
pairs plus each preserved side's unmatched rows, :meth:`JoinLowering.outer_residual`),
``USING`` / ``NATURAL``, ``LATERAL`` subqueries decorrelated by equalities, table functions
and ``VALUES`` lists as a ``FlatMap``. Every method reads and writes the planner's state
through ``self``; none is called but by the planner.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from colmz.dataflow.plan_binding import (
    POSTGRES_TYPES,
    PlanError,
    Scope,
    Source,
    Unsupported,
    conjuncts,
    correlation,
    has_grouping_sets,
    is_aggregate,
    reads_outside,
)
from colmz.dataflow.plan_nodes import (
    Distinct,
    Fallback,
    FlatMap,
    Get,
    Join,
    Negate,
    Node,
    Predicate,
    Schema,
    Union,
    fused,
)
from colmz.dataflow.plan_pushdown import grouping_input, sql_pushed_below_sql
from colmz.dataflow.sqlmap import SqlMapFilter as SqlMapFilterOp
from colmz.dataflow.sqlmap import placeholder
from colmz.order import ColumnSpec
from colmz.sql.errors import SQLError
from colmz.sql.tree import Expression, Query, Table
from colmz.updates import widen

__all__ = ["JoinLowering"]


class JoinLowering:
    """The planner's ``FROM`` clause: tables, joins, ``LATERAL``, table functions."""

    def table(self, t: Table) -> tuple[Node, list[Source], list[Expression]]:
        """The node of a ``FROM`` item, its scope and the inner-join conditions still to place."""
        if t.type == "BASE_TABLE":
            if len(t.name) != 1:
                raise Unsupported(f"table name {'.'.join(t.name)!r} with a schema or catalog")
            name = t.name[0]
            if name in self.outer_keys:
                # a correlated subquery's distinct outer keys (SubqueryLowering.keyed_subquery)
                keys, srcs = self.outer_keys[name]
                return keys, list(srcs), []
            cte = self.cte(name)
            if cte is not None:
                node, srcs, conds = self.cte_source(cte, t.alias or name, t.column_aliases, f"WITH {name!r}")
                taken = self.item_where.pop(id(t), None)
                if taken:
                    node = self.item_filtered(node, srcs, taken)
                return node, srcs, conds
            if name not in self.schemas and name.lower() in self.schemas:
                raise Unsupported(f"table {name!r} matched only ignoring case "
                                   "(quoted and unquoted identifiers are not told apart)")
            if name not in self.schemas:
                raise PlanError(f"relation {name!r} does not exist among the schemas {sorted(self.schemas)}")
            if t.column_aliases:
                raise Unsupported(f"column aliases on table {name!r}")
            schema = self.schemas[name]
            self.used[name] = schema
            alias = t.alias or name
            cols = tuple((c.name, f"{alias}.{c.name}") for c in schema)
            node = Get(tuple(ColumnSpec(p, c.type) for (_, p), c in zip(cols, schema)), name, alias, cols)
            src = Source(alias, {c.name: (p, c.type) for (_, p), c in zip(cols, schema)})
            return node, [src], []
        if t.type == "SUBQUERY":
            if not t.alias:
                raise Unsupported("a subquery in FROM without an alias")
            node, srcs, conds = self.subquery_source(t.subquery, t.alias, t.column_aliases, f"subquery {t.alias!r}", t)
            taken = self.item_where.pop(id(t), None)
            if taken:
                node = self.item_filtered(node, srcs, taken)
            return node, srcs, conds
        if t.type == "JOIN":
            return self.join(t)
        raise Unsupported(f"FROM item of type {t.type} ({self.span(t)!r})")

    def item_filtered(self, node: Node, sources: list[Source], where: list[Expression]) -> Node:
        """A join's ``FROM`` subquery (``node``) filtered by the outer ``WHERE``'s conjuncts
        it takes (``plan_pushdown.join_item_conjuncts``; or the one ``FROM`` item's, a grouped
        subquery or CTE: ``plan_pushdown.grouped_item_conjuncts``): the native ones as a
        filter, the others as a SQL filter moved on into the subquery's SQL segment, so its
        items are computed only for the rows they keep (``plan_pushdown.sql_pushed_below_sql``);
        on a grouped item's keys, below its grouping, so a group they drop is never computed."""
        scope = Scope(sources)
        native = [c for c in where if self.native(c, scope, sources)]
        sql = [c for c in where if not any(c is x for x in native)]
        if any(x.cls == "SUBQUERY" for c in sql for x in c.walk()):
            return node  # pragma: no cover - join_item_conjuncts takes no subquery
        self.item_placed.update(id(c) for c in where)
        # on a grouped item's group keys: below its grouping (plan_pushdown.grouping_input)
        found = grouping_input(node, {scope.column(r) for c in where for r in c.walk() if r.cls == "COLUMN_REF"})
        if found is not None:
            below, rename, rebuild = found
            return rebuild(self.filtered(below, native, sql, lambda r: rename[scope.column(r)]))
        return self.filtered(node, native, sql, scope.column)

    def filtered(self, node: Node, native: list[Expression], sql: list[Expression], column_of) -> Node:
        """``node`` filtered by the conjuncts ``native`` and ``sql`` (their columns ``node``'s
        by ``column_of``), the SQL ones moved on into its SQL segment."""
        types = {c.name: c.type for c in node.schema}
        before = node.schema
        if sql:
            names = [c.name for c in node.schema]
            texts = tuple(self.sql_text(c, names, column_of) for c in sql)
            node = self.sql_segment(node, texts, None, [self.span(c) for c in sql])
            node = sql_pushed_below_sql(node, self.VOLATILE_CALLS)
            if node.schema != before:
                node = fused(before, node, (), tuple((c.name, c.name) for c in before))
        if native:
            node = fused(node.schema, node, tuple(p for c in native for p in self.predicates(c, column_of, types)),
                         None)
        return node

    def join(self, t: Table) -> tuple[Node, list[Source], list[Expression]]:
        if t.ref_type not in ("REGULAR", "CROSS", "NATURAL"):
            raise Unsupported(f"{t.ref_type} join")
        kind = {"INNER": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(t.join_type)
        if kind is None:
            raise Unsupported(f"{t.join_type} join")
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
        lateral = sub.type == "SUBQUERY" and kind in ("inner", "left") and reads_outside(sub.subquery)
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
        conds = [c for e in t.expressions for c in conjuncts(e)]
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
        scope = Scope(lsrc + rsrc)
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
                except Unsupported:
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
            raise Unsupported(f"{kind.upper()} JOIN without an equality of columns")
        else:
            join = Join(left.schema + right.schema, (left, right), kind, tuple(on))
        if id(t) in self.merging:
            return self.merged_using(join, self.merging.pop(id(t)), lsrc + rsrc)
        return join, lsrc + rsrc, []

    def outer_residual(self, kind: str, left: Node, right: Node, on, residual: list[Expression],
                       scope: Scope) -> Node:
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
            t = POSTGRES_TYPES.get(c.type)
            if t is None:
                raise Unsupported(f"{kind.upper()} JOIN with a residual condition: a NULL of type {c.type}")
            items.append((f"CAST(NULL AS {t})", c.name))
        node = self.sql_segment(rows, (), items, [f"{kind.upper()} JOIN's unmatched rows padded with NULLs"])
        if [c.type for c in node.schema] != [c.type for c in schema]:
            raise Unsupported(f"{kind.upper()} JOIN's NULL padding typed {node.schema}, not {schema}")
        return node

    def merged_using(self, join: Join, merged, sources: list[Source]):
        """A right or full ``JOIN ... USING``'s merged columns, ``COALESCE(l.c, r.c)`` each,
        computed after the join (one SQL segment) and in scope first, unqualified."""
        names = [c.name for c in join.schema]
        tag = self.fresh("using")
        items = [(placeholder(i), n) for i, n in enumerate(names)]
        items += [(f"coalesce({placeholder(names.index(lc))}, {placeholder(names.index(rc))})", f"{tag}.{name}")
                  for name, lc, rc in merged]
        node = self.sql_segment(join, (), items, [f"USING ({', '.join(n for n, _, _ in merged)})"])
        types = {c.name: c.type for c in node.schema}
        src = Source("", {name: (f"{tag}.{name}", types[f"{tag}.{name}"]) for name, _, _ in merged})
        return node, [src, *sources], []

    def lateral(self, t: Table, kind: str, left: Node, lsrc: list[Source], lconds) -> tuple[Node, list[Source], list]:
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
            raise Unsupported(f"{what} without an alias")
        if any(not (c.cls == "CONSTANT" and c.literal is not None and c.literal.kind == "BOOLEAN" and c.literal.value)
               for e in t.expressions for c in conjuncts(e)):
            raise Unsupported(f"{what}: a join condition other than ON true")
        if sub.type != "SELECT_NODE" or sub.ctes:
            raise Unsupported(f"{what}: not one SELECT")
        left = self.place(left, lsrc, lconds)
        outer = Scope(lsrc)
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
            raise Unsupported(f"{what}: two output columns named alike")
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
        src = Source(alias, {nm: (p, c.type) for nm, (_, p), c in zip(names, cols, right.schema)})
        return node, lsrc + [src], []

    #: Table functions read per row (a FlatMap): one output column each, named as
    #: PostgreSQL names it (the column alias, else the table alias, else the function).
    def table_function(self, t: Table, kind: str, left: Node, lsrc: list[Source], lconds):
        """``FROM x, [LATERAL] f(args) [AS g[(c)]]`` (``CROSS JOIN``, ``JOIN ... ON true``,
        ``LEFT JOIN ... ON true``) with ``f`` a table function of one output column whose
        arguments are the left side's columns or constants: a FlatMap over the left side
        (Materialize's lowering of a table function in ``FROM``), the call evaluated per row
        by DuckDB through translate, each output row keeping its row's diff; for ``LEFT
        JOIN`` a row the function gives no rows keeps one row, NULL in the function's column."""
        r = t.children[1]
        what = f"table function {self.span(r)!r}"
        if any(not (c.cls == "CONSTANT" and c.literal is not None and c.literal.kind == "BOOLEAN" and c.literal.value)
               for e in t.expressions for c in conjuncts(e)):
            raise Unsupported(f"{what}: a join condition other than ON true")
        if len(r.expressions) != 1:
            raise Unsupported(f"{what}: not one function call")
        call = r.expressions[0]
        fn = call.name[-1] if call.cls == "FUNCTION" and len(call.name) == 1 else ""
        if fn not in self.TABLE_FUNCTIONS or len(call.children) not in self.TABLE_FUNCTIONS[fn]:
            raise Unsupported(f"{what}: a table function other than generate_series, unnest of one array or "
                              "jsonb's set-returning functions of one argument")
        if "ordinality" in self.text[r.start:r.end].lower():
            raise Unsupported(f"{what}: WITH ORDINALITY")
        own = self.TABLE_FUNCTION_COLUMNS.get(fn, ())
        width = max(len(own), 1)
        if len(r.column_aliases) > width:
            raise PlanError(f"{what} has {width} column{'s' if width > 1 else ''} available but "
                            f"{len(r.column_aliases)} columns specified")
        left = self.place(left, lsrc, lconds)
        names = [c.name for c in left.schema]
        # the call's own position covers its arguments only: its text rebuilt around theirs
        column_of = Scope(lsrc).column
        call_text = f"{fn}({', '.join(self.sql_text(a, names, column_of) for a in call.children)})"
        shown = f"{fn}({', '.join(self.span(a) for a in call.children)})"
        if len(own) > 1:
            columns = list(r.column_aliases) + list(own[len(r.column_aliases):])
        else:
            columns = [r.column_aliases[0] if r.column_aliases else (r.alias or (own[0] if own else fn))]
        return self.flat_map(kind, left, lsrc, call_text, r.alias or fn, columns, shown, what)

    def flat_map(self, kind: str, left: Node, lsrc: list[Source], call: str, alias: str, columns: list[str],
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
            raise Unsupported(f"{what}: its columns named alike, or as a column of the left side")
        items = tuple((placeholder(i), n) for i, n in enumerate(names)) + tuple(
            (f'"colmz_f".{v}', out) for v, out in zip(vs, outs))
        try:
            schema = SqlMapFilterOp(left.schema, (), items, lateral=lateral).schema
        except (SQLError, TypeError, ValueError) as e:
            raise Unsupported(f"{what}: {e}") from None
        node = FlatMap(schema, left, (), items, (f"{'LEFT JOIN ' if kind == 'left' else ''}{shown}",),
                       lateral=lateral)
        types = {c.name: c.type for c in schema}
        src = Source(alias, {c: (out, types[out]) for c, out in zip(columns, outs)})
        return node, lsrc + [src], []

    def lateral_values(self, t: Table, kind: str, left: Node, lsrc: list[Source], lconds):
        """``FROM x, LATERAL (VALUES (...), ...) AS v(a, b)`` reading the left side's columns
        (an unpivot): a FlatMap over the left side, each row giving one row per ``VALUES``
        row; columns unnamed by the alias are PostgreSQL's ``column1``, ``column2``, ..."""
        r = t.children[1]
        what = f"LATERAL VALUES {r.alias!r}"
        if any(not (c.cls == "CONSTANT" and c.literal is not None and c.literal.kind == "BOOLEAN" and c.literal.value)
               for e in t.expressions for c in conjuncts(e)):
            raise Unsupported(f"{what}: a join condition other than ON true")
        rows = r.subquery.from_.rows
        width = len(rows[0])
        if any(len(row) != width for row in rows):
            raise PlanError("VALUES lists must all be the same length")
        if len(r.column_aliases) > width:
            raise PlanError(f"{what} has {width} columns available but {len(r.column_aliases)} columns specified")
        left = self.place(left, lsrc, lconds)
        names = [c.name for c in left.schema]
        column_of = Scope(lsrc).column
        call = "(VALUES " + ", ".join("(" + ", ".join(self.sql_text(e, names, column_of) for e in row) + ")"
                                      for row in rows) + ")"
        columns = list(r.column_aliases) + [f"column{i + 1}" for i in range(len(r.column_aliases), width)]
        shown = "VALUES " + ", ".join("(" + ", ".join(self.span(e) for e in row) + ")" for row in rows)
        return self.flat_map(kind, left, lsrc, call, r.alias, columns, shown, what)

    def decorrelated(self, sub: Query, outer: Scope, what: str):
        """A subquery correlated by equalities of inner and outer columns in its ``WHERE``
        (every other outer reference refused), planned with those conditions taken off and
        its inner key columns carried as its last output columns -- added to ``GROUP BY``
        when it aggregates, to the groups of its top-k (:meth:`modifiers`). Returns ``(node,
        number of its own columns, [(outer column, inner key expression)], whether it is a
        global aggregate, positions of its count items)``: a global aggregate's keys
        without rows have no row here, where the subquery has one (NULLs, counts 0)."""
        _, isrc, _ = self.table(sub.from_)  # the inner scope, to tell inner columns from outer ones
        inner = Scope(isrc)
        pairs, local = correlation(sub.where, inner, outer)
        if not pairs:
            raise Unsupported(f"{what}: correlated other than by equalities of columns")
        keys = tuple(x for _, x in pairs)
        aggregated = bool(sub.group_by) or sub.having is not None or any(
            is_aggregate(x) for e in sub.items for x in e.walk() if x.cls != "WINDOW")
        if any(x.cls == "WINDOW" for e in sub.items for x in e.walk()):
            raise Unsupported(f"{what}: window functions")
        if has_grouping_sets(sub):
            raise Unsupported(f"{what}: grouping sets")
        glob = aggregated and not sub.group_by
        counts: list[int] = []
        if glob:
            if sub.having is not None or any(m.type != "ORDER_MODIFIER" for m in sub.modifiers):
                raise Unsupported(f"{what}: a global aggregate with HAVING, DISTINCT or LIMIT")
            for i, e in enumerate(sub.items):
                fn = e.name[-1] if e.cls == "FUNCTION" and len(e.name) == 1 else ""
                if not is_aggregate(e) or fn not in self.NULL_WHEN_EMPTY | {"count", "count_star"}:
                    raise Unsupported(f"{what}: a global aggregate's item {self.span(e)!r} other than one "
                                       "aggregate call")
                if fn in ("count", "count_star"):
                    counts.append(i)
        where = None
        if local:
            where = local[0] if len(local) == 1 else Expression("CONJUNCTION", "CONJUNCTION_AND", -1, -1,
                                                                  tuple(local))
        n = len(sub.items)
        if any(e.cls == "STAR" for e in sub.items):
            raise Unsupported(f"{what}: * in its select list")
        rewritten = dataclasses.replace(sub, where=where, items=(*sub.items, *keys),
                                        group_by=(*sub.group_by, *keys) if aggregated else sub.group_by,
                                        grouping_sets=())
        self.lateral_keys[id(rewritten)] = len(keys)
        try:
            right = self.query(rewritten)
        except PlanError as e:  # an outer column read elsewhere than an equality
            raise Unsupported(f"{what}: {e} (correlated other than by equalities of columns)") from None
        finally:
            self.lateral_keys.pop(id(rewritten), None)
        if isinstance(right, Fallback):
            raise Unsupported(f"{what}: {right.reason}")
        return right, n, pairs, glob, counts

    def lateral_map(self, sub: Query, alias: str, column_aliases, left: Node, lsrc, outer: Scope, what: str):
        """A ``LATERAL`` subquery without ``FROM``: its items, expressions over the left side's
        columns, computed per left row (a Map, one SQL segment)."""
        if sub.where is not None or sub.group_by or sub.having is not None or sub.modifiers:
            raise Unsupported(f"{what}: SELECT without FROM with WHERE, GROUP BY, HAVING or modifiers")
        names_in = [c.name for c in left.schema]
        tag = self.fresh("lateral")
        items = [(placeholder(i), c) for i, c in enumerate(names_in)]
        out_names = []
        for j, e in enumerate(sub.items):
            if e.cls in ("STAR", "SUBQUERY") or any(x.cls in ("SUBQUERY", "WINDOW") or is_aggregate(x)
                                                     for x in e.walk()):
                raise Unsupported(f"{what}: item {self.span(e)!r}")
            name = column_aliases[j] if j < len(column_aliases) else (
                e.alias or (e.name[-1] if e.cls == "COLUMN_REF" else f"{tag}.{j}"))
            out_names.append(name)
            items.append((self.sql_text(e, names_in, outer.column), f"{alias}.{name}"))
        if len(column_aliases) > len(sub.items):
            raise PlanError(f"{what} has {len(sub.items)} columns available but {len(column_aliases)} columns specified")
        if len(set(out_names)) != len(out_names):
            raise Unsupported(f"{what}: two output columns named alike")
        node = self.sql_segment(left, (), items, [self.span(e) for e in sub.items])
        types = {c.name: c.type for c in node.schema}
        src = Source(alias, {nm: (f"{alias}.{nm}", types[f"{alias}.{nm}"]) for nm in out_names})
        return node, lsrc + [src], []

    def equality(self, e: Expression, scope: Scope) -> tuple[str, str] | None:
        if (e.cls == "COMPARISON" and e.type == "COMPARE_EQUAL" and len(e.children) == 2
                and all(c.cls == "COLUMN_REF" for c in e.children)):
            if any(self.ref_kinds.get((c.start, c.end)) == "jsonb" for c in e.children):
                return None  # jsonb equality is not its text's (1.0 is 1): a SQL condition
            return scope.column(e.children[0]), scope.column(e.children[1])
        return None

    def check_keys(self, on, schema: Schema) -> None:
        types = {c.name: c.type for c in schema}
        for a, b in on:
            ta, tb = types[a], types[b]
            if ta != tb and (widen(ta, tb) is None or pa.types.is_temporal(ta) != pa.types.is_temporal(tb)):
                raise Unsupported(f"join of {a} ({ta}) with {b} ({tb}): a cast")

    def place(self, node: Node, sources: list[Source], conds: list[Expression]) -> Node:
        """An inner join's conditions placed: equalities between inputs as keys, native
        predicates as a filter; a single-input node with conditions gets a filter."""
        scope = Scope(sources)
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
                    raise Unsupported(f"join condition {self.span(c)!r}: equates two columns of one input")
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

    def using(self, t: Table, kind: str, lsrc: list[Source], rsrc: list[Source]) -> list[Expression]:
        """``JOIN ... USING (c, ...)`` as the equalities ``l.c = r.c``; the right side's ``c``
        is then reachable qualified only and ``*`` lists the ``USING`` columns first, as
        PostgreSQL does (for inner and left joins the merged column is the left one's; for
        right and full joins it is ``COALESCE(l.c, r.c)``, a column of its own computed after
        the join, both sides' ``c`` reachable qualified only: :meth:`merged_using`)."""
        self.merging.pop(id(t), None)  # planned again (a CTE's second reference): merged afresh
        if len(lsrc) != 1:
            raise Unsupported("JOIN ... USING with several relations on its left")
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

    def one_side(self, e: Expression, scope: Scope, lnames: set[str]) -> int | None:
        """0 or 1 when every column ``e`` reads is on the join's left or right input."""
        sides = set()
        for sub in e.walk():
            if sub.cls == "SUBQUERY":
                return None
            if sub.cls == "COLUMN_REF":
                sides.add(0 if scope.column(sub) in lnames else 1)
        return sides.pop() if len(sides) == 1 else None
