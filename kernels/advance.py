"""Since advancement: compacting times to a since while merging runs.

Design
------
Reading a correction buffer at a since ``s`` advances every time ``t < s`` to ``s``
(``advance_by``). The runs the buffer merges are sorted by ``(time, data)``, and advancing
breaks that order: ``[(c,1), (b,2), (a,3)]`` with ``s = 2`` becomes ``[(c,2), (b,2), (a,3)]``.
Differential's answer, which colmz follows (``src/compute/src/sink/correction_v2.rs`` in Materialize), looks at how many
distinct *stale* times (``< s``) the runs hold, counting at most :data:`MAX_STALE_RUNS`:

* none: merge the runs as they are;
* ``1 .. MAX_STALE_RUNS - 1``: cut every run into one sub-run per stale time (each sorted by
  data, so still sorted once its time becomes ``s``) plus its tail of times ``>= s``, and merge
  all sub-runs with times advanced -- ``O(N log K')`` without a sort;
* ``MAX_STALE_RUNS`` or more: advance, sort and consolidate everything in one pass.

Cutting costs one binary search per distinct stale time per run, which is why the count is
capped: beyond a few dozen cuts the merge heap is deeper than a radix sort is long.

Runs sorted by ``(data, time)`` need no cutting: ``max(t, s)`` is monotone within a data group.

Spec (kernel / reference)
-------------------------
``stale_bounds(time, since, cap)`` -> array of cut indices ``[0, b1, ..., bk]``: sub-run ``i``
is ``[b_i, b_{i+1})``, one per distinct stale time (at most ``cap`` of them); ``bk`` is the end
of the stale prefix. ``advance_runs(runs, since, order)`` / ``advance_runs_ref``.
"""

from __future__ import annotations

import numpy as np

from colmz.kernels.consolidate import sort_consolidate
from colmz.kernels.decorators import jit
from colmz.kernels.merge import merge_runs, merge_runs_ref
from colmz.kernels.split import lower_bound

__all__ = [
    "MAX_STALE_RUNS",
    "advance_runs",
    "advance_runs_ref",
    "stale_bounds",
    "stale_bounds_ref",
    "strategy",
]

#: Distinct stale times at which colmz stops cutting runs and sorts instead (upstream: 32).
MAX_STALE_RUNS = 32


@jit
def stale_bounds(time, since, cap):
    """Cut points of the distinct stale times (``< since``) of an ascending ``time``.

    Returns ``[0, b1, ..., bk]`` with ``k <= cap`` sub-runs; when there are more than ``cap``
    distinct stale times the last cut is not the end of the stale prefix (callers check
    ``k == cap``).
    """
    out = np.empty(cap + 1, np.int64)
    out[0] = 0
    k = 0
    i = 0
    n = time.shape[0]
    while i < n and time[i] < since and k < cap:
        t = time[i]
        # first index past time t: binary search for t + 1 (t < since <= MAX, so no overflow)
        i = lower_bound(time, t + np.uint64(1))
        k += 1
        out[k] = i
    return out[: k + 1]


def stale_bounds_ref(time, since, cap):
    """Reference for :func:`stale_bounds`."""
    ts = [int(x) for x in time]
    out = [0]
    i = 0
    while i < len(ts) and ts[i] < int(since) and len(out) - 1 < cap:
        t = ts[i]
        while i < len(ts) and ts[i] == t:
            i += 1
        out.append(i)
    return np.array(out, np.int64)


def strategy(runs, since: int) -> tuple[str, int]:
    """Which of the three strategies :func:`advance_runs` takes, and the stale-time count.

    The count is capped at :data:`MAX_STALE_RUNS` and is an upper bound when runs share times
    (each run is counted on its own, as upstream does).
    """
    count = 0
    for _, time, _ in runs:
        if len(time) and int(time[0]) < since:
            count += len(stale_bounds(time, np.uint64(since), MAX_STALE_RUNS)) - 1
        if count >= MAX_STALE_RUNS:
            return "sort", MAX_STALE_RUNS
    return ("merge" if count == 0 else "cut"), count


def advance_runs(runs, since: int | None, order: str = "time"):
    """Merge sorted, consolidated runs with every time advanced to ``max(t, since)``.

    >>> import numpy as np
    >>> k = lambda *xs: np.array([[x] for x in xs], np.uint64)
    >>> a = (k(3, 2, 1), np.array([1, 2, 3], np.uint64), np.array([1, -1, -1]))
    >>> b = (k(2, 1, 3), np.array([1, 2, 2], np.uint64), np.array([1, 1, -1]))
    >>> keys, time, diff = advance_runs([a, b], since=2)
    >>> keys.ravel().tolist(), time.tolist(), diff.tolist()
    ([1, 1], [2, 3], [1, -1])
    """
    if since is None or order == "data":
        return merge_runs(runs, order, since)
    how, _ = strategy(runs, since)
    if how == "merge":
        return merge_runs(runs, "time")
    if how == "cut":
        parts = []
        s = np.uint64(since)
        for keys, time, diff in runs:
            if not len(time):
                continue
            cuts = stale_bounds(time, s, MAX_STALE_RUNS)
            for a, b in zip(cuts[:-1], cuts[1:]):
                parts.append((keys[a:b], time[a:b], diff[a:b]))
            end = cuts[-1]
            if end < len(time):
                parts.append((keys[end:], time[end:], diff[end:]))
        return merge_runs(parts, "time", since)
    keys = np.concatenate([r[0] for r in runs])
    time = np.concatenate([r[1] for r in runs])
    diff = np.concatenate([r[2] for r in runs])
    return sort_consolidate(keys, time, diff, "time", since)


def advance_runs_ref(runs, since: int | None, order: str = "time"):
    """Reference for :func:`advance_runs`: advance every time, then consolidate the union."""
    return merge_runs_ref(runs, order, since)
