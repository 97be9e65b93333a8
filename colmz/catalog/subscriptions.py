"""What ``SUBSCRIBE`` reads from a catalog's engine: each object's contents as of a time and
its changes between two times, from memory or, for history older than a durable handle's
last load, from the object's arrangement.

Design
------
:class:`Subscriptions` is the part of the engine (:class:`colmz.catalog.engine.Engine`,
which inherits it) that :class:`colmz.subscribe.Subscription` reads through: ``now``,
``names``, ``object``, :meth:`identity` (an object's storage key: the same over its life,
another for an object created again under its name), :meth:`contents` and :meth:`changes`.
An engine holds each collection from its since on (the time it was created or loaded at);
a durable catalog gives its engine ``history``, the lookup of each object's arrangement,
so a subscription can start before that load while the arrangement still holds the times
(its since); past it, :class:`colmz.arrangement.collection.CompactedAway` says so.
The SQL statement (:meth:`subscribe_table`) returns the finite part -- the snapshot and the
changes up to ``now`` -- as one table.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from colmz.arrangement.collection import CompactedAway
from colmz.catalog.objects import Key, definition_key
from colmz.frontier import check_time
from colmz.sql import SQLError, Subscribe, display_name, sql_name
from colmz.updates import Updates

__all__ = ["Subscriptions"]


class Subscriptions:
    """An engine's objects as SUBSCRIBE reads them (module docstring)."""

    #: Each object's arrangement by key, for history before this engine's load (a durable
    #: catalog sets it; in memory there is none).
    history: Callable[[Key], object | None] = staticmethod(lambda key: None)

    def catch_up(self) -> int:
        """``now``: an engine is always as current as it is (a durable catalog catches up
        with its record first)."""
        return self._now

    def identity(self, name) -> str:
        """The storage key of object ``name``: the same over the object's life (across
        reopens), another for an object created again under its name."""
        key = self.object(name).name
        return next(d["key"] for d in self._defs if definition_key(d) == key)

    def contents(self, name, as_of: int) -> Updates:
        """The contents of object ``name`` as of ``as_of``, from memory or, before the
        engine's load, from the object's arrangement while it holds them."""
        obj = self.object(name)
        at = self.as_of(as_of)
        dur = self.history(obj.name)
        if at < obj.collection.since and dur is not None and at >= dur.since:
            return dur.snapshot(at)
        return self.read(name, at)  # refuses a time before the collection's since

    def changes(self, name, lower: int, upper: int) -> Updates:
        """The updates of object ``name`` at times ``lower <= t < upper`` as written
        (``upper`` at most ``now + 1``), from memory or, for history older than the engine's
        load, the object's arrangement."""
        obj = self.object(name)
        lower, upper = check_time(lower, "lower"), check_time(upper, "upper")
        if upper > self._now + 1:
            raise ValueError(f"upper {upper} is after cat.now + 1 = {self._now + 1}: not yet complete")
        coll = obj.collection
        if lower > coll.since or lower >= upper:
            return coll.updates(lower, upper) if lower < upper else Updates.empty(obj.schema)
        dur = self.history(obj.name)
        if dur is not None and lower > dur.since:
            return dur.updates(lower, upper)
        since = coll.since if dur is None else dur.since
        raise CompactedAway(f"{obj.kind} {display_name(obj.name)!r}: its changes from time {lower} are no "
                            f"longer held (its since is {since}: created, reopened or compacted later)")

    def subscribe_table(self, s: Subscribe, as_of: int | None = None) -> pa.Table:
        """The finite part of ``SUBSCRIBE`` (snapshot and changes up to ``now``) as a table,
        from this engine's state (never catching up mid-call)."""
        from colmz.subscribe import Subscription  # above the catalog: it plans queries

        if s.as_of is not None and as_of is not None and s.as_of != as_of:
            raise ValueError(f"the statement says AS OF {s.as_of} and as_of={as_of} is given: give one")
        when = s.as_of if s.as_of is not None else as_of
        target = s.query if s.query is not None else (s.name if len(s.name) > 1 else s.name[0])
        if s.query is None and target not in self:
            raise SQLError(f"unknown catalog item {sql_name(s.name)!r}")
        sub = Subscription(self, target, when, snapshot=s.snapshot, up_to=s.up_to, sync=False)
        return sub.fetch(progress=s.progress)
