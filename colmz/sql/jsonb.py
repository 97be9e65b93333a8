"""PostgreSQL's jsonb functions and operators, and ``initcap``, for translate.

colmz keeps a jsonb value as PostgreSQL's jsonb text (:func:`jsonb_dump`: object keys
sorted by length then bytes, the last of duplicate keys kept, ``": "`` and ``", "`` between
items, numbers as ``numeric`` prints them); DuckDB sees it as text (a ``JSON`` cast, or a
``VARCHAR`` column). The functions here read that text (:func:`jsonb_load`: numbers as
``Decimal``, so ``1.50`` stays ``1.50`` and ``1e3`` is ``1000``) and print their jsonb
results the same way, so every value they give back is PostgreSQL's text of it.

jsonb values are compared, ordered and grouped by :func:`jsonb_key`, a byte string ordered as
PostgreSQL orders jsonb (``compareJsonbContainers``: a number by its value, so ``1.0`` and
``1`` are one value printed two ways); DISTINCT and GROUP BY of text are jsonb's only over
:func:`jsonb_plain` values (no number written with trailing zeros) -- the rules of
:mod:`colmz.sql.jsonbcols` call both.

The rules (:data:`CALLS`, :data:`OPERATORS`) are entries of the table of transforms
(:mod:`colmz.sql.transforms`): each gives the DuckDB text of one node's span, calling the
Python functions registered on every colmz connection (:data:`FUNCTIONS`, over Arrow) and the
macros of :data:`MACROS`. A jsonb result is ``CAST(... AS JSON)`` so that a value passed on
to another jsonb function is known to be jsonb when DuckDB binds the query.

* ``#>``, ``#>>``, ``?``, ``?|``, ``?&`` do not parse in DuckDB: :func:`spell_operators`
  writes them as operators DuckDB parses at the same precedence (PostgreSQL's "any other
  operator", left to right) before the tree is read; their rules then make them calls. One
  left unrewritten is refused by name (:func:`refuse_spelled`).
* A value turned into jsonb (``to_jsonb``, ``jsonb_build_object``/``_array``, ``jsonb_agg``,
  ``jsonb_object_agg``) takes its type's jsonb form: a number as written (a double as
  PostgreSQL prints it), a boolean, a string quoted as PostgreSQL quotes it, a jsonb value
  as itself, NULL as ``null`` inside a container. colmz's jsonb columns are text to DuckDB,
  so a value DuckDB types as text that is not visibly text here (a string literal, a cast
  to text, a text function) nor jsonb is refused when it runs (cast it).
* ``@>`` and ``<@`` are jsonb containment when an operand is visibly jsonb (a cast to
  jsonb, a JSON object or array literal, a jsonb result); anything else is left to the
  array rules of translate.
* Set-returning calls (``jsonb_array_elements[_text]``, ``jsonb_object_keys``, and as a
  ``FROM`` item also ``jsonb_each[_text]``) unnest a list: in the select list a row per
  element, as PostgreSQL's set-returning functions there.
"""

from __future__ import annotations

import decimal
import json
import math
import re
import struct

from colmz.sql.build import RESERVED_PREFIX
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.numeric import (
    DECIMAL_TEXT,
    NUMERIC_IN,
    NUMERIC_IN_GUARD,
    WIDE_DECIMAL_REFUSAL,
    float4_text,
    float8_text,
    wide_decimal,
)

__all__ = [
    "CALLS",
    "FUNCTIONS",
    "MACROS",
    "NULL_FUNCTIONS",
    "OPERATORS",
    "SPELLED",
    "TEXT_CALLS",
    "TEXT_TYPE",
    "arrow_entry",
    "float_out_of_range",
    "initcap",
    "jsonb_contains",
    "jsonb_dump",
    "jsonb_exists",
    "jsonb_key",
    "jsonb_load",
    "jsonb_path",
    "jsonb_plain",
    "jsonb_typeof",
    "refuse_spelled",
    "from_rows",
    "spell_operators",
    "visibly_jsonb",
    "visibly_text",
]

P = RESERVED_PREFIX


# ----------------------------------------------------------------------------- jsonb text

def _sort_key(k: str):
    b = k.encode()
    return (len(b), b)  # PostgreSQL's jsonb orders keys by length, then bytes


def jsonb_dump(v) -> str:
    """PostgreSQL's jsonb text of the Python value ``v`` (as :func:`jsonb_load` reads it).

    >>> jsonb_dump({"bb": [decimal.Decimal("1.50"), None], "a": "é"})
    '{"a": "é", "bb": [1.50, null]}'
    """
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + jsonb_dump(v[k])
                               for k in sorted(v, key=_sort_key)) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(jsonb_dump(x) for x in v) + "]"
    if isinstance(v, decimal.Decimal):
        out = format(v, "f")
        return out.lstrip("-") if v.is_zero() else out  # numeric prints no negative zero
    if v is True or v is False or v is None:
        return json.dumps(v)
    return json.dumps(v, ensure_ascii=False)


def _fail(x):
    raise ValueError(x)


def jsonb_load(text: str):
    """The value of JSON ``text``: numbers as ``Decimal``; ``ValueError`` when not JSON."""
    return json.loads(text, parse_float=decimal.Decimal, parse_int=decimal.Decimal, parse_constant=_fail)


# PostgreSQL's order of jsonb values (compareJsonbContainers, jsonb_util.c): two values are
# compared token by token as its iterator gives them; a scalar's type orders before its value
# (null < string < number < boolean < array < object), a container's count before its
# contents (a top-level scalar is a one-element "raw scalar" array, below a real array of one
# element), an object's pairs in its stored key order.
_TAG_NULL, _TAG_STRING, _TAG_NUMBER, _TAG_BOOL, _TAG_ARRAY, _TAG_OBJECT = b"\x01", b"\x02", b"\x03", b"\x04", \
    b"\x05", b"\x06"
_EXPONENT_BIAS = 1 << 31


def _number_key(v: decimal.Decimal) -> bytes:
    # order-preserving and prefix-free: sign, then (for a non-zero value) the exponent of its
    # leading digit and its digits without trailing zeros, each digit byte above the end
    # byte; a negative value's bytes inverted
    if v.is_zero():
        return b"\x02"
    sign, digits, exponent = v.normalize(decimal.Context(prec=max(len(v.as_tuple().digits), 1))).as_tuple()
    lead = len(digits) + exponent - 1
    body = (lead + _EXPONENT_BIAS).to_bytes(4, "big") + bytes(d + 1 for d in digits) + b"\x00"
    return b"\x01" + bytes(255 - b for b in body) if sign else b"\x03" + body


def _token_key(v, out: list) -> None:
    if isinstance(v, dict):
        out.append(_TAG_OBJECT + len(v).to_bytes(4, "big"))
        for k in sorted(v, key=_sort_key):
            out.append(_TAG_STRING + k.encode() + b"\x00")
            _token_key(v[k], out)
    elif isinstance(v, list):
        out.append(_TAG_ARRAY + len(v).to_bytes(4, "big") + b"\x01")
        for x in v:
            _token_key(x, out)
    elif v is None:
        out.append(_TAG_NULL)
    elif v is True or v is False:
        out.append(_TAG_BOOL + (b"\x01" if v else b"\x00"))
    elif isinstance(v, str):
        out.append(_TAG_STRING + v.encode() + b"\x00")  # (jsonb holds no NUL character)
    else:
        out.append(_TAG_NUMBER + _number_key(v))


def jsonb_key(doc: str) -> bytes:
    """A byte string whose order is PostgreSQL's order of the jsonb text ``doc`` (strings in
    the C collation: byte order) and whose equality is jsonb's equality (``1.0`` is ``1``):
    what colmz compares, groups and sorts jsonb values by.

    >>> jsonb_key('1.0') == jsonb_key('1'), jsonb_key('{"a": 1.50}') == jsonb_key('{"a": 1.5}')
    (True, True)
    >>> sorted(['10', '9', '"z"', 'null', '[]', '[1]', 'true', '{}'], key=jsonb_key)
    ['[]', 'null', '"z"', '9', '10', 'true', '[1]', '{}']
    """
    v = jsonb_load(doc)
    out: list = []
    if isinstance(v, (dict, list)):
        _token_key(v, out)
    else:  # a raw scalar: a one-element array below any real array of one element
        out.append(_TAG_ARRAY + (1).to_bytes(4, "big") + b"\x00")
        _token_key(v, out)
    return b"".join(out)


def _plain(v) -> bool:
    if isinstance(v, dict):
        return all(_plain(x) for x in v.values())
    if isinstance(v, list):
        return all(_plain(x) for x in v)
    if isinstance(v, decimal.Decimal):
        t = v.as_tuple()
        return not (isinstance(t.exponent, int) and t.exponent < 0 and t.digits[-1] == 0)
    return True


def jsonb_plain(doc: str) -> str:
    """``doc`` itself when its every number is written without trailing fractional zeros
    (so its text is equal exactly where its jsonb value is: ``1`` and ``1.0`` are one jsonb
    value, two texts); else a refusal (``ValueError`` naming colmz): what DISTINCT, GROUP
    BY and set operations of jsonb read, for PostgreSQL keeps one of the texts of equal
    values, which colmz cannot choose as PostgreSQL does.

    >>> jsonb_plain('{"a": [1, 2.5, 100]}')
    '{"a": [1, 2.5, 100]}'
    >>> jsonb_plain('[1.0]')
    Traceback (most recent call last):
    ...
    ValueError: DISTINCT, GROUP BY or a set operation over jsonb holding a number written with trailing zeros (1.0 beside 1, one jsonb value) is not supported by colmz
    """
    if not _plain(jsonb_load(doc)):
        raise ValueError("DISTINCT, GROUP BY or a set operation over jsonb holding a number written with trailing "
                         "zeros (1.0 beside 1, one jsonb value) is not supported by colmz")
    return doc


def jsonb_typeof(doc: str) -> str:
    """PostgreSQL's ``jsonb_typeof``.

    >>> [jsonb_typeof(x) for x in ('{}', '[1]', '"a"', '1.0', 'true', 'null')]
    ['object', 'array', 'string', 'number', 'boolean', 'null']
    """
    return _TYPE_NAMES.get(type(jsonb_load(doc)), "number")


#: jsonb_typeof's name of each Python type jsonb_load reads a value as (a number: Decimal).
_TYPE_NAMES = {dict: "object", list: "array", str: "string", type(None): "null", bool: "boolean"}


def jsonb_scalar(doc: str, target: str) -> str:
    """``doc`` itself when PostgreSQL casts its jsonb value to ``target`` (a number to a
    numeric type, a boolean to ``boolean``) -- a number cast to an integer type rounded half
    away from zero, as PostgreSQL's numeric is; PostgreSQL's error otherwise (another kind of
    value, a number past the type's range).

    >>> jsonb_scalar('1.50', 'numeric'), jsonb_scalar('-2.5', 'integer')
    ('1.50', '-3')
    >>> jsonb_scalar('null', 'double precision')
    Traceback (most recent call last):
    colmz.sql.SQLError: cannot cast jsonb null to type double precision
    """
    v = jsonb_load(doc)
    kind = _TYPE_NAMES.get(type(v), "number")
    if kind != ("boolean" if target == "boolean" else "number"):
        raise SQLError(f"cannot cast jsonb {'numeric' if kind == 'number' else kind} to type {target}")
    if target in _INT_BITS:
        n = int(v.to_integral_value(decimal.ROUND_HALF_UP))  # (ties away from zero)
        if not -(2 ** _INT_BITS[target]) <= n < 2 ** _INT_BITS[target]:
            raise SQLError(f"{target} out of range")
        return str(n)
    if target in ("real", "double precision") and v.is_finite() and float_out_of_range(v, target):
        raise SQLError(f'"{v:f}" is out of range for type {target}')  # (numeric_out's digits)
    return doc


_INT_BITS = {"smallint": 15, "integer": 31, "bigint": 63}


def float_out_of_range(v: decimal.Decimal, name: str) -> bool:
    """Whether ``v`` read as a ``name`` (``"real"`` or ``"double precision"``) rounds to an
    infinity (3.4028235e38 is the largest real, as strtof rounds it) or, nonzero, to zero:
    PostgreSQL's float input raises there.

    >>> [float_out_of_range(decimal.Decimal(x), "real") for x in ("3.4028235e38", "1e39", "1e-50", "0")]
    [False, True, True, False]
    """
    d = float(v)
    if name == "real":
        try:
            d = struct.unpack("f", struct.pack("f", d))[0]
        except OverflowError:
            return True
    return math.isinf(d) or (v != 0 and d == 0)


def _step(v, key: str):
    # one step of a path: an object's field, an array's element (an integer, negative
    # from the end), None where there is none
    if isinstance(v, dict):
        return v.get(key, _MISSING)
    if isinstance(v, list):
        try:
            i = int(key.strip())
        except ValueError:
            return _MISSING
        i = i + len(v) if i < 0 else i
        return v[i] if 0 <= i < len(v) else _MISSING
    return _MISSING


_MISSING = object()


def jsonb_path(doc: str, path: list, text: bool) -> str | None:
    """PostgreSQL's ``doc #> path`` (``text`` false) or ``doc #>> path``: the value at the
    path of keys and indexes, None when there is none (or a path element is NULL).

    >>> jsonb_path('{"a": [1, {"b": "x"}]}', ["a", "-1", "b"], True), jsonb_path('[1]', [], False)
    ('x', '[1]')
    """
    v = jsonb_load(doc)
    for key in path:
        if key is None:
            return None
        v = _step(v, key)
        if v is _MISSING:
            return None
    return _dumped(v, text)


def _dumped(v, text: bool) -> str | None:
    # a value's jsonb text, or with ``text`` as ``->>`` gives it (a string itself, null NULL)
    if text:
        return None if v is None else v if isinstance(v, str) else jsonb_dump(v)
    return jsonb_dump(v)


_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # json's whitespace (PostgreSQL's json lexer)
_JSON_READER = json.JSONDecoder()


def _json_span(doc: str, key: str, index: bool) -> tuple[int, int] | None:
    # Where json's value at ``key`` is in ``doc`` as written (an object's field, the last of
    # a repeated key, as PostgreSQL's json -> takes it; an array's element, negative from the
    # end), None when there is none
    space = _JSON_SPACE.match
    i = space(doc).end()
    opening = doc[i : i + 1]
    if opening != ("[" if index else "{"):
        return None
    spans: list[tuple[int, int]] = []
    found = None
    i = space(doc, i + 1).end()
    while i < len(doc) and doc[i] not in "]}":
        if not index:
            name, i = _JSON_READER.raw_decode(doc, i)
            i = space(doc, space(doc, i).end() + 1).end()  # past the ':'
        _, end = _JSON_READER.raw_decode(doc, i)
        if index:
            spans.append((i, end))
        elif name == key:
            found = (i, end)
        i = space(doc, end).end()
        if doc[i : i + 1] == ",":
            i = space(doc, i + 1).end()
    if not index:
        return found
    try:
        k = int(key)
    except ValueError:
        return None
    k = k + len(spans) if k < 0 else k
    return spans[k] if 0 <= k < len(spans) else None


def json_path(doc: str | None, path: list, text: bool) -> str | None:
    """PostgreSQL's ``doc #> path`` (``text`` false) or ``doc #>> path`` of json (not
    jsonb): the value at the path of keys and indexes as ``doc`` writes it (spacing, key
    order, numbers), a string's own text for ``#>>``; None when there is none.

    >>> json_path('{"a": [1,  {"b" : "x"}], "a": [2,  3]}', ["a"], False)
    '[2,  3]'
    >>> json_path('{"a": [1,  {"b" : "x"}]}', ["a", "-1", "b"], True), json_path('[1 ]', [], False)
    ('x', '[1 ]')
    """
    if doc is None or path is None:
        return None
    start, end = _JSON_SPACE.match(doc).end(), len(doc.rstrip(" \t\n\r"))
    for key in path:
        if key is None:
            return None
        span = _json_span(doc[start:end], key, doc[start : start + 1] == "[")
        if span is None:
            return None
        start, end = start + span[0], start + span[1]
    value = doc[start:end]
    if text and value.startswith('"'):
        return json.loads(value)
    return None if text and value == "null" else value


def json_get(doc: str | None, key: str | None, index: bool, text: bool) -> str | None:
    """PostgreSQL's ``doc -> key`` (``text`` false) or ``doc ->> key`` of json (not jsonb):
    an object's field (``key`` a name) or an array's element (``index``) as ``doc`` writes
    it (:func:`json_path` of the one key); None when there is none.

    >>> json_get('{"a": [1,  2]}', "a", False, False), json_get('[1, "q"]', "-1", True, True)
    ('[1,  2]', 'q')
    """
    if doc is None or key is None:
        return None
    if not doc.lstrip(" \t\n\r").startswith("[" if index else "{"):
        return None
    return json_path(doc, [key], text)


def jsonb_exists(doc: str, keys: list, mode: str) -> bool:
    """PostgreSQL's ``?`` (``mode`` "one"), ``?|`` ("any") and ``?&`` ("all"): an object's
    top-level key, an array's string element or a string scalar equal to the key(s); NULL
    keys of ``?|``/``?&`` are passed over.

    >>> jsonb_exists('{"a": 1}', ["a"], "one"), jsonb_exists('["a", 1]', ["b", "a"], "any")
    (True, True)
    >>> jsonb_exists('{"a": 1}', ["a", "b"], "all"), jsonb_exists('"a"', ["a"], "one")
    (False, True)
    """
    v = jsonb_load(doc)
    if isinstance(v, dict):
        present = set(v)
    elif isinstance(v, list):
        present = {x for x in v if isinstance(x, str)}
    else:
        present = {v} if isinstance(v, str) else set()
    wanted = [k for k in keys if k is not None]
    if mode == "all":
        return all(k in present for k in wanted)
    return any(k in present for k in wanted)


def _contains(a, b, top: bool) -> bool:
    # PostgreSQL's jsonb containment (src/backend/utils/adt/jsonb_util.c JsonbDeepContains)
    if isinstance(a, dict):
        return isinstance(b, dict) and all(k in a and _contains(a[k], bv, False) for k, bv in b.items())
    if isinstance(a, list):
        if isinstance(b, list):
            return all(any(_contains(x, y, False) for x in a) for y in b)
        # an array contains a primitive only at the top level
        return top and not isinstance(b, dict) and any(_same(x, b) for x in a)
    return _same(a, b)


def _same(x, y) -> bool:
    if isinstance(x, (dict, list)) or isinstance(y, (dict, list)):
        return False
    if isinstance(x, bool) or isinstance(y, bool) or x is None or y is None:
        return x is y
    return type(x) is type(y) and x == y


def jsonb_contains(a: str, b: str) -> bool:
    """PostgreSQL's ``a @> b`` of two jsonb texts.

    >>> jsonb_contains('{"a": [1, 2], "b": 1}', '{"a": [2]}'), jsonb_contains('[1, [2]]', '[2]')
    (True, False)
    >>> jsonb_contains('[1, 2]', '1'), jsonb_contains('1.0', '1')
    (True, True)
    """
    return _contains(jsonb_load(a), jsonb_load(b), True)


def _strip_nulls(v):
    if isinstance(v, dict):
        return {k: _strip_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_strip_nulls(x) for x in v]
    return v


def _pretty(v, depth: int) -> str:
    # PostgreSQL's jsonb_pretty: four spaces per level, an empty container as {} / []
    if not isinstance(v, (dict, list)):
        return jsonb_dump(v)
    pad, inner = "    " * depth, "    " * (depth + 1)
    if isinstance(v, dict):
        items = [inner + json.dumps(k, ensure_ascii=False) + ": " + _pretty(v[k], depth + 1)
                 for k in sorted(v, key=_sort_key)]
    else:
        items = [inner + _pretty(x, depth + 1) for x in v]
    ends = "{}" if isinstance(v, dict) else "[]"  # (an empty one still on two lines)
    return ends[0] + "\n" + ",\n".join(items) + ("\n" if items else "") + pad + ends[1]


def _delete(doc: str, key: str) -> str:
    v = jsonb_load(doc)
    if isinstance(v, dict):
        v.pop(key, None)
    elif isinstance(v, list):
        v = [x for x in v if x != key or not isinstance(x, str)]
    else:
        raise ValueError("cannot delete from scalar")
    return jsonb_dump(v)


def _array_length(doc: str) -> int:
    v = jsonb_load(doc)
    if not isinstance(v, list):
        raise ValueError(f"cannot get array length of {'a scalar' if not isinstance(v, dict) else 'a non-array'}")
    return len(v)


def _elements(doc: str, text: bool) -> list:
    v = jsonb_load(doc)
    if not isinstance(v, list):
        raise ValueError(f"cannot extract elements from {'an object' if isinstance(v, dict) else 'a scalar'}")
    return [_dumped(x, text) for x in v]


def _object(doc: str, what: str) -> dict:
    v = jsonb_load(doc)
    if not isinstance(v, dict):
        if what == "jsonb_object_keys":
            raise ValueError(f"cannot call jsonb_object_keys on {'an array' if isinstance(v, list) else 'a scalar'}")
        raise ValueError(f"cannot call {what} on a non-object")
    return v


def _keys(doc: str) -> list:
    return sorted(_object(doc, "jsonb_object_keys"), key=_sort_key)


def _values(doc: str, text: bool) -> list:
    v = _object(doc, "jsonb_each_text" if text else "jsonb_each")
    return [_dumped(v[k], text) for k in sorted(v, key=_sort_key)]


def _object_of(null_key):
    # [[key, jsonb value text], ...] as an object, the last of duplicate keys kept;
    # ``null_key(i)``: the error of a NULL key at pair i
    def build(pairs: list) -> str:
        out = {}
        for i, (k, v) in enumerate(pairs):
            if k is None:
                raise ValueError(null_key(i))
            out[k] = jsonb_load(v)
        return jsonb_dump(out)
    return build


def _float_value(text_of):
    # a double's (float8_text) or a real's (float4_text) jsonb text: a number as PostgreSQL
    # prints it, NaN and the infinities as strings
    def dump(x: float) -> str:
        t = text_of(x)
        return json.dumps(t) if t in ("NaN", "Infinity", "-Infinity") else jsonb_dump(decimal.Decimal(t))
    return dump


# ----------------------------------------------------------------------------- text functions

def initcap(s: str) -> str:
    """PostgreSQL's ``initcap`` in the C locale: the first letter of each run of ASCII
    letters and digits upper case, the others lower case; other characters are neither
    letters nor changed (as ``upper``/``lower`` there).

    >>> initcap("hELLO wORLD-foo_bar 1st"), initcap("é-école")
    ('Hello World-Foo_Bar 1st', 'é-éCole')
    """
    out, prev = [], False
    for ch in s:
        if ch.isascii():
            ch = ch.lower() if prev else ch.upper()
        out.append(ch)
        prev = ch.isascii() and ch.isalnum()
    return "".join(out)


# ----------------------------------------------------------------------------- Arrow functions

def arrow_entry(name: str, fn, args: tuple[str, ...], result: str = "VARCHAR", nulls: bool = False) -> tuple:
    """The DuckDB function entry ``(name, function over Arrow, argument types, result type)``
    of ``fn``, a function of Python values: a NULL argument makes a NULL result unless
    ``nulls`` (then ``fn`` sees it). Every Python function colmz registers is one."""
    def call(cols):
        import pyarrow as pa

        typ = {"VARCHAR": pa.string(), "BOOLEAN": pa.bool_(), "BIGINT": pa.int64(),
               "VARCHAR[]": pa.list_(pa.string()), "BLOB": pa.binary()}[result]
        rows = zip(*(c.to_pylist() for c in cols))
        return pa.array([None if not nulls and any(a is None for a in r) else fn(*r) for r in rows], typ)

    # DuckDB reads the number of arguments off the signature
    n = fn.__code__.co_argcount
    over = {1: lambda a: call((a,)), 2: lambda a, b: call((a, b)), 3: lambda a, b, c: call((a, b, c)),
            4: lambda a, b, c, d: call((a, b, c, d))}[n]
    return name, over, args, result


JSONB_TYPEOF = P + "jsonb_typeof"
JSONB_PATH = P + "jsonb_path"
#: json's (not jsonb's) ``->``/``->>`` and ``#>``/``#>>``: the value as written (:func:`json_get`,
#: :func:`json_path`), with the arguments of ``JSONB_GET`` and ``JSONB_PATH``.
#: :func:`jsonb_scalar`: a jsonb value cast to a number or boolean, checked as PostgreSQL checks it.
JSONB_SCALAR = P + "jsonb_scalar"
JSON_GET = P + "json_get"
JSON_PATH = P + "json_path"
JSONB_EXISTS = P + "jsonb_exists"
JSONB_CONTAINS = P + "jsonb_contains"
JSONB_BUILD_OBJECT = P + "jsonb_build_object"
JSONB_OBJECT_AGG = P + "jsonb_object_agg"
JSONB_BUILD_ARRAY = P + "jsonb_build_array"
JSONB_STRIP_NULLS = P + "jsonb_strip_nulls"
JSONB_PRETTY = P + "jsonb_pretty"
JSONB_DELETE = P + "jsonb_delete"
JSONB_ARRAY_LENGTH = P + "jsonb_array_length"
JSONB_ELEMENTS = P + "jsonb_elements"
JSONB_KEYS = P + "jsonb_keys"
JSONB_VALUES = P + "jsonb_values"
JSONB_QUOTE = P + "jsonb_quote"
JSONB_FLOAT8 = P + "jsonb_float8"
JSONB_FLOAT4 = P + "jsonb_float4"
TO_JSONB = P + "to_jsonb"
TO_JSONB_NUMERIC = P + "to_jsonb_numeric"
#: :func:`jsonb_key` of a jsonb text: what a comparison, an ORDER BY, a GROUP BY of jsonb reads.
JSONB_KEY = P + "jsonb_key"
#: :func:`jsonb_plain` of a jsonb text: what DISTINCT, GROUP BY, a set operation of jsonb read.
JSONB_PLAIN = P + "jsonb_plain"
INITCAP = P + "initcap"

#: (name, function over Arrow, argument types, result type): registered on every colmz
#: connection (:func:`colmz.sql.run.connect`); a NULL argument gives NULL.
FUNCTIONS = (
    arrow_entry(JSONB_TYPEOF, jsonb_typeof, ("VARCHAR",)),
    arrow_entry(JSONB_KEY, jsonb_key, ("VARCHAR",), "BLOB"),
    arrow_entry(JSONB_PLAIN, jsonb_plain, ("VARCHAR",)),
    arrow_entry(JSONB_CONTAINS, jsonb_contains, ("VARCHAR", "VARCHAR"), "BOOLEAN"),
    arrow_entry(JSONB_EXISTS, jsonb_exists, ("VARCHAR", "VARCHAR[]", "VARCHAR"), "BOOLEAN"),
    arrow_entry(JSONB_BUILD_OBJECT, _object_of(lambda i: f"argument {2 * i + 1}: key must not be null"), ("VARCHAR[][]",)),
    arrow_entry(JSONB_OBJECT_AGG, _object_of(lambda i: "field name must not be null"), ("VARCHAR[][]",)),
    arrow_entry(JSONB_BUILD_ARRAY, lambda values: jsonb_dump([jsonb_load(v) for v in values]), ("VARCHAR[]",)),
    arrow_entry(JSONB_STRIP_NULLS, lambda d: jsonb_dump(_strip_nulls(jsonb_load(d))), ("VARCHAR",)),
    arrow_entry(JSONB_PRETTY, lambda d: _pretty(jsonb_load(d), 0), ("VARCHAR",)),
    arrow_entry(JSONB_DELETE, _delete, ("VARCHAR", "VARCHAR")),
    arrow_entry(JSONB_ARRAY_LENGTH, _array_length, ("VARCHAR",), "BIGINT"),
    arrow_entry(JSONB_ELEMENTS, _elements, ("VARCHAR", "BOOLEAN"), "VARCHAR[]"),
    arrow_entry(JSONB_KEYS, _keys, ("VARCHAR",), "VARCHAR[]"),
    arrow_entry(JSONB_VALUES, _values, ("VARCHAR", "BOOLEAN"), "VARCHAR[]"),
    arrow_entry(JSONB_QUOTE, jsonb_dump, ("VARCHAR",)),  # (a string's JSON text)
    arrow_entry(JSONB_FLOAT8, _float_value(float8_text), ("DOUBLE",)),
    arrow_entry(JSONB_FLOAT4, _float_value(float4_text), ("FLOAT",)),
    arrow_entry(INITCAP, initcap, ("VARCHAR",)),
    arrow_entry(JSONB_SCALAR, jsonb_scalar, ("VARCHAR", "VARCHAR")),
)
#: Functions that see NULL arguments (registered with DuckDB's special NULL handling).
NULL_FUNCTIONS = (
    arrow_entry(JSON_GET, json_get, ("VARCHAR", "VARCHAR", "BOOLEAN", "BOOLEAN"), nulls=True),
    arrow_entry(JSON_PATH, json_path, ("VARCHAR", "VARCHAR[]", "BOOLEAN"), nulls=True),
    arrow_entry(JSONB_PATH, lambda d, p, t: None if d is None or p is None else jsonb_path(d, p, t),
           ("VARCHAR", "VARCHAR[]", "BOOLEAN"), nulls=True),
)

_INTEGERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
             "UBIGINT")

#: Macros the rules call. ``to_jsonb`` of a value by its DuckDB type (read when the query is
#: bound): text is refused, because colmz's jsonb columns are text too (the rules quote a
#: value visibly text themselves).
MACROS = (
    f"CREATE OR REPLACE MACRO {TO_JSONB}(x) AS CASE WHEN x IS NULL THEN NULL "
    "WHEN typeof(x) = 'JSON' THEN CAST(x AS VARCHAR) "
    f"WHEN {wide_decimal('typeof(x)')} THEN {WIDE_DECIMAL_REFUSAL} "
    f"WHEN typeof(x) IN ({', '.join(repr(t) for t in _INTEGERS)}) THEN CAST(x AS VARCHAR) "
    f"WHEN typeof(x) LIKE 'DECIMAL%' THEN {DECIMAL_TEXT}(x) "
    "WHEN typeof(x) = 'BOOLEAN' THEN CAST(x AS VARCHAR) "
    f"WHEN typeof(x) = 'DOUBLE' THEN {JSONB_FLOAT8}(TRY_CAST(x AS DOUBLE)) "
    f"WHEN typeof(x) = 'FLOAT' THEN {JSONB_FLOAT4}(TRY_CAST(x AS FLOAT)) "
    "WHEN typeof(x) = 'DATE' THEN '\"' || regexp_replace(CAST(x AS VARCHAR), ' \\(BC\\)$', ' BC') || '\"' "
    "WHEN typeof(x) = 'VARCHAR' THEN error('a text value (or a jsonb column: colmz keeps those as text) "
    "turned into jsonb is not supported by colmz: cast it, x::text or x::jsonb') "
    "ELSE error('a value of type ' || typeof(x) || ' turned into jsonb is not supported by colmz') END",
    # a value that may be a PostgreSQL numeric DuckDB computes as a double (avg, a division):
    # PostgreSQL's jsonb number has the numeric's digits and scale
    f"CREATE OR REPLACE MACRO {TO_JSONB_NUMERIC}(x) AS CASE WHEN typeof(x) = 'DOUBLE' THEN error('a numeric "
    "value colmz computes as a double (a division, avg, a numeric function) turned into jsonb is not supported "
    f"by colmz: PostgreSQL keeps its numeric digits and scale; cast it to float8 or round(x, n) first') "
    f"ELSE {TO_JSONB}(x) END",
)


# ----------------------------------------------------------------------------- operators

#: PostgreSQL's operators DuckDB cannot parse -> the operator written for it (parsed by
#: DuckDB at the same precedence as PostgreSQL's: any other operator), and back.
SPELLED = {"#>": "<<@@", "#>>": "<<@@@", "?": "@@<<", "?|": "@@<<|", "?&": "@@<<&"}
_WRITTEN = {v: k for k, v in SPELLED.items()}


def spell_operators(text: str, toks) -> str:
    """``text`` with jsonb's ``#>``, ``#>>``, ``?``, ``?|``, ``?&`` written as the operators of
    :data:`SPELLED` (``toks`` its tokens); the text itself when it holds none.

    >>> from colmz.sql.tokens import tokenize
    >>> s = "SELECT j #> '{a}', j ?| ARRAY['b'] FROM t"
    >>> spell_operators(s, tokenize(s))
    "SELECT j  <<@@  '{a}', j  @@<<|  ARRAY['b'] FROM t"
    """
    if "?" not in text and "#" not in text:
        return text  # every operator spelled starts with one of these
    out, pos = [], 0
    for i, t in enumerate(toks):
        if t.kind != "op" or t.text not in SPELLED or t.start < pos:
            continue
        end, op = t.end, t.text
        if op == "?" and i + 1 < len(toks) and toks[i + 1].start == t.end and toks[i + 1].text in ("|", "&"):
            end, op = toks[i + 1].end, "?" + toks[i + 1].text
        out += [text[pos : t.start], " ", SPELLED[op], " "]
        pos = end
    return text if not out else "".join(out) + text[pos:]


def refuse_spelled(text: str) -> None:
    """UnsupportedSQL when ``text`` (translated) still holds an operator of :data:`SPELLED`
    (its rule did not take it: e.g. after ``->``)."""
    for spelled in sorted(_WRITTEN, key=len, reverse=True):
        if spelled in text:
            raise UnsupportedSQL(f"the jsonb operator {_WRITTEN[spelled]} is not supported by colmz here "
                                 "(parenthesise its operands, e.g. (j -> 'a') ? 'b')")


# ----------------------------------------------------------------------------- rules

#: PostgreSQL's text types as a cast writes them (lower case, words joined by one space; a
#: length allowed): a value cast to one is text.
TEXT_TYPE = re.compile(r"(text|varchar|string|character varying|char|character|bpchar)(\s*\(\s*\d+\s*\))?")
#: Calls whose result is text in PostgreSQL, whatever their arguments' types.
TEXT_CALLS = frozenset({"upper", "lower", "concat", "concat_ws", "substr", "substring", "trim", "ltrim",
                        "rtrim", "btrim", "replace", "lpad", "rpad", "left", "right", "repeat", "reverse",
                        "split_part", "md5", "chr", "string_agg", "regexp_replace", "translate", "to_hex",
                        "initcap", "format", "to_char", "||"})
#: Calls whose result is jsonb (a value of theirs is kept as jsonb, not quoted).
_JSONB_CALLS = frozenset({"to_jsonb", "jsonb_build_object", "jsonb_build_array", "jsonb_agg",
                          "jsonb_object_agg", "jsonb_strip_nulls", "jsonb_array_elements", "jsonb_extract_path",
                          "<<@@"})


def _type_of(node, text: str) -> str:
    t = node.children[1]
    return " ".join(text[t.start : t.end].lower().split()) if t.start >= 0 else ""


def _visibly(node, text: str) -> str:
    # "text", "jsonb" or "" (unknown until it runs) for a value node.
    if node.literal is not None:
        return "text" if node.literal.kind == "STRING" else ""
    if node.cls == "CAST" and len(node.children) == 2:
        t = _type_of(node, text)
        return "jsonb" if t in ("jsonb", "json") else "text" if TEXT_TYPE.fullmatch(t) else ""
    if node.cls == "LAMBDA":
        return "jsonb"  # ->
    if node.cls == "FUNCTION" and len(node.name) == 1:
        n = node.name[0].lower()
        if n in _JSONB_CALLS:
            return "jsonb"
        if n in TEXT_CALLS or n in ("->>", "<<@@@"):
            return "text"
    return ""


def visibly_jsonb(node, text: str) -> bool:
    """Whether the value node ``node`` (of the query ``text`` as the user wrote it) is jsonb
    by its own look: a cast to jsonb, ``->``, ``#>`` or a call whose result is jsonb."""
    if node.cls == "CAST" and len(node.children) == 2:
        return _type_of(node, text) == "jsonb"
    return _visibly(node, text) == "jsonb"


def visibly_text(node, text: str) -> bool:
    """Whether the value node ``node`` (of the query ``text``) is text by its own look: a
    string literal, a cast to a text type, ``->>``, ``#>>`` or a call whose result is text
    (not ``||``, which is jsonb's too)."""
    return _visibly(node, text) == "text" and not (node.cls == "FUNCTION" and node.name == ("||",))


def _to_jsonb(node, rendered: str, c) -> str:
    # the jsonb text of a value (NULL for NULL), an argument of call ``c``
    text = c.text
    kind = _visibly(node, text)
    if node.literal is not None and node.literal.kind == "NULL_LITERAL":
        return "CAST(NULL AS VARCHAR)"
    if NUMERIC_IN + "(" in rendered:
        rendered = f"{NUMERIC_IN_GUARD}({rendered})"  # a numeric whose scale may be wider than PostgreSQL's
    if kind == "text":
        return f"{JSONB_QUOTE}(CAST({rendered} AS VARCHAR))"
    if kind == "jsonb":
        return f"CAST({rendered} AS VARCHAR)"
    from colmz.sql.translate import numeric_source  # translate imports this module

    return f"{TO_JSONB_NUMERIC if numeric_source(node, text, c.numeric_names()) else TO_JSONB}({rendered})"


def _element(node, rendered: str, c) -> str:
    # a value inside a container: NULL is null
    return f"coalesce({_to_jsonb(node, rendered, c)}, 'null')"


def _as_jsonb(expr: str) -> str:
    return f"CAST({expr} AS JSON)"


def _scalar(c, n: int) -> list[str] | None:
    if not c.plain or len(c.arguments) != n:
        return None
    return c.args


def _doc(x: str) -> str:
    return f"CAST({x} AS VARCHAR)"


def _unary(template: str):
    # a call of one plain argument: ``template`` with {} its text as a jsonb document
    def rule(c):
        a = _scalar(c, 1)
        return None if a is None else template.format(_doc(a[0]))
    return rule


def _to_jsonb_call(c):
    a = _scalar(c, 1)
    return None if a is None else _as_jsonb(_to_jsonb(c.arguments[0], a[0], c))


def _build_object_call(c):
    if not c.plain:
        return None
    nodes, args = c.arguments, c.args
    if len(args) % 2:
        raise SQLError("argument list must have even number of elements")
    pairs = ", ".join(f"[CAST({args[i]} AS VARCHAR), {_element(nodes[i + 1], args[i + 1], c)}]"
                      for i in range(0, len(args), 2))
    return _as_jsonb(f"{JSONB_BUILD_OBJECT}(CAST([{pairs}] AS VARCHAR[][]))")


def _build_array_call(c):
    if not c.plain:
        return None
    items = ", ".join(_element(n, a, c) for n, a in zip(c.arguments, c.args))
    return _as_jsonb(f"{JSONB_BUILD_ARRAY}(CAST([{items}] AS VARCHAR[]))")


def _aggregate_parts(c) -> tuple[str, str] | None:
    # (text from after the call's "(" to its first argument, text after its last argument to
    # the end of the call: ORDER BY, ")", FILTER): the call rewritten around its arguments
    if c.window or c.table:
        raise UnsupportedSQL(f"{c.name}() as a window function is not supported by colmz")
    first, last = c.arguments[0], c.arguments[-1]
    open_at = c.text.index("(", c.node.start)
    return c.span_text(open_at + 1, first.start), c.span_text(last.end, c.node.end)


def _aggregate(builder: str, arity: int):
    # jsonb_agg(value) and jsonb_object_agg(key, value): the list of the values (of [key,
    # value] pairs) aggregated, built into one jsonb value
    def rule(c):
        if len(c.arguments) != arity or c.arguments[0].start < 0:
            return None
        head, tail = _aggregate_parts(c)
        x = _element(c.arguments[-1], c.args[-1], c)
        item = x if arity == 1 else f"[CAST({c.args[0]} AS VARCHAR), {x}]"
        return _as_jsonb(f"{builder}(list({head}{item}{tail})")
    return rule


def _set_returning(kind: str):
    # jsonb_array_elements(_text), jsonb_object_keys, jsonb_each(_text): a row per element
    def rule(c):
        if c.window or c.node.filter is not None or c.node.order_by or c.node.distinct or len(c.arguments) != 1:
            return None
        if c.inside:
            raise UnsupportedSQL(f"{c.name}() inside {c.inside} is not supported by colmz (PostgreSQL "
                                 "does not allow set-returning functions there)")
        d = _doc(c.args[0])
        if kind == "each":
            if not c.table:
                raise UnsupportedSQL(f"{c.name}() in the select list (a record per row) is not supported by "
                                     f"colmz: call it in FROM (SELECT key, value FROM t, {c.name}(...))")
            text = "true" if c.name.endswith("_text") else "false"
            value = f"unnest({JSONB_VALUES}({d}, {text}))"
            value = value if text == "true" else _as_jsonb(value)
            return f"(SELECT unnest({JSONB_KEYS}({d})) AS key, {value} AS value)"
        if kind == "keys":
            values = f"unnest({JSONB_KEYS}({d}))"
        else:
            text = kind == "elements_text"
            values = f"unnest({JSONB_ELEMENTS}({d}, {'true' if text else 'false'}))"
            values = values if text else _as_jsonb(values)
        return from_rows(c, values) if c.table else values
    return rule


_ALIAS = re.compile(r'\s*(?:AS\s+)?([A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+")(\s*\()?', re.IGNORECASE)
_NOT_ALIASES = frozenset({"WHERE", "JOIN", "ON", "ORDER", "GROUP", "LIMIT", "LEFT", "RIGHT", "INNER", "FULL",
                          "CROSS", "NATURAL", "UNION", "EXCEPT", "INTERSECT", "HAVING", "WINDOW", "OFFSET",
                          "USING", "LATERAL", "QUALIFY", "WITH"})


def from_rows(c, rows: str) -> str:
    """The FROM item of a one-column set-returning call ``c`` whose rows are the select item
    ``rows``: a subquery of them, its column named as PostgreSQL names it -- by the call's
    alias when it has one without a column list (``FROM f(x) AS e``), else by its OUT
    parameter (``value`` of ``jsonb_array_elements(_text)``) or the function's name -- and
    without an alias aliased by the function's name, as PostgreSQL's (``f.*``). ``WITH
    ORDINALITY`` after it is refused by name (it would follow the subquery)."""
    if re.match(r"\s*WITH\s+ORDINALITY\b", c.text[c.node.end :], re.IGNORECASE):
        raise UnsupportedSQL(f"{c.name}() WITH ORDINALITY is not supported by colmz")
    m = _ALIAS.match(c.text, c.node.end)
    if m and m.group(1).upper() not in _NOT_ALIASES:
        return f"(SELECT {rows} AS {c.name if m.group(2) else m.group(1)})"
    column = "value" if c.name.startswith("jsonb_array_elements") else c.name
    return f"(SELECT {rows} AS {column}) AS {c.name}"


def _row_to_json(c):
    if c.name == "row_to_json":
        raise UnsupportedSQL("row_to_json() is not supported by colmz (a row as a JSON object)")
    raise UnsupportedSQL(f"{c.name}() is not supported by colmz (json keeps its text as written): "
                         f"use {c.name.replace('json', 'jsonb')}()")


def _extract_path_call(c):
    # DuckDB's json_extract_path reads a JSON path and prints compact JSON
    op = "#>>" if c.name.endswith("_text") else "#>"
    raise UnsupportedSQL(f"{c.name}() is not supported by colmz (DuckDB's namesake reads JSON paths and "
                         f"prints compact JSON): use the operator {op}, e.g. x {op} '{{a,b}}'")


#: Function name as written -> rule (entries of :data:`colmz.sql.transforms.CALLS`).
CALLS = {
    "jsonb_typeof": _unary(JSONB_TYPEOF + "({})"), "jsonb_pretty": _unary(JSONB_PRETTY + "({})"),
    "jsonb_strip_nulls": _unary(_as_jsonb(JSONB_STRIP_NULLS + "({})")),
    "jsonb_array_length": _unary(f"CAST({JSONB_ARRAY_LENGTH}({{}}) AS INTEGER)"),
    "jsonb_build_object": _build_object_call, "jsonb_build_array": _build_array_call,
    "to_jsonb": _to_jsonb_call, "jsonb_agg": _aggregate(JSONB_BUILD_ARRAY, 1),
    "jsonb_object_agg": _aggregate(JSONB_OBJECT_AGG, 2),
    "jsonb_array_elements": _set_returning("elements"), "jsonb_array_elements_text": _set_returning("elements_text"),
    "jsonb_object_keys": _set_returning("keys"), "jsonb_each": _set_returning("each"),
    "jsonb_each_text": _set_returning("each"),
    "initcap": _unary(INITCAP + "({})"),
    "row_to_json": _row_to_json, "to_json": _row_to_json, "json_agg": _row_to_json,
    "json_build_object": _row_to_json,
    **dict.fromkeys(("json_extract_path", "json_extract_path_text", "jsonb_extract_path",
                     "jsonb_extract_path_text"), _extract_path_call),
}


def _path_list(node, rendered: str) -> str:
    # A text[] operand: PostgreSQL's array text in a string literal read here (as array_in
    # reads it: colmz.sql.transforms.pg_array_text); an ARRAY[...] (a DuckDB list) as it is.
    if node.literal is not None and node.literal.kind == "STRING":
        from colmz.sql.transforms import pg_array_text  # (transforms imports this module)

        items = pg_array_text(node.literal.text)
        if any(isinstance(x, list) for x in items):
            raise UnsupportedSQL("a multi-dimensional text[] path is not supported by colmz")
        return "CAST([" + ", ".join("NULL" if x is None else "'" + x.replace("'", "''") + "'" for x in items) \
            + "] AS VARCHAR[])"
    return f"CAST({rendered} AS VARCHAR[])"


def _path_op(text_result: bool):
    def rule(c):
        a, b = c.node.children
        x, y = c.text_of(a), c.text_of(b)
        # of a cast to json (not jsonb): the value as written (json_path), not jsonb
        json = a.cls == "CAST" and len(a.children) == 2 and _type_of(a, c.text) == "json"
        out = f"{JSON_PATH if json else JSONB_PATH}({_doc(x)}, {_path_list(b, y)}, {'true' if text_result else 'false'})"
        return out if text_result or json else _as_jsonb(out)
    return rule


def _exists_op(mode: str):
    def rule(c):
        a, b = c.node.children
        x, y = c.text_of(a), c.text_of(b)
        keys = f"[CAST({y} AS VARCHAR)]" if mode == "one" else _path_list(b, y)
        return f"{JSONB_EXISTS}({_doc(x)}, {keys}, '{mode}')"
    return rule


def _is_array(node, text: str) -> bool:
    if node.cls == "OPERATOR" and node.type == "ARRAY_CONSTRUCTOR" or node.cls == "FUNCTION" and node.name in (
            ("list_value",), ("array",)):
        return True
    return node.cls == "CAST" and len(node.children) == 2 and _type_of(node, text).endswith("]")


def _json_literal(node) -> bool:
    lit = node.literal
    if lit is None or lit.kind != "STRING":
        return False
    s = lit.text.strip()
    if not s.startswith(("{", "[")):
        return False
    try:
        jsonb_load(s)
    except ValueError:
        return False
    return s.startswith("[") or ":" in s or s.replace(" ", "") == "{}"


def _contains_op(flipped: bool):
    def rule(c):
        kids = c.node.children
        if len(kids) != 2 or any(_is_array(k, c.text) for k in kids):
            return None
        if not any(_visibly(k, c.text) == "jsonb" or _json_literal(k) for k in kids):
            return None  # left to translate's array rules (or refused there)
        x, y = (c.text_of(k) for k in kids)
        if flipped:
            x, y = y, x
        return f"{JSONB_CONTAINS}({_doc(x)}, {_doc(y)})"
    return rule


def _minus_op(c):
    # jsonb - text: a key (or string elements) deleted; only with a visibly jsonb left side
    kids = c.node.children
    if len(kids) != 2 or _visibly(kids[0], c.text) != "jsonb" or kids[1].literal is None \
            or kids[1].literal.kind != "STRING":
        return None
    return _as_jsonb(f"{JSONB_DELETE}({_doc(c.text_of(kids[0]))}, {c.text_of(kids[1])})")


#: DuckDB's operator name (a FUNCTION node) -> rule.
OPERATORS = {
    SPELLED["#>"]: _path_op(False), SPELLED["#>>"]: _path_op(True),
    SPELLED["?"]: _exists_op("one"), SPELLED["?|"]: _exists_op("any"), SPELLED["?&"]: _exists_op("all"),
    "@>": _contains_op(False), "<@": _contains_op(True),
}
#: Operators whose rule is here only for a visibly jsonb operand (rule_of asks it first).
MINUS = _minus_op
