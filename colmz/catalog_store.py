"""``CatalogStore``: a durable catalog's definitions and commits, the txn-wal way.

Design
------
A durable :class:`colmz.Catalog` keeps one ``colmz.Arrangement`` per object (its data) and
one versioned record, the *catalog record*, in a :class:`colmz.storage.state.StateLog` under
the consensus key ``catalog/<id>`` (:attr:`CatalogStore.key`). The record holds the definitions of every object and
the last transaction's *intent*: for each object whose durable upper moves, the lower and
upper of the move and the blob holding its changes. This is the shape of Materialize's
txn-wal (``src/txn-wal/src/lib.rs`` upstream): the record is the txns shard, the
arrangements are the data shards.

* **The record's compare-and-set is the commit point** of every durable catalog write (DDL
  and data alike). A writer builds its commit against the record version it read
  (:attr:`CatalogStore.seqno`): the changes go into fresh blobs (``catalog/txn/<token>/...``,
  never rewritten), then :meth:`CatalogStore.commit` sets the version after it. If another
  writer committed since, the compare-and-set fails (:class:`CommitConflict`), the blobs are
  deleted and nothing is visible: an intent can never be built from a stale handle.
* **Applying is idempotent and done by anyone** (:meth:`CatalogStore.apply`): each entry is
  appended to its arrangement with ``Arrangement.append_runs(..., seal=upper,
  expect=lower)``, one atomic commit per arrangement; an arrangement whose seal reached the
  entry's upper has landed and is skipped. The committing handle applies right after its
  commit, a crash leaves it to the next handle (which applies the record's intent before
  building its own) or to a reopen.
* **An intent is cleared by the next commit**: a writer applies the intent it read, and its
  own compare-and-set replaces it; the replaced intent's blobs are then deleted. So every
  commit is one compare-and-set on the record, and at most one intent's blobs are live.

Invariants
----------
1. Every arrangement named by the record is at (or, written behind the catalog's back,
   beyond) the lower of its entry in the record's intent, and at its upper once applied.
2. A commit that raises :class:`CommitConflict` or ``Determinate`` left the record and every
   arrangement as they were (its blobs are deleted); one that raises ``Indeterminate`` may
   have landed (its blobs are kept: the record may name them) -- reload to learn which.
3. No blob key is written twice: intent blobs carry a fresh token, parts fresh keys.

**A catalog knows its identity** (``colmz.arrangement.identity``, as every arrangement
does): its id is written once into its blob (``catalog/identity.json``, created with the
first record) and into every record, and the record's consensus key is ``catalog/<id>``. So
catalogs at different locations sharing one consensus database (one PostgreSQL for several
S3 prefixes) never share a record, and a record whose id is not the blob's is refused
(``IdentityMismatch``) instead of being read as this catalog's.

A store written by the previous layout (definitions in the blob :data:`LEGACY_RECORD_KEY`,
a pending intent at the consensus key :data:`LEGACY_INTENT_KEY`) is converted on open: its
intent is applied and cleared as that layout did, then one compare-and-set creates the
catalog record.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa

from colmz.arrangement.collection import ArrangementCollection, CompactedAway
from colmz.arrangement.errors import IdentityMismatch
from colmz.arrangement.identity import (
    StoreIdentity,
    check_catalog_history,
    intent_token,
    read_identity,
    write_identity,
)
from colmz.continual import UpperMismatch
from colmz.storage.base import Indeterminate, StorageError, VersionedData
from colmz.storage.state import CommitConflict, StateLog
from colmz.updates import Updates

__all__ = [
    "INTENT_PREFIX",
    "LEGACY_INTENT_KEY",
    "LEGACY_RECORD_KEY",
    "IDENTITY_NAME",
    "ArrangementCollection",
    "CatalogStore",
    "CompactedAway",
    "MissingDefinitions",
    "StoreChanged",
    "decode_updates",
    "encode_updates",
]

#: The name of a catalog's identity: ``catalog/identity.json`` in its blob, and the prefix of
#: its record's consensus key ``catalog/<id>`` (a StateLog: definitions and intent).
IDENTITY_NAME = "catalog"
#: Where an intent's change blobs live (``<prefix><token>/<object key>``).
INTENT_PREFIX = "catalog/txn/"
#: The blob key of the previous layout's definitions (read once, to convert).
LEGACY_RECORD_KEY = "catalog/record.json"
#: The consensus key of the previous layout's intent (read once, to convert).
LEGACY_INTENT_KEY = "catalog/intent"
#: The version of the record's layout (its ``"format"`` field).
FORMAT = 2

class StoreChanged(RuntimeError):
    """An arrangement is at an upper the catalog record does not explain (written behind
    the catalog's back): the record's intent cannot be applied to it."""


class MissingDefinitions(RuntimeError):
    """The store holds arrangements but no catalog record names them."""


# ----------------------------------------------------------------------------- encoding


def encode_updates(u: Updates) -> bytes:
    """``u`` as Arrow IPC bytes (data columns, then ``__colmz_time`` and ``__colmz_diff``).

    >>> import colmz
    >>> u = colmz.Updates({"k": [1]}, time=[2], diff=[3])
    >>> decode_updates(encode_updates(u), u.schema).to_pylist()
    [(1, 2, 3)]
    """
    cols = {n: u.column(n) for n in u.column_names}
    cols["__colmz_time"] = pa.array(u.time, pa.uint64())
    cols["__colmz_diff"] = pa.array(u.diff, pa.int64())
    table = pa.table(cols)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def decode_updates(raw, schema) -> Updates:
    """The inverse of :func:`encode_updates`, with the data columns of ``schema``."""
    table = pa.ipc.open_stream(pa.py_buffer(bytes(raw))).read_all()
    names = [c.name for c in schema]
    return Updates({n: table.column(n) for n in names},
                   time=table.column("__colmz_time").to_numpy(),
                   diff=table.column("__colmz_diff").to_numpy())


# ----------------------------------------------------------------------------- the store


class CatalogStore:
    """The catalog record of a durable catalog and the arrangements it names (module
    docstring).

    Parameters
    ----------
    loc : colmz.storage.url.Location
        The store (blob and consensus) holding the catalog.

    Examples
    --------
    >>> from colmz.storage.url import open_location
    >>> store = CatalogStore(open_location("mem://catalog-store-doc"))
    >>> store.load() is None
    True
    >>> arr = store.arrangement("t-1", {"k": pa.int64()})
    >>> u = Updates({"k": [5]}, time=[0], diff=[1])
    >>> seqno = store.commit([{"name": "t", "key": "t-1"}], [("t", "t-1", 0, 1, u)])
    >>> store.apply(store.state)
    >>> arr.snapshot(0).to_pylist(), arr.upper
    ([(5, 0, 1)], 1)
    >>> CatalogStore(store.loc).load()["objects"]
    [{'key': 't-1', 'name': 't'}]
    """

    def __init__(self, loc) -> None:
        self.loc = loc
        self.blob = loc.blob
        # The identity, and with it the record's key, once the blob has one (a new catalog's
        # is written by its first commit: opening to read writes nothing).
        self.identity: StoreIdentity | None = read_identity(self.blob, IDENTITY_NAME)
        self.log = None if self.identity is None else StateLog(loc.consensus, self.identity.consensus_key)
        self._seqno: int | None = None
        self._state: dict | None = None
        self._arrangements: dict[str, ArrangementCollection] = {}
        self.stats = {"commits": 0, "conflicts": 0, "entries_applied": 0, "entries_landed": 0,
                      "blobs_written": 0, "blobs_deleted": 0, "converted": 0}

    @property
    def seqno(self) -> int | None:
        """The record version this store last loaded or committed (None: no record)."""
        return self._seqno

    @property
    def state(self) -> dict | None:
        """The record as last loaded or committed (``objects`` and ``intent``)."""
        return self._state

    @property
    def key(self) -> str | None:
        """The consensus key of the catalog record (None: no catalog was created here yet)."""
        return None if self.identity is None else self.identity.consensus_key

    def _find_identity(self) -> None:
        # A catalog another handle created since this one looked has an identity now.
        if self.identity is None:
            self.identity = read_identity(self.blob, IDENTITY_NAME)
            if self.identity is not None:
                self.log = StateLog(self.loc.consensus, self.identity.consensus_key)

    def head_seqno(self) -> int | None:
        """The record's current version in the consensus (one read; no state loaded)."""
        self._find_identity()
        if self.log is None:
            return None
        head = self.loc.consensus.head(self.key)
        return None if head is None else head.seqno

    def _identify(self) -> None:
        """Give the catalog its identity (the one stored first, when another handle raced)."""
        if self.identity is None:
            self.identity = write_identity(self.blob, StoreIdentity.new(IDENTITY_NAME, int(time.time() * 1000)))
            self.log = StateLog(self.loc.consensus, self.identity.consensus_key)

    def _record(self, objects: list[dict], intent) -> dict:
        return json.loads(json.dumps({"format": FORMAT, "identity": self.identity.id, "objects": objects,
                                      "intent": intent}))

    # -- reading -----------------------------------------------------------------------

    def load(self) -> dict | None:
        """Read the record (converting a store of the previous layout); None when the store
        holds no catalog. Raises :class:`MissingDefinitions` when it holds arrangements
        but no record names them."""
        self._find_identity()
        for _ in range(3):
            seqno, state = (None, None) if self.log is None else self.log.load()
            if state is not None:
                if state.get("format") != FORMAT or not isinstance(state.get("objects"), list):
                    raise ValueError(
                        f"consensus key {self.key!r} of {self.loc.url!r} is not a colmz catalog "
                        f"record (format {state.get('format')!r}, expected {FORMAT})"
                    )
                if state.get("identity") != self.identity.id:
                    raise IdentityMismatch(
                        f"catalog at {self.loc.url!r}: its blob's identity is {self.identity.id!r} but "
                        f"the record at consensus key {self.key!r} belongs to "
                        f"{state.get('identity')!r}: the consensus given is not this catalog's "
                        "(open it with the consensus it was created with)"
                    )
                check_catalog_history(self.loc, self.key, seqno, state, intent_prefix=INTENT_PREFIX, known=self._seqno)
                self._seqno, self._state = seqno, state
                return state
            if self._convert_legacy():
                continue
            self._refuse_orphans()
            self._seqno, self._state = None, None
            return None
        raise CommitConflict(str(self.key), None, self.head_seqno())

    def _refuse_orphans(self) -> None:
        # Parts, not identities: an object whose CREATE never committed leaves only its
        # arrangement's identity (and no data) behind.
        parts = [k for k in self.blob.list_keys("") if not k.startswith("catalog/") and "/parts/" in k]
        legacy = self.loc.consensus.head(LEGACY_INTENT_KEY)
        if parts or (legacy is not None and legacy.data):
            found = (f"{len(parts)} blob(s) of arrangements (e.g. {parts[0]!r})" if parts
                     else f"a pending transaction at consensus key {LEGACY_INTENT_KEY!r}")
            raise MissingDefinitions(
                f"catalog at {self.loc.url!r}: no definitions (consensus key {self.key!r}, "
                f"legacy blob {LEGACY_RECORD_KEY!r}) but the store holds {found}: the catalog's "
                "definitions were lost. Opening would show an empty catalog over that data, so "
                "it is refused: restore the definitions from a backup, or open a new catalog at "
                "another location (each object's data stays readable with "
                "colmz.Arrangement.open(url, name=<its key>))"
            )

    def _convert_legacy(self) -> bool:
        """Create the record from a store of the previous layout; whether there was one."""
        raw = self.blob.get(LEGACY_RECORD_KEY)
        if raw is None:
            return False
        try:
            record = json.loads(bytes(raw))
        except ValueError:
            record = None
        if not isinstance(record, dict) or record.get("format") != 1 or not isinstance(record.get("objects"), list):
            raise ValueError(f"{self.blob.url_of(LEGACY_RECORD_KEY)} is not a colmz catalog record")
        defs = record["objects"]
        self._identify()
        cons = self.loc.consensus
        head = cons.head(LEGACY_INTENT_KEY)
        blobs = []
        if head is not None and head.data:
            # The previous layout's committed intent: land it as that layout did, then clear it.
            entries = json.loads(bytes(head.data))["entries"]
            live = {d["key"] for d in defs}
            for e in entries:
                if e["key"] in live:
                    self._apply_entry(e)
            blobs = [e["blob"] for e in entries if e.get("blob")]
            if not cons.compare_and_set(LEGACY_INTENT_KEY, head.seqno, VersionedData(head.seqno + 1, b"")):
                return True  # another handle cleared it: read again
        try:
            self.log.commit(None, self._record(defs, None))
        except CommitConflict:
            return True  # another handle converted it first
        self.stats["converted"] += 1
        for k in [*blobs, LEGACY_RECORD_KEY]:
            self._delete(k)
        return True

    def arrangement(self, key: str, schema=None) -> ArrangementCollection:
        """The arrangement called ``key`` (opened once per store; created with ``schema``
        when absent)."""
        from colmz.arrangement import Arrangement

        dur = self._arrangements.get(key)
        if dur is None:
            dur = self._arrangements[key] = ArrangementCollection(Arrangement.open(self.loc, schema, name=key))
        return dur

    def forget(self, keep) -> None:
        """Drop the cached handles of arrangements whose key is not in ``keep``."""
        for key in set(self._arrangements) - set(keep):
            del self._arrangements[key]

    # -- writing -----------------------------------------------------------------------

    def commit(self, objects: list[dict], moves) -> int:
        """Commit ``objects`` (the definitions) and the intent of ``moves`` -- ``(name,
        key, lower, upper, updates)`` -- as the record version after :attr:`seqno`.

        Writes each non-empty change to a fresh blob, then compare-and-sets the record.
        Raises :class:`CommitConflict` when another writer committed since this store read
        (nothing visible; the blobs deleted). Returns the new seqno; the intent is then
        :meth:`apply`'s to land.
        """
        token = intent_token(self._seqno)  # records the version written against
        entries, written = [], []
        self._identify()
        try:
            for name, key, lo, up, u in moves:
                blob = None
                if len(u):
                    blob = f"{INTENT_PREFIX}{token}/{key}"
                    self.blob.set(blob, encode_updates(u))
                    written.append(blob)
                    self.stats["blobs_written"] += 1
                entries.append({"name": name, "key": key, "lower": lo, "upper": up, "blob": blob})
            state = self._record(objects, {"id": token, "entries": entries})
            seqno = self.log.commit(self._seqno, state)
        except Indeterminate:
            raise  # the record may name the blobs: leave them (a reload tells)
        except BaseException as e:
            if isinstance(e, CommitConflict):
                self.stats["conflicts"] += 1
            for k in written:
                self._delete(k)
            raise
        previous = (self._state or {}).get("intent")
        self._seqno, self._state = seqno, state
        self.stats["commits"] += 1
        # The intent this commit replaced was applied before it was built: its blobs go.
        for e in (previous or {}).get("entries", ()):
            if e.get("blob"):
                self._delete(e["blob"])
        return seqno

    def apply(self, state: dict | None) -> None:
        """Land ``state``'s intent on the arrangements, idempotently (module docstring)."""
        intent = (state or {}).get("intent")
        if not intent:
            return
        # Entries without a key hold no data (a catalog's namespaces): no arrangement.
        live = {d["key"] for d in state["objects"] if "key" in d}
        for e in intent["entries"]:
            if e["key"] in live:
                self._apply_entry(e)

    def _apply_entry(self, e: dict) -> None:
        dur = self.arrangement(e["key"])
        lower, upper = e["lower"], e["upper"]

        def landed() -> bool:
            up = dur.upper
            return up is None or (upper is not None and up >= upper)

        if landed():  # a seal never regresses: the cached one reaching it is enough
            self.stats["entries_landed"] += 1
            return
        if dur.upper != lower:
            dur.refresh()
            if landed():
                self.stats["entries_landed"] += 1
                return
        def store_changed() -> StoreChanged:
            return StoreChanged(
                f"catalog record of {self.loc.url!r}: object {e['name']!r} (arrangement "
                f"{e['key']!r}) has upper {dur.upper}, its committed intent moves it from "
                f"{lower} to {upper}: the arrangement was written behind the catalog"
            )

        if dur.upper != lower:
            raise store_changed()
        raw = self.blob.get(e["blob"]) if e.get("blob") else None
        if e.get("blob") and raw is None:
            # Another handle applied this entry and a later commit deleted the blob.
            dur.refresh()
            if landed():
                return
            raise FileNotFoundError(f"{self.blob.url_of(e['blob'])}: a committed intent's data is missing")
        u = decode_updates(raw, dur.schema) if raw is not None else Updates.empty(dur.schema)
        try:
            # one durable call: a lost compare-and-set is retried by the arrangement's machine
            dur.compare_and_append(u, lower, upper)
            self.stats["entries_applied"] += 1
        except UpperMismatch:
            # the seal moved: another applier landed this entry first, or a writer behind the
            # catalog's back moved it elsewhere
            dur.refresh()
            if not landed():
                raise store_changed() from None
            self.stats["entries_landed"] += 1

    def _delete(self, key: str) -> None:
        try:
            self.blob.delete(key)
            self.stats["blobs_deleted"] += 1
        except StorageError:  # best effort: an unreferenced blob is garbage only
            pass
