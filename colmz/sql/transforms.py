"""Translate's table of transforms: PostgreSQL's meaning as DuckDB text, on DuckDB's parse tree.

Each entry maps a kind of node to a rule giving the PostgreSQL-faithful DuckDB text of the
node's span (as sqlglot's dialects map an expression class to its rendering):

* :data:`CALLS`, by the function name as written: ``btrim`` is DuckDB's ``trim``,
  two-argument ``lpad``/``rpad`` pad with spaces (an empty fill only truncates),
  ``regexp_replace``'s replacement text is PostgreSQL's (``\\&``, a missing group empty),
  ``chr(0)`` raises, ``split_part``/``string_to_array``/``string_agg`` take PostgreSQL's
  empty and NULL delimiters, ``regexp_replace(..., 'g')`` of a pattern that may match an
  empty string is refused, ``unnest`` of a multidimensional array gives its elements, ``to_hex``
  prints lower-case digits and an ``int4`` in 32 bits, ``extract(second ...)`` keeps the fraction, ``substr``/``substring``
  count positions before the string as PostgreSQL does, ``round`` rounds by its argument's
  type and ``round(x, n)`` has scale ``n``, ``generate_series`` in an expression is a row
  per value (``unnest``; refused inside ``CASE``/``coalesce()`` ...) and its dates, there and
  in ``FROM``, are timestamptz (PostgreSQL's series of dates), ``every`` is
  ``bool_and``, the math functions whose domain PostgreSQL checks, ``array_length``,
  ``array_upper``/``array_lower`` (of any dimension), ``cardinality``, ``array_remove``,
  ``octet_length``, ``upper``/``lower`` (the C locale's) are colmz's macros
  (:data:`CALL_MACROS`), a third argument of ``array_to_string``/``string_to_array`` is
  :mod:`colmz.sql.pgfuncs`' form, as are ``to_char``, ``date_bin``, ``justify_*``,
  ``quote_*``, ``regexp_matches``, ``regexp_split_*``, ``date_part``, ``generate_subscripts``,
  ``make_date``/``make_timestamp[tz]``, ``extract``'s year units and ``date_trunc``'s decade
  of a year BC, the bytea functions, ``interval / number``, ``time - time`` and ``interval::time`` (a call
  in ``FROM`` spans its name to its ``)``); refused is
  ``date_trunc`` to centuries or millennia (a unit that is not a literal when the query runs:
  :data:`DATE_TRUNC_UNIT`). ``extract``/``date_trunc`` of a unit the value's type lacks
  (``hour`` of a date, ``week`` of an interval, ``dow`` for ``date_trunc``) raise
  PostgreSQL's error for a row that reaches them (:data:`UNIT_CHECK`: a date, timestamp or
  interval is told by ``typeof`` when the query runs); ``sign`` of an integer is a double
  (:data:`SIGN`), ``lag``/``lead`` with a decimal default take the common type.
* Arrays written as nested lists must be rectangular (PostgreSQL's error otherwise);
  ``ARRAY[a, b]`` of sub-arrays whose shapes are known only when it runs (a subquery's or
  CTE's array column, a cast, an array call, NULL beside an array) is checked then
  (:data:`ARRAY_ROWS`).
* Subscripts as PostgreSQL's grammar has them: of a column, a parameter, a scalar subquery,
  a subscript or a parenthesized value (``f(x)[1]``, ``ARRAY[..][1]`` are its syntax error),
  never of a text function or an unknown literal (its "cannot subscript type"); fewer
  subscripts than an array's dimensions are NULL (DuckDB gives the sub-array): added NULL
  subscripts for an array written as lists, refused by name where its dimensions are known
  only when it runs; a subscript of a parenthesized subscript is refused.
* An array slice ``a[lo:hi]`` (a bound may be left out) is PostgreSQL's: a bound outside the
  array is clamped to it (DuckDB counts a negative one from the end); a slice of a value not
  visibly an array -- written as one, a cast to an array type, an array call, a subquery's
  or CTE's column that is one, or a table's array column the caller names
  (:func:`colmz.sql.typing_pass.array_columns`) -- (text: DuckDB slices it, PostgreSQL
  raises), with a step, or beside another subscript (PostgreSQL's subscripts are one per
  dimension) is refused.
* Row comparisons (a comparison, ``IN`` list or ``IS [NOT] NULL`` of ``ROW``/``(a, b)``
  nodes): field by field, as PostgreSQL compares rows; nested rows and subqueries refused.
* LIKE/ILIKE nodes get PostgreSQL's default backslash ``ESCAPE``; the ``~`` family of
  regular expression matches passes RE2's ``s`` option (``.`` matches a newline, as in
  PostgreSQL).
* Types: ``float`` (a ``TYPE`` node, in a cast or a typed literal) is ``DOUBLE``,
  ``float(p)`` is ``REAL`` up to p = 24, ``jsonb`` ``JSON`` and ``mz_timestamp`` ``UBIGINT`` (a
  ``TYPE`` node: not an alias or column so named); a cast to ``bytea`` of a string literal reads
  PostgreSQL's hex input (any other is refused); a cast to a float type checks text past
  the type's range (a literal here, other text when it runs: :data:`FLOAT_CAST_MACROS`); an
  explicit cast to ``varchar(n)`` truncates to n characters; a string literal cast to
  ``jsonb`` is PostgreSQL's jsonb text (:func:`jsonb_text`), any other value read so when it
  runs (:data:`JSONB_IN`); ``date_trunc`` of a date is a ``timestamptz``; a cast to
  ``char(n)`` (blank-padded) is refused; a cast PostgreSQL has not (a boolean to bigint, a
  number other than an integer to boolean, any non-text value to jsonb) raises its
  "cannot cast type" -- when written (a literal, a cast) or for each row (:data:`CAST_CHECK`).
  A typed macro (DuckDB's overloads by type) is not given an aggregate's or a window
  function's value: DuckDB picks the overload before that value is bound.
* Float overflow: a maximal ``+ - * /`` subtree over a visibly float operand (a float cast,
  a float function, an exponent literal), or with two operands that are not numbers
  (``f * f``: float columns, whose type is unknown here), outside a grouped query raises
  "value out of range: overflow" where PostgreSQL does (:data:`FLOAT_CHECK`, a no-op for a
  result that is not a float); a float column with a number alone (``f * 2``) is not
  checked. ``^`` is PostgreSQL's ``power`` (its domain errors).
* A ``real`` with an integer or ``numeric`` (a binary arithmetic or comparison node, one
  operand visibly a real) is computed as a double, as PostgreSQL's float48 operators do
  (:data:`REAL_WIDEN`); ``sum`` of a visibly real argument and ``pg_typeof`` are refused.
* An operand of ``||`` (an argument of ``concat``/``concat_ws``) not visibly text (a
  string, a cast to text, a text function) is printed as its cast to text is
  (:func:`colmz.sql.translate.cast_rewrite`: a double's shortest digits), a boolean
  argument of ``concat``/``concat_ws`` by its output function (``t``, ``f``; ``||`` prints
  ``true``), and so are ``array_to_string``'s elements (:data:`ARRAY_TO_STRING`); arrays
  concatenate as arrays. A column of a FROM subquery or CTE whose item may be a numeric
  computed as a double (``age / 2.0``, ``avg(age)``) prints as that item would: refused.
* ``||`` of jsonb is PostgreSQL's jsonb concatenation (:func:`jsonb_concat`); beside a value
  whose type colmz cannot tell (a column: jsonb columns are text to DuckDB) it is refused.
* jsonb's ``->`` (DuckDB reads it as a lambda arrow, looser than ``=``, ``IS NULL``, ``AND``)
  and ``->>`` are :func:`jsonb_get` of the value's text, bound as PostgreSQL binds them (the
  key is the leftmost operand of DuckDB's looser right side): PostgreSQL's jsonb text (and
  numbers as ``numeric``: DuckDB's JSON functions reprint them as doubles); ``->`` followed
  by ``||`` is refused; of a cast to ``json`` either is :func:`colmz.sql.jsonb.json_get`, the
  value as written (json's columns and subqueries' json columns: the catalog's
  :mod:`colmz.sql.jsonbcols`).
* Calls PostgreSQL cannot resolve raise its error: a polymorphic function (``lag``,
  ``first_value``, ``array_agg``, ...) of an untyped literal; a quoted function name with
  capitals (``"Sum"(x)``: PostgreSQL's names are lower case, DuckDB's matched without case).
  ``-2147483648`` (``-9223372036854775808``) is one int4 (int8) constant, as PostgreSQL folds
  it (DuckDB negates an int8).
* Values and names: a row value (``ROW(...)``) as a result column is refused (PostgreSQL's
  anonymous record); a select item of a subquery in ``FROM`` or of a CTE without an alias,
  or of the statement's own list beside a ``*``, gets PostgreSQL's name for it
  (``?column?``, ``upper``) as an alias, so a ``*`` over it shows PostgreSQL's names (DuckDB
  names such a column by its text); a repeated name of a subquery or CTE is marked
  (:func:`duplicate_name`, undone on the result), as DuckDB renames it (``?column?_1``),
  and a reference to it is PostgreSQL's "ambiguous" error; the columns of a subquery or
  CTE whose ``*`` expands over a join are refused (DuckDB renames their repeated names).
* Numbers: a constant arithmetic subtree holding a ``numeric`` (a decimal literal, a
  ``::numeric``) is folded into one literal with PostgreSQL's scale
  (:mod:`colmz.sql.numeric`'s arithmetic); ``::numeric`` of a visibly jsonb value reads its
  number's text as ``numeric_in`` does (PostgreSQL's error for another jsonb value); an
  unconstrained ``::numeric`` of anything else is ``x +`` :data:`NUMERIC_CAST`.

:func:`apply_transforms` reads the tree (:func:`colmz.sql.tree.parse_tree`), so an argument,
a field or an operand is a child node, not a stretch of tokens delimited by counting
parentheses; whether a call is a ``FROM`` item or sits inside ``CASE`` is read off the tree.
The text is rewritten once, bottom-up: a rule receives its children's texts with the nodes
found inside them already rewritten, so nested constructs need no second reading. A node
asks only the entries of its key (a call's name, an operator's type such as ``ARRAY_SLICE``,
another node's class such as ``CAST``), in the order they are listed; the first rule found
is its rule. Each entry names the words and operators that may make its nodes.

Invariants:

* The tree is read only when the text may hold a node of the table (:func:`may_transform`,
  one pass over the text's cached tokens: a word or operator the entries name, or a token
  in a context they read). A text without one costs that scan (reading its tree would cost
  more than the rest of translation); a text with one costs reading its tree once (cached
  per text).
* A call is matched by its name as written (a bare or quoted identifier, not a qualified
  name's part) and only on the node DuckDB made of it (``f(x) * 2`` is a ``*`` node
  starting at ``f``).
* A child's span leaves out the parentheses written around it: a rule putting a child's
  text next to an operator parenthesises it.
* A text DuckDB cannot parse (as a query, or as one expression after ``SELECT``) is left
  unchanged here: DuckDB refuses it when it runs, and the token-level refusals of
  :func:`colmz.sql.translate.translate` still apply.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re
from collections.abc import Callable, Iterator
from decimal import Decimal

from colmz.sql import jsonb, pgfuncs
from colmz.sql.build import BYTEA_IN, RESERVED_PREFIX, identifier
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.jsonb import jsonb_dump as _jsonb_dump
from colmz.sql.jsonb import jsonb_load as _jsonb_load
from colmz.sql.numeric import (
    MAX_DIGITS,
    NUMERIC_IN,
    NUMERIC_MACROS,
    NUMERIC_TYPMOD,
    TEXT_NUMERIC_FUNCTIONS,
    PgNumeric,
    combine,
    literal_text,
    parse_literal,
)
from colmz.sql.parse import output_names
from colmz.sql.tokens import closing, cte_definitions, tokenize, top_level
from colmz.sql.tree import Expression, Query, Table, parse_tree

__all__ = [
    "CALLS",
    "CALL_MACROS",
    "CAST_CHECK",
    "CHECKED_MATH",
    "CONCAT_BY_KIND",
    "DATE_AS_TIMESTAMPTZ",
    "DATE_TRUNC_UNIT",
    "FLOAT_CAST_MACROS",
    "FLOAT_CHECK",
    "JSONB_CONCAT",
    "JSONB_GET",
    "JSONB_IN",
    "NUMERIC_CAST",
    "REAL_WIDEN",
    "REGEXP_MATCH",
    "SIGN",
    "TYPE_SPELLINGS",
    "UNIT_CHECK",
    "VOLATILE",
    "TRANSFORM_FUNCTIONS",
    "TRANSFORM_MACROS",
    "TRANSFORM_NULL_FUNCTIONS",
    "TRANSFORM_TYPED_MACROS",
    "Call",
    "Relations",
    "all_queries",
    "apply_transforms",
    "arith_leaves",
    "duplicate_name",
    "first_branch",
    "float_check",
    "float_kind",
    "item_name",
    "is_arith",
    "is_array",
    "jsonb_concat",
    "jsonb_get",
    "jsonb_text",
    "may_transform",
    "products_only",
    "table_refs",
    "type_words",
    "undo_duplicate_name",
    "values_rows",
]


class Call:
    """A node found in the tree, as its rule sees it: ``node``; for a call, ``name`` as
    written (lower case; ``""`` for other nodes), ``args`` the texts of its arguments (the
    nodes found inside them already rewritten), ``window``
    whether it has ``OVER``, ``table`` whether it is a ``FROM`` item, ``inside`` the
    conditional construct around it in its own query (``CASE``, ``coalesce()``, ...) or
    ``""``; ``text`` the text the spans index; ``numeric_names`` gives the statement's FROM
    subqueries' and CTEs' column names whose values may be numerics computed as doubles
    (read when a rule asks)."""

    __slots__ = ("_render", "_span", "inside", "name", "node", "numeric_names", "table", "text", "window")

    def __init__(self, name: str, node: Expression, text: str, render, table: bool, inside: str,
                 span=None, numeric_names: Callable[[], frozenset[str]] = frozenset) -> None:
        self.name, self.node, self.text, self._render, self._span = name, node, text, render, span
        self.window = node.cls == "WINDOW"
        self.table, self.inside, self.numeric_names = table, inside, numeric_names

    @property
    def arguments(self) -> tuple[Expression, ...]:
        # The tree lists a call's FILTER condition and ORDER BY keys before its arguments
        # (colmz.sql.tree reads them in that order, as DuckDB serializes them)
        n = self.node
        extra = (n.filter is not None) + len(n.order_by)
        return n.children[extra:] if extra else n.children

    @property
    def plain(self) -> bool:
        """An ordinary scalar call: no ``OVER``, ``FILTER``, ``ORDER BY``, ``DISTINCT``, not a
        ``FROM`` item (its span is the call's whole text)."""
        n = self.node
        return not (self.window or self.table or n.filter is not None or n.order_by or n.distinct)

    @property
    def first_argument(self) -> Expression | None:
        """The call's first argument: its first child in the text (a window's PARTITION BY
        and ORDER BY, a FILTER and an aggregate's ORDER BY come first among its children but
        after it in the text); None where no child has a place."""
        return min((k for k in self.node.children if k.start >= 0), key=lambda k: k.start, default=None)

    @property
    def args(self) -> list[str]:
        return [self._render(c) for c in self.arguments]

    def text_of(self, node: Expression) -> str:
        """The text of ``node`` (under this one), with the nodes found inside it rewritten."""
        return self._render(node)

    def span_text(self, lo: int, hi: int) -> str:
        """The text ``[lo, hi)`` (inside this node's span), with the nodes found wholly inside
        it rewritten."""
        return self._span(lo, hi)

    def by(self, rule: Rule | None) -> str:
        """The node's text by ``rule`` (as written, the nodes inside it rewritten, where it
        gives None or is None)."""
        out = rule(self) if rule is not None else None
        return self._render(self.node) if out is None else out

    def renamed(self, new: str) -> str:
        """The call with its name replaced by ``new`` (arguments, FILTER, OVER kept)."""
        return new + self._render(self.node, skip_name=True)


def _written(text: str, e: Expression) -> str:
    if e.start >= 0:
        return text[e.start : e.end]
    if e.literal is not None:  # a value DuckDB fills in (substring(s FOR n)'s start)
        return "'" + e.literal.text.replace("'", "''") + "'" if e.literal.kind == "STRING" else e.literal.text
    raise UnsupportedSQL(f"an argument colmz cannot place in the text of a call: {text[:80]!r}")


Rule = Callable[[Call], "str | None"]
#: Tables' columns as a caller knows them: each table's name as the text writes it (lower
#: case) with its every column's ``(name, kind)``, kind ``"array"`` for an array column
#: (:func:`colmz.sql.typing_pass.array_columns`; the string kinds are :mod:`colmz.sql.jsonbcols`').
Relations = tuple[tuple[str, tuple[tuple[str, "str | None"], ...]], ...]

#: Math functions whose domain PostgreSQL checks (it raises where DuckDB answers NaN or an
#: infinity): a call is a call of colmz's macro of the same arguments
#: (:data:`colmz.sql.translate.MATH_MACROS`).
CHECKED_MATH = {f: RESERVED_PREFIX + f for f in ("ln", "log", "log10", "sqrt", "exp", "power", "pow")}
#: Calls made calls of a colmz macro (PostgreSQL's ``array_length`` of an empty array is NULL).
#: ``octet_length`` of text counts its UTF-8 bytes (DuckDB's counts BLOBs only: :data:`TRANSFORM_TYPED_MACROS`);
#: ``upper`` and ``lower`` change ASCII letters only, as PostgreSQL's in the C locale (DuckDB's
#: change every cased letter: ``upper('straße')`` is ``STRAẞE`` there).
#: ``array_upper`` is ``array_length`` (PostgreSQL's arrays written here start at 1); the
#: array macros read every dimension (:data:`colmz.sql.translate.ARRAY_DIMENSION_MACROS`).
#: ``gcd`` and ``lcm`` of integers are integers (DuckDB's are bigints: lcm(2147483647, 2) answers).
CALL_MACROS = {**CHECKED_MATH, "array_upper": RESERVED_PREFIX + "array_length", **{f: RESERVED_PREFIX + f for f in (
    "array_length", "array_lower", "array_remove", "cardinality", "octet_length", "upper", "lower", "gcd", "lcm")}}


def _rename(new: str) -> Rule:
    return lambda c: c.renamed(new)


def _plain(*arities: int) -> Callable[[Rule], Rule]:
    # The rule of an ordinary scalar call (Call.plain) of one of ``arities`` arguments (of any
    # number without them); any other call is kept as written.
    def only(rule: Rule) -> Rule:
        return lambda c: rule(c) if c.plain and (not arities or len(c.arguments) in arities) else None

    return only


def _macro(new: str, arity: int) -> Rule:
    # a plain call of ``arity`` arguments is a call of colmz's macro ``new`` of the same arguments
    return _plain(arity)(lambda c: f"{new}({', '.join(c.args)})")


def _refuse(message: str, error: type[SQLError] = UnsupportedSQL) -> Rule:
    # a construct colmz does not run with PostgreSQL's meaning: UnsupportedSQL naming it (or
    # ``error``: PostgreSQL's own)
    def refuse(c: Call) -> None:
        raise error(message)

    return refuse


@_plain(2, 3)
def _pad(c: Call) -> str:  # PostgreSQL pads with spaces by default
    if len(c.arguments) == 3:  # an empty fill only truncates in PostgreSQL (DuckDB raises)
        return f"{PAD_MACROS[c.name]}({', '.join(c.args)})"
    return f"{c.name}({c.args[0]}, {c.args[1]}, ' ')"


#: ``lpad``/``rpad`` with a fill: PostgreSQL's empty fill leaves the string (truncated to the
#: length), DuckDB raises "Insufficient padding" (:data:`TRANSFORM_MACROS`).
PAD_MACROS = {f: RESERVED_PREFIX + f for f in ("lpad", "rpad")}


@_plain(1)
def _to_hex(c: Call) -> str:
    # PostgreSQL prints lower-case digits, and an int4 (or int2) in 32 bits (-1 is ffffffff)
    x = c.args[0]
    if x.strip().isdigit():
        return f"lower(to_hex({x}))"
    return (f"lower(to_hex(CASE WHEN typeof({x}) IN ('INTEGER', 'SMALLINT', 'TINYINT') AND {x} < 0 "
            f"THEN CAST({x} AS BIGINT) + 4294967296 ELSE {x} END))")


@_plain(2)
def _extract(c: Call) -> str | None:
    unit = c.arguments[0].literal
    if unit is None or unit.kind != "STRING":
        return None
    written = _written(c.text, c.arguments[0])
    if written.lower() in _KEYWORD_UNITS:  # a keyword, not an identifier, in PostgreSQL's grammar
        raise SQLError(f'syntax error at or near "{written}"')
    u = unit.text.strip().lower().replace("'", "''")
    x = _unit_checked(c.args[1], u, "supported", "".join(
        t for t, units in (("d", _TIME_UNITS), ("t", _ZONE_UNITS), ("i", _NOT_INTERVAL_UNITS)) if u in units))
    # PostgreSQL's seconds and milliseconds keep their fraction; DuckDB's are whole.
    if u in _SECOND_UNITS or u in _MILLI_UNITS:
        return f"(date_part('microsecond', {x}) / {'1000000.0' if u in _SECOND_UNITS else '1000.0'})"
    # the year's units of a year BC: PostgreSQL's count (a year has no zero), not DuckDB's
    part = pgfuncs.year_part(u, x) or f"date_part('{_UNIT_SPELLINGS.get(u, u)}', {x})"
    return pgfuncs.infinite_part(u, part, c.args[1], True)


@_plain(2)
def _date_part(c: Call) -> str | None:
    # PostgreSQL's date_part (pgfuncs.date_part: a double precision); it reads a date as a
    # timestamp, so only the zone's units are refused there (and of an interval, which
    # DuckDB refuses too)
    unit = c.arguments[0].literal if len(c.arguments) == 2 and c.plain else None
    if unit is None or unit.kind != "STRING" or unit.text.strip().lower() not in _ZONE_UNITS:
        return pgfuncs.date_part(c)
    u = unit.text.strip().lower()
    return f"CAST(date_part({c.args[0]}, {_unit_checked(c.args[1], u, 'supported', 'dti')}) AS DOUBLE)"


def _unit_checked(x: str, unit: str, verb: str, bad: str) -> str:
    # ``x`` raising PostgreSQL's error where its type is one of ``bad`` (date, timestamp,
    # timestamptz, interval by their first letters: d, t, z, i) and a row reaches it
    return f"{UNIT_CHECK}({x}, '\"{unit}\" not {verb}', '{bad}')" if bad else x


#: PostgreSQL's units of ``extract`` and ``date_trunc`` that a date, a timestamp without
#: time zone or an interval does not have (``extract(hour FROM date)`` raises there; DuckDB
#: answers 0), and its spellings DuckDB lacks.
_SECOND_UNITS = frozenset({"second", "seconds", "sec", "secs", "s"})
_MILLI_UNITS = frozenset({"millisecond", "milliseconds", "ms", "msec", "msecs", "msecond", "mseconds",
                          "millisecon"})
_ZONE_UNITS = frozenset({"timezone", "timezone_hour", "timezone_minute", "timezone_h", "timezone_m"})
_TIME_UNITS = _SECOND_UNITS | _MILLI_UNITS | _ZONE_UNITS | frozenset({
    "microsecond", "microseconds", "us", "usec", "usecs", "usecond", "useconds", "microsecon",
    "minute", "minutes", "min", "mins", "m", "hour", "hours", "h", "hr", "hrs"})
_NOT_INTERVAL_UNITS = _ZONE_UNITS | frozenset({"dow", "isodow", "doy", "week", "weeks", "w", "isoyear",
                                              "julian", "j"})
_UNIT_SPELLINGS = {"qtr": "quarter", "j": "julian"}
#: The units PostgreSQL's grammar does not take unquoted in extract's field: its keywords
#: (other than year ... second) among the units DuckDB reads.
_KEYWORD_UNITS = frozenset({"dec"})
#: The units ``date_trunc`` has (others, ``dow`` or ``epoch``, raise in PostgreSQL; DuckDB
#: truncates by them); a week only for a date or timestamp.
_TRUNC_UNITS = (frozenset({"microsecond", "microseconds", "us", "usec", "usecs", "usecond", "useconds",
                           "millisecond", "milliseconds", "ms", "msec", "msecs", "msecond", "mseconds",
                           "minute", "minutes", "min", "mins", "m", "hour", "hours", "h", "hr", "hrs",
                           "day", "days", "d", "month", "months", "mon", "mons", "quarter", "qtr",
                           "year", "years", "y", "yr", "yrs", "decade", "decades", "dec", "decs"})
                | _SECOND_UNITS)
_WEEK_UNITS = frozenset({"week", "weeks", "w"})
_DECADE_UNITS = frozenset({"decade", "decades", "dec", "decs"})

#: The macro :func:`_unit_checked` writes (:data:`TRANSFORM_MACROS`); the types it tells
#: apart are :data:`_CAST_TYPES`' dates, timestamps and intervals (``_UNIT_TYPES``).
UNIT_CHECK = RESERVED_PREFIX + "unit_check"


_NEGATIVE_LENGTH = "error('negative substring length not allowed')"


@_plain(2, 3)
def _substr(c: Call) -> str:
    # PostgreSQL's substr(s, a, n) is the characters at positions a .. a+n-1 that exist (a
    # position before the first counts, holding nothing); DuckDB counts a < 1 from the end.
    # substring(s FROM a FOR n) is DuckDB's node of the same three arguments.
    a = c.arguments
    if a[1].literal is not None and a[1].literal.kind == "STRING":
        raise UnsupportedSQL(f"{c.name}(string FROM pattern) with a text pattern (a POSIX regular "
                             "expression match) is not supported by colmz")
    args = c.args
    s_arg, at = args[0], f"({args[1]})"
    start = f"CASE WHEN {at} < 1 THEN 1 ELSE {at} END"
    if len(args) == 2:
        return f"substr({s_arg}, {start})"
    n = f"({args[2]})"
    last = f"{at} + {n} - 1"
    length = (f"CASE WHEN {n} < 0 THEN {_NEGATIVE_LENGTH} WHEN {at} < 1 THEN "
              f"(CASE WHEN {last} < 0 THEN 0 ELSE {last} END) ELSE {n} END")
    return f"substr({s_arg}, {start}, {length})"


@_plain(1, 2)
def _round(c: Call) -> str | None:
    if len(c.arguments) == 2:
        return _round_places(c.args[0], c.arguments[1])
    # PostgreSQL's round(x): half to even for a double (rint), half away from zero for
    # numeric (DuckDB's round). The type is read off the argument's node where it says it
    # (a number literal, a cast, avg), else from its subtree (a float cast makes a double; a
    # numeric beside columns of a type known only when it runs is refused), else asked of
    # DuckDB's typeof when the query is bound (a colmz column is never numeric).
    x, kind = c.args[0], _round_kind(c.arguments[0], c.text)
    if kind == "numeric":
        return f"round({x})"
    if kind == "double":
        return f"round_even({x}, 0)"
    # PostgreSQL's avg of integers or numeric is numeric (DuckDB's is DOUBLE); of a double,
    # double: the argument's type decides.
    typed = f"min({x[x.index('(') + 1 : x.rindex(')')]})" if kind == "avg" else x
    return f"(CASE WHEN typeof({typed}) IN ('DOUBLE', 'FLOAT') THEN round_even({x}, 0) ELSE round({x}) END)"


#: PostgreSQL's type of each spelling of a type name the rules read (lower case, words
#: joined by one space): the one table the cast, float, text and integer rules (here and in
#: :mod:`colmz.sql.translate`) take their type words from.
TYPE_SPELLINGS = {
    **dict.fromkeys(("text", "varchar", "string", "character varying"), "text"),
    **dict.fromkeys(("bool", "boolean"), "boolean"),
    **dict.fromkeys(("int", "integer", "int4"), "integer"),
    **dict.fromkeys(("bigint", "int8"), "bigint"),
    **dict.fromkeys(("smallint", "int2"), "smallint"),
    **dict.fromkeys(("float8", "float", "double", "double precision"), "double precision"),
    **dict.fromkeys(("float4", "real"), "real"),
    **dict.fromkeys(("numeric", "decimal"), "numeric"),
}


def type_words(*types: str, upper: bool = False) -> frozenset[str]:
    """The one-word spellings of the PostgreSQL ``types`` (in upper case with ``upper``).

    >>> sorted(type_words("real", upper=True))
    ['FLOAT4', 'REAL']
    """
    return frozenset(w.upper() if upper else w for w, t in TYPE_SPELLINGS.items() if t in types and " " not in w)


_FLOAT_TYPES = type_words("double precision", "real", upper=True)


def _type_kind(t: Expression, text: str) -> str | None:
    words = _type_text(t, text).replace("(", " ").upper().split()
    if any(w in _FLOAT_TYPES for w in words):
        return "double"
    return "numeric" if words and words[0] in ("NUMERIC", "DECIMAL") else None


def _round_kind(e: Expression, text: str) -> str | None:
    # "numeric", "double", "avg" (a whole avg call) or None (DuckDB's typeof decides).
    if e.cls == "CONSTANT" and e.literal is not None and e.literal.kind not in (
            "STRING", "BOOLEAN", "NULL_LITERAL", "BLOB"):
        return "numeric"
    if _cast_type(e, text) is not None and (kind := _type_kind(e.children[1], text)):
        return kind
    if e.cls == "FUNCTION" and e.name == ("avg",):
        return "avg"
    floats = numeric = untyped = False
    stack: list[tuple[Expression, bool]] = [(e, False)]
    while stack:
        n, under_cast = stack.pop()
        if n.cls == "TYPE":
            kind = _type_kind(n, text)
            floats |= kind == "double"
            numeric |= kind == "numeric"
        elif n.cls == "CONSTANT" and n.literal is not None and n.literal.kind == "NUMERIC":
            numeric |= "." in n.literal.text or "e" in n.literal.text.lower()
        elif n.cls == "FUNCTION" and n.name == ("avg",):
            numeric = True
        elif n.cls == "COLUMN_REF" and not under_cast:
            untyped = True
        stack.extend((k, n.cls == "CAST") for k in n.children)
        if n.subquery is not None:
            stack.extend((k, False) for d in all_queries(n.subquery) for k, _ in _own_roots(d))
    if floats:
        return "double"  # double with numeric is double in PostgreSQL
    if numeric and untyped:
        raise UnsupportedSQL(
            "round() of an expression mixing a numeric value (a decimal literal, a "
            "::numeric cast, avg) with values of a type colmz reads only when it runs "
            "is not supported by colmz: PostgreSQL rounds numeric half away from zero "
            "and double half to even, so cast the argument to numeric or float8")
    return "numeric" if numeric else None


def _round_places(x: str, places: Expression) -> str:
    # PostgreSQL's round(x, n) is numeric's (there is no round(float8, int)): its scale is
    # n, where DuckDB keeps the argument's scale when it is smaller (round(2.5, 2) is 2.5
    # there, 2.50 in PostgreSQL) and an integer stays an integer. A double (colmz's
    # ``::numeric`` of a double) is rounded as a double. Adding a zero of scale n gives a
    # decimal or integer the scale n and leaves a double a double.
    lit = places.literal
    if lit is None or lit.kind != "INTEGER" or not lit.text.isdigit() or int(lit.text) > 37:
        return None  # kept as written
    n = int(lit.text)
    return f"(round({x}, {n}) + CAST(0 AS DECIMAL({n + 1},{n})))"


@_plain(1)
def _sign(c: Call) -> str:
    # SIGN's overloads are chosen before an aggregate or window argument binds (DuckDB finds
    # them ambiguous there): such a value's sign is a double (a numeric's is the same number)
    return f"CAST(sign({c.args[0]}) AS DOUBLE)" if _binds_late(c.arguments[0]) else f"{SIGN}({c.args[0]})"


def _generate_series(c: Call) -> str | None:
    if c.table:  # a FROM item (its span the call): DuckDB's table function of the same bounds
        n = c.node
        if n.filter is not None or n.order_by or n.distinct:
            return None
        series = f"generate_series({', '.join(_series_bounds(c))})"
        # PostgreSQL's series of integers is an integer (DuckDB's a BIGINT, which chr() and
        # an int4's overflow read otherwise): of integer literals, its values cast back, in a
        # subquery whose column the alias's column list names (without one, the alias would
        # name the subquery's row, not its column as in PostgreSQL)
        if all(_known_type(a, c.text) == "integer" for a in c.arguments) \
                and _COLUMN_LIST_ALIAS.match(c.text, n.end):
            return f"(SELECT CAST(generate_series AS INTEGER) AS generate_series FROM {series})"
        return series
    if not c.plain:
        return None
    if c.inside:
        raise UnsupportedSQL(f"generate_series() inside {c.inside} is not supported by colmz "
                             "(PostgreSQL does not allow set-returning functions there)")
    # A set-returning function in PostgreSQL (a row per value); DuckDB's scalar
    # generate_series returns one list, which unnest spreads into those rows.
    return f"unnest(generate_series({', '.join(_series_bounds(c))}))"


#: A FROM item's alias with a column list, as it follows the item: ``g(i)``, ``AS g (i)``.
_COLUMN_LIST_ALIAS = re.compile(r'\s*(?:AS\s+)?(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z_0-9$]*)\s*\(', re.I)


def _series_bounds(c: Call) -> list[str]:
    # PostgreSQL has no generate_series of dates: with a step (an interval) a date is read
    # as a timestamptz, its preferred datetime type, unless the other bound is a timestamp
    # (DuckDB's series of dates is a timestamp's): SERIES_BOUND of each bound and the other
    args = c.args
    if len(args) == 3 and not any(_binds_late(a) for a in c.arguments[:2]):
        a, b = args[:2]
        args[:2] = f"{SERIES_BOUND}({a}, {b})", f"{SERIES_BOUND}({b}, {a})"
    return args


def _third_argument(c: Call) -> str | None:
    # a third argument (the text of NULL elements): colmz.sql.pgfuncs' forms
    if c.plain and len(c.arguments) == 3:
        a, d, n = c.args
        if c.name == "string_to_array":
            return pgfuncs.string_to_array_null(f"{STRING_TO_ARRAY}({a}, {d})", n)
        return f"{pgfuncs.ARRAY_TO_STRING_NULL}({a}, {d}, {n})"
    macro = {"string_to_array": STRING_TO_ARRAY, "array_to_string": ARRAY_TO_STRING}[c.name]
    return _macro(macro, 2)(c)


#: PostgreSQL's ``array_to_string(a, d)`` prints each element with its type's output
#: function: a boolean as ``t``/``f``, a double by its shortest digits (DuckDB: ``true``,
#: ``2.0``); a numeric element keeps its own scale in PostgreSQL, which an array of DuckDB's
#: DECIMAL does not (refused when it runs). The element type is DuckDB's ``typeof``, folded
#: when the query is bound.
ARRAY_TO_STRING = RESERVED_PREFIX + "array_to_string"


#: PostgreSQL's ``string_to_array(s, d)``: an empty ``s`` is an empty array, a NULL ``d``
#: splits ``s`` into characters, an empty ``d`` keeps ``s`` whole; ``split_part`` with an
#: empty delimiter is the whole string's one field, a field position 0 raises; ``string_agg`` with a NULL delimiter joins
#: with none (DuckDB: one element, an element per character, NULL).
STRING_TO_ARRAY = RESERVED_PREFIX + "string_to_array"
SPLIT_PART = RESERVED_PREFIX + "split_part"
#: PostgreSQL's chr(0) raises (text holds no NUL), DuckDB's gives one.
CHR = RESERVED_PREFIX + "chr"
#: PostgreSQL's sign() of an integer is a double precision (its integer read as one), of a
#: numeric a numeric; DuckDB's is a tinyint (sign(3) / 2 was 0, not 0.5).
#: (:data:`TRANSFORM_TYPED_MACROS`)
SIGN = RESERVED_PREFIX + "sign"
SPLITTING_MACROS = (
    f"CREATE OR REPLACE MACRO {STRING_TO_ARRAY}(s, d) AS CASE WHEN s IS NULL THEN NULL "
    "WHEN s = '' THEN CAST([] AS VARCHAR[]) WHEN d IS NULL THEN string_split(s, '') "
    "WHEN d = '' THEN [s] ELSE string_to_array(s, d) END",
    f"CREATE OR REPLACE MACRO {SPLIT_PART}(s, d, n) AS CASE WHEN n = 0 AND s IS NOT NULL AND d IS NOT NULL "
    "THEN error('field position must not be zero') WHEN d = '' AND n <> 0 THEN "
    "CASE WHEN n IN (1, -1) THEN s ELSE '' END ELSE split_part(s, d, n) END",
)


#: PostgreSQL's names of the types a cast gives that are neither text nor bytea (by the
#: cast's type as written, its first word): string_agg has no form of them.
_NOT_TEXT_TYPES = {
    **{w: t for w, t in TYPE_SPELLINGS.items() if t != "text"},
    "date": "date", "timestamp": "timestamp without time zone", "timestamptz": "timestamp with time zone",
    "time": "time without time zone", "interval": "interval", "jsonb": "jsonb", "json": "json", "uuid": "uuid",
}


def _known_type(e: Expression, text: str) -> str | None:
    # PostgreSQL's type of ``e`` where a literal or a cast tells it: "unknown" for a string
    # literal or NULL, "text" for a cast to text, a type of _NOT_TEXT_TYPES; else None
    if e.cls == "CONSTANT" and e.literal is not None:
        kind = e.literal.kind
        if kind in ("STRING", "NULL_LITERAL"):
            return "unknown"
        if kind == "INTEGER":
            v = e.literal.value
            return "integer" if -(2**31) <= v < 2**31 else "bigint" if -(2**63) <= v < 2**63 else "numeric"
        return {"NUMERIC": "numeric", "BOOLEAN": "boolean"}.get(kind)
    written = _cast_type(e, text)
    if written is None or "[" in written or written.endswith("array"):
        return None
    words = written.split("(")[0].strip()
    if words in ("timestamp with time zone", "timestamp without time zone", "time with time zone",
                 "time without time zone"):
        return words
    return "text" if TYPE_SPELLINGS.get(words) == "text" else _NOT_TEXT_TYPES.get(words)


def _string_agg(c: Call) -> str | None:
    # a NULL delimiter joins with none in PostgreSQL (DuckDB's result is NULL)
    if len(c.arguments) != 2 or c.node.cls != "FUNCTION":
        return None
    # PostgreSQL's string_agg is of text or bytea: a value of another type known from the
    # text has no function (DuckDB's casts it to text)
    value = _known_type(c.arguments[0], c.text)
    if value not in (None, "unknown", "text"):
        delimiter = _known_type(c.arguments[1], c.text) or "text"
        raise SQLError(f"function string_agg({value}, {delimiter}) does not exist")
    if c.plain:
        return f"string_agg({c.args[0]}, coalesce({c.args[1]}, ''))"
    sorted_values = _sorted_distinct(c, [c.args[0]])
    if sorted_values is None:
        return None
    if c.arguments[1].literal is None:
        raise UnsupportedSQL("string_agg(DISTINCT x, d) with a delimiter that is not a constant is not "
                             "supported by colmz")
    return f"list_aggr({sorted_values}, 'string_agg', coalesce({c.args[1]}, ''))"


def _sorted_distinct(c: Call, args: list[str] | None = None) -> str | None:
    # PostgreSQL finds a DISTINCT aggregate's distinct values by sorting its input, so an
    # order-showing aggregate (array_agg, string_agg) without ORDER BY lists them sorted,
    # NULL last; DuckDB hashes them (any order). Its list of them is sorted after (DuckDB's
    # ORDER BY inside a DISTINCT aggregate must repeat an argument it can compare, which an
    # argument holding a colmz macro is not).
    n = c.node
    if not n.distinct or n.order_by or c.window or c.table or n.cls != "FUNCTION" or not c.arguments:
        return None
    having = "" if n.filter is None else f" FILTER (WHERE {c.text_of(n.filter)})"
    return f"list_sort(array_agg(DISTINCT {', '.join(c.args if args is None else args)}){having}, 'ASC', 'NULLS LAST')"


#: PostgreSQL's functions of a polymorphic argument (``anyelement``, ``anynonarray``): with
#: only an untyped literal there (``'a'``, ``NULL``), PostgreSQL cannot resolve the type and
#: raises (``src/backend/parser/parse_coerce.c``: enforce_generic_type_consistency); DuckDB
#: reads the literal as text and answers. The message is PostgreSQL's.
_POLYMORPHIC = {
    **{f: "could not determine polymorphic type because input has type unknown"
       for f in ("lag", "lead", "first_value", "last_value", "nth_value")},
    "array_agg": "function array_agg(unknown) is not unique",
}


_OVER = re.compile(r"\bOVER\b", re.IGNORECASE)


def _polymorphic(c: Call) -> str | None:
    # the first argument, right after the call's parenthesis
    first = c.first_argument
    args = ()
    if c.window and c.name in ("lag", "lead", "nth_value"):
        # the call's own arguments: the children before OVER (the others are its window's)
        m = _OVER.search(c.text, c.node.start, c.node.end)
        over = m.start() if m else c.node.end
        args = sorted((k for k in c.node.children if k.start >= 0 and k.end <= over), key=lambda k: k.start)
    if first is not None and first.literal is not None and first.literal.kind in ("STRING", "NULL_LITERAL") \
            and c.text[: first.start].rstrip().endswith("(") and not (c.name in ("lag", "lead") and len(args) == 3):
        # (lag and lead with a default are of anycompatible: literals alone there are text)
        raise SQLError(f"{_POLYMORPHIC[c.name]}: {c.name}({_written(c.text, first)}...)")
    if not args:
        return None
    if c.name == "nth_value":
        n = args[-1].literal if args else None  # (the position: its value may be unplaced, overlay(...))
        if n is not None and n.kind == "INTEGER" and int(n.text) <= 0:
            raise SQLError("argument of nth_value must be greater than zero")
        return None
    if len(args) == 3 and not (args[2].literal is not None and args[2].literal.kind in ("NULL_LITERAL", "INTEGER")):
        # PostgreSQL's result is the common type of the value and a default (an integer
        # with 2.5 is numeric); DuckDB's is the value's, the default cast to it (3, or an
        # error for a NaN to a bigint): the value is read as the common type (a list of both
        # has it).
        value, offset, default = (c.text_of(k) for k in args)
        return (f"{c.name}(list_value({value}, {default})[1], {offset}, {default}"
                + c.span_text(args[2].end, c.node.end))
    return None


#: The negated integer constants PostgreSQL types narrower than DuckDB: PostgreSQL's
#: grammar folds ``-2147483648`` (also ``-(2147483648)``) into one int4 constant
#: (``src/backend/parser/gram.y``: doNegate), DuckDB negates the int8 2147483648 (an int8
#: result: abs(-2147483648) answers where PostgreSQL raises "integer out of range").
_SMALLEST_INTS = {"-2147483648": "INTEGER", "-9223372036854775808": "BIGINT"}
_SMALLEST_MAGNITUDES = frozenset(v.lstrip("-") for v in _SMALLEST_INTS)


def _smallest_int(c: Call) -> str:
    v = c.node.literal.text
    return f"CAST({v} AS {_SMALLEST_INTS[v]})"


#: Operators of colmz.sql.jsonb by DuckDB's name of their node (``@>``, the spelled ``#>`` ...).
_JSONB_OPS = frozenset(jsonb.OPERATORS)

#: The name of DuckDB's node for a call written otherwise: a node is the call written at its
#: start only when its own name is the one written (``f(x) * 2`` is a ``*`` node there).
_ALIASES = {"extract": "date_part", "percentile_cont": "quantile_cont", "percentile_disc": "quantile_disc"}

#: A conditional construct around a set-returning call: PostgreSQL refuses one there.
_CONDITIONAL = {"OPERATOR_COALESCE": "coalesce()", "CASE_EXPR": "CASE"}
_CONDITIONAL_CALLS = {"nullif", "greatest", "least"}


# ----------------------------------------------------------------------------- real with exact numbers

#: PostgreSQL has no ``real`` operator with an integer or ``numeric``: the operator chosen is
#: ``float48`` (``src/backend/utils/adt/float.c``'s float48div, float48eq, ...), the real
#: widened to a double and the other operand read as a double, the result a
#: ``double precision`` (``1::real / 3`` is 0.3333333333333333). DuckDB casts the other
#: operand to FLOAT and computes in single precision. A binary arithmetic or comparison node
#: with one operand visibly a real (a cast to ``real``/``float4``/``float(p)``, p <= 24)
#: widens it through :data:`REAL_WIDEN`, whose typed overloads turn the real into a DOUBLE
#: exactly when the other operand is an integer or a decimal (folded when DuckDB binds the
#: query: beside another real or a double it stays as it is). A real column's type is not
#: known to the translation: ``r / 3`` over a real column alone is DuckDB's.
REAL_WIDEN = RESERVED_PREFIX + "real_widen"
_EXACT_DUCK_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                     "UINTEGER", "UBIGINT", "DECIMAL")
_COMPARISONS = {"COMPARE_EQUAL": "=", "COMPARE_NOTEQUAL": "<>", "COMPARE_LESSTHAN": "<",
                "COMPARE_GREATERTHAN": ">", "COMPARE_LESSTHANOREQUALTO": "<=",
                "COMPARE_GREATERTHANOREQUALTO": ">="}
_ARITHMETIC = {"+": "+", "-": "-", "*": "*", "/": "/", "//": "/"}  # DuckDB names PostgreSQL's / "//"
_REAL_OPS = {**_ARITHMETIC, **_COMPARISONS}


def _shows_real(n: Expression, text: str, memo: dict | None = None) -> bool:
    # Whether ``n`` is a cast (or a typed literal) to real, its negation, or arithmetic of
    # two of them (``memo``: id -> answer, so that a chain's nodes are each read once).
    if memo is not None and id(n) in memo:
        return memo[id(n)]
    if is_arith(n):
        out = all(_shows_real(k, text, memo) for k in n.children)
    else:
        out = float_kind(_cast_type(n, text) or "") == "real"
    if memo is not None:
        memo[id(n)] = out
    return out


def _real_operator(e: Expression) -> str | None:
    # The operator of a binary arithmetic or comparison node ``e`` (None: not one).
    if len(e.children) != 2:
        return None
    if e.cls == "COMPARISON":
        return _REAL_OPS.get(e.type)
    return _REAL_OPS.get(e.name[0]) if is_arith(e) else None


def _sum_of_real(c: Call) -> None:
    # PostgreSQL's sum of reals adds in single precision (float4pl) and is a real; DuckDB's
    # adds doubles.
    # (a window's children hold its ORDER BY and PARTITION BY too: the argument is before OVER)
    over = c.text.upper().find("OVER", c.node.start) if c.window else c.node.end
    if any(_shows_real(k, c.text) and k.end <= over for k in c.node.children):
        raise UnsupportedSQL("sum() of a real is not supported by colmz (PostgreSQL adds in single "
                             "precision; DuckDB in double): cast the argument to float8")


#: ``avg(x)`` of an interval in DuckDB divides the total by its own rules, not PostgreSQL's
#: (interval_div: months to days at 30, days to seconds, each step rounded to microseconds):
#: the macro passes any other value and is folded away when the query is bound, and of an
#: interval takes the error branch when it runs (refused, as :mod:`colmz.sql.run` reads it).
NOT_INTERVAL = RESERVED_PREFIX + "avg_not_interval"
AVG_OF_INTERVAL = ("avg() of an interval is not supported by colmz (PostgreSQL divides the total by "
                   "its own rounding of months, days and microseconds)")


#: PostgreSQL has ``%`` and ``mod()`` of integers and numeric only (a float8 or real operand
#: raises "operator does not exist"); DuckDB computes them of doubles. The macro is folded
#: away when the query is bound unless an operand is a float, which is refused when it runs.
MOD = RESERVED_PREFIX + "mod"


#: PostgreSQL's percentile_cont interpolates double precision and interval values only (of a
#: date or time it raises "function does not exist"); DuckDB's interpolates those too. The
#: macro wraps the call's result: folded away unless it is a date or time, refused when it runs.
PERCENTILE_CONT = RESERVED_PREFIX + "percentile_cont"


def _ntile(c: Call) -> str | None:
    # An integer (DuckDB's is a bigint). PostgreSQL reads the bucket count once per partition,
    # at its first row whose count is not NULL (window_ntile), DuckDB at each row: a count
    # that may vary by row (a column, a subquery, a window's value) is refused by name.
    if not c.window:
        return None
    m = _OVER.search(c.text, c.node.start, c.node.end)
    over = m.start() if m else c.node.end
    if any(n.cls in ("COLUMN_REF", "SUBQUERY", "WINDOW", "PARAMETER") for k in c.node.children
           if k.start >= 0 and k.end <= over for n in k.walk()):
        raise UnsupportedSQL("ntile() of a bucket count that varies by row is not supported by colmz "
                             "(PostgreSQL reads it once per partition, DuckDB at each row)")
    return f"CAST({c.by(None)} AS INTEGER)"


def _percentile(c: Call) -> str | None:
    # A constant fraction DuckDB's binder refuses: NULL is PostgreSQL's NULL result (the
    # call kept, of fraction 0, under a CASE that never takes it: an aggregate still, of the
    # same type); outside [0, 1] PostgreSQL's error (percentile_disc_final's "%g").
    frac = c.arguments[0] if len(c.arguments) == 1 and not c.window and not c.table else None
    lit = frac.literal if frac is not None and frac.start >= 0 else None
    if lit is None:
        return None
    if lit.kind == "NULL_LITERAL":
        return (f"(CASE WHEN false THEN {c.span_text(c.node.start, frac.start)}0"
                f"{c.span_text(frac.end, c.node.end)} END)")
    if lit.kind in ("INTEGER", "NUMERIC") and not 0 <= lit.value <= 1:
        raise SQLError(f"percentile value {float(lit.value):g} is not between 0 and 1")
    return None


def _avg(c: Call) -> str | None:
    # The argument goes through NOT_INTERVAL; the rest of the call's span (FILTER, ORDER BY,
    # OVER) is kept as written.
    a = None if c.table else c.first_argument
    if a is None:
        return None
    n = c.node
    return f"{c.span_text(n.start, a.start)}{NOT_INTERVAL}({c.text_of(a)}){c.span_text(a.end, n.end)}"


def _null_at_zero(*sums: str) -> Rule:
    # PostgreSQL's corr and regr_slope are NULL where a sum of squares they divide by is 0
    # (float8_corr, float8_regr_slope: all x equal); DuckDB's 0 / 0 is NaN. The sums are the
    # same call renamed (its arguments, FILTER and OVER kept), so a NaN input stays NaN.
    def rule(c: Call) -> str | None:
        if c.table:
            return None
        zero = " OR ".join(f"{c.renamed(s)} = 0" for s in sums)
        return f"CASE WHEN {zero} THEN NULL ELSE {c.by(None)} END"
    return rule


def _real_mixed(c: Call) -> str:
    a, b = c.node.children
    real_a = _shows_real(a, c.text)
    other = b if real_a else a
    if any(n.subquery is not None for n in other.walk()):
        raise UnsupportedSQL("arithmetic or a comparison of a real with a subquery is not supported by "
                             "colmz (PostgreSQL computes a real with an integer or numeric as a double)")
    ta, tb = c.text_of(a), c.text_of(b)
    if real_a:
        ta = f"{REAL_WIDEN}({ta}, {tb})"
    else:
        tb = f"{REAL_WIDEN}({tb}, {ta})"
    return f"({ta}) {_real_operator(c.node)} ({tb})"


def may_transform(text: str, toks) -> bool:
    """Whether ``text`` (whose tokens are ``toks``) may hold a node of the table: a word or
    operator an entry of the table names as its trigger (a call of :data:`CALLS`, ``LIKE``,
    ``numeric``, ``float``, ``~~``, ``->``, ...), a number with a point or exponent, or a
    token in a context the entries of subscripts, arrays, casts, rows and arithmetic read
    (``::text``, ``a[i]``, ``f * g``, ``)`` before a comparison or ``IS NULL``): a superset,
    the tree decides. One pass over the cached tokens; the tree is read only when this holds.

    >>> from colmz.sql.tokens import tokenize
    >>> [may_transform(s, tokenize(s)) for s in ("SELECT t1.x FROM t1", "SELECT lpad(x, 2)")]
    [False, True]
    """
    n = len(toks)
    opens = []  # "(" beginning a select item (after SELECT or a comma): maybe a row value
    # Only the tokens a test may hold for are visited, found by one comprehension (a loop
    # testing every token costs more): words by their upper case where the text is ASCII
    # (there it decides as the lower case does), every token otherwise.
    if text.isascii():
        toks_at = [i for i, t in enumerate(toks) if t.upper in _MAY_WORDS or t.text in _MAY_TEXTS
                   or t.kind in _TESTED_KINDS]
    else:
        toks_at = range(n)
    for i in toks_at:
        t = toks[i]
        k = t.kind
        if k == "word":
            w = t.text.lower()
            if w in _TREE_WORDS or (w in ("varchar", "varying") and i + 1 < n and toks[i + 1].text == "("):
                return True
        elif k == "number":
            if "." in t.text or "e" in t.text or "E" in t.text or t.text in _SMALLEST_MAGNITUDES:
                return True
            if ((i > 0 and toks[i - 1].text in _COMPARE_OPS) or (i + 1 < n and toks[i + 1].text in _COMPARE_OPS)) \
                    and any(x.text in _MOVED_OPS for x in toks[max(0, i - 4) : i + 5]):
                return True  # maybe arithmetic compared with a constant (_moved_constant)
        elif k == "string":
            if t.text[0] == "'" and _ODD_DATETIME.match(t.text, 1, len(t.text) - 1):
                return True  # maybe a date or time's input DuckDB reads otherwise (_datetime_text)
        elif k == "qident":
            if t.name in CALLS or t.name == "char" or (i + 1 < n and toks[i + 1].text == "(" and t.name != t.name.lower()) \
                    or (i > 0 and (toks[i - 1].text == "::" or toks[i - 1].upper == "AS")
                        and (t.name in _NO_PG_TYPES or t.name != t.name.lower())):
                return True  # a call of the table, a quoted name PostgreSQL has no function or type of
        elif k == "op":
            x = t.text
            if x in _MAY_OPS or (x == "::" and i + 1 < n and toks[i + 1].text.lower() in _CAST_TARGETS) or (
                    x in _PAIR_OPS and 0 < i < n - 1 and _operands_at(toks, i)):
                return True
            if x == "[" and i > 0 and (toks[i - 1].upper != "ARRAY" or (i > 1 and toks[i - 2].text == "[") or (
                    i + 1 < n and toks[i + 1].text == "]") or any(
                    t.kind == "qident" or (t.kind == "word" and t.upper not in _CONSTANT_WORDS)
                    for t in toks[i + 1 : closing(toks, i)])):
                # a subscript, a slice, a sub-array, an array type; an ARRAY[...] whose sub-arrays'
                # shapes may be known only when it runs (only an ARRAY[...] of constants is not read)
                return True
            if x == "(" and 0 < i < n - 1 and (toks[i - 1].upper in ("SELECT", "DISTINCT") or toks[i - 1].text == ","):
                opens.append(i)
    # (the tokens split a shift operator: << is two "<")
    return _MAY_COMPARE_ROWS.search(text) is not None or (opens and _may_row_item(toks, opens)) \
        or _may_name_derived(toks) or "<<" in text or ">>" in text


def _may_row_item(toks, opens: list[int]) -> bool:
    # Whether one of the "(" at ``opens`` (each beginning a select item) holds a top-level
    # comma: maybe a row value ``(a, b)``. The rows of a VALUES list are not select items (a
    # query of VALUES alone selects ``*`` from them), so their own parentheses are passed over.
    rows = {o for v, t in enumerate(toks) if t.upper == "VALUES" for o, _ in values_rows(toks, v)}
    return any(toks[i + 1].upper not in ("SELECT", "WITH", "VALUES") and i not in rows
               and any(toks[k].text == "," for k in top_level(toks, i + 1)) for i in opens)


def values_rows(toks, at: int) -> list[tuple[int, int]]:
    """The ``(`` and ``)`` of each row of the ``VALUES`` at token ``at`` (``VALUES (..), (..)``),
    up to the first row not closed.

    >>> from colmz.sql.tokens import tokenize
    >>> values_rows(tokenize("VALUES (1, 2), (3, 4)"), 0)
    [(1, 5), (7, 11)]
    """
    out: list[tuple[int, int]] = []
    j, n = at + 1, len(toks)
    while j < n and toks[j].kind == "op" and toks[j].text == "(":
        c = closing(toks, j)
        if c < 0:
            break
        out.append((j, c))
        if not (c + 2 < n and toks[c + 1].kind == "op" and toks[c + 1].text == "," and toks[c + 2].text == "("):
            break
        j = c + 2
    return out


def all_queries(q: Query) -> Iterator[Query]:
    """``q`` and every query inside it: its CTEs, set operation branches, subqueries in FROM
    and in expressions (the one walk of a statement's queries).

    >>> [d.type for d in all_queries(parse_tree("SELECT (SELECT 1) FROM (SELECT 2) s")[0])]
    ['SELECT_NODE', 'SELECT_NODE', 'SELECT_NODE']
    """
    stack = [q]
    while stack:
        d = stack.pop()
        yield d
        stack.extend(cte for _, cte in d.ctes)
        stack.extend(d.children)
        stack.extend(t.subquery for t in table_refs(d) if t.subquery is not None)
        stack.extend(n.subquery for e, _ in _own_roots(d) for n in e.walk() if n.subquery is not None)


def first_branch(q: Query) -> Query:
    """The query whose select list gives ``q``'s columns: a set operation's (or recursive
    CTE's) first branch."""
    while q.type in ("SET_OPERATION_NODE", "RECURSIVE_CTE_NODE") and q.children:
        q = q.children[0]
    return q


def item_name(e: Expression, i: int, renames: tuple[str, ...] = ()) -> str:
    """The name of select item ``e``, the ``i``-th of its list, where a column list
    ``renames`` names the first ones anew: its rename, else its alias, else a column's name;
    ``""`` for an item whose name PostgreSQL figures otherwise (``?column?``, ``upper``).

    >>> [item_name(e, i, ("x",)) for i, e in enumerate(parse_tree("SELECT a, t.b, c AS d, 1")[0].items)]
    ['x', 'b', 'd', '']
    """
    return renames[i] if i < len(renames) else e.alias or (e.name[-1] if e.cls == "COLUMN_REF" else "")


def table_refs(d: Query) -> list[Table]:
    """Every table reference of ``d``'s ``FROM`` (a join's sides too)."""
    out, stack = [], [d.from_] if d.from_ is not None else []
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(t.children)
    return out


def _own_roots(d: Query, tables: bool = True) -> list[tuple[Expression, bool]]:
    # The expression roots of query ``d`` itself (not of the queries inside it), each with
    # whether it is a FROM item's call; ``tables=False`` leaves out its FROM's (join
    # conditions, table functions, VALUES).
    out = [(e, False) for e in (*d.items, *d.group_by, *(e for m in d.modifiers for e in m.expressions),
                                *(x for x in (d.where, d.having, d.qualify) if x is not None))]
    if tables:
        out.extend((e, t.type == "TABLE_FUNCTION") for t in table_refs(d) for e in t.expressions)
    return out


# ----------------------------------------------------------------------------- rows

#: A text that may hold a row comparison: ``)`` then a comparison, ``IN`` or ``IS [NOT]
#: NULL`` (a superset; the tree decides).
_MAY_COMPARE_ROWS = re.compile(
    r"\)\s*(=|<>|!=|<=|>=|<|>|in\b|not\s+in\b)\s*(\(|row\b)|\)\s*is\s+(not\s+)?null\b", re.IGNORECASE)
# a number beside a comparison, arithmetic near it: maybe a constant DuckDB moves (_moved_constant)
_COMPARE_OPS = frozenset({"=", "<", ">", "<=", ">=", "<>", "!="})
_MOVED_OPS = frozenset({"+", "-", "*"})
_ROW_TESTS = {"OPERATOR_IS_NULL": "IS NULL", "OPERATOR_IS_NOT_NULL": "IS NOT NULL"}


def _is_row(e: Expression) -> bool:
    return e.cls == "FUNCTION" and e.name == ("row",)


def _fields(c: Call, row: Expression) -> list[str]:
    for f in row.children:
        if _is_row(f):
            raise UnsupportedSQL("row comparisons of nested rows are not supported by colmz")
    return [c.text_of(f) for f in row.children]


def _expand(op: str, left: list[str], right) -> str:
    # PostgreSQL compares rows field by field: the first pair that is unequal or holds a
    # NULL decides (NULL if it holds one); = and <> are the AND and OR of the pairs; IN is
    # the OR of the rows' equalities; IS [NOT] NULL holds for every field. DuckDB compares
    # them as structs, NULL fields as values.
    if op in ("IS NULL", "IS NOT NULL"):
        return "(" + " AND ".join(f"({f}) {op}" for f in left) + ")"
    if op in ("IN", "NOT IN"):
        any_equal = " OR ".join(_expand("=", left, r) for r in right)
        return f"({'NOT ' if op == 'NOT IN' else ''}({any_equal}))"
    if len(left) != len(right):
        raise SQLError(f"row comparison of {len(left)} fields with {len(right)} fields")
    pairs = [(f"({a})", f"({b})") for a, b in zip(left, right)]
    if op == "=":
        return "(" + " AND ".join(f"{a} = {b}" for a, b in pairs) + ")"
    if op == "<>":
        return "(" + " OR ".join(f"{a} <> {b}" for a, b in pairs) + ")"
    whens = " ".join(f"WHEN {a} IS NULL OR {b} IS NULL THEN NULL WHEN {a} <> {b} THEN {a} {op} {b}"
                     for a, b in pairs)
    return f"(CASE {whens} ELSE {'true' if op in ('<=', '>=') else 'false'} END)"


#: Volatile functions: a call gives another value each time it is evaluated (a rule that
#: would evaluate one more than once refuses it; a filter holding one is not moved).
VOLATILE = frozenset({"random", "rand", "gen_random_uuid", "uuid", "nextval", "currval", "setseed"})


def _once(row: Expression) -> None:
    # The expansion repeats these fields; PostgreSQL evaluates each once.
    for f in row.children:
        for n in f.walk():
            if n.cls == "FUNCTION" and n.name and n.name[-1].lower() in VOLATILE:
                raise UnsupportedSQL(f"a row comparison of a volatile call ({n.name[-1]}()) is not "
                                     "supported by colmz (PostgreSQL evaluates each field once; colmz "
                                     "compares field by field and would evaluate it again)")


def _row_comparison(c: Call) -> str:
    left, right = c.node.children
    op = _COMPARISONS[c.node.type]
    if op not in ("=", "<>"):
        _once(left)
        _once(right)
    return _expand(op, _fields(c, left), _fields(c, right))


def _row_test(c: Call) -> str:
    return _expand(_ROW_TESTS[c.node.type], _fields(c, c.node.children[0]), None)


def _row_in(c: Call) -> str | None:
    node = c.node.children[0] if c.node.type == "OPERATOR_NOT" else c.node
    left, *rows = node.children
    fields = _fields(c, left)
    if not all(_is_row(r) and len(r.children) == len(fields) for r in rows):
        return None  # not a list of rows of the same width: DuckDB's own IN
    if len(rows) > 1:
        _once(left)
    return _expand("NOT IN" if node is not c.node else "IN", fields, [_fields(c, r) for r in rows])


_row_subquery = _refuse("row comparisons with a subquery are not supported by colmz")


def _is_list(e: Expression) -> bool:
    # an array written as a list (ARRAY[..], or [..] inside one)
    return e.type == "ARRAY_CONSTRUCTOR" or (e.cls == "FUNCTION" and e.name == ("list_value",))


def _array_shape(e: Expression) -> tuple[int, ...] | None:
    # The dimensions of an array written as nested lists (ARRAY[[1, 2], [3, 4]] is (2, 2)),
    # () for another value, None when its sub-arrays (every element a list) differ in shape:
    # PostgreSQL's multidimensional arrays are rectangular, DuckDB's lists of lists need not be
    if not _is_list(e):
        return ()
    shapes = [_array_shape(k) for k in e.children]
    lists = [x for k, x in zip(e.children, shapes) if _is_list(k)]
    if None in shapes or (lists and len(lists) == len(shapes) and len(set(lists)) > 1):
        return None
    return (len(e.children), *(lists[0] if lists and len(lists) == len(shapes) else ()))


def pg_array_text(text: str) -> list:
    r"""PostgreSQL's array input text read: nested lists of the elements' texts (``None`` for
    an unquoted ``NULL``), quoted elements and backslash escapes as ``array_in`` reads them;
    :class:`SQLError` "malformed array literal" otherwise (also for sub-arrays of different
    shapes, PostgreSQL's arrays being rectangular).

    >>> pg_array_text('{1, NULL, "a,\\"b" , c d}'), pg_array_text('{{1,2},{3,4}}'), pg_array_text(' {} ')
    (['1', None, 'a,"b', 'c d'], [['1', '2'], ['3', '4']], [])
    """
    def malformed():
        return SQLError(f'malformed array literal: "{text}"')

    def space(i: int) -> int:
        while i < len(text) and text[i].isspace():
            i += 1
        return i

    def element(i: int) -> tuple[object, int]:
        if text[i] == "{":
            return array(i)
        out, quoted, last = [], text[i] == '"', 0  # last: the length of out up to its last escaped or quoted char
        i += quoted
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                last, i = len(out), i + 2
                continue
            if quoted and ch == '"':
                return "".join(out), i + 1
            if not quoted and ch in ",}":
                word = "".join(out[: max(last, len("".join(out[last:]).rstrip()) + last)])
                if not word:
                    raise malformed()
                return (None if last == 0 and word.upper() == "NULL" else word), i
            if not quoted and ch in '{"':
                raise malformed()
            out.append(ch)
            i += 1
        raise malformed()

    def array(i: int) -> tuple[list, int]:
        items: list = []
        i = space(i + 1)
        if text[i : i + 1] == "}":
            return items, i + 1
        while i < len(text):
            item, i = element(space(i))
            items.append(item)
            i = space(i)
            if text[i : i + 1] == "}":
                return items, i + 1
            if text[i : i + 1] != ",":
                break
            i += 1
        raise malformed()

    i = space(0)
    if text[i : i + 1] != "{":
        raise malformed()
    value, i = array(i)
    if space(i) != len(text) or _text_shape(value) is None:
        raise malformed()
    return value


def _text_shape(value) -> tuple[int, ...] | None:
    # the dimensions of pg_array_text's nested lists, None when not rectangular
    if not isinstance(value, list):
        return ()
    shapes = {_text_shape(v) for v in value}
    if None in shapes or len(shapes) > 1:
        return None
    return (len(value), *(shapes.pop() if shapes else ()))


def _array_text_cast(c: Call) -> str:
    # A string literal cast to an array type: PostgreSQL's array text (quotes, escapes, NULL,
    # nested braces) read here (DuckDB's cast reads its own list text), the elements cast as
    # the list; a multidimensional one to a list of lists
    x, t = c.node.children
    value = pg_array_text(x.literal.text)

    def sql(v) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(sql(e) for e in v) + "]"
        return "NULL" if v is None else "'" + v.replace("'", "''") + "'"

    depth = len(_text_shape(value))
    return f"CAST({sql(value)} AS {c.text_of(t)}{'[]' * depth})"


_ragged_array = _refuse("multidimensional arrays must have array expressions with matching dimensions", SQLError)


def _array_rows(c: Call) -> str:
    # ARRAY[a, b] of sub-arrays whose shapes are known when it runs (ARRAY_ROWS)
    return f"{ARRAY_ROWS}({c.text_of(c.node)})"


#: Calls whose value is an array (a slice of one is PostgreSQL's array slice).
_ARRAY_CALLS = frozenset({"list_value", "array_append", "array_prepend", "array_cat", "array_remove",
                          "array_replace", "array_agg", "string_to_array", "regexp_split_to_array"})


def is_array(e: Expression) -> bool:
    """Whether ``e`` is visibly an array: written as one, a cast to an array type (a TYPE
    node holding its element's TYPE), or a call of an array function (``_ARRAY_CALLS``).

    >>> [is_array(e) for e in parse_tree("SELECT ARRAY[1], x::int[], array_agg(x), x")[0].items]
    [True, True, True, False]
    """
    if e.type == "ARRAY_CONSTRUCTOR" or (e.cls == "FUNCTION" and e.name and e.name[-1].lower() in _ARRAY_CALLS):
        return True
    return e.cls == "CAST" and len(e.children) == 2 and e.children[1].cls == "TYPE" \
        and len(e.children[1].children) == 1 and e.children[1].children[0].cls == "TYPE"


_SUBSCRIPTS = frozenset({"ARRAY_EXTRACT", "ARRAY_SLICE"})


def _check_subscript(e: Expression, text: str) -> None:
    # PostgreSQL's grammar subscripts a column, a parameter, a scalar subquery, another
    # subscript or a parenthesized expression only: f(x)[1], ARRAY[1][1], CAST(..)[1] are its
    # syntax error (DuckDB reads them); and no text or unknown value (DuckDB gives a character)
    x = e.children[0]
    if x.start < 0:
        return
    if "(" not in text[e.start : x.start] and not (
            x.cls in ("COLUMN_REF", "PARAMETER") or x.type in (*_SUBSCRIPTS, "STRUCT_EXTRACT")
            or (x.cls == "SUBQUERY" and text.startswith("(", x.start))):
        raise SQLError('syntax error at or near "["')
    if x.type == "ARRAY_EXTRACT" and e.type == "ARRAY_EXTRACT" and "(" in text[e.start : x.start]:
        raise UnsupportedSQL("a subscript of a parenthesized subscript ((a[i])[j], of an element: PostgreSQL's "
                             "error unless the element is jsonb) is not supported by colmz")
    if x.literal is not None and x.literal.kind in ("STRING", "NULL_LITERAL"):
        raise SQLError("cannot subscript type unknown because it does not support subscripting")
    if x.name != ("||",) and _is_text(x, text):
        raise SQLError("cannot subscript type text because it does not support subscripting")


def _absent(bound: Expression) -> bool:
    # a bound left out of a slice (a[2:]): DuckDB's empty list_value() at no position
    return bound.start < 0 and bound.name == ("list_value",) and not bound.children


def _array_slice(c: Call, column: bool = False) -> str:
    # PostgreSQL's slice a[lo:hi] of a one-based array: inclusive, a bound outside the array
    # clamped to it (an empty array when none is left). DuckDB's is inclusive too but counts
    # a negative bound from the end: a lower bound below 1 is 1 (left out), an upper one below
    # 0 is 0 (an integer literal decided here, any other value when it runs, NULL kept NULL).
    n = c.node
    if len(n.children) != 3:
        raise UnsupportedSQL("an array slice with a step (a[lo:hi:step]) is not PostgreSQL's syntax")
    subject, lo, hi = n.children
    if subject.type in ("ARRAY_SLICE", "ARRAY_EXTRACT"):
        raise UnsupportedSQL("a slice of a subscripted array (PostgreSQL reads a[i][lo:hi] as one "
                             "subscript per dimension) is not supported by colmz")
    if not (column or is_array(subject)):
        raise UnsupportedSQL("a slice of a value colmz cannot see is an array (PostgreSQL slices arrays "
                             "only, DuckDB text too) is not supported by colmz")
    bounds = []
    for bound, least in ((lo, 1), (hi, 0)):
        if _absent(bound):
            bounds.append("")
        elif is_array(bound):
            raise SQLError("array subscript must have type integer")
        elif bound.literal is not None and bound.literal.kind == "INTEGER":
            bounds.append("" if least and bound.literal.value < least else str(max(bound.literal.value, least)))
        elif bound.literal is not None and bound.literal.kind == "NULL_LITERAL":
            bounds.append("NULL")
        else:
            if any(k.cls == "FUNCTION" and k.name and k.name[-1].lower() in VOLATILE for k in bound.walk()):
                raise UnsupportedSQL("an array slice's bound holding a volatile call is not supported by colmz "
                                     "(PostgreSQL evaluates it once; colmz clamps it and would evaluate it again)")
            x = c.text_of(bound)
            bounds.append(f"(CASE WHEN ({x}) < {least} THEN {least} ELSE ({x}) END)")
    return f"({c.text_of(subject)})[{bounds[0]}:{bounds[1]}]"


#: The refusal of fewer subscripts than an array's dimensions (an SQL ``error()`` call).
_FEWER_SUBSCRIPTS = ("error('fewer subscripts than the dimensions of a multidimensional array (PostgreSQL gives "
                     "NULL of its element type) is not supported by colmz')")


def _subscript_chain(k: int) -> Rule:
    # a[i] .. (k subscripts) of an array of more dimensions is NULL in PostgreSQL (of the
    # element's type; DuckDB gives the sub-array): NULL subscripts added to one written as
    # lists, a refusal where the dimensions are known only when it runs (typeof, folded)
    def rule(c: Call) -> str | None:
        root, indexes = c.node, []
        for _ in range(k):
            root, indexes = root.children[0], [root.children[1], *indexes]
        body = _subscripts(c, root, indexes)
        if _is_list(root):
            d = len(_array_shape(root) or ())
            return f"({body or c.text_of(c.node)}){'[NULL]' * (d - k)}" if d > k else body
        return (f"(CASE WHEN {RESERVED_PREFIX}array_dims({c.text_of(root)}) > {k} THEN {_FEWER_SUBSCRIPTS} "
                f"ELSE {body or c.text_of(c.node)} END)")
    return rule


def _subscripts(c: Call, root: Expression, indexes: list[Expression]) -> str | None:
    # PostgreSQL's subscript below an array's lower bound (0, -1) is NULL, DuckDB's negative
    # one counts from the end: an index that may be negative is made NULL there (greatest
    # of a NULL index is -1; the index is evaluated once). None: no index may be negative.
    def fixed(i: Expression) -> str:
        if i.literal is not None and (i.literal.kind != "INTEGER" or i.literal.value >= 0):
            return c.text_of(i)
        return f"nullif(greatest({c.text_of(i)}, -1), -1)"

    texts = [fixed(i) for i in indexes]
    if texts == [c.text_of(i) for i in indexes]:
        return None
    return f"({c.text_of(root)})" + "".join(f"[{t}]" for t in texts)


#: A slice of a column array_columns knows is an array.
_column_slice = functools.partial(_array_slice, column=True)


def _node_rule(e: Expression, w: _Walk) -> Rule | None:
    # The rule of a row comparison node of the tree (None: none applies).
    kids, text = e.children, w.text
    if e.type in _COMPARISONS and len(kids) == 2 and (_is_row(kids[0]) or _is_row(kids[1])):
        if kids[0].cls == "SUBQUERY" or kids[1].cls == "SUBQUERY":
            return _row_subquery  # (a, b) = (SELECT 1, 2)
        return _row_comparison if _is_row(kids[0]) and _is_row(kids[1]) else None
    if e.type in _ROW_TESTS and len(kids) == 1 and _is_row(kids[0]):
        return _row_test
    if e.type == "COMPARE_IN" and kids and _is_row(kids[0]):
        return _row_in
    if e.type == "OPERATOR_NOT" and len(kids) == 1 and kids[0].type == "COMPARE_IN" \
            and (kids[0].start, kids[0].end) == (e.start, e.end) and _is_row(kids[0].children[0]):
        return _row_in  # x NOT IN (...): one span for the NOT and its IN
    if e.cls == "SUBQUERY" and kids and _is_row(kids[0]) and not re.match(
            r"\s*(not\s+)?in\b", text[kids[0].end : e.end], re.IGNORECASE):
        return _row_subquery  # (a, b) = (SELECT ...)
    return None


# ----------------------------------------------------------------------------- numbers

_NUMERIC_TYPES = type_words("numeric")
#: What PostgreSQL's unconstrained ``numeric`` cast of a non-constant ``x`` becomes: ``x``
#: plus a zero of ``DECIMAL(1,0)`` (DuckDB's sum of decimals has the larger scale and of a
#: double and a decimal is a double): an integer becomes a ``DECIMAL(p,0)``, a decimal
#: keeps its scale, a double stays a double (PostgreSQL keeps its 15 significant digits at
#: a scale that depends on the value, which no ``DECIMAL`` type holds -- its text is
#: refused where it is printed). Text has no such sum: DuckDB's binder error for it is
#: turned into a refusal by :func:`colmz.sql.run.run_query`.
NUMERIC_CAST = "CAST(0 AS DECIMAL(1,0))"


def _numeric_target(e: Expression, text: str) -> bool:
    # Whether ``e`` is a cast (not TRY_CAST) to unconstrained numeric/decimal.
    return _is_cast(e, text) and not e.children[1].children and _type_text(e.children[1], text) in _NUMERIC_TYPES


def _is_cast(e: Expression, text: str) -> bool:
    # A cast node (not TRY_CAST, whose node is the same) of an operand and a type.
    return e.cls == "CAST" and len(e.children) == 2 and not text[e.start : e.start + 8].upper().startswith("TRY_CAST")


def _constant(e: Expression, text: str, memo: dict) -> PgNumeric | None:
    """The value of ``e`` as PostgreSQL computes it when ``e`` is constant arithmetic --
    number literals, ``+ - * /``, unconstrained ``numeric`` casts -- else None (also for a
    division by zero or an integer overflow, left for DuckDB to raise). ``memo`` (id ->
    value) reads each node of a chain once."""
    if id(e) not in memo:
        memo[id(e)] = _constant_of(e, text, memo)
    return memo[id(e)]


def _constant_of(e: Expression, text: str, memo: dict) -> PgNumeric | None:
    try:
        if e.cls == "CONSTANT":
            lit = e.literal
            if lit is None or lit.kind in ("STRING", "BOOLEAN", "NULL_LITERAL", "BLOB") or not lit.text:
                return None
            return parse_literal(lit.text)
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0] in _ARITHMETIC and not (
                e.filter is not None or e.order_by or e.distinct):
            vals = []
            for c in e.children:
                vals.append(_constant(c, text, memo))
                if vals[-1] is None:
                    return None
            if len(vals) == 1 and e.name[0] in "+-":
                v = vals[0]
                return v if e.name[0] == "+" else PgNumeric(v.value.copy_negate(), v.scale, v.bits)
            return combine(_ARITHMETIC[e.name[0]], *vals) if len(vals) == 2 else None
        if _numeric_target(e, text):
            v = _constant(e.children[0], text, memo)
            return v.as_numeric() if v is not None else None
    except (ValueError, ArithmeticError):
        return None
    return None


def _folded(e: Expression, text: str, v: PgNumeric) -> str:
    # The DuckDB literal of a constant numeric expression (PostgreSQL's scale).
    lit = literal_text(v)
    if lit is None and e.cls == "CONSTANT":
        return text[e.start : e.end]  # a lone literal past DECIMAL: DuckDB reads a double
    if lit is None:
        # Left as written, DuckDB would compute it inexactly or fail on its 38 digits.
        raise UnsupportedSQL(
            f"a numeric value of {max(v.value.adjusted() + 1, 1)} integer digits and scale "
            f"{v.scale} is not supported by colmz (DuckDB's DECIMAL holds {MAX_DIGITS} digits)")
    return lit


def _numeric_cast(c: Call) -> str:
    # PostgreSQL's unconstrained numeric of a non-constant operand: a string literal read
    # exactly (its scale as written), NULL a typed NULL, anything else via NUMERIC_CAST.
    x = c.node.children[0]
    lit = x.literal
    if lit is not None or _is_cast(x, c.text):
        _cast_checked(x, c, "numeric", None)  # a boolean raises (PostgreSQL has no such cast)
    if lit is not None and lit.kind == "NULL_LITERAL":
        # the narrowest decimal: beside other values it takes their precision and scale
        # (coalesce(NULL::numeric, 100.005) keeps 100.005; a DECIMAL(38,0) would round it)
        return "CAST(NULL AS DECIMAL(1,0))"
    if lit is not None and lit.kind == "STRING":
        written = c.text[x.start : x.end] if x.start >= 0 else repr(lit.text)
        raw = lit.text.strip()
        if raw.lower().lstrip("+-") in ("nan", "infinity", "inf"):
            raise UnsupportedSQL(f"numeric {written} is not supported by colmz "
                                 "(DuckDB's DECIMAL has no NaN or infinity)")
        try:
            if "_" in raw or not raw:
                raise ValueError(raw)
            value = parse_literal(raw if any(ch in raw for ch in ".eE") else raw + ".")
        except (ValueError, ArithmeticError):
            raise SQLError(f"invalid input syntax for type numeric: {written}") from None
        text = literal_text(value)
        if text is None:
            raise UnsupportedSQL(f"numeric {written} is not supported by colmz (more than "
                                 "the 38 digits of DuckDB's DECIMAL)")
        return text
    operand = c.text_of(x)
    if jsonb.visibly_jsonb(x, c.text):
        # a jsonb number's text (PostgreSQL's error for another value), read as numeric_in
        # reads it: the value as written, as PostgreSQL's jsonb numeric is
        return f"{NUMERIC_IN}({jsonb.JSONB_SCALAR}(CAST({operand} AS VARCHAR), 'numeric'))"
    if jsonb.visibly_text(x, c.text):
        # text known only when it runs (j ->> 'a'): read as PostgreSQL's numeric_in reads it
        return f"{NUMERIC_IN}(CAST({operand} AS VARCHAR))"
    if not (x.cls in ("COLUMN_REF", "CONSTANT", "CAST", "SUBQUERY", "CASE")
            or (x.cls in ("FUNCTION", "WINDOW") and len(x.name) == 1 and x.name[0].isidentifier())):
        operand = f"({operand})"  # an operator's result: its parentheses are outside its span
    if _shows_real(x, c.text) or _shows_float(x, c.text) or (is_arith(x) and any(
            _shows_float(n, c.text) for leaf in arith_leaves(x) for n in leaf.walk())):
        # a visible float: PostgreSQL's float8_numeric (float4_numeric) keeps 15 (6)
        # significant digits (0.1::float8 * 3 is 0.300000000000000)
        operand = f"CAST(printf('%.{6 if _shows_real(x, c.text) else 15}g', {operand}) AS DOUBLE)"
    return f"({operand} + {NUMERIC_CAST})"


#: ``numeric(p)``, ``numeric(p, s)`` (and decimal's), as DuckDB's DECIMAL holds them.
_NUMERIC_TYPMOD = re.compile(r"(?:numeric|decimal)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")


def _numeric_typmod_target(e: Expression, text: str) -> re.Match | None:
    # ``numeric(p, s)`` of a cast of visible text (whose value is known only when it runs)
    if not _is_cast(e, text) or not jsonb.visibly_text(e.children[0], text):
        return None
    m = _NUMERIC_TYPMOD.fullmatch(_type_text(e.children[1], text))
    if m is None or not 1 <= int(m.group(1)) <= MAX_DIGITS or int(m.group(2) or 0) > int(m.group(1)):
        return None  # another width is DuckDB's to take or refuse
    return m


def _numeric_typmod_cast(c: Call) -> str:
    # text::numeric(p, s): rounded and checked as PostgreSQL does, then held exactly
    m = _numeric_typmod_target(c.node, c.text)
    p, s = int(m.group(1)), int(m.group(2) or 0)
    return f"CAST({NUMERIC_TYPMOD}(CAST({c.text_of(c.node.children[0])} AS VARCHAR), {p}, {s}) AS DECIMAL({p},{s}))"


_CHOICES = frozenset({"least", "greatest", "coalesce", "nullif"})


def _mixed_scales(x: Expression, text: str) -> bool:
    # Whether ``x`` chooses one of decimal literals of different scales (least, greatest,
    # coalesce, nullif, CASE): PostgreSQL's numeric keeps the chosen value's own scale
    # (least(1.5, 100.005) is 1.5), DuckDB's DECIMAL the widest (1.500).
    if not ((x.cls in ("FUNCTION", "OPERATOR") and x.name and x.name[-1].lower() in _CHOICES)
            or x.cls == "CASE" or x.type == "OPERATOR_COALESCE"):
        return False
    scales = {len(c.literal.text.split(".")[1]) if "." in c.literal.text else 0
              for c in x.walk() if c.cls == "CONSTANT" and c.literal is not None
              and c.literal.kind in ("NUMERIC", "INTEGER") and "e" not in c.literal.text.lower()}
    return len(scales) > 1


def _literal_scales(q: Query) -> list[set[int]]:
    # Per column of ``q`` (a set operation's branches, a select list, a VALUES list read by
    # *), the scales of the values it holds (:func:`_scale`; NULL none).
    if q.type == "SET_OPERATION_NODE":
        sides = [_literal_scales(b) for b in q.children]
        return [set().union(*col) for col in zip(*sides, strict=False)]
    rows = q.from_.rows if q.from_ is not None and q.from_.type == "EXPRESSION_LIST" and len(q.items) == 1 \
        and q.items[0].cls == "STAR" else [q.items]
    return [{_scale(c) for c in col if c.cls != "CONSTANT" or c.literal is None or c.literal.kind != "NULL_LITERAL"}
            for col in zip(*rows, strict=False)]


def _scale(e: Expression) -> int:
    # the scale of a number literal, -1 for any other value (its scale, if any, not known)
    lit = e.literal if e.cls == "CONSTANT" else None
    if lit is None or lit.kind not in ("NUMERIC", "INTEGER") or "e" in lit.text.lower():
        return -1
    return len(lit.text.partition(".")[2])


def _mixed_columns(d: Query) -> Iterator[str]:
    # The names of the columns of ``d``'s subqueries and CTEs where a decimal literal meets
    # another scale or a value of a scale not known (VALUES (1), (2.50); SELECT 1.0 UNION
    # SELECT 2.50; SELECT age ... UNION SELECT 2.5): PostgreSQL's numeric keeps each value's
    # scale, DuckDB's DECIMAL the widest.
    named = [(t.subquery, t.column_aliases) for t in table_refs(d) if t.subquery is not None]
    for sub, aliases in [*named, *((cte, ()) for _, cte in d.ctes)]:
        first = first_branch(sub)
        values = first.from_ is not None and first.from_.type == "EXPRESSION_LIST"
        for i, scales in enumerate(_literal_scales(sub)):
            if len(scales) > 1 and max(scales) > 0:
                e = first.items[i] if i < len(first.items) and not values else None
                yield (aliases[i] if i < len(aliases) else f"column{i + 1}" if values
                       else e.alias or (e.name[-1] if e is not None and e.cls == "COLUMN_REF" else "")).lower()


def _mixed_column_text(e: Expression, w: _Walk) -> Rule | None:
    # The text of such a column or of what is computed of it (a cast to text, ||, to_jsonb,
    # ...): refused by name
    if not w.mixed:
        return None
    target = _type_text(e.children[1], w.text).split("(")[0].strip() if _is_cast(e, w.text) else None
    shown = e.children[:1] if target in _TEXT_WORDS else () if e.cls == "CAST" else e.children
    if any(k.cls == "COLUMN_REF" and k.name[-1].lower() in w.mixed for c in shown for k in c.walk()):
        raise UnsupportedSQL("the text of a column of VALUES or a set operation holding numbers of different "
                             "scales is not supported by colmz (PostgreSQL prints each value's own scale, "
                             "DuckDB's DECIMAL the widest): cast the values to one numeric(p, s)")
    return None


def _mixed_scale_text(c: Call) -> str | None:
    raise UnsupportedSQL("the text of a choice (least, greatest, coalesce, nullif, CASE) among numeric "
                         "values of different scales is not supported by colmz (PostgreSQL prints the "
                         "chosen value's own scale, DuckDB's DECIMAL the widest): cast the values to "
                         "one numeric(p, s) first")


# ----------------------------------------------------------------------------- LIKE

#: DuckDB's nodes of LIKE, NOT LIKE, ILIKE, NOT ILIKE (and PostgreSQL's ``~~`` operators).
_LIKES = frozenset({"~~", "!~~", "~~*", "!~~*"})


def _like(c: Call) -> str | None:
    # PostgreSQL's LIKE escapes with a backslash by default; DuckDB's has no escape. An
    # ESCAPE clause makes another node (like_escape); a literal pattern without a backslash
    # means the same under either.
    # ILIKE folds ASCII letters only, as PostgreSQL's in the C locale (DuckDB's folds every
    # cased letter): both sides lowered by lower's macro, then LIKE.
    pattern, op = c.node.children[1], c.node.name[0]
    if op in ("~~*", "!~~*"):
        lower = CALL_MACROS["lower"]
        like = "NOT LIKE" if op == "!~~*" else "LIKE"
        return f"({lower}({c.args[0]}) {like} {lower}({c.args[1]}) ESCAPE '\\')"
    if pattern.literal is not None and pattern.literal.kind == "STRING" and "\\" not in pattern.literal.text:
        return None
    return c.text_of(c.node) + " ESCAPE '\\'"


# ----------------------------------------------------------------------------- types


def _type_text(t: Expression, text: str) -> str:
    # a TYPE node as written: lower case, words joined by one space ("" where it is not placed)
    return " ".join(text[t.start : t.end].lower().split()) if t.start >= 0 else ""


def _cast_type(e: Expression, text: str) -> str | None:
    # the type a CAST node casts to (as _type_text writes it); None for another node
    return _type_text(e.children[1], text) if e.cls == "CAST" and len(e.children) == 2 else None


def _bytea(c: Call) -> str:
    # PostgreSQL's bytea input reads hex digits after \x (DuckDB's cast reads \xNN escapes,
    # so '\x0aff' would be three bytes): a string literal goes through BYTEA_IN.
    x, t = c.node.children
    if not t.children and x.literal is not None and x.literal.kind == "STRING":  # (not TRY_CAST: _type_rule)
        return f"{BYTEA_IN}({_written(c.text, x)})"
    raise UnsupportedSQL("a cast to bytea of anything but a string literal is not supported by colmz "
                         "(PostgreSQL reads text as hex digits after \\x; DuckDB reads \\xNN escapes)")


#: Casts whose PostgreSQL meaning DuckDB's cast lacks: to text (a double's digits, an
#: interval's words), to boolean (PostgreSQL's words) and to an integer (digits only).
_CAST_TARGETS = type_words("text", "boolean", "integer", "bigint", "smallint")


def _cast(c: Call) -> str | None:
    from colmz.sql.translate import cast_rewrite  # translate imports this module

    x, t = c.node.children
    target = _type_text(t, c.text)
    return _cast_checked(x, c, target, cast_rewrite(c, x, target.upper()), c.text_of(x))


def _cast_checked(x: Expression, c: Call, target: str, cast: str | None, operand: str | None = None) -> str | None:
    # The cast ``cast`` (its text; None: as written) of the operand ``x`` raising
    # PostgreSQL's "cannot cast type ..." for a row whose type PostgreSQL has no cast of to
    # ``target`` (DuckDB casts a bigint or a double to boolean, a boolean to bigint, any value
    # to JSON), through CAST_CHECK; the cast itself where no type is refused or the
    # operand's type shows and is not refused. A literal or a cast whose type is refused
    # raises here, as PostgreSQL's parser does. (The cast stays whole inside the check: later
    # passes read it.)
    target = TYPE_SPELLINGS.get(target, target)
    bad = _CAST_REFUSED.get(target)
    if bad is None:
        return cast
    if x.literal is not None:
        shown = _LITERAL_TYPES.get(x.literal.kind)
    elif _is_cast(x, c.text) and not x.children[1].children:
        shown = TYPE_SPELLINGS.get(_type_text(x.children[1], c.text), "")
    elif x.cls == "FUNCTION" and len(x.name) == 1 and x.name[0].lower() in _NUMBER_AGGREGATES:
        shown = "numeric"  # (a count, sum or mean: a number of some type, never a boolean or date)
    else:
        return (f"{CAST_CHECK}({c.by(None) if cast is None else cast}, "
                f"{c.text_of(x) if operand is None else operand}, '{target}', '{bad}')")
    if shown in _CAST_LETTERS and _CAST_LETTERS[shown] in bad:
        raise SQLError(f"cannot cast type {shown} to {target}")
    return cast


#: The macro :func:`_cast_checked` writes (:data:`TRANSFORM_MACROS`), and the types
#: it tells apart: (letter, DuckDB's name, PostgreSQL's).
CAST_CHECK = RESERVED_PREFIX + "cast_check"
_CAST_TYPES = (("b", "BOOLEAN", "boolean"), ("s", "SMALLINT", "smallint"), ("4", "INTEGER", "integer"),
               ("l", "BIGINT", "bigint"), ("n", "DECIMAL(%)", "numeric"), ("f", "DOUBLE", "double precision"),
               ("r", "FLOAT", "real"), ("d", "DATE", "date"), ("t", "TIMESTAMP", "timestamp without time zone"),
               ("z", "TIMESTAMP WITH TIME ZONE", "timestamp with time zone"), ("i", "INTERVAL", "interval"))
_CAST_LETTERS = {pg: k for k, _, pg in _CAST_TYPES}
_UNIT_TYPES = tuple(t for t in _CAST_TYPES if t[0] in "dtzi")  # (UNIT_CHECK's)
_NUMBER_AGGREGATES = frozenset({"count", "count_star", "sum", "avg"})
#: The source types (:data:`_CAST_TYPES`' letters) PostgreSQL has no cast of to a target.
_CAST_REFUSED = {"boolean": "slnfrdtzi", "smallint": "b", "bigint": "b", "jsonb": "bs4lnfrdtzi", "numeric": "b",
                 "double precision": "b", "real": "b"}
#: The type of a literal of each kind (a string's or NULL's is the cast's: none here).
_LITERAL_TYPES = {"INTEGER": "integer", "NUMERIC": "numeric", "BOOLEAN": "boolean"}


#: PostgreSQL's spellings of types that are no name of pg_type (``"integer"`` is no type).
_NO_PG_TYPES = frozenset({"integer", "int", "smallint", "bigint", "real", "double", "double precision", "float",
                          "boolean", "decimal", "dec", "character", "character varying", "string",
                          "timestamp with time zone", "timestamp without time zone", "time with time zone",
                          "time without time zone"})


def _collate_rule(e: Expression, w: _Walk) -> Rule | None:
    # "C" and "POSIX" order by bytes in both; DuckDB's other collations are not PostgreSQL's
    name = w.text[e.children[0].end : e.end].split(None, 1)[1].strip() if e.children else ""
    if name in ('"C"', '"POSIX"'):
        return None
    raise UnsupportedSQL(f'COLLATE {name} is not supported by colmz (only "C" and "POSIX": DuckDB\'s other '
                         "collations are not PostgreSQL's)")


#: Type names DuckDB spells otherwise: colmz stores jsonb as JSON text and Materialize's
#: mz_timestamp as an unsigned 64-bit integer.
_TYPE_NAMES = {"jsonb": "JSON", "mz_timestamp": "UBIGINT"}


def _type_rule(e: Expression, w: _Walk) -> Rule | None:
    # ``float`` (not ``float(p)``) is DOUBLE; a cast to bytea reads PostgreSQL's input.
    text = w.text
    if e.cls == "TYPE" and e.start >= 0 and text[e.start] == '"':
        name = text[e.start + 1 : e.end - 1]  # (a quoted name is exact: pg_type's, all lower case)
        if name != name.lower() or name in _NO_PG_TYPES:
            raise SQLError(f'type "{name}" does not exist')
    if e.cls == "TYPE" and _type_text(e, text) == "float" and all(c.cls == "TYPE" for c in e.children):
        return lambda c: "DOUBLE"  # PostgreSQL's float is float8; DuckDB's FLOAT is 4 bytes
    if e.cls == "TYPE" and not e.children and (new := _TYPE_NAMES.get(_type_text(e, text))):
        return lambda c: new
    if e.cls == "TYPE" and _FLOAT_P.fullmatch(_type_text(e, text)):
        return _float_p
    if _is_cast(e, text):
        target = _type_text(e.children[1], text)
        if target == "bytea":
            return _bytea
        if float_kind(target) is not None:
            return _float_cast
        if _VARCHAR_N.fullmatch(target):
            return _varchar_n
        if _CHAR_N.fullmatch(target):
            return _refuse_char
        if target in ("jsonb", "json"):
            return _json_cast
        x = e.children[0]
        if target in _TIME_NAMES and x.literal is not None and x.literal.kind == "STRING" \
                and re.match(r"\s*24:", x.literal.text):
            # PostgreSQL's time holds 24:00:00, past the end of an Arrow time's day
            raise UnsupportedSQL(f"the {_TIME_NAMES[target]} 24:00 ('{x.literal.text}') is not supported by colmz "
                                 "(an Arrow time ends before 24:00)")
        if target in _TIME_NAMES and x.start >= 0 and (x.literal is not None and x.literal.kind == "STRING" or (
                x.literal is None and _cast_type(x, text) in (None, *_TEXT_WORDS))):
            return _time_cast  # (text, maybe: interval::time is pgfuncs')
        if target in _DATETIME_NAMES and (lit := e.children[0].literal) is not None and lit.kind == "STRING":
            _datetime_text(lit.text, _DATETIME_NAMES[target])
    return None


def _datetime_text(text: str, name: str) -> None:
    # A date or timestamp's input text DuckDB reads otherwise than PostgreSQL: 'inf' (blanks
    # or a sign about it) and a year with a sign, PostgreSQL's input errors, DuckDB's infinity
    # or year; a year of zero, PostgreSQL's range error (DuckDB's 1 BC, which Arrow holds
    # and Python's dates not); a year of one or two digits, which PostgreSQL may read as a
    # month or a two-digit year; a trailing BC (DuckDB's timestamp ignores it).
    m = _ODD_DATETIME.match(text)
    if m is None:
        return
    if m.group(1) or m.group(2):
        raise SQLError(f'invalid input syntax for type {name}: "{text}"')
    if m.group(3):
        raise SQLError(f'date/time field value out of range: "{text}"')
    raise UnsupportedSQL(f"the {name} text '{text}' is not supported by colmz ("
                         + ("a year of one or two digits, which PostgreSQL may read as a month or as 20xx)"
                            if m.group(4) else "a year BC, which DuckDB's input ignores or refuses)"))


_ODD_DATETIME = re.compile(r"\s*(?:([+-]?inf\s*$)|(-\d)|(0+-)|(\d\d?-)|.*\bBC\s*$)", re.IGNORECASE | re.DOTALL)


#: PostgreSQL's names of the date and time types by their spellings: their input reads
#: 'infinity' and '-infinity', where DuckDB's also reads 'inf' and '-inf'.
_DATETIME_NAMES = {"date": "date", "timestamp": "timestamp", "timestamp without time zone": "timestamp",
                   "timestamptz": "timestamp with time zone", "timestamp with time zone": "timestamp with time zone"}


#: PostgreSQL's names of the time types by their spellings: their input needs a time of
#: day (DuckDB reads a date alone as midnight).
_TIME_NAMES = {"time": "time", "time without time zone": "time", "timetz": "time with time zone",
               "time with time zone": "time with time zone"}
_DATE_ONLY = r"\s*[0-9]+-[0-9]+-[0-9]+\s*"
#: The macro checking text cast to a time type when it runs (:func:`_time_cast`).
TIME_IN = RESERVED_PREFIX + "time_in"


def _time_cast(c: Call) -> str | None:
    # A date alone is not a time: PostgreSQL's error for a string literal here, for other
    # text when it runs (TIME_IN around the operand; the cast itself stays as written).
    x, t = c.node.children
    name, lit = _TIME_NAMES[_type_text(t, c.text)], x.literal
    if lit is not None and lit.kind == "STRING" and re.fullmatch(_DATE_ONLY, lit.text):
        raise SQLError(f'invalid input syntax for type {name}: "{lit.text}"')
    if lit is not None:
        return None
    w = c.text
    return (w[c.node.start : x.start] + f"{TIME_IN}({c.text_of(x)}, '{name}')"
            + w[x.end : t.start] + c.text_of(t) + w[t.end : c.node.end])


# ----------------------------------------------------------------------------- more types

#: ``float(p)``: PostgreSQL's ``real`` for p up to 24, ``double precision`` above.
_FLOAT_P = re.compile(r"float\s*\(\s*(\d+)\s*\)")


def float_kind(type_text: str) -> str | None:
    """``"real"`` or ``"double"`` for the text of a float type (lower case, words joined by
    one space; ``float(p)`` by its precision), else None.

    >>> [float_kind(t) for t in ("float4", "float(30)", "double precision", "int")]
    ['real', 'double', 'double', None]
    """
    m = _FLOAT_P.fullmatch(type_text)
    if m:
        return "real" if int(m.group(1)) <= 24 else "double"
    name = TYPE_SPELLINGS.get(type_text)
    return "real" if name == "real" else "double" if name == "double precision" else None

#: The macros checking an operand cast to a float type as PostgreSQL reads text (a finite
#: text past the type's range raises; DuckDB reads it as an infinity): the operand itself,
#: by PostgreSQL's type name.
FLOAT_CAST_MACROS = {"double precision": RESERVED_PREFIX + "float8_in", "real": RESERVED_PREFIX + "float4_in"}
_VARCHAR_N = re.compile(r"(?:varchar|character varying)\s*\(\s*(\d+)\s*\)")


def _float_p(c: Call) -> str:
    p = int(_FLOAT_P.fullmatch(_type_text(c.node, c.text)).group(1))
    if not 1 <= p <= 53:
        raise SQLError(f"precision for type float must be between 1 and 53 bits, got {p}")
    return "REAL" if p <= 24 else "DOUBLE"


def _float_cast(c: Call) -> str | None:
    # A cast to a float type: a string literal is checked here (PostgreSQL's message); an
    # operand that may be text goes through FLOAT_CAST_MACROS (its value unchanged, checked
    # when it runs); the cast itself stays as written (later passes read its type there).
    x, t = c.node.children
    name = "real" if float_kind(_type_text(t, c.text)) == "real" else "double precision"
    lit = x.literal
    if lit is not None and lit.kind in ("STRING", "INTEGER", "NUMERIC"):
        raw = lit.text
        try:
            exact = Decimal(raw.strip())
        except ArithmeticError:
            exact = None  # DuckDB's cast rejects it as PostgreSQL does
        if exact is not None and exact.is_finite() and jsonb.float_out_of_range(exact, name):
            # past the type's range, or nonzero and rounding to zero (PostgreSQL's float
            # input, and its numeric-to-float cast, which prints the numeric)
            shown = raw if lit.kind == "STRING" else format(exact, "f")
            raise SQLError(f'"{shown}" is out of range for type {name}')
        return None
    if lit is not None or _cast_type(x, c.text) not in (None, *_TEXT_WORDS) or x.start < 0:
        return _cast_checked(x, c, name, None) if x.start >= 0 else None  # a boolean raises
    w = c.text
    return (w[c.node.start : x.start] + f"{FLOAT_CAST_MACROS[name]}({c.text_of(x)})"
            + w[x.end : t.start] + c.text_of(t) + w[t.end : c.node.end])


_TEXT_WORDS = frozenset(w for w, t in TYPE_SPELLINGS.items() if t == "text")


#: PostgreSQL's blank-padded ``char(n)`` (``char`` is ``char(1)``) and its one-byte ``"char"``.
_CHAR_N = re.compile(r'(?:"char"|char|character|bpchar)(?:\s*\(\s*\d+\s*\))?')


def _refuse_char(c: Call) -> str:
    # PostgreSQL truncates to n and pads with spaces (which its comparisons, length and ||
    # then ignore); DuckDB's CHAR is VARCHAR
    raise UnsupportedSQL(f"a cast to {_type_text(c.node.children[1], c.text)} (blank-padded character) "
                         "is not supported by colmz: cast to text or varchar(n)")


def _varchar_n(c: Call) -> str:
    # PostgreSQL's explicit cast to varchar(n) truncates its text (a double's digits, ...:
    # translate's cast to text) to n characters; DuckDB ignores n.
    from colmz.sql.translate import cast_rewrite  # translate imports this module

    x, t = c.node.children
    n = int(_VARCHAR_N.fullmatch(_type_text(t, c.text)).group(1))
    return f"left({cast_rewrite(c, x, 'TEXT') or f'CAST({c.text_of(x)} AS VARCHAR)'}, {n})"


def _json_cast(c: Call) -> str | None:
    # A string literal cast to jsonb is PostgreSQL's jsonb text (keys sorted, duplicates
    # dropped, spaces after ':' and ','); json keeps its text as written.
    x, t = c.node.children
    if _type_text(t, c.text) != "jsonb" or (x.literal is not None and x.literal.kind == "NULL_LITERAL"):
        return None
    if x.literal is None or x.literal.kind != "STRING":
        # any other value (a json or text column, a json cast) read as jsonb when it runs
        operand = c.text_of(x)
        return _cast_checked(x, c, "jsonb", f"CAST({JSONB_IN}(CAST({operand} AS VARCHAR)) AS JSON)", operand)
    try:
        norm = jsonb_text(x.literal.text)
    except ValueError:
        raise SQLError(f"invalid input syntax for type json: {_written(c.text, x)}") from None
    return "CAST('" + norm.replace("'", "''") + "' AS JSON)"


def jsonb_text(text: str) -> str:
    """PostgreSQL's text of ``text`` read as ``jsonb``: object keys sorted (by length, then
    bytes) with the last of duplicates kept, ``": "`` and ``", "`` between items, numbers as
    ``numeric`` prints them; ``ValueError`` for text that is not JSON.

    >>> jsonb_text('{"bb": 1.50, "a": [1e2, -0], "a": "x"}')
    '{"a": "x", "bb": 1.50}'
    """
    return _jsonb_dump(_jsonb_load(text))


def _jsonb_in(v: str) -> str:
    try:
        return jsonb_text(v)
    except ValueError:
        raise ValueError(f'invalid input syntax for type json: "{v[:60]}"') from None


#: PostgreSQL's jsonb input of text as it runs (:func:`jsonb_text`): a cast to jsonb of a
#: value that is not a string literal, and a continual task's write to a jsonb column.
JSONB_IN = RESERVED_PREFIX + "jsonb_in"


def jsonb_concat(a: str, b: str) -> str:
    """PostgreSQL's ``jsonb || jsonb`` of two jsonb texts: two objects merged (the right
    one's keys win), anything else concatenated as arrays (a scalar or an object is an
    array of itself).

    >>> jsonb_concat('{"a": null}', '{"z": 1}'), jsonb_concat('[1]', '{"a": 2}')
    ('{"a": null, "z": 1}', '[1, {"a": 2}]')
    """
    x, y = _jsonb_load(a), _jsonb_load(b)
    if isinstance(x, dict) and isinstance(y, dict):
        return _jsonb_dump({**x, **y})
    return _jsonb_dump((x if isinstance(x, list) else [x]) + (y if isinstance(y, list) else [y]))


#: The function PostgreSQL's ``jsonb || jsonb`` calls (:func:`jsonb_concat`).
JSONB_CONCAT = RESERVED_PREFIX + "jsonb_concat"
_JSON_TEXT = re.compile(r"\s*[{\[]")


def _json_literal(k: Expression) -> bool:
    if k.literal is None or k.literal.kind != "STRING" or not _JSON_TEXT.match(k.literal.text):
        return False
    try:
        _jsonb_load(k.literal.text)
    except ValueError:
        return False
    return True


def _concat(c: Call) -> str | None:
    # ``a || b`` with a cast to jsonb, or a string literal holding a JSON object or array:
    # jsonb || jsonb (or a literal, which PostgreSQL reads as jsonb beside one) merges
    # objects and concatenates arrays. Beside a value whose type colmz cannot tell (a
    # column: colmz keeps jsonb columns as text), PostgreSQL merges jsonb but concatenates
    # text: refused. The result prints as PostgreSQL prints the jsonb.
    kids = c.arguments
    if len(kids) != 2:
        return None
    jsonb = [_cast_type(k, c.text) == "jsonb" for k in kids]
    literal = [k.literal is not None and k.literal.kind == "STRING" for k in kids]
    if not (any(jsonb) or any(_json_literal(k) for k in kids)):
        if any(_may_be_json(k, c.text) for k in kids):
            raise UnsupportedSQL(_CONCAT_REFUSAL)  # (a json or jsonb value, not text)
        return _text_operands(c, kids)
    if all(j or lit for j, lit in zip(jsonb, literal)):
        if not any(jsonb):
            return None  # two string literals: text
        a, b = (c.text_of(k) for k in kids)
        return f"{JSONB_CONCAT}(CAST({a} AS VARCHAR), CAST({b} AS VARCHAR))"
    columns = [k for k in kids if k.cls == "COLUMN_REF"]
    if not any(jsonb) and len(columns) == 1 and all(k.cls == "COLUMN_REF" or lit for k, lit in zip(kids, literal)):
        # a column beside a JSON literal: text or jsonb by the column's type, which the
        # catalog knows (colmz.sql.jsonbcols chooses; unchosen, it is refused when it runs)
        a, b = (c.text_of(k) for k in kids)
        as_text = _text_operands(c, kids) or c.span_text(c.node.start, c.node.end)
        return f"{CONCAT_BY_KIND}({as_text}, {JSONB_CONCAT}(CAST({a} AS VARCHAR), CAST({b} AS VARCHAR)))"
    raise UnsupportedSQL(_CONCAT_REFUSAL)


#: The operators whose result is a json or jsonb value (DuckDB's nodes of them; ``->`` is
#: DuckDB's LAMBDA node).
_JSON_VALUE_OPS = frozenset({("->",), ("#>",), (jsonb.SPELLED["#>"],)})
#: The calls whose value is one of their arguments'.
_VALUE_CHOICES = frozenset({("||",), ("coalesce",), ("nullif",), ("greatest",), ("least",)})


def _may_be_json(k: Expression, text: str) -> bool:
    # Whether ``k`` may be a json or jsonb value: ->, #>, a cast to json or jsonb, or a
    # choice among such values (||, coalesce, CASE, ...)
    if k.cls == "LAMBDA" or (k.cls == "FUNCTION" and k.name in _JSON_VALUE_OPS):
        return True
    if k.cls == "CAST" and len(k.children) == 2:
        return _type_text(k.children[1], text) in ("json", "jsonb")
    if (k.cls == "FUNCTION" and k.name in _VALUE_CHOICES) or k.cls in ("CASE", "OPERATOR") and k.type in (
            "CASE_EXPR", "OPERATOR_COALESCE", "OPERATOR_NULLIF"):
        return any(_may_be_json(x, text) for x in k.children)
    return False
_CONCAT_REFUSAL = ("|| of jsonb (or a string literal holding JSON) and a value of a type colmz cannot tell is not "
                   "supported by colmz (PostgreSQL merges jsonb, concatenates text; colmz keeps jsonb columns as "
                   "text): cast both operands to jsonb or text")
#: ``CONCAT_BY_KIND(as_text, as_jsonb)``: ``||`` of a column and a JSON literal, written both
#: ways; colmz.sql.jsonbcols keeps the one of the column's kind, and one left is refused.
CONCAT_BY_KIND = RESERVED_PREFIX + "concat_by_kind"


#: Functions whose result is text: an operand of ``||`` (or argument of ``concat``) that is
#: one of their calls is printed as it is.
_TEXT_CALLS = frozenset({"upper", "lower", "concat", "concat_ws", "substr", "substring", "trim", "ltrim",
                         "rtrim", "btrim", "replace", "lpad", "rpad", "left", "right", "repeat", "reverse",
                         "split_part", "md5", "chr", "string_agg", "regexp_replace", "translate", "to_hex",
                         "initcap", "quote_ident", "quote_literal", "||"})


def _is_text(k: Expression, text: str) -> bool:
    # Whether node ``k`` is visibly text (or NULL): a string, a cast to text, a text function.
    if k.literal is not None:
        return k.literal.kind in ("STRING", "NULL_LITERAL")
    if (target := _cast_type(k, text)) is not None:
        return target in _TEXT_WORDS
    return k.cls == "FUNCTION" and len(k.name) == 1 and k.name[0].lower() in _TEXT_CALLS


def _text_operands(c: Call, kids, output: bool = False) -> str | None:
    # PostgreSQL's ``||`` and concat() print a non-text operand with its type's output
    # function (a double 2 as ``2``); DuckDB casts it to VARCHAR (``2.0``): each of ``kids``
    # not visibly text is written as its cast to text is (cast_rewrite; as it is where
    # DuckDB's text of it is PostgreSQL's). Arrays concatenate as arrays: left as written.
    from colmz.sql.translate import cast_rewrite  # translate imports this module

    out, pos = [], c.node.start
    for k in kids:
        if k.start < 0 or _is_text(k, c.text):
            continue
        toks = tokenize(c.text[k.start : k.end])
        if any(t.upper == "ARRAY" or (t.text == "[" and n.text == "]") for t, n in zip(toks, toks[1:])):
            return None
        new = cast_rewrite(c, k, "TEXT")
        if output:  # (typeof is folded when DuckDB binds the query: one branch is left)
            x = c.text_of(k)
            new = (f"(CASE WHEN typeof({x}) = 'BOOLEAN' THEN left(CAST({x} AS VARCHAR), 1) "
                   f"ELSE {f'CAST({x} AS VARCHAR)' if new is None else new} END)")
        if new is not None:
            out += [c.span_text(pos, k.start), new]
            pos = k.end
    return None if not out else "".join(out) + c.span_text(pos, c.node.end)


@_plain()
def _concat_call(c: Call) -> str | None:
    # concat(...) and concat_ws(separator, ...): their arguments' text as ||'s operands', a
    # boolean by its output function (t, f: || prints true, false)
    return _text_operands(c, c.arguments[1:] if c.name == "concat_ws" else c.arguments, output=True)


#: The function of PostgreSQL's jsonb ``->`` and ``->>`` (:func:`jsonb_get`).
JSONB_GET = RESERVED_PREFIX + "jsonb_get"


def jsonb_get(doc: str | None, key: str | None, index: bool, text: bool) -> str | None:
    """PostgreSQL's ``doc -> key`` (``text`` false) or ``doc ->> key`` (``text`` true) of the
    jsonb text ``doc``: an object's field (``key`` a name) or an array's element (``index``:
    ``key`` an integer, negative from the end; a scalar is an array of itself alone, as
    PostgreSQL stores it); ``None`` when there is none. ``->`` gives
    PostgreSQL's jsonb text of the value, ``->>`` a string's own text (a JSON null is NULL).
    DuckDB's JSON functions reprint numbers as doubles (1.50 as 1.5): the value is read from
    the text here, numbers as ``numeric``.

    >>> jsonb_get('{"a": [1.50, {"y": 1, "x": null}]}', "a", False, False)
    '[1.50, {"x": null, "y": 1}]'
    >>> jsonb_get('[1, "q"]', "-1", True, True), jsonb_get('{"a": null}', "a", False, True)
    ('q', None)
    >>> jsonb_get('"s"', "0", True, False), jsonb_get('"s"', "1", True, False)
    ('"s"', None)
    """
    if doc is None or key is None:
        return None
    v = _jsonb_load(doc)
    if index:
        if not isinstance(v, (list, dict)):
            v = [v]  # PostgreSQL keeps a scalar as an array of one: '1'::jsonb -> 0 is 1
        if not isinstance(v, list):
            return None
        i = int(key)
        i = i + len(v) if i < 0 else i
        if not 0 <= i < len(v):
            return None
        r = v[i]
    else:
        if not isinstance(v, dict) or key not in v:
            return None
        r = v[key]
    if text:
        return None if r is None else r if isinstance(r, str) else _jsonb_dump(r)
    return _jsonb_dump(r)


def _json_document(c: Call, doc: Expression) -> bool:
    # Whether the value ``->``/``->>`` reads is a cast to json (not jsonb), through a chain
    # of them: PostgreSQL keeps json's text as written, which json_get gives back
    while (doc.cls == "LAMBDA" or doc.name == ("->>",)) and doc.children:
        doc = doc.children[0]
    return _cast_type(doc, c.text) == "json"


def _jsonb_call(doc: str, key: str, text: bool, json: bool = False) -> str:
    # the key is an element's index when DuckDB types it other than text (typeof is folded
    # when DuckDB binds the query); ``json``: of json, its value as written
    return (f"{jsonb.JSON_GET if json else JSONB_GET}(CAST({doc} AS VARCHAR), CAST({key} AS VARCHAR), "
            f"typeof({key}) <> 'VARCHAR', "
            f"{'true' if text else 'false'})")


#: DuckDB's nodes binding looser than PostgreSQL's ``->`` (comparisons, ``IN``, ``BETWEEN``,
#: ``LIKE``, ``IS [NOT] NULL``, ``AND``/``OR``) or as tight (``||``, left to right):
#: PostgreSQL's generic operators bind tighter than the first (its operator precedence
#: table), DuckDB's lambda arrow looser than all.
_LOOSER_CLASSES = frozenset({"COMPARISON", "CONJUNCTION", "BETWEEN"})
_LOOSER_TYPES = frozenset({"OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL", "COMPARE_IN", "COMPARE_NOT_IN"})


def _looser(e: Expression) -> bool:
    return e.cls in _LOOSER_CLASSES or e.type in _LOOSER_TYPES or (
        e.cls == "FUNCTION" and len(e.name) == 1 and (e.name[0] in _LIKES or e.name[0] == "||"
                                                     or e.name[0] in _JSONB_OPS))


def _jsonb_arrow(c: Call) -> str:
    # ``a -> k`` (DuckDB reads it as a lambda, PostgreSQL has none): jsonb's field or element
    # (jsonb_get), printed as PostgreSQL prints jsonb (DuckDB's JSON text is compact: {"b":2},
    # and its numbers doubles: 1.50 is 1.5), so its text,
    # its comparison with a jsonb literal (itself PostgreSQL's text, _json_cast) and its output
    # are PostgreSQL's. DuckDB's arrow binds looser than everything: in ``a -> 'k' = v`` its
    # right side is ``'k' = v``; the key is the leftmost operand down the chain of looser
    # nodes starting where the right side starts (not parenthesised), and the rest follows.
    # Of a json (not jsonb) cast, the value is its text as written (json_get), not jsonb.
    lhs, rhs = c.node.children
    json = _json_document(c, lhs)
    key = rhs
    if not c.text[: rhs.start].rstrip().endswith("("):
        if key.cls == "LAMBDA" and key.children and key.children[0].name == ("||",) \
                and key.children[0].start == key.start >= 0:
            key = key.children[0]  # a -> 'k' || x -> 'j': DuckDB's a -> (('k' || x) -> 'j')
        while _looser(key) and key.children and key.children[0].start == key.start >= 0:
            if key.name and key.name[0] in _JSONB_OPS:
                # ``a -> 'k' ? 'x'`` is ``(a -> 'k') ? 'x'`` in PostgreSQL (DuckDB reads the
                # key as the operator's left side)
                raise UnsupportedSQL("a jsonb operator after jsonb's -> is not supported by colmz: "
                                     "parenthesise, e.g. (a -> 'k') @> '{}'")
            if key.name == ("||",):
                # ``a -> 'k' || x`` is ``(a -> 'k') || x`` in PostgreSQL: jsonb's merge or,
                # beside text, text's concatenation -- a choice by x's type, unknown here
                raise UnsupportedSQL("|| after jsonb's -> is not supported by colmz (PostgreSQL "
                                     "merges jsonb, concatenates text): parenthesise and cast, "
                                     "e.g. (a -> 'k')::text || x")
            key = key.children[0]
    out = _jsonb_call(c.text_of(lhs), c.text_of(key), False, True) if json else \
        f"CAST({_jsonb_call(c.text_of(lhs), c.text_of(key), False)} AS JSON)"
    return out if key is rhs else out + c.span_text(key.end, rhs.end)


def _jsonb_text_arrow(c: Call) -> str:
    # ``a ->> k``: jsonb's field or element as text (jsonb_get), numbers as written
    doc, key = c.node.children
    return _jsonb_call(c.text_of(doc), c.text_of(key), True, _json_document(c, doc))


# ----------------------------------------------------------------------------- regular expressions

#: PostgreSQL's ``~`` family: DuckDB's ``regexp_matches`` with RE2's ``s`` option (``.``
#: matches a newline, as in PostgreSQL's regular expressions).
REGEXP_MATCH = RESERVED_PREFIX + "regexp_match"


@_plain(3, 4)
def _regexp_replace(c: Call) -> str | None:
    # regexp_replace(s, p, r[, flags]): RE2's ``s`` option added to the flags (PostgreSQL's
    # ``.`` matches a newline); flags not written as a string literal are left to DuckDB.
    a = c.arguments
    if len(a) == 4:
        lit = a[3].literal
        if lit is None or lit.kind != "STRING" or not re.fullmatch(r"[gi]*", lit.text):
            return None
        flags = lit.text + "s"
        pattern = a[1].literal
        if "g" in flags and (pattern is None or pattern.kind != "STRING" or (rx := _regex(pattern.text)) is None
                             or rx.search("") is not None):
            # after a match PostgreSQL tries an empty one where it ended ('aaa', 'a*': XX), RE2
            # does not (X)
            raise UnsupportedSQL("regexp_replace(..., 'g') with a pattern that may match an empty string "
                                 "(or is not a literal) is not supported by colmz (PostgreSQL and RE2 "
                                 "replace empty matches after a match differently)")
        if "i" in flags and pattern is not None and pattern.kind == "STRING" and not pattern.text.isascii():
            raise UnsupportedSQL(_CASE_FOLD_REFUSAL)
    else:
        flags = "s"
    x, p, r = c.args[:3]
    lit = a[2].literal
    if lit is not None and lit.kind == "STRING" and "\\" in lit.text:
        pattern = a[1].literal
        rx = _regex(pattern.text) if pattern is not None and pattern.kind == "STRING" else None
        groups = None if rx is None else rx.groups
        if groups is None and re.search(r"\\[1-9]", lit.text):
            raise UnsupportedSQL("regexp_replace() with a group reference (\\1) and a pattern not written as "
                                 "a literal is not supported by colmz (PostgreSQL's missing group is empty, "
                                 "DuckDB raises)")
        r = "'" + re2_replacement(lit.text, groups or 0).replace("'", "''") + "'"
    return f"regexp_replace({x}, {p}, {r}, '{flags}')"


def _regex(pattern: str) -> re.Pattern | None:
    # the regular expression read by Python's re (whose capturing groups and empty matches
    # are PostgreSQL's for the patterns both read), None when re cannot read it
    try:
        return re.compile(pattern)
    except (re.error, OverflowError):
        return None


def re2_replacement(text: str, groups: int) -> str:
    r"""PostgreSQL's replacement text of ``regexp_replace`` as RE2's, for a pattern of
    ``groups`` capturing groups: ``\1``-``\9`` are the groups in both (a group the pattern
    lacks is empty in PostgreSQL, an error in RE2: dropped), ``\&`` (the whole match) is
    RE2's ``\0``, ``\\`` a backslash; any other backslash is itself in PostgreSQL (``\0`` is
    a backslash and a 0), ``\\`` in RE2.

    >>> re2_replacement(r"<\&>", 0), re2_replacement(r"\0\1\2", 1), re2_replacement("a\\", 0)
    ('<\\0>', '\\\\0\\1', 'a\\\\')
    """
    out, i = [], 0
    while i < len(text):
        ch, nxt = text[i], text[i + 1 : i + 2]
        if ch != "\\":
            out.append(ch)
        elif nxt and nxt in "123456789":
            out.append(ch + nxt if int(nxt) <= groups else "")
            i += 1
        elif nxt == "&":
            out.append("\\0")
            i += 1
        elif nxt == "\\":
            out.append("\\\\")
            i += 1
        else:
            out.append("\\\\")
        i += 1
    return "".join(out)


def _regexp_not(c: Call) -> str | None:
    # ``a !~ b``: one span for the NOT and its match
    inner = _regexp_operator(c, c.node.children[0])
    return None if inner is None else f"(NOT {inner})"


_CASE_FOLD_REFUSAL = ("a case-insensitive regular expression match (~*, !~*, flag i) with a pattern holding "
                      "non-ASCII text is not supported by colmz (PostgreSQL folds ASCII letters only, DuckDB "
                      "every cased letter)")


def _regexp_operator(c: Call, node: Expression | None = None) -> str | None:
    kids = (node or c.node).children
    if len(kids) == 2:
        options = "s"
    elif len(kids) == 3 and kids[2].start < 0 and kids[2].literal is not None and kids[2].literal.kind == "STRING":
        options = kids[2].literal.text + "s"
    else:
        return None
    p = kids[1].literal
    if "i" in options and p is not None and p.kind == "STRING" and not p.text.isascii():
        # PostgreSQL's case-insensitive match folds ASCII letters only in the C locale, RE2 every one
        raise UnsupportedSQL(_CASE_FOLD_REFUSAL)
    return f"{REGEXP_MATCH}({c.text_of(kids[0])}, {c.text_of(kids[1])}, '{options}')"


# ----------------------------------------------------------------------------- values

_row_value = _refuse("a row value (ROW(...) or (a, b) as a result column) is not supported by colmz "
                     "(PostgreSQL's anonymous record has no DuckDB equivalent; DuckDB makes a struct)")


@_plain(2)
def _date_trunc(c: Call) -> str:
    # PostgreSQL has no date_trunc of a date: the date is cast to timestamptz (its preferred
    # datetime type), so the result is a timestamptz; DuckDB's is a timestamp.
    unit = c.arguments[0].literal
    if unit is not None and unit.kind == "STRING" and unit.text.strip().lower() in _ORDINAL_UNITS:
        # PostgreSQL's centuries and millennia start at a year 1 (2001, 1901), DuckDB's at 0
        raise UnsupportedSQL(f"date_trunc('{unit.text}', ...) is not supported by colmz ({_ORDINAL_REASON})")
    operand = c.arguments[1]
    if _binds_late(operand):
        # DuckDB picks the typed macro's overload before it binds an aggregate or a window
        # function (max(ts) took the date's: a timestamptz): min and max commute with the
        # truncation (it keeps the order), so they take it inside; others are refused
        n = operand
        if n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0].lower() in ("min", "max") and not (
                n.filter is not None or n.order_by or n.distinct) and len(n.children) == 1 and n.start >= 0:
            inner = _date_trunc_text(c, unit, c.text_of(n.children[0]))
            return f"{n.name[0]}({inner})"
        raise UnsupportedSQL("date_trunc() of an aggregate or window function other than min or max is not "
                             "supported by colmz (DuckDB cannot tell a date from a timestamp there): truncate "
                             "inside it, e.g. first_value(date_trunc('day', ts)) OVER (...)")
    return _date_trunc_text(c, unit, c.args[1])


def _binds_late(e: Expression) -> bool:
    # Whether ``e`` holds a window function or a call of an aggregate (by name, or by its
    # FILTER, ORDER BY or DISTINCT), which DuckDB binds after a macro's overload is chosen
    return any(n.cls == "WINDOW" or (n.cls == "FUNCTION" and len(n.name) == 1 and (
        n.name[0].lower() in _LATE_AGGREGATES or n.filter is not None or n.order_by or n.distinct))
        for n in e.walk())


#: Aggregates (their names) :func:`_binds_late` knows.
_LATE_AGGREGATES = frozenset({"min", "max", "any_value", "first", "last", "arbitrary", "mode", "arg_min",
                              "arg_max", "min_by", "max_by", "percentile_disc", "quantile_disc", "sum", "count", "count_star",
                              "avg", "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
                              "bool_and", "bool_or", "every", "string_agg", "array_agg", "percentile_cont",
                              "quantile_cont", "median", "product", "corr", "covar_samp", "covar_pop"})


def _date_trunc_text(c: Call, unit, operand: str) -> str:
    # date_trunc of ``operand`` by ``unit`` (the unit's literal node or None), its date read
    # as a timestamptz
    x = f"{DATE_AS_TIMESTAMPTZ}({operand})"
    if unit is None:
        # a unit known only when the query runs is refused then (DATE_TRUNC_UNIT)
        return f"date_trunc({DATE_TRUNC_UNIT}({c.args[0]}), {x})"
    if unit.kind != "STRING":
        return f"date_trunc({c.args[0]}, {x})"
    u = unit.text.strip().lower().replace("'", "''")
    if u in _WEEK_UNITS:
        x = _unit_checked(x, u, "supported", "i")
    elif u not in _TRUNC_UNITS and u not in _ZONE_UNITS:  # (DuckDB has no zone unit either)
        x = _unit_checked(x, u, "recognized", "dtzi")
    elif u in _DECADE_UNITS:  # (a decade BC: PostgreSQL's begins a year earlier, DuckDB's rounds to zero)
        return f"{pgfuncs.TRUNC_DECADE}({x})"
    return f"date_trunc('{_UNIT_SPELLINGS.get(u, u)}', {x})"


#: The units naming centuries and millennia, in PostgreSQL's or DuckDB's spelling (both take
#: the abbreviations ``c``, ``cent``, ``mil``, ``mils``).
_ORDINAL_UNITS = frozenset({"century", "centuries", "cent", "c", "millennium", "millennia", "millenium",
                            "millenniums", "mil", "mils"})
_ORDINAL_REASON = "PostgreSQL's centuries and millennia begin with a year ending in 1, DuckDB's in 0"




@_plain(1)
def _unnest(c: Call) -> str | None:
    # unnest of a multidimensional array written as nested lists gives every element in
    # PostgreSQL (DuckDB's gives the sub-lists): the lists flattened first
    a = c.arguments[0]
    depth = len(_array_shape(a) or ()) if a.type == "ARRAY_CONSTRUCTOR" else 0
    if depth < 2:
        return None
    return f"unnest({'flatten(' * (depth - 1)}{c.args[0]}{')' * (depth - 1)})"


#: A date as a timestamptz, any other value as itself (a typed macro, resolved when DuckDB
#: binds the query).
DATE_AS_TIMESTAMPTZ = RESERVED_PREFIX + "date_tz"

#: A series bound beside the other bound: a date is a timestamp beside a timestamp, else a
#: timestamptz; any other value is itself (a typed macro, resolved when DuckDB binds the query).
SERIES_BOUND = RESERVED_PREFIX + "series_bound"

#: The macro a ``date_trunc`` unit that is not a literal passes through: a unit of
#: :data:`_ORDINAL_UNITS` raises the refusal (run.py's error table makes it UnsupportedSQL).
DATE_TRUNC_UNIT = RESERVED_PREFIX + "trunc_unit"

#: The macro checking an arithmetic result for a float overflow (see :func:`_float_checked`).
FLOAT_CHECK = RESERVED_PREFIX + "float_check"

#: PostgreSQL's ``ARRAY[a, b]`` of arrays known only when the query runs (:func:`_array_rows`):
#: the sub-arrays of one shape in every dimension, NULL or empty ones only when all are (then
#: an empty array), else its error (DuckDB's lists of lists may be ragged).
ARRAY_ROWS = RESERVED_PREFIX + "array_rows"


def _shape_text(x: str) -> str:
    # DuckDB's text of array ``x``'s length in each dimension (what _array_shape reads off a
    # constructor, when the query runs) (a list; ``i`` its index variable)
    return (f"[CAST(json_array_length(to_json({x}), '$' || repeat('[0]', i)) AS BIGINT) "
            f"FOR i IN range({RESERVED_PREFIX}array_dims({x}))]")


#: PostgreSQL's array_agg of arrays makes one array of a dimension more, so its inputs must be
#: of one shape, none NULL or empty (accumArrayResultArr in src/backend/utils/adt/arrayfuncs.c,
#: whose errors these are); DuckDB's list of lists takes any. The macro wraps every array_agg
#: call: of anything but arrays (its result not a list of lists) it is folded away when the
#: query is bound.
AGG_ARRAYS = RESERVED_PREFIX + "agg_arrays"
#: PostgreSQL's errors of array_agg of arrays (:data:`AGG_ARRAYS`).
AGG_ARRAYS_ERRORS = ("cannot accumulate null arrays", "cannot accumulate empty arrays",
                     "cannot accumulate arrays of different dimensionality")

#: Macros and Python functions the rules above call (defined on every colmz connection by
#: :func:`colmz.sql.connect`, with :data:`colmz.sql.translate.MACROS`).
def _type_case(types, i: int) -> str:
    # SQL of field ``i`` of the entry of ``types`` (letter, DuckDB's type name as a LIKE
    # pattern, PostgreSQL's name) whose pattern x's type matches ('-' for none)
    whens = " ".join(f"WHEN typeof(x) LIKE '{t[1]}' THEN '{t[i]}'" for t in types)
    return f"CASE {whens} ELSE '-' END"


TRANSFORM_MACROS = (
    *(f"CREATE OR REPLACE MACRO {macro}(x) AS CASE WHEN typeof(x) = 'VARCHAR' AND "
      f"isinf(TRY_CAST(CAST(x AS VARCHAR) AS {'REAL' if name == 'real' else 'DOUBLE'})) AND NOT "
      f"regexp_full_match(lower(trim(CAST(x AS VARCHAR))), '[+-]?inf(inity)?') THEN "
      f"error('\"' || CAST(x AS VARCHAR) || '\" is out of range for type {name}') "
      f"WHEN typeof(x) = 'BOOLEAN' THEN error('cannot cast type boolean to {name}') ELSE x END"
      for name, macro in FLOAT_CAST_MACROS.items()),
    f"CREATE OR REPLACE MACRO {REGEXP_MATCH}(s, p, o) AS regexp_matches(s, p, o)",
    f"CREATE OR REPLACE MACRO {TIME_IN}(x, t) AS CASE WHEN typeof(x) = 'VARCHAR' AND regexp_full_match("
    f"CAST(x AS VARCHAR), '{_DATE_ONLY}') THEN error('invalid input syntax for type ' || t || ': \"' || "
    "CAST(x AS VARCHAR) || '\"') ELSE x END",
    f"CREATE OR REPLACE MACRO {CHR}(x) AS CASE WHEN x = 0 THEN error('null character not permitted') "
    "ELSE chr(x) END",
    f"CREATE OR REPLACE MACRO {FLOAT_CHECK}(r, finite, nonzero) AS CASE WHEN typeof(r) IN ('DOUBLE', 'FLOAT') "
    "AND NOT isfinite(TRY_CAST(r AS DOUBLE)) AND finite THEN error('value out of range: overflow') "
    "WHEN typeof(r) IN ('DOUBLE', 'FLOAT') AND TRY_CAST(r AS DOUBLE) = 0 AND finite AND nonzero "
    "THEN error('value out of range: underflow') ELSE r END",
    *NUMERIC_MACROS,
    f"CREATE OR REPLACE MACRO {CONCAT_BY_KIND}(t, j) AS CAST(error('{_CONCAT_REFUSAL}') AS VARCHAR)",
    *(f"CREATE OR REPLACE MACRO {macro}(s, n, f) AS CASE WHEN f = '' THEN left(s, greatest(n, 0)) "
      f"ELSE {name}(s, n, f) END" for name, macro in PAD_MACROS.items()),
    *SPLITTING_MACROS,
    f"CREATE OR REPLACE MACRO {ARRAY_TO_STRING}(a, d) AS CASE WHEN typeof(a) = 'BOOLEAN[]' THEN "
    f"array_to_string([left(CAST(e AS VARCHAR), 1) FOR e IN a], d) WHEN typeof(a) IN {pgfuncs.TEXT_ELEMENTS} "
    f"THEN array_to_string([{RESERVED_PREFIX}text(e) FOR e IN a], d) WHEN typeof(a) LIKE 'DECIMAL%' THEN "
    "error('array_to_string() of numeric elements is not supported by colmz (PostgreSQL prints each element''s "
    "own scale)') ELSE array_to_string(a, d) END",
    f"CREATE OR REPLACE MACRO {ARRAY_ROWS}(x) AS CASE WHEN list_bool_and([e IS NULL OR len(e) = 0 FOR e IN x]) "
    "THEN [e FOR e IN x IF false] WHEN list_bool_or([e IS NULL OR len(e) = 0 FOR e IN x]) "
    f"OR len(list_distinct([{_shape_text('e')} FOR e IN x])) > 1 THEN error('multidimensional arrays must have array "
    "expressions with matching dimensions') ELSE x END",
    f"CREATE OR REPLACE MACRO {PERCENTILE_CONT}(r) AS CASE WHEN typeof(r) IN ('DATE', 'TIME', 'TIMESTAMP', "
    "'TIMESTAMP WITH TIME ZONE', 'TIME WITH TIME ZONE') THEN error('percentile_cont() of a date or time is not "
    "supported by colmz (PostgreSQL has it of double precision and interval only)') ELSE r END",
    f"CREATE OR REPLACE MACRO {MOD}(a, b) AS CASE WHEN typeof(a) IN ('DOUBLE', 'FLOAT') OR typeof(b) IN "
    "('DOUBLE', 'FLOAT') THEN error('% or mod() of a float is not supported by colmz (PostgreSQL has them of "
    "integers and numeric only)') ELSE a % b END",
    # (the first input failing raises, as PostgreSQL checks each in turn: NULL, an empty first
    # one, another shape than the first's)
    f"CREATE OR REPLACE MACRO {AGG_ARRAYS}(r) AS CASE WHEN typeof(r) NOT LIKE '%[][]' OR r IS NULL THEN r "
    f"WHEN r[1] IS NULL THEN error('{AGG_ARRAYS_ERRORS[0]}') "
    f"WHEN json_array_length(to_json(r[1])) = 0 THEN error('{AGG_ARRAYS_ERRORS[1]}') "
    f"ELSE {AGG_ARRAYS}_first(r, list_position([e IS NULL FOR e IN r], true), "
    f"list_position([e IS NOT NULL AND {_shape_text('r[1]')} <> {_shape_text('e')} FOR e IN r], "
    "true)) END",
    f"CREATE OR REPLACE MACRO {AGG_ARRAYS}_first(r, n, d) AS CASE WHEN n > 0 AND (d IS NULL OR d = 0 OR n < d) "
    f"THEN error('{AGG_ARRAYS_ERRORS[0]}') WHEN d > 0 THEN error('{AGG_ARRAYS_ERRORS[2]}') ELSE r END",
    # (typeof, not typed overloads: DuckDB picks an overload before it binds an aggregate or
    # window argument, by no type of it)
    f"CREATE OR REPLACE MACRO {UNIT_CHECK}(x, w, bad) AS CASE WHEN x IS NOT NULL AND contains(bad, "
    f"{_type_case(_UNIT_TYPES, 0)}) THEN error('unit ' || w || ' for type ' || {_type_case(_UNIT_TYPES, 2)}) "
    "ELSE x END",
    f"CREATE OR REPLACE MACRO {CAST_CHECK}(r, x, t, bad) AS CASE WHEN contains(bad, {_type_case(_CAST_TYPES, 0)}) "
    f"THEN error('cannot cast type ' || {_type_case(_CAST_TYPES, 2)} || ' to ' || t) ELSE r END",
    f"CREATE OR REPLACE MACRO {DATE_TRUNC_UNIT}(u) AS CASE WHEN lower(u) IN "
    f"({', '.join(repr(x) for x in sorted(_ORDINAL_UNITS))}) THEN error('date_trunc(''' || u || "
    f"''', ...) is not supported by colmz ({_ORDINAL_REASON.replace(chr(39), chr(39) * 2)})') ELSE u END",
)
#: Typed macros (DuckDB 1.4 or later); before, their fallback (a refusal when it matters).
_ASCII = "abcdefghijklmnopqrstuvwxyz"
TRANSFORM_TYPED_MACROS = (
    (f"CREATE OR REPLACE MACRO {CALL_MACROS['octet_length']}(x VARCHAR) AS CAST(strlen(x) AS INTEGER), "
     "(x BLOB) AS CAST(octet_length(x) AS INTEGER)",
     f"CREATE OR REPLACE MACRO {CALL_MACROS['octet_length']}(x) AS CAST(strlen(x) AS INTEGER)"),
    *((f"CREATE OR REPLACE MACRO {CALL_MACROS[f]}(x VARCHAR) AS translate(x, '{a}', '{b}')",
       f"CREATE OR REPLACE MACRO {CALL_MACROS[f]}(x) AS translate(x, '{a}', '{b}')")
      for f, a, b in (("upper", _ASCII, _ASCII.upper()), ("lower", _ASCII.upper(), _ASCII))),
    # (integers first: DuckDB picks the first typed overload for an aggregate's value, whose
    # sign is the same number as a double)
    (f"CREATE OR REPLACE MACRO {SIGN}" + "".join(
        f"(x {t}) AS CAST(sign(x) AS DOUBLE), " for t in ("INTEGER", "BIGINT", "SMALLINT", "TINYINT", "HUGEINT",
                                                        "DOUBLE", "FLOAT"))
     + "(x DECIMAL) AS CAST(sign(x) AS DECIMAL(1,0)), (x) AS sign(x)",
     f"CREATE OR REPLACE MACRO {SIGN}(x) AS sign(x)"),
    (f"CREATE OR REPLACE MACRO {DATE_AS_TIMESTAMPTZ}(x DATE) AS CAST(x AS TIMESTAMPTZ), (x) AS x",
     f"CREATE OR REPLACE MACRO {DATE_AS_TIMESTAMPTZ}(x) AS CASE WHEN typeof(x) = 'DATE' THEN "
     "error('date_trunc() of a date is not supported by colmz with this DuckDB (PostgreSQL makes it "
     "a timestamptz; DuckDB 1.4 or later can)') ELSE x END"),
    (f"CREATE OR REPLACE MACRO {SERIES_BOUND}(x DATE, y DATE) AS CAST(x AS TIMESTAMPTZ), (x DATE, y TIMESTAMP) AS "
     "CAST(x AS TIMESTAMP), (x DATE, y) AS CAST(x AS TIMESTAMPTZ), (x, y) AS x",
     f"CREATE OR REPLACE MACRO {SERIES_BOUND}(x, y) AS CASE WHEN typeof(x) = 'DATE' THEN error('generate_series() "
     "of a date is not supported by colmz with this DuckDB (PostgreSQL makes it a timestamptz; DuckDB 1.4 or later "
     "can)') ELSE x END"),
    (f"CREATE OR REPLACE MACRO {REAL_WIDEN}"
     + ", ".join(f"(x, y {t}) AS CAST(x AS DOUBLE)" for t in _EXACT_DUCK_TYPES) + ", (x, y) AS x",
     f"CREATE OR REPLACE MACRO {REAL_WIDEN}(x, y) AS CASE WHEN typeof(y) IN "
     f"({', '.join(repr(t) for t in _EXACT_DUCK_TYPES[:-1])}) OR typeof(y) LIKE 'DECIMAL%' THEN "
     "error('a real with an integer or numeric is not supported by colmz with this DuckDB (PostgreSQL "
     "computes it as a double; DuckDB 1.4 or later can)') ELSE x END"),
)
TRANSFORM_FUNCTIONS = (jsonb.arrow_entry(JSONB_CONCAT, jsonb_concat, ("VARCHAR", "VARCHAR")),
                       jsonb.arrow_entry(JSONB_IN, _jsonb_in, ("VARCHAR",)),
                       *TEXT_NUMERIC_FUNCTIONS)
#: Python functions that may give NULL for values (registered with DuckDB's special NULL
#: handling: they see NULL arguments and may return NULL).
TRANSFORM_NULL_FUNCTIONS = (jsonb.arrow_entry(JSONB_GET, jsonb_get, ("VARCHAR", "VARCHAR", "BOOLEAN", "BOOLEAN"),
                                              nulls=True),)


# ----------------------------------------------------------------------------- float overflow

#: PostgreSQL's float arithmetic raises "value out of range: overflow" where finite operands
#: give an infinity (``src/backend/utils/adt/float.c``'s float8_mul, float8_pl, ...); DuckDB
#: answers Infinity (or NaN further on). Each maximal arithmetic subtree (``+ - * /`` nodes)
#: is checked once: its result not finite while every leaf under it is finite means one of
#: its operations overflowed; in a subtree of ``*`` and ``/`` only, a zero result from
#: nonzero finite leaves means one underflowed (PostgreSQL: "value out of range:
#: underflow"). Only a DOUBLE or FLOAT result is checked (``typeof``, folded
#: when DuckDB binds the query: integers, decimals, dates and intervals cost nothing):
#: :data:`FLOAT_CHECK`.
_ARITH_OPS = frozenset({"+", "-", "*", "/", "//"})


def is_arith(e: Expression) -> bool:
    """``e`` is a plain ``+ - * / //`` call (unary or binary)."""
    return (e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0] in _ARITH_OPS
            and 1 <= len(e.children) <= 2 and e.filter is None and not e.order_by and not e.distinct)


def arith_leaves(e: Expression) -> list[Expression]:
    """The operands under the arithmetic subtree ``e`` that are not themselves arithmetic;
    number literals without an exponent (always finite) left out."""
    out, stack = [], [e]
    while stack:
        n = stack.pop()
        if is_arith(n):
            stack.extend(reversed(n.children))
        elif not (n.cls == "CONSTANT" and n.literal is not None and n.literal.kind in ("INTEGER", "NUMERIC")
                  and "e" not in n.literal.text.lower()):
            out.append(n)
    return out


def _shows_float(n: Expression, text: str) -> bool:
    # Whether node ``n`` is visibly a float: a cast to a float type, a call of a function of
    # a double result, an exponent literal (a double to DuckDB). A column's type is not
    # known to the translation: arithmetic of two such operands is checked on its own
    # (_operands_at), a column with a number is not.
    if (target := _cast_type(n, text)) is not None:
        return float_kind(target) is not None
    if n.cls in ("FUNCTION", "WINDOW") and len(n.name) == 1:
        return n.name[0].lower() in _FLOAT_HINTS
    return n.cls == "CONSTANT" and n.literal is not None and n.literal.kind != "STRING" \
        and "e" in n.literal.text.lower()


#: Words an arithmetic operator may follow or precede that are not operands.
_NOT_OPERANDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "SELECT", "WHERE", "WHEN", "THEN", "ELSE", "CASE",
                           "ON", "BY", "AS", "LIKE", "ILIKE", "BETWEEN", "HAVING", "DISTINCT", "ALL",
                           "ANY", "SOME", "RETURNING", "SET", "USING", "LIMIT", "OFFSET", "INTERVAL"})


_PAIR_OPS = frozenset({"+", "-", "*", "/"})


def _operands_at(toks, j: int) -> bool:
    # Whether the ``+ - * /`` at ``j`` (not the first or last token) stands between two
    # operands that are not numbers (a column, a call, a parenthesised expression):
    # arithmetic whose float result colmz checks for an overflow although no float shows
    # (float columns); a number beside a column is left unchecked (reading the tree for
    # every ``x + 1`` would cost DuckDB's json_serialize_sql on most statements).
    a, b = toks[j - 1], toks[j + 1]
    return ((a.kind in ("word", "qident") and a.upper not in _NOT_OPERANDS) or a.text == ")") and (
        (b.kind in ("word", "qident") and b.upper not in _NOT_OPERANDS) or b.text == "(")


def float_check(body: str, leaves: list[str], products: bool) -> str:
    """:data:`FLOAT_CHECK` of arithmetic ``body`` over operands ``leaves`` (their texts):
    the overflow test (every operand finite) and, for ``products`` (a subtree of ``*`` and
    ``/`` only: :func:`products_only`), the underflow test (every operand nonzero).

    >>> float_check("a * b", ["a"], True) == FLOAT_CHECK + "(a * b, isfinite(TRY_CAST(a AS DOUBLE)), TRY_CAST(a AS DOUBLE) <> 0)"
    True
    """
    finite = " AND ".join(f"isfinite(TRY_CAST({t} AS DOUBLE))" for t in leaves) or "true"
    nonzero = (" AND ".join(f"TRY_CAST({t} AS DOUBLE) <> 0" for t in leaves) or "true") if products else "false"
    return f"{FLOAT_CHECK}({body}, {finite}, {nonzero})"


def products_only(e: Expression) -> bool:
    """Whether the arithmetic subtree ``e`` is binary ``*`` and ``/`` only, with no number
    literal 0 (a zero from nonzero finite leaves is then an underflow; the literals are not
    among :func:`arith_leaves`)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if is_arith(n):
            if n.name[0] not in ("*", "/", "//") or len(n.children) != 2:
                return False
            stack.extend(n.children)
        elif n.cls == "CONSTANT" and n.literal is not None and n.literal.kind in ("INTEGER", "NUMERIC") \
                and float(n.literal.text) == 0:
            return False
    return True


def _float_checked(rule: Rule | None, leaves: list[Expression]) -> Rule:
    return lambda c: float_check(c.by(rule), [c.text_of(n) for n in leaves], products_only(c.node))


def _unchecked(stmts, text: str, toks) -> tuple[set[int], bool, bool]:
    # ids of the nodes whose arithmetic takes no overflow check; whether arithmetic of two
    # operands that are not numbers (``f * f``: float columns, whose type the translation
    # does not know) takes it wherever it is; whether any arithmetic may take it (a float
    # shows: a float type, a function of a double result, an exponent literal -- else no
    # node is read for it). The expressions of every grouped
    # query (GROUP BY): DuckDB matches a select item against the grouped expressions as
    # written, which a check repeating the leaves would break. A window's ORDER BY and
    # PARTITION BY (after OVER): DuckDB refuses an expression that may raise (volatile) there.
    # (the tokens filtered by comprehensions: a generator over every token costs more)
    last = len(toks) - 1
    pairs = any(_operands_at(toks, i) for i in [i for i, t in enumerate(toks)
                                                if t.text in _PAIR_OPS and t.kind == "op" and 0 < i < last])
    if not pairs and not [t for t in toks if t.upper in _FLOAT_HINTS_UPPER
                          or (t.kind == "number" and "e" in t.text.lower())]:
        return set(), False, False
    out: set[int] = set()
    for d in (d for q in stmts for d in all_queries(q)):
        if d.group_by:
            out.update(id(n) for e, _ in _own_roots(d, tables=False) for n in e.walk())
        for r, _ in _own_roots(d):
            for n in r.walk():
                if n.cls == "WINDOW":
                    over = text.upper().find("OVER", n.start)
                    out.update(id(k) for c in n.children if c.start > over for k in c.walk())
    return out, pairs, True


# ----------------------------------------------------------------------------- names

#: The tokens a select list's ``*`` follows (``SELECT *``, ``a, *``, ``t.*``, ``DISTINCT *``).
_BEFORE_STAR = frozenset({"SELECT", ",", ".", "DISTINCT", "ALL"})


def _may_name_derived(toks) -> bool:
    # A ``*`` and a query (the statement's, or one inside it: ``(SELECT``) whose select list
    # holds an item other than a column, a star or an aliased item: a column DuckDB names
    # otherwise than PostgreSQL may reach the result by its name (under a ``*``, or beside
    # one, where colmz.sql.parse.output_names leaves DuckDB's names).
    # A subquery's item DuckDB names otherwise (``upper('a')``, read by the query around it
    # as ``upper``) or repeated column name (marked under a *, ambiguous where the query
    # reading it names it) is read too, with or without a star.
    star = False  # a select-list star (not count(*), a * b)
    for i in range(1, len(toks)):
        t = toks[i]
        if t.text == "*" and t.kind == "op" and (toks[i - 1].upper or toks[i - 1].text) in _BEFORE_STAR:
            star = True
            break
    n = len(toks)
    for i, t in enumerate(toks):
        if t.upper == "SELECT" and (
                i == 0 or toks[i - 1].text in ("(", ")") or toks[i - 1].upper in ("UNION", "ALL", "EXCEPT", "INTERSECT")):
            if not star and not (i > 0 and toks[i - 1].text == "("):
                continue  # without a star only a subquery's names matter
            kind = _plain_list(toks, i + 1, n)
            if (kind != "plain" and (star or (i > 0 and toks[i - 1].text == "("))) \
                    or (star and i > 0 and toks[i - 1].text == "(" and _star_join_list(toks, i + 1, n)):
                return True
    return False


def _star_join_list(toks, j: int, n: int) -> bool:
    # Whether the query whose select list starts at toks[j] (inside parentheses) has two
    # stars, or a star over a FROM with a join or a comma (see _star_over_join).
    stars, joined, in_from = 0, False, False
    for k in top_level(toks, j, n):
        t = toks[k]
        if t.upper == "FROM":
            in_from = True
        elif not in_from and t.text == "*" and (toks[k - 1].upper or toks[k - 1].text) in _BEFORE_STAR:
            stars += 1
        elif in_from and (t.upper == "JOIN" or t.text == ","):
            joined = True
    return stars > 1 or (stars == 1 and joined)


_LIST_ENDS = frozenset({"FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "EXCEPT",
                        "INTERSECT", "WINDOW", "OFFSET", "QUALIFY"})


def _plain_list(toks, j: int, n: int) -> str:
    # Whether the select list from toks[j] holds only columns (``a``, ``t.a``), stars and
    # items ending in an alias (``... AS x``): "plain", "repeated" when two of them have one
    # name (compared without case, as DuckDB renames them), "" when not.
    if j < n and toks[j].upper in ("DISTINCT", "ALL"):
        return ""
    item: list = []
    depth = 0
    names: set[str] = set()
    kind = "plain"
    for k in range(j, n + 1):
        t = toks[k] if k < n else None
        end = t is None or (depth == 0 and (t.upper in _LIST_ENDS or t.text in (",", ")")))
        if not end:
            if t.kind == "op" and t.text in "([":
                depth += 1
            elif t.kind == "op" and t.text in ")]":
                depth -= 1
            item.append(t)
            continue
        if not (_dotted(item) or (len(item) >= 2 and item[-2].upper == "AS")
                or (len(item) >= 2 and item[-1].kind in ("word", "qident") and _dotted(item[:-1]))):
            return ""
        if item[-1].kind in ("word", "qident"):
            name = item[-1].name.lower()
            if name in names:
                kind = "repeated"  # DuckDB renames the second (_derived_items)
            names.add(name)
        if t is None or t.text != ",":
            return kind
        item = []
    return kind


def _dotted(item) -> bool:
    # ``a``, ``t.a``, ``*``, ``t.*``
    return bool(item) and len(item) % 2 == 1 and all(
        (x.kind in ("word", "qident") or (x.text == "*" and k == len(item) - 1)) if k % 2 == 0 else x.text == "."
        for k, x in enumerate(item)) and item[0].upper not in ("CASE", "NULL", "TRUE", "FALSE")


def _derived_items(q: Query, out: dict, realiased: dict, text: str, toks, offset: int) -> None:
    # The select items of every query whose columns are a relation's (a subquery in FROM,
    # a CTE) that have no alias and are not a column or a star: id -> PostgreSQL's name.
    # DuckDB names such an item by its text (``1``, ``upper("name")``); PostgreSQL by
    # FigureColname (``?column?``, ``upper``) -- the alias added makes DuckDB's PostgreSQL's.
    # A repeated name (``SELECT 1, 2``; ``SELECT a, b AS a``) is marked (duplicate_name): an
    # item without an alias gets the mark as its alias (in ``out``), an aliased one has its
    # alias replaced (``realiased``: id -> (end of the alias in ``text``, mark)).
    starts = [t.start + offset for t in toks]

    def named(d: Query, marks: bool = True) -> dict[str, int]:
        d = first_branch(d)
        seen: dict[str, int] = {}
        exact: dict[str, int] = {}
        for e in d.items:
            if e.cls == "STAR" or e.start < 0:
                continue
            before, after = text[: e.start].rstrip(), text[e.end :].lstrip()
            if before.endswith("(") and after.startswith(")"):
                continue  # parenthesised: the alias would land inside the parentheses
            alias_end = _alias_end(e, text, toks, starts, offset) if e.alias else -1
            if e.alias and alias_end < 0:
                continue
            names = output_names("SELECT " + text[e.start : alias_end if alias_end >= 0 else e.end])
            if names is None and alias_end < 0 and e.cls == "WINDOW" and e.name:
                names = [e.name[-1]]  # over a named window (read alone, w is unknown)
            if not (names and len(names) == 1 and names[0]):
                continue
            n = seen.get(names[0].lower(), 0) if marks else 0
            seen[names[0].lower()] = n + 1
            exact[names[0]] = exact.get(names[0], 0) + 1
            if n:
                # DuckDB names the n-th repeat of a name (compared without case) name_n
                # where PostgreSQL keeps the name: a mark DuckDB keeps, undone on the result
                # (duplicate_name, undo_duplicate_name).
                mark = duplicate_name(names[0], n)
                if alias_end >= 0:
                    realiased[id(e)] = (alias_end, mark)
                else:
                    out[id(e)] = mark
            elif not e.alias and e.cls != "COLUMN_REF":
                out[id(e)] = names[0]
        # name -> its count, for names repeated exactly or only without case (PostgreSQL's
        # "A" and a are two names, DuckDB's one)
        return {name: k for name, k in exact.items() if k > 1 or seen[name.lower()] > k}

    def ambiguous(owner: Query, t: Table, repeated: dict[str, int]) -> None:
        # A reference to a repeated name of subquery (or CTE) ``t`` in the query reading it
        # is ambiguous in PostgreSQL; DuckDB, having renamed the repeat, reads the first.
        roots = [*owner.items, *(e for e in (owner.where, owner.having, owner.qualify) if e is not None),
                 *owner.group_by]
        qualifier = (t.alias or (t.name[-1] if t.name else "")).lower()
        # ORDER BY's bare name of an output column is that column, not the subquery's
        outputs = {e.alias.lower() for e in owner.items if e.alias}
        orders = [e for m in owner.modifiers if m.type == "ORDER_MODIFIER" for e in m.expressions
                  if not (e.cls == "COLUMN_REF" and len(e.name) == 1 and e.name[0].lower() in outputs)]
        for root in [*roots, *orders]:
            for n in root.walk():
                if n.cls != "COLUMN_REF" or n.end <= 0 or len(n.name) > 2 or (len(n.name) == 2 and (
                        not qualifier or n.name[0].lower() != qualifier)):
                    continue
                i = bisect.bisect_left(starts, n.end) - 1
                name = toks[i].name if i >= 0 and toks[i].kind in ("word", "qident") else None
                if name is None or not any(r.lower() == name.lower() for r in repeated):
                    continue
                if repeated.get(name, 0) > 1:
                    raise SQLError(f'column reference "{name}" is ambiguous')
                raise UnsupportedSQL(
                    f'a reference to column "{name}" of a subquery holding columns whose names differ '
                    "only in case is not supported by colmz (DuckDB matches names without case)")

    # CTEs by name (lower case) -> their repeated names, and those whose * expands over a
    # join; a CTE with a column list (``WITH c(x, y) AS``) names its columns anew.
    cte_repeats: dict[str, dict[str, int]] = {}
    cte_stars: set[str] = set()
    listed = {name.lower() for name, cols, *_ in cte_definitions(text[offset:]) if cols}
    queries = list(all_queries(q))
    for d in queries:
        for name, cte in d.ctes:
            repeated = named(cte)
            if name.lower() not in listed:
                if repeated:
                    cte_repeats[name.lower()] = repeated
                if _star_over_join(cte):
                    cte_stars.add(name.lower())
    for d in queries:  # each FROM item with the query reading it
        for t in table_refs(d):
            if t.subquery is not None and t.type == "SUBQUERY":
                repeated = named(t.subquery)
                if repeated and not t.column_aliases:
                    ambiguous(d, t, repeated)
                if not t.column_aliases and _star_over_join(t.subquery):
                    _refuse_star_columns(d, t)
            elif t.type == "BASE_TABLE" and len(t.name) == 1:
                if t.name[0].lower() in cte_repeats:
                    ambiguous(d, t, cte_repeats[t.name[0].lower()])
                if t.name[0].lower() in cte_stars:
                    _refuse_star_columns(d, t)
    # The statement's own select list beside a ``*``: DuckDB names an item by its text
    # (``1``, ``upper(t)``) and keeps repeated names, output_names leaves DuckDB's names.
    if any(e.cls == "STAR" for e in first_branch(q).items):
        named(q, marks=False)


def _star_over_join(d: Query) -> bool:
    # Whether the select list of ``d`` expands a ``*`` over a join (or two stars): columns
    # of one name may meet there, which DuckDB renames (``id_1``) and PostgreSQL keeps.
    d = first_branch(d)
    stars = sum(e.cls == "STAR" for e in d.items)
    return stars > 1 or (stars == 1 and d.from_ is not None and d.from_.type == "JOIN")


def _refuse_star_columns(owner: Query, t: Table) -> None:
    # The query ``owner`` reading the columns of ``t`` (a subquery or CTE whose * expands
    # over a join) by a * or by name: DuckDB's names of them are not PostgreSQL's.
    qualifier = (t.alias or (t.name[-1] if t.name else "")).lower()
    for root, _ in _own_roots(owner, tables=False):
        for n in root.walk():
            if (n.cls == "STAR" and (not n.name or n.name[-1].lower() == qualifier)) or (
                    n.cls == "COLUMN_REF" and (len(n.name) == 1 or n.name[0].lower() == qualifier)):
                raise UnsupportedSQL(
                    "columns of a subquery or CTE whose * expands over a join are not supported by "
                    "colmz (DuckDB renames a repeated column name, PostgreSQL keeps it): list the "
                    "columns, or name them (AS s(a, b, ...))")


#: The mark of a repeated column name of a subquery or CTE (see :func:`duplicate_name`).
_DUPLICATE = RESERVED_PREFIX + "dup"
_DUPLICATE_MARK = re.compile(re.escape(_DUPLICATE) + r"\d+_(.*)", re.DOTALL)


def duplicate_name(name: str, n: int) -> str:
    """The alias translate gives the ``n``-th repeat of column name ``name`` in a subquery
    or CTE: DuckDB renames a repeated name (``?column?_1``, ``a_1``, compared without case)
    where PostgreSQL keeps it; :func:`undo_duplicate_name` gives the name back.

    >>> duplicate_name("?column?", 1), undo_duplicate_name(duplicate_name("?column?", 1))
    ('__colmz_dup1_?column?', '?column?')
    """
    return f"{_DUPLICATE}{n}_{name}"


def undo_duplicate_name(column: str) -> str:
    """A result column's name with the mark of :func:`duplicate_name` undone (any other as is)."""
    m = _DUPLICATE_MARK.fullmatch(column) if column.startswith(_DUPLICATE) else None
    return m.group(1) if m else column


def _alias_end(e: Expression, text: str, toks, starts: list[int], offset: int) -> int:
    # The end (in ``text``) of the alias written after item ``e``: the first word after the
    # item's span spelling DuckDB's alias; -1 when none is found.
    for t in toks[bisect.bisect_left(starts, max(e.end, 0)):]:
        if t.kind in ("word", "qident") and t.name.lower() == e.alias.lower():
            return t.end + offset
        if t.kind not in ("word", "qident") and t.text != ")":
            return -1
    return -1


def _realias(start: int, end: int, mark: str) -> Rule:
    return lambda c: c.span_text(start, end) + " AS " + identifier(mark)


def _with_alias(rule: Rule | None, name: str) -> Rule:
    return lambda c: c.by(rule) + " AS " + identifier(name)


# ----------------------------------------------------------------------------- applying the table

#: PostgreSQL's regular expression match operators (DuckDB's regexp_matches nodes).
_REGEXP_OPS = frozenset({"~", "!~", "~*", "!~*"})


#: Words showing a float may be computed (a float type, a function of a double result): the
#: text of arithmetic over one, or over an exponent literal, is read for the overflow check
#: (:func:`_shows_float`). A column's type is unknown here: arithmetic of a column with a
#: number alone (``x + 1``) is not read for it (reading the tree costs DuckDB's
#: json_serialize_sql, ten times the rest of translate); of two columns it is.
_FLOAT_HINTS = frozenset({"float", "float8", "float4", "real", "double", "sqrt", "cbrt", "exp", "ln", "log",
                          "log10", "power", "pow", "random", "pi", "degrees", "radians", "sin", "cos",
                          "tan", "cot", "asin", "acos", "atan", "atan2", "stddev", "stddev_samp",
                          "stddev_pop", "variance", "var_samp", "var_pop", "percentile_cont"})
_FLOAT_HINTS_UPPER = frozenset(w.upper() for w in _FLOAT_HINTS)


class _Walk:
    # What the table's finders read of the statement being walked: the text its spans index
    # (``text``, the statement after ``offset`` blanks), its tokens and their starts, its
    # trees, and the answers read once per statement (constants, reals, array columns,
    # subscript chains, the starts of quoted calls with capitals).
    def __init__(self, stmts, text: str, toks, offset: int, relations: Relations = ()) -> None:
        self.stmts, self.text, self.toks, self.offset = stmts, text, toks, offset
        self.relations = relations  # the array columns of the tables it reads (array_columns)
        self.starts = [t.start for t in toks]
        self.constants: dict[int, PgNumeric | None] = {}  # each node's _constant, read once
        self.reals: dict[int, bool] = {}  # each node's _shows_real
        self.item = False  # whether the node is a select item

    @functools.cached_property
    def arrays(self) -> frozenset[tuple[int, int]]:
        # array_columns of the statement, read when a finder first asks
        from colmz.sql.typing_pass import array_columns  # typing_pass imports this module

        return array_columns(self.stmts, self.text, self.relations)

    @functools.cached_property
    def mixed(self) -> frozenset[str]:
        # the names (lower case) of columns of subqueries and CTEs mixing decimal scales (_mixed_columns)
        return frozenset(n for q in self.stmts for d in all_queries(q) for n in _mixed_columns(d))

    @functools.cached_property
    def unchecked(self) -> tuple[set[int], bool, bool]:
        # _unchecked of the statement, read at its first arithmetic node
        return _unchecked(self.stmts, self.text, self.toks)

    @functools.cached_property
    def numeric(self) -> frozenset[str]:
        # _numeric_names of the statement, read when a rule first asks (Call.numeric_names)
        return _numeric_names(self.stmts, self.text)

    @functools.cached_property
    def chains(self) -> dict[int, int]:
        # each outermost subscript of a chain (a[i][j]) by id, with its number of subscripts
        ends = {id(k): k for q in self.stmts for d in all_queries(q) for root, _ in _own_roots(d)
                for k in root.walk() if k.type == "ARRAY_EXTRACT" and k.children}
        inner = {id(k.children[0]) for k in ends.values()}
        out = {}
        for i, k in ends.items():
            if i not in inner:
                depth = 0
                while k.type == "ARRAY_EXTRACT" and k.children:
                    depth, k = depth + 1, k.children[0]
                out[i] = depth
        return out

    @functools.cached_property
    def capitals(self) -> dict:
        # the quoted names with capitals before "(", by their start
        toks = self.toks
        return {t.start: t for i, t in enumerate(toks[:-1])
                if t.kind == "qident" and toks[i + 1].text == "(" and t.name != t.name.lower()}

    def token_at(self, e: Expression):
        # The token starting where node ``e`` starts, and the one after it (None when none).
        toks, at = self.toks, e.start - self.offset
        i = bisect.bisect_left(self.starts, at)
        if i + 1 < len(toks) and toks[i].start == at:
            return toks[i], toks[i + 1]
        return (toks[i], None) if i < len(toks) and toks[i].start == at else (None, None)

    def quoted_capital(self, e: Expression) -> None:
        # PostgreSQL's function names are lower case and a quoted name is matched as
        # written; DuckDB matches function names without case
        t = self.capitals.get(e.start - self.offset)
        if t is not None and e.name[0].lower() == t.name.lower():
            raise SQLError(f"function {_written(self.text, e)[: len(t.text)]}() does not exist")


#: A finder: the rule of a node (None: this entry does not apply to it).
Finder = Callable[[Expression, _Walk], "Rule | None"]

#: The table of transforms: a node's key (:func:`_rule_of`: a call's name in lower case, an
#: operator's DuckDB type, another node's DuckDB class) -> the finders of the entries that may apply to it, in the order they
#: are asked (the first rule found is the node's). A node of a key not here has no rule.
_TABLE: dict[str, list[Finder]] = {}
#: The words and operator tokens that may make a node of the table (each entry names those
#: of its nodes): :func:`may_transform` reads a text's tree only when one of them is in it.
_TRIGGER_WORDS: set[str] = set()
_TRIGGER_OPS: set[str] = set()


def _entry(keys, words=(), ops=()) -> Callable[[Finder], Finder]:
    # Adds the decorated finder to the table under ``keys``, triggered by ``words``/``ops``.
    def add(finder: Finder) -> Finder:
        for k in keys:
            _TABLE.setdefault(k, []).append(finder)
        _TRIGGER_WORDS.update(words)
        _TRIGGER_OPS.update(ops)
        return finder

    return add


_CASTS = ("CAST",)


def _when(keys, rule: Rule, when: Callable[[Expression, _Walk], bool], words=(), ops=()) -> None:
    # An entry whose rule is ``rule`` for a node of ``keys`` for which ``when`` holds.
    _entry(keys, words, ops)(lambda e, w: rule if when(e, w) else None)


# The entries, in the order a node's are asked (of one key: the first rule found applies).
# (the magnitude of a number triggers it: may_transform reads numbers)
_when(("CONSTANT",), _smallest_int,
      lambda e, w: e.literal is not None and e.literal.kind == "INTEGER" and e.literal.text in _SMALLEST_INTS)


@_entry(("CONSTANT", *_CASTS, *_ARITH_OPS))
def _fold_entry(e: Expression, w: _Walk) -> Rule | None:
    # constant arithmetic holding a numeric: its value, as PostgreSQL computes it (a lone
    # literal DuckDB reads as PostgreSQL does, a decimal with its scale: only an exponent's)
    if (e.cls == "CONSTANT" and (e.literal is None or "e" not in e.literal.text.lower())) \
            or (e.cls == "FUNCTION" and not is_arith(e)):
        return None
    v = _constant(e, w.text, w.constants)
    return (lambda c, v=v: _folded(c.node, c.text, v)) if v is not None and v.is_numeric else None


@_entry(_CASTS, words=("numeric", "decimal"))
def _numeric_entry(e: Expression, w: _Walk) -> Rule | None:
    if _constant(e, w.text, w.constants) is None and _numeric_target(e, w.text):
        return _numeric_cast
    if _numeric_typmod_target(e, w.text) is not None:
        return _numeric_typmod_cast
    if _is_cast(e, w.text) and _NUMERIC_TYPMOD.fullmatch(_type_text(e.children[1], w.text)):
        return lambda c: _cast_checked(e.children[0], c, "numeric", None)  # (a boolean raises)
    return _mixed_scale_text if len(e.children) == 2 and _mixed_scales(e.children[0], w.text) and _type_text(
        e.children[1], w.text).split("(")[0].strip() in _TEXT_WORDS else None  # (another cast: its own rule)


# (NULL and a string literal read as reals, as in PostgreSQL; the real cast triggers it)
_when((*_ARITH_OPS, "COMPARISON"), _real_mixed, lambda e, w: _real_operator(e) is not None
      and _shows_real(e.children[0], w.text, w.reals) != _shows_real(e.children[1], w.text, w.reals)
      and not any(k.literal is not None and k.literal.kind in ("NULL_LITERAL", "STRING") for k in e.children))
# PostgreSQL's ^ is its power(): its domain errors, not DuckDB's NaN or infinity
_when(("^",), lambda c: f"{CHECKED_MATH['power']}({c.args[0]}, {c.args[1]})",
      lambda e, w: e.cls == "FUNCTION" and len(e.children) == 2, ops=("^",))
# PostgreSQL's prefix |/ and ||/ are its sqrt() (its domain error) and cbrt(); DuckDB has neither
_when(("|/",), lambda c: f"{CHECKED_MATH['sqrt']}({c.args[0]})",
      lambda e, w: e.cls == "FUNCTION" and len(e.children) == 1, ops=("|/",))
_when(("||/",), lambda c: f"cbrt({c.args[0]})", lambda e, w: e.cls == "FUNCTION" and len(e.children) == 1,
      ops=("||/",))
# DuckDB reads n ! as factorial(n); PostgreSQL 14 removed its postfix operators (a syntax error)
_when(("factorial",), _refuse("the postfix operator ! is not supported by colmz (PostgreSQL has none since "
                              "version 14): write factorial(n)"),
      lambda e, w: (t := w.token_at(e)[0]) is not None and not (t.kind in ("word", "qident")
                                                                and t.name == "factorial"), ops=("!",))
# (a row comparison is triggered by _MAY_COMPARE_ROWS, read in may_transform)
_entry(("COMPARISON", *_ROW_TESTS, "COMPARE_IN", "OPERATOR_NOT", "SUBQUERY"))(_node_rule)
# (and varchar(n), varying(n): may_transform reads the "(")
_entry(("TYPE", *_CASTS), words=("float", "float8", "float4", "real", "double", "bytea", "jsonb", "char",
                                 "character", "bpchar", "time", "timetz", *_TYPE_NAMES))(_type_rule)
_entry(("COLLATE",), words=("collate",))(_collate_rule)
for _key in ("CAST", "||", "to_jsonb", "to_json", "concat", "concat_ws", "format", "string_agg", "array_to_string"):
    _TABLE.setdefault(_key, []).insert(0, _mixed_column_text)  # (before the key's other entries)
_TRIGGER_WORDS.update(("to_jsonb", "to_json", "concat", "concat_ws", "format", "string_agg", "array_to_string"))
_when(("||",), _concat, lambda e, w: e.cls == "FUNCTION", ops=("||",))
_when(("LAMBDA",), _jsonb_arrow, lambda e, w: len(e.children) == 2, ops=("->",))
_when(("->>",), _jsonb_text_arrow, lambda e, w: e.cls == "FUNCTION" and len(e.children) == 2, ops=("->>",))


@_entry(("regexp_matches",), ops=_REGEXP_OPS)
def _regexp_entry(e: Expression, w: _Walk) -> Rule | None:
    t, _ = w.token_at(e)  # written as a call: refused by name
    written = t is not None and t.kind in ("word", "qident") and t.name == "regexp_matches"
    return _regexp_operator if e.cls == "FUNCTION" and e.name == ("regexp_matches",) and not written else None


_when(("OPERATOR_NOT",), _regexp_not, lambda e, w: len(e.children) == 1 and e.children[0].name == (
    "regexp_matches",) and (e.children[0].start, e.children[0].end) == (e.start, e.end))


# (may_transform reads "[" in context: sub-arrays, subscripts, slices, casts to arrays)
@_entry(("ARRAY_CONSTRUCTOR",))
def _array_entry(e: Expression, w: _Walk) -> Rule | None:
    if _array_shape(e) is None:
        return _ragged_array
    if not all(_is_list(k) for k in e.children) and any(
            is_array(k) or (k.cls == "COLUMN_REF" and (k.start, k.end) in w.arrays) for k in e.children):
        return _array_rows  # sub-arrays not all written as lists: their shapes known when it runs
    return None


@_entry(("ARRAY_EXTRACT", "ARRAY_SLICE"), ops=(":",))
def _subscript_entry(e: Expression, w: _Walk) -> Rule | None:
    if not e.children:
        return _array_slice if e.type == "ARRAY_SLICE" else None
    _check_subscript(e, w.text)
    inner = e.children[0]
    if e.type == "ARRAY_SLICE":
        return _column_slice if inner.cls == "COLUMN_REF" and (inner.start, inner.end) in w.arrays else _array_slice
    if inner.type == "ARRAY_SLICE":
        return _refuse("a subscript of an array slice (PostgreSQL reads a[lo:hi][i] as one subscript "
                       "per dimension) is not supported by colmz")
    return _subscript_chain(w.chains[id(e)]) if id(e) in w.chains else None


_when(_CASTS, _array_text_cast, lambda e, w: _is_cast(e, w.text) and e.children[0].literal is not None
      and e.children[0].literal.kind == "STRING" and e.children[1].start >= 0
      and w.text[e.children[1].start : e.end].rstrip(" )").endswith("]"))
_when(("row",), _row_value, lambda e, w: w.item and _is_row(e), words=("row",))
# A cast (not TRY_CAST) to a plain type of _CAST_TARGETS (not ``varchar(n)``, ``text[]``);
# (and ``::`` before one, read by may_transform)
_when(_CASTS, _cast, lambda e, w: _is_cast(e, w.text) and not e.children[1].children
      and _type_text(e.children[1], w.text) in _CAST_TARGETS, words=("cast",))
# interval / number, time - time, interval::time (colmz.sql.pgfuncs, with their triggers)
for _keys, _rule, _applies, _words, _ops in pgfuncs.OPERATORS:
    _when(_keys, _rule, lambda e, w, applies=_applies: applies(e, w.text), words=_words, ops=_ops)
for _op, _rule in jsonb.OPERATORS.items():  # (a rule may give None: not jsonb)
    _when((_op,), _rule, lambda e, w: e.cls == "FUNCTION", ops=("@>", "<@", "@"))
# jsonb - text (None for any other -)
_when(("-",), jsonb.MINUS, lambda e, w: e.cls == "FUNCTION" and len(e.children) == 2)
_when(_LIKES, _like, lambda e, w: len(e.children) == 2, words=("like", "ilike"), ops=_LIKES)


def _ilike_escape(c: Call) -> str:
    # ILIKE ... ESCAPE: as ILIKE, the C locale's ASCII folding (lower's macro) then LIKE. A
    # NOT ILIKE's node spans its NOT (DuckDB's NOT around it spans the same text).
    x, p, _ = c.arguments
    negated = "NOT" in c.text[x.end : p.start].upper().split()
    lower = CALL_MACROS["lower"]
    return f"({lower}({c.args[0]}) {'NOT ' if negated else ''}LIKE {lower}({c.args[1]}) ESCAPE {c.args[2]})"


_when(("ilike_escape",), _ilike_escape, lambda e, w: e.cls == "FUNCTION" and len(e.children) == 3
      and min(k.start for k in e.children) >= 0, words=("ilike",))


def _quantified_array(e: Expression, w: _Walk) -> Expression | None:
    # The array of x op ANY (array) -- DuckDB's subquery over unnest(array), written without
    # SELECT -- or of x op ALL (array), NOT of such a subquery: None for any other node.
    # The node's span must hold the array (an ALL's subquery spans x alone).
    if e.type == "OPERATOR_NOT" and len(e.children) == 1:
        e, whole = e.children[0], e
    else:
        whole = e
    q = e.subquery
    if not (e.cls == "SUBQUERY" and e.children and q is not None and q.from_ is None and len(q.items) == 1
            and q.items[0].name == ("unnest",) and len(q.items[0].children) == 1 and q.items[0].start >= 0):
        return None
    u = q.items[0]
    if not (whole.start <= u.start and u.end <= whole.end) or \
            w.text[whole.start : u.start].rstrip().upper().endswith("SELECT"):
        return None
    return None if u.children[0].type == "ARRAY_CONSTRUCTOR" else u.children[0]  # (ARRAY[..] is never NULL)


def _null_array_quantified(c: Call) -> str:
    # PostgreSQL's x op ANY/ALL of a NULL array is NULL; DuckDB's (an empty unnest) false/true
    n = c.node.children[0] if c.node.type == "OPERATOR_NOT" else c.node
    arr = n.subquery.items[0].children[0]
    return f"(CASE WHEN ({c.text_of(arr)}) IS NULL THEN NULL ELSE {c.text_of(c.node)} END)"


_when(("SUBQUERY", "OPERATOR_NOT"), _null_array_quantified, lambda e, w: _quantified_array(e, w) is not None,
      words=("any", "some", "all"))
def _constant_only(e: Expression) -> bool:
    # Whether ``e`` is made of literals, casts and arithmetic only (DuckDB folds it).
    return all(n.cls in ("CONSTANT", "CAST", "TYPE") or is_arith(n) for n in e.walk())


def _moved_constant(e: Expression) -> Expression | None:
    # The side of comparison ``e`` that DuckDB's optimizer rewrites: integer ``x + c``,
    # ``x - c``, ``x * c`` or ``-x`` compared with a constant becomes ``x`` compared with the
    # constant moved across (MoveConstantsRule), so the overflow PostgreSQL raises for the
    # arithmetic (``i + 1 > 0`` of the largest integer) never happens; None when neither is.
    if len(e.children) != 2 or e.type not in _COMPARISONS:
        return None
    for side, other in (e.children, e.children[::-1]):
        if is_arith(side) and side.name[0] in ("+", "-", "*") and _constant_only(other) and (
                len(side.children) == 1 or any(_constant_only(k) for k in side.children)):
            return side
    return None


def _unmoved(c: Call) -> str:
    # The arithmetic behind greatest() of one argument, which DuckDB's rule does not see through.
    a, b = c.node.children
    ta, tb = c.text_of(a), c.text_of(b)
    if a is _moved_constant(c.node):
        ta = f"greatest({ta})"
    else:
        tb = f"greatest({tb})"
    return f"({ta}) {_COMPARISONS[c.node.type]} ({tb})"


_when(("COMPARISON",), _unmoved, lambda e, w: _moved_constant(e) is not None)




def _extract_divided(e: Expression, w: _Walk) -> bool:
    # Whether division ``e`` has an extract among its operands' leaves: PostgreSQL's extract
    # is a numeric, DuckDB's of a whole unit a BIGINT (extract(day FROM ts) / 2 is 0.5, not 0)
    return e.cls == "FUNCTION" and len(e.children) == 2 and any(
        n.cls == "FUNCTION" and n.name == ("date_part",) and n.start >= 0
        and w.text[n.start : n.start + 7].lower() == "extract" for k in e.children for n in arith_leaves(k))


# (the dividend made a DECIMAL: DuckDB divides a decimal as a double, and a double stays one)
_when(("/", "//"), lambda c: f"(({c.args[0]}) + {NUMERIC_CAST}) / ({c.args[1]})", _extract_divided,
      words=("extract",))
_when(("%",), lambda c: f"{MOD}({c.args[0]}, {c.args[1]})", lambda e, w: e.cls == "FUNCTION"
      and len(e.children) == 2, ops=("%",))
# PostgreSQL shifts an integer by its count modulo the width (1 << 32 is 1, 1 >> 32 is 1);
# DuckDB raises or gives 0: only a constant count below 32 means the same in both.
_when(("<<", ">>"), _refuse("a shift by a count that is not a constant from 0 to 31 is not supported by colmz "
                            "(PostgreSQL takes the count modulo the integer's width, DuckDB does not)"),
      lambda e, w: e.cls == "FUNCTION" and len(e.children) == 2 and not (
          e.children[1].literal is not None and e.children[1].literal.kind == "INTEGER"
          and 0 <= e.children[1].literal.value < 32), ops=("<<", ">>"))


#: Function name as written (lower case) -> rule: the DuckDB text of the call's span, or
#: None to keep the call as written (the calls inside it still rewritten); a rule may raise
#: ``UnsupportedSQL``.
CALLS: dict[str, Rule] = {
    "btrim": _rename("trim"),  # DuckDB's trim(string[, characters]) is PostgreSQL's btrim
    "lpad": _pad, "rpad": _pad, "to_hex": _to_hex, "extract": _extract,
    "substr": _substr, "substring": _substr, "round": _round, "generate_series": _generate_series,
    "every": _rename("bool_and"),  # PostgreSQL's every is bool_and
    "array_to_string": _third_argument, "string_to_array": _third_argument, "date_trunc": _date_trunc,
    "regexp_replace": _regexp_replace, "chr": _macro(CHR, 1), "sign": _sign, "date_part": _date_part, "unnest": _unnest,
    "split_part": _macro(SPLIT_PART, 3), "string_agg": _string_agg,
    # PostgreSQL's meaning where DuckDB's namesake answers otherwise (NaN or an infinity
    # where PostgreSQL raises; 0 for an empty array's length): colmz's macro.
    **{name: _rename(macro) for name, macro in CALL_MACROS.items()},
    **dict.fromkeys(_POLYMORPHIC, _polymorphic),
    "array_agg": lambda c: f"{AGG_ARRAYS}({c.by(lambda c: _polymorphic(c) or _sorted_distinct(c))})",
    "pg_typeof": _refuse("pg_typeof() is not supported by colmz (DuckDB names its own types)"),
    "ntile": _ntile,
    "corr": _null_at_zero("regr_sxx", "regr_syy"), "regr_slope": _null_at_zero("regr_sxx"),
    "sum": _sum_of_real, "concat": _concat_call, "concat_ws": _concat_call, "avg": _avg, "mod": _macro(MOD, 2),
    "percentile_cont": lambda c: None if c.table else f"{PERCENTILE_CONT}({c.by(_percentile)})",
    "percentile_disc": _percentile,
    # PostgreSQL's jsonb functions, initcap, regexp_match (colmz.sql.jsonb; its operators
    # are entries below, the looser chain of ``->`` _jsonb_arrow's)
    **jsonb.CALLS,
    **pgfuncs.CALLS,  # PostgreSQL's functions DuckDB lacks: to_char, date_bin, justify_*, quote_*
}


def _named_call(written: str) -> Finder:
    # The entry of a call of CALLS written as ``written`` (a word or quoted name before "("):
    # only the node DuckDB made of it (``f(x) * 2`` is a ``*`` node starting at ``f``).
    rule = CALLS[written]

    def finder(e: Expression, w: _Walk) -> Rule | None:
        t, after = w.token_at(e)
        return rule if after is not None and t.kind in ("word", "qident") and after.text == "(" \
            and t.name == written else None

    return finder


#: The finders of CALLS' entries, each with the name it matches as written.
_CALL_NAMES: dict[Finder, str] = {}
for _written_name in CALLS:
    _finder = _named_call(_written_name)
    _CALL_NAMES[_finder] = _written_name
    # (sum's rule reads a real argument only, whose cast writes real or float4)
    _entry((_ALIASES.get(_written_name, _written_name),),
           words=() if _written_name == "sum" else (_written_name,))(_finder)


def _rule_of(e: Expression, w: _Walk) -> tuple[Rule | None, str]:
    # The rule of node ``e`` (and, for a call of CALLS, its name as written): the first the
    # entries of its key give -- a call's (or window's) name in lower case (a qualified
    # name has none), an operator node's DuckDB type (``COMPARE_IN``, ``ARRAY_SLICE``, ...),
    # any other node's DuckDB class (``CAST``, ``COMPARISON``, ...): types and classes are
    # upper case, never a call's key. No entry takes a node whose place is unknown.
    cls = e.cls
    if cls == "FUNCTION" or cls == "WINDOW":
        if len(e.name) != 1 or e.start < 0:
            return None, ""
        if w.capitals:
            w.quoted_capital(e)  # (no entry takes a quoted name with capitals: every one is lower case)
        finders = _TABLE.get(e.name[0].lower())
    else:
        finders = _TABLE.get(e.type if cls == "OPERATOR" else cls)
        if e.start < 0:
            return None, ""
    if finders is not None:
        for finder in finders:
            if (rule := finder(e, w)) is not None:
                return rule, _CALL_NAMES.get(finder, "")
    return None, ""


#: Words that may make a node of the table (lower case), as its entries name them
#: (see :func:`may_transform`).
_TREE_WORDS = frozenset(_TRIGGER_WORDS)
#: The tokens of an ASCII text :func:`may_transform` tests: words (in upper case) of
#: :data:`_TREE_WORDS` and ``varchar``/``varying``, the operators the entries name and those
#: it reads in context (``(``, ``+ - * /``), numbers, quoted names, strings.
_MAY_WORDS = frozenset({*(w.upper() for w in _TREE_WORDS), "VARCHAR", "VARYING"})
_MAY_OPS = frozenset(_TRIGGER_OPS)
#: String tokens a date or timestamp's input may read otherwise in DuckDB (:func:`_datetime_text`).
_MAY_TEXTS = _MAY_OPS | {"::", "(", "[", *_PAIR_OPS}
_TESTED_KINDS = frozenset({"number", "qident", "string"})
_CONSTANT_WORDS = frozenset({"NULL", "TRUE", "FALSE"})
if not all(w.isascii() and w == w.lower() for w in _TREE_WORDS):  # pragma: no cover - the sets above need it
    raise AssertionError("_TREE_WORDS must be lower-case ASCII")


def apply_transforms(text: str, toks, relations: Relations = ()) -> str:
    """``text`` with every node of the table rewritten by its rule, once, bottom-up (``toks``
    are its tokens); the text itself when it holds none, or DuckDB cannot parse it.
    ``relations``: the array columns of the tables it reads, as
    :func:`colmz.sql.typing_pass.array_columns` takes them."""
    if not may_transform(text, toks):
        return text
    offset = 0
    try:
        stmts = parse_tree(text)
    except SQLError:
        try:  # an expression (a predicate) rather than a query
            stmts, offset = parse_tree("SELECT " + text), 7
        except SQLError:
            return text
    wrapped = " " * offset + text
    derived: dict[int, str] = {}
    realiased: dict[int, tuple[int, str]] = {}
    if _may_name_derived(toks):
        for q in stmts:
            _derived_items(q, derived, realiased, wrapped, toks, offset)
    w = _Walk(stmts, wrapped, toks, offset, relations)
    starts, constants = w.starts, w.constants
    found: list[tuple[Expression, Rule, str, bool, str]] = []

    queries = list(stmts)  # the queries left to walk: subqueries join as the walk meets them

    def visit(e: Expression, table: bool, inside: str, arith: bool = False, item: bool = False) -> None:
        if e.subquery is not None:
            queries.append(e.subquery)
        w.item = item
        rule, name = _rule_of(e, w)
        here = is_arith(e)  # (its operands are visited as inside arithmetic)
        if here and not arith and (unchecked := w.unchecked)[2] and id(e) not in unchecked[0] and not (
                rule is not None and _constant(e, wrapped, constants) is not None):
            leaves = arith_leaves(e)
            if (unchecked[1] and len(leaves) >= 2 and all(n.start >= 0 for n in leaves)) or (
                    leaves and any(_shows_float(n, wrapped) for leaf in leaves for n in leaf.walk())):
                rule = _float_checked(rule, leaves)
        if derived and id(e) in derived:
            rule = _with_alias(rule, derived[id(e)])
        if realiased and id(e) in realiased:  # the item and its alias, the alias replaced
            end, mark = realiased[id(e)]
            found.append((dataclasses.replace(e, end=end), _realias(e.start, e.end, mark), "", False, ""))
        if rule is not None:
            found.append((e, rule, name, table, inside))
        kids = e.children
        if not kids:
            return
        cls = e.cls
        if cls == "CASE" or e.type in _CONDITIONAL:
            inside = _CONDITIONAL.get(e.type, "CASE")
        elif cls == "FUNCTION" and e.name and e.name[-1].lower() in _CONDITIONAL_CALLS:
            inside = e.name[-1].lower() + "()"
        # the IN of a NOT IN is rewritten with it (one span): its operands are visited
        if rule is not None and (rule is _row_in or rule is _regexp_not) and e.type == "OPERATOR_NOT":
            kids = kids[0].children
            if e.children[0].subquery is not None:
                queries.append(e.children[0].subquery)
        for c in kids:
            visit(c, False, inside, here)

    while queries:  # every query of the statements (as all_queries), each root once
        d = queries.pop()
        queries.extend(cte for _, cte in d.ctes)
        queries.extend(d.children)
        for e in d.items:
            visit(e, False, "", item=True)
        for e in (*d.group_by, *(e for m in d.modifiers for e in m.expressions),
                  *(x for x in (d.where, d.having, d.qualify) if x is not None)):
            visit(e, False, "")
        for t in table_refs(d):
            if t.subquery is not None:
                queries.append(t.subquery)
            for e in t.expressions:
                if t.type == "TABLE_FUNCTION" and e.cls == "FUNCTION" and e.start > 0:
                    e = _table_call(e, wrapped, toks, starts, offset)
                visit(e, t.type == "TABLE_FUNCTION", "")
    if not found:
        return text
    found.sort(key=lambda f: (f[0].start, -f[0].end))
    nodes = {id(f[0]): f for f in found}

    def render(lo: int, hi: int, skip: Expression | None = None) -> str:
        # wrapped[lo:hi] with every outermost found node inside it rewritten.
        out, pos = [], lo
        for e, *_ in found:
            if e is skip or e.start < pos or e.end > hi:
                continue
            out.append(wrapped[pos : e.start])
            out.append(rewrite(e))
            pos = e.end
        out.append(wrapped[pos:hi])
        return "".join(out)

    def rewrite(e: Expression) -> str:
        _, rule, name, table, inside = nodes[id(e)]

        def node_text(n: Expression, skip_name: bool = False) -> str:
            if n is e:
                if not skip_name:
                    return render(e.start, e.end, skip=e)
                i = bisect.bisect_left(starts, e.start - offset)
                return render(toks[i].end + offset, e.end, skip=e)
            return render(n.start, n.end) if n.start >= 0 else _written(wrapped, n)

        out = rule(Call(name, e, wrapped, node_text, table, inside, render, lambda: w.numeric))
        return render(e.start, e.end, skip=e) if out is None else out

    return render(offset, len(wrapped))


def _table_call(e: Expression, wrapped: str, toks, starts: list[int], offset: int) -> Expression:
    # A call in FROM spanning its name to its ")": DuckDB places one of one argument at its
    # "(", one of several at its first argument (up to the last)
    i = bisect.bisect_left(starts, e.start - offset)
    if wrapped[e.start] != "(" and i > 1 and toks[i - 1].text == "(" and (j := closing(toks, i - 1)) > 0:
        e, i = dataclasses.replace(e, start=toks[i - 1].start + offset, end=toks[j].end + offset), i - 1
    if i > 0 and wrapped[e.start] == "(" and toks[i - 1].end + offset == e.start \
            and toks[i - 1].kind in ("word", "qident"):
        e = dataclasses.replace(e, start=toks[i - 1].start + offset)
    return e


def _body_column_list(body: Query, lists: list[tuple[int, int, tuple[str, ...]]]) -> tuple[str, ...]:
    # The column list of the CTE whose body is ``body`` (``WITH c(x) AS (...)``: its columns
    # renamed by position), from ``lists`` (cte_definitions' body spans and lists): the
    # innermost definition holding the body's first select item; () when none
    while not body.items and body.children:
        body = body.children[0]
    at = body.items[0].start if body.items else -1
    found = [(end - start, cols) for start, end, cols in lists if start <= at < end]
    return min(found)[1] if found else ()


def _numeric_names(stmts, text: str) -> frozenset[str]:
    # The names (lower case) of FROM subqueries' and CTEs' columns whose item may be a
    # PostgreSQL numeric DuckDB computes as a double (translate's numeric_source of its
    # text): printed through the name, it is refused when it runs as a double, as printed
    # as the item it would be (PostgreSQL prints the numeric's scale).
    from colmz.sql.translate import numeric_source  # translate imports this module

    lists = [(start, end, cols) for _, cols, start, end, *_ in cte_definitions(text)]
    out: set[str] = set()
    for d in (d for q in stmts for d in all_queries(q)):
        subs = [(s, _body_column_list(s, lists)) for _, s in d.ctes]
        subs += [(t.subquery, t.column_aliases) for t in table_refs(d) if t.subquery]
        while subs:
            s, renames = subs.pop()
            subs.extend((b, renames) for b in s.children)  # a set operation's branches
            for i, e in enumerate(s.items):
                if e.start >= 0 and numeric_source(e, text):
                    out.add(item_name(e, i, renames))
    return frozenset(n.lower() for n in out if n)
