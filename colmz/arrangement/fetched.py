"""A read's runs fetched and not merged, and the contents as the rows of a relation.

Layer
-----
Beside the read layer of ``colmz.arrangement`` (:mod:`colmz.arrangement.read`, whose
:func:`~colmz.arrangement.read.merged_read` it calls): ``Arrangement.read_unmerged`` returns
a :class:`FetchedRuns`, the runs of ``read(as_of)`` read from storage and cut to their time
windows, before any merge. Nothing here reads or writes storage, except the handle's exact
streaming merge it may be given for a diff sum leaving int64. Upstream, persist's
``ReadHandle::snapshot`` likewise hands out a shard's batches unconsolidated and leaves
consolidation to whoever needs it (``src/persist-client/src/read.rs``).

Design
------
:meth:`FetchedRuns.merge` is the read. A reader that wants the contents as the rows of a
relation -- one row per copy, in no order, as SQL reads a table (``colmz.rows.expand``) --
needs much less (:meth:`FetchedRuns.rows`):

* When every update fetched has a positive diff, consolidating could only add the diffs of
  equal rows, never cancel one: the pieces' rows repeated by their diffs *are* the
  contents' rows. A table that was only ever inserted into is read so, with no merge and
  (every diff 1) nothing copied.
* Otherwise a retraction reaches only rows equal to it, and equal rows share their first
  column's value. So when few updates are not positive (at most
  :data:`RETRACTED_FRACTION` of them: a ``DELETE`` of some rows), the rows whose first
  column holds a value of a non-positive update are *reached*: they are consolidated on
  their own (``colmz.consolidate``), and every other row -- whose class of equal rows holds
  positive diffs only -- passes through as above, cut around the reached rows without a
  copy. Floating-point first columns are excluded: equality of values there (``0.0`` and
  ``-0.0``) is not the equality of consolidation.
* With more retractions than that, or a first column of another type, :meth:`rows` merges
  (:meth:`merge`) and expands the contents; :attr:`merged` says whether it had to.

Invariant: the rows of :meth:`FetchedRuns.rows`, as a multiset, are
``expand(merge())``'s; a negative multiplicity raises ``NegativeMultiplicity`` from either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colmz.arrangement.parts import run_contents
from colmz.arrangement.read import merged_read
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec, kind_of
from colmz.rows import empty_table, expand
from colmz.updates import Updates

__all__ = ["RETRACTED_FRACTION", "FetchedRuns"]

#: Largest fraction of the fetched updates with a diff that is not positive for which
#: :meth:`FetchedRuns.rows` consolidates only the rows they reach (beyond it, the merge).
#: Settling costs a match of every row's first value (``pc.is_in``: 14 ms for 860,000
#: strings here; a search for integers) and a sort of the reached rows, which grow with the
#: retractions: the sink's shape with 4.8% of its updates retracting (k = 2 runs) was read
#: as rows at 0.40-0.45x ``pq.read_table`` so and at 0.77-0.79x through the merge, a table
#: of 819,200 rows with 100 deleted at 0.79-0.97x so and 0.52-0.53x through the merge.
RETRACTED_FRACTION = 1 / 1024
#: Most reached rows a piece is cut around without a copy (beyond it the piece's other rows
#: are copied by one filter, rather than handed on as thousands of slices).
CUT_LIMIT = 256


class FetchedRuns:
    """The runs of a read, fetched and cut to their windows, not merged yet (module
    docstring).

    ``runs`` are lists of pieces, each list one run sorted by ``(data, time)`` and
    consolidated; ``since`` is the time every update advances to. ``exact`` is called
    instead of the merge when a diff sum leaves int64 (the handle's streaming merge, on
    :func:`~colmz.arrangement.read.merged_read`'s ``OverflowError``); ``retracted`` is the
    fraction of non-positive updates up to which :meth:`rows` settles only the rows they
    reach (:data:`RETRACTED_FRACTION` when None). The merge takes the pieces
    (``merged_read`` drops each input as it is gathered): after it, the merged contents
    answer both :meth:`merge` and :meth:`rows`.

    >>> import colmz
    >>> a = colmz.Updates({"k": ["b", "x"]}, time=[0, 1], diff=[1, 1])
    >>> b = colmz.Updates({"k": ["a", "x"]}, time=[2, 2], diff=[1, 2])
    >>> f = FetchedRuns([[a], [b]], 5, a.schema)
    >>> f
    FetchedRuns(2 runs, 4 updates, since=5)
    >>> sorted(f.rows().column("k").to_pylist())
    ['a', 'b', 'x', 'x', 'x']
    >>> f.merge().to_pylist()
    [('a', 5, 1), ('b', 5, 1), ('x', 5, 3)]
    >>> gone = colmz.Updates({"k": ["x"]}, time=[3], diff=[-1])  # reaches the x rows only
    >>> g = FetchedRuns([[a], [b], [gone]], 5, a.schema, retracted=1.0)
    >>> sorted(g.rows().column("k").to_pylist()), g.merged
    (['a', 'b', 'x', 'x'], False)
    >>> h = FetchedRuns([[a], [b], [gone]], 5, a.schema)  # 1 of 5 updates retracts: merged
    >>> sorted(h.rows().column("k").to_pylist()), h.merged
    (['a', 'b', 'x', 'x'], True)
    """

    def __init__(self, runs: list[list[Updates]], since: int, schema: Sequence[ColumnSpec],
                 exact: Callable[[], Updates] | None = None, retracted: float | None = None):
        self.runs = [[u for u in run if len(u)] for run in runs]
        self.since = since
        self.schema = tuple(schema)
        self._exact = exact
        self._retracted = RETRACTED_FRACTION if retracted is None else retracted
        self._merged: Updates | None = None
        self._rows: pa.Table | None = None  # rows told without the merge, kept

    def __len__(self) -> int:
        """Updates held: those fetched, or once merged the contents'."""
        if self._merged is not None:
            return len(self._merged)
        return sum(len(u) for run in self.runs for u in run)

    def __repr__(self) -> str:
        runs = "merged" if self._merged is not None else f"{sum(1 for r in self.runs if r)} runs"
        return f"FetchedRuns({runs}, {len(self)} updates, since={self.since})"

    def merge(self) -> Updates:
        """The contents: every update with its time advanced to ``since``, consolidated and
        sorted by ``(data, time)``."""
        if self._merged is None:
            self._merged = self._merge()
            self.runs = []
            self._rows = None  # the merged contents answer rows() from now on
        return self._merged

    def _merge(self) -> Updates:
        nonempty = [run for run in self.runs if run]
        if len(nonempty) == 1:
            fast = run_contents(nonempty[0], None, self.since, self.schema)
            if fast is not None:
                return fast
        try:
            return merged_read(self.runs, self.since, self.schema)
        except OverflowError:
            if self._exact is None:
                raise
            return self._exact()

    @property
    def merged(self) -> bool:
        """Whether the runs were merged (:meth:`merge`, or :meth:`rows` that needed it)."""
        return self._merged is not None

    def rows(self, what: str = "collection") -> pa.Table:
        """The contents' data rows, each repeated by its multiplicity, in no particular
        order: without a merge when the module docstring's cases allow, else by
        :meth:`merge`. ``what`` names the contents in ``colmz.rows.expand``'s errors
        (``NegativeMultiplicity`` for a negative multiplicity)."""
        if self._merged is None and self._rows is None:
            self._rows = self._unmerged_rows(what)
        if self._rows is not None:
            return self._rows
        return expand(self.merge(), what)

    def _unmerged_rows(self, what: str) -> pa.Table | None:
        pieces = [u for run in self.runs for u in run]
        if not pieces:
            return empty_table(self.schema)
        lows = [int(u.diff.min()) for u in pieces]
        negative = [np.flatnonzero(u.diff <= 0) if lo <= 0 else None for u, lo in zip(pieces, lows)]
        n_negative = sum(len(i) for i in negative if i is not None)
        if n_negative:
            if (n_negative > self._retracted * sum(len(u) for u in pieces) or not self.schema
                    or not _reachable(self.schema[0])):
                return None  # (no data columns: every row is equal, the merge sums them)
            pieces = [u for u in self._settle_reached(pieces, negative) if len(u)]
            if not pieces:  # every row reached, and all cancelled
                return empty_table(self.schema)
            lows = [int(u.diff.min()) for u in pieces]
        if all(lo == 1 for lo in lows) and all(int(u.diff.max()) == 1 for u in pieces):
            # each piece's table shares its arrays (expand copies nothing when every diff is 1)
            return pa.concat_tables([expand(u, what) for u in pieces])
        # repeats (one limit on the rows repeated, in all) or what settling left negative
        return expand(concat(pieces), what)

    def _settle_reached(self, pieces: list[Updates],
                        negative: list[np.ndarray | None]) -> list[Updates]:
        # The rows whose first column holds a value of a non-positive update, consolidated on
        # their own, after every other row (cut around them); all of them positive but for
        # what the consolidation leaves negative (expand then raises, as after a merge).
        first = self.schema[0].name
        values = pa.concat_arrays([u.column(first).take(pa.array(i)) for u, i in zip(pieces, negative)
                                   if i is not None and len(i)])
        reach = pc.unique(values)
        out, reached = [], []
        for u in pieces:
            at = _reached_rows(u.column(first), reach)
            if not len(at):
                out.append(u)
                continue
            reached.append(u.take(at))
            if len(at) <= CUT_LIMIT:
                lo = 0
                for i in at.tolist():
                    if i > lo:
                        out.append(u.slice(lo, i))
                    lo = i + 1
                if lo < len(u):
                    out.append(u.slice(lo, len(u)))
            else:
                keep = np.ones(len(u), bool)
                keep[at] = False
                out.append(u.take(np.flatnonzero(keep)))
        settled = consolidate(concat(reached), since=self.since)
        return [*out, settled]


def _reached_rows(col: pa.Array, reach: pa.Array) -> np.ndarray:
    """The rows of ``col`` (a piece's first column, in the piece's sorted order) holding a
    value of ``reach``, ascending. An integer column without NULLs is searched -- its
    values ascend as colmz orders them -- in ``len(reach) log len(col)``; others are
    matched row by row (``pc.is_in``, NULL matching NULL)."""
    if pa.types.is_integer(col.type) and not col.null_count and not reach.null_count:
        values = col.to_numpy(zero_copy_only=False)
        keys = np.sort(reach.to_numpy(zero_copy_only=False))
        lo = np.searchsorted(values, keys, "left")
        hi = np.searchsorted(values, keys, "right")
        spans = [np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist()) if b > a]
        return np.concatenate(spans) if spans else np.empty(0, np.int64)
    hit = pc.is_in(col, value_set=reach, skip_nulls=False)
    return np.flatnonzero(hit.to_numpy(zero_copy_only=False))


def _reachable(spec: ColumnSpec) -> bool:
    # First-column kinds whose values are equal exactly when consolidation finds them equal
    # (pc.is_in compares values: for floats 0.0 and -0.0 are equal there and not here), and
    # plain arrays (pc.is_in does not take dictionary-encoded ones).
    return (not pa.types.is_dictionary(spec.type)
            and kind_of(spec.type, spec.name) in ("int", "uint", "bool", "bytes"))
