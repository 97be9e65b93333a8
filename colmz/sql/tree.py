"""The tree: DuckDB's own parse of a query, as colmz's small frozen node classes.

DuckDB parses PostgreSQL's grammar (its ``libpg_query`` fork) and serializes a ``SELECT``
statement's parse tree as JSON (``json_serialize_sql``), every expression with its position
in the text. :func:`parse_tree` gets a text's tree once per distinct text (an LRU cache keyed
by the text): from colmz's own reading of DuckDB's tokens (:mod:`colmz.sql.grammar`, the
common part of ``SELECT``'s grammar, a few per cent of DuckDB's cost), else once per shape
(:mod:`colmz.sql.shapes`: a text differing from a known one only in literal values,
comments and spacing gets the known tree remapped to it), else from DuckDB's JSON, into
three node classes:

* :class:`Query` -- a query node (``SELECT_NODE``, ``SET_OPERATION_NODE``, the CTE nodes):
  its select list, ``FROM`` (a :class:`Table`), ``WHERE``, ``GROUP BY``, ``HAVING``,
  ``QUALIFY``, result modifiers, ``WITH`` list and, for a set operation, its branches.
* :class:`Table` -- a table reference of ``FROM`` (a base table, a join, a subquery, a
  table function, a ``VALUES`` list).
* :class:`Expression` -- an expression node: DuckDB's expression class (``COMPARISON``,
  ``FUNCTION``, ``COLUMN_REF``, ``CAST``, ``SUBQUERY``, ...) and type (``COMPARE_EQUAL``,
  ...), its span, its child expressions in DuckDB's serialization order, its name (a
  function's, a column reference's parts), alias and, for a subquery, the :class:`Query`.

Invariants:

* Equal to DuckDB's tree or give up: a tree :mod:`colmz.sql.grammar` builds is the tree
  DuckDB's JSON gives for that text (same nodes, names, children, spans, aliases); for any
  text it does not know with certainty it gives up and DuckDB parses the text. So every
  tree, whichever way it was made, is DuckDB's reading of the text.
* One tree: what colmz needs to know about a query's structure is read off this tree, not
  re-derived from tokens; a node kind DuckDB adds later is still an :class:`Expression`
  (children are found generically: every expression under a node's fields, in order), so
  an unknown kind is never silently dropped.
* Spans are character offsets into the text parsed, half-open ``[start, end)``, and cover
  the node *and everything under it*: DuckDB places an operator node at its operator
  (``a IS NULL`` at ``IS``), so a node's span is the union of its own position and its
  children's, with the parentheses written around a child (``(a + b)::text`` spans all of
  it). Parentheses around the node itself are outside its own span (DuckDB keeps no node
  for them): ``(1)`` is a constant spanning ``1``. DuckDB's byte offsets are turned into
  character offsets. A node DuckDB gives no position, with no positioned child, has
  ``start == end == -1``; so has a bound left out of an array slice (``a[2:]``, ``a[:3]``:
  DuckDB's empty ``list_value()``, the upper one placed at the ``:``).
* Nodes are frozen and shared through the cache (and between trees of one shape): never
  mutate one.
* A DuckDB call costs about as much as the serialization of a short text: the texts one
  statement needs (an ``UPDATE``'s values and predicate) are parsed in one call
  (:func:`prefetch_trees`, :func:`prefetch_expressions`).
* The parse is DuckDB's, so the text the tree describes is the text DuckDB runs: comments
  (nested ``/* */``, ``--`` ending at ``\\r`` or ``\\n``), strings and dollar quotes are
  read by DuckDB's lexer.

:func:`check_expression` is where a fragment of user text (a ``DELETE``/``UPDATE``
predicate, an ``UPDATE`` value) is decided to be one expression, by DuckDB's parse of
``SELECT (<text>)``, before colmz puts it inside a statement.

>>> q, = parse_tree("SELECT k + 1 AS j FROM t WHERE k IS NULL")
>>> q.type, [e.name for e in q.items[0].children], q.items[0].alias, q.from_.name
('SELECT_NODE', [('k',), ()], 'j', ('t',))
>>> w = q.where
>>> w.type, w.start, w.end, "SELECT k + 1 AS j FROM t WHERE k IS NULL"[w.start:w.end]
('OPERATOR_IS_NULL', 31, 40, 'k IS NULL')
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import os
import threading
from collections import OrderedDict, defaultdict, namedtuple
from collections.abc import Iterator
from dataclasses import dataclass

from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.tokens import CACHED_CHARS, require_text, short_text_cache, tokenize

__all__ = ["Expression", "Literal", "Modifier", "Order", "Parens", "Query", "Table", "Window", "char_offsets",
           "check_expression",
           "fast_constructor",
           "clear_trees", "duckdb_parses", "negation", "parse_tree", "prefetch_expressions", "prefetch_trees", "read_tree",
           "require_expression", "select_recipe"]

#: DuckDB's "no position" (``optional_idx`` invalid).
_NO_POSITION = (1 << 64) - 1
#: The query node types (``QueryNodeType``).
_QUERY_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE",
                          "BOUND_SUBQUERY_NODE", "STATEMENT_NODE"})


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant as written: DuckDB's literal ``kind`` (``INTEGER``, ``NUMERIC``, ``STRING``,
    ``BOOLEAN``, ``NULL_LITERAL``, ...) and its ``text`` (``-3``, ``1.5``, ``1e3``, ``a``).

    >>> parse_tree("SELECT -3, 1.5, 'a', true, NULL")[0].items[1].literal
    Literal(kind='NUMERIC', text='1.5')
    >>> [e.literal.value for e in parse_tree("SELECT -3, 1.5, 'a', true, NULL")[0].items]
    [-3, Decimal('1.5'), 'a', True, None]
    """

    kind: str
    text: str

    @property
    def value(self):
        """The constant as a Python value: ``int`` for ``INTEGER``, ``decimal.Decimal`` for
        ``NUMERIC`` (exact, as PostgreSQL reads ``1.5``), ``str`` for ``STRING``, ``bool`` for
        ``BOOLEAN``, ``None`` for ``NULL``; ``ValueError`` for another kind."""
        if self.kind == "INTEGER":
            return int(self.text)
        if self.kind == "NUMERIC":
            import decimal

            return decimal.Decimal(self.text)
        if self.kind == "STRING":
            return self.text
        if self.kind == "BOOLEAN":
            return self.text.lower() in ("true", "t")
        if self.kind == "NULL_LITERAL":
            return None
        raise ValueError(f"a {self.kind} literal has no Python value here: {self.text!r}")


@dataclass(frozen=True, slots=True)
class Order:
    """One ``ORDER BY`` item: ``direction`` ``ASCENDING``, ``DESCENDING`` or ``ORDER_DEFAULT``
    (as written: none); ``nulls`` ``NULLS FIRST``, ``NULLS LAST`` or ``ORDER_DEFAULT``."""

    expression: Expression
    direction: str = "ORDER_DEFAULT"
    nulls: str = "ORDER_DEFAULT"


@dataclass(frozen=True, slots=True)
class Window:
    """A window call's ``OVER`` clause: ``partitions`` (the ``PARTITION BY`` expressions) and
    ``orders`` (its ``ORDER BY`` items), each also among the call's ``children``; the frame's
    bounds as DuckDB names them (``start``, ``end``: ``UNBOUNDED_PRECEDING`` and
    ``CURRENT_ROW_RANGE`` when none is written), its ``exclude`` clause (``NO_OTHER``) and
    ``ignore_nulls``.

    >>> w = parse_tree("SELECT rank() OVER (PARTITION BY g ORDER BY v DESC) FROM t")[0].items[0].over
    >>> [p.name for p in w.partitions], [(o.expression.name, o.direction) for o in w.orders], w.start
    ([('g',)], [(('v',), 'DESCENDING')], 'UNBOUNDED_PRECEDING')
    """

    partitions: tuple[Expression, ...] = ()
    orders: tuple[Order, ...] = ()
    start: str = "UNBOUNDED_PRECEDING"
    end: str = "CURRENT_ROW_RANGE"
    exclude: str = "NO_OTHER"
    ignore_nulls: bool = False


@dataclass(frozen=True, slots=True)
class Expression:
    """An expression node: ``cls``/``type`` are DuckDB's expression class and type.

    ``start``/``end`` span the node and everything under it (``-1`` when unknown);
    ``children`` are its child expressions in DuckDB's order (a function's arguments, a
    comparison's two sides, a ``CASE``'s whens and thens, a cast's operand and type);
    ``name`` is a function's name (``schema``, ``name``) or a column reference's parts;
    ``subquery`` the query of a ``SUBQUERY`` node.

    ``literal`` is a ``CONSTANT``'s value as written (:class:`Literal`). For a ``FUNCTION``:
    ``distinct`` (``count(DISTINCT x)``), ``filter`` (its ``FILTER (WHERE ...)``, also among
    ``children``) and ``order_by`` (``string_agg(x ORDER BY y)``). For a ``STAR``:
    ``relation`` (``t.*``) and ``star_modified`` (an ``EXCLUDE``, ``REPLACE``, ``RENAME`` or
    ``COLUMNS(...)`` applies). For a ``WINDOW``: ``over``, its :class:`Window` (partitions,
    order, frame).
    """

    cls: str
    type: str
    start: int
    end: int
    children: tuple[Expression, ...] = ()
    name: tuple[str, ...] = ()
    alias: str = ""
    subquery: Query | None = None
    literal: Literal | None = None
    distinct: bool = False
    filter: Expression | None = None
    order_by: tuple[Order, ...] = ()
    relation: str = ""
    star_modified: bool = False
    over: Window | None = None

    def walk(self) -> Iterator[Expression]:
        """This node and every expression under it (not inside subqueries), depth first.

        >>> [e.cls for e in parse_tree("SELECT f(a, 1)")[0].items[0].walk()]
        ['FUNCTION', 'COLUMN_REF', 'CONSTANT']
        """
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e.children))


@dataclass(frozen=True, slots=True)
class Table:
    """A table reference: ``type`` is DuckDB's (``BASE_TABLE``, ``JOIN``, ``SUBQUERY``,
    ``TABLE_FUNCTION``, ``EXPRESSION_LIST``, ...); ``name`` a base table's qualified name;
    ``children`` a join's two sides; ``expressions`` a join's condition, a table function's
    call or a ``VALUES`` list's values (by row in ``rows``); ``subquery`` a subquery's query.

    For a ``JOIN``: ``join_type`` is DuckDB's (``INNER``, ``LEFT``, ``RIGHT``, ``FULL``,
    ``SEMI``, ``ANTI``, ...); ``ref_type`` ``REGULAR``, ``CROSS`` (``CROSS JOIN`` and the
    comma), ``NATURAL``, ``ASOF``, ``POSITIONAL``, ...; ``implicit`` for the comma;
    ``using`` the ``USING`` columns. ``column_aliases`` are ``AS t(a, b)``'s names."""

    type: str
    start: int
    end: int
    name: tuple[str, ...] = ()
    alias: str = ""
    children: tuple[Table, ...] = ()
    expressions: tuple[Expression, ...] = ()
    subquery: Query | None = None
    join_type: str = ""
    ref_type: str = ""
    implicit: bool = False
    using: tuple[str, ...] = ()
    column_aliases: tuple[str, ...] = ()
    rows: tuple[tuple[Expression, ...], ...] = ()
    #: A base table read through a ``TABLESAMPLE`` or a time-travel ``AT (...)`` clause.
    modified: bool = False

    @property
    def is_join(self) -> bool:
        """Whether this reference is a join (``children`` its two sides)."""
        return self.type == "JOIN"


@dataclass(frozen=True, slots=True)
class Modifier:
    """A result modifier: ``type`` is ``ORDER_MODIFIER``, ``LIMIT_MODIFIER``,
    ``LIMIT_PERCENT_MODIFIER`` or ``DISTINCT_MODIFIER``; ``expressions`` what it holds.

    ``orders`` are an ``ORDER_MODIFIER``'s items with their direction and NULLs order;
    ``limit`` and ``offset`` a ``LIMIT_MODIFIER``'s (``None`` when absent).

    >>> m = parse_tree("SELECT a FROM t ORDER BY a DESC NULLS FIRST, b LIMIT 3")[0].modifiers
    >>> [(o.direction, o.nulls) for o in m[0].orders], m[1].limit.literal.value, m[1].offset
    ([('DESCENDING', 'NULLS FIRST'), ('ORDER_DEFAULT', 'ORDER_DEFAULT')], 3, None)
    """

    type: str
    expressions: tuple[Expression, ...] = ()
    orders: tuple[Order, ...] = ()
    limit: Expression | None = None
    offset: Expression | None = None


@dataclass(frozen=True, slots=True)
class Query:
    """A query node. ``items`` is the select list; ``from_`` ``None`` when there is no
    ``FROM``; ``children`` a set operation's branches (``setop`` ``UNION``, ``EXCEPT``,
    ``INTERSECT``; ``setop_all`` for ``ALL``, and for a recursive CTE's ``UNION ALL``); ``ctes`` the ``WITH`` list as ``(name, query)``;
    ``sampled`` whether a ``USING SAMPLE`` applies; ``aggregate_handling`` DuckDB's
    (``FORCE_AGGREGATES`` for ``GROUP BY ALL``)."""

    type: str
    items: tuple[Expression, ...] = ()
    from_: Table | None = None
    where: Expression | None = None
    group_by: tuple[Expression, ...] = ()
    having: Expression | None = None
    qualify: Expression | None = None
    modifiers: tuple[Modifier, ...] = ()
    ctes: tuple[tuple[str, Query], ...] = ()
    children: tuple[Query, ...] = ()
    setop: str = ""
    setop_all: bool = False
    sampled: bool = False
    aggregate_handling: str = "STANDARD_HANDLING"
    #: The grouping sets, each as positions in ``group_by`` (one set for a plain
    #: ``GROUP BY``; several for ``ROLLUP``, ``CUBE``, ``GROUPING SETS``).
    grouping_sets: tuple[tuple[int, ...], ...] = ()


def fast_constructor(cls):
    """A constructor of ``cls`` (a frozen, slotted dataclass of this module) about
    four times faster than its own: the frozen ``__init__`` sets each field through
    ``object.__setattr__``; this one fills a twin class of the same slots by plain
    assignment, then makes the object a ``cls`` (same layout: the result is a ``cls``,
    frozen, equal and hashed as one). ``cls`` itself when that cannot be had."""
    fields = dataclasses.fields(cls)
    if tuple(f.name for f in fields) != tuple(cls.__slots__) or any(
            f.default_factory is not dataclasses.MISSING for f in fields):
        return cls
    defaults = {f"_d{k}": f.default for k, f in enumerate(fields) if f.default is not dataclasses.MISSING}
    params = ", ".join(f.name if f.default is dataclasses.MISSING else f"{f.name}=_d{k}" for k, f in enumerate(fields))
    src = f"def __init__(self, {params}):\n" + "".join(f"    self.{f.name} = {f.name}\n" for f in fields)
    src += "    self.__class__ = _cls\n"
    scope = dict(defaults, _cls=cls)
    exec(src, scope)  # noqa: S102 - generated from the dataclass's own field names
    twin = type(f"_{cls.__name__}Maker", (), {"__slots__": cls.__slots__, "__init__": scope["__init__"]})
    try:
        probe = twin(*[f.default if f.default is not dataclasses.MISSING else None for f in fields])
    except TypeError:
        return cls
    return twin if type(probe) is cls else cls


_EXPRESSION = fast_constructor(Expression)
_QUERY = fast_constructor(Query)
_TABLE = fast_constructor(Table)


# ---------------------------------------------------------------------------- reading JSON


def char_offsets(text: str) -> list[int] | None:
    """The character offset of each UTF-8 byte offset of ``text`` (DuckDB's positions are
    bytes); ``None`` for ASCII text, where the two are one."""
    if text.isascii():
        return None
    table = []
    for i, ch in enumerate(text):
        table.extend([i] * len(ch.encode("utf-8")))
    table.append(len(text))
    return table


class Parens:
    """The parentheses of a text, by its tokens' ``starts`` and ``ends`` and the ``(`` and
    ``)`` tokens among them (``parens``: ``(index, "(" or ")")`` in order): what widens a
    node's span to the parentheses written around its children (DuckDB keeps no node for
    them), for DuckDB's JSON here and for colmz's reader of DuckDB's tokens
    (:mod:`colmz.sql.grammar`) alike.

    >>> text = "SELECT ((a)) + 1"; ps = Parens([0, 7, 8, 9, 10, 11, 13, 15], [6, 8, 9, 10, 11, 12, 14, 16],
    ...                                       [(1, "("), (2, "("), (4, ")"), (5, ")")])
    >>> text[slice(*ps.around(9, 10))]
    '((a))'
    """

    __slots__ = ("starts", "ends", "match", "after_open")

    def __init__(self, starts, ends, parens) -> None:
        self.starts, self.ends = starts, ends
        self.match: dict[int, int] = {}  # each "(" token's ")"
        self.after_open: dict[int, int] = {}  # a token's start -> the "(" token just before it
        stack: list[int] = []
        for j, p in parens:
            if p == "(":
                stack.append(j)
                if j + 1 < len(starts):
                    self.after_open[starts[j + 1]] = j
            elif stack:
                self.match[stack.pop()] = j

    def around(self, start: int, end: int) -> tuple[int, int]:
        """``[start, end)`` widened by the parentheses written around it (the token before
        ``start`` a ``(`` whose ``)`` is the first token at or after ``end``)."""
        starts = self.starts
        while (p := self.after_open.get(start)) is not None:
            j = self.match.get(p)
            if j is None or starts[j] < end or (j > 0 and starts[j - 1] >= end):
                break
            start, end = starts[p], self.ends[j]
        return start, end

    def span(self, start: int, end: int, children, window: bool = False) -> tuple[int, int]:
        """A node's span: its own position ``[start, end)`` (``-1`` for none) and its
        ``children``'s spans, each with the parentheses around it -- unless DuckDB places the
        node inside the child's span (``a NOT IN (...)`` is a NOT spanning its IN child): then
        they may be around the node too, and stay out. A ``window`` call's own span is the
        whole call; DuckDB copies a named window's ``PARTITION BY`` and ``ORDER BY`` (``WINDOW
        w AS (...)``) into the call, positioned there: they do not widen it."""
        s, e = start, end
        for c in children:
            if c.start < 0 or window and s >= 0 and (c.start >= e or c.end <= s):
                continue
            cs, ce = self.around(c.start, c.end) if s < 0 or not (c.start <= s and e <= c.end) else (c.start, c.end)
            if start < 0 or cs < start:
                start = cs
            if ce > end:
                end = ce
        return start, end


def _absent_bound(bound: Expression) -> Expression:
    # A slice's bound left out (a[2:], a[:3]) is DuckDB's empty list_value(): the lower one
    # at no position, the upper one at the ':' (one character, which no written list is):
    # both at no position here, so no span is a ':' alone.
    return dataclasses.replace(bound, start=-1, end=-1)


class _Reader:
    """Turns one statement's JSON into nodes; offsets from bytes to characters."""

    def __init__(self, text: str) -> None:
        self.chars = char_offsets(text)
        # The parentheses of the text, as colmz's tokenizer reads it (DuckDB's lexer's reading)
        try:
            toks = tokenize(text)
        except SQLError:  # pragma: no cover - DuckDB parsed what colmz cannot split
            toks = ()
        self.parens = Parens([t.start for t in toks], [t.end for t in toks],
                             [(i, t.text) for i, t in enumerate(toks) if t.kind == "op" and t.text in ("(", ")")])

    def offset(self, b: int) -> int:
        return b if self.chars is None else self.chars[min(b, len(self.chars) - 1)]

    def span(self, node: dict) -> tuple[int, int]:
        loc = node.get("query_location", _NO_POSITION)
        if loc is None or loc == _NO_POSITION:
            return -1, -1
        return self.offset(loc), self.offset(loc + (node.get("query_location_length") or 0))

    def expression(self, node: dict) -> Expression:
        children: list[Expression] = []
        sub: list[Query] = []
        for key, value in node.items():
            if key not in ("class", "type", "alias", "query_location", "query_location_length"):
                self._collect(value, children, sub)
        cls = node["class"]
        if node["type"] == "ARRAY_SLICE":
            children = [_absent_bound(c) if c.name == ("list_value",) and not c.children and c.end - c.start == 1
                        else c for c in children]
        start, end = self.parens.span(*self.span(node), children, window=cls == "WINDOW")
        if cls == "COLUMN_REF":
            name = tuple(node.get("column_names", ()))
        elif "function_name" in node:
            name = tuple(p for p in (node.get("schema", ""), node["function_name"]) if p)
        else:
            name = ()
        extra: dict = {}
        lit = node.get("literal")
        if cls == "CONSTANT" and isinstance(lit, dict) and "kind" in lit:
            extra["literal"] = Literal(str(lit["kind"]), str(lit.get("text", "")))
        if cls == "FUNCTION":
            extra["distinct"] = bool(node.get("distinct"))
            if isinstance(node.get("filter"), dict):
                extra["filter"] = self.expression(node["filter"])
            extra["order_by"] = self.orders(node.get("order_bys"))
        if cls == "WINDOW":
            # DuckDB serializes the partitions, then the order's items, first: the children
            # read above, in that order (the same nodes, not copies)
            n_parts = sum(isinstance(p, dict) for p in node.get("partitions") or ())
            orders = [o for o in node.get("orders") or () if isinstance(o.get("expression"), dict)]
            extra["over"] = Window(tuple(children[:n_parts]),
                                   tuple(Order(c, o.get("type", "ORDER_DEFAULT"), o.get("null_order", "ORDER_DEFAULT"))
                                         for c, o in zip(children[n_parts:n_parts + len(orders)], orders)),
                                   node.get("start", "UNBOUNDED_PRECEDING"), node.get("end", "CURRENT_ROW_RANGE"),
                                   node.get("exclude_clause", "NO_OTHER"), bool(node.get("ignore_nulls")))
        if cls == "STAR":
            extra["relation"] = node.get("relation_name") or ""
            extra["star_modified"] = bool(node.get("exclude_list") or node.get("replace_list")
                                          or node.get("rename_list") or node.get("qualified_exclude_list")
                                          or node.get("columns") or node.get("expr"))
        return Expression(cls, node["type"], start, end, tuple(children), name, node.get("alias", ""),
                          sub[0] if sub else None, **extra)

    def orders(self, modifier) -> tuple[Order, ...]:
        if not isinstance(modifier, dict):
            return ()
        return tuple(Order(self.expression(o["expression"]), o.get("type", "ORDER_DEFAULT"),
                           o.get("null_order", "ORDER_DEFAULT"))
                     for o in modifier.get("orders", ()) if isinstance(o.get("expression"), dict))

    def _collect(self, value, children: list, sub: list) -> None:
        if isinstance(value, dict):
            if "class" in value and "type" in value:
                children.append(self.expression(value))
            elif value.get("type") in _QUERY_NODES:
                sub.append(self.query(value))
            else:
                for v in value.values():
                    self._collect(v, children, sub)
        elif isinstance(value, list):
            for v in value:
                self._collect(v, children, sub)

    def expressions(self, value) -> tuple[Expression, ...]:
        out: list[Expression] = []
        sub: list[Query] = []
        self._collect(value, out, sub)
        return tuple(out)

    def table(self, node: dict | None) -> Table | None:
        if node is None or node.get("type") == "EMPTY":
            return None
        kind = node["type"]
        start, end = self.span(node)
        join: dict = {}
        name: tuple[str, ...] = ()
        children: tuple[Table, ...] = ()
        exprs: tuple[Expression, ...] = ()
        sub = None
        if kind == "BASE_TABLE":
            name = tuple(p for p in (node.get("catalog_name", ""), node.get("schema_name", ""),
                                     node.get("table_name", "")) if p)
        elif kind == "JOIN":
            children = (self.table(node["left"]), self.table(node["right"]))
            exprs = self.expressions(node.get("condition"))
            join = dict(join_type=node.get("join_type", ""), ref_type=node.get("ref_type", ""),
                        implicit=bool(node.get("is_implicit")),
                        using=tuple(node.get("using_columns") or ()))
        elif kind == "SUBQUERY":
            sub = self.query(node["subquery"]["node"])
        elif kind == "TABLE_FUNCTION":
            exprs = self.expressions(node.get("function"))
        elif kind == "EXPRESSION_LIST":
            join = dict(rows=tuple(tuple(self.expression(e) for e in row) for row in node.get("values", ())))
            exprs = tuple(e for row in join["rows"] for e in row)
        else:
            exprs = self.expressions({k: v for k, v in node.items() if k != "sample"})
        return Table(kind, start, end, name, node.get("alias", ""), children, exprs, sub,
                     column_aliases=tuple(node.get("column_name_alias") or ()),
                     modified=kind == "BASE_TABLE" and bool(node.get("sample") or node.get("at_clause")), **join)

    def query(self, node: dict) -> Query:
        kind = node["type"]
        modifiers = tuple(
            Modifier(m["type"], self.expressions({k: v for k, v in m.items() if k != "type"}),
                     self.orders(m) if m["type"] == "ORDER_MODIFIER" else (),
                     self.expression(m["limit"]) if isinstance(m.get("limit"), dict) else None,
                     self.expression(m["offset"]) if isinstance(m.get("offset"), dict) else None)
            for m in node.get("modifiers", ())
        )
        ctes = tuple((c["key"], self.query(c["value"]["query_node"]))
                     for c in node.get("cte_map", {}).get("map", ()))
        if kind == "SELECT_NODE":
            def one(key):
                v = node.get(key)
                return self.expression(v) if v else None

            return Query(
                kind, tuple(self.expression(e) for e in node["select_list"]),
                self.table(node.get("from_table")), one("where_clause"),
                self.expressions(node.get("group_expressions", [])), one("having"), one("qualify"),
                modifiers, ctes, sampled=node.get("sample") is not None,
                aggregate_handling=node.get("aggregate_handling", "STANDARD_HANDLING"),
                grouping_sets=tuple(tuple(g) for g in node.get("group_sets", ())),
            )
        if kind == "SET_OPERATION_NODE":
            branches = node.get("children") or [node["left"], node["right"]]
            return Query(kind, modifiers=modifiers, ctes=ctes,
                         children=tuple(self.query(b) for b in branches),
                         setop=node.get("setop_type", ""), setop_all=bool(node.get("setop_all")))
        # CTE nodes: the query and the (recursive) parts, as branches
        parts = [node[k] for k in ("left", "right", "query", "child") if isinstance(node.get(k), dict)]
        return Query(kind, modifiers=modifiers, ctes=ctes, children=tuple(self.query(p) for p in parts),
                     setop_all=bool(node.get("union_all")))


# ---------------------------------------------------------------------------- DuckDB access

_LOCAL = threading.local()


def _cursor():
    # One connection per thread (a DuckDB connection is not for concurrent use), remade in
    # a forked child, whose DuckDB threads are gone: a database of its own, in memory,
    # without external access, that only ever parses (json_serialize_sql never runs the
    # text). Its optimizer is off: it would fold the serialization of the constant text
    # at plan time, which costs about a third more per text than running it once.
    pid = os.getpid()
    cur = getattr(_LOCAL, "cursor", None)
    if cur is None or _LOCAL.pid != pid:
        from colmz.sql.run import require_duckdb  # run imports the translation, which imports this

        cur = require_duckdb().connect(":memory:", config={"enable_external_access": False})
        cur.execute("PRAGMA disable_optimizer")
        cur.execute("SET lock_configuration = true")
        _LOCAL.cursor, _LOCAL.pid = cur, pid
    return cur


#: ``SELECT json_serialize_sql(?), ...`` for each count of texts serialized at once.
_BATCH: dict[int, str] = {}
#: DuckDB calls made and texts parsed by them (:func:`duckdb_parses`).
_PARSES = [0, 0]


def duckdb_parses() -> tuple[int, int]:
    """How many DuckDB calls colmz made for parse trees, and how many texts they parsed (a
    work counter: a tree found by text or by shape costs none).

    >>> calls, texts = duckdb_parses(); _ = read_tree("SELECT 1"); duckdb_parses() == (calls + 1, texts + 1)
    True
    """
    return _PARSES[0], _PARSES[1]


def _serialized(texts: list[str]) -> list[dict]:
    # One DuckDB call for all of ``texts``: a call costs about as much again as the
    # serialization of a short text.
    n = len(texts)
    sql = _BATCH.get(n)
    if sql is None:
        sql = _BATCH[n] = "SELECT " + ", ".join(["json_serialize_sql(?)"] * n)
    _PARSES[0] += 1
    _PARSES[1] += n
    return [json.loads(r) for r in _cursor().execute(sql, texts).fetchone()]


def _too_deep(text: str) -> UnsupportedSQL:
    # DuckDB nests a chain of binary operators (a || b || ..., a + b + ...) one level per
    # operator; its JSON and this reader recurse per level.
    return UnsupportedSQL(
        f"a text nested deeper than colmz reads DuckDB's parse tree (a chain of some hundred "
        f"|| or + operators nests one level each) is not supported by colmz: {text[:80]!r}"
    )


def _tree(text: str, out: dict) -> tuple[Query, ...]:
    """The tree of ``out``, DuckDB's serialization of ``text``."""
    if out.get("too_deep"):
        raise _too_deep(text)
    try:
        if out.get("error"):
            raise SQLError(out.get("error_message") or "DuckDB cannot parse this text")
        reader = _Reader(text)
        return tuple(reader.query(s["node"]) for s in out["statements"])
    except RecursionError:
        raise _too_deep(text) from None


def _serialized_one(text: str) -> dict:
    try:
        return _serialized([text])[0]
    except RecursionError:  # json.loads of a tree nested too deep
        return {"error": True, "error_message": "", "too_deep": True}


def read_tree(text: str) -> tuple[Query, ...]:
    """DuckDB's parse of ``text`` read afresh: no cache, no shape (:func:`parse_tree`
    is this, remembered).

    >>> read_tree("SELECT 1") == parse_tree("SELECT 1")
    True
    """
    require_text(text, "text")
    return _tree(text, _serialized_one(text))


class _TreeCache:
    """``parse_tree``'s memory: an LRU of trees keyed by text (texts of at most
    :data:`colmz.sql.tokens.CACHED_CHARS` characters), which :func:`prefetch_trees` fills
    several at a time."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.trees: OrderedDict[str, tuple[Query, ...]] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, text: str) -> tuple[Query, ...] | None:
        # No lock on the hit path (what a re-run pays): a dict read is atomic, and a text
        # evicted by another thread meanwhile only misses its move to the end.
        got = self.trees.get(text)
        if got is None:
            self.misses += 1
            return None
        self.hits += 1
        with contextlib.suppress(KeyError):
            self.trees.move_to_end(text)
        return got

    def put(self, text: str, tree: tuple[Query, ...]) -> None:
        if len(text) > CACHED_CHARS:
            return
        with self.lock:
            self.trees[text] = tree
            self.trees.move_to_end(text)
            while len(self.trees) > self.maxsize:
                self.trees.popitem(last=False)

    def cache_info(self):
        return _CacheInfo(self.hits, self.misses, self.maxsize, len(self.trees))

    def cache_clear(self) -> None:
        with self.lock:
            self.trees.clear()
            self.hits = self.misses = 0


_CacheInfo = namedtuple("_CacheInfo", ["hits", "misses", "maxsize", "currsize"])
_TREES = _TreeCache(1024)


def _learned(text: str, shape, out: dict) -> tuple[Query, ...]:
    # The tree of DuckDB's serialization ``out`` of ``text``, remembered with its shape.
    from colmz.sql import shapes

    tree = _tree(text, out)
    if shape is not None:
        shapes.remember(shape, tree, text)
    _TREES.put(text, tree)
    return tree


#: Texts whose tree colmz's reader (:mod:`colmz.sql.grammar`) gave, as DuckDB's; bounded.
_READ_HERE: set[str] = set()
#: Texts colmz wrote whose tree is made from their expressions' trees when asked for
#: (:func:`select_recipe`): text -> (items, table, predicate); bounded.
_RECIPES: dict[str, tuple] = {}


def _read_here(text: str) -> None:
    if len(_READ_HERE) >= 4096:
        _READ_HERE.clear()
    _READ_HERE.add(text)


class _Shifted(dict):
    """Offsets moved by ``delta`` (a known one; -1, unknown, stays), as a mapping for
    :class:`colmz.sql.shapes.Remap`."""

    def __init__(self, delta: int) -> None:
        super().__init__()
        self.delta = delta

    def __missing__(self, offset: int) -> int:
        return offset + self.delta if offset >= 0 else offset


def select_recipe(text: str, items, table: tuple[int, tuple[str, ...], int], predicate: tuple[int, str] | None) -> None:
    """Note how ``text`` -- ``SELECT item, ... FROM table [WHERE (predicate)]``, written by
    colmz (:func:`colmz.sql.build.update_select`, :func:`colmz.sql.build.select_where`) from
    expressions each checked alone (:func:`check_expression`) -- is made, so that its tree,
    if ever asked for, is made from theirs instead of read again.

    ``items`` are ``(offset, expression, end)``: an expression written ``(expression) AS
    "name"`` whose text begins at ``offset`` (``name`` given as ``end``), or a quoted column
    name ``"name"`` from ``offset`` to ``end`` (``expression`` ``None``), or ``*`` (``name``
    ``None``); ``table`` the offset of its first quoted part, the parts and the end of the
    last; ``predicate`` the offset of the predicate's text and that text.

    Each expression's tree is its check's (``SELECT (expression)``: the expression sits
    between the same parentheses, read alike) with its offsets moved; the rest is what
    colmz's reader builds of those tokens. The tree is made only when every check's tree
    was colmz's reader's (DuckDB's own serialization is not remapped), else the text is
    read as any other.

    >>> t = 'SELECT "k", (v || w) AS "v" FROM "t" WHERE (k > 1)'
    >>> require_expression("v || w", "v"); require_expression("k > 1", "p")
    >>> select_recipe(t, [(7, None, 10), (13, "v || w", "v")], (33, ("t",), 36), (44, "k > 1"))
    >>> parse_tree(t) == read_tree(t)
    True
    """
    if len(text) > CACHED_CHARS or text in _TREES.trees:
        return
    if len(_RECIPES) >= 1024:
        _RECIPES.clear()
    _RECIPES[text] = (tuple(items), table, predicate)


def _composed(text: str, items, table, predicate) -> tuple[Query, ...] | None:
    # select_recipe's tree of ``text``, or None when a piece's tree is not the reader's.
    from colmz.sql.grammar import quoted_name
    from colmz.sql.shapes import Remap

    def piece(offset: int, expression: str) -> Expression | None:
        wrapped = f"{_HEAD}{expression})"
        got = _TREES.trees.get(wrapped)
        if got is None or wrapped not in _READ_HERE:
            return None
        # every node copied (no node's highest offset is below 0), offsets moved, literals kept
        return Remap(_Shifted(offset - len(_HEAD)), {}, defaultdict(int), 0).expression(got[0].items[0])

    out = []
    for offset, expression, end in items:
        if expression is None:
            if end is None:  # *
                out.append(_EXPRESSION("STAR", "STAR", offset, offset + 1))
                continue
            name = quoted_name(text[offset:end])
            if name is None:
                return None
            out.append(_EXPRESSION("COLUMN_REF", "COLUMN_REF", offset, end, (), (name,)))
            continue
        e = piece(offset, expression)
        if e is None:
            return None
        out.append(dataclasses.replace(e, alias=end))
    start, parts, end = table
    if any(quoted_name('"' + x.replace('"', '""') + '"') != x for x in parts):  # each part as the reader reads it
        return None
    where = None
    if predicate is not None:
        where = piece(*predicate)
        if where is None:
            return None
    return (_QUERY("SELECT_NODE", tuple(out), _TABLE("BASE_TABLE", start, end, tuple(parts)), where),)


def parse_tree(text: str) -> tuple[Query, ...]:
    """DuckDB's parse of ``text`` (``SELECT`` statements): one :class:`Query` per statement.

    Remembered per text, and per shape (:mod:`colmz.sql.shapes`): a text differing from
    one parsed before only in its literals gets that tree remapped, as DuckDB would give it.

    Raises :class:`colmz.sql.SQLError` with DuckDB's parser message when DuckDB cannot
    parse the text or it holds a statement other than a query, and
    :class:`colmz.sql.UnsupportedSQL` when the tree nests deeper than Python's recursion
    limit lets it be read (some hundred chained ``||`` or ``+``).

    >>> [q.setop for q in parse_tree("SELECT 1 UNION ALL SELECT 2; SELECT 3")]
    ['UNION', '']
    >>> parse_tree("SELECT (1")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: syntax error at or near "1"
    """
    require_text(text, "text")
    got = _TREES.get(text)
    if got is not None:
        return got
    recipe = _RECIPES.get(text)
    if recipe is not None and (got := _composed(text, *recipe)) is not None:
        _read_here(text)  # what the reader gives (see select_recipe)
        _TREES.put(text, got)
        return got
    got, shape = _known(text)
    return got if got is not None else _learned(text, shape, _serialized_one(text))


def _known(text: str) -> tuple[tuple[Query, ...] | None, object]:
    # The tree of ``text`` without DuckDB (colmz's reader's, else its shape's), remembered,
    # or None; and the text's shape.
    from colmz.sql import grammar, shapes

    got = grammar.read_query(text)  # DuckDB's tree read by colmz, or None: DuckDB reads it
    if got is not None:
        _read_here(text)
        _TREES.put(text, got)
        return got, None
    shape = shapes.shape_of(text)
    got = shapes.cached_tree(shape) if shape is not None else None
    if got is not None:
        _TREES.put(text, got)
    return got, shape


parse_tree.cache_info = _TREES.cache_info
parse_tree.cache_clear = _TREES.cache_clear


def prefetch_trees(texts) -> None:
    """Have DuckDB parse, in one call, each of ``texts`` whose tree is not known (by text or
    by shape), so that :func:`parse_tree` of each finds it: a call costs about as much as
    parsing a short text. A text DuckDB cannot parse is left for :func:`parse_tree` to
    refuse.

    >>> prefetch_trees(["SELECT 1 AS a", "SELECT (k + 1)"]); parse_tree("SELECT 1 AS a")[0].items[0].alias
    'a'
    """
    todo: list[tuple[str, object]] = []
    for text in dict.fromkeys(texts):
        require_text(text, "text")
        if len(text) > CACHED_CHARS or text in _TREES.trees:
            continue
        got, shape = _known(text)
        if got is None:
            todo.append((text, shape))
    if len(todo) < 2:
        return  # one text costs the same parsed now or when asked for
    try:
        outs = _serialized([t for t, _ in todo])
    except RecursionError:  # a tree too deep to decode: each is asked for alone
        return
    for (text, shape), out in zip(todo, outs, strict=True):
        with contextlib.suppress(SQLError):  # refused when asked for
            _learned(text, shape, out)


#: The text :func:`check_expression` has DuckDB parse: the expression as one select item.
_HEAD = "SELECT ("


def _outside_tokens(wrapped: str, lo: int, hi: int, start: int, end: int) -> str | None:
    """The first DuckDB token of ``wrapped[lo:hi]`` outside ``[start, end)`` that is not a
    comment or a parenthesis, or ``None``."""
    from colmz.sql.grammar import duckdb_lexed

    kinds, starts, _ = duckdb_lexed(wrapped)
    # (offsets increase: only the tokens in [lo, start) and [end, hi) are visited)
    for a, b in ((lo, start), (end, hi)):
        for j in range(bisect.bisect_left(starts, a), bisect.bisect_left(starts, b)):
            if kinds[j] != "c" and wrapped[starts[j]] not in "()":
                return wrapped[starts[j]:hi][:40]
    return None


@short_text_cache(4096)
def _one_expression(text: str) -> str | None:
    """``None`` when DuckDB reads ``text`` as exactly one expression, else why not."""
    wrapped = f"{_HEAD}{text})"
    try:
        stmts = parse_tree(wrapped)
    except UnsupportedSQL:  # too deep to read: refused as such
        raise
    except SQLError as e:
        if "Only SELECT statements" in str(e):
            return "DuckDB reads a statement other than a query in it"
        return f"DuckDB cannot parse it as one expression ({e})"
    if len(stmts) != 1:
        return f"DuckDB reads {len(stmts)} statements"
    q = stmts[0]
    extra = [name for name, present in (
        ("a set operation", q.type != "SELECT_NODE"), ("FROM", q.from_ is not None),
        ("WHERE", q.where is not None), ("GROUP BY", bool(q.group_by)), ("HAVING", q.having is not None),
        ("QUALIFY", q.qualify is not None), ("ORDER BY, LIMIT or DISTINCT", bool(q.modifiers)),
        ("WITH", bool(q.ctes)), ("USING SAMPLE", q.sampled),
        ("GROUP BY ALL", q.aggregate_handling != "STANDARD_HANDLING"),
    ) if present]
    if extra:
        return f"DuckDB reads {extra[0]} in it"
    if len(q.items) != 1:
        return f"DuckDB reads {len(q.items)} expressions in it"
    item = q.items[0]
    if item.alias:
        return f"DuckDB reads an alias {item.alias!r} in it"
    lo, hi = len(_HEAD), len(_HEAD) + len(text)
    if item.start < lo or item.end > hi:
        return "DuckDB reads an expression reaching outside it"
    stray = _outside_tokens(wrapped, lo, hi, item.start, item.end)
    if stray is not None:
        return f"DuckDB reads {stray!r} outside its one expression"
    return None


def check_expression(text: str, what: str) -> Expression:
    """The expression node of ``text`` when DuckDB reads it as one expression, else
    :class:`colmz.sql.SQLError` naming ``what`` and the text.

    DuckDB parses ``SELECT (<text>)``: one select node, one select item without alias,
    no ``FROM``, ``WHERE``, set operation or any other clause, and nothing of ``text``
    outside the item's span but comments and parentheses, as DuckDB's lexer reads them --
    so what colmz decides is one expression is what DuckDB will run as one.

    >>> check_expression("k IN (SELECT k FROM u) /* ok */", "predicate").cls
    'SUBQUERY'
    >>> check_expression("1=0 /* /* */ ) UNION ALL (SELECT 2 */", "predicate").type  # all a comment
    'COMPARE_EQUAL'
    >>> check_expression("1=0 /* /* */ (( */ ) UNION ALL (SELECT 2 /* /* */ )) */", "predicate")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: predicate: not one expression, DuckDB reads a set operation in it: '1=0 /* /* */ (( */ ) UNION ALL (SELECT 2 /* /* */ )) */'
    """
    require_expression(text, what)
    return parse_tree(f"{_HEAD}{text})")[0].items[0]


#: Texts known to be one expression without a parse of their own (:func:`negation`'s);
#: a bounded set, forgotten by :func:`clear_trees`.
_KNOWN_ONE: set[str] = set()


def require_expression(text: str, what: str) -> None:
    """:func:`check_expression` without the node: :class:`colmz.sql.SQLError` naming
    ``what`` unless DuckDB reads ``text`` as one expression (what a check that keeps only
    the verdict calls: a text known to be one, :func:`negation`'s, is not parsed again).

    >>> require_expression("k > 1", "predicate")
    >>> require_expression("k FROM t", "predicate")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: predicate: not one expression, DuckDB cannot parse it as one expression (syntax error at or near "FROM"): 'k FROM t'
    """
    require_text(text, what)
    if text in _KNOWN_ONE:
        return
    if not text.strip():
        raise SQLError(f"{what}: empty expression")
    why = _one_expression(text)
    if why is not None:
        raise SQLError(f"{what}: not one expression, {why}: {text[:200]!r}")


def negation(text: str, what: str) -> str:
    """``NOT (text)``, ``text`` checked to be one expression (:func:`require_expression`,
    naming ``what``): the negation is then one expression too -- ``text`` sits between the
    same ``(`` and ``)`` as in the check's ``SELECT (text)``, so DuckDB's lexer and parser
    read it alike, and ``NOT`` applies to that parenthesized operand -- so it is known to be
    one without DuckDB parsing it.

    >>> negation("k > 1 /* c */", "predicate")
    'NOT (k > 1 /* c */)'
    >>> negation("1) OR (2", "predicate")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: predicate: not one expression, DuckDB reads an expression reaching outside it: '1) OR (2'
    """
    require_expression(text, what)
    out = f"NOT ({text})"
    if len(_KNOWN_ONE) >= 4096:
        _KNOWN_ONE.clear()
    _KNOWN_ONE.add(out)
    return out


def prefetch_expressions(texts) -> None:
    """Have DuckDB parse, in one call, what :func:`check_expression` of each of ``texts``
    will parse (:func:`prefetch_trees`): a statement's several expressions (an ``UPDATE``'s
    values and predicate) cost one call, not one each.

    >>> prefetch_expressions(["k + 1", "v || '!'"]); check_expression("k + 1", "value").name
    ('+',)
    """
    prefetch_trees([f"{_HEAD}{t})" for t in texts if isinstance(t, str) and t.strip()])


def clear_trees() -> None:
    """Forget every tree read, every shape, every expression checked and the last lexings
    (:func:`colmz.sql.clear_caches`)."""
    from colmz.sql.grammar import duckdb_lexed
    from colmz.sql.shapes import clear_shapes

    parse_tree.cache_clear()
    duckdb_lexed.cache_clear()
    clear_shapes()
    _one_expression.cache_clear()
    _KNOWN_ONE.clear()
    _READ_HERE.clear()
    _RECIPES.clear()
