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
another time) starts the index again, empty. Contents as of a time before the seal (and at
or after the since) never change, whatever compaction does to the parts holding them: for
such a time the index of the plan before is kept, and a row whose first column's groups it
read whole in every entry of that plan (:meth:`_Generation.covers`) is counted there, reading
nothing -- so a compaction does not make the lookups decode the arrangement again.
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

__all__ = ["PREVIOUS_CHECK", "LookupIndex"]


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
        self._gen = _Generation(None)  # the current plan's
        self._prev: _Generation | None = None  # the plan before, kept for its as_of
        self.rows_read = 0
        self.restarts = 0

    def __len__(self) -> int:
        return len(self._gen.rows) + (0 if self._prev is None else len(self._prev.rows))

    def clear(self) -> None:
        """Forget every group read (the rows read stay counted)."""
        self._gen = _Generation(None)
        self._prev = None

    def counts(self, store: Blob, runs: Sequence[tuple[Sequence, int, int | None]],
               schema: Sequence[ColumnSpec], rows: Updates, verified: set | None = None,
               as_of: int | None = None) -> np.ndarray:
        """How often each row of ``rows`` (cast to ``schema`` already) occurs in ``runs`` --
        each ``(parts, lo, hi)``: the parts (``PartRef`` or key) of a run and the window of
        times kept of it (``hi`` None: no bound) -- reading only the groups that may hold
        one of the rows and that no earlier lookup read.

        ``as_of``, when given, says ``runs`` are the contents as of that time *and those
        cannot change* (the time is before the seal, at or after the since): the index of the
        plan before a compaction then still answers, for that time, the rows whose groups it
        read whole."""
        plan, seen = [], {}
        for parts, lo, hi in runs:
            for part in parts:
                # (a part listed twice in the plan is counted twice, as a read would)
                e = (PartRef.of(part)[0], lo, hi)
                seen[e] = seen.get(e, -1) + 1
                plan.append((part, (*e, seen[e])))
        entries = frozenset(e for _, e in plan)
        gen = self._gen
        if not gen.entries and not gen.groups:  # nothing read yet: this plan's
            gen.as_of = as_of
        elif not gen.entries <= entries or gen.as_of != as_of:
            # The plan dropped a part the index holds (a compaction, another time): its rows
            # may not be the plan's. Contents that cannot change keep it as the one before.
            self.restarts += 1
            keep = as_of is not None and gen.as_of == as_of and len(gen.rows)
            self._prev = gen if keep else (self._prev if as_of is not None and self._prev is not None
                                           and self._prev.as_of == as_of else None)
            gen = self._gen = _Generation(as_of)
        gen.entries = entries
        out = np.zeros(len(rows), np.int64)
        if not len(rows):
            return out
        values = rows.column(schema[0].name).to_pylist()
        distinct = list(dict.fromkeys(values))
        prev = self._prev
        if prev is not None and len(distinct) <= PREVIOUS_CHECK:
            covered = {v: prev.covers(v) for v in distinct}
            old = np.array([covered[v] for v in values], bool)
            if old.any():
                out[old] = prev.rows.counts(rows.take(np.flatnonzero(old)))
                if old.all():
                    return out
                new = np.flatnonzero(~old)
                rows = rows.take(new)
                distinct = [v for v in distinct if not covered[v]]
                out[new] = self._read_counts(gen, store, plan, schema, rows, distinct, verified)
                return out
        return self._read_counts(gen, store, plan, schema, rows, distinct, verified)

    def _read_counts(self, gen, store, plan, schema, rows, first, verified) -> np.ndarray:
        # the groups of every entry that may hold one of ``first`` and that no lookup of
        # this plan read, added; then the rows counted in the index
        for part, entry in plan:
            added = gen.groups.setdefault(entry, set())
            stats = gen.stats.get(entry[0])
            if stats is not None and all(g in added for g in matching_groups(stats, first)):
                continue

            def choose(stats, added=added):
                return [g for g in matching_groups(stats, first) if g not in added]

            stats, got = read_groups(store, part, schema, choose, verified)
            gen.stats[entry[0]] = stats
            _, lo, hi, _ = entry
            for g, u in got.items():
                self.rows_read += len(u)
                t = u.time
                keep = (t >= np.uint64(lo)) if hi is None else (t >= np.uint64(lo)) & (t < np.uint64(hi))
                if len(u) and not keep.all():
                    u = u.take(np.flatnonzero(keep))
                gen.rows.add(u)
                added.add(g)
        return gen.rows.counts(rows)


#: The most distinct first values a lookup checks against the index of the plan before
#: (one check reads that plan's statistics per entry): a larger lookup reads the current plan.
PREVIOUS_CHECK = 64


class _Generation:
    """The index of one plan: its entries, the groups added per entry, the parts' group
    statistics and the rows; ``as_of`` the time its contents are fixed at (None: they may
    change)."""

    def __init__(self, as_of: int | None) -> None:
        self.as_of = as_of
        self.entries: frozenset = frozenset()
        self.groups: dict[tuple[str, int, int | None, int], set[int]] = {}
        self.stats: dict[str, tuple] = {}
        self.rows = RowCounts()

    def covers(self, value) -> bool:
        """Whether every group of every entry of the plan that may hold a row whose first
        column is ``value`` was added: the index then holds all of those rows."""
        for e in self.entries:
            stats, added = self.stats.get(e[0]), self.groups.get(e)
            if stats is None or added is None:
                return False
            if any(g not in added for g in matching_groups(stats, [value])):
                return False
        return True
