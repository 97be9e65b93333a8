"""``ArrangementState``: the arrangement's state as one frozen value, with pure transitions.

Layer
-----
The *state* layer of ``colmz.arrangement`` (``docs/arrangement.md``), after persist-client's
``src/persist-client/src/internal/state.rs`` (a ``State`` value that commands turn into the
next one) over the fields of ``src/persist/src/indexed/arrangement.rs`` (``ArrangementMeta``).
It touches nothing: no blob store, no consensus, no clock. The handle
(:mod:`colmz.arrangement.handle`) writes parts, then moves its state to the value a
transition returns; the machine (:mod:`colmz.arrangement.machine`) commits that value.

Design
------
:class:`ArrangementState` holds the seal, the since, the unsealed batches, the trace batches,
the schema and the user's properties, each immutable (tuples, a read-only mapping, frozen
batch metadata). Every upstream transition -- ``unsealed_append``, ``update_seal``,
``allow_compaction``, ``unsealed_evict``, ``unsealed_replace`` (a trim),
``handle_drain_response``, ``handle_compact_response``, ``with_properties`` -- returns a new
state or raises, never changing its input. So a call that fails simply keeps the value it
started from: there is nothing to roll back, and the handle's "put back" is keeping a
reference.

The state document
------------------
:func:`encode_state` and :func:`decode_state` are the codec of the document committed to the
consensus record: ``{"format", "schema", "meta"}`` and, for a store opened by
``Arrangement.open``, its ``"identity"`` (``colmz.arrangement.identity``). Decoding checks
the format, the store the document belongs to and the metadata's invariants. The machine
(:mod:`colmz.arrangement.machine`) is their only caller.

Invariants
----------
1. A transition never mutates ``self`` (nor anything it references).
2. A transition that raises returns nothing: the caller still holds the old value.
3. ``validate()`` (``colmz.arrangement.meta.validate_meta``) holds for every state a handle
   commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from colmz.arrangement.errors import (
    CorruptMeta,
    IdentityMismatch,
    SeqNoMismatch,
    TimeBeforeTraceUpper,
)
from colmz.arrangement.meta import (
    CompactTraceRes,
    DrainUnsealedRes,
    TraceBatchMeta,
    UnsealedBatchMeta,
    meta_from_dict,
    meta_to_dict,
    properties_from_dict,
    validate_meta,
)
from colmz.arrangement.schema import schema_from_json, schema_to_json
from colmz.frontier import Frontier, check_frontier, check_time
from colmz.order import ColumnSpec

__all__ = ["STATE_FORMAT", "ArrangementState", "decode_state", "encode_state"]

#: The ``format`` of the durable state document.
STATE_FORMAT = 1


def _frozen_properties(props: Mapping[str, str | int] | None) -> Mapping[str, str | int]:
    return MappingProxyType(dict(sorted((props or {}).items())))


@dataclass(frozen=True)
class ArrangementState:
    """One version of an arrangement's state (module docstring).

    Examples
    --------
    >>> s = ArrangementState()
    >>> t = s.update_seal(4).allow_compaction(2)
    >>> (s.seal, s.since), (t.seal, t.since)
    ((0, 0), (4, 2))
    """

    seal: Frontier = 0
    since: int = 0
    unsealed: tuple[UnsealedBatchMeta, ...] = ()
    trace: tuple[TraceBatchMeta, ...] = ()
    schema: tuple[ColumnSpec, ...] | None = None
    properties: Mapping[str, str | int] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        # whatever the caller passed, the value holds only immutable containers
        object.__setattr__(self, "unsealed", tuple(self.unsealed))
        object.__setattr__(self, "trace", tuple(self.trace))
        if self.schema is not None:
            object.__setattr__(self, "schema", tuple(self.schema))
        if not isinstance(self.properties, MappingProxyType):
            object.__setattr__(self, "properties", _frozen_properties(self.properties))

    # -------------------------------------------------------------- metadata

    @classmethod
    def from_meta(cls, meta: dict, schema=None) -> ArrangementState:
        """The state of ``meta`` (``colmz.arrangement.meta.meta_to_dict``'s form)."""
        seal, since, unsealed, trace = meta_from_dict(meta)
        return cls(seal, since, unsealed, trace, schema, properties_from_dict(meta))

    def meta(self) -> dict:
        """The plain-dict form (``colmz.arrangement.meta.meta_to_dict``)."""
        return meta_to_dict(self.seal, self.since, self.unsealed, self.trace, dict(self.properties))

    def validate(self) -> None:
        """Raise ``CorruptMeta`` naming the first broken invariant."""
        validate_meta(self.seal, self.since, self.unsealed, self.trace)

    def referenced_keys(self) -> frozenset[str]:
        """Every part key the state names."""
        return frozenset(k for b in (*self.unsealed, *self.trace) for k in b.keys)

    # -------------------------------------------------------------- derived

    def unsealed_seqno_upper(self) -> int:
        """The end of the last unsealed batch's seqno range, or 0."""
        return self.unsealed[-1].seqnos[1] if self.unsealed else 0

    def trace_ts_upper(self) -> Frontier:
        """The physical upper: the last trace batch's upper, or 0 when the trace is empty."""
        return self.trace[-1].desc.upper if self.trace else 0

    # -------------------------------------------------------------- transitions

    def update_seal(self, ts: Frontier) -> ArrangementState:
        """The state with seal ``ts``, unchecked against the current one (upstream uses it
        to revert a seal)."""
        return replace(self, seal=check_frontier(ts, "seal"))

    def allow_compaction(self, since: int) -> ArrangementState:
        """The state with since ``since``, unchecked against the current one."""
        if since is None:
            raise ValueError("since must be an int time; an Arrangement has no empty since")
        return replace(self, since=check_time(since, "since"))

    def with_schema(self, schema) -> ArrangementState:
        """The state with its data columns pinned to ``schema``."""
        return replace(self, schema=None if schema is None else tuple(schema))

    def with_properties(self, properties: Mapping[str, str | int]) -> ArrangementState:
        """The state with the user's properties ``properties`` (already checked)."""
        return replace(self, properties=_frozen_properties(properties))

    def unsealed_append(self, batch: UnsealedBatchMeta) -> ArrangementState:
        """The state with ``batch`` after the unsealed batches; raises
        :class:`SeqNoMismatch` unless its seqnos start at :meth:`unsealed_seqno_upper` and
        :class:`TimeBeforeTraceUpper` for a time before the trace's upper."""
        upper = self.unsealed_seqno_upper()
        start, end = batch.seqnos
        if start != upper:
            raise SeqNoMismatch(f"batch seqnos {[start, end]} do not start at the seqno upper {upper}")
        tu = self.trace_ts_upper()
        if tu is None or batch.ts_lower < tu:
            raise TimeBeforeTraceUpper(f"batch holds time {batch.ts_lower} before the trace upper {tu}")
        return replace(self, unsealed=(*self.unsealed, batch))

    def unsealed_evict(self) -> tuple[ArrangementState, list[UnsealedBatchMeta]]:
        """The state without the unsealed batches whose every time is before the trace's
        upper, and those batches."""
        tu = self.trace_ts_upper()
        keep = tuple(b for b in self.unsealed if tu is not None and tu <= b.ts_upper)
        gone = [b for b in self.unsealed if not (tu is not None and tu <= b.ts_upper)]
        return (replace(self, unsealed=keep) if gone else self), gone

    def unsealed_replace(self, old: UnsealedBatchMeta, new: UnsealedBatchMeta) -> ArrangementState:
        """The state with unsealed batch ``old`` replaced by ``new`` (a trim: same seqnos);
        ``ValueError`` when ``old`` is not there."""
        i = self.unsealed.index(old)
        return replace(self, unsealed=(*self.unsealed[:i], new, *self.unsealed[i + 1:]))

    def handle_drain_response(self, res: DrainUnsealedRes) -> ArrangementState:
        """The state with the drained batch appended iff there is one and it starts at the
        trace's upper (a stale response gives the same state)."""
        b = res.drained
        if b is None or self.trace_ts_upper() != b.desc.lower:
            return self
        return replace(self, trace=(*self.trace, b))

    def handle_compact_response(self, res: CompactTraceRes) -> tuple[ArrangementState, list[TraceBatchMeta]]:
        """The state with the request's batches replaced by the merged one if they are still
        adjacent in the trace, and the replaced batches (newest first, as upstream); else the
        same state and ``[]``."""
        want = res.req.batches
        k = len(want)
        for i in range(len(self.trace) - k + 1):
            if tuple(self.trace[i:i + k]) == want:
                trace = (*self.trace[:i], res.merged, *self.trace[i + k:])
                return replace(self, trace=trace), list(reversed(want))
        return self, []


def encode_state(state: ArrangementState, *, schema=None, identity: dict | None = None) -> dict:
    """The document committed for ``state``: its schema (``schema`` when the state names
    none: the one a read took from a part), its metadata and, given, the store's identity
    section (``StoreIdentity.state_doc()``).

    >>> encode_state(ArrangementState().update_seal(2))["meta"]["seal"]
    2
    """
    schema = state.schema if state.schema is not None else schema
    doc = {"format": STATE_FORMAT, "schema": schema_to_json(schema), "meta": state.meta()}
    if identity is not None:
        doc["identity"] = dict(identity)
    return doc


def decode_state(seqno: int, doc, *, store_id: str | None = None, key: str | None = None) -> ArrangementState:
    """The state of a document loaded at ``seqno``, checked: a colmz arrangement's
    (``CorruptMeta``), of store ``store_id`` when given (``IdentityMismatch``; ``key`` is
    the consensus key, for the message), its metadata valid (``CorruptMeta``).

    >>> decode_state(3, encode_state(ArrangementState().update_seal(2))).seal
    2
    """
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT or "meta" not in doc:
        raise CorruptMeta(f"arrangement state at seqno {seqno} is not a colmz arrangement "
                          f"(format {doc.get('format') if isinstance(doc, dict) else doc!r})")
    from colmz.arrangement.identity import state_identity

    sid = state_identity(doc)
    if sid is not None and store_id is not None and sid != store_id:
        raise IdentityMismatch(f"arrangement state at seqno {seqno} (consensus key {key!r}) "
                               f"belongs to store {sid}, not to this store {store_id}")
    schema = schema_from_json(doc.get("schema"))
    seal, since, unsealed, trace = meta_from_dict(doc["meta"])
    validate_meta(seal, since, unsealed, trace)
    return ArrangementState(seal, since, unsealed, trace, schema, properties_from_dict(doc["meta"]))
