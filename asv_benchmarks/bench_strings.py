"""String consolidation benchmarks: colmz beside Arrow and pandas, in one run so ratios are read.

Workload: ``819,200`` updates (persist's benchmark size) of one 40-byte string data column
(the alphabet ``a-z0-9``), ``time`` 0..9 and diffs of +1; ``shape`` ``"distinct"`` draws every
string afresh, ``"repeated"`` draws them from 1,000 values.

* ``RankStrings``: ``colmz.kernels.strings.rank_strings`` (dense byte-order ranks and a
  representative row per rank) beside what colmz did before it and what Arrow offers for the
  same answer: ``dictionary_encode`` + ``array_sort_indices`` of the dictionary, and
  ``array_sort_indices`` of the whole column. On ``repeated`` the kernel numbers values with
  its own hash table, which is slower than Arrow's; ``colmz.consolidate`` therefore hands
  repeated columns to ``dictionary_encode`` and ranks only the dictionary.
* ``ConsolidateStrings``: ``colmz.consolidate`` (``order="data"``) beside Arrow's
  ``Table.group_by(...).aggregate`` + ``sort_by`` and pandas ``groupby(sort=True).sum()``,
  each dropping zero sums -- the same result up to row order within a group's key.

``setup`` runs colmz once at full size, so kernel loading and the first touch of scratch pages
are not in the ``time_`` figures.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import colmz
from colmz.kernels.strings import rank_strings

N = 819_200
VALUE_BYTES = 40
SHAPES = ["distinct", "repeated"]


def strings(n: int, shape: str, seed: int = 0) -> pa.Array:
    """``n`` 40-byte strings over ``a-z0-9``: all fresh, or drawn from 1,000 values."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", np.uint8)
    m = n if shape == "distinct" else 1000
    raw = alphabet[rng.integers(0, len(alphabet), m * VALUE_BYTES)].tobytes()
    offsets = np.arange(0, (m + 1) * VALUE_BYTES, VALUE_BYTES, dtype=np.int32)
    pool = pa.StringArray.from_buffers(m, pa.py_buffer(offsets), pa.py_buffer(raw))
    if shape == "distinct":
        return pool
    return pool.take(pa.array(rng.integers(0, m, n)))


def updates(n: int, shape: str) -> colmz.Updates:
    rng = np.random.default_rng(1)
    return colmz.Updates({"v": strings(n, shape)}, time=rng.integers(0, 10, n).astype(np.uint64),
                         diff=np.ones(n, np.int64), copy=False)


def _buffers(col: pa.Array):
    bufs = col.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, count=len(col) + 1, offset=col.offset * 4)
    return offsets, np.frombuffer(bufs[2], np.uint8), np.zeros(0, np.uint8), col.offset


class RankStrings:
    params = [SHAPES]
    param_names = ["shape"]

    def setup(self, shape):
        self.col = strings(N, shape)
        self.bufs = _buffers(self.col)
        rank_strings(*self.bufs)

    def time_colmz_rank_strings(self, shape):
        rank_strings(*self.bufs)

    def time_arrow_dictionary_sort(self, shape):
        # colmz's ranks before the kernel: distinct values, then their sort order.
        enc = self.col.dictionary_encode()
        pc.array_sort_indices(enc.dictionary)

    def time_arrow_sort_indices(self, shape):
        pc.array_sort_indices(self.col)


class ConsolidateStrings:
    params = [SHAPES]
    param_names = ["shape"]
    timeout = 300

    def setup(self, shape):
        self.u = updates(N, shape)
        self.table = self.u.to_arrow()
        self.df = self.table.to_pandas()
        colmz.consolidate(self.u, order="data")

    def time_colmz_consolidate(self, shape):
        colmz.consolidate(self.u, order="data")

    def time_arrow_group_by(self, shape):
        out = self.table.group_by(["v", "time"]).aggregate([("diff", "sum")])
        out = out.filter(pc.not_equal(out["diff_sum"], 0))
        out.sort_by([("v", "ascending"), ("time", "ascending")])

    def time_pandas_groupby(self, shape):
        s = self.df.groupby(["v", "time"], sort=True)["diff"].sum()
        s[s != 0]

    def track_rows_out(self, shape):
        return len(colmz.consolidate(self.u, order="data"))
