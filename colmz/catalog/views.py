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
"""

from __future__ import annotations

import pyarrow as pa

from colmz.catalog.objects import Key, key_of
from colmz.continual import MemoryCollection
from colmz.dataflow.maintained import MaintainedView, ViewExplanation
from colmz.ops import consolidate
from colmz.order import ColumnSpec
from colmz.rows import conform, rows_to_updates, storable
from colmz.sql import (
    ExplainView,
    SQLError,
    display_name,
    rename_like_postgres,
    sql_name,
    translate,
    uses_now,
)
from colmz.updates import Updates

__all__ = ["Views"]


class Views:
    """Materialized views kept by their operators (module docstring).

    ``view_work`` counts (cumulative, never rolled back) the views whose operators were fed
    their inputs' contents (``initialized``, with the ``input_rows_read``) and those restored
    from durable state instead (``restored``, by ``resume_view(key, view, time) -> bool``,
    which a durable catalog sets while it loads).
    """

    def _deltas_at(self, names, t: int) -> dict:
        """The changes each object of ``names`` committed at ``t`` (written already)."""
        return {n: consolidate(self._objects[n].collection.updates(t, t + 1)) for n in names}

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
                rows = rename_like_postgres(self._query_at(translate(text), t), text)
                cols = [ColumnSpec(f.name, storable(f.type, what)) for f in rows.schema]
            except Exception:  # noqa: BLE001 - untyped: the enclosing query falls back whole
                return None
            return cols if len({c.name for c in cols}) == len(cols) else None

        def subquery_evaluate(text: str, schema, at: int) -> Updates:
            return rows_to_updates(conform(self._query_at(translate(text), at), schema, what), at, 1)

        mv = MaintainedView.create(query, coll.schema, inputs, coll, evaluate=evaluate, require=require,
                                   uses_now=uses_now(translated), reads=set(deps), name=display_name(key),
                                   subquery_schema=subquery_schema, subquery_evaluate=subquery_evaluate)
        # -- durable state (colmz.catalog.durable): operators restored, not fed their inputs --
        if self.resume_view is not None and self.resume_view(key, mv, t):
            self.view_work["restored"] += 1
            return mv
        contents = {n: self._objects[n].collection.snapshot(t) for n in inputs}
        self.view_work["initialized"] += 1
        self.view_work["input_rows_read"] += sum(len(u) for u in contents.values())
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
