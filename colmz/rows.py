"""Rows and updates: the one place colmz converts between query rows and ``Updates``.

Design
------
SQL reads a collection as rows: a table with one row per copy (:func:`expand` repeats each
row by its multiplicity; :func:`relation_rows` asks the collection first, which may have
them without consolidating) and writes rows back as updates at one time with one diff
(:func:`rows_to_updates`). Rows from a query, a callable or a user are first brought to a
collection's columns (:func:`conform`: by position, as SQL ``INSERT``; types cast within a
kind, :func:`family`, and refused across kinds), updates to a collection's types by
:func:`cast_to`. The catalog (``colmz.catalog``) and continual tasks (``colmz.continual``)
both use these functions; neither converts rows another way. This module sits below the SQL
layer (a SQL column type name is read through :mod:`colmz.column_types`), so collections
(:mod:`colmz.collection`) and the durable arrangement use it without importing
:mod:`colmz.sql`.

Invariants: :func:`expand` never materialises more than :data:`EXPAND_LIMIT` rows, and a
negative multiplicity raises :class:`colmz.errors.NegativeMultiplicity` rather than being
dropped; :func:`conform` and :func:`cast_to` return exactly the schema asked for or raise
(:class:`colmz.SchemaError` across kinds, ``OverflowError`` for a value that does not fit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from colmz.column_types import arrow_type
from colmz.errors import NegativeMultiplicity, UnsupportedSQL
from colmz.order import ColumnSpec
from colmz.updates import SchemaError, Updates

__all__ = [
    "EXPAND_LIMIT",
    "at_time",
    "cast_to",
    "conform",
    "empty_table",
    "expand",
    "relation_rows",
    "family",
    "rows_to_updates",
    "schema_of",
    "storable",
]

#: ``expand`` makes at most this many rows (2**28): a collection is read by SQL as one row
#: per copy, and a multiplicity such as 2**62 cannot be materialized.
EXPAND_LIMIT = 1 << 28


def schema_of(columns) -> tuple[ColumnSpec, ...]:
    """A collection's columns from a mapping of name to Arrow type or SQL type name, or a
    sequence of ``ColumnSpec`` / ``(name, type)``; at least one, names distinct.

    >>> schema_of({"k": "bigint"})
    (ColumnSpec(name='k', type=DataType(int64)),)
    """
    if isinstance(columns, Mapping):
        items = list(columns.items())
    else:
        items = [(c.name, c.type) if isinstance(c, ColumnSpec) else tuple(c) for c in columns]
    out = []
    for name, typ in items:
        if isinstance(typ, str):
            typ = arrow_type(typ)
        if not isinstance(typ, pa.DataType):
            raise TypeError(f"column {name!r} type must be a pyarrow DataType or SQL type name, got {typ!r}")
        out.append(ColumnSpec(str(name), typ))
    if not out:
        raise ValueError("columns must name at least one column")
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"columns has duplicate names: {names}")
    return tuple(out)


def expand(updates: Updates, what: str = "collection") -> pa.Table:
    """The data rows of ``updates`` as an Arrow table, each repeated by its diff.

    Diffs must be positive (``updates`` is a collection's contents); zero-copy when all are 1.
    More than :data:`EXPAND_LIMIT` rows in all raise ``ValueError`` naming ``what``, the row
    of the largest multiplicity and the limit (rather than allocating them).

    >>> u = Updates({"k": [1, 2]}, time=[0, 0], diff=[1, 2])
    >>> expand(u).column("k").to_pylist()
    [1, 2, 2]
    """
    diff = updates.diff
    table = pa.Table.from_arrays(
        [updates.column(n) for n in updates.column_names], names=updates.column_names
    )
    if len(diff) == 0 or (diff.min() == 1 and diff.max() == 1):
        return table
    if diff.min() < 0:
        i = int(np.argmax(diff < 0))
        row = table.slice(i, 1).to_pylist()[0]
        raise NegativeMultiplicity(f"{what} holds row {row} with multiplicity {int(diff[i])}")
    # Each max is at most EXPAND_LIMIT, so the sum of fewer than 2**34 of them fits an int64.
    if diff.max() > EXPAND_LIMIT or int(diff.sum()) > EXPAND_LIMIT:
        i = int(np.argmax(diff))
        row = table.slice(i, 1).to_pylist()[0]
        total = int(diff.sum()) if diff.max() <= EXPAND_LIMIT else None
        raise ValueError(
            f"{what} holds row {row} with multiplicity {int(diff[i])}"
            + (f" ({total} rows in all)" if total is not None else "")
            + f": SQL reads a collection as one row per copy, and colmz expands at most "
            f"EXPAND_LIMIT = {EXPAND_LIMIT} rows (colmz.rows.EXPAND_LIMIT); read it with "
            "Catalog.read / snapshot, which keep multiplicities"
        )
    idx = np.repeat(np.arange(len(diff), dtype=np.int64), diff)
    return table.take(pa.array(idx))


def relation_rows(collection, as_of: int, what: str = "collection") -> pa.Table:
    """The contents of ``collection`` as of ``as_of`` as the rows of a relation, in no
    particular order: its own ``relation_rows`` when it has one
    (``colmz.collection.MemoryCollection``, which reads a durable table only ever inserted
    into without merging its batches), else ``expand(collection.snapshot(as_of), what)``.

    >>> from colmz.collection import MemoryCollection
    >>> c = MemoryCollection.from_updates(Updates({"k": [1, 2]}, time=[0, 0], diff=[2, 1]))
    >>> sorted(relation_rows(c, 0).column("k").to_pylist())
    [1, 1, 2]
    """
    rows = getattr(collection, "relation_rows", None)
    if rows is not None:
        return rows(as_of, what)
    return expand(collection.snapshot(as_of), what)


def rows_to_updates(rows: pa.Table, time: int, diff: int = 1) -> Updates:
    """Each row of ``rows`` as an update ``(row, time, diff)``.

    >>> rows_to_updates(pa.table({"k": [5]}), 3, -1).to_pylist()
    [(5, 3, -1)]
    """
    n = rows.num_rows
    return Updates(
        {name: rows.column(name) for name in rows.column_names},
        time=np.full(n, time, np.uint64),
        diff=np.full(n, diff, np.int64),
    )


def family(t: pa.DataType) -> str:
    """The kind of an Arrow type: values cast within a kind, never across kinds.

    >>> family(pa.int8()), family(pa.float64()), family(pa.large_string())
    ('number', 'number', 'text')
    """
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_duration(t):
        return "interval"
    return str(t)


def conform(rows, schema: Sequence[ColumnSpec], what: str) -> pa.Table:
    """``rows`` (Arrow table/batch or pandas frame) with the columns and types of ``schema``.

    Columns match by position (as in SQL ``INSERT``); a column whose type is of another kind
    (text for a number, say) raises :class:`colmz.SchemaError`; within a kind values are cast,
    and a value that does not fit raises ``OverflowError``.

    >>> conform(pa.table({"x": [1]}), (ColumnSpec("k", pa.int32()),), "t").schema
    k: int32
    """
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    elif isinstance(rows, pa.RecordBatchReader):
        rows = rows.read_all()
    elif not isinstance(rows, pa.Table):
        if hasattr(rows, "to_arrow_table"):
            rows = rows.to_arrow_table()
        elif type(rows).__module__.startswith("pandas"):
            rows = pa.Table.from_pandas(rows, preserve_index=False)
        else:
            raise TypeError(
                f"{what}: a statement must return a pyarrow Table (or RecordBatch, pandas "
                f"DataFrame), got {type(rows).__name__}"
            )
    if rows.num_columns != len(schema):
        raise SchemaError(
            f"{what} query columns did not match: the task has {len(schema)} column(s) "
            f"{[c.name for c in schema]}, the query gives {rows.num_columns} {rows.column_names}"
        )
    arrays = []
    for i, spec in enumerate(schema):
        col = rows.column(i)
        if col.type != spec.type:
            have, want = family(col.type), family(spec.type)
            if have != "null" and have != want:
                raise SchemaError(
                    f"{what} query columns did not match: column {i + 1} {spec.name!r} is "
                    f"{spec.type} but the query gives {rows.column_names[i]!r} of type {col.type}"
                )
            try:
                col = col.cast(spec.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise OverflowError(
                    f"{what}: column {spec.name!r}: a value does not fit {spec.type}: {e}"
                ) from None
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, names=[c.name for c in schema])


def cast_to(u: Updates, schema: Sequence[ColumnSpec]) -> Updates:
    """``u`` with the column types of ``schema`` (same names): cast within a :func:`family`,
    :class:`colmz.SchemaError` across; ``u`` itself when the types already match.

    >>> cast_to(Updates({"k": [1]}, time=[0], diff=[1]), (ColumnSpec("k", pa.int32()),)).schema[0]
    ColumnSpec(name='k', type=DataType(int32))
    """
    if tuple(u.schema) == tuple(schema):
        return u
    cols = {}
    for spec in schema:
        col = u.column(spec.name)
        if col.type != spec.type:
            if family(col.type) not in ("null", family(spec.type)):
                raise SchemaError(f"column {spec.name!r} is {spec.type}, the updates give {col.type}")
            col = col.cast(spec.type, safe=True)
        cols[spec.name] = col
    return Updates(cols, u.time, u.diff, copy=False)  # colmz-owned arrays


def at_time(u: Updates, time: int) -> Updates:
    """``u`` with every update at ``time`` (data and diffs shared); ``u`` when already so.

    >>> at_time(Updates({"k": [1, 2]}, time=[0, 3], diff=[1, 1]), 5).to_pylist()
    [(1, 5, 1), (2, 5, 1)]
    """
    if len(u) == 0 or (u.time[0] == time and u.time[-1] == time):
        return u
    out = Updates.from_checked({n: u.column(n) for n in u.column_names}, np.full(len(u), time, np.uint64), u.diff)
    order = u.consolidated_order
    if order is not None and (u.time[0] == u.time[-1] if order == "time" else u.time.min() == u.time.max()):
        out.assume_consolidated(order)  # one time moved to another: still each row once, in order
    return out


def storable(t: pa.DataType, what: str | None = None) -> pa.DataType:
    """The colmz column type for a query result type: a continual task's inferred columns
    (``what`` None: a scaled ``DECIMAL`` is stored as a double) and a materialized view's
    (``what`` names the view, whose scaled ``DECIMAL`` is refused: colmz has no decimal
    columns, and a view must not round what it maintains). An array is an array of its
    elements' storable types (``array_agg``: kept as order bytes, :mod:`colmz.order_bytes`);
    an interval is DuckDB's ``month_day_nano_interval`` (PostgreSQL's months, days and time).

    >>> storable(pa.decimal128(10, 0)), storable(pa.large_string()), storable(pa.decimal128(4, 2))
    (DataType(int64), DataType(string), DataType(double))
    """
    if pa.types.is_decimal(t):
        if t.scale == 0:
            return pa.int64()
        if what is not None:
            raise SchemaError(
                f"{what}: a column is DECIMAL({t.precision},{t.scale}); colmz has no decimal columns: "
                "cast it (::DOUBLE or ::BIGINT)"
            )
        return pa.float64()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_null(t):
        where = f"{what}: a column" if what is not None else "a column of the query"
        raise SchemaError(f"{where} is NULL of unknown type: cast it (e.g. NULL::INT)")
    if pa.types.is_interval(t) and t != pa.month_day_nano_interval():
        where = f"{what}: a column" if what is not None else "a column of the query"
        raise UnsupportedSQL(f"{where} is an INTERVAL of type {t}, which is not supported by colmz "
                             "(its interval columns are month_day_nano_interval)")
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        # an array (array_agg(x)): kept as its order bytes (colmz.order_bytes), of storable elements
        item = storable(t.value_type, what)
        return pa.list_(item)  # one spelling: DuckDB names the element field "l", Arrow "item"
    if pa.types.is_fixed_size_list(t) or pa.types.is_struct(t) or pa.types.is_map(t):
        # ROW(a, b), maps, fixed-size arrays: colmz's column encoding (colmz.order) has no kind
        where = f"{what}: a column" if what is not None else "a column of the query"
        kind = "a record" if pa.types.is_struct(t) else "a map" if pa.types.is_map(t) else "an array"
        raise UnsupportedSQL(f"{where} is {kind} ({t}), which is not supported by colmz (its columns "
                             "have no such kind): store its elements as rows (unnest) or its text")
    return t


def empty_table(schema: Sequence[ColumnSpec]) -> pa.Table:
    """An Arrow table of no rows with ``schema``'s columns.

    >>> empty_table((ColumnSpec("k", pa.int64()),)).schema
    k: int64
    """
    return pa.table({c.name: pa.array([], c.type) for c in schema})
