"""Runs written elsewhere: parts one process writes and another commits to an arrangement.

Layer
-----
Beside the *parts* layer of ``colmz.arrangement`` (``docs/arrangement.md``): it writes and
lists parts in the blob store, never the state; the handle commits the runs
(``Arrangement.append_runs``). Follows ``BatchBuilder`` in ``src/persist-client/src/batch.rs``.

Design
------
A Spark job computes an arrangement's new updates on many executors, but only one process --
the driver -- may commit them, or task retries and concurrent jobs could duplicate or
interleave output. The work splits in two:

1. **Write** (:func:`write_run`, on each executor): sort and consolidate a batch of updates
   and write it into the arrangement's blob store as parts under fresh keys -- the same
   Parquet parts :class:`colmz.Arrangement` writes itself -- and describe them as a
   :class:`WrittenRun`: the keys, the number of updates, the least and greatest time, the
   bytes. Nothing is visible: no consensus record names the parts yet.
2. **Commit** (``Arrangement.append_runs``, on the driver): each run becomes one unsealed
   batch, all of them in one compare-and-set. A task attempt that failed, or lost to a
   speculative copy, wrote parts that no committed run names: they are garbage, which
   ``Arrangement.gc`` collects after the lease (part keys carry their creation time).
3. **Discard** (:func:`discard_owned`, on the driver, when the job fails before it commits):
   delete the parts the job's tasks wrote. Every key carries the job's ``owner`` tag, so
   they are found by listing. A task of the failed job may still be running -- Spark
   abandons a failed job's other tasks without waiting for their Python workers -- and
   publish a part after the listing. So the discard first writes an *abort marker* for the
   owner, then lists and deletes; a writer checks for the marker after it published its
   parts and deletes them itself when it finds one. Either the listing sees a part, or the
   part was published after the marker was written and its writer sees the marker: no
   part of a discarded job outlives it, except one whose writer is killed between those
   two steps, which gc collects after the lease like any other unreferenced part
   (markers too: :func:`abort_marker_prefix`).

A run is a plain dict on the wire (:meth:`WrittenRun.to_dict`), so it travels back to the
driver as a row of a DataFrame.
"""

from __future__ import annotations

import re
import time as _time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from colmz.arrangement.meta import is_part_check
from colmz.arrangement.part_ref import PartRef, part_refs
from colmz.arrangement.part_writer import PartWriter
from colmz.arrangement.parts import (
    DEFAULT_PART_BYTES,
    DEFAULT_PART_ROWS,
    WRITE_COMPRESSION,
    make_key,
)
from colmz.ops import order_data
from colmz.order import ColumnSpec
from colmz.storage.base import Blob, check_key
from colmz.updates import Updates

__all__ = ["RunDiscarded", "WrittenRun", "abort_marker_prefix", "discard_owned", "owned_keys", "write_run"]

_OWNER = re.compile(r"^[0-9A-Za-z]+$")


class RunDiscarded(RuntimeError):
    """The job a :func:`write_run` writes for was discarded (:func:`discard_owned`) while it
    wrote; the parts it wrote are deleted again."""


@dataclass(frozen=True)
class WrittenRun:
    """Parts holding one sorted, consolidated run of updates, not yet committed anywhere.

    ``ts_lower``/``ts_upper`` are the least and greatest time of the updates (inclusive),
    ``len`` their number after consolidation, ``size_bytes`` the parts' Parquet bytes.
    """

    keys: tuple[str, ...]
    len: int
    ts_lower: int
    ts_upper: int
    size_bytes: int
    #: per key, what its writer recorded for reads to check (``[rows, diff_sum, digest]``,
    #: ``colmz.arrangement.part_ref.PartCheck``); None for a run described without them
    checks: tuple[tuple[int, ...], ...] | None = None

    @property
    def parts(self) -> tuple[PartRef, ...]:
        """The run's parts, each with the check its writer recorded for reads to verify."""
        return part_refs(self.keys, self.checks)

    def to_dict(self) -> dict:
        d = {"keys": list(self.keys), "len": self.len, "ts_lower": self.ts_lower,
             "ts_upper": self.ts_upper, "size_bytes": self.size_bytes}
        if self.checks is not None:
            d["checks"] = [list(c) for c in self.checks]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> WrittenRun:
        """The run a :meth:`to_dict` dict describes, checked field by field.

        >>> WrittenRun.from_dict({"keys": ["p/1.parquet"], "len": 2, "ts_lower": 0, "ts_upper": 3, "size_bytes": 9})
        WrittenRun(keys=('p/1.parquet',), len=2, ts_lower=0, ts_upper=3, size_bytes=9, checks=None)
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"a written run must be a mapping, got {type(d).__name__}")
        missing = [f for f in ("keys", "len", "ts_lower", "ts_upper", "size_bytes") if f not in d]
        if missing:
            raise ValueError(f"written run lacks field(s) {missing}: {dict(d)!r}")
        keys = d["keys"]
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys) or not keys:
            raise ValueError(f"written run field 'keys' must be a non-empty list of keys, got {keys!r}")
        for k in keys:
            check_key(k)
        ints = {}
        for f in ("len", "ts_lower", "ts_upper", "size_bytes"):
            v = d[f]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"written run field {f!r} must be a non-negative int, got {v!r}")
            ints[f] = v
        if ints["ts_lower"] > ints["ts_upper"] or ints["len"] < 1:
            raise ValueError(f"written run {dict(d)!r} has ts_lower > ts_upper or no updates")
        checks = d.get("checks")
        if checks is not None:
            if not (isinstance(checks, (list, tuple)) and len(checks) == len(keys)
                    and all(is_part_check(c) for c in checks)):
                raise ValueError(f"written run field 'checks' must be one [rows, diff_sum] or "
                                 f"[rows, diff_sum, digest] per key, got {checks!r}")
            checks = tuple(tuple(int(x) for x in c) for c in checks)
        return cls(tuple(keys), ints["len"], ints["ts_lower"], ints["ts_upper"], ints["size_bytes"], checks)


def write_run(
    store: Blob,
    schema: Sequence[ColumnSpec],
    updates: Updates,
    *,
    prefix: str = "arrangement/parts/",
    part_rows: int = DEFAULT_PART_ROWS,
    part_bytes: int = DEFAULT_PART_BYTES,
    compression: str = WRITE_COMPRESSION,
    clock: Callable[[], float] = _time.time,
    owner: str = "",
    seqno: int | None = None,
) -> WrittenRun | None:
    """Write ``updates`` (any order) as one run of parts under ``prefix``; None if they
    consolidate to nothing.

    ``prefix`` must be the arrangement's part prefix (``Arrangement.prefix``; for
    ``Arrangement.open(url, name=NAME)`` it is ``NAME/parts/``) so that its gc sees the parts.
    ``owner`` (letters and digits) is put into every key (:func:`owned_keys` finds them),
    so a job that fails before committing can delete exactly the parts it wrote.
    ``seqno``, when known, is the version of the arrangement's state the run is written
    against (``Arrangement.seqno`` as the writer read it): recorded in the keys
    (``colmz.arrangement.parts.make_key``), it lets a rolled-back consensus be told.

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> from colmz.storage import MemBlob
    >>> blob = MemBlob()
    >>> u = colmz.Updates({"k": [2, 1, 2]}, time=[5, 3, 5], diff=[1, 1, -1])
    >>> run = write_run(blob, u.schema, u)
    >>> run.len, run.ts_lower, run.ts_upper, len(run.keys)
    (1, 3, 3, 1)
    """
    schema = tuple(schema)
    if [s.name for s in schema] != updates.column_names:
        raise ValueError(f"updates have columns {updates.column_names}, the schema {[s.name for s in schema]}")
    source, rows = order_data(updates)
    if not len(source if rows is None else rows):
        return None
    if owner and not _OWNER.match(owner):
        raise ValueError(f"owner must be letters and digits, got {owner!r}")
    marker = abort_marker_key(prefix, owner) if owner else None
    if marker is not None and store.get(marker) is not None:
        raise RunDiscarded(f"the job {owner!r} was discarded before this run was written")
    t = source.time if rows is None else source.time[rows]
    tag = f"{owner}_" if owner else ""
    writer = PartWriter(
        store, schema, lambda: make_key(prefix, int(clock() * 1000), tag + uuid.uuid4().hex, seqno),
        {"kind": "run"}, part_rows=part_rows, part_bytes=part_bytes, compression=compression,
    )
    writer.write(source, rows)
    if marker is not None and store.get(marker) is not None:
        # Published after the job's discard listed its parts: this writer removes them.
        for k in writer.keys:
            store.delete(k)
        raise RunDiscarded(f"the job {owner!r} was discarded while this run was written; its parts are deleted")
    return WrittenRun(tuple(writer.keys), writer.rows, int(t.min()), int(t.max()), writer.size_bytes,
                      tuple(writer.checks))


def owned_keys(store: Blob, prefix: str, owner: str) -> list[str]:
    """The part keys under ``prefix`` that :func:`write_run` wrote for ``owner``.

    >>> import colmz
    >>> from colmz.storage import MemBlob
    >>> blob = MemBlob()
    >>> u = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    >>> run = write_run(blob, u.schema, u, owner="job7")
    >>> owned_keys(blob, "arrangement/parts/", "job7") == list(run.keys), owned_keys(blob, "arrangement/parts/", "job8")
    (True, [])
    """
    if not _OWNER.match(owner):
        raise ValueError(f"owner must be letters and digits, got {owner!r}")
    marker = f"-{owner}_"
    return [k for k in store.list_keys(prefix) if marker in k.rsplit("/", 1)[-1]]


def abort_marker_prefix(prefix: str) -> str:
    """Where :func:`discard_owned` puts its abort markers for the parts under ``prefix``:
    beside the parts, not among them, so listing the parts never lists a marker.

    >>> abort_marker_prefix("arrangement/parts/")
    'arrangement/parts.aborted/'
    """
    return f"{prefix.rstrip('/')}.aborted/"


def abort_marker_key(prefix: str, owner: str) -> str:
    """The key of ``owner``'s abort marker (its value: the epoch millisecond it was set)."""
    return abort_marker_prefix(prefix) + owner


def discard_owned(
    store: Blob,
    prefix: str,
    owner: str,
    referenced: frozenset[str] | set[str] = frozenset(),
    *,
    clock: Callable[[], float] = _time.time,
) -> list[str]:
    """Discard a job that will not commit: mark ``owner`` aborted, then delete every part
    :func:`write_run` wrote for it under ``prefix`` that is not in ``referenced`` (the keys
    committed state names). Returns the deleted keys.

    A :func:`write_run` for ``owner`` that is still running, or starts later, deletes its own
    parts and raises :class:`RunDiscarded` (module docstring). The marker stays until
    ``Arrangement.gc`` removes it after the lease.

    Examples
    --------
    >>> import colmz
    >>> from colmz.storage import MemBlob
    >>> blob = MemBlob()
    >>> u = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    >>> run = write_run(blob, u.schema, u, owner="job7")
    >>> discard_owned(blob, "arrangement/parts/", "job7") == list(run.keys)
    True
    >>> write_run(blob, u.schema, u, owner="job7")
    Traceback (most recent call last):
    ...
    colmz.arrangement.runs.RunDiscarded: the job 'job7' was discarded before this run was written
    >>> blob.list_keys("arrangement/parts/")
    []
    """
    if not _OWNER.match(owner):
        raise ValueError(f"owner must be letters and digits, got {owner!r}")
    store.set(abort_marker_key(prefix, owner), str(int(clock() * 1000)).encode())
    gone = []
    for k in owned_keys(store, prefix, owner):
        if k not in referenced:
            store.delete(k)
            gone.append(k)
    return gone
