"""A stored arrangement's identity: which blob a consensus record belongs to.

Layer
-----
Beside the handle in ``colmz.arrangement`` (``docs/arrangement.md``): it reads and writes
the identity file in the blob store and reads consensus records to resolve which record a
handle opens; it writes no state. Follows the shard id kept in the state of
``src/persist-client/src/internal/state.rs``.

Design
------
An arrangement lives in two places: its parts in a blob store, its state in a consensus
record, and something must tie one to the other. Were the record's key the arrangement's
``name`` alone, two blobs opened with one ``consensus=`` URL (one PostgreSQL database for
several stores) would share one record -- the second would show the first one's contents,
and a write through it would commit a state naming parts the first blob lacks. And a blob
whose record is lost (``consensus.sqlite`` deleted or truncated) would look like a new store,
so ``open`` would create an empty arrangement over its parts and ``gc`` then delete them.

So a store has an **id**, written once into its blob at creation, under
``<name>/identity.json`` (:func:`identity_key`), never rewritten::

    {"format": 1, "id": "<uuid4 hex>", "name": "<name>", "consensus_key": "<key>",
     "created_ms": <epoch ms> | null}

and the state committed to consensus carries the same id (``"identity": {"id", "created_ms"}``
in the state document). A new store's consensus key is ``<name>/<id>``
(:func:`consensus_key_of`), so stores sharing a consensus database never share a record,
and a blob names its record: opening reads the blob's identity first, then that record.

Opening (:func:`resolve`) decides, from the blob's identity, the record and the parts under
the arrangement's prefix, one of:

* **open** the record the identity names, when its id is the blob's (or it has none yet:
  a record at the key this blob names is this blob's);
* **create** a new store, when the blob holds no identity and no part (a record at the
  legacy key ``name`` holding parts this blob lacks belongs to another store: it is left
  alone), or when the blob holds an identity but its record was never committed and there
  are no parts (a creation that stopped between the two writes);
* **adopt** a store written before identities existed: no identity in the blob, a record at
  key ``name`` without an id, every part it names present in this blob (and, when it names
  none, no part in the blob either). The id is written into the blob with
  ``consensus_key = name`` and into the state by the next commit, so the record keeps its
  key and nothing is copied;
* **refuse** with :class:`~colmz.arrangement.errors.IdentityMismatch` when the record the
  blob names carries another id, or the legacy record carries an id (it was adopted by
  another blob) while this blob has parts; and with
  :class:`~colmz.arrangement.errors.MetadataLost` when the blob holds parts and no record
  accounts for them. The messages name both sides and what to do.

Lost metadata: an identity without its record
---------------------------------------------
``open`` writes the identity and then commits the record, before any part can be written
through it (a run, ``write_run``'s part, is committed by a handle that opened the store,
so its record existed). So a blob holding an identity whose record is missing, beside any
part -- whatever its kind or age -- lost its record: :class:`MetadataLost`. Only a blob
holding no identity may have young runs and no record (a job writing into a new prefix
before its driver creates the store): :func:`committed_looking` tells those apart. (A driver
killed between writing the identity and committing the record over such runs is refused
too: then nothing is lost, and removing ``<name>/identity.json`` lets the next open create
the store.)

Rolled-back metadata
--------------------
A record can also come back *older*: ``consensus.sqlite`` restored from a backup, a
directory copy that took it before ``blob/``, a point-in-time restore of PostgreSQL under a
bucket that kept its newer parts. Its seqno is then behind a state that existed, and
opening it would accept writes at times that were final while ``gc`` deleted the newer
parts. Every part written by a durable handle records in its key the seqno of the state
its writer read -- the version its commit expects to replace
(``colmz.arrangement.parts.key_seqno``) -- so it can become visible only through a later
version, and its existence proves the record reached that seqno. Hence:

* **open** (:func:`check_not_rolled_back`): a part under the prefix recording ``s`` greater
  than the record's head seqno proves the record was rolled back:
  :class:`~colmz.arrangement.errors.MetadataRolledBack` (a :class:`MetadataLost`), naming
  the store, the seqno and seal found and the part. The listing may be taken after the
  record was read (a writer may have committed in between), so the head is read once more
  before refusing: every part listed was written after its writer read ``s``, before the
  second read;
* **gc** deletes an unreferenced part only when it records a seqno *below* the version gc
  read (one at or above may belong to a commit in flight or to a newer state), on top of
  the lease; it refuses, deleting nothing, on a part recording more than that version
  (listed before the record was read);
* a handle whose record's seqno goes *down* under it (``refresh``, the machine's reload
  after a lost compare-and-set, a read's reload, ``gc``) refuses the same way: seqnos never
  decrease.

What this cannot tell: a rollback whose lost versions wrote no part, or only parts
recording the restored head itself. A part recording the head seqno ``h`` is what a writer
leaves that read ``h`` and died before its commit; it is equally what the commit ``h + 1``
wrote. So a rollback by exactly one commit, and a rollback by any number of commits that
wrote no part (``seal``, ``advance_since`` with nothing to drain), are opened as the older
state. Even then ``gc`` deletes no such part (its seqno is not below the head), until a
commit made after the restore moves the head past it. Parts written before seqnos were
recorded, and runs written without one (``write_run`` without ``seqno``), prove nothing.

Copies sharing one record
-------------------------
A store directory copied while its consensus is outside it (PostgreSQL, a SQLite file
elsewhere) gives two blobs with one identity, hence one record: a write through the copy
commits parts the original lacks, and the original's reads then fail. So the state records
where the blob that last committed it is (``identity.blob``: ``Blob.url_of`` of the
identity file), and :func:`check_not_a_copy` refuses (:class:`IdentityMismatch`) to open a
blob elsewhere while the recorded local one still holds the same identity. A blob that was
moved (nothing left at the recorded place) opens, and its next commit records its new
place; a copy of an object-store prefix cannot be told from a move (the other place is not
checked) and is not refused.

The catalog's record (``colmz.catalog.store``) is checked alike on open
(:func:`check_catalog_history`): its intent blobs record the record version they were
written against (:func:`intent_token`); every arrangement it names is checked by its own
open, which the catalog makes for each object before applying the record's intent.

Invariants
----------
1. A blob's identity key is written once (``colmz.storage.base.set_if_absent``): of two
   processes creating one store at once, exactly one identity is stored and both use it.
2. A state whose ``identity.id`` differs from its blob's id is never read as that blob's, and
   never written over.
3. Opening never commits an empty state over a blob that holds parts.
4. Opening never returns a state older than a part under its prefix proves existed, and gc
   never deletes a part recording a seqno at or above the version it read.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from colmz.arrangement.errors import CorruptMeta, IdentityMismatch, MetadataLost, MetadataRolledBack
from colmz.storage.base import Blob, set_if_absent

__all__ = [
    "IDENTITY_FORMAT",
    "StoreIdentity",
    "check_catalog_history",
    "check_not_a_copy",
    "check_not_rolled_back",
    "consensus_key_of",
    "intent_seqno",
    "intent_token",
    "rollback_evidence",
    "seal_of_state",
    "identity_key",
    "read_identity",
    "resolve",
    "state_identity",
    "write_identity",
]

#: The ``format`` of the identity document.
IDENTITY_FORMAT = 1


def identity_key(name: str) -> str:
    """The blob key of arrangement ``name``'s identity document.

    >>> identity_key("arrangement")
    'arrangement/identity.json'
    """
    return f"{name}/identity.json"


def consensus_key_of(name: str, store_id: str) -> str:
    """The consensus key of a store created with id ``store_id``.

    >>> consensus_key_of("arrangement", "ab12")
    'arrangement/ab12'
    """
    return f"{name}/{store_id}"


@dataclass(frozen=True)
class StoreIdentity:
    """A store's identity: its ``id``, ``name``, the ``consensus_key`` of its record and when
    it was created (``created_ms``; None for a store adopted from before identities)."""

    id: str
    name: str
    consensus_key: str
    created_ms: int | None

    @classmethod
    def new(cls, name: str, now_ms: int) -> StoreIdentity:
        sid = uuid.uuid4().hex
        return cls(sid, name, consensus_key_of(name, sid), int(now_ms))

    @classmethod
    def adopted(cls, name: str) -> StoreIdentity:
        return cls(uuid.uuid4().hex, name, name, None)

    def to_bytes(self) -> bytes:
        return json.dumps({"format": IDENTITY_FORMAT, "id": self.id, "name": self.name,
                           "consensus_key": self.consensus_key,
                           "created_ms": self.created_ms}, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> StoreIdentity:
        try:
            doc = json.loads(data)
            if doc.get("format") != IDENTITY_FORMAT:
                raise ValueError(f"format {doc.get('format')!r}")
            sid, name, key, ms = doc["id"], doc["name"], doc["consensus_key"], doc["created_ms"]
            if not (isinstance(sid, str) and sid and isinstance(name, str) and isinstance(key, str)
                    and key and (ms is None or (isinstance(ms, int) and not isinstance(ms, bool)))):
                raise ValueError("fields of the wrong type")
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
            raise CorruptMeta(f"the store identity {where} is unreadable ({e}): {bytes(data)[:120]!r}") from None
        return cls(sid, name, key, ms)

    def state_doc(self) -> dict:
        """What the state document records of the identity."""
        return {"id": self.id, "created_ms": self.created_ms}


def read_identity(blob: Blob, name: str) -> StoreIdentity | None:
    """The identity stored in ``blob`` for arrangement ``name``, or None."""
    key = identity_key(name)
    data = blob.get(key)
    return None if data is None else StoreIdentity.from_bytes(data, f"{key!r} in {blob!r}")


def write_identity(blob: Blob, ident: StoreIdentity) -> StoreIdentity:
    """Store ``ident`` unless the blob has an identity already; the one stored (another
    process's, when it wrote first)."""
    key = identity_key(ident.name)
    if set_if_absent(blob, key, ident.to_bytes()):
        return ident
    found = read_identity(blob, ident.name)
    if found is None:  # written and deleted in between: not a store we can reason about
        raise CorruptMeta(f"the store identity {key!r} in {blob!r} appeared and vanished while opening")
    return found


def state_identity(state: dict | None) -> str | None:
    """The store id a state document records (None: none, a state from before identities)."""
    if not isinstance(state, dict):
        return None
    ident = state.get("identity")
    if ident is None:
        return None
    if not isinstance(ident, dict) or not isinstance(ident.get("id"), str):
        raise CorruptMeta(f"arrangement state has an unreadable identity {ident!r}")
    return ident["id"]


def state_keys(state: dict) -> set[str]:
    """Every part key a state document names (shape errors are left to the full parse)."""
    meta = state.get("meta") if isinstance(state, dict) else None
    out: set[str] = set()
    if not isinstance(meta, dict):
        return out
    for field in ("unsealed_batches", "trace_batches"):
        for b in meta.get(field) or ():
            if isinstance(b, dict):
                out.update(k for k in b.get("keys") or () if isinstance(k, str))
    return out


@dataclass(frozen=True)
class Resolution:
    """What :func:`resolve` decided: ``action`` is ``"open"``, ``"create"`` or ``"adopt"``;
    ``identity`` is the store's (for ``"create"`` and ``"adopt"``: still to be written)."""

    action: str
    identity: StoreIdentity


def _parts_found(parts: list[str], prefix: str) -> str:
    return (f"{len(parts)} part(s) under {prefix!r}, e.g. {parts[0]!r}" if parts
            else f"no part under {prefix!r}")


def committed_looking(blob: Blob, parts: list[str], now_ms: int, lease_ms: float) -> list[str]:
    """The parts among ``parts`` that no state could be about to commit, so that a missing
    record has lost them: one older than half the lease (a commit refuses those,
    ``Arrangement._check_lease``), or one an arrangement writes only after its record exists
    (its metadata kind ``unsealed`` or ``trace``; runs, ``write_run``'s parts, are written
    before their first commit, e.g. by a Spark sink's executors into a new store).
    Stops at the first found; footers are read only while all are young runs."""
    from colmz.arrangement.parts import key_created_ms, part_kind

    old = [k for k in parts if now_ms - (key_created_ms(k) or 0) > lease_ms / 2]
    if old:
        return old
    for k in parts:
        if part_kind(blob, k) != "run":
            return [k]
    return []


def resolve(blob: Blob, name: str, prefix: str, ident: StoreIdentity | None, load, *,
            where: str, consensus: str, now_ms: int, lease_ms: float,
            head_seqno: Callable[[str], int | None],
            own_consensus: bool = False) -> tuple[Resolution, int | None, dict | None]:
    """Decide how to open arrangement ``name`` in ``blob`` (module docstring); return the
    decision and the record it uses, ``(seqno, state)`` from ``load(key)``.

    ``ident`` is the blob's identity (:func:`read_identity`), ``where`` and ``consensus``
    name the blob and the consensus store in messages, ``lease_ms`` is the gc lease
    (:func:`committed_looking`), ``head_seqno(key)`` reads a record's head seqno alone;
    ``own_consensus`` says the consensus lives inside the store (a directory's
    ``consensus.sqlite``), so a copy of the store has its own (:func:`check_not_a_copy`).
    Raises :class:`IdentityMismatch`, :class:`MetadataLost` or
    :class:`MetadataRolledBack`; reads only.
    """
    if ident is not None:
        seqno, state = load(ident.consensus_key)
        parts = blob.list_keys(prefix)
        if state is None and parts:
            # the creator may have committed its record (and written parts) between the
            # load and the listing: look once more
            seqno, state = load(ident.consensus_key)
        if state is None:
            # The record is committed before any part can be written through this
            # identity: whatever the parts' kind or age, the record was lost.
            if parts:
                raise MetadataLost(
                    f"store {where!r} (id {ident.id}) holds {_parts_found(parts, prefix)}, but its "
                    f"consensus record {ident.consensus_key!r} is missing from {consensus}: the "
                    "metadata was lost (a deleted or truncated consensus database, or the wrong "
                    "consensus URL). Nothing was written. Open it with the consensus it was "
                    "created with, or restore that database from a backup; the parts are "
                    "plain Parquet files (colmz.arrangement.parts) if the data must be salvaged"
                )
            return Resolution("create", ident), None, None
        sid = state_identity(state)
        if sid is not None and sid != ident.id:
            raise IdentityMismatch(
                f"store {where!r} has id {ident.id}, but its consensus record "
                f"{ident.consensus_key!r} in {consensus} belongs to store {sid}: nothing was "
                "read or written. The blob's identity file or the consensus database was "
                "copied from another store; give each store its own"
            )
        check_not_rolled_back(parts, seqno, state, lambda: head_seqno(ident.consensus_key),
                              where=where, consensus=consensus, key=ident.consensus_key)
        if not own_consensus:
            check_not_a_copy(state, ident, blob.url_of(identity_key(name)), where=where,
                             consensus=consensus)
        return Resolution("open", ident), seqno, state
    # No identity: a new store, a store from before identities, or one whose identity is lost.
    seqno, state = load(name)
    parts = blob.list_keys(prefix)
    if state is None:
        parts = committed_looking(blob, parts, now_ms, lease_ms)
    if state is not None:
        sid = state_identity(state)
        if sid is None:
            refs = state_keys(state)
            present = set(parts)
            missing = sorted(refs - present)
            if not missing and (refs or not parts):
                check_not_rolled_back(parts, seqno, state, lambda: head_seqno(name),
                                      where=where, consensus=consensus, key=name)
                return Resolution("adopt", StoreIdentity.adopted(name)), seqno, state
            if parts and not refs:
                raise MetadataLost(
                    f"store {where!r} holds {_parts_found(parts, prefix)} and no identity, but "
                    f"the consensus record {name!r} in {consensus} (from before store "
                    "identities) names no part: it cannot account for them, so it is not "
                    "adopted. Nothing was written. Open this blob with the consensus it was "
                    "written with, or restore that database"
                )
            if parts:
                raise IdentityMismatch(
                    f"store {where!r} holds {_parts_found(parts, prefix)} and no identity, and "
                    f"the consensus record {name!r} in {consensus} (from before store "
                    f"identities) names {len(missing)} part(s) this blob lacks, e.g. "
                    f"{missing[0]!r}: it belongs to another store sharing this consensus. "
                    "Nothing was read or written. Open this blob with the consensus it was "
                    "written with"
                )
        elif parts:
            raise IdentityMismatch(
                f"store {where!r} holds {_parts_found(parts, prefix)} and no identity, and the "
                f"consensus record {name!r} in {consensus} belongs to store {sid}: nothing was "
                "read or written. If this blob is that store, its identity file "
                f"{identity_key(name)!r} was lost: restore it; else open this blob with the "
                "consensus it was written with"
            )
        # an empty blob next to another store's record: a new store of its own
    elif parts:
        raise MetadataLost(
            f"store {where!r} holds {_parts_found(parts, prefix)} but neither an identity nor a "
            f"consensus record ({name!r} in {consensus}) accounts for them: the metadata was "
            "lost (a deleted or truncated consensus database, or the wrong consensus URL). "
            "Nothing was written, and a new arrangement will not be created over them. Open "
            "it with the consensus it was written with or restore that database; to start "
            "afresh, move the parts away first"
        )
    return Resolution("create", StoreIdentity.new(name, now_ms)), None, None


# ----------------------------------------------------------------------------- rollbacks


def rollback_evidence(keys: Iterable[str], seqno: int | None, *, seqno_of=None) -> list[str]:
    """The keys among ``keys`` that record a seqno above ``seqno`` (a record with no
    version: above 0), most recent seqno first: each proves a state at that seqno existed.
    ``seqno_of`` reads a key's seqno (default ``colmz.arrangement.parts.key_seqno``).

    >>> rollback_evidence(["p/1700000000000-ab_s3.parquet", "p/1700000000000-cd_s9.parquet",
    ...                    "p/1700000000000-ef.parquet"], 3)
    ['p/1700000000000-cd_s9.parquet']
    """
    if seqno_of is None:
        from colmz.arrangement.parts import key_seqno as seqno_of
    floor = 0 if seqno is None else int(seqno)
    found = [(s, k) for k in keys if (s := seqno_of(k)) is not None and s > floor]
    return [k for _, k in sorted(found, key=lambda t: (-t[0], t[1]))]


def seal_of_state(state) -> str:
    """The seal a state document records, for messages (``'unknown'`` when unreadable)."""
    meta = state.get("meta") if isinstance(state, dict) else None
    return repr(meta.get("seal")) if isinstance(meta, dict) else "unknown"


def check_not_rolled_back(keys: Iterable[str], seqno: int | None, state, reread: Callable[[], int | None], *,
                          where: str, consensus: str, key: str, seqno_of=None, what: str = "store") -> None:
    """Raise :class:`MetadataRolledBack` when ``keys`` (listed under the store's prefix)
    hold a part recording a seqno above the record's, ``seqno``, and the head read again
    (``reread()``) is still below it (module docstring, "Rolled-back metadata")."""
    found = rollback_evidence(keys, seqno, seqno_of=seqno_of)
    if not found:
        return
    if seqno_of is None:
        from colmz.arrangement.parts import key_seqno as seqno_of
    top = seqno_of(found[0])
    head = reread()
    if head is not None and head >= top:
        return  # committed meanwhile: the listing was taken after the first read
    raise MetadataRolledBack(
        f"{what} {where!r}: its consensus record {key!r} in {consensus} is at seqno {seqno} "
        f"(seal {seal_of_state(state)}), but its blob holds {len(found)} blob(s) written against a "
        f"newer version, up to seqno {top}, e.g. {found[0]!r}: the record was rolled back to an "
        "older copy (a consensus restored from a backup, a copy of the store that took the "
        "consensus before the blob, a point-in-time restore under newer parts). Nothing was "
        "written or deleted: opening it would accept writes at times that were final and gc "
        "would delete the newer data. Restore the newest copy of the consensus database; "
        f"without one, to accept the older state, move the blobs written against versions "
        f"above {seqno} (key suffix _s<seqno>) out of the store first"
    )


#: An intent token that records the record version it was written against: ``<hex>_s<seqno>``.
_INTENT_RE = re.compile(r"^(?:.*/)?[0-9a-f]+_s(\d+)/")


def intent_token(seqno: int | None) -> str:
    """A fresh token for the blobs of a catalog intent written against record version
    ``seqno`` (None: no record yet), recording it (:func:`intent_seqno`).

    >>> intent_seqno("catalog/txn/" + intent_token(4) + "/t-1"), intent_token(None).isalnum()
    (4, True)
    """
    hexed = uuid.uuid4().hex
    return hexed if seqno is None else f"{hexed}_s{int(seqno)}"


def intent_seqno(key: str) -> int | None:
    """The record version an intent blob key records (:func:`intent_token`), or None.

    >>> intent_seqno("catalog/txn/ab12_s7/t-1"), intent_seqno("catalog/txn/ab12/t-1")
    (7, None)
    """
    m = _INTENT_RE.match(key)
    return int(m.group(1)) if m else None


def check_catalog_history(loc, key: str, seqno: int | None, state: dict, *, intent_prefix: str,
                          known: int | None = None) -> None:
    """Refuse (:class:`MetadataRolledBack`) a catalog record at ``seqno`` (consensus key
    ``key`` of the store ``loc``) older than what its blob proves existed: an intent blob
    (under ``intent_prefix``) written against a newer version (module docstring). One
    listing of the intents. The arrangements the record names are checked by their own
    ``Arrangement.open`` (:func:`resolve`), which a catalog calls for every object it opens
    -- before it applies the record's intent to them.

    ``known`` is the version the caller read before (a reload): then only a seqno gone
    down is checked (no read at all).
    """
    cons = loc.consensus
    if known is not None:
        if seqno is None or seqno < known:
            raise MetadataRolledBack(
                f"catalog {str(loc.url)!r}: its consensus record {key!r} in {cons!r} is at seqno "
                f"{seqno}, behind seqno {known} this catalog read or committed: the record was "
                "rolled back to an older copy (a consensus restored from a backup). Nothing was "
                "written; restore the newest copy of the consensus database"
            )
        return

    def head() -> int | None:
        h = cons.head(key)
        return None if h is None else h.seqno

    check_not_rolled_back(loc.blob.list_keys(intent_prefix), seqno, state, head,
                          where=str(loc.url), consensus=repr(cons), key=key, seqno_of=intent_seqno,
                          what="catalog")


def check_not_a_copy(state, ident: StoreIdentity, here: str, *, where: str, consensus: str) -> None:
    """Refuse (:class:`IdentityMismatch`) to open the record of ``state`` through the blob
    at ``here`` (``Blob.url_of`` of its identity file) when the record was last committed
    through another local blob that still holds this identity: the two are copies sharing
    one record (module docstring, "Copies sharing one record")."""
    recorded = state.get("identity", {}).get("blob") if isinstance(state, dict) else None
    if not isinstance(recorded, str) or recorded == here or not recorded.startswith("/"):
        return
    try:
        with open(recorded, "rb") as f:
            other = StoreIdentity.from_bytes(f.read(), repr(recorded))
    except (OSError, CorruptMeta):
        return  # moved away (or unreadable there): this blob is the store now
    if other.id != ident.id:
        return
    try:
        if os.path.samefile(recorded, here):
            return  # one directory under two spellings (a symlink, a bind mount)
    except OSError:
        pass
    raise IdentityMismatch(
        f"store {where!r} (id {ident.id}) is a copy of the store whose identity is "
        f"{recorded!r}: both name the consensus record {ident.consensus_key!r} in {consensus}, "
        "which was last committed through the other one, and a write through either would "
        "break the other. Nothing was read or written. Open the original; to keep the copy as a "
        "store of its own, give it its own consensus (copy the record into a new database and "
        "open the copy with that consensus) or remove the original"
    )
