"""``FueledRuns``: an operator's state as layers of immutable runs, merged a little per insert.

Design
------
The discipline of differential dataflow's fueled spine (``src/trace/implementations/
spine_fueled.rs``; colmz's :class:`colmz.spine.Spine` ports it for traces of time intervals)
applied to the runs an operator's state is made of (``KeyedArrangement``'s sorted rows,
``Accumulators``' sorted groups). Operator state is folded to one time (its ``since``), so the
spine's intervals, frontiers and pending batches have no part here: what remains is the
layering and the fuel.

**Layers.** Layer ``i`` is vacant, holds one run (of at most ``2**i`` rows, for the
bookkeeping; the oldest run up to ``SPACE_FACTOR`` times that, **Space** below) or a *merge in progress* of two runs (older, newer) whose result goes to layer
``i + 1``. A run of ``n`` rows is introduced at layer ``ceil(log2(max(n, 1)))``: first every
merge in progress gets ``(8 << i) * effort`` units of fuel (rows a merge may *read*), lowest
layer first, a merge that completes moving its result one layer up (where it may start a
merge, fuelled in the same pass); then every run below layer ``i`` is rolled up (merged at
once into one carried run, fewer than ``2**i`` rows); then the run lands at layer ``i``
(starting a merge if the layer holds a run). Reading the layers from the top down -- a merge's
two inputs in order -- gives the runs oldest first. Small runs are *coalesced* first: while
the newest run is at most twice the new one and the two hold at most ``min_fuel // 4`` rows
they are merged at once (a constant amount of work per insert, ``O(log min_fuel)`` per row
amortised), so many tiny inserts make a few small runs rather than one per layer -- a lookup
searches every run.

**Bounds** (tested with the work counters). A merge at layer ``k <= i`` reads at most
``2**(k + 1)`` rows (times its scale, **Space**), less than its fuel: every merge at or below the introduced layer
completes in that introduction, so a run never lands on a merge in progress. An insert of
``n`` rows therefore reads at most ``8 * effort * 2**i`` rows per merge in progress above
layer ``i``, plus the merges at or below it and the roll-up (``O(2**i)``), with ``2**i < 2n``:
``O(n * layers)`` per insert (plus ``min_fuel`` per merge in progress: a constant that lets
small merges finish at once), never a large merge triggered by a small insert (an eager
cascade merges ``O(N)`` rows on the insert that fills a level). Each row is read about once
per layer it climbs, ``O(log N)`` amortised. Fuel counts rows *read*, not written (the spine
counts writes): a merge whose inputs cancel still costs what it reads, so a retraction of a
large run cannot land on one step either.

**Merges** are resumable: a merge object owns preallocated output arrays and a cursor into
its inputs; ``work(fuel)`` takes the next chunk of at most about ``fuel`` input rows that ends
on a boundary of equal rows (every row of both inputs up to the smaller of the two chunks'
last rows) and merges it, consolidated, into the output. A merge's result is a view of its
output arrays (rows written), or a tight copy when cancelled rows left more than an eighth of
them unused (``KeyedMerge``).

**Space.** Layers bound the number of runs, not their rows. While updates land on rows
already held (a distinct's or a group's counts changing, rows retracted) the contents stop
growing but the smaller layers fill with rows the oldest run already holds -- in
differential's layering up to that run's layer's capacity, as many rows again as it holds,
before a run climbs to its layer and a merge folds them in. So after every insert the oldest
run (``n`` rows), when it stands alone at the top, is moved down past vacant layers to layer
``t = level_of(ceil(n / SPACE_FACTOR))``, the layer of an :data:`SPACE_FACTOR` th of its rows
(differential's ``tidy_layers`` moves a top batch compaction has shrunk down the same way).
Every other run then sits below ``t``: one run per layer holds fewer than ``2**t``, about
``2 * n / SPACE_FACTOR``, rows together, and the run that climbs to layer ``t`` (at most
``2**t`` rows) merges into the oldest. So the runs hold about ``(1 + 4 / SPACE_FACTOR) * n``
rows at most (a merge in progress below ``t`` holds both its inputs: up to ``2 * n /
SPACE_FACTOR`` more at worst) -- and ``n`` is at most the contents plus the rows the other runs
retract. The oldest run's merge reads more than the ``2**(t + 1)`` rows a layer-``t`` merge's
fuel is sized for, so every merge's fuel is multiplied by its *scale*, ``ceil(rows of both
inputs / 2**(i + 1))`` at layer ``i`` (1 for every other merge, at most ``SPACE_FACTOR // 2 +
1`` for the oldest's): it still completes before another run reaches its layer. The cost is a
constant factor: more than ``2**(t - 1) >= n / (2 * SPACE_FACTOR)`` rows climb to layer ``t``
between two merges of the oldest run, each reading at most ``n + 2**t`` rows, so about ``2 *
SPACE_FACTOR + 4`` reads per row inserted on top of ``O(log N)``; an insert's reads grow at
most by the scale (a one-row insert reads at most ``min_fuel`` times the scale of each merge
in progress, plus what it coalesces), and a roll-up that takes the oldest run in reads at
most ``SPACE_FACTOR + 1`` times the ``2**i`` of the introduced layer.

Rollback (``colmz.rollback``). The layers are a tuple, replaced when an insert returns, and
a merge in progress is an immutable value (:meth:`Merge.work` returns the advanced merge), so
a save keeps the tuple by reference (``O(1)``, whatever the state's size or history) and an
insert that raises changes nothing. Advanced merges share their output arrays: a merge's
output is the consolidated, sorted union of its inputs whatever the chunks, so each output
position is only ever written with the same row -- an abandoned advance (rolled back) and a
later one agree.

Invariant: the runs (:meth:`FueledRuns.runs`) hold the contents -- the sum of everything
inserted -- and every layer holds at most one run or one merge.
"""

from __future__ import annotations

import copy
import itertools
from collections import deque
from collections.abc import Callable

__all__ = ["SPACE_FACTOR", "FueledHolder", "FueledRuns", "Merge", "level_of", "next_serial"]

#: Serial numbers of runs: unique in the process (never reused, whatever is rolled back).
_SERIALS = itertools.count(1)

#: How many completed merges' lineage a FueledRuns remembers (``unread_merges``).
LINEAGE = 256


def next_serial() -> int:
    """A new run serial number (unique in the process)."""
    return next(_SERIALS)

#: Fuel of a merge that must complete now (roll-ups).
UNLIMITED = 2**62

#: The oldest run, alone at the top, sits at the layer of this fraction of its rows (module
#: docstring, **Space**): the runs hold at most about ``1 + 4 / SPACE_FACTOR`` times its rows.
SPACE_FACTOR = 8


def level_of(n: int) -> int:
    """``ceil(log2(max(n, 1)))``: the layer a run of ``n`` rows is introduced at.

    >>> [level_of(n) for n in (0, 1, 2, 3, 4, 5, 1024, 1025)]
    [0, 0, 1, 2, 2, 3, 10, 11]
    """
    return (n - 1).bit_length() if n > 1 else 0


class Merge:
    """A merge in progress of two runs: an immutable value, advanced by :meth:`work` into a
    new one. Subclasses define :meth:`step`.

    ``done`` says it has read both inputs; ``result`` is then the merged run (``None``: every
    row cancelled).
    """

    def __init__(self, older, newer):
        self.a = older
        self.b = newer
        self.done = False
        self.result = None

    def work(self, fuel: int) -> tuple[Merge, int]:
        """This merge advanced by about ``fuel`` more input rows (at least one; this one is
        left as it was) and the rows read."""
        m = copy.copy(self)
        return m, m.step(fuel)

    def step(self, fuel: int) -> int:
        """Advance this (fresh) copy in place; return the rows read."""
        raise NotImplementedError  # KeyedMerge, AccumulatorsMerge


class FueledRuns:
    """Runs in layers, merged with fuel (module docstring).

    Parameters
    ----------
    size : callable
        The rows of a run.
    begin : callable
        ``begin(older, newer)``: a :class:`Merge` of two runs.
    effort : int, default 1
        Fuel multiplier (the spine's ``effort``).
    min_fuel : int, default 1024
        The least fuel an insert gives each merge in progress: merges of up to this many
        rows complete in the insert that starts them, so few are ever in progress (each
        costs a lookup a search of both inputs, and a step a call of the merge); the
        constant term of the per-insert bound.
    serial : callable, optional
        A run's serial number (:func:`next_serial`): given, the last ``LINEAGE`` completed
        merges are remembered as ``(result, older, newer)`` serials for
        :meth:`unread_merges`.
    combine : callable, optional
        ``combine(older, newer)``: the two runs merged at once (``None``: every row
        cancelled), for the small merges of coalescing -- the same result as a
        :class:`Merge` run to completion, without its chunking (a one-row insert's merge
        costs the few calls of one sort). Default: the merge run to completion.

    Work counters (cumulative, never rolled back): ``merges`` (merges begun), ``rows_merged``
    (input rows merges read), ``last_step_merged`` and ``max_step_merged`` (rows read by the
    last insert and by the largest).

    Examples
    --------
    >>> class Sum(Merge):
    ...     def step(self, fuel):
    ...         self.done, self.result = True, sorted(self.a + self.b)
    ...         return len(self.a) + len(self.b)
    >>> f = FueledRuns(len, lambda a, b: Sum(a, b), min_fuel=1)
    >>> for x in range(5):
    ...     f.insert([x])
    >>> f.runs(), f.merges
    ([[0, 1, 2, 3], [4]], 3)
    """

    #: The layers: a tuple replaced by each insert (a save keeps it by reference, O(1)).
    ROLLBACK_FIELDS = ("_layers",)

    def __init__(self, size: Callable, begin: Callable, effort: int = 1, min_fuel: int = 1024,
                 serial: Callable | None = None, combine: Callable | None = None):
        for name, v in (("effort", effort), ("min_fuel", min_fuel)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        self.min_fuel = min_fuel
        self._serial = serial
        #: ``(result serial or None, older serial, newer serial)`` of recent merges: facts
        #: (serials are never reused), so never rolled back
        self.lineage: deque = deque(maxlen=LINEAGE)
        self._size = size
        self._begin = begin
        self._combine = combine
        self.effort = effort
        self._layers: tuple = ()
        self.merges = 0
        self.rows_merged = 0
        self.last_step_merged = 0
        self.max_step_merged = 0

    def runs(self) -> list:
        """The runs, oldest first (both inputs of a merge in progress)."""
        out = []
        for st in reversed(self._layers):
            if st is None:
                continue
            if isinstance(st, Merge):
                out.extend((st.a, st.b))
            else:
                out.append(st)
        return out

    def layers(self) -> list[tuple[int, int, int]]:
        """``(level, runs, rows)`` per layer, largest first (runs: 0, 1 or 2 merging)."""
        out = []
        for i in range(len(self._layers) - 1, -1, -1):
            st = self._layers[i]
            if st is None:
                out.append((i, 0, 0))
            elif isinstance(st, Merge):
                out.append((i, 2, self._size(st.a) + self._size(st.b)))
            else:
                out.append((i, 1, self._size(st)))
        return out

    def insert(self, run) -> None:
        """Introduce ``run`` (non-empty), fuelling the merges in progress. The layers are
        replaced only when it returns: an insert that raises changes nothing (but the work
        counters)."""
        before = self.rows_merged
        layers = list(self._layers)
        run = self._coalesced(layers, run)
        if run is not None:
            level = level_of(self._size(run))
            self._apply_fuel(layers, max((8 << level) * self.effort, self.min_fuel))
            self._roll_up(layers, level)
            self._insert_at(layers, run, level)
        self._tidy(layers)
        self._layers = tuple(layers)
        self.last_step_merged = self.rows_merged - before
        self.max_step_merged = max(self.max_step_merged, self.last_step_merged)

    def exert(self, fuel: int) -> None:
        """Give ``fuel`` to every merge in progress without inserting (an idle step)."""
        layers = list(self._layers)
        self._apply_fuel(layers, fuel)
        self._tidy(layers)
        self._layers = tuple(layers)

    # ------------------------------------------------------------------ mechanism

    def _work(self, m: Merge, fuel: int) -> Merge:
        while not m.done and fuel > 0:
            m, read = m.work(fuel)
            self.rows_merged += read
            fuel -= read
        if m.done and self._serial is not None:
            self.lineage.append((None if m.result is None else self._serial(m.result),
                                 self._serial(m.a), self._serial(m.b)))
        return m

    def unread_merges(self, added: list, gone: list) -> tuple[list, list]:
        """``added`` and ``gone`` (runs made since some earlier :meth:`runs`, and runs of it
        merged away since) less the merges between them: a run made by merges whose inputs,
        followed through the remembered lineage, are all in ``gone`` holds exactly what they
        held, so both cancel without being read (a merge whose rows all cancelled takes its
        inputs with it). What cannot be followed stays, to be read: never wrong, only slower.
        """
        if self._serial is None or not self.lineage:
            return added, gone
        parents, empty = {}, []
        for r, a, b in self.lineage:
            if r is None:
                empty.append((a, b))
            else:
                parents[r] = (a, b)
        gone_by = {self._serial(g): g for g in gone}
        used: set = set()

        def leaves(s, out):
            if s in gone_by:
                out.append(s)
                return True
            p = parents.get(s)
            return p is not None and leaves(p[0], out) and leaves(p[1], out)

        keep = []
        for r in added:
            found: list = []
            if leaves(self._serial(r), found) and not used.intersection(found) and len(set(found)) == len(found):
                used.update(found)
            else:
                keep.append(r)
        for a, b in empty:
            found = []
            if leaves(a, found) and leaves(b, found) and not used.intersection(found) \
                    and len(set(found)) == len(found):
                used.update(found)
        return keep, [g for g in gone if self._serial(g) not in used]

    def _finish(self, m: Merge):
        return self._work(m, UNLIMITED).result

    def _scale(self, m: Merge, index: int) -> int:
        """How many times a layer-``index`` merge's fuel ``m`` needs: its inputs' rows over
        the ``2**(index + 1)`` the layer holds (1 but for the oldest run's, moved down
        below its size: module docstring, **Space**)."""
        rows = self._size(m.a) + self._size(m.b)
        return max(1, -(-rows >> (index + 1)))

    def _apply_fuel(self, layers: list, fuel: int) -> None:
        """Fuel every merge in progress, lowest layer first: ``fuel`` times its scale."""
        i = 0
        while i < len(layers):
            st = layers[i]
            if isinstance(st, Merge):
                st = layers[i] = self._work(st, fuel * self._scale(st, i))
                if st.done:
                    layers[i] = None
                    self._insert_at(layers, st.result, i + 1)
            i += 1

    def _coalesced(self, layers: list, run):
        """``run`` merged at once with the newest run while that one is at most twice its
        size and the two hold at most ``min_fuel // 4`` rows (``None``: they cancelled):
        small inserts then make few small runs (sizes at least doubling), not one per layer,
        which every lookup would search."""
        while True:
            low = next((i for i, st in enumerate(layers) if st is not None), None)
            if low is None or isinstance(layers[low], Merge):
                return run
            n, m = self._size(layers[low]), self._size(run)
            if n > 2 * m or n + m > self.min_fuel // 4:
                return run
            older, layers[low] = layers[low], None
            run = self._merged_now(older, run)
            if run is None:
                return None

    def _merged(self, older, newer):
        self.merges += 1
        return self._begin(older, newer)

    def _merged_now(self, older, newer):
        """``older`` and ``newer`` merged at once (``combine``, or a merge run to completion),
        counted and remembered as a merge is."""
        if self._combine is None:
            return self._finish(self._merged(older, newer))
        self.merges += 1
        self.rows_merged += self._size(older) + self._size(newer)
        out = self._combine(older, newer)
        if self._serial is not None:
            self.lineage.append((None if out is None else self._serial(out), self._serial(older),
                                 self._serial(newer)))
        return out

    def _roll_up(self, layers: list, index: int) -> None:
        while len(layers) <= index:
            layers.append(None)
        if not any(st is not None for st in layers[:index]):
            return
        carry = None
        for i in range(index):
            st = layers[i]
            layers[i] = None
            run = self._finish(st) if isinstance(st, Merge) else st
            if run is not None:
                carry = run if carry is None else self._finish(self._merged(run, carry))
        if carry is None:
            return
        st = layers[index]
        if st is None:
            layers[index] = carry
            return
        layers[index] = None
        run = self._finish(st) if isinstance(st, Merge) else st
        self._insert_at(layers, carry if run is None else self._finish(self._merged(run, carry)), index + 1)

    def _tidy(self, layers: list) -> None:
        """Move the oldest run, alone at the top, down past vacant layers to the layer of a
        :data:`SPACE_FACTOR` th of its rows (module docstring, **Space**); drop vacant layers
        above it."""
        while layers and layers[-1] is None:
            layers.pop()
        if not layers or isinstance(layers[-1], Merge):
            return
        top = len(layers) - 1
        want = level_of(-(-self._size(layers[top]) // SPACE_FACTOR))
        at = top
        while at > want and layers[at - 1] is None:
            at -= 1
        if at < top:
            layers[at] = layers.pop()
            del layers[at + 1:]

    def _insert_at(self, layers: list, run, index: int) -> None:
        if run is None:
            return
        while len(layers) <= index:
            layers.append(None)
        st = layers[index]
        if st is None:
            layers[index] = run
            return
        if isinstance(st, Merge):
            # Not reached (a merge at or below the introduced layer completes on its fuel);
            # completing it here keeps the structure sound whatever the sizes.
            layers[index] = None
            self._insert_at(layers, self._finish(st), index + 1)
            layers[index] = run
            return
        layers[index] = self._merged(st, run)


class FueledHolder:
    """What a structure keeping its runs in a :class:`FueledRuns` (its ``_fueled``) shows of
    them: the run count, the layers and the merge work counters."""

    _fueled: FueledRuns

    @property
    def runs(self) -> int:
        """How many runs hold the contents (both inputs of a merge in progress)."""
        return len(self._fueled.runs())

    @property
    def layers(self) -> list[tuple[int, int, int]]:
        """``(level, runs, rows)`` per layer, largest first (``FueledRuns.layers``)."""
        return self._fueled.layers()

    @property
    def merges(self) -> int:
        """Merges begun (a work counter)."""
        return self._fueled.merges

    @property
    def rows_merged(self) -> int:
        """Rows merges read (a work counter)."""
        return self._fueled.rows_merged

    @property
    def max_step_merged(self) -> int:
        """The most rows merges read in one insert (a work counter)."""
        return self._fueled.max_step_merged
