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

Invariants: a kind is one of :data:`KINDS` or ``None``; ``None`` means colmz cannot tell
(a caller treats such a string column as it treated every view column before: possibly json,
never refused); a derivation never raises (a query the tree cannot read gives all ``None``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pyarrow as pa

__all__ = ["KINDS", "declared_kind", "query_kinds", "relation_kinds"]

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
    type; a text function, ``->>``, ``||`` of no json operand, and an untyped literal or
    ``NULL`` (a view resolves unknown to text) are text; ``->`` keeps its operand's kind; a
    ``CASE`` or ``coalesce`` is the common kind of its results. One plain ``*`` item is the
    kinds ``star`` (the columns of the one relation read, in order) where given and the
    widths agree; another ``*``, a ``WITH`` or a ``FROM`` of anything but stored relations
    (whose names might be a subquery's columns) or a query the tree cannot read gives
    ``None`` for every column; a set operation the kinds its branches agree on.

    >>> query_kinds("SELECT k, j, j -> 'a', j ->> 'a', s::jsonb, 'x' FROM t", 6,
    ...             {"k": None, "j": "jsonb", "s": "text"})
    [None, 'jsonb', 'jsonb', 'text', 'jsonb', 'text']
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
    if q.type == "SET_OPERATION_NODE" and not q.ctes:
        branches = [_node_kinds(c, query, columns, width, None) for c in q.children]
        if not branches or any(b is None for b in branches) or len({len(b) for b in branches}) != 1:
            return None
        return [k[0] if len(set(k)) == 1 else None for k in zip(*branches)]
    if q.type != "SELECT_NODE" or q.ctes or not _plain_from(q.from_):
        return None  # a name may then be a subquery's or CTE's column, not a stored one's
    stars = [e for e in q.items if e.cls == "STAR"]
    if not stars:
        return [_kind(e, query, columns) for e in q.items]
    # the one relation read must be the FROM item itself (not a subquery's or a CTE's output)
    if len(stars) > 1 or star is None or stars[0].star_modified or stars[0].children or q.ctes \
            or q.from_ is None or q.from_.type != "BASE_TABLE" or len(q.items) - 1 + len(star) != width:
        return None
    out: list[str | None] = []
    for e in q.items:
        out.extend(star if e.cls == "STAR" else [_kind(e, query, columns)])
    return out


def _plain_from(t) -> bool:
    # Whether a FROM clause reads stored relations only (base tables, joins of them): its
    # column names are then theirs.
    if t is None:
        return True
    if t.type == "BASE_TABLE":
        return True
    return t.is_join and all(_plain_from(c) for c in t.children)


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
            return "text" if all(k == "text" or k is None for k in kinds) else None
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
