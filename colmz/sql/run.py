"""Running built SQL in DuckDB: colmz's connection and the one-query check.

:func:`connect` makes a fresh in-memory database set up to read PostgreSQL arithmetic, with
the macros and functions translated queries call, its configuration locked (its docstring
lists the settings); they are the database's (``SET GLOBAL``), so every connection to it
has them. :func:`session` is a new connection to the process's colmz database for that
``external_access`` (made once, by ``connect``), which is what a ``colmz.Catalog`` and a
continual task take: opening one costs microseconds, where ``connect`` costs tens of
milliseconds. Sessions share only what ``connect`` defines: the tables a session registers
are its own (DuckDB's registrations are per connection), and nothing else is ever created
there. :func:`run_query` runs a text only after DuckDB itself confirmed it is exactly one
``SELECT`` (:func:`check_one_query`), then puts the evaluation time in for ``mz_now()``
(:func:`colmz.sql.substitute_now`) and turns DuckDB's errors into colmz's.
"""

from __future__ import annotations

import os
import re
import threading

import pyarrow as pa

from colmz.sql import jsonb, pgfuncs
from colmz.sql.build import NOW_FORMS, now_value
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.floatcols import FLOAT_COLUMN_MACROS
from colmz.sql.tokens import CACHED_CHARS, tokenize
from colmz.sql.transforms import (
    AGG_ARRAYS_ERRORS,
    TRANSFORM_FUNCTIONS,
    TRANSFORM_MACROS,
    TRANSFORM_NULL_FUNCTIONS,
    TRANSFORM_TYPED_MACROS,
)
from colmz.sql.translate import (
    FUNCTIONS,
    MACROS,
    SUM_ARGUMENT,
    SUM_ARGUMENT_UNTYPED,
    bind_relations,
    now_pieces,
    substitute_now,
    translate,
    uses_now,
)

__all__ = ["check_one_query", "clear_caches", "connect", "require_duckdb", "run_query", "session"]


def require_duckdb():
    """Import DuckDB, or raise an ``ImportError`` naming the extra that installs it.

    >>> require_duckdb().__name__
    'duckdb'
    """
    try:
        import duckdb
    except ImportError as e:
        raise ImportError(
            "colmz's SQL (Catalog, SQL statements of ContinualTask) needs DuckDB: "
            "pip install 'colmz[sql]'"
        ) from e
    return duckdb


def connect(external_access: bool = True):
    """A fresh in-memory DuckDB database set up to read PostgreSQL arithmetic, and its
    connection (:func:`session` is a connection to the process's shared one).

    Every colmz connection turns DuckDB's Python *replacement scans* off (a query must see
    only the tables colmz registers, never a Python variable that happens to share a
    table's name) and then locks its configuration, so no text it later runs can change a
    setting. ``external_access=False`` also turns DuckDB's external access off: no
    ``read_csv``, ``glob``, ``COPY``, ``ATTACH`` or extension load reaches the file system
    or the network -- with it on (the default, as DuckDB's) a query can read any local file
    the process can.

    >>> connect().sql("SELECT 7 / 2 AS q").fetchall()
    [(3,)]
    >>> connect().sql("SELECT x FROM (VALUES (1), (NULL)) v(x) ORDER BY x DESC").fetchall()
    [(None,), (1,)]
    """
    duckdb = require_duckdb()
    _check_external_access(external_access)
    con = duckdb.connect(":memory:")
    # GLOBAL: the database's settings, which every connection to it (session()) starts with
    con.execute("SET GLOBAL python_enable_replacements = false")
    con.execute("SET GLOBAL integer_division = true")
    con.execute("SET GLOBAL TimeZone = 'UTC'")  # as Materialize's sessions; mz_now() casts in UTC
    # PostgreSQL orders NULL above every value: last under ASC, first under DESC (ORDER BY and
    # window orderings alike); DuckDB's default puts it last both ways.
    con.execute("SET GLOBAL default_null_order = 'nulls_last_on_asc_first_on_desc'")
    try:
        # PostgreSQL raises on a division by zero; DuckDB before this setting returned NULL.
        con.execute("SET GLOBAL error_on_division_by_zero = true")
    except Exception as e:  # pragma: no cover - older DuckDB without the setting
        if not type(e).__module__.startswith(("duckdb", "_duckdb")):
            raise
    # what translated queries and colmz.sql.jsonb's rules call
    for name, fn, args, result in FUNCTIONS + TRANSFORM_FUNCTIONS + jsonb.FUNCTIONS + pgfuncs.FUNCTIONS:
        con.create_function(name, fn, list(args), result, type="arrow", side_effects=False)
    for name, fn, args, result in TRANSFORM_NULL_FUNCTIONS + jsonb.NULL_FUNCTIONS + pgfuncs.NULL_FUNCTIONS:
        con.create_function(name, fn, list(args), result, type="arrow", side_effects=False,
                            null_handling="special")
    # (macro, its form for DuckDB before 1.4, which has no typed macro parameters)
    macros = [*((m, None) for m in jsonb.MACROS), *TRANSFORM_TYPED_MACROS, *pgfuncs.TYPED_MACROS,
              *((m, SUM_ARGUMENT_UNTYPED if SUM_ARGUMENT in m else None)
                for m in MACROS + TRANSFORM_MACROS + FLOAT_COLUMN_MACROS + pgfuncs.MACROS)]
    for macro, untyped in macros:
        try:
            con.execute(macro)
        except Exception as e:
            if untyped is None or type(e).__name__ != "ParserException":
                raise
            con.execute(untyped)
    if not external_access:
        con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def _check_external_access(external_access) -> None:
    if not isinstance(external_access, bool):
        raise TypeError(f"external_access must be a bool, got {external_access!r}")


#: The process's colmz databases by ``external_access`` (:func:`session`), and the process
#: they were made in: a child forked from this one makes its own (DuckDB's threads do not
#: survive a fork).
_DATABASES: dict[bool, object] = {}
_DATABASES_PID = [os.getpid()]
_DATABASES_LOCK = threading.Lock()


def session(external_access: bool = True):
    """A new connection to this process's colmz DuckDB database for ``external_access``.

    The database is made by :func:`connect` the first time it is asked for; each session
    is a cursor on it, with the database's locked settings, macros and functions, and
    registrations of its own (a table one session registers, another does not see).

    >>> a, b = session(), session()
    >>> a.sql("SELECT 7 / 2 AS q").fetchall()
    [(3,)]
    >>> import pyarrow as pa; _ = a.register("x", pa.table({"k": [1]}))
    >>> [s.sql("SELECT count(*) FROM duckdb_views() WHERE view_name = 'x'").fetchall() for s in (a, b)]
    [[(1,)], [(0,)]]
    """
    require_duckdb()  # named even when a database was made before (an extra uninstalled)
    _check_external_access(external_access)
    with _DATABASES_LOCK:
        if _DATABASES_PID[0] != os.getpid():
            _DATABASES.clear()
            _DATABASES_PID[0] = os.getpid()
        base = _DATABASES.get(external_access)
        if base is None:
            base = _DATABASES[external_access] = connect(external_access=external_access)
        return base.cursor()


_NOW_TYPE_ERROR = re.compile(r"(TIMESTAMP|DATE|INTERVAL|TIME\b).*UBIGINT|UBIGINT.*(TIMESTAMP|DATE|INTERVAL|TIME\b)")


def run_query(con, translated: str, t: int, form: str | None = None):
    """Run translated SQL with ``mz_now()`` at ``t``; returns ``(arrow_table, form)``.

    With ``form=None`` the integer form is tried first and the timestamp form only when
    DuckDB refuses to compare ``UBIGINT`` with a date/time type. DuckDB's errors become
    :class:`SQLError`.

    >>> from colmz.sql import translate
    >>> table, form = run_query(connect(), translate("SELECT TIMESTAMPTZ '1970-01-01 00:00:01+00' < mz_now() AS x"), 2000)
    >>> table.column("x").to_pylist(), form
    ([True], 'timestamptz')
    """
    check_one_query(con, translated)
    now = uses_now(translated)
    forms = NOW_FORMS if form is None and now else (form or "uint64",)
    for i, f in enumerate(forms):
        text = substitute_now(translated, now_value(t, f)) if now else translated
        try:
            rel = con.sql(text)  # a relation: check_one_query confirmed one SELECT
            table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
            if isinstance(table, pa.RecordBatchReader):
                table = table.read_all()
            return table, f
        except Exception as e:  # duckdb's exceptions share no importable base worth naming
            if not type(e).__module__.startswith(("duckdb", "_duckdb")):
                raise
            if i + 1 < len(forms) and _NOW_TYPE_ERROR.search(str(e)):
                continue
            raise duckdb_error(e) from None
    raise AssertionError("unreachable")  # pragma: no cover


def duckdb_error(e: Exception) -> SQLError:
    """DuckDB's error ``e`` as colmz raises it: the first of :data:`_ERRORS` that matches
    (PostgreSQL's words, or ``UnsupportedSQL`` naming the construct), else ``SQLError``.

    >>> print(duckdb_error(ValueError('Parser Error: syntax error at or near "OVERLAPS"')))
    OVERLAPS is not supported by colmz (DuckDB's grammar has none)
    """
    for pattern, error, message in _ERRORS:
        m = pattern.search(str(e))
        if m:
            return error(message(m))
    return SQLError(str(e))


def _UDF_ERROR(message: str) -> re.Pattern:  # noqa: N802 - reads as the pattern it makes
    # DuckDB's Invalid Input Error of ``message``, raised by error() or a Python function
    return re.compile(r"Invalid Input Error: (?:Python exception occurred while executing the UDF: \w+: )?"
                      + message, re.DOTALL)


#: PostgreSQL's name of each type DuckDB's cast error names.
_PG_TYPE_OF_DUCK = {"INT8": "smallint", "INT16": "smallint", "INT32": "integer", "INT64": "bigint",
                    "FLOAT": "real", "DOUBLE": "double precision", "BOOL": "boolean"}
_NUMERIC_SPECIAL = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
#: PostgreSQL's constructs DuckDB's parser lacks, by the group of their syntax error that matched.
_NO_GRAMMAR = {1: "IS NORMALIZED", 2: "IS DOCUMENT", 3: "FROM ONLY", 4: "a row-locking clause or ORDER BY ... USING"}
#: DuckDB's errors :func:`run_query` raises otherwise, the first that matches: (DuckDB's
#: error, the exception raised, its message from the match).
_ERRORS = (
    # A construct translation refuses once DuckDB knows the value's type (an error() branch
    # taken at run time): the refusal, not a DuckDB error.
    (_UDF_ERROR(r"(.* is not supported by colmz.*)"), UnsupportedSQL, lambda m: m.group(1)),
    # PostgreSQL's own errors, raised by colmz's macros (error()) or Python functions: their words.
    (_UDF_ERROR(r"(invalid input syntax for type [\w ]+: \".*\"|numeric field overflow|value overflows numeric "
                r"format|null character not permitted|cannot cast jsonb \w+ to type [\w ]+"
                r"|multidimensional arrays must have array expressions with matching dimensions|"
                + "|".join(AGG_ARRAYS_ERRORS) + "|"
                r"|value out of range: (?:overflow|underflow)|cannot take square root of a negative number"
                r"|cannot take logarithm of (?:zero|a negative number)|zero raised to a negative power is undefined"
                r"|a negative number raised to a non-integer power yields a complex result"
                r"|negative substring length not allowed|date field value out of range: 0-[-\d]+|unit \"\w+\" not (?:supported|recognized) for type [\w ]+"
                r"|cannot cast type [\w ]+ to [\w ]+|(?:smallint|integer|bigint) out of range"
                r"|function \w+\(smallint, smallint\) is not unique"
                r"|\"-?[\d.]+\" is out of range for type (?:real|double precision)|"
                + pgfuncs.ERROR_MESSAGES + "|field position must not be zero)$"), SQLError,
     lambda m: m.group(1)),
    # DuckDB's own errors of PostgreSQL's meaning: PostgreSQL's words
    (re.compile(r"Invalid Input Error: More than one row returned by a subquery used as an expression"), SQLError,
     lambda m: "more than one row returned by a subquery used as an expression"),
    # DuckDB's own division by zero (error_on_division_by_zero): PostgreSQL's words
    (re.compile(r"Invalid Input Error: Division by zero in expression"), SQLError, lambda m: "division by zero"),
    # DuckDB's binder error for translate's numeric cast of text (``x + CAST(0 AS DECIMAL(1,0))``)
    (re.compile(r"'\+\((VARCHAR|STRING_LITERAL), DECIMAL\(1,0\)\)'"), UnsupportedSQL,
     lambda m: "a cast of text to numeric is not supported by colmz (PostgreSQL keeps the scale each value is "
               "written with): cast to numeric(p, s) or float8"),
    # DuckDB's integer overflow of + - * (PostgreSQL checks the same operators): PostgreSQL's words
    (re.compile(r"Out of Range Error: Overflow in (?:addition|subtraction|multiplication) of (INT32|INT64) "),
     SQLError, lambda m: f"{_PG_TYPE_OF_DUCK[m.group(1)]} out of range"),
    # a double's NaN or infinity cast to numeric (PostgreSQL's numeric holds them, DuckDB's DECIMAL not)
    (re.compile(r"Conversion Error: Could not cast value (nan|-?inf) to DECIMAL"), UnsupportedSQL,
     lambda m: f"numeric '{_NUMERIC_SPECIAL[m.group(1)]}' is not supported by colmz (DuckDB's DECIMAL has no NaN "
               "or infinity)"),
    # Text that does not read as a number or boolean, or digits past an integer's range:
    # PostgreSQL's words, without the text colmz generated around the cast
    (re.compile(r"Could not convert string '(.*?)' to (INT8|INT16|INT32|INT64|FLOAT|DOUBLE|BOOL)\b", re.DOTALL),
     SQLError, lambda m: (f'value "{m.group(1)}" is out of range for type {_PG_TYPE_OF_DUCK[m.group(2)]}'
                          if m.group(2).startswith("INT") and re.fullmatch(r"\s*[+-]?[0-9]+\s*", m.group(1))
                          else f'invalid input syntax for type {_PG_TYPE_OF_DUCK[m.group(2)]}: "{m.group(1)}"')),
    # A construct colmz does not run as PostgreSQL does (a function DuckDB lacks, or lacks
    # for these argument types: PostgreSQL has it or raises its own error), named.
    (re.compile(r"Catalog Error: (?:Scalar|Aggregate|Table) Function with name \"?(\w+)\"? does not exist"), UnsupportedSQL,
     lambda m: f"{m.group(1)}() is not supported by colmz (DuckDB has no such function)"),
    (re.compile(r"Binder Error: No function matches the given name and argument types '(.+?)'\."), UnsupportedSQL,
     lambda m: f"{m.group(1).replace('//', '/')} is not supported by colmz (DuckDB has no "
               "function for these argument types)"),
    # an untyped string literal beside a typed operand ('12'::int + '3'): PostgreSQL gives it
    # the other operand's type, DuckDB finds several candidates
    (re.compile(r"Binder Error: Could not choose a best candidate function for the function call \"(.+?)\"\."),
     UnsupportedSQL, lambda m: f"{m.group(1).replace('//', '/')} is not supported by colmz (DuckDB cannot choose "
                               "among its functions for these argument types): cast the string literal"),
    (re.compile(r"Binder Error: Macro (\w+)\(\) (?:has multiple overloads|does not support)"), UnsupportedSQL,
     lambda m: ("sum() of an aggregate (a window function over an aggregate)" if m.group(1) == SUM_ARGUMENT
                else f"{m.group(1).removeprefix('__colmz_')}() with these arguments") + " is not supported by colmz"),
    (re.compile(r"Conversion Error: Unimplemented type for cast \((\w+(?: \w+)*) -> (\w+(?: \w+)*)\)"), UnsupportedSQL,
     lambda m: f"a cast of {m.group(1).lower()} to {m.group(2).lower()} is not supported by colmz (DuckDB has none)"),
    (re.compile(r"Conversion Error: Could not convert string '(.*?)' to INTERVAL", re.DOTALL), UnsupportedSQL,
     lambda m: f"the interval text '{m.group(1)}' is not supported by colmz (DuckDB's interval input is not "
               "PostgreSQL's: it reads neither every unit nor signs before each field)"),
    # an array's text where PostgreSQL reads it by the other operand's array type (a = '{1,2}'):
    # DuckDB casts the string by its own list syntax
    (re.compile(r"Conversion Error: Type VARCHAR with value '(.*?)' can't be cast to the destination type "
                r"(\w+(?:\[\])+)", re.DOTALL), UnsupportedSQL,
     lambda m: f"the text '{m.group(1)}' read as {m.group(2).lower()} is not supported by colmz (DuckDB reads "
               "lists as [a, b], PostgreSQL arrays as {a,b}): write the cast, e.g. '{1,2}'::int[]"),
    # ``x = ANY ('{1,2}')``: PostgreSQL reads the string as an array of the other operand's
    # type; DuckDB's ANY takes a list only
    (re.compile(r"Binder Error: UNNEST\(\) can only be applied to lists, structs and NULL, not VARCHAR"),
     UnsupportedSQL, lambda m: "ANY or ALL of a string literal is not supported by colmz (PostgreSQL reads it as "
                               "an array of the other operand's type): write the cast, e.g. '{1,2}'::int[]"),
    # colmz writes some array functions (cardinality, array_length, ...) with DuckDB's lambdas
    (re.compile(r"Binder Error: subqueries in lambda expressions are not supported"), UnsupportedSQL,
     lambda m: "a subquery as the argument of an array function colmz writes with a lambda (cardinality, "
               "array_length, array_to_string, ...) is not supported by colmz: select the function in the subquery"),
    # DuckDB reads ISO forms only; PostgreSQL's date/time input also reads 'Jan 5 2024',
    # '20240101', 'today', '10:00 pm'
    (re.compile(r"Conversion Error: (?:invalid (date|timestamp) field format|(time) field value out of range): "
                r"\"(.*?)\", expected format", re.DOTALL), UnsupportedSQL,
     lambda m: f"the {m.group(1) or m.group(2)} text '{m.group(3)}' is not supported by colmz (DuckDB reads ISO "
               "forms only, e.g. YYYY-MM-DD HH:MM:SS; PostgreSQL reads more)"),
    # a date or timestamp of its fields in ISO order but a month or day past its range: PostgreSQL's words
    (re.compile(r"Conversion Error: (?:date|timestamp) field value out of range: \"(.*?)\"(?:\n|$)"),
     SQLError, lambda m: f'date/time field value out of range: "{m.group(1)}"'),
    # PostgreSQL's regular expressions (ARE) have back references, lookahead and \m \M \y
    # word boundaries; RE2 has none
    (re.compile(r"Invalid Input Error: (invalid escape sequence: \\\w|invalid perl operator: \(\?[=!<])"),
     UnsupportedSQL, lambda m: f"a regular expression with {m.group(1).split(': ')[1]} (a back reference, "
                               "lookaround or word boundary of PostgreSQL's regular expressions) is not "
                               "supported by colmz (DuckDB's RE2 has none)"),
    # PostgreSQL's syntax DuckDB's parser lacks
    (re.compile(r'Parser Error: syntax error at or near "(OVERLAPS)"|Parser Error: syntax error at or near "(?i:WITH)"'
                r".*?((?i:FETCH))\s+(?i:FIRST|NEXT)\s.*?(?i:WITH\s+TIES)", re.DOTALL), UnsupportedSQL,
     lambda m: f"{'OVERLAPS' if m.group(1) else 'FETCH FIRST ... WITH TIES'} is not supported by colmz (DuckDB's "
               "grammar has none)"),
    (re.compile(r'Parser Error: syntax error at or near "(?:(NORMALIZED|NFC|NFD|NFKC|NFKD)|(DOCUMENT)|(ONLY))"'
                r'|Parser Error: syntax error at or near "(?:FOR|USING)".*?\b(FOR (?:NO KEY )?UPDATE|FOR (?:KEY )?SHARE'
                r'|ORDER BY .*? USING)', re.IGNORECASE | re.DOTALL), UnsupportedSQL,
     lambda m: f"{_NO_GRAMMAR[m.lastindex]} is not supported by colmz (DuckDB's grammar has none)"),
    (re.compile(r'Parser Error: Unknown ordered aggregate "(rank|dense_rank|percent_rank|cume_dist)"', re.IGNORECASE),
     UnsupportedSQL, lambda m: f"{m.group(1).lower()}(...) WITHIN GROUP (a hypothetical-set aggregate) is not "
                               "supported by colmz (DuckDB's grammar has none)"),
    (re.compile(r"Parser Error: Sample method Bernoulli cannot be used"), UnsupportedSQL,
     lambda m: "TABLESAMPLE BERNOULLI is not supported by colmz (DuckDB reads its argument as a row count)"),
    (re.compile(r"Binder Error: UNNEST\(\) can only be applied to lists, structs and NULL, not VARCHAR"), UnsupportedSQL,
     lambda m: "op ANY/ALL of a string literal is not supported by colmz: write the array's type, e.g. '{1,2}'::int[]"),
    (re.compile(r"Binder Error: Cannot extract field '(\w+)' from expression \W*\"?row\"?\("), UnsupportedSQL,
     lambda m: f"a field ({m.group(1)}) of ROW(...) is not supported by colmz"),
    # DuckDB computes a smallint with an integer literal as smallint, PostgreSQL as integer
    (re.compile(r"Out of Range Error: Overflow in \w+ of INT16"), UnsupportedSQL,
     lambda m: "smallint arithmetic past smallint's range is not supported by colmz (PostgreSQL computes a "
               "smallint with an integer as integer, DuckDB as smallint): cast the smallint to int"),
    # PostgreSQL's LIKE raises only when a row's text reaches a pattern's final escape, DuckDB always
    (re.compile(r"Like pattern must not end with escape character"), UnsupportedSQL,
     lambda m: "a LIKE pattern ending with its escape character is not supported by colmz"),
    # PostgreSQL orders an aggregate's input by a constant (no order; a query's ORDER BY
    # raises); DuckDB refuses both
    (re.compile(r"Binder Error: ORDER BY non-integer literal has no effect"), UnsupportedSQL,
     lambda m: "ORDER BY a constant other than an integer is not supported by colmz (PostgreSQL ignores "
               "it in an aggregate or WITHIN GROUP, and raises in a query)"),
    (re.compile(r"Out of Range Error: Overflow in left shift"), UnsupportedSQL,
     lambda m: "a left shift past the sign bit is not supported by colmz (PostgreSQL's wraps, DuckDB raises)"),
    (re.compile(r"Out of Range Error: Cannot (left|right)-shift negative number"), UnsupportedSQL,
     lambda m: f"a {m.group(1)} shift of a negative number is not supported by colmz (DuckDB refuses it)"),
    # colmz's checks (a cast to a float type of a value that may be text, checked
    # arithmetic) raise PostgreSQL's errors, which DuckDB counts as volatile
    (re.compile(r"(ORDER BY|PARTITION BY) window expressions cannot be volatile"), UnsupportedSQL,
     lambda m: f"a checked expression (a cast to a float type, float arithmetic) in a window's {m.group(1)} "
               "is not supported by colmz"),
    # a set-returning call (a row per element: unnest) where DuckDB takes none (a window's
    # PARTITION BY, WHERE, an aggregate's argument; PostgreSQL raises in some, answers in others)
    (re.compile(r"Binder Error: UNNEST not supported here"), UnsupportedSQL,
     lambda m: "a set-returning function (generate_series, regexp_matches, unnest, ...) outside the select "
               "list and FROM is not supported by colmz"),
    (re.compile(r"Cannot concatenate lists of types (\S+) and (\S+)"), UnsupportedSQL,
     lambda m: f"array_cat() or || of arrays of different dimensions ({m.group(1).lower()}, {m.group(2).lower()}) "
               "is not supported by colmz (DuckDB's list types differ by their nesting)"),
    (re.compile(r"Cannot concatenate types (.+?) and (\S+?)(?: -|$)", re.MULTILINE), UnsupportedSQL,
     lambda m: f"|| of {m.group(1).lower()} and {m.group(2).lower()} is not supported by colmz (DuckDB "
               "concatenates lists of one type only; PostgreSQL appends an element to an array)"),
    # PostgreSQL gives a string literal the type of the values beside it (a VALUES column,
    # a UNION, CASE branches); DuckDB needs the cast written.
    (re.compile(r"Cannot combine types VARCHAR and (\w+)"), UnsupportedSQL,
     lambda m: (f"a string literal beside {m.group(1).removesuffix('_LITERAL').lower()} values in one "
                "column (VALUES, UNION or CASE) is not supported by colmz: cast the string, e.g. "
                f"'...'::{m.group(1).removesuffix('_LITERAL').lower()}")),
    # an array type holds arrays of any dimension in PostgreSQL; DuckDB's list types differ
    # by their nesting
    (re.compile(r"Cannot combine types (\w+(?:\[\])+) and (\w+(?:\[\])+)"), UnsupportedSQL,
     lambda m: f"arrays of different dimensions in one column ({m.group(1).lower()} beside "
               f"{m.group(2).lower()}: VALUES, UNION or CASE) are not supported by colmz"),
    # PostgreSQL's words (DuckDB's hint names colmz's registered relations)
    (re.compile(r"Binder Error: Ambiguous reference to column name \"(.+?)\""), SQLError,
     lambda m: f'column reference "{m.group(1)}" is ambiguous'),
    # Materialize's words (DuckDB's hint names its own catalog tables: only the name matters)
    (re.compile(r"Table with name (.+?) does not exist"), SQLError,
     lambda m: f"unknown catalog item {m.group(1)!r}"),
)


#: Texts DuckDB confirmed to be one query (``check_one_query``), bounded.
_ONE_QUERY: dict[str, None] = {}


def check_one_query(con, text: str) -> None:
    """Raise :class:`SQLError` unless DuckDB reads ``text`` as exactly one ``SELECT``.

    colmz's own parser decides where a statement ends; this is DuckDB's confirmation that
    the text colmz built is the one query it meant (no ``;`` smuggled past the tokenizer
    starts a ``COPY``, ``ATTACH`` or ``SET``). Confirmed texts are remembered, so a
    statement run at every time of a continual task is checked once.

    >>> check_one_query(connect(), "SELECT 1; SELECT 2")
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: colmz runs one query at a time; DuckDB reads 2 statements (SELECT, SELECT) in 'SELECT 1; SELECT 2'
    """
    if text in _ONE_QUERY:
        return
    try:
        stmts = con.extract_statements(text)
    except Exception as e:
        if not type(e).__module__.startswith(("duckdb", "_duckdb")):
            raise
        raise duckdb_error(e) from None
    if len(stmts) != 1 or stmts[0].type.name != "SELECT":
        kinds = ", ".join(st.type.name for st in stmts)
        raise SQLError(
            f"colmz runs one query at a time; DuckDB reads {len(stmts)} statement"
            f"{'s' if len(stmts) != 1 else ''} ({kinds}) in {text[:200]!r}"
        )
    if len(text) <= CACHED_CHARS:
        if len(_ONE_QUERY) >= 4096:
            _ONE_QUERY.clear()
        _ONE_QUERY[text] = None


def clear_caches() -> None:
    """Forget every text colmz's SQL remembers: tokens, statements parsed, DuckDB's parse trees and expression checks, translations,
    ``mz_now()`` splits, relation bindings and DuckDB's one-query confirmations (a benchmark's
    first sight of a text).

    >>> clear_caches(); tokenize.cache_info().currsize
    0
    """
    from colmz.sql.parse import parse  # the parser and the tree read DuckDB through this module
    from colmz.sql.tree import clear_trees

    tokenize.cache_clear()
    parse.cache_clear()
    clear_trees()
    translate.cache_clear()
    now_pieces.cache_clear()
    bind_relations.cache_clear()
    _ONE_QUERY.clear()
