"""``Catalog``: named collections at logical times, with SQL (DuckDB) and continual tasks.

Design
------
A catalog holds tables, materialized views and continual tasks, each a collection of
updates at ``uint64`` times. It keeps one clock, :attr:`Catalog.now`: every collection is
complete (sealed) up to and including ``now`` -- its upper is ``now + 1`` -- and reads default
to ``as_of=now``.

* A script given to :meth:`Catalog.execute` is one transaction: its writes (``INSERT``,
  ``DELETE``, ``UPDATE``) commit together at one time ``T`` -- ``now + 1``, or ``time=`` (never
  below ``now``: earlier times are sealed) -- each statement seeing the previous statements'
  writes. DDL (``CREATE``/``DROP``) takes effect at ``now``. ``time=now`` joins the commit that
  sealed ``now`` (rolled back and redone with both transactions' writes) and is allowed only where
  that revises no sealed output: every view and task must come out at ``now`` unchanged.
* After the tables are written at ``T``, every derived object is brought to ``T`` in creation
  order, so an object only reads objects created before it and a task reading another task
  sees that task's write at ``T``. A materialized view is recomputed from its query when
  something it reads changed at ``T`` (always, when it calls ``mz_now()``) and the difference
  written at ``T``. A continual task runs :meth:`colmz.ContinualTask.run`.
* A commit that raises (a bad statement, a continual task's guard rail) rolls every
  collection and task back as it was (``colmz.rollback``: the catalog, its objects, their
  collections and tasks declare ``ROLLBACK_FIELDS``): the catalog is unchanged. Saving that
  state before a call costs the number of objects, not their history (a collection's
  history is append-only, saved as its length).

Names are Materialize's (``src/sql/src/names.rs`` upstream, :mod:`colmz.sql.names`): a
catalog has databases and schemas (``CREATE DATABASE`` -- with its schema ``public`` --,
``CREATE SCHEMA [db.]s``, ``DROP SCHEMA``/``DROP DATABASE`` with Materialize's RESTRICT and
CASCADE), an object is ``item``, ``schema.item`` or ``db.schema.item`` and an unqualified
name is in ``materialize.public``. Objects are keyed by :data:`Key`: a default-schema object
by its name, so a catalog written before schemas existed (every definition without
``database``/``schema``) opens with its names public ones.

Every query runs in DuckDB over Arrow tables registered for the duration of the query: each
collection the query names is read as of the evaluation time and expanded to rows. SQL is
parsed and translated by :mod:`colmz.sql`.

Storage is behind the collection interface of :mod:`colmz.continual`. Every object works
on a :class:`colmz.continual.MemoryCollection`, so a failed commit can be rolled back. With
``path=DIR`` (or a storage URL, ``mem://name`` or ``s3://bucket/prefix`` with
``consensus=``; see ``colmz.storage.url``) the catalog is durable through a
:class:`colmz.catalog_store.CatalogStore`: every object has a ``colmz.Arrangement`` there
(:class:`ArrangementCollection`), and one versioned record (consensus key
``catalog/<id>``, the catalog's identity) holds the definitions and the last transaction's
intent, as persist's txn-wal keeps a txns shard beside its data shards
(``src/txn-wal/src/lib.rs`` upstream). Every durable call is one transaction:

* it runs in memory against the record version the handle read, then its changes (every
  object's, and its DDL) are committed by one compare-and-set of the record -- the commit
  point -- and only then applied to the arrangements, idempotently (by this handle, or by
  the next handle or reopen when this one crashed);
* when another handle committed since this one read (the compare-and-set lost), nothing is
  visible: the handle is refreshed (:meth:`Catalog.refresh`) and the call's statements run
  again against the new state, at most :data:`RETRIES` times, as a serializable
  transaction is retried (``src/persist-client/src/internal/machine.rs`` upstream: read the
  head, apply the command, compare-and-set, on a lost race refresh and retry);
* a call that raises keeps nothing of itself, in memory or in storage (the handle may have
  been caught up with other handles' commits first, as every write call is); a handle that
  cannot know (an indeterminate compare-and-set) refreshes itself before its next call.

A write call first compares the record's version with the one it holds (one consensus
read) and refreshes when another handle moved it. Reads (:meth:`Catalog.sql`,
:meth:`Catalog.read`) read the handle's memory: :meth:`Catalog.refresh` to see other
handles' commits; a read that needs data another handle compacted away refreshes and reads
again (bounded). Reopening loads each object's contents as of the oldest upper (plus the few
changes after it) -- not its history -- and resumes: tables written past a task's output are
processed by the task from the output's upper on (no snapshot replayed), views are
recomputed. Reads before the reopen (or refresh) time are no longer possible. A store
written by the previous layout (definitions in the blob :data:`RECORD_KEY`) is converted on
open; a store holding arrangements but no definitions is refused
(:class:`colmz.catalog_store.MissingDefinitions`).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa

from colmz.catalog_store import (
    INTENT_PREFIX,
    LEGACY_INTENT_KEY,
    LEGACY_RECORD_KEY,
    ArrangementCollection,
    CatalogStore,
    CompactedAway,
    check_catalog_location,
)
from colmz.continual import ContinualTask, Delete, Insert, MemoryCollection
from colmz.errors import NegativeMultiplicity
from colmz.frontier import MAX_TIME, Frontier, check_time
from colmz.ops import concat, consolidate
from colmz.order import ColumnSpec
from colmz.rollback import Saved, roll_back, save
from colmz.rows import conform, expand, relation_rows, rows_to_updates, storable
from colmz.sql import (
    DEFAULT_DATABASE,
    DEFAULT_SCHEMA,
    RESERVED_PREFIX,
    ContinualTaskStatement,
    CreateDatabase,
    CreateMaterializedView,
    CreateSchema,
    CreateTable,
    DeleteStatement,
    Drop,
    InsertStatement,
    QualifiedName,
    Query,
    Show,
    SQLError,
    UnsupportedSQL,
    UpdateStatement,
    arrow_type,
    as_qualified,
    bind_relations,
    cast_select,
    catalog_key,
    display_name,
    identifier,
    parse,
    relation_name,
    relation_names,
    rename_like_postgres,
    resolve_item,
    resolve_schema,
    run_query,
    select_list_is_empty,
    select_where,
    session,
    sql_name,
    task_statement,
    translate,
    update_select,
    uses_now,
)
from colmz.sql.assign import arrow_assignment, assignment_select, typed_values
from colmz.sql.tokens import require_text
from colmz.storage.base import Indeterminate
from colmz.storage.state import CommitConflict
from colmz.updates import SchemaError, Updates

__all__ = ["INTENT_KEY", "INTENT_PREFIX", "RECORD_KEY", "RETRIES", "RETRY_BACKOFF", "ArrangementCollection",
           "Catalog", "CatalogObject"]

#: The blob key of the previous layout's definitions (converted on open; no longer written).
RECORD_KEY = LEGACY_RECORD_KEY
#: The consensus key of the previous layout's intent (converted on open; no longer written).
INTENT_KEY = LEGACY_INTENT_KEY
#: How many times a durable call whose commit lost to another handle (or whose read hit data
#: compacted away by another handle) is refreshed and run again before it raises.
RETRIES = 16
#: The first retry waits up to this many seconds, each next one up to twice as long (at most
#: 1 s), uniformly at random: the loser of a race does not retry in step with the winner
#: (persist's ``src/persist-client/src/retry.rs`` upstream backs off with jitter too).
RETRY_BACKOFF = 0.01


#: A catalog's key for an object: the item name (a ``str``) of an object of the default
#: schema ``materialize.public``, the full :class:`colmz.sql.QualifiedName` of any other
#: (:func:`colmz.sql.catalog_key`).
Key = str | QualifiedName


@dataclass
class CatalogObject:
    """One named object: its kind, storage, and the objects it reads (all by :data:`Key`)."""

    #: What a failing catalog call may change (``colmz.rollback``): the collection's and the
    #: task's state, both rolled back in place (they are shared: a task writes the
    #: collection, views and tasks read it), and a view's contents. The rest is its definition.
    ROLLBACK_FIELDS = ("collection", "task", "contents")

    name: Key
    kind: str  # "table", "materialized view", "continual task"
    collection: object
    deps: set[str] = field(default_factory=set)
    query: str | None = None  # a materialized view's translated query
    uses_now: bool = False
    task: ContinualTask | None = None
    contents: Updates | None = None  # a materialized view's contents at now

    @property
    def schema(self) -> tuple[ColumnSpec, ...]:
        return tuple(self.collection.schema)


class Catalog:
    """Named collections at logical times, queried and maintained with SQL.

    Parameters
    ----------
    path : str, os.PathLike or ``colmz.storage.url.Location``, optional
        ``None`` keeps everything in memory; a directory or storage URL (or a store already
        opened) keeps every object durable as a ``colmz.Arrangement`` and reopening resumes
        where the catalog stopped.
    consensus : str, optional
        The consensus URL for an ``s3://`` path (as ``colmz.Arrangement.open``).
    maintain_every : int, default 16
        Durable catalogs compact their arrangements up to ``now`` every this many commits
        (0: never), so reopening reads each object's contents rather than its history.
    external_access : bool, default True
        ``False`` runs the catalog's DuckDB connection with ``enable_external_access``
        off (and, as every colmz connection, its configuration locked): a query can then
        read only the catalog's objects -- no ``read_csv``, ``glob``, ``COPY``, ``ATTACH``.
        With the default, as in DuckDB, a query can read any local file the process can:
        pass ``False`` where the SQL comes from someone who should not.
    create : bool, default True
        ``False`` opens an existing durable catalog only (``FileNotFoundError`` when there is
        none; nothing is created), as ``colmz.Arrangement.open(create=False)``. A catalog
        whose store colmz cannot write (a read-only directory: its consensus opens
        read-only) is then opened to read: the reopen commits nothing and a write raises
        ``PermissionError`` with the catalog unchanged.

    Raises
    ------
    FileNotFoundError
        ``create=False`` and no catalog at ``path``.
    colmz.catalog_store.NestedStore
        A new catalog at ``path`` would lie inside another store's directory or blob.

    Examples
    --------
    >>> cat = Catalog()
    >>> cat.execute("CREATE TABLE append_only (key INT, val INT)")
    >>> cat.execute('''CREATE CONTINUAL TASK upsert (key INT, val INT) ON INPUT append_only AS (
    ...     DELETE FROM upsert WHERE key IN (SELECT key FROM append_only);
    ...     INSERT INTO upsert SELECT key, max(val) FROM append_only GROUP BY key)''')
    >>> cat.execute("INSERT INTO append_only VALUES (1, 2), (1, 1)")
    >>> cat.execute("INSERT INTO append_only VALUES (1, 3), (2, 4)")
    >>> cat.now, cat.sql("SELECT * FROM upsert ORDER BY key").to_pylist()
    (2, [{'key': 1, 'val': 3}, {'key': 2, 'val': 4}])
    """

    #: The in-memory state a failed call rolls back (``colmz.rollback``): the objects (each
    #: rolled back in place, so a task's output and a view's inputs stay the same objects),
    #: their order, ``now``, the definitions and how to reopen ``now``. The durable record's
    #: mirror, the connection, configuration and stats are not (tests/colmz/test_rollback.py
    #: says why for each).
    ROLLBACK_FIELDS = ("_objects", "_order", "_now", "_defs", "_at_now", "_schemas")

    def __init__(self, path: str | os.PathLike | None = None, *, consensus: str | None = None,
                 maintain_every: int = 16, external_access: bool = True, create: bool = True):
        if isinstance(maintain_every, bool) or not isinstance(maintain_every, int) or maintain_every < 0:
            raise ValueError(f"maintain_every must be a non-negative int, got {maintain_every!r}")
        if not isinstance(create, bool):
            raise TypeError(f"create must be a bool, got {create!r}")
        self._maintain_every = maintain_every
        self._persists = 0
        self._con = session(external_access=external_access)
        self._path = None
        self._consensus = consensus
        self._read_only = False
        self._reset()
        if path is None and consensus is not None:
            raise ValueError("consensus= needs a path (the blob store of a durable catalog)")
        if path is not None:
            from colmz.storage.url import Location, open_location

            if isinstance(path, Location):
                if consensus is not None:
                    raise ValueError("give consensus= with a URL, not with an opened Location")
                self._loc = path
                self._path = path.url
            elif isinstance(path, (str, os.PathLike)):
                self._path = os.fspath(path)
                # before anything is created: not inside another store, not a new one when
                # create=False
                check_catalog_location(self._path, consensus=consensus, create=create)
                self._loc = open_location(self._path, consensus=consensus, create=create)
            else:
                raise TypeError(f"path must be a directory, storage URL or Location, got {type(path).__name__}")
            self._blob = self._loc.blob
            # a store colmz cannot write (a read-only directory's consensus opens read-only)
            self._read_only = bool(getattr(self._loc.consensus, "read_only", False))
            self._store = CatalogStore(self._loc)
            self._open()
            if not create and self._store.seqno is None:
                raise FileNotFoundError(f"no catalog at {self._path!r} (create=False: nothing was created)")

    def _reset(self) -> None:
        """The in-memory state of an empty catalog (a durable one: before loading)."""
        self._objects: dict[Key, CatalogObject] = {}
        self._order: list[Key] = []
        # Databases and their schemas, in creation order: Materialize's default ones until
        # a CREATE/DROP SCHEMA or DATABASE.
        self._schemas: dict[str, list[str]] = {DEFAULT_DATABASE: [DEFAULT_SCHEMA]}
        self._committed_schemas = _copy_schemas(self._schemas)
        self._now = 0
        self._reopened_at: int | None = None  # the time a reopen loaded contents at
        self._defs: list[dict] = []
        self._durable: dict[Key, ArrangementCollection] = {}
        # How to reopen time ``now`` for a write at ``time=now``: the state saved before the
        # commit that sealed it and that commit's table changes (None: it cannot be; always
        # in a durable catalog, where now is persisted sealed).
        self._at_now: tuple | None = None
        # The derived objects' changes at ``now`` a reopened commit must reproduce.
        self._expect: dict[str, list] | None = None
        # Durable: the definitions the record holds, and each arrangement's upper once the
        # record's intent is applied (by storage key) -- what the next commit builds on.
        self._committed_defs: list[dict] = []
        self._dur_upper: dict[str, Frontier] = {}
        # A commit whose outcome is unknown (indeterminate): refresh before the next call.
        self._stale = False
        self.stats = {"commits": 0, "retries": 0, "refreshes": 0, "apply_deferred": 0,
                      "maintain_failed": 0}

    # ------------------------------------------------------------------ accessors

    @property
    def now(self) -> int:
        """The latest committed time: every collection is complete up to it."""
        return self._now

    @property
    def names(self) -> list[Key]:
        """Object names in creation order: an object of the default schema
        ``materialize.public`` by its name (a ``str``), any other by its
        :class:`colmz.sql.QualifiedName` (whose ``str`` is its SQL name).

        >>> cat = Catalog(); cat.execute("CREATE SCHEMA x; CREATE TABLE t (k INT); CREATE TABLE x.t (k INT)")
        >>> [str(n) for n in cat.names]
        ['t', 'materialize.x.t']
        """
        return list(self._order)

    @property
    def schemas(self) -> list[tuple[str, str]]:
        """The catalog's schemas as ``(database, schema)``, each database's in creation order.

        >>> cat = Catalog(); cat.execute("CREATE DATABASE y; CREATE SCHEMA y.z; CREATE SCHEMA x")
        >>> cat.schemas
        [('materialize', 'public'), ('materialize', 'x'), ('y', 'public'), ('y', 'z')]
        """
        return [(db, sc) for db, scs in self._schemas.items() for sc in scs]

    def __contains__(self, name) -> bool:
        try:
            return _key(name) in self._objects
        except (TypeError, SQLError):
            return False

    def object(self, name: Key | tuple[str, ...]) -> CatalogObject:
        """The catalog entry called ``name`` (``KeyError`` naming the known ones).

        ``name`` is an object's name in the default schema (a ``str``, exactly: ``"a.b"`` is
        the object whose name holds a dot) or the parts of a qualified name (``("x", "t")``,
        ``("y", "z", "t")``, a :class:`colmz.sql.QualifiedName`).
        """
        try:
            return self._objects[_key(name)]
        except KeyError:
            shown = [display_name(n) for n in self._order]
            raise KeyError(f"no object {name!r} in the catalog; objects are {shown}") from None

    def task(self, name: Key | tuple[str, ...]) -> ContinualTask:
        """The :class:`colmz.ContinualTask` behind continual task ``name``."""
        obj = self.object(name)
        if obj.task is None:
            raise KeyError(f"{name!r} is a {obj.kind}, not a continual task")
        return obj.task

    def _as_of(self, as_of) -> int:
        if as_of is None:
            return self._now
        as_of = check_time(as_of, "as_of")
        if as_of > self._now:
            raise ValueError(f"as_of {as_of} is after cat.now {self._now}: not yet complete")
        return as_of

    def read(self, name: Key | tuple[str, ...], as_of: int | None = None) -> Updates:
        """The contents of ``name`` as of ``as_of`` (default ``now``), consolidated.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k TEXT)")
        >>> cat.execute("INSERT INTO t VALUES ('a'), ('a')")
        >>> cat.read("t").to_pylist()
        [('a', 1, 2)]
        """
        def read() -> Updates:
            obj = self.object(name)
            at = self._as_of(as_of)
            if at < obj.collection.since:
                raise ValueError(self._unreadable(obj.name, at))
            return obj.collection.snapshot(at)

        return self._reading(read)

    def sql(self, query: str, as_of: int | None = None) -> pa.Table:
        """Run a query (``SELECT``/``WITH``/``VALUES``/``TABLE``) as of ``as_of``.

        ``mz_now()`` is ``as_of``. Returns a ``pyarrow.Table``.

        >>> Catalog().sql("SELECT mz_now() AS t, 7 / 2 AS q").to_pylist()
        [{'t': 0, 'q': 3}]
        """
        stmts = parse(require_text(query, "query"))
        if len(stmts) != 1 or not isinstance(stmts[0], (Query, Show)):
            raise SQLError("cat.sql runs one query (SELECT, WITH, VALUES, TABLE or SHOW); use cat.execute for statements")
        s = stmts[0]
        if isinstance(s, Show):
            return self._reading(lambda: self._show(s))
        if s.as_of is not None and as_of is not None and s.as_of != as_of:
            raise ValueError(f"the query says AS OF {s.as_of} and as_of={as_of} is given: give one")
        when = s.as_of if s.as_of is not None else as_of
        return self._reading(lambda: rename_like_postgres(self._query(s.sql, self._as_of(when), {}), s.sql))

    def _show(self, s: Show) -> pa.Table:
        """``SHOW ...`` as Materialize answers it: ``name`` (and ``type`` for ``OBJECTS``) of
        the objects of a schema, in creation order; ``SHOW COLUMNS``: ``name``, ``nullable``,
        ``type`` (PostgreSQL's type names)."""
        from colmz.sql.assign import pg_type_name

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
        return self._run_bound(translate(sql), as_of, lambda n: self._rows(n, as_of, pending))

    def _run_bound(self, translated: str, t: int, rows) -> pa.Table:
        # Each object the query reads is registered under its own DuckDB name for the
        # query's duration (colmz.sql.bind_relations): "T" and t stay two tables.
        text, bound = bind_relations(translated, frozenset(self._objects))
        self._check_qualified(translated)
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
        coll = self._objects[name].collection
        if as_of < coll.since:
            raise ValueError(self._unreadable(name, as_of))
        return coll

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
        # changes those come from the collection (MemoryCollection.snapshot_rows: a durable
        # table with no or few retractions is read without merging its batches).
        what = f"{self._objects[name].kind} {display_name(name)!r}"
        if name in pending and len(pending[name]):
            return expand(self._contents(name, as_of, pending), what)
        return relation_rows(self._readable(name, as_of), min(as_of, self._now), what)

    # ------------------------------------------------------------------ statements

    def execute(self, sql: str, time: int | None = None) -> pa.Table | None:
        """Run a script of statements; its writes commit together at one time.

        The writes commit at ``now + 1``, or at ``time`` (never below ``now``). ``time=now``
        joins the commit that sealed ``now``: its statements see that commit's writes, and it
        is allowed only where it revises no sealed output -- every materialized view and
        continual task must come out at ``now`` exactly as before (else ``ValueError``); it
        needs an in-memory catalog whose last step was a commit at ``now`` (no DDL since). A
        script ending in a query returns that query's result (as of the commit). A script
        that raises changes nothing.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT)")
        >>> cat.execute("INSERT INTO t VALUES (1); INSERT INTO t SELECT k + 1 FROM t", time=5)
        >>> cat.now, sorted(cat.sql("SELECT k FROM t").column("k").to_pylist())
        (5, [1, 2])
        """
        first = [parse(require_text(sql, "sql"))]
        # A retry parses again: running a statement may fill it in (a task's AS OF).
        return self._transaction(lambda: self._execute(first.pop() if first else parse(sql), time))

    def _execute(self, stmts, time: int | None) -> pa.Table | None:
        writes = [s for s in stmts if isinstance(s, (InsertStatement, DeleteStatement, UpdateStatement))]
        if time is not None:
            time = check_time(time, "time")
            if not writes:
                raise ValueError(f"time={time} given but the script writes nothing")
            if time < self._now:
                raise ValueError(
                    f"time={time} is before cat.now={self._now}: times before now are sealed"
                )
        commit_at = time if time is not None else self._now + 1
        if writes and commit_at > MAX_TIME - 1:
            raise OverflowError(f"a commit at time {commit_at} needs an upper past 2**64-1")
        saved = save(self)
        try:
            pending: dict[str, Updates] = self._reopen_now() if commit_at == self._now else {}
            result = None
            for i, s in enumerate(stmts):
                if isinstance(s, (InsertStatement, DeleteStatement, UpdateStatement)):
                    if self._now >= commit_at:
                        raise SQLError(
                            "a script's writes commit at one time: a write cannot follow a query "
                            "or DDL that followed writes (run it in another execute)"
                        )
                    self._write(s, commit_at, pending)
                    result = None
                elif isinstance(s, (Query, Show)):
                    if pending or self._wrote(stmts[:i], commit_at):
                        self._commit(commit_at, pending)
                        pending = {}
                    if isinstance(s, Show):
                        result = self._show(s)
                    else:
                        when = self._as_of(s.as_of)
                        result = rename_like_postgres(self._query(s.sql, when, {}), s.sql)
                else:
                    if pending or self._wrote(stmts[:i], commit_at):
                        self._commit(commit_at, pending)
                        pending = {}
                    self._ddl(s)
                    result = None
            if writes and self._now < commit_at:
                self._commit(commit_at, pending)
            self._persist()
        except BaseException:
            self._roll_back(saved)
            raise
        return result

    def _wrote(self, before, commit_at: int) -> bool:
        # Whether a write statement in ``before`` is still uncommitted (even one that changed
        # nothing commits its time).
        return self._now < commit_at and any(
            isinstance(x, (InsertStatement, DeleteStatement, UpdateStatement)) for x in before
        )

    def append(self, name: str, updates, time: int | None = None) -> None:
        """Apply a batch of updates (negative diffs included) to table ``name`` at one time.

        ``updates`` is a :class:`colmz.Updates`, or a pandas DataFrame / Arrow table (or
        record batch) -- either of the table's columns alone, each row inserted once (diff
        +1), or of the table's columns plus ``time`` and ``diff``, a batch of updates. The
        time is ``time`` when given (the batch's time column is then ignored), else the
        batch's single time, else (rows without times) the next commit, ``now + 1``; it must
        not be below ``now`` (``now`` as in :meth:`execute`).

        >>> import colmz, pandas as pd
        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k BIGINT)")
        >>> cat.append("t", colmz.Updates({"k": [1, 1, 2]}, time=[3, 3, 3], diff=[1, 1, 1]))
        >>> cat.append("t", colmz.Updates({"k": [1]}, time=[0], diff=[-1]), time=4)
        >>> cat.append("t", pd.DataFrame({"k": [7]}))           # rows: inserted at now + 1
        >>> cat.now, cat.read("t").to_pylist()
        (5, [(1, 5, 1), (2, 5, 1), (7, 5, 1)])
        """
        obj = self.object(name)
        if obj.kind != "table":
            raise ValueError(f"cannot append to {name!r}: it is a {obj.kind}, written only by the catalog")
        if not isinstance(updates, Updates):
            updates, time = _frame_updates(updates, [c.name for c in obj.schema], name, time, self._now)
        if time is None:
            if len(updates) == 0:
                raise ValueError("updates is empty and no time= is given: nothing says when to commit")
            lo, hi = int(updates.time.min()), int(updates.time.max())
            if lo != hi:
                raise ValueError(f"updates span times {lo}..{hi}; append commits at one time (pass time=)")
            time = lo
        time = check_time(time, "time")
        if time < self._now:
            raise ValueError(f"time={time} is before cat.now={self._now}: times before now are sealed")
        if time > MAX_TIME - 1:
            raise OverflowError(f"a commit at time {time} needs an upper past 2**64-1")
        if [c.name for c in updates.schema] != [c.name for c in obj.schema]:
            raise SchemaError(f"updates have columns {updates.column_names}, table {name!r} has {[c.name for c in obj.schema]}")
        data = {c.name: _cast_column(updates.column(c.name), c, name) for c in obj.schema}
        batch = Updates(data, np.full(len(updates), time, np.uint64), updates.diff, copy=False)
        self._transaction(lambda: self._append(obj.name, batch, time))

    def _append(self, name: Key, batch: Updates, time: int) -> None:
        # Checked again: a retry runs against a refreshed catalog (another handle may have
        # committed later times, or dropped and recreated the table).
        obj = self.object(name)
        if obj.kind != "table" or tuple(obj.schema) != tuple(batch.schema):
            raise ValueError(f"cannot append to {display_name(name)!r}: another handle changed it to a {obj.kind} "
                             f"with columns {[c.name for c in obj.schema]}")
        if time < self._now:
            raise ValueError(f"time={time} is before cat.now={self._now}: times before now are sealed")
        saved = save(self)
        try:
            pending = self._reopen_now() if time == self._now else {}
            prev = pending.get(name)
            pending[name] = consolidate(concat([prev, batch])) if prev is not None else batch
            self._commit(time, pending)
            self._persist()
        except BaseException:
            self._roll_back(saved)
            raise

    # ------------------------------------------------------------------ writes

    def _table(self, name: Key, written: str) -> CatalogObject:
        obj = self._objects.get(name)
        if obj is None:
            raise SQLError(f"unknown catalog item {written!r}")
        if obj.kind != "table":
            raise SQLError(f"cannot write to {display_name(name)!r}: it is a {obj.kind}")
        return obj

    def _write(self, s, t: int, pending: dict[Key, Updates]) -> None:
        key = _key((*s.qualifier, s.table))
        obj = self._table(key, sql_name((*s.qualifier, s.table)) if s.qualifier else s.table)
        schema = obj.schema
        rel = _relation(key)
        what = f"INSERT INTO {display_name(key)}"
        if isinstance(s, InsertStatement):
            if select_list_is_empty(s.query):
                # PostgreSQL inserts a row of defaults per row of a zero-column SELECT, which
                # DuckDB cannot parse
                raise UnsupportedSQL(f"{what}: an empty select list is not supported by colmz")
            names = [c.name for c in schema]
            columns = s.columns
            # VALUES literals take their column's type before the rows are combined
            # (colmz.sql.assign.typed_values), as in PostgreSQL.
            value_types = [c.type for c in schema] if columns is None else \
                [next((c.type for c in schema if c.name == n), pa.null()) for n in columns]
            rows = self._query(typed_values(s.query, value_types), t, pending)
            if columns is not None:
                for c in columns:
                    if c not in names:
                        raise SQLError(f"INSERT INTO {s.table}: no column {c!r}; columns are {names}")
            elif rows.num_columns < len(schema):
                # As PostgreSQL: the expressions fill the first columns, the rest take their
                # default (NULL: colmz's tables have no DEFAULT)
                columns = names[: rows.num_columns]
            n = len(schema) if columns is None else len(columns)
            if rows.num_columns != n:  # PostgreSQL's (and Materialize's) words
                more = "expressions than target columns" if rows.num_columns > n else "target columns than expressions"
                raise SchemaError(f"{what}: INSERT has more {more}")
            targets = list(schema) if columns is None else [next(c for c in schema if c.name == name) for name in columns]
            if s.query.lstrip()[:6].upper() == "VALUES":
                # As in PostgreSQL, literals take the type of the column they are written to.
                rows = self._coerce_literals(rows, targets)
            rows = self._assign(rows, targets, what)
            if columns is not None:
                given = dict(zip(columns, rows.columns))
                rows = pa.table({
                    c.name: given.get(c.name, pa.nulls(rows.num_rows, c.type)) for c in schema
                })
            change = rows_to_updates(conform(rows, schema, what), t, 1)
        elif isinstance(s, DeleteStatement):
            rows = self._query(select_where(rel, s.where), t, pending)
            change = rows_to_updates(conform(rows, schema, f"DELETE FROM {s.table}"), t, -1)
        else:
            names = [c.name for c in schema]
            assigned = dict(s.assignments)
            new_sql = update_select(rel, names, assigned, s.where)  # checks every part first
            old = self._query(select_where(rel, s.where, f"UPDATE {s.table}: predicate"), t, pending)
            # As an INSERT, an UPDATE's values convert to their columns by assignment.
            new = self._assign(self._query(new_sql, t, pending), list(schema), f"UPDATE {s.table}")
            change = concat([
                rows_to_updates(conform(old, schema, f"UPDATE {s.table}"), t, -1),
                rows_to_updates(conform(new, schema, f"UPDATE {s.table}"), t, 1),
            ])
        prev = pending.get(key)
        pending[key] = consolidate(concat([prev, change])) if prev is not None else consolidate(change)

    def _assign(self, rows: pa.Table, targets, what: str) -> pa.Table:
        """``rows`` converted to the types of ``targets`` by PostgreSQL's assignment casts
        (:mod:`colmz.sql.assign`): ``SchemaError`` with PostgreSQL's message when a column
        has none, ``OverflowError`` when a value does not fit its column."""
        if rows.num_columns != len(targets):
            return rows  # conform says how the columns do not match
        direct = arrow_assignment(rows, [c.type for c in targets])
        if direct is not None:
            return direct
        try:
            sel = assignment_select(identifier(_VALUES), [f.type for f in rows.schema],
                                    [(c.name, c.type) for c in targets])
        except UnsupportedSQL:
            raise
        except SQLError as e:
            raise SchemaError(f"{what}: {e}") from None
        if sel is None:
            return rows
        self._con.register(_VALUES, rows)
        try:
            out = run_query(self._con, sel, self._now)[0]
        except SQLError as e:
            m = _OUT_OF_RANGE.search(str(e))
            if m:
                raise OverflowError(f"{what}: {_PG_RANGE.get(m.group(1), m.group(1) + ' out of range')}") from None
            raise
        finally:
            self._con.unregister(_VALUES)
        # Result columns keep the query's names (conform matches by position).
        return out.rename_columns(rows.column_names)

    def _coerce_literals(self, rows: pa.Table, targets) -> pa.Table:
        casts, need = [], False
        for name, spec, col in zip(rows.column_names, targets, rows.columns):
            if (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) and \
                    not (pa.types.is_string(spec.type) or pa.types.is_large_string(spec.type)):
                casts.append((name, _duckdb_type(spec.type)))
                need = True
            else:
                casts.append((name, None))
        if not need or rows.num_columns != len(targets):
            return rows
        self._con.register(_VALUES, rows)
        try:
            return run_query(self._con, cast_select(_VALUES, casts), self._now)[0]
        finally:
            self._con.unregister(_VALUES)

    def _commit(self, t: int, pending: Mapping[str, Updates]) -> None:
        """Write ``pending`` table changes at ``t``, then bring every derived object to ``t``."""
        if t <= self._now:
            raise ValueError(f"time {t} is not after cat.now={self._now}")
        # Kept only to reopen now for a write at time=now, which a durable catalog refuses
        # (now is persisted sealed). Without _at_now itself: the saved state need not keep the
        # previous commit's saved state alive (each would hold the one before).
        before = save(self, exclude=("_at_now",)) if self._path is None else None
        changed = set()
        for name in self._order:
            obj = self._objects[name]
            if obj.kind != "table":
                continue
            change = pending.get(name)
            if change is not None and len(change):
                self._check_retractions(name, obj.collection, change)
                obj.collection.compare_and_append(change, obj.collection.upper, t + 1)
                changed.add(name)
            else:
                obj.collection.compare_and_append(Updates.empty(obj.schema), obj.collection.upper, t + 1)
        for name in self._order:
            obj = self._objects[name]
            if obj.kind == "materialized view":
                if self._refresh(obj, t, force=obj.uses_now or bool(obj.deps & changed)):
                    changed.add(name)
            elif obj.kind == "continual task":
                done = obj.task.stats["times_processed"]
                obj.task.run()
                if obj.task.stats["times_processed"] != done and len(obj.collection.updates(t, t + 1)):
                    changed.add(name)
        expect, self._expect = self._expect, None
        for name, old in (expect or {}).items():
            if _changes_at(self._objects[name].collection, t) != old:
                raise ValueError(
                    f"time={t} (cat.now) would revise {self._objects[name].kind} {display_name(name)!r} at time "
                    f"{t}, already sealed: commit at a later time"
                )
        self._now = t
        self._at_now = None if before is None else (before, {k: v for k, v in pending.items() if len(v)})

    def _check_retractions(self, name: str, coll: MemoryCollection, change: Updates) -> None:
        """Refuse ``change`` if a row it retracts would be left with a negative
        multiplicity. Only the retracted rows are looked up (inserts cannot go negative),
        so the check costs the change, not the table (``MemoryCollection.counts``)."""
        if not len(change) or change.diff.min() >= 0:
            return
        change = consolidate(change, order="data")
        neg = np.flatnonzero(change.diff < 0)
        if not len(neg):
            return
        out = change.take(neg)
        after = coll.counts(out) + out.diff
        if after.min() < 0:
            i = int(np.argmax(after < 0))
            row = out.slice(i, i + 1).to_pylist()[0][:-2]
            raise NegativeMultiplicity(f"table {display_name(name)!r} would hold row {row} with multiplicity "
                                       f"{int(after[i])}")

    def _refresh(self, obj: CatalogObject, t: int, force: bool) -> bool:
        coll = obj.collection
        if not force:
            coll.compare_and_append(Updates.empty(obj.schema), coll.upper, t + 1)
            return False
        rows = conform(self._query_at(obj.query, t), obj.schema, f"MATERIALIZED VIEW {obj.name}")
        new = consolidate(rows_to_updates(rows, t, 1))
        old = obj.contents
        delta = consolidate(concat([old.negated(), new]), since=t) if len(old) else new
        coll.compare_and_append(delta, coll.upper, t + 1)
        obj.contents = new
        return len(delta) > 0

    def _query_at(self, translated: str, t: int) -> pa.Table:
        # A view's query, reading objects that are already complete at t (created before it).
        return self._run_bound(translated, t, lambda n: relation_rows(
            self._objects[n].collection, t, f"{self._objects[n].kind} {n!r}"))

    # ------------------------------------------------------------------ DDL

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
        return set(bind_relations(translate(sql), frozenset(self._objects))[1])

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
                raise SQLError(f"CREATE TABLE {s.name}: duplicate column names")
            check_columns("CREATE TABLE", s.name, schema)
            coll = self._new_collection(schema)
            coll.compare_and_append(Updates.empty(coll.schema), now, now + 1)
            self._add(CatalogObject(key, "table", coll), s)
        elif isinstance(s, CreateMaterializedView):
            key = self._new_key(s.qualifier, s.name)
            translated = translate(s.query)
            deps = self._reads(s.query)
            rows = rename_like_postgres(self._query_at(translated, now), s.query)
            schema = [ColumnSpec(f.name, storable(f.type, s.name)) for f in rows.schema]
            if s.columns is not None:
                if len(s.columns) != len(schema):
                    raise SchemaError(
                        f"MATERIALIZED VIEW {s.name}: {len(s.columns)} column name(s) for {len(schema)} column(s)"
                    )
                schema = [ColumnSpec(n, c.type) for n, c in zip(s.columns, schema)]
            names = [c.name for c in schema]
            if len(set(names)) != len(names):
                raise SchemaError(f"MATERIALIZED VIEW {s.name}: duplicate column names {names}: alias them")
            coll = self._new_collection(schema)
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
            _not_reserved_namespace("schema", s.name)
            self._schemas = _copy_schemas(self._schemas)
            self._schemas[db].append(s.name)
        elif isinstance(s, CreateDatabase):
            if s.name in self._schemas:
                if s.if_not_exists:
                    return
                raise SQLError(f"database {s.name!r} already exists")
            _not_reserved_namespace("database", s.name)
            self._schemas = _copy_schemas(self._schemas)
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
        input_key = _key((*s.input_qualifier, s.input))
        if input_key == key:
            raise ValueError(f"continual task output {display_name(key)!r} is not allowed to be its input")
        if input_key not in self._objects:
            raise SQLError(f"CREATE CONTINUAL TASK {display_name(key)}: unknown catalog item "
                           f"{display_name(input_key)!r} (its ON INPUT)")
        src = self._objects[input_key]
        # The objects the statements read (bound as queries bind them); the task itself is
        # not an object yet: its own name means its output as of T-1.
        names: set[Key] = set()
        body = []
        rel = _relation(key)
        for i, b in enumerate(s.body):
            query = b.query if isinstance(b, InsertStatement) else select_where(rel, b.where)
            try:
                # A qualified name of no object: Materialize's error, not DuckDB's.
                self._check_qualified(translate(query), own=key)
            except SQLError as e:
                label = task_statement(_relation(key), i, "insert" if isinstance(b, InsertStatement)
                                       else "delete", predicate=isinstance(b, DeleteStatement) and bool(b.where))
                raise SQLError(f"{label}: {e}") from None
            if isinstance(b, InsertStatement):
                body.append(Insert(b.query))
            else:
                body.append(Delete(b.where))
            names |= self._reads(query)
        refs = {n: self._objects[n].collection for n in sorted(names, key=str)
                if n in self._objects and n != input_key}
        columns = None if s.columns is None else {n: arrow_type(t) for n, t in s.columns}
        if columns is not None:
            check_columns("CREATE CONTINUAL TASK", s.name, columns)
        as_of = self._now if s.as_of is None else s.as_of
        if as_of > self._now:
            raise ValueError(f"CONTINUAL TASK {s.name} AS OF {as_of} is after cat.now={self._now}")
        task = ContinualTask(
            key, {input_key: src.collection}, body, references=refs, columns=columns,
            snapshot=s.snapshot, as_of=as_of, connection=self._con,
        )
        # The output exists from the task's initial as-of on (it holds nothing before).
        task.output.advance_since(as_of)
        task.run()
        s.as_of = as_of
        self._add(CatalogObject(key, "continual task", task.output, {input_key, *refs}, task=task), s)

    def _drop(self, s: Drop) -> None:
        keys = []
        for name in s.names:
            key = _key(name)
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
        if cascade:
            for n in self._order:  # creation order: an object reads only earlier ones
                if self._objects[n].deps & gone:
                    gone.add(n)
        else:
            for key in keys:
                users = [display_name(n) for n in self._order
                         if key in self._objects[n].deps and n not in gone]
                if users:
                    raise SQLError(f"cannot drop {display_name(key)!r}: {', '.join(users)} depend(s) on it")
        for n in gone:
            del self._objects[n]
        self._order = [n for n in self._order if n not in gone]
        self._defs = [d for d in self._defs if _def_key(d) not in gone]

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
        self._schemas = _copy_schemas(self._schemas)
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
        self._schemas = _copy_schemas(self._schemas)
        del self._schemas[db]

    def _add(self, obj: CatalogObject, stmt) -> None:
        self._objects[obj.name] = obj
        self._order.append(obj.name)
        kind = {CreateTable: "table", CreateMaterializedView: "materialized view",
                ContinualTaskStatement: "continual task"}[type(stmt)]
        body = asdict(stmt)
        body.pop("if_not_exists", None)  # how it was created, not what it is
        if kind == "continual task":
            body["body"] = [
                {"insert": b.query} if isinstance(b, InsertStatement) else {"delete": b.where}
                for b in stmt.body
            ]
        d = {"name": as_qualified(obj.name).item, "kind": kind, "since": obj.collection.since,
             "key": _storage_key(display_name(obj.name)), "stmt": body}
        if isinstance(obj.name, QualifiedName):
            # Only an object outside materialize.public says where it lives: a definition
            # without these (every one written before schemas existed) is a public one.
            d["database"], d["schema"] = obj.name.database, obj.name.schema
        self._defs.append(d)

    # ------------------------------------------------------------------ transactions

    def _reopen_now(self) -> dict[str, Updates]:
        """Undo the commit that sealed ``now`` and return its table changes, for a write at
        ``time=now`` to join; the derived objects' changes at ``now`` are kept in
        ``_expect`` for :meth:`_commit` to check that the joined commit reproduces them."""
        now = self._now
        if self._path is not None:
            raise ValueError(
                f"time={now} (cat.now): a durable catalog has persisted time {now} sealed; "
                "commit at a later time"
            )
        if self._at_now is None:
            raise ValueError(
                f"time={now} (cat.now): no commit at {now} to join (it was reached by DDL, a "
                "reopen, or no write yet); commit at a later time"
            )
        before, pending = self._at_now
        expect = {n: _changes_at(o.collection, now) for n, o in self._objects.items() if o.kind != "table"}
        # Copies of the histories as they were before that commit: the lists themselves stay
        # whole for this call's own saved state, which a failure rolls back to.
        roll_back(self, before, copy=True)
        self._expect = expect
        return dict(pending)

    def _roll_back(self, saved: Saved) -> None:
        """Return to ``saved`` (``colmz.rollback.save(self)`` at the start of a call) after it
        failed: every object's collection and task in place, and the catalog's fields."""
        roll_back(self, saved)
        self._expect = None  # a reopened commit's check, for the call that reopened it only

    # ------------------------------------------------------------------ durability

    @property
    def path(self) -> str | None:
        """The catalog's directory, or ``None`` in memory."""
        return self._path

    def _arrangement(self, d: dict, schema) -> ArrangementCollection:
        return self._store.arrangement(d["key"], schema)

    def refresh(self) -> None:
        """Reload this handle from the store: the definitions and contents every handle
        committed, as a reopen would (reads before the new ``now`` are no longer possible).

        A durable call does this by itself before it reads or writes when another handle
        committed since (one read of the consensus head tells), and when its commit lost to
        another handle; call it to bring attributes such as :attr:`names` and :attr:`now`
        up to date without a call. A refresh that raises leaves the handle as it was. In
        memory: nothing to do.

        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> a, b = Catalog(d), Catalog(d)
        >>> a.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
        >>> b.names, (b.refresh(), b.names)[1]
        ([], ['t'])
        >>> a.execute("INSERT INTO t VALUES (2)")
        >>> b.sql("SELECT count(*) AS n FROM t").to_pylist()   # a read sees every commit
        [{'n': 2}]
        """
        if self._path is None:
            return
        saved = dict(self.__dict__)
        stats = dict(self.stats)
        try:
            self._reset()
            self._store = CatalogStore(self._loc)
            self._open()
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        self.stats = stats
        self.stats["refreshes"] += 1

    def _transaction(self, call):
        """Run ``call`` -- one transaction, which rolls memory back when it raises -- and on
        a durable catalog bring the handle up to the record first; when its commit lost to
        another handle (or a read hit data another handle compacted away), refresh and run
        it again, at most :data:`RETRIES` times.

        This is a transaction-level retry, not a second copy of the arrangement's
        compare-and-set loop (``colmz.arrangement.machine``, which re-applies one command to a
        newer state of one arrangement): a lost catalog commit invalidates the whole
        statement -- what it read, the checks it made, the intent built from them -- so the
        serializable statement runs again from the top on the refreshed catalog. The
        record's compare-and-set itself (``CatalogStore.commit``) is tried once per run.
        """
        if self._path is None:
            return call()
        for attempt in range(RETRIES + 1):
            self._catch_up()
            try:
                return call()
            except (CommitConflict, CompactedAway) as e:
                self._stale = True
                if attempt == RETRIES:
                    e.add_note(f"colmz.Catalog: the call was refreshed and run again {RETRIES} times "
                               "and lost each time; nothing of it was kept. The handle refreshes "
                               "itself before its next call (or call cat.refresh()).")
                    raise
                self.stats["retries"] += 1
                time.sleep(random.uniform(0, min(RETRY_BACKOFF * 2**attempt, 1.0)))
            except Indeterminate:
                self._stale = True  # the commit may have landed: reload before the next call
                raise
        raise AssertionError("unreachable")

    def _catch_up(self) -> None:
        """On a durable catalog, reload when another handle committed since this one read
        the record (one read of its head) or an earlier call left the handle stale."""
        if self._path is not None and (self._stale or self._store.head_seqno() != self._store.seqno):
            self.refresh()

    def _reading(self, call):
        """Run a read; on a durable catalog, first bring the handle up to the record (one
        read of the consensus head: a read sees every write committed before it, by any
        handle, as Materialize's reads do), and when it hit data another handle compacted
        away, refresh the handle and read again (at most :data:`RETRIES` times)."""
        self._catch_up()
        for attempt in range(RETRIES + 1):
            try:
                return call()
            except CompactedAway:
                if self._path is None or attempt == RETRIES:
                    raise
                self.stats["retries"] += 1
                self.refresh()
        raise AssertionError("unreachable")

    def _persist(self) -> None:
        """Commit what the in-memory collections hold beyond the record, and the
        definitions, as one version of the catalog record; then apply it.

        Every object whose upper moved gets an intent entry ``(lower, upper, runs)``: the
        lower is the upper the record gives it (never the arrangement handle's, which may be
        stale), the runs its changes, written once as parts under its arrangement's prefix
        (the apply adopts them). :meth:`CatalogStore.commit` compare-and-sets the record
        against the version this handle read: a lost race raises ``CommitConflict`` with
        nothing visible, and the caller rolls memory back. After the commit the call
        has succeeded: applying the intent and maintenance are retried by the next commit
        (or reopen) when they fail now.
        """
        if self._path is None:
            return
        store = self._store
        moves = []
        for d in self._defs:
            key = _def_key(d)
            obj = self._objects[key]
            mem = obj.collection
            lo = self._dur_upper.get(d["key"])
            shown = display_name(key)
            if lo is None:
                # A new object: its arrangement exists before the record names it (an orphan
                # arrangement, holding nothing, when the commit then loses).
                self._durable[key] = store.arrangement(d["key"], obj.schema)
                moves.append((shown, d["key"], 0, mem.upper, mem.updates(mem.since, mem.upper)))
            elif mem.upper != lo:
                moves.append((shown, d["key"], lo, mem.upper, mem.updates(lo, mem.upper)))
        if not moves and self._defs == self._committed_defs and self._schemas == self._committed_schemas:
            return
        if self._read_only:
            raise PermissionError(
                f"catalog at {self._path!r} is read-only (its store cannot be written: "
                f"{self._loc.consensus!r}); nothing was changed"
            )
        # The record's intent lands before another is built on it (a no-op when this handle
        # applied it; after a crash or a failed apply, the work left).
        store.apply(store.state)
        store.commit(_namespaces_entry(self._schemas) + self._defs, moves)
        # -- committed: from here on nothing raises --
        self._committed_defs = list(self._defs)
        self._committed_schemas = _copy_schemas(self._schemas)
        for _, key, _, up, _ in moves:
            self._dur_upper[key] = up
        keys = {d["key"] for d in self._defs}
        self._dur_upper = {k: v for k, v in self._dur_upper.items() if k in keys}
        self._durable = {_def_key(d): store.arrangement(d["key"]) for d in self._defs}
        store.forget(keys)
        self.stats["commits"] += 1
        try:
            store.apply(store.state)
        except Exception:  # noqa: BLE001 - committed; the next commit or reopen applies it
            self.stats["apply_deferred"] += 1
            return
        self._persists += 1
        if self._maintain_every and self._persists % self._maintain_every == 0:
            # Compact the durable history up to now: a reopen reads contents, not history.
            for name, dur in self._durable.items():
                mem = self._objects[name].collection
                # Contents not yet loaded from the store are read as of mem.since: keep it.
                try:
                    dur.maintain(mem.since if mem.base_pending else self._now)
                except Exception:  # noqa: BLE001 - compaction only saves space; retried later
                    self.stats["maintain_failed"] += 1
                    with contextlib.suppress(Exception):
                        dur.refresh()

    def _open(self) -> None:
        """Load the catalog from the store (:meth:`_reopen`); when bringing it forward
        loses its commit to another handle, load again (bounded)."""
        for attempt in range(RETRIES + 1):
            try:
                self._reopen()
                return
            except (CommitConflict, CompactedAway):
                if attempt == RETRIES:
                    raise
                self._reset()
                self._store = CatalogStore(self._loc)

    def _reopen(self) -> None:
        """Load the definitions and each object's contents, then resume every task."""
        state = self._store.load()
        if state is None:
            return
        if self._read_only:
            pending = self._store.unapplied(state)
            if pending:
                raise PermissionError(
                    f"catalog at {self._path!r}: a committed transaction is not applied yet "
                    f"(objects {pending}) and its read-only store cannot take it: open the "
                    "catalog once where it can be written; nothing was read"
                )
        self._store.apply(state)  # a committed intent a crash (or a failed apply) left
        defs = [d for d in state["objects"] if d.get("kind") != NAMESPACES]
        for d in state["objects"]:
            if d.get("kind") == NAMESPACES:
                self._schemas = {db: list(scs) for db, scs in d["databases"]}
        self._committed_schemas = _copy_schemas(self._schemas)
        durs = {_def_key(d): self._arrangement(d, None) for d in defs}
        self._committed_defs = list(defs)
        self._dur_upper = {d["key"]: durs[_def_key(d)].upper for d in defs}
        uppers = [c.upper for c in durs.values() if c.upper is not None]
        self._defs = list(defs)
        if not uppers:
            self._defs, self._committed_defs, self._dur_upper = [], [], {}
            return
        start = max(0, min(uppers) - 1)
        self._now = max(uppers) - 1
        self._reopened_at = start  # reads go no further back (_unreadable says so)
        for d in defs:
            key = _def_key(d)
            dur = durs[key]
            schema = dur.schema
            mem = _load(dur, max(start, dur.since))
            st = d["stmt"]
            if d["kind"] == "table":
                obj = CatalogObject(key, "table", mem)
            elif d["kind"] == "materialized view":
                translated = translate(st["query"])
                obj = CatalogObject(key, "materialized view", mem, self._reads(st["query"]), translated,
                                    uses_now=uses_now(translated),
                                    contents=mem.snapshot(mem.upper - 1))
            else:
                body = [Insert(b["insert"]) if "insert" in b else Delete(b["delete"]) for b in st["body"]]
                input_key = _key((*st.get("input_qualifier", ()), st["input"]))
                names = set()
                for b in st["body"]:
                    names |= self._reads(b["insert"] if "insert" in b
                                         else select_where(_relation(key), b["delete"]))
                refs = {n: self._objects[n].collection for n in sorted(names, key=str)
                        if n in self._objects and n != input_key}
                task = ContinualTask(
                    key, {input_key: self._objects[input_key].collection}, body,
                    references=refs, columns=schema, snapshot=st["snapshot"], as_of=st["as_of"],
                    output=mem, connection=self._con,
                )
                obj = CatalogObject(key, "continual task", mem, {input_key, *refs}, task=task)
            self._objects[key] = obj
            self._order.append(key)
            self._durable[key] = dur
        # Bring every object to now: tables written behind the catalog's back leave the
        # others behind; they advance empty, views are recomputed, tasks resume from their
        # outputs' uppers.
        for name in self._order:
            obj = self._objects[name]
            c = obj.collection
            if obj.kind == "table" and c.upper < self._now + 1:
                c.compare_and_append(Updates.empty(obj.schema), c.upper, self._now + 1)
            elif obj.kind == "materialized view" and c.upper < self._now + 1:
                rows = conform(self._query_at(obj.query, self._now), obj.schema,
                               f"MATERIALIZED VIEW {display_name(name)}")
                new = consolidate(rows_to_updates(rows, self._now, 1))
                old = obj.contents
                delta = consolidate(concat([old.negated(), new]), since=self._now) if len(old) else new
                c.compare_and_append(delta, c.upper, self._now + 1)
                obj.contents = new
            elif obj.kind == "continual task":
                obj.task.run()
        if not self._read_only:  # a read-only handle brings memory forward, commits nothing
            self._persist()

    # ------------------------------------------------------------------ display

    def __repr__(self) -> str:
        objects = ", ".join(f"{n} ({self._objects[n].kind})" for n in self._order) or "no objects"
        where = f"path={self._path!r}" if self._path is not None else "in memory"
        return f"Catalog({where}, now={self._now}: {objects})"

    def _repr_html_(self) -> str:
        from colmz.display import catalog_html

        return catalog_html(self)


def _key(name) -> Key:
    """The catalog key of ``name``: a ``str`` is an item of the default schema, exactly as
    given; a tuple the parts of a qualified name (a :class:`colmz.sql.QualifiedName` too)."""
    if isinstance(name, str):
        return name
    if isinstance(name, tuple):
        if not all(isinstance(p, str) for p in name):
            raise TypeError(f"a qualified name is a tuple of str, got {name!r}")
        return catalog_key(resolve_item(name))
    raise TypeError(f"an object name is a str or a tuple of its parts, got {type(name).__name__}")


def _relation(key: Key) -> str | tuple[str, ...]:
    """``key`` as :func:`colmz.sql.select_where` names a relation (the parts of a qualified one)."""
    return key if isinstance(key, str) else tuple(key)


def _def_key(d: dict) -> Key:
    """The key of a stored definition (without ``database``/``schema``: a public object)."""
    if "schema" in d:
        return catalog_key(QualifiedName(d.get("database", DEFAULT_DATABASE), d["schema"], d["name"]))
    return d["name"]


def _copy_schemas(schemas: dict[str, list[str]]) -> dict[str, list[str]]:
    return {db: list(scs) for db, scs in schemas.items()}


#: The record entry holding a catalog's databases and schemas (written only when they are not
#: Materialize's defaults, so a catalog without schemas writes the record it always wrote).
NAMESPACES = "namespaces"


def _namespaces_entry(schemas: dict[str, list[str]]) -> list[dict]:
    if schemas == {DEFAULT_DATABASE: [DEFAULT_SCHEMA]}:
        return []
    return [{"kind": NAMESPACES, "databases": [[db, list(scs)] for db, scs in schemas.items()]}]


def _not_reserved_namespace(what: str, name: str) -> None:
    if not name or name.lower().startswith(RESERVED_PREFIX):
        raise SQLError(f"{what} name {name!r} is empty or starts with {RESERVED_PREFIX!r}, which colmz reserves")


def _load(dur: ArrangementCollection, start: int) -> MemoryCollection:
    """An in-memory collection holding ``dur``'s changes after ``start``, and its contents
    as of ``start`` loaded only when a read needs them (a task reading only new input
    never does)."""
    up = dur.upper
    if up is not None and up > 0:
        start = min(start, up - 1)
    mem = MemoryCollection(dur.schema, since=start, upper=start + 1,
                           base=lambda: dur.snapshot_unmerged(start), base_consolidated=True)
    later = dur.updates(start + 1, up)
    mem.compare_and_append(later, start + 1, up)
    return mem


#: Column names colmz keeps for itself: every update's ``time`` and ``diff`` (``colmz.Updates``),
#: and the ``__colmz_`` prefix of the columns its own queries add.
RESERVED_COLUMNS = ("time", "diff")


def check_columns(what: str, name: str, schema: Mapping[str, pa.DataType]) -> None:
    """Refuse a definition colmz could not store, before anything changes: an empty table
    or column name, a reserved column name (:data:`RESERVED_COLUMNS`, any case: DuckDB
    compares names without case, or the :data:`RESERVED_PREFIX`), or more columns than
    ``colmz.Updates`` holds. ``SQLError``/``SchemaError`` name the object and column.

    >>> check_columns("CREATE TABLE", "t", {"k": pa.int64(), "Time": pa.int64()})
    Traceback (most recent call last):
    ...
    colmz.sql.SQLError: CREATE TABLE t: column 'Time' is reserved: colmz keeps each update's time and diff under the names ('time', 'diff'); rename the column
    """
    if not name:
        raise SQLError(f"{what}: the name is empty; give the object a name")
    for i, col in enumerate(schema):
        if not col:
            raise SQLError(f"{what} {name}: column {i + 1} has an empty name")
        if col.lower() in RESERVED_COLUMNS:
            raise SQLError(
                f"{what} {name}: column {col!r} is reserved: colmz keeps each update's time and diff "
                f"under the names {RESERVED_COLUMNS}; rename the column"
            )
        if col.lower().startswith(RESERVED_PREFIX):
            raise SQLError(f"{what} {name}: column {col!r} starts with {RESERVED_PREFIX!r}, which colmz reserves")
    try:
        # colmz.Updates is the one place that knows how many data columns fit in an update.
        Updates({c: pa.array([], t) for c, t in schema.items()}, time=[], diff=[])
    except ValueError as e:
        raise SchemaError(f"{what} {name}: {e}") from None


def _changes_at(coll, t: int) -> list:
    """The consolidated changes of ``coll`` at time ``t``, as sorted rows (comparable)."""
    return sorted(consolidate(coll.updates(t, t + 1)).to_pylist(), key=repr)


def _duckdb_type(t: pa.DataType) -> str:
    simple = {
        pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
        pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER", pa.uint64(): "UBIGINT",
        pa.float32(): "REAL", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN", pa.date32(): "DATE",
        pa.binary(): "BLOB",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_duration(t):
        return "INTERVAL"
    raise SchemaError(f"no DuckDB type for a literal written to a {t} column")


def _storage_key(name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    return f"{safe}-{uuid.uuid4().hex[:12]}"


#: A relation name colmz.sql.bind_relations gave, in DuckDB's messages.
_RELATION = re.compile(re.escape(RESERVED_PREFIX) + r"r(\d+)")
#: Where INSERT ... VALUES rows are registered to cast their literals.
_VALUES = RESERVED_PREFIX + "values"
#: DuckDB's message for a value outside its target type, and PostgreSQL's for each type.
_OUT_OF_RANGE = re.compile(r"out of range for the destination type (\w+)")
_PG_RANGE = {"INT16": "smallint out of range", "INT32": "integer out of range",
             "INT64": "bigint out of range", "UINT16": "uint2 out of range",
             "UINT32": "uint4 out of range", "UINT64": "uint8 out of range"}


def _cast_column(col: pa.Array, spec: ColumnSpec, table: str) -> pa.Array:
    if col.type == spec.type:
        return col
    try:
        return conform(pa.table({spec.name: col}), (spec,), f"append to {table}").column(0)
    except SchemaError:
        raise


def _frame_updates(frame, columns: list[str], name: str, time: int | None, now: int):
    """``Catalog.append``'s DataFrame / Arrow input as updates and the time to commit at.

    A frame of exactly the table's columns (in any order) is rows, each inserted once, at
    ``time`` or ``now + 1``; one with ``time`` and ``diff`` besides is a batch of updates.
    """
    import pandas as pd

    if isinstance(frame, pd.DataFrame):
        table = pa.Table.from_pandas(frame, preserve_index=False)
    elif isinstance(frame, pa.RecordBatch):
        table = pa.Table.from_batches([frame])
    elif isinstance(frame, pa.Table):
        table = frame
    else:
        raise TypeError("updates must be colmz.Updates, a pandas DataFrame or an Arrow table, "
                        f"got {type(frame).__name__}")
    have = list(table.column_names)
    if len(set(have)) != len(have):
        raise SchemaError(f"updates for table {name!r} name a column twice: {have}")
    if sorted(have) == sorted(columns):
        time = now + 1 if time is None else check_time(time, "time")
        n = table.num_rows
        data = {c: table.column(c) for c in columns}
        return Updates(data, np.full(n, min(time, MAX_TIME), np.uint64), np.ones(n, np.int64)), time
    if sorted(have) == sorted([*columns, "time", "diff"]):
        return Updates.from_arrow(table.select([*columns, "time", "diff"]), time="time", diff="diff"), time
    raise SchemaError(f"updates for table {name!r} have columns {have}: give the table's columns "
                      f"{columns} (rows, each inserted once) or those with 'time' and 'diff'")
