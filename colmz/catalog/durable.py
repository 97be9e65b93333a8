"""``Catalog``: the catalog users open -- an engine (:class:`colmz.catalog.engine.Engine`)
in memory, or driven durably through a :class:`colmz.catalog.store.CatalogStore`.

Design
------
With ``path=DIR`` (or a storage URL, ``mem://name`` or ``s3://bucket/prefix`` with
``consensus=``; see ``colmz.storage.url``) every object has a ``colmz.Arrangement`` in the
store (:class:`colmz.arrangement.collection.ArrangementCollection`), and one versioned
record (consensus key ``catalog/<id>``, the catalog's identity) holds the definitions and
the last transaction's intent, as persist's txn-wal keeps a txns shard beside its data
shards (``src/txn-wal/src/lib.rs`` upstream). The store owns the record; this handle holds
what one load of it gave -- the engine, the store it loaded through and the :class:`Mirror`
of the record -- and replaces the three together. Every durable call is one transaction:

* it runs in the engine against the record version the handle read, then its changes
  (every object's, and its DDL) are committed by one compare-and-set of the record -- the
  commit point -- and only then applied to the arrangements, idempotently (by this handle,
  or by the next handle or reopen when this one crashed);
* when another handle committed since this one read (the compare-and-set lost), nothing is
  visible: the handle is refreshed (:meth:`Catalog.refresh`) and the call's statements run
  again against the new state, at most :data:`RETRIES` times, as a serializable
  transaction is retried (``src/persist-client/src/internal/machine.rs`` upstream: read the
  head, apply the command, compare-and-set, on a lost race refresh and retry);
* a call that raises keeps nothing of itself, in memory or in storage (the engine rolls
  back; the handle may have been caught up with other handles' commits first, as every
  write call is); a handle that cannot know (an indeterminate compare-and-set) refreshes
  itself before its next call.

**Refresh builds, then swaps.** :meth:`Catalog.refresh` (and opening) loads through a new
store handle into a new engine and mirror -- reading the record, applying its intent,
loading each object's contents, bringing every object forward and committing that -- and
only when all of it succeeded replaces the handle's three; a refresh that raises leaves
the handle (memory and storage) as it was, and nothing is copied back.

A write call first compares the record's version with the one it holds (one consensus
read) and refreshes when another handle moved it. Reads (:meth:`Catalog.sql`,
:meth:`Catalog.read`) do the same, then read the engine; a read that needs data another
handle compacted away refreshes and reads again (bounded). Loading reads each object's
contents as of the oldest upper (plus the few changes after it) -- not its history -- and
resumes: tables written past a task's output are processed by the task from the output's
upper on (no snapshot replayed), and each materialized view's operators are restored from
their durable state (below) -- or, for a view without it, rebuilt from its inputs. Reads before the load time are no
longer possible. A table's contents at the load time are loaded by the first read that
needs them; until then its retraction check asks the table's arrangement how often the
rows it retracts occur (a point lookup of a few row groups, ``ArrangementCollection.counts``),
so reopening and deleting reads what it deletes, not the table. A store written by the previous layout is converted on open (only when
its marker is there, :meth:`colmz.catalog.store.CatalogStore.load`); a store holding
arrangements but no definitions is refused (:class:`colmz.catalog.store.MissingDefinitions`).

**Each commit moves what it changes.** The record holds the catalog's upper, the logical
upper of every arrangement it names (``colmz.catalog.store``, "Lazy uppers"): a commit
writes an intent entry only for an arrangement with changes since its own upper (a table
written, a view or operator state or shared arrangement that changed, a new object), so a
one-row INSERT into a table no view reads moves one arrangement however many views the
catalog holds (:attr:`Catalog.store_work`). A load reads every object, operator state and
shared arrangement at its logical upper: one that lags holds nothing after its own upper,
so its contents as of the load time are those as of its upper minus one. Maintenance
compacts only the arrangements written since it last compacted them: after a load, those
whose state (read by the load) holds runs not yet drained into their trace, or a trace it
would compact further.

**Views resume, never recompute.** Each maintained view's operator states
(``colmz.dataflow.state``: arrangements' rows, accumulators' groups) are hidden durable
objects: one ``colmz.Arrangement`` per state, named ``<view key>-state-<token>-<i>``, and a
record entry of kind :data:`VIEW_STATE` naming it, its view and its name in the view's
pipeline. At each commit a state's change since its last commit (its *marks*, the runs it
held then, kept in the :class:`Mirror`), when there is one, is written as runs and its
upper moved to the view's, in the same intent -- one compare-and-set of the record -- as the tables' and views'
changes: a crash leaves all of a commit or none, and a failed commit (rolled back in memory)
writes nothing and leaves the marks as they were. A load restores a view's operators from
its states' snapshots when they are exactly its pipeline's states and each is at the view's
upper (logically: a lagging one holds nothing since its own), reading no input
(``Catalog.view_work``); otherwise (a Fallback, a store written
without states, a state behind the view in a record without the catalog's upper, an exact
sum beyond ``int64``) the view is rebuilt
from its inputs, and its states are then written whole under new names. Dropping a view
drops its states' entries.

**Shared arrangements are state objects of their own.** An arrangement shared between views
(``colmz.dataflow.shared``: the engine's registry, one per relation and key) is not part of
any view's state -- a view's operators hold only a reference to it, which
``colmz.dataflow.state.operator_states`` does not export -- so it is kept once, however many
views use it: one hidden arrangement per shared arrangement, named by a record entry of kind
:data:`SHARED_STATE` carrying its :func:`~colmz.dataflow.shared.arrangement_id` and its
relation's storage key, its change since its marks committed in the same intent as the rest.
A load puts each back in the engine's registry before any view is rendered (the engine's
``resume_shared``) when it and its relation are at the load time; the views then attach to
it and read no input for it. One without durable state (a store written before, a state
behind) is filled from its relation when a view first asks for it, as at CREATE, then
written whole under a new name. When the last view using one is dropped, the registry frees
it and the record no longer names it.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import time

import pyarrow as pa

from colmz.arrangement.collection import CompactedAway
from colmz.catalog.engine import Engine
from colmz.catalog.frames import table_batch
from colmz.catalog.location import check_catalog_location
from colmz.catalog.mirror import Mirror, ViewStates
from colmz.catalog.objects import (
    NAMESPACES,
    CatalogObject,
    Key,
    definition_key,
    load_collection,
    namespaces_entry,
)
from colmz.catalog.store import CatalogStore
from colmz.continual import ContinualTask
from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.maintained import MODES as VIEW_MODES
from colmz.dataflow.maintained import ViewExplanation
from colmz.dataflow.shared import arrangement_id
from colmz.dataflow.state import OperatorState, StateOverflow, operator_states, prepare_states
from colmz.dataflow.state import restore as restore_states
from colmz.dataflow.step import as_schema
from colmz.sql import display_name, parse, session
from colmz.sql.tokens import require_text
from colmz.storage.base import Indeterminate
from colmz.storage.frozen import frozen
from colmz.storage.state import CommitConflict
from colmz.updates import Updates

__all__ = ["RETRIES", "RETRY_BACKOFF", "SHARED_STATE", "VIEW_STATE", "Catalog", "Mirror"]

#: How many times a durable call whose commit lost to another handle (or whose read hit data
#: compacted away by another handle) is refreshed and run again before it raises.
RETRIES = 16
#: The first retry waits up to this many seconds, each next one up to twice as long (at most
#: 1 s), uniformly at random: the loser of a race does not retry in step with the winner
#: (persist's ``src/persist-client/src/retry.rs`` upstream backs off with jitter too).
RETRY_BACKOFF = 0.01
#: The kind of a record entry naming one operator state of a materialized view: ``{"kind":
#: VIEW_STATE, "key": <its arrangement>, "view": <the view's storage key>, "state": <its name
#: in the view's pipeline>}`` (``colmz.dataflow.state``). Hidden: not a catalog object.
VIEW_STATE = "view state"
#: The kind of a record entry naming the durable state of one arrangement shared between views
#: (``colmz.dataflow.shared``): ``{"kind": SHARED_STATE, "key": <its arrangement>, "id":
#: <arrangement_id(relation, key)>, "relation": <the relation's storage key>, "by": <key
#: columns>}``. One per shared arrangement, whichever views use it. Hidden, as VIEW_STATE.
SHARED_STATE = "shared state"


def same_runs(marks: tuple, now: tuple) -> bool:
    """Whether an operator state holds the very runs of ``marks`` (runs are never changed
    once made, ``colmz.dataflow.state``): its change since them is then empty, known
    without building it."""
    return len(marks) == len(now) and all(a is b for a, b in zip(marks, now))


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
        off (and, as every colmz connection, its configuration locked), so nothing run on
        it reaches the file system -- no ``read_csv``, ``glob``, ``COPY``, ``ATTACH``. A
        user's query cannot name DuckDB's file functions either way (they are not
        PostgreSQL's: ``function read_csv(unknown) does not exist``); pass ``False`` where
        the SQL comes from someone who should not reach files, as a second wall.
    views : {"incremental", "recompute"}, default "incremental"
        How materialized views are maintained (``colmz.dataflow.maintained.MODES``):
        ``"incremental"`` feeds each commit's changes through the view's operators
        (``colmz.dataflow``; a view outside their subset is recomputed, with a
        ``FallbackWarning``), ``"recompute"`` recomputes every view's query at each commit
        that changes its inputs and diffs it against the previous contents (the oracle).
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
    colmz.catalog.location.NestedStore
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

    def __init__(self, path: str | os.PathLike | None = None, *, consensus: str | None = None,
                 maintain_every: int = 16, external_access: bool = True, create: bool = True,
                 views: str = "incremental"):
        if views not in VIEW_MODES:
            raise ValueError(f"views must be one of {list(VIEW_MODES)}, got {views!r}")
        self._views = views
        if isinstance(maintain_every, bool) or not isinstance(maintain_every, int) or maintain_every < 0:
            raise ValueError(f"maintain_every must be a non-negative int, got {maintain_every!r}")
        if not isinstance(create, bool):
            raise TypeError(f"create must be a bool, got {create!r}")
        self._maintain_every = maintain_every
        self._persists = 0  # paces maintenance
        self._con = session(external_access=external_access)
        self._path = None
        self._consensus = consensus
        self._read_only = False
        # A commit whose outcome is unknown (indeterminate): refresh before the next call.
        self._stale = False
        self.stats = {"commits": 0, "retries": 0, "refreshes": 0, "apply_deferred": 0,
                      "maintain_failed": 0, "maintained": 0}
        # What one load gave (durable), replaced together: the engine, the store it loaded
        # through and the mirror of the record. In memory: an engine alone.
        self._engine = Engine(self._con, views=views)
        self._store: CatalogStore | None = None
        self._mirror: Mirror | None = None
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
            # a store colmz cannot write (a read-only directory's consensus opens read-only)
            self._read_only = bool(getattr(self._loc.consensus, "read_only", False))
            self._engine, self._store, self._mirror = self._open(self.stats)
            if not create and self._store.seqno is None:
                raise FileNotFoundError(f"no catalog at {self._path!r} (create=False: nothing was created)")

    # ------------------------------------------------------------------ accessors

    @property
    def now(self) -> int:
        """The latest committed time: every collection is complete up to it."""
        return self._engine.now

    @property
    def names(self) -> list[Key]:
        """Object names in creation order: an object of the default schema
        ``materialize.public`` by its name (a ``str``), any other by its
        :class:`colmz.sql.QualifiedName` (whose ``str`` is its SQL name).

        >>> cat = Catalog(); cat.execute("CREATE SCHEMA x; CREATE TABLE t (k INT); CREATE TABLE x.t (k INT)")
        >>> [str(n) for n in cat.names]
        ['t', 'materialize.x.t']
        """
        return self._engine.names

    @property
    def schemas(self) -> list[tuple[str, str]]:
        """The catalog's schemas as ``(database, schema)``, each database's in creation order.

        >>> cat = Catalog(); cat.execute("CREATE DATABASE y; CREATE SCHEMA y.z; CREATE SCHEMA x")
        >>> cat.schemas
        [('materialize', 'public'), ('materialize', 'x'), ('y', 'public'), ('y', 'z')]
        """
        return self._engine.schemas

    @property
    def path(self) -> str | None:
        """The catalog's directory, or ``None`` in memory."""
        return self._path

    def __contains__(self, name) -> bool:
        return name in self._engine

    def object(self, name: Key | tuple[str, ...]) -> CatalogObject:
        """The catalog entry called ``name`` (``KeyError`` naming the known ones).

        ``name`` is an object's name in the default schema (a ``str``, exactly: ``"a.b"`` is
        the object whose name holds a dot) or the parts of a qualified name (``("x", "t")``,
        ``("y", "z", "t")``, a :class:`colmz.sql.QualifiedName`).
        """
        return self._engine.object(name)

    def task(self, name: Key | tuple[str, ...]) -> ContinualTask:
        """The :class:`colmz.ContinualTask` behind continual task ``name``."""
        return self._engine.task(name)

    def explain(self, name: Key | tuple[str, ...]) -> ViewExplanation:
        """How materialized view ``name`` is maintained: its plan, each node's strategy and
        cost class, the state it holds and the rows it touched at the last commit (the text
        of ``EXPLAIN MATERIALIZED VIEW name``).

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
        >>> cat.execute("CREATE MATERIALIZED VIEW s AS SELECT k, count(*) AS n FROM t GROUP BY k")
        >>> print(cat.explain("s").lines[0])
        materialized view s: incremental (each commit's deltas through the operators)
        """
        return self._reading(lambda: self._engine.explain(name))

    # ------------------------------------------------------------------ SUBSCRIBE

    def subscribe(self, target, as_of: int | None = None, *, snapshot: bool = True,
                  up_to: int | None = None):
        """Materialize's ``SUBSCRIBE``: the contents of ``target`` as of ``as_of`` (default
        ``now``), then its changes at each later time, as a :class:`colmz.subscribe.Subscription`
        of ``Updates`` batches.

        ``target`` is an object's name or a query; ``snapshot=False`` skips the contents at
        ``as_of``; ``up_to`` ends it before that time. ``for batch in sub`` yields what is
        committed so far; ``sub.follow(timeout=...)`` waits for later commits (by any handle or
        process); ``sub.fetch()`` gives one table, ``mz_timestamp`` and ``mz_diff`` first.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
        >>> sub = cat.subscribe("SELECT count(*) AS n FROM t")
        >>> cat.execute("INSERT INTO t VALUES (2)")
        >>> [b.to_pylist() for b in sub]
        [[(1, 1, 1)], [(1, 2, -1), (2, 2, 1)]]
        """
        from colmz.subscribe import Subscription  # above the catalog: it plans queries

        return Subscription(self, target, as_of, snapshot=snapshot, up_to=up_to)

    def catch_up(self) -> int:
        """Bring a durable handle up to the record when another handle committed since it read
        (one read of the consensus head); returns :attr:`now`. In memory: ``now``."""
        self._reading(lambda: None)
        return self.now

    @property
    def view_work(self) -> dict[str, int]:
        """How the materialized views' operators were set up since this handle last loaded:
        ``initialized`` (fed their inputs' contents, ``input_rows_read`` rows: at CREATE, or
        at a load without durable state for them) and ``restored`` (from their durable
        operator state at a load, reading no input). A copy.

        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> cat = Catalog(d); cat.execute("CREATE TABLE t (k INT, v INT); INSERT INTO t VALUES (1, 2)")
        >>> cat.execute("CREATE MATERIALIZED VIEW s AS SELECT k, sum(v) AS s FROM t GROUP BY k")
        >>> cat.view_work
        {'initialized': 1, 'restored': 0, 'input_rows_read': 1}
        >>> Catalog(d).view_work
        {'initialized': 0, 'restored': 1, 'input_rows_read': 0}
        """
        return dict(self._engine.view_work)

    @property
    def save_work(self) -> dict[str, int]:
        """What saving the catalog's state for a roll back cost its calls since this handle
        last loaded (``colmz.rollback``; cumulative, a copy): the ``calls`` saved, the
        structures ``kept`` on touch (a table written, a view stepped, a shared arrangement
        fed, the collection of a lagging object read) and the elements
        ``copied``. A call pays for what it touches, not for what the catalog holds.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT)")
        >>> before = cat.save_work; cat.execute("INSERT INTO t VALUES (1)")
        >>> {k: cat.save_work[k] - before[k] for k in before}
        {'calls': 1, 'kept': 1, 'copied': 0}
        """
        return dict(self._engine.save_work)

    @property
    def commit_work(self) -> dict[str, int]:
        """What this handle's commits visited since it last loaded (cumulative, a copy): the
        ``commits``, the ``tables`` they wrote and the derived objects ``visited`` -- the
        readers of a change, the views come due (a temporal filter's flip, ``mz_now()``),
        the continual tasks whose input changed. An object nothing reached is not visited: its upper lags,
        logically ``now + 1`` (``colmz.catalog.engine``, "Logical uppers").

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT); CREATE TABLE u (k INT)")
        >>> cat.execute("CREATE MATERIALIZED VIEW c AS SELECT count(*) AS n FROM u")
        >>> before = cat.commit_work; cat.execute("INSERT INTO t VALUES (1)")
        >>> {k: cat.commit_work[k] - before[k] for k in before}
        {'commits': 1, 'tables': 1, 'visited': 0, 'compared': 0}

        A durable handle adds what its commits examined to write them
        (``colmz.catalog.mirror.Mirror.work``): the ``objects_examined`` for changes, the
        ``views_examined`` for operator states and the ``shared_examined`` arrangements --
        those the call changed, unless it changed definitions.
        """
        work = dict(self._engine.commit_work)
        if self._mirror is not None:
            work.update(self._mirror.work)
        return work

    @property
    def shared_work(self) -> dict[str, int]:
        """How the arrangements shared between views (``colmz.dataflow.shared``) were set up
        since this handle last loaded: ``filled`` from their relation (at a CREATE that made
        one, or at a load without its durable state) and ``restored`` from their durable
        state at a load -- once each, however many views use it. A copy.

        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> cat = Catalog(d); cat.execute("CREATE TABLE t (k INT, v INT); INSERT INTO t VALUES (1, 2)")
        >>> cat.execute("CREATE MATERIALIZED VIEW lo AS SELECT k, min(v) AS m FROM t GROUP BY k")
        >>> cat.execute("CREATE MATERIALIZED VIEW hi AS SELECT k, max(v) AS m FROM t GROUP BY k")
        >>> cat.shared_work
        {'filled': 1, 'restored': 0}
        >>> again = Catalog(d); again.shared_work, again.view_work["input_rows_read"]
        ({'filled': 0, 'restored': 1}, 0)
        """
        return dict(self._engine.shared_work)

    @property
    def store_work(self) -> dict[str, int]:
        """What the durable store did since this handle last loaded (cumulative, a copy;
        ``{}`` in memory): record ``commits`` (one compare-and-set each), intent entries
        ``entries_applied`` (an arrangement moved: its upper, and the runs adopted) and
        ``entries_landed`` (found applied already), ``runs_written`` (one per arrangement
        with changes), ``conflicts``, ``blobs_deleted``, ``definitions_encoded`` (the record's
        definitions encoded anew: by DDL, never by a data commit) and ``entries_frozen`` (record
        entries the store copied to compare later commits with: only entries not frozen already,
        ``colmz.storage.frozen`` -- the catalog's own are, so none). A commit moves the arrangements of
        what it changes only: the others lag, logically at the record's upper
        (``colmz.catalog.store``, "Lazy uppers").

        >>> import tempfile
        >>> cat = Catalog(tempfile.mkdtemp())
        >>> cat.execute("CREATE TABLE t (k INT); CREATE TABLE u (k INT)")
        >>> before = cat.store_work; cat.execute("INSERT INTO t VALUES (1)")
        >>> {k: cat.store_work[k] - before[k] for k in ("commits", "entries_applied", "runs_written")}
        {'commits': 1, 'entries_applied': 1, 'runs_written': 1}
        """
        return {} if self._store is None else dict(self._store.stats)

    def identity(self, name) -> str:
        """The storage key of object ``name``: the same over the object's life (across
        reopens), another for an object created again under its name.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT)")
        >>> a = cat.identity("t"); cat.execute("DROP TABLE t; CREATE TABLE t (k INT)")
        >>> a == cat.identity("t")
        False
        """
        return self._engine.identity(name)

    def translated(self, sql: str) -> str:
        """``sql`` translated (:func:`colmz.sql.translate`) as :meth:`sql` translates it: told
        which columns of the objects it names are arrays, so it may slice them.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT)")
        >>> cat.execute("CREATE MATERIALIZED VIEW v AS SELECT array_agg(k) AS a FROM t")
        >>> cat.translated("SELECT a[2:] FROM v")
        'SELECT (a)[2:] FROM v'
        """
        return self._engine.translated(sql)

    def bound_query(self, translated: str) -> tuple[str, tuple]:
        """The DuckDB text of a translated query over this catalog's objects and the objects
        it reads, as :meth:`sql` runs it: each object bound to its own name, PostgreSQL's
        rules of float and jsonb columns applied (``colmz.catalog.queries``).

        >>> from colmz.sql import translate
        >>> cat = Catalog(); cat.execute("CREATE TABLE t (j JSONB)")
        >>> text, read = cat.bound_query(translate("SELECT j = '{\\"a\\":1}' AS e FROM t"))
        >>> read, '{"a": 1}' in text
        (('t',), True)
        """
        return self._engine.bound_query(translated)

    def column_kinds(self, name) -> list[str | None]:
        """The SQL kind of each column of object ``name`` (``colmz.catalog.column_kinds``):
        ``"jsonb"``, ``"json"``, ``"text"`` or ``None``, which the view planner needs to apply
        the rules of jsonb columns (``colmz.sql.jsonbcols``) as the query path does.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k BIGINT, j JSONB, s TEXT)")
        >>> cat.column_kinds("t")
        [None, 'jsonb', 'text']
        """
        return self._engine.column_kinds(self.object(name).name)

    def contents(self, name, as_of: int) -> Updates:
        """The contents of object ``name`` as of ``as_of`` without catching up; before this
        handle's reopen, from its arrangement (``colmz.catalog.subscriptions``).

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
        >>> cat.contents("t", 1).to_pylist()
        [(1, 1, 1)]
        """
        return self._engine.contents(name, as_of)

    def changes(self, name, lower: int, upper: int) -> Updates:
        """The updates of object ``name`` at times ``lower <= t < upper`` as written
        (``colmz.catalog.subscriptions``).

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
        >>> cat.execute("DELETE FROM t"); cat.changes("t", 1, 3).to_pylist()
        [(1, 1, 1), (1, 2, -1)]
        """
        return self._engine.changes(name, lower, upper)

    # ------------------------------------------------------------------ reads and writes

    def read(self, name: Key | tuple[str, ...], as_of: int | None = None) -> Updates:
        """The contents of ``name`` as of ``as_of`` (default ``now``), consolidated.

        >>> cat = Catalog(); cat.execute("CREATE TABLE t (k TEXT)")
        >>> cat.execute("INSERT INTO t VALUES ('a'), ('a')")
        >>> cat.read("t").to_pylist()
        [('a', 1, 2)]
        """
        return self._reading(lambda: self._engine.read(name, as_of))

    def frontiers(self, name: Key | tuple[str, ...]) -> tuple[int, int]:
        """``(since, upper)`` of object ``name`` as the catalog gives them (Materialize's
        read and write frontiers, ``mz_internal.mz_frontiers``): :meth:`read` answers at any
        ``since <= as_of < upper``, and ``upper`` is the catalog's, ``now + 1``.

        These are the object's *logical* frontiers. A durable catalog's commit moves only
        the arrangements it changes (``colmz.catalog.store``, "Lazy uppers"), and is durable
        in the catalog's record before it lands in them: the arrangement of an object --
        ``colmz.Arrangement.open(path, name=cat.identity(name))`` -- shows its own upper,
        which may lag, and no commit not yet applied. As Materialize reads a txn-wal data
        shard at the txns shard's upper only through the txns-aware read path, read a
        catalog's objects through a catalog (this one, or ``colmz.Catalog(path)`` in
        another process), never through their arrangements.

        >>> import tempfile
        >>> d = tempfile.mkdtemp(); cat = Catalog(d)
        >>> cat.execute("CREATE TABLE t (k INT); CREATE TABLE u (k INT); INSERT INTO u VALUES (7)")
        >>> cat.execute("INSERT INTO t VALUES (1)"); cat.execute("INSERT INTO t VALUES (2)")
        >>> import colmz; colmz.Arrangement.open(d, name=cat.identity("u"), create=False).get_seal()
        2
        >>> reader = Catalog(d, create=False)
        >>> reader.frontiers("u")[1] == reader.now + 1 == 4, reader.read("u", 3).to_pylist()
        (True, [(7, 3, 1)])
        """
        return self._reading(lambda: self._engine.frontiers(name))

    def sql(self, query: str, as_of: int | None = None) -> pa.Table:
        """Run a query (``SELECT``/``WITH``/``VALUES``/``TABLE``, or ``SHOW``) as of ``as_of``.

        ``mz_now()`` is ``as_of``. Returns a ``pyarrow.Table``.

        >>> Catalog().sql("SELECT mz_now() AS t, 7 / 2 AS q").to_pylist()
        [{'t': 0, 'q': 3}]
        """
        s = Engine.query_statement(query)
        return self._reading(lambda: self._engine.answer(s, as_of))

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
        return self._transaction(
            lambda: self._engine.execute(first.pop() if first else parse(sql), time, self._persist_step()))

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
        batch, time = table_batch(name, obj.schema, updates, time, self.now)
        self._transaction(lambda: self._engine.append(obj.name, batch, time, self._persist_step()))

    # ------------------------------------------------------------------ durability

    def refresh(self) -> None:
        """Reload this handle from the store: the definitions and contents every handle
        committed, as a reopen would (reads before the new ``now`` are no longer possible).

        A durable call does this by itself before it reads or writes when another handle
        committed since (one read of the consensus head tells), and when its commit lost to
        another handle; call it to bring attributes such as :attr:`names` and :attr:`now`
        up to date without a call. A refresh that raises leaves the handle as it was: the
        new state is built beside the old and swapped in only when complete. In memory:
        nothing to do.

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
        if self._store is None:
            return
        # A reload's own commit (bringing objects forward) is not a call's: counted apart.
        loaded = self._open(dict(self.stats))
        self._engine, self._store, self._mirror = loaded
        self._stale = False
        self.stats["refreshes"] += 1

    def _open(self, stats: dict) -> tuple[Engine, CatalogStore, Mirror]:
        """Load the catalog through a new store handle (:meth:`_load`); when bringing it
        forward loses its commit to another handle, load again (bounded)."""
        for attempt in range(RETRIES + 1):
            try:
                return self._load(stats)
            except (CommitConflict, CompactedAway):
                if attempt == RETRIES:
                    raise
        raise AssertionError("unreachable")

    def _load(self, stats: dict) -> tuple[Engine, CatalogStore, Mirror]:
        """A new engine, store handle and mirror holding the record's definitions and each
        object's contents, every task resumed and the result committed; nothing of this
        handle is changed."""
        store = CatalogStore(self._loc)
        engine = Engine(self._con, durable=True, views=self._views)
        # history older than this load: the arrangements of whichever mirror is current
        engine.history = lambda key: None if self._mirror is None else self._mirror.arrangements.get(key)
        mirror = Mirror()
        state = store.load()
        if state is None:
            return engine, store, mirror
        if self._read_only:
            pending = store.unapplied(state)
            if pending:
                raise PermissionError(
                    f"catalog at {self._path!r}: a committed transaction is not applied yet "
                    f"(objects {pending}) and its read-only store cannot take it: open the "
                    "catalog once where it can be written; nothing was read"
                )
        store.apply(state)  # a committed intent a crash (or a failed apply) left
        defs = [d for d in state["objects"] if d.get("kind") not in (NAMESPACES, VIEW_STATE, SHARED_STATE)]
        state_defs = [d for d in state["objects"] if d.get("kind") == VIEW_STATE]
        shared_defs = [d for d in state["objects"] if d.get("kind") == SHARED_STATE]
        for d in state["objects"]:
            if d.get("kind") == NAMESPACES:
                mirror.schemas = {db: list(scs) for db, scs in d["databases"]}
        durs = {definition_key(d): store.arrangement(d["key"]) for d in defs}
        # Each object at its logical upper (the record's, when its arrangement lags: it
        # holds nothing since its own upper; colmz.catalog.store, "Lazy uppers").
        logical = {key: store.logical_upper(d["key"]) for key, d in zip(durs, defs)}
        uppers = [up for up in logical.values() if up is not None]
        if not uppers:
            engine.load([], {}, mirror.schemas, None, 0)
            return engine, store, mirror
        start = max(0, min(uppers) - 1)
        collections = {}
        for key, dur in durs.items():
            mem = collections[key] = load_collection(dur, max(start, dur.since))
            if mem.upper is not None and logical[key] is not None and mem.upper < logical[key]:
                mem.compare_and_append(Updates.empty(mem.schema), mem.upper, logical[key])
        engine.resume_view = self._resumer(store, defs, state_defs, mirror)
        engine.resume_shared = self._shared_resumer(store, defs, shared_defs, mirror)
        try:
            engine.load(defs, collections, mirror.schemas, start, max(uppers) - 1)
        finally:
            engine.resume_view = engine.resume_shared = None  # a view created later is fed its inputs
        mirror.defs = list(defs)
        mirror.uppers = {d["key"]: durs[definition_key(d)].upper for d in defs}
        mirror.state_defs = list(state_defs)
        mirror.shared_defs = list(shared_defs)
        mirror.uppers.update({d["key"]: store.arrangement(d["key"]).upper for d in state_defs + shared_defs})
        mirror.arrangements = durs
        mirror.upper = store.upper
        # what maintenance compacts next: what was written since it last compacted it (or
        # what it could not compact then), not every arrangement once per load
        mirror.unmaintained = {d["key"] for d in defs + state_defs + shared_defs
                               if self._uncompacted(store.arrangement(d["key"]), engine.now)}
        mirror.index_shared()
        if not self._read_only:  # a read-only handle brings memory forward, commits nothing
            self._persist(engine, store, mirror, stats, full=True)
        return engine, store, mirror

    @staticmethod
    def _resumer(store: CatalogStore, defs: list[dict], state_defs: list[dict], mirror: Mirror):
        """The engine's ``resume_view`` while it loads: restore a view's operators from the
        state arrangements the record names for it (``colmz.dataflow.state.restore``) when
        they are exactly its pipeline's states, each at the view's upper (logically: the
        record's, for one that lags); otherwise (a Fallback, a store written without them,
        a state behind the view in a record without the catalog's upper) ``False``: the
        view is rebuilt from its inputs. A restored view's states go into ``mirror``."""
        view_keys = {definition_key(d): d["key"] for d in defs if d.get("kind") == "materialized view"}
        by_view: dict[str, list[dict]] = {}
        for d in state_defs:
            by_view.setdefault(d["view"], []).append(d)

        def resume(key, mv, t: int) -> bool:
            vkey = view_keys.get(key)
            pipe = mv.pipeline
            if vkey is None or pipe is None or mv.sink.collection.upper != t + 1:
                return False
            entries = by_view.get(vkey, [])
            prepare_states(pipe, [e["state"] for e in entries])  # a recursion's iterations reached
            found = operator_states(pipe)
            if found is None or [e["state"] for e in entries] != [s.name for s in found]:
                return False
            snaps = {}
            for e, st in zip(entries, found):
                dur = store.arrangement(e["key"])
                if store.logical_upper(e["key"]) != t + 1 or tuple(dur.schema) != st.schema:
                    return False
                at = min(t, dur.upper - 1)  # a lagging state holds nothing since its upper
                if dur.since > at:
                    return False
                snaps[st.name] = dur.snapshot(at)
            try:
                restore_states(pipe, snaps, t)
            except ValueError:
                return False
            mv.sink.resume()
            mirror.states[vkey] = ViewStates(tuple(snaps), tuple(e["key"] for e in entries),
                                             {st.name: st.marks() for st in found})
            return True

        return resume

    @staticmethod
    def _shared_resumer(store: CatalogStore, defs: list[dict], shared_defs: list[dict], mirror: Mirror):
        """The engine's ``resume_shared`` while it loads (called before any view is
        rendered): put each shared arrangement the record keeps back in the engine's
        registry, from its state's snapshot, when its relation is the one it was made of and
        both are at the load time; otherwise leave it out -- the first view using it fills
        it from the relation, as at CREATE. A restored one's state goes into ``mirror``."""
        relations = {d["key"]: definition_key(d) for d in defs}

        def resume(engine: Engine) -> None:
            t = engine.now
            for e in shared_defs:
                rel, by = relations.get(e["relation"]), tuple(e["by"])
                if rel is None or (rel, by) in engine.shared or engine.held(rel).collection.upper != t + 1:
                    continue
                dur = store.arrangement(e["key"])
                if store.logical_upper(e["key"]) != t + 1:
                    continue
                at = min(t, dur.upper - 1)  # a lagging state holds nothing since its upper
                if dur.since > at:
                    continue
                try:
                    arr = KeyedArrangement(as_schema(engine.held(rel).schema, "schema"), by)
                    st = OperatorState(e["id"], arr)
                    if e["id"] != arrangement_id(rel, by) or tuple(dur.schema) != st.schema:
                        continue
                    st.load(st.prepared(dur.snapshot(at), t), t)
                except ValueError:
                    continue  # the relation's columns changed: rebuilt from it
                engine.shared.put(rel, by, arr)
                engine.shared_work["restored"] += 1
                mirror.shared[(e["relation"], by)] = ViewStates((e["id"],), (e["key"],), {e["id"]: st.marks()})

        return resume

    @staticmethod
    def _shared_moves(engine: Engine, store: CatalogStore, mirror: Mirror, defs: list[dict], lazy: bool,
                      only: tuple | None = None):
        """The record entries, intent moves and states (as committed) of the arrangements
        shared between views: one state object per shared arrangement (not per view using
        it), moved from its upper to its relation's with its change since its marks, or made
        holding it whole when the record does not keep it yet (made at a CREATE, or filled
        from its relation at a reopen). One the registry freed (its last view dropped) is
        left out of the record.

        ``only``: the relations the commit changed, when it changed no definition -- then
        only their shared arrangements (those the record keeps, :attr:`Mirror.shared_by`)
        are examined, the entries are the record's and the states returned are theirs alone
        (None when one is not kept yet: the caller examines every one)."""
        entries, moves, states = [], [], {}
        if only is not None:
            ids = []
            for rel in only:
                d = engine.definition_of(rel)
                if d is not None:
                    ids.extend((rel, d["key"], by) for by in mirror.shared_by.get(d["key"], ()))
            relations = {rel: skey for rel, skey, _ in ids}
            ids = [(rel, by) for rel, _, by in ids]
            entries = mirror.shared_defs
        else:
            relations = {definition_key(d): d["key"] for d in defs}
            ids = list(engine.shared)
        token = None
        for rel, by in ids:
            arr = engine.shared.get(rel, by)
            if rel not in relations or any(c.kind == "null" for c in arr.schema):
                continue  # a column with no type yet: rebuilt from its relation on reopen
            mirror.work["shared_examined"] += 1
            aid = arrangement_id(rel, by)
            st = OperatorState(aid, arr)
            up = engine.held(rel).collection.upper
            prev = mirror.shared.get((relations[rel], by))
            if prev is not None:
                skey = prev.keys[0]
                lo = mirror.uppers[skey]
                if lo != up and not (lazy and same_runs(prev.marks[aid], st.marks())):
                    change = st.delta(prev.marks[aid], up - 1)
                    if len(change) or not lazy:  # lazy: unchanged, it lags (logically at up)
                        moves.append((f"shared arrangement {aid}", skey, lo, up, change))
            elif only is not None:
                return None
            else:
                token = token or secrets.token_hex(4)
                skey = f"{relations[rel]}-shared-{token}-{len(entries)}"
                moves.append((f"shared arrangement {aid}", skey, 0, up, st.delta((), up - 1)))
                store.arrangement(skey, st.schema)  # as a new object's: before the record names it
            if only is None:
                entries.append(frozen({"kind": SHARED_STATE, "key": skey, "id": aid, "relation": relations[rel],
                                        "by": list(by)}))
            states[(relations[rel], by)] = ViewStates((aid,), (skey,), {aid: st.marks()})
        return entries, moves, states

    def _state_moves(self, engine: Engine, store: CatalogStore, mirror: Mirror, defs: list[dict], lazy: bool,
                     only: tuple | None = None):
        """The record entries of every view's operator states, their intent moves and the
        states as they are once committed: a state the record keeps moves from its upper to
        the view's with its change since its marks; a view whose states the record does not
        keep yet (created, or rebuilt at a reopen) gets new arrangements holding them whole.
        A view whose state cannot be kept (not resumable; an exact sum beyond int64) keeps
        none: a reopen rebuilds it.

        ``only``: the objects the commit changed, when it changed no definition -- then only
        those views' states are examined (a view that did not step holds the runs it held),
        the entries are the record's and the states returned are theirs alone (None when
        one of them needs entries the record does not hold: the caller examines every view)."""
        state_defs, moves, states = [], [], {}
        if only is not None:
            state_defs = mirror.state_defs
            defs = [d for d in map(engine.definition_of, only) if d is not None]
        for d in defs:
            if d.get("kind") != "materialized view":
                continue
            key = definition_key(d)
            mirror.work["views_examined"] += 1
            mv = engine.held(key).maintained
            found = None if mv is None or mv.pipeline is None else operator_states(mv.pipeline)
            prev = mirror.states.get(d["key"])
            if not found:
                if only is not None and prev is not None:
                    return None  # its entries go: the record's change
                continue  # nothing to keep (stateless operators resume from the view alone)
            up = engine.held(key).collection.upper
            shown = display_name(key)
            names = tuple(st.name for st in found)
            mine = []
            try:
                if prev is not None and prev.names == names:
                    keys = prev.keys
                    for st, skey in zip(found, keys):
                        lo = mirror.uppers[skey]
                        if lo != up and not (lazy and same_runs(prev.marks[st.name], st.marks())):
                            change = st.delta(prev.marks[st.name], up - 1)
                            if len(change) or not lazy:  # lazy: unchanged, it lags
                                mine.append((f"{shown} state {st.name}", skey, lo, up, change))
                elif only is not None:
                    return None  # new entries: the record's change
                else:
                    token = secrets.token_hex(4)
                    keys = tuple(f"{d['key']}-state-{token}-{i}" for i in range(len(found)))
                    for st, skey in zip(found, keys):
                        mine.append((f"{shown} state {st.name}", skey, 0, up, st.delta((), up - 1)))
            except StateOverflow:
                if only is not None and prev is not None:
                    return None  # its entries go: the record's change
                continue
            if only is None:
                for st, skey in zip(found, keys):
                    if prev is None or prev.names != names:
                        store.arrangement(skey, st.schema)  # as a new object's: before the record names it
                    state_defs.append(frozen({"kind": VIEW_STATE, "key": skey, "view": d["key"], "state": st.name}))
            moves.extend(mine)
            states[d["key"]] = ViewStates(names, keys, {st.name: st.marks() for st in found})
        return state_defs, moves, states

    def _persist_step(self):
        """The step a call's transaction ends with: commit what it did (None in memory)."""
        if self._store is None:
            return None
        return lambda: self._persist(self._engine, self._store, self._mirror, self.stats)

    def _transaction(self, call):
        """Run ``call`` -- one transaction, which the engine rolls back when it raises -- and
        on a durable catalog bring the handle up to the record first; when its commit lost to
        another handle (or a read hit data another handle compacted away), refresh and run
        it again, at most :data:`RETRIES` times.

        This is a transaction-level retry, not a second copy of the arrangement's
        compare-and-set loop (``colmz.arrangement.machine``, which re-applies one command to a
        newer state of one arrangement): a lost catalog commit invalidates the whole
        statement -- what it read, the checks it made, the intent built from them -- so the
        serializable statement runs again from the top on the refreshed catalog. The
        record's compare-and-set itself (``CatalogStore.commit``) is tried once per run.
        """
        if self._store is None:
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
        if self._store is not None and (self._stale or self._store.head_seqno() != self._store.seqno):
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
                if self._store is None or attempt == RETRIES:
                    raise
                self.stats["retries"] += 1
                self.refresh()
        raise AssertionError("unreachable")

    def _persist(self, engine: Engine, store: CatalogStore, mirror: Mirror, stats: dict, full: bool = False) -> None:
        """Commit what ``engine``'s collections hold beyond the record (``mirror``), and
        the definitions, as one version of the catalog record; then apply it.

        The record carries the catalog's upper (``now + 1``), the logical upper of every
        arrangement it names; an arrangement with changes since its own upper (or a new
        one) gets an intent entry ``(lower, upper, runs)``: the lower is its upper as the
        last entry left it (never the arrangement handle's, which may be stale), the runs
        its changes since, written once as parts under its arrangement's prefix (the apply
        adopts them). An arrangement without changes gets no entry: it lags, and costs the
        commit nothing (``colmz.catalog.store``, "Lazy uppers"). A commit changing no
        definition examines only the objects the call changed (``Engine.touched``: tables
        written, views stepped, tasks run), their operator states and the shared
        arrangements of the relations among them -- an object the engine did not touch
        holds nothing since its upper -- and leaves the record's entries as they were;
        ``full`` (a load), DDL or a record without a catalog-wide upper examine every one.
        :meth:`CatalogStore.commit` compare-and-sets the record
        against the version ``store`` read: a lost race raises ``CommitConflict`` with
        nothing visible, and the caller rolls memory back. ``mirror`` changes only after the
        commit; from then on the call has succeeded: applying the intent and maintenance are
        retried by the next commit (or reopen) when they fail now.
        """
        defs = engine.definitions
        schemas = engine.namespaces
        # The catalog's one timeline: every object at now + 1. Then the record carries that
        # upper and an arrangement gets an intent entry only when it has changes since its
        # own upper (the rest lag, logically at the record's; colmz.catalog.store, "Lazy
        # uppers"), so the commit's store work is what it changes. Objects at other uppers
        # (none in a consistent engine) fall back to an entry for each, and no record upper.
        upper = engine.now + 1
        # What to examine: every object (a load, DDL, a record without a catalog-wide upper)
        # or only those the call changed; the engine's others lag, holding nothing since.
        only = None if full or mirror.upper is None or defs != mirror.defs or schemas != mirror.schemas \
            else engine.touched
        if only is None:
            lazy = all(engine.held(definition_key(d)).collection.upper <= upper for d in defs)
            walk = defs
        else:
            lazy = True  # a consistent engine: every object at now + 1, logically
            walk = [d for d in map(engine.definition_of, only) if d is not None]
        moves = []
        for d in walk:
            key = definition_key(d)
            mirror.work["objects_examined"] += 1
            mem = engine.held(key).collection
            lo = mirror.uppers.get(d["key"])
            shown = display_name(key)
            if lo is None:
                # A new object: its arrangement exists before the record names it (an orphan
                # arrangement, holding nothing, when the commit then loses).
                store.arrangement(d["key"], tuple(mem.schema))
                moves.append((shown, d["key"], 0, mem.upper, mem.updates(mem.since, mem.upper)))
            elif mem.upper != lo and not (lazy and lo < mem.upper and self._quiet(mem, lo)):
                change = mem.updates(lo, mem.upper)
                if len(change) or not lazy or mem.upper < lo:
                    moves.append((shown, d["key"], lo, mem.upper, change))
        found = self._state_moves(engine, store, mirror, defs, lazy, only)
        views_only = found is not None and only is not None  # states: the changed views' alone
        state_defs, state_moves, states = found or self._state_moves(engine, store, mirror, defs, lazy)
        found = self._shared_moves(engine, store, mirror, defs, lazy, only)
        shared_only = found is not None and only is not None
        shared_defs, shared_moves, shared = found or self._shared_moves(engine, store, mirror, defs, lazy)
        record_upper = upper if lazy else None
        if not moves and not state_moves and not shared_moves and defs == mirror.defs and schemas == mirror.schemas \
                and state_defs == mirror.state_defs and shared_defs == mirror.shared_defs \
                and (not lazy or record_upper == mirror.upper):
            return
        moves.extend(state_moves)
        moves.extend(shared_moves)
        if self._read_only:
            raise PermissionError(
                f"catalog at {self._path!r} is read-only (its store cannot be written: "
                f"{self._loc.consensus!r}); nothing was changed"
            )
        # The record's intent lands before another is built on it (a no-op when this handle
        # applied it; after a crash or a failed apply, the work left).
        store.apply(store.state)
        store.commit(namespaces_entry(schemas) + defs + state_defs + shared_defs, moves, record_upper)
        # -- committed: from here on nothing raises --
        mirror.upper = record_upper
        moved = {key: up for _, key, _, up, _ in moves}
        if views_only:
            mirror.states.update(states)
        else:
            mirror.state_defs, mirror.states = state_defs, states
        if shared_only:
            mirror.shared.update(shared)
        else:
            mirror.shared_defs, mirror.shared = shared_defs, shared
            mirror.index_shared()
        if only is not None and views_only and shared_only:
            # the record names what it named: its arrangements moved, nothing else
            mirror.uppers.update(moved)
            mirror.unmaintained |= set(moved)
        else:
            mirror.defs, mirror.schemas = defs, schemas
            keys = {d["key"] for d in defs} | {d["key"] for d in state_defs} | {d["key"] for d in shared_defs}
            uppers = {**mirror.uppers, **moved}
            mirror.uppers = {k: v for k, v in uppers.items() if k in keys}
            mirror.unmaintained = (mirror.unmaintained | set(moved)) & keys
            mirror.arrangements = {definition_key(d): store.arrangement(d["key"]) for d in defs}
            store.forget(keys)
        stats["commits"] += 1
        try:
            store.apply(store.state)
        except Exception:  # noqa: BLE001 - committed; the next commit or reopen applies it
            stats["apply_deferred"] += 1
            return
        self._persists += 1
        if self._maintain_every and self._persists % self._maintain_every == 0:
            # Compact the durable history up to now: a reopen reads contents, not history.
            # Only the arrangements written since they were last compacted (or since the
            # load): an untouched one has nothing new to compact. A lagging one compacts to
            # its own upper - 1 (its contents as of now).
            todo, failed = mirror.unmaintained, set()
            for d in defs:
                if d["key"] not in todo:
                    continue
                name = definition_key(d)
                dur, mem = mirror.arrangements[name], engine.held(name).collection
                # Contents not yet loaded from the store are read as of mem.since: keep it
                # (and compact further at a later maintenance).
                if mem.base_pending:
                    failed.add(d["key"])
                try:
                    stats["maintained"] += 1
                    dur.maintain(self._compact_to(dur, mem.since if mem.base_pending else engine.now))
                except Exception:  # noqa: BLE001 - compaction only saves space; retried later
                    stats["maintain_failed"] += 1
                    failed.add(d["key"])
                    with contextlib.suppress(Exception):
                        dur.refresh()
            for d in state_defs + shared_defs:  # operator states: a reopen reads contents, not history
                if d["key"] not in todo:
                    continue
                dur = store.arrangement(d["key"])
                try:
                    stats["maintained"] += 1
                    dur.maintain(self._compact_to(dur, engine.now))
                except Exception:  # noqa: BLE001 - as above
                    stats["maintain_failed"] += 1
                    failed.add(d["key"])
                    with contextlib.suppress(Exception):
                        dur.refresh()
            mirror.unmaintained = failed

    @staticmethod
    def _quiet(mem, lo: int) -> bool:
        """Whether collection ``mem`` holds no change at a time from ``lo`` on (``lo``
        after its since): its newest time tells, without reading (or building) a batch."""
        if lo <= mem.since:
            return False
        times = mem.times()
        return not times or times[-1] < lo

    @classmethod
    def _uncompacted(cls, dur, now: int) -> bool:
        """Whether maintenance at ``now`` would find work in arrangement ``dur``, known from
        the state its handle read (no storage call): updates not drained into its trace
        (every commit's runs land so), or a trace of several batches whose since maintenance
        would advance."""
        arr = dur.arrangement
        if arr.unsealed_batches or arr.trace_ts_upper() != arr.get_seal():
            return True
        return len(arr.trace_batches) > 1 and arr.since() < cls._compact_to(dur, now)

    @staticmethod
    def _compact_to(dur, since: int) -> int:
        """``since``, or a lagging arrangement's own upper - 1 when that is earlier: it
        holds nothing after it, so its contents as of ``since`` are those."""
        up = dur.upper
        return since if up is None or up < 1 else min(since, up - 1)

    # ------------------------------------------------------------------ display

    def __repr__(self) -> str:
        objects = ", ".join(f"{n} ({self.object(n).kind})" for n in self.names) or "no objects"
        where = f"path={self._path!r}" if self._path is not None else "in memory"
        return f"Catalog({where}, now={self.now}: {objects})"

    def _repr_html_(self) -> str:
        from colmz.display import catalog_html

        return catalog_html(self)
