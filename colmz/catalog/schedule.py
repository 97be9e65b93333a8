"""Which derived objects a commit brings to its time: :class:`Schedule`.

Design
------
A commit at time ``t`` (:meth:`colmz.catalog.engine.Engine._commit`) writes the tables it
changes, then steps only the derived objects that may change at ``t``, in creation order:

* the readers of an object that changed at ``t`` (a table written, a view or task that wrote
  a change), found through :attr:`Schedule.readers` -- an object's readers were created
  after it, so each is reached before its own readers;
* the views that come due at ``t`` with no input changed (``MaintainedView.due``: a
  temporal filter's next flip, a sink holding a correction, ``mz_now()`` recomputed at
  every commit), found in a heap of due times;
* every continual task (it runs at every commit).

Every other object lags: its collection's upper stays where its last change left it -- it
holds nothing after it -- and is moved to ``now + 1`` only when something reads the object
(``colmz.catalog.engine``, "Logical uppers"). A commit's work is then what it touches,
not how many objects the catalog holds.

The schedule is derived state, never rolled back: the engine rebuilds it (O(objects)) when
its list of objects is not the one it was built from (DDL replaces or extends it) and after
any roll back or load (which put views' operators -- and so their due times -- back). A
view's due time changes only when it steps; the engine sets it again then (O(log views)).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from colmz.catalog.objects import CatalogObject, Key

__all__ = ["Schedule", "due_of"]


def due_of(obj: CatalogObject) -> int | None:
    """The earliest commit time at which materialized view ``obj`` steps with no input
    changed (``MaintainedView.due``; a recomputed view: every commit when it calls
    ``mz_now()``, else never), None for anything else."""
    if obj.kind != "materialized view":
        return None
    if obj.maintained is not None:
        return obj.maintained.due()
    return 0 if obj.uses_now else None


class Schedule:
    """The creation rank, readers and due times of an engine's objects (module docstring).

    Parameters
    ----------
    order : list of Key
        The objects' keys in creation order (the engine's list itself: the schedule is valid
        while the engine holds that list at that length, :meth:`valid_for`).
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
    """

    #: Stale heap entries (a due time set again) are dropped by rebuilding the heap once it
    #: holds more than twice the due times plus this many.
    SLACK = 64

    def __init__(self, order: list[Key], objects: Mapping[Key, CatalogObject]) -> None:
        self._order = order
        self._length = len(order)
        #: each object's place in creation order
        self.rank: dict[Key, int] = {k: i for i, k in enumerate(order)}
        #: each object's readers (the objects whose ``deps`` name it), in creation order
        self.readers: dict[Key, list[Key]] = {}
        #: the continual tasks, in creation order (each runs at every commit)
        self.tasks: list[Key] = []
        self._due: dict[Key, int] = {}
        self._heap: list[tuple[int, int, Key]] = []
        for k in order:
            obj = objects[k]
            for d in sorted(obj.deps, key=str):
                self.readers.setdefault(d, []).append(k)
            if obj.kind == "continual task":
                self.tasks.append(k)
            self.set_due(k, due_of(obj))

    def valid_for(self, order: list[Key]) -> bool:
        """Whether this schedule was built from ``order`` as it is (the same list, not grown)."""
        return order is self._order and len(order) == self._length

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
        each one's next due time once it has stepped)."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= t:
            due, _, key = heapq.heappop(heap)
            if self._due.get(key) == due:
                del self._due[key]
                out.append(key)
        return out

    def readers_of(self, keys: Iterable[Key]) -> set[Key]:
        """The objects reading any of ``keys``."""
        out: set[Key] = set()
        for k in keys:
            out.update(self.readers.get(k, ()))
        return out
