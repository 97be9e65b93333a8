"""PostgreSQL's float semantics where they hang on a column's type: rules applied to a
translated query once the relations it reads (and so its columns' types) are known.

:func:`colmz.sql.translate.translate` sees text only: a column's type is unknown there, so
``r * 2`` over a ``real`` column or ``f * 2`` over a ``double precision`` one is left as DuckDB
computes it. The catalog knows the schema of every relation a query reads when it runs it;
:func:`float_edits`, over its nodes as typed once (:mod:`colmz.sql.column_rules`,
:mod:`colmz.sql.typing_pass`), applies, as PostgreSQL 15 computes (``src/backend/utils/adt/float.c``):

* **real with an exact number** (``r * 2``, ``r + 1``, ``1 - r``, ``r > 0.1``): PostgreSQL has
  no ``real`` operator with an integer or ``numeric``; it picks ``float48`` (the real widened
  to a double, the result a double). DuckDB computes in single precision (``r + 1`` is
  1.100000023841858, PostgreSQL's 1.1000000014901161; ``r * 2`` of 3.4e38 is Infinity,
  PostgreSQL's 6.8e38). The real operand is cast to ``DOUBLE``.
* **float overflow** (``f * 2`` of 1e308): a maximal ``+ - * /`` subtree of a float type with a
  float column among its leaves raises "value out of range: overflow" (and, of ``*``/``/``
  only, "underflow") where PostgreSQL does, through
  :data:`colmz.sql.transforms.FLOAT_CHECK` -- the check translate already applies to
  visibly float arithmetic and to column pairs; a subtree translate checked is left alone.
* **aggregates of doubles**: ``sum`` adds with ``float8pl`` and ``avg``, ``var_*``,
  ``stddev*`` and ``variance`` accumulate with ``float8_accum`` (the count, the sum, the sum of
  squared deviations, Youngs-Cramer), each raising "value out of range: overflow" where
  finite inputs make the sum or the squared deviations infinite (``avg`` of 1e300 beside 0.5,
  ``var_samp`` of 1e200 and -1e200; DuckDB answered them); a NaN or an infinity read before
  makes the result NaN (or infinite) from there on without an error, and a variance of it is
  NaN (DuckDB's variance of one NaN is 0). Which inputs come first is the order PostgreSQL
  reads the rows in, which colmz does not have (its tables are kept sorted, a view's group
  is recomputed from its arrangement), and PostgreSQL's answer hangs on it where finite
  inputs overflow in some order and not in another: a NaN or an infinity read before them
  (NaN, infinite) or after (the error), or values that cancel (1e308, -1e308, 1e308: 1e308 or
  the error). So the rule answers what PostgreSQL answers in every order, and refuses by name
  where orders differ: such a call is :data:`FLOAT_ACCUM_CHECK` of itself, of the same call
  (its DISTINCT, FILTER and OVER clause kept) counting the NaN and infinite inputs, summing
  the finite positive and the finite negative inputs (scaled, so neither sum overflows) and
  (but for ``sum``) of ``var_pop`` of the finite inputs (scaled) times their count -- the
  error where none is NaN or infinite and their sum or squared deviations are not finite
  (every order raises: the last prefix is all of them, and the squared deviations of a
  prefix are at most those of all); the refusal where the positive or the negative sum or
  the squared deviations are not finite otherwise (the order putting them first raises, one
  putting a NaN or an infinity first, or alternating signs, does not); a variance's NaN
  where an input is NaN or infinite. A real argument is left alone (``float4_accum`` widens
  to a double: its squares cannot overflow; a sum of reals is refused, below). The
  aggregate's type (its argument's for ``sum``, ``min``, ``max``; a double
  for the others) types arithmetic over it, so ``sum(f) * 1e10``, ``max(f) * 2`` in a HAVING,
  ``sum(f) OVER (...) * 10`` are checked as a float column's arithmetic is. A maintained view
  recomputes such aggregates per affected group by this SQL (a float sum is not kept as a
  running sum), so a commit raises exactly where the query over the new rows does.
* **NaN / 0** is NaN (``float8div``: only a non-NaN dividend raises "division by zero");
  DuckDB raises for every zero divisor: a division of a float dividend is :data:`FLOAT_DIV`.
* **a float with a numeric as text** (``(r / 3.0)::text``, ``(1::float8 / 3.0)::text``):
  translate cannot tell it from a numeric computed as a double, whose text it refuses
  (:data:`colmz.sql.translate.NUMERIC_TEXT`); PostgreSQL's float48 and float8 operators make
  it a double (the numeric read as one), so an operand typed here as a double by PostgreSQL's
  rules (a number with an exponent is a numeric there) is printed as a double is
  (:data:`colmz.sql.translate.FLOAT8_TEXT`).
* **ceil, floor, round, trunc, sign of a real**: PostgreSQL has them of a double (and a
  numeric) only; the real is cast to a double and the result is a double (DuckDB keeps a
  real, and makes ``sign`` an integer). Their two-argument forms of a float do not exist
  in PostgreSQL and are refused by name.
* **a sum of reals** is refused by name (PostgreSQL adds reals in single precision,
  DuckDB in double), as translate refuses a visibly real argument.
* **a float column cast to numeric** keeps 15 (real: 6) significant digits, as
  ``float8_numeric`` (``float4_numeric``) does: ``(f * 3)::numeric = 0.3`` holds for f = 0.1
  (translate's ``x +`` :data:`colmz.sql.transforms.NUMERIC_CAST` of a float operand).

Invariants:

* Every node is typed by :mod:`colmz.sql.typing_pass` (a column reference resolved by the
  relations named, ``relations``, else by its name alone); anything not typed is left as it
  is (DuckDB's answer), never guessed.
* A scalar subquery is typed as its one column (a set operation's by PostgreSQL's common
  type); a subquery's own query is rewritten by these rules and its text, so rewritten,
  is what a rule around it splices (an overflow check repeats it as an operand, as it
  repeats any operand); in a grouped query, outside an aggregate's arguments, the overflow and NaN
  rules apply only to a subtree written as a grouped expression (its tokens; a GROUP BY
  position or alias names its select item), so the grouped expression and its select item,
  HAVING or ORDER BY are rewritten alike and DuckDB still matches them, or to arithmetic
  whose every operand reads only grouped expressions, aggregates and constants (``f * 2 ...
  GROUP BY f``: the check repeats its operands, which must be grouped values). Translate
  checks no arithmetic of a grouped query, so there a float cast among the operands
  (``f::float8 * 2``, ``1e300::float8 * 10``) is checked too, in aggregates' arguments as
  well; a query text naming a float type is read even when no float column is. They skip a window's OVER clause (DuckDB refuses a volatile expression in a window's
  ORDER BY, and counts a check volatile); they apply to an aggregate's and a window call's
  arguments (read per row). The widening applies everywhere (it rewrites a grouped
  expression and its select item alike).
* Every runner of a catalog's SQL applies it, with the columns of what it reads: the
  catalog's queries, maintained views' per-row SQL and group recomputes, subscriptions, and
  continual tasks' statements (typed by the input's, references' and output's columns).
* Output names: PostgreSQL sees a select item's name only as a whole ``ORDER BY``,
  ``GROUP BY`` or ``DISTINCT ON`` item; DuckDB also in the select list, ``WHERE``,
  ``HAVING`` and expressions (and subqueries there), where it reads a FROM item's column of
  that level first, then the output name, then enclosing levels' columns. With the
  relations named, a reference seen only as an output name there raises PostgreSQL's
  ``column "x" does not exist``, and one PostgreSQL reads as an enclosing level's column is
  refused (the names are resolved even when no column is a float).
* The rewrite is a pure function of the text and the column names of each float type, cached;
  a text the tree cannot read (not a query) is returned unchanged.
"""

from __future__ import annotations

import re

from colmz.sql.build import RESERVED_PREFIX, splice
from colmz.sql.errors import UnsupportedSQL
from colmz.sql.tokens import tokenize
from colmz.sql.transforms import (
    FLOAT_CHECK,
    NOT_INTERVAL,
    arith_leaves,
    float_check,
    is_arith,
    products_only,
    table_refs,
)
from colmz.sql.translate import FLOAT8_TEXT, NUMERIC_ROUND, NUMERIC_TEXT, SUM_ARGUMENT
from colmz.sql.tree import Expression, Query
from colmz.sql.typing_pass import (
    DOUBLE_CALLS,
    FLOAT_DIV,
    SAME_TYPE_CALLS,
    TypedText,
    Typer,
    numeric_cast,
    query_expressions,
    window_arguments,
)

__all__ = ["FLOAT_ACCUM_CHECK", "FLOAT_COLUMN_MACROS", "FLOAT_DIV", "FLOAT_WORD", "float_edits"]

#: The overflow check of an aggregate of doubles, ``(result, non-finite inputs, sum of the
#: finite positive inputs, of the finite negative ones, squared deviations of the finite
#: inputs, spread)``, the sums scaled by :data:`_SUM_SCALE` and the squared deviations by
#: :data:`_SQUARES_SCALE` squared (so none of them overflows here): PostgreSQL's error where
#: its every order of the rows raises (no input is NaN or infinite, and the sum or the squared
#: deviations of all of them are not finite); the refusal where some order raises and another
#: does not (the positive or the negative inputs' sum, or the squared deviations, are not
#: finite, and a NaN or an infinity may come first or the inputs may cancel); a variance or
#: standard deviation (``spread``) of a NaN or an infinity is NaN (float8_accum's sum of
#: squares is NaN from there on; DuckDB's variance of one NaN is 0). See the module docstring.
FLOAT_ACCUM_CHECK = RESERVED_PREFIX + "float_accum_check"

#: The scale of the sums :data:`FLOAT_ACCUM_CHECK` reads (a power of two: exact), and the
#: scaled sum past which the sum is not finite (the largest double, scaled).
_SUM_SCALE, _SUM_LIMIT = 2.0**-1000, float.fromhex("0x1.fffffffffffffp+1023") * 2.0**-1000
#: The scale of the inputs whose squared deviations :data:`FLOAT_ACCUM_CHECK` reads (their
#: squares then stay far from overflow), and the scaled squared deviations past which they
#: are not finite (2**1024 scaled).
_SQUARES_SCALE, _SQUARES_LIMIT = 2.0**-600, 2.0**-176
_ORDER_REFUSAL = ("a sum, avg or variance of double precision values that overflows in some order of the rows and "
                  "not in another (its positive or negative values, or its squared deviations, are not finite) is "
                  "not supported by colmz: PostgreSQL raises or answers by the order it reads the rows in, which "
                  "colmz does not keep")

#: The macros the rules call, defined on every colmz connection (:func:`colmz.sql.connect`).
FLOAT_COLUMN_MACROS = (
    f"CREATE OR REPLACE MACRO {FLOAT_DIV}(x, y) AS CASE WHEN isnan(x) AND y = 0 THEN x ELSE x / y END",
    f"CREATE OR REPLACE MACRO {FLOAT_ACCUM_CHECK}(r, nonfinite, pos, neg, q, spread) AS CASE WHEN nonfinite = 0 "
    f"AND (abs(coalesce(pos, 0) + coalesce(neg, 0)) > {_SUM_LIMIT!r} OR q >= {_SQUARES_LIMIT!r}) "
    "THEN error('value out of range: overflow') "
    f"WHEN coalesce(pos, 0) > {_SUM_LIMIT!r} OR coalesce(neg, 0) < {-_SUM_LIMIT!r} OR q >= {_SQUARES_LIMIT!r} "
    f"THEN error('{_ORDER_REFUSAL}') "
    "WHEN spread AND nonfinite > 0 AND r IS NOT NULL THEN CAST('NaN' AS DOUBLE) ELSE r END",
)


_COMPARE = frozenset({"COMPARE_EQUAL", "COMPARE_NOTEQUAL", "COMPARE_LESSTHAN", "COMPARE_GREATERTHAN",
                      "COMPARE_LESSTHANOREQUALTO", "COMPARE_GREATERTHANOREQUALTO"})
#: A text that may hold float arithmetic without a float column (``'NaN'::float8 / 0``, a
#: grouped ``1e300::float8 * 10``, a VALUES list of reals).
FLOAT_WORD = re.compile(r"\b(float[48]?|real|double)\b", re.IGNORECASE)


def float_edits(t: TypedText) -> list[tuple[int, int, str]]:
    """The edits of the float rules (module docstring) over ``t``: each maximal node they
    rewrite, with its new text. The resolved kinds are read where the names were checked
    (the relations named, or a float type in the text); else a reference is typed by its
    name alone."""
    if not (any(k in ("real", "double") for ks in t.kinds.values() for k in ks) or FLOAT_WORD.search(t.text)):
        return []  # (no float column and no float type: no rule applies)
    rules = _Rules(t.text, t.typed, t.resolved if t.checked else {}, t.defs, t.kinds)
    for q in t.queries:
        rules.query(q, grouped=False)
    return sorted(rules.edits)


class _Rules(Typer):
    # the rules over the nodes as the typing pass types them
    def __init__(self, text: str, typed: dict[str, str], resolved: dict[tuple[int, int], str],
                 defs: dict[str, list[Expression | None]], kinds: dict[str, set[str]]) -> None:
        super().__init__(text, resolved, typed, defs, kinds)
        self.edits: list[tuple[int, int, str]] = []
        self.grouped = False
        self.unchecked = False  # in a grouped query (aggregates' arguments too)
        self.windows = 0  # how many window calls the node being rendered is under
        self.group_keys: frozenset = frozenset()  # the grouped expressions' token keys
        self.rendered: dict[tuple[int, int], str] = {}  # subqueries' texts with their rules

    def kind(self, e: Expression, pg: bool = False) -> str | None:
        # the typing pass's kind, and an aggregate's of a float argument: sum, min and max of
        # it its type, avg and the variances a double (float8_accum, float4_accum), with a
        # FILTER and as a window call too
        k = super().kind(e, pg)
        if k is not None or e.cls not in ("FUNCTION", "WINDOW") or len(e.name) != 1 \
                or e.name[0].lower() not in _TYPED_AGGREGATES:
            return k
        arg = self.aggregate_argument(e)
        k = None if arg is None else self.kind(_peeled(arg), pg)
        if k not in ("real", "double"):
            return None
        return k if e.name[0].lower() in ("sum", "min", "max") else "double"

    def aggregate_argument(self, e: Expression) -> Expression | None:
        # the one argument of aggregate or window call ``e``: the child right after its
        # ``name(`` (``DISTINCT`` between), not its FILTER's nor its OVER clause's
        if e.start < 0:
            return None
        # (the argument may be written in parentheses: as many close right after it)
        head = re.compile(rf"{re.escape(e.name[0])}\s*\(\s*(?:(?:DISTINCT|ALL)\s+)?((?:\(\s*)*)", re.IGNORECASE)
        for c in e.children:
            m = head.fullmatch(self.text, e.start, c.start) if e.start <= c.start and c.end <= e.end else None
            if m is not None:
                closes = re.match(rf"(?:\s*\)){{{m.group(1).count('(') + 1}}}", self.text[c.end : e.end])
                return c if closes is not None else None
        return None

    def key(self, e: Expression) -> tuple:
        # an expression's tokens (words lower case): DuckDB matches a select item against a
        # grouped expression by what it parses to, not by its spacing
        return tuple(t.text.lower() if t.kind == "word" else t.text
                     for t in tokenize(self.text[e.start : e.end]))

    def grouped_keys(self, q: Query) -> frozenset:
        # a GROUP BY's expressions, and the select items a position or an alias groups by
        out = set()
        for g in q.group_by:
            if g.start < 0:
                continue
            item = None
            if g.cls == "CONSTANT" and g.literal is not None and g.literal.kind == "INTEGER" \
                    and g.literal.text.isdigit() and 0 < int(g.literal.text) <= len(q.items):
                item = q.items[int(g.literal.text) - 1]
            elif g.cls == "COLUMN_REF" and len(g.name) == 1:
                item = next((i for i in q.items if i.alias and i.alias.lower() == g.name[0].lower()), None)
            for e in (g,) if item is None else (g, item):
                if e.start >= 0:
                    out.add(self.key(e))
        return frozenset(out)

    def query(self, q: Query, grouped: bool) -> None:
        for _, sub in q.ctes:
            self.query(sub, False)
        for c in q.children:
            self.query(c, False)
        for t in table_refs(q):
            if t.subquery is not None:
                self.query(t.subquery, False)
        self.grouped = bool(q.group_by) or q.aggregate_handling == "FORCE_AGGREGATES"
        self.unchecked = self.grouped  # translate checks no arithmetic of a grouped query
        self.group_keys = self.grouped_keys(q)
        for e in query_expressions(q):
            if isinstance(e, Expression):
                self.root(e)

    def root(self, e: Expression) -> None:
        # the edits under ``e``: maximal rewritten nodes (a subquery rendered with its own)
        new = self.render(e, checked=False)
        if new is not None:
            self.edits.append((e.start, e.end, new))

    def subquery(self, e: Expression, texts: dict[int, str]) -> str | None:
        # a subquery node's text with its own query's rules applied and its operand (of IN,
        # ANY) rendered; None: unchanged. Kept for a check repeating it (see leaf_text)
        state = self.grouped, self.group_keys, self.unchecked, self.windows, self.edits
        self.windows, self.edits = 0, []
        self.query(e.subquery, False)
        edits = sorted(self.edits + [(c.start, c.end, texts[id(c)]) for c in e.children if id(c) in texts])
        self.grouped, self.group_keys, self.unchecked, self.windows, self.edits = state
        if not edits:
            return None
        self.rendered[(e.start, e.end)] = out = splice(self.text, edits, e.start, e.end)
        return out

    def leaf_text(self, n: Expression) -> str:
        return self.rendered.get((n.start, n.end), self.text[n.start : n.end])

    def _float_column_under(self, e: Expression) -> bool:
        # a float column among the operands, or a value typed here by one (``abs(f)``,
        # ``max(f)``, ``coalesce(r, 0)``, a CASE): translate, not knowing the column's
        # type, left them as DuckDB computes
        return any(self.kind(n) in ("real", "double") and (
            n.cls in ("COLUMN_REF", "CASE", "SUBQUERY") or (n.cls == "OPERATOR" and n.type == "OPERATOR_COALESCE")
            or (n.cls in ("FUNCTION", "WINDOW") and len(n.name) == 1
                and n.name[0].lower() in (*SAME_TYPE_CALLS, *DOUBLE_CALLS, *_TYPED_AGGREGATES, "greatest",
                                          "least", "nullif")))
            for n in _leaves(e))

    def checks(self, e: Expression) -> bool:
        # whether the arithmetic subtree ``e`` (if maximal) gets the overflow check here
        # in a grouped query, outside an aggregate, only a grouped expression (and each select
        # item, HAVING or ORDER BY expression written as one) or arithmetic over grouped
        # values is checked: DuckDB matches the checked texts alike, where a check
        # repeating an operand that is not a grouped value would read ungrouped leaves
        # (translate checks visibly float arithmetic, ``f::float8 * 2``, outside grouped
        # queries only: a float cast among the operands counts there)
        return self.per_group(e) and not self.windows and self.kind(e) in ("real", "double") and (
            self._float_column_under(e)
            or (self.unchecked and any(self.kind(n) in ("real", "double") for n in _leaves(e))))

    def per_group(self, e: Expression) -> bool:
        # whether a rule may rewrite the arithmetic ``e`` (repeating its operands) here:
        # outside a grouped query, or as a grouped expression, or with every operand a
        # grouped value (``f * 2 ... GROUP BY f``)
        return not self.grouped or self.key(e) in self.group_keys \
            or all(self.grouped_value(n) for n in _leaves(e))

    def grouped_value(self, n: Expression) -> bool:
        # whether ``n`` reads only grouped expressions, aggregates and constants
        if n.start >= 0 and self.key(n) in self.group_keys:
            return True
        if n.subquery is not None or n.cls in ("COLUMN_REF", "WINDOW", "STAR", "COLUMNS"):
            return False
        if n.cls == "FUNCTION" and len(n.name) == 1 and n.name[0].lower() in _AGGREGATES:
            return True
        if n.cls == "CAST" and n.children:  # (its second child is the type)
            return self.grouped_value(n.children[0])
        return n.cls == "CONSTANT" or (bool(n.children) and all(self.grouped_value(c) for c in n.children))

    # -- rendering: the node's text with its rewritten descendants; None when unchanged
    def render(self, e: Expression, checked: bool) -> str | None:
        if e.start < 0:
            return None
        kids = [c for c in e.children if c.start >= 0 and c.start >= e.start and c.end <= e.end]
        under_check = e.cls == "FUNCTION" and e.name == (FLOAT_CHECK,)
        # a maximal arithmetic subtree is checked once, at its root (by translate or here)
        arith_checked = is_arith(e) and not numeric_cast(e, self.text) and (checked or self.checks(e))
        texts = {}
        # a check under a window's OVER clause is left out: DuckDB counts it volatile, which
        # a window's ORDER BY or PARTITION BY may not be; the call's arguments are per row
        args = window_arguments(e, kids, self.text) if e.cls == "WINDOW" else ()
        # an aggregate's arguments are per row, not matched against the grouped expressions
        grouped = self.grouped
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0].lower() in _AGGREGATES:
            self.grouped = False
        for i, c in enumerate(kids):
            window = e.cls == "WINDOW" and not any(c is a for a in args)
            self.windows += window
            t = self.render(c, checked=(under_check and i == 0) or (arith_checked and is_arith(c)))
            self.windows -= window
            if t is not None:
                texts[id(c)] = t
        self.grouped = grouped
        # (an IN or ANY subquery's own query is rendered here, its operand as a child)
        if e.subquery is not None:
            return self.subquery(e, texts)
        own = self.rule(e, texts, checked)
        if own is not None:
            return own
        if not texts:
            return None
        return self.splice(e, texts)

    def splice(self, e: Expression, texts: dict[int, str]) -> str:
        edits = sorted(((c.start, c.end, texts[id(c)]) for c in e.children if id(c) in texts), key=lambda x: x[0])
        return splice(self.text, edits, e.start, e.end)

    def child_text(self, c: Expression, texts: dict[int, str]) -> str:
        return texts.get(id(c), self.text[c.start : c.end])

    def rule(self, e: Expression, texts: dict[int, str], checked: bool) -> str | None:
        if e.cls in ("FUNCTION", "WINDOW") and len(e.name) == 1 and e.name[0].lower() in _ACCUMULATING:
            wrapped = self.aggregate_argument(e)
            arg = None if wrapped is None else _peeled(wrapped)
            if e.name[0].lower() == "sum" and arg is not None and self.kind(arg) == "real" \
                    and self._float_column_under(arg):
                # translate refuses a visibly real argument alike (transforms._sum_of_real)
                raise UnsupportedSQL("sum() of a real column is not supported by colmz (PostgreSQL adds "
                                     "in single precision, DuckDB in double): cast the argument to float8")
            if arg is not None and not self.windows and self.kind(arg, pg=True) == "double":
                return self.accumulated(e, wrapped, texts)
        if e.cls == "FUNCTION" and e.name in ((NUMERIC_TEXT,), (NUMERIC_ROUND,)) and e.children \
                and e.children[0].start >= 0 and self.kind(e.children[0], pg=True) == "double":
            # translate's text (integer) of what may be a numeric computed as a double (refused
            # when it is one; rounded half away from zero): a double here by PostgreSQL's
            # operators (a float with a numeric is float8, ``(1::float8 / 3.0)::text`` is
            # 0.3333333333333333), printed (rounded to even) as one
            x = self.child_text(e.children[0], texts)
            return f"{FLOAT8_TEXT}({x})" if e.name == (NUMERIC_TEXT,) else x
        if numeric_cast(e, self.text):
            x = e.children[0]
            k = self.kind(x)
            if k in ("real", "double") and self._float_column_under(x):
                digits = 6 if k == "real" else 15
                texts[id(x)] = f"CAST(printf('%.{digits}g', {self.child_text(x, texts)}) AS DOUBLE)"
                return self.splice(e, texts)
            return None
        if e.cls == "FUNCTION" and len(e.name) == 1 and e.name[0].lower() in DOUBLE_CALLS \
                and e.children and all(c.start >= 0 for c in e.children):
            return self.double_call(e, texts)
        binary = len(e.children) == 2 and all(c.start >= 0 for c in e.children)
        arith = is_arith(e)
        body = None
        if binary and (arith or (e.cls == "COMPARISON" and e.type in _COMPARE)):
            a, b = e.children
            ka, kb = self.kind(a), self.kind(b)
            widened = [c for c, k, other in ((a, ka, kb), (b, kb, ka))
                       if k == "real" and other == "exact" and self._float_column_under(c)]
            for c in widened:
                texts[id(c)] = f"CAST({self.child_text(c, texts)} AS DOUBLE)"
            if widened:
                body = self.splice(e, texts)
            if arith and e.name[0] in ("/", "//") and ka in ("real", "double") and not self.windows \
                    and self.per_group(e):
                body = f"{FLOAT_DIV}({self.child_text(a, texts)}, {self.child_text(b, texts)})"
        if arith and not checked and self.checks(e):
            leaves = [n for n in _leaves(e) if n.start >= 0]
            inner = body if body is not None else (self.splice(e, texts) if texts else self.text[e.start : e.end])
            return float_check(inner, [self.leaf_text(n) for n in leaves], products_only(e))
        return body


    def accumulated(self, e: Expression, arg: Expression, texts: dict[int, str]) -> str:
        # sum, avg or a variance of doubles (``e``, its argument ``arg``) with PostgreSQL's
        # overflow check: the same call (DISTINCT, FILTER and OVER kept) of the count of
        # the non-finite inputs, their sum and (but for sum) their squared deviations
        marker = "\x00"
        call = self.splice(e, {**texts, id(arg): marker})
        x = self.child_text(arg, texts)
        rest = call[len(e.name[0]):]

        def of(fn: str, value: str) -> str:
            return fn + rest.replace(marker, value)

        result = of(e.name[0], x)
        nonfinite = of("count", f"CASE WHEN isfinite({x}) THEN NULL ELSE {x} END")
        name = e.name[0].lower()
        pos, neg = (of("sum", f"CASE WHEN {x} {op} 0 AND isfinite({x}) THEN {x} * {_SUM_SCALE!r} END")
                    for op in (">", "<"))
        finite = f"CASE WHEN isfinite({x}) THEN {x} END"
        squares = "NULL" if name == "sum" else (
            f"{of('var_pop', f'CASE WHEN isfinite({x}) THEN {x} * {_SQUARES_SCALE!r} END')} * {of('count', finite)}")
        spread = "false" if name in ("sum", "avg") else "true"
        # (kept for a check around it repeating it as an operand: its value, a variance's NaN)
        out = self.rendered[(e.start, e.end)] = \
            f"{FLOAT_ACCUM_CHECK}({result}, {nonfinite}, {pos}, {neg}, {squares}, {spread})"
        return out

    def double_call(self, e: Expression, texts: dict[int, str]) -> str | None:
        # ceil, floor, round, trunc, sign of a real or a double: PostgreSQL has them of a
        # double only (and of a numeric): a real is cast to a double (float48 from there on),
        # the result is a double (DuckDB keeps a real, and makes sign() an integer). Their
        # two-argument forms exist of a numeric only: PostgreSQL raises for a float
        x = e.children[0]
        k = self.kind(x)
        if k not in ("real", "double"):
            return None
        name = e.name[0].lower()
        if len(e.children) != 1:
            typ = "real" if k == "real" else "double precision"
            raise UnsupportedSQL(f"{name}({typ}, integer) does not exist in PostgreSQL (its two-argument "
                                 f"form takes a numeric): cast the argument to numeric")
        if k == "real":
            texts[id(x)] = f"CAST({self.child_text(x, texts)} AS DOUBLE)"
        call = self.splice(e, texts) if texts else self.text[e.start : e.end]
        if name == "sign":
            return f"CAST({call} AS DOUBLE)"
        return call if texts else None


#: Aggregate functions whose arguments are read per row (the float rules apply there in a
#: grouped query as in any other).
_AGGREGATES = frozenset({
    "sum", "avg", "min", "max", "count", "stddev", "stddev_samp", "stddev_pop", "variance",
    "var_samp", "var_pop", "corr", "covar_samp", "covar_pop", "string_agg", "array_agg",
    "bool_and", "bool_or", "every", "median", "mode", "product", "any_value", "arg_min",
    "arg_max", "first", "last", "list", "fsum", "sumkahan", "kahan_sum",
})

#: Aggregates PostgreSQL computes with an overflow check over a double argument: sum
#: (float8pl), avg and the variances (float8_accum).
_ACCUMULATING = frozenset({"sum", "avg", "variance", "var_pop", "var_samp", "stddev", "stddev_pop",
                           "stddev_samp"})
#: Aggregates typed by their argument (:meth:`_Rules.kind`).
_TYPED_AGGREGATES = _ACCUMULATING | {"min", "max"}


def _peeled(arg: Expression) -> Expression:
    # an aggregate's argument through translate's wrappers (sum's and avg's argument typing,
    # the checks): the value as written
    while arg.cls == "FUNCTION" and len(arg.name) == 1 and arg.children \
            and arg.name[0] in (SUM_ARGUMENT, NOT_INTERVAL, FLOAT_CHECK, FLOAT_DIV):
        arg = arg.children[0]
    return arg


def _leaves(e: Expression) -> list[Expression]:
    # the operands under the arithmetic subtree ``e``, every exact number literal left out
    # (one with an exponent too: it is typed exact here, as PostgreSQL reads it)
    return [n for n in arith_leaves(e) if not (
        n.cls == "CONSTANT" and n.literal is not None and n.literal.kind in ("INTEGER", "NUMERIC"))]


