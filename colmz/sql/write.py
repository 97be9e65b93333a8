"""Write planning: how an ``INSERT``'s (or ``UPDATE``'s) query result becomes rows of its
target's columns, as PostgreSQL and Materialize plan it.

Design
------
One implementation for every writer: a catalog ``INSERT``/``UPDATE`` into a table
(``colmz.catalog``) and a continual task's ``INSERT INTO`` its output
(``colmz.continual.batched``). The steps, in PostgreSQL's order
(``src/backend/parser/analyze.c`` ``transformInsertStmt`` upstream):

1. **Target columns** (:func:`insert_targets`): the column list names columns of the
   target (``no column``); without one, the expressions fill the first columns and the rest
   take their default (``NULL``: colmz's tables have no ``DEFAULT``). The arity must match,
   in PostgreSQL's words (:func:`arity_message`: ``INSERT has more expressions than target
   columns``).
2. **Literals** (:func:`coerce_literals`): an ``INSERT ... VALUES`` literal (and a plain
   ``SELECT``'s: :func:`colmz.sql.assign.typed_values`) takes the type of the column it is
   written to (PostgreSQL types an unknown-typed literal by its target), so
   ``'2024-01-02'`` into a ``date`` column is a date, not text; a text *value* is not a
   literal (:func:`colmz.sql.assign.untyped_columns`).
3. **Assignment casts** (:func:`assignment_query`, :func:`assign`): every value converts to
   its column's type by PostgreSQL's assignment casts (:mod:`colmz.sql.assign`), or the
   write is refused with PostgreSQL's message (``SchemaError``); a value outside a narrower
   integer type is PostgreSQL's ``integer out of range`` (``OverflowError``). What colmz
   stores alike is told apart by the declared type: nothing but text converts to ``json``/
   ``jsonb`` (:func:`check_json_sources`), and a ``varchar(n)`` value is measured against
   ``n`` (:func:`fit_lengths`).
4. **Values to columns** (:func:`insert_rows`): the rows of the named columns, in the
   target's order, ``NULL`` in the others.

A continual task converts inside each statement's own query (:func:`assignment_query` over
the statement's text); a catalog converts a result already computed, in Arrow when it can
(``colmz.sql.assign.arrow_assignment``), else in DuckDB over the rows registered under
:data:`VALUES_RELATION` for the one query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa

from colmz.order import ColumnSpec
from colmz.sql.assign import arrow_assignment, assignment_select, duckdb_type, pg_type_name
from colmz.sql.build import RESERVED_PREFIX, cast_select, identifier, select_by_position
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.jsonb import TEXT_CALLS, TEXT_TYPE
from colmz.sql.run import run_query
from colmz.sql.tree import parse_tree
from colmz.sql.typing_pass import case_results, untyped_literal
from colmz.updates import SchemaError

__all__ = ["VALUES_RELATION", "arity_message", "as_jsonb", "assign", "assignment_query", "coerce_literals",
           "check_json_sources", "fit_lengths", "insert_rows", "insert_targets", "is_json", "is_jsonb", "varchar_lengths",
           "check_jsonb_values", "jsonb_select"]

#: Where rows are registered for the one query that converts them (:func:`assign`,
#: :func:`coerce_literals`).
VALUES_RELATION = RESERVED_PREFIX + "values"
#: DuckDB's message for a value outside its target type, and PostgreSQL's for each type.
#: (A numeric's cast says "Failed to cast decimal value ... to type INT64"; a double's to a
#: real is PostgreSQL's float8_to_float4 overflow; its underflow is raised by the cast's own
#: check, :func:`colmz.sql.assign.assignment_cast`.)
_OUT_OF_RANGE = re.compile(r"out of range for the destination type (\w+)|Failed to cast decimal value \S+ to type (\w+)"
                           r"|(value out of range: underflow)")
_PG_RANGE = {"INT16": "smallint out of range", "INT32": "integer out of range",
             "INT64": "bigint out of range", "UINT16": "uint2 out of range",
             "UINT32": "uint4 out of range", "UINT64": "uint8 out of range",
             "FLOAT": "value out of range: overflow"}


def arity_message(expressions: int, targets: int) -> str | None:
    """PostgreSQL's (and Materialize's) words for an ``INSERT`` of ``expressions`` values
    into ``targets`` columns, or ``None`` when they match.

    >>> arity_message(3, 2)
    'INSERT has more expressions than target columns'
    >>> arity_message(2, 2) is None
    True
    """
    if expressions == targets:
        return None
    more = "expressions than target columns" if expressions > targets else "target columns than expressions"
    return f"INSERT has more {more}"


def insert_targets(schema: Sequence[ColumnSpec], columns: Sequence[str] | None, expressions: int,
                   what: str, table: str) -> tuple[list[ColumnSpec], list[str] | None]:
    """The target columns of an ``INSERT INTO table [(columns)]`` of ``expressions`` values
    into a relation of columns ``schema`` (step 1), and the column list in force (``None``:
    every column, in order).

    >>> s = (ColumnSpec("a", pa.int32()), ColumnSpec("b", pa.string()))
    >>> [c.name for c in insert_targets(s, None, 1, "INSERT INTO t", "t")[0]]
    ['a']
    >>> insert_targets(s, ["c"], 1, "INSERT INTO t", "t")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: INSERT INTO t: no column 'c'; columns are ['a', 'b']
    """
    names = [c.name for c in schema]
    twice = [c for i, c in enumerate(columns or ()) if c in columns[:i]]
    if twice:  # PostgreSQL's words (checkInsertTargets)
        raise SQLError(f'column "{twice[0]}" specified more than once')
    unknown = [c for c in columns or () if c not in names]
    if unknown:
        raise SQLError(f"INSERT INTO {table}: no column {unknown[0]!r}; columns are {names}")
    if columns is None and expressions < len(schema):
        # As PostgreSQL: the expressions fill the first columns, the rest take their
        # default (NULL: colmz's tables have no DEFAULT)
        columns = names[:expressions]
    message = arity_message(expressions, len(schema) if columns is None else len(columns))
    if message is not None:
        raise SchemaError(f"{what}: {message}")
    if columns is None:
        return list(schema), None
    return [schema[names.index(name)] for name in columns], list(columns)


def assignment_query(relation: str, sources: Sequence[pa.DataType], targets: Sequence[ColumnSpec],
                     what: str) -> str | None:
    """The ``SELECT`` converting ``relation``'s columns (of types ``sources``, by position)
    to ``targets`` by assignment casts (step 3), or ``None`` when nothing converts;
    ``SchemaError`` naming ``what`` and PostgreSQL's message when a column has no
    assignment cast (``UnsupportedSQL`` as raised).

    >>> assignment_query("r", [pa.int64()], [ColumnSpec("k", pa.int32())], "t")
    'SELECT CAST("__colmz_a"."__colmz_c0" AS INTEGER) AS "k" FROM r AS "__colmz_a"("__colmz_c0")'
    >>> assignment_query("r", [pa.bool_()], [ColumnSpec("k", pa.int32())], "t")
    Traceback (most recent call last):
    ...
    colmz.updates.SchemaError: t: column "k" is of type integer but expression is of type boolean
    """
    try:
        return assignment_select(relation, list(sources), [(c.name, c.type) for c in targets])
    except UnsupportedSQL:
        raise
    except SQLError as e:
        raise SchemaError(f"{what}: {e}") from None


def assign(con, rows: pa.Table, targets: Sequence[ColumnSpec], what: str, t: int = 0) -> pa.Table:
    """``rows`` converted to the types of ``targets`` by PostgreSQL's assignment casts
    (step 3), in Arrow when it can, else in one DuckDB query on ``con`` (``mz_now()`` is
    ``t``): ``SchemaError`` with PostgreSQL's message when a column has none,
    ``OverflowError`` when a value does not fit its column. Rows of another arity are
    returned as they are (``colmz.rows.conform`` says how they do not match).

    >>> from colmz.sql import session
    >>> out = assign(session(), pa.table({"x": [1.5, 2.5]}), [ColumnSpec("k", pa.int32())], "t")
    >>> out.column(0).to_pylist(), out.schema.types
    ([2, 2], [DataType(int32)])
    """
    if rows.num_columns != len(targets):
        return rows
    direct = arrow_assignment(rows, [c.type for c in targets])
    if direct is not None:
        return direct
    sel = assignment_query(identifier(VALUES_RELATION), [f.type for f in rows.schema], targets, what)
    if sel is None:
        return rows
    try:
        out = _run_over(con, rows, sel, t)
    except SQLError as e:
        m = _OUT_OF_RANGE.search(str(e))
        if m:
            dest = m.group(1) or m.group(2)
            said = m.group(3) or _PG_RANGE.get(dest, f"{dest} out of range")
            raise OverflowError(f"{what}: {said}") from None
        raise
    # Result columns keep the query's names (conform matches by position).
    return out.rename_columns(rows.column_names)


def coerce_literals(con, rows: pa.Table, targets: Sequence[ColumnSpec], t: int = 0,
                    untyped: Sequence[bool] | None = None) -> pa.Table:
    """An ``INSERT ... VALUES``'s text literals cast to their target columns' types (step
    2), in one DuckDB query on ``con``; other columns as they are. ``untyped`` says which
    columns hold only literals (:func:`colmz.sql.assign.untyped_columns`; default: all): a
    text column of another one is a text value, converted by assignment (or refused).

    >>> from colmz.sql import session
    >>> coerce_literals(session(), pa.table({"d": ["2024-01-02"]}), [ColumnSpec("d", pa.date32())]).schema.types
    [DataType(date32[day])]
    """
    untyped = [True] * rows.num_columns if untyped is None else untyped
    casts = [(name, duckdb_type(spec.type) if _is_text(col.type) and not _is_text(spec.type) and literal else None)
             for name, spec, col, literal in zip(rows.column_names, targets, rows.columns, untyped)]
    if all(c is None for _, c in casts) or rows.num_columns != len(targets):
        return rows
    return _run_over(con, rows, cast_select(VALUES_RELATION, casts), t)


def _run_over(con, rows: pa.Table, query: str, t: int) -> pa.Table:
    # ``query``'s result over ``rows``, registered as VALUES_RELATION for it alone
    con.register(VALUES_RELATION, rows)
    try:
        return run_query(con, query, t)[0]
    finally:
        con.unregister(VALUES_RELATION)


def insert_rows(con, rows: pa.Table, schema: Sequence[ColumnSpec], columns: Sequence[str] | None,
                *, literals: bool | Sequence[bool], what: str, table: str, t: int = 0) -> pa.Table:
    """The rows an ``INSERT INTO table [(columns)]`` writes into a relation of columns
    ``schema``, from its query's result ``rows``: steps 1 to 4 of the module docstring
    (``literals``: the query is a ``VALUES`` list, whose literals take their columns'
    types; or, per column, whether it holds only literals). The result has ``schema``'s
    columns, in order, ``NULL`` in those not written.

    >>> from colmz.sql import session
    >>> s = (ColumnSpec("a", pa.int32()), ColumnSpec("b", pa.string()))
    >>> insert_rows(session(), pa.table({"x": [7]}), s, ["b"], literals=False, what="INSERT INTO t",
    ...             table="t").to_pylist()
    [{'a': None, 'b': '7'}]
    """
    targets, columns = insert_targets(schema, columns, rows.num_columns, what, table)
    if literals:
        # As in PostgreSQL, literals take the type of the column they are written to.
        rows = coerce_literals(con, rows, targets, t, None if literals is True else literals)
    rows = assign(con, rows, targets, what, t)
    if columns is None:
        return rows
    given = dict(zip(columns, rows.columns))
    return pa.table({c.name: given.get(c.name, pa.nulls(rows.num_rows, c.type)) for c in schema})


#: A declared ``character varying(n)``: PostgreSQL's spellings, the length captured.
_VARCHAR_N = re.compile(r"\s*(?:varchar|character\s+varying)\s*\(\s*(\d+)\s*\)\s*", re.IGNORECASE)


def varchar_lengths(types: Sequence[str]) -> dict[int, int]:
    """The position and length ``n`` of each ``varchar(n)`` among a table's declared column
    types ``types`` (colmz stores them as text: :func:`fit_lengths` is what keeps ``n``).

    >>> varchar_lengths(["int", "VARCHAR(3)", "character varying ( 10 )", "varchar", "text"])
    {1: 3, 2: 10}
    """
    return {i: int(m.group(1)) for i, t in enumerate(types) if (m := _VARCHAR_N.fullmatch(t)) is not None}


def fit_lengths(rows: pa.Table, lengths: dict[int, int]) -> pa.Table:
    """``rows`` (a write's rows, its target's columns in order) as PostgreSQL stores them in
    ``varchar(n)`` columns (``lengths``: position to ``n``, :func:`varchar_lengths`): a value
    longer than ``n`` characters is refused with PostgreSQL's ``value too long for type
    character varying(n)`` (:class:`SQLError`) unless the excess is all spaces, which are cut
    (its ``varchar`` assignment, ``varchar()`` with ``isExplicit`` false). An explicit cast,
    ``x::varchar(n)``, truncates inside the query instead.

    >>> fit_lengths(pa.table({"v": ["ab", "abc  ", None]}), {0: 3}).column(0).to_pylist()
    ['ab', 'abc', None]
    >>> fit_lengths(pa.table({"v": ["abcd"]}), {0: 3})
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: value too long for type character varying(3)
    """
    import pyarrow.compute as pc

    for i, n in lengths.items():
        col = rows.column(i) if i < rows.num_columns else None
        if col is None or not _is_text(col.type):
            continue
        long = pc.fill_null(pc.greater(pc.utf8_length(col), n), False)
        if not pc.any(long).as_py():
            continue
        excess = pc.utf8_slice_codeunits(pc.filter(col, long), n)
        if not pc.all(pc.match_substring_regex(excess, r"^ *$")).as_py():
            raise SQLError(f"value too long for type character varying({n})")
        cut = pc.if_else(long, pc.utf8_slice_codeunits(col, 0, n), col)
        rows = rows.set_column(i, rows.schema.field(i), cut.cast(col.type))
    return rows


def is_jsonb(type_sql: str) -> bool:
    """Whether a column declared of type ``type_sql`` is PostgreSQL's ``jsonb`` (colmz stores
    it as text: :func:`as_jsonb` is what makes the text jsonb's).

    >>> is_jsonb("JSONB"), is_jsonb(" jsonb "), is_jsonb("json"), is_jsonb("text")
    (True, True, False, False)
    """
    return type_sql.strip().upper() == "JSONB"


def is_json(type_sql: str) -> bool:
    """Whether a column declared of type ``type_sql`` is PostgreSQL's ``json`` (its text kept
    as written, but checked to be JSON: :func:`as_jsonb`'s ``json_columns``).

    >>> is_json("json"), is_json("JSONB")
    (True, False)
    """
    return type_sql.strip().upper() == "JSON"


def check_json_sources(types: Sequence[pa.DataType], targets: Sequence[tuple[str, str] | None], what: str) -> None:
    """PostgreSQL's type error of a value of a type other than text (and ``unknown``)
    written to a ``json``/``jsonb`` column: ``targets`` gives, for each value's type in
    ``types``, its column's name and type when that is ``json`` or ``jsonb`` (``None``
    otherwise). PostgreSQL has no assignment cast to them from a number, a boolean or any
    other type (colmz holds them as text, whose assignment casts would accept one); a text
    value is :func:`check_jsonb_values`'s to tell apart from a json one.

    >>> check_json_sources([pa.string(), pa.null()], [("j", "jsonb"), ("j", "jsonb")], "INSERT INTO t")
    >>> check_json_sources([pa.int32()], [("j", "jsonb")], "INSERT INTO t")
    Traceback (most recent call last):
    ...
    colmz.updates.SchemaError: INSERT INTO t: column "j" is of type jsonb but expression is of type integer
    """
    for t, target in zip(types, targets):
        if target is not None and not (_is_text(t) or pa.types.is_string_view(t) or pa.types.is_null(t)):
            raise SchemaError(f'{what}: column "{target[0]}" is of type {target[1]} but expression is of type '
                              f"{pg_type_name(t)}")


def as_jsonb(rows: pa.Table, columns: Sequence[int], json_columns: Sequence[int] = ()) -> pa.Table:
    """``rows`` (a write's rows, its target's columns in order) with each column at the
    positions ``columns`` (jsonb columns, held as text) as PostgreSQL stores a jsonb value:
    its text read as JSON and printed as jsonb prints it (keys sorted by length then bytes,
    the last of repeated keys kept, ``": "`` and ``", "``:
    :func:`colmz.sql.transforms.jsonb_text`); text that is not JSON raises PostgreSQL's
    ``invalid input syntax for type json`` (:class:`SQLError`), as its jsonb input does.
    The columns at ``json_columns`` (``json``) keep their text as written once it reads as
    JSON (the same error where it does not).

    >>> as_jsonb(pa.table({"j": ['{"b":1,"a": [1,2], "b": 2}', None]}), [0]).column(0).to_pylist()
    ['{"a": [1, 2], "b": 2}', None]
    >>> as_jsonb(pa.table({"j": ['{"b":1,  "a": 2}']}), [], [0]).column(0).to_pylist()
    ['{"b":1,  "a": 2}']
    """
    from colmz.sql.transforms import jsonb_text

    def read(col) -> list:
        out = []
        for v in col.to_pylist():
            try:
                out.append(None if v is None else jsonb_text(v))
            except ValueError:
                shown = v if len(v) <= 60 else v[:57] + "..."
                raise SQLError(f'invalid input syntax for type json: "{shown}"') from None
        return out

    for i in json_columns:
        if i < rows.num_columns and pa.types.is_string(rows.column(i).type):
            read(rows.column(i))  # read only: json keeps the text as written
    for i in columns:
        col = rows.column(i) if i < rows.num_columns else None
        if col is not None and _is_text(col.type):
            rows = rows.set_column(i, rows.schema.field(i), pa.array(read(col), col.type))
    return rows


def jsonb_select(relation: str, names: Sequence[str], jsonb: Sequence[int], json: Sequence[int] = ()) -> str:
    """A ``SELECT`` of ``relation``'s columns (SQL text, by position) named ``names``, the
    ones at ``jsonb`` read as PostgreSQL's jsonb input reads text when it runs
    (:data:`colmz.sql.transforms.JSONB_IN`): what a write to a jsonb column stores; the ones
    at ``json`` kept as written once they read so (a json column's write).

    >>> print(jsonb_select("(q)", ["k", "j"], [1]))
    SELECT "__colmz_j"."__colmz_c0" AS "k", __colmz_jsonb_in(CAST("__colmz_j"."__colmz_c1" AS VARCHAR)) AS "j" FROM (q) AS "__colmz_j"("__colmz_c0", "__colmz_c1")
    """
    from colmz.sql.transforms import JSONB_IN

    read = f"{JSONB_IN}(CAST({{x}} AS VARCHAR))"
    forms = [read if i in jsonb else f"CASE WHEN {read} IS NULL THEN NULL ELSE CAST({{x}} AS VARCHAR) END"
             if i in json else None for i in range(len(names))]
    return select_by_position(relation, "__colmz_j", list(zip(forms, names)))


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def check_jsonb_values(query: str, targets: Sequence[str | None], text_columns: frozenset[str],
                       jsonb_columns: frozenset[str], types: Sequence[str] = ()) -> None:
    """PostgreSQL's type error of an ``INSERT`` writing a ``text`` expression to a ``jsonb``
    column (PostgreSQL has no assignment cast from text to jsonb: only an untyped string
    literal, NULL or a jsonb value is accepted there).

    ``targets`` names the column each expression of ``query`` (a ``VALUES`` list or a
    ``SELECT``) is written to when it is ``jsonb`` (``None`` otherwise); ``text_columns`` and
    ``jsonb_columns`` are the (lower-case) names of the text and jsonb columns of the
    relations ``query`` reads; ``types`` the SQL type of each target (``jsonb`` where not
    given: ``json`` has no assignment cast from text either). An expression is text when it
    is visibly one -- a cast to a text type, a text function, ``||`` of no jsonb operand, a
    ``CASE`` or ``coalesce`` of untyped literals or text (as PostgreSQL resolves it), or a
    column of a text type (its name not also a jsonb column's); any other is left for the
    write to convert (:func:`as_jsonb`). An ``UPDATE``'s assignments are checked as its
    select list (:func:`colmz.sql.build.update_select`).

    >>> check_jsonb_values("VALUES (1, '{}')", [None, "j"], frozenset(), frozenset())
    >>> check_jsonb_values("VALUES (1, '{' || '}')", [None, "j"], frozenset(), frozenset())
    Traceback (most recent call last):
    colmz.sql.SQLError: column "j" is of type jsonb but expression is of type text
    """
    if not any(targets):
        return
    try:
        (q,) = parse_tree(query)
    except (SQLError, ValueError):  # not one query the tree reads: nothing told here
        return
    if q.type != "SELECT_NODE":
        return
    if q.from_ is not None and q.from_.type == "EXPRESSION_LIST" and q.items and q.items[0].cls == "STAR":
        rows = q.from_.rows
    elif any(e.cls == "STAR" for e in q.items):
        return
    else:
        rows = (q.items,)

    def jsonb(e) -> bool:
        if e.cls == "CAST" and len(e.children) == 2 and e.children[1].start >= 0:
            return query[e.children[1].start : e.children[1].end].strip().lower() == "jsonb"
        return e.cls == "COLUMN_REF" and bool(e.name) and e.name[-1].lower() in jsonb_columns

    def text(e) -> bool:
        if e.cls == "CAST" and len(e.children) == 2 and e.children[1].start >= 0:
            return TEXT_TYPE.fullmatch(" ".join(query[e.children[1].start : e.children[1].end].lower().split())) \
                is not None
        if e.cls == "FUNCTION" and len(e.name) == 1:
            if e.name[0] == "||":
                return not any(jsonb(c) for c in e.children)
            return e.name[0].lower() in TEXT_CALLS
        if e.cls == "COLUMN_REF" and e.name:
            n = e.name[-1].lower()
            return n in text_columns and n not in jsonb_columns
        if e.cls == "CASE" or (e.cls == "OPERATOR" and e.type == "OPERATOR_COALESCE"):
            # PostgreSQL resolves a CASE's or coalesce's results of untyped literals (and
            # text) to text (select_common_type: all unknown is text)
            results = e.children if e.cls != "CASE" else case_results(e)
            return bool(results) and all(untyped_literal(r) or text(r) for r in results)
        return False

    for row in rows:
        for i, (e, target) in enumerate(zip(row, targets)):
            if target is not None and text(e):
                typ = types[i] if i < len(types) and types[i] else "jsonb"
                raise SQLError(f'column "{target}" is of type {typ} but expression is of type text')
