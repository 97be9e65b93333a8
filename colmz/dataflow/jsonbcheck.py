"""``JsonbCheck``: jsonb columns checked to be written as their values' only text, natively.

Design
------
colmz keeps a jsonb value as its text, so an operator comparing jsonb columns as text -- a
DISTINCT, GROUP BY, set operation or join key above -- compares jsonb values only when each
value has one text: no number written with trailing fractional zeros (``1.0`` and ``1`` are
one jsonb value, two texts; :func:`colmz.sql.jsonb.jsonb_plain`). PostgreSQL keeps one of the
texts of equal values, which colmz cannot choose as it does, so the query path refuses such a
value (:class:`colmz.sql.UnsupportedSQL`), and so does this operator on a view's delta.

The check is identity on the collection (``Δ check(A) = check(ΔA)``): each step reads the
checked columns' values of its delta in Python (``jsonb_plain`` on each non-NULL one) and
passes the delta on consolidated -- no DuckDB session, at construction or at a step. A
refused delta raises before the clock advances, so the operator is as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

from colmz.dataflow.step import Clock, as_schema, check_delta, consolidated_at
from colmz.updates import Updates

__all__ = ["JsonbCheck"]


class JsonbCheck:
    """Passes its input's changes on, each value of the ``columns`` (input positions, jsonb
    text) refused unless it is its value's only text.

    Parameters
    ----------
    schema : the input's (and the output's) columns
    columns : positions of the checked columns in ``schema``

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> c = JsonbCheck({"k": pa.int64(), "j": pa.string()}, [1])
    >>> c.step(1, colmz.Updates({"k": [1, 2], "j": ['[1, 2.5]', None]}, time=[1, 1], diff=[1, 1])).to_pylist()
    [(1, '[1, 2.5]', 1, 1), (2, None, 1, 1)]
    >>> c.step(2, colmz.Updates({"k": [3], "j": ['[1.0]']}, time=[2], diff=[1]))
    Traceback (most recent call last):
    ...
    colmz.sql.UnsupportedSQL: DISTINCT, GROUP BY or a set operation over jsonb holding a number written with trailing zeros (1.0 beside 1, one jsonb value) is not supported by colmz
    """

    ROLLBACK_FIELDS = ("_clock",)

    def __init__(self, schema, columns: Sequence[int]):
        self.schema = as_schema(schema, "schema")
        self.columns = tuple(columns)
        bad = [i for i in self.columns if not (isinstance(i, int) and 0 <= i < len(self.schema))]
        if bad:
            raise ValueError(f"columns: {bad[0]!r} is not a position of the {len(self.schema)} input column(s)")
        self._clock = Clock()
        #: values checked (a work counter: the non-NULL values of the checked columns read)
        self.values_checked = 0

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time``: ``delta``, consolidated, once its checked
        columns' values pass (else :class:`colmz.sql.UnsupportedSQL`, nothing changed)."""
        from colmz.sql.errors import UnsupportedSQL
        from colmz.sql.jsonb import jsonb_plain

        t = self._clock.check(time)
        delta = check_delta(delta, self.schema, t)
        checked = 0
        for i in self.columns:
            for v in delta.column(self.schema[i].name).to_pylist():
                if v is not None:
                    checked += 1
                    try:
                        jsonb_plain(v)
                    except ValueError as e:
                        raise UnsupportedSQL(str(e)) from None
        self.values_checked += checked
        self._clock.advance(t)
        return consolidated_at(delta, t)
