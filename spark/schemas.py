"""Checks of Spark schemas and values for colmz updates: column roles, types, bounds.

Design
------
A Spark DataFrame of updates has data columns, a ``time`` column and a ``diff`` column; Spark
has no unsigned 64-bit type, so in Spark a time is a non-negative ``long`` (colmz's ``uint64``
restricted to ``[0, 2**63)``) and a diff is a ``long``. Every check here runs on the driver
before a job starts (schemas, bounds) or as one aggregation over the input (values), so bad
input is reported before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence

from colmz.frontier import check_time

__all__ = [
    "SPARK_MAX_TIME",
    "ColumnMissingError",
    "InputError",
    "check_bound",
    "check_rows",
    "check_update_columns",
    "check_update_values",
    "checked_aggregate",
    "spark_types",
    "updates_schema",
]

#: Largest time representable in a Spark ``long`` time column.
SPARK_MAX_TIME = 2**63 - 1


class InputError(ValueError):
    """Input updates or events that colmz cannot take (bad values, not bad code)."""


class ColumnMissingError(InputError, KeyError):
    """A named column is not in the DataFrame."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


def spark_types():
    """pyspark's types module, its integer types and the data types colmz takes.

    >>> T, integers, data = spark_types()
    >>> T.LongType in integers
    True
    """
    from pyspark.sql import types as T

    integers = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    data = (
        *integers, T.FloatType, T.DoubleType, T.BooleanType, T.StringType, T.BinaryType,
        T.DateType, T.TimestampType, T.TimestampNTZType,
    )
    return T, integers, data


def check_update_columns(
    schema, data: Sequence[str] | None, time: str, diff: str
) -> list[str]:
    """Validate the columns of a DataFrame of updates; return the data column names.

    Parameters
    ----------
    schema : pyspark.sql.types.StructType
    data : sequence of str, optional
        Data columns (default: every column but ``time`` and ``diff``, in order).
    time, diff : str
        Names of the time and diff columns; both must be integer columns.

    Raises
    ------
    ColumnMissingError
        A named column is not in ``schema``.
    TypeError
        A column has a type colmz cannot take (the message names it and its type).
    ValueError
        ``data`` names ``time``/``diff`` or repeats a column.

    Examples
    --------
    >>> from pyspark.sql import types as T
    >>> s = T.StructType([T.StructField("k", T.StringType()), T.StructField("time", T.LongType()),
    ...                   T.StructField("diff", T.IntegerType())])
    >>> check_update_columns(s, None, "time", "diff")
    ['k']
    >>> try:
    ...     check_update_columns(s, ["k"], "t", "diff")
    ... except KeyError as e:
    ...     print(e)
    time column 't' is not in the DataFrame; columns are ['k', 'time', 'diff']
    """
    T, integers, supported = spark_types()
    fields = {f.name: f for f in schema.fields}
    names = list(fields)
    for role, col in (("time", time), ("diff", diff)):
        if col not in fields:
            raise ColumnMissingError(f"{role} column {col!r} is not in the DataFrame; columns are {names}")
        if not isinstance(fields[col].dataType, integers):
            raise TypeError(
                f"{role} column {col!r} has type {fields[col].dataType.simpleString()}; "
                "it must be an integer type (byte/short/int/long)"
            )
    if time == diff:
        raise ValueError(f"time and diff must be different columns, both are {time!r}")
    if data is None:
        data = [n for n in names if n not in (time, diff)]
    else:
        if isinstance(data, str):
            data = [data]
        data = list(data)
        for n in data:
            if n not in fields:
                raise ColumnMissingError(f"data column {n!r} is not in the DataFrame; columns are {names}")
            if n in (time, diff):
                raise ValueError(f"data column {n!r} is also the time or diff column")
        if len(set(data)) != len(data):
            raise ValueError(f"data names a column twice: {data}")
    for n in data:
        t = fields[n].dataType
        if not isinstance(t, supported):
            raise TypeError(
                f"data column {n!r} has type {t.simpleString()}; colmz takes integers, floats, "
                "boolean, string, binary, date and timestamp columns"
            )
    return data


def check_update_values(df, time: str = "time", diff: str = "diff") -> int:
    """Check a DataFrame's update values with one aggregation; return its row count.

    Raises
    ------
    InputError
        NULL or negative times, NULL diffs (each problem with its count and one row).
    """
    from pyspark.sql import functions as F

    t, d = F.col(time), F.col(diff)
    problems = {
        f"NULL {time}": t.isNull(),
        f"negative {time}": t < 0,
        f"NULL {diff}": d.isNull(),
    }
    return check_rows(df, problems, "bad updates")


def check_rows(df, problems, what: str) -> int:
    """Count the rows matching each problem condition in one aggregation; return the row count.

    ``problems`` maps a description to a boolean Column. When any row matches, raises
    :class:`InputError` ``"<what>: <n> row(s) with <description>, e.g. <row as JSON>; ..."``.
    """
    return checked_aggregate(df, problems, what, {})["rows"]


def checked_aggregate(df, problems, what: str, aggregates) -> dict:
    """:func:`check_rows` and more aggregates in the same Spark job: ``aggregates`` maps a
    name to an aggregate Column; returns ``{"rows": n, name: value, ...}`` once no row has
    a problem (else :class:`InputError` as :func:`check_rows`)."""
    from pyspark.sql import functions as F

    row = F.to_json(F.struct(*[F.col(c) for c in df.columns]))
    aggs = [F.count(F.lit(1)).alias("rows")]
    for i, cond in enumerate(problems.values()):
        aggs.append(F.sum(F.when(cond, 1).otherwise(0)).alias(f"n{i}"))
        aggs.append(F.first(F.when(cond, row), ignorenulls=True).alias(f"e{i}"))
    names = list(aggregates)
    aggs.extend(c.alias(f"a{i}") for i, c in enumerate(aggregates.values()))
    r = df.agg(*aggs).collect()[0]
    found = [
        f"{r[f'n{i}']} row(s) with {desc}, e.g. {r[f'e{i}']}"
        for i, desc in enumerate(problems)
        if r[f"n{i}"]
    ]
    if found:
        raise InputError(f"{what}: " + "; ".join(found))
    return {"rows": int(r["rows"]), **{n: r[f"a{i}"] for i, n in enumerate(names)}}


def updates_schema(schema, data: Sequence[str], time: str = "time", diff: str = "diff"):
    """The Spark schema of updates over ``data`` columns taken from ``schema``.

    Data fields keep their types and nullability; ``time`` and ``diff`` are non-null ``long``.

    >>> from pyspark.sql import types as T
    >>> s = T.StructType([T.StructField("k", T.StringType())])
    >>> updates_schema(s, ["k"]).simpleString()
    'struct<k:string,time:bigint,diff:bigint>'
    """
    from pyspark.sql import types as T

    fields = {f.name: f for f in schema.fields}
    return T.StructType(
        [fields[n] for n in data]
        + [T.StructField(time, T.LongType(), False), T.StructField(diff, T.LongType(), False)]
    )


def check_bound(value, name: str) -> int | None:
    """``value`` as a Spark time (``None`` stays ``None``); ``ValueError`` naming ``name`` if out of range.

    >>> check_bound(5, "since"), check_bound(None, "upper")
    (5, None)
    """
    if value is None:
        return None
    # One statement of the range on Spark, whatever the violation: colmz's own check would
    # name uint64's range, which Spark times never reach.
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= SPARK_MAX_TIME:
        raise ValueError(f"{name} must be a time in [0, 2**63-1] on Spark (a non-negative long), got {value!r}")
    v = check_time(value, name)
    if v > SPARK_MAX_TIME:
        raise ValueError(f"{name} must be a time in [0, 2**63-1] on Spark (a non-negative long), got {value!r}")
    return v
