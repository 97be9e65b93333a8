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
* the *stage* (``colmz.stage.Stage``): unsorted inserted batches, flushed (sorted,
  consolidated, routed) when they reach ``stage_size`` updates or when a read needs them.
* a *bucket chain* (``colmz.buckets.BucketChain``) over the times ``>= boundary``: buckets
  ``[offset, offset + 2**bits)``, each holding a tuple of chains (``colmz.chain``) sorted by
  ``(time, data)``; the bucket chain's own invariants (tiling, the 4x neighbour rule) are
  checked there.
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
5. The stage holds fewer than ``stage_size`` updates after an insert. After a read it holds
   nothing, or (after a read of few updates) at most 16 sorted updates at or beyond that
   read's upper, which the next read sorts again rather than routing them one tick at a time.
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
at most 48 updates sort their union in one compiled call (same result as the strategies); a
read that gathers at most 48 updates (stage, ``pending_low``, ``emitted`` and the buckets
below the upper) is one compiled call that sorts, consolidates and cuts them at the upper
(``colmz.kernels.small_read``), with no flush and no rollback save unless something is
routed (:meth:`Correction._read_small`); that call also notes whether the read holds a diff
``-2**63``, so feeding the read back needs no scan; reads hand out ``Updates`` decoded only
when their columns are asked for, so feeding a read back encodes nothing; and the bucket
chain's restore stops at the first bucket the peel left unchanged.

Rollback. Each structure declares the fields a failed call may change (``ROLLBACK_FIELDS``)
and undoes the call with ``colmz.rollback`` (``save`` / ``roll_back``): the stage and the
bucket chain are rolled back in place, their containers copied; chains and buckets are
immutable and shared.

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

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from colmz.buckets import BucketChain
from colmz.chain import Chain, Work, negated
from colmz.errors import SinceRegression
from colmz.frontier import MAX_TIME, Frontier, check_frontier, frontier_le
from colmz.kernels.advance import advance_runs, strategy
from colmz.kernels.consolidate import sort_consolidate
from colmz.kernels.merge import merge_runs
from colmz.kernels.small_read import sort_consolidate_cut
from colmz.kernels.split import lower_bound
from colmz.ops import diff_overflow_error
from colmz.order import Layout, unify_layouts
from colmz.rollback import roll_back, save, undone_on_error
from colmz.stage import Stage
from colmz.updates import (
    Encoded,
    Updates,
    check_negatable,
    concat_encoded,
    unify_schemas,
)

__all__ = ["Correction"]

# Merges of at most this many updates sort the union instead (see _merge).
_SMALL_MERGE = 48
# Reads gathering at most this many updates take the one-sort path (see _read_small).
_SMALL_READ = 48
# A one-sort read leaves at most this many updates at or beyond its upper in the stage.
_CARRY = 16


_NO_CHAIN = Chain()


class _Bucket:
    """The chains of one bucket of the bucket chain, kept under the chain invariant.

    Immutable: pushing a chain or splitting makes new buckets, so a rollback save of the
    bucket chain shares them."""

    __slots__ = ("chains",)

    def __init__(self, chains: tuple[Chain, ...] = ()):
        self.chains = chains

    def count(self) -> int:
        return sum(c.count for c in self.chains)

    def n_chunks(self) -> int:
        return sum(len(c.chunks) for c in self.chains)

    def split(self, mid: int, work: Work) -> tuple[_Bucket, _Bucket, int]:
        """The chains' parts before ``mid`` and from ``mid`` on, and the cost (chunks)."""
        if not self.chains:
            return self, self, 1
        lo_chains, hi_chains = [], []
        for chain in self.chains:
            lo, hi = chain.split_at(mid, work)
            if lo:
                lo_chains.append(lo)
            if hi:
                hi_chains.append(hi)
        return _Bucket(tuple(lo_chains)), _Bucket(tuple(hi_chains)), max(self.n_chunks(), 1)


_NO_BUCKET = _Bucket()


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
        self.work = work = Work()
        self._stage = Stage()
        self._buckets: BucketChain[_Bucket] = BucketChain(_NO_BUCKET, lambda b, mid: b.split(mid, work))
        self._pending_low: list[Chain] = []
        self._emitted = _NO_CHAIN
        # True when the last read's output was fed back as it was handed out (one batch, its
        # own encoding): emitted and that feedback cancel, so the feedback is not staged and
        # the next read leaves emitted out (see _insert).
        self._fed_back = False
        self._last_read: tuple[Frontier, int] | None = None  # (upper, since) of the last read
        # The emitted run a small read found free of diff -2**63 (so its feedback needs no
        # scan), or None; compared by identity, so a stale value is merely unused.
        self._negatable: Encoded | None = None

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
            len(self._stage)
            + sum(b.count() for b in self._buckets.buckets())
            + sum(c.count for c in self._pending_low)
            + self._emitted.count * (2 if self._fed_back else 1)
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
            chunks = self._emitted.chunks
            if not self._fed_back and len(chunks) == 1 and enc is chunks[0].encoded:
                # The sink feeds back the read it was handed: it cancels emitted exactly, so
                # neither needs sorting again. Only the negation's overflow check remains,
                # and a small read already made it.
                if enc is not self._negatable:
                    check_negatable(enc.diff)
                self._schema = schema
                if self._since is not None:
                    self._fed_back = True
                return
            enc = enc.negated()
        self._schema = schema
        if self._since is None:
            return
        stage = self._stage
        if stage.count + n < self.stage_size:
            stage.push(enc)
            return
        with undone_on_error(self):
            stage.push(enc)
            self._flush_stage()

    def _flush_stage(self) -> None:
        """Sort and consolidate the stage (times advanced to the since), then route it."""
        staged = self._stage.peek()
        if staged is None:
            return
        try:
            keys, time, diff = sort_consolidate(staged.keys, staged.time, staged.diff, "time", self._since)
        except OverflowError:
            self._raise_overflow([(staged.keys, staged.time, staged.diff)], staged.layout, self._since,
                                 "in a flush of the stage")
            raise
        # The stage is empty only once the sort succeeded: an overflow leaves it as it was.
        self._stage.clear()
        self.work.sorts += 1
        self.work.copied += len(time)
        self.work.consolidated += len(staged.time)
        self._route(keys, time, diff, staged.layout)

    def _route(self, keys, time, diff, layout: Layout) -> None:
        """Route sorted, consolidated updates: below the boundary to ``pending_low``, the rest
        to their buckets, one chain per bucket."""
        n = len(time)
        if n == 0:
            return
        cut = n if self._boundary is None else int(lower_bound(time, np.uint64(self._boundary)))
        if cut:
            self._pending_low.append(Chain.from_arrays(keys[:cut], time[:cut], diff[:cut], layout, self.chunk_size))
        i = cut
        find = self._buckets.range_of
        while i < n:
            offset, bits = find(int(time[i]))
            end = offset + (1 << bits)
            j = n if end > MAX_TIME else int(lower_bound(time, np.uint64(end)))
            self._push_chain(offset, Chain.from_arrays(keys[i:j], time[i:j], diff[i:j], layout, self.chunk_size))
            i = j

    def _push_chain(self, offset: int, chain: Chain) -> None:
        """Add a chain to a bucket and merge from the back until the chain invariant holds."""
        if not chain:
            return
        bucket = self._buckets.content[offset][1]
        chains = [*bucket.chains, chain]
        while len(chains) >= 2 and chains[-1].count * self.chain_proportionality > chains[-2].count:
            b = chains.pop()
            a = chains.pop()
            merged = self._merge([a, b], None)
            if merged:
                chains.append(merged)
        # A new bucket: the old one may be shared with a rollback save.
        self._buckets.replace(offset, _Bucket(tuple(chains)))

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
            return _NO_CHAIN
        if len(chains) > 1 and sum(c.count for c in chains) <= _SMALL_MERGE:
            # A few updates: one sort of the union (advancing times on the way) is cheaper
            # than choosing a strategy and cutting runs; the result is the same.
            run = concat_encoded([c.encoded for chain in chains for c in chain.chunks])
            try:
                keys, time, diff = sort_consolidate(run.keys, run.time, run.diff, "time", since)
            except OverflowError:
                self._raise_overflow([(run.keys, run.time, run.diff)], run.layout, since, "merging buffered updates")
                raise
            self.work.merges += 1
            self.work.copied += len(time)
            self.work.consolidated += len(run.time)
            return Chain.from_arrays(keys, time, diff, run.layout, self.chunk_size)
        layout = unify_layouts(*(c.layout for c in chains))
        runs = [c.run(layout, self.work) for c in chains]
        try:
            return self._merge_runs(chains, runs, layout, since)
        except OverflowError:
            self._raise_overflow(runs, layout, since, "merging buffered updates")
            raise

    def _merge_runs(self, chains: list[Chain], runs, layout: Layout, since: Frontier) -> Chain:
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
        self.work.consolidated += sum(len(r[1]) for r in runs)
        return Chain.from_arrays(keys, time, diff, layout, self.chunk_size)

    # ------------------------------------------------------------------ since

    def advance_since(self, since: Frontier) -> None:
        """Advance the compaction frontier (``None``: nothing will be read again).

        Buffered chains are not rewritten: times advance lazily when a read merges them.
        """
        if type(since) is not int or not 0 <= since <= MAX_TIME:  # the sink's tick skips the checker
            since = check_frontier(since, "since")
        if not frontier_le(self._since, since):
            raise SinceRegression(f"since must not regress: current since {self._since}, got {since}")
        self._since = since
        if since is None:
            self._stage.clear()

    # ------------------------------------------------------------------ reading

    def updates_before(self, upper: Frontier) -> Iterator[Updates]:
        """The consolidated updates with times before ``upper``, advanced to the since.

        Returns an iterator of ``Updates`` (one per chunk, and one empty batch when there is
        nothing) whose concatenation is sorted by ``(time, data)``, consolidated, has every
        time ``< upper`` and ``>= since``. When ``upper <= since`` (or the since is empty) it
        holds nothing and nothing changes.
        The updates stay buffered until their retractions are inserted.
        """
        if type(upper) is not int or not 0 <= upper <= MAX_TIME:  # the sink's tick skips the checker
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
        with undone_on_error(self):
            self._consolidate_before(last)
            everything = self._emitted
            self._fed_back = False
            if everything:
                layout = everything.layout
                keys, time, diff = everything.run(layout, self.work)
                try:
                    check_negatable(diff)
                except OverflowError:
                    raise OverflowError(
                        "a correction holds diff -2**63, which cannot be fed back negated within int64") from None
            _, tail = everything.split_at(prev, self.work)
            self._emitted = tail
            self._last_read = (last, prev)
            self._since = last
            if last is None:
                self._stage.clear()
            elif tail:
                self._pending_low.append(negated(tail))
        if not everything:
            return nothing
        return Updates.from_encoded(Encoded(keys, time, diff, layout), self._schema)

    # ------------------------------------------------------------------ rollback

    # What a failed call rolls back (colmz.rollback): the stage and the bucket chain in place,
    # lists copied, the rest (frontiers, immutable chains) kept by reference.
    ROLLBACK_FIELDS = ("_since", "_boundary", "_schema", "_stage", "_buckets", "_pending_low", "_emitted",
                       "_fed_back", "_last_read", "_negatable")

    def _guarded_consolidate_before(self, upper: Frontier) -> None:
        if self._read_small(upper):
            return
        # A diff overflow in a merge must leave the buffer as it was.
        with undone_on_error(self):
            self._consolidate_before(upper)

    def _iter_emitted(self) -> Iterator[Updates]:
        chunks = self._emitted.chunks
        if not chunks:
            return self._iter_nothing()
        schema = self._schema
        # Decoded lazily: a sink that only feeds the read back never decodes it.
        if len(chunks) == 1:
            return iter((Updates.from_encoded(chunks[0].encoded, schema),))
        return iter([Updates.from_encoded(c.encoded, schema) for c in chunks])

    def _iter_nothing(self) -> Iterator[Updates]:
        # One empty batch of the buffer's columns, so colmz.concat of any read works.
        return iter((Updates.empty(self._schema or ()),))

    def _consolidate_before(self, upper: Frontier) -> None:
        """Upstream's ``consolidate_before``: stage -> route, peel, split, merge, restore."""
        since = self._since
        assert since is not None
        self._flush_stage()
        peeled = self._advance_boundary(upper)
        candidates: list[Chain] = [c for b in peeled for c in b.chains]
        candidates += self._pending_low
        if self._emitted and not self._fed_back:
            candidates.append(self._emitted)
        self._fed_back = False
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
        self._buckets.restore(self.restore_fuel)

    def _advance_boundary(self, upper: Frontier) -> list[_Bucket]:
        """Peel the buckets below ``upper`` off the bucket chain; the boundary follows."""
        peeled = self._buckets.peel(upper)
        if self._boundary is not None and (upper is None or upper > self._boundary):
            self._boundary = upper
        return peeled

    def _read_small(self, upper: Frontier) -> bool:
        """A read of few updates in one compiled call; ``False`` (nothing done) when there are more.

        The stage, ``pending_low``, the old ``emitted`` and the chains of the buckets that
        start below ``upper`` hold at most ``_SMALL_READ`` updates: they are sorted and
        consolidated together (times advanced to the since) and cut at ``upper`` by one call
        of ``colmz.kernels.small_read.sort_consolidate_cut``. The lower part is the new
        ``emitted``; the rest (staged updates at or after ``upper``, the part of a straddling
        bucket beyond it, what a regressed upper left in ``pending_low``) is routed as a flush
        routes. The answer is the general path's: both consolidate the same updates. The
        kernel, the one step that can fail (diff overflow), runs before anything changes, so
        no rollback save is needed unless something must be routed; on an overflow the
        general path runs instead and reports it where it arises.
        """
        stage = self._stage
        pending = self._pending_low
        emitted = _NO_CHAIN if self._fed_back else self._emitted
        total = stage.count + emitted.count
        for c in pending:
            total += c.count
        if total > _SMALL_READ:
            return False
        buckets = self._buckets
        offsets, content = buckets.offsets, buckets.content
        chains = [*pending, emitted] if pending or emitted else []
        k = 0
        n_off = len(offsets)
        while k < n_off and (upper is None or offsets[k] < upper):
            held = content[offsets[k]][1].chains
            if held:
                for c in held:
                    total += c.count
                if total > _SMALL_READ:
                    return False
                chains += held
            k += 1
        parts = [c.encoded for ch in chains for c in ch.chunks] + stage.parts if chains else stage.parts
        since = self._since
        if parts:
            found = _sort_cut(parts, since, upper)
            if found is None:
                return False  # a diff overflow: the general path reports it
            keys, time, diff, layout, n, cut, negatable = found
        else:
            n = cut = 0
        rest = n - cut
        # A small remainder stays staged (sorted) for the next read to sort again, instead of
        # being routed: in a sink's tick it is a few far-future updates, routing them would
        # cost a merge per tick, and each is re-sorted at most _CARRY times before it is routed
        # unless it cancels first (a temporal filter's moved retractions do).
        carry = 0 < rest <= _CARRY and rest < self.stage_size and (
            upper is not None and (self._boundary is not None and upper >= self._boundary))
        state = save(self) if rest and not carry else None
        try:
            # The first k buckets' chains are in the sort: empty them, then peel.
            if chains:
                for off in offsets[:k]:
                    if content[off][1].chains:
                        buckets.replace(off, _NO_BUCKET)
            self._advance_boundary(upper)
            stage.clear()
            self._pending_low = []
            self._fed_back = False
            self._last_read = (upper, since)
            if parts:
                work = self.work
                work.sorts += 1
                work.copied += n
                work.consolidated += sum(len(p.time) for p in parts)
                if cut:
                    out = self._emitted = Chain.from_arrays(keys[:cut], time[:cut], diff[:cut], layout,
                                                            self.chunk_size)
                    # Feeding this read back needs no scan for -2**63 (see _insert).
                    self._negatable = out.chunks[0].encoded if negatable and len(out.chunks) == 1 else None
                else:
                    self._emitted = _NO_CHAIN
                if carry:
                    # A view: the next read sorts it again, so the read's rows it keeps alive
                    # (at most _SMALL_READ) are released then.
                    stage.push(Encoded(keys[cut:n], time[cut:n], diff[cut:n], layout))
                elif rest:
                    # Copied, so that what stays buffered does not keep the read's rows alive.
                    self._route(keys[cut:n].copy(), time[cut:n].copy(), diff[cut:n].copy(), layout)
            else:
                self._emitted = _NO_CHAIN
            buckets.restore(self.restore_fuel)
        except BaseException:
            if state is None:
                raise
            roll_back(self, state)
            return False
        return True

    # ------------------------------------------------------------------ introspection

    def stats(self) -> dict:
        """Counts and sizes for debugging a sink.

        >>> Correction().stats()["updates"]
        0
        """
        buckets = []
        for off, bits, b in self._buckets.items():
            buckets.append({
                "offset": off, "bits": bits, "chains": len(b.chains),
                "chain_counts": [c.count for c in b.chains],
            })
        bases = {}
        for chain in self._all_chains():
            for a in chain.bases():
                bases[id(a)] = a.nbytes
        stage_bytes = self._stage.nbytes
        return {
            "updates": len(self),
            "since": self._since,
            "boundary": self._boundary,
            "stage": len(self._stage),
            "pending_low": [c.count for c in self._pending_low],
            "emitted": self._emitted.count,
            "buckets": buckets,
            "chains": sum(len(b.chains) for b in self._buckets.buckets()) + len(self._pending_low) + bool(self._emitted),
            "chunks": sum(len(c.chunks) for c in self._all_chains()),
            "bytes": sum(bases.values()) + stage_bytes,
            "work": self.work.as_dict(),
        }

    def _all_chains(self):
        for b in self._buckets.buckets():
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
        # buckets tile [boundary, 2**64), each chain inside its bucket
        self._buckets.check_invariants()
        assert self._buckets.lower == self._boundary, (self._buckets.lower, self._boundary)
        for off, bits, bucket in self._buckets.items():
            for chain in bucket.chains:
                assert off <= chain.first_time and chain.last_time < off + (1 << bits), "update outside its bucket"
        for chain in self._pending_low:
            assert self._boundary is None or chain.last_time < self._boundary, "pending_low at or beyond boundary"
        if self._emitted:
            upper, since = self._last_read
            assert upper is None or self._emitted.last_time < upper, "emitted beyond the read upper"
            assert self._emitted.first_time >= since, "emitted below the read since"
        assert len(self._stage) < self.stage_size, "stage not flushed"


def _plain(a: np.ndarray) -> np.ndarray:
    # The small-read kernel is compiled for C-contiguous writeable arrays (what colmz makes);
    # a caller's read-only or strided time/diff (Updates(copy=False)) is copied, not given its
    # own compilation.
    return a if a.flags.carray else a.copy()


# An empty run per key width, the second run of a one-part small read.
_EMPTY_RUNS: dict[int, Encoded] = {}


def _sort_cut(parts: list[Encoded], since: int, upper: Frontier):
    """Sort, consolidate and cut ``parts`` at ``upper`` in one kernel call (see ``_read_small``).

    Returns ``(keys, time, diff, layout, n, cut, negatable)`` (rows ``[0, n)`` of the arrays
    hold the result), or ``None`` when a diff sum leaves ``int64``.
    """
    b = parts[-1]
    if len(parts) == 1:
        w = b.keys.shape[1]
        a = _EMPTY_RUNS.get(w)
        if a is None:
            a = _EMPTY_RUNS[w] = Encoded(np.empty((0, w), np.uint64), np.empty(0, np.uint64),
                                         np.empty(0, np.int64), b.layout)
    else:
        a = parts[0] if len(parts) == 2 else concat_encoded(parts[:-1])
        if a.layout != b.layout:
            target = unify_layouts(a.layout, b.layout)
            a, b = a.padded(target), b.padded(target)
    ak, at, ad, _ = a
    bk, bt, bd, layout = b
    n = len(at) + len(bt)
    keys = np.empty((n, bk.shape[1]), np.uint64)
    time = np.empty(n, np.uint64)
    diff = np.empty(n, np.int64)
    m, cut, negatable = sort_consolidate_cut(
        _plain(ak), _plain(at), _plain(ad), _plain(bk), _plain(bt), _plain(bd),
        np.uint64(since), np.uint64(0 if upper is None else upper), upper is not None, keys, time, diff)
    if m < 0:
        return None
    return keys, time, diff, layout, m, cut, negatable


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
