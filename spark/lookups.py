"""Point lookups in a bucket's join state: a task reads the arranged rows of the keys its
delta touches, not its bucket's whole state.

Design
------
A join view's bucket state (``colmz.spark.views``) is each input arranged by its join
columns (``colmz.dataflow.DeltaJoin``'s ``KeyedArrangement`` s). A step's output for a
bucket depends only on the arranged rows whose join key is one the bucket's delta carries
(``ΔA ⋈ B`` looks ``B`` up by ``ΔA``'s keys, ``A' ⋈ ΔB`` looks ``A`` up by ``ΔB``'s), and the
state's change is the delta's joinable rows appended. So a task restores each arrangement
from those keys' rows only: any superset of them restores an operator that steps the delta
exactly as the whole state would (its lookups only ever ask for the delta's keys, and its
exported change is the runs it inserts), so a read may take more rows than the keys need --
never fewer. The same holds for a min/max reduce (``colmz.dataflow.MinMaxReduce``, alone or
in a reduce with accumulable aggregates too) over Map/Filters of a table -- or of a stage's
input -- whose first group column is a bucket key column carried unchanged: a step
re-reduces only the groups its delta touches, from their rows (each plan's arrangements are
keyed by the group first), and its state's change is the delta's rows appended, so a task
restores its arrangements from the touched groups' rows only (:class:`GroupLead`; a NULL is
a group, looked up too). The same holds for an outer join (``colmz.dataflow.OuterJoin``: its
preserved side's unmatched rows are looked up under the keys of the delta, rows with a NULL key pass
straight through) and for a join inside any stage of a view of several stages
(``colmz.spark.stages``), whose arrangements are stored so in every record written with
``stored`` = ``colmz.spark.views.KEY_FIRST_STAGES`` (one written before keeps its stages'
arrangements in their own order, read whole).

Stored order (:func:`lead_columns`): the runs of such a state are written with the
arrangement's key columns first, then its other columns in order, so the writer's sort
(``colmz.arrangement.runs.write_run``: by the data columns in order) orders every part by
key; :func:`to_stored` / :func:`from_stored` move the columns. Each part's least and
greatest first key value, its *bounds* (:func:`part_bounds`, from the part's footer
statistics), are recorded in the state's record beside its run. A task (:func:`read_touched`)
skips a part whose bounds admit none of its delta's values of that column without opening
it, reads of the other parts only the row groups whose statistics admit one
(``colmz.arrangement.parts.read_matching_groups``: page checks, not the part's diff sum,
which covers the whole part), and keeps the rows whose first key column holds one of the
values. A part without bounds (a type JSON does not hold exactly) is read by row groups.
Parts of :data:`STATE_PART_ROWS` rows (one row group each) bound what a lookup reads per
run to a part or two per key.

A compaction (a bucket's collection at ``compact_runs`` runs is written consolidated, as
one run) needs the whole collection: that task reads it whole, once every ``compact_runs``
steps of the bucket.

A reduce's arrangements hold their group columns first already (the order every record
wrote them in), so a group lead is the state's first column and its stored order is its
own: a record written before reduces were looked up is read by the same lookups, its parts
without bounds read by row groups.

Work counter: the rows a task decodes (``BucketState.rows_read`` sums them) -- for a join
step, a part or two per run per touched key, whatever the bucket's state holds; for a
min/max step, the touched groups' rows and a part or two per run around them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import colmz
from colmz.arrangement.part_ref import PartRef
from colmz.arrangement.parts import open_part, read_matching_groups
from colmz.arrangement.runs import WrittenRun
from colmz.order import ColumnSpec
from colmz.storage.base import Blob

__all__ = ["STATE_PART_ROWS", "GroupLead", "from_stored", "lead_columns", "part_bounds", "read_touched", "stored_schema",
           "to_stored", "touched_values"]

#: Rows per part of a looked-up state's runs (a part is one Parquet row group).
STATE_PART_ROWS = 1 << 13


class GroupLead(tuple):
    """A lead (``(key positions, bucket key position)``, as :func:`lead_columns` gives them)
    of a reduce's arrangement: its key is a group key, of which NULL is one, so a NULL in
    the delta's bucket key column is looked up too (a join's arrangements hold no NULL key:
    its lookups leave NULL out).

    >>> GroupLead(((0,), 0)) == ((0,), 0)
    True
    """

    __slots__ = ()


def lead_columns(view, *, stages: bool = True) -> dict[str, tuple[tuple[int, ...], int]]:
    """For a ``"join"`` view (``colmz.spark.views.join_view``): each arrangement's state name
    -> ``(its key columns' positions in the state's schema, the bucket key position of the
    first of them)``; for a ``"plan"`` view over an inner join (SQL), its join's
    (``BucketedView.join_leads``) and its min/max reduces' (:class:`GroupLead` s,
    ``BucketedView.group_leads``); for a ``"views"`` view, its members'; with ``stages``,
    for a view of several stages (``"stages"``, ``"global"``) each stage's join's, inner or
    outer, and min/max reduces' (``StageView.join_leads``, ``StageView.group_leads``, named
    ``"<stage>:<name>"``), and for one stage its own; ``{}`` for any other view (its states
    are read whole). ``stages`` false: the leads of a state record written before stages
    looked their joins up (``colmz.spark.views.KEY_FIRST``), whose stages' arrangements are
    stored in their own order.

    >>> import pyarrow as pa
    >>> from colmz.spark.views import join_view
    >>> lead_columns(join_view({"v": pa.int64(), "tk": pa.int64()}, {"uk": pa.int64(), "w": pa.string()},
    ...                        [("tk", "uk")]))
    {'0.arrangements.0': ((0,), 0), '0.arrangements.1': ((1,), 0)}
    """
    if view.kind == "plan":
        return {**view.join_leads(), **view.group_leads()}
    if view.kind == "views":  # each member's, under its state names in the record
        return {f"{m}.{n}": lead for m, (_, v) in enumerate(view.members())
                for n, lead in lead_columns(v, stages=stages).items()}
    if view.kind in ("stages", "global"):
        return {} if not stages else {f"{i}:{n}": lead for i, st in enumerate(view.stages())
                                      for n, lead in lead_columns(st).items()}
    if view.kind == "stage":
        if not stages:
            return {}
        return {n: lead for f in ("join_leads", "group_leads") if hasattr(view, f) for n, lead in getattr(view, f)().items()}
    if view.kind != "join":
        return {}
    from colmz.dataflow.state import operator_states_of

    op = view.operator()
    found = operator_states_of([op])
    out = {}
    for (j, key), arr in op.arrangements.items():
        st = next(s for s in found if s.target is arr)
        names = [c.name for c in view.inputs[j]]
        if not key:
            continue
        out[st.name] = (tuple(names.index(c) for c in key), view.keys[j].index(key[0]))
    return out


def stored_schema(schema: Sequence[ColumnSpec], lead: Sequence[int]) -> tuple[ColumnSpec, ...]:
    """``schema`` with the columns at ``lead`` first (the order a looked-up state's parts
    hold)."""
    return (*(schema[i] for i in lead), *(c for i, c in enumerate(schema) if i not in lead))


def to_stored(u: colmz.Updates, lead: Sequence[int]) -> colmz.Updates:
    """``u`` (a state's columns) in its stored order.

    >>> import colmz
    >>> to_stored(colmz.Updates({"c0": [1], "c1": ["a"]}, time=[0], diff=[1]), (1,)).column_names
    ['c1', 'c0']
    """
    names = [s.name for s in stored_schema(u.schema, lead)]
    return colmz.Updates({n: u.column(n) for n in names}, u.time, u.diff)


def from_stored(u: colmz.Updates, schema: Sequence[ColumnSpec]) -> colmz.Updates:
    """``u`` (read in its stored order) in the state's ``schema`` order."""
    return colmz.Updates({c.name: u.column(c.name) for c in schema}, u.time, u.diff)


def _json_value(v):
    if isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    return None


def part_bounds(blob: Blob, run: WrittenRun) -> dict[str, list]:
    """Each part of ``run``'s ``[least, greatest]`` first column value, from its footer's
    statistics; parts whose statistics are missing, or of a type JSON does not hold
    exactly, are left out (a read opens them)."""
    out = {}
    for key in run.keys:
        f = open_part(blob, key)
        if f is None:
            continue
        with f:
            md = pq.ParquetFile(f).metadata
        lo = hi = None
        for i in range(md.num_row_groups):
            g = md.row_group(i)
            if not g.num_rows:
                continue
            stats = g.column(0).statistics
            if stats is None or not stats.has_min_max:
                lo = hi = None
                break
            a, b = _json_value(stats.min), _json_value(stats.max)
            if a is None or b is None:
                lo = hi = None
                break
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        if lo is not None:
            out[key] = [lo, hi]
    return out


def touched_values(tables: Sequence[pa.Table], keys: Sequence[Sequence[str]], position: int,
                   nulls: bool = False) -> list:
    """The values of bucket key ``position`` in the inputs' delta ``tables`` (``keys`` each
    input's bucket key columns), each once: NULL left out (NULL keys join nothing) unless
    ``nulls`` (a group key's: a NULL group is looked up as ``None``)."""
    seen = set()
    for t, k in zip(tables, keys):
        if t.num_rows:
            seen.update(v for v in t.column(k[position]).to_pylist() if nulls or v is not None)
    return sorted(seen, key=lambda v: (type(v).__name__, v))


def _may_hold(bounds, values: Iterable) -> bool:
    lo, hi = bounds
    for v in values:
        try:
            if lo <= v <= hi:
                return True
        except TypeError:  # values the bounds cannot order (a NULL group): read the part's row groups
            return True
    return False


def read_touched(blob: Blob, parts: Sequence[PartRef], bounds: Mapping[str, Sequence], schema: Sequence[ColumnSpec],
                 lead: Sequence[int], values: Sequence) -> tuple[colmz.Updates | None, int]:
    """The rows of a looked-up state (its ``parts``, stored in :func:`stored_schema` order)
    whose first key column holds one of ``values``, in ``schema`` order, and the rows
    decoded to find them; ``None`` when no part may hold one."""
    stored = stored_schema(schema, lead)
    found, read = [], 0
    wanted = None
    for ref in parts:
        b = bounds.get(ref.key)
        if not values or (b is not None and not _may_hold(b, values)):
            continue
        u = read_matching_groups(blob, ref, stored, list(values))
        read += len(u)
        if not len(u):
            continue
        col = u.column(stored[0].name)
        if wanted is None:
            try:
                wanted = pa.array(list(values), col.type)
            except (pa.ArrowException, OverflowError, TypeError, ValueError):
                wanted = False  # values of another type (a widened key): keep every row read
        if wanted is not False:
            u = u.take(pc.is_in(col, value_set=wanted).to_numpy(zero_copy_only=False).nonzero()[0])
        found.append(from_stored(u, schema))
    if not found:
        return None, read
    return colmz.concat(found), read
