"""Continual tasks over Spark DataFrames: ``colmz.Catalog``'s step loop per key bucket.

Design
------
A continual task (``CREATE CONTINUAL TASK name ... ON INPUT t AS (...)``, see
``colmz.continual``) runs its statements at every time its input receives inserts, reading
its own output as of the time before. :func:`continual_task` runs one over a DataFrame of the
input's updates (its columns, ``time``, ``diff``) and returns the task's output updates.

* **With** ``partition_by=[cols]`` the caller promises that the statements only relate rows
  of equal key: every row a statement inserts or deletes at ``T`` has the key of an input row
  inserted at ``T`` (e.g. ``DELETE FROM o WHERE k IN (SELECT k FROM t)``, not a bare
  ``DELETE FROM o WHERE v < 3``, which would touch keys without input at ``T``). The input is
  then grouped by a hash of those columns, and each key bucket runs the task's step loop --
  a fresh in-memory :class:`colmz.Catalog` with the input table and the task, fed the
  bucket's updates time after time -- in a grouped Arrow UDF (``applyInArrow``). Under the
  promise, the union of the buckets' outputs is the task's output over the whole input.
* **Without** it, the driver collects the input and runs the same loop once, per time.

The task's definition is checked on the driver before any Spark job runs (unknown tables,
bad SQL, a reference other than the input: the per-bucket catalogs hold only the input, so a
task reading another collection is refused). Input times must be ``>= 1``: the task is
created at time 0 of a fresh catalog (its snapshot of the empty input), and later appends must
come after it. Only batch DataFrames are taken; a streaming one is refused (running a task
across micro-batches needs its output state kept between them, which is not built here).
"""

# No ``from __future__ import annotations``: pyspark reads the UDF's type hints at runtime.
import os
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["TaskDefinition", "continual_task", "define_task", "run_task", "sql_type"]

_SQL_TYPES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.float32(): "REAL", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN", pa.string(): "TEXT",
    pa.large_string(): "TEXT", pa.date32(): "DATE", pa.binary(): "BYTEA",
}


def sql_type(t: pa.DataType) -> str:
    """The SQL type name ``colmz.sql`` maps back to the Arrow type ``t``.

    >>> sql_type(pa.int64()), sql_type(pa.string())
    ('BIGINT', 'TEXT')
    """
    if t in _SQL_TYPES:
        return _SQL_TYPES[t]
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    raise TypeError(f"no SQL type for Arrow type {t} in a continual task's input")


class TaskDefinition:
    """A checked continual task: the script that creates its input table and the task, and
    the names and schemas involved (built by :func:`define_task`)."""

    def __init__(self, ddl: str, input: str, name: str, input_schema, output_schema):
        self.ddl = ddl
        self.input = input
        self.name = name
        self.input_schema = tuple(input_schema)
        self.output_schema = tuple(output_schema)


def define_task(catalog_or_path, sql: str) -> TaskDefinition:
    """Check ``sql`` -- optional ``CREATE TABLE`` statements and one ``CREATE CONTINUAL TASK``
    -- against a catalog (a ``colmz.Catalog``, a durable catalog's path, or None) and return
    its definition. The input table comes from ``sql`` or else from the catalog.

    Raises
    ------
    ValueError
        Not exactly one continual task, or other statements; the input table is unknown.
    colmz.sql.SQLError, colmz.SchemaError, KeyError
        The task does not compile against its input alone.

    >>> d = define_task(None, "CREATE TABLE t (k BIGINT, v BIGINT); "
    ...                 "CREATE CONTINUAL TASK o ON INPUT t AS (INSERT INTO o SELECT k, v FROM t)")
    >>> d.input, d.name, [c.name for c in d.output_schema]
    ('t', 'o', ['k', 'v'])
    """
    from colmz.catalog import Catalog
    from colmz.sql import ContinualTaskStatement, CreateTable, parse

    if not isinstance(sql, str):
        raise TypeError(f"sql must be SQL text, got {type(sql).__name__}")
    stmts = parse(sql)
    tasks = [s for s in stmts if isinstance(s, ContinualTaskStatement)]
    others = [s for s in stmts if not isinstance(s, (ContinualTaskStatement, CreateTable))]
    if len(tasks) != 1 or others:
        raise ValueError(f"sql must hold CREATE TABLE statements and exactly one CREATE CONTINUAL TASK; "
                         f"it holds {[type(s).__name__ for s in stmts]}")
    task = tasks[0]
    tables = {s.name: s for s in stmts if isinstance(s, CreateTable)}
    if task.input in tables:
        ddl_table = ""
    else:
        if catalog_or_path is None:
            raise ValueError(f"the task's input {task.input!r} is not created in sql and no catalog is given")
        cat = catalog_or_path if isinstance(catalog_or_path, Catalog) else Catalog(os.fspath(catalog_or_path))
        obj = cat.object(task.input)
        if obj.kind != "table":
            raise ValueError(f"the task's input {task.input!r} is a {obj.kind}; a table is needed")
        cols = ", ".join(f'"{c.name}" {sql_type(c.type)}' for c in obj.schema)
        ddl_table = f'CREATE TABLE "{task.input}" ({cols});\n'
    ddl = ddl_table + sql
    probe = Catalog()
    probe.execute(ddl)
    extra = [n for n in probe.names if n not in (task.input, task.name)]
    if extra:
        raise ValueError(f"the task may read only its input {task.input!r}; sql also creates {extra}")
    return TaskDefinition(ddl, task.input, task.name, probe.object(task.input).schema,
                          probe.object(task.name).schema)


def run_task(defn: TaskDefinition, updates):
    """The task's output updates over the input ``updates`` (a ``colmz.Updates`` with the
    input's columns), run time after time in a fresh in-memory catalog.

    >>> import colmz
    >>> d = define_task(None, "CREATE TABLE t (k BIGINT); "
    ...                 "CREATE CONTINUAL TASK o ON INPUT t AS (INSERT INTO o SELECT k FROM t)")
    >>> run_task(d, colmz.Updates({"k": [1, 2]}, time=[1, 3], diff=[1, 1])).to_pylist()
    [(1, 1, 1), (2, 3, 1)]
    """
    import colmz
    from colmz.catalog import Catalog

    cat = Catalog()
    cat.execute(defn.ddl)
    if len(updates):
        t = np.asarray(updates.time)
        order = np.argsort(t, kind="stable")
        ts = t[order]
        cuts = np.flatnonzero(np.diff(ts)) + 1
        table = updates.to_arrow()
        for idx in np.split(order, cuts):
            at = int(t[idx[0]])
            cat.append(defn.input, colmz.Updates.from_arrow(table.take(pa.array(idx))), time=at)
    out = cat.task(defn.name).output
    return colmz.consolidate(out.updates(0, out.upper))


def continual_task(
    catalog_or_path,
    sql: str,
    input_df,
    *,
    partition_by: Sequence[str] | None = None,
    time: str = "time",
    diff: str = "diff",
    buckets: int | None = None,
):
    """Run a continual task over a DataFrame of its input's updates; return its output updates.

    Parameters
    ----------
    catalog_or_path : colmz.Catalog, path of a durable catalog, or None
        Where the input table is defined when ``sql`` does not create it.
    sql : str
        Optional ``CREATE TABLE`` statements and one ``CREATE CONTINUAL TASK``.
    input_df : pyspark.sql.DataFrame
        The input's columns, ``time`` (``>= 1``) and ``diff``; a batch DataFrame.
    partition_by : column names, optional
        Key columns the statements only relate equal values of (module docstring): each key
        bucket runs the task in a grouped Arrow UDF. Without, the driver runs it.
    buckets : int, optional
        Key buckets (default ``spark.sql.shuffle.partitions``).

    Returns
    -------
    pyspark.sql.DataFrame
        The task's output columns, ``time`` and ``diff`` (long), consolidated.

    Examples
    --------
    >>> out = continual_task(None, open("task.sql").read(), df, partition_by=["k"])  # doctest: +SKIP
    """
    import colmz
    from colmz.spark.arrangement_io import spark_schema
    from colmz.spark.frames import bucket_columns, shuffle_partitions
    from colmz.spark.schemas import check_rows, check_update_columns

    if input_df.isStreaming:
        raise ValueError("input_df is a streaming DataFrame; continual_task takes batch DataFrames")
    defn = define_task(catalog_or_path, sql)
    names = [c.name for c in defn.input_schema]
    check_update_columns(input_df.schema, names, time, diff)
    if partition_by is not None:
        partition_by = [partition_by] if isinstance(partition_by, str) else list(partition_by)
        missing = [c for c in partition_by if c not in names]
        if not partition_by or missing:
            raise ValueError(f"partition_by must name input columns {names}, got {partition_by!r}")
    from pyspark.sql import functions as F

    src = input_df.select(*names, F.col(time).cast("long").alias("time"), F.col(diff).cast("long").alias("diff"))
    check_rows(src, {"NULL time": F.col("time").isNull(), "time < 1": F.col("time") < 1,
                     "NULL diff": F.col("diff").isNull()}, "bad continual-task input")
    out_schema = spark_schema(defn.output_schema)
    in_schema = defn.input_schema

    def to_updates(table: pa.Table):
        cols = {c.name: table.column(c.name).cast(c.type) for c in in_schema}
        return colmz.Updates(cols, table.column("time"), table.column("diff"))

    def to_table(u) -> pa.Table:
        return pa.Table.from_arrays(
            [*(u.column(c.name) for c in defn.output_schema), pa.array(np.asarray(u.time).astype(np.int64)),
             pa.array(np.asarray(u.diff).astype(np.int64))],
            names=[*(c.name for c in defn.output_schema), "time", "diff"])

    spark = input_df.sparkSession
    if partition_by is None:
        table = src.toArrow()
        result = to_table(run_task(defn, to_updates(table)))
        if not result.num_rows:
            return spark.createDataFrame([], out_schema)
        return spark.createDataFrame(result.to_pandas(), out_schema)

    if buckets is None:
        buckets = shuffle_partitions(input_df)
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"buckets must be a positive int, got {buckets!r}")

    def step_loop(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches).select([*names, "time", "diff"])
        yield from to_table(run_task(defn, to_updates(table))).to_batches()

    keyed = src.withColumn("_colmz_bucket", bucket_columns(src, partition_by, buckets))
    return keyed.groupBy("_colmz_bucket").applyInArrow(step_loop, out_schema)
