"""``AccumulableReduce``: ``count``, ``sum``, ``avg``, ``bool_and``/``bool_or``, variances and
standard deviations per group, updated in place from each delta.

Design
------
Materialize's *accumulable* reductions (``src/compute-types/src/plan/reduce.rs``): each
aggregate is a vector of sums over an abelian group -- ``Σ diff`` (rows), ``Σ diff·[v not
NULL]``, ``Σ v·diff``, ``Σ v²·diff``, ``Σ diff·[v]`` -- so a delta adds to the accumulators of the groups it
touches and nothing else is read. Per step: the delta's rows are grouped by the group key and
summed; the old accumulators of those groups are looked up; the output is ``−(key, old
values)`` and ``+(key, new values)`` for each affected group (consolidation cancels a group
whose values did not change); the deltas enter the state.

Accumulators, per group: ``rows`` (``count(*)``), then per aggregate the count of its non-NULL
values and what it needs -- an exact integer sum (``colmz.dataflow.exact``: ``int64`` while
safe, Python ints beyond), for floats the sum of the finite values in ``float64`` plus the
counts of ``NaN``, ``+inf`` and ``−inf`` (so retracting a ``NaN`` restores the sum, as in
Materialize), for booleans the count of ``true``. Outputs: ``count`` → ``int64``; ``sum`` of
integers → ``int64`` (``OverflowError`` naming the group when the exact sum does not fit:
PostgreSQL's ``numeric`` result has no colmz column type yet); ``sum`` of floats and ``avg``
→ ``float64`` (``avg`` = exact sum / count, rounded once; float sums drift from a recompute by
rounding, as pg_ivm and OpenIVM document, without bound once a large term is retracted: the
planner, ``colmz.dataflow.plan_reduce``, keeps a view's float sums per affected group
instead); ``bool_and``/``bool_or`` → ``bool``;
``var_*``/``stddev_*`` of integer columns → ``float64`` from the exact ``Σx``, ``Σx²``
(rounded once; float columns refused). A sum, ``avg``, ``bool_*``, ``var_*`` or ``stddev_*``
of too few non-NULL values is NULL; ``count`` of nothing is 0.

Groups. Keys compare with NULL = NULL and NaN = NaN (``colmz.order``'s words), as SQL's GROUP
BY does. A group whose row count returns to 0 disappears (its accumulators are reset to
exactly zero, dropping float drift); a count going negative means the input retracted rows it
never held: ``NegativeMultiplicity``, state unchanged. With no group columns the aggregate is
global: one row always, from the first step on, even over an empty input (``count`` 0, ``sum``
NULL), as SQL answers.

State: :class:`Accumulators`, runs of (sorted unique key words, accumulator columns) held in
the layers of a :class:`~colmz.dataflow.fueled.FueledRuns` like ``KeyedArrangement``'s --
merged a little per step (:class:`AccumulatorsMerge`), never a large merge on one step --
and summed over runs on lookup. Cost per step: the delta (sorted) plus its groups times
``log`` of each run, plus the merge work its fuel pays for (``O(delta)`` rows per merge in
progress).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.exact import (
    exact_add,
    exact_group_sums,
    exact_products,
    narrowed,
    zeros_like_kind,
)
from colmz.dataflow.fueled import FueledHolder, FueledRuns, Merge, next_serial
from colmz.dataflow.keyed import chunk_ends
from colmz.dataflow.step import (
    Clock,
    as_schema,
    check_columns,
    check_delta,
    column_validity,
    column_values,
    consolidated_at,
)
from colmz.errors import NegativeMultiplicity
from colmz.order import (
    ColumnSpec,
    Layout,
    array_from_numpy,
    decode_columns,
    encode_columns,
    narrow_rows,
    pad_keys,
    search_rows,
    unify_layouts,
)
from colmz.updates import Updates

__all__ = ["AccumulableReduce", "Accumulators", "AccumulatorsMerge", "Avg", "BoolAnd", "BoolOr", "Count", "StddevPop", "StddevSamp",
           "Sum", "VarPop", "VarSamp"]


# ----------------------------------------------------------------------------- aggregates


class _Aggregate:
    """One aggregate over ``column``: its accumulator slots, contributions and output."""

    column: str | None
    sql = ""

    def __init__(self, column: str | None):
        if column is not None and not isinstance(column, str):
            raise TypeError(f"{type(self).__name__} takes a column name (str), got {column!r}")
        self.column = column

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.column!r})" if self.column is not None else f"{type(self).__name__}()"

    def bind(self, t: pa.DataType | None) -> None:
        """Check the column's type; set ``slots`` (kinds) and ``type`` (the output's)."""
        raise NotImplementedError  # every aggregate below defines it

    def contributions(self, values: np.ndarray | None, valid: np.ndarray | None,
                      diff: np.ndarray) -> list[np.ndarray]:
        """Per delta row, what it adds to each slot (``values`` NULLs as 0, ``valid``)."""
        raise NotImplementedError

    def output(self, rows: np.ndarray, slots: list[np.ndarray], where: str) -> pa.Array:
        raise NotImplementedError


def _int_column(t: pa.DataType) -> bool:
    return pa.types.is_signed_integer(t) or (pa.types.is_unsigned_integer(t) and t.bit_width <= 32)


def _int64_output(x: np.ndarray, mask: np.ndarray | None, what: str) -> pa.Array:
    if x.dtype == object:
        for i, v in enumerate(x.tolist()):
            if (mask is None or not mask[i]) and not -(2**63) <= v < 2**63:
                raise OverflowError(f"{what}: the exact value {v} is outside int64 (PostgreSQL's "
                                    "numeric result has no colmz column type)")
        x = np.array([0 if (mask is not None and mask[i]) else v for i, v in enumerate(x.tolist())], np.int64)
    return array_from_numpy(np.asarray(x, np.int64), pa.int64(), mask)


class Count(_Aggregate):
    """``count(*)`` (no column) or ``count(column)`` (its non-NULL values)."""

    def __init__(self, column: str | None = None):
        super().__init__(column)

    def bind(self, t):
        self.slots = () if self.column is None else ("int",)
        self.type = pa.int64()

    def contributions(self, values, valid, diff):
        return [] if values is None else [diff * valid]

    def output(self, rows, slots, where):
        return _int64_output(rows if self.column is None else slots[0], None, f"count of {where}")


class _SumLike(_Aggregate):
    """Shared accumulators of ``sum`` and ``avg``: non-NULL count, then the sum's slots."""

    def bind(self, t):
        if t is None:
            raise ValueError(f"{type(self).__name__} needs a column")
        if _int_column(t):
            self.exact = True
            self.slots = ("int", "int")
        elif pa.types.is_floating(t):
            self.exact = False
            self.slots = ("int", "float", "int", "int", "int")  # non-NULL, finite sum, NaN, +inf, -inf
        else:
            raise TypeError(f"{type(self).__name__.lower()}({self.column}) of a {t} column: integer and "
                            "float columns are summed natively; others need SQL")
        self.type = pa.int64() if (self.exact and isinstance(self, Sum)) else pa.float64()

    def contributions(self, values, valid, diff):
        nonnull = diff * valid
        if self.exact:
            return [nonnull, exact_products(values.astype(np.int64), diff)]
        v = values.astype(np.float64)
        finite = np.isfinite(v)
        return [nonnull, np.where(finite & valid, v * diff, 0.0), nonnull * np.isnan(v),
                nonnull * (v == np.inf), nonnull * (v == -np.inf)]

    def _float_total(self, slots) -> np.ndarray:
        _, s, nan, pinf, ninf = slots
        out = s.astype(np.float64).copy()
        out[pinf > 0] = np.inf
        out[ninf > 0] = -np.inf
        out[(nan > 0) | ((pinf > 0) & (ninf > 0))] = np.nan
        return out


class Sum(_SumLike):
    """``sum(column)``: exact for integer columns (``int64`` output), ``float64`` for floats."""

    def output(self, rows, slots, where):
        mask = slots[0] == 0
        if self.exact:
            return _int64_output(slots[1], mask if mask.any() else None, f"sum({self.column}) of {where}")
        return array_from_numpy(self._float_total(slots), pa.float64(), mask if mask.any() else None)


class Avg(_SumLike):
    """``avg(column)`` as the exact sum over the count at the output (``float64``)."""

    def output(self, rows, slots, where):
        count = slots[0]
        mask = count == 0
        safe = np.where(mask, 1, count)
        if self.exact:
            s = slots[1]
            if s.dtype == object or (len(s) and np.abs(s).max() > 2**53):
                # Python's int / int is correctly rounded, however large the sum.
                out = np.array([a / int(b) for a, b in zip(s.tolist(), safe.tolist())], np.float64)
            else:
                out = s / safe
        else:
            out = self._float_total(slots) / safe
        return array_from_numpy(np.asarray(out, np.float64), pa.float64(), mask if mask.any() else None)


class _BoolAgg(_Aggregate):
    def bind(self, t):
        if t is None or not pa.types.is_boolean(t):
            raise TypeError(f"{type(self).__name__} needs a boolean column, got {self.column!r} of {t}")
        self.slots = ("int", "int")  # non-NULL, true
        self.type = pa.bool_()

    def contributions(self, values, valid, diff):
        nonnull = diff * valid
        return [nonnull, nonnull * values]


class BoolAnd(_BoolAgg):
    """``bool_and(column)``: every non-NULL value true (NULL when there is none)."""

    def output(self, rows, slots, where):
        n, t = slots
        mask = n == 0
        return array_from_numpy(t == n, pa.bool_(), mask if mask.any() else None)


class BoolOr(_BoolAgg):
    """``bool_or(column)``: some non-NULL value true (NULL when there is none)."""

    def output(self, rows, slots, where):
        n, t = slots
        mask = n == 0
        return array_from_numpy(t > 0, pa.bool_(), mask if mask.any() else None)


class _Spread(_Aggregate):
    """Shared accumulators of the variances and standard deviations of an integer column:
    the non-NULL count, ``Σx`` and ``Σx²``, all exact; the output is computed from the exact
    rational ``(nΣx² − (Σx)²) / (n·d)`` and rounded once (then its square root for a standard
    deviation). Float columns are refused: ``Σx²`` of floats under retraction loses what
    PostgreSQL's algorithm keeps."""

    sample = True
    root = False

    def bind(self, t):
        if t is None or not _int_column(t):
            raise TypeError(f"{type(self).__name__}({self.column}) of a {t} column: integer columns "
                            "only (exact sums); float variances need SQL")
        self.slots = ("int", "int", "int")
        self.type = pa.float64()

    def contributions(self, values, valid, diff):
        v = values.astype(np.int64)
        if len(v) and np.abs(v.astype(np.float64)).max() >= 2.0**31:
            square = v.astype(object) * v.astype(object)
        else:
            square = v * v
        return [diff * valid, exact_products(v, diff), exact_products(square, diff)
                if square.dtype != object else square * diff.astype(object)]

    def output(self, rows, slots, where):
        n, s, q = slots
        out = np.zeros(len(n), np.float64)
        mask = n <= (1 if self.sample else 0)
        for i, (ni, si, qi) in enumerate(zip(n.tolist(), s.tolist(), q.tolist())):
            if mask[i]:
                continue
            num = ni * qi - si * si
            den = ni * (ni - 1) if self.sample else ni * ni
            value = num / den  # int / int: correctly rounded however large
            out[i] = math.sqrt(value) if self.root else value
        return array_from_numpy(out, pa.float64(), mask if mask.any() else None)


class VarSamp(_Spread):
    """``var_samp(column)`` (``variance``): NULL below two non-NULL values."""


class VarPop(_Spread):
    """``var_pop(column)``: NULL without non-NULL values."""

    sample = False


class StddevSamp(_Spread):
    """``stddev_samp(column)`` (``stddev``)."""

    root = True


class StddevPop(_Spread):
    """``stddev_pop(column)``."""

    sample = False
    root = True


# ----------------------------------------------------------------------------- state


class Accumulators(FueledHolder):
    """Accumulator columns summed per key: runs of sorted unique key words in the layers of
    a :class:`~colmz.dataflow.fueled.FueledRuns` (as ``KeyedArrangement``'s), summed over
    runs on lookup.

    ``kinds`` gives each column's kind (``"int"``: exact, ``"float"``); ``effort`` and
    ``min_fuel`` how much merging each insert pays for (``FueledRuns``). Work counters:
    ``rows_inserted``, ``merges``, ``rows_merged`` (rows merges read), ``max_step_merged``
    (the most in one insert), ``keys_searched``.
    """

    #: The layers of runs (a tuple replaced by each insert, ``colmz.rollback``).
    ROLLBACK_FIELDS = ("_fueled",)

    def __init__(self, kinds: Sequence[str], *, effort: int = 1, min_fuel: int = 1024):
        self.kinds = tuple(kinds)
        self._fueled = FueledRuns(_run_size, self._begin, effort, min_fuel, _run_serial, self._combine)
        self.rows_inserted = 0
        self.keys_searched = 0

    def _begin(self, older, newer) -> AccumulatorsMerge:
        return AccumulatorsMerge(older, newer, self.kinds)

    def _combine(self, older, newer):
        """Two runs merged at once (a small merge: :class:`AccumulatorsMerge`'s result
        without its chunks -- a key's slots summed older then newer, exactly for ``int``),
        ``None`` when every key's accumulators sum to zero."""
        layout = unify_layouts(older[1], newer[1])
        keys, starts, order = sort_groups(np.concatenate([pad_keys(older[0], older[1], layout),
                                                          pad_keys(newer[0], newer[1], layout)]))
        summed = []
        for k, x, y in zip(self.kinds, older[2], newer[2]):
            c = np.concatenate([x, y])[order]
            summed.append(exact_group_sums(c, starts) if k == "int" else np.add.reduceat(c, starts))
        keys, _, summed = _drop_zero(keys[starts], layout, tuple(summed))
        if not len(keys):
            return None
        return np.ascontiguousarray(keys), layout, summed, next_serial()

    def __len__(self) -> int:
        return sum(len(r[0]) for r in self._fueled.runs())


    @property
    def nbytes(self) -> int:
        """Bytes of the runs' arrays (encoded keys and accumulator columns)."""
        return sum(r[0].nbytes + sum(c.nbytes for c in r[2]) for r in self._fueled.runs())

    def lookup(self, q: np.ndarray, ql: Layout, runs: Sequence | None = None) -> list[np.ndarray]:
        """The accumulators of each key of ``q`` (zeros where absent); over ``runs`` (some
        :meth:`state_runs`) instead of the current runs when given."""
        m = len(q)
        if m == 1:
            return self._lookup_one(q, ql, self._fueled.runs() if runs is None else runs)
        where, found = [], [[] for _ in self.kinds]
        for keys, layout, cols, *_ in (self._fueled.runs() if runs is None else runs):
            mine, present = narrow_rows(q, ql, layout)
            pos = search_rows(keys, mine, "left")
            self.keys_searched += m
            inside = pos < len(keys)
            hit = present & inside
            hit[inside] &= (keys[pos[inside]] == mine[inside]).all(axis=1)
            idx = np.flatnonzero(hit)
            if len(idx):
                where.append(idx)
                for s, c in enumerate(cols):
                    found[s].append(c[pos[idx]])
        out = []
        at = np.concatenate(where) if where else np.zeros(0, np.int64)
        for kind, parts in zip(self.kinds, found):
            acc = zeros_like_kind(kind, m)
            if parts:
                vals = np.concatenate(parts)
                if kind == "int" and (vals.dtype == object
                                      or np.abs(vals.astype(np.float64)).max() * len(vals) >= 2.0**62):
                    # Exact beyond int64: Python ints (colmz.dataflow.exact).
                    acc = acc.astype(object)
                    np.add.at(acc, at, vals.astype(object))
                    acc = narrowed(acc)
                else:
                    np.add.at(acc, at, vals)
            out.append(acc)
        return out

    def _lookup_one(self, q: np.ndarray, ql: Layout, runs) -> list[np.ndarray]:
        """:meth:`lookup` of one key (a one-row change's group): a search per run and the
        slots summed as Python numbers -- exact for ``int`` slots, ``int64`` while within
        ``2**62`` (``narrowed``) -- in run order, as the vectorised lookup sums them."""
        sums: list = [0 if k == "int" else 0.0 for k in self.kinds]
        for keys, layout, cols, *_ in runs:
            self.keys_searched += 1
            if layout == ql:
                mine = q
            else:
                mine, present = narrow_rows(q, ql, layout)
                if not present[0]:
                    continue
            pos = int(search_rows(keys, mine, "left")[0])
            if pos < len(keys) and keys[pos].tolist() == mine[0].tolist():
                for s, c in enumerate(cols):
                    sums[s] += c[pos].item() if c.dtype != object else c[pos]
        out = []
        for kind, v in zip(self.kinds, sums):
            if kind != "int":
                out.append(np.array([v], np.float64))
            elif -(2**62) < v < 2**62:
                out.append(np.array([v], np.int64))
            else:
                a = np.empty(1, object)
                a[0] = v
                out.append(a)
        return out

    # -- durable state (colmz.dataflow.state) -------------------------------------------

    def unread_merges(self, added, gone):
        """``FueledRuns.unread_merges``: for ``colmz.dataflow.state``'s deltas -- exact
        accumulators only: a float sum depends on the order of its terms, and a merge
        regroups them, so runs with float slots are read (the delta then says exactly what
        a lookup now gives)."""
        if "float" in self.kinds:
            return added, gone
        return self._fueled.unread_merges(added, gone)

    def state_runs(self) -> tuple:
        """The runs ``(keys, layout, columns)``, oldest first; never changed once made (a
        merge makes a new one): ``colmz.dataflow.state`` diffs two of these by identity."""
        return tuple(self._fueled.runs())

    # ------------------------------------------------------------------------------------

    def insert(self, keys: np.ndarray, layout: Layout, cols: Sequence[np.ndarray]) -> None:
        """Add ``cols`` to the accumulators of ``keys`` (sorted and unique)."""
        if not len(keys):
            return
        self.rows_inserted += len(keys)
        run = _drop_zero(keys, layout, tuple(cols))
        if len(run[0]):
            self._fueled.insert((*run, next_serial()))


def _run_size(run) -> int:
    return len(run[0])


def _run_serial(run) -> int:
    return run[3]


def _drop_zero(keys, layout, cols):
    keep = np.zeros(len(keys), bool)
    for c in cols:
        keep |= c != 0
    if keep.all():
        return keys, layout, cols
    return np.ascontiguousarray(keys[keep]), layout, tuple(c[keep] for c in cols)


class AccumulatorsMerge(Merge):
    """A merge in progress of two runs of :class:`Accumulators` (``older``, ``newer``): chunk
    by chunk (``colmz.dataflow.fueled``), a key's accumulators summed exactly (``int`` slots
    become Python ints beyond ``int64``), keys whose accumulators all sum to zero dropped."""

    def __init__(self, older, newer, kinds: Sequence[str]):
        super().__init__(older, newer)
        self.kinds = kinds
        self.layout = unify_layouts(older[1], newer[1])
        cap = len(older[0]) + len(newer[0])
        cols = tuple(np.empty(cap, object if (x.dtype == object or y.dtype == object)
                              else np.float64 if k == "float" else np.int64)
                     for k, x, y in zip(kinds, older[2], newer[2]))
        self.out = (np.empty((cap, sum(self.layout)), np.uint64), cols)
        self.i = self.j = self.o = 0

    def step(self, fuel: int) -> int:
        (ka, la, xa), (kb, lb, xb) = self.a[:3], self.b[:3]
        na, nb, i, j = len(ka), len(kb), self.i, self.j
        half = max(1, fuel // 2)
        ha, hb = min(i + half, na), min(j + half, nb)
        wa, wb = pad_keys(ka[i:ha], la, self.layout), pad_keys(kb[j:hb], lb, self.layout)
        ca, cb = chunk_ends(wa, ha < na, wb, hb < nb)
        keys, starts, order = sort_groups(np.concatenate([wa[:ca], wb[:cb]]))
        summed = []
        for k, x, y in zip(self.kinds, xa, xb):
            c = np.concatenate([x[i:i + ca], y[j:j + cb]])[order]
            summed.append(exact_group_sums(c, starts) if k == "int" else np.add.reduceat(c, starts))
        keys, _, summed = _drop_zero(keys[starts], self.layout, tuple(summed))
        out_keys, out_cols = self.out
        if any(s.dtype == object and c.dtype != object for s, c in zip(summed, out_cols)):
            # A sum left int64: that output column holds Python ints from now on (a new
            # tuple: an earlier value of this merge keeps the old one).
            out_cols = tuple(c.astype(object) if s.dtype == object else c for s, c in zip(summed, out_cols))
            self.out = (out_keys, out_cols)
        o, m = self.o, len(keys)
        out_keys[o:o + m] = keys
        for c, s in zip(out_cols, summed):
            c[o:o + m] = s
        self.i, self.j, self.o = i + ca, j + cb, o + m
        if self.i == na and self.j == nb:
            self.done = True
            n = self.o
            self.result = (out_keys[:n], self.layout, tuple(c[:n] for c in out_cols), next_serial()) if n else None
        return ca + cb


def sort_groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sorted keys, group starts, order)``: ``keys`` sorted lexicographically by word and
    where each run of equal keys starts."""
    n, w = keys.shape
    if n == 0:
        return keys, np.zeros(0, np.int64), np.zeros(0, np.int64)
    if w == 0:
        return keys, np.zeros(1, np.int64), np.arange(n)
    if n == 1:
        return keys, np.zeros(1, np.int64), np.zeros(1, np.int64)
    order = np.argsort(keys[:, 0], kind="stable") if w == 1 else np.lexsort(keys.T[::-1])
    ks = keys[order]
    starts = np.flatnonzero(np.concatenate(([True], (ks[1:] != ks[:-1]).any(axis=1))))
    return ks, starts, order


# ----------------------------------------------------------------------------- operator


class AccumulableReduce:
    """``SELECT group_by..., aggregates... FROM input GROUP BY group_by`` for accumulable
    aggregates (:class:`Count`, :class:`Sum`, :class:`Avg`, :class:`BoolAnd`, :class:`BoolOr`).

    Parameters
    ----------
    schema : the input's columns
    group_by : sequence of column names (empty: one global group)
    aggregates : mapping of output column name to aggregate

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> r = AccumulableReduce({"k": pa.int64(), "v": pa.int64()}, ["k"], {"s": Sum("v"), "c": Count()})
    >>> r.step(1, colmz.Updates({"k": [1, 1, 2], "v": [5, None, 7]}, time=[1] * 3, diff=[1] * 3)).to_pylist()
    [(1, 5, 2, 1, 1), (2, 7, 1, 1, 1)]
    >>> r.step(2, colmz.Updates({"k": [2], "v": [7]}, time=[2], diff=[-1])).to_pylist()
    [(2, 7, 1, 2, -1)]
    >>> g = AccumulableReduce({"v": pa.int64()}, [], {"c": Count(), "s": Sum("v")})
    >>> g.step(0, colmz.Updates.empty({"v": pa.int64()})).to_pylist()
    [(0, None, 0, 1)]
    """

    #: The accumulators (saved in place) and the clock; ``rows_touched`` is a work counter.
    ROLLBACK_FIELDS = ("_state", "_clock")

    def __init__(self, schema, group_by: Sequence[str], aggregates: Mapping[str, _Aggregate]):
        self.input_schema = as_schema(schema, "schema")
        self.group_by = check_columns(group_by, self.input_schema, "group_by")
        if not isinstance(aggregates, Mapping):
            raise TypeError(f"aggregates must map output names to aggregates, got {type(aggregates).__name__}")
        types = {c.name: c.type for c in self.input_schema}
        aggs = {}
        for name, agg in aggregates.items():
            if not isinstance(agg, _Aggregate):
                raise TypeError(f"aggregates[{name!r}] is {agg!r}, not an accumulable aggregate "
                                "(Count, Sum, Avg, BoolAnd, BoolOr, VarSamp, VarPop, StddevSamp, StddevPop)")
            if agg.column is not None and agg.column not in types:
                raise ValueError(f"aggregates[{name!r}] reads column {agg.column!r}, which is not among "
                                 f"the input's columns {list(types)}")
            agg.bind(types.get(agg.column))
            aggs[name] = agg
        self.aggregates = aggs
        self._group_specs = tuple(c for g in self.group_by for c in self.input_schema if c.name == g)
        self.schema = as_schema([*self._group_specs, *(ColumnSpec(n, a.type) for n, a in aggs.items())],
                                "the output")
        kinds = ["int"]  # rows
        self._slices = []
        for a in aggs.values():
            self._slices.append(slice(len(kinds), len(kinds) + len(a.slots)))
            kinds.extend(a.slots)
        self._state = Accumulators(kinds)
        self._count_slots = self._counting_slots()
        self._clock = Clock()
        self.rows_touched = 0

    @property
    def state(self) -> Accumulators:
        return self._state

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta``."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, time)
        first = self._clock.last is None
        glob = not self.group_by
        n = len(delta)
        if not n and not (glob and first):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        ukeys, kl, contrib = self._contributions(delta)
        self.rows_touched += n + len(ukeys)
        return self._apply(time, ukeys, kl, contrib, first)

    @property
    def partial_schema(self) -> tuple[ColumnSpec, ...]:
        """The columns of :meth:`partials`: the group's ``g0, ...``, then a slot each ``a0, ...``
        (``int64`` for exact sums, ``float64``), as ``colmz.dataflow.state`` exports the
        accumulators."""
        return (*(ColumnSpec(f"g{i}", c.type) for i, c in enumerate(self._group_specs)),
                *(ColumnSpec(f"a{i}", pa.int64() if k == "int" else pa.float64())
                  for i, k in enumerate(self._state.kinds)))

    def partials(self, delta: Updates) -> Updates:
        """What ``delta`` (at any one time) adds to the accumulators: one row per group it
        touches, its columns then its slot sums (:attr:`partial_schema`), at ``delta``'s
        time, diff 1. Nothing changes here: accumulable aggregates are sums, so the partials
        of the parts of a delta, added by :meth:`step_partials`, change the output as
        :meth:`step` of the whole delta does (Materialize's partial aggregation; the
        per-bucket stage of a global aggregate, ``colmz.spark.views``).

        >>> import colmz, pyarrow as pa
        >>> r = AccumulableReduce({"v": pa.int64()}, [], {"s": Sum("v"), "c": Count()})
        >>> p1 = r.partials(colmz.Updates({"v": [5, None]}, time=[1, 1], diff=[1, 1]))
        >>> p2 = r.partials(colmz.Updates({"v": [7]}, time=[1], diff=[-1]))
        >>> p1.to_pylist(), p2.to_pylist()
        ([(2, 1, 5, 1, 1)], [(-1, -1, -7, 1, 1)])
        >>> _ = r.step(0, colmz.Updates({"v": [7]}, time=[0], diff=[1]))
        >>> r.step_partials(1, colmz.concat([p1, p2])).to_pylist()
        [(5, 2, 1, 1), (7, 1, 1, -1)]
        """
        if not isinstance(delta, Updates):
            raise TypeError(f"delta must be colmz.Updates, got {type(delta).__name__}")
        times = np.unique(np.asarray(delta.time)) if len(delta) else np.zeros(1, np.uint64)
        if len(times) != 1:
            raise ValueError(f"delta holds updates at times {times.tolist()[:4]}: partials take one time")
        time = int(times[0])
        delta = check_delta(delta, self.input_schema, time)
        if not len(delta):
            return Updates.empty(self.partial_schema)
        ukeys, kl, contrib = self._contributions(delta)
        cols = {f"g{i}": c for i, c in enumerate(decode_columns(ukeys, kl, list(self._group_specs)))}
        for i, (c, k) in enumerate(zip(contrib, self._state.kinds)):
            if k == "int" and c.dtype == object:
                if any(not -(2**63) <= x < 2**63 for x in c.tolist()):
                    raise OverflowError(f"a partial sum of slot a{i} leaves int64, the type partials hold it in")
                c = np.array(c.tolist(), np.int64)
            cols[f"a{i}"] = pa.array(np.asarray(c, np.int64 if k == "int" else np.float64))
        n = len(ukeys)
        return Updates(cols, np.full(n, time, np.uint64), np.ones(n, np.int64), copy=False)

    def step_partials(self, time, partials: Updates) -> Updates:
        """:meth:`step` with the input's change given as :meth:`partials` (of any number of
        its parts; each row's slots times its diff): the output's change at ``time``."""
        time = self._clock.check(time)
        partials = check_delta(partials, self.partial_schema, time, "partials")
        first = self._clock.last is None
        glob = not self.group_by
        n = len(partials)
        if not n and not (glob and first):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        kw, kl = encode_columns([partials.column(f"g{i}") for i in range(len(self._group_specs))], n=n)
        keys, starts, order = sort_groups(kw)
        diff = np.asarray(partials.diff, np.int64)[order]
        if glob and not n:
            keys, starts = np.zeros((1, 0), np.uint64), np.zeros(0, np.int64)
        ukeys = np.ascontiguousarray(keys[starts]) if n else keys
        contrib = []
        for i, k in enumerate(self._state.kinds):
            if not n:
                contrib.append(zeros_like_kind(k, len(ukeys)))
                continue
            v = partials.column(f"a{i}").to_numpy(zero_copy_only=False)[order]
            if k == "int":
                contrib.append(exact_group_sums(exact_products(np.asarray(v, np.int64), diff), starts))
            else:
                contrib.append(np.add.reduceat(np.asarray(v, np.float64) * diff, starts))
        self.rows_touched += n + len(ukeys)
        return self._apply(time, ukeys, kl, contrib, first)

    def _contributions(self, delta: Updates):
        """``(group key words, their layout, per slot each group's sum)`` of ``delta``'s rows
        (the global group alone, all zeros, for an empty delta of a global reduce)."""
        glob = not self.group_by
        n = len(delta)
        kw, kl = encode_columns([delta.column(g) for g in self.group_by], n=n)
        keys, starts, order = sort_groups(kw)
        diff = np.asarray(delta.diff, np.int64)[order]
        if glob and not n:
            keys, starts = np.zeros((1, 0), np.uint64), np.zeros(0, np.int64)
        ukeys = np.ascontiguousarray(keys[starts]) if n else keys
        m = len(ukeys)
        contrib: list[np.ndarray] = [exact_group_sums(diff, starts) if n else np.zeros(m, np.int64)]
        for a in self.aggregates.values():
            if a.column is not None:
                col = delta.column(a.column)
                if isinstance(a, Count):  # count(col) reads validity only: any column type
                    valid = column_validity(col)[order]
                    values = valid
                else:
                    values, valid = column_values(col)
                    values, valid = values[order], valid[order]
            else:
                values = valid = None
            for c, k in zip(a.contributions(values, valid, diff), a.slots):
                if not n:
                    contrib.append(zeros_like_kind(k, m))
                elif k == "int":
                    contrib.append(exact_group_sums(c, starts))
                else:
                    contrib.append(np.add.reduceat(c, starts))
        return ukeys, kl, contrib

    def _apply(self, time: int, ukeys, kl, contrib, first: bool) -> Updates:
        """Add ``contrib`` (per slot, per group of ``ukeys``) to the accumulators: the output's change."""
        glob = not self.group_by
        old = self._state.lookup(ukeys, kl)
        new = [exact_add(o, c) if k == "int" else o + c for o, c, k in zip(old, contrib, self._state.kinds)]
        self._check_counts(new, ukeys, kl)
        dead = new[0] == 0
        if dead.any():
            # A group leaving resets its accumulators to exactly zero (no float residue).
            contrib = [np.where(dead, -o, c) if o.dtype != object and c.dtype != object
                       else narrowed(np.where(dead, -o.astype(object), c.astype(object)))
                       for o, c in zip(old, contrib)]
        old_present = (old[0] > 0) | (glob and not first)
        new_present = (new[0] > 0) | glob
        same = old_present & new_present
        for o, x in zip(old, new):
            same &= np.asarray(o == x, bool)
        old_idx = np.flatnonzero(old_present & ~same)
        new_idx = np.flatnonzero(new_present & ~same)
        if len(old_idx) or len(new_idx):
            result = consolidated_at(self._rows(ukeys, kl, old, old_idx, new, new_idx, time), time)
        else:
            result = Updates.empty(self.schema)
        self._state.insert(ukeys, kl, contrib)
        self._clock.advance(time)
        return result

    def _check_counts(self, new, ukeys, kl) -> None:
        for s in self._count_slots:
            bad = np.flatnonzero(new[s] < 0)
            if len(bad):
                key = tuple(c[0].as_py() for c in decode_columns(ukeys[bad[:1]], kl, self._group_specs))
                raise NegativeMultiplicity(f"the input retracts rows it does not hold: group {key} would "
                                           "count fewer than zero rows")

    def _counting_slots(self) -> list[int]:
        """The slots that count rows or values (never negative for a valid input)."""
        out = {0}
        for a, sl in zip(self.aggregates.values(), self._slices):
            idx = list(range(sl.start, sl.stop))
            if not idx:
                continue
            out.add(idx[0])  # every aggregate's first slot counts non-NULL values
            if isinstance(a, _SumLike) and not a.exact:
                out.update(idx[2:])
            if isinstance(a, _BoolAgg):
                out.add(idx[1])
        return sorted(out)

    def _rows(self, ukeys, kl, old, old_idx, new, new_idx, time) -> Updates:
        """``−(key, old values)`` for ``old_idx`` and ``+(key, new values)`` for ``new_idx``."""
        idx = np.concatenate([old_idx, new_idx])
        accs = [np.concatenate([o[old_idx], x[new_idx]]) for o, x in zip(old, new)]
        cols = decode_columns(np.ascontiguousarray(ukeys[idx]), kl, self._group_specs)
        data = {s.name: c for s, c in zip(self._group_specs, cols)}
        where = "the group" if self.group_by else "the input"
        for (name, a), sl in zip(self.aggregates.items(), self._slices):
            data[name] = a.output(accs[0], accs[sl], where)
        diff = np.concatenate([np.full(len(old_idx), -1, np.int64), np.ones(len(new_idx), np.int64)])
        # every column is an Arrow array of the output's type, made here: no checks to repeat
        return Updates.from_checked(data, np.full(len(idx), time, np.uint64), diff)

    def __repr__(self) -> str:
        return f"AccumulableReduce(group_by={list(self.group_by)}, aggregates={self.aggregates})"


def _negated(x: np.ndarray) -> np.ndarray:
    return -x
