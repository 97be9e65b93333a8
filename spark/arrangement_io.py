"""Spark executors reading and writing a ``colmz.Arrangement``; the driver commits.

Design
------
An arrangement is parts in a blob store plus a metadata record changed by compare-and-set
(``colmz.arrangement``). On Spark the two halves go to different processes:

* **Reading** (:func:`read_parts`): the driver lists the parts of the state it opened
  (``Arrangement.parts()``), each with the check its state recorded (row count, diff sum,
  digest); a DataFrame of those references is spread over the executors, each reads its
  parts from the blob store through colmz (``colmz.arrangement.parts.read_part``), which
  verifies every part against its check (``CorruptPart`` on any difference), and keeps the
  rows a reader must keep (``time >= min_time``). No Hadoop filesystem
  connector is involved, so the same code reads a local directory and an S3 bucket.
* **Writing** (:func:`write_runs`, the one run writer of the batch and the streaming sink):
  each partition of a DataFrame of updates is consolidated and written as one run of parts
  (``colmz.arrangement.runs.write_run``), or one per aligned time range (``split_from``,
  :func:`range_starts`); the task returns
  only the run's description, with each part's check. The driver collects them and commits them in one
  compare-and-set (``Arrangement.append_runs``). Spark's result handling keeps one successful
  attempt per partition, so a retried or speculative task's parts are never committed twice:
  they are unreferenced garbage that ``Arrangement.gc`` collects after its lease.

Times: Spark has no unsigned long, so a part's ``uint64`` times are read as ``long`` and
updates written from Spark are non-negative ``long`` times; a part holding a time beyond
``2**63 - 1`` cannot be read into Spark (:class:`ValueError` naming it).
"""

# No ``from __future__ import annotations``: pyspark reads the UDF's type hints at runtime.
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from colmz.arrangement.part_ref import PartRef
from colmz.arrangement.runs import WrittenRun, write_run
from colmz.order import ColumnSpec

__all__ = ["RUN_SCHEMA", "part_list", "partition_runs", "range_starts", "read_parts", "read_parts_local",
           "spark_schema", "write_runs"]

_SPARK_MAX_TIME = 2**63 - 1
#: The row :func:`write_runs`' tasks return per run written (``WrittenRun.to_dict``).
RUN_SCHEMA = ("keys array<string>, len long, ts_lower long, ts_upper long, size_bytes long, "
               "checks array<array<long>>")
#: The parts a :func:`read_parts` DataFrame spreads over the executors: each key with its
#: recorded check (null fields: a part given as a bare key, read without one).
_PART_SCHEMA = "key string, min_time long, rows long, diff_sum long, digest long"


def spark_schema(schema: Sequence[ColumnSpec], time: str = "time", diff: str = "diff"):
    """The Spark schema of updates with these data columns (time and diff as ``long``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    arrow = pa.schema([pa.field(s.name, s.type) for s in schema]
                      + [pa.field(time, pa.int64(), False), pa.field(diff, pa.int64(), False)])
    return from_arrow_schema(arrow)


def _to_spark_table(u, schema: Sequence[ColumnSpec], key: str) -> pa.Table:
    if len(u) and int(u.time.max()) > _SPARK_MAX_TIME:
        raise ValueError(f"part {key!r} holds time {int(u.time.max())}, beyond Spark's long (2**63-1)")
    cols = [u.column(s.name) for s in schema]
    return pa.Table.from_arrays(
        [*cols, pa.array(u.time.astype(np.int64)), pa.array(u.diff)],
        names=[*(s.name for s in schema), "time", "diff"],
    )


def _part_table(u, schema: Sequence[ColumnSpec], key: str, lo: int) -> pa.Table:
    """The rows of part ``key`` (read as ``u``) with ``time >= lo``, as :func:`_to_spark_table`."""
    table = _to_spark_table(u, schema, key)
    if lo:  # an unsealed part: its rows before the trace's upper are in the trace
        table = table.filter(pa.array(u.time >= np.uint64(lo)))
    return table


def part_list(arrangement) -> list[tuple[PartRef, int]]:
    """``(part, min_time)`` of every part of an arrangement's current state (for
    :func:`read_parts`): ``part`` is the :class:`~colmz.arrangement.part_ref.PartRef` carrying
    the check its state recorded, which every read verifies."""
    return [(PartRef(p.key, p.check), int(p.min_time or 0)) for p in arrangement.parts()]


def _part_row(part: PartRef | str, lo: int) -> tuple:
    key, check = PartRef.of(part)
    if check is None:
        return (key, int(lo), None, None, None)
    return (key, int(lo), check.rows, check.diff_sum, check.digest)


def _row_part(key: str, rows, diff_sum, digest) -> PartRef:
    if rows is None:
        return PartRef(key)
    return PartRef(key, (rows, diff_sum) if digest is None else (rows, diff_sum, digest))


def read_parts(spark, url: str, schema: Sequence[ColumnSpec], parts: Sequence[tuple[PartRef | str, int]], *,
               partitions: int | None = None):
    """The updates in ``parts`` -- ``(part, min_time)`` pairs: rows with ``time >= min_time``
    of the part -- as a DataFrame (:func:`part_list` gives an arrangement's).

    ``part`` is a :class:`~colmz.arrangement.part_ref.PartRef` (the key and the check its state
    or writer recorded: every executor verifies the part it reads against it, and a part
    that differs fails the job with ``CorruptPart``) or a bare key (read with only the checks
    that need no record). ``url`` is the arrangement's store URL (executors open its blob
    store only). The result has the data columns, ``time`` and ``diff`` (both ``long``); an
    empty ``parts`` gives an empty DataFrame of that schema.
    """
    from colmz.arrangement.parts import read_part
    from colmz.storage.url import open_blob

    schema = tuple(schema)
    out_schema = spark_schema(schema)
    rows = [_part_row(p, lo) for p, lo in parts]
    if not rows:
        return spark.createDataFrame([], out_schema)
    n = partitions or min(len(rows), max(1, spark.sparkContext.defaultParallelism))
    refs = spark.createDataFrame(rows, _PART_SCHEMA).repartition(n, "key")

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        blob = open_blob(url)
        for b in batches:
            cols = [b.column(c).to_pylist() for c in ("key", "min_time", "rows", "diff_sum", "digest")]
            for key, lo, n_rows, total, digest in zip(*cols):
                part = _row_part(key, n_rows, total, digest)
                yield from _part_table(read_part(blob, part, schema), schema, key, lo).to_batches()

    return refs.mapInArrow(read, out_schema)


def read_parts_local(url: str, schema: Sequence[ColumnSpec],
                     parts: Sequence[tuple[PartRef | str, int]]) -> pa.Table:
    """:func:`read_parts` in this process, as one ``pyarrow.Table`` (no Spark job): for
    updates that fit in the driver's memory, such as a small job's verification.

    The same rows and columns: the data columns, ``time`` and ``diff`` (``int64``), and the
    same checks (each part verified against the check its reference carries).

    >>> import colmz, tempfile
    >>> from colmz.arrangement.runs import write_run
    >>> from colmz.storage.url import open_blob
    >>> d = tempfile.mkdtemp()
    >>> u = colmz.Updates({"k": ["a", "b"]}, time=[1, 4], diff=[1, 1])
    >>> run = write_run(open_blob(d), u.schema, u, prefix="p/")
    >>> read_parts_local(d, u.schema, [(p, 2) for p in run.parts]).to_pylist()
    [{'k': 'b', 'time': 4, 'diff': 1}]
    """
    from colmz.arrangement.parts import read_parts as read_blob_parts
    from colmz.storage.url import open_blob

    schema = tuple(schema)
    refs = [PartRef.of(p) for p, _ in parts]
    read = read_blob_parts(open_blob(url), refs, schema) if parts else []
    tables = [_part_table(u, schema, r.key, lo) for r, (_, lo), u in zip(refs, parts, read)]
    if not tables:
        arrow = pa.schema([pa.field(s.name, s.type) for s in schema]
                          + [pa.field("time", pa.int64()), pa.field("diff", pa.int64())])
        return arrow.empty_table()
    return pa.concat_tables(tables)


def range_starts(t: np.ndarray, tick: int) -> tuple[np.ndarray, np.ndarray]:
    """The aligned time range ``[start, start + width)`` of each time ``t >= tick``.

    ``width = 2**floor(log2(t - tick + 1))``; ``start = t - t % width``. Near times get narrow
    ranges, far ones wide ranges, so a tick's runs hold little of the far future
    (:func:`write_runs` with ``split_from``).

    >>> s, w = range_starts(np.array([5, 6, 8, 100], np.uint64), 5)
    >>> s.tolist(), w.tolist()
    ([5, 6, 8, 64], [1, 2, 4, 64])
    """
    t = np.asarray(t, dtype=np.uint64)
    d = t - np.uint64(tick) + np.uint64(1)
    k = np.floor(np.log2(d.astype(np.float64))).astype(np.int64)
    # float log2 may round up at exact powers of two minus one: correct both ways
    width = np.left_shift(np.uint64(1), k.astype(np.uint64))
    too_big = width > d
    width[too_big] >>= np.uint64(1)
    too_small = (width << np.uint64(1)) <= d
    width[too_small] <<= np.uint64(1)
    return t - t % width, width


def partition_runs(url: str, schema: Sequence[ColumnSpec], *, prefix: str, owner: str = "",
                   time: str = "time", diff: str = "diff", seqno: int | None = None,
                   split_from: int | None = None):
    """The ``mapInArrow`` function of :func:`write_runs`: a partition's updates in, one
    :data:`RUN_SCHEMA` row per run written out."""
    import colmz
    from colmz.storage.url import open_blob

    schema = tuple(schema)
    names = [s.name for s in schema]
    out_schema = pa.schema([("keys", pa.list_(pa.string())), ("len", pa.int64()), ("ts_lower", pa.int64()),
                            ("ts_upper", pa.int64()), ("size_bytes", pa.int64()),
                            ("checks", pa.list_(pa.list_(pa.int64())))])

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = []
        for b in batches:
            if b.num_rows:
                t = pa.Table.from_batches([b]).select([*names, time, diff])
                cols = {n: (t.column(n).cast(s.type) if t.schema.field(n).type != s.type else t.column(n))
                        for n, s in zip(names, schema)}
                parts.append(colmz.Updates(cols, t.column(time), t.column(diff)))
        if not parts:
            return
        u = colmz.concat(parts)
        if split_from is None:
            pieces = [u]
        else:
            u = colmz.consolidate(u)
            starts, _ = range_starts(u.time, split_from)
            table = u.to_arrow()
            pieces = [colmz.Updates.from_arrow(table.take(pa.array(np.flatnonzero(starts == s))))
                      for s in np.unique(starts)]
        blob = open_blob(url)
        rows = []
        for piece in pieces:
            run = write_run(blob, schema, piece, prefix=prefix, owner=owner, seqno=seqno)
            if run is not None:
                rows.append(run.to_dict())
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=out_schema)

    return write


def write_runs(df, url: str, schema: Sequence[ColumnSpec], *, prefix: str, owner: str = "",
               time: str = "time", diff: str = "diff", seqno: int | None = None,
               split_from: int | None = None) -> list[WrittenRun]:
    """Write each partition of ``df`` (updates: the data columns of ``schema``, ``time``,
    ``diff``) as runs of parts into the store at ``url``; return the runs (an action).

    One run per partition; with ``split_from`` (a time at or before every time of ``df``),
    one run per aligned time range of :func:`range_starts` from it, so a run near
    ``split_from`` holds little of the far future (the streaming sink's layout,
    ``colmz.spark.stream``). Nothing is committed: pass the runs to
    ``Arrangement.append_runs`` on the driver. Every part key carries ``owner``
    (``colmz.arrangement.runs.owned_keys``), so a job that fails before it commits can delete
    what its tasks wrote, failed attempts included. ``seqno`` is the arrangement version the
    driver read (``Arrangement.seqno``): every part records it, so a consensus later restored
    to an older copy is noticed (``colmz.arrangement.identity``).

    This is the one run writer of the Spark jobs: the batch sink (``colmz sink``) and the
    streaming sink both write through it.
    """
    fn = partition_runs(url, schema, prefix=prefix, owner=owner, time=time, diff=diff, seqno=seqno,
                        split_from=split_from)
    rows = df.mapInArrow(fn, RUN_SCHEMA).collect()
    return [WrittenRun.from_dict(r.asDict()) for r in rows]
