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

* **Over a streaming DataFrame** (:func:`stream_task`, or :func:`continual_task` with
  ``store=`` and ``checkpoint=``) the task runs in a *durable* :class:`colmz.Catalog` at
  ``store``: each micro-batch (``foreachBatch``, on the driver) appends its rows time after
  time to the input table, and the catalog runs the task at each and persists input and
  output; the output's full history is :func:`task_output`. Times must grow across
  micro-batches: a row at or before the last time an earlier micro-batch committed is late and
  fails the query before anything of its batch is written.

**Exactly once over a stream.** Each time is one atomic step of the durable catalog (its
input and output arrangements commit per time; a crash between the two is resumed by the
catalog on reopening), so a micro-batch is a sequence of atomic steps, not one. Before its
first step a micro-batch records its *intent* -- its id and the catalog's time ``X`` before
it -- in ``colmz_task.json`` in the checkpoint directory. A batch Spark replays after a crash
(its input fixed by the offset log) finds its own intent: its times up to ``X`` would be late
input, its times in ``(X, now]`` were applied by the crashed attempt and are skipped, the rest
are applied. So every time is applied once, whatever step the crash interrupted.

The task's definition is checked on the driver before any Spark job runs (unknown tables,
bad SQL, a reference other than the input: the per-bucket catalogs hold only the input, so a
task reading another collection is refused). Input times must be ``>= 1``: the task is
created at time 0 of a fresh catalog (its snapshot of the empty input), and later appends must
come after it.
"""

# No ``from __future__ import annotations``: pyspark reads the UDF's type hints at runtime.
import os
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["INTENT", "TaskDefinition", "continual_task", "define_task", "run_task", "sql_type", "stream_task",
           "task_batch_writer", "task_output"]

#: The file in a streaming task's checkpoint directory recording the micro-batch in progress.
INTENT = "colmz_task.json"

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
    from colmz.sql.build import create_table

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
        # read only: a path that holds no catalog is refused, never created
        cat = (catalog_or_path if isinstance(catalog_or_path, Catalog)
               else Catalog(os.fspath(catalog_or_path), create=False))
        obj = cat.object(task.input)
        if obj.kind != "table":
            raise ValueError(f"the task's input {task.input!r} is a {obj.kind}; a table is needed")
        ddl_table = create_table(task.input, [(c.name, sql_type(c.type)) for c in obj.schema]) + ";\n"
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
    store: str | None = None,
    checkpoint: str | None = None,
    available_now: bool = False,
):
    """Run a continual task over a DataFrame of its input's updates; return its output updates
    (a batch DataFrame), or, over a streaming DataFrame, the query (:func:`stream_task`).

    Parameters
    ----------
    catalog_or_path : colmz.Catalog, path of a durable catalog, or None
        Where the input table is defined when ``sql`` does not create it.
    sql : str
        Optional ``CREATE TABLE`` statements and one ``CREATE CONTINUAL TASK``.
    input_df : pyspark.sql.DataFrame
        The input's columns, ``time`` (``>= 1``) and ``diff``; a batch or streaming DataFrame.
    partition_by : column names, optional
        Key columns the statements only relate equal values of (module docstring): each key
        bucket runs the task in a grouped Arrow UDF. Without, the driver runs it.
    buckets : int, optional
        Key buckets (default ``spark.sql.shuffle.partitions``).
    store, checkpoint, available_now
        A streaming ``input_df`` only (:func:`stream_task`); required for one.

    Returns
    -------
    pyspark.sql.DataFrame or pyspark.sql.streaming.StreamingQuery
        The task's output columns, ``time`` and ``diff`` (long), consolidated; over a stream,
        the query writing the task's output into the durable catalog at ``store``.

    Examples
    --------
    >>> out = continual_task(None, open("task.sql").read(), df, partition_by=["k"])  # doctest: +SKIP
    """
    import colmz
    from colmz.spark.arrangement_io import spark_schema
    from colmz.spark.frames import bucket_columns, shuffle_partitions
    from colmz.spark.schemas import check_rows, check_update_columns

    if input_df.isStreaming:
        if partition_by is not None:
            raise ValueError("partition_by is for batch DataFrames: over a stream the driver runs the task "
                             "in one durable catalog")
        if store is None or checkpoint is None:
            raise ValueError("a streaming input_df needs store= (the durable catalog) and checkpoint=")
        return stream_task(catalog_or_path, sql, input_df, store, checkpoint, time=time, diff=diff,
                           available_now=available_now)
    if store is not None or checkpoint is not None:
        raise ValueError("store= and checkpoint= are for a streaming input_df")
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


def _open_task_catalog(defn: TaskDefinition, store: str, maintain_every: int):
    """The durable catalog at ``store`` holding ``defn``'s input and task (created when empty)."""
    from colmz.catalog import Catalog

    cat = Catalog(store, maintain_every=maintain_every)
    if not cat.names:
        cat.execute(defn.ddl)
        return cat
    for name, kind, schema in ((defn.input, "table", defn.input_schema),
                               (defn.name, "continual task", defn.output_schema)):
        if name not in cat.names:
            raise ValueError(f"the catalog at {store!r} holds {cat.names}, not the task's {name!r}")
        obj = cat.object(name)
        if obj.kind != kind or tuple(obj.schema) != tuple(schema):
            raise ValueError(f"{name!r} in the catalog at {store!r} is a {obj.kind} with other columns "
                             f"than the task's {kind}")
    return cat


def _read_intent(checkpoint: str) -> dict | None:
    import json

    path = os.path.join(checkpoint, INTENT)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _write_intent(checkpoint: str, intent: dict) -> None:
    import json
    import uuid

    path = os.path.join(checkpoint, INTENT)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        json.dump(intent, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def task_batch_writer(catalog_or_path, sql: str, input_schema, store: str, checkpoint: str, *,
                      time: str = "time", diff: str = "diff", maintain_every: int = 16,
                      on_batch=None):
    """The ``foreachBatch`` function of :func:`stream_task`: ``fn(batch_df, batch_id)``.

    Checks the definition and the input's columns, binds ``checkpoint`` to ``store`` and the
    task, and opens (creates) the durable catalog; each call applies one micro-batch exactly
    once (module docstring). ``on_batch`` gets a dict of figures per batch (``batch``,
    ``rows``, ``times``, ``skipped`` -- times a crashed attempt had applied -- and ``now``).

    >>> fn = task_batch_writer(None, sql, df.schema, "task_store", "ckpt")  # doctest: +SKIP
    >>> fn(df, 0); fn(df, 0)  # the second applies nothing  # doctest: +SKIP
    """
    import hashlib

    import colmz
    from colmz.spark.schemas import InputError, check_update_columns
    from colmz.spark.stream import StreamBindingError, bind_checkpoint

    defn = define_task(catalog_or_path, sql)
    names = [c.name for c in defn.input_schema]
    check_update_columns(input_schema, names, time, diff)
    bind_checkpoint(checkpoint, {"store": str(store), "task": defn.name, "input": defn.input,
                                 "ddl": hashlib.sha1(defn.ddl.encode()).hexdigest()})
    state = {"cat": _open_task_catalog(defn, store, maintain_every)}
    in_schema = defn.input_schema

    def one_batch(df, batch_id: int) -> None:
        batch_id = int(batch_id)
        intent = _read_intent(checkpoint)
        if intent is not None and intent["batch"] > batch_id:
            raise StreamBindingError(f"micro-batch {batch_id} comes after batch {intent['batch']} in "
                                     f"{os.path.join(checkpoint, INTENT)}: another query's checkpoint")
        if state["cat"] is None:  # the last batch failed midway: take the catalog as stored
            state["cat"] = _open_task_catalog(defn, store, maintain_every)
        cat = state["cat"]
        start = intent["start"] if intent is not None and intent["batch"] == batch_id else cat.now
        from pyspark.sql import functions as F

        table = df.select(*names, F.col(time).cast("long").alias("time"),
                          F.col(diff).cast("long").alias("diff")).toArrow()
        figures = {"batch": batch_id, "rows": table.num_rows, "times": 0, "skipped": 0, "now": cat.now}
        if table.num_rows:
            t = table.column("time")
            if t.null_count or table.column("diff").null_count:
                raise InputError(f"micro-batch {batch_id}: NULL time or diff")
            ts = np.asarray(t.to_numpy(zero_copy_only=False), dtype=np.int64)
            lo = int(ts.min())
            if lo < 1 or lo <= start:
                raise InputError(f"micro-batch {batch_id} holds time {lo}, at or before {max(start, 0)}: "
                                 "times must be >= 1 and after every earlier micro-batch's")
            if intent is None or intent["batch"] != batch_id:
                _write_intent(checkpoint, {"batch": batch_id, "start": start})
            order = np.argsort(ts, kind="stable")
            cuts = np.flatnonzero(np.diff(ts[order])) + 1
            try:
                for idx in np.split(order, cuts):
                    at = int(ts[idx[0]])
                    if at <= cat.now:  # applied by a crashed attempt of this batch
                        figures["skipped"] += 1
                        continue
                    piece = table.take(pa.array(idx))
                    cols = {c.name: piece.column(c.name).cast(c.type) for c in in_schema}
                    cat.append(defn.input, colmz.Updates(cols, piece.column("time"), piece.column("diff")), time=at)
                    figures["times"] += 1
            except BaseException:
                state["cat"] = None  # reopen from the store: it holds every completed time
                raise
        figures["now"] = cat.now
        if on_batch is not None:
            on_batch(figures)

    return one_batch


def stream_task(catalog_or_path, sql: str, input_df, store: str, checkpoint: str, *,
                time: str = "time", diff: str = "diff", maintain_every: int = 16,
                available_now: bool = False, on_batch=None):
    """Run a continual task over a streaming DataFrame of its input's updates, exactly once,
    in the durable catalog at ``store`` (module docstring); returns the ``StreamingQuery``.

    The task's output is the catalog's collection of the task's name (``colmz.Catalog(store)``)
    and its whole history :func:`task_output` (``maintain_every=0`` keeps every time; by
    default the catalog compacts its history every 16 commits).

    Raises
    ------
    ValueError, colmz.sql.SQLError, KeyError
        A bad definition, or a catalog at ``store`` holding another task.
    colmz.spark.stream.StreamBindingError
        The checkpoint belongs to another store or task.

    Late rows (a time at or before one an earlier micro-batch committed), times below 1 or
    NULLs fail the query with :class:`colmz.spark.InputError` before their batch writes.

    >>> q = stream_task(None, sql, spark.readStream.parquet(d), "task_store", "ckpt")  # doctest: +SKIP
    >>> task_output("task_store", "o").to_pylist()  # doctest: +SKIP
    """
    if not input_df.isStreaming:
        raise ValueError("stream_task takes a streaming DataFrame (continual_task takes batch ones)")
    fn = task_batch_writer(catalog_or_path, sql, input_df.schema, store, checkpoint, time=time, diff=diff,
                           maintain_every=maintain_every, on_batch=on_batch)
    writer = input_df.writeStream.foreachBatch(fn).option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def task_output(store: str, name: str, *, consensus: str | None = None):
    """The output updates of continual task ``name`` in the durable catalog at ``store``, as
    far as its history is kept (``colmz.Updates``, consolidated).

    >>> import colmz, tempfile
    >>> d = tempfile.mkdtemp()
    >>> cat = colmz.Catalog(d)
    >>> cat.execute("CREATE TABLE t (k BIGINT); "
    ...             "CREATE CONTINUAL TASK o ON INPUT t AS (INSERT INTO o SELECT k FROM t)")
    >>> cat.append("t", colmz.Updates({"k": [7]}, time=[2], diff=[1]))
    >>> task_output(d, "o").to_pylist()
    [(7, 2, 1)]
    """
    from colmz.arrangement import Arrangement
    from colmz.catalog.store import CatalogStore
    from colmz.storage.url import open_location

    record = CatalogStore(open_location(store, consensus=consensus, create=False)).load()
    if record is None:
        raise FileNotFoundError(f"no colmz catalog at {store!r}")
    objs = {o["name"]: o for o in record["objects"]}
    if name not in objs or objs[name]["kind"] != "continual task":
        raise KeyError(f"no continual task {name!r} in the catalog at {store!r}")
    return Arrangement.open(store, consensus=consensus, name=objs[name]["key"], create=False).read()
