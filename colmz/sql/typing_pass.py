"""One typing pass over a query's tree: the type of every column reference and expression
node, from the relations' schemas and one type table.

The rules that hang on a column's type (:mod:`colmz.sql.floatcols`, :mod:`colmz.sql.jsonbcols`)
read a translated query's tree (:func:`colmz.sql.tree.parse_tree`) and ask this module what
each node is. Types are PostgreSQL's categories as colmz tells them apart (:data:`TYPE_TABLE`):
``"real"`` (float4), ``"double"`` (float8), ``"exact"`` (an integer or numeric), ``"jsonb"``,
``"json"``, ``"text"``, ``"bool"``, ``"datetime"``; ``"string"`` is a string column of none of
jsonb, json or text known (a view's column colmz cannot type); ``None`` is not known.

* :class:`Resolver`: where the caller names the relations (the catalog's queries and
  subscriptions), a column reference is typed by the column it resolves to as PostgreSQL
  resolves names: a qualified one by its FROM item's alias or name, an unqualified one by
  the innermost query level whose FROM holds the name -- a relation's column, or a FROM
  subquery's or CTE's typed from its select item (a set operation's by PostgreSQL's common
  type of its branches': a real and an integer make a real, a real and a double a double;
  ``AS t(a, b)`` and ``WITH c(a, b)`` rename by position; a recursive CTE's columns are its
  non-recursive term's, which its recursive term reads -- one whose recursive term has
  another float type is refused, as PostgreSQL raises). It is not resolved (and typed as
  below) where a FROM item at its level has columns not known here (a table function, a
  star over several items, a column named by PostgreSQL's rules, a CTE whose column list
  is not found: each CTE's is its definition's, the innermost ``WITH`` item of its name
  whose body holds its first select item), where two FROM items hold the
  name (PostgreSQL's "ambiguous" error; DuckDB raises it too, in PostgreSQL's words through
  :func:`colmz.sql.run.run_query`), or where its query's select list names an output
  column so -- outside the select list, WHERE and HAVING, where a FROM item's column comes
  first (PostgreSQL sees no output name there, DuckDB one only where no column is so named).
  With ``check_names`` it raises PostgreSQL's errors of output names DuckDB would read
  (:meth:`Resolver.require_column`).
* :class:`Typer`: otherwise a column reference is typed only when its name is unambiguous: every column of that name in
  the relations read has one kind, and so has every expression the query defines the name
  by -- a select item's alias, an ``AS t(a, b)`` list's name (the subquery's item at its
  position), a set operation's column (each branch's item) -- typed as any expression here,
  recursively through FROM subqueries and CTEs (a name defined by a derived name is typed
  once that one is). A CTE's name, a ``WITH c(a, b)`` list's names and a list naming a
  table's or a star's columns are not typed. Anything not typed is left as it is (DuckDB's
  answer), never guessed.
  Any other node: a literal, a cast by
  :data:`TYPE_TABLE`, a scalar subquery as its one column, CASE, ``coalesce``, ``greatest``,
  ``least`` and ``nullif`` by PostgreSQL's common type of their values, ``abs``, ``min`` and
  ``max`` by their argument, arithmetic by PostgreSQL's operator resolution over floats.
* :func:`array_columns`: the same resolution over one more kind, ``"array"`` (a value
  visibly an array, or a relation's column the caller names so), for translate's slices and
  ``ARRAY[...]`` of columns (:mod:`colmz.sql.transforms`).

Invariants: typing is a pure function of the text and the relations' column kinds; nothing
is guessed (a node not typed is ``None``, which every rule leaves as DuckDB computes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from colmz.sql.build import RESERVED_PREFIX, splice
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.jsonb import visibly_jsonb
from colmz.sql.tokens import cte_columns_of, cte_definitions
from colmz.sql.transforms import (
    FLOAT_CHECK,
    NUMERIC_CAST,
    REAL_WIDEN,
    TYPE_SPELLINGS,
    all_queries,
    float_kind,
    is_arith,
    is_array,
    table_refs,
)
from colmz.sql.tree import Expression, Query

__all__ = [
    "ArrayTyper", "DOUBLE_CALLS", "FLOAT_DIV", "SAME_TYPE_CALLS", "TYPE_TABLE", "Resolver", "Typer", "array_columns", "branch_items",
    "case_results", "common_array", "common_kind", "cte_list_names", "derived_names", "first_branch", "numeric_cast", "output_name",
    "query_expressions", "ResolvedRules", "TypedText", "outermost_edits",
    "type_kind", "untyped_literal", "window_arguments",
]

#: ``x / y`` of a float ``x``: NaN when ``x`` is NaN and ``y`` zero (PostgreSQL's float8div
#: and float4div), else DuckDB's division (which raises on a zero divisor); typed as ``x``.
FLOAT_DIV = RESERVED_PREFIX + "float_div"

#: The kind of each PostgreSQL type of :data:`colmz.sql.transforms.TYPE_SPELLINGS` typed here
#: (its float types are :func:`colmz.sql.transforms.float_kind`'s).
_KIND_OF_TYPE = {"integer": "exact", "bigint": "exact", "smallint": "exact", "numeric": "exact",
                 "text": "text", "boolean": "bool"}
#: The one type table: a type's name as a cast writes it (lower case, words joined by one
#: space, no modifiers) to its kind -- translate's spellings (:data:`colmz.sql.transforms.TYPE_SPELLINGS`)
#: by their type's kind, and the types only typing reads. Float types (also ``float(p)``) are
#: read by :func:`colmz.sql.transforms.float_kind`. A cast written ``JSON`` (exactly) is how
#: translate writes a jsonb value, and is typed jsonb (:meth:`Typer.kind`); any other ``json``
#: is json, which PostgreSQL keeps as written.
TYPE_TABLE: dict[str, str] = {
    **{word: _KIND_OF_TYPE[t] for word, t in TYPE_SPELLINGS.items() if t in _KIND_OF_TYPE},
    **dict.fromkeys(("tinyint", "hugeint"), "exact"),  # (DuckDB's own integer widths)
    "json": "json",
    "jsonb": "jsonb",
    **dict.fromkeys(("date", "time", "timestamp", "timestamptz", "timestamp with time zone", "interval"),
                    "datetime"),
}
_MODIFIERS = re.compile(r"\s*\(\s*\d+\s*(,\s*\d+\s*)?\)$")
#: The kinds whose common type is PostgreSQL's numeric promotion (an exact with a real is a real).
_NUMBERS = frozenset({"real", "double", "exact"})


def type_kind(type_text: str) -> str | None:
    """The kind of the type a cast names (``type_text`` as written), None when not in
    :data:`TYPE_TABLE`.

    >>> [type_kind(t) for t in ("FLOAT4", "double precision", "numeric(10, 2)", "jsonb", "uuid")]
    ['real', 'double', 'exact', 'jsonb', None]
    """
    t = " ".join(type_text.lower().split())
    kind = float_kind(t)
    if kind is not None:
        return kind
    base = _MODIFIERS.sub("", t)
    # (a modifier on a type that takes none is not a type: untyped)
    return TYPE_TABLE.get(base) if base == t or TYPE_TABLE.get(base) in ("exact", "text") else None


def derived_names(q: Query, out: dict[str, list[Expression | None]]) -> None:
    """Every name ``q`` gives a derived column (lower case) into ``out``, with its defining
    expressions (``None``: not known, as a CTE's name or a list naming a table's columns)."""
    for name, sub in q.ctes:
        out.setdefault(name.lower(), []).append(None)
        derived_names(sub, out)
    for c in q.children:
        derived_names(c, out)
    if q.children:  # a set operation's column is named by its first branch, typed by all
        branches = branch_items(q)
        first = first_branch(q).items
        known = branches is not None and all(len(b) == len(first) for b in branches)
        for i, e in enumerate(first):
            name = output_name(e)
            if not name:
                continue
            out.setdefault(name.lower(), []).extend((b[i] for b in branches) if known else [None])
    for e in query_expressions(q):
        for n in e.walk():
            if n.alias:
                out.setdefault(n.alias.lower(), []).append(n)
            if n.subquery is not None:
                derived_names(n.subquery, out)
    for t in table_refs(q):
        if t.column_aliases:
            branches = branch_items(t.subquery) if t.subquery is not None else None
            known = branches is not None and all(len(b) >= len(t.column_aliases) for b in branches)
            for i, a in enumerate(t.column_aliases):
                out.setdefault(a.lower(), []).extend((b[i] for b in branches) if known else [None])
        if t.subquery is not None:
            derived_names(t.subquery, out)


def branch_items(q: Query) -> list[tuple[Expression, ...]] | None:
    # the select lists of a query's branches (a set operation's every branch), None when one
    # has a star (its columns are not listed)
    if q.children:
        out = []
        for c in q.children:
            b = branch_items(c)
            if b is None:
                return None
            out.extend(b)
        return out
    if any(n.cls in ("STAR", "COLUMNS") for e in q.items for n in e.walk()):
        return None
    return [q.items]


def output_name(e: Expression) -> str:
    """A select item's output name as written: its alias, or a bare column's name; ``""``
    for another item (named by PostgreSQL's rules)."""
    return e.alias or (e.name[-1] if e.cls == "COLUMN_REF" and e.name else "")


def first_branch(q: Query) -> Query:
    return first_branch(q.children[0]) if q.children else q


def cte_list_names(text: str, defs: dict[str, list[Expression | None]]) -> list[str]:
    # ``WITH c(a, b) AS (...)``: the tree does not keep a CTE's column list; the names in it
    # (of a CTE the tree read) are derived and left untyped
    return [n.lower() for name, lists in cte_columns_of(text).items() if name.lower() in defs
            for cols in lists for n in cols]


#: A FROM item's columns: each name (lower case) with its kind (None: not known); ``None``
#: for an item whose column names are not known here (a table function, VALUES, a star).
Columns = dict[str, str | None] | None
Scope = list[tuple[str, Columns]]


class Resolver:
    """The kind of each column reference (by its span) that resolves, as PostgreSQL resolves
    names, to one column of a relation of ``rels`` or of a FROM subquery or CTE typed from
    them (the module's first invariant); one left out is typed by its name alone. ``common``
    is the common type of a set operation's or VALUES column's values (a subclass typing
    otherwise gives its own)."""

    def __init__(self, text: str, rels: dict[str, dict[str, str | None]], typed: dict[str, str],
                 check_names: bool = True) -> None:
        self.rels = rels
        self.check_names = check_names
        # each CTE name's column lists (``()``: none); a name missing was not read to its
        # body's end, and one with two different lists (two WITHs) is known by name only
        # where its definition is found by its body's place in the text (see column_list)
        self.lists: dict[str, set[tuple[str, ...]]] = {}
        for name, lists in cte_columns_of(text).items():
            self.lists.setdefault(name.lower(), set()).update(lists)
        self.spans = [(name.lower(), start, end, cols) for name, cols, start, end, *_ in cte_definitions(text)]
        self.out: dict[tuple[int, int], str] = {}
        #: each FROM item's columns (by the item's span), as the references resolve to them
        self.items: dict[tuple[int, int], Columns] = {}
        self.rules = Typer(text, self.out, typed)
        self.hidden: dict[str, int] = {}
        #: with ``defer``, the first error of PostgreSQL's (an output name, a recursive CTE's
        #: type) is kept here rather than raised, the resolution carried on as without checks
        self.error: SQLError | None = None
        self.defer = False

    def fail(self, error: SQLError) -> None:
        # raise ``error`` (a check of PostgreSQL's failed), or keep the first one (``defer``)
        if not self.defer:
            raise error
        if self.error is None:
            self.error = error

    def numbers(self, kind):
        # the float kind of a column's ``kind`` (what a recursive CTE's check compares)
        return kind

    def query(self, q: Query, outer: list[Scope], ctes: dict[str, Columns],
              named: bool = True) -> list[tuple[str, str | None]] | None:
        # resolves ``q``'s references; returns its output columns in order (None: not known);
        # ``named``: False for a set operation's later branch (its columns' names are the
        # first branch's: an item without one is typed all the same)
        if q.ctes:
            # every CTE of the list is not known until its body is read (a recursive CTE's
            # own reference, a later one's name in WITH RECURSIVE)
            ctes = {**ctes, **{name.lower(): None for name, _ in q.ctes}}
            for name, sub in q.ctes:
                key = name.lower()
                listed = self.column_list(key, sub)
                if sub.type == "RECURSIVE_CTE_NODE" and len(sub.children) == 2 and _reads(sub.children[1], key):
                    ctes[key] = self.recursive(key, listed, sub, outer, ctes)
                else:
                    ctes[key] = self.cte_columns(listed, self.query(sub, outer, ctes, not listed))
        if q.children:
            branches = [self.query(c, outer, ctes, named and i == 0) for i, c in enumerate(q.children)]
            self.expressions(q, [[("", None)], *outer], ctes)  # ORDER BY names output columns
            if any(b is None or len(b) != len(branches[0]) for b in branches):
                return None
            # a column of PostgreSQL's common type of its branches' (a real and an integer: a real)
            return [(name, self.combined({b[i][1] for b in branches}))
                    for i, (name, _) in enumerate(branches[0])]
        entries: Scope = []
        for t in table_refs(q):
            if t.type == "JOIN":
                continue
            cols: Columns = None
            if t.subquery is not None:
                got = self.query(t.subquery, outer, ctes)
                cols = None if got is None else _renamed(t.column_aliases, got)
            elif t.type == "EXPRESSION_LIST" and t.rows and all(len(r) == len(t.rows[0]) for r in t.rows):
                # VALUES: a column of one kind in every row has it (PostgreSQL names them column1, ...)
                cols = {f"column{i + 1}": self.combined({self.rules.kind(r[i]) for r in t.rows})
                        for i in range(len(t.rows[0]))}
            elif t.type == "BASE_TABLE" and t.name:
                name = t.name[-1].lower()
                cols = ctes[name] if len(t.name) == 1 and name in ctes else self.relation(t.name)
                if cols is not None and t.column_aliases:  # AS t(a, b): renamed by position
                    cols = _renamed(t.column_aliases, list(cols.items()))
            entries.append(((t.alias or (t.name[-1] if t.name else "")).lower(), cols))
            self.items[(t.start, t.end)] = cols
        aliases = frozenset(e.alias.lower() for e in q.items if e.alias)
        self.expressions(q, [entries, *outer], ctes, aliases)
        out = []
        for e in q.items:
            if e.cls == "STAR" and not e.star_modified and not e.relation and len(entries) == 1 \
                    and entries[0][1] is not None:
                out.extend(entries[0][1].items())  # ``*`` of one FROM item: its columns
                continue
            if e.cls in ("STAR", "COLUMNS") or any(n.cls in ("STAR", "COLUMNS") for n in e.walk()):
                return None
            name = output_name(e)
            if not name and named:  # named by PostgreSQL's rules (a function's name, ?column?): not known here
                return None
            out.append((name.lower(), self.rules.kind(e)))
        return out

    def relation(self, name: tuple[str, ...]) -> Columns:
        # the columns of the relation a FROM item names (``rels`` names each by its last part)
        return self.rels.get(name[-1].lower())

    def combined(self, kinds: set[str | None]) -> str | None:
        # the kind of a column holding values of ``kinds`` (a set operation's, VALUES')
        return common_kind(kinds)

    def require_column(self, n: Expression, scopes: list[Scope], depth: int) -> None:
        # ``n`` names an output column of the query level ``depth`` deep where PostgreSQL
        # does not see one: a FROM item's column (or FROM item) of its name at that level or
        # inside it is read by both; one only outside it is PostgreSQL's, where DuckDB reads
        # the output name (refused); none is PostgreSQL's error. Not decided where a FROM
        # item's columns are not known.
        if not self.check_names:
            return
        name = n.name[0].lower()
        for i, entries in enumerate(scopes):
            if any(cols is None for _, cols in entries):
                return
            if any(qual == name or name in cols for qual, cols in entries):
                if i > len(scopes) - depth:
                    self.fail(UnsupportedSQL(
                        f'a reference to the column "{name}" of an enclosing query from a query naming an output '
                        f'column "{name}" is not supported by colmz (DuckDB reads the output name)'))
                return
        written = n.name[0] if self.rules.text[n.start:n.start + 1] == '"' else name
        self.fail(SQLError(f'column "{written}" does not exist'))

    def column_list(self, name: str, sub: Query) -> tuple[str, ...] | None:
        # the column list (``()``: none) of the CTE ``name`` whose body is ``sub``: the
        # innermost definition of that name whose body holds ``sub``'s first select item,
        # else the name's one list; None: not known (two lists, a body not read to its end)
        first = first_branch(sub).items
        at = first[0].start if first else -1
        found = [(end - start, cols) for n, start, end, cols in self.spans if n == name and start <= at < end]
        if found:
            return min(found)[1]
        lists = self.lists.get(name)
        return next(iter(lists)) if lists is not None and len(lists) == 1 else None

    @staticmethod
    def cte_columns(names: tuple[str, ...] | None, cols: list[tuple[str, str | None]] | None) -> Columns:
        # a CTE's columns from its body's output columns: ``WITH c(a, b)`` (``names``)
        # renames them by position, as ``AS t(a, b)`` renames a FROM item's (PostgreSQL: a
        # list longer than the body's columns is an error, see translate); a column left
        # unnamed (the body read unnamed, PostgreSQL's name not known here) makes them not known
        if cols is None or names is None or any(not n for n, _ in cols[len(names):]):
            return None
        return _renamed(names, cols)

    def recursive(self, name: str, listed: tuple[str, ...] | None, sub: Query, outer: list[Scope],
                  ctes: dict[str, Columns]) -> Columns:
        # a recursive CTE's columns have its non-recursive term's types (PostgreSQL's
        # analyzeCTE), which its recursive term reads; a recursive term of another float
        # type makes PostgreSQL's common type differ, an error there (DuckDB would answer)
        seed = self.query(sub.children[0], outer, ctes, not listed)
        ctes[name] = self.cte_columns(listed, seed)
        rest = self.query(sub.children[1], outer, ctes, named=False)
        self.expressions(sub, [[("", None)], *outer], ctes)
        if seed is not None and rest is not None and len(rest) == len(seed):
            for i, ((_, a), (_, b)) in enumerate(zip(seed, rest)):
                a, b = self.numbers(a), self.numbers(b)
                common = common_kind({a, b})
                if a is not None and b is not None and common not in (None, a):
                    self.fail(UnsupportedSQL(
                        f'recursive query "{name}" column {i + 1} has type {_PG_NAMES[a]} in non-recursive '
                        f"term but type {_PG_NAMES[common]} overall (an error in PostgreSQL)"))
        return ctes[name]

    def expressions(self, q: Query, scopes: list[Scope], ctes: dict[str, Columns],
                    aliases: frozenset[str] = frozenset()) -> None:
        # in the select list, WHERE and HAVING a FROM item's column comes before an output
        # name (PostgreSQL sees no output name there; DuckDB one only where no column is so
        # named): ``SELECT r + 1 AS r ... GROUP BY r HAVING r > 0.1`` compares the column r
        columns_first = {id(e) for e in (*q.items, q.where, q.having) if e is not None}
        # PostgreSQL sees an output name only as a whole GROUP BY, ORDER BY or DISTINCT ON
        # item; DuckDB also in the select list, WHERE, HAVING, and in expressions and
        # subqueries there: a name seen only so is PostgreSQL's error (require_column)
        named = {(e.start, e.end) for e in q.group_by} | {(e.start, e.end) for m in q.modifiers for e in (
            *(o.expression for o in m.orders), *(m.expressions if m.type == "DISTINCT_MODIFIER" else ()))}
        outside = self.hidden  # enclosing levels' output names, each with its level's depth
        own = {**outside, **dict.fromkeys(aliases, len(scopes))}
        for root in query_expressions(q):
            hidden = outside if (root.start, root.end) in named and root.cls == "COLUMN_REF" else own
            for n in root.walk():
                if n.subquery is not None:
                    self.hidden = hidden
                    self.query(n.subquery, scopes, ctes)
                    self.hidden = outside
                elif n.cls == "COLUMN_REF" and len(n.name) == 1 and n.name[0].lower() in hidden:
                    self.require_column(n, scopes, hidden[n.name[0].lower()])
                if n.cls == "COLUMN_REF" and n.name and n.start >= 0:
                    kind = _lookup(tuple(p.lower() for p in n.name), scopes, aliases, id(root) in columns_first)
                    if kind is not None:
                        self.out[(n.start, n.end)] = kind


_PG_NAMES = {"real": "real", "double": "double precision", "exact": "an exact numeric type"}


def _reads(q: Query, name: str) -> bool:
    # whether ``q`` (its CTEs, branches, FROM items and subqueries too) names the relation
    # ``name`` (lower case) in a FROM: a recursive CTE's term reading the CTE itself
    return any(t.type == "BASE_TABLE" and len(t.name) == 1 and t.name[0].lower() == name
               for d in all_queries(q) for t in table_refs(d))


def common_kind(kinds: set[str | None]) -> str | None:
    # PostgreSQL's common type of values of these kinds (select_common_type: an integer or
    # numeric goes to a real, a real to a double), as DuckDB's VALUES types them too
    if kinds and kinds <= _NUMBERS:
        return "double" if "double" in kinds else "real" if "real" in kinds else "exact"
    return next(iter(kinds)) if len(kinds) == 1 else None  # (a kind of its own: only with itself)


def _named(cols: list[tuple[str, str | None]]) -> dict[str, str | None]:
    # a FROM item's columns by name; a name held twice is not known (PostgreSQL: ambiguous)
    out: dict[str, str | None] = {}
    for name, kind in cols:
        out[name] = None if name in out else kind
    return out


def _renamed(names: tuple[str, ...], cols: list[tuple[str, str | None]]) -> dict[str, str | None] | None:
    # ``cols`` renamed by position by ``AS t(a, b)`` or ``WITH c(a, b)`` (None: a list longer
    # than the columns)
    if len(names) > len(cols):
        return None
    return _named([(a.lower(), k) for a, (_, k) in zip(names, cols)] + cols[len(names):])


def _lookup(name: tuple[str, ...], scopes: list[Scope], aliases: frozenset[str],
            columns_first: bool = False) -> str | None:
    # the kind of the column ``name`` names in ``scopes`` (innermost first), None: not known;
    # an output name of ``aliases`` hides the innermost level's column of that name unless
    # ``columns_first``
    col = name[-1]
    if len(name) > 2:  # a qualified schema, or a struct's field: not read here
        return None
    for entries in scopes:
        if len(name) == 2:
            hits = [cols for qual, cols in entries if qual == name[-2]]
            if not hits:
                continue
            return hits[0].get(col) if len(hits) == 1 and hits[0] is not None else None
        if any(cols is None for _, cols in entries):
            return None
        hits = [cols[col] for _, cols in entries if col in cols]
        if col in aliases and not (columns_first and hits):
            return None
        aliases = frozenset()  # (an outer level's output names are not visible here)
        if hits:  # two: ambiguous, PostgreSQL's error (DuckDB raises its own)
            return hits[0] if len(hits) == 1 else None
    return None


@dataclass
class TypedText:
    """A text's tree with its column references resolved once, as every rule that hangs on a
    column's type reads it (:mod:`colmz.sql.column_rules` builds it): ``resolved`` each
    resolved reference's kind (by its span: a float kind, a string kind, ``"interval"``,
    ``"array"``, ``"other"``), ``pg`` its PostgreSQL type name, ``arrays`` its array kind
    (``"array"``, ``"null"``), ``items`` each FROM item's columns' kinds, ``columns`` each
    query's output columns' PostgreSQL types (by the query's id); ``typed``, ``defs`` and
    ``kinds`` type a reference by its name alone (:class:`Typer`); ``checked``: the names were
    checked as PostgreSQL reads them (the float rules read the resolved kinds only then),
    ``error`` the first such check's error (:meth:`Resolver.fail`)."""

    text: str
    queries: tuple[Query, ...]
    resolved: dict[tuple[int, int], str]
    pg: dict[tuple[int, int], str] = field(default_factory=dict)
    arrays: dict[tuple[int, int], str] = field(default_factory=dict)
    items: dict[tuple[int, int], Columns] = field(default_factory=dict)
    columns: dict[int, list[tuple[str, str | None]]] = field(default_factory=dict)
    typed: dict[str, str] = field(default_factory=dict)
    defs: dict[str, list[Expression | None]] = field(default_factory=dict)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    checked: bool = False
    error: SQLError | None = None


class ResolvedRules:
    """Rules over one text's nodes that rewrite the outermost node each matches
    (:func:`outermost_edits`): ``resolved`` the kinds of its resolved column references (by
    span); :meth:`find` adds ``(start, end, new)`` to ``edits`` for each outermost node
    :meth:`rule` rewrites (a subquery's own query is read on its own), and :meth:`render`
    gives a node's text with the rules applied below it (what a rule writes its operands
    as)."""

    def __init__(self, text: str, resolved: dict[tuple[int, int], str]) -> None:
        self.text = text
        self.resolved = resolved
        self.edits: list[tuple[int, int, str]] = []

    def rule(self, e: Expression) -> str | None:
        raise NotImplementedError

    def kids(self, e: Expression) -> list[Expression]:
        # the nodes below ``e`` the rules read
        return [k for k in e.children if k.start >= 0]

    def render(self, e: Expression, override: dict[int, str] | None = None) -> str:
        # ``e``'s text with every rule below it applied (``override``: given texts of nodes)
        if override and id(e) in override:
            return override[id(e)]
        new = self.rule(e)
        return new if new is not None else self.spliced(e, override)

    def spliced(self, e: Expression, override: dict[int, str] | None = None) -> str:
        # ``e``'s own text around its children's, rendered (a subquery's left as written)
        edits = []
        for k in self.kids(e):
            if k.subquery is None:
                t = self.render(k, override)
                if t != self.text[k.start : k.end]:
                    edits.append((k.start, k.end, t))
        return splice(self.text, sorted(edits), e.start, e.end)

    def find(self, e: Expression) -> None:
        new = self.rule(e)
        if new is not None:
            self.edits.append((e.start, e.end, new))
            return
        for k in self.kids(e):
            if k.subquery is None:
                self.find(k)


def outermost_edits(queries, found: ResolvedRules) -> list[tuple[int, int, str]]:
    """The edits of ``found`` (a :class:`ResolvedRules`) run on every expression root of every
    query of ``queries`` (the tree of its text), in the text's order; an edit inside another's
    span is left out (the outer one rewrote it).

    >>> from colmz.sql.tree import parse_tree
    >>> class Upper(ResolvedRules):
    ...     def rule(self, e):
    ...         if self.resolved.get((e.start, e.end)) == "x":
    ...             return self.text[e.start:e.end].upper()
    >>> text = "SELECT a, b FROM t"
    >>> outermost_edits(parse_tree(text), Upper(text, {(7, 8): "x"}))
    [(7, 8, 'A')]
    """
    for q in queries:
        for d in all_queries(q):
            for root in query_expressions(d):
                found.find(root)
    edits, end = [], -1
    for a, b, new in sorted(found.edits, key=lambda x: (x[0], -x[1])):
        if a >= end:  # (one inside another's span: a subquery's, left as it was)
            edits.append((a, b, new))
            end = b
    return edits


def query_expressions(q: Query):
    # the query's own expression roots (not its CTEs', branches' or FROM subqueries')
    yield from q.items
    for e in (q.where, q.having, q.qualify):
        if e is not None:
            yield e
    yield from q.group_by
    seen = set()
    for m in q.modifiers:
        for e in (*m.expressions, *(o.expression for o in m.orders)):
            if e is not None and (e.start, e.end) not in seen:  # (an order is listed twice)
                seen.add((e.start, e.end))
                yield e
    for t in table_refs(q):
        yield from t.expressions
        for row in t.rows:
            yield from row


#: Calls whose result has their argument's type, in PostgreSQL and DuckDB alike (``abs(r)``
#: is a real, ``max(f)`` a double): typed as their argument.
SAME_TYPE_CALLS = frozenset({"abs", "min", "max"})
#: Calls PostgreSQL has of a double (and a numeric) but not of a real: of a real or a double
#: they are a double (the real cast to one, as PostgreSQL's implicit cast does).
DOUBLE_CALLS = frozenset({"ceil", "ceiling", "floor", "round", "trunc", "sign"})
_OVER = re.compile(r"\bOVER\b", re.IGNORECASE)


def window_arguments(e: Expression, kids: list[Expression], text: str) -> tuple[Expression, ...]:
    # a window call's own arguments: the children before its OVER clause (whose PARTITION BY,
    # ORDER BY and frame expressions come after the last OVER in the call's text)
    over = [m.start() for m in _OVER.finditer(text, e.start, e.end)]
    if not over:
        return ()
    clause = over[-1]
    if e.over is not None:
        firsts = [p.start for p in e.over.partitions] + [o.expression.start for o in e.over.orders]
        firsts = [f for f in firsts if f >= 0]
        if firsts and min(firsts) < clause:  # a named window's copied clause: not read here
            return ()
    return tuple(c for c in kids if c.end <= clause)


def _scalar(e: Expression, text: str) -> bool:
    # a scalar subquery (not EXISTS, ARRAY(...), IN or ANY: those have their own words or an
    # operand)
    return not e.children and text.startswith("(", e.start)


def case_results(e: Expression) -> tuple[Expression, ...]:
    """A CASE node's results: each THEN and the ELSE (an implicit ELSE, NULL, has no node).

    >>> from colmz.sql.tree import parse_tree
    >>> e = parse_tree("SELECT CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END")[0].items[0]
    >>> [c.literal.text for c in case_results(e)]
    ['1', '2', '3']
    """
    return (*e.children[1::2], *(e.children[-1:] if len(e.children) % 2 else ()))


def untyped_literal(e: Expression) -> bool:
    """Whether ``e`` is a literal of unknown type (a string or NULL), which PostgreSQL types
    by the values beside it.

    >>> from colmz.sql.tree import parse_tree
    >>> [untyped_literal(e) for e in parse_tree("SELECT 'x', NULL, 1, 'x'::text")[0].items]
    [True, True, False, False]
    """
    return e.cls == "CONSTANT" and e.literal is not None and e.literal.kind in ("STRING", "NULL_LITERAL")


def numeric_cast(e: Expression, text: str) -> bool:
    # translate's ``x + NUMERIC_CAST``: PostgreSQL's ``x::numeric``
    return (e.cls == "FUNCTION" and e.name == ("+",) and len(e.children) == 2
            and text[e.children[1].start : e.children[1].end] == NUMERIC_CAST)


class Typer:
    """The kind of any expression node of ``text`` (module docstring): ``resolved`` holds the
    resolver's answer by a reference's span, ``typed`` a kind by name (a relation's column
    whose name is of one kind and defines no derived column), ``defs`` the derived names
    (:func:`derived_names`) typed lazily through their definitions with ``kinds`` (every
    relation's kinds of that name); without ``defs`` a derived name is not typed."""

    def __init__(self, text: str, resolved: dict[tuple[int, int], str], typed: dict[str, str],
                 defs: dict[str, list[Expression | None]] | None = None,
                 kinds: dict[str, set[str]] | None = None,
                 items: dict[tuple[int, int], Columns] | None = None) -> None:
        self.text = text
        self.items = items or {}  # FROM items' columns (Resolver.items)
        self.resolved = resolved
        self.typed = dict(typed)
        self.defs = defs or {}
        self.kinds = kinds or {}
        self.busy: set[str] = set()

    def by_name(self, name: str) -> str | None:
        # a derived name is typed when every expression defining it (and every relation's
        # column of that name) has one float or exact kind; one met again while it is being
        # typed (a cycle of definitions) is not typed
        if name in self.typed or name not in self.defs or name in self.busy:
            return self.typed.get(name)
        es = self.defs[name]
        got: set[str | None] = set(self.kinds.get(name, ()))
        if None not in es:
            self.busy.add(name)
            for e in es:
                if not (e.cls == "COLUMN_REF" and e.name and e.name[-1].lower() == name):
                    got.add(self.kind(e))  # (``x AS x`` adds nothing)
            self.busy.discard(name)
        kind = next(iter(got)) if len(got) == 1 and None not in es else None
        if kind not in _NUMBERS:
            kind = None
        if not self.busy:  # (a kind found inside a cycle is not final: not kept)
            self.typed[name] = kind
        return kind

    # -- types of leaves and subtrees: "real", "double", "exact" or None (not known)
    # ``pg``: PostgreSQL's type rather than DuckDB's (a number with an exponent is a numeric
    # there, a DOUBLE in DuckDB)
    def kind(self, e: Expression, pg: bool = False) -> str | None:
        if e.cls == "COLUMN_REF" and e.name:
            kind = self.resolved.get((e.start, e.end))
            if kind is not None:
                return kind if kind != "other" else None
            return self.by_name(e.name[-1].lower())
        if e.cls == "CONSTANT" and e.literal is not None:
            if e.literal.kind == "INTEGER":
                return "exact"
            if e.literal.kind == "NUMERIC":
                return "double" if "e" in e.literal.text.lower() and not pg else "exact"
            return None
        if e.cls == "CAST" and len(e.children) == 2 and e.children[1].start >= 0:
            written = self.text[e.children[1].start : e.children[1].end]
            return "jsonb" if written == "JSON" else type_kind(written)  # (translate's jsonb)
        if e.cls == "OPERATOR" and e.type == "OPERATOR_COALESCE":
            return self.common(e.children, pg)
        if e.cls == "SUBQUERY" and e.subquery is not None and _scalar(e, self.text):
            # a scalar subquery: its one column's type (a set operation's common type)
            branches = branch_items(e.subquery)
            if not branches or any(len(b) != 1 for b in branches):
                return None
            return common_kind({self.kind(b[0], pg) for b in branches})
        if e.cls == "CASE":
            return self.common(case_results(e), pg)
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.filter is None and not e.order_by \
                and e.name[0].lower() in ("greatest", "least", "nullif"):
            return self.common(e.children[:1] if e.name[0].lower() == "nullif" else e.children, pg)
        if e.cls == "WINDOW" and len(e.name) == 1 and e.name[0].lower() in SAME_TYPE_CALLS \
                and e.filter is None:
            args = window_arguments(e, [c for c in e.children if c.start >= 0], self.text)
            return self.kind(args[0], pg) if len(args) == 1 else None
        if e.cls == "FUNCTION" and len(e.name) == 1:
            name = e.name[0]
            if name == REAL_WIDEN and len(e.children) == 2:
                k = self.kind(e.children[0], pg)
                return "double" if k == "real" and self.kind(e.children[1], pg) == "exact" else k
            if name in (FLOAT_CHECK, FLOAT_DIV) and e.children:
                return self.kind(e.children[0], pg)
            if numeric_cast(e, self.text):
                return "exact"
            if name.lower() in SAME_TYPE_CALLS and len(e.children) == 1 and e.filter is None \
                    and not e.order_by:
                return self.kind(e.children[0], pg)
            if (name.lower() in (*DOUBLE_CALLS, "avg") and len(e.children) == 1  # (avg of a real: a double)
                    or name == "round_even" and len(e.children) == 2) \
                    and self.kind(e.children[0], pg) in ("real", "double"):
                return "double"  # (round_even(x, 0): translate's round(x) of a float)
            if is_arith(e):  # the common type, but a real with an exact number is float48's double
                kinds = {self.kind(c, pg) for c in e.children}
                if not kinds <= _NUMBERS:
                    return None
                return "double" if {"real", "exact"} <= kinds else common_kind(kinds)
        # (jsonb by its own look, as the user writes it: ``->``, a jsonb function)
        return "jsonb" if e.start >= 0 and visibly_jsonb(e, self.text) else None

    def common(self, nodes, pg: bool) -> str | None:
        # PostgreSQL's common type of a CASE's, coalesce's, greatest's ... values (a NULL and
        # a string literal, of unknown type, take the others')
        return common_kind({self.kind(n, pg) for n in nodes if not untyped_literal(n)})


def array_columns(stmts, text: str, relations=()) -> frozenset[tuple[int, int]]:
    """The spans of the column references of ``stmts`` (the tree of ``text``) that are a
    slice's subject or an ``ARRAY[...]`` element and resolve (:class:`Resolver`) to a column
    that is visibly an array: of kind ``"array"`` in ``relations`` (each relation's name as
    the text writes it, lower case, qualified ones too, with its every column's ``(name,
    kind)``: what the caller knows of the tables' schemas), or a FROM subquery's, CTE's or
    VALUES' column whose item is one in every branch (written as one, a cast to an array
    type, an array function, such a reference; a ``NULL`` beside arrays is one, as
    PostgreSQL's common type makes it). Only those are known arrays.

    >>> from colmz.sql.tree import parse_tree
    >>> q = "WITH c AS (SELECT ARRAY[1, 2] AS a) SELECT a[2:], c.a[:1] FROM c, people p"
    >>> sorted(array_columns(parse_tree(q), q))
    [(50, 53)]
    >>> q = "SELECT a[2:] FROM t"
    >>> sorted(array_columns(parse_tree(q), q, (("t", (("a", "array"), ("b", None))),)))
    [(7, 8)]
    """
    resolver = _ArrayResolver(text, {name: dict(cols) for name, cols in relations}, {}, check_names=False)
    for q in stmts:
        resolver.query(q, [], {})
    out = set()
    for d in (d for q in stmts for d in all_queries(q)):
        for root in query_expressions(d):
            for n in root.walk():
                subjects = n.children[:1] if n.type == "ARRAY_SLICE" else \
                    n.children if n.type == "ARRAY_CONSTRUCTOR" else ()
                out.update((x.start, x.end) for x in subjects
                           if x.cls == "COLUMN_REF" and resolver.out.get((x.start, x.end)) == "array")
    return frozenset(out)


def common_array(kinds: set[str | None]) -> str | None:
    """The array kind of a column holding values of ``kinds`` (:class:`ArrayTyper`'s): an
    array where every value is one or a NULL.

    >>> common_array({"array", "null"}), common_array({"array", None})
    ('array', None)
    """
    return "array" if kinds - {"null"} == {"array"} else None


class ArrayTyper(Typer):
    """The kinds :func:`array_columns` (and :mod:`colmz.sql.arraycols`) read: ``"array"``
    (visibly one, or a reference resolved to one), ``"null"`` (a NULL literal, which takes an
    array's type beside arrays), else None."""

    def kind(self, e: Expression, pg: bool = False) -> str | None:
        if is_array(e) or (e.cls == "COLUMN_REF" and self.resolved.get((e.start, e.end)) == "array"):
            return "array"
        return "null" if e.literal is not None and e.literal.kind == "NULL_LITERAL" else None


class _ArrayResolver(Resolver):
    # Resolver over the array kinds (relations named as the text writes them, qualified too)
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rules = ArrayTyper(self.rules.text, self.out, {})

    def relation(self, name: tuple[str, ...]) -> Columns:
        return self.rels.get(".".join(name).lower())

    combined = staticmethod(common_array)

