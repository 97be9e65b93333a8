"""``ViewSink``: a view's output written through the correction buffer.

Design
------
Materialize's materialized-view sink (``src/compute/src/sink/materialized_view.rs``;
``colmz.Correction`` is its ``correction_v2``): the dataflow's output change at ``T`` is inserted into a
:class:`~colmz.Correction` as *desired*; what the collection holds is fed back negated as
*persisted*; the sink writes ``updates_before(T + 1)`` -- ``desired − persisted``, consolidated
-- with ``compare_and_append(·, upper, T + 1)`` and feeds that write back, so the buffer holds
only what is still to write. No view keeps its whole previous result to diff against.

Drained writes. A write that was everything the correction held (the initial output a
``CREATE`` writes, a bulk change with no future updates buffered) cancels exactly against
its feedback, and the buffer holds nothing else: the sink then starts from an empty
correction instead of feeding the write back, so the next step consolidates only its own
change, not the write and its negation again (``rows_consolidated`` counts the updates the
correction took into its sorts and merges). Smaller writes are fed back, which costs less than a new
buffer (:data:`DRAIN_ROWS`).

Passed through. A caught-up sink -- its correction empty, as a drained write leaves it --
given a change known consolidated (``Updates.consolidated_order``: an operator's output
consolidated by construction) with no update after ``T`` writes that change as it is: with
nothing else buffered, ``desired − persisted`` before ``T + 1`` is exactly the change, and
nothing is left to correct after it (the write and its feedback cancel). The correction then
sorts nothing and stays empty (``rows_passed`` counts these updates).

Self-correcting. A sink opened over a collection that already holds contents (a reopened
view, a dataflow rebuilt from scratch) feeds those contents back first: the dataflow's
output then writes only its difference from them. ``T`` must not be below the collection's
upper (steps come at forward times; the write moves the upper to ``T + 1``).

Times. A step at ``T`` takes updates at times from the collection's upper on: those before
``T`` (a temporal filter's flips that came due since the last step, ``colmz.dataflow.temporal``,
each at its own time) are written at their times, those after it (any operator's future
updates) wait in the correction until a step's ``T`` reaches them.
"""

from __future__ import annotations

from colmz.collection import MemoryCollection
from colmz.correction import Correction
from colmz.dataflow.step import as_schema
from colmz.frontier import check_time
from colmz.ops import concat
from colmz.rollback import undone_on_error
from colmz.rows import cast_to
from colmz.updates import SchemaError, Updates

__all__ = ["DRAIN_ROWS", "ViewSink"]

#: A step writing more rows than this that leave nothing else in the correction starts the
#: next step from an empty correction (module docstring). Below it the write and its
#: feedback cancel at the next read in one compiled call (``colmz.correction``), cheaper
#: than making a new buffer.
DRAIN_ROWS = 4096


class ViewSink:
    """Writes a view's output changes into a collection through a ``Correction``.

    Parameters
    ----------
    schema : the view's columns
    collection : MemoryCollection, optional
        Where the view lives (default: a new empty one). Its contents at ``upper - 1``, if
        any, are fed back as persisted.

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> s = ViewSink({"k": pa.int64()})
    >>> s.step(3, colmz.Updates({"k": [1, 2]}, time=[3, 3], diff=[1, 1])).to_pylist()
    [(1, 3, 1), (2, 3, 1)]
    >>> s.collection.upper, s.step(5, colmz.Updates({"k": [2]}, time=[5], diff=[-1])).to_pylist()
    (4, [(2, 5, -1)])
    >>> again = ViewSink({"k": pa.int64()}, s.collection)   # a rebuilt dataflow: full output
    >>> again.step(6, colmz.Updates({"k": [1, 7]}, time=[6, 6], diff=[1, 1])).to_pylist()
    [(7, 6, 1)]
    """

    ROLLBACK_FIELDS = ("_correction",)

    def __init__(self, schema, collection: MemoryCollection | None = None):
        self.schema = as_schema(schema, "schema")
        if collection is None:
            collection = MemoryCollection(self.schema)
        if not isinstance(collection, MemoryCollection):
            raise TypeError(f"collection must be a MemoryCollection, got {type(collection).__name__}")
        if [c.name for c in collection.schema] != [c.name for c in self.schema]:
            raise SchemaError(f"collection has columns {[c.name for c in collection.schema]}, the view "
                              f"{[c.name for c in self.schema]}")
        if collection.upper is None:
            raise ValueError("collection is sealed (its upper is the empty frontier): nothing can be written")
        self.collection = collection
        self._correction = Correction(schema=self.schema)
        upper = collection.upper
        if upper > collection.since:
            persisted = collection.snapshot(upper - 1)
            if len(persisted):
                self._correction.insert_negated(persisted)
        self._correction.advance_since(upper)
        #: updates the correction took into its sorts and merges in this sink's steps (its
        #: ``Work.consolidated``; a work counter, cumulative, never rolled back)
        self.rows_consolidated = 0
        #: updates written as they were given, past the correction (a work counter)
        self.rows_passed = 0

    @property
    def correction(self) -> Correction:
        """The buffer of ``desired − persisted`` (empty between steps of a caught-up sink)."""
        return self._correction

    # -- durable state (colmz.dataflow.state) -------------------------------------------

    def resume(self) -> None:
        """Declare the dataflow's output so far equal to what the collection holds (operators
        restored from their durable state, not fed the inputs again): nothing is left to
        correct, so the persisted contents fed back at construction are cleared."""
        self._correction = self._empty(self.collection.upper)

    # ------------------------------------------------------------------------------------

    def step(self, time, delta: Updates) -> Updates:
        """Write the view's output change ``delta`` (at times from the collection's upper on;
        those after ``time`` wait in the correction); returns what was written (times before
        ``time + 1``)."""
        time = check_time(time, "time")
        upper = self.collection.upper
        if time < upper:
            raise ValueError(f"time {time} is below the collection's upper {upper}: the view is written "
                             "up to it already")
        if not isinstance(delta, Updates):
            raise TypeError(f"delta must be colmz.Updates, got {type(delta).__name__}")
        if len(delta):
            delta = cast_to(delta, self.schema)
            if int(delta.time.min()) < upper:
                raise ValueError(f"delta has an update at time {int(delta.time.min())}, before the collection's "
                                 f"upper {upper}: the view is written up to it already")
        corr = self._correction
        if len(delta) and self._passes(delta, time):
            # caught up, and the change is consolidated at times the write takes: desired −
            # persisted is the change itself (module docstring, "Passed through")
            with undone_on_error(self):
                self.collection.compare_and_append(delta, upper, time + 1)
                corr.advance_since(time + 1)
            self.rows_passed += len(delta)
            return delta
        taken = corr.work.consolidated
        with undone_on_error(self):
            corr.insert(delta)
            written = concat(list(corr.updates_before(time + 1)))
            if not len(written) or not written.schema:
                written = Updates.empty(self.schema)
            else:
                # the correction's read is consolidated (its contract): the collection's append
                # and every reader of the write take it as it is, without sorting it again
                written.assume_consolidated()
            self.collection.compare_and_append(written, upper, time + 1)
            if len(written) > DRAIN_ROWS and len(corr) == len(written):
                # the write is all the buffer held: with its feedback nothing is left to
                # correct, so the buffer starts empty instead of consolidating the two
                self._correction = self._empty(time + 1)
            else:
                corr.insert_negated(written)
                corr.advance_since(time + 1)
        self.rows_consolidated += corr.work.consolidated - taken
        return written

    def _passes(self, delta: Updates, time: int) -> bool:
        """Whether ``delta`` is written as it is: the correction holds nothing (the last write
        drained it), ``delta`` is known consolidated in ``(time, data)`` order -- or in data
        order at one time -- and no update of it is after ``time`` (none waits)."""
        if len(self._correction):
            return False
        order = delta.consolidated_order
        t = delta.time
        if order == "time":
            return int(t[-1]) <= time  # sorted by time: the last is the latest
        return order == "data" and int(t.min()) == int(t.max()) <= time

    def _empty(self, since: int) -> Correction:
        corr = Correction(schema=self.schema)
        corr.advance_since(since)
        return corr
