"""Exact integer sums for accumulators: ``int64`` while it is safe, Python ints beyond.

Design
------
An accumulable aggregate adds ``value * diff`` per group; for integer columns the sum must be
exact (PostgreSQL's ``sum(bigint)`` is a ``numeric``: it never overflows). Every operation
here first bounds its result in floating point; below ``2**62`` it runs in ``int64`` (the
common case, vectorised), otherwise on ``object`` arrays of Python ints, which cannot
overflow. An ``object`` array whose values all fit again is narrowed back to ``int64``.
Results are exact either way; only their dtype says which path ran.
"""

from __future__ import annotations

import numpy as np

__all__ = ["exact_add", "exact_group_sums", "exact_products", "narrowed", "zeros_like_kind"]

_SAFE = 2.0**62


def _bound(x: np.ndarray) -> float:
    n = len(x)
    if not n:
        return 0.0
    if x.dtype == object:
        return float("inf")
    if n <= 8 and x.dtype.kind in "iub":
        # a few integers (a one-row step's): their largest magnitude as Python ints, the same
        # float as numpy's conversion, abs and max give, without three array operations
        return float(max(map(abs, x.tolist())))
    return float(np.abs(x.astype(np.float64)).max())


def narrowed(x: np.ndarray) -> np.ndarray:
    """An ``object`` array of ints as ``int64`` when every value fits well inside it.

    >>> narrowed(np.array([1, 2**70 - 2**70], dtype=object)).dtype
    dtype('int64')
    """
    if x.dtype != object or not len(x):
        return x.astype(np.int64) if x.dtype == object else x
    if all(-(2**62) < v < 2**62 for v in x.tolist()):
        return x.astype(np.int64)
    return x


def exact_products(v: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``v * d`` exactly (``int64`` inputs).

    >>> exact_products(np.array([2**62]), np.array([4])).tolist()
    [18446744073709551616]
    """
    if len(v) and _bound(v) * _bound(d) * len(v) >= _SAFE:
        return v.astype(object) * d.astype(object)
    return v.astype(np.int64) * d.astype(np.int64)


def exact_group_sums(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of the groups of ``x`` starting at ``starts`` (``np.add.reduceat``), exactly.

    >>> exact_group_sums(np.array([2**62, 2**62, 1]), np.array([0, 2])).tolist()
    [9223372036854775808, 1]
    """
    if not len(starts):
        return np.zeros(0, np.int64)
    if x.dtype != object and _bound(x) * len(x) < _SAFE:
        return np.add.reduceat(x, starts)
    return narrowed(np.add.reduceat(x.astype(object), starts))


def exact_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` exactly.

    >>> exact_add(np.array([2**62]), np.array([2**62])).tolist()
    [9223372036854775808]
    """
    if a.dtype != object and b.dtype != object and _bound(a) + _bound(b) < _SAFE:
        return a + b
    return narrowed(a.astype(object) + b.astype(object))


def zeros_like_kind(kind: str, n: int) -> np.ndarray:
    """``n`` zeros of a slot kind: ``"int"`` (exact) or ``"float"``."""
    return np.zeros(n, np.float64 if kind == "float" else np.int64)
