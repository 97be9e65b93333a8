"""The two storage contracts colmz's durable structures are built on, and in-memory versions.

Design
------
Durable state is split as Materialize's persist splits it (``src/persist/src/location.rs``):

* **Blob** -- immutable values (Parquet parts) under keys. A key is written once, under a
  fresh name, and read many times; ``set`` is atomic (a reader sees all of a value or none of
  it) and durable when it returns. Blob has no notion of versions: nothing in it is visible to
  a reader of a structure until a consensus record names it.
* **Consensus** -- small versioned records under keys, changed only by compare-and-set on the
  version (``seqno``). The record is the structure's metadata: which parts, which frontiers.
  Of two writers that read version ``v`` and both try to write ``v + 1``, exactly one wins.

Storage knows nothing of updates: bytes under keys, and versioned bytes under keys.

Errors
------
Every storage failure is a :class:`StorageError`. It is :class:`Determinate` when the call
certainly did not take effect (safe to retry or to give up), and :class:`Indeterminate` when it
may have (a timeout after the request was sent): a caller that gets an indeterminate error on
a compare-and-set must re-read the record to learn whether its write landed, and must never
resolve it by writing the same change twice.

Invariants (every implementation; ``tests/colmz/storage`` checks them against each backend)
--------------------------------------------------------------------------------------------
1. ``Blob.get`` after a successful ``Blob.set(k, v)`` returns ``v`` until ``delete(k)``.
2. ``Blob.delete`` of a missing key is a no-op; ``Blob.get`` of a missing key is ``None``.
3. ``Consensus.compare_and_set(key, expected, new)`` succeeds iff the head's seqno equals
   ``expected`` (``None``: no record yet) and ``new.seqno > expected``; it then becomes the
   head. Otherwise nothing changes and it returns ``False``.
4. ``Consensus.scan(key, from_seqno)`` returns the versions with ``seqno >= from_seqno`` in
   increasing order; ``truncate(key, seqno)`` removes those below ``seqno`` and never the head.
5. ``Consensus.compare_and_set_many(ops)`` -- ``(key, expected, new)`` triples of distinct
   keys -- is their compare-and-sets as one atomic step: when every head's seqno is its
   ``expected`` all of them become heads and it returns True; otherwise nothing changes
   and it returns False. No reader sees some of them landed and others not, and an
   indeterminate failure leaves all of them landed or none (one head read tells which).
   Backends do it in one transaction (SQLite, PostgreSQL: one commit, one flush of the log
   for all of them), so a caller moving several records together -- a durable catalog
   applying one intent to each of its arrangements -- waits for the disk once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "MAX_SEQNO",
    "Blob",
    "Consensus",
    "Determinate",
    "Indeterminate",
    "MemBlob",
    "MemConsensus",
    "StorageError",
    "VersionedData",
    "check_cas_args",
    "check_cas_many",
    "check_key",
    "open_input",
    "set_if_absent",
]


class StorageError(RuntimeError):
    """A storage call failed."""


class Determinate(StorageError):
    """A storage call failed and certainly did not take effect."""


class Indeterminate(StorageError):
    """A storage call failed and may or may not have taken effect (e.g. a timeout)."""


@dataclass(frozen=True)
class VersionedData:
    """One version of a consensus record: its ``seqno`` and its bytes."""

    seqno: int
    data: bytes


def open_input(blob: Blob, key: str):
    """A random-access ``pyarrow`` file for reading ``key``, or None when it is missing.

    Backends that can read ranges (a local file, S3) say so with an ``open_input`` method;
    for the others the whole value is read and wrapped.

    >>> b = MemBlob(); b.set("k", b"abc")
    >>> open_input(b, "k").read(), open_input(b, "nope")
    (b'abc', None)
    """
    opener = getattr(blob, "open_input", None)
    if opener is not None:
        return opener(key)
    import pyarrow as pa

    data = blob.get(key)
    return None if data is None else pa.BufferReader(data)


def set_if_absent(blob: Blob, key: str, value: bytes) -> bool:
    """Write ``value`` under ``key`` unless it has a value already; whether it wrote.

    For a key that must be written once only -- an arrangement's identity. Backends that
    can refuse an existing name atomically (local files, memory) say so with a
    ``set_if_absent`` method, and of two concurrent calls exactly one writes. Others (S3
    through pyarrow offers no conditional put) read first and write when nothing is there:
    two calls within one request's latency of each other can both write, and the caller
    must read the key back after it has committed what depends on it.

    >>> b = MemBlob()
    >>> set_if_absent(b, "id", b"a"), set_if_absent(b, "id", b"b"), b.get("id")
    (True, False, b'a')
    """
    own = getattr(blob, "set_if_absent", None)
    if own is not None:
        return bool(own(key, value))
    if blob.get(key) is not None:
        return False
    blob.set(key, value)
    return True


def check_key(key: str) -> str:
    """Validate a blob or consensus key: relative, ``/``-separated, no ``.``/``..`` segments.

    Keys name things inside a store; one that could lead outside it (``../x``, ``/abs``,
    ``a\\b``) is refused with ``ValueError`` naming it.

    >>> check_key("parts/0001.parquet")
    'parts/0001.parquet'
    >>> check_key("../x")
    Traceback (most recent call last):
    ...
    ValueError: storage key '../x' has a '..' segment; keys must stay inside the store
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"storage key {key!r} must be a non-empty string")
    if key.startswith("/") or "\\" in key or "\x00" in key or ":" in key.split("/", 1)[0]:
        raise ValueError(f"storage key {key!r} is absolute or has a forbidden character")
    for seg in key.split("/"):
        if seg in ("..",):
            raise ValueError(f"storage key {key!r} has a '..' segment; keys must stay inside the store")
        if seg in ("", "."):
            raise ValueError(f"storage key {key!r} has an empty or '.' segment")
    return key


#: Largest seqno every backend can store (SQLite and PostgreSQL keep it as a signed 64-bit int).
MAX_SEQNO = 2**63 - 1


def check_cas_args(expected: int | None, new: VersionedData) -> None:
    """Validate the arguments of ``compare_and_set`` (shared by every backend).

    ``expected`` is None or an int in ``[0, MAX_SEQNO]``; ``new.seqno`` is an int in
    ``[0, MAX_SEQNO]`` greater than ``expected``; ``new.data`` is bytes-like. A bool is not
    a seqno. Raises ``TypeError``/``ValueError`` naming the argument and the value.

    >>> check_cas_args(None, VersionedData(1, b""))
    >>> check_cas_args(3, VersionedData(3, b""))
    Traceback (most recent call last):
    ...
    ValueError: new seqno 3 must be greater than expected 3
    """
    for name, value in (("expected", expected), ("new.seqno", new.seqno)):
        if value is None and name == "expected":
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if not 0 <= value <= MAX_SEQNO:
            raise ValueError(f"{name} {value} is outside [0, 2**63-1]")
    if expected is not None and new.seqno <= expected:
        raise ValueError(f"new seqno {new.seqno} must be greater than expected {expected}")
    if not isinstance(new.data, (bytes, bytearray, memoryview)):
        raise TypeError(f"new.data must be bytes, got {type(new.data).__name__}")


def check_cas_many(ops) -> list[tuple[str, int | None, VersionedData]]:
    """Validate the operations of ``compare_and_set_many`` (shared by every backend): each
    a ``(key, expected, new)`` triple as :func:`check_key` and :func:`check_cas_args` take
    them, no key twice. Raises ``TypeError``/``ValueError`` naming the operation; returns
    them as a list.

    >>> check_cas_many([("a", None, VersionedData(1, b""))])
    [('a', None, VersionedData(seqno=1, data=b''))]
    >>> check_cas_many([("a", None, VersionedData(1, b"")), ("a", 1, VersionedData(2, b""))])
    Traceback (most recent call last):
    ...
    ValueError: compare_and_set_many names key 'a' twice (operation 1); each key at most once
    """
    out = []
    seen = set()
    for i, op in enumerate(ops):
        if not isinstance(op, tuple) or len(op) != 3:
            raise TypeError(f"compare_and_set_many operation {i} must be a (key, expected, new) tuple, got {op!r:.80}")
        key, expected, new = op
        check_key(key)
        if not isinstance(new, VersionedData):
            raise TypeError(f"compare_and_set_many operation {i}: new must be a VersionedData, got {type(new).__name__}")
        check_cas_args(expected, new)
        if key in seen:
            raise ValueError(f"compare_and_set_many names key {key!r} twice (operation {i}); each key at most once")
        seen.add(key)
        out.append((key, expected, new))
    return out


@runtime_checkable
class Blob(Protocol):
    """Immutable byte values under keys (see the module docstring for the contract)."""

    def get(self, key: str) -> bytes | None:
        """The value under ``key``, or None."""

    def set(self, key: str, value: bytes | memoryview) -> None:
        """Store ``value`` under ``key`` atomically and durably."""

    def delete(self, key: str) -> None:
        """Remove ``key`` (no-op when missing)."""

    def list_keys(self, prefix: str = "") -> list[str]:
        """Every key starting with ``prefix``, sorted."""

    def url_of(self, key: str) -> str:
        """Where an outside reader (pyarrow.dataset, DuckDB, Spark) finds ``key``."""


@runtime_checkable
class Consensus(Protocol):
    """Versioned records changed by compare-and-set (see the module docstring)."""

    def head(self, key: str) -> VersionedData | None:
        """The newest version of ``key``, or None."""

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        """Make ``new`` the head iff the head's seqno is ``expected``; whether it did."""

    def compare_and_set_many(self, ops) -> bool:
        """``(key, expected, new)`` compare-and-sets of distinct keys, all or none (module
        docstring, invariant 5); whether they landed."""

    def scan(self, key: str, from_seqno: int = 0, limit: int | None = None) -> list[VersionedData]:
        """Versions with ``seqno >= from_seqno``, oldest first."""

    def truncate(self, key: str, seqno: int) -> int:
        """Remove versions below ``seqno`` (never the head); how many were removed."""


class MemBlob:
    """A Blob in process memory (tests, notebooks, ``mem://`` URLs).

    >>> b = MemBlob()
    >>> b.set("a/1", b"xy"); b.get("a/1"), b.get("nope"), b.list_keys("a/")
    (b'xy', None, ['a/1'])
    """

    def __init__(self, name: str = "mem") -> None:
        self.name = name
        self._values: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            return self._values.get(check_key(key))

    def set(self, key: str, value: bytes | memoryview) -> None:
        data = bytes(value)
        with self._lock:
            self._values[check_key(key)] = data

    def set_if_absent(self, key: str, value: bytes | memoryview) -> bool:
        data = bytes(value)
        with self._lock:
            if check_key(key) in self._values:
                return False
            self._values[key] = data
            return True

    def delete(self, key: str) -> None:
        with self._lock:
            self._values.pop(check_key(key), None)

    def list_keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for k in self._values if k.startswith(prefix))

    def url_of(self, key: str) -> str:
        return f"mem://{self.name}/{check_key(key)}"

    def __repr__(self) -> str:
        return f"MemBlob({self.name!r}, {len(self._values)} keys)"


class MemConsensus:
    """A Consensus in process memory.

    >>> c = MemConsensus()
    >>> c.compare_and_set("s", None, VersionedData(1, b"a"))
    True
    >>> c.compare_and_set("s", None, VersionedData(1, b"b"))
    False
    >>> c.head("s")
    VersionedData(seqno=1, data=b'a')
    """

    def __init__(self) -> None:
        self._records: dict[str, list[VersionedData]] = {}
        self._lock = threading.Lock()

    def head(self, key: str) -> VersionedData | None:
        with self._lock:
            versions = self._records.get(check_key(key))
            return versions[-1] if versions else None

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        check_key(key)
        check_cas_args(expected, new)
        with self._lock:
            versions = self._records.setdefault(key, [])
            current = versions[-1].seqno if versions else None
            if current != expected:
                return False
            versions.append(VersionedData(int(new.seqno), bytes(new.data)))
            return True

    def compare_and_set_many(self, ops) -> bool:
        """All of ``ops`` or none (module docstring, invariant 5).

        >>> c = MemConsensus()
        >>> c.compare_and_set_many([("a", None, VersionedData(1, b"x")), ("b", None, VersionedData(1, b"y"))])
        True
        >>> c.compare_and_set_many([("a", 1, VersionedData(2, b"x")), ("b", 7, VersionedData(8, b"y"))])
        False
        >>> c.head("a").seqno, c.head("b").seqno
        (1, 1)
        """
        ops = check_cas_many(ops)
        with self._lock:
            for key, expected, _ in ops:
                versions = self._records.get(key)
                if (versions[-1].seqno if versions else None) != expected:
                    return False
            for key, _, new in ops:
                self._records.setdefault(key, []).append(VersionedData(int(new.seqno), bytes(new.data)))
            return True

    def scan(self, key: str, from_seqno: int = 0, limit: int | None = None) -> list[VersionedData]:
        with self._lock:
            out = [v for v in self._records.get(check_key(key), ()) if v.seqno >= from_seqno]
        return out if limit is None else out[:limit]

    def truncate(self, key: str, seqno: int) -> int:
        with self._lock:
            versions = self._records.get(check_key(key), [])
            keep = [v for v in versions if v.seqno >= seqno or v is versions[-1]]
            removed = len(versions) - len(keep)
            self._records[key] = keep
            return removed

    def keys(self) -> Iterable[str]:
        with self._lock:
            return sorted(self._records)
