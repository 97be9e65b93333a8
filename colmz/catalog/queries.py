"""How a catalog's engine reads its objects in a query: each collection the query names
registered in DuckDB, as of the evaluation time, for the duration of the query.

Design
------
:class:`Queries` is the part of the engine (:class:`colmz.catalog.engine.Engine`, which
inherits it) that evaluates SQL over the objects. A query is translated
(:func:`colmz.sql.translate`) and its relations bound (:func:`colmz.sql.bind_relations`):
each object it reads is registered under its own DuckDB name (``"T"`` and ``t`` stay two
tables), expanded to rows as of the evaluation time plus the changes the running
transaction has not committed yet (``pending``); translate is told which columns of the
objects a text names are arrays (:meth:`Queries.translated`: a slice of one is
PostgreSQL's); DuckDB's messages are given back with the
user's names. A qualified name of no object is refused with Materialize's message (unknown
database, schema or catalog item) before DuckDB sees it. An object read before its since is
``ValueError`` saying why: not created yet, or the catalog was reloaded later (a reload
reads contents, not history).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pyarrow as pa

from colmz.catalog.column_kinds import string_kinds
from colmz.catalog.objects import Key
from colmz.dataflow.guard import error_at
from colmz.dataflow.sqlmap import array_relations
from colmz.ops import concat, consolidate
from colmz.rows import expand, relation_rows
from colmz.sql import (
    DEFAULT_DATABASE,
    DEFAULT_SCHEMA,
    RESERVED_PREFIX,
    Show,
    SQLError,
    as_qualified,
    bind_relations,
    catalog_key,
    display_name,
    reading_names,
    relation_name,
    relation_names,
    resolve_item,
    resolve_schema,
    run_query,
    sql_name,
    translate,
)
from colmz.sql.assign import pg_type_name
from colmz.sql.column_rules import column_type, column_type_rules
from colmz.sql.pushdown import push_filters
from colmz.sql.translate import referenced_names
from colmz.updates import Updates

__all__ = ["Queries"]

#: A relation name colmz.sql.bind_relations gave, in DuckDB's messages.
_RELATION = re.compile(re.escape(RESERVED_PREFIX) + r"r(\d+)")


class Queries:
    """SQL over the engine's objects (module docstring)."""

    def _show(self, s: Show) -> pa.Table:
        """``SHOW ...`` as Materialize answers it: ``name`` (and ``type`` for ``OBJECTS``) of
        the objects of a schema, in creation order; ``SHOW COLUMNS``: ``name``, ``nullable``,
        ``type`` (PostgreSQL's type names)."""
        if s.columns_of is not None:
            obj = self.object(s.columns_of if len(s.columns_of) > 1 else s.columns_of[0])
            cols = list(obj.schema)
            return pa.table({"name": [c.name for c in cols], "nullable": [True] * len(cols),
                             "type": [pg_type_name(c.type) for c in cols]})
        if s.schema is not None:
            where = resolve_schema(s.schema)
            if where[0] not in self._schemas or where[1] not in self._schemas[where[0]]:
                raise SQLError(f"unknown schema {sql_name(s.schema)!r}")
        else:
            where = (DEFAULT_DATABASE, DEFAULT_SCHEMA)
        names, kinds = [], []
        for key in self._order:
            q = as_qualified(key)
            obj = self._objects[key]
            if (q.database, q.schema) == where and (s.kind is None or obj.kind == s.kind):
                names.append(q.item)
                kinds.append(obj.kind.replace(" ", "-"))
        if s.kind is None:
            return pa.table({"name": pa.array(names, pa.string()), "type": pa.array(kinds, pa.string())})
        return pa.table({"name": pa.array(names, pa.string())})

    # ------------------------------------------------------------------ queries

    def _query(self, sql: str, as_of: int, pending: Mapping[str, Updates]) -> pa.Table:
        """Evaluate ``sql`` with catalog objects as of ``as_of`` plus ``pending`` changes."""
        return self._run_bound(self.translated(sql), as_of, lambda n: self._rows(n, as_of, pending))

    def translated(self, sql: str) -> str:
        """``sql`` translated (:func:`colmz.sql.translate`) with the array columns of the
        objects it may read told (so it may slice them as PostgreSQL does): each object
        holding an array whose name ``sql`` mentions, under each name that reads it
        (its item alone in the default schema, qualified by its schema in the default
        database, fully qualified)."""
        relations: list = []
        mentioned = referenced_names(sql)
        keys = [*(k for k in self._objects if not isinstance(k, str)), *(n for n in mentioned if n in self._objects)]
        for key in keys:
            q = as_qualified(key)
            if q.item not in mentioned and q.item.lower() not in mentioned:
                continue
            # the object's columns read once; an object without arrays adds nothing
            arrays = array_relations(q.item, ((c.name, c.type) for c in self._objects[key].schema))
            if not arrays:
                continue
            relations += [(n, arrays[0][1]) for n in reading_names(q)]
        # (a text reading no array: the translation every other reader of it shares)
        return translate(sql, tuple(relations)) if relations else translate(sql)

    def bound_query(self, translated: str) -> tuple[str, tuple[Key, ...]]:
        """The text DuckDB runs for ``translated`` (a query translated by
        :func:`colmz.sql.translate`) over the catalog's objects, and the objects it reads:
        each bound to its own DuckDB name (:func:`colmz.sql.bind_relations`, the i-th as
        ``relation_name(i)``), with PostgreSQL's rules that hang on the columns' types
        applied (:func:`colmz.sql.column_rules.column_type_rules`); a qualified name of no object is refused
        with Materialize's message. Every path evaluating a query over the objects (the
        catalog's queries, ``SUBSCRIBE``) runs this text."""
        text, bound = bind_relations(translated, frozenset(self._objects))
        self._check_qualified(translated)
        # PostgreSQL's rules that hang on the columns' types (a set operation's string literal
        # of its column's type, float and jsonb columns', interval arithmetic, || of arrays:
        # colmz.sql.column_rules), in one typing pass over the text: the types are known here
        text = column_type_rules(text, self._typed_relations(bound))
        # ... and an outer WHERE filters a subquery's rows before its (checked) items are
        # computed, as PostgreSQL pulls the subquery up
        return push_filters(text), bound

    def _run_bound(self, translated: str, t: int, rows) -> pa.Table:
        # Each object the query reads is registered under its own DuckDB name for the
        # query's duration (colmz.sql.bind_relations): "T" and t stay two tables.
        text, bound = self.bound_query(translated)
        registered = []
        try:
            for i, n in enumerate(bound):
                self._con.register(relation_name(i), rows(n))
                registered.append(relation_name(i))
            return run_query(self._con, text, t)[0]
        except SQLError as e:
            # DuckDB's message names the registered tables: say the user's names.
            msg = _RELATION.sub(lambda m: display_name(bound[int(m.group(1))])
                                if int(m.group(1)) < len(bound) else m.group(0), str(e))
            raise type(e)(msg) from None  # an UnsupportedSQL stays one
        finally:
            for n in registered:
                self._con.unregister(n)

    def _typed_relations(self, bound) -> tuple:
        # each bound relation's name in the text with its columns' (name, kind, PostgreSQL
        # type) (colmz.sql.column_rules; a string column's kind as colmz.catalog.column_kinds
        # knows it, "string" when not known)
        out = []
        for i, n in enumerate(bound):
            schema = self._objects[n].schema
            out.append((relation_name(i), tuple((c.name.lower(), *column_type(c.type, k))
                                                for c, k in zip(schema, string_kinds(schema, self.column_kinds(n))))))
        return tuple(out)

    def _check_qualified(self, translated: str, own: Key | None = None) -> None:
        """Refuse a qualified relation name that names no object, as Materialize does
        (unknown database, schema or catalog item), rather than hand it to DuckDB; ``own`` is
        an object being created that its own query may read (a continual task)."""
        for parts in relation_names(translated):
            if len(parts) < 2:
                continue
            if len(parts) > 3:
                raise SQLError(f"qualified name did not have between 1 and 3 components: {sql_name(parts)}")
            full = resolve_item(parts)
            if catalog_key(full) in self._objects or catalog_key(full) == own:
                continue
            if full.database not in self._schemas:
                raise SQLError(f"unknown database {full.database!r}")
            if full.schema not in self._schemas[full.database]:
                raise SQLError(f"unknown schema {full.schema!r}")
            raise SQLError(f"unknown catalog item {sql_name(parts)!r}")

    def _contents(self, name: str, as_of: int, pending: Mapping[str, Updates]) -> Updates:
        snap = self._readable(name, as_of).snapshot(min(as_of, self._now))
        if name in pending and len(pending[name]):
            snap = consolidate(concat([snap, pending[name]]), since=as_of)
        return snap

    def _readable(self, name: Key, as_of: int):
        """The collection of ``name``, or ``ValueError`` when ``as_of`` is before its since."""
        coll = self._bring(self._objects[name]).collection  # read up to now: moved there if it lags
        if as_of < coll.since:
            raise ValueError(self._unreadable(name, as_of))
        self.check_view_errors(name, as_of)
        return coll

    def check_view_errors(self, name: Key, as_of: int) -> None:
        """Raise the error a view ``name`` holds as of ``as_of`` -- its own or one of the
        views it reads, as Materialize's errors flow downstream -- as ``SQLError``; nothing
        for a table or a view without one (``colmz.dataflow.guard``)."""
        seen, todo = set(), [name]
        while todo:
            n = todo.pop()
            obj = self._objects.get(n)
            if n in seen or obj is None or obj.kind != "materialized view":
                continue
            seen.add(n)
            m = obj.maintained
            error = m.error_at(as_of) if m is not None else error_at(obj.errors, as_of)
            if error is not None:
                raise SQLError(error)
            todo.extend(obj.deps)

    def _unreadable(self, name: str, as_of: int) -> str:
        """Why ``name`` cannot be read at ``as_of`` (before its since): not created yet, or
        this catalog was reopened later (a reopen reads contents, not history)."""
        since = self._objects[name].collection.since
        reopened = self._reopened_at
        name = display_name(name)
        if reopened is not None and since <= reopened:
            return (f"{name!r} cannot be read at time {as_of}: this catalog was reopened at time "
                    f"{reopened} and a reopened catalog reads no further back than that (its since "
                    f"is {since})")
        return f"{name!r} did not exist at time {as_of} (its since is {since})"

    def _rows(self, name: Key, as_of: int, pending) -> pa.Table:
        # A query reads an object as a relation: its rows, in no order. Without pending
        # changes those come from the collection (MemoryCollection.relation_rows: a durable
        # table with no or few retractions is read without merging its batches).
        what = f"{self._objects[name].kind} {display_name(name)!r}"
        if name in pending and len(pending[name]):
            return expand(self._contents(name, as_of, pending), what)
        return relation_rows(self._readable(name, as_of), min(as_of, self._now), what)

    def _query_at(self, translated: str, t: int) -> pa.Table:
        # A view's query, reading objects that are already complete at t (created before it).
        return self._run_bound(translated, t, lambda n: relation_rows(
            self._bring(self._objects[n], t + 1).collection, t, f"{self._objects[n].kind} {n!r}"))
