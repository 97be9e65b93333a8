"""Splitting a run sorted by ``(time, data)`` at a time.

Design
------
A run sorted by time first splits at an upper ``u`` into the prefix with times ``< u`` and the
suffix with times ``>= u`` by one binary search on the time column; the two parts are views,
so splitting copies nothing. Chains of chunks (``colmz.chain``) use the chunks' cached first
and last times to route whole chunks and binary-search only the one chunk that straddles
``u``.

Spec (kernel / reference)
-------------------------
``lower_bound(time, u)`` / ``lower_bound_ref``: the first index ``i`` with ``time[i] >= u``
(``len(time)`` when there is none). ``time`` must be sorted ascending.
"""

from __future__ import annotations

from colmz.kernels.decorators import jit

__all__ = ["lower_bound", "lower_bound_ref"]


@jit
def lower_bound(time, u):
    """First index ``i`` with ``time[i] >= u`` in the ascending ``time`` (binary search).

    >>> import numpy as np
    >>> int(lower_bound(np.array([1, 3, 3, 7], np.uint64), np.uint64(3)))
    1
    """
    lo = 0
    hi = time.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if time[mid] < u:
            lo = mid + 1
        else:
            hi = mid
    return lo


def lower_bound_ref(time, u):
    """Reference for :func:`lower_bound`: a linear scan."""
    for i, t in enumerate(time):
        if int(t) >= int(u):
            return i
    return len(time)
