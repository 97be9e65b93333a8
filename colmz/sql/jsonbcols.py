"""PostgreSQL's jsonb rules that hang on a column's type: applied to a translated query once
the relations it reads (and so which of their string columns are jsonb, json or text) are
known.

colmz keeps a jsonb column as its canonical text (:func:`colmz.sql.jsonb.jsonb_dump`), a
string to DuckDB, so :func:`colmz.sql.translate.translate` cannot tell a jsonb column from a
text one. The catalog knows each relation's column kinds
(:mod:`colmz.catalog.column_kinds`) when it runs a query; :func:`jsonb_column_rules` then
reads the translated text's tree (:func:`colmz.sql.tree.parse_tree`) and, for a column
reference that resolves to a relation's column, applies PostgreSQL 15's rules:

* **a jsonb column compared with a string literal** (``=``, ``<>``, ``IN (...)``, either
  side): PostgreSQL reads the literal as jsonb and compares jsonb values; the literal is
  written as its canonical jsonb text, so the text comparison is the jsonb one (``j =
  '{"a":1}'`` holds for ``{"a": 1}``). A literal that is not JSON raises PostgreSQL's
  "invalid input syntax for type json". An ordering comparison (``<``, ``>=``, ...) of a
  jsonb column with a literal is refused by name (jsonb's order is not its text's).
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
* **a function of text alone of a jsonb or json column** (``length``, ``upper``, ...) raises
  PostgreSQL's "function length(jsonb) does not exist".
* **a text column cast to numeric** (translate's ``x +`` :data:`colmz.sql.transforms.NUMERIC_CAST`,
  which DuckDB does not add to text) is read as PostgreSQL's ``numeric_in`` reads text
  (:data:`colmz.sql.numeric.NUMERIC_IN`: its errors, its value; its text refused where printed).
* **a jsonb operator over a text column** (``->``, ``->>``, ``#>``, ``#>>``, ``?``, ``?|``,
  ``?&``, ``@>``/``<@``, which translate made calls of the column's text) raises
  PostgreSQL's "operator does not exist: text -> unknown" (:class:`SQLError`).

A maintained view's planner applies the same rules to the expressions it moves into its SQL
segments (whose columns are placeholders): :func:`column_ref_kinds` tells it the kind each
column reference of the view's query resolves to here.

Invariants: a reference is resolved only where it is certain -- in a query whose every FROM
item is one of the named relations, a qualified reference by its item's alias or name, an
unqualified one when exactly one item holds the name; a reference elsewhere (a FROM
subquery's or CTE's column, an outer query's, ORDER BY / GROUP BY, which may name output
columns) is left as translate wrote it. The rewrite is a pure function of the text and the
relations' kinds, cached; a text the tree cannot read is returned unchanged.
"""

from __future__ import annotations

import functools

from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.jsonb import (
    JSONB_CONTAINS,
    JSONB_DELETE,
    JSONB_EXISTS,
    JSONB_PATH,
    JSONB_QUOTE,
    TO_JSONB,
    jsonb_dump,
    jsonb_load,
)
from colmz.sql.numeric import NUMERIC_IN
from colmz.sql.transforms import (
    CALL_MACROS,
    CONCAT_BY_KIND,
    JSONB_CONCAT,
    JSONB_GET,
    JSONB_IN,
    NUMERIC_CAST,
    table_refs,
)
from colmz.sql.translate import ANY_TEXT
from colmz.sql.tree import Expression, Query, parse_tree

__all__ = ["column_ref_kinds", "jsonb_column_rules"]

#: Relations as the caller names them: each relation's name in the text (lower case) with its
#: columns' ``(name, kind)`` pairs, kind ``"jsonb"``, ``"json"``, ``"text"``, ``"string"`` (a
#: string column of none of these known: a view's column colmz cannot type) or ``None``.
Relations = tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...]

_EQUALITY = frozenset({"COMPARE_EQUAL", "COMPARE_NOTEQUAL", "COMPARE_IN", "COMPARE_NOT_IN"})
_ORDERING = {"COMPARE_LESSTHAN": "<", "COMPARE_GREATERTHAN": ">", "COMPARE_LESSTHANOREQUALTO": "<=",
             "COMPARE_GREATERTHANOREQUALTO": ">="}
_OPERATOR_CALLS = frozenset({JSONB_GET, JSONB_PATH, JSONB_EXISTS, JSONB_CONTAINS})
_EXISTS_MODES = {"one": "?", "any": "?|", "all": "?&"}
#: Functions of text alone, by their name in translated text, with PostgreSQL's name.
_TEXT_ONLY = {**{f: f for f in ("length", "char_length", "character_length", "md5", "reverse")},
              **{CALL_MACROS[f]: f for f in ("octet_length", "upper", "lower")}}


def jsonb_column_rules(text: str, relations: Relations) -> str:
    """``text`` (a translated, bound query) with PostgreSQL's jsonb rules of its relations'
    jsonb and text columns applied (module docstring).

    >>> rels = (("t", (("k", None), ("s", "text"), ("j", "jsonb"))),)
    >>> jsonb_column_rules("SELECT j = '{\\"a\\":1}' FROM t", rels)
    'SELECT j = \\'{"a": 1}\\' FROM t'
    >>> jsonb_column_rules("SELECT __colmz_text(j) || __colmz_text(j) FROM t", rels)
    'SELECT __colmz_jsonb_concat(CAST(j AS VARCHAR), CAST(j AS VARCHAR)) FROM t'
    """
    kinds = {k for _, cols in relations for _, k in cols}
    jsonb = ("jsonb" in kinds and ("'" in text or "||" in text)) or (not kinds.isdisjoint(("json", "string"))
                                                                   and "'" in text) or CONCAT_BY_KIND in text \
        or (TO_JSONB in text and not kinds.isdisjoint(("jsonb", "json", "text")))
    if not jsonb and not ("text" in kinds and any(f in text for f in (*_OPERATOR_CALLS, NUMERIC_CAST))) \
            and not (not kinds.isdisjoint(("jsonb", "json")) and any(f in text.lower() for f in _TEXT_ONLY)):
        return text  # nothing a rule takes: no literal or || beside a jsonb column, no jsonb call
    return _rewrite(text, relations)


def column_ref_kinds(text: str, relations: Relations) -> dict[tuple[int, int], str]:
    """The kind of each column reference of ``text`` that :func:`jsonb_column_rules` resolves
    (by its span), the others absent: what a caller that moves the references' expressions
    elsewhere (a maintained view's SQL segments, whose columns are placeholders) needs to
    apply the same rules there. ``text`` is a query as the caller parses it (with the
    relations' own names); one the tree cannot read gives ``{}``.

    >>> rels = (("t", (("k", None), ("s", "text"), ("j", "jsonb"))),)
    >>> sorted(column_ref_kinds("SELECT k, s FROM t WHERE j = '1'", rels).items())
    [((10, 11), 'text'), ((25, 26), 'jsonb')]
    """
    try:
        queries = parse_tree(text)
    except SQLError:
        return {}
    rels = {name: dict(cols) for name, cols in relations}
    found: dict[tuple[int, int], str] = {}
    for q in queries:
        _query(q, rels, text, [], found)
    return found


@functools.lru_cache(maxsize=512)
def _rewrite(text: str, relations: Relations) -> str:
    try:
        queries = parse_tree(text)
    except SQLError:
        return text
    rels = {name: dict(cols) for name, cols in relations}
    edits: list[tuple[int, int, str]] = []
    for q in queries:
        _query(q, rels, text, edits)
    out, last = [], 0
    for start, end, new in sorted(edits):
        if start < last:
            continue  # inside an edited span (never: edits are of disjoint nodes)
        out += [text[last:start], new]
        last = end
    out.append(text[last:])
    return "".join(out)


def _query(q: Query, rels: dict, text: str, edits: list, found: dict | None = None) -> None:
    # ``found`` given: the kinds of the references resolved are noted there, no rule applied
    for _, sub in q.ctes:
        _query(sub, rels, text, edits, found)
    for c in q.children:
        _query(c, rels, text, edits, found)
    scope: dict[str, dict] | None = {}
    for t in table_refs(q):
        if t.subquery is not None:
            _query(t.subquery, rels, text, edits, found)
        if t.type == "JOIN":
            continue
        if t.type == "BASE_TABLE" and len(t.name) == 1 and t.name[-1].lower() in rels and not t.column_aliases:
            if scope is not None:
                scope[(t.alias or t.name[-1]).lower()] = rels[t.name[-1].lower()]
        else:
            scope = None  # an item whose columns are not known here: resolve nothing
    roots = [*q.items, *(x for x in (q.where, q.having, q.qualify) if x is not None)]
    roots += [e for t in table_refs(q) if t.type == "JOIN" for e in t.expressions]
    for e in (*roots, *q.group_by, *(e for m in q.modifiers for e in m.expressions)):
        for n in e.walk():
            if n.subquery is not None:
                _query(n.subquery, rels, text, edits, found)
    if not scope:
        return
    for e in roots:
        if found is None:
            _expression(e, scope, text, edits)
            continue
        stack = [e]
        while stack:  # the references _expression reads: not a subquery's operands
            n = stack.pop()
            kind = _kind(n, scope)
            if kind is not None and n.start >= 0:
                found[(n.start, n.end)] = kind
            if n.subquery is None:
                stack.extend(n.children)


def _kind(n: Expression, scope: dict[str, dict]) -> str | None:
    # the kind of the column reference ``n`` resolves to, None when not certain
    if n.cls != "COLUMN_REF" or not n.name:
        return None
    col = n.name[-1].lower()
    if len(n.name) == 2:
        cols = scope.get(n.name[0].lower())
        return None if cols is None else cols.get(col)
    if len(n.name) != 1:
        return None
    holders = [cols for cols in scope.values() if col in cols]
    return holders[0][col] if len(holders) == 1 else None


def _column(n: Expression, scope) -> str | None:
    # the kind of ``n`` when it is a column reference, or translate's text of one
    # (``__colmz_text(j)``, ``CAST(j AS VARCHAR)``)
    if n.cls == "FUNCTION" and n.name == (ANY_TEXT,) and len(n.children) == 1:
        return _kind(n.children[0], scope)
    if n.cls == "CAST" and len(n.children) == 2:
        return _kind(n.children[0], scope)
    return _kind(n, scope)


def _string(n: Expression) -> str | None:
    return n.literal.text if n.literal is not None and n.literal.kind == "STRING" else None


def _canonical(value: str) -> bool:
    # whether a string literal is the jsonb text of its value (text and jsonb compare alike)
    try:
        return jsonb_dump(jsonb_load(value)) == value
    except ValueError:
        return False


def _jsonb_literal(value: str) -> str:
    try:
        doc = jsonb_dump(jsonb_load(value))
    except ValueError:
        raise SQLError(f'invalid input syntax for type json: "{value}"') from None
    return "'" + doc.replace("'", "''") + "'"


def _expression(e: Expression, scope, text: str, edits: list) -> None:
    stack = [e]
    while stack:
        n = stack.pop()
        if n.subquery is not None:
            continue  # its own query: _query
        kids = n.children
        if n.type in _EQUALITY and len(kids) >= 2:
            sides = [kids[0]] if n.type.endswith("IN") else list(kids)
            if any(_kind(k, scope) == "string" for k in sides) and any(
                    _string(k) is not None and not _canonical(_string(k)) for k in kids):
                raise UnsupportedSQL("a comparison of a column of no known type (json, jsonb or text: colmz "
                                     "cannot type it through its view's query) with a string literal is not "
                                     "supported by colmz (as text and as jsonb the answers differ): cast the "
                                     "column, x::jsonb or x::text")
            if any(_kind(k, scope) == "json" for k in sides) and any(_string(k) is not None for k in kids):
                op = "<>" if n.type == "COMPARE_NOTEQUAL" else "="
                raise SQLError(f"operator does not exist: json {op} unknown")
            if any(_kind(k, scope) == "jsonb" for k in sides):
                for k in kids:
                    if _string(k) is not None and k.start >= 0:
                        edits.append((k.start, k.end, _jsonb_literal(_string(k))))
                continue
        elif n.type in _ORDERING and len(kids) == 2:
            if any(_kind(k, scope) == "jsonb" for k in kids) and any(_string(k) is not None for k in kids):
                raise UnsupportedSQL(f"the comparison {_ORDERING[n.type]} of a jsonb column and a string "
                                     "literal is not supported by colmz (jsonb's order is not its text's)")
        elif n.cls == "FUNCTION" and n.name == ("-",) and len(kids) == 2 and n.start >= 0 \
                and _string(kids[1]) is not None and _kind(kids[0], scope) == "jsonb":
            # jsonb - text: the key (or string elements) deleted
            a, b = (text[k.start:k.end] for k in kids)
            edits.append((n.start, n.end, f"{JSONB_DELETE}(CAST({a} AS VARCHAR), {b})"))
            continue
        elif n.cls == "FUNCTION" and n.name == (TO_JSONB,) and len(kids) == 1 and n.start >= 0 \
                and _kind(kids[0], scope) in ("jsonb", "json", "text"):
            # a column turned into jsonb (to_jsonb, jsonb_build_*, jsonb_agg): a jsonb one is
            # itself, a json one read as jsonb, a text one a JSON string
            a = f"CAST({text[kids[0].start:kids[0].end]} AS VARCHAR)"
            kind = _kind(kids[0], scope)
            edits.append((n.start, n.end, a if kind == "jsonb" else f"{JSONB_IN}({a})" if kind == "json"
                          else f"{JSONB_QUOTE}({a})"))
            continue
        elif n.cls == "FUNCTION" and n.name == (CONCAT_BY_KIND,) and len(kids) == 2 and n.start >= 0:
            # || of a column and a JSON literal (translate wrote it both ways): by its kind
            col = next((m for m in kids[1].walk() if m.cls == "COLUMN_REF"), None)
            kind = None if col is None else _kind(col, scope)
            if kind in ("text", "jsonb"):
                chosen = kids[0] if kind == "text" else kids[1]
                edits.append((n.start, n.end, text[chosen.start:chosen.end]))
                continue
        elif n.cls == "FUNCTION" and n.name == ("||",) and len(kids) == 2 and n.start >= 0:
            if all(k.cls == "FUNCTION" and k.name == (ANY_TEXT,) and _column(k, scope) == "jsonb" for k in kids):
                a, b = (text[k.children[0].start:k.children[0].end] for k in kids)
                edits.append((n.start, n.end, f"{JSONB_CONCAT}(CAST({a} AS VARCHAR), CAST({b} AS VARCHAR))"))
                continue
        elif n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0].lower() in _TEXT_ONLY and len(kids) == 1 \
                and _kind(kids[0], scope) in ("jsonb", "json"):
            # PostgreSQL casts neither to text implicitly (colmz holds both as text)
            raise SQLError(f"function {_TEXT_ONLY[n.name[0].lower()]}({_kind(kids[0], scope)}) does not exist")
        elif n.cls == "FUNCTION" and n.name == ("+",) and len(kids) == 2 and n.start >= 0 \
                and text[kids[1].start:kids[1].end] == NUMERIC_CAST and _kind(kids[0], scope) == "text":
            # x::numeric of a text column (translate's x + NUMERIC_CAST): read as numeric_in reads it
            edits.append((n.start, n.end, f"{NUMERIC_IN}(CAST({text[kids[0].start:kids[0].end]} AS VARCHAR))"))
            continue
        elif (n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0] in _OPERATOR_CALLS and kids
              and _column(kids[0], scope) == "text"):
            raise SQLError(f"operator does not exist: {_operator(n, kids)}")
        stack.extend(kids)


def _operator(n: Expression, kids) -> str:
    # PostgreSQL's words for the jsonb operator translate made the call ``n`` of a text column
    name = n.name[0]
    last = kids[-1].literal.text.lower() if kids[-1].literal is not None else ""
    if name == JSONB_GET:
        op = "->>" if last == "true" else "->"
    elif name == JSONB_PATH:
        op = "#>>" if last == "true" else "#>"
    elif name == JSONB_EXISTS:
        op = _EXISTS_MODES.get(last, "?")
    else:
        op = "@>"
    right = kids[1].children[0] if len(kids) > 1 and kids[1].cls == "CAST" and kids[1].children else None
    kind = "unknown" if right is not None and _string(right) is not None else (
        "integer" if right is not None and right.literal is not None and right.literal.kind == "INTEGER"
        else "text[]" if op in ("?|", "?&") else "unknown")
    return f"text {op} {kind}"
