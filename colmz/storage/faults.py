"""Fault injection: Blob and Consensus wrappers that fail the N-th call, before or after it.

Design
------
Persist tested its arrangement through ``Unreliable`` blob and log wrappers
(``src/persist/src/unreliable.rs``) that fail calls at random. These wrappers fail calls
*deterministically*, so a test can cover every failure point of a workload instead of a
random sample:

1. run the workload once with a :class:`FaultPlan` that fails nothing; ``plan.calls`` is then
   the number of storage calls it made (``plan.log`` lists them);
2. re-run it from scratch for every ``n`` in ``1..plan.calls`` with ``FaultPlan(fail_at=n)``,
   in each mode.

The modes are the two ways a storage call can go wrong:

* ``"before"``: the call is not applied and raises :class:`~colmz.storage.base.Determinate`
  (a refused or failed request);
* ``"after"``: the call *is* applied, then raises :class:`~colmz.storage.base.Indeterminate`
  (a request that landed but whose reply timed out). A caller that gets this from a
  compare-and-set must re-read to learn the outcome; writing the change again would apply
  it twice.

One plan may be shared by a FaultyBlob and a FaultyConsensus so that calls are counted across
both, in the order the workload makes them. Every I/O method counts (blob: ``get``, ``set``,
``delete``, ``list_keys``; consensus: ``head``, ``compare_and_set``, ``compare_and_set_many`` -- one call, all of its
keys or none --, ``scan``, ``truncate``);
``url_of``/``path_of`` only compute names and do not. Other attributes pass through to the
wrapped object.

Invariants
----------
1. With ``fail_at=None`` the wrappers behave exactly as the wrapped objects.
2. Calls ``fail_at .. fail_at + count - 1`` fail, each exactly once per plan; a "before"
   failure leaves the wrapped store untouched, an "after" failure leaves it as the call left it.
3. ``plan.calls`` counts every I/O call, failed or not; ``plan.injected`` lists the failures.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from colmz.storage.base import (
    Blob,
    Consensus,
    Determinate,
    Indeterminate,
    VersionedData,
    open_input,
)

__all__ = ["FaultPlan", "FaultyBlob", "FaultyConsensus", "InjectedDeterminate", "InjectedIndeterminate"]

MODES = ("before", "after")


class InjectedDeterminate(Determinate):
    """A failure injected before the call was applied."""


class InjectedIndeterminate(Indeterminate):
    """A failure injected after the call was applied ("applied but reported a timeout")."""


@dataclass
class FaultPlan:
    """Which calls fail, and the count of calls so far (shared by the wrappers using it).

    Parameters
    ----------
    fail_at : int or None
        1-based index of the first call to fail; None fails nothing.
    mode : {"before", "after"}
        Fail before applying the call (Determinate) or after it (Indeterminate).
    count : int
        How many consecutive calls fail, starting at ``fail_at`` (an outage).

    Examples
    --------
    >>> from colmz.storage import MemBlob
    >>> plan = FaultPlan(fail_at=2, mode="after")
    >>> blob = FaultyBlob(MemBlob(), plan)
    >>> blob.set("a", b"1")
    >>> blob.set("b", b"2")
    Traceback (most recent call last):
    ...
    colmz.storage.faults.InjectedIndeterminate: injected fault: call 2 (blob.set 'b') was applied but reported a timeout
    >>> blob.get("b"), plan.calls, plan.log
    (b'2', 3, [(1, 'blob.set', 'a'), (2, 'blob.set', 'b'), (3, 'blob.get', 'b')])
    """

    fail_at: int | None = None
    mode: str = "before"
    count: int = 1
    calls: int = 0
    log: list[tuple[int, str, str]] = field(default_factory=list)
    injected: list[tuple[int, str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"fault mode must be one of {MODES}, got {self.mode!r}")
        if self.fail_at is not None and (
            not isinstance(self.fail_at, int) or isinstance(self.fail_at, bool) or self.fail_at < 1
        ):
            raise ValueError(f"fail_at must be None or an int >= 1, got {self.fail_at!r}")
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 1:
            raise ValueError(f"count must be an int >= 1, got {self.count!r}")
        self._lock = threading.Lock()

    def next_call(self, what: str, key: str) -> tuple[int, bool]:
        """Count one call: its number and whether it is to fail."""
        with self._lock:
            self.calls += 1
            n = self.calls
            self.log.append((n, what, key))
            fail = self.fail_at is not None and self.fail_at <= n < self.fail_at + self.count
            if fail:
                self.injected.append((n, what, key, self.mode))
            return n, fail

    def call(self, what: str, key: str, fn, *args: Any) -> Any:
        """Run ``fn(*args)`` as call number ``calls + 1``, failing it if planned."""
        n, fail = self.next_call(what, key)
        if not fail:
            return fn(*args)
        if self.mode == "before":
            raise InjectedDeterminate(f"injected fault: call {n} ({what} {key!r}) failed before it was applied")
        fn(*args)
        raise InjectedIndeterminate(
            f"injected fault: call {n} ({what} {key!r}) was applied but reported a timeout"
        )


class FaultyBlob:
    """``blob`` with the failures of ``plan`` (see the module docstring)."""

    def __init__(self, blob: Blob, plan: FaultPlan) -> None:
        self.inner = blob
        self.plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"FaultyBlob({self.inner!r}, fail_at={self.plan.fail_at}, mode={self.plan.mode!r})"

    def get(self, key: str) -> bytes | None:
        return self.plan.call("blob.get", key, self.inner.get, key)

    def open_input(self, key: str):
        return self.plan.call("blob.open_input", key, open_input, self.inner, key)

    def set(self, key: str, value: bytes | memoryview) -> None:
        return self.plan.call("blob.set", key, self.inner.set, key, value)

    def delete(self, key: str) -> None:
        return self.plan.call("blob.delete", key, self.inner.delete, key)

    def list_keys(self, prefix: str = "") -> list[str]:
        return self.plan.call("blob.list_keys", prefix, self.inner.list_keys, prefix)

    def url_of(self, key: str) -> str:
        return self.inner.url_of(key)


class FaultyConsensus:
    """``consensus`` with the failures of ``plan`` (see the module docstring)."""

    def __init__(self, consensus: Consensus, plan: FaultPlan) -> None:
        self.inner = consensus
        self.plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"FaultyConsensus({self.inner!r}, fail_at={self.plan.fail_at}, mode={self.plan.mode!r})"

    def head(self, key: str) -> VersionedData | None:
        return self.plan.call("consensus.head", key, self.inner.head, key)

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        return self.plan.call(
            "consensus.compare_and_set", key, self.inner.compare_and_set, key, expected, new
        )

    def compare_and_set_many(self, ops) -> bool:
        ops = list(ops)
        keys = ",".join(str(op[0]) for op in ops if isinstance(op, tuple) and op)
        return self.plan.call("consensus.compare_and_set_many", keys, self.inner.compare_and_set_many, ops)

    def scan(self, key: str, from_seqno: int = 0, limit: int | None = None) -> list[VersionedData]:
        return self.plan.call("consensus.scan", key, self.inner.scan, key, from_seqno, limit)

    def truncate(self, key: str, seqno: int) -> int:
        return self.plan.call("consensus.truncate", key, self.inner.truncate, key, seqno)
