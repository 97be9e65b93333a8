"""Correction buffer benchmarks, each beside the naive baseline in the same class.

Workloads follow the shapes of Materialize's ``src/compute/src/sink/correction_workload.rs``,
16 updates per tick:

* ``append``: 16 new distinct rows per tick;
* ``upsert``: 8 keys re-valued per tick (+new value, -previous value);
* ``temporal_filter``: 4 new rows per tick with their retractions at ``t + 2**40``, and the
  previous tick's 4 rows deleted with their far-future retractions moved.

Routines: ``drain`` (pre-filled, then per tick: read before ``t + 1``, feed the read back
negated, advance the since), ``jump`` (pre-filled, one since jump, one read) and ``insert``.

The baseline is the obvious consolidating vector (Materialize's CorrectionV1 without its
future stash): append every insert; on each read sort and consolidate everything with colmz's
own kernel and return the part before the upper. Using the same kernel isolates what the
structure buys.
"""

from __future__ import annotations

import numpy as np

import colmz
from colmz.correction import Correction
from colmz.kernels.consolidate import sort_consolidate

FUTURE = 2**40


def workload(shape: str, ticks: int) -> list[colmz.Updates]:
    """Per-tick batches of 16 updates of an int64 key."""
    out = []
    for t in range(ticks):
        if shape == "append":
            keys = np.arange(t * 16, t * 16 + 16, dtype=np.int64)
            times = np.full(16, t, np.uint64)
            diffs = np.ones(16, np.int64)
        elif shape == "upsert":
            new = np.arange(8, dtype=np.int64) * 1_000_000 + t
            old = new - 1
            keys = np.concatenate([new, old]) if t else np.concatenate([new, new])
            times = np.full(16, t, np.uint64)
            diffs = np.concatenate([np.ones(8, np.int64), -np.ones(8, np.int64)]) if t else np.concatenate(
                [np.ones(8, np.int64), np.zeros(8, np.int64) + 1]
            )
        elif shape == "temporal_filter":
            new = np.arange(4, dtype=np.int64) + t * 4
            prev = new - 4
            keys = np.concatenate([new, new, prev, prev])
            times = np.concatenate([
                np.full(4, t, np.uint64), np.full(4, t + FUTURE, np.uint64),
                np.full(4, t, np.uint64), np.full(4, t - 1 + FUTURE if t else FUTURE, np.uint64),
            ])
            diffs = np.concatenate([np.ones(4), -np.ones(4), -np.ones(4), np.ones(4)]).astype(np.int64)
            if t == 0:
                keys, times, diffs = keys[:8], times[:8], diffs[:8]
        else:
            raise ValueError(shape)
        out.append(colmz.Updates({"k": keys}, time=times, diff=diffs))
    return out


class NaiveBuffer:
    """One consolidating vector: append, and sort + consolidate everything on each read."""

    def __init__(self):
        self.parts = []
        self.since = 0

    def insert(self, u: colmz.Updates, negate: bool = False):
        e = u.encode()
        self.parts.append((e.keys, e.time, -e.diff if negate else e.diff))

    def advance_since(self, s):
        self.since = s

    def updates_before(self, upper):
        if not self.parts:
            return []
        keys = np.concatenate([p[0] for p in self.parts])
        time = np.concatenate([p[1] for p in self.parts])
        diff = np.concatenate([p[2] for p in self.parts])
        k, t, d = sort_consolidate(keys, time, diff, "time", self.since)
        self.parts = [(k, t, d)]
        cut = int(np.searchsorted(t, upper))
        return [colmz.Updates({"k": k[:cut, 0].view(np.int64) ^ np.int64(-(2**63))}, time=t[:cut], diff=d[:cut])]


def _drain(buf, batches, ticks):
    for b in batches:
        buf.insert(b)
    for t in range(ticks):
        for part in buf.updates_before(t + 1):
            if isinstance(buf, NaiveBuffer):
                buf.insert(part, negate=True)
            else:
                buf.insert_negated(part)
        buf.advance_since(t + 1)


class CorrectionWorkloads:
    params = (["append", "upsert", "temporal_filter"], [1024, 4096, 16384], ["colmz", "naive"])
    param_names = ["shape", "ticks", "impl"]
    timeout = 600
    number = 1
    repeat = 1

    def setup(self, shape, ticks, impl):
        # The naive vector's drain is quadratic in ticks: at 16384 it takes tens of seconds.
        self.batches = workload(shape, ticks)
        colmz.warmup()

    def _new(self, impl):
        return Correction() if impl == "colmz" else NaiveBuffer()

    def time_drain(self, shape, ticks, impl):
        _drain(self._new(impl), self.batches, ticks)

    def time_jump(self, shape, ticks, impl):
        buf = self._new(impl)
        for b in self.batches:
            buf.insert(b)
        buf.advance_since(ticks)
        list(buf.updates_before(ticks + 1))

    def time_insert(self, shape, ticks, impl):
        buf = self._new(impl)
        for b in self.batches:
            buf.insert(b)


class TemporalFilterDrain16k:
    """The issue's headline: temporal_filter stepwise drain at 16384 ticks, colmz vs naive.

    ``track_ratio`` runs both over all 16384 ticks in one process and reports naive/colmz
    (the naive loop takes about half a minute: every read re-sorts everything buffered).
    """

    timeout = 900
    number = 1
    repeat = 1

    def setup(self):
        colmz.warmup()
        self.batches = workload("temporal_filter", 16384)

    def time_colmz(self):
        _drain(Correction(), self.batches, 16384)

    def track_ratio(self):
        import time

        t0 = time.perf_counter()
        _drain(Correction(), self.batches, 16384)
        colmz_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        _drain(NaiveBuffer(), self.batches, 16384)
        naive_s = time.perf_counter() - t0
        return naive_s / colmz_s

    track_ratio.unit = "naive/colmz"


def _tick_loop(c: Correction, batches: list[colmz.Updates]) -> None:
    """The sink's loop: tick ``t`` inserts ``batches[t]``, reads before ``t + 1``, feeds the
    read back negated and advances the since to ``t + 1``."""
    for t, b in enumerate(batches):
        c.insert(b)
        c.insert_negated(colmz.concat(c.updates_before(t + 1)))
        c.advance_since(t + 1)


def _sink_loop(c, ticks, rng):
    for t in range(ticks):
        keys = rng.integers(0, 1 << 40, 100)
        c.insert(colmz.Updates({"k": keys}, time=np.full(100, t, np.uint64), diff=np.ones(100, np.int64)))
        for part in c.updates_before(t + 1):
            c.insert_negated(part)
        c.advance_since(t + 1)


class FarFutureMass:
    """A sink loop with 2,000,000 far-future retractions buffered vs none (target <= 1.3x)."""

    params = [[0, 2_000_000]]
    param_names = ["far_future"]
    timeout = 600
    number = 1
    repeat = 3

    def setup(self, far):
        colmz.warmup()
        self.c = Correction()
        if far:
            rng = np.random.default_rng(1)
            self.c.insert(colmz.Updates(
                {"k": rng.integers(0, 1 << 40, far)},
                time=(FUTURE + rng.integers(0, 10**6, far)).astype(np.uint64),
                diff=-np.ones(far, np.int64),
            ))
            list(self.c.updates_before(1))  # flush and route the mass once

    def time_sink_loop(self, far):
        _sink_loop(self.c, 200, np.random.default_rng(2))


class InsertThroughput:
    """Inserting 1e6-update batches of (int64 key, time, diff); target >= 5 M updates/s."""

    timeout = 300

    def setup(self):
        colmz.warmup()
        rng = np.random.default_rng(3)
        n = 1_000_000
        self.batches = [
            colmz.Updates({"k": rng.integers(0, 1 << 40, n)}, time=rng.integers(0, 1000, n).astype(np.uint64),
                          diff=np.ones(n, np.int64))
            for _ in range(4)
        ]

    def time_insert_4e6(self):
        c = Correction()
        for b in self.batches:
            c.insert(b)
        list(c.updates_before(0))  # no-op read: nothing below since 0

    def track_updates_per_second(self):
        import time

        c = Correction()
        t0 = time.perf_counter()
        for b in self.batches:
            c.insert(b)
        return 4_000_000 / (time.perf_counter() - t0) / 1e6

    track_updates_per_second.unit = "M updates/s"


class BytesPerUpdate:
    """Memory held per buffered (int64 key, time, diff) update; target <= 40 bytes."""

    def setup(self):
        colmz.warmup()

    def track_bytes_per_update_inserted(self):
        rng = np.random.default_rng(4)
        c = Correction()
        n = 1_000_000
        c.insert(colmz.Updates({"k": rng.integers(0, 1 << 40, n)}, time=rng.integers(0, 1000, n).astype(np.uint64),
                               diff=np.ones(n, np.int64)))
        list(c.updates_before(0))
        c._flush_stage()
        return c.stats()["bytes"] / len(c)

    track_bytes_per_update_inserted.unit = "bytes/update"

    def track_bytes_per_update_temporal_filter(self):
        # Settles to a few dozen updates (each tick deletes the previous tick's rows), some of
        # them the last read's feedback, which len() counts but is not stored.
        c = Correction()
        _drain(c, workload("temporal_filter", 4096), 4096)
        return c.stats()["bytes"] / max(len(c), 1)

    track_bytes_per_update_temporal_filter.unit = "bytes/update"

    def track_bytes_per_update_far_future_retractions(self):
        # A temporal filter whose rows are never deleted: after 16,384 ticks of the sink's loop
        # the buffer holds 65,536 retractions at far-future times, settled into buckets.
        batches = []
        for t in range(16384):
            k = np.arange(4, dtype=np.int64) + 4 * t
            batches.append(colmz.Updates({"k": np.concatenate([k, k])},
                                         time=np.array([t] * 4 + [t + FUTURE] * 4, np.uint64),
                                         diff=np.array([1] * 4 + [-1] * 4, np.int64)))
        c = Correction()
        _tick_loop(c, batches)
        return c.stats()["bytes"] / len(c)

    track_bytes_per_update_far_future_retractions.unit = "bytes/update"


def temporal_filter_sink(events: int = 1_000_000, ticks: int = 1000, seed: int = 0) -> dict:
    """The whole temporal-filter sink in one process (target: <= 3 s).

    Events ``(key, value, valid_from in [0, ticks), valid_to 1..200 ticks later)``; each tick
    inserts that tick's +1s and their future -1s, reads before the next tick, feeds the read
    back and advances the since.
    """
    rng = np.random.default_rng(seed)
    key = np.arange(events, dtype=np.int64)
    val = rng.integers(0, 1000, events)
    vf = rng.integers(0, ticks, events).astype(np.uint64)
    vt = vf + rng.integers(1, 201, events).astype(np.uint64)
    order = np.argsort(vf, kind="stable")
    key, val, vf, vt = key[order], val[order], vf[order], vt[order]
    bounds = np.searchsorted(vf, np.arange(ticks + 1, dtype=np.uint64))
    c = Correction()
    written = 0
    largest = 0
    for tick in range(ticks):
        a, b = bounds[tick], bounds[tick + 1]
        m = b - a
        c.insert(colmz.Updates(
            {"key": np.concatenate([key[a:b], key[a:b]]), "value": np.concatenate([val[a:b], val[a:b]])},
            time=np.concatenate([vf[a:b], vt[a:b]]),
            diff=np.concatenate([np.ones(m, np.int64), -np.ones(m, np.int64)]),
        ))
        for part in c.updates_before(tick + 1):
            written += len(part)
            c.insert_negated(part)
        c.advance_since(tick + 1)
        largest = max(largest, len(c))
    return {"written": written, "largest": largest, "final": len(c)}


class TemporalFilterSink:
    """1e6 events over 1000 ticks in one process (target <= 3 s; Pathway: 31.5 s)."""

    timeout = 300
    number = 1
    repeat = 3

    def setup(self):
        colmz.warmup()

    def time_sink(self):
        temporal_filter_sink()


class CorrectionTunables:
    """The sweep the defaults (stage 65536, chunk 65536 updates) were chosen from.

    Measured once on the 2-core machine (seconds; sink = ``temporal_filter_sink``, drain =
    temporal_filter stepwise drain at 4096 ticks, insert = 4e6 updates)::

        stage   chunk    sink  drain  insert
        4096    16384    1.39  0.80   0.36
        16384   65536    1.27  0.89   0.17
        65536   65536    1.20  0.87   0.16
        262144  262144   1.43  1.05   0.22
    """

    params = ([4096, 65536, 262144], [16384, 65536, 262144])
    param_names = ["stage_size", "chunk_size"]
    timeout = 600
    number = 1
    repeat = 1

    def setup(self, stage, chunk):
        colmz.warmup()
        self.batches = workload("temporal_filter", 4096)

    def time_drain(self, stage, chunk):
        _drain(Correction(stage_size=stage, chunk_size=chunk), self.batches, 4096)


class CounterBuffer:
    """A plain-Python correction buffer: ``{time: Counter(key -> diff)}`` and a sorted time list.

    Times below the since are folded into the since when it advances; a read walks the sorted
    times below the upper. This is what a sink author writes without colmz, so the ratio to it
    is what colmz buys per tick.
    """

    def __init__(self):
        import collections

        self.counter = collections.Counter
        self.by_time: dict = {}
        self.times: list[int] = []
        self.since = 0

    def insert(self, rows, negate: bool = False):
        import bisect

        since = self.since
        for k, t, d in rows:
            t = max(t, since)
            c = self.by_time.get(t)
            if c is None:
                c = self.by_time[t] = self.counter()
                bisect.insort(self.times, t)
            c[k] += -d if negate else d

    def updates_before(self, upper):
        import bisect

        out = []
        for t in self.times[:bisect.bisect_left(self.times, upper)]:
            out.extend((k, t, d) for k, d in sorted(self.by_time[t].items()) if d)
        return out

    def advance_since(self, s):
        import bisect

        i = bisect.bisect_left(self.times, s)
        if i and self.times[0] < s:
            into = self.by_time.get(s)
            if into is None:
                into = self.by_time[s] = self.counter()
                self.times.insert(i, s)
            for t in self.times[:i]:
                into.update(self.by_time.pop(t))
            for k in [k for k, d in into.items() if not d]:
                del into[k]
            del self.times[:i]
        self.since = s


def _python_rows(batches: list[colmz.Updates]) -> list[list[tuple]]:
    return [b.to_pylist() for b in batches]


class SinkTicks:
    """The sink's tick loop at Materialize's shapes: 16 updates per tick, read, feed back, advance.

    ``time_tick_loop``: per tick insert the tick's 16 updates, read before ``t + 1``, feed the
    read back negated, advance the since to ``t + 1``. ``time_drain_stepwise``: all ticks
    inserted first, then the read/feed back/advance steps -- one ``Correction.drain_stepwise``
    call for colmz, the loop for the dict-of-Counters buffer. Materialize reports about 0.47 s
    per worker for its ``correction_v1`` at 65,536 ticks.
    """

    params = (["append", "upsert", "temporal_filter"], [1024, 65536], ["colmz", "counters"])
    param_names = ["shape", "ticks", "impl"]
    timeout = 900
    number = 1
    repeat = 1

    def setup(self, shape, ticks, impl):
        colmz.warmup()
        self.batches = workload(shape, ticks)
        if impl == "counters":
            self.rows = _python_rows(self.batches)

    def time_tick_loop(self, shape, ticks, impl):
        if impl == "colmz":
            _tick_loop(Correction(), self.batches)
        else:
            c = CounterBuffer()
            for t, rows in enumerate(self.rows):
                c.insert(rows)
                c.insert(c.updates_before(t + 1), negate=True)
                c.advance_since(t + 1)

    def time_drain_stepwise(self, shape, ticks, impl):
        if impl == "colmz":
            c = Correction()
            for b in self.batches:
                c.insert(b)
            c.drain_stepwise(range(1, ticks + 1))
        else:
            c = CounterBuffer()
            for rows in self.rows:
                c.insert(rows)
            for t in range(ticks):
                c.insert(c.updates_before(t + 1), negate=True)
                c.advance_since(t + 1)
