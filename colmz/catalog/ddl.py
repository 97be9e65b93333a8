"""DDL: how a catalog creates and drops its objects, databases and schemas, and rebuilds
its objects from stored definitions.

Design
------
:class:`Definitions` is the part of the engine (:class:`colmz.catalog.engine.Engine`, which
inherits it) that changes what exists. Every statement takes effect at the engine's
``now``: a table is created empty and sealed through ``now``; a materialized view holds its
query's result at ``now``; a continual task runs from its ``AS OF`` (default ``now``) to
``now``. Materialize's rules: a new object's schema must exist and its name be free
(``IF NOT EXISTS`` leaves an existing one), ``DROP`` refuses while another object reads
the dropped one unless ``CASCADE`` (then the readers go too, transitively), ``DROP SCHEMA``
and ``DROP DATABASE`` with RESTRICT refuse a non-empty one. Every created object appends
its definition (``colmz.catalog.objects``) to the engine's definitions, which a durable
catalog commits; :meth:`Definitions.restore` builds the objects back from them.

An object only reads objects created before it: the engine brings objects forward in
creation order, so a view or task sees its inputs complete at every time.
"""

from __future__ import annotations

from dataclasses import asdict

from colmz.catalog.column_kinds import declared_kind, string_kinds
from colmz.catalog.objects import (
    CatalogObject,
    Key,
    check_case_distinct,
    check_columns,
    check_namespace_name,
    copy_schemas,
    definition_key,
    key_of,
    relation_of,
    storage_key,
)
from colmz.continual import ContinualTask, Delete, Insert, MemoryCollection
from colmz.ops import consolidate
from colmz.order import ColumnSpec
from colmz.rows import conform, rows_to_updates, storable
from colmz.sql import (
    DEFAULT_DATABASE,
    DEFAULT_SCHEMA,
    ContinualTaskStatement,
    CreateDatabase,
    CreateMaterializedView,
    CreateSchema,
    CreateTable,
    DeleteStatement,
    Drop,
    InsertStatement,
    QualifiedName,
    SQLError,
    UnsupportedSQL,
    arrow_type,
    as_qualified,
    bind_relations,
    catalog_key,
    display_name,
    rename_like_postgres,
    resolve_item,
    resolve_schema,
    select_where,
    sql_name,
    task_statement,
    uses_now,
)
from colmz.sql.write import is_json, is_jsonb, varchar_lengths
from colmz.storage.frozen import frozen
from colmz.updates import SchemaError, Updates

__all__ = ["Definitions"]


def _task_columns(schema, stmt: dict):
    # A reopened task's columns: its output's, the ones its statement declared jsonb (json)
    # given as that SQL type (the task stores jsonb's text there; checks json's).
    typed = {n: t.strip().lower() for n, t in stmt.get("columns") or () if is_jsonb(t) or is_json(t)}
    return {c.name: typed.get(c.name, c.type) for c in schema}


class Definitions:
    """The DDL of :class:`colmz.catalog.engine.Engine` (module docstring): statements that
    create and drop, and :meth:`restore` from stored definitions."""

    def _exists(self, qualifier: tuple[str, ...], name: str) -> bool:
        """Whether an object named ``qualifier.name`` exists (its schema must)."""
        full = resolve_item((*qualifier, name))
        if full.database not in self._schemas or full.schema not in self._schemas[full.database]:
            return False
        return catalog_key(full) in self._objects

    def _new_key(self, qualifier: tuple[str, ...], name: str) -> Key:
        """The key of a new object ``qualifier.name``: its schema must exist (Materialize:
        "unknown schema"), its name be free ("catalog item ... already exists")."""
        full = resolve_item((*qualifier, name))
        if full.database not in self._schemas:
            raise SQLError(f"unknown database {full.database!r}")
        if full.schema not in self._schemas[full.database]:
            raise SQLError(f"unknown schema {full.schema!r}")
        key = catalog_key(full)
        if key in self._objects:
            raise SQLError(f"catalog item {display_name(key)!r} already exists "
                           f"(an object named {display_name(key)!r}: {self._objects[key].kind})")
        return key

    def _reads(self, sql: str) -> set[Key]:
        """The catalog objects ``sql`` (a query) reads, by Materialize's name resolution."""
        return set(bind_relations(self.translated(sql), frozenset(self._objects))[1])

    def _new_collection(self, schema) -> MemoryCollection:
        c = MemoryCollection(schema, since=self._now, upper=self._now)
        return c

    def _ddl(self, s) -> None:
        now = self._now
        self._at_now = None  # DDL at now came after its commit: a write cannot join that commit
        if isinstance(s, (CreateTable, CreateMaterializedView)) and s.if_not_exists and \
                self._exists(s.qualifier, s.name):
            return  # IF NOT EXISTS: Materialize leaves the object and notes "already exists, skipping"
        if isinstance(s, CreateTable):
            key = self._new_key(s.qualifier, s.name)
            schema = {n: arrow_type(t) for n, t in s.columns}
            if len(schema) != len(s.columns):
                twice = next(n for i, (n, _) in enumerate(s.columns) if n in [m for m, _ in s.columns[:i]])
                raise SQLError(f'CREATE TABLE {s.name}: column "{twice}" specified more than once')
            check_columns("CREATE TABLE", s.name, schema)
            coll = self._new_collection(schema)
            coll.keep_counts()  # a retraction's check never builds the index over the whole table
            coll.compare_and_append(Updates.empty(coll.schema), now, now + 1)
            self._add(CatalogObject(key, "table", coll), s)
        elif isinstance(s, CreateMaterializedView):
            translated = self.translated(s.query)
            key = self._new_key(s.qualifier, s.name)
            deps = self._reads(s.query)
            self.keep_inputs(deps)
            rows = rename_like_postgres(self._query_at(translated, now), s.query)
            schema = [ColumnSpec(f.name, storable(f.type, s.name)) for f in rows.schema]
            if s.columns is not None:
                # As PostgreSQL (and Materialize): the names rename the first columns, the
                # rest keep theirs; more names than columns is an error
                if len(s.columns) > len(schema):
                    raise SchemaError(f"MATERIALIZED VIEW {s.name}: too many column names were specified "
                                      f"({len(s.columns)} for {len(schema)} column(s))")
                schema = [ColumnSpec(n, c.type) for n, c in zip(s.columns, schema)] + schema[len(s.columns):]
            names = [c.name for c in schema]
            if len(set(names)) != len(names):
                twice = next(n for i, n in enumerate(names) if n in names[:i])
                raise SchemaError(f'MATERIALIZED VIEW {s.name}: column "{twice}" specified more than once '
                                  f"(columns {names}: alias them)")
            check_case_distinct("MATERIALIZED VIEW", s.name, names)
            coll = self._new_collection(schema)
            if self._views == "incremental":  # its operators write its contents (colmz.catalog.views)
                mv = self._maintain(key, s.query, translated, coll, deps, now, s.incremental == "require")
                self._add(CatalogObject(key, "materialized view", coll, deps, translated,
                                        uses_now=uses_now(translated), maintained=mv), s)
                return
            new = consolidate(rows_to_updates(conform(rows, coll.schema, f"MATERIALIZED VIEW {s.name}"), now, 1))
            coll.compare_and_append(new, now, now + 1)
            self._add(CatalogObject(key, "materialized view", coll, deps, translated,
                                    uses_now=uses_now(translated), contents=new), s)
        elif isinstance(s, ContinualTaskStatement):
            self._create_task(s)
        elif isinstance(s, CreateSchema):
            db = DEFAULT_DATABASE if s.database is None else s.database
            if db not in self._schemas:
                raise SQLError(f"unknown database {db!r}")
            if s.name in self._schemas[db]:
                if s.if_not_exists:
                    return
                raise SQLError(f"schema {s.name!r} already exists")
            check_namespace_name("schema", s.name)
            self._schemas = copy_schemas(self._schemas)
            self._schemas[db].append(s.name)
        elif isinstance(s, CreateDatabase):
            if s.name in self._schemas:
                if s.if_not_exists:
                    return
                raise SQLError(f"database {s.name!r} already exists")
            check_namespace_name("database", s.name)
            self._schemas = copy_schemas(self._schemas)
            self._schemas[s.name] = [DEFAULT_SCHEMA]  # as Materialize: a new database has public
        elif isinstance(s, Drop):
            if s.kind == "SCHEMA":
                self._drop_schema(s)
            elif s.kind == "DATABASE":
                self._drop_database(s)
            else:
                self._drop(s)
        else:  # pragma: no cover - parse returns only the kinds above
            raise SQLError(f"unexpected statement {type(s).__name__}")

    def _create_task(self, s: ContinualTaskStatement) -> None:
        key = self._new_key(s.qualifier, s.name)
        input_key = key_of((*s.input_qualifier, s.input))
        if input_key == key:
            raise ValueError(f"continual task output {display_name(key)!r} is not allowed to be its input")
        if input_key not in self._objects:
            raise SQLError(f"CREATE CONTINUAL TASK {display_name(key)}: unknown catalog item "
                           f"{display_name(input_key)!r} (its ON INPUT)")
        src = self._objects[input_key]
        for name, typ in s.columns or ():
            if varchar_lengths([typ]):  # (a table's varchar(n) is measured on write: colmz.sql.write.fit_lengths)
                raise UnsupportedSQL(f"continual task column {name!r} of type {typ} is not supported by colmz (its "
                                     "length is not enforced on INSERT): use TEXT or VARCHAR")
        # The objects the statements read (bound as queries bind them); the task itself is
        # not an object yet: its own name means its output as of T-1.
        names: set[Key] = set()
        body = []
        rel = relation_of(key)
        for i, b in enumerate(s.body):
            query = b.query if isinstance(b, InsertStatement) else select_where(rel, b.where)
            try:
                # A qualified name of no object: Materialize's error, not DuckDB's.
                self._check_qualified(self.translated(query), own=key)
            except SQLError as e:
                label = task_statement(relation_of(key), i, "insert" if isinstance(b, InsertStatement)
                                       else "delete", predicate=isinstance(b, DeleteStatement) and bool(b.where))
                raise SQLError(f"{label}: {e}") from None
            if isinstance(b, InsertStatement):
                body.append(Insert(b.query))
            else:
                body.append(Delete(b.where))
            names |= self._reads(query)
        self.keep_inputs({input_key, *(n for n in names if n in self._objects)})
        refs = {n: self._bring(self._objects[n]).collection for n in sorted(names, key=str)
                if n in self._objects and n != input_key}
        self._bring(src)  # the task runs to now: what it reads complete up to it
        # a jsonb column given as its SQL type: the task stores jsonb's text there
        columns = None if s.columns is None else \
            {n: t if is_jsonb(t) or is_json(t) else arrow_type(t) for n, t in s.columns}
        if columns is not None:
            check_columns("CREATE CONTINUAL TASK", s.name, {n: arrow_type(t) for n, t in s.columns})
            self._check_task_jsonb(key, s)
        as_of = self._now if s.as_of is None else s.as_of
        if as_of > self._now:
            raise ValueError(f"CONTINUAL TASK {s.name} AS OF {as_of} is after cat.now={self._now}")
        task = ContinualTask(
            key, {input_key: src.collection}, body, references=refs, columns=columns,
            snapshot=s.snapshot, as_of=as_of, connection=self._con,
            column_kinds=self._task_kinds(key, input_key, refs, s.columns),
        )
        # The output exists from the task's initial as-of on (it holds nothing before).
        task.output.advance_since(as_of)
        task.run()
        s.as_of = as_of
        self._add(CatalogObject(key, "continual task", task.output, {input_key, *refs}, task=task), s)

    def _task_kinds(self, key: Key, input_key: Key, refs, columns) -> dict:
        """The column kinds a task's statements are typed by (``colmz.catalog.column_kinds``):
        its input's and references', and its own output's when its columns are declared
        (``columns``: (name, SQL type) pairs); an output without a column list is of no known
        kind (at CREATE and on reopen alike)."""
        kinds = {n: string_kinds(self._objects[n].schema, self.column_kinds(n)) for n in (input_key, *refs)}
        if columns:
            kinds[key] = [declared_kind(t, arrow_type(t)) for _, t in columns]
        return kinds

    def _check_task_jsonb(self, key: Key, s: ContinualTaskStatement) -> None:
        """PostgreSQL's (and Materialize's) type error of a task's ``INSERT`` writing a text
        expression to one of its ``jsonb`` columns (there is no assignment cast from text to
        jsonb), raised at ``CREATE`` as a table's ``INSERT`` raises it
        (:func:`colmz.sql.write.check_jsonb_values`). A column read is text when its kind says
        so (``colmz.catalog.column_kinds``): a table's or the task's own declared type, a
        view's or another task's kept kind; a string column of no known kind is not text."""
        targets = [n if declared_kind(t) in ("jsonb", "json") else None for n, t in s.columns]
        if not any(targets):
            return
        types = [declared_kind(t) for _, t in s.columns]
        rel = relation_of(key)
        own = [(n, declared_kind(t, arrow_type(t)), arrow_type(t)) for n, t in s.columns]
        for i, b in enumerate(s.body):
            if not isinstance(b, InsertStatement):
                continue
            try:
                self.check_jsonb_text(b.query, targets, self.read_columns(b.query, key, own), types)
            except SQLError as e:
                raise type(e)(f"{task_statement(rel, i, 'insert')}: {e}") from None  # a refusal stays one

    def _drop(self, s: Drop) -> None:
        keys = []
        for name in s.names:
            key = key_of(name)
            written = name if isinstance(name, str) else sql_name(name)
            if key not in self._objects:
                if s.if_exists:
                    continue
                raise KeyError(f"DROP {s.kind} {written}: unknown catalog item {written!r}")
            obj = self._objects[key]
            if obj.kind != s.kind.lower():
                raise SQLError(f"DROP {s.kind} {display_name(key)}: {display_name(key)!r} is a {obj.kind}")
            keys.append(key)
        self._drop_keys(keys, s.cascade)

    def _drop_keys(self, keys, cascade: bool) -> None:
        """Drop the objects ``keys``; with ``cascade`` every object reading one of them too
        (transitively), else refuse while one does (Materialize's RESTRICT)."""
        gone = set(keys)
        # who reads what: the schedule's users (colmz.catalog.schedule), so a DROP looks at
        # the objects it drops and their readers, not at every object
        users = self._scheduled().users
        if cascade:
            todo = list(gone)
            while todo:
                for n in users.get(todo.pop(), ()):
                    if n not in gone:
                        gone.add(n)
                        todo.append(n)
        else:
            for key in keys:
                found = [display_name(n) for n in users.get(key, ()) if n not in gone]
                if found:
                    raise SQLError(f"cannot drop {display_name(key)!r}: {', '.join(found)} depend(s) on it")
        order = [n for n in self._order if n not in gone]
        self.schedule_remove(gone, order)
        for n in gone:
            del self._objects[n]
            self._shared.release(n)  # the arrangements it shared (the last user frees one)
        self._order = order
        self._defs = [d for d in self._defs if definition_key(d) not in gone]

    def _drop_schema(self, s: Drop) -> None:
        db, schema = resolve_schema(s.names[0])
        if db not in self._schemas or schema not in self._schemas[db]:
            if s.if_exists:
                return
            raise SQLError(f"unknown database {db!r}" if db not in self._schemas
                           else f"unknown schema {schema!r}")
        inside = [n for n in self._order if as_qualified(n)[:2] == (db, schema)]
        if inside and not s.cascade:
            raise SQLError(f"schema '{db}.{schema}' cannot be dropped without CASCADE while it "
                           "contains objects")
        self._drop_keys(inside, True)
        self._schemas = copy_schemas(self._schemas)
        self._schemas[db].remove(schema)

    def _drop_database(self, s: Drop) -> None:
        db = s.names[0]
        if db not in self._schemas:
            if s.if_exists:
                return
            raise SQLError(f"unknown database {db!r}")
        if self._schemas[db] and not s.cascade:
            raise SQLError(f"database '{db}' cannot be dropped with RESTRICT while it contains schemas")
        self._drop_keys([n for n in self._order if as_qualified(n).database == db], True)
        self._schemas = copy_schemas(self._schemas)
        del self._schemas[db]

    def _add(self, obj: CatalogObject, stmt) -> None:
        self.schedule_add(obj)  # its edges and due time (colmz.catalog.schedule)
        self._objects[obj.name] = obj
        self._order.append(obj.name)
        kind = {CreateTable: "table", CreateMaterializedView: "materialized view",
                ContinualTaskStatement: "continual task"}[type(stmt)]
        body = asdict(stmt)
        body.pop("if_not_exists", None)  # how it was created, not what it is
        if body.get("append_only") is False:
            body.pop("append_only")  # said only when WITH (APPEND ONLY) is
        if body.get("incremental", "") is None:
            body.pop("incremental")  # said only when WITH (INCREMENTAL = ...) is
        if kind == "continual task":
            body["body"] = [
                {"insert": b.query} if isinstance(b, InsertStatement) else {"delete": b.where}
                for b in stmt.body
            ]
        d = {"name": as_qualified(obj.name).item, "kind": kind, "since": obj.collection.since,
             "key": storage_key(display_name(obj.name)), "stmt": body}
        if not body.get("columns"):
            # a view's (or a task's without a column list) json/jsonb/text column kinds,
            # derived once from its query (declared columns say them themselves)
            d["column_kinds"] = self.derive_kinds(obj.name, d)
        if isinstance(obj.name, QualifiedName):
            # Only an object outside materialize.public says where it lives: a definition
            # without these (every one written before schemas existed) is a public one.
            d["database"], d["schema"] = obj.name.database, obj.name.schema
        # frozen: nothing changes a definition in place (a durable store compares them by
        # identity, colmz.catalog.store)
        self._defs.append(frozen(d))

    def restore(self, defs: list[dict], collections: dict[Key, MemoryCollection]) -> None:
        """Rebuild the objects of the stored definitions ``defs`` (in creation order) on
        ``collections``, each object's contents loaded from storage, and keep ``defs`` as
        this engine's definitions. Each object is as its definition made it; bringing them
        to ``now`` is :meth:`colmz.catalog.engine.Engine.bring_forward`'s."""
        self._defs = defs = [frozen(d) for d in defs]
        for d in defs:
            key = definition_key(d)
            mem = collections[key]
            st = d["stmt"]
            if d["kind"] == "table":
                # its retraction index kept from now on: the changes after the contents
                # loaded, the contents themselves asked of the store (load_collection)
                mem.keep_counts()
                obj = CatalogObject(key, "table", mem)
            elif d["kind"] == "materialized view":
                translated = self.translated(st["query"])
                obj = CatalogObject(key, "materialized view", mem, self._reads(st["query"]), translated,
                                    uses_now=uses_now(translated),
                                    contents=mem.snapshot(mem.upper - 1))
            else:
                body = [Insert(b["insert"]) if "insert" in b else Delete(b["delete"]) for b in st["body"]]
                input_key = key_of((*st.get("input_qualifier", ()), st["input"]))
                names = set()
                for b in st["body"]:
                    names |= self._reads(b["insert"] if "insert" in b
                                         else select_where(relation_of(key), b["delete"]))
                refs = {n: self._objects[n].collection for n in sorted(names, key=str)
                        if n in self._objects and n != input_key}
                task = ContinualTask(
                    key, {input_key: self._objects[input_key].collection}, body,
                    references=refs, columns=_task_columns(mem.schema, st), snapshot=st["snapshot"],
                    as_of=st["as_of"],
                    output=mem, connection=self._con,
                    column_kinds=self._task_kinds(key, input_key, refs, st.get("columns")),
                )
                obj = CatalogObject(key, "continual task", mem, {input_key, *refs}, task=task)
            self._objects[key] = obj
            self._order.append(key)
