"""The builder: every SQL text colmz itself writes, from parts.

colmz writes SQL around user text -- the query of a ``DELETE``/``UPDATE`` predicate, the
cast of ``INSERT ... VALUES`` literals to their columns, ``mz_now()``'s value -- and
user text gets into it only through these functions:

* :func:`identifier` is the one quoting of a name (``"..."`` with ``""``) and
  :func:`literal` the one quoting of a value (``'...'`` with ``''``; numbers, booleans,
  ``NULL``). No text of colmz's quotes a name or a value any other way.
* A predicate or an expression written by a user is checked to be one expression
  (:func:`colmz.sql.check_expression`: DuckDB's own parser reads it as exactly one
  expression node, nothing outside it but comments and parentheses) before it is put
  inside the statement; what is not raises :class:`colmz.sql.SQLError` naming it.
* Names beginning with :data:`RESERVED_PREFIX` are colmz's own: the relations a query
  reads are registered under :func:`relation_name` names, and ``mz_now()``'s placeholder
  is one of them. User text cannot use them (:func:`colmz.sql.translate` refuses).

What the builder returns is still checked by DuckDB to be exactly one ``SELECT`` before
it runs (:func:`colmz.sql.check_one_query`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from colmz.sql.errors import SQLError
from colmz.sql.tokens import share_concat
from colmz.sql.tree import require_expression, select_recipe

__all__ = [
    "BYTEA_IN",
    "NOW_FORMS",
    "RESERVED_PREFIX",
    "cast_select",
    "create_table",
    "identifier",
    "literal",
    "now_sql",
    "relation",
    "now_value",
    "relation_name",
    "select_by_position",
    "select_where",
    "splice",
    "update_select",
]

#: Names colmz gives its own tables, columns and placeholders; user text may not use them.
RESERVED_PREFIX = "__colmz_"

#: The macro reading text as PostgreSQL's bytea input (``\x`` and hex digits), defined on
#: every colmz connection (``colmz.sql.translate.BYTEA_INPUT_MACRO``): literals written to a
#: bytea column and ``'...'::bytea`` go through it, never DuckDB's escape-reading cast.
BYTEA_IN = RESERVED_PREFIX + "bytea_in"

#: ``mz_now()`` forms: the logical time as an integer, or -- when the query compares it with
#: dates/timestamps -- as a ``timestamptz`` reading the time as milliseconds since the Unix
#: epoch (Materialize's ``mz_timestamp`` casts that way).
NOW_FORMS = ("uint64", "timestamptz")


def identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier: exactly that name, whatever it holds.

    >>> print(identifier('we"ird; name'))
    "we""ird; name"
    """
    if not isinstance(name, str) or not name:
        raise SQLError(f"an identifier is a non-empty string, got {name!r}")
    if "\x00" in name:
        raise SQLError(f"an identifier cannot hold a NUL character: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def relation(table: str | Sequence[str]) -> str:
    """A relation's name as SQL: one name, or the parts of a qualified one (``schema.item``,
    ``database.schema.item``), each through :func:`identifier`.

    >>> print(relation("a.b"), relation(("y", "z", 'c"t')))
    "a.b" "y"."z"."c""t"
    """
    if isinstance(table, str):
        return identifier(table)
    if not table:
        raise SQLError("a relation name has at least one part")
    return ".".join(identifier(p) for p in table)


def literal(value) -> str:
    """``value`` (``str``, ``int``, ``float``, ``bool`` or ``None``) as a SQL literal.

    Strings are standard SQL strings: ``'`` doubled, backslashes and newlines as they are.

    >>> print(literal("it's; a\\\\b"), literal(3), literal(None), literal(True))
    'it''s; a\\b' 3 NULL TRUE
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"CAST('{value!r}' AS DOUBLE)"  # 'nan', 'inf', '-inf'
        return f"CAST({value!r} AS DOUBLE)"
    if isinstance(value, str):
        if "\x00" in value:
            raise SQLError(f"a string literal cannot hold a NUL character: {value!r}")
        return "'" + value.replace("'", "''") + "'"
    raise SQLError(f"no SQL literal for a {type(value).__name__}: {value!r}")


def relation_name(i: int) -> str:
    """The name colmz registers the ``i``-th relation of one query under with DuckDB.

    >>> relation_name(3)
    '__colmz_r3'
    """
    return f"{RESERVED_PREFIX}r{i}"


def now_value(t: int, form: str) -> str:
    """The SQL that replaces ``mz_now()`` at time ``t``.

    >>> now_value(5, "uint64"), now_value(5, "timestamptz")
    ('CAST(5 AS UBIGINT)', 'CAST(epoch_ms(CAST(5 AS BIGINT)) AS TIMESTAMPTZ)')
    """
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        raise ValueError(f"t must be a non-negative int, got {t!r}")
    if form not in NOW_FORMS:
        raise ValueError(f"form must be one of {NOW_FORMS}, got {form!r}")
    if form == "timestamptz" and t > 2**63 - 1:
        raise OverflowError(f"mz_now() = {t} does not fit a timestamp (milliseconds since the epoch)")
    return now_sql(form, str(t))


def now_sql(form: str | None, column: str) -> str:
    """``mz_now()`` as the SQL of a column holding each row's time (a batch of times).

    >>> now_sql(None, "t.time")
    'CAST(t.time AS UBIGINT)'
    """
    if form == "timestamptz":
        return f"CAST(epoch_ms(CAST({column} AS BIGINT)) AS TIMESTAMPTZ)"
    return f"CAST({column} AS UBIGINT)"


def create_table(table: str, columns: Sequence[tuple[str, str]]) -> str:
    """``CREATE TABLE`` of ``columns`` -- ``(name, SQL type)`` pairs -- with every name quoted.

    >>> print(create_table("my t", [("k", "BIGINT"), ('a";b', "TEXT")]))
    CREATE TABLE "my t" ("k" BIGINT, "a"";b" TEXT)
    """
    cols = ", ".join(f"{identifier(name)} {type_sql}" for name, type_sql in columns)
    return f"CREATE TABLE {identifier(table)} ({cols})"


def select_where(table: str | Sequence[str], predicate: str | None = None, what: str | None = None) -> str:
    """``SELECT * FROM table [WHERE (predicate)]``: the rows a ``DELETE`` removes.

    ``table`` is a name or the parts of a qualified one (:func:`relation`). ``predicate`` is
    user text: it must be one expression, else :class:`SQLError` naming ``what`` (default
    ``"DELETE FROM <table>: predicate"``).

    >>> select_where("My T", "k > 1")
    'SELECT * FROM "My T" WHERE (k > 1)'
    >>> select_where("t", "1=0); COPY (SELECT 1) TO 'f'; SELECT (1")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: DELETE FROM t: predicate: not one expression, DuckDB reads a statement other than a query in it: "1=0); COPY (SELECT 1) TO 'f'; SELECT (1"
    """
    rel = relation(table)
    text = f"SELECT * FROM {rel}"
    if predicate is not None:
        require_expression(predicate, what or f"DELETE FROM {_shown(table)}: predicate")
        # the predicate's tokens (it was read to be checked) are the query's, moved
        text = share_concat([f"{text} WHERE (", predicate, ")"])
    _recipe(text, [(7, None, None)], (table,) if isinstance(table, str) else table, 14, predicate)
    return text


def _recipe(text: str, items: list, parts: Sequence[str], at: int, predicate: str | None) -> None:
    # How ``text`` (items, FROM the relation ``parts`` at ``at``, WHERE (predicate)) is made,
    # for its tree (colmz.sql.tree.select_recipe).
    end = at + sum(len(identifier(p)) for p in parts) + len(parts) - 1
    where = None if predicate is None else (end + len(" WHERE ("), predicate)
    select_recipe(text, items, (at, tuple(parts), end), where)


def _shown(table: str | Sequence[str]) -> str:
    return table if isinstance(table, str) else ".".join(table)


def update_select(table: str | Sequence[str], columns: Sequence[str], assigned: Mapping[str, str],
                  predicate: str | None = None) -> str:
    """The rows an ``UPDATE`` writes: every column of ``table``, ``assigned`` ones computed.

    >>> update_select("t", ["k", "v"], {"v": "v || 'x'"}, "k = 1")
    'SELECT "k", (v || \\'x\\') AS "v" FROM "t" WHERE (k = 1)'
    """
    what = f"UPDATE {_shown(table)}"
    pieces = ["SELECT "]  # the text's, each user expression one (share_concat: its tokens kept)
    items = []  # where each item's text is (colmz.sql.tree.select_recipe)
    for c in columns:
        at = sum(map(len, pieces))
        if c in assigned:
            require_expression(assigned[c], f"{what}: value of {c!r}")
            items.append((at + 1, assigned[c], c))
            pieces += ["(", assigned[c], f") AS {identifier(c)}", ", "]
        else:
            items.append((at, None, at + len(identifier(c))))
            pieces += [identifier(c), ", "]
    unknown = [c for c in assigned if c not in columns]
    if unknown:
        raise SQLError(f"{what}: no column {unknown[0]!r}; columns are {list(columns)}")
    if not columns:
        return "SELECT " + select_where(table, predicate, f"{what}: predicate")[len("SELECT *"):]
    rel = relation(table)
    if predicate is not None:  # (checked as select_where checks it, its text not built)
        require_expression(predicate, f"{what}: predicate")
    pieces[-1] = f" FROM {rel}"
    at = sum(map(len, pieces)) - len(rel)
    if predicate is not None:
        pieces += [" WHERE (", predicate, ")"]
    text = share_concat(pieces)
    _recipe(text, items, (table,) if isinstance(table, str) else table, at, predicate)
    return text


def cast_select(source: str, columns: Sequence[tuple[str, str | None]]) -> str:
    """``SELECT`` each column of relation ``source``, cast to its DuckDB type when given.

    >>> cast_select("v", [("a", "DATE"), ("b", None)])
    'SELECT CAST("v"."a" AS DATE) AS "a", "v"."b" FROM "v"'
    """
    src = identifier(source)
    items = []
    for name, duck_type in columns:
        ref = f"{src}.{identifier(name)}"
        if duck_type is None:
            items.append(ref)
        else:
            if not duck_type.replace(" ", "").isalnum():
                raise SQLError(f"not a DuckDB type name: {duck_type!r}")
            if duck_type == "BLOB":  # text to bytea is PostgreSQL's bytea input
                items.append(f"{BYTEA_IN}({ref}) AS {identifier(name)}")
            else:
                items.append(f"CAST({ref} AS {duck_type}) AS {identifier(name)}")
    return f"SELECT {', '.join(items)} FROM {src}"


def select_by_position(relation: str, alias: str, items: Sequence[tuple[str | None, str]]) -> str:
    """A ``SELECT`` of the columns of ``relation`` (SQL text: a name or a parenthesised
    query) taken by position under ``alias``: one item per ``(form, name)`` of ``items``,
    ``form`` with ``{x}`` for the column (``None``: the column itself), named ``name``.

    >>> print(select_by_position("(q)", "__colmz_a", [(None, "k"), ("CAST({x} AS TEXT)", "v")]))
    SELECT "__colmz_a"."__colmz_c0" AS "k", CAST("__colmz_a"."__colmz_c1" AS TEXT) AS "v" FROM (q) AS "__colmz_a"("__colmz_c0", "__colmz_c1")
    """
    a = identifier(alias)
    cols = [identifier(f"{RESERVED_PREFIX}c{i}") for i in range(len(items))]
    out = ", ".join(f"{(form or '{x}').replace('{x}', f'{a}.{c}')} AS {identifier(name)}"
                    for (form, name), c in zip(items, cols))
    return f"SELECT {out} FROM {relation} AS {a}({', '.join(cols)})"


def splice(text: str, edits: Sequence[tuple[int, int, str]], start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` with each ``(a, b, new)`` of ``edits`` -- disjoint spans of it in
    increasing order, offsets into ``text`` -- replaced by ``new``.

    >>> splice("SELECT a + b FROM t", [(7, 8, "x"), (11, 12, "y")])
    'SELECT x + y FROM t'
    """
    out, last = [], start
    for a, b, new in edits:
        out += [text[last:a], new]
        last = b
    out.append(text[last:end])
    return "".join(out)
