"""``SqlMapFilter``: a Map/Filter segment whose expressions need SQL, evaluated on the delta.

Design
------
Scalar expressions stay the user's PostgreSQL text: a segment's
predicates and select items, their column references replaced by :func:`placeholder` names
of the segment's input columns, are put into one query over the delta --
``SELECT items, diff FROM delta WHERE predicates`` -- translated by
:func:`colmz.sql.translate` (so every PostgreSQL meaning colmz honours holds: numeric scales,
float text, ``LIKE`` escapes, integer division) and run by DuckDB: **one DuckDB call per
segment per step**, none for an empty delta. A filter and a map are linear, so evaluating them
on the changes is evaluating them on the collection: each update keeps its time and diff.

The output columns' types are DuckDB's answer for the same query over an empty batch of the
input's types, found once by the constructor (a query that does not translate or bind
raises there). Expressions must be deterministic: volatile functions are the planner's to
keep out (a recomputed view). An input column that is an array (an Arrow list) is told to
translate as one (:func:`array_relations`), so a slice of it is PostgreSQL's slice as in a
query over the relation it comes from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from colmz.dataflow.plan_nodes import placeholder
from colmz.dataflow.step import Clock, as_schema, check_delta, consolidated_at
from colmz.order import ColumnSpec
from colmz.updates import Updates

__all__ = ["SqlMapFilter", "array_relations", "placeholder"]

# Not colmz's reserved prefix: the text goes through translate, which refuses that prefix in
# user text. Nothing else is named in the query: every column reference is a placeholder.
_DELTA = "colmz_delta"
_DIFF = '"colmz_diff"'


class SqlMapFilter:
    """``WHERE`` predicates and a select list of SQL text over the input's columns (named
    :func:`placeholder` ``(i)``), evaluated through ``colmz.sql.translate`` on each delta.

    Parameters
    ----------
    schema : the input's columns
    where : SQL predicates (ANDed)
    select : ``(text, name)`` per output column; ``None`` keeps the input's columns
    lateral : SQL text following the delta in ``FROM`` (``, LATERAL generate_series(1,
        "colmz_c0") AS f(v)``), optional: a table function read per input row -- a FlatMap,
        each output row keeping its input row's time and diff (still linear)
    kinds : the kind of each input column (``"jsonb"``, ``"json"``, ``"text"`` or ``None``),
        optional: PostgreSQL's rules of a column's type apply to the segment as to a query
        over such columns (:mod:`colmz.sql.jsonbcols`: a jsonb column
        compared with a string literal compares jsonb, ``||`` of two jsonb columns merges)

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> m = SqlMapFilter({"k": pa.int64(), "s": pa.string()}, where=['"colmz_c0" % 2 = 1'],
    ...                  select=[('"colmz_c0" / 2', "half"), ('upper("colmz_c1")', "u")])
    >>> [(c.name, str(c.type)) for c in m.schema]
    [('half', 'int64'), ('u', 'string')]
    >>> m.step(1, colmz.Updates({"k": [3, 4, 7], "s": ["a", "b", None]}, time=[1] * 3, diff=[1, 1, -1])).to_pylist()
    [(1, 'A', 1, 1), (3, None, 1, -1)]
    >>> j = SqlMapFilter({"j": pa.string()}, where=["\\"colmz_c0\\" = '{\\"a\\":1}'"],
    ...                  kinds=["jsonb"])
    >>> j.step(1, colmz.Updates({"j": ['{"a": 1}', '{"a": 2}']}, time=[1, 1], diff=[1, 1])).to_pylist()
    [('{"a": 1}', 1, 1)]
    """

    ROLLBACK_FIELDS = ("_clock",)

    def __init__(self, schema, where: Sequence[str] = (), select: Sequence[tuple[str, str]] | None = None,
                 lateral: str = "", kinds: Sequence[str | None] = ()):
        from colmz.sql import run_query, session, translate
        from colmz.sql.column_rules import SEGMENT_RULES, column_type, column_type_rules

        self.input_schema = as_schema(schema, "schema")
        self.where = tuple(where)
        self.select = None if select is None else tuple(select)
        items = (self.select if self.select is not None
                 else [(placeholder(i), c.name) for i, c in enumerate(self.input_schema)])
        cols = ", ".join(f'{text} AS "{_quoted(name)}"' for text, name in items)
        text = f"SELECT {cols}, {_DIFF} FROM {_DELTA}{lateral}"
        if self.where:
            text += " WHERE " + " AND ".join(f"({w})" for w in self.where)
        self.sql = text
        kinds = tuple(kinds)
        if len(kinds) not in (0, len(self.input_schema)):
            raise ValueError(f"kinds: {len(kinds)} kind(s) for {len(self.input_schema)} input column(s)")
        # the PostgreSQL rules of a float, jsonb (json, text) or interval column's type
        # (colmz.sql.column_rules), as the catalog's queries get them, the delta's columns
        # being the input's (jsonb values compared as jsonb, with no column's kind told too)
        self.translated = column_type_rules(translate(text, array_relations(_DELTA, (
            (placeholder(i)[1:-1], c.type) for i, c in enumerate(self.input_schema)))), ((_DELTA, tuple(
                (placeholder(i)[1:-1].lower(), *column_type(c.type, k))
                for i, (c, k) in enumerate(zip(self.input_schema, kinds or (None,) * len(self.input_schema))))),),
            SEGMENT_RULES)
        self._run = run_query
        self._con = session(external_access=False)
        out = self._evaluate(Updates.empty(self.input_schema), 0)
        names = [n for _, n in items]
        self.schema = as_schema([ColumnSpec(n, out.schema.field(i).type) for i, n in enumerate(names)],
                                "select")
        self._clock = Clock()
        #: DuckDB calls made (a work counter: one per step with a non-empty delta)
        self.calls = 0

    def _evaluate(self, delta: Updates, time: int) -> pa.Table:
        batch = pa.table({**{placeholder(i)[1:-1]: delta.column(c.name) for i, c in enumerate(self.input_schema)},
                          _DIFF[1:-1]: pa.array(np.asarray(delta.diff, np.int64))})
        self._con.register(_DELTA, batch)
        try:
            return self._run(self._con, self.translated, time)[0]
        finally:
            self._con.unregister(_DELTA)

    def step(self, time, delta: Updates) -> Updates:
        t = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, t)
        if not len(delta):
            self._clock.advance(t)
            return Updates.empty(self.schema)
        out = self._evaluate(delta, t)
        self.calls += 1
        n = out.num_rows
        cols = {c.name: out.column(i).combine_chunks() if n else pa.array([], c.type)
                for i, c in enumerate(self.schema)}
        diff = np.asarray(out.column(len(self.schema)).to_numpy(zero_copy_only=False), np.int64)
        result = consolidated_at(Updates(cols, np.full(n, t, np.uint64), diff, schema=self.schema), t)
        self._clock.advance(t)
        return result


def array_relations(name: str, columns) -> tuple:
    """:func:`colmz.sql.translate`'s ``relations`` for relation ``name`` whose ``columns`` are
    ``(name, Arrow type)`` pairs: its array (list) columns of kind ``"array"``; ``()`` when it
    has none, so a translation of a relation without arrays is shared by every such one.

    >>> array_relations("d", [("a", pa.list_(pa.int64())), ("b", pa.int64())])
    (('d', (('a', 'array'), ('b', None))),)
    >>> array_relations("d", [("b", pa.int64())])
    ()
    """
    cols = tuple((n.lower(), "array" if pa.types.is_list(t) or pa.types.is_large_list(t) else None)
                 for n, t in columns)
    return ((name.lower(), cols),) if any(k for _, k in cols) else ()


def _quoted(name: str) -> str:
    return name.replace('"', '""')
