"""``MinMaxReduce``: ``min`` and ``max`` per group, by Materialize's hierarchical plans.

Design
------
``min``/``max`` are not invertible: retracting the current extreme needs the group's other
rows. Materialize plans them as *hierarchical* reductions (``src/compute-types/src/plan/
reduce.rs``): associative, so a group's extreme is the extreme of its buckets' extremes.
Three plans, named by :attr:`MinMaxReduce.plan` (and in ``EXPLAIN``):

``"per group"`` (the default): the input arranged by the group key -- its own
:class:`~colmz.dataflow.KeyedArrangement`, or the catalog's *shared* arrangement (``arranged``,
a :class:`~colmz.dataflow.shared.SharedInput`, fed the step's changes before the step, the
old rows then being the arrangement minus the delta) -- and each affected group re-reduced
from its rows, before and after the delta. Work is the affected groups' rows, read by a
few vectorised calls: when no value read can be NULL, once, as the arrangement's words (one
sort per aggregated column of (group, value words, tag) over the rows read and the delta's,
packed into one ``uint64`` when they fit, gives each value's multiplicity before and after;
only the groups whose extremes changed are decoded and emitted); else as rows, before and
after. In colmz it is the faster plan for groups up to tens of thousands of
rows: reading them vectorised costs less than the bucketed plan's fixed cost per stage
(each stage is a lookup, an insert and two reductions, in Python calls).

``"bucketed"`` (Materialize's ``BucketedPlan``). Each input row gets a hash of
its aggregated values' words (:func:`row_hash`; a pure function of the values, so a restored
state buckets alike). Stage ``0`` arranges the input's group and value columns by ``(group,
hash % B0)``; stage ``i > 0`` arranges the extremes of the non-empty buckets of stage ``i - 1``
by ``(group, bucket % Bi)``, with bucket counts decreasing by 16 down to 1 (the last stage is
keyed by the group: its reduction is the output). The counts are
:func:`bucketing`\\ ``(expected_group_size)`` -- powers of 16 below the expected group size,
as Materialize's ``bucketing_of_expected_group_size`` (whose default plans for 4 billion
rows; colmz's default, 65 536, gives ``4096, 256, 16``). A step re-reduces only the buckets
the delta touches, stage by stage, each stage's change feeding the next: deleting the
extreme of a group of ``n`` rows reads about ``n / B0`` rows plus 16 per further stage (a
10 000-row group: about 3 + 16 + 16 + 16 rows) instead of the group. Memory: one row per
non-empty bucket per stage (for small groups about one per input row per stage: the price
of the plan, as in Materialize, which asks for a group-size hint).

``"monotonic"`` (Materialize's ``MonotonicPlan``): for an input that only ever inserts, each
group keeps only its current extremes (an arrangement of one row per group); a step folds the
delta's extremes into them. Sound only when the input is append-only: the planner chooses it
only for an input it can prove so (``colmz.dataflow.plan``: a relation declared append-only,
read through maps and filters, no temporal filter); the operator checks every delta and
refuses a retraction with :class:`NonMonotonicInput` (state unchanged).

Values order as PostgreSQL's ``min``/``max`` do for numbers, booleans, times and ``bytea``:
colmz's words (``NaN`` above every number, ``-0.0 = 0.0``); NULLs are skipped (a group of only
NULLs gives NULL). Text is refused (its order is the collation's). Groups compare NULL = NULL;
a group whose rows are all retracted disappears; with no group columns the one global row
exists from the first step on (NULLs over an empty input).

Insert-only deltas (``"per group"``, values of one plain word: numbers, booleans, times, no
NULL): each affected group's extremes are reduced in place over the arrangement's runs
(``np.minimum.reduceat`` over each run's ranges of value words; no row gathered or sorted).
That gives a group's extremes when every row read of it has a positive multiplicity (none
cancels another, so its extreme is that of its rows). The decision is per group: a group
holding a row of multiplicity ``<= 0`` -- a retraction that no merge has yet cancelled
against its insert -- is re-reduced by the sorting path, and only it (a one-row delete leaves
its retraction in a small run until the spine merges that run with the one holding the row;
the step's other groups are not sent to the sorting path by it). Over an own arrangement
(read before the delta enters) the other groups' extremes after are those folded with the
delta's (``min(old min, min inserted)``, as the monotonic plan folds them); over the shared
arrangement (which holds the delta) a group none of whose extremes an inserted value reaches
kept them and emits nothing (counted in ``easy_groups``). A group whose extreme an inserted
value reaches has that value as its extreme after; its extreme before is found in place too
(a second ``reduceat`` pass over its runs: the copies of the delta's least value ``d1`` held
and the least held value above it): ``d1`` if held more often than the delta inserted it,
else that least value above -- when it is below the delta's next value ``d2``, so not an
inserted one (``max`` mirrored; a group holding no more rows than the delta inserted is new).
Only a group where ``d2`` too reaches that far is re-reduced by the sorting path. A step that
retracts, or whose runs lay out a NULL word for a value, takes the sorting path for all its
groups.

Work counters: ``rows_reduced`` (rows read to re-reduce buckets or groups, cumulative),
``buckets_touched`` (buckets, or groups, re-reduced), per stage in ``stage_rows``, and
``easy_groups`` (groups an insert-only step over the shared arrangement left alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.keyed import (
    KeyedArrangement,
    Matches,
    consolidate_packed,
    consolidate_words,
    expand_ranges,
    pack_columns,
)
from colmz.dataflow.regroup import affected_groups, check_orderable, fresh_name, group_rows
from colmz.dataflow.step import Clock, as_schema, check_columns, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.ops import concat, consolidate
from colmz.order import (
    ColumnSpec,
    array_from_numpy,
    decode_columns,
    encode_columns,
    pad_keys,
    search_rows,
    unify_layouts,
)
from colmz.rollback import undone_on_error
from colmz.updates import Updates

__all__ = ["PLANS", "Max", "Min", "MinMaxReduce", "NonMonotonicInput", "bucketing", "row_hash"]

#: The plans of :class:`MinMaxReduce` (module docstring).
PLANS = ("bucketed", "monotonic", "per group")

#: Above this many rows a reduction sorts with colmz.consolidate's kernels, below with numpy.
SMALL = 256

#: Default expected group size: buckets ``4096, 256, 16``.
EXPECTED_GROUP_SIZE = 65_536


class NonMonotonicInput(ValueError):
    """The input of a monotonic min/max retracted a row."""


class _Extreme:
    def __init__(self, column: str):
        if not isinstance(column, str):
            raise TypeError(f"{type(self).__name__} takes a column name (str), got {column!r}")
        self.column = column

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.column!r})"


class Min(_Extreme):
    """``min(column)``."""


class Max(_Extreme):
    """``max(column)``."""


def bucketing(expected_group_size: int) -> tuple[int, ...]:
    """Bucket counts of the stages below the last, descending: the powers of 16 below
    ``expected_group_size`` (Materialize's ``bucketing_of_expected_group_size``).

    >>> bucketing(65_536), bucketing(16), bucketing(17)
    ((4096, 256, 16), (), (16,))
    """
    if isinstance(expected_group_size, bool) or not isinstance(expected_group_size, int) or expected_group_size < 1:
        raise ValueError(f"expected_group_size must be a positive int, got {expected_group_size!r}")
    out, b = [], 16
    while b < expected_group_size:
        out.append(b)
        b *= 16
    return tuple(reversed(out))


def _mix(h: np.ndarray, word: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of ``h ^ word``."""
    x = h ^ word
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def row_hash(columns: Sequence[pa.Array]) -> np.ndarray:
    """A 64-bit hash of each row of ``columns``: a pure function of the row's values -- the
    same in every batch and process. Each column's order-preserving words are folded in
    without the batch-dependent parts of its encoding (the NULL word, which exists only when
    the batch has NULLs, and the zero padding of variable-width values: trailing zero words
    are skipped, so values differing only there share a hash, which only shares a bucket).

    >>> a = row_hash([pa.array([1, 2, 1])])
    >>> bool(a[0] == a[2] == row_hash([pa.array([None, 1])])[1]), bool(a[0] != a[1])
    (True, True)
    """
    n = len(columns[0]) if columns else 0
    h = np.full(n, 0x9E3779B97F4A7C15, np.uint64)
    with np.errstate(over="ignore"):
        for col in columns:
            words, layout = encode_columns([col], n=n)
            width = layout[0]
            valid = col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else np.ones(n, bool)
            h = _mix(h, valid.astype(np.uint64))
            body = words[:, :width]
            nz = body != 0
            length = np.where(nz.any(axis=1), width - np.argmax(nz[:, ::-1], axis=1), 0)
            for j in range(width):
                h = np.where(j < length, _mix(h, body[:, j]), h)
    return h


class MinMaxReduce:
    """``SELECT group_by..., min/max(...) FROM input GROUP BY group_by``.

    Parameters
    ----------
    schema : the input's columns
    group_by : sequence of column names (empty: one global group)
    aggregates : mapping of output column name to :class:`Min` / :class:`Max`
    arranged : ``SharedInput``, optional
        The input arranged by ``group_by`` in the catalog's shared arrangement, for the
        ``"per group"`` plan (module docstring).
    plan : {"per group", "bucketed", "monotonic"}, optional
        ``"per group"`` (the default), ``"bucketed"`` (Materialize's hierarchical plan: for
        very large groups) or ``"monotonic"`` (an append-only input; a retraction raises
        :class:`NonMonotonicInput`).
    expected_group_size : int, default 65536
        Sizes the bucketed plan's stages (:func:`bucketing`).

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> r = MinMaxReduce({"k": pa.int64(), "v": pa.float64()}, ["k"], {"lo": Min("v"), "hi": Max("v")},
    ...                  plan="bucketed")
    >>> r.plan, r.buckets
    ('bucketed', (4096, 256, 16, 1))
    >>> r.step(1, colmz.Updates({"k": [1, 1, 1], "v": [2.0, float("nan"), -1.0]}, time=[1] * 3, diff=[1] * 3)).to_pylist()
    [(1, -1.0, nan, 1, 1)]
    >>> r.step(2, colmz.Updates({"k": [1], "v": [-1.0]}, time=[2], diff=[-1])).to_pylist()
    [(1, -1.0, nan, 2, -1), (1, 2.0, nan, 2, 1)]
    """

    ROLLBACK_FIELDS = ("_arranged", "_stages", "_extremes", "_clock")

    def __init__(self, schema, group_by: Sequence[str], aggregates: Mapping[str, _Extreme], arranged=None, *,
                 plan: str | None = None, expected_group_size: int = EXPECTED_GROUP_SIZE):
        self.input_schema = as_schema(schema, "schema")
        self.group_by = check_columns(group_by, self.input_schema, "group_by")
        if not isinstance(aggregates, Mapping) or not aggregates:
            raise TypeError("aggregates must be a non-empty mapping of output names to Min/Max")
        types = {c.name: c.type for c in self.input_schema}
        for name, a in aggregates.items():
            if not isinstance(a, _Extreme):
                raise TypeError(f"aggregates[{name!r}] is {a!r}, not Min or Max")
            if a.column not in types:
                raise ValueError(f"aggregates[{name!r}] reads column {a.column!r}, which is not among "
                                 f"the input's columns {list(types)}")
            check_orderable(types[a.column], a.column, f"aggregates[{name!r}]")
        if plan is not None and plan not in PLANS:
            raise ValueError(f"plan must be one of {list(PLANS)}, got {plan!r}")
        if arranged is not None and plan not in (None, "per group"):
            raise ValueError(f"plan={plan!r} keeps its own state: it takes no shared arrangement")
        self.aggregates = dict(aggregates)
        self.plan = plan or "per group"
        self.buckets = (*bucketing(expected_group_size), 1) if self.plan == "bucketed" else ()
        values = [c for c in dict.fromkeys(a.column for a in aggregates.values()) if c not in self.group_by]
        self._arranged_columns = (*self.group_by, *values)
        columns = tuple(c for n in self._arranged_columns for c in self.input_schema if c.name == n)
        self._group_specs = columns[:len(self.group_by)]
        self.schema = as_schema([*self._group_specs, *(ColumnSpec(n, types[a.column]) for n, a in aggregates.items())],
                                "the output")
        taken = [*types, *self.aggregates]
        self._bucket = fresh_name(taken)
        self._child = fresh_name([*taken, self._bucket])
        self._arranged = self._stages = self._extremes = None
        self._shared = arranged is not None
        if self._shared:
            if tuple(arranged.key) != self.group_by or tuple(arranged.schema) != self.input_schema:
                raise ValueError(f"arranged is keyed by {list(arranged.key)} over {[c.name for c in arranged.schema]}; "
                                 f"the reduce needs {list(self.group_by)} over {[c.name for c in self.input_schema]}")
            self._arranged = arranged
        elif self.plan == "per group":
            self._arranged = KeyedArrangement(columns, self.group_by)
        elif self.plan == "bucketed":
            bucket = ColumnSpec(self._bucket, pa.uint64())
            key = [*self.group_by, self._bucket]
            ext = [ColumnSpec(n, types[a.column]) for n, a in aggregates.items()]
            self._stages = [KeyedArrangement((*self._group_specs, bucket, *columns[len(self.group_by):]), key)]
            for _ in self.buckets[1:]:
                self._stages.append(KeyedArrangement(
                    (*self._group_specs, bucket, ColumnSpec(self._child, pa.uint64()), *ext), key))
        else:
            self._extremes = KeyedArrangement(self.schema, self.group_by)
        self._clock = Clock()
        self.rows_reduced = 0
        self.buckets_touched = 0
        self.easy_groups = 0
        self.stage_rows = [0] * max(1, len(self.buckets))

    @property
    def arrangement(self) -> KeyedArrangement:
        """The input arranged by group (``"per group"``), its bucketed stage 0
        (``"bucketed"``) or the groups' extremes (``"monotonic"``)."""
        return self._arranged if self.plan == "per group" else (
            self._stages[0] if self.plan == "bucketed" else self._extremes)

    @property
    def arrangements(self) -> dict:
        """Every arrangement the plan keeps by name (the bucketed plan's stages, lowest
        first: ``stage0``, ...; the others' one arrangement)."""
        if self.plan == "bucketed":
            return {f"stage{i}": a for i, a in enumerate(self._stages)}
        return {self.plan.replace(" ", "_"): self.arrangement}

    @property
    def strategy(self) -> str:
        """The plan, as ``EXPLAIN`` names it."""
        if self.plan == "bucketed":
            return f"hierarchical: bucketed {'/'.join(map(str, self.buckets[:-1])) or 'one stage'}"
        if self.plan == "monotonic":
            return "hierarchical: monotonic (append-only input)"
        return ("per affected group over the shared arrangement" if self._shared
                else "per affected group over the input arranged by group")

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta``."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, time)
        first = self._clock.last is None
        glob = not self.group_by
        if not len(delta) and not (glob and first):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        with undone_on_error(self):
            if self.plan == "bucketed":
                result = self._step_bucketed(time, delta, glob, first)
            elif self.plan == "monotonic":
                result = self._step_monotonic(time, delta, glob, first)
            else:
                result = self._step_per_group(time, delta, glob, first)
            self._clock.advance(time)
        return result

    # ------------------------------------------------------------------ reducing

    def _min_max(self, q: np.ndarray, values: pa.Array, diff: np.ndarray, m: int) -> tuple[pa.Array, pa.Array]:
        """The least and the greatest non-NULL value of each query ``0 .. m-1`` among rows
        ``(q, values)`` with their multiplicities (NULL where none): rows sorted by (query,
        colmz's words of the value), equal ones' diffs summed, those left positive read."""
        n = len(q)
        if not n:
            empty = pa.nulls(m, values.type)
            return empty, empty
        if n > SMALL:
            # Many rows: colmz.consolidate's kernels sort and sum them (group_rows).
            rows = group_rows(Matches(q, Updates({"v": values}, np.zeros(n, np.uint64), diff, copy=False)), ["v"])
            q, values = rows.column(fresh_name(["v"])).to_numpy(), rows.column("v")
            held = np.arange(len(values))
        else:
            words, _ = encode_columns([values], n=n)
            order = np.lexsort((*(words[:, j] for j in range(words.shape[1] - 1, -1, -1)), q))
            qs, ws = q[order], words[order]
            first = np.ones(n, bool)
            if n > 1:
                first[1:] = (qs[1:] != qs[:-1]) | (ws[1:] != ws[:-1]).any(axis=1)
            starts = np.flatnonzero(first)
            total = np.add.reduceat(np.asarray(diff, np.int64)[order], starts)
            if (total < 0).any():
                raise NegativeMultiplicity("the input retracts rows it does not hold: a value would have "
                                           f"multiplicity {int(total.min())}")
            held = order[starts[total > 0]]  # one row per (query, value) held, sorted
        if values.null_count:
            held = held[values.is_valid().to_numpy(zero_copy_only=False)[held]]
        hq = q[held]
        if not len(hq):
            empty = pa.nulls(m, values.type)
            return empty, empty
        out = []
        for edge in (np.r_[True, hq[1:] != hq[:-1]], np.r_[hq[1:] != hq[:-1], True]):
            which = np.full(m, -1, np.int64)
            which[hq[edge]] = held[edge]
            mask = which < 0
            out.append(values.take(pa.array(np.where(mask, 0, which), mask=mask if mask.any() else None)))
        return out[0], out[1]

    def _reduce(self, q: np.ndarray, rows: Updates, m: int, columns: Mapping[str, str]):
        """Per query ``0 .. m-1``: its rows' total multiplicity and each aggregate's extreme
        over the column ``columns[name]`` of ``rows``."""
        total = np.zeros(m, np.int64)
        np.add.at(total, q, rows.diff)
        if len(total) and total.min() < 0:
            raise NegativeMultiplicity("the input retracts rows it does not hold: a group would hold "
                                       f"{int(total.min())} rows")
        self.rows_reduced += len(q)
        diff = np.asarray(rows.diff, np.int64)
        found: dict = {}
        out = {}
        for name, a in self.aggregates.items():
            c = columns[name]
            if c not in found:
                found[c] = self._min_max(q, rows.column(c), diff, m)
            out[name] = found[c][0 if isinstance(a, Min) else 1]
        return total, out

    def _output(self, group_cols, time: int, present: np.ndarray, values: dict, diff: int) -> Updates:
        """Rows ``(group, extremes)`` of the present queries, each with ``diff``."""
        idx = pa.array(np.flatnonzero(present))
        out = {s.name: c.take(idx) for s, c in zip(self._group_specs, group_cols)}
        for name in self.aggregates:
            out[name] = values[name].take(idx)
        return Updates(out, np.full(len(idx), time, np.uint64), np.full(len(idx), diff, np.int64),
                       schema=self.schema, copy=False)

    # ------------------------------------------------------------------ per group

    def _payload_columns(self) -> list[str] | None:
        """The names of the input arrangement's payload columns in its words' order, or
        ``None`` when an aggregated column is a key column (then the rows path reduces)."""
        if any(a.column in self.group_by for a in self.aggregates.values()):
            return None
        if self._shared:
            base, rename = self._arranged.base, dict(self._arranged.columns)
            return [rename[c.name] for c in base.schema if c.name not in base.key]
        return [c for c in self._arranged_columns if c not in self.group_by]

    def _step_words(self, time, delta, keys, layout) -> Updates | None:
        """The per-group step on the arrangement's words (no rows decoded but the changed
        groups' extremes): the affected groups' rows after the delta and the delta's rows,
        one sort per aggregated column by (group, value words, tag) -- packed in one
        ``uint64`` when they fit (``keyed.pack_columns``) -- give each value's multiplicity
        after and before (after minus the delta), so each group's least and greatest held
        value before and after. ``None`` (nothing changed) when a value may be NULL (a null
        word laid out) or an aggregated column is a key column: the rows path does it."""
        names = self._payload_columns()
        n = len(delta)
        dcols = {}
        if names is None:
            return None
        for c in dict.fromkeys(a.column for a in self.aggregates.values()):
            w, wl = encode_columns([delta.column(c)], n=n)
            if wl[-1]:
                return None
            dcols[c] = (w, wl)
        # a shared arrangement holds the delta already (read: the rows after); an own one is
        # read before the delta enters (the rows before)
        base = self._arranged.base if self._shared else self._arranged
        searched, found = base.keys_searched, base.rows_found
        ranges = base.ranges_words(keys, layout)
        whole = delta  # what an own arrangement takes, whichever groups re-reduce below
        easy_out = None
        kept_dq = None  # the delta's rows' groups when only some groups re-reduce below
        reduced = self._in_place_extremes(delta, ranges, names, dcols, len(keys))
        if reduced is not None:
            had, lo, hi, read, mixed = reduced
            dq = search_rows(keys, encode_columns([delta.column(g) for g in self.group_by], n=n)[0], "left")
            # a group holding a row of multiplicity <= 0 (a retraction not yet cancelled by a
            # merge) is re-reduced by sorting: only there may one row cancel another
            hard = mixed.copy()
            if self._shared:
                # the shared arrangement holds the delta: a group whose every extreme is
                # beaten by none of the delta's values held that extreme before (an inserted
                # row can only lower a min): unchanged, it emits nothing
                for a in self.aggregates.values():
                    dw = dcols[a.column][0][:, 0]
                    if isinstance(a, Min):
                        hard[dq[dw <= lo[a.column][dq]]] = True
                    else:
                        hard[dq[dw >= hi[a.column][dq]]] = True
                self.rows_reduced += int(read.sum())
                self.easy_groups += int(len(keys) - hard.sum())
                # a reached group holding no retraction: its extremes before, from its runs
                # and the delta's values without sorting (or it stays hard: rare, below)
                reached = np.flatnonzero(hard & ~mixed)
                if len(reached):
                    done, easy_out = self._reached_in_place(time, delta, dq, reached, keys, layout, ranges,
                                                            names, dcols, (lo, hi))
                    hard[reached[done]] = False
                if not hard.any():
                    self._arranged.keys_searched += base.keys_searched - searched
                    return easy_out if easy_out is not None else Updates.empty(self.schema)
            else:
                easy = ~hard
                if easy.any():
                    rows = np.flatnonzero(easy[dq])
                    easy_out = self._step_inserted(
                        time, delta.take(rows), np.ascontiguousarray(keys[easy]), layout,
                        (had[easy], {c: v[easy] for c, v in lo.items()}, {c: v[easy] for c, v in hi.items()},
                         int(read[easy].sum())),
                        {c: (w[rows], wl) for c, (w, wl) in dcols.items()}, (np.cumsum(easy) - 1)[dq[rows]])
                if not hard.any():
                    self._arranged.insert_checked(time, Updates({c: delta.column(c) for c in self._arranged_columns},
                                                                delta.time, delta.diff, copy=False))
                    return easy_out
            rows = np.flatnonzero(hard[dq])
            keys = np.ascontiguousarray(keys[hard])
            ranges = [(run, a[hard], b[hard]) for run, a, b in ranges]
            # each kept row's group among the kept ones: not the subset encoded again, whose
            # layout may differ from the groups' (no NULL key left: no null word)
            kept_dq = (np.cumsum(hard) - 1)[dq[rows]]
            delta = delta.take(rows)
            dcols = {c: (w[rows], wl) for c, (w, wl) in dcols.items()}
            n = len(delta)
            if not n:
                return Updates.empty(self.schema)
        got = base.gather_encoded(ranges, keys=False)
        if self._shared:
            self._arranged.keys_searched += base.keys_searched - searched
            self._arranged.rows_found += base.rows_found - found
        if got.val_layout[-1]:
            return None
        if not self._shared:
            self._arranged.insert_checked(time, Updates({c: whole.column(c) for c in self._arranged_columns},
                                                        whole.time, whole.diff, copy=False))
        m = len(keys)
        if kept_dq is not None:
            dq = kept_dq
        else:
            dkw, _ = encode_columns([delta.column(g) for g in self.group_by], n=n)
            dq = search_rows(keys, dkw, "left")
        n_read = len(got.diff)
        q_all = np.concatenate([np.asarray(got.query, np.int64), np.asarray(dq, np.int64)])
        d_all = np.concatenate([np.asarray(got.diff, np.int64), np.asarray(delta.diff, np.int64)])
        tag = np.zeros(n_read + n, np.uint64)  # 1: a delta row
        tag[n_read:] = 1
        q_words = q_all.view(np.uint64)  # positions >= 0
        vl = got.val_layout
        starts_w = np.cumsum((0, *vl[:-1]))
        by_column: dict = {}
        present = None
        self.rows_reduced += n_read
        for c, (dw, dwl) in dcols.items():
            j = names.index(c)
            rl = (int(vl[j]), 0)
            cl = unify_layouts(rl, dwl)
            rw = pad_keys(np.ascontiguousarray(got.vals[:, starts_w[j]:starts_w[j] + vl[j]]), rl, cl)
            v_all = np.concatenate([rw, pad_keys(dw, dwl, cl)])
            cols = [q_words, *v_all.T, tag]
            packed = pack_columns(cols)
            sorted_ = None if packed is None else consolidate_packed(packed[0], sum(packed[1]), d_all)
            if sorted_ is not None:
                ps, perm, d = sorted_
                tag_bits = packed[1][-1]
                rowkey = ps >> np.uint64(tag_bits) if tag_bits else ps
                is_delta = perm >= n_read
                new_value = np.r_[True, rowkey[1:] != rowkey[:-1]] if len(d) else np.zeros(0, bool)
                at = np.flatnonzero(new_value)
                q, vw = q_all[perm[at]], v_all[perm[at]]
            else:
                words, d = consolidate_words(np.hstack([q_words[:, None], v_all, tag[:, None]]), d_all)
                is_delta = words[:, -1] == 1
                new_value = np.r_[True, (words[1:, :-1] != words[:-1, :-1]).any(axis=1)] if len(d) \
                    else np.zeros(0, bool)
                at = np.flatnonzero(new_value)
                q, vw = words[at, 0].astype(np.int64), np.ascontiguousarray(words[at, 1:-1])
            if len(at):
                read = np.add.reduceat(np.where(is_delta, 0, d), at)
                change = np.add.reduceat(np.where(is_delta, d, 0), at)
                before, after = (read - change, read) if self._shared else (read, read + change)
            else:
                after = before = np.zeros(0, np.int64)
            bad = min(int(after.min()), int(before.min())) if len(at) else 0
            if bad < 0:
                raise NegativeMultiplicity("the input retracts rows it does not hold: a value would have "
                                           f"multiplicity {bad}")
            ends = []
            for count in (before, after):
                held = np.flatnonzero(count > 0)
                hq = q[held]
                has = np.zeros(m, bool)
                has[hq] = True
                lo = np.zeros(m, np.int64)
                hi = np.zeros(m, np.int64)
                if len(held):
                    first_of = np.r_[True, hq[1:] != hq[:-1]]
                    last_of = np.r_[hq[1:] != hq[:-1], True]
                    lo[hq[first_of]] = held[first_of]
                    hi[hq[last_of]] = held[last_of]
                ends.append((has, lo, hi))
            if present is None:
                present = (ends[0][0], ends[1][0])
            by_column[c] = (vw, cl, ends)
        self.buckets_touched += m
        self.stage_rows[0] += n_read
        # a group emits its old row and its new one only when they differ
        was, now = present
        changed = was != now
        picks = {}
        for name, a in self.aggregates.items():
            vw, cl, ends = by_column[a.column]
            side = 1 if isinstance(a, Min) else 2
            old_at, new_at = ends[0][side], ends[1][side]
            if len(vw):  # (no value held before or after: no group is present)
                changed |= was & now & (vw[old_at] != vw[new_at]).any(axis=1)
            picks[name] = (vw, cl, old_at, new_at)
        out = []
        for present_, which, sign in ((was, 2, -1), (now, 3, 1)):
            sel = np.flatnonzero(changed & present_)
            cols = dict(zip(self.group_by, decode_columns(np.ascontiguousarray(keys[sel]), layout,
                                                          self._group_specs)))
            specs = {c.name: c for c in self.input_schema}
            for name, a in self.aggregates.items():
                vw, cl, *at = picks[name]
                cols[name] = decode_columns(np.ascontiguousarray(vw[at[which - 2][sel]]), cl, [specs[a.column]])[0]
            k = len(sel)
            out.append(Updates({c.name: cols[c.name] for c in self.schema}, np.full(k, time, np.uint64),
                               np.full(k, sign, np.int64), schema=self.schema, copy=False))
        if easy_out is not None:  # the groups reduced in place (disjoint from these)
            out.append(easy_out)
        return consolidated_at(concat(out), time)

    def _in_place_extremes(self, delta, ranges, names, dcols, m):
        """For a delta that only inserts, each aggregated column one word wide in every run
        (a fixed-width type, no NULL): ``(had, lo, hi, read, mixed)`` per group -- whether it
        has rows, the least and greatest word of each aggregated column over its rows, the
        rows read, and whether it holds a row of multiplicity ``<= 0`` -- reduced in place,
        run by run (``np.minimum.reduceat`` over the run's ranges: no rows gathered, none
        sorted -- ``rows_found`` does not grow). ``lo``/``hi`` are the group's extremes only
        where ``mixed`` is false: every row positive, none cancels another, so the extreme of
        the rows read is the group's. A ``mixed`` group (a retraction a merge has not yet
        cancelled against its insert) must be re-reduced by sorting; the others need not.
        ``None`` when the delta retracts or a value is not one word."""
        if np.asarray(delta.diff).min() <= 0:
            return None
        specs = {c.name: c for c in self.input_schema}
        for c, (_, dwl) in dcols.items():
            t = specs[c].type
            if tuple(dwl) != (1, 0) or not (pa.types.is_integer(t) or pa.types.is_floating(t)
                                            or pa.types.is_temporal(t) or pa.types.is_boolean(t)):
                return None
        for run, _, _ in ranges:
            vl = run.val_layout
            if vl[-1] or any(vl[names.index(c)] != 1 for c in dcols):
                return None
        top = np.iinfo(np.uint64).max
        lo = {c: np.full(m, top, np.uint64) for c in dcols}
        hi = {c: np.zeros(m, np.uint64) for c in dcols}
        had = np.zeros(m, bool)
        mixed = np.zeros(m, bool)
        read = np.zeros(m, np.int64)
        for run, a, b in ranges:
            cnt = b - a
            held = np.flatnonzero(cnt > 0)
            if not len(held):
                continue
            _, rows = expand_ranges(a[held], b[held])
            starts = np.concatenate(([0], np.cumsum(cnt[held])[:-1]))
            d = np.take(run.diff, rows)
            if d.min() <= 0:
                mixed[held[np.minimum.reduceat(d, starts) <= 0]] = True
            had[held] = True
            read[held] += cnt[held]
            for c in dcols:
                v = np.take(run.vals[:, int(sum(run.val_layout[:names.index(c)]))], rows)
                lo[c][held] = np.minimum(lo[c][held], np.minimum.reduceat(v, starts))
                hi[c][held] = np.maximum(hi[c][held], np.maximum.reduceat(v, starts))
        return had, lo, hi, read, mixed

    def _step_inserted(self, time, delta, keys, layout, reduced, dcols, dq=None) -> Updates:
        """The per-group step of a delta that only inserts over an own arrangement (read
        before the delta enters), for groups whose extremes before were reduced in place
        (:meth:`_in_place_extremes`, none of them ``mixed``): each group's extremes after are
        those folded with the delta's (``min(old min, min inserted)``, as Materialize's
        monotonic plan folds them). Only the groups whose extremes changed are decoded and
        emitted. The caller inserts the delta into the arrangement. ``dq``: each delta row's
        group among ``keys`` when the caller knows it (``delta`` a subset of its delta: encoded
        again, its key layout may not be the groups')."""
        had, lo, hi, n_read = reduced
        m = len(keys)
        if dq is None:
            dkw, _ = encode_columns([delta.column(g) for g in self.group_by], n=len(delta))
            dq = search_rows(keys, dkw, "left")
        new_lo, new_hi = {}, {}
        for c, (dw, _) in dcols.items():
            w = dw[:, 0]
            new_lo[c] = lo[c].copy()
            np.minimum.at(new_lo[c], dq, w)
            new_hi[c] = hi[c].copy()
            np.maximum.at(new_hi[c], dq, w)
        changed = ~had
        for a in self.aggregates.values():
            old, new = (lo, new_lo) if isinstance(a, Min) else (hi, new_hi)
            changed |= old[a.column] != new[a.column]
        self.rows_reduced += n_read + len(delta)
        self.buckets_touched += m
        self.stage_rows[0] += n_read
        return self._emit_words(time, keys, layout, changed & had, (lo, hi), changed, (new_lo, new_hi))

    def _emit_words(self, time, keys, layout, retract, old, insert, new) -> Updates:
        """Each group's old row where ``retract`` and its new one where ``insert``, from the
        extremes' words (``old``/``new``: ``(lo, hi)``, one ``uint64`` word per group by
        aggregated column, all one word wide)."""
        specs = {c.name: c for c in self.input_schema}
        out = []
        for sel, (mins, maxs), sign in ((np.flatnonzero(retract), old, -1), (np.flatnonzero(insert), new, 1)):
            cols = dict(zip(self.group_by, decode_columns(np.ascontiguousarray(keys[sel]), layout,
                                                          self._group_specs)))
            for name, a in self.aggregates.items():
                words = (mins if isinstance(a, Min) else maxs)[a.column][sel]
                cols[name] = decode_columns(words[:, None], (1, 0), [specs[a.column]])[0]
            k = len(sel)
            out.append(Updates({c.name: cols[c.name] for c in self.schema}, np.full(k, time, np.uint64),
                               np.full(k, sign, np.int64), schema=self.schema, copy=False))
        return consolidated_at(concat(out), time)

    def _reached_in_place(self, time, delta, dq, reached, keys, layout, ranges, names, dcols, after):
        """Over the shared arrangement (which holds the delta), for an insert-only delta: the
        groups ``reached`` (positions in ``keys``; none holds a row of multiplicity ``<= 0``)
        are those an inserted value reaches an extreme of, so their extremes ``after`` (in
        place, :meth:`_in_place_extremes`) are known but not those before. For ``min`` over
        a column: with ``d1 < d2`` the delta's two least values in the group, ``after`` is
        ``d1``; the value before is ``d1`` again if the group holds more copies of it than the
        delta inserted, else the least held value above ``d1`` -- when that is below ``d2``
        (no inserted value: held before). ``max`` alike, mirrored. A group holding no more rows
        than the delta inserted is new. These counts and extremes are reduced in place over
        the runs (``reduceat``; no row gathered, none sorted). Returns ``(done, out)``: which
        of ``reached`` this decided (the others -- a second inserted value at or past the
        least held one -- are left to the sorting path) and the change of those decided."""
        m = len(keys)
        lo_after, hi_after = after
        local = np.full(m, -1, np.int64)
        local[reached] = np.arange(len(reached))
        r = len(reached)
        rows = np.flatnonzero(local[dq] >= 0)
        g = local[dq[rows]]
        dd = np.asarray(delta.diff, np.int64)[rows]
        top = np.iinfo(np.uint64).max
        d_total = np.zeros(r, np.int64)
        np.add.at(d_total, g, dd)
        # the delta's side, per column: least and greatest value, their copies, and the next
        # distinct value inward (``has2``: one exists)
        dside = {}
        for c, (dw, _) in dcols.items():
            w = dw[rows, 0]
            d1 = (np.full(r, top, np.uint64), np.zeros(r, np.uint64))
            np.minimum.at(d1[0], g, w)
            np.maximum.at(d1[1], g, w)
            side = []
            for j, ufunc in ((0, np.minimum), (1, np.maximum)):
                eq = w == d1[j][g]
                cnt = np.zeros(r, np.int64)
                np.add.at(cnt, g[eq], dd[eq])
                d2 = np.full(r, top if j == 0 else 0, np.uint64)
                ufunc.at(d2, g[~eq], w[~eq])
                has2 = np.zeros(r, bool)
                has2[g[~eq]] = True
                side.append((d1[j], cnt, d2, has2))
            dside[c] = side
        # the runs' side: rows held, copies of d1, and the nearest held value past d1
        a_total = np.zeros(r, np.int64)
        aside = {c: [(np.zeros(r, np.int64), np.full(r, top, np.uint64), np.zeros(r, bool)),
                     (np.zeros(r, np.int64), np.zeros(r, np.uint64), np.zeros(r, bool))] for c in dcols}
        read = 0
        for run, a, b in ranges:
            a, b = a[reached], b[reached]
            cnt = b - a
            held = np.flatnonzero(cnt > 0)
            if not len(held):
                continue
            _, at = expand_ranges(a[held], b[held])
            read += len(at)
            starts = np.concatenate(([0], np.cumsum(cnt[held])[:-1]))
            gi = np.repeat(held, cnt[held])
            d = np.take(run.diff, at).astype(np.int64)
            a_total[held] += np.add.reduceat(d, starts)
            for c in dcols:
                v = np.take(run.vals[:, int(sum(run.val_layout[:names.index(c)]))], at)
                for j, (ufunc, beyond, fill) in enumerate(((np.minimum, np.greater, top), (np.maximum, np.less, 0))):
                    p = dside[c][j][0][gi]
                    n_eq, near, has = aside[c][j]
                    n_eq[held] += np.add.reduceat(np.where(v == p, d, 0), starts)
                    past = beyond(v, p)
                    near[held] = ufunc(near[held], ufunc.reduceat(np.where(past, v, fill), starts))
                    has[held] |= np.add.reduceat(past.astype(np.int64), starts) > 0
        self.rows_reduced += read
        was = a_total > d_total  # else every row held is the delta's: a new group
        done = np.ones(r, bool)
        old, new = ({}, {}), ({}, {})
        changed = ~was
        # only the sides the aggregates read decide (an unused side never blocks a group)
        for c, j in dict.fromkeys((a.column, 0 if isinstance(a, Min) else 1) for a in self.aggregates.values()):
            now = (lo_after, hi_after)[j][c][reached]
            d1, cnt, d2, has2 = dside[c][j]
            n_eq, near, has = aside[c][j]
            inward = (near < d2) if j == 0 else (near > d2)
            unreached = d1 != now  # where reached, the value after is d1
            kept = n_eq > cnt  # d1 was held before too
            done &= ~was | unreached | kept | (has & (~has2 | inward))
            old[j][c] = np.where(unreached | kept, now, near)
            new[j][c] = now
            changed |= old[j][c] != now
        new_lo, new_hi = new
        sel = done
        out = self._emit_words(time, np.ascontiguousarray(keys[reached[sel]]), layout, (changed & was)[sel],
                               ({c: v[sel] for c, v in old[0].items()}, {c: v[sel] for c, v in old[1].items()}),
                               changed[sel],
                               ({c: v[sel] for c, v in new_lo.items()}, {c: v[sel] for c, v in new_hi.items()}))
        self.buckets_touched += int(sel.sum())
        self.stage_rows[0] += read
        return done, out

    def _step_per_group(self, time, delta, glob, first) -> Updates:
        keys, layout = affected_groups(delta, self.group_by, glob)
        if not glob:
            fast = self._step_words(time, delta, keys, layout)
            if fast is not None:
                return fast
        group_cols = decode_columns(keys, layout, self._group_specs)
        m = len(keys)
        columns = {n: a.column for n, a in self.aggregates.items()}
        out = []
        if not first or not glob:
            old = (self._arranged.lookup_words(keys, layout, minus=delta) if self._shared
                   else self._arranged.lookup_words(keys, layout))
            total, vals = self._reduce(old.query, old.rows, m, columns)
            out.append(self._output(group_cols, time, (total > 0) | glob, vals, -1))
        if not self._shared:
            self._arranged.insert_checked(time, Updates({c: delta.column(c) for c in self._arranged_columns},
                                                        delta.time, delta.diff, copy=False))
        new = self._arranged.lookup_words(keys, layout)
        total, vals = self._reduce(new.query, new.rows, m, columns)
        out.append(self._output(group_cols, time, (total > 0) | glob, vals, 1))
        self.buckets_touched += m
        self.stage_rows[0] += len(new.query)
        return consolidated_at(concat(out), time)

    # ------------------------------------------------------------------ bucketed

    def _step_bucketed(self, time, delta, glob, first) -> Updates:
        n = len(delta)
        if not n:
            return self._global_nulls(time)
        values = [delta.column(c) for c in self._arranged_columns[len(self.group_by):]]
        h = row_hash([delta.column(c) for c in dict.fromkeys(a.column for a in self.aggregates.values())])
        cols = {g: delta.column(g) for g in self.group_by}
        cols[self._bucket] = array_from_numpy(h % np.uint64(self.buckets[0]), pa.uint64())
        cols.update(zip(self._arranged_columns[len(self.group_by):], values))
        change = Updates(cols, delta.time, delta.diff, copy=False)
        key = [*self.group_by, self._bucket]
        columns = {n: a.column for n, a in self.aggregates.items()}
        last = len(self._stages) - 1
        for i, stage in enumerate(self._stages):
            keys, layout = affected_groups(change, key, False)
            m = len(keys)
            found = stage.lookup_words(keys, layout)
            kw, _ = encode_columns([change.column(c) for c in key], n=len(change))
            cq = search_rows(keys, kw, "left")
            old_total, old_vals = self._reduce(found.query, found.rows, m, columns)
            both = concat([found.rows, Updates({c.name: change.column(c.name) for c in stage.schema},
                                               change.time, change.diff, copy=False)])
            new_total, new_vals = self._reduce(np.concatenate([found.query, cq]), both, m, columns)
            self.buckets_touched += m
            self.stage_rows[i] += len(found.query) + len(cq)
            stage.insert_checked(time, Updates({c.name: change.column(c.name) for c in stage.schema},
                                               change.time, change.diff, copy=False))
            *group_cols, bucket_col = decode_columns(keys, layout, [*self._group_specs, stage.schema[len(self.group_by)]])
            if i == last:
                break
            change = self._next_change(group_cols, bucket_col.to_numpy(), old_total > 0, old_vals,
                                       new_total > 0, new_vals, self.buckets[i + 1], time)
            columns = {n: n for n in self.aggregates}
            if not len(change):  # no bucket's extremes changed: nor the groups'
                return self._global_nulls(time) if glob and first else Updates.empty(self.schema)
        # The last stage is keyed by (group, 0): its buckets are the groups.
        out = []
        if not first or not glob:
            out.append(self._output(group_cols, time, (old_total > 0) | glob, old_vals, -1))
        out.append(self._output(group_cols, time, (new_total > 0) | glob, new_vals, 1))
        return consolidated_at(concat(out), time)

    def _global_nulls(self, time: int) -> Updates:
        """The global group's first output over an input with no rows: its row of NULLs."""
        nulls = {name: pa.nulls(1, self.schema[len(self._group_specs) + j].type)
                 for j, name in enumerate(self.aggregates)}
        return self._output([], time, np.ones(1, bool), nulls, 1)

    def _next_change(self, group_cols, bucket, old_present, old_vals, new_present, new_vals,
                     modulus: int, time: int) -> Updates:
        """The next stage's change: each re-reduced bucket's old extremes retracted and its new
        ones inserted, keyed by ``(group, bucket % modulus)`` (unchanged buckets cancel)."""
        oi, ni = np.flatnonzero(old_present), np.flatnonzero(new_present)
        idx = np.concatenate([oi, ni])
        take = pa.array(idx)
        cols = {s.name: c.take(take) for s, c in zip(self._group_specs, group_cols)}
        child = bucket[idx]
        cols[self._bucket] = array_from_numpy(child % np.uint64(modulus), pa.uint64())
        cols[self._child] = array_from_numpy(np.ascontiguousarray(child), pa.uint64())
        for name in self.aggregates:
            cols[name] = pa.concat_arrays([old_vals[name].take(pa.array(oi)), new_vals[name].take(pa.array(ni))])
        diff = np.concatenate([np.full(len(oi), -1, np.int64), np.ones(len(ni), np.int64)])
        return consolidate(Updates(cols, np.full(len(idx), time, np.uint64), diff, copy=False))

    # ------------------------------------------------------------------ monotonic

    def _step_monotonic(self, time, delta, glob, first) -> Updates:
        if len(delta) and np.asarray(delta.diff).min() <= 0:
            # Updates that cancel within the delta are none: only what is left counts.
            delta = consolidate(delta)
            if len(delta) and np.asarray(delta.diff).min() < 0:
                i = int(np.argmin(delta.diff))
                raise NonMonotonicInput(f"the monotonic min/max plan's input retracted row "
                                        f"{tuple(delta.column(n)[i].as_py() for n in delta.column_names)}: "
                                        "only an append-only input may use it")
            if not len(delta) and not (glob and first):
                return Updates.empty(self.schema)
        keys, layout = affected_groups(delta, self.group_by, glob)
        group_cols = decode_columns(keys, layout, self._group_specs)
        m = len(keys)
        old = self._extremes.lookup_words(keys, layout)
        old_total, old_vals = self._reduce(old.query, old.rows, m, {n: n for n in self.aggregates})
        dw, _ = encode_columns([delta.column(g) for g in self.group_by], n=len(delta))
        dq = search_rows(keys, dw, "left") if len(delta) else np.zeros(0, np.int64)
        self.buckets_touched += m
        self.stage_rows[0] += len(old.query) + len(dq)
        new_vals = {}
        for name, a in self.aggregates.items():
            vals = pa.concat_arrays([old_vals[name], delta.column(a.column)])
            q = np.concatenate([np.arange(m), dq])
            d = np.ones(len(q), np.int64)
            new_vals[name] = self._min_max(q, vals, d, m)[0 if isinstance(a, Min) else 1]
        self.rows_reduced += len(dq)
        delta_total = np.zeros(m, np.int64)
        np.add.at(delta_total, dq, np.asarray(delta.diff, np.int64))
        new_total = old_total + delta_total
        old_rows = self._output(group_cols, time, old_total > 0, old_vals, -1)
        new_rows = self._output(group_cols, time, new_total > 0, new_vals, 1)
        change = consolidated_at(concat([old_rows, new_rows]), time)
        self._extremes.insert_checked(time, change)
        out = []
        if not first or not glob:
            out.append(self._output(group_cols, time, (old_total > 0) | glob, old_vals, -1))
        out.append(self._output(group_cols, time, (new_total > 0) | glob, new_vals, 1))
        return consolidated_at(concat(out), time)

    def __repr__(self) -> str:
        return f"MinMaxReduce(group_by={list(self.group_by)}, aggregates={self.aggregates}, plan={self.plan!r})"
