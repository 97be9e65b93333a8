"""Translate's table of transforms: PostgreSQL's meaning as DuckDB text, on DuckDB's parse tree.

Each entry maps a kind of node to a rule giving the PostgreSQL-faithful DuckDB text of the
node's span (as sqlglot's dialects map an expression class to its rendering):

* :data:`CALLS`, by the function name as written: ``btrim`` is DuckDB's ``trim``,
  two-argument ``lpad``/``rpad`` pad with spaces, ``to_hex`` prints lower-case digits and an
  ``int4`` in 32 bits, ``extract(second ...)`` keeps the fraction, ``substr``/``substring``
  count positions before the string as PostgreSQL does, ``round`` rounds by its argument's
  type and ``round(x, n)`` has scale ``n``, ``generate_series`` in an expression is a row
  per value (``unnest``; refused inside ``CASE``/``coalesce()`` ...), ``every`` is
  ``bool_and``, the math functions whose domain PostgreSQL checks and ``array_length`` are
  colmz's macros (:data:`CALL_MACROS`), a third argument of ``array_to_string`` is refused.
* Row comparisons (a comparison, ``IN`` list or ``IS [NOT] NULL`` of ``ROW``/``(a, b)``
  nodes): field by field, as PostgreSQL compares rows; nested rows and subqueries refused.
* LIKE/ILIKE nodes get PostgreSQL's default backslash ``ESCAPE``.
* Types: ``float`` (a ``TYPE`` node, in a cast or a typed literal) is ``DOUBLE``, ``jsonb``
  ``JSON`` and ``mz_timestamp`` ``UBIGINT`` (a ``TYPE`` node: not an alias or column so
  named); a cast to ``bytea`` of a string literal reads PostgreSQL's hex input (any other
  is refused).
* Numbers: a constant arithmetic subtree holding a ``numeric`` (a decimal literal, a
  ``::numeric``) is folded into one literal with PostgreSQL's scale
  (:mod:`colmz.sql.numeric`'s arithmetic); an unconstrained ``::numeric`` of anything else
  is ``x +`` :data:`NUMERIC_CAST`.

:func:`apply_transforms` reads the tree (:func:`colmz.sql.tree.parse_tree`), so an argument,
a field or an operand is a child node, not a stretch of tokens delimited by counting
parentheses; whether a call is a ``FROM`` item or sits inside ``CASE`` is read off the tree.
The text is rewritten once, bottom-up: a rule receives its children's texts with the nodes
found inside them already rewritten, so nested constructs need no second reading.

Invariants:

* The tree is read only when the text may hold a node of the table (:func:`may_transform`,
  one pass over the text's cached tokens). A text without one
  costs that scan, so the front end's per-statement cost is unchanged for it; a text with
  one costs DuckDB's ``json_serialize_sql`` of it once (its tree is cached per text).
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
import re
from collections.abc import Callable

from colmz.sql.build import BYTEA_IN, RESERVED_PREFIX
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.numeric import MAX_DIGITS, PgNumeric, combine, literal_text, parse_literal
from colmz.sql.tree import Expression, Query, Table, parse_tree

__all__ = ["CALLS", "CALL_MACROS", "CHECKED_MATH", "NUMERIC_CAST", "Call", "apply_transforms", "may_transform"]


class Call:
    """A node found in the tree, as its rule sees it: ``node``; for a call, ``name`` as
    written (lower case; ``""`` for other nodes), ``args`` the texts of its arguments (the
    nodes found inside them already rewritten), ``window``
    whether it has ``OVER``, ``table`` whether it is a ``FROM`` item, ``inside`` the
    conditional construct around it in its own query (``CASE``, ``coalesce()``, ...) or
    ``""``; ``text`` the text the spans index."""

    __slots__ = ("_render", "inside", "name", "node", "table", "text", "window")

    def __init__(self, name: str, node: Expression, text: str, render, table: bool, inside: str) -> None:
        self.name, self.node, self.text, self._render = name, node, text, render
        self.window = node.cls == "WINDOW"
        self.table, self.inside = table, inside

    @property
    def arguments(self) -> tuple[Expression, ...]:
        # DuckDB serializes a call's FILTER and ORDER BY after its arguments
        n = self.node
        extra = (n.filter is not None) + len(n.order_by)
        return n.children[: len(n.children) - extra] if extra else n.children

    @property
    def plain(self) -> bool:
        """An ordinary scalar call: no ``OVER``, ``FILTER``, ``ORDER BY``, ``DISTINCT``, not a
        ``FROM`` item (its span is the call's whole text)."""
        n = self.node
        return not (self.window or self.table or n.filter is not None or n.order_by or n.distinct)

    @property
    def args(self) -> list[str]:
        return [self._render(c) for c in self.arguments]

    def text_of(self, node: Expression) -> str:
        """The text of ``node`` (under this one), with the nodes found inside it rewritten."""
        return self._render(node)

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

#: Math functions whose domain PostgreSQL checks (it raises where DuckDB answers NaN or an
#: infinity): a call is a call of colmz's macro of the same arguments
#: (:data:`colmz.sql.translate.MATH_MACROS`).
CHECKED_MATH = {f: RESERVED_PREFIX + f for f in ("ln", "log", "log10", "sqrt", "exp", "power", "pow")}
#: Calls made calls of a colmz macro (PostgreSQL's ``array_length`` of an empty array is NULL).
CALL_MACROS = {**CHECKED_MATH, "array_length": RESERVED_PREFIX + "array_length"}


def _rename(new: str) -> Rule:
    return lambda c: c.renamed(new)


def _pad(c: Call) -> str | None:  # PostgreSQL pads with spaces by default
    if not c.plain or len(c.arguments) != 2:
        return None
    args = c.args
    return f"{c.name}({args[0]}, {args[1]}, ' ')"


def _to_hex(c: Call) -> str | None:
    # PostgreSQL prints lower-case digits, and an int4 (or int2) in 32 bits (-1 is ffffffff)
    if not c.plain or len(c.arguments) != 1:
        return None
    x = c.args[0]
    if x.strip().isdigit():
        return f"lower(to_hex({x}))"
    return (f"lower(to_hex(CASE WHEN typeof({x}) IN ('INTEGER', 'SMALLINT', 'TINYINT') AND {x} < 0 "
            f"THEN CAST({x} AS BIGINT) + 4294967296 ELSE {x} END))")


def _extract(c: Call) -> str | None:
    # PostgreSQL's seconds keep their fraction; DuckDB's second is whole.
    a = c.arguments
    if c.plain and len(a) == 2 and a[0].literal is not None and a[0].literal.text.lower() == "second":
        return f"(date_part('microsecond', {c.args[1]}) / 1000000.0)"
    return None


_NEGATIVE_LENGTH = "error('negative substring length not allowed')"


def _substr(c: Call) -> str | None:
    # PostgreSQL's substr(s, a, n) is the characters at positions a .. a+n-1 that exist (a
    # position before the first counts, holding nothing); DuckDB counts a < 1 from the end.
    # substring(s FROM a FOR n) is DuckDB's node of the same three arguments.
    a = c.arguments
    if not c.plain or len(a) not in (2, 3):
        return None
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


def _round(c: Call) -> str | None:
    if not c.plain or len(c.arguments) not in (1, 2):
        return None
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
    if kind == "avg":
        # PostgreSQL's avg of integers or numeric is numeric (DuckDB's is DOUBLE); of a
        # double, double: the argument's type decides.
        inner = x[x.index("(") + 1 : x.rindex(")")]
        return (f"(CASE WHEN typeof(min({inner})) IN ('DOUBLE', 'FLOAT') THEN round_even({x}, 0) "
                f"ELSE round({x}) END)")
    return (f"(CASE WHEN typeof({x}) IN ('DOUBLE', 'FLOAT') THEN round_even({x}, 0) "
            f"ELSE round({x}) END)")


_FLOAT_TYPES = frozenset({"FLOAT8", "FLOAT4", "FLOAT", "REAL", "DOUBLE"})


def _type_kind(t: Expression, text: str) -> str | None:
    words = text[t.start : t.end].replace("(", " ").upper().split() if t.start >= 0 else []
    if any(w in _FLOAT_TYPES for w in words):
        return "double"
    return "numeric" if words and words[0] in ("NUMERIC", "DECIMAL") else None


def _round_kind(e: Expression, text: str) -> str | None:
    # "numeric", "double", "avg" (a whole avg call) or None (DuckDB's typeof decides).
    if e.cls == "CONSTANT" and e.literal is not None and e.literal.kind not in (
            "STRING", "BOOLEAN", "NULL_LITERAL", "BLOB"):
        return "numeric"
    if e.cls == "CAST" and len(e.children) == 2 and (kind := _type_kind(e.children[1], text)):
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
            stack.extend((k, False) for k, _ in _subroots(n.subquery))
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


def _generate_series(c: Call) -> str | None:
    if not c.plain:
        return None
    if c.inside:
        raise UnsupportedSQL(f"generate_series() inside {c.inside} is not supported by colmz "
                             "(PostgreSQL does not allow set-returning functions there)")
    # A set-returning function in PostgreSQL (a row per value); DuckDB's scalar
    # generate_series returns one list, which unnest spreads into those rows.
    return f"unnest(generate_series({', '.join(c.args)}))"


def _third_argument(c: Call) -> str | None:
    if len(c.arguments) == 3:
        raise UnsupportedSQL(f"{c.name}() with a third argument (the text of NULL elements) is "
                             "not supported by colmz (DuckDB has no such argument)")
    return None


#: Function name as written (lower case) -> rule: the DuckDB text of the call's span, or
#: None to keep the call as written (the calls inside it still rewritten); a rule may raise
#: ``UnsupportedSQL``.
CALLS: dict[str, Rule] = {
    "btrim": _rename("trim"),  # DuckDB's trim(string[, characters]) is PostgreSQL's btrim
    "lpad": _pad, "rpad": _pad, "to_hex": _to_hex, "extract": _extract,
    "substr": _substr, "substring": _substr, "round": _round, "generate_series": _generate_series,
    "every": _rename("bool_and"),  # PostgreSQL's every is bool_and
    "array_to_string": _third_argument, "string_to_array": _third_argument,
    # PostgreSQL's meaning where DuckDB's namesake answers otherwise (NaN or an infinity
    # where PostgreSQL raises; 0 for an empty array's length): colmz's macro.
    **{name: _rename(macro) for name, macro in CALL_MACROS.items()},
}

#: The name of DuckDB's node for a call written otherwise: a node is the call written at its
#: start only when its own name is the one written (``f(x) * 2`` is a ``*`` node there).
_ALIASES = {"extract": "date_part"}

#: A conditional construct around a set-returning call: PostgreSQL refuses one there.
_CONDITIONAL = {"OPERATOR_COALESCE": "coalesce()", "CASE_EXPR": "CASE"}
_CONDITIONAL_CALLS = {"nullif", "greatest", "least"}


def may_transform(text: str, toks) -> bool:
    """Whether ``text`` (whose tokens are ``toks``) may hold a node of the table: a word
    naming a call of :data:`CALLS`, ``LIKE``/``ILIKE``/``~~``, ``numeric``/``decimal``,
    ``float``/``bytea``, a number with a point or exponent, or ``)`` before a comparison or
    ``IS NULL`` (a superset: the tree decides). One pass over the cached tokens; the tree is
    read only when this holds.

    >>> from colmz.sql.tokens import tokenize
    >>> [may_transform(s, tokenize(s)) for s in ("SELECT t1.x FROM t1", "SELECT lpad(x, 2)")]
    [False, True]
    """
    for i, t in enumerate(toks):
        k = t.kind
        if k == "word":
            if t.text.lower() in _TREE_WORDS:
                return True
        elif k == "number":
            if "." in t.text or "e" in t.text or "E" in t.text:
                return True
        elif k == "qident":
            if t.name in CALLS:
                return True
        elif k == "op" and (t.text in _LIKES or (t.text == "::" and i + 1 < len(toks)
                                                 and toks[i + 1].text.lower() in _CAST_TARGETS)):
            return True
    return _MAY_COMPARE_ROWS.search(text) is not None


def _queries(q: Query, out: list) -> None:
    # Every expression root of the query, with whether it is a FROM item's call.
    for _, cte in q.ctes:
        _queries(cte, out)
    for c in q.children:
        _queries(c, out)
    out.extend((e, False) for e in q.items)
    if q.from_ is not None:
        _tables(q.from_, out)
    for e in (q.where, q.having, q.qualify):
        if e is not None:
            out.append((e, False))
    out.extend((e, False) for e in q.group_by)
    for m in q.modifiers:
        out.extend((e, False) for e in m.expressions)


def _tables(t: Table, out: list) -> None:
    for c in t.children:
        _tables(c, out)
    if t.subquery is not None:
        _queries(t.subquery, out)
    out.extend((e, t.type == "TABLE_FUNCTION") for e in t.expressions)


# ----------------------------------------------------------------------------- rows

#: A text that may hold a row comparison: ``)`` then a comparison, ``IN`` or ``IS [NOT]
#: NULL`` (a superset; the tree decides).
_MAY_COMPARE_ROWS = re.compile(
    r"\)\s*(=|<>|!=|<=|>=|<|>|in\b|not\s+in\b)\s*(\(|row\b)|\)\s*is\s+(not\s+)?null\b", re.IGNORECASE)
_COMPARISONS = {"COMPARE_EQUAL": "=", "COMPARE_NOTEQUAL": "<>", "COMPARE_LESSTHAN": "<",
                "COMPARE_GREATERTHAN": ">", "COMPARE_LESSTHANOREQUALTO": "<=",
                "COMPARE_GREATERTHANOREQUALTO": ">="}
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


#: Volatile functions: a call gives another value each time it is evaluated.
_VOLATILE = frozenset({"random", "gen_random_uuid", "uuid", "nextval", "setseed"})


def _once(row: Expression) -> None:
    # The expansion repeats these fields; PostgreSQL evaluates each once.
    for f in row.children:
        for n in f.walk():
            if n.cls == "FUNCTION" and n.name and n.name[-1].lower() in _VOLATILE:
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


def _row_subquery(c: Call) -> None:
    raise UnsupportedSQL("row comparisons with a subquery are not supported by colmz")


def _node_rule(e: Expression, text: str) -> Rule | None:
    # The rule of a row comparison node of the tree (None: none applies).
    kids = e.children
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

_NUMERIC_TYPES = ("numeric", "decimal")
_ARITHMETIC = {"+": "+", "-": "-", "*": "*", "/": "/", "//": "/"}  # DuckDB names PostgreSQL's / "//"
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
    if e.cls != "CAST" or len(e.children) != 2 or e.children[1].children:
        return False
    t = e.children[1]
    return (t.start >= 0 and text[t.start : t.end].strip().lower() in _NUMERIC_TYPES
            and not text[e.start : e.start + 8].upper().startswith("TRY_CAST"))


def _constant(e: Expression, text: str) -> PgNumeric | None:
    """The value of ``e`` as PostgreSQL computes it when ``e`` is constant arithmetic --
    number literals, ``+ - * /``, unconstrained ``numeric`` casts -- else None (also for a
    division by zero or an integer overflow, left for DuckDB to raise)."""
    try:
        if e.cls == "CONSTANT":
            lit = e.literal
            if lit is None or lit.kind in ("STRING", "BOOLEAN", "NULL_LITERAL", "BLOB") or not lit.text:
                return None
            return parse_literal(lit.text)
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0] in _ARITHMETIC and not (
                e.filter is not None or e.order_by or e.distinct):
            vals = [_constant(c, text) for c in e.children]
            if None in vals:
                return None
            if len(vals) == 1 and e.name[0] in "+-":
                v = vals[0]
                return v if e.name[0] == "+" else PgNumeric(v.value.copy_negate(), v.scale, v.bits)
            return combine(_ARITHMETIC[e.name[0]], *vals) if len(vals) == 2 else None
        if _numeric_target(e, text):
            v = _constant(e.children[0], text)
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
    if lit is not None and lit.kind == "NULL_LITERAL":
        return "CAST(NULL AS DECIMAL(38,0))"
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
    if not (x.cls in ("COLUMN_REF", "CONSTANT", "CAST", "SUBQUERY", "CASE")
            or (x.cls in ("FUNCTION", "WINDOW") and len(x.name) == 1 and x.name[0].isidentifier())):
        operand = f"({operand})"  # an operator's result: its parentheses are outside its span
    return f"({operand} + {NUMERIC_CAST})"


# ----------------------------------------------------------------------------- LIKE

#: DuckDB's nodes of LIKE, NOT LIKE, ILIKE, NOT ILIKE (and PostgreSQL's ``~~`` operators).
_LIKES = frozenset({"~~", "!~~", "~~*", "!~~*"})


def _like(c: Call) -> str | None:
    # PostgreSQL's LIKE escapes with a backslash by default; DuckDB's has no escape. An
    # ESCAPE clause makes another node (like_escape); a literal pattern without a backslash
    # means the same under either.
    pattern = c.node.children[1]
    if pattern.literal is not None and pattern.literal.kind == "STRING" and "\\" not in pattern.literal.text:
        return None
    return c.text_of(c.node) + " ESCAPE '\\'"


# ----------------------------------------------------------------------------- types


def _type_text(t: Expression, text: str) -> str:
    return text[t.start : t.end].strip().lower() if t.start >= 0 else ""


def _double(c: Call) -> str:
    return "DOUBLE"  # PostgreSQL's float is float8; DuckDB's FLOAT is 4 bytes


def _bytea(c: Call) -> str:
    # PostgreSQL's bytea input reads hex digits after \x (DuckDB's cast reads \xNN escapes,
    # so '\x0aff' would be three bytes): a string literal goes through BYTEA_IN.
    x, t = c.node.children
    if not t.children and x.literal is not None and x.literal.kind == "STRING" \
            and not c.text[c.node.start : c.node.start + 8].upper().startswith("TRY_CAST"):
        return f"{BYTEA_IN}({_written(c.text, x)})"
    raise UnsupportedSQL("a cast to bytea of anything but a string literal is not supported by colmz "
                         "(PostgreSQL reads text as hex digits after \\x; DuckDB reads \\xNN escapes)")


#: Casts whose PostgreSQL meaning DuckDB's cast lacks: to text (a double's digits, an
#: interval's words), to boolean (PostgreSQL's words) and to an integer (digits only).
_CAST_TARGETS = frozenset({"text", "varchar", "string", "bool", "boolean", "int", "integer", "int4",
                           "bigint", "int8", "smallint", "int2"})
#: Where a text may hold one of them (a superset: the tree decides).
_MAY_CAST = re.compile(r"::\s*(text|varchar|string|bool|int|bigint|smallint)|\bcast\s*\(", re.IGNORECASE)


def _cast(c: Call) -> str | None:
    from colmz.sql.translate import cast_rewrite  # translate imports this module

    x, t = c.node.children
    return cast_rewrite(c.text_of(x), _type_text(t, c.text).upper())


#: Type names DuckDB spells otherwise: colmz stores jsonb as JSON text and Materialize's
#: mz_timestamp as an unsigned 64-bit integer.
_TYPE_NAMES = {"jsonb": "JSON", "mz_timestamp": "UBIGINT"}


def _type_rule(e: Expression, text: str) -> Rule | None:
    # ``float`` (not ``float(p)``) is DOUBLE; a cast to bytea reads PostgreSQL's input.
    if e.cls == "TYPE" and _type_text(e, text) == "float" and all(c.cls == "TYPE" for c in e.children):
        return _double
    if e.cls == "TYPE" and not e.children and (new := _TYPE_NAMES.get(_type_text(e, text))):
        return lambda c: new
    if e.cls == "CAST" and len(e.children) == 2 and _type_text(e.children[1], text) == "bytea":
        return _bytea
    return None


def _cast_rule(e: Expression, text: str) -> Rule | None:
    # A cast (not TRY_CAST) to a plain type of _CAST_TARGETS (not ``varchar(n)``, ``text[]``).
    if e.cls == "CAST" and len(e.children) == 2 and not e.children[1].children \
            and _type_text(e.children[1], text) in _CAST_TARGETS \
            and not text[e.start : e.start + 8].upper().startswith("TRY_CAST"):
        return _cast
    return None


# ----------------------------------------------------------------------------- applying the table

#: Words that may make a node of the table (see :func:`may_transform`).
_TREE_WORDS = frozenset(CALLS) | {"like", "ilike", "numeric", "decimal", "float", "bytea", "cast", *_TYPE_NAMES}


def apply_transforms(text: str, toks) -> str:
    """``text`` with every node of the table rewritten by its rule, once, bottom-up (``toks``
    are its tokens); the text itself when it holds none, or DuckDB cannot parse it."""
    if not may_transform(text, toks):
        return text
    rows = _MAY_COMPARE_ROWS.search(text) is not None
    types = any(t.upper in ("FLOAT", "BYTEA", "JSONB", "MZ_TIMESTAMP") for t in toks)
    likes = any(t.upper in ("LIKE", "ILIKE") or (t.kind == "op" and t.text in _LIKES) for t in toks)
    numeric = any((t.kind == "number" and ("." in t.text or "e" in t.text.lower()))
                  or t.upper in ("NUMERIC", "DECIMAL") for t in toks)
    casts = _MAY_CAST.search(text) is not None
    offset = 0
    try:
        stmts = parse_tree(text)
    except SQLError:
        try:  # an expression (a predicate) rather than a query
            stmts, offset = parse_tree("SELECT " + text), 7
        except SQLError:
            return text
    roots: list = []
    for q in stmts:
        _queries(q, roots)
    wrapped = " " * offset + text
    starts = [t.start for t in toks]
    found: list[tuple[Expression, Rule, str, bool, str]] = []

    def rule_of(e: Expression) -> tuple[Rule | None, str]:
        # The table's entry for node ``e`` (and, for a call, its name as written).
        if e.start < 0:
            return None, ""
        if numeric:
            v = _constant(e, wrapped)
            if v is not None and v.is_numeric and not (e.cls == "CONSTANT" and "e" not in e.literal.text.lower()):
                # constant arithmetic holding a numeric: its value, as PostgreSQL computes it
                # (a lone decimal literal DuckDB reads with its scale already)
                return (lambda c, v=v: _folded(c.node, c.text, v)), ""
            if v is None and _numeric_target(e, wrapped):
                return _numeric_cast, ""
        if rows and (rule := _node_rule(e, wrapped)) is not None:
            return rule, ""
        if types and e.cls in ("TYPE", "CAST") and (rule := _type_rule(e, wrapped)) is not None:
            return rule, ""
        if casts and e.cls == "CAST" and (rule := _cast_rule(e, wrapped)) is not None:
            return rule, ""
        if e.cls not in ("FUNCTION", "WINDOW") or len(e.name) != 1:
            return None, ""
        if likes and e.name[0] in _LIKES and len(e.children) == 2:
            return _like, ""
        i = bisect.bisect_left(starts, e.start - offset)
        if i + 1 < len(toks) and toks[i].start == e.start - offset and toks[i].kind in ("word", "qident") \
                and toks[i + 1].text == "(" and toks[i].name in CALLS \
                and _ALIASES.get(toks[i].name, toks[i].name) == e.name[0].lower():
            return CALLS[toks[i].name], toks[i].name
        return None, ""

    def visit(e: Expression, table: bool, inside: str) -> None:
        rule, name = rule_of(e)
        if rule is not None:
            found.append((e, rule, name, table, inside))
        if e.subquery is not None:
            for root, tf in _subroots(e.subquery):
                visit(root, tf, "")
        if e.cls == "CASE" or e.type in _CONDITIONAL:
            inside = _CONDITIONAL.get(e.type, "CASE")
        elif e.cls == "FUNCTION" and e.name and e.name[-1].lower() in _CONDITIONAL_CALLS:
            inside = e.name[-1].lower() + "()"
        # the IN of a NOT IN is rewritten with it (one span): its operands are visited
        kids = e.children[0].children if rule is _row_in and e.type == "OPERATOR_NOT" else e.children
        for c in kids:
            visit(c, False, inside)

    for root, table in roots:
        visit(root, table, "")
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

        out = rule(Call(name, e, wrapped, node_text, table, inside))
        return render(e.start, e.end, skip=e) if out is None else out

    return render(offset, len(wrapped))


def _subroots(q: Query):
    out: list = []
    _queries(q, out)
    return out
