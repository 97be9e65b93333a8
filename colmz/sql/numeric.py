"""PostgreSQL's ``numeric`` on constants: literal arithmetic folded with PostgreSQL's scales.

PostgreSQL types ``0.1`` and ``7 / 2.0`` as ``numeric``: exact decimals, each value carrying
its display scale (``dscale``, the digits printed after the point). DuckDB reads a decimal
literal as a ``DECIMAL(p, s)`` with the same scale, and its ``+``, ``-`` and ``*`` of
decimals keep PostgreSQL's scales (the larger one; the sum of both). Its division does not:
a ``DECIMAL`` quotient is a ``DOUBLE`` in DuckDB, while PostgreSQL's is a ``numeric`` whose
scale depends on the operands' values (``select_div_scale`` in
src/backend/utils/adt/numeric.c: at least 16 significant digits, at least either operand's
scale), so ``(7 / 2.0)::text`` is ``3.5000000000000000``.

The arithmetic here (:func:`parse_literal`, :func:`combine`, :func:`divide`,
:func:`literal_text`) is what :mod:`colmz.sql.transforms` folds each constant arithmetic
subtree of DuckDB's parse tree with, when it holds a ``numeric`` (a decimal literal,
``::numeric``): the result goes in as one decimal literal of PostgreSQL's scale, which
DuckDB reads as a ``DECIMAL`` with that scale (``3.5000000000000000``, or ``100000.`` for a
scale of 0). Integers alone are left to DuckDB (integer arithmetic is the same there); an
integer result past its type, a division by zero, raises here (ArithmeticError), and the
caller leaves the expression to DuckDB, which raises as PostgreSQL does.

:func:`float8_text` and :func:`float4_text` are PostgreSQL 15's text of doubles and reals.

Text read as numeric (``x::numeric`` of text known only when the query runs, such as
``j ->> 'a'``) is read by :func:`numeric_in`, PostgreSQL 15's ``numeric_in``, and a
``numeric(p, s)`` target by :func:`numeric_typmod`, which a DuckDB ``DECIMAL(p, s)`` then
holds exactly with PostgreSQL's scale. An
unconstrained ``numeric`` keeps each value's own scale in PostgreSQL, which no DuckDB type
does: colmz reads it as :data:`TEXT_NUMERIC_TYPE`, exact for every value of at most
:data:`TEXT_NUMERIC_SCALE` digits after the point and ``MAX_DIGITS - TEXT_NUMERIC_SCALE``
before it (another value, NaN or an infinity is refused when it runs), so its value is
PostgreSQL's but its scale may be wider: its text is refused where colmz prints it
(:data:`NUMERIC_IN_GUARD` where the printed expression shows the read, and by the value's
DuckDB type, :data:`WIDE_DECIMALS`, in every printer of text, so through a subquery too).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from fractions import Fraction

import pyarrow as pa

from colmz.sql.build import RESERVED_PREFIX

__all__ = ["MAX_DIGITS", "DECIMAL_TEXT", "NUMERIC_IN", "WIDE_DECIMALS", "WIDE_DECIMAL_REFUSAL", "wide_decimal", "NUMERIC_IN_GUARD", "NUMERIC_MACROS", "NUMERIC_TYPMOD", "TEXT_NUMERIC_FUNCTIONS",
           "TEXT_NUMERIC_SCALE", "TEXT_NUMERIC_TYPE", "PgNumeric", "combine", "divide", "float4_text", "float8_text",
           "literal_text", "numeric_in", "numeric_typmod", "parse_literal"]

#: DuckDB's widest DECIMAL.
MAX_DIGITS = 38
#: PostgreSQL's NUMERIC_MIN_SIG_DIGITS and DEC_DIGITS (src/backend/utils/adt/numeric.c).
_MIN_SIG_DIGITS = 16
_DEC_DIGITS = 4
#: Exact arithmetic for the digits a fold can keep (more are never put in a query); every
#: operation on values goes through it (Decimal's default context rounds at 28 digits).
_EXACT = Context(prec=2 * 1000 + 2 * MAX_DIGITS)


@dataclass(slots=True, repr=False, eq=False)
class PgNumeric:
    """A constant as PostgreSQL types it: an integer (``scale is None``; ``bits`` 32 for
    int4, 64 for int8) or a numeric ``value`` with display scale ``scale``."""

    value: Decimal
    scale: int | None
    bits: int = 64

    @property
    def is_numeric(self) -> bool:
        return self.scale is not None

    def as_numeric(self) -> PgNumeric:
        return self if self.scale is not None else PgNumeric(self.value, 0)

    def __repr__(self) -> str:
        return f"PgNumeric({self.value!r}, {self.scale!r})"


def parse_literal(text: str) -> PgNumeric:
    """A number literal as PostgreSQL reads it: an integer, or a numeric whose scale is
    the digits after the point less the exponent.

    >>> parse_literal("2.50"), parse_literal("1.5e-7"), parse_literal("1e5"), parse_literal("7")
    (PgNumeric(Decimal('2.50'), 2), PgNumeric(Decimal('1.5E-7'), 8), PgNumeric(Decimal('1E+5'), 0), PgNumeric(Decimal('7'), None))
    """
    d = Decimal(text)
    if "." in text or "e" in text.lower() or not (-(2**63) <= d < 2**63):
        return PgNumeric(d, max(0, -d.as_tuple().exponent))
    return PgNumeric(d, None, 32 if -(2**31) <= d < 2**31 else 64)


def _integer(value: Decimal, a: PgNumeric, b: PgNumeric) -> PgNumeric:
    # int4 with int4 is int4, else int8; PostgreSQL raises where the result leaves its type
    # (and so does DuckDB: the expression is then left to it).
    bits = max(a.bits, b.bits)
    if not (-(2 ** (bits - 1)) <= value < 2 ** (bits - 1)):
        raise OverflowError(f"integer out of range for {bits} bits")
    return PgNumeric(value, None, bits)


def _weight_and_first_digit(x: Decimal) -> tuple[int, int]:
    # PostgreSQL stores numerics in base-10000 digits: the weight of the first non-zero
    # digit and that digit (0, 0 for zero).
    if x == 0:
        return 0, 0
    x = x.copy_abs()
    weight = x.adjusted() // _DEC_DIGITS
    return weight, int(_EXACT.scaleb(x, -_DEC_DIGITS * weight))


def divide(a: PgNumeric, b: PgNumeric) -> PgNumeric:
    """PostgreSQL's ``a / b``: integer division truncating toward zero for two integers,
    else numeric division rounded (half away from zero) at ``select_div_scale``'s scale.

    >>> divide(parse_literal("7"), parse_literal("2.0")).value
    Decimal('3.5000000000000000')
    >>> divide(parse_literal("1"), parse_literal("3.0")).value
    Decimal('0.33333333333333333333')
    >>> divide(parse_literal("-7"), parse_literal("2")).value
    Decimal('-3')
    """
    if b.value == 0:
        raise ZeroDivisionError("division by zero")
    if not (a.is_numeric or b.is_numeric):
        q = _EXACT.divide_int(a.value.copy_abs(), b.value.copy_abs())
        return _integer(q if (a.value < 0) == (b.value < 0) else q.copy_negate(), a, b)
    a, b = a.as_numeric(), b.as_numeric()
    w1, f1 = _weight_and_first_digit(a.value)
    w2, f2 = _weight_and_first_digit(b.value)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    scale = max(_MIN_SIG_DIGITS - qweight * _DEC_DIGITS, a.scale, b.scale, 0)
    scale = min(scale, 1000)
    exact = Fraction(a.value) / Fraction(b.value) * 10**scale
    n = (abs(exact.numerator) * 2 + exact.denominator) // (2 * exact.denominator)  # half up
    return PgNumeric(_EXACT.scaleb(Decimal(n if exact >= 0 else -n), -scale), scale)


def combine(op: str, a: PgNumeric, b: PgNumeric) -> PgNumeric:
    if op == "/":
        return divide(a, b)
    value = (_EXACT.add(a.value, b.value) if op == "+" else _EXACT.subtract(a.value, b.value)
             if op == "-" else _EXACT.multiply(a.value, b.value))
    if not (a.is_numeric or b.is_numeric):
        return _integer(value, a, b)
    s1, s2 = a.as_numeric().scale, b.as_numeric().scale
    return PgNumeric(value, s1 + s2 if op == "*" else max(s1, s2))


def literal_text(v: PgNumeric) -> str | None:
    """The DuckDB literal holding ``v`` with PostgreSQL's scale (``100000.`` for a scale
    of 0: a DECIMAL, not an integer), or None where DuckDB's DECIMAL cannot hold it.

    >>> literal_text(parse_literal("1e5")), literal_text(PgNumeric(Decimal("-3.5"), 3))
    ('100000.', '(-3.500)')
    """
    if v.scale is None:
        return str(v.value)
    whole = max(v.value.adjusted() + 1, 1) if v.value else 1
    if whole + v.scale > MAX_DIGITS:
        return None
    q = _EXACT.quantize(v.value, Decimal(1).scaleb(-v.scale))
    text = format(q.copy_abs(), "f")
    if "." not in text:
        text += "."
    return f"(-{text})" if q < 0 else text


def float8_text(v: float) -> str:
    """PostgreSQL 15's text of a double (float8out with ``extra_float_digits = 1``): the
    shortest digits that read back as ``v`` (src/common/d2s.c), fixed notation for decimal
    exponents -4 to 14, else ``d.ddde+NN``; ``NaN``, ``Infinity``, ``-0``.

    The shortest digits are Python's ``repr``'s except where those lie exactly halfway to
    the neighbouring double: d2s does not accept that bound, and prints the 16 digits
    closest to ``v`` where they read back as ``v`` (and are not ``repr``'s), else 17.

    >>> [float8_text(x) for x in (2.0, 1e15, 1e14, 1.5e-7, -0.0, 1e23, 9.15e21, float("nan"))]
    ['2', '1e+15', '100000000000000', '1.5e-07', '-0', '9.999999999999999e+22', '9.150000000000001e+21', 'NaN']
    """
    if (special := _special(v)) is not None:
        return special
    a = abs(v)
    digits = repr(a)
    exact, short = Decimal(a), Decimal(digits)
    if short != exact:
        import math

        neighbour = math.nextafter(a, math.inf if short > exact else 0.0)
        if abs(short - exact) * 2 == abs(Decimal(neighbour) - exact):
            p16 = f"{a:.15e}"
            digits = p16 if float(p16) == a and Decimal(p16) != short else f"{a:.16e}"
    return _digits_text(Decimal(digits), v < 0, 15)


def _special(v: float) -> str | None:
    # PostgreSQL's text of NaN, the infinities and the zeros (of a double or a real).
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0" if str(v).startswith("-") else "0"
    return None


def _digits_text(digits: Decimal, negative: bool, fixed_below: int) -> str:
    # float8out/float4out's layout of the shortest ``digits``: fixed notation for decimal
    # exponents -4 up to ``fixed_below`` (15 for a double, 6 for a real), else d.ddde+NN.
    _, ds, exp = digits.as_tuple()
    e = len(ds) + exp - 1  # decimal exponent of the first digit
    ds = "".join(map(str, ds)).rstrip("0") or "0"
    sign = "-" if negative else ""
    if -4 <= e < fixed_below:
        if e >= len(ds) - 1:
            return sign + ds + "0" * (e - len(ds) + 1)
        if e >= 0:
            return sign + ds[: e + 1] + "." + ds[e + 1 :]
        return sign + "0." + "0" * (-e - 1) + ds
    mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    return f"{sign}{mant}e{'-' if e < 0 else '+'}{abs(e):02d}"


def _float32(x: float) -> float:
    # The nearest float32 of a double (struct rounds to nearest even).
    return struct.unpack("f", struct.pack("f", x))[0]


def _next_float32(x: float, up: bool) -> float:
    # The float32 next to the (positive, finite) float32 x.
    bits = struct.unpack("I", struct.pack("f", x))[0]
    return struct.unpack("f", struct.pack("I", bits + (1 if up else -1)))[0]


def float4_text(v: float) -> str:
    """PostgreSQL 15's text of a real (float4out): the shortest digits strictly within
    half a float32 ulp of ``v`` (src/common/f2s.c; the closest of that length), fixed
    notation for decimal exponents -4 to 5, else ``d.ddde+NN``.

    >>> [float4_text(x) for x in (2.0, 1e6, 0.1, 308148.125, 3.75e9, float("inf"))]
    ['2', '1e+06', '0.1', '308148.12', '3.7500001e+09', 'Infinity']
    """
    if (special := _special(v)) is not None:
        return special
    a = _float32(abs(v))
    exact = Decimal(a)
    above = _next_float32(a, True)
    below = _next_float32(a, False) if a > 1.4e-45 else 0.0
    lo = (exact - Decimal(below)) / 2
    hi = (Decimal(above) - exact) / 2 if above != float("inf") else lo  # the largest real
    digits = None
    for p in range(1, 10):
        near = Decimal(f"{a:.{p - 1}e}")  # the p digits closest to a
        step = Decimal(1).scaleb(near.adjusted() - p + 1)
        for cand in (near, near - step, near + step):
            if cand > 0 and -lo < cand - exact < hi and (
                    digits is None or abs(cand - exact) < abs(digits - exact)):
                digits = cand
        if digits is not None:
            break
    return _digits_text(digits, v < 0, 6)


# ----------------------------------------------------------------------------- text as numeric

#: Digits after the point of the DuckDB type an unconstrained ``numeric`` of text becomes
#: (the product of two such values keeps twice as many, within DuckDB's 38).
TEXT_NUMERIC_SCALE = 9
TEXT_NUMERIC_TYPE = f"DECIMAL({MAX_DIGITS},{TEXT_NUMERIC_SCALE})"
#: PostgreSQL 15's numeric_in: blanks, a sign, digits with one point (at least one digit),
#: an exponent (strtol's: blanks and a sign allowed before its digits), blanks.
_NUMERIC_TEXT = re.compile(r"[ \t\n\r\v\f]*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))"
                           r"(?:[eE][ \t\n\r\v\f]*([+-]?[0-9]+))?[ \t\n\r\v\f]*")
_SPECIAL = re.compile(r"[ \t\n\r\v\f]*(nan|[+-]?inf|[+-]?infinity)[ \t\n\r\v\f]*", re.IGNORECASE)


def numeric_in(text: str) -> Decimal:
    """PostgreSQL 15's ``text::numeric``: the exact value (``Decimal('NaN')``,
    ``Decimal('Infinity')`` for its special values); ``ValueError`` with PostgreSQL's message
    for anything else.

    >>> numeric_in(" 1.50 "), numeric_in("+.5e-1"), numeric_in("1e 3"), numeric_in("-Inf")
    (Decimal('1.50'), Decimal('0.05'), Decimal('1E+3'), Decimal('-Infinity'))
    >>> numeric_in("1_000")
    Traceback (most recent call last):
    ...
    ValueError: invalid input syntax for type numeric: "1_000"
    """
    m = _NUMERIC_TEXT.fullmatch(text)
    if m is None:
        special = _SPECIAL.fullmatch(text)
        if special is None:
            raise ValueError(f'invalid input syntax for type numeric: "{text}"')
        word = special.group(1).lower()
        return Decimal("NaN") if word == "nan" else Decimal("-Infinity" if word[0] == "-" else "Infinity")
    mantissa, exponent = m.group(1), m.group(2)
    if exponent is not None and abs(int(exponent)) >= 2**31 // 2:
        raise ValueError("value overflows numeric format")
    if exponent is not None and abs(int(exponent)) > 1000 and Decimal(mantissa.rstrip(".") or "0"):
        raise _unsupported(f"numeric {text.strip()} (from text) with an exponent past 1000")
    if mantissa.endswith("."):
        mantissa = mantissa[:-1]
    return _EXACT.scaleb(Decimal(mantissa), int(exponent or 0))


def _unsupported(what: str, why: str = "") -> ValueError:
    # A value colmz does not hold, named (the caller turns the message into UnsupportedSQL)
    return ValueError(f"{what} is not supported by colmz{why}")


def numeric_typmod(text: str, precision: int | None = None, scale: int | None = None) -> Decimal:
    """``text::numeric(precision, scale)`` as PostgreSQL 15 computes it (rounded half away
    from zero at ``scale``; "numeric field overflow" past ``precision - scale`` integer
    digits), or, without ``precision``, ``text::numeric`` as colmz holds it
    (:data:`TEXT_NUMERIC_TYPE`): ``ValueError`` naming a value it cannot hold exactly.

    >>> numeric_typmod("1.005", 10, 2), numeric_typmod("-1.005", 10, 2), numeric_typmod("2.50")
    (Decimal('1.01'), Decimal('-1.01'), Decimal('2.500000000'))
    >>> numeric_typmod("123.4", 4, 2)
    Traceback (most recent call last):
    ...
    ValueError: numeric field overflow
    """
    v = numeric_in(text)
    if v.is_nan() or (v.is_infinite() and precision is None):
        raise _unsupported(f"numeric {text.strip()} (from text)", " (DuckDB's DECIMAL has no NaN or infinity)")
    if v.is_infinite():
        raise ValueError("numeric field overflow")
    exact = precision is None
    precision = MAX_DIGITS if exact else precision
    scale = TEXT_NUMERIC_SCALE if scale is None else scale
    q = v.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_EXACT)
    if exact and q != v:
        raise _unsupported(f"numeric {text.strip()} (from text) with more than {TEXT_NUMERIC_SCALE} digits after "
                           "the point", f" (it reads text as {TEXT_NUMERIC_TYPE}): cast it to numeric(p, s) or float8")
    if q and q.adjusted() + 1 > precision - scale:
        if exact:
            raise _unsupported(f"numeric {text.strip()} (from text) with more than {precision - scale} digits "
                               "before the point", f" (it reads text as {TEXT_NUMERIC_TYPE})")
        raise ValueError("numeric field overflow")
    return q


def _arrow_numeric_in(values: pa.Array) -> pa.Array:
    # NUMERIC_IN over one vector of text (DuckDB passes no NULLs to it)
    return pa.array([None if v is None else numeric_typmod(v) for v in values.to_pylist()],
                    pa.decimal128(MAX_DIGITS, TEXT_NUMERIC_SCALE))


def _arrow_numeric_typmod(values: pa.Array, precision: pa.Array, scale: pa.Array) -> pa.Array:
    # NUMERIC_TYPMOD: the rounded value's text, which DuckDB's cast to DECIMAL(p, s) reads exactly
    return pa.array([None if v is None else format(numeric_typmod(v, p, s), "f")
                     for v, p, s in zip(values.to_pylist(), precision.to_pylist(), scale.to_pylist())], pa.string())


NUMERIC_IN = RESERVED_PREFIX + "numeric_in"
NUMERIC_TYPMOD = RESERVED_PREFIX + "numeric_typmod"
NUMERIC_IN_GUARD = RESERVED_PREFIX + "numeric_in_guard"
#: ``(name, function over Arrow arrays, argument types, result type)``: registered on every
#: colmz connection (a NULL argument gives NULL).
TEXT_NUMERIC_FUNCTIONS = (
    (NUMERIC_IN, _arrow_numeric_in, ("VARCHAR",), TEXT_NUMERIC_TYPE),
    (NUMERIC_TYPMOD, _arrow_numeric_typmod, ("VARCHAR", "INTEGER", "INTEGER"), "VARCHAR"),
)
#: DuckDB's types of a value computed from a NUMERIC_IN (``+``, ``*``, sum, min ... of DECIMAL(38,
#: s) give DECIMAL(38, s') with s' >= s): colmz's printers of text refuse them wherever they are
#: printed (a subquery's column too), since PostgreSQL prints each value's own scale.
WIDE_DECIMALS = tuple(f"DECIMAL({MAX_DIGITS},{s})" for s in range(TEXT_NUMERIC_SCALE, MAX_DIGITS + 1))
#: The refusal of printing one of :data:`WIDE_DECIMALS` (an SQL ``error()`` call).
WIDE_DECIMAL_REFUSAL = (
    "error('the text of a numeric read from text (x::numeric, x text), or of a DECIMAL of "
    f"{MAX_DIGITS} digits and scale {TEXT_NUMERIC_SCALE} or more, is not supported by colmz (PostgreSQL "
    "prints the scale each value is written with): cast it to numeric(p, s), an integer or float8 first')")


def wide_decimal(typeof: str) -> str:
    """SQL testing whether ``typeof`` (an SQL expression: a value's DuckDB type name) is one of
    :data:`WIDE_DECIMALS`."""
    return f"{typeof} IN ({', '.join(repr(t) for t in WIDE_DECIMALS)})"


#: ``NUMERIC_IN_GUARD(x)``: ``x`` unless it is a decimal or a double (a value computed from a
#: NUMERIC_IN, whose scale may be wider than PostgreSQL's), whose text is refused.
#: The macro of PostgreSQL's text of a DECIMAL: DuckDB's, but a DECIMAL(p, p)'s (whether
#: it is one is folded when DuckDB binds the query) with its leading zero (DuckDB prints
#: 0.001 as .001, PostgreSQL as 0.001, also inside jsonb).
DECIMAL_TEXT = RESERVED_PREFIX + "decimal_text"
NUMERIC_MACROS = (
    f"CREATE OR REPLACE MACRO {DECIMAL_TEXT}(x) AS CASE WHEN typeof(x) LIKE 'DECIMAL(%' AND "
    "split_part(typeof(x), ',', 1) = 'DECIMAL(' || rtrim(split_part(typeof(x), ',', 2), ')') "
    "THEN regexp_replace(CAST(x AS VARCHAR), '^(-?)[.]', '\\10.') ELSE CAST(x AS VARCHAR) END",
    f"CREATE OR REPLACE MACRO {NUMERIC_IN_GUARD}(x) AS CASE WHEN typeof(x) LIKE 'DECIMAL%' OR typeof(x) = 'DOUBLE' "
    "THEN error('the text of a numeric read from text (x::numeric, x text) is not supported by colmz (PostgreSQL "
    f"prints the scale each value is written with, colmz holds it as {TEXT_NUMERIC_TYPE}): cast it to "
    "numeric(p, s), an integer or float8 first') ELSE x END",
)
