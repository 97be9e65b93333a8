"""``MaintainedView``: a materialized view kept by its operators, fed each commit's deltas.

Design
------
A catalog's ``CREATE MATERIALIZED VIEW`` (``colmz.Catalog(views="incremental")``, the
default) builds one :class:`MaintainedView`: the query is planned (:func:`colmz.dataflow.plan.plan`)
against the schemas of the objects it reads, rendered into operators
(:func:`colmz.dataflow.plan.render`) and fed once the inputs' contents at the creation time
(one initial computation); from then on, at each commit ``T``, :meth:`MaintainedView.step`
feeds the operators the changes its inputs -- tables, views, continual tasks -- committed at
``T`` (the catalog steps views in creation order, so an input view has written its change
at ``T`` before a view reading it steps). The root's change goes through a
:class:`~colmz.dataflow.ViewSink` into the view's collection: *desired* into a
``Correction``, what was written fed back as *persisted*, ``updates_before(T + 1)``
appended (Materialize's materialized-view sink). Neither the view nor its sink keeps the
view's previous result to diff against; the operators' state is their arrangements.

A view calling ``mz_now()`` only in temporal filters -- ``WHERE`` conjuncts ``mz_now() op
column [+|- integer]`` of the outermost query, planned as the one
:class:`~colmz.dataflow.plan.TemporalFilter` at the plan's root -- is kept by its operators:
the filter turns each input update into updates at the times the predicate flips and holds
the future ones (``colmz.dataflow.temporal``); a commit touching none of the view's inputs
steps the filter alone, with no change, when a held flip has come due
(``TemporalFilter.next_time``), so that the sink writes the flips that came due, each at its
own time: the view as of any ``T`` equals the query evaluated with ``mz_now() = T``. A view
reading such a view is fed, at a commit, every flip written since the previous commit (at
the commit's time): it equals its query at each commit, and between commits holds the last
commit's contents. The held flips are the filter's state, exported and restored with the
other operators' (below).

A plan holding a ``Fallback`` (a construct outside the operators' subset, named by its
reason), a view calling ``mz_now()`` elsewhere (the select list, ``HAVING``, a subquery),
a plan whose output columns the operators type differently from the query (PostgreSQL's
types, as the recompute path gives them), or whose names resolve differently from the
catalog's, is maintained by :class:`Recompute`: at a commit changing one of its inputs (every
commit for a view calling ``mz_now()``), the query is recomputed through DuckDB
(``colmz.sql.translate``, the catalog's evaluation) and diffed against the previous
output, which that operator keeps. A ``FROM`` subquery that falls back, typed by the
catalog (``subquery_schema``), is a Fallback leaf of its own: a :class:`Recompute` of that
subquery alone, its change fed to the operators above it; so is a set operation's branch
(``UNION``/``EXCEPT``/``INTERSECT``) whose text is known alone. ``require=True`` (``WITH (INCREMENTAL = 'require')``) refuses such a plan with
``UnsupportedSQL`` naming the node and its reason; the default maintains it with a
:class:`FallbackWarning` naming the reason.

Errors. A view's query may raise where Materialize puts an error beside the view's rows
(a scalar subquery of more than one row: :mod:`colmz.dataflow.guard`). The commit lands;
:attr:`MaintainedView.error` is the error after the last step (its ``ErrorGuard`` operators
holding a row, or a recompute raising it), :meth:`MaintainedView.error_at` as of a time (the
changes are kept, rolled back with the view), and the catalog raises it when the view -- or
a view over it -- is read. Meanwhile the operators' output is written as it comes (rows
never read while the error holds); a recompute that raised writes nothing (its previous
output kept). A view restored from durable state reads its error from its guards' state.

Rollback. ``MaintainedView`` declares ``ROLLBACK_FIELDS``: the catalog saves it with its
object (in place, with every operator's state: append-only runs, saved as their length)
and a failed commit rolls the operators back with the collections. The catalog saves a view
only at a commit that steps it: :meth:`MaintainedView.idle` says (in O(1): whether the sink
was drained at the last write is kept, and rolled back, with the view) that a commit
changing none of its inputs would change nothing but its collection's upper, and the catalog
then moves that upper alone. The work counters (``last_work``) are diagnostics, not state.

Durability. Operator state lives in memory; a durable catalog keeps a copy of it as
collections of updates (``colmz.dataflow.state``, committed with the view by
``colmz.catalog.durable``) and, when it opens, restores the operators from it
(:attr:`MaintainedView.pipeline` restored, ``ViewSink.resume``) without reading any input.
An arrangement shared with other views (``colmz.dataflow.shared``) is not the view's state:
the catalog keeps it durable once, as its own state object, and puts it back in its registry
before the view is rendered (or fills it from its relation when it has no durable state).
A view it cannot restore (a Fallback, no or stale durable state) is rebuilt by one initial
computation over its inputs' contents, the sink feeding the persisted view back first so that
only a difference is written (none when the view was current).

:meth:`MaintainedView.explain` gives a :class:`ViewExplanation`: the plan with each node's
strategy and cost class, the state each operator holds -- its own, or an arrangement shared
with other views of the catalog (``colmz.dataflow.shared``: its id and how many views share
it) -- its rows and bytes, and the rows in, out and touched (arrangement work counters; for
a shared arrangement, this view's lookups) per node at the last commit. A subplan the
lowering uses twice is one operator (``colmz.dataflow.render``): it is listed once, labelled
``shared #n``, and each of its other parents shows ``→ shared #n`` instead of its subtree
(Materialize's ``Let`` binding and its ``Get``), so its work is counted once.
"""

from __future__ import annotations

import html
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from colmz.collection import MemoryCollection
from colmz.dataflow.guard import MORE_THAN_ONE_ROW, error_at
from colmz.dataflow.guard import ErrorGuard as ErrorGuardOp
from colmz.dataflow.plan import Plan, PlanError, TemporalFilter, plan, render
from colmz.dataflow.plan_binding import Refused
from colmz.dataflow.sink import ViewSink
from colmz.dataflow.step import Clock, as_schema
from colmz.dataflow.temporal import TemporalFilter as TemporalFilterOp
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.rollback import undone_on_error
from colmz.rows import at_time
from colmz.sql.errors import SQLError, UnsupportedSQL
from colmz.sql.translate import now_pieces, translate
from colmz.updates import Updates

__all__ = ["CONSTANT", "MODES", "FallbackWarning", "MaintainedView", "Recompute", "ViewExplanation"]

#: The ways a catalog maintains its materialized views (``colmz.Catalog(views=...)``):
#: ``"incremental"`` by their operators (:class:`MaintainedView`), ``"recompute"`` by
#: recomputing the query at every commit touching an input and diffing against the view's
#: previous contents (the oracle the incremental path is tested against).
MODES = ("incremental", "recompute")

#: The reason of a view that reads nothing: computed once, at ``CREATE``.
CONSTANT = "a constant relation (the query reads no object): computed once, at CREATE"

Schema = tuple[ColumnSpec, ...]


class FallbackWarning(UserWarning):
    """A materialized view is recomputed at each commit touching its inputs (its plan holds
    a Fallback); the message names the construct."""


class Recompute:
    """A Fallback rendered: the query recomputed by ``evaluate(time) -> Updates`` (the rows
    at ``time``, each ``+1``) when ``changed``, and diffed against its previous output.

    >>> import colmz, pyarrow as pa
    >>> rows = {1: [1, 2], 2: [2, 3]}
    >>> r = Recompute({"k": pa.int64()}, "k*2", lambda t: colmz.Updates({"k": rows[t]}, time=[t, t], diff=[1, 1]))
    >>> r.step(1, True).to_pylist(), r.step(2, True).to_pylist()
    ([(1, 1, 1), (2, 1, 1)], [(1, 2, -1), (3, 2, 1)])
    """

    ROLLBACK_FIELDS = ("_previous", "_clock")

    def __init__(self, schema, reason: str, evaluate: Callable[[int], Updates]):
        self.schema: Schema = as_schema(schema, "schema")
        self.reason = reason
        self._evaluate = evaluate
        self._previous = Updates.empty(self.schema)
        self._clock = Clock()
        #: rows recomputed at the last step that recomputed (a work counter)
        self.rows_recomputed = 0

    @property
    def rows(self) -> int:
        """Rows of the previous output it keeps."""
        return len(self._previous)

    @property
    def nbytes(self) -> int:
        return sum(self._previous.column(c.name).nbytes for c in self.schema) + self._previous.diff.nbytes

    def step(self, time, changed: bool = True) -> Updates:
        t = self._clock.check(time)
        if not changed:
            self._clock.advance(t)
            return Updates.empty(self.schema)
        new = consolidate(at_time(self._evaluate(t), t))
        self.rows_recomputed = len(new)
        prev = self._previous
        delta = consolidate(concat([at_time(prev.negated(), t), new])) if len(prev) else new
        self._previous = new
        self._clock.advance(t)
        return delta


def _work(op, state: list | None = None) -> int:
    """The cumulative work counters of ``op``'s state (``state``: its arrangements, when
    known): rows inserted, merged, searched, found in its arrangements and accumulators, rows
    it recomputed."""
    total = 0
    for a in (_arrangements(op) if state is None else state):
        total += sum(getattr(a, f, 0) for f in ("rows_inserted", "rows_merged", "keys_searched", "rows_found"))
    total += getattr(op, "rows_touched", 0)
    return total


def _arrangements(op) -> list:
    """The state structures an operator holds (``KeyedArrangement`` s, ``Accumulators``),
    found through their public properties, nested reduces included."""
    out = []
    for attr in ("arrangement", "state"):
        v = getattr(type(op), attr, None)
        if isinstance(v, property):
            out.append(getattr(op, attr))
    v = getattr(type(op), "arrangements", None)
    if isinstance(v, property) or callable(v):
        got = op.arrangements
        got = got() if callable(got) else got
        out.extend(got.values() if isinstance(got, dict) else got)
    for attr in ("accumulable", "hierarchical", "collation"):  # a CollatedReduce's parts
        inner = getattr(op, attr, None)
        if inner is not None and not isinstance(inner, (int, str)):
            out.extend(_arrangements(inner))
    return list({id(a): a for a in out}.values())  # one found through two properties: once


class MaintainedView:
    """A materialized view maintained by its operators (or, for a Fallback, recomputed).

    Build one with :meth:`create`, feed the inputs' contents once with :meth:`initialize`,
    then one :meth:`step` per commit.

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> t = {"k": pa.int64(), "v": pa.int64()}
    >>> view = (ColumnSpec("k", pa.int64()), ColumnSpec("s", pa.int64()))
    >>> mv = MaintainedView.create("SELECT k, sum(v) AS s FROM t GROUP BY k", view, {"t": t},
    ...                            MemoryCollection(view, since=1, upper=1))
    >>> mv.initialize(1, {"t": colmz.Updates({"k": [1, 1], "v": [2, 3]}, time=[1, 1], diff=[1, 1])})
    >>> mv.step(2, {"t": colmz.Updates({"k": [1], "v": [4]}, time=[2], diff=[1])}).to_pylist()
    [(1, 5, 2, -1), (1, 9, 2, 1)]
    >>> print(mv.explain())
    materialized view: incremental (each commit's deltas through the operators)
    MapFilter select=[t.k AS k, agg1 AS s]  -- incremental O(delta)  [last commit: 2 in, 2 out]
      Reduce group_by=[t.k] aggregates=[agg1: sum(t.v) accumulable]  -- incremental O(delta)  [last commit: 1 in, 2 out, 6 touched; state: own Accumulators 1 rows, 32 bytes]
        Get t AS t (k AS t.k, v AS t.v)  -- incremental O(delta)  [last commit: 1 in, 1 out]
    """

    ROLLBACK_FIELDS = ("_pipeline", "_recompute", "_sink", "_drained", "_errors")

    def __init__(self, schema: Schema, collection: MemoryCollection, inputs: Mapping[str, Schema],
                 plan_: Plan | None, reasons: list[str], evaluate: Callable[[int], Updates] | None,
                 uses_now: bool, subquery_evaluate=None, shared=None):
        self.schema = schema
        self.inputs = dict(inputs)
        self.plan = plan_
        self.reasons = reasons
        self.uses_now = uses_now
        self._pipeline = None
        self._recompute = None
        if reasons:
            if evaluate is None:
                raise ValueError(f"the view is recomputed ({reasons[0]}) and no evaluate= is given")
            self._recompute = Recompute(schema, "; ".join(reasons), evaluate)
        else:
            def subtree(node) -> Recompute:
                # a FROM subquery that falls back: its own query recomputed, diffed into the dataflow
                return Recompute(node.schema, node.reason,
                                 lambda t, q=node.query, s=node.schema: subquery_evaluate(q, s, t))

            self._pipeline = render(plan_, fallback=subtree if subquery_evaluate is not None else None,
                                    shared=shared)
        self._sink = ViewSink(schema, collection)
        # Whether the sink's correction was empty after this view's last write (False: not
        # known; a durable restore that empties it leaves it so): what :meth:`idle` reads,
        # instead of counting the correction's buckets at every commit.
        self._drained = False
        self._states: list | None = None  # per rendered step, its operator's state structures
        #: the view's errors over time: ``(time, message or None)`` at each time it changed,
        #: in time order (``error_at``); a tuple replaced by each change (rolled back whole)
        self._errors: tuple[tuple[int, str | None], ...] = ()
        #: per rendered step, each once (``Pipeline.steps``): (rows in, rows out, work
        #: counters) at the last commit
        self.last_work: list[tuple[int, int, int]] | None = None
        self.last_time: int | None = None
        self._guards: list | None = None  # the pipeline's ErrorGuard operators, found once

    # ------------------------------------------------------------------ building

    @classmethod
    def create(cls, query: str, schema, inputs: Mapping[str, object], collection: MemoryCollection, *,
               evaluate: Callable[[int], Updates] | None = None, require: bool = False,
               uses_now: bool = False, reads: set | None = None, name: str = "view",
               subquery_schema: Callable[[str], Schema | None] | None = None,
               subquery_evaluate: Callable[[str, Schema, int], Updates] | None = None,
               shared=None, append_only=(), kinds: Mapping[str, Sequence[str | None]] | None = None
               ) -> MaintainedView:
        """Plan ``query`` over ``inputs`` (object name -> its columns) and render it for a view
        of columns ``schema`` written into ``collection``.

        ``evaluate(time)`` recomputes the query's rows at ``time`` (as ``+1`` updates) for a
        view that is not incremental; ``reads`` (the catalog's resolution of the names the
        query reads), when given, must be the plan's inputs. With ``subquery_schema(text)``
        (a ``FROM`` subquery's output columns) and ``subquery_evaluate(text, schema, time)``
        (its rows at ``time``), a subquery that falls back is recomputed alone, at each commit
        changing the view's inputs, its change fed into the operators above it. ``require=True`` raises
        ``UnsupportedSQL`` naming the construct when the view would be recomputed; otherwise
        a :class:`FallbackWarning` says why it is. ``append_only`` names the inputs that only
        ever insert (a catalog's tables created ``WITH (APPEND ONLY)``): a min/max over them
        takes the monotonic plan (:func:`colmz.dataflow.plan.plan`); ``kinds`` the kind of each
        input's columns (``"jsonb"``, ``"json"``, ``"text"`` or ``None``), by which PostgreSQL's
        jsonb rules of a column's type apply as on the query path (``plan``'s ``kinds``).
        """
        schema = as_schema(schema, "schema")
        checked = {n: as_schema(s, f"inputs[{n!r}]") for n, s in inputs.items()}
        reasons: list[str] = []
        subtrees: list[str] = []
        p: Plan | None = None
        typer = subquery_schema if subquery_evaluate is not None else None
        try:
            p = plan(query, checked, subquery_schema=typer, append_only=tuple(n for n in append_only if n in checked),
                     kinds=kinds)
        except Refused:
            raise
        except (PlanError, SQLError) as e:
            reasons.append(f"the planner cannot read the query ({e})")
        if p is not None:
            reasons.extend(f"{f.describe()}: {f.reason}" for f in p.fallbacks() if not f.query)
            subtrees = [f"{f.describe()}: {f.reason}" for f in p.fallbacks() if f.query]
            if uses_now and not reasons:
                reasons.extend(_now_reasons(p, query))
            # a subquery recomputed alone reads its own inputs, which the operators need not
            mismatch = (set(p.tables) - set(reads)) if subtrees else (set(p.tables) ^ set(reads)) if reads is not None else ()
            if not reasons and mismatch:
                reasons.append(f"the plan reads {sorted(p.tables)}, the catalog resolves "
                               f"{sorted(map(str, reads))}")
            if not reasons:
                reasons.extend(_type_mismatches(p.root.schema, schema))
        subtrees = subtrees if not reasons else []
        if reads is not None and not reads and not uses_now:
            # reads nothing (a constant relation, SELECT without FROM): computed once at
            # CREATE, never again -- no commit changes it
            reasons, subtrees = [], []
            mv = cls(schema, collection, checked, None, [CONSTANT], evaluate, uses_now)
            return mv
        if (reasons or subtrees) and require:
            raise UnsupportedSQL(f"MATERIALIZED VIEW {name} WITH (INCREMENTAL = 'require'): "
                                 f"not maintained incrementally: {'; '.join(reasons or subtrees)}")
        if reasons:
            when = "every commit (it calls mz_now())" if uses_now else "each commit that changes its inputs"
            warnings.warn(f"materialized view {name} is recomputed at {when}: {'; '.join(reasons)}",
                          FallbackWarning, stacklevel=2)
        elif subtrees:
            warnings.warn(f"materialized view {name}: a subquery is recomputed at each commit that "
                          f"changes the view's inputs: {'; '.join(subtrees)}", FallbackWarning, stacklevel=2)
        try:
            return cls(schema, collection, checked, p, reasons, evaluate, uses_now, subquery_evaluate, shared)
        except (TypeError, ValueError) as e:  # pragma: no cover - a plan the operators refuse
            if reasons or require:
                raise
            return cls(schema, collection, checked, p, [f"the operators refuse the plan ({e})"], evaluate, uses_now)

    @property
    def incremental(self) -> bool:
        """Whether the view is maintained by operators (no Fallback), or is constant."""
        return self._pipeline is not None or self.reasons == [CONSTANT]

    @property
    def shared(self) -> list:
        """The shared arrangements its operators read (``SharedInput`` s; none when recomputed)."""
        return [] if self._pipeline is None else self._pipeline.shared

    @property
    def sink(self) -> ViewSink:
        return self._sink

    def arrangements(self) -> list:
        """The state structures of the view's operators (``KeyedArrangement`` s,
        ``Accumulators``), root first; empty for a view recomputed whole (its previous
        output is its state, :meth:`explain` says its size)."""
        if self._pipeline is None:
            return []
        return [a for op in self._pipeline.operators for a in _arrangements(op)]

    @property
    def pipeline(self):
        """The rendered operators (``colmz.dataflow.render.Pipeline``), or ``None`` for a view
        recomputed whole (a Fallback, a constant): what ``colmz.dataflow.state`` exports."""
        return self._pipeline

    # ------------------------------------------------------------------ stepping

    def _output(self, time: int, deltas: Mapping[str, Updates], changed: bool) -> Updates:
        if self._pipeline is None:
            return self._recompute.step(time, changed or self.uses_now)
        if not changed:
            # no input changed: only a temporal filter at the root has anything to emit --
            # the flips it holds that came due -- and it alone is stepped, with no change
            root = self._pipeline.operators[0]
            if not isinstance(root, TemporalFilterOp):
                return Updates.empty(self.schema)
            due = root.next_time()
            if due is None or due > time:
                return Updates.empty(self.schema)
            out = root.step(time, Updates.empty(root.input_schema))
        else:
            # each operator's state structures, found once (an operator keeps the same ones:
            # a roll back and a durable restore refill them in place)
            states = self._states
            if states is None:
                states = self._states = [_arrangements(op) for _, _, op, _, _ in self._pipeline.steps()]
            steps = self._pipeline.steps()
            before = [_work(op, st) for (_, _, op, _, _), st in zip(steps, states)]
            out = self._pipeline.step(time, deltas)
            after = self._pipeline.steps()
            self.last_work = [(i, o, _work(op, st) - b) for (_, _, op, i, o), st, b in zip(after, states, before)]
            self.last_time = time
        # the plan's output columns under the view's names (by position), in its types
        names = [o.name for o in self._pipeline.schema]
        if out.column_names == names:  # zero-copy, keeping what is known of it (consolidated)
            renamed = out.rename([c.name for c in self.schema])
        else:
            cols = {c.name: out.column(o) for c, o in zip(self.schema, names)}
            renamed = Updates(cols, out.time, out.diff, copy=False)
        return _cast_exact(renamed, self.schema)

    def _write(self, time: int, out: Updates) -> Updates:
        coll = self._sink.collection
        if time >= coll.upper:
            written = self._sink.step(time, out)
        else:
            # The collection is written past ``time`` already (a reopened view that was
            # current): the output is desired as of the upper, and the next step writes any
            # difference.
            if len(out):
                # updates at later times (a temporal filter's flips) stay at theirs
                self._sink.correction.insert(_advanced(out, coll.upper))
            written = Updates.empty(self.schema)
        self._drained = not len(self._sink.correction)
        return written

    def initialize(self, time: int, contents: Mapping[str, Updates]) -> None:
        """Feed every input's contents as of ``time`` (one initial computation) and write the
        view's contents; a collection holding the view already gets only the difference."""
        deltas = {n: at_time(u, time) for n, u in contents.items() if len(u)}
        if self._pipeline is not None:
            deltas = {n: u for n, u in deltas.items() if n in self._pipeline.tables}
        # (a view rebuilt at a durable reopen may start in error; a CREATE whose query raises
        # fails before, when the catalog runs the query for the view's columns)
        out, error = self._checked_output(time, deltas, True)
        self._errors = ((time, error),) if error is not None else ()
        if error is not None and self._pipeline is None:
            self._hold(time)
        else:
            self._write(time, out)
        self.last_work = self.last_time = None  # "last commit" counts commits, not this
        if self.reasons == [CONSTANT]:
            # nothing changes a view that reads nothing: no previous output to diff against
            self._recompute._previous = Updates.empty(self.schema)

    def idle(self, time: int) -> bool:
        """Whether a :meth:`step` at ``time`` with no input changed would write nothing and
        change nothing but the view's collection's upper -- no temporal filter has a flip
        due, the view is not recomputed at every commit (``mz_now()``), its sink holds
        nothing to correct -- so that its caller may move that upper alone instead of
        stepping it (and leave the operators and the sink, unread and unchanged, unsaved).
        O(1): whether the sink holds nothing is known from the view's last write.

        >>> import colmz, pyarrow as pa
        >>> t = {"k": pa.int64()}
        >>> mv = MaintainedView.create("SELECT k FROM t", ((ColumnSpec("k", pa.int64())),), {"t": t},
        ...                            MemoryCollection({"k": pa.int64()}, since=1, upper=1))
        >>> mv.initialize(1, {"t": colmz.Updates({"k": [1]}, time=[1], diff=[1])})
        >>> mv.idle(2)
        True
        """
        due = self.due()
        return due is None or due > time

    def due(self) -> int | None:
        """The earliest commit time at which this view is not :meth:`idle` with no input
        changed: ``0`` when that is every commit (its sink holds something to correct, or
        it recomputes at every commit for ``mz_now()``), a temporal filter's next flip, or
        ``None`` when only an input's change makes it step. It changes only when the view
        steps (or is rolled back), so a catalog asks it after each step and steps a view no
        input of which changed only once it comes due (``colmz.catalog.schedule``).

        >>> import colmz, pyarrow as pa
        >>> t = {"k": pa.int64()}
        >>> mv = MaintainedView.create("SELECT k FROM t WHERE mz_now() <= k", ((ColumnSpec("k", pa.int64())),),
        ...                            {"t": t}, MemoryCollection({"k": pa.int64()}, since=1, upper=1))
        >>> mv.initialize(1, {"t": colmz.Updates({"k": [5]}, time=[1], diff=[1])})
        >>> mv.due(), mv.idle(5), mv.idle(6)
        (6, True, False)
        """
        if not self._drained:
            return 0
        if self._pipeline is None:
            # a Fallback or a constant: recomputed only when an input changed, or at every
            # commit when it calls mz_now(); its clock checks that times go forward only
            return 0 if self.uses_now else None
        root = self._pipeline.operators[0]
        if isinstance(root, TemporalFilterOp):
            return root.next_time()
        return None

    def step(self, time: int, deltas: Mapping[str, Updates]) -> Updates:
        """Feed the inputs' changes committed at ``time`` (name -> ``Updates`` at ``time``;
        an input without a change may be absent) and write the view's change; returns what
        was written. A step that raises leaves the view (operators, sink, collection) as it
        was."""
        deltas = {n: u for n, u in deltas.items() if len(u)}
        changed = bool(deltas)  # any input: a subquery recomputed reads inputs the plan does not
        if self._pipeline is not None:
            deltas = {n: u for n, u in deltas.items() if n in self._pipeline.tables}
        with undone_on_error(self):
            before = self.error
            out, error = self._checked_output(time, deltas, changed)
            if error != before:
                if not self._errors:  # restored in error (durable state): since the restore
                    self._errors = ((self._sink.collection.since, before),)
                self._errors = (*self._errors, (time, error))
            if error is not None and self._pipeline is None:
                return self._hold(time)  # the recompute raised: no output to write
            return self._write(time, out)

    def _checked_output(self, time: int, deltas: Mapping[str, Updates], changed: bool
                        ) -> tuple[Updates, str | None]:
        """The output's change at ``time`` and the view's error after it (``None``: none): an
        :class:`ErrorGuard` holding a row (the output as the operators give it), or a
        recompute raising :data:`MORE_THAN_ONE_ROW` (no output: its previous one kept)."""
        if self._pipeline is None:
            try:
                return self._output(time, deltas, changed), None
            except SQLError as e:
                if str(e) != MORE_THAN_ONE_ROW:
                    raise
                return Updates.empty(self.schema), MORE_THAN_ONE_ROW
        out = self._output(time, deltas, changed)
        return out, self._guard_error()

    def _guard_error(self) -> str | None:
        """The message of the first of the pipeline's :class:`ErrorGuard` s holding a row."""
        guards = self._guards
        if guards is None:
            guards = self._guards = [op for op in self._pipeline.operators if isinstance(op, ErrorGuardOp)]
        return next((g.message for g in guards if g.held), None)

    def _hold(self, time: int) -> Updates:
        """A recompute that raised the view's error has no output at ``time``: the
        collection keeps its contents and only moves its upper past ``time``; the first
        recompute that answers again writes its difference from them (its previous output
        is kept, or, rebuilt at a reopen, the sink holds the persisted contents to correct)."""
        coll = self._sink.collection
        if time >= coll.upper:
            coll.compare_and_append(Updates.empty(self.schema), coll.upper, time + 1)
            self._sink.correction.advance_since(time + 1)  # as a write would
        self._drained = False
        return Updates.empty(self.schema)

    @property
    def error(self) -> str | None:
        """The view's error after its last step (PostgreSQL's words), or ``None``: reading
        the view raises it (``colmz.Catalog``). Its collection holds what its operators
        output meanwhile (Materialize's rows beside its errors: never read while the error
        holds), or, for a view recomputed whole, its contents as of its last answer."""
        if self._errors:
            return self._errors[-1][1]
        # none recorded: none since CREATE, or operators restored from durable state (their
        # guards say)
        return None if self._pipeline is None else self._guard_error()

    def error_at(self, time: int) -> str | None:
        """The view's error as of ``time`` (the last change at or before it), or ``None``."""
        return error_at(self._errors, time) if self._errors else self.error

    # ------------------------------------------------------------------ explaining

    def explain(self, name: str = "") -> ViewExplanation:
        """The plan with each node's strategy, cost class, state and last commit's work."""
        title = f"materialized view {name}".rstrip()
        lines: list[str] = []
        if self.reasons == [CONSTANT]:
            r = self._recompute
            return ViewExplanation([f"{title}: constant", f"Constant  -- {CONSTANT}  [state: none beyond the view; "
                                                           f"{r.rows_recomputed} rows]"])
        if self._pipeline is None:
            r = self._recompute
            lines.append(f"{title}: recompute at each commit changing an input")
            lines.append(f"Recompute  -- recompute O(inputs): {r.reason}  [state: own previous output "
                         f"{r.rows} rows, {r.nbytes} bytes; last recompute {r.rows_recomputed} rows]")
            if self.plan is not None:
                lines.append("plan:")
                lines.extend("  " + s for s in self.plan.explain().splitlines())
            return ViewExplanation(lines)
        redone = sum(isinstance(op, Recompute) for _, _, op, _, _ in self._pipeline.steps())
        also = f"; {redone} subquery recomputed" if redone else ""
        lines.append(f"{title}: incremental (each commit's deltas through the operators{also})")
        work = self.last_work
        steps, tree = self._pipeline.steps(), self._pipeline.tree()
        parents = Counter(shared for _, _, shared, _ in tree if shared is not None)
        for depth, k, shared, first in tree:
            node, op = steps[k][1], steps[k][2]
            if not first:  # a shared subplan's other parent: a reference, its work listed once
                lines.append(f"{'  ' * depth}→ shared #{shared} ({node.describe()})")
                continue
            notes = [] if shared is None else [f"shared #{shared}, read by {parents[shared]} parents"]
            strategy = getattr(op, "strategy", None)  # a plan chosen at render (min/max's)
            if isinstance(strategy, str):
                notes.append(strategy)
            if work is not None:
                i, o, w = work[k]
                notes.append(f"last commit: {i} in, {o} out" + (f", {w} touched" if w else ""))
            state = _arrangements(op)
            if state:
                notes.append("state: " + ", ".join(_describe_state(a) for a in state))
            if isinstance(op, Recompute):
                notes.append(f"state: own previous output {op.rows} rows, {op.nbytes} bytes; "
                             f"last recompute {op.rows_recomputed} rows")
            extra = f"  [{'; '.join(notes)}]" if notes else ""
            lines.append(f"{'  ' * depth}{node.describe()}  -- {node.cost()}{extra}")
        return ViewExplanation(lines)


def _advanced(u: Updates, upper: int) -> Updates:
    """``u`` with every time below ``upper`` advanced to ``upper`` (later ones kept)."""
    if not len(u) or int(u.time.min()) >= upper:
        return u
    return Updates({n: u.column(n) for n in u.column_names}, np.maximum(u.time, np.uint64(upper)), u.diff,
                   copy=False)


def _now_reasons(p: Plan, query: str) -> list[str]:
    """Why a view calling ``mz_now()`` cannot be kept by its operators (empty when it can):
    every call must be a bound of the one :class:`TemporalFilter` at the plan's root (its
    flips come out at their own times, before the step's; no operator above it takes
    them). A call elsewhere -- the select list, ``HAVING``, a subquery recomputed alone --
    changes its value at every time: the view is recomputed at every commit."""
    root = p.root
    bounds = len(root.bounds) if isinstance(root, TemporalFilter) else 0
    try:
        calls = len(now_pieces(translate(query))) - 1
    except SQLError as e:  # pragma: no cover - the catalog translated it already
        return [f"mz_now(): the query does not translate ({e}): recomputed at every commit"]
    if calls > bounds:
        return ["mz_now() other than in a temporal filter (a WHERE conjunct mz_now() op column [+|- integer] "
                "of the outermost query): recomputed at every commit"]
    return []


def _describe_state(a) -> str:
    """One arrangement in EXPLAIN: own, or shared (its id, how many views share it), its
    rows and the bytes it holds -- its runs and, once lookups made them, their key indexes
    (``KeyedArrangement.index_nbytes``: memory too, though not part of the contents)."""
    index = getattr(a, "index_nbytes", 0)
    size = f"{a.nbytes + index} bytes ({a.nbytes} runs + {index} key index)" if index else f"{a.nbytes} bytes"
    if getattr(a, "shared", False):
        return (f"shared KeyedArrangement {a.id} by {list(a.key)} (shared by {a.users} "
                f"view{'s' if a.users != 1 else ''}) {len(a)} rows, {size}")
    return f"own {type(a).__name__} {len(a)} rows, {size}"


def _type_mismatches(have: Schema, want: Schema) -> list[str]:
    """Why the operators' output columns cannot be the view's (their types differ beyond an
    exact integer widening); empty when they can."""
    if len(have) != len(want):
        return [f"the plan gives {len(have)} columns, the query {len(want)}"]
    out = []
    for h, w in zip(have, want):
        if h.type == w.type:
            continue
        if pa.types.is_integer(h.type) and pa.types.is_integer(w.type) and (
                pa.types.is_signed_integer(w.type) and w.type.bit_width >= h.type.bit_width):
            continue
        out.append(f"output column {w.name!r}: the operators give {h.type}, the query {w.type}")
    return out


def _cast_exact(u: Updates, schema: Schema) -> Updates:
    if tuple(u.schema) == tuple(schema):
        return u
    cols = {c.name: u.column(c.name).cast(c.type, safe=True) if u.column(c.name).type != c.type
            else u.column(c.name) for c in schema}
    return Updates(cols, u.time, u.diff, copy=False)


class ViewExplanation:
    """The text of ``EXPLAIN MATERIALIZED VIEW``: ``str`` / ``repr`` the lines, and an HTML
    ``<pre>`` in notebooks; :attr:`lines` one line per node."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"
