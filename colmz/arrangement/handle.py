"""``Arrangement``: a durable, compacting collection of updates on a blob store.

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
``unsealed_step`` rewrites one that straddles the trace's upper.

Reads see everything: :meth:`snapshot` merges the trace with the unsealed updates at or
beyond the trace's upper, times advanced to the since.

Layer
-----
The *handle* layer of ``colmz.arrangement`` (``docs/arrangement.md``). Two layers still
share one object:

* **the core** -- the upstream operations (``unsealed_append``, ``drain``, ``compact``, ...)
  writing parts and replacing the in-memory state with what a pure transition of
  :class:`colmz.arrangement.state.ArrangementState` returns (:attr:`state`, one frozen
  value: a call that raises keeps the value it started from), never the metadata;
  :meth:`meta` and :meth:`from_meta` carry the state, :meth:`validate` checks it. Core
  operations change memory; :meth:`commit` persists;
* **the user API** -- :meth:`open` / :meth:`write` / :meth:`seal` / :meth:`advance_since` /
  :meth:`append_runs` / :meth:`maintain` / :meth:`read`, each durable when it returns. Each
  durable call is one *command* -- a function of the state the handle holds, which checks
  what it needs and applies core operations -- handed to the machine
  (``colmz.arrangement.machine``): new parts are written to the blob store first, then the
  new state is committed (one compare-and-set through ``colmz.storage.state.StateLog``); a
  lost compare-and-set reloads the state and applies the command again (bounded); on any
  failure the in-memory state is put back and the parts written for the call are deleted,
  so nothing is visible. The handle may touch the blob store (parts), its consensus record
  (through the machine and ``StateLog``) and nothing else; it follows
  ``src/persist/src/indexed/arrangement.rs`` (core) and persist-client's handles
  (``src/persist-client/src/write.rs``, ``read.rs``).

Compaction policies
-------------------
``trace_next_compact_req`` keeps the upstream level rule exactly: the oldest adjacent pair
with equal levels whose newer upper is at or before the since; the merged batch's level is one
more iff it holds more updates than each parent. colmz compares **update counts**, not
encoded bytes: counts do not depend on Parquet's encoding, so the rule is deterministic.
:meth:`maintain` uses by default a wider-fan-in geometric policy (``policy="geometric"``):
when ``fan_in`` adjacent batches share a level they merge into one of the next level,
whether or not the since has passed them (their times advance to the current since, which
is what any merge may do). Each update is then rewritten about ``log_fan_in(batches)``
times instead of ``log2``; ``policy="levels"`` runs the upstream rule.

Measured over 1,000 seals of 1,000 ``(int64, int64)`` updates with ``maintain()`` after each
(in-memory store): fan-in 4 (the default) wrote 1.5x the updates' in-memory bytes to blob
(each update's Parquet bytes written 4.3 times in all, the first write included) and held at
most 14 trace batches, never more than ``2 log2(batches drained)``; fan-in 6 and 8 write less
(1.2x, 1.1x) but exceed that bound early on (18 and 21 batches at most); the upstream level
rule, with the since following the seal, wrote 2.75x (7.8 rewrites) with at most 9 batches.

A drain whose interval holds exactly one unsealed batch, entirely inside it, hands that
batch's parts to the trace instead of rewriting them (they are already sorted and
consolidated), so a trickle of write-seal-maintain writes each update once before compaction.

Garbage and leases
------------------
A part key embeds its creation time (``colmz.arrangement.parts``). :meth:`gc` deletes parts
under the arrangement's prefix that the committed state does not reference and that are
older than ``lease_seconds``; a commit refuses (:class:`LeaseExpired`) when a part it is
about to reference is older than half the lease. So a part an in-flight commit may still
reference is never collected, as long as no commit stalls for half a lease between its check
and its compare-and-set, and clocks agree to within the other half. Parts a successful
commit stops referencing are deleted right after it (best effort; gc catches the rest). A
read that finds a part missing reloads the state once and retries.

Identity and integrity
----------------------
A store opened by :meth:`open` has an id in its blob and its state, and its consensus key
derives from it (``colmz.arrangement.identity``): stores sharing a consensus database keep
their own records, ``open`` never creates over parts it cannot account for, and :meth:`gc`
refuses when its state cannot account for the parts. Each part's key records the seqno of
the state its writer read, so a record rolled back to an older copy is refused
(:class:`MetadataRolledBack`) when a part proves a newer version existed, and ``gc`` never
deletes a part recorded at or above the version it read. Every part read verifies the digest
of its bytes the state records (or, read by ranges from an object store, its Parquet page
checksums), the key its metadata names and the rows and diff sum the state records
(``colmz.arrangement.parts``): damage is :class:`CorruptPart`, never an answer.

Invariants (:meth:`validate`; see ``colmz.arrangement.meta``) hold after every public call;
:meth:`validate_data` also reads every part and checks that trace parts are sorted,
consolidated, free of zero diffs and inside their description.
"""

from __future__ import annotations

import html
import time as _time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colmz.arrangement.errors import (
    ArrangementError,
    CorruptMeta,
    CorruptPart,
    EmptyBatch,
    IdentityMismatch,
    InvalidAsOf,
    InvalidBatchBounds,
    InvalidSnapshotBounds,
    LeaseExpired,
    MetadataLost,
    MetadataRolledBack,
    MissingPart,
    NonContiguousMerge,
    SchemaMismatch,
    SealMismatch,
    SealRegression,
    SeqNoMismatch,
    SinceBehindInput,
    SinceRegression,
    TimeBeforeSeal,
    TimeBeforeTraceUpper,
)
from colmz.arrangement.fetched import FetchedRuns
from colmz.arrangement.machine import STALE, Machine
from colmz.arrangement.meta import (
    CompactTraceReq,
    CompactTraceRes,
    Description,
    DrainUnsealedReq,
    DrainUnsealedRes,
    TraceBatchMeta,
    UnsealedBatchMeta,
    UnsealedSnapshot,
    check_properties,
    meta_from_dict,
    properties_from_dict,
    validate_meta,
)
from colmz.arrangement.parts import (
    DEFAULT_PART_BYTES,
    DEFAULT_PART_ROWS,
    READ_THREADS,
    WRITE_COMPRESSION,
    PartCheck,
    PartRun,
    PartWriter,
    chunks_filtered,
    concurrent_calls,
    iter_merge,
    iter_part,
    key_created_ms,
    key_seqno,
    make_key,
    read_ahead,
    stream_merge,
)
from colmz.arrangement.read import ReadRun, read_runs
from colmz.arrangement.runs import abort_marker_prefix
from colmz.arrangement.state import ArrangementState
from colmz.frontier import MAX_TIME, Frontier, check_frontier, check_time, frontier_le, frontier_lt
from colmz.kernels.consolidate import sort_consolidate
from colmz.ops import order_data
from colmz.order import ColumnSpec, unify_layouts
from colmz.progress import ProgressCallback, check_progress
from colmz.storage.base import Blob
from colmz.storage.state import CommitConflict
from colmz.threads import shared_pool
from colmz.updates import Encoded, Updates

__all__ = [
    "Arrangement",
    "ArrangementError",
    "CommitConflict",
    "CompactionJob",
    "CorruptMeta",
    "CorruptPart",
    "EmptyBatch",
    "IdentityMismatch",
    "InvalidAsOf",
    "InvalidBatchBounds",
    "InvalidSnapshotBounds",
    "LeaseExpired",
    "MetadataLost",
    "MetadataRolledBack",
    "MissingPart",
    "NonContiguousMerge",
    "PartInfo",
    "SchemaMismatch",
    "SealMismatch",
    "SealRegression",
    "SeqNoMismatch",
    "SinceBehindInput",
    "SinceRegression",
    "TimeBeforeSeal",
    "TimeBeforeTraceUpper",
    "TraceSnapshot",
    "new_token",
    "normalize_schema",
    "schema_from_json",
    "schema_to_json",
]

_KEEP = object()  # append_runs: leave the seal as it is
#: How far before a store's creation a part may be dated and still be taken for the store's
#: own (a writer's clock behind the creator's) when ``gc`` checks for parts older than it.
GC_CLOCK_SLACK_MS = 60_000

#: The ``format`` of the durable state document.
STATE_FORMAT = 1
_POLICIES = ("geometric", "levels")


@dataclass(frozen=True)
class TraceSnapshot:
    """A trace read: its upper, its since, the batches read, and their updates with their
    **stored** times (consolidated across batches, sorted by ``(data, time)``)."""

    ts_upper: Frontier
    since: int
    batches: tuple[TraceBatchMeta, ...]
    updates: Updates


class CompactionJob:
    """A compaction of ``req`` done in budgeted steps (:meth:`Arrangement.compact_trace` is
    one that runs to the end).

    ``step(budget)`` merges on until about ``budget`` more input updates have been read (all
    of them with ``None``) and says whether the merge is complete; ``result()`` is then the
    :class:`CompactTraceRes`; ``abort()`` deletes the parts written so far. The job changes
    no arrangement state; between steps it holds about one part per input.
    """

    def __init__(self, arrangement: Arrangement, req: CompactTraceReq):
        batches = req.batches
        if len(batches) < 2:
            raise NonContiguousMerge(f"a compaction needs at least two batches, got {len(batches)}")
        for a, b in zip(batches, batches[1:]):
            if a.desc.upper != b.desc.lower:
                raise NonContiguousMerge(
                    f"cannot merge non-consecutive batches {a.desc.to_list()} and {b.desc.to_list()}"
                )
        since = check_time(req.since, "since")
        for b in batches:
            if since < b.desc.since:
                raise SinceBehindInput(
                    f"output since {since} is before input since {b.desc.since} of batch {b.desc.to_list()}"
                )
        self.req = req
        self.arrangement = arrangement
        self.desc = Description(batches[0].desc.lower, batches[-1].desc.upper, since)
        schema = arrangement._read_schema()
        self.writer = arrangement._writer(schema, {"kind": "trace", "desc": self.desc.to_list()})
        runs = [arrangement._run_chunks(b.parts, schema, 0, None) for b in batches]
        self._steps = iter_merge(runs, since, self.writer.add, arrangement._counters)
        self.rows_read = 0
        self._read: list[int] | None = None

    @property
    def done(self) -> bool:
        return self._read is not None

    def step(self, budget: int | None) -> bool:
        start = self.rows_read
        try:
            while self._read is None and (budget is None or self.rows_read - start < budget):
                try:
                    self.rows_read = next(self._steps)
                except StopIteration as finished:
                    self._read = finished.value
                    self.rows_read = sum(self._read)
                    self.writer.finish()
        except BaseException:
            self.abort()
            raise
        return self.done

    def result(self) -> CompactTraceRes:
        if self._read is None:
            raise RuntimeError("the compaction has not finished: step() it to the end first")
        w, batches = self.writer, self.req.batches
        self.arrangement._count_write(w)
        if len(batches) == 2:
            grew = all(w.rows > r for r in self._read)
            level = batches[0].level + 1 if grew else batches[0].level
        else:
            level = batches[0].level + 1
        merged = TraceBatchMeta(self.desc, level, tuple(w.keys), w.rows, w.size_bytes, tuple(w.checks))
        return CompactTraceRes(self.req, merged)

    def abort(self) -> None:
        self._steps.close()
        self.writer.abort()


def new_token() -> str:
    """A fresh unique part token (``uuid4().hex``); a module function so handles pickle."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class PartInfo:
    """One part of the current state, for readers outside colmz.

    ``url`` is where the part is (``Blob.url_of``); a reader keeps the rows with
    ``time >= min_time`` (trace parts: 0; unsealed parts: the trace's upper, because times
    before it are already in the trace) and advances every time to the arrangement's since.
    ``check`` is what the state recorded of the part (``colmz.arrangement.parts.PartCheck``:
    rows, diff sum, digest; None for a part recorded without one): a reader passes
    ``PartRef(key, check)`` to ``read_part``, which verifies it.
    """

    url: str
    key: str
    kind: str
    min_time: int
    check: PartCheck | None = None


def schema_to_json(schema: Sequence[ColumnSpec] | None) -> dict | None:
    """The schema as a JSON-able dict (Arrow IPC bytes in base64, plus readable names)."""
    if schema is None:
        return None
    import base64

    s = pa.schema([pa.field(c.name, c.type) for c in schema])
    return {
        "arrow": base64.b64encode(s.serialize().to_pybytes()).decode(),
        "columns": [[c.name, str(c.type)] for c in schema],
    }


def schema_from_json(doc) -> tuple[ColumnSpec, ...] | None:
    """Inverse of :func:`schema_to_json`."""
    if doc is None:
        return None
    import base64

    try:
        s = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["arrow"])))
    except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
        raise CorruptMeta(f"arrangement state has an unreadable schema {doc!r}: {e}") from None
    return tuple(ColumnSpec(f.name, f.type) for f in s)


def normalize_schema(schema) -> tuple[ColumnSpec, ...] | None:
    """A schema argument as data-column specs: a ``pa.Schema`` (``time``/``diff`` fields are
    dropped), a mapping name -> Arrow type, or a sequence of ``ColumnSpec``/``(name, type)``."""
    if schema is None:
        return None
    if isinstance(schema, pa.Schema):
        specs = [ColumnSpec(f.name, f.type) for f in schema if f.name not in ("time", "diff")]
    elif isinstance(schema, Mapping):
        specs = [ColumnSpec(str(n), t) for n, t in schema.items()]
    else:
        try:
            specs = [s if isinstance(s, ColumnSpec) else ColumnSpec(str(s[0]), s[1]) for s in schema]
        except (TypeError, IndexError):
            raise TypeError(f"schema must be a pyarrow.Schema, a mapping or a sequence of "
                            f"(name, type); got {schema!r}") from None
    for s in specs:
        if not isinstance(s.type, pa.DataType):
            raise TypeError(f"schema column {s.name!r} has type {s.type!r}, not a pyarrow DataType")
        s.kind  # noqa: B018 - raises TypeError for unsupported types, naming the column
        if s.name in ("time", "diff"):
            raise ValueError(f"data column named {s.name!r} clashes with the {s.name} column")
    return tuple(specs)


def _describe_schema(schema) -> str:
    if schema is None:
        return "(no schema yet)"
    return "{" + ", ".join(f"{s.name}: {s.type}" for s in schema) + "}"


class Arrangement:
    """A durable, compacting collection of ``(data, time, diff)`` updates (module docstring).

    Parameters
    ----------
    store : Blob
        Where the parts go (e.g. ``colmz.storage.MemBlob()``).
    schema : optional
        The data columns (``pa.Schema``, mapping or specs); pinned by the first append if None.
    part_rows, part_bytes : int
        Bounds on one part's rows and Arrow bytes.
    prefix : str
        Blob key prefix of this arrangement's parts.
    fan_in : int
        How many same-level trace batches :meth:`maintain`'s geometric policy merges at once.
    lease_seconds : float
        The gc lease (module docstring).
    compression : str
        Parquet codec of the parts merges write (drains of several batches, compactions,
        trims).
    write_compression : str
        Parquet codec of the parts a write creates (``"none"``: a write's caller waits for
        the encoding; compaction compresses what the trace keeps,
        ``colmz.arrangement.parts.WRITE_COMPRESSION``).
    clock : callable
        Wall-clock seconds (``time.time``), for part keys and leases.
    token : callable
        A fresh unique string per part (``uuid4().hex``).

    Examples
    --------
    >>> import colmz
    >>> from colmz.storage import MemBlob
    >>> a = colmz.Arrangement(MemBlob())
    >>> a.unsealed_append(colmz.Updates({"k": ["x", "y"]}, time=[0, 1], diff=[1, 1])).seqnos
    (0, 1)
    >>> a.validate_seal(1); a.update_seal(1)
    >>> a.drain(), a.trace_ts_upper()
    (True, 1)
    >>> a.snapshot().to_pylist()
    [('x', 0, 1), ('y', 1, 1)]
    """

    def __init__(self, store: Blob, *, schema=None, part_rows: int = DEFAULT_PART_ROWS,
                 part_bytes: int = DEFAULT_PART_BYTES, prefix: str = "parts/", fan_in: int = 4,
                 lease_seconds: float = 3600.0, compression: str = "snappy",
                 write_compression: str = WRITE_COMPRESSION,
                 clock: Callable[[], float] = _time.time,
                 token: Callable[[], str] | None = None):
        if not isinstance(store, Blob):
            raise TypeError(f"store must be a colmz.storage.Blob, got {type(store).__name__}")
        for name, v in (("part_rows", part_rows), ("part_bytes", part_bytes), ("fan_in", fan_in)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (2 if name == "fan_in" else 1):
                raise ValueError(f"{name} must be an int >= {2 if name == 'fan_in' else 1}, got {v!r}")
        if not lease_seconds > 0:
            raise ValueError(f"lease_seconds must be positive, got {lease_seconds!r}")
        self._store = store
        self.part_rows = part_rows
        self.part_bytes = part_bytes
        self.prefix = prefix
        self.fan_in = fan_in
        self.lease_seconds = float(lease_seconds)
        self.compression = compression
        self.write_compression = write_compression
        self.clock = clock
        self.token = token if token is not None else new_token
        # the whole state, one frozen value (colmz.arrangement.state): every change replaces
        # it with what a transition returns, so a failed call keeps the value it started from
        self._state = ArrangementState(schema=normalize_schema(schema))
        # durable handle (None for an in-memory core)
        self._log = None
        self._seqno: int | None = None
        self._url: str | None = None
        self._home: str | None = None
        self._committed_keys: frozenset[str] = frozenset()
        self._identity = None  # colmz.arrangement.identity.StoreIdentity of a store opened
        self._job: CompactionJob | None = None  # a compaction maintain() left half done
        self._counters = {"commits": 0, "blob_bytes_written": 0, "parts_written": 0,
                      "updates_written": 0, "update_bytes_written": 0, "parts_deleted": 0, "rows_written": 0,
                      "merge_peak_rows": 0}
        # the state last loaded or committed (a fresh core: its initial state), and the one
        # command loop every durable change goes through (colmz.arrangement.machine)
        self._committed_value = self._save()
        self._machine = Machine(_Target(self))

    # ================================================================== metadata

    @classmethod
    def from_meta(cls, meta: dict, store: Blob, **kwargs) -> Arrangement:
        """Rebuild an arrangement from :meth:`meta`'s dict (shape-checked, not validated:
        call :meth:`validate`). Keyword arguments are the constructor's."""
        a = cls(store, **kwargs)
        a._state = ArrangementState.from_meta(meta, a._state.schema)
        a._committed_value = a._save()
        return a

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
        return self._state.schema

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

    # ================================================================== accessors

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

    # ================================================================== seal and since

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

    # ================================================================== unsealed

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
                    f"{what} have an all-NULL column of no type ({_describe_schema(updates.schema)}); "
                    "give the arrangement a schema first"
                )
            return updates
        if [s.name for s in updates.schema] != [s.name for s in schema]:
            raise SchemaMismatch(
                f"{what} have columns {_describe_schema(updates.schema)} but the arrangement's "
                f"schema is {_describe_schema(schema)}"
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
                f"is {_describe_schema(schema)}"
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
        return self._append_normal(updates, order_data(updates), (start, end))

    def _append_normal(self, updates: Updates, normal: tuple, seqnos) -> UnsealedBatchMeta:
        # ``normal`` is ``updates`` consolidated in data order, as ``order_data`` gives it
        # (source, rows); checks are done
        if seqnos is None:
            upper = self.unsealed_seqno_upper()
            seqnos = (upper, upper + 1)
        start, end = seqnos
        t = updates.time
        lo, hi = int(t.min()), int(t.max())
        tu = self.trace_ts_upper()
        if tu is None or lo < tu:
            raise TimeBeforeTraceUpper(f"batch holds time {lo} before the trace upper {tu}")
        schema = self._schema if self._schema is not None else updates.schema
        writer = self._writer(schema, {"kind": "unsealed", "seqnos": [start, end]},
                              self.write_compression)
        writer.write(*normal)
        meta = UnsealedBatchMeta((start, end), lo, hi, tuple(writer.keys), writer.rows, writer.size_bytes,
                                 tuple(writer.checks))
        self._state = self._state.with_schema(schema).unsealed_append(meta)
        self._count_write(writer, updates)
        return meta

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

    def unsealed_step(self) -> bool:
        """Evict, then rewrite the first unsealed batch that holds times before the trace's
        upper, keeping only the updates at or after it (same seqnos, new parts). Returns
        whether a batch was rewritten."""
        evicted, _ = self._state.unsealed_evict()
        tu = evicted.trace_ts_upper()
        for b in evicted.unsealed:
            if b.ts_lower < tu:
                new = self._trim(b, tu)  # raises with the state as it was: nothing evicted
                evicted, _ = self._state.unsealed_evict()  # (the trim may have read the schema)
                self._state = evicted.unsealed_replace(b, new)
                return True
        self._state = evicted
        return False

    def _trim(self, b: UnsealedBatchMeta, tu: int) -> UnsealedBatchMeta:
        schema = self._read_schema()
        writer = self._writer(schema, {"kind": "unsealed", "seqnos": list(b.seqnos)})
        lo = hi = None
        try:
            for u in self._batch_parts(b.parts, schema):
                for enc in chunks_filtered([u], tu, None):
                    writer.add(enc)
                    lo = int(enc.time.min()) if lo is None else min(lo, int(enc.time.min()))
                    hi = int(enc.time.max()) if hi is None else max(hi, int(enc.time.max()))
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        self._count_write(writer)
        if lo is None:  # nothing left at or after the upper: an empty batch, evicted later
            lo = hi = b.ts_upper
        return UnsealedBatchMeta(b.seqnos, lo, hi, tuple(writer.keys), writer.rows, writer.size_bytes,
                                 tuple(writer.checks))

    # ================================================================== drain

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

    def drain_unsealed(self, req: DrainUnsealedReq) -> DrainUnsealedRes:
        """Do a drain request: merge the snapshot's updates into a new level-0 trace batch.

        Changes no state (hand the result to :meth:`unsealed_handle_drain_response`). When
        the snapshot holds no update in the interval there is no batch; when it holds some
        that cancel out, the batch has no parts and still advances the trace's upper.
        """
        snap, desc = req.snap, req.desc
        if not snap.batches:
            return DrainUnsealedRes(req, None)
        if len(snap.batches) == 1:
            b = snap.batches[0]
            inside = desc.lower <= b.ts_lower and (desc.upper is None or b.ts_upper < desc.upper)
            if inside:
                if not b.keys:
                    return DrainUnsealedRes(req, None)
                # Already sorted and consolidated: the trace takes the parts as they are.
                return DrainUnsealedRes(req, TraceBatchMeta(desc, 0, b.keys, b.len, b.size_bytes, b.checks))
        schema = self._read_schema()
        writer = self._writer(schema, {"kind": "trace", "desc": desc.to_list()})
        runs = [self._run_chunks(b.parts, schema, desc.lower, desc.upper) for b in snap.batches]
        try:
            read = stream_merge(runs, None, writer.add, self._counters)
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        if not sum(read):
            writer.abort()
            return DrainUnsealedRes(req, None)
        self._count_write(writer)
        return DrainUnsealedRes(req, TraceBatchMeta(desc, 0, tuple(writer.keys), writer.rows, writer.size_bytes,
                                                    tuple(writer.checks)))

    def unsealed_handle_drain_response(self, res: DrainUnsealedRes) -> None:
        """Append the drained batch iff there is one and it starts at the trace's upper
        (a stale response is ignored)."""
        self._state = self._state.handle_drain_response(res)

    def drain(self) -> bool:
        """Request, do and apply one drain; whether the trace grew."""
        req = self.unsealed_next_drain_req()
        if req is None:
            return False
        n = len(self._trace)
        self.unsealed_handle_drain_response(self.drain_unsealed(req))
        return len(self._trace) > n

    #: upstream's name
    unsealed_drain = drain

    # ================================================================== trace

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

    def compact_trace(self, req: CompactTraceReq) -> CompactTraceRes:
        """Merge ``req``'s batches into one, times advanced to ``req.since``; changes no
        state (see :meth:`trace_handle_compact_response`).

        The merged description is ``[first.lower, last.upper)`` at ``req.since``. With two
        inputs the level is ``b0.level + 1`` iff the merged batch holds more updates than each
        parent, else ``b0.level``; a wider merge (the geometric policy) is one level up.
        Raises :class:`NonContiguousMerge` and :class:`SinceBehindInput`.
        (:class:`CompactionJob` is the same merge done a budget at a time.)
        """
        job = CompactionJob(self, req)
        job.step(None)
        return job.result()

    def trace_handle_compact_response(self, res: CompactTraceRes) -> list[TraceBatchMeta]:
        """Replace the request's batches with the merged one if they are still adjacent in
        the trace; return the replaced batches (newest first, as upstream), or ``[]``."""
        self._state, replaced = self._state.handle_compact_response(res)
        return replaced

    def compact(self, req: CompactTraceReq | None = None) -> list[TraceBatchMeta]:
        """Request (unless given), do and apply one compaction; the replaced batches."""
        if req is None:
            req = self.trace_next_compact_req()
            if req is None:
                return []
        return self.trace_handle_compact_response(self.compact_trace(req))

    def geometric_compact_req(self) -> CompactTraceReq | None:
        """:meth:`maintain`'s default policy: the oldest ``fan_in`` adjacent batches of one
        level (levels are non-increasing, so same-level batches are adjacent), merged at the
        current since, or None."""
        n, f = len(self._trace), self.fan_in
        i = 0
        while i < n:
            j = i
            while j < n and self._trace[j].level == self._trace[i].level:
                j += 1
            if j - i >= f:
                return CompactTraceReq(tuple(self._trace[i:i + f]), self._since)
            i = j
        return None

    # ================================================================== reading

    def snapshot(self) -> Updates:
        """Everything written: the trace, and the unsealed updates at or after the trace's
        upper, with every time advanced to the since; consolidated, sorted by
        ``(data, time)``. (A since beyond the seal forwards unsealed updates too.)"""
        return self._read_all(None)

    def _read_plan(self, as_of: int | None) -> tuple[list[ReadRun], int, int | None]:
        """The runs a read as of ``as_of`` takes (their part keys and the time window kept
        of each: trace batches whole, unsealed batches from the trace's upper), the since
        its times advance to, and the upper of its times (None: all)."""
        tu = self.trace_ts_upper()
        # times at or before as_of (as_of + 1 cannot wrap: Python ints)
        upper = None if as_of is None or as_of == MAX_TIME else as_of + 1
        since = self._since if as_of is None else max(self._since, as_of)
        unsealed = self.unsealed_snapshot(tu, None).batches if tu is not None else ()
        batches: list[ReadRun] = [(b.parts, 0, upper) for b in self._trace]
        if unsealed:
            hi = upper if upper is None or upper > tu else tu
            # a batch whose every time is at or beyond the read's upper adds nothing
            batches += [(b.parts, tu, hi) for b in unsealed if hi is None or b.ts_lower < hi]
        return batches, since, upper

    def _fetch(self, as_of: int | None) -> FetchedRuns:
        batches, since, _ = self._read_plan(as_of)
        return self._fetched(self._read_schema(), batches, since)

    def _fetched(self, schema, batches: list[ReadRun], since: int) -> FetchedRuns:
        runs = read_runs(self._store, batches, schema, self._read_pool(batches))
        return FetchedRuns(runs, since, schema,
                           exact=lambda: self._read_streaming(batches, since, schema))

    def _read_all(self, as_of: int | None) -> Updates:
        schema = self._read_schema()
        batches, since, _ = self._read_plan(as_of)
        # colmz.arrangement.read: every part read whole, the runs merged by order words into
        # a permutation and each column gathered once (a diff sum leaving int64: the exact
        # streaming merge). The common shape after maintain() -- one trace batch, nothing
        # unsealed read -- is its parts as they are whenever advancing the times cannot make
        # two rows meet (FetchedRuns.merge: run_contents): no merge, no encoding.
        return self._fetched(schema, batches, since).merge()

    def _read_streaming(self, batches, since: int, schema) -> Updates:
        # Inputs come a whole part at a time (one Parquet read each, the next one fetched
        # while this one merges), merged on full encodings (arrangement_parts.stream_merge).
        out: list[Encoded] = []
        pool = self._read_pool(batches)
        runs = [chunks_filtered(read_ahead(self._store, keys, schema, pool), lo, hi)
                for keys, lo, hi in batches]
        stream_merge(runs, since, out.append)
        return self._decode_many(out, schema)

    # ================================================================== helpers

    def _read_pool(self, batches):
        # The shared part-reading pool when more than one part is read from a store whose
        # calls may run in threads; None reads in this thread.
        parts = sum(len(keys) for keys, _, _ in batches)
        return (shared_pool("read", READ_THREADS) if parts > 1 and concurrent_calls(self._store)
                else None)

    def _read_schema(self) -> tuple[ColumnSpec, ...]:
        if self._schema is None:
            key = next((k for b in self._trace for k in b.keys), None) or next(
                (k for b in self._unsealed for k in b.keys), None)
            if key is None:
                return ()
            self._state = self._state.with_schema(self._read_schema_of(key))
        return self._schema

    def _batch_parts(self, keys, schema) -> Iterator[Updates]:
        for k in keys:
            yield from iter_part(self._store, k, schema)

    def _run_chunks(self, keys, schema, lower: int, upper: Frontier) -> PartRun:
        # a merge sizes the reads of a PartRun by its fan-in (arrangement_parts.iter_merge)
        return PartRun(self._store, keys, schema, lower, upper)

    def _writer(self, schema, info, compression: str | None = None) -> PartWriter:
        return PartWriter(self._store, schema, self.new_blob_key, info, part_rows=self.part_rows,
                          part_bytes=self.part_bytes,
                          compression=self.compression if compression is None else compression)

    def _count_write(self, writer: PartWriter, updates: Updates | None = None) -> None:
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

    def _save(self) -> ArrangementState:
        # the state is a frozen value: keeping it is keeping a reference
        return self._state

    def _restore(self, saved: ArrangementState) -> None:
        self._state = saved

    def _dirty(self) -> bool:
        # whether memory holds changes no commit made (core operations without commit())
        return self._state is not self._committed_value and self._state != self._committed_value

    def referenced_keys(self) -> frozenset[str]:
        """Every part key the current (in-memory) state names."""
        return frozenset(k for b in (*self._unsealed, *self._trace) for k in b.keys)

    # ================================================================== durable user API

    @classmethod
    def open(cls, url, schema=None, *, consensus: str | None = None, name: str = "arrangement",
             create: bool = True, rollup_every: int = 32, **kwargs) -> Arrangement:
        """Open the arrangement stored at ``url``, creating it when absent.

        Parameters
        ----------
        url : str, path or ``colmz.storage.url.Location``
            A directory (parts in ``DIR/blob``, metadata in ``DIR/consensus.sqlite``),
            ``mem://name``, or ``s3://bucket/prefix`` with ``consensus``
            (see ``colmz.storage.url.open_location``), or a store already opened.
        schema : optional
            The data columns. A new arrangement pins it (or the first write's columns when
            None); an existing one must have the same, else :class:`SchemaMismatch`.
        consensus : str, optional
            The consensus URL (``sqlite:///...``, ``postgresql://...``).
        name : str
            The arrangement's name inside the store: its part prefix ``<name>/parts/`` and
            identity ``<name>/identity.json``, so several arrangements can share one store.
            Its consensus key is ``<name>/<store id>`` (``colmz.arrangement.identity``), so
            several stores can share one consensus database.

        Raises
        ------
        IdentityMismatch
            The consensus record the blob names belongs to another store, or the blob holds
            parts and the record at ``name`` is another store's.
        MetadataLost
            The blob holds parts no consensus record accounts for (a lost or wrong
            consensus): a new arrangement is never created over them.
        FileNotFoundError
            ``create=False`` and there is no arrangement.
        kwargs
            The constructor's tunables.

        Examples
        --------
        >>> import colmz, tempfile
        >>> d = tempfile.mkdtemp()
        >>> a = colmz.Arrangement.open(d)
        >>> a.write(colmz.Updates({"k": [1, 2]}, time=[0, 0], diff=[1, 1]))
        >>> a.seal(1)
        >>> colmz.Arrangement.open(d).read().to_pylist()
        [(1, 0, 1), (2, 0, 1)]
        """
        from colmz.arrangement.identity import identity_key, read_identity, resolve, write_identity
        from colmz.storage.sqlite import SqliteConsensus
        from colmz.storage.state import StateLog
        from colmz.storage.url import Location, local_path, open_location

        schema = normalize_schema(schema)
        if isinstance(url, Location):
            if consensus is not None:
                raise ValueError("give consensus=... with a URL, not with an opened Location")
            loc = url
        else:
            loc = open_location(url, consensus=consensus, create=create)
        kwargs.setdefault("prefix", f"{name}/parts/")
        where = getattr(url, "url", url)
        clock = kwargs.get("clock", _time.time)

        logs: dict[str, StateLog] = {}  # the log that loaded a record keeps its cache

        def load(key: str):
            logs[key] = StateLog(loc.consensus, key, rollup_every=rollup_every)
            return logs[key].load()

        def head_seqno(key: str) -> int | None:
            head = loc.consensus.head(key)
            return None if head is None else head.seqno

        # A directory's own consensus.sqlite is copied with it: a copy is a store of its own.
        root = local_path(loc.url) if isinstance(loc.url, str) else None
        own_consensus = (root is not None and isinstance(loc.consensus, SqliteConsensus)
                         and loc.consensus.path == (root / "consensus.sqlite").resolve())
        for attempt in range(3):
            ident = read_identity(loc.blob, name)
            res, seqno, state = resolve(loc.blob, name, kwargs["prefix"], ident, load,
                                        where=str(where), consensus=repr(loc.consensus),
                                        now_ms=int(clock() * 1000),
                                        lease_ms=float(kwargs.get("lease_seconds", 3600.0)) * 1000,
                                        head_seqno=head_seqno, own_consensus=own_consensus)
            if res.action == "create" and not create:
                raise FileNotFoundError(f"no arrangement {name!r} at {where!r}")
            a = cls(loc.blob, schema=schema if state is None else None, **kwargs)
            a._url = loc.url
            a._home = loc.blob.url_of(identity_key(name))
            if res.action != "open":
                # The identity first (written once: a concurrent creator's wins, and the
                # next round opens with it), then the state naming it.
                written = write_identity(loc.blob, res.identity)
                if written != res.identity:
                    continue
            a._identity = res.identity
            key = res.identity.consensus_key
            a._log = logs.get(key) or StateLog(loc.consensus, key, rollup_every=rollup_every)
            if state is not None:
                a._load_state(seqno, state)
                if schema is not None and a._schema is not None and tuple(a._schema) != tuple(schema):
                    raise SchemaMismatch(
                        f"arrangement {name!r} at {where!r} has schema "
                        f"{_describe_schema(a._schema)}, not the requested {_describe_schema(schema)}"
                    )
                if res.action == "open" and (schema is None or a._schema is not None):
                    return a
                if a._schema is None:
                    a._state = a._state.with_schema(schema)
            try:
                # create the record, adopt a record from before identities (the id goes
                # into its state), or pin the schema of one created without
                a._commit_state()
            except CommitConflict:
                # another process created, adopted or pinned it first: read what it committed.
                # Not the machine's retry (no command is re-applied): which store and record
                # this handle opens is resolved again from the blob's identity.
                if attempt == 2:
                    raise
                continue
            if res.action == "create":
                a._check_identity_kept(str(where))
            return a
        raise CommitConflict(name, None, None)

    def _check_identity_kept(self, where: str) -> None:
        # A blob without an atomic put-if-absent (S3) may have had a concurrent creator's
        # identity written over ours: then the record just committed is nobody's.
        from colmz.arrangement.identity import read_identity

        found = read_identity(self._store, self._identity.name)
        if found != self._identity:
            raise IdentityMismatch(
                f"store {where!r} was created by two processes at once: its identity is now "
                f"{found.id if found else None}, not {self._identity.id} whose record this "
                "process committed (empty, at "
                f"{self._identity.consensus_key!r}); nothing else was written: open it again"
            )

    @property
    def identity(self):
        """The store's identity (``colmz.arrangement.identity.StoreIdentity``), or None for an
        arrangement not opened by :meth:`open`."""
        return self._identity

    def _state_doc(self) -> dict:
        doc = {"format": STATE_FORMAT, "schema": schema_to_json(self._schema), "meta": self.meta()}
        if self._identity is not None:
            doc["identity"] = self._identity.state_doc()
            if self._home is not None:
                # where the blob committing this state is (identity.check_not_a_copy)
                doc["identity"]["blob"] = self._home
        return doc

    def _load_state(self, seqno, state) -> None:
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT or "meta" not in state:
            raise CorruptMeta(f"arrangement state at seqno {seqno} is not a colmz arrangement "
                              f"(format {state.get('format') if isinstance(state, dict) else state!r})")
        from colmz.arrangement.identity import state_identity

        sid = state_identity(state)
        if sid is not None and self._identity is not None and sid != self._identity.id:
            raise IdentityMismatch(
                f"arrangement state at seqno {seqno} (consensus key {self._identity.consensus_key!r}) "
                f"belongs to store {sid}, not to this store {self._identity.id}"
            )
        schema = schema_from_json(state.get("schema"))
        seal, since, unsealed, trace = meta_from_dict(state["meta"])
        properties = properties_from_dict(state["meta"])
        validate_meta(seal, since, unsealed, trace)
        self._state = ArrangementState(seal, since, unsealed, trace, schema, properties)
        self._seqno = seqno
        self._committed_keys = self.referenced_keys()
        self._committed_value = self._save()

    @property
    def durable(self) -> bool:
        """Whether this arrangement commits to a consensus store (opened by :meth:`open`)."""
        return self._log is not None

    @property
    def seqno(self) -> int | None:
        """The committed version this handle last read or wrote."""
        return self._seqno

    def refresh(self) -> None:
        """Reload the committed state (discarding uncommitted in-memory changes)."""
        if self._log is None:
            return
        seqno, state = self._log.load()
        if state is None:
            raise CorruptMeta("the arrangement's consensus record is gone")
        self._check_not_behind(seqno, state)
        self._load_state(seqno, state)

    def _check_not_behind(self, seqno: int, state) -> None:
        """Refuse a record whose seqno went down under this handle: seqnos never decrease,
        so it was rolled back to an older copy (``colmz.arrangement.identity``)."""
        if self._seqno is not None and seqno < self._seqno:
            from colmz.arrangement.identity import seal_of_state

            raise MetadataRolledBack(
                f"store {self._url!r}: its consensus record {self._log.key!r} is at seqno "
                f"{seqno} (seal {seal_of_state(state)}), behind seqno {self._seqno} this handle "
                "read or committed: the record was rolled back to an older copy (a consensus "
                "restored from a backup). Nothing was written; restore the newest copy of the "
                "consensus database"
            )

    def commit(self) -> int | None:
        """Commit the in-memory state (after core operations on a durable arrangement).

        Refuses with :class:`LeaseExpired` when a newly referenced part is older than half the
        lease; raises ``CommitConflict`` when another writer committed first. Either way
        nothing is committed and the in-memory state is left as it is.
        """
        if self._log is None:
            return None
        self._commit_state()
        return self._seqno

    def _commit_state(self) -> None:
        # the one compare-and-set of the arrangement's state (StateLog.commit); the retry of
        # a lost one is the machine's (colmz.arrangement.machine), never the caller's
        self._check_lease(self.referenced_keys() - self._committed_keys)
        self._seqno = self._log.commit(self._seqno, self._state_doc())
        self._committed_keys = self.referenced_keys()
        self._committed_value = self._save()
        self._counters["commits"] += 1

    def _check_lease(self, new_keys) -> None:
        """Refuse to reference parts older than half the gc lease (gc may have taken them)."""
        now_ms = self.clock() * 1000
        for k in new_keys:
            ms = key_created_ms(k)
            if ms is not None and now_ms - ms > self.lease_seconds * 500:
                raise LeaseExpired(
                    f"part {k!r} was written {(now_ms - ms) / 1000:.1f} s ago, more than half the "
                    f"gc lease of {self.lease_seconds} s: gc may collect it, so it cannot be committed"
                )

    def _durably(self, cmd, written=()):
        """Apply ``cmd`` (a core change re-checking what it needs on the state it finds)
        through the machine: commit it, refresh and re-apply on a lost compare-and-set."""
        return self._machine.apply(cmd, written=written)

    def _delete_keys(self, keys) -> None:
        for k in keys:
            try:
                self._store.delete(k)
                self._counters["parts_deleted"] += 1
            except Exception:  # noqa: BLE001 - best effort; gc collects what is left
                pass

    def _read_schema_of(self, key: str) -> tuple[ColumnSpec, ...]:
        import pyarrow.parquet as pq

        data = self._store.get(key)
        if data is None:
            raise MissingPart(f"part {key!r} is missing from the blob store")
        s = pq.read_schema(pa.BufferReader(data))
        return tuple(ColumnSpec(f.name, f.type) for f in s if f.name not in ("time", "diff"))

    def write(self, updates) -> None:
        """Add ``updates`` durably (one unsealed batch, one commit).

        ``updates`` is a :class:`colmz.Updates`, an Arrow table or a pandas DataFrame (with
        ``time`` and ``diff`` columns; the others are data).

        Raises :class:`SchemaMismatch` for other columns and :class:`TimeBeforeSeal` for a
        time before the seal. Updates that consolidate to nothing write nothing.
        """
        updates = self._conform(updates)
        if not len(updates):
            return
        lo = int(updates.time.min())

        def check() -> None:
            if self._seal is None or lo < self._seal:
                raise TimeBeforeSeal(f"updates hold time {lo}, before the seal {self._seal}")

        check()
        normal = order_data(updates)
        if not len(normal[0] if normal[1] is None else normal[1]):
            return

        def cmd():
            # on a retry the state is another writer's: its seal and schema are checked again
            check()
            return self._append_normal(self._conform(updates), normal, None)

        self._durably(cmd)

    def append_runs(self, runs, *, seal: Frontier | object = _KEEP, properties: dict | None = None,
                    expect: Frontier | object = _KEEP, expect_properties: dict | None = None,
                    keep_runs: bool = False) -> None:
        """Commit runs of parts written by other processes as unsealed batches, one per run,
        in one compare-and-set; with ``seal``, advance the seal in the same commit, and with
        ``properties`` (a dict of str to str or int; None removes a key) update
        :meth:`properties` in it too. With ``expect``, the commit happens only if the seal is
        ``expect``, and with ``expect_properties`` only if the properties are exactly those
        (else :class:`SealMismatch`): the runs land at most once, right after ``expect``
        (persist's ``compare_and_append``). A handle whose seal is not ``expect`` is
        refreshed once before it refuses (it may be behind); a compare-and-set lost to another
        writer refreshes and applies the call again to the newer state, where its checks run
        again (``colmz.arrangement.machine``, at most ``ATTEMPTS`` compare-and-sets, then
        ``CommitConflict``).

        ``runs`` are :class:`colmz.arrangement.runs.WrittenRun` (or their dicts), written with
        :func:`colmz.arrangement.runs.write_run` under this arrangement's :attr:`prefix` --
        e.g. by Spark executors while the driver commits. Everything is checked before
        anything changes: times at or after the seal (:class:`TimeBeforeSeal`), keys under the
        prefix, present in the blob store (:class:`MissingPart`) and not referenced yet, a seal
        not before the current one (:class:`SealRegression`), properties of the right types
        (``TypeError``); the lease check of every commit applies too (:class:`LeaseExpired`).
        On any failure nothing is committed and memory -- the properties too -- is as before
        (or, after a lost compare-and-set, the state another writer committed). The runs'
        parts are the caller's until the call commits them; a call that refused them after a
        lost compare-and-set (or lost it ``ATTEMPTS`` times) deleted them -- unless
        ``keep_runs``: then the call never deletes them (another record names them and applies
        them again: a durable catalog's committed intent, ``colmz.catalog_store``).

        >>> import colmz
        >>> from colmz.arrangement.runs import write_run
        >>> a = colmz.Arrangement.open("mem://append-runs-doc", schema={"k": pa.int64()})
        >>> u = colmz.Updates({"k": [1, 2]}, time=[0, 3], diff=[1, 1])
        >>> run = write_run(a.store, a.schema, u, prefix=a.prefix)
        >>> a.append_runs([run], seal=4)
        >>> a.read(as_of=3).to_pylist()
        [(1, 3, 1), (2, 3, 1)]
        """
        from colmz.arrangement.runs import WrittenRun

        runs = [r if isinstance(r, WrittenRun) else WrittenRun.from_dict(r) for r in runs]
        if expect is not _KEEP:
            expect = check_frontier(expect, "expect")
        if expect_properties is not None:
            expect_properties = check_properties(expect_properties, {})
        if properties is not None:
            check_properties(properties, {})
        if seal is not _KEEP:
            seal = check_frontier(seal, "seal")
        keys = [k for r in runs for k in r.keys]
        for k in keys:
            if not k.startswith(self.prefix):
                raise ValueError(f"part {k!r} is not under this arrangement's prefix {self.prefix!r}")
        if len(set(keys)) != len(keys):
            raise ValueError("runs name a part twice, or a part the arrangement already holds")

        def expected() -> bool:
            return ((expect is _KEEP or expect == self._seal)
                    and (expect_properties is None or expect_properties == self._properties))

        def check() -> dict:
            # what depends on the state: run again on a retry, against another writer's state
            if expect is not _KEEP and expect != self._seal:
                raise SealMismatch(f"append_runs expected the seal at {expect}, it is at {self._seal}")
            if expect_properties is not None and expect_properties != self._properties:
                raise SealMismatch(f"append_runs expected the properties {expect_properties}, "
                                   f"they are {self._properties}")
            new_properties = self._properties if properties is None else check_properties(properties, self._properties)
            if seal is not _KEEP:
                self.validate_seal(seal)
            if set(keys) & self.referenced_keys():
                raise ValueError("runs name a part twice, or a part the arrangement already holds")
            for r in runs:
                if self._seal is None or r.ts_lower < self._seal:
                    raise TimeBeforeSeal(f"a run holds time {r.ts_lower}, before the seal {self._seal}")
            return new_properties

        if not expected() and self.durable and not self._dirty():
            self.refresh()  # this handle may be behind the seal it is told to expect
        check()
        if keys:
            present = set(self._store.list_keys(self.prefix))
            missing = [k for k in keys if k not in present]
            if missing:
                raise MissingPart(f"part {missing[0]!r} of a run is missing from the blob store")

        def cmd():
            new_properties = check()
            if not runs and (seal is _KEEP or seal == self._seal) and new_properties == self._properties:
                return STALE  # nothing to commit
            state = self._state
            tu = state.trace_ts_upper()
            for r in runs:
                if tu is None or r.ts_lower < tu:
                    raise TimeBeforeTraceUpper(f"a run holds time {r.ts_lower} before the trace upper {tu}")
                upper = state.unsealed_seqno_upper()
                state = state.unsealed_append(UnsealedBatchMeta((upper, upper + 1), r.ts_lower, r.ts_upper,
                                                                tuple(r.keys), r.len, r.size_bytes, r.checks))
            if seal is not _KEEP:
                state = state.update_seal(seal)
            self._state = state.with_properties(new_properties)
            return None

        if self._machine.apply(cmd, written=keys, keep=keys if keep_runs else ()) is STALE:
            return
        self._counters["parts_written"] += len(keys)
        self._counters["blob_bytes_written"] += sum(r.size_bytes for r in runs)

    def seal(self, upper: Frontier, *, properties: dict | None = None) -> None:
        """Close the times before ``upper`` durably (a metadata commit; no part is written);
        with ``properties`` (a dict of str to str or int; None removes a key), update
        :meth:`properties` in the same commit.

        Raises :class:`SealRegression` for an upper before the current seal and
        ``TypeError`` for bad properties, committing nothing.
        """
        def cmd():
            # checked on the state found: a retry after a lost compare-and-set checks again
            self.validate_seal(upper)
            new_properties = self._properties if properties is None else check_properties(properties, self._properties)
            if checked == self._seal and new_properties == self._properties:
                return STALE  # nothing to commit
            self._state = self._state.update_seal(checked).with_properties(new_properties)
            return None

        self.validate_seal(upper)
        checked = check_frontier(upper, "seal")
        if properties is not None:
            check_properties(properties, self._properties)
        self._durably(cmd)

    def advance_since(self, since: int) -> None:
        """Allow compaction up to ``since`` durably (:meth:`validate_allow_compaction` first)."""
        def cmd():
            self.validate_allow_compaction(since)
            if checked == self._since:
                return STALE  # nothing to commit
            self.allow_compaction(checked)
            return None

        self.validate_allow_compaction(since)
        checked = self._check_since(since)
        self._durably(cmd)

    def maintain(self, fuel: int | None = None, *, policy: str = "geometric",
                 conflict_retries: int = 3, progress: ProgressCallback | None = None) -> dict:
        """Drain, evict, trim and compact in steps, each its own commit, until nothing is
        left to do or ``fuel`` updates (read by the steps) are spent.

        A merge is itself done within the fuel: one that needs more is kept half done
        (``report["merging"]``) and resumed by the next call, so each call costs about
        ``fuel`` and writes are never held up behind a long merge; its parts are committed
        when it completes.

        ``policy`` chooses the compaction: ``"geometric"`` (default, fan-in ``fan_in``) or
        ``"levels"`` (upstream's pairwise rule). A step that loses its compare-and-set to
        another writer reloads the state and applies its result there when it still fits
        (up to ``conflict_retries`` times per step, then ``CommitConflict``). Returns counts
        of what was done.

        ``progress(done, total, label)`` (``colmz.progress``) is called as the steps go, in
        updates read (the fuel's unit): ``label`` is ``"drain"``, ``"trim"`` or
        ``"compact"``; ``total`` is the work known so far (the step under way, capped by
        the fuel) and grows as compactions follow each other; a merge is stepped in about
        twenty slices so long merges report too. The last call has ``done == total`` and
        label ``"done"`` (``"merging"`` when a merge is left half done).

        Examples
        --------
        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://maintain-doc")
        >>> for t in range(4):
        ...     a.write(colmz.Updates({"k": [t]}, time=[t], diff=[1])); a.seal(t + 1)
        >>> r = a.maintain()
        >>> r["drains"], r["compactions"], [b.level for b in a.trace_batches]
        (1, 0, [0])
        """
        if policy not in _POLICIES:
            raise ValueError(f"policy must be one of {_POLICIES}, got {policy!r}")
        if fuel is not None and (isinstance(fuel, bool) or not isinstance(fuel, int) or fuel < 0):
            raise ValueError(f"fuel must be a non-negative int or None, got {fuel!r}")
        if isinstance(conflict_retries, bool) or not isinstance(conflict_retries, int) or conflict_retries < 0:
            raise ValueError(f"conflict_retries must be a non-negative int, got {conflict_retries!r}")
        check_progress(progress)
        report = {"drains": 0, "trims": 0, "evictions": 0, "compactions": 0, "rows": 0,
                  "conflicts": 0, "expired": 0, "merging": False}
        self._maintain(fuel, policy, report, conflict_retries, progress)
        report["merging"] = self._job is not None
        if progress is not None:
            # a merge restarted after a conflict read some updates twice: never report less
            done = max(report["rows"], report.pop("progress_shown", 0))
            progress(done, done, "merging" if report["merging"] else "done")
        return report

    def _still_adjacent(self, batches) -> bool:
        k = len(batches)
        return any(tuple(self._trace[i:i + k]) == tuple(batches) for i in range(len(self._trace) - k + 1))

    def _apply_and_commit(self, apply, new_keys, retries: int, report: dict) -> bool:
        """Apply a step's response to the state and commit it through the machine.

        ``apply()`` changes the in-memory state from the response and says whether it still
        fits (a response is stale once another commit changed what it was computed from).
        When the compare-and-set loses to another writer, the machine reloads the state and
        applies the same response again -- its parts (``new_keys``) are already written, so a
        long compaction is never thrown away because a small write landed meanwhile. A
        response that no longer fits has its parts deleted.
        """
        def cmd():
            return None if apply() else STALE

        def lost() -> None:
            report["conflicts"] += 1

        out = self._machine.apply(cmd, written=new_keys, attempts=retries + 1, on_conflict=lost)
        return out is not STALE

    def _drop_unreferenced(self, keys) -> None:
        # parts of a response that was never committed (and no committed state names)
        self._delete_keys(set(keys) - self.referenced_keys() - self._committed_keys)

    def _maintain(self, fuel, policy, report, retries, progress=None) -> None:

        def spent() -> bool:
            return fuel is not None and report["rows"] >= fuel

        def tell(label: str, pending: int, done: int | None = None) -> None:
            # total: what is done plus what the step under way still reads, within the fuel;
            # never less done than shown before (a merge restarted after a conflict re-reads)
            if progress is None:
                return
            done = max(report["rows"] if done is None else done, report.get("progress_shown", 0))
            report["progress_shown"] = done
            if fuel is not None:
                pending = min(pending, max(fuel - done, 0))
            progress(done, done + max(pending, 0), label)

        # 1. drain, and evict what the drain covered, in one commit
        tu, seal = self.trace_ts_upper(), self._seal
        if seal != tu and tu is not None and frontier_lt(tu, seal) and not spent():
            tell("drain", sum(b.len or 0 for b in self._unsealed))
            res = self.drain_unsealed(self.unsealed_next_drain_req())
            d = res.drained
            if d is not None:
                def apply_drain(d=d):
                    # still the next interval, and still sealed (no revert since)
                    if self.trace_ts_upper() != d.desc.lower or not frontier_le(d.desc.upper, self._seal):
                        return False
                    self._state, _ = self._state.handle_drain_response(res).unsealed_evict()
                    return True
                if self._apply_and_commit(apply_drain, set(d.keys), retries, report):
                    report["drains"] += 1
                    report["rows"] += d.len or 0

        # 2. evict, then trim unsealed batches, one per commit
        def apply_evict():
            return bool(self.unsealed_evict())
        if self._apply_and_commit(apply_evict, (), retries, report):
            report["evictions"] += 1
        while not spent():
            tu = self.trace_ts_upper()
            old = next((b for b in self._unsealed if tu is not None and b.ts_lower < tu), None)
            if old is None:
                break
            tell("trim", old.len or 0)
            new = self._trim(old, tu)

            def apply_trim(old=old, new=new, tu=tu):
                if old not in self._unsealed or self.trace_ts_upper() != tu:
                    return False
                self._state = self._state.unsealed_replace(old, new)
                return True
            if not self._apply_and_commit(apply_trim, set(new.keys), retries, report):
                continue
            report["trims"] += 1
            report["rows"] += old.len or 0

        # 3. compaction, one merge per commit; a merge that outlasts the fuel is kept and
        #    resumed by the next call (dropped if its inputs left the trace meanwhile)
        while not spent():
            job = self._job
            if job is not None and not self._still_adjacent(job.req.batches):
                job.abort()
                job = self._job = None
            if job is None:
                req = self.geometric_compact_req() if policy == "geometric" else self.trace_next_compact_req()
                if req is None:
                    break
                job = self._job = CompactionJob(self, req)
            before = job.rows_read
            budget = None if fuel is None else fuel - report["rows"]
            try:
                if progress is None:
                    finished = job.step(budget)
                else:
                    # the same budget in slices, reporting after each
                    job_rows = sum(b.len or 0 for b in job.req.batches)
                    piece = max(job_rows // 20, 1)
                    while True:
                        read = job.rows_read - before
                        tell("compact", job_rows - job.rows_read, report["rows"] + read)
                        left = None if budget is None else budget - read
                        if left is not None and left <= 0:
                            finished = job.done
                            break
                        finished = job.step(piece if left is None else min(piece, left))
                        if finished:
                            break
            except MissingPart:
                # another writer's commit replaced the inputs (and collected their parts)
                # since the merge started: reload and choose again
                self._job = None
                if self._log is None:
                    raise
                self.refresh()
                continue
            except BaseException:
                self._job = None
                raise
            report["rows"] += job.rows_read - before
            if not finished:
                break
            self._job = None
            res = job.result()

            def apply_compaction(res=res):
                return bool(self.trace_handle_compact_response(res))
            try:
                if self._apply_and_commit(apply_compaction, set(res.merged.keys), retries, report):
                    report["compactions"] += 1
            except LeaseExpired:
                # the merge ran so long that gc may take its first parts: they are dropped
                # and the merge starts over
                report["expired"] += 1

    def read(self, as_of: int | None = None) -> Updates:
        """The contents: with ``as_of=None`` everything written (times advanced to the
        since); with ``as_of`` the collection at that time -- every update at or before it,
        its time set to ``as_of``, consolidated. ``as_of`` must be at or after the since and
        before the seal (:class:`InvalidAsOf`).

        Reads the state this handle last loaded or committed; :meth:`refresh` first to see
        other writers' commits.

        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://read-doc")
        >>> a.write(colmz.Updates({"k": ["x", "x", "y"]}, time=[0, 2, 3], diff=[1, 1, 1]))
        >>> a.seal(4)
        >>> a.read(2).to_pylist()
        [('x', 2, 2)]
        """
        return self._reading(self._read_all, as_of)

    def read_unmerged(self, as_of: int | None = None) -> FetchedRuns:
        """:meth:`read`'s runs, fetched but not merged (``colmz.arrangement.fetched.FetchedRuns``):
        ``.merge()`` is ``read(as_of)``; ``.rows()`` is the contents as the rows of a
        relation (one per copy, in no order), without any merge when no update read retracts
        or few do -- what a query reading the arrangement as a table needs.

        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://read-unmerged-doc")
        >>> a.write(colmz.Updates({"k": ["y", "x"]}, time=[0, 2], diff=[1, 2]))
        >>> a.seal(3)
        >>> f = a.read_unmerged(2)
        >>> sorted(f.rows().column("k").to_pylist())
        ['x', 'x', 'y']
        >>> f.merge().to_pylist()
        [('x', 2, 2), ('y', 2, 1)]
        """
        return self._reading(self._fetch, as_of)

    def _reading(self, read, as_of: int | None):
        # the as_of checked once; a part another handle deleted: refresh and read once more
        if as_of is not None:
            as_of = check_time(as_of, "as_of")
            if as_of < self._since:
                raise InvalidAsOf(f"as_of {as_of} is before the since {self._since}: compacted away")
            if not (self._seal is None or as_of < self._seal):
                raise InvalidAsOf(f"as_of {as_of} is not before the seal {self._seal}: not final yet")
        try:
            return read(as_of)
        except MissingPart:
            if self._log is None:
                raise
            before = self._seqno
            self.refresh()
            if self._seqno == before:
                raise
            return read(as_of)

    def to_arrow(self, as_of: int | None = None) -> pa.Table:
        """:meth:`read` as an Arrow table (data columns, ``time``, ``diff``)."""
        return self.read(as_of).to_arrow()

    def to_pandas(self, as_of: int | None = None):
        """:meth:`read` as a pandas DataFrame."""
        return self.read(as_of).to_pandas()

    def parts(self) -> list[PartInfo]:
        """Every part of the current state, trace batches first (module docstring of
        ``colmz.arrangement.parts`` for the format)."""
        out = [PartInfo(self._store.url_of(k), k, "trace", 0, c) for b in self._trace for k, c in b.parts]
        tu = self.trace_ts_upper()
        if tu is not None:
            for b in self._unsealed:
                if tu <= b.ts_upper:
                    out += [PartInfo(self._store.url_of(k), k, "unsealed", tu, c) for k, c in b.parts]
        return out

    def gc(self, lease_seconds: float | None = None) -> list[str]:
        """Delete parts under this arrangement's prefix that the committed state does not
        reference and that are older than the lease; return the deleted keys.

        Refuses, deleting nothing, when the committed state cannot account for the parts
        (``colmz.arrangement.identity``): :class:`IdentityMismatch` when the blob's identity
        or the record's id is not this handle's store, :class:`MetadataLost` when the
        record is gone while parts remain, when unreferenced parts were written before the
        store was created (they are not this state's garbage), or when the state never held
        a batch while an unsealed or trace part past the lease is there; and
        :class:`MetadataRolledBack` when a part records a newer version than the record's
        (or the record's seqno went down under this handle). A part recording the version
        gc read, or a newer one, is never deleted (it may be a commit's in flight).
        """
        from colmz.arrangement.identity import check_not_rolled_back, read_identity, state_identity

        lease = self.lease_seconds if lease_seconds is None else float(lease_seconds)
        listed = self._store.list_keys(self.prefix)
        created_ms = None
        if self._log is not None:
            ident = self._identity
            if ident is not None:
                found = read_identity(self._store, ident.name)
                if found != ident:
                    raise IdentityMismatch(
                        f"gc of store {self._url!r}: its blob's identity is now "
                        f"{found.id if found else None}, not {ident.id} which this handle "
                        "opened; nothing was deleted"
                    )
                created_ms = ident.created_ms
            seqno, state = self._log.load()
            if state is None:
                if listed:
                    raise MetadataLost(
                        f"gc of store {self._url!r}: its consensus record {self._log.key!r} is "
                        f"gone while {len(listed)} part(s) remain under {self.prefix!r}, e.g. "
                        f"{listed[0]!r}; nothing was deleted"
                    )
                return []
            sid = state_identity(state)
            if ident is not None and sid is not None and sid != ident.id:
                raise IdentityMismatch(
                    f"gc of store {self._url!r}: the consensus record {self._log.key!r} belongs "
                    f"to store {sid}, not {ident.id}; nothing was deleted"
                )
            if not isinstance(state, dict) or "meta" not in state:
                raise CorruptMeta(f"gc of store {self._url!r}: the state at seqno {seqno} is not "
                                  "an arrangement's; nothing was deleted")
            # The listing was taken before this read: a part recording a newer seqno
            # than the record's proves the record was rolled back (identity module).
            self._check_not_behind(seqno, state)
            check_not_rolled_back(listed, seqno, state, lambda: seqno, where=str(self._url),
                                  consensus=repr(self._log.consensus), key=self._log.key)
            _, _, unsealed, trace = meta_from_dict(state["meta"])
            referenced = {k for b in (*unsealed, *trace) for k in b.keys}
            empty = not unsealed and not trace
            gc_seqno = seqno
        else:
            referenced = set(self.referenced_keys())
            empty = not self._unsealed and not self._trace
            gc_seqno = None
        now_ms = self.clock() * 1000
        if empty and listed:
            # A state that never held a batch, over parts an arrangement writes only once
            # its state holds them (an unsealed or trace part, past the lease): the state
            # was made over another's data (a lost record recreated empty, a core handle on
            # a used store). Runs are left to the lease: a failed job's are garbage.
            from colmz.arrangement.parts import part_kind

            old = [k for k in listed if now_ms - (key_created_ms(k) or now_ms) > lease * 1000]
            looking = next((k for k in old if part_kind(self._store, k) in ("unsealed", "trace")), None)
            if looking is not None:
                raise MetadataLost(
                    f"gc of {self._url or self._store!r}: the state holds no batch, but "
                    f"{looking!r} under {self.prefix!r} is a committed arrangement part older "
                    "than the lease: this state cannot account for it; nothing was deleted"
                )
        if created_ms is not None:
            # A part written before the store existed is no garbage of this state's: the
            # state was created over data it cannot account for (GC_CLOCK_SLACK_MS allows
            # for the clocks of the store's own writers).
            older = [k for k in listed if k not in referenced
                     and (key_created_ms(k) or created_ms) < created_ms - GC_CLOCK_SLACK_MS]
            if older:
                raise MetadataLost(
                    f"gc of store {self._url!r}: {len(older)} unreferenced part(s) under "
                    f"{self.prefix!r} were written before the store was created, e.g. "
                    f"{older[0]!r}: the state cannot account for them; nothing was deleted"
                )
        gone = []
        for k in listed:
            ms = key_created_ms(k)
            if k in referenced or ms is None or now_ms - ms <= lease * 1000:
                continue
            s = key_seqno(k)
            if s is not None and gc_seqno is not None and s >= gc_seqno:
                # written against the version gc read (a commit may be in flight) or a
                # newer one: not this state's garbage, whatever its age
                continue
            self._store.delete(k)
            gone.append(k)
        # Abort markers of discarded jobs (colmz.arrangement.runs.discard_owned) matter only
        # while a task of the job may still be writing: past the lease gc takes its parts anyway.
        for k in self._store.list_keys(abort_marker_prefix(self.prefix)):
            value = self._store.get(k)
            try:
                ms = int(value) if value is not None else None
            except ValueError:
                ms = None
            if ms is not None and now_ms - ms > lease * 1000:
                self._store.delete(k)
                gone.append(k)
        return gone

    def stats(self) -> dict:
        """Work counters and sizes.

        ``blob_bytes_written`` (Parquet bytes of every part written), ``parts_written``,
        ``rows_written`` (updates written into parts, rewrites included),
        ``updates_written`` / ``update_bytes_written`` (what callers appended, in-memory
        bytes), ``parts_deleted``, ``commits``, ``merge_peak_rows`` (most input rows a merge
        held at once), and the current ``trace_batches``, ``unsealed_batches``, ``parts`` and
        ``stored_updates``.

        >>> from colmz.storage import MemBlob
        >>> Arrangement(MemBlob()).stats()["parts"]
        0
        """
        parts, rows = self._counts()
        return {**self._counters, "trace_batches": len(self._trace),
                "unsealed_batches": len(self._unsealed), "parts": parts, "stored_updates": rows}

    # ================================================================== display

    def plot(self, ax=None):
        """Trace batches on a time axis by level, the unsealed part, seal and since
        (:func:`colmz.plot.arrangement`; needs ``colmz[plot]``). Returns the matplotlib
        ``Axes``."""
        from colmz.plot import arrangement

        return arrangement(self, ax=ax)

    def _counts(self) -> tuple[int, int]:
        parts = sum(len(b.keys) for b in (*self._trace, *self._unsealed))
        rows = sum(b.len or 0 for b in (*self._trace, *self._unsealed))
        return parts, rows

    def __repr__(self) -> str:
        parts, rows = self._counts()
        where = f"{self._url!r}, " if self._url else ""
        levels = ",".join(str(b.level) for b in self._trace)
        return (f"Arrangement({where}seal={self._seal}, since={self._since}, "
                f"trace_upper={self.trace_ts_upper()}, {len(self._trace)} trace batches"
                f"{f' (levels {levels})' if self._trace else ''}, {len(self._unsealed)} unsealed, "
                f"{rows} stored updates in {parts} parts, schema {_describe_schema(self._schema)})")

    def _repr_html_(self) -> str:
        parts, rows = self._counts()
        head = html.escape(f"Arrangement {self._url or ''}")
        rows_html = "".join(
            f"<tr><td>trace</td><td>[{b.desc.lower}, {b.desc.upper})</td><td>{b.desc.since}</td>"
            f"<td>{b.level}</td><td>{len(b.keys)}</td><td>{b.len}</td></tr>" for b in self._trace
        ) + "".join(
            f"<tr><td>unsealed</td><td>seqnos {list(b.seqnos)}, times [{b.ts_lower}, {b.ts_upper}]"
            f"</td><td></td><td></td><td>{len(b.keys)}</td><td>{b.len}</td></tr>" for b in self._unsealed
        )
        return (f"<p><b>{head}</b>: seal {self._seal}, since {self._since}, "
                f"{rows} stored updates in {parts} parts; schema "
                f"{html.escape(_describe_schema(self._schema))}</p>"
                "<table><tr><th>kind</th><th>times</th><th>since</th><th>level</th><th>parts</th>"
                f"<th>updates</th></tr>{rows_html}</table>")


class _Target:
    """The handle as the machine sees it (``colmz.arrangement.machine.MachineTarget``)."""

    def __init__(self, arrangement: Arrangement):
        self.a = arrangement

    @property
    def durable(self) -> bool:
        return self.a.durable

    def capture(self):
        return self.a._save()

    def reset(self, saved) -> None:
        self.a._restore(saved)

    def dirty(self) -> bool:
        return self.a._dirty()

    def referenced_keys(self) -> frozenset[str]:
        return self.a.referenced_keys()

    def committed_keys(self) -> frozenset[str]:
        return self.a._committed_keys

    def check_lease(self, keys) -> None:
        self.a._check_lease(keys)

    def commit_state(self) -> None:
        self.a._commit_state()

    def refresh(self) -> None:
        self.a.refresh()

    def delete_parts(self, keys) -> None:
        self.a._delete_keys(keys)
