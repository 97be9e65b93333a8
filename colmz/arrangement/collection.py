"""``ArrangementCollection``: a durable arrangement as a collection (:mod:`colmz.collection`).

Layer
-----
The *collection* layer of ``colmz.arrangement`` (``docs/arrangement.md``): an adapter above
the handle (:mod:`colmz.arrangement.handle`) that the durable :class:`colmz.Catalog` and the
continual tasks use -- ``snapshot(as_of)`` (and ``read_unmerged``), ``updates(lower, upper)``,
``counts(rows, as_of)`` (a point lookup),
``compare_and_append(updates, expected_upper, new_upper)``, ``advance_since``,
``maintain``. It touches the arrangement only through the handle's public calls, and
commits only through one of them (``Arrangement.append_runs`` with ``expect=``), so it
writes no compare-and-set loop of its own: a lost compare-and-set is the machine's
(``colmz.arrangement.machine``). Upstream, this is the role of persist-client's
``WriteHandle::compare_and_append`` and ``ReadHandle::snapshot`` as the storage controller
uses them (``src/persist-client/src/write.rs``, ``read.rs``).

Invariants
----------
1. ``compare_and_append`` lands its updates and moves the upper in one commit, only right
   after ``expected_upper``; when it raises, nothing was committed and the run it wrote was
   deleted (unless the outcome is unknown: ``Indeterminate``).
2. A read either returns the collection at the times asked for, or raises
   :class:`CompactedAway` when another handle compacted them away.
"""

from __future__ import annotations

import contextlib

import numpy as np

from colmz.arrangement.errors import ArrangementError, InvalidAsOf, MissingPart, SealMismatch
from colmz.arrangement.fetched import FetchedRuns
from colmz.collection import UpperMismatch
from colmz.frontier import Frontier, check_frontier
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.storage.base import Determinate
from colmz.updates import Updates

__all__ = ["ArrangementCollection", "CompactedAway"]


class CompactedAway(RuntimeError):
    """A read of a durable object hit data another handle compacted away (a part deleted,
    or the since advanced past the time read): refresh and read again."""


class ArrangementCollection:
    """The collection protocol (:class:`colmz.collection.Collection`) over a durable ``colmz.Arrangement``.

    Each :meth:`compare_and_append` is one commit through the arrangement's own durable
    call, ``Arrangement.append_runs(runs, seal=new_upper, expect=expected_upper)``: the
    updates become one run of fresh parts and the seal moves in the same compare-and-set,
    so a crash never leaves a half-written time, and the append lands only right after
    ``expected_upper``. A compare-and-set lost to another writer of the arrangement (an
    applier of the same catalog intent, a compaction) is retried by the arrangement's
    machine (``colmz.arrangement.machine``), not here; a seal found elsewhere is
    :class:`~colmz.collection.UpperMismatch`.
    Reads that hit a part another handle compacted away refresh and read again; when the
    times asked for are gone (the since passed them) they raise :class:`CompactedAway`.
    """

    def __init__(self, arrangement):
        self.arrangement = arrangement
        self.stats = {"updates_read": 0, "reads": 0, "refreshes": 0}

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        return tuple(self.arrangement.schema or ())

    @property
    def since(self) -> int:
        return self.arrangement.since()

    @property
    def upper(self) -> Frontier:
        return self.arrangement.get_seal()

    def refresh(self) -> None:
        """Reload the arrangement's committed state."""
        self.stats["refreshes"] += 1
        self.arrangement.refresh()

    def compare_and_append(self, updates: Updates, expected_upper: Frontier, new_upper: Frontier) -> None:
        from colmz.arrangement.runs import write_run

        new_upper = check_frontier(new_upper, "new_upper")
        arr = self.arrangement
        if len(updates):
            lo, hi = int(updates.time.min()), int(updates.time.max())
            if expected_upper is None or lo < expected_upper or (new_upper is not None and hi >= new_upper):
                raise ValueError(f"updates have times in [{lo}, {hi}], outside [{expected_upper}, {new_upper})")
            updates = consolidate(updates)
        if expected_upper != arr.get_seal():
            self.refresh()  # this handle may be behind: read the committed seal
            if expected_upper != arr.get_seal():
                raise UpperMismatch(expected_upper, arr.get_seal())
        arr.validate_seal(new_upper)
        run = (write_run(arr.store, arr.schema, updates, prefix=arr.prefix, seqno=arr.seqno)
               if len(updates) else None)
        try:
            arr.append_runs([run] if run is not None else [], seal=new_upper, expect=expected_upper)
        except SealMismatch:
            # another writer moved the seal (found after a lost compare-and-set)
            self._discard(run)
            raise UpperMismatch(expected_upper, arr.get_seal()) from None
        except (Determinate, ArrangementError, ValueError, TypeError):
            self._discard(run)
            raise

    def _discard(self, run) -> None:
        if run is None:
            return
        for k in run.keys:
            with contextlib.suppress(Exception):  # best effort; the arrangement's gc takes the rest
                self.arrangement.store.delete(k)

    def _read(self, read, as_of_or_lower: int):
        for _ in range(2):
            try:
                return read()
            except (MissingPart, InvalidAsOf, _Compacted) as e:
                before = self.arrangement.seqno
                self.refresh()
                if as_of_or_lower < self.arrangement.since() or self.arrangement.seqno == before:
                    raise CompactedAway(
                        f"arrangement with parts under {self.arrangement.prefix!r}: "
                        f"another handle compacted the data read ({e}); refresh the catalog "
                        "(cat.refresh()) and read again"
                    ) from e
        return read()

    def snapshot(self, as_of: int) -> Updates:
        return self._as_of(self.arrangement.read, as_of)

    def read_unmerged(self, as_of: int) -> FetchedRuns:
        """:meth:`snapshot`'s runs fetched and not merged (``Arrangement.read_unmerged``):
        ``.merge()`` is the snapshot, ``.rows()`` its rows, without a merge when no or few
        retractions were read."""
        return self._as_of(self.arrangement.read_unmerged, as_of)

    def _as_of(self, read_as_of, as_of: int):
        def read():
            out = read_as_of(as_of)
            # Arrangement.read refreshes once on a missing part; past a since that moved
            # beyond as_of it would hold later changes too.
            if as_of < self.arrangement.since():
                raise _Compacted(f"the since moved to {self.arrangement.since()}, past as_of {as_of}")
            return out

        out = self._read(read, as_of)
        self.stats["updates_read"] += len(out)
        self.stats["reads"] += 1
        return out

    def counts(self, rows: Updates, as_of: int) -> np.ndarray:
        """How often each row of ``rows`` occurs in the contents as of ``as_of``, reading
        only the row groups that may hold them (``Arrangement.counts``): what a reopened
        table's retraction check asks of the contents it has not loaded
        (``MemoryCollection(base_counts=...)``). Raises :class:`CompactedAway` as a read does."""
        def read():
            out = self.arrangement.counts(rows, as_of)
            if as_of < self.arrangement.since():
                raise _Compacted(f"the since moved to {self.arrangement.since()}, past as_of {as_of}")
            return out

        return self._read(read, as_of)

    def forget_lookups(self) -> None:
        """Drop what :meth:`counts` kept indexed (``Arrangement.forget_lookups``)."""
        self.arrangement.forget_lookups()

    def updates(self, lower: int, upper: Frontier) -> Updates:
        return self._read(lambda: self._updates(lower, upper), lower)

    def _updates(self, lower: int, upper: Frontier) -> Updates:
        from colmz.arrangement.parts import read_part

        arr = self.arrangement
        schema = self.schema
        parts = []
        for b in arr.trace_batches:
            if b.desc.upper is not None and b.desc.upper <= lower:
                continue
            if upper is not None and b.desc.lower >= upper:
                continue
            if b.desc.since > lower:
                raise _Compacted(f"changes before {b.desc.since} were compacted: cannot read from {lower}")
            parts += [read_part(arr.store, k, schema) for k in b.parts]
        tu = arr.trace_ts_upper()
        if tu is not None:
            lo = max(lower, tu)
            if upper is None or lo < upper:
                parts.append(arr.fetch_unsealed(arr.unsealed_snapshot(lo, upper)))
        parts = [p for p in parts if len(p)]
        self.stats["reads"] += 1
        if not parts:
            return Updates.empty(schema)
        u = concat(parts)
        t = u.time
        keep = (t >= lower) if upper is None else ((t >= lower) & (t < upper))
        idx = np.flatnonzero(keep)
        self.stats["updates_read"] += len(u)
        return consolidate(u.take(idx))

    def advance_since(self, since: int) -> None:
        self.arrangement.advance_since(since)

    def maintain(self, since: int) -> None:
        """Advance the since to ``since`` (when behind, and before the upper) and run the
        arrangement's maintenance: drain sealed updates into the trace and compact."""
        arr = self.arrangement
        if since > arr.since() and (arr.get_seal() is None or since < arr.get_seal()):
            arr.advance_since(since)
        arr.maintain()


class _Compacted(ValueError):
    """A read asked for changes before a trace batch's since (compacted away)."""
