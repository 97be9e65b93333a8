"""``CatalogStore``: a durable catalog's definitions and commits, the txn-wal way.

Design
------
A durable :class:`colmz.Catalog` keeps one ``colmz.Arrangement`` per object (its data) and
one versioned record, the *catalog record*, in a :class:`colmz.storage.state.StateLog` under
the consensus key ``catalog/<id>`` (:attr:`CatalogStore.key`). The record holds the
definitions of every object and the last transaction's *intent*: for each object whose
durable upper moves, the lower and upper of the move and the runs of parts holding its
changes. This is the shape of Materialize's txn-wal (``src/txn-wal/src/lib.rs`` upstream):
the record is the txns shard, the arrangements are the data shards, and an intent entry is
the "lightweight pointer" to a batch written once, into its data shard.

* **Rows land once.** A writer writes each object's changes as one run of parts under that
  object's arrangement prefix (``colmz.arrangement.runs.write_run``: the same Parquet parts
  every arrangement holds, each with its check -- rows, diff sum, XXH64 digest -- in a
  :class:`~colmz.arrangement.runs.WrittenRun`), and the intent entry records those runs.
  No arrangement names the parts yet; nothing is visible. A run is compressed with the
  arrangement's codec for parts it keeps (``Arrangement.compression``, snappy), not the
  uncompressed codec of a latency-bound write: it is kept until compaction. The runs of
  one commit (its tables', views' and operator states') are written side by side when the
  store takes concurrent calls: each part is still made durable by its own fsync before the
  record's compare-and-set, but those fsyncs are in flight together, so a commit waits for
  the disk about once however many objects it changes.
* **The record's compare-and-set is the commit point** of every durable catalog write (DDL
  and data alike). A writer builds its commit against the record version it read
  (:attr:`CatalogStore.seqno`), then :meth:`CatalogStore.commit` sets the version after it.
  If another writer committed since, the compare-and-set fails (:class:`CommitConflict`),
  the runs it wrote are deleted and nothing is visible: an intent can never be built from a
  stale handle.
* **Applying is idempotent and done by anyone** (:meth:`CatalogStore.apply`): each entry is
  ``Arrangement.append_runs(runs, seal=upper, expect=lower)`` -- one compare-and-set per
  arrangement, adopting the parts, never copying them; an arrangement whose seal reached
  the entry's upper has landed and is skipped. **The entries of one intent land in one
  step**: ``Arrangement.append_runs_together`` checks each as ``append_runs`` does, then
  commits all their compare-and-sets as one ``compare_and_set_many`` of the consensus --
  all of them or none (``colmz.storage.base``, invariant 5; one transaction, one fsync, on
  SQLite and PostgreSQL) -- so a commit is two consensus transactions, the record's and the
  apply's, however many views and operator states it moves. A step that does not land
  (another applier moved an arrangement, a storage failure, runs past half the gc lease,
  an arrangement not at its entry's lower) changed nothing -- or, failing
  indeterminately, maybe everything: the handles read their records again -- and the
  entries are then applied one by one as below, which finds what landed. One by one, the
  entries are applied side by side when the stores take concurrent calls
  (:func:`concurrent_consensus`): SQLite's consensus commits the compare-and-sets waiting
  together in one transaction (``colmz.storage.sqlite``). The committing handle applies
  right after its commit; a crash -- also inside the one step, before or after it landed --
  leaves it to the next handle (which applies the record's intent before building its
  own) or to a reopen. An applier that did not write the runs itself
  reads every part of them and checks it against the entry's checks *before* it appends
  (:class:`~colmz.arrangement.errors.CorruptPart` on any difference, nothing appended);
  after the append every read checks them again, as for every part. Runs older than half
  the arrangement's gc lease (``LeaseExpired``: a crash long before the reopen) are read,
  checked and written again under fresh keys before they are appended.
* **An intent is cleared by the next commit**: a writer applies the intent it read, and its
  own compare-and-set replaces it. Its parts then belong to their arrangements.

Invariants
----------
1. Every arrangement named by the record is at (or, written behind the catalog's back,
   beyond) the lower of its entry in the record's intent, and at its upper once applied.
2. A commit that raises :class:`CommitConflict` or ``Determinate`` left the record and every
   arrangement as they were (the runs it wrote are deleted); one that raises
   ``Indeterminate`` may have landed (its runs are kept: the record may name them) --
   reload to learn which. A failed apply deletes nothing: the committed intent names the
   runs, and the next apply lands them. The one step of an apply lands every entry it
   holds or none; only the one-by-one apply after a step that did not land moves the
   arrangements of an intent one at a time.
3. No blob key is written twice: parts carry fresh keys.
4. No byte colmz reads back from an intent is used unchecked: runs carry the digest, row
   count and diff sum of each part, and the record itself carries the digest of its
   definitions and intent (:func:`record_check`), verified on every load (``CorruptMeta``). An intent of the previous layout (changes in an
   unchecked Arrow IPC blob ``catalog/txn/<token>/<key>``, record format 2) that still has
   to be applied is refused (:class:`UnverifiedIntent`), never decoded; one already landed
   is only deleted.

Lazy uppers
-----------
The record holds one catalog-wide ``"upper"`` (:attr:`CatalogStore.upper`, the catalog's
``now + 1``): it is the *logical* upper of every arrangement the record names, as the txns
shard's upper is the logical upper of every data shard registered with it
(``src/txn-wal/src/lib.rs`` upstream). An intent holds an entry only for an arrangement
with changes in the commit (or a new one): it moves that arrangement's *physical* upper from
where the last entry left it to the catalog's upper. An arrangement no commit wrote lags:
it holds nothing in ``[its upper, the catalog's upper)``, so its contents as of any time
before the catalog's upper are those as of its own upper minus one
(:meth:`CatalogStore.logical_upper`); its upper moves when it next receives changes. So a
commit's store work is what it changes, not how many objects the catalog holds. Readers of
the record (a load, a view's operator states resumed, a shared arrangement restored) use
the logical upper. Invariant: an arrangement named by the record with physical upper ``p``
below the record's upper holds no update at a time in ``[p, upper)``; every commit that
changes it writes an entry for it (the writer checks its change since ``p``, not since the
previous commit).

The definitions are encoded once
--------------------------------
The record is a :class:`~colmz.storage.state.StateLog` state: each version is written as its
diff from the one before, so a data commit writes its intent and upper, not the
definitions. Building that diff, and the record's check, needs the canonical JSON of the
whole record; the store keeps the definitions it committed last encoded
(:class:`~colmz.storage.state.Encoded`, next to the entries as encoded) and reuses that
encoding while they compare equal. The entries are compared as they were when encoded,
never as the caller's dicts may have become since: an entry that is frozen
(:func:`colmz.storage.frozen.frozen`: it and everything in it refuse every change) is kept
itself, and the same entry given again compares equal by identity, without a look inside it
(the catalog's definitions, operator-state and shared-arrangement entries are frozen when
made); any other entry is kept as a frozen copy (``entries_frozen``), compared by value. So
a commit's comparison is one identity check per entry (no copy, no walk of the
definitions), and a commit that changes no definition encodes only its intent: beyond
those identity checks its Python work is what it changes, whatever the number of objects
(the check is then a digest over bytes already encoded). The record written is the same as when every
commit encoded everything -- same layout, same :func:`record_check`, verified on every
load. DDL encodes the definitions again (``definitions_encoded`` in
:attr:`CatalogStore.stats`). The check itself cannot be cached with them: it is one XXH64
of the record's canonical JSON, in which the definitions (``"objects"``) come after the
intent, which every commit changes, and XXH64's state on reaching them depends on every
byte before; no digest of the definitions alone combines into it. So each commit hashes
the whole record, a pass over bytes already encoded -- unless the record's layout (and
its check) changed.

Entries of the definitions that carry a ``key`` but are not catalog objects (a view's
operator states, kind ``"view state"``, ``colmz.catalog.durable``) are arrangements like any
other here: created before the record names them, moved by intent entries, applied alike.

**A catalog knows its identity** (``colmz.arrangement.identity``, as every arrangement
does): its id is written once into its blob (``catalog/identity.json``, created with the
first record) and into every record, and the record's consensus key is ``catalog/<id>``. So
catalogs at different locations sharing one consensus database (one PostgreSQL for several
S3 prefixes) never share a record, and a record whose id is not the blob's is refused
(``IdentityMismatch``) instead of being read as this catalog's.

A store written by the layout before records (definitions in the blob
:data:`LEGACY_RECORD_KEY`, a pending intent at the consensus key :data:`LEGACY_INTENT_KEY`)
is converted on open, and only such a store: the conversion runs when a load finds no
record *and* that layout's marker, the definitions blob (also after the identity was
written, so a conversion cut by a crash or racing another handle's is finished). An intent
of it already landed is cleared (one still to apply is refused, as above), then one
compare-and-set creates the catalog record. A store with no record and no marker is empty
-- or, when it holds arrangements' parts or a previous layout's pending intent,
:class:`MissingDefinitions`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from concurrent.futures import wait

from colmz.arrangement.collection import ArrangementCollection
from colmz.arrangement.errors import (
    CorruptMeta,
    IdentityMismatch,
    LeaseExpired,
    MissingPart,
    SealMismatch,
)
from colmz.arrangement.identity import (
    StoreIdentity,
    check_catalog_history,
    consensus_key_of,
    identity_key,
    intent_token,
    read_identity,
    write_identity,
)
from colmz.arrangement.part_ref import part_digest
from colmz.arrangement.parts import concurrent_calls, read_part
from colmz.arrangement.runs import WrittenRun, write_run
from colmz.ops import concat
from colmz.storage.base import Indeterminate, StorageError, VersionedData
from colmz.storage.frozen import frozen, is_frozen
from colmz.storage.state import CommitConflict, Encoded, StateLog, canonical_json
from colmz.threads import shared_pool
from colmz.updates import Updates

__all__ = [
    "INTENT_PREFIX",
    "LEGACY_INTENT_KEY",
    "LEGACY_RECORD_KEY",
    "IDENTITY_NAME",
    "CatalogStore",
    "MissingDefinitions",
    "StoreChanged",
    "UnverifiedIntent",
    "concurrent_consensus",
    "record_check",
]

#: The name of a catalog's identity: ``catalog/identity.json`` in its blob, and the prefix of
#: its record's consensus key ``catalog/<id>`` (a StateLog: definitions and intent).
IDENTITY_NAME = "catalog"
#: Where the previous layout kept an intent's change blobs (``<prefix><token>/<object
#: key>``): only deleted now, never read.
INTENT_PREFIX = "catalog/txn/"
#: The blob key of the layout before records' definitions (read once, to convert).
LEGACY_RECORD_KEY = "catalog/record.json"
#: The consensus key of the layout before records' intent (read once, to convert).
LEGACY_INTENT_KEY = "catalog/intent"
#: The version of the record's layout (its ``"format"`` field): 4, intents of runs and one
#: catalog-wide ``"upper"`` (the logical upper of every arrangement it names; module
#: docstring, "Lazy uppers"). A colmz that knows only format 3 (every arrangement at the
#: catalog's upper) refuses a format-4 record instead of reading an untouched arrangement's
#: lagging upper as the object's; one that knows only format 2 (intents of IPC blobs)
#: refuses both.
FORMAT = 4
#: The record formats this module reads: 2's intents are applied only when already landed;
#: 3's arrangements are each at its own upper (no catalog-wide upper).
READ_FORMATS = (2, 3, 4)
#: How many runs of one commit are written side by side (:meth:`CatalogStore.commit`).
WRITERS = 8


def concurrent_consensus(consensus) -> bool:
    """Whether compare-and-sets on ``consensus`` are made side by side (by several threads):
    SQLite's, which commits those waiting together in one transaction, and PostgreSQL's; not
    wrappers such as the fault injector, whose calls must come in a repeatable order."""
    kind = type(consensus)
    return (kind.__module__, kind.__name__) in (("colmz.storage.sqlite", "SqliteConsensus"),
                                                 ("colmz.storage.postgres", "PostgresConsensus"))


class StoreChanged(RuntimeError):
    """An arrangement is at an upper the catalog record does not explain (written behind
    the catalog's back): the record's intent cannot be applied to it."""


class MissingDefinitions(RuntimeError):
    """The store holds arrangements but no catalog record names them."""


class UnverifiedIntent(RuntimeError):
    """A committed intent still to apply holds its changes in a blob of the previous layout,
    which carries no check (digest, rows, diff sum): colmz refuses to decode it."""


def record_check(record: dict) -> int:
    """The check a catalog record carries (its ``"check"`` field): the XXH64 digest
    (``colmz.arrangement.part_ref.part_digest``) of the rest of it as canonical JSON, so a
    changed byte anywhere in the definitions or the intent is refused on load.

    >>> record_check({"format": 3, "objects": []}) == record_check({"objects": [], "format": 3, "check": 1})
    True
    """
    rest = {k: v for k, v in record.items() if k != "check"}
    return part_digest(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())


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
    >>> import pyarrow as pa
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
        self.identity: StoreIdentity | None = self._read_identity()
        self.log = None if self.identity is None else StateLog(loc.consensus, self.identity.consensus_key)
        self._seqno: int | None = None
        self._state: dict | None = None
        self._arrangements: dict[str, ArrangementCollection] = {}
        # The intents this store committed itself (their runs are its own: no check first).
        self._mine: set[str] = set()
        # The definitions last committed, encoded (reused while they do not change).
        self._encoded_defs: tuple[list[dict], Encoded] | None = None
        self.stats = {"commits": 0, "conflicts": 0, "entries_applied": 0, "entries_landed": 0,
                      "runs_written": 0, "blobs_deleted": 0, "converted": 0, "definitions_encoded": 0,
                      "entries_frozen": 0}
        self._stats_lock = threading.Lock()

    def _count(self, what: str, n: int = 1) -> None:
        with self._stats_lock:  # applied and written side by side, by several threads
            self.stats[what] += n

    @property
    def seqno(self) -> int | None:
        """The record version this store last loaded or committed (None: no record)."""
        return self._seqno

    @property
    def state(self) -> dict | None:
        """The record as last loaded or committed (``objects`` and ``intent``)."""
        return self._state

    @property
    def upper(self) -> int | None:
        """The record's catalog-wide upper (module docstring, "Lazy uppers"): every
        arrangement it names is logically there; None for a record without one (format 3
        and before: each arrangement is at its own upper)."""
        return (self._state or {}).get("upper")

    def logical_upper(self, key: str):
        """The upper of arrangement ``key`` as the record gives it: its own upper, or the
        catalog-wide :attr:`upper` when that is later (an arrangement no commit wrote since
        it lags; nothing happened to it in between)."""
        up = self.arrangement(key).upper
        cat = self.upper
        return up if cat is None or up is None else max(up, cat)

    @property
    def key(self) -> str | None:
        """The consensus key of the catalog record (None: no catalog was created here yet)."""
        return None if self.identity is None else self.identity.consensus_key

    def _read_identity(self) -> StoreIdentity | None:
        ident = read_identity(self.blob, IDENTITY_NAME)
        # a catalog's identity is always a new one's: its record's key follows from its id
        if ident is not None and (ident.name != IDENTITY_NAME
                                  or ident.consensus_key != consensus_key_of(IDENTITY_NAME, ident.id)):
            raise CorruptMeta(
                f"catalog at {self.loc.url!r}: its identity {identity_key(IDENTITY_NAME)!r} names "
                f"{ident.name!r} and consensus key {ident.consensus_key!r}, not those of id "
                f"{ident.id!r}: it was changed after it was written"
            )
        return ident

    def _find_identity(self) -> None:
        # A catalog another handle created since this one looked has an identity now.
        if self.identity is None:
            self.identity = self._read_identity()
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

    def _definitions(self, objects: list[dict]) -> Encoded:
        """``objects`` encoded, the encoding of the previous commit's reused when they did
        not change (module docstring, "The definitions are encoded once"): compared with
        the entries it encoded as they were then -- a frozen entry (``colmz.storage.frozen``)
        itself, which nothing can change, so the same entry again compares by identity; any
        other a frozen copy, never the caller's (mutable) dict."""
        known = self._encoded_defs
        # list equality takes an entry identical to the one kept as equal without looking
        # inside it: sound for frozen entries only, which is why the others are copies
        if known is None or objects != known[0]:
            # frozen copies, not the JSON value: definitions hold tuples, which JSON makes lists
            kept = [e if is_frozen(e) else frozen(e) for e in objects]
            self._count("entries_frozen", sum(e is not k for e, k in zip(objects, kept)))
            known = self._encoded_defs = (kept, Encoded(objects, "objects"))
            self._count("definitions_encoded")
        return known[1]

    def _record(self, objects: list[dict], intent, upper: int | None = None) -> tuple[dict, dict]:
        """The record of ``objects``, ``intent`` and ``upper`` as committed (its definitions
        :class:`~colmz.storage.state.Encoded`: the state log takes their encoding as is)
        and as read back (plain values); the same check (:func:`record_check`) in both."""
        defs = self._definitions(objects)
        fields = {"format": FORMAT, "identity": self.identity.id, "intent": json.loads(json.dumps(intent))}
        if upper is not None:
            fields["upper"] = upper
        # canonical JSON of the record without its check, as record_check encodes it: the
        # definitions' bytes reused, not encoded again
        check = part_digest(canonical_json({**fields, "objects": defs}).encode())
        return {**fields, "objects": defs, "check": check}, {**fields, "objects": defs.value, "check": check}

    # -- reading -----------------------------------------------------------------------

    def load(self) -> dict | None:
        """Read the record (converting a store of the previous layout); None when the store
        holds no catalog. Raises :class:`MissingDefinitions` when it holds arrangements
        but no record names them."""
        self._find_identity()
        for _ in range(3):
            try:
                seqno, state = (None, None) if self.log is None else self.log.load()
            except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
                # versions that no longer fit together (a changed byte in a diff)
                raise CorruptMeta(f"catalog record at consensus key {self.key!r} of {self.loc.url!r} "
                                  f"is unreadable: {type(e).__name__}: {e}") from None
            if state is not None:
                if state.get("format") not in READ_FORMATS or not isinstance(state.get("objects"), list):
                    raise CorruptMeta(
                        f"consensus key {self.key!r} of {self.loc.url!r} is not a colmz catalog "
                        f"record (format {state.get('format')!r}, expected one of {READ_FORMATS})"
                    )
                if (state["format"] >= 3 or "check" in state) and state.get("check") != record_check(state):
                    raise CorruptMeta(
                        f"catalog record at consensus key {self.key!r} of {self.loc.url!r} (version "
                        f"{seqno}) does not match its check ({state.get('check')!r}, its contents "
                        f"digest to {record_check(state)}): it was changed after it was written; "
                        "nothing was read from it"
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
            # No record. Only a store of the previous layout -- its marker, the definitions
            # blob, present -- is converted (a conversion another handle started, or one a
            # crash cut after the identity was written, is finished so); any other store
            # without a record is empty, or refused when it holds data no record names.
            legacy = self._legacy_definitions()
            if legacy is not None:
                self._convert_legacy(legacy)
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

    def _legacy_definitions(self) -> list[dict] | None:
        """The definitions of a store of the previous layout (its marker: the blob
        :data:`LEGACY_RECORD_KEY`), or None when the store is not one."""
        raw = self.blob.get(LEGACY_RECORD_KEY)
        if raw is None:
            return None
        try:
            record = json.loads(bytes(raw))
        except ValueError:
            record = None
        if not isinstance(record, dict) or record.get("format") != 1 or not isinstance(record.get("objects"), list):
            raise ValueError(f"{self.blob.url_of(LEGACY_RECORD_KEY)} is not a colmz catalog record")
        return record["objects"]

    def _convert_legacy(self, defs: list[dict]) -> None:
        """Create the record from the definitions ``defs`` of a store of the previous
        layout (or leave it to the handle converting it at the same time: the caller loads
        again either way)."""
        self._identify()
        cons = self.loc.consensus
        head = cons.head(LEGACY_INTENT_KEY)
        blobs = []
        if head is not None and head.data:
            # The previous layout's committed intent: it must have landed (its blobs are never
            # decoded: UnverifiedIntent otherwise), then it is cleared.
            entries = json.loads(bytes(head.data))["entries"]
            live = {d["key"] for d in defs}
            for e in entries:
                if e["key"] in live:
                    self._apply_entry(e)
            blobs = [e["blob"] for e in entries if e.get("blob")]
            if not cons.compare_and_set(LEGACY_INTENT_KEY, head.seqno, VersionedData(head.seqno + 1, b"")):
                return  # another handle cleared it: read again
        try:
            self.log.commit(None, self._record(defs, None)[0])
        except CommitConflict:
            return  # another handle converted it first
        self.stats["converted"] += 1
        for k in [*blobs, LEGACY_RECORD_KEY]:
            self._delete(k)

    def arrangement(self, key: str, schema=None) -> ArrangementCollection:
        """The arrangement called ``key``, opened once per store: created with ``schema``
        when given and absent (a new object's), else it must exist (``CorruptMeta``: the
        record names an arrangement the store does not hold, or whose identity changed)."""
        from colmz.arrangement import Arrangement

        dur = self._arrangements.get(key)
        if dur is None:
            try:
                arr = Arrangement.open(self.loc, schema, name=key, create=schema is not None)
            except FileNotFoundError as e:
                raise CorruptMeta(
                    f"catalog at {self.loc.url!r}: its record names the arrangement {key!r}, which "
                    f"the store does not hold under its identity {key}/identity.json ({e}); "
                    "nothing was changed"
                ) from None
            dur = self._arrangements[key] = ArrangementCollection(arr)
        return dur

    def forget(self, keep) -> None:
        """Drop the cached handles of arrangements whose key is not in ``keep``."""
        for key in set(self._arrangements) - set(keep):
            del self._arrangements[key]

    # -- writing -----------------------------------------------------------------------

    def commit(self, objects: list[dict], moves, upper: int | None = None) -> int:
        """Commit ``objects`` (the definitions) and the intent of ``moves`` -- ``(name,
        key, lower, upper, updates)``, each object's arrangement opened by
        :meth:`arrangement` -- as the record version after :attr:`seqno`, with ``upper``
        the catalog-wide upper (the logical upper of every arrangement the record names;
        None: each is at its own, as a format-3 record).

        Writes each non-empty change as one run of parts under its arrangement's prefix,
        then compare-and-sets the record. Raises :class:`CommitConflict` when another
        writer committed since this store read (nothing visible; the runs deleted). Returns
        the new seqno; the intent is then :meth:`apply`'s to land.
        """
        token = intent_token(self._seqno)  # records the version written against
        entries, written = [], []
        self._identify()
        try:
            runs = self._write_runs(moves, written)
            for (name, key, lo, up, _), run in zip(moves, runs):
                entries.append({"name": name, "key": key, "lower": lo, "upper": up,
                                "runs": [] if run is None else [run.to_dict()]})
            record, state = self._record(objects, {"id": token, "entries": entries}, upper)
            seqno = self.log.commit(self._seqno, record)
        except Indeterminate:
            raise  # the record may name the runs: leave them (a reload tells; gc takes the rest)
        except BaseException as e:
            if isinstance(e, CommitConflict):
                self.stats["conflicts"] += 1
            for arr, run in written:
                for k in run.keys:
                    self._delete(k, arr.store)
            raise
        previous = (self._state or {}).get("intent")
        self._seqno, self._state = seqno, state
        self._mine.add(token)
        self.stats["commits"] += 1
        # The intent this commit replaced was applied before it was built: a previous
        # layout's blobs go (runs belong to their arrangements now).
        for e in (previous or {}).get("entries", ()):
            if e.get("blob"):
                self._delete(e["blob"])
        return seqno

    def _write_runs(self, moves, written: list) -> list[WrittenRun | None]:
        """Write each move's change as one run under its arrangement's prefix (None for a
        change that is empty or consolidates to nothing), side by side when there are several
        and every store takes concurrent calls; each run written is added to ``written`` as
        ``(arrangement, run)`` -- also when another raised, so the caller deletes them all.

        Each part is made durable by its own fsync (``LocalBlob``), and the record's
        compare-and-set follows only when all are: writing them one after the other waited
        for the disk once per part -- each view and each operator state adding one part per
        commit -- while writes in flight together are flushed together (the file system
        commits their metadata in one journal transaction)."""
        # Handles opened here, in the caller's thread: the store's cache of them is not shared
        # with the writers.
        jobs = [(i, self.arrangement(key).arrangement, u) for i, (_, key, _, _, u) in enumerate(moves) if len(u)]
        out: list[WrittenRun | None] = [None] * len(moves)

        def write(arr, u) -> WrittenRun | None:
            # compressed with the arrangement's codec for what it keeps (snappy): a run is
            # written once and kept until compaction, which would compress it; seqno: the
            # arrangement version this writer read, recorded in the parts' keys, so a
            # consensus restored to before it is noticed (identity.py)
            return write_run(arr.store, arr.schema, u, prefix=arr.prefix, compression=arr.compression,
                             seqno=arr.seqno)

        if len(jobs) < 2 or not all(concurrent_calls(arr.store) for _, arr, _ in jobs):
            # one part, or a store whose calls must come in a repeatable order (the fault
            # injector's, the in-memory one): one after the other
            for i, arr, u in jobs:
                run = out[i] = write(arr, u)
                if run is not None:
                    written.append((arr, run))
                    self._count("runs_written")
            return out
        pool = shared_pool("catalog-write", WRITERS)
        futures = [(i, arr, pool.submit(write, arr, u)) for i, arr, u in jobs]
        error: BaseException | None = None
        for i, arr, f in futures:
            # Every writer is waited for, also after one failed (or the caller was
            # interrupted): a run written is known, so it can be deleted.
            while not f.done():
                try:
                    wait([f])
                except BaseException as e:  # noqa: BLE001 - interrupted: raised once all are known
                    error = error or e
            if f.exception() is not None:
                error = error or f.exception()
                continue
            run = out[i] = f.result()
            if run is not None:
                written.append((arr, run))
                self._count("runs_written")
        if error is not None:
            raise error
        return out

    def apply(self, state: dict | None) -> None:
        """Land ``state``'s intent on the arrangements, idempotently (module docstring)."""
        intent = (state or {}).get("intent")
        if not intent:
            return
        # Entries without a key hold no data (a catalog's namespaces): no arrangement.
        live = {d["key"] for d in state["objects"] if "key" in d}
        mine = intent.get("id") in self._mine
        entries = [e for e in intent["entries"] if e["key"] in live]
        # Handles opened here, in the caller's thread (the store's cache of them is its own).
        handles = [self.arrangement(e["key"]) for e in entries]
        if len(entries) >= 2 and self._apply_together(entries, handles, mine):
            return
        if len(entries) < 2 or not (concurrent_calls(self.blob) and concurrent_consensus(self.loc.consensus)):
            for e in entries:
                self._apply_entry(e, mine)
            return
        # Side by side: one compare-and-set per arrangement, each of its own arrangement; a
        # consensus that groups concurrent compare-and-sets (SQLite: one transaction, one
        # fsync) then commits them together.
        pool = shared_pool("catalog-apply", WRITERS)
        futures = [pool.submit(self._apply_entry, e, mine) for e, _ in zip(entries, handles)]
        wait(futures)
        for f in futures:
            if f.exception() is not None:
                raise f.exception()

    def _apply_together(self, entries: list[dict], handles: list[ArrangementCollection], mine: bool) -> bool:
        """Land the entries not landed yet in one step (``Arrangement.append_runs_together``:
        one ``compare_and_set_many``, all or none); whether it did. False -- nothing
        landed, or (an indeterminate failure) maybe all of it -- leaves them to the entry
        by entry apply, which finds what landed: each handle is refreshed first when the
        step may have moved it. Also False when an entry needs more than one step (an
        arrangement not at the entry's lower, runs past half the gc lease) or the consensus
        has no such step."""
        from colmz.arrangement import Arrangement

        if not hasattr(self.loc.consensus, "compare_and_set_many"):
            return False
        calls, todo = [], []
        try:
            for e, dur in zip(entries, handles):
                lower, upper = e["lower"], e["upper"]
                up = dur.upper
                if up is None or (upper is not None and up >= upper):
                    continue  # landed (a seal never regresses)
                if up != lower:
                    return False  # behind or moved: the entry by entry apply refreshes and tells
                arr = dur.arrangement
                runs = self._entry_runs(e, arr.prefix)
                if not mine:
                    self._verify(arr, runs)  # every byte checked before anything is appended
                calls.append((arr, runs, upper, lower))
                todo.append(e)
            if not calls:
                for _ in entries:
                    self._count("entries_landed")
                return True
            Arrangement.append_runs_together(calls)
        except Indeterminate:
            # all of it may have landed: the handles read their records again
            for dur in handles:
                with contextlib.suppress(Exception):
                    dur.refresh()
            return False
        except (StorageError, LeaseExpired, SealMismatch, MissingPart, ValueError):
            # nothing landed (a ValueError: a call the step refuses, e.g. an arrangement
            # holding changes not committed yet); the entry by entry apply retries, rewrites
            # or raises
            return False
        for _ in todo:
            self._count("entries_applied")
        for _ in range(len(entries) - len(todo)):
            self._count("entries_landed")
        return True

    def unapplied(self, state: dict | None) -> list[str]:
        """The names of the objects ``state``'s intent has not landed on yet."""
        intent = (state or {}).get("intent")
        if not intent:
            return []
        live = {d["key"] for d in state["objects"] if "key" in d}
        out = []
        for e in intent["entries"]:
            if e["key"] in live:
                up = self.arrangement(e["key"]).upper
                if up is not None and (e["upper"] is None or up < e["upper"]):
                    out.append(e["name"])
        return out

    def _apply_entry(self, e: dict, mine: bool = False) -> None:
        dur = self.arrangement(e["key"])
        lower, upper = e["lower"], e["upper"]

        def landed() -> bool:
            up = dur.upper
            return up is None or (upper is not None and up >= upper)

        if landed():  # a seal never regresses: the cached one reaching it is enough
            self._count("entries_landed")
            return
        if dur.upper != lower:
            dur.refresh()
            if landed():
                self._count("entries_landed")
                return

        def store_changed() -> StoreChanged:
            return StoreChanged(
                f"catalog record of {self.loc.url!r}: object {e['name']!r} (arrangement "
                f"{e['key']!r}) has upper {dur.upper}, its committed intent moves it from "
                f"{lower} to {upper}: the arrangement was written behind the catalog"
            )

        if dur.upper != lower:
            raise store_changed()
        arr = dur.arrangement
        runs = self._entry_runs(e, arr.prefix)
        try:
            if not mine:
                # Written by another handle (or a process that crashed): every byte is
                # checked before anything is appended.
                self._verify(arr, runs)
            try:
                arr.append_runs(runs, seal=upper, expect=lower, keep_runs=True)
            except LeaseExpired:
                # Runs older than half the gc lease (a crash long before this open): their
                # checked contents are written again under fresh keys and those appended; the
                # old parts are the arrangement's gc's.
                arr.append_runs(self._rewrite(arr, runs), seal=upper, expect=lower)
            self._count("entries_applied")
        except (SealMismatch, MissingPart) as err:
            # The seal moved: another applier landed this entry first (and its parts may
            # since have been compacted into others and deleted: MissingPart), or a writer
            # behind the catalog's back moved it elsewhere. A missing part of an entry that
            # has not landed is a real loss, and raised as one.
            dur.refresh()
            if not landed():
                if isinstance(err, SealMismatch):
                    raise store_changed() from None
                raise
            self._count("entries_landed")

    def _entry_runs(self, e: dict, prefix: str) -> list[WrittenRun]:
        """The checked runs of an intent entry (module docstring, invariant 4)."""
        where = f"catalog record of {self.loc.url!r}, object {e.get('name')!r} (arrangement {e.get('key')!r})"
        if e.get("blob"):
            raise UnverifiedIntent(
                f"{where}: the committed intent still to apply keeps its changes in "
                f"{self.blob.url_of(e['blob'])}, a blob of the previous layout that carries no "
                "digest, row count or diff sum; colmz does not decode unchecked bytes. Open "
                "the store once with the colmz release that wrote it (which applies the "
                "intent), then with this one; nothing was changed"
            )
        raw = e.get("runs", [])
        if not isinstance(raw, list):
            raise CorruptMeta(f"{where}: the intent entry's runs are {raw!r}, not a list")
        try:
            runs = [WrittenRun.from_dict(r) for r in raw]
        except (TypeError, ValueError) as err:
            raise CorruptMeta(f"{where}: an intent entry's run is unreadable ({err})") from None
        for r in runs:
            if r.checks is None or any(len(c) < 3 for c in r.checks):
                raise CorruptMeta(f"{where}: an intent entry's run carries no digest of its parts: {r!r}")
            bad = [k for k in r.keys if not k.startswith(prefix)]
            if bad:
                raise CorruptMeta(f"{where}: an intent entry's part {bad[0]!r} is not under {prefix!r}")
            if r.ts_lower < e["lower"] or (e["upper"] is not None and r.ts_upper >= e["upper"]):
                raise CorruptMeta(f"{where}: a run holds times [{r.ts_lower}, {r.ts_upper}], outside "
                                  f"the entry's [{e['lower']}, {e['upper']})")
        return runs

    def _verify(self, arr, runs: list[WrittenRun]) -> list[Updates]:
        """Read every part of ``runs``, checked against what their writer recorded
        (``CorruptPart``/``MissingPart`` on any difference); their updates."""
        schema = tuple(arr.schema or ())
        return [read_part(arr.store, p, schema) for r in runs for p in r.parts]

    def _rewrite(self, arr, runs: list[WrittenRun]) -> list[WrittenRun]:
        parts = [p for p in self._verify(arr, runs) if len(p)]
        if not parts:
            return []
        run = write_run(arr.store, arr.schema, concat(parts), prefix=arr.prefix, compression=arr.compression,
                        seqno=arr.seqno)
        self._count("runs_written")
        return [] if run is None else [run]

    def _delete(self, key: str, blob=None) -> None:
        try:
            (self.blob if blob is None else blob).delete(key)
            self._count("blobs_deleted")
        except StorageError:  # best effort: an unreferenced blob is garbage only
            pass
