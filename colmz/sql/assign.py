"""Assignment casts: what PostgreSQL (and Materialize) convert on ``INSERT``, and how.

An ``INSERT`` -- into a table, or a continual task's ``INSERT INTO`` its output -- converts
each value of its query to the type of its target column when PostgreSQL has a cast for
the pair in the *assignment* context (``pg_cast.castcontext`` ``a`` or ``i``, PostgreSQL's
``src/include/catalog/pg_cast.dat``; Materialize's ``src/sql/src/plan/typeconv.rs`` follows
it), and otherwise refuses with PostgreSQL's error: ``column "k" is of type integer but
expression is of type text``. For colmz's column types that is:

* integers to any integer (a narrowing one checks the range: ``integer out of range``), to
  ``real``/``double precision``;
* ``real``/``double precision`` to the other float and to integers, rounding half to even
  (PostgreSQL's ``rint``); a nonzero double that would be a zero real is PostgreSQL's
  ``value out of range: underflow``; ``numeric`` (DuckDB's ``DECIMAL``/``HUGEINT``
  results) to integers rounding half away from zero, and to floats;
* ``date`` to ``timestamp``/``timestamptz``, ``timestamp`` and ``timestamptz`` to each other
  and to ``date``;
* *anything* to ``text`` (PostgreSQL's automatic I/O conversion casts to string types are
  assignment casts), printed as PostgreSQL prints it: floats by their shortest text (``2``,
  not DuckDB's ``2.0``), booleans ``true``/``false``, ``bytea`` as ``\\x`` and hex.
  ``interval`` or an array to text is refused (:class:`colmz.sql.UnsupportedSQL`): DuckDB
  prints ``months`` where PostgreSQL prints ``mons``, ``[1, 2]`` where it prints ``{1,2}``;
* an array to an array by its elements' casts, to ``text[]`` each element printed as the
  scalar's assignment prints it.

Nothing converts *from* text (PostgreSQL's I/O casts from string types are explicit only),
nor between booleans and numbers. A ``NULL`` of unknown type takes the column's type.

:func:`assignment_select` writes the conversion as one ``SELECT`` over a relation holding the
query's result (its columns taken by position), so a continual task converts inside each
statement's own query and a catalog ``INSERT`` converts its rows in DuckDB.

``INSERT ... VALUES`` resolves its literals first, as PostgreSQL does (``transformInsertStmt``
coerces each ``VALUES`` item to its target column before the rows are combined): a quoted
literal is of no type until its column gives it one (:func:`typed_values`); so is an
``UPDATE``'s ``SET c = '...'`` (:func:`typed_assignment`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import pyarrow as pa

from colmz.sql.build import select_by_position, splice
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.tree import parse_tree
from colmz.updates import SchemaError

__all__ = ["arrow_assignment", "assignment_cast", "assignment_select", "duckdb_type", "pg_type_name", "typed_assignment",
           "typed_values", "untyped_columns"]

_INTS = {
    pa.int8(): ("smallint", "SMALLINT"),  # Materialize has no 1-byte integer: DuckDB's TINYINT
    pa.int16(): ("smallint", "SMALLINT"),
    pa.int32(): ("integer", "INTEGER"),
    pa.int64(): ("bigint", "BIGINT"),
    pa.uint8(): ("uint2", "USMALLINT"),
    pa.uint16(): ("uint2", "USMALLINT"),
    pa.uint32(): ("uint4", "UINTEGER"),
    pa.uint64(): ("uint8", "UBIGINT"),
}
_FLOATS = {pa.float32(): ("real", "FLOAT"), pa.float64(): ("double precision", "DOUBLE")}


#: The families of Arrow types assignment tells apart, each with its test: a type is of the
#: first family whose test holds (``"other"`` when none does).
_FAMILIES = (
    ("null", pa.types.is_null),
    ("int", _INTS.__contains__),
    ("float", lambda t: t in _FLOATS or pa.types.is_float16(t)),
    ("numeric", pa.types.is_decimal),
    ("text", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)),
    ("bool", pa.types.is_boolean),
    ("bytea", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)),
    ("date", pa.types.is_date),
    ("timestamptz", lambda t: pa.types.is_timestamp(t) and bool(t.tz)),
    ("timestamp", pa.types.is_timestamp),
    ("interval", lambda t: pa.types.is_duration(t) or pa.types.is_interval(t)),
    ("array", lambda t: pa.types.is_list(t) or pa.types.is_large_list(t)),
)


def _family(t: pa.DataType) -> str:
    return next((name for name, test in _FAMILIES if test(t)), "other")


#: Each family's PostgreSQL name (as its errors say) and DuckDB type; integers and floats
#: by their Arrow type (:data:`_INTS`, :data:`_FLOATS`).
_NAMES = {"null": ("unknown", None), "numeric": ("numeric", None), "text": ("text", "VARCHAR"),
          "bool": ("boolean", "BOOLEAN"), "bytea": ("bytea", "BLOB"), "date": ("date", "DATE"),
          "timestamp": ("timestamp without time zone", "TIMESTAMP"),
          "timestamptz": ("timestamp with time zone", "TIMESTAMPTZ"), "interval": ("interval", "INTERVAL")}


def _names(t: pa.DataType) -> tuple[str, str | None]:
    fam = _family(t)
    if fam == "int":
        return _INTS[t]
    if fam == "array":  # PostgreSQL's element[] of a one-dimensional array
        pg, duck = _names(t.value_type)
        return pg + "[]", None if duck is None else duck + "[]"
    return _FLOATS.get(t, ("real", None)) if fam == "float" else _NAMES.get(fam, (str(t), None))


def pg_type_name(t: pa.DataType) -> str:
    """PostgreSQL's name of the type a column of Arrow type ``t`` holds (as its errors say).

    >>> pg_type_name(pa.int32()), pg_type_name(pa.string()), pg_type_name(pa.timestamp("us", "UTC"))
    ('integer', 'text', 'timestamp with time zone')
    """
    return _names(t)[0]


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB type a value written to a column of Arrow type ``t`` is cast to.

    >>> duckdb_type(pa.timestamp("us", tz="UTC")), duckdb_type(pa.float32())
    ('TIMESTAMPTZ', 'FLOAT')
    """
    duck = _names(t)[1]
    if duck is None:
        raise SchemaError(f"no DuckDB type for a value written to a {t} column")
    return duck


#: (source, target) families PostgreSQL converts by an assignment cast (to text: see below);
#: the same family converts too (another Arrow width or unit).
_ASSIGNABLE = frozenset({("numeric", "int"), ("float", "int"), ("int", "float"), ("numeric", "float"),
                         *((f, f) for f in ("int", "float", "bool", "bytea", "interval")),
                         *product(("date", "timestamp", "timestamptz"), repeat=2)})


def assignment_cast(source: pa.DataType, target: pa.DataType, column: str) -> str | None:
    """The SQL converting ``{x}`` (a placeholder for the value) of type ``source`` to a
    column of type ``target`` on assignment: ``None`` when the types are the same, else a
    format string with one ``{x}``. Raises :class:`SQLError` with PostgreSQL's message
    when PostgreSQL has no assignment cast for the pair.

    >>> assignment_cast(pa.int32(), pa.string(), "s")
    'CAST({x} AS VARCHAR)'
    >>> assignment_cast(pa.float64(), pa.int16(), "k")
    'CAST(round_even({x}, 0) AS SMALLINT)'
    >>> assignment_cast(pa.string(), pa.int32(), "k")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: column "k" is of type integer but expression is of type text
    """
    if source == target:
        return None
    have, want = _family(source), _family(target)
    if have == "null":
        return f"CAST({{x}} AS {duckdb_type(target)})"
    if want == "text":
        if have == "text":
            return None  # large_string / string_view: the same text
        if have == "float":
            from colmz.sql.translate import pg_float_text

            return pg_float_text("{x}", "real" if source == pa.float32() else "double")
        if have == "bytea":
            return "('\\x' || lower(hex({x})))"
        if have == "interval":
            raise UnsupportedSQL(
                f'assignment of an interval to text column "{column}" is not supported by colmz '
                "(DuckDB prints intervals otherwise than PostgreSQL): cast it explicitly"
            )
        if have in ("int", "numeric", "bool", "date", "timestamp", "timestamptz"):
            return "CAST({x} AS VARCHAR)"
        if have == "array":
            raise UnsupportedSQL(
                f'assignment of an array to text column "{column}" is not supported by colmz '
                "(PostgreSQL prints arrays as {1,2}): cast it explicitly"
            )
    elif have == want == "array" and _family(target.value_type) == "text" and _family(source.value_type) in (
            "int", "float", "bool", "date", "timestamp", "timestamptz"):
        # PostgreSQL converts each element by its assignment cast to text (printed as a
        # scalar's is: a float by its shortest text)
        if _family(source.value_type) == "float":
            from colmz.sql.translate import pg_float_text

            kind = "real" if source.value_type == pa.float32() else "double"
            return f"list_transform({{x}}, lambda __colmz_e: {pg_float_text('__colmz_e', kind)})"
        return "CAST({x} AS VARCHAR[])"
    elif have == want == "array" and _assignable_elements(source.value_type, target.value_type):
        return f"CAST({{x}} AS {duckdb_type(target)})"
    elif source == pa.float64() and target == pa.float32():
        # PostgreSQL's float8_to_float4 refuses a nonzero double that becomes a zero real
        # (DuckDB's cast rounds it to zero; its overflow DuckDB refuses itself)
        return ("CASE WHEN {x} <> 0 AND CAST({x} AS FLOAT) = 0 THEN error('value out of range: underflow') "
                "ELSE CAST({x} AS FLOAT) END")
    elif (have, want) in _ASSIGNABLE:
        # a float to an integer rounds half to even (PostgreSQL's rint), a numeric half away
        # from zero (DuckDB's cast, as PostgreSQL's)
        return f"CAST({'round_even({x}, 0)' if (have, want) == ('float', 'int') else '{x}'} AS {duckdb_type(target)})"
    raise SQLError(
        f'column "{column}" is of type {pg_type_name(target)} but expression is of type '
        f"{pg_type_name(source)}"
    )


def _assignable_elements(source: pa.DataType, target: pa.DataType) -> bool:
    # PostgreSQL converts an array by its elements' assignment cast; to text only from text,
    # whose elements print alike
    have, want = _family(source), _family(target)
    return source == target or have == "null" or (want != "text" and (have, want) in _ASSIGNABLE) or (
        have == want == "text")


def assignment_select(relation: str, sources: Sequence[pa.DataType],
                      targets: Sequence[tuple[str, pa.DataType]]) -> str | None:
    """A ``SELECT`` of the columns of ``relation`` (SQL text: a name or a parenthesised
    query) converted by assignment to ``targets`` -- ``(name, type)`` pairs, by position --
    or ``None`` when every type already matches. Columns are named ``targets``' names.

    >>> print(assignment_select('"v"', [pa.int32(), pa.string()], [("s", pa.string()), ("t", pa.string())]))
    SELECT CAST("__colmz_a"."__colmz_c0" AS VARCHAR) AS "s", "__colmz_a"."__colmz_c1" AS "t" FROM "v" AS "__colmz_a"("__colmz_c0", "__colmz_c1")
    """
    if len(sources) != len(targets):
        raise SQLError(f"{len(sources)} expression(s) for {len(targets)} target column(s)")
    casts = [assignment_cast(s, t, name) for s, (name, t) in zip(sources, targets)]
    if all(c is None for c in casts):
        return None
    return select_by_position(relation, "__colmz_a", [(c, name) for c, (name, _) in zip(casts, targets)])


def arrow_assignment(table: pa.Table, targets: Sequence[pa.DataType]) -> pa.Table | None:
    """``table`` converted by assignment to ``targets`` where Arrow's checked cast gives
    PostgreSQL's answer exactly -- integers to integers in range, a real to a double, text
    to text, equal types -- else ``None`` (then :func:`assignment_select` converts in
    DuckDB, and says PostgreSQL's error for a value out of range). It spares a one-row
    ``INSERT INTO t VALUES (1, 'x')`` into a ``bigint`` column a DuckDB query.

    >>> arrow_assignment(pa.table({"k": pa.array([1], pa.int32())}), [pa.int64()]).schema.types
    [DataType(int64)]
    >>> arrow_assignment(pa.table({"k": [1]}), [pa.string()]) is None
    True
    """
    if table.num_columns != len(targets):
        return None
    cols = []
    for col, target in zip(table.columns, targets):
        source = col.type
        families = (_family(source), _family(target))
        exact = (source == target or families in (("int", "int"), ("text", "text"))
                 or (source == pa.float32() and target == pa.float64()))
        if not exact:
            return None
        try:
            cols.append(col if source == target else col.cast(target, safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None  # out of range: DuckDB's path raises PostgreSQL's message
    return pa.table(cols, names=table.column_names)


#: Column types whose string literals :func:`typed_values` casts (PostgreSQL's name for each).
_LITERAL_TYPES = {pa.int16(): "smallint", pa.int32(): "integer", pa.int64(): "bigint",
                  pa.float32(): "real", pa.float64(): "double precision", pa.bool_(): "boolean",
                  pa.date32(): "date", pa.month_day_nano_interval(): "interval"}


def _literal_type(target: pa.DataType) -> str | None:
    # the SQL name a string literal of a ``target`` column is cast to (None: left as it is);
    # an array column's literal is PostgreSQL's array text, '{1,2,NULL}', of its element type
    if pa.types.is_timestamp(target):
        return "timestamptz" if target.tz else "timestamp"
    if pa.types.is_list(target):
        element = "text" if pa.types.is_string(target.value_type) else _literal_type(target.value_type)
        return None if element is None else element + "[]"
    return _LITERAL_TYPES.get(target)


def typed_assignment(expression: str, target: pa.DataType) -> str:
    """An ``UPDATE``'s ``SET`` value ``expression`` typed by its column of type ``target``,
    as PostgreSQL's ``transformUpdateTargetList`` coerces it: a string literal alone is read
    by the column type's input rules (``'{4,5}'`` of an ``integer[]`` column is an array,
    ``'2 days'`` of an ``interval`` one an interval); any other value is unchanged (converted
    by assignment, :func:`assignment_cast`).

    >>> typed_assignment("'{4,5}'", pa.list_(pa.int32())), typed_assignment("k + 1", pa.int32())
    ("'{4,5}'::integer[]", 'k + 1')
    """
    try:
        trees = parse_tree(f"SELECT {expression}")
    except SQLError:
        return expression  # (DuckDB's parser says what is wrong when the update runs)
    items = trees[0].items if len(trees) == 1 and trees[0].type == "SELECT_NODE" else ()
    name = _literal_type(target) or ("boolean" if pa.types.is_boolean(target) else None)
    if len(items) != 1 or items[0].literal is None or items[0].literal.kind != "STRING" or name is None:
        return expression
    return f"{expression.strip()}::{name}"


def typed_values(query: str, targets: Sequence[pa.DataType], text: Sequence[bool] | None = None) -> str:
    """``query`` (an ``INSERT``'s ``VALUES`` list) with each value typed by its column, as
    PostgreSQL's ``transformInsertRow`` coerces each item before the rows are combined:
    a string literal of a non-text column cast to the column's type (read by that type's
    input rules: ``'2.5'`` is no integer, ``'1e400'`` no double), a decimal literal of a
    float column too (PostgreSQL's numeric to float cast reads the numeric's text: ``1e400``
    is no double), a value of a text column cast to text where the column has string
    literals or the list more than one row (``(1.50), (true)`` into text are ``'1.50'`` and
    ``'true'``), and ``DEFAULT`` written ``NULL`` (colmz's columns have no default); DuckDB
    then combines rows whose values already agree. ``text`` says which ``targets`` are text
    columns (default: every string one; a ``jsonb`` column's string is not). Rows shorter
    than ``targets`` fill its first columns (PostgreSQL's ``INSERT`` without a column list).
    A plain ``SELECT``'s string literals (no set operation, ``DISTINCT``, ``ORDER BY`` or
    ``GROUP BY``) are typed as a one-row list's. ``query`` unchanged otherwise, or when it has
    more than ``len(targets)`` values a row (the caller reports the arity).

    >>> typed_values("VALUES ('NaN'), (1.5)", [pa.float64()])
    "VALUES ('NaN'::double precision), (1.5::double precision)"
    >>> typed_values("VALUES (1, 'a'), (DEFAULT, 3)", [pa.int32(), pa.string()])
    "VALUES (1, 'a'), (NULL, CAST((3) AS text))"
    >>> typed_values("SELECT '5' AS a, k FROM u LIMIT 1", [pa.int32(), pa.int32()])
    "SELECT '5'::integer AS a, k FROM u LIMIT 1"
    """
    try:
        trees = parse_tree(query)
    except SQLError:
        return query  # DuckDB's parser says what is wrong when the query runs
    q = trees[0] if len(trees) == 1 else None
    rows = q.from_.rows if q is not None and q.from_ is not None and q.from_.type == "EXPRESSION_LIST" else ()
    # INSERT ... SELECT: PostgreSQL leaves the select list's literals unknown too (its
    # sub-query does not resolve them to text) unless a set operation, DISTINCT, ORDER BY or
    # GROUP BY resolves them first
    selected = not rows and q is not None and q.type == "SELECT_NODE" and bool(q.items) and not q.group_by and all(
        m.type == "LIMIT_MODIFIER" for m in q.modifiers) and not any(i.cls == "STAR" for i in q.items)
    rows = (q.items,) if selected else rows
    if not rows or any(len(r) != len(rows[0]) for r in rows) or len(rows[0]) > len(targets):
        return query
    targets = targets[: len(rows[0])]
    edits: list[tuple[int, int, str]] = []
    for i, target in enumerate(targets):
        cells = [r[i] for r in rows]
        if any(c.start < 0 for c in cells):
            continue
        defaults = [] if selected else [c for c in cells if c.cls == "DEFAULT"]  # (a SELECT's: an error)
        edits += [(c.start, c.end, "NULL") for c in defaults]
        cells = [c for c in cells if c.cls != "DEFAULT"]
        strings = [c for c in cells if c.literal is not None and c.literal.kind == "STRING"]
        name = _literal_type(target)
        if name in ("real", "double precision"):
            # a decimal literal is PostgreSQL's numeric, converted to a float by its text
            strings += [c for c in cells if c.literal is not None and c.literal.kind == "NUMERIC"]
        is_text = (pa.types.is_string(target) or pa.types.is_large_string(target)) if text is None else text[i]
        if not strings and not (is_text and len(rows) > 1):
            continue
        if name == "boolean" and not selected and len(strings) + sum(c.literal is not None and c.literal.kind == "NULL_LITERAL"
                                                    for c in cells) == len(cells):
            # strings (and NULLs) alone convert after the rows are combined, by DuckDB's cast
            # with PostgreSQL's message; colmz's translation of 'x'::boolean says the
            # literal in single quotes where PostgreSQL says "x"
            continue
        if name is not None:
            # the :: form: colmz reads a literal's :: cast by the type's input rules
            # (a negative decimal parenthesised: its minus is its text's, as PostgreSQL's
            # numeric says it)
            edits += [(c.start, c.end, f"({query[c.start:c.end]})::{name}" if query[c.start] == "-" else
                       f"{query[c.start:c.end]}::{name}") for c in strings]
        elif is_text:
            edits += [(c.start, c.end, f"CAST(({query[c.start:c.end]}) AS text)") for c in cells
                      if c.literal is None or c.literal.kind not in ("STRING", "NULL_LITERAL")]
    return splice(query, sorted(edits))


def untyped_columns(query: str, width: int) -> list[bool]:
    """Which of the ``width`` columns of ``query`` (an ``INSERT``'s ``VALUES`` list) hold only
    string literals, ``NULL`` and ``DEFAULT`` -- PostgreSQL's values of unknown type, which
    take their column's type; any other value in a column (``CASE WHEN c THEN '7' END``
    is text) converts by assignment. Every column when ``query`` is not one ``VALUES`` list
    the tree reads.

    >>> untyped_columns("VALUES ('1', 2), (NULL, 3)", 2), untyped_columns("VALUES (CASE WHEN true THEN '7' END)", 1)
    ([True, False], [False])
    """
    try:
        trees = parse_tree(query)
    except SQLError:
        return [True] * width
    q = trees[0] if len(trees) == 1 else None
    rows = q.from_.rows if q is not None and q.from_ is not None and q.from_.type == "EXPRESSION_LIST" else ()
    if not rows or any(len(r) != width for r in rows):
        return [True] * width
    return [all(c.cls == "DEFAULT" or (c.literal is not None and c.literal.kind in ("STRING", "NULL_LITERAL"))
                for c in (r[i] for r in rows)) for i in range(width)]
