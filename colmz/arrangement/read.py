"""Reads that merge: an arrangement's contents from several sorted runs, at read speed.

Layer
-----
The *read* layer of ``colmz.arrangement`` (``docs/arrangement.md``), beside the parts layer
(:mod:`colmz.arrangement.parts`, whose ``read_part`` it calls) and below the handle, which
hands it the runs of one state; the order words are :mod:`colmz.arrangement.read_words`'s,
the gathers :mod:`colmz.arrangement.gather`'s. It reads blobs and never writes or commits
anything, so it needs no rollback: a read that raises changed nothing. Upstream, a read of a shard's
batches as of a frontier is ``src/persist-client/src/fetch.rs`` with the consolidation of
``src/persist-client/src/iter.rs``; the merge itself is colmz's own (a read holds its whole
result, so it merges order words, not full encodings).

Design
------
An arrangement in use holds several runs -- trace batches (up to about ``2 log4`` of them
under the geometric policy) and unsealed batches beyond the trace's upper -- each a list of
parts sorted by ``(data, time)`` and consolidated. :meth:`colmz.Arrangement.read` wants their
union with times advanced to the since (or the as_of), consolidated and sorted. The
streaming merge of compaction (``colmz.arrangement.merge.stream_merge``) encodes every data
column in full (a 40-byte string is six words), merges the words and decodes them back: five
passes over the data that a read, which holds its whole result anyway, does not need.

:func:`merged_read` instead

1. reads every part whole (``read_part``: one Parquet read each, concurrent on local and S3
   stores) and keeps the rows of each run's time window ``[lower, upper)``;
2. turns each data column into one ``uint64`` *order word* per row
   (``colmz.kernels.read_merge``): fixed-width columns their full encoding word, string
   columns 7 or 8 bytes after the prefix every value of the first column shares (read off
   the runs' first and last rows, which bound a sorted column), plus colmz's null word when
   a column has NULLs and the advanced time when times do not all collapse to one;
3. proves when no merge is needed: runs whose word ranges do not meet are concatenated in
   order (the permutation is the identity up to run order);
4. otherwise merges the runs' rows by those words (``merge_word_rows``: ``log2 k`` rounds of
   pairwise merges, each moving a row's first word and row number -- the later words are
   read by row number where first words are equal) into a permutation, and consolidates
   along it (``consolidate_merged``, two halves side by side, cut where the first word
   changes): equal words are equal data when every word is exact, and the few groups that
   are not provably equal (long strings sharing 8 bytes past the prefix) are resolved on
   their full encodings;
5. gathers each column once in that order -- a string column straight from its pieces
   (``colmz.kernels.gather.gather_bytes``: each value copied by address, two threads on
   halves of the output),
   other columns (on the pool, beside the string gathers) and every column of a large read
   (one at a time) by a take of the runs' arrays concatenated -- releasing each input
   column once it is gathered.

Words stop after the first column when they are inexact anyway and a fixed-width first
column has (almost) no equal neighbours within a run (random keys): the rows whose keys meet
across runs are then resolved on full encodings.

So the work beyond reading the parts is one pass computing words, ``log2 k`` merge passes
over (first word, row number) pairs, one consolidation pass and one gather per column;
nothing is encoded or decoded in full.

Part reads come before the merge, not beside it: on two cores the part reads keep both
cores busy (Parquet decoding from the page cache is CPU work), so a merge beside them would
share the cores rather than fill idle time. Where reading waits instead of computing, reads
do run beside the merge: drains and compactions read each input's next part while they
merge (``parts.read_ahead``).

Memory: the inputs, the words (8 bytes a row and column) and the permutation exist together
during the merge; the gather then drops each input column as its output is made, so the peak
is about the inputs plus the largest output column plus the row and diff arrays. Reads of
inputs below :data:`RELEASE_BYTES` take their temporaries from Arrow's pool and leave freed
memory to the next read (a fresh page can cost more to fault in than to write); larger
reads hand it back as they go (``colmz.arrangement.gather.release_memory``).

Invariants: the result is exactly what consolidating every update of the runs' windows with
times advanced to ``since`` gives (``colmz.consolidate``), sorted by ``(data, time)``; a diff
sum leaving int64 raises ``OverflowError`` (the caller then takes the exact streaming merge).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter

import numpy as np
import pyarrow as pa

from colmz.arrangement.gather import (
    RELEASE_BYTES,
    binary_without_nulls,
    gather_binary,
    gather_column,
    release_memory,
)
from colmz.arrangement.part_ref import PartRef
from colmz.arrangement.parts import read_part
from colmz.arrangement.read_words import disjoint_order, lead_words, order_words
from colmz.kernels.pool import scratch
from colmz.kernels.read_merge import co_rank, consolidate_merged, merge_pair, merge_word_rows
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.storage.base import Blob
from colmz.threads import shared_pool
from colmz.updates import Updates

__all__ = ["ReadRun", "merged_read", "read_runs", "window_part"]

#: A run to read: its parts (``PartRef``, each with its check; one sorted run in order) and
#: the time window kept.
ReadRun = tuple[Sequence[PartRef], int, "int | None"]

#: Threads a merged read computes words, merges and gathers on (each pairwise merge is cut
#: in two at its middle output row; a gather in two halves of its output).
MERGE_THREADS = 2
#: Fewest rows for which a merged read uses its threads.
PARALLEL_ROWS = 1 << 15


def read_runs(store: Blob, runs: Sequence[ReadRun], schema: Sequence[ColumnSpec],
              pool: ThreadPoolExecutor | None) -> list[list[Updates]]:
    """Every part of every run, read whole with ``read_part`` (all requested at once on
    ``pool``), each cut to its run's time window; empty pieces dropped."""
    jobs = [(r, k) for r, (keys, _, _) in enumerate(runs) for k in keys]

    def read(r: int, key: PartRef) -> Updates:
        # cut to the window as soon as read, so a part's rows outside it are not held
        _, lower, upper = runs[r]
        return window_part(read_part(store, key, schema), lower, upper)

    if pool is None:
        parts = [read(r, k) for r, k in jobs]
    else:
        futures = [pool.submit(read, r, k) for r, k in jobs]
        parts = []
        try:
            for f in futures:
                parts.append(f.result())
        finally:
            for f in futures:
                f.cancel()
    out: list[list[Updates]] = [[] for _ in runs]
    for (r, _), u in zip(jobs, parts):
        if len(u):
            out[r].append(u)
    return out


def window_part(u: Updates, lower: int, upper: int | None) -> Updates:
    """The rows of ``u`` with times in ``[lower, upper)`` (``u`` itself when all are)."""
    if not len(u):
        return u
    t = u.time
    lo_ok = lower == 0 or int(t.min()) >= lower
    hi_ok = upper is None or int(t.max()) < upper
    if lo_ok and hi_ok:
        return u
    mask = t >= np.uint64(lower)
    if upper is not None:
        mask &= t < np.uint64(upper)
    if not mask.any():
        return u.slice(0, 0)
    rows = np.flatnonzero(mask)
    return u.take(rows)


def merged_read(runs: list[list[Updates]], since: int, schema: Sequence[ColumnSpec],
                stats: dict | None = None) -> Updates:
    """The consolidation of every update in ``runs`` (each a list of pieces that in order
    form one run sorted by ``(data, time)`` and consolidated) with times advanced to
    ``since``, sorted by ``(data, time)``.

    ``stats`` (optional) receives work counters: ``"runs"``, ``"rows_in"``, ``"merged"``
    (whether a merge ran, False when the runs' ranges were disjoint), ``"packed_lead"``
    (whether the merge moved words packed from several columns), ``"words"`` (order words a
    row), ``"tie_rows"`` (rows resolved on their full encodings).

    >>> import colmz
    >>> a = colmz.Updates({"k": ["b", "x"]}, time=[0, 1], diff=[1, 1])
    >>> b = colmz.Updates({"k": ["a", "x"]}, time=[2, 2], diff=[1, -1])
    >>> merged_read([[a], [b]], 5, a.schema).to_pylist()
    [('a', 5, 1), ('b', 5, 1)]
    """
    schema = tuple(schema)
    pieces = [u for run in runs for u in run if len(u)]
    nbytes = sum(u.nbytes for u in pieces)
    run_lens = [sum(len(u) for u in run) for run in runs]
    run_lens = [n for n in run_lens if n]
    n = sum(run_lens)
    if stats is not None:
        stats.update(runs=len(run_lens), rows_in=n, merged=False, packed_lead=False, tie_rows=0)
    if not n:
        return Updates.empty(schema)
    if not schema:
        # no data columns: rows differ by their times alone, and there are no order words
        return consolidate(concat(pieces), order="data", since=since)
    clock = _Clock(stats)
    pool = shared_pool("merge", MERGE_THREADS) if MERGE_THREADS > 1 and n >= PARALLEL_ROWS else None
    return _merge_and_gather(runs, pieces, run_lens, n, since, schema, pool, clock, stats, nbytes)


def _merge_and_gather(runs, pieces, run_lens, n, since, schema, pool, clock, stats,
                      nbytes) -> Updates:
    t_lo = min(int(u.time.min()) for u in pieces)
    t_hi = max(int(u.time.max()) for u in pieces)
    collapse = t_hi <= since or t_lo == t_hi
    bounds = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum([len(u) for u in pieces], out=bounds[1:])
    run_bounds = np.zeros(len(run_lens) + 1, np.int64)
    np.cumsum(run_lens, out=run_bounds[1:])
    # Temporaries: a small read's stay in this thread's scratch pool for the next read
    # (ScratchSlots); a middling read's come from Arrow's pool; a large read's from numpy,
    # whose large arrays go back to the system as soon as they are dropped.
    release = nbytes >= RELEASE_BYTES
    release_memory(release)  # what the part reads left in Arrow's allocator
    in_scratch = not release and nbytes < SCRATCH_BYTES
    empty = np.empty if release else ScratchSlots() if in_scratch else pool_array
    words, exact = order_words(pieces, schema, since, collapse, n, pool, empty)
    if stats is not None:
        stats["words"] = words.shape[1]
    clock.lap("words")
    diff = pieces[0].diff
    if len(pieces) > 1:
        diff = np.concatenate([u.diff for u in pieces], out=empty(n, np.int64))
    time = None
    if not collapse:
        time = np.concatenate([u.time for u in pieces], out=empty(n, np.uint64))
        np.maximum(time, np.uint64(since), out=time)
    # From here on the pieces' data columns are all that is needed of the inputs: the
    # caller's lists are emptied so their times and diffs go now, and each column goes as
    # soon as it is gathered.
    inputs = {s.name: [u.column(s.name) for u in pieces] for s in schema}
    pieces.clear()  # the caller's list too (merged_read's)
    for run in runs:
        run.clear()
    release_memory(release)

    # Every merge step moves a row's lead word and row number; the words after the lead
    # stay here, by row number, read only where leads are equal (kernels/read_merge.py).
    rest = words[:, 1:]
    order = disjoint_order(words, run_bounds)
    if order is None:
        lead, packed = lead_words(words, empty)
        lead, perm = _merge_runs(lead, rest, run_bounds, pool, empty)
        if stats is not None:
            stats.update(merged=True, packed_lead=packed)
        clock.lap("merge")
    else:
        perm = np.concatenate([np.arange(run_bounds[r], run_bounds[r + 1], dtype=np.int64)
                               for r in order])
        lead = words[perm, 0] if order != sorted(order) else words[:, 0]
    rows, diffs, g_lo, g_hi, g_at = _consolidate(lead, perm, rest, diff, exact, pool, empty)
    g = len(g_lo)
    del words, lead, rest
    if g:
        rows, diffs, tie_rows = _resolve_ties(inputs, schema, perm, diff, time, since,
                                              rows, diffs, g_lo, g_hi, g_at)
        if stats is not None:
            stats["tie_rows"] = tie_rows
    clock.lap("consolidate")
    # Nothing merged or consolidated: the output is the runs' concatenation in that order.
    concatenated = order is not None and len(rows) == n
    del perm
    m = len(rows)
    # collapsed times are made after the gather, when the inputs are gone
    out_time = None if collapse else time[rows]
    del time, diff
    # (a copy when diffs are scratch: the result never shares the pool's memory)
    out_diff = diffs.copy() if in_scratch else np.ascontiguousarray(diffs)
    del diffs
    columns = {}
    if concatenated:
        piece_order = [p for r in order for p in range(*_run_pieces(bounds, run_bounds, r))]
        for spec in schema:
            cols = inputs.pop(spec.name)
            cols = [cols[p] for p in piece_order]
            columns[spec.name] = cols[0] if len(cols) == 1 else pa.concat_arrays(cols)
            del cols
    else:
        # Columns the string gather does not take go to the pool at once, where they run
        # beside this thread's string gathers (whose halves queue behind them): one take
        # each, which would otherwise leave a core idle. Large reads gather one column at a
        # time, so each input goes before the next output is made.
        aside = {}
        if pool is not None and not release:
            for spec in schema:
                if not binary_without_nulls(inputs[spec.name]):
                    aside[spec.name] = pool.submit(gather_column, inputs.pop(spec.name), spec, rows)
        try:
            for spec in schema:
                if spec.name in aside:
                    continue
                cols = inputs.pop(spec.name)
                # (large reads take Arrow's path: its per-row addresses and lengths would add
                # 16 bytes a row to the peak, where concatenating frees the inputs first)
                out = None if release else gather_binary(cols, rows, bounds, pool, empty)
                if out is None:  # fixed-width (a fast take), NULLs, other layouts
                    out = gather_column(cols, spec, rows, release)
                columns[spec.name] = out
                del cols, out
        finally:
            for name, f in aside.items():
                columns[name] = f.result()
        columns = {spec.name: columns[spec.name] for spec in schema}
    clock.lap("gather")
    if out_time is None:
        out_time = np.full(m, max(t_lo, since), np.uint64)
    return Updates(columns, out_time, out_diff, schema=schema, copy=False)


class _Clock:
    # Seconds per step into stats["seconds"] (when stats is given), for profiles and docs.
    def __init__(self, stats):
        self.stats = stats
        self.t = perf_counter()
        if stats is not None:
            stats["seconds"] = {}

    def lap(self, name: str) -> None:
        if self.stats is not None:
            now = perf_counter()
            self.stats["seconds"][name] = now - self.t
            self.t = now


def _run_pieces(bounds: np.ndarray, run_bounds: np.ndarray, r: int) -> tuple[int, int]:
    # The pieces [a, b) of run r (pieces tile the runs in order).
    a = int(np.searchsorted(bounds, run_bounds[r]))
    b = int(np.searchsorted(bounds, run_bounds[r + 1]))
    return a, b


def _consolidate(lead, perm, rest, diff, exact, pool, empty):
    # consolidate_merged over the merged positions, in two halves side by side when there is
    # a pool: the cut moves forward to where the lead word changes, so no group of equal
    # words spans it.
    # Returns rows, diffs and the tie groups (lo, hi, at), each trimmed to its count.
    n = len(lead)
    cut = n // 2 if pool is not None else n
    while 0 < cut < n and lead[cut] == lead[cut - 1]:
        cut += 1
    spans = [(0, cut), (cut, n)] if 0 < cut < n else [(0, n)]
    rows = empty(n, np.int64)
    diffs = empty(n, np.int64)
    groups = [tuple(empty((b - a) // 2 + 1, np.int64) for _ in range(3)) for a, b in spans]

    def run(h: int):
        a, b = spans[h]
        g_lo, g_hi, g_at = groups[h]
        return consolidate_merged(lead[a:b], perm[a:b], rest, diff, exact, rows[a:b],
                                  diffs[a:b], g_lo, g_hi, g_at)

    if len(spans) == 1:
        counts = [run(0)]
    else:
        counts = [f.result() for f in [pool.submit(run, h) for h in range(len(spans))]]
    # each span's output moved down after the previous ones' (numpy copies overlapping
    # ranges correctly), its groups' positions made global
    k = 0
    lo, hi, at = [], [], []
    for (a, _), (kh, gh), (g_lo, g_hi, g_at) in zip(spans, counts, groups):
        if a != k:
            rows[k:k + kh] = rows[a:a + kh]
            diffs[k:k + kh] = diffs[a:a + kh]
        lo.append(g_lo[:gh] + a)
        hi.append(g_hi[:gh] + a)
        at.append(g_at[:gh] + k)
        k += kh
    return rows[:k], diffs[:k], np.concatenate(lo), np.concatenate(hi), np.concatenate(at)


def _resolve_ties(inputs, schema, perm, diff, time, since, rows, diffs, g_lo, g_hi, g_at):
    # Tie groups (equal words, not provably equal data): sort their rows by the full
    # encoding and the advanced time, consolidate, and splice each group's result where
    # the group stood in the merged order.
    sizes = g_hi - g_lo
    group_of = np.repeat(np.arange(len(g_lo)), sizes)
    first = np.cumsum(sizes) - sizes  # where each group starts among the tie rows
    pos = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(g_lo - first, sizes)
    tie = perm[pos].astype(np.int64, copy=False)  # (the merge's row numbers may be int32)
    sub = Updates({s.name: gather_column(list(inputs[s.name]), s, tie) for s in schema},
                  np.zeros(len(tie), np.uint64), np.zeros(len(tie), np.int64), copy=False)
    keys = sub.encode().keys
    t = (np.full(len(tie), since, np.uint64) if time is None else time[tie])
    d = diff[tie]
    if len(d) and int(np.abs(d.astype(np.float64)).max()) * int(sizes.max()) >= 2**63:
        raise OverflowError("diff sums may leave int64: the exact merge decides")
    order = np.lexsort([t, *[keys[:, j] for j in range(keys.shape[1] - 1, -1, -1)], group_of])
    grp, keys, t, d, tie = group_of[order], keys[order], t[order], d[order], tie[order]
    start = np.ones(len(tie), bool)
    if len(tie) > 1:
        start[1:] = ((grp[1:] != grp[:-1]) | (t[1:] != t[:-1])
                     | np.any(keys[1:] != keys[:-1], axis=1))
    heads = np.flatnonzero(start)
    sums = np.add.reduceat(d, heads) if len(heads) else d[:0]
    keep = sums != 0
    new_rows, new_diffs = tie[heads][keep], sums[keep]
    at = g_at[grp[heads][keep]]
    return (np.insert(rows, at, new_rows), np.insert(diffs, at, new_diffs), len(tie))


#: Reads whose inputs take fewer bytes than this keep their temporaries in the reading
#: thread's scratch pool (:class:`ScratchSlots`).
SCRATCH_BYTES = 64 << 20


class ScratchSlots:
    """An allocator for the temporaries of one read: the ``i``-th array asked for is slot
    ``merged_read:i`` of this thread's scratch pool (``colmz.kernels.pool.scratch``), so a
    read of the same shape gets the same memory again.

    Memory an allocator frees goes back to the system after a short delay (Arrow's mimalloc
    purges it), and on these virtual machines touching a fresh page costs far more than
    writing one already mapped (``colmz.kernels.pool``): 100 MB took 10-15 ms to fault in,
    5 ms to overwrite. A merged read of 900,000 rows makes about 80 MB of temporaries (order
    words, lead words, row numbers, diffs, spans). The pool holds the largest read's
    temporaries below :data:`SCRATCH_BYTES` of inputs until ``colmz.release_scratch``; arrays
    handed out are valid until the thread's next read, so nothing returned may alias them.
    """

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, n: int, dtype) -> np.ndarray:
        self.count += 1
        return scratch(f"merged_read:{self.count}", n, dtype)


def pool_array(n: int, dtype) -> np.ndarray:
    """A writable numpy array of ``n`` values of ``dtype`` in memory from Arrow's pool
    (contents undefined).

    Arrow's allocator keeps memory a read freed and hands it to the next read, where a numpy
    array this large is a fresh ``mmap`` whose pages the system must supply first (on these
    virtual machines slower than writing them; ``colmz.kernels.pool``).
    """
    dtype = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(max(n * dtype.itemsize, 1)), dtype, count=n)


def _merge_runs(lead: np.ndarray, rest: np.ndarray, run_bounds: np.ndarray, pool,
                empty=np.empty) -> tuple[np.ndarray, np.ndarray]:
    # Rounds of pairwise merges moving each row's lead word with its row number (ties on
    # the lead compare ``rest`` by row number); with a pool each pairwise merge is cut at
    # its middle output row (co_rank) into two merges that run side by side. Returns the
    # merged lead words and the permutation. ``lead``'s memory is reused as a buffer.
    n = len(lead)
    # Row numbers of 4 bytes when they fit: a round moves 12 bytes a row instead of 16, and
    # the rounds wait on memory (14 runs of 53,571 random leads: 11.4 ms -> 7.3 ms).
    idt = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    src_l, src_i = lead, empty(n, idt)
    src_i[:] = np.arange(n, dtype=idt)
    dst_l, dst_i = empty(n, np.uint64), empty(n, idt)
    if pool is None:
        starts, ends = run_bounds[:-1].copy(), run_bounds[1:].copy()
        if merge_word_rows(src_l, src_i, rest, starts, ends, dst_l, dst_i):
            return dst_l, dst_i
        return src_l, src_i
    bounds = [int(b) for b in run_bounds]
    while len(bounds) > 2:
        tasks = []
        for p in range(0, len(bounds) - 1, 2):
            a0, a1 = bounds[p], bounds[p + 1]
            b0 = b1 = a1
            if p + 2 < len(bounds):
                b1 = bounds[p + 2]
            c = (b1 - a0) // 2
            i = int(co_rank(src_l, src_i, rest, a0, a1, b0, b1, c)) if c else 0
            tasks.append((a0, a0 + i, b0, b0 + c - i, a0))
            tasks.append((a0 + i, a1, b0 + c - i, b1, a0 + c))
        futures = [pool.submit(merge_pair, src_l, src_i, rest, a0, a1, b0, b1, dst_l, dst_i, o)
                   for a0, a1, b0, b1, o in tasks]
        for f in futures:
            f.result()
        bounds = bounds[::2] if len(bounds) % 2 else bounds[::2] + [bounds[-1]]
        src_l, dst_l = dst_l, src_l
        src_i, dst_i = dst_i, src_i
    return src_l, src_i
