"""``Arrangement``: a durable, compacting collection of updates on a blob store.

Layer
-----
The *handle* of ``colmz.arrangement`` (``docs/arrangement.md``), after persist-client's
handles (``src/persist-client/src/write.rs``, ``read.rs``). :class:`Arrangement` puts
together, each in its module:

* the upstream core (:mod:`colmz.arrangement.core`) -- the operations of
  ``src/persist/src/indexed/arrangement.rs`` (``unsealed_append``, ``drain``, ``compact``,
  ...) on the in-memory state, a frozen :class:`colmz.arrangement.state.ArrangementState`;
* the write side (:mod:`colmz.arrangement.write_handle`) -- :meth:`write`,
  :meth:`append_runs`, :meth:`seal`, :meth:`advance_since`, each one command handed to the
  machine (``colmz.arrangement.machine``): parts first, then one compare-and-set of the new
  state (``colmz.storage.state.StateLog``), re-applied to the newer state when it is lost;
* the read side (:mod:`colmz.arrangement.read_handle`) -- :meth:`read`,
  :meth:`read_unmerged`, :meth:`parts`;
* maintenance (:mod:`colmz.arrangement.maintain`) -- :meth:`maintain`, its steps and
  policies;
* gc and leases (:mod:`colmz.arrangement.gc`);

and keeps here the constructor and what ties the state to its durable record. The state is
the machine's (``Machine(log, state, seqno)``, which also encodes and decodes the state
document): the handle reads it there, its core operations change it in memory, and its
durable calls are pure commands handed to the machine by :meth:`_apply`, which checks the
lease of their parts before and deletes the parts the machine says are garbage after. Here
are :meth:`open`, :meth:`refresh`, :meth:`commit`, :meth:`_apply`, the counters and the
display. The handle may touch the blob store (parts), its consensus record (through the machine and
``StateLog``) and nothing else.

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
from collections.abc import Callable

from colmz.arrangement.core import ArrangementCore, TraceSnapshot
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
from colmz.arrangement.gc import GarbageCollection
from colmz.arrangement.lookups import LookupIndex
from colmz.arrangement.machine import ATTEMPTS, Machine, Outcome
from colmz.arrangement.maintain import CompactionJob, Maintenance
from colmz.arrangement.parts import (
    DEFAULT_PART_BYTES,
    DEFAULT_PART_ROWS,
    WRITE_COMPRESSION,
)
from colmz.arrangement.read_handle import PartInfo, ReadHandle
from colmz.arrangement.schema import (
    describe_schema,
    normalize_schema,
    schema_from_json,
    schema_to_json,
)
from colmz.arrangement.state import ArrangementState
from colmz.arrangement.write_handle import WriteHandle
from colmz.order import ColumnSpec
from colmz.storage.base import Blob
from colmz.storage.state import CommitConflict

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

def new_token() -> str:
    """A fresh unique part token (``uuid4().hex``); a module function so handles pickle."""
    return uuid.uuid4().hex


class Arrangement(WriteHandle, ReadHandle, Maintenance, GarbageCollection, ArrangementCore):
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
        The gc lease (``colmz.arrangement.gc``).
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
        self._url: str | None = None
        self._identity = None  # colmz.arrangement.identity.StoreIdentity of a store opened
        self._job: CompactionJob | None = None  # a compaction maintain() left half done
        #: Point lookups (``counts``) made, the rows they decoded and the times their index
        #: started again over new parts (``colmz.arrangement.lookups``; work counters).
        self.lookup_stats = {"lookups": 0, "rows_read": 0, "restarts": 0}
        # Parts whose whole digest a lookup verified (parts never change: once per key).
        self._verified_parts: set[str] = set()
        # The row groups lookups read, indexed (colmz.arrangement.lookups: derived from
        # parts, which never change, so nothing a failed call made needs undoing here).
        self._lookups = LookupIndex()
        # (the commits are counted by the machine)
        self._counters = {"commits": 0, "blob_bytes_written": 0, "parts_written": 0,
                      "updates_written": 0, "update_bytes_written": 0, "parts_deleted": 0, "rows_written": 0,
                      "merge_peak_rows": 0}
        # The machine owns the state (colmz.arrangement.machine): the whole state as one
        # frozen value (colmz.arrangement.state), its consensus record (None for an
        # in-memory core, until open), its version and its document's codec; every durable
        # change is a command it applies (self._apply).
        self._machine = Machine(None, ArrangementState(schema=normalize_schema(schema)), None)

    @property
    def _state(self) -> ArrangementState:
        return self._machine.state

    @_state.setter
    def _state(self, state: ArrangementState) -> None:
        # the core operations change the machine's state in memory (commit() persists it)
        self._machine.state = state

    @property
    def _log(self):
        return self._machine.log

    @_log.setter
    def _log(self, log) -> None:
        self._machine.log = log

    @property
    def _seqno(self) -> int | None:
        return self._machine.seqno

    @property
    def _part_schema(self) -> tuple[ColumnSpec, ...] | None:
        # the schema a read took from a part while the state names none: kept beside the
        # state (a read changes no state), recorded by the machine's next commit
        return self._machine.part_schema

    @_part_schema.setter
    def _part_schema(self, schema: tuple[ColumnSpec, ...] | None) -> None:
        self._machine.part_schema = schema

    def _apply(self, cmd, *, written=(), keep=(), attempts: int = ATTEMPTS) -> Outcome:
        """Hand the command ``cmd`` to the machine (``colmz.arrangement.machine``) and
        return its outcome, raising its error: the lease of the parts written for it is
        checked first (``LeaseExpired``), and the parts the outcome says are garbage are
        deleted (the written ones when it did not land, the ones it stopped naming when it
        did)."""
        written = frozenset(written)
        try:
            self._check_lease(written - self._machine.committed.referenced_keys())
        except BaseException:
            self._delete_keys(written - frozenset(keep) - self.referenced_keys()
                              - self._machine.committed.referenced_keys())
            raise
        out = self._machine.apply(cmd, written=written, keep=keep, attempts=attempts)
        self._delete_keys(out.garbage)
        out.result()
        return out

    @classmethod
    def from_meta(cls, meta: dict, store: Blob, **kwargs) -> Arrangement:
        """Rebuild an arrangement from :meth:`meta`'s dict (shape-checked, not validated:
        call :meth:`validate`). Keyword arguments are the constructor's."""
        a = cls(store, **kwargs)
        a._machine.loaded(None, ArrangementState.from_meta(meta, a._state.schema))
        return a

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

        Notes
        -----
        An arrangement a durable ``colmz.Catalog`` keeps for one of its objects (``name`` is
        ``cat.identity(object)`` in the catalog's store) is one of its data shards, written
        through the catalog's record as persist's txn-wal writes them: a commit moves only
        the arrangements it changes, and is durable in the record before it lands in them.
        Opened directly, such an arrangement shows its *own* upper (``get_seal()``), which
        lags the catalog's while no commit changes the object, and no commit not yet
        applied. Its contents up to its own upper are right, but the catalog's reads reach
        further: read an object through a catalog (``colmz.Catalog(path).read(name,
        as_of)``, its frontiers ``Catalog.frontiers(name)``), and never write to its
        arrangement, whose uppers the catalog's record owns.

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
            a._url = a._machine.where = loc.url
            a._machine.home = loc.blob.url_of(identity_key(name))
            if res.action != "open":
                # The identity first (written once: a concurrent creator's wins, and the
                # next round opens with it), then the state naming it.
                written = write_identity(loc.blob, res.identity)
                if written != res.identity:
                    continue
            a._identity = a._machine.identity = res.identity
            key = res.identity.consensus_key
            a._log = logs.get(key) or StateLog(loc.consensus, key, rollup_every=rollup_every)
            if state is not None:
                a._machine.loaded(seqno, a._machine.decode(seqno, state))
                if schema is not None and a.schema is not None and tuple(a.schema) != tuple(schema):
                    raise SchemaMismatch(
                        f"arrangement {name!r} at {where!r} has schema "
                        f"{describe_schema(a.schema)}, not the requested {describe_schema(schema)}"
                    )
                if res.action == "open" and (schema is None or a.schema is not None):
                    return a
                if a.schema is None:
                    a._state = a._state.with_schema(schema)
            try:
                # create the record, adopt a record from before identities (the id goes
                # into its state), or pin the schema of one created without
                a.commit()
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

    @property
    def durable(self) -> bool:
        """Whether this arrangement commits to a consensus store (opened by :meth:`open`)."""
        return self._log is not None

    @property
    def consensus(self):
        """The consensus store this arrangement commits to (``None`` when not durable)."""
        return None if self._log is None else self._log.consensus

    @property
    def seqno(self) -> int | None:
        """The committed version this handle last read or wrote."""
        return self._seqno

    def refresh(self) -> None:
        """Reload the committed state (discarding uncommitted in-memory changes)."""
        self._machine.refresh()

    def commit(self) -> int | None:
        """Commit the in-memory state (after core operations on a durable arrangement).

        Refuses with :class:`LeaseExpired` when a newly referenced part is older than half the
        lease; raises ``CommitConflict`` when another writer committed first. Either way
        nothing is committed and the in-memory state is left as it is.
        """
        self._check_lease(self._state.referenced_keys() - self._machine.committed.referenced_keys())
        return self._machine.commit()

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
        return {**self._counters, "commits": self._machine.commits, "trace_batches": len(self._trace),
                "unsealed_batches": len(self._unsealed), "parts": parts, "stored_updates": rows}

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
                f"{rows} stored updates in {parts} parts, schema {describe_schema(self._schema)})")

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
                f"{html.escape(describe_schema(self._schema))}</p>"
                "<table><tr><th>kind</th><th>times</th><th>since</th><th>level</th><th>parts</th>"
                f"<th>updates</th></tr>{rows_html}</table>")

