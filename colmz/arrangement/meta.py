"""The metadata of an arrangement: batch descriptions, their plain-dict form, and validation.

Layer
-----
The *state values* of ``colmz.arrangement`` (``docs/arrangement.md``): immutable records and
pure functions, touching no store. Follows ``ArrangementMeta`` and its batch metas in
``src/persist/src/indexed/arrangement.rs``.

Design
------
An arrangement's whole state is small metadata (which parts, which frontiers); the updates
live in Parquet parts in a blob store. This module holds the metadata's immutable records
(equal records are the same batch, which is how a stale drain or compaction response is
recognised) and converts them to and from the plain dict that is stored durably::

    {"seal": int | None, "since": int,
     "unsealed_batches": [{"seqnos": [start, end], "ts_lower": int, "ts_upper": int,
                           "keys": [str, ...], "len": int, "size_bytes": int,
                           "checks": [[rows, diff_sum, digest], ...]}, ...],
     "trace_batches": [{"desc": [lower, upper | None, since], "level": int,
                        "keys": [str, ...], "len": int, "size_bytes": int,
                        "checks": [[rows, diff_sum, digest], ...]}, ...],
     "properties": {str: str | int, ...}}

``properties`` is the user's own small metadata (e.g. the id of the last stream batch the
record holds), committed in the same compare-and-set as the batches and the seal, so a reader
sees both or neither. It is absent when empty, so a record written before properties existed
reads as having none (:func:`properties_from_dict`).

``checks`` holds, per key, what every read of that part verifies
(``colmz.arrangement.part_ref.PartCheck``): its row count, the int64 sum of its diffs and the
XXH64 digest of its bytes (as an int64; parts written before digests have the first two
only). It is optional: a state written before checks existed loads, and its parts are read
with the checks that need no state (Parquet page checksums, the key a part's own metadata
names).

``len`` (updates stored) and ``size_bytes`` (Parquet bytes) are optional when read: they are
bookkeeping for the compaction policies and the repr, not part of the logic that
``src/persist/src/indexed/encoding.rs`` validates. Times are ``int``; an upper or seal of
``None`` is the empty frontier (closed for good).

Invariants (:func:`validate_meta`, after ``ArrangementMeta::validate`` upstream)
--------------------------------------------------------------------------------
1. Unsealed seqno ranges are non-empty and increasing without overlap; each batch's
   ``ts_lower <= ts_upper``.
2. Trace batches are non-empty intervals, contiguous, the first starting at 0.
3. Trace levels are non-increasing from oldest to newest.
4. Every trace batch's upper is at or before the seal and its since at or before the
   arrangement's since.
5. No key appears twice among the trace batches, nor twice among the unsealed batches (a
   drain may hand an unsealed batch's parts to the trace, so one key may be in both).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colmz.arrangement.errors import CorruptMeta
from colmz.arrangement.part_ref import PartRef, part_refs
from colmz.frontier import MAX_TIME, Frontier, frontier_le, frontier_lt

__all__ = [
    "CompactTraceReq",
    "CompactTraceRes",
    "Description",
    "DrainUnsealedReq",
    "DrainUnsealedRes",
    "TraceBatchMeta",
    "UnsealedBatchMeta",
    "UnsealedSnapshot",
    "empty_meta",
    "check_properties",
    "meta_from_dict",
    "is_part_check",
    "meta_to_dict",
    "properties_from_dict",
    "validate_meta",
]


@dataclass(frozen=True)
class Description:
    """A trace batch's times: ``[lower, upper)``, with times before ``since`` advanced."""

    lower: int
    upper: Frontier
    since: int

    def to_list(self) -> list:
        return [self.lower, self.upper, self.since]


@dataclass(frozen=True)
class UnsealedBatchMeta:
    """An unsealed batch: its seqno range, the min and max time it was written with, its parts.

    ``ts_lower``/``ts_upper`` are inclusive bounds of the times written (as upstream records
    them from the raw batch); the parts hold the batch sorted by ``(data, time)`` and
    consolidated, possibly with fewer times.
    """

    seqnos: tuple[int, int]
    ts_lower: int
    ts_upper: int
    keys: tuple[str, ...]
    len: int | None = field(default=None, compare=True)
    size_bytes: int | None = None
    checks: tuple[tuple[int, ...], ...] | None = None

    def to_dict(self) -> dict:
        return _with_part_figures(self, {"seqnos": list(self.seqnos), "ts_lower": self.ts_lower,
                                         "ts_upper": self.ts_upper, "keys": list(self.keys)})

    @property
    def parts(self) -> tuple[PartRef, ...]:
        """The batch's parts, each with the check every read of it verifies."""
        return part_refs(self.keys, self.checks)


def _with_part_figures(batch, d: dict) -> dict:
    # the optional figures a batch of either kind records (absent in states written before
    # them, so absent from the dict when None)
    if batch.len is not None:
        d["len"] = batch.len
    if batch.size_bytes is not None:
        d["size_bytes"] = batch.size_bytes
    if batch.checks is not None:
        d["checks"] = [list(c) for c in batch.checks]
    return d


@dataclass(frozen=True)
class TraceBatchMeta:
    """A trace batch: its description, compaction level and parts (one sorted run)."""

    desc: Description
    level: int
    keys: tuple[str, ...]
    len: int | None = None
    size_bytes: int | None = None
    checks: tuple[tuple[int, ...], ...] | None = None

    def to_dict(self) -> dict:
        return _with_part_figures(self, {"desc": self.desc.to_list(), "level": self.level,
                                         "keys": list(self.keys)})

    @property
    def parts(self) -> tuple[PartRef, ...]:
        """The batch's parts, each with the check every read of it verifies."""
        return part_refs(self.keys, self.checks)


@dataclass(frozen=True)
class UnsealedSnapshot:
    """The unsealed batches that may hold times in ``[lower, upper)``; reading one applies
    the record-level filter ``lower <= t < upper``."""

    lower: int
    upper: Frontier
    batches: tuple[UnsealedBatchMeta, ...]


@dataclass(frozen=True)
class DrainUnsealedReq:
    """Move the unsealed updates of ``desc``'s interval into one new trace batch."""

    desc: Description
    snap: UnsealedSnapshot


@dataclass(frozen=True)
class DrainUnsealedRes:
    """The result of a drain: the new trace batch, or None when the interval held nothing."""

    req: DrainUnsealedReq
    drained: TraceBatchMeta | None


@dataclass(frozen=True)
class CompactTraceReq:
    """Merge the adjacent trace batches ``batches`` (oldest first) at ``since``."""

    batches: tuple[TraceBatchMeta, ...]
    since: int

    @property
    def b0(self) -> TraceBatchMeta:
        return self.batches[0]

    @property
    def b1(self) -> TraceBatchMeta:
        return self.batches[1]


@dataclass(frozen=True)
class CompactTraceRes:
    """The merged batch for ``req``."""

    req: CompactTraceReq
    merged: TraceBatchMeta


# ----------------------------------------------------------------------------- plain dicts


def empty_meta() -> dict:
    """The metadata of a new arrangement: seal 0, since 0, no batches.

    >>> empty_meta()
    {'seal': 0, 'since': 0, 'unsealed_batches': [], 'trace_batches': []}
    """
    return {"seal": 0, "since": 0, "unsealed_batches": [], "trace_batches": []}


def _int(value, where: str, *, frontier: bool = False):
    if frontier and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TIME:
        what = "an integer time or None" if frontier else "a non-negative integer"
        raise CorruptMeta(f"arrangement metadata {where} must be {what}, got {value!r}")
    return value


def _opt_int(d: dict, name: str, where: str):
    v = d.get(name)
    return None if v is None else _int(v, f"{where}.{name}")


def _keys(value, where: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(k, str) and k for k in value):
        raise CorruptMeta(f"arrangement metadata {where}.keys must be a list of strings, got {value!r}")
    return tuple(value)


def is_part_check(c) -> bool:
    """Whether ``c`` is one part's check as a state stores it: ``[rows, diff_sum]`` or
    ``[rows, diff_sum, digest]``, integers, ``rows`` not negative and the others int64.

    >>> is_part_check([3, -1, 2**63 - 1]), is_part_check([3, 1, 2**63]), is_part_check([3])
    (True, False, False)
    """
    return (isinstance(c, (list, tuple)) and len(c) in (2, 3)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in c)
            and c[0] >= 0 and all(-2**63 <= x < 2**63 for x in c[1:]))


def _checks(d: dict, keys: tuple[str, ...], where: str):
    raw = d.get("checks")
    if raw is None:
        return None
    ok = isinstance(raw, list) and len(raw) == len(keys) and all(
        isinstance(c, list) and is_part_check(c) for c in raw)
    if not ok:
        raise CorruptMeta(f"arrangement metadata {where}.checks must be one [rows, diff_sum] or "
                          f"[rows, diff_sum, digest] per key, got {raw!r:.200}")
    return tuple(tuple(c) for c in raw)


def _field(d, name: str, where: str):
    if not isinstance(d, dict):
        raise CorruptMeta(f"arrangement metadata {where} must be a dict, got {type(d).__name__}")
    if name not in d:
        raise CorruptMeta(f"arrangement metadata {where} has no {name!r} field")
    return d[name]


def meta_from_dict(meta: dict) -> tuple[Frontier, int, list[UnsealedBatchMeta], list[TraceBatchMeta]]:
    """Parse the plain-dict metadata into ``(seal, since, unsealed, trace)``.

    Checks the shape only (fields present, of the right types) and raises
    :class:`CorruptMeta` naming the field; the invariants are :func:`validate_meta`'s.

    >>> seal, since, unsealed, trace = meta_from_dict(empty_meta())
    >>> seal, since, unsealed, trace
    (0, 0, [], [])
    """
    seal = _int(_field(meta, "seal", "meta"), "seal", frontier=True)
    since = _int(_field(meta, "since", "meta"), "since")
    raw_unsealed = _field(meta, "unsealed_batches", "meta")
    raw_trace = _field(meta, "trace_batches", "meta")
    if not isinstance(raw_unsealed, list) or not isinstance(raw_trace, list):
        raise CorruptMeta("arrangement metadata unsealed_batches and trace_batches must be lists")
    unsealed = []
    for i, b in enumerate(raw_unsealed):
        where = f"unsealed_batches[{i}]"
        seqnos = _field(b, "seqnos", where)
        if not isinstance(seqnos, (list, tuple)) or len(seqnos) != 2:
            raise CorruptMeta(f"arrangement metadata {where}.seqnos must be [start, end], got {seqnos!r}")
        keys = _keys(_field(b, "keys", where), where)
        unsealed.append(UnsealedBatchMeta(
            (_int(seqnos[0], f"{where}.seqnos[0]"), _int(seqnos[1], f"{where}.seqnos[1]")),
            _int(_field(b, "ts_lower", where), f"{where}.ts_lower"),
            _int(_field(b, "ts_upper", where), f"{where}.ts_upper"),
            keys,
            _opt_int(b, "len", where),
            _opt_int(b, "size_bytes", where),
            _checks(b, keys, where),
        ))
    trace = []
    for i, b in enumerate(raw_trace):
        where = f"trace_batches[{i}]"
        desc = _field(b, "desc", where)
        keys = _keys(_field(b, "keys", where), where)
        if not isinstance(desc, (list, tuple)) or len(desc) != 3:
            raise CorruptMeta(f"arrangement metadata {where}.desc must be [lower, upper, since], got {desc!r}")
        trace.append(TraceBatchMeta(
            Description(
                _int(desc[0], f"{where}.desc[0]"),
                _int(desc[1], f"{where}.desc[1]", frontier=True),
                _int(desc[2], f"{where}.desc[2]"),
            ),
            _int(_field(b, "level", where), f"{where}.level"),
            keys,
            _opt_int(b, "len", where),
            _opt_int(b, "size_bytes", where),
            _checks(b, keys, where),
        ))
    return seal, since, unsealed, trace


def meta_to_dict(seal: Frontier, since: int, unsealed, trace, properties: dict | None = None) -> dict:
    """The plain-dict form of an arrangement's state (inverse of :func:`meta_from_dict` and
    :func:`properties_from_dict`); ``properties`` appear only when there are some."""
    d = {
        "seal": seal,
        "since": since,
        "unsealed_batches": [b.to_dict() for b in unsealed],
        "trace_batches": [b.to_dict() for b in trace],
    }
    if properties:
        d["properties"] = dict(sorted(properties.items()))
    return d


#: Bounds on one property: they are rewritten in full by every rollup of the record.
MAX_PROPERTY_KEY = 256
MAX_PROPERTY_STR = 4096
_INT64 = 2**63


def _check_property(key, value, what: str, *, allow_none: bool, error: type[Exception]) -> None:
    if not isinstance(key, str) or not key or len(key) > MAX_PROPERTY_KEY:
        raise error(f"{what} keys must be non-empty str of at most {MAX_PROPERTY_KEY} characters, got {key!r}")
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise error(f"{what}[{key!r}] must be a str or an int, got {value!r}")
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        raise error(f"{what}[{key!r}] must fit in 64 bits, got {value!r}")
    if isinstance(value, str) and len(value) > MAX_PROPERTY_STR:
        raise error(f"{what}[{key!r}] is a str of {len(value)} characters, more than {MAX_PROPERTY_STR}")


def check_properties(changes, current: dict) -> dict:
    """The properties after applying ``changes`` (a mapping; a value of None removes the key)
    to ``current``; raises ``TypeError`` naming the bad key or value, changing nothing.

    >>> check_properties({"batch": 3, "gone": None}, {"gone": "x", "kept": "y"})
    {'batch': 3, 'kept': 'y'}
    >>> check_properties({"batch": True}, {})
    Traceback (most recent call last):
    ...
    TypeError: properties['batch'] must be a str or an int, got True
    """
    if not isinstance(changes, dict):
        raise TypeError(f"properties must be a dict of str to str or int, got {changes!r}")
    for k, v in changes.items():
        _check_property(k, v, "properties", allow_none=True, error=TypeError)
    out = dict(current)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return dict(sorted(out.items()))


def properties_from_dict(meta: dict) -> dict:
    """The ``properties`` of plain-dict metadata (``{}`` when absent), shape-checked
    (:class:`CorruptMeta` naming the field).

    >>> properties_from_dict(empty_meta()), properties_from_dict({"properties": {"b": 1}})
    ({}, {'b': 1})
    """
    raw = meta.get("properties", {}) if isinstance(meta, dict) else None
    if not isinstance(raw, dict):
        raise CorruptMeta(f"arrangement metadata properties must be a dict, got {raw!r}")
    for k, v in raw.items():
        _check_property(k, v, "arrangement metadata properties", allow_none=False, error=CorruptMeta)
    return dict(raw)


def validate_meta(seal: Frontier, since: int, unsealed, trace) -> None:
    """Raise :class:`CorruptMeta` naming the first broken invariant (module docstring)."""
    prev = None
    keys: set[str] = set()
    for i, b in enumerate(unsealed):
        start, end = b.seqnos
        if end <= start:
            raise CorruptMeta(f"unsealed batch {i} has an empty seqno range {list(b.seqnos)}")
        if prev is not None and prev.seqnos[1] > start:
            raise CorruptMeta(
                f"unsealed batch {i}: seqnos {list(prev.seqnos)} followed by {list(b.seqnos)}"
            )
        if b.ts_lower > b.ts_upper:
            raise CorruptMeta(f"unsealed batch {i} has ts_lower {b.ts_lower} > ts_upper {b.ts_upper}")
        for k in b.keys:
            if k in keys:
                raise CorruptMeta(f"unsealed batch {i}: key {k!r} appears twice among unsealed batches")
            keys.add(k)
        prev = b
    keys = set()
    prev_t = None
    for i, b in enumerate(trace):
        d = b.desc
        if not frontier_lt(d.lower, d.upper):
            raise CorruptMeta(f"trace batch {i} has an empty or inverted interval {d.to_list()}")
        if prev_t is None:
            if d.lower != 0:
                raise CorruptMeta(f"trace batch 0 starts at {d.lower}, not 0")
        else:
            if prev_t.desc.upper != d.lower:
                raise CorruptMeta(
                    f"trace batch {i}: interval {prev_t.desc.to_list()} followed by {d.to_list()}"
                )
            if prev_t.level < b.level:
                raise CorruptMeta(f"trace batch {i}: level {prev_t.level} followed by {b.level}")
        if not frontier_le(d.upper, seal):
            raise CorruptMeta(f"trace batch {i} upper {d.upper} is beyond the seal {seal}")
        if d.since > since:
            raise CorruptMeta(f"trace batch {i} since {d.since} is beyond the arrangement's since {since}")
        for k in b.keys:
            if k in keys:
                raise CorruptMeta(f"trace batch {i}: key {k!r} appears twice among trace batches")
            keys.add(k)
        prev_t = b
