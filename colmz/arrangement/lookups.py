"""The row groups point lookups read, kept indexed: :class:`LookupIndex`.

Design
------
A point lookup (``Arrangement.counts``: how often each of a few rows occurs as of a time)
reads, of every part of the read plan, the row groups whose first column's statistics admit
a row asked for (``colmz.arrangement.parts.matching_groups``). Parts never change once
written, so what a lookup read stays true for as long as the plan holds the part with the
same window of times: the index keeps every group it read -- filtered to its run's window
-- in one :class:`colmz.collection.RowCounts` (sorted runs of the rows' order-preserving
words, merged a little per add), and the footer statistics of every part it opened. A later
lookup reads only the groups it needs that no lookup read before, and counts the rows asked
for with one search of the index.

So the lookups of a reopened table cost, all together, at most one read of every row
group of the table (the index then holds what loading the table would), and each lookup
after its groups were read costs a search of the index, not a decode of a row group.

Invariant: the index holds, for every entry ``(part key, lo, hi, i)`` of the current plan it
has seen (the ``i``-th listing of the part with that window), the rows of the groups listed
for it with times in ``[lo, hi)``, and nothing else.
A row's equal rows lie only in groups whose statistics admit its first column, so once
those groups of every entry are added, the index's count of the row is the arrangement's.
A plan that drops an entry the index holds (a compaction replaced the part, a lookup as of
another time) starts the index again, empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from colmz.arrangement.part_ref import PartRef
from colmz.arrangement.parts import matching_groups, read_groups
from colmz.collection import RowCounts
from colmz.order import ColumnSpec
from colmz.storage.base import Blob
from colmz.updates import Updates

__all__ = ["LookupIndex"]


class LookupIndex:
    """The row groups point lookups read, indexed (module docstring).

    ``rows_read`` counts the rows decoded from parts and ``restarts`` the times a changed
    plan emptied the index (work counters); ``len()`` is the rows the index holds.

    Examples
    --------
    An arrangement keeps one for its lookups (``Arrangement.counts``): the second lookup of
    a row reads nothing.

    >>> import tempfile, colmz
    >>> a = colmz.Arrangement.open(tempfile.mkdtemp())
    >>> a.write(colmz.Updates({"k": [1, 1, 2]}, time=[0, 1, 1], diff=[1, 1, 1]))
    >>> a.seal(2)
    >>> one = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    >>> a.counts(one, 1).tolist(), a.lookup_stats["rows_read"]
    ([2], 3)
    >>> a.counts(one, 1).tolist(), a.lookup_stats["rows_read"]
    ([2], 3)
    """

    def __init__(self) -> None:
        self._groups: dict[tuple[str, int, int | None, int], set[int]] = {}  # entry -> groups added
        self._stats: dict[str, tuple] = {}  # part key -> its group_statistics
        self._rows = RowCounts()
        self.rows_read = 0
        self.restarts = 0

    def __len__(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        """Forget every group read (the rows read stay counted)."""
        self._groups = {}
        self._stats = {}
        self._rows = RowCounts()

    def counts(self, store: Blob, runs: Sequence[tuple[Sequence, int, int | None]],
               schema: Sequence[ColumnSpec], rows: Updates, verified: set | None = None) -> np.ndarray:
        """How often each row of ``rows`` (cast to ``schema`` already) occurs in ``runs`` --
        each ``(parts, lo, hi)``: the parts (``PartRef`` or key) of a run and the window of
        times kept of it (``hi`` None: no bound) -- reading only the groups that may hold
        one of the rows and that no earlier lookup read."""
        first = list(dict.fromkeys(rows.column(schema[0].name).to_pylist()))
        plan, seen = [], {}
        for parts, lo, hi in runs:
            for part in parts:
                # (a part listed twice in the plan is counted twice, as a read would)
                e = (PartRef.of(part)[0], lo, hi)
                seen[e] = seen.get(e, -1) + 1
                plan.append((part, (*e, seen[e])))
        entries = {e for _, e in plan}
        if any(e not in entries for e in self._groups):
            self.clear()  # the plan changed under the index: its rows may not be the plan's
            self.restarts += 1
        if len(self._stats) > len(entries):
            keys = {e[0] for e in entries}
            self._stats = {k: s for k, s in self._stats.items() if k in keys}
        for part, entry in plan:
            added = self._groups.setdefault(entry, set())
            stats = self._stats.get(entry[0])
            if stats is not None and all(g in added for g in matching_groups(stats, first)):
                continue

            def choose(stats, added=added):
                return [g for g in matching_groups(stats, first) if g not in added]

            stats, got = read_groups(store, part, schema, choose, verified)
            self._stats[entry[0]] = stats
            _, lo, hi, _ = entry
            for g, u in got.items():
                self.rows_read += len(u)
                t = u.time
                keep = (t >= np.uint64(lo)) if hi is None else (t >= np.uint64(lo)) & (t < np.uint64(hi))
                if len(u) and not keep.all():
                    u = u.take(np.flatnonzero(keep))
                self._rows.add(u)
                added.add(g)
        return self._rows.counts(rows)
