"""The catalog's engine: named collections at logical times, read, queried and written in
memory, with SQL (DuckDB) and continual tasks.

Design
------
An :class:`Engine` holds tables, materialized views and continual tasks, each a collection
of updates at ``uint64`` times, every one a :class:`colmz.continual.MemoryCollection`. It
keeps one clock, :attr:`Engine.now`: every collection is complete (sealed) up to and
including ``now`` -- its upper is ``now + 1`` -- and reads default to ``as_of=now``.

* A script given to :meth:`Engine.execute` is one transaction: its writes (``INSERT``,
  ``DELETE``, ``UPDATE``, planned by :mod:`colmz.sql.write`) commit together at one time
  ``T`` -- ``now + 1``, or ``time=`` (never below ``now``: earlier times are sealed) -- each
  statement seeing the previous statements' writes. DDL (``CREATE``/``DROP``,
  :mod:`colmz.catalog.ddl`) takes effect at ``now``. ``time=now`` joins the commit that
  sealed ``now`` (rolled back and redone with both transactions' writes) and is allowed only
  where that revises no sealed output: every view and task must come out at ``now``
  unchanged; a durable catalog has persisted ``now`` sealed and refuses it.
* After the tables are written at ``T``, the derived objects that may change at ``T`` are
  brought to it in creation order (:mod:`colmz.catalog.schedule`: the readers of what
  changed, a task reading its input only; the views come due), so an object only reads
  objects created before it and a task reading another task sees that task's write at
  ``T``. A materialized view is fed the changes its inputs committed at ``T`` through its
  operators and writes its own change at ``T`` (:mod:`colmz.catalog.views`); with
  ``views="recompute"``, or for a view outside the operators' subset, its query is
  recomputed when something it reads changed at ``T`` (always, when it calls ``mz_now()``
  other than in temporal filters, which its operators keep) and the difference written. A continual task whose input changed runs
  :meth:`colmz.ContinualTask.run` (any other writes nothing at ``T``: upstream's output
  changes only at its input's inserts; it lags, as below).
* A call that raises -- a bad statement, a continual task's guard rail, or the ``persist``
  step a durable catalog passes (its commit) -- rolls every collection and task back as it
  was (``colmz.rollback``: the engine, its objects, their collections and tasks declare
  ``ROLLBACK_FIELDS``): the engine is unchanged. Saving that state costs what the call
  touches, not what the catalog holds: the engine's containers (objects, their order, the
  definitions, the shared arrangements) are saved by reference (``ROLLBACK_ON_TOUCH``; DDL
  replaces them by copies before changing them), and each structure a call is about to
  change -- a table it writes, a view whose inputs changed (its operators and sink), a shared
  arrangement it feeds -- is kept (``colmz.rollback.Saved.keep``) by :meth:`Engine._keep`
  just before, in every save in progress. ``save_work`` counts it. DDL keeps the shared
  arrangements and the collections a CREATE reads, no other object.

Logical uppers. Every object is complete up to ``now`` -- its *logical* upper is ``now + 1``
-- but a commit moves the collections of what it writes only: an object nothing reached
lags, its collection's upper where its last change left it, holding nothing after it (as
a durable catalog's arrangements lag its record's upper, ``colmz.catalog.store``, "Lazy
uppers"). Whatever reads an object -- :meth:`Engine.object`, :meth:`Engine.collection`,
a query, a CREATE reading its inputs, a task its inputs -- first moves a lagging upper to
the time it reads through (:meth:`Engine._bring`: O(1), the collection kept first, also in
the state a write at ``time=now`` reopens), so every reader sees ``now + 1``. A commit's
work is then what it touches (``commit_work``), not how many objects the catalog holds;
:meth:`Engine.held` gives an object as held, lagging, to a durable commit.

Every query runs in DuckDB over Arrow tables registered for the duration of the query: each
collection the query names is read as of the evaluation time and expanded to rows
(:func:`colmz.sql.bind_relations` gives each its own DuckDB name). SQL is parsed and
translated by :mod:`colmz.sql`. The durable catalog (:class:`colmz.catalog.Catalog`) drives
an engine and commits what it holds to the store; an engine knows nothing of storage.
"""

from __future__ import annotations

import heapq
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa

from colmz.catalog.column_kinds import declared_kind, query_kinds, relation_kinds
from colmz.catalog.ddl import Definitions
from colmz.catalog.objects import (
    CatalogObject,
    Key,
    changes_at,
    copy_schemas,
    definition_key,
    key_of,
    relation_of,
)
from colmz.catalog.queries import Queries
from colmz.catalog.schedule import Schedule, due_of
from colmz.catalog.subscriptions import Subscriptions
from colmz.catalog.views import Views
from colmz.continual import ContinualTask, MemoryCollection
from colmz.dataflow.guard import MORE_THAN_ONE_ROW, error_at
from colmz.dataflow.maintained import MODES as VIEW_MODES
from colmz.dataflow.maintained import FallbackWarning
from colmz.dataflow.shared import SharedArrangements
from colmz.errors import NegativeMultiplicity
from colmz.frontier import MAX_TIME, check_time
from colmz.ops import concat, consolidate
from colmz.rollback import Saved, covered, roll_back, save
from colmz.rows import conform, rows_to_updates
from colmz.sql import (
    DEFAULT_DATABASE,
    DEFAULT_SCHEMA,
    DeleteStatement,
    ExplainView,
    InsertStatement,
    Query,
    Show,
    SQLError,
    Subscribe,
    UnsupportedSQL,
    UpdateStatement,
    bind_relations,
    display_name,
    parse,
    rename_like_postgres,
    select_list_is_empty,
    select_where,
    sql_name,
    update_select,
)
from colmz.sql.assign import typed_assignment, typed_values, untyped_columns
from colmz.sql.tokens import require_text
from colmz.sql.write import (
    as_jsonb,
    assign,
    check_json_sources,
    check_jsonb_values,
    fit_lengths,
    insert_rows,
    is_json,
    is_jsonb,
    varchar_lengths,
)
from colmz.updates import Updates

__all__ = ["AppendOnlyViolation", "Engine"]


class AppendOnlyViolation(SQLError):
    """A ``DELETE``, ``UPDATE`` or retracting append into a table created ``WITH (APPEND
    ONLY)``: refused, the catalog unchanged (views over it may rely on it only growing)."""

#: The step a durable catalog runs at the end of a call, inside its transaction: when it
#: raises, the call is rolled back (None: nothing to run).
Persist = Callable[[], None] | None


class Engine(Definitions, Queries, Views, Subscriptions):
    """Named collections at logical times, in memory (module docstring).

    Parameters
    ----------
    connection : duckdb.DuckDBPyConnection
        The DuckDB connection every query runs on (``colmz.sql.session()``).
    durable : bool, default False
        Whether a durable catalog drives this engine: ``now`` is then persisted sealed, so
        a write at ``time=now`` is refused.
    views : {"incremental", "recompute"}, default "incremental"
        How materialized views are maintained (``colmz.Catalog``'s ``views``).

    Examples
    --------
    >>> from colmz.sql import session
    >>> eng = Engine(session())
    >>> eng.execute(parse("CREATE TABLE t (k INT); INSERT INTO t VALUES (1), (2)"), None)
    >>> eng.now, eng.read("t").to_pylist()
    (1, [(1, 1, 1), (2, 1, 1)])
    """

    #: The in-memory state a failed call rolls back (``colmz.rollback``): the objects (each
    #: rolled back in place, so a task's output and a view's inputs stay the same objects),
    #: their order, ``now``, the definitions and how to reopen ``now``, the arrangements shared
    #: between views (``colmz.dataflow.shared``, in place). The connection and
    #: configuration are not (tests/colmz/test_rollback.py says why for each).
    ROLLBACK_FIELDS = ("_objects", "_order", "_now", "_defs", "_at_now", "_schemas", "_shared")
    #: Saved by reference, what a call changes through them kept on touch (module docstring):
    #: only DDL changes the containers, and it replaces them by copies first (:meth:`_before_ddl`).
    ROLLBACK_ON_TOUCH = ("_objects", "_order", "_defs", "_schemas", "_shared")

    def __init__(self, connection, *, durable: bool = False, views: str = "incremental"):
        if views not in VIEW_MODES:
            raise ValueError(f"views must be one of {list(VIEW_MODES)}, got {views!r}")
        self._views = views
        self._con = connection
        self._durable = durable
        self._objects: dict[Key, CatalogObject] = {}
        self._order: list[Key] = []
        # Databases and their schemas, in creation order: Materialize's default ones until
        # a CREATE/DROP SCHEMA or DATABASE.
        self._schemas: dict[str, list[str]] = {DEFAULT_DATABASE: [DEFAULT_SCHEMA]}
        self._now = 0
        self._reopened_at: int | None = None  # the time a reopen loaded contents at
        self._defs: list[dict] = []
        # ``(the definitions list, its length, key -> definition)``: definition_of's index
        self._def_index: tuple | None = None
        # How to reopen time ``now`` for a write at ``time=now``: the state saved before the
        # commit that sealed it, that commit's table changes and the derived objects it
        # changed (None: it cannot be; always in a durable catalog, where now is persisted
        # sealed).
        self._at_now: tuple | None = None
        # The derived objects' changes at ``now`` a reopened commit must reproduce: those the
        # commit that sealed ``now`` changed (every other one has none at ``now``).
        self._expect: dict[str, list] | None = None
        # The arrangements the views' operators share, by (relation, key) (colmz.catalog.views).
        self._shared = SharedArrangements()
        # -- views' load work and the durable catalog's restore (colmz.catalog.views) --
        self.view_work = {"initialized": 0, "restored": 0, "input_rows_read": 0}
        # the shared arrangements filled from their relation / restored from durable state
        self.shared_work = {"filled": 0, "restored": 0}
        self.resume_view = None
        # ``resume_shared(engine)``: put the shared arrangements' durable state in ``_shared``
        # before a load renders the views (set by a durable catalog while it loads)
        self.resume_shared = None
        # The saves in progress (the call's, and a commit's own before-state): each structure
        # a call is about to change is kept in every one of them (:meth:`_keep`). Scratch.
        self._saves: list[Saved] = []
        #: What the calls' saves cost (cumulative, never rolled back; a work counter): the
        #: ``calls`` saved, the ``kept`` structures saved on touch and the elements ``copied``.
        self.save_work = {"calls": 0, "kept": 0, "copied": 0}
        # Which derived objects a commit steps (colmz.catalog.schedule): derived from the
        # objects, changed by DDL as it adds and drops them, built whole only on first use,
        # after a load and after a failed call that ran DDL. Scratch.
        self._schedule: Schedule | None = None
        #: What keeping the schedule cost (cumulative, never rolled back; a work counter):
        #: the times it was ``built`` whole and the ``entries`` (objects and their edges) it
        #: was built or changed by -- DDL changes it by the objects it creates and drops.
        self.schedule_work = {"built": 0, "entries": 0}
        # The objects the running call changed (:attr:`touched`). Scratch, per call.
        self._touched: set[Key] = set()
        #: What the commits visited (cumulative, never rolled back; a work counter): the
        #: ``tables`` written and the derived objects ``visited`` -- readers of a change,
        #: views come due, tasks -- never an object nothing reached; and the derived objects
        #: whose changes at ``now`` a write at ``time=now`` ``compared`` (those the commit it
        #: joins changed, and those it changes).
        self.commit_work = {"commits": 0, "tables": 0, "visited": 0, "compared": 0}

    # ------------------------------------------------------------------ accessors

    @property
    def now(self) -> int:
        """The latest committed time: every collection is complete up to it."""
        return self._now

    @property
    def names(self) -> list[Key]:
        """Object keys in creation order (``colmz.Catalog.names``)."""
        return list(self._order)

    @property
    def schemas(self) -> list[tuple[str, str]]:
        """The schemas as ``(database, schema)``, each database's in creation order."""
        return [(db, sc) for db, scs in self._schemas.items() for sc in scs]

    def __contains__(self, name) -> bool:
        try:
            return key_of(name) in self._objects
        except (TypeError, SQLError):
            return False

    def object(self, name: Key | tuple[str, ...]) -> CatalogObject:
        """The entry called ``name`` (``colmz.Catalog.object``; ``KeyError`` naming the known ones)."""
        try:
            obj = self._objects[key_of(name)]
        except KeyError:
            shown = [display_name(n) for n in self._order]
            raise KeyError(f"no object {name!r} in the catalog; objects are {shown}") from None
        return self._bring(obj)  # its collection at now + 1 for whoever reads it

    def task(self, name: Key | tuple[str, ...]) -> ContinualTask:
        """The :class:`colmz.ContinualTask` behind continual task ``name``."""
        obj = self.object(name)
        if obj.task is None:
            raise KeyError(f"{name!r} is a {obj.kind}, not a continual task")
        return obj.task

    def as_of(self, as_of: int | None) -> int:
        """The time a read ``as_of`` reads at: ``now`` by default, never after it."""
        if as_of is None:
            return self._now
        as_of = check_time(as_of, "as_of")
        if as_of > self._now:
            raise ValueError(f"as_of {as_of} is after cat.now {self._now}: not yet complete")
        return as_of

    def read(self, name: Key | tuple[str, ...], as_of: int | None = None) -> Updates:
        """The contents of ``name`` as of ``as_of`` (default ``now``), consolidated.

        >>> from colmz.sql import session
        >>> eng = Engine(session()); eng.execute(parse("CREATE TABLE t (k TEXT)"), None)
        >>> eng.execute(parse("INSERT INTO t VALUES ('a'), ('a')"), None)
        >>> eng.read("t").to_pylist()
        [('a', 1, 2)]
        """
        obj = self.object(name)
        at = self.as_of(as_of)
        if at < obj.collection.since:
            raise ValueError(self._unreadable(obj.name, at))
        self.check_view_errors(obj.name, at)
        return obj.collection.snapshot(at)

    def frontiers(self, name: Key | tuple[str, ...]) -> tuple[int, int]:
        """``(since, upper)`` of ``name``'s contents: :meth:`read` answers at
        ``since <= as_of < upper`` (``colmz.Catalog.frontiers``)."""
        c = self.object(name).collection
        return c.since, c.upper

    def sql(self, query: str, as_of: int | None = None) -> pa.Table:
        """Run a query (``SELECT``/``WITH``/``VALUES``/``TABLE``, or ``SHOW``) as of ``as_of``.

        >>> from colmz.sql import session
        >>> Engine(session()).sql("SELECT mz_now() AS t, 7 / 2 AS q").to_pylist()
        [{'t': 0, 'q': 3}]
        """
        return self.answer(self.query_statement(query), as_of)

    @staticmethod
    def query_statement(query: str) -> Query | Show | ExplainView | Subscribe:
        """The one query (or ``SHOW``, ``EXPLAIN``, ``SUBSCRIBE``) ``query`` holds, parsed
        (``SQLError`` otherwise)."""
        stmts = parse(require_text(query, "query"))
        if len(stmts) != 1 or not isinstance(stmts[0], (Query, Show, ExplainView, Subscribe)):
            raise SQLError("cat.sql runs one query (SELECT, WITH, VALUES, TABLE, SHOW, EXPLAIN or SUBSCRIBE); "
                           "use cat.execute for statements")
        return stmts[0]

    def answer(self, s: Query | Show | ExplainView | Subscribe, as_of: int | None = None) -> pa.Table:
        """The result of the parsed query ``s`` (:meth:`query_statement`) as of ``as_of``."""
        if isinstance(s, Show):
            return self._show(s)
        if isinstance(s, ExplainView):
            return self.explain_rows(s)
        if isinstance(s, Subscribe):
            return self.subscribe_table(s, as_of)
        if s.as_of is not None and as_of is not None and s.as_of != as_of:
            raise ValueError(f"the query says AS OF {s.as_of} and as_of={as_of} is given: give one")
        when = s.as_of if s.as_of is not None else as_of
        return rename_like_postgres(self._query(s.sql, self.as_of(when), {}), s.sql)

    # ------------------------------------------------------------------ statements

    def execute(self, stmts: list, time: int | None, persist: Persist = None) -> pa.Table | None:
        """Run the parsed script ``stmts`` (``colmz.sql.parse``) as one transaction: its
        writes commit together at ``time`` or ``now + 1`` (``colmz.Catalog.execute`` says
        how), then ``persist`` runs. A call that raises -- ``persist`` too -- changes
        nothing. Returns the result of a script ending in a query."""
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
        saved = self._begin()
        # The state before the first commit, while nothing changed it since ``saved`` (no
        # reopen, no DDL): that commit reuses it instead of saving the engine again.
        unchanged: Saved | None = saved if commit_at != self._now else None
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
                elif isinstance(s, (Query, Show, ExplainView, Subscribe)):
                    if pending or self._wrote(stmts[:i], commit_at):
                        self._commit(commit_at, pending, unchanged)
                        pending = {}
                    if isinstance(s, Show):
                        result = self._show(s)
                    elif isinstance(s, ExplainView):
                        result = self.explain_rows(s)
                    elif isinstance(s, Subscribe):
                        result = self.subscribe_table(s)
                    else:
                        when = self.as_of(s.as_of)
                        result = rename_like_postgres(self._query(s.sql, when, {}), s.sql)
                else:
                    if pending or self._wrote(stmts[:i], commit_at):
                        self._commit(commit_at, pending, unchanged)
                        pending = {}
                    unchanged = None
                    self._before_ddl()
                    self._ddl(s)
                    result = None
            if writes and self._now < commit_at:
                self._commit(commit_at, pending, unchanged)
            if persist is not None:
                persist()
        except BaseException:
            self._roll_back(saved)
            raise
        finally:
            self._end(saved)
        return result

    def _wrote(self, before, commit_at: int) -> bool:
        # Whether a write statement in ``before`` is still uncommitted (even one that changed
        # nothing commits its time).
        return self._now < commit_at and any(
            isinstance(x, (InsertStatement, DeleteStatement, UpdateStatement)) for x in before
        )

    def append(self, name: Key, batch: Updates, time: int, persist: Persist = None) -> None:
        """Commit ``batch`` (``colmz.catalog.frames.table_batch``) to table ``name`` at
        ``time``, then run ``persist``; a call that raises changes nothing."""
        # Checked here, not only by the caller: a durable retry runs against a refreshed
        # engine (another handle may have committed later times, or dropped and recreated
        # the table).
        obj = self.object(name)
        if obj.kind != "table" or tuple(obj.schema) != tuple(batch.schema):
            raise ValueError(f"cannot append to {display_name(name)!r}: another handle changed it to a {obj.kind} "
                             f"with columns {[c.name for c in obj.schema]}")
        if time < self._now:
            raise ValueError(f"time={time} is before cat.now={self._now}: times before now are sealed")
        saved = self._begin()
        try:
            pending = self._reopen_now() if time == self._now else {}
            prev = pending.get(name)
            pending[name] = consolidate(concat([prev, batch])) if prev is not None else batch
            # a batch appended alone is not known to be consolidated: views read it back
            self._commit(time, pending, saved if time != self._now else None, consolidated=prev is not None)
            if persist is not None:
                persist()
        except BaseException:
            self._roll_back(saved)
            raise
        finally:
            self._end(saved)

    # ------------------------------------------------------------------ saving

    def _begin(self) -> Saved:
        """Save the engine for a call (its containers by reference, O(1)) and collect in
        that save what the call is about to change (:meth:`_keep`)."""
        saved = save(self)
        self._saves = [saved]
        self._touched = set()
        if self._schedule is not None:
            self._schedule.clear_taken()
        return saved

    def _end(self, saved: Saved) -> None:
        self._saves = []
        self.save_work["calls"] += 1
        self.save_work["kept"] += saved.kept
        self.save_work["copied"] += saved.copied

    def _keep(self, target) -> None:
        """Save ``target`` -- an object, a collection, an arrangement, the shared registry --
        as it is now in every save in progress, before the call changes it (a second keep of
        the same structure in one save costs a lookup)."""
        for s in self._saves:
            s.keep(target)

    def keep_inputs(self, keys) -> None:
        """Keep the collections of the objects ``keys`` before a CREATE reads them (a read
        may load a durable table's contents or move a lagging upper)."""
        for k in keys:
            self._keep(self._objects[k].collection)

    def _before_ddl(self) -> None:
        """Before a DDL statement changes the catalog: keep the shared arrangements (a CREATE
        attaches to them or fills new ones, a DROP releases them) and give the containers
        saved by reference fresh copies to change (copy-on-write: references copied, no
        object saved). No existing object changes but the collections a CREATE reads, which
        it keeps itself (:meth:`keep_inputs`): a DDL statement saves what it touches."""
        if not self._saves:
            return
        self._keep(self._shared)
        self._objects = dict(self._objects)
        sched, order = self._schedule, self._order
        self._order = list(order)
        if sched is not None and sched.valid_for(order):
            sched.follow(self._order)  # the same objects: the schedule follows the copy
        self._defs = list(self._defs)

    # ------------------------------------------------------------------ writes

    def _table(self, name: Key, written: str) -> CatalogObject:
        obj = self._objects.get(name)
        if obj is None:
            raise SQLError(f"unknown catalog item {written!r}")
        if obj.kind != "table":
            raise SQLError(f"cannot write to {display_name(name)!r}: it is a {obj.kind}")
        return obj

    def append_only(self, key: Key) -> bool:
        """Whether ``key`` is a table created ``WITH (APPEND ONLY)`` (its definition says so)."""
        d = self.definition_of(key)
        return d is not None and d.get("kind") == "table" and d["stmt"].get("append_only", False)

    def _declared_types(self, key: Key) -> list[tuple[str, str]]:
        # The (name, declared SQL type) of each column of table ``key`` ([] for another kind):
        # colmz stores jsonb, json, text and varchar(n) alike; its definition says which.
        d = self.definition_of(key)
        if d is None or d.get("kind") != "table":
            return []
        return list(d["stmt"].get("columns", ()))

    def _written(self, sql: str, t: int, pending) -> pa.Table:
        # The values a write computes: a DEFAULT left inside an expression or a SELECT (one
        # standing for a whole VALUES item or SET value is NULL before this) is PostgreSQL's
        # error, not DuckDB's binder's
        try:
            return self._query(sql, t, pending)
        except SQLError as e:
            if "cannot contain DEFAULT clause" in str(e) or "DEFAULT is not allowed here" in str(e):
                raise SQLError("DEFAULT is not allowed in this context") from None
            raise

    def _json_target(self, key: Key, column: str) -> tuple[str, str] | None:
        # (column, "jsonb" or "json") when table ``key`` declares ``column`` so, else None
        typ = dict(self._declared_types(key)).get(column)
        return None if typ is None else (column, "jsonb") if is_jsonb(typ) else (column, "json") if is_json(typ) \
            else None

    def _jsonb_columns(self, key: Key, kind=is_jsonb) -> list[int]:
        # The positions of the columns table ``key`` declares jsonb (``kind=is_json``: json).
        return [i for i, (_, typ) in enumerate(self._declared_types(key)) if kind(typ)]

    def column_kinds(self, key: Key) -> list[str | None]:
        """The SQL kind of each column of the object keyed ``key`` (``colmz.catalog.
        column_kinds``): ``"jsonb"``, ``"json"``, ``"text"`` or ``None`` (not one of them, or
        not known). A table's are its declared types; a view's or task's are kept in its
        definition (derived at ``CREATE``), or derived now for a definition written before."""
        d = self.definition_of(key)
        schema = self._objects[key].schema
        if d is None:
            return [None] * len(schema)
        kept = d.get("column_kinds")
        if kept is not None and len(kept) == len(schema):
            return list(kept)
        return self.derive_kinds(key, d)

    def derive_kinds(self, key: Key, d: dict) -> list[str | None]:
        """The column kinds of the object keyed ``key`` from its definition ``d`` (its
        statement, the objects it reads): a table's or a task's declared column types; a
        view's query's (:func:`colmz.catalog.column_kinds.query_kinds`); a task without a
        column list has its input's (a self-referencing one) or its first INSERT's."""
        schema = self._objects[key].schema
        st = d["stmt"]
        if st.get("columns") and d["kind"] in ("table", "continual task"):
            return [declared_kind(t, c.type) for (_, t), c in zip(st["columns"], schema)]
        if d["kind"] == "materialized view":
            return self.query_kinds(st["query"], len(schema))
        if d["kind"] == "continual task":
            input_key = key_of((*st.get("input_qualifier", ()), st["input"]))
            inserts = [b["insert"] for b in st["body"] if "insert" in b]
            if len(inserts) == len(st["body"]) and inserts and key not in self._reads(inserts[0]):
                return self.query_kinds(inserts[0], len(schema))
            if input_key in self._objects and [c.name for c in self._objects[input_key].schema] == \
                    [c.name for c in schema]:
                return self.column_kinds(input_key)
        return [None] * len(schema)

    def read_columns(self, query: str, own: Key | None = None, own_columns=()) -> list[tuple]:
        """The columns (name, kind, Arrow type) of the objects ``query`` reads, in order
        (``own``: a task being created, whose columns ``own_columns`` are given so)."""
        out: list[tuple] = []
        objects = frozenset(self._objects) if own is None else frozenset((*self._objects, own))
        for b in bind_relations(self.translated(query), objects)[1]:
            if b == own and b not in self._objects:
                out.extend(own_columns)
            elif b in self._objects:
                schema = self._objects[b].schema
                out.extend((c.name, k, c.type) for c, k in zip(schema, self.column_kinds(b)))
        return out

    def query_kinds(self, query: str, width: int) -> list[str | None]:
        """The kinds of the ``width`` columns of ``query`` over the objects it reads
        (:func:`colmz.catalog.column_kinds.query_kinds`; a ``*`` over one object is its
        columns')."""
        read = self.read_columns(query)
        objects = set(bind_relations(self.translated(query), frozenset(self._objects))[1])
        star = [k for _, k, _ in read] if len(objects) == 1 and len(read) == len(self._objects[
            next(iter(objects))].schema) else None
        return query_kinds(query, width, relation_kinds([(n, k) for n, k, _ in read]), star)

    def check_jsonb_text(self, query: str, targets, columns, types=()) -> None:
        """PostgreSQL's type error of a text expression of ``query`` written to a jsonb
        (or json) column (``targets``: the column each expression is written to, or None;
        ``types``: each one's type, jsonb where not given), ``columns`` those it reads
        (:meth:`read_columns`): a text column is one whose kind is text. A string column of
        no known kind (a view's column colmz cannot type) may be either: where taking it for
        text or for jsonb would decide the outcome, :class:`UnsupportedSQL` names it rather
        than guess."""
        text_cols: set[str] = set()
        jsonb_cols: set[str] = set()
        unknown: set[str] = set()
        for n, k, t in columns:
            if k == "text":
                text_cols.add(n.lower())
            elif k in ("jsonb", "json"):
                jsonb_cols.add(n.lower())
            elif k is None and (pa.types.is_string(t) or pa.types.is_large_string(t)):
                unknown.add(n.lower())
        unknown -= text_cols | jsonb_cols  # a name also of a known kind is taken as that
        try:
            check_jsonb_values(query, targets, frozenset(text_cols | unknown), frozenset(jsonb_cols), types)
        except SQLError:
            # PostgreSQL's error when it stands with those columns taken for jsonb too
            check_jsonb_values(query, targets, frozenset(text_cols), frozenset(jsonb_cols | unknown), types)
            raise UnsupportedSQL(
                f"writing a column of no known type ({', '.join(sorted(unknown))}: json, jsonb or text; colmz "
                "cannot type it through this view's query) to a jsonb or json column is not supported by "
                "colmz: cast it, x::jsonb or x::text") from None

    def definition_of(self, key: Key) -> dict | None:
        """The stored definition of the object keyed ``key`` (None: no such object), looked
        up in an index of the definitions rebuilt only when they change (a DDL statement
        replaces or extends the list): O(1) per statement, not O(objects)."""
        defs = self._defs
        index = self._def_index
        if index is None or index[0] is not defs or index[1] != len(defs):
            index = self._def_index = (defs, len(defs), {definition_key(d): d for d in defs})
        return index[2].get(key)

    def _check_jsonb_text(self, query: str, columns, key: Key, schema) -> None:
        # PostgreSQL refuses a text expression written to a jsonb column (no assignment cast
        # from text to jsonb): colmz.sql.write.check_jsonb_values, typed by the columns of
        # the relations the query reads.
        names = [c.name for c in schema]
        typed = {names[i]: "jsonb" for i in self._jsonb_columns(key)}
        typed.update({names[i]: "json" for i in self._jsonb_columns(key, is_json)})
        if not typed:
            return
        targets = [n if n in typed else None for n in (columns if columns is not None else names)]
        if not any(targets):
            return
        # each object read typed by its column kinds (colmz.catalog.column_kinds): a view's
        # column is its query's; one whose kind colmz cannot tell is refused by name where
        # its kind decides the outcome
        self.check_jsonb_text(query, targets, self.read_columns(query), [typed.get(n) for n in targets])

    def _write(self, s, t: int, pending: dict[Key, Updates]) -> None:
        key = key_of((*s.qualifier, s.table))
        obj = self._table(key, sql_name((*s.qualifier, s.table)) if s.qualifier else s.table)
        schema = obj.schema
        rel = relation_of(key)
        what = f"INSERT INTO {display_name(key)}"
        if not isinstance(s, InsertStatement) and self.append_only(key):
            kind = "DELETE FROM" if isinstance(s, DeleteStatement) else "UPDATE"
            raise AppendOnlyViolation(f"{kind} {display_name(key)}: the table is append-only (created WITH "
                                      "(APPEND ONLY)): it only inserts")
        if isinstance(s, InsertStatement):
            if select_list_is_empty(s.query):
                # PostgreSQL inserts a row of defaults per row of a zero-column SELECT, which
                # DuckDB cannot parse
                raise UnsupportedSQL(f"{what}: an empty select list is not supported by colmz")
            self._check_jsonb_text(s.query, s.columns, key, schema)
            # VALUES literals take their column's type before the rows are combined
            # (colmz.sql.assign.typed_values), as in PostgreSQL.
            value_types = [c.type for c in schema] if s.columns is None else \
                [next((c.type for c in schema if c.name == n), pa.null()) for n in s.columns]
            declared = dict(self._declared_types(key))
            text = [declared_kind(declared.get(n, ""), None) == "text"
                    for n in ([c.name for c in schema] if s.columns is None else s.columns)]
            rows = self._written(typed_values(s.query, value_types, text), t, pending)
            written = [c.name for c in schema][: rows.num_columns] if s.columns is None else s.columns
            check_json_sources(rows.schema.types, [self._json_target(key, n) for n in written], what)
            values = s.query.lstrip()[:6].upper() == "VALUES"
            rows = insert_rows(self._con, rows, schema, s.columns, what=what, table=s.table, t=self._now,
                               literals=values and untyped_columns(s.query, rows.num_columns))
            rows = as_jsonb(rows, self._jsonb_columns(key), self._jsonb_columns(key, is_json))  # jsonb's text; json checked
            rows = fit_lengths(rows, varchar_lengths([typ for _, typ in self._declared_types(key)]))
            change = rows_to_updates(conform(rows, schema, what), t, 1)
        elif isinstance(s, DeleteStatement):
            rows = self._query(select_where(rel, s.where), t, pending)
            change = rows_to_updates(conform(rows, schema, f"DELETE FROM {s.table}"), t, -1)
        else:
            names = [c.name for c in schema]
            # a string literal takes its column's type, as PostgreSQL's UPDATE coerces it
            types = {c.name: c.type for c in schema}
            # (DEFAULT is NULL: colmz's columns have no default)
            assigned = {n: "NULL" if e.strip().upper() == "DEFAULT" else typed_assignment(e, types[n]) if n in types
                        else e for n, e in s.assignments}
            new_sql = update_select(rel, names, assigned, s.where)  # checks every part first
            self._check_jsonb_text(new_sql, [n if n in assigned else None for n in names], key, schema)
            old = self._query(select_where(rel, s.where, f"UPDATE {s.table}: predicate"), t, pending)
            # As an INSERT, an UPDATE's values convert to their columns by assignment.
            new = self._written(new_sql, t, pending)
            check_json_sources(new.schema.types, [self._json_target(key, n) if n in assigned else None for n in names],
                               f"UPDATE {s.table}")
            new = assign(self._con, new, list(schema), f"UPDATE {s.table}", self._now)
            new = as_jsonb(new, self._jsonb_columns(key), self._jsonb_columns(key, is_json))  # jsonb's text; json checked
            new = fit_lengths(new, varchar_lengths([typ for _, typ in self._declared_types(key)]))
            change = concat([
                rows_to_updates(conform(old, schema, f"UPDATE {s.table}"), t, -1),
                rows_to_updates(conform(new, schema, f"UPDATE {s.table}"), t, 1),
            ])
        prev = pending.get(key)
        pending[key] = consolidate(concat([prev, change])) if prev is not None else consolidate(change)

    def _commit(self, t: int, pending: Mapping[str, Updates], unchanged: Saved | None = None,
                consolidated: bool = True) -> None:
        """Write ``pending`` table changes at ``t``, then bring every derived object to ``t``.
        ``unchanged``: the call's save of the engine, when nothing changed the engine since
        (reused as the state before this commit instead of saving it again);
        ``consolidated``: every change of ``pending`` is consolidated (a view is fed it as it
        is, not read back from the table)."""
        if t <= self._now:
            raise ValueError(f"time {t} is not after cat.now={self._now}")
        self.commit_work["commits"] += 1
        # Kept only to reopen now for a write at time=now, which a durable catalog refuses
        # (now is persisted sealed). Without _at_now itself: the saved state need not keep the
        # previous commit's saved state alive (each would hold the one before). Its structures
        # are those this commit keeps on touch: ``unchanged``'s, or its own save's.
        own = None
        if not self._durable and unchanged is None:
            own = save(self, exclude=("_at_now",))
            self._saves.append(own)
        try:
            self._commit_objects(t, pending, consolidated)
        finally:
            if own is not None:
                self._saves.remove(own)
        if self._durable:
            before = None
        elif own is not None:
            before = own
        else:
            before = unchanged.without("_at_now")
        # the derived objects this call changed (at t: DDL after this commit clears _at_now)
        derived = frozenset(k for k in self._touched if self._objects[k].kind != "table")
        self._at_now = None if before is None else (before, {k: v for k, v in pending.items() if len(v)}, derived)

    def _commit_objects(self, t: int, pending: Mapping[str, Updates], consolidated: bool) -> None:
        """:meth:`_commit`'s work: the tables written, then the derived objects that may
        change at ``t`` (``colmz.catalog.schedule``) brought to it, in creation order; each
        structure kept (:meth:`_keep`) before it changes. Every other object lags (module
        docstring, "Logical uppers")."""
        sched = self._scheduled()
        changed = set()
        # each object's change at t, read once (the tables' as written, when consolidated)
        known = dict(pending) if consolidated else {}
        for name in sorted(pending, key=sched.rank.__getitem__):  # creation order: the first refusal
            obj = self._objects[name]
            change = pending[name]
            if change is None or not len(change):
                continue  # nothing written: the table lags
            coll = obj.collection
            self._keep(coll)
            self._touched.add(name)
            self.commit_work["tables"] += 1
            # consolidated once here: the retraction check, the table's append and the
            # views reading it back take it as it is (colmz.consolidate's mark)
            change = consolidate(change)
            if len(change) and change.diff.min() < 0 and self.append_only(name):
                # an append of negative diffs (Catalog.append): refused as a DELETE is
                row = change.take(np.flatnonzero(change.diff < 0)[:1]).to_pylist()[0]
                raise AppendOnlyViolation(f"table {display_name(name)!r} is append-only (created WITH (APPEND "
                                          f"ONLY)): the change retracts row {row[:-2]}")
            self._check_retractions(name, coll, change)
            coll.compare_and_append(change, coll.upper, t + 1)
            changed.add(name)
            if not len(change) or (change.time[0] == t and change.time[-1] == t):  # what the views read
                known[name] = change
        for name in changed:  # the tables' shared arrangements, before any view steps
            self._feed_shared(name, t, known)
        # the derived objects to bring to t, by creation rank: readers of what changed
        # (added as their inputs write; a task reads its input only) and views due at t
        todo = [(sched.rank[k], k) for k in {*sched.readers_of(changed), *sched.take_due(t)}]
        heapq.heapify(todo)
        queued = {k for _, k in todo}
        while todo:
            _, name = heapq.heappop(todo)
            obj = self._objects[name]
            self.commit_work["visited"] += 1
            wrote = False
            if obj.kind == "materialized view":
                if obj.maintained is not None:  # its operators, fed the deltas (colmz.catalog.views)
                    inputs = obj.deps & changed
                    if inputs or not obj.maintained.idle(t):
                        self._keep(obj)
                        self._touched.add(name)
                        # covered: the engine's saves keep this object (its operators and sink),
                        # and a failure rolls the engine back (so the view's own saves are skipped)
                        with covered():
                            wrote = len(obj.maintained.step(t, self._deltas_at(inputs, t, known))) > 0
                else:
                    wrote = self._recompute(obj, t, force=obj.uses_now or bool(obj.deps & changed))
                sched.set_due(name, due_of(obj))
            elif obj.kind == "continual task":
                self._keep(obj)
                self._touched.add(name)
                for n in obj.deps:  # what it reads, complete up to t (they may lag)
                    self._bring(self._objects[n], t + 1)
                done = obj.task.stats["times_processed"]
                obj.task.run()
                wrote = obj.task.stats["times_processed"] != done and len(obj.collection.updates(t, t + 1)) > 0
            if wrote:
                changed.add(name)
                self._feed_shared(name, t, known)
                for r in sched.readers.get(name, ()):
                    if r not in queued:
                        queued.add(r)
                        heapq.heappush(todo, (sched.rank[r], r))
        expect, self._expect = self._expect, None
        # A reopened commit reproduces the derived objects' changes at t: those the commit it
        # joins changed (expect) and those this one changed (touched); any other object has
        # none at t in both -- nothing else writes a collection at t (_bring adds no update).
        check = {} if expect is None else {
            **{k: [] for k in self._touched if self._objects[k].kind != "table"}, **expect}
        for name, old in check.items():
            self.commit_work["compared"] += 1
            if changes_at(self._objects[name].collection, t) != old:
                raise ValueError(
                    f"time={t} (cat.now) would revise {self._objects[name].kind} {display_name(name)!r} at time "
                    f"{t}, already sealed: commit at a later time"
                )
        self._now = t

    def _scheduled(self) -> Schedule:
        """The schedule of the objects as they are (``colmz.catalog.schedule``): kept up to
        date by DDL (:meth:`schedule_add`, :meth:`schedule_remove`), built whole only when
        there is none (first use, a load) or it follows another list of objects (a failed
        call that ran DDL was rolled back)."""
        sched = self._schedule
        if sched is None or not sched.valid_for(self._order):
            sched = self._schedule = Schedule(self._order, self._objects)
            self.schedule_work["built"] += 1
            self.schedule_work["entries"] += sched.work
        return sched

    def schedule_add(self, obj: CatalogObject) -> None:
        """Add ``obj`` to the schedule before a CREATE appends it to the objects: O(its
        edges) (nothing when there is no schedule following them: it is built when needed)."""
        sched = self._schedule
        if sched is None or not sched.valid_for(self._order):
            self._schedule = None
            return
        before = sched.work
        sched.add(obj.name, obj)
        self.schedule_work["entries"] += sched.work - before

    def schedule_remove(self, keys, order: list[Key]) -> None:
        """Remove the objects ``keys`` (still in ``_objects``) from the schedule before a DROP
        replaces the objects' list by ``order``: O(their edges)."""
        sched = self._schedule
        if sched is None or not sched.valid_for(self._order):
            self._schedule = None
            return
        before = sched.work
        for k in keys:
            sched.remove(k, self._objects[k])
        sched.follow(order)
        self.schedule_work["entries"] += sched.work - before

    def _bring(self, obj: CatalogObject, upto: int | None = None) -> CatalogObject:
        """``obj`` with its collection's upper at ``upto`` (default ``now + 1``): a lagging
        collection holds nothing since its upper, so moving it changes no contents (module
        docstring, "Logical uppers"). Kept first in every save in progress and in the state
        a write at ``time=now`` reopens, which must find it where it was."""
        coll = obj.collection
        upto = self._now + 1 if upto is None else upto
        if coll.upper is not None and coll.upper < upto:
            self._keep(coll)
            if self._at_now is not None:
                self._at_now[0].keep(coll)
            coll.compare_and_append(self._empty(obj), coll.upper, upto)
        return obj

    def held(self, key: Key) -> CatalogObject:
        """The object keyed ``key`` (exactly: a :data:`Key`) as held: its collection's upper
        may lag ``now + 1`` (it holds nothing after it), unlike :meth:`object`'s. A durable
        catalog's commit reads it so, to write what changed and nothing else."""
        return self._objects[key]

    @property
    def touched(self) -> tuple[Key, ...]:
        """The objects the running call changed -- tables written, views stepped, tasks run
        -- in creation order (a durable commit writes them in a repeatable order), for a
        durable catalog's commit to write (empty outside a call)."""
        rank = self._scheduled().rank
        return tuple(sorted(self._touched, key=lambda k: rank.get(k, -1)))

    @staticmethod
    def _empty(obj: CatalogObject) -> Updates:
        """An empty batch of ``obj``'s columns, made once per object (immutable)."""
        empty = obj.empty
        if empty is None or tuple(empty.schema) != tuple(obj.collection.schema):
            empty = obj.empty = Updates.empty(obj.schema)
        return empty

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
        # an update's old rows out are often one stretch (one row): sliced, zero-copy
        a, b = int(neg[0]), int(neg[-1]) + 1
        out = change.slice(a, b) if b - a == len(neg) else change.take(neg)
        after = coll.counts(out) + out.diff
        if after.min() < 0:
            i = int(np.argmax(after < 0))
            row = out.slice(i, i + 1).to_pylist()[0][:-2]
            raise NegativeMultiplicity(f"table {display_name(name)!r} would hold row {row} with multiplicity "
                                       f"{int(after[i])}")

    def _recompute(self, obj: CatalogObject, t: int, force: bool) -> bool:
        coll = obj.collection
        if not force:
            return False  # it lags
        self._keep(obj)
        self._touched.add(obj.name)
        new = self._view_rows(obj, t, f"MATERIALIZED VIEW {obj.name}")
        if new is None:  # its query raises: an error of the view, its contents kept
            coll.compare_and_append(Updates.empty(obj.schema), coll.upper, t + 1)
            return False
        old = obj.contents
        delta = consolidate(concat([old.negated(), new]), since=t) if len(old) else new
        coll.compare_and_append(delta, coll.upper, t + 1)
        obj.contents = new
        return len(delta) > 0

    def _view_rows(self, obj: CatalogObject, t: int, what: str) -> Updates | None:
        """The rows of view ``obj``'s query at ``t`` (``+1`` updates), or ``None`` while the
        query raises :data:`~colmz.dataflow.guard.MORE_THAN_ONE_ROW` -- an error of the view,
        as Materialize keeps it: the commit lands, reading the view raises it
        (``obj.errors``), and its contents stay those of its last answer. The recompute
        path of :class:`colmz.dataflow.guard.ErrorGuard`. ``obj.errors`` is not durable: a
        durable catalog recomputing its views, reopened while one holds the error, reads
        its last answer until a commit recomputes it."""
        try:
            rows = conform(self._query_at(obj.query, t), obj.schema, what)
        except SQLError as e:
            if str(e) != MORE_THAN_ONE_ROW:
                raise
            if error_at(obj.errors, t) is None:
                obj.errors = (*obj.errors, (t, MORE_THAN_ONE_ROW))
            return None
        if error_at(obj.errors, t) is not None:
            obj.errors = (*obj.errors, (t, None))
        return consolidate(rows_to_updates(rows, t, 1))

    # ------------------------------------------------------------------ transactions

    def _reopen_now(self) -> dict[str, Updates]:
        """Undo the commit that sealed ``now`` and return its table changes, for a write at
        ``time=now`` to join; the derived objects' changes at ``now`` are kept in
        ``_expect`` for :meth:`_commit` to check that the joined commit reproduces them."""
        now = self._now
        if self._durable:
            raise ValueError(
                f"time={now} (cat.now): a durable catalog has persisted time {now} sealed; "
                "commit at a later time"
            )
        if self._at_now is None:
            raise ValueError(
                f"time={now} (cat.now): no commit at {now} to join (it was reached by DDL, a "
                "reopen, or no write yet); commit at a later time"
            )
        before, pending, derived = self._at_now
        # the derived objects that commit changed: every other one has no change at now
        expect = {n: changes_at(self._objects[n].collection, now) for n in derived}
        # Copies of the histories as they were before that commit: the lists themselves stay
        # whole for this call's own saved state, which a failure rolls back to. What that
        # commit changed (the structures its save kept) is kept by this call first.
        for target in before.structures:
            self._keep(target)
        roll_back(self, before, copy=True)
        # the views' due times are the rolled-back operators' (no DDL since: the same objects)
        self._reset_due(before)
        self._expect = expect
        return dict(pending)

    def _roll_back(self, saved: Saved) -> None:
        """Return to ``saved`` (``colmz.rollback.save(self)`` at the start of a call) after it
        failed: every object's collection and task in place, and the catalog's fields."""
        roll_back(self, saved)
        self._expect = None  # a reopened commit's check, for the call that reopened it only
        self._reset_due(saved)

    def _reset_due(self, saved: Saved) -> None:
        """After rolling back to ``saved``: the views' due times those of the operators put
        back -- the objects ``saved`` kept, and those the call took from the schedule's heap
        (a commit that failed may not have stepped them) -- or, when the call ran DDL (the
        objects put back are not the ones the schedule follows), no schedule: it is built
        when next needed."""
        sched = self._schedule
        if sched is None:
            return
        if not sched.valid_for(self._order):
            self._schedule = None
            return
        kept = [s.name for s in saved.structures if isinstance(s, CatalogObject)]
        sched.reset_due([*kept, *sched.taken], self._objects)
        sched.clear_taken()

    # ------------------------------------------------------------------ loading

    def load(self, defs: list[dict], collections: dict[Key, MemoryCollection],
             schemas: dict[str, list[str]], start: int | None, now: int) -> None:
        """Become the catalog of the stored definitions ``defs`` on ``collections`` (each
        object's contents from ``start`` on, :func:`colmz.catalog.objects.load_collection`),
        at ``now``, then bring every object to ``now`` (:meth:`bring_forward`). Called on a
        new engine only; reads before ``start`` are refused from then on."""
        self._schemas = copy_schemas(schemas)
        self._now = now
        self._reopened_at = start
        self.restore(defs, collections)
        if self.resume_shared is not None:  # before any view is rendered: they attach to these
            self.resume_shared(self)
        self.bring_forward()
        self._shared.discard_unused()  # restored for views that no longer use them
        self._schedule = None  # the views' operators were rendered anew

    def bring_forward(self) -> None:
        """Bring every object to ``now``: tables written behind the catalog's back leave the
        others behind; they advance empty, views are recomputed, tasks resume from their
        outputs' uppers."""
        for name in self._order:
            obj = self._objects[name]
            c = obj.collection
            if obj.kind == "table" and c.upper < self._now + 1:
                c.compare_and_append(Updates.empty(obj.schema), c.upper, self._now + 1)
            elif obj.kind == "materialized view" and self._views == "incremental":
                # The operators are restored from durable state (``resume_view``; the shared
                # arrangements they read were put back by ``resume_shared``) or rebuilt by one
                # computation over the inputs; the sink writes only a difference from the
                # persisted view.
                st = self.definition_of(name)["stmt"]
                with warnings.catch_warnings():  # CREATE warned of a Fallback already
                    warnings.simplefilter("ignore", FallbackWarning)
                    obj.maintained = self._maintain(name, st["query"], obj.query, c, obj.deps, self._now)
                obj.contents = None
            elif obj.kind == "materialized view" and c.upper < self._now + 1:
                new = self._view_rows(obj, self._now, f"MATERIALIZED VIEW {display_name(name)}")
                if new is None:  # an error of the view: its contents kept
                    c.compare_and_append(Updates.empty(obj.schema), c.upper, self._now + 1)
                    continue
                old = obj.contents
                delta = consolidate(concat([old.negated(), new]), since=self._now) if len(old) else new
                c.compare_and_append(delta, c.upper, self._now + 1)
                obj.contents = new
            elif obj.kind == "continual task":
                obj.task.run()

    def collection(self, key: Key) -> MemoryCollection:
        """The collection of the object keyed ``key`` (exactly: a :data:`Key`)."""
        return self._bring(self._objects[key]).collection

    @property
    def definitions(self) -> list[dict]:
        """The stored definitions of the objects, in creation order (a copy)."""
        return list(self._defs)

    @property
    def namespaces(self) -> dict[str, list[str]]:
        """The databases and their schemas, in creation order (a copy)."""
        return copy_schemas(self._schemas)

    def __repr__(self) -> str:
        objects = ", ".join(f"{n} ({self._objects[n].kind})" for n in self._order) or "no objects"
        return f"Engine(now={self._now}: {objects})"
