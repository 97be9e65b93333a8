"""``Spine``: the fueled merge spine (differential dataflow's ``src/trace/implementations/spine_fueled.rs``).

A spine is an append-only trace of immutable batches. Each batch covers a half-open interval
of times ``[lower, upper)``; consecutive batches are contiguous, so the batches together
describe everything from time 0 up to the spine's ``upper``. Batches are merged in the
background of inserts -- a little at a time, paid for with *fuel* that each new batch brings --
so that the number of batches stays logarithmic in the number of updates while no single
insert pays for a large merge.

Design
------
**Layers.** The spine is a list of layers; layer ``i`` is *Vacant*, *Single* (one batch) or
*Double* (two batches being merged into one for layer ``i + 1``). For bookkeeping, a batch at
layer ``i`` is treated as if it held ``2**i`` updates, even when it holds fewer (compaction
may have shrunk it, or it may be *structurally empty*: a placeholder that carries no interval
and no data, created by :meth:`Spine.exert` to push merges along). A batch introduced with
``n`` updates enters at layer ``ceil(log2(max(n, 1)))`` and so holds at most ``2**i``
updates; a merge at layer ``i`` produces at most ``2**(i + 1)`` for layer ``i + 1``. Older
batches sit in higher layers: reading the layers from the top down (the two inputs of a merge
in order), then the pending batches, yields contiguous intervals from 0 to the upper.

**Fuel.** Introducing a batch at layer ``i`` first gives ``(8 << i) * effort`` units of fuel
-- output updates a merge may write -- to *every* merge in progress, each its own copy,
lowest layer first; a merge that completes moves its result one layer up, possibly starting
a merge there (which then gets its fuel in the same pass). Then every batch below layer ``i``
is *rolled up* (merged, immediately, into one carried batch) so the new batch lands in a
layer with no smaller batches beneath it. The design invariant is that a merge in progress at
layer ``k`` has fewer than ``2**k`` virtual updates below it. A merge started at ``k + 1``
writes at most ``2**(k + 1)`` updates, and strictly more than ``2**k`` updates must arrive
before another batch can reach layer ``k + 1``; four units per arriving update would finish
it in time, and the factor 8 covers the virtual updates the roll-ups add. Consequences (both
checked by the tests with work counters): an update is copied about once per layer it
climbs, ``O(log N)`` amortized (tested: at most ``2 * log2(N)`` copies per update); and an
insert at layer ``i`` does at most ``(8 << i) * effort`` work per merge in progress plus the
roll-up of the fewer than ``2**i`` updates below it, so the largest single insert costs a
small fraction of an eager merge cascade (tested: under a tenth of it for ``10**6`` updates in
batches of 1000).

**Resumable merges.** A merge in progress owns preallocated output arrays and a cursor
``(i, j, o)`` into its two inputs and its output; the Numba kernel
:func:`colmz.kernels.fueled.run_merge` advances it by a budget of output updates and leaves the
cursor on a boundary between ``(data, time)`` groups. Merges consolidate (sum equal
``(data, time)``, drop zeros) and apply logical compaction: times are advanced to the logical
frontier as it was when the merge began. Work is counted in updates *written*, as in the
original, so a merge whose inputs cancel is cheap and still completes.

**Tidying.** After every introduction (and at each :meth:`Spine.exert`) the top layer is
inspected: when it holds a single batch that compaction has made much smaller than its layer,
it is moved down -- past vacant and structurally empty layers, and into the next occupied
layer (starting a merge) when the layers below hold at most ``2**L / 8`` virtual updates.

**Pending and the physical frontier.** An inserted batch waits in ``pending`` until the
*physical* compaction frontier reaches its upper: as in the original, a batch boundary may
only be merged away once nobody needs to read "through" that boundary
(:meth:`Spine.batches_through`). A user who only inserts batches has no reader to wait for,
so by default (``auto_physical=True``) the physical frontier follows the spine's upper and
every batch is merged as it arrives. ``auto_physical=False`` gives the original's behaviour:
the physical frontier stays at 0 until :meth:`Spine.set_physical_compaction` advances it.
In both modes the physical frontier can be set explicitly and never regresses.

**Logical compaction.** :meth:`Spine.set_logical_compaction` says the trace need only
accumulate correctly at times at or beyond the frontier. Merges then advance every time to
``max(t, frontier)`` and consolidate; inserted batches are compacted the same way on arrival
(they are sorted anyway). The empty frontier (``None``) means nothing may be read any more:
the spine keeps its data but advances no time further, and reads raise.

**Exertion.** Without inserts nothing merges. :meth:`Spine.exert` spends effort chosen by an
*exert logic* -- a function of :meth:`Spine.layers` returning an effort or ``None`` -- on
merges in progress, or, when there are none, introduces a structurally empty batch worth
that many virtual updates so that roll-ups and merges happen. ``exert_logic="proportional"``
is Materialize's logic (effort 1000 while a merge is in progress or a non-empty batch sits
within a few layers of the largest one), which drives an idle spine to a single batch.

**Diff overflow is refused at the insert.** A merge sums, per data row, the updates of a
contiguous run of batches that logical compaction advanced to one time, and a snapshot sums
a row's updates from time 0; a sum that leaves ``int64`` cannot be stored. Rather than let
such a merge sit in the layers -- where it would fail every later insert, exertion and close
that fuels it, on data that did not cause it -- :meth:`Spine.insert` refuses the batch that
would make one possible: when, for some data row, the row's updates from a current batch
boundary through some time of the new batch sum beyond ``int64``. The
``DiffOverflowError`` names the row, the time and the sum, and the spine is unchanged; by
induction every merge and read of what was accepted fits, so nothing else ever overflows.
This is conservative only in that a boundary still listed may be merged away before a merge
could form that sum. The check is free for ordinary counts: a running bound on the sum of
``|diff|`` held settles it while it stays under ``2**62``; beyond, per held batch one binary
search per distinct row of the new batch and a sum over that row's updates -- never a pass
over the spine (``overflow_checks`` and ``overflow_check_rows`` in :meth:`Spine.stats`).

**Trade-offs.** Batches are stored encoded (``colmz.updates.Encoded``: order-preserving key
words sorted by ``(data, time)``) so merges are word comparisons; decoding happens only when
batches are read. Each merge preallocates room for both inputs (fresh pages are touched only
as outputs are written) and trims the result by a copy when cancellation left it under half
full. Every mutating call checkpoints the small mutable state (layer list, cursors, frontiers,
counters) and restores it when anything raises, so a call that raises leaves the spine
exactly as it was, at the cost of a few list copies per call.

Examples
--------
>>> import colmz
>>> from colmz.spine import Spine
>>> s = Spine()
>>> for t in range(4):
...     s.insert(colmz.Updates({"k": [t % 2]}, time=[t], diff=[1]), lower=t, upper=t + 1)
>>> s.upper, len(s.layers()) > 0
(4, True)
>>> s.snapshot(3).to_pylist()
[(0, 3, 2), (1, 3, 2)]
>>> s.set_logical_compaction(2)
>>> s.snapshot(2).to_pylist()
[(0, 2, 2), (1, 2, 1)]
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from colmz.frontier import Frontier, before, check_frontier, check_time, frontier_le, join
from colmz.kernels.consolidate import sort_consolidate
from colmz.kernels.fueled import new_cursor, run_merge
from colmz.kernels.merge import merge_runs
from colmz.ops import DiffOverflowError, describe_row, diff_overflow_error
from colmz.order import narrow_rows, search_rows, unify_layouts
from colmz.rollback import undone_on_error
from colmz.updates import Encoded, Updates, unify_schemas

__all__ = [
    "EXERT_LOGICS",
    "BatchBoundsError",
    "FrontierRegressionError",
    "Spine",
    "SpineBatch",
    "proportional_exert_logic",
]

#: Layer index above which an introduced batch draws a warning (as the original prints).
LARGE_LEVEL = 32

#: Fuel handed to a merge that must finish now (roll-ups, explicit completion).
_UNLIMITED = 2**62

#: Layer description handed to exert logics: ``(level, batch_count, record_count)``.
LayerInfo = tuple[int, int, int]
ExertLogic = Callable[[Sequence[LayerInfo]], "int | None"]


class BatchBoundsError(ValueError):
    """An inserted batch does not continue the spine or holds times outside its interval."""


class FrontierRegressionError(ValueError):
    """A compaction frontier was asked to move backwards."""


# ----------------------------------------------------------------------------- exert logic


def proportional_exert_logic(proportionality: int = 16, effort: int = 1000) -> ExertLogic:
    """Materialize's proportional exert logic (``arrangement_exert_proportionality``).

    The returned function scans layers from the largest to the smallest, starting at the
    largest occupied one. It asks for ``effort`` when a layer has a merge in progress, or when
    a non-empty layer appears below the largest while the proportionality budget -- halved at
    each layer -- is still positive (so batches within about ``log2(proportionality) + 1``
    layers of the largest are merged into it). Otherwise it returns ``None``: the spine is
    tidy enough.

    >>> logic = proportional_exert_logic()
    >>> logic([(3, 1, 8), (2, 0, 0), (1, 1, 2), (0, 0, 0)])
    1000
    >>> logic([(3, 1, 8), (2, 0, 0)]) is None
    True
    """
    if isinstance(proportionality, bool) or not isinstance(proportionality, int) or proportionality < 0:
        raise ValueError(f"proportionality must be a non-negative int, got {proportionality!r}")
    if isinstance(effort, bool) or not isinstance(effort, int) or effort < 1:
        raise ValueError(f"effort must be a positive int, got {effort!r}")

    def logic(layers: Sequence[LayerInfo]) -> int | None:
        prop = proportionality
        first = True
        started = False
        for _level, count, records in layers:
            if not started:
                if count == 0:
                    continue
                started = True
            if count > 1:
                return effort
            if not first and prop > 0 and records > 0:
                return effort
            first = False
            prop //= 2
        return None

    logic.__name__ = f"proportional(proportionality={proportionality}, effort={effort})"
    return logic


#: Exert logics available by name: ``Spine(exert_logic="proportional")``.
EXERT_LOGICS: dict[str, Callable[[], ExertLogic]] = {"proportional": proportional_exert_logic}


# ----------------------------------------------------------------------------- internals


def _level(n: int) -> int:
    """``ceil(log2(max(n, 1)))``: the layer a batch of ``n`` updates is introduced at."""
    return (n - 1).bit_length() if n > 1 else 0


def _fmt(f: Frontier) -> str:
    return "[]" if f is None else str(f)


class _Batch:
    """An immutable batch: description ``[lower, upper)``, ``since`` and encoded updates."""

    __slots__ = ("lower", "upper", "since", "enc", "_mass")

    def __init__(self, lower: int, upper: Frontier, since: Frontier, enc: Encoded):
        self.lower = lower
        self.upper = upper
        self.since = since
        self.enc = enc
        self._mass = None

    def __len__(self) -> int:
        return len(self.enc.time)

    def mass(self) -> float:
        """The sum of ``|diff|`` (floating point, computed once): no sum of this batch's
        diffs is larger in magnitude."""
        if self._mass is None:
            self._mass = _mass(self.enc.diff)
        return self._mass

    def run(self, layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        e = self.enc.padded(layout)
        return e.keys, e.time, e.diff


class _Single:
    """A layer holding one batch, or ``None``: a structurally empty placeholder."""

    __slots__ = ("batch",)

    def __init__(self, batch: _Batch | None):
        self.batch = batch

    def __len__(self) -> int:
        return 0 if self.batch is None else len(self.batch)


class _Merge:
    """A Double layer: a merge in progress of ``a`` (older) and ``b``, or a complete one.

    A complete merge holds ``result`` (a batch or ``None``). Only ``cursor``, ``complete`` and
    ``result`` change after construction: they are what a failed Spine call rolls back
    (``colmz.rollback``; the cursor is written back into the same array).
    """

    ROLLBACK_FIELDS = ("cursor", "complete", "result")

    __slots__ = ("a", "b", "runs", "adv", "lower", "upper", "since", "layout", "out", "cursor",
                 "complete", "result")

    def __init__(self, a: _Batch | None, b: _Batch | None, logical: Frontier):
        self.a = a
        self.b = b
        self.result = None
        self.cursor = None
        self.out = None
        self.runs = None
        self.complete = True
        if a is None or b is None:
            # One side structurally empty: nothing to merge.
            self.result = a if b is None else b
            return
        if a.upper != b.lower:
            raise RuntimeError(
                f"spine bug: merging non-adjacent batches [{a.lower}, {_fmt(a.upper)}) and "
                f"[{b.lower}, {_fmt(b.upper)})"
            )
        self.lower = a.lower
        self.upper = b.upper
        self.since = join(a.since, b.since, logical)
        # Times are advanced to the logical frontier as of the merge's start (0: no change).
        self.adv = 0 if logical is None else logical
        if len(a) == 0 or len(b) == 0:
            other = b if len(a) == 0 else a
            if self.adv <= other.lower:
                # Every time of `other` is >= its lower >= adv: the merge is `other` itself.
                self.result = _Batch(self.lower, self.upper, self.since, other.enc)
                return
        self.layout = unify_layouts(a.enc.layout, b.enc.layout)
        # Pad once here, not at every step: padding copies when the layouts differ.
        self.runs = (a.run(self.layout), b.run(self.layout))
        cap = len(a) + len(b)
        w = sum(self.layout)
        self.out = (np.empty((cap, w), np.uint64), np.empty(cap, np.uint64),
                    np.empty(cap, np.int64))
        self.cursor = new_cursor()
        self.complete = False

    def __len__(self) -> int:
        if self.complete:
            return 0 if self.result is None else len(self.result)
        return len(self.a) + len(self.b)

    def batches(self) -> list[_Batch]:
        """The real batches this layer holds, oldest first."""
        if self.complete:
            return [] if self.result is None else [self.result]
        return [self.a, self.b]


class SpineBatch:
    """A read-only view of one batch of a :class:`Spine`.

    ``lower``/``upper`` bound the batch's times (``[lower, upper)``, ``upper`` ``None`` for
    the closing batch), ``since`` is the frontier its times may have been advanced to, and
    ``updates`` the batch's contents, sorted by ``(data, time)`` and consolidated (decoded on
    first access).
    """

    __slots__ = ("_batch", "_schema", "_updates")

    def __init__(self, batch: _Batch, schema):
        self._batch = batch
        self._schema = schema
        self._updates = None

    @property
    def lower(self) -> int:
        return self._batch.lower

    @property
    def upper(self) -> Frontier:
        return self._batch.upper

    @property
    def since(self) -> Frontier:
        return self._batch.since

    @property
    def updates(self) -> Updates:
        if self._updates is None:
            self._updates = Updates.decode(self._batch.enc, self._schema)
        return self._updates

    def __len__(self) -> int:
        return len(self._batch)

    def __repr__(self) -> str:
        b = self._batch
        return (f"SpineBatch(lower={b.lower}, upper={_fmt(b.upper)}, since={_fmt(b.since)}, "
                f"len={len(b)})")


# ----------------------------------------------------------------------------- the spine


class Spine:
    """An append-only trace of batches merged progressively with fuel.

    Parameters
    ----------
    effort : int, default 1
        Fuel multiplier: introducing a batch at layer ``i`` gives ``(8 << i) * effort`` units
        of work to each merge in progress. ``0`` is replaced by ``1`` (as in the original).
    exert_logic : str or callable, optional
        What :meth:`exert` does when called without an explicit effort: ``None`` (nothing),
        a name from :data:`EXERT_LOGICS` (``"proportional"``: Materialize's logic) or a
        function of :meth:`layers` returning an effort (``int >= 1``) or ``None``.
    auto_physical : bool, default True
        Let the physical compaction frontier follow the spine's upper, so every inserted
        batch is merged as it arrives. ``False``: batches wait in :attr:`pending` until
        :meth:`set_physical_compaction` passes their upper (the original's behaviour, for
        callers that read with :meth:`batches_through`).

    Examples
    --------
    >>> import colmz
    >>> s = Spine(effort=1)
    >>> s.insert(colmz.Updates({"k": ["a", "b"]}, time=[0, 1], diff=[1, 1]), lower=0, upper=2)
    >>> s.insert(colmz.Updates({"k": ["a"]}, time=[2], diff=[-1]), lower=2, upper=3)
    >>> s.snapshot(2).to_pylist()
    [('b', 2, 1)]
    >>> [(b.lower, b.upper, len(b)) for b in s.batches_through(3)]
    [(0, 2, 2), (2, 3, 1)]
    >>> s.close(); s.upper is None
    True
    """

    def __init__(
        self,
        effort: int = 1,
        exert_logic: str | ExertLogic | None = None,
        *,
        auto_physical: bool = True,
    ):
        if isinstance(effort, bool) or not isinstance(effort, int | np.integer):
            raise TypeError(f"effort must be an int, got {type(effort).__name__} {effort!r}")
        if effort < 0:
            raise ValueError(f"effort must be >= 0, got {effort}")
        if not isinstance(auto_physical, bool):
            raise TypeError(f"auto_physical must be a bool, got {auto_physical!r}")
        if exert_logic is None or callable(exert_logic):
            logic = exert_logic
        elif isinstance(exert_logic, str):
            if exert_logic not in EXERT_LOGICS:
                raise ValueError(
                    f"exert_logic must be one of {sorted(EXERT_LOGICS)} or a callable, "
                    f"got {exert_logic!r}"
                )
            logic = EXERT_LOGICS[exert_logic]()
        else:
            raise TypeError(
                f"exert_logic must be None, a name or a callable, got {type(exert_logic).__name__}"
            )
        self._effort = max(int(effort), 1)
        self._exert_logic: ExertLogic | None = logic
        self._exert_name = exert_logic if isinstance(exert_logic, str) else (
            None if logic is None else getattr(logic, "__name__", repr(logic)))
        self._auto_physical = auto_physical
        self._logical: Frontier = 0
        self._physical: Frontier = 0
        self._upper: Frontier = 0
        self._layers: list[_Single | _Merge | None] = []
        self._pending: deque[_Batch] = deque()
        self._schema = None
        self._call_work = 0
        self._mass_bound = 0  # >= the sum of |diff| held (see _refuse_overflow)
        self._stats = {
            "inserted_updates": 0,   # updates handed to insert()
            "inserted_batches": 0,   # insert() calls that succeeded (close() included)
            "merge_copies": 0,       # updates written by merges (the work fuel pays for)
            "merge_reads": 0,        # input updates consumed by merges
            "trim_copies": 0,        # updates copied to shrink a merge result cancellation emptied
            "merges_started": 0,     # merges of two real batches begun
            "merges_completed": 0,
            "max_insert_work": 0,    # most merge copies done by one insert()
            "max_call_work": 0,      # most merge copies done by any one call
            "invariant_warnings": 0, # soft design-invariant breaches seen by check_invariants
            "overflow_checks": 0,    # inserts whose diffs were checked row by row for overflow
            "overflow_check_rows": 0,  # held updates those checks summed
        }

    # ------------------------------------------------------------------ properties

    @property
    def upper(self) -> Frontier:
        """The upper frontier: every time before it has been inserted (``None``: closed)."""
        return self._upper

    @property
    def effort(self) -> int:
        return self._effort

    @property
    def auto_physical(self) -> bool:
        return self._auto_physical

    @property
    def schema(self):
        """The data columns' specs (``None`` before the first insert)."""
        return self._schema

    @property
    def pending(self) -> tuple[SpineBatch, ...]:
        """Batches inserted but not yet merged: their upper is beyond the physical frontier."""
        return tuple(SpineBatch(b, self._schema) for b in self._pending)

    def get_logical_compaction(self) -> Frontier:
        """The logical compaction frontier (initially 0)."""
        return self._logical

    def get_physical_compaction(self) -> Frontier:
        """The physical compaction frontier (initially 0; follows the upper when automatic)."""
        return self._physical

    def __len__(self) -> int:
        """Updates held (both inputs of a merge in progress count)."""
        n = sum(len(b) for b in self._pending)
        for st in self._layers:
            if st is not None:
                n += len(st)
        return n

    # ------------------------------------------------------------------ public operations

    def insert(self, updates: Updates, lower: int, upper: Frontier) -> None:
        """Append a batch of updates covering times ``[lower, upper)``.

        Parameters
        ----------
        updates : Updates
            Any order, not necessarily consolidated; the spine sorts and consolidates it
            (and advances its times to the logical compaction frontier).
        lower : int
            Must equal :attr:`upper`.
        upper : int or None
            Must be beyond ``lower``; ``None`` closes the spine.

        Raises
        ------
        BatchBoundsError
            (a ``ValueError``) when ``lower`` is not the spine's upper, the interval is empty,
            the spine is closed, or a time lies outside ``[lower, upper)``.
        colmz.SchemaError
            When the data columns differ from earlier batches'.
        colmz.ops.DiffOverflowError
            (an ``OverflowError``) when the batch's own updates of one row and time sum
            beyond ``int64``, or when a row's updates from a batch boundary of the spine
            through a time of this batch would (a merge or a read could need that sum). The
            message names the data row, the time and the sum. Merges, exertion, reads and
            :meth:`close` never overflow.

        A call that raises leaves the spine unchanged.

        >>> import colmz
        >>> s = Spine()
        >>> s.insert(colmz.Updates({"k": [1]}, time=[5], diff=[1]), lower=0, upper=3)
        Traceback (most recent call last):
        ...
        colmz.spine.BatchBoundsError: updates has time 5 outside the batch interval [0, 3)
        """
        lower, upper, schema = self._check_insert(updates, lower, upper)
        n = len(updates)
        enc = updates.encode()
        keys, time, diff = enc.keys, enc.time, enc.diff
        if keys.shape[0] != n:
            # A batch without data columns encodes to zero key words per row.
            keys = np.empty((n, 0), np.uint64)
        checked = grown = None
        if not n:
            # Fresh arrays rather than the caller's (possibly read-only) ones: kernels then
            # always see writable arrays and compile one signature.
            keys = np.empty((0, keys.shape[1]), np.uint64)
            time = np.empty(0, np.uint64)
            diff = np.empty(0, np.int64)
        else:
            adv = self._logical if self._logical else None
            try:
                keys, time, diff = sort_consolidate(keys, time, diff, "data", adv)
            except OverflowError:
                err = diff_overflow_error(keys, time, diff, enc.layout, schema, adv,
                                          "in the inserted batch")
                if err is None:
                    raise
                raise err from None
            grown, checked = self._refuse_overflow(keys, time, diff, enc.layout, schema, lower)
        since = self._logical
        batch = _Batch(lower, upper, since, Encoded(np.ascontiguousarray(keys), time, diff, enc.layout))

        with undone_on_error(self):
            self._call_work = 0
            self._schema = schema
            self._upper = upper
            self._pending.append(batch)
            if self._auto_physical:
                self._physical = join(self._physical, upper)
            self._consider_merges()
        st = self._stats
        st["inserted_updates"] += n
        st["inserted_batches"] += 1
        if grown is not None:
            self._mass_bound += grown
        if checked is not None:
            st["overflow_checks"] += 1
            st["overflow_check_rows"] += checked
        st["max_insert_work"] = max(st["max_insert_work"], self._call_work)
        st["max_call_work"] = max(st["max_call_work"], self._call_work)

    def _check_insert(self, updates: Updates, lower: int, upper: Frontier):
        """Validate :meth:`insert`'s arguments (all but the overflow refusal, which needs the
        consolidated batch); return ``(lower, upper, schema)`` with the unified schema."""
        if not isinstance(updates, Updates):
            raise TypeError(f"updates must be colmz.Updates, got {type(updates).__name__}")
        lower = check_time(lower, "lower")
        upper = check_frontier(upper, "upper")
        if self._upper is None:
            raise BatchBoundsError(f"the spine is closed (upper []); cannot insert at lower={lower}")
        if lower != self._upper:
            raise BatchBoundsError(
                f"lower must equal the spine's upper {self._upper}, got lower={lower}"
            )
        if upper is not None and upper <= lower:
            raise BatchBoundsError(
                f"upper must be beyond lower={lower} (a batch may not be empty), got upper={upper}"
            )
        schema = updates.schema if self._schema is None else unify_schemas(self._schema, updates.schema)
        if len(updates):
            time = updates.time
            tmin = int(time.min())
            tmax = int(time.max())
            if tmin < lower:
                raise BatchBoundsError(
                    f"updates has time {tmin} outside the batch interval [{lower}, {_fmt(upper)})"
                )
            if not before(tmax, upper):
                raise BatchBoundsError(
                    f"updates has time {tmax} outside the batch interval [{lower}, {_fmt(upper)})"
                )
        return lower, upper, schema

    def close(self) -> None:
        """Seal the spine: insert an empty batch from the upper to ``None``.

        >>> s = Spine(); s.close(); s.upper is None
        True
        """
        if self._upper is None:
            return
        empty = Updates.empty(self._schema or ())
        self.insert(empty, self._upper, None)

    def set_logical_compaction(self, frontier: Frontier) -> None:
        """Allow merges to advance times to ``frontier`` (``None``: nothing is read any more).

        Raises ``FrontierRegressionError`` (a ``ValueError``) when ``frontier`` is before the
        current one.

        >>> s = Spine(); s.set_logical_compaction(4); s.get_logical_compaction()
        4
        """
        f = check_frontier(frontier, "frontier")
        if not frontier_le(self._logical, f):
            raise FrontierRegressionError(
                f"logical compaction cannot regress from {_fmt(self._logical)} to {_fmt(f)}"
            )
        self._logical = f

    def set_physical_compaction(self, frontier: Frontier) -> None:
        """Allow batch boundaries before ``frontier`` to be merged away, then merge.

        Pending batches whose upper is at or before ``frontier`` are introduced into the
        layers. Raises ``FrontierRegressionError`` on regression.

        >>> import colmz
        >>> s = Spine(auto_physical=False)
        >>> s.insert(colmz.Updates({"k": [1]}, time=[0], diff=[1]), lower=0, upper=1)
        >>> len(s.pending)
        1
        >>> s.set_physical_compaction(1); len(s.pending)
        0
        """
        f = self._check_physical_compaction(frontier)
        with undone_on_error(self):
            self._call_work = 0
            self._physical = f
            self._consider_merges()
        self._stats["max_call_work"] = max(self._stats["max_call_work"], self._call_work)

    def _check_physical_compaction(self, frontier: Frontier) -> Frontier:
        """Validate :meth:`set_physical_compaction`'s argument; return it as a frontier."""
        f = check_frontier(frontier, "frontier")
        if frontier_le(self._physical, f):
            return f
        msg = f"physical compaction cannot regress from {_fmt(self._physical)} to {_fmt(f)}"
        if self._auto_physical:
            # The caller may never have set that frontier: say where it came from.
            msg += (
                f"; with auto_physical=True (the default) the physical frontier follows the "
                f"spine's upper (now {_fmt(self._upper)}) and every batch is merged as it arrives. "
                "To hold batch boundaries back with set_physical_compaction, construct the spine "
                "with Spine(auto_physical=False)"
            )
        raise FrontierRegressionError(msg)

    def exert(self, effort: int | None = None) -> int | None:
        """Do merge work without new data; return the effort applied (``None``: none).

        With ``effort`` given, apply it; otherwise ask the exert logic (none: do nothing).
        When merges are in progress each receives ``effort`` units of fuel; otherwise a
        structurally empty batch worth ``effort`` virtual updates is introduced, which rolls
        smaller batches up and starts merges. Tidies the top layers first.

        >>> import colmz
        >>> s = Spine(exert_logic="proportional")
        >>> for t in range(3):
        ...     s.insert(colmz.Updates({"k": [t]}, time=[t], diff=[1]), lower=t, upper=t + 1)
        >>> while s.exert() is not None:
        ...     pass
        >>> [count for _, count, _ in s.layers() if count]
        [1]
        """
        if effort is not None:
            if isinstance(effort, bool) or not isinstance(effort, int | np.integer):
                raise TypeError(f"effort must be an int or None, got {effort!r}")
            if effort < 1:
                raise ValueError(f"effort must be >= 1, got {effort}")
            effort = int(effort)
        with undone_on_error(self):
            self._call_work = 0
            self._tidy_layers()
            if effort is None and self._exert_logic is not None:
                effort = self._exert_logic(self.layers())
                if effort is not None:
                    if isinstance(effort, bool) or not isinstance(effort, int | np.integer):
                        raise TypeError(f"exert_logic returned {effort!r}; expected an int or None")
                    if effort < 1:
                        raise ValueError(f"exert_logic returned effort {effort}; expected >= 1")
                    effort = int(effort)
            if effort is not None:
                if any(isinstance(st, _Merge) for st in self._layers):
                    self._apply_fuel(effort)
                else:
                    self._introduce(None, _level(effort))
        self._stats["max_call_work"] = max(self._stats["max_call_work"], self._call_work)
        return effort

    def layers(self) -> list[LayerInfo]:
        """``(level, batch_count, record_count)`` per layer, largest layer first.

        ``batch_count`` is 0 (vacant), 1 (single) or 2 (merging); the input of exert logics.

        >>> Spine().layers()
        []
        """
        out = []
        for i in range(len(self._layers) - 1, -1, -1):
            st = self._layers[i]
            if st is None:
                out.append((i, 0, 0))
            elif isinstance(st, _Single):
                out.append((i, 1, len(st)))
            else:
                out.append((i, 2, len(st)))
        return out

    def batches_through(self, upper: Frontier) -> list[SpineBatch]:
        """The non-empty batches that together hold every update at times before ``upper``.

        Oldest first (top layer down, merge inputs in order, then pending batches). ``upper``
        must be at or beyond the physical compaction frontier (earlier boundaries may already
        be merged away), at or before the spine's upper, and must not cut a pending batch.
        ``upper == 0`` gives ``[]``.

        Raises ``ValueError`` otherwise, and when the logical frontier is empty.
        """
        u = check_frontier(upper, "upper")
        if u == 0:
            return []
        if self._logical is None:
            raise ValueError("batches_through: the logical compaction frontier is empty ([]); "
                             "the spine may not be read any more")
        if not frontier_le(self._physical, u):
            raise ValueError(
                f"upper={_fmt(u)} is before the physical compaction frontier "
                f"{_fmt(self._physical)}: batches may have been merged across it"
            )
        if not frontier_le(u, self._upper):
            raise ValueError(
                f"upper={_fmt(u)} is beyond the spine's upper {_fmt(self._upper)}: "
                "not all batches through it have been inserted"
            )
        out = []
        for st in reversed(self._layers):
            if st is None:
                continue
            bs = [st.batch] if isinstance(st, _Single) else st.batches()
            out.extend(b for b in bs if b is not None and len(b))
        for b in self._pending:
            if not len(b):
                continue
            inc_lower = frontier_le(b.lower, u)
            inc_upper = frontier_le(b.upper, u)
            if inc_lower != inc_upper and u != b.lower:
                raise ValueError(
                    f"upper={_fmt(u)} straddles the pending batch [{b.lower}, {_fmt(b.upper)})"
                )
            if inc_upper:
                out.append(b)
        return [SpineBatch(b, self._schema) for b in out]

    def snapshot(self, as_of: int) -> Updates:
        """The collection at ``as_of``: updates at times ``<= as_of``, timed ``as_of``.

        Consolidated and sorted by data. ``as_of`` must be at or beyond the logical
        compaction frontier and before the spine's upper, else ``ValueError``.

        >>> import colmz
        >>> s = Spine()
        >>> s.insert(colmz.Updates({"k": [2, 1, 2]}, time=[0, 1, 2], diff=[1, 1, 1]), 0, 3)
        >>> s.snapshot(1).to_pylist()
        [(1, 1, 1), (2, 1, 1)]
        """
        t = check_time(as_of, "as_of")
        if not frontier_le(self._logical, t):
            raise ValueError(
                f"as_of={t} is before the logical compaction frontier {_fmt(self._logical)}"
            )
        if not before(t, self._upper):
            raise ValueError(f"as_of={t} is not before the spine's upper {_fmt(self._upper)}")
        batches = [b for b in self._all_batches() if len(b)]
        if self._schema is None:
            return Updates.empty(())
        if not batches:
            return Updates.decode(
                Encoded(np.empty((0, 0), np.uint64), np.empty(0, np.uint64),
                        np.empty(0, np.int64), (0,) * (len(self._schema) + 1)),
                self._schema,
            )
        layout = unify_layouts(*(b.enc.layout for b in batches))
        runs = []
        for b in batches:
            keys, time, diff = b.run(layout)
            if b.upper is None or b.upper > t + 1 or b.since is None or b.since > t:
                # Some times may be beyond as_of: keep the (data-sorted) rows at or before it.
                keep = time <= np.uint64(t)
                if not keep.all():
                    keys, time, diff = keys[keep], time[keep], diff[keep]
            runs.append((keys, time, diff))
        keys, time, diff = merge_runs(runs, "data", t)
        return Updates.decode(Encoded(keys, time, diff, layout), self._schema)

    def stats(self) -> dict:
        """Work counters and sizes.

        ``merge_copies`` (updates written by merges), ``merge_reads``, ``trim_copies``,
        ``merges_started``/``merges_completed``, ``max_insert_work`` (most merge copies done
        by one insert), ``max_call_work``, ``inserted_updates``/``inserted_batches``,
        ``invariant_warnings``, ``overflow_checks``/``overflow_check_rows`` (inserts checked
        row by row for diff overflow, held updates those checks summed), and the current
        ``batches`` (real batches held, pending included), ``records``, ``layers`` and
        ``copies_per_update``.

        >>> Spine().stats()["batches"]
        0
        """
        out = dict(self._stats)
        out["batches"] = sum(1 for _ in self._all_batches())
        out["records"] = len(self)
        out["layers"] = len(self._layers)
        n = out["inserted_updates"]
        out["copies_per_update"] = out["merge_copies"] / n if n else 0.0
        return out

    def check_invariants(self, deep: bool = False) -> list[str]:
        """Check the spine's invariants; raise ``RuntimeError`` on a breach.

        Hard invariants: each layer holds 0, 1 or 2 batches; a batch at layer ``i`` holds at
        most ``2**i`` updates (a complete merge result at most ``2**(i + 1)``); batches read
        top-down, then pending, have contiguous intervals from 0 to the upper; no pending batch
        is ready to merge. With ``deep``, also that each batch is sorted by ``(data, time)``,
        consolidated, and its times lie in its interval or at most at its since.

        Returns the soft warnings: merges in progress at layer ``k`` with ``2**k`` or more
        virtual updates below them (the design invariant; also counted in :meth:`stats`).

        >>> Spine().check_invariants()
        []
        """
        for i, st in enumerate(self._layers):
            if st is None:
                continue
            if isinstance(st, _Single):
                sizes = [] if st.batch is None else [len(st.batch)]
                cap = 1 << i
            elif isinstance(st, _Merge):
                sizes = [len(b) for b in st.batches()]
                cap = (1 << (i + 1)) if st.complete else (1 << i)
            else:
                raise RuntimeError(f"layer {i} holds {st!r}")
            for n in sizes:
                if n > cap:
                    raise RuntimeError(f"layer {i} holds a batch of {n} updates (> {cap})")
        seq = list(self._all_batches())
        expect: Frontier = 0
        for b in seq:
            if b.lower != expect:
                raise RuntimeError(
                    f"batch [{b.lower}, {_fmt(b.upper)}) does not continue from {_fmt(expect)}"
                )
            expect = b.upper
        if seq and expect != self._upper:
            raise RuntimeError(f"batches end at {_fmt(expect)}, upper is {_fmt(self._upper)}")
        if not seq and self._upper != 0:
            raise RuntimeError(f"no batches but upper is {_fmt(self._upper)}")
        if self._pending and frontier_le(self._pending[0].upper, self._physical):
            raise RuntimeError("a pending batch is ready to merge but was left pending")
        if deep:
            for b in seq:
                _check_batch(b)
        soft = []
        virtual = 0
        for k, st in enumerate(self._layers):
            if isinstance(st, _Merge) and not st.complete and virtual >= (1 << k):
                soft.append(f"merge at layer {k} has {virtual} virtual updates below (>= 2**{k})")
            if isinstance(st, _Single):
                virtual += 1 << k
            elif isinstance(st, _Merge):
                virtual += 2 << k
        self._stats["invariant_warnings"] += len(soft)
        return soft

    def plot(self, ax=None):
        """Layers with their batch sizes, merges in progress and the fuel they may still need
        (:func:`colmz.plot.spine`; needs ``colmz[plot]``). Returns the matplotlib ``Axes``."""
        from colmz.plot import spine

        return spine(self, ax=ax)

    def _repr_html_(self) -> str:
        from colmz.display import spine_html

        return spine_html(self)

    def __repr__(self) -> str:
        parts = []
        for level, count, records in self.layers():
            if count == 1:
                parts.append(f"L{level}: {records}")
            elif count == 2:
                st = self._layers[level]
                if st.complete:
                    parts.append(f"L{level}: merged {records}")
                else:
                    done = int(st.cursor[0] + st.cursor[1])
                    parts.append(f"L{level}: merging {done}/{records}")
        return (
            f"Spine(upper={_fmt(self._upper)}, logical={_fmt(self._logical)}, "
            f"physical={_fmt(self._physical)}, effort={self._effort}, "
            f"layers=[{', '.join(parts)}], pending={len(self._pending)}, updates={len(self)})"
        )

    # ------------------------------------------------------------------ mechanism

    def _refuse_overflow(self, keys, time, diff, layout, schema, lower: int):
        """Raise ``DiffOverflowError`` if a merge or read could ever overflow with this batch.

        Returns what the caller applies once the insert succeeds: the change of
        ``_mass_bound`` (a bound on the sum of ``|diff|`` over everything held, grown by each
        insert and never shrunk by merges, which only cancel) and, when the exact check ran,
        the number of held updates it summed (else ``None``).

        A merge sums, per data row, every update of a contiguous run of batches whose time
        logical compaction advanced to the same frontier; a snapshot sums a row's updates
        from time 0. So with the new batch ``X`` the sums that can arise and involve ``X``
        are: a row's updates in the batches from some current batch boundary on, plus the
        row's updates of ``X`` up to some time. When they all fit ``int64`` -- and the sums
        without ``X`` did when their last batch came in -- no merge, exertion, snapshot or
        close can ever overflow.

        Cost: ``O(1)`` beyond one min/max pass over the new diffs while the running bound
        stays under ``2**62`` -- every workload of ordinary counts; past it, the bound is
        recomputed from the held batches' cached sums of ``|diff|``, and only if that fails
        too,
        beyond that, per batch a binary search for each distinct row of ``X`` and a sum over
        that row's updates -- never a pass over the spine (``overflow_check_rows`` counts the
        rows summed).
        """
        new = _bound(diff)
        if self._mass_bound + new <= 2**62:
            return new, None
        held = [b for b in self._all_batches() if len(b)]
        tight = _mass(diff) + sum(b.mass() for b in held)
        if tight <= 2.0**62:  # float sums: relative error far below the factor of 2 spared
            return tight - self._mass_bound, None
        summed = 0
        n = len(time)
        first = np.ones(n, bool)
        if n > 1:
            first[1:] = (keys[1:] != keys[:-1]).any(axis=1)
        starts = np.flatnonzero(first)
        rows = keys[starts]
        # s[j, g]: the sum of row g's diffs in held batch j (oldest first). Each is a sum from
        # a batch boundary, which fit when its batch came in, so int64 arithmetic is exact.
        s = np.zeros((len(held) + 1, len(starts)), np.int64)
        for j, b in enumerate(held):
            q, present = narrow_rows(rows, layout, b.enc.layout)
            lo = search_rows(b.enc.keys, q, "left")
            hi = np.where(present, search_rows(b.enc.keys, q, "right"), lo)
            s[j] = _range_sums(b.enc.diff, lo, hi)
            summed += int((hi - lo).sum())
        # suffix[j, g]: row g's sum over the batches from boundary j on (the last row: none).
        suffix = np.cumsum(s[::-1], axis=0)[::-1]
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
        prefix_hi, prefix_lo = _group_prefixes(diff, starts)
        for pick in (np.argmax, np.argmin):
            j = pick(suffix, axis=0)
            extreme = suffix[j, np.arange(len(starts))][group]
            high = prefix_hi + (extreme >> 32) + ((prefix_lo + (extreme & 0xFFFFFFFF)) >> 32)
            bad = np.flatnonzero((high >= 2**31) | (high < -(2**31)))
            if len(bad):
                i = bad[np.argmin(time[bad])]
                g = group[i]
                total = int(extreme[i]) + int(prefix_hi[i]) * 2**32 + int(prefix_lo[i])
                jj = int(j[g])
                start = held[jj].lower if jj < len(held) else lower
                row = describe_row(keys, layout, schema, int(i))
                raise DiffOverflowError(
                    f"diff overflow: the updates of data row {row!r} from time {start} through "
                    f"time {int(time[i])} would sum to {total}, outside int64 (a merge or a "
                    "read may need that sum); the batch is refused and the spine is unchanged",
                    row, int(time[i]), total,
                )
        return tight - self._mass_bound, summed

    def _all_batches(self):
        """Real batches (empty ones included), oldest first: top layer down, then pending."""
        for st in reversed(self._layers):
            if st is None:
                continue
            if isinstance(st, _Single):
                if st.batch is not None:
                    yield st.batch
            else:
                yield from st.batches()
        yield from self._pending

    # What a failed call rolls back (colmz.rollback): containers (list, deque, dict) copied,
    # frontiers and batches (immutable) kept by reference, and the merges in progress in
    # ``_layers`` (which change in place) rolled back through their own ROLLBACK_FIELDS.
    ROLLBACK_FIELDS = ("_layers", "_pending", "_upper", "_logical", "_physical", "_schema", "_stats")

    def _consider_merges(self) -> None:
        pending = self._pending
        while pending and frontier_le(pending[0].upper, self._physical):
            batch = pending.popleft()
            if len(batch) == 0:
                # An empty batch fuses with an empty single at the lowest occupied layer --
                # the most recent batch -- instead of taking a layer of its own.
                pos = next((i for i, st in enumerate(self._layers) if st is not None), None)
                if pos is not None:
                    st = self._layers[pos]
                    if isinstance(st, _Single) and len(st) == 0:
                        self._insert_at(batch, pos)
                        self._layers[pos] = _Single(self._complete_at(pos))
                        continue
            self._introduce(batch, _level(len(batch)))

    def _introduce(self, batch: _Batch | None, level: int) -> None:
        if level > LARGE_LEVEL:
            warnings.warn(
                f"spine: introducing a batch at layer {level} (over 2**{LARGE_LEVEL} updates)",
                RuntimeWarning,
                stacklevel=3,
            )
        self._apply_fuel((8 << level) * self._effort)
        self._roll_up(level)
        self._insert_at(batch, level)
        self._tidy_layers()

    def _apply_fuel(self, fuel: int) -> None:
        layers = self._layers
        for i in range(len(layers)):
            st = layers[i]
            if isinstance(st, _Merge):
                if not st.complete:
                    self._work(st, fuel)
                if st.complete:
                    self._insert_at(self._complete_at(i), i + 1)

    def _work(self, m: _Merge, fuel: int) -> None:
        """Advance merge ``m`` by ``fuel`` output updates; finish it when inputs run out."""
        cur = m.cursor
        before_reads = int(cur[0] + cur[1])
        a, b = m.a, m.b
        produced = run_merge(m.runs[0], m.runs[1], m.adv, cur, m.out, fuel)
        st = self._stats
        st["merge_copies"] += produced
        st["merge_reads"] += int(cur[0] + cur[1]) - before_reads
        self._call_work += produced
        if int(cur[0]) >= len(a) and int(cur[1]) >= len(b):
            o = int(cur[2])
            ok, ot, od = m.out
            if 2 * o < len(ot):
                # Cancellation left the buffer under half full: keep a tight copy instead.
                ok, ot, od = ok[:o].copy(), ot[:o].copy(), od[:o].copy()
                st["trim_copies"] += o
            else:
                ok, ot, od = ok[:o], ot[:o], od[:o]
            m.result = _Batch(m.lower, m.upper, m.since, Encoded(ok, ot, od, m.layout))
            m.complete = True
            st["merges_completed"] += 1

    def _roll_up(self, index: int) -> None:
        layers = self._layers
        while len(layers) <= index:
            layers.append(None)
        if any(st is not None for st in layers[:index]):
            carry = None
            for i in range(index):
                self._insert_at(carry, i)
                carry = self._complete_at(i)
            self._insert_at(carry, index)
            if isinstance(layers[index], _Merge):
                self._insert_at(self._complete_at(index), index + 1)

    def _insert_at(self, batch: _Batch | None, index: int) -> None:
        layers = self._layers
        while len(layers) <= index:
            layers.append(None)
        st = layers[index]
        if st is None:
            layers[index] = _Single(batch)
        elif isinstance(st, _Single):
            m = _Merge(st.batch, batch, self._logical)
            if m.a is not None and m.b is not None:
                self._stats["merges_started"] += 1
                if m.complete:
                    self._stats["merges_completed"] += 1
            layers[index] = m
        else:
            raise RuntimeError(f"spine bug: insert into layer {index}, which is still merging")

    def _complete_at(self, index: int) -> _Batch | None:
        st = self._layers[index]
        self._layers[index] = None
        if st is None:
            return None
        if isinstance(st, _Single):
            return st.batch
        if not st.complete:
            self._work(st, _UNLIMITED)
        return st.result

    def _tidy_layers(self) -> None:
        layers = self._layers
        if not layers or not isinstance(layers[-1], _Single):
            return
        length = len(layers)
        appropriate = _level(len(layers[-1]))
        while appropriate < length - 1:
            below = layers[length - 2]
            if below is None or (isinstance(below, _Single) and below.batch is None):
                del layers[length - 2]
                length -= 1
            elif isinstance(below, _Single):
                smaller = 0
                for i in range(length - 2):
                    st = layers[i]
                    if isinstance(st, _Single):
                        smaller += 1 << i
                    elif isinstance(st, _Merge):
                        smaller += 2 << i
                if smaller <= (1 << length) // 8:
                    del layers[length - 2]
                    self._insert_at(below.batch, length - 2)
                return
            else:
                return


def _bound(d: np.ndarray) -> int:
    """``len(d) * max |d|``, exactly (Python ints; a list for few rows: numpy calls cost more)."""
    if len(d) <= 64:
        v = d.tolist()
        return len(v) * max(max(v), -min(v)) if v else 0
    return len(d) * max(int(d.max()), -int(d.min()))


def _mass(d: np.ndarray) -> float:
    return float(np.abs(d, dtype=np.float64).sum()) if len(d) else 0.0


def _range_sums(d: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``d[lo[g]:hi[g]].sum()`` for every ``g`` (wrapping ``int64``), reading only those rows."""
    lengths = hi - lo
    out = np.zeros(len(lo), np.int64)
    nonempty = np.flatnonzero(lengths)
    if not len(nonempty):
        return out
    ln = lengths[nonempty]
    offsets = np.cumsum(ln) - ln
    idx = np.arange(int(ln.sum())) + np.repeat(lo[nonempty] - offsets, ln)
    out[nonempty] = np.add.reduceat(d[idx], offsets)
    return out


def _group_prefixes(d: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact running sums of ``d`` restarting at each of ``starts``, as ``(high, low)`` pairs.

    The value is ``high * 2**32 + low`` with ``0 <= low < 2**32``: 32-bit halves summed in
    ``int64`` are exact for fewer than ``2**31`` rows.
    """
    hi = np.cumsum(d >> 32)
    lo = np.cumsum(d & 0xFFFFFFFF)
    n = len(d)
    counts = np.diff(np.append(starts, n))
    base_hi = np.repeat(np.append(0, hi)[starts], counts)
    base_lo = np.repeat(np.append(0, lo)[starts], counts)
    h = hi - base_hi
    low = lo - base_lo
    return h + (low >> 32), low & 0xFFFFFFFF


def _check_batch(b: _Batch) -> None:
    keys, time, diff = b.enc.keys, b.enc.time, b.enc.diff
    n = len(time)
    if keys.shape[0] != n or len(diff) != n:
        raise RuntimeError("batch columns have different lengths")
    if n == 0:
        return
    if (diff == 0).any():
        raise RuntimeError("batch holds a zero diff")
    tmin = int(time.min())
    if tmin < b.lower:
        raise RuntimeError(f"batch [{b.lower}, {_fmt(b.upper)}) holds time {tmin}")
    tmax = int(time.max())
    # Times may lie at or before the batch's since (None, the empty frontier, is beyond them
    # all: a merge after compaction to [] keeps times advanced by earlier merges).
    if not before(tmax, b.upper) and not frontier_le(tmax, b.since):
        raise RuntimeError(f"batch [{b.lower}, {_fmt(b.upper)}) holds time {tmax}")
    # Sorted and consolidated by (data, time): consecutive rows strictly increase.
    rows = np.concatenate([keys, time.reshape(-1, 1)], axis=1)
    a, c = rows[:-1], rows[1:]
    neq = a != c
    first = np.argmax(neq, axis=1)
    idx = np.arange(len(a))
    if not (neq.any(axis=1) & (a[idx, first] < c[idx, first])).all():
        raise RuntimeError("batch is not sorted and consolidated by (data, time)")
