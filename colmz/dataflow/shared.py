"""Arrangements shared between views: :class:`SharedArrangements` (the registry a catalog's
engine holds) and :class:`SharedInput` (an operator's renamed window onto one of them).

Design
------
Materialize keeps arrangements by ``(collection, key)`` and lets every dataflow that arranges
a collection by the same key import the one arrangement instead of building its own
(``src/compute/src/render/context.rs``'s ``ArrangementFlavor::Trace``, the compute
controller's ``arrangements`` by collection and key). Here the catalog's engine holds a
:class:`SharedArrangements`: one :class:`~colmz.dataflow.KeyedArrangement` per
``(relation, key columns)`` -- the relation's columns under their own names, every row of it
(NULLs included) -- with the set of views using it (its reference count).

* **Who shares.** An operator that arranges one of its inputs *as is* -- the input is a plan
  ``Get`` (a table, view or task read whole, renamed, before any Map/Filter) -- takes the
  shared arrangement when rendered with one (``colmz.dataflow.render``): a delta join's
  lookups into that input, a min/max reduce's input arranged by its group key. Operators
  whose arranged input is an intermediate result keep their own.
* **Feeding.** The engine feeds each shared arrangement once per commit, with the changes its
  relation committed at that time, right after the relation reached that time (tables before
  any view steps; a view or task after its own step), so every reader finds it *holding the
  commit's changes*. Operators never insert into it. Work: a change is inserted once, however
  many views read it (``KeyedArrangement.rows_inserted`` counts it).
* **Reading.** Because the shared arrangement already holds the step's changes, an operator
  that needs the state *before* them reads ``arrangement − Δ``: :meth:`SharedInput.lookup_words`
  with ``minus=`` the step's delta looks the same keys up in a small arrangement of the delta
  and subtracts those matches. The delta join uses this for Materialize's ``<`` comparison
  (a path reads inputs after it without their changes), the min/max reduce for its old
  extremes; lookups into a shared arrangement then answer exactly what an own arrangement
  updated in the operator's own order answers.
* **Lifetime.** A view's shared arrangements are attached to it after CREATE renders it
  (:meth:`SharedArrangements.attach`; one made for operators the view did not keep is
  discarded); DROP releases it (:meth:`SharedArrangements.release`) and an arrangement is
  freed when its last user is released. An entry put in the registry before its views are
  rendered (a durable catalog restoring it) stays until they attach. A CREATE that fails, like any
  failed call, is undone by rolling the registry back with the engine (``ROLLBACK_FIELDS``:
  the arrangements in place, the users by copy).
* **Identity.** Each shared arrangement has a stable id, :func:`arrangement_id` of its
  relation and key (``'["t", ["k"]]'``, JSON: unambiguous whatever the names hold), which a
  durable state object can be named by.

* **Indexes.** The registry keeps its entries indexed by relation and by user, so a
  commit's feed of a relation (:meth:`SharedArrangements.of`, :meth:`SharedArrangements.feed`)
  and a DROP's release of a view look at that relation's or that view's arrangements only,
  not at every one (``entries_examined`` counts the entries they look at).

Invariant: after a commit at ``T`` every shared arrangement holds its relation's contents as
of ``T`` (consolidated up to the runs' merging), and its users are exactly the live views
whose operators hold a :class:`SharedInput` onto it. ``_by_relation`` and ``_by_user`` are
exactly ``_arranged``'s identities grouped by relation and ``_users`` inverted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from colmz.dataflow.keyed import KeyedArrangement, Matches
from colmz.dataflow.step import as_schema, check_columns
from colmz.ops import concat
from colmz.order import ColumnSpec, Layout
from colmz.updates import Updates

__all__ = ["SharedArrangements", "SharedInput", "SharedSource", "arrangement_id"]

Schema = tuple[ColumnSpec, ...]
Id = tuple[str, tuple[str, ...]]


def arrangement_id(relation: str, key: Sequence[str]) -> str:
    """The stable name of the shared arrangement of ``relation`` by ``key``.

    >>> arrangement_id("t", ["k"])
    '["t", ["k"]]'
    """
    return json.dumps([relation, list(key)])


class SharedArrangements:
    """A catalog engine's arrangements of its collections by ``(relation, key columns)``,
    each with the views using it (module docstring).

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> reg = SharedArrangements()
    >>> t = {"k": pa.int64(), "v": pa.int64()}
    >>> a = reg.arrangement("t", ("k",), t, lambda: colmz.Updates({"k": [1], "v": [2]}, time=[0], diff=[1]), 1)
    >>> reg.attach("v1", [("t", ("k",))]); reg.attach("v2", [("t", ("k",))])
    >>> reg.users("t", ("k",))
    2
    >>> reg.feed("t", 2, colmz.Updates({"k": [1], "v": [3]}, time=[2], diff=[1]))
    >>> a.snapshot().to_pylist()
    [(1, 2, 2, 1), (1, 3, 2, 1)]
    >>> reg.release("v1"); reg.release("v2"); len(reg)
    0
    """

    #: The arrangements (rolled back in place: a view's operators hold them), their users
    #: and the two indexes of them.
    ROLLBACK_FIELDS = ("_arranged", "_users", "_by_relation", "_by_user")
    #: Saved by reference (``colmz.rollback``, "Saved on touch"): every change replaces the
    #: four dicts by copies (their values are immutable), and an arrangement is changed only
    #: by :meth:`feed`, whose caller keeps it first (``Engine._keep``). Saving the registry
    #: (DDL does) then costs nothing, however many arrangements it holds.
    ROLLBACK_ON_TOUCH = ROLLBACK_FIELDS

    def __init__(self) -> None:
        self._arranged: dict[Id, KeyedArrangement] = {}
        self._users: dict[Id, frozenset] = {}
        # the identities in _arranged, by relation, and those each user uses
        self._by_relation: dict[str, tuple[Id, ...]] = {}
        self._by_user: dict[object, frozenset] = {}
        #: The registry entries :meth:`of`, :meth:`feed` and :meth:`release` looked at
        #: (cumulative, never rolled back; a work counter): a relation's or a user's own.
        self.entries_examined = 0

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._arranged)

    def __iter__(self) -> Iterator[Id]:
        return iter(list(self._arranged))

    def __contains__(self, ident) -> bool:
        return ident in self._arranged

    def get(self, relation: str, key: Sequence[str]) -> KeyedArrangement:
        """The shared arrangement of ``relation`` by ``key`` (``KeyError`` naming the known ones)."""
        ident = (relation, tuple(key))
        if ident not in self._arranged:
            raise KeyError(f"no shared arrangement of {relation!r} by {list(key)}; there are "
                           f"{[arrangement_id(*i) for i in self._arranged]}")
        return self._arranged[ident]

    def users(self, relation: str, key: Sequence[str]) -> int:
        """How many views use the arrangement of ``relation`` by ``key`` (its reference count)."""
        return len(self._users.get((relation, tuple(key)), ()))

    def arranges(self, relation) -> bool:
        """Whether some shared arrangement is of ``relation`` (it must be fed its changes): O(1)."""
        return relation in self._by_relation

    def of(self, relation) -> list[KeyedArrangement]:
        """The shared arrangements of ``relation`` (none: ``[]``), looked up in the index by
        relation: O(their number)."""
        idents = self._by_relation.get(relation, ())
        self.entries_examined += len(idents)
        return [self._arranged[i] for i in idents]

    @property
    def nbytes(self) -> int:
        """Bytes held by every shared arrangement (each counted once)."""
        return sum(a.nbytes for a in self._arranged.values())

    def __repr__(self) -> str:
        return ("SharedArrangements(" + ", ".join(f"{arrangement_id(*i)}: {len(self._users.get(i, ()))} users"
                                                  for i in self._arranged) + ")")

    # ------------------------------------------------------------------ changing

    def arrangement(self, relation: str, key: Sequence[str], schema, contents: Callable[[], Updates],
                    time: int) -> KeyedArrangement:
        """The arrangement of ``relation`` (columns ``schema``) by ``key``; a new one is filled
        with ``contents()`` (the relation's contents as of ``time``, the engine's now).

        An entry left with no users by a relation dropped and created again with other
        columns is replaced."""
        schema = as_schema(schema, "schema")
        key = check_columns(key, schema, "key")
        ident = (relation, key)
        arr = self._arranged.get(ident)
        if arr is not None and arr.schema != schema:
            if self._users.get(ident):
                raise ValueError(f"the shared arrangement {arrangement_id(*ident)} has columns "
                                 f"{[c.name for c in arr.schema]} and is in use; {relation!r} now has "
                                 f"{[c.name for c in schema]}")
            arr = None
        if arr is None:
            arr = KeyedArrangement(schema, key)
            arr.insert(time, contents())
            self._enter(ident, arr)
        return arr

    def _own(self) -> None:
        # Copy-on-write (ROLLBACK_ON_TOUCH): a save holds the dicts as they were.
        self._arranged = dict(self._arranged)
        self._users = dict(self._users)
        self._by_relation = dict(self._by_relation)
        self._by_user = dict(self._by_user)

    def _enter(self, ident: Id, arr: KeyedArrangement) -> None:
        self._own()
        if ident not in self._arranged:
            self._by_relation[ident[0]] = (*self._by_relation.get(ident[0], ()), ident)
        self._arranged[ident] = arr

    def put(self, relation: str, key: Sequence[str], arrangement: KeyedArrangement) -> None:
        """Put ``arrangement`` -- the arrangement of ``relation`` by ``key`` restored from a
        durable state object, holding the relation's contents as of the engine's now -- in
        the registry with no users yet, before the views using it are rendered: they find it
        and attach to it instead of filling one from the relation. ``ValueError`` when the
        registry has one already or ``arrangement`` is not arranged by ``key``."""
        key = tuple(key)
        ident = (relation, key)
        if ident in self._arranged:
            raise ValueError(f"the shared arrangement {arrangement_id(*ident)} is in the registry already")
        if tuple(arrangement.key) != key:
            raise ValueError(f"the arrangement put as {arrangement_id(*ident)} is arranged by {list(arrangement.key)}")
        self._enter(ident, arrangement)

    def discard_unused(self) -> None:
        """Free every arrangement no view uses (those put for views that did not attach)."""
        self.discard([i for i in self._arranged if not self._users.get(i)])

    def feed(self, relation, time: int, delta: Updates) -> None:
        """Insert ``relation``'s changes committed at ``time`` into each of its arrangements
        (once per commit, before any view reads them)."""
        if len(delta):
            for arr in self.of(relation):
                arr.insert(time, delta)

    def attach(self, user, idents) -> None:
        """Record that view ``user`` uses the arrangements ``idents`` (``(relation, key)``)."""
        idents = [(ident[0], tuple(ident[1])) for ident in idents]
        for ident in idents:
            if ident not in self._arranged:
                raise KeyError(f"no shared arrangement {arrangement_id(*ident)} to attach {user!r} to")
        if idents:
            self._own()
        for ident in idents:
            self._users[ident] = self._users.get(ident, frozenset()) | {user}
            self._by_user[user] = self._by_user.get(user, frozenset()) | {ident}

    def discard(self, idents) -> None:
        """Free those of ``idents`` nobody uses (made for operators that were not kept)."""
        idents = [(ident[0], tuple(ident[1])) for ident in idents]
        idents = [i for i in idents if i in self._arranged and not self._users.get(i)]
        if idents:
            self._own()
        for ident in idents:
            if ident in self._arranged:
                del self._arranged[ident]
                self._users.pop(ident, None)
                rest = tuple(i for i in self._by_relation[ident[0]] if i != ident)
                if rest:
                    self._by_relation[ident[0]] = rest
                else:
                    del self._by_relation[ident[0]]

    def release(self, user) -> None:
        """View ``user`` is dropped: it uses no arrangement any more; those it was the last
        user of are freed."""
        left = list(self._by_user.get(user, ()))
        self.entries_examined += len(left)
        if not left:
            return
        self._own()
        del self._by_user[user]
        for ident in left:
            self._users[ident] = self._users[ident] - {user}
        self.discard(left)


class SharedSource:
    """What :func:`colmz.dataflow.render.render` takes shared arrangements from: the
    registry, the relations' columns and how to read a relation's contents at ``time`` (to
    fill a new arrangement)."""

    def __init__(self, registry: SharedArrangements, schemas: Mapping[str, Schema],
                 contents: Callable[[str], Updates], time: int):
        self.registry = registry
        self.schemas = dict(schemas)
        self.contents = contents
        self.time = time
        #: the arrangements this source made (new in the registry), for ``discard`` of those
        #: the view did not keep
        self.made: list[Id] = []

    def input(self, relation: str, columns: Sequence[tuple[str, str]], key: Sequence[str]) -> SharedInput:
        """A :class:`SharedInput` onto ``relation`` read as ``columns`` (``(source, name)``
        pairs, a plan ``Get``'s), arranged by ``key`` (names among ``columns``' names)."""
        rename = {n: s for s, n in columns}
        source_key = tuple(rename[k] for k in key)
        if (relation, source_key) not in self.registry:
            self.made.append((relation, source_key))
        arr = self.registry.arrangement(relation, source_key, self.schemas[relation],
                                        lambda: self.contents(relation), self.time)
        return SharedInput(self.registry, relation, arr, columns, tuple(key))


class SharedInput:
    """An operator's window onto a shared arrangement: the relation's columns renamed as the
    plan's ``Get`` reads them (``columns``: ``(source, name)``), arranged by ``key`` (in those
    names). It has no state of its own to roll back -- the registry owns and feeds the
    arrangement -- so it declares no ``ROLLBACK_FIELDS``; the work counters count the lookups
    made through it (the view's share of the work)."""

    shared = True

    def __init__(self, registry: SharedArrangements, relation: str, arrangement: KeyedArrangement,
                 columns: Sequence[tuple[str, str]], key: tuple[str, ...]):
        self.registry = registry
        self.relation = relation
        self.base = arrangement
        types = {c.name: c.type for c in arrangement.schema}
        self.columns = tuple(columns)
        self.schema: Schema = tuple(ColumnSpec(n, types[s]) for s, n in self.columns)
        self.key = key
        self.source_key = arrangement.key
        self.rows_inserted = self.merges = self.rows_merged = 0
        self.keys_searched = self.rows_found = 0

    @property
    def ident(self) -> Id:
        return (self.relation, self.source_key)

    @property
    def id(self) -> str:
        """The stable id of the shared arrangement (:func:`arrangement_id`)."""
        return arrangement_id(self.relation, self.source_key)

    @property
    def users(self) -> int:
        """How many views share the arrangement."""
        return self.registry.users(self.relation, self.source_key)

    def __len__(self) -> int:
        return len(self.base)

    @property
    def nbytes(self) -> int:
        return self.base.nbytes

    @property
    def index_nbytes(self) -> int:
        """Bytes of the shared arrangement's key indexes (``KeyedArrangement.index_nbytes``)."""
        return self.base.index_nbytes

    def __repr__(self) -> str:
        return f"SharedInput({self.id} as {list(self.key)}, {self.users} users)"

    def counts_words(self, q: np.ndarray, layout: Layout, minus: Updates | None = None) -> np.ndarray:
        """The summed diffs of each query key's rows (``KeyedArrangement.counts_words``); with
        ``minus``, as they were without those updates."""
        searched, found = self.base.keys_searched, self.base.rows_found
        out = self.base.counts_words(q, layout)
        self.keys_searched += self.base.keys_searched - searched
        self.rows_found += self.base.rows_found - found
        if minus is not None and len(minus):
            held = KeyedArrangement(self.schema, self.key)
            held.insert_checked(0, minus)
            out = out - held.counts_words(q, layout)
        return out

    def lookup_words(self, q: np.ndarray, layout: Layout, minus: Updates | None = None) -> Matches:
        """The rows of each query key (``KeyedArrangement.lookup_words``), renamed; with
        ``minus`` (updates of :attr:`schema`'s columns the arrangement holds already: the step's
        delta) the rows as they were without them -- their matches subtracted."""
        searched, found = self.base.keys_searched, self.base.rows_found
        m = self.base.lookup_words(q, layout)
        self.keys_searched += self.base.keys_searched - searched
        self.rows_found += self.base.rows_found - found
        rows = m.rows
        if [s for s, _ in self.columns] == rows.column_names:  # every column, in order: renamed
            rows = rows.rename([n for _, n in self.columns])
        else:
            rows = Updates({n: rows.column(s) for s, n in self.columns}, rows.time, rows.diff, copy=False)
        if minus is None or not len(minus):
            return Matches(m.query, rows)
        held = KeyedArrangement(self.schema, self.key)
        held.insert_checked(0, minus.negated())
        d = held.lookup_words(q, layout)
        if not len(d.query):
            return Matches(m.query, rows)
        if not len(m.query):
            return d
        time = np.zeros(len(m.query) + len(d.query), np.uint64)
        both = concat([rows, d.rows])
        return Matches(np.concatenate([m.query, d.query]), Updates({c.name: both.column(c.name) for c in self.schema},
                                                                   time, both.diff, copy=False))
