"""PostgreSQL's names only: DuckDB's own functions, operators and syntax refused as PostgreSQL does.

colmz runs a query's text in DuckDB, which parses PostgreSQL's grammar and more: functions
PostgreSQL has not (``strlen``, ``ifnull``, ``list``, ``median``, ``max(v, 2)``), operators
(``//``, ``**``) and syntax (``QUALIFY``, ``GROUP BY ALL``, ``ORDER BY ALL``, ``* EXCLUDE``,
``COLUMNS(...)``, ``LIMIT 10%``, ``USING SAMPLE``, ``FILTER (v > 1)``, ``[1, 2]``, ``{'a': 1}``,
``'abc'.upper()``, ``FROM t SELECT a``, ``PIVOT``, ``ASOF``/``POSITIONAL``/``SEMI``/``ANTI``
joins). Where PostgreSQL raises, DuckDB answers. :func:`check_postgres_names` reads the
user's tree (before translation: colmz's own rewrites add DuckDB names) once and raises
PostgreSQL's error for the first such construct.

Design and invariants:

* Functions by an allowlist: :data:`FUNCTIONS`, PostgreSQL 15's callable functions with the
  argument counts each accepts (``pg_functions.txt``, generated from ``pg_proc`` by
  ``scripts/pg_functions.py``), the calls PostgreSQL's grammar spells as keywords
  (``coalesce``, ``trim``, ``row``, ...) and Materialize's that colmz implements
  (``mz_now``). A call is judged by the name *written* in the text (the word before its
  ``(``, read at the node's position), not by DuckDB's name for it: DuckDB turns
  PostgreSQL's syntax into its own functions (``extract`` is ``date_part``, ``LIKE`` is
  ``~~``, ``x ~ y`` ``regexp_matches``, ``ANY (array)`` ``unnest``, ``(1, 2)`` ``row``); a
  node written without a call word must be one of those (:data:`SYNTAX_FUNCTIONS`), else it
  is DuckDB's syntax (a method call ``x.f()``, a list ``[1]``, a struct ``{...}``).
* Operators by PostgreSQL's ``pg_operator`` names (``pg_operators.txt``) and the ones colmz
  spells for DuckDB (:data:`colmz.sql.jsonb.SPELLED`).
* Argument counts are checked for a plain call written under its own name (not a window
  call, whose children hold its window too).
* PostgreSQL's words: ``function f(types) does not exist`` (the types of literal arguments;
  ``...`` when one is not a literal), ``operator does not exist: ...``, ``syntax error at or
  near "x"`` at the token PostgreSQL's grammar stops at. Syntax errors come first (PostgreSQL
  parses before it looks names up), each kind at its earliest position.
* A text the tokens show none of the triggers in is not walked (one set lookup per token).
"""

from __future__ import annotations

import bisect
import functools
from importlib import resources

from colmz.sql.errors import SQLError
from colmz.sql.tree import Expression, Query

__all__ = [
    "KEYWORD_CALLS", "SYNTAX_FUNCTIONS", "check_postgres_names", "may_hold",
    "pg_functions", "pg_operators",
]


def _load(name: str) -> list[str]:
    return resources.files("colmz.sql").joinpath(name).read_text().splitlines()


@functools.cache
def pg_functions() -> dict[str, tuple[tuple[int, int], ...]]:
    """PostgreSQL's callable functions, each with the argument counts (``(lo, hi)`` ranges)
    its overloads accept; read from ``pg_functions.txt`` on first use (not at import: every
    process importing colmz would pay for it).

    >>> pg_functions()["upper"]
    ((1, 1),)
    """
    out: dict[str, list[tuple[int, int]]] = {}
    for line in _load("pg_functions.txt"):
        name, lo, hi = line.split()
        out.setdefault(name, []).append((int(lo), 1 << 30 if hi == "*" else int(hi)))
    return {k: tuple(v) for k, v in out.items()}


@functools.cache
def pg_operators() -> frozenset[str]:
    """PostgreSQL's operator names (``pg_operators.txt``), read on first use."""
    return frozenset(_load("pg_operators.txt"))


def __getattr__(name: str):
    # FUNCTIONS and OPERATORS: the two tables above, as module constants read on first use
    if name == "FUNCTIONS":
        return pg_functions()
    if name == "OPERATORS":
        return pg_operators()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Calls PostgreSQL's grammar spells as keywords (not in ``pg_proc``), and Materialize's
#: functions colmz implements: any argument count (the grammar or colmz checks them).
KEYWORD_CALLS = frozenset({
    "coalesce", "nullif", "greatest", "least", "row", "array", "exists", "grouping", "cast",
    "trim", "any", "some", "all", "in", "values", "treat", "collation", "xmlelement",
    "xmlforest", "xmlconcat", "xmlparse", "xmlpi", "xmlroot", "xmlserialize", "xmlexists",
    "mz_now", "mz_logical_timestamp", "filter", "over", "lateral", "interval", "only",
    # keywords that may precede a parenthesis without being a call (NOT (a), a AND (b))
    "not", "and", "or", "case", "when", "then", "else", "between", "like", "ilike", "similar",
    "is", "as", "distinct", "on", "using", "select", "within", "at", "escape", "where", "from",
})
#: DuckDB's functions for PostgreSQL's syntax (a node with one of these names written
#: without a call word is that syntax's).
SYNTAX_FUNCTIONS = frozenset({
    "date_part", "count_star", "unnest", "row", "regexp_matches", "regexp_full_match",
    "array_agg", "list_value", "timezone", "array_extract", "array_slice", "~~", "!~~",
    "~~*", "!~~*", "substring", "position", "overlay", "trim", "ltrim", "rtrim", "date_trunc",
    "current_date", "current_time", "current_timestamp", "now", "get_current_timestamp",
    "localtimestamp", "localtime", "current_user", "session_user", "user", "current_role",
    "current_schema", "current_catalog", "current_database", "today", "get_current_time",
})
#: DuckDB's type names PostgreSQL has no type of (read at a cast's type).
DUCKDB_TYPES = frozenset({
    "hugeint", "uhugeint", "ubigint", "uinteger", "usmallint", "utinyint", "tinyint", "int1",
    "int128", "uint8", "uint16", "uint32", "uint64", "uint128", "int16", "int32", "int64",
    "struct", "map", "list", "union", "blob", "varint", "string", "signed", "long", "short",
    "datetime", "timestamp_s", "timestamp_ms", "timestamp_ns", "timestamptz_ns", "bitstring",
})
#: Functions DuckDB has more overloads of than PostgreSQL (``max(v, n)``, one-argument
#: ``string_agg``): a call of one with (True) or without (False) a comma among its
#: arguments has its argument count checked.
_ARITY_WATCHED = {"max": True, "min": True, "string_agg": False}  # (a comma: more arguments than PG's)
#: Words whose presence in a text means it may hold a construct checked here (upper case);
#: any call word not in pg_functions() or KEYWORD_CALLS triggers the walk too.
_TRIGGER_WORDS = frozenset({
    "QUALIFY", "ALL", "EXCLUDE", "REPLACE", "RENAME", "SAMPLE", "FILTER", "ASOF", "POSITIONAL",
    "SEMI", "ANTI", "PIVOT", "UNPIVOT", "FROM", "%",
})
_TRIGGER_TEXTS = frozenset({"[", "{", "//", "**", "%"})
_INT_MAX = 2**31 - 1


def check_postgres_names(sql: str, toks, stmts: tuple[Query, ...]) -> None:
    """Raise PostgreSQL's error (:class:`SQLError`) for a function, operator or syntax of
    ``sql`` that PostgreSQL has not and DuckDB has; ``toks`` are its tokens, ``stmts`` its
    tree.

    >>> from colmz.sql.tokens import tokenize
    >>> from colmz.sql.tree import parse_tree
    >>> s = "SELECT strlen('a')"
    >>> check_postgres_names(s, tokenize(s), parse_tree(s))
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: function strlen(unknown) does not exist
    """
    from colmz.sql.transforms import all_queries, table_refs
    from colmz.sql.typing_pass import query_expressions

    starts = [t.start for t in toks]
    syntax: list[tuple[int, str]] = []  # (position, message)
    names: list[tuple[int, str]] = []
    tabled: set[int] = set()  # table functions' calls (checked by name)
    nested: set[int] = set()  # an ARRAY constructor's inner lists

    def after(i: int) -> str:
        # PostgreSQL's syntax error at the token after toks[i]
        return (f'syntax error at or near "{toks[i + 1].text}"' if i + 1 < len(toks)
                else "syntax error at end of input")

    def at_word(word: str, lo: int = 0) -> int | None:
        for i in range(bisect.bisect_left(starts, lo), len(toks)):
            if toks[i].kind == "word" and toks[i].upper == word:
                return i
        return None

    def near(i: int) -> None:
        syntax.append((toks[i].start, f'syntax error at or near "{toks[i].text}"'))

    if toks and toks[0].kind == "word" and toks[0].upper == "FROM":
        near(0)
    for root in stmts:
        for d in all_queries(root):
            _check_query(d, sql, toks, starts, syntax, after, at_word, near)
            for t in table_refs(d):
                word = {"ASOF": "ASOF", "POSITIONAL": "POSITIONAL"}.get(t.ref_type) or \
                    {"SEMI": "SEMI", "ANTI": "ANTI"}.get(t.join_type)
                if word and (i := at_word(word, max(t.start, 0))) is not None:
                    near(i)
                if t.type in ("PIVOT", "UNPIVOT") and (i := at_word(t.type)) is not None:
                    syntax.append((toks[i].start, after(i)))  # (PostgreSQL reads PIVOT as an alias)
                if t.type == "TABLE_FUNCTION":
                    # a table function's node is placed at its arguments, not its name
                    for f in t.expressions:
                        if f.cls == "FUNCTION" and f.name and f.name[-1] not in pg_functions():
                            names.append((max(f.start, 0), _no_function(f.name[-1], f.children)))
                        tabled.add(id(f))
            for e in query_expressions(d):
                for n in e.walk():  # (depth first: a node before its children)
                    if n.type == "ARRAY_CONSTRUCTOR" or id(n) in nested:
                        # ARRAY[[1, 2], [3, 4]]: the inner brackets are PostgreSQL's
                        nested.update(id(c) for c in n.children if c.name == ("list_value",))
                    elif id(n) not in tabled:
                        _check_node(n, sql, toks, starts, syntax, names, after)
    if syntax:
        raise SQLError(min(syntax)[1])
    if names:
        raise SQLError(min(names)[1])


def _check_query(d: Query, sql, toks, starts, syntax, after, at_word, near) -> None:
    if d.qualify is not None and (i := at_word("QUALIFY")) is not None:
        syntax.append((toks[i].start, after(i)))  # PostgreSQL reads QUALIFY as the table's alias
    if d.sampled and (i := at_word("SAMPLE")) is not None:
        near(i - 1 if i and toks[i - 1].upper == "USING" else i)
    if d.aggregate_handling == "FORCE_AGGREGATES":
        i = at_word("GROUP")
        while i is not None and not (i + 2 < len(toks) and toks[i + 1].upper == "BY" and toks[i + 2].upper == "ALL"):
            i = at_word("GROUP", toks[i].end)
        if i is not None:
            syntax.append((toks[i + 2].start, after(i + 2)))
    for m in d.modifiers:
        # LIMIT 10%: DuckDB's tree keeps the limit (10), the "%" follows its span
        if m.type in ("LIMIT_MODIFIER", "LIMIT_PERCENT_MODIFIER") and m.limit is not None and m.limit.end >= 0:
            j = bisect.bisect_left(starts, m.limit.end)
            if j < len(toks) and toks[j].text == "%":
                syntax.append((toks[j].start, after(j)))
        if m.type == "ORDER_MODIFIER" and any(o.expression.cls == "STAR" for o in m.orders):
            i = at_word("ORDER")
            while i is not None and not (i + 2 < len(toks) and toks[i + 2].upper == "ALL"):
                i = at_word("ORDER", toks[i].end)
            if i is not None:
                near(i + 2)


def _literal_type(e: Expression) -> str | None:
    if e.cls != "CONSTANT" or e.literal is None:
        return None
    k = e.literal.kind
    if k in ("STRING", "NULL_LITERAL"):
        return "unknown"
    if k == "INTEGER":
        v = int(e.literal.text)
        return "integer" if -_INT_MAX - 1 <= v <= _INT_MAX else "bigint" if abs(v) < 2**63 else "numeric"
    return {"NUMERIC": "numeric", "BOOLEAN": "boolean"}.get(k)


def _no_function(name: str, args) -> str:
    types = [_literal_type(a) for a in args]
    shown = "..." if None in types else ", ".join(types)
    return f"function {name}({shown}) does not exist"


def _check_node(n: Expression, sql, toks, starts, syntax, names, after) -> None:
    if n.cls == "TYPE" and n.start >= 0:
        i = bisect.bisect_left(starts, n.start)
        if i < len(toks) and toks[i].kind == "word" and toks[i].name.lower() in DUCKDB_TYPES:
            names.append((n.start, f'type "{toks[i].name.lower()}" does not exist'))
        return
    if n.start < 0:
        if n.cls in ("FUNCTION", "WINDOW") and n.name and n.name[-1] not in pg_functions() \
                and n.name[-1] not in SYNTAX_FUNCTIONS and n.name[-1] not in KEYWORD_CALLS:
            names.append((max(n.start, 0), _no_function(n.name[-1], n.children)))
        return
    i = bisect.bisect_left(starts, n.start)
    if i >= len(toks):
        return
    t = toks[i]
    if n.cls == "STAR" and n.star_modified:
        for j in range(i, len(toks)):
            if toks[j].upper in ("EXCLUDE", "REPLACE", "RENAME"):
                syntax.append((toks[j].start, f'syntax error at or near "{toks[j].text}"'))
                break
            if toks[j].upper == "COLUMNS":
                break
    if n.cls == "FUNCTION" and n.filter is not None:
        k = bisect.bisect_left(starts, n.filter.start) - 1
        while k > i and toks[k].text == "(":
            k -= 1
        if toks[k].upper != "WHERE" and toks[k].upper == "FILTER":
            syntax.append((toks[k + 1].start, after(k + 1)))
    if t.kind in ("word", "qident") and i + 1 < len(toks) and toks[i + 1].text in ("(", ".") and (
            n.cls in ("FUNCTION", "WINDOW", "STAR") or n.type == "OPERATOR_COALESCE"):
        j = i
        while j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 2].kind in ("word", "qident"):
            j += 2
        if j + 1 < len(toks) and toks[j + 1].text == "(":
            if j == i + 2 and toks[i].name.lower() != "pg_catalog" and n.cls in ("FUNCTION", "WINDOW"):
                # x.f(...): PostgreSQL reads x as f's schema (DuckDB: a method call on column x)
                names.append((n.start, f'schema "{toks[i].name}" does not exist'))
                return
            written = toks[j].name.lower() if toks[j].kind == "word" else toks[j].name
            if written in KEYWORD_CALLS:
                return
            ranges = pg_functions().get(written)
            if ranges is None:
                names.append((n.start, _no_function(written, n.children if n.cls != "WINDOW" else ())))
                return
            if n.cls == "FUNCTION" and n.name and n.name[-1] == written and not n.order_by:
                args = list(n.children)
                if n.filter is not None:  # (a FILTER's condition is among the children)
                    args.remove(n.filter)
                if not any(lo <= len(args) <= hi for lo, hi in ranges):
                    names.append((n.start, _no_function(written, args)))
            return
    if n.cls not in ("FUNCTION", "WINDOW") or not n.name:
        return
    name = n.name[-1]
    if not name[:1].isalpha() and name[:1] != "_":
        if name not in pg_operators() and name not in _spelled():
            types = [_literal_type(a) for a in n.children]
            if None not in types:
                names.append((n.start, f"operator does not exist: {' '.join(_op_sides(name, types))}"))
            else:
                names.append((n.start, f"operator does not exist: {name}"))
        return
    if t.text == "[" and name == "list_value":
        syntax.append((t.start, 'syntax error at or near "["'))
        return
    if t.text == "{":
        syntax.append((t.start, 'syntax error at or near "{"'))
        return
    if name not in SYNTAX_FUNCTIONS:
        # written without its name first: a method call x.f(...)
        for j in range(i, len(toks) - 2):
            if toks[j].text == "." and toks[j + 1].kind == "word" and toks[j + 1].name.lower() == name \
                    and toks[j + 2].text == "(":
                syntax.append((toks[j].start, 'syntax error at or near "."'))
                return
        names.append((n.start, _no_function(name, n.children)))


def _op_sides(name: str, types: list[str]) -> list[str]:
    return [types[0], name, types[1]] if len(types) == 2 else [name, *types]


def _spelled() -> frozenset[str]:
    from colmz.sql.jsonb import SPELLED

    return frozenset(SPELLED.values())


def may_hold(sql: str, toks) -> bool:
    """Whether ``sql`` (tokens ``toks``) may hold a construct :func:`check_postgres_names` refuses: a
    call word PostgreSQL has not, or a word or symbol of DuckDB's syntax."""
    if "//" in sql or "**" in sql:  # (the tokens are "/", "/")
        return True
    for i, t in enumerate(toks):
        if t.kind == "word":
            if t.upper in _TRIGGER_WORDS and not (t.upper == "FROM" and i) and not (
                    t.upper == "ALL" and (not i or toks[i - 1].upper != "BY")):
                return True
            name = t.name.lower()
            if name in DUCKDB_TYPES and i and (toks[i - 1].text == "::" or toks[i - 1].upper == "AS"):
                return True
            if i + 1 < len(toks) and toks[i + 1].text == "(" and (
                    (name not in pg_functions() and name not in KEYWORD_CALLS)
                    or (name in _ARITY_WATCHED and _has_comma(toks, i + 1) == _ARITY_WATCHED[name])):
                return True
        elif t.text in _TRIGGER_TEXTS or (t.text == "." and i + 2 < len(toks) and toks[i + 2].text == "("):
            return True
    return False


def _has_comma(toks, open_at: int) -> bool:
    # whether the parentheses opened at toks[open_at] hold a comma at their own depth
    depth = 0
    for k in range(open_at, len(toks)):
        text = toks[k].text
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                return False
        elif text == "," and depth == 1:
            return True
    return False
