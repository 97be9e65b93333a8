"""Fueled merge spine benchmarks, each beside an eager baseline in the same class.

Workload: ``N`` updates with random 40-bit integer keys inserted as batches of ``B`` updates,
batch ``i`` covering times ``[i, i + 1)``. Parameters: ``(N, B)`` in ``(1e5, 1000)`` and
``(1e6, 1000)``.

The baseline, :class:`EagerSpine`, is the obvious structure without fuel: a binary counter of
sorted, consolidated batches that merges the two newest batches *immediately* whenever the
older is at most twice the newer, so a single insert may cascade through every level. It
merges with the same Numba kernel (:func:`colmz.kernels.fueled.run_merge`) given an unlimited
budget, and pays the same per-insert encoding and sorting, so the ratio isolates what fueling
costs and buys.

Read side by side:

* ``time_insert_*``: total time of all inserts (target: fueled within 1.3x of eager);
* ``track_work_per_update_*``: updates copied by merges per inserted update (bound
  ``2 * log2(N)``);
* ``track_max_insert_work_*``: updates copied by the single most expensive insert (target:
  fueled <= 1/10 of eager);
* ``track_batches_*``: batches held at the end (bound ``2 * log2(N)``);
* ``time_snapshot_*``: reading the collection at the last time from the filled structure.
"""

from __future__ import annotations

import numpy as np

import colmz
from colmz.kernels.consolidate import sort_consolidate
from colmz.kernels.fueled import new_cursor, run_merge
from colmz.kernels.merge import merge_runs
from colmz.spine import Spine
from colmz.updates import Encoded, Updates


class EagerSpine:
    """A spine that merges immediately, without fuel (the baseline).

    ``insert`` sorts and consolidates the batch, pushes it, then merges the two newest
    batches while the older holds at most twice the newer's updates. ``copies`` counts
    updates written by merges, ``max_insert_work`` the most written by one insert.
    """

    def __init__(self):
        self.batches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.schema = None
        self.layout = None
        self.copies = 0
        self.inserted = 0
        self.max_insert_work = 0

    def insert(self, updates: Updates, lower: int, upper: int) -> None:
        e = updates.encode()
        self.schema, self.layout = updates.schema, e.layout
        self.batches.append(sort_consolidate(e.keys, e.time, e.diff, "data", None))
        self.inserted += len(updates)
        work = 0
        while len(self.batches) >= 2 and len(self.batches[-2][1]) <= 2 * len(self.batches[-1][1]):
            b = self.batches.pop()
            a = self.batches.pop()
            n = len(a[1]) + len(b[1])
            out = (np.empty((n, a[0].shape[1]), np.uint64), np.empty(n, np.uint64),
                   np.empty(n, np.int64))
            cur = new_cursor()
            run_merge(a, b, 0, cur, out, 2**62)
            o = int(cur[2])
            self.batches.append((out[0][:o], out[1][:o], out[2][:o]))
            work += o
        self.copies += work
        self.max_insert_work = max(self.max_insert_work, work)

    def snapshot(self, as_of: int) -> Updates:
        runs = [(k[t <= as_of], t[t <= as_of], d[t <= as_of]) for k, t, d in self.batches]
        keys, time, diff = merge_runs(runs, "data", as_of)
        return Updates.decode(Encoded(keys, time, diff, self.layout), self.schema)


def make_batches(n: int, size: int, seed: int = 0) -> list[Updates]:
    rng = np.random.default_rng(seed)
    return [
        colmz.Updates({"k": rng.integers(0, 2**40, size)}, time=np.full(size, i, np.uint64),
                      diff=np.ones(size, np.int64))
        for i in range(n // size)
    ]


def fill(structure, batches) -> None:
    for i, u in enumerate(batches):
        structure.insert(u, i, i + 1)


class SpineInsert:
    """Insert throughput and work counters: fueled spine vs eager baseline."""

    params = ([100_000, 1_000_000], [1000])
    param_names = ["updates", "batch"]
    timeout = 300

    def setup(self, n, size):
        colmz.warmup()
        self.batches = make_batches(n, size)
        # Compile/load the merge kernel once outside the timed region.
        fill(Spine(), self.batches[:4])
        fill(EagerSpine(), self.batches[:4])

    def time_insert_fueled(self, n, size):
        fill(Spine(), self.batches)

    def time_insert_eager(self, n, size):
        fill(EagerSpine(), self.batches)


class SpineWork:
    """Work counters (deterministic; asv records them as tracked values)."""

    params = ([100_000, 1_000_000], [1000])
    param_names = ["updates", "batch"]
    timeout = 300

    def setup_cache(self):
        out = {}
        for n in self.params[0]:
            for size in self.params[1]:
                batches = make_batches(n, size)
                s, e = Spine(), EagerSpine()
                fill(s, batches)
                fill(e, batches)
                st = s.stats()
                out[(n, size)] = {
                    "fueled": (st["merge_copies"] / n, st["max_insert_work"], st["batches"]),
                    "eager": (e.copies / n, e.max_insert_work, len(e.batches)),
                }
        return out

    def track_work_per_update_fueled(self, cache, n, size):
        return cache[(n, size)]["fueled"][0]

    def track_work_per_update_eager(self, cache, n, size):
        return cache[(n, size)]["eager"][0]

    def track_max_insert_work_fueled(self, cache, n, size):
        return cache[(n, size)]["fueled"][1]

    def track_max_insert_work_eager(self, cache, n, size):
        return cache[(n, size)]["eager"][1]

    def track_max_insert_work_ratio(self, cache, n, size):
        return cache[(n, size)]["fueled"][1] / cache[(n, size)]["eager"][1]

    def track_batches_fueled(self, cache, n, size):
        return cache[(n, size)]["fueled"][2]

    def track_batches_eager(self, cache, n, size):
        return cache[(n, size)]["eager"][2]

    track_work_per_update_fueled.unit = "copies/update"
    track_work_per_update_eager.unit = "copies/update"
    track_max_insert_work_fueled.unit = "copies"
    track_max_insert_work_eager.unit = "copies"
    track_max_insert_work_ratio.unit = "fueled/eager"
    track_batches_fueled.unit = "batches"
    track_batches_eager.unit = "batches"


class SpineSnapshot:
    """Reading the whole collection at the last time from a filled structure."""

    params = ([100_000, 1_000_000], [1000])
    param_names = ["updates", "batch"]
    timeout = 300

    def setup(self, n, size):
        colmz.warmup()
        batches = make_batches(n, size)
        self.as_of = len(batches) - 1
        self.fueled = Spine()
        self.eager = EagerSpine()
        fill(self.fueled, batches)
        fill(self.eager, batches)
        self.fueled.snapshot(self.as_of)
        self.eager.snapshot(self.as_of)

    def time_snapshot_fueled(self, n, size):
        self.fueled.snapshot(self.as_of)

    def time_snapshot_eager(self, n, size):
        self.eager.snapshot(self.as_of)
