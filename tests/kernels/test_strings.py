"""String ranking (``colmz.kernels.strings``) against its reference and Python's ``sorted``.

Arrow columns of every string/binary type, sliced or not, with NULLs, empty strings, NUL
bytes, values of exactly 8 and 16 bytes and long common prefixes are ranked by the kernel,
by its pure-Python reference and by ``sorted`` on ``bytes``; the three must agree, and
``colmz.consolidate`` on ranks must equal consolidation on the full encoding.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.kernels.consolidate import read_only, sort_consolidate
from colmz.kernels.strings import rank_into, rank_strings, rank_strings_ref
from colmz.updates import Encoded

TYPES = [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]
TRICKY = [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"a" * 7, b"a" * 8, b"a" * 8 + b"\x00",
          b"a" * 9, b"a" * 16, b"a" * 15 + b"\x00", b"a" * 17, b"\xff" * 8, b"\xff" * 9,
          "é".encode(), "日本".encode(), b"b"]


def buffers(arr: pa.Array):
    """``(offsets, data, validity, bit_offset)`` of an Arrow string/binary array."""
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    dtype = np.int64 if large else np.int32
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype, count=len(arr) + 1, offset=arr.offset * np.dtype(dtype).itemsize)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    validity = np.frombuffer(bufs[0], np.uint8) if arr.null_count else np.zeros(0, np.uint8)
    return offsets, data, validity, arr.offset


def as_bytes(arr: pa.Array) -> list[bytes | None]:
    return [None if v is None else (v.encode() if isinstance(v, str) else v) for v in arr.to_pylist()]


def check(arr: pa.Array) -> None:
    values = as_bytes(arr)
    ranks, reps = rank_strings(*buffers(arr))
    rranks, rreps = rank_strings_ref(values)
    assert ranks.dtype == np.uint64 and reps.dtype == np.int64
    assert ranks.tolist() == rranks.tolist()
    assert len(reps) == len(rreps)
    # Python's sorted on bytes: distinct values in rank order, "" at 0 when present.
    distinct = sorted({v for v in values if v is not None})
    shift = 0 if distinct and distinct[0] == b"" else 1
    assert [values[r] for r in reps[shift:]] == distinct
    assert (reps[0] == -1) == (shift == 1)
    for i, v in enumerate(values):
        if v is None:
            assert ranks[i] == 0
        else:
            assert values[reps[ranks[i]]] == v


def values_strategy(text: bool):
    base = st.text(max_size=24) if text else st.binary(max_size=24)
    tricky = [t for t in TRICKY if not text or _utf8(t)]

    @st.composite
    def prefixed(draw):
        # Long shared prefixes: the MSD steps must go many words deep.
        prefix = draw(st.sampled_from([b"", b"p" * 8, b"q" * 16, b"common-prefix-" * 3, b"\x00" * 20]))
        tail = draw(st.binary(max_size=3) if not text else st.text(max_size=3).map(str.encode))
        return prefix + tail

    one = st.one_of(st.sampled_from(tricky), prefixed(),
                    base.map(lambda v: v.encode() if isinstance(v, str) else v))
    return st.one_of(st.none(), one, one)


def _utf8(b: bytes) -> bool:
    try:
        b.decode()
        return True
    except UnicodeDecodeError:
        return False


@st.composite
def arrays(draw, max_size=120):
    t = draw(st.sampled_from(TYPES))
    text = pa.types.is_string(t) or pa.types.is_large_string(t)
    pool = draw(st.lists(values_strategy(text), min_size=1, max_size=max_size))
    # Repeat values so segments of equal values (and of more than a handful of rows) occur.
    values = draw(st.lists(st.sampled_from(pool), max_size=max_size)) if draw(st.booleans()) else pool
    arr = pa.array([None if v is None else (v.decode() if text else v) for v in values], t)
    lo = draw(st.integers(0, len(arr)))
    hi = draw(st.integers(lo, len(arr)))
    return arr.slice(lo, hi - lo) if draw(st.booleans()) else arr


@settings(max_examples=300)
@given(arrays())
def test_ranks_match_reference_and_sorted(arr):
    check(arr)


@settings(max_examples=60)
@given(arrays())
def test_kernel_own_python_matches_reference(arr):
    # rank_into as the Python it is written in (its helpers compiled), given what
    # rank_strings gives it: int64 offsets and read-only views, the signature the kernels
    # are compiled (and warmed up) for.
    offsets, data, validity, bit_offset = buffers(arr)
    offsets = offsets.astype(np.int64, copy=False)
    offsets, data, validity = (read_only(a) for a in (offsets, data, validity))
    n = len(arr)
    perm, keys, tk, tv = (np.empty(n, t) for t in (np.int64, np.uint64, np.uint64, np.int64))
    brk, ranks, reps = np.empty(n, np.uint8), np.empty(n, np.uint64), np.empty(n + 1, np.int64)
    codes, firsts = np.empty(n, np.int64), np.empty(n, np.int64)
    fn = getattr(rank_into, "py_func", rank_into)
    k = fn(offsets, data, validity, bit_offset, perm, keys, tk, tv, brk, codes, firsts, ranks, reps)
    rranks, rreps = rank_strings_ref(as_bytes(arr))
    assert ranks.tolist() == rranks.tolist() and k == len(rreps)


@pytest.mark.parametrize("n", [0, 1, 17, 5000, 9000])
@pytest.mark.parametrize("shape", ["random", "few", "prefix", "nested", "lengths", "top"])
def test_large_inputs(n, shape):
    # Sizes past the small-segment path: radix sorts, sorts on the top digits with ties
    # resolved on whole words, duplicates, and depth upon depth of shared prefixes; from
    # 4,096 valid rows, values that mostly repeat are numbered through the hash table first.
    rng = np.random.default_rng(n)
    if shape == "random":
        vals = [rng.bytes(int(rng.integers(0, 20))) for _ in range(n)]
    elif shape == "few":
        pool = [rng.bytes(int(rng.integers(0, 40))) for _ in range(7)] + [b""]
        vals = [pool[i] for i in rng.integers(0, len(pool), n)]
    elif shape == "prefix":
        vals = [b"x" * 37 + rng.bytes(2) for _ in range(n)]
    elif shape == "nested":
        vals = [b"\x00" * int(rng.integers(0, 30)) for _ in range(n)]
    elif shape == "lengths":
        vals = [b"ab" * int(rng.integers(0, 20)) + bytes([int(rng.integers(0, 3))]) * int(rng.integers(0, 3))
                for _ in range(n)]
    else:  # distinct top bytes, ties only in the low bytes of the first word
        vals = [bytes([int(rng.integers(0, 256)) for _ in range(3)]) + b"\x00\x00\x00\x00"
                + bytes([int(rng.integers(0, 4))]) + rng.bytes(int(rng.integers(0, 3))) for _ in range(n)]
    nulls = rng.random(n) < 0.05
    arr = pa.array([None if z else v for v, z in zip(vals, nulls)], pa.binary())
    check(arr)
    check(arr.slice(n // 3, n // 2))
    check(pa.array([None if z else v for v, z in zip(vals, nulls)], pa.large_binary()))


def test_docstring_example_and_all_null():
    check(pa.array([None, None], pa.string()))
    check(pa.array([], pa.string()))
    check(pa.array([""] * 40, pa.string()))
    ranks, reps = rank_strings_ref([b"b", None, b"", b"a", b"b"])
    assert ranks.tolist() == [2, 0, 0, 1, 2] and reps.tolist() == [2, 3, 0]


# ----------------------------------------------------------------------------- consolidate


def full_encoding(u: colmz.Updates, order: str, since):
    enc = u.encode()
    k, t, d = sort_consolidate(enc.keys, enc.time, enc.diff, order, since)
    return colmz.Updates.decode(Encoded(k, t, d, enc.layout), u.schema)


@settings(max_examples=40)
@given(
    st.lists(st.tuples(st.sampled_from([None, "", "a", "a\x00", "a" * 8, "a" * 9, "pp" * 12 + "x",
                                        "pp" * 12 + "y", "é", "b"]),
                       st.integers(0, 3), st.integers(0, 3), st.integers(-2, 2)),
             min_size=1, max_size=40),
    st.sampled_from(["time", "data"]),
    st.none() | st.integers(0, 3),
    st.sampled_from([pa.string(), pa.large_string(), pa.binary()]),
    st.integers(1, 200),
)
def test_consolidate_on_ranks_equals_full_encoding(rows, order, since, t, reps):
    # Repeated past the rank threshold, so colmz.consolidate takes the ranked path.
    rows = rows * reps
    rows = rows * max(1, -(-colmz.ops._RANK_MIN_ROWS // len(rows)))
    binary = pa.types.is_binary(t)
    u = colmz.Updates(
        {"s": pa.array([None if r[0] is None else (r[0].encode() if binary else r[0]) for r in rows], t),
         "k": pa.array([r[1] for r in rows], pa.int64())},
        time=np.array([r[2] for r in rows], np.uint64),
        diff=np.array([r[3] for r in rows], np.int64),
    )
    got = colmz.consolidate(u, order=order, since=since)
    want = full_encoding(u, order, since)
    assert got.to_pylist() == want.to_pylist()
    assert got.schema == u.schema


def test_consolidate_sliced_column_on_ranks():
    n = 3 * colmz.ops._RANK_MIN_ROWS
    rng = np.random.default_rng(3)
    vals = pa.array([None if i % 11 == 0 else f"v{int(x)}" for i, x in enumerate(rng.integers(0, 50, n))])
    u = colmz.Updates({"s": vals.slice(5, n - 9)}, time=np.zeros(n - 9, np.uint64),
                      diff=np.ones(n - 9, np.int64))
    assert colmz.consolidate(u, order="data").to_pylist() == full_encoding(u, "data", None).to_pylist()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="already without JIT")
def test_kernels_own_python_without_jit():
    """This file again with ``NUMBA_DISABLE_JIT=1``: the kernels' Python, helpers included."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::RuntimeWarning",
         "-k", "not consolidate",
         os.path.abspath(__file__)],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


@pytest.mark.parametrize("distinct", [3, 40, 2500])
def test_consolidate_on_ranks_both_ways(distinct):
    # Mostly repeated values are numbered by Arrow's hash table before ranking; mostly
    # distinct ones are ranked row by row: both equal the full encoding.
    n = 3000
    rng = np.random.default_rng(distinct)
    pool = [None, "", "\x00", "a" * 8, "a" * 8 + "\x00"] + [
        "shared-prefix-" * 2 + str(i) for i in range(distinct)]
    vals = pa.array([pool[i] for i in rng.integers(0, len(pool), n)], pa.large_string())
    u = colmz.Updates({"k": rng.integers(0, 3, n), "s": vals}, time=rng.integers(0, 4, n).astype(np.uint64),
                      diff=rng.integers(-1, 2, n))
    for order in ("time", "data"):
        assert colmz.consolidate(u, order=order, since=2).to_pylist() == full_encoding(u, order, 2).to_pylist()
