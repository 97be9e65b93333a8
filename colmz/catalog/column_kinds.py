"""The SQL kind of each column of a catalog object: ``jsonb``, ``json``, ``text`` or unknown.

Design
------
colmz stores PostgreSQL's ``json``, ``jsonb`` and ``text`` all as Arrow strings, so which of
the three a string column is must be kept beside the data: PostgreSQL decides by it whether
a value may be written to a ``jsonb`` column (no assignment cast from ``text`` to ``jsonb``;
one from ``json``). A table's kinds are its declared types; a materialized view's are its
query's, derived once at ``CREATE`` (:func:`query_kinds`) and kept in its definition
(``"column_kinds"``); a definition written before that field existed derives them again from
its query when read (the objects it reads still exist and never change type, so the answer
is the same).

A view's column takes its kind through the query's own subqueries and ``WITH`` queries (a
name read from one is that query's column, not a stored column of the same name), and
``||`` is text only beside a text operand (an operand of no known kind may be jsonb, which
makes it jsonb).

Invariants: a kind is one of :data:`KINDS` or ``None``; ``None`` means colmz cannot tell
(never "text": a caller refuses by name where a string column's kind would decide an
outcome, :meth:`colmz.catalog.engine.Engine.check_jsonb_text`); a derivation never raises (a
query the tree cannot read gives all ``None``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pyarrow as pa

__all__ = ["KINDS", "declared_kind", "query_kinds", "relation_kinds", "string_kinds"]

#: The kinds told apart (PostgreSQL type names).
KINDS = ("jsonb", "json", "text")

_TEXT_TYPES = re.compile(r"(text|varchar|string|character varying|char|character|bpchar|name)(\s*\(\s*\d+\s*\))?")
#: Calls whose result is ``text`` in PostgreSQL whatever their arguments.
_TEXT_CALLS = frozenset({"upper", "lower", "concat", "concat_ws", "btrim", "trim", "ltrim", "rtrim", "substr",
                         "substring", "replace", "lpad", "rpad", "repeat", "reverse", "left", "right",
                         "initcap", "format", "md5", "to_char", "string_agg", "translate", "split_part",
                         "jsonb_typeof", "json_typeof", "jsonb_pretty", "->>", "#>>"})
#: Calls whose result is ``jsonb`` (``json``) in PostgreSQL.
_JSONB_CALLS = frozenset({"to_jsonb", "jsonb_build_object", "jsonb_build_array", "jsonb_agg", "jsonb_object_agg",
                          "jsonb_strip_nulls", "jsonb_set", "jsonb_insert", "jsonb_object"})
_JSON_CALLS = frozenset({"to_json", "json_build_object", "json_build_array", "json_agg", "json_object_agg",
                         "json_strip_nulls", "json_object", "row_to_json", "array_to_json"})


def declared_kind(type_sql: str, arrow: pa.DataType | None = None) -> str | None:
    """The kind of a column declared of SQL type ``type_sql`` (``None``: none of :data:`KINDS`).

    >>> declared_kind("JSONB"), declared_kind("json"), declared_kind("varchar(3)"), declared_kind("int")
    ('jsonb', 'json', 'text', None)
    """
    t = " ".join(type_sql.lower().split())
    if t in ("jsonb", "json"):
        return t
    if _TEXT_TYPES.fullmatch(t) is not None:
        return "text"
    if arrow is not None and (pa.types.is_string(arrow) or pa.types.is_large_string(arrow)):
        return "text"  # another spelling of a string type (colmz.column_types)
    return None


def query_kinds(query: str, width: int, columns: Mapping[str, str | None],
                star: Sequence[str | None] | None = None) -> list[str | None]:
    """The kind of each of the ``width`` output columns of ``query`` (SQL text as written),
    given ``columns``: the kind of each column (lower-case name) of the relations it reads
    (``None`` where two relations disagree or nothing is known). As PostgreSQL types a view's
    columns: a column reference is its column's kind; a cast or a json(b) function its
    type; a text function, ``->>``, ``||`` with a text operand (of jsonb ones: jsonb), and an
    untyped literal or ``NULL`` (a view resolves unknown to text) are text; ``->`` keeps its
    operand's kind; a ``CASE`` or ``coalesce`` is the common kind of its results. A name read
    from a ``FROM`` subquery or a ``WITH`` query is that query's column (of the kind derived
    for it); one two ``FROM`` items give different kinds is ``None``. One plain ``*`` item is
    the kinds ``star`` (the columns of the one stored relation read, in order) where given and
    the widths agree, or the columns of the one subquery or ``WITH`` query read; another
    ``*``, a ``FROM`` item of another kind (a table function, ``VALUES``), ``WITH RECURSIVE``
    or a query the tree cannot read gives ``None`` for every column; a set operation the
    kinds its branches agree on.

    >>> query_kinds("SELECT k, j, j -> 'a', j ->> 'a', s::jsonb, 'x' FROM t", 6,
    ...             {"k": None, "j": "jsonb", "s": "text"})
    [None, 'jsonb', 'jsonb', 'text', 'jsonb', 'text']
    >>> query_kinds("WITH c AS (SELECT s AS j FROM t) SELECT q.j, x FROM (SELECT j AS x, j FROM c) q", 2,
    ...             {"j": "jsonb", "s": "text"})
    ['text', 'text']
    """
    from colmz.sql import SQLError
    from colmz.sql.tree import parse_tree

    unknown: list[str | None] = [None] * width
    try:
        (q,) = parse_tree(query)
    except (SQLError, ValueError, RecursionError):
        return unknown
    except Exception:  # noqa: BLE001 - any other refusal (UnsupportedSQL, ...): not told
        return unknown
    out = _node_kinds(q, query, columns, width, star)
    return out if out is not None and len(out) == width else unknown


def _node_kinds(q, query: str, columns, width: int, star) -> list[str | None] | None:
    out = _outputs(q, query, columns, star, {})
    return None if out is None or len(out) != width else [k for _, k in out]


def _outputs(q, query: str, columns, star, ctes: dict) -> list[tuple[str, str | None]] | None:
    # The (lower-case name, kind) of each output column of ``q``, or None when not told. A
    # name (unnamed: "") is an item's alias or its column's; ``ctes`` the outputs of the
    # WITH queries in scope (None: not told).
    if q.ctes:
        ctes = dict(ctes)
        for name, sub in q.ctes:
            ctes[name.lower()] = None  # a query reading itself (WITH RECURSIVE): not told
            ctes[name.lower()] = _outputs(sub, query, columns, None, ctes)
    if q.type == "SET_OPERATION_NODE":
        branches = [_outputs(c, query, columns, None, ctes) for c in q.children]
        if not branches or any(b is None for b in branches) or len({len(b) for b in branches}) != 1:
            return None
        return [(cols[0][0], cols[0][1] if len({k for _, k in cols}) == 1 else None)
                for cols in zip(*branches)]  # the first branch names the columns
    if q.type != "SELECT_NODE":
        return None
    items = _items(q.from_, query, columns, ctes)
    if items is None:
        return None
    scope = _scope(items, columns)
    stars = [e for e in q.items if e.cls == "STAR"]
    if len(stars) > 1 or (stars and (stars[0].star_modified or stars[0].children or stars[0].relation
                                     or len(items) != 1)):
        return None
    out: list[tuple[str, str | None]] = []
    for e in q.items:
        if e.cls != "STAR":
            name = e.alias or (e.name[-1] if e.cls == "COLUMN_REF" and e.name else "")
            out.append((name.lower(), _kind(e, query, scope)))
            continue
        read = items[0]
        if read is None:  # a stored relation: its columns as the caller gave them
            if star is None or q.from_.column_aliases:
                return None
            out.extend(("", k) for k in star)  # (names of no use here: the caller's list)
        else:
            out.extend(read)
    return out


def _items(t, query: str, columns, ctes: dict) -> list | None:
    # The FROM items of ``t``: None for a stored relation (its columns those of ``columns``),
    # else the outputs of a subquery or WITH query; None when an item's columns are not told
    # (a table function, VALUES, a renamed stored relation, ...).
    if t is None:
        return []
    if t.is_join:
        parts = [_items(c, query, columns, ctes) for c in t.children]
        return None if any(p is None for p in parts) else [i for p in parts for i in p]
    if t.type == "BASE_TABLE" and not t.modified:
        if len(t.name) == 1 and t.name[0].lower() in ctes:
            out = ctes[t.name[0].lower()]
        elif t.column_aliases:
            return None
        else:
            return [None]
    elif t.type == "SUBQUERY" and t.subquery is not None:
        out = _outputs(t.subquery, query, columns, None, ctes)
    else:
        return None
    if out is None:
        return None
    if t.column_aliases:  # AS q(a, b): the first columns renamed
        if len(t.column_aliases) > len(out):
            return None
        out = [(a.lower(), k) for a, (_, k) in zip(t.column_aliases, out)] + out[len(t.column_aliases):]
    return [out]


def _scope(items: list, columns) -> dict[str, str | None]:
    # The kind a column name resolves to among the FROM items: a subquery's or WITH query's
    # column, a stored relation's (``columns``); None where two disagree.
    scope: dict[str, str | None] = dict(columns) if any(i is None for i in items) else {}
    derived: set[str] = set()
    for cols in items:
        for n, k in cols or ():
            if not n:
                continue
            if n in scope and (scope[n] != k or n not in derived):
                scope[n] = scope[n] if scope[n] == k else None
            else:
                scope[n] = k
            derived.add(n)
    return scope


def _kind(e, query: str, columns) -> str | None:
    if e.cls == "COLUMN_REF" and e.name:
        return columns.get(e.name[-1].lower())
    if e.cls == "CAST" and len(e.children) == 2 and e.children[1].start >= 0:
        return declared_kind(query[e.children[1].start : e.children[1].end])
    if e.cls == "CONSTANT":
        lit = e.literal
        return "text" if lit is not None and lit.kind in ("STRING", "NULL_LITERAL") else None
    if e.cls == "LAMBDA" and len(e.children) == 2:  # DuckDB reads PostgreSQL's -> so
        k = _kind(e.children[0], query, columns)
        return k if k in ("jsonb", "json") else None
    if e.cls == "FUNCTION" and len(e.name) == 1:
        name = e.name[0].lower()
        if name == "||":
            kinds = [_kind(c, query, columns) for c in e.children]
            if "jsonb" in kinds:
                return "jsonb" if all(k == "jsonb" or _untyped(c) for k, c in zip(kinds, e.children)) else None
            # a text operand makes it text (or PostgreSQL's error); one of no known kind may
            # be jsonb, which would make it jsonb
            return "text" if any(k == "text" and not _untyped(c) for k, c in zip(kinds, e.children)) \
                or all(_untyped(c) for c in e.children) else None
        if name in _TEXT_CALLS:
            return "text"
        if name in _JSONB_CALLS:
            return "jsonb"
        if name in _JSON_CALLS:
            return "json"
        if name in ("min", "max", "nullif") and e.children:
            return _kind(e.children[-1] if name != "nullif" else e.children[0], query, columns)
        return None
    if e.cls == "CASE" or (e.cls == "OPERATOR" and e.type == "OPERATOR_COALESCE"):
        results = e.children if e.cls != "CASE" else \
            (*e.children[1::2], *(e.children[-1:] if len(e.children) % 2 else ()))
        typed = {_kind(r, query, columns) for r in results if not _untyped(r)}
        if not typed:
            return "text" if results else None  # all unknown resolves to text
        return typed.pop() if len(typed) == 1 else None
    return None


def _untyped(e) -> bool:
    return e.cls == "CONSTANT" and e.literal is not None and e.literal.kind in ("STRING", "NULL_LITERAL")


def relation_kinds(named: Sequence[tuple[str, str | None]]) -> dict[str, str | None]:
    """The kind of each column name (lower-case) over the columns ``named`` (name, kind) of
    the relations a query reads: ``None`` where two of them disagree.

    >>> relation_kinds([("J", "jsonb"), ("s", "text"), ("s", "jsonb")])
    {'j': 'jsonb', 's': None}
    """
    out: dict[str, str | None] = {}
    for n, k in named:
        n = n.lower()
        out[n] = k if n not in out or out[n] == k else None
    return out


def string_kinds(schema, kinds: Sequence[str | None]) -> list[str | None]:
    """``kinds`` of the columns ``schema`` (ColumnSpecs) with ``"string"`` for a string column
    of no known kind (:mod:`colmz.sql.jsonbcols` refuses what its kind would decide).

    >>> import pyarrow as pa
    >>> from colmz.order import ColumnSpec
    >>> string_kinds([ColumnSpec("a", pa.string()), ColumnSpec("b", pa.int64())], [None, None])
    ['string', None]
    """
    return [k if k is not None or not (pa.types.is_string(c.type) or pa.types.is_large_string(c.type))
            else "string" for c, k in zip(schema, kinds)]
