"""Collections: changes at logical times with a ``since`` and an ``upper``.

Design
------
A *collection* is what continual tasks read and write and what the catalog keeps its
tables in. It is the layer both the durable arrangement (:mod:`colmz.arrangement`, whose
:class:`~colmz.arrangement.collection.ArrangementCollection` is a durable collection) and
the compute above it (:mod:`colmz.continual`, :mod:`colmz.dataflow`, the catalog) stand on,
side by side: this module imports neither the task model nor the SQL layer, and nothing
below the SQL layer imports :mod:`colmz.continual` or :mod:`colmz.sql`
(``tests/colmz/test_layers.py`` checks the import graph).

The protocol, :class:`Collection`, has upstream persist's shape: ``schema``, ``since``,
``upper``, ``compare_and_append(updates, expected_upper, new_upper)`` -- which raises
:class:`UpperMismatch` when ``expected_upper`` is not the collection's upper, and changes
nothing then -- ``snapshot(as_of)`` (the contents at a time in ``[since, upper)``,
consolidated) and ``updates(lower, upper)`` (the changes at times in ``[lower, upper)``).
:class:`MemoryCollection` is the in-memory collection, with ``stats`` counting the updates
each read touched; :class:`RowCounts` is the index it answers "how often does each of these
rows occur" from, in time proportional to the rows asked about.

Invariants: times below ``upper`` are complete and never change; reads before ``since``
are refused; a call that raises leaves the collection unchanged (the fields it may change
are declared for :mod:`colmz.rollback`).

The names are re-exported from ``colmz`` and from ``colmz.continual``
(``colmz.continual.MemoryCollection``, ``colmz.continual.UpperMismatch``,
``colmz.continual.RowCounts``), beside the continual tasks that take them.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from colmz.frontier import MAX_TIME, Frontier, check_frontier, check_time, frontier_le
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.rows import at_time, cast_to, expand, schema_of
from colmz.updates import SchemaError, Updates

__all__ = [
    "Collection",
    "MemoryCollection",
    "RowCounts",
    "UpperMismatch",
    "as_collection",
]


class UpperMismatch(ValueError):
    """A compare-and-append whose expected upper is not the collection's; ``current`` is."""

    def __init__(self, expected: Frontier, current: Frontier):
        super().__init__(f"expected_upper {expected} does not match the collection's upper {current}")
        self.expected = expected
        self.current = current



@runtime_checkable
class Collection(Protocol):
    """What a continual task reads and writes: changes at times, a ``since`` and an ``upper``.

    ``compare_and_append`` raises :class:`UpperMismatch` (changing nothing) when
    ``expected_upper`` is not the upper; ``snapshot(as_of)`` is the contents as of a time in
    ``[since, upper)``, consolidated; ``updates(lower, upper)`` the changes at times in
    ``[lower, upper)``. :class:`MemoryCollection` and
    ``colmz.arrangement.collection.ArrangementCollection`` are collections.

    >>> isinstance(MemoryCollection({"k": pa.int64()}), Collection)
    True
    """

    @property
    def schema(self) -> tuple[ColumnSpec, ...]: ...

    @property
    def since(self) -> int: ...

    @property
    def upper(self) -> Frontier: ...

    def compare_and_append(self, updates: Updates, expected_upper: Frontier, new_upper: Frontier) -> None: ...

    def snapshot(self, as_of: int) -> Updates: ...

    def updates(self, lower: int, upper: Frontier) -> Updates: ...


class MemoryCollection:
    """A collection held in memory: changes at times, a ``since`` and an ``upper``.

    Times below ``upper`` are complete (sealed); reads are allowed as of times in
    ``[since, upper)``. ``stats`` counts what reads touched: ``updates_read`` (updates
    consolidated or returned) and ``reads``; and ``counts_work``, the rows the
    :meth:`counts` index has encoded, merged and searched.

    Parameters
    ----------
    schema : mapping of column name to Arrow type (or SQL type name), or ``ColumnSpec`` list
    since, upper : int
        The initial frontiers (``since <= upper``).
    base : callable, optional
        Returns the contents as of ``since`` (``upper`` must be past ``since``); called on
        the first read that needs them, so a reader of later changes only never pays for it.
        It may return them unmerged (an object with ``merge()``, giving the contents, and
        ``rows(what)``, giving them as relation rows, merging only when it must:
        ``Arrangement.read_unmerged``): :meth:`relation_rows` then reads those rows.
    base_consolidated : bool
        ``base`` returns its contents already consolidated (a durable read's result, as
        ``Arrangement.read``): they are kept as they come instead of consolidated again.
    base_counts : callable, optional
        With ``base``: given rows (``Updates`` of the collection's columns), returns how
        often each occurs in the contents at ``since`` -- answered where they are kept
        without loading them (``ArrangementCollection.counts``, a durable table's point
        lookup). :meth:`counts` then asks it while the base is still to load, so a
        reopened table's retraction check never loads or indexes the whole table.

    Examples
    --------
    >>> c = MemoryCollection({"k": pa.int64()})
    >>> c.compare_and_append(Updates({"k": [7]}, time=[2], diff=[1]), 0, 3)
    >>> c.upper, c.snapshot(2).to_pylist(), len(c.snapshot(1))
    (3, [(7, 2, 1)], 0)
    """

    #: What a failing call may change, for ``colmz.rollback``: the frontiers, the history
    #: (``_times``/``_batches``), the base still to load, the cached newest contents
    #: (``_acc``/``_acc_n``, consistent with the history they are saved with) and the
    #: row-count index (rolled back in place, so an index built before stays valid rather than
    #: being rebuilt). ``stats`` counts reads done and is kept.
    ROLLBACK_FIELDS = ("_since", "_upper", "_times", "_batches", "_base", "_base_fetched", "_acc",
                       "_acc_n", "_counts")
    #: The history lists are append-only (``colmz.rollback``): ``compare_and_append`` only
    #: appends to them; compaction (``advance_since``) and loading the base, which change
    #: their front, assign new lists. So a save costs O(1) whatever the history's length.
    ROLLBACK_APPEND_ONLY = ("_times", "_batches")

    def __init__(self, schema, *, since: int = 0, upper: int = 0,
                 base: Callable[[], Updates] | None = None, base_consolidated: bool = False,
                 base_counts: Callable[[Updates], np.ndarray] | None = None):
        self._schema = schema_of(schema)
        self._since = check_time(since, "since")
        self._upper: Frontier = check_frontier(upper, "upper")
        if not frontier_le(self._since, self._upper):
            raise ValueError(f"since {since} is beyond upper {upper}")
        if base is not None and not (self._upper is None or self._upper > self._since):
            raise ValueError("a base (contents at since) needs upper > since")
        self._times: list[int] = []
        self._batches: list[Updates] = []
        if base_counts is not None and base is None:
            raise ValueError("base_counts answers for a base: give base= too")
        self._base = base
        self._base_consolidated = bool(base_consolidated)
        self._base_counts = base_counts
        self._base_fetched = None  # what base() returned, while not loaded (relation_rows)
        self._acc: Updates | None = None  # contents as of _times[_acc_n - 1]
        self._acc_n = 0
        self._counts: RowCounts | None = None  # built by the first counts() call
        self.stats = {"updates_read": 0, "reads": 0, "counts_work": 0, "base_lookups": 0}

    @classmethod
    def from_updates(cls, updates: Updates, *, since: int = 0, upper: Frontier = -1) -> MemoryCollection:
        """A collection holding ``updates``; ``upper`` defaults to one past the last time.

        >>> MemoryCollection.from_updates(Updates({"k": [1]}, time=[4], diff=[1])).upper
        5
        """
        if not isinstance(updates, Updates):
            raise TypeError(f"updates must be colmz.Updates, got {type(updates).__name__}")
        if upper == -1:
            upper = int(updates.time.max()) + 1 if len(updates) else since
            if upper > MAX_TIME:
                upper = None
        c = cls(updates.schema, since=since, upper=since)
        c.compare_and_append(updates, since, upper)
        return c

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        return self._schema

    @property
    def since(self) -> int:
        return self._since

    @property
    def upper(self) -> Frontier:
        return self._upper

    def advance_since(self, since: int) -> None:
        """Allow no more reads before ``since`` and compact the history up to it.

        A regression raises ``ValueError``.
        """
        since = check_time(since, "since")
        if since < self._since:
            raise ValueError(f"since {since} is before the current since {self._since}")
        if not frontier_le(since, self._upper):
            raise ValueError(f"since {since} is beyond the upper {self._upper}")
        self._load_base()
        self._since = since
        # Logical compaction: the changes at or before since become one batch at since, so
        # a read as of since (a restart's self view) costs the contents, not the history.
        k = bisect.bisect_right(self._times, since)
        if k > 1 or (k == 1 and self._times[0] != since):
            merged = consolidate(concat(self._batches[:k]), since=since)
            # New lists (the history is append-only in place: colmz.rollback).
            self._times = ([since] if len(merged) else []) + self._times[k:]
            self._batches = ([merged] if len(merged) else []) + self._batches[k:]
            self._acc, self._acc_n = None, 0

    def __len__(self) -> int:
        """Updates held (in memory)."""
        return sum(len(b) for b in self._batches)

    def compare_and_append(self, updates: Updates, expected_upper: Frontier, new_upper: Frontier) -> None:
        """Append ``updates`` (times in ``[expected_upper, new_upper)``) and move the upper.

        Raises :class:`UpperMismatch` when ``expected_upper`` is not the current upper.
        """
        if not isinstance(updates, Updates):
            raise TypeError(f"updates must be colmz.Updates, got {type(updates).__name__}")
        new_upper = check_frontier(new_upper, "new_upper")
        if expected_upper != self._upper:
            raise UpperMismatch(expected_upper, self._upper)
        if not frontier_le(self._upper, new_upper):
            raise ValueError(f"new_upper {new_upper} is before the upper {self._upper}")
        if [c.name for c in updates.schema] != [c.name for c in self._schema]:
            raise SchemaError(
                f"updates have columns {updates.column_names}, the collection {[c.name for c in self._schema]}"
            )
        if len(updates):
            updates = cast_to(updates, self._schema)
            lo, hi = int(updates.time.min()), int(updates.time.max())
            if self._upper is None or lo < self._upper or (new_upper is not None and hi >= new_upper):
                raise ValueError(
                    f"updates have times in [{lo}, {hi}], outside [{self._upper}, {new_upper})"
                )
            cons = consolidate(updates)
            if len(cons):
                times = cons.time
                if times[0] == times[-1]:  # one time (a commit's): the batch as it is, not sliced
                    self._times.append(int(times[0]))
                    self._batches.append(cons)
                else:
                    cuts = np.flatnonzero(np.diff(times)) + 1
                    bounds = [0, *cuts.tolist(), len(cons)]
                    for a, b in zip(bounds[:-1], bounds[1:]):
                        self._times.append(int(times[a]))
                        self._batches.append(cons.slice(a, b))
                if self._counts is not None:
                    self._counts.add(cons)
                    self.stats["counts_work"] = self._counts.work
        self._upper = new_upper

    @property
    def base_pending(self) -> bool:
        """Whether the contents at ``since`` (``base``) are still to be loaded."""
        return self._base is not None

    def _load_base(self) -> None:
        # The contents at since, supplied lazily by whoever built this collection (a durable
        # store): fetched on the first read that needs them.
        if self._base is None:
            return
        # Cleared only once read: a read that raises (a durable store racing a compaction)
        # must leave the contents still to load, not silently empty.
        got = self._fetch_base()
        if not isinstance(got, Updates):
            got = got.merge()
        u = at_time(cast_to(got, self._schema), self._since)
        if not (self._base_consolidated and u.schema == got.schema):  # (a cast: consolidate)
            u = consolidate(u)
        self._base = None
        self._base_fetched = None
        if len(u):
            # New lists (the history is append-only in place: colmz.rollback).
            self._times = [self._since, *self._times]
            self._batches = [u, *self._batches]
            if self._acc_n:
                self._acc, self._acc_n = None, 0
            if self._counts is not None:
                # the index held the changes after since only (base_counts answered for the
                # base): now it holds the base too, as every batch held
                self._counts.add(u)
                self.stats["counts_work"] = self._counts.work

    def _fetch_base(self):
        if self._base_fetched is None:
            self._base_fetched = self._base()
        return self._base_fetched

    def relation_rows(self, as_of: int, what: str = "collection") -> pa.Table:
        """The contents as of ``as_of`` as the rows of a relation: each data row repeated by
        its multiplicity, in no particular order (``expand(snapshot(as_of), what)``).

        While the base is still to load and no change is at or before ``as_of``, the
        contents are the base alone: when it comes unmerged (a durable table's fetched runs)
        and its rows can be told without the merge -- every diff positive, or few
        retractions (``FetchedRuns.rows`` of ``colmz.arrangement.fetched``) -- they are, and
        the base stays unloaded until a read needs it consolidated (then merged from what
        was fetched, not read again).

        >>> c = MemoryCollection({"k": pa.int64()}, since=0, upper=1,
        ...                      base=lambda: Updates({"k": [2, 1, 2]}, time=[0, 0, 0], diff=[1, 1, 1]))
        >>> sorted(c.relation_rows(0).column("k").to_pylist())
        [1, 2, 2]
        """
        as_of = self._check_read(as_of)
        if self._base is not None and bisect.bisect_right(self._times, as_of) == 0:
            got = self._fetch_base()
            if not isinstance(got, Updates) and tuple(got.schema) == self._schema:
                rows = got.rows(what)  # merged from the fetch (once) when it must be
                self._count(rows.num_rows)
                return rows
        return expand(self.snapshot(as_of), what)

    def _count(self, n: int) -> None:
        self.stats["updates_read"] += n
        self.stats["reads"] += 1

    def _check_read(self, as_of: int) -> int:
        as_of = check_time(as_of, "as_of")
        if as_of < self._since:
            raise ValueError(f"as_of {as_of} is before the since {self._since}")
        if self._upper is not None and as_of >= self._upper:
            raise ValueError(f"as_of {as_of} is not complete: the upper is {self._upper}")
        return as_of

    def snapshot(self, as_of: int) -> Updates:
        """The contents as of ``as_of``: consolidated, every time ``as_of``.

        The contents at the newest time are kept, so reading them again costs their size.
        """
        as_of = self._check_read(as_of)
        self._load_base()
        k = bisect.bisect_right(self._times, as_of)
        if k == len(self._times):
            if self._acc_n != k:
                parts = self._batches[self._acc_n : k]
                if self._acc is not None:
                    parts = [self._acc, *parts]
                self._count(sum(len(p) for p in parts))
                # One part (the base alone, say) is consolidated at one time already: its
                # time advanced is the answer, with no sort (each batch held is consolidated
                # at its time, as is the accumulation).
                self._acc = (at_time(parts[0], self._times[k - 1]) if len(parts) == 1
                             else consolidate(concat(parts), since=self._times[k - 1]))
                self._acc_n = k
            else:
                self._count(len(self._acc) if self._acc is not None else 0)
            if self._acc is None:
                return Updates.empty(self._schema)
            return at_time(self._acc, as_of)
        if k == 0:
            return Updates.empty(self._schema)
        parts = self._batches[:k]
        self._count(sum(len(p) for p in parts))
        return consolidate(concat(parts), since=as_of)

    def updates(self, lower: int, upper: Frontier) -> Updates:
        """The changes at times ``lower <= t < upper`` (sorted by time), read from storage."""
        lower = check_time(lower, "lower")
        upper = check_frontier(upper, "upper")
        if lower <= self._since:
            self._load_base()
        a = bisect.bisect_left(self._times, lower)
        b = len(self._times) if upper is None else bisect.bisect_left(self._times, upper)
        parts = self._batches[a:b]
        self._count(sum(len(p) for p in parts))
        if not parts:
            return Updates.empty(self._schema)
        return concat(parts)

    def times(self) -> list[int]:
        """The times that hold changes."""
        return list(self._times)

    def keep_counts(self) -> None:
        """Keep the :meth:`counts` index from now on: built now over the contents (their
        size, once; nothing for a new collection) and kept up to date by every append for
        the size of its change, so no :meth:`counts` call ever builds it -- a catalog's
        tables, whose first retraction would otherwise pay for the whole table in one
        commit. The index holds every row's encoded words again (about the contents' size
        in memory). A collection whose base is still to load (a durable table reopened)
        indexes only the changes after ``since`` when ``base_counts`` answers for the base
        (until a read loads it, adding it to the index); without ``base_counts`` it builds
        the index at its first count, when the base loads.

        >>> c = MemoryCollection({"k": pa.int64()}); c.keep_counts()
        >>> c.compare_and_append(Updates({"k": [1, 1]}, time=[0, 0], diff=[1, 1]), 0, 1)
        >>> c.counts(Updates({"k": [1]}, time=[0], diff=[-1])).tolist()
        [2]
        """
        if self._counts is None and (self._base is None or self._base_counts is not None):
            self._build_counts()

    def _build_counts(self) -> None:
        index = RowCounts()
        for b in self._batches:
            index.add(b)
        self._counts = index
        self.stats["counts_work"] = index.work

    def counts(self, rows: Updates) -> np.ndarray:
        """The multiplicity of each row of ``rows`` (their data; times and diffs ignored) in
        the contents at the newest complete time, ``upper - 1``.

        The first call builds a :class:`RowCounts` index of the contents (their size, once;
        none after :meth:`keep_counts`, which keeps it from the start); later appends keep it
        up to date for the size of their changes (a roll back puts its runs back,
        ``colmz.rollback``), so a call costs about ``len(rows) * log(contents)`` -- what a
        commit checking its retractions for negative multiplicities needs, without
        consolidating the contents. While the base is still to load and ``base_counts`` is
        given, the index holds the changes after ``since`` and the base's counts are asked
        of ``base_counts`` (``stats["base_lookups"]``): nothing is loaded.

        >>> c = MemoryCollection({"k": pa.int64()})
        >>> c.compare_and_append(Updates({"k": [1, 1, 2]}, time=[0, 0, 1], diff=[1, 1, 1]), 0, 2)
        >>> c.counts(Updates({"k": [1, 3]}, time=[0, 0], diff=[-1, -1])).tolist()
        [2, 0]
        """
        if self._upper is not None and self._upper <= self._since:
            raise ValueError(f"no complete time to count at: the upper is {self._upper}")
        if self._counts is None:
            if self._base_counts is None:
                self._load_base()
            self._build_counts()
        rows = cast_to(rows, self._schema)
        out = self._counts.counts(rows)
        self.stats["counts_work"] = self._counts.work
        if self._base is not None:  # still to load: base_counts answers for it
            self.stats["base_lookups"] += 1
            out = out + np.asarray(self._base_counts(rows), np.int64)
        return out


class RowCounts:
    """The multiplicity of data rows under appended updates: an index answering, for a few
    rows, how often each occurs, in time proportional to those rows (times the logarithm of
    the index), not to the index.

    The updates are held in a ``colmz.dataflow.keyed.KeyedArrangement`` keyed by every
    column (made at the first :meth:`add`, for that batch's columns): sorted, consolidated
    runs of the rows' order-preserving encoding (``colmz.order``), held in the layers of a
    fueled spine and merged a little per add (``colmz.dataflow.fueled``), so an add of ``n``
    rows merges ``O(n)`` rows per merge in progress -- never a merge of the whole index
    landing on one small add -- and a row is merged ``O(log n)`` times, amortised. A count
    encodes the rows asked for and binary-searches every run (rows of another layout -- a
    longer string, a first NULL -- are narrowed to each run's, ``colmz.order``). ``work``
    counts rows added, merged and searched.

    >>> r = RowCounts()
    >>> r.add(Updates({"k": ["a", "bb", "a"]}, time=[0, 0, 1], diff=[1, 1, 1]))
    >>> r.add(Updates({"k": ["a"]}, time=[2], diff=[-1]))
    >>> r.counts(Updates({"k": ["a", "bb", "ccc"]}, time=[0, 0, 0], diff=[1, 1, 1])).tolist()
    [1, 1, 0]
    """

    #: The arrangement (rolled back in place: its layers of runs, a tuple each add replaces).
    ROLLBACK_FIELDS = ("_index",)

    def __init__(self) -> None:
        self._index = None  # a KeyedArrangement keyed by every column, from the first add

    def __len__(self) -> int:
        return 0 if self._index is None else len(self._index)

    @property
    def work(self) -> int:
        """Rows added, merged and searched (a cumulative work counter, never rolled back)."""
        a = self._index
        return 0 if a is None else a.rows_inserted + a.rows_merged + a.keys_searched

    @property
    def max_add_merged(self) -> int:
        """The most rows merges read in one add (a work counter)."""
        return 0 if self._index is None else self._index.max_step_merged

    def runs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The runs, oldest first: each ``(rows' words, diffs)``, sorted and consolidated."""
        return [] if self._index is None else [(r.keys, r.diff) for r in self._index.state_runs()]

    def add(self, updates: Updates) -> None:
        """Add ``updates`` (their data and diffs) to the counts."""
        if not len(updates):
            return
        if self._index is None:
            # imported here: the dataflow's state structures stand on this module
            from colmz.dataflow.keyed import KeyedArrangement

            self._index = KeyedArrangement(updates.schema, updates.column_names)
        self._index.insert_checked(0, updates)

    def counts(self, rows: Updates) -> np.ndarray:
        """How often each row of ``rows`` occurs (its data; times and diffs ignored)."""
        if not len(rows) or self._index is None:
            return np.zeros(len(rows), np.int64)
        return self._index.counts([rows.column(n) for n in self._index.key])


def as_collection(c, what: str) -> Collection:
    """``c`` as a collection: ``Updates`` become a :class:`MemoryCollection` (upper one past
    their last time), a collection is returned as it is, anything else raises ``TypeError``
    naming ``what``.

    >>> as_collection(Updates({"k": [1]}, time=[3], diff=[1]), "input").upper
    4
    """
    if isinstance(c, Updates):
        return MemoryCollection.from_updates(c)
    for attr in ("schema", "upper", "since", "snapshot", "updates"):
        if not hasattr(c, attr):
            raise TypeError(f"{what} must be a collection (e.g. MemoryCollection) or Updates, got {type(c).__name__}")
    return c
