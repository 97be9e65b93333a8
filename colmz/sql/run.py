"""Running built SQL in DuckDB: colmz's connection and the one-query check.

Every colmz connection (:func:`connect`) reads PostgreSQL arithmetic (``integer_division``,
``error_on_division_by_zero``, UTC), has DuckDB's Python replacement scans off (a query sees
only the tables colmz registers, never a Python variable that shares a name) and its
configuration locked once set up; ``external_access=False`` also turns DuckDB's file system
and network access off. :func:`run_query` runs a text only after DuckDB itself confirmed it
is exactly one ``SELECT`` (:func:`check_one_query`), then puts the evaluation time in for
``mz_now()`` (:func:`colmz.sql.substitute_now`, token by token).
"""

from __future__ import annotations

import re

import pyarrow as pa

from colmz.sql.build import NOW_FORMS, now_value
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.tokens import CACHED_CHARS, tokenize
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

__all__ = ["check_one_query", "clear_caches", "connect", "require_duckdb", "run_query"]


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
    """A fresh in-memory DuckDB connection set up to read PostgreSQL arithmetic.

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
    if not isinstance(external_access, bool):
        raise TypeError(f"external_access must be a bool, got {external_access!r}")
    con = duckdb.connect(":memory:")
    con.execute("SET python_enable_replacements = false")
    con.execute("SET integer_division = true")
    con.execute("SET TimeZone = 'UTC'")  # as Materialize's sessions; mz_now() casts in UTC
    # PostgreSQL orders NULL above every value: last under ASC, first under DESC (ORDER BY and
    # window orderings alike); DuckDB's default puts it last both ways.
    con.execute("SET default_null_order = 'nulls_last_on_asc_first_on_desc'")
    try:
        # PostgreSQL raises on a division by zero; DuckDB before this setting returned NULL.
        con.execute("SET error_on_division_by_zero = true")
    except Exception as e:  # pragma: no cover - older DuckDB without the setting
        if not type(e).__module__.startswith(("duckdb", "_duckdb")):
            raise
    for name, fn, args, result in FUNCTIONS:  # the functions and macros translated queries call
        con.create_function(name, fn, list(args), result, type="arrow", side_effects=False)
    for macro in MACROS:
        try:
            con.execute(macro)
        except Exception as e:  # DuckDB before 1.4 has no typed macro parameters
            if not (type(e).__name__ == "ParserException" and SUM_ARGUMENT in macro):
                raise
            con.execute(SUM_ARGUMENT_UNTYPED)
    if not external_access:
        con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


_NO_TABLE = re.compile(r"Table with name (.+?) does not exist")
_REFUSAL = re.compile(r"Invalid Input Error: (.* is not supported by colmz.*)", re.DOTALL)
#: DuckDB's binder error for translate's numeric cast of text (``x + CAST(0 AS DECIMAL(1,0))``).
_TEXT_TO_NUMERIC = re.compile(r"'\+\((VARCHAR|STRING_LITERAL), DECIMAL\(1,0\)\)'")
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
            rel = con.sql(text)
            if rel is None:
                raise SQLError(f"not a query: {translated[:60]!r}")
            table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
            if isinstance(table, pa.RecordBatchReader):
                table = table.read_all()
            return table, f
        except SQLError:
            raise
        except Exception as e:  # duckdb's exceptions share no importable base worth naming
            if not type(e).__module__.startswith(("duckdb", "_duckdb")):
                raise
            if i + 1 < len(forms) and _NOW_TYPE_ERROR.search(str(e)):
                continue
            refusal = _REFUSAL.search(str(e))
            if refusal:
                # A construct translation refuses once DuckDB knows the value's type (an
                # error() branch taken at run time): the refusal, not a DuckDB error.
                raise UnsupportedSQL(refusal.group(1)) from None
            if _TEXT_TO_NUMERIC.search(str(e)):
                raise UnsupportedSQL(
                    "a cast of text to numeric is not supported by colmz (PostgreSQL keeps the "
                    "scale each value is written with): cast to numeric(p, s) or float8") from None
            m = _NO_TABLE.search(str(e))
            if m:
                # DuckDB's hint names its own catalog tables: only the name matters here.
                raise SQLError(f"unknown catalog item {m.group(1)!r}") from None  # Materialize's words
            raise SQLError(str(e)) from None
    raise AssertionError("unreachable")  # pragma: no cover


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
        raise SQLError(str(e)) from None
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
    """Forget every text colmz's SQL remembers: tokens, translations, ``mz_now()`` splits, relation
    bindings and DuckDB's one-query confirmations (a benchmark's first sight of a text).

    >>> clear_caches(); tokenize.cache_info().currsize
    0
    """
    tokenize.cache_clear()
    translate.cache_clear()
    now_pieces.cache_clear()
    bind_relations.cache_clear()
    _ONE_QUERY.clear()
