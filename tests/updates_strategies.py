"""Hypothesis strategies for ``Updates`` of mixed column types, and their oracles.

Shared by the tests of ``colmz.order``, ``colmz.updates`` and ``colmz.ops`` (import it as
``updates_strategies``: ``tests/`` is on ``sys.path`` through ``tests/conftest.py``).

* :func:`schemas`, :func:`arrow_columns`, :func:`updates` draw batches whose values come from
  small per-column pools (so equal rows are common) seeded with the edge cases: extreme ints,
  ``NaN``/``-0.0``/``inf``, empty strings, embedded NUL bytes, strings of 7, 8, 14, 15 and
  40 bytes, NULLs everywhere and all-NULL ``pa.null()`` columns; times up to ``2**64-1`` and
  diffs up to the ``int64`` limits.
* :func:`canon_row` maps a row to Python values under colmz's equality (NULL = NULL,
  NaN = NaN, -0.0 = 0.0); :func:`oracle` is the multiset of a batch as a ``dict``.
* :func:`ref_key` is the reference total order on rows, written from ``colmz.order``'s
  documented layout in plain Python: value words with NULL as word 0, then the NULL bits.
"""

from __future__ import annotations

import math
import os
import struct
from collections import Counter

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

import colmz

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TIME = 2**64 - 1

#: The data types the strategies draw from: name -> Arrow type.
TYPES: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "date32": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "binary": pa.binary(),
    "null": pa.null(),
}

_STRINGS = [
    "", "a", "b", "a\x00", "\x00", "\x00\x00", "abcdefg", "abcdefgh", "abcdefg\x00",
    "abcdefghijklmn", "abcdefghijklmno", "abcdefghijklmn\x00", "é", "x" * 40, "x" * 41,
]


def _nan_with_payload(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def tricky_values(t: pa.DataType) -> list:
    """Values that are equal under colmz's rules though spelled differently, or that sit
    next to NULL's value word: mixed into a column's pool half of the time."""
    if pa.types.is_floating(t):
        return [-0.0, 0.0, math.nan, -math.nan, _nan_with_payload(0x7FF0000000000001),
                _nan_with_payload(0xFFF8000000000123), -math.inf]
    if pa.types.is_boolean(t):
        return [False]
    if pa.types.is_integer(t):
        return [-(2 ** (t.bit_width - 1)) if pa.types.is_signed_integer(t) else 0, 0]
    if pa.types.is_temporal(t):
        return [0]
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ["", "\x00", "a", "a\x00", "abcdefg", "abcdefg\x00"]
    if pa.types.is_binary(t):
        return [b"", b"\x00", b"a", b"a\x00", b"abcdefg", b"abcdefg\x00"]
    return []


def examples(n: int) -> int:
    """``n`` property-test examples, or ten times as many under the ``thorough`` profile."""
    return n * 10 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else n


def _ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    edges = sorted({lo, hi, 0, min(hi, 1), max(lo, -1), lo + 1, hi - 1})
    return st.sampled_from(edges) | st.integers(max(lo, -3), min(hi, 3)) | st.integers(lo, hi)


def value_strategy(t: pa.DataType) -> st.SearchStrategy:
    """Non-NULL Python values for a column of Arrow type ``t``."""
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_integer(t):
        return _ints(t.bit_width, pa.types.is_signed_integer(t))
    if pa.types.is_floating(t):
        edges = [math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, -1.5, 5e-324, -5e-324, 1e300]
        if t.bit_width == 32:
            edges = edges[:7] + [1e-45, 3e38]
        return st.sampled_from(edges) | st.floats(width=t.bit_width)
    if pa.types.is_date(t):
        return st.integers(-100_000, 100_000)  # days around the epoch
    if pa.types.is_timestamp(t):
        return st.integers(-(10**15), 10**15) | st.sampled_from([0, -1, 1])
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return st.sampled_from(_STRINGS) | st.text(max_size=20)
    if pa.types.is_binary(t):
        return st.sampled_from([s.encode() for s in _STRINGS] + [b"\xff", b"\xff\x00"]) | st.binary(
            max_size=20
        )
    raise AssertionError(t)


@st.composite
def schemas(draw, min_cols: int = 1, max_cols: int = 4, types=None) -> list[tuple[str, pa.DataType]]:
    names = draw(
        st.lists(st.sampled_from(sorted(types or TYPES)), min_size=min_cols, max_size=max_cols)
    )
    return [(f"c{i}_{n}", TYPES[n]) for i, n in enumerate(names)]


@st.composite
def arrow_columns(draw, schema, n: int, pools: bool = True) -> list[pa.Array]:
    """One Arrow array of length ``n`` per ``(name, type)`` of ``schema``."""
    cols = []
    for _, t in schema:
        if pa.types.is_null(t):
            cols.append(pa.nulls(n))
            continue
        values = value_strategy(t)
        if pools:
            pool = draw(st.lists(values, min_size=1, max_size=4))
            if draw(st.booleans()):
                pool += draw(st.lists(st.sampled_from(tricky_values(t)), min_size=1, max_size=4))
            null_share = draw(st.sampled_from([0, 0, 1, 2, 10]))  # out of 10
            options = st.sampled_from(pool)
            if null_share == 10:
                options = st.none()
            elif null_share:
                options = st.one_of(*([st.none()] * null_share + [options] * (10 - null_share)))
            vals = draw(st.lists(options, min_size=n, max_size=n))
        else:
            vals = draw(st.lists(st.none() | values, min_size=n, max_size=n))
        cols.append(pa.array(vals, t))
    return cols


def time_strategy() -> st.SearchStrategy[int]:
    return st.sampled_from([0, 1, 2, 3, 2**32, 2**63, MAX_TIME - 1, MAX_TIME]) | st.integers(
        0, MAX_TIME
    )


def diff_strategy(huge: bool = True) -> st.SearchStrategy[int]:
    small = st.integers(-2, 2)
    if not huge:
        return small
    return small | st.sampled_from([2**62, -(2**62), INT64_MAX, INT64_MIN, INT64_MAX - 1])


@st.composite
def updates(
    draw,
    schema=None,
    min_rows: int = 0,
    max_rows: int = 25,
    huge_diffs: bool = True,
    types=None,
) -> colmz.Updates:
    """An ``Updates`` batch with pooled values (many equal rows), times and diffs."""
    if schema is None:
        schema = draw(schemas(types=types))
    n = draw(st.integers(min_rows, max_rows))
    cols = draw(arrow_columns(schema, n))
    times = draw(st.lists(time_strategy(), min_size=1, max_size=4))
    time = draw(st.lists(st.sampled_from(times), min_size=n, max_size=n))
    diff = draw(st.lists(diff_strategy(huge_diffs), min_size=n, max_size=n))
    return colmz.Updates(
        {name: c for (name, _), c in zip(schema, cols)},
        np.array(time, np.uint64),
        np.array(diff, np.int64),
    )


# ----------------------------------------------------------------------------- oracles


class _NaN:
    """The one NaN of colmz's equality (``NaN == NaN``), hashable and self-equal."""

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()


def column_values(arr: pa.Array) -> list:
    """A column as Python values; temporal types as their integer representation."""
    t = arr.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        arr = arr.view(pa.int32())
    elif pa.types.is_temporal(t):
        arr = arr.view(pa.int64())
    return arr.to_pylist()


def _canon(v):
    if isinstance(v, float):
        if math.isnan(v):
            return NAN
        if v == 0.0:
            return 0.0
    return v


def canon_rows(u: colmz.Updates) -> list[tuple]:
    """The data rows of ``u`` as tuples of canonical Python values."""
    cols = [column_values(u.column(n)) for n in u.column_names]
    return [tuple(_canon(v) for v in row) for row in zip(*cols)] if cols else [()] * len(u)


def raw_oracle(u: colmz.Updates, since: int | None = None) -> dict[tuple, int]:
    """``{(row, time): summed diff}`` of ``u`` (times advanced to ``since``), zeros dropped."""
    acc: Counter = Counter()
    for row, t, d in zip(canon_rows(u), u.time.tolist(), u.diff.tolist()):
        if since is not None:
            t = max(t, since)
        acc[(row, t)] += d
    return {k: v for k, v in acc.items() if v != 0}


def oracle(u: colmz.Updates, since: int | None = None) -> dict[tuple, int]:
    """:func:`raw_oracle`, raising ``OverflowError`` as colmz must when a sum leaves int64."""
    out = raw_oracle(u, since)
    if any(not INT64_MIN <= d <= INT64_MAX for d in out.values()):
        raise OverflowError("oracle: a summed diff leaves int64")
    return out


def as_dict(u: colmz.Updates) -> dict[tuple, int]:
    """A consolidated batch as ``{(row, time): diff}``; checks it holds each key once."""
    rows = canon_rows(u)
    out = {}
    for row, t, d in zip(rows, u.time.tolist(), u.diff.tolist()):
        assert (row, t) not in out, f"duplicate {(row, t)} in consolidated output"
        assert d != 0, f"zero diff for {(row, t)} in consolidated output"
        out[(row, t)] = d
    return out


def kind(t: pa.DataType) -> str:
    return colmz.ColumnSpec("?", t).kind


def _value_key(k: str, v):
    # The value words' order in Python terms, a NULL counting as the value of word 0.
    if k == "null":
        return 0
    if k == "int":
        return INT64_MIN if v is None else v
    if k in ("uint", "bool"):
        return 0 if v is None else int(v)
    if k == "float":
        if v is None:
            return (0, 0.0)
        if v is NAN or (isinstance(v, float) and math.isnan(v)):
            return (2, 0.0)
        return (1, v)
    if k == "bytes":
        if v is None:
            return b""
        return v.encode() if isinstance(v, str) else bytes(v)
    raise AssertionError(k)


def ref_key(kinds: list[str], row: tuple) -> tuple:
    """The reference total order on data rows (see ``colmz.order``'s layout)."""
    nulls = sum(1 << c for c, v in enumerate(row) if v is None)
    return (tuple(_value_key(k, v) for k, v in zip(kinds, row)), nulls)


def kinds_of(u: colmz.Updates) -> list[str]:
    return [s.kind for s in u.schema]
