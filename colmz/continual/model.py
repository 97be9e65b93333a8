"""The continual-task model: collections, the sink state machine and the time loop.

Design
------
A continual task watches one *input* collection. At every time ``T`` where the input
receives inserts, it evaluates its *statements* -- ``INSERT`` and ``DELETE`` against its own
*output* -- with all reads at ``T``, and commits the change ``ΔO(T)`` at ``T``. Unlike a
materialized view it never revisits the past when a reference changes later, and restarting
it costs nothing proportional to the input's history. The model is the one of
``src/compute/src/render/continual_task.rs`` upstream:

* The input's name, inside the statements, means the rows **inserted** at ``T`` (each
  repeated by its multiplicity); deletions in the input are dropped.
* Any other collection is a *reference*, read with its full contents as of ``T``.
* The output's own name reads the output as of ``T - 1`` (empty before the first time).
* Statements are evaluated **independently** against ``O@(T-1)`` and their contributions
  summed: ``INSERT INTO o q`` adds ``+q``, ``DELETE FROM o WHERE p`` adds ``-(rows of
  O@(T-1) satisfying p)``. ``statements="sequential"`` (an explicit option, not upstream's
  behaviour) lets each statement see the previous statements' changes instead.
* Writes happen only at *append times*: times where the input has a positive diff and some
  statement reads the input. At other times the output's upper advances with empty writes.
* On creation at ``I`` with ``snapshot=True`` (the default, as upstream) the input's
  contents at ``I`` are presented as inserts at ``I``; with ``snapshot=False`` processing
  starts at ``I + 1``. A task given an output that already has history *restarts*: with
  ``A = upper - 1`` it never replays a snapshot, reads the output once as of ``A`` and the
  input's changes from ``A + 1`` on, and first writes at ``A + 1``.

Batches. Statements run in DuckDB, whose fixed cost per query (planning, registering the
Arrow tables) dwarfs a small time's work, so when ``run`` has several consecutive times to
process it hands them to :mod:`colmz.continual.batched`, which evaluates them together when
that provably gives the same output (:attr:`ContinualTask.batchable`: independent SQL
statements, no ``INSERT`` reading the output, every ``DELETE`` predicate reading the output
only through the row it tests), one query per statement per batch. This module writes each
batch's ``ΔO`` in one compare-and-append. Whatever fails in a batch -- a guard rail, a SQL
error at one time, a racing writer -- leaves it unwritten and the time-by-time loop here,
the reference semantics, takes over from its first time, so errors surface exactly where
the loop raises them. ``batch=False`` always uses the loop.

The write path is upstream's sink state machine, :class:`SinkState`: append times and the
accumulated task output are fed in, and ``process`` says what to write next (an empty write
advancing the upper, or the consolidated updates at one time); each write is a
compare-and-append against the output, so two tasks racing on one output write each time once.

Storage sits behind a small interface, :class:`MemoryCollection` being the in-memory one:
``schema``, ``since``, ``upper``, ``compare_and_append(updates, expected_upper, new_upper)``,
``snapshot(as_of)`` (contents at a time) and ``updates(lower, upper)`` (the changes at times in
``[lower, upper)``), with ``stats`` counting the updates each read touched. A durable
collection only has to provide the same five members.

Guard rails (each raises before anything is written): the output may not be the input
(``ValueError``); an ``INSERT`` whose result types differ from the task's columns is
converted inside its own query by PostgreSQL's assignment casts (:mod:`colmz.sql.assign`), and
one whose columns do not match the task's (their number, or a type without an assignment cast)
raises :class:`colmz.SchemaError`; a ``DELETE`` that would leave a multiplicity negative raises
:class:`colmz.errors.NegativeMultiplicity`; a write at time ``2**64 - 1``, whose upper would be past the
last time, raises ``OverflowError``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from colmz.continual import batched
from colmz.continual.batched import CompiledStatement, TaskDuckDB
from colmz.errors import NegativeMultiplicity
from colmz.frontier import (
    MAX_TIME,
    Frontier,
    check_frontier,
    check_time,
    frontier_le,
    frontier_lt,
    meet,
)
from colmz.ops import concat, consolidate
from colmz.order import (
    ColumnSpec,
    Layout,
    encode_columns,
    narrow_rows,
    pad_keys,
    search_rows,
    unify_layouts,
)
from colmz.rows import at_time, cast_to, expand, relation_rows, rows_to_updates, schema_of
from colmz.sql.names import display_name
from colmz.updates import SchemaError, Updates

__all__ = [
    "ContinualTask",
    "Delete",
    "Insert",
    "MemoryCollection",
    "RowCounts",
    "SinkState",
    "Statement",
    "UpperMismatch",
]

Statement = Callable[[Mapping[str, pa.Table], Mapping[str, pa.Table], pa.Table], object]


class UpperMismatch(ValueError):
    """A compare-and-append whose expected upper is not the collection's; ``current`` is."""

    def __init__(self, expected: Frontier, current: Frontier):
        super().__init__(f"expected_upper {expected} does not match the collection's upper {current}")
        self.expected = expected
        self.current = current



# ----------------------------------------------------------------------------- storage


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
        ``Arrangement.read_unmerged``): :meth:`snapshot_rows` then reads those rows.
    base_consolidated : bool
        ``base`` returns its contents already consolidated (a durable read's result, as
        ``Arrangement.read``): they are kept as they come instead of consolidated again.

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
                 base: Callable[[], Updates] | None = None, base_consolidated: bool = False):
        self._schema = schema_of(schema)
        self._since = check_time(since, "since")
        self._upper: Frontier = check_frontier(upper, "upper")
        if not frontier_le(self._since, self._upper):
            raise ValueError(f"since {since} is beyond upper {upper}")
        if base is not None and not (self._upper is None or self._upper > self._since):
            raise ValueError("a base (contents at since) needs upper > since")
        self._times: list[int] = []
        self._batches: list[Updates] = []
        self._base = base
        self._base_consolidated = bool(base_consolidated)
        self._base_fetched = None  # what base() returned, while not loaded (snapshot_rows)
        self._acc: Updates | None = None  # contents as of _times[_acc_n - 1]
        self._acc_n = 0
        self._counts: RowCounts | None = None  # built by the first counts() call
        self.stats = {"updates_read": 0, "reads": 0, "counts_work": 0}

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

    def _fetch_base(self):
        if self._base_fetched is None:
            self._base_fetched = self._base()
        return self._base_fetched

    def snapshot_rows(self, as_of: int, what: str = "collection") -> pa.Table:
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
        >>> sorted(c.snapshot_rows(0).column("k").to_pylist())
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

    def counts(self, rows: Updates) -> np.ndarray:
        """The multiplicity of each row of ``rows`` (their data; times and diffs ignored) in
        the contents at the newest complete time, ``upper - 1``.

        The first call builds a :class:`RowCounts` index of the contents (their size, once);
        later appends keep it up to date for the size of their changes (a roll back puts its
        runs back, ``colmz.rollback``), so a
        call costs about ``len(rows) * log(contents)`` -- what a commit checking its
        retractions for negative multiplicities needs, without consolidating the contents.

        >>> c = MemoryCollection({"k": pa.int64()})
        >>> c.compare_and_append(Updates({"k": [1, 1, 2]}, time=[0, 0, 1], diff=[1, 1, 1]), 0, 2)
        >>> c.counts(Updates({"k": [1, 3]}, time=[0, 0], diff=[-1, -1])).tolist()
        [2, 0]
        """
        if self._upper is not None and self._upper <= self._since:
            raise ValueError(f"no complete time to count at: the upper is {self._upper}")
        if self._counts is None:
            self._load_base()
            index = RowCounts()
            for b in self._batches:
                index.add(b)
            self._counts = index
        out = self._counts.counts(cast_to(rows, self._schema))
        self.stats["counts_work"] = self._counts.work
        return out


class RowCounts:
    """The multiplicity of data rows under appended updates: an index answering, for a few
    rows, how often each occurs, in time proportional to those rows (times the logarithm of
    the index), not to the index.

    The updates are kept as *runs*: each run the order-preserving encoding of its rows
    (``colmz.order``: ``uint64`` words, compared lexicographically) sorted and consolidated,
    with the summed diffs. A new batch is a new run; while the run before it is at most
    twice its size the two are merged, so the sizes fall geometrically, there are
    ``O(log n)`` runs and a row is merged ``O(log n)`` times (a binary counter). A count
    encodes the rows asked for and binary-searches every run. Runs of different layouts
    (a longer string, a first NULL) are compared as ``colmz.order`` describes: a query row is
    narrowed to each run's layout, and one whose dropped words are not zero cannot occur
    in that run. ``work`` counts rows encoded, sorted, merged and searched.

    >>> r = RowCounts()
    >>> r.add(Updates({"k": ["a", "bb", "a"]}, time=[0, 0, 1], diff=[1, 1, 1]))
    >>> r.add(Updates({"k": ["a"]}, time=[2], diff=[-1]))
    >>> r.counts(Updates({"k": ["a", "bb", "ccc"]}, time=[0, 0, 0], diff=[1, 1, 1])).tolist()
    [1, 1, 0]
    """

    #: The runs, for ``colmz.rollback``: each an immutable triple of fresh arrays, the list
    #: append-only in place (a merge assigns a new list). ``work`` is cumulative.
    ROLLBACK_FIELDS = ("_runs",)
    ROLLBACK_APPEND_ONLY = ("_runs",)

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, Layout, np.ndarray]] = []
        self.work = 0

    def __len__(self) -> int:
        return sum(len(r[0]) for r in self._runs)

    @staticmethod
    def _encode(u: Updates) -> tuple[np.ndarray, Layout]:
        return encode_columns([u.column(n) for n in u.column_names], n=len(u))

    def add(self, updates: Updates) -> None:
        """Add ``updates`` (their data and diffs) to the counts."""
        if not len(updates):
            return
        keys, layout = self._encode(updates)
        self.work += len(keys)
        run = self._run(keys, layout, np.asarray(updates.diff, np.int64))
        if not len(run[0]):
            return
        self._runs.append(run)
        while len(self._runs) > 1 and len(self._runs[-2][0]) <= 2 * len(self._runs[-1][0]):
            (ka, la, da), (kb, lb, db) = self._runs[-2], self._runs[-1]
            wide = unify_layouts(la, lb)
            keys = np.concatenate([pad_keys(ka, la, wide), pad_keys(kb, lb, wide)])
            self.work += len(keys)
            merged = self._run(keys, wide, np.concatenate([da, db]))
            self._runs = self._runs[:-2] + ([merged] if len(merged[0]) else [])  # a new list

    @staticmethod
    def _run(keys: np.ndarray, layout: Layout, diff: np.ndarray) -> tuple[np.ndarray, Layout, np.ndarray]:
        """``keys`` sorted, equal rows summed, zero sums dropped."""
        if keys.shape[1] and len(keys) > 1:
            order = np.lexsort(keys.T[::-1])
            keys, diff = keys[order], diff[order]
        if len(keys) > 1:
            starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
            keys, diff = keys[starts], np.add.reduceat(diff, starts)
        keep = diff != 0
        return np.ascontiguousarray(keys[keep]), layout, diff[keep]

    def counts(self, rows: Updates) -> np.ndarray:
        """How often each row of ``rows`` occurs (its data; times and diffs ignored)."""
        out = np.zeros(len(rows), np.int64)
        if not len(rows) or not self._runs:
            return out
        q, ql = self._encode(rows)
        for keys, layout, diff in self._runs:
            mine, present = narrow_rows(q, ql, layout)
            pos = search_rows(keys, mine, "left")
            self.work += len(q) * max(1, int(np.log2(len(keys) + 1)))
            inside = pos < len(keys)
            hit = present & inside
            hit[inside] &= (keys[pos[inside]] == mine[inside]).all(axis=1)
            out[hit] += diff[pos[hit]]
        return out



# ----------------------------------------------------------------------------- sink state


class SinkState:
    """The continual-task sink's decisions: what to write next, and up to which upper.

    Fed with the times at which the task must write (``append_times``, complete below
    ``append_times_progress``), the accumulated task output (``to_append``, complete below
    ``to_append_progress``) and what is known written (``output_progress``), :meth:`process`
    returns ``(new_upper, updates)`` -- an empty write that only advances the upper, or the
    consolidated output at the next append time -- or ``None`` when nothing can be written.
    A task writes only at append times; every other time is covered by empty writes.

    >>> s = SinkState()
    >>> s.append_times.add(0); s.append_times_progress = 2; s.to_append_progress = 2
    >>> s.to_append.append(Updates({"k": ["a"]}, time=[0], diff=[1]))
    >>> new_upper, u = s.process(); new_upper, u.to_pylist()
    (1, [('a', 0, 1)])
    """

    #: Everything: a failed task call rolls the sink's decisions back (``colmz.rollback``).
    ROLLBACK_FIELDS = ("append_times", "append_times_progress", "to_append",
                       "to_append_progress", "output_progress")

    def __init__(self) -> None:
        self.append_times: set[int] = set()
        self.append_times_progress: Frontier = 0
        self.to_append: list[Updates] = []
        self.to_append_progress: Frontier = 0
        self.output_progress: Frontier = 0

    def process(self) -> tuple[Frontier, Updates | None] | None:
        # Times already written (by us or a racing writer) need nothing more.
        for t in sorted(self.append_times):
            if frontier_le(self.output_progress, t):
                break
            self.append_times.discard(t)
        pending = [t for t in self.append_times if not frontier_le(self.append_times_progress, t)]
        if not pending:
            # No append time in [output_progress, append_times_progress): an empty write
            # may advance the upper that far.
            if frontier_lt(self.output_progress, self.append_times_progress):
                return self.append_times_progress, None
            return None
        w = min(pending)
        if frontier_le(self.to_append_progress, w):
            # Not all the output at w is known yet; the upper can still move up to w.
            if self.output_progress is not None and self.output_progress < w:
                return w, None
            return None
        if w == MAX_TIME:
            raise OverflowError(f"a write at time {w} needs an upper past 2**64-1")
        if not self.to_append:
            return w + 1, None
        acc = consolidate(concat(self.to_append), since=w)
        self.to_append = [acc]
        k = int(np.searchsorted(acc.time, np.uint64(w), side="right"))
        return w + 1, acc.slice(0, k)


# ----------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Insert:
    """``INSERT INTO output <query>``: ``query`` is SQL text or a callable.

    A callable is called as ``query(inputs, refs, self_view)`` with Arrow tables (``inputs``
    and ``refs`` map names to tables) and returns the rows to insert.
    """

    query: str | Statement


@dataclass(frozen=True)
class Delete:
    """``DELETE FROM output WHERE <predicate>``: SQL predicate text (``None`` for all rows), or
    a callable returning the rows of ``self_view`` to delete."""

    predicate: str | Statement | None = None


class ContinualTask:
    """A continual task: statements run at every time its input receives inserts.

    Parameters
    ----------
    name : str
        The output's name (how statements refer to it: as of ``T - 1``).
    input : mapping of one name to a collection (or ``colmz.Updates``)
        The input; inside statements its name is the rows inserted at ``T``.
    body : sequence of statements
        Each an :class:`Insert`, a :class:`Delete`, or SQL text ``INSERT INTO <name> ...`` /
        ``DELETE FROM <name> [WHERE ...]`` (SQL needs the ``sql`` extra: DuckDB).
    references : mapping of names to collections (or ``Updates``), optional
        Other collections statements read, as of ``T``.
    columns : mapping of column name to Arrow type (or SQL type), optional
        The output's columns; inferred from the first SQL ``INSERT`` when omitted.
    snapshot : bool, default True
        On a first start, present the input's contents at ``as_of`` as inserts at ``as_of``.
    statements : ``"independent"`` (default, as upstream) or ``"sequential"``
        Whether each statement sees ``O@(T-1)`` or also the earlier statements' changes.
    output : collection, optional
        Where to write. One with history (upper > 0, and past ``as_of`` when given) is
        resumed: no snapshot, first write at its upper. A new in-memory collection when
        omitted.
    as_of : int, optional
        The initial as-of ``I``; defaults to the input's last complete time on a first start.
    connection : DuckDB connection, optional
        Where SQL statements run (a new ``colmz.sql.session()`` when omitted: replacement
        scans off, configuration locked). A connection given here is used as it is.
    batch : bool, default True
        Evaluate a run of consecutive times in one query per statement when the statements
        allow it (see :attr:`batchable`), and a single time's statements in one query when
        that is exact; ``False`` runs every statement on its own at every time -- the
        reference, which gives the same output.

    Examples
    --------
    >>> events = MemoryCollection({"k": pa.int64()})
    >>> task = ContinualTask("seen", {"events": events},
    ...                      [Insert(lambda ins, refs, me: ins["events"])],
    ...                      columns={"k": pa.int64()})
    >>> events.compare_and_append(Updates({"k": [1, 1]}, time=[1, 1], diff=[1, 1]), 0, 2)
    >>> task.run()
    >>> task.output.snapshot(1).to_pylist(), task.output.upper
    ([(1, 1, 2)], 2)
    """

    #: The task's progress, for ``colmz.rollback``: the sink's decisions (rolled back in
    #: place), the output view, the next time, the pending snapshot and the stats (a
    #: rolled-back run did not happen: its times are processed again). Not its collections:
    #: whoever owns them (a catalog) rolls them back.
    ROLLBACK_FIELDS = ("_sink", "_view", "_next", "_snapshot_at", "stats")

    def __init__(
        self,
        name: str,
        input: Mapping[str, object],
        body: Sequence[Insert | Delete | str],
        *,
        references: Mapping[str, object] | None = None,
        columns=None,
        snapshot: bool = True,
        statements: str = "independent",
        output=None,
        as_of: int | None = None,
        connection=None,
        batch: bool = True,
    ):
        # A name is a str, or (a catalog's object outside its default schema) a qualified
        # name: a tuple of str parts, colmz.sql.QualifiedName, which statements may write
        # qualified or, as the relation's own name, by its last part.
        if not (isinstance(name, str) and name) and not (
            isinstance(name, tuple) and name and all(isinstance(p, str) and p for p in name)
        ):
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if not isinstance(input, Mapping) or len(input) != 1:
            raise ValueError(
                f"input must map exactly one name to a collection (a continual task has one "
                f"input), got {type(input).__name__} of {len(input) if isinstance(input, Mapping) else '?'}"
            )
        (input_name, input_coll), = input.items()
        if input_name == name:
            raise ValueError(f"continual task output {name!r} is not allowed to be its input")
        if statements not in ("independent", "sequential"):
            raise ValueError(f"statements must be 'independent' or 'sequential', got {statements!r}")
        if not isinstance(snapshot, bool):
            raise TypeError(f"snapshot must be a bool, got {snapshot!r}")
        if not isinstance(batch, bool):
            raise TypeError(f"batch must be a bool, got {batch!r}")
        refs = dict(references or {})
        if name in refs:
            raise ValueError(f"references name the output {name!r}: it is read as of T-1 already")
        if input_name in refs:
            raise ValueError(f"references name the input {input_name!r}: within the task it is the inserts at T")
        self.name = name
        self.input_name = input_name
        self.input = _as_collection(input_coll, "input")
        if output is not None and output is self.input:
            raise ValueError(f"continual task output {name!r} is not allowed to be its input")
        self.references = {k: _as_collection(v, f"references[{k!r}]") for k, v in refs.items()}
        self.statements = statements
        self.snapshot = snapshot
        # Each collection a statement names is registered with DuckDB under a name of colmz's
        # (DuckDB folds identifiers' case; "T" and t are two collections here).
        self.duckdb = TaskDuckDB([name, input_name, *refs], connection)
        self.compiled = [self._compile(s, i) for i, s in enumerate(body)]
        # Append times come from the input only if some statement reads it.
        self.reads_input = any(b.reads(input_name) for b in self.compiled)
        if columns is not None:
            schema = schema_of(columns)
        elif output is not None:
            schema = tuple(output.schema)
        else:
            schema = batched.infer_columns(self)
        self.schema = schema
        if output is None:
            output = MemoryCollection(schema)
        elif [c.name for c in output.schema] != [c.name for c in schema]:
            raise SchemaError(
                f"output has columns {[c.name for c in output.schema]}, the task {[c.name for c in schema]}"
            )
        self.output = output
        batched.check_statements(self)
        # One DuckDB query per time for all statements, where that is exact (else None).
        self._union = batched.union_query(self) if batch else None
        self.stats = {"times_processed": 0, "writes": 0, "skipped_writes": 0,
                      "batches": 0, "batched_times": 0, "batch_fallbacks": 0,
                      "union_times": 0}
        # The statements lifted to evaluate many times in one query each (None: the task is
        # not batchable and always runs time by time).
        self._lifted = batched.lift(self) if batch else None
        self._sink = SinkState()
        self._view: Updates | None = None
        if as_of is not None:
            as_of = check_time(as_of, "as_of")
        if output.upper is not None and output.upper > 0 and (as_of is None or output.upper > as_of):
            # Restart: resume at the output's upper; the snapshot is never replayed. (An
            # output not yet past the initial as-of given has not written it: a first start.)
            self.initial_as_of = None
            self.as_of = output.upper - 1
            self._next = output.upper
            self._snapshot_at = None
            self._sink.output_progress = output.upper
        elif output.upper is None:
            raise ValueError(f"output {name!r} is sealed (upper is the empty frontier)")
        else:
            if as_of is None:
                up = self.input.upper
                as_of = self.input.since if up is None else max(up - 1, self.input.since)
            as_of = check_time(as_of, "as_of")
            self.initial_as_of = self.as_of = as_of
            self._next = as_of if snapshot else as_of + 1
            self._snapshot_at = as_of if snapshot else None
            # Bootstrap: the empty output becomes readable below the first write.
            if output.upper < as_of:
                output.compare_and_append(Updates.empty(schema), output.upper, as_of)
            self._sink.output_progress = as_of
            self._view = Updates.empty(schema)  # O@(I-1) is empty

    # ------------------------------------------------------------------ setup

    def _compile(self, s, i: int) -> CompiledStatement:
        if isinstance(s, str):
            from colmz.sql import (
                DeleteStatement,
                InsertStatement,
                as_qualified,
                parse,
                resolve_item,
                sql_name,
            )

            parsed = parse(s)
            if len(parsed) != 1 or not isinstance(parsed[0], (InsertStatement, DeleteStatement)):
                raise ValueError(f"body[{i}] must be one INSERT or DELETE statement, got {s!r}")
            p = parsed[0]
            # Names resolve as Materialize's: INSERT INTO x.t does not write a task named t.
            if resolve_item((*p.qualifier, p.table)) != as_qualified(self.name):
                written = sql_name((*p.qualifier, p.table)) if p.qualifier else p.table
                raise ValueError(f"body[{i}] writes {written!r}; a continual task writes only its output {display_name(self.name)!r}")
            if isinstance(p, InsertStatement):
                if p.columns is not None:
                    raise ValueError(f"body[{i}]: a column list in a continual task INSERT is not supported")
                s = Insert(p.query)
            else:
                s = Delete(p.where)
        if isinstance(s, Insert):
            return CompiledStatement("insert", s.query, i, self.name, self.duckdb)
        if isinstance(s, Delete):
            return CompiledStatement("delete", s.predicate, i, self.name, self.duckdb)
        raise TypeError(f"body[{i}] must be Insert, Delete or SQL text, got {type(s).__name__}")

    def bind(self, translated: str) -> str:
        """Translated SQL with the collections it names bound to their registered names."""
        return self.duckdb.bind(translated)

    # ------------------------------------------------------------------ running

    @property
    def frontier(self) -> Frontier:
        """Times below this are complete in the input and every reference."""
        return meet(self.input.upper, *(r.upper for r in self.references.values()))

    def run(self) -> None:
        """Process every complete time not yet processed, then advance the output's upper.

        A call that raises writes nothing for the time that failed (earlier times stay
        written) and can be retried.
        """
        frontier = self.frontier
        if not frontier_lt(self._next, frontier):
            return
        todo: list[tuple[int, Updates]] = []
        if self.reads_input:
            if self._snapshot_at is not None and self._snapshot_at == self._next:
                snap = self.input.snapshot(self._snapshot_at)
                todo.append((self._snapshot_at, _positives(snap)))
                lower = self._snapshot_at + 1
            else:
                lower = self._next
            if frontier is None or lower < frontier:
                changes = _positives(self.input.updates(lower, frontier))
                todo.extend(_by_time(changes))
        todo = [(t, u) for t, u in todo if len(u)]
        done = self._run_batched(todo) if self._lifted is not None and len(todo) > 1 else 0
        for t, inserts in todo[done:]:
            if frontier_lt(t, self.output.upper) or self.output.upper is None:
                # Already written (by a racing task on the same output): nothing to do.
                self._view = None
                continue
            self._step(t, inserts)
        self._snapshot_at = None
        self._sink.append_times_progress = frontier
        self._sink.to_append_progress = frontier
        self._drain()
        self._next = frontier

    # ------------------------------------------------------------------ batches

    @property
    def batchable(self) -> bool:
        """Whether runs of consecutive times are evaluated in one query per statement.

        They are when statements are independent (the default), all are SQL, no ``INSERT``
        reads the output, and every ``DELETE`` predicate reads the output only through the
        row it tests (``name.column``, or bare columns): then ``ΔO(T)`` depends on the
        output only through which earlier rows are still there, and a batch computes, for
        each row, the first time a ``DELETE`` matches it (the proof is in ``_run_batched``).
        """
        return self._lifted is not None

    def _run_batched(self, todo: list[tuple[int, Updates]]) -> int:
        """Evaluate and write ``todo``'s times batch by batch; returns how many were done.

        Each batch's ``ΔO`` comes from :meth:`colmz.continual.batched.Lifted.evaluate`
        (which proves it equal to the time-by-time loop's) and is written in one
        compare-and-append covering the batch's times.

        Any failure (a SQL error at some time, a guard rail, a racing writer) leaves the
        failing batch unwritten and returns its start: the time-by-time loop then takes over
        and raises, or skips, exactly where it would have.
        """
        done = 0
        try:
            segments = self._lifted.segments(self, todo)
        except Exception:  # e.g. a reference whose changes were compacted away: the loop reads
            self.stats["batch_fallbacks"] += 1  # it as of each time instead
            return 0
        for seg in segments:
            if len(seg) < 2:
                return done
            t0 = seg[0][0]
            s = self._sink
            s.append_times_progress = t0
            s.to_append_progress = t0
            self._drain()
            if self.output.upper != t0:
                return done  # a racing writer is ahead: the loop skips what it wrote
            try:
                view = self._self_view(t0)
                delta = self._lifted.evaluate(self, seg, view)
            except Exception:
                self.stats["batch_fallbacks"] += 1
                return done
            if delta is None:
                self.stats["batch_fallbacks"] += 1
                return done
            t_last = seg[-1][0]
            try:
                self.output.compare_and_append(delta, t0, t_last + 1)
            except UpperMismatch:
                self._view = None
                return done
            self.stats["writes"] += 1
            self.stats["batches"] += 1
            self.stats["batched_times"] += len(seg)
            self.stats["times_processed"] += len(seg)
            s.output_progress = self.output.upper
            self._view = consolidate(concat([at_time(view, t_last), delta]), since=t_last) if len(delta) else at_time(view, t_last)
            done += len(seg)
        return done

    def _step(self, t: int, inserts: Updates) -> None:
        if t == MAX_TIME:
            raise OverflowError(
                f"continual task {display_name(self.name)!r}: a write at time {t} needs an upper past 2**64-1"
            )
        s = self._sink
        # Everything below t is settled: the output's upper may move to t first, which
        # makes O@(t-1) readable.
        s.append_times_progress = t
        s.to_append_progress = t
        self._drain()
        view = self._self_view(t)
        delta, after = self._evaluate(t, inserts, view)
        s.append_times.add(t)
        s.to_append.append(delta)
        s.append_times_progress = t + 1
        s.to_append_progress = t + 1
        self._view = after
        self._drain()
        # As upstream, the inserts of T are retracted at T + 1, so the sink's accumulated
        # output holds only the current time's change.
        if len(delta):
            s.to_append.append(at_time(delta, t + 1).negated())
        self.stats["times_processed"] += 1

    def _self_view(self, t: int) -> Updates:
        """``O@(t-1)``: kept from the previous step, or read once (on start or restart)."""
        if self._view is None:
            if t == 0 or t - 1 < self.output.since:
                self._view = Updates.empty(self.schema)
            else:
                self._view = self.output.snapshot(t - 1)
        return self._view

    def _drain(self) -> None:
        s = self._sink
        while (r := s.process()) is not None:
            new_upper, data = r
            data = data if data is not None else Updates.empty(self.schema)
            expected = self.output.upper
            wrote = False
            while frontier_lt(expected, new_upper):
                try:
                    self.output.compare_and_append(data, expected, new_upper)
                    wrote = True
                    break
                except UpperMismatch as e:
                    expected = e.current
            if wrote:
                self.stats["writes"] += 1
            elif len(data):
                # Someone else (a racing task) wrote this time: trust their output.
                self.stats["skipped_writes"] += 1
                self._view = None
            s.output_progress = self.output.upper

    def _evaluate(self, t: int, inserts: Updates, view: Updates) -> tuple[Updates, Updates]:
        """``ΔO(t)`` and ``O@t``; raises before anything is written."""
        inputs = {self.input_name: expand(inserts, f"input {self.input_name!r}")}
        refs_cache: dict[str, pa.Table] = {}

        def ref(name):
            if name not in refs_cache:
                refs_cache[name] = relation_rows(self.references[name], t, f"reference {name!r}")
            return refs_cache[name]

        view_t = at_time(view, t)
        view_tbl = expand(view_t, f"output {display_name(self.name)!r}")
        parts = []
        if self._union is not None:
            parts = batched.evaluate_union(self, self._union, t, inputs, ref, view_tbl)
        with self.duckdb.registered() as reg:
            for b in self.compiled if not parts else ():
                needed = {k: ref(k) for k in self.references if b.reads(k)}
                rows = b.rows(reg, t, inputs, needed, view_tbl, self.schema)
                if b.kind == "delete" and b.sql is None:
                    _check_subset(rows, view_t, b.label)
                contrib = rows_to_updates(rows, t, 1 if b.kind == "insert" else -1)
                parts.append(contrib)
                if self.statements == "sequential":
                    view_t = consolidate(concat([view_t, contrib]))
                    _check_nonnegative(view_t, display_name(self.name), b.index)
                    view_tbl = expand(view_t, f"output {display_name(self.name)!r}")
        if not parts:
            return Updates.empty(self.schema), view
        delta = consolidate(concat(parts))
        if self.statements == "sequential":
            return delta, view_t
        after = consolidate(concat([at_time(view, t), delta])) if len(delta) else view
        _check_nonnegative(after, display_name(self.name), None)
        return delta, after

    # ------------------------------------------------------------------ display

    def __repr__(self) -> str:
        refs = f", references={sorted(self.references)}" if self.references else ""
        kinds = ", ".join(kind for kind, _ in self._statement_texts())
        return (f"ContinualTask({display_name(self.name)!r} ON INPUT {self.input_name!r}{refs}, frontier="
                f"{'[]' if self.frontier is None else self.frontier}, statements=[{kinds}], "
                f"columns={[s.name for s in self.schema]})")

    def _repr_html_(self) -> str:
        from colmz.display import continual_task_html

        return continual_task_html(self, self._statement_texts())

    def _statement_texts(self) -> list[tuple[str, str]]:
        """Each statement's kind and text (a callable's name), in body order."""
        out = []
        for b in self.compiled:
            if b.fn is not None:
                text = f"<callable {getattr(b.fn, '__name__', type(b.fn).__name__)}>"
            elif b.kind == "delete" and b.text is None:
                text = "(all rows)"
            else:
                text = b.text or ""
            out.append((b.kind.upper(), text))
        return out



def _check_nonnegative(contents: Updates, name: str, index: int | None) -> None:
    d = contents.diff
    if len(d) and d.min() < 0:
        i = int(np.argmax(d < 0))
        row = contents.slice(i, i + 1).to_pylist()[0][:-2]
        where = f" after statement {index + 1}" if index is not None else ""
        raise NegativeMultiplicity(
            f"continual task {name!r}: DELETE would leave row {row} with multiplicity "
            f"{int(d[i])}{where} (statements are evaluated independently against the output as "
            "of T-1; two DELETEs of one row retract it twice)"
        )


def _check_subset(rows: pa.Table, view: Updates, what: str) -> None:
    if rows.num_rows == 0:
        return
    t = int(view.time[0]) if len(view) else 0
    both = consolidate(concat([view, rows_to_updates(rows, t, -1)]))
    if len(both) and both.diff.min() < 0:
        i = int(np.argmax(both.diff < 0))
        row = both.slice(i, i + 1).to_pylist()[0][:-2]
        raise NegativeMultiplicity(f"{what} returned row {row} that the output does not hold")



def _positives(u: Updates) -> Updates:
    d = u.diff
    if len(d) == 0 or d.min() > 0:
        return u
    return u.take(np.flatnonzero(d > 0))


def _by_time(u: Updates) -> Iterable[tuple[int, Updates]]:
    if len(u) == 0:
        return []
    order = np.argsort(u.time, kind="stable")
    if not np.all(order[:-1] < order[1:]):
        u = u.take(order)
    times = u.time
    cuts = np.flatnonzero(np.diff(times)) + 1
    bounds = [0, *cuts.tolist(), len(u)]
    return [(int(times[a]), u.slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _as_collection(c, what: str):
    if isinstance(c, Updates):
        return MemoryCollection.from_updates(c)
    for attr in ("schema", "upper", "since", "snapshot", "updates"):
        if not hasattr(c, attr):
            raise TypeError(f"{what} must be a collection (e.g. MemoryCollection) or Updates, got {type(c).__name__}")
    return c

