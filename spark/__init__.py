"""Spark adapters for colmz: sessions, grouped UDFs, the sink and the ``colmz`` CLI.

>>> import colmz.spark
>>> [f for f in ("session", "consolidate", "snapshot", "sink") if f in colmz.spark.__all__]
['session', 'consolidate', 'snapshot', 'sink']

The user-facing names:

* :func:`session` -- a SparkSession whose Python workers can run colmz (local or cluster);
* :func:`consolidate`, :func:`snapshot` -- DataFrame operations over updates;
* :func:`consolidate_fn`, :func:`snapshot_fn`, :func:`bucket_columns` -- grouped functions
  and bucketing for ``groupBy().applyInArrow`` / ``applyInPandas`` in users' pipelines;
* :func:`sink` -- the self-correcting materialized-view sink (:class:`SinkStats` for its
  figures); what the ``colmz sink`` job writes -- a ``colmz.Arrangement`` -- is described in
  ``colmz.spark.sink_store`` (:class:`SinkStoreError` for a store that cannot be used);
* :func:`stream_sink` -- the same view over a streaming DataFrame of events, kept in an
  arrangement exactly once (``colmz.spark.stream``);
* :func:`continual_task` -- a ``CREATE CONTINUAL TASK`` over a DataFrame, per key bucket or on
  the driver (``colmz.spark.continual``).

Modules: ``schemas`` (checks), ``batches`` (Arrow <-> Updates in workers), ``grouped``
(grouped functions), ``frames`` (DataFrame operations), ``sink``/``stream``/``continual``
(jobs), ``sink_store`` (what the sink writes), ``arrangement_io`` (executors reading and
writing an arrangement's parts), ``cli`` (the ``colmz`` command: one module per command).

pyspark is imported only when a function needs it, so ``import colmz.spark`` is cheap.
"""

from colmz.spark.continual import continual_task
from colmz.spark.frames import bucket_columns, consolidate, snapshot
from colmz.spark.grouped import GroupedFunction, consolidate_fn, snapshot_fn
from colmz.spark.schemas import (
    ColumnMissingError,
    InputError,
    check_update_columns,
    check_update_values,
    updates_schema,
)
from colmz.spark.session import default_cache_dir, executor_env, session
from colmz.spark.sink import SinkStats, check_ticks, sink
from colmz.spark.sink_store import SinkStoreError
from colmz.spark.stream import stream_sink

__all__ = [
    "ColumnMissingError",
    "GroupedFunction",
    "InputError",
    "SinkStats",
    "SinkStoreError",
    "bucket_columns",
    "check_ticks",
    "check_update_columns",
    "check_update_values",
    "consolidate",
    "consolidate_fn",
    "continual_task",
    "default_cache_dir",
    "executor_env",
    "session",
    "sink",
    "snapshot",
    "snapshot_fn",
    "stream_sink",
    "updates_schema",
]
