"""The upstream core of :class:`colmz.arrangement.Arrangement`: the trace and the unsealed
batches, operation for operation.

Design
------
The structure of ``src/persist/src/indexed/arrangement.rs`` (Materialize's first persist),
kept operation for operation so the two can be read side by side, over colmz's storage split
(``colmz.storage``): immutable Parquet *parts* in a blob store, and small metadata that only
changes by compare-and-set in a consensus store.

Updates enter *unsealed*: each append is an immutable batch with a range of sequence numbers,
the min and max time written, and its parts (sorted by ``(data, time)``, consolidated).
``seal`` advances the logical upper: times before it are closed. A *drain* later moves the
sealed times ``[trace_ts_upper, seal)`` physically into the *trace*, an append-only list of
contiguous, time-partitioned batches, each one sorted run of parts with a description
``[lower, upper)`` and a ``since``. ``allow_compaction`` advances the since; *compaction*
merges adjacent trace batches, advancing their times to the since and consolidating.
``unsealed_evict`` drops unsealed batches whose every time is in the trace;
``unsealed_step`` rewrites one that straddles the trace's upper (the steps that write parts
-- drain, trim, compaction -- are in :mod:`colmz.arrangement.maintain`).

Reads see everything: :meth:`ArrangementCore.snapshot` merges the trace with the unsealed
updates at or beyond the trace's upper, times advanced to the since. The three reads keep
upstream's names and its one meaning of *snapshot*, a consistent read: ``snapshot`` (of
everything), ``unsealed_snapshot`` (of the unsealed batches overlapping ``[lo, hi)``, read by
``fetch_unsealed``) and ``trace_snapshot`` (of the trace).

Invariants
----------
The core operations write parts and replace the in-memory state with what a pure transition
of :class:`colmz.arrangement.state.ArrangementState` returns (``state``, one frozen value: a
call that raises keeps the value it started from), never the metadata; ``meta`` and
``from_meta`` carry the state, ``validate`` checks it (``colmz.arrangement.meta``). Core
operations change memory; ``Arrangement.commit`` persists. :class:`ArrangementCore` holds
no attributes of its own: :class:`colmz.arrangement.Arrangement` constructs the handle.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colmz.arrangement.errors import (
    CorruptMeta,
    EmptyBatch,
    InvalidBatchBounds,
    InvalidSnapshotBounds,
    SchemaMismatch,
    SealRegression,
    SeqNoMismatch,
    SinceRegression,
    TimeBeforeTraceUpper,
)
from colmz.arrangement.merge import PartRun, chunks_filtered, iter_merge, stream_merge
from colmz.arrangement.meta import (
    CompactTraceReq,
    CompactTraceRes,
    Description,
    DrainUnsealedReq,
    DrainUnsealedRes,
    TraceBatchMeta,
    UnsealedBatchMeta,
    UnsealedSnapshot,
    validate_meta,
)
from colmz.arrangement.part_writer import PartWriter
from colmz.arrangement.parts import iter_part, make_key
from colmz.arrangement.schema import (
    describe_schema,
)
from colmz.arrangement.state import ArrangementState
from colmz.frontier import Frontier, check_frontier, check_time, frontier_le, frontier_lt
from colmz.kernels.consolidate import sort_consolidate
from colmz.ops import order_data
from colmz.order import ColumnSpec, unify_layouts
from colmz.storage.base import Blob
from colmz.updates import Encoded, Updates

__all__ = ["ArrangementCore", "TraceSnapshot"]


@dataclass(frozen=True)
class TraceSnapshot:
    """A trace read: its upper, its since, the batches read, and their updates with their
    **stored** times (consolidated across batches, sorted by ``(data, time)``)."""

    ts_upper: Frontier
    since: int
    batches: tuple[TraceBatchMeta, ...]
    updates: Updates


class ArrangementCore:
    """The upstream core operations on the handle's in-memory state (module docstring); a base
    of :class:`colmz.arrangement.Arrangement`, which holds the attributes."""

    def meta(self) -> dict:
        """The state as a plain dict (see ``colmz.arrangement.meta``)."""
        return self._state.meta()

    @property
    def state(self) -> ArrangementState:
        """The in-memory state: one frozen value (``colmz.arrangement.state``)."""
        return self._state

    # read-only views of the state's fields, under the names the operations use
    @property
    def _seal(self) -> Frontier:
        return self._state.seal

    @property
    def _since(self) -> int:
        return self._state.since

    @property
    def _unsealed(self) -> tuple[UnsealedBatchMeta, ...]:
        return self._state.unsealed

    @property
    def _trace(self) -> tuple[TraceBatchMeta, ...]:
        return self._state.trace

    @property
    def _schema(self) -> tuple[ColumnSpec, ...] | None:
        # a state without a pinned schema (runs appended from elsewhere) has its parts' one
        return self._state.schema if self._state.schema is not None else self._part_schema

    @property
    def _properties(self):
        return self._state.properties

    def properties(self) -> dict[str, str | int]:
        """The user's properties as last committed (or set in memory): a copy.

        They change only with :meth:`append_runs` or :meth:`seal` (``properties=``), in the
        same compare-and-set as those calls' batches and seal, so a reader never sees one
        without the other -- e.g. the id of the last stream batch whose output the
        arrangement holds. They survive reopening and the record's rollups.

        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://properties-doc", schema={"k": pa.int64()})
        >>> a.seal(3, properties={"batch": 2, "source": "events"})
        >>> colmz.Arrangement.open("mem://properties-doc").properties()
        {'batch': 2, 'source': 'events'}
        """
        return dict(self._properties)

    @property
    def schema(self) -> tuple[ColumnSpec, ...] | None:
        """The pinned data columns (None until the first append of a schemaless one)."""
        return self._schema

    @property
    def store(self) -> Blob:
        return self._store

    @property
    def unsealed_batches(self) -> list[UnsealedBatchMeta]:
        return list(self._unsealed)

    @property
    def trace_batches(self) -> list[TraceBatchMeta]:
        return list(self._trace)

    def validate(self) -> None:
        """Raise :class:`CorruptMeta` naming the first broken invariant of the metadata."""
        validate_meta(self._seal, self._since, self._unsealed, self._trace)

    def validate_data(self) -> None:
        """:meth:`validate`, then read every part and check its contents.

        Trace parts: sorted by ``(data, time)`` and consolidated across the batch, no zero
        diff, every time at or after the batch's lower and before its upper (or at or before
        its since when the since is not before the upper). Unsealed parts: sorted,
        consolidated, times within the batch's ``[ts_lower, ts_upper]``.
        """
        self.validate()
        schema = self._read_schema()
        for i, b in enumerate(self._trace):
            d = b.desc
            for u in self._batch_parts(b.parts, schema):
                t = u.time
                if len(t) and int(t.min()) < d.lower:
                    raise CorruptMeta(f"trace batch {i} holds time {int(t.min())} before its lower {d.lower}")
                if frontier_lt(d.since, d.upper):
                    if d.upper is not None and len(t) and int(t.max()) >= d.upper:
                        raise CorruptMeta(f"trace batch {i} holds time {int(t.max())} at or after its upper {d.upper}")
                elif len(t) and int(t.max()) > d.since:
                    raise CorruptMeta(f"trace batch {i} holds time {int(t.max())} after its since {d.since}")
            self._check_run(b.parts, schema, f"trace batch {i}")
        for i, b in enumerate(self._unsealed):
            for u in self._batch_parts(b.parts, schema):
                t = u.time
                if len(t) and (int(t.min()) < b.ts_lower or int(t.max()) > b.ts_upper):
                    raise CorruptMeta(f"unsealed batch {i} holds times outside [{b.ts_lower}, {b.ts_upper}]")
            self._check_run(b.parts, schema, f"unsealed batch {i}")

    def _check_run(self, keys, schema, what: str) -> None:
        parts = [u.encode() for u in self._batch_parts(keys, schema)]
        parts = [p for p in parts if len(p)]
        if not parts:
            return
        layout = unify_layouts(*(p.layout for p in parts))
        enc = [p.padded(layout) for p in parts]
        keys_ = np.concatenate([p.keys for p in enc])
        time = np.concatenate([p.time for p in enc])
        diff = np.concatenate([p.diff for p in enc])
        if (diff == 0).any():
            raise CorruptMeta(f"{what} holds a zero diff")
        k2, t2, d2 = sort_consolidate(keys_, time, diff, "data", None)
        if not (np.array_equal(k2, keys_) and np.array_equal(t2, time) and np.array_equal(d2, diff)):
            raise CorruptMeta(f"{what} is not sorted by (data, time) and consolidated")

    def unsealed_seqno_upper(self) -> int:
        """The end of the last unsealed batch's seqno range, or 0."""
        return self._unsealed[-1].seqnos[1] if self._unsealed else 0

    def trace_ts_upper(self) -> Frontier:
        """The physical upper: the last trace batch's upper, or 0 when the trace is empty."""
        return self._trace[-1].desc.upper if self._trace else 0

    def get_seal(self) -> Frontier:
        """The logical upper: times before it are closed."""
        return self._seal

    def since(self) -> int:
        """The compaction frontier: reads see times advanced to it."""
        return self._since

    def new_blob_key(self) -> str:
        """A fresh part key: its creation time, a unique token and, on a durable arrangement,
        the seqno of the state this handle holds -- the version its next commit expects
        (``colmz.arrangement.parts.make_key``; rolled-back metadata is told by it)."""
        seqno = self._seqno if self._log is not None else None
        return make_key(self.prefix, int(self.clock() * 1000), self.token(), seqno)

    def validate_seal(self, ts: Frontier) -> None:
        """Raise :class:`SealRegression` unless ``ts`` is at or beyond the current seal."""
        ts = check_frontier(ts, "seal")
        if not frontier_le(self._seal, ts):
            raise SealRegression(f"seal {ts} is before the current seal {self._seal}")

    def update_seal(self, ts: Frontier) -> None:
        """Set the seal without checking (used to revert a seal)."""
        self._state = self._state.update_seal(ts)

    def validate_allow_compaction(self, since: int) -> None:
        """Raise :class:`SinceRegression` if ``since`` is before the current since (equal and
        beyond the seal are allowed)."""
        since = self._check_since(since)
        if since < self._since:
            raise SinceRegression(f"since {since} is before the current since {self._since}")

    def allow_compaction(self, since: int) -> None:
        """Set the since without checking (used to revert)."""
        self._state = self._state.allow_compaction(self._check_since(since))

    @staticmethod
    def _check_since(since) -> int:
        if since is None:
            raise ValueError("since must be an int time; an Arrangement has no empty since")
        return check_time(since, "since")

    def _conform(self, updates, what: str = "updates") -> Updates:
        if isinstance(updates, (pa.Table, pa.RecordBatch)):
            updates = Updates.from_arrow(updates)
        elif type(updates).__name__ == "DataFrame" and hasattr(updates, "columns"):
            updates = Updates.from_pandas(updates)
        if not isinstance(updates, Updates):
            raise TypeError(f"{what} must be colmz.Updates, got {type(updates).__name__}")
        schema = self._schema
        if schema is None:
            if any(pa.types.is_null(s.type) for s in updates.schema):
                raise SchemaMismatch(
                    f"{what} have an all-NULL column of no type ({describe_schema(updates.schema)}); "
                    "give the arrangement a schema first"
                )
            return updates
        if [s.name for s in updates.schema] != [s.name for s in schema]:
            raise SchemaMismatch(
                f"{what} have columns {describe_schema(updates.schema)} but the arrangement's "
                f"schema is {describe_schema(schema)}"
            )
        cast = False
        for got, want in zip(updates.schema, schema):
            if got.type == want.type:
                continue
            if pa.types.is_null(got.type):
                cast = True
                continue
            raise SchemaMismatch(
                f"{what} column {got.name!r} has type {got.type} but the arrangement's schema "
                f"is {describe_schema(schema)}"
            )
        if cast:
            cols = {w.name: (pa.nulls(len(updates), w.type) if pa.types.is_null(g.type)
                             else updates.column(w.name)) for g, w in zip(updates.schema, schema)}
            updates = Updates(cols, updates.time, updates.diff, copy=False)  # colmz-owned arrays
        return updates

    def unsealed_append(self, updates: Updates, seqnos: tuple[int, int] | None = None) -> UnsealedBatchMeta:
        """Write ``updates`` as a new unsealed batch with seqno range ``seqnos``.

        ``seqnos`` defaults to ``(upper, upper + 1)``. Raises :class:`SeqNoMismatch` unless
        the range is non-empty and starts at :meth:`unsealed_seqno_upper`,
        :class:`EmptyBatch` for no updates, :class:`TimeBeforeTraceUpper` for a time before
        the trace's upper and :class:`SchemaMismatch` for other columns. The first append
        pins the schema when none was given.
        """
        updates = self._conform(updates)
        upper = self.unsealed_seqno_upper()
        if seqnos is None:
            seqnos = (upper, upper + 1)
        try:
            start, end = (int(x) for x in seqnos)
        except (TypeError, ValueError):
            raise SeqNoMismatch(f"seqnos must be a (start, end) pair of ints, got {seqnos!r}") from None
        if start != upper:
            raise SeqNoMismatch(f"batch seqnos {[start, end]} do not start at the seqno upper {upper}")
        if end <= start:
            raise SeqNoMismatch(f"batch seqnos {[start, end]} are an empty range")
        if not len(updates):
            raise EmptyBatch(f"cannot append an empty batch (seqnos {[start, end]})")
        meta, schema = self._write_unsealed(self._state, updates, order_data(updates), (start, end))
        self._state = self._state.with_schema(schema).unsealed_append(meta)
        return meta

    def _write_unsealed(self, state: ArrangementState, updates: Updates, normal: tuple,
                        seqnos: tuple[int, int]) -> tuple[UnsealedBatchMeta, tuple[ColumnSpec, ...]]:
        # ``normal`` is ``updates`` consolidated in data order, as ``order_data`` gives it
        # (source, rows); checks are done. Writes the parts of an unsealed batch to be
        # appended to ``state``; returns the batch and the schema it pins (the caller moves
        # the state: ``state.with_schema(schema).unsealed_append(batch)``)
        start, end = seqnos
        t = updates.time
        lo, hi = int(t.min()), int(t.max())
        tu = state.trace_ts_upper()
        if tu is None or lo < tu:
            raise TimeBeforeTraceUpper(f"batch holds time {lo} before the trace upper {tu}")
        schema = next(s for s in (state.schema, self._part_schema, updates.schema) if s is not None)
        writer = self._writer(schema, {"kind": "unsealed", "seqnos": [start, end]},
                              self.write_compression)
        writer.write(*normal)
        meta = UnsealedBatchMeta((start, end), lo, hi, tuple(writer.keys), writer.rows, writer.size_bytes,
                                 tuple(writer.checks))
        self.count_write(writer, updates)
        return meta, tuple(schema)

    def unsealed_snapshot(self, lo: int, hi: Frontier) -> UnsealedSnapshot:
        """The unsealed batches that may hold times in ``[lo, hi)`` (upstream's overlap test:
        ``lo <= ts_upper`` and not ``hi <= ts_lower``). Raises :class:`InvalidSnapshotBounds`
        when ``hi < lo``."""
        lo = check_time(lo, "lo")
        hi = check_frontier(hi, "hi")
        if hi is not None and hi < lo:
            raise InvalidSnapshotBounds(f"unsealed snapshot upper {hi} is before its lower {lo}")
        batches = tuple(b for b in self._unsealed
                        if lo <= b.ts_upper and not (hi is not None and hi <= b.ts_lower))
        return UnsealedSnapshot(lo, hi, batches)

    def fetch_unsealed(self, snap: UnsealedSnapshot) -> Updates:
        """Read an unsealed snapshot: its batches' updates with ``lo <= t < hi``, batch after
        batch (each batch sorted by ``(data, time)``; not consolidated across batches)."""
        schema = self._read_schema()
        out = []
        for b in snap.batches:
            for u in self._batch_parts(b.parts, schema):
                for enc in chunks_filtered([u], snap.lower, snap.upper):
                    out.append(Updates.decode(enc, schema))
        return self._concat(out, schema)

    def unsealed_evict(self) -> list[UnsealedBatchMeta]:
        """Drop the unsealed batches whose every time is before the trace's upper; return them
        (their parts can be deleted once the new state is committed)."""
        self._state, gone = self._state.unsealed_evict()
        return gone

    def unsealed_next_drain_req(self) -> DrainUnsealedReq | None:
        """The next drain: None when the seal equals the trace's upper; else the interval
        ``[trace_ts_upper, seal)`` (since 0) and the unsealed snapshot of it. Raises
        :class:`InvalidBatchBounds` when the seal is before the trace's upper (a revert)."""
        seal, tu = self._seal, self.trace_ts_upper()
        if seal == tu:
            return None
        if tu is None or not frontier_lt(tu, seal):
            raise InvalidBatchBounds(f"cannot drain [{tu}, {seal}): the seal is before the trace upper")
        desc = Description(tu, seal, 0)
        return DrainUnsealedReq(desc, self.unsealed_snapshot(tu, seal))

    def unsealed_handle_drain_response(self, res: DrainUnsealedRes) -> None:
        """Append the drained batch iff there is one and it starts at the trace's upper
        (a stale response is ignored)."""
        self._state = self._state.handle_drain_response(res)

    def trace_snapshot(self) -> TraceSnapshot:
        """The trace's batches and their updates with stored times (not advanced)."""
        schema = self._read_schema()
        runs = [self._run_chunks(b.parts, schema, 0, None) for b in self._trace]
        out: list[Encoded] = []
        stream_merge(runs, None, out.append)
        return TraceSnapshot(self.trace_ts_upper(), self._since, tuple(self._trace),
                             self._decode_many(out, schema))

    def trace_next_compact_req(self) -> CompactTraceReq | None:
        """The oldest adjacent pair with equal levels whose newer batch's upper is at or
        before the since (upstream's rule), or None."""
        for i in range(1, len(self._trace)):
            b0, b1 = self._trace[i - 1], self._trace[i]
            if b0.level == b1.level and frontier_le(b1.desc.upper, self._since):
                return CompactTraceReq((b0, b1), self._since)
        return None

    def trace_handle_compact_response(self, res: CompactTraceRes) -> list[TraceBatchMeta]:
        """Replace the request's batches with the merged one if they are still adjacent in
        the trace; return the replaced batches (newest first, as upstream), or ``[]``."""
        self._state, replaced = self._state.handle_compact_response(res)
        return replaced

    def snapshot(self) -> Updates:
        """Everything written: the trace, and the unsealed updates at or after the trace's
        upper, with every time advanced to the since; consolidated, sorted by
        ``(data, time)``. (A since beyond the seal forwards unsealed updates too.)"""
        return self._read_all(None)

    def _read_schema(self) -> tuple[ColumnSpec, ...]:
        if self._schema is None:
            key = next((k for b in self._trace for k in b.keys), None) or next(
                (k for b in self._unsealed for k in b.keys), None)
            if key is None:
                return ()
            # kept beside the state, not in it: a read changes no state (the next commit
            # records it, colmz.arrangement.handle)
            self._part_schema = self._read_schema_of(key)
        return self._schema

    def _batch_parts(self, keys, schema) -> Iterator[Updates]:
        for k in keys:
            yield from iter_part(self._store, k, schema)

    def _run_chunks(self, keys, schema, lower: int, upper: Frontier) -> PartRun:
        # a merge sizes the reads of a PartRun by its fan-in (colmz.arrangement.merge.iter_merge)
        return PartRun(self._store, keys, schema, lower, upper)

    def _writer(self, schema, info, compression: str | None = None) -> PartWriter:
        return PartWriter(self._store, schema, self.new_blob_key, info, part_rows=self.part_rows,
                          part_bytes=self.part_bytes,
                          compression=self.compression if compression is None else compression)

    def trace_merge(self, batches: tuple[TraceBatchMeta, ...],
                    desc: Description) -> tuple[PartWriter, Generator[int, None, list[int]]]:
        """Start merging the adjacent trace ``batches`` into one batch described by ``desc``:
        the writer of the merged batch's parts and the merge
        (:func:`colmz.arrangement.merge.iter_merge` over the batches' parts, times advanced
        to ``desc.since``, its peak rows in ``stats()``), which writes to it as it is
        stepped. Changes no state; the caller finishes the writer and hands it to
        :meth:`count_write`, or closes the merge and aborts the writer
        (:class:`colmz.arrangement.maintain.CompactionJob`)."""
        schema = self._read_schema()
        writer = self._writer(schema, {"kind": "trace", "desc": desc.to_list()})
        runs = [self._run_chunks(b.parts, schema, 0, None) for b in batches]
        return writer, iter_merge(runs, desc.since, writer.add, self._counters)

    def count_write(self, writer: PartWriter, updates: Updates | None = None) -> None:
        """Add what ``writer`` wrote (bytes, parts, rows; and ``updates``' count and size
        when given) to the handle's write counters (``stats()``)."""
        self._counters["blob_bytes_written"] += writer.size_bytes
        self._counters["parts_written"] += len(writer.keys)
        self._counters["rows_written"] += writer.rows
        if updates is not None:
            self._counters["updates_written"] += len(updates)
            self._counters["update_bytes_written"] += updates.nbytes

    @staticmethod
    def _concat(parts: list[Updates], schema) -> Updates:
        from colmz.ops import concat

        if not parts:
            return Updates.empty(schema)
        return concat(parts)

    def _decode_many(self, encs: list[Encoded], schema) -> Updates:
        if not encs:
            return Updates.empty(schema)
        return self._concat([Updates.decode(e, schema) for e in encs], schema)

    def referenced_keys(self) -> frozenset[str]:
        """Every part key the current (in-memory) state names."""
        return frozenset(k for b in (*self._unsealed, *self._trace) for k in b.keys)
