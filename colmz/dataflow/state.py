"""Operator state as collections of updates: exported per commit, restored from a snapshot.

Design
------
A view's operators (:class:`colmz.dataflow.render.Pipeline`) keep their state in two
structures, and this module turns each into a collection of updates -- the shape every
``colmz.Arrangement`` holds -- so a durable catalog can keep it beside the view
(``colmz.catalog.durable``) and a reopen can restore the operators instead of feeding them
their inputs again:

* a :class:`~colmz.dataflow.keyed.KeyedArrangement` (a join's inputs, a min/max's or top-k's
  input by group, a distinct's counts, an outer join's inner join) is its rows with their
  multiplicities as diffs, columns ``c0, c1, ...`` by position (an operator's column names
  may be anything, ``time`` and ``diff`` included);
* an :class:`~colmz.dataflow.accumulable.Accumulators` (an accumulable reduce's) is one row
  per group, diff ``1``: the group's columns ``g0, ...`` then one column per accumulator
  slot ``a0, ...`` (``int64`` for exact sums, ``float64``). A group's change is its old row
  retracted and its new row inserted.

:func:`operator_states` finds them by walking the fields an operator declares for rollback
(``ROLLBACK_FIELDS``, ``colmz.rollback``: every field a step may change): each is one of the
two structures, a :class:`~colmz.dataflow.step.Clock`, a structure declaring fields of its
own (walked in turn) or a list, tuple or dict of those. A
:class:`~colmz.dataflow.shared.SharedInput` (an operator's window onto an arrangement shared
between views, ``colmz.dataflow.shared``) is a *reference*, not the view's state: it is not
exported with the view, nor filled by :func:`restore` -- the catalog's registry owns that
arrangement, and a durable catalog keeps it once as a state object of its own (named by its
``arrangement_id``) and puts it back in the registry before the views are rendered. A temporal filter's
flips still to come are a ``KeyedArrangement`` of its own (``colmz.dataflow.temporal``),
exported as any other. Any other value holding state (a
subquery's :class:`~colmz.dataflow.maintained.Recompute` keeps its previous output) makes the pipeline
*not resumable*: :func:`operator_states` returns ``None`` and the view is rebuilt from its
inputs when its catalog reopens. Each state is named by its path in the pipeline
(``"<operator index>.<field>[.<element>]"``, operators in the pipeline's order): the names
and schemas are a function of the plan, so a reopen finds each state's collection again.

Deltas by run identity. Both structures hold their contents as runs that are never changed
once made (a merge makes a new run from old ones): :meth:`OperatorState.marks` is the tuple
of runs at an export, and :meth:`OperatorState.delta` the change from those marks to now --
the runs made since, minus those merged away since, consolidated in their encoded words
(a ``KeyedArrangement``), or the groups those runs hold looked up over the marked runs and
over the current ones (``Accumulators``): the row retracted is exactly the row an earlier
delta inserted, float sums included. Runs present at both ends cancel without being read,
so an export costs what the operator's own inserts and merges cost. Marks are values: a
failed commit rolls the operators back and the next delta from the same marks is still
right.

:func:`restore` fills a *fresh* pipeline (rendered, never stepped) from snapshots of its
states' collections and sets every clock to the snapshot's time; it checks every snapshot
before it changes anything.

A recursion's iterations (``colmz.dataflow.iterate``) are as many as it reached: a fresh
pipeline's has one, so :func:`prepare_states` first makes as many as a snapshot's names
number.

Invariant: for a pipeline ``p`` stepped to time ``t``, ``Σ delta(marks_i, ·)`` over its
exports equals each state's contents, and a fresh pipeline restored from them steps on
exactly as ``p`` does.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from colmz.dataflow.accumulable import AccumulableReduce, Accumulators, sort_groups
from colmz.dataflow.keyed import KeyedArrangement, consolidate_words
from colmz.dataflow.shared import SharedInput
from colmz.dataflow.step import Clock
from colmz.order import ColumnSpec, decode_columns, encode_columns, pad_keys, unify_layouts
from colmz.updates import Updates

__all__ = ["OperatorState", "StateOverflow", "operator_states", "operator_states_of", "prepare_states", "restore",
           "restore_operators"]


class StateOverflow(ValueError):
    """An exact accumulator left ``int64``, the column type a state collection stores it in."""


class OperatorState:
    """One state structure of a pipeline and its collection of updates (module docstring).

    ``name`` is its path in the pipeline, ``schema`` the columns of its collection.
    """

    def __init__(self, name: str, target, group: tuple[ColumnSpec, ...] | None = None):
        self.name = name
        self.target = target
        if isinstance(target, KeyedArrangement):
            self.kind = "keyed"
            self.schema = tuple(ColumnSpec(f"c{i}", c.type) for i, c in enumerate(target.schema))
        else:
            self.kind = "accumulators"
            self._group = group
            slots = [ColumnSpec(f"a{i}", pa.int64() if k == "int" else pa.float64())
                     for i, k in enumerate(target.kinds)]
            self.schema = (*(ColumnSpec(f"g{i}", c.type) for i, c in enumerate(group)), *slots)

    def __repr__(self) -> str:
        return f"OperatorState({self.name!r}, {self.kind}, {[c.name for c in self.schema]})"

    def marks(self) -> tuple:
        """The runs now: the point a later :meth:`delta` is taken from."""
        return self.target.state_runs()

    def delta(self, marks: tuple, time: int) -> Updates:
        """The collection's change from ``marks`` (an earlier :meth:`marks`; ``()``: from
        empty) to now, at ``time``, consolidated."""
        now = self.target.state_runs()
        before, after = {id(r) for r in marks}, {id(r) for r in now}
        added = [r for r in now if id(r) not in before]
        gone = [r for r in marks if id(r) not in after]
        # -- fuel39 hook: a run a completed merge made from marked runs holds what they held:
        # both cancel unread (colmz.dataflow.fueled.FueledRuns.unread_merges), so an export
        # never pays for a large merge finishing on its commit.
        unread = getattr(self.target, "unread_merges", None)
        if unread is not None:
            added, gone = unread(added, gone)
        # -- end of the fuel39 hook
        if not added and not gone:
            return Updates.empty(self.schema)
        if self.kind == "keyed":
            return self._keyed_delta(added, gone, time)
        return self._accumulators_delta(marks, added, gone, time)

    def _keyed_delta(self, added, gone, time: int) -> Updates:
        arr: KeyedArrangement = self.target
        runs = [*added, *gone]
        kl = unify_layouts(*(r.key_layout for r in runs))
        vl = unify_layouts(*(r.val_layout for r in runs))
        words = np.hstack([np.concatenate([pad_keys(r.keys, r.key_layout, kl) for r in runs]),
                           np.concatenate([pad_keys(r.vals, r.val_layout, vl) for r in runs])])
        # (as int64: a run stores its diffs narrowed, keyed.narrow_diff)
        diff = np.concatenate([r.diff.astype(np.int64) for r in added] + [-r.diff.astype(np.int64) for r in gone])
        words, diff = consolidate_words(words, diff)
        width = sum(kl)
        specs = {c.name: c for c in arr.schema}
        key_cols = decode_columns(np.ascontiguousarray(words[:, :width]), kl, [specs[n] for n in arr.key])
        val_specs = [c for c in arr.schema if c.name not in arr.key]
        val_cols = decode_columns(np.ascontiguousarray(words[:, width:]), vl, val_specs)
        by_name = dict(zip(arr.key, key_cols)) | {c.name: v for c, v in zip(val_specs, val_cols)}
        cols = {s.name: by_name[c.name] for s, c in zip(self.schema, arr.schema)}
        return Updates(cols, np.full(len(diff), time, np.uint64), diff, copy=False)

    def _accumulators_delta(self, marks, added, gone, time: int) -> Updates:
        acc: Accumulators = self.target
        runs = [*added, *gone]
        layout = unify_layouts(*(r[1] for r in runs))
        keys = np.concatenate([pad_keys(r[0], r[1], layout) for r in runs])
        keys, starts, _ = sort_groups(keys)
        keys = np.ascontiguousarray(keys[starts])
        old = acc.lookup(keys, layout, runs=marks)
        new = acc.lookup(keys, layout)
        old_present = np.zeros(len(keys), bool)
        new_present = np.zeros(len(keys), bool)
        same = np.ones(len(keys), bool)
        for o, x in zip(old, new):
            old_present |= np.asarray(o != 0, bool)
            new_present |= np.asarray(x != 0, bool)
            same &= np.asarray(o == x, bool)
        out_old = np.flatnonzero(old_present & ~same)
        out_new = np.flatnonzero(new_present & ~same)
        idx = np.concatenate([out_old, out_new])
        group = decode_columns(np.ascontiguousarray(keys[idx]), layout, list(self._group))
        cols = {f"g{i}": c for i, c in enumerate(group)}
        for i, (o, x, kind) in enumerate(zip(old, new, acc.kinds)):
            v = np.concatenate([o[out_old], x[out_new]])
            cols[f"a{i}"] = pa.array(self._int64(v) if kind == "int" else np.asarray(v, np.float64))
        diff = np.concatenate([np.full(len(out_old), -1, np.int64), np.ones(len(out_new), np.int64)])
        return Updates(cols, np.full(len(idx), time, np.uint64), diff, copy=False)

    def _int64(self, v: np.ndarray) -> np.ndarray:
        if v.dtype != object:
            return np.asarray(v, np.int64)
        for x in v.tolist():
            if not -(2**63) <= x < 2**63:
                raise StateOverflow(f"operator state {self.name!r}: an exact accumulator holds {x}, "
                                    "outside int64, the type its state collection stores")
        return np.array(v.tolist(), np.int64)

    # ------------------------------------------------------------------ restoring

    def prepared(self, snapshot: Updates, time: int):
        """``snapshot`` (the collection's contents) checked and converted for :meth:`load`;
        ``ValueError`` naming the state when it does not fit."""
        if [c.name for c in snapshot.schema] != [c.name for c in self.schema] or any(
                a.type != b.type for a, b in zip(snapshot.schema, self.schema)):
            raise ValueError(f"operator state {self.name!r}: the snapshot has columns {list(snapshot.schema)}, "
                             f"the state {list(self.schema)}")
        if self.kind == "keyed":
            cols = {c.name: snapshot.column(s.name) for s, c in zip(self.schema, self.target.schema)}
            return Updates(cols, np.full(len(snapshot), time, np.uint64), snapshot.diff)
        if len(snapshot) and not (np.asarray(snapshot.diff) == 1).all():
            raise ValueError(f"operator state {self.name!r}: a group's row has multiplicity other than 1")
        n = len(snapshot)
        group = [snapshot.column(f"g{i}") for i in range(len(self._group))]
        keys, layout = encode_columns(group, n=n)
        keys, starts, order = sort_groups(keys)
        if len(starts) != n and n:
            raise ValueError(f"operator state {self.name!r}: a group holds two rows")
        slots = []
        for i, kind in enumerate(self.target.kinds):
            v = snapshot.column(f"a{i}").to_numpy(zero_copy_only=False)
            slots.append(np.asarray(v, np.int64 if kind == "int" else np.float64)[order])
        return np.ascontiguousarray(keys), layout, slots

    def load(self, prepared, time: int) -> None:
        """Fill the (empty) structure with what :meth:`prepared` gave."""
        if self.kind == "keyed":
            self.target.insert(time, prepared)
        else:
            keys, layout, slots = prepared
            self.target.insert(keys, layout, slots)


# ----------------------------------------------------------------------------- walking


def operator_states(pipeline) -> list[OperatorState] | None:
    """The state structures of ``pipeline`` (a ``colmz.dataflow.render.Pipeline``) in a fixed
    order, or ``None`` when some state is not one of them (module docstring).

    >>> import colmz, pyarrow as pa
    >>> from colmz.dataflow.plan import plan, render
    >>> p = plan("SELECT k, count(*) AS c FROM t GROUP BY k", {"t": {"k": pa.int64()}})
    >>> pipe = render(p)
    >>> [s] = operator_states(pipe); s
    OperatorState('1.state', accumulators, ['g0', 'a0'])
    >>> _ = pipe.step(1, {"t": colmz.Updates({"k": [7, 7]}, time=[1, 1], diff=[1, 1])})
    >>> marks = s.marks(); s.delta((), 1).to_pylist()
    [(7, 2, 1, 1)]
    >>> _ = pipe.step(2, {"t": colmz.Updates({"k": [7]}, time=[2], diff=[1])})
    >>> s.delta(marks, 2).to_pylist()
    [(7, 2, 2, -1), (7, 3, 2, 1)]
    >>> fresh = render(p); restore(fresh, {s.name: colmz.Updates({"g0": [7], "a0": [3]}, time=[2], diff=[1])}, 2)
    >>> fresh.step(3, {"t": colmz.Updates({"k": [7]}, time=[3], diff=[-1])}).to_pylist()
    [(7, 2, 3, 1), (7, 3, 3, -1)]
    """
    found, clocks = [], []
    if not all(_walk(op, str(i), found, clocks) for i, op in enumerate(pipeline.operators)):
        return None
    return found


def _clocks(pipeline) -> list[Clock]:
    found, clocks = [], []
    for i, op in enumerate(pipeline.operators):
        _walk(op, str(i), found, clocks)
    return clocks


def _walk(obj, path: str, found: list, clocks: list) -> bool:
    if obj is None:
        return True
    if isinstance(obj, Clock):
        clocks.append(obj)
        return True
    if isinstance(obj, KeyedArrangement):
        if any(c.kind == "null" for c in obj.schema):
            return False  # a column with no type yet: no collection can hold it
        found.append(OperatorState(path, obj))
        return True
    if isinstance(obj, SharedInput):
        return True  # a reference: the catalog's registry owns, exports and restores it
    if isinstance(obj, (list, tuple)):
        return all(_walk(v, f"{path}.{i}", found, clocks) for i, v in enumerate(obj))
    if isinstance(obj, dict):
        return all(_walk(v, f"{path}.{i}", found, clocks) for i, v in enumerate(obj.values()))
    fields = getattr(type(obj), "ROLLBACK_FIELDS", None)
    if fields is None:
        return False
    if isinstance(obj, AccumulableReduce):
        group = tuple(c for g in obj.group_by for c in obj.input_schema if c.name == g)
        if any(c.kind == "null" for c in group):
            return False
        found.append(OperatorState(f"{path}.state", obj.state, group))
        return all(_walk(getattr(obj, f), f"{path}.{f.strip('_')}", found, clocks)
                   for f in fields if getattr(obj, f) is not obj.state)
    return all(_walk(getattr(obj, f), f"{path}.{f.strip('_')}", found, clocks) for f in fields)


def prepare_states(pipeline, names) -> None:
    """Let the operators of ``pipeline`` (fresh, never stepped) whose states depend on how
    far they went make the structures ``names`` (the state names a snapshot holds) name,
    before :func:`operator_states` lists them to be matched and :func:`restore` d: a
    recursion (``colmz.dataflow.iterate.Iterate.grow_to_states``) makes as many iterations'
    instances as the names number. Structures made so and not restored are dropped at the
    operator's first step (it then starts from nothing, as a fresh one)."""
    for i, op in enumerate(pipeline.operators):
        grow = getattr(op, "grow_to_states", None)
        if grow is not None:
            prefix = f"{i}."
            grow([n[len(prefix):] for n in names if n.startswith(prefix)])


def restore(pipeline, snapshots: Mapping[str, Updates], time: int) -> None:
    """Fill ``pipeline`` -- rendered and never stepped -- from ``snapshots`` (state name ->
    its collection's contents as of ``time``) and set its clocks to ``time``: it then steps
    on from ``time + 1`` as the pipeline the snapshots were taken from. ``ValueError`` when
    the pipeline is not resumable, was stepped, or the snapshots do not fit its states
    (checked before anything changes)."""
    states = operator_states(pipeline)
    if states is None:
        raise ValueError("the pipeline holds state that is not exported (a recomputed subquery): "
                         "it cannot be restored")
    names = [s.name for s in states]
    if sorted(names) != sorted(snapshots):
        raise ValueError(f"the pipeline's states are {names}, the snapshots {sorted(snapshots)}")
    clocks = _clocks(pipeline)
    if any(c.last is not None for c in clocks) or any(s.target.state_runs() for s in states):
        raise ValueError("the pipeline was stepped: only a fresh one is restored")
    prepared = [(s, s.prepared(snapshots[s.name], time)) for s in states]
    for s, p in prepared:
        s.load(p, time)
    for c in clocks:
        c.last = time


# ----------------------------------------------------------------------------- bare operators


class _Operators:
    """Operators outside a pipeline, seen as one (what :func:`operator_states` walks)."""

    def __init__(self, operators):
        self.operators = list(operators)


def operator_states_of(operators) -> list[OperatorState] | None:
    """:func:`operator_states` of operators not rendered into a pipeline (an
    ``AccumulableReduce``, a ``DeltaJoin``, ... in that order): names ``"<index>.<field>"``
    by their position in ``operators``.

    >>> import colmz, pyarrow as pa
    >>> from colmz.dataflow import Count, AccumulableReduce
    >>> r = AccumulableReduce({"k": pa.int64()}, ["k"], {"c": Count()})
    >>> [s] = operator_states_of([r]); s
    OperatorState('0.state', accumulators, ['g0', 'a0'])
    """
    return operator_states(_Operators(operators))


def restore_operators(operators, snapshots: Mapping[str, Updates], time: int) -> None:
    """:func:`restore` of operators not rendered into a pipeline (fresh, never stepped;
    names as :func:`operator_states_of` gives them)."""
    restore(_Operators(operators), snapshots, time)
