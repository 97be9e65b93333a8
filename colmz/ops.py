"""Whole-batch operations: ``consolidate``, ``concat``, and kernel warm-up.

Design
------
These functions are the API layer over ``colmz.kernels``: they validate arguments, take the
fast paths (empty input, nothing to do), encode the data columns into order-preserving words
(``colmz.order``), call the kernels and decode the result. A call that raises returns nothing
and changes nothing -- ``Updates`` are immutable.
"""

from __future__ import annotations

import os
import time as _time
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from colmz.frontier import check_time
from colmz.kernels import _scratch
from colmz.kernels.consolidate import ORDERS, sort_consolidate
from colmz.order import ColumnSpec, array_from_numpy, decode_columns, encode_columns
from colmz.updates import Encoded, Updates, unify_schemas

__all__ = ["concat", "consolidate", "release_scratch", "set_cache_dir", "warmup"]


def _check_order(order: str) -> str:
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    return order


def consolidate(updates: Updates, *, order: str = "time", since: int | None = None) -> Updates:
    """Sort, sum equal ``(data, time)`` and drop zero diffs.

    Parameters
    ----------
    updates : Updates
    order : ``"time"`` (sort by ``(time, data)``, the default) or ``"data"`` (by ``(data, time)``)
    since : int, optional
        Advance every time to ``max(time, since)`` first (logical compaction).

    Returns
    -------
    Updates
        Consolidated: sorted by ``order``, each ``(data, time)`` once, no zero diff. Data are
        compared with NULL = NULL, NaN = NaN and -0.0 = 0.0; the order within equal times is
        colmz's total order on data (``colmz.order``).

    Raises
    ------
    OverflowError
        When a summed diff leaves the ``int64`` range.

    Examples
    --------
    >>> import colmz
    >>> u = colmz.Updates({"k": ["b", "a", "b"]}, time=[1, 2, 1], diff=[1, 1, 1])
    >>> colmz.consolidate(u).to_pylist()
    [('b', 1, 2), ('a', 2, 1)]
    >>> colmz.consolidate(u, since=2).to_pylist()
    [('a', 2, 1), ('b', 2, 2)]
    """
    if not isinstance(updates, Updates):
        raise TypeError(f"updates must be colmz.Updates, got {type(updates).__name__}")
    _check_order(order)
    if since is not None:
        since = check_time(since, "since")
    schema = updates.schema
    if len(updates) >= _RANK_MIN_ROWS and any(s.kind == "bytes" for s in schema):
        return _consolidate_ranked(updates, order, since)
    enc = updates.encode()
    keys, time, diff = sort_consolidate(enc.keys, enc.time, enc.diff, order, since)
    return Updates.decode(Encoded(keys, time, diff, enc.layout), schema)


# Below this many rows strings are sorted by their full encoding; above it, by rank.
_RANK_MIN_ROWS = 4096


def _rank_column(col: pa.Array):
    """A string/binary column as ``uint64`` ranks that order and compare like the strings.

    Ranks are computed within one call and never leave it, so colmz's order stays a pure
    function of the values. The empty string takes rank 0 and every other value its position
    among the sorted distinct values, shifted so that 0 is free for NULL (whose value word is
    0 and whose null bit sorts it after ``""``), exactly as the full encoding orders them.
    """
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    enc = col.dictionary_encode()
    dictionary = enc.dictionary
    order = pc.array_sort_indices(dictionary).to_numpy()
    sorted_dict = dictionary.take(order)
    has_empty = len(sorted_dict) > 0 and len(sorted_dict[0].as_buffer() or b"") == 0
    shift = 0 if has_empty else 1
    value = np.empty(len(dictionary), np.uint64)
    value[order] = np.arange(len(dictionary), dtype=np.uint64) + np.uint64(shift)
    idx = enc.indices
    nulls = idx.is_null().to_numpy(zero_copy_only=False) if idx.null_count else None
    codes = pc.fill_null(idx, 0).to_numpy(zero_copy_only=False) if idx.null_count else idx.to_numpy()
    ranks = value[codes] if len(dictionary) else np.zeros(len(col), np.uint64)
    return array_from_numpy(ranks, pa.uint64(), nulls), sorted_dict, shift


def _consolidate_ranked(updates: Updates, order: str, since) -> Updates:
    # Long strings take several key words each and force the multi-word sort; their ranks
    # take one. Consolidate on ranks, then map the surviving ranks back to strings.
    schema = updates.schema
    columns = list(updates._columns)
    ranked = {}
    for i, spec in enumerate(schema):
        if spec.kind == "bytes":
            columns[i], sorted_dict, shift = _rank_column(columns[i])
            ranked[i] = (sorted_dict, shift)
    keys, layout = encode_columns(columns)
    k, t, d = sort_consolidate(keys, updates._time, updates._diff, order, since)
    specs = [ColumnSpec(s.name, pa.uint64()) if i in ranked else s for i, s in enumerate(schema)]
    out = decode_columns(k, layout, specs)
    for i, (sorted_dict, shift) in ranked.items():
        r = out[i]
        pos = r.to_numpy(zero_copy_only=False)
        mask = r.is_null().to_numpy(zero_copy_only=False) if r.null_count else None
        if mask is not None:
            pos = np.where(mask, 0, pos)
        pos = pos.astype(np.int64) - shift
        idx = array_from_numpy(np.maximum(pos, 0), pa.int64(), mask)
        col = sorted_dict.take(idx)
        if col.type != schema[i].type:
            col = col.cast(schema[i].type)
        out[i] = col
    return Updates({s.name: c for s, c in zip(schema, out)}, t, d, _trusted=True)


def concat(batches: Iterable[Updates]) -> Updates:
    """One ``Updates`` holding all rows of ``batches``, in order.

    All batches must have the same data columns; an all-NULL column (Arrow type ``null``) or
    an empty batch combines with any type.

    >>> import colmz
    >>> a = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    >>> b = colmz.Updates({"k": [None]}, time=[1], diff=[1])
    >>> colmz.concat([a, b]).to_pylist()
    [(1, 0, 1), (None, 1, 1)]
    """
    batches = list(batches)
    if not batches:
        raise ValueError("concat needs at least one batch")
    for i, b in enumerate(batches):
        if not isinstance(b, Updates):
            raise TypeError(f"batches[{i}] must be colmz.Updates, got {type(b).__name__}")
    schema = batches[0].schema
    for b in batches[1:]:
        schema = unify_schemas(schema, b.schema)
    if len(batches) == 1:
        return batches[0]
    data = {}
    for ci, spec in enumerate(schema):
        chunks = []
        for b in batches:
            col = b._columns[ci]
            if col.type != spec.type:
                col = pa.nulls(len(col), spec.type) if pa.types.is_null(col.type) else col.cast(spec.type)
            chunks.append(col)
        data[spec.name] = pa.concat_arrays(chunks)
    time = np.concatenate([b._time for b in batches])
    diff = np.concatenate([b._diff for b in batches])
    return Updates(data, time, diff, _trusted=True)


def set_cache_dir(path: str | os.PathLike) -> None:
    """Choose where Numba caches compiled kernels (``NUMBA_CACHE_DIR``).

    Numba fixes a function's cache directory when the function is decorated, which for colmz
    is at import; this re-points every colmz kernel defined so far, and kernels imported later
    read the new setting. Call it before the first colmz kernel runs: kernels already
    compiled or loaded in this process stay as they are. (Or set ``NUMBA_CACHE_DIR`` in the
    environment, which is what Spark executors need: ``spark.executorEnv.NUMBA_CACHE_DIR``.)
    """
    from colmz.kernels._jit import DISPATCHERS

    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = path
    try:
        from numba.core import config

        config.CACHE_DIR = path
    except ImportError:  # pragma: no cover - numba layout changed
        return
    for dispatcher in DISPATCHERS:
        dispatcher.enable_caching()


def release_scratch() -> None:
    """Free the scratch buffers colmz keeps for kernel temporaries (in this thread)."""
    _scratch.release()


def warmup(verbose: bool = False) -> float:
    """Compile (or load from the cache) every colmz kernel; return the seconds it took.

    Calls each kernel on tiny inputs of every dtype combination colmz uses, so the first
    real call pays nothing. With a warm on-disk cache this is a fraction of a second.

    >>> import colmz
    >>> colmz.warmup() >= 0
    True
    """
    from colmz.kernels.advance import advance_runs
    from colmz.kernels.merge import merge_runs
    from colmz.kernels.split import lower_bound

    t0 = _time.perf_counter()
    # Inputs at both sides of the size thresholds: tiny inputs take one-call paths, larger
    # ones the packed radix sort and the merge tree; all must be compiled.
    for reps in (1, 1100):
        u = Updates(
            {"i": np.tile(np.array([3, 1, 3], np.int64), reps), "s": ["x", None, "yy"] * reps,
             "f": [0.5, float("nan"), 0.5] * reps, "b": [True, False, True] * reps,
             "u": np.tile(np.array([1, 2, 1], np.uint32), reps)},
            time=np.tile(np.array([2, 1, 2], np.uint64), reps) + np.repeat(np.arange(reps, dtype=np.uint64), 3),
            diff=np.ones(3 * reps, np.int64),
        )
        for order in ORDERS:
            c = consolidate(u, order=order, since=1)
            consolidate(u, order=order)
        n = 2 * reps
        one = consolidate(Updates({"k": np.arange(n, dtype=np.int64)}, time=np.arange(n, dtype=np.uint64) % 7,
                                  diff=np.ones(n, np.int64)), order="data")
        enc = one.encode()
        run = (enc.keys, enc.time, enc.diff)
        wide = c.encode()
        wrun = (wide.keys, wide.time, wide.diff)
        for order in ORDERS:
            merge_runs([run, run], order)
            merge_runs([wrun, wrun], order)
            advance_runs([run, run], 1, order)
        lower_bound(enc.time, np.uint64(1))
        # many-words path of the sort (keys wider than one packed word)
        big = np.tile(np.array([[2**63, 2**62], [1, 2**61]], np.uint64), (reps * 30, 1))
        sort_consolidate(big, np.arange(len(big), dtype=np.uint64), np.ones(len(big), np.int64), "data")
        # the correction buffer's flush, route, peel, merge and restore
        from colmz.correction import Correction

        cb = Correction()
        cb.insert(u)
        for part in cb.updates_before(3):
            cb.insert_negated(part)
        cb.advance_since(3)
        list(cb.updates_before(None))
    # the spine's resumable merge
    from colmz.spine import Spine

    sp = Spine()
    sp.insert(one, 0, 7)
    sp.insert(one.slice(0, 0), 7, 8)
    sp.exert(10)
    elapsed = _time.perf_counter() - t0
    if verbose:
        print(f"colmz kernels ready in {elapsed:.2f} s")
    return elapsed
