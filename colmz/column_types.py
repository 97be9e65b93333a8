"""Column types: the Arrow type colmz stores for a SQL column type name.

Design
------
A collection's columns may be given as SQL type names (``{"k": "bigint"}``), as well as
Arrow types, everywhere a schema is taken: :class:`colmz.MemoryCollection`, a continual
task's columns, the catalog's ``CREATE TABLE``. The names are PostgreSQL's (and Materialize's
``uint8``/``mz_timestamp``), mapped to the one Arrow type colmz keeps for each (:data:`SQL_TYPES`);
this module sits below the SQL layer so that collections (:mod:`colmz.collection`,
:mod:`colmz.rows`) can read a type name without importing :mod:`colmz.sql`, which
re-exports :func:`arrow_type`.

``INTERVAL`` is Arrow's ``month_day_nano_interval`` (PostgreSQL's months, days and time kept
apart, as DuckDB reads and writes it). Parquet has no type for it, so a stored part holds an
interval column as :data:`STORED_INTERVAL` -- a struct of its three fields, exact -- and
:func:`storage_table` / :func:`from_storage` convert a table to and from that form.

An array column ``T[]`` (also ``T ARRAY``; PostgreSQL ignores a declared size or number of
dimensions, and so does colmz) is an Arrow ``list`` of ``T``'s type, for the element types
:data:`colmz.order_bytes` keeps exactly and Parquet stores as they are (integers, floats, text,
boolean, date, timestamps); arrays are one-dimensional (a nested value is refused where it is
written: the column's type is ``list`` of the element, not of a list).

Invariants: a name maps to one type or raises :class:`colmz.sql.UnsupportedSQL` naming it
(never a guess): blank-padded ``CHAR``, ``NUMERIC``, arrays of other element types, and ``INTERVAL`` with fields or a
precision (``INTERVAL DAY``, ``INTERVAL(0)``: PostgreSQL truncates what is stored) have no
column kind in colmz's encoding (:mod:`colmz.order`). ``from_storage(storage_table(t))``
equals ``t``.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from colmz.errors import UnsupportedSQL

__all__ = ["SQL_TYPES", "STORED_INTERVAL", "arrow_type", "from_storage", "storage_table"]

#: SQL type name (upper case, modifiers such as ``(10)`` dropped) -> the Arrow type stored.
SQL_TYPES: dict[str, pa.DataType] = {
    "BOOL": pa.bool_(), "BOOLEAN": pa.bool_(),
    "SMALLINT": pa.int16(), "INT2": pa.int16(),
    "INT": pa.int32(), "INTEGER": pa.int32(), "INT4": pa.int32(),
    "BIGINT": pa.int64(), "INT8": pa.int64(),
    "UINT2": pa.uint16(), "UINT4": pa.uint32(), "UINT8": pa.uint64(),
    "UBIGINT": pa.uint64(), "MZ_TIMESTAMP": pa.uint64(),
    "REAL": pa.float32(), "FLOAT4": pa.float32(),
    "DOUBLE": pa.float64(), "FLOAT8": pa.float64(), "FLOAT": pa.float64(),
    "DOUBLE PRECISION": pa.float64(),
    "TEXT": pa.string(), "STRING": pa.string(), "VARCHAR": pa.string(),
    "CHARACTER VARYING": pa.string(), "JSON": pa.string(), "JSONB": pa.string(),
    "BYTEA": pa.binary(), "BLOB": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMP WITHOUT TIME ZONE": pa.timestamp("us"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP WITH TIME ZONE": pa.timestamp("us", tz="UTC"),
    "INTERVAL": pa.month_day_nano_interval(),
}

#: Arrow's month_day_nano_interval layout (little-endian, 16 bytes a value).
_MDN = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanoseconds", "<i8")])
#: How a stored part (Parquet) holds an interval column: its three fields, exactly.
STORED_INTERVAL = pa.struct([("months", pa.int32()), ("days", pa.int32()), ("nanoseconds", pa.int64())])


def arrow_type(type_sql: str) -> pa.DataType:
    """The Arrow type colmz stores for a SQL column type.

    >>> arrow_type("int8"), arrow_type("varchar(10)"), arrow_type("TIMESTAMPTZ")
    (DataType(int64), DataType(string), TimestampType(timestamp[us, tz=UTC]))
    >>> arrow_type("interval")
    DataType(month_day_nano_interval)
    >>> arrow_type("int[]"), arrow_type("text ARRAY")
    (ListType(list<item: int32>), ListType(list<item: string>))
    """
    key = re.sub(r"\s+", " ", type_sql.strip()).upper()
    element = _array_element(key)
    if element is not None:
        return _array_type(type_sql, element)
    if key.startswith("INTERVAL") and key != "INTERVAL":
        # INTERVAL DAY, INTERVAL(0), INTERVAL HOUR TO MINUTE: PostgreSQL truncates the stored
        # value to the fields or precision, which a month_day_nano column would not do.
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (an interval's fields or precision "
            "truncate what PostgreSQL stores): use INTERVAL"
        )
    key = re.sub(r"\s*\(\s*\d+\s*(,\s*\d+\s*)?\)$", "", key)  # varchar(10), char(3)
    if key in SQL_TYPES:
        return SQL_TYPES[key]
    if key in ("CHAR", "CHARACTER", "BPCHAR"):
        # PostgreSQL pads CHAR(n) with blanks and ignores trailing blanks in comparisons;
        # DuckDB reads CHAR as VARCHAR, so no mapping gives PostgreSQL's answers.
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (blank-padded, and DuckDB "
            "compares it as VARCHAR): use TEXT or VARCHAR"
        )
    if key in ("NUMERIC", "DECIMAL"):
        # DuckDB's DECIMAL and Arrow's decimal128 would carry it exactly, but colmz's column
        # encoding (colmz.order.kind_of) has no decimal kind to sort, consolidate and store.
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (no decimal columns in colmz's "
            "encoding): use BIGINT (e.g. cents) or DOUBLE"
        )
    raise UnsupportedSQL(f"column type {type_sql} is not supported by colmz")


#: Element types an array column may hold: those colmz's list encoding (colmz.order_bytes)
#: keeps and Parquet stores as they are.
_ARRAY_ELEMENTS = (pa.bool_(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
                   pa.string(), pa.date32(), pa.timestamp("us"), pa.timestamp("us", tz="UTC"))


def _array_element(key: str) -> str | None:
    # INT[], INT[3], INT[][], INT ARRAY, INT ARRAY[3]: the element's name, else None
    m = re.fullmatch(r"(.+?)\s*((\[\s*\d*\s*\])+|\s+ARRAY(\s*\[\s*\d*\s*\])?)", key)
    return None if m is None else m.group(1)


def _array_type(type_sql: str, element: str) -> pa.DataType:
    # PostgreSQL ignores an array's declared size and dimensions; colmz holds one-dimensional
    # arrays (Arrow list), and a multidimensional value is refused where it is inserted.
    try:  # jsonb is kept as text, but an array of it would compare and print as text[]
        inner = None if element in ("JSON", "JSONB") else arrow_type(element)
    except UnsupportedSQL:
        inner = None
    if inner not in _ARRAY_ELEMENTS:
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (arrays of {element.lower()} are not "
            "kept): use an array of an integer, float, text, boolean, date or timestamp type"
        )
    return pa.list_(inner)


def storage_table(table: pa.Table) -> pa.Table:
    """``table`` as Parquet can hold it: each interval column as :data:`STORED_INTERVAL`
    (``table`` itself when it has none).

    >>> t = pa.table({"d": pa.array([(1, 2, 3_000), None], pa.month_day_nano_interval())})
    >>> storage_table(t).column("d").to_pylist()
    [{'months': 1, 'days': 2, 'nanoseconds': 3000}, None]
    """
    if not any(f.type == pa.month_day_nano_interval() for f in table.schema):
        return table
    columns, fields = [], []
    for f, c in zip(table.schema, table.columns):
        if f.type == pa.month_day_nano_interval():
            c = pa.chunked_array([_interval_struct(x) for x in c.chunks], STORED_INTERVAL)
            f = pa.field(f.name, STORED_INTERVAL, f.nullable, f.metadata)
        columns.append(c)
        fields.append(f)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))


def from_storage(table: pa.Table, types: dict[str, pa.DataType]) -> pa.Table:
    """``table`` read from storage with each column that ``types`` (name -> type) says is an
    interval, held as :data:`STORED_INTERVAL`, an interval again.

    >>> t = pa.table({"d": pa.array([(1, 2, 3_000), None], pa.month_day_nano_interval())})
    >>> from_storage(storage_table(t), {"d": pa.month_day_nano_interval()}).equals(t)
    True
    """
    if not any(f.type == STORED_INTERVAL and types.get(f.name) == pa.month_day_nano_interval()
               for f in table.schema):
        return table
    columns, fields = [], []
    for f, c in zip(table.schema, table.columns):
        if f.type == STORED_INTERVAL and types.get(f.name) == pa.month_day_nano_interval():
            c = pa.chunked_array([_struct_interval(x) for x in c.chunks], pa.month_day_nano_interval())
            f = pa.field(f.name, pa.month_day_nano_interval(), f.nullable, f.metadata)
        columns.append(c)
        fields.append(f)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))


def _interval_struct(a: pa.Array) -> pa.Array:
    # a month_day_nano_interval array as STORED_INTERVAL: its fields side by side (zero where NULL)
    n = len(a)
    buf = a.buffers()[1]
    raw = np.zeros(n, _MDN) if buf is None else np.frombuffer(buf, _MDN, count=n, offset=a.offset * 16)
    mask = a.is_null() if a.null_count else None
    return pa.StructArray.from_arrays(
        [pa.array(raw["months"]), pa.array(raw["days"]), pa.array(raw["nanoseconds"])],
        fields=list(STORED_INTERVAL), mask=mask)


def _struct_interval(a: pa.Array) -> pa.Array:
    # inverse of _interval_struct (a NULL field of a valid struct is read as 0)
    n = len(a)
    out = np.zeros(n, _MDN)
    for name in ("months", "days", "nanoseconds"):
        field = a.field(name)
        out[name] = field.fill_null(0).to_numpy(zero_copy_only=False)
    valid = None
    if a.null_count:
        valid = pa.py_buffer(np.packbits(a.is_valid().to_numpy(zero_copy_only=False), bitorder="little"))
    return pa.Array.from_buffers(pa.month_day_nano_interval(), n, [valid, pa.py_buffer(out.tobytes())],
                                 null_count=a.null_count)
