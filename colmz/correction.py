"""``Correction``: the materialized-view sink's correction buffer (Materialize's CorrectionV2).

Design
------
A sink that keeps a persisted collection equal to a desired one inserts the desired updates,
inserts the persisted ones *negated* (the feedback of what it wrote), and writes whatever the
buffer holds before the next write upper: ``desired - persisted``. Updates leave the buffer
only by cancelling against their retractions. The buffer must stay cheap when it holds huge
numbers of updates at far-future times (the retractions a temporal filter schedules) and when
a restarted sink catches up through many times.

State
~~~~~
* ``since`` (frontier, starts at ``0``, only advances): times below it are advanced to it.
* ``boundary`` (frontier, starts at ``0``): the largest read upper so far.
* the *stage*: unsorted inserted batches, flushed (sorted, consolidated, routed) when they
  reach ``stage_size`` updates or when a read needs them.
* a *bucket chain* over the times ``>= boundary``: buckets ``[offset, offset + 2**bits)``, each
  holding a list of chains (``colmz.chain``) sorted by ``(time, data)``.
* ``pending_low``: chains whose times are all ``< boundary`` (mostly feedback, and the
  remainders of reads at a regressed upper).
* ``emitted``: one chain, exactly the consolidated result of the last read.

Invariants (checked by :meth:`Correction.check_invariants` in the tests)
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1. Every chain is strictly sorted by ``(time, data)``, holds no zero diff, and caches its count.
2. Every update in a bucket lies in that bucket's range; bucket offsets are ``>= boundary`` and
   the buckets tile ``[boundary, 2**64)``.
3. ``pending_low`` and ``emitted`` times are ``< boundary``; ``emitted`` times are ``< the last
   read upper`` and ``>= the since of that read``.
4. The chain invariant, on update counts: right after a push, the last chain of a bucket holds
   at most ``1 / chain_proportionality`` of the previous one's updates. So a bucket holds
   ``O(log N)`` chains and an insert costs ``O(log N)`` amortised copies.
5. The stage holds fewer than ``stage_size`` updates after an insert and none after a read.
6. ``since`` and ``boundary`` only advance.

Reads
~~~~~
``updates_before(upper)`` (only when ``since < upper``): flush the stage; *peel* the buckets
below ``upper`` off the bucket chain (splitting the one that straddles ``upper`` at its
midpoint until none does); split those chains, ``pending_low`` and the old ``emitted`` at
``upper``; merge the lower parts with times advanced to ``since`` into the new ``emitted``;
send the upper parts (a read at a regressed upper leaves some) back to ``pending_low``; then
*restore* the bucket chain with bounded fuel so adjacent buckets differ by at most 4x in width.
The updates at or beyond ``upper`` are never read, however many there are: that is the point.

``drain_stepwise(uppers)`` is the sink's loop (read before each upper, feed the read back
negated, advance the since to it) in one read: after step ``i`` everything below ``u_i`` has
cancelled against its feedback, so step ``i + 1`` emits exactly the updates in
``[u_i, u_{i+1})``, and all steps together emit one read at the last upper under the current
since. Only the last step's corrections and their negation stay buffered, as after the loop.

Schema. The first non-empty insert (or ``schema=`` at construction) fixes the data columns;
empty batches never do, so the empty read of an empty buffer can be fed back.

Advancing times to the since can unsort a time-ordered chain; the merge follows differential's
three strategies (``colmz.kernels.advance``): plain merge, per-stale-time sub-runs, or one
sort when there are ``MAX_STALE_RUNS`` (32) or more distinct stale times.

Trade-offs
~~~~~~~~~~
``chain_proportionality`` trades CPU for memory (more merging, fewer duplicates held). The
stage and chunk sizes are larger than Materialize's (8 KiB stage, ~2 MiB chunks) because
colmz pays Python-level overhead per chunk and per flush that Rust does not: the defaults were
chosen with ``asv_benchmarks/bench_correction.py``. Chunks are views of merge outputs; a split
copies at most one straddling chunk.

Per-read Python overhead matters as much as kernel speed at 16 updates a tick, so merges of
at most 48 updates sort their union in one compiled call (same result as the strategies), a
rollback snapshot is taken only when a call can fail part-way (a flush or a read), and the
bucket chain's restore stops at the first bucket the peel left unchanged.

Overflow. A flush or merge whose sum for one ``(data, time)`` leaves ``int64`` raises
``colmz.ops.DiffOverflowError`` naming the data row, the time (advanced to the since on reads)
and the exact sum, and rolls the buffer back. The updates stay buffered, so once the
retraction that brings the sum back in range is inserted, the same flush or read succeeds.

Deliberate differences from the original: a flush routes all staged updates (not a multiple
of the chunk capacity), which changes nothing observable; times are clamped to ``since`` when
the stage is flushed rather than when inserted, which is the same because ``since`` only
advances and a flush precedes every read.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from colmz.chain import Chain, Work, negated
from colmz.frontier import MAX_TIME, Frontier, check_frontier, frontier_le
from colmz.kernels.advance import advance_runs, strategy
from colmz.kernels.consolidate import sort_consolidate
from colmz.kernels.merge import merge_runs
from colmz.kernels.split import lower_bound
from colmz.ops import diff_overflow_error
from colmz.order import Layout, pad_keys, unify_layouts
from colmz.updates import Encoded, Updates, concat_encoded, unify_schemas

__all__ = ["Correction", "SinceRegression"]

_DOMAIN_BITS = 64
# Merges of at most this many updates sort the union instead (see _merge).
_SMALL_MERGE = 48
# Reads gathering at most this many updates take the one-sort path (see _read_small).
_SMALL_READ = 48


class SinceRegression(ValueError):
    """``advance_since`` was called with a since before the current one."""


_NO_CHAIN = Chain()


class _Bucket:
    """The chains of one bucket of the bucket chain, kept under the chain invariant."""

    __slots__ = ("chains",)

    def __init__(self, chains: list[Chain] | None = None):
        self.chains = chains or []

    def count(self) -> int:
        return sum(c.count for c in self.chains)

    def n_chunks(self) -> int:
        return sum(len(c.chunks) for c in self.chains)


class Correction:
    """A buffer of corrections ``desired - persisted`` for a materialized-view sink.

    Parameters
    ----------
    chain_proportionality : float, default 3.0
        Each chain of a bucket holds at least this many times the updates of the next one.
        Higher merges more (less memory, more CPU). Must be > 1.
    chunk_size : int, default 65536
        Updates per chunk of a chain.
    stage_size : int, default 65536
        Updates staged before they are sorted and routed. Reads flush the stage.
    restore_fuel : int, default 1_000_000
        Bucket splits allowed per read to restore the bucket chain's shape.
    schema : mapping of name to Arrow type, or sequence of ``ColumnSpec``, optional
        The data columns, for callers that know them before the first update: reads of an
        empty buffer then hand out empty batches of these columns. Without it the first
        non-empty insert fixes the columns; empty batches never do.

    Examples
    --------
    >>> import colmz
    >>> c = colmz.Correction()
    >>> c.insert(colmz.Updates({"k": ["a", "b"]}, time=[1, 5], diff=[1, 1]))
    >>> out = colmz.concat(c.updates_before(3))
    >>> out.to_pylist()
    [('a', 1, 1)]
    >>> c.insert_negated(out)          # the sink wrote it: feed it back
    >>> c.advance_since(3)
    >>> colmz.concat(c.updates_before(6)).to_pylist()
    [('b', 5, 1)]
    """

    def __init__(
        self,
        *,
        chain_proportionality: float = 3.0,
        chunk_size: int = 65536,
        stage_size: int = 65536,
        restore_fuel: int = 1_000_000,
        schema=None,
    ):
        if not (isinstance(chain_proportionality, (int, float)) and chain_proportionality > 1):
            raise ValueError(f"chain_proportionality must be a number > 1, got {chain_proportionality!r}")
        for name, v in (("chunk_size", chunk_size), ("stage_size", stage_size), ("restore_fuel", restore_fuel)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if schema is not None:
            try:
                # Updates.empty normalises a mapping or a sequence of ColumnSpec.
                schema = Updates.empty(schema).schema
            except (TypeError, ValueError, AttributeError, KeyError, pa.ArrowException) as e:
                raise ValueError(f"schema must map column names to Arrow types, got {schema!r}: {e}") from None
        self.chain_proportionality = float(chain_proportionality)
        self.chunk_size = chunk_size
        self.stage_size = stage_size
        self.restore_fuel = restore_fuel
        self._since: Frontier = 0
        self._boundary: Frontier = 0
        self._schema = schema
        self._stage: list[Encoded] = []
        self._stage_count = 0
        # The bucket chain: sorted offsets and, per offset, (bits, bucket).
        self._offsets: list[int] = [0]
        self._buckets: dict[int, tuple[int, _Bucket]] = {0: (_DOMAIN_BITS, _Bucket())}
        self._pending_low: list[Chain] = []
        self._emitted = Chain()
        self._well_formed = False
        self._clean_from: int | None = None  # see _peel / _restore
        self._last_read: tuple[Frontier, int] | None = None  # (upper, since) of the last read
        self.work = Work()

    # ------------------------------------------------------------------ properties

    @property
    def since(self) -> Frontier:
        """The compaction frontier: times below it are advanced to it."""
        return self._since

    @property
    def boundary(self) -> Frontier:
        """The largest read upper so far."""
        return self._boundary

    @property
    def schema(self):
        """The data columns of the buffered updates (``None`` until given at construction or
        fixed by the first non-empty insert)."""
        return self._schema

    def __len__(self) -> int:
        return (
            self._stage_count
            + sum(b.count() for _, b in self._buckets.values())
            + sum(c.count for c in self._pending_low)
            + self._emitted.count
        )

    # ------------------------------------------------------------------ inserting

    def insert(self, updates: Updates) -> None:
        """Stash ``updates``; times below the since are advanced to it (dropped if it is empty)."""
        self._insert(updates, negate=False)

    def insert_negated(self, updates: Updates) -> None:
        """Stash ``updates`` with every diff negated: the feedback of what the sink wrote."""
        self._insert(updates, negate=True)

    def _insert(self, updates: Updates, negate: bool) -> None:
        if not isinstance(updates, Updates):
            raise TypeError(f"updates must be colmz.Updates, got {type(updates).__name__}")
        n = len(updates)
        if not n:
            # An empty batch fixes no schema (a sink's first tick may have nothing to write,
            # and the empty read it feeds back has no columns); one with columns must still
            # agree with the columns already fixed.
            if self._schema is not None and updates.schema:
                unify_schemas(self._schema, updates.schema)
            return
        schema = updates.schema
        if schema is not self._schema:
            schema = schema if self._schema is None else unify_schemas(self._schema, schema)
        enc = updates.encode()
        if negate:
            enc = enc.negated()
        self._schema = schema
        if self._since is None:
            return
        if self._stage_count + n < self.stage_size:
            self._stage.append(enc)
            self._stage_count += n
            return
        snap = self._snapshot()
        self._stage.append(enc)
        self._stage_count += n
        try:
            self._flush_stage()
        except BaseException:
            self._rollback(snap)
            raise

    def _flush_stage(self) -> None:
        if not self._stage:
            return
        staged = concat_encoded(self._stage) if len(self._stage) > 1 else self._stage[0]
        try:
            keys, time, diff = sort_consolidate(staged.keys, staged.time, staged.diff, "time", self._since)
        except OverflowError:
            self._raise_overflow([(staged.keys, staged.time, staged.diff)], staged.layout, self._since,
                                 "in a flush of the stage")
            raise
        # The stage is empty only once the sort succeeded: an overflow leaves it as it was.
        self._stage = []
        self._stage_count = 0
        self.work.sorts += 1
        self.work.copied += len(time)
        self._route(keys, time, diff, staged.layout)

    def _route(self, keys, time, diff, layout: Layout) -> None:
        n = len(time)
        if n == 0:
            return
        cut = n if self._boundary is None else int(lower_bound(time, np.uint64(self._boundary)))
        if cut:
            self._pending_low.append(Chain.from_arrays(keys[:cut], time[:cut], diff[:cut], layout, self.chunk_size))
        i = cut
        while i < n:
            t = int(time[i])
            offset = self._offsets[bisect.bisect_right(self._offsets, t) - 1]
            bits = self._buckets[offset][0]
            end = offset + (1 << bits)
            j = n if end > MAX_TIME else int(lower_bound(time, np.uint64(end)))
            self._push_chain(offset, Chain.from_arrays(keys[i:j], time[i:j], diff[i:j], layout, self.chunk_size))
            i = j

    def _push_chain(self, offset: int, chain: Chain) -> None:
        if not chain:
            return
        bits, bucket = self._buckets[offset]
        # Buckets are replaced, never mutated, so a snapshot is a shallow copy of the dict.
        chains = [*bucket.chains, chain]
        while len(chains) >= 2 and chains[-1].count * self.chain_proportionality > chains[-2].count:
            b = chains.pop()
            a = chains.pop()
            merged = self._merge([a, b], None)
            if merged:
                chains.append(merged)
        self._buckets[offset] = (bits, _Bucket(chains))

    def _raise_overflow(self, runs, layout: Layout, since: Frontier, where: str) -> None:
        """Re-raise a kernel's overflow as a ``DiffOverflowError`` naming the row and time."""
        keys = np.concatenate([r[0] for r in runs])
        err = diff_overflow_error(keys, np.concatenate([r[1] for r in runs]),
                                  np.concatenate([r[2] for r in runs]), layout, self._schema,
                                  since, where)
        if err is not None:
            raise err from None

    def _merge(self, chains: list[Chain], since: Frontier) -> Chain:
        """Merge chains (advancing times to ``since`` when given) into one new chain."""
        chains = [c for c in chains if c]
        if not chains:
            return Chain()
        layout = unify_layouts(*(c.layout for c in chains))
        runs = [c.run(layout, self.work) for c in chains]
        try:
            return self._merge_runs(chains, runs, layout, since)
        except OverflowError:
            self._raise_overflow(runs, layout, since, "merging buffered updates")
            raise

    def _merge_runs(self, chains: list[Chain], runs, layout: Layout, since: Frontier) -> Chain:
        total = sum(c.count for c in chains)
        if len(runs) > 1 and total <= _SMALL_MERGE:
            # A few updates: one sort of the union (advancing times on the way) is cheaper
            # than choosing a strategy and cutting runs; the result is the same.
            keys, time, diff = sort_consolidate(
                np.concatenate([r[0] for r in runs]), np.concatenate([r[1] for r in runs]),
                np.concatenate([r[2] for r in runs]), "time", since,
            )
            self.work.merges += 1
            self.work.copied += len(time)
            return Chain.from_arrays(keys, time, diff, layout, self.chunk_size)
        if since is None:
            if len(runs) == 1:
                return chains[0]
            keys, time, diff = merge_runs(runs, "time")
        else:
            how, _ = strategy(runs, since)
            if how == "merge" and len(runs) == 1:
                return chains[0]
            keys, time, diff = advance_runs(runs, since, "time")
            if how == "sort":
                self.work.sorts += 1
        self.work.merges += 1
        self.work.copied += len(time)
        return Chain.from_arrays(keys, time, diff, layout, self.chunk_size)

    # ------------------------------------------------------------------ since

    def advance_since(self, since: Frontier) -> None:
        """Advance the compaction frontier (``None``: nothing will be read again).

        Buffered chains are not rewritten: times advance lazily when a read merges them.
        """
        since = check_frontier(since, "since")
        if not frontier_le(self._since, since):
            raise SinceRegression(f"since must not regress: current since {self._since}, got {since}")
        self._since = since
        if since is None:
            self._stage = []
            self._stage_count = 0

    # ------------------------------------------------------------------ reading

    def updates_before(self, upper: Frontier) -> Iterator[Updates]:
        """The consolidated updates with times before ``upper``, advanced to the since.

        Returns an iterator of ``Updates`` (one per chunk, and one empty batch when there is
        nothing) whose concatenation is sorted by ``(time, data)``, consolidated, has every
        time ``< upper`` and ``>= since``. When ``upper <= since`` (or the since is empty) it
        holds nothing and nothing changes.
        The updates stay buffered until their retractions are inserted.
        """
        upper = check_frontier(upper, "upper")
        if self._since is None or not (upper is None or self._since < upper):
            return self._iter_nothing()
        self._guarded_consolidate_before(upper)
        return self._iter_emitted()

    def consolidated_updates_before(self, upper: Frontier) -> Iterator[Updates]:
        """Like :meth:`updates_before` but only reads the result of the last consolidation."""
        upper = check_frontier(upper, "upper")
        if self._since is None or not (upper is None or self._since < upper):
            return self._iter_nothing()
        return self._iter_emitted()

    def consolidate_at_since(self) -> None:
        """Fold everything at times ``<= since`` into the emitted chain at time ``since``."""
        s = self._since
        if s is None or s == MAX_TIME:
            return
        self._guarded_consolidate_before(s + 1)

    def drain_stepwise(self, uppers: Iterable[Frontier]) -> Updates:
        """The sink's tick loop in one call: for each upper, read, feed back, advance the since.

        Equivalent to ::

            for u in uppers:
                out = colmz.concat(c.updates_before(u))
                c.insert_negated(out)
                c.advance_since(u)

        and returns the concatenation of the ``out`` batches as **one** ``Updates``, sorted by
        ``(time, data)``. The corrections of ``uppers[i]`` are its rows with times in
        ``[uppers[i-1], uppers[i])`` (for the first upper: times before it); cut them with
        ``numpy.searchsorted(out.time, uppers)``. Afterwards the buffer answers every call as
        the loop's buffer would: same since, boundary, schema and reads (including
        :meth:`consolidated_updates_before`, which holds the last upper's corrections).

        Why one read suffices: after the loop's step ``i`` the since is ``u_i`` and every
        update with a time below ``u_i`` sits, advanced to ``u_i``, beside the negation of what
        was emitted for it, so they cancel; step ``i + 1`` therefore emits exactly the buffered
        updates with times in ``[u_i, u_{i+1})``, unadvanced. So the corrections of all steps
        are one read at the last upper under the current since, and the work is one
        consolidation over the encoded runs (the compiled merges of :meth:`updates_before`),
        whatever the number of uppers. Only the last step's corrections and their negation
        stay buffered (they cancel at the next read, as in the loop); the rest of the read and
        its feedback cancel and are dropped.

        ``uppers`` must not decrease (repeats are fine, and so is an upper equal to the
        since: those steps read nothing) and must not start below the since; otherwise it
        raises (``SinceRegression`` below the since, ``ValueError`` for a decrease) before
        changing anything. Unlike the loop, which would fail part-way, a correction with diff
        ``-2**63`` (which cannot be fed back negated) raises ``OverflowError`` before any step,
        and a diff overflow in the read raises ``DiffOverflowError``; both leave the buffer
        unchanged.

        Examples
        --------
        >>> import colmz
        >>> c = colmz.Correction()
        >>> c.insert(colmz.Updates({"k": ["a", "b", "c"]}, time=[1, 2, 9], diff=[1, 1, 1]))
        >>> out = c.drain_stepwise([2, 3, 3, 5])
        >>> out.to_pylist()
        [('a', 1, 1), ('b', 2, 1)]
        >>> c.since, colmz.concat(c.updates_before(10)).to_pylist()
        (5, [('c', 9, 1)])
        """
        checked: list[Frontier] = []
        for i, u in enumerate(uppers):
            u = check_frontier(u, f"uppers[{i}]")
            if checked and not frontier_le(checked[-1], u):
                raise ValueError(f"uppers must not decrease: uppers[{i - 1}] is {checked[-1]}, uppers[{i}] is {u}")
            checked.append(u)
        nothing = Updates.empty(self._schema or ())
        if not checked:
            return nothing
        if not frontier_le(self._since, checked[0]):
            raise SinceRegression(f"since must not regress: current since {self._since}, got uppers[0] = {checked[0]}")
        last = checked[-1]
        if self._since is None or not (last is None or self._since < last):
            return nothing  # every step reads nothing and advances the since to itself
        # The since under which the loop's last read runs: the largest earlier upper below the
        # last one, or the current since.
        prev = self._since
        for u in checked:
            if u != last:
                prev = u
        snap = self._snapshot()
        try:
            self._consolidate_before(last)
            everything = self._emitted
            if everything:
                layout = everything.layout
                keys, time, diff = everything.run(layout, self.work)
                if diff.min() == np.iinfo(np.int64).min:
                    raise OverflowError(
                        "a correction holds diff -2**63, which cannot be fed back negated within int64")
            _, tail = everything.split_at(prev, self.work)
            self._emitted = tail
            self._last_read = (last, prev)
            self._since = last
            if last is None:
                self._stage = []
                self._stage_count = 0
            elif tail:
                self._pending_low.append(negated(tail))
        except BaseException:
            self._rollback(snap)
            raise
        if not everything:
            return nothing
        return Updates.decode(Encoded(keys, time, diff, layout), self._schema)

    def _snapshot(self):
        return (
            self._since, self._boundary, self._schema, list(self._stage), self._stage_count,
            list(self._offsets), dict(self._buckets), list(self._pending_low), self._emitted, self._last_read,
            self._well_formed, self._clean_from,
        )

    def _rollback(self, snap) -> None:
        (self._since, self._boundary, self._schema, self._stage, self._stage_count,
         self._offsets, self._buckets, self._pending_low, self._emitted, self._last_read,
         self._well_formed, self._clean_from) = snap

    def _guarded_consolidate_before(self, upper: Frontier) -> None:
        if self._read_small(upper):
            return
        # A diff overflow in a merge must leave the buffer as it was.
        snap = self._snapshot()
        try:
            self._consolidate_before(upper)
        except BaseException:
            self._rollback(snap)
            raise

    def _iter_emitted(self) -> Iterator[Updates]:
        chunks = self._emitted.chunks
        if not chunks:
            return self._iter_nothing()
        schema = self._schema
        # Decoded lazily: a sink that only feeds the read back never decodes it.
        return iter([Updates._from_encoded(Encoded(c.keys, c.time, c.diff, c.layout), schema) for c in chunks])

    def _iter_nothing(self) -> Iterator[Updates]:
        # One empty batch of the buffer's columns, so colmz.concat of any read works.
        return iter((Updates.empty(self._schema or ()),))

    def _consolidate_before(self, upper: Frontier) -> None:
        since = self._since
        assert since is not None
        self._flush_stage()
        peeled = self._peel(upper)
        if self._boundary is not None and (upper is None or upper > self._boundary):
            self._boundary = upper
        candidates: list[Chain] = [c for b in peeled for c in b.chains]
        candidates += self._pending_low
        if self._emitted:
            candidates.append(self._emitted)
        self._pending_low = []
        lower: list[Chain] = []
        for chain in candidates:
            lo, hi = chain.split_at(upper, self.work)
            if lo:
                lower.append(lo)
            if hi:
                self._pending_low.append(hi)
        self._emitted = self._merge(lower, since)
        self._last_read = (upper, since)
        self._restore(self.restore_fuel)

    def _read_small(self, upper: Frontier) -> bool:
        """A read of few updates in one sort; ``False`` (nothing done) when there are more.

        The stage, ``pending_low``, the old ``emitted`` and the chains of the buckets that
        start below ``upper`` hold at most ``_SMALL_READ`` updates: they are sorted and
        consolidated together (times advanced to the since) and cut at ``upper``. The lower
        part is the new ``emitted``; the rest (staged updates at or after ``upper``, the part
        of a straddling bucket beyond it, what a regressed upper left in ``pending_low``) is
        routed as a flush routes. The answer is the general path's: both consolidate the same
        updates. The sort, the one step that can fail (diff overflow), runs before anything
        changes, so no rollback snapshot is needed unless something must be routed; on an
        overflow the general path runs instead and reports it where it arises.
        """
        total = self._stage_count + self._emitted.count
        for c in self._pending_low:
            total += c.count
        if total > _SMALL_READ:
            return False
        offsets, buckets = self._offsets, self._buckets
        chains = [*self._pending_low, self._emitted]
        k = 0
        while k < len(offsets) and (upper is None or offsets[k] < upper):
            for c in buckets[offsets[k]][1].chains:
                total += c.count
                chains.append(c)
            if total > _SMALL_READ:
                return False
            k += 1
        parts = [(c.keys, c.time, c.diff, c.layout) for chain in chains for c in chain.chunks]
        parts += [(e.keys, e.time, e.diff, e.layout) for e in self._stage]
        since = self._since
        if parts:
            layout = parts[0][3]
            if len(parts) == 1:
                keys, time, diff = parts[0][:3]
            else:
                if any(p[3] != layout for p in parts):
                    layout = unify_layouts(*(p[3] for p in parts))
                    parts = [(pad_keys(k_, lay, layout), t, d, lay) for k_, t, d, lay in parts]
                keys = np.concatenate([p[0] for p in parts])
                time = np.concatenate([p[1] for p in parts])
                diff = np.concatenate([p[2] for p in parts])
            try:
                keys, time, diff = sort_consolidate(keys, time, diff, "time", since)
            except OverflowError:
                return False
            n = len(time)
            cut = n if upper is None else int(lower_bound(time, np.uint64(upper)))
        else:
            n = cut = 0
        snap = self._snapshot() if cut < n else None
        try:
            # The first k buckets' chains are in the sort: empty them, then peel.
            for off in offsets[:k]:
                bits, bucket = buckets[off]
                if bucket.chains:
                    buckets[off] = (bits, _Bucket())
            self._peel(upper)
            if self._boundary is not None and (upper is None or upper > self._boundary):
                self._boundary = upper
            self._stage = []
            self._stage_count = 0
            self._pending_low = []
            self._last_read = (upper, since)
            if parts:
                self.work.sorts += 1
                self.work.copied += n
                self._emitted = Chain.from_arrays(keys[:cut], time[:cut], diff[:cut], layout, self.chunk_size)
                if cut < n:
                    # Copied, so that what stays buffered does not keep the read's rows alive.
                    self._route(keys[cut:].copy(), time[cut:].copy(), diff[cut:].copy(), layout)
            else:
                self._emitted = _NO_CHAIN
            self._restore(self.restore_fuel)
        except BaseException:
            if snap is None:
                raise
            self._rollback(snap)
            return False
        return True

    # ------------------------------------------------------------------ bucket chain

    def _split_bucket(self, offset: int) -> None:
        bits, bucket = self._buckets.pop(offset)
        mid = offset + (1 << (bits - 1))
        lo_chains, hi_chains = [], []
        for chain in bucket.chains:
            lo, hi = chain.split_at(mid, self.work)
            if lo:
                lo_chains.append(lo)
            if hi:
                hi_chains.append(hi)
        self._buckets[offset] = (bits - 1, _Bucket(lo_chains))
        self._buckets[mid] = (bits - 1, _Bucket(hi_chains))
        bisect.insort(self._offsets, mid)

    def _peel(self, upper: Frontier) -> list[_Bucket]:
        """Remove and return the buckets below ``upper``, splitting the one that straddles it."""
        peeled = []
        was_well_formed = self._well_formed
        touched_end = None
        while self._offsets and (upper is None or self._offsets[0] < upper):
            offset = self._offsets[0]
            bits, bucket = self._buckets[offset]
            touched_end = max(touched_end or 0, offset + (1 << bits))
            self._well_formed = False
            if upper is None or offset + (1 << bits) <= upper:
                self._offsets.pop(0)
                del self._buckets[offset]
                peeled.append(bucket)
            else:
                self._split_bucket(offset)
        if touched_end is not None:
            # Peeling changes only the front: buckets from touched_end on keep their shape, so
            # when the chain was well-formed before, restoring may stop there.
            self._clean_from = touched_end if was_well_formed else None
        return peeled

    def _restore(self, fuel: int) -> None:
        """Split buckets, front first, until adjacent widths differ by at most 4x (or no fuel)."""
        if self._well_formed:
            return  # O(1) early exit (upstream PR #36897 does the same in O(buckets))
        clean_from = self._clean_from
        i = 0
        last_bits = -2
        while i < len(self._offsets) and fuel > 0:
            off = self._offsets[i]
            bits, bucket = self._buckets[off]
            if bits <= last_bits + 2:
                if clean_from is not None and off >= clean_from:
                    # The rest was well-formed before the peel and is unchanged.
                    i = len(self._offsets)
                    break
                last_bits = bits
                i += 1
                continue
            fuel -= max(bucket.n_chunks(), 1)
            if clean_from is not None:
                # Splitting changes this bucket's neighbourhood: only what follows it is clean.
                clean_from = max(clean_from, off + (1 << bits))
            self._split_bucket(off)  # reconsider the lower half at position i
        self._well_formed = i >= len(self._offsets)
        self._clean_from = None

    # ------------------------------------------------------------------ introspection

    def stats(self) -> dict:
        """Counts and sizes for debugging a sink.

        >>> Correction().stats()["updates"]
        0
        """
        buckets = []
        for off in self._offsets:
            bits, b = self._buckets[off]
            buckets.append({
                "offset": off, "bits": bits, "chains": len(b.chains),
                "chain_counts": [c.count for c in b.chains],
            })
        bases = {}
        for chain in self._all_chains():
            for a in chain.bases():
                bases[id(a)] = a.nbytes
        stage_bytes = sum(e.nbytes for e in self._stage)
        return {
            "updates": len(self),
            "since": self._since,
            "boundary": self._boundary,
            "stage": self._stage_count,
            "pending_low": [c.count for c in self._pending_low],
            "emitted": self._emitted.count,
            "buckets": buckets,
            "chains": sum(len(b.chains) for _, b in self._buckets.values()) + len(self._pending_low) + bool(self._emitted),
            "chunks": sum(len(c.chunks) for c in self._all_chains()),
            "bytes": sum(bases.values()) + stage_bytes,
            "work": self.work.as_dict(),
        }

    def _all_chains(self):
        for _, b in self._buckets.values():
            yield from b.chains
        yield from self._pending_low
        if self._emitted:
            yield self._emitted

    def plot(self, ax=None):
        """The bucket chain over time: bucket ranges, updates per bucket and chain, the since
        and the read boundary marked (:func:`colmz.plot.correction`; needs ``colmz[plot]``).
        Returns the matplotlib ``Axes``."""
        from colmz.plot import correction

        return correction(self, ax=ax)

    def _repr_html_(self) -> str:
        from colmz.display import correction_html

        return correction_html(self)

    def __repr__(self) -> str:
        s = self.stats()
        return (
            f"Correction(updates={s['updates']}, since={s['since']}, boundary={s['boundary']}, "
            f"stage={s['stage']}, buckets={len(s['buckets'])}, chains={s['chains']}, "
            f"pending_low={len(s['pending_low'])}, emitted={s['emitted']}, bytes={s['bytes']})"
        )

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` when an invariant of the module docstring is broken."""
        for chain in self._all_chains():
            _check_chain(chain)
        # buckets tile [boundary, 2**64)
        if self._boundary is None:
            assert not self._offsets, "bucket chain must be empty after a read at the empty upper"
        else:
            assert self._offsets and self._offsets[0] == self._boundary, (self._offsets[:1], self._boundary)
            for a, b in zip(self._offsets, self._offsets[1:]):
                assert a + (1 << self._buckets[a][0]) == b, "buckets must be contiguous"
            last = self._offsets[-1]
            assert last + (1 << self._buckets[last][0]) >= 2**64, "buckets must reach the end of time"
            for off in self._offsets:
                bits, bucket = self._buckets[off]
                for chain in bucket.chains:
                    assert off <= chain.first_time and chain.last_time < off + (1 << bits), "update outside its bucket"
        if self._well_formed:
            last_bits = -2
            for off in self._offsets:
                bits = self._buckets[off][0]
                assert bits <= last_bits + 2, "bucket chain marked well-formed but is not"
                last_bits = bits
        for chain in self._pending_low:
            assert self._boundary is None or chain.last_time < self._boundary, "pending_low at or beyond boundary"
        if self._emitted:
            upper, since = self._last_read
            assert upper is None or self._emitted.last_time < upper, "emitted beyond the read upper"
            assert self._emitted.first_time >= since, "emitted below the read since"
        assert self._stage_count < self.stage_size, "stage not flushed"


def _check_chain(chain: Chain) -> None:
    assert chain.count == sum(len(c) for c in chain.chunks), "chain count out of date"
    if not chain.chunks:
        return
    layout = unify_layouts(*(c.layout for c in chain.chunks))
    keys, time, diff = chain.run(layout, Work())
    assert (diff != 0).all(), "zero diff stored"
    if len(time) > 1:
        fields = np.column_stack([time, keys]) if keys.shape[1] else time[:, None]
        # strictly increasing rows: compare each row with the next lexicographically
        a, b = fields[:-1], fields[1:]
        neq = a != b
        first = np.argmax(neq, axis=1)
        rows = np.arange(len(a))
        assert neq.any(axis=1).all(), "duplicate (time, data) in a chain"
        assert (a[rows, first] < b[rows, first]).all(), "chain not sorted by (time, data)"
