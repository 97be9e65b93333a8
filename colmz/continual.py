"""``ContinualTask``: Materialize's continual tasks -- SQL triggers over collections at times.

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
process it evaluates them together when that provably gives the same output
(:attr:`ContinualTask.batchable`: independent SQL statements, no ``INSERT`` reading the
output, every ``DELETE`` predicate reading the output only through the row it tests). Each
statement becomes one query over all the batch's times: a ``LATERAL`` subquery per time binds
the input's name to that time's inserts and ``mz_now()`` to the time. ``INSERT`` rows
depend only on the time's inserts and references; a ``DELETE`` removes each row of the output
at the first batch time after its birth where its predicate holds (``cols IN (subquery)`` is
evaluated as a join with the subquery's rows per time, any other predicate against every
candidate row at every later time). Batches are cut where a reference changes (each reads one
content of every reference) and at :data:`BATCH_ROWS` input rows (a ``DELETE`` costs the
candidates times the batch's times). Whatever fails in a batch -- a guard rail, a SQL error at
one time, a racing writer -- leaves it unwritten and the time-by-time loop, the reference
semantics, takes over from its first time, so errors surface exactly where the loop raises
them. ``batch=False`` always uses the loop.

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
(``ValueError``); a statement whose columns do not match the task's raises
:class:`colmz.SchemaError`; a ``DELETE`` that would leave a multiplicity negative raises
:class:`NegativeMultiplicity`; a write at time ``2**64 - 1``, whose upper would be past the
last time, raises ``OverflowError``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

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
from colmz.updates import SchemaError, Updates

__all__ = [
    "BATCH_ROWS",
    "BATCH_ROWS_LINEAR",
    "EXPAND_LIMIT",
    "ContinualTask",
    "Delete",
    "Insert",
    "MemoryCollection",
    "RowCounts",
    "NegativeMultiplicity",
    "SinkState",
    "UpperMismatch",
    "conform",
    "expand",
    "rows_to_updates",
]

#: A batch of times evaluated together holds at most this many input rows (more in one time)
#: when some DELETE tests every candidate row at every time of the batch (its cost grows with
#: the square of the batch's length) ...
BATCH_ROWS = 1 << 16
#: ... and at most this many otherwise (the cost then grows with the matches, not with every
#: candidate at every time; the cap bounds memory and the matches of often repeated rows).
BATCH_ROWS_LINEAR = 1 << 17

#: ``expand`` makes at most this many rows (2**28): a collection is read by SQL as one row
#: per copy, and a multiplicity such as 2**62 cannot be materialized.
EXPAND_LIMIT = 1 << 28

Statement = Callable[[Mapping[str, pa.Table], Mapping[str, pa.Table], pa.Table], object]


class UpperMismatch(ValueError):
    """A compare-and-append whose expected upper is not the collection's; ``current`` is."""

    def __init__(self, expected: Frontier, current: Frontier):
        super().__init__(f"expected_upper {expected} does not match the collection's upper {current}")
        self.expected = expected
        self.current = current


class NegativeMultiplicity(ValueError):
    """A change that would leave some row with a negative multiplicity."""


# ----------------------------------------------------------------------------- conversions


def _schema_of(columns) -> tuple[ColumnSpec, ...]:
    if isinstance(columns, Mapping):
        items = list(columns.items())
    else:
        items = [(c.name, c.type) if isinstance(c, ColumnSpec) else tuple(c) for c in columns]
    out = []
    for name, typ in items:
        if isinstance(typ, str):
            from colmz.sql import arrow_type

            typ = arrow_type(typ)
        if not isinstance(typ, pa.DataType):
            raise TypeError(f"column {name!r} type must be a pyarrow DataType or SQL type name, got {typ!r}")
        out.append(ColumnSpec(str(name), typ))
    if not out:
        raise ValueError("columns must name at least one column")
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"columns has duplicate names: {names}")
    return tuple(out)


def expand(updates: Updates, what: str = "collection") -> pa.Table:
    """The data rows of ``updates`` as an Arrow table, each repeated by its diff.

    Diffs must be positive (``updates`` is a collection's contents); zero-copy when all are 1.
    More than :data:`EXPAND_LIMIT` rows in all raise ``ValueError`` naming ``what``, the row
    of the largest multiplicity and the limit (rather than allocating them).

    >>> u = Updates({"k": [1, 2]}, time=[0, 0], diff=[1, 2])
    >>> expand(u).column("k").to_pylist()
    [1, 2, 2]
    """
    diff = updates.diff
    table = pa.Table.from_arrays(
        [updates.column(n) for n in updates.column_names], names=updates.column_names
    )
    if len(diff) == 0 or (diff.min() == 1 and diff.max() == 1):
        return table
    if diff.min() < 0:
        i = int(np.argmax(diff < 0))
        row = table.slice(i, 1).to_pylist()[0]
        raise NegativeMultiplicity(f"{what} holds row {row} with multiplicity {int(diff[i])}")
    # Each max is at most EXPAND_LIMIT, so the sum of fewer than 2**34 of them fits an int64.
    if diff.max() > EXPAND_LIMIT or int(diff.sum()) > EXPAND_LIMIT:
        i = int(np.argmax(diff))
        row = table.slice(i, 1).to_pylist()[0]
        total = int(diff.sum()) if diff.max() <= EXPAND_LIMIT else None
        raise ValueError(
            f"{what} holds row {row} with multiplicity {int(diff[i])}"
            + (f" ({total} rows in all)" if total is not None else "")
            + f": SQL reads a collection as one row per copy, and colmz expands at most "
            f"EXPAND_LIMIT = {EXPAND_LIMIT} rows (colmz.continual.EXPAND_LIMIT); read it with "
            "Catalog.read / snapshot, which keep multiplicities"
        )
    idx = np.repeat(np.arange(len(diff), dtype=np.int64), diff)
    return table.take(pa.array(idx))


def rows_to_updates(rows: pa.Table, time: int, diff: int = 1) -> Updates:
    """Each row of ``rows`` as an update ``(row, time, diff)``.

    >>> rows_to_updates(pa.table({"k": [5]}), 3, -1).to_pylist()
    [(5, 3, -1)]
    """
    n = rows.num_rows
    return Updates(
        {name: rows.column(name) for name in rows.column_names},
        time=np.full(n, time, np.uint64),
        diff=np.full(n, diff, np.int64),
    )


def _family(t: pa.DataType) -> str:
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_duration(t):
        return "interval"
    return str(t)


def conform(rows, schema: Sequence[ColumnSpec], what: str) -> pa.Table:
    """``rows`` (Arrow table/batch or pandas frame) with the columns and types of ``schema``.

    Columns match by position (as in SQL ``INSERT``); a column whose type is of another kind
    (text for a number, say) raises :class:`colmz.SchemaError`; within a kind values are cast,
    and a value that does not fit raises ``OverflowError``.

    >>> conform(pa.table({"x": [1]}), (ColumnSpec("k", pa.int32()),), "t").schema
    k: int32
    """
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    elif isinstance(rows, pa.RecordBatchReader):
        rows = rows.read_all()
    elif not isinstance(rows, pa.Table):
        if hasattr(rows, "to_arrow_table"):
            rows = rows.to_arrow_table()
        elif type(rows).__module__.startswith("pandas"):
            rows = pa.Table.from_pandas(rows, preserve_index=False)
        else:
            raise TypeError(
                f"{what}: a statement must return a pyarrow Table (or RecordBatch, pandas "
                f"DataFrame), got {type(rows).__name__}"
            )
    if rows.num_columns != len(schema):
        raise SchemaError(
            f"{what} query columns did not match: the task has {len(schema)} column(s) "
            f"{[c.name for c in schema]}, the query gives {rows.num_columns} {rows.column_names}"
        )
    arrays = []
    for i, spec in enumerate(schema):
        col = rows.column(i)
        if col.type != spec.type:
            have, want = _family(col.type), _family(spec.type)
            if have != "null" and have != want:
                raise SchemaError(
                    f"{what} query columns did not match: column {i + 1} {spec.name!r} is "
                    f"{spec.type} but the query gives {rows.column_names[i]!r} of type {col.type}"
                )
            try:
                col = col.cast(spec.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise OverflowError(
                    f"{what}: column {spec.name!r}: a value does not fit {spec.type}: {e}"
                ) from None
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, names=[c.name for c in schema])


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

    def __init__(self, schema, *, since: int = 0, upper: int = 0,
                 base: Callable[[], Updates] | None = None, base_consolidated: bool = False):
        self._schema = _schema_of(schema)
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
            self._times[:k] = [since] if len(merged) else []
            self._batches[:k] = [merged] if len(merged) else []
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
            updates = _cast_to(updates, self._schema)
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
        got = self._base()
        u = _at(_cast_to(got, self._schema), self._since)
        if not (self._base_consolidated and u.schema == got.schema):  # (a cast: consolidate)
            u = consolidate(u)
        self._base = None
        if len(u):
            self._times.insert(0, self._since)
            self._batches.insert(0, u)
            if self._acc_n:
                self._acc, self._acc_n = None, 0

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
                self._acc = (_at(parts[0], self._times[k - 1]) if len(parts) == 1
                             else consolidate(concat(parts), since=self._times[k - 1]))
                self._acc_n = k
            else:
                self._count(len(self._acc) if self._acc is not None else 0)
            if self._acc is None:
                return Updates.empty(self._schema)
            return _at(self._acc, as_of)
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
        later appends and restores keep it up to date for the size of their changes, so a
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
        out = self._counts.counts(_cast_to(rows, self._schema))
        self.stats["counts_work"] = self._counts.work
        return out

    def checkpoint(self) -> tuple:
        """A marker of the current state for :meth:`restore`: its upper and since (O(1))."""
        return (self._upper, self._since)

    def restore(self, checkpoint: tuple) -> None:
        """Undo every append since :meth:`checkpoint`: drop the changes at or after its upper.

        Costs the updates dropped. Raises ``ValueError`` when the since advanced meanwhile
        (compaction cannot be undone).
        """
        upper, since = checkpoint
        if since != self._since:
            raise ValueError(f"cannot restore to since {since}: the since advanced to {self._since}")
        if upper is not None:
            k = bisect.bisect_left(self._times, upper)
            if self._counts is not None and k < len(self._batches):
                self._counts.add(concat(self._batches[k:]).negated())
            del self._times[k:]
            del self._batches[k:]
            if self._acc_n > k:
                self._acc, self._acc_n = None, 0
        self._upper = upper


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
            self._runs[-2:] = [merged] if len(merged[0]) else []

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


def _at(u: Updates, time: int) -> Updates:
    if len(u) == 0 or (u.time[0] == time and u.time[-1] == time):
        return u
    return Updates(
        {n: u.column(n) for n in u.column_names},
        np.full(len(u), time, np.uint64),
        u.diff,
        _trusted=True,
    )


def _cast_to(u: Updates, schema: Sequence[ColumnSpec]) -> Updates:
    if tuple(u.schema) == tuple(schema):
        return u
    cols = {}
    for spec in schema:
        col = u.column(spec.name)
        if col.type != spec.type:
            if _family(col.type) not in ("null", _family(spec.type)):
                raise SchemaError(f"column {spec.name!r} is {spec.type}, the updates give {col.type}")
            col = col.cast(spec.type, safe=True)
        cols[spec.name] = col
    return Updates(cols, u.time, u.diff, copy=False)  # colmz-owned arrays


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
        Where SQL statements run (a fresh ``colmz.sql.connect()`` when omitted: replacement
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
        if not isinstance(name, str) or not name:
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
        self._con = connection
        self._shared_con = connection is not None
        self._kept: dict[str, pa.Table] = {}  # tables left registered on the task's own connection
        # Each collection a statement names is registered with DuckDB under a name of colmz's
        # (DuckDB folds identifiers' case; "T" and t are two collections here).
        from colmz.sql import relation_name

        self._registered_as = {n: relation_name(i) for i, n in enumerate([name, input_name, *refs])}
        self._body = [self._compile(s, i) for i, s in enumerate(body)]
        # Append times come from the input only if some statement reads it.
        self.reads_input = any(b.reads(input_name) for b in self._body)
        if columns is not None:
            schema = _schema_of(columns)
        elif output is not None:
            schema = tuple(output.schema)
        else:
            schema = self._infer_columns()
        self.schema = schema
        if output is None:
            output = MemoryCollection(schema)
        elif [c.name for c in output.schema] != [c.name for c in schema]:
            raise SchemaError(
                f"output has columns {[c.name for c in output.schema]}, the task {[c.name for c in schema]}"
            )
        self.output = output
        self._check_statements()
        # One DuckDB query per time for all statements, where that is exact (else None).
        self._union = self._union_sql() if batch else None
        self.stats = {"times_processed": 0, "writes": 0, "skipped_writes": 0,
                      "batches": 0, "batched_times": 0, "batch_fallbacks": 0,
                      "union_times": 0}
        # The statements lifted to evaluate many times in one query each (None: the task is
        # not batchable and always runs time by time).
        self._lifted = self._lift() if batch else None
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

    def checkpoint(self) -> tuple:
        """An opaque copy of the task's progress (not its output), for :meth:`restore`."""
        sk = self._sink
        sink = (set(sk.append_times), sk.append_times_progress, list(sk.to_append),
                sk.to_append_progress, sk.output_progress)
        return (sink, self._view, self._next, self._snapshot_at, dict(self.stats))

    def restore(self, checkpoint: tuple) -> None:
        """Return to the progress of a :meth:`checkpoint` (restore the output separately)."""
        sink, self._view, self._next, self._snapshot_at, stats = checkpoint
        sk = self._sink
        (times, sk.append_times_progress, to_append, sk.to_append_progress, sk.output_progress) = sink
        sk.append_times, sk.to_append = set(times), list(to_append)
        self.stats = dict(stats)

    # ------------------------------------------------------------------ setup

    def _compile(self, s, i: int) -> _Compiled:
        if isinstance(s, str):
            from colmz.sql import DeleteStatement, InsertStatement, parse

            parsed = parse(s)
            if len(parsed) != 1 or not isinstance(parsed[0], (InsertStatement, DeleteStatement)):
                raise ValueError(f"body[{i}] must be one INSERT or DELETE statement, got {s!r}")
            p = parsed[0]
            if p.table != self.name:
                raise ValueError(f"body[{i}] writes {p.table!r}; a continual task writes only its output {self.name!r}")
            if isinstance(p, InsertStatement):
                if p.columns is not None:
                    raise ValueError(f"body[{i}]: a column list in a continual task INSERT is not supported")
                s = Insert(p.query)
            else:
                s = Delete(p.where)
        if isinstance(s, Insert):
            return _Compiled("insert", s.query, i, self)
        if isinstance(s, Delete):
            return _Compiled("delete", s.predicate, i, self)
        raise TypeError(f"body[{i}] must be Insert, Delete or SQL text, got {type(s).__name__}")

    def _infer_columns(self) -> tuple[ColumnSpec, ...]:
        for b in self._body:
            if b.kind == "insert" and b.sql is not None and not b.reads(self.name):
                empty = {self.input_name: _empty_table(self.input.schema)}
                refs = {k: _empty_table(v.schema) for k, v in self.references.items()}
                from colmz.sql import rename_like_postgres

                with _Registered(self) as reg:
                    table = rename_like_postgres(b.run_sql(reg, 0, empty, refs, None), b.text)
                return tuple(
                    ColumnSpec(f.name, _storable(f.type)) for f in table.schema
                )
        raise ValueError(
            f"continual task {self.name!r}: columns= is required (no SQL INSERT to infer them from)"
        )

    def _check_statements(self) -> None:
        """Plan-time check: every SQL statement runs, and its columns match the task's."""
        empty = {self.input_name: _empty_table(self.input.schema)}
        refs = {k: _empty_table(v.schema) for k, v in self.references.items()}
        view = _empty_table(self.schema)
        with _Registered(self) as reg:
            for b in self._body:
                if b.sql is not None:
                    raw = b.run_sql(reg, 0, empty, {k: v for k, v in refs.items() if b.reads(k)}, view)
                    b.raw_types = [f.type for f in raw.schema]
                    conform(raw, self.schema, f"CONTINUAL TASK {self.name}")

    def _union_sql(self) -> tuple[str, str] | None:
        """All statements as one query (a ``UNION ALL`` tagged by statement), with its
        ``mz_now()`` form, when that is exact: independent SQL statements whose results
        already have the task's column types (so the union coerces nothing)."""
        from colmz.sql import uses_now

        body = self._body
        if self.statements != "independent" or len(body) < 2 or any(b.sql is None for b in body):
            return None
        types = [c.type for c in self.schema]
        if any(b.raw_types != types for b in body):
            return None
        forms = {b.now_form for b in body if uses_now(b.sql)}
        if len(forms) > 1:
            return None
        parts = [f"SELECT {i} AS __colmz_stmt, __colmz_u{i}.* FROM ({b.sql}) __colmz_u{i}"
                 for i, b in enumerate(body)]
        return " UNION ALL ".join(parts), (forms.pop() if forms else "uint64")

    def bind(self, translated: str) -> str:
        """Translated SQL with the collections it names bound to their registered names."""
        from colmz.sql import bind_relations_as

        return bind_relations_as(translated, tuple(self._registered_as.items()))

    def _connection(self):
        if self._con is None:
            from colmz.sql import connect

            self._con = connect()
        return self._con

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

    def _lift(self) -> list[str] | None:
        """Each statement as one DuckDB query over all the times of a batch, or ``None``.

        The times are a table ``__colmz_times``; for each time a ``LATERAL`` subquery
        binds the input's name to that time's inserts and (for a ``DELETE``) the output's
        name to the candidate rows born before that time, then runs the statement as
        written. ``mz_now()`` is the lateral time. The result carries ``__colmz_time``.
        """
        if self.statements != "independent" or not self._body:
            return None
        if any(b.sql is None for b in self._body):
            return None
        from colmz.sql import identifier, now_sql, substitute_now, tokenize, translate

        cols = [c.name for c in self.schema]
        col_list = ", ".join(identifier(c) for c in cols)
        t_ref = "__colmz_t.__colmz_time"
        # The input's own columns (not the output's: the two schemas may differ).
        in_list = ", ".join(identifier(c.name) for c in self.input.schema)
        inp = (f"{identifier(self._registered_as[self.input_name])} AS (SELECT {in_list} FROM __colmz_in "
               f"WHERE __colmz_in.__colmz_time = {t_ref})")
        # __colmz_born is the birth time + 1, 0 for rows held before the batch: a candidate
        # is in O@(T-1) (unless deleted) when born + 1 <= T.
        me = (f"{identifier(self._registered_as[self.name])} AS (SELECT {col_list}, __colmz_cid FROM __colmz_cand "
              f"WHERE __colmz_cand.__colmz_born <= {t_ref})")
        lifted = []
        self._quadratic = False  # some DELETE tests every candidate at every time
        for b in self._body:
            if b.kind == "insert":
                if b.reads(self.name):
                    return None
                body = f"WITH {inp} SELECT * FROM ({b.sql}) __colmz_u"
            else:
                toks = tokenize(b.text or "")
                for j, tok in enumerate(toks):
                    if tok.kind in ("word", "qident") and tok.name == self.name:
                        # Only ``name.column`` (the tested row's own column) is row-local.
                        qualified = (
                            j + 2 < len(toks) and toks[j + 1].text == "."
                            and toks[j + 2].kind in ("word", "qident") and toks[j + 2].name in cols
                            and not (j > 0 and toks[j - 1].text == ".")
                        )
                        if not qualified:
                            return None
                semi = _semijoin(toks, b.text or "", self.name, cols)
                if semi is not None:
                    # ``(columns) IN (subquery)``: the subquery per time, joined with the
                    # candidates on the columns -- only the matching pairs are formed.
                    lhs, sub = semi
                    vs = [f"__colmz_v{i}" for i in range(len(lhs))]
                    on = " AND ".join(f"c.{identifier(c)} = s.{v}" for c, v in zip(lhs, vs))
                    body = substitute_now(self.bind(translate(sub)), now_sql(b.now_form, t_ref))
                    lifted.append(
                        f"SELECT s.__colmz_time AS __colmz_time, c.__colmz_cid FROM __colmz_cand c JOIN ("
                        f"SELECT DISTINCT {t_ref} AS __colmz_time, __colmz_s.* FROM __colmz_times __colmz_t, "
                        f"LATERAL (WITH {inp} SELECT * FROM ({body}) __colmz_u({', '.join(vs)})) __colmz_s"
                        f") s ON {on} AND c.__colmz_born <= s.__colmz_time"
                    )
                    continue
                self._quadratic = True
                # b.sql is SELECT * FROM <output> WHERE (predicate), bound: over the
                # candidates' CTE its * carries __colmz_cid.
                body = f"WITH {inp}, {me} SELECT __colmz_cid FROM ({b.sql}) __colmz_d"
            body = substitute_now(body, now_sql(b.now_form, t_ref))
            lifted.append(
                f"SELECT {t_ref} AS __colmz_time, __colmz_q.* FROM __colmz_times __colmz_t, "
                f"LATERAL ({body}) __colmz_q"
            )
        return lifted

    def _segments(self, todo: list[tuple[int, Updates]]) -> list[list[tuple[int, Updates]]]:
        """``todo`` cut where a reference the statements read changes (so each batch reads
        every reference at one content) and before the last time (a write there would
        overflow; the time-by-time path raises it)."""
        times = [t for t, _ in todo]
        cuts = set()
        for name, r in self.references.items():
            if not any(b.reads(name) for b in self._body):
                continue
            ch = r.updates(times[0] + 1, times[-1] + 1)
            for s in np.unique(ch.time).tolist() if len(ch) else []:
                # A change at s is first seen by the first time >= s.
                cuts.add(bisect.bisect_left(times, s))
        if times[-1] == MAX_TIME:
            cuts.add(len(times) - 1)
        # A row-local DELETE is tested against every candidate at every later time of its
        # batch, so a batch costs (output + its inserts) x its times: long batches are cut at
        # BATCH_ROWS input rows (one query's fixed cost is then spread over enough times).
        # Without one, costs follow the matches and a larger cap bounds them and memory.
        cap = BATCH_ROWS if self._quadratic else BATCH_ROWS_LINEAR
        n = 0
        for i, (_, u) in enumerate(todo):
            n += len(u)
            if n > cap and i > 0:
                cuts.add(i)
                n = len(u)
        bounds = [0, *sorted(c for c in cuts if 0 < c < len(times)), len(times)]
        return [todo[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def _run_batched(self, todo: list[tuple[int, Updates]]) -> int:
        """Evaluate and write ``todo``'s times batch by batch; returns how many were done.

        Equality with the time-by-time loop. Let the batch be times ``t1 < ... < tk``
        (the only times where statements run; references constant over the batch). An
        ``INSERT`` reads neither the output nor other statements' changes, so its rows at
        ``ti`` are a function of the inserts at ``ti``, the references and ``ti``: the
        lifted query computes exactly them. A ``DELETE`` with a row-local predicate ``p``
        removes at ``ti`` every copy in ``O@(ti-1)`` whose value satisfies ``p(ti)``. A copy
        is *born* before the batch (in ``O@(t1-1)``) or inserted at some ``tj``; by induction
        over ``i`` it is in ``O@(ti-1)`` exactly when it was born before ``ti`` and no
        ``DELETE`` matched it at a batch time in between. So each copy leaves at the first
        batch time after its birth where some ``DELETE`` matches it, contributing ``-1`` per
        matching statement there. When two statements match a copy at that time the copy
        model no longer holds (the loop raises :class:`NegativeMultiplicity` unless inserts
        of the same value at that time make up for it), so the batch is handed to the loop. Copies of one value born at one time share their fate, so they
        are one candidate row with a multiplicity. Summing inserts and removals per time
        gives each ``ΔO(ti)``, consolidated as the loop's.

        Any failure (a SQL error at some time, a guard rail, a racing writer) leaves the
        failing batch unwritten and returns its start: the time-by-time loop then takes over
        and raises, or skips, exactly where it would have.
        """
        done = 0
        try:
            segments = self._segments(todo)
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
                delta = self._evaluate_batch(seg, view)
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
            self._view = consolidate(concat([_at(view, t_last), delta]), since=t_last) if len(delta) else _at(view, t_last)
            done += len(seg)
        return done

    def _evaluate_batch(self, seg: list[tuple[int, Updates]], view: Updates) -> Updates | None:
        """``ΔO`` at every time of ``seg`` (one batch), or ``None`` when the loop must run it."""
        times = np.array([t for t, _ in seg], np.uint64)
        t0 = int(times[0])
        ins = concat([u for _, u in seg])
        inputs = expand(ins, f"input {self.input_name!r}")
        rep = ins.time if np.all(ins.diff == 1) else np.repeat(ins.time, ins.diff)
        inputs = inputs.append_column("__colmz_time", pa.array(rep, pa.uint64()))
        refs = {k: expand(r.snapshot(t0), f"reference {k!r}") for k, r in self.references.items()
                if any(b.reads(k) for b in self._body)}
        names = [c.name for c in self.schema]
        what = f"CONTINUAL TASK {self.name}"
        from colmz.sql import run_query

        with _Registered(self, transient=True) as reg:
            reg.ensure("__colmz_times", pa.table({"__colmz_time": pa.array(times, pa.uint64())}))
            reg.ensure("__colmz_in", inputs)
            for k, v in refs.items():
                reg.ensure(k, v)
            inserted = []
            for b, q in zip(self._body, self._lifted):
                if b.kind == "insert":
                    out, _ = run_query(reg.con, q, t0, "uint64")
                    rows = conform(out.drop_columns(["__colmz_time"]), self.schema, what)
                    inserted.append((rows, out.column("__colmz_time").to_numpy().astype(np.uint64)))
            parts = [Updates({n: r.column(n) for n in names}, time=tt, diff=np.ones(len(tt), np.int64),
                             copy=False) for r, tt in inserted if r.num_rows]
            deletes = [q for b, q in zip(self._body, self._lifted) if b.kind == "delete"]
            if deletes:
                # Candidates: the output before the batch (born NULL) and every inserted copy.
                old = _at(view, t0)
                cand_rows = [pa.Table.from_arrays([old.column(n) for n in names], names=names)]
                born = [pa.array(np.zeros(len(old), np.uint64))]
                mult = [np.asarray(old.diff, np.int64)]
                for r, tt in inserted:
                    cand_rows.append(r)
                    born.append(pa.array(tt + np.uint64(1), pa.uint64()))
                    mult.append(np.ones(len(tt), np.int64))
                cand = pa.concat_tables(cand_rows)
                mult = np.concatenate(mult)
                cand = cand.append_column("__colmz_born", pa.concat_arrays(born))
                cand = cand.append_column("__colmz_cid", pa.array(np.arange(len(cand), dtype=np.int64)))
                reg.ensure("__colmz_cand", cand)
                hit_t, hit_c = [], []
                for q in deletes:
                    # Each statement's first matching time per candidate.
                    out, _ = run_query(reg.con, "SELECT __colmz_cid, min(__colmz_time) AS __colmz_time "
                                       f"FROM ({q}) __colmz_h GROUP BY __colmz_cid", t0, "uint64")
                    hit_t.append(out.column("__colmz_time").to_numpy().astype(np.uint64))
                    hit_c.append(out.column("__colmz_cid").to_numpy().astype(np.int64))
                ht, hc = np.concatenate(hit_t), np.concatenate(hit_c)
                if len(hc):
                    if len(deletes) > 1:
                        order = np.lexsort((ht, hc))
                        ht, hc = ht[order], hc[order]
                        first = np.ones(len(hc), bool)
                        first[1:] = hc[1:] != hc[:-1]
                        # Two statements first matching one copy at one time: only the loop
                        # knows what follows (it may raise there).
                        if np.any((ht[1:] == ht[:-1]) & ~first[1:]):
                            return None
                        ht, hc = ht[first], hc[first]
                    cid, when = hc, ht
                    gone = cand.select(names).take(pa.array(cid))
                    parts.append(Updates({n: gone.column(n) for n in names}, time=when,
                                         diff=-mult[cid], copy=False))
        if not parts:
            return Updates.empty(self.schema)
        return consolidate(concat(parts))

    def _step(self, t: int, inserts: Updates) -> None:
        if t == MAX_TIME:
            raise OverflowError(
                f"continual task {self.name!r}: a write at time {t} needs an upper past 2**64-1"
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
            s.to_append.append(_at(delta, t + 1).negated())
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

    def _evaluate_union(self, t: int, inputs, ref, view_tbl) -> list[Updates]:
        """Every statement's contribution at ``t`` from the one union query; ``[]`` when it
        fails (the statements then run one by one and raise what they raise)."""
        from colmz.sql import run_query

        sql, form = self._union
        try:
            with _Registered(self) as reg:
                for k, v in inputs.items():
                    reg.ensure(k, v)
                for k in self.references:
                    if any(b.reads(k) for b in self._body):
                        reg.ensure(k, ref(k))
                reg.ensure(self.name, view_tbl)
                out, _ = run_query(reg.con, sql, t, form)
            stmt = out.column(0).to_numpy()
            rows = conform(out.drop_columns([out.column_names[0]]), self.schema, f"CONTINUAL TASK {self.name}")
        except Exception:
            return []
        self.stats["union_times"] += 1
        sign = np.array([1 if b.kind == "insert" else -1 for b in self._body], np.int64)
        u = Updates({c.name: rows.column(i) for i, c in enumerate(self.schema)},
                    time=np.full(len(stmt), t, np.uint64), diff=sign[stmt.astype(np.int64)], copy=False)
        return [u]

    def _evaluate(self, t: int, inserts: Updates, view: Updates) -> tuple[Updates, Updates]:
        """``ΔO(t)`` and ``O@t``; raises before anything is written."""
        inputs = {self.input_name: expand(inserts, f"input {self.input_name!r}")}
        refs_cache: dict[str, pa.Table] = {}

        def ref(name):
            if name not in refs_cache:
                refs_cache[name] = expand(self.references[name].snapshot(t), f"reference {name!r}")
            return refs_cache[name]

        view_t = _at(view, t)
        view_tbl = expand(view_t, f"output {self.name!r}")
        parts = []
        if self._union is not None:
            parts = self._evaluate_union(t, inputs, ref, view_tbl)
        with _Registered(self) as reg:
            for b in self._body if not parts else ():
                needed = {k: ref(k) for k in self.references if b.reads(k)}
                rows = b.rows(reg, t, inputs, needed, view_tbl)
                if b.kind == "delete" and b.sql is None:
                    _check_subset(rows, view_t, f"{self.name!r} body[{b.index}] DELETE")
                contrib = rows_to_updates(rows, t, 1 if b.kind == "insert" else -1)
                parts.append(contrib)
                if self.statements == "sequential":
                    view_t = consolidate(concat([view_t, contrib]))
                    _check_nonnegative(view_t, self.name, b.index)
                    view_tbl = expand(view_t, f"output {self.name!r}")
        if not parts:
            return Updates.empty(self.schema), view
        delta = consolidate(concat(parts))
        if self.statements == "sequential":
            return delta, view_t
        after = consolidate(concat([_at(view, t), delta])) if len(delta) else view
        _check_nonnegative(after, self.name, None)
        return delta, after

    # ------------------------------------------------------------------ display

    def __repr__(self) -> str:
        refs = f", references={sorted(self.references)}" if self.references else ""
        kinds = ", ".join(kind for kind, _ in self._statement_texts())
        return (f"ContinualTask({self.name!r} ON INPUT {self.input_name!r}{refs}, frontier="
                f"{'[]' if self.frontier is None else self.frontier}, statements=[{kinds}], "
                f"columns={[s.name for s in self.schema]})")

    def _repr_html_(self) -> str:
        from colmz.display import continual_task_html

        return continual_task_html(self, self._statement_texts())

    def _statement_texts(self) -> list[tuple[str, str]]:
        """Each statement's kind and text (a callable's name), in body order."""
        out = []
        for b in self._body:
            if b.fn is not None:
                text = f"<callable {getattr(b.fn, '__name__', type(b.fn).__name__)}>"
            elif b.kind == "delete" and b.text is None:
                text = "(all rows)"
            else:
                text = b.text or ""
            out.append((b.kind.upper(), text))
        return out


def _semijoin(toks, text: str, name: str, cols: list[str]) -> tuple[list[str], str] | None:
    """``(columns, subquery)`` when a DELETE predicate is exactly ``cols IN (subquery)``
    with ``cols`` the output's own columns and a subquery that does not read the output."""
    from colmz.sql import referenced_names

    def column(j: int) -> tuple[str, int] | None:
        # ``col`` or ``name.col`` at toks[j]: (column, next index)
        if j + 2 < len(toks) and toks[j].kind in ("word", "qident") and toks[j].name == name \
                and toks[j + 1].text == ".":
            j += 2
        if j < len(toks) and toks[j].kind in ("word", "qident") and toks[j].name in cols:
            return toks[j].name, j + 1
        return None

    lhs: list[str] = []
    if toks and toks[0].text == "(":
        j = 1
        while True:
            c = column(j)
            if c is None:
                return None
            lhs.append(c[0])
            j = c[1]
            if j < len(toks) and toks[j].text == ",":
                j += 1
                continue
            if j < len(toks) and toks[j].text == ")":
                j += 1
                break
            return None
    else:
        c = column(0)
        if c is None:
            return None
        lhs, j = [c[0]], c[1]
    if not (j + 2 < len(toks) and toks[j].upper == "IN" and toks[j + 1].text == "(" and toks[-1].text == ")"):
        return None
    depth = 0
    for k in range(j + 1, len(toks)):
        if toks[k].kind == "op" and toks[k].text in "([":
            depth += 1
        elif toks[k].kind == "op" and toks[k].text in ")]":
            depth -= 1
            if depth == 0 and k != len(toks) - 1:
                return None  # the parenthesis closes before the end: more follows
    if toks[j + 2].upper not in ("SELECT", "WITH", "VALUES", "TABLE"):
        return None
    sub = text[toks[j + 2].start : toks[-1].start]
    if name in referenced_names(sub):
        return None
    return lhs, sub


def _check_nonnegative(contents: Updates, name: str, index: int | None) -> None:
    d = contents.diff
    if len(d) and d.min() < 0:
        i = int(np.argmax(d < 0))
        row = contents.slice(i, i + 1).to_pylist()[0][:-2]
        where = f" after body[{index}]" if index is not None else ""
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


class _Compiled:
    """One statement ready to run: SQL translated once, or a callable."""

    def __init__(self, kind: str, q, index: int, task: ContinualTask):
        self.kind = kind
        self.index = index
        self.task = task
        self.fn = None
        self.sql = None
        self.names: set[str] | None = None
        self.raw_types: list | None = None  # the SQL result's Arrow types (plan-time check)
        self.text = q if isinstance(q, str) else None
        self.now_form: str | None = None
        if callable(q):
            self.fn = q
        elif q is None or isinstance(q, str):
            from colmz.sql import check_expression, referenced_names, select_where, translate

            if kind == "insert":
                if not q:
                    raise ValueError(f"body[{index}]: INSERT needs a query")
                self.sql = task.bind(translate(q))
                self.names = referenced_names(q)
            else:
                if q:
                    check_expression(q, f"body[{index}] DELETE FROM {task.name}: predicate")
                self.sql = task.bind(select_where(task.name, translate(q) if q else None))
                self.names = referenced_names(q or "") | {task.name}
        else:
            raise TypeError(f"body[{index}] must hold SQL text or a callable, got {type(q).__name__}")

    def reads(self, name: str) -> bool:
        return self.names is None or name in self.names

    def run_sql(self, reg: _Registered, t: int, inputs, refs, view_tbl) -> pa.Table:
        from colmz.sql import SQLError, run_query

        for k, v in (*inputs.items(), *refs.items()):
            reg.ensure(k, v)
        if view_tbl is not None:
            reg.ensure(self.task.name, view_tbl)
        try:
            # mz_now()'s form is settled by the first evaluation (the plan-time check).
            table, self.now_form = run_query(reg.con, self.sql, t, self.now_form)
        except SQLError as e:
            # DuckDB names the registered tables: say the user's names.
            names = {r: n for n, r in self.task._registered_as.items()}
            msg = re.sub(r"__colmz_r\d+", lambda m: names.get(m.group(0), m.group(0)), str(e))
            raise SQLError(f"continual task {self.task.name!r} body[{self.index}]: {msg}") from None
        return table

    def rows(self, reg: _Registered, t: int, inputs, refs, view_tbl) -> pa.Table:
        what = f"CONTINUAL TASK {self.task.name}"
        if self.fn is not None:
            out = self.fn(dict(inputs), dict(refs), view_tbl)
        else:
            out = self.run_sql(reg, t, inputs, refs, view_tbl)
        return conform(out, self.task.schema, what)


class _Registered:
    """The Arrow tables registered in a DuckDB connection for one step, each registered
    once. On a connection the task shares (with a catalog) they are unregistered at the end;
    on its own connection they stay until replaced, saving an unregister and a register of
    every table that is the same object next step."""

    def __init__(self, task: ContinualTask, transient: bool = False):
        self.task = task
        self._con = None
        # A batch's tables are large and used once: never kept.
        self.shared = task._shared_con or transient
        self.tables: dict[str, pa.Table] = {} if self.shared else task._kept

    @property
    def con(self):
        if self._con is None:
            self._con = self.task._connection()
        return self._con

    def ensure(self, name: str, table: pa.Table) -> None:
        name = self.task._registered_as.get(name, name)  # a collection's registered name
        if self.tables.get(name) is not table:
            self.con.register(name, table)
            self.tables[name] = table

    def __enter__(self) -> _Registered:
        return self

    def __exit__(self, *exc) -> None:
        if self.shared:
            for name in self.tables:
                self._con.unregister(name)
                self.task._kept.pop(name, None)
            self.tables.clear()


def _storable(t: pa.DataType) -> pa.DataType:
    """The colmz column type for a query result type."""
    if pa.types.is_decimal(t):
        if t.scale == 0:
            return pa.int64()
        return pa.float64()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_null(t):
        raise SchemaError("a column of the query is NULL of unknown type: cast it (e.g. NULL::INT)")
    return t


def _empty_table(schema) -> pa.Table:
    return pa.table({c.name: pa.array([], c.type) for c in schema})


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
