"""Arrow record batches <-> colmz ``Updates`` inside Spark's Python workers, and the
streaming consolidation every consolidating function runs.

Design
------
Everything here works on *streams* of Arrow record batches, the iterator forms of
``mapInArrow`` / ``applyInArrow`` / ``applyInPandas``, so a big group or partition is never
held raw in one piece: batches are consolidated as they arrive into a short list of
consolidated *runs* whose sizes fall geometrically (a newer run is merged into the one before
it while it holds more than half as many updates). Memory is bounded by the consolidated size
of the group plus one flush of raw rows, and every update is merged ``O(log n)`` times.

The geometric runs (:class:`Runs`) re-consolidate decoded ``Updates`` at each level; a version
on colmz's encoded runs belongs in ``colmz`` itself and is not done here.

Times come from Spark ``long`` columns (``< 2**63``), so their ``uint64`` bits read back as
``int64`` unchanged.
"""

# No ``from __future__ import annotations``: kept consistent with the modules whose UDF type
# hints pyspark evaluates.
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

import colmz

__all__ = [
    "FLUSH_ROWS",
    "OUT_BATCH_ROWS",
    "PARTIAL_KEEP_RATIO",
    "PARTIAL_PROBE_ROWS",
    "Runs",
    "as_updates",
    "filter_upper",
    "stream_consolidate",
    "to_batches",
]

#: Raw rows gathered before they are consolidated into a run (bounded memory per call).
FLUSH_ROWS = 1 << 20

#: Rows per output record batch handed back to Spark.
OUT_BATCH_ROWS = 1 << 16

#: Rows a partial consolidation looks at before deciding whether to keep consolidating.
PARTIAL_PROBE_ROWS = 1 << 16

#: A partial (pre-shuffle) consolidation that keeps more than this share of its input
#: switches to pass-through: sorting mostly-distinct updates twice buys nothing.
PARTIAL_KEEP_RATIO = 0.8


def as_updates(batch: pa.RecordBatch, data: Sequence[str], time: str, diff: str) -> colmz.Updates:
    """The ``Updates`` of a record batch with ``data`` columns and ``time``/``diff`` columns.

    >>> b = pa.RecordBatch.from_pydict({"k": ["a"], "time": [1], "diff": [2]})
    >>> len(as_updates(b, ["k"], "time", "diff"))
    1
    """
    return colmz.Updates(
        {n: batch.column(n) for n in data}, batch.column(time), batch.column(diff)
    )


def filter_upper(batch: pa.RecordBatch, time: str, since: int | None, upper: int | None) -> pa.RecordBatch:
    """Keep the updates whose time, advanced to ``since``, is before ``upper``."""
    if upper is None:
        return batch
    if since is not None and since >= upper:
        return batch.slice(0, 0)
    t = batch.column(time).to_numpy(zero_copy_only=False)
    keep = t < upper
    if keep.all():
        return batch
    return batch.filter(pa.array(keep))


def to_batches(
    u: colmz.Updates, data: Sequence[str], time: str, diff: str, types: Sequence[pa.DataType]
) -> Iterator[pa.RecordBatch]:
    """``Updates`` as record batches in Spark's layout: data columns, long time, long diff."""
    arrays = []
    for n, t in zip(data, types):
        c = u.column(n)
        arrays.append(c if c.type == t else c.cast(t))
    # Times came from a Spark long column (< 2**63), so the uint64 bits read as int64 unchanged.
    arrays.append(pa.array(np.asarray(u.time).view(np.int64)))
    arrays.append(pa.array(np.asarray(u.diff)))
    names = [*data, time, diff]
    n = len(u)
    for start in range(0, n, OUT_BATCH_ROWS):
        stop = min(start + OUT_BATCH_ROWS, n)
        yield pa.RecordBatch.from_arrays([a.slice(start, stop - start) for a in arrays], names=names)


class Runs:
    """Consolidates a stream of updates into geometrically shrinking consolidated runs."""

    def __init__(self, since: int | None, flush_rows: int = FLUSH_ROWS):
        self.since = since
        self.flush_rows = flush_rows
        self.runs: list[colmz.Updates] = []
        self.pending: list[colmz.Updates] = []
        self.pending_rows = 0
        self.raw_rows = 0

    def add(self, u: colmz.Updates) -> bool:
        """Add a batch; return True when it triggered a flush."""
        if not len(u):
            return False
        self.pending.append(u)
        self.pending_rows += len(u)
        self.raw_rows += len(u)
        if self.pending_rows >= self.flush_rows:
            self.flush()
            return True
        return False

    def flush(self) -> None:
        if not self.pending:
            return
        run = colmz.consolidate(colmz.concat(self.pending), since=self.since)
        self.pending, self.pending_rows = [], 0
        if len(run):
            self.runs.append(run)
        # Merge while the newest run is more than half the one before: O(log n) runs.
        while len(self.runs) >= 2 and 2 * len(self.runs[-1]) > len(self.runs[-2]):
            b, a = self.runs.pop(), self.runs.pop()
            merged = colmz.consolidate(colmz.concat([a, b]))
            if len(merged):
                self.runs.append(merged)

    def result(self) -> colmz.Updates | None:
        self.flush()
        if not self.runs:
            return None
        if len(self.runs) == 1:
            return self.runs[0]
        return colmz.consolidate(colmz.concat(self.runs))

    def held(self) -> int:
        return self.pending_rows + sum(len(r) for r in self.runs)


def stream_consolidate(
    batches: Iterable[pa.RecordBatch],
    data: Sequence[str],
    time: str,
    diff: str,
    since: int | None,
    upper: int | None,
    partial: bool,
    flush_rows: int = FLUSH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Consolidate a stream of Arrow batches (the body of every consolidating function).

    With ``partial`` the output may still hold duplicates (a later consolidation follows):
    after ``PARTIAL_PROBE_ROWS`` rows and after every flush, if consolidation kept more than
    ``PARTIAL_KEEP_RATIO`` of the rows, the rest of the stream passes through untouched.
    """
    runs = Runs(since, flush_rows)
    types: list[pa.DataType] | None = None
    passthrough = False
    decided = False
    for batch in batches:
        if types is None:
            types = [batch.schema.field(n).type for n in data]
        batch = filter_upper(batch, time, since, upper)
        if not batch.num_rows:
            continue
        if passthrough:
            yield batch.select([*data, time, diff])
            continue
        flushed = runs.add(as_updates(batch, data, time, diff))
        if partial and not decided and runs.raw_rows >= PARTIAL_PROBE_ROWS:
            # Probe early, like Spark's adaptive partial aggregation: consolidate what came
            # so far and keep going only if it shrank.
            decided = True
            if not flushed:
                runs.flush()
            flushed = True
        if partial and flushed and runs.held() > PARTIAL_KEEP_RATIO * runs.raw_rows:
            passthrough = True
            out = runs.result()
            runs = Runs(since, flush_rows)
            if out is not None:
                yield from to_batches(out, data, time, diff, types)
    out = runs.result()
    if out is not None and types is not None:
        yield from to_batches(out, data, time, diff, types)
