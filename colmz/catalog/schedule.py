"""Which derived objects a commit brings to its time: :class:`Schedule`.

Design
------
A commit at time ``t`` (:meth:`colmz.catalog.engine.Engine._commit`) writes the tables it
changes, then steps only the derived objects that may change at ``t``, in creation order:

* the readers of an object that changed at ``t`` (a table written, a view or task that wrote
  a change), found through :attr:`Schedule.readers` -- an object's readers were created
  after it, so each is reached before its own readers. A materialized view reads each of
  its inputs; a continual task only its ``ON INPUT``, and only when a statement reads it
  (``ContinualTask.reads_input``): upstream writes ``ΔO(T)`` only at times its input has
  inserts, and at any other time -- a reference changed, or nothing did -- its output
  changes nothing and merely seals ``T``, which its lagging upper does logically. A task
  run when its input changed processes every time since it last ran (``ContinualTask.run``:
  its input held no change in between, or it would have run), so it has no due work of its
  own;
* the views that come due at ``t`` with no input changed (``MaintainedView.due``: a
  temporal filter's next flip, a sink holding a correction, ``mz_now()`` recomputed at
  every commit), found in a heap of due times.

Every other object lags: its collection's upper stays where its last change left it -- it
holds nothing after it -- and is moved to ``now + 1`` only when something reads the object
(``colmz.catalog.engine``, "Logical uppers"). A commit's work is then what it touches,
not how many objects the catalog holds.

The schedule is derived state, never rolled back, and kept up to date by what changes it:
DDL adds a created object (:meth:`Schedule.add`: its rank, its edges from what triggers it,
its due time) and removes a dropped one (:meth:`Schedule.remove`), each O(its edges); a
view's due time changes only when it steps, and the engine sets it again then (O(log
views)). :attr:`Schedule.users` (every object naming a key among its ``deps``) answers
DROP's RESTRICT and CASCADE the same way. The engine builds it whole (O(objects)) only when
it has none or its list of objects is not the one the schedule follows
(:meth:`Schedule.valid_for`): on first use, after a load, and after a failed call that ran
DDL (rolled back, the objects are the earlier ones). A roll back without DDL, or the undo
of the commit at ``now`` that a write at ``time=now`` joins, puts back only the due times
of the views it put back (:meth:`Schedule.reset_due`: those kept, and those taken from the
heap by a commit that failed before stepping them). ``work`` counts the entries the
schedule was built or changed by: DDL changes it by what it touches, whatever the number
of objects elsewhere.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from colmz.catalog.objects import CatalogObject, Key

__all__ = ["Schedule", "due_of", "triggers_of"]


def due_of(obj: CatalogObject) -> int | None:
    """The earliest commit time at which materialized view ``obj`` steps with no input
    changed (``MaintainedView.due``; a recomputed view: every commit when it calls
    ``mz_now()``, else never), None for anything else."""
    if obj.kind != "materialized view":
        return None
    if obj.maintained is not None:
        return obj.maintained.due()
    return 0 if obj.uses_now else None


def triggers_of(obj: CatalogObject) -> list[Key]:
    """The objects whose change at a commit's time steps ``obj`` then (module docstring): a
    view's inputs, a continual task's ``ON INPUT`` when a statement reads it, a table's none.

    >>> from colmz.continual import MemoryCollection
    >>> c = MemoryCollection({"k": "bigint"})
    >>> triggers_of(CatalogObject("v", "materialized view", c, {"t", "u"}))
    ['t', 'u']
    """
    if obj.kind == "continual task":
        task = obj.task
        return [task.input_name] if task.reads_input else []
    return sorted(obj.deps, key=str)


class Schedule:
    """The creation rank, readers and due times of an engine's objects (module docstring).

    Parameters
    ----------
    order : list of Key
        The objects' keys in creation order (the engine's list itself: the schedule follows
        that list, :meth:`valid_for`, until :meth:`follow` names another).
    objects : mapping of Key to CatalogObject

    Examples
    --------
    >>> from colmz.continual import MemoryCollection
    >>> c = MemoryCollection({"k": "bigint"})
    >>> objs = {"t": CatalogObject("t", "table", c),
    ...         "v": CatalogObject("v", "materialized view", c, {"t"}, uses_now=True)}
    >>> s = Schedule(["t", "v"], objs)
    >>> s.readers["t"], s.take_due(3), s.take_due(3)
    (['v'], ['v'], [])
    >>> s.remove("v", objs["v"]); s.readers, s.work
    ({}, 7)
    """

    #: Stale heap entries (a due time set again) are dropped by rebuilding the heap once it
    #: holds more than twice the due times plus this many.
    SLACK = 64

    def __init__(self, order: list[Key], objects: Mapping[Key, CatalogObject]) -> None:
        self._order = order
        self._length = len(order)
        #: each object's place in creation order (increasing; a drop leaves a gap)
        self.rank: dict[Key, int] = {}
        self._next_rank = 0
        #: each object's readers (the objects its change steps, :func:`triggers_of`), in
        #: creation order
        self.readers: dict[Key, list[Key]] = {}
        #: each object's users (the objects whose ``deps`` name it), in creation order
        self.users: dict[Key, list[Key]] = {}
        #: the objects :meth:`take_due` took since :meth:`clear_taken` (for :meth:`reset_due`)
        self.taken: list[Key] = []
        #: the entries (objects and edges) the schedule was built or changed by (a work counter)
        self.work = 0
        self._due: dict[Key, int] = {}
        self._heap: list[tuple[int, int, Key]] = []
        for k in order:
            self._insert(k, objects[k])

    def valid_for(self, order: list[Key]) -> bool:
        """Whether this schedule follows ``order`` as it is (the same list, of the length it
        knows: every change to it went through :meth:`add` / :meth:`remove`)."""
        return order is self._order and len(order) == self._length

    def follow(self, order: list[Key]) -> None:
        """Follow ``order`` from now on: the list of objects replaced by a copy of the one
        followed (copy-on-write, holding the same objects) or changed through :meth:`add`
        and :meth:`remove`."""
        self._order = order
        self._length = len(order)

    def _insert(self, key: Key, obj: CatalogObject) -> None:
        self.rank[key] = self._next_rank
        self._next_rank += 1
        self.work += 1
        for d in triggers_of(obj):
            self.readers.setdefault(d, []).append(key)
            self.work += 1
        for d in sorted(obj.deps, key=str):
            self.users.setdefault(d, []).append(key)
            self.work += 1
        self.set_due(key, due_of(obj))

    def add(self, key: Key, obj: CatalogObject) -> None:
        """Object ``obj``, keyed ``key``, was created (last in creation order) and appended
        to the list followed: O(its edges)."""
        self._insert(key, obj)
        self._length += 1

    def remove(self, key: Key, obj: CatalogObject) -> None:
        """Object ``obj``, keyed ``key``, was dropped (its users with it: an object is
        dropped only with every object reading it): O(its edges and its inputs' readers).
        The list followed is the caller's to replace (:meth:`follow`)."""
        self.work += 1
        del self.rank[key]
        for edges, sources in ((self.readers, triggers_of(obj)), (self.users, obj.deps)):
            edges.pop(key, None)
            for d in sources:
                self.work += 1
                out = edges.get(d)
                if out is not None and key in out:
                    out.remove(key)
                    if not out:
                        del edges[d]
        self._due.pop(key, None)  # its heap entry, stale, is skipped by take_due

    def set_due(self, key: Key, due: int | None) -> None:
        """Record that ``key`` steps with no input changed from commit time ``due`` on (None:
        only when an input changes)."""
        if due is None:
            self._due.pop(key, None)
            return
        if self._due.get(key) == due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, self.rank[key], key))
        if len(self._heap) > 2 * len(self._due) + self.SLACK:
            self._heap = [(d, self.rank[k], k) for k, d in self._due.items()]
            heapq.heapify(self._heap)

    def take_due(self, t: int) -> list[Key]:
        """The objects due at or before ``t``, removed from the due times (the caller sets
        each one's next due time once it has stepped) and noted in :attr:`taken`."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= t:
            due, _, key = heapq.heappop(heap)
            if self._due.get(key) == due:
                del self._due[key]
                out.append(key)
        self.taken.extend(out)
        return out

    def clear_taken(self) -> None:
        """Forget :attr:`taken` (a call begins)."""
        self.taken = []

    def reset_due(self, keys: Iterable[Key], objects: Mapping[Key, CatalogObject]) -> None:
        """Set the due time of each of ``keys`` still in ``objects`` from the object as it is
        (after a roll back put their operators back): O(those keys)."""
        for k in keys:
            obj = objects.get(k)
            if obj is not None:
                self.set_due(k, due_of(obj))

    def readers_of(self, keys: Iterable[Key]) -> set[Key]:
        """The objects reading any of ``keys``."""
        out: set[Key] = set()
        for k in keys:
            out.update(self.readers.get(k, ()))
        return out
