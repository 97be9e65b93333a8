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

Invariants: a name maps to one type or raises :class:`colmz.sql.UnsupportedSQL` naming it
(never a guess): blank-padded ``CHAR``, ``INTERVAL`` and ``NUMERIC`` have no column kind in
colmz's encoding (:mod:`colmz.order`).
"""

from __future__ import annotations

import re

import pyarrow as pa

from colmz.errors import UnsupportedSQL

__all__ = ["SQL_TYPES", "arrow_type"]

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
}


def arrow_type(type_sql: str) -> pa.DataType:
    """The Arrow type colmz stores for a SQL column type.

    >>> arrow_type("int8"), arrow_type("varchar(10)"), arrow_type("TIMESTAMPTZ")
    (DataType(int64), DataType(string), TimestampType(timestamp[us, tz=UTC]))
    """
    key = re.sub(r"\s+", " ", type_sql.strip()).upper()
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
    if key == "INTERVAL" or key.startswith("INTERVAL "):
        # PostgreSQL's interval holds months, days and microseconds apart (DuckDB's and
        # Arrow's month_day_nano too); colmz's column encoding has no kind for it, and a
        # duration of microseconds would hold no '1 month'.
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (its columns have no interval "
            "kind): store the interval's parts (e.g. BIGINT microseconds) or its text"
        )
    if key in ("NUMERIC", "DECIMAL"):
        # DuckDB's DECIMAL and Arrow's decimal128 would carry it exactly, but colmz's column
        # encoding (colmz.order.kind_of) has no decimal kind to sort, consolidate and store.
        raise UnsupportedSQL(
            f"column type {type_sql} is not supported by colmz (no decimal columns in colmz's "
            "encoding): use BIGINT (e.g. cents) or DOUBLE"
        )
    raise UnsupportedSQL(f"column type {type_sql} is not supported by colmz")
