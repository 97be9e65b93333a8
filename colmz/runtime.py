"""Numba runtime control: where kernels are cached, warming them up, scratch memory.

Design
------
colmz's kernels are Numba functions compiled on first use and cached on disk
(``kernels/decorators.py``). This module is the user's handle on that machinery and nothing else:

* :func:`set_cache_dir` chooses the on-disk cache (``NUMBA_CACHE_DIR``) before the first
  kernel runs -- a Spark executor needs a writable, node-local directory;
* :func:`warmup` compiles, or loads from the cache, every kernel colmz uses by running the
  data model's operations and the structures on tiny inputs, so a timed or latency-bound
  first call pays nothing;
* :func:`release_scratch` frees the per-thread scratch buffers the kernels keep between calls
  (``kernels/pool.py``).

It sits *above* the structures it warms (``colmz.correction``, ``colmz.spine``): the data model
(``colmz.updates``, ``colmz.order``, ``colmz.ops``) imports no structure, and this module
imports them all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time as _time

import numpy as np
import pyarrow as pa

from colmz.correction import Correction
from colmz.first_column import MIN_ROWS
from colmz.kernels import pool
from colmz.kernels.advance import advance_runs
from colmz.kernels.consolidate import ORDERS, sort_consolidate
from colmz.kernels.decorators import DISPATCHERS, enable_light_loading
from colmz.kernels.merge import merge_runs
from colmz.kernels.ranking import positions_below, row_number_count, row_number_fill
from colmz.kernels.split import lower_bound
from colmz.kernels.strings import assign_ranks, rank_strings
from colmz.ops import consolidate, order_data
from colmz.progress import ProgressCallback, check_progress
from colmz.spine import Spine
from colmz.updates import Updates

__all__ = ["release_scratch", "set_cache_dir", "warmup"]


def set_cache_dir(path: str | os.PathLike) -> None:
    """Choose where Numba caches compiled kernels (``NUMBA_CACHE_DIR``).

    Numba fixes a function's cache directory when the function is decorated, which for colmz
    is at import; this re-points every colmz kernel defined so far, and kernels imported later
    read the new setting. Call it before the first colmz kernel runs: kernels already
    compiled or loaded in this process stay as they are. (Or set ``NUMBA_CACHE_DIR`` in the
    environment, which is what Spark executors need: ``spark.executorEnv.NUMBA_CACHE_DIR``.)

    Parameters
    ----------
    path : str or os.PathLike
        A writable directory; created when missing.

    Examples
    --------
    >>> import os, tempfile, colmz
    >>> before = os.environ.get("NUMBA_CACHE_DIR")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     colmz.set_cache_dir(d)
    ...     os.environ["NUMBA_CACHE_DIR"] == d
    ...     if before:
    ...         colmz.set_cache_dir(before)
    True
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
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
        enable_light_loading(dispatcher)


def release_scratch() -> None:
    """Free the scratch buffers colmz keeps for kernel temporaries (in this thread).

    >>> import colmz
    >>> colmz.release_scratch()
    """
    pool.release()


def _updates(reps: int) -> Updates:
    # Every column kind colmz encodes, rows repeated so the time order is not the data order.
    return Updates(
        {"i": np.tile(np.array([3, 1, 3], np.int64), reps), "s": ["x", None, "yy"] * reps,
         "f": [0.5, float("nan"), 0.5] * reps, "b": [True, False, True] * reps,
         "u": np.tile(np.array([1, 2, 1], np.uint32), reps)},
        time=np.tile(np.array([2, 1, 2], np.uint64), reps) + np.repeat(np.arange(reps, dtype=np.uint64), 3),
        diff=np.ones(3 * reps, np.int64),
    )


def _one_key(n: int) -> Updates:
    return Updates({"k": np.arange(n, dtype=np.int64)}, time=np.arange(n, dtype=np.uint64) % 7,
                   diff=np.ones(n, np.int64))


def _consolidate_one(reps: int) -> None:
    one = _one_key(2 * reps)
    # Arrays given up with copy=False stay read-only, which Numba compiles separately.
    given_up = Updates({"k": np.arange(2 * reps, dtype=np.int64)}, np.zeros(2 * reps, np.uint64),
                       np.ones(2 * reps, np.int64), copy=False)
    for order in ORDERS:
        consolidate(one, order=order)
        consolidate(one, order=order, since=3)
        consolidate(given_up, order=order)


def _consolidate_wide(reps: int) -> None:
    # Every column kind; from 256 rows the strings are sorted by rank.
    u = _updates(reps)
    for order in ORDERS:
        consolidate(u, order=order, since=1)
        consolidate(u, order=order)


def _merge_advance(reps: int) -> None:
    # Runs of one key word: the packed merge (a tree of two-way merges from its size
    # threshold on) and the three since-advancement strategies.
    one = consolidate(_one_key(2 * reps), order="data").encode()
    run = (one.keys, one.time, one.diff)
    for order in ORDERS:
        merge_runs([run, run], order)
        advance_runs([run, run], 1, order)
    lower_bound(one.time, np.uint64(1))


def _two_word_columns(reps: int) -> dict[str, np.ndarray]:
    # 3 * reps rows of two int64 columns spanning their whole range: their packed keys take
    # two words (the kernels see uint64 key words, whatever the columns were).
    big = np.array([-(2**62), 2**62, 5], np.int64)
    return {"a": np.tile(big, reps), "b": np.tile(big[::-1], reps)}


def _merge_wide(reps: int) -> None:
    # Runs whose packed keys take two words: the row-wise merge.
    wide = Updates(_two_word_columns(reps), time=np.arange(3 * reps, dtype=np.uint64),
                   diff=np.ones(3 * reps, np.int64))
    enc = consolidate(wide, order="time", since=1).encode()
    wrun = (enc.keys, enc.time, enc.diff)
    for order in ORDERS:
        merge_runs([wrun, wrun], order)


def _many_words(reps: int) -> None:
    # Keys wider than one packed word take the permutation sort.
    big = np.tile(np.array([[2**63, 2**62], [1, 2**61]], np.uint64), (reps * 30, 1))
    sort_consolidate(big, np.arange(len(big), dtype=np.uint64), np.ones(len(big), np.int64), "data")


def _string_ranks(reps: int) -> None:
    # The string-rank kernels alone (what ``consolidate`` runs on a long string column): from
    # 256 rows a sample decides whether to number repeated values first, which compiles the
    # hash table too. The kernels see read-only inputs and int64 offsets whatever they get.
    values = [b"x", b"", b"yy"] * (100 * reps)
    offsets = np.zeros(len(values) + 1, np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    rank_strings(offsets, np.frombuffer(b"".join(values), np.uint8), np.zeros(0, np.uint8))


def _correction(reps: int) -> None:
    cb = Correction()
    cb.insert(_updates(reps))
    for part in cb.updates_before(3):
        cb.insert_negated(part)
    cb.advance_since(3)
    list(cb.updates_before(None))


def _spine(reps: int) -> None:
    one = consolidate(_one_key(2 * reps), order="data")
    sp = Spine()
    sp.insert(one, 0, 7)
    sp.insert(one.slice(0, 0), 7, 8)
    sp.exert(10)


def _spine_merges(reps: int) -> None:
    # Batches of a size meet in a layer and start fueled merges: of one-word keys, then of
    # two-word keys (two int64 columns spanning their range). The merge kernels have no size
    # thresholds, so this step runs at one size only.
    for cols in ({"k": np.arange(3 * reps, dtype=np.int64)}, _two_word_columns(reps)):
        sp = Spine()
        for t in range(4):
            sp.insert(consolidate(Updates(cols, time=np.full(3 * reps, t, np.uint64),
                                          diff=np.ones(3 * reps, np.int64)), order="data"),
                      t, t + 1)
        sp.exert(10)


def _arrangement_sort(reps: int) -> None:
    # An arrangement write's first-column sort (colmz.first_column, through colmz.ops.order_data): narrow keys with a
    # few ties, then keys spanning the int64 range, whose offsets do not fit beside the row
    # numbers and take the re-sort of equal prefixes.
    n = MIN_ROWS * reps
    rng = np.random.default_rng(0)
    for keys in (rng.permutation(n).astype(np.int64),
                 rng.integers(-(2**62), 2**62, n, dtype=np.int64)):
        keys[:8] = keys[8]  # a few ties, consolidated apart
        order_data(Updates({"k": keys}, time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64)))


def _merged_reads(reps: int) -> None:
    # An arrangement read of several runs (colmz.arrangement.read): order words of int64 and
    # string columns (exact and prefix), the one-thread merge of small reads and the
    # two-thread merge (co_rank cuts) of reads of PARALLEL_ROWS rows and more.
    from colmz.arrangement.read import PARALLEL_ROWS, merged_read

    n = max(64, (PARALLEL_ROWS // 2 + 1) * (reps > 1))
    rng = np.random.default_rng(0)
    for lead in ("int", "string"):
        runs = []
        for r in range(3):
            k = np.sort(rng.integers(0, 2**40, n))
            s = pa.array([f"value-{x:020d}" for x in k])
            cols = {"k": pa.array(k), "v": s} if lead == "int" else {"k": s, "v": pa.array(k)}
            runs.append([Updates(cols, time=np.full(n, r, np.uint64), diff=np.ones(n, np.int64))])
        merged_read(runs, 2, runs[0][0].schema)


def _row_numbers(reps: int) -> None:
    # A ranking window's row_number change (colmz.dataflow.ranking): keys with the positions
    # in their low bits and keys with a permutation, with a partition field and without,
    # read before and after the delta.
    keys = np.repeat(np.array([2, 3, 4], np.uint64), reps)
    positions_below(keys, 8, np.zeros(len(keys), np.uint64))
    perm = np.arange(len(keys), dtype=np.int64)
    diff = np.ones(len(keys), np.int64)
    for words, index_bits in ((keys << np.uint64(8)) | perm.astype(np.uint64), 8), (keys, 0):
        for part_shift in (2, 64):
            for after in (False, True):
                args = (words, index_bits, perm, diff, len(keys) // 2, 1, part_shift)
                m = row_number_count(*args, after)[0]
                row_number_fill(*args, 0, after, *(np.zeros(m, np.int64) for _ in range(4)))


#: The warm-up steps: (name, function of the repetition count). Each runs at two sizes, on
#: both sides of the kernels' size thresholds (tiny inputs take one-call paths, larger ones
#: the packed radix sort, the merge tree and the sort of strings by rank); the Spine's
#: merges, which have no thresholds, at one.
_STEPS = {
    "consolidate": _consolidate_one,
    "consolidate strings": _consolidate_wide,
    "merge_runs/advance_runs": _merge_advance,
    "merge_runs wide": _merge_wide,
    "string ranks": _string_ranks,
    "argsort_words": _many_words,
    "Correction": _correction,
    "Spine": _spine,
    "Spine merges": _spine_merges,
    "arrangement sort": _arrangement_sort,
    "merged reads": _merged_reads,
    "row numbers": _row_numbers,
}

#: On a cold cache these steps run in a helper process, compiling into the shared on-disk
#: cache while this process compiles the others: the string ranks and the sorts of keys of
#: several words, about half of a cold warm-up's compile time. The Spine, one-word and
#: small-input steps come first here; the steps that need the helper's kernels (its own and
#: the wide consolidations, which rank strings and sort several words) come after it is done.
_HELPER_STEPS = (("string ranks", 1), ("argsort_words", 1), ("argsort_words", 1400),
                 ("merge_runs wide", 1), ("merge_runs wide", 1400))
_ORDER = (
    ("consolidate", 1), ("consolidate strings", 1), ("Spine", 1), ("consolidate", 1400),
    ("Spine", 1400), ("merge_runs/advance_runs", 1), ("merge_runs/advance_runs", 1400),
    ("Correction", 1), ("Spine merges", 1), ("arrangement sort", 1), ("merged reads", 1),
    ("merged reads", 1400), ("row numbers", 1),
    *_HELPER_STEPS,
    ("consolidate strings", 1400), ("Correction", 1400),
)


def warm_step(name: str, reps: int) -> None:
    """Run one warm-up step (what the helper process of :func:`warmup` runs)."""
    _STEPS[name](reps)


def _cold() -> bool:
    # Whether the string ranks' kernels have no entry in the on-disk cache yet (unknown: not
    # cold).
    try:
        return not os.path.exists(assign_ranks._cache._cache_file._index_path)
    except AttributeError:
        return False


def _start_helper(jobs: int):
    if jobs < 2 or os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0") or not _cold():
        return None
    code = "from colmz.runtime import warm_step\n" + "".join(
        f"warm_step({name!r}, {reps})\n" for name, reps in _HELPER_STEPS)
    try:
        return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:  # no way to start a process here: compile everything in this one
        return None


def warmup(verbose: bool = False, progress: ProgressCallback | None = None,
           jobs: int | None = None) -> float:
    """Compile (or load from the cache) every colmz kernel; return the seconds it took.

    Runs each operation on tiny inputs of every dtype combination colmz uses, so the first
    real call pays nothing. With a warm on-disk cache this is a fraction of a second.

    Parameters
    ----------
    verbose : bool
        Print one line with the time taken.
    progress : callable, optional
        ``progress(done, total, label)`` (``colmz.progress``): called before the first step
        with ``done = 0`` and after each step, counting warm-up steps; ``label`` names the
        kernels the step readies.
    jobs : int, optional
        Processes compiling on a cold cache (default: 2 where the machine has two cores or
        more). A helper process compiles the largest kernels into the shared on-disk cache
        while this one compiles the others, then this one loads them. With the kernels
        cached, or ``jobs=1``, everything runs here.

    Returns
    -------
    float
        Seconds taken.

    Examples
    --------
    >>> import colmz
    >>> seen = []
    >>> colmz.warmup(progress=lambda done, total, label: seen.append((done, total))) >= 0
    True
    >>> seen[0][0], seen[-1][0] == seen[-1][1]
    (0, True)
    """
    progress = check_progress(progress)
    if jobs is None:
        jobs = min(2, os.cpu_count() or 1)
    elif isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    t0 = _time.perf_counter()
    total = len(_ORDER)
    if progress is not None:
        progress(0, total, _ORDER[0][0])
    helper = _start_helper(jobs)
    try:
        for done, (name, reps) in enumerate(_ORDER, 1):
            if (name, reps) in _HELPER_STEPS and helper is not None:
                helper.wait()  # its kernels are in the cache now (or, if it failed, compile here)
                helper = None
            _STEPS[name](reps)
            if progress is not None:
                progress(done, total, name)
    finally:
        if helper is not None:  # this process failed or was interrupted first
            helper.kill()
            helper.wait()
    elapsed = _time.perf_counter() - t0
    if verbose:
        print(f"colmz kernels ready in {elapsed:.2f} s")
    return elapsed
