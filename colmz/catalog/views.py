"""How a catalog's engine keeps its materialized views by their operators, and explains them.

Design
------
:class:`Views` is the part of the engine (:class:`colmz.catalog.engine.Engine`, which
inherits it) that holds each materialized view's :class:`colmz.dataflow.maintained.MaintainedView`
when the engine maintains views incrementally (``views="incremental"``, the default). At
CREATE the view's query is planned (:mod:`colmz.dataflow.plan`), its operators rendered and
fed its inputs' contents once; at each commit a view is fed the changes its inputs committed
at that time, in creation order, and its operators write the view's own change through the
correction sink -- no view keeps its previous result to diff against. A view outside the
operators' subset, or any view with ``views="recompute"`` (the oracle), is recomputed from
its query and diffed (:meth:`colmz.catalog.engine.Engine.recompute`). The operators' state
is part of the engine's rolled-back state (``CatalogObject.ROLLBACK_FIELDS``): a failed call
leaves it as it was. A reopened catalog rebuilds each view's operators by one computation
over its inputs -- or, when a durable catalog has the operators' state
(``colmz.dataflow.state``, kept by ``colmz.catalog.durable``), restores them from it without
reading any input; the sink then writes only the difference from the persisted view.

Shared arrangements. The engine holds a :class:`colmz.dataflow.shared.SharedArrangements`
(``_shared``): an operator arranging one of its inputs as is (a table, view or task read
whole) by a key takes the arrangement of that relation by that key, shared with every view
doing the same (Materialize's arrangements by collection and key). A view is attached to
the arrangements it uses when it is created and released when it is dropped (the last user
frees one). At each commit, :meth:`Views._feed_shared` inserts a relation's changes into its
shared arrangements once, right after the relation reached the commit's time (tables before
any view steps; a view or task after its own step), so every reader finds them there.

Durable shared arrangements. A shared arrangement is the registry's, not a view's: a view's
exported state (``colmz.dataflow.state.operator_states``) holds only a reference to it, and
a durable catalog keeps it as a state object of its own, named by its
:func:`~colmz.dataflow.shared.arrangement_id`. On reopen the catalog puts it back in the
registry (:meth:`Views.restore_shared`) before any view is rendered, so the views rendered
then find it there -- restored once, whichever views use it -- and read no input for it; a
shared arrangement without durable state is filled from its relation when a view first asks
for it, as at CREATE. Entries restored for views that do not use them any more are freed
once the views are rendered (:meth:`Views.discard_unused_shared`).
"""

from __future__ import annotations

import pyarrow as pa

from colmz.catalog.objects import Key, key_of
from colmz.continual import MemoryCollection
from colmz.dataflow.maintained import MaintainedView, ViewExplanation
from colmz.dataflow.shared import SharedArrangements, SharedSource
from colmz.dataflow.step import consolidated_at
from colmz.order import ColumnSpec
from colmz.rows import at_time, conform, rows_to_updates, storable
from colmz.sql import (
    ExplainView,
    SQLError,
    display_name,
    rename_like_postgres,
    sql_name,
    uses_now,
)
from colmz.updates import Updates

__all__ = ["Views"]


class Views:
    """Materialized views kept by their operators (module docstring).

    ``view_work`` counts (cumulative, never rolled back) the views whose operators were fed
    their inputs' contents (``initialized``, with the ``input_rows_read``) and those restored
    from durable state instead (``restored``, by ``resume_view(key, view, time) -> bool``,
    which a durable catalog sets while it loads). ``shared_work`` counts the shared
    arrangements kept by views that were ``filled`` from their relation (at CREATE, or at a
    load without their durable state) and those ``restored`` from durable state at a load
    (by ``resume_shared(engine)``, which a durable catalog sets while it loads).
    """

    def _changes_at(self, name: Key, t: int, known: dict | None = None) -> Updates:
        """What ``name`` wrote for the commit at ``t`` (written already), at ``t``: those at
        times after ``now`` too -- a view with a temporal filter writes its flips at their
        own times, which a commit jumping past them writes together. ``known``: the changes
        of this commit read so far (the tables' as the commit wrote them, consolidated),
        taken from there and filled, so each object's change is read once per commit however
        many views and shared arrangements take it."""
        change = None if known is None else known.get(name)
        if change is None:
            change = consolidated_at(at_time(self._objects[name].collection.updates(self._now + 1, t + 1), t), t)
            if known is not None:
                known[name] = change
        return change

    def _deltas_at(self, names, t: int, known: dict | None = None) -> dict:
        """The changes each object of ``names`` wrote for the commit at ``t``
        (:meth:`_changes_at`, through ``known``)."""
        return {n: self._changes_at(n, t, known) for n in names}

    @property
    def shared(self) -> SharedArrangements:
        """The arrangements the views' operators share (``colmz.dataflow.shared``)."""
        return self._shared

    def _feed_shared(self, name: Key, t: int, known: dict | None = None) -> None:
        """Insert ``name``'s changes at ``t`` (written already, :meth:`_changes_at` through
        ``known``) into its shared arrangements."""
        if self._shared.arranges(name):
            change = self._changes_at(name, t, known)
            if len(change):
                for arr in self._shared.of(name):  # kept before the feed changes them (Engine._keep)
                    self._keep(arr)
            self._shared.feed(name, t, change)

    def _maintain(self, key: Key, query: str, translated: str, coll: MemoryCollection, deps,
                  t: int, require: bool = False) -> MaintainedView:
        """The operators of view ``key`` over ``coll``, fed its inputs' contents at ``t``."""
        inputs = {n: self._objects[n].schema for n in deps if isinstance(n, str)}
        what = f"MATERIALIZED VIEW {display_name(key)}"

        def evaluate(at: int) -> Updates:
            return rows_to_updates(conform(self._query_at(translated, at), coll.schema, what), at, 1)

        def subquery_schema(text: str):
            # a FROM subquery that falls back, typed as the recompute path types its rows
            try:
                rows = rename_like_postgres(self._query_at(self.translated(text), t), text)
                cols = [ColumnSpec(f.name, storable(f.type, what)) for f in rows.schema]
            except Exception:  # noqa: BLE001 - untyped: the enclosing query falls back whole
                return None
            return cols if len({c.name for c in cols}) == len(cols) else None

        def subquery_evaluate(text: str, schema, at: int) -> Updates:
            return rows_to_updates(conform(self._query_at(self.translated(text), at), schema, what), at, 1)

        snapshots: dict[Key, Updates] = {}

        def read(n: Key) -> Updates:
            # an input's contents, read once however many need them (its shared arrangements
            # filled from it, the operators initialized with it), counted in ``view_work``
            if n not in snapshots:
                snapshots[n] = self._bring(self._objects[n], t + 1).collection.snapshot(t)
                self.view_work["input_rows_read"] += len(snapshots[n])
            return snapshots[n]

        shared = SharedSource(self._shared, inputs, read, t)
        mv = MaintainedView.create(query, coll.schema, inputs, coll, evaluate=evaluate, require=require,
                                   uses_now=uses_now(translated), reads=set(deps), name=display_name(key),
                                   subquery_schema=subquery_schema, subquery_evaluate=subquery_evaluate,
                                   shared=shared, append_only=[n for n in inputs if self.append_only(n)],
                                   kinds={n: self.column_kinds(n) for n in inputs})
        # every shared arrangement its operators read; one made for operators not kept is freed
        used = [s.ident for s in mv.shared]
        self._shared.attach(key, used)
        self._shared.discard([i for i in shared.made if i not in used])
        self.shared_work["filled"] += len([i for i in shared.made if i in used])
        # -- durable state (colmz.catalog.durable): operators restored, not fed their inputs --
        if self.resume_view is not None and self.resume_view(key, mv, t):
            self.view_work["restored"] += 1
            return mv
        contents = {n: read(n) for n in inputs}
        self.view_work["initialized"] += 1
        # --------------------------------------------------------------------------------
        mv.initialize(t, contents)
        return mv

    def explain(self, name: Key | tuple[str, ...]) -> ViewExplanation:
        """How materialized view ``name`` is maintained (``colmz.Catalog.explain``)."""
        obj = self.object(name)
        if obj.kind != "materialized view":
            raise ValueError(f"{display_name(obj.name)!r} is a {obj.kind}: EXPLAIN MATERIALIZED VIEW explains views")
        if obj.maintained is None:
            return ViewExplanation([f"materialized view {display_name(obj.name)}: recompute (views='recompute'): "
                                    "the query recomputed at each commit changing an input, diffed against "
                                    "the previous contents"])
        return obj.maintained.explain(display_name(obj.name))

    def explain_rows(self, s: ExplainView) -> pa.Table:
        """``EXPLAIN MATERIALIZED VIEW``: one row per line of :meth:`explain`, column ``plan``."""
        key = key_of((*s.qualifier, s.name))
        if key not in self._objects:
            written = sql_name((*s.qualifier, s.name)) if s.qualifier else s.name
            raise SQLError(f"unknown catalog item {written!r}")
        obj = self._objects[key]
        if obj.kind != "materialized view":
            raise SQLError(f"{display_name(key)!r} is not a materialized view (it is a {obj.kind})")
        return pa.table({"plan": pa.array(self.explain(key).lines, pa.string())})
