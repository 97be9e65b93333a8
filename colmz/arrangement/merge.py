"""The streaming merge of sorted runs of parts: drains of unsealed batches, compactions.

Layer
-----
Part of the *parts* layer of ``colmz.arrangement`` (``docs/arrangement.md``): it reads parts
(:func:`colmz.arrangement.parts.iter_part`) and hands merged chunks to a writer; it never
touches the state. Upstream, persist-client's ``Consolidator`` merges the sorted runs of a
compaction the same way, part by part (``src/persist-client/src/iter.rs``).

Design
------
:func:`stream_merge` combines sorted runs read chunk by chunk -- drains of several unsealed
batches, compactions of trace batches -- holding about :data:`MERGE_ROWS` input rows in all
(a run of parts, :class:`PartRun`, is read ``MERGE_ROWS // fan-in`` rows at a time, so a
drain of forty batches holds no more than a merge of two) plus one output part: it
repeatedly takes, from every input, the rows whose data sort strictly before the smallest
*last* data row loaded among the inputs that still have parts to read, merges those with
:func:`colmz.kernels.merge.merge_runs` (advancing times to ``since``) and hands the result
on (to a ``PartWriter``). Cutting strictly before that row matters: the next part of an input
may continue the same data at later times, and after times advance to ``since`` those must
meet the rows already loaded to be consolidated with them.

Invariant: the chunks emitted are consolidated, in order, and no two hold the same data row,
so together they are one sorted, consolidated run -- whatever the runs' number and lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from colmz.arrangement.part_ref import PartRef
from colmz.arrangement.parts import iter_part
from colmz.kernels.merge import merge_runs
from colmz.order import ColumnSpec, unify_layouts
from colmz.storage.base import Blob
from colmz.updates import Encoded, Updates, concat_encoded

__all__ = ["MERGE_ROWS", "MIN_CHUNK_ROWS", "PartRun", "chunks_filtered", "iter_merge", "stream_merge"]

#: Input rows a streaming merge holds in all, about: each of its ``k`` runs of parts is read
#: ``MERGE_ROWS // k`` rows at a time (at least ``MIN_CHUNK_ROWS``), so the memory of a merge
#: does not grow with its fan-in -- a drain of every unsealed batch at once included.
MERGE_ROWS = 1 << 16
#: Fewest rows a merge reads from one input at a time.
MIN_CHUNK_ROWS = 1 << 10


class PartRun:
    """One sorted run stored as parts (``keys``: their :class:`PartRef` s, or bare keys, in
    order), read as encoded chunks with the
    times in ``[lower, upper)``; iterable, and re-iterable from the start.

    ``chunk_rows`` is how many rows each read takes (None: a Parquet row group).
    :func:`iter_merge` sets it from its fan-in (:meth:`with_chunk_rows`), so that a merge
    of many runs holds about ``MERGE_ROWS`` input rows in all, not a row group per run.
    """

    __slots__ = ("store", "keys", "schema", "lower", "upper", "chunk_rows")

    def __init__(self, store: Blob, keys: Sequence[PartRef | str], schema: Sequence[ColumnSpec],
                 lower: int = 0, upper: int | None = None, chunk_rows: int | None = None):
        self.store = store
        self.keys = tuple(PartRef.of(k) for k in keys)
        self.schema = tuple(schema)
        self.lower = lower
        self.upper = upper
        self.chunk_rows = chunk_rows

    def with_chunk_rows(self, rows: int | None) -> PartRun:
        return PartRun(self.store, self.keys, self.schema, self.lower, self.upper, rows)

    def updates(self) -> Iterator[Updates]:
        for k in self.keys:
            yield from iter_part(self.store, k, self.schema, self.chunk_rows)

    def __iter__(self) -> Iterator[Encoded]:
        return chunks_filtered(self.updates(), self.lower, self.upper)


def _row_bytes(keys: np.ndarray) -> np.ndarray:
    # Rows of big-endian words compare as byte strings exactly as the rows of words compare
    # (all rows of one layout have one width, so numpy's trailing-NUL rule cannot bite).
    n, w = keys.shape
    if w == 0:
        return np.zeros(n, "S1")
    be = np.ascontiguousarray(keys, dtype=">u8")
    return be.view(f"S{8 * w}").reshape(n)


class _Input:
    __slots__ = ("chunks", "enc", "rb", "done", "rows")

    def __init__(self, chunks: Iterator[Encoded]):
        self.chunks = chunks
        self.enc: Encoded | None = None
        self.rb: np.ndarray | None = None
        self.done = False
        self.rows = 0

    def load(self) -> bool:
        """Append the next non-empty chunk to the buffer; False when the run is exhausted."""
        for enc in self.chunks:
            if not len(enc):
                continue
            self.rows += len(enc)
            if self.enc is None or not len(self.enc):
                self.enc = enc
            else:
                self.enc = concat_encoded([self.enc, enc])
            self.rb = None
            return True
        self.done = True
        return False

    def pad(self, layout) -> None:
        if self.enc is not None and self.enc.layout != layout:
            self.enc = self.enc.padded(layout)
            self.rb = None

    def row_bytes(self) -> np.ndarray:
        if self.rb is None:
            self.rb = _row_bytes(self.enc.keys)
        return self.rb

    def take(self, stop: int) -> Encoded:
        e = self.enc
        out = Encoded(e.keys[:stop], e.time[:stop], e.diff[:stop], e.layout)
        self.enc = Encoded(e.keys[stop:], e.time[stop:], e.diff[stop:], e.layout)
        if self.rb is not None:
            self.rb = self.rb[stop:]
        return out

    def empty(self) -> bool:
        return self.enc is None or not len(self.enc)


def stream_merge(runs: Iterable[Iterator[Encoded]], since: int | None,
                 emit: Callable[[Encoded], None], stats: dict | None = None) -> list[int]:
    """Merge sorted, consolidated runs (each an iterator of ``(data, time)``-sorted chunks)
    into ``emit``, advancing times to ``since``; return the rows read from each run.

    ``stats["merge_peak_rows"]`` is raised to the most input rows held at once (a work
    counter: about ``MERGE_ROWS`` when the runs are :class:`PartRun` objects, whatever their
    number and lengths).

    The chunks handed to ``emit`` are consolidated, in order, and no two of them hold the
    same data row, so together they are one sorted, consolidated run.
    """
    steps = iter_merge(runs, since, emit, stats)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def iter_merge(runs: Iterable[Iterator[Encoded]], since: int | None,
               emit: Callable[[Encoded], None], stats: dict | None = None):
    """:func:`stream_merge` as a generator that pauses after each emitted chunk, yielding
    the rows read so far; its return value is the rows read from each run. A caller with a
    work budget runs it a while, keeps it, and resumes it later."""
    runs = list(runs)
    per_input = max(MIN_CHUNK_ROWS, MERGE_ROWS // max(len(runs), 1))
    runs = [r.with_chunk_rows(per_input) if isinstance(r, PartRun) and r.chunk_rows is None
            else r for r in runs]
    inputs = [_Input(iter(r)) for r in runs]
    layout = None

    def refresh_layout():
        nonlocal layout
        layouts = [i.enc.layout for i in inputs if i.enc is not None]
        if not layouts:
            return
        new = unify_layouts(*layouts) if layout is None else unify_layouts(layout, *layouts)
        layout = new
        for i in inputs:
            i.pad(layout)

    for i in inputs:
        i.load()
    refresh_layout()
    while True:
        live = [i for i in inputs if not i.empty()]
        if not live:
            break
        if stats is not None:
            held = sum(len(i.enc) for i in live)
            stats["merge_peak_rows"] = max(stats.get("merge_peak_rows", 0), held)
        open_ = [i for i in live if not i.done]
        if not open_:
            # Every remaining row is loaded: merge it all.
            _emit_merged([i.take(len(i.enc)) for i in live], since, layout, emit)
            yield sum(i.rows for i in inputs)
            continue
        threshold = min(i.row_bytes()[-1] for i in open_)
        taken = []
        for i in live:
            stop = int(np.searchsorted(i.row_bytes(), threshold, side="left"))
            if stop:
                taken.append(i.take(stop))
        if taken:
            _emit_merged(taken, since, layout, emit)
            yield sum(i.rows for i in inputs)
            continue
        # Every loaded row is at or beyond the threshold row: read on in the inputs whose
        # loaded rows end at it (their next part may continue that data).
        for i in open_:
            if i.row_bytes()[-1] == threshold:
                i.load()
        for i in inputs:
            if not i.done and i.empty():
                i.load()
        refresh_layout()
        continue
    return [i.rows for i in inputs]


def _emit_merged(taken: list[Encoded], since, layout, emit) -> None:
    runs = [(e.keys, e.time, e.diff) for e in taken if len(e)]
    if not runs:
        return
    if len(runs) == 1 and (since is None or int(runs[0][1].min()) >= since):
        # one sorted, consolidated run with nothing to advance: already the result
        emit(Encoded(*runs[0], layout))
        return
    keys, time, diff = merge_runs(runs, "data", since)
    if len(time):
        emit(Encoded(keys, time, diff, layout))


def chunks_filtered(updates: Iterable[Updates], lower: int, upper) -> Iterator[Encoded]:
    """Encoded chunks of ``updates`` keeping only times in ``[lower, upper)``."""
    for u in updates:
        enc = u.encode()
        t = enc.time
        if upper is None:
            mask = t >= np.uint64(lower)
        else:
            mask = (t >= np.uint64(lower)) & (t < np.uint64(upper))
        if mask.all():
            yield enc
        elif mask.any():
            yield Encoded(enc.keys[mask], t[mask], enc.diff[mask], enc.layout)
