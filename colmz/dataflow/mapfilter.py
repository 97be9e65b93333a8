"""``MapFilter``: a fused segment of filters and a projection, applied to each delta.

Design
------
Map, filter and project are linear: the change of ``project(filter(X))`` is
``project(filter(ΔX))``, so the operator owns no state and costs the delta. Materialize fuses
them per pipeline (``MapFilterProject``); so does this type: all predicates, ANDed, then the
output columns.

Native segments only. This module evaluates, without SQL, what DuckDB and PostgreSQL agree
on bit for bit: a column projected or renamed (:class:`Column`), a column compared with a
constant of its own type (:class:`Compare`) and ``IS [NOT] NULL`` (:class:`IsNull`). Comparisons follow PostgreSQL: a NULL operand makes the predicate unknown
and drops the row; floats compare in PostgreSQL's total order (``NaN`` equals ``NaN`` and is
above every number, ``-0.0 = 0.0``) -- both read off ``colmz.order``'s words, which encode
exactly that order. Text compares by ``=`` and ``<>`` only: its ordering depends on the
collation, which is SQL's business.

The hook for everything else. A predicate is any object with the :class:`Predicate`
protocol (``check(schema)`` once at construction, ``mask(updates)`` per delta), an output
column any object with the :class:`Output` protocol (``bind(schema)`` giving its type,
``evaluate(updates)`` its values). Scalar expressions needing SQL -- casts, functions,
arithmetic, text ordering -- will come with the relational plan as predicates and outputs
holding the user's PostgreSQL text, evaluated through ``colmz.sql.translate`` in one DuckDB
call per fused segment; they are absent today, and nothing here pretends otherwise.
"""

from __future__ import annotations

import datetime
import operator
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from colmz.dataflow.step import Clock, as_schema, check_delta, consolidated_at
from colmz.order import ColumnSpec, encode_columns, kind_of
from colmz.updates import Updates

__all__ = ["Column", "Compare", "IsNull", "MapFilter", "Output", "Predicate"]

Schema = tuple[ColumnSpec, ...]


@runtime_checkable
class Predicate(Protocol):
    """A condition on the rows of a delta: ``check`` it against the input's columns once,
    then ``mask`` each delta (``True`` keeps the row; unknown drops it, as SQL's WHERE)."""

    def check(self, schema: Schema) -> None: ...

    def mask(self, updates: Updates) -> np.ndarray: ...


@runtime_checkable
class Output(Protocol):
    """An output column of a segment: its ``name``, its type given the input's columns
    (``bind``, once at construction; raises for what it cannot compute) and its values for
    each (filtered) delta (``evaluate``)."""

    name: str

    def bind(self, schema: Schema) -> pa.DataType: ...

    def evaluate(self, updates: Updates) -> pa.Array: ...


class Column:
    """An output column: input column ``source`` under the name ``name`` (default: the same).

    >>> Column("k", "key").name
    'key'
    """

    __slots__ = ("source", "name")

    def __init__(self, source: str, name: str | None = None):
        if not isinstance(source, str):
            raise TypeError(f"source must be a column name (str), got {source!r}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        self.source = source
        self.name = source if name is None else name

    def bind(self, schema: Schema) -> pa.DataType:
        return _column_type(schema, self.source, "select")

    def evaluate(self, updates: Updates) -> pa.Array:
        return updates.column(self.source)

    def __repr__(self) -> str:
        return f"Column({self.source!r}, {self.name!r})"


_OPS = {"=": operator.eq, "<>": operator.ne, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


def _column_type(schema: Schema, name: str, what: str) -> pa.DataType:
    for c in schema:
        if c.name == name:
            return c.type
    raise ValueError(f"{what} names column {name!r}, which is not among the input's columns "
                     f"{[c.name for c in schema]}")


def _check_constant(value, t: pa.DataType, column: str) -> pa.Scalar:
    """``value`` as a scalar of ``t`` when it is a constant of that type, else ``TypeError``."""
    kind = kind_of(t, column)
    if kind in ("interval", "list"):
        # an interval's bytes hold its written form ('1 mon' is not '30 days' there, and is in
        # PostgreSQL), an array's colmz's order: compared by SQL
        raise TypeError(f"column {column!r} ({t}) is not compared natively: compare it in SQL")
    if isinstance(value, pa.Scalar):
        if value.type != t:
            raise TypeError(f"the constant compared with column {column!r} ({t}) is a {value.type} scalar")
        if not value.is_valid:
            raise ValueError(f"the constant compared with column {column!r} is NULL: use IsNull")
        return value
    if value is None:
        raise ValueError(f"the constant compared with column {column!r} is None (NULL): use IsNull")
    allowed = {
        "int": (int, np.integer),
        "uint": (int, np.integer),
        "float": (float, np.floating),
        "bool": (bool, np.bool_),
        "bytes": (bytes,) if ("binary" in str(t)) else (str,),
    }.get(kind)
    if pa.types.is_temporal(t):
        allowed = (datetime.date, datetime.time, datetime.timedelta, np.datetime64, np.timedelta64)
    if allowed is None or not isinstance(value, allowed) or (kind != "bool" and isinstance(value, bool | np.bool_)):
        raise TypeError(f"the constant {value!r} compared with column {column!r} is not of its "
                        f"type {t}; other comparisons need SQL (absent from native segments)")
    try:
        return pa.scalar(value, t)
    except (pa.ArrowException, OverflowError, ValueError, TypeError) as e:
        raise ValueError(f"the constant {value!r} does not fit column {column!r} ({t}): {e}") from None


class Compare:
    """``column op value``: ``op`` one of ``= <> != < <= > >=``, ``value`` a constant of the
    column's own type (a Python value or an Arrow scalar). A NULL in the column drops the row.

    >>> import colmz
    >>> u = colmz.Updates({"x": [1.0, float("nan"), None, -0.0]}, time=[0] * 4, diff=[1] * 4)
    >>> p = Compare("x", ">", 0.5); p.check(u.schema); p.mask(u).tolist()
    [True, True, False, False]
    >>> p = Compare("x", "=", 0.0); p.check(u.schema); p.mask(u).tolist()
    [False, False, False, True]
    """

    __slots__ = ("column", "op", "value", "_scalar", "_word", "_words")

    def __init__(self, column: str, op: str, value):
        if not isinstance(column, str):
            raise TypeError(f"column must be a column name (str), got {column!r}")
        if op not in _OPS:
            raise ValueError(f"op must be one of {sorted(_OPS)}, got {op!r}")
        self.column = column
        self.op = op
        self.value = value
        self._scalar = None

    def check(self, schema: Schema) -> None:
        t = _column_type(schema, self.column, "a comparison")
        scalar = _check_constant(self.value, t, self.column)
        kind = kind_of(t, self.column)
        self._words = kind != "bytes"
        if not self._words and self.op not in ("=", "<>", "!="):
            raise ValueError(f"text column {self.column!r} compares natively by = and <> only: its "
                             f"ordering ({self.op}) depends on the collation and needs SQL")
        self._scalar = scalar
        if self._words:
            keys, _ = encode_columns([pa.array([scalar.as_py()], t)])
            self._word = keys[0, 0]

    def mask(self, updates: Updates) -> np.ndarray:
        col = updates.column(self.column)
        valid = col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else np.ones(len(col), bool)
        if self._words:
            keys, _ = encode_columns([col])
            return _OPS[self.op](keys[:, 0], self._word) & valid
        eq = pc.equal(col, self._scalar).fill_null(False).to_numpy(zero_copy_only=False)
        out = eq if self.op == "=" else ~eq
        return out & valid

    def __repr__(self) -> str:
        return f"Compare({self.column!r}, {self.op!r}, {self.value!r})"


class IsNull:
    """``column IS NULL`` (or ``IS NOT NULL`` with ``negated=True``).

    >>> import colmz
    >>> u = colmz.Updates({"x": [1, None]}, time=[0, 0], diff=[1, 1])
    >>> p = IsNull("x", negated=True); p.check(u.schema); p.mask(u).tolist()
    [True, False]
    """

    __slots__ = ("column", "negated")

    def __init__(self, column: str, negated: bool = False):
        if not isinstance(column, str):
            raise TypeError(f"column must be a column name (str), got {column!r}")
        if not isinstance(negated, bool):
            raise TypeError(f"negated must be a bool, got {negated!r}")
        self.column = column
        self.negated = negated

    def check(self, schema: Schema) -> None:
        _column_type(schema, self.column, "IS NULL")

    def mask(self, updates: Updates) -> np.ndarray:
        col = updates.column(self.column)
        null = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else np.zeros(len(col), bool)
        return ~null if self.negated else null

    def __repr__(self) -> str:
        return f"IsNull({self.column!r}, negated={self.negated})"


class MapFilter:
    """A fused segment: keep the rows where every predicate holds, then project.

    Parameters
    ----------
    schema : the input's columns (mapping of name to Arrow type, or ``ColumnSpec`` s)
    where : sequence of :class:`Predicate` (``Compare``, ``IsNull``), ANDed
    select : sequence of column names or :class:`Output` s (:class:`Column`: renaming), optional
        The output columns, in order (repeats allowed under distinct names); default: all.
    consolidated_input : bool, default False
        The input's deltas come consolidated (another operator's output). A segment with no
        predicate that keeps every input column in order (renamed or not) then outputs the
        delta as it is: renaming keeps a consolidated delta consolidated, in the same order.

    Examples
    --------
    >>> import colmz, pyarrow as pa
    >>> mf = MapFilter({"k": pa.int64(), "v": pa.string()}, where=[Compare("k", ">=", 2)],
    ...                select=[Column("v", "name")])
    >>> mf.step(1, colmz.Updates({"k": [1, 2, 3], "v": ["a", "b", "b"]}, time=[1] * 3, diff=[1] * 3)).to_pylist()
    [('b', 1, 2)]
    """

    #: The clock is all a step changes.
    ROLLBACK_FIELDS = ("_clock",)

    def __init__(self, schema, *, where: Sequence[Predicate] = (), select: Sequence[str | Column] | None = None,
                 consolidated_input: bool = False):
        if not isinstance(consolidated_input, bool):
            raise TypeError(f"consolidated_input must be a bool, got {consolidated_input!r}")
        self.input_schema = as_schema(schema, "schema")
        preds = tuple(where)
        for p in preds:
            if not isinstance(p, Predicate):
                raise TypeError(f"where holds {p!r}, which is not a Predicate (Compare, IsNull)")
            p.check(self.input_schema)
        self.where = preds
        if select is None:
            select = [c.name for c in self.input_schema]
        if isinstance(select, str):
            raise TypeError(f"select must be a sequence of column names or Columns, got the string {select!r}")
        cols = tuple(Column(c) if isinstance(c, str) else c for c in select)
        out = []
        for c in cols:
            if not isinstance(c, Output):
                raise TypeError(f"select holds {c!r}, neither a column name nor an Output (Column)")
            out.append(ColumnSpec(c.name, c.bind(self.input_schema)))
        names = [c.name for c in out]
        if len(set(names)) != len(names):
            raise ValueError(f"select gives output columns with one name twice: {names}")
        self.select = cols
        self.schema = as_schema(out, "select") if out else ()
        self._clock = Clock()
        #: Whether a step passes a consolidated input through as it is: no predicate, and the
        #: output columns are the input's, in order, at most renamed -- the same rows in the same
        #: order, so consolidating again would sort what is sorted already.
        #: Whether the output is the input's columns, in order, at most renamed (no predicate):
        #: a step renames the delta (``Updates.rename``), keeping what is known of it (a
        #: consolidated input stays known consolidated: no second sort).
        self.renames = (not preds and len(cols) == len(self.input_schema)
                        and all(isinstance(c, Column) and c.source == i.name for c, i in zip(cols, self.input_schema)))
        self.passes_through = consolidated_input and self.renames
        #: Whether every output is an input column (a projection): a step takes the checked
        #: delta's arrays as they are, of the types the outputs were bound to.
        self._projects = all(isinstance(c, Column) for c in cols)
        #: Rows consolidated by steps (a work counter: none for a pass-through segment).
        self.rows_consolidated = 0

    def step(self, time, delta: Updates) -> Updates:
        """The output's change at ``time`` for the input's change ``delta`` (all at ``time``)."""
        time = self._clock.check(time)
        delta = check_delta(delta, self.input_schema, time)
        self._clock.advance(time)
        if self.where and len(delta):
            keep = np.ones(len(delta), bool)
            for p in self.where:
                keep &= p.mask(delta)
            if not keep.all():
                delta = delta.take(np.flatnonzero(keep))
        if self.renames:
            out = delta.rename([c.name for c in self.schema])
        elif self._projects:
            # the delta is checked (cast to the input's types): its columns need no second look
            out = Updates.from_checked({c.name: delta.column(c.source) for c in self.select}, delta.time,
                                       delta.diff)
        else:
            out = Updates({c.name: c.evaluate(delta) for c in self.select}, delta.time, delta.diff,
                          schema=self.schema, copy=False)
        if self.passes_through:
            return out
        if out.consolidated_order is not None:
            return consolidated_at(out, time)  # known consolidated: returned as it is, no sort
        self.rows_consolidated += len(out)
        return consolidated_at(out, time)

    def __repr__(self) -> str:
        return f"MapFilter(where={list(self.where)}, select={list(self.select)})"
