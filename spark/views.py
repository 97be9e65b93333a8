"""Views kept by delta rules on Spark: one operator step per key bucket, state committed by the driver.

Design
------
For users who outgrow one machine (``docs/dataflow.md``): a stateful operator of
``colmz.dataflow`` -- the sum view's :class:`~colmz.dataflow.AccumulableReduce`, the join
view's :class:`~colmz.dataflow.DeltaJoin` -- is run per *key bucket*. Each input's rows are
bucketed by the operator's key (the group key of a reduce, the join key of a join), ``bucket
= pmod(xxhash64(key columns), buckets)`` computed by Spark, so every row a key's output
depends on meets in one bucket; the inputs of a join are bucketed by their join columns cast
to one type, so ``ΔA``'s bucket ``b`` meets only ``B``'s bucket ``b`` (co-partitioned, no
broadcast).

A chain runs in the bucket's task too: :func:`bucketed_view` takes a view's SQL whose plan
(``colmz.dataflow.plan``) is a keyed stateful operator over tables -- over one table a
reduce with a ``GROUP BY`` (accumulable, min/max or basic aggregates), a ``DISTINCT``, a
top-k per group (``DISTINCT ON``) or a window function with ``PARTITION BY``; or an inner
equi-join of two tables -- with Map/Filters anywhere (before it, the select list,
``HAVING``) and, above it, more of those keyed operators; the task steps the whole
rendered plan (``colmz.dataflow.render``). Map/Filters act row by row, so
they hold in any bucket. A bucket must hold every row each stateful operator's key needs,
so the bucket key is made of the lowest operator's key columns (a join's equated pairs)
that (1) reach it from table columns unchanged, traced down through Map/Filters (a native
one's ``select`` pairs, a SQL one's placeholder of an input column), and (2) are carried
unchanged into the key of every operator above it (traced down through Map/Filters, a
keyed operator's key columns). Bucketing by part of a key is correct -- equal
keys agree on every part --, so the positions failing either are left out; a plan with none
left is refused.
Only buckets with a delta step -- or holding a temporal filter's flip that has come due
(``mz_now()`` compared with a column, at the top of a plan: it changes without input; such a
view runs in stages, ``colmz.spark.stages``). A task of such a stage reports its bucket's next
flip (the least time its filter's state holds after the step, ``None`` for none), the record
keeps it (``due``, per ``"<bucket>/<stage names>"``), and a step at ``T`` runs, besides the
buckets its delta touches, those whose next flip is at or before ``T``, each fed one row at
diff 0 (a bucket holding the filter's runs without a reported next flip -- a record written
before they were kept -- runs at every step until it reports one). A global
aggregate (no ``GROUP BY``: one group, a row even over an empty input) of accumulable
aggregates and ``min``/``max``, over Map/Filters of one table or over a subtree cut into
stages (a join, say), is a ``"global"`` view (``colmz.spark.global_agg``): per-bucket partial
aggregates (a bucket's ``min``/``max`` kept over its rows), then one final bucket that steps
at every step. A global aggregate DuckDB recomputes (``string_agg``, an aggregate of an
expression) is refused, naming the construct.

Views over views (:func:`bucketed_views`): a ``"views"`` view holds several views, each its
own dataflow as above (its *member*), each reading tables and the members before it: a
member's output delta is emitted and is the delta of the members reading it (a DataFrame
made from it, bucketed by their keys). Every member's state is named
``"<member index>.<name>"`` in the one record and committed in the one compare-and-set.

Operators keyed differently -- a join on ``k`` then a reduce grouped by ``w``, a reduce over
a reduce keyed by its output, a reduce keyed by a computed column --, a table read twice
(a self-join), outer joins, unions and set operations make a ``"stages"`` view: ``colmz.spark.stages`` cuts the plan where the key
changes, and each stage (:class:`StageView`) runs as above under its own bucketing, its
inputs the tables' deltas or the stage below's output delta, re-bucketed by this stage's key
(a second ``groupBy(bucket).applyInArrow``: a shuffle). A stage's output is materialized once
(``localCheckpoint``: its tasks write parts, so they run once), its runs reported to the
driver, its rows the next stage's input; the root stage's output is the view's. The state
names of stage ``i`` are ``"<i>:<name>"``, all stages' in the one record, committed in the
one compare-and-set below.

A step at time ``t`` is a pure function of (the bucket's state, the bucket's delta):
:func:`step_bucket` returns ``(output, state_delta)``. The state of a bucket is the
operator's *own* state, as the durable in-process views keep it (``colmz.dataflow.state``,
``colmz.catalog.durable``): a collection of updates per state structure of the operator,
named by its path (:meth:`BucketedView.states`) --

* the sum view's :class:`~colmz.dataflow.accumulable.Accumulators` (``"0.state"``): one row
  per group, its key then its accumulator slots (row count, per aggregate its non-NULL
  count and exact sums), diff 1;
* the join view's :class:`~colmz.dataflow.keyed.KeyedArrangement` s (``"0.arrangements.j"``):
  each input's rows keyed by its join columns, multiplicities as diffs, rows with a NULL
  join key dropped (they join nothing).
* a plan's, those of its stateful operators, named by their place in the pipeline (a
  min/max reduce's or a top-k's ``"1.arranged"``: its input by group, the rows of the
  bucket's groups -- a min/max's looked up by the delta's groups, ``colmz.spark.lookups``;
  a distinct's counts; a basic aggregate's or a window's ``"1.input"`` and ``"1.output"``,
  recomputed per affected group in DuckDB).

The step restores a fresh operator from the bucket's collections
(``colmz.dataflow.state.restore_operators``: accumulators and arrangements filled as they
are, no step over the state), steps the delta at ``t``, and exports each collection's change
since the restore (``OperatorState.delta``): the sum view's changed groups, old row retracted
and new row inserted; the join view's joinable delta rows. The state of a collection grows by
*appending* that change as a run of parts; when a bucket's collection holds
:data:`COMPACT_RUNS` runs the task writes its consolidated contents as one run instead (a
compaction), and the old runs are dropped from the state. A sum view's bucket therefore
holds ``O(groups)`` rows (times the runs before a compaction), not its input rows.

Durable state (:class:`BucketState`): parts under ``<name>/parts/`` in a blob store and one
consensus record ``<name>/state`` -- its layout (:data:`LAYOUT`), the view's description,
the number of buckets, the last committed time and, per bucket and state collection
(``"<bucket>/<state name>"``), the runs (``WrittenRun`` with every part's check). A record
of the first layout (:data:`INTEGRATED_LAYOUT`: each input's integrated rows per bucket, no
``layout`` field) is refused by :meth:`BucketState.open` with
:class:`BucketStateLayoutError` naming it; :func:`convert_state` converts it once, in the
driver (each bucket's operator stepped over its rows, its collections written, one
compare-and-set).
:func:`step_buckets` runs one step as Materialize's sink and ``colmz sink`` commit
(``colmz.spark.sink``, ``colmz.spark.cli.sink``), in named phases with one durable call:

1. **bucketing** -- each delta DataFrame gets its bucket column;
2. **stepping buckets** -- ``groupBy(bucket).applyInArrow`` (``cogroup`` for a join): each
   task of a bucket with a delta reads its state parts (checked against the recorded
   checks), steps, writes a run per changed state collection (parts carry the step's owner
   token) and returns its output rows, a description of its runs and the state rows it
   read (:attr:`BucketState.rows_read`, a work counter); untouched buckets are not read;
3. **committing** -- the driver collects the output and the runs and compare-and-sets the
   record from the version it read: the new time and each touched bucket's runs. This is the
   only durable change: a task that raises, a lost compare-and-set or a crash before it
   leaves the committed state as it was, and the parts the step wrote are deleted
   (``colmz.arrangement.runs.discard_owned``, by the owner token; a crash leaves them
   unreferenced). After the commit, the parts of runs a compaction replaced are deleted:
   a handle still holding an older version then fails to read them (open the state again;
   its commit would lose the compare-and-set anyway).

Cost of a step: the touched buckets' state collections (read and restored: Spark tasks keep
nothing between steps) plus the delta -- for a sum view the bucket's groups; for a join view
(:func:`join_view`) only the arranged rows of the keys its delta touches, looked up in parts
stored key columns first (``colmz.spark.lookups``; a compaction reads the collection
whole, once every ``compact_runs`` steps of a bucket), and so for the join of a plan from
SQL and a join (inner or outer) inside a stage; for a min/max reduce over Map/Filters of a
table or of a stage's input, keyed first by a bucket key column, only the rows of the groups
its delta touches, looked up alike -- and untouched buckets cost nothing. More buckets mean smaller states per touched bucket. A ``"stages"`` view pays
that per stage (its touched buckets under its own key) plus a shuffle of each lower stage's
output delta. The in-process operators
keep their state between steps and cost only the delta; this module trades that for state
spread over machines.

Invariants: a committed record's time only grows; every part the record names was written
and checked before the compare-and-set that names it; the consolidated runs of a bucket's
collection equal the in-process operator's exported state after the same deltas, and the
output of a step equals the in-process operator's output and the recompute's change for
the same deltas (``tests/spark/test_spark_views.py``; a ``"stages"`` view's, the in-process
``MaintainedView``'s, ``tests/spark/test_stages.py``) -- exactly for every exact
accumulator (counts, integer sums); a float sum of an accumulable reduce built directly (the
planner keeps SQL's float sums per affected group, recomputed in each bucket's task, and a
global one is refused) is the restored sum plus the delta's, so its rounding may differ from
an operator that kept its terms in other runs, as float sums of
``colmz.dataflow.accumulable`` drift from a recompute.
"""

# No ``from __future__ import annotations``: pyspark reads the UDF's type hints at runtime.
import contextlib
import functools
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import colmz
from colmz.arrangement.parts import read_parts as read_blob_parts
from colmz.arrangement.runs import WrittenRun, discard_owned, write_run
from colmz.dataflow import AccumulableReduce, DeltaJoin
from colmz.dataflow.accumulable import (
    Avg,
    BoolAnd,
    BoolOr,
    Count,
    StddevPop,
    StddevSamp,
    Sum,
    VarPop,
    VarSamp,
)
from colmz.dataflow.state import operator_states_of, restore_operators
from colmz.frontier import check_time
from colmz.order import ColumnSpec
from colmz.rows import at_time, schema_of
from colmz.spark.global_agg import FinalStage, PartialStage, global_parts, lower_plan
from colmz.spark.lookups import (
    STATE_PART_ROWS,
    GroupLead,
    from_stored,
    lead_columns,
    part_bounds,
    read_touched,
    stored_schema,
    to_stored,
    touched_values,
)
from colmz.spark.stages import Stage, StageError, input_name, plan_stages, stage_plan
from colmz.storage.base import Indeterminate, VersionedData
from colmz.storage.url import Location, open_blob, open_location

__all__ = ["COMPACT_RUNS", "INTEGRATED_LAYOUT", "LAYOUT", "BucketState", "BucketStateConflict", "BucketStateLayoutError", "BucketedView",
           "StageView", "bucketed_view", "bucketed_views", "convert_state", "join_view", "step_bucket", "step_buckets", "sum_view"]

#: A bucket's operator state holding this many runs is written whole, consolidated, as one run.
COMPACT_RUNS = 8

#: The layout of a state record: per bucket, the operators' own state collections
#: (``colmz.dataflow.state``). A record without it is of the first layout,
#: :data:`INTEGRATED_LAYOUT`.
LAYOUT = "operator-state"

#: The first layout: per bucket, each input's rows integrated up to the record's time.
INTEGRATED_LAYOUT = "integrated-input"

#: A record's ``stored`` field: a join view's arrangements are stored key columns first,
#: each part's key bounds in the record's ``bounds`` (``colmz.spark.lookups``). A record
#: without it (written before) keeps its order and is read whole.
KEY_FIRST = "key-first"

#: A record's ``stored`` field: as :data:`KEY_FIRST`, and the joins inside a view of several
#: stages (inner and outer) are stored key columns first too, so a stage's task looks them
#: up by its delta's keys. Every record written since; one of :data:`KEY_FIRST` keeps its
#: stages' arrangements in their own order (``lead_columns(view, stages=False)``).
KEY_FIRST_STAGES = "key-first-stages"

_AGGREGATES = {c.__name__: c for c in (Avg, BoolAnd, BoolOr, Count, StddevPop, StddevSamp, Sum, VarPop, VarSamp)}
_BUCKET = "_colmz_bucket"
_RUNS = "_colmz_runs"
_INPUT = "_colmz_input"


class BucketStateConflict(RuntimeError):
    """Another writer committed the view's state since this handle read it: the step
    committed nothing (open the state again and re-run the step)."""


class BucketStateLayoutError(ValueError):
    """A state record in a layout other than :data:`LAYOUT` (an :data:`INTEGRATED_LAYOUT`
    one converts with :func:`convert_state`)."""


@dataclass(frozen=True)
class BucketedView:
    """A view whose stateful operators run per key bucket: ``kind`` ``"sum"`` (an
    :class:`~colmz.dataflow.AccumulableReduce`), ``"join"`` (a
    :class:`~colmz.dataflow.DeltaJoin`), ``"plan"`` (a view's SQL rendered into its
    operators, ``colmz.dataflow.render``, all bucketed by one key), ``"stages"`` (a
    view's SQL cut into :meth:`stages`, each bucketed by its own key; ``keys`` empty),
    ``"global"`` (a global aggregate, accumulable and min/max: per-bucket partials, then one
    final bucket, ``colmz.spark.global_agg``) or ``"views"`` (several views, each over tables and
    the ones before it: :meth:`members`); ``inputs`` the inputs' schemas (the delta
    DataFrames' columns), ``keys`` each input's bucket key. Made by :func:`sum_view`,
    :func:`join_view`, :func:`bucketed_view` (from SQL) and :func:`bucketed_views`."""

    kind: str
    inputs: tuple[tuple[ColumnSpec, ...], ...]
    keys: tuple[tuple[str, ...], ...]
    #: ``"sum"``: ``(output name, aggregate class name, column or None)`` per aggregate.
    aggregates: tuple[tuple[str, str, str | None], ...] = ()
    #: ``"join"``: the equated column pairs.
    on: tuple[tuple[str, str], ...] = ()
    #: ``"plan"``: the view's SQL and the tables it reads, one per input, in input order.
    query: str = ""
    tables: tuple[str, ...] = ()

    def operator(self):
        """A new in-process operator of this view (empty state): the operator, or the
        rendered ``Pipeline`` of a ``"plan"`` view (of a ``"stages"`` view: the whole plan's,
        in one process -- the reference its stages equal)."""
        if self.kind == "views":
            raise ValueError("a 'views' view is several views: each of view.members() has its operator")
        if self.kind in ("plan", "stages", "global"):
            from colmz.dataflow.plan import plan, render

            return render(plan(self.query, {t: {c.name: c.type for c in s} for t, s in zip(self.tables, self.inputs)}))
        ins = self.inputs
        if self.kind == "sum":
            aggs = {name: (_AGGREGATES[cls](col) if col is not None else _AGGREGATES[cls]())
                    for name, cls, col in self.aggregates}
            return AccumulableReduce(ins[0], list(self.keys[0]), aggs)
        return DeltaJoin(list(ins), list(self.on))

    def operators(self, op) -> list:
        """The operators of ``op`` (an :meth:`operator`), as
        ``colmz.dataflow.state.operator_states_of`` names their states."""
        return op.operators if self.kind in ("plan", "stages", "global") else [op]

    def step(self, op, time: int, deltas: Sequence) -> colmz.Updates:
        """``op``'s output delta at ``time`` for the inputs' ``deltas`` (all at ``time``)."""
        if self.kind in ("plan", "stages", "global"):
            return op.step(time, dict(zip(self.tables, deltas)))
        return op.step(time, *deltas)

    def stages(self) -> tuple["StageView", ...]:
        """A ``"stages"`` view's stages, bottom-up, the root's last (``colmz.spark.stages``):
        each a :class:`StageView` stepped per bucket of its own key.

        >>> import pyarrow as pa
        >>> v = bucketed_view("SELECT u.w, sum(t.v) AS s FROM t JOIN u ON t.k = u.k GROUP BY u.w",
        ...                   {"t": {"k": pa.int64(), "v": pa.int64()}, "u": {"k": pa.int64(), "w": pa.string()}})
        >>> [(s.sources, s.keys) for s in v.stages()]
        [((('table', 't'), ('table', 'u')), (('k',), ('k',))), ((('stage', '0'),), (('c3',),))]
        """
        if self.kind == "global":
            lower = tuple(StageView(self, i) for i in range(len(lower_plan(self)[1])))
            return (*lower, PartialStage(self), FinalStage(self))
        if self.kind != "stages":
            raise ValueError(f"a {self.kind} view runs as one stage; only a 'stages' or 'global' view has stages()")
        return tuple(StageView(self, i) for i in range(len(_staged(self)[1])))

    def states(self) -> tuple[tuple[str, tuple[ColumnSpec, ...]], ...]:
        """The operator's state collections, ``(name, schema)`` each
        (``colmz.dataflow.state.operator_states_of``): a sum view's accumulators, one row
        per group; a join view's arrangements, each input's rows keyed by its join columns;
        a plan's, those of its stateful operator (a min/max reduce's: its input by group).

        >>> import pyarrow as pa
        >>> from colmz.dataflow import Sum
        >>> v = sum_view({"k": pa.int64(), "v": pa.int64()}, ["k"], {"s": Sum("v")})
        >>> [(n, [c.name for c in s]) for n, s in v.states()]
        [('0.state', ['g0', 'a0', 'a1', 'a2'])]
        """
        if self.kind in ("stages", "global"):
            return tuple((f"{i}:{n}", schema) for i, st in enumerate(self.stages()) for n, schema in st.states())
        if self.kind == "views":
            return tuple((f"{m}.{n}", schema) for m, (_, v) in enumerate(self.members()) for n, schema in v.states())
        op = self.operator()
        found = operator_states_of(self.operators(op))
        if found is None:
            raise ValueError(f"the {self.kind} view's operators hold state colmz.dataflow.state does not "
                             "export (a column of type null, a recomputed subquery): it cannot be bucketed")
        return tuple((st.name, st.schema) for st in found)

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        """The output's columns."""
        return tuple(self.operator().schema)

    def join_leads(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """For a ``"plan"`` view whose lowest operator is an inner join: each of the join's
        arrangements' state name -> ``(its key columns' positions in the state's schema, a
        bucket key column first; that column's bucket key position)``, for the arrangements
        one of whose key columns is a table's bucket key column carried unchanged
        (``colmz.spark.lookups``); ``{}`` for any other view.

        >>> import pyarrow as pa
        >>> bucketed_view("SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
        ...               {"t": {"v": pa.int64(), "k": pa.int64()}, "u": {"k": pa.int64(), "w": pa.string()}}).join_leads()
        {'1.arrangements.0': ((0,), 0), '1.arrangements.1': ((1,), 0)}
        """
        if self.kind != "plan":
            return {}
        return dict(_join_leads(self))

    def group_leads(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """For a ``"plan"`` view: the arrangements of each min/max reduce over Map/Filters of
        a table whose first group column is a bucket key column carried unchanged, looked up
        by the groups its delta touches (``colmz.spark.lookups``): state name ->
        :class:`~colmz.spark.lookups.GroupLead`; ``{}`` for any other view.

        >>> import pyarrow as pa
        >>> bucketed_view("SELECT k, min(v) AS lo FROM t GROUP BY k",
        ...               {"t": {"v": pa.int64(), "k": pa.int64()}}).group_leads()
        {'1.arranged': ((0,), 0)}
        """
        if self.kind != "plan":
            return {}
        return dict(_group_leads(self))

    def members(self) -> tuple[tuple[str, "BucketedView"], ...]:
        """A ``"views"`` view's views, ``(name, view)`` each in the order given: each reads
        tables and the views before it (their outputs), each maintained and emitted
        (:func:`bucketed_views`)."""
        if self.kind != "views":
            raise ValueError(f"a {self.kind} view is one view; only a 'views' view has members()")
        return _members(self)

    def describe(self) -> dict:
        """The view as JSON-able data (kept in the state's record: a state opened with
        another view is refused)."""
        return {"kind": self.kind, "inputs": [[[c.name, str(c.type)] for c in s] for s in self.inputs],
                "keys": [list(k) for k in self.keys], "aggregates": [list(a) for a in self.aggregates],
                "on": [list(p) for p in self.on], "query": self.query, "tables": list(self.tables)}


@functools.lru_cache(maxsize=64)
def _staged(view: BucketedView):
    """``(the plan, its stages)`` of a ``"stages"`` view (``colmz.spark.stages``), once per
    process (each executor task steps one stage; planning costs a DuckDB parse)."""
    from colmz.dataflow.plan import plan

    if view.kind == "global":  # the stages of its reduce's input
        return lower_plan(view)
    p = plan(view.query, {t: {c.name: c.type for c in s} for t, s in zip(view.tables, view.inputs)})
    return p, plan_stages(p)


@functools.lru_cache(maxsize=64)
def _join_leads(view: BucketedView) -> tuple:
    from colmz.dataflow.plan import plan

    p = plan(view.query, {t: {c.name: c.type for c in s} for t, s in zip(view.tables, view.inputs)})
    return join_leads_of(p.root, view.operator(), view.keys, view.tables)


def join_leads_of(root, pipeline, keys, tables) -> tuple:
    """The lookup leads (``colmz.spark.lookups``) of the join below ``root``'s chain of
    one-input nodes, rendered in ``pipeline`` (an inner ``DeltaJoin`` or an ``OuterJoin``,
    whose lookups are those of its inner join's arrangements: it reads only the delta's
    keys), its inputs the tables named ``tables`` bucketed by ``keys``: ``((state name,
    (key positions, bucket key position)), ...)``, ``()`` without one join."""
    from colmz.dataflow.outer import OuterJoin
    from colmz.dataflow.plan import Join

    node = root
    while not isinstance(node, Join):
        if not node.inputs or len(node.inputs) != 1:
            return ()
        node = node.inputs[0]
    joins = [o for o in pipeline.operators if isinstance(o, (DeltaJoin, OuterJoin))]
    if len(joins) != 1:
        return ()
    found = operator_states_of(pipeline.operators)
    if found is None:
        return ()
    out = []
    for (j, key), arr in joins[0].arrangements.items():
        names = [c.name for c in arr.schema]
        carried = []
        for c in key:
            get, cols = _traced(node.inputs_[j], [c])
            if get is None or get.table not in tables:
                continue
            mine = keys[list(tables).index(get.table)]
            if cols[0] in mine:
                carried.append((c, mine.index(cols[0])))
        if not carried:
            continue
        first, position = carried[0]
        lead = (names.index(first), *(names.index(c) for c in key if c != first))
        st = next(x for x in found if x.target is arr)
        out.append((st.name, (lead, position)))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _group_leads(view: BucketedView) -> tuple:
    return group_leads_of(view.operator(), view.keys, view.tables)


def group_leads_of(pipeline, keys, tables) -> tuple:
    """The lookup leads (``colmz.spark.lookups.GroupLead``) of the min/max reduces of
    ``pipeline`` (alone or the min/max part of a reduce with accumulable aggregates too)
    over Map/Filters of one of the inputs named ``tables``, bucketed by ``keys``, whose
    first group column is that input's bucket key column, unchanged (not a float): each of its
    arrangements (keyed by the group first, in every plan) ``(state name, ((0,), bucket
    key position))``."""
    from colmz.dataflow.minmax import MinMaxReduce
    from colmz.dataflow.plan import Reduce
    from colmz.dataflow.render import CollatedReduce

    found = operator_states_of(pipeline.operators)
    if found is None:
        return ()
    out = []
    for _, node, op, _, _ in pipeline.steps():
        op = op.hierarchical if isinstance(op, CollatedReduce) else op
        if not isinstance(node, Reduce) or not isinstance(op, MinMaxReduce) or not op.group_by:
            continue
        get, cols = _traced(node.input, [op.group_by[0]])
        if get is None or get.table not in tables or cols[0] not in keys[list(tables).index(get.table)]:
            continue
        if pa.types.is_floating(op.input_schema[[c.name for c in op.input_schema].index(op.group_by[0])].type):
            continue  # -0.0 and 0.0 are one group a value lookup would tell apart: read whole
        position = keys[list(tables).index(get.table)].index(cols[0])
        for arr in op.arrangements.values():
            st = next((x for x in found if x.target is arr), None)
            if st is not None and arr.schema[0].name == op.group_by[0]:  # the group first
                out.append((st.name, GroupLead(((0,), position))))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _stage_group_leads(stage: "StageView") -> tuple:
    return group_leads_of(stage.operator(), stage.keys, [input_name(j) for j in range(len(stage.inputs))])


@functools.lru_cache(maxsize=64)
def _temporal_states(stage: "StageView") -> tuple[str, ...]:
    from colmz.dataflow.temporal import TemporalFilter as TemporalFilterOp

    ops = stage.operator().operators
    temporal = [str(i) for i, o in enumerate(ops) if isinstance(o, TemporalFilterOp)]
    found = operator_states_of(ops) or []
    return tuple(st.name for st in found if st.name.split(".", 1)[0] in temporal)


@functools.lru_cache(maxsize=64)
def _stage_join_leads(stage: "StageView") -> tuple:
    return join_leads_of(stage.stage.root, stage.operator(), stage.keys,
                         [input_name(j) for j in range(len(stage.inputs))])


@functools.lru_cache(maxsize=64)
def _members(view: BucketedView) -> tuple[tuple[str, BucketedView], ...]:
    schemas = {t: {c.name: c.type for c in s} for t, s in zip(view.tables, view.inputs)}
    out = []
    for name, query in json.loads(view.query):
        member = bucketed_view(query, {**schemas, **{n: {c.name: c.type for c in v.schema} for n, v in out}})
        out.append((name, member))
    return tuple(out)


@dataclass(frozen=True)
class StageView:
    """Stage ``index`` of a ``"stages"`` :class:`BucketedView` (``colmz.spark.stages``): its
    subtree of the plan rendered alone over its inputs -- tables, or a lower stage's output
    (columns ``c0, c1, ...``) --, each bucketed by ``keys`` (a ``"global"`` view's lower
    stages: those of its reduce's input, ``colmz.spark.global_agg``). Stepped per bucket as any view
    (:func:`step_bucket`); its state names are its operators' (the whole view names them
    ``"<index>:<name>"``)."""

    view: BucketedView
    index: int
    kind = "stage"

    @property
    def stage(self) -> Stage:
        return _staged(self.view)[1][self.index]

    @property
    def inputs(self) -> tuple[tuple[ColumnSpec, ...], ...]:
        return self.stage.inputs

    @property
    def keys(self) -> tuple[tuple[str, ...], ...]:
        return self.stage.keys

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        """Where each input's delta comes from: ``("table", name)`` or ``("stage", index)``."""
        return self.stage.sources

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        return self.stage.schema

    def operator(self):
        """The stage's rendered ``Pipeline`` (empty state)."""
        from colmz.dataflow.plan import render

        return render(stage_plan(_staged(self.view)[0], self.stage))

    def operators(self, op) -> list:
        return op.operators

    def step(self, op, time: int, deltas: Sequence) -> colmz.Updates:
        out = op.step(time, {input_name(j): d for j, d in enumerate(deltas)})
        return out.rename([c.name for c in self.schema])

    def temporal_states(self) -> tuple[str, ...]:
        """The names of the stage's temporal filter's states (its flips still to come,
        ``colmz.dataflow.temporal``): a bucket holding them steps at every step."""
        return _temporal_states(self)

    def join_leads(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """The stage's join's arrangements looked up by its delta's keys
        (:meth:`BucketedView.join_leads`: an inner or outer join below the stage's one-input
        operators; ``{}`` for none)."""
        return dict(_stage_join_leads(self))

    def group_leads(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """The stage's min/max reduces' arrangements looked up by the groups its delta
        touches (:meth:`BucketedView.group_leads`; ``{}`` for none)."""
        return dict(_stage_group_leads(self))

    def states(self) -> tuple[tuple[str, tuple[ColumnSpec, ...]], ...]:
        found = operator_states_of(self.operators(self.operator()))
        if found is None:
            raise ValueError(f"stage {self.index} holds state colmz.dataflow.state does not export: "
                             "it cannot be bucketed")
        return tuple((st.name, st.schema) for st in found)


def sum_view(schema, group_by: Sequence[str], aggregates: Mapping) -> BucketedView:
    """``SELECT group_by..., aggregates FROM input GROUP BY group_by`` bucketed by the group
    key; ``aggregates`` maps output names to ``colmz.dataflow`` accumulable aggregates
    (``Sum("v")``, ``Count()``, ``Avg("v")``, ...).

    >>> import pyarrow as pa
    >>> from colmz.dataflow import Count, Sum
    >>> v = sum_view({"k": pa.int64(), "v": pa.int64()}, ["k"], {"s": Sum("v"), "c": Count()})
    >>> [c.name for c in v.schema]
    ['k', 's', 'c']
    """
    schema = schema_of(schema)
    if isinstance(group_by, str) or not group_by:
        raise ValueError(f"group_by must name at least one column (a global aggregate has one bucket), "
                         f"got {group_by!r}")
    aggs = []
    for name, a in dict(aggregates).items():
        if type(a).__name__ not in _AGGREGATES or type(a) is not _AGGREGATES[type(a).__name__]:
            raise TypeError(f"aggregates[{name!r}] must be an accumulable aggregate of colmz.dataflow "
                            f"({sorted(_AGGREGATES)}), got {a!r}")
        aggs.append((name, type(a).__name__, a.column))
    view = BucketedView("sum", (schema,), (tuple(group_by),), tuple(aggs))
    view.operator()  # checks the columns and types once, here
    return view


def join_view(left, right, on: Sequence[tuple[str, str]]) -> BucketedView:
    """``SELECT * FROM left JOIN right ON left.a = right.b AND ...`` bucketed by the join
    key (every pair of ``on``; columns distinct across the inputs, as ``DeltaJoin`` takes
    them).

    >>> import pyarrow as pa
    >>> v = join_view({"tk": pa.int64(), "v": pa.int64()}, {"uk": pa.int64(), "w": pa.string()}, [("tk", "uk")])
    >>> v.keys
    (('tk',), ('uk',))
    """
    left, right = schema_of(left), schema_of(right)
    pairs = tuple((a, b) for a, b in on)
    if not pairs:
        raise ValueError("on must equate at least one pair of columns (a cross join cannot be bucketed)")
    lnames, rnames = {c.name for c in left}, {c.name for c in right}
    for a, b in pairs:
        if a not in lnames or b not in rnames:
            raise ValueError(f"on pair ({a!r}, {b!r}) must name a column of left, then one of right")
    view = BucketedView("join", (left, right), (tuple(a for a, _ in pairs), tuple(b for _, b in pairs)),
                        on=pairs)
    view.operator()
    return view


def bucketed_view(query: str, schemas: Mapping) -> BucketedView:
    """The :class:`BucketedView` of a view's SQL over tables ``schemas`` (as
    :func:`colmz.dataflow.plan.plan` takes them): a keyed stateful operator over tables --
    over one table a ``GROUP BY``, a ``DISTINCT``, a top-k per group or a window function
    with ``PARTITION BY``; or an inner equi-join of two tables (a residual predicate
    allowed) --, Map/Filters (native or through SQL) anywhere, and above it more keyed
    operators.
    Each table is bucketed by the columns that carry the lowest operator's key unchanged
    into every stateful operator's key (the module docstring). When none remains -- the
    operators are keyed differently, or a key is computed, or a table is read twice --
    the view is a ``"stages"`` one (``colmz.spark.stages``): each stage bucketed by its own
    key, the output of one re-bucketed as the next one's input; outer joins, unions and set
    operations run in stages too; views given as CTEs are inlined into one dataflow (to keep
    and emit each view, give them to :func:`bucketed_views`). A global aggregate of
    accumulable aggregates and ``min``/``max`` is a ``"global"`` view
    (``colmz.spark.global_agg``), its input Map/Filters of one table or stages. A temporal filter makes a ``"stages"`` view (its
    buckets step when a flip comes due). Any other plan (another operator keyed
    by nothing, a constant, a recomputed subquery) is refused with its ``EXPLAIN``. The delta DataFrames
    carry the tables' own columns, one per table in the order the plan reads them
    (:attr:`BucketedView.tables`).

    >>> import pyarrow as pa
    >>> v = bucketed_view("SELECT k, sum(v) AS s, count(*) AS c FROM t WHERE v > 0 GROUP BY k",
    ...                   {"t": {"k": pa.int64(), "v": pa.int64()}})
    >>> v.kind, v.tables, v.keys, [c.name for c in v.schema]
    ('plan', ('t',), (('k',),), ['k', 's', 'c'])
    """
    from colmz.dataflow.plan import Get, plan

    if not isinstance(query, str):
        raise TypeError(f"query must be SQL text, got {type(query).__name__}")
    p = plan(query, schemas)
    preface = ("bucketed_view takes keyed stateful operators (a GROUP BY, DISTINCT, set operation, top-k per "
               "group or partitioned window, an equi-join), unions and Map/Filters over tables, each stage "
               "bucketed by its operators' key; ")

    def refuse(why: str):
        return ValueError(f"{preface}this plan {why}:\n{p.explain()}")

    try:
        glob = global_parts(p)
    except ValueError as e:
        raise refuse(str(e)) from None
    if glob is not None:  # per-bucket partials, then one final bucket (colmz.spark.global_agg)
        tables = (glob.get.table,) if glob.get is not None else tuple(p.tables)
        view = BucketedView("global", tuple(schema_of(p.tables[t]) for t in tables), (), query=query, tables=tables)
        try:
            view.states()
        except ValueError as e:
            raise refuse(f"does not render into exported state ({e})") from e
        return view
    try:
        return _one_stage(query, p, refuse)
    except ValueError as one:
        if isinstance(_below_mapfilters(p.root), Get):
            raise  # no stateful operator at all: nothing to bucket
        single = one
    # Operators keyed differently: stages, each re-bucketed by its own key (colmz.spark.stages).
    try:
        plan_stages(p)
    except StageError as e:
        raise ValueError(f"{preface}this plan {e}") from single
    view = BucketedView("stages", tuple(schema_of(s) for s in p.tables.values()), (), query=query,
                        tables=tuple(p.tables))
    try:
        view.states()
    except ValueError as e:
        raise refuse(f"does not render into exported state ({e})") from e
    return view


def bucketed_views(views: Mapping[str, str], schemas: Mapping) -> BucketedView:
    """Several views, each a view's SQL over tables ``schemas`` and the views given before it
    (by name), as one ``"views"`` :class:`BucketedView`: each view is its own dataflow
    (:func:`bucketed_view`), its output delta both emitted and fed to the views reading it,
    as a catalog keeps a view over a view. :func:`step_buckets` steps them in the order
    given and returns each view's output delta by name; every view's state is committed in
    the one compare-and-set (names ``"<index>.<name>"``, :meth:`BucketedView.states`). The
    delta DataFrames are the tables' (:attr:`BucketedView.tables`, in the order the views
    first read them).

    >>> import pyarrow as pa
    >>> v = bucketed_views({"m": "SELECT k, sum(v) AS s FROM t GROUP BY k",
    ...                     "n": "SELECT s, count(*) AS c FROM m GROUP BY s"}, {"t": {"k": pa.int64(), "v": pa.int64()}})
    >>> v.tables, [(n, m.kind, m.tables) for n, m in v.members()]
    (('t',), [('m', 'plan', ('t',)), ('n', 'plan', ('m',))])
    """
    if not isinstance(views, Mapping) or not views:
        raise ValueError(f"views must map view names to SQL, at least one, got {views!r}")
    known = {t: schema_of(s) for t, s in schemas.items()}
    made, tables = [], []
    for name, query in views.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"a view's name must be a non-empty str, got {name!r}")
        if name in known:
            raise ValueError(f"view {name!r} has the name of a table or of a view given before it")
        try:
            member = bucketed_view(query, known)
        except ValueError as e:
            raise ValueError(f"view {name!r} (each view reads tables and the views given before it): {e}") from e
        tables.extend(t for t in member.tables if t in schemas and t not in tables)
        known[name] = member.schema
        made.append([name, query])
    return BucketedView("views", tuple(known[t] for t in tables), (), query=json.dumps(made), tables=tuple(tables))


def _one_stage(query: str, p, refuse) -> BucketedView:
    """The ``"plan"`` view of ``p`` when its operators are all bucketed by one key over
    distinct tables (``refuse(why)`` raised otherwise)."""
    from colmz.dataflow.plan import Get, Join

    # The stateful operators from the root down: upper ones (a Reduce with GROUP BY, a
    # Distinct) over one input each, then the lowest, whose inputs are Map/Filters over tables.
    uppers, node = [], p.root
    while True:
        node = _below_mapfilters(node)
        key = _keyed(node)
        if key == []:
            raise refuse(f"has a {type(node).__name__} keyed by nothing (a global aggregate, a LIMIT over all "
                         "rows, a window without PARTITION BY: one bucket)")
        if key is not None and not isinstance(_below_mapfilters(node.input), Get):
            uppers.append(node)
            node = node.input
            continue
        break
    if key is not None:
        branches, keys, names = [node.input], [key], [{c} for c in key]
    elif isinstance(node, Join):
        if node.kind != "inner" or len(node.inputs_) != 2:
            raise refuse("joins other than two inputs by an inner join")
        branches = list(node.inputs_)
        first = {c.name for c in branches[0].schema}
        pairs = [(a, b) if a in first else (b, a) for a, b in node.on]
        if not pairs:
            raise refuse("joins without an equality (a cross join cannot be bucketed)")
        keys, names = [[a for a, _ in pairs], [b for _, b in pairs]], [{a, b} for a, b in pairs]
    else:
        raise refuse(f"has a {type(node).__name__} where its stateful operator goes")
    gets, traced = [], []
    for branch, key in zip(branches, keys):
        get, cols = _traced(branch, key)
        if get is None:
            raise refuse(f"reads a {type(cols).__name__} below its stateful operator, not Map/Filters over a table")
        gets.append(get)
        traced.append(cols)
    if len({g.table for g in gets}) != len(gets):
        raise refuse(f"reads table {gets[0].table!r} twice (each input is bucketed by its own key)")
    keep = [j for j in range(len(keys[0])) if all(t[j] is not None for t in traced)]
    # An operator above the lowest keeps a bucket key position when its own key carries one
    # of that position's columns unchanged down to the lowest's output.
    for upper in uppers:
        below = set(_carried(upper.input, _keyed(upper), node))
        keep = [j for j in keep if names[j] & below]
    if not keep:
        raise refuse("has no key column a table carries unchanged to every stateful operator")
    tables = tuple(g.table for g in gets)
    view = BucketedView("plan", tuple(schema_of(p.tables[t]) for t in tables),
                        tuple(tuple(t[j] for j in keep) for t in traced), query=query, tables=tables)
    try:
        view.states()
    except ValueError as e:
        raise refuse(f"does not render into exported state ({e})") from e
    return view


def _below_mapfilters(node):
    """The first node below ``node``'s Map/Filters (``node`` itself when it is none)."""
    from colmz.dataflow.plan import MapFilter
    from colmz.dataflow.plan_nodes import SqlMapFilter

    while isinstance(node, (MapFilter, SqlMapFilter)):
        node = node.input
    return node


def _keyed(node) -> list | None:
    """The key of a keyed stateful plan node over one input -- a reduce's group columns
    (accumulable, min/max or basic), a distinct's every column, a top-k's or window's
    partition -- as columns of its input (``[]``: keyed by nothing); ``None`` for any other
    node."""
    from colmz.dataflow.plan import Reduce
    from colmz.dataflow.plan_nodes import Distinct, GroupSql, TopK

    if isinstance(node, (Reduce, TopK)):
        return list(node.group_by)
    if isinstance(node, Distinct):
        return [c.name for c in node.input.schema]
    if isinstance(node, GroupSql):
        return list(node.key)
    return None


def _carried(node, cols: list, lowest) -> list:
    """Which of ``cols`` (columns of ``node``'s output) reach ``lowest``'s output unchanged,
    as its column names: through Map/Filters and the key columns of keyed nodes (each keeps
    its key columns' names; a distinct's are every column)."""
    cols = list(cols)
    while node is not lowest:
        cols, node = _traced(node, cols, stop_at_get=False)
        if node is lowest:
            break
        key = set(_keyed(node))
        cols = [c if c in key and c in {x.name for x in node.schema} else None for c in cols]
        node = node.input
    return [c for c in cols if c is not None]


def _traced(node, cols: list, stop_at_get: bool = True):
    """``(the Get below node, each of cols as that table's column or None when computed)``
    through Map/Filters; ``(None, node)`` at anything else. With ``stop_at_get`` false:
    ``(each of cols as a column of the first node below the Map/Filters, that node)``."""
    from colmz.dataflow.plan import Get, MapFilter
    from colmz.dataflow.plan_nodes import SqlMapFilter
    from colmz.dataflow.sqlmap import placeholder

    cols = list(cols)
    while True:
        if not stop_at_get and not isinstance(node, (MapFilter, SqlMapFilter)):
            return cols, node
        if isinstance(node, Get):
            raw = {q: c for c, q in node.columns}
            return node, [raw.get(c) if c is not None else None for c in cols]
        if isinstance(node, MapFilter):
            if node.select is not None:
                src = {n: s for s, n in node.select}
                cols = [src.get(c) if c is not None else None for c in cols]
        elif isinstance(node, SqlMapFilter):
            if node.select is not None:
                # a column kept as is: its text is the placeholder of an input column
                inputs = {placeholder(i): c.name for i, c in enumerate(node.input.schema)}
                src = {n: inputs.get(text) for text, n in node.select}
                cols = [src.get(c) if c is not None else None for c in cols]
        else:
            return None, node
        node = node.input


def step_bucket(view: BucketedView, state: Mapping | None, state_time, deltas: Sequence, time: int):
    """One step of ``view``'s operator over one bucket: ``(output, state_delta)``.

    ``state`` maps each of :meth:`BucketedView.states`'s names to its collection as of
    ``state_time`` (a name left out: empty; ``None`` and ``state_time`` ``None`` before the
    first step); ``deltas`` are the inputs' updates, all moved to ``time``. The operator is
    restored from ``state`` (its accumulators or arrangements filled as they are: no step
    over the state runs), stepped, and ``state_delta`` maps each state name to its
    collection's change at ``time`` (a sum view's changed groups, each old row retracted and
    new row inserted; a join view's joinable input rows). Pure: nothing is kept.

    >>> import colmz, pyarrow as pa
    >>> from colmz.dataflow import Sum
    >>> v = sum_view({"k": pa.int64(), "v": pa.int64()}, ["k"], {"s": Sum("v")})
    >>> out, st = step_bucket(v, None, None, [colmz.Updates({"k": [1, 1], "v": [5, 7]}, time=[1, 1], diff=[1, 1])], 1)
    >>> st["0.state"].to_pylist()   # group 1: 2 rows, 2 values, sum 12
    [(1, 2, 2, 12, 1, 1)]
    >>> out, delta = step_bucket(v, st, 1, [colmz.Updates({"k": [1], "v": [5]}, time=[2], diff=[-1])], 2)
    >>> out.to_pylist()
    [(1, 7, 2, 1), (1, 12, 2, -1)]
    >>> delta["0.state"].to_pylist()
    [(1, 2, 2, 12, 2, -1), (1, 1, 1, 7, 2, 1)]
    """
    time = check_time(time, "time")
    if view.kind == "views":
        raise ValueError("a 'views' view is several views: step each of view.members() (their stages) per bucket")
    if view.kind in ("stages", "global"):
        raise ValueError("a view of several stages is bucketed by another key in each stage: step each of "
                         "view.stages() per bucket, its inputs the tables' or the stage below's outputs")
    if len(deltas) != len(view.inputs):
        raise ValueError(f"a step of this {view.kind} view takes {len(view.inputs)} deltas, got {len(deltas)}")
    op = view.operator()
    ops = view.operators(op)
    found = operator_states_of(ops)
    if found is None:
        view.states()  # raises, naming why
    state = dict(state or {})
    unknown = sorted(set(state) - {st.name for st in found})
    if unknown:
        raise ValueError(f"state names {unknown}, which the {view.kind} view's operator does not hold "
                         f"(it holds {[st.name for st in found]})")
    if state_time is None:
        if any(len(u) for u in state.values()):
            raise ValueError("state holds rows but state_time is None (the state before the first step is empty)")
        marks = {st.name: () for st in found}
    else:
        state_time = check_time(state_time, "state_time")
        if state_time >= time:
            raise ValueError(f"time {time} is not after the state's time {state_time}")
        restore_operators(ops, {st.name: state.get(st.name, colmz.Updates.empty(st.schema)) for st in found},
                          state_time)
        marks = {st.name: st.marks() for st in found}
    out = view.step(op, time, [at_time(d, time) for d in deltas])
    return out, {st.name: st.delta(marks[st.name], time) for st in found}


# ----------------------------------------------------------------------------- durable state


class BucketState:
    """The durable state of a :class:`BucketedView`: runs of parts per bucket and input,
    named by one consensus record (see the module docstring).

    Open with :meth:`open`; :attr:`time` is the last committed step's time (``None``
    before the first), :attr:`seqno` the record version read, :meth:`runs` the runs of a
    bucket's state collection and :meth:`contents` its consolidated contents (read in this
    process). :attr:`rows_read` and :attr:`buckets_stepped` are work counters: the state
    rows the tasks of the last :func:`step_buckets` through this handle read, and the
    bucket tasks it ran (over all stages and views; ``None`` before one).
    """

    def __init__(self, url: str, consensus, name: str, view: BucketedView, buckets: int, head):
        self.url = url
        self.name = name
        self.view = view
        self.buckets = buckets
        self._consensus = consensus
        self.seqno = None if head is None else head.seqno
        record = None if head is None else json.loads(head.data)
        self.time = None if record is None else record["time"]
        self.rows_read: int | None = None
        self.buckets_stepped: int | None = None
        self._runs = {} if record is None else {k: [WrittenRun.from_dict(r) for r in v]
                                                for k, v in record["runs"].items()}
        # Whether a join view's arrangements are stored key columns first, each part's key
        # bounds recorded (colmz.spark.lookups): every record since, never one written before.
        stored = None if record is None else record.get("stored")
        self.key_first = record is None or stored in (KEY_FIRST, KEY_FIRST_STAGES)
        # Whether the joins inside stages are stored key columns first (KEY_FIRST_STAGES).
        self.stage_lookups = record is None or stored == KEY_FIRST_STAGES
        self._bounds: dict[str, list] = {} if record is None else dict(record.get("bounds", {}))
        # Per "<bucket>/<stage names>" of a stage holding a temporal filter's flips: the
        # time of its next flip, None for none (a record written before keeps none: its
        # buckets holding flips step at every step until their tasks report one).
        self._due: dict[str, int | None] = {} if record is None else dict(record.get("due", {}))

    @property
    def key(self) -> str:
        """The consensus key of the record."""
        return f"{self.name}/state"

    @property
    def prefix(self) -> str:
        """Where the state's parts are written."""
        return f"{self.name}/parts/"

    @classmethod
    def open(cls, url: str, view: BucketedView, buckets: int, *, name: str = "view",
             consensus: str | None = None) -> "BucketState":
        """The state of ``view`` at ``url`` (a directory, ``mem://`` or ``s3://`` with
        ``consensus=``), ``buckets`` buckets; a new one when there is none (nothing is
        written until the first commit). A state of another view or bucket count is refused
        (``ValueError`` naming both)."""
        if not isinstance(view, BucketedView):
            raise TypeError(f"view must be a BucketedView (sum_view, join_view), got {type(view).__name__}")
        if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
            raise ValueError(f"buckets must be a positive int, got {buckets!r}")
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"name must be a non-empty name without '/', got {name!r}")
        if isinstance(url, Location):  # a store opened already (a fault-injecting wrapper's)
            if consensus is not None:
                raise ValueError("give consensus= with a URL, not with an opened Location")
            loc = url
        else:
            loc = open_location(url, consensus=consensus)
        head = loc.consensus.head(f"{name}/state")
        if head is not None:
            record = json.loads(head.data)
            layout = record.get("layout", INTEGRATED_LAYOUT)
            if layout != LAYOUT:
                raise BucketStateLayoutError(
                    f"the state {name!r} at {url!r} is in the layout {layout!r}"
                    + (" (each input's integrated rows per bucket)" if layout == INTEGRATED_LAYOUT else "")
                    + f", not {LAYOUT!r} (the operators' own state per bucket)"
                    + (": convert it once with colmz.spark.views.convert_state" if layout == INTEGRATED_LAYOUT
                       else ""))
            if record["view"] != view.describe() or record["buckets"] != buckets:
                raise ValueError(f"the state {name!r} at {url!r} is of view {record['view']} with "
                                 f"{record['buckets']} buckets, not {view.describe()} with {buckets}")
        return cls(loc.url, loc.consensus, name, view, buckets, head)

    def runs(self, bucket: int, state: str) -> list[WrittenRun]:
        """The runs holding the state collection ``state`` (a name of
        :meth:`BucketedView.states`) in ``bucket``."""
        return list(self._runs.get(f"{bucket}/{state}", ()))

    def contents(self, bucket: int, state: str) -> colmz.Updates:
        """The state collection ``state``'s consolidated contents in ``bucket`` (read here,
        every part checked)."""
        schemas = dict(self.view.states())
        if state not in schemas:
            raise ValueError(f"state must name one of the view's states {list(schemas)}, got {state!r}")
        lead = lead_columns(self.view, stages=self.stage_lookups).get(state) if self.key_first else None
        parts = [p for r in self.runs(bucket, state) for p in r.parts]
        if lead is None:
            return _read_state(open_blob(self.url), schemas[state], parts, self.time)
        return from_stored(_read_state(open_blob(self.url), stored_schema(schemas[state], lead[0]), parts, self.time),
                           schemas[state])

    def due_buckets(self, names: str, temporal: Sequence[str], time: int) -> list[int]:
        """The buckets of the stage whose states are named ``names`` + a name, whose
        temporal filter states ``temporal`` hold a flip due at or before ``time`` (a bucket
        holding their runs whose task never reported its next flip: due)."""
        held = {names + n for n in temporal}
        out = set()
        for k in self._runs:
            b, name = k.split("/", 1)
            if name in held:
                key = f"{b}/{names}"
                if key not in self._due or (self._due[key] is not None and self._due[key] <= time):
                    out.add(int(b))
        return sorted(out)

    def referenced(self) -> set[str]:
        """Every part key the record names."""
        return {k for runs in self._runs.values() for r in runs for k in r.keys}

    def _commit(self, time: int, written: Mapping[str, tuple[WrittenRun | None, bool]],
                bounds: Mapping[str, list] | None = None, due: Mapping[str, int | None] | None = None) -> None:
        """One compare-and-set of the record from :attr:`seqno`: ``time`` and, per
        ``"bucket/input"``, its new run (``replace``: instead of the old runs); ``bounds``
        the new parts' key bounds (``colmz.spark.lookups``); ``due`` per ``"<bucket>/<stage
        names>"`` its temporal filter's next flip (``None``: none held)."""
        runs = {k: list(v) for k, v in self._runs.items()}
        for k, (run, replace) in written.items():
            old = [] if replace else runs.get(k, [])
            runs[k] = old + ([run] if run is not None else [])
            if not runs[k]:
                del runs[k]
        keys = {k for v in runs.values() for r in v for k in r.keys}
        kept = {k: b for k, b in {**self._bounds, **(bounds or {})}.items() if k in keys}
        record = {"layout": LAYOUT, "view": self.view.describe(), "buckets": self.buckets, "time": time,
                  "runs": {k: [r.to_dict() for r in v] for k, v in sorted(runs.items())}}
        if self.key_first:
            record["stored"] = KEY_FIRST_STAGES if self.stage_lookups else KEY_FIRST
            record["bounds"] = dict(sorted(kept.items()))
        # each bucket's next flip as its last task reported it (None: it holds none, though
        # its runs may be left until a compaction drops them)
        nexts = {**self._due, **(due or {})}
        if nexts:
            record["due"] = dict(sorted(nexts.items()))
        seqno = 1 if self.seqno is None else self.seqno + 1
        data = json.dumps(record).encode()
        try:
            landed = self._consensus.compare_and_set(self.key, self.seqno, VersionedData(seqno, data))
        except Indeterminate as e:
            # The request may have landed: the head says. When it cannot be read the outcome
            # stays unknown and an Indeterminate goes to the caller, which keeps the parts.
            try:
                head = self._consensus.head(self.key)
            except Exception as read_error:  # noqa: BLE001 - any failure leaves the outcome unknown
                raise Indeterminate(f"the commit of state {self.name!r} may or may not have landed "
                                    f"({e}); reading it back failed: {read_error}") from read_error
            if head is not None and head.seqno == seqno and bytes(head.data) == data:
                landed = True
            elif (head.seqno if head is not None else None) == self.seqno:
                raise RuntimeError(f"the commit of state {self.name!r} did not land ({e}): nothing "
                                   "committed") from e
            else:
                landed = False
        if not landed:
            raise BucketStateConflict(f"the state {self.name!r} at {self.url!r} was committed by another "
                                      f"writer since version {self.seqno}: nothing committed (open it again)")
        self.seqno, self.time, self._runs = seqno, time, runs
        self._bounds, self._due = kept, nexts


def convert_state(url: str, view: BucketedView, buckets: int, *, name: str = "view",
                  consensus: str | None = None, owner: str | None = None) -> BucketState:
    """Convert a state of the first layout (:data:`INTEGRATED_LAYOUT`: each input's rows per
    bucket) to :data:`LAYOUT` in this process, once: per bucket, the operator is stepped
    over the inputs' rows at the record's time and its state collections written as one run
    each; one compare-and-set of the record from the version read replaces the old runs
    (whose parts are deleted after it). The time, the view and the outputs of later steps
    are unchanged. A state in :data:`LAYOUT` already is returned as it is; a state of
    another view or bucket count is refused (``ValueError``). A failure (a lost
    compare-and-set: :class:`BucketStateConflict`) commits nothing and deletes the parts
    written. Costs the whole state, read once. A state :func:`bucketed_view` made from SQL
    in the first layout (its view naming columns and a projection) is refused with
    :class:`BucketStateLayoutError`: such views are ``"plan"`` views now.
    """
    if not isinstance(view, BucketedView):
        raise TypeError(f"view must be a BucketedView (sum_view, join_view), got {type(view).__name__}")
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"buckets must be a positive int, got {buckets!r}")
    try:
        return BucketState.open(url, view, buckets, name=name, consensus=consensus)
    except BucketStateLayoutError:
        pass
    loc = url if isinstance(url, Location) else open_location(url, consensus=consensus)
    head = loc.consensus.head(f"{name}/state")
    record = json.loads(head.data)
    if record.get("layout", INTEGRATED_LAYOUT) != INTEGRATED_LAYOUT:
        raise BucketStateLayoutError(f"the state {name!r} at {loc.url!r} is in the layout {record['layout']!r}, "
                                     f"which convert_state does not read (it reads {INTEGRATED_LAYOUT!r})")
    if record["view"].get("names") or record["view"].get("project"):
        raise BucketStateLayoutError(
            f"the state {name!r} at {loc.url!r} is of a view bucketed_view made from SQL in the "
            f"{INTEGRATED_LAYOUT!r} layout (its view names columns {record['view'].get('names')} and projects "
            f"{record['view'].get('project')}); bucketed_view now makes a 'plan' view, whose state convert_state "
            "does not derive from it: build the state again from the tables")
    if record["view"] != view.describe() or record["buckets"] != buckets:
        raise ValueError(f"the state {name!r} at {loc.url!r} is of view {record['view']} with "
                         f"{record['buckets']} buckets, not {view.describe()} with {buckets}")
    old = {k: [WrittenRun.from_dict(r) for r in v] for k, v in record["runs"].items()}
    # A BucketState of the new layout over the old record's version: its commit is the
    # compare-and-set from that version, naming only the new runs.
    state = BucketState(loc.url, loc.consensus, name, view, buckets, None)
    state.seqno, state.time = head.seqno, record["time"]
    owner = owner or uuid.uuid4().hex
    blob = loc.blob
    written, bounds = {}, {}
    try:
        for b in sorted({int(k.split("/")[0]) for k in old}):
            inputs = [at_time(_read_state(blob, schema, [p for r in old.get(f"{b}/{i}", ()) for p in r.parts],
                                          state.time), state.time)
                      for i, schema in enumerate(view.inputs)]
            _, states = step_bucket(view, None, None, inputs, state.time)
            for st, schema in view.states():
                run, found = write_state_run(blob, view, st, schema, states[st], state.key_first,
                                             prefix=state.prefix, owner=owner, stages=state.stage_lookups)
                if run is not None:
                    written[f"{b}/{st}"] = (run, True)
                    bounds.update(found)
        state._commit(state.time, written, bounds)
    except Indeterminate:
        raise
    except BaseException:
        discard_owned(blob, state.prefix, owner, {k for runs in old.values() for r in runs for k in r.keys})
        raise
    for k in {k for runs in old.values() for r in runs for k in r.keys} - state.referenced():
        with contextlib.suppress(Exception):  # best effort: an unreferenced part is garbage only
            blob.delete(k)
    return state


def write_state_run(blob, view, name: str, schema, u: colmz.Updates, key_first: bool, *, prefix: str,
                    owner: str, part_rows: int = STATE_PART_ROWS, stages: bool = True) -> tuple[WrittenRun | None, dict]:
    """Write state collection ``name``'s updates ``u`` as one run: ``(the run or None, its
    parts' key bounds)``. A join view's arrangements, with ``key_first`` (the record's
    ``stored`` field), are written key columns first in parts of ``part_rows`` rows and
    their bounds read back (``colmz.spark.lookups``; ``stages``: a stage's join's too); any
    other collection as it is."""
    lead = lead_columns(view, stages=stages).get(name) if key_first else None
    if lead is None:
        return write_run(blob, schema, u, prefix=prefix, owner=owner), {}
    run = write_run(blob, stored_schema(schema, lead[0]), to_stored(u, lead[0]), prefix=prefix, owner=owner,
                    part_rows=part_rows)
    return run, ({} if run is None else part_bounds(blob, run))


def _read_state(blob, schema, parts, time) -> colmz.Updates:
    if not parts:
        return colmz.Updates.empty(schema)
    return colmz.consolidate(colmz.concat(read_blob_parts(blob, parts, schema)), since=time)


# ----------------------------------------------------------------------------- Spark


def _bucketed(df, view: BucketedView, i: int, buckets: int, label: str | None = None):
    """Input ``i``'s delta DataFrame with its bucket column (join keys cast to the first
    input's types, so equal keys hash equally); ``label`` names it in an error."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    cols = []
    for k, k0 in zip(view.keys[i], view.keys[0]):
        t0 = next(c.type for c in view.inputs[0] if c.name == k0)
        cols.append(F.col(k).cast(from_arrow_type(t0)))
    names = [c.name for c in view.inputs[i]]
    missing = [n for n in (*names, "time", "diff") if n not in df.columns]
    if missing:
        raise ValueError(f"{label or f'deltas[{i}]'} lacks columns {missing} (it needs {names} + time, diff)")
    bucket = F.pmod(F.xxhash64(*cols), F.lit(buckets)) if cols else F.lit(0).cast("long")
    return df.select(*names, "time", "diff").withColumn(_BUCKET, bucket)


def _with_zero_rows(spark, frame, stage, time: int, buckets: Sequence[int]):
    """``frame`` (a stage's first input) and, per bucket of ``buckets``, one row of zeros at
    diff 0 in that bucket, so the bucket's task runs at this step, touched or not (the task
    consolidates the row away)."""
    n = len(buckets)
    zeros = {c.name: pa.array([0] * n, c.type) if pa.types.is_integer(c.type) or pa.types.is_floating(c.type)
             else pa.nulls(n, c.type) for c in stage.inputs[0]}
    row = pa.table({**zeros, "time": pa.array([time] * n, pa.int64()), "diff": pa.array([0] * n, pa.int64()),
                    _BUCKET: pa.array(list(buckets), pa.int64())})
    return frame.unionByName(spark.createDataFrame(row.to_pandas(), frame.schema))


def _updates_of(table: pa.Table, schema) -> colmz.Updates:
    cols = {c.name: table.column(c.name).cast(c.type) for c in schema}
    return colmz.Updates(cols, table.column("time").cast(pa.uint64()), table.column("diff"))


def step_buckets(spark, state: BucketState, deltas: Sequence, time: int, *, owner: str | None = None,
                 compact_runs: int = COMPACT_RUNS, part_rows: int = STATE_PART_ROWS) -> colmz.Updates:
    """Step ``state``'s view at ``time`` with ``deltas`` (one DataFrame per input: its data
    columns, ``time`` and ``diff``; every row is taken at ``time``), each touched bucket on
    an executor; commit the new state in one compare-and-set and return the view's output
    delta (collected to the driver).

    Raises ``ValueError`` for a ``time`` not after the committed one; whatever a task raises
    (``colmz.errors.NegativeMultiplicity`` for a retraction of rows a bucket does not hold,
    an overflow) and :class:`BucketStateConflict` leave the committed state as it was, the
    step's parts deleted. ``owner`` (letters and digits) tags the parts the step writes;
    a bucket input reaching ``compact_runs`` runs is written whole as one. A join view's
    tasks read only the arranged rows of the keys their delta touches, its runs written in
    parts of ``part_rows`` rows (``colmz.spark.lookups``).
    """
    view = state.view
    time = check_time(time, "time")
    if state.time is not None and time <= state.time:
        raise ValueError(f"time {time} is not after the state's committed time {state.time}")
    if len(deltas) != len(view.inputs):
        raise ValueError(f"a step of this {view.kind} view takes {len(view.inputs)} delta DataFrames, got {len(deltas)}")
    if isinstance(compact_runs, bool) or not isinstance(compact_runs, int) or compact_runs < 1:
        raise ValueError(f"compact_runs must be a positive int, got {compact_runs!r}")
    if owner is not None and (not isinstance(owner, str) or not owner.isascii() or not owner.isalnum()):
        raise ValueError(f"owner must be letters and digits, got {owner!r}")
    if isinstance(part_rows, bool) or not isinstance(part_rows, int) or part_rows < 1:
        raise ValueError(f"part_rows must be a positive int, got {part_rows!r}")
    owner = owner or uuid.uuid4().hex
    parts = {k: [list(p) for r in v for p in r.parts] for k, v in state._runs.items()}
    nruns = {k: len(v) for k, v in state._runs.items()}
    run = functools.partial(_step_view, spark, state, time=time, owner=owner, compact_runs=compact_runs,
                            part_rows=part_rows, parts=parts, nruns=nruns)
    try:
        reports, outputs, several = _Reports(), {}, False
        if view.kind == "views":
            frames = dict(zip(view.tables, deltas))
            for m, (name, member) in enumerate(view.members()):
                ins = [frames[t] if t in frames else _frame_of(spark, outputs[t], member.inputs[j])
                       for j, t in enumerate(member.tables)]
                outputs[name], more = run(member, ins, reports, prefix=f"{m}.")
                several = several or more
        else:
            out, several = run(view, list(deltas), reports)
        dropped = state.referenced()
        state._commit(time, reports.written, reports.bounds, reports.due)
        state.rows_read, state.buckets_stepped = reports.rows_read, reports.stepped
    except Indeterminate:
        raise  # the record may name the step's parts: they stay (unreferenced ones are garbage)
    except BaseException:
        discard_owned(open_blob(state.url), state.prefix, owner, state.referenced())
        raise
    # Committed. The runs a compaction replaced are named by no record from here on, nor
    # are the parts of a stage's task Spark ran again (its runs reported once).
    blob = open_blob(state.url)
    for k in dropped - state.referenced():
        with contextlib.suppress(Exception):  # best effort: an unreferenced part is garbage only
            blob.delete(k)
    if several:
        with contextlib.suppress(Exception):
            discard_owned(blob, state.prefix, owner, state.referenced())
    return outputs if view.kind == "views" else out


def _frame_of(spark, u: colmz.Updates, schema):
    """A view's output delta ``u`` as the delta DataFrame of a view reading it."""
    table = pa.table({**{c.name: u.column(c.name) for c in schema},
                      "time": pa.array(np.asarray(u.time, np.int64)), "diff": pa.array(np.asarray(u.diff, np.int64))})
    return spark.createDataFrame(table)


@dataclass
class _Reports:
    """What a step's tasks reported, gathered for the commit: per ``"<bucket>/<state name>"``
    its new run (``replace``: instead of the old runs), the new parts' key bounds, the state
    rows read, per ``"<bucket>/<stage names>"`` of a stage holding a temporal filter its next
    flip's time (``None``: none held), and the buckets stepped."""

    written: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)
    rows_read: int = 0
    due: dict = field(default_factory=dict)
    stepped: int = 0

    def add(self, report: dict) -> None:
        for k, (run, replace) in report["runs"].items():
            self.written[k] = (None if run is None else WrittenRun.from_dict(run), replace)
        self.bounds.update(report.get("bounds", {}))
        self.due.update(report.get("due", {}))
        self.rows_read += report["read"]
        self.stepped += 1


def _step_view(spark, state: "BucketState", view, deltas: list, reports: _Reports, *, time: int, owner: str,
               compact_runs: int, part_rows: int, parts: dict, nruns: dict, prefix: str = ""):
    """Step ``view``'s buckets (its stages') on Spark, writing their runs (nothing committed,
    the tasks' reports added to ``reports``): ``(the output delta, several stages)``.
    ``prefix`` starts its state names in the record (a member's of a ``"views"`` view)."""
    stages = view.stages() if view.kind in ("stages", "global") else (view,)
    outputs = []
    for i, stage in enumerate(stages):
        if view.kind in ("stages", "global"):
            frames = [_bucketed(deltas[view.tables.index(src)], stage, j, state.buckets,
                                f"deltas[{view.tables.index(src)}] (table {src!r})")
                      if how == "table" else _bucketed(outputs[int(src)], stage, j, state.buckets)
                      for j, (how, src) in enumerate(stage.sources)]
            names = f"{prefix}{i}:"
            if not any(stage.keys[0]):  # one bucket, stepped at every step (colmz.spark.global_agg)
                frames = [_with_zero_rows(spark, frames[0], stage, time, [0]), *frames[1:]]
            due = state.due_buckets(names, getattr(stage, "temporal_states", tuple)(), time)
            if due:  # a temporal filter's flips come due without input: its buckets step
                frames = [_with_zero_rows(spark, frames[0], stage, time, due), *frames[1:]]
        else:
            frames = [_bucketed(d, view, j, state.buckets) for j, d in enumerate(deltas)]
            names = prefix
        task = _BucketTask(stage, state.url, state.prefix, owner, state.time, time, parts, nruns,
                           compact_runs, names, state.key_first, state._bounds, part_rows, state.stage_lookups)
        stepped = _apply(frames, task, _task_schema(stage))
        if i < len(stages) - 1:
            # A shuffle: the stage's output, materialized once (its tasks write parts: run
            # them once), re-bucketed by the next stage's key as that stage's input.
            stepped = stepped.localCheckpoint(eager=True)
            from pyspark.sql import functions as F

            found = [r[0] for r in stepped.filter(F.col(_RUNS).isNotNull()).select(_RUNS).collect()]
            outputs.append(stepped.filter(F.col(_RUNS).isNull()).drop(_RUNS))
        else:
            result = stepped.toArrow()
            found = result.column(_RUNS).to_pylist()
        for r in found:
            if r is not None:
                reports.add(json.loads(r))
    data = result.filter(pc.is_null(result.column(_RUNS)))
    return colmz.consolidate(_updates_of(data, view.schema)), len(stages) > 1


def _apply(frames: list, task, schema):
    """``groupBy(bucket).applyInArrow`` of ``task`` over one frame (``cogroup`` of two)."""

    # Plain functions: pyspark tells (table) from (key, table) by the number of parameters.
    def one(table: pa.Table) -> pa.Table:
        return task.run([table])

    def two(left: pa.Table, right: pa.Table) -> pa.Table:
        return task.run([left, right])

    if len(frames) == 1:
        return frames[0].groupBy(_BUCKET).applyInArrow(one, schema)
    if len(frames) == 2:
        return frames[0].groupBy(_BUCKET).cogroup(frames[1].groupBy(_BUCKET)).applyInArrow(two, schema)
    # More inputs than cogroup takes: one frame, each row tagged with its input and its
    # columns in that input's slots (the other inputs' slots NULL), split again in the task.
    from pyspark.sql import functions as F

    slots = [[f"_colmz_i{j}_{c}" for c in range(len(f.columns) - 3)] for j, f in enumerate(frames)]
    tagged = None
    for j, f in enumerate(frames):
        cols = [F.col(_BUCKET), F.lit(j).alias(_INPUT), F.col("time"), F.col("diff")]
        for i, (g, names) in enumerate(zip(frames, slots)):
            types = [g.schema[n].dataType for n in g.columns[:len(names)]]
            cols += [F.col(f.columns[c]).alias(n) if i == j else F.lit(None).cast(t).alias(n)
                     for c, (n, t) in enumerate(zip(names, types))]
        one_frame = f.select(*cols)
        tagged = one_frame if tagged is None else tagged.unionByName(one_frame)

    data = [f.columns[:len(names)] for f, names in zip(frames, slots)]

    def many(table: pa.Table) -> pa.Table:
        tag = table.column(_INPUT)
        parts = []
        for names, own in zip(slots, data):
            mine = table.filter(pc.equal(tag, len(parts)))
            parts.append(pa.table({**{o: mine.column(n) for n, o in zip(names, own)},
                                   "time": mine.column("time"), "diff": mine.column("diff"),
                                   _BUCKET: mine.column(_BUCKET)}))
        return task.run(parts)

    return tagged.groupBy(_BUCKET).applyInArrow(many, schema)


def _task_schema(view: BucketedView) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    arrow = pa.schema([pa.field(c.name, c.type) for c in view.schema]
                      + [pa.field("time", pa.int64()), pa.field("diff", pa.int64()), pa.field(_RUNS, pa.string())])
    return from_arrow_schema(arrow)


class _BucketTask:
    """What a bucket's task runs (pickled to the executors): read the bucket's operator
    state, step, write each changed state collection's new run, return the output rows and
    one row describing the runs (and the state rows read)."""

    def __init__(self, view, url, prefix, owner, state_time, time, parts, nruns, compact_runs, names="",
                 key_first=False, bounds=None, part_rows=STATE_PART_ROWS, stage_lookups=True):
        self.view, self.url, self.prefix, self.owner = view, url, prefix, owner
        self.state_time, self.time, self.parts, self.nruns = state_time, time, parts, nruns
        self.compact_runs = compact_runs
        self.names = names  # the prefix of the state names in the record (a stage's "<index>:")
        self.key_first, self.part_rows, self.stage_lookups = key_first, part_rows, stage_lookups
        # the states a task looks up by its delta's keys, and their parts' key bounds
        self.leads = lead_columns(view, stages=stage_lookups) if key_first else {}
        self.bounds = {k: b for k, b in (bounds or {}).items()} if self.leads else {}

    def run(self, tables: list) -> pa.Table:
        from colmz.arrangement.parts import PartRef

        bucket = next(int(t.column(_BUCKET)[0].as_py()) for t in tables if t.num_rows)
        blob = open_blob(self.url)
        view = self.view
        schemas = view.states()
        state, read = {}, 0
        whole = set()  # the states read whole (a compaction writes them whole)
        for name, schema in schemas:
            key = f"{bucket}/{self.names}{name}"
            refs = [PartRef(k, tuple(c) if c is not None else None) for k, c in self.parts.get(key, [])]
            if not refs:
                continue
            lead = self.leads.get(name)
            if lead is not None and self.nruns.get(key, 0) + 1 < self.compact_runs:
                # a join's arrangement: only the rows of the keys the delta touches
                values = touched_values(tables, view.keys, lead[1], nulls=isinstance(lead, GroupLead))
                found, n = read_touched(blob, refs, self.bounds, schema, lead[0], values)
                read += n
                if found is not None:
                    state[name] = colmz.consolidate(found, since=self.state_time)
                continue
            whole.add(name)
            stored = schema if lead is None else stored_schema(schema, lead[0])
            parts = read_blob_parts(blob, refs, stored)
            read += sum(len(p) for p in parts)
            u = colmz.consolidate(colmz.concat(parts), since=self.state_time)
            state[name] = u if lead is None else from_stored(u, schema)
        deltas = []
        for t, schema in zip(tables, view.inputs):
            d = _updates_of(t, schema) if t.num_rows else colmz.Updates.empty(schema)
            deltas.append(colmz.consolidate(at_time(d, self.time)))
        out, state_delta = step_bucket(view, state, self.state_time, deltas, self.time)
        runs, bounds = {}, {}
        for name, schema in schemas:
            d = state_delta[name]
            if not len(d):
                continue
            key = f"{bucket}/{self.names}{name}"
            replace = self.nruns.get(key, 0) + 1 >= self.compact_runs
            if replace and name in state:
                d = colmz.consolidate(colmz.concat([at_time(state[name], self.time), d]))
            run, found = write_state_run(blob, view, name, schema, d, self.key_first, prefix=self.prefix,
                                         owner=self.owner, part_rows=self.part_rows, stages=self.stage_lookups)
            bounds.update(found)
            runs[key] = (None if run is None else run.to_dict(), replace)
        due = {}
        temporal = getattr(view, "temporal_states", tuple)()
        if temporal:  # the bucket's next flip: it steps again then (or with input)
            due[f"{bucket}/{self.names}"] = _next_flip(
                [(state.get(name), state_delta[name]) for name in temporal], self.time)
        cols = {c.name: out.column(c.name) for c in view.schema}
        n = len(out)
        table = pa.table({**cols, "time": pa.array(np.asarray(out.time, np.int64)),
                          "diff": pa.array(np.asarray(out.diff, np.int64)), _RUNS: pa.nulls(n, pa.string())})
        row = {c.name: pa.nulls(1, c.type) for c in view.schema}
        row.update({"time": pa.array([self.time], pa.int64()), "diff": pa.array([0], pa.int64()),
                    _RUNS: pa.array([json.dumps({"runs": runs, "read": read, "bounds": bounds, "due": due})], pa.string())})
        return pa.concat_tables([table, pa.table(row)])


def _next_flip(held: Sequence[tuple[colmz.Updates | None, colmz.Updates]], time: int) -> int | None:
    """The least time of a temporal filter's flips still to come (its states' first column,
    ``mz_timestamp``) after a step at ``time``: each state's contents before (``None``:
    empty) and its change at ``time``; ``None`` when none is held."""
    out = None
    for before, change in held:
        after = colmz.consolidate(colmz.concat([at_time(before, time), change])) if before is not None else (
            colmz.consolidate(change))
        if len(after):
            least = int(pc.min(after.column(after.schema[0].name)).as_py())
            out = least if out is None else min(out, least)
    return out
