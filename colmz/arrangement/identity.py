"""A stored arrangement's identity: which blob a consensus record belongs to.

Design
------
An arrangement lives in two places: its parts in a blob store, its state in a consensus
record. Nothing tied one to the other before: the record's key was the arrangement's
``name``, so two blobs opened with one ``consensus=`` URL (one PostgreSQL database for
several stores) shared one record -- the second showed the first one's contents, and a write
through it committed a state naming parts the first blob lacks. And a blob whose record was
lost (``consensus.sqlite`` deleted or truncated) looked like a new store, so ``open`` created
an empty arrangement over its parts and ``gc`` then deleted them.

Now a store has an **id**, written once into its blob at creation, under
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

Invariants
----------
1. A blob's identity key is written once (``colmz.storage.base.set_if_absent``): of two
   processes creating one store at once, exactly one identity is stored and both use it.
2. A state whose ``identity.id`` differs from its blob's id is never read as that blob's, and
   never written over.
3. Opening never commits an empty state over a blob that holds parts.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from colmz.arrangement.errors import CorruptMeta, IdentityMismatch, MetadataLost
from colmz.storage.base import Blob, set_if_absent

__all__ = [
    "IDENTITY_FORMAT",
    "StoreIdentity",
    "consensus_key_of",
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
            where: str, consensus: str, now_ms: int,
            lease_ms: float) -> tuple[Resolution, int | None, dict | None]:
    """Decide how to open arrangement ``name`` in ``blob`` (module docstring); return the
    decision and the record it uses, ``(seqno, state)`` from ``load(key)``.

    ``ident`` is the blob's identity (:func:`read_identity`), ``where`` and ``consensus``
    name the blob and the consensus store in messages, ``lease_ms`` is the gc lease
    (:func:`committed_looking`). Raises :class:`IdentityMismatch` or
    :class:`MetadataLost`; reads only.
    """
    if ident is not None:
        seqno, state = load(ident.consensus_key)
        if state is None:
            parts = committed_looking(blob, blob.list_keys(prefix), now_ms, lease_ms)
            if parts:
                # the creator may have committed its record (and written parts) between
                # the load and the listing: look once more
                seqno, state = load(ident.consensus_key)
        if state is None:
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
