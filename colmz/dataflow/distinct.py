"""``Distinct`` and ``Threshold``: a row's output multiplicity as a function of its count.

Design
------
Both keep their input's multiplicities in a :class:`~colmz.dataflow.KeyedArrangement` keyed
by every column, and per step look up the old count of each row the delta touches (``Δ · log
n``, rows never gathered). ``Distinct`` (SELECT DISTINCT, UNION, Materialize's
``ReducePlan::Distinct``) outputs 1 for a count above 0: ``+row`` on ``0 → >0``, ``−row`` on
``>0 → 0``; a count below 0 is refused (``NegativeMultiplicity``, state unchanged).
``Threshold`` (EXCEPT ALL / INTERSECT ALL after ``Negate`` + ``Union``, Materialize's
``plan/threshold.rs``) outputs ``max(count, 0)``: its input may go negative by design. Rows
compare with NULL = NULL and NaN = NaN, as DISTINCT does.
"""

from __future__ import annotations

import numpy as np

from colmz.dataflow.keyed import KeyedArrangement
from colmz.dataflow.step import Clock, as_schema, check_delta, consolidated_at
from colmz.errors import NegativeMultiplicity
from colmz.ops import consolidate
from colmz.updates import Updates

__all__ = ["Distinct", "Threshold"]


class _ByCount:
    ROLLBACK_FIELDS = ("_counts", "_clock")

    def __init__(self, schema):
        self.schema = as_schema(schema, "schema")
        self._counts = KeyedArrangement(self.schema, [c.name for c in self.schema])
        self._clock = Clock()

    @property
    def arrangement(self) -> KeyedArrangement:
        """The input's multiplicities (for inspection and work counters)."""
        return self._counts

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta``."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.schema, time)
        delta = consolidate(delta)
        if not len(delta):
            self._clock.advance(time)
            return Updates.empty(self.schema)
        cols = [delta.column(c.name) for c in self.schema]
        old = self._counts.counts(cols)
        new = old + np.asarray(delta.diff, np.int64)
        change = self._output(new) - self._output(old)
        keep = np.flatnonzero(change)
        out = delta.take(keep)
        out = Updates({c.name: out.column(c.name) for c in self.schema}, out.time, change[keep], copy=False)
        self._counts.insert_checked(time, delta)
        self._clock.advance(time)
        return consolidated_at(out, time)


class Distinct(_ByCount):
    """Each row once while its count is positive.

    >>> import colmz, pyarrow as pa
    >>> d = Distinct({"k": pa.int64()})
    >>> d.step(1, colmz.Updates({"k": [1, 1, None]}, time=[1] * 3, diff=[1, 1, 2])).to_pylist()
    [(None, 1, 1), (1, 1, 1)]
    >>> d.step(2, colmz.Updates({"k": [1]}, time=[2], diff=[-1])).to_pylist()
    []
    """

    def _output(self, count: np.ndarray) -> np.ndarray:
        if len(count) and count.min() < 0:
            raise NegativeMultiplicity("the input of DISTINCT retracts rows it does not hold "
                                       f"(a count of {int(count.min())})")
        return (count > 0).astype(np.int64)


class Threshold(_ByCount):
    """Each row ``max(count, 0)`` times.

    >>> import colmz, pyarrow as pa
    >>> t = Threshold({"k": pa.int64()})
    >>> t.step(1, colmz.Updates({"k": [1, 2]}, time=[1, 1], diff=[2, -1])).to_pylist()
    [(1, 1, 2)]
    >>> t.step(2, colmz.Updates({"k": [2]}, time=[2], diff=[3])).to_pylist()
    [(2, 2, 2)]
    """

    def _output(self, count: np.ndarray) -> np.ndarray:
        return np.maximum(count, 0)
