"""PostgreSQL's float semantics where they hang on a column's type: rules applied to a
translated query once the relations it reads (and so its columns' types) are known.

:func:`colmz.sql.translate.translate` sees text only: a column's type is unknown there, so
``r * 2`` over a ``real`` column or ``f * 2`` over a ``double precision`` one is left as DuckDB
computes it. The catalog knows the schema of every relation a query reads when it runs it;
:func:`float_column_rules` then reads the translated text's tree
(:func:`colmz.sql.tree.parse_tree`) and types its leaves -- a column reference by the
relations' columns of that name, a number literal as exact, a scalar subquery as its column, a cast to a float type by its
target, ``abs``, ``min`` and ``max`` by their argument, ``avg`` of a float as a double, a CASE, ``coalesce``, ``greatest``,
``least`` and ``nullif`` by PostgreSQL's common type of their values -- and applies, as PostgreSQL 15 computes (``src/backend/utils/adt/float.c``):

* **real with an exact number** (``r * 2``, ``r + 1``, ``1 - r``, ``r > 0.1``): PostgreSQL has
  no ``real`` operator with an integer or ``numeric``; it picks ``float48`` (the real widened
  to a double, the result a double). DuckDB computes in single precision (``r + 1`` is
  1.100000023841858, PostgreSQL's 1.1000000014901161; ``r * 2`` of 3.4e38 is Infinity,
  PostgreSQL's 6.8e38). The real operand is cast to ``DOUBLE``.
* **float overflow** (``f * 2`` of 1e308): a maximal ``+ - * /`` subtree of a float type with a
  float column among its leaves raises "value out of range: overflow" (and, of ``*``/``/``
  only, "underflow") where PostgreSQL does, through
  :data:`colmz.sql.transforms.FLOAT_CHECK` -- the check translate already applies to
  visibly float arithmetic and to column pairs; a subtree translate checked is left alone.
* **NaN / 0** is NaN (``float8div``: only a non-NaN dividend raises "division by zero");
  DuckDB raises for every zero divisor: a division of a float dividend is :data:`FLOAT_DIV`.
* **a float with a numeric as text** (``(r / 3.0)::text``, ``(1::float8 / 3.0)::text``):
  translate cannot tell it from a numeric computed as a double, whose text it refuses
  (:data:`colmz.sql.translate.NUMERIC_TEXT`); PostgreSQL's float48 and float8 operators make
  it a double (the numeric read as one), so an operand typed here as a double by PostgreSQL's
  rules (a number with an exponent is a numeric there) is printed as a double is
  (:data:`colmz.sql.translate.FLOAT8_TEXT`).
* **ceil, floor, round, trunc, sign of a real**: PostgreSQL has them of a double (and a
  numeric) only; the real is cast to a double and the result is a double (DuckDB keeps a
  real, and makes ``sign`` an integer). Their two-argument forms of a float do not exist
  in PostgreSQL and are refused by name.
* **a sum of reals** is refused by name (PostgreSQL adds reals in single precision,
  DuckDB in double), as translate refuses a visibly real argument.
* **a float column cast to numeric** keeps 15 (real: 6) significant digits, as
  ``float8_numeric`` (``float4_numeric``) does: ``(f * 3)::numeric = 0.3`` holds for f = 0.1
  (translate's ``x +`` :data:`colmz.sql.transforms.NUMERIC_CAST` of a float operand).

Invariants:

* Where the caller names the relations (``relations``: the catalog's queries and
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
* Otherwise a column reference is typed only when its name is unambiguous: every column of that name in
  the relations read has one kind, and so has every expression the query defines the name
  by -- a select item's alias, an ``AS t(a, b)`` list's name (the subquery's item at its
  position), a set operation's column (each branch's item) -- typed as any expression here,
  recursively through FROM subqueries and CTEs (a name defined by a derived name is typed
  once that one is). A CTE's name, a ``WITH c(a, b)`` list's names and a list naming a
  table's or a star's columns are not typed. Anything not typed is left as it is (DuckDB's
  answer), never guessed.
* A scalar subquery is typed as its one column (a set operation's by PostgreSQL's common
  type); a subquery's own query is rewritten by these rules and its text, so rewritten,
  is what a rule around it splices (an overflow check repeats it as an operand, as it
  repeats any operand); in a grouped query, outside an aggregate's arguments, the overflow and NaN
  rules apply only to a subtree written as a grouped expression (its tokens; a GROUP BY
  position or alias names its select item), so the grouped expression and its select item,
  HAVING or ORDER BY are rewritten alike and DuckDB still matches them, or to arithmetic
  whose every operand reads only grouped expressions, aggregates and constants (``f * 2 ...
  GROUP BY f``: the check repeats its operands, which must be grouped values). Translate
  checks no arithmetic of a grouped query, so there a float cast among the operands
  (``f::float8 * 2``, ``1e300::float8 * 10``) is checked too, in aggregates' arguments as
  well; a query text naming a float type is read even when no float column is. They skip a window's OVER clause (DuckDB refuses a volatile expression in a window's
  ORDER BY, and counts a check volatile); they apply to an aggregate's and a window call's
  arguments (read per row). The widening applies everywhere (it rewrites a grouped
  expression and its select item alike).
* Every runner of a catalog's SQL applies it, with the columns of what it reads: the
  catalog's queries, maintained views' per-row SQL and group recomputes, subscriptions, and
  continual tasks' statements (typed by the input's, references' and output's columns).
* Output names: PostgreSQL sees a select item's name only as a whole ``ORDER BY``,
  ``GROUP BY`` or ``DISTINCT ON`` item; DuckDB also in the select list, ``WHERE``,
  ``HAVING`` and expressions (and subqueries there), where it reads a FROM item's column of
  that level first, then the output name, then enclosing levels' columns. With the
  relations named, a reference seen only as an output name there raises PostgreSQL's
  ``column "x" does not exist``, and one PostgreSQL reads as an enclosing level's column is
  refused (the names are resolved even when no column is a float).
* The rewrite is a pure function of the text and the column names of each float type, cached;
  a text the tree cannot read (not a query) is returned unchanged.
"""

from __future__ import annotations

import functools
import re

from colmz.sql.build import RESERVED_PREFIX, splice
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.tokens import cte_columns_of, cte_definitions, tokenize
from colmz.sql.transforms import (
    FLOAT_CHECK,
    NUMERIC_CAST,
    REAL_WIDEN,
    arith_leaves,
    float_check,
    float_kind,
    is_arith,
    products_only,
    table_refs,
)
from colmz.sql.translate import FLOAT8_TEXT, NUMERIC_TEXT, SUM_ARGUMENT
from colmz.sql.tree import Expression, Query, parse_tree

__all__ = ["FLOAT_COLUMN_MACROS", "FLOAT_DIV", "column_kind", "float_column_rules"]

#: ``x / y`` of a float ``x``: NaN when ``x`` is NaN and ``y`` zero (PostgreSQL's float8div
#: and float4div), else DuckDB's division (which raises on a zero divisor).
FLOAT_DIV = RESERVED_PREFIX + "float_div"

#: The macros the rules call, defined on every colmz connection (:func:`colmz.sql.connect`).
FLOAT_COLUMN_MACROS = (
    f"CREATE OR REPLACE MACRO {FLOAT_DIV}(x, y) AS CASE WHEN isnan(x) AND y = 0 THEN x ELSE x / y END",
)


_COMPARE = frozenset({"COMPARE_EQUAL", "COMPARE_NOTEQUAL", "COMPARE_LESSTHAN", "COMPARE_GREATERTHAN",
                      "COMPARE_LESSTHANOREQUALTO", "COMPARE_GREATERTHANOREQUALTO"})
_EXACT_TYPES = re.compile(r"(int[248]?|integer|bigint|smallint|tinyint|hugeint|numeric|decimal)"
                          r"(\s*\(\s*\d+\s*(,\s*\d+\s*)?\))?")
#: A text that may hold float arithmetic without a float column (``'NaN'::float8 / 0``, a
#: grouped ``1e300::float8 * 10``, a VALUES list of reals).
_FLOAT_WORD = re.compile(r"\b(float[48]?|real|double)\b", re.IGNORECASE)


def float_column_rules(text: str, columns: frozenset[tuple[str, str]],
                       relations: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()) -> str:
    """``text`` (a translated query) with PostgreSQL's float rules applied, given the columns
    of the relations it reads as ``(name, kind)`` pairs: name lower case, kind ``"real"``,
    ``"double"``, ``"exact"`` (an integer or numeric) or ``"other"`` (see :func:`column_kind`).
    ``relations``, when the caller knows them: each relation the text names (by its name in
    the text, lower case) with its own ``(name, kind)`` pairs in its columns' order, so that a
    reference resolves to its relation's column (``t1.x`` a real beside ``t2.x`` a double).

    >>> cols = frozenset({("r", "real"), ("k", "exact")})
    >>> float_column_rules("SELECT r > 2, k * 2 FROM t", cols)
    'SELECT CAST(r AS DOUBLE) > 2, k * 2 FROM t'
    >>> rels = (("a", (("x", "real"),)), ("b", (("x", "double"),)))
    >>> float_column_rules("SELECT a.x + 1, b.x FROM a, b", frozenset({("x", "real"), ("x", "double")}), rels)
    'SELECT __colmz_float_check(CAST(a.x AS DOUBLE) + 1, isfinite(TRY_CAST(a.x AS DOUBLE)), false), b.x FROM a, b'
    """
    floats = any(k in ("real", "double") for _, k in columns) or _FLOAT_WORD.search(text) is not None
    if not floats and not relations:
        return text
    return _rewrite(text, columns, relations, floats)


def column_kind(t) -> str:
    """The kind :func:`float_column_rules` gives a column of Arrow type ``t``.

    >>> import pyarrow as pa
    >>> [column_kind(t) for t in (pa.float32(), pa.float64(), pa.int32(), pa.string())]
    ['real', 'double', 'exact', 'other']
    """
    import pyarrow as pa

    if pa.types.is_float32(t):
        return "real"
    if pa.types.is_float64(t):
        return "double"
    return "exact" if pa.types.is_integer(t) or pa.types.is_decimal(t) else "other"


@functools.lru_cache(maxsize=512)
def _rewrite(text: str, columns: frozenset[tuple[str, str]],
             relations: tuple[tuple[str, tuple[tuple[str, str], ...]], ...], floats: bool) -> str:
    # (without ``floats`` only the names are resolved: an output name where PostgreSQL sees none raises)
    try:
        queries = parse_tree(text)
    except SQLError:  # not a query the tree reads (a refusal is translate's, or DuckDB's)
        return text
    defs: dict[str, list[Expression | None]] = {}
    for q in queries:
        _derived(q, defs)
    for name in _cte_column_lists(text, defs):
        defs.setdefault(name, []).append(None)
    kinds: dict[str, set[str]] = {}
    for name, kind in columns:
        kinds.setdefault(name, set()).add(kind)
    typed = {n: next(iter(k)) for n, k in kinds.items()
             if len(k) == 1 and "other" not in k and n not in defs}
    resolved: dict[tuple[int, int], str] = {}
    if relations or _FLOAT_WORD.search(text):  # (VALUES lists typed by their casts)
        resolver = _Resolver(text, {name: dict(cols) for name, cols in relations}, typed)
        for q in queries:
            resolver.query(q, [], {})
        resolved = resolver.out
    if not floats:
        return text
    _type_derived(text, defs, kinds, typed, resolved)
    rules = _Rules(text, typed, resolved)
    for q in queries:
        rules.query(q, grouped=False)
    return splice(text, sorted(rules.edits))


def _derived(q: Query, out: dict[str, list[Expression | None]]) -> None:
    # every name the query gives a derived column, lower case, with its defining expressions
    # (``None``: not known, as a CTE's name or a list naming a table's columns)
    for name, sub in q.ctes:
        out.setdefault(name.lower(), []).append(None)
        _derived(sub, out)
    for c in q.children:
        _derived(c, out)
    if q.children:  # a set operation's column is named by its first branch, typed by all
        branches = _branch_items(q)
        first = _first_branch(q).items
        known = branches is not None and all(len(b) == len(first) for b in branches)
        for i, e in enumerate(first):
            name = e.alias or (e.name[-1] if e.cls == "COLUMN_REF" and e.name else "")
            if not name:
                continue
            out.setdefault(name.lower(), []).extend((b[i] for b in branches) if known else [None])
    for e in _expressions(q):
        for n in e.walk():
            if n.alias:
                out.setdefault(n.alias.lower(), []).append(n)
            if n.subquery is not None:
                _derived(n.subquery, out)
    for t in table_refs(q):
        if t.column_aliases:
            branches = _branch_items(t.subquery) if t.subquery is not None else None
            known = branches is not None and all(len(b) >= len(t.column_aliases) for b in branches)
            for i, a in enumerate(t.column_aliases):
                out.setdefault(a.lower(), []).extend((b[i] for b in branches) if known else [None])
        if t.subquery is not None:
            _derived(t.subquery, out)


def _branch_items(q: Query) -> list[tuple[Expression, ...]] | None:
    # the select lists of a query's branches (a set operation's every branch), None when one
    # has a star (its columns are not listed)
    if q.children:
        out = []
        for c in q.children:
            b = _branch_items(c)
            if b is None:
                return None
            out.extend(b)
        return out
    if any(n.cls in ("STAR", "COLUMNS") for e in q.items for n in e.walk()):
        return None
    return [q.items]


def _first_branch(q: Query) -> Query:
    return _first_branch(q.children[0]) if q.children else q


def _cte_column_lists(text: str, defs: dict[str, list[Expression | None]]) -> list[str]:
    # ``WITH c(a, b) AS (...)``: the tree does not keep a CTE's column list; the names in it
    # (of a CTE the tree read) are derived and left untyped
    return [n.lower() for name, lists in cte_columns_of(text).items() if name.lower() in defs
            for cols in lists for n in cols]


def _type_derived(text: str, defs: dict[str, list[Expression | None]], kinds: dict[str, set[str]],
                  typed: dict[str, str], resolved: dict[tuple[int, int], str]) -> None:
    # a derived name is typed when every expression defining it (and every relation's column
    # of that name) has one float or exact kind -- recursively: a name defined by another
    # derived name is typed once that one is (a reference to the name itself, ``x AS x``,
    # adds nothing)
    rules = _Rules(text, typed, resolved)
    changed = True
    while changed:
        changed = False
        for name, es in defs.items():
            if name in typed or None in es:
                continue
            got = set(kinds.get(name, ()))
            for e in es:
                if e.cls == "COLUMN_REF" and e.name and e.name[-1].lower() == name:
                    continue
                got.add(rules.kind(e))
            if len(got) == 1 and next(iter(got)) in ("real", "double", "exact"):
                typed[name] = next(iter(got))
                changed = True


#: A FROM item's columns: each name (lower case) with its kind (None: not known); ``None``
#: for an item whose column names are not known here (a table function, VALUES, a star).
Columns = dict[str, str | None] | None
Scope = list[tuple[str, Columns]]


class _Resolver:
    """The kind of each column reference (by its span) that resolves, as PostgreSQL resolves
    names, to one column of a relation of ``rels`` or of a FROM subquery or CTE typed from
    them (the module's first invariant); one left out is typed by its name alone."""

    def __init__(self, text: str, rels: dict[str, dict[str, str]], typed: dict[str, str]) -> None:
        self.rels = rels
        # each CTE name's column lists (``()``: none); a name missing was not read to its
        # body's end, and one with two different lists (two WITHs) is known by name only
        # where its definition is found by its body's place in the text (see column_list)
        self.lists: dict[str, set[tuple[str, ...]]] = {}
        for name, lists in cte_columns_of(text).items():
            self.lists.setdefault(name.lower(), set()).update(lists)
        self.spans = [(name.lower(), start, end, cols) for name, cols, start, end, *_ in cte_definitions(text)]
        self.out: dict[tuple[int, int], str] = {}
        self.rules = _Rules(text, typed, self.out)
        self.hidden: dict[str, int] = {}

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
            return [(name, _common_kind({b[i][1] for b in branches}))
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
                cols = {f"column{i + 1}": _common_kind({self.rules.kind(r[i]) for r in t.rows})
                        for i in range(len(t.rows[0]))}
            elif t.type == "BASE_TABLE" and t.name:
                name = t.name[-1].lower()
                cols = ctes[name] if len(t.name) == 1 and name in ctes else self.rels.get(name)
                if cols is not None and t.column_aliases:  # AS t(a, b): renamed by position
                    cols = _renamed(t.column_aliases, list(cols.items()))
            entries.append(((t.alias or (t.name[-1] if t.name else "")).lower(), cols))
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
            name = e.alias or (e.name[-1] if e.cls == "COLUMN_REF" and e.name else "")
            if not name and named:  # named by PostgreSQL's rules (a function's name, ?column?): not known here
                return None
            out.append((name.lower(), self.rules.kind(e)))
        return out

    def require_column(self, n: Expression, scopes: list[Scope], depth: int) -> None:
        # ``n`` names an output column of the query level ``depth`` deep where PostgreSQL
        # does not see one: a FROM item's column (or FROM item) of its name at that level or
        # inside it is read by both; one only outside it is PostgreSQL's, where DuckDB reads
        # the output name (refused); none is PostgreSQL's error. Not decided where a FROM
        # item's columns are not known.
        name = n.name[0].lower()
        for i, entries in enumerate(scopes):
            if any(cols is None for _, cols in entries):
                return
            if any(qual == name or name in cols for qual, cols in entries):
                if i > len(scopes) - depth:
                    raise UnsupportedSQL(
                        f'a reference to the column "{name}" of an enclosing query from a query naming an output '
                        f'column "{name}" is not supported by colmz (DuckDB reads the output name)')
                return
        written = n.name[0] if self.rules.text[n.start:n.start + 1] == '"' else name
        raise SQLError(f'column "{written}" does not exist')

    def column_list(self, name: str, sub: Query) -> tuple[str, ...] | None:
        # the column list (``()``: none) of the CTE ``name`` whose body is ``sub``: the
        # innermost definition of that name whose body holds ``sub``'s first select item,
        # else the name's one list; None: not known (two lists, a body not read to its end)
        first = _first_branch(sub).items
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
                common = _common_kind({a, b})
                if a is not None and b is not None and common not in (None, a):
                    raise UnsupportedSQL(
                        f'recursive query "{name}" column {i + 1} has type {_PG_NAMES[a]} in non-recursive '
                        f"term but type {_PG_NAMES[common]} overall (an error in PostgreSQL)")
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
        for root in _expressions(q):
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
    if any(_reads(s, name) for _, s in q.ctes) or any(_reads(c, name) for c in q.children):
        return True
    for t in table_refs(q):
        if t.type == "BASE_TABLE" and len(t.name) == 1 and t.name[0].lower() == name:
            return True
        if t.subquery is not None and _reads(t.subquery, name):
            return True
    return any(isinstance(e, Expression) and any(n.subquery is not None and _reads(n.subquery, name) for n in e.walk())
               for e in _expressions(q))


def _common_kind(kinds: set[str | None]) -> str | None:
    # PostgreSQL's common type of values of these kinds (select_common_type: an integer or
    # numeric goes to a real, a real to a double), as DuckDB's VALUES types them too
    if not kinds or not kinds <= {"real", "double", "exact"}:
        return None
    return "double" if "double" in kinds else "real" if "real" in kinds else "exact"


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


def _expressions(q: Query):
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


class _Rules:
    def __init__(self, text: str, typed: dict[str, str], resolved: dict[tuple[int, int], str]) -> None:
        self.text = text
        self.typed = typed
        self.resolved = resolved  # column references resolved to their relation's column
        self.edits: list[tuple[int, int, str]] = []
        self.grouped = False
        self.unchecked = False  # in a grouped query (aggregates' arguments too)
        self.windows = 0  # how many window calls the node being rendered is under
        self.group_keys: frozenset = frozenset()  # the grouped expressions' token keys
        self.rendered: dict[tuple[int, int], str] = {}  # subqueries' texts with their rules

    def key(self, e: Expression) -> tuple:
        # an expression's tokens (words lower case): DuckDB matches a select item against a
        # grouped expression by what it parses to, not by its spacing
        return tuple(t.text.lower() if t.kind == "word" else t.text
                     for t in tokenize(self.text[e.start : e.end]))

    def grouped_keys(self, q: Query) -> frozenset:
        # a GROUP BY's expressions, and the select items a position or an alias groups by
        out = set()
        for g in q.group_by:
            if g.start < 0:
                continue
            item = None
            if g.cls == "CONSTANT" and g.literal is not None and g.literal.kind == "INTEGER" \
                    and g.literal.text.isdigit() and 0 < int(g.literal.text) <= len(q.items):
                item = q.items[int(g.literal.text) - 1]
            elif g.cls == "COLUMN_REF" and len(g.name) == 1:
                item = next((i for i in q.items if i.alias and i.alias.lower() == g.name[0].lower()), None)
            for e in (g,) if item is None else (g, item):
                if e.start >= 0:
                    out.add(self.key(e))
        return frozenset(out)

    def query(self, q: Query, grouped: bool) -> None:
        for _, sub in q.ctes:
            self.query(sub, False)
        for c in q.children:
            self.query(c, False)
        for t in table_refs(q):
            if t.subquery is not None:
                self.query(t.subquery, False)
        self.grouped = bool(q.group_by) or q.aggregate_handling == "FORCE_AGGREGATES"
        self.unchecked = self.grouped  # translate checks no arithmetic of a grouped query
        self.group_keys = self.grouped_keys(q)
        for e in _expressions(q):
            if isinstance(e, Expression):
                self.root(e)

    def root(self, e: Expression) -> None:
        # the edits under ``e``: maximal rewritten nodes (a subquery rendered with its own)
        new = self.render(e, checked=False)
        if new is not None:
            self.edits.append((e.start, e.end, new))

    def subquery(self, e: Expression, texts: dict[int, str]) -> str | None:
        # a subquery node's text with its own query's rules applied and its operand (of IN,
        # ANY) rendered; None: unchanged. Kept for a check repeating it (see leaf_text)
        state = self.grouped, self.group_keys, self.unchecked, self.windows, self.edits
        self.windows, self.edits = 0, []
        self.query(e.subquery, False)
        edits = sorted(self.edits + [(c.start, c.end, texts[id(c)]) for c in e.children if id(c) in texts])
        self.grouped, self.group_keys, self.unchecked, self.windows, self.edits = state
        if not edits:
            return None
        self.rendered[(e.start, e.end)] = out = splice(self.text, edits, e.start, e.end)
        return out

    def leaf_text(self, n: Expression) -> str:
        return self.rendered.get((n.start, n.end), self.text[n.start : n.end])

    # -- types of leaves and subtrees: "real", "double", "exact" or None (not known)
    # ``pg``: PostgreSQL's type rather than DuckDB's (a number with an exponent is a numeric
    # there, a DOUBLE in DuckDB)
    def kind(self, e: Expression, pg: bool = False) -> str | None:
        if e.cls == "COLUMN_REF" and e.name:
            kind = self.resolved.get((e.start, e.end))
            if kind is not None:
                return kind if kind != "other" else None
            return self.typed.get(e.name[-1].lower())
        if e.cls == "CONSTANT" and e.literal is not None:
            if e.literal.kind == "INTEGER":
                return "exact"
            if e.literal.kind == "NUMERIC":
                return "double" if "e" in e.literal.text.lower() and not pg else "exact"
            return None
        if e.cls == "CAST" and len(e.children) == 2 and e.children[1].start >= 0:
            t = " ".join(self.text[e.children[1].start : e.children[1].end].lower().split())
            return float_kind(t) or ("exact" if _EXACT_TYPES.fullmatch(t) else None)
        if e.cls == "OPERATOR" and e.type == "OPERATOR_COALESCE":
            return self.common(e.children, pg)
        if e.cls == "SUBQUERY" and e.subquery is not None and _scalar(e, self.text):
            # a scalar subquery: its one column's type (a set operation's common type)
            branches = _branch_items(e.subquery)
            if not branches or any(len(b) != 1 for b in branches):
                return None
            return _common_kind({self.kind(b[0], pg) for b in branches})
        if e.cls == "CASE":  # its results: each THEN and the ELSE (an implicit one is NULL)
            return self.common((*e.children[1::2], *(e.children[-1:] if len(e.children) % 2 else ())), pg)
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.filter is None and not e.order_by \
                and e.name[0].lower() in ("greatest", "least", "nullif"):
            return self.common(e.children[:1] if e.name[0].lower() == "nullif" else e.children, pg)
        if e.cls == "WINDOW" and len(e.name) == 1 and e.name[0].lower() in _SAME_TYPE_CALLS \
                and e.filter is None:
            args = _window_arguments(e, [c for c in e.children if c.start >= 0], self.text)
            return self.kind(args[0], pg) if len(args) == 1 else None
        if e.cls == "FUNCTION" and len(e.name) == 1:
            name = e.name[0]
            if name == REAL_WIDEN and len(e.children) == 2:
                k = self.kind(e.children[0], pg)
                return "double" if k == "real" and self.kind(e.children[1], pg) == "exact" else k
            if name in (FLOAT_CHECK, FLOAT_DIV) and e.children:
                return self.kind(e.children[0], pg)
            if _numeric_cast(e, self.text):
                return "exact"
            if name.lower() in _SAME_TYPE_CALLS and len(e.children) == 1 and e.filter is None \
                    and not e.order_by:
                return self.kind(e.children[0], pg)
            if (name.lower() in (*_DOUBLE_CALLS, "avg") and len(e.children) == 1  # (avg of a real: a double)
                    or name == "round_even" and len(e.children) == 2) \
                    and self.kind(e.children[0], pg) in ("real", "double"):
                return "double"  # (round_even(x, 0): translate's round(x) of a float)
            if is_arith(e):
                kinds = [self.kind(c, pg) for c in e.children]
                if None in kinds:
                    return None
                if len(kinds) == 1:
                    return kinds[0]
                if "double" in kinds or ("real" in kinds and "exact" in kinds):
                    return "double"
                return "real" if "real" in kinds else "exact"
        return None

    def common(self, nodes, pg: bool) -> str | None:
        # PostgreSQL's common type of a CASE's, coalesce's, greatest's ... values (a NULL
        # takes any type)
        return _common_kind({self.kind(n, pg) for n in nodes if not (
            n.cls == "CONSTANT" and n.literal is not None and n.literal.kind == "NULL_LITERAL")})

    def _float_column_under(self, e: Expression) -> bool:
        # a float column among the operands, or a value typed here by one (``abs(f)``,
        # ``max(f)``, ``coalesce(r, 0)``, a CASE): translate, not knowing the column's
        # type, left them as DuckDB computes
        return any(self.kind(n) in ("real", "double") and (
            n.cls in ("COLUMN_REF", "CASE", "SUBQUERY") or (n.cls == "OPERATOR" and n.type == "OPERATOR_COALESCE")
            or (n.cls in ("FUNCTION", "WINDOW") and len(n.name) == 1
                and n.name[0].lower() in (*_SAME_TYPE_CALLS, *_DOUBLE_CALLS, "greatest", "least", "nullif")))
            for n in _leaves(e))

    def checks(self, e: Expression) -> bool:
        # whether the arithmetic subtree ``e`` (if maximal) gets the overflow check here
        # in a grouped query, outside an aggregate, only a grouped expression (and each select
        # item, HAVING or ORDER BY expression written as one) or arithmetic over grouped
        # values is checked: DuckDB matches the checked texts alike, where a check
        # repeating an operand that is not a grouped value would read ungrouped leaves
        # (translate checks visibly float arithmetic, ``f::float8 * 2``, outside grouped
        # queries only: a float cast among the operands counts there)
        return self.per_group(e) and not self.windows and self.kind(e) in ("real", "double") and (
            self._float_column_under(e)
            or (self.unchecked and any(self.kind(n) in ("real", "double") for n in _leaves(e))))

    def per_group(self, e: Expression) -> bool:
        # whether a rule may rewrite the arithmetic ``e`` (repeating its operands) here:
        # outside a grouped query, or as a grouped expression, or with every operand a
        # grouped value (``f * 2 ... GROUP BY f``)
        return not self.grouped or self.key(e) in self.group_keys \
            or all(self.grouped_value(n) for n in _leaves(e))

    def grouped_value(self, n: Expression) -> bool:
        # whether ``n`` reads only grouped expressions, aggregates and constants
        if n.start >= 0 and self.key(n) in self.group_keys:
            return True
        if n.subquery is not None or n.cls in ("COLUMN_REF", "WINDOW", "STAR", "COLUMNS"):
            return False
        if n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0].lower() in _AGGREGATES:
            return True
        if n.cls == "CAST" and n.children:  # (its second child is the type)
            return self.grouped_value(n.children[0])
        return n.cls == "CONSTANT" or (bool(n.children) and all(self.grouped_value(c) for c in n.children))

    # -- rendering: the node's text with its rewritten descendants; None when unchanged
    def render(self, e: Expression, checked: bool) -> str | None:
        if e.start < 0:
            return None
        kids = [c for c in e.children if c.start >= 0 and c.start >= e.start and c.end <= e.end]
        under_check = e.cls == "FUNCTION" and e.name == (FLOAT_CHECK,)
        # a maximal arithmetic subtree is checked once, at its root (by translate or here)
        arith_checked = is_arith(e) and not _numeric_cast(e, self.text) and (checked or self.checks(e))
        texts = {}
        # a check under a window's OVER clause is left out: DuckDB counts it volatile, which
        # a window's ORDER BY or PARTITION BY may not be; the call's arguments are per row
        args = _window_arguments(e, kids, self.text) if e.cls == "WINDOW" else ()
        # an aggregate's arguments are per row, not matched against the grouped expressions
        grouped = self.grouped
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0].lower() in _AGGREGATES:
            self.grouped = False
        for i, c in enumerate(kids):
            window = e.cls == "WINDOW" and not any(c is a for a in args)
            self.windows += window
            t = self.render(c, checked=(under_check and i == 0) or (arith_checked and is_arith(c)))
            self.windows -= window
            if t is not None:
                texts[id(c)] = t
        self.grouped = grouped
        # (an IN or ANY subquery's own query is rendered here, its operand as a child)
        if e.subquery is not None:
            return self.subquery(e, texts)
        own = self.rule(e, texts, checked)
        if own is not None:
            return own
        if not texts:
            return None
        return self.splice(e, texts)

    def splice(self, e: Expression, texts: dict[int, str]) -> str:
        edits = sorted(((c.start, c.end, texts[id(c)]) for c in e.children if id(c) in texts), key=lambda x: x[0])
        return splice(self.text, edits, e.start, e.end)

    def child_text(self, c: Expression, texts: dict[int, str]) -> str:
        return texts.get(id(c), self.text[c.start : c.end])

    def rule(self, e: Expression, texts: dict[int, str], checked: bool) -> str | None:
        if e.cls in ("FUNCTION", "WINDOW") and e.name == ("sum",):
            args = _window_arguments(e, [c for c in e.children if c.start >= 0], self.text) \
                if e.cls == "WINDOW" else e.children[-1:]
            arg = args[0] if len(args) == 1 else None
            # (through translate's typing of sum's argument, a real as itself, and the checks)
            while arg is not None and arg.cls == "FUNCTION" and len(arg.name) == 1 \
                    and arg.name[0] in (SUM_ARGUMENT, FLOAT_CHECK, FLOAT_DIV) and arg.children:
                arg = arg.children[0]
            if arg is not None and self.kind(arg) == "real" and self._float_column_under(arg):
                # translate refuses a visibly real argument alike (transforms._sum_of_real)
                raise UnsupportedSQL("sum() of a real column is not supported by colmz (PostgreSQL adds "
                                     "in single precision, DuckDB in double): cast the argument to float8")
        if e.cls == "FUNCTION" and e.name == (NUMERIC_TEXT,) and len(e.children) == 1 \
                and e.children[0].start >= 0 and self.kind(e.children[0], pg=True) == "double":
            # translate's text of what may be a numeric computed as a double (refused when it
            # is one): a double here by PostgreSQL's operators (a float with a numeric is
            # float8, ``(1::float8 / 3.0)::text`` is 0.3333333333333333), printed as one
            return f"{FLOAT8_TEXT}({self.child_text(e.children[0], texts)})"
        if _numeric_cast(e, self.text):
            x = e.children[0]
            k = self.kind(x)
            if k in ("real", "double") and self._float_column_under(x):
                digits = 6 if k == "real" else 15
                texts[id(x)] = f"CAST(printf('%.{digits}g', {self.child_text(x, texts)}) AS DOUBLE)"
                return self.splice(e, texts)
            return None
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0].lower() in _DOUBLE_CALLS \
                and e.children and all(c.start >= 0 for c in e.children):
            return self.double_call(e, texts)
        binary = len(e.children) == 2 and all(c.start >= 0 for c in e.children)
        arith = is_arith(e)
        body = None
        if binary and (arith or (e.cls == "COMPARISON" and e.type in _COMPARE)):
            a, b = e.children
            ka, kb = self.kind(a), self.kind(b)
            widen = {id(a): ka == "real" and kb == "exact" and self._float_column_under(a),
                     id(b): kb == "real" and ka == "exact" and self._float_column_under(b)}
            if any(widen.values()):
                for c in (a, b):
                    if widen[id(c)]:
                        texts[id(c)] = f"CAST({self.child_text(c, texts)} AS DOUBLE)"
                body = self.splice(e, texts)
            if arith and e.name[0] in ("/", "//") and ka in ("real", "double") and not self.windows \
                    and self.per_group(e):
                body = f"{FLOAT_DIV}({self.child_text(a, texts)}, {self.child_text(b, texts)})"
        if arith and not checked and self.checks(e):
            leaves = [n for n in _leaves(e) if n.start >= 0]
            inner = body if body is not None else (self.splice(e, texts) if texts else self.text[e.start : e.end])
            return float_check(inner, [self.leaf_text(n) for n in leaves], products_only(e))
        return body


    def double_call(self, e: Expression, texts: dict[int, str]) -> str | None:
        # ceil, floor, round, trunc, sign of a real or a double: PostgreSQL has them of a
        # double only (and of a numeric): a real is cast to a double (float48 from there on),
        # the result is a double (DuckDB keeps a real, and makes sign() an integer). Their
        # two-argument forms exist of a numeric only: PostgreSQL raises for a float
        x = e.children[0]
        k = self.kind(x)
        if k not in ("real", "double"):
            return None
        name = e.name[0].lower()
        if len(e.children) != 1:
            typ = "real" if k == "real" else "double precision"
            raise UnsupportedSQL(f"{name}({typ}, integer) does not exist in PostgreSQL (its two-argument "
                                 f"form takes a numeric): cast the argument to numeric")
        if k == "real":
            texts[id(x)] = f"CAST({self.child_text(x, texts)} AS DOUBLE)"
        call = self.splice(e, texts) if texts else self.text[e.start : e.end]
        if name == "sign":
            return f"CAST({call} AS DOUBLE)"
        return call if texts else None


#: Aggregate functions whose arguments are read per row (the float rules apply there in a
#: grouped query as in any other).
_AGGREGATES = frozenset({
    "sum", "avg", "min", "max", "count", "stddev", "stddev_samp", "stddev_pop", "variance",
    "var_samp", "var_pop", "corr", "covar_samp", "covar_pop", "string_agg", "array_agg",
    "bool_and", "bool_or", "every", "median", "mode", "product", "any_value", "arg_min",
    "arg_max", "first", "last", "list", "fsum", "sumkahan", "kahan_sum",
})
#: Calls whose result has their argument's type, in PostgreSQL and DuckDB alike (``abs(r)``
#: is a real, ``max(f)`` a double): typed as their argument.
_SAME_TYPE_CALLS = frozenset({"abs", "min", "max"})
#: Calls PostgreSQL has of a double (and a numeric) but not of a real: of a real or a double
#: they are a double (the real cast to one, as PostgreSQL's implicit cast does).
_DOUBLE_CALLS = frozenset({"ceil", "ceiling", "floor", "round", "trunc", "sign"})
_OVER = re.compile(r"\bOVER\b", re.IGNORECASE)


def _window_arguments(e: Expression, kids: list[Expression], text: str) -> tuple[Expression, ...]:
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


def _numeric_cast(e: Expression, text: str) -> bool:
    # translate's ``x + NUMERIC_CAST``: PostgreSQL's ``x::numeric``
    return (e.cls == "FUNCTION" and e.name == ("+",) and len(e.children) == 2
            and text[e.children[1].start : e.children[1].end] == NUMERIC_CAST)


def _leaves(e: Expression) -> list[Expression]:
    # the operands under the arithmetic subtree ``e``, every exact number literal left out
    # (one with an exponent too: it is typed exact here, as PostgreSQL reads it)
    return [n for n in arith_leaves(e) if not (
        n.cls == "CONSTANT" and n.literal is not None and n.literal.kind in ("INTEGER", "NUMERIC"))]


