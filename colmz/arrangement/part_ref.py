"""What a read of a part verifies: :class:`PartRef` (a part's key and its :class:`PartCheck`).

Layer
-----
Part of the *parts* layer of ``colmz.arrangement`` (``docs/arrangement.md``, section
"Integrity of parts"): values and checks only, no blob store calls. Persist carries the same
with each part of a batch, a ``HollowBatchPart {key, encoded_size_bytes, stats}``
(``src/persist-client/src/internal/state.rs``).

Design
------
A state records, for each part it names, the part's row count, the int64 (wrapping) sum of
its diffs and the XXH64 digest of its bytes (:class:`PartCheck`); a :class:`PartRef` carries
that check with the key, from the state or a ``WrittenRun`` to whatever reads the part, in
any process -- a Spark executor's included -- so nothing is remembered between reads. A
read verifies the footer (:func:`check_footer`: the key the part was written under, its
row count), the digest of the whole part where it sees the whole part
(:class:`DigestCheck`, standing for the Parquet page CRC32s), else the page CRC32s of the
pages it reads (written where parts are read by ranges, :func:`writes_page_checksums`), and
the diff sum once its last rows are read (:func:`check_diffs`).

Invariant: a part whose bytes differ from what its state recorded is
:class:`~colmz.arrangement.errors.CorruptPart` wherever it is read; a part named without a
check (a bare key) is read with the checks that need no state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from colmz.arrangement.errors import CorruptPart
from colmz.kernels.digest import xxh64
from colmz.storage.base import Blob
from colmz.storage.local import LocalBlob

__all__ = [
    "PAGE_CHECKSUMS",
    "PART_DIGESTS",
    "PART_METADATA_KEY",
    "DigestCheck",
    "PartCheck",
    "PartRef",
    "add_wrapped",
    "check_diffs",
    "check_footer",
    "diff_sum",
    "has_page_checksums",
    "part_digest",
    "part_refs",
    "writes_page_checksums",
]

#: The Parquet key-value metadata entry describing a part.
PART_METADATA_KEY = b"colmz.arrangement"
#: Parquet page CRC32s are verified on read wherever a part has them
#: (``page_checksum_verification``) and no digest was checked instead; they are written
#: into parts on stores read by ranges (:func:`writes_page_checksums`), so a flipped bit in
#: a page is a :class:`CorruptPart`, never a different answer.
PAGE_CHECKSUMS = True
#: Parts are digested as they are written (:func:`part_digest`, recorded in their
#: :class:`PartCheck`); with this and :data:`PAGE_CHECKSUMS` off, writes and reads skip both
#: -- only to measure what integrity costs (``bench_arrangement.Checksums``).
PART_DIGESTS = True


class PartCheck(tuple):
    """What a state records of one part, checked whenever the part is read: its row count,
    the sum of its diffs (int64, wrapping) and -- for parts written since digests -- the
    XXH64 digest of its bytes (:func:`part_digest`): ``(rows, diff_sum)`` or
    ``(rows, diff_sum, digest)``.

    >>> PartCheck(3, 3), PartCheck(3, 3, -5).digest
    ((3, 3), -5)
    """

    __slots__ = ()

    def __new__(cls, rows: int, diff_sum: int, digest: int | None = None):
        values = (int(rows), int(diff_sum)) if digest is None else (int(rows), int(diff_sum), int(digest))
        return super().__new__(cls, values)

    def __getnewargs__(self) -> tuple[int, ...]:  # pickling (a check sent to another process)
        return tuple(self)

    @property
    def rows(self) -> int:
        return self[0]

    @property
    def diff_sum(self) -> int:
        return self[1]

    @property
    def digest(self) -> int | None:
        return self[2] if len(self) > 2 else None


def part_digest(data) -> int:
    """The digest a state records of a part: XXH64 (``kernels/digest.py``, seed 0) of its
    bytes -- any buffer -- as a signed int64.

    >>> part_digest(b"") == 0xEF46DB3751D8E999 - 2**64
    True
    """
    value = int(xxh64(np.frombuffer(data, np.uint8), np.uint64(0)))
    return value - (1 << 64) if value >= 1 << 63 else value


def writes_page_checksums(store: Blob) -> bool:
    """Whether parts written to ``store`` carry Parquet page CRC32s besides their digest.

    Every read path of a local part sees the whole file (memory-mapped), so it checks the
    digest, at about three times the CRC's speed (``kernels/digest.py``). Other stores are
    read by ranges in streaming merges (``colmz.arrangement.parts.iter_part`` on S3), where
    only the pages read can be checked: their parts keep page checksums too.
    """
    return type(store) is not LocalBlob  # the type: a fault wrapper reads as another store


class DigestCheck:
    """The digest of a whole part (``f``: memory-mapped or in memory, at its start) beside
    the one its state recorded (``expect``). ``done`` says whether there was one to check:
    it then stands for the pages' CRCs. :meth:`raise_if_wrong` comes after the footer's own
    checks (:func:`check_footer`), whose errors say more (a part substituted by another)."""

    def __init__(self, f, key: str, expect: PartCheck | None):
        self.key = key
        self.want = None if expect is None else expect.digest
        self.got = None
        if self.want is not None:
            self.got = part_digest(f.read_buffer())
            f.seek(0)

    @property
    def done(self) -> bool:
        return self.want is not None

    def raise_if_wrong(self) -> None:
        if self.got != self.want:
            raise CorruptPart(f"part {self.key!r} has digest {self.got % 2**64:016x}; its state "
                              f"recorded {self.want % 2**64:016x}")


def has_page_checksums(pf) -> bool:
    """Whether the part's own metadata says its pages carry CRC32s (a part whose metadata
    does not say: yes)."""
    raw = (pf.metadata.metadata or {}).get(PART_METADATA_KEY)
    try:
        return bool(json.loads(raw).get("page_checksums", True)) if raw else True
    except (ValueError, AttributeError):
        return True


def diff_sum(diff: np.ndarray) -> int:
    """The int64 sum of ``diff``, wrapping as int64 arithmetic does (a checksum, not a count).

    >>> diff_sum(np.array([2**62, 2**62], np.int64)) == -2**63
    True
    """
    with np.errstate(over="ignore"):
        return int(np.add.reduce(np.asarray(diff, np.int64), dtype=np.int64)) if len(diff) else 0


def add_wrapped(a: int, b: int) -> int:
    """``a + b`` as int64 arithmetic wraps it (diff sums are checksums)."""
    return (a + b + 2**63) % 2**64 - 2**63


class PartRef(tuple):
    """One part as a state or a :class:`~colmz.arrangement.runs.WrittenRun` names it: its
    ``key`` and what a read of it verifies, ``check`` (a :class:`PartCheck`, or None for a
    part named by a state from before checks were recorded). What persist carries in a
    ``HollowBatchPart`` (``src/persist-client/src/internal/state.rs``): every read path
    takes one, so a part is checked against its own record wherever it is read -- in any
    process, a Spark executor's included -- and nothing is remembered between reads.

    >>> r = PartRef("p/1.parquet", PartCheck(3, 3, -5))
    >>> r.key, r.check.rows, PartRef.of("p/2.parquet").check is None
    ('p/1.parquet', 3, True)
    """

    __slots__ = ()

    def __new__(cls, key: str, check: PartCheck | Sequence[int] | None = None):
        if not isinstance(key, str):
            raise TypeError(f"a part's key must be a str, got {type(key).__name__}")
        if check is not None and not isinstance(check, PartCheck):
            check = PartCheck(*check)
        return super().__new__(cls, (key, check))

    def __getnewargs__(self) -> tuple[str, PartCheck | None]:
        return (self[0], self[1])

    @property
    def key(self) -> str:
        return self[0]

    @property
    def check(self) -> PartCheck | None:
        return self[1]

    @classmethod
    def of(cls, part: PartRef | str) -> PartRef:
        """``part`` as a reference: a bare key is a part with no recorded check (read with
        the checks that need no state: Parquet page checksums, the key in its metadata)."""
        return part if isinstance(part, PartRef) else cls(part)


def part_refs(keys: Sequence[str], checks: Sequence[Sequence[int]] | None) -> tuple[PartRef, ...]:
    """The references of a run's parts: ``keys`` with their ``checks`` (one per key, or None
    when the run records none).

    >>> part_refs(["a", "b"], [(1, 1), (2, 0, 7)])[1].check.digest, part_refs(["a"], None)[0].check
    (7, None)
    """
    if checks is None:
        return tuple(PartRef(k) for k in keys)
    if len(checks) != len(keys):
        raise ValueError(f"{len(checks)} checks for {len(keys)} keys")
    return tuple(PartRef(k, c) for k, c in zip(keys, checks))


def check_footer(pf, key: str, expect: PartCheck | None) -> PartCheck | None:
    """Check the footer of ``pf``, the part under ``key``: its own metadata must name that key
    (a part whose metadata names none is not checked for it) and its row count must be the
    one ``expect`` recorded; raises :class:`CorruptPart`, else returns ``expect``."""
    md = pf.metadata
    raw = (md.metadata or {}).get(PART_METADATA_KEY)
    if raw:
        try:
            written_as = json.loads(raw).get("key")
        except (ValueError, AttributeError):
            raise CorruptPart(f"part {key!r} has unreadable {PART_METADATA_KEY.decode()} metadata") from None
        if written_as is not None and written_as != key:
            raise CorruptPart(f"part {key!r} holds the part written as {written_as!r}")
    if expect is not None and md.num_rows != expect.rows:
        raise CorruptPart(f"part {key!r} holds {md.num_rows} rows; its state recorded {expect.rows}")
    return expect


def check_diffs(expect: PartCheck | None, key: str, got: int) -> None:
    """Raise :class:`CorruptPart` when ``got``, the sum of the diffs read from the part under
    ``key``, is not the one ``expect`` recorded."""
    if expect is not None and got != expect.diff_sum:
        raise CorruptPart(f"part {key!r} has diffs summing to {got}; its state recorded {expect.diff_sum}")
