"""The read side of :class:`colmz.arrangement.Arrangement`, after persist-client's
``ReadHandle`` (``src/persist-client/src/read.rs``): ``read``, ``read_unmerged``, ``counts``,
``parts``.

Design
------
A read plans the runs of the state the handle holds -- the trace batches, then the unsealed
updates at or beyond the trace's upper -- and merges them with times advanced to the since
(or to ``as_of``) (:mod:`colmz.arrangement.read`, :mod:`colmz.arrangement.fetched`). Every
part read verifies the checks the state records (``colmz.arrangement.parts``); a part found
missing reloads the state once and retries (a concurrent compaction replaced it).

A point lookup (:meth:`ReadHandle.counts`: how often each of a few rows occurs as of a
time) reads no run whole: every part is sorted by its data, its first column's min/max
statistics kept per row group, so only the row groups that may hold a row asked for are
read (``colmz.arrangement.parts.matching_groups``) -- about one group per run and
value, whatever the arrangement holds -- and kept indexed by the handle
(``colmz.arrangement.lookups.LookupIndex``: parts never change), so a later lookup decodes
only the groups no lookup read before and searches the index for the rest: all the lookups
together decode at most the arrangement once per version of its parts (a compaction
rewriting them starts the index again). ``lookup_stats`` counts the lookups, the rows they
decoded and the index's restarts (work counters).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colmz.arrangement.errors import (
    InvalidAsOf,
    MissingPart,
)
from colmz.arrangement.fetched import FetchedRuns
from colmz.arrangement.merge import chunks_filtered, stream_merge
from colmz.arrangement.part_ref import PartCheck
from colmz.arrangement.parts import READ_THREADS, concurrent_calls, read_ahead
from colmz.arrangement.read import ReadRun, read_runs
from colmz.frontier import MAX_TIME, check_time
from colmz.rows import cast_to
from colmz.threads import shared_pool
from colmz.updates import Encoded, Updates

__all__ = ["PartInfo", "ReadHandle"]


@dataclass(frozen=True)
class PartInfo:
    """One part of the current state, for readers outside colmz.

    ``url`` is where the part is (``Blob.url_of``); a reader keeps the rows with
    ``time >= min_time`` (trace parts: 0; unsealed parts: the trace's upper, because times
    before it are already in the trace) and advances every time to the arrangement's since.
    ``check`` is what the state recorded of the part (``colmz.arrangement.part_ref.PartCheck``:
    rows, diff sum, digest; None for a part recorded without one): a reader passes
    ``PartRef(key, check)`` to ``read_part``, which verifies it.
    """

    url: str
    key: str
    kind: str
    min_time: int
    check: PartCheck | None = None


class ReadHandle:
    """The read side of the handle (module docstring); a base of
    :class:`colmz.arrangement.Arrangement`."""

    def _read_plan(self, as_of: int | None) -> tuple[list[ReadRun], int, int | None]:
        """The runs a read as of ``as_of`` takes (their part keys and the time window kept
        of each: trace batches whole, unsealed batches from the trace's upper), the since
        its times advance to, and the upper of its times (None: all)."""
        tu = self.trace_ts_upper()
        # times at or before as_of (as_of + 1 cannot wrap: Python ints)
        upper = None if as_of is None or as_of == MAX_TIME else as_of + 1
        since = self._since if as_of is None else max(self._since, as_of)
        unsealed = self.unsealed_snapshot(tu, None).batches if tu is not None else ()
        batches: list[ReadRun] = [(b.parts, 0, upper) for b in self._trace]
        if unsealed:
            hi = upper if upper is None or upper > tu else tu
            # a batch whose every time is at or beyond the read's upper adds nothing
            batches += [(b.parts, tu, hi) for b in unsealed if hi is None or b.ts_lower < hi]
        return batches, since, upper

    def _fetch(self, as_of: int | None) -> FetchedRuns:
        batches, since, _ = self._read_plan(as_of)
        return self._fetched(self._read_schema(), batches, since)

    def _fetched(self, schema, batches: list[ReadRun], since: int) -> FetchedRuns:
        runs = read_runs(self._store, batches, schema, self._read_pool(batches))
        return FetchedRuns(runs, since, schema,
                           exact=lambda: self._read_streaming(batches, since, schema))

    def _read_all(self, as_of: int | None) -> Updates:
        schema = self._read_schema()
        batches, since, _ = self._read_plan(as_of)
        # colmz.arrangement.read: every part read whole, the runs merged by order words into
        # a permutation and each column gathered once (a diff sum leaving int64: the exact
        # streaming merge). The common shape after maintain() -- one trace batch, nothing
        # unsealed read -- is its parts as they are whenever advancing the times cannot make
        # two rows meet (FetchedRuns.merge: run_contents): no merge, no encoding.
        return self._fetched(schema, batches, since).merge()

    def _read_streaming(self, batches, since: int, schema) -> Updates:
        # Inputs come a whole part at a time (one Parquet read each, the next one fetched
        # while this one merges), merged on full encodings (colmz.arrangement.merge.stream_merge).
        out: list[Encoded] = []
        pool = self._read_pool(batches)
        runs = [chunks_filtered(read_ahead(self._store, keys, schema, pool), lo, hi)
                for keys, lo, hi in batches]
        stream_merge(runs, since, out.append)
        return self._decode_many(out, schema)

    def _read_pool(self, batches):
        # The shared part-reading pool when more than one part is read from a store whose
        # calls may run in threads; None reads in this thread.
        parts = sum(len(keys) for keys, _, _ in batches)
        return (shared_pool("read", READ_THREADS) if parts > 1 and concurrent_calls(self._store)
                else None)

    def read(self, as_of: int | None = None) -> Updates:
        """The contents: with ``as_of=None`` everything written (times advanced to the
        since); with ``as_of`` the collection at that time -- every update at or before it,
        its time set to ``as_of``, consolidated. ``as_of`` must be at or after the since and
        before the seal (:class:`InvalidAsOf`).

        Reads the state this handle last loaded or committed; :meth:`refresh` first to see
        other writers' commits.

        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://read-doc")
        >>> a.write(colmz.Updates({"k": ["x", "x", "y"]}, time=[0, 2, 3], diff=[1, 1, 1]))
        >>> a.seal(4)
        >>> a.read(2).to_pylist()
        [('x', 2, 2)]
        """
        return self._reading(self._read_all, as_of)

    def read_unmerged(self, as_of: int | None = None) -> FetchedRuns:
        """:meth:`read`'s runs, fetched but not merged (``colmz.arrangement.fetched.FetchedRuns``):
        ``.merge()`` is ``read(as_of)``; ``.rows()`` is the contents as the rows of a
        relation (one per copy, in no order), without any merge when no update read retracts
        or few do -- what a query reading the arrangement as a table needs.

        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://read-unmerged-doc")
        >>> a.write(colmz.Updates({"k": ["y", "x"]}, time=[0, 2], diff=[1, 2]))
        >>> a.seal(3)
        >>> f = a.read_unmerged(2)
        >>> sorted(f.rows().column("k").to_pylist())
        ['x', 'x', 'y']
        >>> f.merge().to_pylist()
        [('x', 2, 2), ('y', 2, 1)]
        """
        return self._reading(self._fetch, as_of)

    def _reading(self, read, as_of: int | None):
        # the as_of checked once; a part another handle deleted: refresh and read once more
        if as_of is not None:
            as_of = check_time(as_of, "as_of")
            if as_of < self._since:
                raise InvalidAsOf(f"as_of {as_of} is before the since {self._since}: compacted away")
            if not (self._seal is None or as_of < self._seal):
                raise InvalidAsOf(f"as_of {as_of} is not before the seal {self._seal}: not final yet")
        try:
            return read(as_of)
        except MissingPart:
            if self._log is None:
                raise
            before = self._seqno
            self.refresh()
            if self._seqno == before:
                raise
            return read(as_of)

    def counts(self, rows: Updates, as_of: int) -> np.ndarray:
        """How often each row of ``rows`` (its data; times and diffs ignored) occurs in the
        contents as of ``as_of``, reading only the row groups whose first column's
        statistics admit one of the rows (module docstring); ``as_of`` as :meth:`read`'s.
        ``rows`` must have the arrangement's columns (cast within a type family).

        >>> import colmz
        >>> a = colmz.Arrangement.open("mem://counts-doc")
        >>> a.write(colmz.Updates({"k": ["x", "x", "y"]}, time=[0, 2, 3], diff=[1, 1, 1]))
        >>> a.seal(4)
        >>> a.counts(colmz.Updates({"k": ["x", "z"]}, time=[0, 0], diff=[1, 1]), 2).tolist()
        [2, 0]
        """
        if not isinstance(rows, Updates):
            raise TypeError(f"rows must be colmz.Updates, got {type(rows).__name__}")
        schema = self._read_schema()
        if not schema:  # nothing written: every row occurs 0 times
            return self._reading(lambda _: np.zeros(len(rows), np.int64), as_of)
        rows = cast_to(rows, schema)
        return self._reading(lambda a: self._lookup_counts(rows, schema, a), as_of)

    def _lookup_counts(self, rows: Updates, schema, as_of: int) -> np.ndarray:
        self.lookup_stats["lookups"] += 1
        if not len(rows):
            return np.zeros(0, np.int64)
        batches, _, _ = self._read_plan(as_of)
        index = self._lookups
        before = index.rows_read, index.restarts
        try:
            # contents as of a time before the seal (and at or after the since: _reading)
            # never change, whatever compaction does to the parts holding them
            fixed = as_of if self._seal is not None and as_of < self._seal else None
            return index.counts(self._store, batches, schema, rows, self._verified_parts, fixed)
        finally:
            self.lookup_stats["rows_read"] += index.rows_read - before[0]
            self.lookup_stats["restarts"] += index.restarts - before[1]

    def forget_lookups(self) -> None:
        """Drop the row groups :meth:`counts` kept indexed (``colmz.arrangement.lookups``):
        what a reader that loaded the contents no longer asks of them."""
        self._lookups.clear()

    def to_arrow(self, as_of: int | None = None) -> pa.Table:
        """:meth:`read` as an Arrow table (data columns, ``time``, ``diff``)."""
        return self.read(as_of).to_arrow()

    def to_pandas(self, as_of: int | None = None):
        """:meth:`read` as a pandas DataFrame."""
        return self.read(as_of).to_pandas()

    def parts(self) -> list[PartInfo]:
        """Every part of the current state, trace batches first (module docstring of
        ``colmz.arrangement.parts`` for the format)."""
        out = [PartInfo(self._store.url_of(k), k, "trace", 0, c) for b in self._trace for k, c in b.parts]
        tu = self.trace_ts_upper()
        if tu is not None:
            for b in self._unsealed:
                if tu <= b.ts_upper:
                    out += [PartInfo(self._store.url_of(k), k, "unsealed", tu, c) for k, c in b.parts]
        return out
