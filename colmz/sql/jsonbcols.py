"""PostgreSQL's jsonb rules that hang on a column's type: applied to a translated query once
the relations it reads (and so which of their string columns are jsonb, json or text) are
known.

colmz keeps a jsonb column as its canonical text (:func:`colmz.sql.jsonb.jsonb_dump`), a
string to DuckDB, so :func:`colmz.sql.translate.translate` cannot tell a jsonb column from a
text one. The catalog knows each relation's column kinds
(:mod:`colmz.catalog.column_kinds`) when it runs a query; :func:`jsonb_edits`, over the tree
read once (:mod:`colmz.sql.column_rules`), for a column reference that resolves to a
relation's column, applies PostgreSQL 15's rules:

* **a comparison of jsonb** (``=``, ``<>``, ``<``, ``>=``, ..., ``IN (...)``, ``BETWEEN``,
  ``IS [NOT] DISTINCT FROM``) with an operand that is jsonb -- a jsonb column, or a value
  translate made jsonb (``CAST(... AS JSON)``: a cast to jsonb, ``->``, a jsonb function):
  every operand compared by :func:`colmz.sql.jsonb.jsonb_key`, PostgreSQL's order and
  equality of jsonb (a number by its value: ``1.0 = 1``, ``10 > 9``; an object by its pairs'
  count, then its pairs), a string literal read as jsonb (not JSON: PostgreSQL's "invalid
  input syntax for type json"). An equality with literals holding no number keeps comparing
  the canonical texts (a value holding a number equals none without). A jsonb compared with
  a text column is PostgreSQL's "operator does not exist".
* **ORDER BY a jsonb value** (a jsonb column, an output column that is one, a set
  operation's): by its jsonb key.
* **DISTINCT, GROUP BY, a set operation without ALL, DISTINCT ON, an aggregate's DISTINCT
  over jsonb**: the values are read through :func:`colmz.sql.jsonb.jsonb_plain`, which
  refuses by name a number written with trailing fractional zeros (``1.0``): PostgreSQL takes
  ``1.0`` and ``1`` for one value and keeps either's text, which colmz cannot choose as it
  does; for the other values text equality is jsonb's.
* **``||`` of a column and a JSON literal** (translate wrote it both ways,
  :data:`colmz.sql.transforms.CONCAT_BY_KIND`): text concatenation for a text column, jsonb
  concatenation for a jsonb one; another is left to be refused when it runs.
* **``jsonb - text`` of a jsonb column** deletes the key (translate leaves ``-`` of a column
  to DuckDB); **a column turned into jsonb** (``to_jsonb``, ``jsonb_agg``, ``jsonb_build_*``,
  which translate writes as :data:`colmz.sql.jsonb.TO_JSONB` of it, refused for text when it
  runs) is itself when jsonb, read as jsonb when json, a JSON string when text.
* **``||`` of two jsonb columns** (translate wrote each operand as its text) is jsonb
  concatenation (:func:`colmz.sql.transforms.jsonb_concat`): objects merged, arrays
  concatenated.
* **a string column of no known kind compared with a string literal** that is not its
  jsonb text (not JSON, or not written as jsonb prints it) is refused by name: as text and as
  jsonb the answers differ.
* **a function of text alone of a jsonb or json value** (a column, a cast, ``->``: ``length``,
  ``octet_length``, ``upper``, ...) raises
  PostgreSQL's "function length(jsonb) does not exist".
* **a text column cast to numeric** (translate's ``x +`` :data:`colmz.sql.transforms.NUMERIC_CAST`,
  which DuckDB does not add to text) is read as PostgreSQL's ``numeric_in`` reads text
  (:data:`colmz.sql.numeric.NUMERIC_IN`: its errors, its value; its text refused where printed);
  **a jsonb column cast to numeric** so reads its number's text (PostgreSQL's "cannot cast
  jsonb string to type numeric" for another value).
* **a jsonb operator over a text column** (``->``, ``->>``, ``#>``, ``#>>``, ``?``, ``?|``,
  ``?&``, ``@>``/``<@``, which translate made calls of the column's text) raises
  PostgreSQL's "operator does not exist: text -> unknown" (:class:`SQLError`).

A maintained view's planner applies the same rules to the expressions it moves into its SQL
segments (whose columns are placeholders): :func:`column_ref_kinds` tells it the kind each
column reference of the view's query resolves to here.

Invariants: a reference is resolved only where it is certain -- in a query whose every FROM
item is one of the named relations or a subquery or CTE whose output columns are known (each
named by its alias or column, of the kind of the column it passes on, jsonb for a jsonb value
it computes, none for another value; a name given twice has none), a qualified reference by
its item's alias or name, an unqualified one when exactly one item holds the name; a
reference elsewhere (a table function's column, an outer query's) is left as translate wrote
it. ORDER BY and GROUP BY names are output columns first (PostgreSQL's rule for ORDER BY). The rewrite is a pure function of the text and the
relations' kinds, cached; a text the tree cannot read is returned unchanged.
"""

from __future__ import annotations

import re

from colmz.sql.build import RESERVED_PREFIX
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.jsonb import (
    JSON_GET,
    JSON_PATH,
    JSONB_CONTAINS,
    JSONB_DELETE,
    JSONB_EXISTS,
    JSONB_KEY,
    JSONB_PATH,
    JSONB_PLAIN,
    JSONB_QUOTE,
    JSONB_SCALAR,
    TO_JSONB,
    jsonb_dump,
    jsonb_load,
)
from colmz.sql.numeric import NUMERIC_IN
from colmz.sql.pgfuncs import LENGTH
from colmz.sql.transforms import (
    CALL_MACROS,
    CONCAT_BY_KIND,
    FLOAT_CAST_MACROS,
    JSONB_CONCAT,
    JSONB_GET,
    JSONB_IN,
    NUMERIC_CAST,
    TYPE_SPELLINGS,
    table_refs,
)
from colmz.sql.translate import ANY_TEXT, INT_MACROS
from colmz.sql.tree import Expression, Query
from colmz.sql.typing_pass import (
    TypedText,
    Typer,
    branch_items,
    case_results,
    common_kind,
    first_branch,
    output_name,
)

__all__ = ["column_ref_kinds", "jsonb_edits", "jsonb_wanted"]

#: Relations as the caller names them: each relation's name in the text (lower case) with its
#: columns' ``(name, kind)`` pairs, kind ``"jsonb"``, ``"json"``, ``"text"``, ``"string"`` (a
#: string column of none of these known: a view's column colmz cannot type) or ``None``.
Relations = tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...]

_STRING_KINDS = frozenset({"jsonb", "json", "text", "string"})
_EQUALITY = frozenset({"COMPARE_EQUAL", "COMPARE_NOTEQUAL", "COMPARE_IN", "COMPARE_NOT_IN"})
_ORDERING = {"COMPARE_LESSTHAN": "<", "COMPARE_GREATERTHAN": ">", "COMPARE_LESSTHANOREQUALTO": "<=",
             "COMPARE_GREATERTHANOREQUALTO": ">="}
#: Comparisons whose operands, jsonb, are compared by :func:`colmz.sql.jsonb.jsonb_key`.
_COMPARING = frozenset({*_EQUALITY, *_ORDERING, "COMPARE_DISTINCT_FROM", "COMPARE_NOT_DISTINCT_FROM",
                        "COMPARE_BETWEEN", "COMPARE_NOT_BETWEEN"})
_OPERATOR_CALLS = frozenset({JSONB_GET, JSONB_PATH, JSONB_EXISTS, JSONB_CONTAINS})
#: PostgreSQL's jsonb operator each call of :data:`_OPERATOR_CALLS` is, by its name and its
#: last argument's text (``->>`` is JSONB_GET's with ``true``; ``""``: any other).
_OPERATOR_WORDS = {(JSONB_GET, ""): "->", (JSONB_GET, "true"): "->>", (JSONB_PATH, ""): "#>",
                   (JSONB_PATH, "true"): "#>>", (JSONB_EXISTS, ""): "?", (JSONB_EXISTS, "any"): "?|",
                   (JSONB_EXISTS, "all"): "?&", (JSONB_CONTAINS, ""): "@>"}
#: Functions of text alone, by their name in translated text, with PostgreSQL's name.
_TEXT_ONLY = {**{f: f for f in ("length", "char_length", "character_length", "md5", "reverse")},
              **{CALL_MACROS[f]: f for f in ("octet_length", "upper", "lower")}, LENGTH: "length"}


def jsonb_wanted(text: str, kinds) -> bool:
    """Whether a rule of this module may apply to ``text`` over relations of column ``kinds``
    (a cheap test: a literal or ``||`` beside a jsonb column, a jsonb call, ...)."""
    lower = text.lower()  # (read once: every catalog query passes this gate)
    jsonb = _JSON_CAST in text or not kinds.isdisjoint(("jsonb", "json")) or "::json" in lower \
        or (not kinds.isdisjoint(("json", "string")) and "'" in text) or JSON_GET in text or JSON_PATH in text \
        or CONCAT_BY_KIND in text or (TO_JSONB in text and not kinds.isdisjoint(("jsonb", "json", "text"))) \
        or ("[" in text and ("text" in kinds or "text" in lower))  # (a subscript of text)
    return jsonb or ("text" in kinds and any(f in text for f in (*_OPERATOR_CALLS, NUMERIC_CAST))) \
        or ("json" in lower and any(f in lower for f in _TEXT_ONLY))


_JSON_CAST = " AS JSON)"  # how translate writes every jsonb value


def column_ref_kinds(text: str, relations: Relations) -> dict[tuple[int, int], str]:
    """The kind of each column reference of ``text`` that this module's rules resolve
    (by its span), the others absent: what a caller that moves the references' expressions
    elsewhere (a maintained view's SQL segments, whose columns are placeholders) needs to
    apply the same rules there. ``text`` is a query as the caller parses it (with the
    relations' own names); one the tree cannot read gives ``{}``.

    >>> rels = (("t", (("k", None), ("s", "text"), ("j", "jsonb"))),)
    >>> sorted(column_ref_kinds("SELECT k, s FROM t WHERE j = '1'", rels).items())
    [((10, 11), 'text'), ((25, 26), 'jsonb')]
    """
    from colmz.sql.column_rules import typed_text

    t = typed_text(text, relations, ("jsonb",))
    if t is None:
        return {}
    found: dict[tuple[int, int], str] = {}
    typer = _typer(t)
    for q in t.queries:
        _query(q, typer, [], found)
    return found


def jsonb_edits(t: TypedText) -> list[tuple[int, int, str]]:
    """The edits of this module's rules over ``t`` (edits of disjoint nodes; insertions at one
    place in the order made)."""
    typer = _typer(t)
    edits: list[tuple[int, int, str]] = []
    for q in t.queries:
        _query(q, typer, edits)
    return sorted(edits, key=lambda x: x[:2])


def _typer(t: TypedText) -> Typer:
    # every node typed (colmz.sql.typing_pass) over the references resolved to the relations'
    # columns (output names' errors are the float rules' to raise)
    return Typer(t.text, t.resolved, {}, items=t.items)


def _query(q: Query, typer: Typer, edits: list, found: dict | None = None, distinct: bool = False) -> None:
    # ``found`` given: the kinds of the references resolved are noted there, no rule applied;
    # ``distinct``: a branch of a set operation without ALL (its rows compared whole)
    text = typer.text
    for _, sub in q.ctes:
        _query(sub, typer, edits, found)
    distinct = distinct or (q.setop in ("UNION", "EXCEPT", "INTERSECT") and not q.setop_all)
    for c in q.children:
        _query(c, typer, edits, found, distinct)
    for t in table_refs(q):
        if t.subquery is not None:
            _query(t.subquery, typer, edits, found)
    roots = [*q.items, *(x for x in (q.where, q.having, q.qualify) if x is not None)]
    roots += [e for t in table_refs(q) if t.type == "JOIN" for e in t.expressions]
    for e in (*roots, *q.group_by, *(e for m in q.modifiers for e in m.expressions)):
        for n in e.walk():
            if n.subquery is not None:
                _query(n.subquery, typer, edits, found)
    if found is None:
        _merged_joins(q, typer)
        for e in roots:
            _expression(e, typer, text, edits)
        _json_grouped(q, typer, text, distinct)
        _order_by(q, typer, text, edits)
        _grouping(q, typer, text, edits)
        if distinct and not q.children:
            _plain_items(q, typer, edits)
        return
    for e in roots:
        stack = [e]
        while stack:  # the references _expression reads: not a subquery's operands
            n = stack.pop()
            kind = _kind(n, typer)
            if kind is not None and n.start >= 0:
                found[(n.start, n.end)] = kind
            if n.subquery is None:
                stack.extend(n.children)


def _merged_joins(q: Query, typer: Typer) -> None:
    # JOIN ... USING and NATURAL JOIN compare the merged columns by DuckDB's equality, of a
    # jsonb column its text's ('1.0' is not '1'): refused by name where one may be jsonb
    for t in table_refs(q):
        if t.type != "JOIN" or not (t.using or t.ref_type == "NATURAL") or len(t.children) != 2:
            continue
        sides = [_side_columns(c, typer) for c in t.children]
        if t.using:
            names = {n.lower() for n in t.using}
        elif all(s is not None for s in sides):
            names = set(sides[0]) & set(sides[1])
        else:  # a side's columns not known: any jsonb column of the other may be merged
            names = {n for s in sides if s is not None for n in s}
        jsonb = sorted(n for n in names if any(s is not None and s.get(n) == "jsonb" for s in sides))
        if jsonb:
            how = "JOIN ... USING" if t.using else "NATURAL JOIN"
            raise UnsupportedSQL(f'{how} merging the jsonb column "{jsonb[0]}" is not supported by colmz (PostgreSQL '
                                 "compares jsonb values, 1.0 equal to 1; colmz would compare their texts): join ON "
                                 "an equality of the columns")


def _side_columns(t, typer: Typer) -> dict | None:
    # a join side's columns by name with their kinds (a nested join's: both sides'), None
    # when not known
    if t.type != "JOIN":
        return typer.items.get((t.start, t.end))
    sides = [_side_columns(c, typer) for c in t.children]
    return None if any(s is None for s in sides) else {k: v for s in sides for k, v in s.items()}


def _set_outputs(q: Query, typer: Typer) -> dict:
    # a set operation's columns: its first branch's names, a kind where every branch's agrees
    branches = branch_items(q) or []
    if len({len(b) for b in branches}) != 1:
        return {}
    return {output_name(e).lower(): common_kind({typer.kind(b[i]) for b in branches})
            for i, e in enumerate(branches[0])}


def _kind(n: Expression, typer: Typer) -> str | None:
    # the kind of the column reference ``n`` resolves to (of the relations' string kinds),
    # None when not certain
    kind = typer.resolved.get((n.start, n.end)) if n.cls == "COLUMN_REF" and n.name else None
    return kind if kind in _STRING_KINDS else None


def _column(n: Expression, scope) -> str | None:
    # the kind of ``n`` when it is a column reference, or translate's text of one
    # (``__colmz_text(j)``, ``CAST(j AS VARCHAR)``)
    if (n.cls == "FUNCTION" and n.name == (ANY_TEXT,) and len(n.children) == 1) or \
            (n.cls == "CAST" and len(n.children) == 2):
        n = n.children[0]
    return _kind(n, scope)


def _string(n: Expression) -> str | None:
    return n.literal.text if n.literal is not None and n.literal.kind == "STRING" else None


def _null(n: Expression) -> bool:
    return n.literal is not None and n.literal.kind == "NULL_LITERAL"


def _canonical(value: str) -> bool:
    # whether a string literal is the jsonb text of its value (text and jsonb compare alike)
    try:
        return jsonb_dump(jsonb_load(value)) == value
    except ValueError:
        return False


def _literal_value(value: str):
    # a string literal read as jsonb (PostgreSQL's error for one that is not JSON)
    try:
        return jsonb_load(value)
    except ValueError:
        raise SQLError(f'invalid input syntax for type json: "{value}"') from None


def _jsonb_literal(value: str) -> str:
    # a string literal as the text of its jsonb value
    return "'" + jsonb_dump(_literal_value(value)).replace("'", "''") + "'"


def _json_kind(n: Expression, scope) -> str | None:
    # "jsonb" or "json" when ``n`` is certainly one: a jsonb value (a jsonb column, a value
    # translate made jsonb, a CASE or coalesce of jsonb values, a scalar subquery of one:
    # colmz.sql.typing_pass), a json column, or a cast to json (which translate leaves as
    # written); None otherwise
    kind = scope.kind(n)
    return kind if kind == "jsonb" or (kind == "json" and n.cls in ("COLUMN_REF", "CAST")) else None


def _json_doc(n: Expression, scope, text: str, argument: bool = False) -> bool:
    # Whether ``n`` is certainly json (not jsonb): a json column, a cast to json, or json's
    # -> of one (JSON_GET, JSON_PATH, or JSONB_GET, JSONB_PATH of a json document, which the
    # rules make JSON_GET, JSON_PATH); ``argument``: n is such a call's document (translate's
    # CAST(x AS VARCHAR) around x)
    while n.cls == "CAST" and len(n.children) == 2 and n.children[1].start >= 0 \
            and text[n.children[1].start:n.children[1].end] in (("VARCHAR", "JSON") if argument else ("JSON",)):
        n = n.children[0]
    if _json_kind(n, scope) == "json":
        return True
    kids = n.children
    if n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0] in _JSON_READS and kids \
            and kids[-1].literal is not None and kids[-1].literal.text.lower() == "false":
        return n.name[0] in (JSON_GET, JSON_PATH) or _json_doc(kids[0], scope, text, True)
    return False


def _scalar_target(n: Expression, text: str) -> str | None:
    # PostgreSQL's name of the number or boolean type ``n`` casts to (translate's cast, its
    # integer and float macros), None for another node
    kids = n.children
    if n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0] in _INT_CASTS and len(kids) == 1:
        return _INT_CASTS[n.name[0]]
    if n.cls == "CAST" and len(kids) == 2 and kids[1].start >= 0:
        typ = " ".join(text[kids[1].start:kids[1].end].lower().split())
        return _SCALAR_TYPES.get(typ)
    return None


#: The number and boolean types by their spellings (:data:`colmz.sql.transforms.TYPE_SPELLINGS`).
_SCALAR_TYPES = {w: t for w, t in TYPE_SPELLINGS.items() if t not in ("text", "numeric")}


def _float_read(n: Expression) -> Expression:
    # the value translate's cast to a float type reads (its FLOAT_CAST_MACROS call around it)
    if n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0] in _FLOAT_READS and len(n.children) == 1:
        return n.children[0]
    return n


_FLOAT_READS = frozenset(FLOAT_CAST_MACROS.values())
#: translate's casts to an integer type (its macros), by PostgreSQL's name of the type.
_INT_CASTS = {macro: name for name, macro in INT_MACROS.items()}
#: The types PostgreSQL casts json to (as translate writes them).
_JSON_CASTS = frozenset({"VARCHAR", "TEXT", "JSON", "JSONB", '"VARCHAR"'})
#: The calls of ``->``/``#>`` (``->>``/``#>>`` with a last argument true), jsonb's and json's.
_JSON_READS = frozenset({JSONB_GET, JSONB_PATH, JSON_GET, JSON_PATH})


def _has_number(v) -> bool:
    if isinstance(v, dict):
        return any(_has_number(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_number(x) for x in v)
    return not (v is None or isinstance(v, (str, bool)))


def _constant_doc(n: Expression):
    # the value of CAST('...' AS JSON) (translate's jsonb literal), else None
    if n.cls == "CAST" and len(n.children) == 2 and _string(n.children[0]) is not None:
        try:
            return jsonb_load(_string(n.children[0]))
        except ValueError:
            return None
    return None


def _keyed(n: Expression, edits: list) -> None:
    # ``n`` (jsonb, or NULL) compared by its jsonb_key: the key's call around it
    edits.append((n.start, n.start, f"{JSONB_KEY}(CAST("))
    edits.append((n.end, n.end, " AS VARCHAR))"))


def _compare_jsonb(n: Expression, scope, edits: list) -> bool:
    # A comparison with a jsonb operand (jsonb_key's module docstring): every operand compared
    # by its jsonb key (a string literal read as jsonb), unless it is an equality with string
    # literals holding no number (their jsonb text then compares as the jsonb does: a value
    # holding a number equals no value without one). True when taken.
    kids = n.children
    if not any(scope.kind(k) == "jsonb" for k in kids):
        return False
    literals = [k for k in kids if _string(k) is not None]
    if any(k.start < 0 for k in kids):
        raise UnsupportedSQL("a comparison of jsonb whose operands colmz cannot place is not supported by colmz")
    for k in kids:
        if _column(k, scope) == "text" and _string(k) is None:
            raise SQLError("operator does not exist: jsonb = text" if n.type in _EQUALITY
                           else f"operator does not exist: jsonb {_ORDERING.get(n.type, '=')} text")
    values = {id(k): _literal_value(_string(k)) for k in literals}
    # text equality is jsonb's when every operand but one is a literal holding no number
    unknown = [k for k in kids if not _null(k) and _string(k) is None and _constant_doc(k) is None]
    constants = [v for v in (*values.values(), *(_constant_doc(k) for k in kids)) if v is not None]
    plain = n.type in _EQUALITY and len(unknown) <= 1 and not any(_has_number(v) for v in constants)
    for k in kids:
        if id(k) in values:
            new = _jsonb_literal(_string(k))
            edits.append((k.start, k.end, new if plain else f"{JSONB_KEY}({new})"))
        elif not plain and not _null(k):
            _keyed(k, edits)
    return True


def _output_item(n: Expression, items) -> Expression | None:
    # the select item an ORDER BY expression names (by position or output name), if any
    if n.literal is not None and n.literal.kind == "INTEGER":
        i = int(n.literal.text)
        return items[i - 1] if 0 < i <= len(items) else None
    if n.cls == "COLUMN_REF" and len(n.name) == 1:
        name = n.name[0].lower()
        named = [x for x in items if output_name(x).lower() == name]
        return named[0] if len(named) == 1 else None
    return None


def _order_by(q: Query, scope, text: str, edits: list) -> None:
    # ORDER BY a jsonb value: by its jsonb key (PostgreSQL's order of jsonb, not its text's)
    items = first_branch(q).items  # (a set operation's columns are its first branch's)
    outputs = _set_outputs(q, scope) if q.children else {}
    for m in q.modifiers:
        if m.type != "ORDER_MODIFIER":
            continue
        for e in m.expressions:
            if e.start < 0:
                continue
            if q.children:  # a set operation's column, by name or position
                kinds = list(outputs.values())
                if e.literal is not None and e.literal.kind == "INTEGER":
                    k = int(e.literal.text)
                    if 0 < k <= len(kinds) and kinds[k - 1] == "jsonb":
                        raise UnsupportedSQL("ORDER BY the position of a jsonb column is not supported by colmz "
                                             "here: order by its name")
                elif e.cls == "COLUMN_REF" and len(e.name) == 1 and outputs.get(e.name[0].lower()) == "jsonb":
                    _keyed(e, edits)
                continue
            item = _output_item(e, items)
            if item is not None and item is not e and item.start >= 0:
                jsonb = scope.kind(item) == "jsonb"
                if jsonb and e.literal is not None:
                    # by position: the item's expression (as it is written: no rule edits it)
                    if any(item.start <= x[0] and x[1] <= item.end for x in edits):
                        raise UnsupportedSQL("ORDER BY the position of a jsonb column is not supported by colmz "
                                             "here: order by its name or expression")
                    edits.append((e.start, e.end, f"{JSONB_KEY}(CAST({text[item.start:item.end]} AS VARCHAR))"))
                    continue
            else:
                jsonb = scope.kind(e) == "jsonb"
            if jsonb:
                _keyed(e, edits)


def _plain_value(n: Expression, edits: list, name: str = "") -> None:
    # ``n`` (jsonb) read through jsonb_plain (named ``name`` when it is a select item that
    # was a bare column); once
    if n.cls == "CAST":  # CAST(... AS JSON): jsonb as translate writes it
        opening, closing = f"CAST({JSONB_PLAIN}(CAST(", " AS VARCHAR)) AS JSON)"
    else:  # a jsonb column (text to DuckDB)
        opening, closing = f"{JSONB_PLAIN}(", ")" + (' AS "' + name.replace('"', '""') + '"' if name else "")
    if (n.start, n.start, opening) not in edits:
        edits += [(n.start, n.start, opening), (n.end, n.end, closing)]


def _plain_items(q: Query, scope, edits: list) -> None:
    # the jsonb select items of ``q`` read through jsonb_plain
    for it in q.items:
        if it.start >= 0 and scope.kind(it) == "jsonb":
            _plain_value(it, edits, it.name[-1] if it.cls == "COLUMN_REF" and not it.alias else "")


def _json_grouped(q: Query, scope, text: str, distinct: bool) -> None:
    # DISTINCT, GROUP BY (``distinct``: a set operation without ALL) or ORDER BY of json (not
    # jsonb): PostgreSQL's json has no equality and no order
    keys = [*q.group_by]
    for m in q.modifiers:
        if m.type == "DISTINCT_MODIFIER":
            keys += m.expressions or q.items
        elif m.type == "ORDER_MODIFIER":
            for e in m.expressions:
                item = _output_item(e, q.items)
                if _json_doc(item if item is not None and item.start >= 0 else e, scope, text):
                    raise SQLError("could not identify an ordering operator for type json")
    if distinct and not q.children:
        keys += q.items
    if any(e.start >= 0 and _json_doc(e, scope, text) for e in keys):
        raise SQLError("could not identify an equality operator for type json")


def _grouping(q: Query, scope, text: str, edits: list) -> None:
    # DISTINCT, DISTINCT ON, GROUP BY, a set operation without ALL and an aggregate's DISTINCT
    # over jsonb: its values read through jsonb_plain, which refuses a number whose text is not
    # the only one of its value (1.0): for the others, text equality is jsonb's
    for m in q.modifiers:
        if m.type != "DISTINCT_MODIFIER":
            continue
        if not m.expressions:
            _plain_items(q, scope, edits)
        for e in m.expressions:
            if e.start >= 0 and scope.kind(e) == "jsonb":
                _plain_value(e, edits)
    items = q.items
    roots = (*items, *(x for x in (q.having, q.qualify) if x is not None),
             *(e for m in q.modifiers if m.type == "ORDER_MODIFIER" for e in m.expressions))
    for e in q.group_by:
        if e.start < 0:
            continue
        item = None if _kind(e, scope) is not None else _output_item(e, items)
        source = item if item is not None and item.start >= 0 else e
        if scope.kind(source) != "jsonb":
            continue
        if len(q.grouping_sets) > 1:
            raise UnsupportedSQL("ROLLUP, CUBE or GROUPING SETS of a jsonb value is not supported by colmz")
        if source is e and e.cls == "COLUMN_REF" and not any(
                n.cls == "COLUMN_REF" and n.name[-1:] == e.name[-1:] for root in roots for n in root.walk()):
            # a grouped column not shown: its groups are jsonb's, by the key (1.0 and 1 one group)
            _keyed(e, edits)
            continue
        edits.append((e.end, e.end, f", {JSONB_PLAIN}(CAST({text[source.start:source.end]} AS VARCHAR))"))
    for root in roots:
        for n in root.walk():
            if n.cls == "FUNCTION" and n.distinct and n.subquery is None:
                for k in n.children:
                    if k.start >= 0 and scope.kind(k) == "jsonb":
                        # count(DISTINCT x) counts jsonb values (by their key); another
                        # aggregate shows them (jsonb_plain refuses where PostgreSQL's choice shows)
                        _keyed(k, edits) if n.name == ("count",) else _plain_value(k, edits)
            # a window's PARTITION BY (rows grouped, each showing its own value) by the jsonb
            # key; its and an aggregate's ORDER BY of jsonb by the key
            orders = (*n.order_by, *(n.over.orders if n.over is not None else ()))
            for k in (n.over.partitions if n.over is not None else ()):
                if k.start >= 0 and scope.kind(k) == "jsonb":
                    _keyed(k, edits)
            for o in orders:
                k = o.expression
                if k.start >= 0 and scope.kind(k) == "jsonb" and (k.start, k.start, f"{JSONB_KEY}(CAST(") \
                        not in edits:
                    _keyed(k, edits)


#: The comparisons of a value with a subquery's (``x IN (SELECT ...)``, ``x = ANY (...)``),
#: by the words between the value and the subquery.
_SUBQUERY_COMPARE = re.compile(r"(NOT )?IN|(=|<>|!=|<|>|<=|>=) ?(ANY|SOME|ALL)")


def _compare_subquery(n: Expression, typer: Typer, text: str, edits: list) -> None:
    # ``x IN (subquery)`` (= ANY, < ALL, ...) of jsonb: both sides compared by their jsonb keys,
    # the subquery's one column read through a derived table of it (its text as its own rules
    # rewrite it)
    x = n.children[0] if len(n.children) == 1 else None
    branches = branch_items(n.subquery)
    if x is None or not branches or any(len(b) != 1 for b in branches):
        return
    inner, outer = common_kind({typer.kind(b[0]) for b in branches}), typer.kind(x)
    if "jsonb" not in (inner, outer):
        return
    paren = text.find("(", x.end, n.end) if n.start >= 0 and x.start >= 0 else -1
    if paren < 0 or not _SUBQUERY_COMPARE.fullmatch(" ".join(text[x.end:paren].upper().split())):
        # (DuckDB reads ``x > ALL (...)`` as NOT of an ANY whose node spans ``x`` alone)
        raise UnsupportedSQL("a comparison of jsonb with ALL (subquery) is not supported by colmz: compare with "
                             "the subquery's min() or max()")
    if (inner != "jsonb" and not all(_string(b[0]) is not None for b in branches)) or \
            (outer != "jsonb" and _string(x) is None):
        raise UnsupportedSQL("a comparison of jsonb with a subquery's values where colmz types one side only as "
                             "jsonb is not supported by colmz: cast both sides to jsonb")
    if _string(x) is not None:  # (an untyped literal is read as jsonb, as PostgreSQL reads it)
        edits.append((x.start, x.end, f"{JSONB_KEY}({_jsonb_literal(_string(x))})"))
    else:
        _keyed(x, edits)
    edits.append((paren + 1, paren + 1, f"SELECT {JSONB_KEY}(CAST(v AS VARCHAR)) FROM ("))
    edits.append((n.end - 1, n.end - 1, f") AS {RESERVED_PREFIX}in(v)"))


def _simple_case(n: Expression, typer: Typer, edits: list, stack: list) -> bool:
    # ``CASE x WHEN a THEN ... WHEN b ...``, which DuckDB reads as ``x = a``, ``x = b`` over one
    # operand node: of jsonb, every WHEN value compared by its jsonb key and the operand keyed
    # once (the rule of one comparison would key it per WHEN, or compare some as text). True
    # when taken (its operand, values and results pushed on ``stack``)
    whens = n.children[: len(n.children) - len(n.children) % 2 : 2]
    if len(whens) < 2 or not all(w.type == "COMPARE_EQUAL" and len(w.children) == 2 for w in whens):
        return False
    x = whens[0].children[0]
    if x.start < 0 or any((w.children[0].start, w.children[0].end) != (x.start, x.end) for w in whens) \
            or not any(typer.kind(k) == "jsonb" for w in whens for k in w.children) \
            or any(w.children[1].start < 0 for w in whens):
        return False
    for w in whens:
        v = w.children[1]
        if _column(v, typer) == "text" or _column(x, typer) == "text":
            raise SQLError("operator does not exist: jsonb = text")
        if _string(v) is not None:
            edits.append((v.start, v.end, f"{JSONB_KEY}({_jsonb_literal(_string(v))})"))
        elif not _null(v):
            _keyed(v, edits)
            stack.append(v)
    _keyed(x, edits)
    stack.extend((x, *case_results(n)))
    return True


def _subscripted(n: Expression, typer: Typer) -> None:
    # ``n[i]``: PostgreSQL subscripts arrays and jsonb, never text or json (DuckDB gives text's
    # i-th character, and a jsonb value's, held as text, too)
    kind = "text" if n.cls == "FUNCTION" and n.name == (ANY_TEXT,) else typer.kind(n)  # (translate's ::text)
    if kind in ("text", "json"):
        raise SQLError(f"cannot subscript type {kind} because it does not support subscripting")
    if kind == "jsonb":
        raise UnsupportedSQL("jsonb subscripting (j[k]) is not supported by colmz: write j -> k")


def _expression(e: Expression, scope, text: str, edits: list) -> None:
    stack = [e]
    while stack:
        n = stack.pop()
        if n.subquery is not None:
            _compare_subquery(n, scope, text, edits)
            continue  # its own query: _query
        kids = n.children
        fn = n.name[0] if n.cls == "FUNCTION" and len(n.name) == 1 else ""  # (a call's one-part name)
        if n.type == "ARRAY_EXTRACT" and kids:
            _subscripted(kids[0], scope)
        if fn in (JSONB_GET, JSONB_PATH) and kids and n.start >= 0 and _json_doc(kids[0], scope, text, True):
            # -> ->> #> #>> of json (not jsonb): the value as written
            edits.append((n.start, n.start + len(fn), JSON_GET if fn == JSONB_GET else JSON_PATH))
        if n.cls == "CAST" and len(kids) == 2 and kids[1].start >= 0 and _json_doc(_float_read(kids[0]), scope, text) \
                and text[kids[1].start:kids[1].end].upper() not in _JSON_CASTS:
            # PostgreSQL casts json to text and jsonb only (colmz holds json as text)
            raise SQLError(f"cannot cast type json to {text[kids[1].start:kids[1].end].lower()}")
        if fn in _INT_CASTS and len(kids) == 1 and _json_doc(kids[0], scope, text):
            raise SQLError(f"cannot cast type json to {_INT_CASTS[fn]}")
        if n.cls in ("FUNCTION", "WINDOW") and n.name in (("max",), ("min",)) and kids:
            # PostgreSQL orders jsonb but has no max or min of it (a window's argument is its first child)
            arg = min(kids, key=lambda k: k.start)
            kind = "json" if _json_doc(arg, scope, text) else scope.kind(arg)
            if kind in ("json", "jsonb"):
                raise SQLError(f"function {n.name[0]}({kind}) does not exist")
        target = _scalar_target(n, text)
        if target is not None and kids[0].start >= 0 and scope.kind(_float_read(kids[0])) == "jsonb":
            # jsonb to a number or boolean: PostgreSQL's error for another kind of value
            # (DuckDB reads JSON null as NULL, a JSON string's digits as a number)
            value = _float_read(kids[0])
            edits.append((value.start, value.start, f"CAST({JSONB_SCALAR}(CAST("))
            edits.append((value.end, value.end, f" AS VARCHAR), '{target}') AS JSON)"))
        if n.type in _COMPARING and len(kids) >= 2 and any(_json_doc(k, scope, text) for k in kids):
            op = "<>" if n.type == "COMPARE_NOTEQUAL" else _ORDERING.get(n.type, "=")
            raise SQLError(f"operator does not exist: json {op} "
                           + ("unknown" if any(_string(k) is not None for k in kids) else "json"))
        if n.cls == "CASE" and _simple_case(n, scope, edits, stack):
            continue
        if n.type in _COMPARING and len(kids) >= 2 and _compare_jsonb(n, scope, edits):
            stack.extend(k for k in kids if _string(k) is None)
            continue
        if n.type in _EQUALITY and len(kids) >= 2:
            sides = [kids[0]] if n.type.endswith("IN") else list(kids)
            if any(_kind(k, scope) == "string" for k in sides) and any(
                    _string(k) is not None and not _canonical(_string(k)) for k in kids):
                raise UnsupportedSQL("a comparison of a column of no known type (json, jsonb or text: colmz "
                                     "cannot type it through its view's query) with a string literal is not "
                                     "supported by colmz (as text and as jsonb the answers differ): cast the "
                                     "column, x::jsonb or x::text")
        elif fn == "-" and len(kids) == 2 and n.start >= 0 and _string(kids[1]) is not None \
                and _kind(kids[0], scope) == "jsonb":
            # jsonb - text: the key (or string elements) deleted
            a, b = (text[k.start:k.end] for k in kids)
            edits.append((n.start, n.end, f"{JSONB_DELETE}(CAST({a} AS VARCHAR), {b})"))
            continue
        elif fn == TO_JSONB and len(kids) == 1 and n.start >= 0 and _kind(kids[0], scope) in ("jsonb", "json", "text"):
            # a column turned into jsonb (to_jsonb, jsonb_build_*, jsonb_agg): a jsonb one is
            # itself, a json one read as jsonb, a text one a JSON string
            a = f"CAST({text[kids[0].start:kids[0].end]} AS VARCHAR)"
            kind = _kind(kids[0], scope)
            edits.append((n.start, n.end, a if kind == "jsonb" else f"{JSONB_IN}({a})" if kind == "json"
                          else f"{JSONB_QUOTE}({a})"))
            continue
        elif fn == CONCAT_BY_KIND and len(kids) == 2 and n.start >= 0:
            # || of a column and a JSON literal (translate wrote it both ways): by its kind
            col = next((m for m in kids[1].walk() if m.cls == "COLUMN_REF"), None)
            kind = None if col is None else _kind(col, scope)
            if kind in ("text", "jsonb"):
                chosen = kids[0] if kind == "text" else kids[1]
                edits.append((n.start, n.end, text[chosen.start:chosen.end]))
                continue
        elif fn == "||" and len(kids) == 2 and n.start >= 0:
            if all(k.cls == "FUNCTION" and k.name == (ANY_TEXT,) and _column(k, scope) == "jsonb" for k in kids):
                a, b = (text[k.children[0].start:k.children[0].end] for k in kids)
                edits.append((n.start, n.end, f"{JSONB_CONCAT}(CAST({a} AS VARCHAR), CAST({b} AS VARCHAR))"))
                continue
        elif fn.lower() in _TEXT_ONLY and len(kids) == 1 and _json_kind(kids[0], scope) is not None:
            # PostgreSQL casts neither to text implicitly (colmz holds both as text)
            raise SQLError(f"function {_TEXT_ONLY[fn.lower()]}({_json_kind(kids[0], scope)}) does not exist")
        elif fn == "+" and len(kids) == 2 and n.start >= 0 and text[kids[1].start:kids[1].end] == NUMERIC_CAST \
                and _kind(kids[0], scope) in ("text", "jsonb"):
            # x::numeric of a text column (translate's x + NUMERIC_CAST): read as numeric_in
            # reads it; of a jsonb column, its number's text so (PostgreSQL's error for another value)
            x = f"CAST({text[kids[0].start:kids[0].end]} AS VARCHAR)"
            if _kind(kids[0], scope) == "jsonb":
                x = f"{JSONB_SCALAR}({x}, 'numeric')"
            edits.append((n.start, n.end, f"{NUMERIC_IN}({x})"))
            continue
        elif fn in _OPERATOR_CALLS and kids and _column(kids[0], scope) == "text":
            raise SQLError(f"operator does not exist: {_operator(n, kids)}")
        stack.extend(kids)


def _operator(n: Expression, kids) -> str:
    # PostgreSQL's words for the jsonb operator translate made the call ``n`` of a text column
    last = kids[-1].literal.text.lower() if kids[-1].literal is not None else ""
    op = _OPERATOR_WORDS.get((n.name[0], last)) or _OPERATOR_WORDS[n.name[0], ""]
    right = kids[1].children[0] if len(kids) > 1 and kids[1].cls == "CAST" and kids[1].children else None
    kind = "unknown" if right is not None and _string(right) is not None else (
        "integer" if right is not None and right.literal is not None and right.literal.kind == "INTEGER"
        else "text[]" if op in ("?|", "?&") else "unknown")
    return f"text {op} {kind}"
